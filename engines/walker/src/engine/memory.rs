//! The in-memory reference: the whole graph loaded once; first-order walks
//! dense enough on the graph's data move hop by hop through cache-sized
//! partitions (FlashMob's design), sparser ones, Node2Vec walks and those
//! of apps that write by walk in interleaved lanes (see
//! [`Engine::moves_in_lanes`] and [`PARTITION_WALKS_PER_LINE`]).

use std::ops::RangeInclusive;
use std::sync::atomic::Ordering;

use rayon::prelude::*;

use super::walks::PooledWalk;
use super::{Engine, InFlight, CHUNK};
use crate::app::{Visit, WalkApp};
use crate::loaded::{BlockView, LoadedBlock, Locator};
use crate::rng::KeyedRng;
use crate::spec::{look_ahead, step, Adjacency, Lookahead, Step};
use crate::Result;
use quiver_run::Stopwatch;

/// Walks that in-memory walking sorts and moves together (it holds two
/// copies of them).
pub(super) const PARTITIONED_BATCH: u64 = 1 << 24;

/// The most chunks of walks in-memory walking moves in lanes at once:
/// this many (6 MiB of exact walks), or 4 a thread if that is more, so
/// that every thread keeps busy; a small budget allows fewer.
const LANES_BATCH_CHUNKS: usize = 64;

/// Fewest walks in-memory walking moves together, whatever the budget:
/// fewer would leave most partitions without walks each hop.
pub(super) const MIN_PARTITIONED_BATCH: u64 = 1 << 16;

/// Pieces the first hop's sort counts in parallel.
pub(super) const FIRST_RUNS: usize = 64;

/// First-order walks in memory move by partition when a batch holds at
/// least this many walks per 64-byte line of the graph's data, and in
/// lanes otherwise. A partition's walks pay for the sort of every walk each
/// hop, for the sweep of its data into cache and for its counts; lanes pay
/// for each step's reads from memory, overlapped over 64 walks. Measured
/// alternately on permuted Kronecker graphs (2 threads, raw walks that
/// never stop, steps/s of compute, partitioned against lanes): scale 20
/// (128 MiB, 2.1M lines) with 10M walks of 10 steps (4.7 a line) 221M
/// against 197M, with 4M (1.9 a line) 201-206M against 190-194M, with 2M
/// of 40 steps 220M against 254-258M, a DeepWalk (a walk of 80 from every
/// vertex) 140M against 261M; scale 22 (522 MiB, beyond this machine's
/// last-level cache) with batches of 16.7M walks (2.0 a line) 104-143M
/// against 129-161M.
pub(super) const PARTITION_WALKS_PER_LINE: u64 = 4;

/// A partition's data is swept into cache when it has at least one walk
/// per this many of its cache lines.
pub(super) const WARM_LINES_PER_WALK: u64 = 8;

impl<'a, A: WalkApp, W: PooledWalk> Engine<'a, A, W> {
    pub(super) fn run_in_memory(&mut self) -> Result<A::State> {
        let block = self.blocks.get(quiver_csr::BlockId(0)).clone();
        let reading = Stopwatch::start();
        let loaded = LoadedBlock::read(
            &self.file,
            self.source(),
            &block,
            self.weighted,
            &self.layout,
        )?;
        self.load_ns += reading.elapsed_ns();
        self.stats.blocks_loaded += 1;
        self.stats.hold(loaded.memory_bytes());
        if loaded.memory_bytes() > self.config.mem_budget {
            tracing::warn!(
                "memory mode holds the whole graph ({}), more than the memory budget ({}): \
                 its peak will exceed the budget (graphwalker mode stays within it)",
                quiver_io::size::format_bytes(loaded.memory_bytes()),
                quiver_io::size::format_bytes(self.config.mem_budget)
            );
        }
        if !self.moves_in_lanes() {
            let (positions_only, batch_walks) = self.partitioned_batch();
            if batch_walks >= PARTITION_WALKS_PER_LINE * (loaded.data_bytes() / 64) {
                return self.run_partitioned(&loaded, positions_only, batch_walks);
            }
        }
        let total = self.spec.starts.total(self.num_vertices);
        let mut state = self.app.new_state();
        let walk_bytes = std::mem::size_of::<InFlight<W>>() as u64;
        let chunks = LANES_BATCH_CHUNKS.max(4 * rayon::current_num_threads());
        let batch = self.memory_batch(walk_bytes, 1, CHUNK as u64..=(chunks * CHUNK) as u64);
        let mut first = 0;
        while first < total {
            let last = (first + batch).min(total);
            let walks = self.start_all(first..last, |walk| walk);
            let bytes = walks.len() as u64 * walk_bytes;
            self.stats.hold(bytes);
            let (moved, s) = self.advance(&loaded.view(), walks, false)?;
            assert!(
                moved.is_empty(),
                "no walk can leave a block holding every vertex"
            );
            self.app.merge(&mut state, s);
            self.stats.release(bytes);
            first = last;
            self.report_progress(total - last)?;
        }
        Ok(state)
    }

    /// In memory, first-order walks move hop by hop in partition order
    /// (FlashMob's design): each hop, a counting sort groups a batch's walks
    /// by the partition (about [`Config::partition_bytes`] of graph data)
    /// holding their vertex, then each partition's data is swept into the
    /// CPU's caches and its walks step there, partitions in parallel.
    ///
    /// When nothing reads more of a walk than where it stands (compact
    /// mode, an app that looks only at positions, no restarts), walks move
    /// as bare vertices: 4 bytes to sort instead of 16, and the app sees
    /// each partition's positions at once ([`WalkApp::visit_positions`]).
    ///
    /// Draws do not depend on the thread count: exact walks are keyed by
    /// walk id and hop; compact walks draw from one stream per partition
    /// and hop, in the order the stable sort fixes.
    ///
    /// Walks move as bare vertices when `positions_only`, `batch_walks` at
    /// a time (see [`Engine::partitioned_batch`]).
    pub(super) fn run_partitioned(
        &mut self,
        graph: &LoadedBlock,
        positions_only: bool,
        batch_walks: u64,
    ) -> Result<A::State> {
        let parts = Partitions::of(&[graph], self.config.partition_bytes);
        let total = self.spec.starts.total(self.num_vertices);
        let mut state = self.app.new_state();
        let mut first = 0;
        let walk_bytes = self.partitioned_walk_bytes(positions_only);
        while first < total {
            let last = (first + batch_walks).min(total);
            // The batch and its sorted copy.
            let bytes = 2 * (last - first) * walk_bytes;
            self.stats.hold(bytes);
            let (batch, left) = if positions_only {
                let walks = self.start_all(first..last, |(_, vertex)| vertex);
                let (batch, left) = self.move_by_partition(&parts, walks, Self::step_positions)?;
                (batch, left.len())
            } else {
                let walks = self.start_all(first..last, |walk| walk);
                let (batch, left) = self.move_by_partition(&parts, walks, Self::step_partition)?;
                (batch, left.len())
            };
            assert_eq!(left, 0, "no walk can leave a block holding every vertex");
            self.stats.release(bytes);
            self.app.merge(&mut state, batch);
            first = last;
            self.report_progress(total - last)?;
        }
        Ok(state)
    }

    /// How first-order walks would move by partition in memory: as bare
    /// vertices or not (when nothing reads more of a walk than where it
    /// stands), and how many at once (what the budget holds of them and
    /// their sorted copy, at most the whole run).
    fn partitioned_batch(&self) -> (bool, u64) {
        let positions_only = !super::carries_source(self.app, &self.spec, self.config.exact);
        let batch = self.memory_batch(
            self.partitioned_walk_bytes(positions_only),
            2,
            MIN_PARTITIONED_BATCH..=PARTITIONED_BATCH,
        );
        let total = self.spec.starts.total(self.num_vertices);
        (positions_only, batch.min(total))
    }

    /// Bytes of a walk moving by partition.
    fn partitioned_walk_bytes(&self, positions_only: bool) -> u64 {
        if positions_only {
            std::mem::size_of::<u32>() as u64
        } else {
            std::mem::size_of::<InFlight<W>>() as u64
        }
    }

    /// Walks memory mode moves at once: as many as the budget holds beside
    /// what it holds already (the graph), `copies` slots of `walk_bytes`
    /// each, within `fewest..=most`.
    fn memory_batch(&self, walk_bytes: u64, copies: u64, within: RangeInclusive<u64>) -> u64 {
        let left = self.config.mem_budget.saturating_sub(self.stats.mem_now);
        (left / (copies * walk_bytes)).clamp(*within.start(), *within.end())
    }

    /// Moves first-order `walks` on loaded data cut into `parts`, a step
    /// per round: each round a parallel stable counting sort by partition,
    /// then `step` on each partition's walks (partitions in parallel),
    /// which keeps the walks that go on inside at the front of its slice
    /// and writes those that leave to the same slots of the other buffer
    /// (which the sort has read), whence they are gathered. Returns what
    /// the app gathered and the walks that left, in partition order (or
    /// `Cancelled` between rounds). The caller accounts for the memory of
    /// `walks`, its sorted copy and the walks that leave (at most the
    /// batch: room for them is reserved once).
    pub(super) fn move_by_partition<T: Standing>(
        &self,
        parts: &Partitions<'_>,
        mut walks: Vec<T>,
        step: impl Fn(&Self, &LoadedBlock, Partition, &mut [T], &mut [T]) -> Stepped<A::State> + Sync,
    ) -> Result<(A::State, Vec<T>)> {
        let locator = &parts.locator;
        let bounds = locator.bounds();
        let num_parts = bounds.len() - 1;
        let within = bounds[0]..bounds[num_parts];
        let mut state = self.app.new_state();
        let mut left = Vec::new();
        let mut sorted = walks.clone();
        // The walks still going, as runs of `walks`: equal pieces at
        // first, then each partition's survivors.
        let piece = walks.len().div_ceil(FIRST_RUNS).max(1);
        let mut runs: Vec<(usize, usize)> = (0..walks.len())
            .step_by(piece)
            .map(|start| (start, piece.min(walks.len() - start)))
            .collect();
        let mut live = walks.len();
        // A walk takes at most `length` steps, one a round.
        for round in 0..=u64::from(self.spec.length) {
            if runs.is_empty() {
                break;
            }
            // Each run's walks per partition, then a stable scatter of
            // every run into its share of each partition.
            let counts: Vec<Vec<usize>> = runs
                .par_iter()
                .map(|&(start, len)| {
                    let mut count = vec![0; num_parts];
                    for walk in &walks[start..start + len] {
                        count[locator.range(walk.vertex())] += 1;
                    }
                    count
                })
                .collect();
            let sizes: Vec<usize> = (0..num_parts)
                .map(|p| counts.iter().map(|c| c[p]).sum())
                .collect();
            // Each run's share of each partition, as the slots it fills
            // next (one cursor a partition, rather than a slice and a
            // count).
            let mut targets: Vec<Vec<std::slice::IterMut<'_, T>>> =
                runs.iter().map(|_| Vec::with_capacity(num_parts)).collect();
            let mut rest = &mut sorted[..];
            for p in 0..num_parts {
                for (run, count) in counts.iter().enumerate() {
                    let (share, tail) = rest.split_at_mut(count[p]);
                    targets[run].push(share.iter_mut());
                    rest = tail;
                }
            }
            runs.par_iter()
                .zip(targets)
                .for_each(|(&(start, len), mut shares)| {
                    for &walk in &walks[start..start + len] {
                        let slot = shares[locator.range(walk.vertex())]
                            .next()
                            .expect("the count made a slot for every walk");
                        *slot = walk;
                    }
                });
            // Then partition by partition, each on its own data.
            let pass = self.passes.fetch_add(1, Ordering::Relaxed) + 1;
            self.partition_rounds.fetch_add(1, Ordering::Relaxed);
            // A partition's walks that leave go to its slots in `walks`,
            // which the scatter has read.
            let mut partitions = Vec::with_capacity(num_parts);
            let mut rest = &mut sorted[..];
            let mut free = &mut walks[..];
            let mut start = 0;
            for (p, &size) in sizes.iter().enumerate() {
                let (these, tail) = rest.split_at_mut(size);
                let (slots, free_tail) = free.split_at_mut(size);
                let at = Partition {
                    index: p,
                    vertices: bounds[p]..bounds[p + 1],
                    within: within.clone(),
                    hop: round,
                    pass,
                };
                partitions.push((at, start, these, slots));
                rest = tail;
                free = free_tail;
                start += size;
            }
            let moved: Vec<(usize, Stepped<A::State>)> = partitions
                .into_par_iter()
                .map(|(at, start, these, slots)| {
                    let block = parts.blocks[at.index];
                    (start, step(self, block, at, these, slots))
                })
                .collect();
            runs.clear();
            let before = left.len();
            for (start, stepped) in moved {
                let Stepped {
                    kept,
                    leaving,
                    steps,
                    state: s,
                } = stepped;
                self.steps.fetch_add(steps, Ordering::Relaxed);
                self.app.merge(&mut state, s);
                if leaving > 0 {
                    // At most the batch leaves: room for it once.
                    if left.capacity() == 0 {
                        left.reserve_exact(walks.len());
                    }
                    left.extend_from_slice(&walks[start..start + leaving]);
                }
                if kept > 0 {
                    runs.push((start, kept));
                }
            }
            let kept: usize = runs.iter().map(|&(_, kept)| kept).sum();
            self.walks_ended((live - kept - (left.len() - before)) as u64);
            self.note_progress()?;
            live = kept;
            std::mem::swap(&mut walks, &mut sorted);
        }
        Ok((state, left))
    }

    /// Walks `ids`, started on all threads (each a pure function of its
    /// id, so the paths do not depend on the threads), as `keep` has them.
    pub(super) fn start_all<T: Send>(
        &self,
        ids: std::ops::Range<u64>,
        keep: impl Fn(InFlight<W>) -> T + Sync + Send,
    ) -> Vec<T> {
        ids.into_par_iter().map(|id| keep(self.start(id))).collect()
    }

    /// Sweeps partition `at`'s data into cache when its `walks` will touch
    /// most of its cache lines; returns whether it did.
    fn warm(&self, graph: &LoadedBlock, at: &Partition, walks: usize) -> bool {
        let warm = walks as u64 * WARM_LINES_PER_WALK >= self.config.partition_bytes / 64;
        if warm {
            graph.warm(at.vertices.clone());
        }
        warm
    }

    /// Visits and steps the walks standing in partition `at`, keeping
    /// those that go on inside the loaded data at the front of `walks` and
    /// writing those that leave it to the front of `leaving` (as long as
    /// `walks`; a walk whose last step leaves has its last position
    /// visited here instead).
    ///
    /// A partition with too few walks to sweep its data into cache
    /// ([`WARM_LINES_PER_WALK`]) is stepped in a pipeline instead: each
    /// walk's step is decided (its draws made, in walk order, so the paths
    /// are the same) [`COLD_AHEAD`] walks before it is taken, the neighbour
    /// it will read prefetched then, and the offsets it decides by
    /// prefetched [`COLD_AHEAD`] walks before that, so the memory reads of
    /// several walks overlap.
    pub(super) fn step_partition(
        &self,
        graph: &LoadedBlock,
        at: Partition,
        walks: &mut [InFlight<W>],
        leaving: &mut [InFlight<W>],
    ) -> Stepped<A::State> {
        let ahead = if self.warm(graph, &at, walks.len()) && !pipeline_always() {
            0
        } else {
            COLD_AHEAD
        };
        let view = graph.view();
        let mut state = self.app.new_state();
        let mut stream = at.stream(self.config.seed);
        let length = u64::from(self.spec.length);
        let mut decided = [Decision::Ends; COLD_AHEAD + 1];
        let (mut kept, mut left, mut steps) = (0, 0, 0);
        for &(_, vertex) in walks.iter().take(ahead) {
            view.prefetch(vertex);
        }
        for i in 0..walks.len() + ahead {
            if let Some(&(_, vertex)) = walks.get(i + ahead) {
                if ahead > 0 {
                    view.prefetch(vertex);
                }
            }
            if let Some(&(walk, vertex)) = walks.get(i) {
                decided[i % (COLD_AHEAD + 1)] =
                    self.decide(&view, walk, vertex, length, ahead > 0, &mut stream);
            }
            let Some(j) = i.checked_sub(ahead) else {
                continue;
            };
            let (walk, vertex) = walks[j];
            let word = walk.word();
            let (source, hop) = (self.word.source(word), self.word.hop(word));
            #[allow(clippy::cast_possible_truncation)] // Hops are bounded by the u32 length.
            let mut visit = Visit {
                walk: walk.id(),
                source,
                source_vertex: self.spec.starts.source_vertex(source),
                vertex,
                hop: hop as u32,
            };
            self.app.visit(&mut state, &visit);
            let next = match decided[j % (COLD_AHEAD + 1)] {
                Decision::Ends | Decision::Steps(Step::Stop) => continue,
                Decision::Steps(Step::Move(next) | Step::Teleport(next)) => next,
                Decision::Moves(next) => *next,
            };
            steps += 1;
            if hop + 1 == length {
                // The last position needs no adjacency list, nor another
                // round to be visited in.
                visit.vertex = next;
                visit.hop += 1;
                self.app.visit(&mut state, &visit);
            } else if at.within.contains(&next) {
                walks[kept] = (walk.with_word(self.word.encode(source, 0, hop + 1)), next);
                kept += 1;
            } else {
                leaving[left] = (walk.with_word(self.word.encode(source, 0, hop + 1)), next);
                left += 1;
            }
        }
        Stepped {
            kept,
            leaving: left,
            steps,
            state,
        }
    }

    /// Decides the step of `walk`, standing at `vertex`: its draws are
    /// made now (from its own stream in exact mode, else from `stream`).
    /// With `ahead`, a first-order step is looked up ahead and the
    /// neighbour it reads prefetched.
    fn decide<'x>(
        &self,
        view: &'x BlockView<'_>,
        walk: W,
        vertex: u32,
        length: u64,
        ahead: bool,
        stream: &mut KeyedRng,
    ) -> Decision<'x> {
        let word = walk.word();
        let hop = self.word.hop(word);
        if hop == length {
            return Decision::Ends;
        }
        let mut keyed;
        let rng = match walk.id() {
            Some(id) => {
                keyed = KeyedRng::new(self.config.seed, id, hop);
                &mut keyed
            }
            None => stream,
        };
        if ahead {
            if let Some(Lookahead {
                candidate,
                drawn: Some(drawn),
                ..
            }) = look_ahead(&self.spec, view, vertex, None, false, rng)
            {
                quiver_io::prefetch(candidate);
                *rng = drawn;
                return Decision::Moves(candidate);
            }
        }
        let source_vertex = self.spec.starts.source_vertex(self.word.source(word));
        Decision::Steps(step(
            &self.spec,
            view,
            self.num_vertices,
            source_vertex,
            vertex,
            None,
            rng,
        ))
    }

    /// [`Engine::step_partition`] for walks that are only where they
    /// stand: the app sees the partition's positions at once, and each
    /// step is one draw from the partition's stream.
    fn step_positions(
        &self,
        graph: &LoadedBlock,
        at: Partition,
        walks: &mut [u32],
        _leaving: &mut [u32],
    ) -> Stepped<A::State> {
        debug_assert_eq!(
            at.within.len(),
            self.num_vertices as usize,
            "the whole graph"
        );
        self.warm(graph, &at, walks.len());
        let mut state = self.app.new_state();
        #[allow(clippy::cast_possible_truncation)] // Hops are bounded by the u32 length.
        self.app.visit_positions(&mut state, at.hop as u32, walks);
        if at.hop == u64::from(self.spec.length) {
            return Stepped {
                kept: 0,
                leaving: 0,
                steps: 0,
                state,
            };
        }
        let mut stream = at.stream(self.config.seed);
        let view = graph.view();
        let mut kept = 0;
        for i in 0..walks.len() {
            let vertex = walks[i];
            // No restart and no dead-end policy here reads the source.
            match step(
                &self.spec,
                &view,
                self.num_vertices,
                vertex,
                vertex,
                None,
                &mut stream,
            ) {
                Step::Stop => {}
                Step::Move(next) | Step::Teleport(next) => {
                    walks[kept] = next;
                    kept += 1;
                }
            }
        }
        let steps = kept as u64;
        if at.hop + 1 == u64::from(self.spec.length) {
            // The last positions need no adjacency lists, nor another
            // round to be visited in.
            #[allow(clippy::cast_possible_truncation)] // Hops are bounded by the u32 length.
            self.app
                .visit_positions(&mut state, at.hop as u32 + 1, &walks[..kept]);
            kept = 0;
        }
        Stepped {
            kept,
            leaving: 0,
            steps,
            state,
        }
    }
}

/// Walks a cold partition decides ahead of stepping them
/// ([`Engine::step_partition`]).
const COLD_AHEAD: usize = 16;

/// Set by tests to step every partition in the pipeline, warm or not
/// (the two must give the same walks).
#[cfg(test)]
pub(super) static PIPELINE_ALWAYS: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Whether every partition is stepped in the pipeline ([`PIPELINE_ALWAYS`]
/// in tests; never otherwise).
fn pipeline_always() -> bool {
    #[cfg(test)]
    return PIPELINE_ALWAYS.load(std::sync::atomic::Ordering::Relaxed);
    #[cfg(not(test))]
    false
}

/// A walk's step, decided before it is taken.
#[derive(Clone, Copy)]
enum Decision<'x> {
    /// The walk has taken its last step.
    Ends,
    /// The step, worked out already (its draws made and its lists read).
    Steps(Step),
    /// A first-order step looked up ahead: it moves to the neighbour
    /// here, whose read waits until the step is taken.
    Moves(&'x u32),
}

/// What stepping one partition's walks gave.
pub(super) struct Stepped<S> {
    /// Walks that go on inside the loaded data (at the front of the
    /// partition's walks).
    kept: usize,
    /// Walks that left it (at the front of the partition's free slots).
    leaving: usize,
    /// Steps taken.
    steps: u64,
    /// What the app gathered.
    state: S,
}

/// A walk as memory mode sorts it: all it needs is where the walk stands.
pub(super) trait Standing: Copy + Send + Sync {
    fn vertex(&self) -> u32;
}

impl<W: Copy + Send + Sync> Standing for InFlight<W> {
    fn vertex(&self) -> u32 {
        self.1
    }
}

/// A walk that is nothing but its position.
impl Standing for u32 {
    fn vertex(&self) -> u32 {
        *self
    }
}

/// Loaded graph data cut into partitions of about
/// [`Config::partition_bytes`](crate::Config::partition_bytes) each.
pub(super) struct Partitions<'g> {
    /// Their bounds, from the first loaded vertex to the end of the last,
    /// and which one holds a vertex (cut once for every batch on them).
    locator: Locator,
    /// The block holding each partition.
    blocks: Vec<&'g LoadedBlock>,
}

impl<'g> Partitions<'g> {
    /// The partitions of `blocks`, which are consecutive.
    pub(super) fn of(blocks: &[&'g LoadedBlock], bytes: u64) -> Partitions<'g> {
        let mut all: Vec<u32> = Vec::new();
        let mut holders = Vec::new();
        for &block in blocks {
            let bounds = block.partitions(bytes);
            if let Some(&end) = all.last() {
                assert_eq!(end, bounds[0], "partitioned blocks are consecutive");
                all.pop();
            }
            holders.extend(bounds.windows(2).map(|_| block));
            all.extend(bounds);
        }
        Partitions {
            locator: Locator::new(all),
            blocks: holders,
        }
    }
}

/// One partition in one round of a batch.
pub(super) struct Partition {
    /// Its place among the partitions.
    index: usize,
    vertices: std::ops::Range<u32>,
    /// Every vertex loaded: a walk stepping outside leaves.
    within: std::ops::Range<u32>,
    /// The round (in memory mode, the steps every walk here has taken).
    hop: u64,
    /// The hop's number in the whole run (batches count on).
    pass: u64,
}

impl Partition {
    /// The draws of compact walks standing here, in sorted order.
    fn stream(&self, seed: u64) -> KeyedRng {
        KeyedRng::new(seed, self.pass, self.index as u64)
    }
}
