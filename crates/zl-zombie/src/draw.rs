//! The random draws of SRED step 2, shared by [`crate::ZombieList`] and
//! [`crate::NaiveZombieList`] so that one seed gives both the same decisions.

use rand::{Rng, RngCore};

/// The zombie to compare against: uniform over `0..m`.
#[inline]
pub(crate) fn zombie_index<R: RngCore + ?Sized>(rng: &mut R, m: usize) -> usize {
    rng.random_range(0..m)
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
