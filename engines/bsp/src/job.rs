//! The bsp engine as a job of quiver-verbs: every node opens the same graph
//! file, runs its part ([`crate::run_node`]) and reports its vertices'
//! values, which rank 0 joins ([`join`]).

use std::path::PathBuf;

use quiver_csr::Graph;
use quiver_run::NoProgress;
use quiver_verbs::job::Task;
use quiver_verbs::{BoxError, Node};
use serde::{Deserialize, Serialize};

use crate::{Algorithm, Config, Report, Values};

/// One node's part of a bsp job ([`Task`]).
#[derive(Debug)]
pub struct BspTask;

/// What every node of a bsp job is told.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct JobConfig {
    /// The `.qcsr` graph, at the same path on every node.
    pub graph: PathBuf,
    /// What to compute.
    pub algorithm: Algorithm,
    /// Threads and direction.
    pub config: Config,
}

/// What one node reports: its run and its vertices' values.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NodeReport {
    /// The node's run.
    pub report: Report,
    /// Values of the vertices it owns (`report.owned`), in order.
    pub values: Values,
}

impl Task for BspTask {
    const NAME: &'static str = "bsp";
    type Config = JobConfig;
    type Report = NodeReport;
    type Error = BoxError;

    fn run(node: &Node, config: &JobConfig) -> Result<NodeReport, BoxError> {
        // A node of several reads its own vertices' lists (a directed
        // graph's transpose reads them all): the rest need not stay
        // resident.
        let open = if node.size() > 1 {
            Graph::open_lazily
        } else {
            Graph::open
        };
        let graph = open(&config.graph).map_err(|e| {
            format!(
                "opening {}: {}",
                config.graph.display(),
                quiver_run::chain(&e)
            )
        })?;
        let (values, report) =
            crate::run_node(node, &graph, &config.algorithm, &config.config, &NoProgress)
                .map_err(|e| quiver_run::chain(&e))?;
        Ok(NodeReport { report, values })
    }
}

/// Every vertex's value from the nodes' reports (in rank order).
///
/// # Panics
/// If the reports do not cover the vertices in order with values of one
/// kind: the job runner returns them by rank, and the partition is
/// contiguous.
pub fn join(reports: &[NodeReport]) -> Values {
    let mut joined = match reports.first().map(|r| &r.values) {
        Some(Values::Depths(_)) | None => Values::Depths(Vec::new()),
        Some(Values::Labels(_)) => Values::Labels(Vec::new()),
        Some(Values::Reals(_)) => Values::Reals(Vec::new()),
    };
    let mut next = 0;
    for part in reports {
        assert_eq!(part.report.owned.start, next, "node reports out of order");
        next = part.report.owned.end;
        match (&mut joined, &part.values) {
            (Values::Depths(all), Values::Depths(mine)) => all.extend_from_slice(mine),
            (Values::Labels(all), Values::Labels(mine)) => all.extend_from_slice(mine),
            (Values::Reals(all), Values::Reals(mine)) => all.extend_from_slice(mine),
            _ => panic!("nodes reported values of different kinds"),
        }
    }
    joined
}
