//! One run of an application: build the device from a graph, open the
//! backend's host side, run, report counts and modelled time.
//!
//! The device is simulated in memory and not persisted yet: every run
//! writes the graph onto a fresh device (GraphInitialize for the GTL,
//! the CSR file's writes for the baseline). That is the run's load time
//! (`load_ns`); its programs and modelled time are reported apart from
//! the application's (`init`).

use std::path::{Path, PathBuf};

use quiver_csr::Graph;
use quiver_run::{InvalidArgument, Progress, RunSummary, Stopwatch, Unit};
use serde::{Deserialize, Serialize};

use crate::apps::{self, Order, Summary, UNREACHED};
use crate::device::Ssd;
use crate::error::{check_vertex, Result};
use crate::flash::Nanos;
use crate::queues::{Issued, Submission, Submit};
use crate::source::{self, Backend, GraphSource, Init, SourceCounters};

/// An application of the paper's evaluation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum App {
    /// BFS from `source` to a target at `depth_fraction` of the BFS depth.
    Bfs,
    /// Connected components.
    Cc,
    /// DrunkardMob-style random walks.
    Rw,
    /// Luby's maximal independent set.
    Mis,
    /// Threshold PageRank.
    Pagerank,
    /// Random GetAdjacencyList calls (the paper's API benchmark).
    RandomReads,
}

/// Which vertices random reads and random walks' starts are drawn from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Draw {
    /// Vertices with out-edges (the paper's workload asks for lists).
    #[default]
    WithEdges,
    /// Every id, vertices without edges too.
    All,
}

/// A run's settings; the only place their defaults are written.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The simulated device; its slack is 0 here, as the paper leaves
    /// room in pages only for updates and a run only reads.
    pub device: crate::Config,
    /// Which layout the application reads.
    pub backend: Backend,
    /// The host page cache's bound in bytes (default 64 MiB).
    pub cache_bytes: u64,
    /// Requests in flight, and whether in a window or batches.
    pub submit: Submit,
    /// BFS's and CC's order: FIFO (the paper's) or level by level (ours).
    pub order: Order,
    /// Random reads and walks: which vertices are drawn.
    pub draw: Draw,
    /// BFS's root (`None`: the first vertex with edges, so that a default
    /// run on a graph with isolated vertices walks somewhere).
    pub source: Option<u32>,
    /// BFS: the target's depth as a fraction of the root's BFS depth
    /// (the paper's 0.1, 0.33, 0.66, 1.0).
    pub depth_fraction: f64,
    /// Random walks (`None`: one per 1,000 vertices, the paper's density,
    /// at least one).
    pub walks: Option<u32>,
    /// Steps per walk, at most.
    pub steps: u32,
    /// Seed of the walks, MIS priorities and random reads.
    pub seed: u64,
    /// PageRank's damping factor.
    pub damping: f64,
    /// PageRank's threshold: a vertex sends when its rank moved by more.
    pub threshold: f64,
    /// PageRank's iterations, at most.
    pub iterations: u32,
    /// Random reads: calls.
    pub requests: u64,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            device: crate::Config {
                slack: 0.0,
                ..crate::Config::default()
            },
            backend: Backend::Gtl,
            cache_bytes: 64 << 20,
            submit: Submit {
                in_flight: 256,
                submission: Submission::Window,
            },
            order: Order::Fifo,
            draw: Draw::WithEdges,
            source: None,
            depth_fraction: 1.0,
            walks: None,
            steps: 10,
            seed: 1,
            damping: 0.85,
            threshold: 0.4,
            iterations: 5,
            requests: 1_000_000,
        }
    }
}

impl Config {
    /// Checks every setting, naming the first that makes no sense.
    pub fn validate(&self) -> Result<(), InvalidArgument> {
        self.device.validate()?;
        if self.submit.in_flight == 0 {
            return Err(InvalidArgument::new("in_flight", "must be at least 1"));
        }
        let page = u64::from(self.device.geometry.page_bytes);
        if self.cache_bytes > 0 && self.cache_bytes < page {
            return Err(InvalidArgument::new(
                "cache",
                format!("must hold one {page}-byte page at least, or be 0 for no host cache"),
            ));
        }
        if self.walks == Some(0) {
            return Err(InvalidArgument::new("walks", "must be at least 1"));
        }
        if !(self.depth_fraction > 0.0 && self.depth_fraction <= 1.0) {
            return Err(InvalidArgument::new("depth_fraction", "must be in (0, 1]"));
        }
        if !(self.damping >= 0.0 && self.damping < 1.0) {
            return Err(InvalidArgument::new("damping", "must be in [0, 1)"));
        }
        if !(self.threshold >= 0.0 && self.threshold.is_finite()) {
            return Err(InvalidArgument::new("threshold", "must be finite and >= 0"));
        }
        Ok(())
    }
}

/// What a run did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The application.
    pub app: App,
    /// The layout it read.
    pub backend: Backend,
    /// |V| and |E|.
    pub vertices: u32,
    /// |E| (stored directed edges).
    pub edges: u64,
    /// The cache's bound in bytes.
    pub cache_bytes: u64,
    /// Times: `load_ns` writes the device, `compute_ns` is the application.
    #[serde(flatten)]
    pub summary: RunSummary,
    /// Writing the device before the application.
    pub init: Init,
    /// NAND pages the application read.
    pub pages_read: u64,
    /// NAND pages programmed during the application.
    pub pages_written: u64,
    /// The application's modelled device time, in nanoseconds.
    pub modelled_ns: u64,
    /// Adjacency lists asked for.
    pub requests: u64,
    /// Runs of requests through the host's queues.
    pub runs: u64,
    /// Pages found in the host cache.
    pub cache_hits: u64,
    /// Pages fetched from the device.
    pub cache_misses: u64,
    /// What the application found.
    pub result: Summary,
}

/// Random walks at the paper's density: one per 1,000 vertices, at least one.
pub fn paper_walks(graph: &Graph) -> u32 {
    (graph.num_vertices() / 1000).max(1)
}

/// BFS's target: the smallest vertex at `fraction` of the root's BFS depth
/// (at least depth 1 when anything is reachable), found on the graph in
/// memory, outside the measured run. Returns the target, its depth and
/// the root's BFS depth.
pub fn bfs_target(graph: &Graph, root: u32, fraction: f64) -> Result<(u32, u32, u32)> {
    let n = graph.num_vertices();
    check_vertex(root, n)?;
    let mut depths = vec![UNREACHED; n as usize];
    depths[root as usize] = 0;
    let mut frontier = vec![root];
    let mut max = 0;
    while !frontier.is_empty() {
        let mut next = Vec::new();
        for &v in &frontier {
            for &u in graph.neighbors(v) {
                if depths[u as usize] == UNREACHED {
                    depths[u as usize] = max + 1;
                    next.push(u);
                }
            }
        }
        if !next.is_empty() {
            max += 1;
        }
        frontier = next;
    }
    #[allow(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss
    )] // A depth below |V|, times a fraction in (0, 1].
    let want = ((f64::from(max) * fraction).round() as u32).clamp(max.min(1), max);
    let target = (0..n)
        .find(|&v| depths[v as usize] == want)
        .expect("every level up to the deepest has a vertex");
    Ok((target, want, max))
}

/// A source that stops its application when the caller asks: every
/// request checks `progress` first, so a run ends at its next request
/// with [`Error::Cancelled`].
struct Stoppable<'a> {
    source: &'a mut dyn GraphSource,
    progress: &'a dyn Progress,
}

impl GraphSource for Stoppable<'_> {
    fn vertices(&self) -> u32 {
        self.source.vertices()
    }

    fn issue(&mut self, vertex: u32, at: Nanos) -> Result<Issued> {
        self.progress.check()?;
        self.source.issue(vertex, at)
    }

    fn issue_next(&mut self, bytes: std::ops::Range<u64>, at: Nanos) -> Result<Issued> {
        self.source.issue_next(bytes, at)
    }

    fn now(&self) -> Nanos {
        self.source.now()
    }

    fn finish(&mut self, start: Nanos, end: Nanos, requests: u64) {
        self.source.finish(start, end, requests);
    }

    fn counters(&self) -> SourceCounters {
        self.source.counters()
    }

    fn cache_bytes(&self) -> u64 {
        self.source.cache_bytes()
    }

    fn ssd(&self) -> &Ssd {
        self.source.ssd()
    }
}

/// Runs `app` on `graph` with `config`, telling `progress` of its phases:
/// the graph is written onto a fresh device first (the load).
pub fn run(graph: &Graph, app: App, config: &Config, progress: &dyn Progress) -> Result<Report> {
    let wall = Stopwatch::start();
    let picked = prepare(graph, app, config)?;
    let load = Stopwatch::start();
    let (source, init) = source::open(
        graph,
        &config.device,
        config.backend,
        config.cache_bytes,
        progress,
    )?;
    let load_ns = load.elapsed_ns();
    run_source(
        graph,
        app,
        config,
        progress,
        picked,
        source,
        (init, load_ns, wall),
    )
}

/// Runs `app` on the device image `path` as its updates left it (the
/// load is mounting it; the graph BFS picks its target on, and which
/// vertices have edges, is read from the device first, not counted).
/// The CSR backend refuses an image updated since GraphInitialize: its
/// file still holds the graph as first written.
pub fn run_image(
    path: &Path,
    app: App,
    config: &Config,
    progress: &dyn Progress,
) -> Result<Report> {
    let wall = Stopwatch::start();
    config.validate()?;
    progress.start("mounting the device", Unit::Ops, None);
    let load = Stopwatch::start();
    let (mut ssd, mount_ns) = Ssd::open(path)?;
    let graph = ssd.read_graph()?;
    let load_ns = load.elapsed_ns();
    let picked = prepare(&graph, app, config)?;
    let (source, init) = source::attach(ssd, config.backend, config.cache_bytes, mount_ns)?;
    run_source(
        &graph,
        app,
        config,
        progress,
        picked,
        source,
        (init, load_ns, wall),
    )
}

/// What a run reads: a graph, written onto a fresh device, or a device
/// image, mounted.
#[derive(Clone, Copy, Debug)]
pub enum Input<'a> {
    /// A graph in memory.
    Graph(&'a Graph),
    /// A device image (from [`crate::on_image::init`]).
    Image(&'a Path),
}

impl Input<'_> {
    /// The graph's file or the image.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Input::Graph(graph) => graph.path(),
            Input::Image(path) => Some(path),
        }
    }
}

/// What GetAdjacencyList of one vertex returned and cost: `quiver gtl get
/// --json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GetReport {
    /// The graph's file or the image.
    pub graph: Option<PathBuf>,
    /// The layout read.
    pub backend: Backend,
    /// The vertex, by the graph's ids (an image's are dense).
    pub vertex: u64,
    /// Its out-neighbours, by the same ids.
    pub neighbours: Vec<u64>,
    /// NAND pages read.
    pub pages_read: u64,
    /// Modelled time.
    pub modelled_ns: Nanos,
}

/// GetAdjacencyList of `vertex` on `input` (a graph written onto a fresh
/// device, `progress` hearing of the writes, or an image mounted),
/// through `config`'s backend and cache. A graph names its vertices by its
/// id map, if it has one; an image by dense ids.
pub fn get(
    input: Input<'_>,
    vertex: u64,
    config: &Config,
    progress: &dyn Progress,
) -> Result<GetReport> {
    config.validate()?;
    let (graph, dense, (mut source, _)) = match input {
        Input::Graph(graph) => {
            let dense = graph.dense_id(vertex).ok_or_else(|| {
                InvalidArgument::new("vertex", format!("{vertex} is not a vertex of the graph"))
            })?;
            let opened = source::open(
                graph,
                &config.device,
                config.backend,
                config.cache_bytes,
                progress,
            )?;
            (Some(graph), dense, opened)
        }
        Input::Image(path) => {
            let (ssd, mount_ns) = Ssd::open(path)?;
            let attached = source::attach(ssd, config.backend, config.cache_bytes, mount_ns)?;
            let vertices = attached.0.vertices();
            let dense = u32::try_from(vertex)
                .ok()
                .filter(|&v| v < vertices)
                .ok_or_else(|| {
                    InvalidArgument::new(
                        "vertex",
                        format!(
                            "vertex {vertex} is out of range: the image has {vertices} vertices"
                        ),
                    )
                })?;
            (None, dense, attached)
        }
    };
    let neighbours = source
        .get(dense)?
        .iter()
        .map(|&v| graph.map_or(u64::from(v), |g| g.original_id(v)))
        .collect();
    let counters = source.counters();
    Ok(GetReport {
        graph: input.path().map(Path::to_owned),
        backend: config.backend,
        vertex,
        neighbours,
        pages_read: counters.pages_read,
        modelled_ns: counters.modelled_ns,
    })
}

/// [`run`] or [`run_image`], as `input` is.
pub fn run_input(
    input: Input<'_>,
    app: App,
    config: &Config,
    progress: &dyn Progress,
) -> Result<Report> {
    match input {
        Input::Graph(graph) => run(graph, app, config, progress),
        Input::Image(path) => run_image(path, app, config, progress),
    }
}

/// The same run on both layouts, and the baseline over GraphSSD.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    /// GraphSSD's run.
    pub gtl: Report,
    /// The baseline's.
    pub csr: Report,
    /// Modelled time, CSR over GTL (above 1: GraphSSD is ahead).
    pub modelled_csr_over_gtl: f64,
    /// NAND pages read, CSR over GTL.
    pub pages_read_csr_over_gtl: f64,
}

/// Runs `app` with `config` on each layout, the baseline first (an image
/// updated since init is refused before any work), each on a fresh device
/// or the image mounted afresh.
pub fn compare(
    input: Input<'_>,
    app: App,
    config: &Config,
    progress: &dyn Progress,
) -> Result<Comparison> {
    let on = |backend| Config {
        backend,
        ..config.clone()
    };
    let csr = run_input(input, app, &on(Backend::Csr), progress)?;
    let gtl = run_input(input, app, &on(Backend::Gtl), progress)?;
    #[allow(clippy::cast_precision_loss)] // Counts and times as ratios.
    let ratio = |c: u64, g: u64| c as f64 / g.max(1) as f64;
    Ok(Comparison {
        modelled_csr_over_gtl: ratio(csr.modelled_ns, gtl.modelled_ns),
        pages_read_csr_over_gtl: ratio(csr.pages_read, gtl.pages_read),
        gtl,
        csr,
    })
}

/// What a run picks on the graph in memory before it starts.
struct Picked {
    /// BFS's root.
    root: u32,
    /// BFS's target, its depth and the root's BFS depth.
    target: Option<(u32, u32, u32)>,
    /// The vertices random reads and walks draw from (`None`: every id).
    among: Option<Vec<u32>>,
}

/// Checks `app` suits `graph` and picks BFS's root and target.
fn prepare(graph: &Graph, app: App, config: &Config) -> Result<Picked> {
    config.validate()?;
    if matches!(app, App::Cc | App::Mis) && !graph.is_undirected() {
        return Err(InvalidArgument::new(
            "graph",
            "connected components and MIS need an undirected graph",
        )
        .into());
    }
    let root = config.source.unwrap_or_else(|| {
        (0..graph.num_vertices())
            .find(|&v| graph.degree(v) > 0)
            .unwrap_or(0)
    });
    let target = match app {
        App::Bfs => Some(bfs_target(graph, root, config.depth_fraction)?),
        _ => None,
    };
    let among =
        (matches!(app, App::RandomReads | App::Rw) && config.draw == Draw::WithEdges).then(|| {
            (0..graph.num_vertices())
                .filter(|&v| graph.degree(v) > 0)
                .collect()
        });
    Ok(Picked {
        root,
        target,
        among,
    })
}

/// Runs `app` through `source` (loaded as `init` in `load_ns`, the run's
/// wall clock started at `wall`) and reports.
fn run_source(
    graph: &Graph,
    app: App,
    config: &Config,
    progress: &dyn Progress,
    picked: Picked,
    mut source: Box<dyn GraphSource>,
    (init, load_ns, wall): (Init, u64, Stopwatch),
) -> Result<Report> {
    let (submit, order) = (config.submit, config.order);
    let source = &mut Stoppable {
        source: source.as_mut(),
        progress,
    };
    progress.start("running", Unit::Ops, None);
    let compute = Stopwatch::start();
    let result = match app {
        App::Bfs => {
            let (target, target_depth, max_depth) = picked.target.expect("picked above");
            let found = apps::bfs(source, picked.root, Some(target), order, submit)?;
            Summary::Bfs {
                source: picked.root,
                target,
                target_depth,
                max_depth,
                found: found.found,
                reached: found.reached,
                levels: found.levels,
            }
        }
        App::Cc => {
            let labels = apps::connected_components(source, order, submit)?;
            let mut sizes = std::collections::HashMap::<u32, u64>::new();
            for l in labels {
                *sizes.entry(l).or_default() += 1;
            }
            Summary::Cc {
                components: sizes.len() as u64,
                largest: sizes.values().copied().max().unwrap_or(0),
            }
        }
        App::Rw => {
            let count = config.walks.unwrap_or_else(|| paper_walks(graph));
            let walks = apps::random_walks(
                source,
                count,
                config.steps,
                config.seed,
                picked.among.as_deref(),
                submit,
            )?;
            Summary::Rw {
                walks: count,
                steps: walks.steps,
                stuck: walks.stuck,
            }
        }
        App::Mis => {
            let mis = apps::luby_mis(source, config.seed, submit)?;
            Summary::Mis {
                size: mis.size,
                rounds: mis.rounds,
            }
        }
        App::Pagerank => {
            let pr = apps::threshold_pagerank(
                source,
                config.damping,
                config.threshold,
                config.iterations,
                submit,
            )?;
            Summary::Pagerank {
                iterations: u32::try_from(pr.active.len()).expect("at most the iterations"),
                active: pr.active,
                sum: pr.ranks.iter().sum(),
                max: pr.ranks.iter().copied().fold(0.0, f64::max),
            }
        }
        App::RandomReads => Summary::RandomReads {
            requests: config.requests,
            neighbours: apps::random_reads(
                source,
                config.requests,
                config.seed,
                picked.among.as_deref(),
                submit,
            )?,
        },
    };
    let counters = source.counters();
    progress.advance(counters.requests);
    let page_bytes = u64::from(source.ssd().flash().geometry().page_bytes);
    let summary = RunSummary {
        load_ns,
        compute_ns: compute.elapsed_ns(),
        threads: 1,
        wall_ns: wall.elapsed_ns(),
        // The device's reads and writes: NAND pages, whole.
        read_calls: counters.pages_read,
        bytes_read: counters.pages_read * page_bytes,
        write_calls: init.pages_written,
        bytes_written: init.pages_written * page_bytes,
        ..RunSummary::default()
    };
    Ok(Report {
        app,
        backend: config.backend,
        vertices: graph.num_vertices(),
        edges: graph.num_edges(),
        cache_bytes: config.cache_bytes,
        summary,
        init,
        pages_read: counters.pages_read,
        pages_written: source.ssd().flash().counters().programs - init.pages_written,
        modelled_ns: counters.modelled_ns,
        requests: counters.requests,
        runs: counters.runs,
        cache_hits: counters.cache_hits,
        cache_misses: counters.cache_misses,
        result,
    })
}
