//! `cargo xtask bench io`: quiver-io's block loading (io_uring with
//! O_DIRECT, and pread) against `dd` on one file on the real disk, through
//! `bench-io`.

use std::ffi::OsString;

use anyhow::{Context as _, Result};
use serde_json::{json, Value};

use super::{capture_json, num, Context};
use crate::report::{Row, Target};

pub(super) fn run(cx: &Context) -> Result<Value> {
    let args = cx.args;
    let mut argv = Vec::from(argv![
        "run",
        "--size",
        args.size.to_string(),
        "--reps",
        args.reps.to_string(),
        "--dir",
        cx.data,
    ]);
    if let Some(b) = args.seq_batch {
        argv.extend(argv!["--seq-batch", b.to_string()]);
    }
    if let Some(n) = args.rand_reads {
        argv.extend(argv!["--rand-reads", n.to_string()]);
    }
    let mut report = capture_json(&cx.bins.bench_io, &argv)?;
    let (rows, notes) = io_rows(&report)?;
    report["rows"] = serde_json::to_value(rows).context("serialising rows")?;
    report["summary_notes"] = json!(notes);
    Ok(report)
}

fn io_rows(r: &Value) -> Result<(Vec<Row>, Vec<String>)> {
    let batch = num(r, "/config/seq_batch_blocks")?;
    let depth = num(r, "/config/rand_queue_depth")?;
    let mib = num(r, "/file/bytes")? / f64::from(1 << 20);
    let reps = num(r, "/config/reps")?;
    let mut notes = vec![format!(
        "io: {mib:.0} MiB file, {reps} repetitions (median; each method's spread in io.json)"
    )];
    if let Some(list) = r["notes"].as_array() {
        notes.extend(
            list.iter()
                .filter_map(Value::as_str)
                .map(|n| format!("io: {n}")),
        );
    }
    // Whether the "uring" reader really was io_uring with O_DIRECT.
    let uring_ok = r.pointer("/readers/uring/backend") == Some(&json!("uring"))
        && r.pointer("/readers/uring/direct") == Some(&json!(true));
    if !uring_ok {
        notes.push("io: the uring reader fell back (see readers in io.json); its rows do not measure io_uring".into());
    }
    for m in [
        "dd_seq",
        "uring_seq",
        "pread_seq",
        "uring_rand",
        "pread_rand",
    ] {
        let lo = num(r, &format!("/results/{m}/mb_per_s_min"))?;
        let hi = num(r, &format!("/results/{m}/mb_per_s_max"))?;
        if hi > 1.25 * lo {
            notes.push(format!(
                "io: {m} was noisy: {lo:.0} to {hi:.0} MB/s across repetitions"
            ));
        }
    }
    let rows = vec![
        Row::compare(
            "io",
            &format!("sequential 8 MiB blocks, io_uring ({batch} in flight) vs dd bs=4M, MB/s"),
            num(r, "/results/uring_seq/mb_per_s")?,
            num(r, "/results/dd_seq/mb_per_s")?,
            Some(Target::AtLeast(0.90)),
        ),
        Row::compare(
            "io",
            "sequential 8 MiB blocks, pread vs dd bs=4M, MB/s",
            num(r, "/results/pread_seq/mb_per_s")?,
            num(r, "/results/dd_seq/mb_per_s")?,
            None,
        ),
        Row::compare(
            "io",
            &format!("random 4 KiB reads, io_uring (QD {depth}) vs pread (QD 1), IOPS"),
            num(r, "/results/uring_rand/iops")?,
            num(r, "/results/pread_rand/iops")?,
            None,
        ),
    ];
    Ok((rows, notes))
}
