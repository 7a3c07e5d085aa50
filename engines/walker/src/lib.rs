//! quiver-walker: GraphWalker's random walks on graphs larger than memory,
//! with its two baselines built in (DrunkardMob's iteration-based walking
//! and an in-memory reference), as a library.
//!
//! A run takes a `.qcsr` graph, a [`Config`] (mode, memory budget, block
//! size, I/O, threads, seed) and a [`WalkApp`]; it returns a [`Report`] with
//! the I/O and step counts the paper measures and the app's result.
//!
//! Invariants:
//! - Every random choice goes through one step function with a counter-based
//!   generator: in exact mode keyed by (seed, walk id, hop), so every mode,
//!   block size, budget and thread count gives the same walks.
//! - Every walk is visited at every position exactly once, hop 0 included,
//!   and ends after at most `length` steps.
//! - No walk is lost or duplicated: walks wait in quiver-walkstate pools.
//!
//! # The algorithm
//!
//! Three modes share the
//! blocks, I/O, pools, threads and the one step function (`spec::step`):
//! `GraphWalker` (load the fullest block or, with probability p, the slowest;
//! cache evicting the block with the fewest walks; walks move until they leave
//! the loaded range; the paper's self-adaptive load size over 2 MiB fine
//! blocks; single-vertex reads for blocks whose few walks cost less that way,
//! served from cached blocks in place, from lists kept between passes, or by
//! reading just those lists, with the offsets held in memory when they fit),
//! `Iteration` (DrunkardMob: every pass loads every block and moves each walk one
//! step) and `Memory` (the reference: first-order walks, when a batch holds at
//! least 4 walks per cache line of graph data, move hop by hop, a
//! counting sort per hop grouping them by the ~512 KiB partition of graph data
//! holding their vertex, each partition swept into cache and stepped on its
//! own core, as FlashMob does; sparser walks move in the interleaved lanes
//! below, as ThunderRW's do (a partition with too few walks for the sweep
//! to pay is stepped in a pipeline instead: each walk's step decided, in
//! order, a few walks before it is taken, and its reads prefetched); in compact mode, walks of an app that reads
//! only positions (`WalkApp::reads_positions_only`: raw walks, visit counts)
//! move as bare 4-byte vertices with one draw stream per partition and hop,
//! and the app sees a partition's positions at once; Node2Vec walks, and the
//! walks of an app that writes where a walk's id says
//! (`WalkApp::writes_by_walk`: the corpus), use the interleaved lanes below,
//! which keep a walk's writes together). GraphWalker mode given no block
//! size, more walks than it serves vertex by vertex and a budget that holds
//! the whole graph as one block walks it in memory, as GraphWalker would
//! once its cache held every block. Given no block size and so few
//! first-order walks that reading their lists costs less than reading the
//! graph once (a query from a few sources, a small sample), it reads only
//! those lists (`Report::lists_only`): no index read whole (the file's head
//! alone, the offsets page by page as walks reach them), one block of every
//! vertex that is never loaded, draws keyed by walk so that a long list's
//! pages are read only where the walks' draws land, through the page cache
//! on io_uring. Out of core, first-order walks move on
//! the loaded group partition by partition as in memory mode, a batch at a
//! time, while on the side the last batch's leaving walks are filed and the
//! next batch is taken (the leaving walks go to other pools than those
//! the batches come from); a group takes
//! at most half the cache, and the next one is chosen when a group is
//! loaded (by the same rule, among the other blocks) and read while its
//! walks move (`Report::blocks_read_ahead`).
//! Exact mode keys every draw by (seed, walk
//! id, hop), so all modes walk identically; walks of a batch step 64 at a
//! time in round robin, each step's target looked up ahead and prefetched
//! (a first-order step is then taken from its lookahead) and the next
//! vertex's offsets prefetched, so memory latency overlaps. Memory accounting (`Report::peak_mem_bytes`) covers pools, cached
//! blocks and lists, walks in flight and I/O buffers, and stays within `--mem`
//! (memory mode sizes its walk batches to what the graph leaves of it, and
//! warns when the graph alone does not fit). Without `--block-size`, blocks
//! are halved from the default until one fits the budget beside its pools
//! (Node2Vec walks in GraphWalker mode get the largest blocks two of which
//! fit the cache, if any size near it does).
//! Second-order (Node2Vec) walks in GraphWalker mode wait in pools keyed by
//! (block, previous vertex's block) and move on loaded block pairs, chosen by
//! walks served per byte to read (GraSorw's bi-block execution), so a step
//! finds both lists in memory; blocks are fixed, not grouped adaptively. When two blocks do not fit the cache (or the pairs' pools do not fit
//! the budget, or there are more than 256 blocks), and in iteration mode and
//! vertex passes, previous vertices' lists are read on their own, in rounds that fit what is free beside a
//! reserve for the largest list. The Node2Vec sampler folds the return edges'
//! excess weight into an outlier area (KnightKing; sized without a search when
//! the header says lists hold no target twice), accepts below the smallest
//! bias without a search, and a batch's lanes look up their first candidates
//! in the previous lists side by side (`spec::contains_all`).
//! Walk kinds: unbiased, weighted (O(log d)), Node2Vec (p, q; runs exact, since
//! each walk carries its previous vertex), restart and stop probabilities, and a
//! dead-end policy. Built-in apps: raw walks, RWD, PPR, RWR, SimRank, triangle
//! concentration, corpus; `examples/hop_histogram.rs` writes a new one.
//!
//! No features; no `unsafe`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod app;
pub mod apps;
mod config;
mod engine;
mod loaded;
mod report;
mod rng;
mod spec;

pub use app::{Visit, WalkApp, NO_SOURCE};
pub use config::{Config, IoMode, Mode, FINE_BLOCK};
pub use engine::{run, run_with_progress};
pub use quiver_run::{NoProgress, Progress, RunSummary, Unit};
pub use report::Report;
pub use spec::{DeadEnd, Kind, Node2Vec, Starts, WalkSpec};

/// Everything that can go wrong in a walk run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The graph could not be opened or is not a valid `.qcsr`.
    #[error(transparent)]
    Graph(#[from] quiver_csr::Error),
    /// Reading graph data failed.
    #[error("reading graph data from {}", path.display())]
    Io {
        /// The graph file.
        path: std::path::PathBuf,
        /// The cause.
        #[source]
        source: quiver_io::Error,
    },
    /// Walk state could not be encoded or spilled.
    #[error(transparent)]
    Walks(#[from] quiver_walkstate::Error),
    /// A setting or argument makes no sense (for this graph).
    #[error("invalid argument")]
    InvalidArgument(#[from] quiver_run::InvalidArgument),
    /// The caller asked the run to stop ([`Progress::cancelled`]).
    #[error(transparent)]
    Cancelled(#[from] quiver_run::Cancelled),
    /// Writing an application's output failed.
    #[error("writing {}", path.display())]
    Output {
        /// The output file.
        path: std::path::PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// The argument `parameter` makes no sense because of `reason`.
    pub(crate) fn invalid(parameter: &'static str, reason: impl Into<String>) -> Error {
        Error::InvalidArgument(quiver_run::InvalidArgument::new(parameter, reason))
    }
}

/// Result with [`Error`] as the default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
