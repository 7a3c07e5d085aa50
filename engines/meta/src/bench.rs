//! The paper's measurements (§6), run against a cluster a caller started:
//! ingest throughput on Darshan-like metadata (Fig. 11), mdtest-style
//! creates in one directory (Fig. 18), traversals on an R-MAT graph with
//! StatComm and StatReads per partitioner, prefetching on and off, and as
//! of a past time (Figs. 10, 16), and the same counts for a scan and a
//! 3-step traversal from one vertex of every out-degree (Figs. 12–15).

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use quiver_csr::{Graph, GraphSpec, SortOptions};
use quiver_run::{InvalidArgument, Progress, RunSummary, Unit};
use serde::Serialize;

use crate::client::{Client, Engine, TravelOptions, Write};
use crate::clock::Clock;
use crate::error::Result;
use crate::load::{graph_writes, load, vertex_id, LoadConfig, LoadReport};
use crate::rpc;
use crate::schema::Schema;
use crate::store::{pending_id, Batch, Store};
use crate::travel::{GTravel, Travel};

/// What the benchmark measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    /// Darshan-like ingest.
    Insert,
    /// File creates in one directory.
    Mdtest,
    /// Traversals on a graph.
    Traverse,
    /// A scan and a 3-step traversal from one vertex of each out-degree.
    Degrees,
}

impl Workload {
    /// Its name, as the command line gives it.
    pub fn name(self) -> &'static str {
        match self {
            Workload::Insert => "insert",
            Workload::Mdtest => "mdtest",
            Workload::Traverse => "traverse",
            Workload::Degrees => "degrees",
        }
    }
}

/// The depth of the per-degree traversal (the paper's Figs. 14 and 15).
pub const DEGREE_TRAVERSAL_STEPS: usize = 3;

/// Benchmark settings; [`BenchConfig::default`] holds every default.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    /// Vertices of the Darshan-like graph (insert).
    pub vertices: usize,
    /// Files each client creates (mdtest; the paper's 4,000).
    pub files_per_client: usize,
    /// Traversal depths (traverse; the paper's 2, 4 and 8).
    pub steps: Vec<usize>,
    /// Out-degrees sampled (degrees; the paper takes every one).
    pub degree_samples: usize,
    /// log2 of the vertices of the R-MAT graph traverse and degrees load
    /// (see [`BenchConfig::graph`]).
    pub scale: u32,
    /// Its edges per vertex.
    pub edge_factor: u64,
    /// Clients and batching.
    pub load: LoadConfig,
    /// Seed of generated data.
    pub seed: u64,
}

impl Default for BenchConfig {
    fn default() -> BenchConfig {
        BenchConfig {
            vertices: 100_000,
            files_per_client: 4000,
            steps: vec![2, 4, 8],
            degree_samples: 40,
            scale: 16,
            edge_factor: 16,
            load: LoadConfig::default(),
            seed: 1,
        }
    }
}

impl BenchConfig {
    /// The graph traverse and degrees load: a permuted R-MAT graph of
    /// `scale` and `edge_factor` with the paper's skew (a = 0.45,
    /// b = c = 0.15).
    pub fn graph(&self) -> GraphSpec {
        GraphSpec::Rmat {
            scale: self.scale,
            edge_factor: self.edge_factor,
            probabilities: (0.45, 0.15, 0.15),
            permute: true,
        }
    }

    /// Writes [`BenchConfig::graph`] from `seed` into the scratch file
    /// `path` (deduplicated, without self-loops, and not fsynced: it goes
    /// with its directory) and opens it.
    ///
    /// # Errors
    /// [`crate::Error::Graph`] if it cannot be written or opened.
    pub fn write_graph(&self, path: &Path, progress: &dyn Progress) -> Result<Graph> {
        let sort = SortOptions {
            dedupe: true,
            drop_self_loops: true,
            sync: false,
            ..SortOptions::default()
        };
        quiver_csr::generate_to_file(&self.graph(), self.seed, None, &sort, path, progress)
            .and_then(|_| Graph::open(path))
            .map_err(crate::Error::Graph)
    }

    /// Checks the settings.
    pub fn validate(&self) -> Result<(), InvalidArgument> {
        self.load.validate()?;
        if self
            .steps
            .iter()
            .any(|&s| s == 0 || s > crate::travel::MAX_HOPS)
        {
            return Err(InvalidArgument::new(
                "steps",
                format!("each depth is 1..={}", crate::travel::MAX_HOPS),
            ));
        }
        if self.degree_samples < 2 {
            return Err(InvalidArgument::new(
                "degree-samples",
                "takes at least 2 degrees (the smallest and the largest)",
            ));
        }
        Ok(())
    }
}

/// One traversal measured.
#[derive(Clone, Debug, Serialize)]
pub struct TraversalRow {
    /// Hops.
    pub steps: usize,
    /// The traversal engine.
    pub engine: Engine,
    /// Servers prefetched while waiting.
    pub prefetch: bool,
    /// Read as of the first version of every edge (older than the newest).
    pub past: bool,
    /// Versions every edge had when it ran: 1, or 2 for the deepest
    /// traversal as of the newest and as of the past, after every edge
    /// was written again.
    pub versions: u32,
    /// Vertices at the last step.
    pub end_vertices: u64,
    /// Every step's counts added up, and the traversal's wall time.
    #[serde(flatten)]
    pub totals: crate::client::StepReport,
}

/// Server-side counts over the benchmark.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ServerTotals {
    /// Partitions split.
    pub splits: u64,
    /// Edges moved by splits.
    pub edges_moved: u64,
    /// Requests between servers.
    pub messages: u64,
    /// Their bytes.
    pub bytes: u64,
}

/// What a benchmark run measured.
#[derive(Clone, Debug, Serialize)]
pub struct BenchReport {
    /// The workload.
    pub workload: Workload,
    /// The cluster's partitioner.
    pub partitioner: String,
    /// Servers.
    pub servers: usize,
    /// Clients.
    pub clients: usize,
    /// The load (all workloads load first).
    pub load: LoadReport,
    /// mdtest: files created per second (a vertex and its directory edge).
    pub creates_per_s: Option<f64>,
    /// traverse: the vertex traversals start from.
    pub start: Option<String>,
    /// traverse: each depth synchronous without and with prefetching and
    /// asynchronous, then the deepest as of now and as
    /// of the past.
    pub traversals: Vec<TraversalRow>,
    /// degrees: one vertex of each out-degree, by degree.
    pub degrees: Vec<DegreeRow>,
    /// degrees: the rows added up for degrees up to the split threshold
    /// and above it.
    pub degree_sums: Vec<DegreeSum>,
    /// Counts the servers kept.
    pub totals: ServerTotals,
    /// The run's times: `load_ns` the loading that precedes traversals,
    /// `compute_ns` what the workload measures (insert and mdtest measure
    /// their load, so theirs is all compute).
    #[serde(flatten)]
    pub summary: RunSummary,
}

/// The report in lines: the load, the workload's own figures, the
/// servers' counts.
impl std::fmt::Display for BenchReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.servers == 0 {
            writeln!(
                f,
                "{} straight into one RocksDB in this process (no servers)",
                self.workload.name()
            )?;
        } else {
            writeln!(
                f,
                "{} on {} servers ({}), {} clients",
                self.workload.name(),
                self.servers,
                self.partitioner,
                self.clients
            )?;
        }
        writeln!(f, "  load: {}", self.load)?;
        if let Some(c) = self.creates_per_s {
            writeln!(f, "  {c:.0} creates/s")?;
        }
        if let Some(start) = &self.start {
            writeln!(f, "  traversals from {start}:")?;
            for t in &self.traversals {
                #[allow(clippy::cast_precision_loss)] // milliseconds, shown
                let ms = t.totals.ns as f64 / 1e6;
                writeln!(
                    f,
                    "  {} steps, {}{}{}{}: {ms:.1} ms, {} vertices at the end, {} edges, StatComm {}, StatReads {}, {} messages ({} B), {} prefetch hits",
                    t.steps,
                    t.engine,
                    if t.prefetch { ", prefetch" } else { "" },
                    if t.versions > 1 { ", every edge written twice" } else { "" },
                    if t.past { ", as of the first versions" } else { "" },
                    t.end_vertices,
                    t.totals.edges,
                    t.totals.stat_comm,
                    t.totals.stat_reads,
                    t.totals.messages,
                    t.totals.bytes,
                    t.totals.prefetch_hits
                )?;
            }
        }
        if !self.degrees.is_empty() {
            writeln!(
                f,
                "  from one vertex of each of {} out-degrees (StatComm / StatReads):",
                self.degrees.len()
            )?;
            for sum in &self.degree_sums {
                let range = if sum.max_degree == u64::MAX {
                    format!("{}+", sum.min_degree)
                } else {
                    format!("{}-{}", sum.min_degree, sum.max_degree)
                };
                writeln!(
                    f,
                    "  degrees {range} ({} vertices): scans {} / {}, {DEGREE_TRAVERSAL_STEPS}-step traversals {} / {}",
                    sum.vertices,
                    sum.scan.stat_comm,
                    sum.scan.stat_reads,
                    sum.traversal.stat_comm,
                    sum.traversal.stat_reads
                )?;
            }
        }
        if self.servers > 0 {
            let t = &self.totals;
            writeln!(
                f,
                "  servers: {} splits, {} edges moved, {} messages ({} B) between servers",
                t.splits, t.edges_moved, t.messages, t.bytes
            )?;
        }
        Ok(())
    }
}

/// StatComm and StatReads of one operation.
#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Stats {
    /// StatComm.
    pub stat_comm: u64,
    /// StatReads (summed over the steps).
    pub stat_reads: u64,
}

impl Stats {
    fn of(totals: &crate::client::StepReport) -> Stats {
        Stats {
            stat_comm: totals.stat_comm,
            stat_reads: totals.stat_reads,
        }
    }

    fn add(&mut self, other: Stats) {
        self.stat_comm += other.stat_comm;
        self.stat_reads += other.stat_reads;
    }
}

/// The counts from one vertex (Figs. 12–15).
#[derive(Clone, Debug, Serialize)]
pub struct DegreeRow {
    /// Its out-degree.
    pub degree: u64,
    /// The vertex.
    pub vertex: String,
    /// Reading its edges and their destinations (`v(x).e(has)`).
    pub scan: Stats,
    /// A [`DEGREE_TRAVERSAL_STEPS`]-step traversal from it.
    pub traversal: Stats,
}

/// Per-degree rows added up over a range of degrees.
#[derive(Clone, Debug, Serialize)]
pub struct DegreeSum {
    /// The smallest degree in the range.
    pub min_degree: u64,
    /// The largest (`u64::MAX`: no bound).
    pub max_degree: u64,
    /// Vertices in it.
    pub vertices: u64,
    /// Their scans.
    pub scan: Stats,
    /// Their traversals.
    pub traversal: Stats,
}

async fn totals(client: &Client) -> Result<ServerTotals> {
    let mut t = ServerTotals::default();
    for s in client.stats().await? {
        t.splits += s.splits;
        t.edges_moved += s.edges_moved;
        t.messages += s.messages;
        t.bytes += s.bytes;
    }
    Ok(t)
}

/// Runs `workload` against the cluster `client` is connected to; traverse
/// needs `graph`.
///
/// # Errors
/// A failed load or traversal; [`crate::Error::Cancelled`] once `progress`
/// says cancelled (checked after each batch, traversal and degree).
pub async fn run(
    client: &Client,
    workload: Workload,
    graph: Option<&Graph>,
    config: &BenchConfig,
    progress: &dyn Progress,
) -> Result<BenchReport> {
    config.validate()?;
    let started = Instant::now();
    let before = totals(client).await?;
    let mut report = BenchReport {
        workload,
        partitioner: client.placement().partitioner().name().to_string(),
        servers: client.servers().len(),
        clients: config.load.clients,
        load: LoadReport::default(),
        creates_per_s: None,
        start: None,
        traversals: Vec::new(),
        degrees: Vec::new(),
        degree_sums: Vec::new(),
        totals: ServerTotals::default(),
        summary: RunSummary::default(),
    };
    // Loading before what is measured (traverse and degrees).
    let mut load_ns = 0;
    match workload {
        Workload::Insert => {
            let writes = ingest_writes(workload, config)?;
            report.load = load(client, Arc::new(writes), config.load, progress).await?;
        }
        Workload::Mdtest => {
            client.write(&[mdtest_directory()]).await?;
            let writes = ingest_writes(workload, config)?;
            report.load = load(client, Arc::new(writes), config.load, progress).await?;
            report.creates_per_s = Some(report.load.writes_per_s / 2.0);
        }
        Workload::Degrees => {
            let graph = graph.ok_or_else(|| {
                InvalidArgument::new("graph", "the degrees workload runs on a graph")
            })?;
            let writes = Arc::new(graph_writes(graph, "file", "has", config.seed));
            report.load = load(client, writes, config.load, progress).await?;
            load_ns = report.load.summary.wall_ns;
            report.degrees = degree_rows(client, graph, config.degree_samples, progress).await?;
            report.degree_sums = degree_sums(&report.degrees, u64::from(client.threshold()));
        }
        Workload::Traverse => {
            let graph = graph.ok_or_else(|| {
                InvalidArgument::new("graph", "the traverse workload runs on a graph")
            })?;
            let start = (0..graph.num_vertices())
                .find(|&v| graph.degree(v) > 0)
                .ok_or_else(|| InvalidArgument::new("graph", "has no edge to traverse"))?;
            let start = vertex_id(graph, start);
            report.start = Some(String::from_utf8_lossy(&start).into_owned());
            let writes = Arc::new(graph_writes(graph, "file", "has", config.seed));
            report.load = load(client, writes.clone(), config.load, progress).await?;
            load_ns = report.load.summary.wall_ns;
            let first = client.session();
            for &steps in &config.steps {
                let travel = GTravel::v([start.clone()]).e("has").repeat(steps);
                for (engine, prefetch) in [
                    (Engine::Sync, false),
                    (Engine::Sync, true),
                    (Engine::Async, false),
                ] {
                    let options = TravelOptions {
                        as_of: None,
                        prefetch,
                        engine,
                    };
                    report
                        .traversals
                        .push(traverse(client, &travel, steps, options, 1).await?);
                    progress.check()?;
                }
            }
            // A second version of every edge, then the deepest traversal
            // as of the first versions against the newest.
            let again: Vec<Write> = writes
                .iter()
                .filter(|w| matches!(w, Write::Edge { .. }))
                .cloned()
                .collect();
            let again = load(client, Arc::new(again), config.load, progress).await?;
            load_ns += again.summary.wall_ns;
            let steps = config.steps.iter().copied().max().unwrap_or(2);
            let travel = GTravel::v([start.clone()]).e("has").repeat(steps);
            let newest = TravelOptions::default();
            report
                .traversals
                .push(traverse(client, &travel, steps, newest, 2).await?);
            let past = TravelOptions {
                as_of: Some(first),
                ..newest
            };
            report
                .traversals
                .push(traverse(client, &travel, steps, past, 2).await?);
        }
    }
    let after = totals(client).await?;
    report.totals = ServerTotals {
        splits: after.splits - before.splits,
        edges_moved: after.edges_moved - before.edges_moved,
        messages: after.messages - before.messages,
        bytes: after.bytes - before.bytes,
    };
    let wall_ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
    report.summary = RunSummary {
        wall_ns,
        load_ns,
        compute_ns: wall_ns.saturating_sub(load_ns),
        threads: config.load.clients,
        ..RunSummary::default()
    };
    Ok(report)
}

/// The directory mdtest creates its files in.
fn mdtest_directory() -> Write {
    Write::Vertex {
        id: b"/mdtest".to_vec(),
        vtype: "directory".into(),
        attrs: BTreeMap::new(),
    }
}

/// What insert and mdtest write (mdtest's directory aside): Darshan-like
/// metadata, or each client's creates (a file vertex and its directory
/// edge) interleaved by client, as the clients' creates arrive.
fn ingest_writes(workload: Workload, config: &BenchConfig) -> Result<Vec<Write>> {
    match workload {
        Workload::Insert => Ok(crate::darshan::generate(config.vertices, config.seed)),
        Workload::Mdtest => {
            let mut writes = Vec::new();
            for i in 0..config.files_per_client {
                for c in 0..config.load.clients {
                    let file = format!("/mdtest/c{c}-f{i}").into_bytes();
                    writes.push(Write::Vertex {
                        id: file.clone(),
                        vtype: "file".into(),
                        attrs: BTreeMap::from([("mode".to_string(), b"0644".to_vec())]),
                    });
                    writes.push(Write::Edge {
                        src: b"/mdtest".to_vec(),
                        etype: "has".into(),
                        dst: file,
                        props: BTreeMap::new(),
                    });
                }
            }
            Ok(writes)
        }
        Workload::Traverse | Workload::Degrees => Err(InvalidArgument::new(
            "raw_rocksdb",
            format!(
                "measures insert and mdtest; {} has no ingest",
                workload.name()
            ),
        )
        .into()),
    }
}

/// The ceiling the servers' ingest is measured against: insert's or
/// mdtest's writes stored by this process straight into one RocksDB in
/// `dir`, opened as a server opens its store (same options, the WAL, fsync
/// per batch with `sync`), one WriteBatch a request of `config.load.batch`
/// writes holding every entry the servers store for them: a vertex's type
/// and attributes; an edge, its reverse edge, and the reverse edge's
/// pending entry put and deleted. No validation, no network, no
/// placement: the most this machine's RocksDB does with the same keys and
/// values.
///
/// # Errors
/// A workload without an ingest; the store's errors; [`crate::Error::Cancelled`].
pub fn raw_rocksdb(
    workload: Workload,
    config: &BenchConfig,
    schema: &Schema,
    sync: bool,
    dir: &Path,
    progress: &dyn Progress,
) -> Result<BenchReport> {
    config.validate()?;
    let mut writes = ingest_writes(workload, config)?;
    let store_error = |source| crate::Error::Store {
        path: dir.to_path_buf(),
        source,
    };
    let store = Store::open(dir, sync).map_err(store_error)?;
    if workload == Workload::Mdtest {
        writes.insert(0, mdtest_directory());
    }
    let clock = Clock::default();
    let started = Instant::now();
    progress.start("writing to RocksDB", Unit::Ops, Some(writes.len() as u64));
    let mut seq = 0u64;
    let mut report = LoadReport::default();
    for chunk in writes.chunks(config.load.batch) {
        let ts = clock.stamp(0);
        let mut batch = Batch::default();
        for w in chunk {
            match w {
                Write::Vertex { id, vtype, attrs } => {
                    batch.put_type(id, vtype, ts);
                    for (name, value) in attrs {
                        batch.put_attr(id, schema.section(vtype, name), name, value, ts);
                    }
                    report.vertices += 1;
                }
                Write::Edge {
                    src,
                    etype,
                    dst,
                    props,
                } => {
                    batch.put_edge(src, etype, dst, Some(props), ts);
                    let edge = rpc::EdgePut {
                        src: src.clone(),
                        etype: etype.clone(),
                        dst: dst.clone(),
                        props: props.clone(),
                        node: 0,
                        remove: false,
                        ts,
                    };
                    if let Some(back) = schema.reverse(&edge, ts) {
                        let id = pending_id(ts, seq);
                        seq += 1;
                        batch.add_pending(id.clone(), prost::Message::encode_to_vec(&back));
                        batch.put_edge(&back.src, &back.etype, &back.dst, Some(props), ts);
                        batch.remove_pending(id);
                    }
                    report.edges += 1;
                }
                Write::DeleteVertex { id } => {
                    batch.delete_vertex(id, &[], ts);
                    report.vertices += 1;
                }
                Write::DeleteEdge { src, etype, dst } => {
                    batch.put_edge(src, etype, dst, None, ts);
                    report.edges += 1;
                }
            }
        }
        store.write(batch).map_err(store_error)?;
        progress.advance(chunk.len() as u64);
        progress.check()?;
    }
    let wall_ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
    report.acknowledged = report.vertices + report.edges;
    report.writes_per_s = report.acknowledged as f64 / (wall_ns as f64 / 1e9).max(1e-9);
    report.summary = RunSummary {
        wall_ns,
        compute_ns: wall_ns,
        threads: 1,
        ..RunSummary::default()
    };
    report.ts = clock.read_time(0);
    let summary = report.summary;
    Ok(BenchReport {
        workload,
        partitioner: "none (one RocksDB, no servers)".into(),
        servers: 0,
        clients: 1,
        creates_per_s: (workload == Workload::Mdtest).then(|| report.writes_per_s / 2.0),
        load: report,
        start: None,
        traversals: Vec::new(),
        degrees: Vec::new(),
        degree_sums: Vec::new(),
        totals: ServerTotals::default(),
        summary,
    })
}

/// One traversal of `travel` (`steps` hops) as `options` say, every edge
/// having `versions` versions.
async fn traverse(
    client: &Client,
    travel: &Travel,
    steps: usize,
    options: TravelOptions,
    versions: u32,
) -> Result<TraversalRow> {
    let result = client.travel(travel, options).await?;
    Ok(TraversalRow {
        steps,
        engine: options.engine,
        prefetch: options.prefetch,
        past: options.as_of.is_some(),
        versions,
        end_vertices: result.vertices().len() as u64,
        totals: result.totals(),
    })
}

/// The first vertex of each out-degree (of at most `samples` degrees,
/// spread evenly on a log scale), scanned and traversed from.
async fn degree_rows(
    client: &Client,
    graph: &Graph,
    samples: usize,
    progress: &dyn Progress,
) -> Result<Vec<DegreeRow>> {
    let mut first: BTreeMap<u64, u32> = BTreeMap::new();
    for (v, d) in (0u32..).zip(graph.degrees()) {
        if d > 0 {
            first.entry(d).or_insert(v);
        }
    }
    let degrees: Vec<u64> = first.keys().copied().collect();
    let kept = log_spaced(&degrees, samples);
    progress.start("traversals by degree", Unit::Ops, Some(kept.len() as u64));
    let mut rows = Vec::with_capacity(kept.len());
    for degree in kept {
        let vertex = vertex_id(graph, first[&degree]);
        let from = |steps| GTravel::v([vertex.clone()]).e("has").repeat(steps);
        let options = TravelOptions::default();
        let scan = client.travel(&from(1), options).await?;
        let traversal = client
            .travel(&from(DEGREE_TRAVERSAL_STEPS), options)
            .await?;
        rows.push(DegreeRow {
            degree,
            vertex: String::from_utf8_lossy(&vertex).into_owned(),
            scan: Stats::of(&scan.totals()),
            traversal: Stats::of(&traversal.totals()),
        });
        progress.advance(1);
        progress.check()?;
    }
    Ok(rows)
}

/// `rows` added up for degrees up to `threshold` and above it.
fn degree_sums(rows: &[DegreeRow], threshold: u64) -> Vec<DegreeSum> {
    [(1, threshold), (threshold + 1, u64::MAX)]
        .into_iter()
        .map(|(min_degree, max_degree)| {
            let mut sum = DegreeSum {
                min_degree,
                max_degree,
                vertices: 0,
                scan: Stats::default(),
                traversal: Stats::default(),
            };
            for r in rows
                .iter()
                .filter(|r| (min_degree..=max_degree).contains(&r.degree))
            {
                sum.vertices += 1;
                sum.scan.add(r.scan);
                sum.traversal.add(r.traversal);
            }
            sum
        })
        .collect()
}

/// At most `n` of the sorted, distinct `degrees`, spread evenly on a log
/// scale: for each of `n` points from the smallest to the largest, the
/// first degree at or above it. All of them when there are at most `n`
/// (or `n` is below 2, which [`BenchConfig::validate`] refuses).
fn log_spaced(degrees: &[u64], n: usize) -> Vec<u64> {
    let (Some(&lo), Some(&hi)) = (degrees.first(), degrees.last()) else {
        return Vec::new();
    };
    if degrees.len() <= n || n < 2 {
        return degrees.to_vec();
    }
    let (lo, hi) = ((lo as f64).ln(), (hi as f64).ln());
    let mut out: Vec<u64> = (0..n)
        .map(|i| {
            let point = (lo + (hi - lo) * i as f64 / (n - 1) as f64).exp();
            let at = degrees.partition_point(|&d| (d as f64) < point - 1e-9);
            degrees[at.min(degrees.len() - 1)]
        })
        .collect();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn log_spaced_keeps_the_ends_and_spreads(
            mut degrees in prop::collection::btree_set(1u64..5000, 1..300),
            n in 2usize..60,
        ) {
            let degrees: Vec<u64> = std::mem::take(&mut degrees).into_iter().collect();
            let kept = log_spaced(&degrees, n);
            if degrees.len() <= n {
                prop_assert_eq!(&kept, &degrees);
            }
            prop_assert!(kept.len() <= n);
            prop_assert_eq!(kept.first(), degrees.first());
            prop_assert_eq!(kept.last(), degrees.last());
            prop_assert!(kept.windows(2).all(|w| w[0] < w[1]));
            prop_assert!(kept.iter().all(|d| degrees.contains(d)));
        }
    }

    #[test]
    fn log_spaced_is_even_on_a_log_scale() {
        let all: Vec<u64> = (1..=1000).collect();
        assert_eq!(log_spaced(&all, 4), [1, 10, 100, 1000]);
        let sparse = [1, 2, 50, 60, 999, 1000];
        assert_eq!(log_spaced(&sparse, 4), [1, 50, 999, 1000]);
    }

    #[test]
    fn degree_sums_split_at_the_threshold() {
        let row = |degree, c| DegreeRow {
            degree,
            vertex: format!("v{degree}"),
            scan: Stats {
                stat_comm: c,
                stat_reads: 1,
            },
            traversal: Stats {
                stat_comm: 10 * c,
                stat_reads: 2,
            },
        };
        let sums = degree_sums(&[row(1, 1), row(128, 2), row(129, 4), row(900, 8)], 128);
        assert_eq!(
            (
                sums[0].vertices,
                sums[0].scan.stat_comm,
                sums[0].traversal.stat_comm
            ),
            (2, 3, 30)
        );
        assert_eq!(
            (
                sums[1].vertices,
                sums[1].scan.stat_comm,
                sums[1].traversal.stat_reads
            ),
            (2, 12, 4)
        );
        assert_eq!((sums[0].max_degree, sums[1].min_degree), (128, 129));
    }
}
