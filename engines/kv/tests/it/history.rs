//! Linearizability of Gets and Puts while values migrate, checked on
//! recorded histories.
//!
//! Puts append unique ids, so a key's history is an append-only list: the
//! final list fixes the order the Puts took effect, and every Get must
//! have returned the original list plus a prefix of the appended ids. The
//! history is linearizable iff no two operations contradict real time
//! (Wing & Gong's search has a single candidate order here; for an
//! append-only object, pairwise checks of real-time order against it
//! decide):
//! - a Put that ended before another began takes effect before it;
//! - a Get sees every Put that ended before it began, and no Put that
//!   began after it ended;
//! - a Get that ended before another began sees no more than it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use quiver_csr::testing::karate;
use quiver_kv::layout::{block_words, Placement};
use quiver_kv::{Clock, StoreConfig, Update};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;

use crate::on_stores;

/// One operation on a key: when it was invoked and when it returned, on a
/// clock shared by every thread.
#[derive(Clone, Debug)]
enum Event {
    /// Appended `id`.
    Put {
        id: u32,
        invoked: u64,
        returned: u64,
    },
    /// Read `list`.
    Get {
        list: Vec<u32>,
        invoked: u64,
        returned: u64,
    },
}

/// Why a key's history is not linearizable.
fn check(original: &[u32], last: &[u32], events: &[Event]) -> Result<(), String> {
    if last.get(..original.len()) != Some(original) {
        return Err("the original list changed".into());
    }
    let appended = &last[original.len()..];
    let position = |id: u32| appended.iter().position(|&a| a == id);
    let mut puts = Vec::new();
    for event in events {
        if let Event::Put {
            id,
            invoked,
            returned,
        } = *event
        {
            let at = position(id).ok_or(format!("acknowledged put {id} is lost"))?;
            puts.push((at, invoked, returned));
        }
    }
    if puts.len() != appended.len() {
        return Err(format!(
            "{} puts acknowledged, {} ids appended",
            puts.len(),
            appended.len()
        ));
    }
    for &(a, a_in, _) in &puts {
        for &(b, _, b_out) in &puts {
            if b_out < a_in && b > a {
                return Err(format!("put at {b} ended before the put at {a} began"));
            }
        }
    }
    let mut gets: Vec<(usize, u64, u64)> = Vec::new();
    for event in events {
        if let Event::Get {
            list,
            invoked,
            returned,
        } = event
        {
            // A torn read, or one of a block that held something else,
            // returns a list that was never the key's.
            if list.len() < original.len() || !last.starts_with(list) {
                return Err(format!("a get read {list:?}, never the key's list"));
            }
            gets.push((list.len() - original.len(), *invoked, *returned));
        }
    }
    for &(seen, g_in, g_out) in &gets {
        for &(at, p_in, p_out) in &puts {
            if p_out < g_in && at >= seen {
                return Err(format!(
                    "a get missed the put at {at}, which ended before it began"
                ));
            }
            if p_in > g_out && at < seen {
                return Err(format!(
                    "a get saw the put at {at}, which began after it ended"
                ));
            }
        }
        for &(later_seen, later_in, _) in &gets {
            if g_out < later_in && later_seen < seen {
                return Err(format!(
                    "a get saw {seen} puts, a later one only {later_seen}"
                ));
            }
        }
    }
    Ok(())
}

#[test]
fn the_checker_catches_lost_stale_and_reordered_operations() {
    let put = |id, invoked, returned| Event::Put {
        id,
        invoked,
        returned,
    };
    let get = |list: &[u32], invoked, returned| Event::Get {
        list: list.to_vec(),
        invoked,
        returned,
    };
    let original = [1, 2];
    let good = [
        put(7, 0, 5),
        put(8, 6, 9),
        get(&[1, 2, 7], 5, 7),
        get(&[1, 2, 7, 8], 10, 11),
        get(&[1, 2, 7], 6, 10),
    ];
    assert_eq!(check(&original, &[1, 2, 7, 8], &good), Ok(()));
    // Lost: an acknowledged put is missing.
    assert!(check(&original, &[1, 2, 8], &good).is_err());
    // Reordered: 8 began after 7 ended but took effect first.
    assert!(check(&original, &[1, 2, 8, 7], &good).is_err());
    // Stale: a get after the second put ended saw only the first.
    let stale = [put(7, 0, 5), put(8, 6, 9), get(&[1, 2, 7], 10, 11)];
    assert!(check(&original, &[1, 2, 7, 8], &stale).is_err());
    // New then old: two gets in real-time order going backwards.
    let backwards = [put(7, 0, 10), get(&[1, 2, 7], 1, 2), get(&[1, 2], 3, 4)];
    assert!(check(&original, &[1, 2, 7], &backwards).is_err());
    // From the future: a get saw a put that began after it ended.
    let future = [get(&[1, 2, 7], 0, 1), put(7, 2, 3)];
    assert!(check(&original, &[1, 2, 7], &future).is_err());
    // Torn or misread: a list the key never had, in time order otherwise.
    for list in [&[1, 9, 7][..], &[1, 2, 8], &[1]] {
        let torn = [put(7, 0, 5), put(8, 6, 9), get(list, 10, 11)];
        assert!(check(&original, &[1, 2, 7, 8], &torn).is_err(), "{list:?}");
    }
}

/// Three nodes, two workers each, doing random Gets and Puts on a few keys
/// while every node's migrator pulls random keys to itself (moves,
/// migrate-backs, CAS races with Puts) and reclaims under a short lease on
/// a shared manual clock. Every key's history must be linearizable. The
/// run stops at [`CHECKPOINTS`] points, where every node must name the
/// same holder of every key and read the same list, and, once the
/// replaced blocks' leases are out, every node's blocks in use must be
/// exactly the live values it holds: one holder a value, no copy left.
#[test]
fn gets_and_puts_stay_linearizable_while_values_migrate() {
    let graph = &karate(true);
    let nodes = 3;
    let placement = Placement::new(graph.num_vertices(), nodes);
    let keys: Vec<u32> = (0..graph.num_vertices()).step_by(5).collect();
    assert!(keys.iter().any(|&k| placement.home_node(k) == 0));
    let config = StoreConfig {
        cache_lease: Duration::from_nanos(40),
        reclaim_lease: Duration::from_nanos(50),
        ..StoreConfig::default()
    };
    let clock = Clock::manual();
    let now = AtomicU64::new(0);
    let tick = || now.fetch_add(1, Ordering::SeqCst);
    let history: Mutex<Vec<(u32, Event)>> = Mutex::new(Vec::new());
    let next_id = AtomicU64::new(10_000);
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
                            // One key, or a few with the stages pipelined.
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
                            store.reclaim();
                            if store.rank() == 0 {
                                clock.advance(1);
                            }
                            std::thread::yield_now();
                        }
                    });
                    let workers: Vec<_> = (0..2u64)
                        .map(|w| {
                            let (keys, history, next_id) = (&keys, &history, &next_id);
                            scope.spawn(move || {
                                let mut session = store.session();
                                let mut rng = Pcg64::seed_from_u64(
                                    u64::from(store.rank()) * 100 + round * 10 + w,
                                );
                                for _ in 0..OPS_PER_ROUND {
                                    let key = keys[rng.random_range(0..keys.len())];
                                    let invoked = tick();
                                    let event = if rng.random_bool(0.4) {
                                        let id =
                                            u32::try_from(next_id.fetch_add(1, Ordering::SeqCst))
                                                .unwrap();
                                        session.put(key, Update::AddEdge(id)).unwrap();
                                        Event::Put {
                                            id,
                                            invoked,
                                            returned: tick(),
                                        }
                                    } else {
                                        let list = session.get(key, u64::MAX).unwrap().ids;
                                        Event::Get {
                                            list,
                                            invoked,
                                            returned: tick(),
                                        }
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
                checkpoints.push(checkpoint(node, store, graph, &keys, &clock));
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
    let lists = &finals[0].0[CHECKPOINTS - 1].lists;
    for (i, &key) in keys.iter().enumerate() {
        let events: Vec<Event> = history
            .iter()
            .filter(|(k, _)| *k == key)
            .map(|(_, e)| e.clone())
            .collect();
        if let Err(why) = check(graph.neighbors(key), &lists[i], &events) {
            panic!("vertex {key}: {why}\n{events:?}\nfinal {:?}", lists[i]);
        }
    }
    let migrations: u64 = finals.iter().map(|f| f.1).sum();
    assert!(migrations > 10, "values moved {migrations} times");
    // The checkpoints saw values away from their homes.
    assert!(
        finals[0].0.iter().any(|at| keys
            .iter()
            .zip(&at.holders)
            .any(|(&k, &holder)| holder != placement.home_node(k))),
        "every checkpoint found every value at home"
    );
    // Reads raced the migrations' invalidations, were refused by the size
    // word and went round again (and the check above says none returned a
    // list the key never had).
    let retries: u64 = finals.iter().map(|f| f.2).sum();
    assert!(retries > 0, "no read was refused and retried");
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
    lists: Vec<Vec<u32>>,
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
    graph: &quiver_csr::Graph,
    keys: &[u32],
    clock: &Clock,
) -> Checkpoint {
    let mut session = store.session();
    let holders: Vec<u32> = keys.iter().map(|&k| session.holder(k).unwrap()).collect();
    let lists: Vec<Vec<u32>> = keys
        .iter()
        .map(|&k| session.get(k, u64::MAX).unwrap().ids)
        .collect();
    node.barrier().unwrap();
    // Ring entries' leases start when their owner first sees them: one
    // pass to see them all, a lease, and one to free them.
    store.reclaim();
    node.barrier().unwrap();
    if store.rank() == 0 {
        clock.advance(1_000);
    }
    node.barrier().unwrap();
    store.reclaim();
    let held = keys
        .iter()
        .zip(&holders)
        .zip(&lists)
        .filter(|((_, &holder), _)| holder == store.rank())
        .map(|(_, list)| block_words(list.len() as u64, graph.is_weighted()))
        .sum::<u64>()
        + (0..graph.num_vertices())
            .filter(|v| !keys.contains(v) && store.home_node(*v) == store.rank())
            .map(|v| block_words(graph.degree(v), graph.is_weighted()))
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
