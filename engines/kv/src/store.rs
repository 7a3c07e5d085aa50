//! One node's part of the store and the operations on it: bulk load, Get,
//! Put (check-and-forward), split live migration, and reclamation.
//!
//! Every thread of a node works through its own [`Session`] (a verbs queue
//! and its counts) on the node's shared [`Store`].

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use quiver_csr::Graph;
use quiver_verbs::{
    Completion, CostModel, Node, NodeRank, Op, Output, Queue, Region, RemoteRegion, Verb,
    WorkRequest,
};
use serde::{Deserialize, Serialize};

use crate::addr::{Addr, REMOTE_SIZE_BITS};
use crate::alloc::Alloc;
use crate::cache::{Location, LocationCache};
use crate::clock::Clock;
use crate::layout::{
    block_words, decode_block, encode_block, prefix_bytes, Edges, Layout, Placement, BUCKET_BYTES,
    LINK, SLOTS, SLOT_BYTES,
};
use crate::policy::Plan;
use crate::server::Message;
use crate::{Error, Result};

/// How the store is set up on every node.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoreConfig {
    /// Bytes of the location cache (and of the home's table of its reads
    /// of the keys homed on it).
    pub cache_bytes: usize,
    /// Which of a home's reads of the values it holds itself it counts,
    /// for the coordinator to weigh against an applicant's (see [`Plan`]).
    pub plan: Plan,
    /// Whether the location cache answers lookups (`false`: it only counts,
    /// as the monitor of the `split` policy).
    pub serve_cache: bool,
    /// How long a cached address may be used after it was cached.
    pub cache_lease: Duration,
    /// How long replaced or migrated memory is kept before it is reused;
    /// at least `cache_lease`.
    pub reclaim_lease: Duration,
    /// Address words per reclaim ring (one ring per writing node). A
    /// migrating node waits while the ring at its source is full, so this
    /// bounds the migrations from one node to another per reclaim lease.
    pub ring_entries: u64,
    /// Bytes of value region beyond the loaded values: room for the copies
    /// Puts make and the values migrated in, while the blocks they replace
    /// wait out the reclaim lease. Untouched room costs no memory on the
    /// loopback and tcp fabrics (pages are committed on first use).
    pub value_headroom: u64,
    /// Modelled cost of the verbs (the loopback cost model's figures).
    pub cost: CostModel,
    /// Modelled cost of one local Get or Put, in nanoseconds.
    pub local_ns: u64,
    /// Whether whole shards move between nodes (the `shard` baseline):
    /// every node counts its accesses per shard, and its value region has
    /// room for the whole graph, since any node may come to hold any shard.
    pub shards_move: bool,
}

impl Default for StoreConfig {
    /// A 32 MiB location cache; leases of 1 s (cache) and 2 s (reclaim);
    /// 64 MiB of room for new values per node; local accesses modelled
    /// 20x cheaper than an RDMA READ ("local is more than 20x faster", §2).
    ///
    /// The paper's leases are 60 s. A lease must outlast the longest time a
    /// worker holds an address, which is an operation's (microseconds) or a
    /// cached address's lease; but copy-on-write Puts keep every replaced
    /// block for the reclaim lease, and a Zipf-hot vertex's list grows by
    /// each Put, so at 60 s a 5%-Put run on a Kronecker graph holds
    /// gigabytes of dead copies. Refreshing a hot key's cached address once
    /// a second costs one READ a second.
    fn default() -> Self {
        let cost = CostModel::default();
        Self {
            cache_bytes: 32 << 20,
            serve_cache: true,
            plan: Plan::Tracked,
            cache_lease: Duration::from_secs(1),
            reclaim_lease: Duration::from_secs(2),
            ring_entries: 1 << 14,
            value_headroom: 64 << 20,
            local_ns: cost.read_ns / 20,
            cost,
            shards_move: false,
        }
    }
}

fn nanos(duration: Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}

/// What a node's store did, summed over its threads.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StoreCounts {
    /// Values migrated to this node (as the target), migrate-backs included.
    pub migrations: u64,
    /// Words of the values it migrated.
    pub words_moved: u64,
    /// One-sided operations its migrations posted.
    pub migration_ops: u64,
    /// Migrations that lost their CAS and started over.
    pub migration_retries: u64,
    /// Puts this node forwarded (to a key's home or a value's holder).
    pub forwarded_puts: u64,
    /// Blocks returned to the allocator after their lease.
    pub reclaimed: u64,
    /// Shards moved to this node (the `shard` baseline); their values
    /// count in `migrations`, `words_moved` and `migration_ops`.
    pub shards_moved: u64,
}

#[derive(Debug, Default)]
struct Counts {
    migrations: AtomicU64,
    words_moved: AtomicU64,
    migration_ops: AtomicU64,
    migration_retries: AtomicU64,
    forwarded_puts: AtomicU64,
    reclaimed: AtomicU64,
    shards_moved: AtomicU64,
}

/// What a Get, Put or migration cost one thread, for its report.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    /// Gets done.
    pub gets: u64,
    /// Gets that needed at least one remote operation.
    pub remote_gets: u64,
    /// Key lookups answered by the location cache.
    pub cache_hits: u64,
    /// Key lookups that needed the location cache and missed it.
    pub cache_misses: u64,
    /// Gets whose value was read from another node (the rest of the
    /// remote Gets only looked their key up remotely).
    pub remote_values: u64,
    /// Reads that found an invalidated block and started over.
    pub retries: u64,
    /// Puts done.
    pub puts: u64,
    /// One-sided operations posted.
    pub one_sided: u64,
    /// Modelled time of the thread's operations, one after another.
    pub modelled_ns: u64,
}

impl Tally {
    /// Adds `other` into `self`.
    pub fn add(&mut self, other: &Tally) {
        self.gets += other.gets;
        self.remote_gets += other.remote_gets;
        self.cache_hits += other.cache_hits;
        self.cache_misses += other.cache_misses;
        self.remote_values += other.remote_values;
        self.retries += other.retries;
        self.puts += other.puts;
        self.one_sided += other.one_sided;
        self.modelled_ns += other.modelled_ns;
    }
}

/// A Put's update of an adjacency list.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum Update {
    /// Appends an edge to `target` (of weight 1 in a weighted graph, the
    /// weight `.qcsr` gives an unweighted edge).
    AddEdge(u32),
    /// Points edge `index` (counted modulo the degree) at `target`
    /// instead, keeping its weight; on a vertex without edges, appends one.
    SetEdge {
        /// Which edge.
        index: u32,
        /// Its new target.
        target: u32,
    },
    /// Appends an edge to `target` of weight `weight` (a weighted graph
    /// only).
    AddWeightedEdge {
        /// The new neighbour.
        target: u32,
        /// The edge's weight.
        weight: f32,
    },
    /// Sets the weight of edge `index` (counted modulo the degree; a
    /// weighted graph only, and a vertex with edges).
    SetWeight {
        /// Which edge.
        index: u32,
        /// Its new weight.
        weight: f32,
    },
}

impl Update {
    /// The weight it sets, which only a weighted graph's edges have.
    pub fn weight(self) -> Option<f32> {
        match self {
            Update::AddWeightedEdge { weight, .. } | Update::SetWeight { weight, .. } => {
                Some(weight)
            }
            Update::AddEdge(_) | Update::SetEdge { .. } => None,
        }
    }

    /// Applies the update to `edges`, weighted if it sets a weight. Fails
    /// only for a weight set on a vertex without edges.
    fn apply(self, key: u32, edges: &mut Edges) -> Result<()> {
        match self {
            Update::AddEdge(target) => edges.push(target, 1.0),
            Update::AddWeightedEdge { target, weight } => edges.push(target, weight),
            Update::SetEdge { index, target } => match edges.ids.len() {
                0 => edges.push(target, 1.0),
                n => edges.ids[index as usize % n] = target,
            },
            Update::SetWeight { index, weight } => {
                let n = edges.ids.len();
                let weights = edges.weights.as_mut().filter(|_| n > 0).ok_or_else(|| {
                    Error::invalid(
                        "update",
                        format!("vertex {key} has no edge whose weight to set"),
                    )
                })?;
                weights[index as usize % n] = weight;
            }
        }
        Ok(())
    }
}

/// How a Put executed here ended.
pub(crate) enum PutOutcome {
    /// Committed.
    Done,
    /// The value is held by this node: the Put must run there.
    Forward(u32),
}

/// Reclamation state: blocks waiting out their lease.
#[derive(Debug, Default)]
struct Reclaim {
    /// Blocks of this node replaced here: (offset, words, due).
    local: VecDeque<(u64, u64, u64)>,
    /// Per writer node: entries taken from its ring so far, and when each
    /// entry seen but not yet freed falls due.
    rings: Vec<(u64, VecDeque<u64>)>,
}

/// This node's cursor in another node's reclaim ring.
#[derive(Clone, Copy, Debug, Default)]
struct RingCursor {
    tail: u64,
    head: u64,
}

/// The replies to this node's forwarded Puts, by request id.
#[derive(Debug, Default)]
pub(crate) struct Replies {
    done: Mutex<HashMap<u64, std::result::Result<(), String>>>,
    arrived: Condvar,
}

/// One node's part of the store.
#[derive(Debug)]
pub struct Store {
    node: Node,
    rank: u32,
    vertices: u32,
    /// Whether the graph's edges have weights, which values then hold.
    weighted: bool,
    placement: Placement,
    /// Each shard's node (the paper's POS map), the same on every node;
    /// only the `shard` baseline changes it, with every worker paused.
    homes: Vec<AtomicU32>,
    /// This node's accesses per shard since the last harvest (only when
    /// shards move).
    shard_accesses: Vec<AtomicU32>,
    layout: Layout,
    region: Region,
    remotes: Vec<RemoteRegion>,
    alloc: Mutex<Alloc>,
    cache: LocationCache,
    home_reads: LocationCache,
    /// Under [`Plan::Deferred`], the keys homed here whose reads the
    /// coordinator asked this home to count, a bit each (empty under the
    /// other plans).
    candidates: Vec<AtomicU64>,
    clock: Clock,
    config: StoreConfig,
    reclaim: Mutex<Reclaim>,
    rings: Mutex<Vec<RingCursor>>,
    next_request: AtomicU64,
    pub(crate) replies: Replies,
    counts: Counts,
}

pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Store {
    /// Registers this node's region, loads the keys homed here from
    /// `graph` (every node gives the same graph) and meets the other nodes.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for leases the wrong way round or more
    /// than 128 nodes; [`Error::Verbs`] if registration or the exchange fails.
    pub fn open(node: &Node, graph: &Graph, config: &StoreConfig, clock: Clock) -> Result<Store> {
        if config.cache_lease > config.reclaim_lease {
            return Err(Error::invalid(
                "cache_lease",
                format!(
                    "a cached address ({:?}) must not outlive the memory it names ({:?} reclaim lease)",
                    config.cache_lease, config.reclaim_lease
                ),
            ));
        }
        if node.size() > 128 {
            return Err(Error::invalid(
                "nodes",
                format!(
                    "{} nodes; the address word names at most 128 machines",
                    node.size()
                ),
            ));
        }
        if config.ring_entries == 0 {
            return Err(Error::invalid("ring_entries", "a reclaim ring needs room"));
        }
        let rank = node.rank().0;
        let vertices = graph.num_vertices();
        let weighted = graph.is_weighted();
        let candidate_words = if config.plan == Plan::Deferred {
            vertices.div_ceil(64)
        } else {
            0
        };
        let placement = Placement::new(vertices, node.size());
        let loaded: u64 = (0..vertices)
            .filter(|&v| config.shards_move || placement.home_node(v) == rank)
            .map(|v| block_words(graph.degree(v), weighted))
            .sum();
        let layout = Layout {
            buckets: placement.buckets(),
            rings: node.size(),
            ring_entries: config.ring_entries,
            value_words: loaded + config.value_headroom.div_ceil(8),
        };
        let region = node
            .register(usize::try_from(layout.bytes()).expect("the region fits memory"))
            .map_err(Error::Verbs)?;
        let store = Store {
            node: node.clone(),
            rank,
            vertices,
            weighted,
            placement,
            homes: (0..placement.shards())
                .map(|shard| AtomicU32::new(placement.first_home(shard)))
                .collect(),
            shard_accesses: (0..if config.shards_move {
                placement.shards()
            } else {
                0
            })
                .map(|_| AtomicU32::new(0))
                .collect(),
            layout,
            region,
            remotes: Vec::new(),
            alloc: Mutex::new(Alloc::new(layout.value_words)),
            cache: LocationCache::new(
                config.cache_bytes,
                nanos(config.cache_lease),
                config.serve_cache,
            ),
            home_reads: LocationCache::new(config.cache_bytes / 8, u64::MAX, false),
            candidates: (0..candidate_words).map(|_| AtomicU64::new(0)).collect(),
            clock,
            config: config.clone(),
            reclaim: Mutex::new(Reclaim {
                local: VecDeque::new(),
                rings: vec![(0, VecDeque::new()); node.size() as usize],
            }),
            rings: Mutex::new(vec![RingCursor::default(); node.size() as usize]),
            next_request: AtomicU64::new(0),
            replies: Replies::default(),
            counts: Counts::default(),
        };
        store.load(graph)?;
        let remotes = node.exchange(&store.region).map_err(Error::Verbs)?;
        Ok(Store { remotes, ..store })
    }

    fn load(&self, graph: &Graph) -> Result<()> {
        // Each table's next free overflow bucket, by shard.
        let mut next_overflow: HashMap<u32, u64> = HashMap::new();
        for v in 0..self.vertices {
            let (home, bucket) = self.home(v);
            if home != self.rank {
                continue;
            }
            let block = encode_block(&Edges::of(graph, v));
            let words = block.len() as u64 / 8;
            let offset = self.allocate(words)?;
            self.region
                .write(self.byte(self.layout.value(offset)), &block);
            let word = Addr::Local {
                size: words,
                offset,
            }
            .encode()
            .map_err(|source| Error::TooLarge { vertex: v, source })?;
            let shard = self.placement.locate(v).0;
            let next = next_overflow.entry(shard).or_insert_with(|| {
                let (first, _) = self.placement.table(shard);
                first + self.placement.table_main()
            });
            self.insert(v, bucket, word, next);
        }
        Ok(())
    }

    /// Puts `key` with `word` into the chain from `bucket`, taking overflow
    /// buckets of its shard's table from `next_overflow` (load time only:
    /// keys are never added later, and move only with their whole table).
    fn insert(&self, key: u32, bucket: u64, word: u64, next_overflow: &mut u64) {
        let shard = self.placement.locate(key).0;
        let (table_first, table_buckets) = self.placement.table(shard);
        let mut bucket = bucket;
        loop {
            let base = self.layout.bucket(bucket);
            for slot in 0..SLOTS - 1 {
                let at = self.byte(base + (slot * SLOT_BYTES) as u64);
                if self.region.load(at) == 0 {
                    // The address first: a reader that sees the key sees it.
                    self.region.store(at + 8, word);
                    self.region.store(at, u64::from(key) + 1);
                    return;
                }
            }
            let link = self.byte(base + ((SLOTS - 1) * SLOT_BYTES) as u64);
            if self.region.load(link) == LINK {
                bucket = self.region.load(link + 8);
                continue;
            }
            assert!(
                *next_overflow < table_first + table_buckets,
                "shard {shard}'s table has room for its chains, as Placement counted them"
            );
            self.region.store(link + 8, *next_overflow);
            self.region.store(link, LINK);
            bucket = *next_overflow;
            *next_overflow += 1;
        }
    }

    fn byte(&self, offset: u64) -> usize {
        usize::try_from(offset).expect("offsets within the region fit usize")
    }

    /// A block of `words` words; when none is free, blocks whose lease
    /// ran out since the last [`Store::reclaim`] are freed first.
    fn allocate(&self, words: u64) -> Result<u64> {
        if let Some(offset) = lock(&self.alloc).alloc(words) {
            return Ok(offset);
        }
        self.reclaim();
        let mut alloc = lock(&self.alloc);
        alloc.alloc(words).ok_or_else(|| Error::ValueRegionFull {
            node: self.rank,
            words,
            used: alloc.used(),
            capacity: alloc.capacity(),
        })
    }

    fn release(&self, offset: u64, words: u64) {
        lock(&self.alloc).free(offset, words);
    }

    /// A session for one thread of this node.
    pub fn session(&self) -> Session<'_> {
        Session {
            store: self,
            queue: self.node.queue(),
            tally: Tally::default(),
            completions: Vec::new(),
        }
    }

    /// This node's rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Vertices of the graph.
    pub fn vertices(&self) -> u32 {
        self.vertices
    }

    /// Whether the graph's edges have weights, which Gets then return.
    pub fn is_weighted(&self) -> bool {
        self.weighted
    }

    /// The key placement every node shares.
    pub fn placement(&self) -> Placement {
        self.placement
    }

    /// The key's home node now (its shard's node) and the main bucket that
    /// starts its chain there.
    pub fn home(&self, key: u32) -> (u32, u64) {
        let (shard, bucket) = self.placement.locate(key);
        (self.homes[shard as usize].load(Ordering::Acquire), bucket)
    }

    /// The key's home node now.
    pub fn home_node(&self, key: u32) -> u32 {
        self.home(key).0
    }

    /// The node shard `shard` is on now.
    pub fn shard_home(&self, shard: u32) -> u32 {
        self.homes[shard as usize].load(Ordering::Acquire)
    }

    /// Points this node's map at `node` as shard `shard`'s home. Every node
    /// must make the same change while no worker runs (see
    /// [`Session::pull_shard`]).
    pub fn set_shard_home(&self, shard: u32, node: u32) {
        self.homes[shard as usize].store(node, Ordering::Release);
    }

    /// This node's accesses (Gets and Puts) per shard since the last
    /// harvest, counted only when shards move; resets them.
    pub fn harvest_shards(&self) -> Vec<u32> {
        self.shard_accesses
            .iter()
            .map(|count| count.swap(0, Ordering::Relaxed))
            .collect()
    }

    fn count_access(&self, key: u32) {
        if self.config.shards_move {
            let shard = self.placement.locate(key).0;
            self.shard_accesses[shard as usize].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Drops this node's copy of shard `shard` after it moved away: frees
    /// its values and clears its table. Only while no worker runs.
    pub fn drop_shard(&self, shard: u32) {
        let (first, buckets) = self.placement.table(shard);
        for bucket in first..first + buckets {
            let base = self.layout.bucket(bucket);
            for slot in 0..SLOTS - 1 {
                let at = self.byte(base + (slot * SLOT_BYTES) as u64);
                if self.region.load(at) == 0 {
                    continue;
                }
                if let Some(addr) = Addr::decode(self.region.load(at + 8)) {
                    self.region
                        .store(self.byte(self.layout.value(addr.offset())), 0);
                    self.release(addr.offset(), addr.size());
                }
            }
        }
        let base = self.byte(self.layout.bucket(first));
        let bytes = usize::try_from(buckets * BUCKET_BYTES as u64).expect("a table fits memory");
        self.region.write(base, &vec![0; bytes]);
    }

    /// The node.
    pub fn node(&self) -> &Node {
        &self.node
    }

    /// The store's clock.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    /// What the store did so far.
    pub fn counts(&self) -> StoreCounts {
        let c = &self.counts;
        StoreCounts {
            migrations: c.migrations.load(Ordering::Relaxed),
            words_moved: c.words_moved.load(Ordering::Relaxed),
            migration_ops: c.migration_ops.load(Ordering::Relaxed),
            migration_retries: c.migration_retries.load(Ordering::Relaxed),
            forwarded_puts: c.forwarded_puts.load(Ordering::Relaxed),
            reclaimed: c.reclaimed.load(Ordering::Relaxed),
            shards_moved: c.shards_moved.load(Ordering::Relaxed),
        }
    }

    /// Words of the value region in use (live values and blocks waiting
    /// out their lease).
    pub fn used_words(&self) -> u64 {
        lock(&self.alloc).used()
    }

    /// Bytes of this node's registered region.
    pub fn region_bytes(&self) -> u64 {
        self.layout.bytes()
    }

    /// The monitor's harvest: remote pairs this node accessed at least
    /// `at_least` times since the last tick (or interval: `ends_interval`),
    /// through the location cache, and keys homed here, likewise (those
    /// whose values live elsewhere, and those it holds as the
    /// [`StoreConfig::plan`] says).
    ///
    /// At an interval's end a home reports a deferred candidate's count
    /// however small: the coordinator scales a count of part of the
    /// interval up to the whole, which a count cut at `at_least` would
    /// hide.
    pub fn harvest(&self, at_least: u32, ends_interval: bool) -> Vec<(u32, u32)> {
        let mut hot = self.cache.harvest(at_least, ends_interval);
        let floor = if ends_interval && self.config.plan == Plan::Deferred {
            1
        } else {
            at_least
        };
        hot.extend(
            self.home_reads
                .harvest(floor, ends_interval)
                .into_iter()
                .filter(|&(key, count)| count >= at_least || self.is_candidate(key)),
        );
        hot
    }

    /// Whether this home counts a read of `key`'s value, which it holds.
    fn counts_home_read(&self, key: u32) -> bool {
        match self.config.plan {
            Plan::Eager => false,
            Plan::Tracked => true,
            Plan::Deferred => self.is_candidate(key),
        }
    }

    /// Under [`Plan::Deferred`], whether the coordinator asked this home
    /// to count its reads of `key`.
    fn is_candidate(&self, key: u32) -> bool {
        self.candidates
            .get(key as usize / 64)
            .is_some_and(|word| word.load(Ordering::Relaxed) & (1 << (key % 64)) != 0)
    }

    /// Under [`Plan::Deferred`], starts (`on`) or stops counting this
    /// home's reads of the values of `keys` it holds (keys homed
    /// elsewhere are skipped), as the coordinator asks; under other plans
    /// nothing.
    pub fn track(&self, keys: &[u32], on: bool) {
        if self.config.plan != Plan::Deferred {
            return;
        }
        for &key in keys.iter().filter(|&&k| self.home_node(k) == self.rank) {
            let word = &self.candidates[key as usize / 64];
            if on {
                word.fetch_or(1 << (key % 64), Ordering::Relaxed);
            } else {
                word.fetch_and(!(1 << (key % 64)), Ordering::Relaxed);
            }
        }
    }

    /// Frees every block whose reclaim lease has run out: blocks replaced
    /// here by Puts, and blocks other nodes migrated away and entered in
    /// this node's rings. A ring entry's lease is counted from when this
    /// node first saw it, which is never before it was written.
    pub fn reclaim(&self) {
        let now = self.clock.now_ns();
        let lease = nanos(self.config.reclaim_lease);
        let mut reclaim = lock(&self.reclaim);
        let mut freed = 0;
        while let Some(&(offset, words, due)) = reclaim.local.front() {
            if now < due {
                break;
            }
            reclaim.local.pop_front();
            self.release(offset, words);
            freed += 1;
        }
        for writer in 0..self.node.size() {
            let (taken, seen) = &mut reclaim.rings[writer as usize];
            loop {
                let index = *taken + seen.len() as u64;
                if seen.len() as u64 == self.layout.ring_entries {
                    break;
                }
                let word = self
                    .region
                    .load(self.byte(self.layout.ring_entry(writer, index)));
                if word == 0 {
                    break;
                }
                seen.push_back(now.saturating_add(lease));
            }
            while seen.front().is_some_and(|&due| due <= now) {
                seen.pop_front();
                let at = self.byte(self.layout.ring_entry(writer, *taken));
                let addr = Addr::decode(self.region.load(at)).expect("a seen entry is non-zero");
                self.release(addr.offset(), addr.size());
                self.region.store(at, 0);
                *taken += 1;
                freed += 1;
            }
            self.region
                .store(self.byte(self.layout.ring(writer)), *taken);
        }
        self.counts.reclaimed.fetch_add(freed, Ordering::Relaxed);
    }

    /// Looks `key` up in this node's own key region.
    fn local_lookup(&self, key: u32, bucket: u64) -> Option<Location> {
        let tag = u64::from(key) + 1;
        let since = self.clock.now_ns();
        let mut bucket = bucket;
        loop {
            let base = self.layout.bucket(bucket);
            for slot in 0..SLOTS - 1 {
                let at = base + (slot * SLOT_BYTES) as u64;
                if self.region.load(self.byte(at)) == tag {
                    return Some(Location {
                        word: self.region.load(self.byte(at + 8)),
                        slot: at + 8,
                        since,
                    });
                }
            }
            let link = self.byte(base + ((SLOTS - 1) * SLOT_BYTES) as u64);
            if self.region.load(link) != LINK {
                return None;
            }
            bucket = self.region.load(link + 8);
        }
    }

    pub(crate) fn check_vertex(&self, key: u32) -> Result<()> {
        if key >= self.vertices {
            return Err(Error::UnknownVertex {
                vertex: key,
                vertices: self.vertices,
            });
        }
        Ok(())
    }

    /// Caches the address word this node just published for `key` at its
    /// home (through the address word at byte `slot` there), unless the
    /// key is homed here and needs no cache.
    fn published(&self, key: u32, home: u32, slot: u64, word: u64) {
        if home != self.rank {
            self.cache.fill(
                key,
                Location {
                    word,
                    slot,
                    since: self.clock.now_ns(),
                },
            );
        }
    }

    /// Whether a read through `location` that ended before now read the
    /// block its word named: it is within a cache lease of when the word
    /// was the home's, so the block has not been reclaimed since (see
    /// [`Location`]). Past that, the memory may hold another value, or an
    /// older copy of this one.
    fn within_lease(&self, location: &Location) -> bool {
        self.clock.now_ns()
            < location
                .since
                .saturating_add(nanos(self.config.cache_lease))
    }

    /// Before a Get or Put of `key` started at `started` reads its invalid
    /// block's address again: [`Error::Stalled`] once the node's timeout
    /// has passed, else a yield, so the thread replacing or lighting the
    /// block can run (nodes can outnumber cores).
    fn before_retry(&self, key: u32, started: Instant) -> Result<()> {
        if started.elapsed() > self.node.timeout() {
            return Err(Error::Stalled(format!(
                "vertex {key}'s value stayed invalid for {:?}",
                self.node.timeout()
            )));
        }
        std::thread::yield_now();
        Ok(())
    }

    /// Writes a migration's copy of a block at `offset` with its size word
    /// 0: dark, so that nothing reads, copies or updates it until
    /// [`Store::light`] (see [`Session::migrate`]).
    fn write_dark(&self, offset: u64, block: &[u8]) {
        let at = self.byte(self.layout.value(offset));
        self.region.store(at, 0);
        self.region.write(at + 8, &block[8..]);
    }

    /// Makes the dark copy of `words` words at `offset` readable.
    fn light(&self, offset: u64, words: u64) {
        self.region
            .store(self.byte(self.layout.value(offset)), words);
    }

    /// Waits for the reply to forwarded Put `request`.
    fn await_reply(&self, request: u64, to: u32) -> Result<()> {
        let deadline = Instant::now() + self.node.timeout();
        let mut done = lock(&self.replies.done);
        loop {
            if let Some(result) = done.remove(&request) {
                return result.map_err(Error::Remote);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::Stalled(format!(
                    "node {to} did not answer a forwarded put within {:?}",
                    self.node.timeout()
                )));
            }
            done = self
                .replies
                .arrived
                .wait_timeout(done, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }

    /// Records the reply to forwarded Put `request` (the server calls this).
    pub(crate) fn deliver_reply(&self, request: u64, result: std::result::Result<(), String>) {
        lock(&self.replies.done).insert(request, result);
        self.replies.arrived.notify_all();
    }

    /// Serves Puts forwarded to this node until [`Session::stop_server`]
    /// is called on it; run it on a thread of its own while the node takes
    /// part in Puts.
    ///
    /// # Errors
    /// A corrupt message, or lost nodes.
    pub fn serve(&self) -> Result<()> {
        crate::server::serve(self)
    }
}

/// One thread's handle on the store.
#[derive(Debug)]
pub struct Session<'s> {
    store: &'s Store,
    queue: Queue,
    tally: Tally,
    completions: Vec<Completion>,
}

impl Session<'_> {
    /// What this session did so far.
    pub fn tally(&self) -> &Tally {
        &self.tally
    }

    /// The store.
    pub fn store(&self) -> &Store {
        self.store
    }

    fn charge(&mut self, verb: Verb, bytes: usize) {
        self.tally.one_sided += 1;
        self.tally.modelled_ns += u64::try_from(
            self.store
                .config
                .cost
                .latency(verb, bytes as u64)
                .as_nanos(),
        )
        .unwrap_or(u64::MAX);
    }

    fn remote(&self, node: u32) -> RemoteRegion {
        self.store.remotes[node as usize]
    }

    fn read(&mut self, node: u32, offset: u64, len: usize) -> Result<Vec<u8>> {
        self.charge(Verb::Read, len);
        let remote = self.remote(node);
        self.queue.read(remote, offset, len).map_err(Error::Verbs)
    }

    fn compare_swap(&mut self, node: u32, offset: u64, expected: u64, new: u64) -> Result<u64> {
        if node == self.store.rank {
            return Ok(self
                .store
                .region
                .compare_swap(self.store.byte(offset), expected, new));
        }
        self.charge(Verb::CompareSwap, 8);
        let remote = self.remote(node);
        self.queue
            .compare_swap(remote, offset, expected, new)
            .map_err(Error::Verbs)
    }

    /// Looks `key` up at its home `home` (one READ per bucket of the chain).
    fn remote_lookup(&mut self, key: u32, home: u32, bucket: u64) -> Result<Option<Location>> {
        let layout = self.store.layout;
        let since = self.store.clock.now_ns();
        let mut bucket = bucket;
        loop {
            let base = layout.bucket(bucket);
            let bytes = self.read(home, base, BUCKET_BYTES)?;
            if let Some(location) = find_in_bucket(key, base, &bytes, since) {
                return Ok(Some(location));
            }
            match chained(&bytes) {
                Some(next) => bucket = next,
                None => return Ok(None),
            }
        }
    }

    /// `key`'s location: from its home's key region (local, or READ), or
    /// from the location cache when `cached` allows and it holds one.
    fn locate(&mut self, key: u32, cached: bool) -> Result<Location> {
        let store = self.store;
        let (home, bucket) = store.home(key);
        let found = if home == store.rank {
            store.local_lookup(key, bucket)
        } else {
            let now = store.clock.now_ns();
            match store.cache.access(key, now).filter(|_| cached) {
                Some(location) => {
                    self.tally.cache_hits += 1;
                    Some(location)
                }
                None => {
                    self.tally.cache_misses += u64::from(store.config.serve_cache);
                    let found = self.remote_lookup(key, home, bucket)?;
                    if let Some(location) = found {
                        store.cache.fill(key, location);
                    }
                    found
                }
            }
        };
        found.ok_or(Error::UnknownVertex {
            vertex: key,
            vertices: store.vertices,
        })
    }

    fn read_block(&mut self, holder: u32, addr: Addr, len: usize) -> Result<Vec<u8>> {
        let at = self.store.layout.value(addr.offset());
        if holder == self.store.rank {
            let mut bytes = vec![0; len];
            self.store.region.read(self.store.byte(at), &mut bytes);
            Ok(bytes)
        } else {
            self.read(holder, at, len)
        }
    }

    /// The first `limit` edges of `key` (all of them with `u64::MAX`), with
    /// their weights in a weighted graph; in an unweighted graph one more
    /// may come with them (the other half of the last word read).
    ///
    /// # Errors
    /// [`Error::UnknownVertex`]; [`Error::Verbs`] if a node is lost;
    /// [`Error::Stalled`] if the value stays invalid for the node's timeout.
    pub fn get(&mut self, key: u32, limit: u64) -> Result<Edges> {
        self.store.check_vertex(key)?;
        let store = self.store;
        store.count_access(key);
        let home = store.home_node(key);
        let ops = self.tally.one_sided;
        let started = Instant::now();
        let edges = loop {
            let location = self.locate(key, true)?;
            let addr = Addr::decode(location.word).ok_or_else(|| {
                Error::Corrupt(format!(
                    "vertex {key} has an empty address word at its home"
                ))
            })?;
            let holder = addr.holder(home);
            if home == store.rank && (holder != store.rank || store.counts_home_read(key)) {
                store.home_reads.touch(key);
            }
            let len = prefix_bytes(addr, limit, store.weighted);
            let bytes = self.read_block(holder, addr, len)?;
            let read = decode_block(addr, &bytes, store.weighted)
                .filter(|_| store.within_lease(&location));
            if let Some(edges) = read {
                self.tally.remote_values += u64::from(holder != store.rank);
                break edges;
            }
            self.tally.retries += 1;
            store.cache.forget(key);
            store.before_retry(key, started)?;
        };
        self.tally.gets += 1;
        self.tally.modelled_ns += store.config.local_ns;
        if self.tally.one_sided != ops {
            self.tally.remote_gets += 1;
        }
        Ok(edges)
    }

    /// The benchmark's two-hop query (§6.2): the first `neighbours`
    /// neighbours of `start`, then the first `neighbours` of each; `hop`
    /// sees each list read (with its weights in a weighted graph), the
    /// start's first.
    ///
    /// # Errors
    /// As [`Session::get`].
    pub fn two_hop(
        &mut self,
        start: u32,
        neighbours: u64,
        mut hop: impl FnMut(&Edges),
    ) -> Result<()> {
        let limit = usize::try_from(neighbours).unwrap_or(usize::MAX);
        let mut first = self.get(start, neighbours)?;
        first.truncate(limit);
        hop(&first);
        for &next in &first.ids {
            let mut second = self.get(next, neighbours)?;
            second.truncate(limit);
            hop(&second);
        }
        Ok(())
    }

    /// Applies `update` to `key`'s list: at its home, or wherever the
    /// value is held, the Put forwarded there (check-and-forward). Returns
    /// once the Put is committed and the memory it replaced invalidated.
    ///
    /// # Errors
    /// As [`Session::get`]; [`Error::InvalidArgument`] for a weight set in
    /// an unweighted graph or not finite, or set on a vertex without edges
    /// here (where the Put ran on another node, [`Error::Remote`] with its
    /// words);
    /// [`Error::TooLarge`] when a migrated value would outgrow 32 MiB;
    /// [`Error::Remote`] for an error where it ran.
    pub fn put(&mut self, key: u32, update: Update) -> Result<()> {
        self.store.check_vertex(key)?;
        if let Some(weight) = update.weight() {
            if !self.store.weighted {
                return Err(Error::invalid(
                    "update",
                    format!("vertex {key}'s edges have no weights: the graph is unweighted"),
                ));
            }
            if !weight.is_finite() {
                return Err(Error::invalid(
                    "weight",
                    format!("{weight} is not a weight: a graph's weights are finite"),
                ));
            }
        }
        self.store.count_access(key);
        let home = self.store.home_node(key);
        let to = if home == self.store.rank {
            match self.execute_put(key, update)? {
                PutOutcome::Done => {
                    self.tally.puts += 1;
                    return Ok(());
                }
                PutOutcome::Forward(holder) => holder,
            }
        } else {
            home
        };
        self.forward(key, update, to)?;
        self.tally.puts += 1;
        Ok(())
    }

    fn forward(&mut self, key: u32, update: Update, to: u32) -> Result<()> {
        let store = self.store;
        store.counts.forwarded_puts.fetch_add(1, Ordering::Relaxed);
        let request = store.next_request.fetch_add(1, Ordering::Relaxed);
        let message = Message::Put {
            key,
            update,
            origin: store.rank,
            request,
        };
        self.send(to, &message)?;
        let cost = store.config.cost;
        self.tally.modelled_ns += 2 * cost.send_ns + cost.atomic_ns;
        store.await_reply(request, to)
    }

    /// Sends `message` to node `to`.
    pub(crate) fn send(&mut self, to: u32, message: &Message) -> Result<()> {
        self.queue
            .send(NodeRank(to), &message.encode())
            .map_err(Error::Verbs)
    }

    /// Runs a Put here if this node holds the value (copy-on-write: the new
    /// list goes to a new block; the old block is invalidated *before* the
    /// new address is published, so no reader can see the new list and a
    /// later reader the old one); else says where it must run.
    pub(crate) fn execute_put(&mut self, key: u32, update: Update) -> Result<PutOutcome> {
        let store = self.store;
        let home = store.home_node(key);
        let started = Instant::now();
        let mut again = false;
        loop {
            if again {
                store.before_retry(key, started)?;
            }
            again = true;
            let location = self.locate(key, true)?;
            let addr = Addr::decode(location.word)
                .ok_or_else(|| Error::Corrupt(format!("vertex {key} has an empty address word")))?;
            if addr.holder(home) != store.rank {
                store.cache.forget(key);
                return Ok(PutOutcome::Forward(addr.holder(home)));
            }
            let old_at = store.byte(store.layout.value(addr.offset()));
            let mut bytes = vec![0; usize::try_from(addr.size() * 8).expect("a block fits memory")];
            store.region.read(old_at, &mut bytes);
            let Some(mut edges) = decode_block(addr, &bytes, store.weighted) else {
                store.cache.forget(key);
                continue;
            };
            update.apply(key, &mut edges)?;
            let block = encode_block(&edges);
            let words = block.len() as u64 / 8;
            let offset = store.allocate(words)?;
            let new = match Addr::at(home, store.rank, words, offset).and_then(Addr::encode) {
                Ok(word) => word,
                Err(source) => {
                    store.release(offset, words);
                    return Err(Error::TooLarge {
                        vertex: key,
                        source,
                    });
                }
            };
            store
                .region
                .write(store.byte(store.layout.value(offset)), &block);
            // Past the lease the old block may be another value's by now
            // (and what was read of it, too): zero nothing, read again.
            if !store.within_lease(&location) {
                store.release(offset, words);
                store.cache.forget(key);
                continue;
            }
            store.region.store(old_at, 0);
            let previous = self.compare_swap(home, location.slot, location.word, new)?;
            if previous != location.word {
                // A migration took the old block (it copied it before we
                // invalidated it) and owns its reclamation; run again.
                store.release(offset, words);
                store.cache.forget(key);
                continue;
            }
            store.published(key, home, location.slot, new);
            self.tally.modelled_ns += store.config.local_ns;
            let due = store
                .clock
                .now_ns()
                .saturating_add(nanos(store.config.reclaim_lease));
            lock(&store.reclaim)
                .local
                .push_back((addr.offset(), addr.size(), due));
            return Ok(PutOutcome::Done);
        }
    }

    /// Moves `key`'s value to this node with the unilateral protocol: READ
    /// the key (skipped on a location-cache hit; one READ more for each
    /// overflow bucket its chain passes), allocate, READ the value, CAS the
    /// address word at the home, WRITE 0 over the old size word and WRITE
    /// the old address into the holder's reclaim ring: 5 one-sided
    /// operations for a key in its main bucket. Returns the one-sided
    /// operations it posted (0 if the value was already here).
    ///
    /// The copy is written dark (size word 0) and lit only once the old
    /// block's invalidation has landed: until then every Get, Put and
    /// migration that reaches it retries, so the value takes no Put and
    /// moves on nowhere while an older copy is still valid (the paper's
    /// footnote 10, for Puts at the target, and the same for a migration
    /// away from it or back home, which no lock at the target would stop).
    ///
    /// # Errors
    /// [`Error::TooLarge`] for a value over 32 MiB (a remote address word
    /// cannot name it); [`Error::ValueRegionFull`]; [`Error::Stalled`] when
    /// the holder's reclaim ring stays full (the old block is invalidated
    /// all the same, and leaks); verbs errors.
    pub fn migrate(&mut self, key: u32) -> Result<u64> {
        self.store.check_vertex(key)?;
        let store = self.store;
        let home = store.home_node(key);
        let before = self.tally.one_sided;
        loop {
            let location = self.locate(key, store.config.serve_cache)?;
            let addr = Addr::decode(location.word)
                .ok_or_else(|| Error::Corrupt(format!("vertex {key} has an empty address word")))?;
            let source = addr.holder(home);
            if source == store.rank {
                return Ok(self.tally.one_sided - before);
            }
            let size = addr.size();
            if home != store.rank && size > MAX_MIGRATED_WORDS {
                return Err(Error::TooLarge {
                    vertex: key,
                    source: Addr::at(home, store.rank, size, 0)
                        .expect_err("a size over the remote limit does not fit"),
                });
            }
            let offset = store.allocate(size)?;
            let new = Addr::at(home, store.rank, size, offset)
                .and_then(Addr::encode)
                .map_err(|source| Error::TooLarge {
                    vertex: key,
                    source,
                })?;
            let len = usize::try_from(size * 8).expect("a block fits memory");
            let bytes = self.read(source, store.layout.value(addr.offset()), len)?;
            if decode_block(addr, &bytes, store.weighted).is_none() {
                store.release(offset, size);
                store.cache.forget(key);
                store
                    .counts
                    .migration_retries
                    .fetch_add(1, Ordering::Relaxed);
                continue;
            }
            store.write_dark(offset, &bytes);
            // Past the lease the copy may be of memory given to another
            // value since, and the slot may hold the same word again.
            let won = store.within_lease(&location)
                && self.compare_swap(home, location.slot, location.word, new)? == location.word;
            if !won {
                store.release(offset, size);
                store.cache.forget(key);
                store
                    .counts
                    .migration_retries
                    .fetch_add(1, Ordering::Relaxed);
                continue;
            }
            store.published(key, home, location.slot, new);
            // However the retirement ends, the old block is invalid or
            // gone with its node: the copy may be lit.
            let retired = self.retire(source, addr);
            store.light(offset, size);
            retired?;
            let ops = self.tally.one_sided - before;
            let counts = &store.counts;
            counts.migrations.fetch_add(1, Ordering::Relaxed);
            counts.words_moved.fetch_add(size, Ordering::Relaxed);
            counts.migration_ops.fetch_add(ops, Ordering::Relaxed);
            return Ok(ops);
        }
    }

    /// Moves the values of `keys` to this node like [`Session::migrate`],
    /// with the protocol's stages pipelined across the keys (Pragh §4.7):
    /// the key READs of all of them posted together (a key down a bucket
    /// chain then follows it, one READ a hop), then the value READs, then
    /// the CASes, then the invalidations and ring entries; each key's
    /// stages stay in order. A key whose CAS loses a race or whose copy was
    /// invalid is migrated again on its own. Returns the one-sided
    /// operations posted.
    ///
    /// # Errors
    /// As [`Session::migrate`].
    pub fn migrate_batch(&mut self, keys: &[u32]) -> Result<u64> {
        let store = self.store;
        let before = self.tally.one_sided;
        for &key in keys {
            store.check_vertex(key)?;
        }
        let mut keys = keys.to_vec();
        keys.sort_unstable();
        keys.dedup();
        // Stage 1: where each value is (cached, local, or one bucket READ).
        let mut located: Vec<(u32, Location)> = Vec::with_capacity(keys.len());
        let mut lookups = Vec::new();
        let since = store.clock.now_ns();
        for &key in &keys {
            let (home, bucket) = store.home(key);
            let known = if home == store.rank {
                store.local_lookup(key, bucket)
            } else {
                store
                    .cache
                    .access(key, store.clock.now_ns())
                    .filter(|_| store.config.serve_cache)
            };
            match known {
                Some(location) => located.push((key, location)),
                None => lookups.push(WorkRequest::new(
                    u64::from(key),
                    Op::Read {
                        remote: self.remote(home),
                        offset: store.layout.bucket(bucket),
                        len: BUCKET_BYTES,
                    },
                )),
            }
        }
        let mut alone = Vec::new();
        for (wr_id, output) in self.post_all(lookups)? {
            let key = u32::try_from(wr_id).expect("work-request ids are keys");
            let Output::Data(bytes) = output else {
                unreachable!("a READ completes with data")
            };
            let base = store.layout.bucket(store.placement.locate(key).1);
            let found = match find_in_bucket(key, base, &bytes, since) {
                Some(location) => Some(location),
                // Down the bucket's chain: on from the next bucket, one
                // READ a hop, as a lookup of its own would.
                None => match chained(&bytes) {
                    Some(next) => self.remote_lookup(key, store.home_node(key), next)?,
                    None => None,
                },
            };
            match found {
                Some(location) => {
                    store.cache.fill(key, location);
                    located.push((key, location));
                }
                None => alone.push(key),
            }
        }
        // Stage 2: a block here for each value, and a READ of each.
        let mut copies = Vec::new();
        let mut reads = Vec::new();
        for (key, location) in located {
            let home = store.home_node(key);
            let addr = Addr::decode(location.word)
                .ok_or_else(|| Error::Corrupt(format!("vertex {key} has an empty address word")))?;
            let source = addr.holder(home);
            if source == store.rank {
                continue;
            }
            if home != store.rank && addr.size() > MAX_MIGRATED_WORDS {
                alone.push(key);
                continue;
            }
            let offset = store.allocate(addr.size())?;
            reads.push(WorkRequest::new(
                copies.len() as u64,
                Op::Read {
                    remote: self.remote(source),
                    offset: store.layout.value(addr.offset()),
                    len: usize::try_from(addr.size() * 8).expect("a block fits memory"),
                },
            ));
            copies.push((key, home, location, addr, source, offset));
        }
        // Stage 3: keep the valid copies and CAS their address words.
        let mut valid = vec![false; copies.len()];
        for (wr_id, output) in self.post_all(reads)? {
            let i = usize::try_from(wr_id).expect("an index");
            let (_, _, _, addr, _, offset) = copies[i];
            let Output::Data(bytes) = output else {
                unreachable!("a READ completes with data")
            };
            if decode_block(addr, &bytes, store.weighted).is_some() {
                store.write_dark(offset, &bytes);
                valid[i] = true;
            }
        }
        let mut news = vec![0; copies.len()];
        let mut won = vec![false; copies.len()];
        let mut swaps = Vec::new();
        for (i, &(key, home, location, addr, _, offset)) in copies.iter().enumerate() {
            // Past the lease, as in `migrate`: not swapped, moved again alone.
            if !valid[i] || !store.within_lease(&location) {
                continue;
            }
            news[i] = Addr::at(home, store.rank, addr.size(), offset)
                .and_then(Addr::encode)
                .map_err(|source| Error::TooLarge {
                    vertex: key,
                    source,
                })?;
            if home == store.rank {
                let slot = store.byte(location.slot);
                won[i] = store.region.compare_swap(slot, location.word, news[i]) == location.word;
            } else {
                swaps.push(WorkRequest::new(
                    i as u64,
                    Op::CompareSwap {
                        remote: self.remote(home),
                        offset: location.slot,
                        expected: location.word,
                        new: news[i],
                    },
                ));
            }
        }
        for (wr_id, output) in self.post_all(swaps)? {
            let i = usize::try_from(wr_id).expect("an index");
            let Output::Value(previous) = output else {
                unreachable!("a CAS completes with a value")
            };
            won[i] = previous == copies[i].2.word;
        }
        // Stage 4: retire the blocks the CASes replaced, and light the
        // copies (as in `migrate`: a source whose ring stays full still has
        // its blocks invalidated).
        let mut next_entry: Vec<Option<u64>> = vec![None; store.node.size() as usize];
        let mut full = None;
        for source in 0..store.node.size() {
            let n = (0..copies.len())
                .filter(|&i| won[i] && copies[i].4 == source)
                .count() as u64;
            if n > 0 {
                match self.reserve_ring(source, n) {
                    Ok(first) => next_entry[source as usize] = Some(first),
                    Err(e) => full = full.or(Some(e)),
                }
            }
        }
        let mut retirements = Vec::new();
        let (mut moved, mut words) = (0, 0);
        for (i, &(key, home, location, addr, source, offset)) in copies.iter().enumerate() {
            if !won[i] {
                store.release(offset, addr.size());
                store.cache.forget(key);
                if valid[i] {
                    store
                        .counts
                        .migration_retries
                        .fetch_add(1, Ordering::Relaxed);
                }
                alone.push(key);
                continue;
            }
            store.published(key, home, location.slot, news[i]);
            match &mut next_entry[source as usize] {
                Some(index) => {
                    retirements.extend(self.retirement(source, addr, *index, i as u64));
                    *index += 1;
                }
                None => retirements.push(self.invalidation(source, addr, i as u64)),
            }
            moved += 1;
            words += addr.size();
        }
        let retired = self.post_all(retirements);
        for (i, &(_, _, _, addr, _, offset)) in copies.iter().enumerate() {
            if won[i] {
                store.light(offset, addr.size());
            }
        }
        retired?;
        if let Some(full) = full {
            return Err(full);
        }
        // Counted together, once the batch is done, so that a monitor
        // reading them meanwhile sees the moves with their operations.
        let counts = &store.counts;
        counts.migrations.fetch_add(moved, Ordering::Relaxed);
        counts.words_moved.fetch_add(words, Ordering::Relaxed);
        counts
            .migration_ops
            .fetch_add(self.tally.one_sided - before, Ordering::Relaxed);
        for key in alone {
            self.migrate(key)?;
        }
        Ok(self.tally.one_sided - before)
    }

    /// Copies shard `shard` here whole (the `shard` baseline, whose unit of
    /// migration is a shard of keys and values): one READ of its key table
    /// at its node, READs of all its values posted together, and both
    /// written here with each address word rewritten to this node's copy.
    ///
    /// The caller makes sure nothing reads or writes the shard meanwhile
    /// (every worker paused); once every target has its shards, every node
    /// points its map at the new homes ([`Store::set_shard_home`]) and the
    /// old node drops its copy ([`Store::drop_shard`]). Returns the
    /// one-sided operations posted (0 if the shard is here already).
    ///
    /// # Errors
    /// [`Error::ValueRegionFull`]; [`Error::Corrupt`] if a value is not
    /// where its key says (shard moves and split migration do not mix);
    /// verbs errors.
    pub fn pull_shard(&mut self, shard: u32) -> Result<u64> {
        let store = self.store;
        let source = store.shard_home(shard);
        if source == store.rank {
            return Ok(0);
        }
        let before = self.tally.one_sided;
        let (first, buckets) = store.placement.table(shard);
        let base = store.layout.bucket(first);
        let len = usize::try_from(buckets * BUCKET_BYTES as u64).expect("a table fits memory");
        let mut table = self.read(source, base, len)?;
        let mut slots = Vec::new();
        for bucket in 0..len / BUCKET_BYTES {
            for slot in 0..SLOTS - 1 {
                let at = bucket * BUCKET_BYTES + slot * SLOT_BYTES;
                let tag = word(&table, at / 8);
                if tag == 0 {
                    continue;
                }
                let corrupt = |what: &str| {
                    Error::Corrupt(format!(
                        "vertex {} of shard {shard} on node {source} {what}",
                        tag - 1
                    ))
                };
                let addr = Addr::decode(word(&table, at / 8 + 1))
                    .ok_or_else(|| corrupt("has an empty address word"))?;
                if addr.holder(source) != source {
                    return Err(corrupt(
                        "has its value on another node (shard moves and split migration do not mix)",
                    ));
                }
                slots.push((at, addr));
            }
        }
        let mut words = 0;
        for chunk in slots.chunks(SHARD_READS) {
            let reads = chunk
                .iter()
                .enumerate()
                .map(|(i, &(_, addr))| {
                    WorkRequest::new(
                        i as u64,
                        Op::Read {
                            remote: self.remote(source),
                            offset: store.layout.value(addr.offset()),
                            len: usize::try_from(addr.size() * 8).expect("a block fits memory"),
                        },
                    )
                })
                .collect();
            for (wr_id, output) in self.post_all(reads)? {
                let (at, addr) = chunk[usize::try_from(wr_id).expect("an index")];
                let Output::Data(bytes) = output else {
                    unreachable!("a READ completes with data")
                };
                if decode_block(addr, &bytes, store.weighted).is_none() {
                    return Err(Error::Corrupt(format!(
                        "vertex {} of shard {shard} changed on node {source} while the shard moved",
                        word(&table, at / 8) - 1
                    )));
                }
                let offset = store.allocate(addr.size())?;
                store
                    .region
                    .write(store.byte(store.layout.value(offset)), &bytes);
                let local = Addr::Local {
                    size: addr.size(),
                    offset,
                }
                .encode()
                .expect("a local address holds any size a remote one did");
                table[at + 8..at + 16].copy_from_slice(&local.to_le_bytes());
                words += addr.size();
            }
        }
        store.region.write(store.byte(base), &table);
        let ops = self.tally.one_sided - before;
        let counts = &store.counts;
        counts.shards_moved.fetch_add(1, Ordering::Relaxed);
        counts
            .migrations
            .fetch_add(slots.len() as u64, Ordering::Relaxed);
        counts.words_moved.fetch_add(words, Ordering::Relaxed);
        counts.migration_ops.fetch_add(ops, Ordering::Relaxed);
        Ok(ops)
    }

    /// Invalidates the block `addr` on `source` and enters it in
    /// `source`'s reclaim ring for this node: two WRITEs posted together
    /// after the CAS completed, so neither overtakes it. A ring that stays
    /// full is an error, but the block is invalidated all the same (and
    /// leaks): when this returns, the block is invalid or its node is lost,
    /// so the copy that replaced it may be lit.
    fn retire(&mut self, source: u32, addr: Addr) -> Result<()> {
        match self.reserve_ring(source, 1) {
            Ok(index) => {
                let wrs = self.retirement(source, addr, index, 0);
                self.post_all(wrs.to_vec()).map(drop)
            }
            Err(full) => {
                let invalidation = self.invalidation(source, addr, 0);
                self.post_all(vec![invalidation])?;
                Err(full)
            }
        }
    }

    /// Reserves `n` consecutive entries of `source`'s reclaim ring for this
    /// node, waiting while it is full; returns the first.
    fn reserve_ring(&mut self, source: u32, n: u64) -> Result<u64> {
        let store = self.store;
        let layout = store.layout;
        let mut rings = lock(&store.rings);
        let cursor = &mut rings[source as usize];
        let started = Instant::now();
        while cursor.tail + n - cursor.head > layout.ring_entries {
            // Full as far as we know: see how far the owner got, and wait
            // for it (entries are never dropped).
            let bytes = self.read(source, layout.ring(store.rank), 8)?;
            let head = u64::from_le_bytes(bytes.try_into().expect("8 bytes"));
            if head == cursor.head {
                if started.elapsed() > store.node.timeout() || n > layout.ring_entries {
                    return Err(Error::Stalled(format!(
                        "node {source}'s reclaim ring for node {} stayed full ({} entries) for {:?}; its reclaimer is not running",
                        store.rank,
                        layout.ring_entries,
                        store.node.timeout()
                    )));
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            cursor.head = head;
        }
        cursor.tail += n;
        Ok(cursor.tail - n)
    }

    /// The WRITE that invalidates block `addr` on `source`: its size word
    /// zeroed.
    fn invalidation(&self, source: u32, addr: Addr, wr_id: u64) -> WorkRequest {
        WorkRequest::new(
            wr_id,
            Op::Write {
                remote: self.remote(source),
                offset: self.store.layout.value(addr.offset()),
                data: 0u64.to_le_bytes().to_vec(),
            },
        )
    }

    /// The two WRITEs that retire block `addr` on `source` into ring entry
    /// `index`: its [`Session::invalidation`], and its address entered.
    fn retirement(&self, source: u32, addr: Addr, index: u64, wr_id: u64) -> [WorkRequest; 2] {
        let layout = self.store.layout;
        let remote = self.remote(source);
        let word = addr.encode().expect("a decoded address encodes");
        [
            self.invalidation(source, addr, wr_id),
            WorkRequest::new(
                wr_id,
                Op::Write {
                    remote,
                    offset: layout.ring_entry(self.store.rank, index),
                    data: word.to_le_bytes().to_vec(),
                },
            ),
        ]
    }

    /// Posts `wrs` together, waits for all of them and returns their
    /// outputs in completion order with their work-request ids; charges
    /// the batch's modelled time (one latency plus the queue's gaps).
    fn post_all(&mut self, wrs: Vec<WorkRequest>) -> Result<Vec<(u64, Output)>> {
        if wrs.is_empty() {
            return Ok(Vec::new());
        }
        let n = wrs.len();
        let cost = self.store.config.cost.batch(
            wrs.iter()
                .map(|wr| (wr.op.verb(), wr.op.payload_len().max(8))),
        );
        self.tally.one_sided += n as u64;
        self.tally.modelled_ns += u64::try_from(cost.as_nanos()).unwrap_or(u64::MAX);
        self.queue.post(wrs).map_err(Error::Verbs)?;
        self.completions.clear();
        self.queue
            .wait(&mut self.completions, n, n)
            .map_err(Error::Verbs)?;
        self.completions
            .drain(..)
            .map(|completion| {
                let wr_id = completion.wr_id;
                completion
                    .output()
                    .map(|output| (wr_id, output))
                    .map_err(Error::Verbs)
            })
            .collect()
    }

    /// The value's holder for `key`, read at its home (for checks).
    ///
    /// # Errors
    /// As [`Session::get`].
    pub fn holder(&mut self, key: u32) -> Result<u32> {
        self.store.check_vertex(key)?;
        let home = self.store.home_node(key);
        let location = self.locate(key, false)?;
        Addr::decode(location.word)
            .map(|addr| addr.holder(home))
            .ok_or_else(|| Error::Corrupt(format!("vertex {key} has an empty address word")))
    }

    /// Stops this node's [`Store::serve`].
    ///
    /// # Errors
    /// Verbs errors.
    pub fn stop_server(&mut self) -> Result<()> {
        let rank = self.store.rank;
        self.send(rank, &Message::Stop)
    }

    /// The verbs queue (the server polls its receives on it).
    pub(crate) fn queue(&mut self) -> &mut Queue {
        &mut self.queue
    }
}

/// Value READs of a shard move posted together at most.
const SHARD_READS: usize = 256;

/// The largest value a migration can move, in words.
pub const MAX_MIGRATED_WORDS: u64 = (1 << REMOTE_SIZE_BITS) - 1;

/// `key`'s location if the bucket read at byte `base` holds it.
fn find_in_bucket(key: u32, base: u64, bytes: &[u8], since: u64) -> Option<Location> {
    let tag = u64::from(key) + 1;
    (0..SLOTS - 1)
        .find(|&slot| word(bytes, 2 * slot) == tag)
        .map(|slot| Location {
            word: word(bytes, 2 * slot + 1),
            slot: base + (slot * SLOT_BYTES) as u64 + 8,
            since,
        })
}

/// The overflow bucket a bucket read links to, if any.
fn chained(bytes: &[u8]) -> Option<u64> {
    (word(bytes, 2 * (SLOTS - 1)) == LINK).then(|| word(bytes, 2 * SLOTS - 1))
}

/// The `i`-th 8-byte word of bytes read from a region.
fn word(bytes: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(bytes[i * 8..i * 8 + 8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unweighted(ids: &[u32]) -> Edges {
        Edges {
            ids: ids.to_vec(),
            weights: None,
        }
    }

    #[test]
    fn updates_append_or_repoint_one_edge() {
        let mut edges = unweighted(&[1, 2, 3]);
        Update::AddEdge(9).apply(0, &mut edges).unwrap();
        assert_eq!(edges, unweighted(&[1, 2, 3, 9]));
        Update::SetEdge {
            index: 5,
            target: 7,
        }
        .apply(0, &mut edges)
        .unwrap();
        assert_eq!(
            edges,
            unweighted(&[1, 7, 3, 9]),
            "index 5 of 4 edges is edge 1"
        );
        let mut none = unweighted(&[]);
        Update::SetEdge {
            index: 3,
            target: 4,
        }
        .apply(0, &mut none)
        .unwrap();
        assert_eq!(none, unweighted(&[4]));
    }

    #[test]
    fn weighted_updates_keep_each_edge_with_its_weight() {
        let mut edges = Edges {
            ids: vec![1, 2],
            weights: Some(vec![0.5, 2.0]),
        };
        Update::AddEdge(9).apply(0, &mut edges).unwrap();
        let weight = 3.5;
        Update::AddWeightedEdge { target: 8, weight }
            .apply(0, &mut edges)
            .unwrap();
        Update::SetEdge {
            index: 1,
            target: 7,
        }
        .apply(0, &mut edges)
        .unwrap();
        Update::SetWeight {
            index: 6,
            weight: -1.0,
        }
        .apply(0, &mut edges)
        .unwrap();
        assert_eq!(edges.ids, [1, 7, 9, 8]);
        assert_eq!(
            edges.weights.unwrap(),
            [0.5, 2.0, -1.0, 3.5],
            "index 6 of 4 edges is edge 2"
        );
        let mut none = Edges {
            ids: Vec::new(),
            weights: Some(Vec::new()),
        };
        let set = Update::SetWeight {
            index: 0,
            weight: 1.0,
        };
        let err = set.apply(42, &mut none).unwrap_err();
        assert!(
            format!("{err:?}").contains("vertex 42 has no edge"),
            "{err:?}"
        );
    }
}
