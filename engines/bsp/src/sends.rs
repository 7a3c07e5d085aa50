//! The two-sided baseline (`--transport two-sided`): the same blocks of
//! messages as the rings, sent with SEND into receives the target node
//! keeps posted, as MPI point-to-point sends them (over the `mpi` fabric
//! this is the paper's MPI baseline).
//!
//! Every worker owns one queue holding [`POSTED`] receives and its sends
//! in flight (at most `WINDOW`, as the rings' WRITEs); it never blocks without polling that
//! queue, so two workers sending to each other both make progress. A block
//! is `[count u32][units]`; a count of `u32::MAX` is the END of a worker's
//! superstep. A node's superstep is over when every worker of every peer
//! sent its END: the sends of one worker take effect in order, so by then
//! every block is in some worker's completion queue, and each worker
//! drains its own once more.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use quiver_verbs::{Completion, Node, NodeRank, Op, Output, Queue, Verb, WorkRequest};

use crate::channel::{Channel, Traffic};
use crate::rings::{deliver_units, lock, push_unit, BLOCK_UNITS, UNIT, WINDOW};
use crate::{Error, Result};

/// Receives each worker keeps posted.
pub const POSTED: usize = 32;

const END: u32 = u32::MAX;
const BLOCK_BYTES: usize = 4 + BLOCK_UNITS * UNIT;

/// The two-sided transport of one node.
pub struct Sends {
    rank: usize,
    size: usize,
    workers: usize,
    lanes: Vec<Mutex<Lane>>,
    /// ENDs received this superstep.
    ended: AtomicU64,
}

struct Lane {
    queue: Queue,
    blocks: Vec<Vec<u8>>,
    in_flight: usize,
    completions: Vec<Completion>,
    traffic: Traffic,
}

impl Sends {
    /// The transport of `node` for `workers` workers per node (the same on
    /// every node), with every worker's receives posted. Every node calls
    /// it before any sends.
    pub fn new(node: &Node, workers: usize) -> Result<Sends> {
        let lanes = (0..workers)
            .map(|_| {
                let mut queue = node.queue();
                let receives = (0..POSTED).map(|_| receive());
                queue.post(receives).map_err(Error::Verbs)?;
                Ok(Mutex::new(Lane {
                    queue,
                    blocks: vec![Vec::with_capacity(BLOCK_BYTES); node.size() as usize],
                    in_flight: 0,
                    completions: Vec::new(),
                    traffic: Traffic::default(),
                }))
            })
            .collect::<Result<_>>()?;
        // No node sends before every node has posted its receives.
        node.barrier().map_err(Error::Verbs)?;
        Ok(Sends {
            rank: node.rank().index(),
            size: node.size() as usize,
            workers,
            lanes,
            ended: AtomicU64::new(0),
        })
    }

    /// What this node's workers sent so far, and resets it.
    fn take_traffic(&self) -> Traffic {
        let mut total = Traffic::default();
        for lane in &self.lanes {
            total += std::mem::take(&mut lock(lane).traffic);
        }
        total
    }

    fn send_block(&self, lane: &mut Lane, to: usize, deliver: &dyn Fn(u32, u64)) -> Result<()> {
        while lane.in_flight >= WINDOW {
            self.progress(lane, deliver)?;
        }
        let mut block = std::mem::replace(&mut lane.blocks[to], Vec::with_capacity(BLOCK_BYTES));
        if block.len() > 4 {
            let count = u32::try_from((block.len() - 4) / UNIT).expect("a block holds 256 units");
            block[..4].copy_from_slice(&count.to_le_bytes());
        }
        lane.traffic.bytes += block.len() as u64;
        lane.traffic.writes += 1;
        let to = NodeRank(u32::try_from(to).expect("ranks fit u32"));
        lane.queue
            .post([WorkRequest::new(0, Op::Send { to, data: block })])
            .map_err(Error::Verbs)?;
        lane.in_flight += 1;
        Ok(())
    }

    /// Handles every completion on `lane`'s queue: delivers received
    /// blocks (reposting their receives) and retires finished sends.
    fn progress(&self, lane: &mut Lane, deliver: &dyn Fn(u32, u64)) -> Result<()> {
        let mut completions = std::mem::take(&mut lane.completions);
        lane.queue.poll(&mut completions, usize::MAX);
        let mut reposts = 0;
        for completion in completions.drain(..) {
            let (verb, peer) = (completion.verb, completion.peer);
            match (verb, completion.output().map_err(Error::Verbs)?) {
                (Verb::Send, _) => lane.in_flight -= 1,
                (Verb::Recv, Output::Message(block)) => {
                    reposts += 1;
                    self.take_block(&block, peer, deliver)?;
                }
                (verb, _) => {
                    return Err(Error::Corrupt(format!(
                        "an unexpected {verb} completed on a two-sided lane"
                    )))
                }
            }
        }
        lane.completions = completions;
        if reposts > 0 {
            lane.queue
                .post((0..reposts).map(|_| receive()))
                .map_err(Error::Verbs)?;
        }
        Ok(())
    }

    fn take_block(&self, block: &[u8], from: NodeRank, deliver: &dyn Fn(u32, u64)) -> Result<()> {
        let Some((head, units)) = block.split_first_chunk::<4>() else {
            return Err(Error::Corrupt(format!(
                "node {from} sent a block of {} bytes",
                block.len()
            )));
        };
        let count = u32::from_le_bytes(*head);
        if count == END {
            self.ended.fetch_add(1, Ordering::AcqRel);
            return Ok(());
        }
        if units.len() != count as usize * UNIT {
            return Err(Error::Corrupt(format!(
                "node {from} sent {count} units in {} bytes",
                units.len()
            )));
        }
        deliver_units(units, deliver);
        Ok(())
    }
}

impl Channel for Sends {
    /// Queues a message for `dst` on node `to` from `worker`, sending the
    /// block when it is full.
    fn send(
        &self,
        worker: usize,
        to: usize,
        dst: u32,
        value: u64,
        deliver: &dyn Fn(u32, u64),
    ) -> Result<()> {
        let mut lane = lock(&self.lanes[worker]);
        let block = &mut lane.blocks[to];
        if block.is_empty() {
            block.extend_from_slice(&0u32.to_le_bytes());
        }
        push_unit(block, dst, value);
        lane.traffic.messages += 1;
        if lane.blocks[to].len() == BLOCK_BYTES {
            self.send_block(&mut lane, to, deliver)?;
        }
        Ok(())
    }

    /// Processes the messages that arrived at `worker`'s queue.
    fn poll(&self, worker: usize, deliver: &dyn Fn(u32, u64)) -> Result<()> {
        let mut lane = lock(&self.lanes[worker]);
        self.progress(&mut lane, deliver)
    }

    /// Ends `worker`'s superstep: sends its partial blocks and an END to
    /// every peer, then processes arrivals until every peer's every worker
    /// has ended and its own sends completed.
    fn finish(&self, worker: usize, deliver: &dyn Fn(u32, u64)) -> Result<()> {
        let mut lane = lock(&self.lanes[worker]);
        for to in (0..self.size).filter(|&p| p != self.rank) {
            if !lane.blocks[to].is_empty() {
                self.send_block(&mut lane, to, deliver)?;
            }
            lane.blocks[to].extend_from_slice(&END.to_le_bytes());
            self.send_block(&mut lane, to, deliver)?;
        }
        let all = ((self.size - 1) * self.workers) as u64;
        let deadline = std::time::Instant::now() + lane.queue.node().timeout();
        while self.ended.load(Ordering::Acquire) < all || lane.in_flight > 0 {
            self.progress(&mut lane, deliver)?;
            if std::time::Instant::now() > deadline {
                return Err(Error::Stalled(format!(
                    "node {} worker {worker} waited {:?} for the end of a superstep",
                    self.rank,
                    lane.queue.node().timeout()
                )));
            }
            std::thread::yield_now();
        }
        // Blocks that arrived before the last END may sit in this queue.
        self.progress(&mut lane, deliver)
    }

    fn end_superstep(&self) -> Traffic {
        self.ended.store(0, Ordering::Release);
        self.take_traffic()
    }

    fn bytes(&self) -> u64 {
        (self.workers * POSTED * BLOCK_BYTES) as u64
    }
}

impl std::fmt::Debug for Sends {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sends")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("workers", &self.workers)
            .finish_non_exhaustive()
    }
}

fn receive() -> WorkRequest {
    WorkRequest::new(
        0,
        Op::Recv {
            capacity: BLOCK_BYTES,
        },
    )
}
