//! The figures every engine report embeds.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// How a run went, in the terms every engine shares. Engine reports embed it
/// with `#[serde(flatten)]`, so these fields sit at the top of their JSON.
///
/// Times follow the peers' own (Gemini, GAPBS, FlashMob, GraphWalker):
/// `compute_ns` is the algorithm alone and excludes reading the graph
/// (`load_ns`); `wall_ns` covers both and the set-up around them, so
/// `load_ns + compute_ns <= wall_ns`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunSummary {
    /// From the call to the report, in nanoseconds.
    pub wall_ns: u64,
    /// Reading the graph before the algorithm starts, in nanoseconds.
    pub load_ns: u64,
    /// The algorithm alone, in nanoseconds.
    pub compute_ns: u64,
    /// Most memory the engine held at once, in bytes (what it accounts for:
    /// graph data, state, buffers).
    pub peak_mem_bytes: u64,
    /// Worker threads used.
    pub threads: usize,
    /// Read requests completed (storage or device).
    pub read_calls: u64,
    /// Bytes read.
    pub bytes_read: u64,
    /// Write requests completed.
    pub write_calls: u64,
    /// Bytes written.
    pub bytes_written: u64,
}

impl RunSummary {
    /// The summary of this run followed by `next`: times and counts add up,
    /// peak memory and threads are the larger.
    #[must_use]
    pub fn then(self, next: RunSummary) -> RunSummary {
        RunSummary {
            wall_ns: self.wall_ns + next.wall_ns,
            load_ns: self.load_ns + next.load_ns,
            compute_ns: self.compute_ns + next.compute_ns,
            peak_mem_bytes: self.peak_mem_bytes.max(next.peak_mem_bytes),
            threads: self.threads.max(next.threads),
            read_calls: self.read_calls + next.read_calls,
            bytes_read: self.bytes_read + next.bytes_read,
            write_calls: self.write_calls + next.write_calls,
            bytes_written: self.bytes_written + next.bytes_written,
        }
    }

    /// `count` per second of compute time (0 when nothing was timed).
    #[allow(clippy::cast_precision_loss)] // a rate, not an exact count
    pub fn per_compute_second(&self, count: u64) -> f64 {
        if self.compute_ns == 0 {
            0.0
        } else {
            count as f64 * 1e9 / self.compute_ns as f64
        }
    }
}

/// Times the phases of a run for its [`RunSummary`].
#[derive(Clone, Copy, Debug)]
pub struct Stopwatch {
    started: Instant,
}

impl Stopwatch {
    /// Starts timing now.
    pub fn start() -> Stopwatch {
        Stopwatch {
            started: Instant::now(),
        }
    }

    /// Time since the start.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Nanoseconds since the start (saturating at `u64::MAX`, 584 years).
    pub fn elapsed_ns(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_add_up_and_keep_the_peak() {
        let a = RunSummary {
            wall_ns: 10,
            load_ns: 3,
            compute_ns: 6,
            peak_mem_bytes: 100,
            threads: 2,
            read_calls: 1,
            bytes_read: 4096,
            write_calls: 0,
            bytes_written: 0,
        };
        let b = RunSummary {
            wall_ns: 5,
            load_ns: 1,
            compute_ns: 4,
            peak_mem_bytes: 50,
            threads: 4,
            read_calls: 2,
            bytes_read: 8192,
            write_calls: 1,
            bytes_written: 512,
        };
        let c = a.then(b);
        assert_eq!((c.wall_ns, c.load_ns, c.compute_ns), (15, 4, 10));
        assert_eq!((c.peak_mem_bytes, c.threads), (100, 4));
        assert_eq!((c.read_calls, c.bytes_read), (3, 12288));
        assert_eq!((c.write_calls, c.bytes_written), (1, 512));
        assert!((c.per_compute_second(20) - 2e9).abs() < 1.0);
    }

    #[test]
    fn the_summary_serializes_flat_field_names() {
        let json = serde_json::to_value(RunSummary::default()).unwrap();
        for field in [
            "wall_ns",
            "load_ns",
            "compute_ns",
            "peak_mem_bytes",
            "bytes_read",
        ] {
            assert!(json.get(field).is_some(), "{field} missing from {json}");
        }
    }
}
