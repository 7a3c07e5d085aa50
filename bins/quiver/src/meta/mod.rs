//! `quiver meta`: GraphMeta's versioned metadata graph, served by a cluster
//! of RocksDB-backed gRPC servers; loading, provenance queries and the
//! paper's benchmarks. This module holds the flags; `run` the calls and
//! the printing.

mod run;

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use quiver_meta::bench::{BenchConfig, Workload};
use quiver_meta::load::LoadConfig;
use quiver_meta::schema::Schema;
use quiver_meta::server::{Prefetch, ServerConfig};
use quiver_meta::{Engine, Membership, Partitioner, TravelOptions};

use crate::units::at_least_one;

pub use run::{meta, spawn_local};

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
    #[arg(long, default_value = ServerConfig::default().partitioner.name(), value_parser = str::parse::<Partitioner>)]
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
    #[arg(long, default_value = ServerConfig::default().prefetch.name(), value_parser = str::parse::<Prefetch>)]
    pub prefetch: Prefetch,
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
    #[arg(long, default_value = TravelOptions::default().engine.name(), value_parser = str::parse::<Engine>)]
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

impl From<WorkloadArg> for Workload {
    fn from(arg: WorkloadArg) -> Workload {
        match arg {
            WorkloadArg::Insert => Workload::Insert,
            WorkloadArg::Mdtest => Workload::Mdtest,
            WorkloadArg::Traverse => Workload::Traverse,
            WorkloadArg::Degrees => Workload::Degrees,
        }
    }
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
