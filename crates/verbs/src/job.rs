//! Jobs: one SPMD [`Task`] run on every node of a job, however the job is
//! formed, with every node's report collected at rank 0. A distributed
//! engine describes its job ([`Job`]) and its task, and never handles a
//! process, a launcher variable or a coordinator itself.
//!
//! A job is formed in one of three ways:
//! - [`Nodes::Local`] on the loopback fabric: the nodes are threads of this
//!   process.
//! - [`Nodes::Local`] on the tcp fabric: the job spawns the nodes as
//!   processes on 127.0.0.1 by running its [`Program`] (a driver
//!   re-executing itself through a hidden entry point that calls [`serve`]),
//!   and runs their coordinator in this process. The task travels by name
//!   and its configuration as JSON, so any task that the program registers
//!   ([`Entry`]) can be spawned.
//! - [`Nodes::Member`]: this process is one node of a job started by a
//!   launcher (`srun`, `mpirun`) or by hand with rank, size and the
//!   coordinator's address (rank 0 hosts the coordinator).
//!
//! Every node's report reaches rank 0 as JSON: [`Job::run`] returns them all,
//! in rank order, where rank 0's results are (this process for a local
//! job, rank 0 for a member), and `None` on the other members. After its
//! task, a node waits for every other node before leaving the job, so no
//! node's memory goes away while a peer may still use it.
//!
//! Failures are named: a node that dies, never arrives or leaves early
//! fails the job with [`Error::NodeFailed`] naming it (the coordinator's and
//! the fabrics' own detection, within the job's timeout); a task that
//! returns an error fails it with [`Error::Task`] naming its node. A node
//! whose task fails leaves the job at once, so the others see it leave
//! instead of waiting for it. In a job with a coordinator (tcp, ibverbs)
//! the survivors of a node that dies are told at once (their collectives
//! fail, and on tcp their operations on it) and the job's result comes
//! when they have left, so a node serving requests keeps serving what
//! does not need the dead one until its task ends.

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::cluster::{env, Launch, LocalJob};
use crate::error::{BoxError, Error, Result};
use crate::{loopback, tcp, CostModel, Node, NodeRank};

/// What every node of a job runs. `NAME` is how a spawned node finds the
/// task in its program's registry ([`Entry::of`]), so it is unique in that
/// program.
pub trait Task {
    /// The task's name, unique among the tasks a program registers.
    const NAME: &'static str;
    /// What the task is told; every node gets the same.
    type Config: Serialize + DeserializeOwned + Sync;
    /// What one node reports; collected at rank 0.
    type Report: Serialize + DeserializeOwned + Send;
    /// The task's own error.
    type Error: Into<BoxError>;

    /// Runs the task on one node. Every node of the job calls it (SPMD).
    ///
    /// # Errors
    /// The task's own; the job fails with [`Error::Task`] naming the node.
    fn run(node: &Node, config: &Self::Config) -> std::result::Result<Self::Report, Self::Error>;
}

/// The fabric a job's nodes speak.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum Fabric {
    /// Threads of this process; remote memory is shared memory.
    Loopback {
        /// Model network time on a per-node virtual clock (`None`: no clock).
        cost: Option<CostModel>,
    },
    /// One process per node over TCP.
    Tcp,
    /// The ranks of an MPI job (feature `mpi`).
    Mpi,
    /// RDMA RC queue pairs, one node per RDMA host (feature `rdma`).
    Ibverbs,
}

impl Fabric {
    /// The fabric's name, as [`Node::fabric`] gives it.
    pub fn name(self) -> &'static str {
        match self {
            Fabric::Loopback { .. } => "loopback",
            Fabric::Tcp => "tcp",
            Fabric::Mpi => "mpi",
            Fabric::Ibverbs => "ibverbs",
        }
    }
}

/// Which nodes form the job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Nodes {
    /// This many nodes on this machine: threads of this process on the
    /// loopback fabric, processes on 127.0.0.1 spawned by the job on tcp.
    Local(u32),
    /// This process is one node of a job formed elsewhere. Rank, size and
    /// the coordinator's `HOST:PORT` are taken from here when given, else
    /// from the launcher's environment ([`Launch::resolve`]); the mpi fabric
    /// takes rank and size from MPI itself.
    Member {
        /// This node's rank.
        rank: Option<u32>,
        /// Number of nodes.
        size: Option<u32>,
        /// Where rank 0 runs the coordinator.
        coordinator: Option<String>,
    },
}

/// The program a local tcp job runs as its nodes: it must reach [`serve`]
/// with the task registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Program {
    /// The executable.
    pub path: PathBuf,
    /// Its arguments (for a driver: the name of its hidden node entry).
    pub args: Vec<OsString>,
}

impl Program {
    /// The running executable with `args`: how a driver re-executes itself.
    ///
    /// # Errors
    /// [`Error::Io`] if the executable cannot be found.
    pub fn this_executable(args: impl IntoIterator<Item = impl Into<OsString>>) -> Result<Self> {
        Ok(Self {
            path: std::env::current_exe()
                .map_err(|e| Error::io("finding this program's executable", e))?,
            args: args.into_iter().map(Into::into).collect(),
        })
    }
}

/// A job: its fabric, its nodes, and how long to wait for a node before
/// declaring it failed.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// The fabric.
    pub fabric: Fabric,
    /// Which nodes form the job.
    pub nodes: Nodes,
    /// Failure detection: how long collectives and blocking calls wait.
    pub timeout: Duration,
    /// What spawned nodes run; needed only by a local tcp job.
    pub program: Option<Program>,
}

impl Job {
    /// A job of `nodes` on `fabric`, with a 60 s timeout and no program.
    pub fn new(fabric: Fabric, nodes: Nodes) -> Self {
        Self {
            fabric,
            nodes,
            timeout: Duration::from_secs(60),
            program: None,
        }
    }

    /// Checks that the fabric can form the nodes this way.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the parameter that does not fit.
    pub fn validate(&self) -> Result<()> {
        let invalid =
            |parameter: &'static str, reason: &str| Err(Error::invalid(parameter, reason));
        match (&self.nodes, self.fabric) {
            (Nodes::Local(0), _) => invalid("nodes", "a job needs at least one node"),
            (Nodes::Local(_), Fabric::Mpi) => invalid(
                "nodes",
                "the mpi fabric's nodes are started by the MPI launcher \
                 (mpirun -n N), not spawned by the job",
            ),
            (Nodes::Local(_), Fabric::Ibverbs) => invalid(
                "nodes",
                "ibverbs nodes run one per RDMA host; start them with a launcher \
                 (srun, mpirun) or give each its rank, size and coordinator",
            ),
            (Nodes::Local(_), Fabric::Tcp) if self.program.is_none() => invalid(
                "program",
                "a local tcp job spawns its nodes by running a program",
            ),
            (Nodes::Member { .. }, Fabric::Loopback { .. }) => invalid(
                "nodes",
                "loopback nodes are threads of one process, so a loopback job \
                 is always local",
            ),
            _ => Ok(()),
        }
    }

    /// Runs task `T` with `config` on every node of the job. Returns every
    /// node's report in rank order where rank 0's results are (this
    /// process for a local job, rank 0 for a member), `None` on the other
    /// members.
    ///
    /// # Errors
    /// As [`Job::validate`]; [`Error::NodeFailed`] naming a node that died,
    /// never arrived or left early; [`Error::Task`] naming the node whose
    /// task failed first; the fabric's errors in joining the job.
    pub fn run<T: Task>(&self, config: &T::Config) -> Result<Option<Vec<T::Report>>> {
        self.validate()?;
        match (&self.nodes, self.fabric) {
            (&Nodes::Local(nodes), Fabric::Loopback { cost }) => {
                self.in_threads::<T>(nodes, cost, config).map(Some)
            }
            (&Nodes::Local(nodes), Fabric::Tcp) => self.spawn::<T>(nodes, config).map(Some),
            (
                Nodes::Member {
                    rank,
                    size,
                    coordinator,
                },
                Fabric::Tcp | Fabric::Ibverbs,
            ) => {
                let launch = Launch::resolve(*rank, *size, coordinator.clone(), self.timeout)?;
                let node = if self.fabric == Fabric::Tcp {
                    tcp::join(&launch)?
                } else {
                    join_ibverbs(&launch)?
                };
                as_member::<T>(&node, config)
            }
            (Nodes::Member { .. }, Fabric::Mpi) => as_member::<T>(&join_mpi(self.timeout)?, config),
            (Nodes::Local(_), Fabric::Mpi | Fabric::Ibverbs)
            | (Nodes::Member { .. }, Fabric::Loopback { .. }) => {
                unreachable!(
                    "validate refuses {:?} on {}",
                    self.nodes,
                    self.fabric.name()
                )
            }
        }
    }

    fn in_threads<T: Task>(
        &self,
        nodes: u32,
        cost: Option<CostModel>,
        config: &T::Config,
    ) -> Result<Vec<T::Report>> {
        let failures = AtomicU64::new(0);
        let shape = loopback::Config {
            nodes,
            cost,
            timeout: self.timeout,
        };
        let outcomes = loopback::run(&shape, |node| {
            let outcome =
                run_task::<T>(&node, config).and_then(|report| node.barrier().map(|()| report));
            // Failures are numbered before this node leaves the job (when
            // `node` drops), so the first is the cause and later ones, of
            // nodes that saw it leave, its consequences.
            outcome.map_err(|err| (failures.fetch_add(1, Ordering::Relaxed), err))
        })?;
        let mut reports = Vec::with_capacity(outcomes.len());
        let mut failures = Vec::new();
        for outcome in outcomes {
            match outcome {
                Ok(report) => reports.push(report),
                Err(failure) => failures.push(failure),
            }
        }
        match failures.into_iter().min_by_key(|(order, _)| *order) {
            Some((_, err)) => Err(err),
            None => Ok(reports),
        }
    }

    fn spawn<T: Task>(&self, nodes: u32, config: &T::Config) -> Result<Vec<T::Report>> {
        let program = self.program.as_ref().expect("validate checked the program");
        let config = serde_json::to_string(config).map_err(|source| Error::Json {
            what: format!("the configuration of task {}", T::NAME),
            source,
        })?;
        let job = LocalJob::spawn(nodes, self.timeout, |_| {
            let mut cmd = Command::new(&program.path);
            cmd.args(&program.args)
                .env(env::TASK, T::NAME)
                .env(env::TASK_CONFIG, &config)
                .stdout(stdout_for_nodes());
            cmd
        })?;
        job.wait()?
            .into_iter()
            .zip((0..nodes).map(NodeRank))
            .map(|(report, node)| {
                let report = report.ok_or_else(|| Error::NodeFailed {
                    node,
                    reason: "it left the job without a report".into(),
                })?;
                from_json(node, report.as_bytes())
            })
            .collect()
    }
}

/// Runs the task on this node, naming the node if it fails.
fn run_task<T: Task>(node: &Node, config: &T::Config) -> Result<T::Report> {
    T::run(node, config).map_err(|err| Error::Task {
        node: node.rank(),
        source: err.into(),
    })
}

/// One member's part: the task, then every report to rank 0 (an all-gather,
/// which also keeps every node in the job until all are done).
fn as_member<T: Task>(node: &Node, config: &T::Config) -> Result<Option<Vec<T::Report>>> {
    let report = run_task::<T>(node, config)?;
    let all = node.all_gather(to_json(node.rank(), &report)?.as_bytes())?;
    if node.rank() != NodeRank(0) {
        return Ok(None);
    }
    all.iter()
        .zip((0..node.size()).map(NodeRank))
        .map(|(bytes, rank)| from_json(rank, bytes))
        .collect::<Result<_>>()
        .map(Some)
}

fn to_json(node: NodeRank, report: &impl Serialize) -> Result<String> {
    serde_json::to_string(report).map_err(|source| Error::Json {
        what: format!("the report of node {node}"),
        source,
    })
}

fn from_json<R: DeserializeOwned>(node: NodeRank, bytes: &[u8]) -> Result<R> {
    serde_json::from_slice(bytes).map_err(|source| Error::Json {
        what: format!("the report of node {node}"),
        source,
    })
}

/// Spawned nodes write their standard output to our standard error, so that
/// only the job's results reach standard output.
fn stdout_for_nodes() -> Stdio {
    use std::os::fd::AsFd;
    std::io::stderr()
        .as_fd()
        .try_clone_to_owned()
        .map_or_else(|_| Stdio::inherit(), Stdio::from)
}

#[cfg(feature = "mpi")]
fn join_mpi(timeout: Duration) -> Result<Node> {
    crate::mpi::join(timeout)
}

#[cfg(not(feature = "mpi"))]
fn join_mpi(_: Duration) -> Result<Node> {
    Err(Error::Unavailable {
        fabric: "mpi",
        reason: "this program was built without it; rebuild with the cargo feature `mpi` \
                 (needs libopenmpi-dev and libclang-dev)"
            .into(),
    })
}

#[cfg(feature = "rdma")]
fn join_ibverbs(launch: &Launch) -> Result<Node> {
    crate::ibverbs::join_launch(launch)
}

#[cfg(not(feature = "rdma"))]
fn join_ibverbs(_: &Launch) -> Result<Node> {
    Err(Error::Unavailable {
        fabric: "ibverbs",
        reason: "this program was built without it; rebuild with the cargo feature `rdma` \
                 (needs libibverbs-dev, librdmacm-dev and libclang-dev)"
            .into(),
    })
}

/// A task in a program's registry: what [`serve`] runs when a spawned node
/// is asked for it by name.
#[derive(Clone, Copy)]
pub struct Entry {
    name: &'static str,
    serve: fn() -> Result<()>,
}

impl Entry {
    /// The registry entry of task `T`.
    pub const fn of<T: Task>() -> Self {
        Self {
            name: T::NAME,
            serve: serve_task::<T>,
        }
    }

    /// The task's name.
    pub fn name(&self) -> &'static str {
        self.name
    }
}

impl fmt::Debug for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entry").field("name", &self.name).finish()
    }
}

/// The body of a spawned node: runs the task its job named (in
/// `QUIVER_TASK`, configured by `QUIVER_TASK_CONFIG`) from `registry` as
/// one node of that job, over tcp, and sends its report to the job. A
/// program's hidden node entry calls this and nothing else.
///
/// # Errors
/// [`Error::Bootstrap`] when the process was not spawned by a job or the
/// task is not in `registry`; otherwise as [`Job::run`] for this node.
pub fn serve(registry: &[Entry]) -> Result<()> {
    let name = spawned_var(env::TASK)?;
    let entry = registry
        .iter()
        .find(|entry| entry.name == name)
        .ok_or_else(|| {
            let names: Vec<&str> = registry.iter().map(|entry| entry.name).collect();
            Error::Bootstrap(format!(
                "this program has no task named {name:?} (it has: {})",
                names.join(", ")
            ))
        })?;
    (entry.serve)()
}

fn serve_task<T: Task>() -> Result<()> {
    let config: T::Config =
        serde_json::from_str(&spawned_var(env::TASK_CONFIG)?).map_err(|source| Error::Json {
            what: format!("the configuration of task {}", T::NAME),
            source,
        })?;
    let timeout = spawned_var(env::TIMEOUT_MS)?
        .parse()
        .map(Duration::from_millis)
        .map_err(|_| Error::Bootstrap(format!("{} is not a number", env::TIMEOUT_MS)))?;
    let node = tcp::join(&Launch::resolve(None, None, None, timeout)?)?;
    let report = run_task::<T>(&node, &config)?;
    node.report(&to_json(node.rank(), &report)?)?;
    node.barrier()
}

/// A variable that the job sets for the nodes it spawns.
fn spawned_var(name: &str) -> Result<String> {
    std::env::var(name).map_err(|_| {
        Error::Bootstrap(format!(
            "{name} is not set: this entry runs the nodes that a job spawns, not a command of its own"
        ))
    })
}
