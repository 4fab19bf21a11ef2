//! The integer token bucket shared by the meters and the shaper.
//!
//! Units: a rate is in bits/s and time in nanoseconds, so `rate_bps * dt_ns` is a credit in
//! bit·ns/s. One bit is `1e9` of those units and one byte is [`UNITS_PER_BYTE`] = `8e9`.
//! Keeping the bucket in these units makes every refill exact: `dt` nanoseconds always add
//! exactly `rate_bps * dt` units, with no division and so no remainder to lose, and a run of
//! any length meters exactly `rate * elapsed` (RFC 2697 §3 / RFC 2698 §3 say tokens are added
//! "CIR times per second"; here the fraction of a token owed at each update is kept in the
//! low-order units rather than rounded away, so long runs do not drift).
//!
//! Range: the product is taken in `u128` and the bucket is capped at its depth before it is
//! stored back in `u64`, so a depth must fit in `u64` units: bursts up to [`MAX_BURST_BYTES`]
//! (2 GiB). Rates are validated to `1 ..= MAX_RATE_BPS`.

use zl_core::Nanos;

/// Credit units per byte: 8 bits × 1e9 (bit·ns/s per bit).
pub const UNITS_PER_BYTE: u64 = 8_000_000_000;

/// The largest burst (bucket depth) in bytes: `MAX_BURST_BYTES * UNITS_PER_BYTE < 2^64`.
pub const MAX_BURST_BYTES: u64 = 1 << 31;

/// The largest rate accepted, 10 Tbit/s.
pub const MAX_RATE_BPS: u64 = 10_000_000_000_000;

/// `bytes` as credit units, saturating: a packet too large to express (over 2.3 GB) costs
/// `u64::MAX`, more than any bucket holds (depths are at most `MAX_BURST_BYTES`), so it is
/// never conforming rather than a wrapped-around small cost.
#[inline]
pub(crate) const fn units(bytes: u64) -> u64 {
    bytes.saturating_mul(UNITS_PER_BYTE)
}

/// Credit earned at `rate_bps` over `dt_ns`, capped at `cap` (avoids u64 overflow for long
/// idle periods: the product is formed in u128).
#[inline]
pub(crate) fn credit(rate_bps: u64, dt_ns: u64, cap: u64) -> u64 {
    let c = rate_bps as u128 * dt_ns as u128;
    if c >= cap as u128 {
        cap
    } else {
        c as u64
    }
}

/// Nanoseconds until `missing` units accrue at `rate_bps` (rounded up, so the credit is
/// really there at that instant).
#[inline]
pub(crate) fn time_to_earn(rate_bps: u64, missing: u64) -> u64 {
    missing.div_ceil(rate_bps)
}

/// One bucket: `tokens` units out of `depth`, refilled at `rate_bps`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Bucket {
    pub tokens: u64,
    pub depth: u64,
}

impl Bucket {
    /// A full bucket of `depth_bytes` (RFC 2697/2698: "initially full").
    pub fn full(depth_bytes: u64) -> Self {
        let depth = units(depth_bytes);
        Bucket {
            tokens: depth,
            depth,
        }
    }

    /// Adds up to `add` units; returns what did not fit (the overflow srTCM passes to E).
    #[inline]
    pub fn fill(&mut self, add: u64) -> u64 {
        let room = self.depth - self.tokens;
        if add <= room {
            self.tokens += add;
            0
        } else {
            self.tokens = self.depth;
            add - room
        }
    }

    /// The tokens this bucket would hold after `dt_ns` at `rate_bps` (capped at the depth).
    #[inline]
    pub fn accrued(&self, rate_bps: u64, dt_ns: u64) -> u64 {
        self.tokens + credit(rate_bps, dt_ns, self.depth - self.tokens)
    }

    /// Refills for `dt_ns` at `rate_bps`, up to the depth (a lone bucket; srTCM's C passes
    /// its overflow on to E through [`Bucket::fill`] instead).
    #[inline]
    pub fn accrue(&mut self, rate_bps: u64, dt_ns: u64) {
        self.tokens = self.accrued(rate_bps, dt_ns);
    }

    /// Takes `cost` units if present.
    #[inline]
    pub fn take(&mut self, cost: u64) -> bool {
        if self.tokens >= cost {
            self.tokens -= cost;
            true
        } else {
            false
        }
    }

    #[inline]
    pub fn has(&self, cost: u64) -> bool {
        self.tokens >= cost
    }
}

/// Advances `last` to `now` and returns the elapsed nanoseconds; a `now` earlier than `last`
/// (clocks of two cores passed in out of order) counts as no time and leaves `last` alone.
#[inline]
pub(crate) fn elapsed(last: &mut Nanos, now: Nanos) -> u64 {
    if now > *last {
        let dt = now.0 - last.0;
        *last = now;
        dt
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credit_is_exact_and_capped() {
        // 1 Mbit/s for 1 ms = 1000 bits = 125 bytes.
        assert_eq!(credit(1_000_000, 1_000_000, u64::MAX), units(125));
        assert_eq!(credit(MAX_RATE_BPS, u64::MAX, 77), 77);
        assert_eq!(time_to_earn(3, 10), 4);
        assert_eq!(units(u32::MAX as u64), u64::MAX);
        assert!(units(MAX_BURST_BYTES) < u64::MAX);
    }

    #[test]
    fn fill_returns_overflow() {
        let mut b = Bucket::full(10);
        assert!(b.take(units(4)));
        assert_eq!(b.fill(units(6)), units(2));
        assert_eq!(b.tokens, b.depth);
    }
}
