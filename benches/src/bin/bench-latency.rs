//! `bench-latency`: the memory-latency baseline of the in-memory walker, and
//! the graph facts `cargo xtask bench walker` needs.
//!
//! `bench-latency chase` times dependent random reads on one thread: a table
//! of `u32` holding one random cycle through all its slots (Sattolo's
//! shuffle), followed as `next = table[next]`, so every read waits for the
//! one before it and no prefetcher can guess the next address. With
//! `--graph G` the table has as many entries as G has edge targets (the same
//! bytes as G's targets section), so it is the floor of what one random-walk
//! step on G costs: a step reads at least one random target. The JSON report
//! (median of `--reps` runs) goes to stdout.
//!
//! `bench-latency graph G` prints G's vertex and edge counts and the first
//! `--count` vertices from `--from` on with out-degree at least 1 (the
//! sources of the walker bench's query applications).

#![forbid(unsafe_code)]

use std::hint::black_box;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, ensure, Context, Result};
use clap::{Args, Parser, Subcommand};
use quiver_benches::{fill_word, median};
use quiver_csr::Graph;
use serde::Serialize;
use serde_json::json;

/// Dependent random reads (the walker's memory baseline) and graph facts.
#[derive(Debug, Parser)]
#[command(name = "bench-latency", max_term_width = 100)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Time dependent random reads (pointer chasing) on one thread; JSON on stdout.
    Chase(ChaseArgs),
    /// Vertex and edge counts and the first vertices with out-degree >= 1; JSON on stdout.
    Graph {
        /// The .qcsr graph.
        graph: PathBuf,
        /// First vertex id to consider.
        #[arg(long, default_value_t = 1)]
        from: u32,
        /// How many vertices with out-degree >= 1 to pick.
        #[arg(long, default_value_t = 2)]
        count: usize,
    },
}

#[derive(Debug, Args)]
struct ChaseArgs {
    /// Size the table like this graph's targets: one u32 per edge.
    #[arg(long, conflicts_with = "entries", required_unless_present = "entries")]
    graph: Option<PathBuf>,
    /// Entries (u32) in the table.
    #[arg(long)]
    entries: Option<u64>,
    /// Dependent reads per run.
    #[arg(long, default_value_t = 20_000_000)]
    reads: u64,
    /// Timed runs; the report gives their median.
    #[arg(long, default_value_t = 3)]
    reps: u32,
    /// Seed of the shuffle.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Cmd::Chase(args) => chase(&args),
        Cmd::Graph { graph, from, count } => graph_facts(&graph, from, count),
    }
    .and_then(|report| {
        let text = serde_json::to_string_pretty(&report).context("serialising the report")?;
        println!("{text}");
        Ok(())
    });
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn graph_facts(path: &std::path::Path, from: u32, count: usize) -> Result<serde_json::Value> {
    let graph = Graph::open(path).with_context(|| format!("opening {}", path.display()))?;
    let picked: Vec<(u32, u64)> = (from..graph.num_vertices())
        .map(|v| (v, graph.degree(v)))
        .filter(|&(_, d)| d >= 1)
        .take(count)
        .collect();
    ensure!(
        picked.len() == count,
        "{} has fewer than {count} vertices with out-degree >= 1 from vertex {from} on",
        path.display()
    );
    Ok(json!({
        "graph": path,
        "vertices": graph.num_vertices(),
        "edges": graph.num_edges(),
        "targets_bytes": graph.num_edges() * 4,
        "picked": picked.iter().map(|&(v, _)| v).collect::<Vec<_>>(),
        "picked_degrees": picked.iter().map(|&(_, d)| d).collect::<Vec<_>>(),
    }))
}

/// One timed run.
#[derive(Debug, Serialize)]
struct ChaseRun {
    seconds: f64,
    reads_per_sec: f64,
    ns_per_read: f64,
}

fn chase(args: &ChaseArgs) -> Result<serde_json::Value> {
    let entries = match (&args.graph, args.entries) {
        (Some(path), _) => Graph::open(path)
            .with_context(|| format!("opening {}", path.display()))?
            .num_edges(),
        (None, Some(n)) => n,
        (None, None) => bail!("give --graph or --entries"),
    };
    ensure!(
        (2..=u64::from(u32::MAX)).contains(&entries),
        "the table needs 2 to 2^32-1 entries, not {entries}"
    );
    ensure!(args.reps > 0, "--reps must be at least 1");
    let started = Instant::now();
    let table = cycle(entries, args.seed);
    let build_seconds = started.elapsed().as_secs_f64();
    eprintln!(
        "bench-latency: {entries} entries ({} MiB) shuffled in {build_seconds:.1} s",
        (entries * 4) >> 20
    );
    let mut runs = Vec::new();
    let mut at = 0u32;
    for rep in 0..args.reps {
        let started = Instant::now();
        for _ in 0..args.reads {
            at = table[at as usize];
        }
        black_box(at);
        let seconds = started.elapsed().as_secs_f64();
        #[allow(clippy::cast_precision_loss)] // Read counts are far below 2^52.
        let reads = args.reads as f64;
        let run = ChaseRun {
            seconds,
            reads_per_sec: reads / seconds,
            ns_per_read: seconds * 1e9 / reads,
        };
        eprintln!(
            "bench-latency: run {}: {:.1} ns per dependent read",
            rep + 1,
            run.ns_per_read
        );
        runs.push(run);
    }
    let rates: Vec<f64> = runs.iter().map(|r| r.reads_per_sec).collect();
    let per_sec = median(&rates);
    Ok(json!({
        "bench": "latency",
        "entries": entries,
        "table_bytes": entries * 4,
        "reads": args.reads,
        "reps": args.reps,
        "build_seconds": build_seconds,
        "reads_per_sec": per_sec,
        "ns_per_read": 1e9 / per_sec,
        "transparent_hugepages": std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .ok()
            .map(|s| s.trim().to_owned()),
        "runs": runs,
    }))
}

/// A table of `n` entries whose `next = table[next]` visits every entry
/// once before returning: Sattolo's shuffle of the identity.
fn cycle(n: u64, seed: u64) -> Vec<u32> {
    let len = usize::try_from(n).expect("the table fits the address space");
    #[allow(clippy::cast_possible_truncation)] // n <= u32::MAX, checked by the caller.
    let mut table: Vec<u32> = (0..n).map(|i| i as u32).collect();
    for i in (1..len).rev() {
        // Uniform in 0..i (multiply-high; bias below 2^-32 for these sizes).
        #[allow(clippy::cast_possible_truncation)] // The product's high half is below i.
        let j = ((u128::from(fill_word(seed, i as u64)) * i as u128) >> 64) as usize;
        table.swap(i, j);
    }
    table
}

#[cfg(test)]
mod tests {
    use super::cycle;

    #[test]
    fn the_table_is_one_cycle_through_every_entry() {
        for n in [2, 3, 10, 1000] {
            let table = cycle(n, 7);
            let mut at = 0u32;
            let mut seen = vec![false; table.len()];
            for _ in 0..n {
                assert!(!seen[at as usize], "entry {at} visited twice (n = {n})");
                seen[at as usize] = true;
                at = table[at as usize];
            }
            assert_eq!(at, 0, "the walk returns to its start after n reads");
            assert!(seen.iter().all(|&s| s));
        }
    }
}
