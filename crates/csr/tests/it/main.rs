//! Integration tests of quiver-csr: format round trips, blocks, conversion
//! against a reference model, memory bounds, corruption, parse errors and
//! generators.

// Test data is small and built from in-range values; checked casts would
// only obscure it.
#![allow(
    clippy::cast_possible_truncation,
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss
)]

// A counting global allocator (to measure peak heap) needs `unsafe`; test code only.
#[allow(unsafe_code)]
mod alloc;
mod blocks;
mod convert;
mod corruption;
mod fixtures;
mod generate;
mod graphalytics;
mod index;
mod parse_errors;
mod roundtrip;

use std::path::Path;

use proptest::prelude::*;
use quiver_csr::{testing, Graph};

#[global_allocator]
static ALLOC: alloc::CountingAlloc = alloc::CountingAlloc;

/// A random graph: up to `max_v` vertices, up to `max_e` edges, maybe
/// weighted, with zero-degree vertices and duplicate edges likely.
pub fn arb_graph(max_v: u32, max_e: usize) -> impl Strategy<Value = Graph> {
    testing::arb_graph(testing::Shape::new(max_v, max_e))
}

/// `graph` with an id map drawn from `seed`: distinct ids (splitmix64 is a
/// bijection of u64) in no order, or increasing if `sorted`.
pub fn with_ids(graph: Graph, seed: u64, sorted: bool) -> Graph {
    let mix = |x: u64| {
        let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    let mut ids: Vec<u64> = (0..u64::from(graph.num_vertices()))
        .map(|v| mix(seed.wrapping_add(v)))
        .collect();
    if sorted {
        ids.sort_unstable();
    }
    graph
        .with_original_ids(ids)
        .expect("distinct ids, one per vertex")
}

/// Asserts two graphs hold the same CSR arrays and flags.
pub fn assert_same_graph(a: &Graph, b: &Graph) {
    assert_eq!(a.num_vertices(), b.num_vertices(), "vertex counts differ");
    assert_eq!(a.offsets(), b.offsets(), "offsets differ");
    assert_eq!(a.targets(), b.targets(), "targets differ");
    assert_eq!(a.weights(), b.weights(), "weights differ");
    assert_eq!(a.original_ids(), b.original_ids(), "id maps differ");
    assert_eq!(a.is_weighted(), b.is_weighted(), "weighted flags differ");
    assert_eq!(
        a.is_undirected(),
        b.is_undirected(),
        "undirected flags differ"
    );
    let distinct = a.offsets().windows(2).all(|w| {
        a.targets()[w[0] as usize..w[1] as usize]
            .windows(2)
            .all(|pair| pair[0] != pair[1])
    });
    assert_eq!(
        a.has_distinct_targets(),
        distinct,
        "distinct-targets flag is wrong"
    );
    assert_eq!(
        b.has_distinct_targets(),
        distinct,
        "distinct-targets flags differ"
    );
}

/// Files in `dir` (to check nothing half-written or temporary was left).
pub fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("test dir is readable")
        .map(|e| {
            e.expect("dir entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    names.sort();
    names
}
