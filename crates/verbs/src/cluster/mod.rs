//! Cluster bootstrap: who this node is ([`Launch`]), the rendezvous and
//! collectives hub ([`Coordinator`]), a node's line to it ([`Control`]), and
//! local jobs spawned by a driver ([`LocalJob`]).
//!
//! A job of N nodes has one coordinator: the driver when it spawns the nodes
//! itself on this machine, otherwise rank 0 (under `srun` or `mpirun`, or
//! with explicit `--rank/--size`), listening at the coordinator address.
//! Every node connects to it, says hello (rank, size, data address), and is
//! welcomed with every node's data address once all have arrived. The
//! coordinator then serves all-gathers (barriers and all-reduces are built
//! on them) and watches its connections: a node that exits or crashes
//! without saying goodbye, never arrives, or does not reach a collective in
//! time is reported to every other node as failed, by rank, and the job
//! fails instead of hanging.

mod control;
mod coordinator;
#[allow(unsafe_code)] // the spawned nodes' parent-death signal, argued at the block
mod local;

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use self::control::{Control, Membership};
pub use self::coordinator::Coordinator;
pub use self::local::{die_with_parent, LocalJob};
use crate::error::{Error, Result};
use crate::NodeRank;

/// Environment variables a driver sets for the nodes it spawns (and that a
/// user may set by hand).
pub mod env {
    /// This node's rank.
    pub const RANK: &str = "QUIVER_RANK";
    /// Number of nodes.
    pub const SIZE: &str = "QUIVER_SIZE";
    /// The coordinator's `HOST:PORT`.
    pub const COORDINATOR: &str = "QUIVER_COORDINATOR";
    /// Set to `1` by a driver that runs the coordinator itself.
    pub const SPAWNED: &str = "QUIVER_SPAWNED";
    /// Failure-detection timeout in milliseconds.
    pub const TIMEOUT_MS: &str = "QUIVER_TIMEOUT_MS";
    /// The name of the task a spawned node runs ([`crate::job::serve`]).
    pub const TASK: &str = "QUIVER_TASK";
    /// The task's configuration, as JSON.
    pub const TASK_CONFIG: &str = "QUIVER_TASK_CONFIG";
}

/// Launcher variables read for rank and size, in order of precedence.
const RANK_VARS: [&str; 4] = [
    env::RANK,
    "SLURM_PROCID",
    "OMPI_COMM_WORLD_RANK",
    "PMI_RANK",
];
const SIZE_VARS: [&str; 4] = [
    env::SIZE,
    "SLURM_NTASKS",
    "OMPI_COMM_WORLD_SIZE",
    "PMI_SIZE",
];

/// Whether this process was started by a launcher as one node of a job:
/// one of the rank variables [`Launch::resolve`] reads is set.
pub fn launched() -> bool {
    RANK_VARS
        .iter()
        .any(|name| std::env::var_os(name).is_some())
}

/// The number of nodes a launcher's environment gives (the size variables
/// [`Launch::resolve`] reads), if one is set and a number.
pub fn launched_size() -> Option<u32> {
    launch_var(&SIZE_VARS, "size", |name| std::env::var(name).ok())
        .ok()
        .flatten()
}

/// The first of `names` that `var` has, as a number (`what` names it in
/// the error when it is not one); `None` if none is set.
fn launch_var(
    names: &[&str],
    what: &str,
    var: impl Fn(&str) -> Option<String>,
) -> Result<Option<u32>> {
    for name in names {
        if let Some(value) = var(name) {
            return value
                .trim()
                .parse()
                .map(Some)
                .map_err(|_| Error::Bootstrap(format!("{name}={value:?} is not a valid {what}")));
        }
    }
    Ok(None)
}

/// Who this node is in which job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    /// This node's rank.
    pub rank: NodeRank,
    /// Number of nodes.
    pub size: u32,
    /// The coordinator's address, `HOST:PORT`.
    pub coordinator: String,
    /// Whether this node runs the coordinator (rank 0, unless a driver does).
    pub hosts_coordinator: bool,
    /// Failure detection: how long to wait for a node before declaring it failed.
    pub timeout: Duration,
}

impl Launch {
    /// Resolves rank, size and coordinator from explicit values (flags),
    /// else from the environment: ours (`QUIVER_RANK`, `QUIVER_SIZE`,
    /// `QUIVER_COORDINATOR`), then Slurm (`SLURM_PROCID`, `SLURM_NTASKS`),
    /// Open MPI (`OMPI_COMM_WORLD_RANK/SIZE`) and PMI (`PMI_RANK/PMI_SIZE`).
    ///
    /// # Errors
    /// [`Error::Bootstrap`] naming what is missing or inconsistent.
    pub fn resolve(
        rank: Option<u32>,
        size: Option<u32>,
        coordinator: Option<String>,
        timeout: Duration,
    ) -> Result<Launch> {
        Self::resolve_with(rank, size, coordinator, timeout, |name| {
            std::env::var(name).ok()
        })
    }

    /// As [`Launch::resolve`], reading variables through `var` (for tests).
    ///
    /// # Errors
    /// As [`Launch::resolve`].
    pub fn resolve_with(
        rank: Option<u32>,
        size: Option<u32>,
        coordinator: Option<String>,
        timeout: Duration,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Launch> {
        let from_env = |names: &[&str], what: &str| launch_var(names, what, &var);
        let rank = match rank {
            Some(rank) => rank,
            None => from_env(&RANK_VARS, "rank")?.ok_or_else(|| {
                Error::Bootstrap(format!(
                    "no rank: pass --rank or run under a launcher that sets one of {}",
                    RANK_VARS.join(", ")
                ))
            })?,
        };
        let size = match size {
            Some(size) => size,
            None => from_env(&SIZE_VARS, "size")?.ok_or_else(|| {
                Error::Bootstrap(format!(
                    "no job size: pass --size or run under a launcher that sets one of {}",
                    SIZE_VARS.join(", ")
                ))
            })?,
        };
        if size == 0 {
            return Err(Error::Bootstrap(
                "a job needs at least one node (size 0)".into(),
            ));
        }
        if rank >= size {
            return Err(Error::Bootstrap(format!(
                "rank {rank} is out of range for a job of {size} nodes"
            )));
        }
        let coordinator = coordinator
            .or_else(|| var(env::COORDINATOR))
            .ok_or_else(|| {
                Error::Bootstrap(format!(
                    "no coordinator address: pass --coordinator HOST:PORT or set {} \
                 (rank 0 listens there; every node must be able to reach it)",
                    env::COORDINATOR
                ))
            })?;
        let spawned = var(env::SPAWNED).is_some_and(|v| v == "1");
        Ok(Launch {
            rank: NodeRank(rank),
            size,
            coordinator,
            hosts_coordinator: rank == 0 && !spawned,
            timeout,
        })
    }
}

fn resolve_addr(addr: &str) -> Result<SocketAddr> {
    addr.to_socket_addrs()
        .map_err(|err| Error::Bootstrap(format!("invalid coordinator address {addr:?}: {err}")))?
        .next()
        .ok_or_else(|| {
            Error::Bootstrap(format!("coordinator address {addr:?} resolves to nothing"))
        })
}

/// What a node tells the coordinator.
#[derive(Debug, Serialize, Deserialize)]
enum ToCoordinator {
    Hello {
        rank: u32,
        size: u32,
        data_addr: String,
        pid: u32,
    },
    Gather {
        data: Vec<u8>,
    },
    Report {
        report: String,
    },
    Bye,
}

/// What the coordinator tells a node.
#[derive(Debug, Serialize, Deserialize)]
enum ToNode {
    Welcome { peers: Vec<String> },
    Gathered { data: Vec<Vec<u8>> },
    Failed { node: u32, reason: String },
    Rejected { reason: String },
}

fn send_line<T: Serialize>(stream: &mut TcpStream, message: &T) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(message).expect("control messages always serialize");
    line.push(b'\n');
    stream.write_all(&line)
}

fn read_line<T: for<'de> Deserialize<'de>>(
    reader: &mut BufReader<TcpStream>,
) -> std::io::Result<Option<T>> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    serde_json::from_str(&line).map(Some).map_err(|err| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("unreadable control message: {err}"),
        )
    })
}

fn rank_u32(rank: usize) -> u32 {
    u32::try_from(rank).expect("ranks fit u32")
}
