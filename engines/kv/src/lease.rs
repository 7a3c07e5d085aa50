//! The leases in force, and how a run derives them from what it sees.
//!
//! Two leases keep reads through remembered addresses safe (Pragh §4.2):
//! a cached address is trusted for the *cache lease* after it was read at
//! its home, and a replaced block is reused no sooner than the *reclaim
//! lease* after it was replaced. Long leases save the READs that refresh
//! hot keys' cached addresses (each refresh makes a Get remote); but every
//! replaced block waits out the reclaim lease, so a node whose Puts copy
//! lists fast fills its value region. Neither length suits every graph and
//! mix, so a run derives them every tick ([`LeasePlan`]): the reclaim lease
//! is as long as the fullest node's headroom can hold half of what it
//! retires at the rate it retires it, within the configured ceiling and a
//! floor, and the cache lease is half of it.
//!
//! Changing leases while addresses are cached is safe only in order: the
//! reclaim lease in force must never be shorter than a cache lease granted
//! within the last cache lease. So a longer cache lease starts a tick
//! after the reclaim lease that covers it (every node has applied that
//! one by the next tick's gather), and a shorter cache lease keeps the
//! reclaim lease at least the old one's length until every address
//! granted under it has expired.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

/// The leases a node's store uses now, in nanoseconds.
#[derive(Debug)]
pub(crate) struct Leases {
    cache_ns: AtomicU64,
    reclaim_ns: AtomicU64,
}

impl Leases {
    pub(crate) fn new(cache_ns: u64, reclaim_ns: u64) -> Leases {
        Leases {
            cache_ns: AtomicU64::new(cache_ns),
            reclaim_ns: AtomicU64::new(reclaim_ns),
        }
    }

    /// How long an address read at its home now may be trusted.
    pub(crate) fn cache_ns(&self) -> u64 {
        self.cache_ns.load(Ordering::Acquire)
    }

    /// How long a block replaced now must wait before it is reused.
    pub(crate) fn reclaim_ns(&self) -> u64 {
        self.reclaim_ns.load(Ordering::Acquire)
    }

    /// Puts `leases` (cache, reclaim) from a [`LeasePlan`] in force (the
    /// plan orders the changes; see the module's documentation).
    pub(crate) fn set(&self, (cache_ns, reclaim_ns): (u64, u64)) {
        debug_assert!(
            cache_ns <= reclaim_ns,
            "a cache lease outlives the reclaim lease"
        );
        self.reclaim_ns.store(reclaim_ns, Ordering::Release);
        self.cache_ns.store(cache_ns, Ordering::Release);
    }
}

/// What one node tells the plan at a tick about its value region.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Room {
    /// Words free in its value region.
    pub(crate) free_words: u64,
    /// Words of replaced blocks waiting out their lease there.
    pub(crate) waiting_words: u64,
    /// Words of blocks replaced there since the run began.
    pub(crate) retired_words: u64,
}

/// Derives the leases every tick from every node's [`Room`]; every node
/// runs it on the same gathered reports, so all derive the same leases.
#[derive(Clone, Debug)]
pub(crate) struct LeasePlan {
    /// The longest leases (cache, reclaim): the configured ones.
    ceiling: (u64, u64),
    /// The shortest: a tick and two ticks, at least a millisecond and two.
    floor: (u64, u64),
    tick_ns: u64,
    /// Ticks the retirement rate is measured over.
    window: usize,
    /// Every node's words retired at each of the last `window` + 1 ticks.
    retired: VecDeque<Vec<u64>>,
    /// The cache lease in force.
    cache: u64,
    /// A longer cache lease and the tick it starts at.
    pending: Option<(u64, u64)>,
    /// Cache leases no longer granted, and the tick after which no address
    /// granted under one is trusted any more.
    granted: VecDeque<(u64, u64)>,
}

impl LeasePlan {
    /// A plan whose leases never exceed the configured `cache_ns` and
    /// `reclaim_ns` (the cache lease stays at the floor when the cache
    /// does not `serve`: then an address is trusted only within an
    /// operation), for ticks of `tick_ns` with the retirement rate measured
    /// over `window` ticks. It starts at the floors ([`LeasePlan::start`]):
    /// nothing is known yet of the rate blocks are replaced, and leases
    /// lengthen within a tick or two, while shortening a cache lease takes
    /// as long as the lease.
    pub(crate) fn new(
        cache_ns: u64,
        reclaim_ns: u64,
        serve: bool,
        tick_ns: u64,
        window: usize,
    ) -> LeasePlan {
        let floor_cache = tick_ns.max(1_000_000).min(cache_ns);
        let floor_reclaim = (2 * floor_cache).min(reclaim_ns);
        LeasePlan {
            ceiling: (if serve { cache_ns } else { floor_cache }, reclaim_ns),
            floor: (floor_cache, floor_reclaim),
            tick_ns: tick_ns.max(1),
            window: window.max(1),
            retired: VecDeque::new(),
            cache: floor_cache,
            pending: None,
            granted: VecDeque::new(),
        }
    }

    /// The leases (cache, reclaim) to start a run with: the floors.
    pub(crate) fn start(&self) -> (u64, u64) {
        self.floor
    }

    /// The leases (cache, reclaim) to put in force at tick `tick` (counted
    /// from 1, one call a tick), from every node's room.
    pub(crate) fn tick(&mut self, tick: u64, rooms: &[Room]) -> (u64, u64) {
        if self.retired.is_empty() {
            // The run began with nothing retired.
            self.retired.push_back(vec![0; rooms.len()]);
        }
        self.retired
            .push_back(rooms.iter().map(|r| r.retired_words).collect());
        if self.retired.len() > self.window + 1 {
            self.retired.pop_front();
        }
        let reclaim = self.target_reclaim(rooms);
        let cache = (reclaim / 2).clamp(self.floor.0, self.ceiling.0);
        // A longer lease the reclaim lease has covered since the last tick
        // starts now, unless this tick wants less.
        if let Some((starts, longer)) = self.pending {
            if tick >= starts {
                self.pending = None;
                if cache >= longer {
                    self.switch_cache(tick, longer);
                }
            }
        }
        if cache > self.cache {
            self.pending = Some((tick + 1, cache));
        } else if cache < self.cache {
            self.pending = None;
            self.switch_cache(tick, cache);
        }
        self.granted.retain(|&(until, _)| until >= tick);
        let covered = self
            .granted
            .iter()
            .map(|&(_, c)| c)
            .chain(self.pending.map(|(_, c)| c))
            .fold(self.cache, u64::max);
        (self.cache, reclaim.max(covered))
    }

    /// Puts cache lease `cache` in force at `tick`, remembering the one it
    /// replaces until every address granted under it has expired.
    fn switch_cache(&mut self, tick: u64, cache: u64) {
        let ticks = self.cache.div_ceil(self.tick_ns);
        self.granted.push_back((tick + ticks + 1, self.cache));
        self.cache = cache;
    }

    /// The reclaim lease the fullest node's room allows: half its free and
    /// waiting words over its retirement rate (the higher of the last
    /// tick's and the window's, so a rising rate is met at once), within
    /// floor and ceiling.
    fn target_reclaim(&self, rooms: &[Room]) -> u64 {
        let ticks = self.retired.len() - 1;
        let mut reclaim = self.ceiling.1;
        for (i, room) in rooms.iter().enumerate() {
            let retired_since = |back: usize| {
                let at = |j: usize| self.retired[j].get(i).copied().unwrap_or(0);
                at(ticks).saturating_sub(at(ticks - back))
            };
            let room_words = u128::from(room.free_words + room.waiting_words);
            for span in [1, ticks] {
                let retired = retired_since(span);
                if retired > 0 {
                    let span_ns = u128::from(self.tick_ns) * span as u128;
                    let lasts = room_words * span_ns / (2 * u128::from(retired));
                    reclaim = reclaim.min(u64::try_from(lasts).unwrap_or(u64::MAX));
                }
            }
        }
        reclaim.clamp(self.floor.1, self.ceiling.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const S: u64 = 1_000_000_000;

    fn room(free_words: u64, waiting_words: u64, retired_words: u64) -> Room {
        Room {
            free_words,
            waiting_words,
            retired_words,
        }
    }

    #[test]
    fn leases_start_at_the_floor_follow_the_room_and_reach_the_ceiling_when_it_lasts() {
        let mut plan = LeasePlan::new(30 * S, 60 * S, true, S, 10);
        assert_eq!(plan.start(), (S, 2 * S));
        let rooms = |retired: u64| [room(1 << 20, 0, retired), room(1 << 30, 0, 0)];
        // Nothing replaced yet: the reclaim lease at its ceiling at once,
        // the cache lease a tick later.
        assert_eq!(plan.tick(1, &rooms(0)), (S, 60 * S));
        // 100,000 words a second into 2^20 free words (the fuller node
        // decides): half the room lasts 5.24 s, so the 30 s cache lease
        // due now never starts, and the cache lease is half of 5.24 s from
        // the next tick.
        let short = (5_242_880_000 / 2, 5_242_880_000);
        assert_eq!(plan.tick(2, &rooms(100_000)), (S, short.1));
        for t in 3..=20 {
            assert_eq!(plan.tick(t, &rooms(100_000 * (t - 1))), short, "tick {t}");
        }
        // Twice the rate: the cache lease halves at once; the reclaim
        // lease keeps the old cache lease's length until every address
        // granted under it has expired (3 ticks and one for skew).
        let faster = |t: u64| rooms(100_000 * 19 + 200_000 * (t - 20));
        let mut leases = Vec::new();
        for t in 21..=40 {
            leases.push(plan.tick(t, &faster(t)));
        }
        assert!(leases.iter().all(|&(cache, reclaim)| cache <= reclaim));
        assert_eq!(leases.last(), Some(&(short.0 / 2, short.1 / 2)));
        // Pressure gone: as the window empties the leases lengthen, the
        // reclaim lease always a tick ahead of the cache lease.
        let mut leases = Vec::new();
        for t in 41..=60 {
            leases.push(plan.tick(t, &faster(40)));
        }
        assert!(leases.iter().all(|&(cache, reclaim)| cache <= reclaim));
        assert!(leases.windows(2).all(|w| w[1].0 <= w[0].1), "{leases:?}");
        assert_eq!(leases.last(), Some(&(30 * S, 60 * S)));
    }

    #[test]
    fn a_cache_that_does_not_serve_keeps_its_lease_at_the_floor() {
        let mut plan = LeasePlan::new(30 * S, 60 * S, false, S, 10);
        assert_eq!(plan.tick(1, &[room(1 << 30, 0, 0)]), (S, 60 * S));
        assert_eq!(
            plan.tick(2, &[room(1 << 20, 0, 100_000)]),
            (S, 5_242_880_000)
        );
    }

    proptest! {
        /// Whatever the rooms, at every tick the reclaim lease in force is
        /// at least every cache lease any node may have granted within
        /// that lease's length (the applied leases of the tick before
        /// count too: a node may still grant them until it applies these).
        #[test]
        fn no_cache_lease_outlives_the_reclaim_lease(
            rooms in proptest::collection::vec((0u64..1 << 24, 0u64..1 << 22, 0u64..1 << 22), 1..80),
        ) {
            let tick_ns = S;
            let mut plan = LeasePlan::new(30 * S, 60 * S, true, tick_ns, 10);
            let mut retired = 0;
            let mut history: Vec<(u64, u64, u64)> = Vec::new();
            for (t, &(free, waiting, more)) in rooms.iter().enumerate() {
                let tick = t as u64 + 1;
                retired += more;
                let (cache, reclaim) = plan.tick(tick, &[room(free, waiting, retired)]);
                prop_assert!(cache <= reclaim);
                prop_assert!((plan.floor.0..=30 * S).contains(&cache));
                prop_assert!(reclaim <= 60 * S);
                // Granted at tick g (until it applies tick g + 1's) with
                // lease c: trusted until tick g + 1 + c.
                for &(g, c, _) in &history {
                    if (tick as f64) < (g + 1) as f64 + c as f64 / tick_ns as f64 {
                        prop_assert!(reclaim >= c, "tick {}: reclaim {} under cache {} of tick {}", tick, reclaim, c, g);
                    }
                }
                history.push((tick, cache, reclaim));
            }
        }
    }
}
