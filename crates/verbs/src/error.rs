//! Errors: [`Error`] for calls that fail, [`VerbError`] for work requests
//! that complete with an error status (as a NIC reports them in a
//! completion, not as a failed call).

use std::time::Duration;

use crate::wr::Verb;
use crate::NodeRank;

impl Error {
    /// The argument `parameter` makes no sense because of `reason`.
    pub(crate) fn invalid(parameter: &'static str, reason: impl Into<String>) -> Error {
        Error::InvalidArgument(quiver_run::InvalidArgument::new(parameter, reason))
    }
}

/// Result of a quiver-verbs call.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Any error, as a job's task may return it.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A failed call into quiver-verbs.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An argument that cannot be right (a peer out of range, a zero-sized
    /// region, a flag that makes no sense).
    #[error("invalid argument")]
    InvalidArgument(#[from] quiver_run::InvalidArgument),
    /// A blocking verb completed with an error status.
    #[error("{verb} failed")]
    Completion {
        /// The verb that failed.
        verb: Verb,
        /// The completion's error status.
        #[source]
        source: VerbError,
    },
    /// Nothing happened within the configured timeout.
    #[error("timed out after {after:?} {what}")]
    Timeout {
        /// What was being waited for.
        what: String,
        /// How long we waited.
        after: Duration,
    },
    /// A node of the job failed (exited, crashed, never arrived, or was
    /// reported lost by the coordinator).
    #[error("node {node} failed: {reason}")]
    NodeFailed {
        /// The node that failed.
        node: NodeRank,
        /// What was observed.
        reason: String,
    },
    /// The job's coordinator went away (the driver or rank 0 exited, or the
    /// connection to it broke).
    #[error("lost the job's coordinator at {coordinator}: {reason}")]
    CoordinatorLost {
        /// Its address.
        coordinator: String,
        /// What was observed.
        reason: String,
    },
    /// Setting the job up failed: rendezvous refused, a rank out of range,
    /// nodes that disagree on the job size, a coordinator that cannot be reached.
    #[error("cluster bootstrap failed: {0}")]
    Bootstrap(String),
    /// An operating-system call failed.
    #[error("{what}")]
    Io {
        /// What we were doing.
        what: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A node's task returned an error (see [`crate::job`]).
    #[error("the task failed on node {node}")]
    Task {
        /// The node whose task failed.
        node: NodeRank,
        /// The task's error.
        #[source]
        source: BoxError,
    },
    /// A task's configuration or report could not be carried between
    /// nodes as JSON.
    #[error("{what} could not be carried as JSON")]
    Json {
        /// What was carried.
        what: String,
        /// The serializer's error.
        #[source]
        source: serde_json::Error,
    },
    /// The fabric cannot run on this machine (no RDMA device, no MPI launcher,
    /// feature not compiled in).
    #[error("the {fabric} fabric is unavailable: {reason}")]
    Unavailable {
        /// The fabric's name.
        fabric: &'static str,
        /// Why, in words a user can act on.
        reason: String,
    },
}

impl Error {
    pub(crate) fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            what: what.into(),
            source,
        }
    }
}

/// The error status of a completed work request: the operation did not take
/// effect (a failed READ returns no data, a failed WRITE or atomic leaves the
/// remote memory untouched).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VerbError {
    /// The remote key names no registered region on its node (never
    /// registered, or already deregistered).
    #[error("node {node} has no memory region with key {key}")]
    UnknownKey {
        /// The target node.
        node: NodeRank,
        /// The key that was used.
        key: u32,
    },
    /// The access does not lie inside the region.
    #[error(
        "access of {len} bytes at offset {offset} is outside region {key} \
         ({region_len} bytes) on node {node}"
    )]
    OutOfBounds {
        /// The target node.
        node: NodeRank,
        /// The region's key.
        key: u32,
        /// Offset of the access within the region.
        offset: u64,
        /// Length of the access.
        len: u64,
        /// Length of the region.
        region_len: u64,
    },
    /// An atomic (CAS, FETCH_ADD) whose offset is not a multiple of 8.
    #[error("atomic at offset {offset} of region {key} on node {node} is not 8-byte aligned")]
    Misaligned {
        /// The target node.
        node: NodeRank,
        /// The region's key.
        key: u32,
        /// The misaligned offset.
        offset: u64,
    },
    /// A message longer than the receive buffer it matched; the message is
    /// dropped and the receive completes with this error.
    #[error(
        "message of {len} bytes from node {from} exceeds the posted receive of {capacity} bytes"
    )]
    ReceiveTooSmall {
        /// The sender.
        from: NodeRank,
        /// The message's length.
        len: u64,
        /// The receive buffer's capacity.
        capacity: u64,
    },
    /// The peer is gone (process exited, connection lost, reported failed);
    /// the operation may or may not have taken effect there.
    #[error("node {node} is lost: {reason}")]
    PeerLost {
        /// The lost node.
        node: NodeRank,
        /// What was observed.
        reason: String,
    },
    /// The fabric reported an error of its own (an MPI error code, an
    /// ibverbs work-completion status).
    #[error("{0}")]
    Fabric(String),
}
