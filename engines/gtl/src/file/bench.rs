//! `quiver gtl file`: random GetAdjacencyList calls timed on this disk,
//! on a GTL file through io_uring and on the graph's own `.qcsr` read as
//! a CSR file through io_uring and through pread, all with `O_DIRECT`, on
//! the same vertices (drawn from those with edges, as the paper's
//! workload asks for lists). Wall time, no model: the disk's own.

use std::path::{Path, PathBuf};

use quiver_csr::Graph;
use quiver_io::{BackendChoice, ReadOptions};
use quiver_run::{InvalidArgument, Progress, Unit};
use serde::Serialize;

use super::{Cost, CsrReader, GtlFile};
use crate::apps::{draw, SplitMix};
use crate::error::Result;

/// The benchmark's settings; the only place their defaults are written.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// GetAdjacencyList calls per layout.
    pub requests: u64,
    /// Reads in flight on io_uring (calls per batch, too).
    pub queue_depth: u32,
    /// The GTL file's page size (default the paper's 16 KiB NAND page).
    pub page_bytes: usize,
    /// The fraction of each GTL page left free (none: the calls only read).
    pub slack: f64,
    /// Seed of the vertices (the same for every layout).
    pub seed: u64,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            requests: 1_000_000,
            queue_depth: 32,
            page_bytes: super::PAGE_BYTES,
            slack: 0.0,
            seed: 1,
        }
    }
}

impl Config {
    /// Checks every setting, naming the first that makes no sense.
    pub fn validate(&self) -> Result<(), InvalidArgument> {
        if self.requests == 0 {
            return Err(InvalidArgument::new("requests", "must be at least 1"));
        }
        if !self.page_bytes.is_power_of_two() || !(4096..=65536).contains(&self.page_bytes) {
            return Err(InvalidArgument::new(
                "page_bytes",
                "must be a power of two from 4 KiB to 64 KiB",
            ));
        }
        if self.queue_depth == 0 {
            return Err(InvalidArgument::new("queue_depth", "must be at least 1"));
        }
        Ok(())
    }
}

/// One layout's run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// `gtl` or `csr`.
    pub layout: &'static str,
    /// `uring` or `pread`.
    pub backend: &'static str,
    /// Whether the reads bypassed the page cache.
    pub direct: bool,
    /// What the calls did.
    #[serde(flatten)]
    pub reads: Reads,
    /// Calls per second.
    pub calls_per_s: f64,
}

/// The benchmark's report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    /// The graph (and the CSR file).
    pub graph: PathBuf,
    /// The GTL file written.
    pub gtl: PathBuf,
    /// Its graph pages.
    pub pages: u64,
    /// Their size.
    pub page_bytes: usize,
    /// Reads in flight on io_uring.
    pub queue_depth: u32,
    /// GTL by io_uring, CSR by io_uring, CSR by pread.
    pub runs: Vec<Row>,
}

/// Writes the GTL file `gtl_path` from the graph at `graph_path`, then
/// times `config.requests` calls on each layout. A cancelled run removes
/// the GTL file it wrote.
pub fn run(
    graph_path: &Path,
    gtl_path: &Path,
    config: &Config,
    progress: &dyn Progress,
) -> Result<Report> {
    config.validate()?;
    let graph = Graph::open(graph_path).map_err(|source| crate::Error::Graph {
        path: graph_path.to_owned(),
        source,
    })?;
    progress.start("writing the GTL file", Unit::Ops, None);
    let pages = GtlFile::write(&graph, gtl_path, config.page_bytes, config.slack)?;
    let with_edges: Vec<u32> = (0..graph.num_vertices())
        .filter(|&v| graph.degree(v) > 0)
        .collect();
    drop(graph);
    let runs = time_layouts(graph_path, gtl_path, &with_edges, config, progress);
    if runs.is_err() && progress.check().is_err() {
        // The GTL file was made for these reads: a cancelled run leaves
        // nothing behind.
        let _ = std::fs::remove_file(gtl_path);
    }
    Ok(Report {
        graph: graph_path.to_owned(),
        gtl: gtl_path.to_owned(),
        pages,
        page_bytes: config.page_bytes,
        queue_depth: config.queue_depth,
        runs: runs?,
    })
}

/// Random calls on vertices of `among` on each layout.
fn time_layouts(
    graph_path: &Path,
    gtl_path: &Path,
    among: &[u32],
    config: &Config,
    progress: &dyn Progress,
) -> Result<Vec<Row>> {
    let batch = config.queue_depth as usize;
    let mut rows = Vec::new();
    for (layout, backend, choice, phase) in [
        ("gtl", "uring", BackendChoice::Uring, "gtl file by io_uring"),
        ("csr", "uring", BackendChoice::Uring, "csr file by io_uring"),
        ("csr", "pread", BackendChoice::Pread, "csr file by pread"),
    ] {
        let options = ReadOptions {
            backend: choice,
            direct: true,
            queue_depth: config.queue_depth,
        };
        progress.start(phase, Unit::Ops, Some(config.requests));
        let stoppable = |cost: Result<(Vec<Vec<u32>>, Cost)>| {
            progress.check()?;
            progress.advance(batch as u64);
            cost
        };
        let (reads, direct) = if layout == "gtl" {
            let file = GtlFile::open(gtl_path, &options)?;
            let get = |v: &[u32]| stoppable(file.get_many(v));
            (random_reads(get, among, config, batch)?, file.is_direct())
        } else {
            let file = CsrReader::open(graph_path, &options)?;
            let get = |v: &[u32]| stoppable(file.get_many(v));
            (random_reads(get, among, config, batch)?, file.is_direct())
        };
        rows.push(Row {
            layout,
            backend,
            direct,
            calls_per_s: reads.calls_per_s(),
            reads,
        });
    }
    Ok(rows)
}

/// What random GetAdjacencyList calls on a file did.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Reads {
    /// Calls made.
    pub calls: u64,
    /// Read requests issued and bytes read.
    pub reads: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Neighbours returned (a check that both layouts did the same work).
    pub neighbours: u64,
    /// Wall time of the calls.
    pub wall_ns: u64,
}

impl Reads {
    /// Calls per second.
    pub fn calls_per_s(&self) -> f64 {
        // Counts and nanoseconds far below 2^53.
        #[allow(clippy::cast_precision_loss)]
        let rate = self.calls as f64 / (self.wall_ns.max(1) as f64 / 1e9);
        rate
    }
}

/// `config.requests` GetAdjacencyList calls through `get`, `batch` at a
/// time, on vertices drawn uniformly from `among` with `config.seed`, timed.
fn random_reads(
    mut get: impl FnMut(&[u32]) -> Result<(Vec<Vec<u32>>, Cost)>,
    among: &[u32],
    config: &Config,
    batch: usize,
) -> Result<Reads> {
    let calls = config.requests;
    let mut rng = SplitMix::new(config.seed);
    let mut reads = Reads {
        calls,
        reads: 0,
        bytes: 0,
        neighbours: 0,
        wall_ns: 0,
    };
    let picked = draw(&mut rng, calls, Some(among), 0);
    let clock = quiver_run::Stopwatch::start();
    for chunk in picked.chunks(batch.max(1)) {
        let (lists, cost) = get(chunk)?;
        reads.reads += cost.reads;
        reads.bytes += cost.bytes;
        reads.neighbours += lists.iter().map(|l| l.len() as u64).sum::<u64>();
    }
    reads.wall_ns = clock.elapsed_ns();
    Ok(reads)
}
