//! The `ibverbs` fabric (feature `rdma`): one process per node, real RC queue
//! pairs on an RDMA NIC (InfiniBand or RoCE) through libibverbs.
//!
//! # Setup
//! [`join`] opens the device named by `QUIVER_IBV_DEVICE` (default: the first
//! one libibverbs lists) on port 1, creates one protection domain, one
//! completion queue and one RC queue pair per node of the job — the node
//! itself included, so a node reaches its own regions through its NIC like
//! everybody else's — and connects them through the out-of-band all-gather it
//! is given. On RoCE the GID is the first RoCE v2 IPv4 one unless
//! `QUIVER_IBV_GID_INDEX` says otherwise. Everything past `join` needs a
//! device; without one (no NIC, no rdma-core provider, no kernel support)
//! `join` fails with [`Error::Unavailable`] and says why.
//!
//! # Semantics
//! The contract of the crate holds, with these specifics:
//! - A region is registered with the NIC (local write, remote read, write
//!   and atomic) and published in the node's key table, a registered array
//!   peers read with an RDMA READ the first time they use a key. So a bad key
//!   is caught at the origin ([`VerbError::UnknownKey`]) and bounds and
//!   alignment are checked there against the region's true length
//!   ([`VerbError::OutOfBounds`], [`VerbError::Misaligned`]): the NIC never
//!   sees a request it would reject. That matters because a request the NIC
//!   rejects moves the queue pair into the error state, which ends the
//!   connection to that node. The one case the origin cannot catch is a
//!   region its owner dropped while a peer that had used it still does: the
//!   NIC rejects the access, that request completes with `UnknownKey`, and
//!   every later request to that node with [`VerbError::PeerLost`]. Drop a
//!   region only after a barrier that ends its use.
//! - Ordering: all queues of a node share the queue pair to a target, and
//!   requests enter it in posted order. A request that follows an
//!   outstanding READ or atomic on the queue pair carries `IBV_SEND_FENCE`
//!   (a READ only behind an atomic), so it cannot pass them; completions are
//!   released in posted order per target, including those of requests that
//!   failed at the origin.
//! - Local buffers are staged: WRITE and SEND data is copied into registered
//!   staging memory of the queue pair, READ and atomic results are copied
//!   out of it. READs and WRITEs longer than 64 KiB are split into several
//!   work requests (each 8-byte aligned word is still atomic).
//! - SEND/RECV: every queue pair keeps receive buffers of [`MESSAGE_MAX`]
//!   bytes posted at the NIC; what arrives is matched against the receives
//!   posted with [`Op::Recv`] exactly as on the other fabrics. A SEND longer
//!   than [`MESSAGE_MAX`] completes with [`VerbError::Fabric`]. A receiver
//!   that falls behind slows its senders down (RNR retries, unlimited).
//! - Atomics are the NIC's 8-byte CAS and FETCH_ADD. They operate on the
//!   word in host byte order and return its previous value in host byte
//!   order into the staging buffer; devices that cannot do so report
//!   `atomic_cap = IBV_ATOMIC_NONE` (mlx5 does this when its firmware cannot
//!   use host endianness), and `join` refuses them.
//! - Coherence caveat: on devices with `IBV_ATOMIC_HCA` (nearly all), NIC
//!   atomics are atomic only with respect to other atomics of the same NIC.
//!   [`Region::compare_swap`] and [`Region::fetch_add`] run by the CPU on a
//!   word that peers update with remote atomics are *not* atomic with them:
//!   an update can be lost. Update such words through the node's own queue
//!   pair instead (a [`Queue`](crate::Queue) aimed at the node itself).
//!   Aligned 8-byte loads and stores by the CPU are fine.
//! - Failures: a peer that stops answering makes its requests complete with
//!   [`VerbError::PeerLost`] after the transport retries (about half a
//!   second); any error status ends the connection, and every later request
//!   to that node completes with `PeerLost` naming the first error. Other
//!   statuses become [`VerbError::Fabric`] with libibverbs' text.
//!
//! # Building
//! ibverbs-sys generates its bindings from rdma-core, which needs `cmake`
//! and libclang at build time and libibverbs at run time. The safe `ibverbs`
//! crate exposes neither raw handles nor RDMA READ, WRITE or atomics, so the
//! few verbs used here are declared in `sys`, their layouts asserted against
//! `<infiniband/verbs.h>` (the frozen `IBVERBS_1.1` ABI, 64-bit
//! little-endian targets).
//!
//! # Layout
//! This file joins a job; the rest is split by concern, and the `unsafe`
//! sits in three files:
//! - `sys`: the libibverbs declarations (FFI, no code).
//! - `resources`: everything made from the device, owned and released on
//!   drop (device, registrations, DMA staging memory, completion queue,
//!   queue pairs); every libibverbs call but posting. `unsafe`.
//! - `keys`: the key table peers look regions up in, and the origin's
//!   access checks.
//! - `staging`: which staging bytes each work request owns (a ring).
//! - `link`: a queue pair to one node and its requests; posting work
//!   requests to the NIC. `unsafe`.
//! - `fabric`: the node's resources, the life of a request from posting to
//!   release, the completion poller. `unsafe` only to copy staging memory
//!   that the NIC is done with.
//!
//! [`VerbError::UnknownKey`]: crate::VerbError::UnknownKey
//! [`VerbError::OutOfBounds`]: crate::VerbError::OutOfBounds
//! [`VerbError::Misaligned`]: crate::VerbError::Misaligned
//! [`VerbError::PeerLost`]: crate::VerbError::PeerLost
//! [`VerbError::Fabric`]: crate::VerbError::Fabric
//! [`Op::Recv`]: crate::Op::Recv
//! [`Region::compare_swap`]: crate::Region::compare_swap
//! [`Region::fetch_add`]: crate::Region::fetch_add

mod fabric;
mod keys;
mod link;
mod resources;
mod staging;
mod sys;

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use self::fabric::{Ibverbs, Shared};
use self::keys::KeyTable;
use self::link::Link;
use self::resources::{Cq, Device};
use crate::counters::CounterTable;
use crate::error::{Error, Result};
use crate::node::Node;
use crate::NodeRank;

#[cfg(not(all(target_pointer_width = "64", target_endian = "little")))]
compile_error!("the ibverbs fabric supports 64-bit little-endian targets only");

/// Largest message a SEND may carry on this fabric, in bytes.
pub const MESSAGE_MAX: usize = 64 << 10;

/// The out-of-band all-gather [`join`] connects through: every node passes
/// its bytes and gets every node's, by rank.
pub type Exchange = Box<dyn Fn(Vec<u8>) -> Result<Vec<Vec<u8>>> + Send + Sync>;

const FABRIC: &str = "ibverbs";
/// The port used on the device.
const PORT: u8 = 1;
/// Work requests in flight per queue pair.
const SQ_DEPTH: usize = 128;
/// Receive buffers posted per queue pair.
const RECV_DEPTH: usize = 16;
/// Largest piece of a READ or WRITE handed to the NIC in one work request.
const SEGMENT_MAX: usize = 64 << 10;
/// Staging memory per queue pair.
const STAGING_BYTES: usize = 1 << 20;
/// Alignment of staging allocations (atomics need 8).
const STAGING_ALIGN: usize = 64;
/// Entries of a node's key table; key `k` lives in entry `k % KEY_SLOTS`.
const KEY_SLOTS: usize = 1 << 14;
/// Words per key-table entry: `key << 32 | rkey`, length, address, in use.
const SLOT_WORDS: usize = 4;
const SLOT_BYTES: usize = SLOT_WORDS * 8;
/// Outstanding READs and atomics per queue pair we ask for (capped by the device).
const MAX_RD_ATOMIC: u8 = 16;
/// Local ACK timeout exponent: 4.096 µs · 2^14 ≈ 67 ms, retried 7 times.
const ACK_TIMEOUT: u8 = 14;
const RETRY_COUNT: u8 = 7;
/// 7 means "retry forever": a busy receiver slows its senders down.
const RNR_RETRY: u8 = 7;
/// 0.64 ms before a sender retries a message the receiver had no buffer for.
const MIN_RNR_TIMER: u8 = 12;
/// Bit 63 of a work-request id marks a receive; bits 32..63 name the link.
const RECV_BIT: u64 = 1 << 63;
const LOW_32: u64 = 0xffff_ffff;

/// Work-request ids: bit 63 set for receives, the link (the peer's rank) in
/// bits 32..63, and the low 32 bits of the send sequence number or the
/// receive buffer's slot below.
fn wr_id(recv: bool, link: NodeRank, low: u64) -> u64 {
    let recv = if recv { RECV_BIT } else { 0 };
    recv | u64::from(link.0) << 32 | (low & LOW_32)
}

/// Splits a work-request id into (is a receive, link index, low 32 bits).
fn split_wr_id(id: u64) -> (bool, usize, u64) {
    let link = usize::try_from((id & !RECV_BIT) >> 32).expect("31 bits fit in a usize");
    (id & RECV_BIT != 0, link, id & LOW_32)
}

/// Joins the job described by `launch` with the cluster bootstrap as the
/// out-of-band exchange (hosting the coordinator if this node is to), then
/// as [`join`].
///
/// # Errors
/// As [`crate::cluster::Membership::join`] and [`join`].
pub fn join_launch(launch: &crate::cluster::Launch) -> Result<Node> {
    let membership = crate::cluster::Membership::join(launch, 0, |_, _| {})?;
    let exchange: Exchange = Box::new(move |data| membership.control().all_gather(data));
    join(launch.rank, launch.size, launch.timeout, exchange)
}

/// Joins an `ibverbs` job as node `rank` of `size`, connecting through
/// `exchange` (an all-gather over the cluster bootstrap, or in-process in
/// tests). Every node of the job must call it; it returns once every node
/// has connected its queue pairs. `timeout` bounds the blocking calls of the
/// node's queues.
///
/// # Errors
/// [`Error::Unavailable`] when this machine cannot run the fabric (no RDMA
/// device or provider, port down, no atomics), [`Error::InvalidArgument`]
/// for a rank outside `0..size`, [`Error::Io`] when a verb fails while
/// setting up, [`Error::Bootstrap`] for unreadable peer endpoints, and the
/// exchange's own errors.
pub fn join(rank: NodeRank, size: u32, timeout: Duration, exchange: Exchange) -> Result<Node> {
    if rank.0 >= size {
        return Err(Error::invalid(
            "rank",
            format!("rank {rank} is outside a job of {size} nodes"),
        ));
    }
    let n = size as usize;
    let device = Device::open()?;
    let limits = device.limits;
    let entries = n
        .checked_mul(limits.sq_depth + limits.recv_depth)
        .filter(|&entries| entries <= limits.max_cqe)
        .ok_or_else(|| {
            unavailable(format!(
                "a job of {size} nodes needs a completion queue larger than the {} entries {} supports",
                limits.max_cqe, device.name
            ))
        })?;
    let cq = Arc::new(Cq::new(&device, entries).map_err(|source| Error::Io {
        what: format!("failed to create a completion queue of {entries} entries"),
        source,
    })?);
    let key_table = Arc::new(KeyTable::new(&device).map_err(|source| Error::Io {
        what: "failed to register the key table".into(),
        source,
    })?);
    let links = (0..size)
        .map(|peer| Link::new(&device, &cq, NodeRank(peer)))
        .collect::<Result<Vec<_>>>()?;

    let psns: Vec<u32> = (0..size).map(|peer| initial_psn(rank, peer)).collect();
    let mine = Endpoint {
        lid: device.port.lid,
        gid: device.port.gid.map_or([0; 16], |(_, gid)| gid),
        global: device.port.gid.is_some(),
        mtu: device.port.active_mtu,
        rd_atomic: limits.rd_atomic,
        qpns: links.iter().map(|link| link.qp.num()).collect(),
        psns: psns.clone(),
        key_table: key_table.addr(),
        key_table_rkey: key_table.rkey(),
    };
    let mine = serde_json::to_vec(&mine).expect("an Endpoint always serializes");
    let all = exchange(mine)?;
    let endpoints = parse_endpoints(&all, size)?;
    for (link, remote) in links.iter().zip(&endpoints) {
        link.connect(&device, rank, psns[link.peer.index()], remote)
            .map_err(|source| Error::Io {
                what: format!("failed to connect the queue pair to node {}", link.peer),
                source,
            })?;
    }
    // Nobody sends before every queue pair of the job is ready to receive.
    exchange(Vec::new())?;

    let remote_tables = endpoints
        .iter()
        .map(|e| (e.key_table, e.key_table_rkey))
        .collect();
    let shared = Shared::new(rank, links, key_table, remote_tables, cq, device);
    let fabric = Ibverbs::start(shared, exchange)?;
    let counters = Arc::new(CounterTable::new(size));
    Ok(Node::new(
        rank,
        size,
        FABRIC,
        timeout,
        counters,
        Box::new(fabric),
    ))
}

fn unavailable(reason: String) -> Error {
    Error::Unavailable {
        fabric: FABRIC,
        reason,
    }
}

/// A random 24-bit packet sequence number for one direction of a connection.
fn initial_psn(rank: NodeRank, peer: u32) -> u32 {
    use std::hash::{BuildHasher, Hasher};
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(rank.0);
    hasher.write_u32(peer);
    u32::try_from(hasher.finish() & 0xff_ffff).expect("24 bits fit in a u32")
}

/// What a node publishes about itself when the job connects.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Endpoint {
    lid: u16,
    gid: [u8; 16],
    /// Whether the node routes with GIDs (RoCE): then everybody must.
    global: bool,
    mtu: u32,
    rd_atomic: u8,
    /// Its queue pair towards each node, by rank.
    qpns: Vec<u32>,
    /// The first PSN it sends with towards each node, by rank.
    psns: Vec<u32>,
    key_table: u64,
    key_table_rkey: u32,
}

fn parse_endpoints(all: &[Vec<u8>], size: u32) -> Result<Vec<Endpoint>> {
    if all.len() != size as usize {
        return Err(Error::Bootstrap(format!(
            "the exchange returned {} endpoints for {size} nodes",
            all.len()
        )));
    }
    all.iter()
        .enumerate()
        .map(|(rank, bytes)| {
            let endpoint: Endpoint = serde_json::from_slice(bytes).map_err(|err| {
                Error::Bootstrap(format!(
                    "node {rank} sent an unreadable ibverbs endpoint: {err}"
                ))
            })?;
            if endpoint.qpns.len() != size as usize || endpoint.psns.len() != size as usize {
                return Err(Error::Bootstrap(format!(
                    "node {rank} sent {} queue pairs for a job of {size} nodes",
                    endpoint.qpns.len()
                )));
            }
            Ok(endpoint)
        })
        .collect()
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding a link's lock is a bug in this module; the
    // state left behind is still memory-safe, so poison is ignored.
    mutex.lock().unwrap_or_else(|poison| poison.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn work_request_ids_name_their_link() {
        let send = wr_id(false, NodeRank(3), (7 << 32) + 41);
        assert_eq!(split_wr_id(send), (false, 3, 41));
        let recv = wr_id(true, NodeRank(u32::MAX >> 1), 5);
        assert_eq!(split_wr_id(recv), (true, (u32::MAX >> 1) as usize, 5));
    }
}
