//! The tcp fabric: nodes as threads of this process (each with its own
//! fabric, exactly as separate processes would have), and as separate
//! processes spawned by [`LocalJob`] re-executing this test binary.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use quiver_verbs::cluster::{Coordinator, Launch, LocalJob};
use quiver_verbs::{conformance, tcp, Error, Node, NodeRank};

use crate::{scratch, wait_for};

fn launch(rank: u32, size: u32, coordinator: &str, timeout: Duration) -> Launch {
    Launch {
        rank: NodeRank(rank),
        size,
        coordinator: coordinator.to_owned(),
        hosts_coordinator: false,
        timeout,
    }
}

/// Runs `body` on `size` tcp nodes in threads, around one coordinator.
fn in_threads<T: Send>(
    size: u32,
    timeout: Duration,
    body: impl Fn(Result<Node, Error>) -> T + Sync,
) -> Vec<T> {
    let coordinator = Coordinator::start("127.0.0.1:0", size, timeout).unwrap();
    let addr = coordinator.addr().to_string();
    let results = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..size)
            .map(|rank| {
                let (addr, body) = (&addr, &body);
                scope.spawn(move || body(tcp::join(&launch(rank, size, addr, timeout))))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    drop(coordinator);
    results
}

fn failures(outcomes: &[conformance::Outcome]) -> Vec<String> {
    outcomes
        .iter()
        .filter(|o| !o.passed)
        .map(ToString::to_string)
        .collect()
}

#[test]
fn conformance_in_threads() {
    for size in 1..=4 {
        let results = in_threads(size, Duration::from_secs(30), |node| {
            let node = node.unwrap();
            let outcomes = conformance::run(&node).unwrap();
            node.barrier().unwrap();
            outcomes
        });
        for (rank, outcomes) in results.iter().enumerate() {
            assert_eq!(outcomes.len(), conformance::CHECKS.len());
            assert!(
                failures(outcomes).is_empty(),
                "{size} nodes, node {rank}: {:?}",
                failures(outcomes)
            );
        }
    }
}

#[test]
fn a_node_that_never_arrives_is_named() {
    let timeout = Duration::from_millis(500);
    let coordinator = Coordinator::start("127.0.0.1:0", 3, timeout).unwrap();
    let addr = coordinator.addr().to_string();
    let started = Instant::now();
    let errors: Vec<Error> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..2)
            .map(|rank| {
                scope.spawn({
                    let addr = addr.clone();
                    move || tcp::join(&launch(rank, 3, &addr, timeout)).unwrap_err()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(started.elapsed() < Duration::from_secs(5));
    for err in errors {
        match err {
            Error::NodeFailed { node, reason } => {
                assert_eq!(node, NodeRank(2));
                assert!(reason.contains("never joined"), "{reason}");
            }
            other => panic!("expected node 2 to be named, got {other}"),
        }
    }
    assert!(matches!(
        coordinator.finish(),
        Err(Error::NodeFailed {
            node: NodeRank(2),
            ..
        })
    ));
}

#[test]
fn bootstrap_mistakes_are_named() {
    let timeout = Duration::from_millis(300);
    // Nothing listens at the coordinator address.
    let unused = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string();
    let err = tcp::join(&launch(0, 2, &unused, timeout))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("could not reach the coordinator at") && err.contains(&unused),
        "{err}"
    );
    let err = tcp::join(&launch(0, 2, "no-such-host.invalid:1", timeout))
        .unwrap_err()
        .to_string();
    assert!(err.contains("invalid coordinator address"), "{err}");
    // A node that disagrees on the size is refused with both sizes.
    let coordinator = Coordinator::start("127.0.0.1:0", 2, timeout).unwrap();
    let err = tcp::join(&launch(1, 3, &coordinator.addr().to_string(), timeout))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("believes the job has 3 nodes, the coordinator has 2"),
        "{err}"
    );
    // Rank and size from launcher environments, and their mistakes.
    let env = |vars: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    };
    let slurm = Launch::resolve_with(
        None,
        None,
        Some("h:1".into()),
        timeout,
        env(&[("SLURM_PROCID", "3"), ("SLURM_NTASKS", "4")]),
    )
    .unwrap();
    assert_eq!(
        (slurm.rank, slurm.size, slurm.hosts_coordinator),
        (NodeRank(3), 4, false)
    );
    let ompi = Launch::resolve_with(
        None,
        None,
        None,
        timeout,
        env(&[
            ("OMPI_COMM_WORLD_RANK", "0"),
            ("OMPI_COMM_WORLD_SIZE", "2"),
            ("QUIVER_COORDINATOR", "h:2"),
        ]),
    )
    .unwrap();
    assert_eq!(
        (
            ompi.rank,
            ompi.size,
            ompi.hosts_coordinator,
            ompi.coordinator.as_str()
        ),
        (NodeRank(0), 2, true, "h:2")
    );
    let pmi = Launch::resolve_with(
        Some(1),
        None,
        Some("h:1".into()),
        timeout,
        env(&[("PMI_RANK", "0"), ("PMI_SIZE", "2")]),
    )
    .unwrap();
    assert_eq!(
        (pmi.rank, pmi.size),
        (NodeRank(1), 2),
        "flags win over the environment"
    );
    let err = Launch::resolve_with(Some(4), Some(4), Some("h:1".into()), timeout, env(&[]))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("rank 4 is out of range for a job of 4 nodes"),
        "{err}"
    );
    let err = Launch::resolve_with(None, Some(4), Some("h:1".into()), timeout, env(&[]))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("no rank") && err.contains("SLURM_PROCID"),
        "{err}"
    );
    let err = Launch::resolve_with(Some(0), Some(2), None, timeout, env(&[]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("--coordinator"), "{err}");
    let err = Launch::resolve_with(
        None,
        None,
        Some("h:1".into()),
        timeout,
        env(&[("SLURM_PROCID", "x"), ("SLURM_NTASKS", "2")]),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("SLURM_PROCID=\"x\""), "{err}");
}

// ---- Multi-process tests: this binary re-executed as node processes. ----

const SCENARIO: &str = "QUIVER_TEST_SCENARIO";
const OUT_DIR: &str = "QUIVER_TEST_DIR";

fn node_command(scenario: &str, dir: &Path) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "tcp::node_process",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(SCENARIO, scenario)
    .env(OUT_DIR, dir)
    .stdout(std::process::Stdio::null());
    cmd
}

/// Body of a node process (run by the tests below, not on its own).
#[test]
#[ignore = "entry point of node processes spawned by the multi-process tests"]
fn node_process() {
    let scenario = std::env::var(SCENARIO).expect("spawned by a test");
    let dir = PathBuf::from(std::env::var(OUT_DIR).expect("spawned by a test"));
    let timeout =
        Duration::from_millis(std::env::var("QUIVER_TIMEOUT_MS").unwrap().parse().unwrap());
    if scenario == "driver" {
        // A driver of its own job, killed by the test: its nodes must die with it.
        let job = LocalJob::spawn(3, timeout, |_| node_command("forever", &dir)).unwrap();
        let pids: Vec<String> = job.pids().iter().map(ToString::to_string).collect();
        // Written whole, then renamed: the test reads it once it exists.
        std::fs::write(dir.join("pids.partial"), pids.join(" ")).unwrap();
        std::fs::rename(dir.join("pids.partial"), dir.join("pids")).unwrap();
        std::thread::sleep(Duration::from_secs(600));
        return;
    }
    let launch = Launch::resolve(None, None, None, timeout).unwrap();
    let rank = launch.rank;
    let node = tcp::join(&launch).unwrap();
    match scenario.as_str() {
        "conformance" => {
            let outcomes = conformance::run(&node).unwrap();
            assert!(
                failures(&outcomes).is_empty(),
                "node {rank}: {:?}",
                failures(&outcomes)
            );
            node.report(&format!("{rank}:{}", outcomes.len())).unwrap();
            node.barrier().unwrap();
        }
        "killed" => {
            // Node 2 is killed by the test while the others READ its memory.
            let region = node.register(64).unwrap();
            let remotes = node.exchange(&region).unwrap();
            node.barrier().unwrap();
            std::fs::write(dir.join(format!("ready-{rank}")), "").unwrap();
            if rank == NodeRank(2) {
                std::thread::sleep(Duration::from_secs(600));
            }
            let mut queue = node.queue();
            let err = loop {
                if let Err(err) = queue.read(remotes[2], 0, 64) {
                    break err;
                }
            };
            let barrier = node.barrier().unwrap_err();
            // The job stays failed, and says by whom, for every later collective.
            let again = node.barrier().unwrap_err();
            assert!(again.to_string().contains("node 2 failed"), "{again}");
            std::fs::write(
                dir.join(format!("error-{rank}")),
                format!(
                    "{err}: {}\n{barrier}",
                    std::error::Error::source(&err).unwrap()
                ),
            )
            .unwrap();
            std::process::exit(7);
        }
        "forever" => {
            node.barrier().unwrap();
            std::thread::sleep(Duration::from_secs(600));
        }
        other => panic!("unknown scenario {other}"),
    }
}

#[test]
fn conformance_in_processes() {
    for size in [2, 4] {
        let tmp = scratch("conformance");
        let dir = tmp.path();
        let job = LocalJob::spawn(size, Duration::from_secs(60), |_| {
            node_command("conformance", dir)
        })
        .unwrap();
        let reports = job.wait().unwrap();
        let want: Vec<Option<String>> = (0..size)
            .map(|rank| Some(format!("{rank}:{}", conformance::CHECKS.len())))
            .collect();
        assert_eq!(reports, want);
    }
}

/// A node killed mid-run: every other node's READ fails with PeerLost and
/// its next barrier names the node, promptly; the job fails naming it.
#[test]
fn a_killed_node_fails_the_job() {
    let tmp = scratch("killed");
    let dir = tmp.path();
    let timeout = Duration::from_secs(20);
    let job = LocalJob::spawn(4, timeout, |_| node_command("killed", dir)).unwrap();
    for rank in 0..4 {
        wait_for(&dir.join(format!("ready-{rank}")), timeout);
    }
    let victim = job.pids()[2];
    let started = Instant::now();
    Command::new("kill")
        .args(["-9", &victim.to_string()])
        .status()
        .unwrap();
    let err = job.wait().unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "failure took {:?}",
        started.elapsed()
    );
    assert!(
        matches!(
            err,
            Error::NodeFailed {
                node: NodeRank(2),
                ..
            }
        ),
        "{err}"
    );
    for rank in [0, 1, 3] {
        let seen = std::fs::read_to_string(dir.join(format!("error-{rank}"))).unwrap();
        assert!(seen.contains("node 2 is lost"), "node {rank} saw: {seen}");
        assert!(seen.contains("node 2 failed"), "node {rank} saw: {seen}");
    }
}

fn alive(pid: &str) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z')
    })
}

/// Killing a driver takes its node processes with it.
#[test]
fn nodes_die_with_their_driver() {
    let tmp = scratch("driver");
    let dir = tmp.path();
    let mut driver = node_command("driver", dir)
        .env("QUIVER_TIMEOUT_MS", "20000")
        .spawn()
        .unwrap();
    wait_for(&dir.join("pids"), Duration::from_secs(20));
    let pids = std::fs::read_to_string(dir.join("pids")).unwrap();
    let pids: Vec<&str> = pids.split_whitespace().collect();
    assert_eq!(pids.len(), 3);
    assert!(pids.iter().all(|pid| alive(pid)));
    driver.kill().unwrap();
    driver.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while pids.iter().any(|pid| alive(pid)) {
        assert!(
            Instant::now() < deadline,
            "nodes {pids:?} outlived their driver"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
