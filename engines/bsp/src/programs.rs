//! The six Graphalytics algorithms written with the engine's API: BFS,
//! SSSP and WCC as min-combining edge programs over a shrinking frontier,
//! PageRank as a sum-combining edge program over all vertices, CDLP and
//! LCC with `process_vertices` over the owned vertices' neighbourhoods.
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
//! (an all-gather, |V| labels in all). LCC reads its neighbours' out-edges
//! from the graph file, which every node maps.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use crate::algorithm::{Algorithm, Values, UNREACHED};
use crate::engine::{Combine, EdgeProgram, Edges, Engine, Frontier, Side};
use crate::Result;

/// The edges `algorithm` reads.
pub fn side(algorithm: &Algorithm) -> Side {
    match algorithm {
        Algorithm::Bfs { .. } | Algorithm::Sssp { .. } | Algorithm::PageRank { .. } => Side::Out,
        Algorithm::Wcc | Algorithm::Cdlp { .. } | Algorithm::Lcc => Side::Both,
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
        Algorithm::Lcc => Values::Reals(lcc(engine)),
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

struct Bfs<'a> {
    depth: &'a [AtomicU64],
    next_depth: u64,
}

impl EdgeProgram for Bfs<'_> {
    fn signal(&self, _src: u32, _state: u64, dst: u32, _weight: f32) -> Option<u64> {
        (self.depth[dst as usize].load(Ordering::Relaxed) == UNREACHED).then_some(self.next_depth)
    }

    fn wants_pull(&self, dst: u32) -> bool {
        self.depth[dst as usize].load(Ordering::Relaxed) == UNREACHED
    }

    fn gather(&self, _dst: u32, edges: Edges<'_>, active: &Frontier) -> Option<u64> {
        // Beamer's bottom-up step: the first active parent settles it.
        edges
            .vertices
            .iter()
            .any(|&src| active.contains(src))
            .then_some(self.next_depth)
    }

    fn reduce(&self, dst: u32, depth: u64) -> bool {
        self.depth[dst as usize]
            .compare_exchange(UNREACHED, depth, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }

    /// Every write of a superstep stores the same depth, so a store after
    /// a load is enough: a message from another node racing it stores the
    /// same value, and the frontier's bitmap takes `dst` once.
    fn assign(&self, dst: u32, depth: u64) -> bool {
        let slot = &self.depth[dst as usize];
        let unreached = slot.load(Ordering::Relaxed) == UNREACHED;
        if unreached {
            slot.store(depth, Ordering::Relaxed);
        }
        unreached
    }
}

fn bfs(engine: &mut Engine<'_>, source: u32) -> Result<Vec<u64>> {
    let depth = atomics(engine.num_vertices(), |_| AtomicU64::new(UNREACHED));
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
    let all: Vec<u64> = depth.into_iter().map(AtomicU64::into_inner).collect();
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

    fn reduce(&self, dst: u32, bits: u64) -> bool {
        self.dist[dst as usize].fetch_min(bits, Ordering::Relaxed) > bits
    }
}

fn sssp(engine: &mut Engine<'_>, source: u32) -> Result<Vec<f64>> {
    let dist = atomics(engine.num_vertices(), |_| {
        AtomicU64::new(f64::INFINITY.to_bits())
    });
    dist[source as usize].store(0f64.to_bits(), Ordering::Relaxed);
    let mut frontier = start(engine, source);
    while engine.sum(frontier.len() as u64)? > 0 {
        frontier = engine.process_edges(&frontier, &Sssp { dist: &dist })?;
    }
    let all: Vec<f64> = dist
        .into_iter()
        .map(|d| f64::from_bits(d.into_inner()))
        .collect();
    Ok(owned(engine, all))
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

    fn reduce(&self, dst: u32, label: u64) -> bool {
        let label = u32::try_from(label).expect("labels are vertex ids");
        self.label[dst as usize].fetch_min(label, Ordering::Relaxed) > label
    }
}

fn wcc(engine: &mut Engine<'_>) -> Result<Vec<u32>> {
    let label = atomics(engine.num_vertices(), AtomicU32::new);
    let mut frontier = engine.all_owned();
    while engine.sum(frontier.len() as u64)? > 0 {
        frontier = engine.process_edges(&frontier, &Wcc { label: &label })?;
    }
    let all: Vec<u32> = label.into_iter().map(AtomicU32::into_inner).collect();
    Ok(owned(engine, all))
}

/// One PageRank iteration's edge phase: every vertex gathers the
/// contributions `rank[u] / out_degree(u)` of its in-neighbours: what this
/// node's sources give a master, pulled, into `local`; everything else
/// (pushed, or from other nodes, or into mirrors) into `sum`.
///
/// Contributions are held as `f32`, as GAPBS holds its scores: the gather
/// reads one at random per edge, and half the bytes is half the cache
/// lines; sums and ranks stay `f64`. A contribution's rounding (2^-24
/// relative) is far inside Graphalytics' 1e-4 tolerance.
struct PageRank<'a> {
    contribution: &'a [f32],
    /// Pulled sums of the masters as `f64` bits.
    local: &'a [AtomicU64],
    /// Other sums as `f64` bits.
    sum: &'a [AtomicU64],
}

impl EdgeProgram for PageRank<'_> {
    fn combine(&self) -> Combine {
        Combine::Sum
    }

    fn activates(&self) -> bool {
        false
    }

    fn state(&self, src: u32) -> u64 {
        f64::from(self.contribution[src as usize]).to_bits()
    }

    fn signal(&self, _src: u32, contribution: u64, _dst: u32, _weight: f32) -> Option<u64> {
        Some(contribution)
    }

    fn gather(&self, _dst: u32, edges: Edges<'_>, _active: &Frontier) -> Option<u64> {
        let mut gathered = 0.0;
        for &src in edges.vertices {
            gathered += f64::from(self.contribution[src as usize]);
        }
        Some(gathered.to_bits())
    }

    fn reduce(&self, dst: u32, bits: u64) -> bool {
        let x = f64::from_bits(bits);
        let slot = &self.sum[dst as usize];
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
        self.local[dst as usize].store(bits, Ordering::Relaxed);
        false
    }

    fn take(&self, mirror: u32) -> u64 {
        self.sum[mirror as usize].swap(0f64.to_bits(), Ordering::Relaxed)
    }
}

fn pagerank(engine: &mut Engine<'_>, damping: f64, iterations: u32) -> Result<Vec<f64>> {
    let n = engine.num_vertices();
    let owned = engine.owned();
    let size = f64::from(n);
    let all = engine.all_owned();
    let local = engine.local();
    // Owned vertices without out-edges, whose rank is spread over all.
    let sinks: Vec<u32> = owned
        .clone()
        .filter(|&v| local.graph_degree(v) == 0)
        .collect();
    // Ranks of the owned vertices; contributions over all of V (sources
    // are owned, but edges index them by global id).
    let mut rank = vec![1.0 / size; owned.len()];
    let mut contribution = vec![0f32; n as usize];
    let local_sum = atomics(n, |_| AtomicU64::new(0));
    let sum = atomics(n, |_| AtomicU64::new(0));
    for _ in 0..iterations {
        let local = engine.local();
        let sink_rank: f64 = sinks
            .iter()
            .map(|&v| rank[(v - owned.start) as usize])
            .sum();
        let sink_sum = engine.sum_f64(sink_rank)?;
        let mine = &mut contribution[owned.start as usize..owned.end as usize];
        engine.map_owned(mine, |v| {
            let degree = local.graph_degree(v);
            #[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation)]
            // Degrees far below 2^52; a contribution is held as f32.
            let share = if degree == 0 {
                0.0
            } else {
                (rank[(v - owned.start) as usize] / degree as f64) as f32
            };
            share
        });
        engine.process_edges(
            &all,
            &PageRank {
                contribution: &contribution,
                local: &local_sum,
                sum: &sum,
            },
        )?;
        let base = (1.0 - damping) / size + damping / size * sink_sum;
        // Taking the sums leaves them zero for the next iteration (a
        // mirror's sum is taken when it is forwarded).
        engine.map_owned(&mut rank, |v| {
            let zero = 0f64.to_bits();
            let gathered = f64::from_bits(local_sum[v as usize].swap(zero, Ordering::Relaxed))
                + f64::from_bits(sum[v as usize].swap(zero, Ordering::Relaxed));
            base + damping * gathered
        });
    }
    Ok(rank)
}

fn cdlp(engine: &mut Engine<'_>, iterations: u32) -> Result<Vec<u32>> {
    let n = engine.num_vertices();
    let owned_range = engine.owned();
    let mut labels: Vec<u32> = (0..n).collect();
    for _ in 0..iterations {
        let next = atomics(owned_range.end - owned_range.start, |_| AtomicU32::new(0));
        let local = engine.local();
        engine.process_vertices(None, |v| {
            let mut seen: Vec<u32> = local
                .out_edges(v)
                .vertices
                .iter()
                .map(|&u| labels[u as usize])
                .collect();
            // Most frequent, then smallest: runs of the sorted labels, the
            // first longest run winning; no neighbours: keep the label.
            seen.sort_unstable();
            let label = seen
                .chunk_by(|a, b| a == b)
                .fold(None, |best: Option<&[u32]>, run| match best {
                    Some(best) if best.len() >= run.len() => Some(best),
                    _ => Some(run),
                })
                .map_or(labels[v as usize], |run| run[0]);
            next[(v - owned_range.start) as usize].store(label, Ordering::Relaxed);
            0u64
        });
        let mine: Vec<u32> = next.into_iter().map(AtomicU32::into_inner).collect();
        labels = engine.gather_owned(&mine)?;
    }
    Ok(owned(engine, labels))
}

#[allow(clippy::cast_precision_loss)] // Counts far below 2^52.
fn lcc(engine: &Engine<'_>) -> Vec<f64> {
    let graph = engine.graph();
    let owned_range = engine.owned();
    // Lists are sorted; they can be searched as they are without repeats,
    // otherwise each is deduplicated first.
    let local = engine.local();
    let distinct = graph.has_distinct_targets();
    let lcc = atomics(owned_range.end - owned_range.start, |_| AtomicU64::new(0));
    engine.process_vertices(None, |v| {
        let mut neighbours = local.out_edges(v).vertices.to_vec();
        neighbours.sort_unstable();
        neighbours.dedup();
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
            links += short
                .iter()
                .filter(|w| long.binary_search(w).is_ok())
                .count() as u64;
        }
        let coefficient = links as f64 / (d * (d - 1)) as f64;
        lcc[(v - owned_range.start) as usize].store(coefficient.to_bits(), Ordering::Relaxed);
        0u64
    });
    lcc.into_iter()
        .map(|c| f64::from_bits(c.into_inner()))
        .collect()
}
