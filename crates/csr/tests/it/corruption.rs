//! Damaged files give typed errors naming the file, never a panic.

use proptest::prelude::*;
use quiver_csr::testing::{reseal, reseal_all, set_target};
use quiver_csr::{write_graph, Error, Graph};
use quiver_io::ReadOptions;

use crate::{arb_graph, with_ids};

/// Opens and verifies both ways; returns the errors (both must agree on
/// failure). Opening lazily must say what opening says.
fn open_all(path: &std::path::Path) -> (Result<(), Error>, Result<(), Error>) {
    let mapped = Graph::open(path).and_then(|g| g.verify());
    let lazily = Graph::open_lazily(path).and_then(|g| g.verify());
    assert_eq!(
        lazily.as_ref().map_err(ToString::to_string),
        mapped.as_ref().map_err(ToString::to_string),
        "opening lazily and opening disagree"
    );
    let loaded = Graph::load(
        path,
        &ReadOptions {
            direct: false,
            ..ReadOptions::default()
        },
    )
    .and_then(|g| g.verify());
    (mapped, loaded)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// Every byte of a file is covered by a checksum, so any change is
    /// caught, in graphs with an id map (sorted or not) as in graphs without.
    #[test]
    fn flipped_bytes_anywhere_are_errors(
        graph in arb_graph(200, 1500),
        ids in prop::option::of((any::<u64>(), any::<bool>())),
        flips in prop::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..4),
    ) {
        let graph = match ids {
            Some((seed, sorted)) => with_ids(graph, seed, sorted),
            None => graph,
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.qcsr");
        write_graph(&graph, &path).unwrap();
        let mut bytes = std::fs::read(&path).unwrap();
        let mut positions = Vec::new();
        for (index, xor) in &flips {
            let at = index.index(bytes.len());
            if !positions.contains(&at) {
                bytes[at] ^= xor;
                positions.push(at);
            }
        }
        std::fs::write(&path, &bytes).unwrap();
        let (mapped, loaded) = open_all(&path);
        let err = mapped.expect_err("a corrupted file opened and verified cleanly");
        prop_assert!(loaded.is_err(), "load+verify accepted a corrupted file");
        prop_assert!(err.to_string().contains("g.qcsr"), "error does not name the file: {}", err);
    }

    #[test]
    fn truncated_or_extended_files_are_errors(graph in arb_graph(200, 1500), cut in any::<prop::sample::Index>(), extra in 1usize..5000) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.qcsr");
        write_graph(&graph, &path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..cut.index(bytes.len())]).unwrap();
        let (mapped, loaded) = open_all(&path);
        prop_assert!(mapped.is_err() && loaded.is_err(), "a truncated file was accepted");
        let mut longer = bytes.clone();
        longer.extend(std::iter::repeat_n(0u8, extra));
        std::fs::write(&path, &longer).unwrap();
        let (mapped, loaded) = open_all(&path);
        prop_assert!(mapped.is_err() && loaded.is_err(), "trailing data was accepted");
    }
}

fn written(dir: &std::path::Path) -> (std::path::PathBuf, Vec<u8>) {
    let graph = Graph::from_edges(3, &[(0, 1, 1.0), (1, 2, 1.0)], false, false).unwrap();
    let path = dir.join("g.qcsr");
    write_graph(&graph, &path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    (path, bytes)
}

#[test]
fn foreign_files_are_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("edges.txt");
    std::fs::write(&path, "0 1\n1 2\n").unwrap();
    for result in [
        Graph::open(&path).map(|_| ()),
        Graph::load(&path, &ReadOptions::default()).map(|_| ()),
    ] {
        let err = result.unwrap_err();
        assert!(matches!(err, Error::Foreign { .. }), "{err:?}");
        assert!(
            err.to_string().contains("edges.txt") && err.to_string().contains("not a .qcsr"),
            "{err}"
        );
    }
    std::fs::write(&path, "").unwrap();
    assert!(matches!(
        Graph::open(&path).unwrap_err(),
        Error::Foreign { .. }
    ));
}

#[test]
fn future_versions_are_refused_with_the_version() {
    let dir = tempfile::tempdir().unwrap();
    let (path, mut bytes) = written(dir.path());
    bytes[8..12].copy_from_slice(&7u32.to_le_bytes());
    reseal(&mut bytes);
    std::fs::write(&path, &bytes).unwrap();
    let err = Graph::open(&path).unwrap_err();
    assert!(
        matches!(err, Error::FutureVersion { found: 7, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("version 7"), "{err}");
}

#[test]
fn a_resealed_header_with_bad_counts_is_still_caught() {
    let dir = tempfile::tempdir().unwrap();
    let (path, original) = written(dir.path());
    // |V| claims more vertices than the offsets section holds.
    let mut bytes = original.clone();
    bytes[16..24].copy_from_slice(&1000u64.to_le_bytes());
    reseal(&mut bytes);
    std::fs::write(&path, &bytes).unwrap();
    assert!(matches!(
        Graph::open(&path).unwrap_err(),
        Error::Corrupt { .. }
    ));
    // Unknown flag bits.
    let mut bytes = original.clone();
    bytes[12] |= 0x80;
    reseal(&mut bytes);
    std::fs::write(&path, &bytes).unwrap();
    assert!(Graph::open(&path)
        .unwrap_err()
        .to_string()
        .contains("flags"));
}

#[test]
fn a_target_out_of_range_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let (path, mut bytes) = written(dir.path());
    // Every checksum matches: only the range check can object, on every
    // read path.
    set_target(&mut bytes, 0, 99);
    std::fs::write(&path, &bytes).unwrap();
    let (mapped, loaded) = open_all(&path);
    for err in [mapped.unwrap_err(), loaded.unwrap_err()] {
        assert!(err.to_string().contains("targets vertex 99"), "{err}");
    }
}

/// Version 1 files (no page checksums) still open, verified whole, and
/// their page checksums are worked out for the readers that need them.
#[test]
fn version_1_files_open_verified_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (path, mut bytes) = written(dir.path());
    bytes[8..12].copy_from_slice(&1u32.to_le_bytes());
    bytes[128..152].fill(0);
    bytes[104..112].copy_from_slice(&12288u64.to_le_bytes());
    bytes.truncate(12288);
    reseal(&mut bytes);
    std::fs::write(&path, &bytes).unwrap();
    let graph = Graph::open(&path).expect("a version 1 file opens");
    assert_eq!(graph.neighbors(1), &[2]);
    let pages = graph.page_checksums().expect("computed for a file");
    pages.verify(8192, &bytes[8192..12288]).unwrap();
    // A flipped target is caught by its section checksum.
    bytes[8192] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    let (mapped, loaded) = open_all(&path);
    for err in [mapped.unwrap_err(), loaded.unwrap_err()] {
        assert!(
            matches!(
                err,
                Error::Checksum {
                    section: "targets section",
                    ..
                }
            ),
            "{err:?}"
        );
    }
}

/// Block-by-block readers verify exactly the pages they read.
#[test]
fn page_checksums_name_the_corrupt_page() {
    let dir = tempfile::tempdir().unwrap();
    let (path, mut bytes) = written(dir.path());
    let graph = Graph::open(&path).unwrap();
    let pages = graph.page_checksums().unwrap().clone();
    pages.verify(4096, &bytes[4096..12288]).unwrap();
    bytes[8200] ^= 4;
    let err = pages.verify(4096, &bytes[4096..12288]).unwrap_err();
    assert!(
        matches!(
            err,
            Error::PageChecksum {
                offset: 8192,
                section: "targets section",
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("g.qcsr"), "{err}");
    // Reads that are not whole pages of graph data are refused, not guessed.
    assert!(pages.verify(4097, &bytes[4097..8193]).is_err());
    assert!(pages.verify(12288, &bytes[12288..16384]).is_err());
}

#[test]
fn a_false_claim_of_distinct_targets_is_found_by_verify() {
    let dir = tempfile::tempdir().unwrap();
    let graph =
        Graph::from_edges(3, &[(0, 1, 1.0), (0, 2, 1.0), (1, 2, 1.0)], false, false).unwrap();
    assert!(graph.has_distinct_targets());
    let path = dir.path().join("g.qcsr");
    write_graph(&graph, &path).unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    // Vertex 0's list [1, 2] becomes [1, 1] (still sorted) under a header
    // that says no list repeats a target: only the claim is wrong.
    set_target(&mut bytes, 1, 1);
    std::fs::write(&path, &bytes).unwrap();
    let graph = Graph::open(&path).expect("structure is intact");
    assert!(graph.has_distinct_targets());
    let err = graph.verify().unwrap_err();
    assert!(err.to_string().contains("vertex 0's does"), "{err}");
}

#[test]
fn an_unsorted_list_is_found_by_verify() {
    let dir = tempfile::tempdir().unwrap();
    let graph =
        Graph::from_edges(3, &[(0, 1, 1.0), (1, 0, 1.0), (1, 2, 1.0)], false, false).unwrap();
    let path = dir.path().join("g.qcsr");
    write_graph(&graph, &path).unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    // Vertex 1's list [0, 2] becomes [2, 0]: checksums resealed.
    set_target(&mut bytes, 1, 2);
    set_target(&mut bytes, 2, 0);
    std::fs::write(&path, &bytes).unwrap();
    let graph = Graph::open(&path).expect("checksums and bounds hold");
    assert_eq!(graph.neighbors(1), [2, 0]);
    assert_eq!(graph.first_unsorted_list(0..3), Some(1));
    assert_eq!(graph.first_unsorted_list(2..3), None);
    let err = graph.verify().unwrap_err();
    assert!(
        err.to_string().contains("vertex 1's list is not sorted"),
        "{err}"
    );
}

/// A small graph with an id map, written; `ids` in the given order.
fn written_with_ids(dir: &std::path::Path, ids: Vec<u64>) -> (std::path::PathBuf, Vec<u8>) {
    let graph = Graph::from_edges(3, &[(0, 1, 1.0), (1, 2, 1.0)], false, false)
        .unwrap()
        .with_original_ids(ids)
        .unwrap();
    let path = dir.join("g.qcsr");
    write_graph(&graph, &path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    (path, bytes)
}

/// Graphs without an id map are the version 2 files earlier builds read;
/// with one they are version 3, which those builds refuse by version.
#[test]
fn only_graphs_with_an_id_map_are_version_3() {
    let dir = tempfile::tempdir().unwrap();
    let (_, plain) = written(dir.path());
    assert_eq!(plain[8..12], 2u32.to_le_bytes());
    assert_eq!(plain.len(), 16384, "header, offsets, targets, page table");
    let (path, mut mapped) = written_with_ids(dir.path(), vec![70, 9, 1 << 40]);
    assert_eq!(mapped[8..12], 3u32.to_le_bytes());
    // The id map sits after the targets (no weights) and before the table.
    assert_eq!(mapped.len(), 20480);
    assert_eq!(mapped[12288..12296], 70u64.to_le_bytes());
    let graph = Graph::open(&path).unwrap();
    assert_eq!(graph.original_ids(), Some(&[70, 9, 1 << 40][..]));
    assert_eq!(graph.dense_id(9), Some(1));
    assert_eq!(
        graph.id_index_bytes(),
        12,
        "an unsorted map gets a permutation"
    );
    // The flag in a version 2 header is refused as what it is.
    mapped[8..12].copy_from_slice(&2u32.to_le_bytes());
    reseal(&mut mapped);
    std::fs::write(&path, &mapped).unwrap();
    let err = Graph::open(&path).unwrap_err();
    assert!(err.to_string().contains("unknown header flags 0x"), "{err}");
}

/// A flipped id is caught by its page, and the message names the section.
#[test]
fn a_flipped_id_is_caught_by_its_page() {
    let dir = tempfile::tempdir().unwrap();
    let (path, mut bytes) = written_with_ids(dir.path(), vec![1, 2, 3]);
    bytes[12288 + 8] ^= 0x10;
    std::fs::write(&path, &bytes).unwrap();
    let (mapped, loaded) = open_all(&path);
    for err in [mapped.unwrap_err(), loaded.unwrap_err()] {
        assert!(
            matches!(
                err,
                Error::PageChecksum {
                    section: "id map section",
                    offset: 12288,
                    ..
                }
            ),
            "{err:?}"
        );
    }
}

/// Two vertices with one original id are refused at open even when every
/// checksum was rewritten to match.
#[test]
fn a_shared_original_id_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let (path, mut bytes) = written_with_ids(dir.path(), vec![5, 6, 7]);
    bytes[12288 + 16..12288 + 24].copy_from_slice(&5u64.to_le_bytes());
    reseal_all(&mut bytes);
    std::fs::write(&path, &bytes).unwrap();
    let (mapped, loaded) = open_all(&path);
    for err in [mapped.unwrap_err(), loaded.unwrap_err()] {
        assert!(
            err.to_string()
                .contains("vertices 0 and 2 both have original id 5"),
            "{err}"
        );
    }
}
