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

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use prost::Message;
use tonic::service::interceptor::InterceptedService;
use tonic::{Request, Response, Status};

use crate::clock::Clock;
use crate::error::{Error, Result};
use crate::membership::{DataLock, Identity};
use crate::place::Placement;
use crate::rpc::meta_server::MetaServer;
use crate::rpc::{self, connect_lazy, refused, split_from};
use crate::store::{EdgeVersion, Store};
use crate::tree::{Node, SplitState};

mod config;
mod deliver;
mod flow;
mod service;
mod split;
mod step;
mod validate;
mod write;

pub use config::{Prefetch, ServerConfig, MAX_VNODES};
use deliver::REDELIVERY_WARN_EVERY;
use service::Service;
use step::TravelState;
use write::Queued;

/// The environment variable that names a point where a server stops its
/// work for good, after saying so on stderr, so that a test can kill it
/// there (with SIGKILL) and check what a restart recovers:
/// `split-adopted` (the right child's server holds the moved edges; the
/// split is not marked), `split-marked` (the home has marked it; the moved
/// edges are not deleted here), `delivery-pending` (a group's reverse
/// edges are stored as pending; none is sent) and `delivery-sent` (all are
/// written on their servers; the pending entries are not removed).
pub const PAUSE_AT: &str = "QUIVER_META_PAUSE_AT";

/// The cores of this host.
fn host_cores() -> usize {
    std::thread::available_parallelism().map_or(1, usize::from)
}

/// How long a stopping server waits for work in flight.
const WIND_DOWN: Duration = Duration::from_secs(10);

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
    peers: Vec<rpc::Peer>,
    travels: Mutex<HashMap<u64, Arc<TravelState>>>,
    /// Traversals their client has ended, with when (ms since start): late
    /// asynchronous batches of them are dropped.
    ended: Mutex<HashMap<u64, u64>>,
    started: std::time::Instant,
    /// This process, for clients to notice a restart (wall time at start).
    instance: u64,
    counters: Counters,
    pending_seq: AtomicU64,
    /// Pending reverse edges may wait that no delivery in flight will
    /// take: true at start (a crash may have left some) and after a
    /// delivery fails. The upkeep scans the pending family only then.
    redeliver: AtomicBool,
    /// The point where this server stops for a test to kill it
    /// ([`PAUSE_AT`]).
    pause_at: Option<String>,
    /// Traversals that ask for prefetching get it ([`Prefetch`]).
    prefetches: bool,
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
    /// Stops accepting requests, finishes those in flight, ends every
    /// traversal, flushes the store, and returns how serving ended; the
    /// store is closed by then unless work in flight outlived the wait
    /// (then a warning says so).
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
        peers: connect_lazy(&config.cluster)?,
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
        redeliver: AtomicBool::new(true),
        pause_at: std::env::var(PAUSE_AT).ok(),
        prefetches: config
            .prefetch
            .enabled(&config.cluster, config.index, host_cores()),
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
        // Every request carries the cluster's token, or is refused before
        // it is decoded.
        let token = shared.config.cluster.token.clone();
        let service = MetaServer::new(Service(shared.clone()))
            .max_decoding_message_size(rpc::MAX_MESSAGE_BYTES)
            .max_encoding_message_size(rpc::MAX_MESSAGE_BYTES);
        let service = InterceptedService::new(service, move |req: Request<()>| {
            if rpc::authorized(&req, &token) {
                Ok(req)
            } else {
                Err(Status::unauthenticated(
                    "no or a wrong cluster token: a client needs the cluster file the servers were started with",
                ))
            }
        });
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
            shared.wind_down().await;
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

fn invalid(message: impl Into<String>) -> Status {
    Status::invalid_argument(message.into())
}

fn internal(e: impl std::error::Error + 'static) -> Status {
    Status::internal(quiver_run::chain(&e))
}

fn printable(id: &[u8]) -> String {
    String::from_utf8_lossy(id).into_owned()
}

fn node_from(index: u32) -> Result<Node, Status> {
    if index < 127 {
        Ok(Node::from_index(index))
    } else {
        Err(invalid(format!("partition {index} is outside the tree")))
    }
}

impl Shared {
    /// After the last request: ends every traversal (prefetchers stop,
    /// asynchronous workers drop what is queued), then waits up to
    /// [`WIND_DOWN`] for the work still in flight (acknowledgements,
    /// deliveries, a worker's batch) to let go of the server, so the store
    /// closes when serving ends.
    async fn wind_down(self: &Arc<Self>) {
        let travels: Vec<u64> = self
            .travels
            .lock()
            .expect("travels lock")
            .keys()
            .copied()
            .collect();
        for travel in travels {
            self.end_travel(travel).await;
        }
        let deadline = std::time::Instant::now() + WIND_DOWN;
        while Arc::strong_count(self) > 1 && std::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        if Arc::strong_count(self) > 1 {
            tracing::warn!(
                "work still running {} s after the server stopped; its store closes when it ends",
                WIND_DOWN.as_secs()
            );
        }
    }

    /// Stops here for good if [`PAUSE_AT`] names `point`.
    async fn pause_point(&self, point: &str) {
        if self.pause_at.as_deref() == Some(point) {
            eprintln!(
                "quiver meta: server {} (pid {}) paused at {point} ({PAUSE_AT})",
                self.me(),
                std::process::id()
            );
            std::future::pending::<()>().await;
        }
    }

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
        rpc: impl Fn(rpc::Peer, Req) -> F,
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
        rpc: impl Fn(rpc::Peer, Req) -> F,
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
        rpc: impl Fn(rpc::Peer, Req) -> F + Send + 'static,
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
}
