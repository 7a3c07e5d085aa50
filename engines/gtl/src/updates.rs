//! The update benchmark (GraphSSD §6.5, Fig. 14) on a graph of ours.
//!
//! The paper grows YouTube (1M vertices, 4.4M edges) by 38K vertices and
//! 550K edges in 10 timestamped snapshots, reads 1000 lists after each
//! (95% on vertices the updates touched, the "latest read" model), and
//! merges the delta graph at the end. We have no timestamps, so the stream
//! is drawn from the graph itself, seeded: the top `new_vertices` share of
//! ids is held back and comes back by AddVertex (with its edges to older
//! vertices), and a `share` of the remaining edges is held back and comes
//! back by AddEdge, in random order, the vertices spread evenly through it.
//! The device is loaded with the rest.
//!
//! On the delta path the host's [`UpdateLogger`] flushes a batch when its
//! records would exceed `flush_bytes` (the paper's 16 KiB host log; the
//! stream has no wall clock, so no 100 ms timer); on the direct path every
//! command is its own read-modify-write. After the stream the delta graph is merged
//! in `merge_steps` steps, with the same 1000 uniform queries after each
//! step and after the whole merge (Fig. 14c).
//!
//! The device is sized to the graph (the GTL's area holds twice the image
//! plus twice GC's reserve), so that GC works as it would on a full device
//! and the simulation's memory stays near the graph's.

use std::collections::HashSet;

use quiver_csr::Graph;
use quiver_run::{InvalidArgument, Progress, RunSummary, Stopwatch, Unit};
use serde::Serialize;

use crate::apps::SplitMix;
use crate::device::Ssd;
use crate::error::Result;
use crate::flash::Nanos;
use crate::ftl::gc_reserve;
use crate::gtl::{pages_needed, GtlCounters};
use crate::logger::{HostClock, LoggerConfig, UpdateLogger};
use crate::update::{Update, UpdatePath};

/// The benchmark's settings; the only place their defaults are written.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// How updates reach the pages.
    pub path: UpdatePath,
    /// Free fraction of each page GraphInitialize leaves (the paper's 1%, 5%, 10%).
    pub slack: f64,
    /// Share of the (old vertices') edges held back and streamed (YouTube: 550K of 4.4M).
    pub share: f64,
    /// Share of the vertices (the highest ids) held back and added (YouTube: 38K of 1M).
    pub new_vertices: f64,
    /// Snapshots the stream is cut into.
    pub snapshots: u32,
    /// GetAdjacencyList calls after each snapshot and each merge step.
    pub queries: u32,
    /// Share of a snapshot's queries on vertices it touched.
    pub hot: f64,
    /// The host log's flush size on the delta path: a batch is what fits a
    /// delta page of this size (16 KiB, a NAND page: 818 records).
    pub flush_bytes: usize,
    /// Steps the final merge is cut into.
    pub merge_steps: u32,
    /// Seed of the stream and the queries.
    pub seed: u64,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            path: UpdatePath::Delta,
            slack: 0.05,
            share: 0.125,
            new_vertices: 0.038,
            snapshots: 10,
            queries: 1000,
            hot: 0.95,
            flush_bytes: 16 << 10,
            merge_steps: 10,
            seed: 1,
        }
    }
}

impl Config {
    /// Checks every setting, naming the first that makes no sense.
    pub fn validate(&self) -> Result<(), InvalidArgument> {
        let fraction = |name: &'static str, value: f64| {
            if (0.0..1.0).contains(&value) {
                Ok(())
            } else {
                Err(InvalidArgument::new(
                    name,
                    format!("must be in [0, 1), got {value}"),
                ))
            }
        };
        fraction("share", self.share)?;
        fraction("new_vertices", self.new_vertices)?;
        if !(0.0..=1.0).contains(&self.hot) {
            return Err(InvalidArgument::new("hot", "must be in [0, 1]"));
        }
        if self.snapshots == 0 || self.merge_steps == 0 {
            return Err(InvalidArgument::new(
                "snapshots",
                "snapshots and merge steps must be at least 1",
            ));
        }
        LoggerConfig {
            path: self.path,
            flush_bytes: self.flush_bytes,
            timer: None,
            clock: HostClock::Wall,
        }
        .validate()?;
        // The device is the default one, sized to the graph, on this slack.
        crate::Config {
            slack: self.slack,
            ..crate::Config::default()
        }
        .validate()
    }
}

/// One snapshot's updates and the reads after them.
#[derive(Clone, Debug, Serialize)]
pub struct Snapshot {
    /// Commands (AddEdge, AddVertex).
    pub updates: u64,
    /// Batches sent to the device.
    pub batches: u64,
    /// NAND pages programmed (GC included).
    pub pages_written: u64,
    /// NAND pages read.
    pub pages_read: u64,
    /// Modelled device time of the updates.
    pub update_ns: Nanos,
    /// Mean modelled latency of the queries after the snapshot.
    pub query_ns: f64,
    /// Vertices with unmerged delta records after it.
    pub chained: u64,
}

/// The final merge, step by step.
#[derive(Clone, Debug, Serialize)]
pub struct Merge {
    /// Modelled device time of the merge alone.
    pub modelled_ns: Nanos,
    /// NAND pages programmed by it (GC included).
    pub pages_written: u64,
    /// NAND pages read by it.
    pub pages_read: u64,
    /// Groups rewritten.
    pub groups: u64,
    /// Mean query latency after each step (Fig. 14c's x axis: fraction merged).
    pub query_ns_during: Vec<f64>,
    /// Mean query latency on the merged graph.
    pub query_ns_merged: f64,
}

/// What the benchmark did.
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// The path updates took.
    pub path: UpdatePath,
    /// Page slack.
    pub slack: f64,
    /// |V| and |E| loaded before the stream.
    pub vertices: u32,
    /// |E| loaded before the stream (stored directed edges).
    pub edges: u64,
    /// Vertices the stream adds.
    pub added_vertices: u64,
    /// Directed edges the stream adds (AddVertex's included).
    pub added_edges: u64,
    /// Graph pages GraphInitialize wrote.
    pub image_pages: u64,
    /// Blocks per die of the device sized for the run.
    pub blocks_per_die: u32,
    /// Times: `load_ns` writes the device, `compute_ns` the stream, reads and merge.
    #[serde(flatten)]
    pub summary: RunSummary,
    /// Each snapshot.
    pub snapshots: Vec<Snapshot>,
    /// The final merge.
    pub merge: Merge,
    /// NAND pages programmed by the stream and the merge.
    pub pages_written: u64,
    /// Bytes programmed over the bytes of edges added (8 per directed edge: target and weight).
    pub write_amplification: f64,
    /// What the GTL did.
    pub gtl: GtlCounters,
}

/// One event of the stream.
enum Event {
    Edge(u32, u32, f32),
    Vertex(Vec<(u32, f32)>),
}

/// The graph the device starts from and the stream that grows it back.
fn split(graph: &Graph, config: &Config) -> (Graph, Vec<Event>) {
    let n = graph.num_vertices();
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // A share of |V|.
    let old = n - ((f64::from(n) * config.new_vertices) as u32).min(n - 1);
    let undirected = graph.is_undirected();
    let weight = |v: u32, i: usize| graph.edge_weights(v).map_or(1.0, |w| w[i]);
    let mut rng = SplitMix::new(config.seed);
    let mut kept = Vec::new();
    let mut streamed = Vec::new();
    let mut late = Vec::new();
    let mut added: Vec<Vec<(u32, f32)>> = vec![Vec::new(); (n - old) as usize];
    for v in 0..n {
        for (i, &t) in graph.neighbors(v).iter().enumerate() {
            // An undirected edge is decided once, at its smaller end.
            if undirected && t < v {
                continue;
            }
            let w = weight(v, i);
            if v.max(t) >= old {
                if undirected {
                    // AddVertex of the newer end (t) adds both directions.
                    added[(t - old) as usize].push((v, w));
                } else if v >= t {
                    added[(v - old) as usize].push((t, w));
                } else {
                    // From an older to a newer vertex: once both exist.
                    late.push((v, t, w));
                }
                continue;
            }
            #[allow(clippy::cast_precision_loss)] // A probability.
            let draw = rng.below(1 << 24) as f64 / f64::from(1 << 24);
            if draw < config.share {
                streamed.push((v, t, w));
            } else {
                kept.push((v, t, w));
                if undirected && v != t {
                    kept.push((t, v, w));
                }
            }
        }
    }
    let initial = Graph::from_edges(old, &kept, graph.is_weighted(), undirected)
        .expect("the kept edges join old vertices");
    // Random order ("timestamps"), the vertices spread evenly through it.
    for i in (1..streamed.len()).rev() {
        let j = usize::try_from(rng.below(i as u64 + 1)).expect("below a length");
        streamed.swap(i, j);
    }
    let (edges, vertices) = (streamed.len(), added.len());
    let mut events = Vec::with_capacity(edges + vertices + late.len());
    let mut streamed = streamed.into_iter().map(|(s, t, w)| Event::Edge(s, t, w));
    for (k, list) in added.into_iter().enumerate() {
        let before = (k + 1) * edges / (vertices + 1);
        events.extend(streamed.by_ref().take(before - (events.len() - k)));
        events.push(Event::Vertex(list));
    }
    events.extend(streamed);
    events.extend(late.into_iter().map(|(s, t, w)| Event::Edge(s, t, w)));
    (initial, events)
}

/// The device config for `graph` on `config`'s slack: default timing and
/// channels, blocks per die sized to the graph.
fn device_for(graph: &Graph, slack: f64, progress: &dyn Progress) -> Result<crate::Config> {
    let mut device = crate::Config {
        slack,
        ..crate::Config::default()
    };
    let geometry = &device.geometry;
    let format = crate::page::PageFormat::new(geometry.page_bytes as usize, slack)?;
    let image = pages_needed(graph, &format, progress)?;
    let per_block_row = u64::from(geometry.dies()) * u64::from(geometry.pages_per_block);
    let want = 2 * image + 2 * gc_reserve(geometry);
    let gtl_blocks = u32::try_from(want.div_ceil(per_block_row)).expect("fits u32");
    // The FTL (unused here, so never in memory) keeps the blocks its
    // over-provisioning rule needs.
    device.ftl_blocks_per_die = 32;
    device.geometry.blocks_per_die = 32 + gtl_blocks;
    Ok(device)
}

/// Mean modelled latency of GetAdjacencyList on `vertices`, one after another.
fn mean_latency(ssd: &mut Ssd, vertices: &[u32]) -> Result<f64> {
    let mut total = 0u64;
    for &v in vertices {
        total += ssd.get_adjacency_list(v)?.latency();
    }
    #[allow(clippy::cast_precision_loss)] // A mean of modelled nanoseconds.
    Ok(total as f64 / vertices.len().max(1) as f64)
}

/// Runs the benchmark on `graph` (its updates drawn from it) with `config`.
pub fn run(graph: &Graph, config: &Config, progress: &dyn Progress) -> Result<Report> {
    run_on(graph, config, progress).map(|(report, _)| report)
}

/// [`run`], also returning the device as the run left it.
fn run_on(graph: &Graph, config: &Config, progress: &dyn Progress) -> Result<(Report, Ssd)> {
    let wall = Stopwatch::start();
    config.validate()?;
    let (initial, events) = split(graph, config);
    let device = device_for(graph, config.slack, progress)?;
    let load = Stopwatch::start();
    let mut ssd = Ssd::new(&device)?;
    let layout = ssd.graph_initialize(&initial, progress)?;
    let load_ns = load.elapsed_ns();
    let programs_at_start = ssd.flash().counters().programs;
    let compute = Stopwatch::start();
    let mut rng = SplitMix::new(config.seed ^ 0x9e37_79b9_7f4a_7c15);
    let undirected = graph.is_undirected();
    let mut snapshots = Vec::new();
    let mut added_edges = 0u64;
    let per_snapshot = events.len().div_ceil(config.snapshots as usize).max(1);
    progress.start("streaming updates", Unit::Ops, Some(events.len() as u64));
    for chunk in events.chunks(per_snapshot) {
        let (programs, reads, start) = (
            ssd.flash().counters().programs,
            ssd.flash().counters().page_reads,
            ssd.now(),
        );
        let mut touched = HashSet::new();
        let mut next_vertex = ssd.gtl().map_or(0, crate::gtl::Gtl::vertices);
        let mut logger = UpdateLogger::new(LoggerConfig {
            path: config.path,
            flush_bytes: config.flush_bytes,
            timer: None,
            clock: HostClock::Wall,
        })?;
        let mut direct_calls = 0;
        for event in chunk {
            let update = match event {
                Event::Edge(s, t, w) => {
                    touched.extend([*s, *t]);
                    added_edges += 1 + u64::from(undirected && s != t);
                    Update::AddEdge {
                        source: *s,
                        target: *t,
                        weight: *w,
                    }
                }
                Event::Vertex(edges) => {
                    touched.insert(next_vertex);
                    touched.extend(edges.iter().map(|e| e.0));
                    let reverse = edges.iter().filter(|e| undirected && e.0 != next_vertex);
                    added_edges += (edges.len() + reverse.count()) as u64;
                    next_vertex += 1;
                    Update::AddVertex {
                        edges: edges.clone(),
                    }
                }
            };
            match config.path {
                UpdatePath::Delta => {
                    logger.log(&mut ssd, &update)?;
                }
                UpdatePath::Direct => {
                    ssd.update(&[update], config.path)?;
                    direct_calls += 1;
                }
            }
        }
        logger.flush(&mut ssd)?;
        let batches = logger.flushes() + direct_calls;
        progress.advance(chunk.len() as u64);
        progress.check()?;
        let update_ns = ssd.now() - start;
        let counters = ssd.flash().counters().clone();
        let touched: Vec<u32> = touched.into_iter().collect();
        let n = ssd.gtl().map_or(0, crate::gtl::Gtl::vertices);
        let queries: Vec<u32> = (0..config.queries)
            .map(|_| {
                #[allow(clippy::cast_precision_loss)] // A probability.
                let hot = (rng.below(1 << 24) as f64) < config.hot * f64::from(1 << 24);
                if hot && !touched.is_empty() {
                    touched[usize::try_from(rng.below(touched.len() as u64)).expect("an index")]
                } else {
                    u32::try_from(rng.below(u64::from(n))).expect("below |V|")
                }
            })
            .collect();
        let query_ns = mean_latency(&mut ssd, &queries)?;
        snapshots.push(Snapshot {
            updates: chunk.len() as u64,
            batches,
            pages_written: counters.programs - programs,
            pages_read: counters.page_reads - reads,
            update_ns,
            query_ns,
            chained: ssd.gtl().map_or(0, |g| g.chained() as u64),
        });
    }
    progress.start("merging", Unit::Ops, Some(u64::from(config.merge_steps)));
    let n = ssd.gtl().map_or(0, crate::gtl::Gtl::vertices);
    let uniform: Vec<u32> = (0..config.queries)
        .map(|_| u32::try_from(rng.below(u64::from(n))).expect("below |V|"))
        .collect();
    let programs = ssd.flash().counters().programs;
    let rewrites_before = ssd.gtl().map_or(0, |g| g.counters().rewrites);
    let mut merge_ns = 0;
    let mut query_ns_during = Vec::new();
    let total = ssd.merge(Some(0))?.remaining;
    let step = usize::try_from(total.div_ceil(u64::from(config.merge_steps))).expect("fits usize");
    let mut merge_reads = 0;
    for _ in 0..config.merge_steps {
        let start = ssd.now();
        let reads_before = ssd.flash().counters().page_reads;
        ssd.merge(Some(step))?;
        merge_ns += ssd.now() - start;
        merge_reads += ssd.flash().counters().page_reads - reads_before;
        query_ns_during.push(mean_latency(&mut ssd, &uniform)?);
        progress.advance(1);
        progress.check()?;
    }
    let merge_programs = ssd.flash().counters().programs - programs;
    let query_ns_merged = mean_latency(&mut ssd, &uniform)?;
    let gtl = *ssd.gtl().expect("initialized").counters();
    let page_bytes = u64::from(device.geometry.page_bytes);
    let pages_written = ssd.flash().counters().programs - programs_at_start;
    let compute_ns = compute.elapsed_ns();
    #[allow(clippy::cast_precision_loss)] // A ratio of byte counts.
    let write_amplification = (pages_written * page_bytes) as f64 / (added_edges.max(1) * 8) as f64;
    let report = Report {
        path: config.path,
        slack: config.slack,
        vertices: initial.num_vertices(),
        edges: initial.num_edges(),
        added_vertices: u64::from(graph.num_vertices() - initial.num_vertices()),
        added_edges,
        image_pages: layout.pages + layout.weight_pages,
        blocks_per_die: device.geometry.blocks_per_die,
        summary: RunSummary {
            load_ns,
            compute_ns,
            threads: 1,
            wall_ns: wall.elapsed_ns(),
            write_calls: pages_written,
            bytes_written: pages_written * page_bytes,
            ..RunSummary::default()
        },
        snapshots,
        merge: Merge {
            modelled_ns: merge_ns,
            pages_written: merge_programs,
            pages_read: merge_reads,
            groups: gtl.rewrites - rewrites_before,
            query_ns_during,
            query_ns_merged,
        },
        pages_written,
        write_amplification,
        gtl,
    };
    Ok((report, ssd))
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use quiver_csr::testing::{arb_graph, Shape};
    use quiver_run::NoProgress;

    use super::*;

    /// Each list of `ssd`'s graph, sorted (the stream appends in its order).
    fn sorted_lists(ssd: &mut Ssd) -> Vec<Vec<(u32, u32)>> {
        let n = ssd.gtl().unwrap().vertices();
        (0..n)
            .map(|v| {
                let list = ssd.read_list(v).unwrap().value;
                let weights = list.weights.iter().map(|w| w.to_bits());
                let mut edges: Vec<(u32, u32)> = if list.weights.is_empty() {
                    list.targets.iter().map(|&t| (t, 0)).collect()
                } else {
                    list.targets.iter().copied().zip(weights).collect()
                };
                edges.sort_unstable();
                edges
            })
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(12))]

        #[test]
        fn the_stream_grows_the_graph_back_by_either_path(
            graph in arb_graph(Shape::new(60, 300)),
            share in 0.0f64..0.5,
        ) {
            let mut want: Vec<Vec<(u32, u32)>> = (0..graph.num_vertices())
                .map(|v| {
                    let w = graph.edge_weights(v);
                    graph
                        .neighbors(v)
                        .iter()
                        .enumerate()
                        .map(|(i, &t)| (t, w.map_or(0, |w| w[i].to_bits())))
                        .collect()
                })
                .collect();
            want.iter_mut().for_each(|l| l.sort_unstable());
            let mut written = Vec::new();
            for path in [UpdatePath::Delta, UpdatePath::Direct] {
                let config = Config {
                    path,
                    share,
                    new_vertices: 0.2,
                    queries: 20,
                    flush_bytes: 200,
                    ..Config::default()
                };
                let (report, mut ssd) = run_on(&graph, &config, &NoProgress).unwrap();
                prop_assert_eq!(&sorted_lists(&mut ssd), &want, "{:?}", path);
                prop_assert_eq!(ssd.gtl().unwrap().chained(), 0);
                prop_assert_eq!(report.snapshots.len() as u64 <= 10, true);
                written.push(report.pages_written);
            }
            prop_assert!(written[0] <= written[1], "delta wrote {} pages, direct {}", written[0], written[1]);
        }
    }
}
