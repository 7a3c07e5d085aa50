//! `cargo xtask bench meta`: GraphMeta's measurements with the release
//! driver, each `quiver meta bench` starting its own cluster of server
//! processes on this machine: Darshan-like ingest on 1 and 4 servers (32
//! clients) and with each partitioner on 4; ingest and mdtest creates in
//! one directory at the default batch and in batches of 4,096 writes, on 4
//! servers alternating with the same writes straight into one RocksDB (the
//! ceiling of this machine), against the targets; traversals of 2, 4 and 8 steps on a permuted R-MAT graph
//! (a = 0.45, b = 0.15, c = 0.15, 2^16 vertices, 16 edges each, 128-byte
//! attributes) on 8 servers, DIDO against edge-cut, vertex-cut and GIGA+,
//! prefetching off and on, the asynchronous engine, and as of
//! a past time against the newest; StatComm and StatReads of a scan and a
//! 3-step traversal from one vertex per out-degree on 32 servers (R-MAT
//! 2^14 vertices, 64 edges each), each partitioner against DIDO.

use std::collections::BTreeMap;
use std::ffi::OsString;

use anyhow::{Context as _, Result};
use serde_json::{json, Value};

use super::{capture_json, num, Context};
use crate::report::{Row, Spread, Target};

impl Spread {
    /// Nanoseconds as milliseconds.
    fn shown_ms(&self) -> String {
        format!(
            "{:.0}, range {:.0}-{:.0}",
            self.median / 1e6,
            self.min / 1e6,
            self.max / 1e6
        )
    }

    fn shown(&self) -> String {
        format!("{:.0}, range {:.0}-{:.0}", self.median, self.min, self.max)
    }
}

const CLIENTS: &str = "32";
/// The partitioners compared, DIDO first; [`OTHERS`] are its baselines.
const PARTITIONERS: [&str; 4] = ["dido", "edge-cut", "vertex-cut", "giga"];
const OTHERS: &[&str] = PARTITIONERS.split_at(1).1;
const INSERT_VERTICES: &str = "100000";
/// Writes a request: the driver's default (for latency), and batching for
/// throughput.
const DEFAULT_BATCH: &str = "256";
const BIG_BATCH: &str = "4096";
/// Runs of each side of the ceiling comparison.
const CEILING_ROUNDS: usize = 3;
const TRAVERSE_SERVERS: &str = "8";
const TRAVERSE_SCALE: &str = "16";
/// Runs of each partitioner's traversals, alternating.
const TRAVERSE_ROUNDS: usize = 5;
// Figs. 12-15: the paper's 32 servers; its R-MAT has 100K vertices and 12.8M
// edges, ours 16K and 1M, with the same skew (degrees up to about 800).
const DEGREE_SERVERS: &str = "32";
const DEGREE_SCALE: &str = "14";
const DEGREE_EDGE_FACTOR: &str = "64";

pub(super) fn run(cx: &Context) -> Result<Value> {
    let bench = |args: &[&str]| -> Result<Value> {
        eprintln!("xtask: meta bench {}", args.join(" "));
        let mut argv: Vec<OsString> = vec!["--json".into(), "meta".into(), "bench".into()];
        argv.extend(args.iter().map(OsString::from));
        argv.extend(["--clients", CLIENTS].map(OsString::from));
        capture_json(&cx.bins.quiver, &argv)
    };
    let rate = |r: &Value| num(r, "/load/writes_per_s");
    let mut rows = Vec::new();
    let mut runs = serde_json::Map::new();

    let insert = |servers: &str, partitioner: &str| {
        bench(&[
            "insert",
            "--servers",
            servers,
            "--partitioner",
            partitioner,
            "--vertices",
            INSERT_VERTICES,
        ])
    };
    let one = insert("1", "dido")?;
    let four = insert("4", "dido")?;
    rows.push(Row::compare(
        "meta",
        "insert writes/s, 4 servers / 1 server",
        rate(&four)?,
        rate(&one)?,
        None,
    ));
    runs.insert("insert_1_dido".into(), one);
    for &partitioner in OTHERS {
        let r = insert("4", partitioner)?;
        rows.push(Row::compare("meta", &format!("insert writes/s on 4 servers, dido / {partitioner} (paper: vertex-cut > edge-cut, giga > dido)"), rate(&four)?, rate(&r)?, None));
        runs.insert(format!("insert_4_{partitioner}"), r);
    }
    runs.insert("insert_4_dido".into(), four);

    // The ceiling: each ingest at the default batch and at BIG_BATCH, on 4
    // servers and straight into one RocksDB (`--raw-rocksdb`: the same
    // keys and values, WriteBatches of the same size, the same options),
    // alternating, CEILING_ROUNDS times each; medians, with ranges.
    for batch in [DEFAULT_BATCH, BIG_BATCH] {
        for workload in ["insert", "mdtest"] {
            let mut servers = Vec::new();
            let mut raw = Vec::new();
            for _ in 0..CEILING_ROUNDS {
                let args = [workload, "--vertices", INSERT_VERTICES, "--batch", batch];
                raw.push(bench(&[&args[..], &["--raw-rocksdb"]].concat())?);
                servers.push(bench(&[&args[..], &["--servers", "4"]].concat())?);
            }
            let rates = |runs: &[Value]| -> Result<Vec<f64>> { runs.iter().map(rate).collect() };
            let (on_servers, ceiling) = (Spread::of(rates(&servers)?), Spread::of(rates(&raw)?));
            let (target, paper) = match (workload, batch) {
                ("insert", DEFAULT_BATCH) => (Some(Target::AtLeast(0.35)), "target 0.35"),
                ("insert", _) => (Some(Target::AtLeast(0.5)), "target 0.5"),
                _ => (None, "no target"),
            };
            rows.push(Row::compare(
                "meta",
                &format!("{workload}, batches of {batch}: 4 servers' writes/s (median {}) / one raw RocksDB's, the ceiling (median {}); {CEILING_ROUNDS} alternating runs each; {paper}", on_servers.shown(), ceiling.shown()),
                on_servers.median,
                ceiling.median,
                target,
            ));
            if workload == "insert" {
                rows.push(Row::compare("meta", &format!("insert, 4 servers, batches of {batch}: writes/s (median) / the 200K/s target"), on_servers.median, 200_000.0, Some(Target::AtLeast(1.0))));
            } else {
                rows.push(Row::compare("meta", &format!("mdtest, 4 servers, batches of {batch}: creates/s (median) / the 150K/s target"), on_servers.median / 2.0, 150_000.0, Some(Target::AtLeast(1.0))));
            }
            runs.insert(format!("{workload}_4_batch{batch}"), Value::Array(servers));
            runs.insert(
                format!("{workload}_raw_rocksdb_batch{batch}"),
                Value::Array(raw),
            );
        }
    }

    // One run of `workload` on `servers` per partitioner, with `rest` of
    // the flags, by partitioner name.
    let by_partitioner =
        |workload: &str, servers: &str, rest: &[&str]| -> Result<serde_json::Map<String, Value>> {
            let mut runs = serde_json::Map::new();
            for partitioner in PARTITIONERS {
                let mut args = vec![workload, "--servers", servers, "--partitioner", partitioner];
                args.extend_from_slice(rest);
                runs.insert(partitioner.into(), bench(&args)?);
            }
            Ok(runs)
        };
    // Every partitioner, alternating, TRAVERSE_ROUNDS times: times are
    // medians (with ranges), counts are the same in every run.
    let mut traverse: BTreeMap<&str, Vec<Value>> = BTreeMap::new();
    for _ in 0..TRAVERSE_ROUNDS {
        for p in PARTITIONERS {
            let args = [
                "traverse",
                "--servers",
                TRAVERSE_SERVERS,
                "--partitioner",
                p,
            ];
            let run = bench(&[&args[..], &["--scale", TRAVERSE_SCALE]].concat())?;
            traverse.entry(p).or_default().push(run);
        }
    }
    // A traversal row's `field` in every run, by (depth, engine,
    // prefetching, as of the past); `past` rows and the newest rows beside
    // them ran with every edge written twice, the others once.
    let values = |p: &str,
                  steps: u64,
                  engine: &str,
                  prefetch: bool,
                  past: Option<bool>,
                  field: &str|
     -> Result<Spread> {
        let mut xs = Vec::new();
        for run in &traverse[p] {
            let rows = run["traversals"]
                .as_array()
                .context("traverse report without traversals")?;
            let (past, versions) = past.map_or((false, 1), |past| (past, 2));
            let found = rows.iter().find(|r| {
                r["steps"] == steps
                    && r["engine"] == engine
                    && r["prefetch"] == prefetch
                    && r["past"] == past
                    && r["versions"] == versions
            });
            xs.push(found.and_then(|r| r[field].as_f64()).with_context(|| {
                format!("{p}: no {steps}-step {engine} row (prefetch {prefetch}, past {past})")
            })?);
        }
        Ok(Spread::of(xs))
    };
    let row =
        |p: &str, steps: u64, engine: &str, prefetch: bool, past: Option<bool>, field: &str| {
            values(p, steps, engine, prefetch, past, field).map(|s| s.median)
        };
    // Servers prefetch only where the host has a core beyond its servers
    // (`--prefetch auto`); on a smaller one both runs are the same setting.
    let prefetched = row("dido", 8, "sync", true, None, "prefetch_hits")? > 0.0;
    // The targets at 4 and 8 steps (the paper: DIDO 15% and 19%
    // faster than edge-cut).
    for steps in [2, 4, 8] {
        let deep = steps >= 4;
        let time = |p: &str, prefetch: bool| values(p, steps, "sync", prefetch, None, "ns");
        let dido = time("dido", true)?;
        for &other in OTHERS {
            let theirs = time(other, true)?;
            let target = (deep && other == "edge-cut").then_some(Target::AtLeast(1.15));
            rows.push(Row::compare(
                "meta",
                &format!("{steps}-step traversal with prefetch, {other} time / dido time, medians of {TRAVERSE_ROUNDS} alternating runs ({other} {}, dido {} ms)", theirs.shown_ms(), dido.shown_ms()),
                theirs.median,
                dido.median,
                target,
            ));
            let comm = |p: &str| row(p, steps, "sync", true, None, "stat_comm");
            rows.push(Row::compare(
                "meta",
                &format!("{steps}-step traversal: StatComm {other} / dido (dido the lowest)"),
                comm(other)?,
                comm("dido")?,
                Some(Target::AtLeast(1.0)),
            ));
        }
        for p in PARTITIONERS {
            rows.push(Row::value(
                "meta",
                &format!("{steps}-step traversal, {p}: StatReads"),
                row(p, steps, "sync", true, None, "stat_reads")?,
            ));
        }
        let without = time("dido", false)?;
        let (label, target) = if prefetched {
            ("", deep.then_some(Target::AtLeast(1.1)))
        } else {
            (
                "; the servers did not prefetch (auto: no core beyond the servers here), so the two differ only in their order in the run",
                None,
            )
        };
        rows.push(Row::compare(
            "meta",
            &format!("{steps}-step traversal, dido: time without / with prefetching, medians ({} / {} ms){label}", without.shown_ms(), dido.shown_ms()),
            without.median,
            dido.median,
            target,
        ));
    }
    for steps in [2, 4, 8] {
        for p in PARTITIONERS {
            rows.push(Row::compare(
                "meta",
                &format!("{steps}-step traversal, {p}: time asynchronous / synchronous with prefetching (paper: Pre-Sync matches Async with dido and giga)"),
                row(p, steps, "async", false, None, "ns")?,
                row(p, steps, "sync", true, None, "ns")?,
                None,
            ));
        }
    }
    rows.push(Row::compare(
        "meta",
        "8-step traversal, dido, every edge written twice: as of the first versions / newest, time",
        row("dido", 8, "sync", true, Some(true), "ns")?,
        row("dido", 8, "sync", true, Some(false), "ns")?,
        None,
    ));
    let traverse = traverse
        .into_iter()
        .map(|(p, runs)| (p.to_string(), Value::Array(runs)))
        .collect();
    runs.insert("traverse".into(), Value::Object(traverse));

    let degrees = by_partitioner(
        "degrees",
        DEGREE_SERVERS,
        &["--scale", DEGREE_SCALE, "--edge-factor", DEGREE_EDGE_FACTOR],
    )?;
    // A per-degree sum: range 0 is degrees up to the threshold, 1 above.
    let sum = |p: &str, range: usize, op: &str, field: &str| {
        num(&degrees[p], &format!("/degree_sums/{range}/{op}/{field}"))
    };
    let threshold = num(&degrees["dido"], "/degree_sums/0/max_degree")?;
    for (range, label) in [
        (0, format!("degree <= {threshold}")),
        (1, format!("degree > {threshold}")),
    ] {
        for (op, op_label) in [("scan", "scan"), ("traversal", "3-step traversal")] {
            for (field, field_label) in [("stat_comm", "StatComm"), ("stat_reads", "StatReads")] {
                for &other in OTHERS {
                    // The paper (Figs. 12, 14): DIDO communicates least in
                    // every case, which shows once vertices split.
                    let paper =
                        (field == "stat_comm" && range == 1).then_some(Target::AtLeast(1.0));
                    rows.push(Row::compare(
                        "meta",
                        &format!("{op_label} from one vertex per out-degree, {label}: {field_label} {other} / dido"),
                        sum(other, range, op, field)?,
                        sum("dido", range, op, field)?,
                        paper,
                    ));
                }
            }
        }
    }
    runs.insert("degrees".into(), Value::Object(degrees));

    Ok(json!({
        "bench": "meta",
        "params": { "clients": CLIENTS, "insert_vertices": INSERT_VERTICES, "traverse_servers": TRAVERSE_SERVERS, "traverse_scale": TRAVERSE_SCALE, "degree_servers": DEGREE_SERVERS, "degree_scale": DEGREE_SCALE, "degree_edge_factor": DEGREE_EDGE_FACTOR },
        "runs": runs,
        "rows": rows,
        "summary_notes": [format!("meta: servers are processes on this 2-core machine with 32 clients in one more; traverse on permuted R-MAT scale {TRAVERSE_SCALE} (a = 0.45, b = 0.15, c = 0.15), {TRAVERSE_SERVERS} servers, reverse edges written")],
    }))
}
