//! The data plane's random stream: xoshiro256++ (Blackman and Vigna, 2019).

use rand::{RngCore, SeedableRng};

/// xoshiro256++, output for output the generator of `rand_xoshiro::Xoshiro256PlusPlus` 0.7
/// (the same seeding, by `from_seed` and by `seed_from_u64` through SplitMix64, and the same
/// `next_u64`, `next_u32` and `fill_bytes`; the tests check it against that crate).
///
/// decided: written out here because the per-packet path draws from it in three places
/// (the Zombie List's zombie index and swap, ZL-RED's Bernoulli trial) and the compiler kept
/// the third draw a call into the other crate's `next_u64`, with the decision's floating-point
/// values spilled around it; `next_u64` here is always inlined.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Xoshiro256PlusPlus {
    s: [u64; 4],
}

impl SeedableRng for Xoshiro256PlusPlus {
    type Seed = [u8; 32];

    /// The state as four little-endian words; an all-zero seed (a fixed point of the
    /// generator) is replaced by `seed_from_u64(0)`, as `rand_xoshiro` does.
    fn from_seed(seed: [u8; 32]) -> Self {
        if seed == [0; 32] {
            return Self::seed_from_u64(0);
        }
        let mut s = [0; 4];
        for (word, bytes) in s.iter_mut().zip(seed.chunks_exact(8)) {
            *word = u64::from_le_bytes(bytes.try_into().expect("8-byte chunk"));
        }
        Xoshiro256PlusPlus { s }
    }

    /// The state from the first four outputs of SplitMix64 seeded with `seed`.
    fn seed_from_u64(seed: u64) -> Self {
        Xoshiro256PlusPlus {
            s: std::array::from_fn(|k| crate::splitmix64(seed, k as u64 + 1)),
        }
    }
}

impl RngCore for Xoshiro256PlusPlus {
    /// The high half of `next_u64` (its low bits are the weaker ones).
    #[inline(always)]
    fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    #[inline(always)]
    fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[0].wrapping_add(s[3]).rotate_left(23).wrapping_add(s[0]);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// `rand_core`'s `fill_bytes_via_next`, as `rand_xoshiro` fills.
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        rand::rand_core::impls::fill_bytes_via_next(self, dest);
    }
}

#[cfg(test)]
mod tests {
    use rand::{RngCore, SeedableRng};

    use super::Xoshiro256PlusPlus;

    /// Output for output `rand_xoshiro`'s generator: seeded by `seed_from_u64` (many seeds,
    /// the ends included) and by `from_seed` (random seeds and the all-zero one), through
    /// `next_u64`, `next_u32` and `fill_bytes` of every length up to 40 bytes, interleaved.
    #[test]
    fn is_rand_xoshiros_generator() {
        fn same(mut a: Xoshiro256PlusPlus, mut b: rand_xoshiro::Xoshiro256PlusPlus, tag: &str) {
            for n in 0..2_000usize {
                match n % 3 {
                    0 => assert_eq!(a.next_u64(), b.next_u64(), "{tag} draw {n}"),
                    1 => assert_eq!(a.next_u32(), b.next_u32(), "{tag} draw {n}"),
                    _ => {
                        let len = n % 41;
                        let (mut x, mut y) = ([0u8; 40], [0u8; 40]);
                        a.fill_bytes(&mut x[..len]);
                        b.fill_bytes(&mut y[..len]);
                        assert_eq!(x, y, "{tag} draw {n}");
                    }
                }
            }
        }
        let mut gen = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(99);
        let seeds = [0, 1, 2, 7, 42, u64::MAX, u64::MAX - 1, 1 << 63]
            .into_iter()
            .chain((0..500).map(|_| gen.next_u64()));
        for seed in seeds {
            same(
                Xoshiro256PlusPlus::seed_from_u64(seed),
                rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(seed),
                &format!("seed_from_u64({seed})"),
            );
        }
        let mut seeds = vec![[0u8; 32]];
        for _ in 0..100 {
            let mut s = [0u8; 32];
            gen.fill_bytes(&mut s);
            seeds.push(s);
        }
        for seed in seeds {
            same(
                Xoshiro256PlusPlus::from_seed(seed),
                rand_xoshiro::Xoshiro256PlusPlus::from_seed(seed),
                &format!("from_seed({seed:?})"),
            );
        }
    }
}
