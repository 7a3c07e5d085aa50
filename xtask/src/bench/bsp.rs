//! `cargo xtask bench bsp`: the bsp engine on the Kronecker graph of scale
//! 20 (symmetric, deduplicated, no self-loops, ids permuted: the graph the
//! peers are measured on), side by side in one run:
//!
//! - one process with 2 threads against the single-thread reference
//!   (`--reference`), for PageRank (20 iterations), BFS and WCC;
//! - COST: two tcp node processes of one thread each against the
//!   reference, for PageRank and WCC;
//! - transports: two tcp node processes, one-sided WRITE rings against
//!   two-sided SEND/RECV, for PageRank and BFS: communication time (the
//!   supersteps' time outside the workers' compute), messages and bytes;
//! - over mpi (when Open MPI's `mpirun` is on the PATH; the driver is
//!   built with `--features mpi`): the same one-sided against two-sided
//!   comparison between 2 ranks, and 2 and 4 ranks of one thread beside 2
//!   and 4 tcp node processes, for PageRank and BFS: on this 2-core
//!   machine these rows show each fabric's overhead, not a speedup;
//! - memory: in every run of several nodes, the largest node's peak
//!   resident memory against its share of the graph file (file size over
//!   nodes), the paper's measure;
//! - task migration against none (`--no-balance`) on the same graph with
//!   ids as drawn (the hubs on the first node), PageRank and BFS on 2 tcp
//!   nodes of one thread: each node's busy time, slowest over fastest;
//! - strong scaling on Kronecker 22: PageRank and BFS on 1, 2 and 4 tcp
//!   node processes of one thread (on 2 cores, the protocol's overhead);
//! - memory on directed Kronecker 20 and 22 (see [`directed_memory`]):
//!   PageRank and WCC on 2 and 4 tcp nodes, and PageRank pushing only;
//! - with `--gapbs DIR` and `--gemini DIR` (each built by hand outside
//!   this repository): their PageRank, BFS, WCC and SSSP beside the
//!   engine's one process of 2 threads, alternating (see [`bsp_peers`]).
//!
//! Every configuration runs `--reps` times (BFS, whose runs are short and
//! whose communication totals 100-200 ms, three times as many), interleaved,
//! and the run with the median compute time is kept. Rates are edges per
//! second of compute (for a job, of its slowest node), so every ratio is a
//! speedup.

use std::ffi::OsString;
use std::path::Path;

use anyhow::{bail, Context as _, Result};
use serde_json::{json, Value};

use super::bsp_peers;
use super::{capture_json, num, rmat, symmetric_rmat, Bins, Context, Mpi, Shape};
use crate::report::{Row, Target};

const SCALE: u32 = 20;

/// The scale of the Kronecker graph of the strong-scaling rows, 4x the
/// edges of [`SCALE`].
const SCALING_SCALE: u32 = 22;

/// An algorithm the bench runs: its name, the `quiver bsp` arguments
/// before the graph, its edges of work, and runs of each configuration.
pub(super) type Algorithm<'a> = (&'a str, Vec<&'a str>, f64, u32);

/// One way of running an algorithm: its name in the summary, the
/// `quiver bsp` flags after the graph, and the ranks `mpirun` starts
/// (`None`: the driver runs alone, and spawns its tcp nodes itself).
#[derive(PartialEq)]
pub(super) struct Setup {
    pub(super) name: &'static str,
    pub(super) flags: &'static [&'static str],
    ranks: Option<u32>,
}

pub(super) const ENGINE: Setup = Setup {
    name: "1 node x 2 threads",
    flags: &["--threads", "2"],
    ranks: None,
};
const REFERENCE: Setup = Setup {
    name: "reference, 1 thread",
    flags: &["--reference"],
    ranks: None,
};
const TWO_NODES: Setup = Setup {
    name: "2 tcp nodes x 1 thread",
    flags: &["--nodes", "2", "--threads", "1"],
    ranks: None,
};
const ONE_SIDED: Setup = Setup {
    name: "2 tcp nodes x 2 threads, one-sided",
    flags: &["--nodes", "2", "--threads", "2", "--transport", "one-sided"],
    ranks: None,
};
const TWO_SIDED: Setup = Setup {
    name: "2 tcp nodes x 2 threads, two-sided",
    flags: &["--nodes", "2", "--threads", "2", "--transport", "two-sided"],
    ranks: None,
};

const TWO_NODES_PUSH: Setup = Setup {
    name: "2 tcp nodes x 1 thread, --direction push",
    flags: &["--nodes", "2", "--threads", "1", "--direction", "push"],
    ranks: None,
};

const NO_BALANCE: Setup = Setup {
    name: "2 tcp nodes x 1 thread, --no-balance",
    flags: &["--nodes", "2", "--threads", "1", "--no-balance"],
    ranks: None,
};
const ONE_NODE: Setup = Setup {
    name: "1 node x 1 thread",
    flags: &["--threads", "1"],
    ranks: None,
};
const FOUR_NODES: Setup = Setup {
    name: "4 tcp nodes x 1 thread",
    flags: &["--nodes", "4", "--threads", "1"],
    ranks: None,
};
const MPI_TWO: Setup = Setup {
    name: "mpirun -n 2 x 1 thread",
    flags: &["--fabric", "mpi", "--threads", "1"],
    ranks: Some(2),
};
const MPI_FOUR: Setup = Setup {
    name: "mpirun -n 4 x 1 thread",
    flags: &["--fabric", "mpi", "--threads", "1"],
    ranks: Some(4),
};
const MPI_ONE_SIDED: Setup = Setup {
    name: "mpirun -n 2 x 2 threads, one-sided",
    flags: &[
        "--fabric",
        "mpi",
        "--threads",
        "2",
        "--transport",
        "one-sided",
    ],
    ranks: Some(2),
};
const MPI_TWO_SIDED: Setup = Setup {
    name: "mpirun -n 2 x 2 threads, two-sided",
    flags: &[
        "--fabric",
        "mpi",
        "--threads",
        "2",
        "--transport",
        "two-sided",
    ],
    ranks: Some(2),
};

pub(super) fn run(cx: &Context) -> Result<Value> {
    let (bins, reps) = (cx.bins, cx.args.reps.max(1));
    let mut notes = Vec::new();
    let (graph, generate) = symmetric_rmat(cx, SCALE, "bsp", &mut notes)?;
    let mpi = Mpi::build()?;
    let (facts, source) = graph_facts(bins, &graph)?;
    let edges = num(&facts, "/edges")?;
    let graph_bytes = file_bytes(&graph)?;
    // Each algorithm's flags, edges of work, and runs per configuration.
    let bfs_reps = 3 * reps;
    let algorithms: [Algorithm<'_>; 3] = [
        (
            "PageRank",
            vec!["pagerank", "--iterations", "20"],
            20.0 * edges,
            reps,
        ),
        ("BFS", vec!["bfs", "--source", &source], edges, bfs_reps),
        ("WCC", vec!["wcc"], edges, reps),
    ];
    let mut rows = Vec::new();
    let mut runs = serde_json::Map::new();
    for (name, algorithm, work, runs_each) in &algorithms {
        let mut setups = vec![&ENGINE, &REFERENCE];
        match *name {
            "PageRank" => setups.extend([&TWO_NODES, &ONE_SIDED, &TWO_SIDED, &FOUR_NODES]),
            "BFS" => setups.extend([&ONE_SIDED, &TWO_SIDED, &FOUR_NODES]),
            _ => setups.push(&TWO_NODES),
        }
        if mpi.is_some() && *name != "WCC" {
            setups.extend([&MPI_ONE_SIDED, &MPI_TWO_SIDED, &MPI_TWO, &MPI_FOUR]);
            if !setups.contains(&&TWO_NODES) {
                setups.push(&TWO_NODES);
            }
        }
        let measured = measure(bins, mpi.as_ref(), &graph, algorithm, &setups, *runs_each)?;
        let rate = |setup: &Setup| -> Result<f64> {
            let run = &measured[setup.name];
            Ok(work / (compute_ns(run)? / 1e9))
        };
        rows.push(Row::compare(
            "bsp",
            &format!(
                "{name}, {} vs {}, edges/s of compute",
                ENGINE.name, REFERENCE.name
            ),
            rate(&ENGINE)?,
            rate(&REFERENCE)?,
            Some(Target::AtLeast(1.0)),
        ));
        if setups.contains(&&TWO_NODES) {
            rows.push(Row::compare(
                "bsp",
                &format!(
                    "COST: {name}, {} vs {}, edges/s",
                    TWO_NODES.name, REFERENCE.name
                ),
                rate(&TWO_NODES)?,
                rate(&REFERENCE)?,
                Some(Target::AtLeast(1.0)),
            ));
        }
        for setup in [&TWO_NODES, &ONE_SIDED]
            .into_iter()
            .filter(|s| setups.contains(s))
        {
            rows.push(memory_row(name, setup, &measured[setup.name], graph_bytes)?);
        }
        for (fabric, one, two) in [
            ("2 tcp nodes x 2 threads", &ONE_SIDED, &TWO_SIDED),
            ("mpirun -n 2 x 2 threads", &MPI_ONE_SIDED, &MPI_TWO_SIDED),
        ] {
            if !setups.contains(&one) {
                continue;
            }
            rows.push(Row::compare(
                "bsp",
                &format!("{name}, {fabric}, one-sided vs two-sided, edges/s"),
                rate(one)?,
                rate(two)?,
                None,
            ));
            rows.push(Row::compare(
                "bsp",
                &format!(
                    "{name}, {fabric}, communication time (supersteps' time outside compute, slowest node), two-sided vs one-sided"
                ),
                communication_ns(&measured[two.name])?,
                communication_ns(&measured[one.name])?,
                Some(Target::AtLeast(1.3)),
            ));
            for setup in [one, two] {
                let run = &measured[setup.name];
                notes.push(format!(
                    "bsp: {name}, {}: {} messages, {} bytes, {} WRITEs or SENDs posted, {} supersteps",
                    setup.name,
                    total(run, "messages"),
                    total(run, "bytes_sent"),
                    total(run, "writes"),
                    run["nodes"][0]["supersteps"].as_array().map_or(0, Vec::len)
                ));
            }
        }
        for (tcp, mpi) in [(&TWO_NODES, &MPI_TWO), (&FOUR_NODES, &MPI_FOUR)] {
            if setups.contains(&mpi) {
                rows.push(Row::compare(
                    "bsp",
                    &format!("{name}, {} vs {}, edges/s of compute", mpi.name, tcp.name),
                    rate(mpi)?,
                    rate(tcp)?,
                    None,
                ));
            }
        }
        if setups.contains(&&FOUR_NODES) {
            rows.push(Row::compare(
                "bsp",
                &format!(
                    "{name}, {} vs {} (2 cores: the protocol's overhead, not a speedup), edges/s of compute",
                    FOUR_NODES.name, ENGINE.name
                ),
                rate(&FOUR_NODES)?,
                rate(&ENGINE)?,
                None,
            ));
        }
        runs.insert((*name).to_owned(), Value::Object(measured));
    }
    notes.push(format!(
        "bsp: R-MAT scale {SCALE} (Kronecker, Graph500 parameters, ids permuted), undirected, deduplicated, no self-loops, {edges} directed edges; BFS from vertex {source} (the first from 1 on with edges); each configuration ran {reps} times interleaved (BFS {bfs_reps}), the median compute time is kept (a job's: its slowest node's)"
    ));
    // Task migration against none on a skewed graph (the hubs at the
    // lowest ids, so on the first node): each node's busy time, slowest
    // over fastest, and the tasks migrated.
    let (skewed, _) = rmat(cx, SCALE, Shape::Symmetric, true, "bsp", &mut notes)?;
    let mut balance = serde_json::Map::new();
    for (name, algorithm, _, runs_each) in algorithms.iter().filter(|a| a.0 != "WCC") {
        let measured = measure(
            bins,
            None,
            &skewed,
            algorithm,
            &[&TWO_NODES, &NO_BALANCE],
            *runs_each,
        )?;
        for setup in [&TWO_NODES, &NO_BALANCE] {
            let run = &measured[setup.name];
            let busy: Vec<f64> = run["nodes"]
                .as_array()
                .context("a bsp report without nodes")?
                .iter()
                .map(|node| num(node, "/busy_ns"))
                .collect::<Result<_>>()?;
            let (slowest, fastest) = busy
                .iter()
                .fold((0.0f64, f64::MAX), |(s, f), &b| (s.max(b), f.min(b)));
            rows.push(Row::compare(
                "bsp",
                &format!(
                    "{name} on the skewed graph (ids as drawn), {}: busy time of the slowest node / the fastest ({} tasks migrated, compute {:.0} ms)",
                    setup.name,
                    total(run, "migrated"),
                    compute_ns(run)? / 1e6
                ),
                slowest,
                fastest,
                None,
            ));
        }
        balance.insert((*name).to_owned(), Value::Object(measured));
    }
    let scaling = strong_scaling(cx, &mut rows, &mut notes)?;
    let directed = directed_memory(cx, &mut rows, &mut notes)?;
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // A vertex count.
    let vertices = num(&facts, "/vertices")? as u64;
    let peers = bsp_peers::compare(
        cx,
        (&graph, vertices),
        &algorithms,
        &source,
        &mut rows,
        &mut notes,
    )?;
    Ok(json!({
        "bench": "bsp",
        "params": { "scale": SCALE, "source": source, "reps": reps, "bfs_reps": bfs_reps },
        "files": { "graph": graph },
        "reused": generate.is_null(),
        "generate": generate,
        "runs": runs,
        "peers": peers,
        "balance": balance,
        "scaling": scaling,
        "directed": directed,
        "rows": rows,
        "summary_notes": notes,
    }))
}

/// `graph`'s facts as `bench-latency graph` reports them, and the BFS
/// source: the first vertex from 1 on with edges.
fn graph_facts(bins: &Bins, graph: &Path) -> Result<(Value, String)> {
    let facts = capture_json(
        &bins.bench_latency,
        &argv!["graph", graph, "--from", "1", "--count", "1"],
    )?;
    let source = facts["picked"][0]
        .as_u64()
        .context("bench-latency graph picked no source")?
        .to_string();
    Ok((facts, source))
}

/// Strong scaling on Kronecker [`SCALING_SCALE`]: PageRank and BFS on 1, 2
/// and 4 tcp node processes of one thread each, alternating; a row each
/// for 2 and 4 nodes: compute time of one node over theirs, with the
/// messages and bytes they send. This machine has 2 cores, so 4 processes
/// share them: the rows show what the protocol costs, not a speedup.
fn strong_scaling(cx: &Context, rows: &mut Vec<Row>, notes: &mut Vec<String>) -> Result<Value> {
    let (graph, _) = symmetric_rmat(cx, SCALING_SCALE, "bsp", notes)?;
    let reps = cx.args.reps.max(1);
    let (_, source) = graph_facts(cx.bins, &graph)?;
    let setups = [&ONE_NODE, &TWO_NODES, &FOUR_NODES];
    let mut all = serde_json::Map::new();
    for (name, algorithm) in [
        ("PageRank", vec!["pagerank", "--iterations", "20"]),
        ("BFS", vec!["bfs", "--source", &source]),
    ] {
        let measured = measure(cx.bins, None, &graph, &algorithm, &setups, reps)?;
        let one = compute_ns(&measured[ONE_NODE.name])?;
        for setup in [&TWO_NODES, &FOUR_NODES] {
            let run = &measured[setup.name];
            rows.push(Row::compare(
                "bsp",
                &format!(
                    "strong scaling, {name} on Kronecker {SCALING_SCALE}, {} vs {} (2 cores: the protocol's overhead, not a speedup; {} messages, {} bytes sent), compute time of one over theirs",
                    setup.name,
                    ONE_NODE.name,
                    total(run, "messages"),
                    total(run, "bytes_sent"),
                ),
                one,
                compute_ns(run)?,
                None,
            ));
        }
        all.insert(name.to_owned(), Value::Object(measured));
    }
    notes.push(format!(
        "bsp: strong scaling on R-MAT scale {SCALING_SCALE} (symmetric, ids permuted), BFS from vertex {source}, {reps} interleaved runs per setup, the median kept"
    ));
    Ok(Value::Object(all))
}

/// Memory on directed graphs (no symmetric list to pull along: a node that
/// pulls holds the transpose of its vertices' in-edges): PageRank (20
/// iterations) and WCC on the directed Kronecker graphs of [`SCALE`] and
/// [`SCALING_SCALE`], on 2 and 4 tcp nodes of one thread, and PageRank
/// pushing only on 2 (RGraph's one mode, which keeps no transpose): the
/// largest node's peak resident memory against its share of the file,
/// with the load time. A node's own code is part of its resident memory
/// (the binary and the libraries it links, about 16 MB here), which is
/// most of a share of the smaller graph at 4 nodes.
fn directed_memory(cx: &Context, rows: &mut Vec<Row>, notes: &mut Vec<String>) -> Result<Value> {
    let reps = cx.args.reps.max(1);
    let mut all = serde_json::Map::new();
    for scale in [SCALE, SCALING_SCALE] {
        let (graph, _) = rmat(cx, scale, Shape::Simple, false, "bsp", notes)?;
        let graph_bytes = file_bytes(&graph)?;
        for (name, algorithm, setups) in [
            (
                "PageRank",
                vec!["pagerank", "--iterations", "20"],
                vec![&TWO_NODES, &FOUR_NODES, &TWO_NODES_PUSH],
            ),
            ("WCC", vec!["wcc"], vec![&TWO_NODES, &FOUR_NODES]),
        ] {
            let measured = measure(cx.bins, None, &graph, &algorithm, &setups, reps)?;
            for setup in setups {
                let label = format!("{name} on the directed Kronecker {scale}");
                rows.push(memory_row(
                    &label,
                    setup,
                    &measured[setup.name],
                    graph_bytes,
                )?);
            }
            all.insert(
                format!("{name}, directed, scale {scale}"),
                Value::Object(measured),
            );
        }
    }
    notes.push(format!(
        "bsp: directed R-MAT scales {SCALE} and {SCALING_SCALE} (ids permuted, deduplicated, no self-loops), {reps} interleaved runs per setup, the median compute time kept; a node's peak resident memory includes its code (about 16 MB: the quiver binary and the libraries it links)"
    ));
    Ok(Value::Object(all))
}

/// The memory row of a job: its largest node's peak resident memory
/// against its share of the graph file (`graph_bytes` over its nodes), the
/// paper's measure, with the slowest node's load time and the resident
/// code of the node with the most (the binary and its libraries: the
/// paper's graphs of 40-520 GB dwarf it, a share of Kronecker 20 does
/// not).
fn memory_row(label: &str, setup: &Setup, run: &Value, graph_bytes: f64) -> Result<Row> {
    let nodes = run["nodes"]
        .as_array()
        .context("a job report without nodes")?;
    let most = |key: &str| {
        nodes
            .iter()
            .map(|node| num(node, key))
            .try_fold(0.0, |most: f64, value| {
                Ok::<_, anyhow::Error>(most.max(value?))
            })
    };
    #[allow(clippy::cast_precision_loss)] // A handful of nodes.
    let share = graph_bytes / nodes.len() as f64;
    let (peak, code) = (most("/peak_rss_bytes")?, most("/code_rss_bytes")?);
    Ok(Row::compare(
        "bsp",
        &format!(
            "memory: {label}, {}, largest node's peak RSS vs its share of the file (load {:.0} ms; {:.1} MB of it code, the same on any graph: {:.2}x without)",
            setup.name,
            most("/load_ns")? / 1e6,
            code / 1e6,
            (peak - code) / share,
        ),
        peak,
        share,
        Some(Target::AtMost(1.5)),
    ))
}

/// The size of the file at `path`, in bytes.
fn file_bytes(path: &Path) -> Result<f64> {
    #[allow(clippy::cast_precision_loss)] // A file size far below 2^52.
    let bytes = std::fs::metadata(path)
        .with_context(|| format!("reading the size of {}", path.display()))?
        .len() as f64;
    Ok(bytes)
}

/// Runs `algorithm` under every setup `reps` times, interleaved; keeps each
/// setup's run with the median compute time.
fn measure(
    bins: &Bins,
    mpi: Option<&Mpi>,
    graph: &Path,
    algorithm: &[&str],
    setups: &[&Setup],
    reps: u32,
) -> Result<serde_json::Map<String, Value>> {
    let mut all: Vec<Vec<Value>> = vec![Vec::new(); setups.len()];
    for _ in 0..reps {
        for (setup, runs) in setups.iter().zip(&mut all) {
            let (program, mut args) = match (setup.ranks, mpi) {
                (None, _) => (&bins.quiver, Vec::new()),
                (Some(n), Some(mpi)) => (&mpi.mpirun, mpi.ranks(n, &bins.quiver)),
                (Some(_), None) => bail!("{}: a setup under mpirun without Open MPI", setup.name),
            };
            args.extend(argv!["--json", "bsp"]);
            args.extend(algorithm.iter().map(OsString::from));
            args.push(graph.into());
            args.extend(setup.flags.iter().map(OsString::from));
            runs.push(capture_json(program, &args)?);
        }
    }
    let mut kept = serde_json::Map::new();
    for (setup, mut runs) in setups.iter().zip(all) {
        runs.sort_by(|a, b| {
            let (a, b) = (
                compute_ns(a).unwrap_or(f64::MAX),
                compute_ns(b).unwrap_or(f64::MAX),
            );
            a.total_cmp(&b)
        });
        kept.insert(setup.name.to_owned(), runs.swap_remove(runs.len() / 2));
    }
    Ok(kept)
}

/// A run's compute time: the reference's, or the slowest node's.
pub(super) fn compute_ns(run: &Value) -> Result<f64> {
    if let Some(ns) = run["reference_ns"].as_f64() {
        return Ok(ns);
    }
    run["nodes"]
        .as_array()
        .context("a bsp report without nodes")?
        .iter()
        .map(|node| num(node, "/compute_ns"))
        .try_fold(0.0, |most: f64, ns| Ok(most.max(ns?)))
}

/// A job's communication time: each node's supersteps' time outside its
/// workers' compute (sending, receiving, waiting at the barriers), summed
/// over supersteps; the largest over nodes.
fn communication_ns(run: &Value) -> Result<f64> {
    let nodes = run["nodes"]
        .as_array()
        .context("a bsp report without nodes")?;
    nodes.iter().try_fold(0.0, |most: f64, node| {
        let steps = node["supersteps"]
            .as_array()
            .context("a node report without supersteps")?;
        let outside = steps.iter().try_fold(0.0, |sum, step| {
            Ok::<_, anyhow::Error>(sum + num(step, "/ns")? - num(step, "/busy_ns")?)
        })?;
        Ok(most.max(outside))
    })
}

/// A count summed over a job's nodes.
fn total(run: &Value, key: &str) -> u64 {
    run["nodes"].as_array().map_or(0, |nodes| {
        nodes.iter().filter_map(|n| n[key].as_u64()).sum()
    })
}
