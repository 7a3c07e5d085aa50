//! Pragh (USENIX ATC '19) as a library: a distributed in-memory graph store
//! over quiver-verbs whose hot values migrate, one vertex at a time, to the
//! node that reads them (split live migration).
//!
//! A vertex is a key; its value is its adjacency list. A key's *home* is
//! fixed by hashing ([`layout::Placement`]: the key's shard, and the
//! shard's node) and never changes; only the value moves. (The `shard`
//! baseline alone moves whole shards of keys and values.) The home's key slot holds the 64-bit address word
//! ([`addr::Addr`]) naming the block that holds the value: local (at the
//! home) or remote (on the value's holder). A reader checks the block's
//! size word against the size in the address it used, so an invalidated
//! block (size word 0) is always noticed and the read starts over.
//!
//! Operations ([`Session`]): Get (the first `limit` neighbours of a
//! vertex, one READ of the key's bucket group and one for the value when
//! remote),
//! Put (append or repoint an edge, or set an edge's weight; always at the
//! home first, forwarded to the value's holder if it moved:
//! check-and-forward), and Migrate, the
//! paper's unilateral protocol run by the target alone with at most five
//! one-sided operations: READ key (skipped on a location-cache hit), local
//! allocation, READ value, CAS of the home's address word, WRITE 0 over the
//! old size word, WRITE of the old address into the source's reclaim ring.
//! Five for every key: its key READ fetches its main bucket's whole group
//! of buckets ([`layout::Tables`]), so a key past its main bucket costs no
//! READ more.
//! The location cache ([`cache::LocationCache`]) keeps remote keys'
//! addresses under a lease and its counters are the hotness monitor; the
//! coordinator ([`policy`]) approves a migration when the applicant's reads
//! of a pair beat its holder's by what the move costs and by more than
//! chance ([`Approval::PaysBack`]; the paper's fixed 1.5x is
//! [`Approval::Ratio`]).
//!
//! What a user gets: [`run`] runs the paper's traversal workload as a
//! quiver-verbs job under each policy ([`Policy`]: `orig`, `shard`,
//! `cache`, `split`, `split+cache`, `ideal`), as a [`Config`] says (its
//! defaults written once, in [`Config::default`]), and returns a
//! [`Report`]: the shared run summary, the engine's counts (remote Gets,
//! keys moved, one-sided operations per migration) and a time series. It
//! tells its caller's [`quiver_run::Progress`] of every tick and stops,
//! with [`Error::Cancelled`], when asked. Its parts, one file each:
//! `config`, `workload` (the workers, their draw of start vertices, the
//! pause while shards move), `monitor` (a node's per-tick control loop:
//! harvest, gather, plan, migrate or move shards, reclaim, record),
//! `report` and `job` ([`run`], [`KvTask`]). [`speed`] measures raw
//! migration speed; [`control`] serves a loaded store to a person's
//! requests (Get, Put, traversal, move), each run on the node asked for or
//! routed to its vertex's home by the node the client talks to.
//!
//! Invariants: every key has one home and one slot, which never move (but
//! with their whole shard, every worker held, under `shard`); the
//! home's word names exactly one block, whose size word equals the word's
//! size once it is live (a migration's copy is dark until the block it
//! replaced is invalid); every other block that held the value is
//! invalidated and waits out its reclaim lease, or is free (after a node
//! died, once the survivors ran [`Store::recover`]: a migration to it
//! that had published its copy and not retired the old block leaves that
//! block unnamed until then, and recovery names it again); a Put is
//! acknowledged once, after the block it replaced was invalidated; a read
//! through an address is trusted only if it ended within a cache lease of
//! when the address was the home's, and the reclaim lease in force is
//! never shorter than a cache lease still trusted (a run derives both from
//! its value room and the rate Puts replace blocks, and changes them in
//! that order: the `lease` module).
//!
//! Decisions the paper leaves open (see `../shared/papers/pragh.notes.md`):
//! - **Address word**: `0 | size:29 | offset:34` local, `1 | size:22 |
//!   machine:7 | offset:34` remote, in 8-byte units; 0 means no value.
//! - **Key region**: 8-slot buckets of 16-byte slots (key + 1, address
//!   word); main buckets sized for 3/4 of 8 keys each, and each main
//!   bucket's keys in a group of adjacent buckets, as many as they fill
//!   (counted at placement, one hash a key), read whole by one READ.
//!   DrTM chains overflow buckets instead, a READ a hop, which costs a
//!   migration of a key down a chain a sixth operation. Keys are loaded
//!   once and never added or removed; AddVertex is not an operation. Keys
//!   hash to 100 shards per node (the `shard` baseline's unit, the paper's
//!   100 per machine), shard `s` loaded on node `s mod N`, and each shard
//!   has its own bucket table at the same offset in every node's region,
//!   so a moved shard's table is copied verbatim; every node reserves
//!   room for every shard's table (25 MiB a node for 2^20 keys on 8 nodes,
//!   committed only where written).
//! - **The `shard` baseline** (§5: 100 shards per machine, every access
//!   tracked at no cost, the optimal plan, block transfers): each node
//!   counts its Gets and Puts per shard; at every interval's end the nodes
//!   gather the counts and each shard goes to the node that accessed it
//!   most. The paper does not say how a shard move stays consistent with
//!   the traffic; here every node holds its workers between operations
//!   (forwarded Puts still complete), each target copies its shards (one
//!   READ of the table, the values' READs posted together, 256 at a
//!   time), then every node repoints its shard map (the paper's POS, a
//!   replicated array here) and the old node frees its copy. The pause
//!   counts in wall time but not in modelled time, and there is no
//!   location cache (the map says where every key is). Its value regions
//!   have room for the whole graph, since any node may come to hold any
//!   shard.
//! - **Value blocks** are `[size][key, count][edges]` and immutable once
//!   published except for the size word: Puts are copy-on-write. The key
//!   in the header (beyond the paper) makes a reader refuse another key's
//!   block of the same size, and lets a leak scan name the key of a block
//!   no address word points to (see [`Store::recover`]).
//! - **Edge properties**: a `.qcsr` graph's one edge property is its `f32`
//!   weight. In a store of a weighted graph each edge takes a word (its id,
//!   then its weight), so that a Get's prefix READ of the first `limit`
//!   edges brings their weights with them; in an unweighted one ids go two
//!   to a word. A Get returns [`layout::Edges`] (ids, and weights when the
//!   graph has them); Puts append a weighted edge or set an edge's weight
//!   ([`Update::AddWeightedEdge`], [`Update::SetWeight`]), and an edge
//!   added without one weighs 1, as `.qcsr` weighs unweighted edges.
//! - **Put order**: the paper publishes a Put's new block (CAS) and then
//!   invalidates the old. A reader with a fresh address could then return
//!   the new list while a later reader with a stale cached address still
//!   returns the old one, which is not linearizable. Here a Put invalidates
//!   the old block first and publishes the new one right after (readers in
//!   between retry); if its CAS then fails, a migration took the block and
//!   the Put runs again at the new holder. A migration keeps the paper's
//!   order (CAS, then invalidate), so a migrator that dies in between
//!   loses no value a survivor holds; its copy has the same content, and
//!   stays dark until the old block is invalid (next point).
//! - **Footnote 10** (a migration's invalidation lands before the next Put
//!   on the moved value): the target writes its copy dark (size word 0)
//!   and lights it once the old block's invalidation has landed, so
//!   nothing reads, updates or moves the copy on while an older one is
//!   valid. A lock at the target, held from the CAS to the invalidation,
//!   stops only the Puts there: the value could still move on from the
//!   target, or back home, and take a Put before the first invalidation
//!   landed, leaving a stale copy readable through a cached address (the
//!   history checker found it, about 1 run in 70). Lighting is a local
//!   store, not a one-sided operation.
//! - **Reclaim rings**: one ring per writing node in each node's region
//!   (single writer, no races): a head word and 8-byte address words. The
//!   owner's reclaimer times an entry's lease from when it first sees it
//!   (never earlier than the write), frees it after the lease, zeroes it and
//!   advances the head, which a writer READs only when the ring looks full.
//!   A full ring fails the migration with an error naming the node rather
//!   than dropping an entry.
//! - **Allocation**: best fit among free extents that merge when freed,
//!   over a region sized to the loaded values plus `value_headroom` bytes.
//! - **Coordinator**: a pure function every node evaluates on the monitor
//!   reports all nodes gather each tick, so it needs no server of its own
//!   and every node reaches the same plan. Three plans ([`Plan`]): the
//!   paper's eager and deferred, and by default a home that counts all
//!   its reads of the values it holds (deferred's statistics, no delay).
//!   The paper's deferred plan decides "at the next interval"; here a
//!   candidate asked mid-interval is decided at that interval's end, its
//!   home's count scaled from the ticks it counted to the whole interval
//!   (the readers' counts cover the whole), and a home reports a
//!   candidate's count however small. A pair whose top two readers
//!   cannot be told apart is left where it is, and a moved pair
//!   rests one interval before it may move again (or, deferred, before
//!   its home is asked).
//! - **Time**: leases use the wall clock (nodes of one machine share it; a
//!   cluster keeps it in step with PTP, as the paper); tests use
//!   [`Clock::manual`].
//! - **Modelled time**: every one-sided operation costs its
//!   [`quiver_verbs::CostModel`] latency, one after another per thread (a
//!   traversal's Gets are dependent); a Get or Put also costs `local_ns`
//!   (default READ latency / 20, the paper's "local is more than 20x
//!   faster"); a forwarded Put costs two SENDs and a CAS.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod addr;
mod alloc;
pub mod cache;
mod clock;
mod config;
pub mod control;
mod histogram;
mod job;
pub mod layout;
mod lease;
mod message;
mod monitor;
pub mod policy;
mod report;
mod server;
pub mod speed;
mod store;
mod update;
mod workload;

pub use clock::{Clock, Pause};
pub use config::{Config, Mix, Policy, NODES};
pub use job::{hears_its_caller, run, run_node, JobConfig, KvTask};
pub use policy::{Approval, Plan};
pub use report::{BenchReport, Latency, NodeReport, Point, Report, Steady};
pub use store::{Orphan, Recovery, Session, Store, StoreConfig, StoreCounts, Tally};
pub use update::Update;
pub use workload::starts;

use quiver_run::InvalidArgument;

/// What can go wrong.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A parameter that makes no sense.
    #[error("invalid argument")]
    InvalidArgument(#[from] InvalidArgument),
    /// Talking to the other nodes failed.
    #[error("talking to the other nodes")]
    Verbs(#[source] quiver_verbs::Error),
    /// A vertex id beyond the graph.
    #[error("vertex {vertex} is not in the graph (it has {vertices} vertices)")]
    UnknownVertex {
        /// The id asked for.
        vertex: u32,
        /// Vertices of the graph.
        vertices: u32,
    },
    /// A value that an address word cannot name.
    #[error("vertex {vertex}'s value is too large{}", in_bytes(.source))]
    TooLarge {
        /// The vertex.
        vertex: u32,
        /// The field that does not fit.
        #[source]
        source: addr::DoesNotFit,
    },
    /// The value region has no block of the size wanted.
    #[error(
        "node {node}'s value region is full: {words} words wanted, {used} of {capacity} in use \
         (values replaced or moved wait out the reclaim lease; raise value_headroom or shorten the lease)"
    )]
    ValueRegionFull {
        /// The node.
        node: u32,
        /// Words wanted.
        words: u64,
        /// Words in use.
        used: u64,
        /// Words of the region.
        capacity: u64,
    },
    /// Something another node should have done did not happen in time.
    #[error("{0}")]
    Stalled(String),
    /// A forwarded Put failed where it ran.
    #[error("a forwarded put failed: {0}")]
    Remote(String),
    /// A serve node or its client could not talk, or a request failed.
    #[error("{0}")]
    Control(String),
    /// What was read from another node makes no sense.
    #[error("corrupt store: {0}")]
    Corrupt(String),
    /// The graph could not be read.
    #[error("reading the graph")]
    Graph(#[source] quiver_csr::Error),
    /// A node of a job failed, or the job could not be formed.
    #[error("running the job")]
    Job(#[source] quiver_verbs::Error),
    /// The caller asked the run to stop (its progress says so, heard by
    /// the nodes at their next tick).
    #[error(transparent)]
    Cancelled(#[from] quiver_run::Cancelled),
}

impl Error {
    pub(crate) fn invalid(parameter: &'static str, reason: impl Into<String>) -> Error {
        Error::InvalidArgument(InvalidArgument::new(parameter, reason))
    }
}

/// A value's size beside the largest an address word names, in bytes
/// (the word counts 8-byte words); nothing for another field.
fn in_bytes(source: &addr::DoesNotFit) -> String {
    if source.field == "size" {
        format!(
            ": {} bytes, where an address names at most {} bytes",
            source.value * 8,
            source.max * 8
        )
    } else {
        String::new()
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    /// A value too large to migrate says so in bytes: 32 MiB is the most a
    /// remote address word names.
    #[test]
    fn a_value_too_large_is_named_in_bytes() {
        let source = addr::Addr::at(0, 1, 1 << 22, 0).unwrap_err();
        let err = Error::TooLarge { vertex: 5, source };
        assert_eq!(
            err.to_string(),
            "vertex 5's value is too large: 33554432 bytes, where an address names at most 33554424 bytes"
        );
    }
}
