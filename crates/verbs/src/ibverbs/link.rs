//! Links: one RC queue pair to one node, its staging and receive buffers,
//! and the bookkeeping of the requests on it, from posting to release.
//! Posting hands staging memory to the NIC, the one `unsafe` step here.

use std::collections::VecDeque;
use std::ffi::{c_int, c_uint};
use std::io;
use std::ptr;
use std::sync::{Arc, Mutex};

use ::ibverbs::ibv_access_flags;

use super::keys::Target;
use super::resources::{Cq, Device, Qp, Staging};
use super::staging::{Ring, Span};
use super::{
    sys, wr_id, Endpoint, ACK_TIMEOUT, MESSAGE_MAX, MIN_RNR_TIMER, PORT, RETRY_COUNT, RNR_RETRY,
    STAGING_BYTES,
};
use crate::error::{Error, Result, VerbError};
use crate::queue::CompletionQueue;
use crate::wr::{Completion, Op, Output};
use crate::NodeRank;

/// One RC queue pair to one node (possibly this one) and the requests on it.
pub(super) struct Link {
    // Declared first: destroyed before the buffers its requests name.
    pub(super) qp: Qp,
    pub(super) peer: NodeRank,
    pub(super) staging: Staging,
    pub(super) recv: Staging,
    pub(super) state: Mutex<LinkState>,
}

/// What a posted work request was for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WrKind {
    Read,
    Write,
    Atomic,
    Send,
    /// A READ of the peer's key-table entry for this key.
    Lookup(u32),
}

/// A work request at the NIC, in posting order.
#[derive(Debug)]
pub(super) struct InFlight {
    pub(super) seq: u64,
    /// The entry it belongs to (`None` for a key lookup).
    pub(super) entry: Option<u64>,
    pub(super) kind: WrKind,
    pub(super) span: Span,
    /// Where its bytes go in the entry's READ data.
    pub(super) offset: usize,
    pub(super) len: usize,
}

/// A request from an application queue, from posting until its completion
/// is released.
#[derive(Debug)]
pub(super) struct Entry {
    pub(super) id: u64,
    pub(super) cq: Arc<CompletionQueue>,
    pub(super) wr_id: u64,
    pub(super) op: Op,
    pub(super) target: Option<Target>,
    /// Bytes handed to the NIC so far (READ/WRITE).
    pub(super) posted: usize,
    /// Nothing more to hand to the NIC.
    pub(super) posted_all: bool,
    pub(super) wrs_in_flight: usize,
    pub(super) data: Vec<u8>,
    pub(super) value: u64,
    pub(super) result: Option<std::result::Result<Output, VerbError>>,
}

impl Entry {
    pub(super) fn fail(&mut self, error: VerbError) {
        self.result.get_or_insert(Err(error));
        self.posted_all = true;
    }

    pub(super) fn finish(&mut self, output: Output) {
        self.result.get_or_insert(Ok(output));
        self.posted_all = true;
    }

    pub(super) fn output(&mut self) -> Output {
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
pub(super) enum Lookup {
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
pub(super) struct Nic {
    pub(super) in_flight: VecDeque<InFlight>,
    pub(super) ring: Ring,
    next_seq: u64,
    reads: usize,
    atomics: usize,
    pub(super) lookup: Lookup,
    sq_depth: usize,
}

/// A work request to post, before it is laid out for libibverbs.
#[derive(Debug, Clone, Copy)]
pub(super) struct PendingWr {
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
pub(super) struct WrSpec {
    pub(super) kind: WrKind,
    pub(super) opcode: c_uint,
    pub(super) entry: Option<u64>,
    pub(super) span: Span,
    pub(super) offset: usize,
    pub(super) len: usize,
    pub(super) remote_addr: u64,
    pub(super) rkey: u32,
    pub(super) compare_add: u64,
    pub(super) swap: u64,
}

impl WrSpec {
    pub(super) fn local(
        kind: WrKind,
        opcode: c_uint,
        entry: Option<u64>,
        span: Span,
        len: usize,
    ) -> Self {
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
    pub(super) fn new(sq_depth: usize) -> Self {
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
    pub(super) fn reserve(&mut self, len: usize) -> Option<Span> {
        if self.in_flight.len() >= self.sq_depth {
            return None;
        }
        self.ring.alloc(len)
    }

    /// Records a work request and queues it for posting, fenced behind the
    /// outstanding READs and atomics it must not pass: a READ behind
    /// atomics, anything else behind both. Key lookups need no fence.
    pub(super) fn push(
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
    pub(super) fn retire(&mut self, kind: WrKind) {
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
pub(super) struct LinkState {
    pub(super) entries: VecDeque<Entry>,
    pub(super) next_id: u64,
    pub(super) next_unposted: usize,
    pub(super) nic: Nic,
    /// Set when the queue pair failed: what every later request completes with.
    pub(super) broken: Option<VerbError>,
}

impl LinkState {
    pub(super) fn index_of(&self, id: u64) -> usize {
        let first = self.entries.front().map_or(id, |entry| entry.id);
        let index = usize::try_from(id - first).expect("entry ids are dense");
        assert_eq!(self.entries[index].id, id, "entry ids are consecutive");
        index
    }

    pub(super) fn entry_mut(&mut self, id: u64) -> &mut Entry {
        let index = self.index_of(id);
        &mut self.entries[index]
    }

    pub(super) fn break_with(&mut self, error: VerbError) {
        self.broken.get_or_insert(error);
    }

    /// Hands finished requests at the front to their queues, in posted order.
    pub(super) fn release(&mut self, peer: NodeRank) {
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
    pub(super) fn rollback(&mut self, count: usize) {
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

impl Link {
    pub(super) fn new(device: &Arc<Device>, cq: &Arc<Cq>, peer: NodeRank) -> Result<Self> {
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
    pub(super) fn post_recv_slot(&self, slot: usize) -> io::Result<()> {
        let wr_id = wr_id(true, self.peer, slot as u64);
        let sge = self.recv.sge(slot * MESSAGE_MAX, MESSAGE_MAX);
        // SAFETY: the slot lies in the registered receive buffer, and it
        // belongs to the NIC from now on: the poller reads it only after its
        // completion, and reposts it only after reading.
        unsafe { self.qp.post_recv(wr_id, sge) }
    }

    /// Moves the queue pair to ready-to-send, connected to `remote`'s queue
    /// pair for this node.
    pub(super) fn connect(
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
    pub(super) fn post(&self, pending: &[PendingWr]) -> Result<(), (usize, io::Error)> {
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
