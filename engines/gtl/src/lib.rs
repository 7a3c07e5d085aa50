//! quiver-gtl: GraphSSD's graph translation layer ("GraphSSD: a graph
//! semantics aware SSD", likely Matam et al., ISCA 2019) on a simulated
//! SSD, and the paper's baseline, a CSR file through a page-mapped FTL on
//! the same device.
//!
//! What a user gets: an [`Ssd`] made from a [`Config`];
//! [`Ssd::graph_initialize`] lays a `quiver-csr` graph out in GTL pages and
//! builds the Graph Translation Table; [`Ssd::write_csr`] writes the same
//! graph's CSR (`rowPtr`/`colIdx`/weights) through the FTL;
//! GetAdjacencyList and GetEdgeWeight run on either layout and return a
//! [`Fetched`] value with the NAND pages read and the modelled submission
//! and completion times. Counts and modelled time are exact and repeatable.
//!
//! Updates ([`Ssd::update`] with an [`Update`] per command: AddEdge,
//! AddVertex, DeleteEdge, DeleteVertex, UpdateEdge, UpdateVertex) take
//! either [`UpdatePath`]: the delta graph ([`delta`]: records in flash
//! pages, per-list chains, dirty GTT bits, merged later by
//! [`Ssd::merge`], all at once or a few groups at a time), or direct
//! read-modify-write of the changed pages, which split when they overflow
//! (the extended GTT of [`gtt`]). GC moves graph pages and tells the host
//! which pages to drop. [`Ssd::cut_power_after`] and [`Ssd::power_cycle`]
//! simulate a power cut and the recovery from flash alone
//! ([`gtl::Gtl::recover`]). On the host, an [`UpdateLogger`] batches
//! updates a page (or 100 ms) at a time, answers presence checks against
//! the device and its log, and merges its log into reads; a [`GraphSsd`]
//! is the whole host side in one handle, with submission and completion
//! queues for its reads (lists and edge weights) and updates. [`updates`] is
//! the paper's update benchmark. The [`file`](mod@file) device lays the same pages
//! and GTT on a real file, read through io_uring with `O_DIRECT`.
//!
//! On the host side ([`source`]): a [`GraphSource`] is the graph seen
//! through adjacency lists requested through the host's non-blocking
//! [`Queues`] (a sliding window of requests in flight, or barriered
//! batches), with two implementations on
//! the same [`Ssd`], [`GtlSource`] and the baseline's [`CsrSource`], each
//! behind the same LRU page cache bounded in bytes ([`cache`]). The
//! paper's applications ([`apps`]: BFS to a target, connected components,
//! random walks, Luby's MIS, threshold PageRank, random reads) run on
//! either; [`run()`] writes a graph onto a fresh device and runs one of
//! them with a [`RunConfig`], returning a [`Report`] of pages read,
//! modelled time and cache hits.
//!
//! Modules: [`flash`] (simulated NAND: geometry, physics, timing, counters,
//! power cut), `blocks` (the block allocator with greedy victims under the
//! FTL and the graph area), [`ftl`] (page-mapped FTL with greedy GC and
//! recovery), `area` (the graph area: page owners and spare-area tags),
//! [`page`] (the GTL page codec), [`gtt`] (the GTT and its extended
//! lists), [`delta`] (the delta graph), [`gtl`] (GraphInitialize, reads,
//! rewrites, merge, GC, recovery), [`baseline`] (the CSR file on the FTL),
//! [`device`] (the [`Ssd`]), the update commands on it, [`command`] (the
//! command decoder and the device's queues) and [`updates`].
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
//! - **Slack.** 5% of every page by default on a device that takes
//!   updates, dense vertices' pages included (one fill rule for every
//!   page; a dense vertex is rare); none for a run, which only reads (the
//!   paper leaves room only for updates).
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
//! - **Directed graphs** keep their in-lists too, in pages of their own
//!   under their own GTT and weight GTT (the paper's separate in and out
//!   GTTs), laid out and rewritten as the out-lists are; a delta record
//!   says which list it changes; a command's out- and in-list edits are one
//!   unit. An undirected graph's in-lists are its out-lists. The host
//!   library and the applications read out-lists.
//! - **Update semantics** (the paper omits delete and update): ids are
//!   dense, AddVertex creates `|V|`, DeleteVertex empties a list; an
//!   undirected graph's commands keep both directions, a directed graph's
//!   its in-lists (DeleteVertex also removes its in-edges); DeleteEdge and
//!   UpdateEdge act on the first edge to the target; a command naming an
//!   absent edge or vertex returns false (details in `update`).
//! - **Delta graph.** Records of 20 bytes in delta pages (a host batch is
//!   programmed as whole pages), `deltaPointer` in DRAM; a read follows the
//!   chain page by page (dependent reads); a merge reads each delta page
//!   once and rewrites the groups with dirty pages in vertex order.
//! - **Rewrites.** A page is rewritten with every page sharing its key (a
//!   dense vertex's pages and its tail): one page if the lists fit, else a
//!   split into two at the vertex boundary that balances free space (the
//!   paper's rule), else packed as GraphInitialize packs.
//! - **Redo log and recovery.** The delta records are the redo log: a
//!   direct update writes its records first, then rewrites its groups.
//!   Every graph page's spare area holds a tag (owner, unit sequence
//!   number, index and count, graph kind); recovery reads every graph page,
//!   drops a unit the cut left incomplete, keeps each vertex's newest unit
//!   and makes newer records chains again. The paper's four steps (new
//!   page, dirty bit, GTT entry, old page and deltaPointer) are DRAM work
//!   after the new pages are programmed, so a cut at any of them recovers
//!   to the update done; a cut during the new pages, to it redone by the
//!   next merge.
//! - **GC of graph pages.** The same greedy policy as the FTL's, run
//!   before a write while fewer than one free block per die, one more, and
//!   the write's remain (a write with no room even then fails, changing
//!   nothing); a moved page's entry is found by its start vertex
//!   and old page; erased pages are queued for the host cache.
//! - **Calls** on the [`Ssd`] run one at a time: each is submitted when the
//!   previous one completed; the pages of one call are issued together.
//!   The [`command`] interface is the device's own: a [`Command`] enum the
//!   decoder ([`Ssd::execute`]) routes to the GTL or the FTL, and a
//!   [`Queue`] whose doorbell starts every submitted command at once, in
//!   submission order for their effects and overlapped on the flash for
//!   their time.
//! - **Requests in flight.** The host keeps 256 requests outstanding by
//!   default, each holding its slot until its list arrives, a new one
//!   going in whenever one completes (the paper's
//!   non-blocking queues; its figures show both layouts using the same
//!   bandwidth, so the device is kept busy), or barriered batches if
//!   asked. Reads are issued in time order and queue on dies, channels
//!   and the host link first come, first served; a baseline call issues
//!   its `colIdx` pages when its `rowPtr` pages arrived. A cache hit costs
//!   no NAND read and no device time (details in [`queues`] and
//!   [`source`]).
//! - **Cache.** LRU over whole 16 KiB pages, bounded in bytes (a page's
//!   bytes per entry), the same policy for both backends; the GTL caches
//!   graph pages by physical page, the baseline file pages by LBA. The
//!   host's GTT copy and the baseline's file metadata are not charged.
//! - **Update logger timer.** Wall-clock time by default (a [`ManualClock`]
//!   for tests and simulations), as a host's DRAM log would
//!   keep it (not the modelled device time, which stands still while the
//!   host is idle), looked at by every host call that reaches the device
//!   or the log, so an idle log is flushed by the next read, not held until
//!   the next update. The update benchmark's stream has no wall clock and
//!   runs without the timer.
//! - **Device image.** [`Ssd::save`] and [`Ssd::open`] keep a device in a
//!   file between commands: its programmed pages (only those, so a mostly
//!   empty 128 GiB device is a small file), block counts and settings,
//!   written whole and renamed into place; opening mounts it as after a
//!   power cut. `run` still writes the graph onto a fresh device (load
//!   time), reported apart from the application's pages and modelled time.
//! - **Applications** (details in [`apps`]): BFS and CC search in the
//!   paper's FIFO order (Algorithm 1) by default, or level by level with
//!   each level sorted by id (ours); BFS's target is picked on the
//!   in-memory graph at a fraction of the root's BFS depth; CC's searches
//!   start from unlabelled roots in increasing order whenever a request
//!   slot is free and are joined where they meet; random walks go one per
//!   1,000 vertices by default (the paper's density), each at its own
//!   pace; random reads draw from the vertices with edges (the paper's
//!   workload asks for lists); threshold PageRank is on GraphChi's scale
//!   (mean rank 1) so the paper's 0.4 is meaningful; CC and MIS need
//!   undirected graphs.
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
pub mod command;
pub mod delta;
pub mod device;
mod error;
pub mod file;
pub mod flash;
pub mod ftl;
pub mod graph_ssd;
pub mod gtl;
pub mod gtt;
mod image;
pub mod logger;
pub mod on_image;
pub mod page;
pub mod queues;
pub mod run;
pub mod source;
mod update;
pub mod updates;

pub use command::{Command, Queue, Reply, Response};
pub use device::{Config, Ssd};
pub use error::{Error, Result};
pub use flash::{Fetched, Nanos, Ppn};
pub use graph_ssd::{Answer, Completion, GraphSsd, Request};
pub use image::is_image;
pub use logger::{HostClock, LoggerConfig, ManualClock, UpdateLogger};
pub use queues::{Arrival, Issued, Queues, Submission, Submit};
pub use run::{bfs_target, get, run, run_image, App, Config as RunConfig, GetReport, Report};
pub use source::{Backend, Completed, CsrSource, GraphSource, GtlSource, Host, SourceCounters};
pub use update::{Batch, Update, UpdatePath};
