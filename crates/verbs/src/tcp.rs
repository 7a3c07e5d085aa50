//! The `tcp` fabric: one process per node, a full mesh of TCP connections,
//! and a NIC in every process.
//!
//! The NIC is a reader thread per connection that serves the peer's
//! one-sided requests against this node's registered regions (the
//! application's threads take no part, so one-sided semantics hold across
//! processes), delivers its messages to the node's receive matching, and
//! completes this node's own requests from the peer's responses. A peer
//! serves requests in arrival order and answers in the same order, which is
//! what makes per-queue, per-peer ordering hold.
//!
//! Costs: a posted batch to one peer is encoded into one buffer and handed
//! to the kernel in one `send`; responses to requests that arrived together
//! leave together. A request is written by the posting thread itself when
//! the connection is idle (no hop to another thread), and by the
//! connection's writer thread when the socket is backed up, so no reader
//! ever blocks on a write (two nodes flooding each other cannot deadlock).
//!
//! Failure: a connection that breaks fails every outstanding operation on
//! it with [`VerbError::PeerLost`], and later operations at once; the
//! coordinator's failure notice does the same for the failed node.

use std::collections::VecDeque;
use std::io::{BufReader, Read};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::cluster::{Launch, Membership};
use crate::counters::CounterTable;
use crate::error::{Error, Result, VerbError};
use crate::node::{Fabric, Node};
use crate::queue::{CompletionQueue, Mailbox};
use crate::region::{Region, Registry};
use crate::wr::{Completion, Op, Output, Verb, WorkRequest};
use crate::NodeRank;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // The guarded data (buffers, queues of pending requests) stays
    // consistent across a panic, so poison is ignored.
    mutex.lock().unwrap_or_else(|poison| poison.into_inner())
}

/// Joins the job described by `launch` over TCP: hosts the coordinator if
/// this node is to, meets every node through it, connects to every peer,
/// and starts this process's NIC.
///
/// # Errors
/// [`Error::Bootstrap`] (unreachable or refusing coordinator, bad rank or
/// size), [`Error::NodeFailed`] (a node never arrived), [`Error::Io`].
pub fn join(launch: &Launch) -> Result<Node> {
    let listener = TcpListener::bind("0.0.0.0:0")
        .map_err(|e| Error::io("listening for peer connections", e))?;
    let port = listener
        .local_addr()
        .map_err(|e| Error::io("reading the peer listener's address", e))?
        .port();
    let conns: Arc<OnceLock<Vec<Option<Arc<Conn>>>>> = Arc::new(OnceLock::new());
    let notified = Arc::clone(&conns);
    let membership = Membership::join(launch, port, move |node, reason| {
        if let Some(conn) = notified
            .get()
            .and_then(|conns| conns.get(node.index()))
            .and_then(Option::as_ref)
        {
            conn.lose(&format!("the coordinator reports it failed: {reason}"));
        }
    })?;
    let streams = mesh(launch, &listener, membership.control().peers())?;
    let registry = Arc::new(Registry::default());
    let mailbox = Arc::new(Mailbox::default());
    let mut threads = Vec::new();
    let mut table = Vec::new();
    for (rank, stream) in streams.into_iter().enumerate() {
        let Some(stream) = stream else {
            table.push(None);
            continue;
        };
        let peer = NodeRank(u32::try_from(rank).expect("ranks fit u32"));
        let conn = Arc::new(Conn::new(peer, &stream)?);
        let reader = NicReader {
            me: launch.rank,
            conn: Arc::clone(&conn),
            registry: Arc::clone(&registry),
            mailbox: Arc::clone(&mailbox),
        };
        threads.push(spawn(format!("nic-read-{rank}"), move || {
            reader.run(stream)
        })?);
        let writer = Arc::clone(&conn);
        threads.push(spawn(format!("nic-write-{rank}"), move || {
            writer.outbox.drain()
        })?);
        table.push(Some(conn));
    }
    conns.set(table).expect("the connection table is set once");
    let fabric = Tcp {
        rank: launch.rank,
        registry,
        mailbox,
        conns,
        membership,
        threads: Mutex::new(threads),
    };
    let counters = Arc::new(CounterTable::new(launch.size));
    Ok(Node::new(
        launch.rank,
        launch.size,
        "tcp",
        launch.timeout,
        counters,
        Box::new(fabric),
    ))
}

fn spawn(name: String, body: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name(name)
        .spawn(body)
        .map_err(|e| Error::io("starting a NIC thread", e))
}

const HANDSHAKE: [u8; 4] = *b"QVRB";

/// Responses held back for one write at most this many bytes.
const RESPONSE_FLUSH: usize = 1 << 20;

/// How long a NIC reader polls for responses before sleeping in `read`.
const POLL_WINDOW: Duration = Duration::from_micros(200);

/// Connects to every lower rank and accepts every higher one; returns the
/// streams by rank (`None` for this node).
fn mesh(
    launch: &Launch,
    listener: &TcpListener,
    peers: &[String],
) -> Result<Vec<Option<TcpStream>>> {
    let me = launch.rank.index();
    let deadline = Instant::now() + launch.timeout;
    let mut streams: Vec<Option<TcpStream>> = (0..peers.len()).map(|_| None).collect();
    for (rank, addr) in peers.iter().enumerate().take(me) {
        let addr: SocketAddr = addr.parse().map_err(|err| {
            Error::Bootstrap(format!(
                "node {rank} announced an unusable address {addr:?}: {err}"
            ))
        })?;
        let mut stream =
            TcpStream::connect_timeout(&addr, launch.timeout).map_err(|err| Error::NodeFailed {
                node: NodeRank(u32::try_from(rank).expect("ranks fit u32")),
                reason: format!("cannot connect to it at {addr}: {err}"),
            })?;
        let mut hello = HANDSHAKE.to_vec();
        hello.extend(launch.rank.0.to_le_bytes());
        hello.extend(launch.size.to_le_bytes());
        send_all(&stream, &hello).map_err(|e| Error::io(format!("greeting node {rank}"), e))?;
        stream
            .set_nodelay(true)
            .map_err(|e| Error::io("configuring a peer connection", e))?;
        let mut ack = [0u8; 1];
        stream
            .set_read_timeout(Some(launch.timeout))
            .map_err(|e| Error::io("configuring a peer connection", e))?;
        stream
            .read_exact(&mut ack)
            .map_err(|err| Error::NodeFailed {
                node: NodeRank(u32::try_from(rank).expect("ranks fit u32")),
                reason: format!("it did not accept our connection: {err}"),
            })?;
        stream
            .set_read_timeout(None)
            .map_err(|e| Error::io("configuring a peer connection", e))?;
        streams[rank] = Some(stream);
    }
    listener
        .set_nonblocking(true)
        .map_err(|e| Error::io("configuring the peer listener", e))?;
    while streams
        .iter()
        .enumerate()
        .any(|(rank, s)| rank > me && s.is_none())
    {
        match listener.accept() {
            Ok((mut stream, from)) => {
                stream
                    .set_nonblocking(false)
                    .map_err(|e| Error::io("configuring a peer connection", e))?;
                stream
                    .set_read_timeout(Some(launch.timeout))
                    .map_err(|e| Error::io("configuring a peer connection", e))?;
                let mut hello = [0u8; 12];
                stream
                    .read_exact(&mut hello)
                    .map_err(|e| Error::io(format!("reading the greeting of {from}"), e))?;
                let rank = u32::from_le_bytes(hello[4..8].try_into().expect("4 bytes"));
                let size = u32::from_le_bytes(hello[8..12].try_into().expect("4 bytes"));
                if hello[..4] != HANDSHAKE
                    || size != launch.size
                    || rank <= launch.rank.0
                    || rank >= size
                    || streams[rank as usize].is_some()
                {
                    return Err(Error::Bootstrap(format!(
                        "{from} greeted us as node {rank} of {size}; expected a higher rank of a {}-node job",
                        launch.size
                    )));
                }
                stream
                    .set_read_timeout(None)
                    .map_err(|e| Error::io("configuring a peer connection", e))?;
                stream
                    .set_nodelay(true)
                    .map_err(|e| Error::io("configuring a peer connection", e))?;
                send_all(&stream, &[1])
                    .map_err(|e| Error::io(format!("accepting node {rank}"), e))?;
                streams[rank as usize] = Some(stream);
            }
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    let missing = (me + 1..peers.len())
                        .find(|&r| streams[r].is_none())
                        .unwrap_or(me);
                    return Err(Error::NodeFailed {
                        node: NodeRank(u32::try_from(missing).expect("ranks fit u32")),
                        reason: format!(
                            "it did not connect to node {me} within {:?}",
                            launch.timeout
                        ),
                    });
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(err) => return Err(Error::io("accepting a peer connection", err)),
        }
    }
    Ok(streams)
}

/// One `send(2)` of `data` with `flags` (always `MSG_NOSIGNAL`, so a
/// closed peer is an error, never SIGPIPE), retried when interrupted.
fn send_once(stream: &TcpStream, data: &[u8], flags: libc::c_int) -> std::io::Result<usize> {
    loop {
        // SAFETY: the pointer and length describe `data`, a live slice, and
        // the descriptor is owned by `stream`, open for the whole call.
        let n = unsafe {
            libc::send(
                stream.as_raw_fd(),
                data.as_ptr().cast(),
                data.len(),
                flags | libc::MSG_NOSIGNAL,
            )
        };
        match usize::try_from(n) {
            Ok(n) => return Ok(n),
            Err(_) => {
                let err = std::io::Error::last_os_error();
                if err.kind() != std::io::ErrorKind::Interrupted {
                    return Err(err);
                }
            }
        }
    }
}

/// Sends `data` right away without blocking; returns how much the kernel took.
fn send_now(stream: &TcpStream, data: &[u8]) -> std::io::Result<usize> {
    match send_once(stream, data, libc::MSG_DONTWAIT) {
        Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => Ok(0),
        other => other,
    }
}

/// Sends all of `data`, blocking as needed.
fn send_all(stream: &TcpStream, mut data: &[u8]) -> std::io::Result<()> {
    while !data.is_empty() {
        match send_once(stream, data, 0)? {
            0 => return Err(std::io::ErrorKind::WriteZero.into()),
            n => data = &data[n..],
        }
    }
    Ok(())
}

/// Bytes waiting to go out on a connection.
#[derive(Debug)]
struct Outbox {
    stream: TcpStream,
    state: Mutex<OutState>,
    wake: Condvar,
}

#[derive(Debug, Default)]
struct OutState {
    buf: Vec<u8>,
    flushing: bool,
    closed: bool,
}

impl Outbox {
    /// Queues `data` after everything queued before; writes it at once when
    /// nothing is queued and the socket has room. Never blocks on the socket.
    fn send(&self, data: &[u8]) {
        let mut state = lock(&self.state);
        if state.closed {
            return;
        }
        if state.buf.is_empty() && !state.flushing {
            match send_now(&self.stream, data) {
                Ok(n) if n == data.len() => return,
                Ok(n) => state.buf.extend_from_slice(&data[n..]),
                Err(_) => {
                    // The reader sees the broken connection and fails what is pending.
                    state.closed = true;
                    let _ = self.stream.shutdown(Shutdown::Both);
                    return;
                }
            }
        } else {
            state.buf.extend_from_slice(data);
        }
        drop(state);
        self.wake.notify_one();
    }

    /// The writer thread: flushes what `send` could not, blocking on the socket.
    fn drain(&self) {
        let mut out = Vec::new();
        loop {
            let mut state = lock(&self.state);
            state.flushing = false;
            while state.buf.is_empty() && !state.closed {
                state = self
                    .wake
                    .wait(state)
                    .unwrap_or_else(|poison| poison.into_inner());
            }
            if state.closed {
                return;
            }
            std::mem::swap(&mut out, &mut state.buf);
            state.flushing = true;
            drop(state);
            if send_all(&self.stream, &out).is_err() {
                let mut state = lock(&self.state);
                state.closed = true;
                let _ = self.stream.shutdown(Shutdown::Both);
                return;
            }
            out.clear();
        }
    }

    fn close(&self) {
        lock(&self.state).closed = true;
        self.wake.notify_all();
    }
}

/// A request of ours waiting for the peer's response.
#[derive(Debug)]
struct Pending {
    wr_id: u64,
    verb: Verb,
    key: u32,
    offset: u64,
    len: u64,
    /// A WRITE's buffer, handed back in its completion.
    buffer: Vec<u8>,
    cq: Arc<CompletionQueue>,
}

#[derive(Debug, Default)]
struct PendingState {
    queue: VecDeque<Pending>,
    lost: Option<String>,
    /// Where a batch's frames are encoded, kept to spare an allocation
    /// (and, for large batches, fresh pages) per post.
    frames: Vec<u8>,
}

/// One connection to a peer.
#[derive(Debug)]
struct Conn {
    peer: NodeRank,
    outbox: Outbox,
    pending: Mutex<PendingState>,
}

impl Conn {
    fn new(peer: NodeRank, stream: &TcpStream) -> Result<Self> {
        let stream = stream
            .try_clone()
            .map_err(|e| Error::io("cloning a peer connection", e))?;
        Ok(Self {
            peer,
            outbox: Outbox {
                stream,
                state: Mutex::new(OutState::default()),
                wake: Condvar::new(),
            },
            pending: Mutex::new(PendingState::default()),
        })
    }

    /// Sends a batch of requests in one write, remembering each for its response.
    fn submit(&self, cq: &Arc<CompletionQueue>, wrs: Vec<WorkRequest>) {
        // Held across the write so that the order of pending entries is the
        // order of requests on the wire.
        let mut pending = lock(&self.pending);
        let mut frames = std::mem::take(&mut pending.frames);
        frames.clear();
        if let Some(reason) = &pending.lost {
            for wr in wrs {
                cq.push(Completion::new(
                    wr.wr_id,
                    wr.op.verb(),
                    self.peer,
                    Err(self.lost(reason)),
                ));
            }
            return;
        }
        for WorkRequest { wr_id, op } in wrs {
            let (key, offset, len) = encode(&mut frames, &op);
            let verb = op.verb();
            let buffer = match op {
                Op::Write { data, .. } => data,
                _ => Vec::new(),
            };
            pending.queue.push_back(Pending {
                wr_id,
                verb,
                key,
                offset,
                len,
                buffer,
                cq: Arc::clone(cq),
            });
        }
        self.outbox.send(&frames);
        pending.frames = frames;
    }

    fn lost(&self, reason: &str) -> VerbError {
        VerbError::PeerLost {
            node: self.peer,
            reason: reason.to_owned(),
        }
    }

    /// Marks the connection lost: every pending and later request fails.
    fn lose(&self, reason: &str) {
        {
            // Failed under the lock, so that no later request's failure
            // (from `submit`) or success (from the reader) overtakes them.
            let mut pending = lock(&self.pending);
            if pending.lost.is_some() {
                return;
            }
            pending.lost = Some(reason.to_owned());
            for p in pending.queue.drain(..) {
                p.cq.push(Completion::new(
                    p.wr_id,
                    p.verb,
                    self.peer,
                    Err(self.lost(reason)),
                ));
            }
        }
        tracing::debug!("connection to node {} lost: {reason}", self.peer);
        self.outbox.close();
        let _ = self.outbox.stream.shutdown(Shutdown::Both);
    }
}

// Frame kinds. Requests carry their arguments; the one response kind is
// decoded by the verb of the oldest pending request.
const READ: u8 = 1;
const WRITE: u8 = 2;
const CAS: u8 = 3;
const FETCH_ADD: u8 = 4;
const SEND: u8 = 5;
const RESPONSE: u8 = 0x80;

const OK: u8 = 0;
const UNKNOWN_KEY: u8 = 1;
const OUT_OF_BOUNDS: u8 = 2;
const MISALIGNED: u8 = 3;

fn put_u32(out: &mut Vec<u8>, value: u32) {
    out.extend_from_slice(&value.to_le_bytes());
}

fn put_u64(out: &mut Vec<u8>, value: u64) {
    out.extend_from_slice(&value.to_le_bytes());
}

fn wire_len(len: usize) -> u32 {
    u32::try_from(len).expect("Queue::post refuses operations over 4 GiB")
}

/// Appends the request frame of `op`; returns (key, offset, len) for its
/// pending entry.
fn encode(out: &mut Vec<u8>, op: &Op) -> (u32, u64, u64) {
    match op {
        Op::Read {
            remote,
            offset,
            len,
        } => {
            out.push(READ);
            put_u32(out, remote.key);
            put_u64(out, *offset);
            put_u32(out, wire_len(*len));
            (remote.key, *offset, *len as u64)
        }
        Op::Write {
            remote,
            offset,
            data,
        } => {
            out.push(WRITE);
            put_u32(out, remote.key);
            put_u64(out, *offset);
            put_u32(out, wire_len(data.len()));
            out.extend_from_slice(data);
            (remote.key, *offset, data.len() as u64)
        }
        Op::CompareSwap {
            remote,
            offset,
            expected,
            new,
        } => {
            out.push(CAS);
            put_u32(out, remote.key);
            put_u64(out, *offset);
            put_u64(out, *expected);
            put_u64(out, *new);
            (remote.key, *offset, 8)
        }
        Op::FetchAdd {
            remote,
            offset,
            add,
        } => {
            out.push(FETCH_ADD);
            put_u32(out, remote.key);
            put_u64(out, *offset);
            put_u64(out, *add);
            (remote.key, *offset, 8)
        }
        Op::Send { data, .. } => {
            out.push(SEND);
            put_u32(out, wire_len(data.len()));
            out.extend_from_slice(data);
            (0, 0, data.len() as u64)
        }
        Op::Recv { .. } => unreachable!("receives never go on the wire"),
    }
}

fn encode_status(out: &mut Vec<u8>, err: &VerbError) {
    match err {
        VerbError::UnknownKey { .. } => out.push(UNKNOWN_KEY),
        VerbError::OutOfBounds { region_len, .. } => {
            out.push(OUT_OF_BOUNDS);
            put_u64(out, *region_len);
        }
        VerbError::Misaligned { .. } => out.push(MISALIGNED),
        other => unreachable!("a target never answers with {other:?}"),
    }
}

/// A connection's reader: this process's NIC for one peer.
struct NicReader {
    me: NodeRank,
    conn: Arc<Conn>,
    registry: Arc<Registry>,
    mailbox: Arc<Mailbox>,
}

type Wire = BufReader<TcpStream>;

fn get_u8(wire: &mut Wire) -> std::io::Result<u8> {
    let mut b = [0u8; 1];
    wire.read_exact(&mut b)?;
    Ok(b[0])
}

fn get_u32(wire: &mut Wire) -> std::io::Result<u32> {
    let mut b = [0u8; 4];
    wire.read_exact(&mut b)?;
    Ok(u32::from_le_bytes(b))
}

fn get_u64(wire: &mut Wire) -> std::io::Result<u64> {
    let mut b = [0u8; 8];
    wire.read_exact(&mut b)?;
    Ok(u64::from_le_bytes(b))
}

fn get_bytes(wire: &mut Wire, len: u64) -> std::io::Result<Vec<u8>> {
    let len =
        usize::try_from(len).map_err(|_| std::io::Error::from(std::io::ErrorKind::OutOfMemory))?;
    let mut data = vec![0; len];
    wire.read_exact(&mut data)?;
    Ok(data)
}

impl NicReader {
    fn run(self, stream: TcpStream) {
        let mut wire = BufReader::with_capacity(1 << 18, stream);
        let mut responses = Vec::new();
        let mut scratch = Vec::new();
        let reason = loop {
            if wire.buffer().is_empty() {
                self.await_input(wire.get_ref());
            }
            let kind = match get_u8(&mut wire) {
                Ok(kind) => kind,
                Err(err) if err.kind() == std::io::ErrorKind::UnexpectedEof => {
                    break "it closed the connection".to_owned()
                }
                Err(err) => break format!("the connection failed: {err}"),
            };
            let step = if kind == RESPONSE {
                self.complete(&mut wire)
            } else {
                self.serve(kind, &mut wire, &mut responses, &mut scratch)
            };
            if let Err(err) = step {
                break format!("the connection failed mid-frame: {err}");
            }
            // About to block for more input (or holding a lot): answer what
            // was served so far.
            if !responses.is_empty()
                && (wire.buffer().is_empty() || responses.len() >= RESPONSE_FLUSH)
            {
                self.conn.outbox.send(&responses);
                responses.clear();
            }
        };
        self.conn.lose(&reason);
    }

    /// While our own requests await responses, polls the socket for a
    /// while instead of sleeping in `read`: a response then costs no thread
    /// wake-up, as a NIC that polls. With nothing pending, the thread blocks
    /// in `read` and costs nothing.
    fn await_input(&self, stream: &TcpStream) {
        let until = Instant::now() + POLL_WINDOW;
        while !lock(&self.conn.pending).queue.is_empty() && Instant::now() < until {
            let mut fd = libc::pollfd {
                fd: stream.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: `fd` is one valid pollfd for the duration of the call
            // (count 1), on a descriptor owned by `stream`; timeout 0 never blocks.
            let ready = unsafe { libc::poll(&raw mut fd, 1, 0) };
            if ready != 0 {
                return;
            }
            std::hint::spin_loop();
        }
    }

    /// Serves one request of the peer against our memory.
    /// `scratch` holds a WRITE's payload between the socket and the region.
    fn serve(
        &self,
        kind: u8,
        wire: &mut Wire,
        out: &mut Vec<u8>,
        scratch: &mut Vec<u8>,
    ) -> std::io::Result<()> {
        let me = self.me;
        out.push(RESPONSE);
        match kind {
            READ => {
                let (key, offset, len) = (get_u32(wire)?, get_u64(wire)?, get_u32(wire)?);
                match self.registry.serve_read(me, key, offset, len as usize) {
                    Ok(data) => {
                        out.push(OK);
                        out.extend_from_slice(&data);
                    }
                    Err(err) => encode_status(out, &err),
                }
            }
            WRITE => {
                let (key, offset, len) = (get_u32(wire)?, get_u64(wire)?, get_u32(wire)?);
                scratch.resize(len as usize, 0);
                wire.read_exact(scratch)?;
                match self.registry.serve_write(me, key, offset, scratch) {
                    Ok(()) => out.push(OK),
                    Err(err) => encode_status(out, &err),
                }
            }
            CAS => {
                let (key, offset, expected, new) = (get_u32(wire)?, get_u64(wire)?, get_u64(wire)?, get_u64(wire)?);
                self.value(out, self.registry.serve_compare_swap(me, key, offset, expected, new));
            }
            FETCH_ADD => {
                let (key, offset, add) = (get_u32(wire)?, get_u64(wire)?, get_u64(wire)?);
                self.value(out, self.registry.serve_fetch_add(me, key, offset, add));
            }
            SEND => {
                let len = get_u32(wire)?;
                let data = get_bytes(wire, u64::from(len))?;
                self.mailbox.deliver(self.conn.peer, data, 0);
                out.push(OK);
            }
            other => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("unknown frame kind {other:#x} (is the peer a quiver node of the same version?)"),
                ))
            }
        }
        Ok(())
    }

    fn value(&self, out: &mut Vec<u8>, result: Result<u64, VerbError>) {
        match result {
            Ok(value) => {
                out.push(OK);
                put_u64(out, value);
            }
            Err(err) => encode_status(out, &err),
        }
    }

    /// Completes our oldest pending request from the peer's response.
    /// The oldest pending request stays queued until its whole response
    /// has been read, so a connection that breaks mid-response fails it
    /// with the rest (in `Conn::lose`), and it is completed under the
    /// pending lock, so completions keep their posted order.
    fn complete(&self, wire: &mut Wire) -> std::io::Result<()> {
        let (verb, key, offset, len) = {
            let pending = lock(&self.conn.pending);
            let front = pending.queue.front().ok_or_else(|| {
                std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    "a response arrived with no request pending",
                )
            })?;
            (front.verb, front.key, front.offset, front.len)
        };
        let node = self.conn.peer;
        let result = match get_u8(wire)? {
            OK => Ok(match verb {
                Verb::Read => Some(Output::Data(get_bytes(wire, len)?)),
                Verb::CompareSwap | Verb::FetchAdd => Some(Output::Value(get_u64(wire)?)),
                // Filled in below with the request's own buffer.
                Verb::Write => None,
                Verb::Send => Some(Output::Done),
                Verb::Recv => unreachable!("receives are never pending on a connection"),
            }),
            UNKNOWN_KEY => Err(VerbError::UnknownKey { node, key }),
            OUT_OF_BOUNDS => Err(VerbError::OutOfBounds {
                node,
                key,
                offset,
                len,
                region_len: get_u64(wire)?,
            }),
            MISALIGNED => Err(VerbError::Misaligned { node, key, offset }),
            other => {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidData,
                    format!("unknown response status {other}"),
                ));
            }
        };
        let mut pending = lock(&self.conn.pending);
        if pending.lost.is_some() {
            // `lose` has failed this request with the others.
            return Ok(());
        }
        let request = pending
            .queue
            .pop_front()
            .expect("only this reader removes requests");
        let result = result.map(|output| output.unwrap_or(Output::Written(request.buffer)));
        request
            .cq
            .push(Completion::new(request.wr_id, request.verb, node, result));
        Ok(())
    }
}

/// The fabric of one node.
#[derive(Debug)]
struct Tcp {
    rank: NodeRank,
    registry: Arc<Registry>,
    mailbox: Arc<Mailbox>,
    conns: Arc<OnceLock<Vec<Option<Arc<Conn>>>>>,
    /// Dropped after the connections are closed: leaves the job.
    membership: Membership,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl Tcp {
    fn conn(&self, peer: NodeRank) -> &Arc<Conn> {
        self.conns
            .get()
            .and_then(|conns| conns[peer.index()].as_ref())
            .expect("every peer but this node has a connection")
    }

    /// Runs an operation on this node's own memory, as the NIC would.
    fn local(&self, op: Op) -> Result<Output, VerbError> {
        match op {
            Op::Send { data, .. } => {
                self.mailbox.deliver(self.rank, data, 0);
                Ok(Output::Done)
            }
            one_sided => self.registry.serve(self.rank, one_sided),
        }
    }
}

impl Fabric for Tcp {
    fn register(&self, len: usize) -> Result<Region> {
        Ok(self.registry.register(self.rank, len))
    }

    fn post(&self, cq: &Arc<CompletionQueue>, _now_ns: u64, wrs: Vec<WorkRequest>) {
        let mut batches: Vec<(NodeRank, Vec<WorkRequest>)> = Vec::new();
        for wr in wrs {
            match wr.op.target() {
                None => {
                    let Op::Recv { capacity } = wr.op else {
                        unreachable!("only receives have no target")
                    };
                    self.mailbox.post(wr.wr_id, capacity, cq);
                }
                Some(peer) if peer == self.rank => {
                    let verb = wr.op.verb();
                    cq.push(Completion::new(wr.wr_id, verb, peer, self.local(wr.op)));
                }
                Some(peer) => match batches.iter_mut().find(|(p, _)| *p == peer) {
                    Some((_, batch)) => batch.push(wr),
                    None => batches.push((peer, vec![wr])),
                },
            }
        }
        for (peer, batch) in batches {
            self.conn(peer).submit(cq, batch);
        }
    }

    fn all_gather(&self, data: Vec<u8>) -> Result<Vec<Vec<u8>>> {
        self.membership.control().all_gather(data)
    }

    fn report(&self, report: String) -> Result<()> {
        self.membership.control().report(report)
    }
}

impl Drop for Tcp {
    fn drop(&mut self) {
        for conn in self.conns.get().into_iter().flatten().flatten() {
            conn.lose("this node left the job");
        }
        for thread in lock(&self.threads).drain(..) {
            let _ = thread.join();
        }
    }
}
