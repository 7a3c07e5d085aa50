//! The contract of this crate as a test suite, written once and run against
//! every fabric: by this crate's tests (loopback threads, tcp processes, mpi
//! under `mpirun`), and by `quiver verbs check` on a user's own cluster.
//!
//! Every node of a job calls [`run`] (SPMD), directly or as the job task
//! [`Suite`]; checks meet in barriers and agree on their outcome, so a check
//! that fails on one node fails on all and the suite goes on to the next
//! one. Every check registers its regions in the same order on every node
//! (what the `mpi` fabric needs).

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result, VerbError};
use crate::job::Task;
use crate::wr::{Completion, Op, Output, Verb, WorkRequest};
use crate::{Counters, Node, NodeRank, Queue, Reduce, RemoteRegion};

/// The outcome of one check on one node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// The check's name.
    pub check: String,
    /// Whether it passed on every node.
    pub passed: bool,
    /// What went wrong on this node (empty if nothing did here).
    pub detail: String,
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verdict = if self.passed { "ok" } else { "FAILED" };
        write!(f, "{:<12} {verdict}", self.check)?;
        if !self.detail.is_empty() {
            write!(f, ": {}", self.detail)?;
        }
        Ok(())
    }
}

/// A check's own verdict: `Err` says what did not hold.
type Verdict = std::result::Result<(), String>;

type CheckFn = fn(&Node) -> Result<Verdict>;

/// The checks, in the order they run.
pub const CHECKS: [(&str, CheckFn); 7] = [
    ("read_write", read_write),
    ("fetch_add", fetch_add),
    ("compare_swap", compare_swap),
    ("errors", errors),
    ("ordering", ordering),
    ("send_recv", send_recv),
    ("counters", counters),
];

/// Runs every check on this node; every node of the job must call it.
///
/// # Errors
/// A failure of the job itself (a lost node, a timeout in a collective);
/// a check whose assertions fail is reported in its [`Outcome`] instead.
pub fn run(node: &Node) -> Result<Vec<Outcome>> {
    let mut outcomes = Vec::new();
    for (check, body) in CHECKS {
        node.barrier()?;
        let detail = match body(node) {
            Ok(Ok(())) => String::new(),
            Ok(Err(mismatch)) => mismatch,
            Err(err @ (Error::NodeFailed { .. } | Error::Timeout { .. })) => return Err(err),
            Err(err) => error_chain(&err),
        };
        let failures = node.all_reduce(u64::from(!detail.is_empty()), Reduce::Sum)?;
        outcomes.push(Outcome {
            check: check.to_owned(),
            passed: failures == 0,
            detail,
        });
    }
    Ok(outcomes)
}

/// What one node of a [`Suite`] job reports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeReport {
    /// The node.
    pub rank: NodeRank,
    /// Every check's outcome on it, in [`CHECKS`] order.
    pub checks: Vec<Outcome>,
    /// The verbs it initiated during the suite.
    pub counters: Counters,
}

/// The suite as a job task (`verbs-check`): every node runs [`run`] and
/// reports its outcomes and counters.
#[derive(Debug, Clone, Copy)]
pub struct Suite;

impl Task for Suite {
    const NAME: &'static str = "verbs-check";
    type Config = ();
    type Report = NodeReport;
    type Error = Error;

    fn run(node: &Node, _: &()) -> Result<NodeReport> {
        Ok(NodeReport {
            rank: node.rank(),
            checks: run(node)?,
            counters: node.counters(),
        })
    }
}

fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn ranks(node: &Node) -> impl Iterator<Item = NodeRank> {
    (0..node.size()).map(NodeRank)
}

fn pattern(rank: NodeRank, i: usize) -> u8 {
    low_byte(
        rank.index()
            .wrapping_mul(31)
            .wrapping_add(i.wrapping_mul(7))
            % 251,
    )
}

fn low_byte(x: usize) -> u8 {
    x.to_le_bytes()[0]
}

fn ensure(ok: bool, detail: impl FnOnce() -> String) -> Result<Verdict> {
    Ok(if ok { Ok(()) } else { Err(detail()) })
}

/// Polls until `n` completions arrived; returns them in completion order.
fn wait_all(queue: &mut Queue, n: usize) -> Result<Vec<Completion>> {
    let mut out = Vec::with_capacity(n);
    queue.wait(&mut out, n, n)?;
    Ok(out)
}

const LEN: usize = 4096;
const SLOT: usize = 64;

/// READs of aligned and unaligned ranges of every node's region return what
/// its owner wrote locally; WRITEs to unaligned slots land exactly there and
/// nowhere else.
fn read_write(node: &Node) -> Result<Verdict> {
    let region = node.register(LEN)?;
    let bytes: Vec<u8> = (0..LEN).map(|i| pattern(node.rank(), i)).collect();
    region.write(0, &bytes);
    let remotes = node.exchange(&region)?;
    let mut queue = node.queue();
    let ranges = [
        (0usize, LEN),
        (1, 7),
        (13, 100),
        (4000, 96),
        (8, 8),
        (4095, 1),
        (17, 0),
    ];
    for &remote in &remotes {
        for &(offset, len) in &ranges {
            let got = queue.read(remote, offset as u64, len)?;
            let want: Vec<u8> = (offset..offset + len)
                .map(|i| pattern(remote.node, i))
                .collect();
            if got != want {
                return Ok(Err(format!(
                    "READ of {len} bytes at {offset} from node {} returned wrong bytes",
                    remote.node
                )));
            }
        }
    }
    node.barrier()?;
    let me = node.rank();
    let slot_data: Vec<u8> = (0..SLOT - 14).map(|i| pattern(me, i + 1000)).collect();
    let wrs = remotes.iter().enumerate().map(|(i, &remote)| {
        WorkRequest::new(
            i as u64,
            Op::Write {
                remote,
                offset: (me.index() * SLOT + 3) as u64,
                data: slot_data.clone(),
            },
        )
    });
    queue.post(wrs)?;
    for completion in wait_all(&mut queue, remotes.len())? {
        match completion.result {
            Ok(Output::Written(buffer)) if buffer == slot_data => {}
            Ok(other) => {
                return Ok(Err(format!(
                    "WRITE to node {} completed with {other:?}, not its buffer handed back",
                    completion.peer
                )))
            }
            Err(err) => {
                return Ok(Err(format!(
                    "WRITE to node {} failed: {err}",
                    completion.peer
                )))
            }
        }
    }
    node.barrier()?;
    let mut mine = vec![0; LEN];
    region.read(0, &mut mine);
    for (i, &byte) in mine.iter().enumerate() {
        let (slot, within) = (i / SLOT, i % SLOT);
        let want = if slot < node.size() as usize && (3..3 + slot_data.len()).contains(&within) {
            pattern(
                NodeRank(u32::try_from(slot).expect("slot < size")),
                within - 3 + 1000,
            )
        } else {
            pattern(me, i)
        };
        if byte != want {
            return Ok(Err(format!(
                "byte {i} of node {me}'s region is {byte} after the WRITEs, expected {want}"
            )));
        }
    }
    Ok(Ok(()))
}

const INCREMENTS: u64 = 200;
const THREADS: u64 = 2;

/// FETCH_ADDs from every thread of every node on one word of node 0, posted
/// 16 at a time: the final value is the number of increments and the values
/// returned are exactly 0..total, each once.
fn fetch_add(node: &Node) -> Result<Verdict> {
    let region = node.register(64)?;
    let counter = node.exchange(&region)?[0];
    let olds = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..THREADS)
            .map(|_| {
                scope.spawn(|| -> Result<Vec<u64>> {
                    let mut queue = node.queue();
                    let mut olds = Vec::new();
                    for batch in 0..INCREMENTS / 20 {
                        queue.post((0..20).map(|i| {
                            WorkRequest::new(
                                batch * 20 + i,
                                Op::FetchAdd {
                                    remote: counter,
                                    offset: 8,
                                    add: 1,
                                },
                            )
                        }))?;
                        for completion in wait_all(&mut queue, 20)? {
                            match completion.result {
                                Ok(Output::Value(old)) => olds.push(old),
                                other => {
                                    return Err(Error::invalid(
                                        "fetch_add",
                                        format!("FETCH_ADD completed with {other:?}"),
                                    ))
                                }
                            }
                        }
                    }
                    Ok(olds)
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|worker| worker.join().expect("fetch_add worker panicked"))
            .collect::<Result<Vec<_>>>()
    })?;
    let mine: Vec<u8> = olds
        .concat()
        .iter()
        .flat_map(|old| old.to_le_bytes())
        .collect();
    let all = node.all_gather(&mine)?;
    let total = INCREMENTS * THREADS * u64::from(node.size());
    let seen: BTreeSet<u64> = all
        .iter()
        .flat_map(|bytes| {
            bytes
                .chunks_exact(8)
                .map(|w| u64::from_le_bytes(w.try_into().expect("8 bytes")))
        })
        .collect();
    let returned: usize = all.iter().map(|bytes| bytes.len() / 8).sum();
    node.barrier()?;
    if node.rank() == NodeRank(0) {
        let value = region.load(8);
        if value != total {
            return Ok(Err(format!("counter is {value} after {total} increments")));
        }
    }
    ensure(
        returned as u64 == total && seen.len() as u64 == total && seen.last() == Some(&(total - 1)),
        || {
            format!("FETCH_ADD returned {returned} values, {} distinct, largest {:?}; expected each of 0..{total} once", seen.len(), seen.last())
        },
    )
}

/// CAS-loop increments from every node on a word of node 0 (read it, swap
/// in value + 1, retry on a mismatch): no increment is lost.
fn compare_swap(node: &Node) -> Result<Verdict> {
    let region = node.register(64)?;
    let counter = node.exchange(&region)?[0];
    let mut queue = node.queue();
    let mut failures = 0u64;
    for _ in 0..INCREMENTS {
        let mut current = queue.compare_swap(counter, 16, 0, 0)?;
        loop {
            let old = queue.compare_swap(counter, 16, current, current + 1)?;
            if old == current {
                break;
            }
            failures += 1;
            current = old;
        }
    }
    node.barrier()?;
    let total = INCREMENTS * u64::from(node.size());
    if node.rank() == NodeRank(0) && region.load(16) != total {
        return Ok(Err(format!(
            "counter is {} after {total} CAS increments ({failures} retries here)",
            region.load(16)
        )));
    }
    Ok(Ok(()))
}

/// Bad keys, out-of-range accesses and misaligned atomics complete with the
/// matching error, in order among successful operations, and change nothing.
fn errors(node: &Node) -> Result<Verdict> {
    let region = node.register(100)?;
    let remotes = node.exchange(&region)?;
    let peer = remotes[(node.rank().index() + 1) % remotes.len()];
    let bad_key = RemoteRegion {
        key: peer.key ^ 0x5a5a_0000,
        ..peer
    };
    let mut queue = node.queue();
    let batch = [
        Op::Read {
            remote: peer,
            offset: 0,
            len: 100,
        },
        Op::Read {
            remote: bad_key,
            offset: 0,
            len: 8,
        },
        Op::Read {
            remote: peer,
            offset: 96,
            len: 8,
        },
        Op::Write {
            remote: peer,
            offset: 99,
            data: vec![1, 2],
        },
        Op::Write {
            remote: peer,
            offset: u64::MAX - 1,
            data: vec![1, 2, 3],
        },
        Op::FetchAdd {
            remote: peer,
            offset: 4,
            add: 1,
        },
        Op::CompareSwap {
            remote: peer,
            offset: 96,
            expected: 0,
            new: 1,
        },
        Op::FetchAdd {
            remote: peer,
            offset: 0,
            add: 0,
        },
    ];
    queue.post(
        batch
            .iter()
            .cloned()
            .enumerate()
            .map(|(i, op)| WorkRequest::new(i as u64, op)),
    )?;
    let completions = wait_all(&mut queue, batch.len())?;
    let (node_id, key) = (peer.node, peer.key);
    let out_of_bounds = |offset, len| {
        Err(VerbError::OutOfBounds {
            node: node_id,
            key,
            offset,
            len,
            region_len: 100,
        })
    };
    let expected: [std::result::Result<Output, VerbError>; 8] = [
        Ok(Output::Data(vec![0; 100])),
        Err(VerbError::UnknownKey {
            node: node_id,
            key: bad_key.key,
        }),
        out_of_bounds(96, 8),
        out_of_bounds(99, 2),
        out_of_bounds(u64::MAX - 1, 3),
        Err(VerbError::Misaligned {
            node: node_id,
            key,
            offset: 4,
        }),
        out_of_bounds(96, 8),
        Ok(Output::Value(0)),
    ];
    for (i, (completion, want)) in completions.iter().zip(&expected).enumerate() {
        if completion.wr_id != i as u64 || &completion.result != want {
            return Ok(Err(format!(
                "request {i} completed as #{} with {:?}, expected {want:?}",
                completion.wr_id, completion.result
            )));
        }
    }
    node.barrier()?;
    let mut mine = vec![0; 100];
    region.read(0, &mut mine);
    ensure(mine.iter().all(|&b| b == 0), || {
        format!("failed operations changed node {}'s region", node.rank())
    })
}

/// On one queue, a READ posted right behind a WRITE (or a FETCH_ADD) to the
/// same place sees its effect, without waiting in between.
fn ordering(node: &Node) -> Result<Verdict> {
    let region = node.register(8 * SLOT * node.size() as usize)?;
    let remotes = node.exchange(&region)?;
    let mut queue = node.queue();
    let me = node.rank().index();
    for round in 0..20u8 {
        for &remote in &remotes {
            let offset = (me * SLOT * 8) as u64;
            let data: Vec<u8> = (0..SLOT)
                .map(|i| round.wrapping_mul(13).wrapping_add(low_byte(i)))
                .collect();
            queue.post([
                WorkRequest::new(
                    0,
                    Op::Write {
                        remote,
                        offset,
                        data: data.clone(),
                    },
                ),
                WorkRequest::new(
                    1,
                    Op::Read {
                        remote,
                        offset,
                        len: SLOT,
                    },
                ),
                WorkRequest::new(
                    2,
                    Op::FetchAdd {
                        remote,
                        offset: offset + SLOT as u64,
                        add: 5,
                    },
                ),
                WorkRequest::new(
                    3,
                    Op::Read {
                        remote,
                        offset: offset + SLOT as u64,
                        len: 8,
                    },
                ),
            ])?;
            let completions = wait_all(&mut queue, 4)?;
            let ids: Vec<u64> = completions.iter().map(|c| c.wr_id).collect();
            if ids != [0, 1, 2, 3] {
                return Ok(Err(format!(
                    "completions to node {} arrived as {ids:?}",
                    remote.node
                )));
            }
            if completions[1].result != Ok(Output::Data(data)) {
                return Ok(Err(format!(
                    "READ after WRITE on node {} missed the WRITE in round {round}",
                    remote.node
                )));
            }
            let want = (u64::from(round) + 1) * 5;
            if completions[3].result != Ok(Output::Data(want.to_le_bytes().to_vec())) {
                return Ok(Err(format!(
                    "READ after FETCH_ADD on node {} saw {:?}, expected {want}",
                    remote.node, completions[3].result
                )));
            }
        }
    }
    // Peers may still be using this node's region.
    node.barrier()?;
    Ok(Ok(()))
}

const MESSAGES: usize = 30;

/// Messages from every node to every node (itself included) arrive, each
/// sender's in order and intact; a message longer than the receive it
/// matches completes that receive with an error naming both sizes.
fn send_recv(node: &Node) -> Result<Verdict> {
    let n = node.size() as usize;
    let me = node.rank();
    let mut queue = node.queue();
    let expected = n * MESSAGES;
    queue.post((0..expected).map(|i| WorkRequest::new(i as u64, Op::Recv { capacity: 256 })))?;
    node.barrier()?;
    let message = |from: NodeRank, to: NodeRank, seq: usize| -> Vec<u8> {
        let len = (seq * 37 + to.index()) % 200;
        let mut data = vec![low_byte(from.index()), low_byte(seq)];
        data.extend((0..len).map(|i| pattern(from, i + seq)));
        data
    };
    let sends = (0..MESSAGES).flat_map(|seq| ranks(node).map(move |to| (seq, to)));
    queue.post(sends.map(|(seq, to)| {
        WorkRequest::new(
            (1 << 32) + (seq * n + to.index()) as u64,
            Op::Send {
                to,
                data: message(me, to, seq),
            },
        )
    }))?;
    let completions = wait_all(&mut queue, 2 * expected)?;
    let mut next_seq = vec![0usize; n];
    for completion in completions {
        match (completion.verb, completion.result) {
            (Verb::Send, Ok(Output::Done)) => {}
            (Verb::Recv, Ok(Output::Message(data))) => {
                let from = completion.peer;
                let seq = next_seq[from.index()];
                if data != message(from, me, seq) {
                    return Ok(Err(format!(
                        "message {seq} from node {from} arrived out of order or damaged"
                    )));
                }
                next_seq[from.index()] += 1;
            }
            (verb, result) => {
                return Ok(Err(format!(
                    "{verb} #{} completed with {result:?}",
                    completion.wr_id
                )))
            }
        }
    }
    if next_seq.iter().any(|&count| count != MESSAGES) {
        return Ok(Err(format!(
            "received {next_seq:?} messages per sender, expected {MESSAGES} each"
        )));
    }
    node.barrier()?;
    let next = NodeRank((me.0 + 1) % node.size());
    queue.post([WorkRequest::new(7, Op::Recv { capacity: 16 })])?;
    node.barrier()?;
    queue.post([WorkRequest::new(
        8,
        Op::Send {
            to: next,
            data: vec![9; 40],
        },
    )])?;
    let completions = wait_all(&mut queue, 2)?;
    let previous = NodeRank((me.0 + node.size() - 1) % node.size());
    let want = Err(VerbError::ReceiveTooSmall {
        from: previous,
        len: 40,
        capacity: 16,
    });
    let recv = completions.iter().find(|c| c.verb == Verb::Recv);
    ensure(recv.is_some_and(|c| c.result == want), || {
        format!("an oversized message completed its receive with {recv:?}, expected {want:?}")
    })
}

/// The counters count exactly what was posted, by peer and verb.
fn counters(node: &Node) -> Result<Verdict> {
    let region = node.register(256)?;
    let remotes = node.exchange(&region)?;
    let mut queue = node.queue();
    queue.post(ranks(node).map(|_| WorkRequest::new(0, Op::Recv { capacity: 64 })))?;
    // Taken before the barrier: after it, messages may arrive at any moment.
    let before = node.counters();
    node.barrier()?;
    let mut posted = 0;
    for &remote in &remotes {
        let peer = remote.node.index() as u64;
        let mut wrs = Vec::new();
        for i in 0..=peer {
            wrs.push(Op::Read {
                remote,
                offset: i,
                len: 10,
            });
        }
        for _ in 0..2 {
            wrs.push(Op::Write {
                remote,
                offset: 64,
                data: vec![1; 20 + remote.node.index()],
            });
        }
        wrs.push(Op::CompareSwap {
            remote,
            offset: 128,
            expected: 1,
            new: 2,
        });
        wrs.push(Op::FetchAdd {
            remote,
            offset: 136,
            add: 1,
        });
        wrs.push(Op::FetchAdd {
            remote,
            offset: 136,
            add: 1,
        });
        wrs.push(Op::Send {
            to: remote.node,
            data: vec![3; 5 + node.rank().index()],
        });
        posted += wrs.len();
        queue.post(wrs.into_iter().map(|op| WorkRequest::new(1, op)))?;
    }
    // Every request completes, and one message arrives from every node.
    let completions = wait_all(&mut queue, posted + node.size() as usize)?;
    if let Some(failed) = completions.iter().find(|c| c.result.is_err()) {
        return Ok(Err(format!(
            "{} to node {} failed: {:?}",
            failed.verb, failed.peer, failed.result
        )));
    }
    node.barrier()?;
    let delta = node.counters().since(&before);
    for peer in ranks(node) {
        let p = peer.index() as u64;
        let want = [
            (Verb::Read, p + 1, 10 * (p + 1)),
            (Verb::Write, 2, 2 * (20 + p)),
            (Verb::CompareSwap, 1, 8),
            (Verb::FetchAdd, 2, 16),
            (Verb::Send, 1, 5 + node.rank().index() as u64),
            (Verb::Recv, 1, 5 + p),
        ];
        for (verb, ops, bytes) in want {
            let got = delta.get(peer, verb);
            if (got.ops, got.bytes) != (ops, bytes) {
                return Ok(Err(format!(
                    "{verb} towards node {peer}: counted {} ops / {} bytes, posted {ops} / {bytes}",
                    got.ops, got.bytes
                )));
            }
        }
    }
    Ok(Ok(()))
}
