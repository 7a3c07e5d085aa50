//! What one node holds of the graph: the edges of the vertices it owns, in
//! the layouts its algorithm reads.
//!
//! - `out`: the owned vertices' edges, source by source (CSR), for pushing
//!   from active owned vertices. On the side `Out` these are the graph's
//!   own arrays, borrowed; on the side `Both` of a directed graph every
//!   owned vertex also gets its in-edges (the graph taken as undirected),
//!   merged into one sorted list of the node's own.
//! - in-edges: the edges into each owned vertex from every source, for
//!   pulling into the masters. A symmetric graph, or the side `Both`,
//!   needs no second layout: a vertex's in-edges are its own list. A
//!   directed graph pulled along out-edges gets the transpose of the edges
//!   into the owned vertices, gathered by two passes over all edges, unless
//!   its caller only pushes (RGraph's only mode, which keeps no CSC).
//! - readers: on a node of several that may pull, which nodes need each
//!   owned vertex's state, noted once from its list.
//!
//! On a symmetric graph a node reads only its own vertices' lists: a pull
//! gathers from remote sources through the mirror states their owners sent
//! (see `crate::engine`), not from their lists. A directed graph's
//! transpose (for either side) is built from every list of the file; a
//! node of several then releases the lists it does not own
//! (`Graph::release_lists`), window by window as it reads them. Its own
//! lists leave memory the same way when it will not read them again: when
//! merged into a copy, or when its algorithm only pulls (PageRank), which
//! reads their offsets (degrees) and no edge. Directed Kronecker 20 on 2
//! nodes, the largest node's peak resident memory: PageRank 102 MB to 72
//! MB, WCC 157 MB to 103 MB.
//!
//! Each node's edges are its own vertices' out-edges, so the sum over nodes
//! is every edge exactly once (twice on the side `Both`).

use std::borrow::Cow;
use std::ops::Range;

use quiver_csr::Graph;

use crate::partition::Partition;
use crate::program::{Edges, Flow, Side};

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
    /// Whether the node reads its own lists from the file after load (a
    /// node that only pulls reads their offsets, for degrees, and not
    /// their edges).
    reads_own_lists: bool,
    /// The owned vertices' in-edges when they are not their `out` lists.
    transposed: Option<Csr<'static>>,
    /// Which nodes need each owned vertex's state when pulls read it (on a
    /// node of several that may pull).
    readers: Option<Readers>,
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
    /// The edges of the vertices in `owned` on `side`, in the layouts
    /// `flow` reads: on a directed graph's side `Out`, the transpose
    /// unless the caller only pushes, and the out-lists kept resident
    /// unless it only pulls. A node of several (given the job's
    /// `partition`) notes which nodes need each owned vertex's state when
    /// it may pull, and gives back the offsets and lists of the vertices
    /// it does not own once read (`Graph::release_lists`): window by
    /// window while a directed graph is transposed (which reads them
    /// all), or all at once (the partition read every offset). Lists of
    /// its own that it copied (merged with the transpose) or will not read
    /// (pulls only) leave memory too (`Graph::release_targets`).
    pub fn new(
        graph: &'g Graph,
        owned: Range<u32>,
        side: Side,
        flow: Flow,
        partition: Option<&Partition>,
    ) -> LocalGraph<'g> {
        let several = partition.is_some_and(|p| p.len() > 1);
        let directed = !graph.is_undirected();
        // After load, a node reads its own lists from the file unless it
        // holds a copy (merged) or only pulls (reading their offsets, for
        // degrees, and not their edges).
        let reads_own_lists = !directed || (side == Side::Out && flow != Flow::Pull);
        // Releases what this node reads no more of the vertices of
        // `window`: the lists of those it does not own, and its own edges
        // unless it reads them after load.
        let release = |window: Range<u32>| {
            if several {
                graph.release_lists(window.start..window.end.min(owned.start));
                graph.release_lists(window.start.max(owned.end)..window.end);
            }
            if !reads_own_lists {
                graph.release_targets(window.start.max(owned.start)..window.end.min(owned.end));
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
        let gather = |own| Csr::gathered(graph, owned.clone(), own, TRANSPOSE_WINDOW, &release);
        let readers = |out: &Csr<'_>| match partition {
            Some(partition) if several && flow != Flow::Push => Some(Readers::of(out, partition)),
            _ => None,
        };
        let (out, transposed, readers) = if directed && side == Side::Both {
            let merged = gather(true);
            let readers = readers(&merged);
            (merged, None, readers)
        } else {
            // Readers come from the owned lists before a transpose, which
            // may give them back, reads them.
            let out = borrowed();
            let readers = readers(&out);
            let transposed = (directed && flow != Flow::Push).then(|| gather(false));
            if transposed.is_none() {
                release(0..graph.num_vertices());
            }
            (out, transposed, readers)
        };
        let edges = out.offsets[out.offsets.len() - 1] - out.offsets[0];
        LocalGraph {
            offsets: graph.offsets(),
            targets: graph.targets(),
            weights: graph.weights(),
            owned,
            out,
            reads_own_lists,
            transposed,
            readers,
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
        let out = match (&self.out.targets, self.reads_own_lists) {
            // The offsets only, for degrees.
            (Cow::Borrowed(_), false) => self.out.offsets.len() as u64 * 8,
            _ => self.out.bytes(),
        };
        out + self.transposed.as_ref().map_or(0, Csr::bytes)
            + self.readers.as_ref().map_or(0, |r| r.bits.len() as u64)
    }

    /// The other nodes that need owned vertex `v`'s state when a pull
    /// reads it (they own one of its neighbours), ascending; with this
    /// node among them when it owns one too. Only on a node of several
    /// that may pull.
    #[inline]
    pub fn readers(&self, v: u32) -> impl Iterator<Item = usize> + '_ {
        self.readers
            .as_ref()
            .expect("readers are noted on every node of several that may pull")
            .of_vertex(v - self.owned.start)
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
    /// and with `own` each owned vertex's own list merged in (the graph
    /// taken as undirected, an edge of the vertex's own first where two
    /// tie), by counting sort: one pass over all targets counts, one over
    /// every list fills (sources come out ascending because it goes in
    /// source order, and an owned vertex's own list goes behind its
    /// sources, to be merged with them). Both passes read the lists
    /// `window` sources at a time, handing each window to `release` once
    /// read.
    fn gathered(
        graph: &Graph,
        owned: Range<u32>,
        own: bool,
        window: u32,
        release: &dyn Fn(Range<u32>),
    ) -> Csr<'static> {
        let len = (owned.end - owned.start) as usize;
        let n = graph.num_vertices();
        let windows = (0..n)
            .step_by(window as usize)
            .map(|start| start..n.min(start.saturating_add(window)));
        // Edges of the `i`-th owned vertex's own list that its slot holds.
        let own_degree = |i: usize| {
            let v = owned.start + u32::try_from(i).expect("vertex indices fit u32");
            if own {
                graph.degree(v)
            } else {
                0
            }
        };
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
            offsets[i + 1] += offsets[i] + own_degree(i);
        }
        let total = index(offsets[len]);
        let mut fill: Vec<u64> = offsets[..len].to_vec();
        let mut targets = vec![0u32; total];
        let mut weights = graph.weights().map(|_| vec![0f32; total]);
        for window in windows {
            for u in window.clone() {
                let ws = graph.edge_weights(u);
                let list = graph.neighbors(u);
                for (e, &t) in list.iter().enumerate() {
                    if owned.contains(&t) {
                        let slot = &mut fill[(t - owned.start) as usize];
                        targets[index(*slot)] = u;
                        if let (Some(all), Some(w)) = (weights.as_mut(), ws) {
                            all[index(*slot)] = w[e];
                        }
                        *slot += 1;
                    }
                }
                if own && owned.contains(&u) {
                    let end = index(offsets[(u - owned.start) as usize + 1]);
                    let slot = end - list.len()..end;
                    targets[slot.clone()].copy_from_slice(list);
                    if let (Some(all), Some(w)) = (weights.as_mut(), ws) {
                        all[slot].copy_from_slice(w);
                    }
                }
            }
            release(window);
        }
        if own {
            let mut merge = Merge::default();
            for i in 0..len {
                let (start, end) = (index(offsets[i]), index(offsets[i + 1]));
                merge.runs(
                    &mut targets,
                    weights.as_deref_mut(),
                    start..end - index(own_degree(i)),
                    end,
                );
            }
        }
        Csr {
            offsets: Cow::Owned(offsets),
            targets: Cow::Owned(targets),
            weights: weights.map(Cow::Owned),
        }
    }
}

/// Merges two neighbouring ascending runs of a list in place, through a
/// copy of the first that it reuses from list to list.
#[derive(Default)]
struct Merge {
    targets: Vec<u32>,
    weights: Vec<f32>,
}

impl Merge {
    /// Merges `targets[first]` (edges into a vertex) with the run after it
    /// up to `end` (the vertex's own), its own first where two tie, moving
    /// `weights` alongside.
    fn runs(
        &mut self,
        targets: &mut [u32],
        mut weights: Option<&mut [f32]>,
        first: Range<usize>,
        end: usize,
    ) {
        self.targets.clear();
        self.targets.extend_from_slice(&targets[first.clone()]);
        self.weights.clear();
        if let Some(w) = weights.as_deref() {
            self.weights.extend_from_slice(&w[first.clone()]);
        }
        // The write position stays behind the second run's read position,
        // by what is left of the first run.
        let (mut a, mut b) = (0, first.end);
        for at in first.start..end {
            let from_own = a == self.targets.len() || (b < end && targets[b] <= self.targets[a]);
            let (target, weight) = if from_own {
                b += 1;
                (targets[b - 1], weights.as_deref().map(|w| w[b - 1]))
            } else {
                a += 1;
                (self.targets[a - 1], self.weights.get(a - 1).copied())
            };
            targets[at] = target;
            if let (Some(w), Some(weight)) = (weights.as_deref_mut(), weight) {
                w[at] = weight;
            }
        }
    }
}

/// For each owned vertex, one bit for each node that owns one of its
/// neighbours: where a pull needs its state sent. Noted once at load, so
/// that a node that pulls from a transpose does not read its out-lists
/// every superstep to find them.
#[derive(Debug)]
struct Readers {
    /// Bytes a vertex: a bit a node.
    width: usize,
    bits: Vec<u8>,
}

impl Readers {
    /// The readers of each vertex of `out` under `partition`.
    fn of(out: &Csr<'_>, partition: &Partition) -> Readers {
        let width = partition.len().div_ceil(8);
        let mut bits = vec![0u8; (out.offsets.len() - 1) * width];
        let mark = |row: &mut [u8], node: usize| row[node / 8] |= 1 << (node % 8);
        for (i, row) in (0..).zip(bits.chunks_exact_mut(width)) {
            let list = out.edges(i).vertices;
            let (Some(&first), Some(&last)) = (list.first(), list.last()) else {
                continue;
            };
            // A sorted list's first and last owners bound the rest: a list
            // whose ends lie in the same or neighbouring chunks needs no
            // search (on 2 nodes, none does).
            let (low, high) = (partition.owner(first), partition.owner(last));
            if high - low > 1 {
                partition.owners(list).for_each(|node| mark(row, node));
            } else {
                mark(row, low);
                mark(row, high);
            }
        }
        Readers { width, bits }
    }

    /// The nodes of the `i`-th owned vertex, ascending.
    fn of_vertex(&self, i: u32) -> impl Iterator<Item = usize> + '_ {
        let row = &self.bits[i as usize * self.width..][..self.width];
        (0..).zip(row).flat_map(|(k, &byte)| {
            let mut rest = byte;
            std::iter::from_fn(move || {
                (rest != 0).then(|| {
                    let bit = rest.trailing_zeros() as usize;
                    rest &= rest - 1;
                    k * 8 + bit
                })
            })
        })
    }
}

/// An edge offset as an index: edge counts fit memory, so `usize`.
fn index(offset: u64) -> usize {
    usize::try_from(offset).expect("edge offsets of an in-memory graph fit usize")
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use quiver_csr::Graph;

    use super::{Csr, LocalGraph};
    use crate::partition::Partition;
    use crate::program::{Flow, Side};

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

    /// Each vertex's (neighbour, weight) as `Csr::gathered` lists them: the
    /// edges into it in source order, after its own with `own`, sorted
    /// stably by neighbour (so its own come first where two tie).
    fn gathered_reference(graph: &Graph, v: u32, own: bool) -> Vec<(u32, u32)> {
        let mut edges = Vec::new();
        if own {
            let weights = graph.edge_weights(v).unwrap();
            edges.extend(
                graph
                    .neighbors(v)
                    .iter()
                    .zip(weights)
                    .map(|(&t, w)| (t, w.to_bits())),
            );
        }
        for u in 0..graph.num_vertices() {
            let weights = graph.edge_weights(u).unwrap();
            for (i, &t) in graph.neighbors(u).iter().enumerate() {
                if t == v {
                    edges.push((u, weights[i].to_bits()));
                }
            }
        }
        edges.sort_by_key(|&(t, _)| t);
        edges
    }

    proptest! {
        /// On directed weighted multigraphs with self-loops, whatever the
        /// owned range and the window: the transpose, and the lists merged
        /// with it, hold each vertex's edges in the reference's order, and
        /// each pass hands every source to `release` once.
        #[test]
        fn gathered_lists_are_the_references_and_every_source_is_released_once_a_pass(
            n in 1u32..24,
            drawn in proptest::collection::vec((0u32..24, 0u32..24, 0u8..4), 0..80),
            cut in (0u32..24, 0u32..24),
            window in 1u32..9,
            own: bool,
        ) {
            let edges: Vec<(u32, u32, f32)> = drawn
                .iter()
                .map(|&(u, t, w)| (u % n, t % n, f32::from(w)))
                .collect();
            let graph = Graph::from_edges(n, &edges, true, false).unwrap();
            let (start, end) = ((cut.0 % (n + 1)).min(cut.1 % (n + 1)), (cut.0 % (n + 1)).max(cut.1 % (n + 1)));
            let released = std::cell::RefCell::new(Vec::new());
            let gathered = Csr::gathered(&graph, start..end, own, window, &|w| {
                released.borrow_mut().extend(w);
            });
            for v in start..end {
                let listed: Vec<(u32, u32)> = {
                    let edges = gathered.edges(v - start);
                    edges.vertices.iter().zip(edges.weights.unwrap()).map(|(&t, w)| (t, w.to_bits())).collect()
                };
                prop_assert_eq!(listed, gathered_reference(&graph, v, own), "vertex {}", v);
            }
            let once: Vec<u32> = (0..n).collect();
            prop_assert_eq!(released.into_inner(), [once.clone(), once].concat());
        }
    }

    #[test]
    fn every_owned_range_holds_the_reference_edges_in_order() {
        let graph = graph();
        for start in 0..=6 {
            for end in start..=6 {
                let out = LocalGraph::new(&graph, start..end, Side::Out, Flow::Both, None);
                let both = LocalGraph::new(&graph, start..end, Side::Both, Flow::Both, None);
                let pushed_only = LocalGraph::new(&graph, start..end, Side::Out, Flow::Push, None);
                let pulled_only = LocalGraph::new(&graph, start..end, Side::Out, Flow::Pull, None);
                let transposed = out.transposed.as_ref().unwrap().bytes();
                assert_eq!(pushed_only.bytes(), out.bytes() - transposed);
                let offsets = 8 * u64::from(end - start + 1);
                assert_eq!(pulled_only.bytes(), transposed + offsets);
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
                    assert_eq!(listed(pulled_only.in_edges(v)), listed(out.in_edges(v)));
                    assert_eq!(pulled_only.degree(v), out.degree(v));
                    let mut pulled = listed(out.in_edges(v));
                    pulled.sort_unstable();
                    assert_eq!(pulled, reference(&graph, v, false, true), "in, {v}");
                }
                let held: u64 = (start..end).map(|v| out.degree(v)).sum();
                assert_eq!(out.num_edges(), held);
            }
        }
    }

    #[test]
    fn readers_are_the_owners_of_each_vertexs_neighbours_on_its_side() {
        // The fixture, and vertex 5's list reaching three chunks apart.
        let mut edges: Vec<(u32, u32, f32)> = (0..6)
            .flat_map(|u| {
                let fixture = graph();
                let weights = fixture.edge_weights(u).unwrap().to_vec();
                let targets = fixture.neighbors(u).to_vec();
                targets
                    .into_iter()
                    .zip(weights)
                    .map(move |(t, w)| (u, t, w))
            })
            .collect();
        edges.extend([(5, 0, 10.0), (5, 2, 11.0), (5, 4, 12.0)]);
        let graph = Graph::from_edges(6, &edges, true, false).unwrap();
        for bounds in [
            vec![0, 6],
            vec![0, 2, 6],
            vec![0, 1, 3, 3, 6],
            vec![0, 1, 2, 3, 4, 5, 6],
            vec![0, 0, 1, 1, 2, 3, 3, 4, 5, 5, 6],
        ] {
            let partition = Partition::from_bounds(bounds);
            let owner = |u: u32| (0..partition.len()).find(|&c| partition.range(c).contains(&u));
            for chunk in 0..partition.len() {
                let owned = partition.range(chunk);
                for side in [Side::Out, Side::Both] {
                    let local =
                        LocalGraph::new(&graph, owned.clone(), side, Flow::Both, Some(&partition));
                    let several = partition.len() > 1;
                    assert_eq!(local.readers.is_some(), several);
                    if !several {
                        continue;
                    }
                    for v in owned.clone() {
                        let mut nodes: Vec<usize> = local
                            .out_edges(v)
                            .vertices
                            .iter()
                            .map(|&u| owner(u).unwrap())
                            .collect();
                        nodes.dedup();
                        assert_eq!(local.readers(v).collect::<Vec<_>>(), nodes, "{side:?} {v}");
                    }
                }
                let pushes =
                    LocalGraph::new(&graph, owned, Side::Out, Flow::Push, Some(&partition));
                assert!(
                    pushes.readers.is_none(),
                    "a node that only pushes sends no mirrors"
                );
            }
        }
    }
}
