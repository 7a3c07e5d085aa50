//! What every command prints the same way: usage errors named by their
//! flag, JSON reports, and the time line of a `RunSummary`. A leaf: it
//! uses no other module of the driver, and every command module uses it.

use anyhow::{Context, Result};
use quiver_run::{InvalidArgument, RunSummary};
use serde::Serialize;

/// An argument combination the driver rejects (exit code 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// `checked`, a setting taken from a flag refused as a usage error named
/// by the flag (see [`flag_error`]).
pub fn flagged<T>(checked: Result<T, InvalidArgument>) -> Result<T> {
    checked.map_err(flag_error)
}

/// A setting a library refused, as a usage error named by its flag. Each
/// flag is its setting's name in kebab case (the library's
/// `depth_fraction` is `--depth-fraction`); the settings that no flag sets
/// keep defaults the library accepts.
pub fn flag_error(invalid: InvalidArgument) -> anyhow::Error {
    let flag = invalid.parameter.replace('_', "-");
    UsageError(format!("--{flag}: {}", invalid.reason)).into()
}

/// Prints `report` as pretty JSON on stdout: what `--json` gives.
pub fn print_json(report: &impl Serialize) -> Result<()> {
    println!(
        "{}",
        serde_json::to_string_pretty(report).context("serialising the report")?
    );
    Ok(())
}

/// Prints a run's times, as every engine's summary shows them: compute,
/// the loading phase (`loading` says what it was), wall, and the threads
/// when the engine ran several.
pub fn print_times(summary: &RunSummary, loading: &str) {
    let seconds = |ns: u64| ns as f64 / 1e9;
    let threads = if summary.threads > 1 {
        format!(", {} threads", summary.threads)
    } else {
        String::new()
    };
    println!(
        "time       {:.3} s compute, {:.3} s {loading}, {:.3} s wall{threads}",
        seconds(summary.compute_ns),
        seconds(summary.load_ns),
        seconds(summary.wall_ns),
    );
}
