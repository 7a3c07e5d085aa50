//! Server timestamps: the version of every write and the time of every read.
//!
//! A timestamp is nanoseconds since the Unix epoch, made strictly
//! increasing per server (a write never shares its version with another
//! write on the same server) and never below what the client has already
//! seen, so that a client reads its own writes on any server (the paper's
//! session semantics, across servers whose clocks differ a little).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use quiver_run::InvalidArgument;

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

/// The time `--as-of`-style text names: nanoseconds since the epoch as
/// they are (as reports print them), or an age back from now such as
/// `-30s`, `-5m`, `-2h`, `-1d` or `-1500ms`.
///
/// # Errors
/// [`InvalidArgument`] (`as_of`) naming the forms it takes.
pub fn as_of_from_text(text: &str) -> Result<u64, InvalidArgument> {
    let bad = || {
        InvalidArgument::new(
            "as_of",
            format!(
                "{text:?}: give nanoseconds since the epoch or an age such as -30s, -5m, -2h, -1d"
            ),
        )
    };
    let Some(age) = text.strip_prefix('-') else {
        return text.parse().map_err(|_| bad());
    };
    let split = age
        .find(|c: char| c.is_ascii_alphabetic())
        .unwrap_or(age.len());
    let (number, unit) = age.split_at(split);
    let scale = match unit {
        "ms" => 1e-3,
        "s" | "" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        _ => return Err(bad()),
    };
    let value: f64 = number.parse().map_err(|_| bad())?;
    if !(value.is_finite() && value >= 0.0) {
        return Err(bad());
    }
    let back = std::time::Duration::from_secs_f64(value * scale);
    let back = u64::try_from(back.as_nanos()).unwrap_or(u64::MAX);
    Ok(wall_ns().saturating_sub(back))
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

    /// An as-of time takes nanoseconds as they are, an age back from now in
    /// each unit, and refuses anything else by naming the forms it takes.
    #[test]
    fn as_of_reads_nanoseconds_and_ages() {
        assert_eq!(
            as_of_from_text("1795842621169812556").unwrap(),
            1_795_842_621_169_812_556
        );
        for (age, back_s) in [
            ("-30s", 30.0),
            ("-5m", 300.0),
            ("-2h", 7200.0),
            ("-1d", 86_400.0),
            ("-1500ms", 1.5),
            ("-0.5h", 1800.0),
        ] {
            let before = wall_ns();
            let at = as_of_from_text(age).unwrap();
            let after = wall_ns();
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            // ages of a day at most
            let back = (back_s * 1e9) as u64;
            assert!(at >= before - back && at <= after - back, "{age}: {at}");
        }
        for bad in ["-5y", "yesterday", "-", "--5m", "-inf", "5m"] {
            let err = as_of_from_text(bad).unwrap_err().to_string();
            assert!(
                err.contains("give nanoseconds since the epoch or an age"),
                "{bad}: {err}"
            );
        }
    }
}
