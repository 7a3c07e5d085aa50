//! The host library: [`GraphSource`], one interface to a graph on the
//! device, with two implementations on the same [`Ssd`]: [`GtlSource`]
//! (GraphSSD's GetAdjacencyList through the host's GTT copy) and
//! [`CsrSource`] (the baseline: `rowPtr`, then `colIdx`, through the
//! FTL's block interface). Both keep the same host [`PageCache`], so an
//! application runs unchanged on either.
//!
//! Requests and modelled time: a request is issued at a moment of the
//! device's clock ([`GraphSource::issue`]) and its reads queue on the
//! simulated dies, channels and host link, first come, first served. A
//! GTL request issues all its pages at once. A baseline request needs two
//! dependent steps: its `rowPtr` pages, then ([`GraphSource::issue_next`])
//! its `colIdx` pages when the `rowPtr` pages arrived. The host's
//! [`Queues`] keep requests in flight and issue each step in time order;
//! [`GraphSource::fetch`] is one barriered batch of them. A page found in
//! the cache costs no NAND read and no device time; if it is still in
//! flight (asked for by an earlier request), the request waits for it.

use std::rc::Rc;

use quiver_csr::Graph;
use quiver_run::Progress;
use serde::{Deserialize, Serialize};

use crate::cache::PageCache;
use crate::delta::{Adjacency, ListId};
use crate::device::{Config, Ssd};
use crate::error::{check_vertex, Error, Result};
use crate::flash::{Flash, Nanos};
use crate::ftl::{Ftl, Lba};
use crate::page::Page;
use crate::queues::{Issued, Queues, Submit};

/// Which layout a [`GraphSource`] reads.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// GraphSSD: graph pages through the GTL.
    #[default]
    Gtl,
    /// The baseline: the CSR file through the FTL.
    Csr,
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Backend::Gtl => "gtl",
            Backend::Csr => "csr",
        })
    }
}

/// What a source did so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceCounters {
    /// Adjacency lists asked for.
    pub requests: u64,
    /// Runs of requests through the host's queues (a barriered batch, or
    /// one sweep's or search's stream).
    pub runs: u64,
    /// NAND pages read.
    pub pages_read: u64,
    /// Pages found in the host cache.
    pub cache_hits: u64,
    /// Pages fetched from the device.
    pub cache_misses: u64,
    /// Modelled device time of all runs, in nanoseconds.
    pub modelled_ns: Nanos,
}

/// One request of a batch as it completed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completed {
    /// The out-list.
    pub list: Vec<u32>,
    /// When its last page (or delta page) reached the host.
    pub done: Nanos,
}

/// A graph's adjacency lists, fetched by requests in flight together.
pub trait GraphSource {
    /// |V|.
    fn vertices(&self) -> u32;

    /// Issues the request for `vertex`'s out-list at `at`: its first reads.
    fn issue(&mut self, vertex: u32, at: Nanos) -> Result<Issued>;

    /// Issues a request's next reads, `bytes` of the baseline's file, at
    /// `at` (when the reads they depend on arrived).
    fn issue_next(&mut self, bytes: std::ops::Range<u64>, at: Nanos) -> Result<Issued>;

    /// The device's clock: where the next run of requests starts.
    fn now(&self) -> Nanos;

    /// Counts a run of `requests` from `start` to `end` and moves the clock to `end`.
    fn finish(&mut self, start: Nanos, end: Nanos, requests: u64);

    /// The out-lists of `vertices`, in order, submitted together as one
    /// batch, each with when it completed.
    fn fetch(&mut self, vertices: &[u32]) -> Result<Vec<Completed>> {
        let mut queues = Queues::new(self, Submit::batch(vertices.len()));
        for (i, &v) in vertices.iter().enumerate() {
            queues.request(i, v)?;
        }
        let mut lists = vec![None; vertices.len()];
        while let Some(r) = queues.take()? {
            lists[r.token] = Some(Completed {
                list: r.list,
                done: r.done,
            });
        }
        queues.finish()?;
        // Every request answers once.
        Ok(lists
            .into_iter()
            .map(|c| c.expect("a response per request"))
            .collect())
    }

    /// The out-lists of `vertices`, in order, fetched as one batch.
    fn get_many(&mut self, vertices: &[u32]) -> Result<Vec<Vec<u32>>> {
        Ok(self.fetch(vertices)?.into_iter().map(|c| c.list).collect())
    }

    /// The out-list of `vertex` alone.
    fn get(&mut self, vertex: u32) -> Result<Vec<u32>> {
        let mut lists = self.get_many(&[vertex])?;
        // get_many returns one list per request.
        Ok(lists.pop().expect("one list per request"))
    }

    /// The counters so far.
    fn counters(&self) -> SourceCounters;

    /// Bytes the host cache holds now.
    fn cache_bytes(&self) -> u64;

    /// The device below.
    fn ssd(&self) -> &Ssd;
}

impl SourceCounters {
    /// Counts a run of `requests` from `start` to `end`.
    fn count_run(&mut self, start: Nanos, end: Nanos, requests: u64) {
        self.modelled_ns += end - start;
        self.runs += 1;
        self.requests += requests;
    }
}

/// A host library on `ssd`: its page cache of `P` and its counts.
/// [`GtlSource`] and [`CsrSource`] are its two kinds.
#[derive(Debug)]
pub struct Host<P> {
    ssd: Ssd,
    cache: PageCache<P>,
    counters: SourceCounters,
}

impl<P: Clone> Host<P> {
    /// The host side of `ssd` with an empty cache of `cache_bytes`.
    fn with_cache(ssd: Ssd, cache_bytes: u64) -> Host<P> {
        let page_bytes = u64::from(ssd.flash().geometry().page_bytes);
        Host {
            ssd,
            cache: PageCache::new(cache_bytes, page_bytes),
            counters: SourceCounters::default(),
        }
    }
}

impl<P> Host<P> {
    /// Counts a run of `requests` from `start` to `end` and moves the clock to `end`.
    fn end_run(&mut self, start: Nanos, end: Nanos, requests: u64) {
        *self.ssd.parts().now = end;
        self.counters.count_run(start, end, requests);
    }

    /// The device below, to send it commands (updates, merges) between
    /// batches of reads.
    pub fn ssd_mut(&mut self) -> &mut Ssd {
        &mut self.ssd
    }

    /// The device, its host side dropped.
    pub fn into_ssd(self) -> Ssd {
        self.ssd
    }
}

/// GraphSSD's host library: the GTT copy, the page cache of decoded graph pages.
pub type GtlSource = Host<Rc<Page>>;

impl GtlSource {
    /// The host side of `ssd`, whose graph is initialized, with a cache of
    /// `cache_bytes`.
    pub fn new(ssd: Ssd, cache_bytes: u64) -> Result<GtlSource> {
        if ssd.gtl().is_none() {
            return Err(Error::NoGraph);
        }
        Ok(Host::with_cache(ssd, cache_bytes))
    }
}

impl GraphSource for GtlSource {
    fn vertices(&self) -> u32 {
        self.ssd.gtl().map_or(0, crate::gtl::Gtl::vertices)
    }

    fn issue(&mut self, v: u32, start: Nanos) -> Result<Issued> {
        check_vertex(v, self.vertices())?;
        let parts = self.ssd.parts();
        // new() checked the graph is there.
        let gtl = parts.gtl.expect("the GTL is initialized");
        for ppn in gtl.take_invalidated() {
            self.cache.remove(ppn.0);
        }
        let page_bytes = u64::from(parts.flash.geometry().page_bytes);
        if gtl.marked_empty(v) {
            return Ok(Issued::Done {
                list: Vec::new(),
                done: start,
            });
        }
        let reads = parts.flash.counters().page_reads;
        let mut list = Vec::new();
        let mut done = start;
        let pages = gtl.pages_of(v)?;
        for entry in &pages {
            let ppn = entry.ppn();
            let (page, ready) = if let Some(hit) = self.cache.get(ppn.0) {
                self.counters.cache_hits += 1;
                hit
            } else {
                self.counters.cache_misses += 1;
                let read = parts.flash.read(ppn, start)?;
                let page = Rc::new(Page::decode(read.data, ppn.0)?);
                let nand = read.done;
                let arrived = parts.flash.host_transfer(page_bytes, nand);
                self.cache.insert(ppn.0, Rc::clone(&page), arrived);
                (page, arrived)
            };
            list.extend_from_slice(crate::gtl::list_of(&page, entry, v)?);
            done = done.max(ready);
        }
        if let Some(chain) = gtl.chain(parts.flash, ListId::out(v), &pages, start)? {
            let mut adjacency = Adjacency {
                targets: list,
                weights: Vec::new(),
            };
            for &edit in &chain.edits {
                adjacency.apply(edit, false);
            }
            list = adjacency.targets;
            let arrived = parts
                .flash
                .host_transfer(chain.pages_read * page_bytes, chain.done);
            done = done.max(arrived);
        }
        self.counters.pages_read += parts.flash.counters().page_reads - reads;
        Ok(Issued::Done { list, done })
    }

    fn issue_next(&mut self, _: std::ops::Range<u64>, _: Nanos) -> Result<Issued> {
        unreachable!("a GTL request is one step")
    }

    fn now(&self) -> Nanos {
        self.ssd.now()
    }

    fn finish(&mut self, start: Nanos, end: Nanos, requests: u64) {
        self.end_run(start, end, requests);
    }

    fn counters(&self) -> SourceCounters {
        self.counters
    }

    fn cache_bytes(&self) -> u64 {
        self.cache.bytes()
    }

    fn ssd(&self) -> &Ssd {
        &self.ssd
    }
}

/// The baseline's host library: a file cache of 16 KiB logical pages.
pub type CsrSource = Host<Rc<[u8]>>;

impl CsrSource {
    /// The host side of `ssd`, whose CSR file is written and still holds
    /// the graph (see [`Ssd::check_csr_current`]), with a cache of
    /// `cache_bytes`.
    pub fn new(ssd: Ssd, cache_bytes: u64) -> Result<CsrSource> {
        if ssd.csr().is_none() {
            return Err(Error::NoGraph);
        }
        ssd.check_csr_current()?;
        Ok(Host::with_cache(ssd, cache_bytes))
    }
}

/// Bytes `bytes` of the file, read at `at` through `cache`, and when the
/// last of their pages reached the host.
fn read_bytes(
    cache: &mut PageCache<Rc<[u8]>>,
    counters: &mut SourceCounters,
    (ftl, flash): (&mut Ftl, &mut Flash),
    bytes: std::ops::Range<u64>,
    at: Nanos,
) -> Result<(Vec<u8>, Nanos)> {
    let page_bytes = u64::from(flash.geometry().page_bytes);
    let mut out = Vec::with_capacity(usize::try_from(bytes.end - bytes.start).unwrap_or(0));
    let mut done = at;
    if bytes.is_empty() {
        return Ok((out, done));
    }
    for lba in bytes.start / page_bytes..=(bytes.end - 1) / page_bytes {
        let (page, ready) = if let Some(hit) = cache.get(lba) {
            counters.cache_hits += 1;
            hit
        } else {
            counters.cache_misses += 1;
            let (data, ready) = ftl.read(flash, Lba(lba), at)?;
            let page: Rc<[u8]> = data.into();
            cache.insert(lba, Rc::clone(&page), ready);
            (page, ready)
        };
        let first = lba * page_bytes;
        // Both ends are within this page, so they fit usize.
        let from = usize::try_from(bytes.start.max(first) - first).expect("within a page");
        let to = usize::try_from(bytes.end.min(first + page_bytes) - first).expect("within a page");
        out.extend_from_slice(&page[from..to]);
        done = done.max(ready);
    }
    Ok((out, done))
}

impl GraphSource for CsrSource {
    fn vertices(&self) -> u32 {
        self.ssd.csr().map_or(0, crate::baseline::CsrFile::vertices)
    }

    fn issue(&mut self, v: u32, start: Nanos) -> Result<Issued> {
        check_vertex(v, self.vertices())?;
        let parts = self.ssd.parts();
        // new() checked the file is there.
        let csr = parts.csr.expect("the CSR file is written");
        let page_bytes = u64::from(parts.flash.geometry().page_bytes);
        let col_start = csr.col_start() * page_bytes;
        let reads = parts.flash.counters().page_reads;
        let at = u64::from(v) * 8;
        let (bytes, until) = read_bytes(
            &mut self.cache,
            &mut self.counters,
            (&mut *parts.ftl, &mut *parts.flash),
            at..at + 16,
            start,
        )?;
        let word = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().expect("8 bytes"));
        self.counters.pages_read += parts.flash.counters().page_reads - reads;
        Ok(Issued::Then {
            until,
            bytes: col_start + word(0) * 4..col_start + word(8) * 4,
        })
    }

    fn issue_next(&mut self, bytes: std::ops::Range<u64>, at: Nanos) -> Result<Issued> {
        let parts = self.ssd.parts();
        let reads = parts.flash.counters().page_reads;
        let (bytes, done) = read_bytes(
            &mut self.cache,
            &mut self.counters,
            (&mut *parts.ftl, &mut *parts.flash),
            bytes,
            at,
        )?;
        self.counters.pages_read += parts.flash.counters().page_reads - reads;
        let list = bytes
            .chunks_exact(4)
            .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
            .collect();
        Ok(Issued::Done { list, done })
    }

    fn now(&self) -> Nanos {
        self.ssd.now()
    }

    fn finish(&mut self, start: Nanos, end: Nanos, requests: u64) {
        self.end_run(start, end, requests);
    }

    fn counters(&self) -> SourceCounters {
        self.counters
    }

    fn cache_bytes(&self) -> u64 {
        self.cache.bytes()
    }

    fn ssd(&self) -> &Ssd {
        &self.ssd
    }
}

/// What loading the device did: the image written before any request.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Init {
    /// Pages of the backend's image: graph pages (neighbours and weights)
    /// for the GTL, logical pages of the CSR file for the baseline.
    pub image_pages: u64,
    /// NAND pages programmed to write it.
    pub pages_written: u64,
    /// Its modelled time, in nanoseconds.
    pub modelled_ns: Nanos,
    /// Bytes of the GTTs (0 for the baseline, whose rowPtr is in its image).
    pub gtt_bytes: u64,
    /// GTL: neighbour pages a packing that splits lists anywhere would
    /// need ([`crate::gtl::Layout::tight_pages`]; 0 for the baseline).
    pub tight_pages: u64,
}

/// A fresh device of `config` holding `graph` for `backend` (GraphInitialize
/// or the CSR file's writes, which `progress` hears of and may stop), and
/// its host side with a cache of `cache_bytes`.
pub fn open(
    graph: &Graph,
    config: &Config,
    backend: Backend,
    cache_bytes: u64,
    progress: &dyn Progress,
) -> Result<(Box<dyn GraphSource>, Init)> {
    let mut ssd = Ssd::new(config)?;
    match backend {
        Backend::Gtl => {
            ssd.graph_initialize(graph, progress)?;
        }
        Backend::Csr => {
            ssd.write_csr(graph, progress)?;
        }
    }
    let loaded = ssd.now();
    attach(ssd, backend, cache_bytes, loaded)
}

/// The host side of `ssd` for `backend` with a cache of `cache_bytes`,
/// and what loading the device did (its programs so far, and
/// `modelled_ns` of modelled load time).
pub fn attach(
    ssd: Ssd,
    backend: Backend,
    cache_bytes: u64,
    modelled_ns: Nanos,
) -> Result<(Box<dyn GraphSource>, Init)> {
    let layout = ssd.gtl().map(|g| g.layout().clone()).unwrap_or_default();
    let init = Init {
        image_pages: match backend {
            Backend::Gtl => layout.pages + layout.weight_pages,
            Backend::Csr => ssd.csr().map_or(0, crate::baseline::CsrFile::pages),
        },
        pages_written: ssd.flash().counters().programs,
        modelled_ns,
        gtt_bytes: if backend == Backend::Gtl {
            layout.gtt_bytes
        } else {
            0
        },
        tight_pages: if backend == Backend::Gtl {
            layout.tight_pages
        } else {
            0
        },
    };
    let source: Box<dyn GraphSource> = match backend {
        Backend::Gtl => Box::new(GtlSource::new(ssd, cache_bytes)?),
        Backend::Csr => Box::new(CsrSource::new(ssd, cache_bytes)?),
    };
    Ok((source, init))
}

#[cfg(test)]
mod tests {
    use quiver_csr::testing::karate;
    use quiver_run::NoProgress;

    use super::*;

    #[test]
    fn a_cached_page_costs_no_read_and_no_time() {
        for backend in [Backend::Gtl, Backend::Csr] {
            let graph = karate(true);
            let (mut source, _) =
                open(&graph, &Config::default(), backend, 1 << 20, &NoProgress).unwrap();
            let host_bytes = |s: &dyn GraphSource| s.ssd().flash().counters().host_bytes;
            let page_bytes = u64::from(source.ssd().flash().geometry().page_bytes);
            let loaded = host_bytes(source.as_ref());
            assert_eq!(source.get(0).unwrap(), graph.neighbors(0));
            let first = source.counters();
            assert!(first.pages_read > 0 && first.modelled_ns > 0, "{backend}");
            assert_eq!(
                host_bytes(source.as_ref()) - loaded,
                first.cache_misses * page_bytes,
                "{backend}: a whole page crosses the host link per miss"
            );
            assert_eq!(source.get(1).unwrap(), graph.neighbors(1));
            let second = source.counters();
            assert_eq!(second.pages_read, first.pages_read, "{backend}");
            assert_eq!(second.modelled_ns, first.modelled_ns, "{backend}");
            assert_eq!(
                host_bytes(source.as_ref()) - loaded,
                first.cache_misses * page_bytes,
                "{backend}: a hit moves nothing"
            );
            assert!(second.cache_hits > first.cache_hits);
            assert!(source.cache_bytes() <= 1 << 20);
            assert!(matches!(
                source.get(34),
                Err(Error::VertexOutOfRange {
                    vertex: 34,
                    vertices: 34
                })
            ));
        }
    }

    #[test]
    fn a_batch_overlaps_its_requests() {
        let graph = karate(true);
        let all: Vec<u32> = (0..graph.num_vertices()).collect();
        for backend in [Backend::Gtl, Backend::Csr] {
            let (mut one, _) = open(&graph, &Config::default(), backend, 0, &NoProgress).unwrap();
            for &v in &all {
                one.get(v).unwrap();
            }
            let (mut batch, _) = open(&graph, &Config::default(), backend, 0, &NoProgress).unwrap();
            batch.get_many(&all).unwrap();
            assert_eq!(one.counters().pages_read, batch.counters().pages_read);
            assert!(batch.counters().modelled_ns < one.counters().modelled_ns);
        }
    }
}
