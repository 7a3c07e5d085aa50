//! The engine's exact walks against the definition of exact mode: each walk
//! stepped on its own, hop after hop, drawing from its `(seed, id, hop)`
//! stream. Partitions sort walks; lanes interleave them and take
//! first-order steps from their lookahead; none of that may change a path.

use proptest::prelude::*;
use quiver_csr::{testing, write_graph, Graph};

use crate::app::{Visit, WalkApp};
use crate::rng::KeyedRng;
use crate::spec::{step, Adjacency, DeadEnd, Kind, Node2Vec, Prev, Starts, Step, WalkSpec};
use crate::{Config, Mode};

/// Every visit as (walk id, hop, vertex), sorted; it says it writes by
/// walk when `.1` (so that first-order walks move in lanes).
struct Recorder(WalkSpec, bool);

impl WalkApp for Recorder {
    type State = Vec<(u64, u32, u32)>;
    type Output = Vec<(u64, u32, u32)>;

    fn spec(&self) -> WalkSpec {
        self.0.clone()
    }
    fn needs_walk_ids(&self) -> bool {
        true
    }
    fn writes_by_walk(&self) -> bool {
        self.1
    }
    fn new_state(&self) -> Self::State {
        Vec::new()
    }
    fn visit(&self, state: &mut Self::State, visit: &Visit) {
        state.push((visit.walk.expect("exact mode"), visit.hop, visit.vertex));
    }
    fn merge(&self, into: &mut Self::State, mut other: Self::State) {
        into.append(&mut other);
    }
    fn finish(&self, mut state: Self::State) -> crate::Result<Self::Output> {
        state.sort_unstable();
        Ok(state)
    }
}

/// A graph's lists, for stepping on it directly.
struct Whole<'g>(&'g Graph);

impl Adjacency for Whole<'_> {
    fn neighbors(&self, v: u32) -> &[u32] {
        self.0.neighbors(v)
    }
    fn cumulative_weights(&self, _v: u32) -> &[f32] {
        unreachable!("the walks here are unweighted")
    }
}

/// The visits of `spec`'s walks on `graph`, one walk at a time.
fn one_by_one(graph: &Graph, spec: &WalkSpec, seed: u64) -> Vec<(u64, u32, u32)> {
    let n = graph.num_vertices();
    let mut visits = Vec::new();
    for id in 0..spec.starts.total(n) {
        let source = spec
            .starts
            .source_vertex(spec.starts.source_of(id, seed, n));
        let (mut at, mut prev) = (source, None);
        visits.push((id, 0, at));
        for hop in 0..spec.length {
            let came_from = prev.map(|p| Prev {
                vertex: p,
                neighbors: graph.neighbors(p),
                known: None,
                distinct: graph.has_distinct_targets(),
            });
            let mut rng = KeyedRng::new(seed, id, u64::from(hop));
            match step(spec, &Whole(graph), n, source, at, came_from, &mut rng) {
                Step::Stop => break,
                Step::Move(next) => (prev, at) = (Some(at), next),
                Step::Teleport(next) => (prev, at) = (None, next),
            }
            visits.push((id, hop + 1, at));
        }
    }
    visits.sort_unstable();
    visits
}

/// Graphs the property tests walk on: small, directed, with dead ends.
fn graphs() -> impl Strategy<Value = Graph> {
    testing::arb_graph(testing::Shape::new(60, 400).directed_with_dead_ends())
}

/// Unbiased first-order walks, `walks_per_vertex` from every vertex, of
/// every length, stop and restart probability and dead-end policy.
fn unbiased_walks(walks_per_vertex: impl Strategy<Value = u64>) -> impl Strategy<Value = WalkSpec> {
    (
        walks_per_vertex,
        1u32..10,
        prop_oneof![Just(0.0), 0.05f64..0.3],
        prop_oneof![Just(0.0), 0.05f64..0.3],
        prop_oneof![
            Just(DeadEnd::Stop),
            Just(DeadEnd::Restart),
            Just(DeadEnd::Jump)
        ],
    )
        .prop_map(
            |(walks_per_vertex, length, stop, restart, dead_end)| WalkSpec {
                starts: Starts::EveryVertex { walks_per_vertex },
                length,
                stop_probability: stop,
                restart_probability: restart,
                kind: Kind::Unbiased,
                node2vec: None,
                dead_end,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn exact_walks_are_each_walk_stepped_on_its_own(
        graph in graphs(),
        unbiased in unbiased_walks(1u64..4),
        node2vec in prop::option::of((0.25f64..4.0, 0.25f64..4.0)),
        mode in prop_oneof![Just(Mode::Memory), Just(Mode::GraphWalker), Just(Mode::Iteration)],
        block_size in 64u64..256,
        by_walk in any::<bool>(),
        threads in 1usize..3,
        seed in any::<u64>(),
    ) {
        let spec = WalkSpec {
            node2vec: node2vec.map(|(p, q)| Node2Vec { p, q }),
            ..unbiased
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.qcsr");
        write_graph(&graph, &path).unwrap();
        // Out of core on blocks of a few lists each: 64 edges (256 bytes
        // of targets) never fit one.
        let config = Config {
            mode,
            exact: true,
            seed,
            threads,
            block_size: (mode != Mode::Memory).then_some(block_size),
            mem_budget: 4 << 20,
            work_dir: dir.path().to_owned(),
            ..Config::default()
        };
        let report = crate::run(&path, &config, &Recorder(spec.clone(), by_walk)).unwrap();
        prop_assert!(mode == Mode::Memory || report.blocks > 1 || graph.num_edges() < 64);
        prop_assert_eq!(report.result, one_by_one(&graph, &spec, seed));
    }
}

/// Every visit as (hop, vertex), sorted: all a compact walk shows.
struct Positions(WalkSpec);

impl WalkApp for Positions {
    type State = Vec<(u32, u32)>;
    type Output = Vec<(u32, u32)>;

    fn spec(&self) -> WalkSpec {
        self.0.clone()
    }
    fn new_state(&self) -> Self::State {
        Vec::new()
    }
    fn visit(&self, state: &mut Self::State, visit: &Visit) {
        assert!(visit.walk.is_none(), "compact mode");
        state.push((visit.hop, visit.vertex));
    }
    fn merge(&self, into: &mut Self::State, mut other: Self::State) {
        into.append(&mut other);
    }
    fn finish(&self, mut state: Self::State) -> crate::Result<Self::Output> {
        state.sort_unstable();
        Ok(state)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Compact walks draw from one stream per partition in walk order, so
    /// stepping a partition in the pipeline (its draws made ahead) or
    /// directly gives the same walks; exact walks, each with its own
    /// streams, cannot show a change of draw order.
    #[test]
    fn compact_walks_are_the_same_stepped_in_the_pipeline(
        graph in graphs(),
        spec in unbiased_walks(Just(40)),
        mode in prop_oneof![Just(Mode::Memory), Just(Mode::GraphWalker)],
        seed in any::<u64>(),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.qcsr");
        write_graph(&graph, &path).unwrap();
        // Partitions of 256 bytes warm with 4 walks: most here do.
        let config = Config {
            mode,
            seed,
            threads: 2,
            block_size: (mode != Mode::Memory).then_some(1024),
            partition_bytes: 256,
            mem_budget: 4 << 20,
            work_dir: dir.path().to_owned(),
            ..Config::default()
        };
        let app = Positions(spec);
        let direct = crate::run(&path, &config, &app).unwrap().result;
        super::memory::PIPELINE_ALWAYS.store(true, std::sync::atomic::Ordering::Relaxed);
        let piped = crate::run(&path, &config, &app);
        super::memory::PIPELINE_ALWAYS.store(false, std::sync::atomic::Ordering::Relaxed);
        prop_assert_eq!(piped.unwrap().result, direct);
    }
}
