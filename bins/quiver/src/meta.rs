//! `quiver meta`: GraphMeta's versioned metadata graph, served by a cluster
//! of RocksDB-backed gRPC servers; loading, provenance queries and the
//! paper's benchmarks.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use quiver_csr::{Graph, SortOptions};
use quiver_meta::bench::{BenchConfig, BenchReport, Workload};
use quiver_meta::load::{graph_writes, LoadConfig, LoadReport};
use quiver_meta::schema::Schema;
use quiver_meta::server::{Prefetch, ServerConfig};
use quiver_meta::{
    Client, Engine, LocalCluster, Membership, Partitioner, Travel, TravelAnswer, TravelOptions,
};
use serde::Serialize;

use crate::progress::Bar;
use crate::report::{flag_error, print_json, UsageError};
use crate::units::{at_least_one, seconds};

#[derive(Debug, Subcommand)]
pub enum MetaCommand {
    /// Run one metadata server: its RocksDB in --data, its share of the graph by the cluster
    /// file's hashing, until Ctrl-C or SIGTERM (then it finishes requests and flushes).
    #[command(after_help = "Examples:
  quiver meta serve --listen 127.0.0.1:7400 --data /var/lib/meta0 --cluster cluster.txt
  quiver meta serve --data ./meta                  a one-server cluster on 127.0.0.1:7400

The cluster file (`cluster up` writes one) is the same for every server and client: a
`cluster ID` line, a `token SECRET` line, and a `server ID HOST:PORT` line a server; this
server is the line with --listen. Every request carries the token, and servers refuse those
without it, so the file is the key to the cluster (mode 0600). Without --cluster the server
is a cluster of its own with no token. Every server of a cluster must run with the same
--partitioner, --vnodes, --threshold and --schema (clients check).")]
    Serve(ServeArgs),
    /// Run a cluster on this machine.
    Cluster {
        #[command(subcommand)]
        command: ClusterCommand,
    },
    /// Load metadata: Darshan-like users, jobs, processes and files, or a .qcsr graph; the
    /// report counts the writes the servers acknowledged.
    #[command(after_help = "Examples:
  quiver meta load --cluster meta-cluster/cluster --generate darshan --vertices 100000
  quiver meta load --cluster cluster.txt rmat16.qcsr --relation has")]
    Load(LoadArgs),
    /// Ask a provenance question in GTravel, as of now or of a past time.
    #[command(after_help = r#"Examples:
  quiver meta query --cluster c.txt 'v("uid:1000").e(run).v().e(write)'
  quiver meta query --cluster c.txt 'v("/proj/d0/f3.dat").e(wasWrittenBy).v().e(read).repeat(2).return_fp()'
  quiver meta query --cluster c.txt 'v("job:7").e(contains).v().va(type = "process").rtm().e(read)' --as-of -1h

Steps: v("id", ...) starts; e(relation) follows out-edges; v() moves on (optional);
va(key = "x"), va(key in ("x", "y")), va(key range ("lo", "hi")) filter vertices (the key
`type` is the vertex type) and ea(...) the last hop's edges, all conditions must hold;
rtm() returns that step's vertices too; repeat(n) runs the steps so far n times;
return_fp() returns whole paths."#)]
    Query(QueryArgs),
    /// Measure: start a cluster of --servers on this machine, run the workload with --clients,
    /// print throughput and the servers' counts.
    #[command(after_help = "Examples:
  quiver meta bench insert --servers 4 --clients 32
  quiver meta bench mdtest --servers 4 --clients 32 --files-per-client 4000
  quiver meta bench traverse --servers 8 --partitioner edge-cut --scale 16 --steps 2,4,8 --json
  quiver meta bench degrees --servers 32 --partitioner dido --scale 14 --edge-factor 64

insert loads Darshan-like metadata (paper Fig. 11); mdtest creates files in one directory
(Fig. 18); traverse loads a permuted R-MAT graph (a = 0.45, b = 0.15, c = 0.15, 128-byte
attributes) and traverses it from a fixed vertex with prefetching off and on and with the
asynchronous engine, then once more as of the first version of every edge (Figs. 10, 16);
degrees loads the same kind of graph and, from the first vertex of each out-degree, counts
StatComm and StatReads of a scan and of a 3-step traversal (Figs. 12-15).")]
    Bench(BenchArgs),
}

#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Start --servers servers on 127.0.0.1, each with its data directory under --data, write
    /// the cluster file, and stop them all on Ctrl-C or SIGTERM.
    #[command(after_help = "Examples:
  quiver meta cluster up --servers 4
  quiver meta cluster up --servers 8 --data /tmp/meta --partitioner giga --threshold 256")]
    Up(UpArgs),
}

/// How the cluster places data (every server of a cluster runs the same).
#[derive(Debug, Args)]
pub struct PlacementArgs {
    /// Where out-edges go: dido (split toward destinations), edge-cut (all with their
    /// source), vertex-cut (hashed per edge), giga (split into even halves).
    #[arg(long, default_value = ServerConfig::default().partitioner.name(), value_parser = parse_partitioner)]
    pub partitioner: Partitioner,
    /// Virtual nodes on the ring (vertices hash to them; the ring maps them to servers).
    #[arg(long, default_value_t = ServerConfig::default().vnodes)]
    pub vnodes: u32,
    /// Edges a partition holds before it splits (dido and giga).
    #[arg(long, default_value_t = ServerConfig::default().threshold)]
    pub threshold: u32,
    /// A JSON file of vertex types and relations to add to the default schema:
    /// {"types": {"workflow": ["name"]}, "relations": {"partOf": "hasPart"}}.
    #[arg(long)]
    pub schema: Option<PathBuf>,
    /// Fsync the log on every write batch: acknowledged writes also survive power loss (a
    /// killed server loses none either way).
    #[arg(long)]
    pub sync: bool,
    /// Prefetch a traversal's next step while waiting at the barrier: auto (when this host
    /// has a core beyond the cluster's servers on it; otherwise the wait is other servers'
    /// steps, and a prefetch would take their CPU), on, off.
    #[arg(long, default_value = ServerConfig::default().prefetch.name(), value_parser = parse_prefetch)]
    pub prefetch: Prefetch,
}

impl Default for PlacementArgs {
    /// What `quiver meta cluster up` uses without placement flags.
    fn default() -> PlacementArgs {
        let defaults = ServerConfig::default();
        PlacementArgs {
            partitioner: defaults.partitioner,
            vnodes: defaults.vnodes,
            threshold: defaults.threshold,
            schema: None,
            sync: defaults.sync,
            prefetch: defaults.prefetch,
        }
    }
}

fn parse_engine(text: &str) -> Result<Engine, String> {
    text.parse()
}

fn parse_partitioner(text: &str) -> Result<Partitioner, String> {
    text.parse()
}

fn parse_prefetch(text: &str) -> Result<Prefetch, String> {
    text.parse()
}

impl PlacementArgs {
    fn server_config(
        &self,
        cluster: Membership,
        index: usize,
        data: PathBuf,
    ) -> Result<ServerConfig> {
        let schema = self.schema()?;
        Ok(ServerConfig {
            cluster,
            index,
            data,
            partitioner: self.partitioner,
            vnodes: self.vnodes,
            threshold: self.threshold,
            schema,
            sync: self.sync,
            prefetch: self.prefetch,
            ..ServerConfig::default()
        })
    }

    /// The default schema with --schema's additions.
    fn schema(&self) -> Result<Schema> {
        let Some(path) = &self.schema else {
            return Ok(Schema::default());
        };
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("reading the schema {}", path.display()))?;
        Schema::with_additions(&text).with_context(|| format!("the schema {}", path.display()))
    }

    /// The same flags, for a spawned server.
    fn to_args(&self) -> Vec<String> {
        let mut args = vec![
            "--partitioner".into(),
            self.partitioner.name().into(),
            "--vnodes".into(),
            self.vnodes.to_string(),
            "--threshold".into(),
            self.threshold.to_string(),
            "--prefetch".into(),
            self.prefetch.name().into(),
        ];
        if let Some(schema) = &self.schema {
            args.extend(["--schema".into(), schema.display().to_string()]);
        }
        if self.sync {
            args.push("--sync".into());
        }
        args
    }
}

/// `quiver meta serve` flags.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The address to listen on (a line of the cluster file).
    #[arg(long, default_value = "127.0.0.1:7400")]
    pub listen: SocketAddr,
    /// The server's RocksDB directory (created if missing).
    #[arg(long)]
    pub data: PathBuf,
    /// The cluster file; without it, a cluster of this one server.
    #[arg(long)]
    pub cluster: Option<PathBuf>,
    #[command(flatten)]
    pub placement: PlacementArgs,
}

/// `quiver meta cluster up` flags.
#[derive(Debug, Args)]
pub struct UpArgs {
    /// Servers to start.
    #[arg(long, default_value_t = quiver_meta::cluster::DEFAULT_SERVERS)]
    pub servers: usize,
    /// Where the servers keep their data (one directory each) and the cluster file.
    #[arg(long, default_value = "meta-cluster")]
    pub data: PathBuf,
    /// The first server's port, the others following (0: free ports the system picks).
    #[arg(long, default_value_t = 0)]
    pub base_port: u16,
    #[command(flatten)]
    pub placement: PlacementArgs,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum Generator {
    /// Users, jobs, processes, files and directories, Darshan-log shaped.
    Darshan,
}

/// `quiver meta load` flags.
#[derive(Debug, Args)]
pub struct LoadArgs {
    /// The cluster file.
    #[arg(long)]
    pub cluster: PathBuf,
    /// Generate metadata instead of reading a graph.
    #[arg(
        long,
        value_enum,
        conflicts_with = "graph",
        required_unless_present = "graph"
    )]
    pub generate: Option<Generator>,
    /// Vertices to generate.
    #[arg(long, default_value_t = BenchConfig::default().vertices, value_parser = at_least_one::<usize>())]
    pub vertices: usize,
    /// A .qcsr graph to load instead of --generate: each vertex becomes a --vertex-type named
    /// by its id (vertex 17: "v17"), each edge a --relation.
    pub graph: Option<PathBuf>,
    /// The type of a graph's vertices.
    #[arg(long, default_value = "file")]
    pub vertex_type: String,
    /// The relation of a graph's edges.
    #[arg(long, default_value = "has")]
    pub relation: String,
    #[command(flatten)]
    pub clients: ClientArgs,
    /// Seed of generated data.
    #[arg(long, default_value_t = BenchConfig::default().seed)]
    pub seed: u64,
}

/// How many clients write, in what batches.
#[derive(Debug, Args)]
pub struct ClientArgs {
    /// Clients writing at once.
    #[arg(long, default_value_t = LoadConfig::default().clients)]
    pub clients: usize,
    /// Writes per request.
    #[arg(long, default_value_t = LoadConfig::default().batch)]
    pub batch: usize,
}

impl ClientArgs {
    fn config(&self) -> LoadConfig {
        LoadConfig {
            clients: self.clients,
            batch: self.batch,
        }
    }
}

/// `quiver meta query` flags.
#[derive(Debug, Args)]
pub struct QueryArgs {
    /// The cluster file.
    #[arg(long)]
    pub cluster: PathBuf,
    /// The traversal, in GTravel's text form (see below).
    pub travel: String,
    /// Read the graph as of TIME: nanoseconds since the epoch (as reports print them), or an
    /// age such as -30s, -5m, -2h, -1d.
    #[arg(long, allow_hyphen_values = true)]
    pub as_of: Option<String>,
    /// Servers do not prefetch the next step while they wait.
    #[arg(long)]
    pub no_prefetch: bool,
    /// sync: level-synchronous steps (the paper's default); async: no barrier, entries flow
    /// on as soon as they are expanded.
    #[arg(long, default_value = TravelOptions::default().engine.name(), value_parser = parse_engine)]
    pub engine: Engine,
    /// Vertices or paths printed per step (the JSON report has all).
    #[arg(long, default_value_t = 20)]
    pub limit: usize,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum WorkloadArg {
    Insert,
    Mdtest,
    Traverse,
    Degrees,
}

/// `quiver meta bench` flags.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// What to measure.
    #[arg(value_enum)]
    pub workload: WorkloadArg,
    /// Servers to start on this machine.
    #[arg(long, default_value_t = quiver_meta::cluster::DEFAULT_SERVERS)]
    pub servers: usize,
    #[command(flatten)]
    pub clients: ClientArgs,
    #[command(flatten)]
    pub placement: PlacementArgs,
    /// insert: vertices of the Darshan-like graph.
    #[arg(long, default_value_t = BenchConfig::default().vertices, value_parser = at_least_one::<usize>())]
    pub vertices: usize,
    /// mdtest: files each client creates.
    #[arg(long, default_value_t = BenchConfig::default().files_per_client)]
    pub files_per_client: usize,
    /// traverse: depths, comma-separated.
    #[arg(long, default_value = "2,4,8", value_delimiter = ',')]
    pub steps: Vec<usize>,
    /// traverse, degrees: log2 of the R-MAT graph's vertices.
    #[arg(long, default_value_t = BenchConfig::default().scale)]
    pub scale: u32,
    /// traverse, degrees: edges per vertex.
    #[arg(long, default_value_t = BenchConfig::default().edge_factor, value_parser = at_least_one::<u64>())]
    pub edge_factor: u64,
    /// degrees: at most this many out-degrees, spread evenly on a log scale (the paper takes
    /// every one; each costs a scan and a 3-step traversal).
    #[arg(long, default_value_t = BenchConfig::default().degree_samples)]
    pub degree_samples: usize,
    /// Seed of generated data.
    #[arg(long, default_value_t = BenchConfig::default().seed)]
    pub seed: u64,
    /// Keep the servers' data here (default: a temporary directory, removed after).
    #[arg(long)]
    pub data: Option<PathBuf>,
    /// insert, mdtest: no servers; write the same keys and values straight into one RocksDB
    /// in this process, opened as a server opens its store, a WriteBatch a --batch: the
    /// ceiling the servers' rate is measured against.
    #[arg(long)]
    pub raw_rocksdb: bool,
}

pub fn meta(command: MetaCommand, json: bool, quiet: bool) -> Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    match command {
        MetaCommand::Serve(args) => runtime.block_on(serve(args)),
        MetaCommand::Cluster {
            command: ClusterCommand::Up(args),
        } => runtime.block_on(up(args)),
        MetaCommand::Load(args) => runtime.block_on(load(args, json, quiet)),
        MetaCommand::Query(args) => runtime.block_on(query(args, json)),
        MetaCommand::Bench(args) => runtime.block_on(bench(args, json, quiet)),
    }
}

async fn connect(path: &Path) -> Result<Client> {
    let cluster = Membership::read(path)?;
    Client::connect(&cluster)
        .await
        .with_context(|| format!("connecting to the cluster {}", path.display()))
}

/// Waits for Ctrl-C or SIGTERM.
async fn stop_signal() -> Result<()> {
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("listening for SIGTERM")?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.context("listening for Ctrl-C"),
        _ = term.recv() => Ok(()),
    }
}

async fn serve(args: ServeArgs) -> Result<()> {
    let listen = args.listen.to_string();
    let (cluster, index) = Membership::of_server(args.cluster.as_deref(), &args.data, &listen)?;
    let servers = cluster.servers.len();
    let config = args
        .placement
        .server_config(cluster, index, args.data.clone())?;
    // The store opens (and replays) before the port is bound: a server
    // that listens is ready.
    let opened = quiver_meta::server::open(config)?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("listening on {listen}"))?;
    let running = opened.serve(listener).await?;
    eprintln!(
        "quiver meta: server {index} of {servers} serving on {} ({}, data in {}); Ctrl-C stops it",
        running.addr,
        args.placement.partitioner.name(),
        args.data.display()
    );
    stop_signal().await?;
    running.shutdown().await?;
    eprintln!("quiver meta: server {index} stopped; its store is flushed");
    Ok(())
}

/// Starts `n` servers of `placement` under `dir` as children of this
/// process (`quiver meta serve`), and connects to them.
pub async fn spawn_local(
    n: usize,
    dir: &Path,
    base_port: u16,
    placement: &PlacementArgs,
    quiet: bool,
) -> Result<(LocalCluster, Client)> {
    let exe = std::env::current_exe().context("finding this program to start servers")?;
    let server_args = placement.to_args();
    LocalCluster::spawn(n, dir, base_port, quiet, |slot| {
        let mut cmd = Command::new(&exe);
        cmd.args(["meta", "serve", "--listen", slot.addr, "--cluster"])
            .arg(slot.cluster_file)
            .arg("--data")
            .arg(slot.data)
            .args(&server_args);
        cmd
    })
    .await
    .map_err(meta_error)
}

/// A meta error, with a setting the library refused named by its flag.
fn meta_error(e: quiver_meta::Error) -> anyhow::Error {
    match e {
        quiver_meta::Error::Invalid(invalid) => flag_error(invalid),
        e => e.into(),
    }
}

async fn up(args: UpArgs) -> Result<()> {
    let (mut cluster, _) = spawn_local(
        args.servers,
        &args.data,
        args.base_port,
        &args.placement,
        false,
    )
    .await?;
    eprintln!(
        "quiver meta: {} servers up ({}), cluster file {}; Ctrl-C stops them",
        args.servers,
        cluster.addrs().join(", "),
        cluster.file().display()
    );
    println!("{}", cluster.file().display());
    let mut watch = tokio::time::interval(Duration::from_millis(500));
    let stop = stop_signal();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            r = &mut stop => {
                r?;
                break;
            }
            _ = watch.tick() => {
                if let Some((i, status)) = cluster.exited()? {
                    cluster.stop();
                    bail!("server {i} ({}) exited with {status}; stopped the others", cluster.addrs()[i]);
                }
            }
        }
    }
    cluster.stop();
    eprintln!(
        "quiver meta: cluster stopped; data kept in {}",
        args.data.display()
    );
    Ok(())
}

fn print_load(what: &str, r: &LoadReport) {
    println!(
        "{what}: {} writes acknowledged ({} vertices, {} edges) in {:.2} s = {:.0} writes/s; {} splits, {} re-routed",
        r.acknowledged,
        r.vertices,
        r.edges,
        seconds(r.summary.wall_ns),
        r.writes_per_s,
        r.splits,
        r.rerouted
    );
}

async fn load(args: LoadArgs, json: bool, quiet: bool) -> Result<()> {
    let client = connect(&args.cluster).await?;
    let writes = match (&args.graph, args.generate) {
        (Some(path), _) => {
            let graph = Graph::open(path).with_context(|| format!("opening {}", path.display()))?;
            graph_writes(&graph, &args.vertex_type, &args.relation, args.seed)
        }
        (None, Some(Generator::Darshan)) => {
            quiver_meta::darshan::generate(args.vertices, args.seed)
        }
        (None, None) => bail!(UsageError(
            "name --generate darshan or a graph (GRAPH)".into()
        )),
    };
    let bar = Bar::new(json || quiet);
    let report =
        quiver_meta::load::load(&client, Arc::new(writes), args.clients.config(), &bar).await?;
    drop(bar);
    if json {
        print_json(&report)?;
    } else {
        print_load("loaded", &report);
        println!("everything is visible as of {}", report.ts);
    }
    Ok(())
}

/// What `meta query --json` prints: the travel and its answer.
#[derive(Serialize)]
struct QueryReport<'a> {
    travel: &'a str,
    #[serde(flatten)]
    result: TravelAnswer,
}

async fn query(args: QueryArgs, json: bool) -> Result<()> {
    let travel = Travel::parse(&args.travel)?;
    let as_of = args
        .as_of
        .as_deref()
        .map(|text| quiver_meta::clock::as_of_from_text(text).map_err(flag_error))
        .transpose()?;
    let client = connect(&args.cluster).await?;
    let options = TravelOptions {
        as_of,
        prefetch: !args.no_prefetch,
        engine: args.engine,
    };
    let result: TravelAnswer = client.travel(&travel, options).await?.into();
    if json {
        let report = QueryReport {
            travel: &args.travel,
            result,
        };
        print_json(&report)?;
        return Ok(());
    }
    println!("as of {}:", result.as_of);
    for (step, ids) in &result.marked {
        println!("step {step}: {} vertices", ids.len());
        for id in ids.iter().take(args.limit) {
            println!("  {id}");
        }
        if ids.len() > args.limit {
            println!(
                "  ... {} more (--limit, or --json for all)",
                ids.len() - args.limit
            );
        }
    }
    if travel.paths {
        println!("{} paths", result.paths.len());
        for p in result.paths.iter().take(args.limit) {
            println!("  {}", p.join(" -> "));
        }
    }
    for (i, s) in result.steps.iter().enumerate() {
        // The asynchronous engine runs its steps at once: no step time.
        let time = match options.engine {
            Engine::Sync => format!(", {:.1} ms", s.ns as f64 / 1e6),
            Engine::Async => String::new(),
        };
        println!(
            "  step {i}: {} vertices read, {} edges, StatComm {}, StatReads {}, {} messages ({} B) between servers{time}",
            s.vertices, s.edges, s.stat_comm, s.stat_reads, s.messages, s.bytes,
        );
    }
    println!("  {:.1} ms in all", result.ns as f64 / 1e6);
    Ok(())
}

async fn bench(args: BenchArgs, json: bool, quiet: bool) -> Result<()> {
    let workload = match args.workload {
        WorkloadArg::Insert => Workload::Insert,
        WorkloadArg::Mdtest => Workload::Mdtest,
        WorkloadArg::Traverse => Workload::Traverse,
        WorkloadArg::Degrees => Workload::Degrees,
    };
    let config = BenchConfig {
        vertices: args.vertices,
        files_per_client: args.files_per_client,
        steps: args.steps.clone(),
        degree_samples: args.degree_samples,
        scale: args.scale,
        edge_factor: args.edge_factor,
        load: args.clients.config(),
        seed: args.seed,
    };
    config.validate()?;
    let temp = tempfile::tempdir().context("creating a temporary directory")?;
    let dir = args
        .data
        .clone()
        .unwrap_or_else(|| temp.path().to_path_buf());
    let bar = Bar::new(json || quiet);
    let graph = match workload {
        Workload::Traverse | Workload::Degrees => {
            let spec = config.graph();
            let path = temp.path().join("rmat.qcsr");
            // A scratch graph, gone with its directory: not fsynced.
            let sort = SortOptions {
                dedupe: true,
                drop_self_loops: true,
                sync: false,
                ..SortOptions::default()
            };
            quiver_csr::generate_to_file(&spec, args.seed, None, &sort, &path, &bar)?;
            Some(Graph::open(&path)?)
        }
        _ => None,
    };
    if args.raw_rocksdb {
        let schema = args.placement.schema()?;
        let report = quiver_meta::bench::raw_rocksdb(
            workload,
            &config,
            &schema,
            args.placement.sync,
            &dir.join("rocksdb"),
            &bar,
        )
        .map_err(meta_error)?;
        drop(bar);
        return print_report(&report, json);
    }
    // The servers' messages go to server{i}.log beside their data.
    let (mut cluster, client) =
        spawn_local(args.servers, &dir.join("servers"), 0, &args.placement, true).await?;
    let report = quiver_meta::bench::run(&client, workload, graph.as_ref(), &config, &bar).await?;
    drop(bar);
    cluster.stop();
    print_report(&report, json)
}

fn print_report(report: &BenchReport, json: bool) -> Result<()> {
    if json {
        print_json(report)?;
    } else {
        print_bench(report);
    }
    Ok(())
}

fn print_bench(r: &BenchReport) {
    if r.servers == 0 {
        println!(
            "{} straight into one RocksDB in this process (no servers)",
            r.workload.name()
        );
    } else {
        println!(
            "{} on {} servers ({}), {} clients",
            r.workload.name(),
            r.servers,
            r.partitioner,
            r.clients
        );
    }
    print_load("  load", &r.load);
    if let Some(c) = r.creates_per_s {
        println!("  {c:.0} creates/s");
    }
    if let Some(start) = &r.start {
        println!("  traversals from {start}:");
        for t in &r.traversals {
            println!(
                "  {} steps, {}{}{}: {:.1} ms, {} vertices at the end, {} edges, StatComm {}, StatReads {}, {} messages ({} B), {} prefetch hits",
                t.steps,
                t.engine,
                if t.prefetch { ", prefetch" } else { "" },
                if t.past { ", as of the first versions" } else { "" },
                t.totals.ns as f64 / 1e6,
                t.end_vertices,
                t.totals.edges,
                t.totals.stat_comm,
                t.totals.stat_reads,
                t.totals.messages,
                t.totals.bytes,
                t.totals.prefetch_hits
            );
        }
    }
    if !r.degrees.is_empty() {
        println!(
            "  from one vertex of each of {} out-degrees (StatComm / StatReads):",
            r.degrees.len()
        );
        for sum in &r.degree_sums {
            let range = if sum.max_degree == u64::MAX {
                format!("{}+", sum.min_degree)
            } else {
                format!("{}-{}", sum.min_degree, sum.max_degree)
            };
            println!(
                "  degrees {range} ({} vertices): scans {} / {}, {}-step traversals {} / {}",
                sum.vertices,
                sum.scan.stat_comm,
                sum.scan.stat_reads,
                quiver_meta::bench::DEGREE_TRAVERSAL_STEPS,
                sum.traversal.stat_comm,
                sum.traversal.stat_reads
            );
        }
    }
    if r.servers > 0 {
        println!(
            "  servers: {} splits, {} edges moved, {} messages ({} B) between servers",
            r.totals.splits, r.totals.edges_moved, r.totals.messages, r.totals.bytes
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bench's flags default to the library's settings: written as
    /// text only where clap needs it (`--steps`), and checked here.
    #[test]
    fn bench_defaults_are_the_librarys() {
        use clap::Parser;
        let cli = crate::cli::Cli::try_parse_from(["quiver", "meta", "bench", "traverse"]).unwrap();
        let crate::cli::Command::Meta {
            command: MetaCommand::Bench(args),
        } = cli.command
        else {
            panic!("not meta bench");
        };
        let defaults = BenchConfig::default();
        assert_eq!(args.steps, defaults.steps);
        assert_eq!(args.scale, defaults.scale);
        assert_eq!(args.edge_factor, defaults.edge_factor);
        assert_eq!(args.vertices, defaults.vertices);
        assert_eq!(args.clients.batch, defaults.load.batch);
        assert_eq!(args.clients.clients, defaults.load.clients);
        assert_eq!(
            args.placement.partitioner,
            ServerConfig::default().partitioner
        );
        assert_eq!(args.servers, quiver_meta::cluster::DEFAULT_SERVERS);
    }
}
