//! `cargo xtask bench`: end-to-end comparisons, engine against baseline, run
//! as child processes of release builds, each writing `target/bench/<name>.json`
//! (and `summary.md` and `ratios.svg` regenerated from all of them). Every
//! child's JSON report is also appended to `target/bench/runs.jsonl` as it
//! arrives, so a benchmark that fails late keeps the runs it finished.
//!
//! Every benchmark is one module here and one entry of [`BENCHMARKS`]: its
//! name, its help line and its `run` function, which returns the JSON report
//! with its `rows`. Adding a benchmark touches only those two places.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

use anyhow::{bail, ensure, Context as _, Result};
use clap::builder::{PossibleValue, PossibleValuesParser};
use clap::Args;
use quiver_io::size::parse_bytes;
use serde_json::Value;

use crate::report;
use crate::{cargo, target_dir, workspace_root};

/// An array of command-line arguments as `OsString`s, from strings and paths alike.
macro_rules! argv {
    ($($arg:expr),* $(,)?) => {
        [$(OsString::from($arg)),*]
    };
}

mod bsp;
mod bsp_peers;
mod gtl;
mod ingest;
mod io;
mod kv;
mod meta;
mod verbs;
mod walker;
mod walker_peers;
mod walker_query;
mod walker_systems;

/// One benchmark: `cargo xtask bench <name>` runs it and writes its report
/// to `target/bench/<name>.json`.
pub struct Benchmark {
    pub name: &'static str,
    /// One line for `--help`.
    pub help: &'static str,
    pub run: fn(&Context) -> Result<Value>,
}

/// Every benchmark, in the order `all` runs them and the summary lists them.
pub const BENCHMARKS: &[Benchmark] = &[
    Benchmark {
        name: "io",
        help: "quiver-io block loading against dd and pread (bench-io)",
        run: io::run,
    },
    Benchmark {
        name: "ingest",
        help: "Edge-list conversion with the release driver: throughput, peak memory",
        run: ingest::run,
    },
    Benchmark {
        name: "walker",
        help: "The walker engine: GraphWalker against iteration out of core, memory mode against dependent reads",
        run: walker::run,
    },
    Benchmark {
        name: "walker-systems",
        help: "The walker on the Kronecker graph of scale 20 against other systems' figures",
        run: walker_systems::run,
    },
    Benchmark {
        name: "bsp",
        help: "The bsp engine on Kronecker 20: against its reference (speed-up, COST), one-sided against two-sided messaging over tcp and mpi, mpirun beside tcp at 2 and 4 processes, task migration on a skewed graph, strong scaling on Kronecker 22, GAPBS and Gemini when given",
        run: bsp::run,
    },
    Benchmark {
        name: "gtl",
        help: "The gtl engine on R-MAT 18: GraphSSD against the CSR baseline on one simulated SSD, modelled time and pages read",
        run: gtl::run,
    },
    Benchmark {
        name: "kv",
        help: "The kv engine on Kronecker 22, 8 loopback nodes: split+cache against orig, shard, cache, split and ideal (modelled throughput, remote share, keys moved); uniform; 50/50 mix; dynamic; migration speed; tcp",
        run: kv::run,
    },
    Benchmark {
        name: "meta",
        help: "The meta engine: ingest and mdtest on 1 and 4 servers, traversals on R-MAT 16 over 8 servers per partitioner (DIDO against edge-cut, vertex-cut, GIGA+), prefetching, the asynchronous engine, as-of reads; StatComm and StatReads by out-degree on 32 servers (Figs. 12-15)",
        run: meta::run,
    },
    Benchmark {
        name: "verbs",
        help: "quiver-verbs: latency and bandwidth per fabric, tcp against a plain TCP ping-pong",
        run: verbs::run,
    },
];

/// What a benchmark's `run` gets: the release binaries, where to put data
/// and output, and the command line.
pub struct Context<'a> {
    pub bins: &'a Bins,
    /// `target/bench/data`: generated graphs and scratch files, reused across runs.
    pub data: &'a Path,
    /// `target/bench`: reports and charts.
    pub out: &'a Path,
    pub args: &'a BenchArgs,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Which benchmark to run (`all`: every one, in order).
    #[arg(default_value = "all", value_parser = benchmark_names())]
    which: String,
    /// io: size of the test file (on the real disk, in target/bench/data).
    #[arg(long, default_value = "2GiB", value_parser = parse_bytes)]
    pub size: u64,
    /// io, verbs, walker-systems, bsp: repetitions of every method, interleaved (verbs, walker-systems, bsp: the median run is kept; bsp runs BFS three times as many; walker-systems runs at least 5).
    #[arg(long, default_value_t = 3)]
    pub reps: u32,
    /// io: 8 MiB blocks per io_uring batch in the sequential runs (bench-io's default if omitted).
    #[arg(long)]
    pub seq_batch: Option<u32>,
    /// io: random 4 KiB reads per run (bench-io's default if omitted).
    #[arg(long)]
    pub rand_reads: Option<u32>,
    /// ingest, walker: R-MAT scale of the generated graph (2^scale vertices, 16 edges per vertex).
    #[arg(long, default_value_t = 22)]
    pub scale: u32,
    /// ingest: memory budget of the conversion (--mem of quiver convert).
    #[arg(long, default_value = "1GiB", value_parser = parse_bytes)]
    pub mem: u64,
    /// walker: walks of the length-80 raw workload, as a share of |V| (0 < share <= 1).
    #[arg(long, default_value_t = 1.0, value_parser = parse_share)]
    pub l80_share: f64,
    /// walker-systems: GraphWalker's `rawrandomwalks` (its C++ release, built by hand outside
    /// this repository, e.g. with -O3), run beside the engine out of core, alternating, in
    /// the same minutes. Its checkout (three levels above `bin/apps/rawrandomwalks`) is its
    /// GRAPHCHI_ROOT unless that is set. Without it, the table shows a figure from another day.
    #[arg(long)]
    pub graphwalker: Option<PathBuf>,
    /// walker-systems: FlashMob's `deepwalk` (built by hand outside this repository), run
    /// beside memory mode, alternating, in the same minutes. Without it, the table shows a
    /// figure from another day.
    #[arg(long)]
    pub flashmob: Option<PathBuf>,
    /// walker-systems: GraSorw's binary (`build/GraSorw` in its checkout, built by hand
    /// outside this repository), run beside the engine's Node2Vec out of core at its own
    /// p = q = 1. Without it, the table shows a figure from another day.
    #[arg(long)]
    pub grasorw: Option<PathBuf>,
    /// walker-systems: SOWalker's `node2vec` (built by hand outside this repository), run
    /// beside the engine's Node2Vec out of core at its own p = 2, q = 0.5. Without it, the
    /// table shows a figure from another day.
    #[arg(long)]
    pub sowalker: Option<PathBuf>,
    /// walker-systems: ThunderRW's `deepwalk.out` (`build/random_walk/` in its checkout, built
    /// by hand outside this repository, with its `build/toolset/`), run on its own DeepWalk
    /// workload beside memory mode's. Without it, the table shows a figure from another day.
    #[arg(long)]
    pub thunderrw: Option<PathBuf>,
    /// bsp: the directory of GAPBS's `converter`, `pr`, `bfs`, `cc`, `sssp` and `tc` (built by hand outside
    /// this repository with its Makefile), run on the bench's graph with 2 OpenMP threads
    /// beside the engine's one process of 2 threads, alternating, in the same minutes.
    #[arg(long)]
    pub gapbs: Option<PathBuf>,
    /// bsp: a Gemini checkout (github.com/thu-pacman/GeminiGraph, built by hand outside this
    /// repository with its Makefile), whose `toolkits/` PageRank, BFS, CC and SSSP run on
    /// the bench's graph (one process, every core) beside the engine's one process of 2
    /// threads, alternating. SSSP needs `--gapbs` too: it reads the weights GAPBS draws.
    #[arg(long)]
    pub gemini: Option<PathBuf>,
}

/// The accepted benchmark names, with their help, for clap.
fn benchmark_names() -> PossibleValuesParser {
    let all = PossibleValue::new("all").help("Every benchmark, in order");
    PossibleValuesParser::new(
        BENCHMARKS
            .iter()
            .map(|b| PossibleValue::new(b.name).help(b.help))
            .chain([all]),
    )
}

fn parse_share(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(x) if x > 0.0 && x <= 1.0 => Ok(x),
        _ => Err(format!("{text:?} is not a share in (0, 1]")),
    }
}

const EDGE_FACTOR: u32 = 16;
const SEED: u32 = 1;

pub fn run(args: &BenchArgs) -> Result<()> {
    let root = workspace_root();
    let target = target_dir(&root)?;
    let out = target.join("bench");
    let data = out.join("data");
    fs::create_dir_all(&data).with_context(|| format!("creating {}", data.display()))?;
    RUN_LOG.get_or_init(|| out.join("runs.jsonl"));
    let bins = build(&root)?;
    let context = Context {
        bins: &bins,
        data: &data,
        out: &out,
        args,
    };
    for benchmark in BENCHMARKS
        .iter()
        .filter(|b| args.which == "all" || args.which == b.name)
    {
        let report = (benchmark.run)(&context)?;
        write_json(&out.join(format!("{}.json", benchmark.name)), &report)?;
    }
    let table = report::regenerate(&out, BENCHMARKS.iter().map(|b| b.name))?;
    println!("{table}");
    println!(
        "wrote {} and {}",
        out.join("summary.md").display(),
        out.join("ratios.svg").display()
    );
    Ok(())
}

/// The release binaries the benchmarks run.
pub struct Bins {
    pub quiver: PathBuf,
    pub bench_io: PathBuf,
    pub bench_latency: PathBuf,
}

/// Builds the driver and quiver-benches' binaries with `--release` and
/// returns where cargo put them.
fn build(root: &Path) -> Result<Bins> {
    eprintln!("xtask: building the release binaries (quiver, bench-io, bench-latency)");
    let out = cargo()
        .args([
            "build",
            "--release",
            "-p",
            "quiver",
            "-p",
            "quiver-benches",
            "--bins",
            "--message-format=json-render-diagnostics",
        ])
        .current_dir(root)
        .stderr(Stdio::inherit())
        .output()
        .context("running cargo build")?;
    ensure!(
        out.status.success(),
        "cargo build --release failed ({})",
        out.status
    );
    let mut exes = BTreeMap::new();
    for line in out.stdout.split(|&b| b == b'\n') {
        let Ok(msg) = serde_json::from_slice::<Value>(line) else {
            continue;
        };
        if msg["reason"] == "compiler-artifact" {
            if let (Some(name), Some(exe)) =
                (msg["target"]["name"].as_str(), msg["executable"].as_str())
            {
                exes.insert(name.to_owned(), PathBuf::from(exe));
            }
        }
    }
    let mut take = |name: &str| {
        exes.remove(name)
            .with_context(|| format!("cargo build reported no executable named {name}"))
    };
    Ok(Bins {
        quiver: take("quiver")?,
        bench_io: take("bench-io")?,
        bench_latency: take("bench-latency")?,
    })
}

/// Runs `program args`, echoing the command; its stderr passes through and
/// its stdout is returned.
fn capture(program: &Path, args: &[OsString]) -> Result<Vec<u8>> {
    let shown: Vec<String> = args
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let name = program.file_name().map_or_else(
        || program.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    eprintln!("xtask: {name} {}", shown.join(" "));
    let out = Command::new(program)
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("running {}", program.display()))?;
    if !out.status.success() {
        bail!("{name} {} failed ({})", shown.join(" "), out.status);
    }
    Ok(out.stdout)
}

/// `mpirun` for ranks of the driver on this machine (the mpi fabric).
struct Mpi {
    mpirun: PathBuf,
    /// `mpirun` refuses root without `--allow-run-as-root`.
    root: bool,
}

impl Mpi {
    /// Builds the driver with `--features mpi` (at the path [`Bins`]
    /// names) when Open MPI's `mpirun` is on the PATH; `None` without it.
    fn build() -> Result<Option<Mpi>> {
        let Some(mpirun) = which("mpirun") else {
            eprintln!("xtask: no mpirun on PATH; skipping the mpi fabric");
            return Ok(None);
        };
        eprintln!("xtask: building the driver with --features mpi");
        let status = cargo()
            .args(["build", "--release", "-p", "quiver", "--features", "mpi"])
            .current_dir(workspace_root())
            .status()
            .context("running cargo build --features mpi")?;
        ensure!(
            status.success(),
            "cargo build --features mpi failed ({status})"
        );
        Ok(Some(Mpi {
            mpirun,
            root: is_root(),
        }))
    }

    /// `mpirun`'s arguments that start `n` ranks of `driver`, however
    /// many cores there are; the driver's own arguments follow.
    fn ranks(&self, n: u32, driver: &Path) -> Vec<OsString> {
        let mut args = Vec::from(argv!["-n", n.to_string(), "--oversubscribe"]);
        if self.root {
            args.push("--allow-run-as-root".into());
        }
        args.push(driver.into());
        args
    }
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|dir| Path::new(dir).join(program))
        .find(|path| path.is_file())
}

fn is_root() -> bool {
    fs::read_to_string("/proc/self/status").is_ok_and(|status| {
        status
            .lines()
            .find(|l| l.starts_with("Uid:"))
            .and_then(|l| l.split_whitespace().nth(1))
            == Some("0")
    })
}

/// `target/bench/runs.jsonl`: every child's JSON report (benchmark runs,
/// and the probes and generators whose reports they use), appended as it
/// arrives.
static RUN_LOG: OnceLock<PathBuf> = OnceLock::new();

/// Runs a command that prints a JSON report on stdout, parses it and
/// appends it to the run log with its command line and finishing time (a
/// log that cannot be written is reported and the run goes on).
fn capture_json(program: &Path, args: &[OsString]) -> Result<Value> {
    let stdout = capture(program, args)?;
    let command: Vec<String> = std::iter::once(program.as_os_str())
        .chain(args.iter().map(OsString::as_os_str))
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let report: Value = serde_json::from_slice(&stdout)
        .with_context(|| format!("parsing the JSON report of {}", command.join(" ")))?;
    if let Some(log) = RUN_LOG.get() {
        let finished = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let line = serde_json::json!({ "command": command, "finished_unix_s": finished, "report": report });
        let appended = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .and_then(|mut f| f.write_all(format!("{line}\n").as_bytes()));
        if let Err(e) = appended {
            eprintln!("xtask: warning: appending to {}: {e}", log.display());
        }
    }
    Ok(report)
}

fn write_json(path: &Path, value: &Value) -> Result<()> {
    let text = serde_json::to_string_pretty(value).context("serialising a report")?;
    fs::write(path, text + "\n").with_context(|| format!("writing {}", path.display()))
}

/// A number inside a report, by JSON pointer.
fn num(report: &Value, pointer: &str) -> Result<f64> {
    report
        .pointer(pointer)
        .and_then(Value::as_f64)
        .with_context(|| format!("the report has no number at {pointer}"))
}

/// What the benchmarks make of the edges R-MAT draws.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Shape {
    /// As drawn: directed, with parallel edges and self-loops.
    AsDrawn,
    /// Directed, deduplicated, without self-loops.
    Simple,
    /// Undirected (every edge both ways), deduplicated, without
    /// self-loops, as the walker benchmarks use it.
    Symmetric,
}

/// Writes the R-MAT graph of `scale` (16 edges per vertex, seed 1) to
/// `graph` in `shape` (sorted within a 4 GiB budget); ids permuted unless
/// `skewed` (the hubs at the lowest ids).
fn generate_rmat(
    bins: &Bins,
    graph: &Path,
    scale: u32,
    shape: Shape,
    skewed: bool,
) -> Result<Value> {
    // The driver writes under a temporary name and renames: a graph that
    // exists is complete.
    let mut args = Vec::from(argv![
        "--json",
        "generate",
        "rmat",
        "--scale",
        scale.to_string(),
        "--edge-factor",
        EDGE_FACTOR.to_string(),
        "--seed",
        SEED.to_string(),
        "-o",
        graph,
    ]);
    if shape == Shape::Symmetric {
        args.extend(argv!["--undirected"]);
    }
    if shape != Shape::AsDrawn {
        args.extend(argv!["--dedupe", "--drop-self-loops", "--mem", "4GiB"]);
    }
    if skewed {
        args.extend(argv!["--no-permute"]);
    }
    capture_json(&bins.quiver, &args)
}

/// The R-MAT graph of `scale` in `shape`, ids permuted unless `skewed`
/// (`rmat-<u|d|raw><scale>-<perm|skew>.qcsr` in `target/bench/data`,
/// shared by the benchmarks that use it), made unless it exists; returns
/// its path and the generator's report (`null` when reused, with a note
/// saying so).
pub(crate) fn rmat(
    cx: &Context,
    scale: u32,
    shape: Shape,
    skewed: bool,
    bench: &str,
    notes: &mut Vec<String>,
) -> Result<(PathBuf, Value)> {
    let kind = match shape {
        Shape::Symmetric => "u",
        Shape::Simple => "d",
        Shape::AsDrawn => "raw",
    };
    let ids = if skewed { "skew" } else { "perm" };
    let graph = cx.data.join(format!("rmat-{kind}{scale}-{ids}.qcsr"));
    let generate = reuse_or(&graph, bench, notes, || {
        generate_rmat(cx.bins, &graph, scale, shape, skewed)
    })?;
    Ok((graph, generate))
}

/// The symmetric R-MAT graph of `scale`, ids permuted, as [`rmat`] makes
/// it: the graph most benchmarks share.
pub(crate) fn symmetric_rmat(
    cx: &Context,
    scale: u32,
    bench: &str,
    notes: &mut Vec<String>,
) -> Result<(PathBuf, Value)> {
    rmat(cx, scale, Shape::Symmetric, false, bench, notes)
}

/// Runs `make` on `<path>.partial` and renames that to `path`, unless
/// `path` exists already (reused, as by [`reuse_or`]): for a peer's tool,
/// which writes straight to the name it is given, so that a file or
/// directory found is whole.
pub(crate) fn reuse_or_rename(
    path: &Path,
    bench: &str,
    notes: &mut Vec<String>,
    make: impl FnOnce(&Path) -> Result<()>,
) -> Result<()> {
    reuse_or(path, bench, notes, || {
        let mut partial = path.as_os_str().to_owned();
        partial.push(".partial");
        let partial = PathBuf::from(partial);
        make(&partial)?;
        fs::rename(&partial, path)
            .with_context(|| format!("renaming {} to {}", partial.display(), path.display()))?;
        Ok(Value::Null)
    })?;
    Ok(())
}

/// Runs `make` unless `path` exists already, in which case it is reused
/// (and a note says so). Data made by the driver is written under a
/// temporary name and renamed, so a file that exists is complete; its name
/// carries its parameters.
pub(crate) fn reuse_or(
    path: &Path,
    bench: &str,
    notes: &mut Vec<String>,
    make: impl FnOnce() -> Result<Value>,
) -> Result<Value> {
    if path.exists() {
        notes.push(format!(
            "{bench}: reused {} (delete it to regenerate)",
            path.display()
        ));
        eprintln!("xtask: reusing {}", path.display());
        return Ok(Value::Null);
    }
    make()
}
