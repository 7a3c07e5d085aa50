//! quiver-walker: GraphWalker's random walks on graphs larger than memory,
//! with its two baselines built in (DrunkardMob's iteration-based walking
//! and an in-memory reference), as a library.
//!
//! A run takes a `.qcsr` graph, a [`Config`] (mode, memory budget, block
//! size, I/O, threads, seed) and a [`WalkApp`]; it returns a [`Report`] with
//! the I/O and step counts the paper measures and the app's result.
//!
//! Invariants:
//! - Every random choice goes through one step function with a counter-based
//!   generator: in exact mode keyed by (seed, walk id, hop), so every mode,
//!   block size, budget and thread count gives the same walks.
//! - Every walk is visited at every position exactly once, hop 0 included,
//!   and ends after at most `length` steps.
//! - No walk is lost or duplicated: walks wait in quiver-walkstate pools.
//!
//! No features; no `unsafe`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod app;
pub mod apps;
mod config;
mod engine;
mod loaded;
mod report;
mod rng;
mod spec;

pub use app::{Visit, WalkApp};
pub use config::{Config, IoMode, Mode};
pub use engine::{run, run_with_progress};
pub use quiver_run::{NoProgress, Progress, RunSummary, Unit};
pub use report::Report;
pub use spec::{DeadEnd, Kind, Node2Vec, Starts, WalkSpec};

/// Everything that can go wrong in a walk run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The graph could not be opened or is not a valid `.qcsr`.
    #[error(transparent)]
    Graph(#[from] quiver_csr::Error),
    /// Reading graph data failed.
    #[error("reading graph data from {}", path.display())]
    Io {
        /// The graph file.
        path: std::path::PathBuf,
        /// The cause.
        #[source]
        source: quiver_io::Error,
    },
    /// Walk state could not be encoded or spilled.
    #[error(transparent)]
    Walks(#[from] quiver_walkstate::Error),
    /// A setting or argument makes no sense (for this graph).
    #[error("invalid argument")]
    InvalidArgument(#[from] quiver_run::InvalidArgument),
    /// Writing an application's output failed.
    #[error("writing {}", path.display())]
    Output {
        /// The output file.
        path: std::path::PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// The argument `parameter` makes no sense because of `reason`.
    pub(crate) fn invalid(parameter: &'static str, reason: impl Into<String>) -> Error {
        Error::InvalidArgument(quiver_run::InvalidArgument::new(parameter, reason))
    }
}

/// Result with [`Error`] as the default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;
