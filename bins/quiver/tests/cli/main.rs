//! The driver as a user runs it: help, exit codes, reports, errors; and
//! the conventions its source keeps (`tidy`).

mod tidy;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn quiver(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_quiver"))
        .args(args)
        .output()
        .expect("the driver runs")
}

fn quiver_with_stdin(args: &[&str], stdin: &[u8]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_quiver"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the driver runs");
    child.stdin.take().unwrap().write_all(stdin).unwrap();
    child.wait_with_output().unwrap()
}

fn json(output: &Output) -> serde_json::Value {
    assert!(
        output.status.success(),
        "failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("--json prints JSON")
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// Writes an undirected R-MAT graph to `g` with the driver.
fn undirected_rmat(g: &Path, scale: u32, edge_factor: u32) {
    let (scale, edge_factor) = (scale.to_string(), edge_factor.to_string());
    let out = quiver(&[
        "generate",
        "rmat",
        "--scale",
        &scale,
        "--edge-factor",
        &edge_factor,
        "--undirected",
        "-o",
        path(g),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A file of the LDBC Graphalytics examples in the repository's fixtures.
fn graphalytics(file: &str) -> PathBuf {
    Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/graphalytics"
    ))
    .join(file)
}

#[test]
fn every_subcommand_explains_itself_with_examples() {
    for args in [
        &["--help"][..],
        &["generate", "--help"],
        &["convert", "--help"],
        &["export", "--help"],
        &["info", "--help"],
        &["verbs", "--help"],
        &["verbs", "check", "--help"],
        &["verbs", "bench", "--help"],
        &["bsp", "--help"],
        &["gtl", "--help"],
        &["gtl", "run", "--help"],
        &["gtl", "get", "--help"],
        &["gtl", "updates", "--help"],
        &["gtl", "init", "--help"],
        &["gtl", "add-edge", "--help"],
        &["gtl", "delete-edge", "--help"],
        &["gtl", "merge", "--help"],
        &["gtl", "file", "--help"],
        &["gtl", "bench", "--help"],
        &["kv", "serve", "--help"],
        &["kv", "get", "--help"],
        &["kv", "put", "--help"],
        &["kv", "traverse", "--help"],
        &["kv", "move", "--help"],
        &["kv", "stop", "--help"],
        &["meta", "--help"],
        &["meta", "serve", "--help"],
        &["meta", "cluster", "up", "--help"],
        &["meta", "load", "--help"],
        &["meta", "query", "--help"],
        &["meta", "bench", "--help"],
    ] {
        let out = quiver(args);
        assert!(out.status.success(), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("Examples:"),
            "{args:?} has no examples"
        );
    }
    let out = quiver(&["generate", "rmat", "--help"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("--edge-factor"));
}

#[test]
fn usage_errors_exit_2_and_other_errors_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let out = quiver(&["info", "--no-such-flag", "x"]);
    assert_eq!(out.status.code(), Some(2));
    let g = dir.path().join("g.qcsr");
    let out = quiver(&["generate", "rmat", "--scale", "0", "-o", path(&g)]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("scale must be 1..=31"),
        "{}",
        stderr(&out)
    );
    let out = quiver(&["convert", "-", "-o", path(&g), "--mem", "12parsecs"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("parsecs"));
    // kv: a policy or mix that does not exist, and a library's refusal.
    undirected_rmat(&g, 6, 16);
    for (args, named) in [
        (&["--policy", "nope"][..], "split+cache"),
        (&["--mix", "95/6"], "adding up to 100"),
        (&["--interval", "1500ms"], "interval"),
        (&["--min-degree", "100000"], "min_degree"),
    ] {
        let mut argv = vec!["kv", "bench", path(&g), "--duration", "1s"];
        argv.extend(args);
        let out = quiver(&argv);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(named), "{args:?}: {}", stderr(&out));
    }
    let out = quiver(&["info", path(&dir.path().join("missing.qcsr"))]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("missing.qcsr"), "{}", stderr(&out));
    let text = dir.path().join("edges.txt");
    std::fs::write(&text, "0 1\n").unwrap();
    let out = quiver(&["info", path(&text)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("not a .qcsr graph"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn generate_then_info_reports_the_graph_and_its_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("grid.qcsr");
    let report = json(&quiver(&[
        "generate",
        "grid",
        "--rows",
        "3",
        "--cols",
        "4",
        "-o",
        path(&g),
        "--json",
    ]));
    assert_eq!(report["vertices"], 12);
    assert_eq!(report["edges"], 17);
    let info = json(&quiver(&[
        "info",
        path(&g),
        "--verify",
        "--block-size",
        "64",
        "--list-blocks",
        "--json",
    ]));
    assert_eq!(info["vertices"], 12);
    assert_eq!(info["edges"], 17);
    assert_eq!(info["verified"], true);
    assert_eq!(info["degrees"]["max"], 2);
    let blocks = info["blocks"]["list"].as_array().unwrap();
    assert_eq!(info["blocks"]["count"].as_u64(), Some(blocks.len() as u64));
    assert!(blocks.len() > 1, "a 64-byte budget splits a 12-vertex grid");
    let chunks = json(&quiver(&["info", path(&g), "--chunks", "3", "--json"]));
    assert_eq!(chunks["blocks"]["count"], 3);
    let human = quiver(&["info", path(&g)]);
    assert!(String::from_utf8_lossy(&human.stdout).contains("vertices   12"));
}

/// A walk from a vertex without out-edges says why it took no step.
#[test]
fn a_walk_from_a_vertex_without_out_edges_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("g.qcsr");
    let out = quiver_with_stdin(&["convert", "-", "-o", path(&g)], b"0 1\n1 2\n");
    assert!(out.status.success(), "{}", stderr(&out));
    let said = |source: &str| {
        let out = quiver(&["walk", "ppr", path(&g), "--source", source, "--walks", "50"]);
        assert!(out.status.success(), "{}", stderr(&out));
        String::from_utf8_lossy(&out.stdout).contains("no walk took a step")
    };
    assert!(said("2"));
    assert!(!said("0"));
}

/// A report printed into a pipe whose reader has gone (`quiver … | head`)
/// ends quietly with success, as Unix tools do: no panic, no message.
#[test]
fn a_report_into_a_closed_pipe_ends_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("g.qcsr");
    let karate = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/karate.txt"
    ));
    let out = quiver(&["convert", path(karate), "-o", path(&g), "--undirected"]);
    assert!(out.status.success(), "{}", stderr(&out));
    for args in [
        vec!["info", path(&g)],
        vec!["--json", "info", path(&g)],
        vec!["walk", "ppr", path(&g), "--source", "0", "--walks", "100"],
    ] {
        // The reader is gone before the program starts: every write fails.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = Command::new(env!("CARGO_BIN_EXE_quiver"))
            .args(&args)
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        assert!(
            !stderr(&out).contains("panicked"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

#[test]
fn convert_reads_stdin_and_export_writes_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("g.qcsr");
    let out = quiver_with_stdin(
        &["convert", "-", "-o", path(&g), "--undirected", "--json"],
        b"# tiny\n0 1\n1 2\n",
    );
    let report = json(&out);
    assert_eq!(report["vertices"], 3);
    assert_eq!(report["edges"], 4);
    let out = quiver(&["export", path(&g), "-o", "-"]);
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "0\t1\n1\t0\n1\t2\n2\t1\n"
    );
    let once = dir.path().join("once.txt");
    let out = quiver(&[
        "--json",
        "export",
        path(&g),
        "-o",
        path(&once),
        "--each-edge-once",
    ]);
    assert_eq!(json(&out)["edges"], 2);
    assert_eq!(std::fs::read_to_string(&once).unwrap(), "0\t1\n1\t2\n");
    // A directed graph stores each edge once already: refused, no output.
    let directed = dir.path().join("d.qcsr");
    let out = quiver_with_stdin(&["convert", "-", "-o", path(&directed)], b"0 1\n");
    assert!(out.status.success(), "{}", stderr(&out));
    let refused = dir.path().join("refused.txt");
    let out = quiver(&[
        "export",
        path(&directed),
        "-o",
        path(&refused),
        "--each-edge-once",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("needs an undirected graph"),
        "{}",
        stderr(&out)
    );
    assert!(!refused.exists());
}

#[test]
fn a_bad_line_is_reported_with_file_and_line_and_leaves_no_output() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("bad.txt");
    std::fs::write(&input, "0 1\n1 two\n").unwrap();
    let g = dir.path().join("g.qcsr");
    let out = quiver(&["convert", path(&input), "-o", path(&g)]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("bad.txt: line 2") && err.contains("\"two\""),
        "{err}"
    );
    assert!(!g.exists());
}

/// The driver running `args` with its temporary files in `tmp`, its stdout
/// and stderr piped, to be signalled.
fn spawn_with_tmpdir<S: AsRef<std::ffi::OsStr>>(args: &[S], tmp: &Path) -> std::process::Child {
    Command::new(env!("CARGO_BIN_EXE_quiver"))
        .args(args)
        .env("TMPDIR", tmp)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The demo's arguments for a quick run: a small graph, a short kv run, a
/// small meta load.
const QUICK_DEMO: &[&str] = &[
    "demo",
    "--scale",
    "10",
    "--kv-duration",
    "2s",
    "--meta-vertices",
    "3000",
];

/// Processes whose command line names `dir`: the servers and nodes a run
/// started with files there.
fn processes_naming(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if cmdline.contains(path(dir)) {
                found.push(cmdline);
            }
        }
    }
    found
}

#[test]
fn demo_runs_every_engine_and_checks_each_step() {
    let tmp = tempfile::tempdir().unwrap();
    let mut args = QUICK_DEMO.to_vec();
    args.push("--json");
    let out = Command::new(env!("CARGO_BIN_EXE_quiver"))
        .args(&args)
        .env("TMPDIR", tmp.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let steps: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).expect("a JSON report a line"))
        .collect();
    let names: Vec<&str> = steps.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        ["generate", "convert", "walk", "bsp", "kv", "gtl", "meta"]
    );
    // Every command shown "by hand" parses with today's flags: each part,
    // its optional [flags] included, run with --help appended (so nothing
    // runs, and a bad flag or value is still refused).
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_quiver")).parent().unwrap();
    let search = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap());
    for step in &steps {
        let shown = step["by_hand"].as_str().unwrap();
        assert!(shown.starts_with("quiver "), "{step}");
        let plain = shown.replace(['[', ']'], "");
        for part in plain.split(" && ").flat_map(|p| p.split(" & ")) {
            let out = Command::new("sh")
                .arg("-c")
                .arg(format!("{part} --help"))
                .env("PATH", &search)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "`{part}` does not parse: {}",
                stderr(&out)
            );
        }
    }
    let result = |name: &str| &steps.iter().find(|s| s["name"] == name).unwrap()["result"];
    assert_eq!(result("generate")["vertices"], 1024);
    assert_eq!(result("convert")["identical"], true);
    let walk = result("walk");
    assert!(
        walk["graphwalker_bytes_read"].as_u64().unwrap() > 0,
        "{walk}"
    );
    assert!(
        walk["iteration_bytes_read"].as_u64() >= walk["graphwalker_bytes_read"].as_u64(),
        "{walk}"
    );
    let bsp = result("bsp");
    assert_eq!(bsp["nodes"], 2);
    assert!(bsp["max_difference_from_reference"].as_f64().unwrap() < 1e-9);
    let kv = result("kv");
    assert!(
        kv["remote_share_last_interval"].as_f64() < kv["remote_share_first_tick"].as_f64(),
        "migration did not make Gets local: {kv}"
    );
    assert!(kv["keys_moved"].as_u64().unwrap() > 0, "{kv}");
    let gtl = result("gtl");
    assert_eq!(gtl["requests"], 20_000);
    assert!(gtl["gtl_pages_read"].as_u64().unwrap() > 0, "{gtl}");
    assert!(gtl["csr_pages_read"].as_u64().unwrap() > 0, "{gtl}");
    let meta = result("meta");
    assert!(meta["files_now"].as_u64().unwrap() > 0, "{meta}");
    assert_eq!(meta["files_before_load"], 0);
    // Nothing left behind: no file, no server.
    let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
    assert!(left.is_empty(), "the demo left {left:?}");
    assert!(processes_naming(tmp.path()).is_empty());
}

#[test]
fn demo_interrupted_at_any_step_leaves_no_file_and_no_server() {
    use std::io::BufRead;
    // Interrupted as the walk starts, as bsp's nodes and kv's run, and
    // as meta's servers start or load.
    for after in 2..=6 {
        let tmp = tempfile::tempdir().unwrap();
        // A meta load long enough to be interrupted.
        let mut args = QUICK_DEMO[..QUICK_DEMO.len() - 2].to_vec();
        args.extend(["--json", "--meta-vertices", "100000"]);
        let mut child = spawn_with_tmpdir(&args, tmp.path());
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        for _ in 0..after {
            lines.next().unwrap().unwrap();
        }
        // Into the next step.
        std::thread::sleep(std::time::Duration::from_millis(300));
        let killed = Command::new("kill")
            .args(["-INT", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(killed.success());
        let out = child.wait_with_output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(130),
            "after step {after}: {}",
            stderr(&out)
        );
        assert!(stderr(&out).contains("interrupted"), "{}", stderr(&out));
        let left: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().collect();
        assert!(left.is_empty(), "after step {after} the demo left {left:?}");
        assert!(
            processes_naming(tmp.path()).is_empty(),
            "after step {after}: {:?}",
            processes_naming(tmp.path())
        );
    }
}

#[test]
fn walk_reports_counts_and_the_top_vertices() {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("grid.qcsr");
    json(&quiver(&[
        "generate",
        "grid",
        "--rows",
        "30",
        "--cols",
        "30",
        "--undirected",
        "--json",
        "-o",
        path(&g),
    ]));
    let work = path(dir.path());
    let report = json(&quiver(&[
        "walk",
        "ppr",
        path(&g),
        "--source",
        "0",
        "--walks",
        "500",
        "--mem",
        "1MiB",
        "--block-size",
        "8KiB",
        "--work-dir",
        work,
        "--json",
    ]));
    for field in [
        "steps",
        "blocks_loaded",
        "bytes_read",
        "bytes_written",
        "wall_ns",
        "peak_mem_bytes",
    ] {
        assert!(report[field].is_u64(), "--json lacks {field}: {report}");
    }
    assert!(report["peak_mem_bytes"].as_u64() <= Some(1 << 20));
    let top = report["result"]["top"].as_array().unwrap();
    assert_eq!(top[0]["vertex"], 0, "the source is the most visited vertex");
    assert!(top[0]["visits"].as_u64() >= Some(500));
    let exact = |mode: &str| {
        json(&quiver(&[
            "walk",
            "raw",
            path(&g),
            "--walks",
            "300",
            "--length",
            "8",
            "--exact",
            "--mode",
            mode,
            "--mem",
            "1MiB",
            "--block-size",
            "8KiB",
            "--work-dir",
            work,
            "--json",
        ]))
    };
    // Exact mode walks identically in every mode.
    let steps = exact("memory")["steps"].clone();
    assert!(steps.as_u64() > Some(0));
    assert_eq!(exact("graphwalker")["steps"], steps);
    assert_eq!(exact("iteration")["steps"], steps);
    let out = quiver(&[
        "walk",
        "ppr",
        path(&g),
        "--source",
        "5000",
        "--work-dir",
        work,
    ]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "an out-of-range source is a usage error"
    );
    assert!(
        stderr(&out).contains("--source 5000 is not a vertex"),
        "{}",
        stderr(&out)
    );
    let out = quiver(&["walk", "ppr", path(&g), "--source", "0", "--mem", "0"]);
    assert_eq!(out.status.code(), Some(2));
    // Nonsense Node2Vec parameters and partition sizes are named.
    for (flags, says) in [
        (
            ["--node2vec-p", "0"],
            "Node2Vec's p must be a finite number above 0, got 0",
        ),
        (
            ["--node2vec-q", "inf"],
            "Node2Vec's q must be a finite number above 0, got inf",
        ),
        (
            ["--partition-size", "0"],
            "the partition size of memory mode must be more than zero bytes",
        ),
    ] {
        let mut args = vec!["walk", "raw", path(&g), "--walks", "10", "--mode", "memory"];
        args.extend(flags);
        let out = quiver(&args);
        assert_eq!(out.status.code(), Some(2), "{flags:?}");
        assert!(stderr(&out).contains(says), "{flags:?}: {}", stderr(&out));
    }
}

#[test]
fn verbs_check_spawns_a_local_job_and_collects_every_node() {
    let report = json(&quiver(&["verbs", "check", "--nodes", "3", "--json"]));
    assert_eq!(report["passed"], true);
    let nodes = report["nodes"].as_array().unwrap();
    assert_eq!(nodes.len(), 3);
    for (rank, node) in nodes.iter().enumerate() {
        assert_eq!(node["rank"], rank);
        let checks = node["checks"].as_array().unwrap();
        assert!(
            checks.len() >= 7 && checks.iter().all(|c| c["passed"] == true),
            "{node}"
        );
        assert!(node["counters"]["total"]["read"]["ops"].as_u64().unwrap() > 0);
    }
    let bench = json(&quiver(&[
        "verbs",
        "bench",
        "--fabric",
        "loopback",
        "--cost-model",
        "--ops",
        "200",
        "--json",
    ]));
    let ops: Vec<&str> = bench["measurements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["op"].as_str().unwrap())
        .collect();
    assert_eq!(
        ops,
        ["read", "cas", "write", "write", "write", "write", "write", "write"]
    );
    assert!(
        bench["measurements"][0]["modelled_us_per_op"]
            .as_f64()
            .unwrap()
            >= 2.0
    );
}

/// Naming a fabric asks for a job on it: without --nodes (and outside a
/// launcher) the command's own number of nodes runs on this machine.
/// `--fabric tcp`, the default's name, used to run kv's loopback threads,
/// and `verbs check` without flags used to stop for want of a rank.
#[test]
fn a_fabric_without_a_node_count_runs_a_local_job_on_it() {
    let report = json(&quiver(&["verbs", "check", "--json"]));
    assert_eq!(report["passed"], true, "{report}");
    assert_eq!(report["nodes"].as_array().unwrap().len(), 2, "{report}");
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("rmat.qcsr");
    undirected_rmat(&g, 10, 8);
    let report = json(&quiver(&[
        "--json",
        "kv",
        "bench",
        path(&g),
        "--fabric",
        "tcp",
        "--duration",
        "2s",
        "--interval",
        "1s",
    ]));
    assert_eq!(report["fabric"], "tcp", "{report}");
    assert_eq!(report["nodes"], 8, "{report}");
    assert!(report["queries"].as_u64().unwrap() > 0, "{report}");
    // The report's fields by the names the issue gives them.
    let number = |field: &str| {
        report[field]
            .as_f64()
            .unwrap_or_else(|| panic!("no {field}: {report}"))
    };
    assert!(number("ops_per_s") > 0.0 && number("modelled_ops_per_s") > 0.0);
    assert!((0.0..=1.0).contains(&number("remote_share")), "{report}");
    for field in ["keys_moved", "one_sided_ops_per_migration"] {
        number(field);
    }
    assert!(!report["series"].as_array().unwrap().is_empty(), "{report}");
}

#[test]
fn verbs_mistakes_are_named() {
    // (arguments after `verbs check`, exit code, what stderr must say)
    let cases: [(&[&str], i32, &str); 3] = [
        (
            &["--cost-model"],
            2,
            "--cost-model applies to --fabric loopback only",
        ),
        (
            &["--rank", "5", "--size", "2", "--coordinator", "127.0.0.1:1"],
            1,
            "rank 5 is out of range for a job of 2 nodes",
        ),
        (
            &[
                "--rank",
                "1",
                "--size",
                "2",
                "--coordinator",
                "127.0.0.1:1",
                "--timeout",
                "300ms",
            ],
            1,
            "could not reach the coordinator at 127.0.0.1:1",
        ),
    ];
    for (args, code, says) in cases {
        let out = quiver(&[&["verbs", "check"], args].concat());
        assert_eq!(out.status.code(), Some(code), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
}

/// A disk that flipped a few bits: every command that reads a graph ends in
/// an error naming the file (exit code 1), never a panic and never output
/// made from unverified bytes. Every byte of a `.qcsr` is covered by a
/// checksum, so no flipped copy may be read as if it were intact. Walks
/// read the graph's index (header, offsets, page table) and then only the
/// pages they visit, each checked: a flip in the index fails them, and a
/// walk that succeeds must walk exactly as on the intact file.
#[test]
fn flipped_bytes_make_every_reading_command_fail_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.qcsr");
    undirected_rmat(&good, 8, 4);
    // And a graph with an id map (and weights): a Graphalytics example.
    let with_ids = dir.path().join("ids.qcsr");
    let edges = graphalytics("example-directed.e");
    let out = quiver(&["convert", path(&edges), "-o", path(&with_ids)]);
    assert!(out.status.success(), "{}", stderr(&out));
    let bad = dir.path().join("flipped.qcsr");
    let export = dir.path().join("edges.txt");
    // Every command that reads a graph, on the graph at `graph`.
    let commands = |graph: &Path| -> Vec<Vec<String>> {
        let (graph, export) = (path(graph).to_owned(), path(&export).to_owned());
        let mut commands = vec![
            vec!["info".into(), graph.clone()],
            vec!["info".into(), graph.clone(), "--verify".into()],
            vec!["export".into(), graph.clone(), "-o".into(), export],
        ];
        // Read directly, and mapped.
        for (mode, io) in ["memory", "graphwalker", "iteration"]
            .into_iter()
            .flat_map(|mode| [(mode, "direct"), (mode, "buffered")])
        {
            let walk = [
                "walk", "raw", &graph, "--walks", "100", "--mode", mode, "--io", io,
            ];
            let blocks = ["--block-size", "4KiB", "--mem", "1MiB"];
            let blocks = if mode == "memory" {
                &[][..]
            } else {
                &blocks[..]
            };
            commands.push(walk.iter().chain(blocks).map(|a| a.to_string()).collect());
        }
        for bsp in [&["bsp", "wcc"][..], &["bsp", "pagerank", "--nodes", "2"]] {
            commands.push(
                bsp.iter()
                    .map(|a| a.to_string())
                    .chain([graph.clone()])
                    .collect(),
            );
        }
        for gtl in [
            &["gtl", "run", "bfs"][..],
            &["gtl", "run", "pagerank", "--backend", "csr"],
            &["gtl", "get"],
            &["gtl", "updates"],
        ] {
            let mut command: Vec<String> = gtl.iter().map(|a| a.to_string()).collect();
            command.insert(3.min(command.len()), graph.clone());
            if gtl[1] == "get" {
                // A vertex of both graphs (the id map's ids are 1..=10).
                command.push("1".into());
            }
            commands.push(command);
        }
        let kv = [
            "--fabric",
            "loopback",
            "--nodes",
            "2",
            "--duration",
            "200ms",
            "--tick",
            "100ms",
            "--interval",
            "100ms",
        ];
        commands.push(
            ["kv", "bench", &graph]
                .iter()
                .chain(&kv)
                .map(|a| a.to_string())
                .collect(),
        );
        commands.push(
            [
                "kv", "migrate", &graph, "--values", "5", "--fabric", "loopback", "--nodes", "2",
            ]
            .map(String::from)
            .to_vec(),
        );
        commands
    };
    let run = |command: &[String]| quiver(&command.iter().map(String::as_str).collect::<Vec<_>>());
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = |bound: usize| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        usize::try_from(state % bound as u64).expect("below a usize bound")
    };
    // What a walk printed that does not depend on timing: its step count
    // and its visits.
    let walked = |out: &Output| -> Vec<String> {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|line| match line.split_whitespace().next() {
                Some("visits") => Some(line.to_string()),
                Some("walks") => line
                    .split(": ")
                    .nth(1)
                    .map(|rest| rest.split(" steps").next().unwrap_or_default().to_string()),
                _ => None,
            })
            .collect()
    };
    for (good, copies) in [(&good, 20), (&with_ids, 10)] {
        let original = std::fs::read(good).unwrap();
        let layout = quiver_csr::GraphIndex::open(good).unwrap().layout();
        let in_index = |i: usize| quiver_csr::testing::read_by_index(&layout, i as u64);
        let mut intact = Vec::new();
        for command in commands(good) {
            let ok = run(&command);
            assert!(
                ok.status.success(),
                "{command:?} on the intact file: {}",
                stderr(&ok)
            );
            intact.push(walked(&ok));
        }
        for copy in 0..copies {
            let mut bytes = original.clone();
            let flips = 1 + next(3);
            let mut at = Vec::new();
            for _ in 0..flips {
                let i = next(bytes.len());
                let xor = 1 + u8::try_from(next(255)).expect("below 255");
                // A byte flipped twice could come back whole: one flip a byte.
                if !at.contains(&i) {
                    bytes[i] ^= xor;
                    at.push(i);
                }
            }
            std::fs::write(&bad, &bytes).unwrap();
            for (command, intact) in commands(&bad).iter().zip(&intact) {
                let _ = std::fs::remove_file(&export);
                let out = run(command);
                let err = stderr(&out);
                if command[0] == "walk" && out.status.success() {
                    assert!(
                        at.iter().all(|&i| !in_index(i)),
                        "copy {copy}: {command:?} accepted bytes {at:?} of the index flipped"
                    );
                    assert_eq!(
                        &walked(&out),
                        intact,
                        "copy {copy} (bytes {at:?} flipped): {command:?} walked otherwise"
                    );
                    continue;
                }
                assert_eq!(
                    out.status.code(),
                    Some(1),
                    "copy {copy} (bytes {at:?} flipped): {command:?} did not fail cleanly: {err}"
                );
                assert!(!err.contains("panicked"), "{command:?}: {err}");
                assert!(
                    err.contains("flipped.qcsr"),
                    "{command:?} does not name the file: {err}"
                );
                assert!(
                    !export.exists(),
                    "{command:?} left an export of corrupted data"
                );
            }
        }
    }
}

/// A Graphalytics dataset converts beside itself, keeps its vertices'
/// original ids (info shows them, export writes them), takes its direction
/// from its properties, and refuses a contradicting --undirected.
#[test]
fn graphalytics_datasets_keep_their_ids() {
    let dir = tempfile::tempdir().unwrap();
    for ext in ["v", "e", "properties"] {
        for name in ["example-directed", "example-undirected"] {
            let file = format!("{name}.{ext}");
            std::fs::copy(graphalytics(&file), dir.path().join(&file)).unwrap();
        }
    }
    let edges = dir.path().join("example-undirected.e");
    let converted = json(&quiver(&["convert", path(&edges), "--json"]));
    assert_eq!(converted["format"], "graphalytics");
    assert_eq!(converted["vertices"], 9);
    assert_eq!(converted["edges"], 24);
    let g = dir.path().join("example-undirected.qcsr");
    let info = json(&quiver(&["info", path(&g), "--verify", "--json"]));
    assert_eq!(info["id_map"], true);
    assert_eq!(info["undirected"], true);
    let human = String::from_utf8_lossy(&quiver(&["info", path(&g)]).stdout).into_owned();
    assert!(
        human.contains("original ids from the input (id map), 2 to 10"),
        "{human}"
    );
    let export = quiver(&["export", path(&g), "-o", "-"]);
    let text = String::from_utf8_lossy(&export.stdout).into_owned();
    assert!(
        text.starts_with("2\t3\t0.9\n2\t4\t0.69\n3\t2\t0.9\n"),
        "{text}"
    );
    assert_eq!(text.lines().count(), 24);
    let out = quiver(&["export", path(&g), "-o", path(&dir.path().join("e.bin"))]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("original ids"), "{}", stderr(&out));
    let directed = dir.path().join("example-directed.e");
    let out = quiver(&["convert", path(&directed), "--undirected", "-o", path(&g)]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("example-directed.properties"),
        "{}",
        stderr(&out)
    );
    std::fs::remove_file(dir.path().join("example-directed.v")).unwrap();
    let out = quiver(&["convert", path(&directed), "--format", "graphalytics"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("example-directed.v"),
        "{}",
        stderr(&out)
    );
}

/// `quiver bsp` on a Graphalytics example writes the benchmark's reference
/// output byte for byte where it is exact (BFS, CDLP), alone and as a job of
/// two node processes, and names bad requests.
#[test]
fn bsp_writes_the_graphalytics_reference_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("directed.qcsr");
    let edges = graphalytics("example-directed.e");
    let out = quiver(&["convert", path(&edges), "-o", path(&g)]);
    assert!(out.status.success(), "{}", stderr(&out));
    let output = dir.path().join("out.txt");
    let runs: [(&[&str], &str); 4] = [
        (&["bfs", "--source", "1"], "BFS"),
        (&["bfs", "--source", "1", "--nodes", "2"], "BFS"),
        (&["cdlp", "--iterations", "2"], "CDLP"),
        (
            &[
                "cdlp",
                "--iterations",
                "2",
                "--nodes",
                "2",
                "--direction",
                "push",
            ],
            "CDLP",
        ),
    ];
    for (args, name) in runs {
        let mut command = vec!["bsp"];
        command.extend_from_slice(args);
        command.extend([path(&g), "-o", path(&output)]);
        let out = quiver(&command);
        assert!(out.status.success(), "{command:?}: {}", stderr(&out));
        let ours = std::fs::read_to_string(&output).unwrap();
        let theirs =
            std::fs::read_to_string(graphalytics(&format!("example-directed-{name}"))).unwrap();
        assert_eq!(ours, theirs, "{command:?}");
    }
    let json = json(&quiver(&[
        "bsp",
        "pagerank",
        path(&g),
        "--iterations",
        "2",
        "--nodes",
        "2",
        "--json",
    ]));
    assert_eq!(json["nodes"].as_array().map(Vec::len), Some(2), "{json}");
    assert!(
        json["nodes"][0]["supersteps"]
            .as_array()
            .is_some_and(|s| s.len() == 2),
        "{json}"
    );
    for (args, needle) in [
        (
            &["bfs", "--source", "99"][..],
            "--source 99 is not a vertex",
        ),
        (&["pagerank", "--iterations", "0"], "iterations"),
        (&["bfs", "--source", "1", "--nodes", "0"], "nodes"),
        (&["nonsense"], "unrecognized subcommand"),
    ] {
        let mut command = vec!["bsp"];
        command.extend_from_slice(args);
        command.push(path(&g));
        let out = quiver(&command);
        assert_eq!(out.status.code(), Some(2), "{command:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(needle),
            "{command:?}: {}",
            stderr(&out)
        );
    }
    let unweighted = dir.path().join("unweighted.qcsr");
    let out = quiver(&[
        "generate",
        "grid",
        "--rows",
        "3",
        "--cols",
        "3",
        "-o",
        path(&unweighted),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = quiver(&["bsp", "sssp", path(&unweighted), "--source", "0"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("SSSP needs edge weights"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn gtl_runs_on_both_backends_and_names_a_bad_vertex() {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("g.qcsr");
    undirected_rmat(&g, 8, 4);
    let mut results = Vec::new();
    for backend in ["gtl", "csr"] {
        let out = quiver(&[
            "--json",
            "gtl",
            "run",
            "cc",
            path(&g),
            "--backend",
            backend,
            "--cache",
            "32KiB",
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        for field in [
            "pages_read",
            "pages_written",
            "modelled_ns",
            "wall_ns",
            "cache_hits",
        ] {
            assert!(report[field].is_u64(), "{backend}: {field} in {report}");
        }
        results.push(report["result"].clone());
    }
    assert_eq!(results[0], results[1]);
    let out = quiver(&["--json", "gtl", "bench", "cc", path(&g), "--cache", "32KiB"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["gtl"]["result"], results[0]);
    assert_eq!(report["csr"]["result"], results[0]);
    assert!(report["modelled_csr_over_gtl"].as_f64().unwrap() > 0.0);
    let mut written = Vec::new();
    for update_path in ["delta", "direct"] {
        let out = quiver(&[
            "--json",
            "gtl",
            "updates",
            path(&g),
            "--path",
            update_path,
            "--queries",
            "10",
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["snapshots"].as_array().map(Vec::len), Some(10));
        assert!(report["added_edges"].as_u64().unwrap() > 0, "{report}");
        written.push(report["pages_written"].as_u64().unwrap());
    }
    assert!(written[0] < written[1], "delta {written:?} direct");
    let out = quiver(&["gtl", "updates", path(&g), "--share", "1.5"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "a nonsense flag is a usage error"
    );
    assert!(stderr(&out).contains("share"), "{}", stderr(&out));
    // A device image between commands: init, update, merge, read.
    let img = dir.path().join("dev.img");
    let img = path(&img);
    let run = |args: &[&str]| {
        let out = quiver(args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        out
    };
    for (geometry, want) in [
        ("2x2", "CHANNELSxWAYSxBLOCKSxPAGES"),
        ("2x2x1x8", "too small"),
        ("2x2x4x8", "too small"),
    ] {
        let out = quiver(&[
            "gtl",
            "init",
            path(&g),
            "--device",
            img,
            "--geometry",
            geometry,
        ]);
        assert!(
            !out.status.success() && stderr(&out).contains(want),
            "{geometry}: {}",
            stderr(&out)
        );
    }
    run(&[
        "gtl",
        "init",
        path(&g),
        "--device",
        img,
        "--geometry",
        "2x2x64x32",
    ]);
    let cc = |backend: &str| {
        let out = quiver(&[
            "--json",
            "gtl",
            "run",
            "cc",
            "--device",
            img,
            "--backend",
            backend,
        ]);
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        (out, report["result"].clone())
    };
    let (on_gtl, on_csr) = (cc("gtl").1, cc("csr").1);
    assert_eq!(on_gtl, results[0], "cc on the image is cc on the graph");
    assert_eq!(on_csr, results[0]);
    let out = quiver(&["gtl", "init", path(&g), "--device", img]);
    assert!(stderr(&out).contains("--force"), "{}", stderr(&out));
    let list = |v: &str| -> Vec<u64> {
        let out = run(&["--json", "gtl", "get", "--device", img, v]);
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        report["neighbours"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_u64().unwrap())
            .collect()
    };
    let before = list("3");
    run(&["gtl", "add-edge", "--device", img, "3", "200"]);
    run(&[
        "gtl", "add-edge", "--device", img, "3", "201", "--path", "direct",
    ]);
    assert_eq!(list("3"), [before.clone(), vec![200, 201]].concat());
    assert!(list("200").contains(&3), "undirected: both ways");
    run(&["gtl", "merge", "--device", img]);
    let (out, _) = cc("csr");
    assert!(stderr(&out).contains("updated since"), "{}", stderr(&out));
    let reached = |out: std::process::Output| -> serde_json::Value {
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        report["result"].clone()
    };
    let bfs = reached(run(&[
        "--json", "gtl", "run", "bfs", "--device", img, "--source", "3",
    ]));
    assert!(bfs["reached"].as_u64().unwrap() > 1, "{bfs}");
    run(&["gtl", "delete-edge", "--device", img, "3", "200"]);
    let out = quiver(&["gtl", "delete-edge", "--device", img, "3", "200"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("no such edge"), "{}", stderr(&out));
    assert_eq!(list("3"), [before, vec![201]].concat());
    let out = quiver(&["gtl", "add-edge", "--device", path(&g), "3", "4"]);
    assert!(
        stderr(&out).contains("not a quiver gtl device image"),
        "{}",
        stderr(&out)
    );
    // The file device: both layouts return the same neighbours.
    let gtl_file = dir.path().join("g.gtl");
    let out = run(&[
        "--json",
        "gtl",
        "file",
        path(&g),
        "--gtl",
        path(&gtl_file),
        "--requests",
        "500",
    ]);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let runs = report["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3);
    assert!(runs[0]["neighbours"].as_u64().unwrap() > 0);
    assert!(runs
        .iter()
        .all(|r| r["neighbours"] == runs[0]["neighbours"]));
    let out = quiver(&["gtl", "get", path(&g), "256"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "a vertex out of range is a usage error"
    );
    assert!(
        stderr(&out).contains("256 is not a vertex"),
        "{}",
        stderr(&out)
    );
}

/// The gtl commands name an image by --device (the test above runs CC on
/// one on both backends) and keep the NAND on a sparse file on request;
/// mistakes are named: neither or both of a graph and an image, an image
/// given as a graph, --slack or --flash-file with an image, settings out of
/// range by their flags, and a file that is not an image given as one.
#[test]
fn gtl_names_an_image_by_device_and_a_bad_setting_by_its_flag() {
    let dir = tempfile::tempdir().unwrap();
    let (g, img) = (dir.path().join("g.qcsr"), dir.path().join("dev.img"));
    undirected_rmat(&g, 6, 4);
    let (g, img) = (path(&g), path(&img));
    let out = quiver(&["gtl", "init", g, "--device", img, "--geometry", "2x2x64x32"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // The NAND on a sparse file instead of memory: the same answer.
    let flash = dir.path().join("nand");
    let cc = |extra: &[&str]| {
        let args = [&["--json", "gtl", "run", "cc", g][..], extra].concat();
        json(&quiver(&args))["result"].clone()
    };
    assert_eq!(cc(&["--flash-file", path(&flash)]), cc(&[]));
    assert!(!flash.exists(), "the flash file is scratch space");
    // Never made over an existing file: the graph given by mistake is kept.
    let before = std::fs::read(g).unwrap();
    let out = quiver(&["gtl", "run", "cc", g, "--flash-file", g]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("already exists"), "{}", stderr(&out));
    assert_eq!(std::fs::read(g).unwrap(), before);
    let on_graph = json(&quiver(&["--json", "gtl", "get", g, "3"]));
    let on_image = json(&quiver(&["--json", "gtl", "get", "--device", img, "3"]));
    assert_eq!(on_graph["neighbours"], on_image["neighbours"]);
    for (args, want) in [
        (&["gtl", "run", "cc"][..], "<GRAPH|--device <IMAGE>>"),
        (
            &["gtl", "get", g],
            "not a vertex id: give the graph, then the vertex",
        ),
        (
            &["gtl", "run", "cc", g, "--device", img],
            "cannot be used with",
        ),
        (
            &[
                "gtl",
                "run",
                "cc",
                "--device",
                img,
                "--flash-file",
                path(&flash),
            ],
            "cannot be used with '--flash-file",
        ),
        (
            &["gtl", "get", "--device", img, "3", "--slack", "10%"],
            "cannot be used with '--slack",
        ),
        (
            &["gtl", "run", "cc", img],
            "is a device image: name it with --device",
        ),
        (
            &["gtl", "add-edge", img, "3", "17"],
            "name the image by --device, then the edge",
        ),
        (
            &["gtl", "run", "bfs", g, "--depth-fraction", "2"],
            "--depth-fraction: must be in (0, 1]",
        ),
        (
            &["gtl", "bench", "bfs", "--device", img, "--in-flight", "0"],
            "invalid value '0' for '--in-flight",
        ),
        (
            &["gtl", "updates", g, "--new-vertices", "1"],
            "--new-vertices: ",
        ),
        (&["gtl", "updates", g, "--slack", "0.9999"], "--slack: "),
    ] {
        let out = quiver(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(want), "{args:?}: {}", stderr(&out));
    }
    for args in [
        &["gtl", "run", "cc", "--device", g][..],
        &["gtl", "get", "--device", g, "3"],
    ] {
        let out = quiver(args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("not a quiver gtl device image")
                && !stderr(&out).contains("not a .qcsr graph"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

/// A metadata server process on a port of its own, killed with SIGKILL
/// when dropped (as a crash would).
struct MetaServer(std::process::Child);

impl MetaServer {
    fn start(addr: &str, cluster: &Path, data: &Path) -> MetaServer {
        MetaServer::paused_at(addr, cluster, data, None)
    }

    /// A server that stops for good at `pause` (see
    /// `quiver_meta::server::PAUSE_AT`) for the test to kill it there.
    fn paused_at(addr: &str, cluster: &Path, data: &Path, pause: Option<&str>) -> MetaServer {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_quiver"));
        if let Some(point) = pause {
            cmd.env(quiver_meta::server::PAUSE_AT, point);
        }
        let child = cmd
            .args([
                "meta",
                "serve",
                "--listen",
                addr,
                "--cluster",
                path(cluster),
                "--data",
                path(data),
            ])
            .args(["--threshold", "8", "--vnodes", "16"])
            .stderr(log(data))
            .spawn()
            .expect("the driver runs");
        MetaServer(child)
    }
}

/// Where a meta server started on `data` writes its log (appended across
/// restarts), for a failing test to show.
fn log(data: &Path) -> std::fs::File {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(data.with_extension("log"))
        .expect("the test directory is writable")
}

/// The logs of the meta servers on `data(0..n)`.
fn server_logs(n: usize, data: impl Fn(usize) -> PathBuf) -> String {
    (0..n)
        .map(|i| {
            let text = std::fs::read_to_string(data(i).with_extension("log")).unwrap_or_default();
            format!("--- server {i}:\n{text}")
        })
        .collect()
}

impl Drop for MetaServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `quiver --json kv ARGS --at AT`: a request to the kv store at `at`.
fn ask_kv(at: &str, args: &[&str]) -> Output {
    let mut argv = vec!["--json", "kv"];
    argv.extend(args);
    argv.extend(["--at", at]);
    quiver(&argv)
}

/// Waits until the kv store at `at` answers a get of `vertex` (a minute
/// at most).
fn wait_for_kv(at: &str, vertex: &str) {
    let started = std::time::Instant::now();
    while !ask_kv(at, &["get", vertex]).status.success() {
        assert!(started.elapsed().as_secs() < 60, "the store never answered");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

#[test]
fn kv_serve_answers_gets_puts_moves_and_traversals_until_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("rmat.qcsr");
    undirected_rmat(&g, 6, 16);
    let graph = quiver_csr::Graph::open(&g).unwrap();
    let v = (0..graph.num_vertices())
        .find(|&v| graph.degree(v) >= 3)
        .unwrap();
    let vertices = graph.num_vertices().to_string();
    let (v_text, start) = (v.to_string(), v.to_string());
    // Two nodes: node r listens on port + r.
    let port = free_ports(2).to_string();
    let at = format!("127.0.0.1:{port}");
    let serve_two = [
        "kv",
        "serve",
        path(&g),
        "--fabric",
        "loopback",
        "--nodes",
        "2",
    ];
    let mut serve = Command::new(env!("CARGO_BIN_EXE_quiver"))
        .args(serve_two)
        .args(["--port", &port])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let ask = |args: &[&str]| ask_kv(&at, args);
    // Whatever fails, the store is stopped, so no process outlives the test.
    let checked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        wait_for_kv(&at, "0");
        let get = |on: &str| json(&ask(&["get", &v_text, "--on", on]))["get"].clone();
        // At its home, which no other node has read it from yet.
        let home = json(&ask(&["get", &v_text]))["get"]["placed"]["cost"]["node"]
            .as_u64()
            .unwrap();
        let away = if home == 0 { "1" } else { "0" };
        let read = get(away);
        assert_eq!(read["neighbours"], serde_json::json!(graph.neighbors(v)));
        assert_eq!(read["placed"]["cost"]["one_sided"], 2);
        let moved = json(&ask(&["move", &v_text, "--to", away]));
        assert_eq!(
            moved["move"]["holder"].as_u64(),
            Some(away.parse().unwrap())
        );
        assert_eq!(get(away)["placed"]["cost"]["one_sided"], 0);
        assert!(ask(&["put", &v_text, "5"]).status.success());
        let grown = get(&home.to_string())["neighbours"]
            .as_array()
            .unwrap()
            .len();
        assert_eq!(grown, graph.neighbors(v).len() + 1);
        let hops = json(&ask(&["traverse", &start, "--neighbours", "2"]));
        assert_eq!(hops["traverse"]["first_hop"], 2);
        for request in [&["get", &vertices][..], &["put", "0", &vertices]] {
            let out = ask(request);
            assert_eq!(out.status.code(), Some(2), "{request:?}: {}", stderr(&out));
            assert!(
                stderr(&out).contains(&format!("{vertices} is not in the graph")),
                "{}",
                stderr(&out)
            );
        }
        assert!(ask(&["stop"]).status.success());
    }));
    if let Err(panic) = checked {
        let _ = serve.kill();
        // What the store said, for the failure's reader.
        if let Ok(out) = serve.wait_with_output() {
            eprintln!("kv serve said:\n{}", stderr(&out));
        }
        std::panic::resume_unwind(panic);
    }
    let out = serve.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("requests answered per node"),
        "{}",
        stderr(&out)
    );
    let out = ask(&["get", "0"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("is `quiver kv serve` running?"),
        "{}",
        stderr(&out)
    );
    let out = quiver(&[&serve_two[..], &["--port", "65535"]].concat());
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--port 65535"), "{}", stderr(&out));
}

/// The kv benchmark under `mpirun` on the mpi fabric (a build with the
/// `mpi` feature; `.ci/run` runs it): every rank is a node, values migrate,
/// and rank 0 reports the job's real size.
#[cfg(feature = "mpi")]
#[test]
fn kv_bench_runs_under_mpirun() {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("rmat.qcsr");
    undirected_rmat(&g, 10, 8);
    let out = Command::new("mpirun")
        .args(["-n", "3", "--oversubscribe", "--allow-run-as-root"])
        .arg(env!("CARGO_BIN_EXE_quiver"))
        .args(["--json", "kv", "bench", path(&g), "--fabric", "mpi"])
        .args(["--duration", "3s", "--interval", "1s", "--timeout", "60s"])
        .stdin(Stdio::null())
        .output()
        .expect("mpirun runs (openmpi-bin)");
    let report = json(&out);
    assert_eq!(report["fabric"], "mpi", "{report}");
    assert_eq!(report["nodes"], 3, "{report}");
    assert!(report["queries"].as_u64().unwrap() > 0, "{report}");
    assert!(report["keys_moved"].as_u64().unwrap() > 0, "{report}");
    assert!(
        report["one_sided_ops_per_migration"].as_f64().unwrap() <= 5.0,
        "{report}"
    );
}

/// bsp under `mpirun` on the mpi fabric (a build with the `mpi` feature;
/// `.ci/run` runs it): WCC on 2 ranks, pulling (every superstep, and by
/// the frontier's size), writes exactly the reference's labels, with
/// messages between the ranks.
#[cfg(feature = "mpi")]
#[test]
fn bsp_runs_under_mpirun() {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("rmat.qcsr");
    undirected_rmat(&g, 10, 8);
    let expected = dir.path().join("reference.txt");
    let out = quiver(&["bsp", "wcc", path(&g), "--reference", "-o", path(&expected)]);
    assert!(out.status.success(), "{}", stderr(&out));
    let expected = std::fs::read_to_string(&expected).unwrap();
    for direction in ["pull", "auto"] {
        let output = dir.path().join(format!("{direction}.txt"));
        let out = Command::new("mpirun")
            .args(["-n", "2", "--oversubscribe", "--allow-run-as-root"])
            .arg(env!("CARGO_BIN_EXE_quiver"))
            .args(["--json", "bsp", "wcc", path(&g), "--fabric", "mpi"])
            .args(["--direction", direction, "-o", path(&output)])
            .stdin(Stdio::null())
            .output()
            .expect("mpirun runs (openmpi-bin)");
        let report = json(&out);
        let nodes = report["nodes"].as_array().expect("node reports");
        assert_eq!(nodes.len(), 2, "{report}");
        let messages: u64 = nodes.iter().map(|n| n["messages"].as_u64().unwrap()).sum();
        assert!(messages > 0, "{report}");
        let labels = std::fs::read_to_string(&output).unwrap();
        assert_eq!(labels, expected, "--direction {direction}");
    }
}

/// The node processes a driver spawned (children of `parent`), by rank.
fn spawned_nodes(parent: u32) -> Vec<(u32, u32)> {
    let mut nodes: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // The parent's pid is the second field after the command's ")".
            let ppid: u32 = stat
                .rsplit(')')
                .next()?
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            (ppid == parent).then_some(pid)
        })
        .filter_map(|pid| {
            let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
            let rank = environ
                .split(|&b| b == 0)
                .find_map(|var| var.strip_prefix(b"QUIVER_RANK="))?;
            Some((std::str::from_utf8(rank).ok()?.parse().ok()?, pid))
        })
        .collect();
    nodes.sort_unstable();
    nodes
}

/// A tcp serve job whose node 0 is killed: the others keep answering for
/// the keys they hold, well past the moment the job used to tear them
/// down; gets for the dead node's keys fail naming its address; stop, sent
/// to a survivor, ends the job, which exits 1 naming the dead node.
#[test]
fn kv_serve_on_tcp_outlives_a_killed_node() {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("rmat.qcsr");
    undirected_rmat(&g, 8, 8);
    let graph = quiver_csr::Graph::open(&g).unwrap();
    let port = free_ports(3);
    // Requests go to node 1: node 0 is the one killed.
    let at = format!("127.0.0.1:{}", port + 1);
    let mut serve = Command::new(env!("CARGO_BIN_EXE_quiver"))
        .args(["kv", "serve", path(&g), "--fabric", "tcp", "--nodes", "3"])
        .args(["--port", &port.to_string()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let ask = |args: &[&str]| ask_kv(&at, args);
    let checked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        wait_for_kv(&at, "0");
        let home = |v: u32| {
            json(&ask(&["get", &v.to_string()]))["get"]["placed"]["cost"]["node"]
                .as_u64()
                .unwrap()
        };
        let on_0 = (0..graph.num_vertices()).find(|&v| home(v) == 0).unwrap();
        let on_1 = (0..graph.num_vertices()).find(|&v| home(v) == 1).unwrap();
        let nodes = spawned_nodes(serve.id());
        assert_eq!(nodes.len(), 3, "{nodes:?}");
        let (rank, pid) = nodes[0];
        assert_eq!(rank, 0);
        assert!(Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status()
            .unwrap()
            .success());
        std::thread::sleep(std::time::Duration::from_secs(8));
        for _ in 0..3 {
            let read = json(&ask(&["get", &on_1.to_string()]));
            assert_eq!(
                read["get"]["neighbours"],
                serde_json::json!(graph.neighbors(on_1))
            );
        }
        let out = ask(&["get", &on_0.to_string()]);
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        let named = format!("node 0 at 127.0.0.1:{port} does not answer");
        assert!(stderr(&out).contains(&named), "{}", stderr(&out));
        assert!(ask(&["stop"]).status.success());
        exit_within_a_minute(&mut serve, "the job outlived stop");
    }));
    if let Err(panic) = checked {
        let _ = serve.kill();
        // What the store said, for the failure's reader.
        if let Ok(out) = serve.wait_with_output() {
            eprintln!("kv serve said:\n{}", stderr(&out));
        }
        std::panic::resume_unwind(panic);
    }
    let out = serve.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("node 0 failed"), "{}", stderr(&out));
}

/// The first of `n` consecutive ports that are free now, below the
/// kernel's ephemeral range (32768 up), where the outgoing connections of
/// the tests running beside this one take theirs: a job on `--port P`
/// listens on P to P+n-1, and a port above P that is only likely free
/// lost that race in CI.
fn free_ports(n: u16) -> u16 {
    static NEXT: std::sync::atomic::AtomicU16 = std::sync::atomic::AtomicU16::new(0);
    let spread = (std::process::id() % 1000) as u16 * 12;
    for _ in 0..1000 {
        let step = NEXT.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
        let base = 20000 + (spread + step) % 12000;
        let held: Vec<_> = (base..base + n)
            .map_while(|p| std::net::TcpListener::bind(("127.0.0.1", p)).ok())
            .collect();
        if held.len() == usize::from(n) {
            return base;
        }
    }
    panic!("no {n} consecutive free ports below 32000");
}

/// Waits for `child` to exit and returns how; fails the test, saying
/// `what`, if it runs for over a minute.
fn exit_within_a_minute(child: &mut std::process::Child, what: &str) -> std::process::ExitStatus {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if std::time::Instant::now() >= deadline {
            let _ = child.kill();
            panic!("{what}");
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// The server addresses a cluster file lists (`server ID ADDR` lines, or
/// bare addresses).
fn cluster_addrs(cluster: &Path) -> Vec<String> {
    std::fs::read_to_string(cluster)
        .unwrap()
        .lines()
        .map(|l| l.split('#').next().unwrap().trim())
        .filter(|l| !l.is_empty() && !l.starts_with("cluster ") && !l.starts_with("token "))
        .map(|l| l.split_whitespace().last().unwrap().to_string())
        .collect()
}

/// Waits until every server of `cluster` listens and a query is answered
/// (a query touches only the servers its vertices live on, so it alone
/// cannot tell that a restarted server is back).
fn wait_for(cluster: &Path) {
    let addrs = cluster_addrs(cluster);
    for _ in 0..200 {
        let listening = addrs
            .iter()
            .all(|a| std::net::TcpStream::connect(a.trim()).is_ok());
        if listening {
            let out = quiver(&["meta", "query", "--cluster", path(cluster), r#"v("probe")"#]);
            if out.status.success() {
                return;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    panic!("the meta servers did not come up");
}

/// `quiver meta load --cluster CLUSTER ARGS --json`, its report.
fn meta_load(cluster: &str, args: &[&str]) -> serde_json::Value {
    let mut argv = vec!["meta", "load", "--cluster", cluster];
    argv.extend(args);
    argv.push("--json");
    json(&quiver(&argv))
}

#[test]
fn meta_keeps_every_acknowledged_write_when_a_server_is_killed() {
    let dir = tempfile::tempdir().unwrap();
    let addrs: Vec<String> = (0..2)
        .map(|_| format!("127.0.0.1:{}", free_ports(1)))
        .collect();
    let cluster = dir.path().join("cluster");
    std::fs::write(&cluster, addrs.join("\n")).unwrap();
    let data = |i: usize| dir.path().join(format!("s{i}"));
    let _s0 = MetaServer::start(&addrs[0], &cluster, &data(0));
    let mut s1 = MetaServer::start(&addrs[1], &cluster, &data(1));
    wait_for(&cluster);
    let c = path(&cluster);
    let loaded = meta_load(c, &["--generate", "darshan", "--vertices", "3000"]);
    assert!(loaded["acknowledged"].as_u64().unwrap() > 6000, "{loaded}");
    let as_of = loaded["ts"].as_u64().unwrap().to_string();
    let users: Vec<String> = (1000..1015).map(|u| format!("\"uid:{u}\"")).collect();
    let travel = format!(
        "v({}).e(run).v().e(contains).v().e(read).return_fp()",
        users.join(", ")
    );
    let before = json(&quiver(&[
        "meta",
        "query",
        "--cluster",
        c,
        &travel,
        "--as-of",
        &as_of,
        "--json",
    ]));
    assert!(!before["paths"].as_array().unwrap().is_empty(), "{before}");

    // A second load runs while server 1 is killed: it fails, naming the
    // server and how many of its writes were acknowledged, instead of
    // hanging. One client, so those are exactly its first writes.
    let mut load = Command::new(env!("CARGO_BIN_EXE_quiver"))
        .args([
            "meta",
            "load",
            "--cluster",
            c,
            "--generate",
            "darshan",
            "--vertices",
            "200000",
            "--seed",
            "9",
            "--clients",
            "1",
            "--batch",
            "64",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Killed once the load is under way: its users come first, and only
    // this load has a thousand of them (the first had 15).
    let started = std::time::Instant::now();
    loop {
        let seen = quiver(&[
            "meta",
            "query",
            "--cluster",
            c,
            r#"v("uid:1999")"#,
            "--json",
        ]);
        if seen.status.success() && json(&seen)["marked"].to_string().contains("uid:1999") {
            break;
        }
        assert!(
            started.elapsed().as_secs() < 60,
            "the second load never began"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    std::thread::sleep(std::time::Duration::from_millis(200));
    s1.0.kill().unwrap();
    s1.0.wait().unwrap();
    exit_within_a_minute(&mut load, "the load hung on its killed server");
    let out = load.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains(&addrs[1]), "{}", stderr(&out));
    let acknowledged: usize = stderr(&out)
        .split("the load stopped after ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no count of acknowledged writes: {}", stderr(&out)));
    assert!(acknowledged > 0, "{}", stderr(&out));
    let out = quiver(&["meta", "query", "--cluster", c, &travel]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("Unavailable"), "{}", stderr(&out));

    // Restarted, it has every write it acknowledged before the kill (they
    // were only in its log), and takes new ones.
    // It binds its port only once its store is open (its log replayed),
    // so listening is being back.
    let _s1 = MetaServer::start(&addrs[1], &cluster, &data(1));
    wait_for(&cluster);
    let after = quiver(&[
        "meta",
        "query",
        "--cluster",
        c,
        &travel,
        "--as-of",
        &as_of,
        "--json",
    ]);
    assert!(
        after.status.success(),
        "{}\n{}",
        stderr(&after),
        server_logs(2, data)
    );
    let after = json(&after);
    assert_eq!(before["paths"], after["paths"]);
    assert_eq!(before["marked"], after["marked"]);
    // The interrupted load's acknowledged writes are there too: its
    // vertices (every one, asked for a hundred at a time) and a sample of
    // its edges, each followed from its source.
    let writes = quiver_meta::darshan::generate(200_000, 9);
    let (mut vertices, mut edges) = (Vec::new(), Vec::new());
    for w in &writes[..acknowledged] {
        match w {
            quiver_meta::Write::Vertex { id, .. } => vertices.push(String::from_utf8_lossy(id)),
            quiver_meta::Write::Edge {
                src, etype, dst, ..
            } => edges.push((
                String::from_utf8_lossy(src),
                etype,
                String::from_utf8_lossy(dst),
            )),
            _ => {}
        }
    }
    let found = |text: &str| {
        let out = quiver(&["meta", "query", "--cluster", c, text, "--json"]);
        assert!(out.status.success(), "{text}: {}", stderr(&out));
        json(&out)["marked"]
            .as_array()
            .unwrap()
            .last()
            .map(|step| step[1].clone())
            .unwrap_or_default()
    };
    for chunk in vertices.chunks(100) {
        let ids: Vec<String> = chunk.iter().map(|v| format!("{v:?}")).collect();
        let got = found(&format!("v({})", ids.join(", ")));
        assert_eq!(got.as_array().map(Vec::len), Some(chunk.len()), "{got}");
    }
    let stride = (edges.len() / 20).max(1);
    for (src, etype, dst) in edges.iter().step_by(stride) {
        let got = found(&format!("v({src:?}).e({etype})"));
        assert!(
            got.as_array().unwrap().iter().any(|v| v == dst.as_ref()),
            "{src} -{etype}-> {dst}: {got}"
        );
    }
    let more = meta_load(
        c,
        &["--generate", "darshan", "--vertices", "500", "--seed", "3"],
    );
    assert!(more["acknowledged"].as_u64().unwrap() > 1000, "{more}");
}

/// A server killed with SIGKILL in the middle of a split (after the right
/// child's server adopted the moved edges, and after the home marked the
/// split) and in the middle of a delivery of reverse edges (stored as
/// pending, and sent but not yet cleared) loses nothing it acknowledged:
/// restarted, every acknowledged vertex, edge and reverse edge is there.
#[test]
fn meta_a_server_killed_mid_split_or_mid_delivery_keeps_every_acknowledged_write() {
    for point in [
        "split-adopted",
        "split-marked",
        "delivery-pending",
        "delivery-sent",
    ] {
        killed_at(point);
    }
}

/// Loads Darshan-like metadata, then restarts server 1 to stop at `point`
/// and loads more with one client until it does; kills it there, restarts
/// it, and checks the first load and the second's acknowledged writes
/// (exactly its first ones: one client).
fn killed_at(point: &str) {
    let dir = tempfile::tempdir().unwrap();
    let base = free_ports(2);
    let addrs: Vec<String> = (0..2).map(|i| format!("127.0.0.1:{}", base + i)).collect();
    let cluster = dir.path().join("cluster");
    std::fs::write(&cluster, addrs.join("\n")).unwrap();
    let data = |i: usize| dir.path().join(format!("s{i}"));
    let _s0 = MetaServer::start(&addrs[0], &cluster, &data(0));
    let mut s1 = MetaServer::start(&addrs[1], &cluster, &data(1));
    wait_for(&cluster);
    let c = path(&cluster);
    let first = meta_load(
        c,
        &["--generate", "darshan", "--vertices", "2000", "--seed", "4"],
    );
    let first = usize::try_from(first["acknowledged"].as_u64().unwrap()).unwrap();
    s1.0.kill().unwrap();
    s1.0.wait().unwrap();
    let mut s1 = MetaServer::paused_at(&addrs[1], &cluster, &data(1), Some(point));
    wait_for(&cluster);
    let mut load = Command::new(env!("CARGO_BIN_EXE_quiver"))
        .args(["meta", "load", "--cluster", c, "--generate", "darshan"])
        .args([
            "--vertices",
            "3000",
            "--seed",
            "5",
            "--clients",
            "1",
            "--batch",
            "16",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let said = format!("paused at {point}");
    let started = std::time::Instant::now();
    while !std::fs::read_to_string(data(1).with_extension("log"))
        .unwrap_or_default()
        .contains(&said)
    {
        assert!(
            started.elapsed().as_secs() < 60,
            "server 1 never reached {point}\n{}",
            server_logs(2, data)
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    s1.0.kill().unwrap();
    s1.0.wait().unwrap();
    exit_within_a_minute(&mut load, "the load hung on its killed server");
    let out = load.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{point}: {}", stderr(&out));
    let acknowledged: usize = stderr(&out)
        .split("the load stopped after ")
        .nth(1)
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{point}: no count of acknowledged writes: {}", stderr(&out)));
    assert!(acknowledged > 0, "{point}: {}", stderr(&out));

    let _s1 = MetaServer::start(&addrs[1], &cluster, &data(1));
    wait_for(&cluster);
    let mut writes = quiver_meta::darshan::generate(2000, 4);
    assert_eq!(writes.len(), first);
    writes.extend(
        quiver_meta::darshan::generate(3000, 5)
            .into_iter()
            .take(acknowledged),
    );
    let schema = quiver_meta::schema::Schema::default();
    let mut vertices = Vec::new();
    let mut edges = std::collections::BTreeMap::<String, Vec<(String, String)>>::new();
    for w in &writes {
        match w {
            quiver_meta::Write::Vertex { id, .. } => vertices.push(text(id)),
            quiver_meta::Write::Edge {
                src, etype, dst, ..
            } => {
                let (src, dst) = (text(src), text(dst));
                edges
                    .entry(etype.clone())
                    .or_default()
                    .push((src.clone(), dst.clone()));
                if let Some(Some(reverse)) = schema.relation(etype) {
                    edges
                        .entry(reverse.to_string())
                        .or_default()
                        .push((dst, src));
                }
            }
            _ => {}
        }
    }
    vertices.sort();
    vertices.dedup();
    let ask = |travel: &str| {
        let out = quiver(&["meta", "query", "--cluster", c, travel, "--json"]);
        assert!(out.status.success(), "{point}: {travel}: {}", stderr(&out));
        json(&out)
    };
    for chunk in vertices.chunks(100) {
        let ids: Vec<String> = chunk.iter().map(|v| format!("{v:?}")).collect();
        let got = ask(&format!("v({})", ids.join(", ")));
        let found = got["marked"][0][1].as_array().map_or(0, Vec::len);
        assert_eq!(found, chunk.len(), "{point}: {got}");
    }
    // Reverse edges left pending by the kill are delivered again within
    // about a second of the restart.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    for (etype, pairs) in &edges {
        let mut sources: Vec<&String> = pairs.iter().map(|(s, _)| s).collect();
        sources.sort();
        sources.dedup();
        for chunk in sources.chunks(100) {
            let ids: Vec<String> = chunk.iter().map(|v| format!("{v:?}")).collect();
            let travel = format!("v({}).e({etype}).return_fp()", ids.join(", "));
            loop {
                let got = ask(&travel);
                let paths: std::collections::HashSet<(String, String)> = got["paths"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|p| (p[0].as_str().unwrap().into(), p[1].as_str().unwrap().into()))
                    .collect();
                let missing: Vec<_> = pairs
                    .iter()
                    .filter(|(s, _)| chunk.contains(&s))
                    .filter(|pair| !paths.contains(pair))
                    .collect();
                if missing.is_empty() {
                    break;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "{point}: {} acknowledged {etype} edges missing after the restart, {:?} first\n{}",
                    missing.len(),
                    missing[0],
                    server_logs(2, data)
                );
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
        }
    }
    // The batch in flight at the kill was not acknowledged, but each of
    // its edges that was stored gets its reverse edge too.
    let in_flight = quiver_meta::darshan::generate(3000, 5);
    let has = |src: &str, etype: &str, dst: &str| {
        let got = ask(&format!("v({src:?}).e({etype})"));
        let last = got["marked"]
            .as_array()
            .and_then(|steps| steps.last())
            .cloned();
        last.and_then(|step| step[1].as_array().cloned())
            .is_some_and(|found| found.iter().any(|v| v == dst))
    };
    let mut stored = 0;
    for w in in_flight.iter().skip(acknowledged).take(16) {
        let quiver_meta::Write::Edge {
            src, etype, dst, ..
        } = w
        else {
            continue;
        };
        let (src, dst) = (text(src), text(dst));
        let Some(Some(reverse)) = schema.relation(etype) else {
            continue;
        };
        if has(&src, etype, &dst) {
            stored += 1;
            while !has(&dst, reverse, &src) {
                assert!(
                    std::time::Instant::now() < deadline,
                    "{point}: the stored {src} -{etype}-> {dst} has no reverse edge\n{}",
                    server_logs(2, data)
                );
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
        }
    }
    // Paused in a delivery, the batch was stored: its edges are checked.
    if point.starts_with("delivery") {
        assert!(
            stored > 0,
            "{point}: no edge of the batch in flight was stored"
        );
    }
}

/// An id as the query's JSON prints it.
fn text(id: &[u8]) -> String {
    String::from_utf8_lossy(id).into_owned()
}

/// The per-degree counts (Figs. 12-15) end to end: a scan touches the
/// start vertex's server at least, the sums add the rows up, and a graph
/// with one hub above the threshold splits it.
#[test]
fn meta_bench_counts_by_degree() {
    let out = quiver(&[
        "--json",
        "meta",
        "bench",
        "degrees",
        "--servers",
        "3",
        "--scale",
        "9",
        "--edge-factor",
        "16",
        "--degree-samples",
        "6",
        "--clients",
        "4",
        "--threshold",
        "16",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let r = json(&out);
    let rows = r["degrees"].as_array().unwrap();
    assert!((2..=6).contains(&rows.len()), "{rows:?}");
    let degrees: Vec<u64> = rows.iter().map(|d| d["degree"].as_u64().unwrap()).collect();
    assert!(degrees.windows(2).all(|w| w[0] < w[1]), "{degrees:?}");
    assert!(rows
        .iter()
        .all(|d| d["scan"]["stat_reads"].as_u64().unwrap() >= 1));
    let sums = r["degree_sums"].as_array().unwrap();
    let total = |op: &str| -> u64 {
        rows.iter()
            .map(|d| d[op]["stat_comm"].as_u64().unwrap())
            .sum()
    };
    let summed = |op: &str| -> u64 {
        sums.iter()
            .map(|s| s[op]["stat_comm"].as_u64().unwrap())
            .sum()
    };
    assert_eq!(total("scan"), summed("scan"));
    assert_eq!(total("traversal"), summed("traversal"));
    let counted: u64 = sums.iter().map(|s| s["vertices"].as_u64().unwrap()).sum();
    assert_eq!(counted, rows.len() as u64);
    assert!(sums[1]["vertices"].as_u64().unwrap() >= 1, "{sums:?}");
    assert!(
        r["totals"]["splits"].as_u64().unwrap() >= 1,
        "{}",
        r["totals"]
    );
}

/// Each workload of `quiver meta bench` on a small cluster: its counts
/// add up, and the traversal engines (synchronous with and without
/// prefetching, asynchronous) reach the same vertices.
#[test]
fn meta_bench_insert_mdtest_and_traverse_report_their_counts() {
    let bench = |args: &[&str]| {
        let mut all = vec!["--json", "meta", "bench"];
        all.extend_from_slice(args);
        all.extend_from_slice(&["--servers", "2", "--clients", "4"]);
        json(&quiver(&all))
    };
    let insert = bench(&["insert", "--vertices", "2000"]);
    let load = &insert["load"];
    let count = |field: &str| load[field].as_u64().unwrap();
    // The generator makes about as many vertices as asked.
    assert!((1900..=2100).contains(&count("vertices")), "{load}");
    assert!(count("edges") > 0, "{load}");
    assert_eq!(count("acknowledged"), count("vertices") + count("edges"));
    assert!(load["writes_per_s"].as_f64().unwrap() > 0.0);
    assert_eq!(insert["servers"], 2);

    let mdtest = bench(&["mdtest", "--files-per-client", "50"]);
    assert!(mdtest["creates_per_s"].as_f64().unwrap() > 0.0, "{mdtest}");

    // The ceiling writes the same writes straight into one RocksDB: the
    // same counts, no servers; a workload without an ingest is refused.
    let raw = bench(&["insert", "--vertices", "2000", "--raw-rocksdb"]);
    assert_eq!(raw["servers"], 0, "{raw}");
    for field in ["vertices", "edges", "acknowledged"] {
        assert_eq!(raw["load"][field], load[field], "{field}: {raw}");
    }
    assert!(raw["load"]["writes_per_s"].as_f64().unwrap() > 0.0, "{raw}");
    let out = quiver(&["meta", "bench", "traverse", "--raw-rocksdb"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--raw-rocksdb:"), "{}", stderr(&out));

    let traverse = bench(&[
        "traverse",
        "--scale",
        "8",
        "--edge-factor",
        "8",
        "--steps",
        "1,2",
    ]);
    let rows = traverse["traversals"].as_array().unwrap();
    for steps in [1, 2] {
        let now: Vec<&serde_json::Value> = rows
            .iter()
            .filter(|r| r["steps"] == steps && r["past"] == false)
            .collect();
        assert!(
            now.len() >= 3,
            "sync, sync with prefetching, async: {rows:?}"
        );
        let ends: Vec<u64> = now
            .iter()
            .map(|r| r["end_vertices"].as_u64().unwrap())
            .collect();
        assert!(
            ends.iter().all(|&e| e == ends[0] && e > 0),
            "depth {steps}: {ends:?}"
        );
    }
}

/// `quiver meta cluster up` starts servers and prints its cluster file; a
/// graph loaded with `meta load --graph` answers queries edge for edge;
/// SIGTERM stops every server gracefully (each flushes its store) and
/// keeps the data.
#[test]
fn meta_cluster_up_serves_a_loaded_graph_until_sigterm() {
    cluster_up_serves_a_loaded_graph_until("TERM");
}

/// The same with SIGINT (Ctrl-C), sent to `cluster up` alone (a terminal
/// sends it to the servers too): it stops them itself.
#[test]
fn meta_cluster_up_serves_a_loaded_graph_until_sigint() {
    cluster_up_serves_a_loaded_graph_until("INT");
}

/// `meta cluster up`, loaded and asked as above, then stopped with
/// `signal` (a name `kill -s` takes).
fn cluster_up_serves_a_loaded_graph_until(signal: &str) {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("karate.qcsr");
    let karate = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/karate.txt"
    ));
    let out = quiver(&["convert", path(karate), "-o", path(&g), "--undirected"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let data = dir.path().join("meta");
    let (mut up, cluster) = cluster_up(&data, &[]);
    assert!(cluster.starts_with(&data), "{}", cluster.display());
    let c = path(&cluster);
    let loaded = meta_load(c, &[path(&g)]);
    assert_eq!(loaded["vertices"], 34, "{loaded}");
    assert_eq!(loaded["edges"], 156, "{loaded}");
    // The same servers without the file's token: refused, named.
    let text = std::fs::read_to_string(&cluster).unwrap();
    assert!(text.lines().any(|l| l.starts_with("token ")), "{text}");
    let tokenless = dir.path().join("tokenless");
    let kept: Vec<&str> = text.lines().filter(|l| !l.starts_with("token ")).collect();
    std::fs::write(&tokenless, kept.join("\n")).unwrap();
    let out = quiver(&["meta", "query", "--cluster", path(&tokenless), r#"v("v0")"#]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("cluster token"), "{}", stderr(&out));

    let mut friends: Vec<String> = std::fs::read_to_string(karate)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (u, v) = l.split_once(char::is_whitespace)?;
            match (u.trim(), v.trim()) {
                ("0", other) | (other, "0") => Some(format!("v{other}")),
                _ => None,
            }
        })
        .collect();
    friends.sort();
    let answer = json(&quiver(&[
        "meta",
        "query",
        "--cluster",
        c,
        r#"v("v0").e(has)"#,
        "--json",
    ]));
    let marked = answer["marked"].as_array().unwrap();
    let last: Vec<&str> = marked.last().unwrap()[1]
        .as_array()
        .unwrap()
        .iter()
        .map(|id| id.as_str().unwrap())
        .collect();
    assert_eq!(last, friends, "{answer}");

    let pid = up.0.id().to_string();
    assert!(Command::new("kill")
        .args(["-s", signal, &pid])
        .status()
        .unwrap()
        .success());
    let status = exit_within_a_minute(&mut up.0, &format!("cluster up outlived SIG{signal}"));
    // The servers' own messages come through `cluster up`'s stderr.
    let mut err = String::new();
    std::io::Read::read_to_string(&mut up.0.stderr.take().unwrap(), &mut err).unwrap();
    assert!(status.success(), "SIG{signal}: {status}\n{err}");
    assert!(err.contains("cluster stopped"), "{err}");
    for i in 0..2 {
        let stopped = format!("server {i} stopped; its store is flushed");
        assert!(
            err.contains(&stopped),
            "SIG{signal}: no {stopped:?} in\n{err}"
        );
    }
    let addrs = cluster_addrs(&cluster);
    assert_eq!(addrs.len(), 2);
    for addr in addrs {
        assert!(
            std::net::TcpStream::connect(&addr).is_err(),
            "{addr} still listens"
        );
    }
}

/// `quiver meta cluster up --servers 2 --data DATA ARGS`, running, with
/// its stdout's first line (the cluster file) read and its servers
/// answering; killed if the test fails (its servers die with it).
fn cluster_up(data: &Path, args: &[&str]) -> (MetaServer, PathBuf) {
    let mut up = MetaServer(
        Command::new(env!("CARGO_BIN_EXE_quiver"))
            .args([
                "meta",
                "cluster",
                "up",
                "--servers",
                "2",
                "--data",
                path(data),
            ])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(up.0.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let cluster = PathBuf::from(line.trim());
    wait_for(&cluster);
    (up, cluster)
}

/// A query's answer without its timings.
fn meta_answer(cluster: &Path, travel: &str, as_of: Option<&str>) -> serde_json::Value {
    let mut args = vec![
        "meta",
        "query",
        "--cluster",
        path(cluster),
        travel,
        "--json",
    ];
    if let Some(t) = as_of {
        args.extend(["--as-of", t]);
    }
    let answer = json(&quiver(&args));
    serde_json::json!([answer["marked"], answer["paths"]])
}

/// Stops `cluster up` with SIGTERM and waits for it.
fn stop_cluster(up: &mut MetaServer) {
    let pid = up.0.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let status = exit_within_a_minute(&mut up.0, "cluster up outlived SIGTERM");
    assert!(status.success(), "{status}");
}

/// A cluster keeps its data where it was across restarts on new ports,
/// and a user cannot break it by mistake: a second `cluster up` on its
/// data fails before writing anything and leaves it usable, and a
/// `--base-port` in use leaves no cluster file and says nothing about
/// servers being up.
#[test]
fn meta_cluster_up_restarts_on_new_ports_and_a_second_up_breaks_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("meta");
    let (mut up, cluster) = cluster_up(&data, &[]);
    let loaded = meta_load(
        path(&cluster),
        &["--generate", "darshan", "--vertices", "3000"],
    );
    let middle = (loaded["ts"].as_u64().unwrap() / 2 + 1).to_string();
    let travels = [
        r#"v("uid:1003").e(run).v()"#,
        r#"v("uid:1000").e(run).v().e(contains).v().e(write).rtm().v().e(wasReadBy)"#,
        r#"v("/proj/d0").e(has).v()"#,
    ];
    let answers = |cluster: &Path| -> Vec<serde_json::Value> {
        travels
            .iter()
            .flat_map(|t| {
                [
                    meta_answer(cluster, t, None),
                    meta_answer(cluster, t, Some(&middle)),
                ]
            })
            .collect()
    };
    let before = answers(&cluster);
    assert!(before[0].to_string().contains("job:"), "{}", before[0]);
    assert!(
        before.chunks(2).any(|now_then| now_then[0] != now_then[1]),
        "the second load changed no answer"
    );
    let file = std::fs::read(&cluster).unwrap();
    let ports = cluster_addrs(&cluster);

    let second = quiver(&[
        "meta",
        "cluster",
        "up",
        "--servers",
        "2",
        "--data",
        path(&data),
    ]);
    assert_eq!(second.status.code(), Some(1), "{}", stderr(&second));
    assert!(
        stderr(&second).contains("already up"),
        "{}",
        stderr(&second)
    );
    assert!(
        !stderr(&second).contains("servers up"),
        "{}",
        stderr(&second)
    );
    assert!(second.stdout.is_empty());
    assert_eq!(
        std::fs::read(&cluster).unwrap(),
        file,
        "the cluster file changed"
    );
    assert_eq!(answers(&cluster), before);

    stop_cluster(&mut up);
    let (mut up, again) = cluster_up(&data, &[]);
    assert_eq!(again, cluster);
    assert_ne!(cluster_addrs(&cluster), ports, "the same ports again");
    assert_eq!(answers(&cluster), before);
    stop_cluster(&mut up);

    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port().to_string();
    let other = dir.path().join("other");
    let out = quiver(&[
        "meta",
        "cluster",
        "up",
        "--servers",
        "2",
        "--data",
        path(&other),
        "--base-port",
        &port,
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!("port {port}")) && err.contains("in use"),
        "{err}"
    );
    assert!(
        !err.contains("servers up") && !err.contains("kill"),
        "{err}"
    );
    assert!(!other.join("cluster").exists());
}

#[test]
fn meta_mistakes_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let cluster = dir.path().join("cluster");
    std::fs::write(&cluster, "# nothing here\n").unwrap();
    let c = path(&cluster);
    for (args, named) in [
        (
            vec!["meta", "query", "--cluster", c, r#"v("a")"#],
            "names no server",
        ),
        (
            vec!["meta", "query", "--cluster", c, "e(read)"],
            "starts with v(",
        ),
        (
            vec![
                "meta",
                "query",
                "--cluster",
                c,
                r#"v("a")"#,
                "--as-of",
                "yesterday",
            ],
            "--as-of",
        ),
        (
            vec!["meta", "bench", "insert", "--servers", "0"],
            "--servers",
        ),
        (
            vec!["meta", "bench", "insert", "--partitioner", "metis"],
            "unknown partitioner",
        ),
        (vec!["meta", "bench", "traverse", "--steps", "0"], "steps"),
        (
            vec!["meta", "bench", "degrees", "--degree-samples", "1"],
            "degree-samples",
        ),
        (
            vec!["meta", "serve", "--data", path(dir.path()), "--cluster", c],
            "names no server",
        ),
        (vec!["meta", "load", "--cluster", c], "--generate"),
    ] {
        let out = quiver(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(named), "{args:?}: {}", stderr(&out));
    }
    std::fs::write(&cluster, "127.0.0.1:1\n").unwrap();
    let out = quiver(&[
        "meta",
        "serve",
        "--listen",
        "127.0.0.1:2",
        "--data",
        path(dir.path()),
        "--cluster",
        c,
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("is not an address the cluster file lists"),
        "{}",
        stderr(&out)
    );
    // Nothing listens on port 1: a clear error, not a hang.
    let out = quiver(&["meta", "query", "--cluster", c, r#"v("a")"#]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("127.0.0.1:1"), "{}", stderr(&out));
}

/// `-o` never damages what it names: a device or a FIFO is written in
/// place (and a full device is an error), a symlink's file is replaced
/// while the link stays, a graph (written with seeks) refuses a FIFO,
/// every output file gets the umask's mode, and `export -o - | head`
/// ends quietly.
#[test]
fn outputs_never_damage_what_they_name() {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("g.qcsr");
    undirected_rmat(&g, 8, 4);
    let is_char = |p: &str| std::fs::metadata(p).unwrap().file_type().is_char_device();

    let out = quiver(&["export", path(&g), "-o", "/dev/null"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(is_char("/dev/null"));
    let out = quiver(&["export", path(&g), "-o", "/dev/full"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("No space left"), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).is_empty());
    assert!(is_char("/dev/full"));

    let real = dir.path().join("real.txt");
    let link = dir.path().join("link.txt");
    std::fs::write(&real, "old\n").unwrap();
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let out = quiver(&["export", path(&g), "-o", path(&link)]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert!(std::fs::read_to_string(&real).unwrap().lines().count() > 100);

    let fifo = dir.path().join("fifo");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let reader = Command::new("cat")
        .arg(&fifo)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let out = quiver(&["export", path(&g), "-o", path(&fifo)]);
    assert!(out.status.success(), "{}", stderr(&out));
    let read = reader.wait_with_output().unwrap();
    assert!(read.stdout.len() > 1000);
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    let out = quiver(&["generate", "path", "--vertices", "5", "-o", path(&fifo)]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("written with seeks"),
        "{}",
        stderr(&out)
    );
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    let out = quiver(&["export", path(&g), "-o", path(dir.path())]);
    assert!(stderr(&out).contains("is a directory"), "{}", stderr(&out));

    let ranks = dir.path().join("ranks.txt");
    let corpus = dir.path().join("walks.txt");
    for args in [
        vec!["bsp", "pagerank", path(&g), "-o", path(&ranks)],
        vec![
            "walk",
            "corpus",
            path(&g),
            "-o",
            path(&corpus),
            "--walks-per-vertex",
            "1",
        ],
    ] {
        let out = quiver(&args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    }
    for file in [&g, &ranks, &corpus, &real] {
        let mode = std::fs::metadata(file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode & 0o644, 0o644, "{}: {mode:o}", file.display());
    }
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");

    // Megabytes of edges, far past what a pipe buffers.
    let big = dir.path().join("big.qcsr");
    undirected_rmat(&big, 13, 16);
    let piped = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "{} export {} -o - | head -1",
            env!("CARGO_BIN_EXE_quiver"),
            path(&big)
        ))
        .output()
        .unwrap();
    assert!(piped.status.success());
    assert!(stderr(&piped).is_empty(), "{}", stderr(&piped));
    assert_eq!(String::from_utf8_lossy(&piped.stdout).lines().count(), 1);
}

/// Ctrl-C or SIGTERM in the middle of a long command stops it with 130 or
/// 143 and one line, and leaves nothing behind: no sort runs, no walk
/// spills, no half-written output; a kv benchmark stops within a tick.
#[test]
fn an_interrupted_command_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("g.qcsr");
    undirected_rmat(&g, 14, 16);
    let before: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    let out = |name: &str| path(&dir.path().join(name)).to_string();
    let commands: [(Vec<String>, &str, i32); 6] = [
        (
            [
                "generate",
                "rmat",
                "--scale",
                "21",
                // Runs of 8 times the budget: spilled, and within the
                // 10 times generate allows.
                "--mem",
                "32MiB",
                "-o",
                &out("big.qcsr"),
            ]
            .map(String::from)
            .to_vec(),
            "INT",
            130,
        ),
        (
            [
                "walk",
                "corpus",
                path(&g),
                "-o",
                &out("walks.txt"),
                "--walks-per-vertex",
                "200",
                "--mem",
                "1MiB",
            ]
            .map(String::from)
            .to_vec(),
            "TERM",
            143,
        ),
        (
            [
                "walk",
                "ppr",
                path(&g),
                "--source",
                "0",
                "--walks",
                "50000000",
                "--mem",
                "1MiB",
            ]
            .map(String::from)
            .to_vec(),
            "INT",
            130,
        ),
        // The simulated NAND in a sparse file, removed with the device.
        (
            [
                "gtl",
                "run",
                "random-reads",
                path(&g),
                "--requests",
                "1000000000",
                "--flash-file",
                &out("flash"),
            ]
            .map(String::from)
            .to_vec(),
            "INT",
            130,
        ),
        // The GTL file, written for the reads.
        (
            [
                "gtl",
                "file",
                path(&g),
                "--gtl",
                &out("g.gtl"),
                "--requests",
                "1000000000",
            ]
            .map(String::from)
            .to_vec(),
            "TERM",
            143,
        ),
        // Loopback nodes, which stop together at their next tick.
        (
            ["kv", "bench", path(&g), "--duration", "10m"]
                .map(String::from)
                .to_vec(),
            "INT",
            130,
        ),
    ];
    for (args, signal, code) in commands {
        let mut child = spawn_with_tmpdir(&args, dir.path());
        std::thread::sleep(std::time::Duration::from_millis(700));
        let pid = child.id().to_string();
        assert!(Command::new("kill")
            .args(["-s", signal, &pid])
            .status()
            .unwrap()
            .success());
        let status = exit_within_a_minute(&mut child, &format!("{args:?} outlived SIG{signal}"));
        let mut err = String::new();
        std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
        assert_eq!(status.code(), Some(code), "{args:?}: {err}");
        assert_eq!(
            err.matches("interrupted").count(),
            1,
            "{args:?}: one line says what the interrupt does: {err}"
        );
        let now: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(now, before, "{args:?} left files behind");
    }
}

/// Ctrl-C while `gtl init` lays a graph out stops it within a moment
/// (the device's writes and the image's ask between pages whether to go
/// on), with exit 130 and the interrupted line, and leaves neither the
/// image nor a temporary file beside it.
#[test]
fn an_interrupted_gtl_init_stops_promptly_and_leaves_no_image() {
    use std::time::{Duration, Instant};
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("g.qcsr");
    // Weighted and directed: neighbour and weight pages of both
    // directions and the CSR file, seconds of writing.
    let out = quiver(&[
        "generate",
        "rmat",
        "--scale",
        "21",
        "--weights",
        "1..100",
        "-o",
        path(&g),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let image = dir.path().join("g.img");
    let args = ["gtl", "init", path(&g), "--device", path(&image)];
    let mut child = spawn_with_tmpdir(&args, dir.path());
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        child.try_wait().unwrap().is_none(),
        "gtl init ended within a second: too small a graph to interrupt"
    );
    assert!(Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap()
        .success());
    let signalled = Instant::now();
    let status = exit_within_a_minute(&mut child, "gtl init outlived SIGINT");
    let waited = signalled.elapsed();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(130), "{err}");
    assert!(err.contains("interrupted"), "{err}");
    assert!(
        waited < Duration::from_secs(2),
        "gtl init took {waited:?} to stop"
    );
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|name| name != "g.qcsr")
        .collect();
    assert!(left.is_empty(), "gtl init left {left:?}");
}

/// `generate complete --vertices 100000` (10^10 edges) is refused before
/// an edge is drawn, with its sizes, and leaves nothing behind.
#[test]
fn generate_refuses_up_front_what_its_budget_cannot_sort() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("g.qcsr");
    let mut child = spawn_with_tmpdir(
        &[
            "generate",
            "complete",
            "--vertices",
            "100000",
            "-o",
            path(&out),
        ],
        dir.path(),
    );
    let status = exit_within_a_minute(&mut child, "generate complete");
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(
        err.contains("9999900000 edges, a 37.3 GiB graph, sorted through 74.5 GiB of runs"),
        "{err}"
    );
    assert!(err.contains("give --mem 7630MiB or more"), "{err}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

/// The README's transcripts that do not depend on time or machine are
/// what the program prints: `quiver info` of the karate club.
#[test]
fn the_readmes_info_transcript_is_what_info_prints() {
    let readme = include_str!("../../../../README.md");
    let command = "$ quiver info karate.qcsr --block-size 4KiB --verify\n";
    let start = readme.find(command).expect("the README shows info") + command.len();
    let shown = &readme[start..start + readme[start..].find("```").unwrap()];
    let dir = tempfile::tempdir().unwrap();
    let karate = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/karate.txt"
    ));
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_quiver"))
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    let out = run(&["convert", path(karate), "-o", "karate.qcsr", "--undirected"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = run(&["info", "karate.qcsr", "--block-size", "4KiB", "--verify"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), shown);
}

/// A count of zero would do nothing, or something else than asked: it is
/// a usage error (exit 2) naming the flag, refused before any work.
#[test]
fn zero_counts_are_usage_errors_naming_the_flag() {
    for (args, flag) in [
        (
            vec!["walk", "ppr", "g.qcsr", "--source", "0", "--walks", "0"],
            "--walks",
        ),
        (vec!["walk", "rwd", "g.qcsr", "--top-k", "0"], "--top-k"),
        (
            vec!["gtl", "bench", "random-reads", "g.qcsr", "--requests", "0"],
            "--requests",
        ),
        (
            vec!["gtl", "run", "rw", "g.qcsr", "--walks", "0"],
            "--walks",
        ),
        (
            vec![
                "generate",
                "rmat",
                "--scale",
                "4",
                "--edge-factor",
                "0",
                "-o",
                "x.qcsr",
            ],
            "--edge-factor",
        ),
        (
            vec![
                "meta",
                "load",
                "--cluster",
                "c",
                "--generate",
                "darshan",
                "--vertices",
                "0",
            ],
            "--vertices",
        ),
    ] {
        let out = quiver(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(flag), "{args:?}: {}", stderr(&out));
    }
}

/// A setting out of its range and a vertex the graph does not hold are
/// usage errors (exit 2) named as the user wrote them: by the flag (not
/// the library's field), or by the vertex.
#[test]
fn bad_settings_and_absent_vertices_are_usage_errors_named_by_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let g = dir.path().join("g.qcsr");
    undirected_rmat(&g, 8, 4);
    let image = dir.path().join("d.img");
    let out = quiver(&["gtl", "init", path(&g), "--device", path(&image)]);
    assert!(out.status.success(), "{}", stderr(&out));
    for (args, named) in [
        (
            vec!["walk", "ppr", path(&g), "--source", "1", "--p", "2"],
            "--p-slowest",
        ),
        (
            vec!["gtl", "run", "bfs", path(&g), "--cache", "100"],
            "--cache",
        ),
        (
            vec!["kv", "migrate", path(&g), "--max-bytes", "1"],
            "--max-bytes",
        ),
        (vec!["kv", "bench", path(&g), "--margin", "0.5"], "--margin"),
        (
            vec!["gtl", "add-edge", "--device", path(&image), "1", "99999"],
            "vertex 99999",
        ),
        (
            vec!["gtl", "get", "--device", path(&image), "99999"],
            "vertex 99999",
        ),
    ] {
        let out = quiver(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(named), "{args:?}: {}", stderr(&out));
        assert!(!stderr(&out).contains('_'), "{args:?}: {}", stderr(&out));
    }
}

/// A memory budget above the machine's memory bounds nothing: refused
/// (exit 2), naming the flag and the machine's memory.
#[test]
fn a_budget_beyond_physical_memory_is_refused() {
    for args in [
        vec!["walk", "ppr", "g.qcsr", "--source", "0", "--mem", "1000TiB"],
        vec![
            "generate", "rmat", "--scale", "4", "-o", "x.qcsr", "--mem", "1000TiB",
        ],
    ] {
        let out = quiver(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("--mem") && err.contains("this machine's memory"),
            "{err}"
        );
    }
}

/// The Graphalytics example `example-directed` converted into `dir` (its
/// ids are 1..=10, dense 0..=9).
fn directed_example(dir: &Path) -> PathBuf {
    let g = dir.join("directed.qcsr");
    let example = graphalytics("example-directed.e");
    let out = quiver(&["convert", path(&example), "-o", path(&g)]);
    assert!(out.status.success(), "{}", stderr(&out));
    g
}

/// On a graph with an id map (a Graphalytics dataset, ids 1..=10), walks
/// take and print the dataset's ids, as bsp does: vertex 10 is a source,
/// 0 is not a vertex, and the top of a PPR is its source by name.
#[test]
fn walks_take_and_print_a_datasets_own_ids() {
    let dir = tempfile::tempdir().unwrap();
    let g = directed_example(dir.path());
    let g = path(&g);
    let report = json(&quiver(&["walk", "ppr", g, "--source", "10", "--json"]));
    assert_eq!(report["result"]["top"][0]["vertex"], 10, "{report}");
    let max = report["result"]["top"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["vertex"].as_u64().unwrap())
        .max()
        .unwrap();
    assert!((1..=10).contains(&max), "{report}");
    let text = quiver(&["walk", "rwr", g, "--source", "1", "--top-k", "1"]);
    assert!(text.status.success(), "{}", stderr(&text));
    assert!(
        String::from_utf8_lossy(&text.stdout).contains("vertex          1  visits"),
        "{}",
        String::from_utf8_lossy(&text.stdout)
    );
    for args in [
        vec!["walk", "ppr", g, "--source", "0"],
        vec!["walk", "simrank", g, "--a", "1", "--b", "11"],
    ] {
        let out = quiver(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("is not a vertex"), "{}", stderr(&out));
    }
    let out = quiver(&["walk", "simrank", g, "--a", "1", "--b", "10"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // A corpus names vertices the same way: 1..=10, 10 included.
    let corpus = dir.path().join("walks.txt");
    let out = quiver(&[
        "walk",
        "corpus",
        g,
        "-o",
        path(&corpus),
        "--walks-per-vertex",
        "5",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let ids: Vec<u64> = std::fs::read_to_string(&corpus)
        .unwrap()
        .split_whitespace()
        .map(|id| id.parse().unwrap())
        .collect();
    assert!(ids.iter().all(|id| (1..=10).contains(id)), "{ids:?}");
    assert!(ids.contains(&10), "{ids:?}");
}

/// The out-neighbours of `vertex` in the Graphalytics edge file `file`,
/// sorted: the dataset's own words, to check the engines against.
fn dataset_neighbours(file: &str, vertex: u64) -> Vec<u64> {
    let mut out: Vec<u64> = std::fs::read_to_string(graphalytics(file))
        .unwrap()
        .lines()
        .filter_map(|line| {
            let mut ids = line.split_whitespace().map(|id| id.parse::<u64>().unwrap());
            (ids.next() == Some(vertex)).then(|| ids.next().unwrap())
        })
        .collect();
    out.sort_unstable();
    out
}

/// Every engine's command that takes a vertex, on a graph with an id map
/// (the Graphalytics example, ids 1..=10 at dense 0..=9), answers about the
/// vertex the dataset names: vertex 3's out-neighbours are 1, 5, 8 and 10
/// (`example-directed.e`), where dense 3 (the dataset's vertex 4) has none.
#[test]
fn every_engine_answers_about_the_vertex_the_dataset_names() {
    let dir = tempfile::tempdir().unwrap();
    let g = directed_example(dir.path());
    let g = path(&g);
    let want = dataset_neighbours("example-directed.e", 3);
    assert_eq!(want, [1, 5, 8, 10]);
    let numbers = |value: &serde_json::Value| -> Vec<u64> {
        let mut ids: Vec<u64> = value
            .as_array()
            .unwrap()
            .iter()
            .map(|id| id.as_u64().unwrap())
            .collect();
        ids.sort_unstable();
        ids
    };

    // bsp: BFS from 3 puts exactly its out-neighbours at depth 1.
    let depths = dir.path().join("bfs.txt");
    let out = quiver(&["bsp", "bfs", g, "--source", "3", "-o", path(&depths)]);
    assert!(out.status.success(), "{}", stderr(&out));
    let mut first: Vec<u64> = std::fs::read_to_string(&depths)
        .unwrap()
        .lines()
        .filter_map(|line| line.strip_suffix(" 1")?.parse().ok())
        .collect();
    first.sort_unstable();
    assert_eq!(first, want, "bsp bfs --source 3");

    // walk: one-step walks from 3 visit 3 and its out-neighbours only.
    let report = json(&quiver(&[
        "walk", "ppr", g, "--source", "3", "--length", "1", "--stop", "0", "--json",
    ]));
    let top = &report["result"]["top"];
    assert_eq!(top[0]["vertex"], 3, "{report}");
    let visited: Vec<serde_json::Value> = top.as_array().unwrap()[1..]
        .iter()
        .map(|entry| entry["vertex"].clone())
        .collect();
    assert_eq!(numbers(&visited.into()), want, "walk ppr --source 3");

    // gtl: the list, as printed.
    let out = quiver(&["gtl", "get", g, "3"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("3: [1, 5, 8, 10]\n"), "gtl get 3: {text}");

    // kv: a served store's Get, and a Put naming the dataset's ids.
    let port = free_ports(1).to_string();
    let at = format!("127.0.0.1:{port}");
    let mut serve = Command::new(env!("CARGO_BIN_EXE_quiver"))
        .args(["kv", "serve", g, "--fabric", "loopback", "--nodes", "1"])
        .args(["--port", &port])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let checked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        wait_for_kv(&at, "3");
        let get = |vertex: &str| json(&ask_kv(&at, &["get", vertex]))["get"].clone();
        let read = get("3");
        assert_eq!(numbers(&read["neighbours"]), want, "kv get 3: {read}");
        assert_eq!(read["placed"]["key"], 3, "{read}");
        let out = ask_kv(&at, &["put", "4", "10"]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(numbers(&get("4")["neighbours"]), [10], "kv put 4 10");
        for (request, named) in [
            (&["get", "0"][..], "vertex: 0"),
            (&["put", "3", "11"], "target: 11"),
        ] {
            let out = ask_kv(&at, request);
            assert_eq!(out.status.code(), Some(2), "{request:?}: {}", stderr(&out));
            assert!(
                stderr(&out).contains(&format!("{named} is not in the graph")),
                "{}",
                stderr(&out)
            );
        }
        assert!(ask_kv(&at, &["stop"]).status.success());
    }));
    if let Err(panic) = checked {
        let _ = serve.kill();
        if let Ok(out) = serve.wait_with_output() {
            eprintln!("kv serve said:\n{}", stderr(&out));
        }
        std::panic::resume_unwind(panic);
    }
    let out = serve.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("try `quiver kv get 1 "),
        "{}",
        stderr(&out)
    );
}

/// `gtl get` on a graph with an id map takes and prints the dataset's ids:
/// vertex 1's list is [3, 5], as `example-directed.e` says, and 0 is not a
/// vertex.
#[test]
fn gtl_get_names_vertices_by_the_datasets_ids() {
    let dir = tempfile::tempdir().unwrap();
    let g = directed_example(dir.path());
    for backend in ["gtl", "csr"] {
        let out = quiver(&["gtl", "get", path(&g), "1", "--backend", backend]);
        assert!(out.status.success(), "{}", stderr(&out));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.starts_with("1: [3, 5]\n"), "{backend}: {text}");
    }
    let out = quiver(&["gtl", "get", path(&g), "0"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("is not a vertex"), "{}", stderr(&out));
}

/// Data written before servers had ids (a cluster file of bare addresses,
/// no identity in the data directories) comes back whole under `cluster
/// up` on other ports: its servers keep the addresses it was written
/// under as their ids, and so the ring it was placed by.
#[test]
fn meta_data_from_before_ids_moves_to_new_ports_whole() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("meta");
    std::fs::create_dir_all(&data).unwrap();
    let cluster = data.join("cluster");
    let base = free_ports(2);
    let addrs: Vec<String> = (base..base + 2).map(|p| format!("127.0.0.1:{p}")).collect();
    std::fs::write(&cluster, addrs.join("\n") + "\n").unwrap();
    let server = |i: usize| data.join(format!("server{i}"));
    let mut servers: Vec<MetaServer> = (0..2)
        .map(|i| MetaServer::start(&addrs[i], &cluster, &server(i)))
        .collect();
    wait_for(&cluster);
    meta_load(
        path(&cluster),
        &["--generate", "darshan", "--vertices", "2000"],
    );
    let travel = r#"v("uid:1000").e(run).v().e(contains).v().e(write).v()"#;
    let before = meta_answer(&cluster, travel, None);
    assert!(before.to_string().contains("/proj/"), "{before}");
    for s in &mut servers {
        let pid = s.0.id().to_string();
        assert!(Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success());
        exit_within_a_minute(&mut s.0, "a meta server outlived SIGTERM");
    }
    // As the code before ids left them: data, no identity.
    for i in 0..2 {
        std::fs::remove_file(server(i).join("quiver-meta-identity")).unwrap();
    }
    let (mut up, again) = cluster_up(&data, &["--threshold", "8", "--vnodes", "16"]);
    assert_eq!(again, cluster);
    let moved = cluster_addrs(&cluster);
    assert!(moved.iter().all(|a| !addrs.contains(a)), "{moved:?}");
    assert_eq!(meta_answer(&cluster, travel, None), before);
    stop_cluster(&mut up);
}

/// `generate --undirected` says when its output holds parallel edges, and
/// its JSON says whether the lists are distinct; `--dedupe` removes them.
#[test]
fn generate_says_whether_its_graph_has_parallel_edges() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("g.qcsr");
    for (dedupe, distinct) in [(false, false), (true, true)] {
        let mut args = vec![
            "generate",
            "rmat",
            "--scale",
            "8",
            "--undirected",
            "-o",
            path(&out),
        ];
        if dedupe {
            args.push("--dedupe");
        }
        let human = quiver(&args);
        assert!(human.status.success(), "{}", stderr(&human));
        let said = String::from_utf8_lossy(&human.stdout).contains("it holds parallel edges");
        assert_eq!(said, !distinct, "--dedupe {dedupe}");
        let mut json = vec!["--json"];
        json.extend(&args);
        let report: serde_json::Value = serde_json::from_slice(&quiver(&json).stdout).unwrap();
        assert_eq!(report["distinct_targets"], distinct, "--dedupe {dedupe}");
    }
}
