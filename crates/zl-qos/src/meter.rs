//! Three-color meters: RFC 2697 srTCM and RFC 2698 trTCM, color-blind and color-aware.
//!
//! Paper: Maeda et al. (their pipeline, docs/algorithms/diffserv.md) mark each AF class with the
//! trTCM; the srTCM is provided beside it. Units: rates in bits/s, burst sizes in bytes, packet
//! sizes in bytes (whatever length the caller meters: the data plane passes the IP length), time in
//! nanoseconds passed in by the caller.
//!
//! Buckets are byte-exact integer token buckets (see `bucket.rs` for the derivation of the
//! bit·ns/s unit): a packet of `B` bytes conforms to a bucket holding `T` tokens iff `T >= B`
//! bytes, exactly as RFC 2697 §4 / RFC 2698 §4 write it, and no rounding accumulates over time.
//!
//! Both buckets start full (RFC 2697 §3, RFC 2698 §3).
//!
//! decided: every burst size must be non-zero. RFC 2697 allows one of CBS/EBS to be zero;
//! we reject it because a zero bucket makes a color unreachable, which in our configs has
//! always been a typo.

use serde::{Deserialize, Serialize};
use zl_core::{Color, Nanos};

use crate::bucket::{self, credit, elapsed, units, Bucket, MAX_BURST_BYTES, MAX_RATE_BPS};
use crate::error::QosConfigError;

/// Whether the meter looks at the packet's incoming color (RFC 2697/2698 §1).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ColorMode {
    /// The incoming color is ignored.
    #[default]
    ColorBlind,
    /// A packet is never metered better than its incoming color.
    ColorAware,
}

/// Meter configuration in human units (serde, tag = "kind").
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum MeterParams {
    /// RFC 2697 single-rate three-color marker.
    Srtcm {
        /// Committed information rate, bit/s.
        cir_bps: u64,
        /// Committed burst size, bytes.
        cbs_bytes: u64,
        /// Excess burst size, bytes.
        ebs_bytes: u64,
        /// Color-blind (default) or color-aware.
        #[serde(default)]
        mode: ColorMode,
    },
    /// RFC 2698 two-rate three-color marker.
    Trtcm {
        /// Committed information rate, bit/s.
        cir_bps: u64,
        /// Committed burst size, bytes.
        cbs_bytes: u64,
        /// Peak information rate, bit/s (`>= cir_bps`).
        pir_bps: u64,
        /// Peak burst size, bytes.
        pbs_bytes: u64,
        /// Color-blind (default) or color-aware.
        #[serde(default)]
        mode: ColorMode,
    },
}

fn check_rate(key: &'static str, v: u64) -> Result<(), QosConfigError> {
    if v == 0 || v > MAX_RATE_BPS {
        return Err(QosConfigError::new(
            key,
            format!("{v} bits/s is outside 1 ..= {MAX_RATE_BPS}"),
        ));
    }
    Ok(())
}

fn check_burst(key: &'static str, v: u64) -> Result<(), QosConfigError> {
    if v == 0 || v > MAX_BURST_BYTES {
        return Err(QosConfigError::new(
            key,
            format!("{v} bytes is outside 1 ..= {MAX_BURST_BYTES} (zero bursts are rejected)"),
        ));
    }
    Ok(())
}

impl MeterParams {
    /// Validates and builds the meter (buckets full, clock at `Nanos::ZERO`).
    pub fn build(&self) -> Result<Meter, QosConfigError> {
        match *self {
            MeterParams::Srtcm {
                cir_bps,
                cbs_bytes,
                ebs_bytes,
                mode,
            } => {
                check_rate("cir_bps", cir_bps)?;
                check_burst("cbs_bytes", cbs_bytes)?;
                check_burst("ebs_bytes", ebs_bytes)?;
                Ok(Meter::Srtcm(Srtcm::new(
                    cir_bps, cbs_bytes, ebs_bytes, mode,
                )))
            }
            MeterParams::Trtcm {
                cir_bps,
                cbs_bytes,
                pir_bps,
                pbs_bytes,
                mode,
            } => {
                check_rate("cir_bps", cir_bps)?;
                check_rate("pir_bps", pir_bps)?;
                check_burst("cbs_bytes", cbs_bytes)?;
                check_burst("pbs_bytes", pbs_bytes)?;
                if pir_bps < cir_bps {
                    return Err(QosConfigError::new(
                        "pir_bps",
                        format!("pir_bps ({pir_bps}) must be >= cir_bps ({cir_bps}) (RFC 2698 §2)"),
                    ));
                }
                Ok(Meter::Trtcm(Trtcm::new(
                    cir_bps, cbs_bytes, pir_bps, pbs_bytes, mode,
                )))
            }
        }
    }
}

/// RFC 2697 srTCM: bucket C (depth CBS) and E (depth EBS), both fed at CIR; tokens that
/// overflow C go to E (§3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Srtcm {
    cir_bps: u64,
    c: Bucket,
    e: Bucket,
    mode: ColorMode,
    last: Nanos,
}

impl Srtcm {
    /// Unvalidated constructor; use [`MeterParams::build`] for config input.
    pub fn new(cir_bps: u64, cbs_bytes: u64, ebs_bytes: u64, mode: ColorMode) -> Self {
        Srtcm {
            cir_bps,
            c: Bucket::full(cbs_bytes),
            e: Bucket::full(ebs_bytes),
            mode,
            last: Nanos::ZERO,
        }
    }

    #[inline]
    fn refill(&mut self, now: Nanos) {
        let dt = elapsed(&mut self.last, now);
        if dt != 0 {
            let room = (self.c.depth - self.c.tokens) + (self.e.depth - self.e.tokens);
            let overflow = self.c.fill(credit(self.cir_bps, dt, room));
            self.e.fill(overflow);
        }
    }

    /// Colors a packet of `len` bytes arriving at `now` (RFC 2697 §4). `pre` is the incoming
    /// color, ignored in color-blind mode.
    #[inline]
    pub fn color(&mut self, now: Nanos, len: u32, pre: Color) -> Color {
        self.refill(now);
        let b = units(len as u64);
        let pre = match self.mode {
            ColorMode::ColorBlind => Color::Green,
            ColorMode::ColorAware => pre,
        };
        if pre == Color::Green && self.c.take(b) {
            Color::Green
        } else if pre != Color::Red && self.e.take(b) {
            Color::Yellow
        } else {
            Color::Red
        }
    }

    /// Tokens now in C and E, in whole bytes (for tests and stats).
    pub fn tokens_bytes(&self) -> (u64, u64) {
        (
            self.c.tokens / bucket::UNITS_PER_BYTE,
            self.e.tokens / bucket::UNITS_PER_BYTE,
        )
    }
}

/// RFC 2698 trTCM: bucket P (depth PBS) fed at PIR and C (depth CBS) fed at CIR (§3).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trtcm {
    cir_bps: u64,
    pir_bps: u64,
    c: Bucket,
    p: Bucket,
    mode: ColorMode,
    last: Nanos,
}

impl Trtcm {
    /// Unvalidated constructor; use [`MeterParams::build`] for config input.
    pub fn new(
        cir_bps: u64,
        cbs_bytes: u64,
        pir_bps: u64,
        pbs_bytes: u64,
        mode: ColorMode,
    ) -> Self {
        Trtcm {
            cir_bps,
            pir_bps,
            c: Bucket::full(cbs_bytes),
            p: Bucket::full(pbs_bytes),
            mode,
            last: Nanos::ZERO,
        }
    }

    #[inline]
    fn refill(&mut self, now: Nanos) {
        let dt = elapsed(&mut self.last, now);
        if dt != 0 {
            self.c.accrue(self.cir_bps, dt);
            self.p.accrue(self.pir_bps, dt);
        }
    }

    /// Colors a packet of `len` bytes arriving at `now` (RFC 2698 §4). `pre` is the incoming
    /// color, ignored in color-blind mode.
    #[inline]
    pub fn color(&mut self, now: Nanos, len: u32, pre: Color) -> Color {
        self.refill(now);
        let b = units(len as u64);
        let pre = match self.mode {
            ColorMode::ColorBlind => Color::Green,
            ColorMode::ColorAware => pre,
        };
        if pre == Color::Red || !self.p.has(b) {
            Color::Red
        } else if pre == Color::Yellow || !self.c.has(b) {
            self.p.tokens -= b;
            Color::Yellow
        } else {
            self.p.tokens -= b;
            self.c.tokens -= b;
            Color::Green
        }
    }

    /// Tokens now in C and P, in whole bytes (for tests and stats).
    pub fn tokens_bytes(&self) -> (u64, u64) {
        (
            self.c.tokens / bucket::UNITS_PER_BYTE,
            self.p.tokens / bucket::UNITS_PER_BYTE,
        )
    }
}

/// Either meter, for static dispatch from config.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Meter {
    /// RFC 2697 single-rate three-color marker.
    Srtcm(Srtcm),
    /// RFC 2698 two-rate three-color marker.
    Trtcm(Trtcm),
}

impl Meter {
    /// Colors a packet of `len` bytes arriving at `now` with incoming color `pre`.
    #[inline]
    pub fn color(&mut self, now: Nanos, len: u32, pre: Color) -> Color {
        match self {
            Meter::Srtcm(m) => m.color(now, len, pre),
            Meter::Trtcm(m) => m.color(now, len, pre),
        }
    }
}
