//! What the tests of every crate share (feature `testing`, for
//! dev-dependencies only): a proptest strategy for random graphs and the
//! repository's small reference graphs in `fixtures/`, among them the LDBC
//! Graphalytics examples with their reference outputs
//! (`fixtures/graphalytics/`).
//!
//! One place for these keeps every engine's property tests drawing from the
//! same kinds of graphs (empty vertices, duplicate edges, dead ends, weights)
//! and every engine's fixture tests reading the same files.

use std::path::PathBuf;

use proptest::prelude::*;

use crate::{ConvertOptions, EdgeFormat, Graph, NoProgress, SortOptions};

/// The shape of the random graphs [`arb_graph`] draws.
#[derive(Clone, Debug)]
pub struct Shape {
    /// Fewest vertices (at least 1).
    pub min_vertices: u32,
    /// Most vertices.
    pub max_vertices: u32,
    /// Fewest edges drawn (before `sinks` drops some).
    pub min_edges: usize,
    /// Most edges drawn.
    pub max_edges: usize,
    /// `Some(u)`: only undirected (`true`) or only directed graphs;
    /// `None`: either.
    pub undirected: Option<bool>,
    /// Leave the top fifth of the vertices without out-edges, so that
    /// directed graphs have dead ends.
    pub sinks: bool,
}

impl Shape {
    /// Graphs of 1 to `max_vertices` vertices and 0 to `max_edges` edges
    /// drawn uniformly (duplicates and self-loops likely), weighted or not,
    /// directed or not.
    pub fn new(max_vertices: u32, max_edges: usize) -> Shape {
        Shape {
            min_vertices: 1,
            max_vertices,
            min_edges: 0,
            max_edges,
            undirected: None,
            sinks: false,
        }
    }

    /// Directed graphs with at least 2 vertices and 1 edge drawn, whose top
    /// fifth of vertices has no out-edges: walks reach dead ends.
    #[must_use]
    pub fn directed_with_dead_ends(self) -> Shape {
        Shape {
            min_vertices: self.min_vertices.max(2),
            min_edges: self.min_edges.max(1),
            undirected: Some(false),
            sinks: true,
            ..self
        }
    }
}

/// Random graphs of `shape`. An undirected graph holds every drawn edge
/// in both directions (a self-loop once). Weights, when the graph is weighted, are
/// positive multiples of 1/8 up to 125, exact in `f32`.
pub fn arb_graph(shape: Shape) -> impl Strategy<Value = Graph> {
    assert!(
        1 <= shape.min_vertices && shape.min_vertices <= shape.max_vertices,
        "a shape needs 1 <= min_vertices <= max_vertices"
    );
    let undirected = match shape.undirected {
        Some(u) => Just(u).boxed(),
        None => any::<bool>().boxed(),
    };
    let edges = shape.min_edges..=shape.max_edges.max(shape.min_edges);
    (
        shape.min_vertices..=shape.max_vertices,
        any::<bool>(),
        undirected,
    )
        .prop_flat_map(move |(n, weighted, undirected)| {
            let sinks = shape.sinks;
            prop::collection::vec((0..n, 0..n, 1u32..=1000), edges.clone()).prop_map(move |drawn| {
                let keep_below = if sinks { n - n / 5 } else { n };
                let edges: Vec<(u32, u32, f32)> = drawn
                    .into_iter()
                    .filter(|&(s, _, _)| s < keep_below)
                    .map(|(s, t, w)| (s, t, w as f32 / 8.0))
                    .collect();
                build(n, edges, weighted, undirected)
            })
        })
}

/// The path of `name` in the repository's `fixtures/` folder.
pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures")).join(name)
}

/// The path of `file` in `fixtures/graphalytics/`: a dataset's
/// `example-directed.e`, `.v` or `.properties`, or a reference output such
/// as `example-undirected-BFS`.
pub fn graphalytics(file: &str) -> PathBuf {
    fixture("graphalytics").join(file)
}

/// The Graphalytics example `name` (`example-directed` or
/// `example-undirected`) converted as `quiver convert NAME.e` does (its
/// properties decide whether it is undirected), loaded into memory with
/// its id map.
pub fn graphalytics_graph(name: &str) -> Graph {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let output = dir.path().join(format!("{name}.qcsr"));
    let options = ConvertOptions {
        format: Some(EdgeFormat::Graphalytics),
        sort: SortOptions {
            sync: false,
            ..SortOptions::default()
        },
        ..ConvertOptions::default()
    };
    crate::convert(
        &graphalytics(&format!("{name}.e")),
        &output,
        &options,
        &NoProgress,
    )
    .unwrap_or_else(|e| panic!("converting the Graphalytics example {name}: {e}"));
    let read = quiver_io::ReadOptions {
        direct: false,
        ..quiver_io::ReadOptions::default()
    };
    Graph::load(&output, &read).expect("the converted example loads")
}

/// Zachary's karate club (`fixtures/karate.txt`: 78 pairs `u v`, u < v):
/// undirected, 34 vertices and 156 directed edges; or directed as listed,
/// `u -> v` for `u < v`, which leaves dead ends.
pub fn karate(undirected: bool) -> Graph {
    let text = include_str!("../../../fixtures/karate.txt");
    let edges: Vec<(u32, u32, f32)> = text
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(|line| {
            let mut ids = line
                .split_whitespace()
                .map(|id| id.parse::<u32>().expect("karate.txt holds vertex ids"));
            let (Some(u), Some(v)) = (ids.next(), ids.next()) else {
                panic!("karate.txt: line {line:?} is not `u v`")
            };
            (u, v, 1.0)
        })
        .collect();
    build(34, edges, false, undirected)
}

/// The graph of `edges`, each also reversed (self-loops excepted) when
/// `undirected`: [`Graph::from_edges`] stores the edges it is given.
/// Panics if an edge names a vertex at or beyond `n`.
pub fn build(n: u32, mut edges: Vec<(u32, u32, f32)>, weighted: bool, undirected: bool) -> Graph {
    if undirected {
        let reversed: Vec<_> = edges
            .iter()
            .filter(|&&(s, t, _)| s != t)
            .map(|&(s, t, w)| (t, s, w))
            .collect();
        edges.extend(reversed);
    }
    Graph::from_edges(n, &edges, weighted, undirected).expect("edges are in range")
}

/// Whether byte `at` of a file with `layout` is one that opening its
/// [`GraphIndex`](crate::GraphIndex) reads: the header page, the offsets
/// and the page table, each with its page padding.
pub fn read_by_index(layout: &crate::format::Layout, at: u64) -> bool {
    let within = |s: crate::format::Section| (s.offset..s.padded_end()).contains(&at);
    at < crate::format::PAGE || within(layout.offsets) || within(layout.pages)
}

/// Sets target `index` of a graph's file (version 2 or 3) to `value`, with
/// every checksum rewritten, so only the edit can be objected to.
pub fn set_target(bytes: &mut [u8], index: usize, value: u32) {
    // The targets section's record: its offset first.
    let at = word(bytes, 56) + 4 * index;
    bytes[at..at + 4].copy_from_slice(&value.to_le_bytes());
    reseal_all(bytes);
}

/// The little-endian `u64` at `at` of a file's header, as an index.
fn word(bytes: &[u8], at: usize) -> usize {
    crate::to_usize(u64::from_le_bytes(
        bytes[at..at + 8].try_into().expect("8 bytes"),
    ))
}

/// Rewrites every checksum of a version 2 or 3 file after an edit of its
/// graph data: each section's (its record in the header names it), each
/// page's, the page table's and the header's.
pub fn reseal_all(bytes: &mut [u8]) {
    let pad = |end: usize| end.div_ceil(4096) * 4096;
    let version = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    // The records of the sections of graph data: offsets, targets, weights
    // and (version 3) the id map; the page table's is at 128.
    let records: &[usize] = if version >= 3 {
        &[32, 56, 80, 152]
    } else {
        &[32, 56, 80]
    };
    let table = word(bytes, 128);
    for &record in records {
        let offset = word(bytes, record);
        let end = pad(offset + word(bytes, record + 8));
        let crc = crc32c::crc32c(&bytes[offset..end]);
        bytes[record + 16..record + 20].copy_from_slice(&crc.to_le_bytes());
        for page in (offset..end).step_by(4096) {
            let slot = table + (page - 4096) / 4096 * 4;
            let crc = crc32c::crc32c(&bytes[page..page + 4096]);
            bytes[slot..slot + 4].copy_from_slice(&crc.to_le_bytes());
        }
    }
    let table_end = pad(table + word(bytes, 136));
    let table_crc = crc32c::crc32c(&bytes[table..table_end]);
    bytes[144..148].copy_from_slice(&table_crc.to_le_bytes());
    reseal(bytes);
}

/// Rewrites the header checksum after editing the header, so only the edit
/// itself can be what the reader objects to.
pub fn reseal(bytes: &mut [u8]) {
    bytes[112..116].fill(0);
    let crc = crc32c::crc32c(&bytes[..4096]);
    bytes[112..116].copy_from_slice(&crc.to_le_bytes());
}
