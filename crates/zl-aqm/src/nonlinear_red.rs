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
//! Options for running it as the paper's authors most likely did, inside ns-2's `Queue/RED`
//! with only the probability function changed (ns-2.35 `queue/red.cc`; all off by default,
//! which is the paper's equations as written): `count_term` (ns-2's `modify_p`; ns-2 default
//! `wait`), `idle_packet_bytes` (ns-2's idle decay, `avg *= (1 - w_q)^m` with
//! `m = int(ptc * idle)`, `ptc = link rate / (8 mean_pktsize_)`, red.cc `enque`/`estimator`),
//! `spare_queue_packets` (ns-2 decides only when `qlen > 1`) and `gentle` (ns-2.35's default
//! `gentle_ true`: `p` ramps from `p_max` to 1 between `q_max` and `2 q_max`).
//!
//! Units: `q_min`, `q_max` in packets (or bytes with `unit = "bytes"`), the rest dimensionless.
//! Decided: `avg` is updated with this arrival's `q` before `p` is computed (RED's order);
//! `avg >= q_max` is a forced drop (`p = 1`), `ecn` defaults to off (the paper drops, and the
//! 1-D model of [`crate::nonlinear_model`] assumes drops).

use serde::{Deserialize, Serialize};

use crate::check;
use crate::red::{CountTerm, QueueUnit};
use crate::{early_verdict, happens, Aqm, AqmConfigError, Arrival, Nanos, QueueView, Verdict};

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
    /// Count term applied to `p` of eq. (2). Default `none` (the paper's equations).
    pub count_term: CountTerm,
    /// Idle decay as ns-2: the packet size (ns-2 `mean_pktsize_`) whose transmission time at the
    /// link rate counts one virtual arrival while the queue is empty. Default none (no decay).
    pub idle_packet_bytes: Option<u32>,
    /// An arrival finding at most this many packets queued is admitted undecided (ns-2:
    /// `qlen > 1`). Default none.
    pub spare_queue_packets: Option<u32>,
    /// ns-2's gentle mode above `q_max`. Default off (the paper: `p = 1` at `avg >= q_max`).
    pub gentle: bool,
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
            count_term: CountTerm::None,
            idle_packet_bytes: None,
            spare_queue_packets: None,
            gentle: false,
        }
    }
}

impl NonlinearRedParams {
    /// Checks every parameter; `link_rate_bps` (the egress rate) sets the idle decay's packet
    /// time when `idle_packet_bytes` is given.
    pub fn validate(&self, link_rate_bps: u64) -> Result<NonlinearRedConfig, AqmConfigError> {
        let w_q = check::unit_open_closed("w_q", self.w_q)?;
        let p_max = check::unit_open_closed("p_max", self.p_max)?;
        let q_min = check::non_negative("q_min", self.q_min)?;
        check::ordered("q_max", "q_min", q_min, self.q_max)?;
        if !(0.0..=1000.0).contains(&self.gamma) {
            return Err(check::err("gamma", self.gamma, "0 <= gamma <= 1000"));
        }
        let idle_packet_nanos = match self.idle_packet_bytes {
            None => None,
            Some(0) => return Err(check::err("idle_packet_bytes", 0, "idle_packet_bytes > 0")),
            Some(_) if link_rate_bps == 0 => {
                return Err(check::err(
                    "link_rate_bps",
                    0,
                    "link_rate_bps > 0 (the egress rate sets the idle decay)",
                ))
            }
            Some(b) => Some(b as f64 * 8.0 * 1e9 / link_rate_bps as f64),
        };
        Ok(NonlinearRedConfig {
            w_q,
            p_max,
            q_min,
            q_max: self.q_max,
            gamma: self.gamma,
            ecn: self.ecn,
            unit: self.unit,
            count_term: self.count_term,
            idle_packet_nanos,
            spare_queue_packets: self.spare_queue_packets,
            gentle: self.gentle,
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
    /// Count term applied to `p`.
    pub count_term: CountTerm,
    /// Transmission time (ns) of the idle-decay packet; `None`: no idle decay.
    pub idle_packet_nanos: Option<f64>,
    /// Arrivals to a queue of at most this many packets are admitted undecided.
    pub spare_queue_packets: Option<u32>,
    /// Gentle ramp above `q_max`.
    pub gentle: bool,
}

impl NonlinearRedConfig {
    /// Eq. (2): the drop probability at average `avg` (with the gentle ramp above `q_max` when
    /// configured).
    pub fn probability(&self, avg: f64) -> f64 {
        if self.gentle && avg >= self.q_max {
            let p = self.p_max + (1.0 - self.p_max) * (avg - self.q_max) / self.q_max;
            return p.min(1.0);
        }
        exponential_probability(avg, self.q_min, self.q_max, self.p_max, self.gamma)
    }

    /// True when `avg` is past the point where every arrival is dropped.
    fn forced(&self, avg: f64) -> bool {
        if self.gentle {
            avg >= 2.0 * self.q_max
        } else {
            avg >= self.q_max
        }
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
    /// Unmarked arrivals since the last drop (used by the count term).
    count: u32,
}

impl NonlinearRed {
    /// Takes over `old`'s running state, keeping this policy's parameters (a live
    /// reconfiguration: `AqmPolicy::inherit_state`).
    pub fn inherit_state(&mut self, old: &NonlinearRed) {
        self.avg = old.avg;
        self.count = old.count;
    }

    /// A policy with `avg = 0`.
    pub fn new(cfg: NonlinearRedConfig) -> Self {
        NonlinearRed {
            cfg,
            avg: 0.0,
            count: 0,
        }
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
    /// Eq. (1) with this arrival's `q`, after ns-2's idle decay when configured: the queue
    /// empty since `t0` counts `m = floor((now - t0) / s)` virtual arrivals of an empty queue
    /// (red.cc `m = int(edp_.ptc * (now - idletime_))`, an integer as there).
    #[inline]
    fn update_avg(&mut self, now: Nanos, queue: &QueueView) {
        if let (Some(s), Some(since)) = (self.cfg.idle_packet_nanos, queue.idle_since) {
            let m = ((now - since).0 as f64 / s).floor();
            if m >= 1.0 {
                self.avg *= (1.0 - self.cfg.w_q).powf(m);
            }
        }
        let q = self.cfg.unit.measure(queue);
        self.avg += self.cfg.w_q * (q - self.avg);
    }
}

impl Aqm for NonlinearRed {
    fn decide<R: rand::RngCore + ?Sized>(&mut self, a: &Arrival<'_>, rng: &mut R) -> Verdict {
        self.update_avg(a.now, a.queue);
        let spared = self
            .cfg
            .spare_queue_packets
            .is_some_and(|n| a.queue.len_packets <= n);
        if spared || self.avg <= self.cfg.q_min {
            self.count = 0;
            return Verdict::Enqueue;
        }
        if self.cfg.forced(self.avg) {
            self.count = 0;
            return Verdict::ForcedDrop;
        }
        let p = self.cfg.probability(self.avg);
        if happens(rng, self.cfg.count_term.apply(p, self.count)) {
            self.count = 0;
            early_verdict(self.cfg.ecn, a.pkt)
        } else {
            self.count = self.count.saturating_add(1);
            Verdict::Enqueue
        }
    }

    /// The average counts tail-dropped arrivals too (as RED's); a drop restarts the count
    /// (ns-2 red.cc, forced drops).
    fn on_tail_drop(&mut self, a: &Arrival<'_>) {
        self.update_avg(a.now, a.queue);
        self.count = 0;
    }
}
