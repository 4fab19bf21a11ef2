//! PIE, Proportional Integral controller Enhanced (Pan, Natarajan, Piglione, Prabhu,
//! Subramanian, Baker, VerSteeg, RFC 8033), written out in docs/algorithms/pie.md.
//!
//! PIE drops (or marks) arrivals at random with a probability `drop_prob` that a PI
//! controller moves every `t_update` (15 ms) from the queueing delay:
//!
//! ```text
//! p = alpha (qdelay - target) + beta (qdelay - qdelay_old)        (RFC 8033 §4.2, s)
//! p scaled down by 2048, 512, 128, 32, 8, 2 while drop_prob < 1e-6, 1e-5, ..., 0.1 (§4.2)
//! drop_prob += p, at most +0.02 once drop_prob >= 0.1;  x 0.98 when both delays are 0
//! ```
//!
//! with `target` 15 ms, `alpha` 0.125 Hz, `beta` 1.25 Hz. The queueing delay comes from the
//! **dequeue-rate estimator** (§4.3, Little's law: `qdelay = queue bytes / avg_dq_rate`, the
//! rate measured over `dq_threshold` = 16 KiB of departures while that much is queued) or,
//! with `estimator = "timestamp"`, the sojourn of the packet at the head. A **burst
//! allowance** of `max_burst` (150 ms) lets a burst in after an idle period (§4.4); no early
//! decision while `qdelay_old < target / 2` and `drop_prob < 0.2`, nor while at most two
//! packets' worth of bytes are queued (§4.1).
//!
//! Decided (docs/algorithms/pie.md): the controller runs lazily: an arrival or departure at or
//! past the update time runs every update due since, with the delay it measures now (an idle
//! queue so decays as a timer would have decayed it; at most 1024 updates are replayed, by then
//! `drop_prob` has decayed to 0). The rate estimator counts the bytes already handed to the
//! link, so its interval covers exactly their transmission; its average is an EWMA of weight 1/8
//! (Linux `pie`). With `ecn` a markable packet is marked while `drop_prob <= 0.1`, dropped
//! above (RFC 8033 §5.1). The "two packets" of §4.1 are 2 x 1500 bytes.

use serde::{Deserialize, Serialize};

use crate::codel::positive_ms;
use crate::{
    check, early_verdict, happens, Aqm, AqmConfigError, Arrival, Nanos, PacketMeta, QueueView,
    Verdict,
};

/// Where PIE reads the queueing delay from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PieEstimator {
    /// Little's law on the measured dequeue rate (RFC 8033 §4.3).
    #[default]
    Rate,
    /// The sojourn of the packet at the head of the queue (Linux `pie`'s default).
    Timestamp,
}

/// PIE parameters in config units.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PieParams {
    /// Target queueing delay `QDELAY_REF`, ms, `> 0`. Default 15.
    pub target_ms: f64,
    /// Controller period `T_UPDATE`, ms, `> 0`. Default 15.
    pub t_update_ms: f64,
    /// Burst allowance `MAX_BURST`, ms, `>= 0`. Default 150.
    pub max_burst_ms: f64,
    /// Integral gain, Hz, `>= 0`. Default 0.125.
    pub alpha: f64,
    /// Proportional gain, Hz, `>= 0`. Default 1.25.
    pub beta: f64,
    /// Mark ECN-capable packets while `drop_prob <= 0.1`. Default off (Linux `pie`).
    pub ecn: bool,
    /// The delay estimator. Default `rate`.
    pub estimator: PieEstimator,
    /// Bytes of departures per rate measurement, `>= 1500`. Default 16384.
    pub dq_threshold_bytes: u32,
}

impl Default for PieParams {
    fn default() -> Self {
        PieParams {
            target_ms: 15.0,
            t_update_ms: 15.0,
            max_burst_ms: 150.0,
            alpha: 0.125,
            beta: 1.25,
            ecn: false,
            estimator: PieEstimator::Rate,
            dq_threshold_bytes: 16_384,
        }
    }
}

impl PieParams {
    /// Checks the parameters.
    pub fn validate(&self) -> Result<PieConfig, AqmConfigError> {
        let target = positive_ms("target_ms", self.target_ms)?;
        let t_update = positive_ms("t_update_ms", self.t_update_ms)?;
        let max_burst =
            Nanos::from_secs_f64(check::non_negative("max_burst_ms", self.max_burst_ms)? / 1e3);
        let alpha = check::non_negative("alpha", self.alpha)?;
        let beta = check::non_negative("beta", self.beta)?;
        if self.dq_threshold_bytes < 1500 {
            return Err(check::err(
                "dq_threshold_bytes",
                self.dq_threshold_bytes,
                "dq_threshold_bytes >= 1500",
            ));
        }
        Ok(PieConfig {
            target,
            t_update,
            max_burst,
            alpha,
            beta,
            ecn: self.ecn,
            estimator: self.estimator,
            dq_threshold: u64::from(self.dq_threshold_bytes),
        })
    }
}

/// Validated PIE constants.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PieConfig {
    /// `QDELAY_REF`.
    pub target: Nanos,
    /// `T_UPDATE`.
    pub t_update: Nanos,
    /// `MAX_BURST`.
    pub max_burst: Nanos,
    /// Integral gain, Hz.
    pub alpha: f64,
    /// Proportional gain, Hz.
    pub beta: f64,
    /// Mark instead of drop while `drop_prob <= 0.1`.
    pub ecn: bool,
    /// Delay estimator.
    pub estimator: PieEstimator,
    /// `DQ_THRESHOLD`, bytes.
    pub dq_threshold: u64,
}

/// The marking threshold of RFC 8033 §5.1: above it, markable packets are dropped too.
const MARK_ECN_TH: f64 = 0.1;
/// The "two packets" of RFC 8033 §4.1 (`2 * MEAN_PKTSIZE`), bytes.
const TWO_PACKETS: u64 = 3000;
/// Most controller updates one arrival or departure replays.
const MAX_REPLAYED_UPDATES: u64 = 1024;

/// PIE's state.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PieState {
    /// The drop probability.
    pub drop_prob: f64,
    /// The delay at the previous update.
    pub qdelay_old: Nanos,
    /// What is left of the burst allowance.
    pub burst_allowance: Nanos,
    /// The next controller update (`None` before the first arrival).
    pub next_update: Option<Nanos>,
    /// The averaged dequeue rate, bytes per second (0 before the first measurement).
    pub avg_dq_rate: f64,
    /// The measurement in progress: its start and the bytes counted.
    pub measuring: Option<(Nanos, u64)>,
}

/// PIE: the policy of `kind = "pie"`, deciding on arrival on the caller's FIFO.
#[derive(Clone, Debug)]
pub struct Pie {
    cfg: PieConfig,
    state: PieState,
}

impl Pie {
    /// PIE with `cfg`, its burst allowance full.
    pub fn new(cfg: PieConfig) -> Self {
        Pie {
            cfg,
            state: PieState {
                drop_prob: 0.0,
                qdelay_old: Nanos::ZERO,
                burst_allowance: cfg.max_burst,
                next_update: None,
                avg_dq_rate: 0.0,
                measuring: None,
            },
        }
    }

    /// The validated constants.
    pub fn config(&self) -> &PieConfig {
        &self.cfg
    }

    /// The controller's state.
    pub fn state(&self) -> &PieState {
        &self.state
    }

    /// True when the delay estimate reads the head's enqueue time.
    pub fn reads_head_time(&self) -> bool {
        self.cfg.estimator == PieEstimator::Timestamp
    }

    /// Takes over `old`'s state (a live reconfiguration between PIE settings).
    pub fn inherit_state(&mut self, old: &Pie) {
        self.state = old.state;
    }

    /// The current queueing delay estimate for `queue` at `now`.
    pub fn qdelay(&self, now: Nanos, queue: &QueueView) -> Nanos {
        match self.cfg.estimator {
            PieEstimator::Rate => {
                if self.state.avg_dq_rate > 0.0 {
                    Nanos::from_secs_f64(queue.len_bytes as f64 / self.state.avg_dq_rate)
                } else {
                    Nanos::ZERO
                }
            }
            PieEstimator::Timestamp => queue.head_enqueued_at.map_or(Nanos::ZERO, |t| now - t),
        }
    }

    /// Runs every controller update due by `now` with the delay measured now.
    fn catch_up(&mut self, now: Nanos, queue: &QueueView) {
        let next = match self.state.next_update {
            None => {
                self.state.next_update = Some(now + self.cfg.t_update);
                return;
            }
            Some(t) if now < t => return,
            Some(t) => t,
        };
        let qdelay = self.qdelay(now, queue);
        let due = ((now.0 - next.0) / self.cfg.t_update.0.max(1) + 1).min(MAX_REPLAYED_UPDATES);
        for _ in 0..due {
            self.update(qdelay);
        }
        // The next update falls on the grid after `now`.
        let periods = (now.0 - next.0) / self.cfg.t_update.0.max(1) + 1;
        self.state.next_update = Some(Nanos(next.0 + periods * self.cfg.t_update.0));
    }

    /// One run of `calculate_drop_prob` (RFC 8033 §4.2 and its pseudo-code).
    pub fn update(&mut self, qdelay: Nanos) {
        let s = &mut self.state;
        let cfg = &self.cfg;
        let secs = |t: Nanos| t.as_secs_f64();
        let mut p = cfg.alpha * (secs(qdelay) - secs(cfg.target))
            + cfg.beta * (secs(qdelay) - secs(s.qdelay_old));
        p /= if s.drop_prob < 0.000_001 {
            2048.0
        } else if s.drop_prob < 0.000_01 {
            512.0
        } else if s.drop_prob < 0.000_1 {
            128.0
        } else if s.drop_prob < 0.001 {
            32.0
        } else if s.drop_prob < 0.01 {
            8.0
        } else if s.drop_prob < 0.1 {
            2.0
        } else {
            1.0
        };
        // No sudden jump once the probability is high (RFC 8033 §4.2).
        if s.drop_prob >= 0.1 && p > 0.02 {
            p = 0.02;
        }
        s.drop_prob += p;
        if qdelay == Nanos::ZERO && s.qdelay_old == Nanos::ZERO {
            s.drop_prob *= 0.98;
        }
        s.drop_prob = s.drop_prob.clamp(0.0, 1.0);
        s.burst_allowance = s.burst_allowance - cfg.t_update;
        // A queue back under half the target, now and at the previous update, with no drop
        // probability earns its allowance again (RFC 8033 §4.4).
        if s.drop_prob == 0.0 && qdelay < half(cfg.target) && s.qdelay_old < half(cfg.target) {
            s.burst_allowance = cfg.max_burst;
        }
        s.qdelay_old = qdelay;
    }
}

fn half(t: Nanos) -> Nanos {
    Nanos(t.0 / 2)
}

impl Aqm for Pie {
    fn decide<R: rand::RngCore + ?Sized>(&mut self, arrival: &Arrival<'_>, rng: &mut R) -> Verdict {
        self.catch_up(arrival.now, arrival.queue);
        let s = &self.state;
        if s.burst_allowance > Nanos::ZERO {
            return Verdict::Enqueue;
        }
        if (s.qdelay_old < half(self.cfg.target) && s.drop_prob < 0.2)
            || arrival.queue.len_bytes <= TWO_PACKETS
        {
            return Verdict::Enqueue;
        }
        if !happens(rng, s.drop_prob) {
            return Verdict::Enqueue;
        }
        if s.drop_prob <= MARK_ECN_TH {
            early_verdict(self.cfg.ecn, arrival.pkt)
        } else {
            Verdict::EarlyDrop
        }
    }

    fn on_tail_drop(&mut self, arrival: &Arrival<'_>) {
        self.catch_up(arrival.now, arrival.queue);
    }

    fn on_dequeue(&mut self, now: Nanos, queue: &QueueView, pkt: &PacketMeta) {
        let before = queue.len_bytes + u64::from(pkt.len);
        let threshold = self.cfg.dq_threshold;
        let s = &mut self.state;
        if let Some((start, count)) = s.measuring {
            if count >= threshold {
                let dt = (now - start).as_secs_f64();
                if dt > 0.0 {
                    let rate = count as f64 / dt;
                    s.avg_dq_rate = if s.avg_dq_rate == 0.0 {
                        rate
                    } else {
                        s.avg_dq_rate + (rate - s.avg_dq_rate) / 8.0
                    };
                }
                s.measuring = None;
            }
        }
        if s.measuring.is_none() && before >= threshold {
            s.measuring = Some((now, 0));
        }
        if let Some((_, count)) = &mut s.measuring {
            *count += u64::from(pkt.len);
        }
        self.catch_up(now, queue);
    }
}
