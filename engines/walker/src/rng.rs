//! A counter-based random generator: the stream for a key is a pure
//! function of `(seed, stream, hop)`, so a walk draws the same numbers
//! wherever, whenever and on whichever thread it is moved.

/// SplitMix64's finaliser: a bijective mix of 64 bits.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The draws of one walk at one hop.
#[derive(Clone, Debug)]
pub struct KeyedRng {
    state: u64,
}

impl KeyedRng {
    /// The stream for `(seed, stream, hop)`.
    pub fn new(seed: u64, stream: u64, hop: u64) -> KeyedRng {
        KeyedRng::at(KeyedRng::key(seed, stream), hop)
    }

    /// The key of stream `stream` under `seed`, for a caller that draws
    /// from one stream at many hops: `KeyedRng::at(key, hop)` is then
    /// `KeyedRng::new(seed, stream, hop)` for a third of the mixing.
    pub fn key(seed: u64, stream: u64) -> u64 {
        mix(seed ^ 0x5851_f42d_4c95_7f2d) ^ mix(stream.wrapping_add(0x9e37_79b9_7f4a_7c15))
    }

    /// The stream at `hop` of the stream whose [key](KeyedRng::key) is
    /// `key`.
    pub fn at(key: u64, hop: u64) -> KeyedRng {
        KeyedRng {
            state: mix(key ^ hop.wrapping_mul(0xd6e8_feb8_6659_fd93)),
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        mix(self.state)
    }

    /// Uniform in `[0, 1)` with 53 bits of precision.
    #[allow(clippy::cast_precision_loss)] // 53 bits fit an f64 mantissa exactly.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `0..n` (Lemire's multiply-shift; bias below 2^-32 for
    /// the degrees met here). `n` must be positive.
    #[allow(clippy::cast_possible_truncation)] // The high half of a u64 x u64 product.
    pub fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0);
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_pure_functions_of_their_key() {
        let a: Vec<u64> = (0..4).map(|_| KeyedRng::new(1, 2, 3).next_u64()).collect();
        assert!(a.windows(2).all(|w| w[0] == w[1]));
        assert_ne!(
            KeyedRng::new(1, 2, 3).next_u64(),
            KeyedRng::new(1, 2, 4).next_u64()
        );
        assert_ne!(
            KeyedRng::new(1, 2, 3).next_u64(),
            KeyedRng::new(1, 3, 3).next_u64()
        );
        assert_ne!(
            KeyedRng::new(1, 2, 3).next_u64(),
            KeyedRng::new(2, 2, 3).next_u64()
        );
    }

    #[test]
    fn below_is_roughly_uniform() {
        let mut counts = [0u32; 7];
        for stream in 0..70_000 {
            counts[usize::try_from(KeyedRng::new(9, stream, 0).below(7)).unwrap()] += 1;
        }
        // Chi-square with 6 degrees of freedom; 22.46 is the 0.001 critical value.
        let chi: f64 = counts
            .iter()
            .map(|&c| (f64::from(c) - 10_000.0).powi(2) / 10_000.0)
            .sum();
        assert!(chi < 22.46, "chi-square {chi} for {counts:?}");
    }
}
