//! The shard map and the `shard` baseline (Pragh §5): every key's home is
//! its shard's node in a map every node keeps alike; under the baseline a
//! node counts its accesses per shard, and whole shards of keys and values
//! move ([`Session::pull_shard`], [`Store::drop_shard`]) while every worker
//! is held.

use std::sync::atomic::Ordering;

use quiver_verbs::{Op, Output, WorkRequest};

use super::session::used_slots;
use super::{Session, Store};
use crate::addr::Addr;
use crate::layout::{decode_block, BUCKET_BYTES, SLOTS, SLOT_BYTES};
use crate::{Error, Result};

/// Value READs of a shard move posted together at most.
const SHARD_READS: usize = 256;

impl Store {
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

    pub(super) fn count_access(&self, key: u32) {
        if self.config.shards_move {
            let shard = self.placement.locate(key).0;
            self.shard_accesses[shard as usize].fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Drops this node's copy of shard `shard` after it moved away: frees
    /// its values and clears its table. Only while no worker runs.
    pub fn drop_shard(&self, shard: u32) {
        let (first, buckets) = self.tables.table(shard);
        for bucket in first..first + buckets {
            let base = self.layout.bucket(bucket);
            for slot in 0..SLOTS {
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
}

impl Session<'_> {
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
        let (first, buckets) = store.tables.table(shard);
        let base = store.layout.bucket(first);
        let len = usize::try_from(buckets * BUCKET_BYTES as u64).expect("a table fits memory");
        let mut table = self.read(source, base, len)?;
        let mut slots = Vec::new();
        for (at, key, word) in used_slots(&table) {
            let corrupt = |what: &str| {
                Error::Corrupt(format!(
                    "vertex {key} of shard {shard} on node {source} {what}"
                ))
            };
            let addr = Addr::decode(word).ok_or_else(|| corrupt("has an empty address word"))?;
            if addr.holder(source) != source {
                return Err(corrupt(
                    "has its value on another node (shard moves and split migration do not mix)",
                ));
            }
            slots.push((at, key, addr));
        }
        let mut words = 0;
        for chunk in slots.chunks(SHARD_READS) {
            let reads = chunk
                .iter()
                .enumerate()
                .map(|(i, &(_, _, addr))| {
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
                let (at, key, addr) = chunk[usize::try_from(wr_id).expect("an index")];
                let Output::Data(bytes) = output else {
                    unreachable!("a READ completes with data")
                };
                if decode_block(key, addr, &bytes, store.weighted).is_none() {
                    return Err(Error::Corrupt(format!(
                        "vertex {key} of shard {shard} changed on node {source} while the shard moved"
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
}
