//! The client library: routes writes and reads to the servers that hold
//! them, and drives level-synchronous traversals.
//!
//! A client finds a vertex's home by hashing and an edge's partition from
//! the vertex's split state, which it caches: no lookup service. A stale
//! cache costs one round trip (the server returns the edge unwritten with
//! its newer state). The client carries the newest timestamp it has seen
//! and sends it with every request, so it reads its own writes on any
//! server (session semantics).

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use quiver_run::InvalidArgument;
use serde::Serialize;

use crate::clock::wall_ns;
use crate::error::{Error, Result};
use crate::membership::{shown, Membership};
use crate::place::{Partitioner, Placement};
use crate::rpc::{self, connect_lazy, op, split_from, MAX_ID_BYTES};
use crate::schema::Schema;
use crate::store::{EdgeVersion, VertexState};
use crate::travel::{Filter, Travel};
use crate::tree::SplitState;

/// One write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Write {
    /// Creates a vertex or adds a version of its attributes.
    Vertex {
        /// Its id (a user id, a full path).
        id: Vec<u8>,
        /// Its type.
        vtype: String,
        /// Attributes to set.
        attrs: BTreeMap<String, Vec<u8>>,
    },
    /// Creates an edge or adds a version of its properties.
    Edge {
        /// Its source.
        src: Vec<u8>,
        /// Its relation.
        etype: String,
        /// Its destination.
        dst: Vec<u8>,
        /// Its properties.
        props: BTreeMap<String, Vec<u8>>,
    },
    /// Deletes a vertex (history stays readable as of earlier times).
    DeleteVertex {
        /// Its id.
        id: Vec<u8>,
    },
    /// Deletes an edge (and its reverse).
    DeleteEdge {
        /// Its source.
        src: Vec<u8>,
        /// Its relation.
        etype: String,
        /// Its destination.
        dst: Vec<u8>,
    },
}

/// What a batch of writes did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Written {
    /// The newest timestamp they were stamped with.
    pub ts: u64,
    /// Partitions they made split.
    pub splits: u64,
    /// Edges sent again after meeting a split the client did not know.
    pub rerouted: u64,
}

/// Which traversal engine runs a traversal.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Engine {
    /// Level-synchronous: every server finishes a step before any starts
    /// the next (the paper's default, with prefetching while waiting).
    #[default]
    Sync,
    /// Asynchronous (GraphTrek's way): entries flow on as soon as they are
    /// expanded, merged per server; no barrier, no prefetching; the end is
    /// found by counting batches.
    Async,
}

impl Engine {
    /// Its name, as [`str::parse`] reads it.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Sync => "sync",
            Engine::Async => "async",
        }
    }
}

impl std::fmt::Display for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Engine {
    type Err = String;
    fn from_str(s: &str) -> Result<Engine, String> {
        [Engine::Sync, Engine::Async]
            .into_iter()
            .find(|e| e.name() == s)
            .ok_or_else(|| format!("unknown engine {s:?} (sync, async)"))
    }
}

/// How a traversal runs.
#[derive(Clone, Copy, Debug)]
pub struct TravelOptions {
    /// Read the graph as of this time (ns since the epoch); now if `None`.
    pub as_of: Option<u64>,
    /// Servers prefetch the next step while they wait (paper §4.6; the
    /// synchronous engine only).
    pub prefetch: bool,
    /// The engine.
    pub engine: Engine,
}

impl Default for TravelOptions {
    fn default() -> TravelOptions {
        TravelOptions {
            as_of: None,
            prefetch: true,
            engine: Engine::Sync,
        }
    }
}

/// The counts of one traversal step.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct StepReport {
    /// Vertices read (the step's frontier, deduplicated per server).
    pub vertices: u64,
    /// Partition scans.
    pub scans: u64,
    /// Edges the partition scans returned (from the store, or from what
    /// the prefetcher read), filtered or not.
    pub edge_reads: u64,
    /// Edges followed.
    pub edges: u64,
    /// StatComm: vertex–partition pairs and edge–destination pairs on
    /// different servers.
    pub stat_comm: u64,
    /// StatReads: the most reads (vertices and edges read from the store)
    /// any one server made. The paper counts "requests falling into each
    /// storage server"; counting a partition scan as one request instead
    /// makes vertex-cut, which scans every server for every vertex, the
    /// worst balanced by 3.6-7x, the opposite of the paper's Figs. 13 and
    /// 15, so its requests are taken to be entry reads.
    pub stat_reads: u64,
    /// Requests between servers.
    pub messages: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Reads the prefetcher had already done.
    pub prefetch_hits: u64,
    /// The step's wall time (synchronous engine; the asynchronous one runs
    /// its steps at once).
    pub ns: u64,
}

/// A traversal's answer.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TravelResult {
    /// The snapshot it read.
    pub as_of: u64,
    /// For each `rtm()` step and the last: (step, its vertices, sorted).
    pub marked: Vec<(usize, Vec<Vec<u8>>)>,
    /// With `return_fp()`: every path, start to end, sorted.
    pub paths: Vec<Vec<Vec<u8>>>,
    /// Per step.
    pub steps: Vec<StepReport>,
    /// The whole traversal's wall time.
    pub ns: u64,
}

/// A traversal's answer with its ids as text (invalid UTF-8 replaced), as
/// a report prints it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TravelAnswer {
    /// The snapshot it read.
    pub as_of: u64,
    /// For each `rtm()` step and the last: (step, its vertices, sorted).
    pub marked: Vec<(usize, Vec<String>)>,
    /// With `return_fp()`: every path, start to end, sorted.
    pub paths: Vec<Vec<String>>,
    /// Per step.
    pub steps: Vec<StepReport>,
    /// The whole traversal's wall time.
    pub ns: u64,
}

impl From<TravelResult> for TravelAnswer {
    fn from(r: TravelResult) -> TravelAnswer {
        let text = |id: &Vec<u8>| String::from_utf8_lossy(id).into_owned();
        TravelAnswer {
            as_of: r.as_of,
            marked: r
                .marked
                .into_iter()
                .map(|(s, ids)| (s, ids.iter().map(text).collect()))
                .collect(),
            paths: r
                .paths
                .iter()
                .map(|p| p.iter().map(text).collect())
                .collect(),
            steps: r.steps,
            ns: r.ns,
        }
    }
}

/// What each step of `travel` does, on the wire: its filters, its hop
/// (none at the last), and whether it returns its vertices.
fn plan(travel: &Travel) -> Vec<rpc::StepSpec> {
    let last = travel.hops.len();
    (0..=last)
        .map(|step| rpc::StepSpec {
            vertex_filters: travel.levels[step]
                .filters
                .iter()
                .map(Filter::to_rpc)
                .collect(),
            hop: travel.hops.get(step).map(|h| h.to_rpc()),
            keep: travel.levels[step].mark || step == last,
        })
        .collect()
}

/// A step's report from every server's counts of it.
fn step_report(work: &[&rpc::StepCounts]) -> StepReport {
    let mut report = StepReport::default();
    let mut per_server: HashMap<u32, u64> = HashMap::new();
    for w in work {
        report.vertices += w.vertex_reads;
        report.scans += w.partition_scans;
        report.edge_reads += w.edge_reads;
        report.edges += w.edges;
        report.stat_comm += w.stat_comm;
        report.messages += w.messages;
        report.bytes += w.bytes;
        report.prefetch_hits += w.prefetch_hits;
        *per_server.entry(w.server).or_default() += w.vertex_reads + w.edge_reads;
    }
    report.stat_reads = per_server.values().copied().max().unwrap_or(0);
    report
}

impl TravelResult {
    /// Records step `step`: its report, and its kept entries if the step
    /// returns them (sorted ids; at the last step with paths, every path).
    /// False when no edge reached the next step, which then ends the
    /// traversal with an empty last step.
    fn record(
        &mut self,
        travel: &Travel,
        step: usize,
        report: StepReport,
        kept: Vec<rpc::Entry>,
    ) -> bool {
        let last = travel.hops.len();
        let followed = report.edges;
        self.steps.push(report);
        if travel.levels[step].mark || step == last {
            if travel.paths && step == last {
                let mut paths: Vec<Vec<Vec<u8>>> = kept
                    .iter()
                    .map(|e| {
                        let mut p = e.path.clone();
                        p.push(e.id.clone());
                        p
                    })
                    .collect();
                paths.sort();
                self.paths = paths;
            }
            let mut ids: Vec<Vec<u8>> = kept.into_iter().map(|e| e.id).collect();
            ids.sort();
            ids.dedup();
            self.marked.push((step, ids));
        }
        if step < last && followed == 0 {
            self.marked.push((last, Vec::new()));
            return false;
        }
        true
    }

    /// Every step's counts added up (StatReads too: the paper sums it over
    /// steps), with the whole traversal's wall time.
    pub fn totals(&self) -> StepReport {
        let mut t = StepReport {
            ns: self.ns,
            ..StepReport::default()
        };
        for s in &self.steps {
            t.vertices += s.vertices;
            t.scans += s.scans;
            t.edge_reads += s.edge_reads;
            t.edges += s.edges;
            t.stat_comm += s.stat_comm;
            t.stat_reads += s.stat_reads;
            t.messages += s.messages;
            t.bytes += s.bytes;
            t.prefetch_hits += s.prefetch_hits;
        }
        t
    }

    /// The last step's vertices.
    pub fn vertices(&self) -> &[Vec<u8>] {
        self.marked.last().map_or(&[], |(_, v)| v.as_slice())
    }
}

#[derive(Debug)]
struct Inner {
    membership: Membership,
    addrs: Vec<String>,
    servers: Vec<rpc::Peer>,
    placement: Placement,
    schema: Schema,
    max_value_bytes: usize,
    threshold: u32,
    splits: Mutex<HashMap<Vec<u8>, SplitState>>,
    session: AtomicU64,
}

/// A connection to a cluster; cheap to clone, and clones share the split
/// cache and the session.
#[derive(Clone, Debug)]
pub struct Client(Arc<Inner>);

fn status(addr: &str) -> impl Fn(tonic::Status) -> Error + '_ {
    move |s| Error::rpc(addr, &s)
}

impl Client {
    /// Connects to every server of `cluster` and checks that each is the
    /// server the cluster file names at its address (its id, its cluster's
    /// id, the same servers at the same addresses) and that they agree on
    /// the partitioner and its settings.
    pub async fn connect(cluster: &Membership) -> Result<Client> {
        if cluster.servers.is_empty() {
            return Err(Error::Cluster("the cluster names no server".into()));
        }
        let addrs = cluster.addrs();
        let servers = connect_lazy(cluster)?;
        let mut config: Option<(String, u32, u32, String, u64)> = None;
        for (i, (member, server)) in cluster.servers.iter().zip(&servers).enumerate() {
            let addr = &member.addr;
            let hello = server
                .clone()
                .hello(rpc::HelloRequest {})
                .await
                .map_err(status(addr))?
                .into_inner();
            let theirs = hello.ids.get(hello.index as usize);
            if hello.cluster_id != cluster.id || theirs != Some(&member.id) {
                return Err(Error::Cluster(format!(
                    "{addr} answers as server {} of cluster {}, not server {} of cluster {}: another cluster runs there",
                    theirs.map_or("?", String::as_str),
                    shown(&hello.cluster_id),
                    member.id,
                    shown(&cluster.id)
                )));
            }
            if hello.cluster != addrs || hello.ids != cluster.ids() || hello.index as usize != i {
                return Err(Error::Cluster(format!(
                    "{addr} (server {}) was started with another cluster file: {:?} at {:?}",
                    member.id, hello.ids, hello.cluster
                )));
            }
            let theirs = (
                hello.partitioner,
                hello.vnodes,
                hello.threshold,
                hello.schema,
                hello.max_value_bytes,
            );
            match &config {
                Some(ours) if *ours != theirs => {
                    return Err(Error::Cluster(format!(
                        "{addr} runs {} with {} virtual nodes, threshold {} (and its schema), the first server {} with {}, {}",
                        theirs.0, theirs.1, theirs.2, ours.0, ours.1, ours.2
                    )));
                }
                _ => config = Some(theirs),
            }
        }
        let (partitioner, vnodes, threshold, schema, max_value_bytes) =
            config.expect("one server at least");
        let partitioner: Partitioner = partitioner.parse().map_err(Error::Cluster)?;
        let schema: Schema = serde_json::from_str(&schema)
            .map_err(|e| Error::Cluster(format!("the servers' schema: {e}")))?;
        Ok(Client(Arc::new(Inner {
            membership: cluster.clone(),
            addrs,
            servers,
            placement: Placement::new(&cluster.ids(), vnodes, partitioner),
            schema,
            max_value_bytes: usize::try_from(max_value_bytes).unwrap_or(usize::MAX),
            threshold,
            splits: Mutex::new(HashMap::new()),
            session: AtomicU64::new(0),
        })))
    }

    /// The cluster's placement.
    pub fn placement(&self) -> &Placement {
        &self.0.placement
    }

    /// The edges a partition holds before it splits (DIDO and GIGA+).
    pub fn threshold(&self) -> u32 {
        self.0.threshold
    }

    /// The servers' addresses.
    pub fn servers(&self) -> &[String] {
        &self.0.addrs
    }

    /// The cluster this client connected to.
    pub fn membership(&self) -> &Membership {
        &self.0.membership
    }

    /// The newest timestamp this client has seen.
    pub fn session(&self) -> u64 {
        self.0.session.load(Ordering::Relaxed)
    }

    fn saw(&self, ts: u64) {
        self.0.session.fetch_max(ts, Ordering::Relaxed);
    }

    fn split_of(&self, v: &[u8]) -> SplitState {
        self.0
            .splits
            .lock()
            .expect("split cache")
            .get(v)
            .copied()
            .unwrap_or_default()
    }

    fn learn_split(&self, v: &[u8], x: SplitState) {
        let mut cache = self.0.splits.lock().expect("split cache");
        let known = cache.entry(v.to_vec()).or_default();
        *known = SplitState(known.0 | x.0);
    }

    fn route(&self, write: &Write) -> (usize, rpc::Op) {
        let p = &self.0.placement;
        match write {
            Write::Vertex { id, vtype, attrs } => (
                p.home(id),
                rpc::Op {
                    op: Some(op::Op::Vertex(rpc::VertexPut {
                        id: id.clone(),
                        vtype: vtype.clone(),
                        attrs: attrs.clone(),
                    })),
                },
            ),
            Write::DeleteVertex { id } => (
                p.home(id),
                rpc::Op {
                    op: Some(op::Op::DeleteVertex(rpc::VertexDelete { id: id.clone() })),
                },
            ),
            Write::Edge {
                src,
                etype,
                dst,
                props,
            } => self.route_edge(src, etype, dst, props, false),
            Write::DeleteEdge { src, etype, dst } => {
                self.route_edge(src, etype, dst, &BTreeMap::new(), true)
            }
        }
    }

    fn route_edge(
        &self,
        src: &[u8],
        etype: &str,
        dst: &[u8],
        props: &BTreeMap<String, Vec<u8>>,
        remove: bool,
    ) -> (usize, rpc::Op) {
        let (server, node) = self.0.placement.edge(src, dst, self.split_of(src));
        let edge = rpc::EdgePut {
            src: src.to_vec(),
            etype: etype.to_string(),
            dst: dst.to_vec(),
            props: props.clone(),
            node: node.index(),
            remove,
            ts: 0,
        };
        (
            server,
            rpc::Op {
                op: Some(op::Op::Edge(edge)),
            },
        )
    }

    /// Checks what the servers would refuse, so that a batch spanning
    /// servers is refused whole.
    fn validate(&self, writes: &[Write]) -> Result<(), InvalidArgument> {
        let id = |what: &'static str, id: &[u8]| {
            if id.is_empty() || id.len() > MAX_ID_BYTES {
                return Err(InvalidArgument::new(
                    what,
                    format!("must have 1 to {MAX_ID_BYTES} bytes, not {}", id.len()),
                ));
            }
            Ok(())
        };
        let values = |map: &BTreeMap<String, Vec<u8>>| {
            for (k, v) in map {
                id("attribute", k.as_bytes())?;
                if v.len() > self.0.max_value_bytes {
                    return Err(InvalidArgument::new(
                        "attribute",
                        format!(
                            "{k:?} has {} bytes; the limit is {}",
                            v.len(),
                            self.0.max_value_bytes
                        ),
                    ));
                }
            }
            Ok(())
        };
        for w in writes {
            match w {
                Write::Vertex {
                    id: v,
                    vtype,
                    attrs,
                } => {
                    id("vertex", v)?;
                    if !self.0.schema.has_type(vtype) {
                        return Err(InvalidArgument::new(
                            "vertex",
                            format!("unknown vertex type {vtype:?}"),
                        ));
                    }
                    values(attrs)?;
                }
                Write::DeleteVertex { id: v } => id("vertex", v)?,
                Write::Edge {
                    src,
                    etype,
                    dst,
                    props,
                } => {
                    id("source", src)?;
                    id("destination", dst)?;
                    if self.0.schema.relation(etype).is_none() {
                        return Err(InvalidArgument::new(
                            "edge",
                            format!("unknown relation {etype:?}"),
                        ));
                    }
                    values(props)?;
                }
                Write::DeleteEdge { src, etype, dst } => {
                    id("source", src)?;
                    id("destination", dst)?;
                    if self.0.schema.relation(etype).is_none() {
                        return Err(InvalidArgument::new(
                            "edge",
                            format!("unknown relation {etype:?}"),
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// The schema the servers run with.
    pub fn schema(&self) -> &Schema {
        &self.0.schema
    }

    /// Applies `writes`: one request per server, all servers at once; each
    /// server applies its share atomically, and what any server would
    /// refuse is refused here first, so a bad batch stores nothing. Edges
    /// that met a split the client did not know are sent again to the
    /// right partition.
    pub async fn write(&self, writes: &[Write]) -> Result<Written> {
        self.validate(writes)?;
        let mut done = Written::default();
        let mut todo: Vec<&Write> = writes.iter().collect();
        for round in 0..64 {
            if todo.is_empty() {
                return Ok(done);
            }
            if round > 0 {
                done.rerouted += todo.len() as u64;
            }
            let mut by_server: BTreeMap<usize, (Vec<rpc::Op>, Vec<&Write>)> = BTreeMap::new();
            for w in todo.drain(..) {
                let (server, op) = self.route(w);
                let entry = by_server.entry(server).or_default();
                entry.0.push(op);
                entry.1.push(w);
            }
            let mut calls = tokio::task::JoinSet::new();
            let mut sent = Vec::new();
            for (server, (ops, ws)) in by_server {
                let req = rpc::WriteRequest {
                    session_ts: self.session(),
                    ops,
                    reverse: false,
                };
                let mut client = self.0.servers[server].clone();
                let i = sent.len();
                sent.push((server, ws));
                calls.spawn(async move { (i, client.write(req).await) });
            }
            while let Some(joined) = calls.join_next().await {
                let (i, reply) = joined.expect("write tasks do not panic");
                let (server, ws) = &sent[i];
                let reply = reply.map_err(status(&self.0.addrs[*server]))?.into_inner();
                self.saw(reply.ts);
                done.ts = done.ts.max(reply.ts);
                done.splits += u64::from(reply.splits);
                for stale in reply.stale {
                    self.learn_split(&stale.src, split_from(&stale.split).unwrap_or_default());
                    let w = ws.get(stale.op as usize).ok_or_else(|| {
                        Error::Cluster("a server named a stale op it was not sent".into())
                    })?;
                    todo.push(w);
                }
            }
        }
        Err(Error::Cluster(
            "writes keep meeting partitions that split".into(),
        ))
    }

    /// Vertex `id` as of `as_of` (now if `None`).
    pub async fn read_vertex(&self, id: &[u8], as_of: Option<u64>) -> Result<Option<VertexState>> {
        let home = self.0.placement.home(id);
        let req = rpc::ReadVertexRequest {
            id: id.to_vec(),
            as_of: as_of.unwrap_or(0),
            session_ts: self.session(),
        };
        let reply = self.0.servers[home]
            .clone()
            .read_vertex(req)
            .await
            .map_err(status(&self.0.addrs[home]))?
            .into_inner();
        Ok(reply.found.then_some(VertexState {
            vtype: reply.vtype,
            attrs: reply.attrs,
        }))
    }

    /// The edges of `src` (of `etype` only, when given) as of `as_of`, from
    /// every server holding a partition, each (type, destination) once.
    pub async fn scan_edges(
        &self,
        src: &[u8],
        etype: Option<&str>,
        as_of: Option<u64>,
    ) -> Result<Vec<EdgeVersion>> {
        let p = &self.0.placement;
        let as_of = as_of.unwrap_or_else(|| wall_ns().max(self.session()));
        if p.partitioner().splits() {
            let home = p.home(src);
            let reply = self.0.servers[home]
                .clone()
                .get_split(rpc::GetSplitRequest { id: src.to_vec() })
                .await
                .map_err(status(&self.0.addrs[home]))?
                .into_inner();
            self.learn_split(src, split_from(&reply.split).unwrap_or_default());
        }
        let mut edges: BTreeMap<(String, Vec<u8>), EdgeVersion> = BTreeMap::new();
        let mut scanned = Vec::new();
        loop {
            let todo: Vec<usize> = p
                .scan_servers(src, self.split_of(src))
                .into_iter()
                .filter(|s| !scanned.contains(s))
                .collect();
            if todo.is_empty() {
                break;
            }
            for server in todo {
                scanned.push(server);
                let req = rpc::ScanEdgesRequest {
                    src: src.to_vec(),
                    etype: etype.unwrap_or_default().to_string(),
                    as_of,
                    session_ts: self.session(),
                };
                let reply = self.0.servers[server]
                    .clone()
                    .scan_edges(req)
                    .await
                    .map_err(status(&self.0.addrs[server]))?
                    .into_inner();
                self.learn_split(src, split_from(&reply.split).unwrap_or_default());
                for e in reply.edges {
                    let version = EdgeVersion {
                        etype: e.etype,
                        dst: e.dst,
                        props: e.props,
                        ts: e.ts,
                    };
                    let key = (version.etype.clone(), version.dst.clone());
                    if edges.get(&key).is_none_or(|old| old.ts < version.ts) {
                        edges.insert(key, version);
                    }
                }
            }
        }
        Ok(edges.into_values().collect())
    }

    /// Runs `travel` level-synchronously: this client is the barrier; each
    /// step runs on every server at once and ends when all have finished
    /// it and sent the next step's frontier.
    pub async fn travel(&self, travel: &Travel, options: TravelOptions) -> Result<TravelResult> {
        travel.validate()?;
        // A misspelt relation would otherwise match no edge and answer
        // nothing.
        let schema = &self.0.schema;
        if let Some(hop) = travel
            .hops
            .iter()
            .find(|h| schema.relation(&h.etype).is_none())
        {
            let known: Vec<&str> = schema.relations.keys().map(String::as_str).collect();
            return Err(InvalidArgument::new(
                "travel",
                format!(
                    "e({}) names an unknown relation; the schema has {}",
                    hop.etype,
                    known.join(", ")
                ),
            )
            .into());
        }
        let started = Instant::now();
        let as_of = options
            .as_of
            .unwrap_or_else(|| wall_ns().max(self.session()));
        // Unique across clients: this process, this moment, this client's count.
        static TRAVELS: AtomicU64 = AtomicU64::new(0);
        let seed = format!(
            "{}/{}/{}",
            std::process::id(),
            wall_ns(),
            TRAVELS.fetch_add(1, Ordering::Relaxed)
        );
        let id = crate::place::stable_hash(seed.as_bytes(), 0);
        let p = &self.0.placement;
        let mut seeds: BTreeMap<usize, Vec<rpc::Entry>> = BTreeMap::new();
        for v in &travel.start {
            seeds.entry(p.home(v)).or_default().push(rpc::Entry {
                id: v.clone(),
                path: Vec::new(),
            });
        }
        let result = match options.engine {
            Engine::Sync => {
                self.run_steps(travel, seeds, options.prefetch, id, as_of)
                    .await
            }
            Engine::Async => self.run_flow(travel, seeds, id, as_of).await,
        };
        for (server, client) in self.0.servers.iter().enumerate() {
            // Best effort: a server that is gone has no state to drop.
            if let Err(e) = client
                .clone()
                .end_travel(rpc::EndTravelRequest { travel: id })
                .await
            {
                tracing::debug!(
                    "ending traversal on {}: {}",
                    self.0.addrs[server],
                    e.message()
                );
            }
        }
        let mut result = result?;
        result.ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        Ok(result)
    }

    async fn run_steps(
        &self,
        travel: &Travel,
        seeds: BTreeMap<usize, Vec<rpc::Entry>>,
        prefetch: bool,
        id: u64,
        as_of: u64,
    ) -> Result<TravelResult> {
        for (server, entries) in seeds {
            let req = rpc::FrontierRequest {
                travel: id,
                step: 0,
                entries,
            };
            self.0.servers[server]
                .clone()
                .frontier(req)
                .await
                .map_err(status(&self.0.addrs[server]))?;
        }
        let mut result = TravelResult {
            as_of,
            ..Default::default()
        };
        let plan = plan(travel);
        for (step, spec) in plan.iter().enumerate() {
            let started = Instant::now();
            let mut calls = tokio::task::JoinSet::new();
            for (server, client) in self.0.servers.iter().enumerate() {
                let req = rpc::RunStepRequest {
                    travel: id,
                    step: u32::try_from(step).expect("steps are bounded"),
                    as_of,
                    vertex_filters: spec.vertex_filters.clone(),
                    hop: spec.hop.clone(),
                    keep: spec.keep,
                    paths: travel.paths,
                    next_hop: plan.get(step + 1).and_then(|next| next.hop.clone()),
                    prefetch,
                };
                let mut client = client.clone();
                calls.spawn(async move { (server, client.run_step(req).await) });
            }
            let mut work = Vec::new();
            let mut kept = Vec::new();
            while let Some(joined) = calls.join_next().await {
                let (server, reply) = joined.expect("step tasks do not panic");
                let reply = reply.map_err(status(&self.0.addrs[server]))?.into_inner();
                kept.extend(reply.kept);
                work.extend(reply.work);
            }
            let mut report = step_report(&work.iter().collect::<Vec<_>>());
            report.ns = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
            if !result.record(travel, step, report, kept) {
                break;
            }
        }
        Ok(result)
    }

    /// The asynchronous engine: the start batches go to their homes, the
    /// servers work with no barrier, and this client polls them until the
    /// batches they have finished equal, one poll later, the batches sent
    /// (see the server's `flow` module), gathering what each step kept and
    /// did as it goes.
    async fn run_flow(
        &self,
        travel: &Travel,
        seeds: BTreeMap<usize, Vec<rpc::Entry>>,
        id: u64,
        as_of: u64,
    ) -> Result<TravelResult> {
        let last = travel.hops.len();
        let plan = plan(travel);
        let mut started = 0u64;
        for (server, entries) in seeds {
            let req = rpc::FlowRequest {
                travel: id,
                step: 0,
                as_of,
                paths: travel.paths,
                plan: plan.clone(),
                entries,
                scan: false,
            };
            started += 1;
            self.0.servers[server]
                .clone()
                .flow(req)
                .await
                .map_err(status(&self.0.addrs[server]))?;
        }
        let mut kept: Vec<Vec<rpc::Entry>> = vec![Vec::new(); last + 1];
        let mut work = Vec::new();
        let mut done_before = None;
        // Each server's process: a restart resets its counts.
        let mut instances: Vec<Option<u64>> = vec![None; self.0.servers.len()];
        loop {
            let mut calls = tokio::task::JoinSet::new();
            for (server, client) in self.0.servers.iter().enumerate() {
                let mut client = client.clone();
                let req = rpc::ProgressRequest { travel: id };
                calls.spawn(async move { (server, client.progress(req).await) });
            }
            let (mut sent, mut done) = (started, 0);
            while let Some(joined) = calls.join_next().await {
                let (server, reply) = joined.expect("progress tasks do not panic");
                let addr = &self.0.addrs[server];
                let reply = reply.map_err(status(addr))?.into_inner();
                if !reply.error.is_empty() {
                    return Err(Error::Rpc {
                        server: addr.clone(),
                        code: tonic::Code::from_i32(reply.error_code),
                        message: reply.error,
                    });
                }
                if *instances[server].get_or_insert(reply.instance) != reply.instance {
                    return Err(Error::Rpc {
                        server: addr.clone(),
                        code: tonic::Code::Unavailable,
                        message: "restarted during the traversal, which lost its part".into(),
                    });
                }
                sent += reply.sent;
                done += reply.done;
                for k in reply.kept {
                    if let (Some(entry), Some(list)) = (k.entry, kept.get_mut(k.step as usize)) {
                        list.push(entry);
                    }
                }
                work.extend(reply.work);
            }
            if done_before == Some(sent) {
                break;
            }
            done_before = Some(done);
        }
        let mut result = TravelResult {
            as_of,
            ..Default::default()
        };
        for (step, kept) in kept.into_iter().enumerate() {
            let work: Vec<&rpc::StepCounts> =
                work.iter().filter(|w| w.step as usize == step).collect();
            if !result.record(travel, step, step_report(&work), kept) {
                break;
            }
        }
        Ok(result)
    }

    /// Each server's counters.
    pub async fn stats(&self) -> Result<Vec<rpc::StatsReply>> {
        let mut out = Vec::new();
        for (addr, client) in self.0.addrs.iter().zip(&self.0.servers) {
            out.push(
                client
                    .clone()
                    .stats(rpc::StatsRequest {})
                    .await
                    .map_err(status(addr))?
                    .into_inner(),
            );
        }
        Ok(out)
    }
}
