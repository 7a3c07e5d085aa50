//! Latency histograms that nodes can add up: 16 buckets per power of two
//! (4.4% wide), kept sparse so a node's report stays small.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

const STEPS: u32 = 16;

/// Counts of durations in nanoseconds, by logarithmic bucket.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Histogram {
    buckets: BTreeMap<u32, u64>,
    count: u64,
}

fn bucket(ns: u64) -> u32 {
    if ns < u64::from(STEPS) {
        return u32::try_from(ns).expect("below 16");
    }
    let exponent = 63 - ns.leading_zeros();
    let fraction = u32::try_from((ns >> (exponent - 4)) & u64::from(STEPS - 1)).expect("4 bits");
    (exponent - 3) * STEPS + fraction
}

/// The smallest duration of bucket `index`.
fn lower(index: u32) -> u64 {
    if index < STEPS {
        return u64::from(index);
    }
    let exponent = index / STEPS + 3;
    (u64::from(STEPS) + u64::from(index % STEPS)) << (exponent - 4)
}

impl Histogram {
    /// Counts one duration.
    pub fn record(&mut self, ns: u64) {
        *self.buckets.entry(bucket(ns)).or_default() += 1;
        self.count += 1;
    }

    /// Adds `other`'s counts.
    pub fn merge(&mut self, other: &Histogram) {
        for (&index, &n) in &other.buckets {
            *self.buckets.entry(index).or_default() += n;
        }
        self.count += other.count;
    }

    /// Durations counted.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The duration below which a fraction `q` of the counts lie (the
    /// lower edge of its bucket; 0 when empty).
    pub fn quantile(&self, q: f64) -> u64 {
        #[allow(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss
        )]
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (&index, &n) in &self.buckets {
            seen += n;
            if seen >= rank {
                return lower(index);
            }
        }
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn a_duration_lies_in_its_bucket_within_a_sixteenth(ns in 0u64..1 << 50) {
            let low = lower(bucket(ns));
            prop_assert!(low <= ns);
            prop_assert!(ns - low <= low / 16 + 1);
            prop_assert!(lower(bucket(ns) + 1) > ns);
        }

        #[test]
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss, clippy::cast_precision_loss)]
        fn quantiles_match_a_sorted_list(mut values in proptest::collection::vec(1u64..1 << 40, 1..200)) {
            let mut h = Histogram::default();
            for &v in &values {
                h.record(v);
            }
            values.sort_unstable();
            for q in [0.5, 0.99, 0.999] {
                let rank = ((q * values.len() as f64).ceil() as usize).max(1);
                prop_assert_eq!(h.quantile(q), lower(bucket(values[rank - 1])));
            }
        }
    }

    #[test]
    fn merged_histograms_add_up() {
        let (mut a, mut b) = (Histogram::default(), Histogram::default());
        a.record(100);
        b.record(100);
        b.record(1_000_000);
        a.merge(&b);
        assert_eq!(a.count(), 3);
        assert_eq!(a.quantile(0.5), 100);
        assert!(a.quantile(1.0) > 900_000);
    }
}
