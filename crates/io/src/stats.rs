//! I/O counters shared by readers, writers and reports.

use std::sync::atomic::{AtomicU64, Ordering};

/// Live I/O counters, updated atomically; share them with `Arc`.
///
/// A read *call* is one completed [`ReadRequest`](crate::ReadRequest) and a
/// write call one completed [`WriteFile::write_all_at`](crate::WriteFile::write_all_at),
/// however many system calls or io_uring submissions (retries, short reads)
/// they took. Bytes are the bytes the caller asked for.
#[derive(Debug, Default)]
pub struct IoStats {
    read_calls: AtomicU64,
    read_bytes: AtomicU64,
    write_calls: AtomicU64,
    write_bytes: AtomicU64,
}

impl IoStats {
    /// Records one completed read of `bytes` bytes.
    pub fn record_read(&self, bytes: u64) {
        // Relaxed: counters are independent tallies, read only for reports.
        self.read_calls.fetch_add(1, Ordering::Relaxed);
        self.read_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Records one completed write of `bytes` bytes.
    pub fn record_write(&self, bytes: u64) {
        self.write_calls.fetch_add(1, Ordering::Relaxed);
        self.write_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    /// Copies the counters. Each field is read atomically, but the four are
    /// not one atomic snapshot while other threads are doing I/O.
    #[must_use]
    pub fn snapshot(&self) -> IoCounters {
        IoCounters {
            read_calls: self.read_calls.load(Ordering::Relaxed),
            read_bytes: self.read_bytes.load(Ordering::Relaxed),
            write_calls: self.write_calls.load(Ordering::Relaxed),
            write_bytes: self.write_bytes.load(Ordering::Relaxed),
        }
    }
}

/// A plain copy of [`IoStats`], for reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct IoCounters {
    /// Completed read requests.
    pub read_calls: u64,
    /// Bytes read.
    pub read_bytes: u64,
    /// Completed writes.
    pub write_calls: u64,
    /// Bytes written.
    pub write_bytes: u64,
}

impl IoCounters {
    /// The I/O done between `earlier` and `self` (fieldwise difference,
    /// saturating at zero if `earlier` is in fact later).
    #[must_use]
    pub fn since(&self, earlier: &IoCounters) -> IoCounters {
        IoCounters {
            read_calls: self.read_calls.saturating_sub(earlier.read_calls),
            read_bytes: self.read_bytes.saturating_sub(earlier.read_bytes),
            write_calls: self.write_calls.saturating_sub(earlier.write_calls),
            write_bytes: self.write_bytes.saturating_sub(earlier.write_bytes),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_snapshot_since() {
        let s = IoStats::default();
        s.record_read(10);
        let a = s.snapshot();
        s.record_read(5);
        s.record_write(7);
        let b = s.snapshot();
        assert_eq!(
            b.since(&a),
            IoCounters {
                read_calls: 1,
                read_bytes: 5,
                write_calls: 1,
                write_bytes: 7
            }
        );
        assert_eq!(a.since(&b), IoCounters::default());
    }
}
