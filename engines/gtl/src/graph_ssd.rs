//! [`GraphSsd`]: GraphSSD's host library as one handle (§3.4, §3.6): the
//! device, the host's GTT copy and page cache ([`GtlSource`]) and the
//! update logger ([`UpdateLogger`]). A read merges the device's pages
//! (through the cache), its delta chains and the host's log; an update is
//! answered at once (presence against the device and the log) and reaches
//! the device with its batch. GetEdgeWeight is the device's command
//! merged with the log (not through the page cache, and not counted in
//! [`GraphSsd::counters`], which are the reads'). Every call that reaches the device first flushes a log whose
//! timer ran out ([`UpdateLogger::flush_due`]), so an idle log does not
//! wait for the next update.
//!
//! Requests go through queues as the paper's host library does (§4.3): a
//! request (a read, a weight or an update) is submitted ([`GraphSsd::submit`]) and
//! nothing moves until the queue is sent ([`GraphSsd::complete`]). The
//! requests then run in submission order: each run of reads between
//! updates is in flight at once, its completions in the order they
//! completed in modelled time; an update is answered by the log (its
//! presence check may read the device) and a weight through the log, each
//! alone, when the reads before it are done.
//! Every completion carries its request's tag and its own result; the
//! first failure stops the queue, leaving the requests after it queued.
//! [`GraphSsd::get_many`] is a run of reads, its answers in request order.

use std::collections::VecDeque;
use std::path::Path;

use quiver_csr::Graph;
use quiver_run::NoProgress;

use crate::device::{Config, Ssd};
use crate::error::Result;
use crate::flash::Nanos;
use crate::gtl::Merged;
use crate::logger::{LoggerConfig, UpdateLogger};
use crate::source::{Completed, GraphSource, GtlSource, SourceCounters};
use crate::update::Update;

/// A request to the host library's queue.
#[derive(Clone, Debug, PartialEq)]
pub enum Request {
    /// GetAdjacencyList of the vertex.
    Get(u32),
    /// GetEdgeWeight of the first `source -> target`.
    GetEdgeWeight {
        /// The edge's source.
        source: u32,
        /// Its target.
        target: u32,
    },
    /// An update command, to the log.
    Update(Update),
}

/// What a request returned.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// A read's out-list.
    List(Vec<u32>),
    /// A weight (`None`: no such edge).
    Weight(Option<f32>),
    /// Whether an update applied (see [`UpdateLogger::log`]).
    Applied(bool),
}

/// A request on the completion queue.
#[derive(Debug)]
pub struct Completion {
    /// The tag [`GraphSsd::submit`] gave it.
    pub tag: u64,
    /// The request.
    pub request: Request,
    /// Its answer, or why it failed.
    pub answer: Result<Answer>,
    /// When it completed (modelled time).
    pub done: Nanos,
}

/// GraphSSD's host side on one device.
#[derive(Debug)]
pub struct GraphSsd {
    source: GtlSource,
    logger: UpdateLogger,
    /// Submitted requests not yet sent, with their tags.
    queue: Vec<(u64, Request)>,
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

    /// A fresh device of `config` holding `graph` (GraphInitialize), and
    /// its host side as [`GraphSsd::new`] makes it.
    pub fn initialize(
        config: &Config,
        graph: &Graph,
        cache_bytes: u64,
        logger: LoggerConfig,
    ) -> Result<GraphSsd> {
        let mut ssd = Ssd::new(config)?;
        ssd.graph_initialize(graph, &NoProgress)?;
        GraphSsd::new(ssd, cache_bytes, logger)
    }

    /// The device image at `path` mounted (as after a power cut: see
    /// [`Ssd::open`]), and its host side as [`GraphSsd::new`] makes it.
    pub fn open(path: &Path, cache_bytes: u64, logger: LoggerConfig) -> Result<GraphSsd> {
        let (ssd, _mount_ns) = Ssd::open(path)?;
        GraphSsd::new(ssd, cache_bytes, logger)
    }

    /// Flushes the log and writes the device to the image `path` (see
    /// [`Ssd::save`]): every update logged so far is in it.
    pub fn save(&mut self, path: &Path) -> Result<()> {
        self.flush()?;
        self.source.ssd().save(path, &NoProgress)
    }

    /// Queues `request`; returns its tag.
    pub fn submit(&mut self, request: Request) -> u64 {
        let tag = self.next_tag;
        self.next_tag += 1;
        self.queue.push((tag, request));
        tag
    }

    /// Sends the queued requests, in submission order, until one fails,
    /// and returns their completions: each run of reads in the order they
    /// completed (ties by tag), the runs, weights and updates in
    /// submission order. A request that fails (a vertex that does not
    /// exist, an update the log refuses, a device error) completes with its
    /// error and stops the queue: the requests after it stay queued for the
    /// next call.
    pub fn complete(&mut self) -> Vec<Completion> {
        let mut queued: VecDeque<(u64, Request)> = std::mem::take(&mut self.queue).into();
        let mut completions = Vec::new();
        while let Some((tag, request)) = queued.pop_front() {
            let answer = match request {
                Request::Get(first) => {
                    if self.read_run(tag, first, &mut queued, &mut completions) {
                        continue;
                    }
                    break;
                }
                Request::GetEdgeWeight { source, target } => {
                    self.edge_weight(source, target).map(Answer::Weight)
                }
                Request::Update(ref update) => self.update(update).map(Answer::Applied),
            };
            let failed = answer.is_err();
            completions.push(Completion {
                tag,
                request,
                answer,
                done: self.ssd().now(),
            });
            if failed {
                break;
            }
        }
        self.queue = queued.into();
        completions
    }

    /// Sends the read `(tag, first)` with the reads queued after it as one
    /// run, up to the first of a vertex that does not exist (which fails
    /// on its own), and adds their completions in completion order;
    /// whether none failed.
    fn read_run(
        &mut self,
        tag: u64,
        first: u32,
        queued: &mut VecDeque<(u64, Request)>,
        completions: &mut Vec<Completion>,
    ) -> bool {
        let now = self.ssd().now();
        let failed = |e| Completion {
            tag,
            request: Request::Get(first),
            answer: Err(e),
            done: now,
        };
        if let Err(e) = self.check_exists(first) {
            completions.push(failed(e));
            return false;
        }
        let mut reads = vec![(tag, first)];
        while let Some(&(tag, Request::Get(v))) = queued.front() {
            if self.check_exists(v).is_err() {
                break;
            }
            reads.push((tag, v));
            queued.pop_front();
        }
        let vertices: Vec<u32> = reads.iter().map(|&(_, v)| v).collect();
        match self.fetch(&vertices) {
            Ok(lists) => {
                let mut run: Vec<Completion> = reads
                    .into_iter()
                    .zip(lists)
                    .map(|((tag, vertex), c)| Completion {
                        tag,
                        request: Request::Get(vertex),
                        answer: Ok(Answer::List(c.list)),
                        done: c.done,
                    })
                    .collect();
                run.sort_by_key(|c| (c.done, c.tag));
                completions.append(&mut run);
                true
            }
            Err(e) => {
                // A device error: the run's first read carries it, the
                // others stay queued.
                for &(tag, v) in reads[1..].iter().rev() {
                    queued.push_front((tag, Request::Get(v)));
                }
                completions.push(failed(e));
                false
            }
        }
    }

    /// Whether `vertex` exists: on the device, or added in the log.
    fn check_exists(&self, vertex: u32) -> Result<()> {
        let n = self.source.vertices();
        if vertex < n {
            return Ok(());
        }
        self.logger.overlay(vertex, None, n).map(drop)
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
        self.logger.flush_due(self.source.ssd_mut());
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

    /// GetEdgeWeight(`source`, `target`) with the log's updates (see
    /// [`UpdateLogger::edge_weight`]): `None` if there is no such edge, an
    /// error on an unweighted graph or for a vertex that does not exist.
    pub fn edge_weight(&mut self, source: u32, target: u32) -> Result<Option<f32>> {
        self.logger
            .edge_weight(self.source.ssd_mut(), source, target)
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
    /// stays in host memory until it is flushed (or its timer runs out).
    pub fn merge(&mut self, limit: Option<usize>) -> Result<Merged> {
        self.logger.flush_due(self.source.ssd_mut());
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
