//! `cargo xtask bench walker`'s query-latency rows: one PPR query (2,000
//! walks of at most 10 steps, stopping with probability 0.15) on R-MAT 24,
//! the engine's defaults at `--mem` G/4, against iteration mode, which
//! reads every block each iteration.
//!
//! Each of [`ROUNDS`] rounds runs, in turn: GraphWalker mode with the
//! graph's pages dropped from the page cache (cold), the same query again
//! (warm: the process starts afresh, the page cache keeps what the last
//! run read), and iteration mode, cold. Neither mode is given `--io`: the
//! rows are what a user who types the query gets. Scale 26 (at G/16) runs
//! only where its graph and its generation's sort spill fit the disk.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use anyhow::{Context as _, Result};
use quiver_io::size::format_bytes;
use serde_json::{json, Value};

use super::walker::Walker;
use super::{capture, capture_json, num, symmetric_rmat, Context};
use crate::report::{Row, Spread, Target};

/// Alternating rounds.
const ROUNDS: usize = 3;
/// The scale the query targets are set at.
const SCALE: u32 = 24;
/// The largest scale tried, at a sixteenth of its graph in memory.
const LARGE_SCALE: u32 = 26;
/// A warm query's target, in milliseconds.
const WARM_MS: f64 = 20.0;

/// Runs the rows; returns the runs' reports.
pub(super) fn run(
    cx: &Context,
    notes: &mut Vec<String>,
    rows: &mut Vec<Row>,
    sections: &mut Vec<String>,
) -> Result<Value> {
    let mut table = String::from(
        "### walker: query latency at the defaults (PPR, 2,000 walks)\n\n\
         | graph | --mem | run | wall, ms: median (range) | load, ms | read, MB | steps | vertex loads |\n\
         |---|---:|---|---:|---:|---:|---:|---:|\n",
    );
    let mut records = Vec::new();
    for (scale, share) in [(SCALE, 4), (LARGE_SCALE, 16)] {
        if scale == LARGE_SCALE {
            if let Some(why) = no_room_for(cx.data, scale)? {
                notes.push(format!("walker query: R-MAT {scale} not run: {why}"));
                continue;
            }
        }
        let (graph, _) = symmetric_rmat(cx, scale, "walker query", notes)?;
        records.push(query(cx, &graph, scale, share, notes, rows, &mut table)?);
    }
    sections.push(table);
    Ok(Value::Array(records))
}

/// The rounds on one graph at `--mem` G/`share`.
fn query(
    cx: &Context,
    graph: &Path,
    scale: u32,
    share: u64,
    notes: &mut Vec<String>,
    rows: &mut Vec<Row>,
    table: &mut String,
) -> Result<Value> {
    let g = fs::metadata(graph)
        .with_context(|| format!("reading the size of {}", graph.display()))?
        .len();
    let mem = super::walker::ceil_mib(g / share);
    let facts = capture_json(
        &cx.bins.bench_latency,
        &argv!["graph", graph, "--from", "1", "--count", "1"],
    )?;
    let source = facts["picked"][0]
        .as_u64()
        .context("bench-latency graph picked no vertex")?;
    let walker = Walker {
        bins: cx.bins,
        graph,
        data: cx.data,
    };
    let app = super::walker::ppr_query(source);
    let mem_flag = Vec::from(argv!["--mem", mem.to_string()]);
    let mut runs: [Vec<Value>; 3] = Default::default();
    for _ in 0..ROUNDS {
        runs[0].push(walker.run_at_defaults(&app, &mem_flag, true)?);
        runs[1].push(walker.run_at_defaults(&app, &mem_flag, false)?);
        let mut iteration = mem_flag.clone();
        iteration.extend(argv!["--mode", "iteration"]);
        runs[2].push(walker.run_at_defaults(&app, &iteration, true)?);
    }
    let ms = |reports: &[Value], key: &str| -> Result<Spread> {
        let xs = reports
            .iter()
            .map(|r| Ok(num(r, &format!("/{key}"))? / 1e6))
            .collect::<Result<Vec<f64>>>()?;
        Ok(Spread::of(xs))
    };
    let label = format!("R-MAT {scale}");
    for (name, reports) in ["graphwalker, cold", "graphwalker, warm", "iteration, cold"]
        .iter()
        .zip(&runs)
    {
        let wall = ms(reports, "wall_ns")?;
        let first = &reports[0];
        let _ = writeln!(
            table,
            "| {label} | {} | {name} | {:.1} ({:.1}-{:.1}) | {:.1} | {:.1} | {} | {} |",
            format_bytes(mem),
            wall.median,
            wall.min,
            wall.max,
            ms(reports, "load_ns")?.median,
            num(first, "/bytes_read")? / 1e6,
            num(first, "/steps")?,
            num(first, "/vertex_loads")?,
        );
    }
    let (cold, warm, iteration) = (
        ms(&runs[0], "wall_ns")?,
        ms(&runs[1], "wall_ns")?,
        ms(&runs[2], "wall_ns")?,
    );
    rows.push(Row::compare(
        "walker",
        &format!("PPR query on {label} at G/{share}, defaults, cold: iteration / graphwalker, wall (medians of {ROUNDS} alternating rounds; graphwalker {:.0} ms ({:.0}-{:.0}), iteration {:.0} ms ({:.0}-{:.0}))", cold.median, cold.min, cold.max, iteration.median, iteration.min, iteration.max),
        iteration.median,
        cold.median,
        Some(Target::AtLeast(10.0)),
    ));
    rows.push(Row::compare(
        "walker",
        &format!("PPR query on {label} at G/{share}, defaults, warm page cache, fresh process: wall / {WARM_MS} ms (median {:.1} ms, range {:.1}-{:.1})", warm.median, warm.min, warm.max),
        warm.median,
        WARM_MS,
        Some(Target::AtMost(1.0)),
    ));
    notes.push(format!(
        "walker query: {label} (G = {}), PPR from vertex {source} (the first from 1 on with out-degree >= 1), 2,000 walks, --mem G/{share}, no --io (auto: a query that reads only the lists it visits reads through the page cache, iteration direct); cold runs start with the graph's pages dropped; read MB counts what the engine asked for (the kernel's read-ahead adds to it on a cold cache)",
        format_bytes(g)
    ));
    Ok(json!({ "scale": scale, "mem": mem, "source": source, "runs": runs }))
}

/// Why R-MAT `scale` does not fit the disk under `data` beside what is
/// there, if it does not: its graph (estimated from R-MAT 24's file, twice
/// as large a scale) and its generation's sort spill, about twice the
/// graph.
fn no_room_for(data: &Path, scale: u32) -> Result<Option<String>> {
    let graph = data.join(format!("rmat-u{scale}-perm.qcsr"));
    if graph.exists() {
        return Ok(None);
    }
    let smaller = data.join(format!("rmat-u{SCALE}-perm.qcsr"));
    let estimate = fs::metadata(&smaller)
        .with_context(|| format!("reading the size of {}", smaller.display()))?
        .len()
        << (scale - SCALE);
    let out = capture(Path::new("df"), &argv!["--output=avail", "-B1", data])?;
    let free: u64 = String::from_utf8_lossy(&out)
        .lines()
        .nth(1)
        .and_then(|line| line.trim().parse().ok())
        .context("reading the free space df reports")?;
    Ok((3 * estimate > free).then(|| {
        format!(
            "its graph would take about {} and its generation's sort spill about twice that; the disk has {} free",
            format_bytes(estimate),
            format_bytes(free)
        )
    }))
}
