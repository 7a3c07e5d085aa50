//! [`Node`]: one member of a job, the face every fabric shows.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::counters::{CounterTable, Counters};
use crate::error::{Error, Result};
use crate::queue::{CompletionQueue, Queue};
use crate::region::{Region, RemoteRegion};
use crate::wr::WorkRequest;
use crate::NodeRank;

/// What a fabric implements; [`Node`] adds validation, counters, the clock
/// and the collectives built on `all_gather`.
pub(crate) trait Fabric: Send + Sync + fmt::Debug {
    /// Registers `len` (> 0) zeroed bytes.
    fn register(&self, len: usize) -> Result<Region>;
    /// Starts every request (targets already checked to be in the job);
    /// each must complete exactly once on `cq`. `now_ns` is the node's
    /// virtual clock, for fabrics with a cost model.
    fn post(&self, cq: &Arc<CompletionQueue>, now_ns: u64, wrs: Vec<WorkRequest>);
    /// Every node contributes `data`; all receive every contribution, by rank.
    fn all_gather(&self, data: Vec<u8>) -> Result<Vec<Vec<u8>>>;
    /// Hands this node's report to whoever collects the job's results.
    fn report(&self, _report: String) -> Result<()> {
        Err(Error::invalid(
            "report",
            "this fabric has no coordinator to collect reports; return results directly",
        ))
    }
}

/// Reductions for [`Node::all_reduce`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reduce {
    /// Wrapping sum.
    Sum,
    /// Minimum.
    Min,
    /// Maximum.
    Max,
}

/// One node of a job: registers memory, makes queues, and meets the other
/// nodes in collectives. Cheap to clone (shared); the job's resources are
/// released when the last clone is dropped.
#[derive(Clone)]
pub struct Node {
    inner: Arc<Inner>,
}

struct Inner {
    rank: NodeRank,
    size: u32,
    fabric_name: &'static str,
    timeout: Duration,
    counters: Arc<CounterTable>,
    clock_ns: AtomicU64,
    fabric: Box<dyn Fabric>,
}

impl fmt::Debug for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Node")
            .field("rank", &self.inner.rank)
            .field("size", &self.inner.size)
            .field("fabric", &self.inner.fabric_name)
            .finish_non_exhaustive()
    }
}

impl Node {
    pub(crate) fn new(
        rank: NodeRank,
        size: u32,
        fabric_name: &'static str,
        timeout: Duration,
        counters: Arc<CounterTable>,
        fabric: Box<dyn Fabric>,
    ) -> Self {
        Self {
            inner: Arc::new(Inner {
                rank,
                size,
                fabric_name,
                timeout,
                counters,
                clock_ns: AtomicU64::new(0),
                fabric,
            }),
        }
    }

    /// This node's rank, `0..size`.
    pub fn rank(&self) -> NodeRank {
        self.inner.rank
    }

    /// Number of nodes in the job.
    pub fn size(&self) -> u32 {
        self.inner.size
    }

    /// The fabric's name (`loopback`, `tcp`, `mpi`, `ibverbs`).
    pub fn fabric(&self) -> &'static str {
        self.inner.fabric_name
    }

    /// How long blocking calls wait before failing with [`Error::Timeout`].
    pub fn timeout(&self) -> Duration {
        self.inner.timeout
    }

    /// Registers a zeroed region of `len` bytes that peers can address.
    /// On the `mpi` fabric registration is collective: every node must
    /// register the same sequence of regions.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for `len == 0`, or the fabric's error.
    pub fn register(&self, len: usize) -> Result<Region> {
        if len == 0 {
            return Err(Error::invalid("len", "cannot register a region of 0 bytes"));
        }
        self.inner.fabric.register(len)
    }

    /// A new queue (send queue + completion queue) for one thread.
    pub fn queue(&self) -> Queue {
        Queue::new(self.clone(), Arc::clone(&self.inner.counters))
    }

    /// A snapshot of the verbs this node initiated, by peer and verb.
    pub fn counters(&self) -> Counters {
        self.inner.counters.snapshot()
    }

    /// The node's virtual clock in nanoseconds: the latest modelled
    /// completion time polled so far (0 without a cost model).
    pub fn clock_ns(&self) -> u64 {
        self.inner.clock_ns.load(Ordering::Relaxed)
    }

    /// Every node contributes `data`; returns all contributions by rank.
    ///
    /// # Errors
    /// [`Error::NodeFailed`] naming a node that left or never arrived, or
    /// [`Error::Timeout`].
    pub fn all_gather(&self, data: &[u8]) -> Result<Vec<Vec<u8>>> {
        let all = self.inner.fabric.all_gather(data.to_vec())?;
        assert_eq!(
            all.len(),
            self.size() as usize,
            "all_gather returned a contribution per node"
        );
        Ok(all)
    }

    /// Returns when every node has called `barrier`.
    ///
    /// # Errors
    /// As [`Node::all_gather`].
    pub fn barrier(&self) -> Result<()> {
        self.all_gather(&[]).map(drop)
    }

    /// Combines one value from every node.
    ///
    /// # Errors
    /// As [`Node::all_gather`].
    pub fn all_reduce(&self, value: u64, op: Reduce) -> Result<u64> {
        let all = self.all_gather(&value.to_le_bytes())?;
        let values = all.iter().map(|bytes| {
            let word: [u8; 8] = bytes.as_slice().try_into().map_err(|_| {
                Error::Bootstrap(format!(
                    "all_reduce received {} bytes instead of 8",
                    bytes.len()
                ))
            })?;
            Ok(u64::from_le_bytes(word))
        });
        let values: Vec<u64> = values.collect::<Result<_>>()?;
        Ok(match op {
            Reduce::Sum => values.iter().fold(0, |sum, &v| sum.wrapping_add(v)),
            Reduce::Min => values.iter().copied().min().unwrap_or(0),
            Reduce::Max => values.iter().copied().max().unwrap_or(0),
        })
    }

    /// Exchanges region descriptors: every node passes one of its regions
    /// and gets every node's, by rank.
    ///
    /// # Errors
    /// As [`Node::all_gather`].
    pub fn exchange(&self, region: &Region) -> Result<Vec<RemoteRegion>> {
        let mine = serde_json::to_vec(&region.remote()).expect("a RemoteRegion always serializes");
        self.all_gather(&mine)?
            .iter()
            .enumerate()
            .map(|(rank, bytes)| {
                let remote: RemoteRegion = serde_json::from_slice(bytes).map_err(|err| {
                    Error::Bootstrap(format!(
                        "node {rank} sent an unreadable region descriptor: {err}"
                    ))
                })?;
                if remote.node.index() != rank {
                    return Err(Error::Bootstrap(format!(
                        "node {rank} sent the region of node {}",
                        remote.node
                    )));
                }
                Ok(remote)
            })
            .collect()
    }

    /// Sends this node's report (e.g. JSON) to the coordinator, which hands
    /// it to the driver of a local job ([`crate::cluster::LocalJob::wait`]).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] on fabrics without a coordinator
    /// (loopback: return results from the node's thread instead), or a lost
    /// coordinator.
    pub fn report(&self, report: &str) -> Result<()> {
        self.inner.fabric.report(report.to_owned())
    }

    pub(crate) fn post(&self, cq: &Arc<CompletionQueue>, wrs: Vec<WorkRequest>) {
        for wr in &wrs {
            if let Some(target) = wr.op.target() {
                self.inner
                    .counters
                    .add(target, wr.op.verb(), wr.op.payload_len());
            }
        }
        self.inner.fabric.post(cq, self.clock_ns(), wrs);
    }

    pub(crate) fn advance_clock(&self, done_at_ns: u64) {
        self.inner.clock_ns.fetch_max(done_at_ns, Ordering::Relaxed);
    }
}
