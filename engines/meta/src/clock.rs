//! Server timestamps: the version of every write and the time of every read.
//!
//! A timestamp is nanoseconds since the Unix epoch, made strictly
//! increasing per server (a write never shares its version with another
//! write on the same server) and never below what the client has already
//! seen, so that a client reads its own writes on any server (the paper's
//! session semantics, across servers whose clocks differ a little).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// How far ahead of this server's clock a client's timestamp may be before
/// it is refused as a time in the future rather than clock skew.
pub const MAX_SKEW_NS: u64 = 1_000_000_000;

/// Nanoseconds since the Unix epoch.
pub fn wall_ns() -> u64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
}

/// A server's clock.
#[derive(Debug, Default)]
pub struct Clock {
    last: AtomicU64,
}

impl Clock {
    /// A new, unique timestamp after both now and `after`.
    pub fn stamp(&self, after: u64) -> u64 {
        let mut last = self.last.load(Ordering::Relaxed);
        loop {
            let next = wall_ns().max(last + 1).max(after + 1);
            match self
                .last
                .compare_exchange_weak(last, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return next,
                Err(seen) => last = seen,
            }
        }
    }

    /// The time a read happens at: now, or the client's last-seen timestamp
    /// if that is later (it came from a server whose clock is ahead).
    pub fn read_time(&self, session: u64) -> u64 {
        wall_ns()
            .max(self.last.load(Ordering::Relaxed))
            .max(session)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_increase_and_follow_the_session() {
        let c = Clock::default();
        let a = c.stamp(0);
        let b = c.stamp(0);
        assert!(b > a);
        let future = wall_ns() + 500_000_000;
        assert!(c.stamp(future) > future);
        assert!(c.read_time(0) > future);
    }
}
