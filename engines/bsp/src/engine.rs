//! The BSP engine of one node: the paper's `process_vertices` and
//! `process_edges` over a frontier, run by worker threads that grab 64
//! vertices at a time from one shared counter (RGraph's task grabbing).
//!
//! `process_edges` runs one superstep in either direction. Push: every
//! active vertex relaxes its edges and activates the targets it changed
//! (RGraph's only mode). Pull: every vertex that wants an update reads its
//! in-edges from active sources (Gemini's dense mode, Beamer's bottom-up
//! step). Under [`Direction::Auto`] a superstep pulls when the frontier's
//! edges exceed |E|/20 (Gemini's threshold), and pushes otherwise.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use quiver_csr::Graph;
use quiver_run::Progress;
use rayon::ThreadPool;
use serde::{Deserialize, Serialize};

use crate::transpose::InEdges;

/// Vertices a worker claims per grab: RGraph's and Gemini's `min_work`.
pub const GRAB: usize = 64;

/// A superstep pulls when its frontier's edges exceed |E| / this.
pub const PULL_THRESHOLD: u64 = 20;

/// Which way supersteps move values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Active vertices write to their neighbours.
    Push,
    /// Vertices read from their active neighbours.
    Pull,
    /// Per superstep: pull when the frontier is dense, push when sparse.
    #[default]
    Auto,
}

/// The edges a program reads: out-edges (push along them, pull from the
/// in-edges), or both directions (the graph taken as undirected).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// Edges as stored.
    Out,
    /// Every edge in both directions.
    Both,
}

/// A set of vertices bit by bit, set concurrently.
#[derive(Debug)]
pub struct Bitmap {
    words: Vec<AtomicU64>,
}

impl Bitmap {
    /// An empty set over `n` vertices.
    pub fn new(n: u32) -> Bitmap {
        Bitmap {
            words: (0..(n as usize).div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect(),
        }
    }

    /// Adds `v`; returns whether it was absent.
    #[inline]
    pub fn insert(&self, v: u32) -> bool {
        let bit = 1u64 << (v % 64);
        self.words[v as usize / 64].fetch_or(bit, Ordering::Relaxed) & bit == 0
    }

    /// Whether `v` is in the set.
    #[inline]
    pub fn contains(&self, v: u32) -> bool {
        self.words[v as usize / 64].load(Ordering::Relaxed) & (1u64 << (v % 64)) != 0
    }
}

/// The active vertices of a superstep: a bitmap for pulling and lookups,
/// and the same vertices as a list for pushing.
#[derive(Debug)]
pub struct Frontier {
    bits: Bitmap,
    list: Vec<u32>,
}

impl Frontier {
    /// The frontier holding `vertices` (distinct) of a graph of `n`.
    pub fn of(n: u32, vertices: impl IntoIterator<Item = u32>) -> Frontier {
        let bits = Bitmap::new(n);
        let list = vertices.into_iter().filter(|&v| bits.insert(v)).collect();
        Frontier { bits, list }
    }

    /// Every vertex of a graph of `n`.
    pub fn all(n: u32) -> Frontier {
        Frontier::of(n, 0..n)
    }

    /// Number of active vertices.
    pub fn len(&self) -> usize {
        self.list.len()
    }

    /// Whether no vertex is active.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// Whether `v` is active.
    #[inline]
    pub fn contains(&self, v: u32) -> bool {
        self.bits.contains(v)
    }

    /// The active vertices, in no particular order.
    pub fn vertices(&self) -> &[u32] {
        &self.list
    }
}

/// What one superstep of `process_edges` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Superstep {
    /// The direction it ran in.
    pub direction: Direction,
    /// Active vertices at its start.
    pub active: u64,
    /// Edges it read.
    pub edges: u64,
}

/// One vertex's edges on the side a program reads.
#[derive(Clone, Copy, Debug)]
pub struct Edges<'a> {
    /// Neighbours.
    pub vertices: &'a [u32],
    /// The edges' weights, beside `vertices`, on weighted graphs.
    pub weights: Option<&'a [f32]>,
}

/// A superstep's computation along edges, in both directions: the paper's
/// `compute`/`reduce` pair as push and pull.
pub trait EdgeProgram: Sync {
    /// The edges this program reads.
    fn side(&self) -> Side {
        Side::Out
    }

    /// Whether the program can push at all (default: yes). One that cannot
    /// (CDLP needs every neighbour's label at once) always pulls.
    fn can_push(&self) -> bool {
        true
    }

    /// Push: active `src` relaxes its `edges` (one list per side read);
    /// `activate` each target it changed (duplicates are dropped).
    fn push(&self, src: u32, edges: &[Edges<'_>], activate: &mut dyn FnMut(u32));

    /// Whether `dst` takes part in a pull superstep at all (default: yes).
    fn wants_pull(&self, _dst: u32) -> bool {
        true
    }

    /// Pull: `dst` reads its incoming `edges` (one list per side read)
    /// from sources in `active`; returns whether `dst` becomes active.
    fn pull(&self, dst: u32, edges: &[Edges<'_>], active: &Frontier) -> bool;
}

/// The engine of one node: the graph, its in-edges and the worker threads.
pub struct Engine<'g> {
    graph: &'g Graph,
    progress: &'g dyn Progress,
    /// In-edges; `None` when the graph is undirected (they are the out-edges).
    inbound: Option<InEdges>,
    pool: ThreadPool,
    direction: Direction,
    supersteps: Vec<Superstep>,
}

impl<'g> Engine<'g> {
    /// An engine over `graph` with `threads` workers (at least 1) running
    /// supersteps in `direction`, telling `progress` of each. Builds the
    /// in-edges of a directed graph.
    pub fn new(
        graph: &'g Graph,
        threads: usize,
        direction: Direction,
        progress: &'g dyn Progress,
    ) -> crate::Result<Self> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("bsp-worker-{i}"))
            .build()
            .map_err(crate::Error::Threads)?;
        let inbound = (!graph.is_undirected()).then(|| pool.install(|| InEdges::of(graph)));
        Ok(Engine {
            graph,
            progress,
            inbound,
            pool,
            direction,
            supersteps: Vec::new(),
        })
    }

    /// The graph.
    pub fn graph(&self) -> &'g Graph {
        self.graph
    }

    /// Number of vertices.
    pub fn num_vertices(&self) -> u32 {
        self.graph.num_vertices()
    }

    /// Number of worker threads.
    pub fn threads(&self) -> usize {
        self.pool.current_num_threads()
    }

    /// The supersteps run so far.
    pub fn supersteps(&self) -> &[Superstep] {
        &self.supersteps
    }

    /// Out-edges of `v`.
    pub fn out_edges(&self, v: u32) -> Edges<'_> {
        Edges {
            vertices: self.graph.neighbors(v),
            weights: self.graph.edge_weights(v),
        }
    }

    /// In-edges of `v`.
    pub fn in_edges(&self, v: u32) -> Edges<'_> {
        match &self.inbound {
            Some(inbound) => Edges {
                vertices: inbound.sources(v),
                weights: inbound.weights(v),
            },
            None => self.out_edges(v),
        }
    }

    /// The paper's `process_vertices`: `work` on every vertex of `active`
    /// (all vertices when `None`), in parallel; returns the sum of its
    /// results.
    pub fn process_vertices<R>(
        &self,
        active: Option<&Frontier>,
        work: impl Fn(u32) -> R + Sync,
    ) -> R
    where
        R: Default + Send + std::ops::AddAssign,
    {
        let sums = match active {
            Some(frontier) => self.grab(frontier.len(), |range, sum: &mut R| {
                for &v in &frontier.vertices()[range] {
                    *sum += work(v);
                }
            }),
            None => self.grab(self.num_vertices() as usize, |range, sum: &mut R| {
                for v in range {
                    *sum += work(vertex(v));
                }
            }),
        };
        let mut total = R::default();
        for sum in sums {
            total += sum;
        }
        total
    }

    /// The paper's `process_edges`: one superstep of `program` from
    /// `active`, in the engine's direction (or the one `Auto` picks);
    /// returns the frontier it activated.
    pub fn process_edges(&mut self, active: &Frontier, program: &impl EdgeProgram) -> Frontier {
        let side = program.side();
        let active_edges: u64 = self.pool.install(|| {
            use rayon::prelude::*;
            active
                .vertices()
                .par_iter()
                .map(|&v| self.degree(v, side))
                .sum::<u64>()
        });
        let direction = match self.direction {
            _ if !program.can_push() => Direction::Pull,
            Direction::Auto => {
                let total = match side {
                    Side::Out => self.graph.num_edges(),
                    Side::Both => 2 * self.graph.num_edges(),
                };
                if active_edges > total / PULL_THRESHOLD {
                    Direction::Pull
                } else {
                    Direction::Push
                }
            }
            fixed => fixed,
        };
        let next = Bitmap::new(self.num_vertices());
        let (lists, edges) = match direction {
            Direction::Push => {
                let parts = self.grab(active.len(), |range, local: &mut Vec<u32>| {
                    for &src in &active.vertices()[range] {
                        let (sides, count) = self.sides(src, side, false);
                        program.push(src, &sides[..count], &mut |dst| {
                            if next.insert(dst) {
                                local.push(dst);
                            }
                        });
                    }
                });
                (parts, active_edges)
            }
            Direction::Pull | Direction::Auto => {
                let read = AtomicU64::new(0);
                let parts = self.grab(
                    self.num_vertices() as usize,
                    |range, local: &mut Vec<u32>| {
                        let mut edges_read = 0;
                        for dst in range.map(vertex) {
                            if !program.wants_pull(dst) {
                                continue;
                            }
                            let (sides, count) = self.sides(dst, side, true);
                            edges_read += sides[..count]
                                .iter()
                                .map(|e| e.vertices.len() as u64)
                                .sum::<u64>();
                            if program.pull(dst, &sides[..count], active) && next.insert(dst) {
                                local.push(dst);
                            }
                        }
                        read.fetch_add(edges_read, Ordering::Relaxed);
                    },
                );
                (parts, read.into_inner())
            }
        };
        self.supersteps.push(Superstep {
            direction,
            active: active.len() as u64,
            edges,
        });
        self.progress.advance(1);
        Frontier {
            bits: next,
            list: lists.concat(),
        }
    }

    fn degree(&self, v: u32, side: Side) -> u64 {
        match side {
            Side::Out => self.graph.degree(v),
            Side::Both => self.graph.degree(v) + self.in_edges(v).vertices.len() as u64,
        }
    }

    /// `v`'s edge lists on `side`, the first `count` of the pair valid:
    /// out-edges to push along or in-edges to pull from (`inbound`), and
    /// the other direction too when the program reads both sides of a
    /// directed graph.
    fn sides(&self, v: u32, side: Side, inbound: bool) -> ([Edges<'_>; 2], usize) {
        let (first, second) = if inbound {
            (self.in_edges(v), self.out_edges(v))
        } else {
            (self.out_edges(v), self.in_edges(v))
        };
        let count = if side == Side::Both && self.inbound.is_some() {
            2
        } else {
            1
        };
        ([first, second], count)
    }

    /// Task grabbing: every worker claims [`GRAB`] consecutive items of
    /// `0..total` from one shared counter until none are left, running
    /// `work` on each claim with its own `S`; returns every worker's `S`.
    fn grab<S: Default + Send>(
        &self,
        total: usize,
        work: impl Fn(Range<usize>, &mut S) + Sync,
    ) -> Vec<S> {
        let next = AtomicUsize::new(0);
        self.pool.broadcast(|_| {
            let mut state = S::default();
            loop {
                let start = next.fetch_add(GRAB, Ordering::Relaxed);
                if start >= total {
                    break;
                }
                work(start..(start + GRAB).min(total), &mut state);
            }
            state
        })
    }
}

impl std::fmt::Debug for Engine<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("vertices", &self.num_vertices())
            .field("threads", &self.threads())
            .field("direction", &self.direction)
            .field("supersteps", &self.supersteps.len())
            .finish_non_exhaustive()
    }
}

/// An index below |V| as a vertex id.
#[inline]
fn vertex(i: usize) -> u32 {
    u32::try_from(i).expect("vertex indices are below |V|, which fits u32")
}
