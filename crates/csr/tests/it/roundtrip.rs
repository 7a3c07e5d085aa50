//! Write/read round trips of random graphs through every way of opening.

use proptest::prelude::*;
use quiver_csr::{write_graph, Graph};
use quiver_io::{BackendChoice, ReadOptions};

use crate::{arb_graph, assert_same_graph, files_in, with_ids};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// With or without an id map (sorted or not): the map comes back too,
    /// and `dense_id` inverts `original_id`.
    #[test]
    fn written_graphs_read_back_identically(
        graph in arb_graph(300, 2000),
        ids in prop::option::of((any::<u64>(), any::<bool>())),
    ) {
        let graph = match ids {
            Some((seed, sorted)) => with_ids(graph, seed, sorted),
            None => graph,
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.qcsr");
        write_graph(&graph, &path).unwrap();
        prop_assert_eq!(files_in(dir.path()), vec!["g.qcsr".to_string()], "no temporary files left");
        let mapped = Graph::open(&path).unwrap();
        mapped.verify().unwrap();
        assert_same_graph(&graph, &mapped);
        for backend in [BackendChoice::Pread, BackendChoice::Auto] {
            for direct in [false, true] {
                let options = ReadOptions { backend, direct, ..ReadOptions::default() };
                let loaded = Graph::load(&path, &options).unwrap();
                loaded.verify().unwrap();
                assert_same_graph(&graph, &loaded);
            }
        }
        prop_assert_eq!(std::fs::metadata(&path).unwrap().len(), graph.layout().file_len());
        prop_assert_eq!(std::fs::metadata(&path).unwrap().len() % 4096, 0);
        for v in 0..mapped.num_vertices() {
            prop_assert_eq!(mapped.dense_id(mapped.original_id(v)), Some(v));
        }
        if ids.is_none() {
            prop_assert_eq!(mapped.original_id(0), 0);
            prop_assert_eq!(mapped.dense_id(u64::from(mapped.num_vertices())), None);
        }
    }

    #[test]
    fn adjacency_lists_are_sorted(graph in arb_graph(100, 800)) {
        for v in 0..graph.num_vertices() {
            let n = graph.neighbors(v);
            prop_assert!(n.windows(2).all(|w| w[0] <= w[1]), "vertex {} unsorted: {:?}", v, n);
        }
    }
}

#[test]
fn empty_and_single_vertex_graphs_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    for (n, edges) in [(1u32, vec![]), (1, vec![(0, 0, 1.0)]), (5, vec![])] {
        let graph = Graph::from_edges(n, &edges, false, false).unwrap();
        let path = dir.path().join(format!("g{n}-{}.qcsr", edges.len()));
        write_graph(&graph, &path).unwrap();
        let back = Graph::open(&path).unwrap();
        back.verify().unwrap();
        assert_same_graph(&graph, &back);
    }
}

#[test]
fn from_parts_rejects_broken_invariants() {
    let bad = [
        (vec![], vec![], "no offsets"),
        (vec![1, 1], vec![0], "offsets not starting at 0"),
        (vec![0, 2, 1], vec![0, 0], "decreasing offsets"),
        (vec![0, 1], vec![0, 0], "offsets ending before |E|"),
        (vec![0, 1], vec![7], "target out of range"),
    ];
    for (offsets, targets, what) in bad {
        assert!(
            Graph::from_parts(offsets, targets, None, false).is_err(),
            "{what} was accepted"
        );
    }
    assert!(
        Graph::from_parts(vec![0, 1], vec![0], Some(vec![]), false).is_err(),
        "short weights accepted"
    );
}

/// A run of edges with the wrong number of weights is refused before
/// anything of it is written; the writer goes on, and the graph holds the
/// runs it took.
#[test]
fn a_run_needs_a_weight_per_edge() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("w.qcsr");
    let mut writer = quiver_csr::CsrWriter::create(&path, 3, true, false).unwrap();
    let err = quiver_run::chain(&writer.push_run(0, &[1, 2], &[0.5]).unwrap_err());
    assert!(err.contains("1 weights for 2 edges of 0"), "{err}");
    writer.push_run(0, &[1, 2], &[0.5, 2.0]).unwrap();
    writer.push_run(2, &[], &[]).unwrap();
    writer.push(2, 0, 4.0).unwrap();
    writer.finish().unwrap();
    let graph = quiver_csr::Graph::open(&path).unwrap();
    assert_eq!(graph.num_edges(), 3);
    assert_eq!(graph.neighbors(0), &[1, 2]);
    assert_eq!(graph.edge_weights(0), Some(&[0.5, 2.0][..]));
    assert_eq!(graph.neighbors(2), &[0]);
}

/// Resident bytes of the mapping that holds `at`, from `/proc/self/smaps`
/// (other tests' memory does not count).
fn mapping_rss(at: *const u8) -> u64 {
    let smaps = std::fs::read_to_string("/proc/self/smaps").expect("Linux has smaps");
    let at = at as u64;
    let mut inside = false;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if let Some((start, end)) = first.split_once('-').filter(|_| !first.ends_with(':')) {
            let range =
                u64::from_str_radix(start, 16).unwrap()..u64::from_str_radix(end, 16).unwrap();
            inside = range.contains(&at);
        } else if inside && line.starts_with("Rss:") {
            let kb: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
            return kb << 10;
        }
    }
    panic!("no mapping holds {at:#x}");
}

/// A ring of 2^21 vertices written to `dir`: a file of over 24 MiB (16
/// MiB of offsets, 8 MiB of targets), to see pages leave the process.
fn large_graph_file(dir: &tempfile::TempDir) -> (Graph, std::path::PathBuf) {
    let n: u32 = 2 << 20;
    let offsets: Vec<u64> = (0..=u64::from(n)).collect();
    let targets: Vec<u32> = (0..n).map(|v| (v + 1) % n).collect();
    let graph = Graph::from_parts(offsets, targets, None, false).unwrap();
    let path = dir.path().join("g.qcsr");
    quiver_csr::write_graph(&graph, &path).unwrap();
    let file_len = std::fs::metadata(&path).unwrap().len();
    assert!(file_len > 24 << 20, "{file_len} bytes");
    (graph, path)
}

/// Opening lazily checks the same bytes as opening but leaves at most a
/// window of the file resident; the graph reads the same.
#[test]
fn opening_lazily_leaves_the_file_out_of_memory() {
    let dir = tempfile::tempdir().unwrap();
    let (_, path) = large_graph_file(&dir);

    let kept = Graph::open(&path).unwrap();
    let kept_rss = mapping_rss(kept.targets().as_ptr().cast());
    assert!(kept_rss > 20 << 20, "open left {kept_rss} bytes resident");
    let lazy = Graph::open_lazily(&path).unwrap();
    let lazy_rss = mapping_rss(lazy.targets().as_ptr().cast());
    assert!(
        lazy_rss <= 9 << 20,
        "open_lazily left {lazy_rss} bytes resident"
    );
    assert_eq!(lazy.targets(), kept.targets());
    assert_eq!(lazy.offsets(), kept.offsets());
}

/// Releasing half the lists of a mapped graph takes their pages (8 MiB of
/// offsets, 4 MiB of targets) out of the process and leaves the other
/// half's; every list still reads as written. A loaded graph keeps its
/// lists: releasing them must not discard its only copy.
#[test]
fn released_lists_leave_memory_and_read_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let (written, path) = large_graph_file(&dir);
    let n = written.num_vertices();

    let mapped = Graph::open(&path).unwrap();
    let at = mapped.targets().as_ptr().cast();
    let before = mapping_rss(at);
    assert!(before > 24 << 20, "open left {before} bytes resident");
    mapped.release_lists(n / 2..n);
    let after = mapping_rss(at);
    assert!(
        after <= before - (11 << 20) && after >= 12 << 20,
        "{before} bytes resident before releasing half the lists, {after} after"
    );
    assert_same_graph(&written, &mapped);

    let options = ReadOptions {
        direct: false,
        ..ReadOptions::default()
    };
    let loaded = Graph::load(&path, &options).unwrap();
    loaded.release_lists(0..n);
    assert_same_graph(&written, &loaded);
}
