//! `cargo xtask bench ingest`: edge-list conversion with the release driver
//! (`quiver convert`) from a shuffled text export of an R-MAT graph, from a
//! cold page cache: input throughput and peak memory against the budget.

use std::ffi::OsString;
use std::fs;
use std::path::Path;

use anyhow::{Context as _, Result};
use serde_json::{json, Value};

use super::{
    capture, capture_json, generate_rmat, num, reuse_or, Context, Shape, EDGE_FACTOR, SEED,
};
use crate::report::{Row, Target};

pub(super) fn run(cx: &Context) -> Result<Value> {
    let (bins, data, args) = (cx.bins, cx.data, cx.args);
    let scale = args.scale.to_string();
    let stem = format!("rmat-s{scale}-ef{EDGE_FACTOR}-seed{SEED}-perm");
    let graph = data.join(format!("{stem}.qcsr"));
    let text = data.join(format!("{stem}.shuffled.txt"));
    let converted = data.join(format!("{stem}.converted.qcsr"));
    let mut notes = Vec::new();

    // Data made by the driver is written under a temporary name and renamed,
    // so a file that exists is complete; its name carries its parameters.
    let generate = reuse_or(&graph, "ingest", &mut notes, || {
        // The text depends on the graph: never pair a new graph with old text.
        if text.exists() {
            fs::remove_file(&text).with_context(|| format!("removing stale {}", text.display()))?;
        }
        generate_rmat(bins, &graph, args.scale, Shape::AsDrawn, false)
    })?;
    let export = reuse_or(&text, "ingest", &mut notes, || {
        // Export writes edges sorted by source; real edge lists (and R-MAT's
        // own output) are in no such order, and a sorted input would flatter
        // the sort. Shuffle deterministically, with the graph file as the
        // random source.
        let sorted = data.join(format!("{stem}.sorted.txt"));
        let report = capture_json(
            &bins.quiver,
            &argv!["--json", "export", &graph, "-o", &sorted],
        )?;
        capture(
            Path::new("shuf"),
            &argv![
                format!("--random-source={}", graph.display()),
                "-o",
                &text,
                &sorted,
            ],
        )?;
        fs::remove_file(&sorted).with_context(|| format!("removing {}", sorted.display()))?;
        Ok(report)
    })?;
    let info = capture_json(&bins.quiver, &argv!["--json", "info", &graph])?;

    // The converter reads its input through the page cache: start cold.
    capture(&bins.bench_io, &argv!["drop-cache", &text])?;
    let mem = args.mem.to_string();
    let convert = capture_json(
        &bins.quiver,
        &argv![
            "--json",
            "convert",
            &text,
            "-o",
            &converted,
            "--mem",
            &mem,
            "--vertices",
            (1u64 << args.scale).to_string(),
            "--work-dir",
            &data,
        ],
    )?;

    let edges_in = num(&info, "/edges")?;
    let edges_out = num(&convert, "/edges")?;
    if (edges_in - edges_out).abs() > 0.5 {
        notes.push(format!(
            "ingest: MISMATCH: the converted graph has {edges_out} edges, the generated one {edges_in}"
        ));
    }
    let budget = args.mem as f64;
    let peak = convert.pointer("/peak_mem_bytes").and_then(Value::as_f64);
    let input_bytes = num(&convert, "/input_bytes")?;
    notes.push(format!(
        "ingest: R-MAT scale {scale}, {edges_in} edges, {:.0} MiB of text; {} sorted runs spilled, {} merge passes",
        input_bytes / f64::from(1 << 20),
        convert.pointer("/sort/runs_spilled").unwrap_or(&Value::Null),
        convert.pointer("/sort/merge_passes").unwrap_or(&Value::Null),
    ));
    let mut rows = vec![Row::value(
        "ingest",
        "quiver convert, input MB/s (one thread: per core = total)",
        num(&convert, "/input_mb_per_s")?,
    )];
    match peak {
        Some(peak) => rows.push(Row::compare(
            "ingest",
            "quiver convert, peak memory vs --mem budget, MiB",
            peak / f64::from(1 << 20),
            budget / f64::from(1 << 20),
            Some(Target::AtMost(1.10)),
        )),
        None => notes.push("ingest: the driver could not read its peak memory (no /proc?)".into()),
    }
    rows.push(Row::value(
        "ingest",
        "quiver convert, wall time, s",
        num(&convert, "/wall_ns")? / 1e9,
    ));
    Ok(json!({
        "bench": "ingest",
        "params": {
            "model": "rmat",
            "scale": args.scale,
            "edge_factor": EDGE_FACTOR,
            "seed": SEED,
            "mem_budget_bytes": args.mem,
        },
        "files": { "graph": graph, "text": text, "converted": converted },
        "reused": { "graph": generate.is_null(), "text": export.is_null() },
        "generate": generate,
        "export": export,
        "info": info,
        "convert": convert,
        "rows": rows,
        "summary_notes": notes,
    }))
}
