//! The loopback fabric's optional cost model: each operation gets a modelled
//! completion time on its node's virtual clock, so engines can report
//! modelled network time next to wall time, deterministically.

use std::time::Duration;

use crate::wr::Verb;

/// Per-operation latency and a bandwidth/message-rate limit per queue.
///
/// An operation of `b` bytes posted at virtual time `t` on a queue whose NIC
/// is free from `f` is issued at `s = max(t, f)`, occupies the NIC for
/// `max(gap, b / bandwidth)` and completes at `s + b / bandwidth + latency`.
/// So a queue depth of one pays the full latency per operation, while a
/// posted batch overlaps latencies and is limited by bandwidth and message
/// rate, as on a real NIC. The node's clock advances to an operation's
/// completion time when its completion is polled.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct CostModel {
    /// Round trip of an RDMA READ, in nanoseconds.
    pub read_ns: u64,
    /// Post-to-completion time of a signalled RDMA WRITE.
    pub write_ns: u64,
    /// Round trip of an 8-byte CAS or FETCH_ADD.
    pub atomic_ns: u64,
    /// SEND to the receiver's completion (two-sided).
    pub send_ns: u64,
    /// Link bandwidth in bytes per second.
    pub bytes_per_s: u64,
    /// Minimum spacing of operations on one queue (the NIC's message rate).
    pub gap_ns: u64,
}

impl Default for CostModel {
    /// ConnectX-3 class FDR InfiniBand (56 Gb/s), the NIC of RGraph's
    /// testbed, from published measurements (Kalia et al., HERD, SIGCOMM '14
    /// and "Design Guidelines for High Performance RDMA Systems", ATC '16;
    /// Dragojević et al., FaRM, NSDI '14): about 2 µs for a small READ,
    /// 1.6 µs for a signalled WRITE, 2.3 µs for an atomic, 2 µs for a
    /// SEND/RECV pair, about 6 GB/s of usable bandwidth and some 35 M
    /// operations per second per port.
    fn default() -> Self {
        Self {
            read_ns: 2_000,
            write_ns: 1_600,
            atomic_ns: 2_300,
            send_ns: 2_000,
            bytes_per_s: 6_000_000_000,
            gap_ns: 30,
        }
    }
}

impl CostModel {
    fn latency_ns(&self, verb: Verb) -> u64 {
        match verb {
            Verb::Read => self.read_ns,
            Verb::Write => self.write_ns,
            Verb::CompareSwap | Verb::FetchAdd => self.atomic_ns,
            Verb::Send | Verb::Recv => self.send_ns,
        }
    }

    fn wire_ns(&self, bytes: u64) -> u64 {
        let ns = u128::from(bytes) * 1_000_000_000 / u128::from(self.bytes_per_s.max(1));
        u64::try_from(ns).unwrap_or(u64::MAX)
    }

    /// Issues one operation: returns its completion time and the time the
    /// queue's NIC is free again.
    pub(crate) fn issue(
        &self,
        verb: Verb,
        bytes: u64,
        now_ns: u64,
        nic_free_ns: u64,
    ) -> (u64, u64) {
        let start = now_ns.max(nic_free_ns);
        let wire = self.wire_ns(bytes);
        (
            start + wire + self.latency_ns(verb),
            start + wire.max(self.gap_ns),
        )
    }

    /// The modelled time of one operation alone on an idle queue.
    pub fn latency(&self, verb: Verb, bytes: u64) -> Duration {
        Duration::from_nanos(self.issue(verb, bytes, 0, 0).0)
    }

    /// The modelled time until the last of `ops` (verb, bytes) completes
    /// when they are posted together on an idle queue.
    pub fn batch(&self, ops: impl IntoIterator<Item = (Verb, u64)>) -> Duration {
        let (mut last, mut free) = (0, 0);
        for (verb, bytes) in ops {
            let (done, next) = self.issue(verb, bytes, 0, free);
            (last, free) = (last.max(done), next);
        }
        Duration::from_nanos(last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_one_pays_latency_and_a_batch_pays_bandwidth() {
        let model = CostModel::default();
        // 32 dependent 8-byte READs: each waits for the previous one.
        let mut now = 0;
        for _ in 0..32 {
            now = model.issue(Verb::Read, 8, now, now).0;
        }
        assert_eq!(now, 32 * (2_000 + 1));
        // 32 posted at once: one latency plus 32 message gaps.
        let (mut free, mut last) = (0, 0);
        for _ in 0..32 {
            let (done, next) = model.issue(Verb::Read, 8, 0, free);
            (last, free) = (done, next);
        }
        assert_eq!(last, 31 * 30 + 1 + 2_000);
        assert_eq!(
            model.batch((0..32).map(|_| (Verb::Read, 8))).as_nanos(),
            u128::from(last),
            "batch is the posted-at-once case"
        );
        assert_eq!(model.batch([]).as_nanos(), 0);
        // 64 KiB WRITEs are bandwidth bound: 65536 B at 6 GB/s = 10.9 µs each.
        assert_eq!(
            model.latency(Verb::Write, 65_536).as_nanos(),
            10_922 + 1_600
        );
    }
}
