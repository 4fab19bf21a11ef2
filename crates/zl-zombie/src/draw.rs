//! The random draws of SRED step 2, shared by [`crate::ZombieList`] and
//! [`crate::NaiveZombieList`] so that one seed gives both the same decisions.

use rand::RngCore;

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

/// Whether a miss overwrites the drawn zombie: true with probability `p_swap`, given as
/// `swap_below = ceil(p_swap 2^53)` ([`crate::ZombieConfig`] keeps it).
///
/// Exactly rand 0.9's `rng.random::<f64>() < p_swap` (the same draw, the same result), in
/// integers: that `f64` is `k 2^-53` with `k` the draw's top 53 bits, exact, and for an
/// integer `k`, `k 2^-53 < p_swap` iff `k < p_swap 2^53` iff `k < ceil(p_swap 2^53)` (the
/// product exact, a power-of-two scaling). Saves the conversion and the multiply on every
/// miss; the unit test below checks it against rand draw for draw.
#[inline]
pub(crate) fn swap<R: RngCore + ?Sized>(rng: &mut R, swap_below: u64) -> bool {
    (rng.next_u64() >> 11) < swap_below
}

/// One step of the hit-frequency EWMA, `P(t) = (1 - alpha) P(t-1) + alpha Hit(t)` (SRED).
#[inline]
pub(crate) fn ewma(p: f64, alpha: f64, hit: bool) -> f64 {
    let h = if hit { 1.0 } else { 0.0 };
    (1.0 - alpha) * p + alpha * h
}

/// [`ewma`] with `keep = 1 - alpha` computed once ([`crate::ZombieConfig`] keeps it), bit for
/// bit: `alpha Hit` is `alpha` or `+0` exactly (`alpha` in `(0, 1]`), so each arrival saves
/// the subtraction and a multiply. A miss returns `keep p` without adding `+0`: that sum
/// differs from its operand only for `-0`, and `keep p` is never `-0` here (`keep >= 0`, and
/// P(t) starts at `+0` or at a mean of shards, each a step of values in `[0, 1]`): two
/// instructions off each arrival's update. The unit test below checks it against
/// [`ewma`].
#[inline]
pub(crate) fn ewma_step(p: f64, keep: f64, alpha: f64, hit: bool) -> f64 {
    let kept = keep * p;
    if hit {
        kept + alpha
    } else {
        kept
    }
}

#[cfg(test)]
mod tests {
    use rand::{Rng, RngCore, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    use super::{ewma, ewma_step, swap, zombie_index};
    use crate::{ZombieParams, MAX_M};

    /// Draw for draw equal to `random::<f64>() < p_swap`, through the config's threshold, for
    /// the bounds, the default, values whose `p_swap 2^53` is an integer and random ones.
    #[test]
    fn swap_is_rands_comparison() {
        let mut gen = Xoshiro256PlusPlus::seed_from_u64(7);
        let mut p_swaps = vec![
            0.0,
            1.0,
            0.25,
            0.5,
            1e-300,
            f64::MIN_POSITIVE,
            1.0 - f64::EPSILON,
        ];
        p_swaps.extend((0..200).map(|_| gen.random::<f64>()));
        p_swaps.extend((0..50).map(|_| (gen.next_u64() >> 11) as f64 / (1u64 << 53) as f64));
        for (seed, p_swap) in p_swaps.into_iter().enumerate() {
            let cfg = ZombieParams {
                p_swap,
                ..ZombieParams::default()
            }
            .validate()
            .expect("p_swap in [0, 1]");
            let mut a = Xoshiro256PlusPlus::seed_from_u64(seed as u64);
            let mut b = Xoshiro256PlusPlus::seed_from_u64(seed as u64);
            for _ in 0..20_000 {
                assert_eq!(
                    swap(&mut a, cfg.swap_below()),
                    b.random::<f64>() < p_swap,
                    "p_swap = {p_swap}"
                );
            }
            assert_eq!(a.next_u64(), b.next_u64(), "p_swap = {p_swap}: same draws");
        }
    }

    /// At the boundary: the draw whose top 53 bits are `k` swaps iff `k 2^-53 < p_swap`,
    /// for `k` on both sides of `p_swap 2^53`.
    #[test]
    fn swap_threshold_is_exact_at_the_boundary() {
        struct Fixed(u64);
        impl RngCore for Fixed {
            fn next_u32(&mut self) -> u32 {
                unreachable!("swap draws 64 bits")
            }
            fn next_u64(&mut self) -> u64 {
                self.0
            }
            fn fill_bytes(&mut self, _: &mut [u8]) {
                unreachable!("swap draws 64 bits")
            }
        }
        for k in [1u64, 3, 1 << 20, (1 << 51) + 5, (1 << 53) - 2] {
            for p_swap in [
                k as f64 / (1u64 << 53) as f64,
                (k as f64 + 0.5) / (1u64 << 53) as f64,
            ] {
                let below = ZombieParams {
                    p_swap,
                    ..ZombieParams::default()
                }
                .validate()
                .expect("p_swap in [0, 1]")
                .swap_below();
                for j in [k - 1, k, k + 1] {
                    let want = (j as f64) * (1.0 / (1u64 << 53) as f64) < p_swap;
                    assert_eq!(
                        swap(&mut Fixed(j << 11), below),
                        want,
                        "k {k} j {j} p {p_swap}"
                    );
                }
            }
        }
    }

    /// `ewma_step` with the config's `keep` is `ewma` bit for bit: P from 0 to 1 (random, and
    /// the ends), alpha resolved from M and configured (random, tiny, 1), hits and misses.
    #[test]
    fn ewma_step_is_ewma() {
        let mut gen = Xoshiro256PlusPlus::seed_from_u64(9);
        let mut params: Vec<ZombieParams> = [1, 2, 3, 7, 1000, 4096, MAX_M]
            .into_iter()
            .map(|m| ZombieParams {
                m,
                ..ZombieParams::default()
            })
            .collect();
        params.extend(
            [1.0, f64::MIN_POSITIVE, 1e-300, 0.5, 1.0 - f64::EPSILON]
                .into_iter()
                .chain((0..200).map(|_| 1.0 - gen.random::<f64>()))
                .map(|a| ZombieParams {
                    alpha: Some(a),
                    ..ZombieParams::default()
                }),
        );
        for cfg in params.iter().map(|p| p.validate().expect("valid")) {
            let ps = [0.0, 1.0, f64::MIN_POSITIVE, 1.0 - f64::EPSILON]
                .into_iter()
                .chain((0..2000).map(|_| gen.random::<f64>()));
            for p in ps {
                for hit in [false, true] {
                    assert_eq!(
                        ewma_step(p, cfg.keep(), cfg.alpha(), hit).to_bits(),
                        ewma(p, cfg.alpha(), hit).to_bits(),
                        "p {p} alpha {} hit {hit}",
                        cfg.alpha()
                    );
                }
            }
        }
    }

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
