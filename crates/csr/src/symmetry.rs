//! Whether every edge's reverse is in a graph, found in one pass over its
//! edges in any order: each edge `(u, v, w)` adds a 64-bit hash of
//! `(u, v, w)` to one sum and of `(v, u, w)` to another (wrapping), and
//! the edge multiset equals its reverse exactly when the sums agree, up to
//! a hash collision (about 2^-64 for input that is not built to collide).
//! Weights take part: a weighted
//! graph is symmetric when every edge has a reverse of the same weight.
//! Parallel edges count with their multiplicity.

/// The two sums, fed edge by edge.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Symmetry {
    forward: u64,
    reverse: u64,
}

impl Symmetry {
    /// Adds the edge `source -> target` of weight bits `weight` (0 for an
    /// unweighted graph).
    #[inline]
    pub fn add(&mut self, source: u32, target: u32, weight: u32) {
        self.forward = self.forward.wrapping_add(hash(source, target, weight));
        self.reverse = self.reverse.wrapping_add(hash(target, source, weight));
    }

    /// Whether every edge added has its reverse among them.
    pub fn is_symmetric(&self) -> bool {
        self.forward == self.reverse
    }
}

/// SplitMix64's finalizer over the edge.
#[inline]
fn hash(source: u32, target: u32, weight: u32) -> u64 {
    let mut z = (u64::from(source) << 32 | u64::from(target)) ^ 0x9e37_79b9_7f4a_7c15;
    z = z.wrapping_add(u64::from(weight).wrapping_mul(0xbf58_476d_1ce4_e5b9));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    /// The simple reference: the sorted edges equal their sorted reverses.
    fn symmetric(edges: &[(u32, u32, u32)]) -> bool {
        let mut forward = edges.to_vec();
        let mut reverse: Vec<_> = edges.iter().map(|&(u, v, w)| (v, u, w)).collect();
        forward.sort_unstable();
        reverse.sort_unstable();
        forward == reverse
    }

    proptest! {
        #[test]
        fn the_sums_agree_exactly_when_every_edge_has_its_reverse(
            edges in prop::collection::vec((0u32..6, 0u32..6, 0u32..3), 0..14),
            mirror in any::<bool>(),
        ) {
            let mut edges = edges;
            if mirror {
                let reverses: Vec<_> = edges.iter().map(|&(u, v, w)| (v, u, w)).collect();
                edges.extend(reverses);
            }
            let mut sums = Symmetry::default();
            for &(u, v, w) in &edges {
                sums.add(u, v, w);
            }
            prop_assert_eq!(sums.is_symmetric(), symmetric(&edges));
        }
    }
}
