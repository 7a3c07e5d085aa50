//! quiver-run: the contract between every Quiver library and the driver that
//! runs it, written once.
//!
//! - [`Progress`]: how long work tells its caller how far it has come. The
//!   libraries call it; only the driver draws anything.
//! - [`RunSummary`]: the figures every engine report embeds (flattened into
//!   its JSON), timed the way the peers time themselves: `load_ns` reads the
//!   graph, `compute_ns` is the algorithm alone, `wall_ns` is both and the
//!   rest.
//! - [`worker_threads`]: what a `threads` setting means, the same in every
//!   engine (0: one per core).
//! - [`InvalidArgument`]: a setting that makes no sense, naming the library
//!   parameter (never a command-line flag). Every crate's error enum wraps it
//!   as its source, so the driver finds it in any error chain and exits with
//!   the usage code without knowing which crate said no.
//!
//! Invariants: this crate depends on no other Quiver crate, so every one of
//! them may depend on it. No features; no `unsafe`.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod memory;
mod progress;
mod summary;

pub use memory::{code_rss_bytes, peak_rss_bytes};
pub use progress::{Cancelled, NoProgress, Progress, Unit};
pub use summary::{RunSummary, Stopwatch};

/// The worker threads a `threads` setting asks for: the number given, or
/// one per core for 0 (as `xz -T0` and `zstd -T0` read it). Every engine
/// reads its setting through this, so that 0 means the same everywhere.
pub fn worker_threads(threads: usize) -> usize {
    match threads {
        0 => std::thread::available_parallelism().map_or(1, std::num::NonZero::get),
        n => n,
    }
}

/// A setting or argument that makes no sense: the caller's mistake, not a
/// failure of the run.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{parameter}: {reason}")]
pub struct InvalidArgument {
    /// The library's name for the parameter (`mem_budget`, `source`).
    pub parameter: &'static str,
    /// What is wrong with it, as a lowercase phrase.
    pub reason: String,
}

impl InvalidArgument {
    /// `parameter` is wrong because of `reason`.
    pub fn new(parameter: &'static str, reason: impl Into<String>) -> InvalidArgument {
        InvalidArgument {
            parameter,
            reason: reason.into(),
        }
    }
}

/// Whether anything in `error`'s chain of sources is an [`InvalidArgument`].
pub fn is_invalid_argument(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut cause = Some(error);
    while let Some(e) = cause {
        if e.is::<InvalidArgument>() {
            return true;
        }
        cause = e.source();
    }
    false
}

/// `error` and its sources, joined by `": "`, as the driver prints them
/// (a library error's own message never repeats its source's).
pub fn chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut cause = error.source();
    while let Some(e) = cause {
        text.push_str(": ");
        text.push_str(&e.to_string());
        cause = e.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    enum Outer {
        #[error("invalid argument")]
        Invalid(#[from] InvalidArgument),
        #[error("other")]
        Other(#[source] std::io::Error),
    }

    #[test]
    fn zero_threads_are_one_per_core() {
        let cores = std::thread::available_parallelism().unwrap().get();
        assert_eq!(worker_threads(0), cores);
        assert_eq!(worker_threads(3), 3);
    }

    #[test]
    fn invalid_arguments_are_found_through_wrappers() {
        let wrapped = Outer::from(InvalidArgument::new("seed", "must be odd"));
        assert!(is_invalid_argument(&wrapped));
        assert_eq!(wrapped.source().unwrap().to_string(), "seed: must be odd");
        assert_eq!(chain(&wrapped), "invalid argument: seed: must be odd");
        let other = Outer::Other(std::io::Error::other("disk"));
        assert!(!is_invalid_argument(&other));
    }

    use std::error::Error as _;
}
