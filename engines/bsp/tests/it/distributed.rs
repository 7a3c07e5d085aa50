//! The engine as a job of several nodes equals the reference: loopback
//! nodes (threads) on random graphs over every direction, 1-4 nodes and
//! 1-2 workers, and WCC on graphs mostly local to each node; tcp node
//! processes on one graph.

use std::path::Path;
use std::time::Duration;

use proptest::prelude::*;
use quiver_bsp::job::{join, BspTask, JobConfig};
use quiver_bsp::{reference, Algorithm, Config, Direction, Transport};
use quiver_csr::testing::{arb_graph, build, Shape};
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
        balance in any::<bool>(),
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
                    // Threshold 0: migrate whenever a node has a block of tasks left.
                    let migrate_threshold = balance.then_some(0);
                    let config = Config { threads, direction, transport, migrate_threshold };
                    check(&job, &graph, &path, algorithm, config);
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// WCC on graphs whose edges mostly stay inside a node, so that nodes
    /// join their own vertices by union-find before labels cross: edges
    /// between close ids (the partition keeps ranges of ids together), a
    /// few between any two.
    #[test]
    fn wcc_on_mostly_local_graphs_matches_the_reference(
        n in 20u32..120,
        close in prop::collection::vec((0u32..1000, 1u32..4), 0..200),
        far in prop::collection::vec((0u32..1000, 0u32..1000), 0..6),
        undirected in any::<bool>(),
        nodes in 2u32..=4,
        threads in 1usize..=2,
    ) {
        let edges: Vec<(u32, u32, f32)> = close
            .iter()
            .map(|&(a, step)| (a % n, (a % n + step) % n, 1.0))
            .chain(far.iter().map(|&(a, b)| (a % n, b % n, 1.0)))
            .collect();
        let graph = build(n, edges, false, undirected);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("g.qcsr");
        write_graph(&graph, &path).unwrap();
        let job = Job {
            timeout: Duration::from_secs(20),
            ..Job::new(Fabric::Loopback { cost: None }, Nodes::Local(nodes))
        };
        for direction in [Direction::Push, Direction::Pull, Direction::Auto] {
            let config = Config { threads, direction, ..Config::default() };
            check(&job, &graph, &path, Algorithm::Wcc, config);
        }
    }
}

/// A node of several reads which nodes need a vertex's state off its
/// sorted list, so a file whose list is out of order (checksums resealed)
/// fails the job naming the vertex instead of computing wrong values.
#[test]
fn a_node_refuses_a_list_out_of_order() {
    let edges = [(0, 1), (0, 3), (1, 0), (2, 3), (3, 0), (3, 2)];
    let edges: Vec<(u32, u32, f32)> = edges.iter().map(|&(a, b)| (a, b, 1.0)).collect();
    let graph = Graph::from_edges(4, &edges, false, false).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.qcsr");
    write_graph(&graph, &path).unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    // Vertex 3's list, edges 4 and 5, [0, 2] becomes [2, 0].
    quiver_csr::testing::set_target(&mut bytes, 4, 2);
    quiver_csr::testing::set_target(&mut bytes, 5, 0);
    std::fs::write(&path, &bytes).unwrap();
    let job = Job {
        timeout: Duration::from_secs(20),
        ..Job::new(Fabric::Loopback { cost: None }, Nodes::Local(2))
    };
    let err = job
        .run::<BspTask>(&JobConfig {
            graph: path.clone(),
            algorithm: Algorithm::Wcc,
            config: Config::default(),
        })
        .expect_err("a list out of order");
    let chain = quiver_run::chain(&err);
    assert!(chain.contains("vertex 3's list is not sorted"), "{chain}");
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
                ..Config::default()
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

/// The spawned node process of `rank` among this process's children whose
/// command line carries `marker`: other tests of this binary run their own
/// nodes of the same ranks at the same time.
fn child_of_rank(rank: u32, marker: &str) -> Option<u32> {
    let me = std::process::id();
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid: u32 = entry.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(entry.path().join("stat")).ok()?;
            // The parent pid is the second field after the parenthesised name.
            let parent: u32 = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let is_marked = cmdline
                .split(|&b| b == 0)
                .any(|arg| arg == marker.as_bytes());
            let environ = std::fs::read(entry.path().join("environ")).ok()?;
            let wanted = format!("QUIVER_RANK={rank}");
            let is_rank = environ
                .split(|&b| b == 0)
                .any(|var| var == wanted.as_bytes());
            (parent == me && is_marked && is_rank).then_some(pid)
        })
}

/// A node process killed in the middle of a run fails the job within the
/// timeout, with an error that names it, and leaves no node behind.
#[test]
fn a_killed_node_fails_the_job_naming_it() {
    let edges: Vec<(u32, u32, f32)> = (0..2000u32)
        .map(|i| (i % 500, (i * 7 + 1) % 500, 1.0))
        .collect();
    let graph = Graph::from_edges(500, &edges, false, false).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.qcsr");
    write_graph(&graph, &path).unwrap();
    // A filter that skips no test, so that only this job's nodes carry it.
    const MARKER: &str = "--skip=a_killed_node_marker";
    let mut job = Job {
        timeout: Duration::from_secs(5),
        ..tcp_job(2)
    };
    job.program.as_mut().unwrap().args.push(MARKER.into());
    let killer = std::thread::spawn(|| {
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(pid) = child_of_rank(1, MARKER) {
                // Let it get into its supersteps first.
                std::thread::sleep(Duration::from_millis(500));
                std::process::Command::new("kill")
                    .args(["-9", &pid.to_string()])
                    .status()
                    .unwrap();
                return std::time::Instant::now();
            }
            assert!(std::time::Instant::now() < deadline, "node 1 never started");
            std::thread::sleep(Duration::from_millis(20));
        }
    });
    let config = JobConfig {
        graph: path,
        algorithm: Algorithm::PageRank {
            damping: 0.85,
            iterations: 10_000_000,
        },
        config: Config {
            threads: 1,
            ..Config::default()
        },
    };
    let err = job.run::<BspTask>(&config).unwrap_err();
    let killed_at = killer.join().unwrap();
    let message = quiver_run::chain(&err);
    assert!(
        killed_at.elapsed() < Duration::from_secs(15),
        "the failure took {:?}: {message}",
        killed_at.elapsed()
    );
    assert!(message.contains("node 1"), "{message}");
    assert_eq!(child_of_rank(0, MARKER), None, "node 0 was left behind");
}
