//! `GraphIndex`: the header, offsets and page checksums of a file, read
//! without the rest, agree with the whole graph, and damage to what it
//! reads is an error.

use proptest::prelude::*;
use quiver_csr::format::{VerifiedFile, PAGE};
use quiver_csr::{read_header, write_graph, Blocks, FileHead, Graph, GraphIndex, VertexIds};
use quiver_io::{AlignedBuf, ReadFile, ReadOptions, ReadRequest};

use crate::{arb_graph, with_ids};

/// `graph` (with an id map drawn from `ids`, if given) written to a file
/// in a temporary directory, and opened whole.
fn written(graph: Graph, ids: Option<u64>) -> (tempfile::TempDir, std::path::PathBuf, Graph) {
    let graph = match ids {
        Some(seed) => with_ids(graph, seed, false),
        None => graph,
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.qcsr");
    write_graph(&graph, &path).unwrap();
    let whole = Graph::open(&path).unwrap();
    (dir, path, whole)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// The index says what the whole graph says, and a flipped byte is an
    /// error when the index reads it (the header page, the offsets, the
    /// page table); elsewhere it is caught where a reader reads it.
    #[test]
    fn the_index_agrees_with_the_graph_and_catches_what_it_reads(
        graph in arb_graph(300, 3000),
        ids in prop::option::of(any::<u64>()),
        flip in any::<prop::sample::Index>(),
    ) {
        let (_dir, path, whole) = written(graph, ids);
        let index = GraphIndex::open(&path).unwrap();
        // The head alone says the same, and plans the one block that
        // holds every vertex as the offsets would.
        let head = FileHead::open(&path).unwrap();
        prop_assert_eq!(head.num_vertices(), whole.num_vertices());
        prop_assert_eq!(index.num_vertices(), whole.num_vertices());
        prop_assert_eq!(head.num_edges(), whole.num_edges());
        prop_assert_eq!(head.is_weighted(), whole.is_weighted());
        prop_assert_eq!(index.is_weighted(), whole.is_weighted());
        prop_assert_eq!(head.has_distinct_targets(), whole.has_distinct_targets());
        prop_assert_eq!(head.layout(), whole.layout());
        prop_assert_eq!(index.layout(), whole.layout());
        prop_assert_eq!(index.offsets(), whole.offsets());
        prop_assert_eq!(Some(head.page_checksums()), whole.page_checksums());
        prop_assert_eq!(Some(index.head().page_checksums()), whole.page_checksums());
        prop_assert_eq!(Blocks::whole(&head), Blocks::by_bytes(&index, u64::MAX).unwrap());
        let header = read_header(&path).unwrap();
        prop_assert_eq!(header.num_vertices, whole.num_vertices());
        prop_assert_eq!(header.num_edges, whole.num_edges());

        let mut bytes = std::fs::read(&path).unwrap();
        let at = flip.index(bytes.len());
        bytes[at] ^= 0x5a;
        std::fs::write(&path, &bytes).unwrap();
        let read_by_index = quiver_csr::testing::read_by_index(&index.layout(), at as u64);
        prop_assert_eq!(read_header(&path).is_err(), (at as u64) < PAGE, "byte {} flipped", at);
        match GraphIndex::open(&path) {
            Err(e) => {
                prop_assert!(read_by_index, "byte {} is not the index's, yet: {}", at, e);
                prop_assert!(e.to_string().contains("g.qcsr"), "error does not name the file: {}", e);
            }
            Ok(damaged) => {
                prop_assert!(!read_by_index, "a flipped byte {} of the index was accepted", at);
                // Its page fails when a reader reads it.
                let file = ReadFile::open(&path, &ReadOptions { direct: false, ..ReadOptions::default() }).unwrap();
                let file = VerifiedFile::new(file, damaged.head().page_checksums().clone());
                let page = (at as u64) / PAGE * PAGE;
                let mut buf = AlignedBuf::zeroed(PAGE as usize);
                let mut requests = [ReadRequest { offset: page, buf: &mut buf }];
                prop_assert!(file.read_batch(&mut requests).is_err(), "page {} read cleanly", page);
            }
        }
    }

    /// `VertexIds`, read from the header and the id map alone, names every
    /// vertex as the whole graph does, both ways, and finds no vertex for
    /// an id the graph lacks; damage to the map is an error.
    #[test]
    fn vertex_ids_name_vertices_as_the_graph_does(
        graph in arb_graph(300, 3000),
        ids in prop::option::of(any::<u64>()),
        probes in prop::collection::vec(any::<u64>(), 20),
    ) {
        let (_dir, path, whole) = written(graph, ids);
        let names = VertexIds::open(&path).unwrap();
        prop_assert_eq!(names.has_map(), whole.original_ids().is_some());
        for v in 0..whole.num_vertices() {
            let original = whole.original_id(v);
            prop_assert_eq!(names.original(v), original);
            prop_assert_eq!(names.dense(original), Some(v));
        }
        for probe in probes.into_iter().chain([u64::from(whole.num_vertices()), u64::MAX]) {
            prop_assert_eq!(names.dense(probe), whole.dense_id(probe));
        }
        if whole.original_ids().is_some_and(|m| !m.is_empty()) {
            let at = whole.layout().ids.offset as usize;
            let mut bytes = std::fs::read(&path).unwrap();
            bytes[at] ^= 0x5a;
            std::fs::write(&path, &bytes).unwrap();
            prop_assert!(VertexIds::open(&path).is_err(), "a damaged id map was read");
        }
    }

    #[test]
    fn a_truncated_file_has_no_index(graph in arb_graph(200, 1500), cut in any::<prop::sample::Index>()) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.qcsr");
        write_graph(&graph, &path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..cut.index(bytes.len())]).unwrap();
        prop_assert!(GraphIndex::open(&path).is_err(), "a truncated file was accepted");
    }
}

#[test]
fn targets_out_of_range_are_refused_by_the_reader() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.qcsr");
    let graph = Graph::from_edges(3, &[(0, 1, 1.0), (1, 2, 1.0)], false, false).unwrap();
    write_graph(&graph, &path).unwrap();
    let index = GraphIndex::open(&path).unwrap();
    let file = ReadFile::open(
        &path,
        &ReadOptions {
            direct: false,
            ..ReadOptions::default()
        },
    )
    .unwrap();
    let file = VerifiedFile::new(file, index.head().page_checksums().clone());
    assert!(file.check_targets(&[0, 2, 1], 0).is_ok());
    let err = file.check_targets(&[0, 3], 5).unwrap_err().to_string();
    assert!(err.contains("g.qcsr"), "{err}");
    assert!(err.contains("edge 6 targets vertex 3"), "{err}");
}
