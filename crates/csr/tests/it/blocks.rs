//! Blocks cover every vertex once, never split an adjacency list, respect
//! their budget, and know aligned extents that hold their data.

use proptest::prelude::*;
use quiver_csr::{Block, Blocks, Graph};

use crate::arb_graph;

/// Checks the partition invariants shared by both constructions.
fn check_partition(graph: &Graph, blocks: &Blocks) {
    let mut next = 0u32;
    for (i, block) in blocks.iter().enumerate() {
        assert_eq!(block.id.0 as usize, i, "ids are positions");
        assert_eq!(block.vertices.start, next, "blocks are contiguous");
        next = block.vertices.end;
        let offsets = graph.offsets();
        assert_eq!(
            block.edges.start, offsets[block.vertices.start as usize],
            "edges start at the first vertex's"
        );
        assert_eq!(
            block.edges.end, offsets[block.vertices.end as usize],
            "edges end at the last vertex's"
        );
        check_extents(graph, block);
        for v in block.vertices.clone() {
            assert_eq!(blocks.find(v), block.id, "find({v})");
        }
    }
    assert_eq!(next, graph.num_vertices(), "blocks end at |V|");
}

/// The aligned extents must contain the block's exact bytes.
fn check_extents(graph: &Graph, block: &Block) {
    let layout = graph.layout();
    let within = |extent: quiver_csr::Extent, start: u64, end: u64| {
        assert_eq!(extent.offset % 4096, 0);
        assert_eq!(extent.len % 4096, 0);
        assert!(
            extent.offset <= start && end <= extent.offset + extent.len,
            "{extent:?} misses {start}..{end}"
        );
    };
    within(
        block.offsets_extent,
        layout.offsets.offset + u64::from(block.vertices.start) * 8,
        layout.offsets.offset + (u64::from(block.vertices.end) + 1) * 8,
    );
    within(
        block.targets_extent,
        layout.targets.offset + block.edges.start * 4,
        layout.targets.offset + block.edges.end * 4,
    );
    assert_eq!(block.weights_extent.is_some(), graph.is_weighted());
    if let Some(extent) = block.weights_extent {
        within(
            extent,
            layout.weights.offset + block.edges.start * 4,
            layout.weights.offset + block.edges.end * 4,
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn byte_blocks_partition_and_respect_the_budget(graph in arb_graph(400, 3000), budget in 1u64..4000) {
        let blocks = Blocks::by_bytes(&graph, budget).unwrap();
        check_partition(&graph, &blocks);
        for block in blocks.iter() {
            prop_assert!(
                block.data_bytes(graph.is_weighted()) <= budget || block.num_vertices() == 1,
                "block {:?} holds {} bytes over a budget of {}", block.id, block.data_bytes(graph.is_weighted()), budget
            );
        }
        // Greedy: a block and the next vertex together would exceed the budget.
        for pair in blocks.iter().collect::<Vec<_>>().windows(2) {
            let (a, b) = (pair[0], pair[1]);
            let merged = (u64::from(a.num_vertices()) + 2) * 8
                + (a.num_edges() + graph.degree(b.vertices.start)) * if graph.is_weighted() { 8 } else { 4 };
            prop_assert!(merged > budget, "block {:?} could have taken vertex {}", a.id, b.vertices.start);
        }
    }

    #[test]
    fn balanced_chunks_partition_and_balance(graph in arb_graph(400, 3000), k in 1u32..12, alpha in 0.0f64..16.0) {
        let blocks = Blocks::balanced(&graph, k, alpha).unwrap();
        prop_assert_eq!(blocks.len(), k as usize);
        check_partition(&graph, &blocks);
        let cost = |b: &Block| alpha * f64::from(b.num_vertices()) + b.num_edges() as f64;
        let total: f64 = blocks.iter().map(cost).sum();
        let heaviest_vertex = (0..graph.num_vertices())
            .map(|v| alpha + graph.degree(v) as f64)
            .fold(0.0, f64::max);
        for block in blocks.iter() {
            prop_assert!(
                cost(block) <= total / f64::from(k) + 2.0 * heaviest_vertex + 1e-9,
                "chunk {:?} costs {} of {} total over {} chunks", block.id, cost(block), total, k
            );
        }
    }
}

#[test]
fn a_huge_vertex_gets_its_own_block() {
    let mut edges = vec![(1u32, 0u32, 1.0f32); 5000];
    edges.push((0, 2, 1.0));
    edges.push((2, 0, 1.0));
    let graph = Graph::from_edges(3, &edges, false, false).unwrap();
    let blocks = Blocks::by_bytes(&graph, 1024).unwrap();
    let ranges: Vec<_> = blocks.iter().map(|b| b.vertices.clone()).collect();
    assert_eq!(ranges, vec![0..1, 1..2, 2..3]);
}

#[test]
fn bad_partition_arguments_are_errors() {
    let graph = Graph::from_edges(4, &[(0, 1, 1.0)], false, false).unwrap();
    assert!(Blocks::by_bytes(&graph, 0).is_err());
    assert!(Blocks::balanced(&graph, 0, 1.0).is_err());
    assert!(Blocks::balanced(&graph, 2, f64::NAN).is_err());
    assert!(Blocks::balanced(&graph, 2, -1.0).is_err());
}
