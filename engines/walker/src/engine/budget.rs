//! Sharing the memory budget: between cached blocks, walk pools and walks
//! in flight; how waiting walks are pooled (by block, or by block pair for
//! Node2Vec); the block cache and its eviction; and the paper's static and
//! self-adaptive block sizes.

use std::collections::HashMap;
use std::sync::Arc;

use quiver_csr::{Block, Blocks, GraphIndex};
use quiver_walkstate::{WalkPools, WalkWord};

use super::walks::PooledWalk;
use super::{Engine, InFlight};
use crate::app::WalkApp;
use crate::config::{Config, Mode};
use crate::loaded::{LoadedBlock, SpareBuffers, Vertices};

/// Whole blocks kept in memory between loads.
#[derive(Default)]
pub(super) struct BlockCache {
    pub(super) map: HashMap<usize, Arc<LoadedBlock>>,
    pub(super) bytes: u64,
}

impl BlockCache {
    /// Evicts the cached blocks with the fewest waiting walks (`walks`, per
    /// block; never those in `keep`) until at most `limit` bytes are cached
    /// or nothing else can go, keeping their buffers in `spare` if given.
    /// Returns the bytes freed.
    pub(super) fn shrink_to(
        &mut self,
        limit: u64,
        walks: &[u64],
        keep: &[usize],
        spare: Option<&SpareBuffers>,
    ) -> u64 {
        let mut freed = 0;
        while self.bytes > limit {
            let Some(victim) = self
                .map
                .keys()
                .copied()
                .filter(|c| !keep.contains(c))
                .min_by_key(|&c| (walks[c], c))
            else {
                break;
            };
            let evicted = self.map.remove(&victim).expect("victim is cached");
            self.bytes -= evicted.memory_bytes();
            freed += evicted.memory_bytes();
            if let Some(spare) = spare {
                spare.recycle(evicted);
            }
        }
        freed
    }
}

/// Graph data kept in memory between loads: whole blocks, and adjacency
/// lists read vertex by vertex (dropped first when room is needed, since
/// they are the cheapest to read again).
#[derive(Default)]
pub(super) struct Cache {
    pub(super) blocks: BlockCache,
    pub(super) lists: Vertices,
}

impl Cache {
    /// Bytes held in all.
    pub(super) fn total(&self) -> u64 {
        self.blocks.bytes + self.lists.memory_bytes()
    }

    /// Drops the vertex lists, then evicts blocks (never those in `keep`;
    /// their buffers kept in `spare` if given), until at most `limit`
    /// bytes are held or nothing else can go (blocks with the fewest
    /// `walks` first). Returns the bytes freed.
    pub(super) fn shrink_to(
        &mut self,
        limit: u64,
        walks: &[u64],
        keep: &[usize],
        spare: Option<&SpareBuffers>,
    ) -> u64 {
        let mut freed = 0;
        if self.total() > limit {
            freed += self.lists.memory_bytes();
            self.lists.clear();
        }
        freed + self.blocks.shrink_to(limit, walks, keep, spare)
    }
}

/// How the memory budget is shared out: the pools' buffers, room to read
/// the largest previous vertex's list (second-order walks, see
/// `Engine::prev_reserve`), then a quarter of the rest for walks in flight
/// and the remainder for cached graph data.
///
/// Whenever a batch starts moving, the cache holds at most `cache` bytes
/// (offsets section included), so at least the previous-list reserve is
/// free: the previous vertices' lists are read a group at a time, each
/// group (at least one list) fitting what is free.
pub(super) struct Budget {
    /// Bytes of the pools' buffers.
    pub(super) pools: u64,
    /// Bytes for walks in flight.
    pub(super) in_flight: u64,
    /// Walks taken out of the pools at once.
    pub(super) batch_walks: usize,
    /// Bytes of cached graph data: blocks, vertex lists and the offsets.
    pub(super) cache: u64,
}

/// How walks are pooled while they wait: by the block they stand in, or
/// (second-order walks in GraphWalker mode, when two blocks fit the cache)
/// by that block and the block of the vertex they came from. A loaded
/// pair of blocks then holds both lists each step of its walks needs, as
/// in GraSorw's bi-block execution, instead of one read of a previous
/// vertex's list per walk that crossed blocks.
#[derive(Clone, Copy, Debug)]
pub(super) struct Pooling {
    pub(super) blocks: usize,
    pub(super) pairs: bool,
}

impl Pooling {
    /// Number of pools.
    pub(super) fn len(self) -> usize {
        if self.pairs {
            self.blocks * self.blocks
        } else {
            self.blocks
        }
    }

    /// The pool of walks standing in `block` that came from `prev_block`
    /// (`None`: no previous vertex, or it does not matter).
    pub(super) fn pool(self, block: usize, prev_block: Option<usize>) -> usize {
        if self.pairs {
            block * self.blocks + prev_block.unwrap_or(block)
        } else {
            block
        }
    }

    /// The block where `pool`'s walks stand.
    pub(super) fn block(self, pool: usize) -> usize {
        if self.pairs {
            pool / self.blocks
        } else {
            pool
        }
    }

    /// The block holding `pool`'s walks' previous vertices (their own
    /// block when pools are not paired).
    pub(super) fn prev_block(self, pool: usize) -> usize {
        if self.pairs {
            pool % self.blocks
        } else {
            pool
        }
    }

    /// Walks each block's data would serve: those standing in it and,
    /// with pairs, those that came from it.
    pub(super) fn walks_per_block<W: WalkWord>(self, pools: &WalkPools<W>) -> Vec<u64> {
        let mut walks = vec![0; self.blocks];
        for pool in (0..self.len()).filter(|&p| pools.count(p) > 0) {
            let (block, prev) = (self.block(pool), self.prev_block(pool));
            walks[block] += pools.count(pool);
            if prev != block {
                walks[prev] += pools.count(pool);
            }
        }
        walks
    }
}

/// Bytes each pool takes besides its buffer: the buffer's header, counts
/// and minimum hop.
pub(super) const POOL_BOOKKEEPING: usize = 48;

/// Most blocks whose pairs second-order walks are pooled by (their pools
/// number the square, and the scheduler weighs every pair per load).
pub(super) const MAX_PAIRED_BLOCKS: usize = 256;

/// Fewest walks a pool buffers before it spills, when the engine lowers
/// the capacity (fewer would make every spill a file append of a few
/// walks).
const MIN_POOL: usize = 16;

/// The adaptive rule's ceiling on one load.
pub(super) const MAX_ADAPTIVE_LOAD: u64 = 4 << 30;

/// The paper's self-adaptive load size for `live` unfinished walks:
/// `2^(floor(log2 live) + 1)` KiB, at most 4 GiB.
pub(super) fn adaptive_load_bytes(live: u64) -> u64 {
    let exponent = live.max(1).ilog2() + 1;
    (1u64 << exponent.min(40))
        .saturating_mul(1 << 10)
        .min(MAX_ADAPTIVE_LOAD)
}

/// The paper's static block size rule, `2^(floor(log10 R) + 2)` MiB for R
/// walks.
fn static_block_size(walks: u64) -> u64 {
    let digits = walks.max(1).ilog10();
    (1u64 << (digits + 2).min(42)) << 20
}

/// [`static_block_size`], bounded so that at least four blocks fit the
/// budget.
pub(super) fn default_block_size(walks: u64, mem_budget: u64) -> u64 {
    static_block_size(walks).min(mem_budget / 4).max(64 << 10)
}

/// Walks each pair's pool buffers when second-order walks are pooled by
/// the pairs of `blocks` blocks: a block's share of `capacity` (at least
/// [`MIN_POOL`], or `capacity` if that is less).
pub(super) fn pair_pool_capacity(capacity: usize, blocks: usize) -> usize {
    capacity.div_ceil(blocks).max(MIN_POOL.min(capacity))
}

/// Tries at finding blocks two of which fit the cache
/// ([`Engine::pair_blocks`]), each a sixteenth smaller than the last.
const PAIR_SIZE_TRIES: u32 = 8;

/// The smallest block a run given no block size is cut into while its
/// blocks do not fit the budget.
pub(super) const MIN_DEFAULT_BLOCK: u64 = 4 << 10;

/// Bytes block `block` takes in memory once loaded: its aligned extents,
/// plus the cumulative weights when `weighted`.
pub(super) fn block_memory(block: &Block, weighted: bool) -> u64 {
    // An aligned buffer takes at least a page.
    let buffer = |len: u64| len.max(quiver_io::ALIGN as u64);
    let targets_and_offsets = buffer(block.offsets_extent.len) + buffer(block.targets_extent.len);
    if weighted {
        targets_and_offsets
            + buffer(block.weights_extent.map_or(0, |e| e.len))
            + 4 * block.num_edges()
    } else {
        targets_and_offsets
    }
}

impl<'a, A: WalkApp, W: PooledWalk> Engine<'a, A, W> {
    /// The blocks of a run given no block size: `preferred` bytes each
    /// (the paper's static rule, or fine blocks for adaptive loads), halved
    /// while the largest block does not fit the cache's share of the budget
    /// beside one pool per block and the walks in flight. Halving stops
    /// where the pools of the smaller blocks would need more than they
    /// save (or at [`MIN_DEFAULT_BLOCK`]). If the blocks still do not fit,
    /// the pools' capacity is halved in turn (down to [`MIN_POOL`]), and
    /// the run's budget check then says what does not fit. Returns the
    /// block size, the blocks and the pool capacity.
    pub(super) fn default_blocks(
        graph: &GraphIndex,
        config: &Config,
        weighted: bool,
        prev_reserve: u64,
        preferred: u64,
    ) -> crate::Result<(u64, Blocks, usize)> {
        let mut capacity = config.pool_capacity;
        loop {
            let shortfall =
                |size| Self::shortfall(graph, config, weighted, prev_reserve, size, capacity);
            let (mut size, (mut short, mut blocks)) = (preferred, shortfall(preferred)?);
            while short > 0 && size > MIN_DEFAULT_BLOCK {
                let smaller = (size / 2).max(MIN_DEFAULT_BLOCK);
                let (smaller_short, smaller_blocks) = shortfall(smaller)?;
                if smaller_short > short {
                    break;
                }
                (size, short, blocks) = (smaller, smaller_short, smaller_blocks);
            }
            if short == 0 || capacity <= MIN_POOL {
                if capacity < config.pool_capacity {
                    tracing::info!(
                        pool_capacity = capacity,
                        asked = config.pool_capacity,
                        "pools buffer fewer walks: the budget holds no block beside pools of the asked capacity"
                    );
                }
                return Ok((size, blocks, capacity));
            }
            capacity = (capacity / 2).max(MIN_POOL);
        }
    }

    /// For second-order walks in GraphWalker mode given no block size: the
    /// largest blocks, up to the static rule's size, two of which fit the
    /// cache beside the pair pools, so that every pair load finds both
    /// lists in memory. The static rule's bound of a quarter of the budget
    /// would leave a third of the cache unused: on Kronecker 20 (128 MiB)
    /// at `--mem 48MiB`, 1M Node2Vec walks ran at 2.32-2.35M steps/s on
    /// its 11 blocks of 12 MiB (4.48 GB read) and at 2.53-2.68M on the 8
    /// blocks of 16.9 MiB chosen here (3.49 GB read). `None` when no size
    /// tried fits (the caller falls back to [`Engine::default_blocks`]).
    pub(super) fn pair_blocks(
        graph: &GraphIndex,
        config: &Config,
        weighted: bool,
        prev_reserve: u64,
        walks: u64,
    ) -> crate::Result<Option<(u64, Blocks)>> {
        // The cache is at most three quarters of the budget: two blocks
        // take at most half of it each.
        let mut size = static_block_size(walks)
            .min(config.mem_budget / 8 * 3)
            .max(MIN_DEFAULT_BLOCK);
        for _ in 0..PAIR_SIZE_TRIES {
            let blocks = Blocks::by_bytes(graph, size)?;
            if blocks.len() > MAX_PAIRED_BLOCKS {
                // Smaller blocks only make more.
                break;
            }
            let pooling = Pooling {
                blocks: blocks.len(),
                pairs: true,
            };
            let pools = Self::pools_bytes(
                pooling.len(),
                pair_pool_capacity(config.pool_capacity, blocks.len()),
            );
            let largest = blocks
                .iter()
                .map(|b| block_memory(b, weighted))
                .max()
                .unwrap_or(0);
            let cache = Self::split_budget(
                config.mem_budget,
                pools,
                prev_reserve,
                Self::bytes_in_flight(false),
            )
            .cache;
            if 2 * largest <= cache {
                return Ok(Some((size, blocks)));
            }
            size = (size - size / 16).max(MIN_DEFAULT_BLOCK);
        }
        Ok(None)
    }

    /// Bytes the budget lacks for blocks of `size` bytes (and those blocks):
    /// one pool per block, the reserve, and the largest block as the
    /// cache's share (three quarters of what the pools and the reserve
    /// leave; the rest is for walks in flight).
    pub(super) fn shortfall(
        graph: &GraphIndex,
        config: &Config,
        weighted: bool,
        prev_reserve: u64,
        size: u64,
        capacity: usize,
    ) -> crate::Result<(u64, Blocks)> {
        let blocks = Blocks::by_bytes(graph, size)?;
        let pools = Self::pools_bytes(blocks.len(), capacity);
        let largest = blocks
            .iter()
            .map(|b| block_memory(b, weighted))
            .max()
            .unwrap_or(0);
        let need = pools + prev_reserve + largest.div_ceil(3) * 4;
        Ok((need.saturating_sub(config.mem_budget), blocks))
    }

    /// Bytes `pools` pools of `capacity` walks take.
    fn pools_bytes(pools: usize, capacity: usize) -> u64 {
        (pools * (capacity * std::mem::size_of::<W>() + POOL_BOOKKEEPING)) as u64
    }

    /// Shares the budget out (see [`Budget`]) given `pooling`'s pools of
    /// `capacity` walks each.
    pub(super) fn share_budget(&self, pooling: Pooling, capacity: usize) -> Budget {
        let pools = Self::pools_bytes(pooling.len(), capacity);
        // Only GraphWalker mode moves batches by partition on loaded
        // blocks; iteration passes and vertex passes move them in lanes.
        let walk_bytes = Self::bytes_in_flight(
            self.config.mode == Mode::GraphWalker && self.moves_by_partition(false),
        );
        Self::split_budget(self.config.mem_budget, pools, self.prev_reserve, walk_bytes)
    }

    /// Whether a batch on loaded blocks moves partition by partition (with
    /// a sorted copy of it beside it): first-order walks several steps at a
    /// time, unless they move in lanes ([`Engine::moves_in_lanes`]).
    pub(super) fn moves_by_partition(&self, one_step: bool) -> bool {
        !one_step && !self.moves_in_lanes()
    }

    /// Whether walks on loaded data move in interleaved lanes rather than
    /// by partition: second-order walks, whose previous vertex's list the
    /// partitions of the current one do not keep close, and those of an
    /// app that [writes by walk](WalkApp::writes_by_walk).
    pub(super) fn moves_in_lanes(&self) -> bool {
        self.spec.node2vec.is_some() || self.app.writes_by_walk()
    }

    /// Bytes a walk in flight takes. In lanes: its slot and one for where
    /// it moves. By partition: its slot, the batch's sorted copy and where
    /// it moves, and on the side, while the batch moves (see
    /// [`Engine::move_served`]), either the next batch's slot or the last
    /// batch's leaving walk and its filed form.
    pub(super) fn bytes_in_flight(by_partition: bool) -> u64 {
        let slot = std::mem::size_of::<InFlight<W>>() as u64;
        if by_partition {
            4 * slot + std::mem::size_of::<W>() as u64
        } else {
            2 * slot
        }
    }

    /// [`Engine::share_budget`] of `mem_budget` with `pools` bytes of pools,
    /// `prev_reserve` bytes kept for a previous vertex's list, and
    /// `walk_bytes` for each walk in flight.
    fn split_budget(mem_budget: u64, pools: u64, prev_reserve: u64, walk_bytes: u64) -> Budget {
        let rest = mem_budget.saturating_sub(pools + prev_reserve);
        let in_flight = rest / 4;
        // (The previous vertices' lists of second-order walks are read in
        // rounds that fit what is free, at least the reserve, so they do not
        // shrink batches.)
        Budget {
            pools,
            in_flight,
            batch_walks: usize::try_from(in_flight / walk_bytes)
                .unwrap_or(usize::MAX)
                .max(1),
            cache: rest - in_flight,
        }
    }

    /// Evicts cached data (never the blocks in `keep`), and drops the
    /// offsets section if that is not enough, until the cache and the
    /// offsets leave `need` bytes of the cache's share free. Evicted
    /// blocks' buffers are kept spare for the next read if `for_read`.
    pub(super) fn fit_cache(
        &mut self,
        cache: &mut Cache,
        pools: &WalkPools<W>,
        budget: &Budget,
        keep: &[usize],
        need: u64,
        for_read: bool,
    ) {
        let limit = budget.cache.saturating_sub(need + self.offsets_bytes());
        let freed = cache.shrink_to(
            limit,
            &self.pooling.walks_per_block(pools),
            keep,
            for_read.then_some(&self.spare),
        );
        self.stats.release(freed);
        if cache.total() + self.offsets_bytes() + need > budget.cache {
            // The next vertex pass reads them again.
            self.stats.release(self.offsets_bytes());
            self.offsets = None;
        }
    }
}
