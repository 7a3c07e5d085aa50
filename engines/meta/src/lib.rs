//! quiver-meta: GraphMeta's versioned metadata graph (Dai et al., IEEE
//! TPDS 2019), as a cluster of gRPC servers over RocksDB.
//!
//! A user records users, jobs, processes and files, their relations
//! (`run`, `exe`, `read`, `write`, `has`, `contains`, each with its reverse
//! `wasXXBy` edge) and attributes as they happen, and asks provenance
//! questions that fan out over servers, as of any past time:
//!
//! ```text
//! v("/out/r.h5").e(wasWrittenBy).v().e(read).repeat(2).return_fp()
//! ```
//!
//! - [`key`]: the paper's key layout (vertex, section, attribute or edge
//!   type and destination, reversed timestamp), prefix-free and exact.
//! - [`store`]: one server's versioned RocksDB; updates and deletes are new
//!   versions, reads are "as of" a time.
//! - [`tree`] and [`place`]: the consistent-hashing ring and DIDO's
//!   per-vertex partition tree; the baselines edge-cut, vertex-cut and
//!   GIGA+ behind the same interface.
//! - [`server`]: the gRPC service, splits, reverse edges, traversal steps.
//! - [`client`]: routing without a lookup service, session semantics, and
//!   the level-synchronous traversal driver.
//! - [`travel`]: GTravel, as a builder and as text.
//! - [`cluster`]: a cluster of server processes on this machine, and
//!   [`rpc`]: the wire the client and the servers share.
//! - [`load`], [`darshan`] and [`mod@bench`]: bulk loading with many clients,
//!   Darshan-like metadata, and the paper's measurements.
//!
//! Decisions the paper leaves open, taken here (each argued in its module):
//! - Ids are byte strings, escaped prefix-free; a section byte puts system
//!   entries (type, split state) and static attributes before user
//!   attributes, and those before edges.
//! - Timestamps are nanoseconds since the epoch, unique per server and
//!   never below the client's session timestamp; a request whose timestamp
//!   is more than 1 s ahead of the server is refused as from the future.
//! - A vertex's type is a versioned system entry; deleting a vertex
//!   tombstones its type and attributes; updates are per attribute
//!   (latest wins), a partial attribute list leaves the rest as they were.
//! - Reverse edges are written with their forward edge's timestamp: the
//!   forward edge's batch holds each as a durable pending entry, which is
//!   delivered (idempotently) to the server that holds it, this one
//!   included, before the write is acknowledged, and again after a crash
//!   or while that server is unreachable.
//! - Requests are batches of writes, and a server applies concurrent
//!   batches by group commit (one RocksDB write for all of them, each at
//!   its own timestamp); a split runs outside the server's write lock
//!   while only its own vertex's writes wait. The paper leaves threads,
//!   queues and batching open.
//! - The ring has 64 virtual nodes by default, assigned with bounded loads;
//!   DIDO's tree spans the servers (at most 64), so each split moves edges
//!   to another machine.
//! - An edge names its destination by id, not by version: a traversal
//!   reads every vertex as of its one snapshot time, and a reader who
//!   wants the destination as the edge saw it reads it as of the edge's
//!   timestamp.
//! - IndexFS's second, key-pointer table (paper §2.5) is not built: keys
//!   and values share one table, the §2.1 layout (RocksDB's blob files
//!   would be the way to add it).
//! - Durability rests on each server's own data directory (write-ahead
//!   log on, fsynced per batch with `sync`); there is no replication. The paper
//!   leaves both to the parallel file system its servers write to.
//! - A vertex's split state lives at its home; clients cache it and learn
//!   of splits when a server returns an edge as stale.
//! - The traversal barrier is the client that runs the traversal; `repeat`
//!   takes a count.
//! - The asynchronous engine (GraphTrek's idea; its internals are not in
//!   the paper) has no barrier: a batch joins its step's queue on a
//!   server and the call returns; one worker per traversal and server
//!   takes everything queued for a step at once (merging batches), visits
//!   it with a per-step visited set (each vertex once per step, as the
//!   synchronous engine does), and sends the results on as one batch per
//!   server. The client ends the traversal by counting batches sent and
//!   finished on every server (Mattern's four-counter method; the server's
//!   `flow` module argues it).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod bench;
pub mod client;
pub mod clock;
pub mod cluster;
pub mod darshan;
mod error;
pub mod key;
pub mod load;
pub mod membership;
pub mod place;
pub mod rpc;
pub mod schema;
pub mod server;
pub mod store;
pub mod travel;
pub mod tree;

pub use client::{
    Client, Engine, StepReport, TravelAnswer, TravelOptions, TravelResult, Write, Written,
};
pub use cluster::LocalCluster;
pub use error::{Error, Result};
pub use membership::{Identity, Member, Membership};
pub use place::Partitioner;
pub use server::{Running, ServerConfig};
pub use travel::{Filter, GTravel, QueryReport, Test, Travel};
