//! The coordinator: the rendezvous, the all-gathers every collective is
//! built on, and failure detection, in one thread that serves a job.

use std::collections::BTreeMap;
use std::io::BufReader;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::{rank_u32, read_line, resolve_addr, send_line, ToCoordinator, ToNode};
use crate::error::{Error, Result};
use crate::NodeRank;

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

/// How long a node leaving mid-collective waits for another's loss to be
/// reported, so that the job names the node that died.
const LOSS_GRACE: Duration = Duration::from_secs(1);

/// The first node reported lost within `grace`, skipping other events.
fn lost_soon(inbox: &Receiver<Event>, grace: Duration) -> Option<(u32, String)> {
    let until = Instant::now() + grace;
    loop {
        match inbox.recv_timeout(until.saturating_duration_since(Instant::now())) {
            Ok(Event::Lost(rank, reason)) => return Some((rank, reason)),
            Ok(Event::Message(..)) => {}
            Err(_) => return None,
        }
    }
}

/// Serves collectives until every node said goodbye or was lost. A lost
/// node fails the job: the others are told at once (their operations on it
/// and their collectives fail), and the hub goes on until they have left,
/// so a node serving requests keeps serving what does not need the lost
/// one; the job's result is then that first failure. Any other failure (a
/// node leaving mid-collective, a collective or a departure over time)
/// ends the job at once.
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
    let mut lost: Option<Error> = None;
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
            // The others were told of the loss; they leave as they notice.
            Ok(Event::Message(_, ToCoordinator::Gather { .. })) if lost.is_some() => {}
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
                    // A node leaves mid-collective most often because its
                    // task failed on another node's death, which its data
                    // connections saw first: name the node that died if
                    // its loss arrives within a moment.
                    if let Some((lost, reason)) = lost_soon(inbox, timeout.min(LOSS_GRACE)) {
                        streams[lost as usize] = None;
                        return fail(streams, lost, reason);
                    }
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
                gone[rank as usize] = true;
                if lost.is_none() {
                    lost = fail(streams, rank, reason).err();
                    gathered.clear();
                    round_started = None;
                }
            }
            Err(RecvTimeoutError::Timeout) if !bounded => {}
            // Survivors slow to leave after a loss: the loss is the cause.
            Err(RecvTimeoutError::Timeout) if lost.is_some() => break,
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
    match lost {
        Some(failure) => Err(failure),
        None => Ok(reports),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hub's verdict on `events`, with `n` nodes and no streams.
    fn verdict(n: usize, events: Vec<Event>) -> Result<Vec<Option<String>>> {
        let (send, inbox) = mpsc::channel();
        for event in events {
            send.send(event).unwrap();
        }
        drop(send);
        let mut streams: Vec<Option<TcpStream>> = (0..n).map(|_| None).collect();
        hub(&mut streams, &inbox, Duration::from_secs(5))
    }

    fn blamed(result: Result<Vec<Option<String>>>) -> u32 {
        match result {
            Err(Error::NodeFailed { node, .. }) => node.0,
            other => panic!("expected a failed node, got {other:?}"),
        }
    }

    #[test]
    fn a_node_that_leaves_because_another_died_does_not_take_the_blame() {
        // Node 1 waits in a collective; node 0 leaves (its task saw node 1
        // die); then node 1's connection is reported lost.
        let events = vec![
            Event::Message(1, ToCoordinator::Gather { data: vec![1] }),
            Event::Message(0, ToCoordinator::Bye),
            Event::Lost(
                1,
                "it exited or lost its connection to the coordinator".into(),
            ),
        ];
        assert_eq!(blamed(verdict(2, events)), 1);
        // With no loss reported, the node that left is the one named.
        let events = vec![
            Event::Message(1, ToCoordinator::Gather { data: vec![1] }),
            Event::Message(0, ToCoordinator::Bye),
        ];
        assert_eq!(blamed(verdict(2, events)), 0);
    }

    #[test]
    fn the_survivors_of_a_lost_node_run_until_they_leave() {
        let (send, inbox) = mpsc::channel();
        let hub = std::thread::spawn(move || {
            let mut streams: Vec<Option<TcpStream>> = (0..3).map(|_| None).collect();
            hub(&mut streams, &inbox, Duration::from_secs(5))
        });
        send.send(Event::Lost(2, "it exited".into())).unwrap();
        // A survivor's collective fails on its own (it was told); the hub
        // waits for it.
        send.send(Event::Message(0, ToCoordinator::Gather { data: vec![0] }))
            .unwrap();
        std::thread::sleep(Duration::from_millis(300));
        assert!(!hub.is_finished(), "the survivors are still running");
        send.send(Event::Message(0, ToCoordinator::Bye)).unwrap();
        send.send(Event::Message(1, ToCoordinator::Bye)).unwrap();
        assert_eq!(blamed(hub.join().unwrap()), 2);
    }
}
