//! Active queue management: the admission decision a queue makes for each arriving packet.
//!
//! Contract: a policy implements [`Aqm`]. The caller (a per-class queue in `zl-qos`, the data
//! plane, or a simulator) describes the arriving packet ([`PacketMeta`]) and the queue it would
//! join ([`QueueView`]), passes the current time and a random source, and gets a [`Verdict`].
//! The policy never reads a clock, never draws randomness of its own and never touches packet
//! bytes: applying `MarkCe` to the header is the caller's job (`zl_wire`). The crate has no I/O
//! dependency, so other data planes and the simulators embed it unchanged.
//!
//! Each policy goes through four types, as DPDK's `rte_red_params / rte_red_config / rte_red`:
//! `XParams` (serde, human units, from config) -> `XConfig` (validated, constants precomputed;
//! a bad value is an [`AqmConfigError`] naming the parameter and its allowed range) ->
//! the runtime state (the policy struct) -> [`AqmStats`] (counted per cause).
//!
//! Policies, one file each ([`AqmPolicy`] dispatches over them statically, [`AqmParams`] is the
//! serde-tagged config form, built with a [`BuildContext`]):
//!
//! | file | policy | `kind` | early decision on a markable packet |
//! |---|---|---|---|
//! | `tail_drop.rs` | drop-tail | `tail-drop` | (none) |
//! | `red.rs` | RED, spec/01 §1 | `red` | mark (`ecn` default on) |
//! | `sred.rs` | SRED, spec/01 §2 | `sred` | drop (`ecn` default off) |
//! | `zlred.rs` | ZL-RED, spec/01 §3 | `zl-red` | drop (`ecn` default off) |
//! | `priority_ecn.rs` | priority-weighted ECN RED, spec/02 | `priority-ecn-red` | mark (by design) |
//! | `nonlinear_red.rs` | exponential nonlinear RED, spec/04 | `nonlinear-red` | drop (`ecn` default off) |
//! | `sojourn.rs` | per-color sojourn-time manager, spec/05 | `sojourn` | drop (`ecn` default off) |
//!
//! `nonlinear_model.rs` holds the 1-D discrete model of spec/04 (fixed point, eq. 5).
//!
//! Common rules: a packet that does not fit ([`QueueView::is_full_for`]) is `TailDrop` whatever
//! the policy says; forced and tail drops always drop, only early decisions may mark.

#![forbid(unsafe_code)]

mod check;
pub mod nonlinear_model;
pub mod nonlinear_red;
mod policy;
pub mod priority_ecn;
pub mod red;
pub mod sojourn;
pub mod sred;
pub mod tail_drop;
pub mod zlred;

pub use nonlinear_red::{NonlinearRed, NonlinearRedConfig, NonlinearRedParams};
pub use policy::{AqmParams, AqmPolicy, BuildContext};
pub use priority_ecn::{PriorityEcnRed, PriorityEcnRedConfig, PriorityEcnRedParams};
pub use red::{QueueUnit, Red, RedConfig, RedParams, RedRegion};
pub use sojourn::{Sojourn, SojournColorParams, SojournConfig, SojournParams};
pub use sred::{Sred, SredConfig, SredParams, SredTerms};
pub use tail_drop::{TailDrop, TailDropParams};
pub use zl_core::{Color, Ecn, FlowId, Nanos};
pub use zlred::{ZlRed, ZlRedConfig, ZlRedInputs, ZlRedParams, ZlRedTerms};

/// What the policy may know about the arriving packet.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PacketMeta {
    /// Bytes this packet occupies in the queue (the frame length as queued).
    pub len: u32,
    /// The packet's flow, hashed (SRED / ZL-RED key the Zombie List with it).
    pub flow: FlowId,
    /// The RFC 3168 ECN field as received.
    pub ecn: Ecn,
    /// True when the packet carries the congestion-control extension header of spec/02
    /// (then a mark sets that header's ECN bit, and the packet is markable whatever `ecn` says).
    pub has_cc_ext: bool,
    /// Priority 0..=15 (spec/02: 8 lowest .. 15 highest); taken from the configured source.
    pub priority: u8,
    /// Priority weight `w` of spec/02 (0 disables priority control).
    pub weight: u8,
    /// Drop precedence after metering (green when the class is not metered).
    pub color: Color,
}

impl PacketMeta {
    /// True when an early decision may mark instead of drop (RFC 3168 ECT/CE, or the
    /// extension header of spec/02).
    pub fn is_markable(&self) -> bool {
        self.has_cc_ext || self.ecn.is_ecn_capable()
    }
}

/// The state of the queue the packet would join, as seen at its arrival (before it is added).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueView {
    /// Packets currently queued.
    pub len_packets: u32,
    /// Bytes currently queued.
    pub len_bytes: u64,
    /// Capacity in packets (`u32::MAX` when only bytes bound the queue).
    pub capacity_packets: u32,
    /// Capacity in bytes (`u64::MAX` when only packets bound the queue).
    pub capacity_bytes: u64,
    /// Enqueue time of the packet at the head, `None` when the queue is empty
    /// (the sojourn manager of spec/05 measures `now - head_enqueued_at`).
    pub head_enqueued_at: Option<Nanos>,
    /// When the queue last became empty, `Some` only while it is still empty
    /// (RED's idle decay, spec/01 step 1).
    pub idle_since: Option<Nanos>,
}

impl QueueView {
    /// True when a packet of `len` bytes does not fit: it must be tail-dropped whatever
    /// the policy's average says (spec/01 step 6).
    pub fn is_full_for(&self, len: u32) -> bool {
        self.len_packets >= self.capacity_packets
            || self.len_bytes.saturating_add(len as u64) > self.capacity_bytes
    }
}

/// The admission decision for one arriving packet. Every variant but `Enqueue` and `MarkCe`
/// means the packet is discarded; causes are kept apart so counters can be per cause.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Verdict {
    /// Admit unchanged.
    Enqueue,
    /// Admit, with congestion signalled: set CE (RFC 3168) or the extension header's ECN bit.
    MarkCe,
    /// Probabilistic (early) drop of a packet that could not be marked.
    EarlyDrop,
    /// Deterministic drop by the policy (e.g. RED's `avg >= max_th`, sojourn `>= max_th`).
    ForcedDrop,
    /// The buffer is full.
    TailDrop,
}

impl Verdict {
    /// True when the packet joins the queue.
    pub const fn admits(self) -> bool {
        matches!(self, Verdict::Enqueue | Verdict::MarkCe)
    }
}

/// Per-cause counters every policy keeps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AqmStats {
    /// Packets admitted (marked ones included).
    pub enqueued: u64,
    /// Packets admitted with congestion signalled.
    pub marked: u64,
    /// Probabilistic (early) drops.
    pub early_drops: u64,
    /// Deterministic drops by the policy.
    pub forced_drops: u64,
    /// Drops because the packet did not fit.
    pub tail_drops: u64,
}

impl AqmStats {
    /// Counts one verdict (`marked` packets are counted in `enqueued` too).
    pub fn record(&mut self, v: Verdict) {
        match v {
            Verdict::Enqueue => self.enqueued += 1,
            Verdict::MarkCe => {
                self.enqueued += 1;
                self.marked += 1;
            }
            Verdict::EarlyDrop => self.early_drops += 1,
            Verdict::ForcedDrop => self.forced_drops += 1,
            Verdict::TailDrop => self.tail_drops += 1,
        }
    }
    /// Every packet counted: admitted plus dropped.
    pub fn arrivals(&self) -> u64 {
        self.enqueued + self.early_drops + self.forced_drops + self.tail_drops
    }
}

/// A parameter outside its allowed range.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("invalid AQM parameter `{param}` = {value}: expected {expected}")]
pub struct AqmConfigError {
    /// The parameter's name as written in config (e.g. `"max_p"`).
    pub param: &'static str,
    /// The offending value, formatted.
    pub value: String,
    /// The allowed range or rule, in words (e.g. `"0 < max_p <= 1"`).
    pub expected: String,
}

/// One uniform draw in `[0, 1)` from the caller's random source (53 random bits).
#[inline]
pub(crate) fn uniform<R: rand::RngCore + ?Sized>(rng: &mut R) -> f64 {
    (rng.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Bernoulli trial with probability `p`; draws only when `0 < p < 1`.
#[inline]
pub(crate) fn happens<R: rand::RngCore + ?Sized>(rng: &mut R, p: f64) -> bool {
    if p <= 0.0 {
        false
    } else if p >= 1.0 {
        true
    } else {
        uniform(rng) < p
    }
}

/// The verdict of an early decision that fired: `MarkCe` when the policy marks (`ecn`) and the
/// packet is markable, else `EarlyDrop` (forced and tail drops never come here).
#[inline]
pub(crate) fn early_verdict(ecn: bool, pkt: &PacketMeta) -> Verdict {
    if ecn && pkt.is_markable() {
        Verdict::MarkCe
    } else {
        Verdict::EarlyDrop
    }
}

/// A queue's admission policy.
///
/// `on_arrival` is called once per arriving packet, before it is queued; `on_dequeue` once
/// per packet leaving the queue (policies that do not need it ignore it).
pub trait Aqm {
    fn on_arrival<R: rand::RngCore + ?Sized>(
        &mut self,
        now: Nanos,
        rng: &mut R,
        queue: &QueueView,
        pkt: &PacketMeta,
    ) -> Verdict;

    /// The same decision for an arrival whose Zombie List observation was already made
    /// upstream, on the list this policy shares: the receive / transmit split of spec/06,
    /// where receive workers observe one shared list and the transmit side decides. SRED and
    /// ZL-RED use `obs` instead of observing again (so each packet enters the list once);
    /// policies without a Zombie List ignore it.
    fn on_arrival_observed<R: rand::RngCore + ?Sized>(
        &mut self,
        now: Nanos,
        rng: &mut R,
        queue: &QueueView,
        pkt: &PacketMeta,
        obs: &zl_zombie::Observation,
    ) -> Verdict {
        let _ = obs;
        self.on_arrival(now, rng, queue, pkt)
    }

    fn on_dequeue(&mut self, _now: Nanos, _queue: &QueueView, _pkt: &PacketMeta) {}

    fn stats(&self) -> &AqmStats;
}
