//! The packed walk word: `source index | position in block | hop`, hop in
//! the low bits so that a step is an increment.

use crate::{Error, Result};

/// How the 64 bits of a walk word are split, computed from the workload and
/// checked once.
///
/// Bits, from the top: `source_bits` of source index (an index into the
/// application's table of sources, not a vertex id), `position_bits` of
/// vertex offset inside the walk's current block, `hop_bits` of steps taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WalkLayout {
    source_bits: u32,
    position_bits: u32,
    hop_bits: u32,
}

/// Bits needed to store every value in `0..count` (0 for a count of 0 or 1).
fn bits_for(count: u64) -> u32 {
    u64::BITS - count.saturating_sub(1).leading_zeros()
}

impl WalkLayout {
    /// A layout for `sources` distinct sources (0 or 1 when the app does not
    /// track sources), blocks of at most `block_vertices` vertices, and walks
    /// of at most `max_hops` steps. Fails, naming each field's need, if the
    /// three do not fit 64 bits.
    pub fn new(sources: u64, block_vertices: u64, max_hops: u64) -> Result<WalkLayout> {
        let source_bits = bits_for(sources);
        let position_bits = bits_for(block_vertices);
        let hop_bits = bits_for(max_hops.saturating_add(1));
        let needed = source_bits + position_bits + hop_bits;
        if needed > 64 {
            return Err(Error::DoesNotFit {
                sources,
                block_vertices,
                max_hops,
                source_bits,
                position_bits,
                hop_bits,
                needed,
            });
        }
        Ok(WalkLayout {
            source_bits,
            position_bits,
            hop_bits,
        })
    }

    /// Bits of source index.
    pub fn source_bits(&self) -> u32 {
        self.source_bits
    }

    /// Bits of position.
    pub fn position_bits(&self) -> u32 {
        self.position_bits
    }

    /// Bits of hop count.
    pub fn hop_bits(&self) -> u32 {
        self.hop_bits
    }

    #[inline]
    fn mask(bits: u32) -> u64 {
        if bits == 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        }
    }

    /// Packs a walk. Panics if a value does not fit its field: the layout
    /// was built for the workload, so that is a bug, never a wrap.
    #[inline]
    pub fn encode(&self, source: u64, position: u64, hop: u64) -> u64 {
        assert!(
            source <= Self::mask(self.source_bits)
                && position <= Self::mask(self.position_bits)
                && hop <= Self::mask(self.hop_bits),
            "walk (source {source}, position {position}, hop {hop}) exceeds layout {self:?}"
        );
        shl(source, self.position_bits + self.hop_bits) | shl(position, self.hop_bits) | hop
    }

    /// The source index.
    #[inline]
    pub fn source(&self, word: u64) -> u64 {
        shr(word, self.position_bits + self.hop_bits) & Self::mask(self.source_bits)
    }

    /// The position inside the current block.
    #[inline]
    pub fn position(&self, word: u64) -> u64 {
        shr(word, self.hop_bits) & Self::mask(self.position_bits)
    }

    /// Steps taken.
    #[inline]
    pub fn hop(&self, word: u64) -> u64 {
        word & Self::mask(self.hop_bits)
    }

    /// The same walk at another position (after moving to another block):
    /// only the position field is rewritten. Panics if `position` does not
    /// fit it.
    #[inline]
    pub fn with_position(&self, word: u64, position: u64) -> u64 {
        let mask = Self::mask(self.position_bits);
        assert!(
            position <= mask,
            "position {position} exceeds layout {self:?}"
        );
        (word & !shl(mask, self.hop_bits)) | shl(position, self.hop_bits)
    }
}

/// Shifts that treat a shift by 64 as producing zero, for layouts where a
/// field has all the bits.
#[inline]
fn shl(x: u64, by: u32) -> u64 {
    x.checked_shl(by).unwrap_or(0)
}

#[inline]
fn shr(x: u64, by: u32) -> u64 {
    x.checked_shr(by).unwrap_or(0)
}

/// A walk in exact mode: the packed word plus a unique walk id, so that
/// randomness can be keyed by `(seed, walk id, hop)` and paths recorded.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, bytemuck::Pod, bytemuck::Zeroable,
)]
#[repr(C)]
pub struct ExactWalk {
    /// The packed word of [`WalkLayout`].
    pub word: u64,
    /// The walk's id, unique within a run.
    pub id: u64,
}

/// What a walk pool can hold: a plain packed word (`u64`) or an
/// [`ExactWalk`]. Plain old data, so spill files are the bytes themselves.
pub trait WalkWord: bytemuck::Pod + Send + Sync + std::fmt::Debug {
    /// The packed `source | position | hop` word.
    fn word(&self) -> u64;
}

impl WalkWord for u64 {
    fn word(&self) -> u64 {
        *self
    }
}

/// A word whose layout takes at most 32 bits (no source, say): half the
/// bytes to sort, file and spill.
impl WalkWord for u32 {
    fn word(&self) -> u64 {
        u64::from(*self)
    }
}

impl WalkWord for ExactWalk {
    fn word(&self) -> u64 {
        self.word
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn bit_counts() {
        assert_eq!(bits_for(0), 0);
        assert_eq!(bits_for(1), 0);
        assert_eq!(bits_for(2), 1);
        assert_eq!(bits_for(1 << 24), 24);
        assert_eq!(bits_for((1 << 24) + 1), 25);
    }

    #[test]
    fn graphwalker_split_fits_and_one_more_bit_does_not() {
        // The paper's 2^24 sources, 2^26-vertex blocks, 2^14 - 1 steps.
        let layout = WalkLayout::new(1 << 24, 1 << 26, (1 << 14) - 1).unwrap();
        assert_eq!(
            (
                layout.source_bits(),
                layout.position_bits(),
                layout.hop_bits()
            ),
            (24, 26, 14)
        );
        let err = WalkLayout::new(1 << 24, 1 << 26, 1 << 14).unwrap_err();
        assert!(err.to_string().contains("65 bits"), "{err}");
        assert!(err.to_string().contains("16384 steps"), "{err}");
    }

    #[test]
    fn a_step_is_an_increment() {
        let layout = WalkLayout::new(100, 1000, 10).unwrap();
        let w = layout.encode(7, 999, 3);
        assert_eq!(layout.hop(w + 1), 4);
        assert_eq!((layout.source(w + 1), layout.position(w + 1)), (7, 999));
    }

    #[test]
    #[should_panic(expected = "exceeds layout")]
    fn out_of_range_values_are_caught_not_masked() {
        let layout = WalkLayout::new(4, 4, 4).unwrap();
        layout.encode(4, 0, 0);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn encoding_round_trips_for_every_value_in_range(
            (sources, block, hops, s, p, h, p2) in (0u32..=40, 0u32..=40, 1u32..=40)
                .prop_filter("fits a word", |(s, p, h)| s + p + h <= 64)
                .prop_flat_map(|(s, p, h)| (0u64..=(1 << s), 0u64..=(1 << p), 0u64..(1 << h)))
                .prop_flat_map(|(sources, block, hops)| {
                    let (s_max, p_max) = (sources.saturating_sub(1), block.saturating_sub(1));
                    (Just(sources), Just(block), Just(hops), 0..=s_max, 0..=p_max, 0..=hops, 0..=p_max)
                }),
        ) {
            let layout = WalkLayout::new(sources, block, hops).unwrap();
            let w = layout.encode(s, p, h);
            prop_assert_eq!((layout.source(w), layout.position(w), layout.hop(w)), (s, p, h));
            let moved = layout.with_position(w, p2);
            prop_assert_eq!((layout.source(moved), layout.position(moved), layout.hop(moved)), (s, p2, h));
            prop_assert_eq!(moved, layout.encode(s, p2, h));
            // The extremes of every field round-trip too.
            let (s_max, p_max) = (sources.saturating_sub(1), block.saturating_sub(1));
            let top = layout.encode(s_max, p_max, hops);
            prop_assert_eq!((layout.source(top), layout.position(top), layout.hop(top)), (s_max, p_max, hops));
        }

        #[test]
        fn layouts_that_do_not_fit_are_refused(sources in 1u64..u64::MAX, block in 1u64..u64::MAX, hops in 0u64..u64::MAX / 2) {
            let fits = bits_for(sources) + bits_for(block) + bits_for(hops + 1) <= 64;
            prop_assert_eq!(WalkLayout::new(sources, block, hops).is_ok(), fits);
        }
    }
}
