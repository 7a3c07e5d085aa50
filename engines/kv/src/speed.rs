//! Raw migration speed (Pragh Fig. 13): one thread on node 1 migrates
//! values homed on node 0 to itself as fast as it can, `batch` at a time
//! with the protocol's stages pipelined across them (1: one after
//! another); node 0's CPU does nothing. Values of up to `max_bytes` are taken, in id
//! order, from the keys homed on node 0.

use std::path::PathBuf;
use std::time::Instant;

use quiver_csr::Graph;
use quiver_run::InvalidArgument;
use quiver_verbs::job::{Job, Task};
use quiver_verbs::{BoxError, Node, Verb};
use serde::{Deserialize, Serialize};

use crate::layout::block_words;
use crate::{Clock, Error, Result, Store, StoreConfig};

/// A migration-speed measurement.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SpeedConfig {
    /// Values to migrate.
    pub values: u64,
    /// Largest value taken, in bytes (its block, size and count words
    /// included).
    pub max_bytes: u64,
    /// Values migrated together, their stages pipelined (1: one at a time).
    pub batch: usize,
    /// The store.
    pub store: StoreConfig,
}

impl Default for SpeedConfig {
    /// 100,000 values of at most 4 KiB (the paper's figure is for values
    /// under 4 KiB), 64 at a time.
    fn default() -> Self {
        SpeedConfig {
            values: 100_000,
            max_bytes: 4 << 10,
            batch: 64,
            store: StoreConfig::default(),
        }
    }
}

impl SpeedConfig {
    /// Checks the settings against `graph`: some value must fit in
    /// `max_bytes`.
    ///
    /// # Errors
    /// [`InvalidArgument`] naming `max_bytes` when no vertex's block fits.
    pub fn validate_for(&self, graph: &Graph) -> std::result::Result<(), InvalidArgument> {
        let smallest = (0..graph.num_vertices())
            .map(|v| block_words(graph.degree(v), graph.is_weighted()))
            .min()
            .unwrap_or(0);
        if smallest * 8 > self.max_bytes {
            return Err(InvalidArgument::new(
                "max_bytes",
                format!(
                    "no value fits in {} bytes: the smallest takes {} bytes",
                    self.max_bytes,
                    smallest * 8
                ),
            ));
        }
        Ok(())
    }
}

/// What every node of a migration-speed job is told.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SpeedJob {
    /// The `.qcsr` graph, at the same path on every node.
    pub graph: PathBuf,
    /// The measurement.
    pub config: SpeedConfig,
}

/// What the migrating node measured (other nodes report zeros).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Speed {
    /// Values migrated.
    pub values: u64,
    /// Bytes of those values.
    pub bytes: u64,
    /// Wall time of the migrations.
    pub wall_ns: u64,
    /// Their modelled time (batches one after another).
    pub modelled_ns: u64,
    /// One-sided operations they posted.
    pub one_sided: u64,
    /// Two-sided messages the node sent meanwhile (0: no RPC).
    pub messages: u64,
    /// Values per second, wall clock, one thread.
    pub values_per_s: f64,
    /// Values per second of modelled time, one thread.
    pub modelled_values_per_s: f64,
}

/// The migration-speed job's task ([`Task`]).
#[derive(Debug)]
pub struct SpeedTask;

impl Task for SpeedTask {
    const NAME: &'static str = "kv-speed";
    type Config = SpeedJob;
    type Report = Speed;
    type Error = BoxError;

    fn run(node: &Node, job: &SpeedJob) -> std::result::Result<Speed, BoxError> {
        let graph = crate::job::open_graph(&job.graph)?;
        measure(node, &graph, &job.config).map_err(|e| quiver_run::chain(&e).into())
    }
}

/// Measures migration speed on `graph` as `job` (two nodes or more), with
/// room in every reclaim ring for an entry per value migrated (nothing is
/// reclaimed during the measurement); returns what the migrating node
/// measured, where rank 0's results are (`None` on the other members of a
/// job formed elsewhere).
///
/// # Errors
/// [`Error::InvalidArgument`] for a graph without a file for the nodes to
/// open, or whose values are all over `max_bytes`; [`Error::Job`] when a node fails (fewer than two nodes, no value
/// small enough, the store's errors).
pub fn run(graph: &Graph, job: &Job, config: &SpeedConfig) -> Result<Option<Speed>> {
    config.validate_for(graph)?;
    let task = SpeedJob {
        graph: crate::job::node_path(graph)?,
        config: SpeedConfig {
            store: StoreConfig {
                ring_entries: config.store.ring_entries.max(config.values),
                ..config.store.clone()
            },
            ..config.clone()
        },
    };
    let reports = job.run::<SpeedTask>(&task).map_err(Error::Job)?;
    // Node 1 migrates (`measure` refuses a job of fewer nodes).
    Ok(reports.map(|mut reports| reports.swap_remove(1)))
}

/// Runs the measurement on this node.
///
/// # Errors
/// Fewer than two nodes, no value small enough, and the store's errors.
pub fn measure(node: &Node, graph: &Graph, config: &SpeedConfig) -> Result<Speed> {
    if node.size() < 2 {
        return Err(Error::invalid(
            "nodes",
            "migration moves values between nodes: run at least 2",
        ));
    }
    let store = Store::open(node, graph, &config.store, Clock::System)?;
    let placement = store.placement();
    let max_words = config.max_bytes / 8;
    let keys: Vec<u32> = (0..graph.num_vertices())
        .filter(|&v| {
            placement.home_node(v) == 0
                && block_words(graph.degree(v), graph.is_weighted()) <= max_words
        })
        .take(usize::try_from(config.values).unwrap_or(usize::MAX))
        .collect();
    if keys.is_empty() {
        return Err(Error::invalid(
            "max_bytes",
            format!(
                "no value homed on node 0 fits in {} bytes",
                config.max_bytes
            ),
        ));
    }
    node.barrier().map_err(Error::Verbs)?;
    let mut speed = Speed::default();
    if store.rank() == 1 {
        let mut session = store.session();
        let before = node.counters();
        let started = Instant::now();
        for chunk in keys.chunks(config.batch.max(1)) {
            session.migrate_batch(chunk)?;
        }
        speed.wall_ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let used = node.counters().since(&before);
        let counts = store.counts();
        speed.values = counts.migrations;
        speed.bytes = counts.words_moved * 8;
        speed.one_sided = counts.migration_ops;
        speed.messages = used.total(Verb::Send).ops;
        speed.modelled_ns = session.tally().modelled_ns;
        #[allow(clippy::cast_precision_loss)]
        {
            speed.values_per_s = speed.values as f64 * 1e9 / speed.wall_ns.max(1) as f64;
            speed.modelled_values_per_s =
                speed.values as f64 * 1e9 / speed.modelled_ns.max(1) as f64;
        }
    }
    // Node 0's memory stays until the migrations are done.
    node.barrier().map_err(Error::Verbs)?;
    Ok(speed)
}
