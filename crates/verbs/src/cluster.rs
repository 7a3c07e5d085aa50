//! Cluster bootstrap: who this node is ([`Launch`]), the rendezvous and
//! collectives hub ([`Coordinator`]), a node's line to it ([`Control`]), and
//! local jobs spawned by a driver ([`LocalJob`]).
//!
//! A job of N nodes has one coordinator: the driver when it spawns the nodes
//! itself on this machine, otherwise rank 0 (under `srun` or `mpirun`, or
//! with explicit `--rank/--size`), listening at the coordinator address.
//! Every node connects to it, says hello (rank, size, data address), and is
//! welcomed with every node's data address once all have arrived. The
//! coordinator then serves all-gathers (barriers and all-reduces are built
//! on them) and watches its connections: a node that exits or crashes
//! without saying goodbye, never arrives, or does not reach a collective in
//! time is reported to every other node as failed, by rank, and the job
//! fails instead of hanging.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::process::{Child, Command};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::NodeRank;

/// Environment variables a driver sets for the nodes it spawns (and that a
/// user may set by hand).
pub mod env {
    /// This node's rank.
    pub const RANK: &str = "QUIVER_RANK";
    /// Number of nodes.
    pub const SIZE: &str = "QUIVER_SIZE";
    /// The coordinator's `HOST:PORT`.
    pub const COORDINATOR: &str = "QUIVER_COORDINATOR";
    /// Set to `1` by a driver that runs the coordinator itself.
    pub const SPAWNED: &str = "QUIVER_SPAWNED";
    /// Failure-detection timeout in milliseconds.
    pub const TIMEOUT_MS: &str = "QUIVER_TIMEOUT_MS";
    /// The name of the task a spawned node runs ([`crate::job::serve`]).
    pub const TASK: &str = "QUIVER_TASK";
    /// The task's configuration, as JSON.
    pub const TASK_CONFIG: &str = "QUIVER_TASK_CONFIG";
}

/// Launcher variables read for rank and size, in order of precedence.
const RANK_VARS: [&str; 4] = [
    env::RANK,
    "SLURM_PROCID",
    "OMPI_COMM_WORLD_RANK",
    "PMI_RANK",
];
const SIZE_VARS: [&str; 4] = [
    env::SIZE,
    "SLURM_NTASKS",
    "OMPI_COMM_WORLD_SIZE",
    "PMI_SIZE",
];

/// Who this node is in which job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    /// This node's rank.
    pub rank: NodeRank,
    /// Number of nodes.
    pub size: u32,
    /// The coordinator's address, `HOST:PORT`.
    pub coordinator: String,
    /// Whether this node runs the coordinator (rank 0, unless a driver does).
    pub hosts_coordinator: bool,
    /// Failure detection: how long to wait for a node before declaring it failed.
    pub timeout: Duration,
}

impl Launch {
    /// Resolves rank, size and coordinator from explicit values (flags),
    /// else from the environment: ours (`QUIVER_RANK`, `QUIVER_SIZE`,
    /// `QUIVER_COORDINATOR`), then Slurm (`SLURM_PROCID`, `SLURM_NTASKS`),
    /// Open MPI (`OMPI_COMM_WORLD_RANK/SIZE`) and PMI (`PMI_RANK/PMI_SIZE`).
    ///
    /// # Errors
    /// [`Error::Bootstrap`] naming what is missing or inconsistent.
    pub fn resolve(
        rank: Option<u32>,
        size: Option<u32>,
        coordinator: Option<String>,
        timeout: Duration,
    ) -> Result<Launch> {
        Self::resolve_with(rank, size, coordinator, timeout, |name| {
            std::env::var(name).ok()
        })
    }

    /// As [`Launch::resolve`], reading variables through `var` (for tests).
    ///
    /// # Errors
    /// As [`Launch::resolve`].
    pub fn resolve_with(
        rank: Option<u32>,
        size: Option<u32>,
        coordinator: Option<String>,
        timeout: Duration,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Launch> {
        let from_env = |names: &[&str], what: &str| -> Result<Option<u32>> {
            for name in names {
                if let Some(value) = var(name) {
                    return value.trim().parse().map(Some).map_err(|_| {
                        Error::Bootstrap(format!("{name}={value:?} is not a valid {what}"))
                    });
                }
            }
            Ok(None)
        };
        let rank = match rank {
            Some(rank) => rank,
            None => from_env(&RANK_VARS, "rank")?.ok_or_else(|| {
                Error::Bootstrap(format!(
                    "no rank: pass --rank or run under a launcher that sets one of {}",
                    RANK_VARS.join(", ")
                ))
            })?,
        };
        let size = match size {
            Some(size) => size,
            None => from_env(&SIZE_VARS, "size")?.ok_or_else(|| {
                Error::Bootstrap(format!(
                    "no job size: pass --size or run under a launcher that sets one of {}",
                    SIZE_VARS.join(", ")
                ))
            })?,
        };
        if size == 0 {
            return Err(Error::Bootstrap(
                "a job needs at least one node (size 0)".into(),
            ));
        }
        if rank >= size {
            return Err(Error::Bootstrap(format!(
                "rank {rank} is out of range for a job of {size} nodes"
            )));
        }
        let coordinator = coordinator
            .or_else(|| var(env::COORDINATOR))
            .ok_or_else(|| {
                Error::Bootstrap(format!(
                    "no coordinator address: pass --coordinator HOST:PORT or set {} \
                 (rank 0 listens there; every node must be able to reach it)",
                    env::COORDINATOR
                ))
            })?;
        let spawned = var(env::SPAWNED).is_some_and(|v| v == "1");
        Ok(Launch {
            rank: NodeRank(rank),
            size,
            coordinator,
            hosts_coordinator: rank == 0 && !spawned,
            timeout,
        })
    }
}

fn resolve_addr(addr: &str) -> Result<SocketAddr> {
    addr.to_socket_addrs()
        .map_err(|err| Error::Bootstrap(format!("invalid coordinator address {addr:?}: {err}")))?
        .next()
        .ok_or_else(|| {
            Error::Bootstrap(format!("coordinator address {addr:?} resolves to nothing"))
        })
}

/// What a node tells the coordinator.
#[derive(Debug, Serialize, Deserialize)]
enum ToCoordinator {
    Hello {
        rank: u32,
        size: u32,
        data_addr: String,
        pid: u32,
    },
    Gather {
        data: Vec<u8>,
    },
    Report {
        report: String,
    },
    Bye,
}

/// What the coordinator tells a node.
#[derive(Debug, Serialize, Deserialize)]
enum ToNode {
    Welcome { peers: Vec<String> },
    Gathered { data: Vec<Vec<u8>> },
    Failed { node: u32, reason: String },
    Rejected { reason: String },
}

fn send_line<T: Serialize>(stream: &mut TcpStream, message: &T) -> std::io::Result<()> {
    let mut line = serde_json::to_vec(message).expect("control messages always serialize");
    line.push(b'\n');
    stream.write_all(&line)
}

fn read_line<T: for<'de> Deserialize<'de>>(
    reader: &mut BufReader<TcpStream>,
) -> std::io::Result<Option<T>> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    serde_json::from_str(&line).map(Some).map_err(|err| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("unreadable control message: {err}"),
        )
    })
}

/// The rendezvous and collectives hub of a job (see the module docs).
#[derive(Debug)]
pub struct Coordinator {
    addr: SocketAddr,
    thread: JoinHandle<Result<Vec<Option<String>>>>,
}

impl Coordinator {
    /// Listens at `bind` (`HOST:PORT`; port 0 picks one) for a job of `size`
    /// nodes and serves it in a background thread.
    ///
    /// # Errors
    /// [`Error::Io`] if the address cannot be bound.
    pub fn start(bind: &str, size: u32, timeout: Duration) -> Result<Coordinator> {
        let addr = resolve_addr(bind)?;
        let listener = TcpListener::bind(addr).map_err(|source| Error::Io {
            what: format!("cannot listen for the job's nodes at {bind}"),
            source,
        })?;
        let addr = listener.local_addr().map_err(|source| Error::Io {
            what: "reading the coordinator's address".into(),
            source,
        })?;
        let thread = std::thread::Builder::new()
            .name("coordinator".into())
            .spawn(move || serve(&listener, size, timeout))
            .map_err(|source| Error::Io {
                what: "starting the coordinator thread".into(),
                source,
            })?;
        Ok(Coordinator { addr, thread })
    }

    /// The address nodes connect to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Waits until every node said goodbye; returns their reports by rank
    /// (`None` for a node that sent none).
    ///
    /// # Errors
    /// The first failure the coordinator saw ([`Error::NodeFailed`],
    /// [`Error::Bootstrap`]).
    pub fn finish(self) -> Result<Vec<Option<String>>> {
        self.thread
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    }
}

enum Event {
    Message(u32, ToCoordinator),
    Lost(u32, String),
}

/// The coordinator's loop: rendezvous, then collectives and failure watch.
fn serve(listener: &TcpListener, size: u32, timeout: Duration) -> Result<Vec<Option<String>>> {
    let n = size as usize;
    let mut streams: Vec<Option<TcpStream>> = (0..n).map(|_| None).collect();
    let mut addrs = vec![String::new(); n];
    let (events, inbox) = mpsc::channel();
    listener
        .set_nonblocking(true)
        .map_err(|e| Error::io("configuring the coordinator socket", e))?;
    let deadline = Instant::now() + timeout;
    while streams.iter().any(Option::is_none) {
        match listener.accept() {
            Ok((stream, _)) => {
                if let Some((rank, addr)) = welcome_one(stream, size, &mut streams, timeout) {
                    addrs[rank] = addr;
                }
            }
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {
                if Instant::now() >= deadline {
                    let missing: Vec<usize> = (0..n).filter(|&r| streams[r].is_none()).collect();
                    let reason = format!(
                        "it never joined the job within {timeout:?} (missing nodes: {missing:?})"
                    );
                    broadcast(
                        &mut streams,
                        &ToNode::Failed {
                            node: rank_u32(missing[0]),
                            reason: reason.clone(),
                        },
                    );
                    return Err(Error::NodeFailed {
                        node: NodeRank(rank_u32(missing[0])),
                        reason,
                    });
                }
                std::thread::sleep(Duration::from_millis(2));
            }
            Err(err) => return Err(Error::io("accepting a node's connection", err)),
        }
    }
    for (rank, stream) in streams.iter().enumerate() {
        let stream = stream.as_ref().expect("every rank joined");
        let reader = stream
            .try_clone()
            .map_err(|e| Error::io("cloning a control connection", e))?;
        spawn_reader(rank_u32(rank), reader, events.clone());
    }
    drop(events);
    broadcast(&mut streams, &ToNode::Welcome { peers: addrs });
    hub(&mut streams, &inbox, timeout)
}

fn rank_u32(rank: usize) -> u32 {
    u32::try_from(rank).expect("ranks fit u32")
}

/// Reads one node's hello; rejects it (with a reason sent back) if it does
/// not fit the job.
fn welcome_one(
    mut stream: TcpStream,
    size: u32,
    streams: &mut [Option<TcpStream>],
    timeout: Duration,
) -> Option<(usize, String)> {
    stream.set_nonblocking(false).ok()?;
    stream.set_read_timeout(Some(timeout)).ok()?;
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let hello = read_line::<ToCoordinator>(&mut reader);
    stream.set_read_timeout(None).ok()?;
    let reject = |stream: &mut TcpStream, reason: String| {
        tracing::warn!("rejected a node: {reason}");
        let _ = send_line(stream, &ToNode::Rejected { reason });
        None
    };
    match hello {
        Ok(Some(ToCoordinator::Hello {
            rank,
            size: theirs,
            data_addr,
            pid,
        })) => {
            if theirs != size {
                return reject(&mut stream, format!("node {rank} (pid {pid}) believes the job has {theirs} nodes, the coordinator has {size}"));
            }
            if rank >= size {
                return reject(
                    &mut stream,
                    format!("rank {rank} is out of range for a job of {size} nodes"),
                );
            }
            let slot = &mut streams[rank as usize];
            if slot.is_some() {
                return reject(&mut stream, format!("two nodes claim rank {rank}"));
            }
            stream.set_nodelay(true).ok()?;
            // A stopped node must not stall the coordinator's broadcasts.
            stream.set_write_timeout(Some(timeout)).ok()?;
            *slot = Some(stream);
            Some((rank as usize, data_addr))
        }
        Ok(other) => reject(&mut stream, format!("expected a hello, got {other:?}")),
        Err(err) => reject(&mut stream, format!("unreadable hello: {err}")),
    }
}

fn spawn_reader(rank: u32, stream: TcpStream, events: Sender<Event>) {
    std::thread::Builder::new()
        .name(format!("control-{rank}"))
        .spawn(move || {
            let mut reader = BufReader::new(stream);
            loop {
                match read_line::<ToCoordinator>(&mut reader) {
                    Ok(Some(message)) => {
                        let bye = matches!(message, ToCoordinator::Bye);
                        if events.send(Event::Message(rank, message)).is_err() || bye {
                            return;
                        }
                    }
                    Ok(None) => {
                        let _ = events.send(Event::Lost(
                            rank,
                            "it exited or lost its connection to the coordinator".into(),
                        ));
                        return;
                    }
                    Err(err) => {
                        let _ = events.send(Event::Lost(
                            rank,
                            format!("its control connection failed: {err}"),
                        ));
                        return;
                    }
                }
            }
        })
        .expect("spawning a coordinator reader thread");
}

fn broadcast(streams: &mut [Option<TcpStream>], message: &ToNode) {
    for stream in streams.iter_mut().flatten() {
        // A node that cannot be told is failing itself; the others still are.
        let _ = send_line(stream, message);
    }
}

/// Serves collectives until every node said goodbye, or fails the job.
fn hub(
    streams: &mut [Option<TcpStream>],
    inbox: &Receiver<Event>,
    timeout: Duration,
) -> Result<Vec<Option<String>>> {
    let n = streams.len();
    let mut gathered: BTreeMap<u32, Vec<u8>> = BTreeMap::new();
    let mut round_started: Option<Instant> = None;
    let mut last_goodbye: Option<Instant> = None;
    let mut reports: Vec<Option<String>> = vec![None; n];
    let mut gone = vec![false; n];
    let fail = |streams: &mut [Option<TcpStream>], node: u32, reason: String| {
        tracing::error!("node {node} failed: {reason}");
        broadcast(
            streams,
            &ToNode::Failed {
                node,
                reason: reason.clone(),
            },
        );
        Err(Error::NodeFailed {
            node: NodeRank(node),
            reason,
        })
    };
    while gone.iter().any(|&g| !g) {
        // A collective in progress must complete within the timeout, and so
        // must the job once a node has left; nodes computing between
        // collectives may take as long as they need.
        let (wait, bounded) = match (round_started, last_goodbye) {
            (Some(start), _) => (
                (start + timeout).saturating_duration_since(Instant::now()),
                true,
            ),
            (None, Some(left)) => (
                (left + timeout).saturating_duration_since(Instant::now()),
                true,
            ),
            (None, None) => (Duration::from_secs(3600), false),
        };
        match inbox.recv_timeout(wait) {
            Ok(Event::Message(rank, ToCoordinator::Gather { data })) => {
                if let Some(left) = (0..n).find(|&r| gone[r]) {
                    return fail(
                        streams,
                        rank_u32(left),
                        "it left the job before a collective the others reached".into(),
                    );
                }
                gathered.insert(rank, data);
                round_started.get_or_insert_with(Instant::now);
                if gathered.len() == n {
                    let data = std::mem::take(&mut gathered).into_values().collect();
                    broadcast(streams, &ToNode::Gathered { data });
                    round_started = None;
                }
            }
            Ok(Event::Message(rank, ToCoordinator::Report { report })) => {
                reports[rank as usize] = Some(report)
            }
            Ok(Event::Message(rank, ToCoordinator::Bye)) => {
                gone[rank as usize] = true;
                last_goodbye = Some(Instant::now());
                streams[rank as usize] = None;
                if !gathered.is_empty() {
                    return fail(
                        streams,
                        rank,
                        "it left the job while others waited in a collective".into(),
                    );
                }
            }
            Ok(Event::Message(rank, ToCoordinator::Hello { .. })) => {
                return fail(streams, rank, "it said hello twice".into());
            }
            Ok(Event::Lost(rank, reason)) => {
                streams[rank as usize] = None;
                return fail(streams, rank, reason);
            }
            Err(RecvTimeoutError::Timeout) if !bounded => {}
            Err(RecvTimeoutError::Timeout) => {
                let late = (0..n)
                    .find(|&r| !gone[r] && !gathered.contains_key(&rank_u32(r)))
                    .map_or(0, rank_u32);
                let reason = if round_started.is_some() {
                    format!("it did not reach a collective within {timeout:?} of the first node")
                } else {
                    format!("it did not leave the job within {timeout:?} of another node")
                };
                return fail(streams, late, reason);
            }
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    Ok(reports)
}

/// A node's connection to its coordinator.
#[derive(Debug)]
pub struct Control {
    rank: NodeRank,
    size: u32,
    timeout: Duration,
    coordinator: String,
    writer: Mutex<TcpStream>,
    inbox: Mutex<Receiver<Inbound>>,
    peers: Vec<String>,
    /// The job's failure, once a collective has seen it.
    failure: Mutex<Option<JobFailure>>,
}

impl Control {
    /// Connects to the coordinator (retrying until the timeout, since it may
    /// start after us), says hello with our data address (the local IP that
    /// reaches the coordinator, and `data_port`), and waits for every
    /// node to arrive. `on_failure` is called (from a background thread)
    /// when the coordinator reports a node failed.
    ///
    /// # Errors
    /// [`Error::Bootstrap`] if the coordinator cannot be reached or rejects
    /// us; [`Error::NodeFailed`] if another node never arrives.
    pub fn join(
        launch: &Launch,
        data_port: u16,
        on_failure: impl Fn(NodeRank, &str) + Send + 'static,
    ) -> Result<Control> {
        let addr = resolve_addr(&launch.coordinator)?;
        let deadline = Instant::now() + launch.timeout;
        let mut stream = loop {
            match TcpStream::connect_timeout(&addr, Duration::from_secs(1)) {
                Ok(stream) => break stream,
                Err(err) if Instant::now() >= deadline => {
                    return Err(Error::Bootstrap(format!(
                        "could not reach the coordinator at {} within {:?}: {err}",
                        launch.coordinator, launch.timeout
                    )));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        let io = |what: &str| {
            let what = what.to_owned();
            move |source| Error::Io { what, source }
        };
        stream
            .set_nodelay(true)
            .map_err(io("configuring the control connection"))?;
        let local_ip = stream
            .local_addr()
            .map_err(io("reading the control connection's address"))?
            .ip();
        send_line(
            &mut stream,
            &ToCoordinator::Hello {
                rank: launch.rank.0,
                size: launch.size,
                data_addr: SocketAddr::new(local_ip, data_port).to_string(),
                pid: std::process::id(),
            },
        )
        .map_err(io("saying hello to the coordinator"))?;
        let mut reader = BufReader::new(
            stream
                .try_clone()
                .map_err(io("cloning the control connection"))?,
        );
        // Everyone must arrive within the timeout, plus slack for the
        // coordinator to report who did not.
        stream
            .set_read_timeout(Some(launch.timeout + Duration::from_secs(2)))
            .map_err(io("configuring the control connection"))?;
        let peers = match read_line::<ToNode>(&mut reader) {
            Ok(Some(ToNode::Welcome { peers })) => peers,
            Ok(Some(ToNode::Rejected { reason })) => {
                return Err(Error::Bootstrap(format!(
                    "the coordinator rejected node {}: {reason}",
                    launch.rank
                )))
            }
            Ok(Some(ToNode::Failed { node, reason })) => {
                return Err(Error::NodeFailed {
                    node: NodeRank(node),
                    reason,
                })
            }
            Ok(other) => {
                return Err(Error::Bootstrap(format!(
                    "unexpected answer to hello: {other:?}"
                )))
            }
            Err(err) => {
                return Err(Error::Bootstrap(format!(
                    "no answer from the coordinator at {}: {err}",
                    launch.coordinator
                )))
            }
        };
        stream
            .set_read_timeout(None)
            .map_err(io("configuring the control connection"))?;
        let (tx, inbox) = mpsc::channel();
        std::thread::Builder::new()
            .name("control".into())
            .spawn(move || control_reader(reader, &tx, &on_failure))
            .map_err(io("starting the control thread"))?;
        Ok(Control {
            rank: launch.rank,
            size: launch.size,
            timeout: launch.timeout,
            coordinator: launch.coordinator.clone(),
            writer: Mutex::new(stream),
            inbox: Mutex::new(inbox),
            peers,
            failure: Mutex::new(None),
        })
    }

    /// Every node's data address, by rank, as announced at hello.
    pub fn peers(&self) -> &[String] {
        &self.peers
    }

    fn send(&self, message: &ToCoordinator) -> Result<()> {
        let mut writer = self
            .writer
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        send_line(&mut writer, message).map_err(|err| Error::CoordinatorLost {
            coordinator: self.coordinator.clone(),
            reason: err.to_string(),
        })
    }

    /// All-gather through the coordinator.
    ///
    /// # Errors
    /// [`Error::NodeFailed`] naming the failed node, or [`Error::Timeout`].
    pub fn all_gather(&self, data: Vec<u8>) -> Result<Vec<Vec<u8>>> {
        let inbox = self
            .inbox
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        let mut failure = self
            .failure
            .lock()
            .unwrap_or_else(|poison| poison.into_inner());
        if let Some(err) = &*failure {
            // The job already failed; every later collective says why.
            return Err(err.again(&self.coordinator));
        }
        self.send(&ToCoordinator::Gather { data })?;
        // The coordinator times the round; our own limit only guards
        // against a coordinator that stopped answering.
        let limit = self.timeout * 2 + Duration::from_secs(5);
        let outcome = match inbox.recv_timeout(limit) {
            Ok(Inbound::Message(ToNode::Gathered { data })) if data.len() == self.size as usize => {
                return Ok(data)
            }
            Ok(Inbound::Message(ToNode::Gathered { data })) => Error::Bootstrap(format!(
                "all-gather returned {} contributions for {} nodes",
                data.len(),
                self.size
            )),
            Ok(Inbound::Message(ToNode::Failed { node, reason })) => Error::NodeFailed {
                node: NodeRank(node),
                reason,
            },
            Ok(Inbound::Message(other)) => {
                Error::Bootstrap(format!("unexpected control message {other:?}"))
            }
            Ok(Inbound::Lost(reason)) => Error::CoordinatorLost {
                coordinator: self.coordinator.clone(),
                reason,
            },
            Err(RecvTimeoutError::Disconnected) => Error::CoordinatorLost {
                coordinator: self.coordinator.clone(),
                reason: "its connection closed".into(),
            },
            Err(RecvTimeoutError::Timeout) => {
                return Err(Error::Timeout {
                    what: format!(
                        "for the coordinator to complete a collective (node {})",
                        self.rank
                    ),
                    after: limit,
                })
            }
        };
        *failure = Some(JobFailure::from(&outcome));
        Err(outcome)
    }

    /// Sends this node's report (collected by the driver of a local job).
    ///
    /// # Errors
    /// [`Error::CoordinatorLost`] if the coordinator is gone.
    pub fn report(&self, report: String) -> Result<()> {
        self.send(&ToCoordinator::Report { report })
    }

    /// Leaves the job cleanly.
    fn bye(&self) {
        // Leaving a job whose coordinator is gone needs no goodbye.
        let _ = self.send(&ToCoordinator::Bye);
    }
}

/// A node's membership of a job: its [`Control`], and the [`Coordinator`]
/// when this node hosts it. Dropping it leaves the job cleanly; a node that
/// hosts the coordinator then waits until every other node has left (or
/// failed), since the job's collectives run through it.
#[derive(Debug)]
pub struct Membership {
    control: Control,
    coordinator: Option<Coordinator>,
}

impl Membership {
    /// Hosts the coordinator if `launch` says so, then joins through
    /// [`Control::join`].
    ///
    /// # Errors
    /// As [`Coordinator::start`] and [`Control::join`].
    pub fn join(
        launch: &Launch,
        data_port: u16,
        on_failure: impl Fn(NodeRank, &str) + Send + 'static,
    ) -> Result<Membership> {
        let coordinator = if launch.hosts_coordinator {
            Some(Coordinator::start(
                &launch.coordinator,
                launch.size,
                launch.timeout,
            )?)
        } else {
            None
        };
        let control = Control::join(launch, data_port, on_failure)?;
        Ok(Membership {
            control,
            coordinator,
        })
    }

    /// The line to the coordinator.
    pub fn control(&self) -> &Control {
        &self.control
    }
}

impl Drop for Membership {
    fn drop(&mut self) {
        self.control.bye();
        if let Some(coordinator) = self.coordinator.take() {
            if let Err(err) = coordinator.finish() {
                tracing::error!("the job failed: {err}");
            }
        }
    }
}

/// Forwards the coordinator's messages; stops after a failure notice, or
/// with a `Lost` when the coordinator goes away.
fn control_reader(
    mut reader: BufReader<TcpStream>,
    tx: &Sender<Inbound>,
    on_failure: &dyn Fn(NodeRank, &str),
) {
    loop {
        let message = match read_line::<ToNode>(&mut reader) {
            Ok(Some(message)) => message,
            Ok(None) => {
                let _ = tx.send(Inbound::Lost("it closed the connection".into()));
                return;
            }
            Err(err) => {
                let _ = tx.send(Inbound::Lost(err.to_string()));
                return;
            }
        };
        let failed = match &message {
            ToNode::Failed { node, reason } => {
                on_failure(NodeRank(*node), reason);
                true
            }
            _ => false,
        };
        if tx.send(Inbound::Message(message)).is_err() || failed {
            return;
        }
    }
}

/// A failure of the job, kept so that every later collective reports it.
#[derive(Debug, Clone)]
enum JobFailure {
    /// A node failed.
    Node(NodeRank, String),
    /// The coordinator went away.
    Coordinator(String),
    /// Anything else (an unreadable answer).
    Other(String),
}

impl JobFailure {
    fn from(err: &Error) -> Self {
        match err {
            Error::NodeFailed { node, reason } => JobFailure::Node(*node, reason.clone()),
            Error::CoordinatorLost { reason, .. } => JobFailure::Coordinator(reason.clone()),
            other => JobFailure::Other(other.to_string()),
        }
    }

    /// The error again, for a job whose coordinator is at `coordinator`.
    fn again(&self, coordinator: &str) -> Error {
        match self {
            JobFailure::Node(node, reason) => Error::NodeFailed {
                node: *node,
                reason: reason.clone(),
            },
            JobFailure::Coordinator(reason) => Error::CoordinatorLost {
                coordinator: coordinator.to_owned(),
                reason: reason.clone(),
            },
            JobFailure::Other(reason) => Error::Bootstrap(reason.clone()),
        }
    }
}

/// What the control thread hands to collectives.
#[derive(Debug)]
enum Inbound {
    Message(ToNode),
    Lost(String),
}

/// Nodes spawned on this machine by a driver, with the coordinator it runs.
/// Dropping the job kills any node still running; nodes also die with the
/// driver process (they are spawned with a parent-death signal).
#[derive(Debug)]
pub struct LocalJob {
    coordinator: Option<Coordinator>,
    children: Vec<Child>,
    timeout: Duration,
}

impl LocalJob {
    /// Starts a coordinator on 127.0.0.1 and `size` node processes, each
    /// built by `command(rank)` and given its rank, the size and the
    /// coordinator address through the variables of [`self::env`].
    ///
    /// # Errors
    /// [`Error::Io`] if a process cannot be started.
    pub fn spawn(
        size: u32,
        timeout: Duration,
        mut command: impl FnMut(NodeRank) -> Command,
    ) -> Result<LocalJob> {
        let coordinator = Coordinator::start("127.0.0.1:0", size, timeout)?;
        let mut job = LocalJob {
            coordinator: None,
            children: Vec::new(),
            timeout,
        };
        for rank in 0..size {
            let mut cmd = command(NodeRank(rank));
            cmd.env(env::RANK, rank.to_string())
                .env(env::SIZE, size.to_string())
                .env(env::COORDINATOR, coordinator.addr().to_string())
                .env(env::SPAWNED, "1")
                .env(env::TIMEOUT_MS, timeout.as_millis().to_string());
            die_with_parent(&mut cmd);
            let child = cmd.spawn().map_err(|source| Error::Io {
                what: format!("starting node {rank}: {cmd:?}"),
                source,
            })?;
            job.children.push(child);
        }
        job.coordinator = Some(coordinator);
        Ok(job)
    }

    /// The nodes' process ids, by rank.
    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().map(Child::id).collect()
    }

    /// Waits for the job: every node's report by rank, once all said
    /// goodbye and exited successfully.
    ///
    /// # Errors
    /// The coordinator's error naming the failed node, or a node that
    /// exited unsuccessfully.
    pub fn wait(mut self) -> Result<Vec<Option<String>>> {
        let coordinator = self.coordinator.take().expect("spawn sets the coordinator");
        let outcome = coordinator.finish();
        // Whatever happened, every node gets a bounded time to exit.
        let deadline = Instant::now()
            + if outcome.is_ok() {
                self.timeout
            } else {
                Duration::from_secs(5)
            };
        let mut statuses = Vec::new();
        for (rank, child) in self.children.iter_mut().enumerate() {
            let status = loop {
                match child.try_wait() {
                    Ok(Some(status)) => break Some(status),
                    Ok(None) if Instant::now() < deadline => {
                        std::thread::sleep(Duration::from_millis(10))
                    }
                    _ => {
                        let _ = child.kill();
                        let _ = child.wait();
                        break None;
                    }
                }
            };
            statuses.push((rank, status));
        }
        let reports = outcome?;
        for (rank, status) in statuses {
            match status {
                Some(status) if status.success() => {}
                Some(status) => {
                    return Err(Error::NodeFailed {
                        node: NodeRank(rank_u32(rank)),
                        reason: format!("it exited with {status}"),
                    })
                }
                None => {
                    return Err(Error::NodeFailed {
                        node: NodeRank(rank_u32(rank)),
                        reason: format!(
                            "it did not exit within {:?} of the job's end and was killed",
                            self.timeout
                        ),
                    })
                }
            }
        }
        Ok(reports)
    }
}

impl Drop for LocalJob {
    fn drop(&mut self) {
        for child in &mut self.children {
            if let Ok(None) = child.try_wait() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// Makes the child receive SIGKILL when its parent dies, so nodes never
/// outlive their driver even if it is killed. Linux sends the signal when
/// the *thread* that spawned the child exits, so [`LocalJob::spawn`] must be
/// called from a thread that outlives the job (the driver's main thread).
fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    let parent = std::process::id();
    // SAFETY: the closure runs in the forked child before exec and only
    // calls async-signal-safe functions (prctl, getppid, _exit), touching no
    // locks or allocations.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            // The parent may have died between fork and prctl.
            if u32::try_from(libc::getppid()).ok() != Some(parent) {
                libc::_exit(1);
            }
            Ok(())
        });
    }
}
