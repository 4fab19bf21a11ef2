//! Exponential nonlinear RED (Kousaka, "Effect of the packet drop probability with a
//! nonlinearity on TCP/RED"), eq. (1)-(2):
//! docs/algorithms/nonlinear-red.md.
//!
//! ```text
//! avg <- (1 - w_q) * avg + w_q * q                                   (1)
//! x = (avg - q_min) / (q_max - q_min)
//! p = 0 if avg <= q_min;  1 if avg >= q_max;
//! p = p_max * x * exp(gamma * (x - 1)) otherwise                     (2)
//! ```
//!
//! `gamma >= 0`: 0 is linear RED without the count term; larger values keep `p` low over most
//! of `[q_min, q_max)` and raise it steeply to `p_max` at `x = 1`. As in the paper there is no
//! count term and no idle decay. Not ns-3's quadratic "NLRED" (Zhou et al. 2006,
//! `p = 1.5 max_p x^2`): that one is not implemented here.
//!
//! Units: `q_min`, `q_max` in packets (or bytes with `unit = "bytes"`), the rest dimensionless.
//! Decided: `avg` is updated with this arrival's `q` before `p` is computed (RED's order);
//! `avg >= q_max` is a forced drop (`p = 1`), `ecn` defaults to off (the paper drops, and the
//! 1-D model of [`crate::nonlinear_model`] assumes drops).

use serde::{Deserialize, Serialize};

use crate::check;
use crate::red::QueueUnit;
use crate::{early_verdict, happens, Aqm, AqmConfigError, Arrival, QueueView, Verdict};

/// Parameters in config units (defaults: the paper's table 2).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NonlinearRedParams {
    /// EWMA weight, `0 < w_q <= 1`. Default 8.31e-5.
    pub w_q: f64,
    /// `p` at `x = 1`, `0 < p_max <= 1`. Default 0.02.
    pub p_max: f64,
    /// Lower threshold, `>= 0`. Default 30 packets.
    pub q_min: f64,
    /// Upper threshold, `> q_min`. Default 90 packets.
    pub q_max: f64,
    /// Nonlinearity, `0 <= gamma <= 1000`. Default 5 (one of the paper's figure values).
    pub gamma: f64,
    /// Mark markable packets instead of dropping them on early decisions. Default off.
    pub ecn: bool,
    /// Default packets.
    pub unit: QueueUnit,
}

impl Default for NonlinearRedParams {
    fn default() -> Self {
        NonlinearRedParams {
            w_q: 8.31e-5,
            p_max: 0.02,
            q_min: 30.0,
            q_max: 90.0,
            gamma: 5.0,
            ecn: false,
            unit: QueueUnit::Packets,
        }
    }
}

impl NonlinearRedParams {
    /// Checks every parameter.
    pub fn validate(&self) -> Result<NonlinearRedConfig, AqmConfigError> {
        let w_q = check::unit_open_closed("w_q", self.w_q)?;
        let p_max = check::unit_open_closed("p_max", self.p_max)?;
        let q_min = check::non_negative("q_min", self.q_min)?;
        check::ordered("q_max", "q_min", q_min, self.q_max)?;
        if !(0.0..=1000.0).contains(&self.gamma) {
            return Err(check::err("gamma", self.gamma, "0 <= gamma <= 1000"));
        }
        Ok(NonlinearRedConfig {
            w_q,
            p_max,
            q_min,
            q_max: self.q_max,
            gamma: self.gamma,
            ecn: self.ecn,
            unit: self.unit,
        })
    }
}

/// Validated constants.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NonlinearRedConfig {
    /// EWMA weight of the average queue.
    pub w_q: f64,
    /// `p` at `x = 1`.
    pub p_max: f64,
    /// Lower threshold, in `unit`s.
    pub q_min: f64,
    /// Upper threshold, in `unit`s.
    pub q_max: f64,
    /// Nonlinearity of eq. (2).
    pub gamma: f64,
    /// Mark markable packets instead of dropping them on early decisions.
    pub ecn: bool,
    /// What the thresholds count.
    pub unit: QueueUnit,
}

impl NonlinearRedConfig {
    /// Eq. (2): the drop probability at average `avg`.
    pub fn probability(&self, avg: f64) -> f64 {
        exponential_probability(avg, self.q_min, self.q_max, self.p_max, self.gamma)
    }
}

/// Eq. (2) as a pure function (the AQM and the 1-D model share it).
pub fn exponential_probability(avg: f64, q_min: f64, q_max: f64, p_max: f64, gamma: f64) -> f64 {
    if avg <= q_min {
        0.0
    } else if avg >= q_max {
        1.0
    } else {
        let x = (avg - q_min) / (q_max - q_min);
        p_max * x * (gamma * (x - 1.0)).exp()
    }
}

/// Runtime state.
#[derive(Clone, Debug)]
pub struct NonlinearRed {
    cfg: NonlinearRedConfig,
    avg: f64,
}

impl NonlinearRed {
    /// A policy with `avg = 0`.
    pub fn new(cfg: NonlinearRedConfig) -> Self {
        NonlinearRed { cfg, avg: 0.0 }
    }

    /// The validated constants.
    pub fn config(&self) -> &NonlinearRedConfig {
        &self.cfg
    }

    /// The average queue after the latest arrival.
    pub fn avg(&self) -> f64 {
        self.avg
    }

    /// Sets the average (tests and simulators that hold it).
    pub fn set_avg(&mut self, avg: f64) {
        self.avg = avg;
    }
}

impl NonlinearRed {
    /// Eq. (1) with this arrival's `q`.
    #[inline]
    fn update_avg(&mut self, queue: &QueueView) {
        let q = self.cfg.unit.measure(queue);
        self.avg += self.cfg.w_q * (q - self.avg);
    }
}

impl Aqm for NonlinearRed {
    fn decide<R: rand::RngCore + ?Sized>(&mut self, a: &Arrival<'_>, rng: &mut R) -> Verdict {
        self.update_avg(a.queue);
        if self.avg >= self.cfg.q_max {
            Verdict::ForcedDrop
        } else if happens(rng, self.cfg.probability(self.avg)) {
            early_verdict(self.cfg.ecn, a.pkt)
        } else {
            Verdict::Enqueue
        }
    }

    /// The average counts tail-dropped arrivals too (as RED's).
    fn on_tail_drop(&mut self, a: &Arrival<'_>) {
        self.update_avg(a.queue);
    }
}
