//! quiver-bsp: RGraph's bulk-synchronous graph analytics (Cui et al.,
//! *Journal of Software* 2022), the six LDBC Graphalytics algorithms (BFS,
//! PageRank, WCC, SSSP, CDLP, LCC) with exactly the benchmark's
//! definitions.
//!
//! What a user gets: [`run`] computes one [`Algorithm`] on a `quiver-csr`
//! graph and returns its per-vertex [`Values`] and a [`Report`] (the shared
//! run summary, and each superstep's direction, active vertices and edges
//! read); [`reference::run`] computes the same values the simplest way on
//! one thread, the test oracle and the COST yardstick.
//!
//! The engine ([`engine`]) runs supersteps in the paper's model: an
//! algorithm is written with `process_vertices(active, work)` and
//! `process_edges(active, program)`, its edge program saying how a value
//! moves along an edge both ways, so each superstep either pushes from the
//! active vertices (RGraph's mode) or pulls into every vertex from its
//! active in-neighbours (Gemini's and GAPBS's dense mode), chosen by the
//! frontier's edge count unless the caller fixes the direction. Worker
//! threads grab 64 vertices at a time from one shared counter, RGraph's
//! task grabbing. [`partition`] holds the paper's vertex-chunk partitioning
//! (Σ F(P_i) balance) that spreads the graph over nodes.
//!
//! Invariants: results do not depend on the direction, the thread count or
//! the schedule (BFS depths, WCC partitions and CDLP labels exactly;
//! PageRank, SSSP and LCC up to floating-point summation order); vertex
//! ids are dense, `0..|V|`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod algorithm;
pub mod engine;
pub mod partition;
mod programs;
pub mod reference;
mod transpose;

use quiver_csr::Graph;
use quiver_run::{InvalidArgument, Progress, RunSummary, Stopwatch, Unit};
use serde::{Deserialize, Serialize};

pub use algorithm::{Algorithm, Values, UNREACHED};
pub use engine::{Direction, Superstep};

/// What can go wrong in a run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A parameter that makes no sense.
    #[error("invalid argument")]
    InvalidArgument(#[from] InvalidArgument),
    /// The worker threads could not be started.
    #[error("starting the worker threads")]
    Threads(#[source] rayon::ThreadPoolBuildError),
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
    /// Worker threads (0: one per core).
    pub threads: usize,
    /// Push, pull, or chosen per superstep.
    pub direction: Direction,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            threads: 0,
            direction: Direction::Auto,
        }
    }
}

/// What a run did.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The algorithm and its parameters.
    pub algorithm: Algorithm,
    /// The direction asked for.
    pub direction: Direction,
    /// Times and threads. `load_ns` builds the in-edges of a directed
    /// graph (the graph itself is opened by the caller); `compute_ns` is
    /// the algorithm alone.
    #[serde(flatten)]
    pub summary: RunSummary,
    /// Every superstep of `process_edges`, in order.
    pub supersteps: Vec<Superstep>,
    /// Edges read over all supersteps.
    pub edges_read: u64,
    /// BFS: edges of the reached vertices per second of compute (Graph500's
    /// TEPS); 0 for the other algorithms.
    pub teps: f64,
}

/// Runs `algorithm` on `graph` with `config`, telling `progress` of every
/// superstep.
pub fn run(
    graph: &Graph,
    algorithm: &Algorithm,
    config: &Config,
    progress: &dyn Progress,
) -> Result<(Values, Report)> {
    let wall = Stopwatch::start();
    algorithm.validate(graph)?;
    let threads = if config.threads == 0 {
        std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
    } else {
        config.threads
    };
    let load = Stopwatch::start();
    let mut engine = engine::Engine::new(graph, threads, config.direction, progress)?;
    let load_ns = load.elapsed_ns();
    progress.start("supersteps", Unit::Rounds, None);
    let compute = Stopwatch::start();
    let values = programs::run(&mut engine, algorithm);
    let compute_ns = compute.elapsed_ns();
    let supersteps = engine.supersteps().to_vec();
    let edges_read = supersteps.iter().map(|s| s.edges).sum();
    let mut summary = RunSummary {
        load_ns,
        compute_ns,
        threads,
        ..RunSummary::default()
    };
    let teps = match &values {
        Values::Depths(depths) if matches!(algorithm, Algorithm::Bfs { .. }) => {
            let traversed: u64 = (0..graph.num_vertices())
                .filter(|&v| depths[v as usize] != UNREACHED)
                .map(|v| graph.degree(v))
                .sum();
            summary.per_compute_second(traversed)
        }
        _ => 0.0,
    };
    summary.wall_ns = wall.elapsed_ns();
    Ok((
        values,
        Report {
            algorithm: *algorithm,
            direction: config.direction,
            summary,
            supersteps,
            edges_read,
            teps,
        },
    ))
}
