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
//! few verbs used here are declared below, their layouts asserted against
//! `<infiniband/verbs.h>` (the frozen `IBVERBS_1.1` ABI, 64-bit
//! little-endian targets).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ffi::{c_int, c_uint, c_void, CStr};
use std::fmt;
use std::io;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use ::ibverbs::{ibv_access_flags, ibv_wc, ibv_wc_status};

use crate::counters::CounterTable;
use crate::error::{Error, Result, VerbError};
use crate::node::{Fabric, Node};
use crate::queue::{CompletionQueue, Mailbox};
use crate::region::{Memory, Region, Registry};
use crate::wr::{Completion, Op, Output, WorkRequest};
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
        return Err(Error::InvalidArgument(format!(
            "rank {rank} is outside a job of {size} nodes"
        )));
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
        key_table_rkey: key_table.mr.rkey(),
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

    let shared = Arc::new(Shared {
        rank,
        registry: Arc::new(Registry::default()),
        mailbox: Mailbox::default(),
        key_table,
        remote_tables: endpoints
            .iter()
            .map(|e| (e.key_table, e.key_table_rkey))
            .collect(),
        targets: RwLock::new(HashMap::new()),
        stop: AtomicBool::new(false),
        links,
        cq,
        device,
    });
    let poller = {
        let shared = Arc::clone(&shared);
        std::thread::Builder::new()
            .name(format!("ibverbs-poller-{rank}"))
            .spawn(move || poll_loop(&shared))
            .map_err(|source| Error::Io {
                what: "failed to start the completion poller thread".into(),
                source,
            })?
    };
    let fabric = Ibverbs {
        shared,
        exchange,
        poller: Some(poller),
    };
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

/// Why no device could be listed, in words a user can act on.
fn listing_failed(err: &io::Error) -> String {
    format!(
        "cannot list RDMA devices ({err}): this machine has no RDMA device, or no rdma-core \
         provider or kernel support for it (see `ibv_devices`); use the tcp or mpi fabric instead"
    )
}

fn no_devices() -> String {
    "no RDMA device found (`ibv_devices` lists none): load the driver of an RDMA NIC \
     (or rdma_rxe for Soft-RoCE), or use the tcp or mpi fabric instead"
        .into()
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

fn status_text(status: c_uint) -> String {
    // SAFETY: ibv_wc_status_str accepts any value and returns a pointer to
    // a static NUL-terminated string ("unknown" for values it does not know).
    let text = unsafe { sys::ibv_wc_status_str(status) };
    if text.is_null() {
        return format!("work completion status {status}");
    }
    // SAFETY: non-null, static and NUL-terminated, as just argued.
    unsafe { CStr::from_ptr(text) }
        .to_string_lossy()
        .into_owned()
}

// ---------------------------------------------------------------------------
// Device resources.

/// What the device lets us use, capped by what we ask for.
#[derive(Debug, Clone, Copy)]
struct Limits {
    sq_depth: usize,
    recv_depth: usize,
    max_cqe: usize,
    rd_atomic: u8,
}

#[derive(Debug, Clone, Copy)]
struct Port {
    lid: u16,
    active_mtu: u32,
    /// GID index and GID, when the port routes with GIDs (RoCE) or one was asked for.
    gid: Option<(u8, [u8; 16])>,
}

/// An open device context and its protection domain; every other resource
/// holds an `Arc` of it, so it is closed last.
struct Device {
    pd: NonNull<sys::ibv_pd>,
    ctx: Context,
    name: String,
    port: Port,
    limits: Limits,
}

// SAFETY: libibverbs is thread-safe: a context and a protection domain may
// be used from any thread, concurrently (ibv_* verbs lock internally).
unsafe impl Send for Device {}
// SAFETY: as for Send.
unsafe impl Sync for Device {}

impl fmt::Debug for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Device")
            .field("name", &self.name)
            .field("port", &self.port)
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

/// An open device context, closed on drop.
struct Context(NonNull<sys::ibv_context>);

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: the context came from ibv_open_device and everything
        // created from it was destroyed before (Device drops its PD first,
        // and every other resource keeps the Device alive).
        let ret = unsafe { sys::ibv_close_device(self.0.as_ptr()) };
        if ret != 0 {
            tracing::warn!("ibv_close_device failed: {}", io::Error::last_os_error());
        }
    }
}

/// libibverbs' device list, freed on drop.
struct DeviceList {
    list: NonNull<*mut sys::ibv_device>,
    len: usize,
}

impl DeviceList {
    fn get() -> io::Result<Self> {
        let mut n: c_int = 0;
        // SAFETY: `n` is a valid out-pointer for the duration of the call.
        let list = unsafe { sys::ibv_get_device_list(&mut n) };
        let list = NonNull::new(list).ok_or_else(io::Error::last_os_error)?;
        Ok(Self {
            list,
            len: usize::try_from(n).unwrap_or(0),
        })
    }

    /// The devices with their names.
    fn devices(&self) -> Vec<(String, *mut sys::ibv_device)> {
        (0..self.len)
            .map(|i| {
                // SAFETY: the list holds `len` device pointers (and a NULL
                // after them), valid until the list is freed.
                let device = unsafe { *self.list.as_ptr().add(i) };
                // SAFETY: `device` is a live entry of the list;
                // ibv_get_device_name returns its static name or NULL.
                let name = unsafe { sys::ibv_get_device_name(device) };
                let name = if name.is_null() {
                    format!("device {i}")
                } else {
                    // SAFETY: non-null, NUL-terminated, lives as long as the list.
                    unsafe { CStr::from_ptr(name) }
                        .to_string_lossy()
                        .into_owned()
                };
                (name, device)
            })
            .collect()
    }
}

impl Drop for DeviceList {
    fn drop(&mut self) {
        // SAFETY: the list came from ibv_get_device_list and is freed once;
        // contexts opened from its devices stay valid after this.
        unsafe { sys::ibv_free_device_list(self.list.as_ptr()) };
    }
}

impl Device {
    fn open() -> Result<Arc<Device>> {
        let list = DeviceList::get().map_err(|err| unavailable(listing_failed(&err)))?;
        let devices = list.devices();
        if devices.is_empty() {
            return Err(unavailable(no_devices()));
        }
        let wanted = std::env::var("QUIVER_IBV_DEVICE")
            .ok()
            .filter(|name| !name.is_empty());
        let (name, raw) = match &wanted {
            Some(wanted) => devices
                .iter()
                .find(|(name, _)| name == wanted)
                .cloned()
                .ok_or_else(|| {
                    let names: Vec<&str> = devices.iter().map(|(name, _)| name.as_str()).collect();
                    unavailable(format!(
                        "no RDMA device named {wanted} (QUIVER_IBV_DEVICE); this machine has {}",
                        names.join(", ")
                    ))
                })?,
            None => devices[0].clone(),
        };
        // SAFETY: `raw` is a live entry of `list`, which outlives the call.
        let ctx = unsafe { sys::ibv_open_device(raw) };
        let ctx = Context(NonNull::new(ctx).ok_or_else(|| {
            unavailable(format!(
                "cannot open RDMA device {name}: {}",
                io::Error::last_os_error()
            ))
        })?);
        drop(list);

        let mut attr = sys::ibv_device_attr::default();
        // SAFETY: `ctx` is open and `attr` is a writable ibv_device_attr.
        let ret = unsafe { sys::ibv_query_device(ctx.0.as_ptr(), &mut attr) };
        if ret != 0 {
            return Err(Error::Io {
                what: format!("failed to query RDMA device {name}"),
                source: io::Error::from_raw_os_error(ret),
            });
        }
        if attr.atomic_cap == sys::IBV_ATOMIC_NONE {
            return Err(unavailable(format!(
                "RDMA device {name} does not support 8-byte atomics on remote memory \
                 (atomic_cap IBV_ATOMIC_NONE), which the verbs contract needs; \
                 use the tcp or mpi fabric instead"
            )));
        }
        let to_usize = |value: c_int| usize::try_from(value).unwrap_or(0);
        let to_u8 = |value: c_int| u8::try_from(value.clamp(1, 255)).unwrap_or(1);
        let limits = Limits {
            sq_depth: SQ_DEPTH.min(to_usize(attr.max_qp_wr)).max(1),
            recv_depth: RECV_DEPTH.min(to_usize(attr.max_qp_wr)).max(1),
            max_cqe: to_usize(attr.max_cqe),
            rd_atomic: MAX_RD_ATOMIC
                .min(to_u8(attr.max_qp_rd_atom))
                .min(to_u8(attr.max_qp_init_rd_atom)),
        };

        let mut port_attr = sys::PortAttr::default();
        // SAFETY: `ctx` is open; the buffer is an ibv_port_attr with room
        // to spare for fields a newer provider may write.
        let ret = unsafe { sys::ibv_query_port(ctx.0.as_ptr(), PORT, &mut port_attr.attr) };
        if ret != 0 {
            return Err(Error::Io {
                what: format!("failed to query port {PORT} of RDMA device {name}"),
                source: io::Error::from_raw_os_error(ret),
            });
        }
        let port_attr = port_attr.attr;
        if port_attr.state != sys::IBV_PORT_ACTIVE {
            return Err(unavailable(format!(
                "port {PORT} of RDMA device {name} is not active (state {}); \
                 check its link with `ibv_devinfo`",
                port_attr.state
            )));
        }
        let gid = choose_gid(&ctx, &name, &port_attr)?;

        // SAFETY: `ctx` is open.
        let pd = unsafe { sys::ibv_alloc_pd(ctx.0.as_ptr()) };
        let pd = NonNull::new(pd).ok_or_else(|| Error::Io {
            what: format!("failed to allocate a protection domain on {name}"),
            source: io::Error::last_os_error(),
        })?;
        Ok(Arc::new(Device {
            pd,
            ctx,
            name,
            port: Port {
                lid: port_attr.lid,
                active_mtu: port_attr.active_mtu,
                gid,
            },
            limits,
        }))
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        // SAFETY: the PD came from ibv_alloc_pd; every QP and MR made in it
        // holds an Arc of this Device, so none is left.
        let ret = unsafe { sys::ibv_dealloc_pd(self.pd.as_ptr()) };
        if ret != 0 {
            tracing::warn!(
                "ibv_dealloc_pd failed: {}",
                io::Error::from_raw_os_error(ret)
            );
        }
    }
}

/// The GID to route with: `QUIVER_IBV_GID_INDEX` if set; on RoCE (Ethernet
/// link layer) the first RoCE v2 GID that is an IPv4-mapped address, else the
/// first RoCE v2 one, else the first that is set; on InfiniBand none (LID
/// routing).
fn choose_gid(
    ctx: &Context,
    name: &str,
    port: &sys::ibv_port_attr,
) -> Result<Option<(u8, [u8; 16])>> {
    let query = |index: u32| -> Option<sys::ibv_gid_entry> {
        let mut entry = sys::ibv_gid_entry::default();
        // SAFETY: `ctx` is open and `entry` is a writable ibv_gid_entry of
        // the size passed.
        let ret = unsafe {
            sys::_ibv_query_gid_ex(
                ctx.0.as_ptr(),
                u32::from(PORT),
                index,
                &mut entry,
                0,
                std::mem::size_of::<sys::ibv_gid_entry>(),
            )
        };
        (ret == 0 && entry.gid.raw != [0; 16]).then_some(entry)
    };
    let to_index = |index: u32| u8::try_from(index).ok();
    if let Ok(text) = std::env::var("QUIVER_IBV_GID_INDEX") {
        let index: u8 = text.trim().parse().map_err(|_| {
            Error::InvalidArgument(format!(
                "QUIVER_IBV_GID_INDEX={text} is not a GID index (0..=255)"
            ))
        })?;
        let entry = query(u32::from(index)).ok_or_else(|| {
            unavailable(format!(
                "GID index {index} (QUIVER_IBV_GID_INDEX) of port {PORT} of {name} is not set"
            ))
        })?;
        return Ok(Some((index, entry.gid.raw)));
    }
    if port.link_layer != sys::IBV_LINK_LAYER_ETHERNET {
        return Ok(None);
    }
    let len = u32::try_from(port.gid_tbl_len.clamp(0, 256)).unwrap_or(0);
    let entries: Vec<(u8, sys::ibv_gid_entry)> = (0..len)
        .filter_map(|index| Some((to_index(index)?, query(index)?)))
        .collect();
    let ipv4 = |entry: &sys::ibv_gid_entry| {
        entry.gid.raw[..10] == [0; 10] && entry.gid.raw[10..12] == [0xff, 0xff]
    };
    let v2 = |entry: &sys::ibv_gid_entry| entry.gid_type == sys::IBV_GID_TYPE_ROCE_V2;
    entries
        .iter()
        .find(|(_, e)| v2(e) && ipv4(e))
        .or_else(|| entries.iter().find(|(_, e)| v2(e)))
        .or_else(|| entries.first())
        .map(|(index, entry)| Some((*index, entry.gid.raw)))
        .ok_or_else(|| {
            unavailable(format!(
                "port {PORT} of RoCE device {name} has no GID set (is its interface up and addressed?); \
                 set QUIVER_IBV_GID_INDEX to choose one"
            ))
        })
}

/// A memory registration, deregistered on drop.
struct Mr {
    mr: NonNull<sys::ibv_mr>,
    _device: Arc<Device>,
}

// SAFETY: an ibv_mr is immutable after registration except through the
// verbs, which are thread-safe.
unsafe impl Send for Mr {}
// SAFETY: as for Send.
unsafe impl Sync for Mr {}

impl Mr {
    /// Registers `len` bytes at `addr` with the device.
    ///
    /// # Safety
    /// The memory must stay allocated and in place until the returned `Mr`
    /// is dropped, and must tolerate the NIC reading and (with the access
    /// given) writing it at any time: it is only ever accessed through
    /// atomics or raw pointers, never through Rust references to plain data.
    unsafe fn register(
        device: &Arc<Device>,
        addr: *mut c_void,
        len: usize,
        access: ibv_access_flags,
    ) -> io::Result<Mr> {
        let access = c_int::try_from(access.0).expect("access flags fit in an int");
        // SAFETY: the PD is live (we hold its Device); the caller promises
        // the memory outlives the registration.
        let mr = unsafe { sys::ibv_reg_mr(device.pd.as_ptr(), addr, len, access) };
        let mr = NonNull::new(mr).ok_or_else(io::Error::last_os_error)?;
        Ok(Mr {
            mr,
            _device: Arc::clone(device),
        })
    }

    fn lkey(&self) -> u32 {
        // SAFETY: the MR is registered until drop; lkey never changes.
        unsafe { self.mr.as_ref() }.lkey
    }

    fn rkey(&self) -> u32 {
        // SAFETY: as for lkey.
        unsafe { self.mr.as_ref() }.rkey
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: registered by ibv_reg_mr, deregistered once. Work requests
        // that still name it fail at the NIC instead of touching freed memory,
        // since the memory's owner drops it after this registration.
        let ret = unsafe { sys::ibv_dereg_mr(self.mr.as_ptr()) };
        if ret != 0 {
            tracing::warn!("ibv_dereg_mr failed: {}", io::Error::from_raw_os_error(ret));
        }
    }
}

/// Page-aligned zeroed memory the NIC may DMA into, accessed only through
/// raw pointers.
struct DmaBuffer {
    ptr: NonNull<u8>,
    layout: std::alloc::Layout,
}

// SAFETY: plain memory; the unsafe accessors make callers own the ranges
// they touch (see their Safety sections).
unsafe impl Send for DmaBuffer {}
// SAFETY: as for Send.
unsafe impl Sync for DmaBuffer {}

impl DmaBuffer {
    fn zeroed(len: usize) -> Self {
        let layout = std::alloc::Layout::from_size_align(len.max(1), 4096)
            .expect("staging buffers are far below isize::MAX");
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(ptr).unwrap_or_else(|| std::alloc::handle_alloc_error(layout));
        Self { ptr, layout }
    }

    fn len(&self) -> usize {
        self.layout.size()
    }

    fn addr(&self, offset: usize) -> u64 {
        assert!(offset <= self.len(), "offset {offset} past a DMA buffer");
        self.ptr.as_ptr() as u64 + offset as u64
    }

    /// Copies `data` to `offset`.
    ///
    /// # Safety
    /// The range must lie in the buffer and no posted work request may use it.
    unsafe fn write(&self, offset: usize, data: &[u8]) {
        assert!(offset + data.len() <= self.len(), "write past a DMA buffer");
        // SAFETY: in bounds (asserted); the caller owns the range, so
        // nothing else writes it meanwhile; `data` cannot overlap it.
        unsafe {
            ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.as_ptr().add(offset), data.len());
        }
    }

    /// Copies `out.len()` bytes at `offset` into `out`.
    ///
    /// # Safety
    /// The range must lie in the buffer and no posted work request may use it.
    unsafe fn read(&self, offset: usize, out: &mut [u8]) {
        assert!(offset + out.len() <= self.len(), "read past a DMA buffer");
        // SAFETY: as in `write`.
        unsafe {
            ptr::copy_nonoverlapping(self.ptr.as_ptr().add(offset), out.as_mut_ptr(), out.len());
        }
    }
}

impl Drop for DmaBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated in `zeroed` with this layout; every registration
        // of it is dropped before (Staging declares its Mr first).
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

/// Registered local memory of a queue pair.
struct Staging {
    // Declared first: deregistered before the memory is freed.
    mr: Mr,
    buffer: DmaBuffer,
}

impl Staging {
    fn new(device: &Arc<Device>, len: usize) -> io::Result<Self> {
        let buffer = DmaBuffer::zeroed(len);
        // SAFETY: `buffer` is owned by the Staging and freed after `mr`; it
        // is only accessed through raw pointers.
        let mr = unsafe {
            Mr::register(
                device,
                buffer.ptr.as_ptr().cast(),
                buffer.len(),
                ibv_access_flags::IBV_ACCESS_LOCAL_WRITE,
            )
        }?;
        Ok(Self { mr, buffer })
    }

    fn sge(&self, offset: usize, len: usize) -> sys::ibv_sge {
        sys::ibv_sge {
            addr: self.buffer.addr(offset),
            length: u32::try_from(len).expect("staging pieces are at most 64 KiB"),
            lkey: self.mr.lkey(),
        }
    }
}

/// The completion queue shared by all queue pairs of the node.
struct Cq {
    cq: NonNull<sys::ibv_cq>,
    _device: Arc<Device>,
}

// SAFETY: CQs are thread-safe in libibverbs; only the poller polls it.
unsafe impl Send for Cq {}
// SAFETY: as for Send.
unsafe impl Sync for Cq {}

impl Cq {
    fn new(device: &Arc<Device>, entries: usize) -> io::Result<Self> {
        let entries = c_int::try_from(entries)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "too many CQ entries"))?;
        // SAFETY: the context is open; no completion channel is used.
        let cq = unsafe {
            sys::ibv_create_cq(
                device.ctx.0.as_ptr(),
                entries,
                ptr::null_mut(),
                ptr::null_mut(),
                0,
            )
        };
        let cq = NonNull::new(cq).ok_or_else(io::Error::last_os_error)?;
        Ok(Self {
            cq,
            _device: Arc::clone(device),
        })
    }

    /// Moves up to `wcs.len()` work completions into `wcs`; returns how many.
    fn poll(&self, wcs: &mut [ibv_wc]) -> io::Result<usize> {
        let max = c_int::try_from(wcs.len()).unwrap_or(c_int::MAX);
        // SAFETY: the CQ is live; its context pointer and ops table were set
        // by the provider when it was created and never change.
        let poll = unsafe { (*(*self.cq.as_ptr()).context).poll_cq }
            .ok_or_else(|| io::Error::from(io::ErrorKind::Unsupported))?;
        // SAFETY: `wcs` has room for `max` ibv_wc (layout owned by ibverbs-sys).
        let n = unsafe { poll(self.cq.as_ptr(), max, wcs.as_mut_ptr()) };
        usize::try_from(n).map_err(|_| io::Error::other(format!("ibv_poll_cq returned {n}")))
    }
}

impl Drop for Cq {
    fn drop(&mut self) {
        // SAFETY: every QP using this CQ holds an Arc of it, so none is left.
        let ret = unsafe { sys::ibv_destroy_cq(self.cq.as_ptr()) };
        if ret != 0 {
            tracing::warn!(
                "ibv_destroy_cq failed: {}",
                io::Error::from_raw_os_error(ret)
            );
        }
    }
}

/// An RC queue pair.
struct Qp {
    qp: NonNull<sys::ibv_qp>,
    _cq: Arc<Cq>,
    _device: Arc<Device>,
}

// SAFETY: QPs are thread-safe in libibverbs; posting is further serialized
// by the owning Link's lock (sends) or the poller (receives).
unsafe impl Send for Qp {}
// SAFETY: as for Send.
unsafe impl Sync for Qp {}

impl Qp {
    fn create(device: &Arc<Device>, cq: &Arc<Cq>) -> io::Result<Self> {
        let to_u32 = |n: usize| u32::try_from(n).expect("queue depths are small");
        let mut init = sys::ibv_qp_init_attr {
            qp_context: ptr::null_mut(),
            send_cq: cq.cq.as_ptr(),
            recv_cq: cq.cq.as_ptr(),
            srq: ptr::null_mut(),
            cap: sys::ibv_qp_cap {
                max_send_wr: to_u32(device.limits.sq_depth),
                max_recv_wr: to_u32(device.limits.recv_depth),
                max_send_sge: 1,
                max_recv_sge: 1,
                max_inline_data: 0,
            },
            qp_type: ::ibverbs::ibv_qp_type::IBV_QPT_RC,
            sq_sig_all: 0,
        };
        // SAFETY: PD and CQ are live; `init` is a valid ibv_qp_init_attr.
        let qp = unsafe { sys::ibv_create_qp(device.pd.as_ptr(), &mut init) };
        let qp = NonNull::new(qp).ok_or_else(io::Error::last_os_error)?;
        Ok(Self {
            qp,
            _cq: Arc::clone(cq),
            _device: Arc::clone(device),
        })
    }

    fn num(&self) -> u32 {
        // SAFETY: the QP is live; qp_num is set at creation and never changes.
        unsafe { self.qp.as_ref() }.qp_num
    }

    fn modify(&self, attr: &mut sys::ibv_qp_attr, mask: c_int) -> io::Result<()> {
        // SAFETY: the QP is live and `attr` a valid ibv_qp_attr.
        let ret = unsafe { sys::ibv_modify_qp(self.qp.as_ptr(), attr, mask) };
        if ret == 0 {
            Ok(())
        } else {
            Err(io::Error::from_raw_os_error(ret))
        }
    }

    /// Posts `wrs` as one chain, in order (their `next` fields are
    /// overwritten to link them); on failure, returns how many were posted.
    ///
    /// # Safety
    /// Every request's `sg_list` must point to a scatter/gather entry that
    /// is valid for the call and names registered memory no one touches
    /// until the request's completion is polled.
    unsafe fn post_send(&self, wrs: &mut [sys::ibv_send_wr]) -> Result<(), (usize, io::Error)> {
        if wrs.is_empty() {
            return Ok(());
        }
        // SAFETY: the QP is live; its context's ops table never changes.
        let post = unsafe { (*(*self.qp.as_ptr()).context).post_send }
            .ok_or_else(|| (0, io::Error::from(io::ErrorKind::Unsupported)))?;
        let n = wrs.len();
        let first = wrs.as_mut_ptr();
        for i in 0..n {
            let next = if i + 1 < n {
                first.wrapping_add(i + 1)
            } else {
                ptr::null_mut()
            };
            // SAFETY: `i < n`, so `first.add(i)` is an element of `wrs`, which
            // is only accessed through `first` from here on.
            unsafe { (*first.add(i)).next = next };
        }
        let mut bad: *mut sys::ibv_send_wr = ptr::null_mut();
        // SAFETY: the chain is linked in order and ends in NULL; its buffers
        // are registered and reserved, as the caller promises.
        let ret = unsafe { post(self.qp.as_ptr(), first, &mut bad) };
        if ret == 0 {
            return Ok(());
        }
        let posted = (0..n).find(|&i| first.wrapping_add(i) == bad).unwrap_or(0);
        Err((posted, io::Error::from_raw_os_error(ret)))
    }

    /// Posts one receive work request.
    ///
    /// # Safety
    /// The scatter/gather entry must name registered memory that no one
    /// touches until the receive's completion is polled.
    unsafe fn post_recv(&self, wr_id: u64, sge: sys::ibv_sge) -> io::Result<()> {
        let mut sge = sge;
        let mut wr = sys::ibv_recv_wr {
            wr_id,
            next: ptr::null_mut(),
            sg_list: &mut sge,
            num_sge: 1,
        };
        let mut bad: *mut sys::ibv_recv_wr = ptr::null_mut();
        // SAFETY: the QP is live; its context's ops table never changes.
        let post = unsafe { (*(*self.qp.as_ptr()).context).post_recv }
            .ok_or_else(|| io::Error::from(io::ErrorKind::Unsupported))?;
        // SAFETY: `wr` and `sge` are valid for the call (the provider copies
        // them); the buffer is reserved as the caller promises.
        let ret = unsafe { post(self.qp.as_ptr(), &mut wr, &mut bad) };
        if ret == 0 {
            Ok(())
        } else {
            Err(io::Error::from_raw_os_error(ret))
        }
    }
}

impl Drop for Qp {
    fn drop(&mut self) {
        // SAFETY: created by ibv_create_qp and destroyed once; the buffers
        // its work requests name are freed only after this (Link declares
        // its Qp first).
        let ret = unsafe { sys::ibv_destroy_qp(self.qp.as_ptr()) };
        if ret != 0 {
            tracing::warn!(
                "ibv_destroy_qp failed: {}",
                io::Error::from_raw_os_error(ret)
            );
        }
    }
}

// ---------------------------------------------------------------------------
// The key table: how peers learn, with one READ, whether a key is live and
// where its region is.

/// A node's key table: [`KEY_SLOTS`] entries of [`SLOT_WORDS`] words, read
/// by peers, written only by this node. Entry `k % KEY_SLOTS` describes the
/// live region with key `k`: word 0 is `k << 32 | rkey` (0 when free), then
/// the region's length, its address, and 1 while the entry is claimed.
/// Word 0 is published last and cleared first, so a reader that finds its
/// key in word 0 also finds that region's length and address.
struct KeyTable {
    // Declared first: deregistered before the words are freed.
    mr: Mr,
    words: Box<[AtomicU64]>,
}

impl KeyTable {
    fn new(device: &Arc<Device>) -> io::Result<Self> {
        let words: Box<[AtomicU64]> = (0..KEY_SLOTS * SLOT_WORDS)
            .map(|_| AtomicU64::new(0))
            .collect();
        // SAFETY: the words are heap-allocated, never moved, freed after
        // the registration (field order), and are atomics.
        let mr = unsafe {
            Mr::register(
                device,
                words.as_ptr().cast_mut().cast(),
                words.len() * 8,
                ibv_access_flags::IBV_ACCESS_REMOTE_READ,
            )
        }?;
        Ok(Self { mr, words })
    }

    fn addr(&self) -> u64 {
        self.words.as_ptr() as u64
    }

    /// Publishes a region; `None` if its entry is still held by an older one.
    fn claim(&self, key: u32, rkey: u32, len: u64, addr: u64) -> Option<usize> {
        let slot = key as usize % KEY_SLOTS;
        let words = &self.words[slot * SLOT_WORDS..(slot + 1) * SLOT_WORDS];
        words[3]
            .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
            .ok()?;
        words[1].store(len, Ordering::Relaxed);
        words[2].store(addr, Ordering::Relaxed);
        words[0].store(u64::from(key) << 32 | u64::from(rkey), Ordering::Release);
        Some(slot)
    }

    fn release(&self, slot: usize) {
        let words = &self.words[slot * SLOT_WORDS..(slot + 1) * SLOT_WORDS];
        words[0].store(0, Ordering::Release);
        words[3].store(0, Ordering::Release);
    }
}

/// Where a live region of a peer is, as its key table says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Target {
    rkey: u32,
    addr: u64,
    len: u64,
}

impl Target {
    /// Decodes a key-table entry read for `key`.
    fn decode(key: u32, words: [u64; SLOT_WORDS]) -> Option<Target> {
        (words[0] >> 32 == u64::from(key) && words[0] != 0).then(|| Target {
            rkey: u32::try_from(words[0] & LOW_32).expect("masked to 32 bits"),
            len: words[1],
            addr: words[2],
        })
    }
}

/// Keeps a region registered with the NIC and published in the key table,
/// until the region is dropped.
struct Registration {
    table: Arc<KeyTable>,
    slot: usize,
    // Field order: deregistered before the memory can be freed.
    _mr: Mr,
    _memory: Arc<Memory>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        // Unpublished first, so peers that look the key up from now on
        // learn that it is gone; then the fields deregister the memory.
        self.table.release(self.slot);
    }
}

/// The origin-side checks of an access of `len` bytes at `offset`, the same
/// as the target-side checks of the other fabrics (`Registry`), in the same
/// order: range first, then atomic alignment.
fn check_access(
    node: NodeRank,
    key: u32,
    region_len: u64,
    offset: u64,
    len: usize,
    atomic: bool,
) -> std::result::Result<(), VerbError> {
    let in_range = offset
        .checked_add(len as u64)
        .is_some_and(|end| end <= region_len)
        && usize::try_from(offset).is_ok();
    if !in_range {
        return Err(VerbError::OutOfBounds {
            node,
            key,
            offset,
            len: len as u64,
            region_len,
        });
    }
    if atomic && offset % 8 != 0 {
        return Err(VerbError::Misaligned { node, key, offset });
    }
    Ok(())
}

// ---------------------------------------------------------------------------
// Staging allocation.

/// A piece of a staging ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Span {
    start: usize,
    len: usize,
    /// The ring's head before this allocation (to undo it).
    prev_head: usize,
    /// Bytes it took from the ring, including any skipped at the end.
    consumed: usize,
}

/// A ring allocator over a queue pair's staging memory. Pieces are freed in
/// the order they were allocated — the order of the queue pair's
/// completions — so a head and a fill level describe it.
#[derive(Debug)]
struct Ring {
    capacity: usize,
    head: usize,
    used: usize,
}

impl Ring {
    fn new(capacity: usize) -> Self {
        assert!(capacity % STAGING_ALIGN == 0 && capacity > 0);
        Self {
            capacity,
            head: 0,
            used: 0,
        }
    }

    fn tail(&self) -> usize {
        (self.head + self.capacity - self.used) % self.capacity
    }

    /// A piece of at least `len` bytes (at least one alignment unit),
    /// aligned to [`STAGING_ALIGN`]; `None` until enough older pieces are freed.
    fn alloc(&mut self, len: usize) -> Option<Span> {
        let len = len.max(1).next_multiple_of(STAGING_ALIGN);
        if len > self.capacity - self.used {
            return None;
        }
        if self.used == 0 {
            self.head = 0;
        }
        let prev_head = self.head;
        let tail = self.tail();
        let (start, consumed) = if self.head >= tail {
            // Used: [tail, head); free: [head, capacity) and [0, tail).
            if self.capacity - self.head >= len {
                (self.head, len)
            } else if tail >= len {
                (0, self.capacity - self.head + len)
            } else {
                return None;
            }
        } else if tail - self.head >= len {
            (self.head, len)
        } else {
            return None;
        };
        self.head = (start + len) % self.capacity;
        self.used += consumed;
        Some(Span {
            start,
            len,
            prev_head,
            consumed,
        })
    }

    /// Frees the oldest piece.
    fn free(&mut self, span: Span) {
        let tail = self.tail();
        assert!(
            span.start == tail || (span.start == 0 && span.consumed > span.len),
            "staging freed out of order: {span:?} while the oldest starts at {tail}"
        );
        self.used -= span.consumed;
    }

    /// Takes back the newest piece.
    fn unalloc(&mut self, span: Span) {
        assert_eq!(
            self.head,
            (span.start + span.len) % self.capacity,
            "staging taken back out of order"
        );
        self.head = span.prev_head;
        self.used -= span.consumed;
    }
}

// ---------------------------------------------------------------------------
// Links: one queue pair to one node, and the requests on it.

/// One RC queue pair to one node (possibly this one) and the requests on it.
struct Link {
    // Declared first: destroyed before the buffers its requests name.
    qp: Qp,
    peer: NodeRank,
    staging: Staging,
    recv: Staging,
    state: Mutex<LinkState>,
}

/// What a posted work request was for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WrKind {
    Read,
    Write,
    Atomic,
    Send,
    /// A READ of the peer's key-table entry for this key.
    Lookup(u32),
}

/// A work request at the NIC, in posting order.
#[derive(Debug)]
struct InFlight {
    seq: u64,
    /// The entry it belongs to (`None` for a key lookup).
    entry: Option<u64>,
    kind: WrKind,
    span: Span,
    /// Where its bytes go in the entry's READ data.
    offset: usize,
    len: usize,
}

/// A request from an application queue, from posting until its completion
/// is released.
#[derive(Debug)]
struct Entry {
    id: u64,
    cq: Arc<CompletionQueue>,
    wr_id: u64,
    op: Op,
    target: Option<Target>,
    /// Bytes handed to the NIC so far (READ/WRITE).
    posted: usize,
    /// Nothing more to hand to the NIC.
    posted_all: bool,
    wrs_in_flight: usize,
    data: Vec<u8>,
    value: u64,
    result: Option<std::result::Result<Output, VerbError>>,
}

impl Entry {
    fn fail(&mut self, error: VerbError) {
        self.result.get_or_insert(Err(error));
        self.posted_all = true;
    }

    fn finish(&mut self, output: Output) {
        self.result.get_or_insert(Ok(output));
        self.posted_all = true;
    }

    fn output(&mut self) -> Output {
        match &mut self.op {
            Op::Read { .. } => Output::Data(std::mem::take(&mut self.data)),
            Op::CompareSwap { .. } | Op::FetchAdd { .. } => Output::Value(self.value),
            Op::Write { data, .. } => Output::Written(std::mem::take(data)),
            Op::Send { .. } => Output::Done,
            Op::Recv { .. } => unreachable!("receives never enter a link"),
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum Lookup {
    Idle,
    InFlight,
    /// The answer for `key`, until the next pump has used it.
    Answered {
        key: u32,
        target: Option<Target>,
    },
}

/// The NIC side of a link.
#[derive(Debug)]
struct Nic {
    in_flight: VecDeque<InFlight>,
    ring: Ring,
    next_seq: u64,
    reads: usize,
    atomics: usize,
    lookup: Lookup,
    sq_depth: usize,
}

/// A work request to post, before it is laid out for libibverbs.
#[derive(Debug, Clone, Copy)]
struct PendingWr {
    wr_id: u64,
    opcode: c_uint,
    flags: c_uint,
    sge: sys::ibv_sge,
    remote_addr: u64,
    rkey: u32,
    compare_add: u64,
    swap: u64,
}

/// A work request to record and post.
#[derive(Debug, Clone, Copy)]
struct WrSpec {
    kind: WrKind,
    opcode: c_uint,
    entry: Option<u64>,
    span: Span,
    offset: usize,
    len: usize,
    remote_addr: u64,
    rkey: u32,
    compare_add: u64,
    swap: u64,
}

impl WrSpec {
    fn local(kind: WrKind, opcode: c_uint, entry: Option<u64>, span: Span, len: usize) -> Self {
        Self {
            kind,
            opcode,
            entry,
            span,
            offset: 0,
            len,
            remote_addr: 0,
            rkey: 0,
            compare_add: 0,
            swap: 0,
        }
    }
}

impl Nic {
    fn new(sq_depth: usize) -> Self {
        Self {
            in_flight: VecDeque::new(),
            ring: Ring::new(STAGING_BYTES),
            next_seq: 0,
            reads: 0,
            atomics: 0,
            lookup: Lookup::Idle,
            sq_depth,
        }
    }

    /// Staging for a request of `len` bytes and a slot in the send queue.
    fn reserve(&mut self, len: usize) -> Option<Span> {
        if self.in_flight.len() >= self.sq_depth {
            return None;
        }
        self.ring.alloc(len)
    }

    /// Records a work request and queues it for posting, fenced behind the
    /// outstanding READs and atomics it must not pass: a READ behind
    /// atomics, anything else behind both. Key lookups need no fence.
    fn push(
        &mut self,
        link: NodeRank,
        staging: &Staging,
        pending: &mut Vec<PendingWr>,
        wr: WrSpec,
    ) {
        let fence = match wr.kind {
            WrKind::Read => self.atomics > 0,
            WrKind::Lookup(_) => false,
            WrKind::Write | WrKind::Send | WrKind::Atomic => self.reads + self.atomics > 0,
        };
        match wr.kind {
            WrKind::Read => self.reads += 1,
            WrKind::Atomic => self.atomics += 1,
            WrKind::Write | WrKind::Send | WrKind::Lookup(_) => {}
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.in_flight.push_back(InFlight {
            seq,
            entry: wr.entry,
            kind: wr.kind,
            span: wr.span,
            offset: wr.offset,
            len: wr.len,
        });
        let mut flags = sys::IBV_SEND_SIGNALED;
        if fence {
            flags |= sys::IBV_SEND_FENCE;
        }
        pending.push(PendingWr {
            wr_id: wr_id(false, link, seq),
            opcode: wr.opcode,
            flags,
            sge: staging.sge(wr.span.start, wr.len),
            remote_addr: wr.remote_addr,
            rkey: wr.rkey,
            compare_add: wr.compare_add,
            swap: wr.swap,
        });
    }

    /// A work request of `kind` left the NIC.
    fn retire(&mut self, kind: WrKind) {
        match kind {
            WrKind::Read => self.reads -= 1,
            WrKind::Atomic => self.atomics -= 1,
            WrKind::Write | WrKind::Send | WrKind::Lookup(_) => {}
        }
    }
}

/// The requests of a link. Invariants: `entries` are in posted order with
/// consecutive ids; those before `next_unposted` need nothing more from the
/// NIC beyond their `wrs_in_flight`; `nic.in_flight` holds one record per
/// work request at the NIC, in posting order (the order RC completes them).
#[derive(Debug)]
struct LinkState {
    entries: VecDeque<Entry>,
    next_id: u64,
    next_unposted: usize,
    nic: Nic,
    /// Set when the queue pair failed: what every later request completes with.
    broken: Option<VerbError>,
}

impl LinkState {
    fn index_of(&self, id: u64) -> usize {
        let first = self.entries.front().map_or(id, |entry| entry.id);
        let index = usize::try_from(id - first).expect("entry ids are dense");
        assert_eq!(self.entries[index].id, id, "entry ids are consecutive");
        index
    }

    fn entry_mut(&mut self, id: u64) -> &mut Entry {
        let index = self.index_of(id);
        &mut self.entries[index]
    }

    fn break_with(&mut self, error: VerbError) {
        self.broken.get_or_insert(error);
    }

    /// Hands finished requests at the front to their queues, in posted order.
    fn release(&mut self, peer: NodeRank) {
        while self.next_unposted > 0
            && self.entries.front().is_some_and(|entry| {
                entry.posted_all && entry.wrs_in_flight == 0 && entry.result.is_some()
            })
        {
            let entry = self.entries.pop_front().expect("checked to exist");
            self.next_unposted -= 1;
            let result = entry.result.expect("checked to be set");
            entry
                .cq
                .push(Completion::new(entry.wr_id, entry.op.verb(), peer, result));
        }
    }

    /// Forgets the newest `count` recorded work requests, which never reached the NIC.
    fn rollback(&mut self, count: usize) {
        for _ in 0..count {
            let wr = self
                .nic
                .in_flight
                .pop_back()
                .expect("rolled-back requests were recorded");
            self.nic.retire(wr.kind);
            self.nic.ring.unalloc(wr.span);
            self.nic.next_seq -= 1;
            match wr.entry {
                None => self.nic.lookup = Lookup::Idle,
                Some(id) => {
                    let index = self.index_of(id);
                    let entry = &mut self.entries[index];
                    entry.wrs_in_flight -= 1;
                    if matches!(wr.kind, WrKind::Read | WrKind::Write) {
                        entry.posted -= wr.len;
                    }
                    entry.posted_all = false;
                    self.next_unposted = self.next_unposted.min(index);
                }
            }
        }
    }
}

/// How a key resolved.
enum Resolved {
    Found(Target),
    Unknown,
    /// A lookup is on its way (or waits for room to be posted).
    Pending,
}

impl Link {
    fn new(device: &Arc<Device>, cq: &Arc<Cq>, peer: NodeRank) -> Result<Self> {
        let io_error = |what: &str| {
            let what = format!("failed to {what} for node {peer}");
            move |source| Error::Io { what, source }
        };
        let qp = Qp::create(device, cq).map_err(io_error("create a queue pair"))?;
        let staging =
            Staging::new(device, STAGING_BYTES).map_err(io_error("register staging memory"))?;
        let recv = Staging::new(device, device.limits.recv_depth * MESSAGE_MAX)
            .map_err(io_error("register receive buffers"))?;
        let access = ibv_access_flags::IBV_ACCESS_LOCAL_WRITE
            | ibv_access_flags::IBV_ACCESS_REMOTE_READ
            | ibv_access_flags::IBV_ACCESS_REMOTE_WRITE
            | ibv_access_flags::IBV_ACCESS_REMOTE_ATOMIC;
        let mut init = sys::ibv_qp_attr {
            qp_state: sys::IBV_QPS_INIT,
            pkey_index: 0,
            port_num: PORT,
            qp_access_flags: access.0,
            ..Default::default()
        };
        qp.modify(
            &mut init,
            sys::IBV_QP_STATE
                | sys::IBV_QP_PKEY_INDEX
                | sys::IBV_QP_PORT
                | sys::IBV_QP_ACCESS_FLAGS,
        )
        .map_err(io_error("initialize the queue pair"))?;
        let link = Link {
            qp,
            peer,
            staging,
            recv,
            state: Mutex::new(LinkState {
                entries: VecDeque::new(),
                next_id: 0,
                next_unposted: 0,
                nic: Nic::new(device.limits.sq_depth),
                broken: None,
            }),
        };
        for slot in 0..device.limits.recv_depth {
            link.post_recv_slot(slot)
                .map_err(io_error("post receive buffers"))?;
        }
        Ok(link)
    }

    /// Hands receive buffer `slot` to the NIC.
    fn post_recv_slot(&self, slot: usize) -> io::Result<()> {
        let wr_id = wr_id(true, self.peer, slot as u64);
        let sge = self.recv.sge(slot * MESSAGE_MAX, MESSAGE_MAX);
        // SAFETY: the slot lies in the registered receive buffer, and it
        // belongs to the NIC from now on: the poller reads it only after its
        // completion, and reposts it only after reading.
        unsafe { self.qp.post_recv(wr_id, sge) }
    }

    /// Moves the queue pair to ready-to-send, connected to `remote`'s queue
    /// pair for this node.
    fn connect(
        &self,
        device: &Device,
        rank: NodeRank,
        psn: u32,
        remote: &Endpoint,
    ) -> io::Result<()> {
        let mut ah_attr = sys::ibv_ah_attr {
            dlid: remote.lid,
            port_num: PORT,
            ..Default::default()
        };
        if remote.global || device.port.gid.is_some() {
            let (sgid_index, _) = device.port.gid.ok_or_else(|| {
                io::Error::other(format!(
                    "node {} routes with GIDs but this node has none; set QUIVER_IBV_GID_INDEX",
                    self.peer
                ))
            })?;
            ah_attr.is_global = 1;
            ah_attr.grh = sys::ibv_global_route {
                dgid: sys::ibv_gid { raw: remote.gid },
                flow_label: 0,
                sgid_index,
                hop_limit: 0xff,
                traffic_class: 0,
            };
        }
        let rd_atomic = device.limits.rd_atomic.min(remote.rd_atomic).max(1);
        let mut rtr = sys::ibv_qp_attr {
            qp_state: sys::IBV_QPS_RTR,
            path_mtu: device.port.active_mtu.min(remote.mtu),
            dest_qp_num: remote.qpns[rank.index()],
            rq_psn: remote.psns[rank.index()],
            max_dest_rd_atomic: rd_atomic,
            min_rnr_timer: MIN_RNR_TIMER,
            ah_attr,
            ..Default::default()
        };
        self.qp.modify(
            &mut rtr,
            sys::IBV_QP_STATE
                | sys::IBV_QP_AV
                | sys::IBV_QP_PATH_MTU
                | sys::IBV_QP_DEST_QPN
                | sys::IBV_QP_RQ_PSN
                | sys::IBV_QP_MAX_DEST_RD_ATOMIC
                | sys::IBV_QP_MIN_RNR_TIMER,
        )?;
        let mut rts = sys::ibv_qp_attr {
            qp_state: sys::IBV_QPS_RTS,
            sq_psn: psn,
            timeout: ACK_TIMEOUT,
            retry_cnt: RETRY_COUNT,
            rnr_retry: RNR_RETRY,
            max_rd_atomic: rd_atomic,
            ..Default::default()
        };
        self.qp.modify(
            &mut rts,
            sys::IBV_QP_STATE
                | sys::IBV_QP_SQ_PSN
                | sys::IBV_QP_TIMEOUT
                | sys::IBV_QP_RETRY_CNT
                | sys::IBV_QP_RNR_RETRY
                | sys::IBV_QP_MAX_QP_RD_ATOMIC,
        )
    }

    /// Posts `pending` as one chain (one doorbell); on failure, how many
    /// made it.
    fn post(&self, pending: &[PendingWr]) -> Result<(), (usize, io::Error)> {
        let mut sges: Vec<sys::ibv_sge> = pending.iter().map(|wr| wr.sge).collect();
        let sge_base = sges.as_mut_ptr();
        let mut wrs: Vec<sys::ibv_send_wr> = pending
            .iter()
            .enumerate()
            .map(|(i, wr)| {
                let atomic = wr.opcode == sys::IBV_WR_ATOMIC_CMP_AND_SWP
                    || wr.opcode == sys::IBV_WR_ATOMIC_FETCH_AND_ADD;
                sys::ibv_send_wr {
                    wr_id: wr.wr_id,
                    next: ptr::null_mut(),
                    sg_list: sge_base.wrapping_add(i),
                    num_sge: c_int::from(wr.sge.length > 0),
                    opcode: wr.opcode,
                    send_flags: wr.flags,
                    imm_data: 0,
                    wr: if atomic {
                        sys::WrUnion {
                            atomic: sys::WrAtomic {
                                remote_addr: wr.remote_addr,
                                compare_add: wr.compare_add,
                                swap: wr.swap,
                                rkey: wr.rkey,
                                _pad: 0,
                            },
                        }
                    } else {
                        sys::WrUnion {
                            rdma: sys::WrRdma {
                                remote_addr: wr.remote_addr,
                                rkey: wr.rkey,
                                _pad: 0,
                                _unused: [0; 2],
                            },
                        }
                    },
                    qp_type: 0,
                    _pad: 0,
                    _tail: [0; 6],
                }
            })
            .collect();
        // SAFETY: each request's scatter/gather entry is in `sges`, alive
        // for the call, naming staging memory that `Nic::reserve` set aside
        // for this request until its completion is polled (or the link and
        // its QP are gone).
        let result = unsafe { self.qp.post_send(&mut wrs) };
        drop(sges);
        result
    }
}

// ---------------------------------------------------------------------------
// The fabric.

/// A node's verbs resources, shared by its application threads and its
/// completion poller.
struct Shared {
    // Declared first: queue pairs go before anything they use.
    links: Vec<Link>,
    rank: NodeRank,
    registry: Arc<Registry>,
    mailbox: Mailbox,
    key_table: Arc<KeyTable>,
    /// Every node's key table: address and rkey, by rank.
    remote_tables: Vec<(u64, u32)>,
    /// Regions of peers this node looked up: (rank, key) → where it is.
    targets: RwLock<HashMap<(u32, u32), Target>>,
    stop: AtomicBool,
    cq: Arc<Cq>,
    device: Arc<Device>,
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared")
            .field("rank", &self.rank)
            .field("nodes", &self.links.len())
            .field("device", &self.device)
            .finish_non_exhaustive()
    }
}

impl Shared {
    fn register(&self, len: usize) -> Result<Region> {
        let mut region = self.registry.register(self.rank, len);
        let key = region.remote().key;
        let memory = Arc::clone(region.memory());
        let access = ibv_access_flags::IBV_ACCESS_LOCAL_WRITE
            | ibv_access_flags::IBV_ACCESS_REMOTE_READ
            | ibv_access_flags::IBV_ACCESS_REMOTE_WRITE
            | ibv_access_flags::IBV_ACCESS_REMOTE_ATOMIC;
        // SAFETY: the region's words are heap-allocated atomics that never
        // move; the Registration holds an Arc of them and drops it only
        // after the Mr (field order), so they outlive the registration.
        let mr = unsafe {
            Mr::register(
                &self.device,
                memory.as_ptr().cast_mut().cast(),
                len.div_ceil(8) * 8,
                access,
            )
        }
        .map_err(|source| Error::Io {
            what: format!(
                "failed to register memory region of {len} bytes with {}",
                self.device.name
            ),
            source,
        })?;
        let addr = memory.as_ptr() as u64;
        let slot = self
            .key_table
            .claim(key, mr.rkey(), len as u64, addr)
            .ok_or_else(|| Error::Io {
                what: format!(
                    "cannot publish region {key}: its key-table entry is still held by the \
                     region registered {KEY_SLOTS} keys earlier"
                ),
                source: io::Error::new(io::ErrorKind::OutOfMemory, "key table full"),
            })?;
        region.attach_registration(
            Box::new(Registration {
                table: Arc::clone(&self.key_table),
                slot,
                _mr: mr,
                _memory: memory,
            }),
            addr,
        );
        Ok(region)
    }

    fn post(&self, cq: &Arc<CompletionQueue>, wrs: Vec<WorkRequest>) {
        let mut by_link: BTreeMap<usize, Vec<(u64, Op)>> = BTreeMap::new();
        for WorkRequest { wr_id, op } in wrs {
            match (op.target(), op) {
                (None, Op::Recv { capacity }) => self.mailbox.post(wr_id, capacity, cq),
                (None, op) => unreachable!("{op:?} has no target"),
                (Some(target), op) => by_link.entry(target.index()).or_default().push((wr_id, op)),
            }
        }
        for (index, requests) in by_link {
            let link = &self.links[index];
            let mut state = lock(&link.state);
            for (wr_id, op) in requests {
                let id = state.next_id;
                state.next_id += 1;
                state.entries.push_back(Entry {
                    id,
                    cq: Arc::clone(cq),
                    wr_id,
                    op,
                    target: None,
                    posted: 0,
                    posted_all: false,
                    wrs_in_flight: 0,
                    data: Vec::new(),
                    value: 0,
                    result: None,
                });
            }
            self.pump(link, &mut state);
        }
    }

    /// Hands the link's waiting requests to the NIC as far as room and key
    /// lookups allow, then releases finished completions.
    fn pump(&self, link: &Link, state: &mut LinkState) {
        let mut pending = Vec::new();
        self.fill(link, state, &mut pending);
        if let Err((posted, err)) = link.post(&pending) {
            state.rollback(pending.len() - posted);
            state.break_with(VerbError::Fabric(format!(
                "posting to the queue pair of node {} failed: {err}",
                link.peer
            )));
            pending.clear();
            self.fill(link, state, &mut pending);
            assert!(pending.is_empty(), "a broken link posts nothing");
        }
        if matches!(state.nic.lookup, Lookup::Answered { .. }) {
            state.nic.lookup = Lookup::Idle;
        }
        state.release(link.peer);
    }

    fn fill(&self, link: &Link, state: &mut LinkState, pending: &mut Vec<PendingWr>) {
        while state.next_unposted < state.entries.len() {
            let index = state.next_unposted;
            if let Some(error) = &state.broken {
                let error = error.clone();
                state.entries[index].fail(error);
            } else if !self.step(link, state, index, pending) {
                break;
            }
            state.next_unposted += 1;
        }
    }

    /// Moves one request forward; `false` if it must wait (for a key
    /// lookup, send-queue room or staging memory).
    fn step(
        &self,
        link: &Link,
        state: &mut LinkState,
        index: usize,
        pending: &mut Vec<PendingWr>,
    ) -> bool {
        let peer = link.peer;
        let LinkState { entries, nic, .. } = state;
        let entry = &mut entries[index];
        let (key, offset, len, atomic) = match &entry.op {
            Op::Send { data, .. } => {
                if data.len() > MESSAGE_MAX {
                    let error = VerbError::Fabric(format!(
                        "a message of {} bytes exceeds the ibverbs fabric's limit of {MESSAGE_MAX} bytes",
                        data.len()
                    ));
                    entry.fail(error);
                    return true;
                }
                let Some(span) = nic.reserve(data.len()) else {
                    return false;
                };
                // SAFETY: `span` was just reserved, so no posted request uses it.
                unsafe { link.staging.buffer.write(span.start, data) };
                let wr = WrSpec::local(
                    WrKind::Send,
                    sys::IBV_WR_SEND,
                    Some(entry.id),
                    span,
                    data.len(),
                );
                nic.push(peer, &link.staging, pending, wr);
                entry.wrs_in_flight += 1;
                entry.posted_all = true;
                return true;
            }
            Op::Read {
                remote,
                offset,
                len,
            } => (remote.key, *offset, *len, false),
            Op::Write {
                remote,
                offset,
                data,
            } => (remote.key, *offset, data.len(), false),
            Op::CompareSwap { remote, offset, .. } | Op::FetchAdd { remote, offset, .. } => {
                (remote.key, *offset, 8, true)
            }
            Op::Recv { .. } => unreachable!("receives never enter a link"),
        };
        let target = match entry.target {
            Some(target) => target,
            None => match self.resolve(link, nic, key, pending) {
                Resolved::Pending => return false,
                Resolved::Unknown => {
                    entry.fail(VerbError::UnknownKey { node: peer, key });
                    return true;
                }
                Resolved::Found(target) => {
                    if let Err(error) = check_access(peer, key, target.len, offset, len, atomic) {
                        entry.fail(error);
                        return true;
                    }
                    if len == 0 {
                        let output = entry.output();
                        entry.finish(output);
                        return true;
                    }
                    if let Op::Read { .. } = entry.op {
                        entry.data = vec![0; len];
                    }
                    entry.target = Some(target);
                    target
                }
            },
        };
        let remote_addr = target.addr + offset;
        let (kind, opcode, compare_add, swap) = match &entry.op {
            Op::Read { .. } => (WrKind::Read, sys::IBV_WR_RDMA_READ, 0, 0),
            Op::Write { .. } => (WrKind::Write, sys::IBV_WR_RDMA_WRITE, 0, 0),
            Op::CompareSwap { expected, new, .. } => (
                WrKind::Atomic,
                sys::IBV_WR_ATOMIC_CMP_AND_SWP,
                *expected,
                *new,
            ),
            Op::FetchAdd { add, .. } => (WrKind::Atomic, sys::IBV_WR_ATOMIC_FETCH_AND_ADD, *add, 0),
            Op::Send { .. } | Op::Recv { .. } => unreachable!("handled above"),
        };
        while entry.posted < len {
            let piece = (len - entry.posted).min(SEGMENT_MAX);
            let Some(span) = nic.reserve(piece) else {
                return false;
            };
            if let Op::Write { data, .. } = &entry.op {
                // SAFETY: `span` was just reserved, so no posted request uses it.
                unsafe {
                    link.staging
                        .buffer
                        .write(span.start, &data[entry.posted..entry.posted + piece]);
                }
            }
            let wr = WrSpec {
                kind,
                opcode,
                entry: Some(entry.id),
                span,
                offset: entry.posted,
                len: piece,
                remote_addr: remote_addr + entry.posted as u64,
                rkey: target.rkey,
                compare_add,
                swap,
            };
            nic.push(peer, &link.staging, pending, wr);
            entry.wrs_in_flight += 1;
            entry.posted += piece;
        }
        entry.posted_all = true;
        true
    }

    /// Where `key` of the link's peer is: from the cache, from a lookup
    /// that just came back, or after a lookup this posts.
    fn resolve(
        &self,
        link: &Link,
        nic: &mut Nic,
        key: u32,
        pending: &mut Vec<PendingWr>,
    ) -> Resolved {
        let cached = self
            .targets
            .read()
            .unwrap_or_else(|poison| poison.into_inner())
            .get(&(link.peer.0, key))
            .copied();
        if let Some(target) = cached {
            return Resolved::Found(target);
        }
        match nic.lookup {
            Lookup::Answered {
                key: answered,
                target,
            } if answered == key => {
                return target.map_or(Resolved::Unknown, Resolved::Found);
            }
            Lookup::InFlight => return Resolved::Pending,
            Lookup::Idle | Lookup::Answered { .. } => {}
        }
        let Some(span) = nic.reserve(SLOT_BYTES) else {
            return Resolved::Pending;
        };
        let (table, table_rkey) = self.remote_tables[link.peer.index()];
        let slot = key as usize % KEY_SLOTS;
        let wr = WrSpec {
            remote_addr: table + (slot * SLOT_BYTES) as u64,
            rkey: table_rkey,
            ..WrSpec::local(
                WrKind::Lookup(key),
                sys::IBV_WR_RDMA_READ,
                None,
                span,
                SLOT_BYTES,
            )
        };
        nic.push(link.peer, &link.staging, pending, wr);
        nic.lookup = Lookup::InFlight;
        Resolved::Pending
    }

    /// Routes one work completion.
    fn dispatch(&self, wc: &ibv_wc) {
        let id = wc.wr_id();
        let (recv, index, low) = split_wr_id(id);
        let Some(link) = self.links.get(index) else {
            tracing::error!("ibverbs: completion for unknown work request {id:#x}");
            return;
        };
        if recv {
            let slot = usize::try_from(low).expect("32 bits fit in a usize");
            self.on_receive(link, slot, wc);
        } else {
            self.on_send_completion(link, wc);
        }
    }

    fn on_send_completion(&self, link: &Link, wc: &ibv_wc) {
        let mut guard = lock(&link.state);
        let state = &mut *guard;
        let wr = state
            .nic
            .in_flight
            .pop_front()
            .expect("a send completion belongs to a recorded work request");
        assert_eq!(
            wr.seq & LOW_32,
            wc.wr_id() & LOW_32,
            "RC send completions arrive in posting order"
        );
        state.nic.retire(wr.kind);
        let failed = wc.error();
        if failed.is_none() {
            match wr.kind {
                WrKind::Lookup(key) => {
                    let mut bytes = [0u8; SLOT_BYTES];
                    // SAFETY: the lookup completed, so its staging is ours until freed below.
                    unsafe { link.staging.buffer.read(wr.span.start, &mut bytes) };
                    let mut words = [0u64; SLOT_WORDS];
                    for (word, chunk) in words.iter_mut().zip(bytes.chunks_exact(8)) {
                        *word = u64::from_ne_bytes(chunk.try_into().expect("chunks of 8"));
                    }
                    let target = Target::decode(key, words);
                    if let Some(target) = target {
                        self.targets
                            .write()
                            .unwrap_or_else(|poison| poison.into_inner())
                            .insert((link.peer.0, key), target);
                    }
                    state.nic.lookup = Lookup::Answered { key, target };
                }
                WrKind::Read => {
                    let entry = state.entry_mut(wr.entry.expect("a READ belongs to an entry"));
                    let out = &mut entry.data[wr.offset..wr.offset + wr.len];
                    // SAFETY: the READ completed, so its staging is ours until freed below.
                    unsafe { link.staging.buffer.read(wr.span.start, out) };
                }
                WrKind::Atomic => {
                    let mut bytes = [0u8; 8];
                    // SAFETY: as for a READ. The NIC wrote the word's previous
                    // value there in host byte order.
                    unsafe { link.staging.buffer.read(wr.span.start, &mut bytes) };
                    state
                        .entry_mut(wr.entry.expect("an atomic belongs to an entry"))
                        .value = u64::from_ne_bytes(bytes);
                }
                WrKind::Write | WrKind::Send => {}
            }
        }
        state.nic.ring.free(wr.span);
        if let Some((status, vendor)) = failed {
            if let WrKind::Lookup(_) = wr.kind {
                state.nic.lookup = Lookup::Idle;
            }
            let key = wr.entry.and_then(|id| {
                let index = state.index_of(id);
                match &state.entries[index].op {
                    Op::Read { remote, .. }
                    | Op::Write { remote, .. }
                    | Op::CompareSwap { remote, .. }
                    | Op::FetchAdd { remote, .. } => Some(remote.key),
                    Op::Send { .. } | Op::Recv { .. } => None,
                }
            });
            let error = completion_error(link.peer, key, status, vendor, state.broken.as_ref());
            state.break_with(broken_by(link.peer, &error));
            if let Some(id) = wr.entry {
                state.entry_mut(id).result.get_or_insert(Err(error));
            }
        }
        if let Some(id) = wr.entry {
            let entry = state.entry_mut(id);
            entry.wrs_in_flight -= 1;
            if entry.posted_all && entry.wrs_in_flight == 0 && entry.result.is_none() {
                let output = entry.output();
                entry.result = Some(Ok(output));
            }
        }
        self.pump(link, state);
    }

    fn on_receive(&self, link: &Link, slot: usize, wc: &ibv_wc) {
        if let Some((status, _)) = wc.error() {
            let reason = if status == ibv_wc_status::IBV_WC_WR_FLUSH_ERR {
                "its queue pair was flushed".to_string()
            } else {
                format!("a receive failed with {}", status_text(status))
            };
            let mut state = lock(&link.state);
            state.break_with(VerbError::PeerLost {
                node: link.peer,
                reason,
            });
            self.pump(link, &mut state);
            return;
        }
        let len = wc.len();
        assert!(len <= MESSAGE_MAX, "a receive is at most one buffer");
        let mut data = vec![0; len];
        // SAFETY: the NIC completed this receive, so the slot is ours until
        // it is reposted just below.
        unsafe { link.recv.buffer.read(slot * MESSAGE_MAX, &mut data) };
        if let Err(err) = link.post_recv_slot(slot) {
            let mut state = lock(&link.state);
            state.break_with(VerbError::Fabric(format!(
                "reposting a receive buffer for node {} failed: {err}",
                link.peer
            )));
            self.pump(link, &mut state);
        }
        self.mailbox.deliver(link.peer, data, 0);
    }

    /// The completion queue failed: nothing will complete any more, so every
    /// request fails now. Staging stays reserved (the NIC may still write it).
    fn fail_all(&self, reason: &str) {
        for link in &self.links {
            let mut guard = lock(&link.state);
            let state = &mut *guard;
            state.break_with(VerbError::Fabric(reason.to_string()));
            let error = state.broken.clone().expect("just set");
            for wr in std::mem::take(&mut state.nic.in_flight) {
                if let Some(id) = wr.entry {
                    let entry = state.entry_mut(id);
                    entry.wrs_in_flight -= 1;
                    entry.fail(error.clone());
                }
            }
            self.pump(link, state);
        }
    }
}

/// The error a failed work request completes with.
fn completion_error(
    peer: NodeRank,
    key: Option<u32>,
    status: c_uint,
    vendor: u32,
    broken: Option<&VerbError>,
) -> VerbError {
    match (status, key) {
        (ibv_wc_status::IBV_WC_WR_FLUSH_ERR, _) => {
            broken.cloned().unwrap_or_else(|| VerbError::PeerLost {
                node: peer,
                reason: "its queue pair was flushed".into(),
            })
        }
        // The key was live when looked up: its owner dropped the region since.
        (ibv_wc_status::IBV_WC_REM_ACCESS_ERR, Some(key)) => {
            VerbError::UnknownKey { node: peer, key }
        }
        (ibv_wc_status::IBV_WC_RETRY_EXC_ERR | ibv_wc_status::IBV_WC_RNR_RETRY_EXC_ERR, _) => {
            VerbError::PeerLost {
                node: peer,
                reason: format!("it stopped responding ({})", status_text(status)),
            }
        }
        _ => VerbError::Fabric(format!(
            "{} (status {status}, vendor error {vendor:#x})",
            status_text(status)
        )),
    }
}

/// What the requests after `error` complete with: the queue pair is in the
/// error state, so the connection to the peer is over.
fn broken_by(peer: NodeRank, error: &VerbError) -> VerbError {
    match error {
        VerbError::PeerLost { .. } => error.clone(),
        other => VerbError::PeerLost {
            node: peer,
            reason: format!("the connection to it ended when an earlier request failed: {other}"),
        },
    }
}

/// The poller: drains the completion queue until the fabric is dropped,
/// spinning briefly and then sleeping when idle.
fn poll_loop(shared: &Shared) {
    let mut wcs = vec![ibv_wc::default(); 64];
    let mut idle = 0u32;
    while !shared.stop.load(Ordering::Acquire) {
        match shared.cq.poll(&mut wcs) {
            Ok(0) => {
                idle = idle.saturating_add(1);
                if idle < 64 {
                    std::thread::yield_now();
                } else if idle < 1024 {
                    std::thread::sleep(Duration::from_micros(20));
                } else {
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
            Ok(n) => {
                idle = 0;
                for wc in &wcs[..n] {
                    shared.dispatch(wc);
                }
            }
            Err(err) => {
                let reason = format!("polling the completion queue failed: {err}");
                tracing::error!("ibverbs: {reason}");
                shared.fail_all(&reason);
                return;
            }
        }
    }
}

/// The `ibverbs` fabric of one node.
struct Ibverbs {
    shared: Arc<Shared>,
    exchange: Exchange,
    poller: Option<JoinHandle<()>>,
}

impl fmt::Debug for Ibverbs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ibverbs")
            .field("shared", &self.shared)
            .finish_non_exhaustive()
    }
}

impl Fabric for Ibverbs {
    fn register(&self, len: usize) -> Result<Region> {
        self.shared.register(len)
    }

    fn post(&self, cq: &Arc<CompletionQueue>, _now_ns: u64, wrs: Vec<WorkRequest>) {
        self.shared.post(cq, wrs);
    }

    fn all_gather(&self, data: Vec<u8>) -> Result<Vec<Vec<u8>>> {
        let all = (self.exchange)(data)?;
        if all.len() != self.shared.links.len() {
            return Err(Error::Bootstrap(format!(
                "the exchange returned {} contributions for {} nodes",
                all.len(),
                self.shared.links.len()
            )));
        }
        Ok(all)
    }
}

impl Drop for Ibverbs {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        if let Some(poller) = self.poller.take() {
            if poller.join().is_err() {
                tracing::error!("ibverbs: the completion poller panicked");
            }
        }
    }
}

// ---------------------------------------------------------------------------
// The verbs used, as declared in <infiniband/verbs.h>.

/// Declarations of the libibverbs ABI used here. Structs the library
/// allocates are declared up to the last field read (never allocated here);
/// structs passed in are declared whole. Sizes and offsets are asserted
/// against the header (rdma-core, `IBVERBS_1.1`, x86-64 and aarch64 alike).
#[allow(non_camel_case_types)]
mod sys {
    use std::ffi::{c_char, c_int, c_uint, c_void};
    use std::mem::{align_of, offset_of, size_of};

    pub(super) use ::ibverbs::ibv_wc;

    /// An opaque device.
    #[repr(C)]
    pub(super) struct ibv_device {
        _opaque: [u8; 0],
    }

    /// An opaque protection domain.
    #[repr(C)]
    pub(super) struct ibv_pd {
        _opaque: [u8; 0],
    }

    type PollCq = unsafe extern "C" fn(*mut ibv_cq, c_int, *mut ibv_wc) -> c_int;
    type PostSend =
        unsafe extern "C" fn(*mut ibv_qp, *mut ibv_send_wr, *mut *mut ibv_send_wr) -> c_int;
    type PostRecv =
        unsafe extern "C" fn(*mut ibv_qp, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int;

    /// `struct ibv_context` up to the data-path operations of its ops table
    /// (`ibv_poll_cq`, `ibv_post_send` and `ibv_post_recv` are inline calls
    /// through it).
    #[repr(C)]
    pub(super) struct ibv_context {
        pub device: *mut ibv_device,
        _ops_before_poll_cq: [*const c_void; 11],
        pub poll_cq: Option<PollCq>,
        _ops_before_post_send: [*const c_void; 13],
        pub post_send: Option<PostSend>,
        pub post_recv: Option<PostRecv>,
    }

    /// `struct ibv_cq` up to its context.
    #[repr(C)]
    pub(super) struct ibv_cq {
        pub context: *mut ibv_context,
    }

    /// `struct ibv_qp` up to its number.
    #[repr(C)]
    pub(super) struct ibv_qp {
        pub context: *mut ibv_context,
        _qp_context_pd_cqs_srq: [*mut c_void; 5],
        pub handle: u32,
        pub qp_num: u32,
    }

    /// `struct ibv_mr`.
    #[repr(C)]
    pub(super) struct ibv_mr {
        pub context: *mut ibv_context,
        pub pd: *mut ibv_pd,
        pub addr: *mut c_void,
        pub length: usize,
        pub handle: u32,
        pub lkey: u32,
        pub rkey: u32,
    }

    #[repr(C)]
    #[derive(Debug, Clone, Copy)]
    pub(super) struct ibv_sge {
        pub addr: u64,
        pub length: u32,
        pub lkey: u32,
    }

    /// `wr.rdma` of `struct ibv_send_wr`, padded to the union's size.
    #[repr(C)]
    #[derive(Clone, Copy)]
    pub(super) struct WrRdma {
        pub remote_addr: u64,
        pub rkey: u32,
        pub _pad: u32,
        pub _unused: [u64; 2],
    }

    /// `wr.atomic` of `struct ibv_send_wr`.
    #[repr(C)]
    #[derive(Clone, Copy)]
    pub(super) struct WrAtomic {
        pub remote_addr: u64,
        pub compare_add: u64,
        pub swap: u64,
        pub rkey: u32,
        pub _pad: u32,
    }

    /// The `wr` union of `struct ibv_send_wr` (its `ud` member is unused).
    #[repr(C)]
    pub(super) union WrUnion {
        pub rdma: WrRdma,
        pub atomic: WrAtomic,
    }

    /// `struct ibv_send_wr`.
    #[repr(C)]
    pub(super) struct ibv_send_wr {
        pub wr_id: u64,
        pub next: *mut ibv_send_wr,
        pub sg_list: *mut ibv_sge,
        pub num_sge: c_int,
        pub opcode: c_uint,
        pub send_flags: c_uint,
        pub imm_data: u32,
        pub wr: WrUnion,
        pub qp_type: u32,
        pub _pad: u32,
        /// The `bind_mw`/`tso` union, unused.
        pub _tail: [u64; 6],
    }

    /// `struct ibv_recv_wr`.
    #[repr(C)]
    pub(super) struct ibv_recv_wr {
        pub wr_id: u64,
        pub next: *mut ibv_recv_wr,
        pub sg_list: *mut ibv_sge,
        pub num_sge: c_int,
    }

    #[repr(C)]
    #[derive(Debug, Default, Clone, Copy)]
    pub(super) struct ibv_qp_cap {
        pub max_send_wr: u32,
        pub max_recv_wr: u32,
        pub max_send_sge: u32,
        pub max_recv_sge: u32,
        pub max_inline_data: u32,
    }

    #[repr(C)]
    pub(super) struct ibv_qp_init_attr {
        pub qp_context: *mut c_void,
        pub send_cq: *mut ibv_cq,
        pub recv_cq: *mut ibv_cq,
        pub srq: *mut c_void,
        pub cap: ibv_qp_cap,
        pub qp_type: c_uint,
        pub sq_sig_all: c_int,
    }

    /// `union ibv_gid` (8-byte aligned for its `global` member).
    #[repr(C, align(8))]
    #[derive(Debug, Default, Clone, Copy)]
    pub(super) struct ibv_gid {
        pub raw: [u8; 16],
    }

    #[repr(C)]
    #[derive(Debug, Default, Clone, Copy)]
    pub(super) struct ibv_global_route {
        pub dgid: ibv_gid,
        pub flow_label: u32,
        pub sgid_index: u8,
        pub hop_limit: u8,
        pub traffic_class: u8,
    }

    #[repr(C)]
    #[derive(Debug, Default, Clone, Copy)]
    pub(super) struct ibv_ah_attr {
        pub grh: ibv_global_route,
        pub dlid: u16,
        pub sl: u8,
        pub src_path_bits: u8,
        pub static_rate: u8,
        pub is_global: u8,
        pub port_num: u8,
    }

    #[repr(C)]
    #[derive(Debug, Default, Clone, Copy)]
    pub(super) struct ibv_qp_attr {
        pub qp_state: c_uint,
        pub cur_qp_state: c_uint,
        pub path_mtu: c_uint,
        pub path_mig_state: c_uint,
        pub qkey: u32,
        pub rq_psn: u32,
        pub sq_psn: u32,
        pub dest_qp_num: u32,
        pub qp_access_flags: c_uint,
        pub cap: ibv_qp_cap,
        pub ah_attr: ibv_ah_attr,
        pub alt_ah_attr: ibv_ah_attr,
        pub pkey_index: u16,
        pub alt_pkey_index: u16,
        pub en_sqd_async_notify: u8,
        pub sq_draining: u8,
        pub max_rd_atomic: u8,
        pub max_dest_rd_atomic: u8,
        pub min_rnr_timer: u8,
        pub port_num: u8,
        pub timeout: u8,
        pub retry_cnt: u8,
        pub rnr_retry: u8,
        pub alt_port_num: u8,
        pub alt_timeout: u8,
        pub rate_limit: u32,
    }

    #[repr(C)]
    #[derive(Debug, Default, Clone, Copy)]
    pub(super) struct ibv_port_attr {
        pub state: c_uint,
        pub max_mtu: c_uint,
        pub active_mtu: c_uint,
        pub gid_tbl_len: c_int,
        pub port_cap_flags: u32,
        pub max_msg_sz: u32,
        pub bad_pkey_cntr: u32,
        pub qkey_viol_cntr: u32,
        pub pkey_tbl_len: u16,
        pub lid: u16,
        pub sm_lid: u16,
        pub lmc: u8,
        pub max_vl_num: u8,
        pub sm_sl: u8,
        pub subnet_timeout: u8,
        pub init_type_reply: u8,
        pub active_width: u8,
        pub active_speed: u8,
        pub phys_state: u8,
        pub link_layer: u8,
        pub flags: u8,
        pub port_cap_flags2: u16,
    }

    /// An `ibv_port_attr` with room for fields a newer library may add: the
    /// exported `ibv_query_port` writes the struct of the library's version.
    #[repr(C)]
    #[derive(Debug, Default)]
    pub(super) struct PortAttr {
        pub attr: ibv_port_attr,
        _reserve: [u64; 16],
    }

    /// `struct ibv_device_attr`, with the fields not read here as padding.
    #[repr(C)]
    #[derive(Debug, Default)]
    pub(super) struct ibv_device_attr {
        _fw_ver_to_max_qp: [u64; 14],
        pub max_qp_wr: c_int,
        _device_cap_flags_to_max_cq: [c_int; 4],
        pub max_cqe: c_int,
        _max_mr_max_pd: [c_int; 2],
        pub max_qp_rd_atom: c_int,
        _max_ee_rd_atom_max_res_rd_atom: [c_int; 2],
        pub max_qp_init_rd_atom: c_int,
        _max_ee_init_rd_atom: c_int,
        pub atomic_cap: c_uint,
        _max_ee_to_end: [u64; 8],
    }

    /// `struct ibv_gid_entry`.
    #[repr(C)]
    #[derive(Debug, Default, Clone, Copy)]
    pub(super) struct ibv_gid_entry {
        pub gid: ibv_gid,
        pub gid_index: u32,
        pub port_num: u32,
        pub gid_type: u32,
        pub ndev_ifindex: u32,
    }

    pub(super) const IBV_WR_RDMA_WRITE: c_uint = 0;
    pub(super) const IBV_WR_SEND: c_uint = 2;
    pub(super) const IBV_WR_RDMA_READ: c_uint = 4;
    pub(super) const IBV_WR_ATOMIC_CMP_AND_SWP: c_uint = 5;
    pub(super) const IBV_WR_ATOMIC_FETCH_AND_ADD: c_uint = 6;

    pub(super) const IBV_SEND_FENCE: c_uint = 1;
    pub(super) const IBV_SEND_SIGNALED: c_uint = 2;

    pub(super) const IBV_QPS_INIT: c_uint = 1;
    pub(super) const IBV_QPS_RTR: c_uint = 2;
    pub(super) const IBV_QPS_RTS: c_uint = 3;

    pub(super) const IBV_QP_STATE: c_int = 1;
    pub(super) const IBV_QP_ACCESS_FLAGS: c_int = 1 << 3;
    pub(super) const IBV_QP_PKEY_INDEX: c_int = 1 << 4;
    pub(super) const IBV_QP_PORT: c_int = 1 << 5;
    pub(super) const IBV_QP_AV: c_int = 1 << 7;
    pub(super) const IBV_QP_PATH_MTU: c_int = 1 << 8;
    pub(super) const IBV_QP_TIMEOUT: c_int = 1 << 9;
    pub(super) const IBV_QP_RETRY_CNT: c_int = 1 << 10;
    pub(super) const IBV_QP_RNR_RETRY: c_int = 1 << 11;
    pub(super) const IBV_QP_RQ_PSN: c_int = 1 << 12;
    pub(super) const IBV_QP_MAX_QP_RD_ATOMIC: c_int = 1 << 13;
    pub(super) const IBV_QP_MIN_RNR_TIMER: c_int = 1 << 15;
    pub(super) const IBV_QP_SQ_PSN: c_int = 1 << 16;
    pub(super) const IBV_QP_MAX_DEST_RD_ATOMIC: c_int = 1 << 17;
    pub(super) const IBV_QP_DEST_QPN: c_int = 1 << 20;

    pub(super) const IBV_PORT_ACTIVE: c_uint = 4;
    pub(super) const IBV_LINK_LAYER_ETHERNET: u8 = 2;
    pub(super) const IBV_ATOMIC_NONE: c_uint = 0;
    pub(super) const IBV_GID_TYPE_ROCE_V2: u32 = 2;

    // Layouts, as printed by a C program against rdma-core's verbs.h.
    const _: () = {
        assert!(offset_of!(ibv_context, poll_cq) == 8 + 88);
        assert!(offset_of!(ibv_context, post_send) == 8 + 200);
        assert!(offset_of!(ibv_context, post_recv) == 8 + 208);
        assert!(offset_of!(ibv_qp, qp_num) == 52);
        assert!(offset_of!(ibv_mr, lkey) == 36 && offset_of!(ibv_mr, rkey) == 40);
        assert!(size_of::<ibv_sge>() == 16);
        assert!(size_of::<ibv_send_wr>() == 128 && align_of::<ibv_send_wr>() == 8);
        assert!(offset_of!(ibv_send_wr, opcode) == 28);
        assert!(offset_of!(ibv_send_wr, send_flags) == 32);
        assert!(offset_of!(ibv_send_wr, wr) == 40);
        assert!(offset_of!(ibv_send_wr, wr) + offset_of!(WrRdma, rkey) == 48);
        assert!(offset_of!(ibv_send_wr, wr) + offset_of!(WrAtomic, swap) == 56);
        assert!(offset_of!(ibv_send_wr, wr) + offset_of!(WrAtomic, rkey) == 64);
        assert!(offset_of!(ibv_send_wr, qp_type) == 72);
        assert!(offset_of!(ibv_send_wr, _tail) == 80);
        assert!(size_of::<ibv_recv_wr>() == 32 && offset_of!(ibv_recv_wr, num_sge) == 24);
        assert!(size_of::<ibv_qp_cap>() == 20);
        assert!(size_of::<ibv_qp_init_attr>() == 64);
        assert!(offset_of!(ibv_qp_init_attr, cap) == 32);
        assert!(offset_of!(ibv_qp_init_attr, qp_type) == 52);
        assert!(offset_of!(ibv_qp_init_attr, sq_sig_all) == 56);
        assert!(size_of::<ibv_global_route>() == 24);
        assert!(offset_of!(ibv_global_route, sgid_index) == 20);
        assert!(size_of::<ibv_ah_attr>() == 32 && offset_of!(ibv_ah_attr, dlid) == 24);
        assert!(offset_of!(ibv_ah_attr, port_num) == 30);
        assert!(size_of::<ibv_qp_attr>() == 144);
        assert!(offset_of!(ibv_qp_attr, rq_psn) == 20 && offset_of!(ibv_qp_attr, sq_psn) == 24);
        assert!(offset_of!(ibv_qp_attr, dest_qp_num) == 28);
        assert!(offset_of!(ibv_qp_attr, qp_access_flags) == 32);
        assert!(offset_of!(ibv_qp_attr, cap) == 36);
        assert!(offset_of!(ibv_qp_attr, ah_attr) == 56);
        assert!(offset_of!(ibv_qp_attr, alt_ah_attr) == 88);
        assert!(offset_of!(ibv_qp_attr, pkey_index) == 120);
        assert!(offset_of!(ibv_qp_attr, max_rd_atomic) == 126);
        assert!(offset_of!(ibv_qp_attr, max_dest_rd_atomic) == 127);
        assert!(offset_of!(ibv_qp_attr, min_rnr_timer) == 128);
        assert!(offset_of!(ibv_qp_attr, port_num) == 129);
        assert!(offset_of!(ibv_qp_attr, timeout) == 130);
        assert!(offset_of!(ibv_qp_attr, retry_cnt) == 131);
        assert!(offset_of!(ibv_qp_attr, rnr_retry) == 132);
        assert!(offset_of!(ibv_qp_attr, rate_limit) == 136);
        assert!(size_of::<ibv_port_attr>() == 52);
        assert!(offset_of!(ibv_port_attr, active_mtu) == 8);
        assert!(offset_of!(ibv_port_attr, gid_tbl_len) == 12);
        assert!(offset_of!(ibv_port_attr, lid) == 34);
        assert!(offset_of!(ibv_port_attr, link_layer) == 46);
        assert!(size_of::<ibv_device_attr>() == 232);
        assert!(offset_of!(ibv_device_attr, max_qp_wr) == 112);
        assert!(offset_of!(ibv_device_attr, max_cqe) == 132);
        assert!(offset_of!(ibv_device_attr, max_qp_rd_atom) == 144);
        assert!(offset_of!(ibv_device_attr, max_qp_init_rd_atom) == 156);
        assert!(offset_of!(ibv_device_attr, atomic_cap) == 164);
        assert!(size_of::<ibv_gid_entry>() == 32);
        assert!(offset_of!(ibv_gid_entry, gid_type) == 24);
        assert!(size_of::<ibv_wc>() == 48);
    };

    #[link(name = "ibverbs")]
    extern "C" {
        pub(super) fn ibv_get_device_list(num_devices: *mut c_int) -> *mut *mut ibv_device;
        pub(super) fn ibv_free_device_list(list: *mut *mut ibv_device);
        pub(super) fn ibv_get_device_name(device: *mut ibv_device) -> *const c_char;
        pub(super) fn ibv_open_device(device: *mut ibv_device) -> *mut ibv_context;
        pub(super) fn ibv_close_device(context: *mut ibv_context) -> c_int;
        pub(super) fn ibv_query_device(
            context: *mut ibv_context,
            device_attr: *mut ibv_device_attr,
        ) -> c_int;
        pub(super) fn ibv_query_port(
            context: *mut ibv_context,
            port_num: u8,
            port_attr: *mut ibv_port_attr,
        ) -> c_int;
        pub(super) fn _ibv_query_gid_ex(
            context: *mut ibv_context,
            port_num: u32,
            gid_index: u32,
            entry: *mut ibv_gid_entry,
            flags: u32,
            entry_size: usize,
        ) -> c_int;
        pub(super) fn ibv_alloc_pd(context: *mut ibv_context) -> *mut ibv_pd;
        pub(super) fn ibv_dealloc_pd(pd: *mut ibv_pd) -> c_int;
        pub(super) fn ibv_create_cq(
            context: *mut ibv_context,
            cqe: c_int,
            cq_context: *mut c_void,
            channel: *mut c_void,
            comp_vector: c_int,
        ) -> *mut ibv_cq;
        pub(super) fn ibv_destroy_cq(cq: *mut ibv_cq) -> c_int;
        pub(super) fn ibv_create_qp(pd: *mut ibv_pd, attr: *mut ibv_qp_init_attr) -> *mut ibv_qp;
        pub(super) fn ibv_modify_qp(qp: *mut ibv_qp, attr: *mut ibv_qp_attr, mask: c_int) -> c_int;
        pub(super) fn ibv_destroy_qp(qp: *mut ibv_qp) -> c_int;
        pub(super) fn ibv_reg_mr(
            pd: *mut ibv_pd,
            addr: *mut c_void,
            length: usize,
            access: c_int,
        ) -> *mut ibv_mr;
        pub(super) fn ibv_dereg_mr(mr: *mut ibv_mr) -> c_int;
        pub(super) fn ibv_wc_status_str(status: c_uint) -> *const c_char;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        /// Allocations freed oldest first never overlap, stay in the ring
        /// and aligned, and an empty ring has all its room back.
        #[test]
        fn ring_pieces_never_overlap(ops in proptest::collection::vec((any::<bool>(), 1usize..3000), 1..200)) {
            let capacity = 8 * 1024;
            let mut ring = Ring::new(capacity);
            let mut live: VecDeque<Span> = VecDeque::new();
            for (alloc, len) in ops {
                if alloc || live.is_empty() {
                    if let Some(span) = ring.alloc(len) {
                        prop_assert!(span.start % STAGING_ALIGN == 0 && span.len >= len);
                        prop_assert!(span.start + span.len <= capacity);
                        for other in &live {
                            prop_assert!(span.start + span.len <= other.start || other.start + other.len <= span.start,
                                "{span:?} overlaps {other:?}");
                        }
                        live.push_back(span);
                    } else {
                        let used: usize = live.iter().map(|s| s.len).sum();
                        prop_assert!(used + len > capacity / 2 || !live.is_empty(), "refused {len} bytes of an empty ring");
                    }
                } else {
                    ring.free(live.pop_front().expect("not empty"));
                }
            }
            while let Some(span) = live.pop_front() {
                ring.free(span);
            }
            prop_assert_eq!(ring.used, 0);
            prop_assert!(ring.alloc(capacity).is_some());
        }

        /// The origin's checks fail exactly where the target's checks of
        /// the other fabrics fail, with the same error.
        #[test]
        fn origin_checks_match_the_registry(region_len in 1usize..200, offset in prop_oneof![0u64..250, Just(u64::MAX - 1)], len in 0usize..40, atomic in any::<bool>()) {
            let registry = Arc::new(Registry::default());
            let region = registry.register(NodeRank(2), region_len);
            let key = region.remote().key;
            let theirs = if atomic {
                registry.serve_fetch_add(NodeRank(2), key, offset, 0).map(drop)
            } else {
                registry.serve_read(NodeRank(2), key, offset, len).map(drop)
            };
            let len = if atomic { 8 } else { len };
            let ours = check_access(NodeRank(2), key, region_len as u64, offset, len, atomic);
            prop_assert_eq!(ours, theirs);
        }
    }

    #[test]
    fn rolled_back_pieces_return_their_room() {
        let mut ring = Ring::new(1024);
        let a = ring.alloc(600).expect("room");
        let b = ring.alloc(300).expect("room");
        assert_eq!((a.start, b.start), (0, 640));
        ring.free(a);
        let c = ring.alloc(500).expect("room before the oldest piece");
        assert_eq!(
            (c.start, c.consumed),
            (0, 64 + 512),
            "skips the end of the ring"
        );
        assert!(
            ring.alloc(129).is_none(),
            "only 128 bytes left between head and tail"
        );
        ring.unalloc(c);
        ring.unalloc(b);
        assert_eq!(ring.used, 0);
        assert_eq!(ring.alloc(1024).map(|span| span.start), Some(0));
    }

    #[test]
    fn key_table_entries_decode_only_for_their_key() {
        let words = [7u64 << 32 | 0xabcd, 100, 0x1000, 1];
        assert_eq!(
            Target::decode(7, words),
            Some(Target {
                rkey: 0xabcd,
                addr: 0x1000,
                len: 100
            })
        );
        assert_eq!(Target::decode(7 + (1 << 14), words), None);
        assert_eq!(Target::decode(7, [0; SLOT_WORDS]), None);
    }

    #[test]
    fn completion_errors_name_the_fault() {
        let peer = NodeRank(1);
        assert_eq!(
            completion_error(peer, Some(9), ibv_wc_status::IBV_WC_REM_ACCESS_ERR, 0, None),
            VerbError::UnknownKey { node: peer, key: 9 }
        );
        let lost = completion_error(peer, None, ibv_wc_status::IBV_WC_RETRY_EXC_ERR, 0, None);
        assert!(
            matches!(&lost, VerbError::PeerLost { node, .. } if *node == peer),
            "{lost:?}"
        );
        assert_eq!(
            completion_error(
                peer,
                None,
                ibv_wc_status::IBV_WC_WR_FLUSH_ERR,
                0,
                Some(&lost)
            ),
            lost
        );
        let other = completion_error(peer, None, ibv_wc_status::IBV_WC_LOC_PROT_ERR, 0x33, None);
        let VerbError::Fabric(text) = &other else {
            panic!("{other:?}")
        };
        assert!(text.contains("0x33"), "{text}");
        assert!(matches!(
            broken_by(peer, &other),
            VerbError::PeerLost { .. }
        ));
    }

    #[test]
    fn a_failed_listing_says_what_to_do() {
        let reason = listing_failed(&io::Error::from_raw_os_error(libc::ENOSYS));
        assert!(reason.contains("os error 38"), "{reason}");
        assert!(reason.contains("tcp or mpi fabric"), "{reason}");
    }

    #[test]
    fn work_request_ids_name_their_link() {
        let send = wr_id(false, NodeRank(3), (7 << 32) + 41);
        assert_eq!(split_wr_id(send), (false, 3, 41));
        let recv = wr_id(true, NodeRank(u32::MAX >> 1), 5);
        assert_eq!(split_wr_id(recv), (true, (u32::MAX >> 1) as usize, 5));
    }
}
