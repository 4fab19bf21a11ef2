//! Egress shaper: a token bucket at the link rate, charging each packet its size on the wire.
//!
//! Purpose (Maeda et al., figure 1; docs/algorithms/shaper.md): the router's output must run at the
//! bottleneck rate so that queues build inside the router, where the per-class AQM and the
//! scheduler act, rather than in a NIC ring we cannot see. Units: rate in bits/s; sizes in bytes;
//! time in ns passed in.
//!
//! A packet of `len` bytes costs `len + overhead_bytes` on the wire. The default overhead is
//! Ethernet's 24 bytes: preamble + SFD 8, inter-frame gap 12, FCS 4 (`len` is then the frame
//! without FCS, as a NIC hands it over). The bucket is integer-exact (`bucket.rs`): sending
//! each packet exactly at [`Shaper::next_send_time`] gives exactly `rate_bps` over any run,
//! because the credit earned beyond a packet's cost within its last nanosecond is kept.
//!
//! A packet whose wire size exceeds the bucket depth could never be sent; [`ShaperParams::build`]
//! therefore sizes the depth to at least `max_packet_bytes + overhead`, and callers drop
//! larger packets on arrival ([`Shaper::fits`]).

use serde::{Deserialize, Serialize};
use zl_core::Nanos;

use crate::bucket::{
    elapsed, time_to_earn, units, Bucket, MAX_BURST_BYTES, MAX_RATE_BPS, UNITS_PER_BYTE,
};
use crate::error::QosConfigError;

/// Ethernet per-packet overhead: preamble + SFD 8, IFG 12, FCS 4.
pub const ETHERNET_OVERHEAD_BYTES: u32 = 24;

fn default_overhead() -> u32 {
    ETHERNET_OVERHEAD_BYTES
}

fn default_max_packet() -> u32 {
    1514
}

/// Shaper configuration in human units.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShaperParams {
    /// Egress rate in bits/s, counting the wire overhead.
    pub rate_bps: u64,
    /// Bucket depth in wire bytes; `None` = one largest packet (no burst beyond the rate).
    #[serde(default)]
    pub burst_bytes: Option<u64>,
    /// Per-packet overhead added to each packet's length (default 24, Ethernet).
    #[serde(default = "default_overhead")]
    pub overhead_bytes: u32,
    /// Largest packet (as passed in `len`) the shaper must be able to send (default 1514).
    #[serde(default = "default_max_packet")]
    pub max_packet_bytes: u32,
}

impl ShaperParams {
    /// Validates the parameters and builds the shaper.
    pub fn build(&self) -> Result<Shaper, QosConfigError> {
        if self.rate_bps == 0 || self.rate_bps > MAX_RATE_BPS {
            return Err(QosConfigError::new(
                "rate_bps",
                format!("{} bits/s is outside 1 ..= {MAX_RATE_BPS}", self.rate_bps),
            ));
        }
        if self.max_packet_bytes == 0 {
            return Err(QosConfigError::new("max_packet_bytes", "must be > 0"));
        }
        let largest = self.max_packet_bytes as u64 + self.overhead_bytes as u64;
        // Checked before burst_bytes, whose range starts at `largest`: a huge overhead would
        // otherwise be reported as an empty burst_bytes range.
        if largest > MAX_BURST_BYTES {
            return Err(QosConfigError::new(
                "overhead_bytes",
                format!(
                    "{} bytes is too large: max_packet_bytes ({}) + overhead_bytes must be at \
                     most {MAX_BURST_BYTES}",
                    self.overhead_bytes, self.max_packet_bytes
                ),
            ));
        }
        let depth = self.burst_bytes.unwrap_or(largest);
        if depth < largest || depth > MAX_BURST_BYTES {
            return Err(QosConfigError::new(
                "burst_bytes",
                format!(
                    "{depth} bytes is outside {largest} (max_packet_bytes + overhead_bytes) \
                     ..= {MAX_BURST_BYTES}"
                ),
            ));
        }
        Ok(Shaper::new(self.rate_bps, depth, self.overhead_bytes))
    }
}

/// The shaper's runtime state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shaper {
    rate_bps: u64,
    overhead: u64,
    bucket: Bucket,
    last: Nanos,
    /// The largest wire size the bucket can ever hold, bytes: [`Shaper::fits`] in one compare
    /// (no multiply per arrival).
    max_wire: u64,
}

impl Shaper {
    /// Unvalidated constructor (bucket full at time zero); use [`ShaperParams::build`] for
    /// config input.
    pub fn new(rate_bps: u64, burst_bytes: u64, overhead_bytes: u32) -> Self {
        let bucket = Bucket::full(burst_bytes);
        Shaper {
            rate_bps,
            overhead: overhead_bytes as u64,
            max_wire: max_wire(bucket.depth),
            bucket,
            last: Nanos::ZERO,
        }
    }

    /// The configured rate, bit/s.
    pub fn rate_bps(&self) -> u64 {
        self.rate_bps
    }

    /// Bytes a packet of `len` occupies on the wire.
    #[inline]
    pub fn wire_bytes(&self, len: u32) -> u64 {
        len as u64 + self.overhead
    }

    /// True when a packet of `len` bytes can ever pass (its wire size fits the bucket:
    /// `units(wire_bytes(len)) <= depth`, compared in bytes).
    #[inline]
    pub fn fits(&self, len: u32) -> bool {
        self.wire_bytes(len) <= self.max_wire
    }

    #[inline]
    fn refill(&mut self, now: Nanos) {
        let dt = elapsed(&mut self.last, now);
        if dt != 0 {
            self.bucket.accrue(self.rate_bps, dt);
        }
    }

    /// The earliest time a packet of `len` bytes may leave; `now` when it may leave now,
    /// [`Nanos::MAX`] when it never can (see [`Shaper::fits`]).
    #[inline]
    pub fn next_send_time(&self, now: Nanos, len: u32) -> Nanos {
        let cost = units(self.wire_bytes(len));
        if cost > self.bucket.depth {
            return Nanos::MAX;
        }
        let dt = now.0.saturating_sub(self.last.0);
        let tokens = self.bucket.accrued(self.rate_bps, dt);
        if tokens >= cost {
            now
        } else {
            Nanos(
                now.0
                    .max(self.last.0)
                    .saturating_add(time_to_earn(self.rate_bps, cost - tokens)),
            )
        }
    }

    /// Sends a packet of `len` bytes at `now` if the bucket holds its wire size; returns
    /// whether it was sent (and charged).
    #[inline]
    pub fn try_send(&mut self, now: Nanos, len: u32) -> bool {
        self.refill(now);
        self.bucket.take(units(self.wire_bytes(len)))
    }

    /// [`Shaper::try_send`] for each of `lens` in turn, up to the first it refuses: how many
    /// it let go, and when it lets the refused one go ([`Shaper::next_send_time`]; `None`
    /// when none was refused). Exactly those calls: the bucket refills once, before the
    /// first, as the later ones at the same `now` add nothing (none when `lens` is empty).
    #[inline(always)]
    pub fn send_run(
        &mut self,
        now: Nanos,
        lens: impl IntoIterator<Item = u32>,
    ) -> (u64, Option<Nanos>) {
        let mut lens = lens.into_iter().peekable();
        if lens.peek().is_none() {
            return (0, None);
        }
        self.refill(now);
        if self.bucket.tokens == u64::MAX {
            return self.send_run_in_units(now, lens);
        }
        // In whole bytes: `tokens >= units(w)` exactly when `tokens / UNITS_PER_BYTE >= w`
        // (and a `w` whose units saturate exceeds every `tokens` but `u64::MAX`), so each
        // take is a compare of the wire bytes with the bytes left, no multiply.
        let mut left = self.bucket.tokens / UNITS_PER_BYTE;
        let whole = left;
        let mut sent = 0u64;
        let refused = lens.find(|&len| {
            let w = self.wire_bytes(len);
            let fits = w <= left;
            if fits {
                left -= w;
            }
            sent += u64::from(fits);
            !fits
        });
        self.bucket.tokens -= (whole - left) * UNITS_PER_BYTE;
        (sent, refused.map(|len| self.next_send_time(now, len)))
    }

    /// [`Shaper::send_run`] after the refill, one take of each packet's units at a time (a
    /// full bucket of `u64::MAX` units, which only an unvalidated depth reaches, is where the
    /// byte form differs: such a bucket takes a saturated cost).
    #[cold]
    fn send_run_in_units(
        &mut self,
        now: Nanos,
        mut lens: impl Iterator<Item = u32>,
    ) -> (u64, Option<Nanos>) {
        let mut sent = 0u64;
        let refused = lens.find(|&len| {
            let fits = self.bucket.take(units(self.wire_bytes(len)));
            sent += u64::from(fits);
            !fits
        });
        (sent, refused.map(|len| self.next_send_time(now, len)))
    }
}

/// The largest `w` with `units(w) <= depth`: `depth / UNITS_PER_BYTE` (`units` is exact
/// below the saturation, and a saturated cost, `u64::MAX`, exceeds every depth but
/// `u64::MAX`, which every cost fits).
fn max_wire(depth: u64) -> u64 {
    if depth == u64::MAX {
        u64::MAX
    } else {
        depth / UNITS_PER_BYTE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `fits` in bytes is `units(wire_bytes(len)) <= depth` (the form it replaced) for every
    /// depth a bucket can have (saturated too) and lengths around each boundary.
    #[test]
    fn fits_in_bytes_is_fits_in_units() {
        let depths = [
            1u64,
            24,
            1538,
            5376,
            MAX_BURST_BYTES,
            MAX_BURST_BYTES + 1,
            2_305_843_009,
        ]
        .into_iter()
        .chain([
            u64::MAX / UNITS_PER_BYTE,
            u64::MAX / UNITS_PER_BYTE + 1,
            u64::MAX,
        ]);
        for burst in depths {
            for overhead in [0u32, 24, u32::MAX / 2, u32::MAX] {
                let s = Shaper::new(1_000_000, burst, overhead);
                let edge = burst.saturating_sub(overhead as u64).min(u32::MAX as u64) as u32;
                let lens = [0, 1, 64, 1514, u32::MAX - 1, u32::MAX]
                    .into_iter()
                    .chain((0..=4).map(|d| edge.saturating_sub(2).saturating_add(d)));
                for len in lens {
                    let by_units = units(s.wire_bytes(len)) <= s.bucket.depth;
                    assert_eq!(
                        s.fits(len),
                        by_units,
                        "burst {burst} overhead {overhead} len {len}"
                    );
                }
            }
        }
    }

    /// `overhead_bytes = 4294967295` is reported on `overhead_bytes`, not as "`burst_bytes`
    /// ... 4294968809 is outside 4294968809 ..= 2147483648", an empty range naming the wrong
    /// key.
    #[test]
    fn a_huge_overhead_is_reported_on_overhead_bytes() {
        let p = ShaperParams {
            rate_bps: 1_000_000,
            burst_bytes: None,
            overhead_bytes: u32::MAX,
            max_packet_bytes: 1514,
        };
        let e = p.build().unwrap_err().to_string();
        assert!(
            e.contains("overhead_bytes") && !e.contains("burst_bytes"),
            "{e}"
        );
        assert!(e.contains("4294967295"), "{e}");
    }

    #[test]
    fn back_to_back_at_next_send_time() {
        // 8 Mbit/s, no overhead, 1000-byte packets: one every 1 ms once the burst is spent.
        let mut s = Shaper::new(8_000_000, 1000, 0);
        assert!(s.try_send(Nanos::ZERO, 1000));
        assert!(!s.try_send(Nanos::ZERO, 1000));
        let t = s.next_send_time(Nanos::ZERO, 1000);
        assert_eq!(t, Nanos::from_millis(1));
        assert!(!s.try_send(Nanos(t.0 - 1), 1000));
        assert!(s.try_send(t, 1000));
    }

    #[test]
    fn absurd_lengths_never_pass_and_never_panic() {
        let mut s = Shaper::new(1_000_000, MAX_BURST_BYTES, u32::MAX / 2);
        assert!(!s.fits(u32::MAX));
        assert!(!s.try_send(Nanos(u64::MAX), u32::MAX));
        assert_eq!(s.next_send_time(Nanos::ZERO, u32::MAX), Nanos::MAX);
    }

    #[test]
    fn rejects_burst_below_one_packet() {
        let p = ShaperParams {
            rate_bps: 1_000_000,
            burst_bytes: Some(100),
            overhead_bytes: 24,
            max_packet_bytes: 1514,
        };
        assert_eq!(p.build().unwrap_err().key, "burst_bytes");
    }
}
