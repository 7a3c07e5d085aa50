//! The flags that form a distributed job ([`JobArgs`]): which fabric, how
//! many local nodes or which member of a launcher's job, the coordinator and
//! the timeout. Every distributed engine's command flattens them in, so all
//! of them are launched the same way.

use std::time::Duration;

use anyhow::{bail, Result};
use clap::{Args, ValueEnum};
use quiver_verbs::job::{Fabric, Job, Nodes, Program};
use quiver_verbs::CostModel;

use crate::report::UsageError;
use crate::units::parse_duration;

/// Nodes a job runs on this machine when neither the command nor --nodes
/// says how many: two, the fewest a distributed run needs.
pub const LOCAL_NODES: u32 = 2;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FabricArg {
    /// Nodes are threads of this process; remote memory is shared memory.
    Loopback,
    /// One process per node over TCP.
    Tcp,
    /// The ranks of an MPI job (run under mpirun/srun; needs a build with --features mpi).
    Mpi,
    /// Real RDMA RC queue pairs (needs an RDMA device and a build with --features rdma).
    Ibverbs,
}

/// How to form the job.
#[derive(Debug, Args, Clone)]
pub struct JobArgs {
    /// The fabric of a job. Naming one asks for a job: on loopback, or on tcp outside a launcher
    /// and without --rank/--size/--coordinator, the command's default number of nodes runs on
    /// this machine unless --nodes says how many. A job asked for by other flags (--nodes,
    /// --rank, --size, --coordinator, a launcher) runs on tcp. Without any job flag, `bsp`
    /// computes in this process alone, `verbs` runs 2 tcp nodes, and `kv bench`, `kv migrate`
    /// and `kv serve` run loopback nodes.
    #[arg(long, value_enum)]
    pub fabric: Option<FabricArg>,
    /// Run this many nodes on this machine: processes on 127.0.0.1 spawned by this command
    /// (loopback: threads). Omit it under srun or mpirun, or with --rank/--size, where this
    /// process is one node of the job.
    #[arg(long)]
    pub nodes: Option<u32>,
    /// This node's rank (default: from SLURM_PROCID, OMPI_COMM_WORLD_RANK or PMI_RANK).
    #[arg(long)]
    pub rank: Option<u32>,
    /// Number of nodes (default: from SLURM_NTASKS, OMPI_COMM_WORLD_SIZE or PMI_SIZE).
    #[arg(long)]
    pub size: Option<u32>,
    /// HOST:PORT where rank 0 runs the coordinator (default: QUIVER_COORDINATOR).
    #[arg(long)]
    pub coordinator: Option<String>,
    /// How long to wait for a node before declaring it failed.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Loopback only: give every operation a modelled time (ConnectX-3 class numbers) and
    /// report it beside wall time.
    #[arg(long)]
    pub cost_model: bool,
}

impl JobArgs {
    /// `nodes` nodes on this machine over `fabric`, as `--fabric F --nodes N` asks.
    pub fn local(fabric: FabricArg, nodes: u32, cost_model: bool) -> JobArgs {
        JobArgs {
            fabric: Some(fabric),
            nodes: Some(nodes),
            rank: None,
            size: None,
            coordinator: None,
            timeout: Duration::from_secs(30),
            cost_model,
        }
    }

    /// Whether these flags (or a launcher's environment) ask for a job of
    /// several nodes rather than one process: a fabric, a node count, a
    /// rank, size or coordinator, or a launcher's rank variable.
    pub fn wants_job(&self) -> bool {
        self.fabric.is_some() || self.nodes.is_some() || self.joins()
    }

    /// Whether this process is one member of a job formed elsewhere: a
    /// rank, size or coordinator given, or a launcher's rank variable.
    fn joins(&self) -> bool {
        self.rank.is_some()
            || self.size.is_some()
            || self.coordinator.is_some()
            || quiver_verbs::cluster::launched()
    }

    /// The job these flags describe; its local nodes re-execute this program
    /// through [`crate::NODE_ENTRY`]. Without --nodes, a loopback job, or a
    /// tcp job this process does not join, runs `local_nodes` nodes on this
    /// machine.
    pub fn job(&self, local_nodes: u32) -> Result<Job> {
        let fabric_arg = self.fabric.unwrap_or(FabricArg::Tcp);
        if self.cost_model && fabric_arg != FabricArg::Loopback {
            bail!(UsageError(
                "--cost-model applies to --fabric loopback only".into()
            ));
        }
        if self.nodes.is_some() && (self.rank.is_some() || self.size.is_some()) {
            bail!(UsageError(
                "--nodes spawns a local job; --rank/--size join an existing one".into()
            ));
        }
        let fabric = match fabric_arg {
            FabricArg::Loopback => Fabric::Loopback {
                cost: self.cost_model.then(CostModel::default),
            },
            FabricArg::Tcp => Fabric::Tcp,
            FabricArg::Mpi => Fabric::Mpi,
            FabricArg::Ibverbs => Fabric::Ibverbs,
        };
        let nodes = match (fabric_arg, self.nodes) {
            (_, Some(nodes)) => Nodes::Local(nodes),
            (FabricArg::Loopback, None) => Nodes::Local(local_nodes),
            (FabricArg::Tcp, None) if !self.joins() => Nodes::Local(local_nodes),
            // mpi and ibverbs nodes are started by a launcher.
            (_, None) => Nodes::Member {
                rank: self.rank,
                size: self.size,
                coordinator: self.coordinator.clone(),
            },
        };
        Ok(Job {
            fabric,
            nodes,
            timeout: self.timeout,
            program: Some(Program::this_executable([crate::NODE_ENTRY])?),
        })
    }
}
