//! RGraph's task migration between nodes (§5.2 of the paper): a node whose
//! workers have run out of their own tasks in a push superstep takes tasks
//! from the end of another node's worklist with one-sided verbs, without
//! that node's CPU.
//!
//! Each node publishes its superstep's tasks in a registered region: one
//! 64-bit word `head << 32 | tail`, then the tasks, 12 bytes each (the
//! vertex and the state it carries, [`crate::program::EdgeProgram::state`]).
//! Its own workers claim a grab of tasks from the head; another node claims
//! [`MIGRATE_BLOCK`] from the tail, visiting the others in ring order from
//! its successor, while more than `threshold` tasks are left: it READs the
//! word, CASes it to the shortened tail, and READs the claimed tasks. Both
//! ends move only by compare-and-swap of that one word (the implementation
//! notes' fix: the paper's two counters changed by separate atomics could
//! hand a task out twice, which a sum like PageRank would count twice).
//!
//! Decisions the paper leaves open, and ours:
//! - A migrated task's edges are read from the graph file, which every node
//!   of a job maps (the input path is the same on every node), instead of
//!   by RDMA READ from the owner's memory; the page cache then plays the
//!   paper's migration cache. So migration needs the graph's own out-edges:
//!   it is off for programs reading both directions of a directed graph.
//! - Results stay with the migrator, as the paper's: a task's messages
//!   reduce into the migrator's masters or mirrors, and mirrors forward to
//!   their masters as any other.
//! - The local CAS and the remote CAS act on the same word; on the
//!   loopback, tcp and mpi fabrics they are mutually atomic. (On a NIC
//!   with only `IBV_ATOMIC_HCA` they would not be; the ibverbs fabric must
//!   route the local CAS through the NIC.)

use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use quiver_verbs::{Node, Queue, Region, RemoteRegion};

use crate::rings::lock;
use crate::{Error, Result};

/// Tasks another node claims at once: the paper's `migrate_block`.
pub const MIGRATE_BLOCK: u32 = 8;
/// Bytes of one task: the vertex and its carried state.
const TASK: usize = 12;

/// This node's worklist and its view of the others'.
pub struct Worklists {
    rank: usize,
    size: usize,
    region: Region,
    remotes: Vec<RemoteRegion>,
    queues: Vec<Mutex<Queue>>,
    threshold: u32,
    /// Tasks this node took from others this superstep.
    migrated: AtomicU64,
}

impl Worklists {
    /// Registers a worklist for up to `capacity` tasks and exchanges the
    /// regions; others migrate from it while more than `threshold` tasks
    /// are left. Every node calls it.
    pub fn new(node: &Node, capacity: u32, workers: usize, threshold: u32) -> Result<Worklists> {
        let bytes = 8 + TASK * capacity.max(1) as usize;
        let region = node.register(bytes).map_err(Error::Verbs)?;
        let remotes = node.exchange(&region).map_err(Error::Verbs)?;
        Ok(Worklists {
            rank: node.rank().index(),
            size: node.size() as usize,
            region,
            remotes,
            queues: (0..workers).map(|_| Mutex::new(node.queue())).collect(),
            threshold,
            migrated: AtomicU64::new(0),
        })
    }

    /// Publishes this superstep's tasks: `tasks` with the states `state`
    /// gives them, written before the word that makes them visible. Until
    /// then the word shows the last list, used up (head = tail), so no
    /// node claims from it.
    pub fn publish(&self, tasks: &[u32], state: impl Fn(u32) -> u64) {
        let mut bytes = Vec::with_capacity(tasks.len() * TASK);
        for &v in tasks {
            bytes.extend_from_slice(&v.to_le_bytes());
            bytes.extend_from_slice(&state(v).to_le_bytes());
        }
        self.region.write(8, &bytes);
        let tail = u32::try_from(tasks.len()).expect("a worklist fits u32");
        self.region.store(0, pack(0, tail));
    }

    /// Claims the next `n` (at most) of this node's own tasks from the
    /// head.
    pub fn grab(&self, n: usize) -> Option<Range<usize>> {
        let n = u32::try_from(n).unwrap_or(u32::MAX);
        loop {
            let word = self.region.load(0);
            let (head, tail) = unpack(word);
            if head >= tail {
                return None;
            }
            let end = head.saturating_add(n).min(tail);
            if self.region.compare_swap(0, word, pack(end, tail)) == word {
                return Some(head as usize..end as usize);
            }
        }
    }

    /// Takes up to [`MIGRATE_BLOCK`] tasks from the tail of another node's
    /// worklist for `worker`, trying the nodes in ring order; `None` once
    /// every other node is down to its threshold.
    pub fn steal(&self, worker: usize) -> Result<Option<Vec<(u32, u64)>>> {
        let mut queue = lock(&self.queues[worker]);
        for offset in 1..self.size {
            let peer = (self.rank + offset) % self.size;
            let remote = self.remotes[peer];
            loop {
                let word = read_word(&mut queue, remote)?;
                let (head, tail) = unpack(word);
                if tail.saturating_sub(head) <= self.threshold.max(MIGRATE_BLOCK) {
                    break;
                }
                let from = tail - MIGRATE_BLOCK;
                let seen = queue
                    .compare_swap(remote, 0, word, pack(head, from))
                    .map_err(Error::Verbs)?;
                if seen != word {
                    continue;
                }
                let len = MIGRATE_BLOCK as usize * TASK;
                let offset = 8 + u64::from(from) * TASK as u64;
                let bytes = queue.read(remote, offset, len).map_err(Error::Verbs)?;
                self.migrated
                    .fetch_add(u64::from(MIGRATE_BLOCK), Ordering::Relaxed);
                return Ok(Some(bytes.chunks_exact(TASK).map(split_task).collect()));
            }
        }
        Ok(None)
    }

    /// Bytes of the registered worklist.
    pub fn bytes(&self) -> u64 {
        self.region.len() as u64
    }

    /// Tasks taken from others since the last call, and resets the count.
    pub fn take_migrated(&self) -> u64 {
        self.migrated.swap(0, Ordering::Relaxed)
    }
}

impl std::fmt::Debug for Worklists {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worklists")
            .field("rank", &self.rank)
            .field("threshold", &self.threshold)
            .finish_non_exhaustive()
    }
}

fn read_word(queue: &mut Queue, remote: RemoteRegion) -> Result<u64> {
    let bytes = queue.read(remote, 0, 8).map_err(Error::Verbs)?;
    let word: [u8; 8] = bytes
        .as_slice()
        .try_into()
        .map_err(|_| Error::Corrupt(format!("a worklist word of {} bytes", bytes.len())))?;
    Ok(u64::from_le_bytes(word))
}

fn pack(head: u32, tail: u32) -> u64 {
    (u64::from(head) << 32) | u64::from(tail)
}

#[allow(clippy::cast_possible_truncation)] // The two halves of the word.
fn unpack(word: u64) -> (u32, u32) {
    ((word >> 32) as u32, word as u32)
}

fn split_task(bytes: &[u8]) -> (u32, u64) {
    let (vertex, state) = bytes.split_at(4);
    (
        u32::from_le_bytes(vertex.try_into().expect("4 bytes")),
        u64::from_le_bytes(state.try_into().expect("8 bytes")),
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use quiver_verbs::loopback;

    use super::*;

    /// Node 0's own worker grabs from the head while nodes 1 and 2 steal
    /// from the tail: every task is taken exactly once, with its state,
    /// and the thieves stop at the threshold.
    #[test]
    fn every_task_is_taken_once_by_its_owner_or_a_thief() {
        const TASKS: u32 = 5000;
        let taken = loopback::run(&loopback::Config::new(3), |node| {
            let worklists = Worklists::new(&node, TASKS, 1, 16).unwrap();
            let rank = node.rank().0;
            let tasks: Vec<u32> = (0..TASKS).map(|i| i * 3).collect();
            if rank == 0 {
                worklists.publish(&tasks, |v| u64::from(v) * 7);
            }
            node.barrier().unwrap();
            let mut mine = Vec::new();
            if rank == 0 {
                while let Some(range) = worklists.grab(64) {
                    mine.extend(range.map(|i| (tasks[i], u64::from(tasks[i]) * 7)));
                    // A busy owner: its tasks take time.
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            } else {
                while let Some(tasks) = worklists.steal(0).unwrap() {
                    mine.extend(tasks);
                }
            }
            node.barrier().unwrap();
            mine
        })
        .unwrap();
        let mut all = BTreeSet::new();
        for (vertex, state) in taken.iter().flatten() {
            assert_eq!(
                *state,
                u64::from(*vertex) * 7,
                "task {vertex} lost its state"
            );
            assert!(all.insert(*vertex), "task {vertex} was taken twice");
        }
        assert_eq!(all.len(), TASKS as usize, "some tasks were never taken");
        assert!(
            taken[1].len() + taken[2].len() > 0,
            "nobody stole: {:?}",
            taken.iter().map(Vec::len).collect::<Vec<_>>()
        );
    }
}
