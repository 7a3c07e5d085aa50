//! RDMA verbs for Quiver's distributed engines: one interface ([`Node`],
//! [`Region`], [`Queue`]) over four fabrics, and the cluster bootstrap that
//! starts a job.
//!
//! The semantics are those of RC queue pairs, so an engine that is correct
//! here is correct on a NIC:
//! - Remote memory is a registered [`Region`], addressed by
//!   ([`RemoteRegion`], byte offset). Every access is bounds-checked at the
//!   target; a bad key or range completes with a [`VerbError`] and touches
//!   nothing.
//! - One-sided READ, WRITE, 8-byte CAS and FETCH_ADD never involve the
//!   target's application threads. Two-sided SEND matches the oldest
//!   receive posted at the target node.
//! - Work requests are posted in batches and complete through a queue that
//!   the caller polls; the blocking calls on [`Queue`] sit on top.
//! - Ordering: per queue and target node, operations take effect and
//!   complete in posted order. Aligned 8-byte words are atomic; a longer
//!   READ concurrent with a WRITE may see a mix of old and new words.
//! - Every node counts the verbs it initiates, by peer and verb
//!   ([`Counters`]), and with the loopback cost model keeps a virtual clock.
//! - Failures are loud: a lost peer completes its outstanding operations
//!   with [`VerbError::PeerLost`], and collectives fail with
//!   [`Error::NodeFailed`] naming the node, within the node's timeout.
//!
//! Fabrics: [`loopback`] (threads of one process), [`tcp`] (one process per
//! node), `mpi` (feature `mpi`) and `ibverbs` (feature `rdma`). The
//! [`cluster`] module finds rank and size (flags, Slurm, Open MPI, PMI),
//! runs the rendezvous, and spawns local processes; [`job`] runs one task
//! on every node of a job formed any of those ways and collects the
//! nodes' reports, which is all a distributed engine needs of it.
//! [`conformance`] is the contract as a test suite, run against every
//! fabric, and [`bench`](mod@bench) measures a fabric's latency and bandwidth.
//!
//! Features (both off by default): `mpi` (the mpi fabric, Open MPI) and
//! `rdma` (the ibverbs fabric, libibverbs).
#![warn(missing_docs)]

pub mod bench;
pub mod cluster;
pub mod conformance;
mod cost;
mod counters;
mod error;
#[cfg(feature = "rdma")]
#[allow(unsafe_code)] // libibverbs FFI and DMA memory, argued at each block
pub mod ibverbs;
pub mod job;
pub mod loopback;
#[cfg(feature = "mpi")]
#[allow(unsafe_code)] // MPI-3 RMA windows over registered memory, argued at each block
pub mod mpi;
mod node;
mod queue;
#[allow(unsafe_code)] // one zeroed allocation of atomic words, argued at the block
mod region;
#[allow(unsafe_code)] // socket calls, argued at each block
pub mod tcp;
mod wr;

pub use cost::CostModel;
pub use counters::{Counters, VerbCount};
pub use error::{BoxError, Error, Result, VerbError};
pub use node::{Node, Reduce};
pub use queue::Queue;
pub use region::{Region, RemoteRegion};
pub use wr::{Completion, Op, Output, Verb, WorkRequest};

use std::fmt;

/// A node's rank in its job, `0..size`.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
pub struct NodeRank(pub u32);

impl NodeRank {
    /// The rank as an index.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for NodeRank {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}
