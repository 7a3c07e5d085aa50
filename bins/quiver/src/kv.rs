//! `quiver kv`: Pragh's graph store with split live migration, and the
//! paper's traversal benchmark under each policy.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};
use quiver_csr::Graph;
use quiver_kv::control::{Client, Cost, Placed, Request, Response, ServeConfig};
use quiver_kv::speed::SpeedConfig;
use quiver_kv::{BenchReport, Config, Mix, Plan, Policy, StoreConfig, NODES};
use quiver_verbs::job::{Fabric, Job, Nodes};
use quiver_verbs::CostModel;

use crate::job::{JobArgs, LOCAL_NODES};
use crate::progress::Bar;
use crate::report::{flagged, print_json, UsageError};
use crate::units::{parse_duration, seconds, ByteSize, Span};

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
    /// Reads per second of one remote pair that the monitor reports at once (default: derived
    /// by the run, as many reads in a tick as a migration costs one-sided operations, so a pair
    /// reported at once pays its move back within the tick; the paper's is 100).
    #[arg(long)]
    pub instant_rate: Option<u32>,
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

/// `quiver kv ...` as typed by the user.
pub fn kv(command: KvCommand, json: bool, hidden: bool) -> Result<()> {
    match command {
        KvCommand::Bench(args) => bench(&args, json, hidden),
        KvCommand::Migrate(args) => migrate(&args, json),
        KvCommand::Serve(args) => serve(&args),
        KvCommand::Get(args) => {
            let (key, limit) = (args.vertex, args.limit);
            ask(&args.at, args.on, key, Request::Get { key, limit }, json)
        }
        KvCommand::Put(args) => {
            let (key, target, weight) = (args.vertex, args.target, args.weight);
            let request = Request::Put {
                key,
                target,
                weight,
            };
            ask(&args.at, args.on, key, request, json)
        }
        KvCommand::Traverse(args) => {
            let (start, neighbours) = (args.start, args.neighbours);
            let request = Request::Traverse { start, neighbours };
            ask(&args.at, args.on, start, request, json)
        }
        KvCommand::Move(args) => {
            let key = args.vertex;
            ask(&args.at, Some(args.to), key, Request::Move { key }, json)
        }
        KvCommand::Stop(at) => {
            Client::connect(&at.at)?.call(&Request::Stop)?;
            if !json {
                println!("stopped the store at {}", at.at);
            }
            Ok(())
        }
    }
}

fn serve(args: &ServeArgs) -> Result<()> {
    let graph =
        Graph::open(&args.graph).with_context(|| format!("opening {}", args.graph.display()))?;
    let job = job_or_loopback(&args.job, NODES)?;
    let nodes = match job.nodes {
        Nodes::Local(n) => n,
        Nodes::Member { size, .. } => size
            .or_else(quiver_verbs::cluster::launched_size)
            .unwrap_or(1),
    };
    if u32::from(args.port) + nodes > 65_536 {
        bail!(UsageError(format!(
            "--port {} leaves no port for node {} (node r listens on port + r)",
            args.port,
            nodes - 1
        )));
    }
    let config = ServeConfig {
        host: args.host.clone(),
        port: args.port,
        ..ServeConfig::default()
    };
    // The example request names a vertex the graph has, by its ids.
    let first = if graph.num_vertices() > 0 {
        graph.original_id(0)
    } else {
        0
    };
    eprintln!(
        "loading {} ({} vertices) on {nodes} {} nodes ...",
        args.graph.display(),
        graph.num_vertices(),
        job.fabric.name()
    );
    let served = quiver_kv::control::serve_job(&graph, &job, &config, |zero| {
        eprintln!(
            "serving: node 0 at {zero}, node r at port {} + r; try `quiver kv get {first} --at {zero}`, stop with `quiver kv stop --at {zero}`",
            args.port
        );
    })
    .with_context(|| format!("serving {}", args.graph.display()))?;
    if let Some(answered) = served {
        eprintln!("stopped; requests answered per node: {answered:?}");
    }
    Ok(())
}

/// Sends `request` about `vertex` (named by the graph's ids) to run on node
/// `on` (default: the vertex's home), through the node of the store at
/// `at`, and prints the answer. The store refuses a vertex the graph
/// lacks, or a node the job lacks, as an invalid argument (a usage error,
/// as for any engine).
fn ask(at: &AtArgs, on: Option<u32>, vertex: u64, request: Request, json: bool) -> Result<()> {
    let response = Client::connect(&at.at)?
        .call_on(on, request)
        .with_context(|| format!("the kv store at {}", at.at))?;
    if json {
        print_json(&response)?;
        return Ok(());
    }
    let cost = |c: &Cost| {
        format!(
            "on node {}: {} one-sided operations, {:.1} us modelled, {:.1} us wall",
            c.node,
            c.one_sided,
            c.modelled_ns as f64 / 1e3,
            c.wall_ns as f64 / 1e3
        )
    };
    let placed = |p: &Placed| format!("home node {}, value on node {}", p.home, p.holder);
    match &response {
        Response::Get(reply) => {
            println!(
                "vertex {vertex}: {} neighbours read ({}), {}",
                reply.neighbours.len(),
                placed(&reply.placed),
                cost(&reply.placed.cost)
            );
            let edges: Vec<String> = match &reply.weights {
                Some(weights) => reply
                    .neighbours
                    .iter()
                    .zip(weights)
                    .map(|(id, weight)| format!("{id}:{weight}"))
                    .collect(),
                None => reply.neighbours.iter().map(u64::to_string).collect(),
            };
            println!("{}", edges.join(" "));
        }
        Response::Put(p) => println!("added an edge to vertex {vertex} ({}), {}", placed(p), cost(&p.cost)),
        Response::Move(p) => println!("moved vertex {vertex}'s value ({}), {}", placed(p), cost(&p.cost)),
        Response::Traverse(t) => println!(
            "two hops from vertex {vertex}: {} neighbours, then {} of theirs ({} distinct); {} gets, {} remote, {}",
            t.first_hop,
            t.second_hop,
            t.distinct,
            t.gets,
            t.remote_gets,
            cost(&t.cost)
        ),
        other => bail!("unexpected answer {other:?}"),
    }
    Ok(())
}

/// The job the flags describe, or without job flags `nodes` loopback
/// nodes with the cost model.
fn job_or_loopback(args: &JobArgs, nodes: u32) -> Result<Job> {
    if args.wants_job() {
        return args.job(nodes);
    }
    Ok(Job {
        fabric: Fabric::Loopback {
            cost: Some(CostModel::default()),
        },
        ..args.job(nodes)?
    })
}

fn migrate(args: &MigrateArgs, json: bool) -> Result<()> {
    let graph =
        Graph::open(&args.graph).with_context(|| format!("opening {}", args.graph.display()))?;
    let job = job_or_loopback(&args.job, LOCAL_NODES)?;
    let fabric = job.fabric.name();
    let config = SpeedConfig {
        values: args.values,
        max_bytes: args.max_bytes.0,
        batch: args.batch,
        ..SpeedConfig::default()
    };
    flagged(config.validate_for(&graph))?;
    let Some(speed) = quiver_kv::speed::run(&graph, &job, &config)
        .with_context(|| format!("migrating values of {}", args.graph.display()))?
    else {
        return Ok(());
    };
    let speed = &speed;
    if json {
        print_json(speed)?;
        return Ok(());
    }
    #[allow(clippy::cast_precision_loss)]
    let each = |x: u64| x as f64 / speed.values.max(1) as f64;
    println!(
        "migrated   {} values ({} bytes, {:.0} bytes each) from node 0 to node 1 over {fabric}",
        speed.values,
        speed.bytes,
        each(speed.bytes)
    );
    println!(
        "speed      {:.0} values/s wall, {:.0} values/s modelled, one thread, {} at a time",
        speed.values_per_s, speed.modelled_values_per_s, args.batch
    );
    println!(
        "operations {:.2} one-sided per value, {} messages",
        each(speed.one_sided),
        speed.messages
    );
    Ok(())
}

fn bench(args: &BenchArgs, json: bool, hidden: bool) -> Result<()> {
    let graph =
        Graph::open(&args.graph).with_context(|| format!("opening {}", args.graph.display()))?;
    let defaults = Config::default();
    let config = Config {
        policy: args.policy,
        mix: args.mix,
        zipf: args.zipf,
        scope: args.scope,
        neighbours: args.neighbours,
        min_degree: args.min_degree,
        duration: args.duration.0,
        threads: args.threads,
        tick: args.tick.0,
        interval: args.interval.0,
        instant_rate: args.instant_rate,
        shift_every: args.shift_every,
        seed: args.seed,
        store: StoreConfig {
            plan: args.plan,
            cache_lease: args.cache_lease.0,
            reclaim_lease: args.reclaim_lease.0,
            value_headroom: args.value_headroom.0,
            ..defaults.store.clone()
        },
        ..defaults
    };
    let job = job_or_loopback(&args.job, NODES)?;
    let what = || {
        format!(
            "the kv benchmark ({}) on {}",
            config.policy,
            args.graph.display()
        )
    };
    if quiver_kv::hears_its_caller(&job) {
        crate::progress::catch_interrupts()?;
    }
    let bar = Bar::new(json || hidden);
    let report = quiver_kv::run(&graph, &job, &config, &bar).with_context(what)?;
    drop(bar);
    let Some(report) = report else {
        // Another member of the job prints.
        return Ok(());
    };
    let bench = BenchReport {
        graph: args.graph.clone(),
        vertices: graph.num_vertices(),
        edges: graph.num_edges(),
        fabric: job.fabric.name(),
        report,
    };
    if json {
        return print_json(&bench);
    }
    print_report(&bench);
    Ok(())
}

fn print_report(bench: &BenchReport) {
    let (report, fabric) = (&bench.report, bench.fabric);
    let share = |x: f64| 100.0 * x;
    println!(
        "graph      {} ({} vertices, {} edges)",
        bench.graph.display(),
        bench.vertices,
        bench.edges
    );
    println!(
        "policy     {}{} on {} {} nodes{}",
        report.policy,
        if report.policy.migrates() {
            format!(" ({} plan)", report.plan)
        } else {
            String::new()
        },
        report.nodes,
        fabric,
        if report.policy == Policy::Ideal {
            " (run on one, throughput scaled)"
        } else {
            ""
        }
    );
    println!(
        "throughput {:.0} ops/s wall, {:.0} ops/s modelled ({} queries, {} puts in {:.1} s)",
        report.ops_per_s,
        report.modelled_ops_per_s,
        report.queries,
        report.puts,
        seconds(report.summary.compute_ns)
    );
    println!(
        "remote     {:.1}% of gets ({:.1}% read the value remotely); location cache hit rate {:.1}%",
        share(report.remote_share),
        share(report.remote_value_share),
        share(report.cache_hit_rate)
    );
    println!(
        "migration  {} values moved ({:.3}% of keys, {} bytes), {:.2} one-sided ops each, {} retried, {} refused, {} contended; {} puts forwarded",
        report.keys_moved,
        share(report.keys_moved_share),
        report.bytes_moved,
        report.one_sided_ops_per_migration,
        report.migration_retries,
        report.migrations_refused,
        report.contended,
        report.forwarded_puts
    );
    if report.policy == Policy::Shard {
        println!(
            "shards     {} moved; workers held {:.3} s while they moved",
            report.shards_moved,
            seconds(report.paused_ns)
        );
    }
    let micros = |ns: u64| ns as f64 / 1e3;
    println!(
        "latency    p50 {:.1} us, p99 {:.1} us, p99.9 {:.1} us wall; modelled p50 {:.1} us, p99 {:.1} us",
        micros(report.latency.p50_ns),
        micros(report.latency.p99_ns),
        micros(report.latency.p999_ns),
        micros(report.modelled_latency.p50_ns),
        micros(report.modelled_latency.p99_ns)
    );
    let last = &report.last_interval;
    println!(
        "last {:>2} s  {:.0} ops/s wall, {:.0} ops/s modelled, {:.1}% of gets remote ({:.1}% read pairs another node reads more)",
        last.ticks,
        last.ops_per_s,
        last.modelled_ops_per_s,
        share(last.remote_share),
        share(report.shared_share)
    );
    println!(
        "load       {:.3} s; {} bytes of registered memory",
        seconds(report.summary.load_ns),
        report.summary.peak_mem_bytes
    );
    println!(
        "series     t(s)   ops/s  modelled  remote%  hit%  moved  ops/move  p50(us)  p99(us)  p99.9(us)  get p99.9(us)  leases(s)"
    );
    let maybe =
        |x: Option<f64>, scale: f64| x.map_or("-".to_string(), |x| format!("{:.1}", x * scale));
    for point in &report.series {
        println!(
            "           {:>5.1} {:>8.0} {:>9.0} {:>8.1} {:>5} {:>6} {:>9} {:>8.1} {:>8.1} {:>10.1} {:>14.1}  {:.1}/{:.1}",
            point.t_s,
            point.ops_per_s,
            point.modelled_ops_per_s,
            share(point.remote_share),
            maybe(point.cache_hit_rate, 100.0),
            point.migrations,
            maybe(point.one_sided_per_migration, 1.0),
            micros(point.p50_ns),
            micros(point.p99_ns),
            micros(point.p999_ns),
            micros(point.get_p999_ns),
            point.cache_lease_s,
            point.reclaim_lease_s
        );
    }
}
