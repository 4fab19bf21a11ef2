//! Priority-weighted ECN RED (Ueno, Kimura, Ebihara, "Prioritized Congestion Control with
//! Explicit Congestion Notification for TCP", IPSJ 1999), docs/algorithms/priority-ecn-red.md.
//!
//! RED (docs/algorithms/red.md, see [`crate::red`]) computes `p_a`; a packet of priority `pri`
//! (0..=15, 8 lowest .. 15 highest in the paper's use) and weight `w` (0..=255, from the packet's
//! congestion-control extension header or the configured default) is marked with, eq. (3):
//!
//! ```text
//! p_new = p_a * (15 - pri)^w / (15 - b)^w,   capped at 1
//! ```
//!
//! `b` is the reference priority (11 in the paper). `w = 0` is plain RED; priority 15 gives
//! `p_new = 0`, so it is never marked early (forced and tail drops still drop it).
//!
//! Units: thresholds in bytes by default (the paper's `min_th = 12 * 512` octets,
//! `max_th = 3 * min_th`), `max_p = 1/50`.
//!
//! The router marks by design: `ecn` defaults to on, and a packet carrying the extension header
//! is markable whatever its IP ECN field says
//! ([`PacketMeta::is_markable`](crate::PacketMeta::is_markable)); an early decision on a packet
//! that is not markable drops it.
//! Decided: a priority above 15 (impossible in a 4-bit field, but `PacketMeta::priority` is a
//! `u8`) is read as 15. The `count` term of RED acts on `p_a` before the priority factor.

use serde::{Deserialize, Serialize};

use crate::check;
use crate::red::{CountTerm, QueueUnit, Red, RedConfig, RedParams};
use crate::{Aqm, AqmConfigError, Arrival, Verdict};

/// The factor of eq. (3): `((15 - pri) / (15 - b))^w`. `b` must be below 15.
pub fn priority_factor(pri: u8, b: u8, w: u8) -> f64 {
    if w == 0 {
        return 1.0;
    }
    let pri = pri.min(15);
    (f64::from(15 - pri) / f64::from(15 - b.min(14))).powi(i32::from(w))
}

/// Priority-ECN RED parameters in config units (defaults: the paper's section 4).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PriorityEcnRedParams {
    /// Lower threshold, in `unit`s. Default `12 * 512` bytes.
    pub min_th: f64,
    /// Upper threshold, `> min_th`. Default `3 * min_th`.
    pub max_th: f64,
    /// `0 < max_p <= 1`. Default 1/50.
    pub max_p: f64,
    /// EWMA weight, `0 < w_q <= 1`. Default 0.002 (ns-2's, which the paper ran).
    pub w_q: f64,
    /// Reference priority `b`, `0..=14`. Default 11.
    pub b: u8,
    /// Gentle mode as RED. Default off.
    pub gentle: bool,
    /// Mark markable packets instead of dropping them. Default on (the paper's design).
    pub ecn: bool,
    /// Default bytes.
    pub unit: QueueUnit,
    /// Typical packet for RED's idle decay, bytes. Default 512 (the paper's datagram).
    pub idle_packet_bytes: u32,
    /// RED's count term. Default `uniform` (ns-2's default is `wait`).
    pub count_term: CountTerm,
    /// As RED's: arrivals to a queue of at most this many packets are admitted undecided.
    /// Default none.
    pub spare_queue_packets: Option<u32>,
}

impl Default for PriorityEcnRedParams {
    fn default() -> Self {
        PriorityEcnRedParams {
            min_th: 12.0 * 512.0,
            max_th: 3.0 * 12.0 * 512.0,
            max_p: 1.0 / 50.0,
            w_q: 0.002,
            b: 11,
            gentle: false,
            ecn: true,
            unit: QueueUnit::Bytes,
            idle_packet_bytes: 512,
            count_term: CountTerm::Uniform,
            spare_queue_packets: None,
        }
    }
}

impl PriorityEcnRedParams {
    /// Checks every parameter; `link_rate_bps` sets RED's idle decay.
    pub fn validate(&self, link_rate_bps: u64) -> Result<PriorityEcnRedConfig, AqmConfigError> {
        if self.b > 14 {
            return Err(check::err("b", self.b, "0 <= b <= 14"));
        }
        let red = RedParams {
            min_th: self.min_th,
            max_th: self.max_th,
            max_p: self.max_p,
            w_q: self.w_q,
            gentle: self.gentle,
            ecn: self.ecn,
            unit: self.unit,
            idle_packet_bytes: self.idle_packet_bytes,
            count_term: self.count_term,
            spare_queue_packets: self.spare_queue_packets,
        }
        .validate(link_rate_bps)?;
        Ok(PriorityEcnRedConfig { red, b: self.b })
    }
}

/// Validated constants: RED's plus `b`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct PriorityEcnRedConfig {
    /// The RED part.
    pub red: RedConfig,
    /// The reference priority `b`.
    pub b: u8,
}

/// Runtime state: a RED queue average and count, with the per-packet priority factor.
#[derive(Clone, Debug)]
pub struct PriorityEcnRed {
    red: Red,
    b: u8,
}

impl PriorityEcnRed {
    /// Takes over `old`'s running state, keeping this policy's parameters (a live
    /// reconfiguration: `AqmPolicy::inherit_state`).
    pub fn inherit_state(&mut self, old: &PriorityEcnRed) {
        self.red.inherit_state(&old.red);
    }

    /// A policy with RED's `avg = 0`.
    pub fn new(cfg: PriorityEcnRedConfig) -> Self {
        PriorityEcnRed {
            red: Red::new(cfg.red),
            b: cfg.b,
        }
    }

    /// The underlying RED state (average, count).
    pub fn red(&self) -> &Red {
        &self.red
    }

    /// The RED state underneath (tests and simulators set its average).
    pub fn red_mut(&mut self) -> &mut Red {
        &mut self.red
    }
}

impl Aqm for PriorityEcnRed {
    fn decide<R: rand::RngCore + ?Sized>(&mut self, a: &Arrival<'_>, rng: &mut R) -> Verdict {
        let (b, pkt) = (self.b, a.pkt);
        self.red.update_avg(a.now, a.queue);
        self.red.decide_scaled(rng, pkt, a.queue, || {
            priority_factor(pkt.priority, b, pkt.weight)
        })
    }

    fn on_tail_drop(&mut self, a: &Arrival<'_>) {
        self.red.on_tail_drop(a);
    }
}
