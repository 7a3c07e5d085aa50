//! A node's side of the bootstrap: its line to the coordinator
//! ([`Control`]) and its membership of a job ([`Membership`]).

use std::io::BufReader;
use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::{read_line, resolve_addr, send_line, Coordinator, Launch, ToCoordinator, ToNode};
use crate::error::{Error, Result};
use crate::NodeRank;

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
