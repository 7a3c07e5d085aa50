//! The file device against the graph: a GTL file and the graph's `.qcsr`
//! read as a CSR file return every list, through io_uring and pread, and a
//! file that is not a GTL file is a named error.

use proptest::prelude::*;
use quiver_csr::testing::{arb_graph, Shape};
use quiver_csr::{write_graph, Graph};
use quiver_gtl::file::{CsrReader, GtlFile};
use quiver_gtl::Error;
use quiver_io::{BackendChoice, ReadOptions};

fn check(graph: &Graph, page_bytes: usize, slack: f64) {
    let dir = tempfile::tempdir().unwrap();
    let (gtl, csr) = (dir.path().join("g.gtl"), dir.path().join("g.qcsr"));
    GtlFile::write(graph, &gtl, page_bytes, slack).unwrap();
    write_graph(graph, &csr).unwrap();
    let all: Vec<u32> = (0..graph.num_vertices()).rev().collect();
    for backend in [BackendChoice::Uring, BackendChoice::Pread] {
        let options = ReadOptions {
            backend,
            queue_depth: 4,
            ..ReadOptions::default()
        };
        let gtl = GtlFile::open(&gtl, &options).unwrap();
        let csr = CsrReader::open(&csr, &options).unwrap();
        let (from_gtl, gtl_cost) = gtl.get_many(&all).unwrap();
        let (from_csr, csr_cost) = csr.get_many(&all).unwrap();
        for (&v, (a, b)) in all.iter().zip(from_gtl.iter().zip(&from_csr)) {
            assert_eq!(a, graph.neighbors(v), "gtl list of {v}");
            assert_eq!(b, graph.neighbors(v), "csr list of {v}");
        }
        assert!(gtl_cost.reads >= all.len() as u64, "a page a list at least");
        assert!(
            csr_cost.reads >= all.len() as u64,
            "a rowPtr block a list at least"
        );
        assert!(matches!(
            gtl.get_many(&[graph.num_vertices()]),
            Err(Error::VertexOutOfRange { .. })
        ));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    #[test]
    fn both_files_return_every_list(
        graph in arb_graph(Shape::new(300, 3000)),
        page_bytes in prop::sample::select(vec![4096usize, 16384, 65536]),
        slack in 0.0f64..0.2,
    ) {
        check(&graph, page_bytes, slack);
    }
}

#[test]
fn a_dense_vertex_spans_pages_of_the_file() {
    // 10,000 neighbours: three 16 KiB pages, or ten of 4 KiB.
    let edges: Vec<(u32, u32, f32)> = (0..10_000).map(|t| (1, t % 7, 1.0)).collect();
    let graph = Graph::from_edges(7, &edges, false, false).unwrap();
    check(&graph, quiver_gtl::file::PAGE_BYTES, 0.05);
    check(&graph, 4096, 0.05);
}

#[test]
fn a_page_size_that_is_not_a_power_of_two_from_4_kib_to_64_kib_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let graph = Graph::from_edges(3, &[(0, 1, 1.0)], false, false).unwrap();
    for bad in [2048, 12288, 1 << 17] {
        let err = GtlFile::write(&graph, &dir.path().join("g.gtl"), bad, 0.0).unwrap_err();
        assert!(err.to_string().contains("invalid argument"), "{bad}: {err}");
    }
}

#[test]
fn a_file_that_is_not_a_gtl_file_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("x.gtl");
    std::fs::write(&path, vec![7u8; 40_000]).unwrap();
    let err = GtlFile::open(&path, &ReadOptions::default()).unwrap_err();
    assert!(err.to_string().contains("not a GTL file"), "{err}");
    assert!(err.to_string().contains("x.gtl"), "{err}");
}
