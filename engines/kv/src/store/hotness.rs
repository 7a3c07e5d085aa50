//! The store's side of the monitor: its harvest of the pairs read often
//! (through the location cache, and the home's table of its own reads),
//! and which of a home's reads of the values it holds count, as the
//! [`Plan`] says.

use std::sync::atomic::Ordering;

use super::Store;
use crate::policy::Plan;

impl Store {
    /// The monitor's harvest: remote pairs this node accessed at least
    /// `at_least` times since the interval began (which `ends_interval`
    /// ends), through the location cache, and keys homed here, likewise
    /// (those whose values live elsewhere, and those it holds as the
    /// [`StoreConfig::plan`](super::StoreConfig::plan) says).
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
    pub(super) fn counts_home_read(&self, key: u32) -> bool {
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
}
