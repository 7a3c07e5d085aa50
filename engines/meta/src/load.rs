//! Bulk loading: many clients writing batches at once, and the writes that
//! turn a `.qcsr` graph into metadata.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use quiver_csr::Graph;
use quiver_run::{InvalidArgument, Progress, RunSummary, Unit};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64;
use serde::Serialize;

use crate::client::{Client, Write};
use crate::darshan::ATTR_BYTES;
use crate::error::Result;

/// How a load runs; [`LoadConfig::default`] holds every default.
#[derive(Clone, Copy, Debug)]
pub struct LoadConfig {
    /// Clients writing at once (the paper runs 8 per server).
    pub clients: usize,
    /// Writes per request.
    pub batch: usize,
}

impl Default for LoadConfig {
    fn default() -> LoadConfig {
        LoadConfig {
            clients: 32,
            batch: 256,
        }
    }
}

impl LoadConfig {
    /// Checks the settings.
    pub fn validate(&self) -> Result<(), InvalidArgument> {
        if self.clients == 0 {
            return Err(InvalidArgument::new(
                "clients",
                "at least one client writes",
            ));
        }
        if self.batch == 0 {
            return Err(InvalidArgument::new(
                "batch",
                "a request holds at least one write",
            ));
        }
        Ok(())
    }
}

/// What a load did.
#[derive(Clone, Debug, Default, Serialize)]
pub struct LoadReport {
    /// Writes the servers acknowledged (a vertex or an edge each; the
    /// reverse edges the servers add are not counted).
    pub acknowledged: u64,
    /// Of which vertices.
    pub vertices: u64,
    /// Of which edges.
    pub edges: u64,
    /// Partitions that split.
    pub splits: u64,
    /// Edges sent again after meeting an unknown split.
    pub rerouted: u64,
    /// Wall time (all of it compute: a load reads no graph), and the
    /// clients as threads.
    #[serde(flatten)]
    pub summary: RunSummary,
    /// Acknowledged writes per second.
    pub writes_per_s: f64,
    /// The newest timestamp written (a time as of which everything is
    /// visible).
    pub ts: u64,
}

/// One line: the writes acknowledged, their rate, splits and re-routes.
impl std::fmt::Display for LoadReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        #[allow(clippy::cast_precision_loss)] // seconds, shown
        let seconds = self.summary.wall_ns as f64 / 1e9;
        write!(
            f,
            "{} writes acknowledged ({} vertices, {} edges) in {seconds:.2} s = {:.0} writes/s; {} splits, {} re-routed",
            self.acknowledged, self.vertices, self.edges, self.writes_per_s, self.splits, self.rerouted
        )
    }
}

/// Writes `writes` with `config.clients` clients at once, each taking the
/// next batch in order, so a vertex's batch is written no later than the
/// batches after it.
///
/// # Errors
/// The first write error stops every client; it comes back inside
/// [`crate::Error::Interrupted`], which counts the writes acknowledged
/// before it (with one client, the first that many). So does the caller's
/// request to stop (`progress` says cancelled), as [`crate::Error::Cancelled`].
pub async fn load(
    client: &Client,
    writes: Arc<Vec<Write>>,
    config: LoadConfig,
    progress: &dyn Progress,
) -> Result<LoadReport> {
    config.validate()?;
    let started = Instant::now();
    progress.start("loading", Unit::Ops, Some(writes.len() as u64));
    let next = Arc::new(AtomicUsize::new(0));
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..config.clients {
        let (client, writes, next, tx) = (client.clone(), writes.clone(), next.clone(), tx.clone());
        tasks.spawn(async move {
            let mut report = LoadReport::default();
            loop {
                let start = next.fetch_add(config.batch, Ordering::Relaxed);
                if start >= writes.len() {
                    return Ok::<_, crate::Error>(report);
                }
                let chunk = &writes[start..(start + config.batch).min(writes.len())];
                let done = client.write(chunk).await?;
                report.splits += done.splits;
                report.rerouted += done.rerouted;
                report.ts = report.ts.max(done.ts);
                for w in chunk {
                    match w {
                        Write::Vertex { .. } | Write::DeleteVertex { .. } => report.vertices += 1,
                        Write::Edge { .. } | Write::DeleteEdge { .. } => report.edges += 1,
                    }
                }
                let _ = tx.send(chunk.len() as u64);
            }
        });
    }
    drop(tx);
    let mut report = LoadReport::default();
    let mut acknowledged = 0;
    loop {
        tokio::select! {
            Some(n) = rx.recv() => {
                acknowledged += n;
                progress.advance(n);
                if let Err(cancelled) = progress.check() {
                    // Dropping the join set stops the other clients.
                    return Err(crate::Error::Interrupted {
                        acknowledged,
                        source: Box::new(cancelled.into()),
                    });
                }
            }
            joined = tasks.join_next() => match joined {
                None => break,
                Some(done) => {
                    let part = match done.expect("load tasks do not panic") {
                        Ok(part) => part,
                        Err(source) => {
                            // The other clients stop with the join set;
                            // what they had acknowledged is counted.
                            while let Ok(n) = rx.try_recv() {
                                acknowledged += n;
                            }
                            return Err(crate::Error::Interrupted {
                                acknowledged,
                                source: Box::new(source),
                            });
                        }
                    };
                    report.vertices += part.vertices;
                    report.edges += part.edges;
                    report.splits += part.splits;
                    report.rerouted += part.rerouted;
                    report.ts = report.ts.max(part.ts);
                }
            },
        }
    }
    report.acknowledged = report.vertices + report.edges;
    let wall_ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
    report.summary = RunSummary {
        wall_ns,
        compute_ns: wall_ns,
        threads: config.clients,
        ..RunSummary::default()
    };
    report.writes_per_s = report.acknowledged as f64 / (wall_ns as f64 / 1e9).max(1e-9);
    Ok(report)
}

/// The id of vertex `v` of a `.qcsr` graph: `v` and its original id.
pub fn vertex_id(graph: &Graph, v: u32) -> Vec<u8> {
    format!("v{}", graph.original_id(v)).into_bytes()
}

/// Writes creating `graph` as metadata: every vertex a `vtype` and every
/// edge a `relation`, each with one random 128-byte attribute (the paper's
/// set-up); vertices first.
pub fn graph_writes(graph: &Graph, vtype: &str, relation: &str, seed: u64) -> Vec<Write> {
    let mut rng = Pcg64::seed_from_u64(seed);
    let mut value = || -> BTreeMap<String, Vec<u8>> {
        let v = (0..ATTR_BYTES)
            .map(|_| rng.random_range(b'a'..=b'z'))
            .collect();
        BTreeMap::from([("attr".to_string(), v)])
    };
    let n = graph.num_vertices();
    let mut out = Vec::with_capacity(n as usize + usize::try_from(graph.num_edges()).unwrap_or(0));
    for v in 0..n {
        out.push(Write::Vertex {
            id: vertex_id(graph, v),
            vtype: vtype.to_string(),
            attrs: value(),
        });
    }
    for v in 0..n {
        for &u in graph.neighbors(v) {
            out.push(Write::Edge {
                src: vertex_id(graph, v),
                etype: relation.to_string(),
                dst: vertex_id(graph, u),
                props: value(),
            });
        }
    }
    out
}
