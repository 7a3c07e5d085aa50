//! The paper's traversal benchmark as a quiver-verbs job: every node loads
//! its share of a graph, its workers run two-hop queries and edge inserts
//! for start vertices homed on it, and every tick the nodes gather their
//! monitors' reports, agree on migrations ([`Coordinator`]) and record a
//! point of the time series.
//!
//! Workload (Pragh §6.2): start vertices are drawn by Zipf (θ 0.99; 0 for
//! uniform) over a scope of 2^10 vertices (the first vertices, in id order,
//! with a neighbour, or `min_degree` of them: a permuted graph's ids are
//! random); a query reads
//! the start's first 100 neighbours and then the first 100 neighbours of
//! each (101 Gets); 5% of operations instead insert an edge from the start
//! vertex to a random vertex (a Put, appended to its list, where a query
//! reads it only while the list is shorter than a hop's reads). Inserts, not
//! updates that repoint one of its edges (`Update::SetEdge`): a hot
//! start's edges would all be repointed within seconds, turning the
//! neighbourhood its queries read over faster than any placement follows. With `shift_every`, the scope moves to the next,
//! disjoint range of start vertices at that period (the dynamic workload).
//! Each node's workers draw from the same distribution and keep the starts
//! homed on their node, as if clients sent each request to its start's home.
//!
//! The `shard` baseline (Pragh §5) moves whole shards, keys and values,
//! instead of values: every node counts its accesses per shard; at each
//! interval's end the nodes gather the counts and agree on the optimal plan
//! ([`plan_shards`]); every node then holds its workers between operations,
//! each target copies its shards ([`Session::pull_shard`](crate::Session::pull_shard)),
//! and every node points its shard map at the new homes before its workers
//! go on. Queries follow their start's shard to its new home. The pause is
//! wall time of the run (`paused_ns`), but no worker's modelled time, and
//! the counting costs nothing: the paper charges its shard baseline neither.

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use quiver_csr::Graph;
use quiver_run::RunSummary;
use quiver_verbs::job::Task;
use quiver_verbs::{BoxError, Node};
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Zipf};
use rand_pcg::Pcg64;
use serde::{Deserialize, Serialize};

use crate::clock::nanos;
use crate::histogram::Histogram;
use crate::policy::{plan_shards, Coordinator, Plan};
use crate::store::{Store, StoreConfig, StoreCounts, Tally};
use crate::update::Update;
use crate::{Clock, Error, Result};

/// Where values may live and how nodes find them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Policy {
    /// No migration and no location cache: every remote Get reads the key
    /// and then the value.
    #[serde(rename = "orig")]
    Orig,
    /// Shard-based migration: whole shards of keys and values (100 per
    /// node) move to the node that accessed them most, as the paper's
    /// baseline; no location cache (the shard map says where every key is).
    #[serde(rename = "shard")]
    Shard,
    /// The location cache only.
    #[serde(rename = "cache")]
    Cache,
    /// Split live migration, key lookups uncached (the cache only counts).
    #[serde(rename = "split")]
    Split,
    /// Split live migration with the location cache (Pragh).
    #[serde(rename = "split+cache")]
    SplitCache,
    /// The whole workload on one node, every access local; throughput is
    /// multiplied by the node count (the paper's upper bound).
    #[serde(rename = "ideal")]
    Ideal,
}

impl Policy {
    /// Every policy, in the benchmark's order.
    pub const ALL: [Policy; 6] = [
        Policy::Orig,
        Policy::Shard,
        Policy::Cache,
        Policy::Split,
        Policy::SplitCache,
        Policy::Ideal,
    ];

    /// The name users type.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Orig => "orig",
            Policy::Shard => "shard",
            Policy::Cache => "cache",
            Policy::Split => "split",
            Policy::SplitCache => "split+cache",
            Policy::Ideal => "ideal",
        }
    }

    /// Whether values migrate one by one (split live migration).
    pub fn migrates(self) -> bool {
        matches!(self, Policy::Split | Policy::SplitCache)
    }

    /// Whether the location cache answers lookups.
    pub fn serves_cache(self) -> bool {
        matches!(self, Policy::Cache | Policy::SplitCache)
    }

    /// Nodes the job runs on when the user asked for `nodes`.
    pub fn job_nodes(self, nodes: u32) -> u32 {
        if self == Policy::Ideal {
            1
        } else {
            nodes
        }
    }
}

impl std::fmt::Display for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Policy {
    type Err = String;

    fn from_str(s: &str) -> std::result::Result<Policy, String> {
        Policy::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Policy::ALL.iter().map(|p| p.name()).collect();
                format!("unknown policy {s:?}; one of {}", names.join(", "))
            })
    }
}

/// The share of operations that are queries (the rest are Puts).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mix {
    /// Percent of operations that are two-hop queries.
    pub queries: u32,
}

impl Mix {
    /// The value room per node a store needs by default for this mix:
    /// [`StoreConfig`]'s default (sized for the paper's 5% of Puts) for
    /// every 5% of Puts, since every Put copies a list and the copy it
    /// replaces waits out the reclaim lease. Untouched room costs no memory
    /// on the loopback and tcp fabrics.
    pub fn default_value_headroom(&self) -> u64 {
        let puts = u64::from(100 - self.queries);
        StoreConfig::default().value_headroom * puts.div_ceil(5).max(1)
    }
}

impl FromStr for Mix {
    type Err = String;

    /// `GETS/PUTS` in percent, adding up to 100: `95/5`, `50/50`.
    fn from_str(s: &str) -> std::result::Result<Mix, String> {
        let bad = || format!("mix {s:?} is not GETS/PUTS in percent adding up to 100, like 95/5");
        let (gets, puts) = s.split_once('/').ok_or_else(bad)?;
        let gets: u32 = gets.trim().parse().map_err(|_| bad())?;
        let puts: u32 = puts.trim().parse().map_err(|_| bad())?;
        if gets + puts != 100 {
            return Err(bad());
        }
        Ok(Mix { queries: gets })
    }
}

impl std::fmt::Display for Mix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.queries, 100 - self.queries)
    }
}

/// A benchmark run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Config {
    /// Migration and caching.
    pub policy: Policy,
    /// Queries and Puts.
    pub mix: Mix,
    /// Zipf exponent of the start vertices (0: uniform).
    pub zipf: f64,
    /// Start vertices to draw from.
    pub scope: u32,
    /// Neighbours read per hop.
    pub neighbours: u64,
    /// Neighbours a start vertex has at least (1 or more).
    pub min_degree: u64,
    /// How long the workers run.
    pub duration: Duration,
    /// Worker threads per node (0: one per core).
    pub threads: usize,
    /// Period of the time series and of instant monitor reports.
    pub tick: Duration,
    /// Period of the monitor's full reports.
    pub interval: Duration,
    /// Reads per second of one remote pair that the monitor reports at
    /// once, without waiting for the interval's end.
    pub instant_rate: u32,
    /// Reads per second of one remote pair that a full report includes.
    pub report_rate: u32,
    /// How many times as often as its holder an applicant must read a pair.
    pub margin: f64,
    /// Move the scope to the next disjoint range of starts this often.
    pub shift_every: Option<Duration>,
    /// Seed of the workers' choices.
    pub seed: u64,
    /// The store (its cache serving is set by the policy).
    pub store: StoreConfig,
}

impl Default for Config {
    /// The paper's defaults: split+cache, 95/5, Zipf 0.99 over 2^10
    /// starts, 100 neighbours per hop, reports every 10 s and at once above
    /// 100 reads/s, approval at 1.5x; a 30 s run with one worker per node.
    fn default() -> Self {
        Self {
            policy: Policy::SplitCache,
            mix: Mix { queries: 95 },
            zipf: 0.99,
            scope: 1 << 10,
            neighbours: 100,
            min_degree: 1,
            duration: Duration::from_secs(30),
            threads: 1,
            tick: Duration::from_secs(1),
            interval: Duration::from_secs(10),
            instant_rate: 100,
            report_rate: 1,
            margin: 1.5,
            shift_every: None,
            seed: 1,
            store: StoreConfig::default(),
        }
    }
}

impl Config {
    /// Worker threads per node: `threads`, or one per core for 0.
    pub fn workers(&self) -> usize {
        quiver_run::worker_threads(self.threads)
    }

    /// Checks the parameters.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the first that makes no sense.
    pub fn validate(&self) -> Result<()> {
        let positive = |name: &'static str, d: Duration| {
            if d.is_zero() {
                Err(Error::invalid(name, "must be longer than 0"))
            } else {
                Ok(())
            }
        };
        positive("duration", self.duration)?;
        positive("tick", self.tick)?;
        positive("interval", self.interval)?;
        if !self
            .interval
            .as_nanos()
            .is_multiple_of(self.tick.as_nanos())
        {
            return Err(Error::invalid(
                "interval",
                format!(
                    "{:?} is not a whole number of ticks ({:?})",
                    self.interval, self.tick
                ),
            ));
        }
        if let Some(every) = self.shift_every {
            positive("shift_every", every)?;
        }
        if self.mix.queries > 100 {
            return Err(Error::invalid("mix", "queries are at most 100%"));
        }
        if !self.zipf.is_finite() || self.zipf < 0.0 {
            return Err(Error::invalid("zipf", "the exponent must be 0 or more"));
        }
        if self.scope == 0 {
            return Err(Error::invalid("scope", "needs at least one start vertex"));
        }
        if self.margin.is_nan() || self.margin < 1.0 {
            return Err(Error::invalid(
                "margin",
                "an applicant must read a pair at least as often as its holder (1 or more)",
            ));
        }
        Ok(())
    }

    fn store_config(&self) -> StoreConfig {
        StoreConfig {
            serve_cache: self.policy.serves_cache(),
            shards_move: self.policy == Policy::Shard,
            ..self.store.clone()
        }
    }

    fn ticks_per_interval(&self) -> u64 {
        u64::try_from(self.interval.as_nanos() / self.tick.as_nanos()).unwrap_or(u64::MAX)
    }
}

/// One point of the time series (the whole job, one tick).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// Seconds since the workers started, at the tick's end.
    pub t_s: f64,
    /// Queries and Puts per second during the tick (ideal: times the
    /// nodes asked for, as in the report).
    pub ops_per_s: f64,
    /// The same per second of modelled time (each node's ops over its
    /// workers' mean modelled time).
    pub modelled_ops_per_s: f64,
    /// Share of the tick's Gets that needed a remote operation.
    pub remote_share: f64,
    /// Values migrated during the tick.
    pub migrations: u64,
    /// Bytes of values migrated during the tick.
    pub bytes_moved: u64,
    /// One-sided operations per migration during the tick (`None`: none
    /// migrated).
    pub one_sided_per_migration: Option<f64>,
    /// Share of the tick's key lookups through the location cache that hit
    /// (`None`: no lookup used it).
    pub cache_hit_rate: Option<f64>,
    /// Operations' median latency during the tick, wall clock.
    pub p50_ns: u64,
    /// Their 99th percentile.
    pub p99_ns: u64,
    /// Their 99.9th percentile.
    pub p999_ns: u64,
    /// The 99.9th percentile of the tick's Gets (each hop of a query),
    /// wall clock: what a migration wave must not inflate.
    pub get_p999_ns: u64,
}

/// What one node gathers to the others every tick.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
struct Tick {
    pairs: Vec<(u32, u32)>,
    /// Accesses per shard over the interval (the `shard` policy, at an
    /// interval's end).
    shard_accesses: Vec<u32>,
    ops: u64,
    /// Modelled time of those ops, summed over the workers.
    modelled_ns: u64,
    workers: u64,
    gets: u64,
    remote_gets: u64,
    cache_hits: u64,
    cache_misses: u64,
    /// The node's migration counts so far.
    counts: StoreCounts,
    latency: Histogram,
    get_latency: Histogram,
}

/// What one node reports.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NodeReport {
    /// Loading the node's share.
    pub load_ns: u64,
    /// The workers' run.
    pub run_ns: u64,
    /// Time the workers were held while shards moved (`shard` policy).
    pub paused_ns: u64,
    /// Queries done.
    pub queries: u64,
    /// Puts done.
    pub puts: u64,
    /// The workers' Gets and their costs.
    pub tally: Tally,
    /// Operations per second of modelled time, summed over workers.
    pub modelled_ops_per_s: f64,
    /// Migrations, moves and reclamation.
    pub counts: StoreCounts,
    /// Migrations refused for a value too large to move.
    pub refused: u64,
    /// Applications the coordinator refused as contended (the same on
    /// every node).
    pub contended: u64,
    /// Share of the last interval's Gets that went to pairs other nodes
    /// read more: remote under any placement of one copy per pair (the
    /// same on every node).
    pub shared_share: f64,
    /// Operation latency, wall clock.
    pub latency: Histogram,
    /// Operation latency, modelled.
    pub modelled_latency: Histogram,
    /// Bytes of the registered region.
    pub region_bytes: u64,
    /// Words of values in use at the end.
    pub used_words: u64,
    /// The job's time series (the same on every node).
    pub series: Vec<Point>,
}

/// What every node of a kv job is told.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct JobConfig {
    /// The `.qcsr` graph, at the same path on every node.
    pub graph: PathBuf,
    /// The run.
    pub config: Config,
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
        let graph = crate::bench::open_graph(&config.graph)?;
        run_node(node, &graph, &config.config, Clock::System)
            .map_err(|e| quiver_run::chain(&e).into())
    }
}

/// The start vertices of the workload: the first `scope` vertices (times
/// the scope shifts in the run, plus one) with at least `min_degree`
/// neighbours (at least one), in id order.
///
/// # Errors
/// [`Error::InvalidArgument`] if no vertex has that many neighbours.
pub fn starts(graph: &Graph, config: &Config) -> Result<Vec<u32>> {
    let shifts = config.shift_every.map_or(0, |every| {
        u64::try_from(config.duration.as_nanos() / every.as_nanos()).unwrap_or(u64::MAX)
    });
    let wanted = u64::from(config.scope).saturating_mul(shifts + 1);
    let starts: Vec<u32> = (0..graph.num_vertices())
        .filter(|&v| graph.degree(v) >= config.min_degree.max(1))
        .take(usize::try_from(wanted).unwrap_or(usize::MAX))
        .collect();
    if starts.is_empty() {
        return Err(Error::invalid(
            "min_degree",
            format!(
                "no vertex of the graph has {} neighbours to start a query from",
                config.min_degree.max(1)
            ),
        ));
    }
    Ok(starts)
}

/// The job's migrations so far, summed over its nodes.
#[derive(Clone, Copy, Debug, Default)]
struct Moved {
    migrations: u64,
    words: u64,
    ops: u64,
}

impl Moved {
    fn add(&mut self, counts: &StoreCounts) {
        self.migrations += counts.migrations;
        self.words += counts.words_moved;
        self.ops += counts.migration_ops;
    }
}

/// Counters the workers add to and the control thread reads every tick.
#[derive(Debug, Default)]
struct Live {
    ops: AtomicU64,
    modelled_ns: AtomicU64,
    gets: AtomicU64,
    remote_gets: AtomicU64,
    cache_hits: AtomicU64,
    cache_misses: AtomicU64,
    latency: Mutex<Latencies>,
}

/// A tick's latencies, wall clock: whole operations and their Gets.
#[derive(Debug, Default)]
struct Latencies {
    ops: Histogram,
    gets: Histogram,
}

/// Holds a node's workers between operations while shards move.
#[derive(Debug, Default)]
struct Pause {
    state: Mutex<PauseState>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct PauseState {
    held: bool,
    /// Workers waiting, or gone for good.
    idle: usize,
}

impl Pause {
    fn state(&self) -> MutexGuard<'_, PauseState> {
        crate::store::lock(&self.state)
    }

    /// A worker between operations: waits while the workers are held.
    fn between_operations(&self) {
        let mut state = self.state();
        if !state.held {
            return;
        }
        state.idle += 1;
        self.changed.notify_all();
        while state.held {
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
        state.idle -= 1;
    }

    /// Holds the workers; returns once all `workers` wait (or have left).
    fn hold(&self, workers: usize) {
        let mut state = self.state();
        state.held = true;
        while state.idle < workers {
            state = self
                .changed
                .wait(state)
                .unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn release(&self) {
        self.state().held = false;
        self.changed.notify_all();
    }
}

/// A worker's presence: when it ends, however it ends, the worker counts
/// as idle for good, so that holding the workers never waits for it.
struct Present<'p>(&'p Pause);

impl Drop for Present<'_> {
    fn drop(&mut self) {
        self.0.state().idle += 1;
        self.0.changed.notify_all();
    }
}

/// What one worker did.
#[derive(Debug, Default)]
struct WorkerResult {
    queries: u64,
    puts: u64,
    tally: Tally,
    latency: Histogram,
    modelled_latency: Histogram,
}

/// Runs the benchmark's part on this node.
///
/// # Errors
/// Invalid configuration, a graph without edges, and the store's errors.
pub fn run_node(node: &Node, graph: &Graph, config: &Config, clock: Clock) -> Result<NodeReport> {
    config.validate()?;
    let loading = Instant::now();
    let store = Store::open(node, graph, &config.store_config(), clock)?;
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
        let controlled = control(shared, &moves);
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
            paused_ns,
        } = controlled?;
        if let Some(e) = worker_error {
            return Err(e);
        }
        synced?;
        stopped?;
        served?;
        let refused = refused?;
        let mut report = NodeReport {
            load_ns,
            run_ns,
            paused_ns,
            refused,
            contended,
            shared_share,
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

/// Approvals migrated together at most.
const MIGRATION_BATCH: usize = 256;

/// The migration thread: moves every approved key here. Returns how many
/// were refused as too large to move.
fn migrate_all(store: &Store, approved: mpsc::Receiver<u32>) -> Result<u64> {
    let mut session = store.session();
    let mut refused = 0;
    // Every approval waiting is migrated in one pipelined batch; a value
    // too large to move is refused on its own.
    while let Ok(first) = approved.recv() {
        let mut batch = vec![first];
        batch.extend(approved.try_iter().take(MIGRATION_BATCH - 1));
        match session.migrate_batch(&batch) {
            Ok(_) => {}
            Err(Error::TooLarge { .. }) => {
                for key in batch {
                    match session.migrate(key) {
                        Ok(_) => {}
                        Err(Error::TooLarge { .. }) => refused += 1,
                        Err(e) => return Err(e),
                    }
                }
            }
            Err(e) => return Err(e),
        }
    }
    Ok(refused)
}

/// What a node's workers and its control thread share.
#[derive(Clone, Copy)]
struct Shared<'a> {
    store: &'a Store,
    config: &'a Config,
    starts: &'a [u32],
    begun: Instant,
    stop: &'a AtomicBool,
    live: &'a Live,
    pause: &'a Pause,
}

/// How workers draw start vertices: Zipf over the scope (uniform at
/// exponent 0), the scope moved on to the next disjoint range of the
/// starts every `shift_every` (the dynamic workload).
struct Draw<'a> {
    starts: &'a [u32],
    scope: usize,
    zipf: Zipf<f64>,
    shift_every: Option<Duration>,
}

impl<'a> Draw<'a> {
    fn new(starts: &'a [u32], config: &Config) -> Result<Draw<'a>> {
        let scope = config
            .scope
            .min(u32::try_from(starts.len()).unwrap_or(u32::MAX));
        let zipf = Zipf::new(f64::from(scope), config.zipf)
            .map_err(|e| Error::invalid("zipf", e.to_string()))?;
        Ok(Draw {
            starts,
            scope: scope as usize,
            zipf,
            shift_every: config.shift_every,
        })
    }

    /// A start vertex for an operation `elapsed` into the run.
    fn start(&self, rng: &mut Pcg64, elapsed: Duration) -> u32 {
        let shift = self.shift_every.map_or(0, |every| {
            usize::try_from(elapsed.as_nanos() / every.as_nanos()).unwrap_or(0) * self.scope
        });
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let rank = self.zipf.sample(rng) as usize - 1;
        self.starts[(shift + rank) % self.starts.len()]
    }
}

/// A worker: operations until told to stop.
fn work(shared: Shared<'_>, worker: usize) -> Result<WorkerResult> {
    let Shared {
        store,
        config,
        starts,
        begun,
        stop,
        live,
        pause,
    } = shared;
    let rank = store.rank();
    let mut rng = Pcg64::seed_from_u64(
        config.seed ^ (u64::from(rank) << 32) ^ (worker as u64).wrapping_mul(0x9e37_79b9),
    );
    let draw = Draw::new(starts, config)?;
    let mut session = store.session();
    let mut result = WorkerResult::default();
    // The Gets of the operation running, wall clock (a buffer kept across
    // operations: a fresh histogram each time would allocate its tree
    // again).
    let mut gets: Vec<u64> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        pause.between_operations();
        // Draws until a start homed here comes up; a node that homes none
        // of the scope's starts (a small graph, many nodes) idles.
        let elapsed = begun.elapsed();
        let drawn = (0..64 * store.node().size()).find_map(|_| {
            let v = draw.start(&mut rng, elapsed);
            (store.home_node(v) == rank).then_some(v)
        });
        let Some(start) = drawn else {
            std::thread::sleep(Duration::from_millis(1));
            continue;
        };
        let began = Instant::now();
        let before = session.tally().clone();
        if rng.random_range(0..100) < config.mix.queries {
            // Each hop's Get ends where the next begins.
            let mut last = began;
            session.two_hop(start, config.neighbours, |_| {
                let now = Instant::now();
                gets.push(nanos(now - last));
                last = now;
            })?;
            result.queries += 1;
        } else {
            let target = rng.random_range(0..store.vertices());
            session.put(start, Update::AddEdge(target))?;
            result.puts += 1;
        }
        let took = nanos(began.elapsed());
        let tally = session.tally();
        result.latency.record(took);
        result
            .modelled_latency
            .record(tally.modelled_ns - before.modelled_ns);
        live.ops.fetch_add(1, Ordering::Relaxed);
        live.modelled_ns
            .fetch_add(tally.modelled_ns - before.modelled_ns, Ordering::Relaxed);
        live.gets
            .fetch_add(tally.gets - before.gets, Ordering::Relaxed);
        live.remote_gets
            .fetch_add(tally.remote_gets - before.remote_gets, Ordering::Relaxed);
        live.cache_hits
            .fetch_add(tally.cache_hits - before.cache_hits, Ordering::Relaxed);
        live.cache_misses
            .fetch_add(tally.cache_misses - before.cache_misses, Ordering::Relaxed);
        let mut latency = live
            .latency
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        latency.ops.record(took);
        for get in gets.drain(..) {
            latency.gets.record(get);
        }
    }
    result.tally = session.tally().clone();
    Ok(result)
}

/// What the control thread saw.
struct Controlled {
    /// The time series.
    series: Vec<Point>,
    /// Applications refused as contended.
    contended: u64,
    /// Share of the last interval's Gets that went to shared pairs.
    shared_share: f64,
    /// Time the workers were held while shards moved.
    paused_ns: u64,
}

/// The control thread: every tick, harvest the monitor, gather with the
/// other nodes, plan and hand this node its migrations (or move shards),
/// reclaim, and record the tick.
fn control(shared: Shared<'_>, moves: &mpsc::Sender<u32>) -> Result<Controlled> {
    let Shared {
        store,
        config,
        begun,
        stop,
        live,
        pause,
        ..
    } = shared;
    let node = store.node();
    let mut paused_ns = 0;
    let mut coordinator = Coordinator::new(
        store.placement(),
        config.margin,
        config.ticks_per_interval(),
    );
    if config.store.plan == Plan::Deferred {
        coordinator = coordinator.deferring(config.ticks_per_interval());
    }
    let ticks = u64::try_from(config.duration.as_nanos().div_ceil(config.tick.as_nanos()))
        .unwrap_or(u64::MAX);
    let per_interval = config.ticks_per_interval();
    let tick_s = config.tick.as_secs_f64();
    let mut series = Vec::new();
    let mut moved_before = Moved::default();
    let (mut interval_gets, mut shared_share) = (0u64, 0.0);
    for tick in 1..=ticks {
        let due = begun + config.tick * u32::try_from(tick).unwrap_or(u32::MAX);
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        if tick == ticks {
            stop.store(true, Ordering::Relaxed);
        }
        let ends_interval = tick % per_interval == 0;
        // The applicant's floor: the report rate over a whole interval, or
        // the instant rate over the tick.
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss
        )]
        let floor = if ends_interval {
            (f64::from(config.report_rate) * tick_s * per_interval as f64).ceil() as u32
        } else {
            (f64::from(config.instant_rate) * tick_s).ceil() as u32
        }
        .max(1);
        let pairs = if config.policy.migrates() {
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let reported = (f64::from(floor) / config.margin).floor() as u32;
            store.harvest(reported.max(1), ends_interval)
        } else {
            Vec::new()
        };
        let Latencies {
            ops: latency,
            gets: get_latency,
        } = std::mem::take(
            &mut *live
                .latency
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        let shard_accesses = if config.policy == Policy::Shard && ends_interval {
            store.harvest_shards()
        } else {
            Vec::new()
        };
        let mine = Tick {
            pairs,
            shard_accesses,
            ops: live.ops.swap(0, Ordering::Relaxed),
            modelled_ns: live.modelled_ns.swap(0, Ordering::Relaxed),
            workers: config.workers() as u64,
            gets: live.gets.swap(0, Ordering::Relaxed),
            remote_gets: live.remote_gets.swap(0, Ordering::Relaxed),
            cache_hits: live.cache_hits.swap(0, Ordering::Relaxed),
            cache_misses: live.cache_misses.swap(0, Ordering::Relaxed),
            counts: store.counts(),
            latency,
            get_latency,
        };
        let bytes = serde_json::to_vec(&mine).expect("a tick serializes");
        let gathered = node.all_gather(&bytes).map_err(Error::Verbs)?;
        let reports: Vec<Tick> = gathered
            .iter()
            .map(|b| {
                serde_json::from_slice(b)
                    .map_err(|e| Error::Corrupt(format!("a node's tick report: {e}")))
            })
            .collect::<Result<_>>()?;
        if config.policy.migrates() {
            let pairs: Vec<Vec<(u32, u32)>> = reports.iter().map(|t| t.pairs.clone()).collect();
            let planned = coordinator.plan(tick, &pairs, floor);
            let (asked, settled) = coordinator.tracking();
            store.track(asked, true);
            store.track(settled, false);
            interval_gets += reports.iter().map(|t| t.gets).sum::<u64>();
            if ends_interval {
                #[allow(clippy::cast_precision_loss)]
                {
                    shared_share = coordinator.shared() as f64 / interval_gets.max(1) as f64;
                }
                interval_gets = 0;
            }
            for planned in planned {
                if planned.target == store.rank() {
                    // A migrator that stopped on an error is gone (the node's
                    // run returns that error when it joins the migrator):
                    // its approvals have nobody to go to.
                    let _ = moves.send(planned.key);
                }
            }
        }
        if config.policy == Policy::Shard && ends_interval && tick < ticks {
            let held = Instant::now();
            move_shards(store, &reports, pause, config.workers())?;
            paused_ns += nanos(held.elapsed());
        }
        store.reclaim();
        let mut point = Point {
            t_s: begun.elapsed().as_secs_f64(),
            ..Point::default()
        };
        let (mut gets, mut remote, mut hits, mut misses) = (0u64, 0u64, 0u64, 0u64);
        let mut moved = Moved::default();
        let (mut latency, mut get_latency) = (Histogram::default(), Histogram::default());
        for t in &reports {
            #[allow(clippy::cast_precision_loss)]
            {
                point.ops_per_s += t.ops as f64 / tick_s;
                if t.modelled_ns > 0 {
                    point.modelled_ops_per_s +=
                        t.ops as f64 * t.workers as f64 * 1e9 / t.modelled_ns as f64;
                }
            }
            gets += t.gets;
            remote += t.remote_gets;
            hits += t.cache_hits;
            misses += t.cache_misses;
            moved.add(&t.counts);
            latency.merge(&t.latency);
            get_latency.merge(&t.get_latency);
        }
        #[allow(clippy::cast_precision_loss)]
        {
            point.remote_share = if gets == 0 {
                0.0
            } else {
                remote as f64 / gets as f64
            };
        }
        point.migrations = moved.migrations - moved_before.migrations;
        point.bytes_moved = (moved.words - moved_before.words) * 8;
        let ops = moved.ops - moved_before.ops;
        moved_before = moved;
        #[allow(clippy::cast_precision_loss)]
        {
            point.one_sided_per_migration =
                (point.migrations > 0).then(|| ops as f64 / point.migrations as f64);
            point.cache_hit_rate =
                (hits + misses > 0).then(|| hits as f64 / (hits + misses) as f64);
        }
        point.p50_ns = latency.quantile(0.5);
        point.p99_ns = latency.quantile(0.99);
        point.p999_ns = latency.quantile(0.999);
        point.get_p999_ns = get_latency.quantile(0.999);
        series.push(point);
    }
    Ok(Controlled {
        series,
        contended: coordinator.contended(),
        shared_share,
        paused_ns,
    })
}

/// The `shard` policy's move at an interval's end, from every node's
/// accesses per shard (`ticks`, by rank): plans, and if anything moves,
/// holds this node's `workers`, copies the shards planned to come here once
/// every node's workers are held, points the shard map at the new homes
/// once every copy is made, and drops the copies that left once every
/// node's map is repointed.
fn move_shards(store: &Store, ticks: &[Tick], pause: &Pause, workers: usize) -> Result<()> {
    let node = store.node();
    let homes: Vec<u32> = (0..store.placement().shards())
        .map(|shard| store.shard_home(shard))
        .collect();
    let accesses: Vec<Vec<u32>> = ticks.iter().map(|t| t.shard_accesses.clone()).collect();
    let plan = plan_shards(&homes, &accesses);
    if plan.is_empty() {
        return Ok(());
    }
    pause.hold(workers);
    let moved = (|| {
        node.barrier().map_err(Error::Verbs)?;
        let mut session = store.session();
        for m in plan.iter().filter(|m| m.to == store.rank()) {
            session.pull_shard(m.shard)?;
        }
        node.barrier().map_err(Error::Verbs)?;
        for m in &plan {
            store.set_shard_home(m.shard, m.to);
        }
        // Every map points at the new homes before any worker goes on, so
        // no Put forwarded by a released node lands on a copy being dropped.
        node.barrier().map_err(Error::Verbs)?;
        for m in plan.iter().filter(|m| m.from == store.rank()) {
            store.drop_shard(m.shard);
        }
        Ok(())
    })();
    pause.release();
    moved
}

/// Quantiles of a latency distribution.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    /// Median.
    pub p50_ns: u64,
    /// 99th percentile.
    pub p99_ns: u64,
    /// 99.9th percentile.
    pub p999_ns: u64,
}

impl Latency {
    fn of(histogram: &Histogram) -> Latency {
        Latency {
            p50_ns: histogram.quantile(0.5),
            p99_ns: histogram.quantile(0.99),
            p999_ns: histogram.quantile(0.999),
        }
    }
}

/// A benchmark run of the whole job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// Times and memory (`peak_mem_bytes`: the nodes' registered regions,
    /// as reserved; under `shard` each has room for the whole graph).
    #[serde(flatten)]
    pub summary: RunSummary,
    /// The policy.
    pub policy: Policy,
    /// The coordinator's plan (what the migrating policies decide by).
    pub plan: Plan,
    /// Nodes asked for (the ideal policy runs on one and scales by this).
    pub nodes: u32,
    /// Queries done.
    pub queries: u64,
    /// Puts done.
    pub puts: u64,
    /// Queries and Puts per second, wall clock (ideal: times `nodes`).
    pub ops_per_s: f64,
    /// Queries and Puts per second of modelled time (ideal: times `nodes`).
    pub modelled_ops_per_s: f64,
    /// Share of Gets that needed a remote operation.
    pub remote_share: f64,
    /// Share of Gets whose value was read from another node (the rest of
    /// `remote_share` only looked the key up remotely).
    pub remote_value_share: f64,
    /// Share of remote key lookups the location cache answered.
    pub cache_hit_rate: f64,
    /// Values migrated (a value moved twice counts twice; under `shard`,
    /// the keys of the shards moved).
    pub keys_moved: u64,
    /// `keys_moved` as a share of the graph's vertices.
    pub keys_moved_share: f64,
    /// Bytes of the values migrated.
    pub bytes_moved: u64,
    /// One-sided operations per migration (per key of a shard moved).
    pub one_sided_ops_per_migration: f64,
    /// Shards moved (`shard` policy).
    pub shards_moved: u64,
    /// Time the workers were held while shards moved, the longest of any
    /// node's (`shard` policy; part of the wall-clock run).
    pub paused_ns: u64,
    /// Migrations that lost their CAS and started over.
    pub migration_retries: u64,
    /// Migrations refused (value too large to move).
    pub migrations_refused: u64,
    /// Applications refused because two nodes read the pair within the
    /// margin of each other.
    pub contended: u64,
    /// Share of the last full interval's Gets that went to pairs another
    /// node read more: remote wherever each pair's one copy lives (a floor
    /// on `remote_share` from the workload's sharing, as the monitors saw it).
    pub shared_share: f64,
    /// Puts forwarded to a home or a holder.
    pub forwarded_puts: u64,
    /// Reads that met an invalidated block and started over.
    pub read_retries: u64,
    /// Operation latency, wall clock.
    pub latency: Latency,
    /// Operation latency, modelled.
    pub modelled_latency: Latency,
    /// Means over the ticks of the last monitoring interval (after the
    /// migrations of the one before): the steady state.
    pub last_interval: Steady,
    /// One point per tick.
    pub series: Vec<Point>,
}

/// Means over some ticks of the time series.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Steady {
    /// Ticks averaged.
    pub ticks: usize,
    /// Queries and Puts per second, wall clock (ideal: times `nodes`).
    pub ops_per_s: f64,
    /// Queries and Puts per second of modelled time (ideal: times `nodes`).
    pub modelled_ops_per_s: f64,
    /// Share of Gets that needed a remote operation.
    pub remote_share: f64,
}

impl Steady {
    fn of(points: &[Point]) -> Steady {
        #[allow(clippy::cast_precision_loss)]
        let n = points.len().max(1) as f64;
        let mean = |f: fn(&Point) -> f64| points.iter().map(f).sum::<f64>() / n;
        Steady {
            ticks: points.len(),
            ops_per_s: mean(|p| p.ops_per_s),
            modelled_ops_per_s: mean(|p| p.modelled_ops_per_s),
            remote_share: mean(|p| p.remote_share),
        }
    }
}

/// The job's report from its nodes' reports (rank order), for a run of
/// `config` asked for on `nodes` nodes over a graph of `vertices`.
pub fn join(reports: &[NodeReport], config: &Config, nodes: u32, vertices: u32) -> Report {
    let scale = if config.policy == Policy::Ideal {
        f64::from(nodes)
    } else {
        1.0
    };
    let mut tally = Tally::default();
    let (mut latency, mut modelled) = (Histogram::default(), Histogram::default());
    let mut counts = StoreCounts::default();
    let (mut queries, mut puts, mut refused, mut paused_ns) = (0, 0, 0, 0);
    let mut modelled_ops_per_s = 0.0;
    let mut summary = RunSummary {
        threads: config.workers(),
        ..RunSummary::default()
    };
    for r in reports {
        tally.add(&r.tally);
        latency.merge(&r.latency);
        modelled.merge(&r.modelled_latency);
        queries += r.queries;
        puts += r.puts;
        refused += r.refused;
        modelled_ops_per_s += r.modelled_ops_per_s;
        counts.migrations += r.counts.migrations;
        counts.words_moved += r.counts.words_moved;
        counts.migration_ops += r.counts.migration_ops;
        counts.migration_retries += r.counts.migration_retries;
        counts.forwarded_puts += r.counts.forwarded_puts;
        counts.shards_moved += r.counts.shards_moved;
        paused_ns = paused_ns.max(r.paused_ns);
        summary.load_ns = summary.load_ns.max(r.load_ns);
        summary.compute_ns = summary.compute_ns.max(r.run_ns);
        summary.peak_mem_bytes += r.region_bytes;
    }
    summary.wall_ns = summary.load_ns + summary.compute_ns;
    let ratio = |a: u64, b: u64| {
        #[allow(clippy::cast_precision_loss)]
        if b == 0 {
            0.0
        } else {
            a as f64 / b as f64
        }
    };
    // Ideal's one node stands for all of them, in its series too.
    let series: Vec<Point> = reports
        .first()
        .map(|r| {
            r.series
                .iter()
                .map(|p| Point {
                    ops_per_s: p.ops_per_s * scale,
                    modelled_ops_per_s: p.modelled_ops_per_s * scale,
                    ..p.clone()
                })
                .collect()
        })
        .unwrap_or_default();
    let last = usize::try_from(config.ticks_per_interval())
        .unwrap_or(usize::MAX)
        .min(series.len());
    #[allow(clippy::cast_precision_loss)]
    let ops_per_s = (queries + puts) as f64 * 1e9 / summary.compute_ns.max(1) as f64 * scale;
    Report {
        policy: config.policy,
        plan: config.store.plan,
        nodes,
        queries,
        puts,
        ops_per_s,
        modelled_ops_per_s: modelled_ops_per_s * scale,
        remote_share: ratio(tally.remote_gets, tally.gets),
        remote_value_share: ratio(tally.remote_values, tally.gets),
        cache_hit_rate: ratio(tally.cache_hits, tally.cache_hits + tally.cache_misses),
        keys_moved: counts.migrations,
        keys_moved_share: ratio(counts.migrations, u64::from(vertices)),
        bytes_moved: counts.words_moved * 8,
        one_sided_ops_per_migration: ratio(counts.migration_ops, counts.migrations),
        shards_moved: counts.shards_moved,
        paused_ns,
        migration_retries: counts.migration_retries,
        migrations_refused: refused,
        contended: reports.first().map_or(0, |r| r.contended),
        shared_share: reports.first().map_or(0.0, |r| r.shared_share),
        forwarded_puts: counts.forwarded_puts,
        read_retries: tally.retries,
        latency: Latency::of(&latency),
        modelled_latency: Latency::of(&modelled),
        last_interval: Steady::of(&series[series.len() - last..]),
        series,
        summary,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Ideal runs on one node and stands for `nodes` of them: its rates,
    /// in the summary, the last interval and every point of the series,
    /// are that node's times `nodes`; another policy's are as measured.
    #[test]
    fn ideal_scales_its_rates_everywhere_and_no_other_policy_does() {
        let point = |ops| Point {
            t_s: 1.0,
            ops_per_s: ops,
            modelled_ops_per_s: 2.0 * ops,
            remote_share: 0.25,
            ..Point::default()
        };
        let node = NodeReport {
            run_ns: 1_000_000_000,
            queries: 90,
            puts: 10,
            modelled_ops_per_s: 200.0,
            series: vec![point(100.0), point(300.0)],
            ..NodeReport::default()
        };
        for (policy, scale) in [(Policy::Ideal, 8.0), (Policy::SplitCache, 1.0)] {
            let config = Config {
                policy,
                ..Config::default()
            };
            let report = join(std::slice::from_ref(&node), &config, 8, 1000);
            assert_eq!(report.ops_per_s, 100.0 * scale, "{policy:?}");
            assert_eq!(report.modelled_ops_per_s, 200.0 * scale, "{policy:?}");
            let series: Vec<(f64, f64, f64)> = report
                .series
                .iter()
                .map(|p| (p.ops_per_s, p.modelled_ops_per_s, p.remote_share))
                .collect();
            assert_eq!(
                series,
                [
                    (100.0 * scale, 200.0 * scale, 0.25),
                    (300.0 * scale, 600.0 * scale, 0.25)
                ],
                "{policy:?}"
            );
            assert_eq!(report.last_interval.ops_per_s, 200.0 * scale, "{policy:?}");
            assert_eq!(report.last_interval.remote_share, 0.25, "{policy:?}");
        }
    }

    #[test]
    fn the_default_value_room_grows_with_the_puts() {
        let room = |mix: &str| Mix::from_str(mix).unwrap().default_value_headroom();
        let base = StoreConfig::default().value_headroom;
        assert_eq!(room("100/0"), base);
        assert_eq!(room("95/5"), base);
        assert_eq!(room("94/6"), 2 * base);
        assert_eq!(room("50/50"), 10 * base);
        assert_eq!(room("0/100"), 20 * base);
    }

    /// Draws `n` starts `elapsed` into the run, counted by start.
    fn drawn(config: &Config, starts: &[u32], elapsed: Duration, n: usize) -> Vec<usize> {
        let draw = Draw::new(starts, config).unwrap();
        let mut rng = Pcg64::seed_from_u64(3);
        let mut counts = vec![0; starts.len()];
        for _ in 0..n {
            let v = draw.start(&mut rng, elapsed);
            counts[starts.iter().position(|&s| s == v).unwrap()] += 1;
        }
        counts
    }

    #[test]
    fn zipf_0_draws_the_scope_evenly_and_0_99_favours_its_first() {
        // Starts are ids with a neighbour, so not 0..64 in general.
        let starts: Vec<u32> = (0..128).map(|i| i * 3 + 1).collect();
        let config = |zipf| Config {
            zipf,
            scope: 64,
            ..Config::default()
        };
        let uniform = drawn(&config(0.0), &starts, Duration::ZERO, 64_000);
        assert!(uniform[64..].iter().all(|&c| c == 0), "outside the scope");
        // 1,000 each on average; 5 standard deviations is about 160.
        assert!(
            uniform[..64].iter().all(|&c| (840..1_160).contains(&c)),
            "{uniform:?}"
        );
        let skewed = drawn(&config(0.99), &starts, Duration::ZERO, 64_000);
        assert!(skewed[64..].iter().all(|&c| c == 0), "outside the scope");
        // Rank 1 against rank 64: 64^0.99, about 61 times as often.
        assert!(skewed[0] > 40 * skewed[63].max(1), "{skewed:?}");
    }

    #[test]
    fn the_dynamic_scope_moves_to_the_next_disjoint_range_each_period() {
        let starts: Vec<u32> = (0..96).map(|i| i * 2).collect();
        let config = Config {
            zipf: 0.0,
            scope: 32,
            shift_every: Some(Duration::from_secs(2)),
            ..Config::default()
        };
        let in_range = |elapsed_ms, range: std::ops::Range<usize>| {
            let counts = drawn(&config, &starts, Duration::from_millis(elapsed_ms), 3_200);
            let outside: usize = counts
                .iter()
                .enumerate()
                .filter(|(i, _)| !range.contains(i))
                .map(|(_, c)| c)
                .sum();
            assert_eq!(outside, 0, "at {elapsed_ms} ms: {counts:?}");
            assert!(counts[range].iter().all(|&c| c > 0), "at {elapsed_ms} ms");
        };
        in_range(0, 0..32);
        in_range(1_999, 0..32);
        in_range(2_000, 32..64);
        in_range(5_000, 64..96);
        // Past the starts kept, the scope wraps round to the first range.
        in_range(6_500, 0..32);
    }
}
