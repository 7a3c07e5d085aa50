//! Declarations of the libibverbs ABI that the fabric uses, as in
//! `<infiniband/verbs.h>`. Structs the library allocates are declared up to
//! the last field read (never allocated here); structs passed in are
//! declared whole. Sizes and offsets are asserted against the header
//! (rdma-core, `IBVERBS_1.1`, x86-64 and aarch64 alike). The safe `ibverbs`
//! crate exposes neither raw handles nor RDMA READ, WRITE or atomics, hence
//! these. Its functions are called from `resources` only.
#![allow(non_camel_case_types)]

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
type PostSend = unsafe extern "C" fn(*mut ibv_qp, *mut ibv_send_wr, *mut *mut ibv_send_wr) -> c_int;
type PostRecv = unsafe extern "C" fn(*mut ibv_qp, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int;

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
