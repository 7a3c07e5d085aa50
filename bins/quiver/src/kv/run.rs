//! `quiver kv ...` run: each command calls the library and prints what it
//! reports (a human summary, or `--json`).

use anyhow::{bail, Context, Result};
use quiver_csr::Graph;
use quiver_kv::control::{Client, Cost, Placed, Request, Response, ServeConfig};
use quiver_kv::speed::SpeedConfig;
use quiver_kv::{BenchReport, Config, Policy, StoreConfig, NODES};
use quiver_verbs::job::{Fabric, Job, Nodes};
use quiver_verbs::CostModel;

use super::{AtArgs, BenchArgs, KvCommand, MigrateArgs, ServeArgs};
use crate::job::{JobArgs, LOCAL_NODES};
use crate::progress::Bar;
use crate::report::{flagged, print_json, UsageError};
use crate::units::seconds;

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
        report_rate: args.report_rate,
        margin: args.margin,
        shift_every: args.shift_every,
        seed: args.seed,
        store: StoreConfig {
            plan: args.plan,
            cache_lease: args.cache_lease.0,
            reclaim_lease: args.reclaim_lease.0,
            value_headroom: args.value_headroom.0,
            ..defaults.store
        },
    };
    flagged(config.validate())?;
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
        "migration  {} values moved ({:.3}% of keys; {:.3}% were read mostly away from home in the last interval, {} bytes), {:.2} one-sided ops each, {} retried, {} refused, {} contended; {} puts forwarded",
        report.keys_moved,
        share(report.keys_moved_share),
        share(report.mostly_remote_share),
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
