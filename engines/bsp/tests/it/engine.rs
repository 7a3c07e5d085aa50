//! The engine equals the reference: BFS depths, WCC and CDLP labels
//! exactly; PageRank, SSSP and LCC within 1e-6 relative (`assert_close`:
//! summation order is the schedule's, and PageRank holds `f32`
//! contributions).

use proptest::prelude::*;
use quiver_bsp::{reference, run, Algorithm, Config, Direction, Values};
use quiver_csr::testing::{arb_graph, build, Shape};
use quiver_csr::Graph;
use quiver_run::NoProgress;

use crate::assert_close;

/// Every algorithm, SSSP only on weighted graphs.
pub fn algorithms(graph: &Graph, source: u32) -> Vec<Algorithm> {
    let mut all = vec![
        Algorithm::Bfs { source },
        Algorithm::PageRank {
            damping: 0.85,
            iterations: 5,
        },
        Algorithm::Wcc,
        Algorithm::Cdlp { iterations: 4 },
        Algorithm::Lcc,
    ];
    if graph.is_weighted() {
        all.push(Algorithm::Sssp { source });
    }
    all
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn every_direction_and_thread_count_matches_the_reference(
        graph in arb_graph(Shape::new(60, 300)),
        source in any::<prop::sample::Index>(),
    ) {
        let source = u32::try_from(source.index(graph.num_vertices() as usize)).unwrap();
        for algorithm in algorithms(&graph, source) {
            let expected = reference::run(&graph, &algorithm).unwrap();
            if let Values::Reals(lcc) = &expected {
                if algorithm == Algorithm::Lcc {
                    // Self-loops and parallel edges add no neighbour and no link.
                    prop_assert!(lcc.iter().all(|c| (0.0..=1.0).contains(c)), "LCC out of [0, 1]: {lcc:?}");
                }
            }
            for direction in [Direction::Push, Direction::Pull, Direction::Auto] {
                for threads in [1, 2] {
                    let config = Config { threads, direction, ..Config::default() };
                    let (values, report) = run(&graph, &algorithm, &config, &NoProgress).unwrap();
                    assert_close(&values, &expected, &format!("{algorithm:?} {direction:?} x{threads}"));
                    if direction != Direction::Auto && !matches!(algorithm, Algorithm::Cdlp { .. } | Algorithm::Lcc) {
                        prop_assert!(report.supersteps.iter().all(|s| s.direction == direction));
                    }
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Two halves of light edges joined by a few edges of 2^40:
    /// delta-stepping's buckets (their width from the mean weight, see
    /// `programs.rs`) are far narrower than a heavy edge, so its target
    /// goes beyond the ring of buckets kept ahead of the current one, to
    /// wait until the ring reaches it; the far half is reached through it
    /// alone.
    #[test]
    fn sssp_with_weights_of_every_scale_matches_the_reference(
        half in 1u32..1000,
        drawn in prop::collection::vec((0u32..1000, 0u32..1000, -8i32..=0, any::<bool>()), 1..6000),
        heavy in prop::collection::vec((0u32..1000, 0u32..1000), 1..4),
        source in any::<prop::sample::Index>(),
        undirected in any::<bool>(),
    ) {
        let n = 2 * half;
        let mut edges: Vec<(u32, u32, f32)> = drawn
            .into_iter()
            .map(|(s, t, e, far)| {
                let base = if far { half } else { 0 };
                (base + s % half, base + t % half, 2f32.powi(e))
            })
            .collect();
        edges.extend(heavy.into_iter().map(|(s, t)| (s % half, half + t % half, 2f32.powi(40))));
        let graph = build(n, edges, true, undirected);
        let source = u32::try_from(source.index(n as usize)).unwrap();
        let algorithm = Algorithm::Sssp { source };
        let expected = reference::run(&graph, &algorithm).unwrap();
        for direction in [Direction::Push, Direction::Pull, Direction::Auto] {
            for threads in [1, 2] {
                let config = Config { threads, direction, ..Config::default() };
                let (values, _) = run(&graph, &algorithm, &config, &NoProgress).unwrap();
                assert_close(&values, &expected, &format!("SSSP {direction:?} x{threads}"));
            }
        }
    }
}

/// Auto pulls a dense frontier and pushes a sparse one: PageRank has every
/// vertex active (pull), BFS from a leaf of a star starts sparse; after a
/// pull, it pulls again while the frontier has |V| / 24 vertices.
#[test]
fn auto_switches_by_the_frontiers_size() {
    let n = 200u32;
    let edges: Vec<(u32, u32, f32)> = (1..n).flat_map(|v| [(0, v, 1.0), (v, 0, 1.0)]).collect();
    let star = Graph::from_edges(n, &edges, false, true).unwrap();
    let config = Config::default();
    let pagerank = Algorithm::PageRank {
        damping: 0.85,
        iterations: 1,
    };
    let (_, report) = run(&star, &pagerank, &config, &NoProgress).unwrap();
    assert_eq!(report.supersteps[0].direction, Direction::Pull);
    let (depths, report) = run(&star, &Algorithm::Bfs { source: 5 }, &config, &NoProgress).unwrap();
    let steps: Vec<Direction> = report.supersteps.iter().map(|s| s.direction).collect();
    // From the leaf: push to the hub (1 edge), then the hub's 199 edges
    // are above |E|/20 = 19.9: pull.
    assert_eq!(steps[..2], [Direction::Push, Direction::Pull]);
    let Values::Depths(depths) = depths else {
        panic!("BFS gives depths")
    };
    assert_eq!((depths[5], depths[0], depths[7]), (0, 1, 2));
    assert!(report.teps > 0.0);
    // After a pull, a frontier of many vertices with few edges pulls again.
    // From vertex 0, joined to a clique of 40 (1..=40) with 60 leaves
    // (41..=100) hung on it (|E| = 1,760, |E| / 20 = 88): push (0's 40
    // edges), pull (the clique's 1,660), then the leaves: 60 edges, below
    // 88, but 60 vertices, above |V| / 24 = 4, so pull again.
    let clique = 1..=40u32;
    let mut edges: Vec<(u32, u32, f32)> = clique.clone().map(|c| (0, c, 1.0)).collect();
    edges.extend(
        clique
            .clone()
            .flat_map(|a| (a + 1..=40).map(move |b| (a, b, 1.0))),
    );
    edges.extend((41..=100u32).map(|leaf| (1 + leaf % 40, leaf, 1.0)));
    let lollipop = build(101, edges, false, true);
    assert_eq!(lollipop.num_edges(), 1760);
    let (_, report) = run(
        &lollipop,
        &Algorithm::Bfs { source: 0 },
        &config,
        &NoProgress,
    )
    .unwrap();
    let steps: Vec<(Direction, u64)> = report
        .supersteps
        .iter()
        .map(|s| (s.direction, s.active))
        .collect();
    assert_eq!(
        steps[..3],
        [
            (Direction::Push, 1),
            (Direction::Pull, 40),
            (Direction::Pull, 60)
        ]
    );
    // The process's peak resident memory is at least what the run counted.
    let rss = report.peak_rss_bytes.expect("Linux reports VmHWM");
    assert!(
        rss >= report.summary.peak_mem_bytes,
        "{rss} < {}",
        report.summary.peak_mem_bytes
    );
}

/// A directed graph asked only to push holds no transpose of its edges
/// and gives the values it gives pulling along one (auto), which counts
/// the transpose in its memory: an offset per owned vertex and a source
/// per edge. PageRank, whose supersteps under auto all pull, counts the
/// transpose in place of its out-lists' edges, which it no longer reads.
#[test]
fn a_directed_graph_holds_only_the_layouts_its_direction_reads() {
    let n = 200u32;
    let edges: Vec<(u32, u32, f32)> = (1..n)
        .flat_map(|v| [(0, v, 1.0), (v, (v * 7) % n, 1.0)])
        .collect();
    let graph = Graph::from_edges(n, &edges, false, false).unwrap();
    let pagerank = Algorithm::PageRank {
        damping: 0.85,
        iterations: 3,
    };
    for algorithm in [pagerank, Algorithm::Bfs { source: 0 }] {
        let with = |direction| {
            let config = Config {
                direction,
                ..Config::default()
            };
            run(&graph, &algorithm, &config, &NoProgress).unwrap()
        };
        let (pushed, lean) = with(Direction::Push);
        let (auto, full) = with(Direction::Auto);
        assert_close(&pushed, &auto, &format!("{algorithm:?}"));
        assert!(
            full.supersteps
                .iter()
                .any(|s| s.direction == Direction::Pull),
            "{algorithm:?}"
        );
        let offsets = 8 * (u64::from(n) + 1);
        let transpose = offsets + 4 * graph.num_edges();
        let held = match algorithm {
            Algorithm::PageRank { .. } => {
                assert!(
                    full.supersteps
                        .iter()
                        .all(|s| s.direction == Direction::Pull),
                    "{algorithm:?}"
                );
                offsets
            }
            _ => transpose,
        };
        assert_eq!(
            full.summary.peak_mem_bytes - lean.summary.peak_mem_bytes,
            held,
            "{algorithm:?}"
        );
    }
}

#[test]
fn bad_parameters_are_named() {
    let graph = Graph::from_edges(3, &[(0, 1, 1.0), (1, 2, 1.0)], false, false).unwrap();
    let config = Config::default();
    let cases = [
        (Algorithm::Bfs { source: 3 }, "source"),
        (Algorithm::Sssp { source: 0 }, "algorithm"),
        (
            Algorithm::PageRank {
                damping: 0.85,
                iterations: 0,
            },
            "iterations",
        ),
        (
            Algorithm::PageRank {
                damping: 1.5,
                iterations: 2,
            },
            "damping",
        ),
        (Algorithm::Cdlp { iterations: 0 }, "iterations"),
    ];
    for (algorithm, parameter) in cases {
        let err = run(&graph, &algorithm, &config, &NoProgress).unwrap_err();
        let quiver_bsp::Error::InvalidArgument(invalid) = &err else {
            panic!("{algorithm:?}: expected an invalid argument, got {err}")
        };
        assert_eq!(invalid.parameter, parameter, "{algorithm:?}: {invalid}");
        assert!(reference::run(&graph, &algorithm).is_err());
    }
    let negative = Graph::from_edges(2, &[(0, 1, -1.0)], true, false).unwrap();
    assert!(run(
        &negative,
        &Algorithm::Sssp { source: 0 },
        &config,
        &NoProgress
    )
    .is_err());
}

/// Asks a run to stop after `after` supersteps.
struct CancelAfter {
    after: u64,
    supersteps: std::sync::atomic::AtomicU64,
}

impl quiver_run::Progress for CancelAfter {
    fn advance(&self, delta: u64) {
        self.supersteps
            .fetch_add(delta, std::sync::atomic::Ordering::Relaxed);
    }
    fn cancelled(&self) -> bool {
        self.supersteps.load(std::sync::atomic::Ordering::Relaxed) >= self.after
    }
}

/// WCC's union-find with several workers linking into the same trees at
/// once, directed and undirected, against the reference: 1,000 components
/// (the ids of each residue mod 1,000, joined as a random tree), each
/// spread over every worker's runs of vertices, none large enough to be
/// skipped. A lost link or a cycle would change the components (the test
/// cannot force two workers to hook one root in the same instant).
#[test]
#[allow(clippy::cast_possible_truncation)] // hash bits reduced below n
fn wcc_union_find_on_several_workers_matches_the_reference() {
    let (n, classes) = (100_000u64, 1_000u64);
    // Each class a random tree (no edge to spare, so a lost link splits
    // it): member k hangs on a member before it.
    let edges: Vec<(u32, u32, f32)> = (classes..n)
        .map(|v| {
            let x = v.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 16;
            let earlier = (x % (v / classes)) * classes + v % classes;
            (v as u32, earlier as u32, 1.0)
        })
        .collect();
    for undirected in [false, true] {
        let graph = build(n as u32, edges.clone(), false, undirected);
        let expected = reference::run(&graph, &Algorithm::Wcc).unwrap();
        for threads in [2, 8] {
            let config = Config {
                threads,
                ..Config::default()
            };
            let (labels, _) = run(&graph, &Algorithm::Wcc, &config, &NoProgress).unwrap();
            let what = format!("undirected: {undirected}, {threads} threads");
            assert_close(&labels, &expected, &what);
        }
    }
}

/// A run whose caller asks it to stop ends with `Cancelled` after the
/// superstep in which it was asked.
#[test]
fn a_run_stops_after_the_superstep_its_caller_asks() {
    let edges: Vec<(u32, u32, f32)> = (0..99u32)
        .flat_map(|v| [(v, v + 1, 1.0), (v + 1, v, 1.0)])
        .collect();
    let path = Graph::from_edges(100, &edges, false, true).unwrap();
    let algorithm = Algorithm::PageRank {
        damping: 0.85,
        iterations: 20,
    };
    let progress = CancelAfter {
        after: 3,
        supersteps: Default::default(),
    };
    let err = run(&path, &algorithm, &Config::default(), &progress).unwrap_err();
    assert!(matches!(err, quiver_bsp::Error::Cancelled(_)), "{err}");
    assert_eq!(
        progress
            .supersteps
            .load(std::sync::atomic::Ordering::Relaxed),
        3
    );
    let (_, report) = run(&path, &algorithm, &Config::default(), &NoProgress).unwrap();
    assert!(report.supersteps.len() > 3);
}
