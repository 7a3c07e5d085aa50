//! `cargo xtask`: Quiver's developer tasks, in Rust so they run wherever
//! cargo does. `demo` and `test` are the README's two set-up commands: each
//! installs the Debian packages it needs (`setup`, the one list of them),
//! then runs the demo or the whole test suite (the workspace's tests, then
//! the Python package pip-installed into a venv and tested there). `ci` runs
//! the CI gates exactly as CI does; `bench` builds the release binaries,
//! runs the end-to-end benchmarks against their baselines (the registry in
//! `bench`) and writes JSON, a Markdown summary and SVG charts to
//! `target/bench/`.
//!
//! Invariants: xtask measures by driving other programs (`bash .ci/run`,
//! `cargo`, the driver, `bench-io`, `bench-latency`) as child processes, so
//! it measures exactly what users run; it links workspace libraries only for
//! their parsers and defaults (`quiver_io::size`, the walker's `Config`), so
//! that a benchmark never restates a default that may drift. Exit codes: 0
//! success, 1 failure, 2 bad usage or a machine where the packages cannot be
//! installed from here; `ci`, `demo` and `test` pass on the exit code of
//! what they ran.

#![forbid(unsafe_code)]

mod bench;
mod python;
mod report;
mod setup;
#[cfg(test)]
mod tidy;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};

use anyhow::{ensure, Context, Result};
use clap::{Parser, Subcommand, ValueEnum};
use serde_json::Value;

use crate::setup::{Purpose, SetupError};

/// Quiver's developer tasks.
#[derive(Debug, Parser)]
#[command(name = "cargo xtask", bin_name = "cargo xtask", max_term_width = 100)]
#[command(after_help = "Examples:
  cargo xtask demo
  cargo xtask test
  cargo xtask setup --for build --for python
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
    /// Install the Debian packages the build needs (apt-get, through sudo when not root), then
    /// build the driver and run `quiver demo`; arguments after it go to the demo.
    Demo {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
    /// Install the Debian packages the tests need, run `cargo test --workspace` (arguments after
    /// it go to cargo test), then pip-install the Python package into a venv and run its tests.
    Test {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<OsString>,
    },
    /// Install the Debian packages these purposes need (all of them with --all) and nothing else.
    Setup {
        /// What the packages are for [default: build].
        #[arg(long = "for", value_enum)]
        purposes: Vec<Purpose>,
        /// Every package the workspace can use: the build, the Python package and the fabrics.
        #[arg(long, conflicts_with = "purposes")]
        all: bool,
    },
    /// Run the CI gates exactly as CI does (`bash .ci/run`: fmt, clippy, test).
    Ci,
    /// Build release binaries, run benchmarks against baselines, write target/bench/.
    Bench(Box<bench::BenchArgs>),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.task {
        Task::Demo { args } => demo(&args),
        Task::Test { args } => test(&args),
        Task::Setup { purposes, all } => {
            let purposes = match (all, purposes.is_empty()) {
                (true, _) => Purpose::value_variants().to_vec(),
                (false, true) => vec![Purpose::Build],
                (false, false) => purposes,
            };
            setup::ensure(&purposes)
                .map(|()| ExitCode::SUCCESS)
                .map_err(Into::into)
        }
        Task::Ci => ci(),
        Task::Bench(args) => bench::run(&args).map(|()| ExitCode::SUCCESS),
    };
    outcome.unwrap_or_else(|e| {
        eprintln!("error: {e:#}");
        if e.downcast_ref::<SetupError>().is_some() {
            ExitCode::from(2)
        } else {
            ExitCode::FAILURE
        }
    })
}

/// `cargo xtask demo`: the packages, then `cargo run --release -- demo`.
fn demo(args: &[OsString]) -> Result<ExitCode> {
    setup::ensure(&[Purpose::Build])?;
    let mut command = cargo();
    command.args(["run", "--release", "--package", "quiver", "--", "demo"]);
    command.args(args);
    run_status(command, "cargo run --release -- demo")
}

/// `cargo xtask test`: the packages, the workspace's tests, then the Python
/// package as users install it.
fn test(args: &[OsString]) -> Result<ExitCode> {
    setup::ensure(&[Purpose::Build, Purpose::Python])?;
    let mut command = cargo();
    command.args(["test", "--workspace"]);
    command.args(args);
    let code = run_status(command, "cargo test --workspace")?;
    if code != ExitCode::SUCCESS {
        return Ok(code);
    }
    python::test(&workspace_root())
}

/// Runs `command` in the workspace root and passes on its exit code.
fn run_status(mut command: Command, what: &str) -> Result<ExitCode> {
    let status = command
        .current_dir(workspace_root())
        .status()
        .with_context(|| format!("running {what}"))?;
    // A command killed by a signal has no code; report it as a plain failure.
    Ok(status
        .code()
        .and_then(|c| u8::try_from(c).ok())
        .map_or(ExitCode::FAILURE, ExitCode::from))
}

/// Where cargo puts what it builds for this workspace (`CARGO_TARGET_DIR`
/// and the config included), from `cargo metadata`.
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

/// The workspace root: xtask's manifest sits one level below it. Taken
/// from the `CARGO_MANIFEST_DIR` that `cargo xtask` (a `cargo run`) sets
/// when it starts us, and only failing that from the path compiled in: a
/// target directory shared by two checkouts (CI's cache) may hand one
/// checkout the xtask built in the other, whose compiled-in path names
/// the other checkout, or none that exists any more.
fn workspace_root() -> PathBuf {
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from);
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
    let mut command = Command::new("bash");
    command.arg(".ci/run");
    run_status(command, "bash .ci/run")
}
