//! `bench-io`: quiver-io's block loading measured side by side with `dd` and
//! with `pread`, on a file on the real disk, bypassing the page cache.
//!
//! `bench-io run` makes (or reuses) a test file and measures, in each
//! repetition, five methods one after another: `dd iflag=direct bs=4M`,
//! sequential 8 MiB blocks through io_uring and through `pread` (both
//! `O_DIRECT`, `--seq-batch` blocks per `read_batch`), and random 4 KiB reads
//! through io_uring (`--queue-depth` per batch) and one at a time through
//! `pread`. Repetitions rotate the order (ABCDE, BCDEA, CDEAB, ...) so that
//! drift in the disk or the host hits every method alike and no method runs
//! twice in a row (the virtual disks we run on read some runs from a host
//! cache at 2-3x the device's speed, depending on what ran before). The page cache is dropped
//! for the file before every run. Every block read is spot-checked against
//! the deterministic filler, so a fast but wrong read fails the run. The JSON
//! report goes to stdout, progress to stderr.
//!
//! Why 4 blocks per sequential batch (32 MiB in flight): `read_batch` waits
//! for its whole batch, so the queue drains between batches; 4 blocks keep
//! eight 4 MiB device requests in flight (the virtio disk's `max_sectors_kb`
//! is 4096) and make that drain short. On the development VM, batches of 1,
//! 2, 4, 8 and 16 blocks were indistinguishable (1 GiB file, 5 repetitions,
//! io_uring within 5% of pread each time): the disk, not the queue depth,
//! limits sequential reads there. Measure again with `--seq-batch` on new
//! hardware.
//!
//! `bench-io drop-cache FILE...` drops files' clean pages from the page cache,
//! for `cargo xtask bench ingest`.

#![forbid(unsafe_code)]

use std::ffi::OsString;
use std::fs::{self, File};
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};
use clap::{Args, Parser, Subcommand};
use quiver_benches::{fill, fill_word, median};
use quiver_io::size::parse_bytes;
use quiver_io::{
    align_up, drop_page_cache, AlignedBuf, Backend, BackendChoice, IoCounters, ReadFile,
    ReadOptions, ReadRequest, WriteFile, ALIGN,
};
use serde::Serialize;

/// Sequential block size: the block the walker engines load.
const BLOCK: usize = 8 << 20;
/// Seed of the test file's contents.
const FILL_SEED: u64 = 0x5155_4956_4552;
/// Salt separating the random offsets' stream from the file's contents.
const OFFSET_SALT: u64 = 0x0ff5_e75a_17ed;

/// quiver-io block loading against dd and pread, O_DIRECT, page cache dropped.
#[derive(Debug, Parser)]
#[command(name = "bench-io", max_term_width = 100)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Measure dd, io_uring and pread side by side; print a JSON report on stdout.
    Run(RunArgs),
    /// Drop the files' clean pages from the page cache (posix_fadvise DONTNEED).
    DropCache {
        /// Files whose cached pages to drop.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}

#[derive(Debug, Args)]
struct RunArgs {
    /// Size of the test file (rounded up to 4 KiB), e.g. 256MiB, 2GiB.
    #[arg(long, default_value = "2GiB", value_parser = parse_bytes)]
    size: u64,
    /// Directory for the test file; it must be on the disk under test, not a tmpfs.
    #[arg(long, default_value = "target/bench/data")]
    dir: PathBuf,
    /// Repetitions of every method, interleaved.
    #[arg(long, default_value_t = 3)]
    reps: u32,
    /// 8 MiB blocks per read_batch in the sequential runs (all in flight together on io_uring).
    #[arg(long, default_value_t = 4)]
    seq_batch: u32,
    /// Random 4 KiB reads per run.
    #[arg(long, default_value_t = 20_000)]
    rand_reads: u32,
    /// Random reads per io_uring batch, all in flight together.
    #[arg(long, default_value_t = 32)]
    queue_depth: u32,
    /// Seed of the random offsets (repetition r uses seed + r).
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Cmd::Run(args) => run(&args).and_then(|report| {
            let text = serde_json::to_string_pretty(&report).context("serialising the report")?;
            println!("{text}");
            Ok(())
        }),
        Cmd::DropCache { files } => drop_caches(&files),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn drop_caches(files: &[PathBuf]) -> Result<()> {
    for path in files {
        let file = File::open(path).with_context(|| format!("opening {}", path.display()))?;
        drop_page_cache(&file)
            .with_context(|| format!("dropping the page cache of {}", path.display()))?;
    }
    Ok(())
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
enum Method {
    DdSeq,
    UringSeq,
    PreadSeq,
    UringRand,
    PreadRand,
}

const METHODS: [Method; 5] = [
    Method::DdSeq,
    Method::UringSeq,
    Method::PreadSeq,
    Method::UringRand,
    Method::PreadRand,
];

impl Method {
    fn name(self) -> &'static str {
        match self {
            Method::DdSeq => "dd_seq",
            Method::UringSeq => "uring_seq",
            Method::PreadSeq => "pread_seq",
            Method::UringRand => "uring_rand",
            Method::PreadRand => "pread_rand",
        }
    }
}

/// One timed run of one method.
#[derive(Debug, Serialize)]
struct RunRecord {
    rep: u32,
    method: Method,
    bytes: u64,
    seconds: f64,
    mb_per_s: f64,
    /// Reads per second, for the random methods.
    iops: Option<f64>,
    /// quiver-io's counters for this run (not for dd).
    io: Option<IoCounters>,
}

#[derive(Debug, Serialize)]
struct Report {
    bench: &'static str,
    file: FileInfo,
    config: Config,
    /// The readers as actually opened: the backend in use, whether reads
    /// bypass the page cache, and why not, if they fall short.
    readers: Readers,
    /// Per method: median over repetitions, with every run's value.
    results: Results,
    ratios: Ratios,
    runs: Vec<RunRecord>,
    notes: Vec<String>,
}

#[derive(Debug, Serialize)]
struct FileInfo {
    path: PathBuf,
    bytes: u64,
    /// Written by this run (false: reused from an earlier run).
    created: bool,
    create_seconds: Option<f64>,
}

#[derive(Debug, Serialize)]
struct Config {
    reps: u32,
    seq_block_bytes: usize,
    seq_batch_blocks: u32,
    dd_command: String,
    rand_read_bytes: usize,
    rand_reads: u32,
    rand_queue_depth: u32,
    seed: u64,
    order: &'static str,
}

#[derive(Debug, Serialize)]
struct Readers {
    uring: ReaderInfo,
    pread: ReaderInfo,
}

#[derive(Debug, Serialize)]
struct ReaderInfo {
    requested: String,
    backend: Backend,
    direct: bool,
    queue_depth: u32,
    fallback_reason: Option<String>,
}

#[derive(Debug, Serialize)]
struct Results {
    dd_seq: MethodSummary,
    uring_seq: MethodSummary,
    pread_seq: MethodSummary,
    uring_rand: MethodSummary,
    pread_rand: MethodSummary,
}

#[derive(Debug, Serialize)]
struct MethodSummary {
    mb_per_s: f64,
    mb_per_s_min: f64,
    mb_per_s_max: f64,
    mb_per_s_runs: Vec<f64>,
    iops: Option<f64>,
    /// quiver-io counters summed over all repetitions.
    io: Option<IoCounters>,
}

#[derive(Debug, Serialize)]
struct Ratios {
    uring_seq_over_dd: Ratio,
    pread_seq_over_dd: Ratio,
    uring_rand_over_pread_rand: Ratio,
}

#[derive(Debug, Serialize)]
struct Ratio {
    /// Ratio of the medians.
    value: f64,
    /// The ratio within each repetition (the two runs were neighbours).
    per_rep: Vec<f64>,
    /// The value should be at least this.
    target_min: Option<f64>,
    met: Option<bool>,
}

fn run(args: &RunArgs) -> Result<Report> {
    ensure!(args.reps >= 1, "--reps must be at least 1");
    ensure!(args.seq_batch >= 1, "--seq-batch must be at least 1");
    ensure!(args.queue_depth >= 1, "--queue-depth must be at least 1");
    ensure!(args.rand_reads >= 1, "--rand-reads must be at least 1");
    let size = align_up(args.size);
    ensure!(
        size >= BLOCK as u64,
        "--size must be at least one 8 MiB block"
    );
    fs::create_dir_all(&args.dir).with_context(|| format!("creating {}", args.dir.display()))?;
    let path = args.dir.join(format!("io-{size}.bin"));
    let mut notes = Vec::new();
    let create_seconds = ensure_file(&path, size)?;
    if create_seconds.is_none() {
        notes.push(format!("reused the test file {}", path.display()));
    }
    let cache = File::open(&path).with_context(|| format!("opening {}", path.display()))?;

    let seq_batch = to_usize(args.seq_batch);
    let depth = to_usize(args.queue_depth);
    // One ring serves both patterns: deep enough for either batch.
    let ring_depth = args.seq_batch.max(args.queue_depth);
    let uring = open(&path, BackendChoice::Auto, ring_depth)?;
    let pread = open(&path, BackendChoice::Pread, 1)?;
    for (name, f) in [("uring", &uring), ("pread", &pread)] {
        if let Some(reason) = f.fallback_reason() {
            notes.push(format!("the {name} reader falls short: {reason}"));
        }
    }
    if uring.backend() != Backend::Uring {
        notes.push("io_uring is unavailable: the uring runs used pread".into());
    }

    let mut seq_buf = AlignedBuf::zeroed(seq_batch * BLOCK);
    let mut rand_buf = AlignedBuf::zeroed(depth * ALIGN);
    let mut runs = Vec::new();
    for rep in 0..args.reps {
        let offsets = random_offsets(
            args.seed.wrapping_add(u64::from(rep)),
            size,
            args.rand_reads,
        );
        let mut order = METHODS;
        order.rotate_left(to_usize(rep) % METHODS.len());
        for method in order {
            drop_page_cache(&cache)
                .with_context(|| format!("dropping the page cache of {}", path.display()))?;
            let record = match method {
                Method::DdSeq => run_dd(&path, rep),
                Method::UringSeq => run_seq(&uring, &mut seq_buf, rep, method),
                Method::PreadSeq => run_seq(&pread, &mut seq_buf, rep, method),
                Method::UringRand => run_rand(&uring, &mut rand_buf[..], &offsets, rep, method),
                Method::PreadRand => {
                    run_rand(&pread, &mut rand_buf[..ALIGN], &offsets, rep, method)
                }
            }
            .with_context(|| format!("{} run, repetition {}", method.name(), rep + 1))?;
            eprintln!(
                "bench-io: rep {}/{} {:<10} {:>9.1} MB/s{}",
                rep + 1,
                args.reps,
                method.name(),
                record.mb_per_s,
                record
                    .iops
                    .map_or(String::new(), |iops| format!(" {iops:>9.0} IOPS"))
            );
            runs.push(record);
        }
    }

    let results = Results {
        dd_seq: summarise(&runs, Method::DdSeq),
        uring_seq: summarise(&runs, Method::UringSeq),
        pread_seq: summarise(&runs, Method::PreadSeq),
        uring_rand: summarise(&runs, Method::UringRand),
        pread_rand: summarise(&runs, Method::PreadRand),
    };
    let ratios = Ratios {
        uring_seq_over_dd: ratio(&runs, Method::UringSeq, Method::DdSeq, Some(0.90)),
        pread_seq_over_dd: ratio(&runs, Method::PreadSeq, Method::DdSeq, None),
        uring_rand_over_pread_rand: ratio(&runs, Method::UringRand, Method::PreadRand, None),
    };
    Ok(Report {
        bench: "io",
        file: FileInfo {
            path,
            bytes: size,
            created: create_seconds.is_some(),
            create_seconds,
        },
        config: Config {
            reps: args.reps,
            seq_block_bytes: BLOCK,
            seq_batch_blocks: args.seq_batch,
            dd_command: "dd if=FILE of=/dev/null iflag=direct bs=4M".into(),
            rand_read_bytes: ALIGN,
            rand_reads: args.rand_reads,
            rand_queue_depth: args.queue_depth,
            seed: args.seed,
            order: "repetition r runs the methods rotated left by r",
        },
        readers: Readers {
            uring: reader_info(&uring, BackendChoice::Auto, ring_depth),
            pread: reader_info(&pread, BackendChoice::Pread, 1),
        },
        results,
        ratios,
        runs,
        notes,
    })
}

fn to_usize(x: u32) -> usize {
    usize::try_from(x).expect("u32 fits usize on the 64-bit targets Quiver builds for")
}

/// Makes the test file unless a file of the right size is there already.
/// Returns the seconds spent writing it, or `None` if it was reused.
fn ensure_file(path: &Path, size: u64) -> Result<Option<f64>> {
    if fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() == size) {
        eprintln!("bench-io: reusing {}", path.display());
        return Ok(None);
    }
    eprintln!("bench-io: writing {} ({} MiB)", path.display(), size >> 20);
    let started = Instant::now();
    // Written under a temporary name and renamed, so an interrupted write is
    // never mistaken for a finished file.
    let mut temp = path.as_os_str().to_owned();
    temp.push(".partial");
    let temp = PathBuf::from(temp);
    let w = WriteFile::create(&temp)?;
    let mut chunk = vec![0u8; BLOCK];
    let mut offset = 0;
    while offset < size {
        let n = usize::try_from((size - offset).min(BLOCK as u64))
            .expect("at most one block, which fits usize");
        fill(FILL_SEED, offset, &mut chunk[..n]);
        w.write_all_at(offset, &chunk[..n])?;
        offset += n as u64;
    }
    w.sync()?;
    drop(w);
    fs::rename(&temp, path)
        .with_context(|| format!("renaming {} to {}", temp.display(), path.display()))?;
    Ok(Some(started.elapsed().as_secs_f64()))
}

fn open(path: &Path, backend: BackendChoice, queue_depth: u32) -> Result<ReadFile> {
    let opts = ReadOptions {
        backend,
        direct: true,
        queue_depth,
    };
    ReadFile::open(path, &opts)
        .with_context(|| format!("opening {} with backend {backend}", path.display()))
}

fn reader_info(f: &ReadFile, requested: BackendChoice, queue_depth: u32) -> ReaderInfo {
    ReaderInfo {
        requested: requested.to_string(),
        backend: f.backend(),
        direct: f.is_direct(),
        queue_depth,
        fallback_reason: f.fallback_reason().map(str::to_owned),
    }
}

/// `count` 4 KiB-aligned offsets spread uniformly over a file of `size` bytes.
fn random_offsets(seed: u64, size: u64, count: u32) -> Vec<u64> {
    let slots = size / ALIGN as u64;
    (0..u64::from(count))
        .map(|i| fill_word(seed ^ OFFSET_SALT, i) % slots * ALIGN as u64)
        .collect()
}

/// Checks the first word of a block read from `offset` against the filler.
fn check(block: &[u8], offset: u64) -> Result<()> {
    let got = u64::from_le_bytes(block[..8].try_into().expect("blocks hold at least 8 bytes"));
    let want = fill_word(FILL_SEED, offset / 8);
    if got != want {
        bail!(
            "wrong data at offset {offset}: read {got:#018x}, expected {want:#018x} \
             (delete the test file if it predates this bench-io)"
        );
    }
    Ok(())
}

fn record(
    rep: u32,
    method: Method,
    bytes: u64,
    seconds: f64,
    reads: Option<u64>,
    io: Option<IoCounters>,
) -> RunRecord {
    let seconds = seconds.max(1e-9);
    RunRecord {
        rep,
        method,
        bytes,
        seconds,
        mb_per_s: bytes as f64 / 1e6 / seconds,
        iops: reads.map(|n| n as f64 / seconds),
        io,
    }
}

fn run_dd(path: &Path, rep: u32) -> Result<RunRecord> {
    let mut input = OsString::from("if=");
    input.push(path);
    let out = Command::new("dd")
        .arg(input)
        .args(["of=/dev/null", "iflag=direct", "bs=4M"])
        .env("LC_ALL", "C")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .context("running dd")?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(
        out.status.success(),
        "dd failed ({}): {}",
        out.status,
        stderr.trim()
    );
    let (bytes, seconds) = parse_dd(&stderr)?;
    Ok(record(rep, Method::DdSeq, bytes, seconds, None, None))
}

/// Parses dd's summary line, `2147483648 bytes (2.1 GB, 2.0 GiB) copied,
/// 1.07 s, 2.0 GB/s`, into bytes and seconds.
fn parse_dd(stderr: &str) -> Result<(u64, f64)> {
    let line = stderr
        .lines()
        .rev()
        .find(|l| l.contains(" copied, "))
        .with_context(|| format!("no summary line in dd's output: {}", stderr.trim()))?;
    let bytes = line
        .split_whitespace()
        .next()
        .and_then(|w| w.parse::<u64>().ok())
        .with_context(|| format!("no byte count in dd's summary {line:?}"))?;
    let seconds = line
        .split(" copied, ")
        .nth(1)
        .and_then(|rest| rest.split(" s,").next())
        .and_then(|s| s.trim().parse::<f64>().ok())
        .with_context(|| format!("no duration in dd's summary {line:?}"))?;
    Ok((bytes, seconds))
}

/// Reads the whole file in 8 MiB blocks, `buf.len() / BLOCK` per batch.
fn run_seq(f: &ReadFile, buf: &mut AlignedBuf, rep: u32, method: Method) -> Result<RunRecord> {
    let len = f.len();
    let before = f.stats().snapshot();
    let started = Instant::now();
    let mut offset = 0;
    while offset < len {
        let mut end = offset;
        let mut reqs = Vec::with_capacity(buf.len() / BLOCK);
        for chunk in buf.chunks_mut(BLOCK) {
            if end >= len {
                break;
            }
            let n = usize::try_from((len - end).min(BLOCK as u64))
                .expect("at most one block, which fits usize");
            reqs.push(ReadRequest {
                offset: end,
                buf: &mut chunk[..n],
            });
            end += n as u64;
        }
        f.read_batch(&mut reqs)?;
        drop(reqs);
        for (block, at) in buf.chunks(BLOCK).zip((offset..end).step_by(BLOCK)) {
            check(block, at)?;
        }
        offset = end;
    }
    let seconds = started.elapsed().as_secs_f64();
    black_box(&buf[..]);
    let io = f.stats().snapshot().since(&before);
    Ok(record(rep, method, len, seconds, None, Some(io)))
}

/// Reads 4 KiB at each offset, `buf.len() / ALIGN` reads per batch (one at a
/// time when `buf` holds one block).
fn run_rand(
    f: &ReadFile,
    buf: &mut [u8],
    offsets: &[u64],
    rep: u32,
    method: Method,
) -> Result<RunRecord> {
    let per_batch = buf.len() / ALIGN;
    let before = f.stats().snapshot();
    let started = Instant::now();
    for batch in offsets.chunks(per_batch) {
        let mut reqs: Vec<ReadRequest<'_>> = buf
            .chunks_mut(ALIGN)
            .zip(batch)
            .map(|(chunk, &offset)| ReadRequest { offset, buf: chunk })
            .collect();
        f.read_batch(&mut reqs)?;
        drop(reqs);
        for (block, &at) in buf.chunks(ALIGN).zip(batch) {
            check(block, at)?;
        }
    }
    let seconds = started.elapsed().as_secs_f64();
    black_box(&buf[..]);
    let io = f.stats().snapshot().since(&before);
    let reads = offsets.len() as u64;
    Ok(record(
        rep,
        method,
        reads * ALIGN as u64,
        seconds,
        Some(reads),
        Some(io),
    ))
}

fn of(runs: &[RunRecord], method: Method) -> impl Iterator<Item = &RunRecord> {
    runs.iter().filter(move |r| r.method == method)
}

fn summarise(runs: &[RunRecord], method: Method) -> MethodSummary {
    let mbs: Vec<f64> = of(runs, method).map(|r| r.mb_per_s).collect();
    let iops: Vec<f64> = of(runs, method).filter_map(|r| r.iops).collect();
    let io = of(runs, method)
        .filter_map(|r| r.io)
        .reduce(|a, b| IoCounters {
            read_calls: a.read_calls + b.read_calls,
            read_bytes: a.read_bytes + b.read_bytes,
            write_calls: a.write_calls + b.write_calls,
            write_bytes: a.write_bytes + b.write_bytes,
        });
    MethodSummary {
        mb_per_s: median(&mbs),
        mb_per_s_min: mbs.iter().copied().fold(f64::INFINITY, f64::min),
        mb_per_s_max: mbs.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        mb_per_s_runs: mbs,
        iops: (!iops.is_empty()).then(|| median(&iops)),
        io,
    }
}

fn ratio(runs: &[RunRecord], engine: Method, baseline: Method, target_min: Option<f64>) -> Ratio {
    let e: Vec<f64> = of(runs, engine).map(|r| r.mb_per_s).collect();
    let b: Vec<f64> = of(runs, baseline).map(|r| r.mb_per_s).collect();
    let value = median(&e) / median(&b);
    Ratio {
        value,
        per_rep: e.iter().zip(&b).map(|(e, b)| e / b).collect(),
        target_min,
        met: target_min.map(|t| value >= t),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_dd_summary() {
        let text = "512+0 records in\n512+0 records out\n\
                    2147483648 bytes (2.1 GB, 2.0 GiB) copied, 1.06977 s, 2.0 GB/s\n";
        let (bytes, seconds) = parse_dd(text).unwrap();
        assert_eq!(bytes, 2_147_483_648);
        assert!((seconds - 1.06977).abs() < 1e-9);
        assert!(parse_dd("dd: failed to open 'x'").is_err());
    }

    #[test]
    fn random_offsets_are_aligned_in_range_and_seeded() {
        let a = random_offsets(1, 64 << 20, 1000);
        assert!(a.iter().all(|&o| o % ALIGN as u64 == 0 && o < 64 << 20));
        assert_eq!(a, random_offsets(1, 64 << 20, 1000));
        assert_ne!(a, random_offsets(2, 64 << 20, 1000));
    }
}
