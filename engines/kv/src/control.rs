//! A running store a person can poke at: every node of a serve job listens
//! on a TCP address of its own and answers [`Request`]s, one JSON line
//! each, with one JSON [`Response`] line; [`Client`] is the other end (the
//! driver's `quiver kv get|put|traverse|move|stop`).
//!
//! A request runs on the node that received it, through a session of its
//! own, exactly as a benchmark worker's operation would: a Get on a node
//! other than the key's home looks the key up and reads the value with
//! one-sided operations, a Put is forwarded to the home (and on to the
//! value's holder), a traversal runs on the node it was sent to, and a move
//! migrates the value to the node it was sent to with the unilateral
//! protocol. Each answer says what it cost: one-sided operations, modelled
//! and wall time. Routing is the nodes' own: a [`Request::Routed`]
//! request runs on the node it names or, by default, on the home of its
//! vertex, and the node that receives it answers it there or relays it,
//! so a client talks to one node over one connection
//! ([`Client::call_on`]). Every node answers [`Request::Info`] with every
//! node's address; [`Request::Stop`] sent to any
//! node stops every node (node 0 tells the others to halt, or the node
//! asked, when node 0 is gone).
//!
//! Requests and answers name vertices as the graph does: by the dataset's
//! own ids where the graph has an id map, by their dense index otherwise.
//! A node translates them to the store's dense keys and back; a vertex the
//! graph lacks is refused ([`Response::Refused`]), which [`Client::call`]
//! returns as an [`Error::InvalidArgument`] naming the request's
//! parameter.
//!
//! No policy runs in a serve job: values move only when asked to.

use std::collections::HashSet;
use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use quiver_csr::Graph;
use quiver_run::InvalidArgument;
use quiver_verbs::job::{Job, Nodes, Task};
use quiver_verbs::{BoxError, Node};
use serde::{Deserialize, Serialize};

use crate::store::{Session, Tally};
use crate::{Clock, Error, Result, Store, StoreConfig, Update};

/// What a client asks a node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Request {
    /// The job's shape and every node's address.
    Info,
    /// The node that is `key`'s home.
    Home {
        /// The vertex.
        key: u64,
    },
    /// The first `limit` neighbours of `key`.
    Get {
        /// The vertex.
        key: u64,
        /// Neighbours wanted at most.
        limit: u64,
    },
    /// Appends the edge `key -> target` to `key`'s list.
    Put {
        /// The vertex whose list grows.
        key: u64,
        /// The new neighbour.
        target: u64,
        /// The edge's weight, in a weighted graph (1 if not given).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        weight: Option<f32>,
    },
    /// The benchmark's two-hop query: the first `neighbours` neighbours of
    /// `start`, then the first `neighbours` of each.
    Traverse {
        /// The start vertex.
        start: u64,
        /// Neighbours read per hop.
        neighbours: u64,
    },
    /// Migrates `key`'s value to the node asked.
    Move {
        /// The vertex.
        key: u64,
    },
    /// Runs `request` (a Get, Put, traversal or move) on node `on`, or
    /// with none on the home of the vertex it names: the node that
    /// receives it runs it if it is that node, or relays it there and
    /// passes the answer back.
    Routed {
        /// The node that runs it (default: the vertex's home).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        on: Option<u32>,
        /// What to run.
        request: Box<Request>,
    },
    /// Stops every node of the job.
    Stop,
    /// Stops this node (node 0 sends it to the others on a stop).
    Halt,
}

/// A node's answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Response {
    /// The job.
    Info(Info),
    /// A key's home node.
    Home(u32),
    /// A Get's neighbours.
    Get(GetReply),
    /// A Put done.
    Put(Placed),
    /// A traversal's counts.
    Traverse(TraverseReply),
    /// A move done.
    Move(Placed),
    /// The node is stopping.
    Stopped,
    /// The request failed; the store's message.
    Error(String),
    /// The request's argument makes no sense (a vertex the graph lacks).
    Refused {
        /// The request's parameter (`vertex`, `target`, `start`, ...).
        parameter: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// The job a serve node belongs to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Info {
    /// Nodes of the job.
    pub nodes: u32,
    /// Vertices of the graph.
    pub vertices: u32,
    /// Every node's control address, by rank.
    pub addresses: Vec<String>,
}

/// What a request cost the node that ran it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Cost {
    /// The node that ran it.
    pub node: u32,
    /// One-sided operations it posted.
    pub one_sided: u64,
    /// Its modelled time.
    pub modelled_ns: u64,
    /// Its wall time.
    pub wall_ns: u64,
}

/// Where a key's value is: its home and its holder.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Placed {
    /// The vertex.
    pub key: u64,
    /// Its home node (where its key lives).
    pub home: u32,
    /// The node holding its value, after the request.
    pub holder: u32,
    /// What the request cost.
    pub cost: Cost,
}

/// A Get's answer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GetReply {
    /// The neighbours read.
    pub neighbours: Vec<u64>,
    /// Their edges' weights, in a weighted graph.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights: Option<Vec<f32>>,
    /// Where the value is.
    pub placed: Placed,
}

/// A traversal's answer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TraverseReply {
    /// Neighbours of the start read (the first hop).
    pub first_hop: u64,
    /// Neighbours read in the second hop, over all first-hop vertices.
    pub second_hop: u64,
    /// Distinct vertices reached in the second hop.
    pub distinct: u64,
    /// Gets issued.
    pub gets: u64,
    /// Gets that needed a remote operation.
    pub remote_gets: u64,
    /// What the traversal cost.
    pub cost: Cost,
}

/// Longest request line a node reads.
const MAX_LINE: u64 = 1 << 16;

/// How often a node looks for a stop while no client talks to it.
const POLL: Duration = Duration::from_millis(50);

/// Serves requests on `listener` until stopped (see the module docs);
/// also runs the node's server of forwarded Puts and reclaims replaced
/// blocks as their lease runs out. Every node of the job calls it. Returns
/// the requests this node answered. `graph`, the graph the store was
/// loaded from, names the vertices of requests and answers.
///
/// # Errors
/// Verbs errors, the store's server's errors, and I/O errors of the
/// listener.
pub fn serve(store: &Store, graph: &Graph, listener: &TcpListener) -> Result<u64> {
    let node = store.node();
    let address = listener.local_addr().map_err(io_error)?.to_string();
    let gathered = node.all_gather(address.as_bytes()).map_err(Error::Verbs)?;
    let info = Info {
        nodes: node.size(),
        vertices: store.vertices(),
        addresses: gathered
            .iter()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .collect(),
    };
    listener.set_nonblocking(true).map_err(io_error)?;
    let stop = AtomicBool::new(false);
    let answered = AtomicU64::new(0);
    std::thread::scope(|scope| -> Result<u64> {
        let server = scope.spawn(|| store.serve());
        scope.spawn(|| {
            while !stop.load(Ordering::Relaxed) {
                store.reclaim();
                std::thread::sleep(POLL);
            }
        });
        let mut conversations = Vec::new();
        let accepted = loop {
            if stop.load(Ordering::Relaxed) {
                break Ok(());
            }
            match listener.accept() {
                Ok((stream, _)) => {
                    let (info, stop, answered) = (&info, &stop, &answered);
                    conversations.push(
                        scope.spawn(move || converse(store, graph, info, stream, stop, answered)),
                    );
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => std::thread::sleep(POLL),
                Err(e) => break Err(io_error(e)),
            }
        };
        stop.store(true, Ordering::Relaxed);
        // Every request here is done (each conversation sees the stop
        // within a poll) before this node meets the others to stop.
        for conversation in conversations {
            conversation.join().expect("a conversation panicked");
        }
        // No node stops serving forwarded Puts while another may send one.
        let synced = node.barrier().map_err(Error::Verbs);
        let stopped = store.session().stop_server();
        server.join().expect("the server panicked")?;
        accepted?;
        synced?;
        stopped?;
        Ok(answered.load(Ordering::Relaxed))
    })
}

fn io_error(e: std::io::Error) -> Error {
    Error::Control(e.to_string())
}

/// One client's connection: requests until it hangs up or the node stops.
fn converse(
    store: &Store,
    graph: &Graph,
    info: &Info,
    stream: TcpStream,
    stop: &AtomicBool,
    answered: &AtomicU64,
) {
    let mut session = store.session();
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    if stream.set_nonblocking(false).is_err() || stream.set_read_timeout(Some(POLL)).is_err() {
        return;
    }
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    while !stop.load(Ordering::Relaxed) {
        // A line (partial ones are kept across timeouts) of at most MAX_LINE.
        let room = MAX_LINE.saturating_sub(line.len() as u64);
        let read = (&mut reader).take(room).read_line(&mut line);
        if !line.ends_with('\n') && line.len() as u64 >= MAX_LINE {
            let _ = reply(
                &mut writer,
                &Response::Error("request line too long".into()),
            );
            return;
        }
        match read {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
            Err(_) => return,
        }
        let response = match serde_json::from_str::<Request>(line.trim()) {
            Ok(Request::Stop) if store.rank() != 0 => {
                // Node 0 halts every node, this one included; if node 0 is
                // gone, this node halts the others and itself.
                match Client::connect(&info.addresses[0]).and_then(|mut c| c.call(&Request::Stop)) {
                    Ok(response) => response,
                    Err(_) => {
                        halt_others(info, store.rank());
                        stop.store(true, Ordering::Relaxed);
                        Response::Stopped
                    }
                }
            }
            Ok(Request::Stop) => {
                halt_others(info, 0);
                stop.store(true, Ordering::Relaxed);
                Response::Stopped
            }
            Ok(Request::Halt) => {
                stop.store(true, Ordering::Relaxed);
                Response::Stopped
            }
            Ok(Request::Routed { on, request }) => {
                route(&mut session, graph, info, on, &request).unwrap_or_else(|e| refused(&e))
            }
            Ok(request) => {
                answer(&mut session, graph, info, &request).unwrap_or_else(|e| refused(&e))
            }
            Err(e) => Response::Error(format!("not a request: {e}")),
        };
        line.clear();
        answered.fetch_add(1, Ordering::Relaxed);
        if reply(&mut writer, &response).is_err() {
            return;
        }
    }
}

/// Tells every node but `me` to halt (a node already gone has stopped).
fn halt_others(info: &Info, me: u32) {
    for (rank, address) in (0u32..).zip(&info.addresses) {
        if rank != me {
            let _ = Client::connect(address).and_then(|mut c| c.call(&Request::Halt));
        }
    }
}

fn reply(writer: &mut TcpStream, response: &Response) -> std::io::Result<()> {
    let mut bytes = serde_json::to_vec(response).expect("a response serializes");
    bytes.push(b'\n');
    writer.write_all(&bytes)
}

/// The answer to a request that failed with `error`: a refusal of the
/// argument it says makes no sense, or its message.
fn refused(error: &Error) -> Response {
    match error {
        Error::InvalidArgument(InvalidArgument { parameter, reason }) => Response::Refused {
            parameter: (*parameter).to_string(),
            reason: reason.clone(),
        },
        _ => Response::Error(quiver_run::chain(error)),
    }
}

/// The request parameters a node may refuse, by name: what
/// [`Response::Refused`] carries back as the library's `&'static str`.
const PARAMETERS: [&str; 6] = ["vertex", "target", "start", "update", "weight", "on"];

/// The dense key of the vertex the graph names `id`, or a refusal naming
/// `parameter`.
fn dense(graph: &Graph, id: u64, parameter: &'static str) -> Result<u32> {
    graph.dense_id(id).ok_or_else(|| {
        let named = if graph.original_ids().is_some() {
            ", named by the dataset's own ids"
        } else {
            ""
        };
        Error::invalid(
            parameter,
            format!(
                "{id} is not in the graph (it has {} vertices{named})",
                graph.num_vertices()
            ),
        )
    })
}

/// Runs `request` on node `on`, or with none on the home of the vertex it
/// names: here if that is this node, else relayed to that node over a
/// connection of this node's own, whose answer goes back as it came.
fn route(
    session: &mut Session<'_>,
    graph: &Graph,
    info: &Info,
    on: Option<u32>,
    request: &Request,
) -> Result<Response> {
    if matches!(
        request,
        Request::Routed { .. } | Request::Stop | Request::Halt
    ) {
        return Err(Error::Control(format!(
            "{request:?} is not routed: send it to a node"
        )));
    }
    let node = match (on, request) {
        (Some(node), _) => node,
        (None, Request::Get { key, .. } | Request::Put { key, .. } | Request::Move { key }) => {
            session.store().home_node(dense(graph, *key, "vertex")?)
        }
        (None, Request::Traverse { start, .. }) => {
            session.store().home_node(dense(graph, *start, "start")?)
        }
        (None, _) => session.store().rank(),
    };
    let Some(address) = info.addresses.get(node as usize) else {
        return Err(Error::invalid(
            "on",
            format!(
                "node {node} is not in the job (it has {} nodes)",
                info.nodes
            ),
        ));
    };
    if node == session.store().rank() {
        return answer(session, graph, info, request);
    }
    let unanswered = |e: Error| {
        Error::Control(format!(
            "node {node} at {address} does not answer: it has failed or stopped: {}",
            quiver_run::chain(&e)
        ))
    };
    Client::connect(address)
        .and_then(|mut relay| relay.exchange(request))
        .map_err(unanswered)
}

/// Runs one request on this node, its vertices named as `graph` names them.
fn answer(
    session: &mut Session<'_>,
    graph: &Graph,
    info: &Info,
    request: &Request,
) -> Result<Response> {
    let started = Instant::now();
    let before = session.tally().clone();
    let cost = |session: &Session<'_>| {
        let after = session.tally();
        Cost {
            node: session.store().rank(),
            one_sided: after.one_sided - before.one_sided,
            modelled_ns: after.modelled_ns - before.modelled_ns,
            wall_ns: crate::clock::nanos(started.elapsed()),
        }
    };
    let placed = |session: &mut Session<'_>, key: u32, cost: Cost| -> Result<Placed> {
        Ok(Placed {
            key: graph.original_id(key),
            home: session.store().home_node(key),
            holder: session.holder(key)?,
            cost,
        })
    };
    Ok(match *request {
        Request::Info => Response::Info(info.clone()),
        Request::Home { key } => {
            Response::Home(session.store().home_node(dense(graph, key, "vertex")?))
        }
        Request::Get { key, limit } => {
            let key = dense(graph, key, "vertex")?;
            let mut edges = session.get(key, limit)?;
            edges.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
            let cost = cost(session);
            Response::Get(GetReply {
                neighbours: edges.ids.iter().map(|&v| graph.original_id(v)).collect(),
                weights: edges.weights,
                placed: placed(session, key, cost)?,
            })
        }
        Request::Put {
            key,
            target,
            weight,
        } => {
            let key = dense(graph, key, "vertex")?;
            let target = dense(graph, target, "target")?;
            let update = match weight {
                Some(weight) => Update::AddWeightedEdge { target, weight },
                None => Update::AddEdge(target),
            };
            session.put(key, update)?;
            let cost = cost(session);
            Response::Put(placed(session, key, cost)?)
        }
        Request::Move { key } => {
            let key = dense(graph, key, "vertex")?;
            session.migrate(key)?;
            let cost = cost(session);
            Response::Move(placed(session, key, cost)?)
        }
        Request::Traverse { start, neighbours } => {
            let mut reply = TraverseReply::default();
            let mut reached = HashSet::new();
            let mut first_hop = true;
            let start = dense(graph, start, "start")?;
            session.two_hop(start, neighbours, |list| {
                if std::mem::take(&mut first_hop) {
                    reply.first_hop = list.ids.len() as u64;
                } else {
                    reply.second_hop += list.ids.len() as u64;
                    reached.extend(list.ids.iter().copied());
                }
            })?;
            let tally: &Tally = session.tally();
            reply.distinct = reached.len() as u64;
            reply.gets = tally.gets - before.gets;
            reply.remote_gets = tally.remote_gets - before.remote_gets;
            reply.cost = cost(session);
            Response::Traverse(reply)
        }
        Request::Stop | Request::Halt | Request::Routed { .. } => {
            unreachable!("a conversation stops or routes by itself")
        }
    })
}

/// A connection to one serve node.
#[derive(Debug)]
pub struct Client {
    reader: BufReader<TcpStream>,
    writer: TcpStream,
}

impl Client {
    /// Connects to the node at `address` (`host:port`).
    ///
    /// # Errors
    /// [`Error::Control`] naming the address if nobody answers there.
    pub fn connect(address: &str) -> Result<Client> {
        let unreachable = |e: std::io::Error| {
            Error::Control(format!(
                "no kv store answers at {address} ({e}); is `quiver kv serve` running?"
            ))
        };
        // Every address the name resolves to, in turn (`localhost` may be
        // ::1 first while the store listens on 127.0.0.1).
        let mut last = None;
        let mut connected = None;
        for addr in address.to_socket_addrs().map_err(unreachable)? {
            match TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
                Ok(stream) => {
                    connected = Some(stream);
                    break;
                }
                Err(e) => last = Some(e),
            }
        }
        let writer = match (connected, last) {
            (Some(stream), _) => stream,
            (None, Some(e)) => return Err(unreachable(e)),
            (None, None) => return Err(Error::Control(format!("{address} names no address"))),
        };
        let reader = BufReader::new(writer.try_clone().map_err(io_error)?);
        Ok(Client { reader, writer })
    }

    /// Sends `request` to run on node `on`, or with none on the home of the
    /// vertex it names (a Get, Put, traversal or move), and waits for its
    /// answer: the node this client talks to runs it or relays it, so the
    /// client asks one node, over this one connection.
    ///
    /// # Errors
    /// As [`Client::call`]; [`Error::InvalidArgument`] naming `on` for a
    /// node the job lacks; [`Error::Control`] naming the node that should
    /// run it when that node does not answer.
    pub fn call_on(&mut self, on: Option<u32>, request: Request) -> Result<Response> {
        self.call(&Request::Routed {
            on,
            request: Box::new(request),
        })
    }

    /// Sends `request` and waits for its answer.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a Put's weight that is not finite
    /// (JSON cannot carry it) or what the node refused (a vertex the graph
    /// lacks); [`Error::Control`] if the connection fails
    /// or the node answers with an error (its message).
    pub fn call(&mut self, request: &Request) -> Result<Response> {
        match self.exchange(request)? {
            Response::Error(message) => Err(Error::Control(message)),
            Response::Refused { parameter, reason } => {
                let parameter = PARAMETERS
                    .into_iter()
                    .find(|known| *known == parameter)
                    .unwrap_or("request");
                Err(Error::invalid(parameter, reason))
            }
            response => Ok(response),
        }
    }

    /// Sends `request` and returns the node's answer as it came, a refusal
    /// or an error too.
    fn exchange(&mut self, request: &Request) -> Result<Response> {
        // JSON has no NaN or infinity (serde writes them as null, which
        // would read back as no weight at all).
        let put = match request {
            Request::Routed { request, .. } => request,
            request => request,
        };
        if let Request::Put {
            weight: Some(weight),
            ..
        } = *put
        {
            if !weight.is_finite() {
                return Err(Error::invalid(
                    "weight",
                    format!("{weight} is not a weight: a graph's weights are finite"),
                ));
            }
        }
        let mut bytes = serde_json::to_vec(request).expect("a request serializes");
        bytes.push(b'\n');
        self.writer.write_all(&bytes).map_err(io_error)?;
        let mut line = String::new();
        if self.reader.read_line(&mut line).map_err(io_error)? == 0 {
            return Err(Error::Control(
                "the node closed the connection without answering".into(),
            ));
        }
        serde_json::from_str(line.trim())
            .map_err(|e| Error::Control(format!("not a response: {e}")))
    }
}

/// How a serve job's nodes listen, and their store.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServeConfig {
    /// Host every node listens on.
    pub host: String,
    /// Node `r` listens on port `port + r`.
    pub port: u16,
    /// The store.
    pub store: StoreConfig,
}

impl Default for ServeConfig {
    /// Every node on 127.0.0.1, node 0 at port 7420; the store's defaults.
    fn default() -> Self {
        ServeConfig {
            host: "127.0.0.1".into(),
            port: 7420,
            store: StoreConfig::default(),
        }
    }
}

impl ServeConfig {
    /// Where node `rank` listens (`host:port`), if `port + rank` is a port.
    pub fn address(&self, rank: u32) -> Option<String> {
        let port = u16::try_from(u32::from(self.port) + rank).ok()?;
        Some(format!("{}:{port}", self.host))
    }
}

/// What every node of a serve job is told.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ServeJob {
    /// The `.qcsr` graph, at the same path on every node.
    pub graph: PathBuf,
    /// Where the nodes listen, and their store.
    pub config: ServeConfig,
}

/// A serve job's task ([`Task`]): loads the store and serves until stopped.
#[derive(Debug)]
pub struct ServeTask;

impl Task for ServeTask {
    const NAME: &'static str = "kv-serve";
    type Config = ServeJob;
    type Report = u64;
    type Error = BoxError;

    fn run(node: &Node, job: &ServeJob) -> std::result::Result<u64, BoxError> {
        let config = &job.config;
        let address = config
            .address(node.rank().0)
            .ok_or_else(|| format!("port {} + rank {} is past 65535", config.port, node.rank()))?;
        let listener = TcpListener::bind(&address)
            .map_err(|e| format!("node {} cannot listen on {address}: {e}", node.rank()))?;
        let graph = crate::job::open_graph(&job.graph)?;
        let store = Store::open(node, &graph, &config.store, Clock::System)
            .map_err(|e| quiver_run::chain(&e))?;
        serve(&store, &graph, &listener).map_err(|e| quiver_run::chain(&e).into())
    }
}

/// Runs a serve job: `job`'s nodes load `graph` (from its file) and answer
/// requests until a client stops them ([`Request::Stop`]). `ready` hears
/// node 0's address once node 0 answers there, which it does once every
/// node has loaded its share. Returns the requests each node answered, by
/// rank, where rank 0's results are (`None` on the other members of a job
/// formed elsewhere).
///
/// # Errors
/// [`Error::InvalidArgument`] for a graph without a file, or a `port`
/// that leaves a local job's last node none; [`Error::Control`] when a
/// local job's port is in use; [`Error::Job`] when a node fails (one that
/// cannot listen, or dies).
pub fn serve_job(
    graph: &Graph,
    job: &Job,
    config: &ServeConfig,
    ready: impl FnOnce(&str) + Send,
) -> Result<Option<Vec<u64>>> {
    let task = ServeJob {
        graph: crate::job::node_path(graph)?,
        config: config.clone(),
    };
    // A port in use would be found only after loading, and node 0's
    // answer awaited below would come from whoever holds it: refuse now.
    if let Nodes::Local(nodes) = job.nodes {
        for rank in 0..nodes {
            let address = config.address(rank).ok_or_else(|| {
                Error::invalid(
                    "port",
                    format!(
                        "{} leaves no port for node {rank} (node r listens on port + r)",
                        config.port
                    ),
                )
            })?;
            if TcpListener::bind(&address).is_err() {
                return Err(Error::Control(format!(
                    "{address} is in use (another `quiver kv serve`?); choose another port"
                )));
            }
        }
    }
    let zero = config.address(0).expect("a port plus 0 is a port");
    let (running, finished) = mpsc::channel::<()>();
    let served = std::thread::scope(|scope| {
        scope.spawn(move || loop {
            if let Ok(Response::Info(_)) =
                Client::connect(&zero).and_then(|mut c| c.call(&Request::Info))
            {
                return ready(&zero);
            }
            if !matches!(
                finished.recv_timeout(Duration::from_millis(200)),
                Err(mpsc::RecvTimeoutError::Timeout)
            ) {
                return;
            }
        });
        // On this thread: a local tcp job's nodes die with the thread
        // that spawned them.
        let served = job.run::<ServeTask>(&task);
        drop(running);
        served
    });
    served.map_err(Error::Job)
}
