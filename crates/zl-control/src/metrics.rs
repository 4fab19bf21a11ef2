//! The Prometheus text endpoint and the control thread.
//!
//! The forwarding thread never waits on anything here: at a low rate (the driver's progress
//! period) it takes a [`Snapshot`] of its counters and swaps it into a [`MetricsHub`]
//! ([`MetricsHub::publish`], an `ArcSwap` store: no lock, the loop never waits for a
//! reader). A control thread ([`crate::control::ControlThread`]) runs a small tokio runtime
//! that serves `GET /metrics` (encoded with `prometheus-client` from the last snapshot on each
//! scrape) and `GET /stats.json` (the same snapshot as JSON), and turns SIGINT / SIGTERM into
//! the loop's stop flag. Bound to loopback unless the config names another address.
//!
//! Consistency: a scrape reads one snapshot, taken at one instant by the loop, so its series
//! agree with each other (the conservation identity holds between them; see
//! [`crate::snapshot::TotalsSnapshot`] for the threaded run's in-flight term).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use zl_core::Nanos;

use crate::snapshot::{
    qlen_bounds, sojourn_bounds_s, DisciplineSnapshot, FlowSnapshot, PortSnapshot, Snapshot,
};
use zl_dataplane::DropCause;
use zl_dataplane::RouterView;

/// What the endpoint counts: connections it cut, requests it refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlEvent {
    /// Closed unanswered to admit a new connection beyond the limit (the oldest still
    /// waiting for its request).
    Evicted,
    /// Cut for not sending its whole request head in time.
    Deadline,
    /// A new connection closed at once: over the limit with every open one being answered.
    Refused,
    /// A request without the control token it needs, or with a wrong one.
    Unauthorized,
    /// A state-changing request from a web page (an `Origin` header).
    CrossOrigin,
}

impl ControlEvent {
    /// Every event, in the order of `MetricsHub::control_counts`.
    pub const ALL: [ControlEvent; 5] = [
        ControlEvent::Evicted,
        ControlEvent::Deadline,
        ControlEvent::Refused,
        ControlEvent::Unauthorized,
        ControlEvent::CrossOrigin,
    ];

    /// The `reason` label of its series.
    pub fn label(self) -> &'static str {
        match self {
            ControlEvent::Evicted => "evicted",
            ControlEvent::Deadline => "deadline",
            ControlEvent::Refused => "refused",
            ControlEvent::Unauthorized => "unauthorized",
            ControlEvent::CrossOrigin => "cross_origin",
        }
    }

    /// Whether it closes a connection (`zlrouter_metrics_connections_cut_total`) rather
    /// than answering a request with a refusal (`zlrouter_metrics_requests_refused_total`).
    pub fn cuts_connection(self) -> bool {
        matches!(
            self,
            ControlEvent::Evicted | ControlEvent::Deadline | ControlEvent::Refused
        )
    }
}

/// The last published snapshot of one router.
#[derive(Debug)]
pub struct MetricsHub {
    last: ArcSwap<Snapshot>,
    /// Connections the metrics endpoint failed to accept (file descriptors exhausted, ...);
    /// written by the control thread.
    accept_errors: AtomicU64,
    /// Config reloads applied and refused; written by the control thread.
    reloads: [AtomicU64; 2],
    /// The control endpoint's connections cut and requests refused, by [`ControlEvent`];
    /// written by the control thread.
    control: [AtomicU64; ControlEvent::ALL.len()],
    /// The control endpoint's connections open now.
    open_connections: AtomicU64,
}

impl MetricsHub {
    /// A hub whose first snapshot is `dp` at time 0.
    pub fn new(dp: &dyn RouterView) -> Self {
        MetricsHub {
            last: ArcSwap::from_pointee(Snapshot::take(dp, Nanos::ZERO)),
            accept_errors: AtomicU64::new(0),
            reloads: [AtomicU64::new(0), AtomicU64::new(0)],
            control: Default::default(),
            open_connections: AtomicU64::new(0),
        }
    }

    /// Counts one connection cut or request refused by the control endpoint.
    pub fn count_control(&self, event: ControlEvent) {
        // Relaxed: counters read on their own.
        self.control[event as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// The control endpoint's counts so far, in the order of [`ControlEvent::ALL`].
    pub fn control_counts(&self) -> [u64; ControlEvent::ALL.len()] {
        ControlEvent::ALL.map(|e| self.control[e as usize].load(Ordering::Relaxed))
    }

    /// Sets the number of the control endpoint's open connections.
    pub fn set_open_connections(&self, n: usize) {
        // Relaxed: a gauge read on its own.
        self.open_connections.store(n as u64, Ordering::Relaxed);
    }

    /// Counts one failed `accept()` of the metrics endpoint.
    pub fn count_accept_error(&self) {
        // Relaxed: a counter read on its own.
        self.accept_errors.fetch_add(1, Ordering::Relaxed);
    }

    /// Failed `accept()`s of the metrics endpoint so far.
    pub fn accept_errors(&self) -> u64 {
        self.accept_errors.load(Ordering::Relaxed)
    }

    /// Counts one config reload, applied or refused.
    pub fn count_reload(&self, applied: bool) {
        // Relaxed: counters read on their own.
        self.reloads[usize::from(!applied)].fetch_add(1, Ordering::Relaxed);
    }

    /// Config reloads so far: (applied, refused).
    pub fn reloads(&self) -> (u64, u64) {
        let n = |i: usize| self.reloads[i].load(Ordering::Relaxed);
        (n(0), n(1))
    }

    /// Takes and stores the current snapshot (called by the forwarding thread at a low rate).
    pub fn publish(&self, now: Nanos, dp: &dyn RouterView) {
        self.store(Snapshot::take(dp, now));
    }

    /// Stores a snapshot the caller took.
    pub fn store(&self, snap: Snapshot) {
        self.last.store(Arc::new(snap));
    }

    /// The last published snapshot.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.last.load_full()
    }

    /// The Prometheus text exposition of the last publish.
    pub fn encode(&self) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(SnapshotCollector(
            self.snapshot(),
            self.accept_errors(),
            self.reloads(),
            (
                self.control_counts(),
                self.open_connections.load(Ordering::Relaxed),
            ),
        )));
        let mut out = String::new();
        // Cannot fail: writing to a String.
        let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
        out
    }
}

#[derive(Debug)]
struct SnapshotCollector(
    Arc<Snapshot>,
    u64,
    (u64, u64),
    ([u64; ControlEvent::ALL.len()], u64),
);

type Labels = Vec<(&'static str, String)>;

/// One metric family written from the snapshot.
struct Family<'a, 'b> {
    enc: &'a mut DescriptorEncoder<'b>,
}

impl<'b> Family<'_, 'b> {
    fn scalar<V: ScalarValue>(
        &mut self,
        name: &str,
        help: &str,
        kind: MetricType,
        series: impl IntoIterator<Item = (Labels, V)>,
    ) -> Result<(), std::fmt::Error> {
        // prometheus-client appends `_total` to counters itself.
        let name = name.strip_suffix("_total").unwrap_or(name);
        let mut me = self.enc.encode_descriptor(name, help, None, kind)?;
        for (labels, v) in series {
            // An unlabelled series is written bare (`name value`, not `name{} value`).
            if labels.is_empty() {
                v.encode(&mut me, kind)?;
            } else {
                v.encode(&mut me.encode_family(&labels)?, kind)?;
            }
        }
        Ok(())
    }

    fn histogram(
        &mut self,
        name: &str,
        help: &str,
        bounds: &[f64],
        series: impl IntoIterator<Item = (Labels, f64, u64, Vec<u64>)>,
    ) -> Result<(), std::fmt::Error> {
        let mut me = self
            .enc
            .encode_descriptor(name, help, None, MetricType::Histogram)?;
        for (labels, sum, count, buckets) in series {
            let b: Vec<(f64, u64)> = bounds.iter().copied().zip(buckets).collect();
            me.encode_family(&labels)?
                .encode_histogram::<NoLabelSet>(sum, count, &b, None)?;
        }
        Ok(())
    }
}

/// A series' value: integers as counters or gauges, floats as gauges.
trait ScalarValue {
    fn encode(
        &self,
        e: &mut prometheus_client::encoding::MetricEncoder<'_>,
        kind: MetricType,
    ) -> Result<(), std::fmt::Error>;
}

impl ScalarValue for u64 {
    fn encode(
        &self,
        e: &mut prometheus_client::encoding::MetricEncoder<'_>,
        kind: MetricType,
    ) -> Result<(), std::fmt::Error> {
        match kind {
            MetricType::Counter => e.encode_counter::<NoLabelSet, _, u64>(self, None),
            _ => e.encode_gauge(&((*self).min(i64::MAX as u64) as i64)),
        }
    }
}

impl ScalarValue for f64 {
    fn encode(
        &self,
        e: &mut prometheus_client::encoding::MetricEncoder<'_>,
        _: MetricType,
    ) -> Result<(), std::fmt::Error> {
        e.encode_gauge(self)
    }
}

fn port_label(p: &PortSnapshot) -> Labels {
    vec![("port", p.name.clone())]
}

/// The series of each port's top flows: `{port, rank, flow}`, rank 1 = largest F, `flow` the
/// key as text (or the hex id of a flow that is not tracked). Bounded: at most
/// `metrics.top_flows` ranks per port, whichever flows hold them.
fn top_flow_series<'a, V>(
    s: &'a Snapshot,
    value: impl Fn(&FlowSnapshot) -> V + Copy + 'a,
) -> impl Iterator<Item = (Labels, V)> + 'a {
    s.ports.iter().flat_map(move |p| {
        p.top_flows.iter().enumerate().map(move |(i, f)| {
            (
                vec![
                    ("port", p.name.clone()),
                    ("rank", (i + 1).to_string()),
                    ("flow", f.key.clone().unwrap_or_else(|| f.id.clone())),
                ],
                value(f),
            )
        })
    })
}

impl Collector for SnapshotCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        use MetricType::{Counter, Gauge};
        let s = &*self.0;
        let mut f = Family { enc: &mut encoder };
        f.scalar(
            "zlrouter_virtual_time_seconds",
            "Time of the last publish (virtual or monotonic).",
            Gauge,
            [(Vec::new(), s.time_s)],
        )?;
        type PortField = (&'static str, &'static str, fn(&PortSnapshot) -> u64);
        let fields: [PortField; 16] = [
            (
                "zlrouter_port_rx_packets_total",
                "Frames received by the port.",
                |c| c.rx_packets,
            ),
            (
                "zlrouter_port_rx_bytes_total",
                "Bytes received by the port.",
                |c| c.rx_bytes,
            ),
            (
                "zlrouter_port_rx_no_buffer_total",
                "Frames dropped at receive: no free buffer.",
                |c| c.rx_no_buffer,
            ),
            (
                "zlrouter_port_rx_ring_full_total",
                "Frames dropped at receive: ring full.",
                |c| c.rx_ring_full,
            ),
            (
                "zlrouter_port_rx_too_long_total",
                "Frames dropped at receive: longer than a buffer.",
                |c| c.rx_too_long,
            ),
            (
                "zlrouter_port_tx_packets_total",
                "Frames transmitted by the port.",
                |c| c.tx_packets,
            ),
            (
                "zlrouter_port_tx_bytes_total",
                "Bytes transmitted by the port.",
                |c| c.tx_bytes,
            ),
            (
                "zlrouter_port_tx_ring_full_total",
                "Frames dropped at transmit: ring full.",
                |c| c.tx_ring_full,
            ),
            (
                "zlrouter_port_tx_no_buffer_total",
                "Frames dropped at transmit: ENOBUFS / EAGAIN.",
                |c| c.tx_no_buffer,
            ),
            (
                "zlrouter_port_tx_errors_total",
                "Frames dropped at transmit: other errors.",
                |c| c.tx_errors,
            ),
            (
                "zlrouter_port_tx_link_gone_total",
                "Frames dropped at transmit: the interface was gone.",
                |c| c.tx_link_gone,
            ),
            (
                "zlrouter_port_link_gone_events_total",
                "Times the port's interface went away while the port ran.",
                |c| c.link_gone_events,
            ),
            (
                "zlrouter_port_link_reattached_total",
                "Times the port re-attached to its interface after it came back.",
                |c| c.link_reattached,
            ),
            (
                "zlrouter_classifier_unmapped_total",
                "Egress packets whose code point had no class mapping (default class).",
                |c| c.classifier.unmapped,
            ),
            (
                "zlrouter_classifier_unparsed_total",
                "Egress packets without a parsable code point (default class).",
                |c| c.classifier.unparsed,
            ),
            (
                "zlrouter_classifier_invalid_class_total",
                "Egress packets with a class index the engine does not have (dropped).",
                |c| c.classifier.invalid_class,
            ),
        ];
        for (name, help, get) in fields {
            f.scalar(
                name,
                help,
                Counter,
                s.ports.iter().map(|p| (port_label(p), get(p))),
            )?;
        }
        let t = &s.totals;
        f.scalar(
            "zlrouter_received_packets_total",
            "Packets the ports handed to the data plane.",
            Counter,
            [(Vec::new(), t.received)],
        )?;
        f.scalar(
            "zlrouter_forwarded_packets_total",
            "Packets handed to an egress port.",
            Counter,
            [(Vec::new(), t.forwarded)],
        )?;
        f.scalar(
            "zlrouter_marked_packets_total",
            "Packets admitted with a congestion mark.",
            Counter,
            [(Vec::new(), t.marked)],
        )?;
        f.scalar(
            "zlrouter_dropped_packets_total",
            "Packets the data plane discarded, by cause.",
            Counter,
            DropCause::ALL
                .iter()
                .map(|&c| (vec![("cause", c.name().to_owned())], s.drops_of(c))),
        )?;
        f.scalar(
            "zlrouter_icmp_sent_total",
            "ICMP errors the router sent (extra frames in the ingress ports' tx), by type.",
            Counter,
            s.icmp
                .sent
                .iter()
                .map(|(&k, &n)| (vec![("type", k.to_owned())], n)),
        )?;
        f.scalar(
            "zlrouter_icmp_not_sent_total",
            "ICMP errors due but not sent, by reason.",
            Counter,
            [
                ("rate_limited", s.icmp.rate_limited),
                ("suppressed", s.icmp.suppressed),
                ("no_source_address", s.icmp.no_source_address),
                ("no_room", s.icmp.no_room),
            ]
            .map(|(r, n)| (vec![("reason", r.to_owned())], n)),
        )?;
        if let Some(fib) = &s.fib {
            f.scalar(
                "zlrouter_fib_routes",
                "Prefixes in the forwarding table that follows the kernel's.",
                Gauge,
                [(Vec::new(), fib.routes)],
            )?;
            f.scalar(
                "zlrouter_fib_lag_seconds",
                "How long the oldest kernel route / neighbour change not yet in the data plane's table has waited (0: in step).",
                Gauge,
                [(Vec::new(), fib.lag_s)],
            )?;
            f.scalar(
                "zlrouter_fib_events_total",
                "Kernel route, neighbour, address and link events applied.",
                Counter,
                [(Vec::new(), fib.events)],
            )?;
            f.scalar(
                "zlrouter_fib_publishes_total",
                "Forwarding tables published to the data plane.",
                Counter,
                [(Vec::new(), fib.publishes)],
            )?;
            f.scalar(
                "zlrouter_fib_resyncs_total",
                "Times the kernel dropped events and the tables were read again.",
                Counter,
                [(Vec::new(), fib.resyncs)],
            )?;
            f.scalar(
                "zlrouter_fib_build_seconds",
                "How long the last forwarding table took to build.",
                Gauge,
                [(Vec::new(), fib.last_build_s)],
            )?;
        }
        f.scalar(
            "zlrouter_queued_packets",
            "Packets waiting in egress queues.",
            Gauge,
            [(Vec::new(), t.queued)],
        )?;
        f.scalar(
            "zlrouter_in_flight_packets",
            "Packets counted received and not yet forwarded, dropped or queued (threaded runs; 0 otherwise).",
            Gauge,
            [(Vec::new(), t.in_flight as f64)],
        )?;
        let class_labels = |p: &PortSnapshot, class: &str| -> Labels {
            vec![("port", p.name.clone()), ("class", class.to_owned())]
        };
        let colors = || {
            s.ports.iter().flat_map(move |p| {
                p.classes.iter().flat_map(move |c| {
                    c.colors.iter().map(move |k| {
                        let mut l = class_labels(p, &c.name);
                        l.push(("color", k.color.to_owned()));
                        (l, k)
                    })
                })
            })
        };
        type ColorField = (
            &'static str,
            &'static str,
            fn(&crate::snapshot::ColorSnapshot) -> u64,
        );
        let color_fields: [ColorField; 9] = [
            (
                "zlrouter_class_enqueued_packets_total",
                "Packets admitted to the class queue, by color.",
                |k| k.enqueued,
            ),
            (
                "zlrouter_class_dequeued_packets_total",
                "Packets that left the class queue, by color.",
                |k| k.sent,
            ),
            (
                "zlrouter_class_marked_packets_total",
                "Packets marked by the class's AQM, by color.",
                |k| k.marked,
            ),
            (
                "zlrouter_class_early_drops_total",
                "AQM early drops, by color.",
                |k| k.early_drops,
            ),
            (
                "zlrouter_class_forced_drops_total",
                "AQM forced drops, by color.",
                |k| k.forced_drops,
            ),
            (
                "zlrouter_class_tail_drops_total",
                "Tail drops (queue full), by color.",
                |k| k.tail_drops,
            ),
            (
                "zlrouter_class_shutdown_drops_total",
                "Packets admitted, then discarded still queued at the end of the run, by color.",
                |k| k.shutdown_drops,
            ),
            (
                "zlrouter_class_dequeue_drops_total",
                "Packets admitted, then dropped by the class's AQM as they left (CoDel, FQ-CoDel, DualPI2), by color.",
                |k| k.dequeue_drops,
            ),
            (
                "zlrouter_class_overflow_drops_total",
                "Packets admitted, then pushed out of the full buffer by a later arrival (FQ-CoDel), by color.",
                |k| k.overflow_drops,
            ),
        ];
        for (name, help, get) in color_fields {
            f.scalar(name, help, Counter, colors().map(|(l, k)| (l, get(k))))?;
        }
        f.scalar(
            "zlrouter_class_queue_packets",
            "Current length of the class queue.",
            Gauge,
            s.ports.iter().flat_map(|p| {
                p.classes
                    .iter()
                    .map(move |c| (class_labels(p, &c.name), c.backlog_packets as u64))
            }),
        )?;
        f.histogram(
            "zlrouter_class_sojourn_seconds",
            "Time packets spent in the class queue, by color.",
            &sojourn_bounds_s(),
            colors().map(|(l, k)| {
                (
                    l,
                    k.sojourn.sum_s,
                    k.sojourn.count,
                    k.sojourn.buckets.clone(),
                )
            }),
        )?;
        f.histogram(
            "zlrouter_class_queue_length_packets",
            "Class queue length, sampled every 8 polls.",
            &qlen_bounds(),
            s.ports.iter().flat_map(|p| {
                p.classes.iter().filter_map(move |c| {
                    let q = c.queue_length.as_ref()?;
                    Some((
                        class_labels(p, &c.name),
                        q.sum as f64,
                        q.count,
                        q.buckets.clone(),
                    ))
                })
            }),
        )?;
        let isolation = || {
            s.ports.iter().flat_map(|p| {
                p.classes.iter().filter_map(move |c| match &c.discipline {
                    Some(DisciplineSnapshot::Isolation(i)) => Some((class_labels(p, &c.name), i)),
                    _ => None,
                })
            })
        };
        f.scalar(
            "zlrouter_isolation_penalized_flows",
            "ZL-RED isolation: flows (or hosts) in penalty sub-queues now.",
            Gauge,
            isolation().map(|(l, i)| (l, u64::from(i.penalized))),
        )?;
        f.scalar(
            "zlrouter_isolation_fair_share_bps",
            "ZL-RED isolation: the fair share each penalized flow is held to, bit/s (class service rate / estimated flows).",
            Gauge,
            isolation().map(|(l, i)| (l, i.fair_share_bps)),
        )?;
        f.scalar(
            "zlrouter_isolation_estimated_flows",
            "ZL-RED isolation: the active flows of the class, estimated from the Zombie List and the penalized flows' shares.",
            Gauge,
            isolation().map(|(l, i)| (l, i.flows_estimate)),
        )?;
        f.scalar(
            "zlrouter_isolation_events_total",
            "ZL-RED isolation: flows flagged into the penalty box, confirmed (penalized), cleared, released; flags that found the box full.",
            Counter,
            isolation().flat_map(|(l, i)| {
                [
                    ("flagged", i.flagged),
                    ("confirmed", i.confirmed),
                    ("cleared", i.cleared),
                    ("released", i.released),
                    ("box_full", i.box_full),
                ]
                .map(|(event, n)| {
                    let mut l = l.clone();
                    l.push(("event", event.to_owned()));
                    (l, n)
                })
            }),
        )?;
        f.scalar(
            "zlrouter_isolation_normal_codel_total",
            "ZL-RED isolation: packets CoDel dropped from the normal queue as they left, or marked CE instead.",
            Counter,
            isolation().flat_map(|(l, i)| {
                [("drop", i.normal_codel_drops), ("mark", i.normal_codel_marks)].map(
                    |(action, n)| {
                        let mut l = l.clone();
                        l.push(("action", action.to_owned()));
                        (l, n)
                    },
                )
            }),
        )?;
        f.scalar(
            "zlrouter_aqm_probability",
            "The class AQM's drop or mark probability: PIE's drop_prob, DualPI2's base p' (classic packets see its square).",
            Gauge,
            s.ports.iter().flat_map(|p| {
                p.classes.iter().filter_map(move |c| {
                    let v = match &c.discipline {
                        Some(DisciplineSnapshot::Pie { drop_prob, .. }) => *drop_prob,
                        Some(DisciplineSnapshot::DualPi2 { base_prob, .. }) => *base_prob,
                        _ => return None,
                    };
                    Some((class_labels(p, &c.name), v))
                })
            }),
        )?;
        f.scalar(
            "zlrouter_fq_codel_new_flows_total",
            "FQ-CoDel: queues that became active (joined new_flows).",
            Counter,
            s.ports.iter().flat_map(|p| {
                p.classes.iter().filter_map(move |c| match &c.discipline {
                    Some(DisciplineSnapshot::FqCodel { new_flow_count, .. }) => {
                        Some((class_labels(p, &c.name), *new_flow_count))
                    }
                    _ => None,
                })
            }),
        )?;
        f.scalar(
            "zlrouter_zombie_estimated_flows",
            "Active flows at the egress estimated by its Zombie List, 1/P(t) (+Inf while P = 0).",
            Gauge,
            s.ports
                .iter()
                .filter_map(|p| Some((port_label(p), p.zombie?.estimated_flows))),
        )?;
        f.scalar(
            "zlrouter_zombie_table_full_events_total",
            "Zombie List updates the occurrence table had no entry for (the list unchanged).",
            Counter,
            s.ports
                .iter()
                .filter_map(|p| Some((port_label(p), p.zombie?.table_full_events))),
        )?;
        f.scalar(
            "zlrouter_top_flow_occurrence",
            "Top flows of the egress Zombie List: F, the flow's occurrence.",
            Gauge,
            top_flow_series(s, |f| f.occurrence),
        )?;
        f.scalar(
            "zlrouter_top_flow_relative_occurrence",
            "Top flows: F / (T P(t)), the occurrence over the mean per flow (> 1: misbehaving, eq. 4).",
            Gauge,
            top_flow_series(s, |f| f.relative_occurrence),
        )?;
        f.scalar(
            "zlrouter_top_flow_misbehaving",
            "Top flows: 1 when F > T P(t) (eq. 4), else 0.",
            Gauge,
            top_flow_series(s, |f| u64::from(f.misbehaving)),
        )?;
        f.scalar(
            "zlrouter_top_flow_penalized",
            "Top flows: 1 while the flow is in a penalty sub-queue (ZL-RED isolation), else 0.",
            Gauge,
            top_flow_series(s, |f| u64::from(f.penalty.as_deref() == Some("penalized"))),
        )?;
        f.scalar(
            "zlrouter_top_flow_packets",
            "Top flows: packets offered to the egress since the flow was first seen.",
            Gauge,
            top_flow_series(s, |f| f.packets),
        )?;
        f.scalar(
            "zlrouter_top_flow_dropped_packets",
            "Top flows: packets dropped at the egress since the flow was first seen, by cause.",
            Gauge,
            s.ports.iter().flat_map(|p| {
                p.top_flows.iter().enumerate().flat_map(move |(i, f)| {
                    f.drops.iter().filter(|(_, &n)| n > 0).map(move |(c, &n)| {
                        (
                            vec![
                                ("port", p.name.clone()),
                                ("rank", (i + 1).to_string()),
                                ("flow", f.key.clone().unwrap_or_else(|| f.id.clone())),
                                ("cause", c.clone()),
                            ],
                            n,
                        )
                    })
                })
            }),
        )?;
        f.scalar(
            "zlrouter_group_packets_total",
            "Generator flow groups: packets by fate.",
            Counter,
            s.groups.iter().flat_map(|g| {
                [
                    ("offered", g.offered),
                    ("forwarded", g.forwarded),
                    ("dropped", g.dropped),
                    ("marked", g.marked),
                ]
                .map(|(fate, n)| {
                    (
                        vec![("group", g.name.clone()), ("fate", fate.to_owned())],
                        n,
                    )
                })
            }),
        )?;
        if let Some(c) = &s.capture {
            f.scalar(
                "zlrouter_capture_packets_total",
                "Drop capture: packets written, or not captured (overflow: the writer's ring was full; rate_limited: capture.rate_pps; write_error).",
                Counter,
                [
                    ("written", c.written),
                    ("overflow", c.overflow),
                    ("rate_limited", c.rate_limited),
                    ("write_error", c.write_errors),
                ]
                .map(|(r, n)| (vec![("result", r.to_owned())], n)),
            )?;
            f.scalar(
                "zlrouter_capture_files_total",
                "Drop capture: files started (1 + rotations).",
                Counter,
                [(Vec::new(), c.files)],
            )?;
        }
        f.scalar(
            "zlrouter_metrics_accept_errors_total",
            "Connections the metrics endpoint failed to accept (e.g. out of file descriptors); \
             each is logged, and accepting resumes after a back-off",
            Counter,
            [(Vec::new(), self.1)],
        )?;
        f.scalar(
            "zlrouter_config_reloads_total",
            "Config reloads (SIGHUP, zlrouter reload): applied, or refused with the old config \
             left running",
            Counter,
            [("applied", self.2 .0), ("refused", self.2 .1)]
                .map(|(r, n)| (vec![("result", r.to_owned())], n)),
        )?;
        let (control, open) = &self.3;
        let by_event = |cut: bool| {
            ControlEvent::ALL
                .iter()
                .zip(control)
                .filter(move |(e, _)| e.cuts_connection() == cut)
                .map(|(e, n)| (vec![("reason", e.label().to_owned())], *n))
        };
        f.scalar(
            "zlrouter_metrics_connections_cut_total",
            "Control endpoint connections closed unanswered: evicted (the oldest without a \
             whole request, to admit a new one beyond metrics.max_connections), deadline (no \
             whole request within metrics.request_timeout_s), refused (over the limit with \
             every connection busy answering)",
            Counter,
            by_event(true),
        )?;
        f.scalar(
            "zlrouter_metrics_requests_refused_total",
            "Control endpoint requests refused: unauthorized (no or a wrong control token), \
             cross_origin (a state-changing request from a web page: an Origin header)",
            Counter,
            by_event(false),
        )?;
        f.scalar(
            "zlrouter_metrics_connections_open",
            "Control endpoint connections open now (at most metrics.max_connections)",
            Gauge,
            [(Vec::new(), *open)],
        )?;
        Ok(())
    }
}
