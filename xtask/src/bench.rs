//! `cargo xtask bench`: end-to-end comparisons, engine against baseline, run
//! as child processes of release builds, each writing `target/bench/<name>.json`.
//! `walker` (in [`walker`]) also writes `target/bench/walker.svg`.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, ensure, Context, Result};
use clap::{Args, ValueEnum};
use quiver_io::size::parse_bytes;
use serde_json::{json, Value};

use crate::report::{self, Row, Target};
use crate::{cargo, workspace_root};

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Which benchmark to run.
    #[arg(value_enum, default_value_t = Which::All)]
    which: Which,
    /// io: size of the test file (on the real disk, in target/bench/data).
    #[arg(long, default_value = "2GiB", value_parser = parse_bytes)]
    size: u64,
    /// io, verbs, walker-systems: repetitions of every method, interleaved (verbs, walker-systems: the median run is kept).
    #[arg(long, default_value_t = 3)]
    reps: u32,
    /// io: 8 MiB blocks per io_uring batch in the sequential runs (bench-io's default if omitted).
    #[arg(long)]
    seq_batch: Option<u32>,
    /// io: random 4 KiB reads per run (bench-io's default if omitted).
    #[arg(long)]
    rand_reads: Option<u32>,
    /// ingest, walker: R-MAT scale of the generated graph (2^scale vertices, 16 edges per vertex).
    #[arg(long, default_value_t = 22)]
    scale: u32,
    /// ingest: memory budget of the conversion (--mem of quiver convert).
    #[arg(long, default_value = "1GiB", value_parser = parse_bytes)]
    mem: u64,
    /// walker: walks of the length-80 raw workload, as a share of |V| (0 < share <= 1).
    #[arg(long, default_value_t = 1.0, value_parser = parse_share)]
    l80_share: f64,
}

fn parse_share(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(x) if x > 0.0 && x <= 1.0 => Ok(x),
        _ => Err(format!("{text:?} is not a share in (0, 1]")),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Which {
    /// quiver-io block loading against dd and pread (bench-io).
    Io,
    /// Edge-list conversion with the release driver: throughput, peak memory.
    Ingest,
    /// The walker engine: GraphWalker against iteration out of core, memory mode against dependent reads.
    Walker,
    /// The walker on the Kronecker graph of scale 20 against other systems' figures.
    WalkerSystems,
    /// quiver-verbs: latency and bandwidth per fabric, tcp against a plain TCP ping-pong.
    Verbs,
    /// All of them.
    All,
}

/// An array of command-line arguments as `OsString`s, from strings and paths alike.
macro_rules! argv {
    ($($arg:expr),* $(,)?) => {
        [$(OsString::from($arg)),*]
    };
}

mod walker;

const EDGE_FACTOR: u32 = 16;
const SEED: u32 = 1;

pub fn run(args: &BenchArgs) -> Result<()> {
    let root = workspace_root();
    let target = target_dir(&root)?;
    let out = target.join("bench");
    let data = out.join("data");
    fs::create_dir_all(&data).with_context(|| format!("creating {}", data.display()))?;
    let bins = build(&root)?;
    if matches!(args.which, Which::Io | Which::All) {
        let report = io(&bins, &data, args)?;
        write_json(&out.join("io.json"), &report)?;
    }
    if matches!(args.which, Which::Ingest | Which::All) {
        let report = ingest(&bins, &data, args)?;
        write_json(&out.join("ingest.json"), &report)?;
    }
    if matches!(args.which, Which::Walker | Which::All) {
        let report = walker::walker(&bins, &data, &out, args)?;
        write_json(&out.join("walker.json"), &report)?;
    }
    if matches!(args.which, Which::WalkerSystems | Which::All) {
        let report = walker::systems(&bins, &data, args.reps)?;
        write_json(&out.join("walker-systems.json"), &report)?;
    }
    if matches!(args.which, Which::Verbs | Which::All) {
        let report = verbs(&bins, args)?;
        write_json(&out.join("verbs.json"), &report)?;
    }
    let table = report::regenerate(&out)?;
    println!("{table}");
    println!(
        "wrote {} and {}",
        out.join("summary.md").display(),
        out.join("ratios.svg").display()
    );
    Ok(())
}

fn target_dir(root: &Path) -> Result<PathBuf> {
    let out = cargo()
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .current_dir(root)
        .stderr(Stdio::inherit())
        .output()
        .context("running cargo metadata")?;
    ensure!(
        out.status.success(),
        "cargo metadata failed ({})",
        out.status
    );
    let meta: Value = serde_json::from_slice(&out.stdout).context("parsing cargo metadata")?;
    let dir = meta["target_directory"]
        .as_str()
        .context("cargo metadata names no target_directory")?;
    Ok(PathBuf::from(dir))
}

/// The release binaries the benchmarks run.
struct Bins {
    quiver: PathBuf,
    bench_io: PathBuf,
    bench_latency: PathBuf,
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

/// Runs a command that prints a JSON report on stdout and parses it.
fn capture_json(program: &Path, args: &[OsString]) -> Result<Value> {
    let stdout = capture(program, args)?;
    serde_json::from_slice(&stdout).with_context(|| {
        format!(
            "parsing the JSON report of {} {}",
            program.display(),
            args.iter()
                .map(|a| a.to_string_lossy())
                .collect::<Vec<_>>()
                .join(" ")
        )
    })
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

fn io(bins: &Bins, data: &Path, args: &BenchArgs) -> Result<Value> {
    let mut argv = Vec::from(argv![
        "run",
        "--size",
        args.size.to_string(),
        "--reps",
        args.reps.to_string(),
        "--dir",
        data,
    ]);
    if let Some(b) = args.seq_batch {
        argv.extend(argv!["--seq-batch", b.to_string()]);
    }
    if let Some(n) = args.rand_reads {
        argv.extend(argv!["--rand-reads", n.to_string()]);
    }
    let mut report = capture_json(&bins.bench_io, &argv)?;
    let (rows, notes) = io_rows(&report)?;
    report["rows"] = serde_json::to_value(rows).context("serialising rows")?;
    report["summary_notes"] = json!(notes);
    Ok(report)
}

fn io_rows(r: &Value) -> Result<(Vec<Row>, Vec<String>)> {
    let batch = num(r, "/config/seq_batch_blocks")?;
    let depth = num(r, "/config/rand_queue_depth")?;
    let mib = num(r, "/file/bytes")? / f64::from(1 << 20);
    let reps = num(r, "/config/reps")?;
    let mut notes = vec![format!(
        "io: {mib:.0} MiB file, {reps} repetitions (median; each method's spread in io.json)"
    )];
    if let Some(list) = r["notes"].as_array() {
        notes.extend(
            list.iter()
                .filter_map(Value::as_str)
                .map(|n| format!("io: {n}")),
        );
    }
    // Whether the "uring" reader really was io_uring with O_DIRECT.
    let uring_ok = r.pointer("/readers/uring/backend") == Some(&json!("uring"))
        && r.pointer("/readers/uring/direct") == Some(&json!(true));
    if !uring_ok {
        notes.push("io: the uring reader fell back (see readers in io.json); its rows do not measure io_uring".into());
    }
    for m in [
        "dd_seq",
        "uring_seq",
        "pread_seq",
        "uring_rand",
        "pread_rand",
    ] {
        let lo = num(r, &format!("/results/{m}/mb_per_s_min"))?;
        let hi = num(r, &format!("/results/{m}/mb_per_s_max"))?;
        if hi > 1.25 * lo {
            notes.push(format!(
                "io: {m} was noisy: {lo:.0} to {hi:.0} MB/s across repetitions"
            ));
        }
    }
    let rows = vec![
        Row::compare(
            "io",
            &format!("sequential 8 MiB blocks, io_uring ({batch} in flight) vs dd bs=4M, MB/s"),
            num(r, "/results/uring_seq/mb_per_s")?,
            num(r, "/results/dd_seq/mb_per_s")?,
            Some(Target::AtLeast(0.90)),
        ),
        Row::compare(
            "io",
            "sequential 8 MiB blocks, pread vs dd bs=4M, MB/s",
            num(r, "/results/pread_seq/mb_per_s")?,
            num(r, "/results/dd_seq/mb_per_s")?,
            None,
        ),
        Row::compare(
            "io",
            &format!("random 4 KiB reads, io_uring (QD {depth}) vs pread (QD 1), IOPS"),
            num(r, "/results/uring_rand/iops")?,
            num(r, "/results/pread_rand/iops")?,
            None,
        ),
    ];
    Ok((rows, notes))
}

fn ingest(bins: &Bins, data: &Path, args: &BenchArgs) -> Result<Value> {
    let scale = args.scale.to_string();
    let stem = format!("rmat-s{scale}-ef{EDGE_FACTOR}-seed{SEED}");
    let graph = data.join(format!("{stem}.qcsr"));
    let text = data.join(format!("{stem}.shuffled.txt"));
    let converted = data.join(format!("{stem}.converted.qcsr"));
    let mut notes = Vec::new();

    // Data made by the driver is written under a temporary name and renamed,
    // so a file that exists is complete; its name carries its parameters.
    let generate = reuse_or(&graph, "ingest", &mut notes, || {
        // The text depends on the graph: never pair a new graph with old text.
        if text.exists() {
            fs::remove_file(&text).with_context(|| format!("removing stale {}", text.display()))?;
        }
        generate_rmat(bins, &graph, args.scale, false)
    })?;
    let export = reuse_or(&text, "ingest", &mut notes, || {
        // Export writes edges sorted by source; real edge lists (and R-MAT's
        // own output) are in no such order, and a sorted input would flatter
        // the sort. Shuffle deterministically, with the graph file as the
        // random source.
        let sorted = data.join(format!("{stem}.sorted.txt"));
        let report = capture_json(
            &bins.quiver,
            &argv!["--json", "export", &graph, "-o", &sorted],
        )?;
        capture(
            Path::new("shuf"),
            &argv![
                format!("--random-source={}", graph.display()),
                "-o",
                &text,
                &sorted,
            ],
        )?;
        fs::remove_file(&sorted).with_context(|| format!("removing {}", sorted.display()))?;
        Ok(report)
    })?;
    let info = capture_json(&bins.quiver, &argv!["--json", "info", &graph])?;

    // The converter reads its input through the page cache: start cold.
    capture(&bins.bench_io, &argv!["drop-cache", &text])?;
    let mem = args.mem.to_string();
    let convert = capture_json(
        &bins.quiver,
        &argv![
            "--json",
            "convert",
            &text,
            "-o",
            &converted,
            "--mem",
            &mem,
            "--vertices",
            (1u64 << args.scale).to_string(),
            "--work-dir",
            &data,
        ],
    )?;

    let edges_in = num(&info, "/edges")?;
    let edges_out = num(&convert, "/edges")?;
    if (edges_in - edges_out).abs() > 0.5 {
        notes.push(format!(
            "ingest: MISMATCH: the converted graph has {edges_out} edges, the generated one {edges_in}"
        ));
    }
    let budget = args.mem as f64;
    let peak = convert.pointer("/peak_mem_bytes").and_then(Value::as_f64);
    let input_bytes = num(&convert, "/input_bytes")?;
    notes.push(format!(
        "ingest: R-MAT scale {scale}, {edges_in} edges, {:.0} MiB of text; {} sorted runs spilled, {} merge passes",
        input_bytes / f64::from(1 << 20),
        convert.pointer("/sort/runs_spilled").unwrap_or(&Value::Null),
        convert.pointer("/sort/merge_passes").unwrap_or(&Value::Null),
    ));
    let mut rows = vec![Row::value(
        "ingest",
        "quiver convert, input MB/s (one thread: per core = total)",
        num(&convert, "/input_mb_per_s")?,
    )];
    match peak {
        Some(peak) => rows.push(Row::compare(
            "ingest",
            "quiver convert, peak memory vs --mem budget, MiB",
            peak / f64::from(1 << 20),
            budget / f64::from(1 << 20),
            Some(Target::AtMost(1.10)),
        )),
        None => notes.push("ingest: the driver could not read its peak memory (no /proc?)".into()),
    }
    rows.push(Row::value(
        "ingest",
        "quiver convert, wall time, s",
        num(&convert, "/wall_ns")? / 1e9,
    ));
    Ok(json!({
        "bench": "ingest",
        "params": {
            "model": "rmat",
            "scale": args.scale,
            "edge_factor": EDGE_FACTOR,
            "seed": SEED,
            "mem_budget_bytes": args.mem,
        },
        "files": { "graph": graph, "text": text, "converted": converted },
        "reused": { "graph": generate.is_null(), "text": export.is_null() },
        "generate": generate,
        "export": export,
        "info": info,
        "convert": convert,
        "rows": rows,
        "summary_notes": notes,
    }))
}

/// Writes the R-MAT graph of `scale` (16 edges per vertex, seed 1) to
/// `graph`: as generated, or `symmetric` (undirected, deduplicated, without
/// self-loops, within a 4 GiB budget), as the walker benchmarks use it.
fn generate_rmat(bins: &Bins, graph: &Path, scale: u32, symmetric: bool) -> Result<Value> {
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
    if symmetric {
        args.extend(argv![
            "--undirected",
            "--dedupe",
            "--drop-self-loops",
            "--mem",
            "4GiB"
        ]);
    }
    capture_json(&bins.quiver, &args)
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

/// `quiver verbs bench` on each fabric: tcp between two processes (`reps`
/// runs, the one with the median READ/ping-pong ratio kept) and loopback
/// with the cost model.
fn verbs(bins: &Bins, args: &BenchArgs) -> Result<Value> {
    let mut tcp_runs = Vec::new();
    for _ in 0..args.reps.max(1) {
        tcp_runs.push(capture_json(
            &bins.quiver,
            &argv!["verbs", "bench", "--nodes", "2", "--ops", "20000", "--json"],
        )?);
    }
    let ratio = |r: &Value| r["read_over_ping_pong"].as_f64().unwrap_or(f64::INFINITY);
    tcp_runs.sort_by(|a, b| ratio(a).total_cmp(&ratio(b)));
    let all_ratios: Vec<f64> = tcp_runs.iter().map(ratio).collect();
    let tcp = tcp_runs.swap_remove(tcp_runs.len() / 2);
    let loopback = capture_json(
        &bins.quiver,
        &argv![
            "verbs",
            "bench",
            "--fabric",
            "loopback",
            "--cost-model",
            "--ops",
            "200000",
            "--json"
        ],
    )?;
    let mpi = mpi_bench(bins)?;
    let find = |r: &Value, op: &str, bytes: u64, depth: u64| -> Result<Value> {
        r["measurements"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|m| m["op"] == op && m["bytes"] == bytes && m["depth"] == depth)
            .cloned()
            .with_context(|| format!("the verbs report has no {op} of {bytes} B at depth {depth}"))
    };
    let mut rows = Vec::new();
    let (read, ping) = (
        find(&tcp, "read", 8, 1)?,
        find(&tcp, "tcp ping-pong", 8, 1)?,
    );
    rows.push(Row::compare(
        "verbs",
        "tcp READ 8 B p50 vs TCP ping-pong p50, µs",
        num(&read, "/p50_us")?,
        num(&ping, "/p50_us")?,
        Some(Target::AtMost(1.5)),
    ));
    let (batch, one) = (find(&tcp, "write", 8, 32)?, find(&tcp, "write", 8, 1)?);
    rows.push(Row::compare(
        "verbs",
        "tcp 8 B WRITEs, batches of 32 vs depth 1, ops/s",
        num(&batch, "/ops_per_s")?,
        num(&one, "/ops_per_s")?,
        Some(Target::AtLeast(5.0)),
    ));
    rows.push(Row::value(
        "verbs",
        "tcp CAS 8 B p50, µs",
        num(&find(&tcp, "cas", 8, 1)?, "/p50_us")?,
    ));
    for (fabric, report) in [("tcp", &tcp), ("loopback", &loopback)] {
        for bytes in [4096u64, 65536] {
            for depth in [1u64, 32] {
                let m = find(report, "write", bytes, depth)?;
                rows.push(Row::value(
                    "verbs",
                    &format!("{fabric} WRITE {} KiB depth {depth}, MB/s", bytes / 1024),
                    num(&m, "/mb_per_s")?,
                ));
            }
        }
    }
    if let Some(mpi) = &mpi {
        for (op, bytes, depth) in [("read", 8, 1), ("cas", 8, 1), ("write", 8, 1)] {
            let m = find(mpi, op, bytes, depth)?;
            rows.push(Row::value(
                "verbs",
                &format!("mpi {} 8 B p50, µs", op.to_uppercase()),
                num(&m, "/p50_us")?,
            ));
        }
        for bytes in [4096u64, 65536] {
            for depth in [1u64, 32] {
                let m = find(mpi, "write", bytes, depth)?;
                rows.push(Row::value(
                    "verbs",
                    &format!("mpi WRITE {} KiB depth {depth}, MB/s", bytes / 1024),
                    num(&m, "/mb_per_s")?,
                ));
            }
        }
    }
    let lread = find(&loopback, "read", 8, 1)?;
    rows.push(Row::value(
        "verbs",
        "loopback READ 8 B p50, µs",
        num(&lread, "/p50_us")?,
    ));
    rows.push(Row::value(
        "verbs",
        "loopback READ 8 B modelled (ConnectX-3), µs",
        num(&lread, "/modelled_us_per_op")?,
    ));
    let notes = vec![format!(
        "verbs: tcp = two node processes on 127.0.0.1 (`quiver verbs bench --nodes 2`), {} runs, READ/ping-pong ratios {:?}, median run shown; \
         the ping-pong polls its socket like a completion queue. Depth 32 = batches of 32 posted at once and drained.",
        all_ratios.len(),
        all_ratios.iter().map(|r| (r * 100.0).round() / 100.0).collect::<Vec<_>>()
    )];
    Ok(
        json!({ "tcp": tcp, "loopback": loopback, "mpi": mpi, "rows": rows, "summary_notes": notes }),
    )
}

/// The mpi fabric between two ranks under `mpirun`, when Open MPI is
/// installed: builds the driver with `--features mpi` for it.
fn mpi_bench(bins: &Bins) -> Result<Option<Value>> {
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
    let mut argv = Vec::from(argv!["-n", "2", "--oversubscribe"]);
    if is_root() {
        argv.extend(argv!["--allow-run-as-root"]);
    }
    argv.extend(argv![
        &bins.quiver,
        "verbs",
        "bench",
        "--fabric",
        "mpi",
        "--ops",
        "20000",
        "--json"
    ]);
    capture_json(&mpirun, &argv).map(Some)
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
