//! quiver-walkstate: the state of many random walks, kept small and out of
//! core. A walk is one packed machine word ([`WalkLayout`]) or, in exact
//! mode, a word plus a walk id ([`ExactWalk`]); walks wait in per-block
//! [`WalkPools`] that spill to per-block files when their fixed-capacity
//! buffers would fill, as GraphWalker's do.
//!
//! Invariants:
//! - A layout is only built if every field fits: encoding never masks or
//!   wraps, and a value out of its field's range is a bug caught by an
//!   assertion.
//! - Every walk pushed into a pool ([`WalkPools::push`], or
//!   [`WalkPools::extend`] for several) comes back exactly once from
//!   [`WalkPools::take`] (or [`WalkPools::take_at_most`]) for its block, in
//!   push order with spilled walks first; counts per block are exact, and
//!   so are minimum hops (given `extend` the true minimum of what it adds)
//!   except after a partial take (then a lower bound).
//! - Spill files live in a private temporary directory that is removed when
//!   the pools are dropped, on success and on error alike.
//!
//! No features; no `unsafe`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod layout;
mod pools;

pub use layout::{ExactWalk, WalkLayout, WalkWord};
pub use pools::{PoolStats, WalkPools};

/// Everything that can go wrong with walk state.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The walk fields need more bits than a word has.
    #[error(
        "a walk word cannot hold this configuration: {source_bits} bits of source index \
         ({sources} sources) + {position_bits} bits of position ({block_vertices} vertices in the \
         largest block) + {hop_bits} bits of hop count (walks of up to {max_hops} steps) = \
         {needed} bits, more than 64; use fewer sources, smaller blocks, shorter walks, or exact mode"
    )]
    DoesNotFit {
        /// Sources requested.
        sources: u64,
        /// Vertices in the largest block.
        block_vertices: u64,
        /// Longest walk.
        max_hops: u64,
        /// Bits for the source index.
        source_bits: u32,
        /// Bits for the position.
        position_bits: u32,
        /// Bits for the hop count.
        hop_bits: u32,
        /// Their sum.
        needed: u32,
    },
    /// The work directory for spill files could not be made.
    #[error("cannot create a walk spill directory in {}", path.display())]
    WorkDir {
        /// The parent directory asked for.
        path: std::path::PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// Spilling walks to, or reading them back from, a block's file failed.
    #[error("walk spill file {} failed", path.display())]
    Spill {
        /// The file.
        path: std::path::PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A pool argument makes no sense.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

/// Result with [`Error`] as the default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
