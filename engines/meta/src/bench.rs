//! The paper's measurements (§6), run against a cluster a caller started:
//! ingest throughput on Darshan-like metadata (Fig. 11), mdtest-style
//! creates in one directory (Fig. 18), and traversals on an R-MAT graph
//! with StatComm and StatReads per partitioner, prefetching on and off,
//! and as of a past time (Figs. 10, 12–16).

use std::collections::BTreeMap;
use std::sync::Arc;

use quiver_csr::Graph;
use quiver_run::{InvalidArgument, Progress};
use serde::Serialize;

use crate::client::{Client, Engine, TravelOptions, Write};
use crate::error::Result;
use crate::load::{graph_writes, load, vertex_id, LoadConfig, LoadReport};
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
}

/// Benchmark settings; [`BenchConfig::default`] holds every default.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    /// Vertices of the Darshan-like graph (insert).
    pub vertices: usize,
    /// Files each client creates (mdtest; the paper's 4,000).
    pub files_per_client: usize,
    /// Traversal depths (traverse; the paper's 2, 4 and 8).
    pub steps: Vec<usize>,
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
            load: LoadConfig::default(),
            seed: 1,
        }
    }
}

impl BenchConfig {
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
    /// Counts the servers kept.
    pub totals: ServerTotals,
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
pub async fn run(
    client: &Client,
    workload: Workload,
    graph: Option<&Graph>,
    config: &BenchConfig,
    progress: &dyn Progress,
) -> Result<BenchReport> {
    config.validate()?;
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
        totals: ServerTotals::default(),
    };
    match workload {
        Workload::Insert => {
            let writes = crate::darshan::generate(config.vertices, config.seed);
            report.load = load(client, Arc::new(writes), config.load, progress).await?;
        }
        Workload::Mdtest => {
            let dir = b"/mdtest".to_vec();
            client
                .write(&[Write::Vertex {
                    id: dir.clone(),
                    vtype: "directory".into(),
                    attrs: BTreeMap::new(),
                }])
                .await?;
            let mut writes = Vec::new();
            // Interleaved by client, as the clients' creates arrive.
            for i in 0..config.files_per_client {
                for c in 0..config.load.clients {
                    let file = format!("/mdtest/c{c}-f{i}").into_bytes();
                    writes.push(Write::Vertex {
                        id: file.clone(),
                        vtype: "file".into(),
                        attrs: BTreeMap::from([("mode".to_string(), b"0644".to_vec())]),
                    });
                    writes.push(Write::Edge {
                        src: dir.clone(),
                        etype: "has".into(),
                        dst: file,
                        props: BTreeMap::new(),
                    });
                }
            }
            report.load = load(client, Arc::new(writes), config.load, progress).await?;
            report.creates_per_s = Some(report.load.writes_per_s / 2.0);
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
                        .push(traverse(client, &travel, steps, options).await?);
                }
            }
            // A second version of every edge, then the deepest traversal
            // as of the first versions against the newest.
            let again: Vec<Write> = writes
                .iter()
                .filter(|w| matches!(w, Write::Edge { .. }))
                .cloned()
                .collect();
            load(client, Arc::new(again), config.load, progress).await?;
            let steps = config.steps.iter().copied().max().unwrap_or(2);
            let travel = GTravel::v([start.clone()]).e("has").repeat(steps);
            let newest = TravelOptions::default();
            report
                .traversals
                .push(traverse(client, &travel, steps, newest).await?);
            let past = TravelOptions {
                as_of: Some(first),
                ..newest
            };
            report
                .traversals
                .push(traverse(client, &travel, steps, past).await?);
        }
    }
    let after = totals(client).await?;
    report.totals = ServerTotals {
        splits: after.splits - before.splits,
        edges_moved: after.edges_moved - before.edges_moved,
        messages: after.messages - before.messages,
        bytes: after.bytes - before.bytes,
    };
    Ok(report)
}

async fn traverse(
    client: &Client,
    travel: &Travel,
    steps: usize,
    options: TravelOptions,
) -> Result<TraversalRow> {
    let result = client.travel(travel, options).await?;
    Ok(TraversalRow {
        steps,
        engine: options.engine,
        prefetch: options.prefetch,
        past: options.as_of.is_some(),
        end_vertices: result.vertices().len() as u64,
        totals: result.totals(),
    })
}
