//! Split live migration (Pragh §4.5): the unilateral protocol, run by the
//! target alone with at most five one-sided operations for every key, for
//! one key or for a batch whose
//! stages are pipelined across its keys (§4.7). The copy is written dark
//! and lit once the block it replaced is invalid; the replaced block goes
//! into its node's reclaim ring for this node.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use quiver_verbs::{Op, Output, WorkRequest};

use super::session::find_in_group;
use super::{lock, Session, Store};
use crate::addr::{Addr, REMOTE_SIZE_BITS};
use crate::cache::Location;
use crate::layout::decode_block;
use crate::{Error, Result};

/// The largest value a migration can move, in words.
const MAX_MIGRATED_WORDS: u64 = (1 << REMOTE_SIZE_BITS) - 1;

/// A migration's dark copy, published at the key's home and not yet
/// retired: the block it replaced, on `source` under `addr`, is still
/// valid; the copy is at `offset` here.
#[derive(Clone, Copy, Debug)]
pub(super) struct Published {
    pub(super) source: u32,
    pub(super) addr: Addr,
    pub(super) offset: u64,
}

impl Store {
    /// Writes a migration's copy of a block at `offset` with its size word
    /// 0: dark, so that nothing reads, copies or updates it until
    /// [`Store::light`] (see [`Session::migrate`]).
    fn write_dark(&self, offset: u64, block: &[u8]) {
        let at = self.byte(self.layout.value(offset));
        self.region.store(at, 0);
        self.region.write(at + 8, &block[8..]);
    }

    /// Gives back the dark copy of `words` words at `offset` of a migration
    /// of `key` that must start again (its source changed, or the home's
    /// slot moved on), forgets where `key` was, and counts the retry.
    fn abandon_copy(&self, offset: u64, words: u64, key: u32) {
        self.release(offset, words);
        self.cache.forget(key);
        self.counts
            .migration_retries
            .fetch_add(1, Ordering::Relaxed);
    }

    /// Makes the dark copy of `words` words at `offset` readable.
    fn light(&self, offset: u64, words: u64) {
        self.region
            .store(self.byte(self.layout.value(offset)), words);
    }
}

impl Session<'_> {
    /// Moves `key`'s value to this node with the unilateral protocol: READ
    /// the key (its bucket group, skipped on a location-cache hit),
    /// allocate, READ the value, CAS the address word at the home, WRITE 0
    /// over the old size word and WRITE the old address into the holder's
    /// reclaim ring: at most 5 one-sided operations, wherever the key lies
    /// in its group. Returns the one-sided operations it posted (0 if the
    /// value was already here; more if a race made it start again).
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
        let before = self.tally.one_sided;
        let Some(published) = self.publish(key)? else {
            return Ok(self.tally.one_sided - before);
        };
        let size = published.addr.size();
        // However the retirement ends, the old block is invalid or gone
        // with its node: the copy may be lit.
        let retired = self.retire(published.source, published.addr);
        self.store.light(published.offset, size);
        retired?;
        let ops = self.tally.one_sided - before;
        let counts = &self.store.counts;
        counts.migrations.fetch_add(1, Ordering::Relaxed);
        counts.words_moved.fetch_add(size, Ordering::Relaxed);
        counts.migration_ops.fetch_add(ops, Ordering::Relaxed);
        Ok(ops)
    }

    /// A migration's first three steps: the key READ, the value READ into
    /// a dark copy here, and the CAS that publishes the copy at the home,
    /// started over until the CAS wins. Returns the published copy, whose
    /// source block is still valid and in no reclaim ring, or `None` if
    /// the value is already here. A node that dies now, before
    /// [`Session::retire`], leaves its source block unreachable: see
    /// [`Store::recover`].
    pub(super) fn publish(&mut self, key: u32) -> Result<Option<Published>> {
        let store = self.store;
        let home = store.home_node(key);
        loop {
            let location = self.locate(key, store.config.serve_cache)?;
            let addr = Addr::decode(location.word)
                .ok_or_else(|| Error::Corrupt(format!("vertex {key} has an empty address word")))?;
            let source = addr.holder(home);
            if source == store.rank {
                return Ok(None);
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
            if decode_block(key, addr, &bytes, store.weighted).is_none() {
                store.abandon_copy(offset, size, key);
                continue;
            }
            store.write_dark(offset, &bytes);
            // Past the lease the copy may be of memory given to another
            // value since, and the slot may hold the same word again.
            let won = store.within_lease(&location)
                && self.compare_swap(home, location.slot, location.word, new)? == location.word;
            if !won {
                store.abandon_copy(offset, size, key);
                continue;
            }
            store.published(key, home, location.slot, new);
            return Ok(Some(Published {
                source,
                addr,
                offset,
            }));
        }
    }

    /// Moves the values of `keys` to this node like [`Session::migrate`],
    /// with the protocol's stages pipelined across the keys (Pragh §4.7):
    /// the key READs of all of them posted together, then the value READs, then
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
        let until = store.lease_end();
        for &key in &keys {
            let (home, main) = store.home(key);
            let known = if home == store.rank {
                store.local_lookup(key, main)
            } else {
                store
                    .cache
                    .access(key, store.clock.now_ns())
                    .filter(|_| store.config.serve_cache)
            };
            match known {
                Some(location) => located.push((key, location)),
                None => {
                    let (offset, len) = store.group_bytes(main);
                    lookups.push(WorkRequest::new(
                        u64::from(key),
                        Op::Read {
                            remote: self.remote(home),
                            offset,
                            len,
                        },
                    ));
                }
            }
        }
        let mut alone = Vec::new();
        for (wr_id, output) in self.post_all(lookups)? {
            let key = u32::try_from(wr_id).expect("work-request ids are keys");
            let Output::Data(bytes) = output else {
                unreachable!("a READ completes with data")
            };
            let (base, _) = store.group_bytes(store.placement.locate(key).1);
            match find_in_group(key, base, &bytes, until) {
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
            if decode_block(copies[i].0, addr, &bytes, store.weighted).is_some() {
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

    /// Invalidates the block `addr` on `source` and enters it in
    /// `source`'s reclaim ring for this node: two WRITEs posted together
    /// after the CAS completed, so neither overtakes it. A ring that stays
    /// full is an error, but the block is invalidated all the same (and
    /// leaks): when this returns, the block is invalid or its node is lost,
    /// so the copy that replaced it may be lit.
    pub(super) fn retire(&mut self, source: u32, addr: Addr) -> Result<()> {
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
    pub(super) fn invalidation(&self, source: u32, addr: Addr, wr_id: u64) -> WorkRequest {
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
}
