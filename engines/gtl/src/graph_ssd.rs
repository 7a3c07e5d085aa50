//! [`GraphSsd`]: GraphSSD's host library as one handle (§3.4, §3.6): the
//! device, the host's GTT copy and page cache ([`GtlSource`]) and the
//! update logger ([`UpdateLogger`]). A read merges the device's pages
//! (through the cache), its delta chains and the host's log; an update is
//! answered at once (presence against the device and the log) and reaches
//! the device with its batch.
//!
//! Reads go through queues as the paper's host library does (§4.3): a
//! request is submitted ([`GraphSsd::submit`]) and nothing moves until
//! the queue is sent ([`GraphSsd::complete`]); then every queued request
//! is in flight at once, and the completions come back in the order they
//! completed in modelled time, each with its tag. [`GraphSsd::get_many`]
//! is the same, its answers in request order.

use crate::gtl::Merged;
use crate::{
    Completed, GraphSource, GtlSource, LoggerConfig, Nanos, Result, SourceCounters, Ssd, Update,
    UpdateLogger,
};

/// A request on the completion queue.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The tag [`GraphSsd::submit`] gave it.
    pub tag: u64,
    /// The vertex asked for.
    pub vertex: u32,
    /// Its out-list.
    pub list: Vec<u32>,
    /// When it completed (modelled time).
    pub done: Nanos,
}

/// GraphSSD's host side on one device.
#[derive(Debug)]
pub struct GraphSsd {
    source: GtlSource,
    logger: UpdateLogger,
    /// Submitted requests not yet sent: (tag, vertex).
    queue: Vec<(u64, u32)>,
    next_tag: u64,
}

impl GraphSsd {
    /// The host side of `ssd` (its graph initialized) with a page cache of
    /// `cache_bytes` and a logger of `logger`.
    pub fn new(ssd: Ssd, cache_bytes: u64, logger: LoggerConfig) -> Result<GraphSsd> {
        Ok(GraphSsd {
            source: GtlSource::new(ssd, cache_bytes)?,
            logger: UpdateLogger::new(logger)?,
            queue: Vec::new(),
            next_tag: 0,
        })
    }

    /// Queues GetAdjacencyList(`vertex`); returns its tag.
    pub fn submit(&mut self, vertex: u32) -> u64 {
        let tag = self.next_tag;
        self.next_tag += 1;
        self.queue.push((tag, vertex));
        tag
    }

    /// Sends every queued request at once and returns their completions
    /// in the order they completed (ties by tag). A request for a vertex
    /// out of range fails the whole queue, which is then empty.
    pub fn complete(&mut self) -> Result<Vec<Completion>> {
        let queued = std::mem::take(&mut self.queue);
        if queued.is_empty() {
            return Ok(Vec::new());
        }
        let vertices: Vec<u32> = queued.iter().map(|&(_, v)| v).collect();
        let mut completions: Vec<Completion> = queued
            .into_iter()
            .zip(self.fetch(&vertices)?)
            .map(|((tag, vertex), c)| Completion {
                tag,
                vertex,
                list: c.list,
                done: c.done,
            })
            .collect();
        completions.sort_by_key(|c| (c.done, c.tag));
        Ok(completions)
    }

    /// The out-lists of `vertices` as one batch: the device's through the
    /// cache, with the log's updates; vertices only the log has added
    /// are read from the log.
    pub fn get_many(&mut self, vertices: &[u32]) -> Result<Vec<Vec<u32>>> {
        Ok(self.fetch(vertices)?.into_iter().map(|c| c.list).collect())
    }

    /// [`GraphSsd::get_many`] with each request's completion time (a list
    /// only the log holds completes at once).
    fn fetch(&mut self, vertices: &[u32]) -> Result<Vec<Completed>> {
        let n = self.source.vertices();
        let now = self.source.ssd().now();
        // Every vertex exists before anything is read.
        for &v in vertices.iter().filter(|&&v| v >= n) {
            self.logger.overlay(v, None, n)?;
        }
        let on_device: Vec<u32> = vertices.iter().copied().filter(|&v| v < n).collect();
        let mut fetched = self.source.fetch(&on_device)?.into_iter();
        vertices
            .iter()
            .map(|&v| {
                let (device, done) = if v < n {
                    // fetch returns one completion per device vertex, in order.
                    let c = fetched.next().expect("a completion per device vertex");
                    (Some(c.list), c.done)
                } else {
                    (None, now)
                };
                let list = self.logger.overlay(v, device, n)?;
                Ok(Completed { list, done })
            })
            .collect()
    }

    /// The out-list of `vertex`.
    pub fn get(&mut self, vertex: u32) -> Result<Vec<u32>> {
        // get_many returns one list per request.
        Ok(self
            .get_many(&[vertex])?
            .pop()
            .expect("one list per request"))
    }

    /// Logs `update`; whether it applies (see [`UpdateLogger::log`]).
    pub fn update(&mut self, update: &Update) -> Result<bool> {
        self.logger.log(self.source.ssd_mut(), update)
    }

    /// Sends the log to the device.
    pub fn flush(&mut self) -> Result<()> {
        self.logger.flush(self.source.ssd_mut())
    }

    /// Merges the device's delta graph (at most `limit` groups); the log
    /// stays in host memory until it is flushed.
    pub fn merge(&mut self, limit: Option<usize>) -> Result<Merged> {
        self.source.ssd_mut().merge(limit)
    }

    /// What the reads cost so far.
    pub fn counters(&self) -> SourceCounters {
        self.source.counters()
    }

    /// The device.
    pub fn ssd(&self) -> &Ssd {
        self.source.ssd()
    }

    /// Flushes the log and hands the device back.
    pub fn into_ssd(mut self) -> Result<Ssd> {
        self.flush()?;
        Ok(self.source.into_ssd())
    }
}
