//! The three ways to run walks: GraphWalker's state-aware out-of-core
//! scheduler, DrunkardMob's iteration-based baseline, and the in-memory
//! reference. They share blocks, I/O, walk pools, threads and the step
//! function, so they differ only in scheduling.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use quiver_csr::{Blocks, Graph};
use quiver_io::{AlignedBuf, BackendChoice, ReadFile, ReadOptions, ReadRequest};
use quiver_walkstate::{ExactWalk, WalkLayout, WalkPools, WalkWord};
use rayon::prelude::*;
use serde::Serialize;

use crate::app::{Visit, WalkApp};
use crate::loaded::{edge_ranges, list_bytes, Executing, LoadedBlock, Vertices};
use crate::rng::KeyedRng;
use crate::spec::{contains_all, look_ahead, step, Adjacency, Kind, Prev, Starts, Step, WalkSpec};
use crate::{Error, Result};

/// How walks are scheduled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// GraphWalker: load the block with the most walks (or, with
    /// probability p, the one holding the slowest walk), keep blocks cached,
    /// move each walk until it leaves the loaded range; read single vertices
    /// once few walks remain.
    #[default]
    GraphWalker,
    /// DrunkardMob: each pass loads every block in order, with no cache
    /// across passes, and moves each walk exactly one step.
    Iteration,
    /// The whole graph in memory; each walk runs to its end. The reference.
    Memory,
}

/// How graph blocks are read.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum IoMode {
    /// io_uring with O_DIRECT: the page cache cannot hide I/O.
    #[default]
    Direct,
    /// Through the page cache, as GraphWalker's C++ reads.
    Buffered,
}

/// Engine settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// Scheduling.
    pub mode: Mode,
    /// Key every random draw by (seed, walk id, hop): every mode, thread
    /// count and block size then gives the same walks.
    pub exact: bool,
    /// Seed of every random choice.
    pub seed: u64,
    /// Worker threads (0: one per core).
    pub threads: usize,
    /// Memory for cached blocks, walk pools and walks in flight.
    pub mem_budget: u64,
    /// Block size in bytes. With `adaptive`, the fine blocks that loads
    /// group (default 2 MiB); otherwise the fixed block size (default: the
    /// paper's static rule, `2^(floor(log10 walks) + 2)` MiB, at most a
    /// quarter of the budget).
    pub block_size: Option<u64>,
    /// The paper's self-adaptive block size: before each load, group
    /// `2^(floor(log2 live walks) + 1)` KiB worth of consecutive fine blocks
    /// (capped by the cache), so loads shrink as walks finish.
    /// GraphWalker mode and first-order walks only: Node2Vec walks use the
    /// static rule's blocks (loaded in pairs when two fit the cache).
    pub adaptive: bool,
    /// How blocks are read.
    pub io: IoMode,
    /// Probability of loading the block with the slowest walk instead of
    /// the one with the most walks.
    pub p_slowest: f64,
    /// Walks buffered per block before spilling (shared among a block's
    /// pairs when Node2Vec walks are pooled by block pair).
    pub pool_capacity: usize,
    /// Below this many walks, read single vertices instead of blocks.
    pub vertex_threshold: u64,
    /// Directory for walk spill files.
    pub work_dir: PathBuf,
    /// Memory mode, first-order walks: graph data per partition that walks
    /// are sorted into each hop (a share of a core's L2 cache).
    pub partition_bytes: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            mode: Mode::GraphWalker,
            exact: false,
            seed: 1,
            threads: 0,
            mem_budget: 512 << 20,
            block_size: None,
            adaptive: true,
            io: IoMode::Direct,
            p_slowest: 0.2,
            pool_capacity: 1024,
            vertex_threshold: 100_000,
            work_dir: std::env::temp_dir(),
            partition_bytes: PARTITION_BYTES,
        }
    }
}

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
    /// Whether second-order walks waited in pools per block pair (where
    /// they stand, where they came from) and moved on loaded pairs.
    pub paired: bool,
    /// The most blocks one load grouped.
    pub largest_group: u64,
    /// Block reads.
    pub blocks_loaded: u64,
    /// Block requests served by the cache.
    pub cache_hits: u64,
    /// Single-vertex adjacency reads.
    pub vertex_loads: u64,
    /// Bytes read: graph data and walk spills.
    pub bytes_read: u64,
    /// Bytes written: walk spills.
    pub bytes_written: u64,
    /// Steps per block read.
    pub steps_per_block_io: f64,
    /// Wall time in nanoseconds.
    pub wall_ns: u64,
    /// Steps per second.
    pub steps_per_sec: f64,
    /// Most memory the engine held at once (blocks, pools, walks in flight).
    pub peak_mem_bytes: u64,
    /// The budget it was given.
    pub mem_budget: u64,
    /// The I/O backend used, and why not io_uring/O_DIRECT if it fell back.
    pub io_backend: String,
    /// Bits of source | position | hop in a walk word.
    pub walk_word_bits: (u32, u32, u32),
    /// The application's result.
    pub result: O,
}

/// Hears how a run advances (the driver draws a progress bar from it).
pub trait Progress: Sync {
    /// `done` of `total` walks have ended; `steps` taken and `bytes_read` so far.
    fn update(&self, done: u64, total: u64, steps: u64, bytes_read: u64);
}

struct Silent;

impl Progress for Silent {
    fn update(&self, _done: u64, _total: u64, _steps: u64, _bytes_read: u64) {}
}

/// `a / b`, or 0 when nothing was divided.
#[allow(clippy::cast_precision_loss)]
fn ratio(a: u64, b: u64) -> f64 {
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
            paired: self.paired,
            largest_group: self.largest_group,
            blocks_loaded: self.blocks_loaded,
            cache_hits: self.cache_hits,
            vertex_loads: self.vertex_loads,
            bytes_read: self.bytes_read,
            bytes_written: self.bytes_written,
            steps_per_block_io: self.steps_per_block_io,
            wall_ns: self.wall_ns,
            steps_per_sec: self.steps_per_sec,
            peak_mem_bytes: self.peak_mem_bytes,
            mem_budget: self.mem_budget,
            io_backend: self.io_backend,
            walk_word_bits: self.walk_word_bits,
            result,
        }
    }

    /// The report of this run followed by `next` (counts and times add up,
    /// peak memory is the larger; the result is `next`'s).
    pub fn then(self, next: Report<O>) -> Report<O> {
        let steps = self.steps + next.steps;
        let blocks_loaded = self.blocks_loaded + next.blocks_loaded;
        let wall_ns = self.wall_ns + next.wall_ns;
        Report {
            walks: self.walks + next.walks,
            steps,
            blocks_loaded,
            cache_hits: self.cache_hits + next.cache_hits,
            vertex_loads: self.vertex_loads + next.vertex_loads,
            bytes_read: self.bytes_read + next.bytes_read,
            bytes_written: self.bytes_written + next.bytes_written,
            steps_per_block_io: ratio(steps, blocks_loaded),
            wall_ns,
            steps_per_sec: ratio(steps, wall_ns) * 1e9,
            peak_mem_bytes: self.peak_mem_bytes.max(next.peak_mem_bytes),
            largest_group: self.largest_group.max(next.largest_group),
            ..next
        }
    }
}

/// Runs `app` on the `.qcsr` graph at `graph`.
pub fn run<A: WalkApp>(
    graph: &std::path::Path,
    config: &Config,
    app: &A,
) -> Result<Report<A::Output>> {
    run_with_progress(graph, config, app, &Silent)
}

/// [`run`], reporting progress after every batch of walks.
pub fn run_with_progress<A: WalkApp>(
    graph: &std::path::Path,
    config: &Config,
    app: &A,
    progress: &dyn Progress,
) -> Result<Report<A::Output>> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(config.threads)
        .build()
        .map_err(|e| {
            Error::InvalidArgument(format!(
                "cannot start {} worker threads: {e}",
                config.threads
            ))
        })?;
    let mut config = config.clone();
    config.exact |= app.needs_walk_ids();
    pool.install(|| {
        if app.spec().node2vec.is_some() {
            // Second-order walks carry their previous vertex and an id.
            config.exact = true;
            Engine::<A, SecondOrderWalk>::new(graph, &config, app, progress)?.run()
        } else if config.exact {
            Engine::<A, ExactWalk>::new(graph, &config, app, progress)?.run()
        } else {
            Engine::<A, u64>::new(graph, &config, app, progress)?.run()
        }
    })
}

/// A walk as pools hold it: the packed word, plus an id in exact mode.
trait PooledWalk: WalkWord + Copy {
    fn make(word: u64, id: u64) -> Self;
    fn id(&self) -> Option<u64>;
    fn with_word(self, word: u64) -> Self;
    /// The vertex the walk came from, for second-order walks.
    fn prev(&self) -> Option<u32> {
        None
    }
    /// The same walk having come from `prev`.
    fn with_prev(self, _prev: Option<u32>) -> Self {
        self
    }
}

impl PooledWalk for u64 {
    fn make(word: u64, _id: u64) -> Self {
        word
    }
    fn id(&self) -> Option<u64> {
        None
    }
    fn with_word(self, word: u64) -> Self {
        word
    }
}

impl PooledWalk for ExactWalk {
    fn make(word: u64, id: u64) -> Self {
        ExactWalk { word, id }
    }
    fn id(&self) -> Option<u64> {
        Some(self.id)
    }
    fn with_word(self, word: u64) -> Self {
        ExactWalk { word, id: self.id }
    }
}

/// Whole blocks kept in memory between loads.
#[derive(Default)]
struct BlockCache {
    map: HashMap<usize, Arc<LoadedBlock>>,
    bytes: u64,
}

impl BlockCache {
    /// Evicts the cached blocks with the fewest waiting walks (`walks`, per
    /// block; never those in `keep`) until at most `limit` bytes are cached
    /// or nothing else can go. Returns the bytes freed.
    fn shrink_to(&mut self, limit: u64, walks: &[u64], keep: &[usize]) -> u64 {
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
        }
        freed
    }
}

/// Graph data kept in memory between loads: whole blocks, and adjacency
/// lists read vertex by vertex (dropped first when room is needed, since
/// they are the cheapest to read again).
#[derive(Default)]
struct Cache {
    blocks: BlockCache,
    lists: Vertices,
}

impl Cache {
    /// Bytes held in all.
    fn total(&self) -> u64 {
        self.blocks.bytes + self.lists.memory_bytes()
    }

    /// Drops the vertex lists, then evicts blocks (never those in `keep`),
    /// until at most `limit` bytes are held or nothing else can go (blocks
    /// with the fewest `walks` first). Returns the bytes freed.
    fn shrink_to(&mut self, limit: u64, walks: &[u64], keep: &[usize]) -> u64 {
        let mut freed = 0;
        if self.total() > limit {
            freed += self.lists.memory_bytes();
            self.lists.clear();
        }
        freed + self.blocks.shrink_to(limit, walks, keep)
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
struct Budget {
    /// Bytes of the pools' buffers.
    pools: u64,
    /// Bytes for walks in flight.
    in_flight: u64,
    /// Walks taken out of the pools at once.
    batch_walks: usize,
    /// Bytes of cached graph data: blocks, vertex lists and the offsets.
    cache: u64,
}

/// How walks are pooled while they wait: by the block they stand in, or
/// (second-order walks in GraphWalker mode, when two blocks fit the cache)
/// by that block and the block of the vertex they came from. A loaded
/// pair of blocks then holds both lists each step of its walks needs, as
/// in GraSorw's bi-block execution, instead of one read of a previous
/// vertex's list per walk that crossed blocks.
#[derive(Clone, Copy, Debug)]
struct Pooling {
    blocks: usize,
    pairs: bool,
}

impl Pooling {
    /// Number of pools.
    fn len(self) -> usize {
        if self.pairs {
            self.blocks * self.blocks
        } else {
            self.blocks
        }
    }

    /// The pool of walks standing in `block` that came from `prev_block`
    /// (`None`: no previous vertex, or it does not matter).
    fn pool(self, block: usize, prev_block: Option<usize>) -> usize {
        if self.pairs {
            block * self.blocks + prev_block.unwrap_or(block)
        } else {
            block
        }
    }

    /// The block where `pool`'s walks stand.
    fn block(self, pool: usize) -> usize {
        if self.pairs {
            pool / self.blocks
        } else {
            pool
        }
    }

    /// The block holding `pool`'s walks' previous vertices (their own
    /// block when pools are not paired).
    fn prev_block(self, pool: usize) -> usize {
        if self.pairs {
            pool % self.blocks
        } else {
            pool
        }
    }

    /// Walks each block's data would serve: those standing in it and,
    /// with pairs, those that came from it.
    fn walks_per_block<W: WalkWord>(self, pools: &WalkPools<W>) -> Vec<u64> {
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
const POOL_BOOKKEEPING: usize = 48;

/// Most blocks whose pairs second-order walks are pooled by (their pools
/// number the square, and the scheduler weighs every pair per load).
const MAX_PAIRED_BLOCKS: usize = 256;

/// Fewest walks a pair's pool buffers before it spills (fewer would make
/// every spill a file append of a few walks).
const MIN_PAIR_POOL: usize = 16;

/// A Node2Vec walk: an exact walk that also remembers where it came from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
#[repr(C)]
struct SecondOrderWalk {
    word: u64,
    id: u64,
    /// The previous vertex, or `NO_PREV`.
    prev: u32,
    _pad: u32,
}

const NO_PREV: u32 = u32::MAX;

impl WalkWord for SecondOrderWalk {
    fn word(&self) -> u64 {
        self.word
    }
}

impl PooledWalk for SecondOrderWalk {
    fn make(word: u64, id: u64) -> Self {
        SecondOrderWalk {
            word,
            id,
            prev: NO_PREV,
            _pad: 0,
        }
    }
    fn id(&self) -> Option<u64> {
        Some(self.id)
    }
    fn with_word(self, word: u64) -> Self {
        SecondOrderWalk { word, ..self }
    }
    fn prev(&self) -> Option<u32> {
        Some(self.prev).filter(|&p| p != NO_PREV)
    }
    fn with_prev(self, prev: Option<u32>) -> Self {
        SecondOrderWalk {
            prev: prev.unwrap_or(NO_PREV),
            ..self
        }
    }
}

/// A walk in flight: its pooled form (position field stale) and its vertex.
type InFlight<W> = (W, u32);

/// What moving one walk one step by single-vertex reads is taken to cost,
/// against a whole block read that moves each of its walks several steps:
/// two pages (offsets, targets) per step, for about four steps a walk takes
/// inside a loaded block.
const VERTEX_READ_BYTES: u64 = 4 * 2 * quiver_io::ALIGN as u64;

/// Most vertices whose lists are read at once in a vertex pass (fewer when
/// the budget is small: see `read_group`).
const VERTEX_READ_GROUP: usize = 256;

/// Graph data per partition of in-memory walking by default: a core's L2
/// cache here (1 MiB), which measured fastest on this machine (a quarter
/// of it was slower), with the L3 behind it.
const PARTITION_BYTES: u64 = 1 << 20;

/// Walks that in-memory walking sorts and moves together (it holds two
/// copies of them).
const PARTITIONED_BATCH: u64 = 1 << 24;

/// Pieces the first hop's sort counts in parallel.
const FIRST_RUNS: usize = 64;

/// A partition's data is swept into cache when it has at least one walk
/// per this many of its cache lines.
const WARM_LINES_PER_WALK: u64 = 8;

/// Which partition holds a vertex: the first candidate for each 64
/// consecutive vertices, then a short scan.
struct Locator<'a> {
    bounds: &'a [u32],
    first: Vec<u32>,
}

impl<'a> Locator<'a> {
    const SHIFT: u32 = 6;

    /// For partitions with `bounds` (from 0 to |V|).
    fn new(bounds: &'a [u32]) -> Locator<'a> {
        let end = *bounds.last().expect("bounds are never empty");
        let mut p = 0;
        let first = (0..=end >> Self::SHIFT)
            .map(|chunk| {
                while p + 2 < bounds.len() && bounds[p + 1] <= chunk << Self::SHIFT {
                    p += 1;
                }
                u32::try_from(p).expect("partitions are fewer than vertices")
            })
            .collect();
        Locator { bounds, first }
    }

    fn partition(&self, v: u32) -> usize {
        let mut p = self.first[(v >> Self::SHIFT) as usize] as usize;
        while self.bounds[p + 1] <= v {
            p += 1;
        }
        p
    }
}

/// Walks per unit of parallel work; fixed so results do not depend on the
/// number of threads.
const CHUNK: usize = 4096;

struct Engine<'a, A: WalkApp, W> {
    app: &'a A,
    progress: &'a dyn Progress,
    total_walks: u64,
    config: &'a Config,
    spec: WalkSpec,
    file: ReadFile,
    layout: quiver_csr::format::Layout,
    weighted: bool,
    num_vertices: u32,
    blocks: Arc<Blocks>,
    block_size: u64,
    word: WalkLayout,
    started: Instant,
    stats: Stats,
    /// The whole offsets section, once vertex passes begin and if it takes
    /// at most half of the cache: single-vertex reads then need only
    /// their targets.
    offsets: Option<AlignedBuf>,
    /// For second-order walks, the bytes reading the largest adjacency
    /// list vertex by vertex takes ([`list_bytes`]): kept free of cached
    /// data so that a previous vertex's list can always be read.
    prev_reserve: u64,
    /// Whether no list holds a vertex twice (the graph's header says so).
    distinct_targets: bool,
    /// How waiting walks are pooled (decided once the budget is shared).
    pooling: Pooling,
    _walk: std::marker::PhantomData<W>,
}

#[derive(Default)]
struct Stats {
    largest_group: u64,
    steps: u64,
    blocks_loaded: u64,
    cache_hits: u64,
    vertex_loads: u64,
    mem_now: u64,
    mem_peak: u64,
    batches: u64,
}

impl Stats {
    fn hold(&mut self, bytes: u64) {
        self.mem_now += bytes;
        self.mem_peak = self.mem_peak.max(self.mem_now);
    }

    fn release(&mut self, bytes: u64) {
        self.mem_now -= bytes;
    }
}

/// Fine blocks of the adaptive rule, as in the paper.
const FINE_BLOCK: u64 = 2 << 20;

/// The adaptive rule's ceiling on one load.
const MAX_ADAPTIVE_LOAD: u64 = 4 << 30;

/// The paper's self-adaptive load size for `live` unfinished walks:
/// `2^(floor(log2 live) + 1)` KiB, at most 4 GiB.
fn adaptive_load_bytes(live: u64) -> u64 {
    let exponent = live.max(1).ilog2() + 1;
    (1u64 << exponent.min(40))
        .saturating_mul(1 << 10)
        .min(MAX_ADAPTIVE_LOAD)
}

/// The paper's static block size rule, `2^(floor(log10 R) + 2)` MiB for R
/// walks, bounded so that at least four blocks fit the budget.
fn default_block_size(walks: u64, mem_budget: u64) -> u64 {
    let digits = walks.max(1).ilog10();
    let rule = (1u64 << (digits + 2).min(42)) << 20;
    rule.min(mem_budget / 4).max(64 << 10)
}

impl<'a, A: WalkApp, W: PooledWalk> Engine<'a, A, W> {
    fn new(
        path: &std::path::Path,
        config: &'a Config,
        app: &'a A,
        progress: &'a dyn Progress,
    ) -> Result<Self> {
        if config.mem_budget == 0 {
            return Err(Error::InvalidArgument(
                "the memory budget must be more than zero bytes".into(),
            ));
        }
        if !(0.0..=1.0).contains(&config.p_slowest) {
            return Err(Error::InvalidArgument(format!(
                "p must be a probability, got {}",
                config.p_slowest
            )));
        }
        if config.partition_bytes == 0 {
            return Err(Error::InvalidArgument(
                "the partition size of memory mode must be more than zero bytes".into(),
            ));
        }
        let spec = app.spec();
        if let Some(bias) = spec.node2vec {
            for (name, value) in [("p", bias.p), ("q", bias.q)] {
                if !(value.is_finite() && value > 0.0) {
                    return Err(Error::InvalidArgument(format!(
                        "Node2Vec's {name} must be a finite number above 0, got {value}"
                    )));
                }
            }
        }
        let graph = Graph::open(path)?;
        let num_vertices = graph.num_vertices();
        if num_vertices == 0 {
            return Err(Error::InvalidArgument(format!(
                "{} has no vertices to walk",
                path.display()
            )));
        }
        if let Starts::Sources { sources, .. } = &spec.starts {
            if let Some(&bad) = sources.iter().find(|&&s| s >= num_vertices) {
                return Err(Error::InvalidArgument(format!(
                    "source vertex {bad} is out of range: the graph has {num_vertices} vertices (0..{num_vertices})"
                )));
            }
        }
        let weighted = spec.kind == Kind::Weighted;
        if weighted && !graph.is_weighted() {
            return Err(Error::InvalidArgument(format!(
                "weighted walks need edge weights, and {} has none",
                path.display()
            )));
        }
        let walks = spec.starts.total(num_vertices);
        let block_size = match (config.mode, config.block_size) {
            (Mode::Memory, _) => u64::MAX,
            (_, Some(size)) => size,
            (Mode::GraphWalker, None) if config.adaptive && spec.node2vec.is_none() => FINE_BLOCK,
            (_, None) => default_block_size(walks, config.mem_budget),
        };
        let blocks = Blocks::by_bytes(&graph, block_size)?;
        let largest = blocks
            .iter()
            .map(|b| u64::from(b.num_vertices()))
            .max()
            .unwrap_or(1);
        let word = WalkLayout::new(
            spec.starts.num_sources(num_vertices),
            largest,
            u64::from(spec.length),
        )?;
        let layout = graph.layout();
        let prev_reserve = if spec.node2vec.is_some() {
            let max_degree = graph
                .offsets()
                .windows(2)
                .map(|w| w[1] - w[0])
                .max()
                .unwrap_or(0);
            list_bytes(max_degree, false)
        } else {
            0
        };
        let distinct_targets = graph.has_distinct_targets();
        drop(graph);
        let blocks_len = blocks.len();
        let options = ReadOptions {
            backend: BackendChoice::Auto,
            direct: config.io == IoMode::Direct,
            ..ReadOptions::default()
        };
        let file = ReadFile::open(path, &options).map_err(|source| Error::Io {
            path: path.to_owned(),
            source,
        })?;
        Ok(Engine {
            app,
            progress,
            total_walks: walks,
            config,
            spec,
            file,
            layout,
            weighted,
            num_vertices,
            blocks: Arc::new(blocks),
            block_size,
            word,
            started: Instant::now(),
            stats: Stats::default(),
            offsets: None,
            prev_reserve,
            distinct_targets,
            pooling: Pooling {
                blocks: blocks_len,
                pairs: false,
            },
            _walk: std::marker::PhantomData,
        })
    }

    fn run(mut self) -> Result<Report<A::Output>> {
        let (state, pool_stats) = match self.config.mode {
            Mode::Memory => (self.run_in_memory()?, Default::default()),
            Mode::GraphWalker | Mode::Iteration => self.run_out_of_core()?,
        };
        let io = self.file.stats().snapshot();
        let wall_ns = u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let stats = &self.stats;
        let pool_stats: quiver_walkstate::PoolStats = pool_stats;
        Ok(Report {
            mode: self.config.mode,
            exact: self.config.exact,
            walks: self.spec.starts.total(self.num_vertices),
            steps: stats.steps,
            blocks: self.blocks.len(),
            block_size: self.block_size,
            adaptive: self.adaptive(),
            paired: self.pooling.pairs,
            largest_group: stats.largest_group,
            blocks_loaded: stats.blocks_loaded,
            cache_hits: stats.cache_hits,
            vertex_loads: stats.vertex_loads,
            bytes_read: io.read_bytes + pool_stats.bytes_read,
            bytes_written: pool_stats.bytes_written,
            steps_per_block_io: ratio(stats.steps, stats.blocks_loaded),
            wall_ns,
            steps_per_sec: ratio(stats.steps, wall_ns) * 1e9,
            peak_mem_bytes: stats.mem_peak,
            mem_budget: self.config.mem_budget,
            io_backend: match self.file.fallback_reason() {
                None => format!(
                    "{}{}",
                    self.file.backend(),
                    if self.file.is_direct() {
                        " + O_DIRECT"
                    } else {
                        ""
                    }
                ),
                Some(why) => format!("{} ({why})", self.file.backend()),
            },
            walk_word_bits: (
                self.word.source_bits(),
                self.word.position_bits(),
                self.word.hop_bits(),
            ),
            result: self.app.finish(state)?,
        })
    }

    fn report_progress(&self, live: u64) {
        let read = self.file.stats().snapshot().read_bytes;
        self.progress.update(
            self.total_walks - live,
            self.total_walks,
            self.stats.steps,
            read,
        );
    }

    /// The in-flight form of walk `id` at its start.
    fn start(&self, id: u64) -> InFlight<W> {
        let source = self
            .spec
            .starts
            .source_of(id, self.config.seed, self.num_vertices);
        let vertex = self.spec.starts.source_vertex(source);
        (W::make(self.word.encode(source, 0, 0), id), vertex)
    }

    fn run_in_memory(&mut self) -> Result<A::State> {
        let block = self.blocks.get(quiver_csr::BlockId(0)).clone();
        let loaded = LoadedBlock::read(&self.file, &block, self.weighted, &self.layout)?;
        self.stats.blocks_loaded += 1;
        self.stats.hold(loaded.memory_bytes());
        if self.spec.node2vec.is_none() {
            return self.run_partitioned(&loaded);
        }
        // Second-order walks read their previous vertex's list too, which
        // partitions by the current vertex do not keep close: they move in
        // batches of interleaved lanes.
        let exec = Executing::new(vec![Arc::new(loaded)]);
        let total = self.spec.starts.total(self.num_vertices);
        let mut state = self.app.new_state();
        let batch = (CHUNK * 256) as u64;
        let mut first = 0;
        while first < total {
            let last = (first + batch).min(total);
            let walks: Vec<InFlight<W>> = (first..last).map(|id| self.start(id)).collect();
            let bytes = (walks.len() * std::mem::size_of::<InFlight<W>>()) as u64;
            self.stats.hold(bytes);
            let (moved, s) = self.advance(&exec, walks, false)?;
            assert!(
                moved.is_empty(),
                "no walk can leave a block holding every vertex"
            );
            self.app.merge(&mut state, s);
            self.stats.release(bytes);
            first = last;
            self.report_progress(total - last);
        }
        Ok(state)
    }

    /// In memory, first-order walks move hop by hop in partition order
    /// (FlashMob's design): each hop, a counting sort groups a batch's walks
    /// by the partition (about [`Config::partition_bytes`] of graph data) holding
    /// their vertex, then each partition's data is swept into the CPU's
    /// caches and its walks step there, partitions in parallel. Walks keep
    /// their draws (exact: keyed by walk id and hop; compact: by the hop's
    /// pass and the walk's place in it, which the stable sort fixes), so
    /// thread counts change nothing.
    fn run_partitioned(&mut self, graph: &LoadedBlock) -> Result<A::State> {
        let bounds = graph.partitions(self.config.partition_bytes);
        let locator = Locator::new(&bounds);
        let parts = bounds.len() - 1;
        let total = self.spec.starts.total(self.num_vertices);
        let mut state = self.app.new_state();
        let mut first = 0;
        while first < total {
            let last = (first + PARTITIONED_BATCH).min(total);
            let mut walks: Vec<InFlight<W>> = (first..last).map(|id| self.start(id)).collect();
            let mut sorted = walks.clone();
            let bytes = 2 * (walks.len() * std::mem::size_of::<InFlight<W>>()) as u64;
            self.stats.hold(bytes);
            // The walks still going, as runs of `walks`: equal pieces at
            // first, then each partition's survivors.
            let piece = walks.len().div_ceil(FIRST_RUNS);
            let mut runs: Vec<(usize, usize)> = (0..walks.len())
                .step_by(piece)
                .map(|start| (start, piece.min(walks.len() - start)))
                .collect();
            for hop in 0..=u64::from(self.spec.length) {
                if runs.is_empty() {
                    break;
                }
                // Each run's walks per partition, then a stable scatter of
                // every run into its share of each partition.
                let counts: Vec<Vec<usize>> = runs
                    .par_iter()
                    .map(|&(start, len)| {
                        let mut count = vec![0; parts];
                        for &(_, v) in &walks[start..start + len] {
                            count[locator.partition(v)] += 1;
                        }
                        count
                    })
                    .collect();
                let sizes: Vec<usize> = (0..parts)
                    .map(|p| counts.iter().map(|c| c[p]).sum())
                    .collect();
                let mut targets: Vec<Vec<&mut [InFlight<W>]>> =
                    runs.iter().map(|_| Vec::with_capacity(parts)).collect();
                let mut rest = &mut sorted[..];
                for p in 0..parts {
                    for (run, count) in counts.iter().enumerate() {
                        let (share, tail) = rest.split_at_mut(count[p]);
                        targets[run].push(share);
                        rest = tail;
                    }
                }
                runs.par_iter()
                    .zip(targets)
                    .for_each(|(&(start, len), mut shares)| {
                        let mut filled = vec![0; parts];
                        for &walk in &walks[start..start + len] {
                            let p = locator.partition(walk.1);
                            shares[p][filled[p]] = walk;
                            filled[p] += 1;
                        }
                    });
                // Then partition by partition, each on its own data.
                self.stats.batches += 1;
                let pass = self.stats.batches;
                let mut partitions = Vec::with_capacity(parts);
                let mut rest = &mut sorted[..];
                let mut start = 0;
                for (p, &size) in sizes.iter().enumerate() {
                    let (these, tail) = rest.split_at_mut(size);
                    partitions.push((p, start, these));
                    rest = tail;
                    start += size;
                }
                let this = &*self;
                let moved: Vec<(usize, usize, u64, A::State)> = partitions
                    .into_par_iter()
                    .map(|(p, start, these)| {
                        let (kept, steps, state) = this.step_partition(
                            graph,
                            bounds[p]..bounds[p + 1],
                            these,
                            hop,
                            pass,
                            start as u64,
                        );
                        (start, kept, steps, state)
                    })
                    .collect();
                runs.clear();
                for (start, kept, steps, s) in moved {
                    self.stats.steps += steps;
                    self.app.merge(&mut state, s);
                    if kept > 0 {
                        runs.push((start, kept));
                    }
                }
                std::mem::swap(&mut walks, &mut sorted);
            }
            self.stats.release(bytes);
            first = last;
            self.report_progress(total - last);
        }
        Ok(state)
    }

    /// Visits and steps the walks standing in partition `vertices` (`walks`,
    /// the `first`.. of the hop's pass), keeping those that go on at the
    /// front of `walks`. Returns how many it kept, the steps taken and what
    /// the app gathered.
    #[allow(clippy::too_many_arguments)]
    fn step_partition(
        &self,
        graph: &LoadedBlock,
        vertices: std::ops::Range<u32>,
        walks: &mut [InFlight<W>],
        hop: u64,
        pass: u64,
        first: u64,
    ) -> (usize, u64, A::State) {
        // Sweeping the partition's data in pays when walks will touch most
        // of its cache lines.
        if walks.len() as u64 * WARM_LINES_PER_WALK >= self.config.partition_bytes / 64 {
            graph.warm(vertices);
        }
        let mut state = self.app.new_state();
        let (mut kept, mut steps) = (0, 0);
        for (index, i) in (first..).zip(0..walks.len()) {
            let (walk, vertex) = walks[i];
            let source = self.word.source(walk.word());
            let source_vertex = self.spec.starts.source_vertex(source);
            #[allow(clippy::cast_possible_truncation)] // Hops are bounded by the u32 length.
            let visit = Visit {
                walk: walk.id(),
                source,
                source_vertex,
                vertex,
                hop: hop as u32,
            };
            self.app.visit(&mut state, &visit);
            if hop == u64::from(self.spec.length) {
                continue;
            }
            let mut rng = match walk.id() {
                Some(id) => KeyedRng::new(self.config.seed, id, hop),
                None => KeyedRng::new(self.config.seed, pass, index),
            };
            let next = match step(
                &self.spec,
                graph,
                self.num_vertices,
                source_vertex,
                vertex,
                None,
                &mut rng,
            ) {
                Step::Stop => continue,
                Step::Move(next) | Step::Teleport(next) => next,
            };
            steps += 1;
            walks[kept] = (walk.with_word(self.word.encode(source, 0, hop + 1)), next);
            kept += 1;
        }
        (kept, steps, state)
    }

    fn run_out_of_core(&mut self) -> Result<(A::State, quiver_walkstate::PoolStats)> {
        let largest = (0..self.blocks.len())
            .map(|b| self.block_memory(b))
            .max()
            .unwrap_or(0);
        // Second-order walks in GraphWalker mode are pooled by block pair
        // when there are at most `MAX_PAIRED_BLOCKS` blocks and two of the
        // largest, with the pairs' pools, fit the cache. Each block's pool
        // buffer is then shared among its pairs (at least
        // `MIN_PAIR_POOL` walks each), and every pool's bookkeeping is
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
                self.config
                    .pool_capacity
                    .div_ceil(blocks)
                    .max(MIN_PAIR_POOL.min(self.config.pool_capacity))
            } else {
                self.config.pool_capacity
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
        if largest > budget.cache {
            let lists = if self.prev_reserve > 0 {
                format!(
                    ", the largest previous vertex's list ({} bytes)",
                    self.prev_reserve
                )
            } else {
                String::new()
            };
            return Err(Error::InvalidArgument(format!(
                "a memory budget of {} bytes cannot hold the walk pools ({} pools of {} walks: {} \
                 bytes){lists}, walks in flight ({} bytes) and one block ({largest} bytes); raise --mem \
                 or lower the block size",
                self.config.mem_budget,
                pooling.len(),
                capacity(pooling),
                budget.pools,
                budget.in_flight,
            )));
        }
        for id in 0..self.spec.starts.total(self.num_vertices) {
            let walk = self.start(id);
            self.push(&mut pools, walk)?;
        }
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

    /// Shares the budget out (see [`Budget`]) given `pooling`'s pools of
    /// `capacity` walks each.
    fn share_budget(&self, pooling: Pooling, capacity: usize) -> Budget {
        let pools =
            (pooling.len() * (capacity * std::mem::size_of::<W>() + POOL_BOOKKEEPING)) as u64;
        let rest = self
            .config
            .mem_budget
            .saturating_sub(pools + self.prev_reserve);
        let in_flight = rest / 4;
        // A walk in flight takes its slot and one for where it moves. (The
        // previous vertices' lists of second-order walks are read in rounds
        // that fit what is free, at least the reserve, so they do not
        // shrink batches.)
        let per_walk = 2 * std::mem::size_of::<InFlight<W>>() as u64;
        Budget {
            pools,
            in_flight,
            batch_walks: usize::try_from(in_flight / per_walk)
                .unwrap_or(usize::MAX)
                .max(1),
            cache: rest - in_flight,
        }
    }

    /// Files a walk in the pool of the block holding its vertex (and, with
    /// paired pools, its previous vertex).
    fn push(&self, pools: &mut WalkPools<W>, walk: InFlight<W>) -> Result<()> {
        let (pool, walk, hop) = self.filed(walk);
        pools.push(pool, walk, hop)?;
        Ok(())
    }

    /// Where a walk is filed (the pool of the block holding its vertex
    /// and, with paired pools, its previous vertex), in the form it is
    /// filed in (its position within that block), and its hop.
    fn filed(&self, (walk, vertex): InFlight<W>) -> (usize, W, u64) {
        let block = self.blocks.find(vertex);
        let start = self.blocks.get(block).vertices.start;
        let word = walk.word();
        let hop = self.word.hop(word);
        let rewritten = walk.with_word(self.word.encode(
            self.word.source(word),
            u64::from(vertex - start),
            hop,
        ));
        let prev_block = if self.pooling.pairs {
            walk.prev().map(|p| self.blocks.find(p).0 as usize)
        } else {
            None
        };
        (
            self.pooling.pool(block.0 as usize, prev_block),
            rewritten,
            hop,
        )
    }

    /// Takes up to `max` of `pool`'s walks out of the pools, as walks in
    /// flight.
    fn take(&self, pools: &mut WalkPools<W>, pool: usize, max: usize) -> Result<Vec<InFlight<W>>> {
        #[allow(clippy::cast_possible_truncation)] // Block ids are u32.
        let start = self
            .blocks
            .get(quiver_csr::BlockId(self.pooling.block(pool) as u32))
            .vertices
            .start;
        Ok(pools
            .take_at_most(pool, max)?
            .into_iter()
            .map(|w| {
                #[allow(clippy::cast_possible_truncation)]
                // Positions are below a block's vertex count.
                let v = start + self.word.position(w.word()) as u32;
                (w, v)
            })
            .collect())
    }

    /// Bytes of the offsets held in memory.
    fn offsets_bytes(&self) -> u64 {
        self.offsets.as_ref().map_or(0, |b| b.capacity() as u64)
    }

    /// Reads the whole offsets section if it takes at most half of the
    /// cache, making room for it first.
    fn load_offsets(
        &mut self,
        cache: &mut Cache,
        pools: &WalkPools<W>,
        budget: &Budget,
    ) -> Result<()> {
        let bytes = quiver_io::align_up(self.layout.offsets.len);
        if self.offsets.is_some() || bytes > budget.cache / 2 {
            return Ok(());
        }
        let freed = cache.shrink_to(
            budget.cache - bytes,
            &self.pooling.walks_per_block(pools),
            &[],
        );
        self.stats.release(freed);
        let mut buf = AlignedBuf::zeroed(usize::try_from(bytes).expect("the offsets fit memory"));
        const CHUNK_BYTES: usize = 8 << 20;
        let base = self.layout.offsets.offset;
        let mut requests: Vec<ReadRequest<'_>> = buf
            .chunks_mut(CHUNK_BYTES)
            .enumerate()
            .map(|(i, chunk)| ReadRequest {
                offset: base + (i * CHUNK_BYTES) as u64,
                buf: chunk,
            })
            .collect();
        self.file
            .read_batch(&mut requests)
            .map_err(|source| Error::Io {
                path: self.file.path().to_owned(),
                source,
            })?;
        drop(requests);
        self.stats.hold(buf.capacity() as u64);
        self.offsets = Some(buf);
        Ok(())
    }

    /// Whether loads group fine blocks adaptively: GraphWalker mode, and
    /// first-order walks (second-order walks load block pairs instead).
    fn adaptive(&self) -> bool {
        self.config.adaptive
            && self.config.mode == Mode::GraphWalker
            && self.spec.node2vec.is_none()
    }

    /// Bytes block `b` takes in memory once loaded: its aligned extents,
    /// plus cumulative weights for weighted walks.
    fn block_memory(&self, b: usize) -> u64 {
        #[allow(clippy::cast_possible_truncation)]
        let block = self.blocks.get(quiver_csr::BlockId(b as u32));
        // An aligned buffer takes at least a page.
        let buffer = |len: u64| len.max(quiver_io::ALIGN as u64);
        let targets_and_offsets =
            buffer(block.offsets_extent.len) + buffer(block.targets_extent.len);
        if self.weighted {
            targets_and_offsets
                + buffer(block.weights_extent.map_or(0, |e| e.len))
                + 4 * block.num_edges()
        } else {
            targets_and_offsets
        }
    }

    /// Bytes a whole read of block `b` transfers.
    fn block_bytes(&self, b: usize) -> u64 {
        #[allow(clippy::cast_possible_truncation)]
        self.blocks
            .get(quiver_csr::BlockId(b as u32))
            .extent_bytes()
    }

    fn load(&mut self, b: usize) -> Result<Arc<LoadedBlock>> {
        #[allow(clippy::cast_possible_truncation)]
        let block = self.blocks.get(quiver_csr::BlockId(b as u32)).clone();
        let loaded = LoadedBlock::read(&self.file, &block, self.weighted, &self.layout)?;
        self.stats.blocks_loaded += 1;
        tracing::debug!(block = b, vertices = ?block.vertices, bytes = block.extent_bytes(), "loaded a block");
        Ok(Arc::new(loaded))
    }

    /// DrunkardMob: pass after pass, every block in order, one step each.
    fn iterate(
        &mut self,
        pools: &mut WalkPools<W>,
        state: &mut A::State,
        budget: &Budget,
    ) -> Result<()> {
        for pass in 0..=u64::from(self.spec.length) {
            if pools.total() == 0 {
                break;
            }
            for b in 0..self.blocks.len() {
                let block = self.load(b)?;
                let bytes = block.memory_bytes();
                self.stats.hold(bytes);
                let exec = Executing::new(vec![block]);
                // Only the walks waiting now: those moved back into this
                // block during the pass wait for the next one.
                let mut waiting = pools.count(b);
                while waiting > 0 {
                    let batch = budget
                        .batch_walks
                        .min(usize::try_from(waiting).unwrap_or(usize::MAX));
                    let walks = self.take(pools, b, batch)?;
                    waiting -= walks.len() as u64;
                    let (due, later): (Vec<_>, Vec<_>) = walks
                        .into_iter()
                        .partition(|(w, _)| self.word.hop(w.word()) == pass);
                    for walk in later {
                        self.push(pools, walk)?;
                    }
                    self.advance_and_file(pools, state, &exec, due, true)?;
                }
                self.stats.release(bytes);
            }
        }
        assert_eq!(pools.total(), 0, "every walk ends within its length");
        Ok(())
    }

    /// Moves a batch on `exec`, files the walks that left, and accounts for
    /// the batch's memory while it is in flight.
    fn advance_and_file<X: Adjacency + Sync + Contains>(
        &mut self,
        pools: &mut WalkPools<W>,
        state: &mut A::State,
        exec: &X,
        walks: Vec<InFlight<W>>,
        one_step: bool,
    ) -> Result<()> {
        // Room for the batch and for as many walks leaving it.
        let bytes = 2 * (walks.len() * std::mem::size_of::<InFlight<W>>()) as u64;
        self.stats.hold(bytes);
        let (mut moved, s) = self.advance(exec, walks, one_step)?;
        self.app.merge(state, s);
        // Where each goes, worked out on all threads (two block searches
        // and a word each); then filed in order.
        let this = &*self;
        let pools_of: Vec<u32> = moved
            .par_iter_mut()
            .with_min_len(CHUNK)
            .map(|walk| {
                let (pool, rewritten, _) = this.filed(*walk);
                walk.0 = rewritten;
                u32::try_from(pool).expect("pools are counted in u32")
            })
            .collect();
        for ((walk, _), pool) in moved.into_iter().zip(pools_of) {
            let hop = self.word.hop(walk.word());
            pools.push(pool as usize, walk, hop)?;
        }
        self.stats.release(bytes);
        self.report_progress(pools.total());
        Ok(())
    }

    /// GraphWalker's state-aware scheduling.
    fn schedule(
        &mut self,
        pools: &mut WalkPools<W>,
        state: &mut A::State,
        budget: &Budget,
    ) -> Result<()> {
        let mut cache = Cache::default();
        let mut coin = KeyedRng::new(self.config.seed, u64::MAX - 1, 0);
        // A step by single-vertex reads reads the walk's list, and a
        // second-order walk's previous list too.
        let read_bytes = if self.spec.node2vec.is_some() {
            2 * VERTEX_READ_BYTES
        } else {
            VERTEX_READ_BYTES
        };
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
            }
            let slowest = coin.chance(self.config.p_slowest);
            let (group, served) = if self.pooling.pairs {
                self.choose_pair(pools, &cache, slowest)
            } else {
                let group = self.choose_group(pools, budget, slowest);
                (group.clone(), group)
            };
            self.stats.largest_group = self.stats.largest_group.max(group.len() as u64);
            let mut loaded = Vec::with_capacity(group.len());
            for &g in &group {
                if let Some(block) = cache.blocks.map.get(&g) {
                    self.stats.cache_hits += 1;
                    loaded.push(Arc::clone(block));
                    continue;
                }
                // Make room first, so memory never holds more than the budget.
                self.fit_cache(&mut cache, pools, budget, &group, self.block_memory(g));
                let block = self.load(g)?;
                cache.blocks.bytes += block.memory_bytes();
                self.stats.hold(block.memory_bytes());
                cache.blocks.map.insert(g, Arc::clone(&block));
                loaded.push(block);
            }
            // Lists kept from a vertex pass may have left the cache over its
            // share even when every block of the group was cached already.
            self.fit_cache(&mut cache, pools, budget, &group, 0);
            let exec = Executing::new(loaded);
            // Walks moving inside the loaded data stay in flight, so none is
            // filed back into a pool it serves: draining them in batches
            // terminates.
            // Batches draw from every pool served, so that small pools
            // still fill the worker threads.
            loop {
                let waiting: u64 = served.iter().map(|&p| pools.count(p)).sum();
                let mut walks = Vec::with_capacity(
                    usize::try_from(waiting)
                        .map_or(budget.batch_walks, |w| w.min(budget.batch_walks)),
                );
                for &pool in &served {
                    let room = budget.batch_walks - walks.len();
                    if room == 0 {
                        break;
                    }
                    if pools.count(pool) > 0 {
                        walks.extend(self.take(pools, pool, room)?);
                    }
                }
                if walks.is_empty() {
                    break;
                }
                self.advance_and_file(pools, state, &exec, walks, false)?;
            }
        }
        Ok(())
    }

    /// The blocks to load for first-order walks: the fullest block (or
    /// the slowest's), alone or with the adaptive rule in the aligned group
    /// of consecutive fine blocks around it.
    fn choose_group(&self, pools: &WalkPools<W>, budget: &Budget, slowest: bool) -> Vec<usize> {
        let b = if slowest {
            pools.slowest()
        } else {
            pools.fullest()
        }
        .expect("some block holds a walk");
        let k = if self.adaptive() {
            let fine = self.block_size.max(1);
            let fit = (budget.cache / (fine + quiver_io::ALIGN as u64 * 3)).max(1);
            (adaptive_load_bytes(pools.total()) / fine)
                .clamp(1, fit)
                .min(self.blocks.len() as u64)
        } else {
            1
        };
        let mut k = usize::try_from(k).expect("a group size fits usize");
        // Blocks holding a vertex with a list larger than a fine block are
        // larger than one: halve the group until it fits the cache (one
        // block always does).
        loop {
            let first = b / k * k;
            let group: Vec<usize> = (first..(first + k).min(self.blocks.len())).collect();
            let bytes: u64 = group.iter().map(|&g| self.block_memory(g)).sum();
            if k == 1 || bytes <= budget.cache {
                return group;
            }
            k /= 2;
        }
    }

    /// The block pair to load for second-order walks, and the pools it
    /// serves (walks standing in either block that came from either): the
    /// pair serving the most walks per byte it must read (none for blocks
    /// cached already), or the pair of the pool holding the slowest walk.
    fn choose_pair(
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
            let p = pools.slowest().expect("some pool holds a walk");
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
    fn pair_walks(&self, pools: &WalkPools<W>, a: usize, b: usize) -> u64 {
        self.pair_pools(a, b)
            .into_iter()
            .map(|p| pools.count(p))
            .sum()
    }

    /// The pools of walks standing in block `a` or `b` that came from
    /// either (one pool when `a == b`).
    fn pair_pools(&self, a: usize, b: usize) -> Vec<usize> {
        let pool = |x: usize, y: usize| self.pooling.pool(x, Some(y));
        if a == b {
            vec![pool(a, a)]
        } else {
            vec![pool(a, a), pool(a, b), pool(b, a), pool(b, b)]
        }
    }

    /// Bytes reading blocks `a` and `b` would take, not counting cached ones.
    fn bytes_to_load(&self, cache: &Cache, a: usize, b: usize) -> u64 {
        let cost = |x: usize| {
            if cache.blocks.map.contains_key(&x) {
                0
            } else {
                self.block_bytes(x)
            }
        };
        cost(a) + if a == b { 0 } else { cost(b) }
    }

    /// Evicts cached data (never the blocks in `keep`), and drops the
    /// offsets section if that is not enough, until the cache and the
    /// offsets leave `need` bytes of the cache's share free.
    fn fit_cache(
        &mut self,
        cache: &mut Cache,
        pools: &WalkPools<W>,
        budget: &Budget,
        keep: &[usize],
        need: u64,
    ) {
        let limit = budget.cache.saturating_sub(need + self.offsets_bytes());
        let freed = cache.shrink_to(limit, &self.pooling.walks_per_block(pools), keep);
        self.stats.release(freed);
        if cache.total() + self.offsets_bytes() + need > budget.cache {
            // The next vertex pass reads them again.
            self.stats.release(self.offsets_bytes());
            self.offsets = None;
        }
    }

    /// Few walks left: read only the adjacency lists of the vertices they
    /// stand on (from cached blocks when possible) and move each one step.
    /// Returns whether any walk moved: when not even one list fits what the
    /// budget leaves, the walks go back to their pools and a block load
    /// must serve them.
    fn vertex_pass(
        &mut self,
        pools: &mut WalkPools<W>,
        state: &mut A::State,
        cache: &mut Cache,
        budget: &Budget,
        candidates: &[usize],
    ) -> Result<bool> {
        let mut walks = Vec::new();
        for &b in candidates {
            let room = budget.batch_walks - walks.len();
            if room == 0 {
                break;
            }
            walks.extend(self.take(pools, b, room)?);
        }
        let mut distinct: Vec<u32> = walks.iter().map(|&(_, v)| v).collect();
        distinct.sort_unstable();
        distinct.dedup();
        self.load_offsets(cache, pools, budget)?;
        let block_of = |v: u32| self.blocks.find(v).0 as usize;
        // Lists kept from earlier passes may take at most half the cache,
        // and no more than the blocks and the offsets leave of it.
        let lists_now = cache.lists.memory_bytes();
        if lists_now > budget.cache / 2
            || lists_now + cache.blocks.bytes + self.offsets_bytes() > budget.cache
        {
            self.stats.release(cache.lists.memory_bytes());
            cache.lists.clear();
        }
        // Lists read in earlier passes are used again.
        distinct.retain(|&v| !cache.lists.has(v));
        // Vertices of cached blocks are read from the blocks, which stay.
        let mut keep: Vec<usize> = Vec::new();
        let mut missing = Vec::new();
        for v in distinct {
            let b = block_of(v);
            if cache.blocks.map.contains_key(&b) {
                keep.push(b);
            } else {
                missing.push(v);
            }
        }
        keep.dedup();
        // The walks in flight will need their share once they move.
        let walk_bytes = 2 * (walks.len() * std::mem::size_of::<InFlight<W>>()) as u64;
        // The previous-list reserve stays free for the walks' previous
        // vertices (second-order walks).
        let (file, layout, weighted, mem_budget) = (
            &self.file,
            &self.layout,
            self.weighted,
            self.config.mem_budget.saturating_sub(self.prev_reserve),
        );
        let offsets = offsets_in(self.offsets.as_ref(), self.num_vertices);
        let walks_per_block = self.pooling.walks_per_block(pools);
        let stats = &mut self.stats;
        // Read in groups so the aligned I/O buffers stay small, making room
        // (by evicting cached data) first for a group's offsets pages, then,
        // with the degrees known, for its lists.
        // Enough reads in flight to keep the device busy, few enough that a
        // group's pages take at most an eighth of the cache.
        let read_group = usize::try_from(budget.cache / 8 / (2 * quiver_io::ALIGN as u64))
            .unwrap_or(usize::MAX)
            .clamp(1, VERTEX_READ_GROUP);
        let mut read = 0;
        while read < missing.len() {
            let group = &missing[read..(read + read_group).min(missing.len())];
            // This pass's lists stay; only blocks make room now. When even
            // that is not enough, the pass stops reading and the walks it
            // could not serve wait for the next one.
            let lists = cache.lists.memory_bytes();
            let blocks = &mut cache.blocks;
            let mut make_room = |sizes: &[u64]| {
                let others = stats.mem_now - blocks.bytes;
                let total: u64 = sizes.iter().sum();
                let limit = mem_budget.saturating_sub(others + walk_bytes + total);
                let freed = blocks.shrink_to(limit, &walks_per_block, &keep);
                stats.release(freed);
                // As many lists as fit in what is left.
                let mut room = mem_budget.saturating_sub(others + walk_bytes + blocks.bytes);
                sizes
                    .iter()
                    .take_while(|&&size| {
                        let fits = size <= room;
                        room = room.saturating_sub(size);
                        fits
                    })
                    .count()
            };
            let pages = vec![2 * quiver_io::ALIGN as u64; group.len()];
            let fit = make_room(&pages);
            if fit == 0 {
                break;
            }
            let done = cache.lists.read_into(
                file,
                &group[..fit],
                weighted,
                layout,
                offsets,
                &mut make_room,
            )?;
            stats.hold(done.peak);
            stats.release(done.peak);
            stats.hold(cache.lists.memory_bytes() - lists);
            read += done.count;
            if done.count < group.len() {
                break;
            }
        }
        let missing = &missing[..read];
        // Walks standing where nothing was read go back to their pools.
        let (walks, later): (Vec<_>, Vec<_>) = walks.into_iter().partition(|&(_, v)| {
            cache.lists.has(v)
                || cache
                    .blocks
                    .map
                    .contains_key(&(self.blocks.find(v).0 as usize))
        });
        for walk in later {
            self.push(pools, walk)?;
        }
        self.stats.vertex_loads += missing.len() as u64;
        if walks.is_empty() {
            return Ok(false);
        }
        let pass = PassData {
            blocks: Arc::clone(&self.blocks),
            cached: &cache.blocks.map,
            lists: &cache.lists,
        };
        self.advance_and_file(pools, state, &pass, walks, true)?;
        Ok(true)
    }

    /// Moves `walks` on the graph data in `exec`: each walk until it ends or
    /// leaves `exec` (or for one step when `one_step`). Returns the walks
    /// that still have steps to take, and what the app gathered.
    ///
    /// Second-order walks also need their previous vertex's list for their
    /// first step. Those `exec` does not hold are read vertex by vertex, as
    /// many at a time as the budget leaves room for (at least one: see
    /// [`Budget`]); the walks whose lists were not read yet stay in flight
    /// and move in a later round, once the lists read before were dropped.
    /// Draws are keyed by walk id and hop, so the rounds change no path,
    /// and no walk goes back to a pool unmoved.
    fn advance<X: Adjacency + Sync + Contains>(
        &mut self,
        exec: &X,
        mut walks: Vec<InFlight<W>>,
        one_step: bool,
    ) -> Result<(Vec<InFlight<W>>, A::State)> {
        self.stats.batches += 1;
        let batch = self.stats.batches;
        let mut missing: Vec<u32> = walks
            .iter()
            .filter_map(|(w, _)| w.prev())
            .filter(|&p| !exec.holds(p))
            .collect();
        if missing.is_empty() {
            return Ok(self.move_walks(exec, &Vertices::default(), &walks, one_step, batch));
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
            moved.extend(m);
            self.app.merge(&mut state, s);
            self.stats.release(prevs.memory_bytes());
            done = ready;
        }
        Ok((moved, state))
    }

    /// Moves `walks` (every one's previous list in `exec` or `prevs`), in
    /// chunks on the worker threads.
    fn move_walks<X: Adjacency + Sync + Contains>(
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
            self.stats.steps += steps;
        }
        (moved, state)
    }

    /// For second-order walks: the edge ranges of the previous vertices in
    /// `missing`, from the offsets in memory or read in groups whose pages
    /// fit what the budget leaves free.
    fn previous_ranges(&mut self, missing: &[u32]) -> Result<Vec<(u64, u64)>> {
        let offsets = offsets_in(self.offsets.as_ref(), self.num_vertices);
        let page = quiver_io::ALIGN as u64;
        let mut ranges = Vec::with_capacity(missing.len());
        while ranges.len() < missing.len() {
            // Two pages each, if a pair of offsets straddles a page; the
            // previous-list reserve holds at least that.
            let room = self.config.mem_budget.saturating_sub(self.stats.mem_now);
            let len = usize::try_from(room / (2 * page))
                .unwrap_or(usize::MAX)
                .clamp(1, VERTEX_READ_GROUP)
                .min(missing.len() - ranges.len());
            let group = &missing[ranges.len()..ranges.len() + len];
            let (group_ranges, buffers) = edge_ranges(&self.file, &self.layout, group, offsets)?;
            self.stats.hold(buffers);
            self.stats.release(buffers);
            ranges.extend(group_ranges);
        }
        Ok(ranges)
    }

    /// For second-order walks: the adjacency lists of a prefix of `missing`
    /// (previous vertices the executing data does not hold, with their
    /// edge `ranges`), as many as fit what the budget leaves free and at
    /// least one. Returns them, held in the stats, and how many were read.
    fn previous_lists(
        &mut self,
        missing: &[u32],
        ranges: &[(u64, u64)],
    ) -> Result<(Vertices, usize)> {
        // Every batch starts with the previous-list reserve free, so the
        // first list always fits: reading it regardless cannot overshoot the
        // budget, and makes progress.
        let mut room = self.config.mem_budget.saturating_sub(self.stats.mem_now);
        let n = ranges
            .iter()
            .take_while(|&&(a, b)| {
                let size = list_bytes(b - a, false);
                let fits = size <= room;
                room = room.saturating_sub(size);
                fits
            })
            .count()
            .max(1)
            .min(missing.len());
        let mut prevs = Vertices::default();
        // A bounded number of reads in flight at once.
        for (group, group_ranges) in missing[..n]
            .chunks(VERTEX_READ_GROUP)
            .zip(ranges[..n].chunks(VERTEX_READ_GROUP))
        {
            let held = prevs.memory_bytes();
            let peak = prevs.read_lists(&self.file, &self.layout, false, group, group_ranges)?;
            self.stats.hold(peak);
            self.stats.release(peak);
            self.stats.hold(prevs.memory_bytes() - held);
        }
        self.stats.vertex_loads += n as u64;
        Ok((prevs, n))
    }

    /// Moves the walks of one chunk, a few at a time in round robin: while
    /// one walk waits for its next vertex's adjacency to arrive from memory
    /// (prefetched), the others step, so memory latency overlaps. Each walk
    /// draws from its own stream, so the interleaving changes no path.
    /// Returns the steps taken.
    #[allow(clippy::too_many_arguments)]
    fn walk_chunk<X: Adjacency + Contains>(
        &self,
        exec: &X,
        prevs: &Vertices,
        chunk: &[InFlight<W>],
        first_index: u64,
        one_step: bool,
        batch: u64,
        state: &mut A::State,
        moved: &mut Vec<InFlight<W>>,
    ) -> u64 {
        const LANES: usize = 32;
        let (mut asked, mut queries, mut found) = (
            Vec::with_capacity(LANES),
            Vec::with_capacity(LANES),
            Vec::with_capacity(LANES),
        );
        let mut steps = 0;
        let mut lanes: Vec<Lane<W>> = Vec::with_capacity(LANES);
        let mut waiting = chunk.iter().zip(first_index..);
        loop {
            while lanes.len() < LANES {
                let Some((&(walk, vertex), index)) = waiting.next() else {
                    break;
                };
                lanes.push(self.lane(walk, vertex, batch, index));
            }
            if lanes.is_empty() {
                return steps;
            }
            // Each lane's offsets were prefetched a round ago: draw (on a
            // copy of its stream) the neighbour its step reads first and
            // prefetch that too, so the step below finds both in cache.
            // Node2Vec candidates whose acceptance needs the previous
            // vertex's list are then looked up there side by side.
            asked.clear();
            for (i, lane) in lanes.iter().enumerate() {
                let Some(ahead) = look_ahead(
                    &self.spec,
                    exec,
                    lane.vertex,
                    lane.prev,
                    self.distinct_targets,
                    &self.lane_rng(lane),
                ) else {
                    continue;
                };
                quiver_io::prefetch(ahead.candidate);
                if let (true, Some(prev)) = (ahead.asks, lane.prev) {
                    asked.push((i, prev, ahead.candidate));
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

    /// The stream the lane's next step draws from.
    fn lane_rng(&self, lane: &Lane<W>) -> KeyedRng {
        match lane.walk.id() {
            Some(id) => KeyedRng::new(self.config.seed, id, lane.hop),
            None => lane.compact.clone(),
        }
    }

    /// A walk about to move.
    fn lane(&self, walk: W, vertex: u32, batch: u64, index: u64) -> Lane<W> {
        let word = walk.word();
        let source = self.word.source(word);
        Lane {
            walk,
            vertex,
            hop: self.word.hop(word),
            prev: walk.prev(),
            source,
            source_vertex: self.spec.starts.source_vertex(source),
            compact: KeyedRng::new(self.config.seed, batch, index),
            stepped: false,
            known: None,
        }
    }

    /// Visits the lane's position and takes one step. Returns the step
    /// count (0 or 1) while the walk goes on inside `exec`, `None` once it
    /// ended or left (its last step, if any, is in `lane.stepped`).
    fn step_lane<X: Adjacency + Contains>(
        &self,
        exec: &X,
        prevs: &Vertices,
        lane: &mut Lane<W>,
        one_step: bool,
        state: &mut A::State,
        moved: &mut Vec<InFlight<W>>,
    ) -> Option<u64> {
        lane.stepped = false;
        self.visit(lane, state);
        if lane.hop == u64::from(self.spec.length) {
            return None;
        }
        let mut keyed;
        let rng = match lane.walk.id() {
            Some(id) => {
                keyed = KeyedRng::new(self.config.seed, id, lane.hop);
                &mut keyed
            }
            None => &mut lane.compact,
        };
        let came_from = lane.prev.map(|p| Prev {
            vertex: p,
            neighbors: previous_list(exec, prevs, p),
            known: lane.known.take(),
            distinct: self.distinct_targets,
        });
        let (next, next_prev) = match step(
            &self.spec,
            exec,
            self.num_vertices,
            lane.source_vertex,
            lane.vertex,
            came_from,
            rng,
        ) {
            Step::Stop => return None,
            Step::Move(next) => (next, Some(lane.vertex)),
            Step::Teleport(next) => (next, None),
        };
        lane.stepped = true;
        lane.hop += 1;
        lane.vertex = next;
        lane.prev = next_prev;
        if lane.hop == u64::from(self.spec.length) && (one_step || !exec.contains(next)) {
            // The last position needs no adjacency list: record it now
            // rather than file the walk for a load of its block.
            self.visit(lane, state);
            return None;
        }
        if one_step || !exec.contains(next) {
            let word = self.word.encode(lane.source, 0, lane.hop);
            moved.push((lane.walk.with_word(word).with_prev(lane.prev), next));
            return None;
        }
        Some(1)
    }

    fn visit(&self, lane: &Lane<W>, state: &mut A::State) {
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

/// One walk being moved by [`Engine::walk_chunk`].
struct Lane<W> {
    walk: W,
    vertex: u32,
    hop: u64,
    prev: Option<u32>,
    source: u64,
    source_vertex: u32,
    /// Compact mode's stream for this walk in this batch.
    compact: KeyedRng,
    /// Whether the last call moved it.
    stepped: bool,
    /// Whether its next step's first candidate is a neighbour of its
    /// previous vertex, if looked up ahead (see [`look_ahead`]).
    known: Option<(u32, bool)>,
}

/// The adjacency list of a walk's previous vertex `p`: in the executing
/// data, or read on its own.
fn previous_list<'a, X: Adjacency + Contains>(
    exec: &'a X,
    prevs: &'a Vertices,
    p: u32,
) -> &'a [u32] {
    if exec.holds(p) {
        exec.neighbors(p)
    } else {
        prevs.neighbors(p)
    }
}

/// The `|V| + 1` offsets in `buf`, if the section was read. The buffer
/// starts 4 KiB aligned and holds whole words, so the cast cannot fail.
fn offsets_in(buf: Option<&AlignedBuf>, num_vertices: u32) -> Option<&[u64]> {
    let words: &[u64] = bytemuck::cast_slice(&buf?[..]);
    Some(&words[..usize::try_from(num_vertices).expect("|V| fits usize") + 1])
}

/// What a vertex pass reads adjacency from: cached blocks, then lists read
/// vertex by vertex.
struct PassData<'a> {
    blocks: Arc<Blocks>,
    cached: &'a HashMap<usize, Arc<LoadedBlock>>,
    lists: &'a Vertices,
}

impl PassData<'_> {
    fn block(&self, v: u32) -> Option<&LoadedBlock> {
        self.cached
            .get(&(self.blocks.find(v).0 as usize))
            .map(AsRef::as_ref)
    }
}

impl Adjacency for PassData<'_> {
    fn neighbors(&self, v: u32) -> &[u32] {
        match self.block(v) {
            Some(block) => block.neighbors(v),
            None => self.lists.neighbors(v),
        }
    }

    fn cumulative_weights(&self, v: u32) -> &[f32] {
        match self.block(v) {
            Some(block) => block.cumulative_weights(v),
            None => self.lists.cumulative_weights(v),
        }
    }
}

impl Contains for PassData<'_> {
    fn contains(&self, _v: u32) -> bool {
        // Vertex passes move every walk one step, so nothing is "inside".
        false
    }

    fn holds(&self, v: u32) -> bool {
        self.block(v).is_some() || self.lists.has(v)
    }
}

/// Whether graph data in memory covers a vertex.
trait Contains {
    /// Whether walks reaching `v` go on moving on this data.
    fn contains(&self, v: u32) -> bool;

    /// Whether `v`'s adjacency list is in this data.
    fn holds(&self, v: u32) -> bool {
        self.contains(v)
    }
}

impl Contains for Executing {
    fn contains(&self, v: u32) -> bool {
        Executing::contains(self, v)
    }
}
