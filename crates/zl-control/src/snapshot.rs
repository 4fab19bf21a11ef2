//! One typed snapshot of a router's counters, taken at one instant by the thread that owns
//! them: what the final table ([`crate::report`]), the JSON output (`zlrouter run --json`,
//! `GET /stats.json`, `zlrouter stats --json`) and the Prometheus endpoint
//! ([`crate::metrics`]) all read, so the three cannot disagree and a scrape sees one
//! consistent picture (the conservation identity holds in every snapshot of the
//! single-thread loop; see [`TotalsSnapshot::in_flight`] for the threaded one).
//!
//! The JSON schema is this module's types as serde writes them (documented with examples in
//! docs/operations.md). [`SCHEMA_VERSION`] changes when a field is removed or changes
//! meaning; new fields (a new drop cause, new per-port counters) are added without a change,
//! so readers must ignore fields they do not know. Drop causes are a map keyed by
//! [`DropCause::name`], so a cause added to [`DropCause::ALL`] appears everywhere at once.

use std::collections::BTreeMap;

use serde::Serialize;
use zl_aqm::{AqmPolicy, BoxState, QueueDiscipline};
use zl_core::{Color, FlowId, Nanos};
use zl_port::PortCounters;
use zl_qos::{ColorStats, SojournHistogram, SOJOURN_BUCKETS};
use zl_wire::FlowKeyKind;

use zl_dataplane::capture::CaptureStats;
use zl_dataplane::dataplane::QLEN_BUCKETS;
use zl_dataplane::icmp::{IcmpCounters, IcmpKind};
use zl_dataplane::key_text;
pub use zl_dataplane::view::FibSnapshot;
use zl_dataplane::RouterView;
use zl_dataplane::{DropCause, FateCounters};

/// The schema's version (the `schema` field).
pub const SCHEMA_VERSION: u32 = 1;

/// Everything the table, the JSON output and the metrics endpoint show.
#[derive(Clone, Debug, Serialize)]
pub struct Snapshot {
    pub schema: u32,
    /// The loop's clock when taken (virtual or monotonic), seconds.
    pub time_s: f64,
    pub ports: Vec<PortSnapshot>,
    pub totals: TotalsSnapshot,
    pub groups: Vec<GroupSnapshot>,
    /// The drop capture's counters (`[capture]`; absent without one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capture: Option<CaptureStats>,
    /// The ICMP errors the router sent and held back (`crate::icmp`).
    pub icmp: IcmpSnapshot,
    /// Kernel routing: how the forwarding table follows the kernel's (absent with static
    /// routes).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fib: Option<FibSnapshot>,
}

/// ICMP errors from the router: frames it originates (in the ingress ports' `tx_packets`),
/// outside the totals' identity. `sent` by type (`time_exceeded`, `unreachable`,
/// `too_big`); the rest count errors that were due and not sent, by reason.
#[derive(Clone, Debug, Serialize)]
pub struct IcmpSnapshot {
    pub sent: BTreeMap<&'static str, u64>,
    /// The rate limit held it (`icmp.ratelimit_ms`, `icmp.msgs_per_sec`).
    pub rate_limited: u64,
    /// RFC 1812 / RFC 4443 forbid it (about an ICMP error, a non-first fragment, a multicast
    /// or broadcast packet, a source that names no single host).
    pub suppressed: u64,
    /// The ingress port has no address of the packet's IP version.
    pub no_source_address: u64,
    /// The frame could not hold it, or the port's send batch was full.
    pub no_room: u64,
}

impl IcmpSnapshot {
    fn of(c: &IcmpCounters) -> Self {
        IcmpSnapshot {
            sent: IcmpKind::ALL
                .iter()
                .map(|&k| (k.name(), c.sent_of(k)))
                .collect(),
            rate_limited: c.rate_limited,
            suppressed: c.suppressed,
            no_source_address: c.no_source_address,
            no_room: c.no_room,
        }
    }
}

/// One port: its I/O counters and its egress (classes, Zombie List).
#[derive(Clone, Debug, Serialize)]
pub struct PortSnapshot {
    pub name: String,
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub rx_no_buffer: u64,
    pub rx_ring_full: u64,
    pub rx_too_long: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    pub tx_ring_full: u64,
    pub tx_no_buffer: u64,
    pub tx_errors: u64,
    pub tx_link_gone: u64,
    /// Times the port's interface went away, and times the port re-attached to it (AF_XDP
    /// ports with `on_gone = "wait"`; 0 for the others).
    pub link_gone_events: u64,
    pub link_reattached: u64,
    pub classifier: ClassifierSnapshot,
    /// The egress Zombie List, when the port has one.
    pub zombie: Option<ZombieSnapshot>,
    pub classes: Vec<ClassSnapshot>,
    /// The flows with the largest occurrence F in the port's Zombie List, largest first
    /// (`metrics.top_flows` rows; empty without a list).
    pub top_flows: Vec<FlowSnapshot>,
}

/// One flow of a port's top list (see `crate::flows`).
#[derive(Clone, Debug, PartialEq, Serialize, serde::Deserialize)]
pub struct FlowSnapshot {
    /// The flow's 64-bit id (the hash the Zombie List keys), hex.
    pub id: String,
    /// The key fields the id hashes, as text (`10.0.9.1 > 192.0.2.10` for `src-dst`);
    /// `null` when the flow is in the list but not tracked (see `crate::flows`).
    pub key: Option<String>,
    pub src: Option<String>,
    pub dst: Option<String>,
    pub protocol: Option<u8>,
    pub src_port: Option<u16>,
    pub dst_port: Option<u16>,
    /// The generator flow group its packets belong to, when generated.
    pub group: Option<String>,
    /// F: its occurrence in the list.
    pub occurrence: u64,
    /// F / T: its share of the list.
    pub share: f64,
    /// F / (T P(t)): its occurrence over the mean occurrence per flow (1 = its fair share).
    pub relative_occurrence: f64,
    /// Eq. (4) of ZL-RED, docs/algorithms/zl-red.md: `F > T P(t)`.
    pub misbehaving: bool,
    /// Since when its counters count (the loop's clock, seconds); `null` when not tracked.
    pub first_seen_s: Option<f64>,
    /// Packets offered to this egress since first seen.
    pub packets: u64,
    pub bytes: u64,
    pub marked: u64,
    /// Drops at this egress since first seen, by cause.
    pub drops: BTreeMap<String, u64>,
    /// Its place in a class's penalty box (ZL-RED with isolation): `watched` (flagged by
    /// eq. 4, its rate being measured) or `penalized` (in a penalty sub-queue); absent
    /// otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub penalty: Option<String>,
}

/// The egress classifier's counters (`zl_qos::ClassifierStats`).
#[derive(Clone, Copy, Debug, Serialize)]
pub struct ClassifierSnapshot {
    /// Code points without a table entry (sent to the default class).
    pub unmapped: u64,
    /// Packets without a parsable code point (sent to the default class).
    pub unparsed: u64,
    /// Packets with a class index the engine does not have (dropped).
    pub invalid_class: u64,
}

/// A port's Zombie List.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct ZombieSnapshot {
    /// Active flows estimated as 1/P(t) (`null` in JSON while P(t) = 0).
    pub estimated_flows: f64,
    /// Updates the occurrence table had no entry for (the list unchanged; see
    /// `ZombieList::table_full_events`).
    pub table_full_events: u64,
}

/// One class of a port's egress.
#[derive(Clone, Debug, Serialize)]
pub struct ClassSnapshot {
    pub name: String,
    /// The class's AQM (`kind` as configured; `by-color` for one policy per color).
    pub aqm: &'static str,
    /// The state of a policy that keeps one worth showing (PIE, CoDel, FQ-CoDel, DualPI2,
    /// ZL-RED with isolation); absent for the others.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub discipline: Option<DisciplineSnapshot>,
    /// Queue length now.
    pub backlog_packets: u32,
    pub backlog_bytes: u64,
    /// Per color, in the order green, yellow, red.
    pub colors: Vec<ColorSnapshot>,
    /// Queue-length samples: `buckets[0]` empty, `buckets[k]` 2^(k-1) .. 2^k - 1 packets.
    pub queue_length: Option<QueueLengthSnapshot>,
}

/// One color of a class.
#[derive(Clone, Debug, Serialize)]
pub struct ColorSnapshot {
    pub color: &'static str,
    /// Packets offered to the class's AQM (`enqueued` + its drops).
    pub arrived: u64,
    pub enqueued: u64,
    pub enqueued_bytes: u64,
    pub sent: u64,
    pub sent_bytes: u64,
    pub marked: u64,
    pub early_drops: u64,
    pub forced_drops: u64,
    pub tail_drops: u64,
    /// Admitted, then discarded still queued at the end of the run (not in `sent`).
    pub shutdown_drops: u64,
    /// Admitted, then dropped by the class's AQM as it left (CoDel's control law, DualPI2's
    /// classic drop): `enqueued = sent + shutdown_drops + dequeue_drops + overflow_drops +`
    /// the backlog.
    pub dequeue_drops: u64,
    /// Admitted, then pushed out of a full buffer by a later arrival (FQ-CoDel).
    pub overflow_drops: u64,
    pub sojourn: SojournSnapshot,
}

/// What a class's policy shows of its own state.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum DisciplineSnapshot {
    /// PIE (RFC 8033).
    Pie {
        drop_prob: f64,
        /// The delay estimate at the last update, seconds.
        qdelay_s: f64,
        /// The measured dequeue rate, bytes per second (0 before a measurement).
        dequeue_rate_bps: f64,
        burst_allowance_s: f64,
    },
    /// CoDel (RFC 8289).
    Codel {
        dropping: bool,
        count: u32,
        drops: u64,
        ecn_marks: u64,
    },
    /// FQ-CoDel (RFC 8290), as `tc -s qdisc show` prints `fq_codel`.
    FqCodel {
        isolate: &'static str,
        new_flow_count: u64,
        drop_overlimit: u64,
        codel_drops: u64,
        ecn_marks: u64,
        new_flows_len: u32,
        old_flows_len: u32,
    },
    /// DualPI2 (RFC 9332).
    #[serde(rename = "dualpi2")]
    DualPi2 {
        /// The base probability p'; classic packets see p'^2, L4S ones k p'.
        base_prob: f64,
        l_queue: u32,
        c_queue: u32,
        l_packets: u64,
        c_packets: u64,
        step_marks: u64,
        coupled_marks: u64,
        classic_marks: u64,
        classic_drops: u64,
        l4s_drops: u64,
    },
    /// ZL-RED with flow isolation (docs/algorithms/zl-isolation.md).
    #[serde(rename = "zl-red-isolation")]
    Isolation(IsolationSnapshot),
}

/// The penalty box of a ZL-RED class with isolation.
#[derive(Clone, Debug, Serialize)]
pub struct IsolationSnapshot {
    /// `flow`, `srchost` or `dsthost`.
    pub by: &'static str,
    /// Flows (or hosts) penalized now.
    pub penalized: u32,
    /// The fair share the penalty sub-queues are each held to, bit/s, and what it comes from:
    /// the class's service rate and the estimate N of its active flows.
    pub fair_share_bps: f64,
    pub class_rate_bps: f64,
    pub flows_estimate: f64,
    pub normal_queue: u32,
    pub penalty_queue: u32,
    /// Flagged by eq. (4) into the box; of those, penalized, cleared after their window,
    /// released after their hysteresis; flags that found the box full; arrivals over their
    /// share of the penalty buffer; packets sent from the penalty sub-queues.
    pub flagged: u64,
    pub confirmed: u64,
    pub cleared: u64,
    pub released: u64,
    pub box_full: u64,
    pub over_share_drops: u64,
    pub penalty_sent: u64,
    /// The normal queue's sojourn, seconds: what the flows the isolation protects waited.
    pub normal_sojourn_mean_s: f64,
    pub normal_sojourn_max_s: f64,
    /// Packets CoDel dropped from the normal queue as they left, and marked CE instead.
    pub normal_codel_drops: u64,
    pub normal_codel_marks: u64,
    /// Every flow in the box now.
    pub boxed: Vec<BoxedSnapshot>,
    /// The latest penalty episodes (penalized .. released), oldest first.
    pub episodes: Vec<EpisodeSnapshot>,
}

/// One flow in a penalty box.
#[derive(Clone, Debug, Serialize)]
pub struct BoxedSnapshot {
    /// The isolation key, hex (the flow id, or a host key).
    pub id: String,
    /// The flow's key fields as text, when the port's flow table knows it.
    pub key: Option<String>,
    /// `watched` or `penalized`.
    pub state: &'static str,
    pub flagged_s: f64,
    pub penalized_s: Option<f64>,
    /// Its arrival rate over its latest window, bit/s.
    pub rate_bps: f64,
    pub queued: u32,
    pub penalized_packets: u64,
    pub penalized_drops: u64,
    /// What it was sent at since it was penalized, bit/s (its fair-share cap at work).
    pub penalized_sent_bps: f64,
}

/// One stay in the penalty queue.
#[derive(Clone, Debug, Serialize)]
pub struct EpisodeSnapshot {
    pub id: String,
    pub key: Option<String>,
    pub flagged_s: f64,
    pub penalized_s: f64,
    pub released_s: Option<f64>,
}

/// Queue sojourn: log2 buckets of microseconds (`buckets[k]` counts sojourns from
/// `bucket_floor_us(k)`), their sum and the maximum.
#[derive(Clone, Debug, Serialize)]
pub struct SojournSnapshot {
    pub count: u64,
    pub sum_s: f64,
    pub mean_s: f64,
    pub max_s: f64,
    pub buckets: Vec<u64>,
}

/// Queue-length samples.
#[derive(Clone, Debug, Serialize)]
pub struct QueueLengthSnapshot {
    pub count: u64,
    pub sum: u64,
    pub buckets: Vec<u64>,
}

/// The fate of every received packet.
///
/// Identity: `received = forwarded + dropped + queued + in_flight`, exact in every snapshot.
/// `in_flight` is 0 in every snapshot of the single-thread loop and in every final one; in a
/// live snapshot of a threaded run it is never negative: the packets a receive worker has
/// counted as received whose fate is not counted yet (in a ring to the transmit worker, in
/// the worker's hands, or dropped by it since it last published its drops, at most half a
/// progress period ago). The receive side's counters lead (`crate::mt`); `queued` is the
/// class queues.
#[derive(Clone, Debug, Serialize)]
pub struct TotalsSnapshot {
    pub received: u64,
    pub received_bytes: u64,
    pub forwarded: u64,
    pub forwarded_bytes: u64,
    pub marked: u64,
    pub dropped: u64,
    pub drops: BTreeMap<&'static str, u64>,
    pub queued: u64,
    pub in_flight: i64,
}

/// A generator flow group.
#[derive(Clone, Debug, Serialize)]
pub struct GroupSnapshot {
    pub name: String,
    pub port: String,
    pub misbehaving: bool,
    pub flows: u32,
    pub offered: u64,
    pub forwarded: u64,
    pub dropped: u64,
    pub marked: u64,
    pub drops: BTreeMap<&'static str, u64>,
}

fn drops_map(f: &FateCounters) -> BTreeMap<&'static str, u64> {
    f.drops_by_name().collect()
}

fn sojourn(h: &SojournHistogram) -> SojournSnapshot {
    SojournSnapshot {
        count: h.count,
        sum_s: h.sum_ns as f64 * 1e-9,
        mean_s: h.mean().as_secs_f64(),
        max_s: h.max_ns as f64 * 1e-9,
        buckets: h.buckets.to_vec(),
    }
}

fn color(color: Color, k: &ColorStats) -> ColorSnapshot {
    ColorSnapshot {
        color: color.name(),
        arrived: k.arrivals(),
        enqueued: k.enqueued,
        enqueued_bytes: k.enqueued_bytes,
        sent: k.dequeued,
        sent_bytes: k.dequeued_bytes,
        marked: k.marks,
        early_drops: k.early_drops,
        forced_drops: k.forced_drops,
        tail_drops: k.tail_drops,
        shutdown_drops: k.shutdown_drops,
        dequeue_drops: k.dequeue_drops,
        overflow_drops: k.overflow_drops,
        sojourn: sojourn(&k.sojourn),
    }
}

fn port(view: &dyn RouterView, p: usize, now: Nanos) -> PortSnapshot {
    let c: PortCounters = view.port_counters(p);
    let qos = view.qos(p);
    let cls = qos.classifier_stats();
    let hists = view.qlen_hist(p);
    let classes = qos
        .class_names()
        .iter()
        .enumerate()
        .filter_map(|(ci, name)| {
            let cs = qos.class_stats(ci)?;
            Some(ClassSnapshot {
                name: name.clone(),
                aqm: qos.aqm_kind(ci).unwrap_or("tail-drop"),
                discipline: discipline(view, p, ci, now),
                backlog_packets: cs.len_packets,
                backlog_bytes: cs.len_bytes,
                colors: Color::ALL.iter().map(|&k| color(k, cs.color(k))).collect(),
                queue_length: hists.get(ci).map(|h| QueueLengthSnapshot {
                    count: h.count(),
                    sum: h.sum,
                    buckets: h.buckets.to_vec(),
                }),
            })
        })
        .collect();
    PortSnapshot {
        name: view.port_name(p).to_owned(),
        rx_packets: c.rx_packets,
        rx_bytes: c.rx_bytes,
        rx_no_buffer: c.rx_no_buffer,
        rx_ring_full: c.rx_ring_full,
        rx_too_long: c.rx_too_long,
        tx_packets: c.tx_packets,
        tx_bytes: c.tx_bytes,
        tx_ring_full: c.tx_ring_full,
        tx_no_buffer: c.tx_no_buffer,
        tx_errors: c.tx_errors,
        tx_link_gone: c.tx_link_gone,
        link_gone_events: c.link_gone_events,
        link_reattached: c.link_reattached,
        classifier: ClassifierSnapshot {
            unmapped: cls.unmapped,
            unparsed: cls.unparsed,
            invalid_class: cls.invalid_class,
        },
        zombie: view.zombie_list(p).map(|z| ZombieSnapshot {
            estimated_flows: z.estimated_flows(),
            table_full_events: z.table_full_events(),
        }),
        classes,
        top_flows: top_flows(view, p),
    }
}

/// The flow's key text, when the port's flow table tracks it.
fn flow_name(view: &dyn RouterView, p: usize, id: FlowId) -> Option<String> {
    let table = view.flow_table(p)?;
    table.record(id).map(|r| key_text(&r.key, table.key_kind()))
}

fn discipline(
    view: &dyn RouterView,
    p: usize,
    ci: usize,
    now: Nanos,
) -> Option<DisciplineSnapshot> {
    let qos = view.qos(p);
    if let Some(AqmPolicy::Pie(pie)) = qos.fifo_policy(ci) {
        let s = pie.state();
        return Some(DisciplineSnapshot::Pie {
            drop_prob: s.drop_prob,
            qdelay_s: s.qdelay_old.as_secs_f64(),
            dequeue_rate_bps: s.avg_dq_rate * 8.0,
            burst_allowance_s: s.burst_allowance.as_secs_f64(),
        });
    }
    Some(match qos.discipline(ci)? {
        QueueDiscipline::Codel(c) => DisciplineSnapshot::Codel {
            dropping: c.state().dropping,
            count: c.state().count,
            drops: c.stats().dropped,
            ecn_marks: c.stats().ecn_marks,
        },
        QueueDiscipline::FqCodel(f) => {
            let (new, old) = f.list_lens();
            let s = f.stats();
            DisciplineSnapshot::FqCodel {
                isolate: f.config().isolate.name(),
                new_flow_count: s.new_flow_count,
                drop_overlimit: s.drop_overlimit,
                codel_drops: s.codel.dropped,
                ecn_marks: s.codel.ecn_marks,
                new_flows_len: new,
                old_flows_len: old,
            }
        }
        QueueDiscipline::DualPi2(d) => {
            let s = d.stats();
            let (l, c) = d.queue_lens();
            DisciplineSnapshot::DualPi2 {
                base_prob: d.base_probability(),
                l_queue: l,
                c_queue: c,
                l_packets: s.l_packets,
                c_packets: s.c_packets,
                step_marks: s.step_marks,
                coupled_marks: s.coupled_marks,
                classic_marks: s.classic_marks,
                classic_drops: s.classic_drops,
                l4s_drops: s.l4s_drops,
            }
        }
        QueueDiscipline::Isolated(i) => {
            let s = i.stats();
            let (normal, penalty) = i.queue_lens();
            let name = |id: FlowId| flow_name(view, p, id);
            DisciplineSnapshot::Isolation(IsolationSnapshot {
                by: i.config().by.name(),
                penalized: i.penalized_count(),
                fair_share_bps: i.fair_share_bps(),
                class_rate_bps: i.class_rate_bps(),
                flows_estimate: i.flows_estimate(),
                normal_queue: normal,
                penalty_queue: penalty,
                flagged: s.flagged,
                confirmed: s.penalized,
                cleared: s.cleared,
                released: s.released,
                box_full: s.box_full,
                over_share_drops: s.over_share_drops,
                penalty_sent: s.penalty_sent,
                normal_sojourn_mean_s: if s.normal_sent == 0 {
                    0.0
                } else {
                    s.normal_sojourn_sum.as_secs_f64() / s.normal_sent as f64
                },
                normal_sojourn_max_s: s.normal_sojourn_max.as_secs_f64(),
                normal_codel_drops: s.normal_codel_drops,
                normal_codel_marks: s.normal_codel_marks,
                boxed: (i.boxed().into_iter())
                    .map(|b| BoxedSnapshot {
                        id: format!("{:016x}", b.key.0),
                        key: name(b.key),
                        state: box_state(b.state),
                        flagged_s: b.flagged_at.as_secs_f64(),
                        penalized_s: b.penalized_at.map(Nanos::as_secs_f64),
                        rate_bps: b.rate_bps,
                        queued: b.queued,
                        penalized_packets: b.penalized_packets,
                        penalized_drops: b.penalized_drops,
                        penalized_sent_bps: b.penalized_at.map_or(0.0, |at| {
                            let t = (now - at).as_secs_f64();
                            if t > 0.0 {
                                b.penalized_sent_bytes as f64 * 8.0 / t
                            } else {
                                0.0
                            }
                        }),
                    })
                    .collect(),
                episodes: (i.episodes().into_iter())
                    .map(|e| EpisodeSnapshot {
                        id: format!("{:016x}", e.key.0),
                        key: name(e.key),
                        flagged_s: e.flagged_at.as_secs_f64(),
                        penalized_s: e.penalized_at.as_secs_f64(),
                        released_s: e.released_at.map(Nanos::as_secs_f64),
                    })
                    .collect(),
            })
        }
    })
}

fn box_state(s: BoxState) -> &'static str {
    match s {
        BoxState::Watched => "watched",
        BoxState::Penalized => "penalized",
    }
}

/// A flow's place in any of the port's penalty boxes.
fn penalty_of(view: &dyn RouterView, p: usize, id: FlowId) -> Option<String> {
    let qos = view.qos(p);
    (0..qos.class_names().len())
        .filter_map(|ci| qos.discipline(ci)?.isolated()?.boxed_flow(id))
        .map(|b| box_state(b.state).to_owned())
        .next()
}

fn top_flows(view: &dyn RouterView, p: usize) -> Vec<FlowSnapshot> {
    let (Some(table), Some(list)) = (view.flow_table(p), view.zombie_list(p)) else {
        return Vec::new();
    };
    let kind = table.key_kind();
    let total = list.total_occurrence();
    let p_hit = list.hit_frequency();
    let groups = view.groups();
    table
        .top(list)
        .into_iter()
        .map(|t| {
            let f = t.occurrence as f64;
            let mean = total as f64 * p_hit;
            let r = t.record.as_ref();
            let k = r.map(|r| r.key);
            let five = kind == FlowKeyKind::FiveTuple;
            FlowSnapshot {
                id: format!("{:016x}", t.id.0),
                key: r.map(|r| key_text(&r.key, kind)),
                src: k.map(|k| k.src.to_string()),
                dst: k
                    .filter(|_| kind != FlowKeyKind::Src)
                    .map(|k| k.dst.to_string()),
                protocol: k.filter(|_| five).map(|k| k.protocol),
                src_port: k.filter(|_| five).and_then(|k| k.ports).map(|p| p.src),
                dst_port: k.filter(|_| five).and_then(|k| k.ports).map(|p| p.dst),
                group: r.and_then(|r| {
                    let g = (r.tag as usize).checked_sub(1)?;
                    Some(groups.get(g)?.name.clone())
                }),
                occurrence: t.occurrence,
                share: if total == 0 { 0.0 } else { f / total as f64 },
                relative_occurrence: if mean > 0.0 { f / mean } else { 0.0 },
                misbehaving: f > mean,
                first_seen_s: r.map(|r| r.first_seen.as_secs_f64()),
                packets: r.map_or(0, |r| r.packets),
                bytes: r.map_or(0, |r| r.bytes),
                marked: r.map_or(0, |r| r.marked),
                drops: DropCause::ALL
                    .iter()
                    .map(|&c| (c.name().to_owned(), r.map_or(0, |r| r.drops[c.index()])))
                    .collect(),
                penalty: penalty_of(view, p, t.id),
            }
        })
        .collect()
}

impl Snapshot {
    /// Takes the snapshot of `view` at `now` (called by the thread that owns the counters,
    /// between polls).
    pub fn take(view: &dyn RouterView, now: Nanos) -> Snapshot {
        let t = view.totals();
        let queued = view.queued();
        let dropped = t.dropped();
        let accounted = t.forwarded as i128 + dropped as i128 + queued as i128;
        Snapshot {
            schema: SCHEMA_VERSION,
            time_s: now.as_secs_f64(),
            ports: (0..view.port_count()).map(|p| port(view, p, now)).collect(),
            totals: TotalsSnapshot {
                received: t.received,
                received_bytes: t.received_bytes,
                forwarded: t.forwarded,
                forwarded_bytes: t.forwarded_bytes,
                marked: t.marked,
                dropped,
                drops: drops_map(&t),
                queued,
                in_flight: (t.received as i128 - accounted) as i64,
            },
            groups: view
                .groups()
                .iter()
                .map(|g| GroupSnapshot {
                    name: g.name.clone(),
                    port: g.port.clone(),
                    misbehaving: g.misbehaving,
                    flows: g.flows,
                    offered: g.fate.received,
                    forwarded: g.fate.forwarded,
                    dropped: g.fate.dropped(),
                    marked: g.fate.marked,
                    drops: drops_map(&g.fate),
                })
                .collect(),
            capture: view.capture_stats(),
            icmp: IcmpSnapshot::of(&view.icmp()),
            fib: view.fib(),
        }
    }

    /// The snapshot as pretty JSON (the schema of docs/operations.md).
    pub fn to_json(&self) -> String {
        // Cannot fail: every map key is a string and every value serializable.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Drops of `cause` in the totals (0 for a cause the snapshot does not know).
    pub fn drops_of(&self, cause: DropCause) -> u64 {
        self.totals.drops.get(cause.name()).copied().unwrap_or(0)
    }
}

/// Upper bounds of the sojourn buckets in seconds (the last is `f64::MAX`, Prometheus' +Inf).
pub fn sojourn_bounds_s() -> Vec<f64> {
    (0..SOJOURN_BUCKETS)
        .map(|k| {
            if k + 1 == SOJOURN_BUCKETS {
                f64::MAX
            } else {
                SojournHistogram::bucket_floor_us(k + 1) as f64 * 1e-6
            }
        })
        .collect()
}

/// Upper bounds of the queue-length buckets in packets (the last is `f64::MAX`).
pub fn qlen_bounds() -> Vec<f64> {
    (0..QLEN_BUCKETS)
        .map(|k| {
            if k + 1 == QLEN_BUCKETS {
                f64::MAX
            } else {
                ((1u64 << k) - 1) as f64
            }
        })
        .collect()
}
