//! `cargo xtask bench gtl`: GraphSSD against its CSR baseline on the same
//! simulated device, in the paper's regime, with our own improvements in
//! rows of their own.
//!
//! The regime (GraphSSD §4, §6), each choice printed with the results:
//! - graphs: the permuted R-MAT graph of scale 22 (undirected,
//!   deduplicated, no self-loops; Graph500's a=0.57), and a graph with
//!   CF-like skew (R-MAT a=0.45, b=c=0.22: max degree about 19K, 9% of
//!   ids without edges);
//! - host cache 1/16 and 1/64 of the GTL's page image (CF's and YWS's
//!   ratios of cache to graph), so the baseline's rowPtr (8 bytes a
//!   vertex, 2,048 pages) is 1x to 4x the cache, as the paper's is;
//! - 256 requests outstanding at once, a new one whenever one
//!   completes (the paper's non-blocking queues), well below the rowPtr
//!   pages;
//! - random GetAdjacencyList over the vertices with edges (the workload
//!   asks for lists), BFS and CC in the FIFO order of Algorithm 1, one
//!   random walk per 1,000 vertices, slack 0 (the paper leaves room only
//!   for updates).
//!
//! Rows: modelled device time of the baseline over GraphSSD's (above 1:
//! GraphSSD ahead), with the page ratios in the notes. Ours, apart: random
//! reads over every id with and without empty marks, MIS and PageRank with
//! empty marks, level-synchronous BFS and CC, and barriered batches.
//!
//! Then the update benchmark (`quiver gtl updates`, GraphSSD §6.5) on the
//! scale-16 graph (the direct path rewrites pages per command, so the
//! larger graph would take minutes): pages written by direct
//! read-modify-write against the delta graph with its merge, for the
//! same stream; the merge at slack 1%, 5% and 10%; and query latency
//! during the merge against the merged graph (Fig. 14c).
//!
//! Last, the file device on this machine's disk: 200K random GetAdjacencyList
//! calls on vertices with edges on the GTL file through io_uring at queue
//! depth 32, against the graph's `.qcsr` read as a CSR file (4 KiB
//! blocks) through io_uring and through pread; 3 alternating rounds with
//! the paper's 16 KiB pages and (ours) 4 KiB pages.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result};
use serde_json::{json, Value};

use super::{capture_json, num, reuse_or, symmetric_rmat, Context};
use crate::report::{Row, Spread, Target};

const SCALE: u32 = 22;
const UPDATE_SCALE: u32 = 16;
const SLACKS: [&str; 3] = ["0.01", "0.05", "0.10"];
/// Random calls per run on the simulated device.
const CALLS: u64 = 1_000_000;
/// Random calls per layout and round on the file device (pread does
/// about 6,000 a second on this disk).
const FILE_CALLS: u64 = 200_000;
const PAGE_BYTES: f64 = 16384.0;
/// The paper's packing overhead over a tight pack, % (§6.4).
const PAPER_PACKING: f64 = 4.8;

/// The CF-like graph: R-MAT with a flatter skew, made unless it exists.
fn cf_like(cx: &Context, notes: &mut Vec<String>) -> Result<(PathBuf, Value)> {
    let graph = cx.data.join(format!("rmat-u{SCALE}-a45-perm.qcsr"));
    let generate = reuse_or(&graph, "gtl", notes, || {
        capture_json(
            &cx.bins.quiver,
            &argv![
                "--json",
                "generate",
                "rmat",
                "--scale",
                SCALE.to_string(),
                "--edge-factor",
                "16",
                "--seed",
                "1",
                "--a",
                "0.45",
                "--b",
                "0.22",
                "--c",
                "0.22",
                "--undirected",
                "--dedupe",
                "--drop-self-loops",
                "--mem",
                "4GiB",
                "-o",
                &graph
            ],
        )
    })?;
    Ok((graph, generate))
}

/// `quiver gtl run APP GRAPH ARGS.. --backend B --cache C --json`.
fn gtl_run(cx: &Context, graph: &Path, args: &[&str], backend: &str, cache: u64) -> Result<Value> {
    let mut argv: Vec<OsString> = argv!["--json", "gtl", "run", args[0], graph].into();
    argv.extend(args[1..].iter().map(OsString::from));
    argv.extend(argv!["--backend", backend, "--cache", cache.to_string()]);
    capture_json(&cx.bins.quiver, &argv)
}

/// One graph's facts: its page image, and caches of 1/16 and 1/64 of it.
struct Regime {
    name: &'static str,
    path: PathBuf,
    image: f64,
    tight: f64,
    vertices: f64,
    gtt_bytes: f64,
    cache16: u64,
    cache64: u64,
}

impl Regime {
    fn probe(cx: &Context, name: &'static str, path: PathBuf) -> Result<Regime> {
        let probe = gtl_run(cx, &path, &["random-reads", "--requests", "1"], "gtl", 0)?;
        let image = num(&probe, "/init/image_pages")?;
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // A page count.
        let cache = |share: f64| ((image / share).floor() as u64).max(1) * 16384;
        Ok(Regime {
            name,
            image,
            tight: num(&probe, "/init/tight_pages")?,
            vertices: num(&probe, "/vertices")?,
            gtt_bytes: num(&probe, "/init/gtt_bytes")?,
            cache16: cache(16.0),
            cache64: cache(64.0),
            path,
        })
    }

    fn describe(&self) -> String {
        format!(
            "{}: GTL image {} pages of 16 KiB ({:.0} MiB), {:.1}% over a tight pack; rowPtr {:.0} pages; host cache {} pages (1/16) or {} (1/64)",
            self.name,
            self.image,
            self.image * PAGE_BYTES / f64::from(1 << 20),
            (self.image / self.tight - 1.0) * 100.0,
            (self.vertices + 1.0) * 8.0 / PAGE_BYTES,
            self.cache16 / 16384,
            self.cache64 / 16384,
        )
    }
}

/// One comparison: a workload on both backends.
struct Case<'a> {
    benchmark: &'a str,
    name: String,
    args: Vec<&'a str>,
    cache: u64,
    target: Option<Target>,
}

pub(super) fn run(cx: &Context) -> Result<Value> {
    let mut notes = Vec::new();
    let (rmat, generate) = symmetric_rmat(cx, SCALE, "gtl", &mut notes)?;
    let (cf, cf_generate) = cf_like(cx, &mut notes)?;
    let graphs = [
        Regime::probe(cx, "R-MAT 22", rmat.clone())?,
        Regime::probe(cx, "CF-like R-MAT 22 (a=0.45)", cf.clone())?,
    ];
    let mut rows = Vec::new();
    let mut runs = serde_json::Map::new();
    let paper = "gtl";
    let ours = "gtl (ours)";
    // GraphSSD §6.4: 8-byte GTT entries, one per page, and 4.8-4.9% more
    // pages than a packing that splits lists anywhere.
    for g in &graphs {
        rows.push(Row::compare(
            paper,
            &format!(
                "{}: GTT bytes per graph page, against the paper's 8",
                g.name
            ),
            g.gtt_bytes / g.image,
            8.0,
            Some(Target::AtMost(1.0)),
        ));
        rows.push(Row::compare(
            paper,
            &format!(
                "{}: graph pages over a tight pack, %, against the paper's {PAPER_PACKING}",
                g.name
            ),
            (g.image / g.tight - 1.0) * 100.0,
            PAPER_PACKING,
            None,
        ));
        notes.push(format!("gtl regime: {}", g.describe()));
    }
    let reads = ["random-reads", "--requests", "1000000"];
    let mut cases: Vec<(&Regime, Case)> = Vec::new();
    for g in &graphs {
        for (share, cache, target) in [(16, g.cache16, 1.3), (64, g.cache64, 1.85)] {
            cases.push((
                g,
                Case {
                    benchmark: paper,
                    name: format!("{}: random reads, cache 1/{share}", g.name),
                    args: reads.to_vec(),
                    cache,
                    target: Some(Target::AtLeast(target)),
                },
            ));
        }
    }
    let r = &graphs[0];
    let app = |name: &str, args: &[&'static str], target: f64| Case {
        benchmark: paper,
        name: format!("{}: {name}, cache 1/16", r.name),
        args: args.to_vec(),
        cache: r.cache16,
        target: Some(Target::AtLeast(target)),
    };
    for case in [
        app(
            "BFS at 0.1 (one call)",
            &["bfs", "--depth-fraction", "0.1"],
            2.0,
        ),
        app(
            "BFS (FIFO) at 0.33",
            &["bfs", "--depth-fraction", "0.33"],
            1.40,
        ),
        app(
            "BFS (FIFO) at 0.66",
            &["bfs", "--depth-fraction", "0.66"],
            1.40,
        ),
        app(
            "BFS (FIFO) at 1.0",
            &["bfs", "--depth-fraction", "1.0"],
            1.40,
        ),
        app("CC (FIFO)", &["cc"], 1.42),
        app("random walks", &["rw"], 1.3),
        app("MIS", &["mis"], 1.0),
        app("PageRank", &["pagerank"], 1.0),
    ] {
        cases.push((r, case));
    }
    for g in &graphs {
        for case in [
            app("MIS", &["mis"], 1.0),
            app("PageRank", &["pagerank"], 1.0),
        ] {
            if g.name != r.name {
                cases.push((
                    g,
                    Case {
                        name: case.name.replace(r.name, g.name),
                        cache: g.cache16,
                        ..case
                    },
                ));
            }
        }
    }
    let own = |name: &str, args: &[&'static str]| Case {
        benchmark: ours,
        name: format!("{}: {name}", r.name),
        args: args.to_vec(),
        cache: r.cache64,
        target: None,
    };
    for case in [
        own(
            "random reads over every id, cache 1/64",
            &["random-reads", "--all-ids"],
        ),
        own(
            "random reads over every id, empty marks, cache 1/64",
            &["random-reads", "--all-ids", "--mark-empty"],
        ),
        own(
            "random reads in barriered batches of 256, cache 1/64",
            &["random-reads", "--batches"],
        ),
        Case {
            cache: r.cache16,
            ..own("MIS, empty marks, cache 1/16", &["mis", "--mark-empty"])
        },
        Case {
            cache: r.cache16,
            ..own(
                "PageRank, empty marks, cache 1/16",
                &["pagerank", "--mark-empty"],
            )
        },
        Case {
            cache: r.cache16,
            ..own(
                "BFS level by level at 1.0, cache 1/16",
                &["bfs", "--depth-fraction", "1.0", "--order", "levels"],
            )
        },
        Case {
            cache: r.cache16,
            ..own(
                "CC level by level, cache 1/16",
                &["cc", "--order", "levels"],
            )
        },
    ] {
        cases.push((r, case));
    }
    for (g, case) in &cases {
        eprintln!("xtask: gtl: {}", case.name);
        let on_gtl = gtl_run(cx, &g.path, &case.args, "gtl", case.cache)?;
        let on_csr = gtl_run(cx, &g.path, &case.args, "csr", case.cache)?;
        rows.push(Row::compare(
            case.benchmark,
            &format!("{}, modelled time csr / gtl", case.name),
            num(&on_csr, "/modelled_ns")?,
            num(&on_gtl, "/modelled_ns")?,
            case.target,
        ));
        let requests = num(&on_gtl, "/requests")?.max(1.0);
        let (pg, pc) = (num(&on_gtl, "/pages_read")?, num(&on_csr, "/pages_read")?);
        notes.push(format!(
            "gtl: {}: pages read csr / gtl = {pc} / {pg} = {:.3} ({:.3} vs {:.3} pages per request, {requests} requests; modelled {:.1} vs {:.1} ms)",
            case.name,
            pc / pg.max(1.0),
            pc / requests,
            pg / requests,
            num(&on_csr, "/modelled_ns")? / 1e6,
            num(&on_gtl, "/modelled_ns")? / 1e6,
        ));
        runs.insert(case.name.clone(), json!({ "gtl": on_gtl, "csr": on_csr }));
    }
    // Ours against the paper's algorithm, on GraphSSD alone.
    for (ours_name, paper_name) in [
        (
            "BFS level by level at 1.0, cache 1/16",
            "BFS (FIFO) at 1.0, cache 1/16",
        ),
        ("CC level by level, cache 1/16", "CC (FIFO), cache 1/16"),
    ] {
        let key = |n: &str| format!("{}: {n}", r.name);
        let time = |n: &str| num(&runs[&key(n)]["gtl"], "/modelled_ns");
        rows.push(Row::compare(
            ours,
            &format!(
                "{}: GraphSSD, {paper_name} / {ours_name}, modelled time",
                r.name
            ),
            time(paper_name)?,
            time(ours_name)?,
            None,
        ));
    }
    notes.push(format!(
        "gtl regime: 256 requests outstanding at once (a sliding window: each holds its slot until its list arrives), random reads over vertices with edges, {CALLS} calls; BFS from the first vertex with edges, FIFO (Algorithm 1); one walk per 1,000 vertices of up to 10 steps; slack 0; modelled times from the simulated device (read 40 us, 16 KiB over an 800 MB/s channel, 4 GB/s host link, 8 channels x 4 ways), the same for both backends",
    ));
    let (update_graph, update_generate) =
        symmetric_rmat(cx, UPDATE_SCALE, "gtl updates", &mut notes)?;
    let updates = |args: &[&str]| -> Result<Value> {
        let mut argv: Vec<OsString> = argv!["--json", "gtl", "updates", &update_graph].into();
        argv.extend(args.iter().map(OsString::from));
        capture_json(&cx.bins.quiver, &argv)
    };
    let direct = updates(&["--path", "direct"])?;
    let mut delta = serde_json::Map::new();
    for slack in SLACKS {
        delta.insert(slack.to_owned(), updates(&["--slack", slack])?);
    }
    let at5 = &delta["0.05"];
    rows.push(Row::compare(
        "gtl",
        "updates, pages written direct / delta (slack 5%)",
        num(&direct, "/pages_written")?,
        num(at5, "/pages_written")?,
        Some(Target::AtLeast(1.0)),
    ));
    for slack in SLACKS {
        let run = &delta[slack];
        rows.push(Row::value(
            "gtl",
            &format!("updates, merge at slack {slack}, modelled ms"),
            num(run, "/merge/modelled_ns")? / 1e6,
        ));
        notes.push(format!(
            "gtl updates: slack {slack}: merge {} groups, {} pages written, {} read, {:.1} ms modelled; {} splits in all; image {} pages",
            num(run, "/merge/groups")?,
            num(run, "/merge/pages_written")?,
            num(run, "/merge/pages_read")?,
            num(run, "/merge/modelled_ns")? / 1e6,
            num(run, "/gtl/splits")?,
            num(run, "/image_pages")?,
        ));
    }
    rows.push(Row::compare(
        "gtl",
        "updates, query latency in the first merge step / merged",
        num(at5, "/merge/query_ns_during/0")?,
        num(at5, "/merge/query_ns_merged")?,
        None,
    ));
    let latencies = |run: &Value| -> Result<String> {
        let during: Vec<String> = run["merge"]["query_ns_during"]
            .as_array()
            .context("query_ns_during")?
            .iter()
            .map(|q| format!("{:.0}", q.as_f64().unwrap_or(0.0) / 1e3))
            .collect();
        let snapshots: Vec<String> = run["snapshots"]
            .as_array()
            .context("snapshots")?
            .iter()
            .map(|s| format!("{:.0}", s["query_ns"].as_f64().unwrap_or(0.0) / 1e3))
            .collect();
        Ok(format!(
            "query us after each snapshot {}; during the merge {}",
            snapshots.join(" "),
            during.join(" ")
        ))
    };
    notes.push(format!(
        "gtl updates: R-MAT scale {UPDATE_SCALE}, {} vertices and {} edges loaded, {} vertices and {} edges streamed in 10 snapshots; write amplification (bytes programmed per byte of edges added) direct {:.0}, delta {:.1}; {}",
        num(at5, "/vertices")?,
        num(at5, "/edges")?,
        num(at5, "/added_vertices")?,
        num(at5, "/added_edges")?,
        num(&direct, "/write_amplification")?,
        num(at5, "/write_amplification")?,
        latencies(at5)?
    ));
    runs.insert(
        "updates".to_owned(),
        json!({ "direct": direct, "delta": delta }),
    );
    // The file device on this machine's disk: wall time, no model; 3
    // alternating rounds of the paper's 16 KiB pages and our 4 KiB ones,
    // each round timing the three layouts one after the other.
    let mut files = serde_json::Map::new();
    let sizes = [
        ("16KiB", paper, Some(Target::AtLeast(1.3))),
        ("4KiB", ours, None),
    ];
    let mut rounds: Vec<Vec<Value>> = vec![Vec::new(); sizes.len()];
    for _ in 0..3 {
        for (i, (size, ..)) in sizes.iter().enumerate() {
            let gtl_file = cx.data.join(format!("rmat-u{SCALE}-perm-{size}.gtl"));
            rounds[i].push(capture_json(
                &cx.bins.quiver,
                &argv![
                    "--json",
                    "gtl",
                    "file",
                    &rmat,
                    "--gtl",
                    &gtl_file,
                    "--requests",
                    FILE_CALLS.to_string(),
                    "--queue-depth",
                    "32",
                    "--page-bytes",
                    size
                ],
            )?);
        }
    }
    for ((size, benchmark, target), runs_of) in sizes.iter().zip(&rounds) {
        let rate = |run: &Value, i: usize| num(run, &format!("/runs/{i}/calls_per_s"));
        for (i, against) in [(1, "io_uring"), (2, "pread")] {
            let ratios: Vec<f64> = runs_of
                .iter()
                .map(|r| Ok(rate(r, 0)? / rate(r, i)?))
                .collect::<Result<_>>()?;
            let spread = Spread::of(ratios);
            let gtl = Spread::of(runs_of.iter().map(|r| rate(r, 0)).collect::<Result<_>>()?);
            let csr = Spread::of(runs_of.iter().map(|r| rate(r, i)).collect::<Result<_>>()?);
            rows.push(Row::compare(
                benchmark,
                &format!("file device, {size} GTL pages, calls/s gtl (io_uring, QD 32) / csr ({against}), medians of 3"),
                gtl.median,
                csr.median,
                if i == 1 { *target } else { None },
            ));
            notes.push(format!(
                "gtl file, {size} pages: gtl / csr ({against}) {:.2} (range {:.2}-{:.2}); gtl {:.0} calls/s (range {:.0}-{:.0}), csr {:.0} (range {:.0}-{:.0})",
                spread.median, spread.min, spread.max, gtl.median, gtl.min, gtl.max, csr.median, csr.min, csr.max
            ));
        }
        let last = &runs_of[runs_of.len() - 1];
        let per_call = |i: usize, what: &str| -> Result<f64> {
            Ok(num(last, &format!("/runs/{i}/{what}"))? / num(last, &format!("/runs/{i}/calls"))?)
        };
        notes.push(format!(
            "gtl file, {size} pages: {FILE_CALLS} random GetAdjacencyList calls on vertices with edges, O_DIRECT ({}), on this machine's disk: gtl {:.3} pages and {:.0} bytes a call; csr {:.3} 4 KiB blocks and {:.0} bytes a call",
            last["runs"][0]["direct"],
            per_call(0, "reads")?,
            per_call(0, "bytes")?,
            per_call(1, "reads")?,
            per_call(1, "bytes")?,
        ));
        files.insert((*size).to_owned(), Value::Array(runs_of.clone()));
    }
    runs.insert("file".to_owned(), Value::Object(files));
    Ok(json!({
        "bench": "gtl",
        "params": { "scale": SCALE, "calls": CALLS },
        "files": { "graph": rmat, "cf_like": cf, "update_graph": update_graph },
        "reused": generate.is_null(),
        "generate": generate,
        "cf_generate": cf_generate,
        "update_generate": update_generate,
        "runs": runs,
        "rows": rows,
        "summary_notes": notes,
    }))
}
