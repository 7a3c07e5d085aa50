//! The BSP engine of one node: the paper's `process_vertices` and
//! `process_edges` over a frontier of the vertices this node owns, run by
//! worker threads that grab 64 active vertices at a time from one shared
//! counter (RGraph's task grabbing; a pull, over every destination, grabs
//! 1,024), with messages to the other nodes' masters.
//!
//! `process_edges` runs one superstep in either direction. Push: every
//! active owned vertex signals along its edges (RGraph's only mode), and
//! the result is reduced into the destination: its master when this node
//! owns it, otherwise its mirror here, which forwards to the master: at
//! once when it changed for a min-like program (so a mirror sends only
//! improvements), or once at the end of the superstep for a sum. Pull:
//! every owned vertex gathers what its active in-neighbours contribute
//! (Beamer's bottom-up step), reading its own in-edges only. The other
//! nodes' sources among them are mirrors here: before the gather, every
//! node sends the state of each of its active vertices to the nodes that
//! own one of its neighbours, once per node, in the same message blocks as
//! a push (a round of its own, ended by a barrier). Gemini's dense mode
//! instead gathers, for every destination the owned sources reach, into a
//! mirror that forwards to the master; on a symmetric graph that reads
//! every vertex's list on every node (the graph file's whole share of
//! memory on each) or holds a transpose of the node's edges beside them.
//! Under [`Direction::Auto`] a superstep pulls when the frontier's
//! edges, over all nodes, exceed |E|/20 (Gemini's threshold), and, for a
//! program whose pulls narrow (BFS), after a pull it keeps pulling while
//! the frontier holds |V|/24 vertices (Beamer's return rule); on a node
//! alone, a min-combining program whose pulls read every edge (SSSP) pulls
//! only when every edge's source is active (see [`PULL_THRESHOLD`]).
//! Light passes over every owned vertex ([`Engine::for_each_owned`])
//! claim [`RUN`] vertices at a time instead.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use quiver_csr::Graph;
use quiver_run::Progress;
use quiver_verbs::{Node, Reduce};
use rayon::ThreadPool;
use serde::{Deserialize, Serialize};

use crate::channel::{Channel, Traffic};
use crate::frontier::{vertex, Bitmap, Frontier, WordBuffer};
use crate::local::LocalGraph;
use crate::migrate::Worklists;
use crate::partition::Partition;
use crate::program::{Combine, EdgeProgram, Edges};
use crate::rings::Rings;
use crate::sends::Sends;
use crate::{Error, Result};

/// Vertices a worker claims per grab: RGraph's and Gemini's `min_work`.
pub const GRAB: usize = 64;

/// Destinations a worker claims per grab in a pull superstep, which visits
/// every destination: with claims of [`GRAB`], the shared counter and the
/// edge count bounced between the cores 16,384 times per pull on a million
/// vertices (BFS on Kronecker 20, first pull: median 16 ms against 23 ms
/// with [`GRAB`], 8 runs each, alternating; PageRank unchanged).
pub const PULL_GRAB: usize = 1024;

/// Vertices a worker claims at a time in [`Engine::for_each_owned`].
pub const RUN: usize = 16384;

/// Under [`Direction::Auto`] a superstep of a program that sums, or whose
/// pulls narrow, pulls when its frontier's edges exceed |E| / this
/// (Beamer's α, with |E| for the unexplored vertices' edges, which an
/// engine that does not know what a program has explored cannot count),
/// unless [`PUSH_BELOW`] keeps it pulling. On a node alone, a
/// min-combining program whose pulls read every edge (SSSP) pulls only a
/// frontier holding every edge.
pub const PULL_THRESHOLD: u64 = 20;

/// After a pull, a program whose pulls narrow
/// ([`EdgeProgram::pull_narrows`]) pulls again while its frontier holds at
/// least |V| / this vertices (Beamer's β), whatever their edges: a frontier
/// of many low-degree vertices has few edges, but pushing from it reads
/// their lists and their neighbours' states at random, while pulling reads
/// in order only the lists of the vertices still unsettled. On Kronecker
/// 20, BFS's fifth superstep (68,692 vertices, 91,056 edges) pulls.
pub const PUSH_BELOW: u64 = 24;

/// Which way supersteps move values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Active vertices write to their neighbours.
    Push,
    /// Vertices read from their active neighbours.
    Pull,
    /// Per superstep: pull when the frontier is dense, push when sparse
    /// (see [`PULL_THRESHOLD`] and [`PUSH_BELOW`]).
    #[default]
    Auto,
}

/// What one superstep of `process_edges` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Superstep {
    /// The direction it ran in.
    pub direction: Direction,
    /// Active vertices at its start, over all nodes.
    pub active: u64,
    /// Edges this node read.
    pub edges: u64,
    /// Messages this node sent to other nodes.
    pub messages: u64,
    /// Bytes of messages this node sent.
    pub bytes_sent: u64,
    /// WRITEs or SENDs this node posted (blocks, END markers, credits).
    pub writes: u64,
    /// Tasks this node took from other nodes' worklists.
    pub migrated: u64,
    /// Time this node's workers computed, its own tasks and migrated ones,
    /// in nanoseconds (before ending the superstep with the others).
    pub busy_ns: u64,
    /// Time this node spent in it, in nanoseconds (including waiting for
    /// the others at its end).
    pub ns: u64,
}

/// How messages travel between nodes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Transport {
    /// RGraph's: one-sided WRITEs of message blocks into receive rings at the target.
    #[default]
    OneSided,
    /// The baseline: SEND of the same blocks into receives the target keeps posted.
    TwoSided,
}

/// The other nodes of a job and how to reach them.
#[derive(Debug)]
pub struct Peers {
    node: Node,
    partition: Partition,
    channels: Box<dyn Channel>,
    /// The published worklists of task migration, when balancing.
    worklists: Option<Worklists>,
}

impl Peers {
    /// This node's view of a job partitioned by `partition`, with
    /// `workers` workers on every node, messaging by `transport`, and
    /// migrating tasks between nodes while more than `migrate_threshold`
    /// are left on one (`None`: no migration). Every node calls it.
    pub fn new(
        node: &Node,
        partition: Partition,
        workers: usize,
        transport: Transport,
        migrate_threshold: Option<u32>,
    ) -> Result<Peers> {
        let channels: Box<dyn Channel> = match transport {
            Transport::OneSided => Box::new(Rings::new(node, workers)?),
            Transport::TwoSided => Box::new(Sends::new(node, workers)?),
        };
        let owned = partition.range(node.rank().index());
        let worklists = migrate_threshold
            .map(|threshold| Worklists::new(node, owned.end - owned.start, workers, threshold))
            .transpose()?;
        Ok(Peers {
            node: node.clone(),
            partition,
            channels,
            worklists,
        })
    }

    /// The job's node handle.
    pub fn node(&self) -> &Node {
        &self.node
    }

    /// Bytes of this node's message buffers (rings or posted receives)
    /// and its published worklist.
    pub fn buffer_bytes(&self) -> u64 {
        self.channels.bytes() + self.worklists.as_ref().map_or(0, Worklists::bytes)
    }
}

/// The engine of one node: its edges, its workers, its peers.
pub struct Engine<'g> {
    graph: &'g Graph,
    /// Edges over all nodes (on the programs' side).
    total_edges: u64,
    local: LocalGraph<'g>,
    peers: Option<Peers>,
    progress: &'g dyn Progress,
    pool: ThreadPool,
    direction: Direction,
    supersteps: Vec<Superstep>,
}

impl<'g> Engine<'g> {
    /// An engine over the vertices `local` owns of `graph`, with `threads`
    /// workers (at least 1) running supersteps in `direction`, reaching the
    /// other nodes through `peers` (`None`: this node is the whole job).
    pub fn new(
        graph: &'g Graph,
        local: LocalGraph<'g>,
        peers: Option<Peers>,
        threads: usize,
        direction: Direction,
        progress: &'g dyn Progress,
    ) -> Result<Self> {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("bsp-worker-{i}"))
            .build()
            .map_err(Error::Threads)?;
        let total_edges = match &peers {
            Some(peers) => peers
                .node
                .all_reduce(local.num_edges(), Reduce::Sum)
                .map_err(Error::Verbs)?,
            None => local.num_edges(),
        };
        Ok(Engine {
            graph,
            total_edges,
            local,
            peers,
            progress,
            pool,
            direction,
            supersteps: Vec::new(),
        })
    }

    /// The whole graph (its mapped file).
    pub fn graph(&self) -> &'g Graph {
        self.graph
    }

    /// This node's edges.
    pub fn local(&self) -> &LocalGraph<'g> {
        &self.local
    }

    /// Number of vertices of the graph.
    pub fn num_vertices(&self) -> u32 {
        self.graph.num_vertices()
    }

    /// The vertices this node owns.
    pub fn owned(&self) -> Range<u32> {
        self.local.owned()
    }

    /// The job's peers, if any.
    pub fn peers(&self) -> Option<&Peers> {
        self.peers.as_ref()
    }

    /// Edges over all nodes (on the programs' side).
    pub fn total_edges(&self) -> u64 {
        self.total_edges
    }

    /// The supersteps run so far.
    pub fn supersteps(&self) -> &[Superstep] {
        &self.supersteps
    }

    /// Every owned vertex as a frontier.
    pub fn all_owned(&self) -> Frontier {
        Frontier::every(self.num_vertices(), self.owned())
    }

    /// `value` summed over all nodes.
    pub fn sum(&self, value: u64) -> Result<u64> {
        self.reduce(value, Reduce::Sum)
    }

    /// The least `value` over all nodes.
    pub fn min(&self, value: u64) -> Result<u64> {
        self.reduce(value, Reduce::Min)
    }

    fn reduce(&self, value: u64, op: Reduce) -> Result<u64> {
        match &self.peers {
            Some(peers) => peers.node.all_reduce(value, op).map_err(Error::Verbs),
            None => Ok(value),
        }
    }

    /// `value` summed over all nodes.
    pub fn sum_f64(&self, value: f64) -> Result<f64> {
        match self.peers() {
            Some(peers) => {
                let all = peers
                    .node()
                    .all_gather(&value.to_le_bytes())
                    .map_err(Error::Verbs)?;
                all.iter()
                    .map(|bytes| {
                        let word: [u8; 8] = bytes.as_slice().try_into().map_err(|_| {
                            Error::Corrupt(format!("a node sent {} bytes for an f64", bytes.len()))
                        })?;
                        Ok(f64::from_le_bytes(word))
                    })
                    .sum()
            }
            None => Ok(value),
        }
    }

    /// Every node's `mine` (its owned vertices' values, in order), joined
    /// into one array over all vertices (`mine` itself on a node alone).
    pub fn gather_owned(&self, mine: Vec<u32>) -> Result<Vec<u32>> {
        let Some(peers) = self.peers() else {
            return Ok(mine);
        };
        let bytes: Vec<u8> = mine.iter().flat_map(|x| x.to_le_bytes()).collect();
        let all = peers.node().all_gather(&bytes).map_err(Error::Verbs)?;
        let joined: Vec<u32> = all
            .iter()
            .flat_map(|part| part.chunks_exact(4))
            .map(|b| u32::from_le_bytes(b.try_into().expect("4 bytes")))
            .collect();
        if joined.len() != self.num_vertices() as usize {
            return Err(Error::Corrupt(format!(
                "the nodes' parts hold {} values for {} vertices",
                joined.len(),
                self.num_vertices()
            )));
        }
        Ok(joined)
    }

    /// Every node's `all` (a count for every vertex) summed, for the
    /// vertices this node owns: an all-gather of the whole arrays, |V|
    /// counts from each node.
    pub fn sum_owned(&self, all: &[u64]) -> Result<Vec<u64>> {
        let owned = self.owned();
        let mine = &all[owned.start as usize..owned.end as usize];
        let Some(peers) = self.peers() else {
            return Ok(mine.to_vec());
        };
        let bytes: Vec<u8> = all.iter().flat_map(|x| x.to_le_bytes()).collect();
        let parts = peers.node().all_gather(&bytes).map_err(Error::Verbs)?;
        let mut sums = vec![0u64; mine.len()];
        for part in &parts {
            if part.len() != bytes.len() {
                return Err(Error::Corrupt(format!(
                    "a node sent {} bytes of counts for {} vertices",
                    part.len(),
                    all.len()
                )));
            }
            let theirs = part[owned.start as usize * 8..owned.end as usize * 8].chunks_exact(8);
            for (sum, b) in sums.iter_mut().zip(theirs) {
                *sum += u64::from_le_bytes(b.try_into().expect("8 bytes"));
            }
        }
        Ok(sums)
    }

    /// Runs `work` in this engine's thread pool, for rayon's parallel
    /// iterators over more than the owned vertices.
    pub fn install<R: Send>(&self, work: impl FnOnce() -> R + Send) -> R {
        self.pool.install(work)
    }

    /// Fills `out` (one slot per owned vertex, in order) with `f` of each
    /// owned vertex, in parallel.
    pub fn map_owned<T: Send>(&self, out: &mut [T], f: impl Fn(u32) -> T + Sync) {
        use rayon::prelude::*;
        let start = self.owned().start;
        self.pool.install(|| {
            out.par_iter_mut()
                .enumerate()
                .with_min_len(1024)
                .for_each(|(i, slot)| *slot = f(start + vertex(i)));
        });
    }

    /// The paper's `process_vertices`: `work` on every vertex of `active`
    /// (every owned vertex when `None`), in parallel; returns the sum of
    /// its results on this node.
    pub fn process_vertices<R>(
        &self,
        active: Option<&Frontier>,
        work: impl Fn(u32) -> R + Sync,
    ) -> R
    where
        R: Default + Send + std::ops::AddAssign,
    {
        let owned = self.owned();
        let sums = match active {
            Some(frontier) => self.grab(frontier.len(), GRAB, |range, sum: &mut R, _| {
                for v in frontier.part(range) {
                    *sum += work(v);
                }
            }),
            None => self.grab(owned.len(), GRAB, |range, sum: &mut R, _| {
                for i in range {
                    *sum += work(owned.start + vertex(i));
                }
            }),
        };
        let mut total = R::default();
        for sum in sums {
            total += sum;
        }
        total
    }

    /// Runs `work` on every owned vertex in parallel, each worker claiming
    /// [`RUN`] consecutive vertices at a time: for passes that do a few
    /// memory accesses per vertex (WCC's links and pointer jumps), where
    /// claims of [`GRAB`] break each worker's sequential walk through the
    /// vertices' arrays, which the CPU's prefetchers follow.
    pub fn for_each_owned(&self, work: impl Fn(u32) + Sync) {
        let owned = self.owned();
        self.grab(owned.len(), RUN, |range, (): &mut (), _| {
            for i in range {
                work(owned.start + vertex(i));
            }
        });
    }

    /// Runs `work` on every owned vertex in parallel, claims of [`GRAB`]
    /// vertices, with state of its own in each worker (scratch space that
    /// a vertex's work reuses from the last), made by `S::default`.
    pub fn for_each_owned_with<S: Default + Send>(&self, work: impl Fn(&mut S, u32) + Sync) {
        let owned = self.owned();
        self.grab(owned.len(), GRAB, |range, state: &mut S, _| {
            for i in range {
                work(state, owned.start + vertex(i));
            }
        });
    }

    /// The paper's `process_edges`: one superstep of `program` from
    /// `active`; returns this node's part of the frontier it activated.
    pub fn process_edges(
        &mut self,
        active: &Frontier,
        program: &impl EdgeProgram,
    ) -> Result<Frontier> {
        let started = quiver_run::Stopwatch::start();
        let active_count = self.sum(active.len() as u64)?;
        let direction = match self.direction {
            Direction::Auto
                if program.pull_narrows()
                    && self
                        .supersteps
                        .last()
                        .is_some_and(|last| last.direction == Direction::Pull)
                    && active_count * PUSH_BELOW >= u64::from(self.num_vertices()) =>
            {
                Direction::Pull
            }
            Direction::Auto => {
                let local_edges = if active.len() == self.owned().len() {
                    self.local.num_edges()
                } else {
                    self.process_vertices(Some(active), |v| self.local.degree(v))
                };
                let active_edges = self.sum(local_edges)?;
                // A pull reads every edge unless the program's pulls
                // narrow, and on a node alone a min's push costs about
                // what a pull does an edge (SSSP on Kronecker 20: 2.1-2.9
                // ns an edge pushed, 3.3 pulled), so such a program pulls
                // only a frontier holding every edge. A sum's push adds by
                // compare-and-swap; across nodes a push sends a message
                // per improved remote neighbour where a pull sends each
                // active vertex's state once per node (WCC's propagation
                // on Kronecker 20, 2 tcp nodes: pushed, medians of 3
                // alternating runs 309 ms against 294 ms, and 99.0 MiB
                // peak against 92.5 with its worklists published).
                let reads_all = self.peers.is_none()
                    && !program.pull_narrows()
                    && program.combine() == Combine::Min;
                let pull = if reads_all {
                    active_edges > 0 && active_edges >= self.total_edges
                } else {
                    active_edges > self.total_edges / PULL_THRESHOLD
                };
                if pull {
                    Direction::Pull
                } else {
                    Direction::Push
                }
            }
            fixed => fixed,
        };
        // A push superstep publishes its tasks for migration. A node that
        // looks before they are published finds the last push superstep's
        // list used up, and leaves this node's tasks to it: a chance
        // missed, never a task run twice.
        let worklists = self
            .peers
            .as_ref()
            .and_then(|p| p.worklists.as_ref())
            .filter(|_| direction == Direction::Push && self.local.migratable());
        if let Some(worklists) = worklists {
            worklists.publish(active.vertices(), |v| program.state(v));
        }
        let next = Bitmap::new(self.num_vertices());
        let combine = program.combine();
        // Mirrors of a sum that a push sent to this superstep (a pull
        // writes only masters).
        let touched = (combine == Combine::Sum && direction == Direction::Push)
            .then(|| Bitmap::new(self.num_vertices()));
        let edges_read = AtomicU64::new(0);
        let busy_ns;

        let outcome: Result<Traffic> = {
            let this = &*self;
            let next = &next;
            let activates = program.activates();
            let deliver = |dst: u32, message: u64| {
                if program.reduce(dst, message) && activates {
                    next.insert(dst);
                }
            };
            // Applies a message to `dst` here, forwarding a mirror's change.
            let apply = |worker: usize, dst: u32, message: u64| -> Result<()> {
                let changed = program.reduce(dst, message);
                if this.local.owns(dst) {
                    if changed && activates {
                        next.insert(dst);
                    }
                    return Ok(());
                }
                match (&touched, &this.peers) {
                    (Some(touched), _) => {
                        touched.insert(dst);
                        Ok(())
                    }
                    (None, Some(peers)) if changed => {
                        let owner = peers.partition.owner(dst);
                        peers.channels.send(worker, owner, dst, message, &deliver)
                    }
                    _ => Ok(()),
                }
            };
            let poll = |worker: usize| -> Result<()> {
                match &this.peers {
                    Some(peers) => peers.channels.poll(worker, &deliver),
                    None => Ok(()),
                }
            };
            // A push, and a pull's round of mirror states, read the
            // frontier as a list: made here, if the frontier came from a
            // pull, so busy time stays the workers'.
            if direction == Direction::Push || this.peers.is_some() {
                active.list_for_parts();
            }
            let mirrored = match (&this.peers, direction) {
                (Some(peers), Direction::Pull | Direction::Auto) => {
                    this.send_mirror_states(peers, active, program)?
                }
                _ => Traffic::default(),
            };
            let busy = quiver_run::Stopwatch::start();
            let compute = match direction {
                Direction::Push => {
                    // One task: `src` (carrying `state`) signals along `edges`.
                    // Returns the edges it read.
                    let task =
                        |worker: usize, src: u32, state: u64, edges: Edges<'_>| -> Result<u64> {
                            for (i, &dst) in edges.vertices.iter().enumerate() {
                                if let Some(message) =
                                    program.signal(src, state, dst, edges.weight(i))
                                {
                                    apply(worker, dst, message)?;
                                }
                            }
                            Ok(edges.vertices.len() as u64)
                        };
                    match worklists {
                        None => this.grab(
                            active.len(),
                            GRAB,
                            |range, failed: &mut Option<Error>, worker| {
                                if failed.is_some() {
                                    return;
                                }
                                *failed = (|| {
                                    let mut read = 0;
                                    for src in active.part(range) {
                                        let edges = this.local.out_edges(src);
                                        read += task(worker, src, program.state(src), edges)?;
                                    }
                                    edges_read.fetch_add(read, Ordering::Relaxed);
                                    poll(worker)
                                })()
                                .err();
                            },
                        ),
                        // Grab from the published worklist, then migrate
                        // others' tasks (their edges are the graph's own).
                        Some(worklists) => this.pool.broadcast(|context| {
                            let worker = context.index();
                            (|| {
                                // Own tasks are the frontier's, in the order
                                // published: no need to read them back.
                                let mut read = 0;
                                while let Some(range) = worklists.grab(GRAB) {
                                    for src in active.part(range) {
                                        let edges = this.local.out_edges(src);
                                        read += task(worker, src, program.state(src), edges)?;
                                    }
                                    poll(worker)?;
                                }
                                while let Some(tasks) = worklists.steal(worker)? {
                                    for (src, state) in tasks {
                                        let edges = this.local.any_out_edges(src);
                                        read += task(worker, src, state, edges)?;
                                    }
                                    poll(worker)?;
                                }
                                edges_read.fetch_add(read, Ordering::Relaxed);
                                Ok(())
                            })()
                            .err()
                        }),
                    }
                }
                Direction::Pull | Direction::Auto => {
                    let owned = this.owned();
                    this.grab(owned.len(), PULL_GRAB, |range, (): &mut (), _| {
                        let mut read = 0;
                        // Activated masters, a bitmap word at a time.
                        let mut word = WordBuffer::default();
                        for i in range {
                            let dst = owned.start + vertex(i);
                            if !program.wants_pull(dst) {
                                continue;
                            }
                            let edges = this.local.in_edges(dst);
                            read += edges.vertices.len() as u64;
                            let Some(message) = program.gather(dst, edges, active) else {
                                continue;
                            };
                            if program.assign(dst, message) && activates {
                                word.insert(next, dst);
                            }
                        }
                        word.flush(next);
                        edges_read.fetch_add(read, Ordering::Relaxed);
                    });
                    Vec::new()
                }
            };
            if let Some(error) = compute.into_iter().flatten().next() {
                return Err(error);
            }
            busy_ns = busy.elapsed_ns();
            // Sums forward their mirrors once, then every worker ends the
            // superstep with the other nodes.
            match &this.peers {
                Some(peers) => {
                    let forward = touched.as_ref().map(|touched| {
                        let owned = this.owned();
                        let mut mirrors = touched.members(0..owned.start);
                        mirrors.extend(touched.members(owned.end..this.num_vertices()));
                        mirrors
                    });
                    let forward = forward.unwrap_or_default();
                    let mut traffic =
                        this.end_round(peers, &deliver, &forward, |v| program.take(v))?;
                    traffic += mirrored;
                    Ok(traffic)
                }
                None => Ok(Traffic::default()),
            }
        };
        let traffic = outcome?;
        let frontier = Frontier::of_bits(next, self.owned());
        self.supersteps.push(Superstep {
            direction,
            active: active_count,
            edges: edges_read.into_inner(),
            messages: traffic.messages,
            bytes_sent: traffic.bytes,
            writes: traffic.writes,
            migrated: worklists.map_or(0, Worklists::take_migrated),
            busy_ns,
            ns: started.elapsed_ns(),
        });
        self.progress.advance(1);
        self.progress.check()?;
        Ok(frontier)
    }

    /// A pull's first round on a node of several: sends the state of each
    /// active owned vertex to every other node that owns one of its
    /// neighbours (where it is a mirror), and takes theirs: marks each
    /// in `active` and hands its state to [`EdgeProgram::mirror`]. Ends
    /// with the barrier, so that every mirror is set before any gather.
    fn send_mirror_states(
        &self,
        peers: &Peers,
        active: &Frontier,
        program: &impl EdgeProgram,
    ) -> Result<Traffic> {
        active.forget_others(self.owned());
        let me = peers.node.rank().index();
        let deliver = |src: u32, state: u64| {
            active.mark(src);
            program.mirror(src, state);
        };
        let sent = self.grab(
            active.len(),
            GRAB,
            |range, failed: &mut Option<Error>, worker| {
                if failed.is_some() {
                    return;
                }
                *failed = (|| {
                    for v in active.part(range) {
                        let state = program.state(v);
                        for node in self.local.readers(v) {
                            if node != me {
                                peers.channels.send(worker, node, v, state, &deliver)?;
                            }
                        }
                    }
                    peers.channels.poll(worker, &deliver)
                })()
                .err();
            },
        );
        if let Some(error) = sent.into_iter().flatten().next() {
            return Err(error);
        }
        self.end_round(peers, &deliver, &[], |_| unreachable!("nothing to forward"))
    }

    /// Ends a round of messages with the other nodes: the workers share
    /// `forward` (each vertex's `message` to its owner), then each finishes
    /// its rings; returns the round's traffic after the barrier, before
    /// which no node starts the next round (or leaves) while another may
    /// still return ring space to it or count this one's ENDs.
    fn end_round(
        &self,
        peers: &Peers,
        deliver: &(dyn Fn(u32, u64) + Sync),
        forward: &[u32],
        message: impl Fn(u32) -> u64 + Sync,
    ) -> Result<Traffic> {
        let finished = self.pool.broadcast(|context| -> Result<()> {
            let worker = context.index();
            let workers = context.num_threads();
            for &v in forward.iter().skip(worker).step_by(workers) {
                let owner = peers.partition.owner(v);
                peers.channels.send(worker, owner, v, message(v), deliver)?;
            }
            peers.channels.finish(worker, deliver)
        });
        finished.into_iter().collect::<Result<Vec<()>>>()?;
        let traffic = peers.channels.end_superstep();
        peers.node.barrier().map_err(Error::Verbs)?;
        Ok(traffic)
    }

    /// Task grabbing: every worker claims `size` consecutive items of
    /// `0..total` (fewer when that is more than a worker's share, so that
    /// few items still spread over every worker) from one shared counter
    /// until none are left, running `work` on each claim with its own `S`
    /// and its worker index; returns every worker's `S`.
    fn grab<S: Default + Send>(
        &self,
        total: usize,
        size: usize,
        work: impl Fn(Range<usize>, &mut S, usize) + Sync,
    ) -> Vec<S> {
        let size = size
            .min(total.div_ceil(self.pool.current_num_threads()))
            .max(1);
        let next = AtomicUsize::new(0);
        self.pool.broadcast(|context| {
            let mut state = S::default();
            loop {
                let start = next.fetch_add(size, Ordering::Relaxed);
                if start >= total {
                    break;
                }
                work(
                    start..(start + size).min(total),
                    &mut state,
                    context.index(),
                );
            }
            state
        })
    }
}

impl std::fmt::Debug for Engine<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("owned", &self.owned())
            .field("threads", &self.pool.current_num_threads())
            .field("direction", &self.direction)
            .field("supersteps", &self.supersteps.len())
            .finish_non_exhaustive()
    }
}
