//! quiver-kv against the graph it was loaded from, on the loopback fabric.

mod control;
mod history;
mod model;
mod run;
mod store;

use quiver_csr::testing::karate;
use std::time::Duration;

use quiver_csr::Graph;
use quiver_kv::{Clock, Store, StoreConfig};
use quiver_verbs::{loopback, Node};

/// Runs `body` on every node of a `nodes`-node loopback job that opened a
/// store of `graph`, then waits for every node; returns the results by rank.
pub fn on_stores<T: Send>(
    graph: &Graph,
    nodes: u32,
    config: &StoreConfig,
    clock: &Clock,
    body: impl Fn(&Node, &Store) -> T + Sync,
) -> Vec<T> {
    loopback::run(&loopback::Config::new(nodes), |node| {
        let store = Store::open(&node, graph, config, clock.clone()).expect("opening the store");
        let result = body(&node, &store);
        // No region goes away while a peer may still read it.
        node.barrier().expect("the closing barrier");
        result
    })
    .expect("a loopback job")
}

/// Lets every block replaced so far wait out a reclaim lease of `lease`
/// and be freed on every node: one pass sees every ring entry (an entry's
/// lease runs from when its owner first sees it), node 0 moves the shared
/// clock past the lease, and a second pass frees. Every node must call it.
pub fn outlast_leases(node: &Node, store: &Store, lease: Duration) {
    store.reclaim();
    node.barrier().unwrap();
    if store.rank() == 0 {
        store
            .clock()
            .advance(u64::try_from(lease.as_nanos()).unwrap() + 1);
    }
    node.barrier().unwrap();
    store.reclaim();
}

/// The weighted karate club: every edge `u - v` of weight `u + v / 100`.
pub fn weighted_karate() -> Graph {
    let plain = karate(true);
    let edges = (0..plain.num_vertices())
        .flat_map(|u| plain.neighbors(u).iter().map(move |&v| (u, v)))
        .map(|(u, v)| (u, v, u as f32 + v as f32 / 100.0))
        .collect();
    quiver_csr::testing::build(plain.num_vertices(), edges, true, false)
}
