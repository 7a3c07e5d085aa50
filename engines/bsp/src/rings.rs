//! RGraph's messaging (§4 of the paper): one-sided WRITEs of message blocks
//! into per-(sender node, sender worker) receive rings at the receiver, with
//! space returned by the receiver as it processes, and no SEND/RECV.
//!
//! Layout of each node's registered region: `size × workers` rings of
//! [`RING`] bytes, the ring of (node `s`, worker `w`) at index
//! `s · workers + w` (a node's own rings stay unused), then `size ×
//! workers` credit words, the word of (receiver `r`, worker `w`) holding how
//! many bytes `r` has consumed of the ring that this node's worker `w`
//! writes at `r`.
//!
//! A message is `[header][units][padding][header]`: the header is `seq <<
//! 32 | count` with `seq` counting the ring's messages from 1 (so zeroed
//! bytes are never a header), the units are [`UNIT`] bytes each (a `u32`
//! vertex and a `u64` value), at most [`BLOCK_UNITS`] of them (the paper's
//! 256 per WRITE), and the trailing copy of the header says the whole block
//! has landed. The receiver zeroes what it consumed, and writes its consumed
//! count back to the sender's credit word after every half ring (the
//! paper's "space returned every 1 MB"). A block that would run past the
//! ring's end is preceded by a pad header and starts again at offset 0.
//! Counters are monotone byte counts, so a full ring and an empty one are
//! never confused (the implementation notes' fix for the paper's three
//! pointers).
//!
//! A superstep ends with an END header from every worker on every ring it
//! writes; a worker drains the rings of its own index from every peer, and
//! is done when each has delivered its END. Waiting for credit drains the
//! worker's own rings, so no two workers wait on each other.

use std::sync::Mutex;

use quiver_verbs::{Completion, Node, Op, Queue, Region, RemoteRegion, WorkRequest};

use crate::channel::{Channel, Traffic};
use crate::{Error, Result};

/// Bytes of one receive ring: the paper's 2 MB.
pub const RING: u64 = 2 << 20;
/// WRITEs a worker keeps in flight before it waits for completions.
pub const WINDOW: usize = 32;
/// Messages per WRITE: the paper's 256.
pub const BLOCK_UNITS: usize = 256;
/// Bytes of one message unit: a `u32` vertex and a `u64` value.
pub const UNIT: usize = 12;

const END: u32 = u32::MAX;
const PAD: u32 = u32::MAX - 1;

/// The rings of one node of a job.
pub struct Rings {
    /// Bytes per ring ([`RING`] but in tests).
    ring: u64,
    rank: usize,
    size: usize,
    workers: usize,
    region: Region,
    remotes: Vec<RemoteRegion>,
    senders: Vec<Mutex<Sender>>,
    receivers: Vec<Mutex<Receiver>>,
}

struct Sender {
    queue: Queue,
    /// WRITEs posted and not yet completed.
    in_flight: usize,
    completions: Vec<Completion>,
    /// Units waiting per peer.
    blocks: Vec<Vec<u8>>,
    /// Bytes written into this worker's ring at each peer.
    written: Vec<u64>,
    /// Messages written into it.
    sequence: Vec<u32>,
    traffic: Traffic,
}

struct Receiver {
    queue: Queue,
    /// Per peer: bytes consumed of its ring for this worker, and how many
    /// were last credited back.
    consumed: Vec<u64>,
    credited: Vec<u64>,
    /// Next expected sequence number per peer.
    sequence: Vec<u32>,
    /// Whether the peer's END arrived this superstep.
    ended: Vec<bool>,
    traffic: Traffic,
}

impl Rings {
    /// Registers this node's rings of [`RING`] bytes for `workers` workers
    /// per node (the same on every node) and exchanges the regions. Every
    /// node calls it.
    pub fn new(node: &Node, workers: usize) -> Result<Rings> {
        Rings::with_ring_bytes(node, workers, RING)
    }

    /// As [`Rings::new`], with rings of `ring` bytes (a multiple of 8 that
    /// holds a full block): small rings make tests wrap and wait for space.
    fn with_ring_bytes(node: &Node, workers: usize, ring: u64) -> Result<Rings> {
        assert!(
            ring.is_multiple_of(8) && ring >= 2 * message_len(BLOCK_UNITS * UNIT),
            "a ring of {ring} bytes cannot hold two blocks"
        );
        let rank = node.rank().index();
        let size = node.size() as usize;
        let rings = (size * workers) as u64;
        let bytes = rings * ring + rings * 8;
        let region = node
            .register(usize::try_from(bytes).expect("ring memory fits usize"))
            .map_err(Error::Verbs)?;
        let remotes = node.exchange(&region).map_err(Error::Verbs)?;
        let senders = (0..workers)
            .map(|_| {
                Mutex::new(Sender {
                    queue: node.queue(),
                    in_flight: 0,
                    completions: Vec::new(),
                    blocks: vec![Vec::with_capacity(BLOCK_UNITS * UNIT); size],
                    written: vec![0; size],
                    sequence: vec![0; size],
                    traffic: Traffic::default(),
                })
            })
            .collect();
        let receivers = (0..workers)
            .map(|_| {
                Mutex::new(Receiver {
                    queue: node.queue(),
                    consumed: vec![0; size],
                    credited: vec![0; size],
                    sequence: vec![1; size],
                    ended: vec![false; size],
                    traffic: Traffic::default(),
                })
            })
            .collect();
        Ok(Rings {
            ring,
            rank,
            size,
            workers,
            region,
            remotes,
            senders,
            receivers,
        })
    }

    /// What this node's workers sent and credited so far, and resets it.
    fn take_traffic(&self) -> Traffic {
        let mut total = Traffic::default();
        for s in &self.senders {
            total += std::mem::take(&mut lock(s).traffic);
        }
        for r in &self.receivers {
            total += std::mem::take(&mut lock(r).traffic);
        }
        total
    }

    fn peers(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.size).filter(move |&p| p != self.rank)
    }

    fn region_timeout(&self) -> std::time::Duration {
        self.senders[0]
            .lock()
            .map_or(std::time::Duration::from_secs(30), |s| {
                s.queue.node().timeout()
            })
    }

    fn ring_offset(&self, node: usize, worker: usize) -> u64 {
        (node * self.workers + worker) as u64 * self.ring
    }

    fn credit_offset(&self, receiver: usize, worker: usize) -> u64 {
        (self.size * self.workers) as u64 * self.ring
            + (receiver * self.workers + worker) as u64 * 8
    }

    fn write_block(
        &self,
        sender: &mut Sender,
        worker: usize,
        to: usize,
        deliver: &dyn Fn(u32, u64),
    ) -> Result<()> {
        let units = std::mem::take(&mut sender.blocks[to]);
        let count = u32::try_from(units.len() / UNIT).expect("a block holds 256 units");
        self.write_message(sender, worker, to, count, &units, deliver)?;
        sender.blocks[to] = units;
        sender.blocks[to].clear();
        Ok(())
    }

    /// Writes one message (`count` units, or END) into `worker`'s ring at
    /// node `to`, waiting for space (and draining meanwhile).
    fn write_message(
        &self,
        sender: &mut Sender,
        worker: usize,
        to: usize,
        count: u32,
        units: &[u8],
        deliver: &dyn Fn(u32, u64),
    ) -> Result<()> {
        let len = message_len(units.len());
        let at = sender.written[to] % self.ring;
        let pad = if at + len > self.ring {
            self.ring - at
        } else {
            0
        };
        self.wait_for_space(sender, worker, to, pad + len, deliver)?;
        let ring = self.ring_offset(self.rank, worker);
        if pad > 0 {
            sender.sequence[to] += 1;
            let header = header(sender.sequence[to], PAD);
            self.post_write(
                sender,
                worker,
                to,
                ring + at,
                header.to_le_bytes().to_vec(),
                deliver,
            )?;
            sender.written[to] += pad;
            sender.traffic.bytes += 8;
            sender.traffic.writes += 1;
        }
        sender.sequence[to] += 1;
        let header = header(sender.sequence[to], count).to_le_bytes();
        let mut bytes = Vec::with_capacity(usize::try_from(len).expect("a block fits usize"));
        bytes.extend_from_slice(&header);
        bytes.extend_from_slice(units);
        bytes.resize(bytes.len().next_multiple_of(8), 0);
        bytes.extend_from_slice(&header);
        let at = sender.written[to] % self.ring;
        self.post_write(sender, worker, to, ring + at, bytes, deliver)?;
        sender.written[to] += len;
        sender.traffic.bytes += len;
        sender.traffic.writes += 1;
        Ok(())
    }

    /// Posts a WRITE of `bytes` at `offset` of node `to`'s region without
    /// waiting for it: the worker computes on while it travels (the
    /// paper's overlap). At most [`WINDOW`] are in flight; WRITEs on one
    /// queue to one node take effect in order, so blocks, pads and ENDs
    /// land as written.
    #[allow(clippy::too_many_arguments)] // One WRITE: where from, where to, what.
    fn post_write(
        &self,
        sender: &mut Sender,
        worker: usize,
        to: usize,
        offset: u64,
        bytes: Vec<u8>,
        deliver: &dyn Fn(u32, u64),
    ) -> Result<()> {
        while sender.in_flight >= WINDOW {
            self.complete_writes(sender, worker, deliver)?;
        }
        let write = Op::Write {
            remote: self.remotes[to],
            offset,
            data: bytes,
        };
        sender
            .queue
            .post([WorkRequest::new(0, write)])
            .map_err(Error::Verbs)?;
        sender.in_flight += 1;
        Ok(())
    }

    /// Retires the completed WRITEs of `sender` (failing on an error
    /// completion); with none completed, drains `worker`'s rings meanwhile.
    fn complete_writes(
        &self,
        sender: &mut Sender,
        worker: usize,
        deliver: &dyn Fn(u32, u64),
    ) -> Result<()> {
        let mut done = std::mem::take(&mut sender.completions);
        let polled = sender.queue.poll(&mut done, usize::MAX);
        for completion in done.drain(..) {
            completion.output().map_err(Error::Verbs)?;
        }
        sender.completions = done;
        sender.in_flight -= polled;
        if polled == 0 {
            self.drain(worker, deliver)?;
            std::thread::yield_now();
        }
        Ok(())
    }

    fn wait_for_space(
        &self,
        sender: &Sender,
        worker: usize,
        to: usize,
        len: u64,
        deliver: &dyn Fn(u32, u64),
    ) -> Result<()> {
        let credit_at = usize::try_from(self.credit_offset(to, worker)).expect("offsets fit");
        let deadline = std::time::Instant::now() + sender.queue.node().timeout();
        while sender.written[to] + len - self.region.load(credit_at) > self.ring {
            // The receiver frees space as it drains; drain ours meanwhile so
            // that it is never waiting for us.
            self.drain(worker, deliver)?;
            if std::time::Instant::now() > deadline {
                return Err(Error::Stalled(format!(
                    "node {} worker {worker} waited {:?} for ring space at node {to}",
                    self.rank,
                    sender.queue.node().timeout()
                )));
            }
            std::thread::yield_now();
        }
        Ok(())
    }

    /// Processes complete messages in `worker`'s rings from every peer
    /// until each is empty or ended; returns whether all have ended.
    fn drain(&self, worker: usize, deliver: &dyn Fn(u32, u64)) -> Result<bool> {
        // Another call on this worker's rings (from a send's wait) holds
        // them: it drains for us.
        let Ok(mut receiver) = self.receivers[worker].try_lock() else {
            return Ok(false);
        };
        let mut all_ended = true;
        for from in self.peers() {
            while !receiver.ended[from] {
                if !self.take_message(&mut receiver, worker, from, deliver)? {
                    break;
                }
            }
            all_ended &= receiver.ended[from];
        }
        Ok(all_ended)
    }

    /// Takes one complete message from the ring of (`from`, `worker`), if
    /// there is one.
    fn take_message(
        &self,
        receiver: &mut Receiver,
        worker: usize,
        from: usize,
        deliver: &dyn Fn(u32, u64),
    ) -> Result<bool> {
        let ring = self.ring_offset(from, worker);
        let at = receiver.consumed[from] % self.ring;
        let base = usize::try_from(ring + at).expect("offsets fit usize");
        let word = self.region.load(base);
        if word == 0 {
            return Ok(false);
        }
        let (sequence, count) = split(word);
        if sequence != receiver.sequence[from] {
            return Err(Error::Corrupt(format!(
                "ring of node {from} worker {worker} at node {}: message {sequence} where {} was due",
                self.rank, receiver.sequence[from]
            )));
        }
        let len = match count {
            PAD => self.ring - at,
            END => message_len(0),
            _ => {
                let len = message_len(count as usize * UNIT);
                let trailer = base + usize::try_from(len).expect("fits") - 8;
                if self.region.load(trailer) != word {
                    return Ok(false); // Still landing.
                }
                let mut units = vec![0u8; count as usize * UNIT];
                self.region.read(base + 8, &mut units);
                deliver_units(&units, deliver);
                len
            }
        };
        let zeroed = if count == PAD { 8 } else { len };
        self.region.write(
            base,
            &vec![0u8; usize::try_from(zeroed).expect("a block fits usize")],
        );
        receiver.consumed[from] += len;
        receiver.sequence[from] += 1;
        if count == END {
            receiver.ended[from] = true;
        }
        if receiver.consumed[from] - receiver.credited[from] >= self.ring / 2 || count == END {
            let credit = receiver.consumed[from];
            receiver
                .queue
                .write(
                    self.remotes[from],
                    self.credit_offset(self.rank, worker),
                    &credit.to_le_bytes(),
                )
                .map_err(Error::Verbs)?;
            receiver.credited[from] = credit;
            receiver.traffic.writes += 1;
        }
        Ok(true)
    }
}

impl Channel for Rings {
    /// Queues a message for `dst` on node `to` from `worker`, writing the
    /// block when it is full; `deliver` takes messages that arrive while
    /// this worker waits for ring space.
    fn send(
        &self,
        worker: usize,
        to: usize,
        dst: u32,
        value: u64,
        deliver: &dyn Fn(u32, u64),
    ) -> Result<()> {
        let mut sender = lock(&self.senders[worker]);
        push_unit(&mut sender.blocks[to], dst, value);
        sender.traffic.messages += 1;
        if sender.blocks[to].len() == BLOCK_UNITS * UNIT {
            self.write_block(&mut sender, worker, to, deliver)?;
        }
        Ok(())
    }

    /// Processes what has arrived in `worker`'s rings, without waiting.
    fn poll(&self, worker: usize, deliver: &dyn Fn(u32, u64)) -> Result<()> {
        self.drain(worker, deliver).map(drop)
    }

    /// Ends `worker`'s superstep: writes its partial blocks and an END to
    /// every peer, then drains its rings until every peer's END arrived.
    fn finish(&self, worker: usize, deliver: &dyn Fn(u32, u64)) -> Result<()> {
        {
            let mut sender = lock(&self.senders[worker]);
            for to in self.peers() {
                if !sender.blocks[to].is_empty() {
                    self.write_block(&mut sender, worker, to, deliver)?;
                }
                self.write_message(&mut sender, worker, to, END, &[], deliver)?;
            }
            while sender.in_flight > 0 {
                self.complete_writes(&mut sender, worker, deliver)?;
            }
        }
        let deadline = std::time::Instant::now() + self.region_timeout();
        loop {
            if self.drain(worker, deliver)? {
                break;
            }
            if std::time::Instant::now() > deadline {
                return Err(Error::Stalled(format!(
                    "node {} worker {worker} waited {:?} for the end of a superstep",
                    self.rank,
                    self.region_timeout()
                )));
            }
            std::thread::yield_now();
        }
        let mut receiver = lock(&self.receivers[worker]);
        receiver.ended.iter_mut().for_each(|e| *e = false);
        Ok(())
    }

    fn end_superstep(&self) -> Traffic {
        self.take_traffic()
    }

    fn bytes(&self) -> u64 {
        self.region.len() as u64
    }
}

impl std::fmt::Debug for Rings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rings")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("workers", &self.workers)
            .finish_non_exhaustive()
    }
}

/// Appends one message unit (`dst`, `value`) to a block.
pub(crate) fn push_unit(block: &mut Vec<u8>, dst: u32, value: u64) {
    block.extend_from_slice(&dst.to_le_bytes());
    block.extend_from_slice(&value.to_le_bytes());
}

/// Hands every unit of a block's `units` to `deliver`.
pub(crate) fn deliver_units(units: &[u8], deliver: &dyn Fn(u32, u64)) {
    for unit in units.chunks_exact(UNIT) {
        let (dst, value) = unit.split_at(4);
        deliver(
            u32::from_le_bytes(dst.try_into().expect("4 bytes")),
            u64::from_le_bytes(value.try_into().expect("8 bytes")),
        );
    }
}

fn header(sequence: u32, count: u32) -> u64 {
    (u64::from(sequence) << 32) | u64::from(count)
}

/// A header's sequence number and count.
#[allow(clippy::cast_possible_truncation)] // The two halves of the word.
fn split(header: u64) -> (u32, u32) {
    ((header >> 32) as u32, header as u32)
}

/// Bytes of a message with `units` bytes of units: two headers, padded to 8.
fn message_len(units: usize) -> u64 {
    (16 + units.next_multiple_of(8)) as u64
}

/// A lock that a panicked holder did not poison for good: the state it
/// guards is counters and buffers, valid at every step.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use quiver_verbs::loopback;

    use super::*;

    /// Three nodes of two workers each send thousands of messages to each
    /// other through rings that hold about three blocks, over several
    /// supersteps: every message arrives exactly once, in its superstep,
    /// though the rings wrap and senders wait for space.
    #[test]
    fn every_message_arrives_once_through_small_rings() {
        const NODES: u32 = 3;
        const WORKERS: usize = 2;
        const PER_PEER: u64 = 3000;
        let ring = 3 * message_len(BLOCK_UNITS * UNIT) + 40;
        let results = loopback::run(&loopback::Config::new(NODES), |node| {
            let rings = Rings::with_ring_bytes(&node, WORKERS, ring).unwrap();
            let rank = node.rank().0;
            let mut wraps = 0;
            for superstep in 0..3u64 {
                let count = AtomicU64::new(0);
                let sum = AtomicU64::new(0);
                let deliver = |dst: u32, value: u64| {
                    assert_eq!(dst, rank, "a message for {dst} reached node {rank}");
                    assert_eq!(value >> 48, superstep, "a message crossed supersteps");
                    count.fetch_add(1, Ordering::Relaxed);
                    sum.fetch_add(value & 0xffff_ffff_ffff, Ordering::Relaxed);
                };
                std::thread::scope(|scope| {
                    for worker in 0..WORKERS {
                        let (rings, deliver) = (&rings, &deliver);
                        scope.spawn(move || {
                            for to in (0..NODES).filter(|&to| to != rank) {
                                for i in 0..PER_PEER {
                                    let value = superstep << 48 | (u64::from(rank) << 20) | i;
                                    rings.send(worker, to as usize, to, value, deliver).unwrap();
                                }
                            }
                            rings.finish(worker, deliver).unwrap();
                        });
                    }
                });
                node.barrier().unwrap();
                let expected_count = PER_PEER * u64::from(NODES - 1) * WORKERS as u64;
                let expected_sum: u64 = (0..NODES)
                    .filter(|&from| from != rank)
                    .map(|from| {
                        WORKERS as u64
                            * (0..PER_PEER)
                                .map(|i| (u64::from(from) << 20) | i)
                                .sum::<u64>()
                    })
                    .sum();
                assert_eq!(
                    count.into_inner(),
                    expected_count,
                    "node {rank} superstep {superstep}"
                );
                assert_eq!(
                    sum.into_inner(),
                    expected_sum,
                    "node {rank} superstep {superstep}"
                );
                let traffic = rings.take_traffic();
                assert_eq!(
                    traffic.messages,
                    PER_PEER * u64::from(NODES - 1) * WORKERS as u64
                );
                wraps += traffic.bytes / ring;
            }
            wraps
        })
        .unwrap();
        assert!(
            results.iter().all(|&w| w > 10),
            "the rings wrapped: {results:?}"
        );
    }
}
