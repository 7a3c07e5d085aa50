//! Every kind of operation, one at a time from random nodes, against a
//! sequential model, with the store's invariants checked on every node
//! after every event: every key has one home, the same on every node and
//! the model's; one holder, the model's; every node reads the model's
//! list, whole and as a prefix; and once leases have run out, each node's
//! words in use are exactly the live values it holds (no block leaked,
//! none freed twice).

use std::time::Duration;

use proptest::prelude::*;
use quiver_csr::testing::karate;
use quiver_csr::Graph;
use quiver_kv::layout::{block_words, Edges, Placement};
use quiver_kv::{Clock, Store, StoreConfig, Update};
use quiver_verbs::Node;

use crate::history::{list_of, step, List, Op};
use crate::{on_stores, outlast_leases, weighted_karate};

const NODES: u32 = 3;

/// One event of a run.
#[derive(Clone, Debug)]
enum Event {
    /// Every node reads the first `limit` edges of `key` (with the checks
    /// after the event).
    Get { key: u32, limit: u64 },
    /// `node` puts `update` to `key`.
    Put { node: u32, key: u32, update: Update },
    /// `node` pulls `key`'s value to itself.
    Migrate { node: u32, key: u32 },
    /// `node` pulls the values of `keys` with the stages pipelined.
    MigrateBatch { node: u32, keys: Vec<u32> },
    /// The shard of `key` moves whole to node `to` (the `shard` baseline).
    MoveShard { key: u32, to: u32 },
    /// Every lease runs out and every node reclaims.
    Reclaim,
}

fn event(vertices: u32, weighted: bool, shards: bool) -> impl Strategy<Value = Event> {
    let node = 0..NODES;
    let key = 0..vertices;
    let update = prop_oneof![
        (0..vertices, 0u16..100).prop_map(move |(target, w)| if weighted {
            Update::AddWeightedEdge {
                target,
                weight: f32::from(w) / 4.0,
            }
        } else {
            Update::AddEdge(target)
        }),
        (0u32..64, 0..vertices).prop_map(|(index, target)| Update::SetEdge { index, target }),
        (0u32..64, 0u16..100).prop_map(move |(index, w)| if weighted {
            Update::SetWeight {
                index,
                weight: f32::from(w) / 4.0,
            }
        } else {
            Update::SetEdge { index, target: 0 }
        }),
    ];
    let moves = if shards {
        (key.clone(), node.clone())
            .prop_map(|(key, to)| Event::MoveShard { key, to })
            .boxed()
    } else {
        prop_oneof![
            (node.clone(), key.clone()).prop_map(|(node, key)| Event::Migrate { node, key }),
            (node.clone(), proptest::collection::vec(key.clone(), 1..5))
                .prop_map(|(node, keys)| Event::MigrateBatch { node, keys }),
        ]
        .boxed()
    };
    prop_oneof![
        2 => (key.clone(), prop_oneof![Just(1u64), Just(3), Just(u64::MAX)])
            .prop_map(|(key, limit)| Event::Get { key, limit }),
        3 => (node, key, update).prop_map(|(node, key, update)| Event::Put { node, key, update }),
        3 => moves,
        1 => Just(Event::Reclaim),
    ]
}

/// What the store should hold: each key's list, and each key's holder and
/// each shard's node.
#[derive(Clone, Debug)]
struct Model {
    placement: Placement,
    lists: Vec<List>,
    holders: Vec<u32>,
    shard_homes: Vec<u32>,
}

impl Model {
    fn new(graph: &Graph) -> Model {
        let placement = Placement::new(graph.num_vertices(), NODES);
        Model {
            placement,
            lists: (0..graph.num_vertices())
                .map(|v| list_of(&Edges::of(graph, v)))
                .collect(),
            holders: (0..graph.num_vertices())
                .map(|v| placement.home_node(v))
                .collect(),
            shard_homes: (0..placement.shards())
                .map(|s| placement.first_home(s))
                .collect(),
        }
    }

    fn home(&self, key: u32) -> u32 {
        self.shard_homes[self.placement.locate(key).0 as usize]
    }
}

/// Runs `event` on this node's part in lockstep with the others (every
/// node calls it with the same event), and advances the model. Returns
/// what went wrong here.
fn run(
    node: &Node,
    store: &Store,
    lease: Duration,
    model: &mut Model,
    event: &Event,
) -> Vec<String> {
    let mut wrong = Vec::new();
    let rank = store.rank();
    let mut session = store.session();
    match event {
        Event::Get { .. } => {}
        Event::Put { node, key, update } => {
            let after = step(&Op::Put(*update), &model.lists[*key as usize]);
            let put = (*node == rank).then(|| session.put(*key, *update));
            match (after, put) {
                (Some(_), Some(Err(e))) => wrong.push(format!("{event:?}: {e}")),
                (None, Some(Ok(()))) => wrong.push(format!("{event:?} on no edges succeeded")),
                (Some(after), _) => model.lists[*key as usize] = after,
                (None, _) => {}
            }
        }
        Event::Migrate { node, key } => {
            if *node == rank {
                if let Err(e) = session.migrate(*key) {
                    wrong.push(format!("{event:?}: {e}"));
                }
            }
            model.holders[*key as usize] = *node;
        }
        Event::MigrateBatch { node, keys } => {
            if *node == rank {
                if let Err(e) = session.migrate_batch(keys) {
                    wrong.push(format!("{event:?}: {e}"));
                }
            }
            for &key in keys {
                model.holders[key as usize] = *node;
            }
        }
        Event::MoveShard { key, to } => {
            let shard = model.placement.locate(*key).0;
            let from = model.shard_homes[shard as usize];
            if from != *to {
                node.barrier().unwrap();
                if *to == rank {
                    if let Err(e) = session.pull_shard(shard) {
                        wrong.push(format!("{event:?}: {e}"));
                    }
                }
                node.barrier().unwrap();
                store.set_shard_home(shard, *to);
                node.barrier().unwrap();
                if from == rank {
                    store.drop_shard(shard);
                }
                model.shard_homes[shard as usize] = *to;
                for (v, holder) in (0u32..).zip(model.holders.iter_mut()) {
                    if model.placement.locate(v).0 == shard {
                        *holder = *to;
                    }
                }
            }
        }
        Event::Reclaim => outlast_leases(node, store, lease),
    }
    node.barrier().unwrap();
    // Every node, every key: the model's home, holder and list.
    for key in 0..store.vertices() {
        let list = &model.lists[key as usize];
        if store.home_node(key) != model.home(key) {
            wrong.push(format!(
                "after {event:?}: vertex {key}'s home is node {}, not {}",
                store.home_node(key),
                model.home(key)
            ));
        }
        match session.holder(key) {
            Ok(holder) if holder == model.holders[key as usize] => {}
            other => wrong.push(format!(
                "after {event:?}: vertex {key}'s holder is {other:?}, not {}",
                model.holders[key as usize]
            )),
        }
        let limit = match event {
            Event::Get { key: k, limit, .. } if *k == key => *limit,
            _ => 2,
        };
        for limit in [u64::MAX, limit] {
            let read = session.get(key, limit).map(|e| list_of(&e));
            let cut = usize::try_from(limit).unwrap_or(usize::MAX).min(list.len());
            // An unweighted prefix may bring the other half of its last word.
            let fits = |r: &List| {
                r.len() >= cut
                    && r.len() <= cut + usize::from(!store.is_weighted())
                    && list.starts_with(r)
            };
            match read {
                Ok(r) if fits(&r) => {}
                other => wrong.push(format!("after {event:?}: node {rank} read vertex {key}'s first {limit} as {other:?}, not {list:?}")),
            }
        }
    }
    if matches!(event, Event::Reclaim) {
        let held: u64 = (0..store.vertices())
            .filter(|&v| model.holders[v as usize] == rank)
            .map(|v| block_words(model.lists[v as usize].len() as u64, store.is_weighted()))
            .sum();
        if store.used_words() != held {
            wrong.push(format!(
                "after {event:?}: node {rank} uses {} words, holds {held}",
                store.used_words()
            ));
        }
    }
    node.barrier().unwrap();
    wrong
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn every_event_keeps_one_home_one_holder_and_the_model_s_lists(
        (weighted, shards, events) in (any::<bool>(), any::<bool>()).prop_flat_map(|(weighted, shards)| {
            let vertices = karate(true).num_vertices();
            (Just(weighted), Just(shards), proptest::collection::vec(event(vertices, weighted, shards), 1..30))
        })
    ) {
        let graph = if weighted { weighted_karate() } else { karate(true) };
        // Shards move with nothing cached, as under the `shard` policy.
        let config = StoreConfig { shards_move: shards, serve_cache: !shards, ..StoreConfig::default() };
        let lease = config.reclaim_lease;
        let clock = Clock::manual();
        let wrong = on_stores(&graph, NODES, &config, &clock, |node, store| {
            std::thread::scope(|scope| {
                let server = scope.spawn(|| store.serve());
                node.barrier().unwrap();
                let mut model = Model::new(&graph);
                let mut wrong = Vec::new();
                // Every node runs every event, in step, whatever went wrong.
                for event in &events {
                    wrong.extend(run(node, store, lease, &mut model, event));
                }
                wrong.truncate(20);
                node.barrier().unwrap();
                store.session().stop_server().unwrap();
                server.join().unwrap().unwrap();
                wrong
            })
        });
        prop_assert!(wrong.iter().all(Vec::is_empty), "{wrong:?}");
    }
}
