//! Progress of long work, reported by libraries and drawn by the driver.

/// What a phase counts, so that a progress bar can print it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Unit {
    /// Bytes of input or output.
    Bytes,
    /// Edges of a graph.
    Edges,
    /// Random walks.
    Walks,
    /// Vertices of a graph.
    Vertices,
    /// Supersteps, rounds or other iterations.
    Rounds,
    /// Operations (requests, queries, updates).
    Ops,
}

/// Hears how long work advances. Every method defaults to doing nothing, so
/// an implementation listens only to what it shows.
pub trait Progress: Sync {
    /// A new phase begins: `total` units of work if known.
    fn start(&self, _phase: &'static str, _unit: Unit, _total: Option<u64>) {}
    /// `delta` more units of the current phase are done.
    fn advance(&self, _delta: u64) {}
    /// A short status of the current phase beside its count
    /// (`"12.5M steps, 1.2 GiB read"`).
    fn note(&self, _note: &str) {}
    /// Whether the caller asks the run to stop. Engines look where they
    /// report progress (`progress.check()`) and stop with their
    /// `Cancelled` error, dropping their state and temporary files.
    fn cancelled(&self) -> bool {
        false
    }
}

impl dyn Progress + '_ {
    /// `Err(Cancelled)` once the caller asked the run to stop.
    pub fn check(&self) -> Result<(), Cancelled> {
        if self.cancelled() {
            Err(Cancelled)
        } else {
            Ok(())
        }
    }
}

/// A run stopped because its caller asked it to ([`Progress::cancelled`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("cancelled by the caller")]
pub struct Cancelled;

/// A [`Progress`] that ignores everything.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoProgress;

impl Progress for NoProgress {}
