//! The `mpi` fabric (feature `mpi`): nodes are the ranks of an MPI job, and
//! the verbs are MPI-3 one-sided RMA and matched messages. It is how Quiver
//! runs on a real cluster without touching the network itself: a user starts
//! `mpirun -n 16 quiver ...` (or `srun`), every rank calls [`join`], and
//! traffic rides whatever interconnect the site's MPI is built for
//! (InfiniBand, Omni-Path, Slingshot, shared memory between ranks of a host).
//!
//! Mapping:
//! - A [`Region`] is also an MPI window over its words (`MPI_Win_create`,
//!   displacement unit 1), opened once for passive-target access by every
//!   node (`MPI_Win_lock_all` with `MPI_MODE_NOCHECK`).
//! - READ is `MPI_Get`, WRITE `MPI_Put`, CAS `MPI_Compare_and_swap` and
//!   FETCH_ADD `MPI_Fetch_and_op` (`MPI_SUM`), both on `MPI_UINT64_T`.
//! - SEND is `MPI_Issend` on a communicator of the fabric's own (a duplicate
//!   of `MPI_COMM_WORLD`, so the application's MPI traffic never mixes with
//!   it), with one tag; a progress thread receives every message
//!   (`MPI_Improbe` + `MPI_Mrecv`) and matches it to the oldest posted
//!   receive, as on the other fabrics.
//! - `all_gather` (and so barriers, all-reduces and region exchange) is
//!   `MPI_Iallgather` of the lengths and `MPI_Iallgatherv` of the bytes,
//!   waited for with `MPI_Test` so that a missing node is a timeout.
//! - When the whole job runs on one host (`MPI_Comm_split_type` with
//!   `MPI_COMM_TYPE_SHARED` spans it), the RMA operations a node addresses
//!   to itself are carried out directly on its memory: there, MPI carries
//!   out peers' operations as memory copies and CPU atomics too (or in this
//!   node's progress, which the fabric's lock excludes meanwhile), so the
//!   result is the same, and it steps around Open MPI 4.1's osc/rdma, which
//!   crashes on a 64-bit `MPI_Compare_and_swap` a rank addresses to itself
//!   over btl/vader (open-mpi/ompi#7967, #11349). A job of one node needs
//!   no windows at all. Across hosts every operation goes through MPI.
//!
//! Departures from the contract of the crate, all forced by MPI:
//! - **Registration is collective.** `MPI_Win_create` is, so every node must
//!   call `Node::register` the same number of times, in the same order (the
//!   lengths may differ). Keys come from a per-node counter, so the k-th
//!   region has the same key on every node and a key names one window.
//! - **Bounds are checked at the origin.** MPI does not check a target's
//!   range; the lengths of every node's region are exchanged at
//!   registration, and a bad key, range or alignment completes at the
//!   origin with the same [`VerbError`] the other fabrics report, without
//!   any traffic.
//! - **Completion is a flush.** A work request completes when
//!   `MPI_Win_flush` towards its target returned (the operation is complete
//!   at the target too), so a batch posted on one queue completes before
//!   `post` returns, except SENDs, which complete when the receiving node has
//!   matched them (`MPI_Issend`). Per queue and target, effects and
//!   completions are in posted order: the fabric flushes between two
//!   operations to one target whenever MPI would not order them (a READ
//!   behind a WRITE or an atomic, a WRITE behind anything, an atomic behind
//!   a READ or WRITE, anything on another region) and before a SEND, and a
//!   completion waits for an earlier SEND of its queue to the same target.
//! - **A dropped region lingers.** `MPI_Win_free` is collective, so dropping
//!   a [`Region`] only marks it released; its window (and memory) is freed
//!   at the first collective (`all_gather`, `barrier`, `exchange`, ...) by
//!   which every node has dropped its region of that key, and the rest when
//!   the fabric is dropped. Until then remote operations on it still land in
//!   its memory instead of failing with [`VerbError::UnknownKey`]; after
//!   that they do fail so.
//! - **Atomicity.** Remote atomics are atomic with each other, but the
//!   local `Region::compare_swap`/`Region::fetch_add` are not promised to be
//!   atomic with them (an MPI library may carry them out with a lock of its
//!   own, or a NIC); and whether each 8-byte word of a READ racing a WRITE
//!   is whole is up to the MPI library's copy (it is on shared memory and
//!   RDMA NICs; MPI does not promise it).
//! - **Failure.** MPI's default error handler (`MPI_ERRORS_ARE_FATAL`) stays
//!   installed: when a process dies, `mpirun`/`srun` tears the whole job
//!   down, which is this fabric's "never a hang" (instead of
//!   [`VerbError::PeerLost`]). A node that is alive but does not reach a
//!   collective makes the others fail with [`Error::Timeout`] after the
//!   node's timeout; the job is then out of step, later collectives fail at
//!   once, and the process leaves without `MPI_Finalize`, so the launcher
//!   reports it and ends the job. An MPI library that cannot open a window
//!   (no one-sided component for the memory or transport) fails
//!   `Node::register` with [`Error::Unavailable`] instead of aborting.
//! - No cost model: completions carry no modelled time.
//!
//! Threads: MPI is initialised asking for `MPI_THREAD_MULTIPLE`, but every
//! MPI call of the fabric is made under one lock, so `MPI_THREAD_SERIALIZED`
//! suffices (less is refused). The progress thread sleeps (up to 1 ms at a
//! time) while nothing arrives. `join` may be called once per process, and
//! only under a launcher: Open MPI's singleton start-up kills a process
//! whose environment cannot host it, so `join` refuses beforehand. Drop the
//! last clone of the [`Node`] on the thread that called `join`, since that
//! calls `MPI_Finalize` (after a barrier, waiting for outstanding SENDs, and
//! freeing the windows: every node must drop its node, as it is collective).

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::ffi::{c_char, c_int, c_void, CStr};
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mpi::environment::{Threading, Universe};
use mpi::ffi;

use crate::counters::CounterTable;
use crate::error::{Error, Result, VerbError};
use crate::node::{Fabric, Node};
use crate::queue::{CompletionQueue, Mailbox};
use crate::region::{Memory, Region, Registry};
use crate::wr::{Completion, Op, Output, Verb, WorkRequest};
use crate::NodeRank;

const FABRIC: &str = "mpi";

/// The tag of every SEND, on the fabric's own communicator.
const TAG: c_int = 0x5156;

/// `MPI_SUCCESS` as the `c_int` MPI calls return.
#[allow(clippy::cast_possible_wrap)] // MPI_SUCCESS is 0.
const SUCCESS: c_int = ffi::MPI_SUCCESS as c_int;

/// `MPI_MODE_NOCHECK` as the `c_int` `MPI_Win_lock_all` takes.
#[allow(clippy::cast_possible_wrap)] // A one-bit flag.
const MODE_NOCHECK: c_int = ffi::MPI_MODE_NOCHECK as c_int;

/// Largest element count of one MPI call, and so the largest chunk of a READ
/// or WRITE (which may move up to 4 GiB - 1 bytes, more than a C `int`).
const MAX_CHUNK: usize = 1 << 30;

/// Issues a transfer of `len` bytes at `disp` as `call(start, count, at)`
/// per piece of at most [`MAX_CHUNK`] bytes (`start` in the buffer, `at`
/// in the window), stopping at the first piece that fails; returns the
/// last return code.
fn in_pieces(
    len: usize,
    disp: ffi::MPI_Aint,
    mut call: impl FnMut(usize, c_int, ffi::MPI_Aint) -> c_int,
) -> c_int {
    let mut start = 0;
    while start < len {
        let piece = MAX_CHUNK.min(len - start);
        let count = c_int::try_from(piece).expect("pieces fit an int");
        let at = disp + ffi::MPI_Aint::try_from(start).expect("inside the region");
        let rc = call(start, count, at);
        if rc != SUCCESS {
            return rc;
        }
        start += piece;
    }
    SUCCESS
}

/// Messages received per turn of the progress thread, so that it does not
/// keep the lock from posting threads under a flood.
const RECEIVES_PER_TURN: usize = 64;

/// Launcher variables, one of which every MPI launcher sets (Open MPI's
/// `mpirun`, PMIx and PMI-2 launchers such as `srun` and Hydra).
const LAUNCHER_VARS: [&str; 4] = ["OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"];

/// Set by the first [`join`]: MPI can be initialised once per process.
static JOINED: AtomicBool = AtomicBool::new(false);

fn unavailable(reason: impl Into<String>) -> Error {
    Error::Unavailable {
        fabric: FABRIC,
        reason: reason.into(),
    }
}

/// Joins the MPI job this process was started in (by `mpirun`, `srun`, ...):
/// initialises MPI, and returns this rank's [`Node`]. Every rank of the job
/// must call it; rank and size are those of `MPI_COMM_WORLD`. `timeout`
/// bounds how long a collective waits for the other nodes.
///
/// # Errors
/// [`Error::Unavailable`] when the process was not started by an MPI
/// launcher, when `join` was already called in this process (MPI cannot be
/// initialised twice), when other code already initialised MPI, when the
/// library offers less than `MPI_THREAD_SERIALIZED`, or when setting up the
/// fabric's communicator fails; [`Error::Io`] if the progress thread cannot
/// be started.
pub fn join(timeout: Duration) -> Result<Node> {
    if !LAUNCHER_VARS
        .iter()
        .any(|var| std::env::var_os(var).is_some())
    {
        return Err(unavailable(
            "this process was not started by an MPI launcher; run it as `mpirun -n N ...` \
             (or under srun)",
        ));
    }
    if JOINED.swap(true, Ordering::AcqRel) {
        return Err(unavailable(
            "join was already called in this process, and MPI can be initialised only once",
        ));
    }
    let Some((universe, threading)) = mpi::initialize_with_threading(Threading::Multiple) else {
        return Err(unavailable(
            "MPI was already initialised in this process by other code",
        ));
    };
    if threading < Threading::Serialized {
        return Err(unavailable(format!(
            "the MPI library offers only {threading:?} threading; the fabric needs \
             MPI_THREAD_SERIALIZED or MPI_THREAD_MULTIPLE"
        )));
    }
    // Nothing of the fabric exists yet, so no other thread calls MPI: the
    // state can be built outside its lock.
    let state = State::new(&universe)?;
    let (rank, size) = (state.rank, state.size);
    tracing::debug!(
        "mpi fabric: node {rank} of {size}, {}",
        if state.local_self {
            "on one host: operations on itself carried out locally"
        } else {
            "on several hosts: every operation through MPI"
        }
    );
    let shared = Arc::new(Shared {
        mpi: Mutex::new(state),
        collective: Mutex::new(()),
        registry: Arc::new(Registry::default()),
        mailbox: Mailbox::default(),
        released: Arc::new(Mutex::new(BTreeSet::new())),
        stop: AtomicBool::new(false),
    });
    let progress = {
        let shared = Arc::clone(&shared);
        std::thread::Builder::new()
            .name(format!("mpi-progress-{rank}"))
            .spawn(move || progress(&shared))
            .map_err(|err| Error::io("starting the mpi progress thread", err))?
    };
    let fabric = MpiFabric {
        rank,
        size,
        timeout,
        shared,
        progress: Some(progress),
        universe: Some(universe),
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

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // The data behind these locks stays consistent at every point where a
    // panic could occur (MPI handles and queues of plain data), so poison
    // is ignored.
    mutex.lock().unwrap_or_else(|poison| poison.into_inner())
}

/// Defines one getter per MPI constant. The constants are `extern` statics
/// of the rsmpi C shim, initialised when the library is loaded and never
/// written, so reading them has no precondition.
macro_rules! mpi_constants {
    ($($getter:ident: $ty:ty = $constant:ident;)*) => {
        $(
            fn $getter() -> $ty {
                // SAFETY: a constant of the shim: an `extern` static that is
                // initialised at load time and never written.
                unsafe { ffi::$constant }
            }
        )*
    };
}

mpi_constants! {
    datatype_u8: ffi::MPI_Datatype = RSMPI_UINT8_T;
    datatype_u64: ffi::MPI_Datatype = RSMPI_UINT64_T;
    op_sum: ffi::MPI_Op = RSMPI_SUM;
    any_source: c_int = RSMPI_ANY_SOURCE;
    status_ignore: *mut ffi::MPI_Status = RSMPI_STATUS_IGNORE;
    request_null: ffi::MPI_Request = RSMPI_REQUEST_NULL;
    comm_world: ffi::MPI_Comm = RSMPI_COMM_WORLD;
    comm_type_shared: c_int = RSMPI_COMM_TYPE_SHARED;
    info_null: ffi::MPI_Info = RSMPI_INFO_NULL;
    errors_return: ffi::MPI_Errhandler = RSMPI_ERRORS_RETURN;
    errors_are_fatal: ffi::MPI_Errhandler = RSMPI_ERRORS_ARE_FATAL;
}

/// `len` zero bytes in a real allocation. An empty `Vec` points to the
/// dangling address 1, which Open MPI reads as `MPI_IN_PLACE` (and refuses
/// as a receive buffer), so buffers handed to MPI are never dangling.
fn zeroed_bytes(len: usize) -> Vec<u8> {
    allocated(vec![0; len])
}

/// `bytes`, allocated even when empty (see [`zeroed_bytes`]).
fn allocated(mut bytes: Vec<u8>) -> Vec<u8> {
    if bytes.capacity() == 0 {
        bytes.reserve(1);
    }
    bytes
}

/// The word at byte `start` (a multiple of 8) of `memory`.
fn local_word(memory: &Memory, start: usize) -> &AtomicU64 {
    let index = start / 8;
    assert!(
        start.is_multiple_of(8) && index < memory.len().div_ceil(8),
        "locate checked alignment and range against this node's length"
    );
    // SAFETY: `index` is within the words of the memory (asserted above),
    // which lives as long as the returned borrow; the words are atomics, so
    // a shared reference to one is sound while MPI or peers access others.
    unsafe { &*memory.as_ptr().add(index) }
}

/// `rank` as the `int` MPI takes; ranks come from `MPI_Comm_size`, so they fit.
fn mpi_rank(rank: NodeRank) -> c_int {
    c_int::try_from(rank.0).expect("a rank below the job size, which MPI counts in an int")
}

/// A window: the MPI handle, every node's length of the region, and the
/// memory it exposes, kept alive for as long as peers may access it.
struct Window {
    /// `None` in a job of one node, where no peer can reach the memory.
    win: Option<ffi::MPI_Win>,
    lens: Vec<u64>,
    memory: Arc<Memory>,
}

/// A SEND in flight: its buffer belongs to MPI until the request completes.
struct PendingSend {
    id: u64,
    request: ffi::MPI_Request,
    data: Vec<u8>,
    cq: Arc<CompletionQueue>,
    wr_id: u64,
    to: NodeRank,
}

/// Completions of one queue towards one target, held back behind a SEND
/// still in flight so that they are delivered in posted order.
struct Ordered {
    cq: Arc<CompletionQueue>,
    slots: VecDeque<Slot>,
}

enum Slot {
    /// The SEND with this id has not completed yet.
    Send(u64),
    Ready(Completion),
}

/// A completion queue's identity while it has completions held back (its
/// `Arc` is then held by the pending SEND, so the address is not reused).
fn cq_id(cq: &Arc<CompletionQueue>) -> usize {
    Arc::as_ptr(cq) as usize
}

/// Everything MPI of one process, reachable only through the fabric's one
/// lock: every MPI call of the fabric is a method of `State`, so holding a
/// `&mut State` is holding the lock, and calls never overlap.
struct State {
    /// The fabric's own duplicate of `MPI_COMM_WORLD`.
    comm: ffi::MPI_Comm,
    windows: BTreeMap<u32, Window>,
    sends: Vec<PendingSend>,
    next_send: u64,
    held: HashMap<(usize, NodeRank), Ordered>,
    /// Why the fabric can no longer run collectives (one timed out).
    broken: Option<String>,
    /// This node.
    rank: NodeRank,
    /// Number of nodes.
    size: u32,
    /// Whether operations this node addresses to itself are carried out
    /// here, on its own memory, instead of through MPI: when the whole job
    /// runs on one host (see `post`).
    local_self: bool,
}

// SAFETY: `State` holds MPI handles (raw pointers into the MPI library) and
// the buffers MPI may still access. MPI handles are not tied to the thread
// that created them; with `MPI_THREAD_SERIALIZED` or better (checked in
// `join`) any thread may call MPI as long as calls do not overlap, which the
// `Mutex<State>` in `Shared` guarantees, since MPI is only called through a
// `&mut State` or before `State` is shared.
unsafe impl Send for State {}

impl State {
    fn new(_universe: &Universe) -> Result<Self> {
        let mut comm = ffi::MPI_Comm(std::ptr::null_mut());
        // SAFETY: MPI is initialised (a live `Universe` is borrowed), no
        // other thread calls MPI yet (see `join`), and `comm` is a valid
        // place for the new handle.
        let rc = unsafe { ffi::MPI_Comm_dup(comm_world(), &mut comm) };
        let mut state = Self {
            comm,
            windows: BTreeMap::new(),
            sends: Vec::new(),
            next_send: 0,
            held: HashMap::new(),
            broken: None,
            rank: NodeRank(0),
            size: 0,
            local_self: false,
        };
        state
            .check(rc, "duplicating MPI_COMM_WORLD")
            .map_err(unavailable)?;
        let (rank, size) = state.rank_and_size()?;
        (state.rank, state.size) = (rank, size);
        state.local_self = state.shared_memory_size()? == size;
        Ok(state)
    }

    /// How many nodes share this node's memory domain (its host), by
    /// `MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)`.
    fn shared_memory_size(&mut self) -> Result<u32> {
        let mut host = ffi::MPI_Comm(std::ptr::null_mut());
        // SAFETY: `self.comm` is live, `host` a valid place for the new
        // handle, and MPI is not used concurrently (see `State`).
        let rc = unsafe {
            ffi::MPI_Comm_split_type(self.comm, comm_type_shared(), 0, info_null(), &mut host)
        };
        self.fabric_error(rc, "MPI_Comm_split_type")?;
        let mut size = 0;
        // SAFETY: `host` was just created; `size` is a valid place for an int.
        let rc = unsafe { ffi::MPI_Comm_size(host, &mut size) };
        self.fabric_error(rc, "MPI_Comm_size")?;
        // SAFETY: `host` is live and nothing else refers to it.
        let rc = unsafe { ffi::MPI_Comm_free(&mut host) };
        self.fabric_error(rc, "MPI_Comm_free")?;
        u32::try_from(size).map_err(|_| unavailable("MPI reported a negative size"))
    }

    fn rank_and_size(&mut self) -> Result<(NodeRank, u32)> {
        let (mut rank, mut size) = (0, 0);
        // SAFETY: `self.comm` is the fabric's live communicator; the
        // outputs are valid places for an int.
        let rc = unsafe { ffi::MPI_Comm_rank(self.comm, &mut rank) };
        self.check(rc, "MPI_Comm_rank").map_err(unavailable)?;
        // SAFETY: as above.
        let rc = unsafe { ffi::MPI_Comm_size(self.comm, &mut size) };
        self.check(rc, "MPI_Comm_size").map_err(unavailable)?;
        let size = u32::try_from(size).map_err(|_| unavailable("MPI reported a negative size"))?;
        let rank = u32::try_from(rank).map_err(|_| unavailable("MPI reported a negative rank"))?;
        Ok((NodeRank(rank), size))
    }

    /// `Err` with MPI's description of `rc`, unless it is `MPI_SUCCESS`.
    fn check(&self, rc: c_int, what: &str) -> std::result::Result<(), String> {
        if rc == SUCCESS {
            return Ok(());
        }
        let mut text: [c_char; ffi::MPI_MAX_ERROR_STRING as usize] =
            [0; ffi::MPI_MAX_ERROR_STRING as usize];
        let mut len = 0;
        // SAFETY: `text` has room for MPI_MAX_ERROR_STRING characters, as
        // MPI_Error_string requires, and `&self` proves the lock is held.
        let described = unsafe { ffi::MPI_Error_string(rc, text.as_mut_ptr(), &mut len) };
        let description = if described == SUCCESS {
            // MPI_Error_string writes a NUL-terminated string that fits;
            // zeroing the last element keeps a terminator even if not.
            text[text.len() - 1] = 0;
            // SAFETY: `text` is NUL-terminated (just ensured) and lives
            // for the whole borrow.
            unsafe { CStr::from_ptr(text.as_ptr()) }
                .to_string_lossy()
                .into_owned()
        } else {
            format!("MPI error code {rc}")
        };
        Err(format!("{what} failed: {description}"))
    }

    fn fabric_error(&self, rc: c_int, what: &str) -> Result<()> {
        self.check(rc, what).map_err(unavailable)
    }

    /// Starts a non-blocking all-gather of one `u64` per node into `out`.
    ///
    /// # Safety
    /// `mine` and `out` (`size` words) must stay valid and untouched until
    /// `request` completes.
    unsafe fn start_gather_lens(
        &mut self,
        mine: *const u64,
        out: *mut u64,
        request: &mut ffi::MPI_Request,
    ) -> Result<()> {
        // SAFETY: the buffers are valid until completion (the caller's
        // contract); the communicator is live; the lock is held.
        let rc = unsafe {
            ffi::MPI_Iallgather(
                mine.cast(),
                1,
                datatype_u64(),
                out.cast(),
                1,
                datatype_u64(),
                self.comm,
                request,
            )
        };
        self.fabric_error(rc, "MPI_Iallgather")
    }

    /// Starts a non-blocking all-gather of `send` into `recv` at `displs`.
    ///
    /// # Safety
    /// Every buffer must stay valid and untouched until `request`
    /// completes; `counts` and `displs` have one entry per node and describe
    /// disjoint ranges of `recv`.
    unsafe fn start_gather_bytes(
        &mut self,
        send: &[u8],
        counts: &[c_int],
        displs: &[c_int],
        recv: *mut u8,
        request: &mut ffi::MPI_Request,
    ) -> Result<()> {
        let count = c_int::try_from(send.len()).map_err(|_| {
            Error::invalid(
                "all_gather",
                format!(
                    "an all_gather of {} bytes exceeds what MPI moves in one call",
                    send.len()
                ),
            )
        })?;
        // SAFETY: the buffers are valid until completion (the caller's
        // contract); the communicator is live; the lock is held.
        let rc = unsafe {
            ffi::MPI_Iallgatherv(
                send.as_ptr().cast(),
                count,
                datatype_u8(),
                recv.cast(),
                counts.as_ptr(),
                displs.as_ptr(),
                datatype_u8(),
                self.comm,
                request,
            )
        };
        self.fabric_error(rc, "MPI_Iallgatherv")
    }

    /// Whether `request` completed (it is then freed).
    fn test(&mut self, request: &mut ffi::MPI_Request) -> std::result::Result<bool, String> {
        let mut flag = 0;
        // SAFETY: `request` is a live request handle (or the null request)
        // and `flag` a valid place for an int; the lock is held.
        let rc = unsafe { ffi::MPI_Test(request, &mut flag, status_ignore()) };
        self.check(rc, "MPI_Test")?;
        Ok(flag != 0)
    }

    /// Opens a window over `memory` (collective, blocking); none in a job
    /// of one node, whose operations are all carried out locally.
    fn create_window(&mut self, memory: &Arc<Memory>) -> Result<Option<ffi::MPI_Win>> {
        if self.size == 1 {
            return Ok(None);
        }
        let bytes = memory.len().div_ceil(8) * 8;
        let size = ffi::MPI_Aint::try_from(bytes).map_err(|_| {
            Error::invalid(
                "len",
                format!("a region of {bytes} bytes is too large for MPI"),
            )
        })?;
        let mut win = ffi::MPI_Win(std::ptr::null_mut());
        // A library without a one-sided component that accepts this window
        // should fail registration with a reason, not abort the job.
        // SAFETY: the communicator is live; the lock is held.
        let rc = unsafe { ffi::MPI_Comm_set_errhandler(self.comm, errors_return()) };
        self.fabric_error(rc, "MPI_Comm_set_errhandler")?;
        // SAFETY: `memory` holds `bytes` bytes of 8-byte words starting at
        // `as_ptr()`, made of atomics (interior mutability), so MPI and
        // remote nodes may write them while Rust code holds shared
        // references. The window is stored with an `Arc` of the memory and
        // freed before that `Arc` is dropped, so the memory outlives every
        // access. Every node calls this in the same order (collective
        // registration); the lock is held.
        let rc = unsafe {
            ffi::MPI_Win_create(
                memory.as_ptr().cast_mut().cast::<c_void>(),
                size,
                1,
                info_null(),
                self.comm,
                &mut win,
            )
        };
        // SAFETY: as for the handler set above.
        let restored = unsafe { ffi::MPI_Comm_set_errhandler(self.comm, errors_are_fatal()) };
        self.check(rc, "MPI_Win_create").map_err(|err| {
            unavailable(format!(
                "{err} (no one-sided component of this MPI library accepts a window over \
                 this memory; with Open MPI, check `ompi_info | grep osc`)"
            ))
        })?;
        self.fabric_error(restored, "MPI_Comm_set_errhandler")?;
        // SAFETY: `win` was just created; the lock is held.
        let rc = unsafe { ffi::MPI_Win_lock_all(MODE_NOCHECK, win) };
        self.fabric_error(rc, "MPI_Win_lock_all")?;
        Ok(Some(win))
    }

    /// Completes every operation on every window and synchronises the
    /// windows' public and private copies, so that local loads see remote
    /// stores and the reverse (together with the collective around it).
    fn sync_windows(&mut self) -> Result<()> {
        for win in self.windows.values().filter_map(|window| window.win) {
            // SAFETY: `win` is live (windows leave the map when freed) and
            // locked for passive access; the lock is held.
            let rc = unsafe { ffi::MPI_Win_flush_all(win) };
            self.fabric_error(rc, "MPI_Win_flush_all")?;
            // SAFETY: as above.
            let rc = unsafe { ffi::MPI_Win_sync(win) };
            self.fabric_error(rc, "MPI_Win_sync")?;
        }
        Ok(())
    }

    /// Closes and frees the window of `key` (collective, blocking: every
    /// node frees the same windows in the same order).
    fn free_window(&mut self, key: u32) -> Result<()> {
        let Some(window) = self.windows.remove(&key) else {
            return Ok(());
        };
        if let Some(mut win) = window.win {
            // SAFETY: the window is live and locked with
            // `MPI_Win_lock_all`; the lock is held.
            let rc = unsafe { ffi::MPI_Win_unlock_all(win) };
            self.fabric_error(rc, "MPI_Win_unlock_all")?;
            // SAFETY: as above; after this no node accesses the memory,
            // which is released when `window` is dropped below.
            let rc = unsafe { ffi::MPI_Win_free(&mut win) };
            self.fabric_error(rc, "MPI_Win_free")?;
        }
        drop(window.memory);
        Ok(())
    }

    /// Checks an operation at the origin as the target's registry would:
    /// the key must name a window, the range lie inside the target's region,
    /// and an atomic be aligned. Returns the window (none in a job of one
    /// node) and the displacement.
    fn locate(
        &self,
        target: NodeRank,
        key: u32,
        offset: u64,
        len: usize,
        atomic: bool,
    ) -> std::result::Result<(Option<ffi::MPI_Win>, ffi::MPI_Aint), VerbError> {
        let window = self
            .windows
            .get(&key)
            .ok_or(VerbError::UnknownKey { node: target, key })?;
        let region_len = window.lens[target.index()];
        let out_of_bounds = || VerbError::OutOfBounds {
            node: target,
            key,
            offset,
            len: len as u64,
            region_len,
        };
        if offset
            .checked_add(len as u64)
            .is_none_or(|end| end > region_len)
        {
            return Err(out_of_bounds());
        }
        if atomic && !offset.is_multiple_of(8) {
            return Err(VerbError::Misaligned {
                node: target,
                key,
                offset,
            });
        }
        let disp = ffi::MPI_Aint::try_from(offset).map_err(|_| out_of_bounds())?;
        Ok((window.win, disp))
    }

    /// Carries out an operation this node addresses to itself directly on
    /// its memory (see `local_self`); `locate` checked key, range and
    /// alignment.
    fn local(&self, key: u32, offset: u64, op: Op) -> Output {
        let memory = &self.windows[&key].memory;
        let start = usize::try_from(offset).expect("locate checked the offset fits");
        match op {
            Op::Read { len, .. } => {
                let mut data = vec![0; len];
                memory.read(start, &mut data);
                Output::Data(data)
            }
            Op::Write { data, .. } => {
                memory.write(start, &data);
                Output::Written(data)
            }
            Op::CompareSwap { expected, new, .. } => Output::Value(
                match local_word(memory, start).compare_exchange(
                    expected,
                    new,
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(old) | Err(old) => old,
                },
            ),
            Op::FetchAdd { add, .. } => {
                Output::Value(local_word(memory, start).fetch_add(add, Ordering::AcqRel))
            }
            Op::Send { .. } | Op::Recv { .. } => unreachable!("only RMA is carried out locally"),
        }
    }

    /// Starts one RMA operation (checked by `locate`); its buffers are in
    /// the returned work, which must be kept until the target is flushed.
    fn issue(&mut self, target: NodeRank, win: ffi::MPI_Win, disp: ffi::MPI_Aint, op: Op) -> Work {
        let rank = mpi_rank(target);
        let issued = match op {
            Op::Read { len, .. } => {
                let mut data = vec![0u8; len];
                let base = data.as_mut_ptr();
                let rc = in_pieces(len, disp, |start, count, at| {
                    // SAFETY: `start..start + count` lies in `data`, which is
                    // writable and returned in the work, kept (not read,
                    // moved out of or dropped) until the flush towards
                    // `target`; `locate` checked the target range; the
                    // window is live and locked; the lock is held.
                    unsafe {
                        ffi::MPI_Get(
                            base.add(start).cast(),
                            count,
                            datatype_u8(),
                            rank,
                            at,
                            count,
                            datatype_u8(),
                            win,
                        )
                    }
                });
                (rc, "MPI_Get", Work::Read(data))
            }
            Op::Write { data, .. } => {
                let base = data.as_ptr();
                let rc = in_pieces(data.len(), disp, |start, count, at| {
                    // SAFETY: `start..start + count` lies in `data`, which is
                    // readable and returned in the work, kept until the
                    // flush towards `target`; the rest as for MPI_Get.
                    unsafe {
                        ffi::MPI_Put(
                            base.add(start).cast(),
                            count,
                            datatype_u8(),
                            rank,
                            at,
                            count,
                            datatype_u8(),
                            win,
                        )
                    }
                });
                (rc, "MPI_Put", Work::Write(data))
            }
            Op::CompareSwap { expected, new, .. } => {
                // [origin, compare, result]: a heap buffer whose address
                // does not change when the work is moved.
                let mut words = vec![new, expected, 0];
                let base = words.as_mut_ptr();
                // SAFETY: `base` points to three u64 in `words`, which is
                // returned in the work and kept until the flush towards
                // `target`; `locate` checked range and alignment; the
                // window is live and locked; the lock is held.
                let rc = unsafe {
                    ffi::MPI_Compare_and_swap(
                        base.cast_const().cast(),
                        base.add(1).cast_const().cast(),
                        base.add(2).cast(),
                        datatype_u64(),
                        rank,
                        disp,
                        win,
                    )
                };
                (rc, "MPI_Compare_and_swap", Work::Atomic(words))
            }
            Op::FetchAdd { add, .. } => {
                // [origin, unused, result], as for CAS.
                let mut words = vec![add, 0, 0];
                let base = words.as_mut_ptr();
                // SAFETY: as for MPI_Compare_and_swap.
                let rc = unsafe {
                    ffi::MPI_Fetch_and_op(
                        base.cast_const().cast(),
                        base.add(2).cast(),
                        datatype_u64(),
                        rank,
                        disp,
                        op_sum(),
                        win,
                    )
                };
                (rc, "MPI_Fetch_and_op", Work::Atomic(words))
            }
            Op::Send { .. } | Op::Recv { .. } => unreachable!("only RMA operations are issued"),
        };
        let (rc, what, work) = issued;
        match self.check(rc, what) {
            // The buffers stay in the work: MPI may have started using them.
            Ok(()) => work,
            Err(err) => Work::Failed(VerbError::Fabric(err), Box::new(work)),
        }
    }

    /// Completes the operations of one batch towards one target: flushes
    /// its windows, then delivers the completions in posted order.
    fn finish(&mut self, cq: &Arc<CompletionQueue>, target: NodeRank, pending: Pending) {
        let rank = mpi_rank(target);
        let mut failed = Vec::new();
        for (key, win) in pending.windows {
            // SAFETY: the window is live (windows are only freed under the
            // lock, which has been held since the operations were issued)
            // and locked; the lock is held.
            let rc = unsafe { ffi::MPI_Win_flush(rank, win) };
            if let Err(err) = self.check(rc, "MPI_Win_flush") {
                failed.push((key, err));
            }
        }
        // Every buffer handed to MPI for `target` is released only now,
        // after its flush.
        for entry in pending.entries {
            let flush_error = entry
                .key
                .and_then(|key| failed.iter().find(|(k, _)| *k == key))
                .map(|(_, err)| VerbError::Fabric(err.clone()));
            let result = match (flush_error, entry.work) {
                (_, Work::Ready(result)) => result,
                (_, Work::Failed(err, buffers)) => {
                    drop(buffers);
                    Err(err)
                }
                (Some(err), _) => Err(err),
                (None, Work::Read(data)) => Ok(Output::Data(data)),
                (None, Work::Write(data)) => Ok(Output::Written(data)),
                (None, Work::Atomic(words)) => Ok(Output::Value(words[2])),
            };
            self.complete(
                cq,
                target,
                Completion::new(entry.wr_id, entry.verb, target, result),
            );
        }
    }

    /// Delivers a completion towards `target`, behind any SEND of the same
    /// queue to it that is still in flight.
    fn complete(&mut self, cq: &Arc<CompletionQueue>, target: NodeRank, completion: Completion) {
        match self.held.get_mut(&(cq_id(cq), target)) {
            Some(ordered) => ordered.slots.push_back(Slot::Ready(completion)),
            None => cq.push(completion),
        }
    }

    /// Starts a SEND; it completes when the target matched it.
    fn send(&mut self, cq: &Arc<CompletionQueue>, wr_id: u64, to: NodeRank, data: Vec<u8>) {
        let Ok(count) = c_int::try_from(data.len()) else {
            let err = VerbError::Fabric(format!(
                "a message of {} bytes exceeds what MPI sends in one call",
                data.len()
            ));
            self.complete(cq, to, Completion::new(wr_id, Verb::Send, to, Err(err)));
            return;
        };
        let data = allocated(data);
        let mut request = request_null();
        // SAFETY: `data` is readable for `count` bytes; its heap buffer is
        // moved into the `PendingSend` below and kept until `MPI_Test`
        // reports the request complete; the communicator is live; the lock
        // is held.
        let rc = unsafe {
            ffi::MPI_Issend(
                data.as_ptr().cast(),
                count,
                datatype_u8(),
                mpi_rank(to),
                TAG,
                self.comm,
                &mut request,
            )
        };
        if let Err(err) = self.check(rc, "MPI_Issend") {
            let err = VerbError::Fabric(err);
            self.complete(cq, to, Completion::new(wr_id, Verb::Send, to, Err(err)));
            return;
        }
        let id = self.next_send;
        self.next_send += 1;
        self.held
            .entry((cq_id(cq), to))
            .or_insert_with(|| Ordered {
                cq: Arc::clone(cq),
                slots: VecDeque::new(),
            })
            .slots
            .push_back(Slot::Send(id));
        self.sends.push(PendingSend {
            id,
            request,
            data,
            cq: Arc::clone(cq),
            wr_id,
            to,
        });
    }

    /// Tests the SENDs in flight; delivers those that completed. Returns
    /// how many did.
    fn poll_sends(&mut self) -> usize {
        let mut done = 0;
        let mut i = 0;
        while i < self.sends.len() {
            let mut request = self.sends[i].request;
            let tested = self.test(&mut request);
            self.sends[i].request = request;
            let result = match tested {
                Ok(false) => {
                    i += 1;
                    continue;
                }
                Ok(true) => Ok(Output::Done),
                Err(err) => Err(VerbError::Fabric(err)),
            };
            let send = self.sends.swap_remove(i);
            done += 1;
            self.settle(send, result);
        }
        done
    }

    fn settle(&mut self, send: PendingSend, result: std::result::Result<Output, VerbError>) {
        let completion = Completion::new(send.wr_id, Verb::Send, send.to, result);
        let key = (cq_id(&send.cq), send.to);
        let Some(ordered) = self.held.get_mut(&key) else {
            unreachable!("a SEND in flight holds its slot");
        };
        if let Some(slot) = ordered
            .slots
            .iter_mut()
            .find(|slot| matches!(slot, Slot::Send(id) if *id == send.id))
        {
            *slot = Slot::Ready(completion);
        }
        while let Some(Slot::Ready(_)) = ordered.slots.front() {
            if let Some(Slot::Ready(completion)) = ordered.slots.pop_front() {
                ordered.cq.push(completion);
            }
        }
        if ordered.slots.is_empty() {
            self.held.remove(&key);
        }
        // The SEND's buffer is released only now, after its completion.
        drop(send.data);
    }

    /// Receives up to a turn's worth of messages into `mailbox`. Returns
    /// how many arrived.
    fn poll_incoming(&mut self, mailbox: &Mailbox) -> usize {
        let mut received = 0;
        while received < RECEIVES_PER_TURN {
            let mut flag = 0;
            let mut message = ffi::MPI_Message(std::ptr::null_mut());
            // SAFETY: MPI_Status is a C struct of integers, for which all
            // zero bytes are a valid value.
            let mut status: ffi::MPI_Status = unsafe { std::mem::zeroed() };
            // SAFETY: the outputs are valid places of their types; the
            // communicator is live; the lock is held.
            let rc = unsafe {
                ffi::MPI_Improbe(
                    any_source(),
                    TAG,
                    self.comm,
                    &mut flag,
                    &mut message,
                    &mut status,
                )
            };
            if let Err(err) = self.check(rc, "MPI_Improbe") {
                tracing::error!("mpi progress: {err}");
                break;
            }
            if flag == 0 {
                break;
            }
            let mut count = 0;
            // SAFETY: `status` was filled by the matching probe.
            let rc = unsafe { ffi::MPI_Get_count(&status, datatype_u8(), &mut count) };
            let len = match self.check(rc, "MPI_Get_count") {
                Ok(()) => usize::try_from(count).unwrap_or(0),
                Err(err) => {
                    tracing::error!("mpi progress: {err}");
                    0
                }
            };
            let mut data = zeroed_bytes(len);
            // SAFETY: `data` is writable for `count` bytes (the message's
            // exact size) and `message` is the handle the probe matched;
            // the lock is held.
            let rc = unsafe {
                ffi::MPI_Mrecv(
                    data.as_mut_ptr().cast(),
                    c_int::try_from(len).unwrap_or(0),
                    datatype_u8(),
                    &mut message,
                    status_ignore(),
                )
            };
            if let Err(err) = self.check(rc, "MPI_Mrecv") {
                tracing::error!("mpi progress: {err}");
                break;
            }
            received += 1;
            match u32::try_from(status.MPI_SOURCE) {
                Ok(from) => mailbox.deliver(NodeRank(from), data, 0),
                Err(_) => tracing::error!(
                    "mpi progress: a message from rank {} dropped",
                    status.MPI_SOURCE
                ),
            }
        }
        received
    }

    fn free_comm(&mut self) -> Result<()> {
        // SAFETY: the communicator is live and no request on it is
        // outstanding (sends completed, gathers waited for); the lock is held.
        let rc = unsafe { ffi::MPI_Comm_free(&mut self.comm) };
        self.fabric_error(rc, "MPI_Comm_free")
    }
}

/// One RMA operation of a batch, with the buffers MPI uses until its flush.
enum Work {
    /// Completed at the origin (a failed check) without reaching MPI.
    Ready(std::result::Result<Output, VerbError>),
    Read(Vec<u8>),
    Write(Vec<u8>),
    /// `[origin, compare, result]`.
    Atomic(Vec<u64>),
    /// MPI refused to start it; the buffers are kept until the flush anyway.
    Failed(VerbError, Box<Work>),
}

struct Entry {
    wr_id: u64,
    verb: Verb,
    /// The window it was issued on (`None` if it completed at the origin).
    key: Option<u32>,
    work: Work,
}

/// The operations of one batch towards one target since its last flush.
#[derive(Default)]
struct Pending {
    windows: Vec<(u32, ffi::MPI_Win)>,
    reads: bool,
    writes: bool,
    atomics: bool,
    entries: Vec<Entry>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    Read,
    Write,
    Atomic,
}

impl Pending {
    /// Whether MPI might reorder an operation of `access` on window `key`
    /// with those already pending; MPI orders neither gets and puts with
    /// each other nor anything across windows, but does order atomics
    /// (accumulates) on one window among themselves.
    fn conflicts(&self, key: u32, access: Access) -> bool {
        let other_window = self.windows.iter().any(|&(k, _)| k != key);
        match access {
            Access::Read => self.writes || self.atomics,
            Access::Write => !self.windows.is_empty(),
            Access::Atomic => self.reads || self.writes || other_window,
        }
    }

    fn add(&mut self, key: u32, win: ffi::MPI_Win, access: Access, entry: Entry) {
        if !self.windows.iter().any(|&(k, _)| k == key) {
            self.windows.push((key, win));
        }
        match access {
            Access::Read => self.reads = true,
            Access::Write => self.writes = true,
            Access::Atomic => self.atomics = true,
        }
        self.entries.push(entry);
    }
}

/// What the fabric's threads share: the MPI state behind its lock, and the
/// node's registry and mailbox.
struct Shared {
    /// The one lock every MPI call of the fabric is made under.
    mpi: Mutex<State>,
    /// Held for a whole collective, so that the MPI collectives of two
    /// threads never interleave (every node must issue them in one order).
    collective: Mutex<()>,
    registry: Arc<Registry>,
    mailbox: Mailbox,
    /// Keys of regions this node dropped whose windows are not freed yet.
    released: Arc<Mutex<BTreeSet<u32>>>,
    stop: AtomicBool,
}

impl Shared {
    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.mpi)
    }
}

/// Dropped with a [`Region`]: marks its window as released here.
struct Release {
    key: u32,
    released: Arc<Mutex<BTreeSet<u32>>>,
}

impl Drop for Release {
    fn drop(&mut self) {
        lock(&self.released).insert(self.key);
    }
}

/// Waits politely: a few yields (answers often come within microseconds),
/// then sleeps growing to `max`.
struct Backoff {
    idle: u32,
    max: Duration,
}

impl Backoff {
    fn new(max: Duration) -> Self {
        Self { idle: 0, max }
    }

    fn reset(&mut self) {
        self.idle = 0;
    }

    fn snooze(&mut self) {
        const YIELDS: u32 = 16;
        if self.idle < YIELDS {
            std::thread::yield_now();
        } else {
            let shift = (self.idle - YIELDS).min(10);
            std::thread::sleep((Duration::from_micros(5) * (1 << shift)).min(self.max));
        }
        self.idle = self.idle.saturating_add(1);
    }
}

/// The progress thread: receives messages and completes SENDs until told
/// to stop, sleeping briefly whenever a turn found nothing to do.
fn progress(shared: &Shared) {
    let mut backoff = Backoff::new(Duration::from_millis(1));
    while !shared.stop.load(Ordering::Acquire) {
        let progressed = {
            let mut state = shared.state();
            state.poll_incoming(&shared.mailbox) + state.poll_sends()
        };
        if progressed > 0 {
            backoff.reset();
        } else {
            backoff.snooze();
        }
    }
}

/// One node's MPI fabric.
struct MpiFabric {
    rank: NodeRank,
    size: u32,
    timeout: Duration,
    shared: Arc<Shared>,
    progress: Option<JoinHandle<()>>,
    /// Finalises MPI when dropped, last.
    universe: Option<Universe>,
}

impl fmt::Debug for MpiFabric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MpiFabric")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

/// The buffers of a non-blocking all-gather, which belong to MPI until it
/// completes (and are leaked if it never does).
struct Gathering {
    /// This node's length (one word; a `Vec` like the other buffers).
    mine: Vec<u64>,
    lens: Vec<u64>,
    send: Vec<u8>,
    counts: Vec<c_int>,
    displs: Vec<c_int>,
    recv: Vec<u8>,
}

impl MpiFabric {
    /// Refuses collectives once one timed out: the nodes are out of step.
    fn check_in_step(&self) -> Result<()> {
        match &self.shared.state().broken {
            Some(reason) => Err(unavailable(format!(
                "the job is out of step since {reason}"
            ))),
            None => Ok(()),
        }
    }

    /// Every node's `data`, by rank: the all-gather on which the other
    /// collectives are built, waiting at most the node's timeout. The
    /// caller holds the collective lock.
    fn gather(&self, data: Vec<u8>) -> Result<Vec<Vec<u8>>> {
        self.check_in_step()?;
        let n = self.size as usize;
        let deadline = Instant::now() + self.timeout;
        let mut g = Gathering {
            mine: vec![data.len() as u64],
            lens: vec![0; n],
            send: allocated(data),
            counts: Vec::new(),
            displs: Vec::new(),
            recv: Vec::new(),
        };
        let mut request = request_null();
        // SAFETY: `g` owns both buffers and is only leaked, never dropped
        // or touched, if the request does not complete (see `wait`).
        unsafe {
            self.shared.state().start_gather_lens(
                g.mine.as_ptr(),
                g.lens.as_mut_ptr(),
                &mut request,
            )?;
        }
        let mut g = self.wait(g, &mut request, deadline)?;
        let mut total: c_int = 0;
        for (rank, &len) in g.lens.iter().enumerate() {
            let count = c_int::try_from(len)
                .ok()
                .filter(|count| total.checked_add(*count).is_some())
                .ok_or_else(|| {
                    Error::invalid(
                        "all_gather",
                        format!(
                        "an all_gather collecting {len} bytes from node {rank} exceeds what MPI \
                         moves in one call"
                    ),
                    )
                })?;
            g.counts.push(count);
            g.displs.push(total);
            total += count;
        }
        g.recv = zeroed_bytes(usize::try_from(total).expect("a non-negative total"));
        let mut request = request_null();
        // SAFETY: as above; `counts` and `displs` describe consecutive,
        // disjoint ranges of `recv`, one per node.
        unsafe {
            let recv = g.recv.as_mut_ptr();
            self.shared.state().start_gather_bytes(
                &g.send,
                &g.counts,
                &g.displs,
                recv,
                &mut request,
            )?;
        }
        let g = self.wait(g, &mut request, deadline)?;
        Ok(g.counts
            .iter()
            .zip(&g.displs)
            .map(|(&count, &displ)| {
                let start = usize::try_from(displ).expect("a non-negative displacement");
                let len = usize::try_from(count).expect("a non-negative count");
                g.recv[start..start + len].to_vec()
            })
            .collect())
    }

    /// Waits for a collective, releasing the lock between tests so that
    /// other threads and the progress thread can use MPI meanwhile. Gives
    /// the buffers back once MPI is done with them; on a timeout they are
    /// leaked, since MPI still owns them.
    fn wait(
        &self,
        buffers: Gathering,
        request: &mut ffi::MPI_Request,
        deadline: Instant,
    ) -> Result<Gathering> {
        let mut backoff = Backoff::new(Duration::from_micros(200));
        loop {
            let done = self.shared.state().test(request);
            match done {
                Ok(true) => return Ok(buffers),
                Ok(false) => {}
                Err(err) => {
                    std::mem::forget(buffers);
                    self.shared.state().broken = Some(format!("a collective failed: {err}"));
                    return Err(unavailable(err));
                }
            }
            if Instant::now() >= deadline {
                std::mem::forget(buffers);
                self.shared.state().broken =
                    Some(format!("a collective timed out after {:?}", self.timeout));
                return Err(Error::Timeout {
                    what: format!(
                        "in a collective on node {}: not every node reached it",
                        self.rank
                    ),
                    after: self.timeout,
                });
            }
            backoff.snooze();
        }
    }

    /// The shutdown handshake: every node reaches it, waits for its SENDs,
    /// and meets the others again, so no message is in flight afterwards.
    fn quiesce(&self) -> Result<()> {
        let _collective = lock(&self.shared.collective);
        self.gather(Vec::new())?;
        let deadline = Instant::now() + self.timeout;
        let mut backoff = Backoff::new(Duration::from_millis(1));
        while !self.shared.state().sends.is_empty() {
            if Instant::now() >= deadline {
                return Err(Error::Timeout {
                    what: format!("for node {}'s SENDs to be received", self.rank),
                    after: self.timeout,
                });
            }
            backoff.snooze();
        }
        self.gather(Vec::new()).map(drop)
    }
}

/// Appends the keys of released regions to an all-gather contribution:
/// the keys (u32 LE each), then their count (u32 LE).
fn with_released(mut data: Vec<u8>, keys: &BTreeSet<u32>) -> Vec<u8> {
    for key in keys {
        data.extend(key.to_le_bytes());
    }
    let count = u32::try_from(keys.len()).expect("keys are u32, so there are fewer than 2^32");
    data.extend(count.to_le_bytes());
    data
}

/// Splits what [`with_released`] appended off a contribution.
fn split_released(data: &mut Vec<u8>) -> Option<BTreeSet<u32>> {
    let at = data.len().checked_sub(4)?;
    let count = u32::from_le_bytes(data[at..].try_into().ok()?);
    let keys_at = at.checked_sub(usize::try_from(count).ok()?.checked_mul(4)?)?;
    let keys = data[keys_at..at]
        .chunks_exact(4)
        .map(|word| u32::from_le_bytes(word.try_into().expect("chunks of 4 bytes")))
        .collect();
    data.truncate(keys_at);
    Some(keys)
}

impl Fabric for MpiFabric {
    fn register(&self, len: usize) -> Result<Region> {
        let _collective = lock(&self.shared.collective);
        // Lengths first: a node missing here fails the others after the
        // timeout, instead of hanging them in MPI_Win_create.
        let lens = self
            .gather((len as u64).to_le_bytes().to_vec())?
            .iter()
            .enumerate()
            .map(|(rank, bytes)| {
                let word: [u8; 8] = bytes.as_slice().try_into().map_err(|_| {
                    Error::Bootstrap(format!("node {rank} sent a malformed region length"))
                })?;
                Ok(u64::from_le_bytes(word))
            })
            .collect::<Result<Vec<u64>>>()?;
        let mut region = self.shared.registry.register(self.rank, len);
        let key = region.remote().key;
        let memory = Arc::clone(region.memory());
        let mut state = self.shared.state();
        let win = state.create_window(&memory)?;
        state.windows.insert(key, Window { win, lens, memory });
        drop(state);
        region.attach_registration(
            Box::new(Release {
                key,
                released: Arc::clone(&self.shared.released),
            }),
            0,
        );
        Ok(region)
    }

    fn post(&self, cq: &Arc<CompletionQueue>, _now_ns: u64, wrs: Vec<WorkRequest>) {
        let mut state = self.shared.state();
        let mut batch: BTreeMap<NodeRank, Pending> = BTreeMap::new();
        for WorkRequest { wr_id, op } in wrs {
            let verb = op.verb();
            let op = match op {
                Op::Recv { capacity } => {
                    self.shared.mailbox.post(wr_id, capacity, cq);
                    continue;
                }
                Op::Send { to, data } => {
                    // Everything before the SEND towards its target takes
                    // effect, and completes, first.
                    if let Some(pending) = batch.remove(&to) {
                        state.finish(cq, to, pending);
                    }
                    state.send(cq, wr_id, to, data);
                    continue;
                }
                rma => rma,
            };
            let (remote, offset, len, access) = match &op {
                Op::Read {
                    remote,
                    offset,
                    len,
                } => (*remote, *offset, *len, Access::Read),
                Op::Write {
                    remote,
                    offset,
                    data,
                } => (*remote, *offset, data.len(), Access::Write),
                Op::CompareSwap { remote, offset, .. } | Op::FetchAdd { remote, offset, .. } => {
                    (*remote, *offset, 8, Access::Atomic)
                }
                Op::Send { .. } | Op::Recv { .. } => unreachable!("handled above"),
            };
            let target = remote.node;
            let located = state.locate(target, remote.key, offset, len, access == Access::Atomic);
            let (win, disp) = match located {
                Ok(found) => found,
                Err(err) => {
                    batch.entry(target).or_default().entries.push(Entry {
                        wr_id,
                        verb,
                        key: None,
                        work: Work::Ready(Err(err)),
                    });
                    continue;
                }
            };
            if len == 0 {
                let output = if access == Access::Read {
                    Output::Data(Vec::new())
                } else {
                    Output::Written(Vec::new())
                };
                batch.entry(target).or_default().entries.push(Entry {
                    wr_id,
                    verb,
                    key: None,
                    work: Work::Ready(Ok(output)),
                });
                continue;
            }
            if target == state.rank && state.local_self {
                // On one host, remote operations on this node's memory are
                // memory copies and CPU atomics (or are carried out by this
                // node's MPI progress, which waits for the lock held here),
                // so carrying ours out directly on the memory is equivalent,
                // and atomic with theirs. It also avoids Open MPI 4.1's
                // osc/rdma, which crashes on a 64-bit MPI_Compare_and_swap a
                // rank addresses to itself over btl/vader
                // (open-mpi/ompi#7967, #11349), and needs no window in a job
                // of one node. Nothing to this node is ever pending in MPI.
                let output = state.local(remote.key, offset, op);
                batch.entry(target).or_default().entries.push(Entry {
                    wr_id,
                    verb,
                    key: None,
                    work: Work::Ready(Ok(output)),
                });
                continue;
            }
            let win = win.expect("windows exist whenever a node has peers");
            if batch
                .get(&target)
                .is_some_and(|pending| pending.conflicts(remote.key, access))
            {
                if let Some(pending) = batch.remove(&target) {
                    state.finish(cq, target, pending);
                }
            }
            let work = state.issue(target, win, disp, op);
            let entry = Entry {
                wr_id,
                verb,
                key: Some(remote.key),
                work,
            };
            batch
                .entry(target)
                .or_default()
                .add(remote.key, win, access, entry);
        }
        for (target, pending) in batch {
            state.finish(cq, target, pending);
        }
    }

    fn all_gather(&self, data: Vec<u8>) -> Result<Vec<Vec<u8>>> {
        let _collective = lock(&self.shared.collective);
        self.shared.state().sync_windows()?;
        let released = lock(&self.shared.released).clone();
        let gathered = self.gather(with_released(data, &released))?;
        let mut common: Option<BTreeSet<u32>> = None;
        let mut results = Vec::with_capacity(gathered.len());
        for (rank, mut bytes) in gathered.into_iter().enumerate() {
            let keys = split_released(&mut bytes).ok_or_else(|| {
                Error::Bootstrap(format!(
                    "node {rank} sent a malformed all_gather contribution"
                ))
            })?;
            common = Some(match common {
                None => keys,
                Some(common) => common.intersection(&keys).copied().collect(),
            });
            results.push(bytes);
        }
        let common = common.unwrap_or_default();
        let mut state = self.shared.state();
        // Every node computed the same set from the same contributions, so
        // all free the same windows, in key order.
        for &key in &common {
            state.free_window(key)?;
        }
        state.sync_windows()?;
        drop(state);
        lock(&self.shared.released).retain(|key| !common.contains(key));
        Ok(results)
    }
}

impl Drop for MpiFabric {
    fn drop(&mut self) {
        let quiet = self.quiesce();
        self.shared.stop.store(true, Ordering::Release);
        if let Some(progress) = self.progress.take() {
            if progress.join().is_err() {
                tracing::error!("the mpi progress thread panicked");
            }
        }
        let mut state = self.shared.state();
        let finalized = quiet.and_then(|()| {
            if let Some(reason) = &state.broken {
                return Err(unavailable(reason.clone()));
            }
            let keys: Vec<u32> = state.windows.keys().copied().collect();
            for key in keys {
                state.free_window(key)?;
            }
            state.free_comm()
        });
        match finalized {
            Ok(()) => drop(self.universe.take()),
            Err(err) => {
                // MPI may still own buffers (a collective, SENDs, windows
                // peers can reach) and MPI_Finalize could wait forever for
                // the other nodes: leak it all and leave without finalising,
                // which the launcher reports as a failed job.
                tracing::error!(
                    "node {}: leaving the MPI job without MPI_Finalize: {err}",
                    self.rank
                );
                std::mem::forget(std::mem::take(&mut state.windows));
                std::mem::forget(std::mem::take(&mut state.sends));
                std::mem::forget(self.universe.take());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn released_keys_round_trip() {
        let keys: BTreeSet<u32> = [3, 9, 0x5a5a_0001].into_iter().collect();
        let mut data = with_released(vec![1, 2, 3], &keys);
        assert_eq!(split_released(&mut data), Some(keys));
        assert_eq!(data, [1, 2, 3]);
        let mut empty = with_released(Vec::new(), &BTreeSet::new());
        assert_eq!(split_released(&mut empty), Some(BTreeSet::new()));
        assert!(empty.is_empty());
        assert_eq!(split_released(&mut vec![1, 0, 0]), None);
        assert_eq!(split_released(&mut vec![5, 0, 0, 0]), None);
    }

    #[test]
    fn conflicts_follow_mpi_ordering() {
        let win = ffi::MPI_Win(std::ptr::null_mut());
        let entry = || Entry {
            wr_id: 0,
            verb: Verb::Read,
            key: None,
            work: Work::Ready(Ok(Output::Done)),
        };
        let mut pending = Pending::default();
        assert!(!pending.conflicts(1, Access::Write));
        pending.add(1, win, Access::Read, entry());
        assert!(!pending.conflicts(1, Access::Read));
        assert!(!pending.conflicts(2, Access::Read));
        assert!(pending.conflicts(1, Access::Write));
        assert!(pending.conflicts(1, Access::Atomic));
        let mut atomics = Pending::default();
        atomics.add(1, win, Access::Atomic, entry());
        assert!(!atomics.conflicts(1, Access::Atomic));
        assert!(atomics.conflicts(2, Access::Atomic));
        assert!(atomics.conflicts(1, Access::Read));
    }
}
