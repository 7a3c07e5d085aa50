//! What one node holds of the graph: the edges of the vertices it owns, in
//! both layouts a superstep needs.
//!
//! - `out`: the owned vertices' edges, source by source (CSR), for pushing
//!   from active owned vertices. On the side `Out` these are the graph's
//!   own arrays, borrowed; on the side `Both` of a directed graph every
//!   owned vertex also gets its in-edges (the graph taken as undirected),
//!   merged into one sorted list.
//! - in-edges: the edges into each owned vertex from every source, for
//!   pulling into the masters. A symmetric graph, or the side `Both`,
//!   needs no second layout: a vertex's in-edges are its own list. A
//!   directed graph pulled along out-edges gets the transpose of the edges
//!   into the owned vertices, gathered by two passes over all edges, unless
//!   its caller only pushes (RGraph's only mode, which keeps no CSC).
//!
//! On a symmetric graph a node reads only its own vertices' lists: a pull
//! gathers from remote sources through the mirror states their owners sent
//! (see `crate::engine`), not from their lists. A directed graph's
//! transpose (for either side) is built from every list of the file; a
//! node of several then releases the lists it does not own
//! (`Graph::release_lists`).
//!
//! Each node's edges are its own vertices' out-edges, so the sum over nodes
//! is every edge exactly once (twice on the side `Both`).

use std::borrow::Cow;
use std::ops::Range;

use quiver_csr::Graph;

use crate::program::{Edges, Side};

/// Sources a transpose reads between two releases of what it read
/// (64 Ki vertices: on Kronecker 20, about 2 MB of lists).
const TRANSPOSE_WINDOW: u32 = 1 << 16;

/// One node's edges.
#[derive(Debug)]
pub struct LocalGraph<'g> {
    /// The whole graph's arrays, looked up once (each accessor of `Graph`
    /// checks its storage).
    offsets: &'g [u64],
    targets: &'g [u32],
    weights: Option<&'g [f32]>,
    owned: Range<u32>,
    out: Csr<'g>,
    /// The owned vertices' in-edges when they are not their `out` lists.
    transposed: Option<Csr<'static>>,
    /// Edges of `out`.
    edges: u64,
}

/// Edges of the owned vertices: `targets[offsets[i]..offsets[i + 1]]` are
/// those of vertex `owned.start + i`, ascending. Borrowed offsets may
/// start above 0 (they index the graph's whole target array).
#[derive(Debug)]
struct Csr<'g> {
    offsets: Cow<'g, [u64]>,
    targets: Cow<'g, [u32]>,
    weights: Option<Cow<'g, [f32]>>,
}

impl<'g> LocalGraph<'g> {
    /// The edges of the vertices in `owned` on `side`, and on a directed
    /// graph's side `Out` their in-edges only if `pulls` (the caller may
    /// pull; a caller that only pushes holds no transpose). With
    /// `give_back` (a node of several), the offsets and lists of the
    /// vertices it does not own leave the process once read
    /// (`Graph::release_lists`): window by window while a directed graph
    /// is transposed (which reads them all), or all at once (the partition
    /// read every offset).
    pub fn new(
        graph: &'g Graph,
        owned: Range<u32>,
        side: Side,
        pulls: bool,
        give_back: bool,
    ) -> LocalGraph<'g> {
        // Releases the vertices of `window` that this node does not own.
        let release = |window: Range<u32>| {
            if give_back {
                graph.release_lists(window.start..window.end.min(owned.start));
                graph.release_lists(window.start.max(owned.end)..window.end);
            }
        };
        let borrowed = || {
            let (start, end) = (owned.start as usize, owned.end as usize);
            Csr {
                offsets: Cow::Borrowed(&graph.offsets()[start..=end]),
                targets: Cow::Borrowed(graph.targets()),
                weights: graph.weights().map(Cow::Borrowed),
            }
        };
        let transpose = || Csr::transposed(graph, owned.clone(), TRANSPOSE_WINDOW, &release);
        let (out, transposed) = match side {
            Side::Both if !graph.is_undirected() => (Csr::merged(&borrowed(), &transpose()), None),
            Side::Out if pulls && !graph.is_undirected() => (borrowed(), Some(transpose())),
            _ => {
                release(0..graph.num_vertices());
                (borrowed(), None)
            }
        };
        let edges = out.offsets[out.offsets.len() - 1] - out.offsets[0];
        LocalGraph {
            offsets: graph.offsets(),
            targets: graph.targets(),
            weights: graph.weights(),
            owned,
            out,
            transposed,
            edges,
        }
    }

    /// The vertices this node owns.
    pub fn owned(&self) -> Range<u32> {
        self.owned.clone()
    }

    /// Whether this node owns `v`.
    #[inline]
    pub fn owns(&self, v: u32) -> bool {
        self.owned.contains(&v)
    }

    /// Number of edges held (of the `out` layout).
    pub fn num_edges(&self) -> u64 {
        self.edges
    }

    /// Edges of owned vertex `v` to push along, ascending.
    #[inline]
    pub fn out_edges(&self, v: u32) -> Edges<'_> {
        self.out.edges(v - self.owned.start)
    }

    /// Edges into owned vertex `v` from every source, ascending: what a
    /// pull gathers (not on a directed graph held for pushes only).
    /// Always inlined, and a symmetric graph's lists read
    /// from the graph's arrays without the layouts' `Cow`s: it runs once
    /// per vertex of every pull (BFS on Kronecker 20, one thread: 6% more
    /// instructions through `out`).
    #[inline(always)]
    pub fn in_edges(&self, v: u32) -> Edges<'_> {
        match &self.transposed {
            None if self.migratable() => self.any_out_edges(v),
            None => self.out.edges(v - self.owned.start),
            Some(transposed) => transposed.edges(v - self.owned.start),
        }
    }

    /// Whether this node's edges are the graph's own out-edges (not the
    /// graph taken as undirected), so that any node can find any vertex's
    /// edges in the graph file: what task migration needs.
    pub fn migratable(&self) -> bool {
        matches!(self.out.targets, Cow::Borrowed(_))
    }

    /// The out-edges of any vertex of the graph, from the mapped file.
    #[inline]
    pub fn any_out_edges(&self, v: u32) -> Edges<'_> {
        let range = index(self.offsets[v as usize])..index(self.offsets[v as usize + 1]);
        Edges {
            vertices: &self.targets[range.clone()],
            weights: self.weights.map(|w| &w[range]),
        }
    }

    /// Out-degree of any vertex `v` in the whole graph (as stored).
    #[inline]
    pub fn graph_degree(&self, v: u32) -> u64 {
        self.offsets[v as usize + 1] - self.offsets[v as usize]
    }

    /// Out-degree of owned vertex `v` on this side.
    #[inline]
    pub fn degree(&self, v: u32) -> u64 {
        let i = (v - self.owned.start) as usize;
        self.out.offsets[i + 1] - self.out.offsets[i]
    }

    /// Bytes this node holds of its own (borrowed arrays of a mapped graph
    /// are counted at their size too: their pages are touched).
    pub fn bytes(&self) -> u64 {
        self.out.bytes() + self.transposed.as_ref().map_or(0, Csr::bytes)
    }
}

impl Csr<'_> {
    /// The edges of the `i`-th owned vertex.
    #[inline]
    fn edges(&self, i: u32) -> Edges<'_> {
        let i = i as usize;
        let range = index(self.offsets[i])..index(self.offsets[i + 1]);
        Edges {
            vertices: &self.targets[range.clone()],
            weights: self.weights.as_ref().map(|w| &w[range]),
        }
    }

    /// Bytes of its offsets and of the edges they span.
    fn bytes(&self) -> u64 {
        let edges = self.offsets[self.offsets.len() - 1] - self.offsets[0];
        let per_edge = 4 + 4 * u64::from(self.weights.is_some());
        (self.offsets.len() as u64) * 8 + edges * per_edge
    }
}

impl Csr<'static> {
    /// The edges into each vertex of `owned` from every source of `graph`,
    /// by counting sort: one pass over all targets counts, one over every
    /// list fills (sources come out ascending because it goes in source
    /// order).
    fn transposed(
        graph: &Graph,
        owned: Range<u32>,
        window: u32,
        release: &dyn Fn(Range<u32>),
    ) -> Csr<'static> {
        let len = (owned.end - owned.start) as usize;
        let n = graph.num_vertices();
        // Both passes read the sources `window` at a time, handing each
        // window to `release` once read.
        let windows = (0..n)
            .step_by(window as usize)
            .map(|start| start..n.min(start.saturating_add(window)));
        let mut offsets = vec![0u64; len + 1];
        for window in windows.clone() {
            let (from, to) = (
                graph.offsets()[window.start as usize],
                graph.offsets()[window.end as usize],
            );
            for &t in &graph.targets()[index(from)..index(to)] {
                if owned.contains(&t) {
                    offsets[(t - owned.start) as usize + 1] += 1;
                }
            }
            release(window);
        }
        for i in 0..len {
            offsets[i + 1] += offsets[i];
        }
        let total = index(offsets[len]);
        let mut fill: Vec<u64> = offsets[..len].to_vec();
        let mut sources = vec![0u32; total];
        let mut weights = graph.weights().map(|_| vec![0f32; total]);
        for window in windows {
            for u in window.clone() {
                let ws = graph.edge_weights(u);
                for (e, &t) in graph.neighbors(u).iter().enumerate() {
                    if owned.contains(&t) {
                        let slot = &mut fill[(t - owned.start) as usize];
                        sources[index(*slot)] = u;
                        if let (Some(all), Some(w)) = (weights.as_mut(), ws) {
                            all[index(*slot)] = w[e];
                        }
                        *slot += 1;
                    }
                }
            }
            release(window);
        }
        Csr {
            offsets: Cow::Owned(offsets),
            targets: Cow::Owned(sources),
            weights: weights.map(Cow::Owned),
        }
    }

    /// Each owned vertex's lists of `a` and `b` merged into one ascending
    /// list (with their weights): out- and in-edges, the graph taken as
    /// undirected.
    fn merged(a: &Csr<'_>, b: &Csr<'_>) -> Csr<'static> {
        let len = a.offsets.len() - 1;
        let mut offsets = Vec::with_capacity(len + 1);
        offsets.push(0u64);
        let total = index(a.offsets[len] - a.offsets[0] + b.offsets[len] - b.offsets[0]);
        let mut targets = Vec::with_capacity(total);
        let weighted = a.weights.is_some();
        let mut weights = Vec::with_capacity(if weighted { total } else { 0 });
        for i in 0..len {
            let i = u32::try_from(i).expect("vertex indices fit u32");
            let (x, y) = (a.edges(i), b.edges(i));
            let (mut j, mut k) = (0, 0);
            while j < x.vertices.len() || k < y.vertices.len() {
                let from_x = k == y.vertices.len()
                    || (j < x.vertices.len() && x.vertices[j] <= y.vertices[k]);
                let (edges, at) = if from_x { (&x, &mut j) } else { (&y, &mut k) };
                targets.push(edges.vertices[*at]);
                if weighted {
                    weights.push(edges.weight(*at));
                }
                *at += 1;
            }
            offsets.push(targets.len() as u64);
        }
        Csr {
            offsets: Cow::Owned(offsets),
            targets: Cow::Owned(targets),
            weights: weighted.then_some(Cow::Owned(weights)),
        }
    }
}

/// An edge offset as an index: edge counts fit memory, so `usize`.
fn index(offset: u64) -> usize {
    usize::try_from(offset).expect("edge offsets of an in-memory graph fit usize")
}

#[cfg(test)]
mod tests {
    use quiver_csr::Graph;

    use super::{Csr, LocalGraph};
    use crate::program::Side;

    /// A directed weighted graph with a self-loop, a repeated edge and an
    /// isolated vertex.
    fn graph() -> Graph {
        let edges = [
            (0, 1, 1.0),
            (0, 4, 2.0),
            (1, 1, 3.0),
            (2, 0, 4.0),
            (2, 4, 5.0),
            (2, 4, 6.0),
            (3, 2, 7.0),
            (4, 0, 8.0),
            (4, 2, 9.0),
        ];
        Graph::from_edges(6, &edges, true, false).unwrap()
    }

    /// (neighbour, weight) of every edge into (`incoming`) or out of `v`,
    /// sorted: the reference.
    fn reference(graph: &Graph, v: u32, out: bool, incoming: bool) -> Vec<(u32, u32)> {
        let mut edges = Vec::new();
        for u in 0..graph.num_vertices() {
            let weights = graph.edge_weights(u).unwrap();
            for (i, &t) in graph.neighbors(u).iter().enumerate() {
                let w = weights[i].to_bits();
                if out && u == v {
                    edges.push((t, w));
                }
                if incoming && t == v {
                    edges.push((u, w));
                }
            }
        }
        edges.sort_unstable();
        edges
    }

    fn listed(edges: crate::program::Edges<'_>) -> Vec<(u32, u32)> {
        let weights = edges.weights.unwrap();
        let listed: Vec<(u32, u32)> = edges
            .vertices
            .iter()
            .zip(weights)
            .map(|(&t, w)| (t, w.to_bits()))
            .collect();
        assert!(
            listed.windows(2).all(|p| p[0].0 <= p[1].0),
            "unsorted: {listed:?}"
        );
        listed
    }

    #[test]
    fn a_transpose_read_in_windows_is_the_same_and_releases_every_source_once_a_pass() {
        let graph = graph();
        let n = graph.num_vertices();
        for (start, end) in [(0, 7), (2, 5), (6, 7)] {
            let whole = Csr::transposed(&graph, start..end, n, &|_| {});
            for window in [1, 2, 3, 5] {
                let released = std::cell::RefCell::new(Vec::new());
                let windowed = Csr::transposed(&graph, start..end, window, &|w| {
                    released.borrow_mut().extend(w);
                });
                for i in 0..end - start {
                    assert_eq!(
                        listed(windowed.edges(i)),
                        listed(whole.edges(i)),
                        "{window}"
                    );
                }
                let once: Vec<u32> = (0..n).collect();
                assert_eq!(
                    released.into_inner(),
                    [once.clone(), once].concat(),
                    "{window}"
                );
            }
        }
    }

    #[test]
    fn every_owned_range_holds_the_reference_edges_in_order() {
        let graph = graph();
        for start in 0..=6 {
            for end in start..=6 {
                let out = LocalGraph::new(&graph, start..end, Side::Out, true, false);
                let both = LocalGraph::new(&graph, start..end, Side::Both, false, false);
                let pushed_only = LocalGraph::new(&graph, start..end, Side::Out, false, false);
                assert_eq!(
                    pushed_only.bytes(),
                    out.bytes() - out.transposed.as_ref().unwrap().bytes()
                );
                for v in start..end {
                    let own = listed(both.out_edges(v));
                    assert_eq!(listed(both.in_edges(v)), own, "both pulls its own list");
                    let mut merged = own;
                    merged.sort_unstable();
                    assert_eq!(merged, reference(&graph, v, true, true), "both, {v}");
                    assert_eq!(listed(pushed_only.out_edges(v)), listed(out.out_edges(v)));
                    let mut pushed = listed(out.out_edges(v));
                    pushed.sort_unstable();
                    assert_eq!(pushed, reference(&graph, v, true, false), "out, {v}");
                    let mut pulled = listed(out.in_edges(v));
                    pulled.sort_unstable();
                    assert_eq!(pulled, reference(&graph, v, false, true), "in, {v}");
                }
                let held: u64 = (start..end).map(|v| out.degree(v)).sum();
                assert_eq!(out.num_edges(), held);
            }
        }
    }
}
