//! Local jobs: node processes that a driver spawns on this machine around
//! a coordinator of its own, and that die with it.

use std::process::{Child, Command};
use std::time::{Duration, Instant};

use super::{env, rank_u32, Coordinator};
use crate::error::{Error, Result};
use crate::NodeRank;

/// Nodes spawned on this machine by a driver, with the coordinator it runs.
/// Dropping the job kills any node still running; nodes also die with the
/// driver process (they are spawned with a parent-death signal).
#[derive(Debug)]
pub struct LocalJob {
    coordinator: Option<Coordinator>,
    children: Vec<Child>,
    timeout: Duration,
}

impl LocalJob {
    /// Starts a coordinator on 127.0.0.1 and `size` node processes, each
    /// built by `command(rank)` and given its rank, the size and the
    /// coordinator address through the variables of [`self::env`].
    ///
    /// # Errors
    /// [`Error::Io`] if a process cannot be started.
    pub fn spawn(
        size: u32,
        timeout: Duration,
        mut command: impl FnMut(NodeRank) -> Command,
    ) -> Result<LocalJob> {
        let coordinator = Coordinator::start("127.0.0.1:0", size, timeout)?;
        let mut job = LocalJob {
            coordinator: None,
            children: Vec::new(),
            timeout,
        };
        for rank in 0..size {
            let mut cmd = command(NodeRank(rank));
            cmd.env(env::RANK, rank.to_string())
                .env(env::SIZE, size.to_string())
                .env(env::COORDINATOR, coordinator.addr().to_string())
                .env(env::SPAWNED, "1")
                .env(env::TIMEOUT_MS, timeout.as_millis().to_string());
            die_with_parent(&mut cmd);
            let child = cmd.spawn().map_err(|source| Error::Io {
                what: format!("starting node {rank}: {cmd:?}"),
                source,
            })?;
            job.children.push(child);
        }
        job.coordinator = Some(coordinator);
        Ok(job)
    }

    /// The nodes' process ids, by rank.
    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().map(Child::id).collect()
    }

    /// Waits for the job: every node's report by rank, once all said
    /// goodbye and exited successfully.
    ///
    /// # Errors
    /// The coordinator's error naming the failed node, or a node that
    /// exited unsuccessfully.
    pub fn wait(mut self) -> Result<Vec<Option<String>>> {
        let coordinator = self.coordinator.take().expect("spawn sets the coordinator");
        let outcome = coordinator.finish();
        // Whatever happened, every node gets a bounded time to exit.
        let deadline = Instant::now()
            + if outcome.is_ok() {
                self.timeout
            } else {
                Duration::from_secs(5)
            };
        let mut statuses = Vec::new();
        for (rank, child) in self.children.iter_mut().enumerate() {
            let status = loop {
                match child.try_wait() {
                    Ok(Some(status)) => break Some(status),
                    Ok(None) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(10))
                    }
                    _ => {
                        let _ = child.kill();
                        let _ = child.wait();
                        break None;
                    }
                }
            };
            statuses.push((rank, status));
        }
        let reports = outcome?;
        for (rank, status) in statuses {
            match status {
                Some(status) if status.success() => {}
                Some(status) => {
                    return Err(Error::NodeFailed {
                        node: NodeRank(rank_u32(rank)),
                        reason: format!("it exited with {status}"),
                    })
                }
                None => {
                    return Err(Error::NodeFailed {
                        node: NodeRank(rank_u32(rank)),
                        reason: format!(
                            "it did not exit within {:?} of the job's end and was killed",
                            self.timeout
                        ),
                    })
                }
            }
        }
        Ok(reports)
    }
}

impl Drop for LocalJob {
    fn drop(&mut self) {
        for child in &mut self.children {
            if let Ok(None) = child.try_wait() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// Makes the child receive SIGKILL when its parent dies, so nodes never
/// outlive their driver even if it is killed. Linux sends the signal when
/// the *thread* that spawned the child exits, so [`LocalJob::spawn`] (and
/// any other caller) must spawn from a thread that outlives the child (the
/// driver's main thread).
pub fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id();
    // SAFETY: the closure runs in the forked child before exec and only
    // calls async-signal-safe functions (prctl, getppid, _exit), touching no
    // locks or allocations.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died between fork and prctl.
            if u32::try_from(libc::getppid()).ok() != Some(parent) {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}
