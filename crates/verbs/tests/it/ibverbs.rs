//! The `ibverbs` fabric. Without an RDMA device, `join` must fail with a
//! reason a user can act on; with one, two nodes (threads of this process,
//! connected through an in-process all-gather) must pass the conformance
//! suite. These tests need no `#[ignore]`: they adapt to the machine.

use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use quiver_verbs::conformance::{self, Outcome};
use quiver_verbs::ibverbs::{self, Exchange};
use quiver_verbs::{Error, NodeRank, Result};

const TIMEOUT: Duration = Duration::from_secs(60);

/// An all-gather among the threads of this process: round after round,
/// every rank contributes once and all receive every contribution.
struct Gather {
    size: usize,
    state: Mutex<Round>,
    done: Condvar,
}

struct Round {
    generation: u64,
    slots: Vec<Option<Vec<u8>>>,
    results: Arc<Vec<Vec<u8>>>,
}

impl Gather {
    fn new(size: usize) -> Arc<Self> {
        Arc::new(Self {
            size,
            state: Mutex::new(Round {
                generation: 0,
                slots: vec![None; size],
                results: Arc::new(Vec::new()),
            }),
            done: Condvar::new(),
        })
    }

    fn exchange(self: &Arc<Self>, rank: NodeRank) -> Exchange {
        let gather = Arc::clone(self);
        Box::new(move |data| gather.all_gather(rank, data))
    }

    fn all_gather(&self, rank: NodeRank, data: Vec<u8>) -> Result<Vec<Vec<u8>>> {
        let mut round = self.state.lock().unwrap();
        round.slots[rank.index()] = Some(data);
        if round.slots.iter().all(Option::is_some) {
            let results = round
                .slots
                .iter_mut()
                .map(|slot| slot.take().unwrap())
                .collect();
            round.results = Arc::new(results);
            round.generation += 1;
            self.done.notify_all();
            return Ok(round.results.to_vec());
        }
        let generation = round.generation;
        let deadline = Instant::now() + TIMEOUT;
        while round.generation == generation {
            let now = Instant::now();
            if now >= deadline {
                return Err(Error::Timeout {
                    what: format!("waiting for {} nodes in an all-gather", self.size),
                    after: TIMEOUT,
                });
            }
            round = self.done.wait_timeout(round, deadline - now).unwrap().0;
        }
        Ok(round.results.to_vec())
    }
}

/// Where the machine has no RDMA device, `join` says so (and why) instead
/// of failing any other way; where it has one, `join` works.
#[test]
fn join_works_or_says_why_not() {
    let gather = Gather::new(1);
    match ibverbs::join(NodeRank(0), 1, TIMEOUT, gather.exchange(NodeRank(0))) {
        Ok(node) => {
            assert_eq!(node.fabric(), "ibverbs");
            assert_eq!(node.size(), 1);
        }
        Err(Error::Unavailable { fabric, reason }) => {
            assert_eq!(fabric, "ibverbs");
            assert!(!reason.trim().is_empty(), "Unavailable without a reason");
            println!("the {fabric} fabric is unavailable: {reason}");
        }
        Err(other) => panic!("join failed with {other:?}, expected Unavailable"),
    }
}

enum Run {
    Skipped(String),
    Ran(Vec<Outcome>),
}

/// Two nodes pass every check of the conformance suite.
#[test]
fn conformance_two_nodes() {
    let gather = Gather::new(2);
    let runs: Vec<Result<Run>> = std::thread::scope(|scope| {
        let nodes: Vec<_> = (0..2)
            .map(|rank| {
                let exchange = gather.exchange(NodeRank(rank));
                scope.spawn(
                    move || match ibverbs::join(NodeRank(rank), 2, TIMEOUT, exchange) {
                        Ok(node) => conformance::run(&node).map(Run::Ran),
                        Err(Error::Unavailable { reason, .. }) => Ok(Run::Skipped(reason)),
                        Err(err) => Err(err),
                    },
                )
            })
            .collect();
        nodes
            .into_iter()
            .map(|node| node.join().expect("node thread panicked"))
            .collect()
    });
    let mut failures = Vec::new();
    for (rank, run) in runs.into_iter().enumerate() {
        match run {
            Ok(Run::Skipped(reason)) => {
                println!("skipping: {reason}");
                return;
            }
            Ok(Run::Ran(outcomes)) => {
                assert_eq!(outcomes.len(), conformance::CHECKS.len());
                failures.extend(
                    outcomes
                        .iter()
                        .filter(|outcome| !outcome.passed)
                        .map(|outcome| format!("node {rank}: {outcome}")),
                );
            }
            Err(err) => failures.push(format!("node {rank}: {err}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
