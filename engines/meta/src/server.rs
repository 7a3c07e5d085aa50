//! A metadata server: one RocksDB, the gRPC service, splits, reverse
//! edges, and its part of level-synchronous traversals.
//!
//! **Writes** are validated whole before anything is stored (unknown types
//! and relations, oversized ids or attributes, a timestamp from the
//! future, a vertex sent to a server that is not its home: an error and no
//! write), then queued and applied by group commit: whoever holds the
//! server's write lock takes every queued write and applies them in order,
//! each at its own timestamp and each whole or not at all, in one RocksDB
//! batch (a vertex delete first writes what the group staged before it,
//! so its tombstones cover every attribute). Edges routed to a partition
//! that has since split come back as stale with the server's split state,
//! unwritten; the client re-routes them.
//!
//! **Splits** (DIDO, GIGA+) run when a write takes a partition past the
//! threshold, after the group that grew it is written and outside the
//! write lock: the vertex is marked splitting, and writes with one of its
//! edges wait beside the queue until the split ends (then they are
//! committed), so its entries cannot change under the split while every
//! other vertex's writes go on. The right half's versions are copied to
//! the right child's server (`Adopt`), this server stops serving them, the
//! vertex's home records the split (`MarkSplit`), and the copies here are
//! deleted. Each step is durable before the next, and a server serves and
//! counts only the edges inside its own partitions, so a crash anywhere in
//! between leaves at worst unreachable copies, never a lost or resurrected
//! edge. `Adopt` and `MarkSplit` take no lock, so two servers splitting
//! into each other cannot deadlock. The writes that grew the partition are
//! acknowledged after the split.
//!
//! **Reverse edges** (`read` gets `wasReadBy`, …) are written in the forward
//! edge's batch as pending entries in their own column family, delivered
//! after the lock is released, one request per server for the whole group
//! (at most 8,192 edges a request; each stamped with its forward edge's timestamp, so delivery is
//! idempotent), and removed once delivered; the write is acknowledged
//! after delivery. Entries left by a crash or an unreachable peer are
//! delivered again at start and every second.
//!
//! **Traversal steps** ([`crate::client::Client::travel`] drives them): the
//! step's frontier arrives through `Frontier`; `RunStep` reads each
//! vertex, applies the filters, scans the local partition and asks the
//! servers of the other partitions to scan theirs (`Expand`), and sends the
//! destinations to their homes for the next step. With prefetching on, a
//! helper thread then loads the next step's vertices, their local edges and
//! the local destinations into the traversal's cache until the next step
//! starts (paper §4.6).
//!
//! **Asynchronous traversals** (`Flow`, `Progress`) are the `flow`
//! module's.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prost::Message;
use quiver_run::InvalidArgument;
use tonic::transport::{Channel, Endpoint};
use tonic::{Request, Response, Status};

use crate::clock::{Clock, MAX_SKEW_NS};
use crate::error::{Error, Result};
use crate::key::Section;
use crate::membership::{DataLock, Identity, Membership};
use crate::place::{Partitioner, Placement};
use crate::rpc::meta_client::MetaClient;
use crate::rpc::meta_server::{Meta, MetaServer};
use crate::rpc::{self, op};
use crate::schema::Schema;
use crate::store::{Batch, EdgeVersion, Store, VertexState};
use crate::travel::{edge_passes, vertex_passes, Filter};

mod flow;
use crate::tree::{Node, SplitState};

/// A server's settings; [`ServerConfig::default`] holds every default.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// The cluster: its id, and every server's id and address, in
    /// cluster-file order.
    pub cluster: Membership,
    /// This server's line in `cluster`.
    pub index: usize,
    /// Where its RocksDB lives.
    pub data: PathBuf,
    /// How out-edges are placed (the whole cluster agrees).
    pub partitioner: Partitioner,
    /// Virtual nodes on the ring, `1..=MAX_VNODES`.
    pub vnodes: u32,
    /// Edges a partition holds before it splits (paper default 128).
    pub threshold: u32,
    /// Vertex types and relations.
    pub schema: Schema,
    /// Fsync the write-ahead log on every write (survives power loss, not
    /// only a killed process).
    pub sync: bool,
    /// The largest attribute value or property accepted, in bytes.
    pub max_value_bytes: usize,
    /// A traversal's state here is dropped this long after its last
    /// request, so a client that dies mid-traversal leaves nothing behind.
    pub travel_idle: Duration,
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            cluster: Membership::default(),
            index: 0,
            data: PathBuf::new(),
            partitioner: Partitioner::Dido,
            vnodes: 64,
            threshold: 128,
            schema: Schema::default(),
            sync: false,
            max_value_bytes: 64 << 10,
            travel_idle: Duration::from_secs(600),
        }
    }
}

/// The most virtual nodes a ring has.
pub const MAX_VNODES: u32 = 4096;

/// The longest vertex id, attribute name or relation accepted.
pub const MAX_ID_BYTES: usize = 4096;

/// The most reverse edges one delivery request carries (a few MB).
const DELIVERY_OPS: usize = 8192;

/// `ops` in requests of at most [`DELIVERY_OPS`], in order. Cut from the
/// end, so each op moves at most once and a delivery that fits is sent as
/// it is.
fn delivery_chunks(mut ops: Vec<rpc::Op>) -> Vec<Vec<rpc::Op>> {
    let mut chunks = Vec::new();
    while !ops.is_empty() {
        let last = (ops.len() - 1) / DELIVERY_OPS * DELIVERY_OPS;
        chunks.push(ops.split_off(last));
    }
    chunks.reverse();
    chunks
}

/// Failed redelivery attempts (one a second) between warnings while a
/// peer stays unreachable.
const REDELIVERY_WARN_EVERY: u64 = 30;

impl ServerConfig {
    /// Checks the settings, naming the first that makes no sense.
    pub fn validate(&self) -> Result<(), InvalidArgument> {
        if self.cluster.servers.is_empty() {
            return Err(InvalidArgument::new("cluster", "names no server"));
        }
        if self.index >= self.cluster.servers.len() {
            return Err(InvalidArgument::new(
                "index",
                format!(
                    "server {} of a {}-server cluster",
                    self.index,
                    self.cluster.servers.len()
                ),
            ));
        }
        if self.travel_idle < Duration::from_secs(1) {
            return Err(InvalidArgument::new(
                "travel_idle",
                "is at least 1 s (a shorter one drops traversals in progress)",
            ));
        }
        if self.cluster.servers.len() > crate::tree::MAX_SERVERS as usize {
            return Err(InvalidArgument::new(
                "cluster",
                format!(
                    "{} servers; a cluster has at most {}",
                    self.cluster.servers.len(),
                    crate::tree::MAX_SERVERS
                ),
            ));
        }
        if !(1..=MAX_VNODES).contains(&self.vnodes) {
            return Err(InvalidArgument::new(
                "vnodes",
                format!("{} is outside 1..={MAX_VNODES}", self.vnodes),
            ));
        }
        if self.threshold == 0 {
            return Err(InvalidArgument::new(
                "threshold",
                "a partition holds at least one edge",
            ));
        }
        Ok(())
    }
}

/// One vertex's partitions on this server: the split state as far as this
/// server knows it (exact for its own partitions), and the edges in each.
#[derive(Debug, Default)]
struct Parts {
    x: SplitState,
    counts: Vec<(Node, u64)>,
}

impl Parts {
    /// The edges counted in partition `node`.
    fn counted(&self, node: Node) -> u64 {
        self.counts
            .iter()
            .find(|(n, _)| *n == node)
            .map_or(0, |c| c.1)
    }

    fn count(&mut self, node: Node) -> &mut u64 {
        let i = match self.counts.iter().position(|(n, _)| *n == node) {
            Some(i) => i,
            None => {
                self.counts.push((node, 0));
                self.counts.len() - 1
            }
        };
        &mut self.counts[i].1
    }
}

#[derive(Debug, Default)]
struct Counters {
    writes: AtomicU64,
    splits: AtomicU64,
    messages: AtomicU64,
    bytes: AtomicU64,
    edges_moved: AtomicU64,
}

/// What a prefetch loaded for one step: vertices, and (vertex, relation)
/// local edges.
#[derive(Debug, Default)]
struct Cache {
    vertices: HashMap<Vec<u8>, Option<VertexState>>,
    edges: HashMap<(Vec<u8>, String), Vec<EdgeVersion>>,
}

#[derive(Debug, Default)]
struct TravelState {
    /// When a request last named it, in ms since the server started.
    last_used_ms: AtomicU64,
    frontier: Mutex<HashMap<u32, Vec<rpc::Entry>>>,
    cache: Arc<Mutex<Cache>>,
    prefetch: Mutex<Option<(Arc<AtomicBool>, tokio::task::JoinHandle<u64>)>>,
    /// The asynchronous engine's queues and counts.
    flow: Mutex<flow::Flowing>,
    /// Notified when the asynchronous engine's worker goes idle.
    flow_idle: tokio::sync::Notify,
}

impl TravelState {
    /// Tells the traversal's prefetcher, if one runs, to stop; returns its
    /// task, which ends with the vertices it prefetched.
    fn stop_prefetch(&self) -> Option<tokio::task::JoinHandle<u64>> {
        let (stop, task) = self.prefetch.lock().expect("prefetch lock").take()?;
        stop.store(true, Ordering::Relaxed);
        Some(task)
    }
}

struct Shared {
    config: ServerConfig,
    /// The data directory's lock, held while the server lives.
    _lock: DataLock,
    placement: Placement,
    store: Store,
    clock: Clock,
    /// Held by the group commit that is writing.
    write_lock: tokio::sync::Mutex<()>,
    /// Writes waiting for the next group commit.
    write_queue: Mutex<Vec<Queued>>,
    /// Vertices whose partitions split now (outside the write lock), and
    /// the writes of their edges that wait for it.
    splitting: Mutex<HashMap<Vec<u8>, Vec<Queued>>>,
    split_lock: Mutex<()>,
    parts: Mutex<HashMap<Vec<u8>, Parts>>,
    peers: Vec<MetaClient<Channel>>,
    travels: Mutex<HashMap<u64, Arc<TravelState>>>,
    /// Traversals their client has ended, with when (ms since start): late
    /// asynchronous batches of them are dropped.
    ended: Mutex<HashMap<u64, u64>>,
    started: std::time::Instant,
    /// This process, for clients to notice a restart (wall time at start).
    instance: u64,
    counters: Counters,
    pending_seq: AtomicU64,
}

/// Where a write's answer goes.
type Answer = tokio::sync::oneshot::Sender<Result<rpc::WriteReply, Status>>;

/// A write waiting for a group commit, and where its answer goes.
struct Queued {
    req: rpc::WriteRequest,
    reply: Answer,
}

/// What a group commit gathers before writing.
#[derive(Default)]
struct Staged {
    batch: Batch,
    /// Vertex types staged and not yet written (`None`: deleted), for the
    /// type check.
    types: HashMap<Vec<u8>, Option<String>>,
    /// Partitions that grew: vertex, leaf, the request that grew it.
    grown: Vec<(Vec<u8>, Node, usize)>,
    /// Reverse edges: the request, the pending entry's id, the edge.
    reverse: Vec<(usize, Vec<u8>, rpc::EdgePut)>,
}

/// A committed group: each request's outcome, the reverse edges (pending
/// id, edge) and the splits to run, by vertex.
struct Committed {
    outcomes: Vec<Outcome>,
    reverse: Vec<(Vec<u8>, rpc::EdgePut)>,
    splits: BTreeMap<Vec<u8>, SplitJob>,
}

/// A committed request's answer, until it is sent.
struct Outcome {
    reply: Answer,
    result: Result<rpc::WriteReply, Status>,
    /// Its reverse edges are being delivered.
    delivers: bool,
    /// A partition it grew is splitting.
    splits: bool,
}

/// Partitions of one vertex to split, and the requests (by their place in
/// the group) that grew them.
#[derive(Default)]
struct SplitJob {
    leaves: BTreeSet<Node>,
    requests: Vec<usize>,
}

/// A running server's handle: its address, and a way to stop it.
#[derive(Debug)]
pub struct Running {
    /// The address it listens on.
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<()>>,
}

impl Running {
    /// Stops accepting requests, finishes those in flight, flushes the
    /// store, and returns how serving ended.
    pub async fn shutdown(mut self) -> Result<()> {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.task.await.map_err(|e| Error::Serve {
            addr: self.addr.to_string(),
            source: Box::new(e),
        })?
    }
}

/// Lazily connected clients to `cluster`, with the timeouts every hop uses.
pub fn connect_lazy(cluster: &[String]) -> Result<Vec<MetaClient<Channel>>> {
    cluster
        .iter()
        .map(|addr| {
            let endpoint = Endpoint::from_shared(format!("http://{addr}")).map_err(|source| {
                Error::Address {
                    server: addr.clone(),
                    source,
                }
            })?;
            let channel = endpoint
                .connect_timeout(Duration::from_secs(2))
                .timeout(Duration::from_secs(120))
                .tcp_nodelay(true)
                .connect_lazy();
            Ok(MetaClient::new(channel)
                .max_decoding_message_size(256 << 20)
                .max_encoding_message_size(256 << 20))
        })
        .collect()
}

/// Opens the store and serves on `listener` until shut down: [`open`],
/// then [`Opened::serve`].
pub async fn start(config: ServerConfig, listener: tokio::net::TcpListener) -> Result<Running> {
    open(config)?.serve(listener).await
}

/// A server whose store is open, not yet serving: a driver binds its port
/// only now, so a server that listens is ready to answer.
pub struct Opened {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Opened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let config = &self.shared.config;
        f.debug_struct("Opened")
            .field("server", &config.index)
            .field("data", &config.data)
            .finish_non_exhaustive()
    }
}

/// Checks `config` and opens the store (RocksDB replays its log here).
pub fn open(config: ServerConfig) -> Result<Opened> {
    config.validate()?;
    // One server a data directory, and only the one it belongs to.
    let lock = DataLock::take(&config.data)?;
    Identity::claim(&config.cluster, config.index, &config.data)?;
    let store = Store::open(&config.data, config.sync).map_err(|source| Error::Store {
        path: config.data.clone(),
        source,
    })?;
    let shared = Arc::new(Shared {
        placement: Placement::new(&config.cluster.ids(), config.vnodes, config.partitioner),
        peers: connect_lazy(&config.cluster.addrs())?,
        _lock: lock,
        store,
        clock: Clock::default(),
        write_lock: tokio::sync::Mutex::new(()),
        write_queue: Mutex::new(Vec::new()),
        splitting: Mutex::new(HashMap::new()),
        split_lock: Mutex::new(()),
        parts: Mutex::new(HashMap::new()),
        travels: Mutex::new(HashMap::new()),
        ended: Mutex::new(HashMap::new()),
        started: std::time::Instant::now(),
        instance: Clock::default().read_time(0),
        counters: Counters::default(),
        pending_seq: AtomicU64::new(0),
        config,
    });
    Ok(Opened { shared })
}

impl Opened {
    /// Serves on `listener` until shut down.
    pub async fn serve(self, listener: tokio::net::TcpListener) -> Result<Running> {
        let shared = self.shared;
        let addr = listener.local_addr().map_err(|e| Error::Serve {
            addr: shared.config.cluster.servers[shared.config.index]
                .addr
                .clone(),
            source: Box::new(e),
        })?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let service = MetaServer::new(Service(shared.clone()))
            .max_decoding_message_size(256 << 20)
            .max_encoding_message_size(256 << 20);
        // Once a second: pending reverse edges, and idle traversals.
        let upkeep = {
            let shared = shared.clone();
            tokio::spawn(async move {
                // Failed attempts in a row: a peer that is down (or stopping
                // with its cluster) is news when it starts and every
                // `REDELIVERY_WARN_EVERY` attempts after, not every second.
                let mut failing = 0u64;
                loop {
                    match shared.deliver_pending().await {
                        Ok(()) if failing > 0 => {
                            tracing::info!(
                                "reverse edges delivered after {failing} failed attempts"
                            );
                            failing = 0;
                        }
                        Ok(()) => {}
                        Err(e) => {
                            let chain = quiver_run::chain(&e);
                            if failing.is_multiple_of(REDELIVERY_WARN_EVERY) {
                                tracing::warn!("reverse edges wait for delivery: {chain}");
                            } else {
                                tracing::debug!("reverse edges wait for delivery: {chain}");
                            }
                            failing += 1;
                        }
                    }
                    shared.drop_idle_travels();
                    tokio::time::sleep(Duration::from_secs(1)).await;
                }
            })
        };
        let task = tokio::spawn(async move {
            let served = tonic::transport::Server::builder()
                .tcp_nodelay(true)
                .add_service(service)
                .serve_with_incoming_shutdown(
                    tonic::transport::server::TcpIncoming::from(listener),
                    async {
                        let _ = stopped.await;
                    },
                )
                .await;
            upkeep.abort();
            // Its handle on the store must be gone before the store closes.
            let _ = upkeep.await;
            served.map_err(|e| Error::Serve {
                addr: addr.to_string(),
                source: Box::new(e),
            })?;
            shared.store.flush().map_err(|source| Error::Store {
                path: shared.config.data.clone(),
                source,
            })
        });
        Ok(Running {
            addr,
            stop: Some(stop),
            task,
        })
    }
}

/// Whether `status` is a refused connection: the request was never sent.
fn refused(status: &Status) -> bool {
    let mut source = std::error::Error::source(status);
    while let Some(e) = source {
        let io = e.downcast_ref::<std::io::Error>();
        if io.is_some_and(|io| io.kind() == std::io::ErrorKind::ConnectionRefused) {
            return true;
        }
        source = e.source();
    }
    false
}

fn invalid(message: impl Into<String>) -> Status {
    Status::invalid_argument(message.into())
}

fn internal(e: impl std::error::Error + 'static) -> Status {
    Status::internal(quiver_run::chain(&e))
}

fn printable(id: &[u8]) -> String {
    String::from_utf8_lossy(id).into_owned()
}

fn split_bytes(x: SplitState) -> Vec<u8> {
    x.0.to_le_bytes().to_vec()
}

/// A split state from the wire; an empty field is the unsplit state.
pub fn split_from(bytes: &[u8]) -> Option<SplitState> {
    if bytes.is_empty() {
        return Some(SplitState::default());
    }
    Some(SplitState(u128::from_le_bytes(bytes.try_into().ok()?)))
}

fn node_from(index: u32) -> Result<Node, Status> {
    if index < 127 {
        Ok(Node::from_index(index))
    } else {
        Err(invalid(format!("partition {index} is outside the tree")))
    }
}

impl Shared {
    fn me(&self) -> usize {
        self.config.index
    }

    /// Sends `req` to `server` with `rpc`, counted in the server's totals,
    /// and names the peer in an error. A channel whose last connect was
    /// refused (the peer was down) hands that failure to its next request,
    /// which was never sent: that one gets a second, fresh attempt, so the
    /// first request to a peer that is back does not fail.
    async fn call<Req, T, F>(
        &self,
        server: usize,
        req: &Req,
        rpc: impl Fn(MetaClient<Channel>, Req) -> F,
    ) -> Result<T, Status>
    where
        Req: Message + Clone,
        F: std::future::Future<Output = Result<Response<T>, Status>>,
    {
        let bytes = req.encoded_len() as u64;
        self.call_sized(server, bytes, req, rpc).await
    }

    /// [`Shared::call`] for a request whose encoded size, `bytes`, the
    /// caller has measured already.
    async fn call_sized<Req, T, F>(
        &self,
        server: usize,
        bytes: u64,
        req: &Req,
        rpc: impl Fn(MetaClient<Channel>, Req) -> F,
    ) -> Result<T, Status>
    where
        Req: Message + Clone,
        F: std::future::Future<Output = Result<Response<T>, Status>>,
    {
        self.counters.messages.fetch_add(1, Ordering::Relaxed);
        self.counters.bytes.fetch_add(bytes, Ordering::Relaxed);
        let peer = &self.peers[server];
        let mut result = rpc(peer.clone(), req.clone()).await;
        if result.as_ref().is_err_and(refused) {
            result = rpc(peer.clone(), req.clone()).await;
        }
        result.map(Response::into_inner).map_err(|s| {
            Status::new(
                s.code(),
                format!(
                    "server {} ({}): {}",
                    server,
                    self.config.cluster.servers[server].addr,
                    s.message()
                ),
            )
        })
    }

    /// Sends a traversal request to `server` through [`Shared::call_sized`]
    /// into `calls`, counted in the step's `counts` too.
    fn send_step<Req, T, F>(
        self: &Arc<Self>,
        calls: &mut tokio::task::JoinSet<Result<T, Status>>,
        server: usize,
        counts: &mut rpc::StepCounts,
        req: Req,
        rpc: impl Fn(MetaClient<Channel>, Req) -> F + Send + 'static,
    ) where
        Req: Message + Clone + Send + 'static,
        T: Send + 'static,
        F: std::future::Future<Output = Result<Response<T>, Status>> + Send,
    {
        let bytes = req.encoded_len() as u64;
        counts.messages += 1;
        counts.bytes += bytes;
        let shared = self.clone();
        calls.spawn(async move { shared.call_sized(server, bytes, &req, rpc).await });
    }

    /// This server's view of `v`'s partitions, loaded on first use: the
    /// split state from the home (itself, or one RPC), and the edges here
    /// counted per local partition.
    async fn load_parts(&self, v: &[u8]) -> Result<(), Status> {
        if self.parts.lock().expect("parts lock").contains_key(v) {
            return Ok(());
        }
        let home = self.placement.home(v);
        let x = if home == self.me() {
            self.store.split_state(v).map_err(internal)?
        } else {
            let req = rpc::GetSplitRequest { id: v.to_vec() };
            let reply = self
                .call(home, &req, |mut peer, req| async move {
                    peer.get_split(req).await
                })
                .await?;
            split_from(&reply.split)
                .ok_or_else(|| Status::internal("split state of the wrong size"))?
        };
        let mut parts = Parts {
            x,
            counts: Vec::new(),
        };
        let mut edges = Vec::new();
        self.store
            .edge_entries(v, |etype, dst| {
                edges.push((etype.to_vec(), dst.to_vec()));
                false
            })
            .map_err(internal)?;
        edges.dedup();
        for (_, dst) in edges {
            let leaf = x.leaf_for(self.placement.tree(), self.placement.route(v, &dst));
            if self.placement.node_server(v, leaf) == self.me() {
                *parts.count(leaf) += 1;
            }
        }
        self.parts
            .lock()
            .expect("parts lock")
            .entry(v.to_vec())
            .or_insert(parts);
        Ok(())
    }

    /// Whether edge `v -> dst` belongs to a partition of this server.
    fn is_local(&self, v: &[u8], dst: &[u8]) -> bool {
        if !self.config.partitioner.splits() {
            return true;
        }
        let parts = self.parts.lock().expect("parts lock");
        let x = parts.get(v).map_or_else(SplitState::default, |p| p.x);
        let leaf = x.leaf_for(self.placement.tree(), self.placement.route(v, dst));
        self.placement.node_server(v, leaf) == self.me()
    }

    /// `v`'s edges of `etype` (all with `None`) this server serves, as of
    /// `as_of`.
    async fn local_edges(
        &self,
        v: &[u8],
        etype: Option<&str>,
        as_of: u64,
    ) -> Result<Vec<EdgeVersion>, Status> {
        let mut edges = self.store.scan_edges(v, etype, as_of).map_err(internal)?;
        if self.config.partitioner.splits() && !edges.is_empty() {
            self.load_parts(v).await?;
            edges.retain(|e| self.is_local(v, &e.dst));
        }
        Ok(edges)
    }

    fn check_session(&self, ts: u64) -> Result<(), Status> {
        let now = self.clock.read_time(0);
        if ts > now + MAX_SKEW_NS {
            return Err(invalid(format!(
                "timestamp {ts} is {:.3} s in this server's future",
                (ts - now) as f64 / 1e9
            )));
        }
        Ok(())
    }

    /// The time a read happens at: `as_of`, or now (0), after checking
    /// neither it nor the session's timestamp is in the future.
    fn read_time(&self, as_of: u64, session: u64) -> Result<u64, Status> {
        self.check_session(session)?;
        self.check_session(as_of)?;
        Ok(if as_of == 0 {
            self.clock.read_time(session)
        } else {
            as_of
        })
    }

    fn check_name(&self, what: &str, name: &[u8]) -> Result<(), Status> {
        if name.is_empty() || name.len() > MAX_ID_BYTES {
            return Err(invalid(format!(
                "{what} must have 1 to {MAX_ID_BYTES} bytes, not {}",
                name.len()
            )));
        }
        Ok(())
    }

    fn check_values<'a>(
        &self,
        what: &str,
        values: impl IntoIterator<Item = (&'a String, &'a Vec<u8>)>,
    ) -> Result<(), Status> {
        for (k, v) in values {
            self.check_name(&format!("{what} name"), k.as_bytes())?;
            if v.len() > self.config.max_value_bytes {
                return Err(invalid(format!(
                    "{what} {k:?} has {} bytes; the limit is {}",
                    v.len(),
                    self.config.max_value_bytes
                )));
            }
        }
        Ok(())
    }

    /// Checks every op before any is applied.
    fn validate(&self, req: &rpc::WriteRequest) -> Result<(), Status> {
        self.check_session(req.session_ts)?;
        for op in &req.ops {
            if req.reverse && !matches!(&op.op, Some(op::Op::Edge(e)) if e.ts != 0) {
                return Err(invalid(
                    "a reverse-edge delivery holds only edges, each with its timestamp",
                ));
            }
            match op.op.as_ref() {
                None => return Err(invalid("an op names no operation")),
                Some(op::Op::Vertex(v)) => {
                    self.check_name("vertex id", &v.id)?;
                    if !self.config.schema.has_type(&v.vtype) {
                        return Err(invalid(format!("unknown vertex type {:?}", v.vtype)));
                    }
                    self.check_values("attribute", &v.attrs)?;
                    self.check_home(&v.id)?;
                }
                Some(op::Op::DeleteVertex(v)) => {
                    self.check_name("vertex id", &v.id)?;
                    self.check_home(&v.id)?;
                }
                Some(op::Op::Edge(e)) => {
                    if !req.reverse && e.ts != 0 {
                        return Err(invalid(
                            "an edge a client writes carries no timestamp: the server stamps it",
                        ));
                    }
                    self.check_session(e.ts)?;
                    self.check_name("source id", &e.src)?;
                    self.check_name("destination id", &e.dst)?;
                    if self.config.schema.relation(&e.etype).is_none() {
                        return Err(invalid(format!("unknown relation {:?}", e.etype)));
                    }
                    self.check_values("property", &e.props)?;
                    node_from(e.node)?;
                    if !self.config.partitioner.splits() {
                        let (server, _) =
                            self.placement.edge(&e.src, &e.dst, SplitState::default());
                        if server != self.me() {
                            return Err(Status::failed_precondition(format!(
                                "edge {} -> {} belongs on server {server}",
                                printable(&e.src),
                                printable(&e.dst)
                            )));
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Refuses a traversal hop along a relation the schema does not have
    /// (it would match no edge and answer nothing).
    fn check_hops<'a>(
        &self,
        hops: impl IntoIterator<Item = &'a Option<rpc::Hop>>,
    ) -> Result<(), Status> {
        for hop in hops.into_iter().flatten() {
            if self.config.schema.relation(&hop.etype).is_none() {
                return Err(invalid(format!(
                    "a traversal follows unknown relation {:?}",
                    hop.etype
                )));
            }
        }
        Ok(())
    }

    fn check_home(&self, id: &[u8]) -> Result<(), Status> {
        let home = self.placement.home(id);
        if home != self.me() {
            return Err(Status::failed_precondition(format!(
                "vertex {} lives on server {home}",
                printable(id)
            )));
        }
        Ok(())
    }

    /// Applies `req`: queued, then committed with every write queued
    /// beside it (a group commit: one RocksDB batch under the write lock,
    /// whose holder commits for everyone waiting), and answered once its
    /// reverse edges are delivered and the partitions it grew have split.
    async fn write(self: &Arc<Self>, req: rpc::WriteRequest) -> Result<rpc::WriteReply, Status> {
        self.validate(&req)?;
        let (reply, mut replied) = tokio::sync::oneshot::channel();
        self.write_queue
            .lock()
            .expect("write queue lock")
            .push(Queued { req, reply });
        // The answer may come from another request's commit while this one
        // still waits for the lock.
        let answer = tokio::select! {
            biased;
            answer = &mut replied => answer,
            lock = self.write_lock.lock() => {
                self.commit_queue().await;
                drop(lock);
                replied.await
            }
        };
        answer.unwrap_or_else(|_| {
            Err(Status::internal(
                "the write's group commit ended without an answer",
            ))
        })
    }

    /// Commits every queued write as one group; the caller holds the write
    /// lock. Answers come from a task of their own.
    ///
    /// Boxed: the answers' task may run splits, which commit the writes
    /// that waited for them.
    fn commit_queue(
        self: &Arc<Self>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
        Box::pin(async move {
            let group = std::mem::take(&mut *self.write_queue.lock().expect("write queue lock"));
            if !group.is_empty() {
                let committed = self.commit(group).await;
                tokio::spawn(self.clone().acknowledge(committed));
            }
        })
    }

    /// Commits `group` in order (the caller holds the write lock): each
    /// request's ops are staged whole or not at all, then written in one
    /// batch (before a vertex delete, what was staged is written first,
    /// so the delete sees every attribute). A request with an edge of a
    /// vertex that is splitting waits for the split, outside the group.
    /// Partitions that grew past the threshold are marked splitting; their
    /// splits run after the lock is released.
    async fn commit(&self, group: Vec<Queued>) -> Committed {
        let mut staged = Staged::default();
        let mut outcomes: Vec<Outcome> = Vec::with_capacity(group.len());
        // Requests staged but not yet written: their results wait on the write.
        let mut unwritten: Vec<usize> = Vec::new();
        for q in group {
            let Some(q) = self.unless_splitting(q) else {
                continue;
            };
            let deletes = q
                .req
                .ops
                .iter()
                .any(|o| matches!(o.op, Some(op::Op::DeleteVertex(_))));
            if deletes && !unwritten.is_empty() {
                self.write_staged(&mut staged, &mut unwritten, &mut outcomes);
            }
            let result = self.stage(&q.req, outcomes.len(), &mut staged).await;
            if result.is_ok() {
                unwritten.push(outcomes.len());
            }
            outcomes.push(Outcome {
                reply: q.reply,
                result,
                delivers: false,
                splits: false,
            });
        }
        self.write_staged(&mut staged, &mut unwritten, &mut outcomes);
        let Staged {
            mut grown, reverse, ..
        } = staged;
        // One entry per edge staged: each partition is checked once.
        grown.sort_unstable();
        grown.dedup();
        let mut splits: BTreeMap<Vec<u8>, SplitJob> = BTreeMap::new();
        for partition in grown.chunk_by(|a, b| (&a.0, a.1) == (&b.0, b.1)) {
            let (v, leaf, _) = &partition[0];
            if !self.over_threshold(v, *leaf) {
                continue;
            }
            for &(_, _, i) in partition {
                if outcomes[i].result.is_ok() {
                    let job = splits.entry(v.clone()).or_default();
                    job.leaves.insert(*leaf);
                    job.requests.push(i);
                    outcomes[i].splits = true;
                }
            }
        }
        {
            let mut splitting = self.splitting.lock().expect("splitting lock");
            for v in splits.keys() {
                splitting.insert(v.clone(), Vec::new());
            }
        }
        let mut to_deliver = Vec::with_capacity(reverse.len());
        for (i, id, edge) in reverse {
            if outcomes[i].result.is_ok() {
                outcomes[i].delivers = true;
                to_deliver.push((id, edge));
            }
        }
        Committed {
            outcomes,
            reverse: to_deliver,
            splits,
        }
    }

    /// `q`, unless it has an edge of a vertex that is splitting: then it
    /// waits for that split, which queues it again.
    fn unless_splitting(&self, q: Queued) -> Option<Queued> {
        let mut splitting = self.splitting.lock().expect("splitting lock");
        if splitting.is_empty() {
            return Some(q);
        }
        let busy = q.req.ops.iter().find_map(|o| match &o.op {
            Some(op::Op::Edge(e)) if splitting.contains_key(&e.src) => Some(e.src.clone()),
            _ => None,
        });
        match busy {
            Some(v) => {
                splitting.get_mut(&v).expect("found above").push(q);
                None
            }
            None => Some(q),
        }
    }

    /// Whether partition `leaf` of `v` may hold more than the threshold
    /// (its count is an upper bound) and can split.
    fn over_threshold(&self, v: &[u8], leaf: Node) -> bool {
        let parts = self.parts.lock().expect("parts lock");
        let Some(p) = parts.get(v) else {
            return false;
        };
        !p.x.is_split(leaf)
            && p.counted(leaf) > u64::from(self.config.threshold)
            && self.placement.tree().right_child(leaf).is_some()
    }

    /// Runs `job`'s splits of `v`, then queues the writes that waited
    /// for them and commits them.
    async fn split_job(self: &Arc<Self>, v: &[u8], job: &SplitJob) -> Result<u32, Status> {
        let splits = async {
            let mut splits = 0;
            for &leaf in &job.leaves {
                splits += self.split_while_over(v, leaf).await?;
            }
            Ok(splits)
        }
        .await;
        self.end_split(v);
        splits
    }

    /// Ends `v`'s split: the writes that waited for it are queued again
    /// and committed.
    fn end_split(self: &Arc<Self>, v: &[u8]) {
        let waiting = self
            .splitting
            .lock()
            .expect("splitting lock")
            .remove(v)
            .unwrap_or_default();
        if !waiting.is_empty() {
            self.write_queue
                .lock()
                .expect("write queue lock")
                .extend(waiting);
            let shared = self.clone();
            tokio::spawn(async move {
                let _lock = shared.write_lock.lock().await;
                shared.commit_queue().await;
            });
        }
    }

    /// Writes what `staged` holds; the requests in `unwritten` fail if the
    /// write does.
    fn write_staged(
        &self,
        staged: &mut Staged,
        unwritten: &mut Vec<usize>,
        outcomes: &mut [Outcome],
    ) {
        let batch = std::mem::take(&mut staged.batch);
        staged.types.clear();
        let written = if batch.is_empty() {
            Ok(())
        } else {
            self.store.write(batch).map_err(internal)
        };
        for i in unwritten.drain(..) {
            if let Err(status) = &written {
                outcomes[i].result = Err(status.clone());
            }
        }
    }

    /// Adds request `req` (number `i` of its group) to `staged`: all of its
    /// ops, or, on an error, none.
    async fn stage(
        &self,
        req: &rpc::WriteRequest,
        i: usize,
        staged: &mut Staged,
    ) -> Result<rpc::WriteReply, Status> {
        let mut reply = rpc::WriteReply::default();
        let ts = if req.reverse {
            let newest = req.ops.iter().filter_map(|o| match &o.op {
                Some(op::Op::Edge(e)) => Some(e.ts),
                _ => None,
            });
            let newest = newest.max().unwrap_or(0);
            self.clock.stamp(newest.saturating_sub(1));
            newest
        } else {
            self.clock.stamp(req.session_ts)
        };
        reply.ts = ts;
        // Everything that can fail comes before the first op is staged:
        // types (a batch may create a vertex and use it), partitions,
        // the attributes a delete tombstones.
        let mut live = Vec::new();
        for op in &req.ops {
            match op.op.as_ref().expect("validated") {
                op::Op::Vertex(v) => {
                    let old = match staged.types.get(&v.id) {
                        Some(t) => t.clone(),
                        None => self.store.vertex_type(&v.id).map_err(internal)?,
                    };
                    if let Some(old) = old.filter(|old| *old != v.vtype) {
                        return Err(invalid(format!(
                            "vertex {} is a {old}; a put cannot make it a {}",
                            printable(&v.id),
                            v.vtype
                        )));
                    }
                }
                op::Op::DeleteVertex(v) => {
                    live.push(self.store.live_attrs(&v.id, ts).map_err(internal)?);
                }
                op::Op::Edge(e) => {
                    if self.config.partitioner.splits() {
                        self.load_parts(&e.src).await?;
                    }
                }
            }
        }
        let mut live = live.into_iter();
        for (n, op) in req.ops.iter().enumerate() {
            match op.op.as_ref().expect("validated") {
                op::Op::Vertex(v) => {
                    staged.batch.put_type(&v.id, &v.vtype, ts);
                    staged.types.insert(v.id.clone(), Some(v.vtype.clone()));
                    for (name, value) in &v.attrs {
                        let section = if self.config.schema.is_static(&v.vtype, name) {
                            Section::Static
                        } else {
                            Section::User
                        };
                        staged.batch.put_attr(&v.id, section, name, value, ts);
                    }
                }
                op::Op::DeleteVertex(v) => {
                    let live = live.next().expect("read above");
                    staged.batch.delete_vertex(&v.id, &live, ts);
                    staged.types.insert(v.id.clone(), None);
                }
                op::Op::Edge(e) => {
                    if self.config.partitioner.splits() {
                        let mut parts = self.parts.lock().expect("parts lock");
                        let p = parts.get_mut(&e.src).expect("loaded above");
                        let leaf = p
                            .x
                            .leaf_for(self.placement.tree(), self.placement.route(&e.src, &e.dst));
                        if self.placement.node_server(&e.src, leaf) != self.me() {
                            reply.stale.push(rpc::Stale {
                                op: u32::try_from(n).expect("ops fit a message"),
                                src: e.src.clone(),
                                split: split_bytes(p.x),
                            });
                            continue;
                        }
                        // An upper bound (a new version of an edge counts
                        // again); a split counts exactly before it runs.
                        *p.count(leaf) += 1;
                        staged.grown.push((e.src.clone(), leaf, i));
                    }
                    let version = if req.reverse { e.ts } else { ts };
                    let props = (!e.remove).then_some(&e.props);
                    staged
                        .batch
                        .put_edge(&e.src, &e.etype, &e.dst, props, version);
                    if !req.reverse {
                        if let Some(Some(rev)) = self.config.schema.relation(&e.etype) {
                            let back = rpc::EdgePut {
                                src: e.dst.clone(),
                                etype: rev.to_string(),
                                dst: e.src.clone(),
                                props: e.props.clone(),
                                node: 0,
                                remove: e.remove,
                                ts,
                            };
                            let mut id = ts.to_be_bytes().to_vec();
                            id.extend_from_slice(
                                &self
                                    .pending_seq
                                    .fetch_add(1, Ordering::Relaxed)
                                    .to_be_bytes(),
                            );
                            staged.batch.add_pending(id.clone(), back.encode_to_vec());
                            staged.reverse.push((i, id, back));
                        }
                    }
                }
            }
        }
        self.counters
            .writes
            .fetch_add(req.ops.len() as u64, Ordering::Relaxed);
        Ok(reply)
    }

    /// Answers a committed group: at once where there is nothing to wait
    /// for; after its reverse edges are delivered (one request per server
    /// for the whole group, [`DELIVERY_OPS`] edges at most) and the partitions it grew have split where
    /// there is. Each split counts in the reply of the first request that
    /// grew its vertex; a failed split fails every request that grew it.
    async fn acknowledge(self: Arc<Self>, committed: Committed) {
        let Committed {
            outcomes,
            reverse,
            splits,
        } = committed;
        // By place in the group: those still waiting.
        let mut waiting: Vec<Option<Outcome>> = outcomes
            .into_iter()
            .map(|o| {
                if o.delivers || o.splits {
                    Some(o)
                } else {
                    let _ = o.reply.send(o.result);
                    None
                }
            })
            .collect();
        if waiting.iter().all(Option::is_none) {
            return;
        }
        let delivering = async {
            if reverse.is_empty() {
                return Ok(());
            }
            self.deliver(reverse).await.map_err(|e| {
                Status::unavailable(format!(
                    "the write is stored but its reverse edges wait for their server (delivered when it returns): {}",
                    quiver_run::chain(&e)
                ))
            })
        };
        let splitting = async {
            let mut done = Vec::with_capacity(splits.len());
            for (v, job) in &splits {
                done.push((job, self.split_job(v, job).await));
            }
            done
        };
        let (delivered, split) = tokio::join!(delivering, splitting);
        for (job, outcome) in split {
            match outcome {
                Ok(n) => {
                    if let Some(Outcome {
                        result: Ok(reply), ..
                    }) = &mut waiting[job.requests[0]]
                    {
                        reply.splits += n;
                    }
                }
                Err(status) => {
                    for &i in &job.requests {
                        if let Some(o) = &mut waiting[i] {
                            o.result = Err(status.clone());
                        }
                    }
                }
            }
        }
        for o in waiting.into_iter().flatten() {
            let result = match (&delivered, o.result) {
                (Err(status), Ok(_)) if o.delivers => Err(status.clone()),
                (_, result) => result,
            };
            let _ = o.reply.send(result);
        }
    }

    /// Splits `leaf` of `v`, and its halves in turn, while one holds more
    /// than the threshold and can split. Returns the number of splits.
    async fn split_while_over(&self, v: &[u8], leaf: Node) -> Result<u32, Status> {
        let tree = self.placement.tree();
        let mut todo = vec![leaf];
        let mut splits = 0;
        let threshold = u64::from(self.config.threshold);
        while let Some(node) = todo.pop() {
            let Some(right) = tree
                .right_child(node)
                .filter(|_| self.over_threshold(v, node))
            else {
                continue;
            };
            let exact = self.count_edges(v, node)?;
            if exact <= threshold {
                let mut parts = self.parts.lock().expect("parts lock");
                *parts.get_mut(v).expect("loaded by the write").count(node) = exact;
                continue;
            }
            self.split(v, node, right).await?;
            splits += 1;
            todo.push(tree.left_child(node));
            if self.placement.node_server(v, right) == self.me() {
                todo.push(right);
            }
        }
        Ok(splits)
    }

    /// The distinct edges (type, destination) in partition `node` of `v`.
    fn count_edges(&self, v: &[u8], node: Node) -> Result<u64, Status> {
        let tree = self.placement.tree();
        let mut groups = Vec::new();
        self.store
            .edge_entries(v, |etype, dst| {
                if tree.in_subtree(self.placement.route(v, dst), node) && self.is_local(v, dst) {
                    groups.push((etype.to_vec(), dst.to_vec()));
                }
                false
            })
            .map_err(internal)?;
        groups.dedup();
        Ok(groups.len() as u64)
    }

    async fn split(&self, v: &[u8], node: Node, right: Node) -> Result<(), Status> {
        let tree = self.placement.tree();
        let target = self.placement.node_server(v, right);
        let moving = self
            .store
            .edge_entries(v, |_, dst| {
                tree.in_subtree(self.placement.route(v, dst), right) && self.is_local(v, dst)
            })
            .map_err(internal)?;
        let mut groups: Vec<&[u8]> = moving.iter().map(|(k, _)| &k[..k.len() - 8]).collect();
        groups.dedup();
        let moved = groups.len() as u64;
        if target != self.me() {
            let req = rpc::AdoptRequest {
                src: v.to_vec(),
                node: right.index(),
                entries: moving
                    .iter()
                    .map(|(key, value)| rpc::RawEntry {
                        key: key.clone(),
                        value: value.clone(),
                    })
                    .collect(),
            };
            self.call(target, &req, |mut peer, req| async move {
                peer.adopt(req).await
            })
            .await?;
        }
        {
            let mut parts = self.parts.lock().expect("parts lock");
            let p = parts.get_mut(v).expect("loaded by the write");
            p.x = p.x.with_split(node);
            let before = std::mem::take(p.count(node));
            *p.count(tree.left_child(node)) += before.saturating_sub(moved);
            if target == self.me() {
                *p.count(right) += moved;
            }
            p.counts.retain(|(n, _)| *n != node);
        }
        self.mark_split(v, node).await?;
        if target != self.me() {
            let mut batch = Batch::default();
            for (key, _) in &moving {
                batch.delete_raw(key);
            }
            self.store.write(batch).map_err(internal)?;
        }
        self.counters.splits.fetch_add(1, Ordering::Relaxed);
        self.counters
            .edges_moved
            .fetch_add(moved, Ordering::Relaxed);
        Ok(())
    }

    async fn mark_split(&self, v: &[u8], node: Node) -> Result<(), Status> {
        let home = self.placement.home(v);
        if home == self.me() {
            // Two servers may split two partitions of one vertex at once.
            let _lock = self.split_lock.lock().expect("split lock");
            let x = self
                .store
                .split_state(v)
                .map_err(internal)?
                .with_split(node);
            let mut batch = Batch::default();
            batch.put_split(v, x);
            self.store.write(batch).map_err(internal)?;
            if let Some(p) = self.parts.lock().expect("parts lock").get_mut(v) {
                p.x = SplitState(p.x.0 | x.0);
            }
            Ok(())
        } else {
            let req = rpc::MarkSplitRequest {
                src: v.to_vec(),
                node: node.index(),
            };
            self.call(home, &req, |mut peer, req| async move {
                peer.mark_split(req).await
            })
            .await
            .map(drop)
        }
    }

    /// Delivers every pending reverse edge to its server.
    async fn deliver_pending(self: &Arc<Self>) -> Result<(), Error> {
        let store_error = |source| Error::Store {
            path: self.config.data.clone(),
            source,
        };
        let mut pending = Vec::new();
        for (id, value) in self.store.pending().map_err(store_error)? {
            let corrupt = || store_error(crate::store::StoreError::Corrupt(id.clone()));
            let ts = u64::from_be_bytes(
                id.get(..8)
                    .ok_or_else(corrupt)?
                    .try_into()
                    .expect("8 bytes"),
            );
            let mut edge = rpc::EdgePut::decode(value.as_slice()).map_err(|_| corrupt())?;
            // Its version is the one in its id (stores written before
            // edges carried one hold 0 in the value).
            edge.ts = ts;
            pending.push((id, edge));
        }
        if pending.is_empty() {
            return Ok(());
        }
        self.deliver(pending).await
    }

    /// Writes reverse edges, each stamped with its own `ts`, on their
    /// servers, one request per server ([`DELIVERY_OPS`] edges at most
    /// each), re-routing those that meet a
    /// split; then drops them from the pending family.
    async fn deliver(self: &Arc<Self>, group: Vec<(Vec<u8>, rpc::EdgePut)>) -> Result<(), Error> {
        let mut known: HashMap<Vec<u8>, SplitState> = HashMap::new();
        let (ids, mut todo): (Vec<Vec<u8>>, Vec<rpc::EdgePut>) = group.into_iter().unzip();
        for _ in 0..64 {
            if todo.is_empty() {
                let mut batch = Batch::default();
                for id in ids {
                    batch.remove_pending(id);
                }
                return self.store.write(batch).map_err(|source| Error::Store {
                    path: self.config.data.clone(),
                    source,
                });
            }
            let mut by_server: BTreeMap<usize, Vec<rpc::Op>> = BTreeMap::new();
            for mut edge in todo.drain(..) {
                let x = known.get(&edge.src).copied().unwrap_or_default();
                let (server, node) = self.placement.edge(&edge.src, &edge.dst, x);
                edge.node = node.index();
                by_server.entry(server).or_default().push(rpc::Op {
                    op: Some(op::Op::Edge(edge)),
                });
            }
            let mut calls = tokio::task::JoinSet::new();
            // At most `DELIVERY_OPS` a request: a backlog redelivered after a
            // long outage stays far below the message size limit.
            let requests = by_server.into_iter().flat_map(|(server, ops)| {
                delivery_chunks(ops)
                    .into_iter()
                    .map(move |chunk| (server, chunk))
            });
            for (server, ops) in requests {
                let req = rpc::WriteRequest {
                    session_ts: 0,
                    ops,
                    reverse: true,
                };
                let shared = self.clone();
                calls.spawn(async move {
                    let reply = if server == shared.me() {
                        shared.write(req.clone()).await
                    } else {
                        shared
                            .call(server, &req, |mut peer, req| async move {
                                peer.write(req).await
                            })
                            .await
                    };
                    (server, req.ops, reply)
                });
            }
            while let Some(joined) = calls.join_next().await {
                let (server, mut ops, reply) = joined.expect("deliveries do not panic");
                let reply =
                    reply.map_err(|s| Error::rpc(&self.config.cluster.servers[server].addr, &s))?;
                for stale in reply.stale {
                    let x = split_from(&stale.split).unwrap_or_default();
                    let entry = known.entry(stale.src).or_default();
                    *entry = SplitState(entry.0 | x.0);
                    if let Some(op::Op::Edge(e)) =
                        ops.get_mut(stale.op as usize).and_then(|o| o.op.take())
                    {
                        todo.push(e);
                    }
                }
            }
        }
        Err(Error::Cluster(
            "reverse edges keep meeting stale partitions".into(),
        ))
    }

    fn travel(&self, id: u64) -> Arc<TravelState> {
        let mut travels = self.travels.lock().expect("travels lock");
        let state = travels.entry(id).or_default();
        // Under the lock, so the upkeep never drops a state being used.
        state
            .last_used_ms
            .store(self.uptime_ms(), Ordering::Relaxed);
        state.clone()
    }

    fn has_ended(&self, travel: u64) -> bool {
        self.ended.lock().expect("ended lock").contains_key(&travel)
    }

    /// Drops a traversal's state at its client's request; its late
    /// batches are dropped too.
    async fn end_travel(&self, travel: u64) {
        self.ended
            .lock()
            .expect("ended lock")
            .insert(travel, self.uptime_ms());
        let removed = self.travels.lock().expect("travels lock").remove(&travel);
        if let Some(state) = removed {
            if let Some(task) = state.stop_prefetch() {
                task.await.ok();
            }
        }
    }

    fn uptime_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Drops the state of traversals no request has named for
    /// `travel_idle` (their client died mid-traversal), stopping their
    /// prefetchers, and forgets ended traversals as old.
    fn drop_idle_travels(&self) {
        let now = self.uptime_ms();
        let idle = u64::try_from(self.config.travel_idle.as_millis()).unwrap_or(u64::MAX);
        self.travels
            .lock()
            .expect("travels lock")
            .retain(|_, state| {
                let keep = now.saturating_sub(state.last_used_ms.load(Ordering::Relaxed)) < idle;
                if !keep {
                    state.stop_prefetch();
                }
                keep
            });
        self.ended
            .lock()
            .expect("ended lock")
            .retain(|_, at| now.saturating_sub(*at) < idle);
    }

    /// Sends `entries` (by home server) as step `step`'s frontier.
    async fn send_frontier(
        self: &Arc<Self>,
        travel: u64,
        step: u32,
        by_server: HashMap<usize, Vec<rpc::Entry>>,
        counts: &mut rpc::StepCounts,
    ) -> Result<(), Status> {
        let mut calls = tokio::task::JoinSet::new();
        for (server, entries) in by_server {
            if server == self.me() {
                let state = self.travel(travel);
                state
                    .frontier
                    .lock()
                    .expect("frontier lock")
                    .entry(step)
                    .or_default()
                    .extend(entries);
                continue;
            }
            let req = rpc::FrontierRequest {
                travel,
                step,
                entries,
            };
            self.send_step(
                &mut calls,
                server,
                counts,
                req,
                |mut peer, req| async move { peer.frontier(req).await },
            );
        }
        while let Some(done) = calls.join_next().await {
            done.map_err(internal)??;
        }
        Ok(())
    }

    /// Scans the local partition of each entry's vertex for `hop`, and
    /// returns the destinations by their home server.
    async fn expand_local(
        &self,
        travel: &TravelState,
        entries: &[rpc::Entry],
        hop: &rpc::Hop,
        as_of: u64,
        paths: bool,
        counts: &mut rpc::StepCounts,
    ) -> Result<HashMap<usize, Vec<rpc::Entry>>, Status> {
        let filters: Vec<Filter> = hop
            .edge_filters
            .iter()
            .filter_map(Filter::from_rpc)
            .collect();
        let mut out: HashMap<usize, Vec<rpc::Entry>> = HashMap::new();
        for entry in entries {
            let cached = travel
                .cache
                .lock()
                .expect("cache lock")
                .edges
                .remove(&(entry.id.clone(), hop.etype.clone()));
            let edges = match cached {
                Some(edges) => {
                    counts.prefetch_hits += 1;
                    edges
                }
                None => self.local_edges(&entry.id, Some(&hop.etype), as_of).await?,
            };
            counts.partition_scans += 1;
            counts.edge_reads += edges.len() as u64;
            for edge in edges {
                if !edge_passes(&filters, &edge.props) {
                    continue;
                }
                counts.edges += 1;
                let home = self.placement.home(&edge.dst);
                if home != self.me() {
                    counts.stat_comm += 1;
                }
                let path = if paths {
                    let mut p = entry.path.clone();
                    p.push(entry.id.clone());
                    p
                } else {
                    Vec::new()
                };
                out.entry(home)
                    .or_default()
                    .push(rpc::Entry { id: edge.dst, path });
            }
        }
        Ok(out)
    }

    fn prefetch(self: &Arc<Self>, travel: u64, step: u32, hop: Option<rpc::Hop>, as_of: u64) {
        let state = self.travel(travel);
        let stop = Arc::new(AtomicBool::new(false));
        let shared = self.clone();
        let flag = stop.clone();
        let cache = state.cache.clone();
        let task = tokio::task::spawn_blocking(move || {
            let mut loaded = 0u64;
            let mut seen = HashSet::new();
            // A client that vanished mid-traversal never stops it: give up.
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            while !flag.load(Ordering::Relaxed) && std::time::Instant::now() < deadline {
                let ids: Vec<Vec<u8>> = {
                    let frontier = state.frontier.lock().expect("frontier lock");
                    frontier
                        .get(&step)
                        .into_iter()
                        .flatten()
                        .filter(|e| !seen.contains(&e.id))
                        .map(|e| e.id.clone())
                        .collect()
                };
                if ids.is_empty() {
                    std::thread::sleep(Duration::from_micros(200));
                    continue;
                }
                for id in ids {
                    if flag.load(Ordering::Relaxed) {
                        break;
                    }
                    seen.insert(id.clone());
                    loaded += shared.prefetch_vertex(&cache, &id, hop.as_ref(), as_of);
                }
            }
            loaded
        });
        *self.travel(travel).prefetch.lock().expect("prefetch lock") = Some((stop, task));
    }

    /// Loads `id`, its local edges of the hop and their local destinations
    /// into `cache`; returns the entries loaded. Skips what needs another
    /// server (the paper prefetches nothing remote).
    fn prefetch_vertex(
        &self,
        cache: &Mutex<Cache>,
        id: &[u8],
        hop: Option<&rpc::Hop>,
        as_of: u64,
    ) -> u64 {
        let mut loaded = 0;
        let mut load_vertex = |v: &[u8]| {
            if cache.lock().expect("cache lock").vertices.contains_key(v) {
                return;
            }
            if let Ok(state) = self.store.read_vertex(v, as_of) {
                cache
                    .lock()
                    .expect("cache lock")
                    .vertices
                    .insert(v.to_vec(), state);
                loaded += 1;
            }
        };
        load_vertex(id);
        let Some(hop) = hop else { return loaded };
        let known = !self.config.partitioner.splits()
            || self.parts.lock().expect("parts lock").contains_key(id)
            || self.placement.home(id) == self.me();
        if !known {
            return loaded;
        }
        let Ok(mut edges) = self.store.scan_edges(id, Some(&hop.etype), as_of) else {
            return loaded;
        };
        edges.retain(|e| self.is_local(id, &e.dst));
        for e in &edges {
            if self.placement.home(&e.dst) == self.me() {
                load_vertex(&e.dst);
            }
        }
        cache
            .lock()
            .expect("cache lock")
            .edges
            .insert((id.to_vec(), hop.etype.clone()), edges);
        loaded + 1
    }

    fn counts(&self, step: u32) -> rpc::StepCounts {
        rpc::StepCounts {
            server: u32::try_from(self.me()).expect("servers fit u32"),
            step,
            ..Default::default()
        }
    }

    /// Reads each entry's vertex as of `as_of` (from the prefetch cache when
    /// it is there) and keeps those that exist and pass `filters`.
    fn visit(
        &self,
        state: &TravelState,
        entries: Vec<rpc::Entry>,
        filters: &[rpc::Filter],
        as_of: u64,
        counts: &mut rpc::StepCounts,
    ) -> Result<Vec<rpc::Entry>, Status> {
        let filters: Vec<Filter> = filters.iter().filter_map(Filter::from_rpc).collect();
        let mut passed = Vec::new();
        for entry in entries {
            if self.placement.home(&entry.id) != self.me() {
                return Err(invalid(format!(
                    "vertex {} is not homed here",
                    printable(&entry.id)
                )));
            }
            let cached = state
                .cache
                .lock()
                .expect("cache lock")
                .vertices
                .remove(&entry.id);
            let vertex = match cached {
                Some(v) => {
                    counts.prefetch_hits += 1;
                    v
                }
                None => self.store.read_vertex(&entry.id, as_of).map_err(internal)?,
            };
            counts.vertex_reads += 1;
            if vertex.is_some_and(|v| vertex_passes(&filters, &v.vtype, &v.attrs)) {
                passed.push(entry);
            }
        }
        Ok(passed)
    }

    /// The entries whose vertices have partitions on other servers, by
    /// server (this is the vertices' home, which knows their split state).
    fn remote_partitions(
        &self,
        passed: &[rpc::Entry],
        counts: &mut rpc::StepCounts,
    ) -> Result<HashMap<usize, Vec<rpc::Entry>>, Status> {
        let mut remote: HashMap<usize, Vec<rpc::Entry>> = HashMap::new();
        for entry in passed {
            let x = if self.config.partitioner.splits() {
                self.store.split_state(&entry.id).map_err(internal)?
            } else {
                SplitState::default()
            };
            for server in self
                .placement
                .scan_servers(&entry.id, x)
                .into_iter()
                .skip(1)
            {
                counts.stat_comm += 1;
                remote.entry(server).or_default().push(entry.clone());
            }
        }
        Ok(remote)
    }

    /// Sends `remote` partitions of this step's vertices to be expanded,
    /// and returns the counts of the servers that expanded them.
    async fn expand_remote(
        self: &Arc<Self>,
        req: (u64, u32, u64, bool),
        hop: &rpc::Hop,
        remote: HashMap<usize, Vec<rpc::Entry>>,
        counts: &mut rpc::StepCounts,
    ) -> Result<Vec<rpc::StepCounts>, Status> {
        let (travel, step, as_of, paths) = req;
        let mut calls = tokio::task::JoinSet::new();
        for (server, entries) in remote {
            let req = rpc::ExpandRequest {
                travel,
                step,
                hop: Some(hop.clone()),
                as_of,
                entries,
                paths,
            };
            self.send_step(
                &mut calls,
                server,
                counts,
                req,
                |mut peer, req| async move { peer.expand(req).await },
            );
        }
        let mut work = Vec::new();
        while let Some(done) = calls.join_next().await {
            work.extend(done.map_err(internal)??.counts);
        }
        Ok(work)
    }

    async fn run_step(
        self: &Arc<Self>,
        req: rpc::RunStepRequest,
    ) -> Result<rpc::RunStepReply, Status> {
        self.check_session(req.as_of)?;
        self.check_hops([&req.hop, &req.next_hop])?;
        let state = self.travel(req.travel);
        let mut counts = self.counts(req.step);
        counts.prefetched = match state.stop_prefetch() {
            Some(task) => task.await.unwrap_or(0),
            None => 0,
        };
        let mut entries = state
            .frontier
            .lock()
            .expect("frontier lock")
            .remove(&req.step)
            .unwrap_or_default();
        if req.paths {
            entries.sort_by(|a, b| (&a.id, &a.path).cmp(&(&b.id, &b.path)));
            entries.dedup_by(|a, b| a.id == b.id && a.path == b.path);
        } else {
            entries.sort_by(|a, b| a.id.cmp(&b.id));
            entries.dedup_by(|a, b| a.id == b.id);
        }
        let passed = self.visit(&state, entries, &req.vertex_filters, req.as_of, &mut counts)?;
        let mut reply = rpc::RunStepReply::default();
        if let Some(hop) = &req.hop {
            let mut next = self
                .expand_local(&state, &passed, hop, req.as_of, req.paths, &mut counts)
                .await?;
            let remote = self.remote_partitions(&passed, &mut counts)?;
            reply.work = self
                .expand_remote(
                    (req.travel, req.step, req.as_of, req.paths),
                    hop,
                    remote,
                    &mut counts,
                )
                .await?;
            let step = req.step + 1;
            let mine = next.remove(&self.me());
            self.send_frontier(req.travel, step, next, &mut counts)
                .await?;
            if let Some(mine) = mine {
                state
                    .frontier
                    .lock()
                    .expect("frontier lock")
                    .entry(step)
                    .or_default()
                    .extend(mine);
            }
            if req.prefetch {
                self.prefetch(req.travel, step, req.next_hop.clone(), req.as_of);
            }
        }
        if req.keep {
            reply.kept = passed;
        }
        reply.work.push(counts);
        Ok(reply)
    }

    async fn expand(self: &Arc<Self>, req: rpc::ExpandRequest) -> Result<rpc::ExpandReply, Status> {
        let hop = req.hop.ok_or_else(|| invalid("expand names no hop"))?;
        let state = self.travel(req.travel);
        let mut counts = self.counts(req.step);
        let next = self
            .expand_local(
                &state,
                &req.entries,
                &hop,
                req.as_of,
                req.paths,
                &mut counts,
            )
            .await?;
        self.send_frontier(req.travel, req.step + 1, next, &mut counts)
            .await?;
        Ok(rpc::ExpandReply {
            counts: Some(counts),
        })
    }
}

#[derive(Clone)]
struct Service(Arc<Shared>);

#[tonic::async_trait]
impl Meta for Service {
    async fn hello(
        &self,
        _: Request<rpc::HelloRequest>,
    ) -> Result<Response<rpc::HelloReply>, Status> {
        let c = &self.0.config;
        Ok(Response::new(rpc::HelloReply {
            index: u32::try_from(c.index).expect("servers fit u32"),
            cluster: c.cluster.addrs(),
            cluster_id: c.cluster.id.clone(),
            ids: c.cluster.ids(),
            partitioner: c.partitioner.name().to_string(),
            vnodes: c.vnodes,
            threshold: c.threshold,
            now: self.0.clock.read_time(0),
            schema: serde_json::to_string(&c.schema).expect("a schema serialises"),
            max_value_bytes: c.max_value_bytes as u64,
        }))
    }

    async fn write(
        &self,
        req: Request<rpc::WriteRequest>,
    ) -> Result<Response<rpc::WriteReply>, Status> {
        // In its own task: a client that gives up must not cancel a group
        // commit that other requests wait on.
        let shared = self.0.clone();
        tokio::spawn(async move { shared.write(req.into_inner()).await })
            .await
            .map_err(|e| Status::internal(format!("the write failed: {e}")))?
            .map(Response::new)
    }

    async fn read_vertex(
        &self,
        req: Request<rpc::ReadVertexRequest>,
    ) -> Result<Response<rpc::ReadVertexReply>, Status> {
        let req = req.into_inner();
        self.0.check_home(&req.id)?;
        let ts = self.0.read_time(req.as_of, req.session_ts)?;
        let state = self.0.store.read_vertex(&req.id, ts).map_err(internal)?;
        Ok(Response::new(match state {
            Some(s) => rpc::ReadVertexReply {
                found: true,
                vtype: s.vtype,
                attrs: s.attrs,
                ts,
            },
            None => rpc::ReadVertexReply {
                ts,
                ..Default::default()
            },
        }))
    }

    async fn scan_edges(
        &self,
        req: Request<rpc::ScanEdgesRequest>,
    ) -> Result<Response<rpc::ScanEdgesReply>, Status> {
        let req = req.into_inner();
        let ts = self.0.read_time(req.as_of, req.session_ts)?;
        let etype = (!req.etype.is_empty()).then_some(req.etype.as_str());
        let edges = self.0.local_edges(&req.src, etype, ts).await?;
        let x = self
            .0
            .parts
            .lock()
            .expect("parts lock")
            .get(&req.src)
            .map_or_else(SplitState::default, |p| p.x);
        Ok(Response::new(rpc::ScanEdgesReply {
            edges: edges
                .into_iter()
                .map(|e| rpc::Edge {
                    etype: e.etype,
                    dst: e.dst,
                    props: e.props,
                    ts: e.ts,
                })
                .collect(),
            split: split_bytes(x),
            ts,
        }))
    }

    async fn get_split(
        &self,
        req: Request<rpc::GetSplitRequest>,
    ) -> Result<Response<rpc::GetSplitReply>, Status> {
        let req = req.into_inner();
        self.0.check_home(&req.id)?;
        let x = self.0.store.split_state(&req.id).map_err(internal)?;
        Ok(Response::new(rpc::GetSplitReply {
            split: split_bytes(x),
        }))
    }

    async fn adopt(&self, req: Request<rpc::AdoptRequest>) -> Result<Response<rpc::Ack>, Status> {
        let req = req.into_inner();
        let node = node_from(req.node)?;
        if node.depth == 0
            || node.pos % 2 == 0
            || self.0.placement.node_server(&req.src, node) != self.0.me()
        {
            return Err(invalid(format!(
                "partition {} of {} is not this server's to adopt",
                req.node,
                printable(&req.src)
            )));
        }
        // Learn the split before the entries land, so that loading the
        // vertex's partitions never counts them against the old state.
        self.0.load_parts(&req.src).await?;
        let mut batch = Batch::default();
        let mut groups = HashSet::new();
        for e in &req.entries {
            let parsed = crate::key::parse(&e.key)
                .filter(|p| p.vertex == req.src && p.section == Section::Edge);
            let Some(parsed) = parsed else {
                return Err(invalid("an adopted entry is not an edge of the vertex"));
            };
            if crate::store::decode_edge_value(&e.value).is_none() {
                return Err(invalid(format!(
                    "the adopted edge {} has a value that is not an edge version",
                    printable(&e.key)
                )));
            }
            groups.insert((parsed.name, parsed.dst));
            batch.put_raw(&e.key, &e.value);
        }
        {
            let mut parts = self.0.parts.lock().expect("parts lock");
            let p = parts.get_mut(&req.src).expect("loaded above");
            // This server may not have seen the splits above the parent,
            // made by other servers since it last looked.
            p.x = p.x.with_ancestors_of(node);
            *p.count(node) += groups.len() as u64;
        }
        self.0.store.write(batch).map_err(internal)?;
        Ok(Response::new(rpc::Ack {}))
    }

    async fn mark_split(
        &self,
        req: Request<rpc::MarkSplitRequest>,
    ) -> Result<Response<rpc::Ack>, Status> {
        let req = req.into_inner();
        self.0.check_home(&req.src)?;
        let node = node_from(req.node)?;
        // Servers trust each other (the cluster's network is private, as
        // the paper's is); this only refuses what no server would send.
        if self.0.placement.tree().right_child(node).is_none() {
            return Err(invalid(format!("partition {} cannot split", req.node)));
        }
        self.0.mark_split(&req.src, node).await?;
        Ok(Response::new(rpc::Ack {}))
    }

    async fn frontier(
        &self,
        req: Request<rpc::FrontierRequest>,
    ) -> Result<Response<rpc::Ack>, Status> {
        let req = req.into_inner();
        let state = self.0.travel(req.travel);
        state
            .frontier
            .lock()
            .expect("frontier lock")
            .entry(req.step)
            .or_default()
            .extend(req.entries);
        Ok(Response::new(rpc::Ack {}))
    }

    async fn expand(
        &self,
        req: Request<rpc::ExpandRequest>,
    ) -> Result<Response<rpc::ExpandReply>, Status> {
        self.0.expand(req.into_inner()).await.map(Response::new)
    }

    async fn flow(&self, req: Request<rpc::FlowRequest>) -> Result<Response<rpc::Ack>, Status> {
        self.0.enqueue(req.into_inner())?;
        Ok(Response::new(rpc::Ack {}))
    }

    async fn progress(
        &self,
        req: Request<rpc::ProgressRequest>,
    ) -> Result<Response<rpc::ProgressReply>, Status> {
        Ok(Response::new(
            self.0.progress(req.into_inner().travel).await,
        ))
    }

    async fn run_step(
        &self,
        req: Request<rpc::RunStepRequest>,
    ) -> Result<Response<rpc::RunStepReply>, Status> {
        self.0.run_step(req.into_inner()).await.map(Response::new)
    }

    async fn end_travel(
        &self,
        req: Request<rpc::EndTravelRequest>,
    ) -> Result<Response<rpc::Ack>, Status> {
        self.0.end_travel(req.into_inner().travel).await;
        Ok(Response::new(rpc::Ack {}))
    }

    async fn stats(
        &self,
        _: Request<rpc::StatsRequest>,
    ) -> Result<Response<rpc::StatsReply>, Status> {
        let c = &self.0.counters;
        Ok(Response::new(rpc::StatsReply {
            writes: c.writes.load(Ordering::Relaxed),
            splits: c.splits.load(Ordering::Relaxed),
            messages: c.messages.load(Ordering::Relaxed),
            bytes: c.bytes.load(Ordering::Relaxed),
            edges_moved: c.edges_moved.load(Ordering::Relaxed),
            travels: self.0.travels.lock().expect("travels lock").len() as u64,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A request to a port nobody listens on is seen as refused (so it is
    /// tried again); a server's own Unavailable is not.
    #[tokio::test]
    async fn a_refused_connection_is_told_from_a_server_answer() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        drop(listener);
        let mut peer = connect_lazy(&[addr]).unwrap().remove(0);
        let status = peer.hello(rpc::HelloRequest {}).await.unwrap_err();
        assert!(refused(&status), "{status:?}");
        assert!(!refused(&Status::unavailable("reverse edges wait")));
    }

    fn vertex(id: &str, vtype: &str, attrs: &[(&str, &str)]) -> rpc::Op {
        rpc::Op {
            op: Some(op::Op::Vertex(rpc::VertexPut {
                id: id.as_bytes().to_vec(),
                vtype: vtype.into(),
                attrs: attrs
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.as_bytes().to_vec()))
                    .collect(),
            })),
        }
    }

    /// A server alone in its cluster, not serving: its writes are called
    /// directly.
    /// A delivery of 9,000 edges goes in two requests, 8,192 then 808,
    /// every edge once and in order.
    #[test]
    fn a_large_delivery_is_cut_into_requests_in_order() {
        let ops: Vec<rpc::Op> = (0..9_000u64)
            .map(|ts| rpc::Op {
                op: Some(op::Op::Edge(rpc::EdgePut {
                    ts,
                    ..Default::default()
                })),
            })
            .collect();
        let chunks = delivery_chunks(ops.clone());
        let sizes: Vec<usize> = chunks.iter().map(Vec::len).collect();
        assert_eq!(sizes, [DELIVERY_OPS, 9_000 - DELIVERY_OPS]);
        assert_eq!(chunks.concat(), ops);
        assert!(delivery_chunks(Vec::new()).is_empty());
    }

    fn one_server() -> (tempfile::TempDir, Arc<Shared>) {
        let dir = tempfile::tempdir().unwrap();
        let config = ServerConfig {
            cluster: Membership::fresh(&["127.0.0.1:1".into()], 0),
            data: dir.path().to_path_buf(),
            ..ServerConfig::default()
        };
        let shared = open(config).unwrap().shared;
        (dir, shared)
    }

    /// `ops` as a client's write for a group, and where its answer comes.
    fn queued(
        ops: Vec<rpc::Op>,
    ) -> (
        Queued,
        tokio::sync::oneshot::Receiver<Result<rpc::WriteReply, Status>>,
    ) {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let req = rpc::WriteRequest {
            session_ts: 0,
            ops,
            reverse: false,
        };
        (Queued { req, reply }, answer)
    }

    /// One group commit of requests that depend on each other: a delete
    /// tombstones what an earlier request of the group put, a type
    /// conflict with an earlier request refuses that request whole, and
    /// the others are stored, each at its own timestamp.
    #[tokio::test]
    async fn a_group_commits_each_request_whole_and_in_order() {
        let (_dir, shared) = one_server();
        let delete = rpc::Op {
            op: Some(op::Op::DeleteVertex(rpc::VertexDelete {
                id: b"/x".to_vec(),
            })),
        };
        let requests = [
            vec![vertex("/x", "file", &[("owner", "ann")])],
            vec![delete],
            vec![vertex("/x", "job", &[])],
            vec![vertex("/y", "file", &[])],
            vec![
                vertex("/z", "file", &[]),
                vertex("/y", "job", &[("owner", "bob")]),
            ],
        ];
        let (group, answers): (Vec<_>, Vec<_>) = requests.into_iter().map(queued).unzip();
        for q in &group {
            shared.validate(&q.req).unwrap();
        }
        let committed = shared.commit(group).await;
        tokio::spawn(shared.clone().acknowledge(committed));
        let mut stamps = Vec::new();
        for (i, answer) in answers.into_iter().enumerate() {
            match answer.await.unwrap() {
                Ok(reply) => stamps.push(reply.ts),
                Err(status) => {
                    assert_eq!(i, 4, "{status}");
                    assert!(status.message().contains("/y is a file"), "{status}");
                }
            }
        }
        assert_eq!(stamps.len(), 4);
        assert!(stamps.windows(2).all(|w| w[0] < w[1]), "{stamps:?}");
        let now = shared.clock.read_time(0);
        let x = shared.store.read_vertex(b"/x", now).unwrap().unwrap();
        assert_eq!(x.vtype, "job");
        assert!(x.attrs.is_empty(), "the delete missed {:?}", x.attrs);
        let before_delete = shared.store.read_vertex(b"/x", stamps[0]).unwrap().unwrap();
        assert_eq!(before_delete.attrs.len(), 1);
        let y = shared.store.read_vertex(b"/y", now).unwrap().unwrap();
        assert_eq!((y.vtype.as_str(), y.attrs.len()), ("file", 0));
        assert_eq!(shared.store.read_vertex(b"/z", now).unwrap(), None);
    }

    /// A write with an edge of a vertex whose partition is splitting waits
    /// outside the group until the split ends, then is committed; the rest
    /// of the group is not held up.
    #[tokio::test]
    async fn an_edge_of_a_splitting_vertex_waits_for_the_split() {
        let (_dir, shared) = one_server();
        shared
            .splitting
            .lock()
            .unwrap()
            .insert(b"job:1".to_vec(), Vec::new());
        let edge = rpc::Op {
            op: Some(op::Op::Edge(rpc::EdgePut {
                src: b"job:1".to_vec(),
                etype: "contains".into(),
                dst: b"job:1/rank:0".to_vec(),
                ..Default::default()
            })),
        };
        let (group, mut answers): (Vec<_>, Vec<_>) =
            [vec![edge], vec![vertex("job:2", "job", &[])]]
                .into_iter()
                .map(queued)
                .unzip();
        let committed = shared.commit(group).await;
        tokio::spawn(shared.clone().acknowledge(committed));
        let mut edge_answer = answers.remove(0);
        answers.remove(0).await.unwrap().unwrap();
        let edges = |shared: &Shared| {
            shared
                .store
                .scan_edges(b"job:1", None, shared.clock.read_time(0))
                .unwrap()
                .len()
        };
        assert!(edge_answer.try_recv().is_err(), "answered during the split");
        assert_eq!(edges(&shared), 0);
        shared.end_split(b"job:1");
        let reply = edge_answer.await.unwrap().unwrap();
        assert!(reply.stale.is_empty());
        assert_eq!(edges(&shared), 1);
        // Its reverse edge was delivered (to this, the only server).
        let back = shared
            .store
            .scan_edges(b"job:1/rank:0", None, shared.clock.read_time(0))
            .unwrap();
        assert_eq!(back.len(), 1);
    }
}
