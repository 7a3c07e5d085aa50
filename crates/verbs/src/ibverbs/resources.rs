//! The device and everything made from it, each owned by one value that
//! releases it on drop: the device context and protection domain
//! ([`Device`]), memory registrations ([`Mr`], [`MemoryMr`]), DMA staging
//! memory ([`Staging`]), the completion queue ([`Cq`]) and queue pairs
//! ([`Qp`]). Every call into libibverbs except posting sits here. Drop order
//! is argued by `Arc`s and field order: a resource holds an `Arc` of what
//! it was made from, and a registration is dropped before its memory.

use std::ffi::{c_int, c_uint, c_void, CStr};
use std::fmt;
use std::io;
use std::ptr::{self, NonNull};
use std::sync::Arc;

use ::ibverbs::{ibv_access_flags, ibv_wc};

use super::{sys, unavailable, MAX_RD_ATOMIC, PORT, RECV_DEPTH, SQ_DEPTH};
use crate::error::{Error, Result};
use crate::region::Memory;

/// libibverbs' text for a work-completion status.
pub(super) fn status_text(status: c_uint) -> String {
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

/// What the device lets us use, capped by what we ask for.
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    pub(super) sq_depth: usize,
    pub(super) recv_depth: usize,
    pub(super) max_cqe: usize,
    pub(super) rd_atomic: u8,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct Port {
    pub(super) lid: u16,
    pub(super) active_mtu: u32,
    /// GID index and GID, when the port routes with GIDs (RoCE) or one was asked for.
    pub(super) gid: Option<(u8, [u8; 16])>,
}

/// An open device context and its protection domain; every other resource
/// holds an `Arc` of it, so it is closed last.
pub(super) struct Device {
    pd: NonNull<sys::ibv_pd>,
    ctx: Context,
    pub(super) name: String,
    pub(super) port: Port,
    pub(super) limits: Limits,
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
    /// Opens the device named by `QUIVER_IBV_DEVICE` (default: the first
    /// one listed), checks that its port is active and that it can do
    /// atomics, and allocates the protection domain.
    pub(super) fn open() -> Result<Arc<Device>> {
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
            Error::invalid(
                "QUIVER_IBV_GID_INDEX",
                format!("QUIVER_IBV_GID_INDEX={text} is not a GID index (0..=255)"),
            )
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

/// Region memory (8-byte atomic words) registered with the device. It holds
/// the memory, so the memory cannot go away before the registration.
pub(super) struct MemoryMr {
    // Declared first: deregistered before the memory can be freed.
    mr: Mr,
    memory: Arc<Memory>,
}

impl MemoryMr {
    /// Registers all of `memory`'s words with `access`.
    pub(super) fn register(
        device: &Arc<Device>,
        memory: Arc<Memory>,
        access: ibv_access_flags,
    ) -> io::Result<Self> {
        // SAFETY: the words are heap-allocated atomics that never move, so
        // the NIC may access them at any time; `self.memory` keeps them
        // alive and is dropped after `self.mr` (field order).
        let mr = unsafe {
            Mr::register(
                device,
                memory.as_ptr().cast_mut().cast(),
                memory.len().div_ceil(8) * 8,
                access,
            )
        }?;
        Ok(Self { mr, memory })
    }

    /// The key peers address the memory with.
    pub(super) fn rkey(&self) -> u32 {
        self.mr.rkey()
    }

    /// The registered memory.
    pub(super) fn memory(&self) -> &Memory {
        &self.memory
    }
}

/// Page-aligned zeroed memory the NIC may DMA into, accessed only through
/// raw pointers.
pub(super) struct DmaBuffer {
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
    /// No posted work request may use the range (a range outside the buffer
    /// panics).
    pub(super) unsafe fn write(&self, offset: usize, data: &[u8]) {
        assert!(
            offset
                .checked_add(data.len())
                .is_some_and(|end| end <= self.len()),
            "write of {} bytes at {offset} past a DMA buffer of {}",
            data.len(),
            self.len()
        );
        // SAFETY: in bounds (asserted without overflow); the caller owns the range, so
        // nothing else writes it meanwhile; `data` cannot overlap it.
        unsafe {
            ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.as_ptr().add(offset), data.len());
        }
    }

    /// Copies `out.len()` bytes at `offset` into `out`.
    ///
    /// # Safety
    /// No posted work request may use the range (a range outside the buffer
    /// panics).
    pub(super) unsafe fn read(&self, offset: usize, out: &mut [u8]) {
        assert!(
            offset
                .checked_add(out.len())
                .is_some_and(|end| end <= self.len()),
            "read of {} bytes at {offset} past a DMA buffer of {}",
            out.len(),
            self.len()
        );
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
pub(super) struct Staging {
    // Declared first: deregistered before the memory is freed.
    mr: Mr,
    pub(super) buffer: DmaBuffer,
}

impl Staging {
    /// `len` zeroed bytes that the NIC may write (local access only).
    pub(super) fn new(device: &Arc<Device>, len: usize) -> io::Result<Self> {
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

    /// The scatter/gather entry of `len` bytes at `offset`.
    pub(super) fn sge(&self, offset: usize, len: usize) -> sys::ibv_sge {
        sys::ibv_sge {
            addr: self.buffer.addr(offset),
            length: u32::try_from(len).expect("staging pieces are at most 64 KiB"),
            lkey: self.mr.lkey(),
        }
    }
}

/// The completion queue shared by all queue pairs of the node.
pub(super) struct Cq {
    cq: NonNull<sys::ibv_cq>,
    _device: Arc<Device>,
}

// SAFETY: CQs are thread-safe in libibverbs; only the poller polls it.
unsafe impl Send for Cq {}
// SAFETY: as for Send.
unsafe impl Sync for Cq {}

impl Cq {
    /// A completion queue of `entries` entries.
    pub(super) fn new(device: &Arc<Device>, entries: usize) -> io::Result<Self> {
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
    pub(super) fn poll(&self, wcs: &mut [ibv_wc]) -> io::Result<usize> {
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
pub(super) struct Qp {
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
    /// A queue pair in the reset state, completing on `cq`.
    pub(super) fn create(device: &Arc<Device>, cq: &Arc<Cq>) -> io::Result<Self> {
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

    /// The queue pair's number, which peers connect to.
    pub(super) fn num(&self) -> u32 {
        // SAFETY: the QP is live; qp_num is set at creation and never changes.
        unsafe { self.qp.as_ref() }.qp_num
    }

    /// Moves the queue pair to the state `attr` describes (`mask`: which fields count).
    pub(super) fn modify(&self, attr: &mut sys::ibv_qp_attr, mask: c_int) -> io::Result<()> {
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
    pub(super) unsafe fn post_send(
        &self,
        wrs: &mut [sys::ibv_send_wr],
    ) -> Result<(), (usize, io::Error)> {
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
    pub(super) unsafe fn post_recv(&self, wr_id: u64, sge: sys::ibv_sge) -> io::Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_listing_says_what_to_do() {
        let reason = listing_failed(&io::Error::from_raw_os_error(libc::ENOSYS));
        assert!(reason.contains("os error 38"), "{reason}");
        assert!(reason.contains("tcp or mpi fabric"), "{reason}");
    }
}
