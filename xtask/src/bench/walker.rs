//! `cargo xtask bench walker`: the walker engine's GraphWalker scheduling
//! against DrunkardMob's iteration baseline, side by side on one R-MAT graph
//! with the release driver (`quiver walk ... --json`), and the in-memory
//! walker against dependent random memory reads (`bench-latency chase`).
//!
//! The graph is `rmat-u<S>-perm.qcsr` in `target/bench/data` (R-MAT, 16 edges per
//! vertex, seed 1, undirected, deduplicated, no self-loops), made once and
//! reused; G is its file size. Every out-of-core run reads with
//! `--io direct`, spills walks to `target/bench/data`, and starts with the
//! graph's pages dropped from the page cache.
//!
//! - Query applications (PPR, SimRank) run with `--mem` G/4 (rounded to
//!   MiB) and each mode's default blocks: GraphWalker's self-adaptive loads
//!   of 2 MiB fine blocks (G/64 on graphs too small for 2 MiB to fit the
//!   budget), iteration's static rule. Their source is the first vertex
//!   from 1 on with out-degree >= 1 (a rule from before ids were permuted,
//!   when vertex 0 was R-MAT's biggest hub); SimRank pairs it with the next
//!   such vertex.
//! - Whole-graph walks (RWD, raw walks of length 10 and 80) run at `--mem`
//!   G/8, G/4, G/2 and "all": 1.4 G, rounded up to MiB. The engine keeps a
//!   quarter of what the walk pools leave for walks in flight, so the block
//!   cache gets about 0.75 of the budget: 1.25 G would cache only ~94% of
//!   the graph, 1.4 G caches all of it. Both modes get `--block-size` G/16
//!   rounded down to 4 KiB and `--fixed-blocks` (no adaptive grouping), so
//!   they differ in scheduling only. Below scale 22 `--vertex-threshold` is
//!   scaled down with the graph (100,000 >> (22 - S)) so that GraphWalker
//!   switches to single-vertex reads at the same share of the walks as at
//!   scale 22, where the engine's default applies. `--l80-share` cuts the
//!   length-80 workload's walks to a share of |V|.
//! - In memory: 10M raw walks of length 10 on one thread (then two) against
//!   a single-thread chase through a random cycle in a table as large as the
//!   graph's targets. The walker's wall time includes reading the graph.
//!
//! Peak memory is the engine's own accounting (`peak_mem_bytes`: cached
//! blocks, pools, walks in flight), not the process's resident set.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::fs;
use std::path::Path;
use std::time::Instant;

use anyhow::{Context as _, Result};
use quiver_io::size::format_bytes;
use quiver_walker::{Config, FINE_BLOCK};
use serde_json::{json, Value};

use super::{capture, capture_json, num, symmetric_rmat, Bins, Context, EDGE_FACTOR, SEED};
use crate::report::{escape, Row, Target};

const MIB: u64 = 1 << 20;
/// The scale at which the engine's default vertex threshold applies.
const THRESHOLD_SCALE: u32 = 22;
/// Walks of the in-memory runs.
const MEMORY_WALKS: u64 = 10_000_000;
const MODES: [&str; 2] = ["graphwalker", "iteration"];

/// `x` rounded to the nearest MiB, at least 1 MiB.
fn round_mib(x: u64) -> u64 {
    ((x + MIB / 2) / MIB).max(1) * MIB
}

/// `x` rounded up to MiB.
pub(super) fn ceil_mib(x: u64) -> u64 {
    x.div_ceil(MIB).max(1) * MIB
}

#[allow(clippy::cast_precision_loss)] // Byte counts shown as MB.
fn mb(bytes: f64) -> String {
    format!("{:.1}", bytes / 1e6)
}

/// `share` of `n`, rounded, at least 1.
#[allow(
    clippy::cast_precision_loss,
    clippy::cast_possible_truncation,
    clippy::cast_sign_loss
)] // Vertex counts are far below 2^52; the share is in (0, 1].
fn share_of(n: u64, share: f64) -> u64 {
    ((n as f64 * share).round() as u64).max(1)
}

/// A ratio as the tables show it.
fn times(x: f64) -> String {
    if x.is_finite() {
        format!("{x:.2}")
    } else {
        "∞".into()
    }
}

/// The `quiver walk` arguments of the paper's PPR query from `source`:
/// 2,000 walks of at most 10 steps, stopping with probability 0.15.
pub(super) fn ppr_query(source: u64) -> Vec<OsString> {
    Vec::from(argv![
        "ppr",
        "--source",
        source.to_string(),
        "--walks",
        "2000",
        "--length",
        "10",
        "--stop",
        "0.15"
    ])
}

/// Runs `quiver --json walk <app...> GRAPH <flags...>`, with the graph's
/// page cache dropped first, and returns the report.
pub(super) struct Walker<'a> {
    pub bins: &'a Bins,
    pub graph: &'a Path,
    pub data: &'a Path,
}

impl Walker<'_> {
    /// A run reading with `--io direct`.
    fn run(&self, app: &[OsString], flags: &[OsString]) -> Result<Value> {
        self.run_with_io(app, flags, "direct")
    }

    pub fn run_with_io(&self, app: &[OsString], flags: &[OsString], io: &str) -> Result<Value> {
        let mut flags = flags.to_vec();
        flags.extend(argv!["--io", io]);
        self.run_at_defaults(app, &flags, true)
    }

    /// A run with `flags` alone (and the work directory), the graph's page
    /// cache dropped first when `cold`.
    pub fn run_at_defaults(
        &self,
        app: &[OsString],
        flags: &[OsString],
        cold: bool,
    ) -> Result<Value> {
        if cold {
            capture(&self.bins.bench_io, &argv!["drop-cache", self.graph])?;
        }
        let mut args = Vec::from(argv!["--json", "walk"]);
        args.extend_from_slice(app);
        args.push(self.graph.into());
        args.extend_from_slice(flags);
        args.extend(argv!["--work-dir", self.data]);
        capture_json(&self.bins.quiver, &args)
    }
}

/// One out-of-core run and what it was.
struct Run {
    workload: String,
    share: String,
    mode: &'static str,
    report: Value,
}

impl Run {
    fn get(&self, key: &str) -> Result<f64> {
        num(&self.report, &format!("/{key}"))
            .with_context(|| format!("{} {} {}", self.workload, self.share, self.mode))
    }
}

/// Whole-graph workloads: name, `quiver walk` arguments, walk length, walks.
struct Workload {
    name: String,
    app: Vec<OsString>,
    length: u32,
}

pub(super) fn run(cx: &Context) -> Result<Value> {
    let (bins, data, out, args) = (cx.bins, cx.data, cx.out, cx.args);
    let started = Instant::now();
    let scale = args.scale;
    let mut notes = Vec::new();
    let (graph, generate) = symmetric_rmat(cx, scale, "walker", &mut notes)?;
    let g = fs::metadata(&graph)
        .with_context(|| format!("reading the size of {}", graph.display()))?
        .len();
    let facts = capture_json(
        &bins.bench_latency,
        &argv!["graph", &graph, "--from", "1", "--count", "2"],
    )?;
    let vertices = num(&facts, "/vertices")?;
    let edges = num(&facts, "/edges")?;
    let picked = |i: usize| {
        facts["picked"][i]
            .as_u64()
            .context("bench-latency graph picked too few vertices")
    };
    let (source, other) = (picked(0)?, picked(1)?);
    let n = facts["vertices"]
        .as_u64()
        .context("bench-latency graph gave no vertex count")?;
    notes.push(format!(
        "walker: R-MAT scale {scale}, undirected, deduplicated, no self-loops: {vertices} vertices, \
         {edges} edges, G = {} ({g} bytes); peak memory is the engine's accounting (peak_mem_bytes)",
        format_bytes(g)
    ));
    let walker = Walker {
        bins,
        graph: &graph,
        data,
    };
    let mut rows = Vec::new();
    let mut sections = Vec::new();
    let mut runs: Vec<Run> = Vec::new();

    // Query applications, budget G/4, each mode's default blocks (but fine
    // blocks no larger than G/64 on small graphs).
    let query_mem = round_mib(g / 4);
    let query_fine = (g / 64 < FINE_BLOCK).then(|| (g / 64 / 4096).max(1) * 4096);
    notes.push(format!(
        "walker: query applications: --mem G/4 = {}; graphwalker loads adaptively grouped fine blocks of {}{}, iteration its default static blocks (the paper's rule, at most --mem/4); the source is the first vertex from 1 on with out-degree >= 1 (kept from before ids were permuted, when vertex 0 was R-MAT's largest hub), SimRank's second vertex the next one",
        format_bytes(query_mem),
        format_bytes(query_fine.unwrap_or(FINE_BLOCK)),
        if query_fine.is_some() { " (G/64: the 2 MiB default would not fit this small graph's budget)" } else { " (the default)" },
    ));
    let queries = [
        (format!("PPR from vertex {source}"), ppr_query(source)),
        (
            format!("SimRank of vertices {source} and {other}"),
            Vec::from(argv![
                "simrank",
                "--a",
                source.to_string(),
                "--b",
                other.to_string()
            ]),
        ),
    ];
    let mut query_table = String::from(
        "### walker: query applications\n\n\
         | app | mode | --mem | block size | block loads | vertex loads | read, MB | wall, s | steps | result |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    for (name, app) in &queries {
        let mut pair = Vec::new();
        for mode in MODES {
            let mut flags = Vec::from(argv!["--mode", mode, "--mem", query_mem.to_string()]);
            if let (Some(fine), "graphwalker") = (query_fine, mode) {
                flags.extend(argv!["--block-size", fine.to_string()]);
            }
            let report = walker.run(app, &flags)?;
            pair.push(Run {
                workload: name.clone(),
                share: "G/4".into(),
                mode,
                report,
            });
        }
        for r in &pair {
            let _ = writeln!(
                query_table,
                "| {} | {} | {} | {} | {} | {} | {} | {:.2} | {} | {} |",
                r.workload,
                r.mode,
                format_bytes(query_mem),
                format_bytes(r.report["block_size"].as_u64().unwrap_or(0)),
                r.get("blocks_loaded")?,
                r.get("vertex_loads")?,
                mb(r.get("bytes_read")?),
                r.get("wall_ns")? / 1e9,
                r.get("steps")?,
                query_result(&r.report["result"]),
            );
        }
        let (gw, it) = (&pair[0], &pair[1]);
        if name.starts_with("SimRank") && gw.report["result"] != it.report["result"] {
            notes.push(format!(
                "walker: MISMATCH: {name} differs between modes (SimRank walks are exact): {} vs {}",
                gw.report["result"], it.report["result"]
            ));
        }
        for (what, key, scale_by, unit) in [
            ("wall time", "wall_ns", 1e-9, "s"),
            ("bytes read", "bytes_read", 1e-6, "MB"),
        ] {
            rows.push(Row::compare(
                "walker",
                &format!("{name}, iteration / graphwalker, {what}, {unit}"),
                it.get(key)? * scale_by,
                gw.get(key)? * scale_by,
                Some(Target::AtLeast(10.0)),
            ));
        }
        runs.extend(pair);
    }
    sections.push(query_table);

    let query_latency = super::walker_query::run(cx, &mut notes, &mut rows, &mut sections)?;

    // Whole-graph walks at four memory shares, one fixed block size.
    let block_size = (g / 16 / 4096).max(1) * 4096;
    let l80_walks = share_of(n, args.l80_share);
    let workloads = [
        Workload {
            name: "RWD L=6".into(),
            app: Vec::from(argv!["rwd", "--length", "6"]),
            length: 6,
        },
        Workload {
            name: "raw L=10".into(),
            app: Vec::from(argv!["raw", "--walks", n.to_string(), "--length", "10"]),
            length: 10,
        },
        Workload {
            name: "raw L=80".into(),
            app: Vec::from(argv![
                "raw",
                "--walks",
                l80_walks.to_string(),
                "--length",
                "80"
            ]),
            length: 80,
        },
    ];
    let shares = [
        ("G/8", round_mib(g / 8)),
        ("G/4", round_mib(g / 4)),
        ("G/2", round_mib(g / 2)),
        ("all (1.4 G)", ceil_mib(g * 7 / 5)),
    ];
    let threshold = (scale < THRESHOLD_SCALE)
        .then(|| (Config::default().vertex_threshold >> (THRESHOLD_SCALE - scale)).max(1));
    notes.push(format!(
        "walker: whole-graph walks: |V| = {n} walks{}; --block-size {} (G/16 rounded down to 4 KiB) and --fixed-blocks in both modes, so they differ only in scheduling; \
         --mem G/8, G/4, G/2 rounded to MiB, and 1.4 G rounded up for all of the graph (the engine caches blocks in ~0.75 of the budget, so 1.25 G would not hold it); {}",
        if l80_walks == n {
            String::new()
        } else {
            format!(" ({l80_walks} = |V| x {} for L=80)", args.l80_share)
        },
        format_bytes(block_size),
        match threshold {
            Some(t) => format!("--vertex-threshold {t} (the engine's 100,000 scaled from 2^22 vertices to 2^{scale})"),
            None => "the engine's default vertex threshold".into(),
        }
    ));
    let mut whole_table = String::from(
        "### walker: whole-graph walks, graphwalker / iteration (ratio: iteration / graphwalker)\n\n\
         | workload | --mem | block loads | ratio | target | vertex loads (gw) | read, MB | ratio | wall, s | ratio | steps per block I/O |\n\
         |---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|\n",
    );
    let mut chart = Vec::new();
    for w in &workloads {
        let mut line = Vec::new();
        let mut steps_seen: Option<f64> = None;
        for (si, &(share, mem)) in shares.iter().enumerate() {
            let mut flags = Vec::from(argv![
                "--mem",
                mem.to_string(),
                "--block-size",
                block_size.to_string(),
                "--fixed-blocks"
            ]);
            if let Some(t) = threshold {
                flags.extend(argv!["--vertex-threshold", t.to_string()]);
            }
            let mut pair = Vec::new();
            for mode in MODES {
                let mut mode_flags = Vec::from(argv!["--mode", mode]);
                mode_flags.extend_from_slice(&flags);
                let report = walker.run(&w.app, &mode_flags)?;
                pair.push(Run {
                    workload: w.name.clone(),
                    share: share.into(),
                    mode,
                    report,
                });
            }
            // On an undirected graph a walk ends early only at an isolated
            // start, so every mode and budget takes the same number of steps.
            for r in &pair {
                let steps = r.get("steps")?;
                match steps_seen {
                    Some(s) if (s - steps).abs() > 0.5 => notes.push(format!(
                        "walker: MISMATCH: {} took {steps} steps in {} at --mem {share}, {s} in the first run",
                        w.name, r.mode
                    )),
                    _ => steps_seen = Some(steps),
                }
            }
            let (gw, it) = (&pair[0], &pair[1]);
            let ratio = |key: &str| -> Result<f64> { Ok(it.get(key)? / gw.get(key)?) };
            let io_ratio = ratio("blocks_loaded")?;
            let target = match (si, w.length) {
                (3, l) => Some(Target::AtLeast(0.8 * f64::from(l))),
                (1, 10) => Some(Target::Model(1.5)),
                (1, 80) => Some(Target::Model(2.5)),
                _ => None,
            };
            let target_cell = match target {
                None => "—".to_owned(),
                Some(t @ Target::Model(_)) => t.to_string(),
                Some(t) => format!(
                    "{t}: {}",
                    if t.met_by(io_ratio) == Some(true) {
                        "yes"
                    } else {
                        "**no**"
                    }
                ),
            };
            let _ = writeln!(
                whole_table,
                "| {} | {share} = {} | {} / {} | {} | {target_cell} | {} | {} / {} | {} | {:.2} / {:.2} | {} | {:.0} / {:.0} |",
                w.name,
                format_bytes(mem),
                gw.get("blocks_loaded")?,
                it.get("blocks_loaded")?,
                times(io_ratio),
                gw.get("vertex_loads")?,
                mb(gw.get("bytes_read")?),
                mb(it.get("bytes_read")?),
                times(ratio("bytes_read")?),
                gw.get("wall_ns")? / 1e9,
                it.get("wall_ns")? / 1e9,
                times(ratio("wall_ns")?),
                gw.get("steps_per_block_io")?,
                it.get("steps_per_block_io")?,
            );
            rows.push(Row::compare(
                "walker",
                &format!(
                    "{}, --mem {share}, iteration / graphwalker, block loads",
                    w.name
                ),
                it.get("blocks_loaded")?,
                gw.get("blocks_loaded")?,
                target,
            ));
            line.push(io_ratio);
            runs.extend(pair);
        }
        chart.push((w.name.clone(), w.length, line));
    }
    whole_table.push_str(
        "\nBlock loads and steps per block I/O count whole-block reads only; GraphWalker's \
         single-vertex reads are its vertex loads, and their bytes are in read, MB.\n",
    );
    sections.push(whole_table);
    let svg_path = out.join("walker.svg");
    let labels: Vec<&str> = shares.iter().map(|&(l, _)| l).collect();
    fs::write(&svg_path, block_io_chart(&labels, &chart))
        .with_context(|| format!("writing {}", svg_path.display()))?;
    notes.push(format!(
        "walker: block-I/O ratio (iteration / graphwalker) against memory share: {}",
        svg_path.display()
    ));

    // Peak memory of every out-of-core run against its budget.
    let mut peak_table = String::from(
        "### walker: peak memory (engine accounting) against --mem\n\n\
         | run | mode | --mem | peak | peak / --mem |\n|---|---|---:|---:|---:|\n",
    );
    let mut worst: Option<(f64, f64, String)> = None;
    for r in &runs {
        let (peak, budget) = (r.get("peak_mem_bytes")?, r.get("mem_budget")?);
        let share = peak / budget;
        let bold = if share > 1.0 { "**" } else { "" };
        let _ = writeln!(
            peak_table,
            "| {}, --mem {} | {} | {} | {} | {bold}{share:.2}{bold} |",
            r.workload,
            r.share,
            r.mode,
            format_bytes(r.report["mem_budget"].as_u64().unwrap_or(0)),
            format_bytes(r.report["peak_mem_bytes"].as_u64().unwrap_or(0)),
        );
        if worst.as_ref().is_none_or(|(p, b, _)| share > p / b) {
            worst = Some((
                peak,
                budget,
                format!("{} {} {}", r.workload, r.share, r.mode),
            ));
        }
    }
    sections.push(peak_table);
    if let Some((peak, budget, which)) = worst {
        rows.push(Row::compare(
            "walker",
            &format!("out-of-core peak memory / --mem, worst: {which}, MiB"),
            peak / f64::from(1 << 20),
            budget / f64::from(1 << 20),
            Some(Target::AtMost(1.0)),
        ));
    }
    let over = runs
        .iter()
        .filter(|r| {
            r.get("peak_mem_bytes").unwrap_or(0.0) > r.get("mem_budget").unwrap_or(f64::MAX)
        })
        .count();
    if over > 0 {
        notes.push(format!(
            "walker: {over} of {} out-of-core runs held more than their --mem (see the peak memory table)",
            runs.len()
        ));
    }

    // In memory: the walker against dependent random reads.
    let mut memory = Vec::new();
    for threads in [1, 2] {
        let report = walker.run(
            &argv!["raw", "--walks", MEMORY_WALKS.to_string(), "--length", "10"],
            &argv!["--mode", "memory", "--threads", threads.to_string()],
        )?;
        memory.push(report);
    }
    let chase = capture_json(&bins.bench_latency, &argv!["chase", "--graph", &graph])?;
    let reads_per_sec = num(&chase, "/reads_per_sec")?;
    rows.push(Row::compare(
        "walker",
        "in-memory raw walks (1 thread), steps/s vs dependent random reads/s",
        num(&memory[0], "/steps_per_sec")?,
        reads_per_sec,
        Some(Target::AtLeast(0.7)),
    ));
    rows.push(Row::compare(
        "walker",
        "in-memory raw walks, 2 threads vs 1 thread, steps/s",
        num(&memory[1], "/steps_per_sec")?,
        num(&memory[0], "/steps_per_sec")?,
        None,
    ));
    notes.push(format!(
        "walker: in memory: {MEMORY_WALKS} raw walks of length 10; {:.1} ns per dependent read, one thread, over a table of {} (as large as G's targets; transparent huge pages: {}); the walker's wall time includes reading the graph",
        num(&chase, "/ns_per_read")?,
        format_bytes(chase["table_bytes"].as_u64().unwrap_or(0)),
        chase["transparent_hugepages"].as_str().unwrap_or("unknown"),
    ));
    let seconds = started.elapsed().as_secs_f64();
    notes.push(format!("walker: the whole benchmark took {seconds:.0} s"));

    for s in &sections {
        println!("{s}");
    }
    let run_records: Vec<Value> = runs
        .iter()
        .map(|r| {
            json!({
                "workload": r.workload,
                "share": r.share,
                "mode": r.mode,
                "report": r.report,
            })
        })
        .collect();
    Ok(json!({
        "bench": "walker",
        "params": {
            "model": "rmat",
            "scale": scale,
            "edge_factor": EDGE_FACTOR,
            "seed": SEED,
            "undirected": true,
            "graph_bytes": g,
            "query_mem": query_mem,
            "block_size": block_size,
            "shares": shares.iter().map(|&(l, m)| json!({"share": l, "mem": m})).collect::<Vec<_>>(),
            "vertex_threshold": threshold,
            "l80_walks": l80_walks,
            "source": source,
            "simrank_b": other,
        },
        "files": { "graph": graph },
        "reused": generate.is_null(),
        "generate": generate,
        "graph": facts,
        "runs": run_records,
        "memory": memory,
        "query_latency": query_latency,
        "chase": chase,
        "seconds": seconds,
        "rows": rows,
        "summary_notes": notes,
        "summary_sections": sections,
    }))
}

/// A short form of a query application's result for the table.
fn query_result(result: &Value) -> String {
    if let Some(s) = result["similarity"].as_f64() {
        format!("similarity {s:.5}")
    } else if let Some(d) = result["distinct_vertices"].as_u64() {
        format!("{d} vertices visited")
    } else {
        "—".into()
    }
}

/// The iteration / graphwalker block-I/O ratio against memory share, one
/// line per workload on a log scale; hollow circles mark the model's
/// predictions, black bars the targets at share 1.
fn block_io_chart(shares: &[&str], lines: &[(String, u32, Vec<f64>)]) -> String {
    const WIDTH: f64 = 760.0;
    const HEIGHT: f64 = 420.0;
    const LEFT: f64 = 70.0;
    const RIGHT: f64 = 560.0;
    const TOP: f64 = 50.0;
    const BOTTOM: f64 = 360.0;
    const COLOURS: [&str; 4] = ["#1565c0", "#2e7d32", "#c62828", "#6a1b9a"];
    let finite = lines
        .iter()
        .flat_map(|(_, l, v)| v.iter().copied().chain([0.8 * f64::from(*l)]))
        .chain([1.5, 2.5])
        .filter(|x| x.is_finite() && *x > 0.0);
    let (lo, hi) = finite.fold((1.0_f64, 1.0_f64), |(lo, hi), x| (lo.min(x), hi.max(x)));
    let (lo, hi) = (
        lo.log10().floor(),
        hi.log10().ceil().max(lo.log10().floor() + 1.0),
    );
    let y = |v: f64| BOTTOM - (v.max(1e-9).log10() - lo) / (hi - lo) * (BOTTOM - TOP);
    let count = shares.len().max(2);
    #[allow(clippy::cast_precision_loss)] // A handful of shares.
    let x = |i: usize| LEFT + 30.0 + i as f64 / (count - 1) as f64 * (RIGHT - LEFT - 60.0);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
<text x="10" y="22" font-size="15" font-weight="bold">Walker: block loads, iteration / graphwalker, against memory (--mem / G)</text>"#
    );
    // Grid: 1, 2 and 5 times each power of ten.
    let mut decade = lo;
    while decade <= hi + 1e-9 {
        for m in [1.0, 2.0, 5.0] {
            let v = m * 10f64.powf(decade);
            if v.log10() > hi + 1e-9 {
                break;
            }
            let gy = y(v);
            let _ = writeln!(
                s,
                r##"<line x1="{LEFT}" y1="{gy:.1}" x2="{RIGHT}" y2="{gy:.1}" stroke="{}" stroke-width="1"/>
<text x="{:.1}" y="{:.1}" text-anchor="end" fill="#555">{}</text>"##,
                if (v - 1.0).abs() < 1e-9 {
                    "#999"
                } else {
                    "#e5e5e5"
                },
                LEFT - 6.0,
                gy + 4.0,
                v
            );
        }
        decade += 1.0;
    }
    for (i, label) in shares.iter().enumerate() {
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="middle" fill="#555">{}</text>"##,
            x(i),
            BOTTOM + 18.0,
            escape(label)
        );
    }
    let _ = writeln!(
        s,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle">--mem (G = graph file size)</text>
<text x="16" y="{:.1}" transform="rotate(-90 16 {:.1})" text-anchor="middle">block loads, iteration / graphwalker (log)</text>"##,
        (LEFT + RIGHT) / 2.0,
        BOTTOM + 40.0,
        (TOP + BOTTOM) / 2.0,
        (TOP + BOTTOM) / 2.0
    );
    for (k, (name, length, values)) in lines.iter().enumerate() {
        let colour = COLOURS[k % COLOURS.len()];
        let points: Vec<String> = values
            .iter()
            .enumerate()
            .filter(|(_, v)| v.is_finite() && **v > 0.0)
            .map(|(i, &v)| format!("{:.1},{:.1}", x(i), y(v)))
            .collect();
        let _ = writeln!(
            s,
            r#"<polyline points="{}" fill="none" stroke="{colour}" stroke-width="2"/>"#,
            points.join(" ")
        );
        for (i, &v) in values.iter().enumerate() {
            if v.is_finite() && v > 0.0 {
                let _ = writeln!(
                    s,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="3.5" fill="{colour}"><title>{}: {v:.2}</title></circle>"#,
                    x(i),
                    y(v),
                    escape(name)
                );
            }
        }
        // Target at all of the graph (the last share): >= 0.8 L.
        let t = 0.8 * f64::from(*length);
        let last = x(shares.len().saturating_sub(1));
        let _ = writeln!(
            s,
            r#"<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="black" stroke-width="2.5"><title>{}: target ≥ {t:.1}</title></line>"#,
            last - 9.0,
            y(t),
            last + 9.0,
            y(t),
            escape(name)
        );
        // The model at G/4 (the second share) for raw walks.
        let model = match length {
            10 => Some(1.5),
            80 => Some(2.5),
            _ => None,
        };
        if let (Some(m), true) = (model, shares.len() > 1) {
            let _ = writeln!(
                s,
                r#"<circle cx="{:.1}" cy="{:.1}" r="6" fill="none" stroke="{colour}" stroke-width="1.5" stroke-dasharray="2,2"><title>{}: model ≈ {m}</title></circle>"#,
                x(1),
                y(m),
                escape(name)
            );
        }
        let ly = TOP + 10.0 + 22.0 * f64::from(u32::try_from(k).unwrap_or(0));
        let _ = writeln!(
            s,
            r#"<line x1="{:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{colour}" stroke-width="2"/>
<text x="{:.1}" y="{:.1}">{}</text>"#,
            RIGHT + 20.0,
            RIGHT + 44.0,
            RIGHT + 50.0,
            ly + 4.0,
            escape(name)
        );
    }
    let ly = TOP + 10.0 + 22.0 * f64::from(u32::try_from(lines.len()).unwrap_or(0)) + 10.0;
    let _ = writeln!(
        s,
        r##"<circle cx="{:.1}" cy="{ly:.1}" r="6" fill="none" stroke="#333" stroke-width="1.5" stroke-dasharray="2,2"/>
<text x="{:.1}" y="{:.1}">model (G/4, raw walks)</text>
<line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}" stroke="black" stroke-width="2.5"/>
<text x="{:.1}" y="{:.1}">target ≥ 0.8 L (all)</text>"##,
        RIGHT + 32.0,
        RIGHT + 50.0,
        ly + 4.0,
        RIGHT + 23.0,
        ly + 22.0,
        RIGHT + 41.0,
        ly + 22.0,
        RIGHT + 50.0,
        ly + 26.0
    );
    s.push_str("</svg>\n");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budgets_round_to_mib() {
        assert_eq!(round_mib(0), MIB);
        assert_eq!(round_mib(MIB * 3 / 2), 2 * MIB);
        assert_eq!(round_mib(MIB * 5 / 4), MIB);
        assert_eq!(ceil_mib(MIB + 1), 2 * MIB);
        assert_eq!(ceil_mib(4 * MIB), 4 * MIB);
    }

    #[test]
    fn chart_renders_lines_models_and_targets() {
        let s = block_io_chart(
            &["G/8", "G/4", "G/2", "all"],
            &[
                ("RWD L=6".into(), 6, vec![1.4, 1.5, 2.0, 7.0]),
                ("raw L=80".into(), 80, vec![1.9, 2.0, f64::INFINITY, 81.0]),
            ],
        );
        assert!(s.starts_with("<svg") && s.trim_end().ends_with("</svg>"));
        assert_eq!(s.matches("<polyline").count(), 2);
        assert!(s.contains("model ≈ 2.5") && !s.contains("model ≈ 1.5"));
        assert!(s.contains("target ≥ 64.0") && s.contains("target ≥ 4.8"));
    }
}
