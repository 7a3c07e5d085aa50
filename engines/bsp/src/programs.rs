//! The six Graphalytics algorithms written with the engine's API: BFS
//! and SSSP as min-combining edge programs over a shrinking frontier
//! (SSSP's taken a bucket of distances at a time: delta-stepping), WCC
//! as a union-find over each node's own vertices (`for_each_owned`)
//! followed by such a program, PageRank as a sum-combining edge program
//! over all vertices, one pass an iteration, CDLP and LCC with
//! `process_vertices` over the owned vertices' neighbourhoods.
//!
//! State arrays span all of V on every node: a node's entries for the
//! vertices it owns are masters, the others mirrors. Values that threads
//! update concurrently are atomics: depths and labels by `fetch_min`,
//! distances as the bits of non-negative `f64`s (whose bit patterns order
//! as the numbers do, so `fetch_min` on the bits is a min on the
//! distances), PageRank sums by compare-and-swap.
//!
//! CDLP needs every neighbour's label, which a Reduce-only model cannot
//! give: after each iteration the nodes exchange their masters' labels
//! (an all-gather, |V| labels in all). LCC (its own module) counts
//! triangles in the graph file, which every node maps.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;

use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use rayon::prelude::*;

use crate::algorithm::{Algorithm, Values, UNREACHED};
use crate::engine::{Direction, Engine};
use crate::frontier::Frontier;
use crate::lcc::lcc;
use crate::program::{Combine, EdgeProgram, Edges, Flow, Side};
use crate::Result;

/// The edges `algorithm` reads through the node's local graph, and which
/// ways it moves values along them in `direction`.
///
/// - Every superstep of PageRank has every vertex active, whose edges are
///   all of |E|, so [`Direction::Auto`] pulls each one: it never pushes
///   unless told to.
/// - LCC reads the graph's lists itself (every node all of them, see
///   `crate::lcc`), so a directed graph's transpose, merged or to pull
///   along, would be held for nothing.
pub fn layout(algorithm: &Algorithm, direction: Direction) -> (Side, Flow) {
    let flow = match direction {
        Direction::Push => Flow::Push,
        Direction::Pull => Flow::Pull,
        Direction::Auto => Flow::Both,
    };
    match algorithm {
        Algorithm::Bfs { .. } | Algorithm::Sssp { .. } => (Side::Out, flow),
        Algorithm::PageRank { .. } if flow == Flow::Both => (Side::Out, Flow::Pull),
        Algorithm::PageRank { .. } => (Side::Out, flow),
        Algorithm::Wcc | Algorithm::Cdlp { .. } => (Side::Both, flow),
        Algorithm::Lcc => (Side::Out, Flow::Push),
    }
}

/// Runs `algorithm` (already validated) on `engine`; returns the values of
/// the vertices this node owns.
pub fn run(engine: &mut Engine<'_>, algorithm: &Algorithm) -> Result<Values> {
    Ok(match *algorithm {
        Algorithm::Bfs { source } => Values::Depths(bfs(engine, source)?),
        Algorithm::Sssp { source } => Values::Reals(sssp(engine, source)?),
        Algorithm::Wcc => Values::Labels(wcc(engine)?),
        Algorithm::PageRank {
            damping,
            iterations,
        } => Values::Reals(pagerank(engine, damping, iterations)?),
        Algorithm::Cdlp { iterations } => Values::Labels(cdlp(engine, iterations)?),
        Algorithm::Lcc => Values::Reals(lcc(engine)?),
    })
}

fn atomics<T>(n: u32, init: impl Fn(u32) -> T) -> Vec<T> {
    (0..n).map(init).collect()
}

/// The owned part of a state array over all vertices: the array itself
/// when this node owns them all (copying the 8 MB of a million vertices'
/// depths, faulted in page by page, took about 7 ms on this machine, most
/// of a BFS that reaches nothing).
fn owned<T: Copy>(engine: &Engine<'_>, mut all: Vec<T>) -> Vec<T> {
    let owned = engine.owned();
    all.truncate(owned.end as usize);
    if owned.start == 0 {
        all
    } else {
        all[owned.start as usize..].to_vec()
    }
}

/// The frontier of `source` on the node that owns it.
fn start(engine: &Engine<'_>, source: u32) -> Frontier {
    let mine = engine.owned().contains(&source);
    Frontier::of(engine.num_vertices(), mine.then_some(source))
}

/// BFS's program. Depths are `u32` (half the bytes a pull scans and a
/// node holds over all of V); messages carry them as `u64`.
struct Bfs<'a> {
    depth: &'a [AtomicU32],
    next_depth: u32,
}

impl Bfs<'_> {
    /// The depth a message carries (always one this program sent).
    fn depth_of(message: u64) -> u32 {
        u32::try_from(message).expect("BFS messages carry u32 depths")
    }
}

impl EdgeProgram for Bfs<'_> {
    fn signal(&self, _src: u32, _state: u64, dst: u32, _weight: f32) -> Option<u64> {
        (self.depth[dst as usize].load(Ordering::Relaxed) == UNREACHED)
            .then_some(u64::from(self.next_depth))
    }

    fn wants_pull(&self, dst: u32) -> bool {
        self.depth[dst as usize].load(Ordering::Relaxed) == UNREACHED
    }

    fn pull_narrows(&self) -> bool {
        true
    }

    fn gather(&self, _dst: u32, edges: Edges<'_>, active: &Frontier) -> Option<u64> {
        // Beamer's bottom-up step: the first active parent settles it.
        edges
            .vertices
            .iter()
            .any(|&src| active.contains(src))
            .then_some(u64::from(self.next_depth))
    }

    fn reduce(&self, dst: u32, depth: u64) -> bool {
        self.depth[dst as usize]
            .compare_exchange(
                UNREACHED,
                Self::depth_of(depth),
                Ordering::Relaxed,
                Ordering::Relaxed,
            )
            .is_ok()
    }

    /// A pull is the only writer of `dst` in its superstep, so a store
    /// after a load is enough.
    fn assign(&self, dst: u32, depth: u64) -> bool {
        let slot = &self.depth[dst as usize];
        let unreached = slot.load(Ordering::Relaxed) == UNREACHED;
        if unreached {
            slot.store(Self::depth_of(depth), Ordering::Relaxed);
        }
        unreached
    }
}

fn bfs(engine: &mut Engine<'_>, source: u32) -> Result<Vec<u32>> {
    let depth = atomics(engine.num_vertices(), |_| AtomicU32::new(UNREACHED));
    depth[source as usize].store(0, Ordering::Relaxed);
    let mut frontier = start(engine, source);
    let mut next_depth = 1;
    while engine.sum(frontier.len() as u64)? > 0 {
        let program = Bfs {
            depth: &depth,
            next_depth,
        };
        frontier = engine.process_edges(&frontier, &program)?;
        next_depth += 1;
    }
    let all: Vec<u32> = depth.into_iter().map(AtomicU32::into_inner).collect();
    Ok(owned(engine, all))
}

struct Sssp<'a> {
    /// Distances as `f64` bits.
    dist: &'a [AtomicU64],
}

impl Sssp<'_> {
    fn get(&self, v: u32) -> f64 {
        f64::from_bits(self.dist[v as usize].load(Ordering::Relaxed))
    }
}

impl EdgeProgram for Sssp<'_> {
    fn state(&self, src: u32) -> u64 {
        self.dist[src as usize].load(Ordering::Relaxed)
    }

    fn signal(&self, _src: u32, state: u64, dst: u32, weight: f32) -> Option<u64> {
        let candidate = f64::from_bits(state) + f64::from(weight);
        (candidate < self.get(dst)).then(|| candidate.to_bits())
    }

    fn gather(&self, _dst: u32, edges: Edges<'_>, active: &Frontier) -> Option<u64> {
        edges
            .vertices
            .iter()
            .enumerate()
            .filter(|&(_, &src)| active.contains(src))
            .map(|(i, &src)| self.get(src) + f64::from(edges.weight(i)))
            .min_by(f64::total_cmp)
            .map(f64::to_bits)
    }

    fn mirror(&self, src: u32, bits: u64) {
        self.dist[src as usize].fetch_min(bits, Ordering::Relaxed);
    }

    fn reduce(&self, dst: u32, bits: u64) -> bool {
        self.dist[dst as usize].fetch_min(bits, Ordering::Relaxed) > bits
    }
}

/// SSSP by delta-stepping (Meyer and Sanders) over the engine's
/// supersteps: changed vertices wait in buckets of distances `[kΔ,
/// (k+1)Δ)`, and each superstep relaxes the edges of the current bucket
/// only, until no node has a vertex left in it; then the lowest bucket
/// left on any node is next. A vertex is relaxed once its distance is
/// about settled, instead of at every improvement: Bellman-Ford's
/// frontiers (every changed vertex at once), on GAPBS's weighted
/// Kronecker 20, read 4.0 |E| edges in 12 supersteps, four of them
/// pulls of every edge. Δ is [`bucket_width`]'s. Every change queues its
/// vertex at its new bucket and each bucket is taken in turn until none
/// is left, so the distances are the least ones whatever Δ.
fn sssp(engine: &mut Engine<'_>, source: u32) -> Result<Vec<f64>> {
    let n = engine.num_vertices();
    let dist = atomics(n, |_| AtomicU64::new(f64::INFINITY.to_bits()));
    dist[source as usize].store(0f64.to_bits(), Ordering::Relaxed);
    let width = bucket_width(engine)?;
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // Saturates.
    let bucket_of =
        |v: u32| (f64::from_bits(dist[v as usize].load(Ordering::Relaxed)) / width) as u64;
    let mut buckets = Buckets::default();
    if engine.owned().contains(&source) {
        buckets.push(source, 0);
    }
    loop {
        let current = buckets.current;
        let waiting = buckets.take();
        let at = buckets_of(engine, &waiting, bucket_of);
        let due = waiting.iter().zip(at).filter(|&(_, at)| at == current);
        let frontier = Frontier::of(n, due.map(|(&v, _)| v));
        if engine.sum(frontier.len() as u64)? == 0 {
            let next = engine.min(buckets.next(bucket_of))?;
            if next == u64::MAX {
                break;
            }
            buckets.advance(next, bucket_of);
            continue;
        }
        let changed = engine.process_edges(&frontier, &Sssp { dist: &dist })?;
        let changed = changed.vertices();
        for (&v, at) in changed.iter().zip(buckets_of(engine, changed, bucket_of)) {
            buckets.push(v, at);
        }
    }
    let all: Vec<f64> = dist
        .into_iter()
        .map(|d| f64::from_bits(d.into_inner()))
        .collect();
    Ok(owned(engine, all))
}

/// Vertices above which [`buckets_of`] reads their distances in parallel.
const SERIAL_BUCKETS: usize = 16 * 1024;

/// The bucket of each of `vertices`, read on the engine's workers when
/// they are many: each is a read at random in the distances, and
/// sorting the changed vertices of a superstep into their buckets and
/// checking those of the next were, read one by one, a sixth of SSSP's
/// time on Kronecker 20 (25 ms of 135-150).
fn buckets_of(
    engine: &Engine<'_>,
    vertices: &[u32],
    bucket_of: impl Fn(u32) -> u64 + Sync,
) -> Vec<u64> {
    if vertices.len() < SERIAL_BUCKETS {
        return vertices.iter().map(|&v| bucket_of(v)).collect();
    }
    engine.install(|| {
        vertices
            .par_iter()
            .with_min_len(SERIAL_BUCKETS / 4)
            .map(|&v| bucket_of(v))
            .collect()
    })
}

/// Buckets of delta-stepping a node keeps ahead of its current one, in a
/// ring; changes further ahead wait unsorted until the ring reaches them.
const BUCKETS_AHEAD: u64 = 1024;

/// A node's changed vertices by bucket, from the current one on. A vertex
/// may wait in a bucket it has since left for a lower one (where it was
/// relaxed); it is skipped there.
struct Buckets {
    current: u64,
    /// Bucket `b`, for `current <= b < current + BUCKETS_AHEAD`, at `b %
    /// BUCKETS_AHEAD`.
    ring: Vec<Vec<u32>>,
    /// Vertices of the buckets beyond the ring.
    far: Vec<u32>,
}

impl Default for Buckets {
    fn default() -> Self {
        Buckets {
            current: 0,
            ring: (0..BUCKETS_AHEAD).map(|_| Vec::new()).collect(),
            far: Vec::new(),
        }
    }
}

impl Buckets {
    #[allow(clippy::cast_possible_truncation)] // Below BUCKETS_AHEAD.
    fn slot(bucket: u64) -> usize {
        (bucket % BUCKETS_AHEAD) as usize
    }

    /// Queues `v` at `bucket` (not below the current one: weights are
    /// non-negative).
    fn push(&mut self, v: u32, bucket: u64) {
        if bucket - self.current < BUCKETS_AHEAD {
            self.ring[Self::slot(bucket)].push(v);
        } else {
            self.far.push(v);
        }
    }

    /// Empties the current bucket.
    fn take(&mut self) -> Vec<u32> {
        std::mem::take(&mut self.ring[Self::slot(self.current)])
    }

    /// The lowest bucket after the current one holding a vertex here
    /// (`u64::MAX`: none; a far vertex that has since left for a bucket
    /// already relaxed is not counted).
    fn next(&self, bucket_of: impl Fn(u32) -> u64) -> u64 {
        (1..BUCKETS_AHEAD)
            .map(|ahead| self.current + ahead)
            .find(|&bucket| !self.ring[Self::slot(bucket)].is_empty())
            .unwrap_or_else(|| {
                self.far
                    .iter()
                    .map(|&v| bucket_of(v))
                    .filter(|&bucket| bucket > self.current)
                    .min()
                    .unwrap_or(u64::MAX)
            })
    }

    /// Makes `bucket` current (no bucket between holds a vertex on any
    /// node), bringing the vertices now within reach of the ring into it
    /// and dropping those that have since left for a bucket already
    /// relaxed.
    fn advance(&mut self, bucket: u64, bucket_of: impl Fn(u32) -> u64) {
        self.current = bucket;
        for v in std::mem::take(&mut self.far) {
            let at = bucket_of(v);
            if at >= bucket {
                self.push(v, at);
            }
        }
    }
}

/// Edges whose weights [`bucket_width`] samples on each node.
const WEIGHT_SAMPLES: u64 = 4096;

/// Delta-stepping's bucket width Δ: twice the mean edge weight over the
/// mean degree (for weights uniform on `[0, w]`, Meyer and Sanders' `w /
/// d`), the mean weight sampled at [`WEIGHT_SAMPLES`] evenly spaced edges
/// of each node. Wider buckets relax more edges more than once; narrower
/// ones take more supersteps. On GAPBS's weighted Kronecker 20 (weights
/// 1-255, mean degree 30) it is about 8.5. Infinite (one bucket:
/// Bellman-Ford) when every weight sampled is 0.
#[allow(clippy::cast_precision_loss)] // Counts far below 2^52.
fn bucket_width(engine: &Engine<'_>) -> Result<f64> {
    let graph = engine.graph();
    let owned = engine.owned();
    let offsets = graph.offsets();
    let (first, end) = (offsets[owned.start as usize], offsets[owned.end as usize]);
    let count = WEIGHT_SAMPLES.min(end - first);
    let weights = graph
        .weights()
        .expect("SSSP runs on weighted graphs (Algorithm::validate)");
    let sum: f64 = (0..count)
        .map(|i| first + i * ((end - first) / count))
        .map(|e| f64::from(weights[usize::try_from(e).expect("edge indices fit usize")]))
        .sum();
    let (sum, count) = (engine.sum_f64(sum)?, engine.sum(count)?);
    let degree = engine.total_edges() as f64 / f64::from(engine.num_vertices());
    let width = 2.0 * (sum / count.max(1) as f64) / degree.max(1.0);
    Ok(if width > 0.0 { width } else { f64::INFINITY })
}

struct Wcc<'a> {
    label: &'a [AtomicU32],
}

impl EdgeProgram for Wcc<'_> {
    fn side(&self) -> Side {
        Side::Both
    }

    fn state(&self, src: u32) -> u64 {
        u64::from(self.label[src as usize].load(Ordering::Relaxed))
    }

    fn signal(&self, _src: u32, label: u64, dst: u32, _weight: f32) -> Option<u64> {
        (label < u64::from(self.label[dst as usize].load(Ordering::Relaxed))).then_some(label)
    }

    fn gather(&self, _dst: u32, edges: Edges<'_>, active: &Frontier) -> Option<u64> {
        edges
            .vertices
            .iter()
            .filter(|&&src| active.contains(src))
            .map(|&src| u64::from(self.label[src as usize].load(Ordering::Relaxed)))
            .min()
    }

    fn mirror(&self, src: u32, label: u64) {
        self.reduce(src, label);
    }

    fn reduce(&self, dst: u32, label: u64) -> bool {
        let label = u32::try_from(label).expect("labels are vertex ids");
        self.label[dst as usize].fetch_min(label, Ordering::Relaxed) > label
    }
}

/// WCC in two phases. First each node joins its own vertices into
/// components over the edges between them, with a concurrent union-find
/// (Afforest, Sutton et al., IPDPS 2018): link each vertex to its first
/// [`NEIGHBOUR_ROUNDS`] neighbours, find the largest component by sampling,
/// then link the remaining edges of the vertices outside it only, which
/// skips most edges of a graph with a giant component. Then labels cross
/// between nodes by min-label propagation started from the vertices with
/// a neighbour on another node; a node that owns every vertex has none and
/// is done after the first phase. A node most of whose vertices have such
/// a neighbour skips the first phase (see [`boundary`]).
///
/// A union-find root is the least vertex of its tree (a link always hangs
/// the higher root under the lower), so the least vertex of a component
/// starts with its own id as label on its node, and propagation spreads
/// that least id: the labels are those of propagation alone. Propagation
/// ends with every edge's ends labelled alike whichever start each node
/// took: an edge inside a node's union-find starts so, and both ends of
/// every other edge are in the first frontier (the side is `Both`, so each
/// end has the edge in its list), so each end offers its label to the other.
fn wcc(engine: &mut Engine<'_>) -> Result<Vec<u32>> {
    let label = atomics(engine.num_vertices(), AtomicU32::new);
    let mut frontier = match boundary(engine) {
        Some(boundary) => {
            join_owned_components(engine, &label);
            boundary
        }
        None => engine.all_owned(),
    };
    while engine.sum(frontier.len() as u64)? > 0 {
        frontier = engine.process_edges(&frontier, &Wcc { label: &label })?;
    }
    let all: Vec<u32> = label.into_iter().map(AtomicU32::into_inner).collect();
    Ok(owned(engine, all))
}

/// Neighbours of each vertex linked before the largest component is
/// sampled (Afforest's two rounds).
const NEIGHBOUR_ROUNDS: usize = 2;

/// Owned vertices sampled for the largest component.
const COMPONENT_SAMPLES: u64 = 1024;

/// Makes `parent[v]`, for every owned `v`, the least vertex of `v`'s
/// component in the subgraph of the owned vertices (parents of other
/// vertices are left alone). The node's edge lists hold both directions
/// of every edge (its side is `Both`), which Afforest's skipping of the
/// largest component needs: an edge from it to a vertex outside is also in
/// that vertex's list.
fn join_owned_components(engine: &Engine<'_>, parent: &[AtomicU32]) {
    let local = engine.local();
    let owned = engine.owned();
    // On a node that owns only some vertices, the first neighbours in a
    // sorted list are often another node's: rounds take the owned ones.
    let owned_neighbours = |v: u32| {
        local
            .out_edges(v)
            .vertices
            .iter()
            .copied()
            .filter(|&u| local.owns(u))
    };
    for round in 0..NEIGHBOUR_ROUNDS {
        engine.for_each_owned(|v| {
            if let Some(u) = owned_neighbours(v).nth(round) {
                link(parent, u, v);
            }
        });
        compress(engine, parent);
    }
    let Some(largest) = largest_component(parent, owned.clone()) else {
        return;
    };
    engine.for_each_owned(|v| {
        if parent[v as usize].load(Ordering::Relaxed) != largest {
            for u in owned_neighbours(v).skip(NEIGHBOUR_ROUNDS) {
                link(parent, u, v);
            }
        }
    });
    compress(engine, parent);
}

/// Joins the trees of `u` and `v`: climbs both towards their roots until
/// they meet, or until the higher one is a root, which is then hung under
/// the lower by compare-and-swap (a lost race climbs on). Trees only ever
/// hang a higher vertex under a lower one, so each root is its tree's least
/// vertex and no cycle can form.
fn link(parent: &[AtomicU32], u: u32, v: u32) {
    let up = |x: u32| parent[x as usize].load(Ordering::Relaxed);
    let (mut a, mut b) = (up(u), up(v));
    while a != b {
        let (high, low) = (a.max(b), a.min(b));
        let above = up(high);
        if above == low {
            return;
        }
        if above == high
            && parent[high as usize]
                .compare_exchange(high, low, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            return;
        }
        a = up(above);
        b = up(low);
    }
}

/// Points every owned vertex straight at its root.
fn compress(engine: &Engine<'_>, parent: &[AtomicU32]) {
    engine.for_each_owned(|v| {
        let slot = &parent[v as usize];
        loop {
            let p = slot.load(Ordering::Relaxed);
            let root = parent[p as usize].load(Ordering::Relaxed);
            if p == root {
                break;
            }
            slot.store(root, Ordering::Relaxed);
        }
    });
}

/// The root most of [`COMPONENT_SAMPLES`] owned vertices, drawn with a
/// fixed seed, point at (`None` without owned vertices). A wrong guess
/// costs time, never correctness.
fn largest_component(parent: &[AtomicU32], owned: Range<u32>) -> Option<u32> {
    if owned.is_empty() {
        return None;
    }
    let mut rng = Pcg64Mcg::seed_from_u64(0);
    let mut counts = HashMap::new();
    for _ in 0..COMPONENT_SAMPLES {
        let v = rng.random_range(owned.clone());
        *counts
            .entry(parent[v as usize].load(Ordering::Relaxed))
            .or_insert(0u32) += 1;
    }
    counts
        .into_iter()
        .max_by_key(|&(root, count)| (count, std::cmp::Reverse(root)))
        .map(|(root, _)| root)
}

/// The owned vertices with a neighbour on another node, where propagation
/// starts after the union-find phase (none when this node owns every
/// vertex); `None` when they are more than half of the owned vertices
/// with edges. Then the union-find would leave nearly every vertex to
/// propagation anyway and only add its own time: Kronecker 20 with ids
/// permuted, split over 2 nodes of 1 thread, has 500 ms with it against
/// 385 ms without.
fn boundary(engine: &Engine<'_>) -> Option<Frontier> {
    let n = engine.num_vertices();
    let owned = engine.owned();
    if owned == (0..n) {
        return Some(Frontier::of(n, None));
    }
    let local = engine.local();
    // Per owned vertex: 0 without edges, 1 with only owned neighbours, 2
    // with a neighbour on another node.
    let mut kind = vec![0u8; owned.len()];
    engine.map_owned(&mut kind, |v| {
        let mut neighbours = local.out_edges(v).vertices.iter();
        match neighbours.len() {
            0 => 0,
            _ if neighbours.any(|&u| !local.owns(u)) => 2,
            _ => 1,
        }
    });
    let linked = kind.iter().filter(|&&k| k > 0).count();
    let start = owned.start;
    let crossing: Vec<u32> = owned.filter(|&v| kind[(v - start) as usize] == 2).collect();
    (crossing.len() <= linked / 2).then(|| Frontier::of(n, crossing))
}

/// One PageRank iteration in one pass: every vertex gathers the
/// contributions `rank[u] / out_degree(u)` of its in-neighbours from
/// `read`, and at once settles its new rank and leaves its contribution
/// to the next iteration in `write` (the two trade places every
/// iteration, so a gather never sees a contribution of the iteration it
/// is in). Pulled, that is the whole iteration: GAPBS's one pass per
/// iteration, but Jacobi's (Graphalytics' definition), not its
/// Gauss-Seidel. The other nodes' contributions are their mirrors in
/// `read`, set by the pull's round of mirror states. Pushed,
/// contributions sum into `sum` (a master's, or a mirror's, which is
/// forwarded), made at the first push (a run that only pulls never
/// touches its 8 bytes a vertex), and a pass after the superstep settles
/// them.
///
/// No array holds the ranks: a vertex with out-edges has its rank in its
/// contribution times its degree, and a sink, whose contribution no
/// gather reads (it is no edge's source), holds its rank in its
/// contribution's slot, for the sum spread over all vertices. Before,
/// an iteration was three passes (contributions out, the gather into an
/// `f64` rank array, the ranks settled); on Kronecker 20 with 2 threads
/// the two light passes were 18% of the compute time.
///
/// Contributions are held as `f32`, as GAPBS holds its scores: the gather
/// reads one at random per edge, and half the bytes is half the cache
/// lines; sums stay `f64`. A contribution's rounding (2^-24 relative) is
/// far inside Graphalytics' 1e-4 tolerance, and so are the ranks taken
/// from them.
struct PageRank<'a> {
    /// This iteration's contributions, `f32` bits over all of V.
    read: &'a [AtomicU32],
    /// The next iteration's, of the owned vertices from `first`.
    write: &'a [AtomicU32],
    first: u32,
    /// The graph's offsets, for the owned vertices' out-degrees.
    offsets: &'a [u64],
    /// The rank of a vertex that gathers nothing this iteration.
    base: f64,
    damping: f64,
    /// Pushed sums as `f64` bits, over all of V.
    sum: &'a OnceLock<Vec<AtomicU64>>,
}

impl PageRank<'_> {
    fn sum(&self) -> &[AtomicU64] {
        self.sum.get_or_init(|| {
            let n = u32::try_from(self.read.len()).expect("vertex ids fit u32");
            atomics(n, |_| AtomicU64::new(0))
        })
    }

    /// Settles owned `v`'s rank from what it `gathered` into its
    /// contribution to the next iteration.
    #[inline]
    fn settle(&self, v: u32, gathered: f64) {
        let rank = self.base + self.damping * gathered;
        let degree = out_degree(self.offsets, v);
        self.write[(v - self.first) as usize]
            .store(contribution(rank, degree).to_bits(), Ordering::Relaxed);
    }

    /// After a pushed superstep: settles every owned vertex from its sum
    /// (none on a node that no contribution reached), leaving the sums
    /// empty for the next.
    fn settle_pushed(&self, engine: &Engine<'_>) {
        let sum = self.sum.get();
        engine.for_each_owned(|v| {
            let gathered = sum.map_or(0.0, |sum| {
                f64::from_bits(sum[v as usize].swap(0f64.to_bits(), Ordering::Relaxed))
            });
            self.settle(v, gathered);
        });
    }
}

/// A contribution as the gathers read it.
#[inline]
fn load(contribution: &AtomicU32) -> f32 {
    f32::from_bits(contribution.load(Ordering::Relaxed))
}

/// Out-degree of `v` in the graph of `offsets`.
#[inline]
fn out_degree(offsets: &[u64], v: u32) -> u64 {
    offsets[v as usize + 1] - offsets[v as usize]
}

/// What a vertex of `rank` and out-`degree` gives each out-neighbour, as
/// the `f32` the gathers read; a sink's rank itself.
#[inline]
#[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)] // Degrees far below 2^52.
fn contribution(rank: f64, degree: u64) -> f32 {
    match degree {
        0 => rank as f32,
        degree => (rank / degree as f64) as f32,
    }
}

/// The rank a vertex of out-`degree` left as its `contribution`.
#[allow(clippy::cast_precision_loss)] // Degrees far below 2^52.
fn rank_of(contribution: f32, degree: u64) -> f64 {
    f64::from(contribution) * degree.max(1) as f64
}

impl EdgeProgram for PageRank<'_> {
    fn combine(&self) -> Combine {
        Combine::Sum
    }

    fn activates(&self) -> bool {
        false
    }

    fn state(&self, src: u32) -> u64 {
        f64::from(load(&self.read[src as usize])).to_bits()
    }

    fn signal(&self, _src: u32, contribution: u64, _dst: u32, _weight: f32) -> Option<u64> {
        Some(contribution)
    }

    fn gather(&self, _dst: u32, edges: Edges<'_>, _active: &Frontier) -> Option<u64> {
        let mut gathered = 0.0;
        for &src in edges.vertices {
            gathered += f64::from(load(&self.read[src as usize]));
        }
        Some(gathered.to_bits())
    }

    /// Exact: `state` is an `f32` widened.
    #[allow(clippy::cast_possible_truncation)]
    fn mirror(&self, src: u32, state: u64) {
        let contribution = f64::from_bits(state) as f32;
        self.read[src as usize].store(contribution.to_bits(), Ordering::Relaxed);
    }

    fn reduce(&self, dst: u32, bits: u64) -> bool {
        let x = f64::from_bits(bits);
        let slot = &self.sum()[dst as usize];
        let mut old = slot.load(Ordering::Relaxed);
        while let Err(seen) = slot.compare_exchange_weak(
            old,
            (f64::from_bits(old) + x).to_bits(),
            Ordering::Relaxed,
            Ordering::Relaxed,
        ) {
            old = seen;
        }
        true
    }

    fn assign(&self, dst: u32, bits: u64) -> bool {
        self.settle(dst, f64::from_bits(bits));
        false
    }

    fn take(&self, mirror: u32) -> u64 {
        self.sum()[mirror as usize].swap(0f64.to_bits(), Ordering::Relaxed)
    }
}

fn pagerank(engine: &mut Engine<'_>, damping: f64, iterations: u32) -> Result<Vec<f64>> {
    let n = engine.num_vertices();
    let owned = engine.owned();
    let size = f64::from(n);
    let all = engine.all_owned();
    let offsets = engine.graph().offsets();
    let degree = |v: u32| out_degree(offsets, v);
    // Owned vertices without out-edges, whose rank is spread over all.
    let sinks: Vec<u32> = engine.install(|| {
        owned
            .clone()
            .into_par_iter()
            .filter(|&v| degree(v) == 0)
            .collect()
    });
    // Contributions: over all of V (masters, and mirrors that a pull's
    // gathers read), and the owned vertices' next ones.
    let mut read = atomics(n, |_| AtomicU32::new(0));
    let mut write = atomics(owned.end - owned.start, |_| AtomicU32::new(0));
    engine.for_each_owned(|v| {
        let share = contribution(1.0 / size, degree(v));
        read[v as usize].store(share.to_bits(), Ordering::Relaxed);
    });
    let sum = OnceLock::new();
    for _ in 0..iterations {
        let sink_sum = engine.sum_f64(sink_rank(engine, &sinks, &read))?;
        let program = PageRank {
            read: &read,
            write: &write,
            first: owned.start,
            offsets,
            base: (1.0 - damping) / size + damping / size * sink_sum,
            damping,
            sum: &sum,
        };
        engine.process_edges(&all, &program)?;
        if engine.supersteps().last().map(|s| s.direction) == Some(Direction::Push) {
            program.settle_pushed(engine);
        }
        // The next contributions become the ones read: the arrays trade
        // places on a node that owns every vertex, the owned part of `read`
        // otherwise (a node holds the next ones of its own vertices only).
        if write.len() == read.len() {
            std::mem::swap(&mut read, &mut write);
        } else {
            read[owned.start as usize..owned.end as usize].swap_with_slice(&mut write);
        }
    }
    drop(write);
    let mut ranks = vec![0.0; owned.len()];
    engine.map_owned(&mut ranks, |v| rank_of(load(&read[v as usize]), degree(v)));
    Ok(ranks)
}

/// Sinks summed by [`sink_rank`] a run at a time.
const SINK_RUN: usize = 1 << 14;

/// The rank held by `sinks` (owned vertices without out-edges, whose
/// contribution slot in `read` is their rank): runs of them summed in
/// parallel and the runs' sums added in order, so the sum is the same
/// whatever the threads. Summed on one thread, the 402,403 sinks of
/// Kronecker 20 took 0.8 ms an iteration.
fn sink_rank(engine: &Engine<'_>, sinks: &[u32], read: &[AtomicU32]) -> f64 {
    let runs: Vec<f64> = engine.install(|| {
        sinks
            .par_chunks(SINK_RUN)
            .map(|run| {
                run.iter()
                    .map(|&v| f64::from(load(&read[v as usize])))
                    .sum()
            })
            .collect()
    });
    runs.iter().sum()
}

/// CDLP, Graphalytics' synchronous label propagation: each iteration
/// every vertex takes the most frequent label among its neighbours' (the
/// smallest of those tied), counted over its list, parallel edges as
/// often as they occur. A worker sorts the labels of a list in a buffer
/// of its own, reused from vertex to vertex; a list of one label needs no
/// sort.
fn cdlp(engine: &mut Engine<'_>, iterations: u32) -> Result<Vec<u32>> {
    let n = engine.num_vertices();
    let owned_range = engine.owned();
    let mut labels: Vec<u32> = (0..n).collect();
    let next = atomics(owned_range.end - owned_range.start, |_| AtomicU32::new(0));
    for _ in 0..iterations {
        let local = engine.local();
        let read: &[u32] = &labels;
        engine.for_each_owned_with(|seen: &mut Vec<u32>, v| {
            let label = match local.out_edges(v).vertices {
                [] => read[v as usize],
                &[u] => read[u as usize],
                neighbours => {
                    seen.clear();
                    seen.extend(neighbours.iter().map(|&u| read[u as usize]));
                    seen.sort_unstable();
                    most_frequent(seen)
                }
            };
            next[(v - owned_range.start) as usize].store(label, Ordering::Relaxed);
        });
        let mine: Vec<u32> = next.iter().map(|l| l.load(Ordering::Relaxed)).collect();
        labels = engine.gather_owned(mine)?;
    }
    Ok(owned(engine, labels))
}

/// The most frequent of the non-empty `sorted` labels, the smallest of
/// those tied: the first of the longest runs.
fn most_frequent(sorted: &[u32]) -> u32 {
    sorted
        .chunk_by(|a, b| a == b)
        .fold(&sorted[..0], |best, run| {
            if run.len() > best.len() {
                run
            } else {
                best
            }
        })[0]
}
