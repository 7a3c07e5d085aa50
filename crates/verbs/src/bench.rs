//! The verbs benchmark, as `ib_read_lat`/`ib_write_bw` measure a NIC: READ
//! and CAS latency and WRITE bandwidth from node 0 to node 1, at depth 1
//! and in posted batches, beside a plain TCP ping-pong between the same two
//! processes (the transport's own limit, on the tcp fabric).
//!
//! Every node of a job runs [`measure`] (or the job task [`Bench`]); node 0
//! measures, node 1 is the target and serves the ping-pong, any other node
//! only takes part in the collectives. Timings are what this run observed,
//! never asserted; the loopback cost model adds a modelled time per
//! operation that is deterministic.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::job::Task;
use crate::{Node, NodeRank, Op, Output, Queue, WorkRequest};

/// Bytes of the target region per WRITE slot; batched WRITEs go to distinct slots.
const SLOT: usize = 64 << 10;

/// How long the target's echo server waits for node 0 to connect.
const ECHO_ACCEPT_LIMIT: Duration = Duration::from_secs(600);

/// What one benchmark run measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Config {
    /// Operations per 8-byte measurement (fewer for larger transfers).
    pub ops: u64,
}

impl Default for Config {
    fn default() -> Self {
        Self { ops: 20_000 }
    }
}

/// One measured operation kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// The operation (`read`, `cas`, `write`, `tcp ping-pong`).
    pub op: String,
    /// Bytes per operation.
    pub bytes: usize,
    /// Operations posted per batch (1: one at a time).
    pub depth: usize,
    /// Operations timed (after a warm-up).
    pub ops: u64,
    /// Operations per second of wall time.
    pub ops_per_s: f64,
    /// Payload megabytes (10^6 bytes) per second.
    pub mb_per_s: f64,
    /// Median latency of one operation at depth 1, in microseconds.
    pub p50_us: Option<f64>,
    /// Mean time from posting a batch to its last completion, per batch, in
    /// microseconds (at depth 1: the mean latency).
    pub mean_us: f64,
    /// Modelled time per operation on the node's virtual clock (loopback
    /// with a cost model only), in microseconds.
    pub modelled_us_per_op: Option<f64>,
}

impl Measurement {
    /// `count` operations of `bytes` at `depth` that took `elapsed`, with
    /// the per-operation `latencies` timed at depth 1 (empty otherwise).
    pub fn new(
        op: &str,
        bytes: usize,
        depth: usize,
        count: u64,
        elapsed: Duration,
        mut latencies: Vec<Duration>,
    ) -> Self {
        let secs = elapsed.as_secs_f64();
        Measurement {
            op: op.to_owned(),
            bytes,
            depth,
            ops: count,
            ops_per_s: count as f64 / secs,
            mb_per_s: count as f64 * bytes as f64 / secs / 1e6,
            p50_us: percentile(&mut latencies, 0.5).map(|d| d.as_secs_f64() * 1e6),
            mean_us: secs * 1e6 / count as f64 * depth as f64,
            modelled_us_per_op: None,
        }
    }
}

/// The `q` quantile (0 to 1) of `samples` by the nearest-rank rule on the
/// sorted samples (sorts them); `None` for no samples.
pub fn percentile(samples: &mut [Duration], q: f64) -> Option<Duration> {
    samples.sort_unstable();
    let last = samples.len().checked_sub(1)?;
    // The product lies in 0..=len, so the cast cannot truncate a real index.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let index = ((samples.len() as f64 * q.clamp(0.0, 1.0)) as usize).min(last);
    Some(samples[index])
}

/// What a benchmark run found, the same on every node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The fabric's name.
    pub fabric: String,
    /// Nodes in the job.
    pub nodes: u32,
    /// The node measured against (1, or 0 in a job of one).
    pub target: u32,
    /// Every measurement, in the order taken (empty on nodes other than 0).
    pub measurements: Vec<Measurement>,
    /// READ 8 B p50 over TCP ping-pong p50 (tcp fabric: the transport's limit).
    pub read_over_ping_pong: Option<f64>,
    /// Posted batches of 32 8-byte WRITEs over depth 1, in operations per second.
    pub batch_over_depth_one: Option<f64>,
}

/// The benchmark as a job task (`verbs-bench`): every node runs [`measure`].
#[derive(Debug, Clone, Copy)]
pub struct Bench;

impl Task for Bench {
    const NAME: &'static str = "verbs-bench";
    type Config = Config;
    type Report = Report;
    type Error = Error;

    fn run(node: &Node, config: &Config) -> Result<Report> {
        measure(node, config.ops)
    }
}

/// Runs the measurements from node 0 to node 1 (itself in a job of one);
/// the other nodes serve. Every node of the job must call it; node 0's
/// report holds the measurements.
///
/// # Errors
/// A failed collective or registration, a verb that completes with an
/// error, or a failed ping-pong connection.
pub fn measure(node: &Node, ops: u64) -> Result<Report> {
    let region = node.register(SLOT * 33)?;
    let remotes = node.exchange(&region)?;
    let target = remotes[1 % remotes.len()];
    let echo = (node.rank() == target.node && node.fabric() == "tcp")
        .then(|| TcpListener::bind("0.0.0.0:0"))
        .transpose()
        .map_err(|e| Error::io("listening for the ping-pong connection", e))?;
    let echo_port = echo
        .as_ref()
        .map_or(Ok(0), |l| l.local_addr().map(|a| a.port()))
        .map_err(|e| Error::io("reading the ping-pong listener's address", e))?;
    let ports = node.all_gather(&echo_port.to_le_bytes())?;
    let port = ports[target.node.index()]
        .get(..2)
        .and_then(|bytes| bytes.try_into().ok())
        .map(u16::from_le_bytes)
        .ok_or_else(|| Error::Bootstrap(format!("node {} sent no ping-pong port", target.node)))?;
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
                    write(slot(i, depth), bytes, buffer)
                })?;
            }
        }
        if port != 0 {
            measurements.push(ping_pong(node, port, small)?);
        }
    }
    node.barrier()?;
    if let Some(server) = server {
        server
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
            .map_err(|e| Error::io("serving the ping-pong", e))?;
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
    Ok(Report {
        fabric: node.fabric().to_owned(),
        nodes: node.size(),
        target: target.node.0,
        measurements,
        read_over_ping_pong,
        batch_over_depth_one,
    })
}

/// Writes at depth > 1 go to distinct slots so that they overlap like real traffic.
fn slot(i: u64, depth: usize) -> u64 {
    (i % depth as u64) * SLOT as u64
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
        let n = usize::try_from(n).expect("a batch of at most `depth` fits usize");
        queue.wait(&mut done, n, n)?;
        for completion in done.drain(..) {
            if let Output::Written(buffer) = completion.output()? {
                spare.push(buffer);
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
    let host = if node.size() == 1 || std::env::var_os(crate::cluster::env::SPAWNED).is_some() {
        "127.0.0.1".to_owned()
    } else {
        std::fs::read_to_string("/proc/sys/kernel/hostname")
            .unwrap_or_default()
            .trim()
            .to_owned()
    };
    let io = |what: &str| {
        let what = format!("{what} (ping-pong with {host}:{port})");
        move |source| Error::Io { what, source }
    };
    let mut stream =
        TcpStream::connect((host.as_str(), port)).map_err(io("connecting to the echo server"))?;
    stream
        .set_nodelay(true)
        .map_err(io("configuring the socket"))?;
    // Polled like a completion queue, so that the baseline does not pay a
    // thread wake-up that the verbs path avoids.
    stream
        .set_nonblocking(true)
        .map_err(io("configuring the socket"))?;
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
        stream
            .write_all(&i.to_le_bytes())
            .map_err(io("sending a ping"))?;
        let mut got = 0;
        while got < buf.len() {
            match stream.read(&mut buf[got..]) {
                Ok(0) => {
                    return Err(io("reading a pong")(std::io::Error::from(
                        std::io::ErrorKind::UnexpectedEof,
                    )))
                }
                Ok(n) => got += n,
                Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {
                    std::thread::yield_now()
                }
                Err(err) => return Err(io("reading a pong")(err)),
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

/// Echoes 8-byte pings until node 0 hangs up.
fn serve_echo(listener: &TcpListener) -> std::io::Result<()> {
    listener.set_nonblocking(true)?;
    // Node 0 connects right after the barrier; a fabric other than tcp never does.
    let deadline = Instant::now() + ECHO_ACCEPT_LIMIT;
    let mut stream = loop {
        match listener.accept() {
            Ok((stream, _)) => break stream,
            Err(err)
                if err.kind() == std::io::ErrorKind::WouldBlock && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(err) => return Err(err),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_take_the_nearest_rank() {
        let ms = |n: u64| Duration::from_millis(n);
        let mut samples: Vec<Duration> = [5, 1, 4, 2, 3].map(ms).to_vec();
        assert_eq!(percentile(&mut samples, 0.5), Some(ms(3)));
        assert_eq!(percentile(&mut samples, 0.0), Some(ms(1)));
        assert_eq!(percentile(&mut samples, 1.0), Some(ms(5)));
        assert_eq!(percentile(&mut [], 0.5), None);
    }

    #[test]
    fn a_measurement_derives_its_rates() {
        let m = Measurement::new(
            "write",
            4096,
            32,
            1000,
            Duration::from_millis(10),
            Vec::new(),
        );
        assert!((m.ops_per_s - 100_000.0).abs() < 1e-6, "{m:?}");
        assert!((m.mb_per_s - 409.6).abs() < 1e-6, "{m:?}");
        assert!((m.mean_us - 320.0).abs() < 1e-6, "{m:?}");
        assert_eq!(m.p50_us, None);
    }
}
