//! SRED, Stabilized RED (Ott, Lakshman, Wong, INFOCOM 1999), written out in
//! docs/algorithms/sred.md.
//!
//! Each arrival of flow `f` is shown to the Zombie List (`zl_zombie`), which returns `Hit(t)`
//! and the hit frequency `P(t)`; with `q` the instantaneous queue in packets and `B` the
//! buffer capacity in packets:
//!
//! ```text
//! p1 = 0 if q < B/6;  p_max/4 if B/6 <= q < B/3;  p_max if q >= B/3     (1)
//! p2 = p1 * min(1, 1 / (256 * P(t))^2)                                  (2)
//! p3 = p2 * (1 + Hit(t) / P(t))                                         (3)
//! ```
//!
//! and the packet is dropped with probability `min(1, p3)`.
//!
//! Decided (docs/algorithms/sred.md): `P(t)` is updated with this arrival's `Hit` before (2)-(3)
//! use it; while `P(t) = 0` the factor of (2) is 1 and the `Hit/P` term is 0. Decided: drop-only by
//! default (the paper drops); `ecn = true` marks markable packets instead. A packet that does not
//! fit the buffer is tail-dropped before the list sees it.
//!
//! Paper constants (defaults): `M = 1000`, `p_swap = 0.25`, `p_max = 0.15`, `alpha = 1/M`.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use zl_zombie::{Observation, ZombieConfig, ZombieList, ZombieParams};

use crate::check;
use crate::{
    early_verdict, happens, Aqm, AqmConfigError, Arrival, Nanos, PacketMeta, QueueView, Verdict,
};

/// Eq. (1) with a configurable start: `0` below `start`, `p_max/4` below `b_third`, then
/// `p_max` (SRED: `start = B/6`; ZL-RED's eq. (7): `start = th_min`).
pub fn staged_p1(q: f64, start: f64, b_third: f64, p_max: f64) -> f64 {
    if q < start {
        0.0
    } else if q < b_third {
        0.25 * p_max
    } else {
        p_max
    }
}

/// SRED's eq. (1) for a buffer of `capacity` packets.
pub fn sred_p1(q: u32, capacity: u32, p_max: f64) -> f64 {
    let b = capacity as f64;
    staged_p1(q as f64, b / 6.0, b / 3.0, p_max)
}

/// The intermediate probabilities of one SRED decision.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct SredTerms {
    /// Eq. (1).
    pub p1: f64,
    /// Eq. (2).
    pub p2: f64,
    /// Unclamped; the drop probability is `min(1, p3)`.
    pub p3: f64,
}

/// Eq. (2)-(3) from `p1`, this arrival's `hit` and the updated `P(t)`.
pub fn sred_terms(p1: f64, hit: bool, p_hit: f64) -> SredTerms {
    if p_hit > 0.0 {
        let s = 256.0 * p_hit;
        let p2 = p1 * (1.0 / (s * s)).min(1.0);
        // `p2 > 0` checked apart: a subnormal `P` makes `1/P` infinite, and `0 * inf` is NaN.
        let p3 = if hit && p2 > 0.0 {
            p2 * (1.0 + 1.0 / p_hit)
        } else {
            p2
        };
        SredTerms { p1, p2, p3 }
    } else {
        SredTerms { p1, p2: p1, p3: p1 }
    }
}

/// SRED parameters in config units.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SredParams {
    /// `0 < p_max <= 1`. Default 0.15.
    pub p_max: f64,
    /// Mark markable packets instead of dropping them. Default off.
    pub ecn: bool,
    /// The Zombie List (M = 1000, p_swap = 0.25, alpha = 1/M). Used when the build context
    /// supplies no shared list; validated either way.
    pub zombie: ZombieParams,
}

impl Default for SredParams {
    fn default() -> Self {
        SredParams {
            p_max: 0.15,
            ecn: false,
            zombie: ZombieParams::default(),
        }
    }
}

/// Maps the Zombie List's own error to ours, naming the key under the policy's table.
pub(crate) fn zombie_config(p: &ZombieParams) -> Result<ZombieConfig, AqmConfigError> {
    p.validate().map_err(|e| {
        let (param, value, expected) = match e {
            zl_zombie::ZombieConfigError::M(m) => (
                "zombie.m",
                m.to_string(),
                format!("1 <= zombie.m <= {}", zl_zombie::MAX_M),
            ),
            zl_zombie::ZombieConfigError::PSwap(v) => (
                "zombie.p_swap",
                v.to_string(),
                "0 <= zombie.p_swap <= 1".into(),
            ),
            zl_zombie::ZombieConfigError::Alpha(v) => (
                "zombie.alpha",
                v.to_string(),
                "0 < zombie.alpha <= 1".into(),
            ),
        };
        AqmConfigError {
            param,
            value,
            expected,
        }
    })
}

/// `B` must allow the thresholds to mean something.
pub(crate) fn check_capacity(capacity: u32) -> Result<f64, AqmConfigError> {
    if capacity == 0 || capacity == u32::MAX {
        Err(check::err(
            "capacity_packets",
            capacity,
            "a finite buffer capacity B in packets (1 ..= 2^32 - 2)",
        ))
    } else {
        Ok(capacity as f64)
    }
}

impl SredParams {
    /// Checks every parameter; `capacity_packets` is the queue's `B`.
    pub fn validate(&self, capacity_packets: u32) -> Result<SredConfig, AqmConfigError> {
        let p_max = check::unit_open_closed("p_max", self.p_max)?;
        let b = check_capacity(capacity_packets)?;
        let zombie = zombie_config(&self.zombie)?;
        Ok(SredConfig {
            p_max,
            ecn: self.ecn,
            b_sixth: b / 6.0,
            b_third: b / 3.0,
            zombie,
        })
    }
}

/// Validated SRED constants.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SredConfig {
    /// `0 < p_max <= 1`.
    pub p_max: f64,
    /// Mark markable packets instead of dropping them.
    pub ecn: bool,
    /// `B/6`, packets.
    pub b_sixth: f64,
    /// `B/3`, packets.
    pub b_third: f64,
    /// The Zombie List's configuration (the shared list's, when there is one).
    pub zombie: ZombieConfig,
}

/// SRED runtime state: a handle on the (possibly shared) Zombie List and the latest terms.
pub struct Sred {
    cfg: SredConfig,
    list: Arc<ZombieList>,
    last: SredTerms,
}

impl Sred {
    /// Takes over `old`'s running state, keeping this policy's parameters (a live
    /// reconfiguration: `AqmPolicy::inherit_state`).
    pub fn inherit_state(&mut self, old: &Sred) {
        self.last = old.last;
    }

    /// With its own Zombie List built from the config.
    pub fn new(cfg: SredConfig) -> Self {
        let list = Arc::new(ZombieList::new(cfg.zombie));
        Sred::with_list(cfg, list)
    }

    /// On a Zombie List shared with other queues or threads; the list's own configuration
    /// replaces the one in `cfg`.
    pub fn with_list(mut cfg: SredConfig, list: Arc<ZombieList>) -> Self {
        cfg.zombie = *list.config();
        Sred {
            cfg,
            list,
            last: SredTerms::default(),
        }
    }

    /// The validated constants.
    pub fn config(&self) -> &SredConfig {
        &self.cfg
    }

    /// The Zombie List this policy observes (shared or its own).
    pub fn zombie_list(&self) -> &Arc<ZombieList> {
        &self.list
    }

    /// The terms of the latest decision (tail drops leave it unchanged).
    pub fn last_decision(&self) -> SredTerms {
        self.last
    }
}

impl std::fmt::Debug for Sred {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sred")
            .field("cfg", &self.cfg)
            .field("last", &self.last)
            .finish_non_exhaustive()
    }
}

impl Sred {
    /// Observes the list, then decides. Out of line, as ZL-RED's (see `ZlRed`'s
    /// `observe_and_decide`).
    #[inline(never)]
    fn observe_and_decide<R: rand::RngCore + ?Sized>(
        &mut self,
        now: Nanos,
        rng: &mut R,
        queue: &QueueView,
        pkt: &PacketMeta,
    ) -> Verdict {
        let obs = self.list.observe(pkt.flow, now, rng);
        self.decide_on(rng, queue, pkt, &obs)
    }

    /// Decides on an observation made upstream; out of line too, so that neither path of
    /// [`Sred::decide`] grows the caller that inlines it.
    #[inline(never)]
    fn decide_observed<R: rand::RngCore + ?Sized>(
        &mut self,
        rng: &mut R,
        queue: &QueueView,
        pkt: &PacketMeta,
        obs: &Observation,
    ) -> Verdict {
        self.decide_on(rng, queue, pkt, obs)
    }

    /// Eq. (1)-(3) from the arrival's observation of the list.
    #[inline(always)]
    fn decide_on<R: rand::RngCore + ?Sized>(
        &mut self,
        rng: &mut R,
        queue: &QueueView,
        pkt: &PacketMeta,
        obs: &Observation,
    ) -> Verdict {
        let p1 = staged_p1(
            queue.len_packets as f64,
            self.cfg.b_sixth,
            self.cfg.b_third,
            self.cfg.p_max,
        );
        self.last = sred_terms(p1, obs.hit, obs.p);
        if happens(rng, self.last.p3) {
            early_verdict(self.cfg.ecn, pkt)
        } else {
            Verdict::Enqueue
        }
    }
}

impl Aqm for Sred {
    /// Decides on the arrival's upstream observation of the shared list when it carries one
    /// (the list is not observed again), else observes the list first. A tail-dropped packet
    /// never reaches the list here.
    #[inline]
    fn decide<R: rand::RngCore + ?Sized>(&mut self, a: &Arrival<'_>, rng: &mut R) -> Verdict {
        match a.zombie {
            Some(obs) => self.decide_observed(rng, a.queue, a.pkt, obs),
            None => self.observe_and_decide(a.now, rng, a.queue, a.pkt),
        }
    }
}
