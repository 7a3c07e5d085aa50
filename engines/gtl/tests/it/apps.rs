//! The applications on both backends: the same results (BFS depths, the
//! CC partition, the MIS, PageRank's values, the walks) from the GTL and
//! the CSR baseline, checked against the graph in memory; the cache's
//! bound; errors named.

use proptest::prelude::*;
use quiver_csr::testing::{arb_graph, karate, Shape};
use quiver_csr::Graph;
use quiver_gtl::apps::{self, UNREACHED};
use quiver_gtl::source::open;
use quiver_gtl::{run, App, Backend, Error, GraphSource, RunConfig};
use quiver_run::NoProgress;

use crate::small_config;

/// Tiny pages and a cache of 3 of them, so that lists span pages and
/// pages are evicted.
fn source(graph: &Graph, backend: Backend) -> Box<dyn GraphSource> {
    open(graph, &small_config(), backend, 3 * 64).unwrap().0
}

/// Every application on both backends gives the same result, and each is right.
fn check_equivalent(graph: &Graph) {
    let n = graph.num_vertices();
    let mut results = Vec::new();
    for backend in [Backend::Gtl, Backend::Csr] {
        let mut s = source(graph, backend);
        let bfs = apps::bfs(s.as_mut(), 0, None, 3).unwrap();
        let walks = apps::random_walks(s.as_mut(), 50, 10, 7, 4).unwrap();
        let pr = apps::threshold_pagerank(s.as_mut(), 0.85, 0.4, 5, 5).unwrap();
        let (cc, mis) = if graph.is_undirected() {
            let cc = apps::connected_components(s.as_mut(), 2).unwrap();
            let mis = apps::luby_mis(s.as_mut(), 3, 6).unwrap();
            (Some(cc), Some(mis))
        } else {
            (None, None)
        };
        assert!(
            s.cache_bytes() <= 3 * 64,
            "{backend}: the cache holds its bound"
        );
        results.push((bfs, walks, pr, cc, mis));
    }
    assert_eq!(results[0], results[1], "gtl and csr agree");
    let (bfs, walks, _, cc, mis) = &results[0];
    // BFS depths against a search in memory.
    let mut depths = vec![UNREACHED; n as usize];
    depths[0] = 0;
    let mut queue = std::collections::VecDeque::from([0u32]);
    while let Some(v) = queue.pop_front() {
        for &u in graph.neighbors(v) {
            if depths[u as usize] == UNREACHED {
                depths[u as usize] = depths[v as usize] + 1;
                queue.push_back(u);
            }
        }
    }
    assert_eq!(bfs.depths, depths, "BFS depths");
    assert_eq!(walks.ends.len(), 50);
    if let (Some(cc), Some(mis)) = (cc, mis) {
        // Each vertex's component's smallest vertex, by search in memory.
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
        for v in 0..n {
            for &u in graph.neighbors(v) {
                assert_eq!(cc[v as usize], cc[u as usize], "{v}-{u} in one component");
                if u != v {
                    assert!(
                        !(mis.members[v as usize] && mis.members[u as usize]),
                        "{v}-{u} both in the set"
                    );
                }
            }
            assert_eq!(
                cc[v as usize], smallest[v as usize],
                "{v}: its component's smallest vertex"
            );
            let covered = mis.members[v as usize]
                || graph
                    .neighbors(v)
                    .iter()
                    .any(|&u| u != v && mis.members[u as usize]);
            assert!(covered, "{v} could join: the set is not maximal");
        }
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
        let (mut big, _) = open(&graph, &small_config(), backend, 1 << 20).unwrap();
        let all: Vec<u32> = (0..graph.num_vertices()).collect();
        big.get_many(&all).unwrap();
        let first = big.counters();
        big.get_many(&all).unwrap();
        let again = big.counters();
        assert_eq!(again.pages_read, first.pages_read, "{backend}");
        assert_eq!(again.modelled_ns, first.modelled_ns, "{backend}");
        assert_eq!(again.cache_misses, first.cache_misses, "{backend}");
        let (mut none, _) = open(&graph, &small_config(), backend, 0).unwrap();
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
                walks: 100,
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
    ssd.graph_initialize(&graph).unwrap();
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
        walks: 100,
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
