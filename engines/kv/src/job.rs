//! The paper's traversal benchmark as a quiver-verbs job ([`run`]): every
//! node loads its share of a graph, its workers run two-hop queries and
//! edge inserts for start vertices homed on it ([`crate::workload`]), and
//! every tick the nodes gather their monitors' reports, agree on
//! migrations and record a point of the time series
//! ([`crate::monitor`]); rank 0 joins the nodes' reports
//! ([`crate::report`]).

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use quiver_csr::Graph;
use quiver_run::{Cancelled, Progress, Unit};
use quiver_verbs::job::{Fabric, Job, Nodes, Task};
use quiver_verbs::{BoxError, Node};
use serde::{Deserialize, Serialize};

use crate::clock::nanos;
use crate::lease::LeasePlan;
use crate::monitor::{control, migrate_all, Controlled};
use crate::report::{join, NodeReport, Report};
use crate::workload::{starts, work, Live, Pause, Present, Shared};
use crate::{Clock, Config, Error, Policy, Result, Store};

/// Runs the benchmark on `graph` as `job` with `config`, and returns the
/// job's report where rank 0's results are: in this process for a local
/// job, `None` on the other members of a job formed elsewhere (as
/// [`Job::run`]). `job` is the job asked for: under the `ideal` policy a
/// local job of N nodes runs on one, its throughput scaled by N.
///
/// `progress` hears of every tick of the nodes that run in this process
/// (a loopback job's, or this member's; see [`hears_its_caller`]); a
/// local tcp job's nodes are other processes, so it only hears that the
/// run goes on. Once `progress` asks the run to stop, the nodes in this
/// process tell every node at their next tick, all of them end there
/// together, and this returns [`Error::Cancelled`] (a local tcp job's
/// nodes, which nothing here reaches, run to their end).
///
/// # Errors
/// [`Error::InvalidArgument`] for a configuration that makes no sense, a
/// graph with no start vertex or without a file for the nodes to open, or
/// `ideal` on a job formed elsewhere (nothing names the nodes to scale
/// by); [`Error::Job`] when a node fails; [`Error::Cancelled`].
pub fn run(
    graph: &Graph,
    job: &Job,
    config: &Config,
    progress: &dyn Progress,
) -> Result<Option<Report>> {
    config.validate()?;
    starts(graph, config)?;
    let path = node_path(graph)?;
    let mut job = job.clone();
    // A member learns the job's size when it joins: from its reports.
    let asked = match job.nodes {
        Nodes::Local(n) => {
            job.nodes = Nodes::Local(config.policy.job_nodes(n));
            Some(n)
        }
        Nodes::Member { .. } if config.policy == Policy::Ideal => {
            return Err(Error::invalid(
                "policy",
                "ideal runs the workload on one node and scales it by the nodes asked \
                 for, which only a local job names",
            ))
        }
        Nodes::Member { .. } => None,
    };
    let here = hears_its_caller(&job);
    progress.start("kv benchmark", Unit::Rounds, here.then(|| config.ticks()));
    progress.check()?;
    let watch = Arc::new(Watch::default());
    let task = JobConfig {
        graph: path,
        config: config.clone(),
        watch: Some(Arc::clone(&watch)),
    };
    let (running, finished) = mpsc::channel::<()>();
    let reports = std::thread::scope(|scope| {
        let watch = &watch;
        scope.spawn(move || watch.follow(progress, &finished));
        // On this thread: a local tcp job's nodes die with the thread that
        // spawned them.
        let reports = job.run::<KvTask>(&task);
        drop(running);
        reports
    });
    match reports {
        _ if watch.stop.load(Ordering::Relaxed) => Err(Cancelled.into()),
        Err(_) if progress.cancelled() => Err(Cancelled.into()),
        Err(e) => Err(Error::Job(e)),
        Ok(None) => Ok(None),
        Ok(Some(reports)) => {
            let nodes = asked
                .unwrap_or_else(|| u32::try_from(reports.len()).expect("a job's nodes fit u32"));
            Ok(Some(join(&reports, config, nodes, graph.num_vertices())))
        }
    }
}

/// Whether a [`run`] of `job` hears its caller: whether any of its nodes
/// runs in this process (a loopback job's all do, and a member's own), to
/// tell of its ticks and to stop when asked. A local tcp job's nodes are
/// processes of their own, which die with this one.
pub fn hears_its_caller(job: &Job) -> bool {
    matches!(job.fabric, Fabric::Loopback { .. }) || matches!(job.nodes, Nodes::Member { .. })
}

/// What the caller of [`run`] and the nodes that run in its process share:
/// the ticks they have done, and the caller's request to stop. Spawned
/// nodes have none (it does not travel with the job's configuration).
#[derive(Debug, Default)]
pub(crate) struct Watch {
    ticks: AtomicU64,
    stop: AtomicBool,
}

impl Watch {
    /// Whether the caller asked the run to stop.
    pub(crate) fn stopping(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// A node has done `tick` ticks.
    pub(crate) fn ticked(&self, tick: u64) {
        self.ticks.fetch_max(tick, Ordering::Relaxed);
    }

    /// Tells `progress` of the ticks done and passes on its request to
    /// stop, every 50 ms until `finished` hangs up.
    fn follow(&self, progress: &dyn Progress, finished: &mpsc::Receiver<()>) {
        let mut shown = 0;
        while let Err(mpsc::RecvTimeoutError::Timeout) =
            finished.recv_timeout(Duration::from_millis(50))
        {
            let ticks = self.ticks.load(Ordering::Relaxed);
            progress.advance(ticks - shown);
            shown = ticks;
            if progress.cancelled() {
                self.stop.store(true, Ordering::Relaxed);
            }
        }
    }
}

/// What every node of a kv job is told.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct JobConfig {
    /// The `.qcsr` graph, at the same path on every node.
    pub graph: PathBuf,
    /// The run.
    pub config: Config,
    /// The caller's watch, for the nodes that run in its process.
    #[serde(skip)]
    watch: Option<Arc<Watch>>,
}

impl JobConfig {
    /// The job that runs `config` on the graph at `graph` (a path every
    /// node can open).
    pub fn new(graph: PathBuf, config: Config) -> JobConfig {
        JobConfig {
            graph,
            config,
            watch: None,
        }
    }
}

/// The path at which a job's nodes open `graph`: its file's, made
/// absolute.
///
/// # Errors
/// [`Error::InvalidArgument`] for a graph without a file.
pub(crate) fn node_path(graph: &Graph) -> Result<PathBuf> {
    let path = graph.path().ok_or_else(|| {
        Error::invalid(
            "graph",
            "the job's nodes open the graph from its file, and this graph has none",
        )
    })?;
    std::path::absolute(path)
        .map_err(|e| Error::invalid("graph", format!("{}: {e}", path.display())))
}

/// Opens the graph a job's node was told about, for the job's error.
pub(crate) fn open_graph(path: &std::path::Path) -> std::result::Result<Graph, BoxError> {
    Graph::open(path)
        .map_err(|e| format!("opening {}: {}", path.display(), quiver_run::chain(&e)).into())
}

/// One node's part of a kv benchmark job ([`Task`]).
#[derive(Debug)]
pub struct KvTask;

impl Task for KvTask {
    const NAME: &'static str = "kv";
    type Config = JobConfig;
    type Report = NodeReport;
    type Error = BoxError;

    fn run(node: &Node, config: &JobConfig) -> std::result::Result<NodeReport, BoxError> {
        let graph = open_graph(&config.graph)?;
        run_node_watched(
            node,
            &graph,
            &config.config,
            Clock::System,
            config.watch.as_deref(),
        )
        .map_err(|e| quiver_run::chain(&e).into())
    }
}

/// Runs the benchmark's part on this node: every node of the job calls it
/// with the same arguments.
///
/// # Errors
/// Invalid configuration, a graph without edges, and the store's errors.
pub fn run_node(node: &Node, graph: &Graph, config: &Config, clock: Clock) -> Result<NodeReport> {
    run_node_watched(node, graph, config, clock, None)
}

/// [`run_node`], stopping with every node at the next tick once `watch`
/// (the caller's, when it runs in this process) says so.
fn run_node_watched(
    node: &Node,
    graph: &Graph,
    config: &Config,
    clock: Clock,
    watch: Option<&Watch>,
) -> Result<NodeReport> {
    config.validate()?;
    let loading = Instant::now();
    let store = Store::open(node, graph, &config.store_config(), clock)?;
    let leases = LeasePlan::new(
        nanos(config.store.cache_lease),
        nanos(config.store.reclaim_lease),
        config.policy.serves_cache(),
        nanos(config.tick),
        usize::try_from(config.ticks_per_interval()).unwrap_or(usize::MAX),
    );
    store.set_leases(leases.start());
    let load_ns = nanos(loading.elapsed());
    let starts = starts(graph, config)?;
    node.barrier().map_err(Error::Verbs)?;
    let stop = AtomicBool::new(false);
    let live = Live::default();
    let pause = Pause::default();
    let begun = Instant::now();
    let (moves, approved) = mpsc::channel::<u32>();
    let shared = Shared {
        store: &store,
        config,
        starts: &starts,
        begun,
        stop: &stop,
        live: &live,
        pause: &pause,
        watch,
    };
    let outcome = std::thread::scope(|scope| -> Result<NodeReport> {
        let server = scope.spawn(|| store.serve());
        let store_ref = &store;
        let migrator = scope.spawn(move || migrate_all(store_ref, approved));
        let workers: Vec<_> = (0..config.workers())
            .map(|worker| {
                scope.spawn(move || {
                    let _present = Present(shared.pause);
                    work(shared, worker)
                })
            })
            .collect();
        let controlled = control(shared, &moves, leases);
        stop.store(true, Ordering::Relaxed);
        let mut results = Vec::new();
        let mut worker_error = None;
        for worker in workers {
            match worker.join().expect("a worker panicked") {
                Ok(result) => results.push(result),
                Err(e) => worker_error = worker_error.or(Some(e)),
            }
        }
        drop(moves);
        let refused = migrator.join().expect("the migrator panicked");
        let run_ns = nanos(begun.elapsed());
        // No node stops serving forwarded Puts before every worker is done.
        let synced = node.barrier().map_err(Error::Verbs);
        let stopped = store.session().stop_server();
        let served = server.join().expect("the server panicked");
        let Controlled {
            series,
            contended,
            shared_share,
            mostly_remote,
            paused_ns,
            cancelled,
        } = controlled?;
        if let Some(e) = worker_error {
            return Err(e);
        }
        synced?;
        stopped?;
        served?;
        let refused = refused?;
        if cancelled {
            return Err(Cancelled.into());
        }
        let mut report = NodeReport {
            load_ns,
            run_ns,
            paused_ns,
            refused,
            contended,
            shared_share,
            mostly_remote,
            counts: store.counts(),
            region_bytes: store.region_bytes(),
            used_words: store.used_words(),
            series,
            ..NodeReport::default()
        };
        for result in results {
            report.queries += result.queries;
            report.puts += result.puts;
            report.tally.add(&result.tally);
            report.latency.merge(&result.latency);
            report.modelled_latency.merge(&result.modelled_latency);
            if result.tally.modelled_ns > 0 {
                #[allow(clippy::cast_precision_loss)]
                let rate =
                    (result.queries + result.puts) as f64 * 1e9 / result.tally.modelled_ns as f64;
                report.modelled_ops_per_s += rate;
            }
        }
        Ok(report)
    });
    outcome
}
