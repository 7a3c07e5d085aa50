//! Linearizability of Gets and Puts while values migrate (one at a time or
//! pipelined) or whole shards move, checked on recorded histories.
//!
//! A key is an object whose state is its list (ids and weights): a Put
//! applies an update (append, repoint an edge, set a weight) and a Get
//! returns a prefix of the list. A key's history is linearizable iff some
//! order of its operations that keeps real time (an operation that
//! returned before another was invoked comes first) explains every Get's
//! result from the sequential list. [`linearizable`] searches for one:
//! Wing & Gong's search, with Lowe's memo of (operations taken, list)
//! pairs, which is quick when few operations overlap.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use quiver_kv::layout::{block_words, Edges, Placement};
use quiver_kv::{Clock, StoreConfig, Update};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

use crate::{on_stores, outlast_leases, weighted_karate};

/// A list as the checkers hold it: each edge's target and weight bits (of
/// 1 in an unweighted graph, the weight `.qcsr` gives an unweighted edge).
pub type List = Vec<(u32, u32)>;

/// `edges` as a [`List`].
pub fn list_of(edges: &Edges) -> List {
    let one = 1.0f32.to_bits();
    match &edges.weights {
        Some(weights) => edges
            .ids
            .iter()
            .zip(weights)
            .map(|(&id, w)| (id, w.to_bits()))
            .collect(),
        None => edges.ids.iter().map(|&id| (id, one)).collect(),
    }
}

/// What an operation did to a key.
#[derive(Clone, Debug)]
pub enum Op {
    /// A Put of the update.
    Put(Update),
    /// A Get of the first `limit` edges, which read `read`.
    Get { limit: u64, read: List },
}

/// One operation on a key: what it did, and when it was invoked and when
/// it returned, on a clock shared by every thread (no two times equal).
#[derive(Clone, Debug)]
struct Event {
    op: Op,
    invoked: u64,
    returned: u64,
}

/// The list after `op` on `list`, the sequential specification; `None`
/// when `op` is a Get whose result this list does not explain (a weighted
/// graph's prefix: exactly the first `limit` edges), or a weight set on a
/// list without edges.
pub fn step(op: &Op, list: &List) -> Option<List> {
    let mut list = list.clone();
    let one = 1.0f32.to_bits();
    match *op {
        Op::Put(Update::AddEdge(target)) => list.push((target, one)),
        Op::Put(Update::AddWeightedEdge { target, weight }) => {
            list.push((target, weight.to_bits()))
        }
        Op::Put(Update::SetEdge { index, target }) => match list.len() {
            0 => list.push((target, one)),
            n => list[index as usize % n].0 = target,
        },
        Op::Put(Update::SetWeight { index, weight }) => {
            let n = list.len();
            list.get_mut(index as usize % n.max(1))?.1 = weight.to_bits();
        }
        Op::Get { limit, ref read } => {
            let cut = usize::try_from(limit).unwrap_or(usize::MAX).min(list.len());
            return (read[..] == list[..cut]).then_some(list);
        }
    }
    Some(list)
}

/// Whether some real-time order of `events` explains them from `initial`;
/// the error names the first operation no order could take.
fn linearizable(initial: &List, events: &[Event]) -> Result<(), String> {
    let n = events.len();
    // Entries 0..2n: op i's call is 2i, its return 2i + 1; a doubly
    // linked list of them in time order, from HEAD to TAIL.
    let (head, tail) = (2 * n, 2 * n + 1);
    let mut order: Vec<usize> = (0..2 * n).collect();
    let time = |entry: usize| {
        let e = &events[entry / 2];
        if entry.is_multiple_of(2) {
            e.invoked
        } else {
            e.returned
        }
    };
    order.sort_by_key(|&entry| time(entry));
    let mut next = vec![tail; 2 * n + 2];
    let mut prev = vec![head; 2 * n + 2];
    let mut last = head;
    for &entry in &order {
        next[last] = entry;
        prev[entry] = last;
        last = entry;
    }
    next[last] = tail;
    prev[tail] = last;
    let unlink = |next: &mut Vec<usize>, prev: &mut Vec<usize>, x: usize| {
        let (p, q) = (prev[x], next[x]);
        next[p] = q;
        prev[q] = p;
    };
    let relink = |next: &mut Vec<usize>, prev: &mut Vec<usize>, x: usize| {
        let (p, q) = (prev[x], next[x]);
        next[p] = x;
        prev[q] = x;
    };
    let mut taken = vec![0u64; n.div_ceil(64)];
    let mut memo: HashSet<(Vec<u64>, List)> = HashSet::new();
    let mut stack: Vec<(usize, List)> = Vec::new();
    let mut list = initial.clone();
    let mut entry = next[head];
    while next[head] != tail {
        let op = entry / 2;
        if entry.is_multiple_of(2) {
            if let Some(after) = step(&events[op].op, &list) {
                taken[op / 64] |= 1 << (op % 64);
                if memo.insert((taken.clone(), after.clone())) {
                    stack.push((op, std::mem::replace(&mut list, after)));
                    unlink(&mut next, &mut prev, 2 * op);
                    unlink(&mut next, &mut prev, 2 * op + 1);
                    entry = next[head];
                    continue;
                }
                taken[op / 64] &= !(1 << (op % 64));
            }
            entry = next[entry];
        } else {
            // An operation returned before any order could take it: undo
            // the last choice and try the next operation after it.
            let Some((undone, before)) = stack.pop() else {
                return Err(format!(
                    "no order explains {:?}, which returned at {}",
                    events[op].op, events[op].returned
                ));
            };
            taken[undone / 64] &= !(1 << (undone % 64));
            list = before;
            relink(&mut next, &mut prev, 2 * undone + 1);
            relink(&mut next, &mut prev, 2 * undone);
            entry = next[2 * undone];
        }
    }
    Ok(())
}

#[test]
fn the_checker_catches_lost_stale_reordered_torn_and_misapplied_operations() {
    let one = 1.0f32.to_bits();
    let list = |ids: &[u32]| -> List { ids.iter().map(|&id| (id, one)).collect() };
    let add = |id, invoked, returned| Event {
        op: Op::Put(Update::AddEdge(id)),
        invoked,
        returned,
    };
    let get = |limit, read: List, invoked, returned| Event {
        op: Op::Get { limit, read },
        invoked,
        returned,
    };
    let all = u64::MAX;
    let initial = list(&[1, 2]);
    let good = [
        add(7, 0, 5),
        add(8, 6, 9),
        get(all, list(&[1, 2, 7]), 4, 7),
        get(all, list(&[1, 2, 7, 8]), 10, 11),
        get(all, list(&[1, 2, 7]), 8, 12),
        get(1, list(&[1]), 13, 14),
    ];
    assert_eq!(linearizable(&initial, &good), Ok(()));
    let bad = |last: Event, why: &str| {
        let mut events = good[..2].to_vec();
        events.push(last);
        assert!(linearizable(&initial, &events).is_err(), "{why}");
    };
    bad(
        get(all, list(&[1, 2, 8]), 10, 11),
        "lost: an acknowledged put is missing",
    );
    bad(
        get(all, list(&[1, 2, 8, 7]), 10, 11),
        "reordered: 8 began after 7 ended",
    );
    bad(
        get(all, list(&[1, 2, 7]), 10, 11),
        "stale: both puts ended before",
    );
    bad(
        get(all, list(&[1, 9, 7]), 10, 11),
        "torn: a list the key never had",
    );
    bad(
        get(2, list(&[1, 2, 7]), 10, 11),
        "a prefix longer than asked",
    );
    bad(
        get(3, list(&[1, 2]), 10, 11),
        "a prefix shorter than the list",
    );
    // New then old: two gets in real-time order going backwards.
    let backwards = [
        add(7, 0, 10),
        get(all, list(&[1, 2, 7]), 1, 2),
        get(all, list(&[1, 2]), 3, 4),
    ];
    assert!(linearizable(&initial, &backwards).is_err());
    // From the future: a get saw a put that began after it ended.
    let future = [get(all, list(&[1, 2, 7]), 0, 1), add(7, 2, 3)];
    assert!(linearizable(&initial, &future).is_err());
    // Repointing and weights, all three operations overlapping.
    let set = |index, target, invoked, returned| Event {
        op: Op::Put(Update::SetEdge { index, target }),
        invoked,
        returned,
    };
    let weigh = |index, weight: f32, invoked, returned| Event {
        op: Op::Put(Update::SetWeight { index, weight }),
        invoked,
        returned,
    };
    let mut both = list(&[5, 2]);
    both[0].1 = 0.5f32.to_bits();
    let overlapping = [
        set(2, 5, 0, 10),
        weigh(0, 0.5, 1, 9),
        get(all, both.clone(), 2, 11),
    ];
    assert_eq!(linearizable(&initial, &overlapping), Ok(()));
    let mut wrong = both;
    wrong[1].1 = 0.5f32.to_bits();
    let misapplied = [
        set(2, 5, 0, 10),
        weigh(0, 0.5, 1, 9),
        get(all, wrong, 2, 11),
    ];
    assert!(linearizable(&initial, &misapplied).is_err());
}

/// How values move in a run of [`linearizable_while_values_move`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Moves {
    /// Each node's migrator pulls random keys to itself, one or a
    /// pipelined batch at a time (moves, migrate-backs, CAS races with
    /// Puts).
    Split,
    /// At each checkpoint, with every worker stopped, two of the keys'
    /// shards move whole to another node (the `shard` baseline).
    Shards,
}

/// Three nodes, two workers each, doing random Gets (whole lists and
/// prefixes) and Puts (appends, repointed edges, new weights) on a few
/// keys of the weighted karate club while values move as `moves` says,
/// and each node reclaims under a short lease on a shared manual clock.
/// Every key's history must be linearizable. The run stops at
/// [`CHECKPOINTS`] points, where every node must name the same holder of
/// every key and read the same list, and, once the replaced blocks'
/// leases are out, every node's blocks in use must be exactly the live
/// values it holds: one holder a value, no copy left.
fn linearizable_while_values_move(moves: Moves) {
    let graph = &weighted_karate();
    let nodes = 3;
    let placement = Placement::new(graph.num_vertices(), nodes);
    let keys: Vec<u32> = (0..graph.num_vertices()).step_by(5).collect();
    assert!(keys.iter().any(|&k| placement.home_node(k) == 0));
    let config = StoreConfig {
        cache_lease: Duration::from_nanos(40),
        reclaim_lease: Duration::from_nanos(50),
        // Shards move with nothing cached: the shard map says where every
        // key is (a cached local address would name the old home's memory).
        shards_move: moves == Moves::Shards,
        serve_cache: moves == Moves::Split,
        ..StoreConfig::default()
    };
    let clock = Clock::manual();
    let now = AtomicU64::new(0);
    let tick = || now.fetch_add(1, Ordering::SeqCst);
    let history: Mutex<Vec<(u32, Event)>> = Mutex::new(Vec::new());
    let finals = on_stores(graph, nodes, &config, &clock, |node, store| {
        std::thread::scope(|scope| {
            let server = scope.spawn(|| store.serve());
            node.barrier().unwrap();
            let mut retries = 0;
            let mut checkpoints = Vec::new();
            for round in 0..CHECKPOINTS as u64 {
                let done = AtomicBool::new(false);
                std::thread::scope(|scope| {
                    let migrator = scope.spawn(|| {
                        let mut session = store.session();
                        let mut rng = Pcg64::seed_from_u64(u64::from(store.rank()) * 100 + round);
                        while !done.load(Ordering::Relaxed) {
                            if moves == Moves::Split {
                                if rng.random_bool(0.5) {
                                    session
                                        .migrate(keys[rng.random_range(0..keys.len())])
                                        .unwrap();
                                } else {
                                    let batch: Vec<u32> = (0..3)
                                        .map(|_| keys[rng.random_range(0..keys.len())])
                                        .collect();
                                    session.migrate_batch(&batch).unwrap();
                                }
                            }
                            store.reclaim();
                            if store.rank() == 0 {
                                clock.advance(1);
                            }
                            std::thread::yield_now();
                        }
                    });
                    let workers: Vec<_> = (0..2u64)
                        .map(|w| {
                            let (keys, history) = (&keys, &history);
                            scope.spawn(move || {
                                let mut session = store.session();
                                let mut rng = Pcg64::seed_from_u64(
                                    u64::from(store.rank()) * 100 + round * 10 + w,
                                );
                                for _ in 0..OPS_PER_ROUND {
                                    let key = keys[rng.random_range(0..keys.len())];
                                    let op = random_op(&mut rng, graph.num_vertices());
                                    let invoked = tick();
                                    let op = match op {
                                        Op::Put(update) => {
                                            session.put(key, update).unwrap();
                                            Op::Put(update)
                                        }
                                        Op::Get { limit, .. } => Op::Get {
                                            limit,
                                            read: list_of(&session.get(key, limit).unwrap()),
                                        },
                                    };
                                    let returned = tick();
                                    let event = Event {
                                        op,
                                        invoked,
                                        returned,
                                    };
                                    history.lock().unwrap().push((key, event));
                                }
                                session.tally().retries
                            })
                        })
                        .collect();
                    retries += workers.into_iter().map(|w| w.join().unwrap()).sum::<u64>();
                    node.barrier().unwrap();
                    done.store(true, Ordering::Relaxed);
                    migrator.join().unwrap();
                });
                node.barrier().unwrap();
                if moves == Moves::Shards {
                    move_two_shards(node, store, &keys, round);
                }
                checkpoints.push(checkpoint(node, store, &keys, config.reclaim_lease));
            }
            node.barrier().unwrap();
            store.session().stop_server().unwrap();
            server.join().unwrap().unwrap();
            (checkpoints, store.counts().migrations, retries)
        })
    });
    let history = history.into_inner().unwrap();
    for round in 0..CHECKPOINTS {
        let at = |rank: usize| &finals[rank].0[round];
        for rank in 0..nodes as usize {
            assert_eq!(
                at(rank).holders,
                at(0).holders,
                "checkpoint {round}: node {rank} names other holders than node 0"
            );
            assert_eq!(
                at(rank).lists,
                at(0).lists,
                "checkpoint {round}: node {rank} reads other lists than node 0"
            );
            assert_eq!(
                at(rank).used,
                at(rank).held,
                "checkpoint {round}: node {rank}'s blocks in use are not exactly its live values"
            );
        }
    }
    for &key in &keys {
        let events: Vec<Event> = history
            .iter()
            .filter(|(k, _)| *k == key)
            .map(|(_, e)| e.clone())
            .collect();
        let initial = list_of(&Edges::of(graph, key));
        if let Err(why) = linearizable(&initial, &events) {
            panic!("vertex {key}: {why}\n{events:?}");
        }
    }
    // The checkpoints saw values away from their homes.
    assert!(
        finals[0].0.iter().any(|at| keys
            .iter()
            .zip(&at.holders)
            .any(|(&k, &holder)| holder != placement.home_node(k))),
        "every checkpoint found every value at home"
    );
    if moves == Moves::Split {
        let migrations: u64 = finals.iter().map(|f| f.1).sum();
        assert!(migrations > 10, "values moved {migrations} times");
        // Reads raced the migrations' invalidations, were refused by the
        // size word and went round again (and the check above says none
        // returned a list the key never had).
        let retries: u64 = finals.iter().map(|f| f.2).sum();
        assert!(retries > 0, "no read was refused and retried");
    }
}

#[test]
fn gets_and_puts_stay_linearizable_while_values_migrate() {
    linearizable_while_values_move(Moves::Split);
}

#[test]
fn gets_and_puts_stay_linearizable_while_shards_move() {
    linearizable_while_values_move(Moves::Shards);
}

/// A random operation for a key of a graph of `vertices` vertices: 40%
/// Puts (an appended weighted edge, a repointed edge, a new weight), the
/// rest Gets of the whole list or of a prefix.
fn random_op(rng: &mut Pcg64, vertices: u32) -> Op {
    if rng.random_bool(0.4) {
        let index = rng.random_range(0..64);
        let weight = f32::from(rng.random_range(0u16..1000)) / 8.0;
        Op::Put(match rng.random_range(0..3) {
            0 => Update::AddWeightedEdge {
                target: rng.random_range(0..vertices),
                weight,
            },
            1 => Update::SetEdge {
                index,
                target: rng.random_range(0..vertices),
            },
            _ => Update::SetWeight { index, weight },
        })
    } else {
        let limit = [1, 3, 8, u64::MAX][rng.random_range(0..4)];
        Op::Get {
            limit,
            read: List::new(),
        }
    }
}

/// Moves two of the keys' shards, chosen by `round`, each to the next
/// node after its home, as the `shard` baseline does: with every worker
/// stopped, the targets copy, every node repoints its map, then the old
/// homes drop their copies. Every node must call it.
fn move_two_shards(node: &quiver_verbs::Node, store: &quiver_kv::Store, keys: &[u32], round: u64) {
    let placement = store.placement();
    let mut rng = Pcg64::seed_from_u64(round);
    let mut shards: Vec<u32> = (0..2)
        .map(|_| placement.locate(keys[rng.random_range(0..keys.len())]).0)
        .collect();
    shards.dedup();
    let nodes = store.node().size();
    let plan: Vec<(u32, u32, u32)> = shards
        .iter()
        .map(|&shard| {
            let from = store.shard_home(shard);
            (shard, from, (from + 1) % nodes)
        })
        .collect();
    let mut session = store.session();
    node.barrier().unwrap();
    for &(shard, _, to) in &plan {
        if to == store.rank() {
            session.pull_shard(shard).unwrap();
        }
    }
    node.barrier().unwrap();
    for &(shard, _, to) in &plan {
        store.set_shard_home(shard, to);
    }
    node.barrier().unwrap();
    for &(shard, from, _) in &plan {
        if from == store.rank() {
            store.drop_shard(shard);
        }
    }
    node.barrier().unwrap();
}

/// Quiet points of the concurrent run, and operations a worker does
/// between two.
const CHECKPOINTS: usize = 8;
const OPS_PER_ROUND: usize = 150;

/// What one node sees of the keys at a checkpoint.
struct Checkpoint {
    /// Each key's holder, as the home's address word names it.
    holders: Vec<u32>,
    /// Each key's list.
    lists: Vec<List>,
    /// Words of this node's value region in use, once every replaced
    /// block's lease is out.
    used: u64,
    /// Words of the live values this node holds.
    held: u64,
}

/// Reads every key's holder and list from this node, then lets every
/// replaced block's lease run out and counts the words in use here
/// against the live values held here. Every node must call it: it waits
/// for the others at barriers.
fn checkpoint(
    node: &quiver_verbs::Node,
    store: &quiver_kv::Store,
    keys: &[u32],
    lease: Duration,
) -> Checkpoint {
    let mut session = store.session();
    let holders: Vec<u32> = keys.iter().map(|&k| session.holder(k).unwrap()).collect();
    let lists: Vec<List> = keys
        .iter()
        .map(|&k| list_of(&session.get(k, u64::MAX).unwrap()))
        .collect();
    node.barrier().unwrap();
    outlast_leases(node, store, lease);
    // Every vertex but the keys is as loaded, on the node its shard is on.
    let graph = weighted_karate();
    let held = keys
        .iter()
        .zip(&holders)
        .zip(&lists)
        .filter(|((_, &holder), _)| holder == store.rank())
        .map(|(_, list)| block_words(list.len() as u64, true))
        .sum::<u64>()
        + (0..graph.num_vertices())
            .filter(|v| !keys.contains(v) && store.home_node(*v) == store.rank())
            .map(|v| block_words(graph.degree(v), true))
            .sum::<u64>();
    let used = store.used_words();
    // No node reads or moves again until every node has counted.
    node.barrier().unwrap();
    Checkpoint {
        holders,
        lists,
        used,
        held,
    }
}
