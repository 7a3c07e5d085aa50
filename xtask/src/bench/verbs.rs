//! `cargo xtask bench verbs`: quiver-verbs' latency and bandwidth on each
//! fabric (tcp between two processes, loopback with its cost model, mpi
//! under `mpirun` when Open MPI is installed), tcp against a plain TCP
//! ping-pong between the same two nodes.

use std::ffi::OsString;

use anyhow::{Context as _, Result};
use serde_json::{json, Value};

use super::{capture_json, num, Bins, Context, Mpi};
use crate::report::{Row, Target};

/// `quiver verbs bench` on each fabric: tcp between two processes (`reps`
/// runs, the one with the median READ/ping-pong ratio kept) and loopback
/// with the cost model.
pub(super) fn run(cx: &Context) -> Result<Value> {
    let (bins, args) = (cx.bins, cx.args);
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
/// installed.
fn mpi_bench(bins: &Bins) -> Result<Option<Value>> {
    let Some(mpi) = Mpi::build()? else {
        return Ok(None);
    };
    let mut args = mpi.ranks(2, &bins.quiver);
    args.extend(argv![
        "verbs", "bench", "--fabric", "mpi", "--ops", "20000", "--json"
    ]);
    capture_json(&mpi.mpirun, &args).map(Some)
}
