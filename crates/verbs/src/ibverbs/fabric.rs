//! The fabric of one node: its resources ([`Shared`]), the life of a
//! request (posted by an application thread, handed to the NIC as room and
//! key lookups allow, completed by the poller, released in posted order),
//! and the [`Fabric`] implementation over them.

use std::collections::{BTreeMap, HashMap};
use std::ffi::c_uint;
use std::fmt;
use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

use ::ibverbs::{ibv_access_flags, ibv_wc, ibv_wc_status};

use super::keys::{check_access, KeyTable, Registration, Target};
use super::link::{Entry, Link, LinkState, Lookup, Nic, PendingWr, WrKind, WrSpec};
use super::resources::{status_text, Cq, Device, MemoryMr};
use super::{
    lock, split_wr_id, sys, Exchange, KEY_SLOTS, LOW_32, MESSAGE_MAX, SEGMENT_MAX, SLOT_BYTES,
    SLOT_WORDS,
};
use crate::error::{Error, Result, VerbError};
use crate::node::Fabric;
use crate::queue::{CompletionQueue, Mailbox};
use crate::region::{Region, Registry};
use crate::wr::{Op, WorkRequest};
use crate::NodeRank;

/// A node's verbs resources, shared by its application threads and its
/// completion poller.
pub(super) struct Shared {
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

/// How a key resolved.
enum Resolved {
    Found(Target),
    Unknown,
    /// A lookup is on its way (or waits for room to be posted).
    Pending,
}

impl Shared {
    /// A node's resources: its queue pair to every node (by rank), its key
    /// table, every node's key table (address and rkey, by rank), its
    /// completion queue and device.
    pub(super) fn new(
        rank: NodeRank,
        links: Vec<Link>,
        key_table: Arc<KeyTable>,
        remote_tables: Vec<(u64, u32)>,
        cq: Arc<Cq>,
        device: Arc<Device>,
    ) -> Self {
        Self {
            links,
            rank,
            registry: Arc::new(Registry::default()),
            mailbox: Mailbox::default(),
            key_table,
            remote_tables,
            targets: RwLock::new(HashMap::new()),
            stop: AtomicBool::new(false),
            cq,
            device,
        }
    }

    fn register(&self, len: usize) -> Result<Region> {
        let mut region = self.registry.register(self.rank, len);
        let key = region.remote().key;
        let access = ibv_access_flags::IBV_ACCESS_LOCAL_WRITE
            | ibv_access_flags::IBV_ACCESS_REMOTE_READ
            | ibv_access_flags::IBV_ACCESS_REMOTE_WRITE
            | ibv_access_flags::IBV_ACCESS_REMOTE_ATOMIC;
        let mr = MemoryMr::register(&self.device, Arc::clone(region.memory()), access).map_err(
            |source| Error::Io {
                what: format!(
                    "failed to register memory region of {len} bytes with {}",
                    self.device.name
                ),
                source,
            },
        )?;
        let addr = mr.memory().as_ptr() as u64;
        let registration =
            Registration::publish(&self.key_table, key, len as u64, mr).ok_or_else(|| {
                Error::Io {
                    what: format!(
                        "cannot publish region {key}: its key-table entry is still held by the \
                     region registered {KEY_SLOTS} keys earlier"
                    ),
                    source: io::Error::new(io::ErrorKind::OutOfMemory, "key table full"),
                }
            })?;
        region.attach_registration(Box::new(registration), addr);
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
pub(super) struct Ibverbs {
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

impl Ibverbs {
    /// Starts the completion poller over `shared`; `exchange` serves the
    /// node's collectives.
    pub(super) fn start(shared: Shared, exchange: Exchange) -> Result<Self> {
        let shared = Arc::new(shared);
        let poller = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name(format!("ibverbs-poller-{}", shared.rank))
                .spawn(move || poll_loop(&shared))
                .map_err(|source| Error::Io {
                    what: "failed to start the completion poller thread".into(),
                    source,
                })?
        };
        Ok(Self {
            shared,
            exchange,
            poller: Some(poller),
        })
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
