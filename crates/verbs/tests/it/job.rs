//! The job runner: one task on three nodes formed each of the three ways
//! (loopback threads, processes spawned by re-executing this test binary,
//! members given their rank), and the failures it must name.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use quiver_verbs::job::{self, Entry, Fabric, Job, Nodes, Program, Task};

use crate::{scratch, wait_for};
use quiver_verbs::{Error, Node, NodeRank, Reduce};
use serde::{Deserialize, Serialize};

/// What a probe node does besides reporting.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Probe {
    /// Where nodes leave `ready-<rank>` files holding their process id.
    dir: Option<PathBuf>,
    /// This node stays in its task until it is killed.
    park: Option<u32>,
    /// This node's task fails.
    fail: Option<u32>,
}

#[derive(Debug, PartialEq, Eq, Serialize, Deserialize)]
struct ProbeReport {
    rank: u32,
    size: u32,
    fabric: String,
    /// What this node read from the next node's region.
    neighbour: u64,
    /// The sum of every node's rank + 1.
    sum: u64,
}

#[derive(Debug, thiserror::Error)]
enum ProbeError {
    #[error("node {0} was told to fail")]
    Told(NodeRank),
    #[error(transparent)]
    Verbs(#[from] Error),
}

impl Task for Probe {
    const NAME: &'static str = "probe";
    type Config = Probe;
    type Report = ProbeReport;
    type Error = ProbeError;

    fn run(node: &Node, config: &Probe) -> Result<ProbeReport, ProbeError> {
        let rank = node.rank();
        if config.fail == Some(rank.0) {
            return Err(ProbeError::Told(rank));
        }
        let region = node.register(8)?;
        region.write(0, &u64::from(rank.0 + 100).to_le_bytes());
        let remotes = node.exchange(&region)?;
        if let Some(dir) = &config.dir {
            // Written whole, then renamed: a reader never sees a part of
            // the process id (and kills nothing else).
            let ready = dir.join(format!("ready-{rank}"));
            let partial = dir.join(format!("ready-{rank}.partial"));
            std::fs::write(&partial, std::process::id().to_string()).expect("writing a ready file");
            std::fs::rename(&partial, &ready).expect("publishing a ready file");
        }
        node.barrier()?;
        if config.park == Some(rank.0) {
            std::thread::sleep(Duration::from_secs(600));
        }
        let next = remotes[(rank.index() + 1) % remotes.len()];
        let word = node.queue().read(next, 0, 8)?;
        let sum = node.all_reduce(u64::from(rank.0) + 1, Reduce::Sum)?;
        Ok(ProbeReport {
            rank: rank.0,
            size: node.size(),
            fabric: node.fabric().to_owned(),
            neighbour: u64::from_le_bytes(word.try_into().expect("a READ of 8 bytes")),
            sum,
        })
    }
}

const TASKS: &[Entry] = &[Entry::of::<Probe>()];

/// Body of the spawned node processes (run by the tests below, not on its own).
#[test]
#[ignore = "entry point of node processes spawned by the job tests"]
fn node_entry() {
    if let Err(err) = job::serve(TASKS) {
        // A node that fails exits as a driver's would, without a panic.
        eprintln!("node failed: {}", quiver_run::chain(&err));
        std::process::exit(1);
    }
}

fn this_test_binary() -> Program {
    Program::this_executable([
        "--exact",
        "job::node_entry",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .unwrap()
}

fn assert_three_reports(reports: &[ProbeReport], fabric: &str) {
    assert_eq!(reports.len(), 3);
    for (rank, report) in (0..).zip(reports) {
        assert_eq!(
            *report,
            ProbeReport {
                rank,
                size: 3,
                fabric: fabric.to_owned(),
                neighbour: u64::from((rank + 1) % 3 + 100),
                sum: 6,
            }
        );
    }
}

#[test]
fn three_loopback_threads_report() {
    let job = Job::new(Fabric::Loopback { cost: None }, Nodes::Local(3));
    let reports = job.run::<Probe>(&Probe::default()).unwrap().unwrap();
    assert_three_reports(&reports, "loopback");
}

#[test]
fn three_spawned_processes_report() {
    let job = Job {
        program: Some(this_test_binary()),
        ..Job::new(Fabric::Tcp, Nodes::Local(3))
    };
    let reports = job.run::<Probe>(&Probe::default()).unwrap().unwrap();
    assert_three_reports(&reports, "tcp");
}

/// A free port on 127.0.0.1 for a coordinator (free when asked; the
/// coordinator binds it moments later).
fn free_address() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

/// Runs `members` of a three-node tcp job, as threads with explicit ranks.
/// The coordinator's port, free when [`free_address`] asked, can be taken
/// before rank 0 binds it (by any socket of any test running meanwhile):
/// the job is then run again on another port, a few times at most.
fn members(
    members: &[u32],
    timeout: Duration,
    config: &Probe,
) -> Vec<Result<Option<Vec<ProbeReport>>, Error>> {
    let port_taken = |result: &Result<_, Error>| matches!(result, Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::AddrInUse);
    let mut tries = 0;
    loop {
        let results = members_at(&free_address(), members, timeout, config);
        tries += 1;
        if tries == 5 || !results.iter().any(port_taken) {
            return results;
        }
    }
}

/// [`members`] with the coordinator at `coordinator`.
fn members_at(
    coordinator: &str,
    members: &[u32],
    timeout: Duration,
    config: &Probe,
) -> Vec<Result<Option<Vec<ProbeReport>>, Error>> {
    std::thread::scope(|scope| {
        let handles: Vec<_> = members
            .iter()
            .map(|&rank| {
                let job = Job {
                    timeout,
                    ..Job::new(
                        Fabric::Tcp,
                        Nodes::Member {
                            rank: Some(rank),
                            size: Some(3),
                            coordinator: Some(coordinator.to_owned()),
                        },
                    )
                };
                scope.spawn(move || job.run::<Probe>(config))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn three_members_report_at_rank_0() {
    let mut results = members(&[0, 1, 2], Duration::from_secs(30), &Probe::default());
    let rank_0 = results.remove(0).unwrap().expect("rank 0 has the reports");
    assert_three_reports(&rank_0, "tcp");
    for other in results {
        assert!(other.unwrap().is_none(), "only rank 0 has the reports");
    }
}

#[test]
fn a_member_that_never_arrives_is_named() {
    let started = Instant::now();
    for result in members(&[0, 1], Duration::from_millis(500), &Probe::default()) {
        match result {
            Err(Error::NodeFailed { node, reason }) => {
                assert_eq!(node, NodeRank(2));
                assert!(reason.contains("never joined"), "{reason}");
            }
            other => panic!("expected node 2 to be named, got {other:?}"),
        }
    }
    assert!(started.elapsed() < Duration::from_secs(10));
}

/// A task's error names its node, and is the one the job returns, not the
/// other nodes' failures to meet it.
#[test]
fn a_failing_task_is_named() {
    let job = Job {
        timeout: Duration::from_secs(5),
        ..Job::new(Fabric::Loopback { cost: None }, Nodes::Local(3))
    };
    let config = Probe {
        fail: Some(1),
        ..Probe::default()
    };
    let err = job.run::<Probe>(&config).unwrap_err();
    let Error::Task { node, source } = &err else {
        panic!("expected the task's error, got {err}");
    };
    assert_eq!(*node, NodeRank(1));
    assert!(
        matches!(
            source.downcast_ref::<ProbeError>(),
            Some(ProbeError::Told(NodeRank(1)))
        ),
        "{source}"
    );
    assert_eq!(err.to_string(), "the task failed on node 1");
}

/// A spawned node killed in its task fails the job, naming it, promptly.
#[test]
fn a_killed_node_is_named() {
    let tmp = scratch("job-killed");
    let dir = tmp.path().to_path_buf();
    let job = Job {
        timeout: Duration::from_secs(20),
        program: Some(this_test_binary()),
        ..Job::new(Fabric::Tcp, Nodes::Local(3))
    };
    let config = Probe {
        dir: Some(dir.clone()),
        park: Some(2),
        ..Probe::default()
    };
    let killer = std::thread::spawn(move || {
        let ready = dir.join("ready-2");
        wait_for(&ready, Duration::from_secs(20));
        let pid = std::fs::read_to_string(ready).unwrap();
        let killed = Command::new("kill").args(["-9", &pid]).status().unwrap();
        assert!(killed.success(), "kill -9 {pid} failed");
        Instant::now()
    });
    let err = job.run::<Probe>(&config).unwrap_err();
    let killed_at = killer.join().unwrap();
    assert!(
        killed_at.elapsed() < Duration::from_secs(10),
        "the failure took {:?}",
        killed_at.elapsed()
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
}

#[test]
fn jobs_a_fabric_cannot_form_are_refused() {
    let refused = |fabric, nodes, says: &str| {
        let err = Job::new(fabric, nodes).run::<Probe>(&Probe::default());
        match err {
            Err(Error::InvalidArgument(invalid)) => {
                assert!(invalid.to_string().contains(says), "{invalid}")
            }
            other => panic!("expected {says:?}, got {other:?}"),
        }
    };
    refused(Fabric::Mpi, Nodes::Local(2), "MPI launcher");
    refused(Fabric::Ibverbs, Nodes::Local(2), "one per RDMA host");
    refused(Fabric::Tcp, Nodes::Local(2), "program");
    refused(
        Fabric::Loopback { cost: None },
        Nodes::Local(0),
        "at least one node",
    );
    refused(
        Fabric::Loopback { cost: None },
        Nodes::Member {
            rank: Some(0),
            size: Some(1),
            coordinator: None,
        },
        "always local",
    );
}
