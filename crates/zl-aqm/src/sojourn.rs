//! Per-color buffer management by average sojourn time (Maeda, Yasuoka, Katto, Okubo,
//! "Buffer Management with Delay Constraints for Differentiated Services"),
//! docs/algorithms/sojourn.md.
//!
//! STEP 1, at each arrival: `avg_time = (1 - w) * avg_time + w * current_time`.
//! STEP 2, for the arriving packet of color `c`:
//! `avg_time < min_th[c]`: enqueue; `< max_th[c]`: drop with the constant probability `p[c]`;
//! otherwise drop.
//!
//! Decided (docs/algorithms/sojourn.md): `current_time` is `now - enqueue time` of the packet at
//! the head of this class queue when the new packet arrives, 0 when the queue is empty; it grows
//! while the scheduler serves other classes, which is what the paper relies on.
//! Decided here: `w` defaults to 0.002 (the paper gives no value; RED's customary weight);
//! `avg_time >= max_th` is a forced drop; `ecn` (mark instead of early drop) defaults to off,
//! since the point is to keep the queue, hence the sojourn, short.
//!
//! Units: thresholds in milliseconds in config, nanoseconds at run time; `p` dimensionless.
//! Eq. (3.1) derives a time threshold from a RED packet threshold:
//! `threshold_time = packet_size / link_rate * RED_threshold_packets`
//! ([`threshold_time_from_packets`]).

use serde::{Deserialize, Serialize};

use crate::check;
use crate::{
    early_verdict, happens, Aqm, AqmConfigError, Arrival, Color, Nanos, QueueView, Verdict,
};

/// Eq. (3.1): the sojourn threshold, in milliseconds, equivalent to `packets` packets of
/// `packet_bytes` bytes on a `link_rate_bps` link.
pub fn threshold_time_from_packets(packet_bytes: u32, link_rate_bps: u64, packets: f64) -> f64 {
    packet_bytes as f64 * 8.0 / link_rate_bps as f64 * packets * 1e3
}

/// One color's thresholds and drop probability.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SojournColorParams {
    /// Below this average sojourn, in ms, every packet is enqueued.
    pub min_th_ms: f64,
    /// From this average sojourn, in ms, every packet is dropped; `> min_th_ms`.
    pub max_th_ms: f64,
    /// Constant drop probability between the thresholds, `0 <= p <= 1`.
    pub p: f64,
}

impl SojournColorParams {
    /// One color's thresholds (ms) and probability.
    pub const fn new(min_th_ms: f64, max_th_ms: f64, p: f64) -> Self {
        SojournColorParams {
            min_th_ms,
            max_th_ms,
            p,
        }
    }
}

/// Parameters in config units. Defaults: table 2 (setting 1), identical for AF1 and AF2.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SojournParams {
    /// EWMA weight of `avg_time`, `0 < w <= 1`. Default 0.002.
    pub w: f64,
    /// Green (AFx1): default 16 / 32 ms, 0.01.
    pub green: SojournColorParams,
    /// Yellow (AFx2): default 8 / 16 ms, 0.10.
    pub yellow: SojournColorParams,
    /// Red (AFx3): default 4 / 8 ms, 0.20.
    pub red: SojournColorParams,
    /// Mark markable packets instead of early-dropping them. Default off.
    pub ecn: bool,
}

impl Default for SojournParams {
    fn default() -> Self {
        SojournParams::setting1()
    }
}

impl SojournParams {
    /// Table 2 (setting 1), for AF1 and AF2 alike.
    pub fn setting1() -> Self {
        SojournParams {
            w: 0.002,
            green: SojournColorParams::new(16.0, 32.0, 0.01),
            yellow: SojournColorParams::new(8.0, 16.0, 0.10),
            red: SojournColorParams::new(4.0, 8.0, 0.20),
            ecn: false,
        }
    }

    /// Table 3 (setting 2), AF1: stricter yellow and red.
    pub fn setting2_af1() -> Self {
        SojournParams {
            green: SojournColorParams::new(16.0, 32.0, 0.01),
            yellow: SojournColorParams::new(4.0, 8.0, 0.20),
            red: SojournColorParams::new(2.0, 4.0, 0.20),
            ..SojournParams::setting1()
        }
    }

    /// Table 3 (setting 2), AF2: every color 16 / 32 ms, 0.01.
    pub fn setting2_af2() -> Self {
        let g = SojournColorParams::new(16.0, 32.0, 0.01);
        SojournParams {
            green: g,
            yellow: g,
            red: g,
            ..SojournParams::setting1()
        }
    }

    /// Checks every parameter.
    pub fn validate(&self) -> Result<SojournConfig, AqmConfigError> {
        let w = check::unit_open_closed("w", self.w)?;
        let names = [
            ("green.min_th_ms", "green.max_th_ms", "green.p"),
            ("yellow.min_th_ms", "yellow.max_th_ms", "yellow.p"),
            ("red.min_th_ms", "red.max_th_ms", "red.p"),
        ];
        let mut colors = [ColorThresholds::default(); 3];
        for ((c, (min_name, max_name, p_name)), out) in [self.green, self.yellow, self.red]
            .iter()
            .zip(names)
            .zip(colors.iter_mut())
        {
            let min = check::non_negative(min_name, c.min_th_ms)?;
            check::ordered(max_name, min_name, min, c.max_th_ms)?;
            let p = check::unit_closed(p_name, c.p)?;
            *out = ColorThresholds {
                min_th_ns: min * 1e6,
                max_th_ns: c.max_th_ms * 1e6,
                p,
            };
        }
        Ok(SojournConfig {
            w,
            colors,
            ecn: self.ecn,
        })
    }
}

/// One color's validated thresholds, in nanoseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ColorThresholds {
    /// Below this average sojourn, ns, nothing is dropped.
    pub min_th_ns: f64,
    /// From this average sojourn, ns, every packet is dropped.
    pub max_th_ns: f64,
    /// Drop probability between the thresholds.
    pub p: f64,
}

/// Validated constants, indexed by [`Color::index`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SojournConfig {
    /// EWMA weight of the average sojourn.
    pub w: f64,
    /// Thresholds per color, indexed by `Color::index`.
    pub colors: [ColorThresholds; 3],
    /// Mark markable packets instead of dropping them on early decisions.
    pub ecn: bool,
}

impl SojournConfig {
    /// The thresholds of `color`.
    pub fn thresholds(&self, color: Color) -> &ColorThresholds {
        &self.colors[color.index()]
    }
}

/// Runtime state: the class queue's average sojourn.
#[derive(Clone, Debug)]
pub struct Sojourn {
    cfg: SojournConfig,
    /// `avg_time`, nanoseconds.
    avg_ns: f64,
}

impl Sojourn {
    /// Takes over `old`'s running state, keeping this policy's parameters (a live
    /// reconfiguration: `AqmPolicy::inherit_state`).
    pub fn inherit_state(&mut self, old: &Sojourn) {
        self.avg_ns = old.avg_ns;
    }

    /// A policy with an average sojourn of 0.
    pub fn new(cfg: SojournConfig) -> Self {
        Sojourn { cfg, avg_ns: 0.0 }
    }

    /// The validated constants.
    pub fn config(&self) -> &SojournConfig {
        &self.cfg
    }

    /// `avg_time` in milliseconds.
    pub fn avg_time_ms(&self) -> f64 {
        self.avg_ns * 1e-6
    }

    /// Sets `avg_time` (tests and simulators that hold it).
    pub fn set_avg_time_ms(&mut self, ms: f64) {
        self.avg_ns = ms * 1e6;
    }
}

impl Sojourn {
    /// STEP 1 with this arrival's `current_time`.
    #[inline]
    fn update_avg(&mut self, now: Nanos, queue: &QueueView) {
        let current = queue.head_enqueued_at.map_or(0, |t| (now - t).0) as f64;
        self.avg_ns += self.cfg.w * (current - self.avg_ns);
    }
}

impl Aqm for Sojourn {
    fn decide<R: rand::RngCore + ?Sized>(&mut self, a: &Arrival<'_>, rng: &mut R) -> Verdict {
        self.update_avg(a.now, a.queue);
        let th = self.cfg.thresholds(a.pkt.color);
        if self.avg_ns < th.min_th_ns {
            Verdict::Enqueue
        } else if self.avg_ns >= th.max_th_ns {
            Verdict::ForcedDrop
        } else if happens(rng, th.p) {
            early_verdict(self.cfg.ecn, a.pkt)
        } else {
            Verdict::Enqueue
        }
    }

    /// `avg_time` counts tail-dropped arrivals too (STEP 1 runs at each arrival).
    fn on_tail_drop(&mut self, a: &Arrival<'_>) {
        self.update_avg(a.now, a.queue);
    }
}
