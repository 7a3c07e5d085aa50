//! The engine as a job of several nodes equals the reference: loopback
//! nodes (threads) on random graphs over every direction, 1-4 nodes and
//! 1-2 workers; tcp node processes on one graph.

use std::path::Path;
use std::time::Duration;

use proptest::prelude::*;
use quiver_bsp::job::{join, BspTask, JobConfig};
use quiver_bsp::{reference, Algorithm, Config, Direction, Transport};
use quiver_csr::testing::{arb_graph, Shape};
use quiver_csr::{write_graph, Graph};
use quiver_verbs::job::{serve, Entry, Fabric, Job, Nodes};

use crate::engine::algorithms;
use crate::{assert_close, tcp_job};

/// Runs `algorithm` on the graph at `path` as `job` and checks the joined
/// values and each node's report against the reference on `graph`;
/// returns the messages the nodes sent.
fn check(job: &Job, graph: &Graph, path: &Path, algorithm: Algorithm, config: Config) -> u64 {
    let expected = reference::run(graph, &algorithm).unwrap();
    let what = format!("{algorithm:?} {config:?} on {:?}", job.nodes);
    let reports = job
        .run::<BspTask>(&JobConfig {
            graph: path.to_owned(),
            algorithm,
            config,
        })
        .unwrap_or_else(|e| panic!("{what}: {}", quiver_run::chain(&e)))
        .expect("a local job returns the reports");
    assert_close(&join(&reports), &expected, &what);
    let owned: usize = reports.iter().map(|r| r.report.owned.len()).sum();
    assert_eq!(
        owned,
        graph.num_vertices() as usize,
        "{what}: every vertex owned once"
    );
    reports.iter().map(|r| r.report.messages).sum()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn loopback_jobs_match_the_reference(
        graph in arb_graph(Shape::new(50, 250)),
        source in any::<prop::sample::Index>(),
        nodes in 1u32..=4,
        threads in 1usize..=2,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.qcsr");
        write_graph(&graph, &path).unwrap();
        let source = u32::try_from(source.index(graph.num_vertices() as usize)).unwrap();
        let job = Job {
            timeout: Duration::from_secs(20),
            ..Job::new(Fabric::Loopback { cost: None }, Nodes::Local(nodes))
        };
        for algorithm in algorithms(&graph, source) {
            for direction in [Direction::Push, Direction::Pull, Direction::Auto] {
                for transport in [Transport::OneSided, Transport::TwoSided] {
                    check(&job, &graph, &path, algorithm, Config { threads, direction, transport });
                }
            }
        }
    }
}

const TASKS: &[Entry] = &[Entry::of::<BspTask>()];

#[test]
#[ignore = "entry point of node processes spawned by the tcp test"]
fn node_entry() {
    if let Err(err) = serve(TASKS) {
        eprintln!("node failed: {}", quiver_run::chain(&err));
        std::process::exit(1);
    }
}

/// Two node processes over tcp, each algorithm in auto direction over both
/// transports, on a graph large enough that several blocks of messages
/// cross.
#[test]
fn tcp_processes_match_the_reference() {
    let edges: Vec<(u32, u32, f32)> = (0..3000u32)
        .map(|i| {
            (
                (i * 7919) % 1000,
                (i * 104_729 + 13) % 1000,
                (i % 17 + 1) as f32,
            )
        })
        .collect();
    let graph = Graph::from_edges(1000, &edges, true, false).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.qcsr");
    write_graph(&graph, &path).unwrap();
    let job = tcp_job(2);
    for algorithm in algorithms(&graph, 3) {
        for transport in [Transport::OneSided, Transport::TwoSided] {
            let config = Config {
                threads: 2,
                direction: Direction::Auto,
                transport,
            };
            let messages = check(&job, &graph, &path, algorithm, config);
            // Edge programs message the other node's masters; CDLP and LCC
            // exchange labels or read the file instead.
            let messaging = !matches!(algorithm, Algorithm::Cdlp { .. } | Algorithm::Lcc);
            assert_eq!(
                messages > 0,
                messaging,
                "{algorithm:?} {transport:?}: {messages} messages"
            );
        }
    }
}
