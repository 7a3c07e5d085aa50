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
//! the frontier holds |V|/24 vertices (Beamer's return rule). Light passes
//! over every owned vertex ([`Engine::for_each_owned`]) claim [`RUN`]
//! vertices at a time instead.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

use quiver_csr::Graph;
use quiver_run::Progress;
use quiver_verbs::{Node, Reduce};
use rayon::ThreadPool;
use serde::{Deserialize, Serialize};

use crate::local::LocalGraph;
use crate::migrate::Worklists;
use crate::partition::Partition;
use crate::rings::{Rings, Traffic};
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

/// Under [`Direction::Auto`] a superstep pulls when its frontier's edges
/// exceed |E| / this (Beamer's α, with |E| for the unexplored vertices'
/// edges, which an engine that does not know what a program has explored
/// cannot count), unless [`PUSH_BELOW`] keeps it pulling.
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

/// The edges a program reads: out-edges, or every edge in both directions
/// (the graph taken as undirected).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// Edges as stored.
    Out,
    /// Every edge in both directions.
    Both,
}

/// How messages to one vertex combine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Combine {
    /// Idempotent (a minimum): a mirror forwards each improvement at once.
    Min,
    /// A sum: a mirror accumulates and forwards once per superstep.
    Sum,
}

/// A set of vertices bit by bit, set concurrently.
#[derive(Debug)]
pub struct Bitmap {
    words: Vec<AtomicU64>,
}

impl Bitmap {
    /// An empty set over `n` vertices.
    pub fn new(n: u32) -> Bitmap {
        Bitmap {
            words: (0..(n as usize).div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect(),
        }
    }

    /// Adds `v`; returns whether it was absent.
    #[inline]
    pub fn insert(&self, v: u32) -> bool {
        let bit = 1u64 << (v % 64);
        self.words[v as usize / 64].fetch_or(bit, Ordering::Relaxed) & bit == 0
    }

    /// Whether `v` is in the set.
    #[inline]
    pub fn contains(&self, v: u32) -> bool {
        self.words[v as usize / 64].load(Ordering::Relaxed) & (1u64 << (v % 64)) != 0
    }

    /// The members within `range`, ascending: a pass over the words, so
    /// O(|range| / 64 + members).
    pub fn members(&self, range: Range<u32>) -> Vec<u32> {
        let mut members = Vec::new();
        if range.is_empty() {
            return members;
        }
        let (first, last) = (range.start as usize / 64, (range.end as usize - 1) / 64);
        for (i, word) in self.words[first..=last].iter().enumerate() {
            let mut bits = word.load(Ordering::Relaxed);
            let base = u32::try_from((first + i) * 64).expect("vertex ids fit u32");
            while bits != 0 {
                let v = base + bits.trailing_zeros();
                if range.contains(&v) {
                    members.push(v);
                }
                bits &= bits - 1;
            }
        }
        members
    }

    /// How many members lie within `range`: a popcount over its words.
    pub fn count(&self, range: Range<u32>) -> usize {
        if range.is_empty() {
            return 0;
        }
        let (first, last) = (range.start as usize / 64, (range.end as usize - 1) / 64);
        // The bits of the first and last word that lie within the range.
        let from = u64::MAX << (range.start % 64);
        let to = u64::MAX >> (63 - (range.end - 1) % 64);
        self.words[first..=last]
            .iter()
            .enumerate()
            .map(|(i, word)| {
                let mut bits = word.load(Ordering::Relaxed);
                if i == 0 {
                    bits &= from;
                }
                if first + i == last {
                    bits &= to;
                }
                bits.count_ones() as usize
            })
            .sum()
    }
}

/// Bits for one word of a [`Bitmap`], set by one worker and or-ed into the
/// shared word once, instead of an atomic operation per vertex.
#[derive(Debug, Default)]
struct WordBuffer {
    word: usize,
    bits: u64,
}

impl WordBuffer {
    fn insert(&mut self, into: &Bitmap, v: u32) {
        let word = v as usize / 64;
        if word != self.word {
            self.flush(into);
            self.word = word;
        }
        self.bits |= 1 << (v % 64);
    }

    fn flush(&mut self, into: &Bitmap) {
        if self.bits != 0 {
            into.words[self.word].fetch_or(self.bits, Ordering::Relaxed);
            self.bits = 0;
        }
    }
}

/// The active vertices of a superstep that this node owns: a bitmap for
/// pulling and lookups, and the same vertices as a list for pushing (a
/// frontier of every vertex of its range needs none: [`Frontier::part`]
/// counts them). A superstep's result lists its vertices only when
/// something asks for them:
/// a pull that follows a pull reads the bitmap alone, and listing the
/// half-million vertices a BFS pull on Kronecker 20 activates took about
/// 2.7 ms, a sixth of that superstep.
#[derive(Debug)]
pub struct Frontier {
    bits: Bitmap,
    /// How many vertices are active.
    count: usize,
    /// Where they lie.
    range: Range<u32>,
    /// Them, listed.
    list: OnceLock<Vec<u32>>,
}

impl Frontier {
    /// The frontier holding `vertices` (of a graph of `n`).
    pub fn of(n: u32, vertices: impl IntoIterator<Item = u32>) -> Frontier {
        let bits = Bitmap::new(n);
        let list: Vec<u32> = vertices.into_iter().filter(|&v| bits.insert(v)).collect();
        Frontier {
            bits,
            count: list.len(),
            range: 0..n,
            list: OnceLock::from(list),
        }
    }

    /// Every vertex of `range` (of a graph of `n`), never listed: [`Frontier::part`]
    /// counts them off the range (a list of a million vertices is 4 MB).
    pub fn every(n: u32, range: Range<u32>) -> Frontier {
        let bits = Bitmap::new(n);
        for v in range.clone() {
            bits.insert(v);
        }
        Frontier::of_bits(bits, range)
    }

    /// The members of `bits` within `range`, listed when first asked for.
    fn of_bits(bits: Bitmap, range: Range<u32>) -> Frontier {
        Frontier {
            count: bits.count(range.clone()),
            bits,
            range,
            list: OnceLock::new(),
        }
    }

    /// Number of active vertices here.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Marks `v`, a vertex another node owns, active for a pull's gathers.
    fn mark(&self, v: u32) {
        self.bits.insert(v);
    }

    /// Unmarks every vertex outside `owned` (a frontier used again for
    /// another pull must not keep the last one's marks).
    fn forget_others(&self, owned: Range<u32>) {
        let words = &self.bits.words;
        let (first, last) = (owned.start as usize / 64, owned.end as usize / 64);
        for word in words[..first].iter().chain(words.iter().skip(last + 1)) {
            word.store(0, Ordering::Relaxed);
        }
        // The bits of the boundary words that lie outside `owned`.
        let below = !(u64::MAX << (owned.start % 64));
        let above = u64::MAX << (owned.end % 64);
        if let Some(word) = words.get(first) {
            word.fetch_and(!below, Ordering::Relaxed);
        }
        if let Some(word) = words.get(last) {
            word.fetch_and(!above, Ordering::Relaxed);
        }
    }

    /// Whether no vertex is active here.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Whether `v` is active.
    #[inline]
    pub fn contains(&self, v: u32) -> bool {
        self.bits.contains(v)
    }

    /// The active vertices, in no particular order.
    pub fn vertices(&self) -> &[u32] {
        self.list
            .get_or_init(|| self.bits.members(self.range.clone()))
    }

    /// The active vertices at positions `at` of [`Frontier::vertices`]'
    /// order, counted off the range instead of listed when every vertex
    /// of the range is active (their list would be the range in order).
    pub fn part(&self, at: Range<usize>) -> impl Iterator<Item = u32> + '_ {
        debug_assert!(at.end <= self.count, "positions {at:?} of {}", self.count);
        let every = self.is_every();
        let first = self.range.start;
        let listed = if every {
            &[][..]
        } else {
            &self.vertices()[at.clone()]
        };
        let counted = if every { at } else { 0..0 };
        listed
            .iter()
            .copied()
            .chain(counted.map(move |i| first + vertex(i)))
    }

    /// Lists the vertices now if [`Frontier::part`] will need the list,
    /// so that making it is not the first worker's busy time.
    fn list_for_parts(&self) {
        if !self.is_every() {
            self.vertices();
        }
    }

    /// Whether every vertex of the range is active.
    fn is_every(&self) -> bool {
        self.count == self.range.len()
    }
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

/// One vertex's edges.
#[derive(Clone, Copy, Debug)]
pub struct Edges<'a> {
    /// Neighbours.
    pub vertices: &'a [u32],
    /// The edges' weights, beside `vertices`, on weighted graphs.
    pub weights: Option<&'a [f32]>,
}

impl Edges<'_> {
    /// The `i`-th edge's weight (1 on an unweighted graph).
    #[inline]
    pub fn weight(&self, i: usize) -> f32 {
        self.weights.map_or(1.0, |w| w[i])
    }
}

/// A superstep's computation along edges, as messages: the paper's
/// `compute` (here `signal` for pushing and `gather` for pulling) and
/// `reduce`. Messages are `u64`s (a depth, a label, the bits of an `f64`).
pub trait EdgeProgram: Sync {
    /// The edges this program reads.
    fn side(&self) -> Side {
        Side::Out
    }

    /// How messages to one vertex combine.
    fn combine(&self) -> Combine {
        Combine::Min
    }

    /// Whether a changed vertex becomes active (default: yes). A program
    /// that runs on every vertex each superstep (PageRank) skips the
    /// bookkeeping.
    fn activates(&self) -> bool {
        true
    }

    /// The state an active vertex carries into its superstep (a distance,
    /// a label): what `signal` reads of its source. A task handed to
    /// another node carries it, so that node needs no copy of the source's
    /// value. Default: nothing.
    fn state(&self, _src: u32) -> u64 {
        0
    }

    /// The message that active `src`, carrying `state`, sends to `dst`
    /// along an edge of `weight`, if any.
    fn signal(&self, src: u32, state: u64, dst: u32, weight: f32) -> Option<u64>;

    /// Whether `dst` takes part in a pull superstep at all (default: yes).
    fn wants_pull(&self, _dst: u32) -> bool {
        true
    }

    /// Whether [`EdgeProgram::wants_pull`] turns false for good once a
    /// vertex has its value (BFS), so that pulls read fewer lists as the
    /// run goes on and a large frontier is cheaper pulled than pushed (see
    /// [`PUSH_BELOW`]); default: no, a pull reads every edge.
    fn pull_narrows(&self) -> bool {
        false
    }

    /// Pull: the message that owned `dst` gets from its incoming `edges`
    /// whose sources are in `active`, combined, if any. A source another
    /// node owns is in `active` when it is active there, and its state is
    /// what [`EdgeProgram::mirror`] was given this superstep.
    fn gather(&self, dst: u32, edges: Edges<'_>, active: &Frontier) -> Option<u64>;

    /// Pull: the `state` of `src`, active on the node that owns it, for
    /// the gathers of this node's masters (called before them, concurrently
    /// for different sources). Default: nothing, for a program whose gather
    /// reads no more of a source than that it is active.
    fn mirror(&self, _src: u32, _state: u64) {}

    /// Applies a message to `dst`'s value (master or mirror); returns
    /// whether the value changed.
    fn reduce(&self, dst: u32, message: u64) -> bool;

    /// Pull into a master this node owns: `message` is all that `dst`'s
    /// in-neighbours give it this superstep, and nothing else writes it
    /// (a pull sends no messages), so a program may store it without an
    /// atomic read-modify-write. Returns whether the value changed; by
    /// default it is `reduce`.
    fn assign(&self, dst: u32, message: u64) -> bool {
        self.reduce(dst, message)
    }

    /// A sum's mirror: its accumulated message, reset to empty.
    fn take(&self, _mirror: u32) -> u64 {
        unreachable!("only Combine::Sum programs forward mirrors at the end")
    }
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

/// How a node's workers exchange message blocks with the other nodes'
/// (RGraph's rings, or the two-sided baseline). `deliver` takes the
/// messages that arrive for this node's masters, whenever a worker polls.
pub(crate) trait Channel: Send + Sync + std::fmt::Debug {
    /// Queues a message for `dst` on node `to` from `worker`.
    fn send(
        &self,
        worker: usize,
        to: usize,
        dst: u32,
        value: u64,
        deliver: &dyn Fn(u32, u64),
    ) -> Result<()>;

    /// Processes what has arrived for `worker`, without waiting.
    fn poll(&self, worker: usize, deliver: &dyn Fn(u32, u64)) -> Result<()>;

    /// Ends `worker`'s superstep: flushes it and waits for every peer's end.
    fn finish(&self, worker: usize, deliver: &dyn Fn(u32, u64)) -> Result<()>;

    /// After every worker finished (before the barrier): the superstep's
    /// traffic, and the channel ready for the next one.
    fn end_superstep(&self) -> Traffic;

    /// Bytes of message buffers this node holds.
    fn bytes(&self) -> u64;
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
        match &self.peers {
            Some(peers) => peers
                .node
                .all_reduce(value, Reduce::Sum)
                .map_err(Error::Verbs),
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
    /// into one array over all vertices.
    pub fn gather_owned(&self, mine: &[u32]) -> Result<Vec<u32>> {
        let Some(peers) = self.peers() else {
            return Ok(mine.to_vec());
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
                if active_edges > self.total_edges / PULL_THRESHOLD {
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
                                while let Some(range) = worklists.grab() {
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
                        let neighbours = self.local.out_edges(v).vertices;
                        for node in peers.partition.owners(neighbours) {
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

/// An index below |V| as a vertex id.
#[inline]
fn vertex(i: usize) -> u32 {
    u32::try_from(i).expect("vertex indices are below |V|, which fits u32")
}

#[cfg(test)]
mod tests {
    use super::{Bitmap, Frontier};

    #[test]
    fn forgetting_others_keeps_exactly_the_owned_marks() {
        let n = 300;
        for (start, end) in [
            (0, 300),
            (5, 65),
            (64, 128),
            (63, 64),
            (70, 70),
            (128, 300),
            (1, 299),
        ] {
            let frontier = Frontier::of(n, (start..end).step_by(3));
            for v in 0..n {
                frontier.mark(v);
            }
            frontier.forget_others(start..end);
            let kept: Vec<u32> = (0..n).filter(|&v| frontier.contains(v)).collect();
            assert_eq!(kept, (start..end).collect::<Vec<_>>(), "{start}..{end}");
        }
    }

    /// Every frontier's parts, over any split of its positions, are its
    /// listed vertices in order: counted off the range for a frontier of
    /// every vertex of it, read from the list otherwise.
    #[test]
    fn parts_are_the_listed_vertices() {
        let n = 300;
        for (start, end) in [(0, 300), (5, 65), (64, 128), (70, 70), (1, 299)] {
            let every = Frontier::every(n, start..end);
            let bits = Bitmap::new(n);
            for v in (start..end).step_by(7) {
                bits.insert(v);
            }
            let some = Frontier::of_bits(bits, start..end);
            for frontier in [every, some, Frontier::of(n, (start..end).rev().step_by(5))] {
                let listed = frontier.vertices().to_vec();
                assert_eq!(listed.len(), frontier.len(), "{start}..{end}");
                for cut in [0, listed.len().min(1), listed.len() / 2, listed.len()] {
                    let parts: Vec<u32> = frontier
                        .part(0..cut)
                        .chain(frontier.part(cut..listed.len()))
                        .collect();
                    assert_eq!(parts, listed, "{start}..{end} cut at {cut}");
                }
            }
        }
        let every = Frontier::every(n, 5..65);
        assert!((0..n).all(|v| every.contains(v) == (5..65).contains(&v)));
    }

    #[test]
    fn members_and_their_count_are_the_set_bits_within_the_range() {
        let bits = Bitmap::new(300);
        let set = [0, 5, 63, 64, 65, 127, 128, 200, 255, 299];
        for v in set {
            assert!(bits.insert(v));
        }
        for (start, end) in [
            (0, 300),
            (5, 65),
            (64, 64),
            (66, 127),
            (128, 300),
            (1, 299),
            (63, 65),
            (64, 128),
            (5, 6),
        ] {
            let expected: Vec<u32> = set
                .iter()
                .copied()
                .filter(|v| (start..end).contains(v))
                .collect();
            assert_eq!(bits.members(start..end), expected, "{start}..{end}");
            assert_eq!(bits.count(start..end), expected.len(), "{start}..{end}");
        }
    }
}
