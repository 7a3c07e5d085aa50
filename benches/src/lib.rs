//! quiver-benches: Quiver's measurements. Criterion benches live in
//! `benches/` (`io`, `ingest`); the `bench-io` binary compares quiver-io with
//! `dd` and `pread` side by side and is driven by `cargo xtask bench`. This
//! library holds the few helpers they share.
//!
//! Invariants: nothing here asserts a timing; the deterministic filler
//! [`fill_word`] is a pure function of the seed and the word index, so any
//! reader can check any 8 bytes of a bench file without reading the rest.

#![forbid(unsafe_code)]

/// The `index`-th little-endian word of the bench file made from `seed`
/// (SplitMix64 output `index + 1` of a generator started at `seed`).
/// Random-looking, so no layer below us can deduplicate or compress it.
#[must_use]
pub fn fill_word(seed: u64, index: u64) -> u64 {
    let mut z = seed.wrapping_add(index.wrapping_add(1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Fills `chunk`, which starts at byte `offset` of the bench file, with its
/// [`fill_word`]s. `offset` and `chunk.len()` must be multiples of 8.
pub fn fill(seed: u64, offset: u64, chunk: &mut [u8]) {
    assert!(
        offset.is_multiple_of(8) && chunk.len().is_multiple_of(8),
        "fill works on whole words"
    );
    let first = offset / 8;
    for (i, word) in (first..).zip(chunk.chunks_exact_mut(8)) {
        word.copy_from_slice(&fill_word(seed, i).to_le_bytes());
    }
}

/// The median of `xs` (the mean of the middle two for an even count); NaN
/// for an empty slice.
#[must_use]
pub fn median(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    let mut v = xs.to_vec();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_matches_fill_word_at_any_offset() {
        let mut a = vec![0u8; 64];
        fill(9, 0, &mut a);
        let mut b = vec![0u8; 16];
        fill(9, 24, &mut b);
        assert_eq!(&a[24..40], &b[..]);
        assert_eq!(a[8..16], fill_word(9, 1).to_le_bytes());
        assert_ne!(fill_word(9, 0), fill_word(9, 1));
    }

    #[test]
    fn median_of_odd_even_and_empty() {
        assert!((median(&[3.0, 1.0, 2.0]) - 2.0).abs() < 1e-12);
        assert!((median(&[4.0, 1.0, 2.0, 3.0]) - 2.5).abs() < 1e-12);
        assert!(median(&[]).is_nan());
    }
}
