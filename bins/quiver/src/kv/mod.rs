//! `quiver kv`: Pragh's graph store with split live migration, and the
//! paper's traversal benchmark under each policy. This file holds the
//! flags; `run.rs` runs each command.

mod run;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Subcommand};
use quiver_kv::control::ServeConfig;
use quiver_kv::speed::SpeedConfig;
use quiver_kv::{Config, Mix, Plan, Policy};

pub use run::kv;

use crate::job::JobArgs;
use crate::units::{parse_duration, ByteSize, Span};

#[derive(Debug, Subcommand)]
pub enum KvCommand {
    /// Run the paper's traversal benchmark: two-hop queries (and edge updates) from Zipf-chosen
    /// start vertices on every node, with hot values migrating to their readers.
    #[command(after_help = "Examples:
  quiver kv bench rmat20.qcsr                         8 loopback nodes, split+cache, 30 s
  quiver kv bench rmat20.qcsr --policy orig --duration 10s
  quiver kv bench rmat20.qcsr --nodes 4 --fabric tcp  4 processes on 127.0.0.1
  quiver kv bench rmat20.qcsr --mix 50/50 --zipf 0    update-heavy, uniform starts

Without job flags the benchmark runs 8 nodes as threads of this process (--fabric loopback)
and also reports throughput in modelled RDMA time. Policies: orig (no migration, no location
cache), shard (whole shards of keys and values, 100 per node, move to the node that accessed
them most at each interval's end: the paper's shard-based baseline), cache (location cache
only), split (migration, uncached key lookups), split+cache (Pragh), ideal (the whole workload
on one node, throughput times the node count).")]
    Bench(BenchArgs),
    /// Measure raw migration speed: one thread on node 1 migrates values homed on node 0 to
    /// itself, one after another, with the unilateral protocol (node 0's CPU does nothing).
    #[command(after_help = "Examples:
  quiver kv migrate rmat20.qcsr                          2 loopback nodes, modelled time too
  quiver kv migrate rmat20.qcsr --nodes 2 --fabric tcp   2 processes on 127.0.0.1")]
    Migrate(MigrateArgs),
    /// Load a graph into the store and serve it, until `quiver kv stop`, to a person poking at
    /// it with `quiver kv get|put|traverse|move`. No migration policy runs: values move only when
    /// asked to.
    #[command(after_help = "Examples:
  quiver kv serve rmat20.qcsr                          8 loopback nodes, node 0 at 127.0.0.1:7420
  quiver kv serve rmat20.qcsr --nodes 4 --fabric tcp   4 processes, node r on port 7420 + r
  quiver kv get 17 --on 3                              node 3 reads vertex 17 (remote operations counted)
  quiver kv stop

Node r listens on --host at port --port + r; the node a client asks runs its request, or
relays it to the node that should.")]
    Serve(ServeArgs),
    /// Read a vertex's neighbours from a running store (`quiver kv serve`), on the node given
    /// (default: the vertex's home), with what the read cost; in a weighted graph each as
    /// `id:weight`.
    #[command(after_help = "Examples:
  quiver kv get 17                     at its home: no remote operation
  quiver kv get 17 --on 3 --limit 10   node 3 reads the first 10: key and value READ remotely
  quiver kv get 17 --at host:7420 --json")]
    Get(GetArgs),
    /// Add an edge to a vertex's list in a running store: the Put runs at the vertex's home, or
    /// at the node given and is forwarded (check-and-forward).
    #[command(after_help = "Examples:
  quiver kv put 17 42                append 42 to vertex 17's list, at its home
  quiver kv put 17 42 --on 1         sent from node 1, forwarded to the home and on to the value's holder
  quiver kv put 17 42 --weight 2.5   in a weighted graph: the edge's weight (default 1)")]
    Put(PutArgs),
    /// Run the benchmark's two-hop query from a start vertex in a running store, on the node
    /// given (default: the start's home), with its counts and cost.
    #[command(after_help = "Examples:
  quiver kv traverse 17                    100 friends of 100 friends, at the start's home
  quiver kv traverse 17 --neighbours 10 --on 2")]
    Traverse(TraverseArgs),
    /// Migrate a vertex's value in a running store to a node, with the unilateral protocol run
    /// by that node alone (at most five one-sided operations).
    #[command(after_help = "Examples:
  quiver kv move 17 --to 3    node 3 takes vertex 17's value; its Gets of it are then local
  quiver kv move 17 --to 0    where 0 is its home: the value goes back")]
    Move(MoveArgs),
    /// Stop a running store (every node).
    #[command(after_help = "Examples:
  quiver kv stop
  quiver kv stop --at host:7420")]
    Stop(AtArgs),
}

/// `quiver kv serve` flags.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The .qcsr graph (every node loads the keys homed on it).
    pub graph: PathBuf,
    /// Host every node listens on.
    #[arg(long, default_value_t = ServeConfig::default().host)]
    pub host: String,
    /// Node r listens on this port + r.
    #[arg(long, default_value_t = ServeConfig::default().port)]
    pub port: u16,
    /// The job (default without these flags: 8 nodes on --fabric loopback).
    #[command(flatten)]
    pub job: JobArgs,
}

/// Where a running store is.
#[derive(Debug, Args)]
pub struct AtArgs {
    /// A node of the running store (`host:port`): the one node this command talks to.
    #[arg(long, default_value_t = ServeConfig::default().address(0).expect("node 0's port"))]
    pub at: String,
}

/// `quiver kv get` flags.
#[derive(Debug, Args)]
pub struct GetArgs {
    /// The vertex, by the graph's ids (the dataset's own where the graph has an id map).
    pub vertex: u64,
    /// Neighbours to read at most (default: all).
    #[arg(long, default_value_t = u64::MAX, hide_default_value = true)]
    pub limit: u64,
    /// The node that reads (default: the vertex's home).
    #[arg(long)]
    pub on: Option<u32>,
    #[command(flatten)]
    pub at: AtArgs,
}

/// `quiver kv put` flags.
#[derive(Debug, Args)]
pub struct PutArgs {
    /// The vertex whose list grows, by the graph's ids (the dataset's own where it has an id
    /// map).
    pub vertex: u64,
    /// The new neighbour, by the graph's ids.
    pub target: u64,
    /// The edge's weight, in a store of a weighted graph (default 1).
    #[arg(long)]
    pub weight: Option<f32>,
    /// The node the Put starts on (default: the vertex's home).
    #[arg(long)]
    pub on: Option<u32>,
    #[command(flatten)]
    pub at: AtArgs,
}

/// `quiver kv traverse` flags.
#[derive(Debug, Args)]
pub struct TraverseArgs {
    /// The start vertex, by the graph's ids (the dataset's own where it has an id map).
    pub start: u64,
    /// Neighbours read per hop.
    #[arg(long, default_value_t = Config::default().neighbours)]
    pub neighbours: u64,
    /// The node that runs the query (default: the start's home).
    #[arg(long)]
    pub on: Option<u32>,
    #[command(flatten)]
    pub at: AtArgs,
}

/// `quiver kv move` flags.
#[derive(Debug, Args)]
pub struct MoveArgs {
    /// The vertex, by the graph's ids (the dataset's own where it has an id map).
    pub vertex: u64,
    /// The node that takes the value (and runs the migration).
    #[arg(long)]
    pub to: u32,
    #[command(flatten)]
    pub at: AtArgs,
}

/// `quiver kv migrate` flags.
#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// The .qcsr graph.
    pub graph: PathBuf,
    /// Values to migrate.
    #[arg(long, default_value_t = SpeedConfig::default().values)]
    pub values: u64,
    /// Largest value taken, in bytes (the paper's figure is for values under 4 KiB).
    #[arg(long, default_value_t = ByteSize(SpeedConfig::default().max_bytes))]
    pub max_bytes: ByteSize,
    /// Values migrated together, the protocol's stages pipelined across them (1: one at a
    /// time, each waiting for its five operations in turn).
    #[arg(long, default_value_t = SpeedConfig::default().batch)]
    pub batch: usize,
    /// The job (default without these flags: 2 nodes on --fabric loopback).
    #[command(flatten)]
    pub job: JobArgs,
}

/// `quiver kv bench` flags.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// The .qcsr graph (every node loads the keys homed on it).
    pub graph: PathBuf,
    /// Where values may live: orig, shard, cache, split, split+cache or ideal.
    #[arg(long, default_value_t = Config::default().policy)]
    pub policy: Policy,
    /// Percent of two-hop queries and of edge updates, adding up to 100.
    #[arg(long, default_value_t = Config::default().mix)]
    pub mix: Mix,
    /// Zipf exponent of the start vertices (0: uniform).
    #[arg(long, default_value_t = Config::default().zipf)]
    pub zipf: f64,
    /// Start vertices to draw from (the first vertices with a neighbour).
    #[arg(long, default_value_t = Config::default().scope)]
    pub scope: u32,
    /// Neighbours read per hop.
    #[arg(long, default_value_t = Config::default().neighbours)]
    pub neighbours: u64,
    /// Start only from vertices with at least this many neighbours (100 with --neighbours 100:
    /// every query reads exactly 100 friends of 100 friends).
    #[arg(long, default_value_t = Config::default().min_degree)]
    pub min_degree: u64,
    /// How long the workers run.
    #[arg(long, default_value_t = Span(Config::default().duration))]
    pub duration: Span,
    /// Worker threads per node (0: one per core).
    #[arg(long, default_value_t = Config::default().threads)]
    pub threads: usize,
    /// Period of the monitor's full reports to the coordinator.
    #[arg(long, default_value_t = Span(Config::default().interval))]
    pub interval: Span,
    /// Period of the time series and of instant reports (an interval is whole ticks).
    #[arg(long, default_value_t = Span(Config::default().tick))]
    pub tick: Span,
    /// Reads per second of one remote pair, since the interval began, that the monitor reports
    /// at a tick before the interval's end (default: derived by the run, as many reads as a
    /// migration costs one-sided operations, so a pair reported pays its move back at the rate
    /// it was read; the paper's is 100).
    #[arg(long)]
    pub instant_rate: Option<u32>,
    /// Reads per second of one remote pair that the monitor reports at an interval's end
    /// (default: derived by the run, as many reads over the interval as a migration costs
    /// one-sided operations; the paper's is 1).
    #[arg(long)]
    pub report_rate: Option<u32>,
    /// Approve a move when the applicant reads the pair this many times as often as its
    /// holder, as the paper (1.5). Default: derived from the counts, when the applicant's
    /// reads exceed the holder's by what the move costs and by more than chance (twice the
    /// spread of the difference of two counts of the same rate).
    #[arg(long)]
    pub margin: Option<f64>,
    /// Move the start vertices to the next, disjoint scope this often (the dynamic workload).
    #[arg(long, value_parser = parse_duration)]
    pub shift_every: Option<Duration>,
    /// Seed of the workers' choices.
    #[arg(long, default_value_t = Config::default().seed)]
    pub seed: u64,
    /// How a home's reads of the values it holds count, for the migrating policies: eager (not at
    /// all: any node that reads a pair often takes it at once, the home may take it back later),
    /// deferred (a candidate's home counts them until the next interval's end, when the
    /// coordinator decides), or tracked (always counted, decided at once).
    #[arg(long, default_value_t = Config::default().store.plan)]
    pub plan: Plan,
    /// The longest a cached address may be used (at most --reclaim-lease). The run shortens
    /// it, to half the reclaim lease, while the headroom would not hold the copies.
    #[arg(long, default_value_t = Span(Config::default().store.cache_lease))]
    pub cache_lease: Span,
    /// The longest replaced or migrated memory waits before it is reused (the paper's 60 s). The
    /// run shortens it while the fullest node's headroom would not hold half of what it replaces
    /// for that long, at the rate it replaces it.
    #[arg(long, default_value_t = Span(Config::default().store.reclaim_lease))]
    pub reclaim_lease: Span,
    /// Value region per node beyond the loaded values: room for the copies Puts make and the
    /// values migrated in while what they replace waits out the reclaim lease. Untouched room
    /// costs no memory on the loopback and tcp fabrics.
    #[arg(long, default_value_t = ByteSize(Config::default().store.value_headroom))]
    pub value_headroom: ByteSize,
    /// The job (default without these flags: 8 nodes on --fabric loopback).
    #[command(flatten)]
    pub job: JobArgs,
}
