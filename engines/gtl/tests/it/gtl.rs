//! Both layouts against the graph they were loaded from, and the GTL's
//! structure: a sorted GTT whose entries' pages start at their key, and no
//! list split unless it is longer than a page holds.

use proptest::prelude::*;
use quiver_csr::testing::{arb_graph, karate, Shape};
use quiver_csr::Graph;
use quiver_gtl::page::{Page, CONTINUED, CONTINUES};
use quiver_gtl::{Config, Error, Ssd};
use quiver_run::NoProgress;

use crate::small_config;

/// Loads `graph` both ways on a device of `config`.
fn loaded(graph: &Graph, config: &Config) -> Ssd {
    let mut ssd = Ssd::new(config).unwrap();
    ssd.graph_initialize(graph, &NoProgress).unwrap();
    ssd.write_csr(graph, &NoProgress).unwrap();
    ssd
}

/// Every list and weight read back equals the graph's, on both layouts.
fn assert_reads_match(graph: &Graph, ssd: &mut Ssd) {
    for v in 0..graph.num_vertices() {
        let want = graph.neighbors(v);
        let gtl = ssd.get_adjacency_list(v).unwrap();
        assert_eq!(gtl.value, want, "gtl list of {v}");
        let csr = ssd.csr_get_adjacency_list(v).unwrap();
        assert_eq!(csr.value, want, "csr list of {v}");
        let Some(weights) = graph.edge_weights(v) else {
            assert!(matches!(ssd.get_edge_weight(v, 0), Err(Error::Unweighted)));
            continue;
        };
        for (&t, _) in want.iter().zip(weights) {
            let first = want.iter().position(|&x| x == t).unwrap();
            let w = Some(weights[first]);
            assert_eq!(
                ssd.get_edge_weight(v, t).unwrap().value,
                w,
                "gtl weight {v}->{t}"
            );
            assert_eq!(
                ssd.csr_get_edge_weight(v, t).unwrap().value,
                w,
                "csr weight {v}->{t}"
            );
        }
        if let Some(absent) = (0..graph.num_vertices()).find(|t| !want.contains(t)) {
            assert_eq!(ssd.get_edge_weight(v, absent).unwrap().value, None);
            assert_eq!(ssd.csr_get_edge_weight(v, absent).unwrap().value, None);
        }
    }
}

/// The GTT is sorted, every entry's page starts at its key, pages follow
/// the vertex order, and a list spans pages only if it must, in exactly
/// as many pages as it needs.
fn assert_layout(graph: &Graph, ssd: &Ssd) {
    let gtl = ssd.gtl().unwrap();
    let entries = gtl.gtt().entries();
    assert!(
        entries.windows(2).all(|w| w[0].vertex() <= w[1].vertex()),
        "GTT sorted"
    );
    let max = gtl.format().max_list();
    let mut next = 0u32;
    let mut previous: Option<Page> = None;
    for e in entries {
        assert!(e.valid() && !e.dirty() && !e.extension());
        let page = Page::decode(ssd.flash().peek(e.ppn()).unwrap(), e.ppn().0).unwrap();
        assert_eq!(
            page.vsid,
            e.vertex(),
            "footer start vertex of page {:?}",
            e.ppn()
        );
        let first = if page.flags & CONTINUED != 0 {
            next - 1
        } else {
            next
        };
        assert_eq!(page.vsid, first, "pages cover the vertices in order");
        next = page.vsid + page.vertices();
        // A list goes on exactly from a page of it alone to a page of the same vertex.
        let continues = previous.as_ref().is_some_and(|p| p.flags & CONTINUES != 0);
        assert_eq!(
            continues,
            page.flags & CONTINUED != 0,
            "flags of page {:?}",
            e.ppn()
        );
        if let (true, Some(p)) = (continues, &previous) {
            assert_eq!((p.vsid, p.vertices()), (page.vsid, 1));
        }
        previous = Some(page);
    }
    assert_eq!(next, graph.num_vertices(), "every vertex has a tuple");
    let layout = gtl.layout();
    assert!(
        0 < layout.tight_pages && layout.tight_pages <= layout.pages,
        "a tight pack needs at most the pages: {layout:?}"
    );
    for v in 0..graph.num_vertices() {
        let len = graph.neighbors(v).len();
        let pages = gtl.pages_of(v).unwrap().len();
        if len <= max {
            assert_eq!(pages, 1, "vertex {v} of {len} neighbours split");
        } else {
            assert_eq!(pages, len.div_ceil(max), "dense vertex {v} of {len}");
        }
    }
    if let Some(weights) = gtl.weight_gtt() {
        assert_eq!(weights.len(), entries.len());
        for (w, e) in weights.entries().iter().zip(entries) {
            assert_eq!(w.vertex(), e.vertex());
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn both_layouts_return_every_list_and_weight(graph in arb_graph(Shape::new(40, 120))) {
        let mut ssd = loaded(&graph, &small_config());
        assert_layout(&graph, &ssd);
        assert_reads_match(&graph, &mut ssd);
        ssd.ftl().check(ssd.flash());
    }
}

#[test]
fn a_dense_vertex_spans_pages_and_shares_its_last() {
    // Vertex 0 has 17 neighbours, more than a 64-byte page holds (7): two
    // full pages and a last one of 3, which vertex 1's list joins.
    let mut edges: Vec<(u32, u32, f32)> = (0..17).map(|t| (0, t % 5, t as f32)).collect();
    edges.push((1, 2, 0.5));
    edges.push((3, 4, 0.25));
    let graph = Graph::from_edges(5, &edges, true, false).unwrap();
    let mut ssd = loaded(&graph, &small_config());
    assert_layout(&graph, &ssd);
    let gtl = ssd.gtl().unwrap();
    assert_eq!(gtl.format().max_list(), 7);
    let dense = gtl.pages_of(0).unwrap();
    assert_eq!(dense.len(), 3);
    assert_eq!(
        gtl.pages_of(1).unwrap(),
        dense[2..],
        "vertex 1 shares the tail page"
    );
    let got = ssd.get_adjacency_list(0).unwrap();
    assert_eq!(got.pages_read, 3);
    assert_reads_match(&graph, &mut ssd);
}

#[test]
fn karate_reads_one_page_on_the_gtl_and_two_on_the_csr() {
    let graph = karate(true);
    let mut ssd = loaded(&graph, &Config::default());
    assert_layout(&graph, &ssd);
    let layout = ssd.gtl().unwrap().layout().clone();
    assert_eq!((layout.pages, layout.gtt_bytes), (1, 8));
    for v in 0..graph.num_vertices() {
        let gtl = ssd.get_adjacency_list(v).unwrap();
        let csr = ssd.csr_get_adjacency_list(v).unwrap();
        assert_eq!((gtl.pages_read, csr.pages_read), (1, 2), "vertex {v}");
        // One page: tR, the channel and the host link; the CSR reads rowPtr, then colIdx.
        assert_eq!(gtl.latency(), 40_000 + 20_480 + 4_096);
        assert_eq!(csr.latency(), 2 * (40_000 + 20_480 + 4_096));
    }
    assert_reads_match(&graph, &mut ssd);
}

#[test]
fn out_of_range_vertices_and_small_devices_are_errors() {
    let graph = karate(true);
    let mut ssd = loaded(&graph, &small_config());
    assert!(matches!(
        ssd.get_adjacency_list(34),
        Err(Error::VertexOutOfRange {
            vertex: 34,
            vertices: 34
        })
    ));
    assert!(matches!(
        ssd.csr_get_adjacency_list(99),
        Err(Error::VertexOutOfRange { .. })
    ));
    let mut tiny = small_config();
    tiny.geometry.blocks_per_die = 20;
    tiny.ftl_blocks_per_die = 19;
    let mut ssd = Ssd::new(&tiny).unwrap();
    assert!(matches!(
        ssd.graph_initialize(&graph, &NoProgress),
        Err(Error::GeometryTooSmall {
            area: "graph area",
            ..
        })
    ));
    let mut tiny = small_config();
    tiny.geometry.blocks_per_die = 20;
    tiny.ftl_blocks_per_die = 3;
    tiny.over_provisioning = 0.86;
    let mut ssd = Ssd::new(&tiny).unwrap();
    assert!(matches!(
        ssd.write_csr(&graph, &NoProgress),
        Err(Error::GeometryTooSmall {
            area: "block area",
            ..
        })
    ));
    let mut fresh = Ssd::new(&small_config()).unwrap();
    assert!(matches!(fresh.get_adjacency_list(0), Err(Error::NoGraph)));
}

#[test]
fn config_errors_name_the_parameter() {
    for (config, parameter) in [
        (
            Config {
                slack: 0.7,
                ..small_config()
            },
            "slack",
        ),
        (
            Config {
                ftl_blocks_per_die: 32,
                ..small_config()
            },
            "ftl_blocks_per_die",
        ),
        (
            Config {
                over_provisioning: 0.01,
                ..small_config()
            },
            "over_provisioning",
        ),
    ] {
        match Ssd::new(&config) {
            Err(Error::InvalidArgument(e)) => assert_eq!(e.parameter, parameter),
            other => panic!("{parameter}: {other:?}"),
        }
    }
}
