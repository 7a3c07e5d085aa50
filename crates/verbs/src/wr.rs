//! Work requests and their completions.

use std::fmt;

use crate::error::VerbError;
use crate::region::RemoteRegion;
use crate::NodeRank;

/// The verbs, for counters and completions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verb {
    /// One-sided read of remote memory.
    Read,
    /// One-sided write of remote memory.
    Write,
    /// 8-byte compare-and-swap on remote memory.
    CompareSwap,
    /// 8-byte fetch-and-add on remote memory.
    FetchAdd,
    /// Two-sided send of a message.
    Send,
    /// A receive buffer, matched by an incoming message.
    Recv,
}

impl Verb {
    /// Every verb, in counter order.
    pub const ALL: [Verb; 6] = [
        Verb::Read,
        Verb::Write,
        Verb::CompareSwap,
        Verb::FetchAdd,
        Verb::Send,
        Verb::Recv,
    ];

    /// The verb's position in [`Verb::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    /// The lowercase name used in reports.
    pub fn name(self) -> &'static str {
        match self {
            Verb::Read => "read",
            Verb::Write => "write",
            Verb::CompareSwap => "cas",
            Verb::FetchAdd => "fetch_add",
            Verb::Send => "send",
            Verb::Recv => "recv",
        }
    }
}

impl fmt::Display for Verb {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a work request does. Buffers are owned: a WRITE's or SEND's data
/// belongs to the fabric from posting until the completion is polled, and a
/// READ's or RECV's data arrives in the completion, so no buffer can be
/// touched while the NIC may still use it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Read `len` bytes at `offset` of a remote region.
    Read {
        /// Target region.
        remote: RemoteRegion,
        /// Byte offset within it.
        offset: u64,
        /// Bytes to read.
        len: usize,
    },
    /// Write `data` at `offset` of a remote region.
    Write {
        /// Target region.
        remote: RemoteRegion,
        /// Byte offset within it.
        offset: u64,
        /// Bytes to write.
        data: Vec<u8>,
    },
    /// If the 8-byte word at `offset` equals `expected`, replace it with
    /// `new`; completes with the word's previous value either way.
    CompareSwap {
        /// Target region.
        remote: RemoteRegion,
        /// Byte offset, a multiple of 8.
        offset: u64,
        /// Value to compare with.
        expected: u64,
        /// Value to store on a match.
        new: u64,
    },
    /// Add `add` (wrapping) to the 8-byte word at `offset`; completes with
    /// its previous value.
    FetchAdd {
        /// Target region.
        remote: RemoteRegion,
        /// Byte offset, a multiple of 8.
        offset: u64,
        /// Addend.
        add: u64,
    },
    /// Send a message to a node, where it matches the oldest posted receive.
    Send {
        /// Destination node.
        to: NodeRank,
        /// The message.
        data: Vec<u8>,
    },
    /// Post a receive buffer of `capacity` bytes; it completes when a
    /// message from any node matches it.
    Recv {
        /// Largest message it accepts.
        capacity: usize,
    },
}

impl Op {
    /// The verb this operation performs.
    pub fn verb(&self) -> Verb {
        match self {
            Op::Read { .. } => Verb::Read,
            Op::Write { .. } => Verb::Write,
            Op::CompareSwap { .. } => Verb::CompareSwap,
            Op::FetchAdd { .. } => Verb::FetchAdd,
            Op::Send { .. } => Verb::Send,
            Op::Recv { .. } => Verb::Recv,
        }
    }

    /// The node the operation is addressed to (`None` for a receive).
    pub fn target(&self) -> Option<NodeRank> {
        match self {
            Op::Read { remote, .. }
            | Op::Write { remote, .. }
            | Op::CompareSwap { remote, .. }
            | Op::FetchAdd { remote, .. } => Some(remote.node),
            Op::Send { to, .. } => Some(*to),
            Op::Recv { .. } => None,
        }
    }

    /// Payload bytes this operation moves (8 for atomics, 0 for a receive
    /// until it is matched).
    pub fn payload_len(&self) -> u64 {
        match self {
            Op::Read { len, .. } => *len as u64,
            Op::Write { data, .. } | Op::Send { data, .. } => data.len() as u64,
            Op::CompareSwap { .. } | Op::FetchAdd { .. } => 8,
            Op::Recv { .. } => 0,
        }
    }
}

/// A work request: an operation and the caller's tag for its completion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkRequest {
    /// Returned unchanged in the completion.
    pub wr_id: u64,
    /// The operation.
    pub op: Op,
}

impl WorkRequest {
    /// Tags `op` with `wr_id`.
    pub fn new(wr_id: u64, op: Op) -> Self {
        Self { wr_id, op }
    }
}

/// What a successful work request produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// A SEND took effect at the target.
    Done,
    /// A WRITE took effect at the target; its buffer is handed back, so a
    /// caller can reuse it for the next WRITE instead of allocating.
    Written(Vec<u8>),
    /// A READ's bytes.
    Data(Vec<u8>),
    /// An atomic's previous value.
    Value(u64),
    /// A received message.
    Message(Vec<u8>),
}

/// A completed work request, as polled from a queue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Completion {
    /// The request's tag.
    pub wr_id: u64,
    /// Its verb.
    pub verb: Verb,
    /// The node it targeted, or for a receive, the node that sent the message.
    pub peer: NodeRank,
    /// What it produced, or why it failed.
    pub result: Result<Output, VerbError>,
    /// Modelled completion time on the node's virtual clock (cost model only).
    pub(crate) done_at_ns: u64,
}

impl Completion {
    /// What the request produced, or its failure as an [`crate::Error`]
    /// naming the verb.
    ///
    /// # Errors
    /// [`crate::Error::Completion`] with the error status.
    pub fn output(self) -> crate::Result<Output> {
        let verb = self.verb;
        self.result
            .map_err(|source| crate::Error::Completion { verb, source })
    }

    pub(crate) fn new(
        wr_id: u64,
        verb: Verb,
        peer: NodeRank,
        result: Result<Output, VerbError>,
    ) -> Self {
        Self {
            wr_id,
            verb,
            peer,
            result,
            done_at_ns: 0,
        }
    }
}
