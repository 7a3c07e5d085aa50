//! The device's command interface (GraphSSD §3.1, Fig. 4): the host sends
//! [`Command`]s, the controller's decoder ([`Ssd::execute`]) routes graph
//! commands to the GTL and block commands to the FTL, and the two share
//! one flash device.
//!
//! The host talks to the device through a [`Queue`], as an NVMe host does
//! through its submission and completion queues: [`Queue::submit`] only
//! places a command in the submission queue; [`Queue::ring`] (the
//! doorbell) starts every submitted command at the same modelled instant,
//! so their page reads and programs are in flight together, queued on
//! dies, channels and the host link, and returns a [`Reply`] per command
//! in the order they completed in modelled time (the completion queue).
//!
//! Commands take effect in submission order: a read submitted after a
//! write in the same ring sees the write, and where it reads a page the
//! write programs, it queues behind that program on its die. A command
//! that fails completes at the doorbell (pages it read before failing cost
//! no modelled time).

use std::sync::Arc;

use quiver_csr::Graph;
use quiver_run::NoProgress;

use crate::device::Ssd;
use crate::error::Result;
use crate::flash::Nanos;
use crate::ftl::Lba;
use crate::gtl::{Layout, Merged};
use crate::update::{Update, UpdatePath};

/// A command the device's decoder understands.
#[derive(Clone, Debug)]
pub enum Command {
    /// GraphInitialize: lays the graph out in graph pages (GTL).
    GraphInitialize(Arc<Graph>),
    /// GetAdjacencyList: a vertex's out-list (GTL).
    GetAdjacencyList {
        /// The vertex.
        vertex: u32,
    },
    /// GetEdgeWeight: the weight of the first `source -> target` (GTL).
    GetEdgeWeight {
        /// The edge's source.
        source: u32,
        /// Its target.
        target: u32,
    },
    /// A batch of update commands (AddEdge, AddVertex, DeleteEdge,
    /// DeleteVertex, UpdateEdge, UpdateVertex), applied in order by `path`
    /// (GTL; see [`Ssd::update`]).
    Update {
        /// The commands.
        updates: Vec<Update>,
        /// How they reach the graph pages.
        path: UpdatePath,
    },
    /// Merges the delta graph: at most `groups` dirty page groups, all if
    /// `None` (GTL).
    Merge {
        /// The most groups to rewrite.
        groups: Option<usize>,
    },
    /// Reads one logical page (FTL).
    ReadBlock {
        /// The page.
        lba: Lba,
    },
    /// Writes one logical page (FTL); refused on the pages of the
    /// baseline's CSR file.
    WriteBlock {
        /// The page.
        lba: Lba,
        /// A page of data.
        data: Vec<u8>,
    },
}

/// What a command returned.
#[derive(Clone, Debug, PartialEq)]
pub enum Response {
    /// GraphInitialize's layout.
    Initialized(Layout),
    /// GetAdjacencyList's out-list.
    List(Vec<u32>),
    /// GetEdgeWeight's weight (`None`: no such edge).
    Weight(Option<f32>),
    /// For each update of the batch, whether it applied.
    Applied(Vec<bool>),
    /// What the merge did.
    Merged(Merged),
    /// The logical page read.
    Block(Vec<u8>),
    /// The logical page was written.
    Written,
}

impl Ssd {
    /// The command decoder: runs `command` (submitted now, when the last
    /// call completed) on the GTL or the FTL, as [`Command`] says.
    pub fn execute(&mut self, command: Command) -> Result<Response> {
        Ok(match command {
            Command::GraphInitialize(graph) => {
                Response::Initialized(self.graph_initialize(&graph, &NoProgress)?)
            }
            Command::GetAdjacencyList { vertex } => {
                Response::List(self.get_adjacency_list(vertex)?.value)
            }
            Command::GetEdgeWeight { source, target } => {
                Response::Weight(self.get_edge_weight(source, target)?.value)
            }
            Command::Update { updates, path } => Response::Applied(self.update(&updates, path)?),
            Command::Merge { groups } => Response::Merged(self.merge(groups)?),
            Command::ReadBlock { lba } => Response::Block(self.read_block(lba)?.value),
            Command::WriteBlock { lba, data } => {
                self.write_block(lba, &data)?;
                Response::Written
            }
        })
    }
}

/// A command's entry in the completion queue.
#[derive(Debug)]
pub struct Reply {
    /// The tag [`Queue::submit`] gave the command.
    pub tag: u64,
    /// Its response, or why it failed.
    pub result: Result<Response>,
    /// NAND pages it read.
    pub pages_read: u64,
    /// NAND pages it programmed (GC's included).
    pub pages_written: u64,
    /// When the doorbell rang (modelled time).
    pub submitted: Nanos,
    /// When it completed.
    pub done: Nanos,
}

/// The host's submission queue to one device.
#[derive(Debug, Default)]
pub struct Queue {
    submitted: Vec<(u64, Command)>,
    next_tag: u64,
}

impl Queue {
    /// An empty queue.
    pub fn new() -> Queue {
        Queue::default()
    }

    /// Places `command` in the queue, to start at the next
    /// [`Queue::ring`]; returns its tag.
    pub fn submit(&mut self, command: Command) -> u64 {
        let tag = self.next_tag;
        self.next_tag += 1;
        self.submitted.push((tag, command));
        tag
    }

    /// Commands waiting for the doorbell.
    pub fn len(&self) -> usize {
        self.submitted.len()
    }

    /// Whether no command waits.
    pub fn is_empty(&self) -> bool {
        self.submitted.is_empty()
    }

    /// The doorbell: starts every submitted command on `ssd` at the same
    /// instant (when its last call completed) and returns their replies in
    /// the order they completed (ties by tag). The device's clock moves to
    /// the last completion. A failed command fails alone: the others run
    /// (after a power cut, every later command that programs fails too).
    pub fn ring(&mut self, ssd: &mut Ssd) -> Vec<Reply> {
        let start = ssd.now;
        let mut end = start;
        let mut replies: Vec<Reply> = std::mem::take(&mut self.submitted)
            .into_iter()
            .map(|(tag, command)| {
                ssd.now = start;
                let (reads, programs) = (
                    ssd.flash.counters().page_reads,
                    ssd.flash.counters().programs,
                );
                let result = ssd.execute(command);
                let done = ssd.now;
                end = end.max(done);
                Reply {
                    tag,
                    result,
                    pages_read: ssd.flash.counters().page_reads - reads,
                    pages_written: ssd.flash.counters().programs - programs,
                    submitted: start,
                    done,
                }
            })
            .collect();
        ssd.now = end;
        replies.sort_by_key(|r| (r.done, r.tag));
        replies
    }
}
