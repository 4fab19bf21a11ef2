//! Active queue management: the admission decision a queue makes for each arriving packet.
//!
//! Layers, bottom up (a module uses only those before it): `check` (the parameter checks
//! behind [`AqmConfigError`]), [`queues`] (the [`Discipline`] trait and the sub-queues of a
//! policy that holds its own packets), `isolation_params` (flow isolation's config); the
//! policies on one FIFO, [`tail_drop`], [`red`], [`sred`], [`sojourn`], [`codel`] (whose
//! state and millisecond checks the later ones reuse); those built on them, [`priority_ecn`]
//! and [`nonlinear_red`] on RED, [`nonlinear_model`] on nonlinear RED, [`pie`], [`zlred`] on
//! SRED (its parameters hold the isolation's); the policies that hold their own queues,
//! [`fq_codel`], [`dualpi2`], [`isolation`] (ZL-RED with flow isolation); `policy`
//! ([`AqmParams`] and [`AqmPolicy`], over them all).
//!
//! Contract: a policy implements [`Aqm`], its decision only. The caller (a per-class queue in
//! `zl-qos`, the data plane, or a simulator) describes one arrival ([`Arrival`]: the time, the
//! packet ([`PacketMeta`]), the queue it would join ([`QueueView`]) and, where the caller
//! observed a shared Zombie List upstream, that observation), passes a random source, and gets
//! a [`Verdict`] from [`Admission::admit`], which wraps the policy with the rules common to
//! every policy: the bounds check and the per-cause counters. The policy never reads a clock, never draws randomness of its own and never touches packet
//! bytes: applying `MarkCe` to the header is the caller's job (`zl_wire`). The crate has no I/O
//! dependency, so other data planes and the simulators embed it unchanged.
//!
//! Each policy goes through four types, as DPDK's `rte_red_params / rte_red_config / rte_red`:
//! `XParams` (serde, human units, from config) -> `XConfig` (validated, constants precomputed;
//! a bad value is an [`AqmConfigError`] naming the parameter and its allowed range) ->
//! the runtime state (the policy struct) -> [`AqmStats`] (counted per cause by [`Admission`]).
//!
//! Policies, one file each ([`AqmPolicy`] dispatches over them statically, [`AqmParams`] is the
//! serde-tagged config form, built with a [`BuildContext`]):
//!
//! | file | policy | `kind` | early decision on a markable packet |
//! |---|---|---|---|
//! | `tail_drop.rs` | drop-tail | `tail-drop` | (none) |
//! | `red.rs` | RED, docs/algorithms/red.md | `red` | mark (`ecn` default on) |
//! | `sred.rs` | SRED, docs/algorithms/sred.md | `sred` | drop (`ecn` default off) |
//! | `zlred.rs` | ZL-RED, docs/algorithms/zl-red.md | `zl-red` | drop (`ecn` default off) |
//! | `priority_ecn.rs` | priority-weighted ECN RED, docs/algorithms/priority-ecn-red.md | `priority-ecn-red` | mark (by design) |
//! | `nonlinear_red.rs` | exponential nonlinear RED, docs/algorithms/nonlinear-red.md | `nonlinear-red` | drop (`ecn` default off) |
//! | `sojourn.rs` | per-color sojourn-time manager, docs/algorithms/sojourn.md | `sojourn` | drop (`ecn` default off) |
//!
//! `nonlinear_model.rs` holds the 1-D discrete model of docs/algorithms/nonlinear-red.md (fixed
//! point, eq. 5).
//!
//! Common rules, in [`Admission`]: a packet that does not fit ([`QueueView::is_full_for`]) is
//! `TailDrop` without the policy deciding; forced and tail drops always drop, only early
//! decisions may mark.
//!
//! # Example: ZL-RED in front of another data plane's queue
//!
//! The embedding loop owns the clock, the random source and the queue; the policy only
//! decides. Here one heavy flow (5 % of the packets, 16 times a light flow's share) shares a
//! queue served slower than packets arrive with 300 light flows: ZL-RED's Zombie List singles
//! the heavy flow out and drops its packets far more often.
//!
//! ```
//! use rand::{rngs::StdRng, SeedableRng};
//! use zl_aqm::{Admission, Arrival, FlowId, Nanos, PacketMeta, QueueView, ZlRed, ZlRedParams};
//!
//! const CAPACITY: u32 = 300; // B, packets
//! // The paper's settings (p_max = 0.15, th_min = 5, M = 1000, ...) checked against B.
//! let cfg = ZlRedParams::default().validate(CAPACITY)?;
//! let mut aqm = Admission::new(ZlRed::new(cfg));
//! let mut rng = StdRng::seed_from_u64(1); // the data plane's random source, passed in
//!
//! let (mut queued, mut next_departure) = (0u32, 0u64);
//! let mut arrivals = [0u64; 2]; // [heavy, light]
//! let mut drops = [0u64; 2];
//! for k in 0..100_000u64 {
//!     let now = k * 1_000; // one arrival per microsecond, from the loop's own clock
//!     while queued > 0 && next_departure <= now {
//!         queued -= 1; // one departure per 1.1 microseconds: the link is 10 % overloaded
//!         next_departure += 1_100;
//!     }
//!     let heavy = k % 20 == 0;
//!     let flow = if heavy { 0 } else { 1 + k % 300 };
//!     let queue = QueueView {
//!         len_packets: queued,
//!         capacity_packets: CAPACITY,
//!         capacity_bytes: u64::MAX, // bounded in packets only
//!         ..QueueView::default()
//!     };
//!     let pkt = PacketMeta {
//!         len: 1000,
//!         flow: FlowId(flow.wrapping_mul(0x9E37_79B9_7F4A_7C15)), // the flow hash
//!         ..PacketMeta::default()
//!     };
//!     let verdict = aqm.admit(&Arrival::new(Nanos(now), &queue, &pkt), &mut rng);
//!     let class = usize::from(!heavy);
//!     arrivals[class] += 1;
//!     if verdict.admits() {
//!         if queued == 0 {
//!             next_departure = now + 1_100;
//!         }
//!         queued += 1;
//!     } else {
//!         drops[class] += 1; // early, forced or tail drop: `verdict` says which
//!     }
//! }
//!
//! let rate = |c: usize| drops[c] as f64 / arrivals[c] as f64;
//! assert!(rate(0) > 5.0 * rate(1), "heavy {} vs light {}", rate(0), rate(1));
//! let stats = aqm.stats();
//! assert_eq!(stats.arrivals(), 100_000);
//! assert_eq!(stats.arrivals() - stats.enqueued, drops[0] + drops[1]);
//! // 1/P(t), the Zombie List's estimate of the number of active flows.
//! let flows = aqm.policy().zombie_list().estimated_flows();
//! assert!(flows > 50.0, "estimate {flows}"); // 301 flows; it reads about 250 here
//! # Ok::<(), zl_aqm::AqmConfigError>(())
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod check;
pub mod codel;
pub mod dualpi2;
pub mod fq_codel;
pub mod isolation;
mod isolation_params;
pub mod nonlinear_model;
pub mod nonlinear_red;
pub mod pie;
mod policy;
pub mod priority_ecn;
pub mod queues;
pub mod red;
pub mod sojourn;
pub mod sred;
pub mod tail_drop;
pub mod zlred;

pub use codel::{Codel, CodelConfig, CodelParams, CodelState, CodelStats};
pub use dualpi2::{DualPi2, DualPi2Config, DualPi2Params, DualPi2Stats};
pub use fq_codel::{FqCodel, FqCodelConfig, FqCodelParams, FqCodelStats, HostIsolation};
pub use isolation::{
    BoxState, BoxedFlow, Isolated, IsolationConfig, IsolationStats, PenaltyEpisode,
};
pub use isolation_params::IsolationParams;
pub use nonlinear_red::{NonlinearRed, NonlinearRedConfig, NonlinearRedParams};
pub use pie::{Pie, PieConfig, PieEstimator, PieParams};
pub use policy::{AqmParams, AqmPolicy, BuildContext, QueueDiscipline};
pub use priority_ecn::{PriorityEcnRed, PriorityEcnRedConfig, PriorityEcnRedParams};
pub use queues::{Departure, Discard, Discipline, IsolateBy, Next, Queued, SubQueues};
pub use red::{CountTerm, QueueUnit, Red, RedConfig, RedParams, RedRegion};
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
    /// True when the packet carries the congestion-control extension header
    /// (docs/algorithms/wire.md; then a mark sets that header's ECN bit, and the packet is markable
    /// whatever `ecn` says).
    pub has_cc_ext: bool,
    /// Priority 0..=15 (docs/algorithms/priority-ecn-red.md: 8 lowest .. 15 highest); taken from
    /// the configured source.
    pub priority: u8,
    /// Priority weight `w` of docs/algorithms/priority-ecn-red.md (0 disables priority control).
    pub weight: u8,
    /// Drop precedence after metering (green when the class is not metered).
    pub color: Color,
    /// A 16-bit hash of the source address, for per-host isolation ([`IsolateBy::SrcHost`],
    /// FQ-CoDel's host modes); 0 where the caller does not parse it.
    pub src_host: u16,
    /// A 16-bit hash of the destination address, as `src_host`.
    pub dst_host: u16,
}

impl PacketMeta {
    /// True when an early decision may mark instead of drop (RFC 3168 ECT/CE, or the
    /// extension header of docs/algorithms/wire.md).
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
    /// (the sojourn manager of docs/algorithms/sojourn.md measures `now - head_enqueued_at`).
    /// Only the sojourn manager reads it ([`AqmPolicy::reads_head_time`]): a caller may leave
    /// it `None` for any other policy.
    pub head_enqueued_at: Option<Nanos>,
    /// When the queue last became empty, `Some` only while it is still empty
    /// (RED's idle decay, docs/algorithms/red.md, step 1).
    pub idle_since: Option<Nanos>,
}

impl QueueView {
    /// True when a packet of `len` bytes does not fit: it must be tail-dropped whatever
    /// the policy's average says (docs/algorithms/tail-drop.md).
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

/// Per-cause counters of one policy's verdicts, kept by its [`Admission`].
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

/// One arriving packet as a policy sees it: the time, the queue it would join (before it is
/// added), the packet, and, where the caller already observed a shared Zombie List, that
/// observation.
#[derive(Clone, Copy, Debug)]
pub struct Arrival<'a> {
    /// The time of the arrival.
    pub now: Nanos,
    /// The queue the packet would join, before it is added.
    pub queue: &'a QueueView,
    /// The arriving packet.
    pub pkt: &'a PacketMeta,
    /// The packet's observation of the Zombie List that SRED / ZL-RED use, made upstream:
    /// the receive / transmit split of docs/algorithms/zombie-list.md, where receive workers
    /// observe one shared list and the transmit side decides. `Some` makes those policies
    /// decide on it instead of observing again (so each packet enters the list once); `None`
    /// makes them observe their list themselves. Policies without a Zombie List ignore it.
    pub zombie: Option<&'a zl_zombie::Observation>,
}

impl<'a> Arrival<'a> {
    /// An arrival with no upstream Zombie List observation.
    #[inline]
    pub fn new(now: Nanos, queue: &'a QueueView, pkt: &'a PacketMeta) -> Self {
        Arrival {
            now,
            queue,
            pkt,
            zombie: None,
        }
    }

    /// The same arrival, carrying the observation `obs` made upstream.
    #[inline]
    pub fn observed(self, obs: &'a zl_zombie::Observation) -> Self {
        Arrival {
            zombie: Some(obs),
            ..self
        }
    }

    /// Copies of the packet and of the observation, for a call that is not inlined: an
    /// [`Arrival`] built on them (by the callee, or in a cold branch) leaves the caller's own
    /// packet and observation unborrowed by the call, so that a caller inlining the hot path
    /// keeps them in registers instead of writing them to its stack for a call it rarely makes.
    #[inline(always)]
    pub(crate) fn detached(&self) -> (PacketMeta, Option<zl_zombie::Observation>) {
        (*self.pkt, self.zombie.copied())
    }

    /// True when the packet does not fit its queue ([`QueueView::is_full_for`]).
    #[inline]
    pub fn overflows(&self) -> bool {
        self.queue.is_full_for(self.pkt.len)
    }
}

/// A queue's admission policy: its decision only. The bounds check and the counters belong to
/// the caller, written once in [`Admission`] (which the QoS engine and the simulators use).
///
/// Per arriving packet the caller calls exactly one of `decide` (the packet fits the buffer)
/// and `on_tail_drop` (it does not); `on_dequeue` once per packet leaving the queue. Policies
/// that do not need a hook leave its default.
pub trait Aqm {
    /// The verdict for an arrival that fits the buffer: `Enqueue`, `MarkCe`, `EarlyDrop` or
    /// `ForcedDrop`, never `TailDrop`.
    fn decide<R: rand::RngCore + ?Sized>(&mut self, arrival: &Arrival<'_>, rng: &mut R) -> Verdict;

    /// An arrival the caller tail-drops because it does not fit, without asking `decide`.
    /// Policies whose average counts every arrival (RED, priority-ECN RED, nonlinear RED, the
    /// sojourn manager) update it here; SRED and ZL-RED leave their Zombie List unobserved.
    #[inline]
    fn on_tail_drop(&mut self, _arrival: &Arrival<'_>) {}

    /// A packet left the queue (`queue` as it is after its departure).
    #[inline]
    fn on_dequeue(&mut self, _now: Nanos, _queue: &QueueView, _pkt: &PacketMeta) {}
}

/// A policy with the rules common to every policy: the bounds check and the per-cause
/// counters. A packet that does not fit ([`Arrival::overflows`]) is `TailDrop` whatever the
/// policy would say; every verdict is counted in [`AqmStats`].
#[derive(Clone, Debug, Default)]
pub struct Admission<P> {
    policy: P,
    stats: AqmStats,
}

impl<P: Aqm> Admission<P> {
    /// `policy` with its counters at zero.
    pub fn new(policy: P) -> Self {
        Admission {
            policy,
            stats: AqmStats::default(),
        }
    }

    /// The verdict for one arrival, counted.
    #[inline(always)]
    pub fn admit<R: rand::RngCore + ?Sized>(
        &mut self,
        arrival: &Arrival<'_>,
        rng: &mut R,
    ) -> Verdict {
        if arrival.overflows() {
            // The packet and the observation by value: the cold call then takes the address of
            // its own copies, not of the caller's (see [`Arrival::detached`]).
            let (pkt, zombie) = arrival.detached();
            return self.tail_drop(arrival.now, arrival.queue, pkt, zombie);
        }
        let v = self.policy.decide(arrival, rng);
        debug_assert_ne!(v, Verdict::TailDrop, "a policy decided a tail drop");
        // The common verdict by one compare instead of `record`'s jump table.
        if v == Verdict::Enqueue {
            self.stats.enqueued += 1;
        } else {
            self.stats.record(v);
        }
        v
    }

    /// Out of line: it dispatches to every policy's `on_tail_drop`, code that the decision
    /// path of a caller inlining [`Admission::admit`] should not carry (measured:
    /// docs/performance/zl-aqm.md).
    #[cold]
    #[inline(never)]
    fn tail_drop(
        &mut self,
        now: Nanos,
        queue: &QueueView,
        pkt: PacketMeta,
        zombie: Option<zl_zombie::Observation>,
    ) -> Verdict {
        let arrival = Arrival {
            now,
            queue,
            pkt: &pkt,
            zombie: zombie.as_ref(),
        };
        self.policy.on_tail_drop(&arrival);
        self.stats.tail_drops += 1;
        Verdict::TailDrop
    }

    /// A packet left the queue (`queue` as it is after its departure).
    #[inline]
    pub fn on_dequeue(&mut self, now: Nanos, queue: &QueueView, pkt: &PacketMeta) {
        self.policy.on_dequeue(now, queue, pkt);
    }

    /// The counters of every verdict so far.
    pub fn stats(&self) -> &AqmStats {
        &self.stats
    }

    /// Takes over counters kept so far (they go on across a reconfiguration).
    pub fn inherit_stats(&mut self, stats: AqmStats) {
        self.stats = stats;
    }

    /// The policy, for reading its own state (averages, the latest terms, its Zombie List).
    pub fn policy(&self) -> &P {
        &self.policy
    }

    /// The policy, for tests and simulators that set its state (e.g. hold an average).
    pub fn policy_mut(&mut self) -> &mut P {
        &mut self.policy
    }
}

impl Admission<AqmPolicy> {
    /// A live reconfiguration: this admission, built from the new parameters, takes over
    /// `old`'s counters (they go on, as counters must) and, where it is the same policy,
    /// its running state ([`AqmPolicy::inherit_state`]).
    pub fn take_over(&mut self, old: &Admission<AqmPolicy>) {
        self.stats = old.stats;
        self.policy.inherit_state(&old.policy);
    }
}
