//! Gets, Puts and migrations against the graph and a sequential model.

use std::time::Duration;

use proptest::prelude::*;
use quiver_csr::testing::{arb_graph, karate, Shape};
use quiver_csr::Graph;
use quiver_kv::layout::Edges;
use quiver_kv::{Clock, Error, Plan, Store, StoreConfig, Update};
use quiver_verbs::{Node, Verb};

use crate::{on_stores, outlast_leases, weighted_karate};

fn sorted(mut ids: Vec<u32>) -> Vec<u32> {
    ids.sort_unstable();
    ids
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Every node reads every vertex's list as the graph has it, with
    /// its weights when the graph has them, whole or cut to a prefix, from
    /// 1 to 4 nodes.
    #[test]
    fn every_node_reads_the_graph(graph in arb_graph(Shape::new(60, 300)), nodes in 1u32..5, limit in 1u64..8) {
        let wrong = on_stores(&graph, nodes, &StoreConfig::default(), &Clock::manual(), |_, store| {
            let mut session = store.session();
            let mut wrong = Vec::new();
            for v in 0..graph.num_vertices() {
                let all = session.get(v, u64::MAX).unwrap();
                let some = session.get(v, limit).unwrap();
                let want = Edges::of(&graph, v);
                let cut = want.ids.len().min(usize::try_from(limit).unwrap());
                // A prefix of the list, at least `cut` long (an unweighted
                // read may bring the other half of its last word).
                let mut want_some = want.clone();
                want_some.truncate(some.ids.len());
                let prefix = some.ids.len() >= cut && some == want_some;
                if all != want || !prefix {
                    wrong.push(v);
                }
            }
            wrong
        });
        prop_assert!(wrong.iter().all(Vec::is_empty), "{wrong:?}");
    }
}

/// A vertex homed on `home` of `nodes` with at least one neighbour.
fn homed_on(graph: &Graph, nodes: u32, home: u32) -> u32 {
    let placement = quiver_kv::layout::Placement::new(graph.num_vertices(), nodes);
    (0..graph.num_vertices())
        .find(|&v| placement.home_node(v) == home && graph.degree(v) > 2)
        .expect("a vertex homed there")
}

#[test]
fn a_migration_takes_at_most_five_one_sided_operations_and_no_message() {
    let graph = karate(true);
    let key = homed_on(&graph, 3, 0);
    let want = graph.neighbors(key).to_vec();
    // Without a serving cache the key is looked up: 5 operations; with it
    // and a cached address, 4.
    for (serve, expected) in [(false, 5), (true, 4)] {
        let config = StoreConfig {
            serve_cache: serve,
            ..StoreConfig::default()
        };
        on_stores(&graph, 3, &config, &Clock::manual(), |node, store| {
            let mut session = store.session();
            if store.rank() == 1 {
                session.get(key, u64::MAX).unwrap();
                let before = node.counters();
                let ops = session.migrate(key).unwrap();
                let used = node.counters().since(&before);
                assert_eq!(ops, expected);
                let one_sided: u64 = [Verb::Read, Verb::Write, Verb::CompareSwap, Verb::FetchAdd]
                    .iter()
                    .map(|&verb| used.total(verb).ops)
                    .sum();
                assert_eq!(one_sided, expected);
                assert_eq!(used.total(Verb::Send).ops, 0);
                assert_eq!(store.counts().migrations, 1);
                // The value is here now: with a cached address no remote
                // operation at all, without one only the key's READ.
                let before = node.counters();
                assert_eq!(session.get(key, u64::MAX).unwrap().ids, want);
                let reads = node.counters().since(&before).total_ops();
                assert_eq!(reads, if serve { 0 } else { 1 });
            }
            node.barrier().unwrap();
            assert_eq!(session.holder(key).unwrap(), 1);
            assert_eq!(session.get(key, u64::MAX).unwrap().ids, want);
        });
    }
}

/// Runs `body(node, store, key, want)` on every node of 3 stores of the
/// karate club (default config, a manual clock): `key` a vertex homed on
/// `home`, `want` its list.
fn on_a_karate_key(home: u32, body: impl Fn(&Node, &Store, u32, &[u32]) + Sync) {
    let graph = karate(true);
    let key = homed_on(&graph, 3, home);
    let want = graph.neighbors(key).to_vec();
    on_stores(
        &graph,
        3,
        &StoreConfig::default(),
        &Clock::manual(),
        |node, store| body(node, store, key, &want),
    );
}

#[test]
fn a_value_travels_home_to_a_to_b_and_back_unchanged() {
    on_a_karate_key(2, |node, store, key, want| {
        let mut session = store.session();
        for target in [0, 1, 2] {
            if store.rank() == target {
                session.migrate(key).unwrap();
            }
            node.barrier().unwrap();
            assert_eq!(session.holder(key).unwrap(), target);
            assert_eq!(
                session.get(key, u64::MAX).unwrap().ids,
                want,
                "after the move to {target}"
            );
            node.barrier().unwrap();
        }
        // Migrating a value already here does nothing.
        if store.rank() == 2 {
            assert_eq!(session.migrate(key).unwrap(), 0);
        }
    });
}

/// A reader whose cached address still names a value's old copy reads
/// that copy's zeroed size word, and starts over from the home instead of
/// returning what the freed block holds.
#[test]
fn a_read_through_a_stale_address_is_caught_by_the_size_word_and_retried() {
    on_a_karate_key(0, |node, store, key, want| {
        let mut session = store.session();
        if store.rank() == 2 {
            assert_eq!(session.get(key, u64::MAX).unwrap().ids, want);
        }
        node.barrier().unwrap();
        if store.rank() == 1 {
            session.migrate(key).unwrap();
        }
        node.barrier().unwrap();
        if store.rank() == 2 {
            assert_eq!(session.get(key, u64::MAX).unwrap().ids, want);
            assert_eq!(
                session.tally().cache_hits,
                1,
                "the stale address came from the cache"
            );
            assert_eq!(
                session.tally().retries,
                1,
                "the old copy was read and refused"
            );
            assert_eq!(session.get(key, u64::MAX).unwrap().ids, want);
            assert_eq!(session.tally().retries, 1, "the new address is cached");
        }
    });
}

#[test]
fn puts_from_every_node_follow_the_value_and_none_is_lost() {
    let graph = karate(true);
    let nodes = 3;
    let keys: Vec<u32> = (0..nodes)
        .map(|home| homed_on(&graph, nodes, home))
        .collect();
    let results = on_stores(
        &graph,
        nodes,
        &StoreConfig::default(),
        &Clock::manual(),
        |node, store| {
            std::thread::scope(|scope| {
                let server = scope.spawn(|| store.serve());
                let mut session = store.session();
                node.barrier().unwrap();
                for round in 0..6u32 {
                    // Each round one node pulls every key's value to itself.
                    if store.rank() == round % nodes {
                        for &key in &keys {
                            session.migrate(key).unwrap();
                        }
                    }
                    for &key in &keys {
                        session
                            .put(key, Update::AddEdge(1000 + store.rank() * 100 + round))
                            .unwrap();
                    }
                    node.barrier().unwrap();
                }
                let lists: Vec<Vec<u32>> = keys
                    .iter()
                    .map(|&k| session.get(k, u64::MAX).unwrap().ids)
                    .collect();
                node.barrier().unwrap();
                session.stop_server().unwrap();
                server.join().unwrap().unwrap();
                (lists, store.counts().forwarded_puts)
            })
        },
    );
    let (lists, _) = &results[0];
    for (i, &key) in keys.iter().enumerate() {
        let original = graph.neighbors(key);
        let list = &lists[i];
        assert_eq!(&list[..original.len()], original);
        let added = sorted(list[original.len()..].to_vec());
        let mut want: Vec<u32> = (0..nodes)
            .flat_map(|n| (0..6).map(move |r| 1000 + n * 100 + r))
            .collect();
        want.sort_unstable();
        assert_eq!(added, want, "vertex {key}");
        for (lists, _) in &results {
            assert_eq!(&lists[i], list, "every node reads the same list");
        }
    }
    let forwarded: u64 = results.iter().map(|r| r.1).sum();
    assert!(forwarded > 0, "puts on moved values were forwarded");
}

#[test]
fn replaced_memory_is_reused_only_after_the_reclaim_lease() {
    let graph = karate(true);
    let key = homed_on(&graph, 2, 0);
    let config = StoreConfig {
        cache_lease: Duration::from_nanos(50),
        reclaim_lease: Duration::from_nanos(100),
        ..StoreConfig::default()
    };
    let clock = Clock::manual();
    on_stores(&graph, 2, &config, &clock, |node, store| {
        let mut session = store.session();
        let used = store.used_words();
        node.barrier().unwrap();
        if store.rank() == 1 {
            session.migrate(key).unwrap();
        }
        node.barrier().unwrap();
        // Node 0's old block waits in its ring for node 1.
        if store.rank() == 0 {
            store.reclaim();
            assert_eq!(store.used_words(), used, "nothing freed before the lease");
            clock.advance(99);
            store.reclaim();
            assert_eq!(store.used_words(), used, "nothing freed before the lease");
            clock.advance(101);
            store.reclaim();
            let block = quiver_kv::layout::block_words(graph.degree(key), graph.is_weighted());
            assert_eq!(store.used_words(), used - block, "freed after it");
            assert_eq!(store.counts().reclaimed, 1);
        }
        node.barrier().unwrap();
        assert_eq!(
            session.get(key, u64::MAX).unwrap().ids,
            graph.neighbors(key)
        );
    });
}

#[test]
fn a_full_value_region_frees_blocks_whose_lease_ran_out_before_it_fails() {
    let graph = karate(true);
    let key = 33;
    let config = StoreConfig {
        cache_lease: Duration::from_nanos(50),
        reclaim_lease: Duration::from_nanos(100),
        value_headroom: 1024,
        ..StoreConfig::default()
    };
    let clock = Clock::manual();
    on_stores(&graph, 1, &config, &clock, |_, store| {
        let mut session = store.session();
        let mut puts = 0;
        // Every Put leaves its list's old copy to wait out the lease.
        let err = loop {
            match session.put(key, Update::AddEdge(0)) {
                Ok(()) => puts += 1,
                Err(e) => break e,
            }
            assert!(puts < 1000, "the region never filled");
        };
        assert!(matches!(err, Error::ValueRegionFull { .. }), "{err}");
        assert!(puts > 0);
        // No reclaim ran since the lease ran out: the Put frees the copies.
        clock.advance(101);
        session.put(key, Update::AddEdge(0)).unwrap();
        let list = session.get(key, u64::MAX).unwrap().ids;
        assert_eq!(list.len(), graph.neighbors(key).len() + puts + 1);
    });
}

#[test]
fn leases_the_wrong_way_round_and_unknown_vertices_are_refused() {
    let graph = karate(true);
    let config = StoreConfig {
        cache_lease: Duration::from_secs(3),
        reclaim_lease: Duration::from_secs(2),
        ..StoreConfig::default()
    };
    let refused = quiver_verbs::loopback::run(&quiver_verbs::loopback::Config::new(1), |node| {
        quiver_kv::Store::open(&node, &graph, &config, Clock::manual()).map(drop)
    })
    .unwrap();
    let message = quiver_run::chain(refused[0].as_ref().unwrap_err());
    assert!(message.contains("cache_lease"), "{message}");
    on_stores(
        &graph,
        2,
        &StoreConfig::default(),
        &Clock::manual(),
        |_, store| {
            let mut session = store.session();
            let err = session.get(34, 10).unwrap_err();
            assert!(
                matches!(
                    err,
                    Error::UnknownVertex {
                        vertex: 34,
                        vertices: 34
                    }
                ),
                "{err}"
            );
            assert!(session.migrate(99).is_err());
            assert!(session.put(u32::MAX, Update::AddEdge(0)).is_err());
        },
    );
}

/// A node that leaves takes its keys and the values it holds with it: the
/// survivors' Gets of those fail naming it, at once rather than after a
/// timeout, and every other key is still served.
#[test]
fn a_lost_node_is_named_and_the_survivors_keep_serving() {
    let graph = karate(true);
    let nodes = 3;
    let placement = quiver_kv::layout::Placement::new(graph.num_vertices(), nodes);
    // Values homed on the survivors that node 2 takes before it goes.
    let taken: Vec<u32> = (0..graph.num_vertices())
        .filter(|&v| placement.home_node(v) != 2)
        .step_by(4)
        .collect();
    let survivors = std::sync::Barrier::new(2);
    let outcomes =
        quiver_verbs::loopback::run(&quiver_verbs::loopback::Config::new(nodes), |node| {
            let store =
                quiver_kv::Store::open(&node, &graph, &StoreConfig::default(), Clock::manual())
                    .unwrap();
            let mut session = store.session();
            if store.rank() == 2 {
                for &key in &taken {
                    session.migrate(key).unwrap();
                }
            }
            node.barrier().unwrap();
            if store.rank() == 2 {
                return Vec::new();
            }
            // Wait until node 2 is gone.
            let lost = (0..graph.num_vertices())
                .find(|&v| placement.home_node(v) == 2)
                .unwrap();
            let started = std::time::Instant::now();
            while session.get(lost, 1).is_ok() {
                assert!(
                    started.elapsed() < Duration::from_secs(10),
                    "node 2 never left"
                );
                std::thread::yield_now();
            }
            let mut wrong = Vec::new();
            for v in 0..graph.num_vertices() {
                let gone = placement.home_node(v) == 2 || taken.contains(&v);
                match session.get(v, u64::MAX).map(|e| e.ids) {
                    Ok(list) if !gone && list == graph.neighbors(v) => {}
                    // Lost, or its memory already gone with it: either way named.
                    Err(e) if gone && quiver_run::chain(&e).contains("node 2 ") => {}
                    other => wrong.push((v, other.map_err(|e| quiver_run::chain(&e)))),
                }
            }
            survivors.wait();
            wrong
        })
        .unwrap();
    for (rank, wrong) in outcomes.iter().enumerate() {
        assert!(wrong.is_empty(), "node {rank}: {wrong:?}");
    }
}

#[test]
fn a_pipelined_batch_moves_every_value_with_at_most_five_operations_each() {
    let graph = karate(true);
    let nodes = 3;
    let placement = quiver_kv::layout::Placement::new(graph.num_vertices(), nodes);
    let away: Vec<u32> = (0..graph.num_vertices())
        .filter(|&v| placement.home_node(v) != 1)
        .collect();
    on_stores(
        &graph,
        nodes,
        &StoreConfig::default(),
        &Clock::manual(),
        |node, store| {
            let mut session = store.session();
            if store.rank() == 1 {
                let before = node.counters();
                let ops = session.migrate_batch(&away).unwrap();
                let used = node.counters().since(&before);
                assert_eq!(store.counts().migrations, away.len() as u64);
                assert!(
                    ops <= 5 * away.len() as u64,
                    "{ops} operations for {} values",
                    away.len()
                );
                assert_eq!(used.total(Verb::Send).ops, 0);
                // Again: all here already, nothing to do.
                assert_eq!(session.migrate_batch(&away).unwrap(), 0);
            }
            node.barrier().unwrap();
            for v in 0..graph.num_vertices() {
                let holder = if away.contains(&v) {
                    1
                } else {
                    placement.home_node(v)
                };
                assert_eq!(session.holder(v).unwrap(), holder, "vertex {v}");
                assert_eq!(session.get(v, u64::MAX).unwrap().ids, graph.neighbors(v));
            }
            node.barrier().unwrap();
            // And home again, batched from each home.
            let mine: Vec<u32> = away
                .iter()
                .copied()
                .filter(|&v| placement.home_node(v) == store.rank())
                .collect();
            session.migrate_batch(&mine).unwrap();
            node.barrier().unwrap();
            for v in 0..graph.num_vertices() {
                assert_eq!(session.holder(v).unwrap(), placement.home_node(v));
                assert_eq!(session.get(v, u64::MAX).unwrap().ids, graph.neighbors(v));
            }
        },
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    /// The `shard` baseline's moves: shards copied whole to random nodes,
    /// one after another. Every node then reads every list as the graph has
    /// it; a node reads the keys of the shards it holds without a remote
    /// operation; every node's value region holds exactly its shards'
    /// values (none leaked, none freed twice); and Puts from every node
    /// still land once each.
    #[test]
    fn shards_move_whole_and_every_list_stays(
        graph in arb_graph(Shape::new(60, 300)),
        nodes in 2u32..5,
        moves in proptest::collection::vec((any::<u32>(), any::<u32>()), 1..12),
    ) {
        let config = StoreConfig { shards_move: true, serve_cache: false, ..StoreConfig::default() };
        let placement = quiver_kv::layout::Placement::new(graph.num_vertices(), nodes);
        let wrong = on_stores(&graph, nodes, &config, &Clock::manual(), |node, store| {
            let mut session = store.session();
            for &(shard, to) in &moves {
                let (shard, to) = (shard % placement.shards(), to % nodes);
                let from = store.shard_home(shard);
                if store.rank() == to {
                    session.pull_shard(shard).unwrap();
                }
                node.barrier().unwrap();
                store.set_shard_home(shard, to);
                node.barrier().unwrap();
                if store.rank() == from && from != to {
                    store.drop_shard(shard);
                }
                node.barrier().unwrap();
            }
            let mut wrong = Vec::new();
            let mut held_words = 0;
            for v in 0..graph.num_vertices() {
                let before = node.counters();
                let got = session.get(v, u64::MAX).unwrap().ids;
                if got != graph.neighbors(v) {
                    wrong.push(format!("vertex {v}'s list: {got:?}, not {:?}", graph.neighbors(v)));
                }
                if store.home_node(v) == store.rank() {
                    held_words += quiver_kv::layout::block_words(graph.degree(v), graph.is_weighted());
                    if node.counters().since(&before).total_ops() != 0 {
                        wrong.push(format!("vertex {v} is held here but was read remotely"));
                    }
                }
            }
            if store.used_words() != held_words {
                wrong.push(format!("{} words in use for {held_words} words of values", store.used_words()));
            }
            // Every node has read before any Put.
            node.barrier().unwrap();
            std::thread::scope(|scope| {
                let server = scope.spawn(|| store.serve());
                for v in 0..graph.num_vertices() {
                    session.put(v, Update::AddEdge(1_000 + store.rank())).unwrap();
                }
                // Every node's Puts are done before any server stops.
                node.barrier().unwrap();
                session.stop_server().unwrap();
                server.join().unwrap().unwrap();
            });
            for v in 0..graph.num_vertices() {
                let mut want = graph.neighbors(v).to_vec();
                want.extend((0..nodes).map(|rank| 1_000 + rank));
                let got = sorted(session.get(v, u64::MAX).unwrap().ids);
                if got != sorted(want.clone()) {
                    wrong.push(format!("vertex {v}'s list after the puts: {got:?}, not {want:?}"));
                }
            }
            wrong
        });
        prop_assert!(wrong.iter().all(Vec::is_empty), "{wrong:?}");
    }
}

/// A migration cut off by its source leaving: the migrating node's next
/// migration fails naming the lost node (no hang), and every survivor
/// still serves every key homed on a survivor, whether its value moved
/// between survivors or not.
#[test]
fn a_migration_cut_off_by_a_lost_source_is_named_and_loses_no_survivor_value() {
    use rand::{Rng, SeedableRng};
    let vertices = 3_000;
    let mut rng = rand_pcg::Pcg64::seed_from_u64(11);
    let edges: Vec<(u32, u32, f32)> = (0..vertices * 4)
        .map(|_| {
            (
                rng.random_range(0..vertices),
                rng.random_range(0..vertices),
                1.0,
            )
        })
        .collect();
    let graph = Graph::from_edges(vertices, &edges, false, true).unwrap();
    let nodes = 3;
    let placement = quiver_kv::layout::Placement::new(vertices, nodes);
    let on = |home: u32| -> Vec<u32> {
        (0..vertices)
            .filter(|&v| placement.home_node(v) == home)
            .collect()
    };
    let from_lost = on(2);
    let survivors = std::sync::Barrier::new(2);
    let halfway = std::sync::Barrier::new(2);
    let gone = std::sync::Barrier::new(2);
    let outcomes =
        quiver_verbs::loopback::run(&quiver_verbs::loopback::Config::new(nodes), |node| {
            let store =
                quiver_kv::Store::open(&node, &graph, &StoreConfig::default(), Clock::manual())
                    .unwrap();
            let mut session = store.session();
            node.barrier().unwrap();
            let mut wrong = Vec::new();
            match store.rank() {
                // Leaves once node 1 has migrated half its values away:
                // gone (its node dropped) before node 1 goes on, or node 1
                // could finish before the loss shows.
                2 => {
                    halfway.wait();
                    drop(session);
                    drop(store);
                    drop(node);
                    gone.wait();
                    return wrong;
                }
                // Migrates node 2's values here, one after another: half,
                // then the rest until one fails, which must name node 2.
                1 => {
                    let (first, rest) = from_lost.split_at(from_lost.len() / 2);
                    for &key in first {
                        session.migrate(key).unwrap();
                    }
                    halfway.wait();
                    gone.wait();
                    let started = std::time::Instant::now();
                    let failed = rest.iter().find_map(|&key| session.migrate(key).err());
                    match failed {
                        Some(e) if quiver_run::chain(&e).contains("node 2 ") => {}
                        other => wrong.push(format!("the cut-off migration: {other:?}")),
                    }
                    if started.elapsed() > Duration::from_secs(30) {
                        wrong.push(format!("noticed the loss after {:?}", started.elapsed()));
                    }
                }
                // Takes a third of node 1's values, before or after node 2
                // leaves: migrations between survivors do not need it.
                _ => {
                    for key in on(1).into_iter().step_by(3) {
                        session.migrate(key).unwrap();
                    }
                }
            }
            survivors.wait();
            for v in 0..vertices {
                let home = placement.home_node(v);
                match session.get(v, u64::MAX).map(|e| e.ids) {
                    Ok(list) if list == graph.neighbors(v) => {}
                    // Homed on the lost node: named (or read through a
                    // cached address, rightly, above).
                    Err(e) if home == 2 && quiver_run::chain(&e).contains("node 2 ") => {}
                    other => wrong.push(format!(
                        "vertex {v} (home {home}): {:?}",
                        other.map_err(|e| quiver_run::chain(&e))
                    )),
                }
            }
            survivors.wait();
            wrong
        })
        .unwrap();
    for (rank, wrong) in outcomes.iter().enumerate() {
        assert!(wrong.is_empty(), "node {rank}: {wrong:?}");
    }
}

#[test]
fn weighted_edges_keep_their_weights_through_forwarded_puts_and_migrations() {
    let graph = weighted_karate();
    let key = homed_on(&graph, 3, 0);
    let mut want = Edges::of(&graph, key);
    let weights = want.weights.as_mut().expect("a weighted graph");
    weights[0] = -4.0;
    want.push(5, 2.5);
    want.push(6, 1.0);
    let forwarded = on_stores(
        &graph,
        3,
        &StoreConfig::default(),
        &Clock::manual(),
        |node, store| {
            assert!(store.is_weighted());
            std::thread::scope(|scope| {
                let server = scope.spawn(|| store.serve());
                let mut session = store.session();
                // Sent from node 1: forwarded to the home, node 0.
                if store.rank() == 1 {
                    let add = Update::AddWeightedEdge {
                        target: 5,
                        weight: 2.5,
                    };
                    session.put(key, add).unwrap();
                }
                node.barrier().unwrap();
                if store.rank() == 2 {
                    session.migrate(key).unwrap();
                }
                node.barrier().unwrap();
                // From node 1 again: forwarded to the home, then on to node 2,
                // which holds the value now.
                if store.rank() == 1 {
                    let set = Update::SetWeight {
                        index: 0,
                        weight: -4.0,
                    };
                    session.put(key, set).unwrap();
                    session.put(key, Update::AddEdge(6)).unwrap();
                }
                node.barrier().unwrap();
                assert_eq!(session.holder(key).unwrap(), 2);
                assert_eq!(
                    session.get(key, u64::MAX).unwrap(),
                    want,
                    "on node {}",
                    store.rank()
                );
                // A weighted prefix READ brings exactly the edges asked for.
                let mut first = want.clone();
                first.truncate(1);
                assert_eq!(session.get(key, 1).unwrap(), first);
                node.barrier().unwrap();
                session.stop_server().unwrap();
                server.join().unwrap().unwrap();
                store.counts().forwarded_puts
            })
        },
    );
    assert_eq!(
        forwarded.iter().sum::<u64>(),
        3,
        "each of node 1's Puts went by message"
    );
}

#[test]
fn weights_are_refused_in_an_unweighted_graph_on_a_vertex_without_edges_or_not_finite() {
    let plain = karate(true);
    on_stores(
        &plain,
        1,
        &StoreConfig::default(),
        &Clock::manual(),
        |_, store| {
            assert!(!store.is_weighted());
            let mut session = store.session();
            let add = Update::AddWeightedEdge {
                target: 1,
                weight: 2.0,
            };
            let err = quiver_run::chain(&session.put(0, add).unwrap_err());
            assert!(
                err.contains("vertex 0's edges have no weights: the graph is unweighted"),
                "{err}"
            );
            assert_eq!(
                session.get(0, u64::MAX).unwrap(),
                Edges::of(&plain, 0),
                "nothing changed"
            );
        },
    );
    // Vertex 2 has no edges.
    let lonely = quiver_csr::testing::build(3, vec![(0, 1, 0.5)], true, false);
    on_stores(
        &lonely,
        1,
        &StoreConfig::default(),
        &Clock::manual(),
        |_, store| {
            let mut session = store.session();
            let set = Update::SetWeight {
                index: 0,
                weight: 2.0,
            };
            let err = quiver_run::chain(&session.put(2, set).unwrap_err());
            assert!(
                err.contains("vertex 2 has no edge whose weight to set"),
                "{err}"
            );
            for weight in [f32::NAN, f32::INFINITY] {
                let add = Update::AddWeightedEdge { target: 1, weight };
                let err = quiver_run::chain(&session.put(0, add).unwrap_err());
                assert!(
                    err.contains("is not a weight: a graph's weights are finite"),
                    "{err}"
                );
            }
            let empty = Edges {
                ids: Vec::new(),
                weights: Some(Vec::new()),
            };
            assert_eq!(session.get(2, u64::MAX).unwrap(), empty);
        },
    );
}

#[test]
fn a_home_counts_its_own_reads_as_its_plan_says() {
    let graph = karate(true);
    let key = homed_on(&graph, 1, 0);
    for plan in Plan::ALL {
        let config = StoreConfig {
            plan,
            ..StoreConfig::default()
        };
        on_stores(&graph, 1, &config, &Clock::manual(), |_, store| {
            let mut session = store.session();
            let mut counted = |reads: u32| {
                for _ in 0..reads {
                    session.get(key, u64::MAX).unwrap();
                }
                store
                    .harvest(1, true)
                    .iter()
                    .find(|&&(k, _)| k == key)
                    .map(|&(_, n)| n)
            };
            let always = (plan == Plan::Tracked).then_some(3);
            assert_eq!(counted(3), always, "{plan:?} before any ask");
            store.track(&[key], true);
            let asked = (plan != Plan::Eager).then_some(4);
            assert_eq!(counted(4), asked, "{plan:?} asked to count");
            store.track(&[key], false);
            assert_eq!(counted(2), always.map(|_| 2), "{plan:?} asked to stop");
            // A candidate's count is reported at an interval's end however
            // small (the coordinator scales it up), and only then.
            store.track(&[key], true);
            session.get(key, u64::MAX).unwrap();
            let small = |ends_interval| {
                let hot = store.harvest(100, ends_interval);
                hot.iter().any(|&(k, _)| k == key)
            };
            assert!(!small(false), "{plan:?} mid-interval");
            session.get(key, u64::MAX).unwrap();
            assert_eq!(small(true), plan == Plan::Deferred, "{plan:?} at the end");
        });
    }
}

/// Keys at every depth of their main bucket's group (the first bucket,
/// the second, the third): with no location cache, a Get of a key homed
/// elsewhere costs one READ of the group and one of the value, and a
/// migration the protocol's 5 one-sided operations, alone or pipelined.
/// DrTM's overflow chains cost one READ more a hop.
#[test]
fn a_key_at_any_depth_of_its_group_costs_one_lookup_read_and_five_to_migrate() {
    let n = 1u32 << 16;
    let nodes = 8;
    let edges: Vec<(u32, u32, f32)> = (0..n).map(|v| (v, (v * 7 + 1) % n, 1.0)).collect();
    let graph = Graph::from_edges(n, &edges, false, false).unwrap();
    let config = StoreConfig {
        serve_cache: false,
        ..StoreConfig::default()
    };
    // Keys are loaded in id order: a key's depth is the number of keys
    // before it in its main bucket, over the 8 slots of a bucket.
    let placement = quiver_kv::layout::Placement::new(n, nodes);
    let mut seen = std::collections::HashMap::new();
    let depth: Vec<usize> = (0..n)
        .map(|v| {
            let before = seen.entry(placement.locate(v).1).or_insert(0usize);
            *before += 1;
            (*before - 1) / 8
        })
        .collect();
    let deepest = (0..n).max_by_key(|&v| depth[v as usize]).unwrap();
    assert_eq!(
        depth[deepest as usize], 2,
        "the graph has no key two buckets down"
    );
    // Read from a node that is not the deepest key's home: every key past
    // its first bucket homed elsewhere, and every 64th of the others.
    let reader = (placement.home_node(deepest) + 1) % nodes;
    let keys: Vec<u32> = (0..n)
        .filter(|&v| placement.home_node(v) != reader && (depth[v as usize] > 0 || v % 64 == 0))
        .collect();
    let mut depths: Vec<usize> = keys.iter().map(|&v| depth[v as usize]).collect();
    depths.sort_unstable();
    depths.dedup();
    assert_eq!(depths, [0, 1, 2]);
    let costs = on_stores(&graph, nodes, &config, &Clock::manual(), |_, store| {
        let mut costs = Vec::new();
        if store.rank() == reader {
            let mut session = store.session();
            for &v in &keys {
                let before = session.tally().one_sided;
                assert_eq!(session.get(v, u64::MAX).unwrap(), Edges::of(&graph, v));
                let get = session.tally().one_sided - before;
                costs.push((v, get, 0));
            }
            // Every other key alone, the rest pipelined in eights.
            let (alone, batched): (Vec<u32>, Vec<u32>) = keys.iter().partition(|&&v| v % 2 == 0);
            for (v, _, migrated) in costs.iter_mut().filter(|(v, ..)| alone.contains(v)) {
                *migrated = session.migrate(*v).unwrap();
            }
            for chunk in batched.chunks(8) {
                let ops = session.migrate_batch(chunk).unwrap();
                assert_eq!(ops, 5 * chunk.len() as u64, "{chunk:?}");
            }
            for &v in &keys {
                assert_eq!(session.holder(v).unwrap(), reader, "vertex {v} moved");
            }
        }
        costs
    });
    let costs = &costs[reader as usize];
    assert_eq!(costs.len(), keys.len());
    for &(v, get, migrated) in costs {
        assert_eq!(get, 2, "vertex {v} at depth {}", depth[v as usize]);
        if v % 2 == 0 {
            assert_eq!(migrated, 5, "vertex {v} at depth {}", depth[v as usize]);
        }
    }
}

/// Groups are sized from the keys themselves: 2^16 keys on 8 nodes (where
/// overflow room of a fixed quarter of the main buckets once left one
/// shard's table short at load) load whole, and every key is read right
/// from the node after its home.
#[test]
fn every_key_loads_into_its_group_and_reads_right() {
    let n = 1u32 << 16;
    let nodes = 8;
    let edges: Vec<(u32, u32, f32)> = (0..n).map(|v| (v, (v * 7 + 1) % n, 1.0)).collect();
    let graph = Graph::from_edges(n, &edges, false, false).unwrap();
    let config = StoreConfig {
        serve_cache: false,
        ..StoreConfig::default()
    };
    let placement = quiver_kv::layout::Placement::new(n, nodes);
    let read = on_stores(&graph, nodes, &config, &Clock::manual(), |_, store| {
        let mut session = store.session();
        let mine = (0..n).filter(|&v| (placement.home_node(v) + 1) % nodes == store.rank());
        mine.map(|v| assert_eq!(session.get(v, u64::MAX).unwrap(), Edges::of(&graph, v)))
            .count()
    });
    assert_eq!(read.iter().sum::<usize>(), n as usize);
}

/// Node 0 Gets `key` (homed on node 1) through the address it cached, and
/// stalls between reading the time and reading the block (a `Clock::paused`
/// pause, armed for that one reading). Meanwhile node 1 replaces `key`'s
/// block by a Put, then, with `reuse`, waits out the reclaim lease,
/// reclaims the block and gives it to `other`'s new value. Returns what
/// node 0's Get read, its tally, and whether `other`'s value took the
/// block.
fn a_get_stalled_while_its_block_is_replaced(
    graph: &Graph,
    key: u32,
    other: u32,
    reuse: bool,
) -> (Edges, quiver_kv::Tally, bool) {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{mpsc, Arc, Mutex};

    let config = StoreConfig::default();
    let reclaim_lease = u64::try_from(config.reclaim_lease.as_nanos()).unwrap();
    let armed = Arc::new(AtomicBool::new(false));
    let (go, stall) = mpsc::channel::<()>();
    let (done, resume) = mpsc::channel::<()>();
    let resume = Mutex::new(resume);
    let clock = {
        let armed = Arc::clone(&armed);
        Clock::paused(move |_| {
            if armed.swap(false, Ordering::AcqRel) {
                go.send(()).unwrap();
                resume.lock().unwrap().recv().unwrap();
            }
        })
    };
    let stall = Mutex::new(stall);
    let got = on_stores(graph, 2, &config, &clock, |_, store| {
        let mut session = store.session();
        if store.rank() == 1 {
            stall.lock().unwrap().recv().unwrap();
            let old = session.address(key).unwrap();
            session
                .put(
                    key,
                    Update::SetEdge {
                        index: 0,
                        target: other,
                    },
                )
                .unwrap();
            let mut took = false;
            if reuse {
                store.clock().advance(reclaim_lease + 1);
                store.reclaim();
                session
                    .put(
                        other,
                        Update::SetEdge {
                            index: 0,
                            target: key,
                        },
                    )
                    .unwrap();
                took = session.address(other).unwrap().offset() == old.offset();
            }
            done.send(()).unwrap();
            return (None, took);
        }
        assert_eq!(session.get(key, u64::MAX).unwrap(), Edges::of(graph, key));
        armed.store(true, Ordering::Release);
        let read = session.get(key, u64::MAX).unwrap();
        (Some((read, session.tally().clone())), false)
    });
    let took = got[1].1;
    let (read, tally) = got[0].0.clone().unwrap();
    assert_eq!(
        tally.cache_hits, 1,
        "the stalled Get did not use the cached address: {tally:?}"
    );
    (read, tally, took)
}

/// Reads that meet an invalidated block and reads that meet memory reused
/// under them are told apart, and neither returns a wrong list:
/// - the block only replaced: its size word is 0, one retry;
/// - the block reclaimed and reused by a value of the same size: the read
///   looks valid (its size word and count match), and only the lease
///   check on `Location::until` tells it ended too late to trust: one
///   stale read (without that check the Get returns the other key's list);
/// - reused by a value of another size: the size word tells, one stale read.
#[test]
fn reads_of_invalidated_blocks_and_of_reused_memory_are_told_apart_and_never_trusted() {
    let n = 64u32;
    // Every third vertex has 2 neighbours (3 words), the others 4 (4 words).
    let edges: Vec<(u32, u32, f32)> = (0..n)
        .flat_map(|v| {
            let degree = if v % 3 == 0 { 2 } else { 4 };
            (1..=degree).map(move |d| (v, (v + 7 * d) % n, 1.0))
        })
        .collect();
    let graph = Graph::from_edges(n, &edges, false, false).unwrap();
    let placement = quiver_kv::layout::Placement::new(n, 2);
    let of = &graph;
    let on_one = |degree: u64| {
        (0..n).filter(move |&v| placement.home_node(v) == 1 && of.degree(v) == degree)
    };
    let key = on_one(4).next().unwrap();
    let same = on_one(4).nth(1).unwrap();
    let smaller = on_one(2).next().unwrap();
    let mut want = Edges::of(&graph, key);
    want.ids[0] = same;
    let (read, tally, _) = a_get_stalled_while_its_block_is_replaced(&graph, key, same, false);
    assert_eq!(
        (read, tally.retries, tally.stale_reads),
        (want.clone(), 1, 0),
        "{tally:?}"
    );
    for other in [same, smaller] {
        let mut want = Edges::of(&graph, key);
        want.ids[0] = other;
        let (read, tally, took) =
            a_get_stalled_while_its_block_is_replaced(&graph, key, other, true);
        assert!(
            took,
            "vertex {other}'s new value did not take the reclaimed block"
        );
        assert_eq!(
            read, want,
            "vertex {key} read wrong (vertex {other} took its block)"
        );
        assert_eq!((tally.retries, tally.stale_reads), (0, 1), "{tally:?}");
    }
}

/// A value at the limit of a remote address word (2^22 - 1 words, 8 bytes
/// short of 32 MiB) and one a word past it, homed on node 0 of 2: the
/// first migrates to node 1 and back home; the second is refused with
/// `TooLarge` naming it, stays home, readable from both nodes, and leaves
/// no block allocated on node 1; a Put that would grow the migrated value
/// past the limit is refused where it runs and leaves the list as it was;
/// and once the reclaim lease has run out, node 1 holds no more memory
/// than it loaded.
#[test]
fn values_up_to_32_mib_migrate_and_larger_ones_are_refused_without_loss() {
    let limit = (1u64 << quiver_kv::addr::REMOTE_SIZE_BITS) - 1;
    // An unweighted block is 2 + ceil(count / 2) words.
    let at_limit = 2 * (limit - 2);
    let n = 1024u32;
    let placement = quiver_kv::layout::Placement::new(n, 2);
    let mut on_zero = (0..n).filter(|&v| placement.home_node(v) == 0);
    let (fits, too_big) = (on_zero.next().unwrap(), on_zero.next().unwrap());
    let degree = |v: u32| match v {
        _ if v == fits => at_limit,
        _ if v == too_big => at_limit + 1,
        _ => 0,
    };
    let offsets: Vec<u64> = std::iter::once(0)
        .chain((0..n).scan(0, |end, v| {
            *end += degree(v);
            Some(*end)
        }))
        .collect();
    // Each hub's neighbours in order, every vertex many times.
    let targets: Vec<u32> = (0..n)
        .flat_map(|v| {
            let count = degree(v);
            (0..count).map(move |i| u32::try_from(i * u64::from(n) / count).unwrap())
        })
        .collect();
    let graph = Graph::from_parts(offsets, targets, None, false).unwrap();
    let clock = Clock::manual();
    let config = StoreConfig::default();
    on_stores(&graph, 2, &config, &clock, |node, store| {
        std::thread::scope(|scope| {
            let server = scope.spawn(|| store.serve());
            let mut session = store.session();
            let loaded = store.used_words();
            node.barrier().unwrap();
            if store.rank() == 1 {
                assert!(session.migrate(fits).unwrap() > 0);
                assert_eq!(session.holder(fits).unwrap(), 1);
                assert_eq!(session.address(fits).unwrap().size(), limit);
                assert_eq!(
                    session.get(fits, u64::MAX).unwrap(),
                    Edges::of(&graph, fits)
                );
                match session.migrate(too_big) {
                    Err(Error::TooLarge { vertex, .. }) => assert_eq!(vertex, too_big),
                    other => panic!("a value past the limit migrated: {other:?}"),
                }
                assert_eq!(session.holder(too_big).unwrap(), 0);
                assert_eq!(
                    store.used_words(),
                    loaded + limit,
                    "the refused copy stayed allocated"
                );
                assert_eq!(
                    session.get(too_big, u64::MAX).unwrap(),
                    Edges::of(&graph, too_big)
                );
                let grown = session.put(fits, Update::AddEdge(0)).unwrap_err();
                assert!(grown.to_string().contains("too large"), "{grown}");
                assert_eq!(
                    session.get(fits, u64::MAX).unwrap(),
                    Edges::of(&graph, fits)
                );
            }
            node.barrier().unwrap();
            if store.rank() == 0 {
                assert!(session.migrate(fits).unwrap() > 0);
                assert_eq!(session.holder(fits).unwrap(), 0);
                assert_eq!(
                    session.get(fits, u64::MAX).unwrap(),
                    Edges::of(&graph, fits)
                );
            }
            node.barrier().unwrap();
            outlast_leases(node, store, config.reclaim_lease);
            if store.rank() == 1 {
                assert_eq!(
                    store.used_words(),
                    loaded,
                    "node 1 kept a block after its lease"
                );
            }
            node.barrier().unwrap();
            session.stop_server().unwrap();
            server.join().unwrap().unwrap();
        });
    });
}
