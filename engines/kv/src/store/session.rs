//! A thread's handle on the store ([`Session`]): its verbs queue and its
//! counts ([`Tally`]), one-sided operations charged to its modelled time,
//! key lookups (in this node's own key region, by one READ of its bucket group at the
//! home, or through the location cache), and Get with the benchmark's
//! two-hop query.

use std::time::Instant;

use quiver_verbs::{Completion, Output, Queue, RemoteRegion, Verb, WorkRequest};
use serde::{Deserialize, Serialize};

use super::Store;
use crate::addr::Addr;
use crate::cache::Location;
use crate::layout::{decode_block, prefix_bytes, Edges, BUCKET_BYTES, SLOTS, SLOT_BYTES};
use crate::message::Message;
use crate::{Error, Result};

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
    /// Reads that found an invalidated block (size word 0: replaced by a
    /// Put or a migration, or a migration's copy not yet lit) and started
    /// over.
    pub retries: u64,
    /// Reads that found memory reused under them and started over: a
    /// block whose size word or count does not match its address, or a
    /// read that ended past its address's lease, when the block it named
    /// may have been reclaimed and written again (a torn read looks
    /// valid, so only the lease tells it).
    pub stale_reads: u64,
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
        self.stale_reads += other.stale_reads;
        self.puts += other.puts;
        self.one_sided += other.one_sided;
        self.modelled_ns += other.modelled_ns;
    }
}

/// One thread's handle on the store.
#[derive(Debug)]
pub struct Session<'s> {
    pub(super) store: &'s Store,
    pub(super) queue: Queue,
    pub(super) tally: Tally,
    pub(super) completions: Vec<Completion>,
}

impl Store {
    /// Looks `key`, which hashes to main bucket `main`, up in this node's
    /// own key region.
    pub(super) fn local_lookup(&self, key: u32, main: u64) -> Option<Location> {
        let tag = u64::from(key) + 1;
        let until = self.lease_end();
        let (first, buckets) = self.tables.group(main);
        let base = self.layout.bucket(first);
        (0..buckets * SLOTS as u64)
            .map(|slot| base + slot * SLOT_BYTES as u64)
            .find(|&at| self.region.load(self.byte(at)) == tag)
            .map(|at| Location {
                word: self.region.load(self.byte(at + 8)),
                slot: at + 8,
                until,
            })
    }

    /// Where the group of main bucket `main` lies: its byte offset and
    /// length, what one READ of a lookup fetches.
    pub(super) fn group_bytes(&self, main: u64) -> (u64, usize) {
        let (first, buckets) = self.tables.group(main);
        let len = usize::try_from(buckets).expect("a group fits memory") * BUCKET_BYTES;
        (self.layout.bucket(first), len)
    }
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

    pub(super) fn charge(&mut self, verb: Verb, bytes: usize) {
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

    pub(super) fn remote(&self, node: u32) -> RemoteRegion {
        self.store.remotes[node as usize]
    }

    pub(super) fn read(&mut self, node: u32, offset: u64, len: usize) -> Result<Vec<u8>> {
        self.charge(Verb::Read, len);
        let remote = self.remote(node);
        self.queue.read(remote, offset, len).map_err(Error::Verbs)
    }

    pub(super) fn compare_swap(
        &mut self,
        node: u32,
        offset: u64,
        expected: u64,
        new: u64,
    ) -> Result<u64> {
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

    /// Looks `key`, which hashes to main bucket `main`, up at its home
    /// `home`: one READ of the main bucket's group.
    fn remote_lookup(&mut self, key: u32, home: u32, main: u64) -> Result<Option<Location>> {
        let until = self.store.lease_end();
        let (base, len) = self.store.group_bytes(main);
        let bytes = self.read(home, base, len)?;
        Ok(find_in_group(key, base, &bytes, until))
    }

    /// `key`'s location: from its home's key region (local, or READ), or
    /// from the location cache when `cached` allows and it holds one.
    pub(super) fn locate(&mut self, key: u32, cached: bool) -> Result<Location> {
        let store = self.store;
        let (home, main) = store.home(key);
        let found = if home == store.rank {
            store.local_lookup(key, main)
        } else {
            let now = store.clock.now_ns();
            match store.cache.access(key, now).filter(|_| cached) {
                Some(location) => {
                    self.tally.cache_hits += 1;
                    Some(location)
                }
                None => {
                    self.tally.cache_misses += u64::from(store.config.serve_cache);
                    let found = self.remote_lookup(key, home, main)?;
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
            match decode_block(key, addr, &bytes, store.weighted) {
                Some(edges) if store.within_lease(&location) => {
                    self.tally.remote_values += u64::from(holder != store.rank);
                    break edges;
                }
                None if word(&bytes, 0) == 0 => self.tally.retries += 1,
                _ => self.tally.stale_reads += 1,
            }
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

    /// Posts `wrs` together, waits for all of them and returns their
    /// outputs in completion order with their work-request ids; charges
    /// the batch's modelled time (one latency plus the queue's gaps).
    pub(super) fn post_all(&mut self, wrs: Vec<WorkRequest>) -> Result<Vec<(u64, Output)>> {
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

    /// `key`'s address word, read at its home: where its value is now,
    /// and its size (for checks).
    ///
    /// # Errors
    /// As [`Session::get`].
    pub fn address(&mut self, key: u32) -> Result<Addr> {
        self.store.check_vertex(key)?;
        let location = self.locate(key, false)?;
        Addr::decode(location.word)
            .ok_or_else(|| Error::Corrupt(format!("vertex {key} has an empty address word")))
    }

    /// The value's holder for `key`, read at its home (for checks).
    ///
    /// # Errors
    /// As [`Session::get`].
    pub fn holder(&mut self, key: u32) -> Result<u32> {
        let addr = self.address(key)?;
        Ok(addr.holder(self.store.home_node(key)))
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

/// `key`'s location if the group read at byte `base` holds it, its lease
/// ending at `until`.
pub(super) fn find_in_group(key: u32, base: u64, bytes: &[u8], until: u64) -> Option<Location> {
    used_slots(bytes)
        .find(|&(_, k, _)| k == key)
        .map(|(at, _, word)| Location {
            word,
            slot: base + at as u64 + 8,
            until,
        })
}

/// Every used slot of key-region bytes (whole slots from a slot
/// boundary): its byte offset in `bytes`, its key and its address word.
pub(super) fn used_slots(bytes: &[u8]) -> impl Iterator<Item = (usize, u32, u64)> + '_ {
    (0..bytes.len() / SLOT_BYTES).filter_map(|slot| {
        let tag = word(bytes, 2 * slot);
        (tag != 0).then(|| {
            let key = u32::try_from(tag - 1).expect("a slot holds a vertex id");
            (slot * SLOT_BYTES, key, word(bytes, 2 * slot + 1))
        })
    })
}

/// The `i`-th 8-byte word of bytes read from a region.
pub(super) fn word(bytes: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(bytes[i * 8..i * 8 + 8].try_into().expect("8 bytes"))
}
