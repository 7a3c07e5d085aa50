//! GraphWalker's state-aware scheduler: load the block (or block pair)
//! serving the most walks, or with probability p the slowest walk's; keep
//! blocks cached; move walks until they leave the loaded range; switch to
//! vertex passes once few walks remain. First-order walks move a batch at a
//! time while the last batch's leaving walks are filed and the next batch
//! taken, and the next group is read while a group's walks move.

use std::sync::Arc;

use quiver_walkstate::WalkPools;

use super::budget::{
    adaptive_load_bytes, pair_pool_capacity, Budget, Cache, Pooling, MAX_PAIRED_BLOCKS,
};
use super::vertex::VERTEX_READ_BYTES;
use super::walks::PooledWalk;
use super::Engine;
use super::Partitions;
use crate::app::WalkApp;
use crate::config::Mode;
use crate::loaded::{Executing, LoadedBlock};
use crate::rng::KeyedRng;
use crate::{Error, Result};

impl<'a, A: WalkApp, W: PooledWalk> Engine<'a, A, W> {
    pub(super) fn run_out_of_core(&mut self) -> Result<(A::State, quiver_walkstate::PoolStats)> {
        let largest = (0..self.blocks.len())
            .map(|b| self.block_memory(b))
            .max()
            .unwrap_or(0);
        // Second-order walks in GraphWalker mode are pooled by block pair
        // when there are at most `MAX_PAIRED_BLOCKS` blocks and two of the
        // largest, with the pairs' pools, fit the cache. Each block's pool
        // buffer is then shared among its pairs (at least
        // `MIN_POOL` walks each), and every pool's bookkeeping is
        // budgeted.
        let blocks = self.blocks.len();
        let mut pooling = Pooling {
            blocks,
            pairs: self.spec.node2vec.is_some()
                && self.config.mode == Mode::GraphWalker
                && blocks <= MAX_PAIRED_BLOCKS,
        };
        let capacity = |pooling: Pooling| {
            if pooling.pairs {
                pair_pool_capacity(self.pool_capacity, blocks)
            } else {
                self.pool_capacity
            }
        };
        let mut budget = self.share_budget(pooling, capacity(pooling));
        if pooling.pairs && 2 * largest > budget.cache {
            pooling.pairs = false;
            budget = self.share_budget(pooling, capacity(pooling));
        }
        self.pooling = pooling;
        let mut pools =
            WalkPools::<W>::new(pooling.len(), capacity(pooling), &self.config.work_dir)?;
        // A run that reads only lists never reads its one block.
        if largest > budget.cache && !self.lists_only {
            let lists = if self.prev_reserve > 0 {
                format!(
                    ", the largest previous vertex's list ({} bytes)",
                    self.prev_reserve
                )
            } else {
                String::new()
            };
            return Err(Error::invalid("mem_budget", format!(
                "a memory budget of {} bytes cannot hold the walk pools ({} pools of {} walks: {} \
                 bytes){lists}, walks in flight ({} bytes) and one block ({largest} bytes); raise the \
                 budget, or lower the block size or the pool capacity",
                self.config.mem_budget,
                pooling.len(),
                capacity(pooling),
                budget.pools,
                budget.in_flight,
            )));
        }
        // Started on all threads and filed a batch at a time.
        let total = self.spec.starts.total(self.num_vertices);
        // The batch's share is set aside; the walks started fill it.
        let walk_bytes = Self::bytes_in_flight(false);
        let share = walk_bytes * budget.batch_walks as u64;
        let in_flight = walk_bytes * total.min(budget.batch_walks as u64);
        self.stats.reserve(in_flight, share);
        let mut first = 0;
        while first < total {
            let last = (first + budget.batch_walks as u64).min(total);
            let walks = self.start_all(first..last, |walk| walk);
            self.file(&mut pools, walks)?;
            first = last;
        }
        self.stats.unreserve(in_flight, share);
        self.stats.hold(budget.pools);
        tracing::info!(
            blocks = self.blocks.len(),
            block_size = self.block_size,
            paired = pooling.pairs,
            pool_bytes = budget.pools,
            batch_walks = budget.batch_walks,
            cache_bytes = budget.cache,
            "walks started"
        );
        let mut state = self.app.new_state();
        match self.config.mode {
            Mode::Iteration => self.iterate(&mut pools, &mut state, &budget)?,
            _ => self.schedule(&mut pools, &mut state, &budget)?,
        }
        Ok((state, pools.stats()))
    }

    /// GraphWalker's state-aware scheduling.
    pub(super) fn schedule(
        &mut self,
        pools: &mut WalkPools<W>,
        state: &mut A::State,
        budget: &Budget,
    ) -> Result<()> {
        let mut cache = Cache::default();
        let mut coin = KeyedRng::new(self.config.seed, u64::MAX - 1, 0);
        // One thread of its own reads the next group ahead (its checksums
        // too), beside the run's worker threads, for walks that move by
        // partition (the others never read ahead).
        let reader = if self.moves_by_partition(false) {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(1)
                .thread_name(|_| "quiver-read-ahead".into())
                .build()
                .map_err(|e| {
                    Error::invalid(
                        "threads",
                        format!("cannot start the read-ahead thread: {e}"),
                    )
                })?;
            Some(pool)
        } else {
            None
        };
        // A step by single-vertex reads reads the walk's list, and a
        // second-order walk's previous list too.
        let read_bytes = if self.spec.node2vec.is_some() {
            2 * VERTEX_READ_BYTES
        } else {
            VERTEX_READ_BYTES
        };
        // The group chosen and read ahead while the last one's walks moved,
        // and the blocks read for it.
        let mut read_ahead: Option<(Vec<usize>, Vec<usize>)> = None;
        while pools.total() > 0 {
            if pools.total() <= self.config.vertex_threshold {
                // State-aware: read single vertices for the pools whose few
                // walks cost fewer bytes that way than their block (or
                // whose block is cached anyway).
                // With block pairs, a pool's walks are weighed with the
                // rest of its pair's, which one pair load would serve.
                let candidates: Vec<usize> = (0..pools.num_blocks())
                    .filter(|&p| pools.count(p) > 0)
                    .filter(|&p| {
                        let (block, prev) = (self.pooling.block(p), self.pooling.prev_block(p));
                        if self.pooling.pairs {
                            self.pair_walks(pools, block, prev) * read_bytes
                                < self.bytes_to_load(&cache, block, prev)
                        } else {
                            pools.count(p) * read_bytes < self.block_bytes(block)
                                || cache.blocks.map.contains_key(&block)
                        }
                    })
                    .collect();
                if !candidates.is_empty()
                    && self.vertex_pass(pools, state, &mut cache, budget, &candidates)?
                {
                    continue;
                }
                if self.lists_only {
                    // Its one block is the whole graph, never read whole.
                    return Err(Error::invalid(
                        "mem_budget",
                        format!(
                            "--mem {} holds no adjacency list the walks stand on beside the walks in flight; give the run more memory",
                            quiver_io::size::format_bytes(self.config.mem_budget)
                        ),
                    ));
                }
            }
            // A group read ahead serves only if its pools still hold walks
            // (a vertex pass may have moved them).
            let (prefetched_group, prefetched_blocks) = read_ahead.take().unwrap_or_default();
            let (group, served) = if pools.count_all(&prefetched_group) > 0 {
                (prefetched_group.clone(), prefetched_group)
            } else {
                let slowest = coin.chance(self.config.p_slowest);
                if self.pooling.pairs {
                    self.choose_pair(pools, &cache, slowest)
                } else {
                    let group = self
                        .choose_group(pools, budget, slowest, &[])
                        .expect("some block holds a walk");
                    (group.clone(), group)
                }
            };
            self.stats.largest_group = self.stats.largest_group.max(group.len() as u64);
            // Blocks read ahead were counted as loads (even when a vertex
            // pass made their group go unused), not as hits.
            self.stats.cache_hits += group
                .iter()
                .filter(|&g| cache.blocks.map.contains_key(g) && !prefetched_blocks.contains(g))
                .count() as u64;
            let missing = self.make_room(&mut cache, pools, budget, &group, &group);
            let blocks = self.load(&missing)?;
            self.cache_blocks(&mut cache, &missing, blocks);
            // Lists kept from a vertex pass may have left the cache over its
            // share even when every block of the group was cached already.
            self.fit_cache(&mut cache, pools, budget, &group, 0, false);
            let loaded = group
                .iter()
                .map(|g| Arc::clone(&cache.blocks.map[g]))
                .collect();
            let exec = Executing::new(loaded);
            // The loaded blocks' partitions, cut once for every batch on them.
            let parts = exec
                .consecutive_blocks()
                .filter(|_| self.moves_by_partition(false))
                .map(|blocks| Partitions::of(&blocks, self.config.partition_bytes));
            // Walks moving inside the loaded data stay in flight, so none is
            // filed back into a pool it serves: draining them in batches
            // terminates.
            // Batches draw from every pool served, so that small pools
            // still fill the worker threads.
            match &parts {
                Some(parts) => {
                    debug_assert!(!self.pooling.pairs, "a block's pool is the block's id");
                    let reader = reader
                        .as_ref()
                        .expect("walks that move by partition have a read-ahead thread");
                    read_ahead =
                        self.plan_read_ahead(&mut cache, pools, budget, &mut coin, &group, &served);
                    let to_read = read_ahead
                        .as_ref()
                        .map(|(_, blocks)| blocks.clone())
                        .unwrap_or_default();
                    // A batch's share is set aside; the walks waiting in
                    // the served pools fill it at most.
                    let waiting = pools.count_all(&served);
                    let walk_bytes = Self::bytes_in_flight(true);
                    let share = walk_bytes * budget.batch_walks as u64;
                    let in_flight = walk_bytes * waiting.min(budget.batch_walks as u64);
                    self.stats.reserve(in_flight, share);
                    let this = &*self;
                    let mut read_result = Ok(Vec::new());
                    let moved = reader.in_place_scope(|s| {
                        if !to_read.is_empty() {
                            s.spawn(|_| {
                                read_result = to_read.iter().map(|&b| this.read_block(b)).collect();
                            });
                        }
                        this.move_served(pools, state, parts, &served, budget)
                    });
                    self.stats.unreserve(in_flight, share);
                    self.spare.clear();
                    moved?;
                    let blocks = read_result?;
                    self.stats.blocks_loaded += to_read.len() as u64;
                    self.stats.blocks_read_ahead += to_read.len() as u64;
                    self.cache_blocks(&mut cache, &to_read, blocks);
                }
                None => loop {
                    let walks = self.take_batch(pools, &served, budget.batch_walks)?;
                    if walks.is_empty() {
                        break;
                    }
                    self.advance_and_file(pools, state, &exec, walks, false)?;
                },
            }
        }
        Ok(())
    }

    /// The group to read while `group`'s walks (in the pools `served`)
    /// move, and its blocks to read (counted as held): chosen now, by the
    /// same rule among the other blocks, when the cache holds both groups;
    /// none when the walks waiting elsewhere are few enough for a vertex
    /// pass to serve them next.
    fn plan_read_ahead(
        &mut self,
        cache: &mut Cache,
        pools: &WalkPools<W>,
        budget: &Budget,
        coin: &mut KeyedRng,
        group: &[usize],
        served: &[usize],
    ) -> Option<(Vec<usize>, Vec<usize>)> {
        if pools.total() - pools.count_all(served) <= self.config.vertex_threshold {
            return None;
        }
        let slowest = coin.chance(self.config.p_slowest);
        let next = self.choose_group(pools, budget, slowest, group)?;
        let mut both: Vec<usize> = group.iter().chain(&next).copied().collect();
        both.sort_unstable();
        both.dedup();
        let bytes: u64 = both.iter().map(|&g| self.block_memory(g)).sum();
        if bytes > budget.cache {
            return None;
        }
        let to_read = self.make_room(cache, pools, budget, &both, &next);
        Some((next, to_read))
    }

    /// The blocks of `blocks` not cached, once cached data (never `keep`)
    /// is evicted to make room for them; their memory is held from now.
    fn make_room(
        &mut self,
        cache: &mut Cache,
        pools: &WalkPools<W>,
        budget: &Budget,
        keep: &[usize],
        blocks: &[usize],
    ) -> Vec<usize> {
        let missing: Vec<usize> = blocks
            .iter()
            .copied()
            .filter(|g| !cache.blocks.map.contains_key(g))
            .collect();
        let need = missing.iter().map(|&g| self.block_memory(g)).sum();
        self.fit_cache(cache, pools, budget, keep, need, true);
        self.stats.hold(need);
        missing
    }

    /// Caches `blocks`, read for `ids` (whose memory
    /// [`Engine::make_room`] held).
    fn cache_blocks(&mut self, cache: &mut Cache, ids: &[usize], blocks: Vec<Arc<LoadedBlock>>) {
        for (&g, block) in ids.iter().zip(blocks) {
            self.stats.release(self.block_memory(g));
            self.stats.hold(block.memory_bytes());
            cache.blocks.bytes += block.memory_bytes();
            cache.blocks.map.insert(g, block);
        }
    }

    /// Moves the walks waiting in the pools `served` on loaded blocks cut
    /// into `parts`, batch by batch, while on the side the walks that left
    /// the last batch are filed and the next batch is taken. The side job
    /// touches other pools than the batches do: walks leave the loaded
    /// blocks, and only loaded blocks' pools are served. So it changes no
    /// walk's path, and the serial work of spilling and reading pools
    /// overlaps the batches' parallel stepping.
    fn move_served(
        &self,
        pools: &mut WalkPools<W>,
        state: &mut A::State,
        parts: &Partitions,
        served: &[usize],
        budget: &Budget,
    ) -> Result<()> {
        let batch_walks = budget.batch_walks;
        let mut next = self.take_batch(pools, served, batch_walks)?;
        let mut leaving = Vec::new();
        while !next.is_empty() {
            let walks = std::mem::take(&mut next);
            let left = std::mem::take(&mut leaving);
            let (moved, side) = rayon::join(
                || self.move_by_partition(parts, walks, Self::step_partition),
                || {
                    self.file(pools, left)?;
                    self.take_batch(pools, served, batch_walks)
                },
            );
            let (s, left) = moved?;
            next = side?;
            self.app.merge(state, s);
            debug_assert!(
                left.iter()
                    .all(|&(_, v)| !served.contains(&(self.blocks.find(v).0 as usize))),
                "a walk left for a pool being served"
            );
            leaving = left;
            self.report_progress(pools.total() + (next.len() + leaving.len()) as u64)?;
        }
        self.file(pools, leaving)?;
        self.report_progress(pools.total())
    }

    /// The blocks to load for first-order walks: the fullest block (or
    /// the slowest's) but those in `except`, alone or with the adaptive
    /// rule in the aligned group of consecutive fine blocks around it, of
    /// at most half the cache so that the next group can be read while
    /// this one's walks move. None if no other block holds a walk.
    pub(super) fn choose_group(
        &self,
        pools: &WalkPools<W>,
        budget: &Budget,
        slowest: bool,
        except: &[usize],
    ) -> Option<Vec<usize>> {
        let b = if slowest {
            pools.slowest(except)
        } else {
            pools.fullest(except)
        }?;
        let half = budget.cache / 2;
        let k = if self.adaptive() {
            let fine = self.block_size.max(1);
            let fit = (half / (fine + quiver_io::ALIGN as u64 * 3)).max(1);
            (adaptive_load_bytes(pools.total()) / fine)
                .clamp(1, fit)
                .min(self.blocks.len() as u64)
        } else {
            1
        };
        let mut k = usize::try_from(k).expect("a group size fits usize");
        // Blocks holding a vertex with a list larger than a fine block are
        // larger than one: halve the group until it fits half the cache
        // (one block always fits the cache).
        loop {
            let first = b / k * k;
            let group: Vec<usize> = (first..(first + k).min(self.blocks.len())).collect();
            let bytes: u64 = group.iter().map(|&g| self.block_memory(g)).sum();
            if k == 1 || bytes <= half {
                return Some(group);
            }
            k /= 2;
        }
    }

    /// The block pair to load for second-order walks, and the pools it
    /// serves (walks standing in either block that came from either): the
    /// pair serving the most walks per byte it must read (none for blocks
    /// cached already), or the pair of the pool holding the slowest walk.
    pub(super) fn choose_pair(
        &self,
        pools: &WalkPools<W>,
        cache: &Cache,
        slowest: bool,
    ) -> (Vec<usize>, Vec<usize>) {
        let pooling = self.pooling;
        let pair = |a: usize, b: usize| {
            let (a, b) = (a.min(b), a.max(b));
            let group = if a == b { vec![a] } else { vec![a, b] };
            let mut served = self.pair_pools(a, b);
            served.retain(|&p| pools.count(p) > 0);
            (group, served)
        };
        if slowest {
            let p = pools.slowest(&[]).expect("some pool holds a walk");
            return pair(pooling.block(p), pooling.prev_block(p));
        }
        let mut best = (0.0, 0, 0);
        for a in 0..self.blocks.len() {
            for b in a..self.blocks.len() {
                let walks = self.pair_walks(pools, a, b);
                let bytes = self.bytes_to_load(cache, a, b);
                #[allow(clippy::cast_precision_loss)] // A ranking.
                let score = walks as f64 / (bytes + 1) as f64;
                if score > best.0 {
                    best = (score, a, b);
                }
            }
        }
        assert!(best.0 > 0.0, "some pool holds a walk");
        pair(best.1, best.2)
    }

    /// Walks that loading blocks `a` and `b` (the same block: just it)
    /// would serve with paired pools: those standing in either that came
    /// from either.
    pub(super) fn pair_walks(&self, pools: &WalkPools<W>, a: usize, b: usize) -> u64 {
        self.pair_pools(a, b)
            .into_iter()
            .map(|p| pools.count(p))
            .sum()
    }

    /// The pools of walks standing in block `a` or `b` that came from
    /// either (one pool when `a == b`).
    pub(super) fn pair_pools(&self, a: usize, b: usize) -> Vec<usize> {
        let pool = |x: usize, y: usize| self.pooling.pool(x, Some(y));
        if a == b {
            vec![pool(a, a)]
        } else {
            vec![pool(a, a), pool(a, b), pool(b, a), pool(b, b)]
        }
    }

    /// Bytes reading blocks `a` and `b` would take, not counting cached ones.
    pub(super) fn bytes_to_load(&self, cache: &Cache, a: usize, b: usize) -> u64 {
        let cost = |x: usize| {
            if cache.blocks.map.contains_key(&x) {
                0
            } else {
                self.block_bytes(x)
            }
        };
        cost(a) + if a == b { 0 } else { cost(b) }
    }
}
