//! `cargo xtask`: Quiver's developer tasks, in Rust so they run wherever
//! cargo does. `ci` runs the CI gates exactly as CI does; `bench` builds the
//! release binaries, runs the end-to-end benchmarks against their baselines
//! (the registry in `bench`) and writes JSON, a Markdown summary and SVG
//! charts to `target/bench/`.
//!
//! Invariants: xtask measures by driving other programs (`bash .ci/run`,
//! `cargo`, the driver, `bench-io`, `bench-latency`) as child processes, so
//! it measures exactly what users run; it links workspace libraries only for
//! their parsers and defaults (`quiver_io::size`, the walker's `Config`), so
//! that a benchmark never restates a default that may drift. Exit codes: 0
//! success, 1 failure, 2 bad usage; `ci` passes on the exit code of
//! `.ci/run`.

#![forbid(unsafe_code)]

mod bench;
mod report;
#[cfg(test)]
mod tidy;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

/// Quiver's developer tasks.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask", bin_name = "cargo xtask", max_term_width = 100)]
#[command(after_help = "Examples:
  cargo xtask ci
  cargo xtask bench
  cargo xtask bench io --size 256MiB --reps 3
  cargo xtask bench ingest --scale 16
  cargo xtask bench walker --scale 16")]
struct Cli {
    #[command(subcommand)]
    task: Task,
}

#[derive(Debug, Subcommand)]
enum Task {
    /// Run the CI gates exactly as CI does (`bash .ci/run`: fmt, clippy, test).
    Ci,
    /// Build release binaries, run benchmarks against baselines, write target/bench/.
    Bench(bench::BenchArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.task {
        Task::Ci => ci(),
        Task::Bench(args) => bench::run(&args).map(|()| ExitCode::SUCCESS),
    };
    outcome.unwrap_or_else(|e| {
        eprintln!("error: {e:#}");
        ExitCode::FAILURE
    })
}

/// The workspace root: xtask's manifest sits one level below it.
fn workspace_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .expect("xtask's manifest directory has a parent: the workspace root")
        .to_owned()
}

/// The cargo that runs us (`cargo xtask` sets `CARGO`), else the one on `PATH`.
fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

fn ci() -> Result<ExitCode> {
    let root = workspace_root();
    let status = Command::new("bash")
        .arg(".ci/run")
        .current_dir(&root)
        .status()
        .with_context(|| format!("running bash .ci/run in {}", root.display()))?;
    // A gate killed by a signal has no code; report it as a plain failure.
    Ok(status
        .code()
        .and_then(|c| u8::try_from(c).ok())
        .map_or(ExitCode::FAILURE, ExitCode::from))
}
