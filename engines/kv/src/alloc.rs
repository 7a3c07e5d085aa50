//! The value region's allocator: blocks of whole 8-byte words, best fit
//! among the free extents, which merge with their neighbours when freed.
//!
//! Values grow an id at a time (a Put replaces a list with one an id
//! longer), so a freed block is rarely wanted again at its size; without
//! merging, the copies a hot, growing list leaves behind would splinter
//! the region into pieces too small for its next version.

use std::collections::{BTreeMap, BTreeSet};

/// Words of one value region, handed out as blocks.
#[derive(Debug)]
pub struct Alloc {
    capacity: u64,
    /// Free extents by offset: their length.
    by_offset: BTreeMap<u64, u64>,
    /// Free extents by (length, offset), for best fit.
    by_length: BTreeSet<(u64, u64)>,
    free_words: u64,
}

impl Alloc {
    /// An empty region of `capacity` words.
    pub fn new(capacity: u64) -> Alloc {
        let mut alloc = Alloc {
            capacity,
            by_offset: BTreeMap::new(),
            by_length: BTreeSet::new(),
            free_words: 0,
        };
        alloc.insert(0, capacity);
        alloc
    }

    fn insert(&mut self, offset: u64, words: u64) {
        if words > 0 {
            self.by_offset.insert(offset, words);
            self.by_length.insert((words, offset));
            self.free_words += words;
        }
    }

    fn remove(&mut self, offset: u64, words: u64) {
        self.by_offset.remove(&offset);
        self.by_length.remove(&(words, offset));
        self.free_words -= words;
    }

    /// A block of `words` words: its offset, or `None` when no free extent
    /// is that long.
    pub fn alloc(&mut self, words: u64) -> Option<u64> {
        let &(length, offset) = self.by_length.range((words, 0)..).next()?;
        self.remove(offset, length);
        self.insert(offset + words, length - words);
        Some(offset)
    }

    /// Returns the block of `words` words at `offset`.
    pub fn free(&mut self, offset: u64, words: u64) {
        debug_assert!(offset + words <= self.capacity, "freeing past the region");
        let (mut start, mut length) = (offset, words);
        if let Some((&before, &before_len)) = self.by_offset.range(..offset).next_back() {
            debug_assert!(before + before_len <= offset, "freeing a free block");
            if before + before_len == offset {
                self.remove(before, before_len);
                start = before;
                length += before_len;
            }
        }
        if let Some(&after_len) = self.by_offset.get(&(offset + words)) {
            self.remove(offset + words, after_len);
            length += after_len;
        }
        self.insert(start, length);
    }

    /// The runs of words handed out and not yet returned, in order: the
    /// gaps between the free extents, as (offset, words).
    pub fn used_runs(&self) -> Vec<(u64, u64)> {
        let mut runs = Vec::new();
        let mut at = 0;
        for (&offset, &words) in &self.by_offset {
            if offset > at {
                runs.push((at, offset - at));
            }
            at = offset + words;
        }
        if self.capacity > at {
            runs.push((at, self.capacity - at));
        }
        runs
    }

    /// Words in blocks handed out and not yet returned.
    pub fn used(&self) -> u64 {
        self.capacity - self.free_words
    }

    /// Words of the region.
    pub fn capacity(&self) -> u64 {
        self.capacity
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Random allocations and frees: blocks never overlap, the count of
        /// used words is exact, and once all is freed one extent remains.
        #[test]
        fn blocks_are_disjoint_and_merge_back(ops in proptest::collection::vec((1u64..20, any::<bool>()), 1..200)) {
            let mut alloc = Alloc::new(500);
            let mut live: Vec<(u64, u64)> = Vec::new();
            for (words, free) in ops {
                if free && !live.is_empty() {
                    let (offset, words) = live.swap_remove(usize::try_from(words).unwrap() % live.len());
                    alloc.free(offset, words);
                } else if let Some(offset) = alloc.alloc(words) {
                    for &(o, w) in &live {
                        prop_assert!(offset + words <= o || o + w <= offset, "overlap");
                    }
                    prop_assert!(offset + words <= 500);
                    live.push((offset, words));
                }
                prop_assert_eq!(alloc.used(), live.iter().map(|l| l.1).sum::<u64>());
            }
            // The used runs cover exactly the live blocks.
            let mut covered: Vec<u64> = alloc.used_runs().iter().flat_map(|&(o, w)| o..o + w).collect();
            let mut blocks: Vec<u64> = live.iter().flat_map(|&(o, w)| o..o + w).collect();
            covered.sort_unstable();
            blocks.sort_unstable();
            prop_assert_eq!(covered, blocks);
            for (offset, words) in live {
                alloc.free(offset, words);
            }
            prop_assert_eq!(alloc.alloc(500), Some(0));
        }
    }

    #[test]
    fn a_growing_list_reuses_the_room_its_old_copies_left() {
        let mut alloc = Alloc::new(100);
        let mut block = (alloc.alloc(10).unwrap(), 10);
        // 10 + 11 + ... + 36 words in all, six times the region.
        for words in 11..=36 {
            let next = alloc.alloc(words).expect("the freed copies merge");
            alloc.free(block.0, block.1);
            block = (next, words);
        }
        assert_eq!(alloc.used(), 36);
        assert_eq!(alloc.alloc(65), None);
    }
}
