//! The bsp bench's peers, built by hand outside this repository, each run
//! on the bench's graph beside the engine's one process of 2 threads,
//! alternating in the same minutes, compute time against the peer's own
//! timer:
//!
//! - GAPBS (`--gapbs DIR`): `pr`, `bfs`, `cc` and `sssp` with 2 OpenMP
//!   threads on its own serialized copies of the graph (made by its
//!   `converter`; SSSP on the weighted copy its `-w` draws), its trial time,
//!   and its triangle count `tc` beside LCC, which counts them per vertex;
//! - Gemini (`--gemini DIR`): `toolkits/pagerank`, `bfs`, `cc` and `sssp`,
//!   one process (it takes every core: 2 threads here) on binary edge lists
//!   exported from the same graph, its `exec_time`. A Gemini process runs
//!   its algorithm 6 times; every run counts. SSSP reads the weighted graph
//!   GAPBS's converter made, so it needs `--gapbs` as well.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::Result;
use serde_json::{json, Value};

use super::bsp::{compute_ns, Algorithm, ENGINE};
use super::walker_peers::{data_file, edge_list, reported_all, run_peer};
use super::{capture_json, reuse_or, reuse_or_rename, Context};
use crate::report::{Row, Spread, Target};

/// A peer as the rows describe it.
struct Peer {
    name: &'static str,
    /// How it runs, for the rows.
    threads: &'static str,
    /// What its output prints before each run's time in seconds.
    marker: &'static str,
    /// What it is to be beaten by: its time over the engine's.
    target: f64,
}

const GAPBS: Peer = Peer {
    name: "GAPBS",
    threads: "2 OpenMP threads, its trial time",
    marker: "Trial Time:",
    target: 1.0,
};

const GEMINI: Peer = Peer {
    name: "Gemini",
    threads: "1 process of 2 threads, its exec_time of each of the 6 runs a process makes",
    marker: "exec_time=",
    target: 1.5,
};

/// One algorithm against a peer: the engine's whole command line, the
/// peer's program and its arguments, and the rounds of each.
struct PeerRun {
    name: String,
    ours: Vec<OsString>,
    program: PathBuf,
    theirs: Vec<OsString>,
    reps: u32,
}

/// GAPBS's and Gemini's rows, for the peers given, on `graph` of
/// `vertices`; their runs as JSON.
pub(super) fn compare(
    cx: &Context,
    (graph, vertices): (&Path, u64),
    algorithms: &[Algorithm<'_>],
    source: &str,
    rows: &mut Vec<Row>,
    notes: &mut Vec<String>,
) -> Result<Value> {
    let engine = |algorithm: &[&str], graph: &Path| -> Vec<OsString> {
        let mut args = argv!["--json", "bsp"].to_vec();
        args.extend(algorithm.iter().map(OsString::from));
        args.push(graph.into());
        args.extend(ENGINE.flags.iter().map(OsString::from));
        args
    };
    let bfs_reps = algorithms.iter().find(|a| a.0 == "BFS").map_or(1, |a| a.3);
    let sssp = ["sssp", "--source", source];
    let mut weighted_graph = None;
    let gapbs = match &cx.args.gapbs {
        Some(dir) => {
            let inputs = gapbs_inputs(cx, dir, (graph, vertices), notes)?;
            let mut runs: Vec<PeerRun> = algorithms
                .iter()
                .map(|(name, algorithm, _, reps)| {
                    let (kernel, flags) = match *name {
                        "PageRank" => ("pr", vec!["-i", "20", "-t", "1e-30"]),
                        "BFS" => ("bfs", vec!["-r", source]),
                        _ => ("cc", Vec::new()),
                    };
                    PeerRun {
                        name: (*name).to_owned(),
                        ours: engine(algorithm, graph),
                        program: dir.join(kernel),
                        theirs: gapbs_args(&inputs.serialized, &flags),
                        reps: *reps,
                    }
                })
                .collect();
            runs.push(PeerRun {
                name: "SSSP".to_owned(),
                ours: engine(&sssp, &inputs.weighted_graph),
                program: dir.join("sssp"),
                theirs: gapbs_args(&inputs.weighted, &["-r", source, "-d", "2"]),
                reps: bfs_reps,
            });
            let reps = algorithms.iter().map(|a| a.3).min().unwrap_or(1);
            runs.push(PeerRun {
                name: "LCC (GAPBS counts the graph's triangles; LCC, each vertex's)".to_owned(),
                ours: engine(&["lcc"], graph),
                program: dir.join("tc"),
                theirs: gapbs_args(&inputs.serialized, &[]),
                reps,
            });
            let measured = alternate(cx, &GAPBS, &runs, rows)?;
            notes.push(format!(
                "bsp: GAPBS from {}, on {} (converted from the bench's graph, each edge once, symmetrized by its converter's -s) and, for SSSP, {} (its -w weights), which the engine reads as {}; PageRank runs 20 iterations whatever its error (a tolerance it cannot reach), `cc` is its default, Afforest, and `sssp` is its delta-stepping with the width its own benchmark gives Kronecker graphs (-d2)",
                dir.display(),
                inputs.serialized.display(),
                inputs.weighted.display(),
                inputs.weighted_graph.display()
            ));
            weighted_graph = Some(inputs.weighted_graph);
            measured
        }
        None => {
            notes.push("bsp: no --gapbs directory given, so no GAPBS rows".into());
            Value::Null
        }
    };
    let gemini = match &cx.args.gemini {
        Some(dir) => {
            let tool = |name: &str| dir.join("toolkits").join(name);
            // Gemini's pagerank and bfs read the edges as given (so every
            // edge both ways); its cc adds the reverses itself.
            let both = edge_list(cx.bins, graph, cx.data, ("bin", "bin"), false, "bsp", notes)?;
            let once = edge_list(
                cx.bins,
                graph,
                cx.data,
                ("once.bin", "bin"),
                true,
                "bsp",
                notes,
            )?;
            let vertices = vertices.to_string();
            let mut runs: Vec<PeerRun> = algorithms
                .iter()
                .map(|(name, algorithm, _, reps)| {
                    let (tool, theirs) = match *name {
                        "PageRank" => (tool("pagerank"), argv![&both, &vertices, "20"].to_vec()),
                        "BFS" => (tool("bfs"), argv![&both, &vertices, source].to_vec()),
                        _ => (tool("cc"), argv![&once, &vertices].to_vec()),
                    };
                    PeerRun {
                        name: (*name).to_owned(),
                        ours: engine(algorithm, graph),
                        program: tool,
                        theirs,
                        reps: *reps,
                    }
                })
                .collect();
            match &weighted_graph {
                Some(weighted_graph) => {
                    let triples = edge_list(
                        cx.bins,
                        weighted_graph,
                        cx.data,
                        ("bin", "bin"),
                        false,
                        "bsp",
                        notes,
                    )?;
                    runs.push(PeerRun {
                        name: "SSSP".to_owned(),
                        ours: engine(&sssp, weighted_graph),
                        program: tool("sssp"),
                        theirs: argv![&triples, &vertices, source].to_vec(),
                        reps: bfs_reps,
                    });
                }
                None => notes.push(
                    "bsp: no Gemini SSSP row: its weights are GAPBS's converter's, and no --gapbs was given"
                        .into(),
                ),
            }
            let measured = alternate(cx, &GEMINI, &runs, rows)?;
            notes.push(format!(
                "bsp: Gemini from {} (its toolkits; the vertex count given as the graph's, {vertices}), on {} (every edge both ways) and, for WCC, {} (each edge once; its cc adds the reverses)",
                dir.display(),
                both.display(),
                once.display()
            ));
            measured
        }
        None => {
            notes.push("bsp: no --gemini directory given, so no Gemini rows".into());
            Value::Null
        }
    };
    Ok(json!({ "gapbs": gapbs, "gemini": gemini }))
}

/// GAPBS's copies of the bench's graph.
struct GapbsInputs {
    /// Serialized, symmetric.
    serialized: PathBuf,
    /// Serialized with the weights its converter's `-w` draws.
    weighted: PathBuf,
    /// The same weighted graph as the engine reads it.
    weighted_graph: PathBuf,
}

/// Makes (or reuses) GAPBS's copies of `graph` with its `converter` in
/// `dir`, from the graph's edges written once each (its `-s` adds the
/// reverses), and the engine's copy of the weighted one.
fn gapbs_inputs(
    cx: &Context,
    dir: &Path,
    (graph, vertices): (&Path, u64),
    notes: &mut Vec<String>,
) -> Result<GapbsInputs> {
    let edges = edge_list(cx.bins, graph, cx.data, ("el", "snap"), true, "bsp", notes)?;
    let converter = dir.join("converter");
    let mut convert = |suffix: &str, flags: &[&str]| -> Result<PathBuf> {
        let out = data_file(graph, cx.data, suffix)?;
        reuse_or_rename(&out, "bsp", notes, |partial| {
            let mut args = argv!["-f", &edges, "-s"].to_vec();
            args.extend(flags.iter().map(OsString::from));
            args.push(partial.into());
            run_peer(&converter, &args, cx.data, &[])?;
            Ok(())
        })?;
        Ok(out)
    };
    let serialized = convert("sg", &["-b"])?;
    let weighted = convert("wsg", &["-w", "-b"])?;
    let weighted_edges = convert("wel", &["-w", "-e"])?;
    let weighted_graph = data_file(graph, cx.data, "weighted.qcsr")?;
    reuse_or(&weighted_graph, "bsp", notes, || {
        capture_json(
            &cx.bins.quiver,
            &argv![
                "--json",
                "convert",
                &weighted_edges,
                "--format",
                "snap",
                "--vertices",
                vertices.to_string(),
                "-o",
                &weighted_graph
            ],
        )
    })?;
    Ok(GapbsInputs {
        serialized,
        weighted,
        weighted_graph,
    })
}

/// A GAPBS kernel's arguments: one trial on `graph`, then `flags`.
fn gapbs_args(graph: &Path, flags: &[&str]) -> Vec<OsString> {
    let mut args = argv!["-f", graph, "-n", "1"].to_vec();
    args.extend(flags.iter().map(OsString::from));
    args
}

/// Runs each of `runs` on the engine and on `peer`, alternating, as many
/// rounds as it asks; a row each: the peer's time over the engine's
/// compute time (medians), with both ranges.
fn alternate(cx: &Context, peer: &Peer, runs: &[PeerRun], rows: &mut Vec<Row>) -> Result<Value> {
    let mut all = serde_json::Map::new();
    for run in runs {
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for _ in 0..run.reps {
            ours.push(compute_ns(&capture_json(&cx.bins.quiver, &run.ours)?)? / 1e6);
            let output = run_peer(
                &run.program,
                &run.theirs,
                cx.data,
                &[("OMP_NUM_THREADS", Path::new("2"))],
            )?;
            theirs.extend(reported_all(&output, peer.marker)?.iter().map(|s| s * 1e3));
        }
        all.insert(
            run.name.clone(),
            json!({ "peer_ms": theirs, "quiver_ms": ours }),
        );
        let shown = |s: &Spread| format!("{:.1} ms ({:.1}-{:.1})", s.median, s.min, s.max);
        let program = run.program.file_name().map_or_else(
            || run.program.display().to_string(),
            |name| name.to_string_lossy().into_owned(),
        );
        let (n_theirs, ours, theirs) = (theirs.len(), Spread::of(ours), Spread::of(theirs));
        rows.push(Row::compare(
            "bsp",
            &format!(
                "{}, {} `{program}` ({}) / {} (compute times, medians of {} alternating rounds, {n_theirs} peer runs: {} {}, quiver {})",
                run.name,
                peer.name,
                peer.threads,
                ENGINE.name,
                run.reps,
                peer.name,
                shown(&theirs),
                shown(&ours)
            ),
            theirs.median,
            ours.median,
            Some(Target::AtLeast(peer.target)),
        ));
    }
    Ok(Value::Object(all))
}
