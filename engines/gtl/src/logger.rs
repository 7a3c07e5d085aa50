//! The host's update logger (GraphSSD §3.4): updates wait in host DRAM
//! and reach the device as one batch when a page's worth of records has
//! gathered (16 KiB) or the oldest has waited a timer's length (100 ms).
//!
//! The timer runs on the host's wall clock (or a [`ManualClock`] its
//! caller moves, in tests and simulations) and is checked first by every
//! call that reaches the device ([`UpdateLogger::flush_due`]; a host that
//! merges its own reads with [`UpdateLogger::overlay`] calls it before
//! them): a log whose timer ran out is flushed by the next read as well as
//! by the next update, so an idle log is not held until more updates come.
//! Such a flush, and one a full page starts after an update was logged, is
//! on the way to something else: if the device refuses it, the log keeps
//! its updates, the read or update goes ahead and the refusal is counted
//! ([`UpdateLogger::refused_flushes`]). An update that finds the log full
//! flushes it first and is refused with the device's error if that fails;
//! [`UpdateLogger::flush`] always reports.
//!
//! Each update's presence check is answered when it is logged, against
//! the device's lists with the log's earlier updates applied (so an edge
//! that exists only in the log is found), and reads through the logger
//! merge the log into what the device returns. Updates still in the log
//! are lost if the host loses power, as the paper says (like a file
//! system's buffers); [`UpdateLogger::flush`] makes them durable.
//!
//! Batching: before logging an update whose records are known in advance
//! (AddEdge, DeleteEdge, UpdateEdge, AddVertex), the log is flushed if
//! they would not fit the page; DeleteVertex and UpdateVertex depend on
//! the list they replace, so the log is flushed after them if it
//! overflowed.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use quiver_run::InvalidArgument;

use crate::delta::{Adjacency, Deltas, RECORD};
use crate::device::Ssd;
use crate::error::{Error, Result};
use crate::update::{Batch, Update, UpdatePath};

/// The logger's settings; the only place their defaults are written.
#[derive(Clone, Debug, PartialEq)]
pub struct LoggerConfig {
    /// How flushed batches reach the pages.
    pub path: UpdatePath,
    /// A batch is flushed when its records fill a delta page of this size.
    pub flush_bytes: usize,
    /// ... or when its oldest update has waited this long (`None`: never).
    pub timer: Option<Duration>,
    /// The clock the timer reads.
    pub clock: HostClock,
}

/// The host clock the logger's timer reads.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum HostClock {
    /// The wall clock, as a host's DRAM log keeps time.
    #[default]
    Wall,
    /// A clock its caller moves.
    Manual(ManualClock),
}

/// A clock that moves only when told to; clones share it.
#[derive(Clone, Debug, Default)]
pub struct ManualClock(Arc<AtomicU64>);

impl ManualClock {
    /// Moves the clock on by `by`.
    pub fn advance(&self, by: Duration) {
        let nanos = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        self.0.fetch_add(nanos, Ordering::Relaxed);
    }

    fn now(&self) -> Duration {
        Duration::from_nanos(self.0.load(Ordering::Relaxed))
    }
}

impl PartialEq for ManualClock {
    fn eq(&self, other: &ManualClock) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Default for LoggerConfig {
    fn default() -> LoggerConfig {
        LoggerConfig {
            path: UpdatePath::Delta,
            flush_bytes: 16 << 10,
            timer: Some(Duration::from_millis(100)),
            clock: HostClock::Wall,
        }
    }
}

impl LoggerConfig {
    /// Checks every setting, naming the first that makes no sense.
    pub fn validate(&self) -> Result<(), InvalidArgument> {
        if self.flush_bytes < 8 || Deltas::per_page(self.flush_bytes) == 0 {
            return Err(InvalidArgument::new(
                "flush_bytes",
                format!(
                    "{} bytes hold no {RECORD}-byte record beside a delta page's 8-byte footer",
                    self.flush_bytes
                ),
            ));
        }
        Ok(())
    }
}

/// Updates in host DRAM on their way to one device.
#[derive(Debug)]
pub struct UpdateLogger {
    config: LoggerConfig,
    batch: Option<Batch>,
    /// When the oldest update in the log was logged, on the timer's clock.
    oldest: Option<Duration>,
    /// The wall clock's zero.
    started: Instant,
    flushes: u64,
    refused: u64,
}

impl UpdateLogger {
    /// An empty log.
    pub fn new(config: LoggerConfig) -> Result<UpdateLogger> {
        config.validate()?;
        Ok(UpdateLogger {
            config,
            batch: None,
            oldest: None,
            started: Instant::now(),
            flushes: 0,
            refused: 0,
        })
    }

    /// The timer's clock now.
    fn now(&self) -> Duration {
        match &self.config.clock {
            HostClock::Wall => self.started.elapsed(),
            HostClock::Manual(clock) => clock.now(),
        }
    }

    /// Batches sent to the device so far.
    pub fn flushes(&self) -> u64 {
        self.flushes
    }

    /// Flushes the device refused that no caller was told of: those the
    /// timer or a full page started on the way to a read or an update
    /// that went ahead (see [`UpdateLogger::flush_due`]).
    pub fn refused_flushes(&self) -> u64 {
        self.refused
    }

    /// Records waiting in the log.
    pub fn records(&self) -> usize {
        self.batch.as_ref().map_or(0, Batch::records)
    }

    /// Logs `update` for `ssd`; returns whether it applies (false for a
    /// delete or update of an edge or vertex that is not there, in the
    /// device or the log). Flushes as the module docs say.
    pub fn log(&mut self, ssd: &mut Ssd, update: &Update) -> Result<bool> {
        self.flush_due(ssd);
        let per_page = Deltas::per_page(self.config.flush_bytes);
        let undirected = ssd.gtl().is_some_and(crate::gtl::Gtl::undirected);
        let known = records(update, undirected);
        // A full log (its last flush refused) or one this update would
        // overfill goes first; if the device refuses it, so is the update.
        if self.records() >= per_page || known.is_some_and(|r| self.records() + r > per_page) {
            self.flush(ssd)?;
        }
        let mut batch = match self.batch.take() {
            Some(batch) => batch,
            None => ssd.batch()?,
        };
        let applied = ssd.stage(&mut batch, update);
        self.batch = Some(batch);
        let applied = applied?;
        let now = self.now();
        self.oldest = self.oldest.or_else(|| applied.then_some(now));
        // The update is in the log now, and acknowledged: a refused flush
        // keeps it there for the next one.
        if self.records() >= per_page {
            self.try_flush(ssd);
        }
        Ok(applied)
    }

    /// Sends the log to the device if its oldest update has waited the
    /// timer's length (nothing otherwise). A read or update it goes before
    /// is answered from the device and the log either way, so a refusal
    /// keeps the log for the next flush and is counted, not returned.
    pub fn flush_due(&mut self, ssd: &mut Ssd) {
        let due = self
            .oldest
            .zip(self.config.timer)
            .is_some_and(|(t, limit)| self.now() - t >= limit);
        if due {
            self.try_flush(ssd);
        }
    }

    /// [`UpdateLogger::flush`], a refusal counted in
    /// [`UpdateLogger::refused_flushes`].
    fn try_flush(&mut self, ssd: &mut Ssd) {
        if self.flush(ssd).is_err() {
            self.refused += 1;
        }
    }

    /// Sends the log to the device as one batch (nothing if it is empty).
    /// A flush the device refuses (a full graph area, say) keeps the log
    /// as it was: no acknowledged update is lost.
    pub fn flush(&mut self, ssd: &mut Ssd) -> Result<()> {
        if let Some(batch) = self.batch.as_ref().filter(|b| !b.is_empty()) {
            ssd.commit(batch, self.config.path)?;
            self.flushes += 1;
        }
        self.batch = None;
        self.oldest = None;
        Ok(())
    }

    /// `vertex`'s targets with the log's updates, given the device's list
    /// (`None` for a vertex the device does not have yet); an error if the
    /// vertex does not exist even with the log.
    pub fn overlay(
        &self,
        vertex: u32,
        device: Option<Vec<u32>>,
        vertices: u32,
    ) -> Result<Vec<u32>> {
        let merged = match &self.batch {
            Some(batch) => batch.overlay(vertex, device),
            None => device,
        };
        merged.ok_or(Error::VertexOutOfRange {
            vertex,
            vertices: self.batch.as_ref().map_or(vertices, Batch::vertices),
        })
    }

    /// `vertex`'s list and weights: the device's, with the log's updates.
    pub fn get(&mut self, ssd: &mut Ssd, vertex: u32) -> Result<Adjacency> {
        self.flush_due(ssd);
        match &mut self.batch {
            Some(batch) => ssd.staged_list(batch, vertex),
            None => Ok(ssd.read_list(vertex)?.value),
        }
    }

    /// GetEdgeWeight(`source`, `target`) with the log's updates: the
    /// device's command on an empty log, else the weight of the first
    /// `source -> target` in the list as the log sees it (see
    /// [`Ssd::staged_weight`]). `None` if there is no such edge.
    pub fn edge_weight(&mut self, ssd: &mut Ssd, source: u32, target: u32) -> Result<Option<f32>> {
        self.flush_due(ssd);
        match &mut self.batch {
            Some(batch) => ssd.staged_weight(batch, source, target),
            None => Ok(ssd.get_edge_weight(source, target)?.value),
        }
    }
}

/// The records `update` makes, if they are known without reading a list.
fn records(update: &Update, undirected: bool) -> Option<usize> {
    // A directed graph mirrors every edge in an in-list; an undirected
    // one every edge but a self-loop in the other end's list.
    let both = |s: u32, t: u32| 1 + usize::from(!undirected || s != t);
    match update {
        Update::AddEdge { source, target, .. }
        | Update::DeleteEdge { source, target }
        | Update::UpdateEdge { source, target, .. } => Some(both(*source, *target)),
        // The new vertex's id is |V|, unknown here: count a self-loop as two.
        Update::AddVertex { edges } => Some(1 + 2 * edges.len()),
        Update::DeleteVertex { .. } | Update::UpdateVertex { .. } => None,
    }
}
