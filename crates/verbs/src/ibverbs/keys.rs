//! The key table: how peers learn, with one READ, whether a key is live and
//! where its region is; and the checks an access must pass at the origin,
//! since the NIC must never see a request it would reject.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ::ibverbs::ibv_access_flags;

use super::resources::{Device, MemoryMr};
use super::{KEY_SLOTS, LOW_32, SLOT_BYTES, SLOT_WORDS};
use crate::error::VerbError;
use crate::region::Memory;
use crate::NodeRank;

/// A node's key table: [`KEY_SLOTS`] entries of [`SLOT_WORDS`] words, read
/// by peers, written only by this node. Entry `k % KEY_SLOTS` describes the
/// live region with key `k`: word 0 is `k << 32 | rkey` (0 when free), then
/// the region's length, its address, and 1 while the entry is claimed.
/// Word 0 is published last and cleared first, so a reader that finds its
/// key in word 0 also finds that region's length and address.
pub(super) struct KeyTable {
    words: MemoryMr,
}

impl KeyTable {
    /// An empty table, registered for peers to read.
    pub(super) fn new(device: &Arc<Device>) -> std::io::Result<Self> {
        let memory = Arc::new(Memory::zeroed(KEY_SLOTS * SLOT_BYTES));
        Ok(Self {
            words: MemoryMr::register(device, memory, ibv_access_flags::IBV_ACCESS_REMOTE_READ)?,
        })
    }

    /// The table's address, which peers READ at.
    pub(super) fn addr(&self) -> u64 {
        self.words.memory().as_ptr() as u64
    }

    /// The table's remote key.
    pub(super) fn rkey(&self) -> u32 {
        self.words.rkey()
    }

    /// Word `word` of entry `slot`.
    fn word(&self, slot: usize, word: usize) -> &AtomicU64 {
        self.words.memory().word((slot * SLOT_WORDS + word) * 8)
    }

    /// Publishes a region; `None` if its entry is still held by an older one.
    fn claim(&self, key: u32, rkey: u32, len: u64, addr: u64) -> Option<usize> {
        let slot = key as usize % KEY_SLOTS;
        self.word(slot, 3)
            .compare_exchange(0, 1, Ordering::AcqRel, Ordering::Acquire)
            .ok()?;
        self.word(slot, 1).store(len, Ordering::Relaxed);
        self.word(slot, 2).store(addr, Ordering::Relaxed);
        self.word(slot, 0)
            .store(u64::from(key) << 32 | u64::from(rkey), Ordering::Release);
        Some(slot)
    }

    fn release(&self, slot: usize) {
        self.word(slot, 0).store(0, Ordering::Release);
        self.word(slot, 3).store(0, Ordering::Release);
    }
}

/// Where a live region of a peer is, as its key table says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Target {
    pub(super) rkey: u32,
    pub(super) addr: u64,
    pub(super) len: u64,
}

impl Target {
    /// Decodes a key-table entry read for `key`.
    pub(super) fn decode(key: u32, words: [u64; SLOT_WORDS]) -> Option<Target> {
        (words[0] >> 32 == u64::from(key) && words[0] != 0).then(|| Target {
            rkey: u32::try_from(words[0] & LOW_32).expect("masked to 32 bits"),
            len: words[1],
            addr: words[2],
        })
    }
}

/// Keeps a region registered with the NIC and published in the key table,
/// until the region is dropped.
pub(super) struct Registration {
    table: Arc<KeyTable>,
    slot: usize,
    // Deregistered (and the memory released) after the entry is unpublished.
    _mr: MemoryMr,
}

impl Registration {
    /// Publishes the region of `key` and `len` bytes registered as `mr` in
    /// `table`; `None` if its entry is still held by the region registered
    /// [`KEY_SLOTS`] keys earlier.
    pub(super) fn publish(
        table: &Arc<KeyTable>,
        key: u32,
        len: u64,
        mr: MemoryMr,
    ) -> Option<Registration> {
        let addr = mr.memory().as_ptr() as u64;
        let slot = table.claim(key, mr.rkey(), len, addr)?;
        Some(Registration {
            table: Arc::clone(table),
            slot,
            _mr: mr,
        })
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        // Unpublished first, so peers that look the key up from now on
        // learn that it is gone; then the fields deregister the memory.
        self.table.release(self.slot);
    }
}

/// The origin-side checks of an access of `len` bytes at `offset`, the same
/// as the target-side checks of the other fabrics (`Registry`), in the same
/// order: range first, then atomic alignment.
pub(super) fn check_access(
    node: NodeRank,
    key: u32,
    region_len: u64,
    offset: u64,
    len: usize,
    atomic: bool,
) -> std::result::Result<(), VerbError> {
    let in_range = offset
        .checked_add(len as u64)
        .is_some_and(|end| end <= region_len)
        && usize::try_from(offset).is_ok();
    if !in_range {
        return Err(VerbError::OutOfBounds {
            node,
            key,
            offset,
            len: len as u64,
            region_len,
        });
    }
    if atomic && !offset.is_multiple_of(8) {
        return Err(VerbError::Misaligned { node, key, offset });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::region::Registry;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        /// The origin's checks fail exactly where the target's checks of
        /// the other fabrics fail, with the same error.
        #[test]
        fn origin_checks_match_the_registry(region_len in 1usize..200, offset in prop_oneof![0u64..250, Just(u64::MAX - 1)], len in 0usize..40, atomic in any::<bool>()) {
            let registry = Arc::new(Registry::default());
            let region = registry.register(NodeRank(2), region_len);
            let key = region.remote().key;
            let theirs = if atomic {
                registry.serve_fetch_add(NodeRank(2), key, offset, 0).map(drop)
            } else {
                registry.serve_read(NodeRank(2), key, offset, len).map(drop)
            };
            let len = if atomic { 8 } else { len };
            let ours = check_access(NodeRank(2), key, region_len as u64, offset, len, atomic);
            prop_assert_eq!(ours, theirs);
        }
    }

    #[test]
    fn key_table_entries_decode_only_for_their_key() {
        let words = [7u64 << 32 | 0xabcd, 100, 0x1000, 1];
        assert_eq!(
            Target::decode(7, words),
            Some(Target {
                rkey: 0xabcd,
                addr: 0x1000,
                len: 100
            })
        );
        assert_eq!(Target::decode(7 + (1 << 14), words), None);
        assert_eq!(Target::decode(7, [0; SLOT_WORDS]), None);
    }
}
