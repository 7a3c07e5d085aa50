//! `quiver demo`: every engine once, briefly, with nothing to start by hand.
//! Each step prints a line or two a newcomer can read, and the command that
//! does the same by hand; `--json` prints one report a line per step. Each
//! step checks its own result (the round trip is exact, PageRank matches
//! the single-thread reference, both gtl layouts return the same lists, the
//! meta query sees the load now and nothing before it) and fails the demo
//! if it does not hold.
//!
//! Files go to a temporary directory removed at the end (`--keep DIR` keeps
//! them). Ctrl-C stops the step running, stops the servers and node
//! processes it started, removes the directory and exits 130.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{bail, ensure, Context, Result};
use quiver_bsp::job::{join, BspTask, JobConfig};
use quiver_bsp::{reference, Algorithm, Values};
use quiver_csr::{
    Blocks, ConvertOptions, EdgeFormat, ExportOptions, Graph, GraphSpec, SortOptions,
};
use quiver_io::size::format_bytes;
use quiver_meta::{Travel, TravelOptions};
use quiver_walker::apps::VisitFrequency;
use serde_json::{json, Value};

use crate::cli::DemoArgs;
use crate::job::{FabricArg, JobArgs};
use crate::meta::spawn_local;
use crate::progress::{self, Bar};
use crate::units::{seconds, ByteSize};

/// Seed of the demo's graph.
const SEED: u64 = 42;
/// Servers of the meta step's cluster.
const META_SERVERS: usize = 2;
/// The provenance query of the meta step: the files user 1000's jobs wrote.
const META_QUERY: &str = r#"v("uid:1000").e(run).v().e(contains).v().e(write).v()"#;

/// What a step hands back: its lines, its command and its figures.
struct Done {
    summary: String,
    by_hand: String,
    result: Value,
}

/// The demo's state between steps.
struct Demo<'a> {
    dir: &'a Path,
    args: &'a DemoArgs,
    json: bool,
    /// The generated graph.
    graph: PathBuf,
    /// It opened (and verified) once, by the first step that reads it.
    opened: std::cell::OnceCell<Graph>,
}

type StepFn = fn(&Demo<'_>) -> Result<Done>;

/// The steps, in order.
const STEPS: &[(&str, StepFn)] = &[
    ("generate", generate),
    ("convert", convert),
    ("walk", walk),
    ("bsp", bsp),
    ("kv", kv),
    ("gtl", gtl),
    ("meta", meta),
];

pub fn demo(args: &DemoArgs, json: bool) -> Result<()> {
    let temp;
    let dir = match &args.keep {
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            dir.clone()
        }
        None => {
            temp = tempfile::Builder::new()
                .prefix("quiver-demo-")
                .tempdir()
                .context("creating a temporary directory for the demo")?;
            temp.path().to_owned()
        }
    };
    let demo = Demo {
        dir: &dir,
        args,
        json,
        graph: dir.join("rmat.qcsr"),
        opened: std::cell::OnceCell::new(),
    };
    let started = quiver_run::Stopwatch::start();
    for (i, (name, run)) in STEPS.iter().enumerate() {
        progress::check_interrupted()?;
        let step_started = quiver_run::Stopwatch::start();
        let done = run(&demo).with_context(|| format!("demo step {} ({name})", i + 1))?;
        let step = i + 1;
        if json {
            // One line a step: the demo's own, which no library reports.
            let line = json!({
                "step": step,
                "name": name,
                "summary": done.summary,
                "by_hand": done.by_hand,
                "seconds": seconds(step_started.elapsed_ns()),
                "result": done.result,
            });
            println!("{line}");
        } else {
            println!("{step}. {}", done.summary);
            println!("   by hand: {}", done.by_hand);
        }
    }
    if !json {
        println!(
            "done in {:.1} s; {}",
            seconds(started.elapsed_ns()),
            if args.keep.is_some() {
                format!("the files are in {}", dir.display())
            } else {
                "its files were in a temporary directory, now removed (--keep DIR keeps them)"
                    .into()
            }
        );
    }
    Ok(())
}

impl Demo<'_> {
    fn bar(&self) -> Bar {
        crate::commands::bar(self.json)
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The generated graph, opened and verified the first time a step
    /// asks for it.
    fn open(&self) -> Result<&Graph> {
        if let Some(graph) = self.opened.get() {
            return Ok(graph);
        }
        let graph = Graph::open(&self.graph)
            .with_context(|| format!("opening {}", self.graph.display()))?;
        Ok(self.opened.get_or_init(|| graph))
    }
}

fn generate(demo: &Demo<'_>) -> Result<Done> {
    let scale = demo.args.scale;
    let spec = GraphSpec::Rmat {
        scale,
        edge_factor: 16,
        probabilities: quiver_csr::GRAPH500,
        permute: true,
    };
    let options = SortOptions {
        undirected: true,
        dedupe: true,
        drop_self_loops: true,
        ..SortOptions::default()
    };
    let report =
        quiver_csr::generate_to_file(&spec, SEED, None, &options, &demo.graph, &demo.bar())?;
    Ok(Done {
        summary: format!(
            "generated an undirected R-MAT graph (scale {scale}, Graph500 parameters, ids permuted): {} vertices, {} edges",
            report.vertices, report.edges
        ),
        by_hand: format!(
            "quiver generate rmat --scale {scale} --undirected --dedupe --drop-self-loops --seed {SEED} -o {}",
            demo.graph.display()
        ),
        result: json!({ "vertices": report.vertices, "edges": report.edges }),
    })
}

fn convert(demo: &Demo<'_>) -> Result<Done> {
    let graph = demo.open()?;
    let text = demo.path("rmat.txt");
    let exported = quiver_csr::export_file(graph, &text, ExportOptions::new(EdgeFormat::Snap))?;
    let converted = demo.path("converted.qcsr");
    let options = ConvertOptions {
        min_vertices: u64::from(graph.num_vertices()),
        sort: SortOptions {
            mem_budget: quiver_csr::MIN_MEM_BUDGET,
            ..SortOptions::default()
        },
        ..ConvertOptions::default()
    };
    let report = quiver_csr::convert(&text, &converted, &options, &demo.bar())?;
    let again = Graph::open(&converted)?;
    again.verify().context("verifying the converted graph")?;
    let identical = again.offsets() == graph.offsets() && again.targets() == graph.targets();
    ensure!(
        identical,
        "the round trip changed the graph: this is a bug in quiver-csr"
    );
    let blocks = Blocks::by_bytes(&again, 256 << 10)?.len();
    let degrees = again.degree_summary();
    Ok(Done {
        summary: format!(
            "exported it as a text edge list ({}) and converted it back within {} of memory ({} sorted runs spilled and merged): identical, every checksum verified; out-degree median {}, max {}",
            format_bytes(exported.bytes),
            format_bytes(quiver_csr::MIN_MEM_BUDGET),
            report.sort.runs_spilled,
            degrees.median,
            degrees.max
        ),
        by_hand: format!(
            "quiver export {g} -o {t} && quiver convert {t} -o {c} --vertices {n} --mem 1MiB && quiver info {c} --verify",
            g = demo.graph.display(),
            t = text.display(),
            c = converted.display(),
            n = graph.num_vertices()
        ),
        result: json!({
            "text_bytes": exported.bytes,
            "runs_spilled": report.sort.runs_spilled,
            "identical": identical,
            "blocks_of_256KiB": blocks,
        }),
    })
}

fn walk(demo: &Demo<'_>) -> Result<Done> {
    let graph = demo.open()?;
    // A quarter of the graph in memory: GraphWalker's scheduling against
    // DrunkardMob's iterations, the same walks.
    let budget = (graph.layout().file_len() / 4).max(1 << 20);
    let source = 1;
    let ppr = VisitFrequency::ppr(source, 2000, 10, 0.15, 3);
    let walk = |mode| {
        let config = quiver_walker::Config {
            mode,
            mem_budget: budget,
            block_size: Some(64 << 10),
            adaptive: false,
            work_dir: demo.dir.to_owned(),
            ..quiver_walker::Config::default()
        };
        quiver_walker::run(&demo.graph, &config, &ppr)
    };
    let graphwalker = walk(quiver_walker::Mode::GraphWalker)?;
    let iteration = walk(quiver_walker::Mode::Iteration)?;
    let top: Vec<String> = graphwalker
        .result
        .top
        .iter()
        .map(|r| format!("{} ({:.3})", r.vertex, r.frequency))
        .collect();
    let (gw, it) = (graphwalker.summary.bytes_read, iteration.summary.bytes_read);
    #[allow(clippy::cast_precision_loss)] // A ratio of byte counts, shown.
    let more = it as f64 / gw.max(1) as f64;
    Ok(Done {
        summary: format!(
            "personalized PageRank from vertex {source}, 2,000 walks out of core with a quarter of the graph in memory: top {}; GraphWalker read {}, DrunkardMob-style iteration {} ({more:.1}x more)",
            top.join(", "),
            format_bytes(gw),
            format_bytes(it)
        ),
        by_hand: format!(
            "quiver walk ppr {} --source {source} --mem {} --block-size 64KiB --fixed-blocks --top-k 3 [--mode iteration]",
            demo.graph.display(),
            ByteSize(budget)
        ),
        result: json!({
            "graphwalker_bytes_read": gw,
            "iteration_bytes_read": it,
            "top": graphwalker.result.top,
        }),
    })
}

fn bsp(demo: &Demo<'_>) -> Result<Done> {
    let graph = demo.open()?;
    let algorithm = Algorithm::PageRank {
        damping: 0.85,
        iterations: 10,
    };
    let nodes = 2;
    let job = JobArgs::local(FabricArg::Tcp, nodes, false).job(nodes)?;
    let config = JobConfig {
        graph: std::path::absolute(&demo.graph)?,
        algorithm,
        config: quiver_bsp::Config::default(),
    };
    let started = quiver_run::Stopwatch::start();
    let parts = job
        .run::<BspTask>(&config)?
        .context("a local job returns every node's report")?;
    let job_ns = started.elapsed_ns();
    let supersteps = parts[0].report.supersteps.len();
    let Values::Reals(ranks) = join(&parts) else {
        bail!("PageRank returned no ranks");
    };
    let Values::Reals(expected) = reference::run(graph, &algorithm)? else {
        bail!("the reference PageRank returned no ranks");
    };
    let difference = ranks
        .iter()
        .zip(&expected)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    ensure!(
        ranks.len() == expected.len() && difference < 1e-9,
        "PageRank on {nodes} nodes differs from the reference by {difference:e}"
    );
    let (top, rank) =
        ranks.iter().enumerate().fold(
            (0, f64::MIN),
            |best, (v, &r)| if r > best.1 { (v, r) } else { best },
        );
    let top = graph.original_id(u32::try_from(top)?);
    Ok(Done {
        summary: format!(
            "PageRank (10 iterations) on {nodes} node processes over tcp, messages by one-sided WRITEs: {supersteps} supersteps in {:.2} s; highest rank {rank:.5} at vertex {top}; the single-thread reference agrees to {difference:.1e}",
            seconds(job_ns)
        ),
        by_hand: format!(
            "quiver bsp pagerank {} --iterations 10 --nodes {nodes} --fabric tcp",
            demo.graph.display()
        ),
        result: json!({
            "nodes": nodes,
            "supersteps": supersteps,
            "max_difference_from_reference": difference,
            "top_vertex": top,
        }),
    })
}

fn kv(demo: &Demo<'_>) -> Result<Done> {
    let graph = demo.open()?;
    let nodes = 8;
    let config = quiver_kv::Config {
        duration: demo.args.kv_duration,
        tick: std::time::Duration::from_millis(250),
        interval: std::time::Duration::from_secs(1),
        ..quiver_kv::Config::default()
    };
    let job = JobArgs::local(FabricArg::Loopback, nodes, true).job(nodes)?;
    let report = quiver_kv::run(graph, &job, &config, &demo.bar())?
        .context("a local job returns every node's report")?;
    let first = report
        .series
        .first()
        .context("the kv run reported no tick")?;
    let before = first.remote_share;
    let after = report.last_interval.remote_share;
    Ok(Done {
        summary: format!(
            "two-hop queries (\"100 friends of 100 friends\") and inserts on {nodes} loopback nodes for {:.0} s, hot values migrating to their readers: remote Gets {:.1}% in the first {:.2} s, {:.1}% in the last interval; {} values moved ({:.2}% of keys), {:.0} ops/s modelled",
            demo.args.kv_duration.as_secs_f64(),
            100.0 * before,
            first.t_s,
            100.0 * after,
            report.keys_moved,
            100.0 * report.keys_moved_share,
            report.modelled_ops_per_s
        ),
        by_hand: format!(
            "quiver kv bench {} --duration {}s --tick 250ms --interval 1s [--policy orig]",
            demo.graph.display(),
            demo.args.kv_duration.as_secs()
        ),
        result: json!({
            "nodes": nodes,
            "remote_share_first_tick": before,
            "remote_share_last_interval": after,
            "keys_moved": report.keys_moved,
            "ops_per_s_modelled": report.modelled_ops_per_s,
        }),
    })
}

fn gtl(demo: &Demo<'_>) -> Result<Done> {
    let graph = demo.open()?;
    // A host cache of a sixteenth of the graph, so that both layouts read
    // from the device.
    let cache_bytes = (graph.layout().file_len() / 16).max(64 << 10);
    let run = |backend| {
        let config = quiver_gtl::RunConfig {
            backend,
            cache_bytes,
            requests: 20_000,
            ..quiver_gtl::RunConfig::default()
        };
        quiver_gtl::run(graph, quiver_gtl::App::RandomReads, &config, &demo.bar())
    };
    let gtl = run(quiver_gtl::Backend::Gtl)?;
    let csr = run(quiver_gtl::Backend::Csr)?;
    let (gtl_answer, csr_answer) = (
        serde_json::to_value(&gtl.result)?,
        serde_json::to_value(&csr.result)?,
    );
    ensure!(
        gtl_answer == csr_answer,
        "the two layouts returned different lists: gtl {gtl_answer}, csr {csr_answer}"
    );
    #[allow(clippy::cast_precision_loss)] // Ratios of counts, shown.
    let ratio = |c: u64, g: u64| c as f64 / g.max(1) as f64;
    Ok(Done {
        summary: format!(
            "{} random GetAdjacencyList calls on a simulated SSD, a {} host cache: GraphSSD's layout read {} pages in {:.1} ms modelled, the CSR file through the FTL {} pages in {:.1} ms ({:.2}x the pages, {:.2}x the time), the same lists. At this size the CSR's row pointers stay in the cache; `cargo xtask bench gtl` runs the paper's regime",
            gtl.requests,
            format_bytes(gtl.cache_bytes),
            gtl.pages_read,
            seconds(gtl.modelled_ns) * 1e3,
            csr.pages_read,
            seconds(csr.modelled_ns) * 1e3,
            ratio(csr.pages_read, gtl.pages_read),
            ratio(csr.modelled_ns, gtl.modelled_ns)
        ),
        by_hand: format!(
            "quiver gtl bench random-reads {} --requests 20000 --cache {}",
            demo.graph.display(),
            ByteSize(cache_bytes)
        ),
        result: json!({
            "requests": gtl.requests,
            "gtl_pages_read": gtl.pages_read,
            "csr_pages_read": csr.pages_read,
            "gtl_modelled_ns": gtl.modelled_ns,
            "csr_modelled_ns": csr.modelled_ns,
            "answer": gtl_answer,
        }),
    })
}

fn meta(demo: &Demo<'_>) -> Result<Done> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(meta_steps(demo))
}

async fn meta_steps(demo: &Demo<'_>) -> Result<Done> {
    let dir = demo.path("meta-cluster");
    let (mut cluster, client) = spawn_local(META_SERVERS, &dir, 0, None, true).await?;
    let vertices = demo.args.meta_vertices;
    let writes = quiver_meta::darshan::generate(vertices, SEED);
    let before = quiver_meta::clock::wall_ns();
    let load = quiver_meta::load::load(
        &client,
        Arc::new(writes),
        quiver_meta::load::LoadConfig::default(),
        &demo.bar(),
    )
    .await?;
    progress::check_interrupted()?;
    let travel = Travel::parse(META_QUERY)?;
    let count =
        |result: &quiver_meta::TravelResult| result.marked.last().map_or(0, |(_, ids)| ids.len());
    let now = client.travel(&travel, TravelOptions::default()).await?;
    let then = client
        .travel(
            &travel,
            TravelOptions {
                as_of: Some(before),
                ..TravelOptions::default()
            },
        )
        .await?;
    cluster.stop();
    let (files_now, files_then) = (count(&now), count(&then));
    ensure!(
        files_now > 0 && files_then == 0,
        "the query found {files_now} files now and {files_then} before the load"
    );
    Ok(Done {
        summary: format!(
            "GraphMeta on {META_SERVERS} servers (free ports, RocksDB each): loaded a Darshan-like graph of {vertices} vertices, {} writes in {:.2} s; the files user 1000's jobs wrote: {files_now} now, {files_then} as of before the load; servers stopped",
            load.acknowledged,
            seconds(load.summary.wall_ns)
        ),
        by_hand: format!(
            "quiver meta cluster up --servers {META_SERVERS} & quiver meta load --cluster meta-cluster/cluster --generate darshan --vertices {vertices} && quiver meta query --cluster meta-cluster/cluster '{META_QUERY}' [--as-of -1m]"
        ),
        result: json!({
            "servers": META_SERVERS,
            "writes": load.acknowledged,
            "writes_per_s": load.writes_per_s,
            "files_now": files_now,
            "files_before_load": files_then,
            "query_ms": seconds(now.ns) * 1e3,
        }),
    })
}
