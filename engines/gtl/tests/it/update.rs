//! The update paths against a model: random graphs take random sequences
//! of all six commands, by the direct and the delta path, with full and
//! partial merges, on a device small enough that GC moves graph and delta
//! pages; after every step each list (with its weights) read from the
//! device, and through the host library's cache, equals the model's.

use proptest::prelude::*;
use quiver_csr::testing::{arb_graph, build, karate, Shape};
use quiver_csr::Graph;
use quiver_gtl::gtl::GtlCounters;
use quiver_gtl::{
    Answer, Config, Error, GraphSource, GraphSsd, GtlSource, LoggerConfig, Request, Ssd, Update,
    UpdateLogger, UpdatePath,
};
use quiver_run::NoProgress;

use crate::small_config;

/// The reference: each vertex's out-list of (target, weight), in order,
/// and on a directed graph its in-list of (source, weight).
#[derive(Clone, Debug)]
pub(crate) struct Model {
    pub lists: Vec<Vec<(u32, f32)>>,
    pub ins: Option<Vec<Vec<(u32, f32)>>>,
    weighted: bool,
}

/// Removes the first edge to `target` from `list`; whether there was one.
fn remove_first(list: &mut Vec<(u32, f32)>, target: u32) -> bool {
    match list.iter().position(|&(t, _)| t == target) {
        Some(i) => {
            list.remove(i);
            true
        }
        None => false,
    }
}

/// Sets the weight of the first edge to `target` in `list`; whether there was one.
fn reweight(list: &mut [(u32, f32)], target: u32, weight: f32) -> bool {
    list.iter_mut()
        .find(|(t, _)| *t == target)
        .map(|e| e.1 = weight)
        .is_some()
}

impl Model {
    /// The targets of `v`'s out-list, in order.
    pub fn targets(&self, v: u32) -> Vec<u32> {
        self.lists[v as usize].iter().map(|e| e.0).collect()
    }

    pub fn of(graph: &Graph) -> Model {
        let lists: Vec<Vec<(u32, f32)>> = (0..graph.num_vertices())
            .map(|v| {
                let weights = graph.edge_weights(v);
                graph
                    .neighbors(v)
                    .iter()
                    .enumerate()
                    .map(|(i, &t)| (t, weights.map_or(0.0, |w| w[i])))
                    .collect()
            })
            .collect();
        let ins = (!graph.is_undirected()).then(|| {
            let mut ins = vec![Vec::new(); lists.len()];
            for (v, list) in (0u32..).zip(&lists) {
                for &(t, w) in list {
                    ins[t as usize].push((v, w));
                }
            }
            ins
        });
        Model {
            lists,
            ins,
            weighted: graph.is_weighted(),
        }
    }

    pub fn n(&self) -> u32 {
        u32::try_from(self.lists.len()).unwrap()
    }

    /// The list mirroring edge `u -> v` at `v`: `v`'s in-list on a directed
    /// graph, `v`'s list on an undirected one (none for a self-loop).
    fn mirror(&mut self, u: u32, v: u32) -> Option<&mut Vec<(u32, f32)>> {
        match &mut self.ins {
            Some(ins) => Some(&mut ins[v as usize]),
            None if u != v => Some(&mut self.lists[v as usize]),
            None => None,
        }
    }

    /// Replaces `v`'s out-edges by `edges`, keeping their mirrors in step.
    fn relist(&mut self, v: u32, edges: Vec<(u32, f32)>) {
        let old = std::mem::replace(&mut self.lists[v as usize], edges.clone());
        for (t, _) in old {
            if let Some(mirror) = self.mirror(v, t) {
                assert!(remove_first(mirror, v), "the model mirrors every edge");
            }
        }
        for (t, w) in edges {
            if let Some(mirror) = self.mirror(v, t) {
                mirror.push((v, w));
            }
        }
    }

    /// Applies `update`; whether it applied (the device must agree).
    pub fn apply(&mut self, update: &Update) -> bool {
        let n = self.n();
        match *update {
            Update::AddEdge {
                source,
                target,
                weight,
            } => {
                self.lists[source as usize].push((target, weight));
                if let Some(mirror) = self.mirror(source, target) {
                    mirror.push((source, weight));
                }
                true
            }
            Update::DeleteEdge { source, target } => {
                if source >= n || !remove_first(&mut self.lists[source as usize], target) {
                    return false;
                }
                if let Some(mirror) = self.mirror(source, target) {
                    assert!(remove_first(mirror, source));
                }
                true
            }
            Update::UpdateEdge {
                source,
                target,
                weight,
            } => {
                if source >= n || !reweight(&mut self.lists[source as usize], target, weight) {
                    return false;
                }
                if let Some(mirror) = self.mirror(source, target) {
                    assert!(reweight(mirror, source, weight));
                }
                true
            }
            Update::AddVertex { ref edges } => {
                self.lists.push(Vec::new());
                if let Some(ins) = &mut self.ins {
                    ins.push(Vec::new());
                }
                self.relist(n, edges.clone());
                true
            }
            Update::DeleteVertex { vertex } => {
                if vertex >= n {
                    return false;
                }
                let sources = self.ins.as_ref().map(|ins| ins[vertex as usize].clone());
                self.relist(vertex, Vec::new());
                // A directed graph's vertex also loses its in-edges.
                if let (Some(sources), Some(ins)) = (sources, &mut self.ins) {
                    ins[vertex as usize].clear();
                    for (s, _) in sources {
                        remove_first(&mut self.lists[s as usize], vertex);
                    }
                }
                true
            }
            Update::UpdateVertex { vertex, ref edges } => {
                vertex < n && {
                    self.relist(vertex, edges.clone());
                    true
                }
            }
        }
    }
}

/// A command with raw numbers, resolved against the model when it runs
/// (vertex counts change as it goes).
#[derive(Clone, Debug)]
pub(crate) enum Raw {
    Add(u32, u32, u16),
    /// Deletes an edge the source has (if `existing` and it has one).
    Delete(u32, u32, bool),
    Reweight(u32, u32, u16),
    AddVertex(Vec<(u32, u16)>),
    DeleteVertex(u32),
    UpdateVertex(u32, Vec<(u32, u16)>),
}

#[derive(Clone, Debug)]
pub(crate) enum Step {
    Batch(Vec<Raw>, bool),
    Merge(Option<usize>),
}

fn arb_raw() -> impl Strategy<Value = Raw> {
    let edges = || prop::collection::vec((any::<u32>(), 1u16..1000), 0..6);
    prop_oneof![
        4 => (any::<u32>(), any::<u32>(), 1u16..1000).prop_map(|(s, t, w)| Raw::Add(s, t, w)),
        2 => (any::<u32>(), any::<u32>(), any::<bool>()).prop_map(|(s, t, e)| Raw::Delete(s, t, e)),
        1 => (any::<u32>(), any::<u32>(), 1u16..1000).prop_map(|(s, t, w)| Raw::Reweight(s, t, w)),
        1 => edges().prop_map(Raw::AddVertex),
        1 => any::<u32>().prop_map(Raw::DeleteVertex),
        1 => (any::<u32>(), edges()).prop_map(|(v, e)| Raw::UpdateVertex(v, e)),
    ]
}

pub(crate) fn arb_steps() -> impl Strategy<Value = Vec<Step>> {
    let step = prop_oneof![
        6 => (prop::collection::vec(arb_raw(), 1..6), any::<bool>()).prop_map(|(b, d)| Step::Batch(b, d)),
        1 => prop::option::of(1usize..4).prop_map(Step::Merge),
    ];
    prop::collection::vec(step, 1..24)
}

/// `raw` as a command on the model's graph now.
pub(crate) fn resolve(raw: &Raw, model: &Model) -> Update {
    let n = model.n();
    let weight = |w: u16| f32::from(w) / 8.0;
    let edges = |e: &[(u32, u16)], n: u32| e.iter().map(|&(t, w)| (t % n, weight(w))).collect();
    match *raw {
        Raw::Add(s, t, w) => Update::AddEdge {
            source: s % n,
            target: t % n,
            weight: weight(w),
        },
        Raw::Delete(s, t, existing) => {
            let source = s % n;
            let list = &model.lists[source as usize];
            let target = if existing && !list.is_empty() {
                list[t as usize % list.len()].0
            } else {
                t % (n + 1)
            };
            Update::DeleteEdge { source, target }
        }
        Raw::Reweight(s, t, w) => {
            let source = s % (n + 1);
            let target = match model.lists.get(source as usize) {
                Some(list) if !list.is_empty() => list[t as usize % list.len()].0,
                _ => t % n,
            };
            Update::UpdateEdge {
                source,
                target,
                weight: weight(w),
            }
        }
        Raw::AddVertex(ref e) => Update::AddVertex {
            edges: edges(e, n + 1),
        },
        Raw::DeleteVertex(v) => Update::DeleteVertex {
            vertex: v % (n + 1),
        },
        Raw::UpdateVertex(v, ref e) => Update::UpdateVertex {
            vertex: v % n,
            edges: edges(e, n),
        },
    }
}

/// Every list read from the device, with its weights, and through the
/// host's cache, equals the model's; the GTL's structure holds.
fn assert_matches(host: &mut GtlSource, model: &Model, context: &str) {
    let ssd = host.ssd_mut();
    ssd.gtl().unwrap().check_structure(ssd.flash());
    assert_eq!(ssd.gtl().unwrap().vertices(), model.n(), "{context}: |V|");
    for v in 0..model.n() {
        let read = ssd.read_list(v).unwrap().value;
        let want = model.targets(v);
        assert_eq!(read.targets, want, "{context}: list of {v}");
        if model.weighted {
            let list = &model.lists[v as usize];
            let weights: Vec<f32> = list.iter().map(|e| e.1).collect();
            assert_eq!(read.weights, weights, "{context}: weights of {v}");
            // GetEdgeWeight, through unmerged deltas as much as on merged
            // pages, each of a list's weight pages: every target's first
            // weight, and none for a vertex v does not point to.
            for (i, &(target, weight)) in list.iter().enumerate() {
                if list[..i].iter().any(|e| e.0 == target) {
                    continue;
                }
                let got = ssd.get_edge_weight(v, target).unwrap().value;
                assert_eq!(got, Some(weight), "{context}: weight of {v} -> {target}");
            }
            if let Some(absent) = (0..model.n()).find(|&u| list.iter().all(|e| e.0 != u)) {
                let got = ssd.get_edge_weight(v, absent).unwrap().value;
                assert_eq!(got, None, "{context}: weight of the absent {v} -> {absent}");
            }
        }
        if let Some(ins) = &model.ins {
            let read = ssd.read_in_list(v).unwrap().value;
            let sources: Vec<u32> = ins[v as usize].iter().map(|e| e.0).collect();
            assert_eq!(read.targets, sources, "{context}: in-list of {v}");
            if model.weighted {
                let weights: Vec<f32> = ins[v as usize].iter().map(|e| e.1).collect();
                assert_eq!(read.weights, weights, "{context}: in-weights of {v}");
            }
        }
    }
    let all: Vec<u32> = (0..model.n()).collect();
    let lists = host.get_many(&all).unwrap();
    for (v, list) in all.iter().zip(lists) {
        let want = model.targets(*v);
        assert_eq!(list, want, "{context}: host's list of {v}");
    }
}

/// Runs `steps` on `graph` on a device of `config` whose host caches
/// `cache_pages`, checking after each step; returns what the GTL did.
fn run_steps(graph: &Graph, steps: &[Step], config: &Config, cache_pages: u64) -> GtlCounters {
    let mut ssd = Ssd::new(config).unwrap();
    ssd.graph_initialize(graph, &NoProgress).unwrap();
    let page_bytes = u64::from(config.geometry.page_bytes);
    let mut host = GtlSource::new(ssd, cache_pages * page_bytes).unwrap();
    let mut model = Model::of(graph);
    for (i, step) in steps.iter().enumerate() {
        match step {
            Step::Batch(raws, delta) => {
                let path = if *delta {
                    UpdatePath::Delta
                } else {
                    UpdatePath::Direct
                };
                let mut updates = Vec::new();
                let mut expected = Vec::new();
                let mut shadow = model.clone();
                for raw in raws {
                    let update = resolve(raw, &shadow);
                    if matches!(update, Update::UpdateEdge { .. }) && !shadow.weighted {
                        continue;
                    }
                    expected.push(shadow.apply(&update));
                    updates.push(update);
                }
                let applied = host.ssd_mut().update(&updates, path).unwrap();
                assert_eq!(applied, expected, "step {i}: {updates:?}");
                model = shadow;
            }
            Step::Merge(limit) => {
                let merged = host.ssd_mut().merge(*limit).unwrap();
                if limit.is_none() {
                    assert_eq!(merged.remaining, 0);
                    let gtl = host.ssd().gtl().unwrap();
                    assert_eq!(gtl.chained(), 0, "a full merge leaves no chain");
                    assert!(gtl.gtt().leaves().all(|(_, e)| !e.dirty()));
                }
            }
        }
        assert_matches(&mut host, &model, &format!("after step {i} {step:?}"));
    }
    host.ssd_mut().merge(None).unwrap();
    assert_matches(&mut host, &model, "after the last merge");
    *host.ssd().gtl().unwrap().counters()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn updates_by_either_path_read_back_as_the_model(
        graph in arb_graph(Shape::new(24, 60)),
        steps in arb_steps(),
    ) {
        run_steps(&graph, &steps, &small_config(), 4);
    }
}

#[test]
fn gc_moves_graph_and_delta_pages_and_the_host_drops_erased_pages() {
    gc_under_a_long_stream(&karate(true));
}

#[test]
fn gc_moves_a_directed_graphs_in_list_pages_too() {
    gc_under_a_long_stream(&karate(false));
}

/// A long stream of single edits by both paths, with partial merges: on a
/// small device ([`gc_config`]) GC must run and move pages still in use.
pub(crate) fn long_stream() -> Vec<Step> {
    (0..480)
        .map(|i| {
            let raw = if i % 3 == 2 {
                Raw::Delete(i * 7, i, true)
            } else {
                Raw::Add(i * 5, i * 11 + 3, 8)
            };
            if i % 40 == 39 {
                Step::Merge(Some(2))
            } else {
                Step::Batch(vec![raw], i % 2 == 0)
            }
        })
        .collect()
}

/// Six graph blocks per die, 192 pages, 72 of them GC's reserve (twelve
/// for a directed graph, whose in-lists double its pages and records).
pub(crate) fn gc_config(undirected: bool) -> Config {
    Config {
        ftl_blocks_per_die: if undirected { 26 } else { 20 },
        ..small_config()
    }
}

/// Karate's edges under [`long_stream`] on [`gc_config`]'s device: delta
/// pages hold two records, so GC must run and move pages still in use.
fn gc_under_a_long_stream(graph: &Graph) {
    // The host caches every page, so a page it kept from an erased block
    // would be read again if GC did not say.
    let config = gc_config(graph.is_undirected());
    let did = run_steps(graph, &long_stream(), &config, 1024);
    assert!(did.gc_runs > 0 && did.relocated > 0, "GC ran: {did:?}");
    assert!(
        did.splits > 0 && did.delta_pages > 0,
        "pages split, deltas logged: {did:?}"
    );
}

#[test]
fn presence_and_range_errors() {
    let graph = karate(false);
    let mut ssd = Ssd::new(&small_config()).unwrap();
    ssd.graph_initialize(&graph, &NoProgress).unwrap();
    let absent = Update::DeleteEdge {
        source: 0,
        target: 0,
    };
    assert_eq!(
        ssd.update(std::slice::from_ref(&absent), UpdatePath::Delta)
            .unwrap(),
        [false]
    );
    assert_eq!(ssd.update(&[absent], UpdatePath::Direct).unwrap(), [false]);
    assert_eq!(
        ssd.update(&[Update::DeleteVertex { vertex: 34 }], UpdatePath::Delta)
            .unwrap(),
        [false]
    );
    assert_eq!(
        ssd.gtl().unwrap().counters().delta_records,
        0,
        "nothing was logged"
    );
    let out = Update::AddEdge {
        source: 0,
        target: 34,
        weight: 1.0,
    };
    assert!(matches!(
        ssd.update(&[out], UpdatePath::Delta),
        Err(Error::VertexOutOfRange {
            vertex: 34,
            vertices: 34
        })
    ));
    let reweight = Update::UpdateEdge {
        source: 0,
        target: 1,
        weight: 2.0,
    };
    assert!(matches!(
        ssd.update(&[reweight], UpdatePath::Direct),
        Err(Error::Unweighted)
    ));
    // An edge added and deleted in one batch: the delete sees the add.
    let batch = [
        Update::AddEdge {
            source: 0,
            target: 5,
            weight: 1.0,
        },
        Update::DeleteEdge {
            source: 0,
            target: 5,
        },
        Update::DeleteEdge {
            source: 0,
            target: 5,
        },
    ];
    let had = graph.neighbors(0).iter().filter(|&&t| t == 5).count();
    let want = [true, true, had > 0];
    assert_eq!(ssd.update(&batch, UpdatePath::Delta).unwrap(), want);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn the_logger_answers_and_reads_as_the_model(
        graph in arb_graph(Shape::new(24, 60)),
        raws in prop::collection::vec(arb_raw(), 1..40),
        direct in any::<bool>(),
    ) {
        let mut ssd = Ssd::new(&small_config()).unwrap();
        ssd.graph_initialize(&graph, &NoProgress).unwrap();
        let path = if direct { UpdatePath::Direct } else { UpdatePath::Delta };
        // 64-byte pages hold two records: the log flushes every few updates.
        let mut logger = UpdateLogger::new(LoggerConfig {
            path,
            flush_bytes: 64,
            timer: None,
            ..LoggerConfig::default()
        })
        .unwrap();
        let mut model = Model::of(&graph);
        for raw in &raws {
            let update = resolve(raw, &model);
            if matches!(update, Update::UpdateEdge { .. }) && !model.weighted {
                continue;
            }
            let want = model.apply(&update);
            prop_assert_eq!(logger.log(&mut ssd, &update).unwrap(), want, "{}", update);
            for v in 0..model.n() {
                let got = logger.get(&mut ssd, v).unwrap();
                let targets = model.targets(v);
                prop_assert_eq!(got.targets, targets, "list of {} after {}", v, update);
            }
        }
        logger.flush(&mut ssd).unwrap();
        prop_assert_eq!(logger.records(), 0);
        for v in 0..model.n() {
            let targets = model.targets(v);
            prop_assert_eq!(ssd.read_list(v).unwrap().value.targets, targets);
        }
    }
}

#[test]
fn the_logger_flushes_at_a_page_or_the_timer_and_finds_edges_only_it_holds() {
    let graph = karate(true);
    let mut ssd = Ssd::new(&crate::small_config()).unwrap();
    ssd.graph_initialize(&graph, &NoProgress).unwrap();
    let add = Update::AddEdge {
        source: 0,
        target: 9,
        weight: 1.0,
    };
    let delete = Update::DeleteEdge {
        source: 0,
        target: 9,
    };
    // A 16 KiB log holds all of this: nothing reaches the device.
    let mut logger = UpdateLogger::new(LoggerConfig {
        timer: None,
        ..LoggerConfig::default()
    })
    .unwrap();
    let programs = ssd.flash().counters().programs;
    assert!(logger.log(&mut ssd, &add).unwrap());
    assert!(logger.get(&mut ssd, 9).unwrap().targets.contains(&0));
    assert!(
        !ssd.read_list(9).unwrap().value.targets.contains(&0),
        "the device has not seen it"
    );
    assert!(
        logger.log(&mut ssd, &delete).unwrap(),
        "found in the log alone"
    );
    assert!(!logger.log(&mut ssd, &delete).unwrap(), "gone from the log");
    assert_eq!(ssd.flash().counters().programs, programs);
    assert_eq!(logger.flushes(), 0);
    // A zero timer flushes the log at the next update.
    let mut timed = UpdateLogger::new(LoggerConfig {
        timer: Some(std::time::Duration::ZERO),
        ..LoggerConfig::default()
    })
    .unwrap();
    timed.log(&mut ssd, &add).unwrap();
    timed.log(&mut ssd, &add).unwrap();
    assert_eq!(timed.flushes(), 1);
    timed.flush(&mut ssd).unwrap();
    assert_eq!(timed.flushes(), 2);
    let zeros = ssd.read_list(9).unwrap().value.targets;
    assert_eq!(zeros.iter().filter(|&&t| t == 0).count(), 2);
}

#[test]
fn a_full_area_refuses_a_write_and_keeps_every_list() {
    // Six graph blocks a die: a long delta stream with no merge fills them.
    let config = Config {
        ftl_blocks_per_die: 26,
        ..small_config()
    };
    let graph = karate(true);
    let mut ssd = Ssd::new(&config).unwrap();
    ssd.graph_initialize(&graph, &NoProgress).unwrap();
    let mut model = Model::of(&graph);
    let mut refused = None;
    for i in 0u32..2000 {
        let update = Update::AddEdge {
            source: i % 34,
            target: (i * 7) % 34,
            weight: 1.0,
        };
        match ssd.update(std::slice::from_ref(&update), UpdatePath::Delta) {
            Ok(_) => {
                model.apply(&update);
            }
            Err(e @ Error::AreaFull { .. }) => {
                refused = Some(e.to_string());
                break;
            }
            Err(e) => panic!("{e}"),
        }
    }
    let message = refused.expect("the area fills");
    assert!(message.contains("merge the delta graph"), "{message}");
    ssd.gtl().unwrap().check_structure(ssd.flash());
    for v in 0..34 {
        let want = model.targets(v);
        assert_eq!(ssd.read_list(v).unwrap().value.targets, want, "list of {v}");
    }
}

/// Karate on a fresh device, and a logger with `timer` holding the edge
/// 0 -> 9, not yet flushed.
fn karate_with_a_logged_edge(timer: Option<std::time::Duration>) -> (Ssd, UpdateLogger) {
    let mut ssd = Ssd::new(&small_config()).unwrap();
    ssd.graph_initialize(&karate(true), &NoProgress).unwrap();
    let mut logger = UpdateLogger::new(LoggerConfig {
        timer,
        ..LoggerConfig::default()
    })
    .unwrap();
    let add = Update::AddEdge {
        source: 0,
        target: 9,
        weight: 1.0,
    };
    assert!(logger.log(&mut ssd, &add).unwrap());
    (ssd, logger)
}

#[test]
fn a_refused_add_vertex_leaves_the_log_as_it_was() {
    let (mut ssd, mut logger) = karate_with_a_logged_edge(None);
    let bad = Update::AddVertex {
        edges: vec![(999, 1.0)],
    };
    assert!(matches!(
        logger.log(&mut ssd, &bad),
        Err(Error::VertexOutOfRange { vertex: 999, .. })
    ));
    assert!(matches!(
        logger.get(&mut ssd, 34),
        Err(Error::VertexOutOfRange { .. })
    ));
    assert!(logger
        .log(&mut ssd, &Update::AddVertex { edges: vec![] })
        .unwrap());
    logger.flush(&mut ssd).unwrap();
    assert_eq!(ssd.gtl().unwrap().vertices(), 35);
    assert!(ssd.read_list(0).unwrap().value.targets.contains(&9));
    assert!(matches!(
        UpdateLogger::new(LoggerConfig {
            flush_bytes: 20,
            ..LoggerConfig::default()
        }),
        Err(Error::InvalidArgument(_))
    ));
    let mut empty = Ssd::new(&small_config()).unwrap();
    let none = quiver_csr::Graph::from_edges(0, &[], false, false).unwrap();
    assert!(matches!(
        empty.graph_initialize(&none, &NoProgress),
        Err(Error::InvalidArgument(_))
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn the_host_handle_reads_through_cache_chains_and_log_as_the_model(
        graph in arb_graph(Shape::new(24, 60)),
        steps in arb_steps(),
        direct in any::<bool>(),
    ) {
        let mut ssd = Ssd::new(&small_config()).unwrap();
        ssd.graph_initialize(&graph, &NoProgress).unwrap();
        let logger = LoggerConfig {
            path: if direct { UpdatePath::Direct } else { UpdatePath::Delta },
            flush_bytes: 64,
            timer: None,
            ..LoggerConfig::default()
        };
        let mut host = GraphSsd::new(ssd, 4 * 64, logger).unwrap();
        let mut model = Model::of(&graph);
        for step in &steps {
            match step {
                Step::Batch(raws, _) => {
                    for raw in raws {
                        let update = resolve(raw, &model);
                        if matches!(update, Update::UpdateEdge { .. }) && !model.weighted {
                            continue;
                        }
                        let want = model.apply(&update);
                        prop_assert_eq!(host.update(&update).unwrap(), want, "{}", update);
                    }
                }
                Step::Merge(limit) => {
                    host.flush().unwrap();
                    host.merge(*limit).unwrap();
                }
            }
            let all: Vec<u32> = (0..model.n()).collect();
            for (v, list) in all.iter().zip(host.get_many(&all).unwrap()) {
                let want = model.targets(*v);
                prop_assert_eq!(list, want, "list of {} after {:?}", v, step);
            }
            prop_assert!(host.get(model.n()).is_err(), "no vertex beyond |V|");
            // GetEdgeWeight through the device and the log: every
            // target's first weight, none for a vertex not pointed to.
            for v in 0..model.n() {
                let list = &model.lists[v as usize];
                if !model.weighted {
                    prop_assert!(matches!(host.edge_weight(v, 0), Err(Error::Unweighted)));
                    continue;
                }
                for (i, &(target, weight)) in list.iter().enumerate() {
                    if list[..i].iter().all(|e| e.0 != target) {
                        let got = host.edge_weight(v, target).unwrap();
                        prop_assert_eq!(got, Some(weight), "weight of {} -> {} after {:?}", v, target, step);
                    }
                }
                if let Some(absent) = (0..model.n()).find(|&u| list.iter().all(|e| e.0 != u)) {
                    prop_assert_eq!(host.edge_weight(v, absent).unwrap(), None);
                }
            }
            // The same through the queues: all lists, an AddEdge, all lists
            // again. Every tag once, in completion order, none before the
            // queue was sent, a list the log alone holds at once; the reads
            // before the update see the graph without it, those after (which
            // start when it is done) with.
            let device_n = host.ssd().gtl().unwrap().vertices();
            let start = host.ssd().now();
            let before: Vec<Vec<u32>> = (0..model.n()).map(|v| model.targets(v)).collect();
            let add = Update::AddEdge { source: 0, target: model.n() - 1, weight: 1.0 };
            let mut tags: Vec<u64> = all.iter().rev().map(|&v| host.submit(Request::Get(v))).collect();
            let add_tag = host.submit(Request::Update(add.clone()));
            tags.extend(all.iter().map(|&v| host.submit(Request::Get(v))));
            prop_assert!(model.apply(&add));
            let completions = host.complete();
            prop_assert!(completions.windows(2).all(|w| w[0].done <= w[1].done));
            let mut seen: Vec<u64> = completions.iter().map(|c| c.tag).collect();
            seen.sort_unstable();
            tags.push(add_tag);
            tags.sort_unstable();
            prop_assert_eq!(seen, tags);
            let update = completions.iter().find(|c| c.tag == add_tag).unwrap();
            prop_assert_eq!(update.answer.as_ref().unwrap(), &Answer::Applied(true));
            for c in completions.iter().filter(|c| c.tag != add_tag) {
                prop_assert!(c.done >= start);
                let Request::Get(v) = c.request else { panic!("a read") };
                let after = c.tag > add_tag;
                if after {
                    prop_assert!(c.done >= update.done, "{} read before the update", v);
                } else if v >= device_n {
                    // (The update may flush the log, so only reads before it know.)
                    prop_assert_eq!(c.done, start, "vertex {} is in the log alone", v);
                }
                let want = if after { model.targets(v) } else { before[v as usize].clone() };
                prop_assert_eq!(c.answer.as_ref().unwrap(), &Answer::List(want), "queued list of {}", v);
            }
        }
        let mut ssd = host.into_ssd().unwrap();
        ssd.gtl().unwrap().check_structure(ssd.flash());
        for v in 0..model.n() {
            let want = model.targets(v);
            prop_assert_eq!(ssd.read_list(v).unwrap().value.targets, want);
        }
    }
}

#[test]
fn the_completion_queue_returns_a_cached_list_before_one_from_flash() {
    let graph = karate(true);
    let mut ssd = Ssd::new(&small_config()).unwrap();
    ssd.graph_initialize(&graph, &NoProgress).unwrap();
    let mut host = GraphSsd::new(ssd, 64 * 64, LoggerConfig::default()).unwrap();
    host.get(0).unwrap();
    let start = host.ssd().now();
    let far = host.submit(Request::Get(33));
    let cached = host.submit(Request::Get(0));
    let completions = host.complete();
    let order: Vec<u64> = completions.iter().map(|c| c.tag).collect();
    assert_eq!(order, [cached, far], "the cached page completes first");
    assert_eq!(completions[0].done, start, "a hit costs no device time");
    assert!(completions[1].done > start);
    assert_eq!(
        completions[1].answer.as_ref().unwrap(),
        &Answer::List(graph.neighbors(33).to_vec())
    );
    assert!(host.complete().is_empty(), "the queue was emptied");
}

#[test]
fn a_failed_request_stops_the_queue_and_leaves_the_rest_queued() {
    let graph = karate(true);
    let mut ssd = Ssd::new(&small_config()).unwrap();
    ssd.graph_initialize(&graph, &NoProgress).unwrap();
    let mut host = GraphSsd::new(ssd, 64 * 64, LoggerConfig::default()).unwrap();
    let first = host.submit(Request::Get(0));
    let bad = host.submit(Request::Get(34));
    let add = Update::AddEdge {
        source: 1,
        target: 33,
        weight: 1.0,
    };
    let (next, update) = (
        host.submit(Request::Get(1)),
        host.submit(Request::Update(add)),
    );
    let absent = host.submit(Request::Update(Update::DeleteVertex { vertex: 40 }));
    let last = host.submit(Request::Get(1));

    let completions = host.complete();
    let tags: Vec<u64> = completions.iter().map(|c| c.tag).collect();
    assert_eq!(tags, [first, bad], "the queue stops at the first failure");
    assert_eq!(
        completions[0].answer.as_ref().unwrap(),
        &Answer::List(graph.neighbors(0).to_vec())
    );
    assert!(matches!(
        completions[1].answer,
        Err(Error::VertexOutOfRange {
            vertex: 34,
            vertices: 34
        })
    ));

    let completions = host.complete();
    let tags: Vec<u64> = completions.iter().map(|c| c.tag).collect();
    assert_eq!(
        tags,
        [next, update, absent, last],
        "the rest ran on the next call"
    );
    let answers: Vec<&Answer> = completions
        .iter()
        .map(|c| c.answer.as_ref().unwrap())
        .collect();
    let with_edge = [graph.neighbors(1), &[33]].concat();
    assert_eq!(
        answers,
        [
            &Answer::List(graph.neighbors(1).to_vec()),
            &Answer::Applied(true),
            // A vertex that is not there is an answer, not a failure.
            &Answer::Applied(false),
            &Answer::List(with_edge),
        ]
    );
    assert!(host.complete().is_empty());
}

#[test]
fn an_idle_log_is_flushed_by_a_read_once_its_timer_ran_out() {
    let graph = karate(true);
    let mut ssd = Ssd::new(&small_config()).unwrap();
    ssd.graph_initialize(&graph, &NoProgress).unwrap();
    let timer = std::time::Duration::from_millis(100);
    let clock = quiver_gtl::ManualClock::default();
    let logger = LoggerConfig {
        timer: Some(timer),
        clock: quiver_gtl::HostClock::Manual(clock.clone()),
        ..LoggerConfig::default()
    };
    let mut host = GraphSsd::new(ssd, 64 * 64, logger).unwrap();
    let programs = |host: &GraphSsd| host.ssd().flash().counters().programs;
    let before = programs(&host);
    let add = Update::AddEdge {
        source: 0,
        target: 9,
        weight: 1.0,
    };
    assert!(host.update(&add).unwrap());
    assert!(host.get(9).unwrap().contains(&0), "the log answers at once");
    assert_eq!(programs(&host), before, "within its timer the log keeps it");
    assert_eq!(host.ssd().gtl().unwrap().chained(), 0);
    clock.advance(timer - std::time::Duration::from_nanos(1));
    assert!(host.get(9).unwrap().contains(&0));
    assert_eq!(programs(&host), before, "a nanosecond short of its timer");
    clock.advance(std::time::Duration::from_nanos(1));
    // No update comes: the next read sends the log.
    host.submit(Request::Get(9));
    let completions = host.complete();
    let Ok(Answer::List(list)) = &completions[0].answer else {
        panic!("a list: {completions:?}")
    };
    assert!(list.contains(&0));
    assert!(programs(&host) > before, "the read flushed the log");
    assert_eq!(
        host.ssd().gtl().unwrap().chained(),
        2,
        "both ends' lists have the edge in a chain on the device"
    );
}

#[test]
fn get_edge_weight_merges_the_log_and_answers_none_for_an_absent_edge() {
    // The paper's Fig. 2 (0-based): directed, weighted.
    let edges = vec![
        (0, 1, 4.0),
        (2, 0, 8.0),
        (2, 1, 4.0),
        (5, 0, 3.0),
        (5, 1, 5.0),
        (5, 2, 3.0),
        (5, 3, 2.0),
        (5, 4, 1.0),
    ];
    let mut ssd = Ssd::new(&small_config()).unwrap();
    ssd.graph_initialize(&build(6, edges, true, false), &NoProgress)
        .unwrap();
    let logger = LoggerConfig {
        timer: None,
        ..LoggerConfig::default()
    };
    let mut host = GraphSsd::new(ssd, 64 * 64, logger).unwrap();
    for update in [
        Update::AddEdge {
            source: 1,
            target: 3,
            weight: 7.5,
        },
        Update::UpdateEdge {
            source: 5,
            target: 3,
            weight: 9.0,
        },
        Update::DeleteEdge {
            source: 2,
            target: 0,
        },
        Update::AddVertex {
            edges: vec![(0, 2.5)],
        },
    ] {
        assert!(host.update(&update).unwrap(), "{update}");
    }
    let programs = host.ssd().flash().counters().programs;
    let weights = [
        ((0, 1), Some(4.0)),
        ((5, 4), Some(1.0)),
        // Only the log holds these: an added edge, a new weight, a new
        // vertex's edge, and a deleted edge.
        ((1, 3), Some(7.5)),
        ((5, 3), Some(9.0)),
        ((6, 0), Some(2.5)),
        ((2, 0), None),
        // Never there.
        ((1, 0), None),
        ((0, 6), None),
    ];
    for flushed in [false, true] {
        for ((source, target), want) in weights {
            let got = host.edge_weight(source, target).unwrap();
            assert_eq!(got, want, "{source} -> {target}, flushed: {flushed}");
        }
        assert!(matches!(
            host.edge_weight(0, 7),
            Err(Error::VertexOutOfRange {
                vertex: 7,
                vertices: 7
            })
        ));
        assert_eq!(
            host.ssd().flash().counters().programs > programs,
            flushed,
            "the log reaches the device only when flushed"
        );
        host.flush().unwrap();
    }
    // Through the queue: a weight is an answer; a vertex that does not
    // exist stops the queue.
    let tags: Vec<u64> = [(1, 3), (3, 1), (9, 0)]
        .into_iter()
        .map(|(source, target)| host.submit(Request::GetEdgeWeight { source, target }))
        .collect();
    let completions = host.complete();
    let order: Vec<u64> = completions.iter().map(|c| c.tag).collect();
    assert_eq!(order, tags);
    let answer = |i: usize| completions[i].answer.as_ref().unwrap();
    assert_eq!(answer(0), &Answer::Weight(Some(7.5)));
    assert_eq!(answer(1), &Answer::Weight(None));
    assert!(matches!(
        completions[2].answer,
        Err(Error::VertexOutOfRange { vertex: 9, .. })
    ));
    // An unweighted graph has no weights, in the log or on the device.
    let mut ssd = Ssd::new(&small_config()).unwrap();
    ssd.graph_initialize(&karate(true), &NoProgress).unwrap();
    let mut host = GraphSsd::new(ssd, 64 * 64, LoggerConfig::default()).unwrap();
    assert!(matches!(host.edge_weight(0, 1), Err(Error::Unweighted)));
    host.update(&Update::AddEdge {
        source: 0,
        target: 9,
        weight: 1.0,
    })
    .unwrap();
    assert!(matches!(host.edge_weight(0, 9), Err(Error::Unweighted)));
}

/// The handle's own life cycle: initialized on a fresh device, updated
/// through its log (nothing flushed yet), saved, and opened again with
/// every logged update in the image.
#[test]
fn a_handle_initializes_saves_its_log_and_opens_again() {
    let graph = karate(true);
    let logger = LoggerConfig {
        timer: None,
        ..LoggerConfig::default()
    };
    let mut host = GraphSsd::initialize(&small_config(), &graph, 64 * 64, logger.clone()).unwrap();
    let add = Update::AddEdge {
        source: 0,
        target: 9,
        weight: 1.0,
    };
    assert!(host.update(&add).unwrap());
    assert_eq!(host.ssd().gtl().unwrap().chained(), 0, "still in the log");
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("dev.img");
    host.save(&image).unwrap();
    let mut again = GraphSsd::open(&image, 64 * 64, logger).unwrap();
    for v in 0..graph.num_vertices() {
        let mut want = graph.neighbors(v).to_vec();
        match v {
            0 => want.push(9),
            9 => want.push(0),
            _ => {}
        }
        let mut got = again.get(v).unwrap();
        got.sort_unstable();
        want.sort_unstable();
        assert_eq!(got, want, "vertex {v}");
    }
    let err = GraphSsd::open(&dir.path().join("missing.img"), 0, LoggerConfig::default());
    assert!(err.is_err());
}

/// A flush the timer starts on the way to a read is refused (power is
/// cut): the read is answered from the device and the log all the same,
/// the log is kept and the refusal counted; the next flush sends it.
#[test]
fn a_read_goes_ahead_when_its_timed_flush_is_refused() {
    let (mut ssd, mut logger) = karate_with_a_logged_edge(Some(std::time::Duration::ZERO));
    ssd.cut_power_after(ssd.flash().counters().programs);
    let list = logger.get(&mut ssd, 9).unwrap();
    assert!(list.targets.contains(&0), "the log's edge is read");
    assert_eq!(logger.refused_flushes(), 1);
    assert!(logger.records() > 0, "the log is kept");
    ssd.power_cycle().unwrap();
    logger.get(&mut ssd, 9).unwrap();
    assert_eq!((logger.records(), logger.refused_flushes()), (0, 1));
    assert!(ssd.read_list(9).unwrap().value.targets.contains(&0));
}

/// A full page's flush refused right after an update was logged: the
/// update is acknowledged and kept; the next update finds the log full,
/// tries to flush it first and is refused, not logged.
#[test]
fn an_update_in_the_log_is_acknowledged_even_if_its_page_is_refused() {
    let config = LoggerConfig {
        timer: None,
        ..LoggerConfig::default()
    };
    let add = |source: u32| Update::AddEdge {
        source,
        target: 33 - source % 30,
        weight: 1.0,
    };
    let start = || {
        let mut ssd = Ssd::new(&small_config()).unwrap();
        ssd.graph_initialize(&karate(true), &NoProgress).unwrap();
        (ssd, UpdateLogger::new(config.clone()).unwrap())
    };
    // How many of these updates it takes to fill a page: a dry run to the
    // first flush.
    let (mut ssd, mut logger) = start();
    let fill = (0..)
        .find(|&i| {
            logger.log(&mut ssd, &add(i % 30)).unwrap();
            logger.flushes() == 1
        })
        .unwrap();
    let (mut ssd, mut logger) = start();
    for i in 0..fill {
        assert!(logger.log(&mut ssd, &add(i % 30)).unwrap());
    }
    assert_eq!(logger.flushes(), 0);
    let source = fill;
    ssd.cut_power_after(ssd.flash().counters().programs);
    let last = add(source % 30);
    assert!(
        logger.log(&mut ssd, &last).unwrap(),
        "in the log: acknowledged"
    );
    assert_eq!(logger.refused_flushes(), 1);
    let full = logger.records();
    // An edge karate and the updates above do not have.
    let never = Update::AddEdge {
        source: 16,
        target: 25,
        weight: 1.0,
    };
    let refused = logger.log(&mut ssd, &never).unwrap_err();
    assert!(matches!(refused, Error::PowerCut { .. }), "{refused}");
    // So is one whose records are known only once its list is read.
    let unknown = Update::DeleteVertex { vertex: 16 };
    let refused = logger.log(&mut ssd, &unknown).unwrap_err();
    assert!(matches!(refused, Error::PowerCut { .. }), "{refused}");
    assert_eq!(logger.records(), full, "the refused updates are not logged");
    ssd.power_cycle().unwrap();
    logger.flush(&mut ssd).unwrap();
    let Update::AddEdge { source, target, .. } = last else {
        unreachable!()
    };
    assert!(ssd
        .read_list(source)
        .unwrap()
        .value
        .targets
        .contains(&target));
    assert!(!ssd.read_list(16).unwrap().value.targets.contains(&25));
}

/// A flush the device refuses keeps the log: with power cut before its
/// first program the flush fails, the update is still logged and still
/// read; with power back, the next flush delivers it.
#[test]
fn a_refused_flush_keeps_the_log() {
    let (mut ssd, mut logger) = karate_with_a_logged_edge(None);
    let logged = logger.records();
    ssd.cut_power_after(ssd.flash().counters().programs);
    let err = logger.flush(&mut ssd).unwrap_err();
    assert!(matches!(err, Error::PowerCut { .. }), "{err}");
    assert_eq!(logger.records(), logged, "the log is kept");
    assert!(logger.get(&mut ssd, 9).unwrap().targets.contains(&0));
    ssd.power_cycle().unwrap();
    logger.flush(&mut ssd).unwrap();
    assert_eq!(logger.records(), 0);
    assert!(ssd.read_list(9).unwrap().value.targets.contains(&0));
}
