//! The mpi fabric: this test binary re-executed by `mpirun`, one process
//! per rank, each running the conformance suite.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use quiver_verbs::{conformance, Error, VerbError};

/// What the entry point prints before each outcome, for the driver to find.
const PREFIX: &str = "mpi-conformance";

/// The entry point's own check, after the suite.
const RELEASED: &str = "released";

/// How long one `mpirun` job may take before it is stopped.
const JOB_LIMIT: Duration = Duration::from_secs(300);

// Entry point run by mpirun (one process per rank), not by itself: it needs
// an MPI launcher around it.
#[test]
#[ignore = "entry point run by mpirun, not by itself"]
fn mpirun_entry() {
    let node = quiver_verbs::mpi::join(Duration::from_secs(60)).expect("joining the MPI job");
    let rank = node.rank();
    let outcomes = conformance::run(&node).unwrap_or_else(|err| panic!("node {rank}: {err}"));
    for outcome in &outcomes {
        println!("{PREFIX} node={rank} {outcome}");
    }
    let failed: Vec<String> = outcomes
        .iter()
        .filter(|outcome| !outcome.passed)
        .map(ToString::to_string)
        .collect();
    assert!(failed.is_empty(), "node {rank}:\n{}", failed.join("\n"));

    // What only this fabric has to arrange: a region dropped by every node
    // is freed at the next collective, and its key is unknown from then on.
    let region = node.register(64).unwrap();
    let remotes = node.exchange(&region).unwrap();
    let peer = remotes[(rank.index() + 1) % remotes.len()];
    drop(region);
    node.barrier().unwrap();
    let err = node.queue().read(peer, 0, 8).unwrap_err();
    assert!(
        matches!(
            err,
            Error::Completion {
                source: VerbError::UnknownKey { .. },
                ..
            }
        ),
        "node {rank}: a READ of a freed region failed with {err}"
    );
    println!("{PREFIX} node={rank} {RELEASED:<12} ok");
    node.barrier().unwrap();
}

fn on_path(program: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(program))
        .find(|path| path.is_file())
}

/// Runs [`mpirun_entry`] on `ranks` processes; returns whether the job
/// succeeded, and its stdout and stderr.
fn run_job(mpirun: &Path, ranks: u32) -> (bool, String, String) {
    let mut child = Command::new(mpirun)
        .args([
            "-n",
            &ranks.to_string(),
            "--oversubscribe",
            "--allow-run-as-root",
        ])
        .arg(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "mpi::mpirun_entry",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out = std::thread::spawn(move || {
        let mut text = String::new();
        stdout.read_to_string(&mut text).unwrap();
        text
    });
    let err = std::thread::spawn(move || {
        let mut text = String::new();
        stderr.read_to_string(&mut text).unwrap();
        text
    });
    let deadline = Instant::now() + JOB_LIMIT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() >= deadline {
            // SIGTERM lets mpirun take its ranks down with it.
            Command::new("kill")
                .arg(child.id().to_string())
                .status()
                .unwrap();
            child.wait().unwrap();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    match status {
        Some(status) => (status.success(), out, err),
        None => (false, out, format!("{err}\n(stopped after {JOB_LIMIT:?})")),
    }
}

#[test]
fn conformance_under_mpirun() {
    let Some(mpirun) = on_path("mpirun") else {
        eprintln!("skipping the mpi fabric's conformance: mpirun is not on PATH");
        return;
    };
    for ranks in [2, 3] {
        let started = Instant::now();
        let (ok, out, err) = run_job(&mpirun, ranks);
        assert!(
            ok,
            "mpirun -n {ranks} failed\nstdout:\n{out}\nstderr:\n{err}"
        );
        let passed: BTreeSet<(u32, &str)> = out
            .lines()
            .filter_map(|line| {
                // libtest's "test ... " may precede the first line.
                let at = line.find(PREFIX)?;
                let mut words = line[at + PREFIX.len()..].split_whitespace();
                let rank = words.next()?.strip_prefix("node=")?.parse().ok()?;
                let check = words.next()?;
                (words.next() == Some("ok")).then_some((rank, check))
            })
            .collect();
        for rank in 0..ranks {
            for check in conformance::CHECKS
                .map(|(check, _)| check)
                .into_iter()
                .chain([RELEASED])
            {
                assert!(
                    passed.contains(&(rank, check)),
                    "mpirun -n {ranks}: node {rank} did not report {check} ok\nstdout:\n{out}\nstderr:\n{err}"
                );
            }
        }
        eprintln!(
            "mpi conformance on {ranks} ranks took {:?}",
            started.elapsed()
        );
    }
}

/// Without a launcher around it, `join` says so instead of letting MPI
/// kill the process.
#[test]
fn join_outside_mpirun_is_unavailable() {
    if ["OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"]
        .iter()
        .any(|var| std::env::var_os(var).is_some())
    {
        eprintln!("skipping: this test process runs under an MPI launcher");
        return;
    }
    let err = quiver_verbs::mpi::join(Duration::from_secs(1)).unwrap_err();
    assert!(
        matches!(err, quiver_verbs::Error::Unavailable { fabric: "mpi", .. }),
        "{err}"
    );
    assert!(err.to_string().contains("mpirun"), "{err}");
}
