//! The plain-data types of the C ABI: results as enums, inputs and parameters as `#[repr(C)]`
//! structs of fixed-width fields. Fields that C would write as enums or `bool` are `uint8_t`
//! here and range-checked on every call, so that no value a C program can store is undefined
//! behaviour on this side.

#![allow(non_camel_case_types)]

use std::ffi::c_void;

/// The major version of the ABI this header describes (`zl_aqm_capi_version`).
pub const ZL_AQM_CAPI_VERSION_MAJOR: u32 = 0;

/// The minor version of the ABI this header describes; with major version 0, two minor
/// versions may differ in their ABI.
pub const ZL_AQM_CAPI_VERSION_MINOR: u32 = 2;

/// No time: `ZlArrival::head_enqueued_ns` when the queue is empty, `ZlArrival::idle_since_ns`
/// when it is not.
pub const ZL_NO_TIME: u64 = u64::MAX;

/// A queue bounded only in bytes (`ZlQueueParams::capacity_packets`).
pub const ZL_UNBOUNDED_PACKETS: u32 = u32::MAX;

/// A queue bounded only in packets (`ZlQueueParams::capacity_bytes`).
pub const ZL_UNBOUNDED_BYTES: u64 = u64::MAX;

/// The latest time a call accepts, `2^63 - 1` ns (292 years of a monotonic clock): the
/// policies add their intervals to `now_ns`, and this leaves those sums far from overflow.
pub const ZL_MAX_NOW_NS: u64 = i64::MAX as u64;

/// The most packets a `ZlQdisc` holds (`ZlQueueParams::capacity_packets`, which must be finite
/// for a discipline: its packet slots are reserved when it is created).
pub const ZL_QDISC_MAX_PACKETS: u32 = 1 << 22;

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
    /// A `ZlQdisc` was called from inside its own discard callback (nothing was done).
    ZL_ERR_REENTRANT = 5,
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
    /// `pie`: PIE (RFC 8033). Its default delay estimator measures the dequeue rate: call
    /// `zl_aqm_depart` for every packet that leaves the queue.
    ZL_AQM_PIE = 7,
}

/// One arriving packet and the queue it would join, as seen before it is added.
///
/// Start from `zl_arrival_default` and set what the policy reads: every policy reads
/// `queue_packets`, `queue_bytes` and `packet_len` (the capacity check); SRED and ZL-RED
/// `flow_hash`; RED `idle_since_ns`; ECN marking `ecn` / `has_cc_ext`; priority-ECN RED
/// `priority` and `weight`; the sojourn manager and PIE's timestamp estimator
/// `head_enqueued_ns`, the sojourn manager `color`. A `ZlQdisc` keeps its own queue and
/// ignores the four queue fields; it reads `flow_hash`, `now_ns`, `packet_len`, `ecn`,
/// `has_cc_ext`, and for per-host isolation `src_host` / `dst_host`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZlArrival {
    /// The packet's flow, hashed to 64 bits by the caller (any good hash of the flow key).
    pub flow_hash: u64,
    /// Arrival time, nanoseconds on the caller's monotonic clock, `<= ZL_MAX_NOW_NS`.
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
    /// A 16-bit hash of the source address (any good hash; 0 when not parsed): the host of
    /// FQ-CoDel's host modes and of the isolation's `by = "srchost"`.
    pub src_host: u16,
    /// A 16-bit hash of the destination address, as `src_host`.
    pub dst_host: u16,
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

/// PIE parameters (`zl_aqm::PieParams`, RFC 8033).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ZlPieParams {
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
    /// Bytes of departures per rate measurement, `>= 1500`. Default 16384.
    pub dq_threshold_bytes: u32,
    /// 1: mark ECN-capable packets while the drop probability is at most 0.1. Default 0.
    pub ecn: u8,
    /// The queueing delay estimate: 0 the dequeue rate (RFC 8033 §4.3, default; needs
    /// `zl_aqm_depart` per departure), 1 the head packet's sojourn (needs
    /// `ZlArrival::head_enqueued_ns`).
    pub estimator: u8,
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

/// Which discipline a `ZlQdisc` runs (the `kind` of its TOML table).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ZlQdiscKind {
    /// `codel`: CoDel on one FIFO (RFC 8289).
    ZL_QDISC_CODEL = 0,
    /// `fq-codel`: FQ-CoDel (RFC 8290), with CAKE's host modes.
    ZL_QDISC_FQ_CODEL = 1,
    /// `dualpi2`: the DualQ Coupled AQM (RFC 9332).
    ZL_QDISC_DUALPI2 = 2,
    /// `zl-red` with an `isolation` table: ZL-RED with flow isolation.
    ZL_QDISC_ZL_RED_ISOLATION = 3,
}

/// Why a `ZlQdisc` hands a packet it had taken back through its discard callback.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ZlDiscardCause {
    /// Its AQM dropped it as it left (CoDel's control law, DualPI2's drops).
    ZL_DISCARD_DEQUEUE = 0,
    /// An arrival found the buffer full and it was pushed out to make room (FQ-CoDel drops
    /// from the head of the fattest queue; that can be the arriving packet itself).
    ZL_DISCARD_OVERFLOW = 1,
    /// Still queued when the qdisc was freed (`zl_qdisc_free`); never sent, not a drop.
    ZL_DISCARD_FREE = 2,
}

/// The discard callback of a `ZlQdisc`: called once for each packet the qdisc had taken and
/// hands back unsent, with the context pointer given at creation, the packet's handle and the
/// cause. The packet is the caller's again (free it, count it). It must return normally and
/// must not call any `zl_qdisc_*` function on the same qdisc (such a call returns
/// `ZL_ERR_REENTRANT` or its invalid-argument result and does nothing).
pub type ZlDiscardFn =
    Option<unsafe extern "C" fn(ctx: *mut c_void, handle: u64, cause: ZlDiscardCause)>;

/// What `zl_qdisc_dequeue` found.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ZlDequeueStatus {
    /// A packet to send now: `ZlDeparture::handle` (set CE on it first when `mark` is 1).
    ZL_DEQUEUE_PACKET = 0,
    /// Packets are queued but none may leave before `ZlDeparture::hold_until_ns` (the
    /// isolation's rate-limited penalty queues); ask again then, or when a packet arrives.
    ZL_DEQUEUE_HOLD = 1,
    /// Nothing is queued.
    ZL_DEQUEUE_EMPTY = 2,
    /// Misuse: a null pointer, an out-of-range time, or a call from the discard callback.
    /// Nothing changed; see `zl_last_error`.
    ZL_DEQUEUE_INVALID_ARGUMENT = 3,
}

/// The packet `zl_qdisc_dequeue` hands out, or how long to wait.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ZlDeparture {
    /// The packet's handle, as given to `zl_qdisc_enqueue` (0 unless `ZL_DEQUEUE_PACKET`).
    pub handle: u64,
    /// When it was enqueued (`ZL_NO_TIME` unless `ZL_DEQUEUE_PACKET`); its sojourn is
    /// `now_ns - enqueued_ns`.
    pub enqueued_ns: u64,
    /// With `ZL_DEQUEUE_HOLD`, the time before which no packet may leave; else `ZL_NO_TIME`.
    pub hold_until_ns: u64,
    /// Its length as enqueued (0 unless `ZL_DEQUEUE_PACKET`).
    pub packet_len: u32,
    /// 1 when the discipline signals congestion on it: set CE (or the extension header's ECN
    /// bit) before sending. Only ever 1 for a markable packet.
    pub mark: u8,
}

/// CoDel's counters (`zl_aqm::CodelStats`): of the one queue of `codel`, summed over the flow
/// queues of `fq-codel`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ZlCodelStats {
    /// Packets the control law dropped as they left.
    pub dropped: u64,
    /// Packets it marked instead of dropping.
    pub ecn_marks: u64,
    /// The largest packet seen, bytes (the MTU of the one-MTU test).
    pub maxpacket: u32,
}

/// FQ-CoDel's own counters (`zl_aqm::FqCodelStats`, as `tc -s qdisc` prints them).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ZlFqCodelStats {
    /// Queues that became active (joined the new-flows list).
    pub new_flow_count: u64,
    /// Packets dropped from the fattest queue because the buffer was full.
    pub drop_overlimit: u64,
    /// Queues on the new-flows list now.
    pub new_flows_len: u32,
    /// Queues on the old-flows list now.
    pub old_flows_len: u32,
}

/// DualPI2's counters and controller (`zl_aqm::DualPi2Stats`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ZlDualPi2Stats {
    /// Packets classified into the L queue (ECT(1) or CE).
    pub l_packets: u64,
    /// Packets classified into the C queue.
    pub c_packets: u64,
    /// L packets marked by the step (sojourn above `step_thresh_ms`).
    pub step_marks: u64,
    /// L packets marked with the coupled probability `k p'`.
    pub coupled_marks: u64,
    /// C packets marked with `p'^2`.
    pub classic_marks: u64,
    /// C packets dropped with `p'^2`.
    pub classic_drops: u64,
    /// L packets dropped (overload, or not ECN-capable over the step).
    pub l4s_drops: u64,
    /// The base probability `p'` of the PI controller.
    pub base_probability: f64,
    /// The classic queue's drop/mark probability `p_C = p'^2`.
    pub classic_probability: f64,
    /// The L queue's coupled mark probability `p_CL = min(k p', 1)`.
    pub l4s_probability: f64,
    /// Packets in the L queue now.
    pub l_queue_packets: u32,
    /// Packets in the C queue now.
    pub c_queue_packets: u32,
}

/// The isolation's counters and estimates (`zl_aqm::IsolationStats` and `Isolated`'s
/// accessors).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ZlIsolationStats {
    /// Flows flagged by eq. (4) into the box (watched).
    pub flagged: u64,
    /// Watched flows confirmed and penalized.
    pub penalized: u64,
    /// Watched flows let go without a penalty.
    pub cleared: u64,
    /// Penalized flows released.
    pub released: u64,
    /// Flags that found the box full.
    pub box_full: u64,
    /// Arrivals of penalized flows over their share of the penalty buffer (dropped).
    pub over_share_drops: u64,
    /// Packets sent from the penalty queue.
    pub penalty_sent: u64,
    /// The fair share `r / N` now, bit/s (0 before the first window).
    pub fair_share_bps: f64,
    /// The class's measured service rate `r`, bit/s.
    pub class_rate_bps: f64,
    /// N, the estimate of the active flows (0 before the first window).
    pub flows_estimate: f64,
    /// The normal queue's ZL-RED verdicts.
    pub normal: ZlAqmStats,
    /// The penalty queues' ZL-RED verdicts.
    pub penalty: ZlAqmStats,
    /// Flows penalized now.
    pub penalized_now: u32,
    /// Packets in the normal queue now.
    pub normal_queue_packets: u32,
    /// Packets in the penalty queues now.
    pub penalty_queue_packets: u32,
    /// Packets CoDel dropped from the normal queue as they left (handed back with
    /// `ZL_DISCARD_DEQUEUE`).
    pub normal_codel_drops: u64,
    /// Packets CoDel marked instead of dropping them (`ZlDeparture::mark`).
    pub normal_codel_marks: u64,
}

/// A `ZlQdisc`'s counters: what every discipline counts (per cause), then its own, in the
/// member its `kind` names (the other members are zero).
///
/// Every handle taken (`enqueued`) is handed back once: `dequeued`, `dequeue_drops`,
/// `overflow_drops`, or still queued (`zl_qdisc_len`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ZlQdiscStats {
    /// The discipline.
    pub kind: ZlQdiscKind,
    /// Arrivals taken (`ZL_VERDICT_ENQUEUE` or `ZL_VERDICT_MARK`).
    pub enqueued: u64,
    /// Arrivals taken with `ZL_VERDICT_MARK` (an enqueue-time mark: the isolation's ZL-RED).
    pub marked_on_enqueue: u64,
    /// Arrivals refused by an early (probabilistic) drop.
    pub early_drops: u64,
    /// Arrivals refused by a forced drop (the isolation's penalty share).
    pub forced_drops: u64,
    /// Arrivals refused because the buffer was full.
    pub tail_drops: u64,
    /// Packets handed out by `zl_qdisc_dequeue`.
    pub dequeued: u64,
    /// Packets handed out with `mark` = 1.
    pub marked_on_dequeue: u64,
    /// Packets handed back with `ZL_DISCARD_DEQUEUE`.
    pub dequeue_drops: u64,
    /// Packets handed back with `ZL_DISCARD_OVERFLOW`.
    pub overflow_drops: u64,
    /// CoDel's counters (`codel`, `fq-codel`).
    pub codel: ZlCodelStats,
    /// FQ-CoDel's (`fq-codel`).
    pub fq_codel: ZlFqCodelStats,
    /// DualPI2's (`dualpi2`).
    pub dualpi2: ZlDualPi2Stats,
    /// The isolation's (`zl-red` with `isolation`).
    pub isolation: ZlIsolationStats,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The header's version constants are the crate's version, which `zl_aqm_capi_version`
    /// returns: a layout change comes with a new minor version of both.
    #[test]
    fn header_version_is_the_crate_version() {
        assert_eq!(
            ZL_AQM_CAPI_VERSION_MAJOR.to_string(),
            env!("CARGO_PKG_VERSION_MAJOR")
        );
        assert_eq!(
            ZL_AQM_CAPI_VERSION_MINOR.to_string(),
            env!("CARGO_PKG_VERSION_MINOR")
        );
        // The layout of this minor version's per-packet struct: 5 times 8 bytes, 2 times 4,
        // 2 times 2, 5 bytes, padded to 8.
        assert_eq!(std::mem::size_of::<ZlArrival>(), 64);
        assert_eq!(std::mem::offset_of!(ZlArrival, src_host), 48);
    }
}
