//! Time for leases: the system's, or one that tests move by hand.
//!
//! Leases compare times taken on different nodes, so the system clock is
//! the wall clock (nanoseconds since the Unix epoch), which the machines of
//! a cluster keep in step (Pragh uses PTP); nodes on one machine share it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// A source of time in nanoseconds, shared by a node's threads.
#[derive(Clone, Debug)]
pub enum Clock {
    /// The wall clock.
    System,
    /// A clock that moves only when told ([`Clock::advance`]); every clone
    /// sees the same time.
    Manual(Arc<AtomicU64>),
}

impl Clock {
    /// A manual clock at time 0.
    pub fn manual() -> Clock {
        Clock::Manual(Arc::new(AtomicU64::new(0)))
    }

    /// The time now, in nanoseconds.
    pub fn now_ns(&self) -> u64 {
        match self {
            Clock::System => SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |since| {
                    u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
                }),
            Clock::Manual(now) => now.load(Ordering::Acquire),
        }
    }

    /// Moves a manual clock forward by `ns`.
    ///
    /// # Panics
    /// On the system clock, which no one moves.
    pub fn advance(&self, ns: u64) {
        match self {
            Clock::System => panic!("the system clock cannot be advanced"),
            Clock::Manual(now) => {
                now.fetch_add(ns, Ordering::AcqRel);
            }
        }
    }
}

/// A duration in whole nanoseconds (`u64::MAX` past 584 years).
pub(crate) fn nanos(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}
