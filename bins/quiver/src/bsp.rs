//! `quiver bsp`: RGraph's BSP analytics, the six LDBC Graphalytics
//! algorithms, with the sequential reference beside them (`--reference`).

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use quiver_bsp::job::{join, BspTask, JobConfig, NodeReport};
use quiver_bsp::{reference, Algorithm, Config, Direction, RunReport, Transport};
use quiver_csr::Graph;
use quiver_io::size::format_bytes;
use quiver_io::ReadOptions;

use crate::job::{JobArgs, LOCAL_NODES};
use crate::progress::Bar;
use crate::report::{print_json, UsageError};
use crate::units::seconds;

/// Flags every algorithm takes.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The .qcsr graph.
    pub graph: PathBuf,
    /// Worker threads (0: one per core).
    #[arg(long, default_value_t = Config::default().threads)]
    pub threads: usize,
    /// Superstep direction: push from active vertices (RGraph's), pull into every vertex
    /// (Gemini's dense mode), or auto: pull when the frontier holds more than |E|/20 edges
    /// (and for BFS, after a pull, while it holds at least |V|/24 vertices). On a directed
    /// graph, BFS and SSSP pull along a transpose of the edges held beside them (twice the
    /// edges' memory), PageRank (whose every superstep pulls) and pull hold the transpose in
    /// place of the edges, and push holds no transpose.
    #[arg(long, value_enum, default_value_t = DirectionArg::Auto)]
    pub direction: DirectionArg,
    /// How nodes message each other: one-sided WRITEs into receive rings (RGraph's), or
    /// two-sided SEND/RECV (the baseline; over --fabric mpi, MPI point-to-point).
    #[arg(long, value_enum, default_value_t = TransportArg::OneSided)]
    pub transport: TransportArg,
    /// Turn off task migration between nodes (the baseline): by default a node that has run
    /// out of its own tasks in a push superstep takes some from another's worklist.
    #[arg(long)]
    pub no_balance: bool,
    /// Run the simple single-thread implementation instead (the COST yardstick and test oracle).
    #[arg(long)]
    pub reference: bool,
    /// Write every vertex's value to FILE as `id value` lines, in the Graphalytics reference
    /// outputs' format (written to a temporary name and renamed when complete).
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// The job: without --nodes, a launcher or another fabric, one process computes alone;
    /// with them, each node owns a chunk of the vertices and messages the others.
    #[command(flatten)]
    pub job: JobArgs,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DirectionArg {
    /// Active vertices write to their neighbours.
    Push,
    /// Every vertex reads from its active in-neighbours.
    Pull,
    /// Per superstep (Beamer's rule): pull when the frontier has over |E|/20 edges, and for
    /// BFS keep pulling while it has at least |V|/24 vertices.
    Auto,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum TransportArg {
    /// One-sided RDMA WRITEs into per-worker receive rings.
    OneSided,
    /// SEND into receives the target keeps posted.
    TwoSided,
}

#[derive(Debug, Subcommand)]
pub enum BspCommand {
    /// Breadth-first search: each vertex's depth from --source along out-edges.
    Bfs {
        #[command(flatten)]
        run: RunArgs,
        /// The root vertex, by its id in the input (a Graphalytics id when the graph keeps them).
        #[arg(long)]
        source: u64,
    },
    /// PageRank for a fixed number of iterations (Graphalytics' definition: rank of vertices
    /// without out-edges is spread over all vertices).
    Pagerank {
        #[command(flatten)]
        run: RunArgs,
        /// Iterations.
        #[arg(long, default_value_t = 20)]
        iterations: u32,
        /// Damping factor.
        #[arg(long, default_value_t = 0.85)]
        damping: f64,
    },
    /// Weakly connected components: each vertex labelled with its component's smallest vertex.
    Wcc {
        #[command(flatten)]
        run: RunArgs,
    },
    /// Single-source shortest paths over the edge weights (needs a weighted graph).
    Sssp {
        #[command(flatten)]
        run: RunArgs,
        /// The root vertex, by its id in the input (a Graphalytics id when the graph keeps them).
        #[arg(long)]
        source: u64,
    },
    /// Community detection by label propagation over in- and out-neighbours.
    Cdlp {
        #[command(flatten)]
        run: RunArgs,
        /// Iterations.
        #[arg(long, default_value_t = 10)]
        iterations: u32,
    },
    /// Local clustering coefficient of every vertex.
    Lcc {
        #[command(flatten)]
        run: RunArgs,
    },
}

/// `quiver bsp ...` as typed by the user.
pub fn bsp(command: BspCommand, json: bool, hidden: bool) -> Result<()> {
    let run = match &command {
        BspCommand::Bfs { run, .. }
        | BspCommand::Pagerank { run, .. }
        | BspCommand::Wcc { run }
        | BspCommand::Sssp { run, .. }
        | BspCommand::Cdlp { run, .. }
        | BspCommand::Lcc { run } => run,
    };
    // In a job the nodes read their parts of the graph (this process is one
    // of them under a launcher); here it only names ids and writes the
    // output, so none of it needs to stay resident. Alone, this process
    // computes on the graph: it reads it into its own memory, on huge
    // pages, which two workers read far faster than the file's mapping
    // (BFS on Kronecker 20, 2 threads: its second pull took 13.8-16.0 ms,
    // against 21.3-33.5 ms over the mapping's small pages).
    let graph = if run.job.wants_job() {
        Graph::open_lazily(&run.graph)
    } else {
        let options = ReadOptions {
            direct: false,
            ..ReadOptions::default()
        };
        Graph::load(&run.graph, &options)
    }
    .with_context(|| format!("opening {}", run.graph.display()))?;
    // Sources are named by the input's ids.
    let dense = |source: u64| {
        graph.dense_id(source).ok_or_else(|| {
            UsageError(format!(
                "--source {source} is not a vertex of {}",
                run.graph.display()
            ))
        })
    };
    let algorithm = match command {
        BspCommand::Bfs { source, .. } => Algorithm::Bfs {
            source: dense(source)?,
        },
        BspCommand::Pagerank {
            iterations,
            damping,
            ..
        } => Algorithm::PageRank {
            damping,
            iterations,
        },
        BspCommand::Wcc { .. } => Algorithm::Wcc,
        BspCommand::Sssp { source, .. } => Algorithm::Sssp {
            source: dense(source)?,
        },
        BspCommand::Cdlp { iterations, .. } => Algorithm::Cdlp { iterations },
        BspCommand::Lcc { .. } => Algorithm::Lcc,
    };
    let what = || {
        format!(
            "{} on {}",
            algorithm.graphalytics_name(),
            run.graph.display()
        )
    };
    let config = Config {
        threads: run.threads,
        direction: match run.direction {
            DirectionArg::Push => Direction::Push,
            DirectionArg::Pull => Direction::Pull,
            DirectionArg::Auto => Direction::Auto,
        },
        transport: match run.transport {
            TransportArg::OneSided => Transport::OneSided,
            TransportArg::TwoSided => Transport::TwoSided,
        },
        migrate_threshold: if run.no_balance {
            None
        } else {
            Config::default().migrate_threshold
        },
    };
    let (values, reports, reference_ns) = if run.reference {
        let started = quiver_run::Stopwatch::start();
        let values = reference::run(&graph, &algorithm).with_context(what)?;
        (values, Vec::new(), Some(started.elapsed_ns()))
    } else if run.job.wants_job() {
        let job = JobConfig {
            graph: std::path::absolute(&run.graph)
                .with_context(|| format!("resolving {}", run.graph.display()))?,
            algorithm,
            config,
        };
        let Some(parts) = run
            .job
            .job(LOCAL_NODES)?
            .run::<BspTask>(&job)
            .with_context(what)?
        else {
            // Another member of the job prints.
            return Ok(());
        };
        let values = join(&parts);
        let reports = parts.into_iter().map(|NodeReport { report, .. }| report);
        (values, reports.collect(), None)
    } else {
        let bar = Bar::new(json || hidden);
        let (values, report) =
            quiver_bsp::run(&graph, &algorithm, &config, &bar).with_context(what)?;
        drop(bar);
        (values, vec![report], None)
    };
    if let Some(path) = &run.output {
        values
            .write_graphalytics(&graph, path)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    let report = RunReport {
        graph: run.graph.clone(),
        vertices: graph.num_vertices(),
        edges: graph.num_edges(),
        nodes: reports,
        reference_ns,
        summary: values.summary(),
        output: run.output.clone(),
    };
    if json {
        return print_json(&report);
    }
    println!("algorithm  {}", algorithm.graphalytics_name());
    println!(
        "graph      {} ({} vertices, {} edges)",
        report.graph.display(),
        report.vertices,
        report.edges
    );
    println!("result     {}", report.summary);
    if let Some(ns) = report.reference_ns {
        println!("reference  {:.3} s on one thread", seconds(ns));
    }
    for node in &report.nodes {
        print_engine(node);
    }
    if let Some(path) = &report.output {
        println!("output     {}", path.display());
    }
    Ok(())
}

fn print_engine(report: &quiver_bsp::Report) {
    let (rank, size) = report.node;
    if size > 1 {
        println!(
            "node {rank}/{size}   vertices {}..{}, {} edges, {} messages ({} bytes) sent, {} tasks migrated in, busy {:.3} s",
            report.owned.start,
            report.owned.end,
            report.edges,
            report.messages,
            report.bytes_sent,
            report.migrated,
            seconds(report.busy_ns)
        );
    }
    let pulls = report
        .supersteps
        .iter()
        .filter(|s| s.direction == Direction::Pull)
        .count();
    if report.supersteps.is_empty() {
        // WCC on a node that owns every vertex: its union-find settled all.
        println!("supersteps 0 (no value had to cross between nodes)");
    } else {
        println!(
            "supersteps {} ({} push, {} pull), {} edges read",
            report.supersteps.len(),
            report.supersteps.len() - pulls,
            pulls,
            report.edges_read
        );
    }
    crate::report::print_times(
        &report.summary,
        "loading (partition, edge layouts, buffers)",
    );
    let known = |bytes: Option<u64>| bytes.map_or_else(|| "unknown".to_owned(), format_bytes);
    println!(
        "memory     {} counted (edge layouts, state, rings), {} peak resident ({} of it code)",
        format_bytes(report.summary.peak_mem_bytes),
        known(report.peak_rss_bytes),
        known(report.code_rss_bytes),
    );
    if report.teps > 0.0 {
        println!("TEPS       {:.3e}", report.teps);
    }
}
