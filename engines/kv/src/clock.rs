//! Time for leases: the system's, or one that tests move by hand (and may
//! have pause between a thread's reading of the time and what it does
//! next).
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
    /// A manual clock whose every reading runs a [`Pause`] after the time
    /// is taken and before the reader goes on with it, as if the reader
    /// were descheduled right there: tests run other nodes' work in it.
    Paused(Arc<AtomicU64>, Pause),
}

/// What a [`Clock::Paused`] runs at each reading, in the reading thread.
#[derive(Clone)]
pub struct Pause(Arc<dyn Fn(&Clock) + Send + Sync>);

impl std::fmt::Debug for Pause {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Pause")
    }
}

impl Clock {
    /// A manual clock at time 0.
    pub fn manual() -> Clock {
        Clock::Manual(Arc::new(AtomicU64::new(0)))
    }

    /// A manual clock at time 0 that runs `pause` with itself at every
    /// reading, after taking the time (see [`Clock::Paused`]). `pause` may
    /// read and advance the clock; the readings it causes run it again, so
    /// it must know when to do nothing.
    pub fn paused(pause: impl Fn(&Clock) + Send + Sync + 'static) -> Clock {
        Clock::Paused(Arc::new(AtomicU64::new(0)), Pause(Arc::new(pause)))
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
            Clock::Paused(now, Pause(pause)) => {
                let taken = now.load(Ordering::Acquire);
                pause(self);
                taken
            }
        }
    }

    /// Moves a manual clock forward by `ns`.
    ///
    /// # Panics
    /// On the system clock, which no one moves.
    pub fn advance(&self, ns: u64) {
        match self {
            Clock::System => panic!("the system clock cannot be advanced"),
            Clock::Manual(now) | Clock::Paused(now, _) => {
                now.fetch_add(ns, Ordering::AcqRel);
            }
        }
    }
}

/// A duration in whole nanoseconds (`u64::MAX` past 584 years).
pub(crate) fn nanos(duration: std::time::Duration) -> u64 {
    u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX)
}
