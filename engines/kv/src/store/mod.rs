//! One node's part of the store and the operations on it: the registered
//! region and its bulk load (here), and by concern:
//! - `session`: a thread's [`Session`] (its queue and [`Tally`]), key
//!   lookups, Get and the two-hop query;
//! - `put`: Put, copy-on-write where the value is held and forwarded
//!   there from its home (check-and-forward);
//! - `migrate`: split live migration, the unilateral protocol, one key or
//!   a pipelined batch;
//! - `shard`: the shard map and the `shard` baseline's whole-shard moves;
//! - `hotness`: the monitor's harvest and the home's counts of its own
//!   reads, as the [`Plan`] says;
//! - `reclaim`: blocks replaced or migrated away, freed after their lease;
//! - `recover`: the leak scan, and recovery from a node that died.
//!
//! Every thread of a node works through its own [`Session`] (a verbs queue
//! and its counts) on the node's shared [`Store`].

mod hotness;
mod migrate;
mod put;
mod reclaim;
mod recover;
mod session;
mod shard;

pub(crate) use put::PutOutcome;
pub use recover::{Orphan, Recovery};
pub use session::{Session, Tally};

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use quiver_csr::Graph;
use quiver_verbs::{CostModel, Node, Region, RemoteRegion};
use serde::{Deserialize, Serialize};

use crate::addr::Addr;
use crate::alloc::Alloc;
use crate::cache::{Location, LocationCache};
use crate::clock::{nanos, Clock};
use crate::layout::{
    block_words, encode_block, Edges, Layout, Placement, Tables, SLOTS, SLOT_BYTES,
};
use crate::lease::Leases;
use crate::policy::Plan;
use crate::{Error, Result};
use put::Replies;
use reclaim::{Reclaim, RingCursor};

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
    /// The longest a cached address may be used after it was read at its
    /// home. A benchmark run shortens it (to half the reclaim lease) while
    /// the value room would not hold the copies (see `lease` in the
    /// crate's source).
    pub cache_lease: Duration,
    /// The longest replaced or migrated memory is kept before it is
    /// reused; at least `cache_lease`. A benchmark run shortens it while
    /// the fullest node's free and waiting room would not hold half of
    /// what it replaces at the rate it replaces it.
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
    /// A 32 MiB location cache; leases of at most 30 s (cache) and 60 s
    /// (reclaim, the paper's), shortened by a run while the room would
    /// not hold the copies; 1 GiB of room for new values per node; local
    /// accesses modelled 20x cheaper than an RDMA READ ("local is more
    /// than 20x faster", §2).
    ///
    /// A long cache lease saves the READ that refreshes a hot key's
    /// cached address, which makes a Get remote; but every replaced block
    /// waits out the reclaim lease, and a Zipf-hot vertex's list grows by
    /// each Put, so at 60 s a 5%-Put run on a Kronecker graph of scale 22
    /// holds hundreds of megabytes of dead copies a node, and a 50/50 run
    /// gigabytes. Hence leases derived from what a run replaces, under
    /// these ceilings.
    fn default() -> Self {
        let cost = CostModel::default();
        Self {
            cache_bytes: 32 << 20,
            serve_cache: true,
            plan: Plan::Tracked,
            cache_lease: Duration::from_secs(30),
            reclaim_lease: Duration::from_secs(60),
            ring_entries: 1 << 14,
            value_headroom: 1 << 30,
            local_ns: cost.read_ns / 20,
            cost,
            shards_move: false,
        }
    }
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
    /// Words of the blocks replaced here (by Puts, or moved away by
    /// migrations) that waited out their lease.
    pub words_retired: u64,
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
    words_retired: AtomicU64,
    shards_moved: AtomicU64,
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
    /// Where each main bucket's keys lie in the key region.
    tables: Tables,
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
    /// The cache and reclaim leases in force (a run's monitor changes them).
    leases: Leases,
    /// Under [`Plan::Deferred`], the keys homed here whose reads the
    /// coordinator asked this home to count, a bit each (empty under the
    /// other plans).
    candidates: Vec<AtomicU64>,
    clock: Clock,
    config: StoreConfig,
    reclaim: Mutex<Reclaim>,
    rings: Mutex<Vec<RingCursor>>,
    next_request: AtomicU64,
    replies: Replies,
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
        let tables = Tables::new(&placement, vertices);
        let loaded: u64 = (0..vertices)
            .filter(|&v| config.shards_move || placement.home_node(v) == rank)
            .map(|v| block_words(graph.degree(v), weighted))
            .sum();
        let layout = Layout {
            buckets: tables.buckets(),
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
            tables,
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
            cache: LocationCache::new(config.cache_bytes, config.serve_cache),
            home_reads: LocationCache::new(config.cache_bytes / 8, false),
            leases: Leases::new(nanos(config.cache_lease), nanos(config.reclaim_lease)),
            candidates: (0..candidate_words).map(|_| AtomicU64::new(0)).collect(),
            clock,
            config: config.clone(),
            reclaim: Mutex::new(Reclaim {
                local: VecDeque::new(),
                rings: vec![(0, VecDeque::new()); node.size() as usize],
                waiting_words: 0,
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
        for v in 0..self.vertices {
            let (home, main) = self.home(v);
            if home != self.rank {
                continue;
            }
            let words = block_words(graph.degree(v), self.weighted);
            let offset = self.allocate(words)?;
            // The address before the block: a list too long for an address
            // word may be too long for a block's count.
            let word = Addr::Local {
                size: words,
                offset,
            }
            .encode()
            .map_err(|source| Error::TooLarge { vertex: v, source })?;
            self.region.write(
                self.byte(self.layout.value(offset)),
                &encode_block(v, &Edges::of(graph, v)),
            );
            self.insert(v, main, word);
        }
        Ok(())
    }

    /// Puts `key` with `word` into the first free slot of main bucket
    /// `main`'s group (load time only: keys are never added later, and
    /// move only with their whole table).
    fn insert(&self, key: u32, main: u64, word: u64) {
        let (first, buckets) = self.tables.group(main);
        let base = self.layout.bucket(first);
        let slots = usize::try_from(buckets).expect("a group fits memory") * SLOTS;
        let free = (0..slots)
            .map(|slot| self.byte(base + (slot * SLOT_BYTES) as u64))
            .find(|&at| self.region.load(at) == 0)
            .expect("a group has a slot for each of its keys, as Tables counted them");
        // The address first: a reader that sees the key sees it.
        self.region.store(free + 8, word);
        self.region.store(free, u64::from(key) + 1);
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

    /// The key's home node now (its shard's node) and the main bucket it
    /// hashes to (see [`Tables::group`] for where its keys lie).
    pub fn home(&self, key: u32) -> (u32, u64) {
        let (shard, main) = self.placement.locate(key);
        (self.homes[shard as usize].load(Ordering::Acquire), main)
    }

    /// The key's home node now.
    pub fn home_node(&self, key: u32) -> u32 {
        self.home(key).0
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
            words_retired: c.words_retired.load(Ordering::Relaxed),
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
                    until: self.lease_end(),
                },
            );
        }
    }

    /// Whether a read through `location` that ended before now read the
    /// block its word named: its lease has not ended, so the block has not
    /// been reclaimed since the word was the home's (see [`Location`]).
    /// Past that, the memory may hold another value, or an older copy of
    /// this one.
    fn within_lease(&self, location: &Location) -> bool {
        self.clock.now_ns() < location.until
    }

    /// When the lease of an address read at its home now ends.
    pub(super) fn lease_end(&self) -> u64 {
        self.clock.now_ns().saturating_add(self.leases.cache_ns())
    }

    /// Puts leases (cache, reclaim) a [`crate::lease::LeasePlan`] derived
    /// in force.
    pub(crate) fn set_leases(&self, leases: (u64, u64)) {
        self.leases.set(leases);
    }

    /// Words free in this node's value region, and words of replaced
    /// blocks waiting out their lease in it.
    pub(crate) fn room(&self) -> (u64, u64) {
        let free = {
            let alloc = lock(&self.alloc);
            alloc.capacity() - alloc.used()
        };
        (free, lock(&self.reclaim).waiting_words)
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
}
