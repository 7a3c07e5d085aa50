//! The location cache: remote keys' address words, with leases, whose
//! replacement counters are also the hotness monitor (Pragh §3, §4.4).
//!
//! Set-associative with 8 ways; each item holds the key, the address word,
//! the byte offset of the key's address word at its home (so a migration
//! or Put can CAS it without looking the key up), when the word's lease
//! ends, and two
//! counters: `hits`, which replacement keeps (least frequently used goes,
//! halved every monitoring interval so old fame fades), and `window`, the
//! accesses since the monitor last asked. An item whose word was dropped
//! (the block it named was invalid) keeps its counters: the pair is still
//! hot, only its location is unknown.
//!
//! A cache that does not *serve* (the `split` policy without a location
//! cache) still counts: it is then the monitor alone.

use std::sync::Mutex;

/// Ways per set.
const WAYS: usize = 8;
/// Bytes an item takes, for sizing the cache from a byte budget.
pub const ITEM_BYTES: usize = 40;

#[derive(Clone, Copy, Debug, Default)]
struct Item {
    /// Key + 1 (0: an empty way).
    key: u64,
    word: u64,
    slot: u64,
    until: u64,
    hits: u32,
    window: u32,
}

/// A key's location: the address word, the key's slot at its home, and
/// when its lease ends: one cache lease after the word was known to be
/// the home's.
///
/// A block is reclaimed no sooner than a reclaim lease after the word
/// naming it was replaced, and the reclaim lease in force is never shorter
/// than a cache lease granted within the last cache lease (a run changes
/// them in that order), so a read through this word that ends before `until`
/// read the block it named, not memory given to another value since
/// ([`Store`](crate::Store) checks it after every read it trusts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Location {
    /// The address word.
    pub word: u64,
    /// Byte offset of the key's address word in its home's region.
    pub slot: u64,
    /// When the lease ends, on the store's clock.
    pub until: u64,
}

/// The cache of one node, shared by its threads.
#[derive(Debug)]
pub struct LocationCache {
    sets: Vec<Mutex<[Item; WAYS]>>,
    serve: bool,
}

impl LocationCache {
    /// A cache of about `bytes` bytes; `serve: false` counts accesses but
    /// never answers a lookup.
    pub fn new(bytes: usize, serve: bool) -> LocationCache {
        let sets = (bytes / (ITEM_BYTES * WAYS)).max(1);
        LocationCache {
            sets: (0..sets)
                .map(|_| Mutex::new([Item::default(); WAYS]))
                .collect(),
            serve,
        }
    }

    fn set(&self, key: u32) -> std::sync::MutexGuard<'_, [Item; WAYS]> {
        let hash = u64::from(key).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 20;
        let index = usize::try_from(hash % self.sets.len() as u64).expect("below the set count");
        self.sets[index]
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Counts an access to `key` and returns its location if the cache
    /// serves, holds one and its lease has not run out at `now`.
    pub fn access(&self, key: u32, now: u64) -> Option<Location> {
        let tag = u64::from(key) + 1;
        let mut set = self.set(key);
        let item = set.iter_mut().find(|item| item.key == tag)?;
        item.count();
        let fresh = item.word != 0 && now < item.until;
        (self.serve && fresh).then_some(Location {
            word: item.word,
            slot: item.slot,
            until: item.until,
        })
    }

    /// Stores `key`'s location, whose lease ends at `location.until`. A
    /// new item replaces the least frequently used of its set and starts
    /// with one access.
    pub fn fill(&self, key: u32, location: Location) {
        let tag = u64::from(key) + 1;
        let mut set = self.set(key);
        if let Some(item) = set.iter_mut().find(|item| item.key == tag) {
            item.word = location.word;
            item.slot = location.slot;
            item.until = location.until;
            return;
        }
        *least_used(&mut set) = Item {
            key: tag,
            word: location.word,
            slot: location.slot,
            until: location.until,
            hits: 1,
            window: 1,
        };
    }

    /// Counts an access to `key`, taking an item for it if it has none
    /// (for a table that only counts).
    pub fn touch(&self, key: u32) {
        let tag = u64::from(key) + 1;
        let mut set = self.set(key);
        if let Some(item) = set.iter_mut().find(|item| item.key == tag) {
            item.count();
            return;
        }
        *least_used(&mut set) = Item {
            key: tag,
            hits: 1,
            window: 1,
            ..Item::default()
        };
    }

    /// Drops `key`'s address word (its block was invalid), keeping its counts.
    pub fn forget(&self, key: u32) {
        let tag = u64::from(key) + 1;
        if let Some(item) = self.set(key).iter_mut().find(|item| item.key == tag) {
            item.word = 0;
        }
    }

    /// Drops the address word of every key for which `stale(key, word)`
    /// holds (after a node died: the words naming it, or naming keys
    /// homed on it), keeping their counts; returns how many it dropped.
    pub fn forget_if(&self, stale: impl Fn(u32, u64) -> bool) -> u64 {
        let mut dropped = 0;
        for set in &self.sets {
            let mut set = set
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for item in set
                .iter_mut()
                .filter(|item| item.key != 0 && item.word != 0)
            {
                let key = u32::try_from(item.key - 1).expect("a tag is a key + 1");
                if stale(key, item.word) {
                    item.word = 0;
                    dropped += 1;
                }
            }
        }
        dropped
    }

    /// The monitor's harvest: every key accessed at least `at_least` times
    /// since the interval began, with that count. At an interval's end
    /// (`ends_interval`) resets the counts and halves the replacement
    /// counters.
    pub fn harvest(&self, at_least: u32, ends_interval: bool) -> Vec<(u32, u32)> {
        let mut hot = Vec::new();
        for set in &self.sets {
            let mut set = set
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            for item in set.iter_mut().filter(|item| item.key != 0) {
                if item.window >= at_least {
                    hot.push((
                        u32::try_from(item.key - 1).expect("keys are u32"),
                        item.window,
                    ));
                }
                if ends_interval {
                    item.window = 0;
                    item.hits /= 2;
                }
            }
        }
        hot
    }
}

impl Item {
    fn count(&mut self) {
        self.hits = self.hits.saturating_add(1);
        self.window = self.window.saturating_add(1);
    }
}

/// The way to replace: an empty one, else the least frequently used.
fn least_used(set: &mut [Item; WAYS]) -> &mut Item {
    set.iter_mut()
        .min_by_key(|item| {
            if item.key == 0 {
                0
            } else {
                u64::from(item.hits) + 1
            }
        })
        .expect("a set has ways")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A location whose lease ends at `until`.
    const fn at(until: u64) -> Location {
        Location {
            word: 7,
            slot: 16,
            until,
        }
    }

    const AT: Location = at(u64::MAX);

    #[test]
    fn a_location_serves_until_its_lease_ends() {
        let cache = LocationCache::new(1 << 16, true);
        assert_eq!(cache.access(5, 0), None);
        cache.fill(5, at(110));
        assert_eq!(cache.access(5, 109), Some(at(110)));
        assert_eq!(cache.access(5, 110), None);
        cache.fill(5, at(210));
        cache.forget(5);
        assert_eq!(cache.access(5, 111), None);
        // Every access to an item counted, served or not: the fill and three
        // accesses (the first access found no item).
        assert_eq!(cache.harvest(1, false), vec![(5, 4)]);
        assert_eq!(cache.harvest(5, false), vec![], "below the floor");
        cache.access(5, 0);
        assert_eq!(
            cache.harvest(5, false),
            vec![(5, 5)],
            "a tick's harvest counts from the interval's start"
        );
        assert_eq!(cache.harvest(5, true), vec![(5, 5)]);
        assert_eq!(
            cache.harvest(1, true),
            vec![],
            "the interval's end starts over"
        );
    }

    #[test]
    fn a_monitor_counts_but_never_serves() {
        let cache = LocationCache::new(1 << 16, false);
        cache.fill(3, AT);
        for _ in 0..9 {
            assert_eq!(cache.access(3, 1), None);
        }
        assert_eq!(cache.harvest(10, true), vec![(3, 10)]);
    }

    #[test]
    fn replacement_keeps_the_frequent() {
        // One set of 8 ways.
        let cache = LocationCache::new(ITEM_BYTES * WAYS, true);
        for key in 0..8 {
            cache.fill(key, AT);
            for _ in 0..=key {
                cache.access(key, 0);
            }
        }
        cache.fill(100, AT);
        assert_eq!(cache.access(0, 0), None, "the least used key went");
        for key in 1..8 {
            assert_eq!(cache.access(key, 0), Some(AT));
        }
        assert_eq!(cache.access(100, 0), Some(AT));
    }
}
