//! Stepping: a batch's walks move a few at a time in round robin (lanes),
//! each drawing its next vertex and prefetching it before stepping, so
//! memory latency overlaps; walks that leave the loaded data are handed
//! back for filing.

use std::sync::atomic::Ordering;

use rayon::prelude::*;

use super::previous::previous_list;
use super::walks::PooledWalk;
use super::{Contains, Engine, InFlight, CHUNK};
use crate::app::{Visit, WalkApp};
use crate::loaded::Vertices;
use crate::rng::KeyedRng;
use crate::spec::{contains_all, look_ahead, step, Adjacency, Prev, Step};
use crate::Result;

/// One walk being moved by [`Engine::walk_chunk`], on adjacency data that
/// lives for `'x`.
pub(super) struct Lane<'x, W> {
    pub(super) walk: W,
    pub(super) vertex: u32,
    pub(super) hop: u64,
    pub(super) prev: Option<u32>,
    pub(super) source: u64,
    pub(super) source_vertex: u32,
    /// The stream its next step draws from: in exact mode the walk's own
    /// for this hop (set from `key` when the step is looked ahead), in
    /// compact mode one stream for the walk's whole stay in the batch.
    pub(super) rng: KeyedRng,
    /// In exact mode, the key of the walk's streams ([`KeyedRng::key`]).
    pub(super) key: Option<u64>,
    /// Whether the last call moved it.
    pub(super) stepped: bool,
    /// Where a first-order step (no Node2Vec bias, or no previous vertex)
    /// moves, if looked up ahead: the step then only reads it, and the
    /// lane's stream is already where the step leaves it (see
    /// [`look_ahead`]).
    pub(super) ahead: Option<&'x u32>,
    /// Whether its next step's first candidate is a neighbour of its
    /// previous vertex, if looked up ahead (see [`look_ahead`]).
    pub(super) known: Option<(u32, bool)>,
}

impl<'a, A: WalkApp, W: PooledWalk> Engine<'a, A, W> {
    /// Moves `walks` on the graph data in `exec`: each walk until it ends or
    /// leaves `exec` (or for one step when `one_step`). Returns the walks
    /// that still have steps to take, and what the app gathered, or
    /// `Cancelled` if the caller stopped the run meanwhile (chunks not
    /// begun by then are not moved).
    ///
    /// Second-order walks also need their previous vertex's list for their
    /// first step. Those `exec` does not hold are read vertex by vertex, as
    /// many at a time as the budget leaves room for (at least one: see
    /// [`Budget`]); the walks whose lists were not read yet stay in flight
    /// and move in a later round, once the lists read before were dropped.
    /// Draws are keyed by walk id and hop, so the rounds change no path,
    /// and no walk goes back to a pool unmoved.
    pub(super) fn advance<X: Adjacency + Sync + Contains>(
        &mut self,
        exec: &X,
        mut walks: Vec<InFlight<W>>,
        one_step: bool,
    ) -> Result<(Vec<InFlight<W>>, A::State)> {
        let batch = self.passes.fetch_add(1, Ordering::Relaxed) + 1;
        let mut missing: Vec<u32> = walks
            .iter()
            .filter_map(|(w, _)| w.prev())
            .filter(|&p| !exec.holds(p))
            .collect();
        if missing.is_empty() {
            let moved = self.move_walks(exec, &Vertices::default(), &walks, one_step, batch);
            self.progress.check()?;
            return Ok(moved);
        }
        missing.sort_unstable();
        missing.dedup();
        // Walks in the order their previous lists are read: first those
        // needing none, then by previous vertex.
        let rank = |(w, _): &InFlight<W>| match w.prev() {
            Some(p) if !exec.holds(p) => missing.binary_search(&p).map_or(0, |i| i + 1),
            _ => 0,
        };
        walks.sort_unstable_by_key(rank);
        let ranges = self.previous_ranges(&missing)?;
        let mut moved = Vec::new();
        let mut state = self.app.new_state();
        let (mut read, mut done) = (0, 0);
        while done < walks.len() {
            let (prevs, n) = self.previous_lists(&missing[read..], &ranges[read..])?;
            read += n;
            let ready = done + walks[done..].partition_point(|w| rank(w) <= read);
            let (m, s) = self.move_walks(exec, &prevs, &walks[done..ready], one_step, batch);
            self.progress.check()?;
            moved.extend(m);
            self.app.merge(&mut state, s);
            self.stats.release(prevs.memory_bytes());
            done = ready;
        }
        Ok((moved, state))
    }

    /// Moves `walks` (every one's previous list in `exec` or `prevs`), in
    /// chunks on the worker threads.
    pub(super) fn move_walks<X: Adjacency + Sync + Contains>(
        &mut self,
        exec: &X,
        prevs: &Vertices,
        walks: &[InFlight<W>],
        one_step: bool,
        batch: u64,
    ) -> (Vec<InFlight<W>>, A::State) {
        let this = &*self;
        // Walks leave in chunk order whatever the thread count, so pools
        // (and compact-mode draws, keyed by position in a batch) do not
        // depend on scheduling; app states are per thread and merged.
        type Moved<W> = Vec<(usize, Vec<InFlight<W>>, u64)>;
        let (mut chunks, state): (Moved<W>, A::State) = walks
            .par_chunks(CHUNK)
            .enumerate()
            .fold(
                || (Vec::new(), this.app.new_state()),
                |(mut chunks, mut state), (c, chunk)| {
                    // A run its caller stopped moves nothing more: its
                    // caller sees `Cancelled` once the batch returns.
                    if this.progress.cancelled() {
                        chunks.push((c, chunk.to_vec(), 0));
                        return (chunks, state);
                    }
                    let mut moved = Vec::new();
                    let mut steps = 0u64;
                    steps += this.walk_chunk(
                        exec,
                        prevs,
                        chunk,
                        (c * CHUNK) as u64,
                        one_step,
                        batch,
                        &mut state,
                        &mut moved,
                    );
                    // A walk of the chunk either left `exec` or ended.
                    this.walks_ended((chunk.len() - moved.len()) as u64);
                    chunks.push((c, moved, steps));
                    (chunks, state)
                },
            )
            .reduce(
                || (Vec::new(), this.app.new_state()),
                |(mut a, mut state_a), (b, state_b)| {
                    a.extend(b);
                    this.app.merge(&mut state_a, state_b);
                    (a, state_a)
                },
            );
        chunks.sort_unstable_by_key(|(c, _, _)| *c);
        let mut moved = Vec::new();
        for (_, m, steps) in chunks {
            moved.extend(m);
            self.steps.fetch_add(steps, Ordering::Relaxed);
        }
        (moved, state)
    }

    /// Moves the walks of one chunk, a few at a time in round robin: while
    /// one walk waits for its next vertex's adjacency to arrive from memory
    /// (prefetched), the others step, so memory latency overlaps. Each walk
    /// draws from its own stream, so the interleaving changes no path.
    /// Returns the steps taken.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn walk_chunk<'x, X: Adjacency + Contains>(
        &self,
        exec: &'x X,
        prevs: &Vertices,
        chunk: &[InFlight<W>],
        first_index: u64,
        one_step: bool,
        batch: u64,
        state: &mut A::State,
        moved: &mut Vec<InFlight<W>>,
    ) -> u64 {
        // Enough walks in flight to keep the memory system busy: in a
        // two-phase prototype of these lanes (DeepWalk corpus, Kronecker
        // 18, 2 threads), 64 took 0.16-0.18 s, 32 0.17-0.20 s, 16
        // 0.23-0.26 s; in the engine 64 and 32 were within noise.
        const LANES: usize = 64;
        let (mut asked, mut queries, mut found) = (
            Vec::with_capacity(LANES),
            Vec::with_capacity(LANES),
            Vec::with_capacity(LANES),
        );
        let mut steps = 0;
        let mut lanes: Vec<Lane<'x, W>> = Vec::with_capacity(LANES);
        let mut waiting = chunk.iter().zip(first_index..);
        loop {
            while lanes.len() < LANES {
                let Some((&(walk, vertex), index)) = waiting.next() else {
                    break;
                };
                // A new lane's offsets, and its previous vertex's (which a
                // Node2Vec step reads next), are fetched while the lanes
                // before it draw.
                let lane = self.lane(walk, vertex, batch, index);
                exec.prefetch(lane.vertex);
                if let Some(prev) = lane.prev {
                    exec.prefetch(prev);
                }
                lanes.push(lane);
            }
            if lanes.is_empty() {
                return steps;
            }
            // Each lane's offsets were prefetched a round ago: draw the
            // neighbour its step reads first and prefetch that too, so the
            // step below finds both in cache. A first-order step is then
            // that neighbour (the lane's stream advanced past its draws);
            // Node2Vec candidates, drawn on a copy of the stream, whose
            // acceptance needs the previous vertex's list are looked up
            // there side by side.
            asked.clear();
            for (i, lane) in lanes.iter_mut().enumerate() {
                if let Some(key) = lane.key {
                    lane.rng = KeyedRng::at(key, lane.hop);
                }
                let Some(ahead) = look_ahead(
                    &self.spec,
                    exec,
                    lane.vertex,
                    lane.prev,
                    self.distinct_targets,
                    &lane.rng,
                ) else {
                    continue;
                };
                quiver_io::prefetch(ahead.candidate);
                match (ahead.drawn, lane.prev) {
                    (Some(drawn), _) => {
                        lane.ahead = Some(ahead.candidate);
                        lane.rng = drawn;
                    }
                    (None, Some(prev)) if ahead.asks => asked.push((i, prev, ahead.candidate)),
                    (None, _) => {}
                }
            }
            if !asked.is_empty() {
                queries.clear();
                queries.extend(
                    asked
                        .iter()
                        .map(|&(_, prev, &x)| (previous_list(exec, prevs, prev), x)),
                );
                contains_all(&queries, &mut found);
                for (&(i, _, &x), &answer) in asked.iter().zip(&found) {
                    lanes[i].known = Some((x, answer));
                }
            }
            let mut i = 0;
            while i < lanes.len() {
                match self.step_lane(exec, prevs, &mut lanes[i], one_step, state, moved) {
                    Some(moves) => {
                        steps += moves;
                        exec.prefetch(lanes[i].vertex);
                        i += 1;
                    }
                    None => {
                        steps += u64::from(lanes[i].stepped);
                        lanes.swap_remove(i);
                    }
                }
            }
        }
    }

    /// A walk about to move.
    pub(super) fn lane<'x>(&self, walk: W, vertex: u32, batch: u64, index: u64) -> Lane<'x, W> {
        let word = walk.word();
        let source = self.word.source(word);
        Lane {
            walk,
            vertex,
            hop: self.word.hop(word),
            prev: walk.prev(),
            source,
            source_vertex: self.spec.starts.source_vertex(source),
            rng: KeyedRng::new(self.config.seed, batch, index),
            key: walk.id().map(|id| KeyedRng::key(self.config.seed, id)),
            stepped: false,
            ahead: None,
            known: None,
        }
    }

    /// Visits the lane's position and takes one step. Returns the step
    /// count (0 or 1) while the walk goes on inside `exec`, `None` once it
    /// ended or left (its last step, if any, is in `lane.stepped`).
    pub(super) fn step_lane<'x, X: Adjacency + Contains>(
        &self,
        exec: &'x X,
        prevs: &Vertices,
        lane: &mut Lane<'x, W>,
        one_step: bool,
        state: &mut A::State,
        moved: &mut Vec<InFlight<W>>,
    ) -> Option<u64> {
        lane.stepped = false;
        self.visit(lane, state);
        if lane.hop == u64::from(self.spec.length) {
            return None;
        }
        let taken = match lane.ahead.take() {
            // The step's draws are the lookahead's: only its read is left.
            Some(&next) => Step::Move(next),
            None => {
                let came_from = lane.prev.map(|p| Prev {
                    vertex: p,
                    neighbors: previous_list(exec, prevs, p),
                    known: lane.known.take(),
                    distinct: self.distinct_targets,
                });
                step(
                    &self.spec,
                    exec,
                    self.num_vertices,
                    lane.source_vertex,
                    lane.vertex,
                    came_from,
                    &mut lane.rng,
                )
            }
        };
        let (next, next_prev) = match taken {
            Step::Stop => return None,
            Step::Move(next) => (next, Some(lane.vertex)),
            Step::Teleport(next) => (next, None),
        };
        lane.stepped = true;
        lane.hop += 1;
        lane.vertex = next;
        lane.prev = next_prev;
        if !one_step && exec.contains(next) {
            return Some(1);
        }
        if lane.hop == u64::from(self.spec.length) {
            // The last position needs no adjacency list: record it now
            // rather than file the walk for a load of its block.
            self.visit(lane, state);
            return None;
        }
        let word = self.word.encode(lane.source, 0, lane.hop);
        moved.push((lane.walk.with_word(word).with_prev(lane.prev), next));
        None
    }

    pub(super) fn visit(&self, lane: &Lane<'_, W>, state: &mut A::State) {
        #[allow(clippy::cast_possible_truncation)] // Hops are bounded by the u32 length.
        let visit = Visit {
            walk: lane.walk.id(),
            source: lane.source,
            source_vertex: lane.source_vertex,
            vertex: lane.vertex,
            hop: lane.hop as u32,
        };
        self.app.visit(state, &visit);
    }
}
