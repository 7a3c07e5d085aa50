//! Generators are deterministic for a seed and produce the promised shapes.

use quiver_csr::{generate_to_file, Graph, GraphSpec, NoProgress, SortOptions, GRAPH500};

fn edges_of(spec: &GraphSpec, seed: u64) -> Vec<(u32, u32, f32)> {
    let mut out = Vec::new();
    spec.generate(seed, Some((1, 9)), &mut |s, t, w| {
        out.push((s, t, w));
        Ok(())
    })
    .unwrap();
    out
}

#[test]
fn same_seed_same_graph_other_seed_other_graph() {
    for spec in [
        GraphSpec::Rmat {
            scale: 8,
            edge_factor: 4,
            probabilities: GRAPH500,
            permute: true,
        },
        GraphSpec::ErdosRenyi {
            vertices: 300,
            edges: 900,
        },
    ] {
        let a = edges_of(&spec, 1);
        assert_eq!(a, edges_of(&spec, 1), "{spec:?} is not deterministic");
        assert_ne!(a, edges_of(&spec, 2), "{spec:?} ignores its seed");
        assert_eq!(a.len() as u64, spec.num_edges());
        let n = spec.num_vertices().unwrap();
        assert!(
            a.iter()
                .all(|&(s, t, w)| s < n && t < n && (1.0..=9.0).contains(&w)),
            "{spec:?} out of range"
        );
    }
}

#[test]
fn shapes_have_their_textbook_edges() {
    let check = |spec: GraphSpec, expect: &[(u32, u32)]| {
        let got: Vec<(u32, u32)> = edges_of(&spec, 0)
            .into_iter()
            .map(|(s, t, _)| (s, t))
            .collect();
        assert_eq!(got, expect, "{spec:?}");
        assert_eq!(spec.num_edges(), expect.len() as u64);
    };
    check(GraphSpec::Path(4), &[(0, 1), (1, 2), (2, 3)]);
    check(GraphSpec::Cycle(3), &[(0, 1), (1, 2), (2, 0)]);
    check(GraphSpec::Star(4), &[(0, 1), (0, 2), (0, 3)]);
    check(
        GraphSpec::Grid(2, 3),
        &[(0, 1), (0, 3), (1, 2), (1, 4), (2, 5), (3, 4), (4, 5)],
    );
    check(
        GraphSpec::Complete(3),
        &[(0, 1), (0, 2), (1, 0), (1, 2), (2, 0), (2, 1)],
    );
}

#[test]
fn rmat_is_skewed_and_undirected_output_is_symmetric() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("r.qcsr");
    let spec = GraphSpec::Rmat {
        scale: 12,
        edge_factor: 8,
        probabilities: GRAPH500,
        permute: true,
    };
    let options = SortOptions {
        undirected: true,
        dedupe: true,
        drop_self_loops: true,
        ..SortOptions::default()
    };
    generate_to_file(&spec, 5, None, &options, &path, &NoProgress).unwrap();
    let g = Graph::open(&path).unwrap();
    assert_eq!(g.num_vertices(), 4096);
    assert!(g.is_undirected());
    for v in 0..g.num_vertices() {
        for &t in g.neighbors(v) {
            assert!(
                g.neighbors(t).binary_search(&v).is_ok(),
                "{v} -> {t} has no reverse"
            );
            assert_ne!(t, v, "self-loop survived");
        }
    }
    let d = g.degree_summary();
    assert!(
        d.max as f64 > 20.0 * d.mean,
        "R-MAT should have hubs: {d:?}"
    );
    assert!(
        d.zero_out_degree > 0,
        "R-MAT leaves isolated vertices: {d:?}"
    );
}

#[test]
fn bad_specs_are_refused() {
    let mut sink = |_, _, _| Ok(());
    for spec in [
        GraphSpec::Rmat {
            scale: 0,
            edge_factor: 1,
            probabilities: GRAPH500,
            permute: true,
        },
        GraphSpec::Rmat {
            scale: 4,
            edge_factor: 1,
            probabilities: (0.9, 0.9, 0.1),
            permute: true,
        },
        GraphSpec::ErdosRenyi {
            vertices: 0,
            edges: 1,
        },
        GraphSpec::Grid(0, 5),
    ] {
        assert!(
            spec.generate(1, None, &mut sink).is_err(),
            "{spec:?} accepted"
        );
    }
    assert!(
        GraphSpec::Path(3)
            .generate(1, Some((5, 1)), &mut sink)
            .is_err(),
        "empty weight range accepted"
    );
}

mod permutation {
    use proptest::prelude::*;
    use quiver_csr::{GraphSpec, Permutation, GRAPH500};

    use super::edges_of;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        /// Graph500's relabelling is a permutation of the id space.
        #[test]
        fn every_id_gets_a_distinct_label(bits in 1u32..=14, seed in any::<u64>()) {
            let p = Permutation::new(bits, seed);
            let n = 1u32 << bits;
            let mut seen = vec![false; n as usize];
            for v in 0..n {
                let label = p.apply(v);
                prop_assert!(label < n, "{} -> {} escapes {} ids", v, label, n);
                prop_assert!(!seen[label as usize], "two ids map to {}", label);
                seen[label as usize] = true;
            }
        }
    }

    fn rmat(permute: bool) -> GraphSpec {
        GraphSpec::Rmat {
            scale: 12,
            edge_factor: 8,
            probabilities: GRAPH500,
            permute,
        }
    }

    /// The permuted graph is the raw one with every id relabelled, and the
    /// hubs no longer sit at the lowest ids.
    #[test]
    fn permuted_graphs_are_the_raw_graph_relabelled() {
        let seed = 3;
        let raw = edges_of(&rmat(false), seed);
        let permuted = edges_of(&rmat(true), seed);
        let p = Permutation::new(12, seed);
        let relabelled: Vec<_> = raw
            .iter()
            .map(|&(s, t, w)| (p.apply(s), p.apply(t), w))
            .collect();
        assert_eq!(permuted, relabelled);
        let degree = |edges: &[(u32, u32, f32)]| {
            let mut d = vec![0u64; 1 << 12];
            edges.iter().for_each(|&(s, _, _)| d[s as usize] += 1);
            d
        };
        let (raw, permuted) = (degree(&raw), degree(&permuted));
        let low = |d: &[u64]| d[..64].iter().sum::<u64>();
        assert!(
            low(&raw) > 4 * low(&permuted),
            "the lowest 64 ids hold {} out-edges raw and {} permuted",
            low(&raw),
            low(&permuted)
        );
    }
}
