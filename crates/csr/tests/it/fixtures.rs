//! The fixtures in `fixtures/` convert to the graphs their `<name>.expected`
//! files describe (vertices, edges, out-degrees), and the fixture files still
//! hold what they are there to exercise.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use quiver_csr::{convert, testing, ConvertOptions, Graph, NoProgress, SortOptions};

use crate::assert_same_graph;

/// One `<name>.expected` file.
#[derive(Debug)]
struct Expected {
    name: String,
    input: PathBuf,
    undirected: bool,
    dedupe: bool,
    drop_self_loops: bool,
    vertices: u64,
    edges: u64,
    out_degrees: Vec<u64>,
    weighted: Option<bool>,
    /// Whether every converted edge has its reverse, so that the graph is
    /// stored undirected without the `undirected` option.
    symmetric: bool,
    self_loops_dropped: Option<u64>,
    duplicates_dropped: Option<u64>,
}

/// Every `*.expected` file in `fixtures/`, sorted by name.
fn expected_files() -> Vec<PathBuf> {
    let dir = testing::fixture("");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot read the fixtures folder {}: {e}", dir.display()))
        .map(|entry| entry.expect("fixtures dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "expected"))
        .collect();
    files.sort();
    files
}

/// The fixture an `.expected` file without an `input` key describes: the one
/// other file in the folder with the same stem.
fn input_by_stem(expected: &Path, name: &str) -> PathBuf {
    let dir = expected.parent().expect("fixture has a folder");
    let candidates: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("fixtures folder is readable")
        .map(|entry| entry.expect("fixtures dir entry").path())
        .filter(|p| p.file_stem().is_some_and(|s| s == name) && p.as_path() != expected)
        .collect();
    match candidates.as_slice() {
        [one] => one.clone(),
        _ => panic!(
            "{name}: no `input` key and not exactly one fixture named {name}.*: {candidates:?}"
        ),
    }
}

fn parse_expected(path: &Path) -> Expected {
    let name = path
        .file_stem()
        .expect("an .expected file has a stem")
        .to_string_lossy()
        .into_owned();
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{name}: cannot read {}: {e}", path.display()));
    let mut keys = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (key, value) = line.split_once('=').unwrap_or_else(|| {
            panic!(
                "{name}.expected line {}: expected `key = value`, found {line:?}",
                i + 1
            )
        });
        let key = key.trim().to_string();
        let previous = keys.insert(key.clone(), value.trim().to_string());
        assert!(
            previous.is_none(),
            "{name}.expected: key {key:?} given twice"
        );
    }
    let mut take = |key: &str| keys.remove(key);
    let number = |key: &str, value: String| -> u64 {
        value
            .parse()
            .unwrap_or_else(|_| panic!("{name}.expected: {key} = {value:?} is not a count"))
    };
    let required = |key: &str, value: Option<String>| -> String {
        value.unwrap_or_else(|| panic!("{name}.expected: missing required key {key:?}"))
    };

    let input = match take("input") {
        Some(file) => testing::fixture(&file),
        None => input_by_stem(path, &name),
    };
    let (mut undirected, mut dedupe, mut drop_self_loops) = (false, false, false);
    let options = required("options", take("options"));
    if options != "none" {
        for option in options.split(',').map(str::trim) {
            match option {
                "undirected" => undirected = true,
                "dedupe" => dedupe = true,
                "drop-self-loops" => drop_self_loops = true,
                other => panic!("{name}.expected: unknown option {other:?} (expected none, undirected, dedupe, drop-self-loops)"),
            }
        }
    }
    let vertices = number("vertices", required("vertices", take("vertices")));
    let edges = number("edges", required("edges", take("edges")));
    let out_degrees = required("out_degrees", take("out_degrees"))
        .split_whitespace()
        .map(|d| number("out_degrees", d.to_string()))
        .collect();
    let weighted = take("weighted").map(|w| match w.as_str() {
        "true" => true,
        "false" => false,
        other => panic!("{name}.expected: weighted = {other:?} is not true or false"),
    });
    let symmetric = take("symmetric").is_some_and(|w| match w.as_str() {
        "true" => true,
        "false" => false,
        other => panic!("{name}.expected: symmetric = {other:?} is not true or false"),
    });
    let self_loops_dropped = take("self_loops_dropped").map(|v| number("self_loops_dropped", v));
    let duplicates_dropped = take("duplicates_dropped").map(|v| number("duplicates_dropped", v));
    assert!(
        keys.is_empty(),
        "{name}.expected: unknown keys {:?}",
        keys.keys().collect::<Vec<_>>()
    );
    Expected {
        name,
        input,
        undirected,
        dedupe,
        drop_self_loops,
        vertices,
        edges,
        out_degrees,
        weighted,
        symmetric,
        self_loops_dropped,
        duplicates_dropped,
    }
}

fn check_fixture(expected: &Expected, dir: &Path) {
    let name = &expected.name;
    let output = dir.join(format!("{name}.qcsr"));
    let options = ConvertOptions {
        sort: SortOptions {
            undirected: expected.undirected,
            dedupe: expected.dedupe,
            drop_self_loops: expected.drop_self_loops,
            ..Default::default()
        },
        ..Default::default()
    };
    let report = convert(&expected.input, &output, &options, &NoProgress).unwrap_or_else(|e| {
        panic!(
            "{name}: converting {} failed: {e}",
            expected.input.display()
        )
    });
    let graph = Graph::open(&output)
        .unwrap_or_else(|e| panic!("{name}: opening the converted graph failed: {e}"));
    graph
        .verify()
        .unwrap_or_else(|e| panic!("{name}: the converted graph does not verify: {e}"));

    assert_eq!(
        u64::from(graph.num_vertices()),
        expected.vertices,
        "{name}: vertex count"
    );
    assert_eq!(graph.num_edges(), expected.edges, "{name}: edge count");
    let degrees: Vec<u64> = graph.degrees().collect();
    assert_eq!(
        degrees, expected.out_degrees,
        "{name}: out-degree sequence (vertex 0 first)"
    );
    assert_eq!(
        graph.is_undirected(),
        expected.undirected || expected.symmetric,
        "{name}: undirected flag"
    );
    assert_eq!(
        report.sort.symmetric, expected.symmetric,
        "{name}: stored undirected because symmetric"
    );
    if let Some(weighted) = expected.weighted {
        assert_eq!(graph.is_weighted(), weighted, "{name}: weighted flag");
    }
    assert_eq!(
        u64::from(report.sort.vertices),
        expected.vertices,
        "{name}: report's vertex count"
    );
    assert_eq!(
        report.sort.edges_out, expected.edges,
        "{name}: report's edge count"
    );
    if let Some(dropped) = expected.self_loops_dropped {
        assert_eq!(
            report.sort.self_loops_dropped, dropped,
            "{name}: self-loops dropped"
        );
    }
    if let Some(dropped) = expected.duplicates_dropped {
        assert_eq!(
            report.sort.duplicates_dropped, dropped,
            "{name}: duplicates dropped"
        );
    }
}

#[test]
fn every_fixture_converts_to_its_expected_graph() {
    let files = expected_files();
    let names: Vec<String> = files
        .iter()
        .map(|p| p.file_stem().expect("stem").to_string_lossy().into_owned())
        .collect();
    for required in ["grid-3x4", "karate", "petersen", "tiny-weighted"] {
        assert!(
            names.iter().any(|n| n == required),
            "fixture {required}.expected is missing (found {names:?})"
        );
    }
    let dir = tempfile::tempdir().expect("temporary directory");
    for file in &files {
        let expected = parse_expected(file);
        let name = &expected.name;
        assert_eq!(
            expected.out_degrees.len() as u64,
            expected.vertices,
            "{name}.expected: out_degrees must list one degree per vertex"
        );
        assert_eq!(
            expected.out_degrees.iter().sum::<u64>(),
            expected.edges,
            "{name}.expected: out_degrees must sum to edges"
        );
        check_fixture(&expected, dir.path());
    }
}

/// Karate holds each of Zachary's 78 friendships once, as `u v` with `u < v`,
/// over members 0..34, with the well-known degrees of members 1, 33 and 34.
#[test]
fn karate_fixture_is_the_simple_undirected_edge_list() {
    let path = testing::fixture("karate.txt");
    let text = std::fs::read_to_string(&path).expect("karate: fixture is readable");
    let mut pairs = std::collections::BTreeSet::new();
    let mut degree = [0u32; 34];
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let ids: Vec<u32> = line
            .split(' ')
            .map(|f| {
                f.parse()
                    .unwrap_or_else(|_| panic!("karate: bad line {line:?}"))
            })
            .collect();
        let [u, v] = ids[..] else {
            panic!("karate: line {line:?} is not `u v`")
        };
        assert!(u < v && v < 34, "karate: edge {u} {v} is not u < v < 34");
        assert!(pairs.insert((u, v)), "karate: edge {u} {v} is listed twice");
        degree[u as usize] += 1;
        degree[v as usize] += 1;
    }
    assert_eq!(pairs.len(), 78, "karate: edge count");
    assert!(
        degree.iter().all(|&d| d > 0),
        "karate: every member has a friend"
    );
    assert_eq!(
        (degree[0], degree[32], degree[33]),
        (16, 12, 17),
        "karate: degrees of members 1, 33, 34"
    );
}

/// The shared fixture (`quiver_csr::testing::karate`) is the karate file as
/// `quiver convert` reads it, undirected and as listed.
#[test]
fn testing_karate_is_the_converted_fixture() {
    let dir = tempfile::tempdir().unwrap();
    for undirected in [true, false] {
        let output = dir.path().join(format!("karate-{undirected}.qcsr"));
        let options = ConvertOptions {
            sort: SortOptions {
                undirected,
                work_dir: Some(dir.path().to_owned()),
                ..SortOptions::default()
            },
            ..ConvertOptions::default()
        };
        convert(
            &testing::fixture("karate.txt"),
            &output,
            &options,
            &NoProgress,
        )
        .unwrap();
        let converted = Graph::open(&output).unwrap();
        assert_same_graph(&testing::karate(undirected), &converted);
    }
}

/// The ingest fixture must keep what it exercises, whatever an editor or git
/// does to it: CRLF line ends, tabs, a `%` comment.
#[test]
fn tiny_weighted_fixture_keeps_crlf_tabs_and_comments() {
    let bytes = std::fs::read(testing::fixture("tiny-weighted.txt"))
        .expect("tiny-weighted: fixture is readable");
    let text = String::from_utf8(bytes).expect("tiny-weighted: fixture is UTF-8");
    assert!(
        text.ends_with("\r\n"),
        "tiny-weighted: last line must end in CRLF"
    );
    assert_eq!(
        text.matches('\n').count(),
        text.matches("\r\n").count(),
        "tiny-weighted: every line must end in CRLF"
    );
    assert!(
        text.lines().any(|l| l.starts_with('%')),
        "tiny-weighted: needs a % comment"
    );
    assert!(text.contains('\t'), "tiny-weighted: must be tab separated");
}
