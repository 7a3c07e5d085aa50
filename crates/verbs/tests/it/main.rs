//! quiver-verbs integration tests: the conformance suite per fabric, what
//! only some fabrics can show (torn reads, the cost model, processes), and
//! the job runner in each of its three ways of forming a job.

#[cfg(feature = "rdma")]
mod ibverbs;
mod job;
mod loopback;
#[cfg(feature = "mpi")]
mod mpi;
mod tcp;

use std::path::Path;
use std::time::{Duration, Instant};

/// A fresh scratch directory for a test's node processes, removed when
/// dropped (`name` says whose it is).
fn scratch(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("quiver-verbs-{name}-"))
        .tempdir()
        .unwrap()
}

/// Waits until `path` exists (a node's sign of life), failing after `limit`.
fn wait_for(path: &Path, limit: Duration) {
    let deadline = Instant::now() + limit;
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} did not appear",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}
