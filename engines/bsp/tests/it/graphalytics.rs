//! The LDBC Graphalytics example graphs (directed and undirected) against
//! the benchmark's reference outputs, with its tolerances: exact for BFS and
//! CDLP, partition-equal for WCC, 1e-4 relative for PageRank, LCC and SSSP.
//! Each runs on one process and as a job of two tcp node processes.

use std::collections::HashMap;

use quiver_bsp::job::{join, BspTask, JobConfig};
use quiver_bsp::{graphalytics_depth, run, Algorithm, Config, Values};
use quiver_csr::{testing, write_graph, Graph};
use quiver_run::NoProgress;

use crate::tcp_job;

/// The examples' parameters (their `.properties` files): BFS/SSSP source,
/// PageRank damping 0.85 and 2 iterations, CDLP 2 iterations.
fn algorithms(graph: &Graph, source: u64) -> Vec<Algorithm> {
    let source = graph.dense_id(source).expect("the source is a vertex");
    vec![
        Algorithm::Bfs { source },
        Algorithm::PageRank {
            damping: 0.85,
            iterations: 2,
        },
        Algorithm::Wcc,
        Algorithm::Sssp { source },
        Algorithm::Cdlp { iterations: 2 },
        Algorithm::Lcc,
    ]
}

/// `id value` lines of a reference output, by original id.
fn expected(name: &str, algorithm: &Algorithm) -> HashMap<u64, String> {
    let path = testing::graphalytics(&format!("{name}-{}", algorithm.graphalytics_name()));
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(|line| {
            let (id, value) = line.split_once(' ').expect("`id value` lines");
            (id.parse().expect("an id"), value.to_owned())
        })
        .collect()
}

fn real(text: &str) -> f64 {
    match text {
        "Infinity" => f64::INFINITY,
        _ => text.parse().expect("a real"),
    }
}

/// Checks `values` (by dense id) against the reference output.
fn check(graph: &Graph, name: &str, algorithm: &Algorithm, values: &Values, how: &str) {
    let expected = expected(name, algorithm);
    let what = format!("{name} {} {how}", algorithm.graphalytics_name());
    assert_eq!(expected.len(), values.len(), "{what}: vertex count");
    let id = |v: usize| graph.original_id(u32::try_from(v).unwrap());
    match values {
        Values::Depths(depths) => {
            for (v, &d) in depths.iter().enumerate() {
                let want: u64 = expected[&id(v)].parse().unwrap();
                assert_eq!(graphalytics_depth(d), want, "{what}: vertex {}", id(v));
            }
        }
        Values::Labels(labels) if matches!(algorithm, Algorithm::Cdlp { .. }) => {
            for (v, &l) in labels.iter().enumerate() {
                let want: u64 = expected[&id(v)].parse().unwrap();
                assert_eq!(graph.original_id(l), want, "{what}: vertex {}", id(v));
            }
        }
        Values::Labels(labels) => {
            // Partition-equal: the same vertices share a label in both.
            let mut ours_to_theirs = HashMap::new();
            let mut theirs_to_ours = HashMap::new();
            for (v, &l) in labels.iter().enumerate() {
                let theirs: u64 = expected[&id(v)].parse().unwrap();
                assert_eq!(
                    *ours_to_theirs.entry(l).or_insert(theirs),
                    theirs,
                    "{what}: vertex {}",
                    id(v)
                );
                assert_eq!(
                    *theirs_to_ours.entry(theirs).or_insert(l),
                    l,
                    "{what}: vertex {}",
                    id(v)
                );
            }
        }
        Values::Reals(reals) => {
            for (v, &x) in reals.iter().enumerate() {
                let want = real(&expected[&id(v)]);
                let close = x == want || (x - want).abs() <= 1e-4 * want.abs();
                assert!(
                    close,
                    "{what}: vertex {}: {x} where the reference has {want}",
                    id(v)
                );
            }
        }
    }
}

const EXAMPLES: [(&str, u64); 2] = [("example-directed", 1), ("example-undirected", 2)];

#[test]
fn one_process_reproduces_the_reference_outputs() {
    for (name, source) in EXAMPLES {
        let graph = testing::graphalytics_graph(name);
        for algorithm in algorithms(&graph, source) {
            for threads in [1, 2] {
                let config = Config {
                    threads,
                    ..Config::default()
                };
                let (values, _) = run(&graph, &algorithm, &config, &NoProgress).unwrap();
                check(
                    &graph,
                    name,
                    &algorithm,
                    &values,
                    &format!("{threads} threads"),
                );
            }
            let reference = quiver_bsp::reference::run(&graph, &algorithm).unwrap();
            check(&graph, name, &algorithm, &reference, "reference");
        }
    }
}

#[test]
fn two_tcp_nodes_reproduce_the_reference_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let job = tcp_job(2);
    for (name, source) in EXAMPLES {
        let graph = testing::graphalytics_graph(name);
        let path = dir.path().join(format!("{name}.qcsr"));
        write_graph(&graph, &path).unwrap();
        for algorithm in algorithms(&graph, source) {
            let config = JobConfig {
                graph: path.clone(),
                algorithm,
                config: Config {
                    threads: 2,
                    ..Config::default()
                },
            };
            let reports = job.run::<BspTask>(&config).unwrap().unwrap();
            check(&graph, name, &algorithm, &join(&reports), "2 tcp nodes");
        }
    }
}
