//! The local clustering coefficient, as Graphalytics defines it: for a
//! vertex `v` with the set `N(v)` of its distinct neighbours other than
//! itself (in- and out-, on a directed graph), the directed edges between
//! two members of `N(v)` over `|N(v)| (|N(v)| - 1)`; 0 below two
//! neighbours. Self-loops and parallel edges add no neighbour and no edge.
//!
//! On an undirected graph that is `2 t(v) / (d (d - 1))`, with `t(v)` the
//! triangles through `v`, and the triangles are counted once each, as
//! GAPBS's `tc` counts them: every edge is oriented from the lower of its
//! ends to the higher in the order of (degree, id), so a triangle is found
//! only from its lowest corner `v`, as a neighbour `w` that its two higher
//! corners' oriented lists share, and adds one to each of its three
//! corners. Orienting towards higher degrees keeps the lists a hub is
//! intersected with short. Each node finds the triangles whose lowest
//! corner it owns, and the nodes sum their counts (an all-gather of one
//! count a vertex). Counting each triangle from all three corners, and
//! each from both directions, as the per-vertex definition reads, took
//! 106 s on Kronecker 20 with 2 threads against GAPBS's 8 s.
//!
//! A directed graph keeps the definition's own count, vertex by vertex:
//! the edges out of each neighbour that land in `N(v)`.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;

use crate::engine::Engine;
use crate::frontier::vertex;
use crate::Result;

/// Each owned vertex's clustering coefficient.
pub fn lcc(engine: &Engine<'_>) -> Result<Vec<f64>> {
    if !engine.graph().is_undirected() {
        return Ok(directed(engine));
    }
    let oriented = engine.install(|| Oriented::build(engine));
    let n = engine.num_vertices();
    let triangles: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
    engine.for_each_owned_with(|marks: &mut Marks, v| oriented.count_from(v, marks, &triangles));
    let counts: Vec<u64> = triangles.into_iter().map(AtomicU64::into_inner).collect();
    let mine = engine.sum_owned(&counts)?;
    Ok(engine
        .owned()
        .zip(mine)
        .map(|(v, t)| coefficient(2 * t, u64::from(oriented.neighbours[v as usize])))
        .collect())
}

/// `links` edges among `d` neighbours, over the `d (d - 1)` there could be.
#[allow(clippy::cast_precision_loss)] // Counts far below 2^52.
fn coefficient(links: u64, d: u64) -> f64 {
    if d < 2 {
        0.0
    } else {
        links as f64 / (d * (d - 1)) as f64
    }
}

/// Each vertex's distinct neighbours above it in the order of (degree, id),
/// each list ascending by id: the undirected graph with every edge once,
/// oriented from its lower end.
struct Oriented {
    offsets: Vec<u64>,
    targets: Vec<u32>,
    /// Each vertex's distinct neighbours other than itself, all of them:
    /// the `d` of its coefficient.
    neighbours: Vec<u32>,
}

/// One block of vertices' part of [`Oriented`], as a task builds it.
#[derive(Default)]
struct Part {
    lengths: Vec<u64>,
    targets: Vec<u32>,
    neighbours: Vec<u32>,
}

/// Vertices whose oriented lists one task builds.
const BUILD_BLOCK: usize = 4096;

impl Oriented {
    /// From the graph's sorted lists, in parallel (run it in the engine's
    /// pool): one pass, each block of vertices building its part.
    fn build(engine: &Engine<'_>) -> Oriented {
        let graph = engine.graph();
        let n = engine.num_vertices() as usize;
        // The order of (degree, id): the degree as stored, parallel edges
        // and all (any total order finds each triangle once), read from
        // 4 bytes a vertex, half the offsets' cache lines; a degree past
        // u32 saturates, and the ids still order its vertices.
        let degrees: Vec<u32> = (0..n)
            .into_par_iter()
            .with_min_len(BUILD_BLOCK)
            .map(|v| u32::try_from(graph.degree(vertex(v))).unwrap_or(u32::MAX))
            .collect();
        let above = |u: u32, v: u32| (degrees[u as usize], u) > (degrees[v as usize], v);
        let parts: Vec<Part> = (0..n.div_ceil(BUILD_BLOCK))
            .into_par_iter()
            .map(|block| {
                let vertices = block * BUILD_BLOCK..((block + 1) * BUILD_BLOCK).min(n);
                let mut part = Part::default();
                for v in vertices.map(vertex) {
                    let (before, mut neighbours) = (part.targets.len(), 0);
                    let mut last = None;
                    for &u in graph.neighbors(v) {
                        if last != Some(u) && u != v {
                            neighbours += 1;
                            if above(u, v) {
                                part.targets.push(u);
                            }
                        }
                        last = Some(u);
                    }
                    part.lengths.push((part.targets.len() - before) as u64);
                    part.neighbours.push(neighbours);
                }
                part
            })
            .collect();
        let mut offsets = Vec::with_capacity(n + 1);
        offsets.push(0);
        let mut end = 0;
        for length in parts.iter().flat_map(|part| &part.lengths) {
            end += length;
            offsets.push(end);
        }
        let mut neighbours = Vec::with_capacity(n);
        neighbours.extend(parts.iter().flat_map(|part| &part.neighbours));
        // Each part is freed once copied: the lists are held about once.
        let mut targets = Vec::with_capacity(index(end));
        for part in parts {
            targets.extend_from_slice(&part.targets);
        }
        Oriented {
            offsets,
            targets,
            neighbours,
        }
    }

    fn list(&self, v: u32) -> &[u32] {
        let range: Range<usize> =
            index(self.offsets[v as usize])..index(self.offsets[v as usize + 1]);
        &self.targets[range]
    }

    /// Finds the triangles whose lowest corner is `v` (its higher
    /// neighbours `u` and `w`, `w` above `u` and in both their lists) and
    /// adds each to its three corners' counts. `marks` holds `v`'s list
    /// while `v`'s partners' lists are read against it.
    fn count_from(&self, v: u32, marks: &mut Marks, triangles: &[AtomicU64]) {
        let mine = self.list(v);
        if mine.len() < 2 {
            return;
        }
        marks.set(mine, triangles.len());
        let mut at_v = 0;
        for &u in mine {
            let mut at_u = 0;
            for &w in self.list(u) {
                if marks.contains(w) {
                    triangles[w as usize].fetch_add(1, Ordering::Relaxed);
                    at_u += 1;
                }
            }
            if at_u > 0 {
                triangles[u as usize].fetch_add(at_u, Ordering::Relaxed);
                at_v += at_u;
            }
        }
        marks.clear(mine);
        if at_v > 0 {
            triangles[v as usize].fetch_add(at_v, Ordering::Relaxed);
        }
    }
}

/// A worker's set of vertices, one bit a vertex of the graph (128 KiB for
/// a million): a membership test is one load from the CPU's cache, where
/// merging two sorted lists branched on every element.
#[derive(Default)]
struct Marks(Vec<u64>);

impl Marks {
    /// Adds `list`'s vertices, of a graph of `n`.
    fn set(&mut self, list: &[u32], n: usize) {
        if self.0.is_empty() {
            self.0 = vec![0; n.div_ceil(64)];
        }
        for &w in list {
            self.0[w as usize / 64] |= 1 << (w % 64);
        }
    }

    fn contains(&self, w: u32) -> bool {
        self.0[w as usize / 64] >> (w % 64) & 1 != 0
    }

    /// Empties the set of `list`'s vertices, the last added.
    fn clear(&mut self, list: &[u32]) {
        for &w in list {
            self.0[w as usize / 64] = 0;
        }
    }
}

fn index(offset: u64) -> usize {
    usize::try_from(offset).expect("an oriented graph held in memory fits usize")
}

/// The definition's count on a directed graph: for each owned `v`, the
/// edges out of each member of `N(v)` that land in `N(v)`.
fn directed(engine: &Engine<'_>) -> Vec<f64> {
    let owned = engine.owned();
    let local = engine.local();
    let distinct = engine.graph().has_distinct_targets();
    let lcc: Vec<AtomicU64> = owned.clone().map(|_| AtomicU64::new(0)).collect();
    engine.process_vertices(None, |v| {
        // N(v): in- and out-neighbours, distinct, v itself aside.
        let mut neighbours = local.out_edges(v).vertices.to_vec();
        neighbours.sort_unstable();
        neighbours.dedup();
        neighbours.retain(|&u| u != v);
        let d = neighbours.len() as u64;
        if d < 2 {
            return 0u64;
        }
        let mut links = 0u64;
        let mut scratch = Vec::new();
        for &u in &neighbours {
            let mut out = local.any_out_edges(u).vertices;
            if !distinct {
                scratch.clear();
                scratch.extend_from_slice(out);
                scratch.dedup();
                out = &scratch;
            }
            // |out(u) ∩ N(v)|: walk the shorter list, search the longer, so
            // a hub costs its small partners' sizes, not its own each time.
            let (short, long) = if out.len() <= neighbours.len() {
                (out, &neighbours[..])
            } else {
                (&neighbours[..], out)
            };
            // An edge u-w between two neighbours, u's self-loop aside.
            links += short
                .iter()
                .filter(|&&w| w != u && long.binary_search(&w).is_ok())
                .count() as u64;
        }
        lcc[(v - owned.start) as usize].store(coefficient(links, d).to_bits(), Ordering::Relaxed);
        0u64
    });
    lcc.into_iter()
        .map(|c| f64::from_bits(c.into_inner()))
        .collect()
}
