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
//! A directed graph is counted the same way, on the undirected graph of
//! its pairs of neighbours (its lists merged with their transpose's),
//! each oriented pair carrying which of its two directions the graph
//! holds: a triangle adds to each corner the directed edges between the
//! other two (one or two), where an undirected graph's add two. Counting,
//! vertex by vertex, the edges out of each neighbour that land in `N(v)`
//! took 84 s on the directed Kronecker 20 (16.1M edges) with 2 threads.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;

use crate::engine::Engine;
use crate::frontier::vertex;
use crate::transpose::InEdges;
use crate::Result;

/// Each owned vertex's clustering coefficient.
pub fn lcc(engine: &Engine<'_>) -> Result<Vec<f64>> {
    let oriented = engine.install(|| Oriented::build(engine));
    let n = engine.num_vertices();
    let links: Vec<AtomicU64> = (0..n).map(|_| AtomicU64::new(0)).collect();
    if oriented.directions.is_some() {
        engine.for_each_owned_with(|marks: &mut Marks, v| {
            oriented.count_from::<true>(v, marks, &links);
        });
    } else {
        engine.for_each_owned_with(|marks: &mut Marks, v| {
            oriented.count_from::<false>(v, marks, &links);
        });
    }
    let counts: Vec<u64> = links.into_iter().map(AtomicU64::into_inner).collect();
    let mine = engine.sum_owned(&counts)?;
    Ok(engine
        .owned()
        .zip(mine)
        .map(|(v, links)| coefficient(links, u64::from(oriented.neighbours[v as usize])))
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
    /// On a directed graph, beside `targets`: which directions of each
    /// oriented pair the graph holds (bit 0 from the lower end to the
    /// higher, bit 1 back). `None` on an undirected graph, which holds
    /// both, always.
    directions: Option<Vec<u8>>,
    /// Each vertex's distinct neighbours other than itself, all of them:
    /// the `d` of its coefficient.
    neighbours: Vec<u32>,
}

/// One block of vertices' part of [`Oriented`], as a task builds it.
#[derive(Default)]
struct Part {
    lengths: Vec<u64>,
    targets: Vec<u32>,
    directions: Vec<u8>,
    neighbours: Vec<u32>,
}

/// Vertices whose oriented lists one task builds.
const BUILD_BLOCK: usize = 4096;

impl Oriented {
    /// From the graph's sorted lists (and, on a directed graph, their
    /// transpose's), in parallel (run it in the engine's pool): one pass,
    /// each block of vertices building its part.
    fn build(engine: &Engine<'_>) -> Oriented {
        let graph = engine.graph();
        let n = engine.num_vertices() as usize;
        let incoming = (!graph.is_undirected()).then(|| InEdges::of(graph));
        let inc = |v: u32| {
            incoming
                .as_ref()
                .map_or(&[][..], |incoming| incoming.sources(v))
        };
        // The order of (degree, id): the degree as stored, in- and
        // out-edges, parallel edges and all (any total order finds each
        // triangle once), read from 4 bytes a vertex, half the offsets'
        // cache lines; a degree past u32 saturates, and the ids still
        // order its vertices.
        let degrees: Vec<u32> = (0..n)
            .into_par_iter()
            .with_min_len(BUILD_BLOCK)
            .map(|v| {
                let v = vertex(v);
                let degree = graph.degree(v) + inc(v).len() as u64;
                u32::try_from(degree).unwrap_or(u32::MAX)
            })
            .collect();
        let above = |u: u32, v: u32| (degrees[u as usize], u) > (degrees[v as usize], v);
        let parts: Vec<Part> = (0..n.div_ceil(BUILD_BLOCK))
            .into_par_iter()
            .map(|block| {
                let vertices = block * BUILD_BLOCK..((block + 1) * BUILD_BLOCK).min(n);
                let mut part = Part::default();
                for v in vertices.map(vertex) {
                    let (before, mut neighbours) = (part.targets.len(), 0);
                    for (u, directions) in merged(graph.neighbors(v), inc(v)) {
                        if u == v {
                            continue;
                        }
                        neighbours += 1;
                        if above(u, v) {
                            part.targets.push(u);
                            if incoming.is_some() {
                                part.directions.push(directions);
                            }
                        }
                    }
                    part.lengths.push((part.targets.len() - before) as u64);
                    part.neighbours.push(neighbours);
                }
                part
            })
            .collect();
        drop(incoming);
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
        let directed = !graph.is_undirected();
        let mut targets = Vec::with_capacity(index(end));
        let mut directions = Vec::with_capacity(if directed { index(end) } else { 0 });
        for part in parts {
            targets.extend_from_slice(&part.targets);
            directions.extend_from_slice(&part.directions);
        }
        Oriented {
            offsets,
            targets,
            directions: directed.then_some(directions),
            neighbours,
        }
    }

    fn list(&self, v: u32) -> &[u32] {
        let range: Range<usize> =
            index(self.offsets[v as usize])..index(self.offsets[v as usize + 1]);
        &self.targets[range]
    }

    /// The directed edges of the `e`-th oriented pair: 1 or 2 on a
    /// directed graph, 2 on an undirected one.
    #[inline]
    fn links<const DIRECTED: bool>(&self, e: usize) -> u64 {
        match &self.directions {
            Some(directions) if DIRECTED => u64::from(directions[e].count_ones()),
            _ => 2,
        }
    }

    /// Finds the triangles whose lowest corner is `v` (its higher
    /// neighbours `u` and `w`, `w` above `u` and in both their lists) and
    /// adds to each corner's count the directed edges between the other
    /// two. `marks` holds `v`'s list (and its pairs' directions) while
    /// `v`'s partners' lists are read against it.
    fn count_from<const DIRECTED: bool>(&self, v: u32, marks: &mut Marks, links: &[AtomicU64]) {
        let first = index(self.offsets[v as usize]);
        let mine = self.list(v);
        if mine.len() < 2 {
            return;
        }
        marks.set::<DIRECTED>(
            mine,
            |i| self.links::<DIRECTED>(first + i) == 2,
            links.len(),
        );
        let mut at_v = 0;
        for (i, &u) in mine.iter().enumerate() {
            let vu = self.links::<DIRECTED>(first + i);
            let from_u = index(self.offsets[u as usize]);
            let mut at_u = 0;
            for (j, &w) in self.list(u).iter().enumerate() {
                if let Some(vw) = marks.links::<DIRECTED>(w) {
                    links[w as usize].fetch_add(vu, Ordering::Relaxed);
                    at_u += vw;
                    at_v += self.links::<DIRECTED>(from_u + j);
                }
            }
            if at_u > 0 {
                links[u as usize].fetch_add(at_u, Ordering::Relaxed);
            }
        }
        marks.clear::<DIRECTED>(mine);
        if at_v > 0 {
            links[v as usize].fetch_add(at_v, Ordering::Relaxed);
        }
    }
}

/// The distinct vertices of two ascending lists, ascending, each with
/// which of them holds it (bit 0: `out`, bit 1: `inc`).
fn merged<'a>(out: &'a [u32], inc: &'a [u32]) -> impl Iterator<Item = (u32, u8)> + 'a {
    let (mut i, mut j) = (0, 0);
    std::iter::from_fn(move || {
        let next = match (out.get(i), inc.get(j)) {
            (None, None) => return None,
            (Some(&a), None) => a,
            (None, Some(&b)) => b,
            (Some(&a), Some(&b)) => a.min(b),
        };
        let mut holders = 0;
        while out.get(i) == Some(&next) {
            i += 1;
            holders |= 1;
        }
        while inc.get(j) == Some(&next) {
            j += 1;
            holders |= 2;
        }
        Some((next, holders))
    })
}

/// A worker's set of vertices, one bit a vertex of the graph (128 KiB for
/// a million), and on a directed graph a second bit for those joined to
/// the set's owner both ways (on an undirected one every member is): a
/// membership test is one load from the CPU's cache, where merging two
/// sorted lists branched on every element.
#[derive(Default)]
struct Marks {
    members: Vec<u64>,
    both_ways: Vec<u64>,
}

impl Marks {
    /// Adds `list`'s vertices, of a graph of `n`, the `i`-th joined both
    /// ways if `both_ways(i)` (on a `DIRECTED` graph; all are otherwise).
    fn set<const DIRECTED: bool>(
        &mut self,
        list: &[u32],
        both_ways: impl Fn(usize) -> bool,
        n: usize,
    ) {
        if self.members.is_empty() {
            self.members = vec![0; n.div_ceil(64)];
            if DIRECTED {
                self.both_ways = vec![0; n.div_ceil(64)];
            }
        }
        for (i, &w) in list.iter().enumerate() {
            self.members[w as usize / 64] |= 1 << (w % 64);
            if DIRECTED {
                self.both_ways[w as usize / 64] |= u64::from(both_ways(i)) << (w % 64);
            }
        }
    }

    /// The directed edges joining `w` to the set's owner (1 or 2), if it
    /// is a member.
    #[inline]
    fn links<const DIRECTED: bool>(&self, w: u32) -> Option<u64> {
        let (word, bit) = (w as usize / 64, w % 64);
        let member = self.members[word] >> bit & 1 != 0;
        member.then(|| {
            if DIRECTED {
                1 + (self.both_ways[word] >> bit & 1)
            } else {
                2
            }
        })
    }

    /// Empties the set of `list`'s vertices, the last added.
    fn clear<const DIRECTED: bool>(&mut self, list: &[u32]) {
        for &w in list {
            self.members[w as usize / 64] = 0;
            if DIRECTED {
                self.both_ways[w as usize / 64] = 0;
            }
        }
    }
}

fn index(offset: u64) -> usize {
    usize::try_from(offset).expect("an oriented graph held in memory fits usize")
}
