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

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// A fresh scratch directory for this test process (`name` keeps tests apart).
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("quiver-verbs-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
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
