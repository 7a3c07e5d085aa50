//! The six Graphalytics algorithms written with the engine's API: BFS,
//! SSSP and WCC as edge programs over a shrinking frontier (push or pull
//! per superstep), PageRank as an edge program over all vertices, CDLP as a
//! pull over both sides, LCC with `process_vertices`.
//!
//! Values that threads update concurrently are atomics: depths and labels
//! by `fetch_min`, distances as the bits of non-negative `f64`s (whose bit
//! patterns order as the numbers do, so `fetch_min` on the bits is a min on
//! the distances), PageRank sums by compare-and-swap.

use std::cmp::Reverse;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::algorithm::{Algorithm, Values, UNREACHED};
use crate::engine::{EdgeProgram, Edges, Engine, Frontier, Side};

/// Runs `algorithm` (already validated) on `engine`.
pub fn run(engine: &mut Engine<'_>, algorithm: &Algorithm) -> Values {
    match *algorithm {
        Algorithm::Bfs { source } => Values::Depths(bfs(engine, source)),
        Algorithm::Sssp { source } => Values::Reals(sssp(engine, source)),
        Algorithm::Wcc => Values::Labels(wcc(engine)),
        Algorithm::PageRank {
            damping,
            iterations,
        } => Values::Reals(pagerank(engine, damping, iterations)),
        Algorithm::Cdlp { iterations } => Values::Labels(cdlp(engine, iterations)),
        Algorithm::Lcc => Values::Reals(lcc(engine)),
    }
}

fn atomics<T>(n: u32, init: impl Fn(u32) -> T) -> Vec<T> {
    (0..n).map(init).collect()
}

struct Bfs<'a> {
    depth: &'a [AtomicU64],
    next_depth: u64,
}

impl EdgeProgram for Bfs<'_> {
    fn push(&self, _src: u32, edges: &[Edges<'_>], activate: &mut dyn FnMut(u32)) {
        for &dst in edges.iter().flat_map(|e| e.vertices) {
            let slot = &self.depth[dst as usize];
            if slot.load(Ordering::Relaxed) == UNREACHED
                && slot
                    .compare_exchange(
                        UNREACHED,
                        self.next_depth,
                        Ordering::Relaxed,
                        Ordering::Relaxed,
                    )
                    .is_ok()
            {
                activate(dst);
            }
        }
    }

    fn wants_pull(&self, dst: u32) -> bool {
        self.depth[dst as usize].load(Ordering::Relaxed) == UNREACHED
    }

    fn pull(&self, dst: u32, edges: &[Edges<'_>], active: &Frontier) -> bool {
        // Beamer's bottom-up step: the first active parent settles it.
        let found = edges
            .iter()
            .flat_map(|e| e.vertices)
            .any(|&src| active.contains(src));
        if found {
            self.depth[dst as usize].store(self.next_depth, Ordering::Relaxed);
        }
        found
    }
}

fn bfs(engine: &mut Engine<'_>, source: u32) -> Vec<u64> {
    let n = engine.num_vertices();
    let depth = atomics(n, |_| AtomicU64::new(UNREACHED));
    depth[source as usize].store(0, Ordering::Relaxed);
    let mut frontier = Frontier::of(n, [source]);
    let mut next_depth = 1;
    while !frontier.is_empty() {
        frontier = engine.process_edges(
            &frontier,
            &Bfs {
                depth: &depth,
                next_depth,
            },
        );
        next_depth += 1;
    }
    depth.into_iter().map(AtomicU64::into_inner).collect()
}

struct Sssp<'a> {
    /// Distances as `f64` bits.
    dist: &'a [AtomicU64],
}

impl Sssp<'_> {
    fn get(&self, v: u32) -> f64 {
        f64::from_bits(self.dist[v as usize].load(Ordering::Relaxed))
    }

    /// Lowers `v`'s distance to `d`; returns whether it was higher.
    fn lower(&self, v: u32, d: f64) -> bool {
        let bits = d.to_bits();
        self.dist[v as usize].fetch_min(bits, Ordering::Relaxed) > bits
    }
}

impl EdgeProgram for Sssp<'_> {
    fn push(&self, src: u32, edges: &[Edges<'_>], activate: &mut dyn FnMut(u32)) {
        let d = self.get(src);
        for e in edges {
            let weights = e.weights.expect("SSSP runs on weighted graphs");
            for (&dst, &w) in e.vertices.iter().zip(weights) {
                let candidate = d + f64::from(w);
                if candidate < self.get(dst) && self.lower(dst, candidate) {
                    activate(dst);
                }
            }
        }
    }

    fn pull(&self, dst: u32, edges: &[Edges<'_>], active: &Frontier) -> bool {
        let mut best = self.get(dst);
        for e in edges {
            let weights = e.weights.expect("SSSP runs on weighted graphs");
            for (&src, &w) in e.vertices.iter().zip(weights) {
                if active.contains(src) {
                    best = best.min(self.get(src) + f64::from(w));
                }
            }
        }
        best < self.get(dst) && self.lower(dst, best)
    }
}

fn sssp(engine: &mut Engine<'_>, source: u32) -> Vec<f64> {
    let n = engine.num_vertices();
    let dist = atomics(n, |_| AtomicU64::new(f64::INFINITY.to_bits()));
    dist[source as usize].store(0f64.to_bits(), Ordering::Relaxed);
    let mut frontier = Frontier::of(n, [source]);
    while !frontier.is_empty() {
        frontier = engine.process_edges(&frontier, &Sssp { dist: &dist });
    }
    dist.into_iter()
        .map(|d| f64::from_bits(d.into_inner()))
        .collect()
}

struct Wcc<'a> {
    label: &'a [AtomicU32],
}

impl EdgeProgram for Wcc<'_> {
    fn side(&self) -> Side {
        Side::Both
    }

    fn push(&self, src: u32, edges: &[Edges<'_>], activate: &mut dyn FnMut(u32)) {
        let mine = self.label[src as usize].load(Ordering::Relaxed);
        for &dst in edges.iter().flat_map(|e| e.vertices) {
            let slot = &self.label[dst as usize];
            if mine < slot.load(Ordering::Relaxed) && slot.fetch_min(mine, Ordering::Relaxed) > mine
            {
                activate(dst);
            }
        }
    }

    fn pull(&self, dst: u32, edges: &[Edges<'_>], active: &Frontier) -> bool {
        let slot = &self.label[dst as usize];
        let best = edges
            .iter()
            .flat_map(|e| e.vertices)
            .filter(|&&src| active.contains(src))
            .map(|&src| self.label[src as usize].load(Ordering::Relaxed))
            .min()
            .unwrap_or(u32::MAX);
        best < slot.load(Ordering::Relaxed) && slot.fetch_min(best, Ordering::Relaxed) > best
    }
}

fn wcc(engine: &mut Engine<'_>) -> Vec<u32> {
    let n = engine.num_vertices();
    let label = atomics(n, AtomicU32::new);
    let mut frontier = Frontier::all(n);
    while !frontier.is_empty() {
        frontier = engine.process_edges(&frontier, &Wcc { label: &label });
    }
    label.into_iter().map(AtomicU32::into_inner).collect()
}

/// One PageRank iteration's edge phase: every vertex gathers the
/// contributions `rank[u] / out_degree(u)` of its in-neighbours into `sum`.
struct PageRank<'a> {
    contribution: &'a [f64],
    /// Gathered sums as `f64` bits.
    sum: &'a [AtomicU64],
}

impl PageRank<'_> {
    fn add(&self, v: u32, x: f64) {
        let slot = &self.sum[v as usize];
        let mut old = slot.load(Ordering::Relaxed);
        while let Err(seen) = slot.compare_exchange_weak(
            old,
            (f64::from_bits(old) + x).to_bits(),
            Ordering::Relaxed,
            Ordering::Relaxed,
        ) {
            old = seen;
        }
    }
}

impl EdgeProgram for PageRank<'_> {
    fn push(&self, src: u32, edges: &[Edges<'_>], activate: &mut dyn FnMut(u32)) {
        let x = self.contribution[src as usize];
        for &dst in edges.iter().flat_map(|e| e.vertices) {
            self.add(dst, x);
            activate(dst);
        }
    }

    fn pull(&self, dst: u32, edges: &[Edges<'_>], _active: &Frontier) -> bool {
        let gathered: f64 = edges
            .iter()
            .flat_map(|e| e.vertices)
            .map(|&src| self.contribution[src as usize])
            .sum();
        self.sum[dst as usize].store(gathered.to_bits(), Ordering::Relaxed);
        true
    }
}

fn pagerank(engine: &mut Engine<'_>, damping: f64, iterations: u32) -> Vec<f64> {
    let graph = engine.graph();
    let n = engine.num_vertices();
    let size = f64::from(n);
    let all = Frontier::all(n);
    let mut rank = vec![1.0 / size; n as usize];
    let mut contribution = vec![0.0; n as usize];
    for _ in 0..iterations {
        let sink_sum: f64 = engine.process_vertices(None, |v| {
            if graph.degree(v) == 0 {
                rank[v as usize]
            } else {
                0.0
            }
        });
        for (v, c) in contribution.iter_mut().enumerate() {
            let degree = graph.degree(u32::try_from(v).expect("vertex ids fit u32"));
            #[allow(clippy::cast_precision_loss)] // Degrees far below 2^52.
            let share = if degree == 0 {
                0.0
            } else {
                rank[v] / degree as f64
            };
            *c = share;
        }
        let sum = atomics(n, |_| AtomicU64::new(0f64.to_bits()));
        engine.process_edges(
            &all,
            &PageRank {
                contribution: &contribution,
                sum: &sum,
            },
        );
        let base = (1.0 - damping) / size + damping / size * sink_sum;
        for (r, s) in rank.iter_mut().zip(sum) {
            *r = base + damping * f64::from_bits(s.into_inner());
        }
    }
    rank
}

struct Cdlp<'a> {
    labels: &'a [u32],
    next: &'a [AtomicU32],
}

impl EdgeProgram for Cdlp<'_> {
    fn side(&self) -> Side {
        Side::Both
    }

    fn can_push(&self) -> bool {
        false
    }

    fn push(&self, _src: u32, _edges: &[Edges<'_>], _activate: &mut dyn FnMut(u32)) {
        unreachable!("CDLP declares it cannot push; the engine always pulls it")
    }

    fn pull(&self, dst: u32, edges: &[Edges<'_>], _active: &Frontier) -> bool {
        let mut histogram: HashMap<u32, u64> = HashMap::new();
        for &src in edges.iter().flat_map(|e| e.vertices) {
            *histogram.entry(self.labels[src as usize]).or_default() += 1;
        }
        let label = histogram
            .into_iter()
            .max_by_key(|&(label, count)| (count, Reverse(label)))
            .map_or(self.labels[dst as usize], |(label, _)| label);
        self.next[dst as usize].store(label, Ordering::Relaxed);
        true
    }
}

fn cdlp(engine: &mut Engine<'_>, iterations: u32) -> Vec<u32> {
    let n = engine.num_vertices();
    let all = Frontier::all(n);
    let mut labels: Vec<u32> = (0..n).collect();
    for _ in 0..iterations {
        let next = atomics(n, |_| AtomicU32::new(0));
        engine.process_edges(
            &all,
            &Cdlp {
                labels: &labels,
                next: &next,
            },
        );
        labels = next.into_iter().map(AtomicU32::into_inner).collect();
    }
    labels
}

fn lcc(engine: &mut Engine<'_>) -> Vec<f64> {
    let n = engine.num_vertices();
    let graph = engine.graph();
    let distinct = graph.has_distinct_targets();
    let lcc = atomics(n, |_| AtomicU64::new(0));
    let engine_ref = &*engine;
    engine_ref.process_vertices(None, |v| {
        let mut neighbours: Vec<u32> = engine_ref
            .out_edges(v)
            .vertices
            .iter()
            .chain(engine_ref.in_edges(v).vertices)
            .copied()
            .collect();
        neighbours.sort_unstable();
        neighbours.dedup();
        let d = neighbours.len() as u64;
        if d < 2 {
            return 0u64;
        }
        let mut links = 0u64;
        let mut scratch = Vec::new();
        for &u in &neighbours {
            let mut out = graph.neighbors(u);
            if !distinct {
                scratch.clear();
                scratch.extend_from_slice(out);
                scratch.sort_unstable();
                scratch.dedup();
                out = &scratch;
            }
            links += out
                .iter()
                .filter(|w| neighbours.binary_search(w).is_ok())
                .count() as u64;
        }
        #[allow(clippy::cast_precision_loss)] // Counts far below 2^52.
        let coefficient = links as f64 / (d * (d - 1)) as f64;
        lcc[v as usize].store(coefficient.to_bits(), Ordering::Relaxed);
        0u64
    });
    lcc.into_iter()
        .map(|c| f64::from_bits(c.into_inner()))
        .collect()
}
