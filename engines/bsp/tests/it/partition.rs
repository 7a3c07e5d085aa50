//! RGraph's partitioning: every vertex owned exactly once, and the
//! adjustment never worse than Gemini's start.

use proptest::prelude::*;
use quiver_bsp::partition::{default_alpha, Partition};

/// Skewed degrees: mostly small, a few hubs.
fn arb_offsets() -> impl Strategy<Value = Vec<u64>> {
    prop::collection::vec(prop_oneof![8 => 0u64..4, 1 => 50u64..400], 1..300).prop_map(|degrees| {
        std::iter::once(0)
            .chain(degrees.iter().scan(0, |sum, d| {
                *sum += d;
                Some(*sum)
            }))
            .collect()
    })
}

proptest! {
    #[test]
    fn chunks_cover_every_vertex_once_and_adjusting_never_hurts(
        offsets in arb_offsets(),
        chunks in 1u32..9,
    ) {
        let n = u32::try_from(offsets.len() - 1).unwrap();
        let alpha = default_alpha(&offsets);
        let start = Partition::gemini(&offsets, chunks);
        let adjusted = Partition::rgraph(&offsets, chunks);
        for partition in [&start, &adjusted] {
            prop_assert_eq!(partition.len(), chunks as usize);
            let bounds = partition.bounds();
            prop_assert_eq!((bounds[0], *bounds.last().unwrap()), (0, n));
            prop_assert!(bounds.windows(2).all(|w| w[0] <= w[1]));
            for v in 0..n {
                let owner = partition.owner(v);
                prop_assert!(partition.range(owner).contains(&v));
            }
        }
        prop_assert!(adjusted.cost(&offsets, alpha) <= start.cost(&offsets, alpha) + 1e-9);
        // No single boundary move improves the result further.
        let mut again = adjusted.clone();
        again.adjust(&offsets, alpha);
        prop_assert_eq!(again, adjusted);
    }
}
