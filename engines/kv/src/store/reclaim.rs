//! Reclamation: blocks replaced here by Puts, and blocks other nodes
//! migrated away and entered in this node's reclaim rings, freed once the
//! reclaim lease in force has run out since they were replaced. The lease
//! is the one in force when they are freed, not when they were replaced:
//! it is never shorter than a cache lease under which an address naming
//! them may still be trusted (see `lease`), so a lease shortened by a run
//! frees the blocks waiting under the longer one at once.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;

use super::{lock, Store};
use crate::addr::Addr;

/// Reclamation state: blocks waiting out their lease.
#[derive(Debug, Default)]
pub(super) struct Reclaim {
    /// Blocks of this node replaced here: (offset, words, when).
    pub(super) local: VecDeque<(u64, u64, u64)>,
    /// Per writer node: entries taken from its ring so far, and when each
    /// entry seen but not yet freed was first seen.
    pub(super) rings: Vec<(u64, VecDeque<u64>)>,
    /// Words of the blocks waiting, in the local list and seen in rings.
    pub(super) waiting_words: u64,
}

impl Reclaim {
    /// Enters block (`offset`, `words`), replaced here at `when`.
    pub(super) fn wait(&mut self, offset: u64, words: u64, when: u64) {
        self.local.push_back((offset, words, when));
        self.waiting_words += words;
    }
}

/// This node's cursor in another node's reclaim ring.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct RingCursor {
    pub(super) tail: u64,
    pub(super) head: u64,
}

impl Store {
    /// Frees every block whose reclaim lease (the one in force now) has run
    /// out: blocks replaced here by Puts, and blocks other nodes migrated
    /// away and entered in this node's rings. A ring entry's lease is
    /// counted from when this node first saw it, which is never before it
    /// was written.
    pub fn reclaim(&self) {
        let now = self.clock.now_ns();
        let lease = self.leases.reclaim_ns();
        let mut reclaim = lock(&self.reclaim);
        let reclaim = &mut *reclaim;
        let mut freed = 0;
        let over = |when: u64| when.saturating_add(lease) <= now;
        while let Some(&(offset, words, when)) = reclaim.local.front() {
            if !over(when) {
                break;
            }
            reclaim.local.pop_front();
            reclaim.waiting_words -= words;
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
                let Some(addr) = Addr::decode(word) else {
                    break;
                };
                seen.push_back(now);
                reclaim.waiting_words += addr.size();
                self.counts
                    .words_retired
                    .fetch_add(addr.size(), Ordering::Relaxed);
            }
            while seen.front().is_some_and(|&when| over(when)) {
                seen.pop_front();
                let at = self.byte(self.layout.ring_entry(writer, *taken));
                let addr = Addr::decode(self.region.load(at)).expect("a seen entry is non-zero");
                reclaim.waiting_words -= addr.size();
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

    /// The blocks of this node waiting out their lease, as (offset,
    /// words): those replaced here and those entered in its rings, every
    /// entry written so far seen first.
    pub(super) fn waiting_blocks(&self) -> Vec<(u64, u64)> {
        self.reclaim();
        let reclaim = lock(&self.reclaim);
        let mut blocks: Vec<(u64, u64)> = reclaim
            .local
            .iter()
            .map(|&(offset, words, _)| (offset, words))
            .collect();
        for (writer, (taken, seen)) in reclaim.rings.iter().enumerate() {
            let writer = u32::try_from(writer).expect("a rank");
            for index in *taken..*taken + seen.len() as u64 {
                let at = self.byte(self.layout.ring_entry(writer, index));
                let addr = Addr::decode(self.region.load(at)).expect("a seen entry is non-zero");
                blocks.push((addr.offset(), addr.size()));
            }
        }
        blocks
    }
}
