//! quiver-gtl: GraphSSD's graph translation layer ("GraphSSD: a graph
//! semantics aware SSD", likely Matam et al., ISCA 2019) on a simulated
//! SSD, and the paper's baseline, a CSR file through a page-mapped FTL on
//! the same device.
//!
//! What a user gets (this first part of the engine): an [`Ssd`] made from a
//! [`Config`]; [`Ssd::graph_initialize`] lays a `quiver-csr` graph out in
//! GTL pages and builds the Graph Translation Table; [`Ssd::write_csr`]
//! writes the same graph's CSR (`rowPtr`/`colIdx`/weights) through the FTL;
//! GetAdjacencyList and GetEdgeWeight run on either layout and return a
//! [`Fetched`] value with the NAND pages read and the modelled submission
//! and completion times. Counts and modelled time are exact and repeatable.
//!
//! On the host side ([`source`]): a [`GraphSource`] is the graph seen
//! through adjacency lists fetched in batches, with two implementations on
//! the same [`Ssd`], [`GtlSource`] and the baseline's [`CsrSource`], each
//! behind the same LRU page cache bounded in bytes ([`cache`]). The
//! paper's applications ([`apps`]: BFS to a target, connected components,
//! random walks, Luby's MIS, threshold PageRank, random reads) run on
//! either; [`run()`] writes a graph onto a fresh device and runs one of
//! them with a [`RunConfig`], returning a [`Report`] of pages read,
//! modelled time and cache hits.
//!
//! Modules: [`flash`] (simulated NAND: geometry, physics, timing, counters,
//! power cut), [`ftl`] (page-mapped FTL with greedy GC), [`page`] (the GTL
//! page codec), [`gtt`] (the GTT), [`gtl`] (GraphInitialize and the reads),
//! [`baseline`] (the CSR file on the FTL), [`device`] (the [`Ssd`]).
//!
//! Decisions the paper leaves open, and why:
//! - **Timing.** Read 40 us, program 200 us, erase 2 ms, host link 4 GB/s
//!   (the board's PCIe Gen2 x8), channel 800 MB/s (a 16 KiB page in 20.48
//!   us). A read holds its die for tR and until the page has crossed the
//!   channel; a program moves the page over the channel, then holds the die
//!   for tPROG; one host link is shared by every request. Graph pages and
//!   the baseline's pages both cross the host link whole (the paper's host
//!   caches whole 16 KiB pages), so the two layouts pay alike per page.
//! - **Geometry.** 8 channels x 4 ways x 1024 blocks x 256 pages of 16 KiB
//!   with 256 spare bytes; dies are numbered channel first. The FTL owns
//!   the first half of each die's blocks, the GTL the rest, so block and
//!   graph commands share the device as in the paper without either's GC
//!   touching the other's pages.
//! - **FTL.** 7% over-provisioning (at least two blocks per die and one
//!   more, which greedy GC needs to always find a victim), writes striped
//!   over dies, GC when the free blocks fall to one per die, the LBA in the
//!   spare area. A never-written LBA reads as zeros.
//! - **Page format.** `u32` entries (neighbour ids, or weight bits) from
//!   the front; a footer of 0-based entry offsets in `<vertex, offset>`
//!   tuples of two `u32` with an End tuple (vertex `u32::MAX`, exclusive
//!   end), then flags, edge count, start vertex and vertex count, the last
//!   four `u32` of the page ([`page`]).
//! - **Slack.** 5% of every page by default, dense vertices' pages
//!   included (one fill rule for every page; a dense vertex is rare).
//! - **Dense vertices.** A list longer than a page alone holds starts a
//!   new page, fills whole pages alone and leaves its last part at the
//!   start of a page that later lists share; every one of its pages has a
//!   GTT entry keyed by the vertex, and the footer flags say the first list
//!   continues from the previous page (`CONTINUED`) and the last goes on in
//!   the next (`CONTINUES`).
//! - **GTT entries** are 8 bytes: the start vertex and a `u32` holding a
//!   29-bit physical page with the dirty, extension and valid bits.
//! - **Weights** use pages of the same layout and boundaries as the
//!   neighbour pages, with their own GTT; GetEdgeWeight reads the source's
//!   neighbour pages, then the one weight page at the target's first
//!   occurrence, after them.
//! - **Directed graphs** store out-lists only, for now.
//! - **Calls** on the [`Ssd`] run one at a time: each is submitted when the
//!   previous one completed; the pages of one call are issued together.
//! - **Batches.** The host library submits a batch of calls together at
//!   the batch's start; they queue on dies, channels and the host link in
//!   request order, and the batch ends with its last call. A baseline call
//!   issues its `colIdx` pages when its `rowPtr` pages arrived. A cache hit
//!   costs no NAND read and no device time (details in [`source`]).
//! - **Cache.** LRU over whole 16 KiB pages, bounded in bytes (a page's
//!   bytes per entry), the same policy for both backends; the GTL caches
//!   graph pages by physical page, the baseline file pages by LBA. The
//!   host's GTT copy and the baseline's file metadata are not charged.
//! - **Device image.** Not persisted yet: a run writes the graph onto a
//!   fresh simulated device (load time), reported apart from the
//!   application's pages and modelled time.
//! - **Applications** (details in [`apps`]): BFS is level-synchronous,
//!   each level one batch, and its target is picked on the in-memory graph
//!   at a fraction of the root's BFS depth; random walks move in lock-step
//!   rounds; threshold PageRank is on GraphChi's scale (mean rank 1) so
//!   the paper's 0.4 is meaningful; CC and MIS need undirected graphs.
//!
//! Invariants: the GTT is sorted and each entry's page has its key as
//! start vertex; a list spans pages only if it is longer than a page holds;
//! both layouts return exactly `graph.neighbors(v)` and its weights;
//! flash physics are never broken silently (a violation is an [`Error`]).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod apps;
mod area;
pub mod baseline;
mod blocks;
pub mod cache;
pub mod delta;
pub mod device;
mod error;
pub mod flash;
pub mod ftl;
pub mod gtl;
pub mod gtt;
pub mod page;
pub mod run;
pub mod source;
mod update;

pub use device::{Config, Ssd};
pub use error::{Error, Result};
pub use flash::{Nanos, Ppn};
pub use run::{bfs_target, run, App, Config as RunConfig, Report};
pub use source::{Backend, CsrSource, GraphSource, GtlSource, Host, SourceCounters};
pub use update::{Update, UpdatePath};

/// A value read from the device, with what reading it cost.
#[derive(Clone, Debug, PartialEq)]
pub struct Fetched<T> {
    /// The value.
    pub value: T,
    /// NAND pages read for it.
    pub pages_read: u64,
    /// When the call was submitted.
    pub submitted: Nanos,
    /// When its last byte reached the host.
    pub done: Nanos,
}

impl<T> Fetched<T> {
    /// Modelled latency of the call.
    pub fn latency(&self) -> Nanos {
        self.done - self.submitted
    }
}
