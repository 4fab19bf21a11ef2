//! The plain-data types of the C ABI: results as enums, inputs and parameters as `#[repr(C)]`
//! structs of fixed-width fields. Fields that C would write as enums or `bool` are `uint8_t`
//! here and range-checked on every call, so that no value a C program can store is undefined
//! behaviour on this side.

#![allow(non_camel_case_types)]

/// No time: `ZlArrival::head_enqueued_ns` when the queue is empty, `ZlArrival::idle_since_ns`
/// when it is not.
pub const ZL_NO_TIME: u64 = u64::MAX;

/// A queue bounded only in bytes (`ZlQueueParams::capacity_packets`).
pub const ZL_UNBOUNDED_PACKETS: u32 = u32::MAX;

/// A queue bounded only in packets (`ZlQueueParams::capacity_bytes`).
pub const ZL_UNBOUNDED_BYTES: u64 = u64::MAX;

/// The result of every call that can fail. `ZL_OK` is 0; every other value is a misuse or a
/// refused configuration, and `zl_last_error` then describes it.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ZlStatus {
    /// Success.
    ZL_OK = 0,
    /// A required pointer argument was null.
    ZL_ERR_NULL = 1,
    /// A parameter or field was outside its allowed range (the message names it).
    ZL_ERR_PARAM = 2,
    /// The TOML text did not parse or named an unknown kind or key.
    ZL_ERR_CONFIG = 3,
    /// The policy has no Zombie List (only SRED and ZL-RED have one).
    ZL_ERR_NO_ZOMBIE_LIST = 4,
}

/// The admission decision for one arriving packet (`zl_aqm::Verdict`), or a misuse.
///
/// Every value `>= ZL_VERDICT_EARLY_DROP` means the packet is not queued, so
/// `v >= ZL_VERDICT_EARLY_DROP` is the whole drop test; the causes are apart so the caller's
/// counters can be per cause.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ZlVerdict {
    /// Admit unchanged.
    ZL_VERDICT_ENQUEUE = 0,
    /// Admit with congestion signalled: set CE (RFC 3168), or the extension header's ECN bit
    /// when `has_cc_ext` was set. Only early decisions mark, and only markable packets.
    ZL_VERDICT_MARK = 1,
    /// Probabilistic (early) drop of a packet that was not marked instead.
    ZL_VERDICT_EARLY_DROP = 2,
    /// Deterministic drop by the policy (RED above `max_th`, sojourn above its maximum).
    ZL_VERDICT_FORCED_DROP = 3,
    /// The packet does not fit the queue's capacity.
    ZL_VERDICT_TAIL_DROP = 4,
    /// Misuse: a null pointer or an out-of-range field in the arrival. Nothing was counted and
    /// no state changed; drop the packet and see `zl_last_error`.
    ZL_VERDICT_INVALID_ARGUMENT = 5,
}

/// Which policy a `ZlAqm` runs (the `kind` of its TOML table).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ZlAqmKind {
    /// `tail-drop`.
    ZL_AQM_TAIL_DROP = 0,
    /// `red`: RED / ECN (Floyd & Jacobson 1993).
    ZL_AQM_RED = 1,
    /// `sred`: Stabilized RED (Ott, Lakshman, Wong 1999).
    ZL_AQM_SRED = 2,
    /// `zl-red`: ZL-RED (Kurata, Hasegawa, Murata).
    ZL_AQM_ZL_RED = 3,
    /// `priority-ecn-red`: priority-weighted ECN RED.
    ZL_AQM_PRIORITY_ECN_RED = 4,
    /// `nonlinear-red`: exponential nonlinear RED.
    ZL_AQM_NONLINEAR_RED = 5,
    /// `sojourn`: the per-color sojourn-time manager.
    ZL_AQM_SOJOURN = 6,
}

/// One arriving packet and the queue it would join, as seen before it is added.
///
/// Start from `zl_arrival_default` and set what the policy reads: every policy reads
/// `queue_packets`, `queue_bytes` and `packet_len` (the capacity check); SRED and ZL-RED
/// `flow_hash`; RED `idle_since_ns`; ECN marking `ecn` / `has_cc_ext`; priority-ECN RED
/// `priority` and `weight`; the sojourn manager `color` and `head_enqueued_ns`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZlArrival {
    /// The packet's flow, hashed to 64 bits by the caller (any good hash of the flow key).
    pub flow_hash: u64,
    /// Arrival time, nanoseconds on the caller's monotonic clock.
    pub now_ns: u64,
    /// Bytes queued now (before this packet).
    pub queue_bytes: u64,
    /// Enqueue time of the packet at the head, or `ZL_NO_TIME` when the queue is empty.
    pub head_enqueued_ns: u64,
    /// When the queue last became empty, while it still is; otherwise `ZL_NO_TIME`.
    pub idle_since_ns: u64,
    /// Packets queued now (before this packet).
    pub queue_packets: u32,
    /// Bytes this packet occupies in the queue.
    pub packet_len: u32,
    /// The RFC 3168 ECN field as received, 0..=3 (0 Not-ECT, 1 ECT(1), 2 ECT(0), 3 CE).
    pub ecn: u8,
    /// Drop precedence after metering: 0 green, 1 yellow, 2 red.
    pub color: u8,
    /// Priority 0..=15 (priority-ECN RED: 8 lowest .. 15 highest).
    pub priority: u8,
    /// Priority weight `w` of priority-ECN RED (0 disables priority control).
    pub weight: u8,
    /// 1 when the packet carries priority-ECN RED's congestion-control extension header, else 0.
    pub has_cc_ext: u8,
}

/// The egress queue a policy serves: what the per-packet call does not repeat.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZlQueueParams {
    /// Capacity `B` in packets, `>= 1` (`ZL_UNBOUNDED_PACKETS`: bytes only; SRED and ZL-RED
    /// need a finite `B`, their thresholds are `B/6` and `B/3`).
    pub capacity_packets: u32,
    /// Capacity in bytes, `>= 1` (`ZL_UNBOUNDED_BYTES`: packets only).
    pub capacity_bytes: u64,
    /// Egress link rate, bit/s (RED's idle decay; `> 0` for RED and priority-ECN RED).
    pub link_rate_bps: u64,
}

/// Zombie List parameters (SRED's Zombie List; `zl_zombie::ZombieParams`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ZlZombieParams {
    /// M, the number of zombies, `1..=4194304`. Default 1000.
    pub m: u32,
    /// Probability that a miss overwrites the drawn zombie, `0..=1`. Default 0.25.
    pub p_swap: f64,
    /// EWMA weight of the hit frequency `P(t)`, `0 < alpha <= 1`; 0 means the default `1/M`.
    pub alpha: f64,
    /// How F and T are computed: 0 the O(1) occurrence table (default), 1 a scan of all M
    /// zombies per packet (the paper's rejected baseline, for comparison only).
    pub occurrence: u8,
}

/// RED parameters (`zl_aqm::RedParams`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ZlRedParams {
    /// Lower threshold on the average queue, in `unit`s, `>= 0`. Default 5.
    pub min_th: f64,
    /// Upper threshold, `> min_th`. Default 15.
    pub max_th: f64,
    /// Drop/mark probability at `max_th`, `0 < max_p <= 1`. Default 0.02.
    pub max_p: f64,
    /// EWMA weight of the average queue, `0 < w_q <= 1`. Default 0.002.
    pub w_q: f64,
    /// Size of the typical small packet whose transmission time sets the idle decay, bytes,
    /// `> 0`. Default 500.
    pub idle_packet_bytes: u32,
    /// 1: ramp `max_p -> 1` between `max_th` and `2 max_th` (gentle RED). Default 0.
    pub gentle: u8,
    /// 1: mark markable packets instead of dropping them on early decisions. Default 1.
    pub ecn: u8,
    /// What the thresholds count: 0 packets (default), 1 bytes.
    pub unit: u8,
}

/// SRED parameters (`zl_aqm::SredParams`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ZlSredParams {
    /// `0 < p_max <= 1`. Default 0.15.
    pub p_max: f64,
    /// 1: mark markable packets instead of dropping them. Default 0.
    pub ecn: u8,
    /// The policy's own Zombie List, used when no shared list is given (validated either way).
    pub zombie: ZlZombieParams,
}

/// ZL-RED parameters (`zl_aqm::ZlRedParams`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ZlZlredParams {
    /// `0 < p_max <= 1`. Default 0.15.
    pub p_max: f64,
    /// Start of probabilistic drop, packets, `0 <= th_min < B/3`. Default 5.
    pub th_min: f64,
    /// Misbehaving-flow multiplier, `1 <= a <= 1000`. Default 1.
    pub a: f64,
    /// 1: mark markable packets instead of dropping them. Default 0.
    pub ecn: u8,
    /// The policy's own Zombie List, used when no shared list is given (validated either way).
    pub zombie: ZlZombieParams,
}

/// A policy's counters, per cause (`zl_aqm::AqmStats`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ZlAqmStats {
    /// Packets admitted (marked ones included).
    pub enqueued: u64,
    /// Packets admitted with congestion signalled.
    pub marked: u64,
    /// Early (probabilistic) drops.
    pub early_drops: u64,
    /// Forced (deterministic) drops by the policy.
    pub forced_drops: u64,
    /// Drops because the packet did not fit.
    pub tail_drops: u64,
}

/// What a Zombie List knows about the traffic it has seen.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ZlZombieStats {
    /// `P(t)`, the hit frequency (with several threads, the mean of their estimates).
    pub hit_frequency: f64,
    /// `1/P(t)`, SRED's estimate of the number of active flows; `+inf` while `P(t) = 0`.
    pub estimated_flows: f64,
    /// T, the total occurrence.
    pub total_occurrence: u64,
    /// Updates skipped because the occurrence table was full (counted, never silent).
    pub table_full_events: u64,
}
