//! RED, Random Early Detection (Floyd & Jacobson, IEEE/ACM ToN 1993), written out in
//! docs/algorithms/red.md.
//!
//! Per arrival, with `q` the instantaneous queue (packets, or bytes in byte mode):
//! 1. idle decay: if the queue has been empty since `t0`, `avg = (1 - w_q)^m * avg` with
//!    `m = (now - t0) / s`, `s` = transmission time of a typical small packet at the egress rate;
//! 2. `avg = (1 - w_q) * avg + w_q * q`;
//! 3. `avg < min_th`: enqueue;
//! 4. `min_th <= avg < max_th`: `p_b = max_p * (avg - min_th) / (max_th - min_th)`,
//!    `p_a = p_b / (1 - count * p_b)` (1 when `count * p_b >= 1`), mark or drop with
//!    probability `p_a`;
//! 5. `avg >= max_th`: forced drop. Gentle mode: `p_b = max_p + (1 - max_p)(avg - max_th)/max_th`
//!    up to `2 max_th`, forced only above;
//! 6. a packet that does not fit the buffer is tail-dropped whatever `avg` says.
//!
//! Units: thresholds in packets (or bytes with `unit = "bytes"`), `max_p` and `w_q` are
//! dimensionless, time in nanoseconds.
//!
//! Decided (docs/algorithms/red.md): the count term is the paper's `1 - count * p_b` form (ns-3
//! `Wait = false`), not DPDK's `2 - count * p_b`. Decided here: `count` is "the number of unmarked
//! packets that have arrived since the last marked packet" (Floyd & Jacobson §7), not counting the
//! arriving one, so the gap between marks is uniform on `1..=1/p_b` (mean `(1/p_b + 1)/2`) at a
//! held average. The count term also applies in the gentle region (as ns-2).
//! Decided: the average is updated on every arrival, tail-dropped ones included (as ns-2), and
//! the idle exponent `m` is real-valued.
//!
//! Options that reproduce ns-2's `Queue/RED` (ns-2.35 `queue/red.cc`), all off by default so
//! the router's RED is unchanged: `count_term = "wait"` (ns-2 `wait_`, `modify_p`: `p_a = 0`
//! while `count * p_b < 1`, `p_b / (2 - count * p_b)` below 2, then 1, with `count`
//! including the arriving packet as ns-2's `++edv_.count` does), and `spare_queue_packets`
//! (ns-2 `enque`: no early or average-forced drop unless `qlen > 1`; an arrival to a queue this
//! short is admitted whatever `avg` says, which is what keeps ns-2's RED from locking up when
//! `avg` is left above `max_th`, docs/algorithms/nonlinear-red.md). Decided: `ecn` defaults to
//! on (docs/algorithms/red.md: an early decision on an ECN-capable packet sets CE); forced and
//! tail drops always drop.

use serde::{Deserialize, Serialize};

use crate::check;
use crate::{
    early_verdict, happens, Aqm, AqmConfigError, Arrival, Nanos, PacketMeta, QueueView, Verdict,
};

/// What the thresholds count.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QueueUnit {
    /// Packets queued (the seeds' default).
    #[default]
    Packets,
    /// Bytes queued (byte mode; the priority-ECN paper's `min_th = 12 * 512` octets).
    Bytes,
}

impl QueueUnit {
    /// The instantaneous queue length `q` in this unit.
    pub fn measure(self, queue: &QueueView) -> f64 {
        match self {
            QueueUnit::Packets => queue.len_packets as f64,
            QueueUnit::Bytes => queue.len_bytes as f64,
        }
    }
}

/// How RED spreads its early decisions between marks: the count term of step 4.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CountTerm {
    /// `p_a = p_b`: geometric gaps between marks (Kousaka's nonlinear RED as written,
    /// docs/algorithms/nonlinear-red.md).
    None,
    /// `p_a = p_b / (1 - count * p_b)`: uniform gaps on `1..=1/p_b` (Floyd & Jacobson §7, ns-2
    /// with `wait_ false`). `count` does not include the arriving packet.
    #[default]
    Uniform,
    /// ns-2's `wait_ true` (its default, ns-default.tcl `Queue/RED set wait_ true`): no mark
    /// while `count * p_b < 1`, `p_b / (2 - count * p_b)` while below 2, then 1, so the gap is
    /// uniform on `1/p_b..2/p_b`. `count` includes the arriving packet (red.cc `++edv_.count`).
    Wait,
}

impl CountTerm {
    /// `p_a` from `p_b` after `count` unmarked arrivals since the last mark (not counting the
    /// arriving one; `Wait` adds it, as ns-2).
    pub fn apply(self, p_b: f64, count: u32) -> f64 {
        match self {
            CountTerm::None => p_b,
            CountTerm::Uniform => count_adjusted(p_b, count),
            CountTerm::Wait => {
                let cp = (count as f64 + 1.0) * p_b;
                if cp < 1.0 {
                    0.0
                } else if cp < 2.0 {
                    p_b / (2.0 - cp)
                } else {
                    1.0
                }
            }
        }
    }
}

/// RED parameters in config units.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct RedParams {
    /// Lower threshold on `avg`, in `unit`s. Default 5 packets (Floyd & Jacobson's simulations).
    pub min_th: f64,
    /// Upper threshold on `avg`, in `unit`s, `> min_th`. Default 15.
    pub max_th: f64,
    /// `p_b` at `avg = max_th`, `0 < max_p <= 1`. Default 1/50.
    pub max_p: f64,
    /// EWMA weight of the average queue, `0 < w_q <= 1`. Default 0.002.
    pub w_q: f64,
    /// Gentle mode: ramp `max_p -> 1` between `max_th` and `2 max_th`. Default off.
    pub gentle: bool,
    /// Mark CE instead of dropping markable packets on early decisions. Default on.
    pub ecn: bool,
    /// What the thresholds count. Default packets.
    pub unit: QueueUnit,
    /// Size of the "typical small packet" whose transmission time `s` sets the idle decay,
    /// in bytes, `> 0`. Default 500 (ns-2 `mean_pktsize_`, ns-default.tcl).
    pub idle_packet_bytes: u32,
    /// Count term of step 4. Default `uniform` (the paper's; ns-2's default is `wait`).
    pub count_term: CountTerm,
    /// An arrival finding at most this many packets queued is never dropped or marked early
    /// or for `avg >= max_th` (ns-2: `qlen > 1`, i.e. 1 in packet mode, 0 in byte mode). Default
    /// none (every arrival is decided).
    pub spare_queue_packets: Option<u32>,
}

impl Default for RedParams {
    fn default() -> Self {
        RedParams {
            min_th: 5.0,
            max_th: 15.0,
            max_p: 1.0 / 50.0,
            w_q: 0.002,
            gentle: false,
            ecn: true,
            unit: QueueUnit::Packets,
            idle_packet_bytes: 500,
            count_term: CountTerm::Uniform,
            spare_queue_packets: None,
        }
    }
}

impl RedParams {
    /// Checks every parameter; `link_rate_bps` (the egress rate, from the build context) sets
    /// the idle-decay packet time `s`.
    pub fn validate(&self, link_rate_bps: u64) -> Result<RedConfig, AqmConfigError> {
        let min_th = check::non_negative("min_th", self.min_th)?;
        check::ordered("max_th", "min_th", min_th, self.max_th)?;
        let max_p = check::unit_open_closed("max_p", self.max_p)?;
        let w_q = check::unit_open_closed("w_q", self.w_q)?;
        if self.idle_packet_bytes == 0 {
            return Err(check::err("idle_packet_bytes", 0, "idle_packet_bytes > 0"));
        }
        if link_rate_bps == 0 {
            return Err(check::err(
                "link_rate_bps",
                0,
                "link_rate_bps > 0 (the egress rate sets RED's idle decay)",
            ));
        }
        let s_nanos = self.idle_packet_bytes as f64 * 8.0 * 1e9 / link_rate_bps as f64;
        Ok(RedConfig {
            min_th,
            max_th: self.max_th,
            max_p,
            w_q,
            gentle: self.gentle,
            ecn: self.ecn,
            unit: self.unit,
            inv_range: 1.0 / (self.max_th - min_th),
            s_nanos,
            ln_keep: (1.0 - w_q).ln(),
            count_term: self.count_term,
            spare_queue_packets: self.spare_queue_packets,
        })
    }
}

/// Where an average falls, with the base probability `p_b` (before the count term).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RedRegion {
    /// `avg < min_th`: enqueue.
    Below,
    /// Probabilistic region, with `p_b`.
    Early(f64),
    /// `avg >= max_th` (`>= 2 max_th` in gentle mode): forced drop.
    Forced,
}

/// Validated RED constants.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RedConfig {
    /// Lower threshold, in `unit`s.
    pub min_th: f64,
    /// Upper threshold, in `unit`s.
    pub max_th: f64,
    /// `p_b` at `avg = max_th`.
    pub max_p: f64,
    /// EWMA weight of the average queue.
    pub w_q: f64,
    /// Gentle mode.
    pub gentle: bool,
    /// Mark markable packets instead of dropping them on early decisions.
    pub ecn: bool,
    /// What the thresholds count.
    pub unit: QueueUnit,
    inv_range: f64,
    /// `s`: transmission time of the typical small packet, in nanoseconds.
    s_nanos: f64,
    /// `ln(1 - w_q)`, so `(1 - w_q)^m = exp(m * ln_keep)`.
    ln_keep: f64,
    /// Count term of step 4.
    pub count_term: CountTerm,
    /// Arrivals to a queue of at most this many packets are admitted undecided.
    pub spare_queue_packets: Option<u32>,
}

impl RedConfig {
    /// The region `avg` falls in and its `p_b` (steps 3-5).
    pub fn region(&self, avg: f64) -> RedRegion {
        if avg < self.min_th {
            RedRegion::Below
        } else if avg < self.max_th {
            RedRegion::Early(self.max_p * (avg - self.min_th) * self.inv_range)
        } else if self.gentle && avg < 2.0 * self.max_th {
            RedRegion::Early(self.max_p + (1.0 - self.max_p) * (avg - self.max_th) / self.max_th)
        } else {
            RedRegion::Forced
        }
    }

    /// `(1 - w_q)^m` for an idle period, `m = idle / s` (step 1).
    pub fn idle_decay(&self, idle: Nanos) -> f64 {
        if idle.0 == 0 {
            return 1.0;
        }
        let m = idle.0 as f64 / self.s_nanos;
        (m * self.ln_keep).exp()
    }

    /// `s` in nanoseconds.
    pub fn idle_packet_time(&self) -> f64 {
        self.s_nanos
    }
}

/// `p_a = p_b / (1 - count * p_b)`, 1 when `count * p_b >= 1` (step 4).
pub fn count_adjusted(p_b: f64, count: u32) -> f64 {
    let cp = count as f64 * p_b;
    if cp >= 1.0 {
        1.0
    } else {
        p_b / (1.0 - cp)
    }
}

/// RED runtime state.
#[derive(Clone, Debug)]
pub struct Red {
    cfg: RedConfig,
    avg: f64,
    /// Unmarked packets since the last mark, in the probabilistic region.
    count: u32,
}

impl Red {
    /// Takes over `old`'s running state, keeping this policy's parameters (a live
    /// reconfiguration: `AqmPolicy::inherit_state`).
    pub fn inherit_state(&mut self, old: &Red) {
        self.avg = old.avg;
        self.count = old.count;
    }

    /// A policy with `avg = 0` and `count = 0`.
    pub fn new(cfg: RedConfig) -> Self {
        Red {
            cfg,
            avg: 0.0,
            count: 0,
        }
    }

    /// The validated constants.
    pub fn config(&self) -> &RedConfig {
        &self.cfg
    }

    /// The average queue, in the configured unit.
    pub fn avg(&self) -> f64 {
        self.avg
    }

    /// Sets the average (tests and simulators that hold it at a chosen value).
    pub fn set_avg(&mut self, avg: f64) {
        self.avg = avg;
    }

    /// `count` as the next decision will use it.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// Steps 1-2: idle decay, then the EWMA with this arrival's `q`.
    #[inline]
    pub(crate) fn update_avg(&mut self, now: Nanos, queue: &QueueView) {
        if let Some(since) = queue.idle_since {
            self.avg *= self.cfg.idle_decay(now - since);
        }
        let q = self.cfg.unit.measure(queue);
        self.avg += self.cfg.w_q * (q - self.avg);
    }

    /// Steps 3-5 for an arrival that fits (its average already updated), with the early
    /// probability `p_a` multiplied by `scale` (1 for plain RED; the priority factor of
    /// docs/algorithms/priority-ecn-red.md eq. 3 for [`PriorityEcnRed`](crate::PriorityEcnRed)).
    #[inline]
    pub(crate) fn decide_scaled<R: rand::RngCore + ?Sized>(
        &mut self,
        rng: &mut R,
        pkt: &PacketMeta,
        queue: &QueueView,
        scale: impl FnOnce() -> f64,
    ) -> Verdict {
        if self
            .cfg
            .spare_queue_packets
            .is_some_and(|n| queue.len_packets <= n)
        {
            // ns-2 red.cc: "No packets are being dropped", and the count restarts.
            self.count = 0;
            return Verdict::Enqueue;
        }
        match self.cfg.region(self.avg) {
            RedRegion::Below => {
                self.count = 0;
                Verdict::Enqueue
            }
            RedRegion::Forced => {
                self.count = 0;
                Verdict::ForcedDrop
            }
            RedRegion::Early(p_b) => {
                let p = (self.cfg.count_term.apply(p_b, self.count) * scale()).min(1.0);
                if happens(rng, p) {
                    self.count = 0;
                    early_verdict(self.cfg.ecn, pkt)
                } else {
                    self.count = self.count.saturating_add(1);
                    Verdict::Enqueue
                }
            }
        }
    }
}

impl Aqm for Red {
    fn decide<R: rand::RngCore + ?Sized>(&mut self, a: &Arrival<'_>, rng: &mut R) -> Verdict {
        self.update_avg(a.now, a.queue);
        self.decide_scaled(rng, a.pkt, a.queue, || 1.0)
    }

    /// The average counts tail-dropped arrivals too (decided, as ns-2).
    fn on_tail_drop(&mut self, a: &Arrival<'_>) {
        self.update_avg(a.now, a.queue);
    }
}
