//! The Graphalytics algorithms written the simplest way, on one thread,
//! straight from the specification's pseudo-code: the engine's test oracle
//! and the COST yardstick (`quiver bsp --reference`).
//!
//! An undirected graph stores each edge both ways, so its in-neighbours
//! are its own lists: the reference builds a transpose only for a directed
//! graph, and walks an undirected graph's lists once (as a COST yardstick
//! should: no work a simple single-thread program would not do).
//!
//! The graph's edges are taken as stored: a graph with duplicate edges
//! counts them in PageRank and CDLP as a multigraph would, while LCC, whose
//! definition is over sets of neighbours and a set of edges, ignores them.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};

use quiver_csr::Graph;

use crate::algorithm::{Algorithm, Values, UNREACHED};
use crate::transpose::InEdges;
use crate::Result;

/// Runs `algorithm` on `graph` after validating it.
pub fn run(graph: &Graph, algorithm: &Algorithm) -> Result<Values> {
    algorithm.validate(graph)?;
    Ok(match *algorithm {
        Algorithm::Bfs { source } => Values::Depths(bfs(graph, source)),
        Algorithm::PageRank {
            damping,
            iterations,
        } => Values::Reals(pagerank(graph, damping, iterations)),
        Algorithm::Wcc => Values::Labels(wcc(graph)),
        Algorithm::Sssp { source } => Values::Reals(sssp(graph, source)),
        Algorithm::Cdlp { iterations } => Values::Labels(cdlp(graph, iterations)),
        Algorithm::Lcc => Values::Reals(lcc(graph)),
    })
}

fn bfs(graph: &Graph, source: u32) -> Vec<u32> {
    let mut depth = vec![UNREACHED; graph.num_vertices() as usize];
    let mut queue = std::collections::VecDeque::from([source]);
    depth[source as usize] = 0;
    while let Some(v) = queue.pop_front() {
        for &u in graph.neighbors(v) {
            if depth[u as usize] == UNREACHED {
                depth[u as usize] = depth[v as usize] + 1;
                queue.push_back(u);
            }
        }
    }
    depth
}

#[allow(clippy::cast_precision_loss)] // Vertex counts far below 2^52.
fn pagerank(graph: &Graph, damping: f64, iterations: u32) -> Vec<f64> {
    let n = graph.num_vertices();
    let size = f64::from(n);
    let inbound = transpose(graph);
    let mut rank = vec![1.0 / size; n as usize];
    for _ in 0..iterations {
        let sink_sum: f64 = (0..n)
            .filter(|&w| graph.degree(w) == 0)
            .map(|w| rank[w as usize])
            .sum();
        let next: Vec<f64> = (0..n)
            .map(|v| {
                let pulled: f64 = sources(graph, inbound.as_ref(), v)
                    .iter()
                    .map(|&u| rank[u as usize] / graph.degree(u) as f64)
                    .sum();
                (1.0 - damping) / size + damping * pulled + damping / size * sink_sum
            })
            .collect();
        rank = next;
    }
    rank
}

fn wcc(graph: &Graph) -> Vec<u32> {
    let n = graph.num_vertices();
    let inbound = transpose(graph);
    let mut label = vec![u32::MAX; n as usize];
    for root in 0..n {
        if label[root as usize] != u32::MAX {
            continue;
        }
        // Ids ascend, so the first vertex reached of a component is its
        // smallest.
        label[root as usize] = root;
        let mut stack = vec![root];
        while let Some(v) = stack.pop() {
            for &u in either_way(graph, inbound.as_ref(), v) {
                if label[u as usize] == u32::MAX {
                    label[u as usize] = root;
                    stack.push(u);
                }
            }
        }
    }
    label
}

fn sssp(graph: &Graph, source: u32) -> Vec<f64> {
    let mut dist = vec![f64::INFINITY; graph.num_vertices() as usize];
    dist[source as usize] = 0.0;
    let mut heap = BinaryHeap::from([Reverse((Ordered(0.0), source))]);
    while let Some(Reverse((Ordered(d), v))) = heap.pop() {
        if d > dist[v as usize] {
            continue;
        }
        let weights = graph
            .edge_weights(v)
            .expect("validate() refuses SSSP on an unweighted graph");
        for (&w, &weight) in graph.neighbors(v).iter().zip(weights) {
            let candidate = d + f64::from(weight);
            if candidate < dist[w as usize] {
                dist[w as usize] = candidate;
                heap.push(Reverse((Ordered(candidate), w)));
            }
        }
    }
    dist
}

fn cdlp(graph: &Graph, iterations: u32) -> Vec<u32> {
    let n = graph.num_vertices();
    let inbound = transpose(graph);
    let mut labels: Vec<u32> = (0..n).collect();
    for _ in 0..iterations {
        let next: Vec<u32> = (0..n)
            .map(|v| {
                let mut histogram: HashMap<u32, u64> = HashMap::new();
                for &u in either_way(graph, inbound.as_ref(), v) {
                    *histogram.entry(labels[u as usize]).or_default() += 1;
                }
                // Most frequent, then smallest; a vertex without neighbours
                // keeps its label.
                histogram
                    .into_iter()
                    .max_by_key(|&(label, count)| (count, Reverse(label)))
                    .map_or(labels[v as usize], |(label, _)| label)
            })
            .collect();
        labels = next;
    }
    labels
}

#[allow(clippy::cast_precision_loss)] // Neighbourhood sizes far below 2^52.
fn lcc(graph: &Graph) -> Vec<f64> {
    let n = graph.num_vertices();
    let inbound = transpose(graph);
    let mut in_neighbourhood = vec![false; n as usize];
    (0..n)
        .map(|v| {
            let mut neighbours: Vec<u32> =
                either_way(graph, inbound.as_ref(), v).copied().collect();
            neighbours.sort_unstable();
            neighbours.dedup();
            neighbours.retain(|&u| u != v);
            let d = neighbours.len() as u64;
            if d < 2 {
                return 0.0;
            }
            for &u in &neighbours {
                in_neighbourhood[u as usize] = true;
            }
            let mut links = 0u64;
            for &u in &neighbours {
                let mut out = graph.neighbors(u).to_vec();
                out.sort_unstable();
                out.dedup();
                links += out
                    .iter()
                    .filter(|&&w| w != u && in_neighbourhood[w as usize])
                    .count() as u64;
            }
            for &u in &neighbours {
                in_neighbourhood[u as usize] = false;
            }
            links as f64 / (d * (d - 1)) as f64
        })
        .collect()
}

/// A directed graph's in-edges; `None` for an undirected graph, whose
/// lists already hold them.
fn transpose(graph: &Graph) -> Option<InEdges> {
    (!graph.is_undirected()).then(|| InEdges::of(graph))
}

/// The sources of `v`'s in-edges (`inbound` from [`transpose`]).
fn sources<'g>(graph: &'g Graph, inbound: Option<&'g InEdges>, v: u32) -> &'g [u32] {
    inbound.map_or_else(|| graph.neighbors(v), |i| i.sources(v))
}

/// `v`'s neighbours along its edges either way: its list, then in a
/// directed graph its in-edges' sources (`inbound` from [`transpose`]).
fn either_way<'g>(
    graph: &'g Graph,
    inbound: Option<&'g InEdges>,
    v: u32,
) -> impl Iterator<Item = &'g u32> {
    let ins = inbound.map_or(&[][..], |i| i.sources(v));
    graph.neighbors(v).iter().chain(ins)
}

/// An `f64` ordered by `total_cmp`, for the heap (distances are never NaN).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Ordered(f64);

impl Eq for Ordered {}

impl PartialOrd for Ordered {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Ordered {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}
