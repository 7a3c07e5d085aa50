//! The applications on both backends: the same results (BFS depths, the
//! CC partition, the MIS, PageRank's values, the walks) from the GTL and
//! the CSR baseline, checked against the graph in memory; the cache's
//! bound; errors named.

use proptest::prelude::*;
use quiver_csr::testing::{arb_graph, karate, Shape};
use quiver_csr::Graph;
use quiver_gtl::apps::{self, Order, SplitMix, UNREACHED};
use quiver_gtl::source::open;
use quiver_gtl::{run, App, Backend, Error, GraphSource, RunConfig, Submission, Submit};
use quiver_run::NoProgress;

use crate::small_config;

/// Tiny pages and a cache of 3 of them, so that lists span pages and
/// pages are evicted.
fn source(graph: &Graph, backend: Backend) -> Box<dyn GraphSource> {
    open(graph, &small_config(), backend, 3 * 64, &NoProgress)
        .unwrap()
        .0
}

/// How the host keeps requests in flight: one at a time, a small window,
/// small barriered batches.
const SUBMITS: [Submit; 3] = [
    Submit {
        in_flight: 1,
        submission: Submission::Window,
    },
    Submit {
        in_flight: 3,
        submission: Submission::Window,
    },
    Submit {
        in_flight: 3,
        submission: Submission::Batches,
    },
];

/// BFS depths by a search in memory.
fn reference_depths(graph: &Graph, root: u32) -> Vec<u32> {
    let mut depths = vec![UNREACHED; graph.num_vertices() as usize];
    depths[root as usize] = 0;
    let mut queue = std::collections::VecDeque::from([root]);
    while let Some(v) = queue.pop_front() {
        for &u in graph.neighbors(v) {
            if depths[u as usize] == UNREACHED {
                depths[u as usize] = depths[v as usize] + 1;
                queue.push_back(u);
            }
        }
    }
    depths
}

/// Walks in memory with the generators `apps::random_walks` documents:
/// starts drawn from `seed`, then one generator per walk seeded from it.
fn reference_walks(graph: &Graph, walks: u32, length: u32, seed: u64) -> Vec<u32> {
    let n = u64::from(graph.num_vertices());
    let mut rng = SplitMix::new(seed);
    let starts: Vec<u32> = (0..walks)
        .map(|_| u32::try_from(rng.below(n)).unwrap())
        .collect();
    starts
        .into_iter()
        .map(|mut at| {
            let mut draw = SplitMix::new(rng.next_u64());
            for _ in 0..length {
                let list = graph.neighbors(at);
                if list.is_empty() {
                    break;
                }
                at = list[usize::try_from(draw.below(list.len() as u64)).unwrap()];
            }
            at
        })
        .collect()
}

/// Every application on both backends, in both orders and every way of
/// keeping requests in flight, checked against the graph in memory; the
/// sweeps and the walks give the same result whatever the timing.
fn check_equivalent(graph: &Graph) {
    let depths = reference_depths(graph, 0);
    let ends = reference_walks(graph, 50, 10, 7);
    let mut sweeps = Vec::new();
    for backend in [Backend::Gtl, Backend::Csr] {
        for submit in SUBMITS {
            let mut s = source(graph, backend);
            for order in [Order::Fifo, Order::Levels] {
                let bfs = apps::bfs(s.as_mut(), 0, None, order, submit).unwrap();
                let exact = order == Order::Levels || submit.in_flight == 1;
                for (v, (&got, &want)) in bfs.depths.iter().zip(&depths).enumerate() {
                    assert_eq!(
                        got == UNREACHED,
                        want == UNREACHED,
                        "{backend} {order:?} {submit:?}: {v} reached"
                    );
                    assert!(
                        got >= want,
                        "{backend} {order:?} {submit:?}: {v} at {got}, under the shortest {want}"
                    );
                    if exact {
                        assert_eq!(got, want, "{backend} {order:?} {submit:?}: depth of {v}");
                    }
                }
                let reachable = depths.iter().filter(|&&d| d != UNREACHED).count() as u64;
                assert_eq!(bfs.reached, reachable);
                if graph.is_undirected() {
                    let cc = apps::connected_components(s.as_mut(), order, submit).unwrap();
                    check_components(graph, &cc);
                }
            }
            let walks = apps::random_walks(s.as_mut(), 50, 10, 7, None, submit).unwrap();
            assert_eq!(
                walks.ends, ends,
                "{backend} {submit:?}: the walks go where they go in memory"
            );
            let pr = apps::threshold_pagerank(s.as_mut(), 0.85, 0.4, 5, submit).unwrap();
            let mis = graph
                .is_undirected()
                .then(|| apps::luby_mis(s.as_mut(), 3, submit).unwrap());
            if let Some(mis) = &mis {
                check_mis(graph, &mis.members);
            }
            assert!(
                s.cache_bytes() <= 3 * 64,
                "{backend}: the cache holds its bound"
            );
            sweeps.push((pr, mis));
        }
    }
    for other in &sweeps[1..] {
        assert_eq!(other, &sweeps[0], "every backend and submission agrees");
    }
}

/// Each vertex's label is its component's smallest vertex, by search in memory.
fn check_components(graph: &Graph, cc: &[u32]) {
    let n = graph.num_vertices();
    let mut smallest = vec![UNREACHED; n as usize];
    for root in 0..n {
        if smallest[root as usize] != UNREACHED {
            continue;
        }
        smallest[root as usize] = root;
        let mut stack = vec![root];
        while let Some(v) = stack.pop() {
            for &u in graph.neighbors(v) {
                if smallest[u as usize] == UNREACHED {
                    smallest[u as usize] = root;
                    stack.push(u);
                }
            }
        }
    }
    assert_eq!(
        cc, smallest,
        "each vertex labelled by its component's smallest vertex"
    );
}

/// `members` is an independent set no vertex could join.
fn check_mis(graph: &Graph, members: &[bool]) {
    for v in 0..graph.num_vertices() {
        for &u in graph.neighbors(v) {
            if u != v {
                assert!(
                    !(members[v as usize] && members[u as usize]),
                    "{v}-{u} both in the set"
                );
            }
        }
        let covered = members[v as usize]
            || graph
                .neighbors(v)
                .iter()
                .any(|&u| u != v && members[u as usize]);
        assert!(covered, "{v} could join: the set is not maximal");
    }
}

#[test]
fn backends_agree_on_karate() {
    check_equivalent(&karate(true));
    check_equivalent(&karate(false));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn backends_agree_on_random_graphs(graph in arb_graph(Shape::new(40, 160))) {
        check_equivalent(&graph);
    }
}

#[test]
fn hits_cost_no_reads_and_a_cacheless_source_rereads() {
    let graph = karate(true);
    for backend in [Backend::Gtl, Backend::Csr] {
        let (mut big, _) = open(&graph, &small_config(), backend, 1 << 20, &NoProgress).unwrap();
        let all: Vec<u32> = (0..graph.num_vertices()).collect();
        big.get_many(&all).unwrap();
        let first = big.counters();
        big.get_many(&all).unwrap();
        let again = big.counters();
        assert_eq!(again.pages_read, first.pages_read, "{backend}");
        assert_eq!(again.modelled_ns, first.modelled_ns, "{backend}");
        assert_eq!(again.cache_misses, first.cache_misses, "{backend}");
        let (mut none, _) = open(&graph, &small_config(), backend, 0, &NoProgress).unwrap();
        none.get_many(&all).unwrap();
        let once = none.counters().pages_read;
        assert!(
            once >= first.pages_read,
            "{backend}: shared pages are read again"
        );
        none.get_many(&all).unwrap();
        assert_eq!(none.counters().cache_hits, 0);
        assert_eq!(none.cache_bytes(), 0);
        assert_eq!(none.counters().pages_read, 2 * once, "{backend}");
    }
}

/// On the default device (8 channels x 4 ways x 1024 blocks x 256 pages
/// of 16 KiB: 137 GB), its pages kept in a sparse file, every application
/// answers as in memory with the same counts and modelled time, while the
/// file takes disk space only for the pages written (and is removed with
/// its device).
#[test]
fn a_device_on_a_sparse_file_runs_every_application_as_in_memory() {
    let graph = karate(true);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("nand");
    for app in [App::Bfs, App::Cc, App::Rw, App::Mis, App::Pagerank] {
        for backend in [Backend::Gtl, Backend::Csr] {
            let config = RunConfig {
                backend,
                walks: Some(100),
                ..RunConfig::default()
            };
            let in_memory = run(&graph, app, &config, &NoProgress).unwrap();
            let mut on_file = config.clone();
            on_file.device.flash_file = Some(file.clone());
            let on_file = run(&graph, app, &on_file, &NoProgress).unwrap();
            let counts = |r: &quiver_gtl::Report| (r.pages_read, r.modelled_ns, r.cache_misses);
            assert_eq!(on_file.result, in_memory.result, "{app:?} {backend}");
            assert_eq!(counts(&on_file), counts(&in_memory), "{app:?} {backend}");
        }
    }
    // While a device lives its file is as long as the device and takes
    // space only for what it wrote; then it is gone.
    let mut device = RunConfig::default().device;
    device.flash_file = Some(file.clone());
    let mut ssd = quiver_gtl::Ssd::new(&device).unwrap();
    ssd.graph_initialize(&graph, &NoProgress).unwrap();
    let meta = std::fs::metadata(&file).unwrap();
    let geometry = &device.geometry;
    let page_len = u64::from(geometry.page_bytes + geometry.spare_bytes);
    assert_eq!(meta.len(), geometry.pages() * page_len);
    let taken = std::os::unix::fs::MetadataExt::blocks(&meta) * 512;
    assert!(taken < 64 << 20, "{taken} bytes on disk");
    drop(ssd);
    assert!(!file.exists(), "the flash file is scratch space");
}

#[test]
fn runs_report_counts_and_name_their_errors() {
    let graph = karate(true);
    let config = RunConfig {
        device: small_config(),
        cache_bytes: 4 * 64,
        walks: Some(100),
        requests: 500,
        ..RunConfig::default()
    };
    for app in [
        App::Bfs,
        App::Cc,
        App::Rw,
        App::Mis,
        App::Pagerank,
        App::RandomReads,
    ] {
        let mut results = Vec::new();
        for backend in [Backend::Gtl, Backend::Csr] {
            let config = RunConfig {
                backend,
                ..config.clone()
            };
            let report = run(&graph, app, &config, &NoProgress).unwrap();
            assert!(report.pages_read > 0 && report.modelled_ns > 0, "{app:?}");
            assert_eq!(report.pages_written, 0);
            assert!(report.init.pages_written >= report.init.image_pages);
            results.push(report.result);
        }
        assert_eq!(results[0], results[1], "{app:?}");
    }
    let bad = RunConfig {
        source: Some(34),
        ..config.clone()
    };
    let err = run(&graph, App::Bfs, &bad, &NoProgress).unwrap_err();
    assert!(
        matches!(err, Error::VertexOutOfRange { vertex: 34, .. }),
        "{err}"
    );
    let err = run(&karate(false), App::Mis, &config, &NoProgress).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(ref e) if e.parameter == "graph"));
    let mut tiny = config.clone();
    tiny.device.geometry.blocks_per_die = 17;
    let edges: Vec<(u32, u32, f32)> = (0..300u32)
        .flat_map(|v| (1..20).map(move |k| (v, (v + k) % 300, 1.0)))
        .collect();
    let big = Graph::from_edges(300, &edges, false, false).unwrap();
    let err = run(&big, App::Bfs, &tiny, &NoProgress).unwrap_err();
    assert!(
        matches!(
            err,
            Error::GeometryTooSmall {
                area: "graph area",
                ..
            }
        ),
        "{err}"
    );
}

/// With empty marks, a vertex laid out without out-edges costs no page
/// and no time, every list is still right, and an edge added to such a
/// vertex (by either path) is read from the device again.
#[test]
fn empty_marks_skip_reads_until_an_edit_names_the_vertex() {
    use quiver_csr::testing::build;
    use quiver_gtl::{GtlSource, Ssd, Update, UpdatePath};
    // 0-1, 1-2 and isolated 3, 4, 5.
    let graph = build(6, vec![(0, 1, 1.0), (1, 2, 1.0)], false, true);
    for path in [UpdatePath::Delta, UpdatePath::Direct] {
        let mut config = small_config();
        config.mark_empty = true;
        let mut ssd = Ssd::new(&config).unwrap();
        ssd.graph_initialize(&graph, &NoProgress).unwrap();
        let mut host = GtlSource::new(ssd, 0).unwrap();
        for v in 3..6 {
            assert!(host.get(v).unwrap().is_empty());
        }
        assert_eq!(
            host.counters().pages_read,
            0,
            "{path:?}: empty lists read nothing"
        );
        assert_eq!(host.counters().modelled_ns, 0);
        assert_eq!(host.get(1).unwrap(), [0, 2]);
        let read = host.counters().pages_read;
        assert!(read > 0);
        let edge = Update::AddEdge {
            source: 4,
            target: 5,
            weight: 1.0,
        };
        assert_eq!(host.ssd_mut().update(&[edge], path).unwrap(), [true]);
        assert_eq!(host.get(4).unwrap(), [5], "{path:?}");
        assert_eq!(host.get(5).unwrap(), [4], "{path:?}");
        assert!(host.get(3).unwrap().is_empty());
        assert!(
            host.counters().pages_read > read,
            "{path:?}: 4 and 5 are read now"
        );
    }
    // Without marks, an empty list costs its page.
    let mut ssd = Ssd::new(&small_config()).unwrap();
    ssd.graph_initialize(&graph, &NoProgress).unwrap();
    let mut host = GtlSource::new(ssd, 0).unwrap();
    assert!(host.get(3).unwrap().is_empty());
    assert_eq!(host.counters().pages_read, 1);
}
