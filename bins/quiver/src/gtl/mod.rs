//! `quiver gtl`: GraphSSD's graph translation layer on a simulated SSD,
//! with the CSR-through-an-FTL baseline on the same device.

mod run;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use quiver_csr::Graph;
use quiver_gtl::apps::Order;
use quiver_gtl::file::bench::Config as FileConfig;
use quiver_gtl::flash::Geometry;
use quiver_gtl::run::Draw;
use quiver_gtl::run::Input;
use quiver_gtl::updates::Config as UpdatesConfig;
use quiver_gtl::{is_image, App, Backend, RunConfig, Submission, Submit, UpdatePath};

use crate::report::UsageError;
use crate::units::{at_least_one, parse_fraction, ByteSize};

pub use run::gtl;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum BackendArg {
    /// GraphSSD: graph pages through the GTL.
    Gtl,
    /// The baseline: a CSR file (rowPtr, colIdx) through a page-mapped FTL.
    Csr,
}

impl From<BackendArg> for Backend {
    fn from(arg: BackendArg) -> Backend {
        match arg {
            BackendArg::Gtl => Backend::Gtl,
            BackendArg::Csr => Backend::Csr,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum AppArg {
    /// BFS from --source to a target at --depth-fraction of the BFS depth.
    Bfs,
    /// Connected components (undirected graphs).
    Cc,
    /// Random walks, each on its own (--walks, --steps, --seed).
    Rw,
    /// Luby's maximal independent set (undirected graphs; --seed).
    Mis,
    /// Threshold PageRank (--threshold, --iterations).
    Pagerank,
    /// --requests GetAdjacencyList calls on random vertices (--seed).
    RandomReads,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OrderArg {
    /// The paper's Algorithm 1: one FIFO queue, lists taken as they arrive.
    Fifo,
    /// Level by level, each level sorted by id (ours).
    Levels,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PathArg {
    /// Records appended to the delta graph, merged into the pages later.
    Delta,
    /// Each command a read-modify-write of its lists' pages.
    Direct,
}

/// What a reading command reads: exactly one of a graph and an image.
#[derive(Debug, Args)]
#[group(required = true, multiple = false)]
pub struct InputArgs {
    /// The .qcsr graph, written onto a fresh simulated device.
    graph: Option<PathBuf>,
    /// A device image (from `quiver gtl init`), mounted with its updates.
    #[arg(long = "device", value_name = "IMAGE")]
    image: Option<PathBuf>,
}

/// The device image a command writes or updates: `--device IMAGE`, as
/// every gtl command names an image.
#[derive(Debug, Args)]
pub struct ImageArgs {
    /// The device image (from `quiver gtl init`).
    #[arg(long = "device", value_name = "IMAGE")]
    image: PathBuf,
}

/// [`InputArgs`] opened.
enum Opened<'a> {
    Graph(Box<Graph>),
    Image(&'a Path),
}

impl Opened<'_> {
    /// What the engine reads.
    fn input(&self) -> Input<'_> {
        match self {
            Opened::Graph(graph) => Input::Graph(graph),
            Opened::Image(path) => Input::Image(path),
        }
    }
}

impl InputArgs {
    /// The path given: the graph's or the image's.
    fn path(&self) -> &Path {
        // clap's group requires one of the two.
        self.image
            .as_deref()
            .or(self.graph.as_deref())
            .expect("a graph or an image")
    }

    /// The image, or the graph opened (refused if it is an image).
    fn open(&self) -> Result<Opened<'_>> {
        if let Some(image) = &self.image {
            return Ok(Opened::Image(image));
        }
        let path = self.path();
        if is_image(path) {
            bail!(UsageError(format!(
                "{} is a device image: name it with --device",
                path.display()
            )));
        }
        let graph = Graph::open(path).with_context(|| format!("opening {}", path.display()))?;
        Ok(Opened::Graph(Box::new(graph)))
    }
}

/// The device and host flags every reading command takes.
#[derive(Debug, Args)]
pub struct DeviceArgs {
    /// The host page cache's size (the device's 16 KiB pages, LRU; 0: no host cache).
    #[arg(long, default_value_t = ByteSize(RunConfig::default().cache_bytes))]
    pub cache: ByteSize,
    /// The fraction of each graph page left free by GraphInitialize
    /// (0.05 or 5%; none by default, as a run only reads and the paper
    /// leaves room only for updates); not with --device: an image keeps
    /// the slack `quiver gtl init` laid it out with.
    #[arg(long, default_value_t = RunConfig::default().device.slack, value_parser = parse_fraction, conflicts_with = "image")]
    pub slack: f64,
    /// Keep the simulated NAND's pages in this sparse file instead of memory, for a device
    /// larger than memory: made fresh (nothing may be there yet) and removed after the run, as
    /// long as the device but taking disk space only for programmed pages. Not with --device
    /// (an image mounts in memory).
    #[arg(long, value_name = "FILE", conflicts_with = "image")]
    pub flash_file: Option<PathBuf>,
    /// Keep a bit per vertex beside the GTT marking lists laid out empty,
    /// so asking for one reads no page (ours, not the paper's). Not with
    /// --device (an image is mounted without marks).
    #[arg(long, conflicts_with = "image")]
    pub mark_empty: bool,
}

impl DeviceArgs {
    fn config(&self, backend: BackendArg) -> RunConfig {
        let mut config = RunConfig {
            backend: backend.into(),
            cache_bytes: self.cache.0,
            ..RunConfig::default()
        };
        config.device.slack = self.slack;
        config.device.mark_empty = self.mark_empty;
        config.device.flash_file.clone_from(&self.flash_file);
        config
    }
}

/// The applications' flags.
#[derive(Debug, Args)]
pub struct AppArgs {
    /// Requests in flight: the host's queue depth (a new request goes in
    /// whenever one completes).
    #[arg(long, default_value_t = RunConfig::default().submit.in_flight, value_parser = at_least_one::<usize>())]
    in_flight: usize,
    /// Submit --in-flight requests at a time and wait for all of them
    /// before the next (barriered batches) instead of a sliding window.
    #[arg(long)]
    batches: bool,
    /// BFS and CC: fifo is the paper's Algorithm 1 (one queue, lists taken
    /// as they arrive); levels is ours (level by level, each sorted by id).
    #[arg(long, value_enum, default_value_t = OrderArg::Fifo)]
    order: OrderArg,
    /// Random reads and walks: draw vertices (walks, their starts) from
    /// every id, vertices without edges too (by default only vertices with
    /// out-edges, as the paper's workload asks for lists).
    #[arg(long)]
    all_ids: bool,
    /// BFS: the root vertex (default: the first vertex with edges).
    #[arg(long)]
    source: Option<u32>,
    /// BFS: the target's depth as a fraction of the root's BFS depth.
    #[arg(long, default_value_t = RunConfig::default().depth_fraction)]
    depth_fraction: f64,
    /// Random walks: how many (default: one per 1,000 vertices, the
    /// paper's density).
    #[arg(long, value_parser = at_least_one::<u32>())]
    walks: Option<u32>,
    /// Random walks: steps per walk, at most.
    #[arg(long, default_value_t = RunConfig::default().steps)]
    steps: u32,
    /// Seed of walks, MIS priorities and random reads.
    #[arg(long, default_value_t = RunConfig::default().seed)]
    seed: u64,
    /// PageRank: a vertex sends when its rank moved by more than this.
    #[arg(long, default_value_t = RunConfig::default().threshold)]
    threshold: f64,
    /// PageRank: iterations, at most.
    #[arg(long, default_value_t = RunConfig::default().iterations)]
    iterations: u32,
    /// Random reads: calls.
    #[arg(long, default_value_t = RunConfig::default().requests, value_parser = at_least_one::<u64>())]
    requests: u64,
}

impl AppArgs {
    /// The run's settings on `backend` with `device`'s.
    fn config(&self, backend: BackendArg, device: &DeviceArgs) -> RunConfig {
        RunConfig {
            submit: Submit {
                in_flight: self.in_flight,
                submission: if self.batches {
                    Submission::Batches
                } else {
                    Submission::Window
                },
            },
            order: match self.order {
                OrderArg::Fifo => Order::Fifo,
                OrderArg::Levels => Order::Levels,
            },
            draw: if self.all_ids {
                Draw::All
            } else {
                Draw::WithEdges
            },
            source: self.source,
            depth_fraction: self.depth_fraction,
            walks: self.walks,
            steps: self.steps,
            seed: self.seed,
            threshold: self.threshold,
            iterations: self.iterations,
            requests: self.requests,
            ..device.config(backend)
        }
    }
}

impl From<AppArg> for App {
    fn from(arg: AppArg) -> App {
        match arg {
            AppArg::Bfs => App::Bfs,
            AppArg::Cc => App::Cc,
            AppArg::Rw => App::Rw,
            AppArg::Mis => App::Mis,
            AppArg::Pagerank => App::Pagerank,
            AppArg::RandomReads => App::RandomReads,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum GtlCommand {
    /// Run an application on a fresh simulated device holding the graph, or on a device image.
    // clap would show the graph-or-image group before APP (here and in bench).
    #[command(override_usage = "quiver gtl run [OPTIONS] <APP> <GRAPH|--device <IMAGE>>")]
    #[command(after_help = "Examples:
  quiver gtl run bfs g.qcsr --source 0 --depth-fraction 0.33
  quiver gtl run cc g.qcsr --backend csr --cache 16MiB
  quiver gtl run rw g.qcsr --walks 100000 --steps 10 --seed 7 --json
  quiver gtl run random-reads g.qcsr --requests 1000000 --cache 2MiB
  quiver gtl run pagerank --device dev.img --backend csr --cache 64MiB

On a .qcsr graph the device is simulated in memory and written at every
run (load time); a device image (--device, from quiver gtl init) is
mounted, with its updates (the CSR backend refuses an updated image: its
file holds the graph as first written). Pages read and modelled time
count the application alone.")]
    Run {
        /// The application.
        #[arg(value_enum)]
        app: AppArg,
        #[command(flatten)]
        input: InputArgs,
        /// Which layout to read: GraphSSD's GTL or the CSR baseline.
        #[arg(long, value_enum, default_value_t = BackendArg::Gtl)]
        backend: BackendArg,
        #[command(flatten)]
        device: DeviceArgs,
        #[command(flatten)]
        options: AppArgs,
    },
    /// Run an application on both layouts, side by side, with the ratios.
    #[command(override_usage = "quiver gtl bench [OPTIONS] <APP> <GRAPH|--device <IMAGE>>")]
    #[command(after_help = "Examples:
  quiver gtl bench random-reads g.qcsr --cache 2MiB
  quiver gtl bench bfs g.qcsr --depth-fraction 0.66 --json
  quiver gtl bench cc --device dev.img

The same application, graph, cache and seed on GraphSSD's GTL and on the
CSR baseline, each on a fresh simulated device (or the device image,
mounted, if not updated since init); modelled time and NAND pages read
of the baseline over GraphSSD's (above 1: GraphSSD is ahead).")]
    Bench {
        /// The application.
        #[arg(value_enum)]
        app: AppArg,
        #[command(flatten)]
        input: InputArgs,
        #[command(flatten)]
        device: DeviceArgs,
        #[command(flatten)]
        options: AppArgs,
    },
    /// The update benchmark: grow the graph back from a stream drawn from it.
    #[command(after_help = "Examples:
  quiver gtl updates g.qcsr
  quiver gtl updates g.qcsr --path direct --json
  quiver gtl updates g.qcsr --slack 0.01 --share 0.125 --snapshots 10

The device starts with the graph less the top --new-vertices share of ids
and a --share of the other edges; 10 snapshots add them back (AddVertex,
AddEdge), each followed by --queries GetAdjacencyList calls (95% on the
vertices it touched); then the delta graph is merged in 10 steps, with
the same uniform queries after each. The paper's YouTube run: 38K new
vertices and 550K new edges on 1M and 4.4M.")]
    Updates {
        /// The .qcsr graph.
        graph: PathBuf,
        /// How updates reach the graph pages (delta: batched 16 KiB at a
        /// time, merged at the end).
        #[arg(long, value_enum, default_value_t = PathArg::Delta)]
        path: PathArg,
        /// The fraction of each graph page left free by GraphInitialize
        /// (0.05 or 5%).
        #[arg(long, default_value_t = UpdatesConfig::default().slack, value_parser = parse_fraction)]
        slack: f64,
        /// Share of the edges held back and streamed as AddEdge.
        #[arg(long, default_value_t = UpdatesConfig::default().share)]
        share: f64,
        /// Share of the vertices (highest ids) held back and streamed as AddVertex.
        #[arg(long, default_value_t = UpdatesConfig::default().new_vertices)]
        new_vertices: f64,
        /// Snapshots the stream is cut into.
        #[arg(long, default_value_t = UpdatesConfig::default().snapshots)]
        snapshots: u32,
        /// GetAdjacencyList calls after each snapshot and merge step.
        #[arg(long, default_value_t = UpdatesConfig::default().queries)]
        queries: u32,
        /// Seed of the stream and the queries.
        #[arg(long, default_value_t = UpdatesConfig::default().seed)]
        seed: u64,
    },
    /// Lay a graph out on a new device image: GTL pages and the CSR file.
    #[command(after_help = "Examples:
  quiver gtl init g.qcsr --device dev.img
  quiver gtl init g.qcsr --device dev.img --slack 10% --force
  quiver gtl init g.qcsr --device dev.img --geometry 4x2x256x128

The image keeps the simulated device between commands (run, bench, get,
add-edge, delete-edge, merge, each naming it with --device): its
programmed pages only, so it is about the size of the graph. Opening it
mounts it as after a power cut.")]
    Init {
        /// The .qcsr graph.
        graph: PathBuf,
        /// The device image to write.
        #[arg(long = "device", value_name = "IMAGE")]
        device: PathBuf,
        /// The fraction of each graph page left free for growth (0.05 or 5%).
        #[arg(long, default_value_t = quiver_gtl::Config::default().slack, value_parser = parse_fraction)]
        slack: f64,
        /// The NAND geometry, CHANNELSxWAYSxBLOCKSxPAGES (blocks per die,
        /// pages per block; 16 KiB pages); half of each die's blocks hold
        /// the CSR file, half the graph pages.
        #[arg(long, default_value_t = quiver_gtl::Config::default().geometry)]
        geometry: Geometry,
        /// Replace an existing image.
        #[arg(long)]
        force: bool,
    },
    /// AddEdge on a device image.
    #[command(after_help = "Examples:
  quiver gtl add-edge --device dev.img 3 17
  quiver gtl add-edge --device dev.img 3 17 --weight 0.5 --path direct

On an undirected graph the edge is added both ways.")]
    AddEdge {
        #[command(flatten)]
        image: ImageArgs,
        /// The edge's source.
        #[arg(value_parser = parse_endpoint)]
        source: u32,
        /// The edge's target.
        target: u32,
        /// Its weight (ignored on an unweighted graph).
        #[arg(long, default_value_t = 1.0)]
        weight: f32,
        /// How the update reaches the graph pages (delta: written at once,
        /// merged by `quiver gtl merge`).
        #[arg(long, value_enum, default_value_t = PathArg::Delta)]
        path: PathArg,
    },
    /// DeleteEdge on a device image (exit 1 if there is no such edge).
    #[command(after_help = "Examples:
  quiver gtl delete-edge --device dev.img 3 17
  quiver gtl delete-edge --device dev.img 3 17 --path direct")]
    DeleteEdge {
        #[command(flatten)]
        image: ImageArgs,
        /// The edge's source.
        #[arg(value_parser = parse_endpoint)]
        source: u32,
        /// The edge's target.
        target: u32,
        /// How the update reaches the graph pages (delta: written at once,
        /// merged by `quiver gtl merge`).
        #[arg(long, value_enum, default_value_t = PathArg::Delta)]
        path: PathArg,
    },
    /// Merge a device image's delta graph into its pages.
    #[command(after_help = "Examples:
  quiver gtl merge --device dev.img
  quiver gtl merge --device dev.img --groups 100")]
    Merge {
        #[command(flatten)]
        image: ImageArgs,
        /// Merge at most this many dirty page groups (default: all).
        #[arg(long)]
        groups: Option<usize>,
    },
    /// The file device: GraphSSD's pages on a real file against the CSR file, on this disk.
    #[command(after_help = "Examples:
  quiver gtl file g.qcsr --gtl g.gtl
  quiver gtl file g.qcsr --gtl g.gtl --requests 100000 --queue-depth 32 --json

Lays the graph out in GTL pages at --gtl (16 KiB pages and the GTT),
then makes --requests GetAdjacencyList calls on random vertices with edges three
ways, with O_DIRECT: on the GTL file through io_uring, and on the
graph's own .qcsr as a CSR file (rowPtr, then colIdx, in 4 KiB blocks)
through io_uring and through pread. Wall time, no model: the disk's own.")]
    File {
        /// The .qcsr graph (also the CSR file the GTL file is compared with).
        graph: PathBuf,
        /// Where to write the GTL file.
        #[arg(long)]
        gtl: PathBuf,
        /// GetAdjacencyList calls per layout.
        #[arg(long, default_value_t = FileConfig::default().requests, value_parser = at_least_one::<u64>())]
        requests: u64,
        /// Reads in flight on io_uring (calls per batch, too).
        #[arg(long, default_value_t = FileConfig::default().queue_depth, value_parser = at_least_one::<u32>())]
        queue_depth: u32,
        /// The fraction of each page left free (0.05 or 5%; none by
        /// default, as the calls only read).
        #[arg(long, default_value_t = FileConfig::default().slack, value_parser = parse_fraction)]
        slack: f64,
        /// Seed of the random vertices (the same for every layout).
        #[arg(long, default_value_t = FileConfig::default().seed)]
        seed: u64,
        /// The GTL file's page size: the paper's 16 KiB NAND page by
        /// default; a power of two from 4 KiB to 64 KiB.
        #[arg(long, default_value_t = ByteSize(FileConfig::default().page_bytes as u64))]
        page_bytes: ByteSize,
    },
    /// GetAdjacencyList of one vertex, with its pages read and modelled time.
    #[command(
        after_help = "Examples:
  quiver gtl get g.qcsr 17
  quiver gtl get g.qcsr 17 --backend csr --json
  quiver gtl get --device dev.img 17

On a .qcsr graph the device is written fresh; on a device image (--device,
from `quiver gtl init`) the list is read as updated, through no host cache.",
        allow_missing_positional = true
    )]
    Get {
        #[command(flatten)]
        input: InputArgs,
        /// The vertex: by the graph's own ids where it has an id map (a device image keeps
        /// dense ids).
        #[arg(value_parser = parse_vertex)]
        vertex: u64,
        /// Which layout to read: GraphSSD's GTL or the CSR baseline.
        #[arg(long, value_enum, default_value_t = BackendArg::Gtl)]
        backend: BackendArg,
        #[command(flatten)]
        device: DeviceArgs,
    },
}

/// An edge's SOURCE on an image: a path there is the image given without
/// `--device` (the old form).
fn parse_endpoint(text: &str) -> Result<u32, String> {
    text.parse().map_err(|_| {
        "not a vertex id: name the image by --device, then the edge (`quiver gtl add-edge --device dev.img 3 17`)".to_string()
    })
}

/// `get`'s VERTEX, which comes alone after `--device IMAGE`: a path there
/// is a graph whose vertex was left out.
fn parse_vertex(text: &str) -> Result<u64, String> {
    text.parse().map_err(|_| {
        "not a vertex id: give the graph, then the vertex (`quiver gtl get g.qcsr 17`), or the image by --device (`quiver gtl get --device dev.img 17`)".to_string()
    })
}

impl From<PathArg> for UpdatePath {
    fn from(arg: PathArg) -> UpdatePath {
        match arg {
            PathArg::Delta => UpdatePath::Delta,
            PathArg::Direct => UpdatePath::Direct,
        }
    }
}
