//! The random draws of SRED step 2, shared by [`crate::ZombieList`] and
//! [`crate::NaiveZombieList`] so that one seed gives both the same decisions.

use rand::{Rng, RngCore};

/// The zombie to compare against: uniform over `0..m` (`1 <= m <= MAX_M < 2^32`).
///
/// Exactly rand 0.9's `rng.random_range(0..m)` for such an `m` (the same draws, the same
/// result: a 32-bit Canon multiply, a second draw only when the low half of the product
/// exceeds `2^32 - m`), written out because rand's version was not inlined into `observe`
/// (its call measured about 0.6 ns of the 16.5 ns of an observation). The unit test below
/// checks it against rand draw for draw.
#[inline]
pub(crate) fn zombie_index<R: RngCore + ?Sized>(rng: &mut R, m: usize) -> usize {
    let range = m as u32;
    let wide = u64::from(rng.next_u32()) * u64::from(range);
    let (mut hi, lo) = ((wide >> 32) as u32, wide as u32);
    if lo > range.wrapping_neg() {
        let carry = ((u64::from(rng.next_u32()) * u64::from(range)) >> 32) as u32;
        hi += u32::from(lo.checked_add(carry).is_none());
    }
    hi as usize
}

/// Whether a miss overwrites the drawn zombie: true with probability `p_swap`.
#[inline]
pub(crate) fn swap<R: RngCore + ?Sized>(rng: &mut R, p_swap: f64) -> bool {
    rng.random::<f64>() < p_swap
}

/// One step of the hit-frequency EWMA, `P(t) = (1 - alpha) P(t-1) + alpha Hit(t)` (SRED).
#[inline]
pub(crate) fn ewma(p: f64, alpha: f64, hit: bool) -> f64 {
    let h = if hit { 1.0 } else { 0.0 };
    (1.0 - alpha) * p + alpha * h
}

#[cfg(test)]
mod tests {
    use rand::{Rng, RngCore, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    use super::zombie_index;
    use crate::MAX_M;

    /// Draw for draw equal to `random_range(0..m)`, including the second-draw branch (taken
    /// with probability about `m / 2^32`: about 1000 times here at `m` near `MAX_M`).
    #[test]
    fn zombie_index_is_rands_random_range() {
        for (seed, m) in [
            (1, 1),
            (2, 7),
            (3, 1000),
            (4, 10_000),
            (5, MAX_M - 3),
            (6, MAX_M),
        ] {
            let mut a = Xoshiro256PlusPlus::seed_from_u64(seed);
            let mut b = Xoshiro256PlusPlus::seed_from_u64(seed);
            for _ in 0..1_000_000 {
                assert_eq!(zombie_index(&mut a, m), b.random_range(0..m), "m = {m}");
            }
            assert_eq!(a.next_u64(), b.next_u64(), "m = {m}: same number of draws");
        }
    }
}
