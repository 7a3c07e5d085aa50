//! Queues: where work requests are posted and completions polled, plus the
//! blocking convenience layer on top, and the receive matching shared by the
//! fabrics that deliver messages themselves.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::counters::CounterTable;
use crate::error::{Error, Result, VerbError};
use crate::node::Node;
use crate::region::RemoteRegion;
use crate::wr::{Completion, Op, Output, Verb, WorkRequest};
use crate::NodeRank;

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks leaves plain data behind
    // (queues of completions), which stays consistent, so poison is ignored.
    mutex.lock().unwrap_or_else(|poison| poison.into_inner())
}

/// A completion queue: fabrics push, the owning [`Queue`] polls.
#[derive(Debug)]
pub(crate) struct CompletionQueue {
    items: Mutex<VecDeque<Completion>>,
    ready: Condvar,
    available: AtomicUsize,
    /// Virtual time at which this queue's modelled NIC is free (cost model).
    pub(crate) nic_free_ns: AtomicU64,
    counters: Arc<CounterTable>,
}

impl CompletionQueue {
    pub(crate) fn new(counters: Arc<CounterTable>) -> Self {
        Self {
            items: Mutex::new(VecDeque::new()),
            ready: Condvar::new(),
            available: AtomicUsize::new(0),
            nic_free_ns: AtomicU64::new(0),
            counters,
        }
    }

    pub(crate) fn counters(&self) -> &CounterTable {
        &self.counters
    }

    /// Delivers one completion (any thread).
    pub(crate) fn push(&self, completion: Completion) {
        if let (Verb::Recv, Ok(Output::Message(data))) = (completion.verb, &completion.result) {
            self.counters
                .add(completion.peer, Verb::Recv, data.len() as u64);
        }
        let mut items = lock(&self.items);
        items.push_back(completion);
        self.available.fetch_add(1, Ordering::Release);
        drop(items);
        self.ready.notify_one();
    }

    fn pop_into(&self, out: &mut Vec<Completion>, max: usize) -> usize {
        if self.available.load(Ordering::Acquire) == 0 {
            return 0;
        }
        let mut items = lock(&self.items);
        let n = items.len().min(max);
        out.extend(items.drain(..n));
        self.available.fetch_sub(n, Ordering::Release);
        n
    }

    /// Waits until a completion is available or `deadline` passes. Spins
    /// briefly first: completions on a fast fabric arrive in microseconds,
    /// sooner than a sleeping thread can be woken.
    fn wait_until(&self, deadline: Instant) -> bool {
        let spin_until = Instant::now() + Duration::from_micros(50);
        while Instant::now() < spin_until {
            if self.available.load(Ordering::Acquire) > 0 {
                return true;
            }
            std::thread::yield_now();
        }
        let mut items = lock(&self.items);
        while items.is_empty() {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            items = self
                .ready
                .wait_timeout(items, deadline - now)
                .unwrap_or_else(|poison| poison.into_inner())
                .0;
        }
        true
    }
}

/// A receive buffer waiting for a message.
#[derive(Debug)]
struct PostedRecv {
    wr_id: u64,
    capacity: usize,
    cq: Arc<CompletionQueue>,
}

/// Two-sided matching at a node: a message takes the oldest posted receive
/// of the node (any queue); a message that finds none waits, in arrival
/// order, for the next receive posted. Messages from one sender are matched
/// in the order it sent them.
#[derive(Debug, Default)]
pub(crate) struct Mailbox {
    state: Mutex<MailboxState>,
}

#[derive(Debug, Default)]
struct MailboxState {
    posted: VecDeque<PostedRecv>,
    unmatched: VecDeque<(NodeRank, Vec<u8>, u64)>,
}

impl Mailbox {
    /// A message arrives from `from`.
    pub(crate) fn deliver(&self, from: NodeRank, data: Vec<u8>, done_at_ns: u64) {
        let mut state = lock(&self.state);
        match state.posted.pop_front() {
            Some(recv) => {
                drop(state);
                complete_recv(recv, from, data, done_at_ns);
            }
            None => state.unmatched.push_back((from, data, done_at_ns)),
        }
    }

    /// A receive is posted.
    pub(crate) fn post(&self, wr_id: u64, capacity: usize, cq: &Arc<CompletionQueue>) {
        let recv = PostedRecv {
            wr_id,
            capacity,
            cq: Arc::clone(cq),
        };
        let mut state = lock(&self.state);
        match state.unmatched.pop_front() {
            Some((from, data, done_at_ns)) => {
                drop(state);
                complete_recv(recv, from, data, done_at_ns);
            }
            None => state.posted.push_back(recv),
        }
    }
}

fn complete_recv(recv: PostedRecv, from: NodeRank, data: Vec<u8>, done_at_ns: u64) {
    let result = if data.len() > recv.capacity {
        Err(VerbError::ReceiveTooSmall {
            from,
            len: data.len() as u64,
            capacity: recv.capacity as u64,
        })
    } else {
        Ok(Output::Message(data))
    };
    let mut completion = Completion::new(recv.wr_id, Verb::Recv, from, result);
    completion.done_at_ns = done_at_ns;
    recv.cq.push(completion);
}

/// A queue of work requests and their completions: a send queue and a
/// completion queue, like a set of RC queue pairs to every node sharing one
/// CQ. Meant for one thread; give each thread its own (`Node::queue`).
///
/// Ordering: operations posted on one queue to one node take effect at that
/// node in the order posted, and their completions are polled in that order
/// (so a READ posted after a WRITE to the same address returns the written
/// bytes). Nothing is promised across queues or across nodes. Each 8-byte
/// aligned word is accessed atomically; a longer READ concurrent with a
/// WRITE may see a mix of old and new words.
#[derive(Debug)]
pub struct Queue {
    node: Node,
    cq: Arc<CompletionQueue>,
    outstanding: usize,
    /// Completions taken off the CQ by a blocking call that were not its own.
    stash: VecDeque<Completion>,
    next_blocking_id: u64,
    /// The blocking WRITE's buffer, handed back by each completion.
    write_buffer: Vec<u8>,
}

/// Work-request ids at or above this value are used by the blocking calls.
const BLOCKING_IDS: u64 = 1 << 63;

impl Queue {
    pub(crate) fn new(node: Node, counters: Arc<CounterTable>) -> Self {
        Self {
            node,
            cq: Arc::new(CompletionQueue::new(counters)),
            outstanding: 0,
            stash: VecDeque::new(),
            next_blocking_id: BLOCKING_IDS,
            write_buffer: Vec::new(),
        }
    }

    /// Posts a batch of work requests, handed to the fabric together (one
    /// doorbell). Each completes exactly once, successfully or with a
    /// [`VerbError`], and is then returned by [`Queue::poll`].
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] when a request names a node outside the
    /// job; then nothing of the batch is posted.
    pub fn post(&mut self, wrs: impl IntoIterator<Item = WorkRequest>) -> Result<()> {
        let wrs: Vec<WorkRequest> = wrs.into_iter().collect();
        let size = self.node.size();
        for wr in &wrs {
            if wr.op.payload_len() > u64::from(u32::MAX) {
                return Err(Error::invalid(
                    "work_requests",
                    format!(
                    "work request {} ({}) moves {} bytes; one operation moves at most 4 GiB - 1",
                    wr.wr_id,
                    wr.op.verb(),
                    wr.op.payload_len()
                ),
                ));
            }
            if let Some(target) = wr.op.target() {
                if target.0 >= size {
                    return Err(Error::invalid(
                        "work_requests",
                        format!(
                        "work request {} ({}) targets node {target}, but the job has {size} nodes",
                        wr.wr_id,
                        wr.op.verb()
                    ),
                    ));
                }
            }
        }
        self.outstanding += wrs.len();
        self.node.post(&self.cq, wrs);
        Ok(())
    }

    /// Moves up to `max` completions into `out`; returns how many. Never blocks.
    pub fn poll(&mut self, out: &mut Vec<Completion>, max: usize) -> usize {
        let start = out.len();
        let from_stash = self.stash.len().min(max);
        out.extend(self.stash.drain(..from_stash));
        let n = from_stash + self.cq.pop_into(out, max - from_stash);
        for completion in &out[start..] {
            self.node.advance_clock(completion.done_at_ns);
        }
        self.outstanding -= n;
        n
    }

    /// Blocks until at least `min` completions were moved into `out` (never
    /// more than `max`), or fails after the node's timeout.
    ///
    /// # Errors
    /// [`Error::Timeout`] if they do not arrive in time, and
    /// [`Error::InvalidArgument`] if fewer than `min` requests are
    /// outstanding or `min > max`.
    pub fn wait(&mut self, out: &mut Vec<Completion>, min: usize, max: usize) -> Result<usize> {
        if min > max {
            return Err(Error::invalid(
                "min",
                format!("waiting for at least {min} but at most {max} completions"),
            ));
        }
        if min > self.outstanding {
            return Err(Error::invalid(
                "min",
                format!(
                    "waiting for {min} completions with {} work requests outstanding",
                    self.outstanding
                ),
            ));
        }
        let deadline = Instant::now() + self.node.timeout();
        let mut got = self.poll(out, max);
        while got < min {
            if !self.cq.wait_until(deadline) {
                return Err(self.timeout(min - got));
            }
            got += self.poll(out, max - got);
        }
        Ok(got)
    }

    /// Work requests posted whose completions have not been polled yet.
    pub fn outstanding(&self) -> usize {
        self.outstanding
    }

    /// The node this queue belongs to.
    pub fn node(&self) -> &Node {
        &self.node
    }

    fn timeout(&self, missing: usize) -> Error {
        Error::Timeout {
            what: format!(
                "waiting for {missing} completions on node {}",
                self.node.rank()
            ),
            after: self.node.timeout(),
        }
    }

    /// Posts one request and waits for its own completion; completions of
    /// other requests seen meanwhile are kept for the next [`Queue::poll`].
    fn call(&mut self, op: Op) -> Result<Completion> {
        let verb = op.verb();
        let wr_id = self.next_blocking_id;
        self.next_blocking_id += 1;
        self.post([WorkRequest::new(wr_id, op)])?;
        let deadline = Instant::now() + self.node.timeout();
        let mut batch = Vec::new();
        loop {
            self.cq.pop_into(&mut batch, usize::MAX);
            let mut own = None;
            for completion in batch.drain(..) {
                if completion.wr_id == wr_id {
                    own = Some(completion);
                } else {
                    self.stash.push_back(completion);
                }
            }
            if let Some(completion) = own {
                self.node.advance_clock(completion.done_at_ns);
                self.outstanding -= 1;
                return match completion.result {
                    Ok(_) => Ok(completion),
                    Err(source) => Err(Error::Completion { verb, source }),
                };
            }
            if !self.cq.wait_until(deadline) {
                return Err(self.timeout(1));
            }
        }
    }

    fn output(&mut self, op: Op) -> Result<Output> {
        let completion = self.call(op)?;
        Ok(completion
            .result
            .expect("call returns only successful completions"))
    }

    /// Reads `len` bytes at `offset` of `remote` and waits for them.
    ///
    /// # Errors
    /// [`Error::Completion`] with the error status, or [`Error::Timeout`].
    pub fn read(&mut self, remote: RemoteRegion, offset: u64, len: usize) -> Result<Vec<u8>> {
        match self.output(Op::Read {
            remote,
            offset,
            len,
        })? {
            Output::Data(data) => Ok(data),
            other => unreachable!("a READ completed with {other:?}"),
        }
    }

    /// Writes `data` at `offset` of `remote` and waits until it took effect.
    ///
    /// # Errors
    /// As [`Queue::read`].
    pub fn write(&mut self, remote: RemoteRegion, offset: u64, data: &[u8]) -> Result<()> {
        let mut buffer = std::mem::take(&mut self.write_buffer);
        buffer.clear();
        buffer.extend_from_slice(data);
        match self.output(Op::Write {
            remote,
            offset,
            data: buffer,
        })? {
            Output::Written(buffer) => {
                self.write_buffer = buffer;
                Ok(())
            }
            other => unreachable!("a WRITE completed with {other:?}"),
        }
    }

    /// Compare-and-swap on the word at `offset`; returns its previous value
    /// (the swap happened if it equals `expected`).
    ///
    /// # Errors
    /// As [`Queue::read`].
    pub fn compare_swap(
        &mut self,
        remote: RemoteRegion,
        offset: u64,
        expected: u64,
        new: u64,
    ) -> Result<u64> {
        self.value(Op::CompareSwap {
            remote,
            offset,
            expected,
            new,
        })
    }

    /// Fetch-and-add on the word at `offset`; returns its previous value.
    ///
    /// # Errors
    /// As [`Queue::read`].
    pub fn fetch_add(&mut self, remote: RemoteRegion, offset: u64, add: u64) -> Result<u64> {
        self.value(Op::FetchAdd {
            remote,
            offset,
            add,
        })
    }

    fn value(&mut self, op: Op) -> Result<u64> {
        match self.output(op)? {
            Output::Value(value) => Ok(value),
            other => unreachable!("an atomic completed with {other:?}"),
        }
    }

    /// Sends `data` to node `to` and waits until it was delivered there.
    ///
    /// # Errors
    /// As [`Queue::read`].
    pub fn send(&mut self, to: NodeRank, data: &[u8]) -> Result<()> {
        self.output(Op::Send {
            to,
            data: data.to_vec(),
        })
        .map(drop)
    }

    /// Posts a receive of at most `capacity` bytes and waits for a message;
    /// returns the sender and the message. A receive that times out stays
    /// posted (a NIC cannot take a posted buffer back): the message that
    /// later matches it is returned by [`Queue::poll`], with a work-request
    /// id of 2^63 or more.
    ///
    /// # Errors
    /// As [`Queue::read`].
    pub fn recv(&mut self, capacity: usize) -> Result<(NodeRank, Vec<u8>)> {
        let completion = self.call(Op::Recv { capacity })?;
        match completion.result {
            Ok(Output::Message(data)) => Ok((completion.peer, data)),
            other => unreachable!("a receive completed with {other:?}"),
        }
    }
}
