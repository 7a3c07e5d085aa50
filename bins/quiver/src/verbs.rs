//! `quiver verbs`: check and measure the RDMA verbs fabrics on this machine
//! or on a cluster, the way `ib_read_lat`/`ib_write_bw` check a NIC.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand, ValueEnum};
use quiver_verbs::cluster::{Launch, LocalJob};
use quiver_verbs::{
    conformance, loopback, tcp, CostModel, Node, NodeRank, Op, Output, Queue, WorkRequest,
};
use serde::Serialize;

use crate::units::parse_duration;

#[derive(Debug, Subcommand)]
pub enum VerbsCommand {
    /// Run the conformance suite (every verb, error completions, atomics under contention,
    /// ordering, send/recv, counters) on every node of a job.
    #[command(after_help = "Examples:
  quiver verbs check --nodes 4                   # 4 tcp processes on 127.0.0.1
  quiver verbs check --fabric loopback --nodes 8 # 8 threads, shared memory
  srun -n 16 quiver verbs check --coordinator node01:7000
  mpirun -n 16 quiver verbs check --fabric mpi")]
    Check(JobArgs),
    /// Measure READ/CAS latency and WRITE bandwidth from node 0 to node 1, beside a plain
    /// TCP ping-pong between the same two nodes.
    #[command(after_help = "Examples:
  quiver verbs bench --nodes 2
  quiver verbs bench --fabric loopback --cost-model
  quiver verbs bench --nodes 2 --ops 50000 --json")]
    Bench(BenchArgs),
}

impl VerbsCommand {
    fn job(&self) -> &JobArgs {
        match self {
            VerbsCommand::Check(job) => job,
            VerbsCommand::Bench(bench) => &bench.job,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FabricArg {
    /// Nodes are threads of this process; remote memory is shared memory.
    Loopback,
    /// One process per node over TCP.
    Tcp,
    /// The ranks of an MPI job (run under mpirun/srun; needs a build with --features mpi).
    Mpi,
    /// Real RDMA RC queue pairs (needs an RDMA device and a build with --features rdma).
    Ibverbs,
}

/// How to form the job.
#[derive(Debug, Args, Clone)]
pub struct JobArgs {
    /// The fabric.
    #[arg(long, value_enum, default_value_t = FabricArg::Tcp)]
    pub fabric: FabricArg,
    /// Run this many nodes on this machine: processes on 127.0.0.1 spawned by this command
    /// (loopback: threads). Omit it under srun or mpirun, or with --rank/--size, where this
    /// process is one node of the job.
    #[arg(long)]
    pub nodes: Option<u32>,
    /// This node's rank (default: from SLURM_PROCID, OMPI_COMM_WORLD_RANK or PMI_RANK).
    #[arg(long)]
    pub rank: Option<u32>,
    /// Number of nodes (default: from SLURM_NTASKS, OMPI_COMM_WORLD_SIZE or PMI_SIZE).
    #[arg(long)]
    pub size: Option<u32>,
    /// HOST:PORT where rank 0 runs the coordinator (default: QUIVER_COORDINATOR).
    #[arg(long)]
    pub coordinator: Option<String>,
    /// How long to wait for a node before declaring it failed.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Loopback only: give every operation a modelled time (ConnectX-3 class numbers) and
    /// report it beside wall time.
    #[arg(long)]
    pub cost_model: bool,
}

#[derive(Debug, Args, Clone)]
pub struct BenchArgs {
    #[command(flatten)]
    pub job: JobArgs,
    /// Operations per 8-byte measurement (fewer for larger transfers).
    #[arg(long, default_value_t = 20_000)]
    pub ops: u64,
}

/// `quiver verbs ...` as typed by the user.
pub fn verbs(command: VerbsCommand, json: bool) -> Result<()> {
    let job = command.job().clone();
    if job.cost_model && job.fabric != FabricArg::Loopback {
        bail!(crate::commands::UsageError(
            "--cost-model applies to --fabric loopback only".into()
        ));
    }
    if job.fabric == FabricArg::Loopback {
        let config = loopback::Config {
            cost: job.cost_model.then(CostModel::default),
            timeout: job.timeout,
            ..loopback::Config::new(job.nodes.unwrap_or(2))
        };
        let reports = loopback::run(&config, |node| run_task(&command, &node))?;
        return print(
            &command,
            &reports.into_iter().collect::<Result<Vec<_>>>()?,
            json,
        );
    }
    if job.fabric == FabricArg::Mpi && job.nodes.is_some() {
        bail!(crate::commands::UsageError(
            "the mpi fabric's nodes are started by the MPI launcher: mpirun -n N quiver verbs ... --fabric mpi".into()
        ));
    }
    if job.fabric == FabricArg::Ibverbs && job.nodes.is_some() {
        bail!(crate::commands::UsageError(
            "ibverbs nodes run one per RDMA host: start them with srun/mpirun, or --rank/--size/--coordinator".into()
        ));
    }
    if let Some(nodes) = job.nodes {
        if job.rank.is_some() || job.size.is_some() {
            bail!(crate::commands::UsageError(
                "--nodes spawns a local job; --rank/--size join an existing one".into()
            ));
        }
        let exe = std::env::current_exe().context("finding this executable to spawn the nodes")?;
        let spawned = LocalJob::spawn(nodes, job.timeout, |_| {
            let mut cmd = Command::new(&exe);
            cmd.arg("verbs-node").args(task_args(&command));
            cmd
        })?;
        let reports = spawned.wait().context("the job failed")?;
        let reports = reports
            .into_iter()
            .enumerate()
            .map(|(rank, report)| {
                let report = report.with_context(|| format!("node {rank} sent no report"))?;
                serde_json::from_str(&report)
                    .with_context(|| format!("node {rank} sent an unreadable report"))
            })
            .collect::<Result<Vec<serde_json::Value>>>()?;
        return print(&command, &reports, json);
    }
    // This process is one node of a job started by a launcher.
    let node = join(&job)?;
    let report = run_task(&command, &node)?;
    let all = node.all_gather(report.to_string().as_bytes())?;
    if node.rank() == NodeRank(0) {
        let reports = all
            .iter()
            .map(|bytes| serde_json::from_slice(bytes).context("a node sent an unreadable report"))
            .collect::<Result<Vec<serde_json::Value>>>()?;
        print(&command, &reports, json)?;
    }
    node.barrier()?;
    Ok(())
}

/// `quiver verbs-node ...`: one node of a job spawned by `quiver verbs --nodes N`.
pub fn node(command: VerbsCommand) -> Result<()> {
    let node = join(command.job())?;
    let report = run_task(&command, &node)?;
    node.report(&report.to_string())?;
    node.barrier()?;
    Ok(())
}

fn join(job: &JobArgs) -> Result<Node> {
    match job.fabric {
        FabricArg::Loopback => unreachable!("loopback nodes are threads of the driver"),
        FabricArg::Tcp => {
            let launch = Launch::resolve(job.rank, job.size, job.coordinator.clone(), job.timeout)?;
            Ok(tcp::join(&launch)?)
        }
        FabricArg::Mpi => join_mpi(job),
        FabricArg::Ibverbs => join_ibverbs(job),
    }
}

#[cfg(feature = "mpi")]
fn join_mpi(job: &JobArgs) -> Result<Node> {
    Ok(quiver_verbs::mpi::join(job.timeout)?)
}

#[cfg(not(feature = "mpi"))]
fn join_mpi(_: &JobArgs) -> Result<Node> {
    bail!("this quiver was built without the mpi fabric; rebuild with `cargo build --release --features mpi` (needs libopenmpi-dev and libclang-dev)")
}

#[cfg(feature = "rdma")]
fn join_ibverbs(job: &JobArgs) -> Result<Node> {
    let launch = Launch::resolve(job.rank, job.size, job.coordinator.clone(), job.timeout)?;
    Ok(quiver_verbs::ibverbs::join_launch(&launch)?)
}

#[cfg(not(feature = "rdma"))]
fn join_ibverbs(_: &JobArgs) -> Result<Node> {
    bail!("this quiver was built without the ibverbs fabric; rebuild with `cargo build --release --features rdma` (needs libibverbs-dev, librdmacm-dev and libclang-dev)")
}

/// The arguments that make a spawned node run the same task.
fn task_args(command: &VerbsCommand) -> Vec<String> {
    let job = command.job();
    let mut args = vec![
        match command {
            VerbsCommand::Check(_) => "check".to_owned(),
            VerbsCommand::Bench(_) => "bench".to_owned(),
        },
        "--fabric".to_owned(),
        job.fabric
            .to_possible_value()
            .expect("no fabric is skipped")
            .get_name()
            .to_owned(),
        "--timeout".to_owned(),
        format!("{}ms", job.timeout.as_millis()),
    ];
    if let VerbsCommand::Bench(bench) = command {
        args.extend(["--ops".to_owned(), bench.ops.to_string()]);
    }
    args
}

fn run_task(command: &VerbsCommand, node: &Node) -> Result<serde_json::Value> {
    Ok(match command {
        VerbsCommand::Check(_) => {
            let outcomes = conformance::run(node)?;
            serde_json::json!({ "rank": node.rank(), "checks": outcomes, "counters": node.counters() })
        }
        VerbsCommand::Bench(bench) => serde_json::to_value(measure(node, bench.ops)?)?,
    })
}

fn print(command: &VerbsCommand, reports: &[serde_json::Value], json: bool) -> Result<()> {
    match command {
        VerbsCommand::Check(_) => {
            let failed: Vec<String> = reports
                .iter()
                .flat_map(|r| {
                    r["checks"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .map(move |c| (r, c))
                })
                .filter(|(_, c)| c["passed"] != true || c["detail"] != "")
                .map(|(r, c)| format!("node {}: {} {}", r["rank"], c["check"], c["detail"]))
                .collect();
            if json {
                println!(
                    "{}",
                    serde_json::json!({ "nodes": reports, "passed": failed.is_empty() })
                );
            } else {
                let checks = reports[0]["checks"].as_array().map_or(0, Vec::len);
                println!("{} nodes, {checks} checks each", reports.len());
                for check in reports[0]["checks"].as_array().into_iter().flatten() {
                    let verdict = if check["passed"] == true {
                        "ok"
                    } else {
                        "FAILED"
                    };
                    println!("  {:<14} {verdict}", check["check"].as_str().unwrap_or("?"));
                }
                for line in &failed {
                    println!("  {line}");
                }
            }
            if !failed.is_empty() {
                bail!("{} of the job's checks failed", failed.len());
            }
        }
        VerbsCommand::Bench(_) => {
            let report = &reports[0];
            if json {
                println!("{report}");
            } else {
                print_bench(report);
            }
        }
    }
    Ok(())
}

/// One measured operation kind.
#[derive(Debug, Serialize)]
struct Measurement {
    op: String,
    bytes: usize,
    depth: usize,
    ops: u64,
    ops_per_s: f64,
    mb_per_s: f64,
    p50_us: Option<f64>,
    mean_us: f64,
    modelled_us_per_op: Option<f64>,
}

impl Measurement {
    /// `count` operations of `bytes` at `depth` that took `elapsed`, with
    /// the per-operation `latencies` timed at depth 1.
    fn new(
        op: &str,
        bytes: usize,
        depth: usize,
        count: u64,
        elapsed: Duration,
        mut latencies: Vec<Duration>,
    ) -> Self {
        let secs = elapsed.as_secs_f64();
        latencies.sort_unstable();
        Measurement {
            op: op.to_owned(),
            bytes,
            depth,
            ops: count,
            ops_per_s: count as f64 / secs,
            mb_per_s: count as f64 * bytes as f64 / secs / 1e6,
            p50_us: latencies
                .get(latencies.len() / 2)
                .map(|d| d.as_secs_f64() * 1e6),
            mean_us: secs * 1e6 / count as f64 * depth as f64,
            modelled_us_per_op: None,
        }
    }
}

#[derive(Debug, Serialize)]
struct BenchReport {
    fabric: &'static str,
    nodes: u32,
    target: u32,
    measurements: Vec<Measurement>,
    /// READ 8 B p50 over TCP ping-pong p50 (tcp fabric: the transport's limit).
    read_over_ping_pong: Option<f64>,
    /// Posted batches of 32 8-byte WRITEs over depth 1, in operations per second.
    batch_over_depth_one: Option<f64>,
}

/// Runs the measurements from node 0 to node 1 (itself in a job of one);
/// the other nodes serve. Every node returns the report.
fn measure(node: &Node, ops: u64) -> Result<BenchReport> {
    const SLOT: usize = 64 << 10;
    let region = node.register(SLOT * 33)?;
    let remotes = node.exchange(&region)?;
    let target = remotes[1 % remotes.len()];
    let echo = (node.rank() == target.node && node.fabric() == "tcp")
        .then(|| TcpListener::bind("0.0.0.0:0"))
        .transpose()?;
    let echo_port = echo
        .as_ref()
        .map_or(Ok(0), |l| l.local_addr().map(|a| a.port()))?;
    let ports = node.all_gather(&echo_port.to_le_bytes())?;
    let port = u16::from_le_bytes(ports[target.node.index()][..2].try_into().expect("2 bytes"));
    let server = echo.map(|listener| std::thread::spawn(move || serve_echo(&listener)));
    node.barrier()?;
    let mut measurements = Vec::new();
    if node.rank() == NodeRank(0) {
        let mut queue = node.queue();
        let small = ops.max(100);
        let large = (ops / 32).max(50);
        let mut run = |name: &str,
                       bytes: usize,
                       depth: usize,
                       count: u64,
                       op: &dyn Fn(u64, Option<Vec<u8>>) -> Op|
         -> Result<()> {
            measurements.push(time_ops(node, &mut queue, name, bytes, depth, count, op)?);
            Ok(())
        };
        let write = |offset: u64, bytes: usize, buffer: Option<Vec<u8>>| Op::Write {
            remote: target,
            offset,
            data: buffer.unwrap_or_else(|| vec![7; bytes]),
        };
        run("read", 8, 1, small, &|_, _| Op::Read {
            remote: target,
            offset: 0,
            len: 8,
        })?;
        run("cas", 8, 1, small, &|i, _| Op::CompareSwap {
            remote: target,
            offset: 8,
            expected: i,
            new: i + 1,
        })?;
        run("write", 8, 1, small, &|_, buffer| write(16, 8, buffer))?;
        run("write", 8, 32, small, &|_, buffer| write(16, 8, buffer))?;
        for bytes in [4 << 10, 64 << 10] {
            let count = if bytes > 4096 { large } else { small / 4 };
            for depth in [1, 32] {
                run("write", bytes, depth, count, &|i, buffer| {
                    write(slot(i, depth, SLOT), bytes, buffer)
                })?;
            }
        }
        if port != 0 {
            measurements.push(ping_pong(node, port, small)?);
        }
    }
    node.barrier()?;
    if let Some(server) = server {
        server.join().expect("echo server panicked")?;
    }
    let find = |op: &str, depth: usize| {
        measurements
            .iter()
            .find(|m| m.op == op && m.depth == depth && m.bytes == 8)
    };
    let read_over_ping_pong = match (find("read", 1), find("tcp ping-pong", 1)) {
        (Some(read), Some(ping)) => {
            Some(read.p50_us.unwrap_or(read.mean_us) / ping.p50_us.unwrap_or(ping.mean_us))
        }
        _ => None,
    };
    let batch_over_depth_one = match (find("write", 32), find("write", 1)) {
        (Some(batch), Some(one)) => Some(batch.ops_per_s / one.ops_per_s),
        _ => None,
    };
    Ok(BenchReport {
        fabric: node.fabric(),
        nodes: node.size(),
        target: target.node.0,
        measurements,
        read_over_ping_pong,
        batch_over_depth_one,
    })
}

/// Writes at depth > 1 go to distinct slots so that they overlap like real traffic.
fn slot(i: u64, depth: usize, size: usize) -> u64 {
    (i % depth as u64) * size as u64
}

/// Times `count` operations in posted batches of `depth` (depth 1: one at
/// a time, each timed), each batch drained before the next is posted.
fn time_ops(
    node: &Node,
    queue: &mut Queue,
    name: &str,
    bytes: usize,
    depth: usize,
    count: u64,
    op: &dyn Fn(u64, Option<Vec<u8>>) -> Op,
) -> Result<Measurement> {
    let warmup = (count / 10).min(1000);
    let total = warmup + count;
    let mut done = Vec::with_capacity(depth);
    let mut spare: Vec<Vec<u8>> = Vec::with_capacity(depth);
    let mut latencies = Vec::new();
    let clock_before = node.clock_ns();
    let mut started = Instant::now();
    let mut i = 0;
    while i < total {
        if i == warmup {
            started = Instant::now();
            latencies.clear();
        }
        let n = (depth as u64).min(total - i);
        let t0 = Instant::now();
        queue.post((i..i + n).map(|k| WorkRequest::new(k, op(k, spare.pop()))))?;
        done.clear();
        let n = usize::try_from(n).expect("a batch fits usize");
        queue.wait(&mut done, n, n)?;
        for completion in done.drain(..) {
            match completion.result {
                Ok(Output::Written(buffer)) => spare.push(buffer),
                Ok(_) => {}
                Err(err) => bail!("{name} of {bytes} bytes failed: {err}"),
            }
        }
        if depth == 1 {
            latencies.push(t0.elapsed());
        }
        i += n as u64;
    }
    let modelled = node.clock_ns() - clock_before;
    let mut measurement = Measurement::new(name, bytes, depth, count, started.elapsed(), latencies);
    measurement.modelled_us_per_op = (modelled > 0).then(|| modelled as f64 / 1e3 / total as f64);
    Ok(measurement)
}

/// The transport's own limit: 8-byte round trips over a plain TCP connection
/// between the same two processes.
fn ping_pong(node: &Node, port: u16, count: u64) -> Result<Measurement> {
    let host =
        if node.size() == 1 || std::env::var_os(quiver_verbs::cluster::env::SPAWNED).is_some() {
            "127.0.0.1".to_owned()
        } else {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .unwrap_or_default()
                .trim()
                .to_owned()
        };
    let mut stream = TcpStream::connect((host.as_str(), port))
        .with_context(|| format!("connecting to the echo server at {host}:{port}"))?;
    stream.set_nodelay(true)?;
    // Polled like a completion queue, so that the baseline does not pay a
    // thread wake-up that the verbs path avoids.
    stream.set_nonblocking(true)?;
    let mut buf = [0u8; 8];
    let mut latencies = Vec::with_capacity(usize::try_from(count).unwrap_or(0));
    let warmup = (count / 10).min(1000);
    let mut started = Instant::now();
    for i in 0..warmup + count {
        if i == warmup {
            started = Instant::now();
            latencies.clear();
        }
        let t0 = Instant::now();
        stream.write_all(&i.to_le_bytes())?;
        let mut got = 0;
        while got < buf.len() {
            match stream.read(&mut buf[got..]) {
                Ok(0) => bail!("the echo server closed the connection"),
                Ok(n) => got += n,
                Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::yield_now()
                }
                Err(err) => return Err(err.into()),
            }
        }
        latencies.push(t0.elapsed());
    }
    Ok(Measurement::new(
        "tcp ping-pong",
        8,
        1,
        count,
        started.elapsed(),
        latencies,
    ))
}

fn serve_echo(listener: &TcpListener) -> Result<()> {
    listener.set_nonblocking(true)?;
    // Node 0 connects right after the barrier; a fabric other than tcp never does.
    let deadline = Instant::now() + Duration::from_secs(600);
    let mut stream = loop {
        match listener.accept() {
            Ok((stream, _)) => break stream,
            Err(err)
                if err.kind() == std::io::ErrorKind::WouldBlock && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(err) => return Err(err.into()),
        }
    };
    stream.set_nonblocking(false)?;
    stream.set_nodelay(true)?;
    let mut buf = [0u8; 8];
    while stream.read_exact(&mut buf).is_ok() {
        stream.write_all(&buf)?;
    }
    Ok(())
}

fn print_bench(report: &serde_json::Value) {
    println!(
        "fabric {}, {} nodes: node 0 -> node {}",
        report["fabric"].as_str().unwrap_or("?"),
        report["nodes"],
        report["target"]
    );
    println!(
        "{:<15} {:>7} {:>6} {:>12} {:>10} {:>9} {:>9} {:>12}",
        "op", "bytes", "depth", "ops/s", "MB/s", "p50 µs", "mean µs", "modelled µs"
    );
    for m in report["measurements"].as_array().into_iter().flatten() {
        let opt = |v: &serde_json::Value| {
            v.as_f64()
                .map_or_else(|| "-".to_owned(), |x| format!("{x:.2}"))
        };
        println!(
            "{:<15} {:>7} {:>6} {:>12.0} {:>10.1} {:>9} {:>9.2} {:>12}",
            m["op"].as_str().unwrap_or("?"),
            m["bytes"].as_u64().unwrap_or(0),
            m["depth"].as_u64().unwrap_or(0),
            m["ops_per_s"].as_f64().unwrap_or(0.0),
            m["mb_per_s"].as_f64().unwrap_or(0.0),
            opt(&m["p50_us"]),
            m["mean_us"].as_f64().unwrap_or(0.0),
            opt(&m["modelled_us_per_op"]),
        );
    }
    if let Some(ratio) = report["read_over_ping_pong"].as_f64() {
        println!("READ 8 B p50 / TCP ping-pong p50: {ratio:.2} (the transport's limit is 1.0)");
    }
    if let Some(ratio) = report["batch_over_depth_one"].as_f64() {
        println!("8-byte WRITE rate, posted batches of 32 / depth 1: {ratio:.1}x");
    }
}
