//! [`GraphSsd`]: GraphSSD's host library as one handle (§3.4, §3.6): the
//! device, the host's GTT copy and page cache ([`GtlSource`]) and the
//! update logger ([`UpdateLogger`]). A read merges the device's pages
//! (through the cache), its delta chains and the host's log; an update is
//! answered at once (presence against the device and the log) and reaches
//! the device with its batch.

use crate::gtl::Merged;
use crate::{
    GraphSource, GtlSource, LoggerConfig, Result, SourceCounters, Ssd, Update, UpdateLogger,
};

/// GraphSSD's host side on one device.
#[derive(Debug)]
pub struct GraphSsd {
    source: GtlSource,
    logger: UpdateLogger,
}

impl GraphSsd {
    /// The host side of `ssd` (its graph initialized) with a page cache of
    /// `cache_bytes` and a logger of `logger`.
    pub fn new(ssd: Ssd, cache_bytes: u64, logger: LoggerConfig) -> Result<GraphSsd> {
        Ok(GraphSsd {
            source: GtlSource::new(ssd, cache_bytes)?,
            logger: UpdateLogger::new(logger)?,
        })
    }

    /// The out-lists of `vertices` as one batch: the device's through the
    /// cache, with the log's updates; vertices only the log has added
    /// are read from the log.
    pub fn get_many(&mut self, vertices: &[u32]) -> Result<Vec<Vec<u32>>> {
        let n = self.source.vertices();
        let on_device: Vec<u32> = vertices.iter().copied().filter(|&v| v < n).collect();
        let mut fetched = self.source.get_many(&on_device)?.into_iter();
        vertices
            .iter()
            .map(|&v| {
                let device = if v < n { fetched.next() } else { None };
                self.logger.overlay(v, device, n)
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
