//! The three ways to run walks: GraphWalker's state-aware out-of-core
//! scheduler, DrunkardMob's iteration-based baseline, and the in-memory
//! reference. They share blocks, I/O, walk pools, threads and the step
//! function, so they differ only in scheduling. One `Engine` holds a run's
//! state; its methods live beside the concern they serve:
//! `budget` (sharing the memory budget, block caches, pooling),
//! `graphwalker` (the out-of-core scheduler), `iteration` (the baseline),
//! `memory` (the in-memory reference), `vertex` (single-vertex reads),
//! `previous` (Node2Vec's previous lists), `lanes` (stepping batches of
//! walks) and `walks` (walk words as pools hold them).

mod budget;
mod graphwalker;
mod iteration;
mod lanes;
mod memory;
mod previous;
#[cfg(test)]
mod tests;
mod vertex;
mod walks;

use std::sync::Arc;

use quiver_csr::format::VerifiedFile;
use quiver_csr::{BlockId, Blocks, FileHead, GraphIndex};
use quiver_io::{AlignedBuf, BackendChoice, ReadFile, ReadOptions};
use quiver_walkstate::{ExactWalk, WalkLayout, WalkPools};
use rayon::prelude::*;

use crate::app::WalkApp;
use crate::config::{Config, IoMode, Mode, FINE_BLOCK};
use crate::loaded::{
    list_bytes, BlockView, Executing, LoadedBlock, MappedGraph, Source, SpareBuffers,
};
use crate::report::{ratio, Report};
use crate::spec::{Adjacency, DeadEnd, Kind, Starts, WalkSpec};
use crate::{Error, Result};
use budget::{default_block_size, Pooling};
use memory::Partitions;
use quiver_run::{NoProgress, Progress, RunSummary, Stopwatch, Unit};
use std::sync::atomic::{AtomicU64, Ordering};
use vertex::VERTEX_READ_BYTES;
use walks::{PooledWalk, SecondOrderWalk};

/// Runs `app` on the `.qcsr` graph at `graph`.
pub fn run<A: WalkApp>(
    graph: &std::path::Path,
    config: &Config,
    app: &A,
) -> Result<Report<A::Output>> {
    run_with_progress(graph, config, app, &NoProgress)
}

/// [`run`], reporting progress after every batch of walks.
pub fn run_with_progress<A: WalkApp>(
    graph: &std::path::Path,
    config: &Config,
    app: &A,
    progress: &dyn Progress,
) -> Result<Report<A::Output>> {
    let clock = Stopwatch::start();
    let threads = quiver_run::worker_threads(config.threads);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| {
            Error::invalid(
                "threads",
                format!("cannot start {threads} worker threads: {e}"),
            )
        })?;
    let mut config = config.clone();
    let head = FileHead::open(graph)?;
    let spec = app.spec();
    let lists_only = visits_few(&config, &spec, &head);
    // A walk that reads only the part of a long list its step draws from
    // must know its draw before the step: keyed by walk id and hop, it
    // does not depend on where the walk stands in a batch.
    config.exact |= app.needs_walk_ids() || app.writes_by_walk() || lists_only;
    // A walk without its source fits 32 bits when its position in any
    // block (at most the graph) and its hop do.
    let compact = !carries_source(app, &spec, config.exact)
        && WalkLayout::new(1, u64::from(head.num_vertices()), u64::from(spec.length))
            .is_ok_and(|word| word.position_bits() + word.hop_bits() <= u32::BITS);
    let opened = Opened {
        path: graph,
        head,
        lists_only,
    };
    pool.install(|| {
        if spec.node2vec.is_some() {
            // Second-order walks carry their previous vertex and an id.
            config.exact = true;
            Engine::<A, SecondOrderWalk>::new(opened, &config, app, progress, clock)?.run()
        } else if config.exact {
            Engine::<A, ExactWalk>::new(opened, &config, app, progress, clock)?.run()
        } else if compact {
            Engine::<A, u32>::new(opened, &config, app, progress, clock)?.run()
        } else {
            Engine::<A, u64>::new(opened, &config, app, progress, clock)?.run()
        }
    })
}

/// Whether walks carry their source in their word: unless nothing reads
/// more of a walk than where it stands (compact mode, an app that reads
/// positions only) and no walk goes back to its source (no restarts).
/// Walks that carry none move as bare vertices in memory mode, and as
/// 32-bit words out of core where their position and hop fit: half the
/// bytes to sort, file and spill.
fn carries_source<A: WalkApp>(app: &A, spec: &WalkSpec, exact: bool) -> bool {
    exact
        || !app.reads_positions_only()
        || spec.restart_probability != 0.0
        || spec.dead_end == DeadEnd::Restart
}

/// Whether a run of `spec`'s walks on the graph whose head is `head`
/// visits few enough vertices that it should read only their lists (and
/// their offsets page by page on demand) without reading the graph's index
/// whole: first-order walks in GraphWalker mode with no block size given,
/// no more than it serves vertex by vertex, whose single-vertex reads cost
/// less than one read of the graph (the rule by which GraphWalker chooses
/// single-vertex reads over a block's). Those are queries from a few
/// sources (PPR, RWR, SimRank) and small samples (raw walks, graphlets);
/// walks from every vertex of a graph larger than memory never are.
/// Reading the index whole costs 8 bytes a vertex, which on a graph far
/// larger than memory is most of such a run's time.
fn visits_few(config: &Config, spec: &WalkSpec, head: &FileHead) -> bool {
    let walks = spec.starts.total(head.num_vertices());
    let graph_bytes = Blocks::whole(head)
        .get(BlockId(0))
        .data_bytes(spec.kind == Kind::Weighted);
    config.mode == Mode::GraphWalker
        && config.block_size.is_none()
        && spec.node2vec.is_none()
        && walks <= config.vertex_threshold
        && walks.saturating_mul(VERTEX_READ_BYTES) < graph_bytes
}

/// The graph file a run walks: its path, its head (read once), and
/// whether the run reads only the lists it visits ([`visits_few`]).
struct Opened<'p> {
    path: &'p std::path::Path,
    head: FileHead,
    lists_only: bool,
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
    /// The graph, every read checked against its page checksums.
    file: VerifiedFile,
    layout: quiver_csr::format::Layout,
    weighted: bool,
    num_vertices: u32,
    blocks: Arc<Blocks>,
    block_size: u64,
    word: WalkLayout,
    /// Started when the run was called: wall time counts from here.
    clock: Stopwatch,
    /// Time spent reading the graph before walking (opening it, and when
    /// walking in memory reading it whole).
    load_ns: u64,
    /// Walks reported ended to `progress` so far.
    reported: AtomicU64,
    /// Steps taken so far.
    steps: AtomicU64,
    /// Passes over loaded data so far (a batch's round by partition, or a
    /// batch in lanes): each pass's number keys its compact walks' draws.
    passes: AtomicU64,
    /// Those of `passes` that were rounds by partition.
    partition_rounds: AtomicU64,
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
    /// Whether the graph is read whole, once, and walked in memory: in
    /// memory mode, and in GraphWalker mode given no block size, more walks
    /// than `vertex_threshold` and a budget that holds the whole graph as
    /// one block.
    in_memory: bool,
    /// Whether every walk moves by single-vertex reads, the offsets read
    /// page by page as they are needed, never the whole index
    /// ([`visits_few`]): one block holds every vertex, and is
    /// never read whole.
    lists_only: bool,
    /// Buffers of blocks evicted to make room, for the reads that follow.
    spare: SpareBuffers,
    /// With `--io buffered`, the graph file mapped into memory: blocks are
    /// its pages in place instead of copies.
    mapped: Option<MappedGraph>,
    /// Walks a pool buffers before it spills: the configured capacity, or
    /// less when the budget given no block size could not hold the pools
    /// and a block otherwise ([`Engine::default_blocks`]).
    pool_capacity: usize,
    _walk: std::marker::PhantomData<W>,
}

#[derive(Default)]
struct Stats {
    largest_group: u64,
    blocks_loaded: u64,
    blocks_read_ahead: u64,
    cache_hits: u64,
    vertex_loads: u64,
    /// Bytes held now, and at most (the report's `peak_mem_bytes`).
    mem_now: u64,
    mem_peak: u64,
    /// Bytes the budget sets aside now (what is held, and the unused part
    /// of a batch's share for walks in flight), and at most.
    reserved_now: u64,
    reserved_peak: u64,
}

impl Stats {
    fn hold(&mut self, bytes: u64) {
        self.reserve(bytes, bytes);
    }

    fn release(&mut self, bytes: u64) {
        self.unreserve(bytes, bytes);
    }

    /// Sets `reserved` bytes of the budget aside, `held` of them in use.
    fn reserve(&mut self, held: u64, reserved: u64) {
        debug_assert!(held <= reserved, "{held} bytes held of {reserved} reserved");
        self.mem_now += held;
        self.mem_peak = self.mem_peak.max(self.mem_now);
        self.reserved_now += reserved;
        self.reserved_peak = self.reserved_peak.max(self.reserved_now);
    }

    /// Gives back what [`Stats::reserve`] set aside.
    fn unreserve(&mut self, held: u64, reserved: u64) {
        self.mem_now -= held;
        self.reserved_now -= reserved;
    }
}

/// How a run's walks are pooled and its graph read: the blocks (and the
/// size they were cut by), the walks a pool buffers, whether the graph is
/// walked in memory, and the previous-list reserve of second-order walks.
struct Plan {
    block_size: u64,
    blocks: Blocks,
    pool_capacity: usize,
    in_memory: bool,
    prev_reserve: u64,
}

/// A walk in flight: its pooled form (position field stale) and its vertex.
type InFlight<W> = (W, u32);

/// Whether graph data in memory covers a vertex.
trait Contains {
    /// Whether walks reaching `v` go on moving on this data.
    fn contains(&self, v: u32) -> bool;

    /// Whether `v`'s adjacency list is in this data.
    fn holds(&self, v: u32) -> bool {
        self.contains(v)
    }
}

impl Contains for LoadedBlock {
    fn contains(&self, v: u32) -> bool {
        self.vertices.contains(&v)
    }
}

impl Contains for BlockView<'_> {
    fn contains(&self, v: u32) -> bool {
        BlockView::contains(self, v)
    }
}

impl Contains for Executing {
    fn contains(&self, v: u32) -> bool {
        Executing::contains(self, v)
    }
}

impl<'a, A: WalkApp, W: PooledWalk> Engine<'a, A, W> {
    fn new(
        opened: Opened<'_>,
        config: &'a Config,
        app: &'a A,
        progress: &'a dyn Progress,
        clock: Stopwatch,
    ) -> Result<Self> {
        let Opened {
            path,
            head,
            lists_only,
        } = opened;
        let spec = app.spec();
        config.validate_for(&spec)?;
        let num_vertices = head.num_vertices();
        if num_vertices == 0 {
            return Err(Error::invalid(
                "graph",
                format!("{} has no vertices to walk", path.display()),
            ));
        }
        if let Starts::Sources { sources, .. } = &spec.starts {
            if let Some(&bad) = sources.iter().find(|&&s| s >= num_vertices) {
                return Err(Error::invalid("sources", format!(
                    "source vertex {bad} is out of range: the graph has {num_vertices} vertices (0..{num_vertices})"
                )));
            }
        }
        let weighted = spec.kind == Kind::Weighted;
        if weighted && !head.is_weighted() {
            return Err(Error::invalid(
                "kind",
                format!(
                    "weighted walks need edge weights, and {} has none",
                    path.display()
                ),
            ));
        }
        let walks = spec.starts.total(num_vertices);
        let plan = if lists_only {
            let whole = Blocks::whole(&head);
            Plan {
                block_size: whole.get(BlockId(0)).data_bytes(weighted),
                blocks: whole,
                // The one pool holds every walk (no more than the vertex
                // threshold): none is spilled (a pool spills once it would
                // reach its capacity).
                pool_capacity: usize::try_from(walks.saturating_add(1))
                    .unwrap_or(usize::MAX)
                    .max(config.pool_capacity),
                in_memory: false,
                prev_reserve: 0,
            }
        } else {
            Self::plan(&GraphIndex::read(head.clone(), path)?, config, &spec, walks)?
        };
        let Plan {
            block_size,
            blocks,
            pool_capacity,
            in_memory,
            prev_reserve,
        } = plan;
        let largest = blocks
            .iter()
            .map(|b| u64::from(b.num_vertices()))
            .max()
            .unwrap_or(1);
        let sources = if carries_source(app, &spec, config.exact) {
            spec.starts.num_sources(num_vertices)
        } else {
            1
        };
        let word = WalkLayout::new(sources, largest, u64::from(spec.length))?;
        let layout = head.layout();
        let distinct_targets = head.has_distinct_targets();
        let pages = head.into_page_checksums();
        let blocks_len = blocks.len();
        // A query's few pages are worth the page cache (the next query on
        // the graph finds them there); blocks are not.
        let io = match config.io {
            IoMode::Auto if lists_only => IoMode::Buffered,
            IoMode::Auto => IoMode::Direct,
            given => given,
        };
        let options = ReadOptions {
            // Through the page cache (single lists; blocks are mapped), reads
            // are copies that `pread` lets every worker thread make at once
            // (see `loaded::read_requests`).
            backend: match io {
                IoMode::Buffered if !lists_only => BackendChoice::Pread,
                _ => BackendChoice::Auto,
            },
            direct: io == IoMode::Direct,
            ..ReadOptions::default()
        };
        let file = ReadFile::open(path, &options).map_err(|source| Error::Io {
            path: path.to_owned(),
            source,
        })?;
        let file = VerifiedFile::new(file, pages);
        // Blocks are mapped; a run that reads no block maps none.
        let mapped = (io == IoMode::Buffered && !lists_only)
            .then(|| MappedGraph::open(&file, layout.data_end(), blocks_len))
            .transpose()?;
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
            clock,
            load_ns: clock.elapsed_ns(),
            reported: AtomicU64::new(0),
            steps: AtomicU64::new(0),
            passes: AtomicU64::new(0),
            partition_rounds: AtomicU64::new(0),
            stats: Stats::default(),
            offsets: None,
            prev_reserve,
            distinct_targets,
            pooling: Pooling {
                blocks: blocks_len,
                pairs: false,
            },
            in_memory,
            lists_only,
            spare: SpareBuffers::default(),
            mapped,
            pool_capacity,
            _walk: std::marker::PhantomData,
        })
    }

    /// The blocks of a run that reads them whole, planned from the
    /// graph's whole index.
    fn plan(graph: &GraphIndex, config: &Config, spec: &WalkSpec, walks: u64) -> Result<Plan> {
        let weighted = spec.kind == Kind::Weighted;
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
        let default_blocks =
            |preferred| Self::default_blocks(graph, config, weighted, prev_reserve, preferred);
        // GraphWalker given more walks than it serves vertex by vertex and
        // a budget that holds the whole graph as one block (beside its pool
        // and walks) would load every block once and keep it: that is
        // walking in memory, which then does it directly.
        let whole = match (config.mode, config.block_size) {
            (Mode::Memory, _) => Some(Blocks::by_bytes(graph, u64::MAX)?),
            (Mode::GraphWalker, None) if walks > config.vertex_threshold => {
                let (short, whole) = Self::shortfall(
                    graph,
                    config,
                    weighted,
                    prev_reserve,
                    u64::MAX,
                    config.pool_capacity,
                )?;
                (short == 0).then_some(whole)
            }
            _ => None,
        };
        let in_memory = whole.is_some();
        let given = |(size, blocks)| (size, blocks, config.pool_capacity);
        let (block_size, blocks, pool_capacity) = match (whole, config.mode, config.block_size) {
            (Some(whole), _, _) => given((u64::MAX, whole)),
            (None, _, Some(size)) => given((size, Blocks::by_bytes(graph, size)?)),
            (None, Mode::GraphWalker, None) if config.adaptive && spec.node2vec.is_none() => {
                default_blocks(FINE_BLOCK)?
            }
            (None, Mode::GraphWalker, None) if spec.node2vec.is_some() => {
                match Self::pair_blocks(graph, config, weighted, prev_reserve, walks)? {
                    Some(found) => given(found),
                    None => default_blocks(default_block_size(walks, config.mem_budget))?,
                }
            }
            (None, _, None) => default_blocks(default_block_size(walks, config.mem_budget))?,
        };
        Ok(Plan {
            block_size,
            blocks,
            pool_capacity,
            in_memory,
            prev_reserve,
        })
    }

    fn run(mut self) -> Result<Report<A::Output>> {
        self.progress
            .start("walking", Unit::Walks, Some(self.total_walks));
        let computing = Stopwatch::start();
        let loaded_before = self.load_ns;
        let (state, pool_stats) = if self.in_memory {
            (self.run_in_memory()?, Default::default())
        } else {
            self.run_out_of_core()?
        };
        let result = self.app.finish(state)?;
        // Walking in memory reads the whole graph inside the run: that is
        // loading.
        let compute_ns = computing
            .elapsed_ns()
            .saturating_sub(self.load_ns - loaded_before);
        let io = self.file.file().stats().snapshot();
        let wall_ns = self.clock.elapsed_ns();
        let stats = &self.stats;
        let steps = self.steps.load(Ordering::Relaxed);
        let pool_stats: quiver_walkstate::PoolStats = pool_stats;
        Ok(Report {
            mode: self.config.mode,
            exact: self.config.exact,
            walks: self.spec.starts.total(self.num_vertices),
            steps,
            blocks: self.blocks.len(),
            block_size: self.block_size,
            adaptive: self.adaptive(),
            lists_only: self.lists_only,
            paired: self.pooling.pairs,
            partition_rounds: self.partition_rounds.load(Ordering::Relaxed),
            largest_group: stats.largest_group,
            blocks_loaded: stats.blocks_loaded,
            blocks_read_ahead: stats.blocks_read_ahead,
            cache_hits: stats.cache_hits,
            vertex_loads: stats.vertex_loads,
            steps_per_block_io: ratio(steps, stats.blocks_loaded),
            steps_per_sec: ratio(steps, wall_ns) * 1e9,
            summary: RunSummary {
                wall_ns,
                load_ns: self.load_ns,
                compute_ns,
                peak_mem_bytes: stats.mem_peak,
                threads: rayon::current_num_threads(),
                read_calls: io.read_calls + pool_stats.reloads,
                // Blocks loaded from the mapped file came through the page
                // cache as reads do.
                bytes_read: io.read_bytes
                    + pool_stats.bytes_read
                    + self.mapped.as_ref().map_or(0, MappedGraph::loaded_bytes),
                write_calls: pool_stats.spills,
                bytes_written: pool_stats.bytes_written,
            },
            mem_budget: self.config.mem_budget,
            mem_reserved_bytes: stats.reserved_peak,
            io_backend: self.io_backend(),
            walk_word_bits: (
                self.word.source_bits(),
                self.word.position_bits(),
                self.word.hop_bits(),
            ),
            result,
        })
    }

    /// Tells `progress` that `live` walks have not ended yet (the walks
    /// [`Engine::walks_ended`] reported already are not reported again).
    fn report_progress(&self, live: u64) -> Result<()> {
        let done = self.total_walks - live;
        // Relaxed: counts only; this runs between parallel sections, whose
        // joins order it after every `walks_ended`.
        let before = self.reported.swap(done, Ordering::Relaxed);
        self.progress.advance(done.saturating_sub(before));
        self.note_progress()
    }

    /// Tells `progress` the steps taken and the bytes read so far, and
    /// stops the run if its caller asks.
    #[allow(clippy::cast_precision_loss)] // figures for people to read
    fn note_progress(&self) -> Result<()> {
        let read = self.file.file().stats().snapshot().read_bytes;
        self.progress.note(&format!(
            "{:.1}M steps, {:.1} MiB read",
            self.steps.load(Ordering::Relaxed) as f64 / 1e6,
            read as f64 / f64::from(1 << 20)
        ));
        Ok(self.progress.check()?)
    }

    /// Tells `progress` that `ended` more walks have ended, as soon as a
    /// chunk or hop of a batch is done (from any worker thread): a batch
    /// of a graph that fits in memory can hold every walk, and its
    /// caller should hear of it (and be able to stop the run) before the
    /// batch ends.
    fn walks_ended(&self, ended: u64) {
        if ended > 0 {
            self.reported.fetch_add(ended, Ordering::Relaxed);
            self.progress.advance(ended);
        }
    }

    /// The in-flight form of walk `id` at its start.
    fn start(&self, id: u64) -> InFlight<W> {
        let source = self
            .spec
            .starts
            .source_of(id, self.config.seed, self.num_vertices);
        let vertex = self.spec.starts.source_vertex(source);
        // A layout without source bits keeps none (see `carries_source`).
        let kept = if self.word.source_bits() == 0 {
            0
        } else {
            source
        };
        (W::make(self.word.encode(kept, 0, 0), id), vertex)
    }

    /// Where a walk is filed (the pool of the block holding its vertex
    /// and, with paired pools, its previous vertex), and the form it is
    /// filed in (its position within that block).
    fn filed(&self, (walk, vertex): InFlight<W>) -> (usize, W) {
        let block = self.blocks.find(vertex);
        let start = self.blocks.get(block).vertices.start;
        let rewritten = walk.with_word(
            self.word
                .with_position(walk.word(), u64::from(vertex - start)),
        );
        let prev_block = if self.pooling.pairs {
            walk.prev().map(|p| self.blocks.find(p).0 as usize)
        } else {
            None
        };
        (self.pooling.pool(block.0 as usize, prev_block), rewritten)
    }

    /// Takes up to `max` walks out of the pools `from` (in that order), as
    /// walks in flight.
    fn take_batch(
        &self,
        pools: &mut WalkPools<W>,
        from: &[usize],
        max: usize,
    ) -> Result<Vec<InFlight<W>>> {
        let waiting = pools.count_all(from);
        let mut walks = Vec::with_capacity(usize::try_from(waiting).map_or(max, |w| w.min(max)));
        for &pool in from {
            let room = max - walks.len();
            if room == 0 {
                break;
            }
            if pools.count(pool) == 0 {
                continue;
            }
            #[allow(clippy::cast_possible_truncation)] // Block ids are u32.
            let start = self
                .blocks
                .get(quiver_csr::BlockId(self.pooling.block(pool) as u32))
                .vertices
                .start;
            let taken = pools.take_at_most(pool, room)?;
            walks.extend(taken.iter().map(|&w| {
                #[allow(clippy::cast_possible_truncation)]
                // Positions are below a block's vertex count.
                let v = start + self.word.position(w.word()) as u32;
                (w, v)
            }));
        }
        Ok(walks)
    }

    /// Whether loads group fine blocks adaptively: GraphWalker mode, and
    /// first-order walks (second-order walks load block pairs instead).
    fn adaptive(&self) -> bool {
        self.config.adaptive
            && self.config.mode == Mode::GraphWalker
            && !self.in_memory
            && !self.lists_only
            && self.spec.node2vec.is_none()
    }

    /// Bytes block `b` takes in memory once loaded: its aligned extents,
    /// plus cumulative weights for weighted walks.
    fn block_memory(&self, b: usize) -> u64 {
        #[allow(clippy::cast_possible_truncation)]
        budget::block_memory(
            self.blocks.get(quiver_csr::BlockId(b as u32)),
            self.weighted,
        )
    }

    /// Bytes a whole read of block `b` transfers.
    fn block_bytes(&self, b: usize) -> u64 {
        #[allow(clippy::cast_possible_truncation)]
        self.blocks
            .get(quiver_csr::BlockId(b as u32))
            .extent_bytes()
    }

    /// Reads blocks `bs` on the worker threads (direct reads take turns on
    /// the io_uring ring; mapped blocks fault their pages in in parallel),
    /// while one block's targets are checked and its checksums verified
    /// beside another's read.
    fn load(&mut self, bs: &[usize]) -> Result<Vec<Arc<LoadedBlock>>> {
        let loaded: Result<Vec<_>> = bs.par_iter().map(|&b| self.read_block(b)).collect();
        self.spare.clear();
        let loaded = loaded?;
        self.stats.blocks_loaded += bs.len() as u64;
        Ok(loaded)
    }

    /// Reads block `b` (not counted in the stats: see [`Engine::load`])
    /// from the mapped file, or into buffers that evictions left spare
    /// where they fit. The caller frees the spares left over once its reads
    /// are done: the budget no longer counts them.
    fn read_block(&self, b: usize) -> Result<Arc<LoadedBlock>> {
        #[allow(clippy::cast_possible_truncation)]
        let block = self.blocks.get(quiver_csr::BlockId(b as u32));
        tracing::debug!(block = b, vertices = ?block.vertices, bytes = block.extent_bytes(), "loading a block");
        LoadedBlock::read(
            &self.file,
            self.source(),
            block,
            self.weighted,
            &self.layout,
        )
        .map(Arc::new)
    }

    /// How the graph is read, for the report: the I/O backend (and
    /// whether direct), and whether blocks are the mapped file's pages.
    fn io_backend(&self) -> String {
        let file = self.file.file();
        let backend = match file.fallback_reason() {
            None if file.is_direct() => format!("{} + O_DIRECT", file.backend()),
            None => file.backend().to_string(),
            Some(why) => format!("{} ({why})", file.backend()),
        };
        if self.mapped.is_some() {
            format!("blocks mapped, vertices by {backend}")
        } else {
            backend
        }
    }

    /// Where blocks are read from: the mapped file, or buffers.
    fn source(&self) -> Source<'_> {
        match &self.mapped {
            Some(mapped) => Source::Mapped(mapped),
            None => Source::Read(&self.spare),
        }
    }

    /// Moves a batch on `exec` in lanes (one step at a time if
    /// `one_step`), files the walks that left, and accounts for the batch's
    /// memory while it is in flight.
    fn advance_and_file<X: Adjacency + Sync + Contains>(
        &mut self,
        pools: &mut WalkPools<W>,
        state: &mut A::State,
        exec: &X,
        walks: Vec<InFlight<W>>,
        one_step: bool,
    ) -> Result<()> {
        let bytes = Self::bytes_in_flight(false) * walks.len() as u64;
        self.stats.hold(bytes);
        let (moved, s) = self.advance(exec, walks, one_step)?;
        self.app.merge(state, s);
        self.file(pools, moved)?;
        self.stats.release(bytes);
        self.report_progress(pools.total())
    }

    /// Files walks that left the loaded data into their pools: where each
    /// goes is worked out on all threads (a block lookup or two and a word
    /// each); then they are grouped by pool in order (a counting sort) and
    /// filed a pool at a time.
    fn file(&self, pools: &mut WalkPools<W>, mut moved: Vec<InFlight<W>>) -> Result<()> {
        if moved.is_empty() {
            return Ok(());
        }
        // Each walk's vertex is in its rewritten word now: its pool takes
        // the vertex's place.
        moved.par_iter_mut().with_min_len(CHUNK).for_each(|walk| {
            let (pool, rewritten) = self.filed(*walk);
            *walk = (
                rewritten,
                u32::try_from(pool).expect("pools are counted in u32"),
            );
        });
        let mut ends = vec![0usize; pools.num_blocks() + 1];
        let mut min_hops = vec![u64::MAX; pools.num_blocks()];
        for &(walk, pool) in &moved {
            ends[pool as usize + 1] += 1;
            let min = &mut min_hops[pool as usize];
            *min = (*min).min(self.word.hop(walk.word()));
        }
        for p in 1..ends.len() {
            ends[p] += ends[p - 1];
        }
        let mut grouped = vec![W::zeroed(); moved.len()];
        let mut next = ends.clone();
        for &(walk, pool) in &moved {
            grouped[next[pool as usize]] = walk;
            next[pool as usize] += 1;
        }
        drop(moved);
        for (pool, &min_hop) in min_hops.iter().enumerate() {
            pools.extend(pool, &grouped[ends[pool]..ends[pool + 1]], min_hop)?;
        }
        Ok(())
    }
}
