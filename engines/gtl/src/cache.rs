//! The host's LRU page cache, bounded in bytes, one policy for both
//! backends (GraphSSD §3.6 and §4.3: whole 16 KiB NAND pages, LRU).
//!
//! An entry stands for one device page and is charged a whole page's
//! bytes, whatever form the host keeps it in (the GTL keeps the decoded
//! page, the baseline the raw bytes). An entry also remembers when its page
//! reached the host, so that a request for a page still in flight (asked
//! for earlier in the same batch) completes when the page arrives, not
//! before.

use std::collections::{BTreeMap, HashMap};

use crate::flash::Nanos;

/// An LRU cache of device pages keyed by page number.
///
/// Invariants: `entries.len() * page_bytes <= capacity_bytes`; `order`
/// holds exactly one stamp per entry, the entry's last use.
#[derive(Debug)]
pub struct PageCache<T> {
    page_bytes: u64,
    capacity: usize,
    entries: HashMap<u64, Slot<T>>,
    order: BTreeMap<u64, u64>,
    clock: u64,
}

#[derive(Debug)]
struct Slot<T> {
    value: T,
    ready: Nanos,
    stamp: u64,
}

impl<T: Clone> PageCache<T> {
    /// A cache of at most `capacity_bytes`, in entries of `page_bytes`
    /// (a bound below one page caches nothing).
    pub fn new(capacity_bytes: u64, page_bytes: u64) -> PageCache<T> {
        assert!(page_bytes > 0, "pages have bytes");
        // The entries live in memory, so their count fits usize.
        let capacity = usize::try_from(capacity_bytes / page_bytes).unwrap_or(usize::MAX);
        PageCache {
            page_bytes,
            capacity,
            entries: HashMap::new(),
            order: BTreeMap::new(),
            clock: 0,
        }
    }

    /// The page `key` and when it reached the host, marked as just used.
    pub fn get(&mut self, key: u64) -> Option<(T, Nanos)> {
        let slot = self.entries.get_mut(&key)?;
        self.order.remove(&slot.stamp);
        self.clock += 1;
        slot.stamp = self.clock;
        self.order.insert(self.clock, key);
        Some((slot.value.clone(), slot.ready))
    }

    /// Keeps page `key`, arrived at `ready`, evicting the least recently
    /// used page if the cache is full.
    pub fn insert(&mut self, key: u64, value: T, ready: Nanos) {
        if self.capacity == 0 {
            return;
        }
        if let Some(old) = self.entries.remove(&key) {
            self.order.remove(&old.stamp);
        }
        if self.entries.len() == self.capacity {
            let (_, victim) = self.order.pop_first().expect("a full cache has entries");
            self.entries.remove(&victim);
        }
        self.clock += 1;
        self.order.insert(self.clock, key);
        self.entries.insert(
            key,
            Slot {
                value,
                ready,
                stamp: self.clock,
            },
        );
    }

    /// Drops page `key`, if held (its device page was erased).
    pub fn remove(&mut self, key: u64) {
        if let Some(old) = self.entries.remove(&key) {
            self.order.remove(&old.stamp);
        }
    }

    /// Pages held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no page is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes held (a page's bytes per entry).
    pub fn bytes(&self) -> u64 {
        self.entries.len() as u64 * self.page_bytes
    }

    /// The bound, rounded down to whole pages.
    pub fn capacity_bytes(&self) -> u64 {
        self.capacity as u64 * self.page_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evicts_the_least_recently_used_page_within_its_byte_bound() {
        let mut cache = PageCache::new(3 * 16 + 5, 16);
        assert_eq!(cache.capacity_bytes(), 48);
        for k in 0..3 {
            cache.insert(k, k, 10 * k);
        }
        assert_eq!(cache.get(0), Some((0, 0)));
        cache.insert(3, 3, 30);
        assert!(cache.bytes() <= 48);
        assert_eq!(cache.get(1), None, "1 was the least recently used");
        assert_eq!(cache.get(2), Some((2, 20)));
        assert_eq!(cache.len(), 3);
        let mut none = PageCache::new(15, 16);
        none.insert(1, 1, 0);
        assert!(none.is_empty());
    }
}
