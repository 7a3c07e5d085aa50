//! quiver-bsp: RGraph's bulk-synchronous graph analytics (Cui et al.,
//! *Journal of Software* 2022), the six LDBC Graphalytics algorithms (BFS,
//! PageRank, WCC, SSSP, CDLP, LCC) with exactly the benchmark's
//! definitions, on one process or on the nodes of a quiver-verbs job.
//!
//! What a user gets: [`run`] computes one [`Algorithm`] on a `quiver-csr`
//! graph and returns its per-vertex [`Values`] and a [`Report`] (the shared
//! run summary, and each superstep's direction, active vertices, edges read
//! and messages); [`run_node`] does the same as one node of a job, and
//! [`job::BspTask`] is that as a task of quiver-verbs' job runner, whose
//! nodes' values [`job::join`] puts together. [`reference::run`] computes
//! the same values the simplest way on one thread: the test oracle and the
//! COST yardstick.
//!
//! The model, as the paper's: [`partition`] cuts the vertices into one
//! chunk of consecutive ids per node (balancing Σ F(P_i)); a node owns its
//! chunk's vertices (masters) and their out-edges, and keeps every other
//! vertex's value as a mirror. An algorithm is written with
//! `process_vertices(active, work)` and `process_edges(active, program)`
//! ([`engine`]), its edge program saying what a vertex signals along an
//! edge and how messages reduce into a vertex. Each superstep either pushes
//! from the active masters (RGraph's only mode; a mirror that changed
//! forwards to its master, a sum once per superstep) or pulls into every
//! master from its active in-neighbours (GAPBS's bottom-up step), chosen
//! by the frontier's size unless the caller fixes it. Before a pull, each
//! node sends its active masters' states to the nodes where they are
//! mirrors, so that a node reads only its own vertices' lists: on a
//! symmetric graph its memory holds its share of the graph, not the whole
//! file, which a node of several opens lazily (`Graph::open_lazily`),
//! releasing the other nodes' offsets and lists once it has read them (to
//! partition, or to transpose a directed graph). A process alone (the CLI
//! without a job) reads the file into its own memory on huge pages
//! (`Graph::load`), which its workers read faster than the file's
//! mapping. Which nodes need a vertex's state is read off its sorted
//! list; a node of several checks that its lists are sorted. This departs
//! from the paper's Reduce-only synchronisation; Gemini's dense mode, which keeps
//! it, has every node read every list of a symmetric graph or hold a
//! transpose of its edges beside them.
//! Messages travel in blocks of 256 by one-sided WRITEs into per-worker
//! receive rings at the target (`rings`), or by SEND/RECV as the baseline
//! (`sends`). Worker threads grab 64 active vertices at a time from one
//! shared counter, RGraph's task grabbing (1,024 destinations in a pull).
//! WCC first joins each node's own vertices by union-find (Afforest), so
//! that propagation starts only from the vertices with a neighbour on
//! another node (none on one node).
//!
//! Between nodes, a node out of its own tasks in a push superstep takes
//! tasks from the end of another node's published worklist with one-sided
//! READ and CAS, the paper's task migration (`migrate`); a migrated task's
//! edges are read from the graph file every node maps, which stands in for
//! the paper's RDMA READ of the owner's adjacency and its migration cache.
//!
//! Invariants: results do not depend on the direction, the thread count,
//! the node count, the transport or the schedule (BFS depths, WCC
//! partitions and CDLP labels exactly; PageRank, SSSP and LCC up to
//! floating-point summation order); vertex ids are dense, `0..|V|`.
//! PageRank holds each vertex's contribution (`rank / out-degree`) as
//! `f32`, as GAPBS holds its scores, so a gather's random reads touch half
//! the cache lines, and keeps no other array of ranks: a rank is its
//! contribution times the out-degree (a sink holds its rank in that
//! slot). Sums stay `f64`; ranks are within 1e-6 relative of the `f64`
//! definition (9.5e-8 on Kronecker 20; Graphalytics allows 1e-4).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod algorithm;
mod channel;
pub mod engine;
pub mod frontier;
pub mod job;
mod lcc;
mod local;
mod migrate;
pub mod partition;
pub mod program;
mod programs;
pub mod reference;
mod rings;
mod sends;
mod transpose;

use std::ops::Range;
use std::path::{Path, PathBuf};

use quiver_csr::Graph;
use quiver_run::{InvalidArgument, Progress, RunSummary, Stopwatch, Unit};
use quiver_verbs::{Node, Reduce};
use serde::{Deserialize, Serialize};

pub use algorithm::{graphalytics_depth, Algorithm, Values, GRAPHALYTICS_UNREACHED, UNREACHED};
pub use engine::{Direction, Superstep, Transport};

/// What can go wrong in a run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A parameter that makes no sense.
    #[error("invalid argument")]
    InvalidArgument(#[from] InvalidArgument),
    /// The graph breaks what the run relies on.
    #[error("the graph cannot be used")]
    Graph(#[source] quiver_csr::Error),
    /// The worker threads could not be started.
    #[error("starting the worker threads")]
    Threads(#[source] rayon::ThreadPoolBuildError),
    /// Talking to the other nodes failed.
    #[error("talking to the other nodes")]
    Verbs(#[source] quiver_verbs::Error),
    /// Another node stopped taking part (its messages never came).
    #[error("{0}")]
    Stalled(String),
    /// What arrived from another node makes no sense.
    #[error("a message from another node is corrupt: {0}")]
    Corrupt(String),
    /// The caller asked the run to stop (its progress says so after a
    /// superstep). Every node of a distributed run must be asked: one
    /// that stops alone leaves the others waiting at the next barrier.
    #[error(transparent)]
    Cancelled(#[from] quiver_run::Cancelled),
}

impl Error {
    pub(crate) fn invalid(parameter: &'static str, reason: impl Into<String>) -> Error {
        Error::InvalidArgument(InvalidArgument::new(parameter, reason))
    }
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// How to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Config {
    /// Worker threads per node (0: one per core).
    pub threads: usize,
    /// Push, pull, or chosen per superstep.
    pub direction: Direction,
    /// How messages travel between nodes.
    pub transport: Transport,
    /// Task migration between nodes in push supersteps: a node out of its
    /// own tasks takes some from another while more than this many are
    /// left there (`None`: no migration, the `--no-balance` baseline). The
    /// default, 4,096, leaves small remainders to their owner: on fabrics
    /// whose one-sided operations cost the target CPU (tcp), each claim
    /// slows the node it relieves.
    pub migrate_threshold: Option<u32>,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            threads: 0,
            direction: Direction::Auto,
            transport: Transport::OneSided,
            migrate_threshold: Some(4096),
        }
    }
}

/// What a run did on one node.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    /// The algorithm and its parameters.
    pub algorithm: Algorithm,
    /// The direction asked for.
    pub direction: Direction,
    /// How messages travelled.
    pub transport: Transport,
    /// This node's rank and the job's size.
    pub node: (u32, u32),
    /// The vertices this node owns.
    pub owned: Range<u32>,
    /// Edges this node holds (on the algorithm's side).
    pub edges: u64,
    /// Times and threads. `load_ns` builds this node's edge layouts (and
    /// registers its rings); `compute_ns` is the algorithm alone.
    /// `peak_mem_bytes` counts its edge layouts, state arrays and rings.
    #[serde(flatten)]
    pub summary: RunSummary,
    /// This node's process peak resident memory (Linux's `VmHWM`), when
    /// the kernel says: everything the process touched, the graph file's
    /// mapped pages included, against the counted `peak_mem_bytes`.
    pub peak_rss_bytes: Option<u64>,
    /// Of `peak_rss_bytes`, the resident code at the end (the program and
    /// its shared libraries, `quiver_run::code_rss_bytes`): the same on
    /// any graph, so a small graph's share looks costlier than it is.
    pub code_rss_bytes: Option<u64>,
    /// Every superstep of `process_edges`, in order.
    pub supersteps: Vec<Superstep>,
    /// Edges read over all supersteps.
    pub edges_read: u64,
    /// Messages this node sent to other nodes.
    pub messages: u64,
    /// Bytes of messages this node sent (into rings, or as SENDs).
    pub bytes_sent: u64,
    /// WRITEs or SENDs this node posted (blocks, END markers, credits).
    pub writes: u64,
    /// Tasks this node took from other nodes' worklists.
    pub migrated: u64,
    /// Time this node's workers computed (its own tasks and migrated ones),
    /// summed over supersteps, in nanoseconds: the load balance's measure.
    pub busy_ns: u64,
    /// BFS: edges of the reached vertices (over the whole graph) per second
    /// of compute (Graph500's TEPS); 0 for the other algorithms.
    pub teps: f64,
}

/// One computation of an algorithm on a graph, as `quiver bsp --json`
/// prints it: the graph, every node's [`Report`] and a line about the
/// values.
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    /// The graph's file.
    pub graph: PathBuf,
    /// |V|.
    pub vertices: u32,
    /// |E| (stored directed edges).
    pub edges: u64,
    /// Every node's report, by rank; empty when the reference ran instead.
    pub nodes: Vec<Report>,
    /// The reference's time in nanoseconds, when it ran instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reference_ns: Option<u64>,
    /// One line about the values ([`Values::summary`]).
    pub summary: String,
    /// The file the values were written to, if any.
    pub output: Option<PathBuf>,
}

/// Runs `algorithm` on `graph` on this machine alone, with `config`,
/// telling `progress` of every superstep.
pub fn run(
    graph: &Graph,
    algorithm: &Algorithm,
    config: &Config,
    progress: &dyn Progress,
) -> Result<(Values, Report)> {
    run_on(None, graph, algorithm, config, progress)
}

/// Runs `algorithm` on this node's part of `graph` as one node of a job
/// (every node calls it with the same arguments); returns the values of
/// the vertices it owns.
pub fn run_node(
    node: &Node,
    graph: &Graph,
    algorithm: &Algorithm,
    config: &Config,
    progress: &dyn Progress,
) -> Result<(Values, Report)> {
    run_on(Some(node), graph, algorithm, config, progress)
}

fn run_on(
    node: Option<&Node>,
    graph: &Graph,
    algorithm: &Algorithm,
    config: &Config,
    progress: &dyn Progress,
) -> Result<(Values, Report)> {
    let wall = Stopwatch::start();
    algorithm.validate(graph)?;
    let mut threads = quiver_run::worker_threads(config.threads);
    let load = Stopwatch::start();
    let (rank, size) = node.map_or((0, 1), |n| (n.rank().0, n.size()));
    let partition = partition::Partition::rgraph(graph.offsets(), size);
    let owned = partition.range(rank as usize);
    if size > 1 {
        // Which nodes need a vertex's state is read off its sorted list.
        if let Some(v) = graph.first_unsorted_list(owned.clone()) {
            return Err(Error::Graph(quiver_csr::Error::Corrupt {
                path: graph.path().unwrap_or(Path::new("<memory>")).to_owned(),
                detail: format!(
                    "vertex {v}'s list is not sorted by target, which a node of several relies on"
                ),
            }));
        }
    }
    // A node of several reads only its own lists from here on (LCC and
    // migrated tasks map others' back as they read them).
    let (side, flow) = programs::layout(algorithm, config.direction);
    let local = local::LocalGraph::new(graph, owned.clone(), side, flow, Some(&partition));
    let peers = match node {
        Some(node) if size > 1 => {
            // Every node runs as many workers as the largest asks for: the
            // rings pair each worker with its namesake on every node.
            let most = node
                .all_reduce(threads as u64, Reduce::Max)
                .map_err(Error::Verbs)?;
            threads = usize::try_from(most).expect("a thread count fits usize");
            Some(engine::Peers::new(
                node,
                partition,
                threads,
                config.transport,
                config.migrate_threshold,
            )?)
        }
        _ => None,
    };
    let memory = local.bytes()
        + 16 * u64::from(graph.num_vertices())
        + peers.as_ref().map_or(0, engine::Peers::buffer_bytes);
    let edges = local.num_edges();
    let mut engine = engine::Engine::new(graph, local, peers, threads, config.direction, progress)?;
    let load_ns = load.elapsed_ns();
    progress.start("supersteps", Unit::Rounds, None);
    let compute = Stopwatch::start();
    let values = programs::run(&mut engine, algorithm)?;
    let compute_ns = compute.elapsed_ns();
    let supersteps = engine.supersteps().to_vec();
    let mut summary = RunSummary {
        load_ns,
        compute_ns,
        threads,
        peak_mem_bytes: memory,
        ..RunSummary::default()
    };
    let teps = match &values {
        Values::Depths(depths) => {
            let reached: u64 = owned
                .clone()
                .zip(depths)
                .filter(|&(_, &d)| d != UNREACHED)
                .map(|(v, _)| graph.degree(v))
                .sum();
            summary.per_compute_second(engine.sum(reached)?)
        }
        _ => 0.0,
    };
    summary.wall_ns = wall.elapsed_ns();
    Ok((
        values,
        Report {
            algorithm: *algorithm,
            direction: config.direction,
            transport: config.transport,
            node: (rank, size),
            owned,
            edges,
            summary,
            edges_read: supersteps.iter().map(|s| s.edges).sum(),
            messages: supersteps.iter().map(|s| s.messages).sum(),
            bytes_sent: supersteps.iter().map(|s| s.bytes_sent).sum(),
            writes: supersteps.iter().map(|s| s.writes).sum(),
            migrated: supersteps.iter().map(|s| s.migrated).sum(),
            busy_ns: supersteps.iter().map(|s| s.busy_ns).sum(),
            peak_rss_bytes: quiver_run::peak_rss_bytes(),
            code_rss_bytes: quiver_run::code_rss_bytes(),
            supersteps,
            teps,
        },
    ))
}
