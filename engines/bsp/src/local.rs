//! What one node holds of the graph: the edges of the vertices it owns, in
//! both layouts a superstep needs.
//!
//! - `out`: the owned vertices' edges, source by source (CSR), for pushing
//!   from active owned vertices. On the side `Out` these are the graph's
//!   own arrays, borrowed; on the side `Both` of a directed graph every
//!   owned vertex also gets its in-edges (the graph taken as undirected),
//!   gathered by one scan over all edges.
//! - `pull`: the same edges destination by destination (CSC), for every
//!   destination any of them reaches, for pulling: a node gathers, for each
//!   destination, what its own sources contribute and reduces it into the
//!   destination's master (here) or mirror (forwarded to the owner), as
//!   Gemini's dense mode does. A symmetric graph with sorted lists needs no
//!   second layout: the edges into `v` from owned sources are a run of
//!   `v`'s own sorted neighbours.
//!
//! Each node's edges are its own vertices' out-edges, so the sum over nodes
//! is every edge exactly once (twice on the side `Both`).

use std::borrow::Cow;
use std::ops::Range;

use quiver_csr::Graph;

use crate::engine::{Edges, Side};

/// One node's edges.
#[derive(Debug)]
pub struct LocalGraph<'g> {
    /// The whole graph's arrays, looked up once (each accessor of `Graph`
    /// checks its storage).
    offsets: &'g [u64],
    targets: &'g [u32],
    weights: Option<&'g [f32]>,
    /// Whether this node owns every vertex.
    whole: bool,
    owned: Range<u32>,
    out: Csr<'g>,
    pull: Pull,
    /// Edges of `out` (also of `pull`).
    edges: u64,
}

/// Edges by source over `owned`: `targets[offsets[i]..offsets[i + 1]]` are
/// those of vertex `owned.start + i`. Borrowed offsets may start above 0
/// (they index the graph's whole target array).
#[derive(Debug)]
struct Csr<'g> {
    offsets: Cow<'g, [u64]>,
    targets: Cow<'g, [u32]>,
    weights: Option<Cow<'g, [f32]>>,
}

/// How a node finds the edges into a destination from its own sources.
#[derive(Debug)]
enum Pull {
    /// A symmetric graph (its lists are sorted, as all are): the edges into `v`
    /// from owned sources are the owned run of `v`'s own sorted neighbours,
    /// found by binary search, so no second layout is built.
    Symmetric,
    /// Otherwise, the transpose of the node's edges.
    Transposed(Csc),
}

/// Edges by destination: `sources[offsets[i]..offsets[i + 1]]` (with their
/// weights) reach `destinations[i]`, ascending.
#[derive(Debug)]
struct Csc {
    destinations: Vec<u32>,
    offsets: Vec<u64>,
    sources: Vec<u32>,
    weights: Option<Vec<f32>>,
}

impl<'g> LocalGraph<'g> {
    /// The edges of the vertices in `owned` on `side`.
    pub fn new(graph: &'g Graph, owned: Range<u32>, side: Side) -> LocalGraph<'g> {
        let out = if side == Side::Both && !graph.is_undirected() {
            Csr::both_directions(graph, owned.clone())
        } else {
            let (start, end) = (owned.start as usize, owned.end as usize);
            Csr {
                offsets: Cow::Borrowed(&graph.offsets()[start..=end]),
                targets: Cow::Borrowed(graph.targets()),
                weights: graph.weights().map(Cow::Borrowed),
            }
        };
        // quiver-csr keeps every adjacency list sorted.
        let pull = if graph.is_undirected() {
            Pull::Symmetric
        } else {
            Pull::Transposed(Csc::of(&out, owned.clone(), graph.num_vertices()))
        };
        let edges = out.offsets[out.offsets.len() - 1] - out.offsets[0];
        LocalGraph {
            offsets: graph.offsets(),
            targets: graph.targets(),
            weights: graph.weights(),
            whole: owned == (0..graph.num_vertices()),
            owned,
            out,
            pull,
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

    /// Number of edges held.
    pub fn num_edges(&self) -> u64 {
        self.edges
    }

    /// Edges of owned vertex `v` to push along.
    #[inline]
    pub fn out_edges(&self, v: u32) -> Edges<'_> {
        let i = (v - self.owned.start) as usize;
        let range = index(self.out.offsets[i])..index(self.out.offsets[i + 1]);
        Edges {
            vertices: &self.out.targets[range.clone()],
            weights: self.out.weights.as_ref().map(|w| &w[range]),
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

    /// Number of destinations to pull into (some may have no edges here).
    pub fn pull_len(&self) -> usize {
        match &self.pull {
            Pull::Symmetric => self.offsets.len() - 1,
            Pull::Transposed(csc) => csc.destinations.len(),
        }
    }

    /// The `i`-th destination to pull into.
    #[inline]
    pub fn pull_destination(&self, i: usize) -> u32 {
        match &self.pull {
            Pull::Symmetric => u32::try_from(i).expect("vertex indices fit u32"),
            Pull::Transposed(csc) => csc.destinations[i],
        }
    }

    /// The `i`-th destination to pull into and its edges from owned sources.
    /// Always inlined: it runs once per destination of every pull superstep,
    /// and as a call it was 7-10% of PageRank's and BFS's time.
    #[inline(always)]
    pub fn pull_entry(&self, i: usize) -> (u32, Edges<'_>) {
        match &self.pull {
            Pull::Symmetric => {
                let v = u32::try_from(i).expect("vertex indices fit u32");
                let (start, end) = (index(self.offsets[i]), index(self.offsets[i + 1]));
                let neighbours = &self.targets[start..end];
                let (from, to) = if self.whole {
                    (start, end)
                } else {
                    let from = neighbours.partition_point(|&u| u < self.owned.start);
                    let to = from + neighbours[from..].partition_point(|&u| u < self.owned.end);
                    (start + from, start + to)
                };
                let edges = Edges {
                    vertices: &self.targets[from..to],
                    weights: self.weights.map(|w| &w[from..to]),
                };
                (v, edges)
            }
            Pull::Transposed(csc) => {
                let range = index(csc.offsets[i])..index(csc.offsets[i + 1]);
                let edges = Edges {
                    vertices: &csc.sources[range.clone()],
                    weights: csc.weights.as_ref().map(|w| &w[range]),
                };
                (csc.destinations[i], edges)
            }
        }
    }

    /// Bytes this node holds of its own (borrowed arrays of a mapped graph
    /// are counted at their size too: their pages are touched).
    pub fn bytes(&self) -> u64 {
        let weights = u64::from(self.out.weights.is_some());
        let out = (self.out.offsets.len() as u64) * 8 + self.edges * (4 + 4 * weights);
        match &self.pull {
            Pull::Symmetric => out,
            Pull::Transposed(csc) => {
                out + (csc.destinations.len() as u64) * 12 + self.edges * (4 + 4 * weights)
            }
        }
    }
}

impl Csr<'_> {
    /// Out- and in-edges of every owned vertex of a directed graph, by one
    /// pass over all edges for the in-edges.
    fn both_directions(graph: &Graph, owned: Range<u32>) -> Csr<'static> {
        let len = (owned.end - owned.start) as usize;
        let mut degree = vec![0u64; len + 1];
        for v in owned.clone() {
            degree[(v - owned.start) as usize + 1] += graph.degree(v);
        }
        for &t in graph.targets() {
            if owned.contains(&t) {
                degree[(t - owned.start) as usize + 1] += 1;
            }
        }
        for i in 0..len {
            degree[i + 1] += degree[i];
        }
        let offsets = degree;
        let total = index(offsets[len]);
        let mut fill: Vec<u64> = offsets[..len].to_vec();
        let mut targets = vec![0u32; total];
        let mut weights = graph.weights().map(|_| vec![0f32; total]);
        let mut put = |owner: u32, other: u32, weight: Option<f32>| {
            let slot = &mut fill[(owner - owned.start) as usize];
            targets[index(*slot)] = other;
            if let (Some(all), Some(w)) = (weights.as_mut(), weight) {
                all[index(*slot)] = w;
            }
            *slot += 1;
        };
        for v in owned.clone() {
            let ws = graph.edge_weights(v);
            for (i, &t) in graph.neighbors(v).iter().enumerate() {
                put(v, t, ws.map(|w| w[i]));
            }
        }
        for u in 0..graph.num_vertices() {
            let ws = graph.edge_weights(u);
            for (i, &t) in graph.neighbors(u).iter().enumerate() {
                if owned.contains(&t) {
                    put(t, u, ws.map(|w| w[i]));
                }
            }
        }
        Csr {
            offsets: Cow::Owned(offsets),
            targets: Cow::Owned(targets),
            weights: weights.map(Cow::Owned),
        }
    }
}

impl Csc {
    /// The transpose of `out` over owned sources, for destinations below `n`.
    fn of(out: &Csr<'_>, owned: Range<u32>, n: u32) -> Csc {
        let base = out.offsets[0];
        let edges = |i: usize| index(out.offsets[i] - base)..index(out.offsets[i + 1] - base);
        let targets = &out.targets[index(base)..index(out.offsets[out.offsets.len() - 1])];
        let weights = out
            .weights
            .as_ref()
            .map(|w| &w[index(base)..index(out.offsets[out.offsets.len() - 1])]);
        let mut count = vec![0u64; n as usize];
        for &t in targets {
            count[t as usize] += 1;
        }
        let destinations: Vec<u32> = (0..n).filter(|&v| count[v as usize] > 0).collect();
        let mut offsets = Vec::with_capacity(destinations.len() + 1);
        offsets.push(0u64);
        // `count` becomes each destination's next free slot.
        for &d in &destinations {
            let start = *offsets.last().expect("offsets start with 0");
            offsets.push(start + count[d as usize]);
            count[d as usize] = start;
        }
        let mut sources = vec![0u32; targets.len()];
        let mut pulled_weights = weights.map(|_| vec![0f32; targets.len()]);
        for (i, v) in owned.enumerate() {
            for e in edges(i) {
                let slot = &mut count[targets[e] as usize];
                sources[index(*slot)] = v;
                if let (Some(out), Some(all)) = (pulled_weights.as_mut(), weights) {
                    out[index(*slot)] = all[e];
                }
                *slot += 1;
            }
        }
        Csc {
            destinations,
            offsets,
            sources,
            weights: pulled_weights,
        }
    }
}

/// An edge offset as an index: edge counts fit memory, so `usize`.
fn index(offset: u64) -> usize {
    usize::try_from(offset).expect("edge offsets of an in-memory graph fit usize")
}
