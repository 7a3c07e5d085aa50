//! What a walk run reports: the shared run summary, the paper's counts
//! (blocks loaded, vertex loads, steps per block I/O) and the app's result.

use quiver_run::RunSummary;
use serde::Serialize;

use crate::config::Mode;

/// What a run did, and the application's result.
#[derive(Clone, Debug, Serialize)]
pub struct Report<O> {
    /// Scheduling used.
    pub mode: Mode,
    /// Whether draws were keyed by walk id.
    pub exact: bool,
    /// Walks run.
    pub walks: u64,
    /// Steps taken (moves).
    pub steps: u64,
    /// Blocks in the partition.
    pub blocks: usize,
    /// Bytes per block (budget of the partition; the fine-block size when
    /// adaptive).
    pub block_size: u64,
    /// Whether loads grouped fine blocks adaptively.
    pub adaptive: bool,
    /// Whether the run read only the lists its walks visited, their
    /// offsets page by page, and of a long list only the pages the walks'
    /// draws landed on: a run of few walks (a query from a few sources, a
    /// small sample), with no block loaded and no index read whole.
    pub lists_only: bool,
    /// Whether second-order walks waited in pools per block pair (where
    /// they stand, where they came from) and moved on loaded pairs.
    pub paired: bool,
    /// Rounds in which first-order walks moved on loaded data through
    /// cache-sized partitions, sorted by partition hop by hop (FlashMob's
    /// design); 0 when every walk moved in interleaved lanes (in memory
    /// mode, when no batch held 4 walks per cache line of the graph's
    /// data).
    pub partition_rounds: u64,
    /// The most blocks one load grouped.
    pub largest_group: u64,
    /// Block reads.
    pub blocks_loaded: u64,
    /// Those of `blocks_loaded` made while the walks of the group loaded
    /// before moved (GraphWalker mode, first-order walks).
    pub blocks_read_ahead: u64,
    /// Block requests served by the cache.
    pub cache_hits: u64,
    /// Single-vertex adjacency reads.
    pub vertex_loads: u64,
    /// Steps per block read.
    pub steps_per_block_io: f64,
    /// Steps per second of wall time.
    pub steps_per_sec: f64,
    /// Times, peak memory (blocks, pools, walks in flight), threads and I/O
    /// (bytes read: graph data and walk spills; written: walk spills).
    /// `load_ns` is opening the graph and, in memory mode, reading it whole;
    /// out of core, block loads are part of the algorithm and of
    /// `compute_ns`, as GraphWalker times itself.
    #[serde(flatten)]
    pub summary: RunSummary,
    /// The budget it was given.
    pub mem_budget: u64,
    /// The most the budget set aside at once: what was held (the peak),
    /// and the unused part of each batch's share for walks in flight.
    /// Within the budget; not memory the run held.
    pub mem_reserved_bytes: u64,
    /// The I/O backend used, and why not io_uring/O_DIRECT if it fell back
    /// ("blocks mapped, vertices by ..." when blocks are the mapped file's
    /// pages).
    pub io_backend: String,
    /// Bits of source | position | hop in a walk word.
    pub walk_word_bits: (u32, u32, u32),
    /// The application's result.
    pub result: O,
}

/// `a / b`, or 0 when nothing was divided.
#[allow(clippy::cast_precision_loss)]
pub(crate) fn ratio(a: u64, b: u64) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

impl<O> Report<O> {
    /// The same report with another result.
    pub fn with_result<P>(self, result: P) -> Report<P> {
        Report {
            mode: self.mode,
            exact: self.exact,
            walks: self.walks,
            steps: self.steps,
            blocks: self.blocks,
            block_size: self.block_size,
            adaptive: self.adaptive,
            lists_only: self.lists_only,
            paired: self.paired,
            partition_rounds: self.partition_rounds,
            largest_group: self.largest_group,
            blocks_loaded: self.blocks_loaded,
            blocks_read_ahead: self.blocks_read_ahead,
            cache_hits: self.cache_hits,
            vertex_loads: self.vertex_loads,
            steps_per_block_io: self.steps_per_block_io,
            steps_per_sec: self.steps_per_sec,
            summary: self.summary,
            mem_budget: self.mem_budget,
            mem_reserved_bytes: self.mem_reserved_bytes,
            io_backend: self.io_backend,
            walk_word_bits: self.walk_word_bits,
            result,
        }
    }

    /// Steps per second of compute time (the algorithm alone).
    pub fn steps_per_compute_sec(&self) -> f64 {
        self.summary.per_compute_second(self.steps)
    }

    /// The report of this run followed by `next` (counts and times add up,
    /// peak memory is the larger; the result is `next`'s).
    pub fn then(self, next: Report<O>) -> Report<O> {
        let steps = self.steps + next.steps;
        let blocks_loaded = self.blocks_loaded + next.blocks_loaded;
        let summary = self.summary.then(next.summary);
        Report {
            walks: self.walks + next.walks,
            steps,
            blocks_loaded,
            blocks_read_ahead: self.blocks_read_ahead + next.blocks_read_ahead,
            cache_hits: self.cache_hits + next.cache_hits,
            vertex_loads: self.vertex_loads + next.vertex_loads,
            partition_rounds: self.partition_rounds + next.partition_rounds,
            steps_per_block_io: ratio(steps, blocks_loaded),
            steps_per_sec: ratio(steps, summary.wall_ns) * 1e9,
            summary,
            largest_group: self.largest_group.max(next.largest_group),
            mem_reserved_bytes: self.mem_reserved_bytes.max(next.mem_reserved_bytes),
            ..next
        }
    }
}
