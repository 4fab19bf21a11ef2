//! Synthetic tables shaped like the public BGP tables, for benchmarks and load tests (no
//! real table ships with the repository).
//!
//! The prefix-length shares are rounded from the prefix-length distributions published for
//! the default-free zone in 2024 (bgp.potaroo.net's AS65000 IPv4 and AS131072 IPv6 reports;
//! Geoff Huston, "BGP in 2023", APNIC blog): IPv4 about 62 % /24, then /22, /23, /21, /20,
//! nothing longer than /24; IPv6 about half /48, then /32, /44, /40, /36, /29. Our rounding,
//! not a copy of one day's table: the shape is what matters for an LPM (how many prefixes
//! end within the root table, how many need groups, how they cluster).
//!
//! Addresses are drawn from a seeded xorshift, so a table is the same on every run. IPv4
//! prefixes are spread over 1.0.0.0 - 223.255.255.255; IPv6 prefixes cluster as allocations
//! do: /29 - /32 blocks under 2000::/3 and the longer prefixes inside them.

/// IPv4 `(length, per 100 000 of the table)`.
pub const V4_SHARES: &[(u8, u32)] = &[
    (8, 2),
    (12, 60),
    (13, 120),
    (14, 250),
    (15, 350),
    (16, 1_400),
    (17, 900),
    (18, 1_500),
    (19, 2_700),
    (20, 4_300),
    (21, 5_000),
    (22, 11_000),
    (23, 10_500),
    (24, 61_918),
];

/// IPv6 `(length, per 100 000 of the table)`.
pub const V6_SHARES: &[(u8, u32)] = &[
    (28, 1_000),
    (29, 4_000),
    (32, 12_000),
    (33, 1_000),
    (34, 1_000),
    (35, 500),
    (36, 4_000),
    (38, 1_500),
    (40, 6_000),
    (42, 2_000),
    (44, 7_000),
    (45, 2_000),
    (46, 3_000),
    (47, 2_000),
    (48, 53_000),
];

/// A small seeded generator (xorshift64*): tables need spread, not statistics.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed` (any value: the state is made odd, never zero).
    pub fn new(seed: u64) -> Self {
        Rng(seed | 1)
    }
    /// The next 64 pseudo-random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

fn lengths(shares: &[(u8, u32)], n: usize) -> Vec<u8> {
    let total: u32 = shares.iter().map(|s| s.1).sum();
    let mut out = Vec::with_capacity(n);
    for &(len, share) in shares {
        let k = n * share as usize / total as usize;
        out.extend(std::iter::repeat_n(len, k));
    }
    while out.len() < n {
        out.push(shares.last().map_or(24, |s| s.0));
    }
    out
}

/// `n` distinct IPv4 prefixes `(address, length)` with the [`V4_SHARES`] distribution.
pub fn v4_table(n: usize, seed: u64) -> Vec<(u32, u8)> {
    let mut rng = Rng::new(seed);
    let mut seen = std::collections::HashSet::with_capacity(n);
    let mut out = Vec::with_capacity(n);
    for len in lengths(V4_SHARES, n) {
        // 223 << 24 addresses hold 223 << (len - 8) prefixes of length `len`: asking for more
        // than half of them would make the draw below crawl or never end.
        let shares = V4_SHARES.iter().find(|s| s.0 == len).map_or(0, |s| s.1);
        assert!(
            n as u64 * u64::from(shares) / 100_000 <= (223u64 << (len - 8)) / 2,
            "a table of {n} needs more /{len}s than the address space has"
        );
        loop {
            let a = (rng.next_u64() >> 32) as u32;
            let a = (1 << 24) + a % (223 << 24);
            let a = a & (u32::MAX << (32 - len));
            if seen.insert((a, len)) {
                out.push((a, len));
                break;
            }
        }
    }
    out
}

/// `n` distinct IPv6 prefixes `(address, length)` with the [`V6_SHARES`] distribution,
/// clustered in `n / 8` allocations of /29 - /32.
pub fn v6_table(n: usize, seed: u64) -> Vec<(u128, u8)> {
    let mut rng = Rng::new(seed);
    let blocks: Vec<u128> = (0..(n / 8).max(1))
        .map(|_| {
            let a = (u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64());
            (0x2u128 << 124) | ((a >> 3) & (u128::MAX << 96))
        })
        .collect();
    let mut seen = std::collections::HashSet::with_capacity(n);
    let mut out = Vec::with_capacity(n);
    for len in lengths(V6_SHARES, n) {
        loop {
            let block = blocks[(rng.next_u64() % blocks.len() as u64) as usize];
            // Random bits below the /32 block (prefix bits 33..96).
            let inside = u128::from(rng.next_u64()) << 32;
            let a = (block | inside) & (u128::MAX << (128 - len));
            if seen.insert((a, len)) {
                out.push((a, len));
                break;
            }
        }
    }
    out
}

/// An address inside prefix `(a, len)` of a 32-bit table, chosen by `rng`.
pub fn v4_inside(p: (u32, u8), rng: &mut Rng) -> u32 {
    // A /32 has no host bits (`u32::MAX >> 32` would overflow).
    let host = u32::MAX.checked_shr(u32::from(p.1)).unwrap_or(0);
    p.0 | ((rng.next_u64() >> 32) as u32 & host)
}

/// An address inside prefix `(a, len)` of a 128-bit table, chosen by `rng`.
pub fn v6_inside(p: (u128, u8), rng: &mut Rng) -> u128 {
    let host = u128::MAX.checked_shr(u32::from(p.1)).unwrap_or(0);
    let r = (u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64());
    p.0 | (r & host)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_have_the_size_and_shape_asked() {
        let t = v4_table(10_000, 1);
        assert_eq!(t.len(), 10_000);
        let s24 = t.iter().filter(|p| p.1 == 24).count();
        assert!((6100..=6300).contains(&s24), "{s24} /24s");
        let t = v4_table(1_000_000, 2);
        assert_eq!(t.iter().filter(|p| p.1 == 8).count(), 20);
        assert!(t.iter().all(|p| p.0 >> 24 >= 1 && p.0 >> 24 <= 223));
        let t6 = v6_table(10_000, 1);
        assert_eq!(t6.len(), 10_000);
        assert!(t6.iter().all(|p| p.0 >> 125 == 1), "under 2000::/3");
        assert_eq!(t6.iter().filter(|p| p.1 == 48).count(), 5300);
    }
}
