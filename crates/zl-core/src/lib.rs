//! The shared vocabulary every other zlrouter crate speaks: time ([`Nanos`]), flow identity
//! ([`FlowId`]), ECN codepoints ([`Ecn`]) and Diffserv drop-precedence colors ([`Color`]).
//!
//! This crate sits at the bottom of the dependency graph and has no I/O. Algorithms never read
//! a clock: the caller passes `now: Nanos`, so the same code runs on a live port (monotonic
//! clock), on a pcap replay (virtual time) and inside the simulators (simulated time).
//!
//! # Example
//!
//! ```
//! use zl_core::{Color, Ecn, Nanos};
//!
//! let sent = Nanos::from_micros(250);
//! let now = Nanos::from_millis(1);
//! assert_eq!((now - sent).as_nanos(), 750_000);
//! assert_eq!(sent - now, Nanos::ZERO); // durations saturate at zero
//! assert!(Ecn::from_bits(0b10).is_ecn_capable());
//! assert_eq!(Color::Yellow.index(), 1);
//! ```
//!
//! Layers: one file, no modules inside; every other crate of the workspace builds on it.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use core::fmt;
use core::ops::{Add, AddAssign, Sub};
use serde::{Deserialize, Serialize};

/// A point in time or a duration, in nanoseconds since an arbitrary epoch chosen by the caller.
///
/// `u64` nanoseconds covers 584 years, so overflow is not a concern for any run.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Nanos(pub u64);

impl Nanos {
    /// The epoch (or a zero duration).
    pub const ZERO: Nanos = Nanos(0);
    /// The largest time: "never" where a deadline is optional.
    pub const MAX: Nanos = Nanos(u64::MAX);

    /// `s` whole seconds.
    pub const fn from_secs(s: u64) -> Self {
        Nanos(s * 1_000_000_000)
    }
    /// `ms` whole milliseconds.
    pub const fn from_millis(ms: u64) -> Self {
        Nanos(ms * 1_000_000)
    }
    /// `us` whole microseconds.
    pub const fn from_micros(us: u64) -> Self {
        Nanos(us * 1_000)
    }
    /// Rounds to the nearest nanosecond; negative or NaN inputs give zero.
    pub fn from_secs_f64(s: f64) -> Self {
        if s.is_nan() || s <= 0.0 {
            Nanos(0)
        } else {
            Nanos((s * 1e9).round() as u64)
        }
    }
    /// The count of nanoseconds.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }
    /// In seconds, as `f64`.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 * 1e-9
    }
    /// In milliseconds, as `f64`.
    pub fn as_millis_f64(self) -> f64 {
        self.0 as f64 * 1e-6
    }
    /// `self - earlier`, or zero when `earlier` is later (clocks passed in may be equal).
    pub const fn saturating_sub(self, earlier: Nanos) -> Nanos {
        Nanos(self.0.saturating_sub(earlier.0))
    }
}

impl Add for Nanos {
    type Output = Nanos;
    fn add(self, rhs: Nanos) -> Nanos {
        Nanos(self.0 + rhs.0)
    }
}

impl AddAssign for Nanos {
    fn add_assign(&mut self, rhs: Nanos) {
        self.0 += rhs.0;
    }
}

impl Sub for Nanos {
    type Output = Nanos;
    /// Saturates at zero: a duration is never negative.
    fn sub(self, rhs: Nanos) -> Nanos {
        self.saturating_sub(rhs)
    }
}

impl fmt::Display for Nanos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.6}s", self.as_secs_f64())
    }
}

/// A flow's identity, already hashed to 64 bits (see `zl_wire::FlowKey`).
///
/// The ZL-RED paper uses the pair of IPv4 addresses (64 bits) directly; we hash every key
/// kind (src, src-dst, 5-tuple, IPv6) with a seeded hash to the same width.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FlowId(pub u64);

/// The two-bit ECN field of the IPv4 TOS / IPv6 traffic class (RFC 3168 §5).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Ecn {
    /// 0b00: the transport is not ECN-capable.
    #[default]
    NotEct,
    /// 0b01: ECN-capable transport, ECT(1).
    Ect1,
    /// 0b10: ECN-capable transport, ECT(0).
    Ect0,
    /// 0b11: congestion experienced.
    Ce,
}

impl Ecn {
    /// Decodes the low two bits of `bits`.
    pub const fn from_bits(bits: u8) -> Ecn {
        match bits & 0b11 {
            0b00 => Ecn::NotEct,
            0b01 => Ecn::Ect1,
            0b10 => Ecn::Ect0,
            _ => Ecn::Ce,
        }
    }
    /// The two-bit field value (`0b00` ..= `0b11`).
    pub const fn bits(self) -> u8 {
        match self {
            Ecn::NotEct => 0b00,
            Ecn::Ect1 => 0b01,
            Ecn::Ect0 => 0b10,
            Ecn::Ce => 0b11,
        }
    }
    /// True for ECT(0), ECT(1) and CE: a router may signal congestion by setting CE instead of
    /// dropping (RFC 3168 §5; a CE packet stays CE).
    pub const fn is_ecn_capable(self) -> bool {
        !matches!(self, Ecn::NotEct)
    }
}

/// Drop precedence of a metered packet (RFC 2597 AFx1/AFx2/AFx3; RFC 2697/2698 colors).
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum Color {
    /// Within the committed rate (AFx1).
    #[default]
    Green,
    /// Above the committed rate, within the excess or peak rate (AFx2).
    Yellow,
    /// Above every rate (AFx3); dropped first.
    Red,
}

impl Color {
    /// The three colors, green first (`ALL[c.index()] == c`).
    pub const ALL: [Color; 3] = [Color::Green, Color::Yellow, Color::Red];

    /// 0 for green, 1 for yellow, 2 for red: an index into per-color arrays.
    pub const fn index(self) -> usize {
        self as usize
    }
    /// The name used in config files and reports (`"green"`, `"yellow"`, `"red"`).
    pub const fn name(self) -> &'static str {
        match self {
            Color::Green => "green",
            Color::Yellow => "yellow",
            Color::Red => "red",
        }
    }
}

impl fmt::Display for Color {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Output `k` of the SplitMix64 generator started from `seed` (Steele, Lea and Flood, "Fast
/// Splittable Pseudorandom Number Generators", OOPSLA 2014; Vigna's `splitmix64.c`): its
/// finaliser applied to `seed + k·γ`, γ = 0x9e37_79b9_7f4a_7c15 (2^64 / φ).
///
/// For a fixed `k` it is a bijection of `seed` that mixes every input bit into every output bit,
/// which is why zlrouter uses it twice: `k = 1` hashes a flow id to its Zombie table buckets
/// and tag, and `k = stream` derives the seed of each independent random stream of a run from
/// the run's seed. Changing it changes every seeded result (golden pcap, netsim snapshot).
///
/// ```
/// // The first outputs of SplitMix64 seeded with 0, as splitmix64.c prints them.
/// assert_eq!(zl_core::splitmix64(0, 1), 0xe220_a839_7b1d_cdaf);
/// assert_eq!(zl_core::splitmix64(0, 2), 0x6e78_9e6a_a1b9_65f4);
/// ```
#[inline]
pub const fn splitmix64(seed: u64, k: u64) -> u64 {
    let mut z = seed.wrapping_add(k.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ecn_round_trips_all_codepoints() {
        for b in 0..4u8 {
            assert_eq!(Ecn::from_bits(b).bits(), b);
        }
        assert!(!Ecn::NotEct.is_ecn_capable());
        assert!(Ecn::Ect0.is_ecn_capable() && Ecn::Ect1.is_ecn_capable());
        assert!(Ecn::Ce.is_ecn_capable());
    }

    #[test]
    fn nanos_conversions_and_saturation() {
        assert_eq!(Nanos::from_millis(16).as_nanos(), 16_000_000);
        assert_eq!(Nanos::from_secs_f64(1.5), Nanos(1_500_000_000));
        assert_eq!(Nanos::from_secs_f64(-1.0), Nanos::ZERO);
        assert_eq!(Nanos(5) - Nanos(7), Nanos::ZERO);
        assert_eq!(Color::Red.index(), 2);
    }
}
