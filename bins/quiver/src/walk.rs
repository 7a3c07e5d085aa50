//! `quiver walk`: GraphWalker's random-walk applications.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use quiver_csr::VertexIds;
use quiver_io::size::format_bytes;

use crate::progress::Bar;
use crate::report::{flagged, print_json, UsageError};
use crate::units::{at_least_one, parse_mem_size, ByteSize};
use quiver_walker::apps::{Domination, RawWalks, SimRank, Triangles, VisitFrequency};
use quiver_walker::{Config, DeadEnd, IoMode, Kind, Mode, Report};
use serde::Serialize;

/// Engine flags every walk application takes.
#[derive(Debug, Args)]
pub struct EngineArgs {
    /// The .qcsr graph.
    pub graph: PathBuf,
    /// Scheduling: graphwalker (the paper's), iteration (DrunkardMob's baseline) or memory (the
    /// reference). Without --block-size, more walks than GraphWalker serves vertex by vertex
    /// (100,000) and a --mem whose cache share holds the whole graph as one block walk it in memory
    /// in graphwalker mode too, as GraphWalker does once every block is cached.
    #[arg(long, value_enum, default_value_t = ModeArg::Graphwalker)]
    pub mode: ModeArg,
    /// Memory for cached blocks, walk pools and walks in flight.
    #[arg(long, default_value_t = ByteSize(Config::default().mem_budget), value_parser = parse_mem_size)]
    pub mem: ByteSize,
    /// Block size. GraphWalker mode groups consecutive blocks of this size per load by the
    /// paper's self-adaptive rule (default 2 MiB); with --fixed-blocks, in iteration mode, or
    /// for Node2Vec walks (which load block pairs), each load is one block (default: the
    /// paper's static rule, 2^(floor(log10 walks)+2) MiB, at most mem/4; for Node2Vec in graphwalker
    /// mode, at most the largest size two blocks of which fit the cache, up to 3/8 of mem).
    #[arg(long)]
    pub block_size: Option<ByteSize>,
    /// Load one block at a time instead of the paper's self-adaptive grouping.
    #[arg(long)]
    pub fixed_blocks: bool,
    /// Read blocks with O_DIRECT through io_uring (direct) or map them from the page cache
    /// (buffered); auto: buffered for a query that reads only the lists it visits, else direct.
    #[arg(long, value_enum, default_value_t = IoArg::Auto)]
    pub io: IoArg,
    /// Worker threads (0: one per core).
    #[arg(long, default_value_t = Config::default().threads)]
    pub threads: usize,
    /// Seed of every random choice.
    #[arg(long, default_value_t = Config::default().seed)]
    pub seed: u64,
    /// Key every draw by (seed, walk id, hop): all modes, thread counts and block sizes walk identically.
    #[arg(long)]
    pub exact: bool,
    /// Probability of loading the block with the slowest walk rather than the fullest.
    #[arg(long, visible_alias = "p", default_value_t = Config::default().p_slowest)]
    pub p_slowest: f64,
    /// Walks buffered per block before spilling to its walk file (fewer, down to 16, when a
    /// --mem with no --block-size cannot hold the pools and a block otherwise).
    #[arg(long, default_value_t = Config::default().pool_capacity)]
    pub pool_capacity: usize,
    /// Below this many live walks, read single vertices instead of blocks (0: never).
    #[arg(long, default_value_t = Config::default().vertex_threshold)]
    pub vertex_threshold: u64,
    /// Directory for walk spill files.
    #[arg(long)]
    pub work_dir: Option<PathBuf>,
    /// Memory mode, first-order walks with at least 4 per cache line of graph data (sparser
    /// ones move in interleaved lanes): graph data per partition that walks are sorted into
    /// each hop, so that a partition stays in a core's cache (about half its L2).
    #[arg(long, default_value_t = ByteSize(Config::default().partition_bytes))]
    pub partition_size: ByteSize,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum ModeArg {
    Graphwalker,
    Iteration,
    Memory,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum IoArg {
    Auto,
    Direct,
    Buffered,
}

/// How walks move and end.
#[derive(Debug, Args)]
pub struct WalkShape {
    /// Choose neighbours in proportion to edge weights.
    #[arg(long)]
    pub weighted: bool,
    /// At a vertex with no out-edges: stop, restart at the source, or jump to a uniform vertex.
    #[arg(long, value_enum, default_value_t = DeadEndArg::Stop)]
    pub dead_end: DeadEndArg,
    /// Node2Vec second-order walks with this return parameter p (with --node2vec-q; default 1).
    #[arg(long)]
    pub node2vec_p: Option<f64>,
    /// Node2Vec second-order walks with this in-out parameter q (with --node2vec-p; default 1).
    #[arg(long)]
    pub node2vec_q: Option<f64>,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum DeadEndArg {
    Stop,
    Restart,
    Jump,
}

#[derive(Debug, Subcommand)]
pub enum WalkCommand {
    /// N walks of length L from uniform random starts (GraphWalker's rawrandomwalks).
    Raw {
        #[command(flatten)]
        engine: EngineArgs,
        #[command(flatten)]
        shape: WalkShape,
        /// Number of walks.
        #[arg(long, default_value_t = 1_000_000, value_parser = at_least_one::<u64>())]
        walks: u64,
        /// Steps per walk.
        #[arg(long, default_value_t = 10)]
        length: u32,
    },
    /// Random walk domination: one walk of length 6 from every vertex; the most visited vertices.
    Rwd {
        #[command(flatten)]
        engine: EngineArgs,
        #[command(flatten)]
        shape: WalkShape,
        /// Steps per walk.
        #[arg(long, default_value_t = 6)]
        length: u32,
        /// How many top vertices to print.
        #[arg(long, default_value_t = 10, value_parser = at_least_one::<usize>())]
        top_k: usize,
    },
    /// Personalized PageRank from a source by visit frequency (2,000 walks, length 10, stop 0.15).
    Ppr {
        #[command(flatten)]
        engine: EngineArgs,
        #[command(flatten)]
        shape: WalkShape,
        /// The source vertex (by the graph's own ids where it has an id map).
        #[arg(long)]
        source: u64,
        /// Number of walks.
        #[arg(long, default_value_t = 2000, value_parser = at_least_one::<u64>())]
        walks: u64,
        /// Longest walk.
        #[arg(long, default_value_t = 10)]
        length: u32,
        /// Chance of stopping at each step.
        #[arg(long, default_value_t = 0.15)]
        stop: f64,
        /// How many top vertices to print.
        #[arg(long, default_value_t = 10, value_parser = at_least_one::<usize>())]
        top_k: usize,
    },
    /// Random walk with restart from a source: visit frequencies.
    Rwr {
        #[command(flatten)]
        engine: EngineArgs,
        /// Edge weights decide steps.
        #[arg(long)]
        weighted: bool,
        /// The source vertex (by the graph's own ids where it has an id map).
        #[arg(long)]
        source: u64,
        /// Number of walks.
        #[arg(long, default_value_t = 2000, value_parser = at_least_one::<u64>())]
        walks: u64,
        /// Steps per walk.
        #[arg(long, default_value_t = 20)]
        length: u32,
        /// Chance of returning to the source at each step.
        #[arg(long, default_value_t = 0.15)]
        restart: f64,
        /// How many top vertices to print.
        #[arg(long, default_value_t = 10, value_parser = at_least_one::<usize>())]
        top_k: usize,
    },
    /// SimRank between two vertices from walk meeting times (2,000 walks each, length 11).
    Simrank {
        #[command(flatten)]
        engine: EngineArgs,
        /// First vertex (by the graph's own ids where it has an id map).
        #[arg(long)]
        a: u64,
        /// Second vertex.
        #[arg(long)]
        b: u64,
        /// Walks from each vertex.
        #[arg(long, default_value_t = 2000, value_parser = at_least_one::<u64>())]
        walks: u64,
        /// Steps per walk.
        #[arg(long, default_value_t = 11)]
        length: u32,
        /// Decay per step.
        #[arg(long, default_value_t = 0.8)]
        decay: f64,
    },
    /// Graphlet concentration: share of 3-step walks that close a triangle (100,000 walks).
    Triangles {
        #[command(flatten)]
        engine: EngineArgs,
        /// Number of walks.
        #[arg(long, default_value_t = 100_000, value_parser = at_least_one::<u64>())]
        walks: u64,
    },
    /// DeepWalk-style corpus: walks from every vertex written one per line to a file.
    Corpus {
        #[command(flatten)]
        engine: EngineArgs,
        #[command(flatten)]
        shape: WalkShape,
        /// Output file (one walk per line, space-separated vertex ids).
        #[arg(short, long)]
        output: PathBuf,
        /// Walks from each vertex.
        #[arg(long, default_value_t = 10)]
        walks_per_vertex: u64,
        /// Steps per walk.
        #[arg(long, default_value_t = 80)]
        length: u32,
    },
}

/// The engine's settings from the flags, checked: a refusal names its
/// flag (each setting is its flag's name).
fn config(engine: &EngineArgs) -> Result<Config> {
    let config = Config {
        mode: match engine.mode {
            ModeArg::Graphwalker => Mode::GraphWalker,
            ModeArg::Iteration => Mode::Iteration,
            ModeArg::Memory => Mode::Memory,
        },
        exact: engine.exact,
        seed: engine.seed,
        threads: engine.threads,
        mem_budget: engine.mem.0,
        block_size: engine.block_size.map(|size| size.0),
        adaptive: !engine.fixed_blocks,
        io: match engine.io {
            IoArg::Auto => IoMode::Auto,
            IoArg::Direct => IoMode::Direct,
            IoArg::Buffered => IoMode::Buffered,
        },
        p_slowest: engine.p_slowest,
        pool_capacity: engine.pool_capacity,
        vertex_threshold: engine.vertex_threshold,
        work_dir: engine
            .work_dir
            .clone()
            .unwrap_or_else(|| Config::default().work_dir),
        partition_bytes: engine.partition_size.0,
    };
    flagged(config.validate())?;
    Ok(config)
}

fn shaped(mut spec: quiver_walker::WalkSpec, shape: &WalkShape) -> quiver_walker::WalkSpec {
    if shape.weighted {
        spec.kind = Kind::Weighted;
    }
    if shape.node2vec_p.is_some() || shape.node2vec_q.is_some() {
        spec.node2vec = Some(quiver_walker::Node2Vec {
            p: shape.node2vec_p.unwrap_or(1.0),
            q: shape.node2vec_q.unwrap_or(1.0),
        });
    }
    spec.dead_end = match shape.dead_end {
        DeadEndArg::Stop => DeadEnd::Stop,
        DeadEndArg::Restart => DeadEnd::Restart,
        DeadEndArg::Jump => DeadEnd::Jump,
    };
    spec
}

/// Runs a walk subcommand and prints its report.
pub fn walk(command: WalkCommand, json: bool, hidden: bool) -> Result<()> {
    let bar = Bar::new(json || hidden);
    // Vertices are named as the graph names them: by the dataset's own ids
    // where it has an id map, in arguments and in reports alike. Read for
    // the commands that take or print vertices (a corpus names them in the
    // walker, which reads the map itself), and no others.
    let graph = command.graph().to_owned();
    let names = match &command {
        WalkCommand::Rwd { .. }
        | WalkCommand::Ppr { .. }
        | WalkCommand::Rwr { .. }
        | WalkCommand::Simrank { .. } => {
            Some(VertexIds::open(&graph).with_context(|| format!("opening {}", graph.display()))?)
        }
        _ => None,
    };
    let named = || {
        names
            .as_ref()
            .expect("the commands with vertices read the names")
    };
    let vertex = |flag: &str, original: u64| {
        named().dense(original).ok_or_else(|| {
            UsageError(format!(
                "{flag} {original} is not a vertex of {}",
                graph.display()
            ))
        })
    };
    let show_top = |o: &quiver_walker::apps::FrequencyOutput| show_top(o, named());
    macro_rules! go {
        ($engine:expr, $app:expr, $show:expr) => {{
            let engine = $engine;
            let app = $app;
            let report =
                quiver_walker::run_with_progress(&engine.graph, &config(&engine)?, &app, &bar)
                    .with_context(|| format!("walking {}", engine.graph.display()))?;
            drop(bar);
            print_report(&report, json, names.as_ref(), $show)
        }};
    }
    match command {
        WalkCommand::Raw {
            engine,
            shape,
            walks,
            length,
        } => {
            let mut app = RawWalks::new(walks, length);
            app.spec = shaped(app.spec, &shape);
            go!(engine, app, |o: &quiver_walker::apps::RawOutput| println!(
                "visits     {}",
                o.visits
            ))
        }
        WalkCommand::Rwd {
            engine,
            shape,
            length,
            top_k,
        } => {
            let mut app = Domination::new(named().num_vertices(), length, top_k);
            app.spec = shaped(app.spec, &shape);
            go!(engine, app, show_top)
        }
        WalkCommand::Ppr {
            engine,
            shape,
            source,
            walks,
            length,
            stop,
            top_k,
        } => {
            let mut app =
                VisitFrequency::ppr(vertex("--source", source)?, walks, length, stop, top_k);
            app.spec = shaped(app.spec, &shape);
            go!(engine, app, show_top)
        }
        WalkCommand::Rwr {
            engine,
            weighted,
            source,
            walks,
            length,
            restart,
            top_k,
        } => {
            let mut app =
                VisitFrequency::rwr(vertex("--source", source)?, walks, length, restart, top_k);
            if weighted {
                app.spec.kind = Kind::Weighted;
            }
            go!(engine, app, show_top)
        }
        WalkCommand::Simrank {
            engine,
            a,
            b,
            walks,
            length,
            decay,
        } => {
            go!(
                engine,
                SimRank::new(vertex("--a", a)?, vertex("--b", b)?, walks, length, decay),
                |o: &quiver_walker::apps::SimRankOutput| println!(
                    "simrank    {:.6} ({} meeting pairs)",
                    o.similarity, o.meeting_pairs
                )
            )
        }
        WalkCommand::Triangles { engine, walks } => {
            go!(
                engine,
                Triangles::new(walks),
                |o: &quiver_walker::apps::TrianglesOutput| println!(
                    "triangles  {:.6} of 3-step walks close a triangle ({} of {})",
                    o.concentration, o.closed, o.walks
                )
            )
        }
        WalkCommand::Corpus {
            engine,
            shape,
            output,
            walks_per_vertex,
            length,
        } => {
            let template = shaped(RawWalks::new(0, length).spec, &shape);
            let engine_mem = engine.mem.0;
            let (walking, max_bytes) = quiver_walker::apps::split_corpus_budget(&config(&engine)?);
            let report = quiver_walker::apps::write_corpus(
                &engine.graph,
                &walking,
                &template,
                walks_per_vertex,
                &output,
                max_bytes,
                &bar,
            )
            .with_context(|| {
                format!(
                    "writing a corpus of {} to {}",
                    engine.graph.display(),
                    output.display()
                )
            })?;
            drop(bar);
            print_report(
                &report,
                json,
                None,
                |o: &quiver_walker::apps::CorpusOutput| {
                    println!(
                    "budget     --mem {} split in halves: one walks, one assembles the rounds' paths",
                    format_bytes(engine_mem)
                );
                    println!(
                        "corpus     {} walks in {} round(s), {} to {}",
                        o.walks,
                        o.rounds,
                        format_bytes(o.bytes),
                        o.path.display()
                    )
                },
            )
        }
    }
}

impl WalkCommand {
    /// The graph the command walks.
    fn graph(&self) -> &Path {
        match self {
            WalkCommand::Raw { engine, .. }
            | WalkCommand::Rwd { engine, .. }
            | WalkCommand::Ppr { engine, .. }
            | WalkCommand::Rwr { engine, .. }
            | WalkCommand::Simrank { engine, .. }
            | WalkCommand::Triangles { engine, .. }
            | WalkCommand::Corpus { engine, .. } => &engine.graph,
        }
    }
}

fn show_top(o: &quiver_walker::apps::FrequencyOutput, names: &VertexIds) {
    println!(
        "visits     {} over {} distinct vertices",
        o.total_visits, o.distinct_vertices
    );
    for (rank, r) in o.top.iter().enumerate() {
        println!(
            "  #{:<3} vertex {:>10}  visits {:>10}  frequency {:.5}",
            rank + 1,
            names.original(r.vertex),
            r.visits,
            r.frequency
        );
    }
}

fn print_report<O: Serialize>(
    report: &Report<O>,
    json: bool,
    names: Option<&VertexIds>,
    show: impl Fn(&O),
) -> Result<()> {
    if json {
        let mut value = serde_json::to_value(report).context("serialising the report")?;
        // The top vertices by the graph's own ids, as the lines print them.
        if let Some((top, names)) = value
            .pointer_mut("/result/top")
            .and_then(serde_json::Value::as_array_mut)
            .zip(names)
        {
            for ranked in top {
                if let Some(v) = ranked["vertex"]
                    .as_u64()
                    .and_then(|v| u32::try_from(v).ok())
                {
                    ranked["vertex"] = names.original(v).into();
                }
            }
        }
        print_json(&value)?;
        return Ok(());
    }
    let secs = report.summary.wall_ns as f64 / 1e9;
    let blocks = if report.block_size == u64::MAX {
        format!(
            " with the whole graph in memory, walks moving {}",
            if report.partition_rounds > 0 {
                "by partition"
            } else {
                "in lanes"
            }
        )
    } else if report.lists_only {
        ", reading only the lists its walks visit, their offsets and pages as needed".to_string()
    } else {
        format!(
            " with {} blocks of at most {}",
            report.blocks,
            format_bytes(report.block_size)
        )
    };
    println!(
        "mode       {:?}{}{}{}{blocks} ({})",
        report.mode,
        if report.exact { ", exact" } else { "" },
        if report.adaptive {
            format!(
                ", adaptive loads of up to {} block(s)",
                report.largest_group
            )
        } else {
            String::new()
        },
        if report.paired { ", block pairs" } else { "" },
        report.io_backend
    );
    println!(
        "walks      {} in {:.2} s: {} steps, {:.3}M steps/s",
        report.walks,
        secs,
        report.steps,
        report.steps_per_sec / 1e6
    );
    if report.walks > 0 && report.steps == 0 {
        println!("note       no walk took a step: each started at a vertex without out-edges");
    }
    println!(
        "i/o        {} block loads ({} read ahead, {} cache hits), {} vertex loads; read {}, wrote {} of walk spills; {:.0} steps per block load",
        report.blocks_loaded,
        report.blocks_read_ahead,
        report.cache_hits,
        report.vertex_loads,
        format_bytes(report.summary.bytes_read),
        format_bytes(report.summary.bytes_written),
        report.steps_per_block_io
    );
    println!(
        "memory     peak {} held of a {} budget ({} of it set aside at most)",
        format_bytes(report.summary.peak_mem_bytes),
        format_bytes(report.mem_budget),
        format_bytes(report.mem_reserved_bytes)
    );
    show(&report.result);
    Ok(())
}
