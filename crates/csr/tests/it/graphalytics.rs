//! LDBC Graphalytics ingest: the examples convert to the graphs their
//! properties describe, random sparse ids convert like relabelling by hand,
//! and bad datasets name the file, the line and the fault.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use proptest::prelude::*;
use quiver_csr::{convert, testing, ConvertOptions, EdgeFormat, Graph, NoProgress, SortOptions};

use crate::assert_same_graph;

fn graphalytics_options(undirected: bool) -> ConvertOptions {
    ConvertOptions {
        format: Some(EdgeFormat::Graphalytics),
        sort: SortOptions {
            undirected,
            ..SortOptions::default()
        },
        ..ConvertOptions::default()
    }
}

/// `key = value` pairs of a properties file.
fn properties(path: &Path) -> BTreeMap<String, String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect()
}

/// Numbers on each line of a text file.
fn rows(path: &Path) -> Vec<Vec<String>> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| l.split_whitespace().map(str::to_owned).collect())
        .collect()
}

#[test]
fn the_examples_convert_to_the_graphs_their_properties_describe() {
    for name in ["example-directed", "example-undirected"] {
        let props = properties(&testing::graphalytics(&format!("{name}.properties")));
        let meta = |key: &str| props[&format!("graph.{name}.{key}")].clone();
        let listed_vertices: u32 = meta("meta.vertices").parse().unwrap();
        let listed_edges: u64 = meta("meta.edges").parse().unwrap();
        let undirected = meta("directed") == "false";
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("g.qcsr");
        let report = convert(
            &testing::graphalytics(&format!("{name}.e")),
            &out,
            &graphalytics_options(false),
            &NoProgress,
        )
        .unwrap();
        assert_eq!(report.format, EdgeFormat::Graphalytics);
        assert_eq!(report.edges_parsed, listed_edges, "{name}");
        let graph = Graph::open(&out).unwrap();
        graph.verify().unwrap();
        let bytes = std::fs::read(&out).unwrap();
        assert_eq!(&bytes[8..12], &3u32.to_le_bytes(), "an id map is version 3");
        assert_eq!(graph.num_vertices(), listed_vertices, "{name}");
        let stored = if undirected { 2 } else { 1 } * listed_edges;
        assert_eq!(graph.num_edges(), stored, "{name}");
        assert_eq!(graph.is_undirected(), undirected, "{name}");
        assert!(graph.is_weighted());
        // Vertices are numbered in increasing order of the listed ids.
        let mut listed: Vec<u64> = rows(&testing::graphalytics(&format!("{name}.v")))
            .iter()
            .map(|r| r[0].parse().unwrap())
            .collect();
        listed.sort_unstable();
        assert_eq!(graph.original_ids(), Some(&listed[..]));
        assert_eq!(graph.id_index_bytes(), 0, "a sorted map is its own index");
        for v in 0..graph.num_vertices() {
            assert_eq!(graph.dense_id(graph.original_id(v)), Some(v));
        }
        assert_eq!(graph.dense_id(0), None);
        assert_eq!(graph.dense_id(11), None);
        // Every listed edge is there with its weight, both ways if undirected.
        for row in rows(&testing::graphalytics(&format!("{name}.e"))) {
            let id = |i: usize| graph.dense_id(row[i].parse().unwrap()).unwrap();
            let weight: f32 = row[2].parse().unwrap();
            let (s, t) = (id(0), id(1));
            let mut ends = vec![(s, t)];
            if undirected {
                ends.push((t, s));
            }
            for (a, b) in ends {
                let at = graph
                    .neighbors(a)
                    .binary_search(&b)
                    .unwrap_or_else(|_| panic!("{name}: edge {} -> {} missing", row[0], row[1]));
                assert_eq!(graph.edge_weights(a).unwrap()[at], weight);
            }
        }
        assert_same_graph(&graph, &testing::graphalytics_graph(name));
    }
}

/// Writes a dataset `NAME.v` (ids in the given order) and `NAME.e` into
/// `dir`, returning the edge file.
fn write_dataset(
    dir: &Path,
    name: &str,
    ids: &[u64],
    edges: &[(u64, u64, f32)],
    weighted: bool,
) -> PathBuf {
    let mut v = std::fs::File::create(dir.join(format!("{name}.v"))).unwrap();
    for id in ids {
        writeln!(v, "{id}").unwrap();
    }
    let path = dir.join(format!("{name}.e"));
    let mut e = std::fs::File::create(&path).unwrap();
    for &(s, t, w) in edges {
        if weighted {
            writeln!(e, "{s} {t} {w}").unwrap();
        } else {
            writeln!(e, "{s} {t}").unwrap();
        }
    }
    path
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Any distinct u64 ids, listed in any order, and edges between them
    /// convert to the graph numbered by hand: vertex v is the v-th smallest id.
    #[test]
    fn random_sparse_ids_convert_like_relabelling_by_hand(
        (ids, edges) in prop::collection::btree_set(any::<u64>(), 1..60)
            .prop_map(|set| set.into_iter().collect::<Vec<u64>>())
            .prop_flat_map(|ids| {
                let n = ids.len();
                let edges = prop::collection::vec((0..n, 0..n, 1u32..=1000), 0..200);
                (Just(ids).prop_shuffle(), edges)
            }),
        weighted in any::<bool>(),
        undirected in any::<bool>(),
    ) {
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        let edges: Vec<(u64, u64, f32)> = edges
            .into_iter()
            .map(|(s, t, w)| (sorted[s], sorted[t], w as f32 / 8.0))
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let input = write_dataset(dir.path(), "random", &ids, &edges, weighted);
        let out = dir.path().join("random.qcsr");
        convert(&input, &out, &graphalytics_options(undirected), &NoProgress).unwrap();
        let graph = Graph::open(&out).unwrap();
        let dense = |id: u64| sorted.binary_search(&id).unwrap() as u32;
        let mut by_hand: Vec<(u32, u32, f32)> = Vec::new();
        for &(s, t, w) in &edges {
            by_hand.push((dense(s), dense(t), w));
            if undirected && s != t {
                by_hand.push((dense(t), dense(s), w));
            }
        }
        // Without a properties file, weights are known from the edge
        // file's third column: an empty edge file makes an unweighted graph.
        let weighted = weighted && !edges.is_empty();
        // Without a properties file, an edge list in which every edge has
        // its reverse is stored undirected.
        let bits = |&(s, t, w): &(u32, u32, f32)| (s, t, if weighted { w.to_bits() } else { 0 });
        let mut forward: Vec<_> = by_hand.iter().map(bits).collect();
        let mut reverse: Vec<_> = forward.iter().map(|&(s, t, w)| (t, s, w)).collect();
        forward.sort_unstable();
        reverse.sort_unstable();
        let symmetric = !forward.is_empty() && forward == reverse;
        let expected = Graph::from_edges(sorted.len() as u32, &by_hand, weighted, undirected || symmetric)
            .unwrap()
            .with_original_ids(sorted.clone())
            .unwrap();
        assert_same_graph(&graph, &expected);
        for (v, &id) in sorted.iter().enumerate() {
            prop_assert_eq!(graph.original_id(v as u32), id);
            prop_assert_eq!(graph.dense_id(id), Some(v as u32));
        }
    }
}

/// Converts the dataset `name` written into a fresh directory from the
/// given `.v`, `.e` and (if any) `.properties` text, returning the error's
/// whole chain.
fn convert_error(v: Option<&str>, e: &str, properties: Option<&str>, undirected: bool) -> String {
    let dir = tempfile::tempdir().unwrap();
    if let Some(v) = v {
        std::fs::write(dir.path().join("bad.v"), v).unwrap();
    }
    if let Some(p) = properties {
        std::fs::write(dir.path().join("bad.properties"), p).unwrap();
    }
    let input = dir.path().join("bad.e");
    std::fs::write(&input, e).unwrap();
    let out = dir.path().join("bad.qcsr");
    let err = convert(&input, &out, &graphalytics_options(undirected), &NoProgress)
        .expect_err("a bad dataset was accepted");
    assert!(!out.exists(), "a failed conversion left its output");
    quiver_run::chain(&err)
}

fn assert_mentions(err: &str, needles: &[&str]) {
    for needle in needles {
        assert!(err.contains(needle), "error {err:?} lacks {needle:?}");
    }
}

#[test]
fn bad_datasets_name_the_file_line_and_fault() {
    let v = Some("10\n20\n30\n");
    assert_mentions(
        &convert_error(None, "10 20\n", None, false),
        &["bad.v", "failed to open"],
    );
    assert_mentions(
        &convert_error(v, "10 20\n20 25\n", None, false),
        &["bad.e", "line 2", "vertex id 25", "not listed in", "bad.v"],
    );
    assert_mentions(
        &convert_error(v, "10 20\n30\n", None, false),
        &["bad.e", "line 2", "source target"],
    );
    assert_mentions(
        &convert_error(v, "10 20 1.5 7\n", None, false),
        &["bad.e", "line 1", "source target"],
    );
    assert_mentions(
        &convert_error(v, "10 2x0\n", None, false),
        &["bad.e", "line 1", "\"2x0\""],
    );
    assert_mentions(
        &convert_error(v, "10 20 heavy\n", None, false),
        &["bad.e", "line 1", "weight"],
    );
    assert_mentions(
        &convert_error(Some("10\nten\n"), "10 10\n", None, false),
        &["bad.v", "line 2", "\"ten\""],
    );
    assert_mentions(
        &convert_error(Some("10\n20 30\n"), "10 10\n", None, false),
        &["bad.v", "line 2", "one vertex id"],
    );
    assert_mentions(
        &convert_error(Some("10\n20\n10\n"), "10 20\n", None, false),
        &["bad.v", "vertex id 10 is listed twice"],
    );
    let directed = "graph.bad.directed = true\n";
    assert_mentions(
        &convert_error(v, "10 20\n", Some(directed), true),
        &["undirected", "bad.properties", "directed = true"],
    );
    assert_mentions(
        &convert_error(v, "10 20\n", Some("graph.bad.directed = maybe\n"), false),
        &["bad.properties", "line 1", "\"maybe\""],
    );
}

#[test]
fn properties_and_flags_decide_direction() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_dataset(dir.path(), "d", &[5, 9], &[(5, 9, 1.0)], false);
    let out = dir.path().join("d.qcsr");
    let edges = |undirected| {
        convert(&input, &out, &graphalytics_options(undirected), &NoProgress).unwrap();
        Graph::open(&out).unwrap().num_edges()
    };
    // No properties file: the flag decides.
    assert_eq!((edges(false), edges(true)), (1, 2));
    std::fs::write(
        dir.path().join("d.properties"),
        "graph.d.directed = false\n",
    )
    .unwrap();
    assert_eq!((edges(false), edges(true)), (2, 2));
    std::fs::write(dir.path().join("d.properties"), "graph.d.directed = true\n").unwrap();
    assert_eq!(edges(false), 1);
    // Options that make no sense for a Graphalytics dataset are refused.
    for options in [
        ConvertOptions {
            min_vertices: 5,
            ..graphalytics_options(false)
        },
        ConvertOptions {
            sort: SortOptions {
                relabel: true,
                ..SortOptions::default()
            },
            ..graphalytics_options(false)
        },
    ] {
        let err = convert(&input, &out, &options, &NoProgress).unwrap_err();
        assert!(quiver_run::is_invalid_argument(&err), "{err:?}");
    }
}
