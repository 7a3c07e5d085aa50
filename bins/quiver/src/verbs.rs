//! `quiver verbs`: check and measure the RDMA verbs fabrics on this machine
//! or on a cluster, the way `ib_read_lat`/`ib_write_bw` check a NIC.

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use quiver_verbs::bench::{self, Bench};
use quiver_verbs::conformance::{NodeReport, Suite};

use crate::job::{JobArgs, LOCAL_NODES};

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

#[derive(Debug, Args, Clone)]
pub struct BenchArgs {
    #[command(flatten)]
    pub job: JobArgs,
    /// Operations per 8-byte measurement (fewer for larger transfers).
    #[arg(long, default_value_t = bench::Config::default().ops)]
    pub ops: u64,
}

/// `quiver verbs ...` as typed by the user. Only rank 0 of a job prints.
pub fn verbs(command: VerbsCommand, json: bool) -> Result<()> {
    match command {
        VerbsCommand::Check(args) => match args.job(LOCAL_NODES)?.run::<Suite>(&())? {
            Some(reports) => print_check(&reports, json),
            None => Ok(()),
        },
        VerbsCommand::Bench(args) => {
            let config = bench::Config { ops: args.ops };
            match args.job.job(LOCAL_NODES)?.run::<Bench>(&config)? {
                Some(reports) => print_bench(&reports[0], json),
                None => Ok(()),
            }
        }
    }
}

fn print_check(reports: &[NodeReport], json: bool) -> Result<()> {
    let failed: Vec<String> = reports
        .iter()
        .flat_map(|r| r.checks.iter().map(move |c| (r, c)))
        .filter(|(_, c)| !c.passed || !c.detail.is_empty())
        .map(|(r, c)| format!("node {}: {:?} {:?}", r.rank, c.check, c.detail))
        .collect();
    if json {
        println!(
            "{}",
            serde_json::json!({ "nodes": reports, "passed": failed.is_empty() })
        );
    } else {
        println!(
            "{} nodes, {} checks each",
            reports.len(),
            reports[0].checks.len()
        );
        for check in &reports[0].checks {
            let verdict = if check.passed { "ok" } else { "FAILED" };
            println!("  {:<14} {verdict}", check.check);
        }
        for line in &failed {
            println!("  {line}");
        }
    }
    if !failed.is_empty() {
        bail!("{} of the job's checks failed", failed.len());
    }
    Ok(())
}

fn print_bench(report: &bench::Report, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_value(report)?);
        return Ok(());
    }
    println!(
        "fabric {}, {} nodes: node 0 -> node {}",
        report.fabric, report.nodes, report.target
    );
    println!(
        "{:<15} {:>7} {:>6} {:>12} {:>10} {:>9} {:>9} {:>12}",
        "op", "bytes", "depth", "ops/s", "MB/s", "p50 µs", "mean µs", "modelled µs"
    );
    let opt = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |x| format!("{x:.2}"));
    for m in &report.measurements {
        println!(
            "{:<15} {:>7} {:>6} {:>12.0} {:>10.1} {:>9} {:>9.2} {:>12}",
            m.op,
            m.bytes,
            m.depth,
            m.ops_per_s,
            m.mb_per_s,
            opt(m.p50_us),
            m.mean_us,
            opt(m.modelled_us_per_op),
        );
    }
    if let Some(ratio) = report.read_over_ping_pong {
        println!("READ 8 B p50 / TCP ping-pong p50: {ratio:.2} (the transport's limit is 1.0)");
    }
    if let Some(ratio) = report.batch_over_depth_one {
        println!("8-byte WRITE rate, posted batches of 32 / depth 1: {ratio:.1}x");
    }
    Ok(())
}
