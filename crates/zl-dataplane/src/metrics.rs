//! The Prometheus text endpoint and the control thread.
//!
//! The forwarding thread never waits on anything here: at a low rate (the driver's progress
//! period) it stores its counters into a [`MetricsHub`] of atomics ([`MetricsHub::publish`]).
//! A control thread ([`ControlThread`], in `control.rs`) runs a small tokio runtime that serves
//! `GET /metrics` (encoded with
//! `prometheus-client` from those atomics on each scrape) and turns SIGINT / SIGTERM into the
//! loop's stop flag. Bound to loopback unless the config names another address.
//!
//! Orderings: every value is stored and loaded `Relaxed`. Each series is a single atomic
//! written by one thread, so a scrape sees each counter's value as of some publish; series
//! are not a consistent snapshot of each other (a scrape can land mid-publish), which
//! Prometheus counters do not promise either.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use zl_core::{Color, Nanos};
use zl_qos::{SojournHistogram, SOJOURN_BUCKETS};

pub use crate::control::{ControlError, ControlThread};
use crate::dataplane::QLEN_BUCKETS;
use crate::stats::DropCause;
use crate::view::RouterView;

type Labels = Vec<(&'static str, String)>;

#[derive(Debug)]
struct Series {
    labels: Labels,
    value: AtomicU64,
}

#[derive(Debug)]
struct Hist {
    labels: Labels,
    /// Upper bounds (the last is `f64::MAX`, encoded as `+Inf`).
    bounds: Vec<f64>,
    /// Per-bucket counts (not cumulative).
    buckets: Vec<AtomicU64>,
    /// f64 bits.
    sum: AtomicU64,
    count: AtomicU64,
}

#[derive(Debug)]
enum Values {
    Scalar(Vec<Series>),
    Hist(Vec<Hist>),
}

#[derive(Debug)]
struct Family {
    name: &'static str,
    help: &'static str,
    kind: MetricType,
    values: Values,
}

/// Walks the data plane's counters in a fixed order; building records the layout, publishing
/// stores into it.
trait Visit {
    fn family(&mut self, name: &'static str, help: &'static str, kind: MetricType);
    fn value(&mut self, labels: &dyn Fn() -> Labels, v: u64);
    fn hist(
        &mut self,
        labels: &dyn Fn() -> Labels,
        bounds: &dyn Fn() -> Vec<f64>,
        buckets: &[u64],
        sum: f64,
        count: u64,
    );
}

fn walk(dp: &dyn RouterView, now: Nanos, v: &mut dyn Visit) {
    use MetricType::{Counter, Gauge};
    v.family(
        "zlrouter_virtual_time_seconds",
        "Time of the last publish (virtual or monotonic).",
        Gauge,
    );
    v.value(&Vec::new, now.as_secs_f64().to_bits());
    let ports: Vec<(String, zl_port::PortCounters)> = (0..dp.port_count())
        .map(|p| (dp.port_name(p).to_owned(), dp.port_counters(p)))
        .collect();
    type Field = (
        &'static str,
        &'static str,
        fn(&zl_port::PortCounters) -> u64,
    );
    let fields: [Field; 11] = [
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
    ];
    for (name, help, get) in fields {
        v.family(name, help, Counter);
        for (port, c) in &ports {
            v.value(&|| vec![("port", port.clone())], get(c));
        }
    }
    let t = dp.totals();
    v.family(
        "zlrouter_received_packets_total",
        "Packets the ports handed to the data plane.",
        Counter,
    );
    v.value(&Vec::new, t.received);
    v.family(
        "zlrouter_forwarded_packets_total",
        "Packets handed to an egress port.",
        Counter,
    );
    v.value(&Vec::new, t.forwarded);
    v.family(
        "zlrouter_marked_packets_total",
        "Packets admitted with a congestion mark.",
        Counter,
    );
    v.value(&Vec::new, t.marked);
    v.family(
        "zlrouter_dropped_packets_total",
        "Packets the data plane discarded, by cause.",
        Counter,
    );
    for c in DropCause::ALL {
        v.value(&|| vec![("cause", c.name().to_owned())], t.drops_of(c));
    }
    v.family(
        "zlrouter_queued_packets",
        "Packets waiting in egress queues.",
        Gauge,
    );
    v.value(&Vec::new, dp.queued());

    type ColorField = (&'static str, &'static str, fn(&zl_qos::ColorStats) -> u64);
    let color_fields: [ColorField; 6] = [
        (
            "zlrouter_class_enqueued_packets_total",
            "Packets admitted to the class queue, by color.",
            |s| s.enqueued,
        ),
        (
            "zlrouter_class_dequeued_packets_total",
            "Packets that left the class queue, by color.",
            |s| s.dequeued,
        ),
        (
            "zlrouter_class_marked_packets_total",
            "Packets marked by the class's AQM, by color.",
            |s| s.marks,
        ),
        (
            "zlrouter_class_early_drops_total",
            "AQM early drops, by color.",
            |s| s.early_drops,
        ),
        (
            "zlrouter_class_forced_drops_total",
            "AQM forced drops, by color.",
            |s| s.forced_drops,
        ),
        (
            "zlrouter_class_tail_drops_total",
            "Tail drops (queue full), by color.",
            |s| s.tail_drops,
        ),
    ];
    for (name, help, get) in color_fields {
        v.family(name, help, Counter);
        for p in 0..dp.port_count() {
            let qos = dp.qos(p);
            for (ci, class) in qos.class_names().iter().enumerate() {
                let Some(cs) = qos.class_stats(ci) else {
                    continue;
                };
                for color in Color::ALL {
                    let labels = || {
                        vec![
                            ("port", dp.port_name(p).to_owned()),
                            ("class", class.clone()),
                            ("color", color.name().to_owned()),
                        ]
                    };
                    v.value(&labels, get(cs.color(color)));
                }
            }
        }
    }
    v.family(
        "zlrouter_class_queue_packets",
        "Current length of the class queue.",
        Gauge,
    );
    for p in 0..dp.port_count() {
        let qos = dp.qos(p);
        for (ci, class) in qos.class_names().iter().enumerate() {
            let len = qos.queue_len(ci).map_or(0, |(packets, _)| packets as u64);
            v.value(
                &|| {
                    vec![
                        ("port", dp.port_name(p).to_owned()),
                        ("class", class.clone()),
                    ]
                },
                len,
            );
        }
    }
    v.family(
        "zlrouter_class_sojourn_seconds",
        "Time packets spent in the class queue, by color.",
        MetricType::Histogram,
    );
    let sojourn_bounds = || {
        (0..SOJOURN_BUCKETS)
            .map(|k| {
                if k + 1 == SOJOURN_BUCKETS {
                    f64::MAX
                } else {
                    SojournHistogram::bucket_floor_us(k + 1) as f64 * 1e-6
                }
            })
            .collect()
    };
    for p in 0..dp.port_count() {
        let qos = dp.qos(p);
        for (ci, class) in qos.class_names().iter().enumerate() {
            let Some(cs) = qos.class_stats(ci) else {
                continue;
            };
            for color in Color::ALL {
                let h = &cs.color(color).sojourn;
                let labels = || {
                    vec![
                        ("port", dp.port_name(p).to_owned()),
                        ("class", class.clone()),
                        ("color", color.name().to_owned()),
                    ]
                };
                v.hist(
                    &labels,
                    &sojourn_bounds,
                    &h.buckets,
                    h.sum_ns as f64 * 1e-9,
                    h.count,
                );
            }
        }
    }
    v.family(
        "zlrouter_class_queue_length_packets",
        "Class queue length, sampled every 8 polls.",
        MetricType::Histogram,
    );
    let qlen_bounds = || {
        (0..QLEN_BUCKETS)
            .map(|k| {
                if k + 1 == QLEN_BUCKETS {
                    f64::MAX
                } else {
                    ((1u64 << k) - 1) as f64
                }
            })
            .collect()
    };
    for p in 0..dp.port_count() {
        let hists = dp.qlen_hist(p);
        for (ci, class) in dp.qos(p).class_names().iter().enumerate() {
            let Some(h) = hists.get(ci) else {
                continue;
            };
            v.hist(
                &|| {
                    vec![
                        ("port", dp.port_name(p).to_owned()),
                        ("class", class.clone()),
                    ]
                },
                &qlen_bounds,
                &h.buckets,
                h.sum as f64,
                h.count(),
            );
        }
    }
    v.family(
        "zlrouter_zombie_estimated_flows",
        "Active flows at the egress estimated by its Zombie List, 1/P(t) (+Inf while P = 0).",
        Gauge,
    );
    for p in 0..dp.port_count() {
        if let Some(n) = dp.estimated_flows(p) {
            v.value(&|| vec![("port", dp.port_name(p).to_owned())], n.to_bits());
        }
    }
    v.family(
        "zlrouter_group_packets_total",
        "Generator flow groups: packets by fate.",
        Counter,
    );
    for g in dp.groups() {
        for (fate, n) in [
            ("offered", g.fate.received),
            ("forwarded", g.fate.forwarded),
            ("dropped", g.fate.dropped()),
            ("marked", g.fate.marked),
        ] {
            v.value(
                &|| vec![("group", g.name.clone()), ("fate", fate.to_owned())],
                n,
            );
        }
    }
}

struct Builder(Vec<Family>);

impl Visit for Builder {
    fn family(&mut self, name: &'static str, help: &'static str, kind: MetricType) {
        let values = if matches!(kind, MetricType::Histogram) {
            Values::Hist(Vec::new())
        } else {
            Values::Scalar(Vec::new())
        };
        self.0.push(Family {
            name,
            help,
            kind,
            values,
        });
    }
    fn value(&mut self, labels: &dyn Fn() -> Labels, v: u64) {
        if let Some(Family {
            values: Values::Scalar(s),
            ..
        }) = self.0.last_mut()
        {
            s.push(Series {
                labels: labels(),
                value: AtomicU64::new(v),
            });
        }
    }
    fn hist(
        &mut self,
        labels: &dyn Fn() -> Labels,
        bounds: &dyn Fn() -> Vec<f64>,
        buckets: &[u64],
        sum: f64,
        count: u64,
    ) {
        if let Some(Family {
            values: Values::Hist(h),
            ..
        }) = self.0.last_mut()
        {
            h.push(Hist {
                labels: labels(),
                bounds: bounds(),
                buckets: buckets.iter().map(|&b| AtomicU64::new(b)).collect(),
                sum: AtomicU64::new(sum.to_bits()),
                count: AtomicU64::new(count),
            });
        }
    }
}

struct Publisher<'a> {
    families: &'a [Family],
    family: usize,
    series: usize,
}

impl Visit for Publisher<'_> {
    fn family(&mut self, _: &'static str, _: &'static str, _: MetricType) {
        self.family = self.family.wrapping_add(1);
        self.series = 0;
    }
    fn value(&mut self, _: &dyn Fn() -> Labels, v: u64) {
        if let Some(Family {
            values: Values::Scalar(s),
            ..
        }) = self.families.get(self.family)
        {
            if let Some(x) = s.get(self.series) {
                x.value.store(v, Ordering::Relaxed);
            }
        }
        self.series += 1;
    }
    fn hist(
        &mut self,
        _: &dyn Fn() -> Labels,
        _: &dyn Fn() -> Vec<f64>,
        buckets: &[u64],
        sum: f64,
        count: u64,
    ) {
        if let Some(Family {
            values: Values::Hist(h),
            ..
        }) = self.families.get(self.family)
        {
            if let Some(x) = h.get(self.series) {
                for (a, &b) in x.buckets.iter().zip(buckets) {
                    a.store(b, Ordering::Relaxed);
                }
                x.sum.store(sum.to_bits(), Ordering::Relaxed);
                x.count.store(count, Ordering::Relaxed);
            }
        }
        self.series += 1;
    }
}

/// The published counters of one data plane.
#[derive(Debug)]
pub struct MetricsHub {
    families: Vec<Family>,
    /// Connections the metrics endpoint failed to accept (file descriptors exhausted, ...);
    /// written by the control thread.
    accept_errors: AtomicU64,
}

/// Families whose values are f64 bits rather than integers.
fn is_float(name: &str) -> bool {
    matches!(
        name,
        "zlrouter_virtual_time_seconds" | "zlrouter_zombie_estimated_flows"
    )
}

impl MetricsHub {
    /// Lays out one series per port, class, color and cause of `dp`.
    pub fn new(dp: &dyn RouterView) -> Self {
        let mut b = Builder(Vec::new());
        walk(dp, Nanos::ZERO, &mut b);
        MetricsHub {
            families: b.0,
            accept_errors: AtomicU64::new(0),
        }
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

    /// Stores the current counters (called by the forwarding thread at a low rate).
    pub fn publish(&self, now: Nanos, dp: &dyn RouterView) {
        let mut p = Publisher {
            families: &self.families,
            family: usize::MAX,
            series: 0,
        };
        walk(dp, now, &mut p);
    }

    /// The Prometheus text exposition of the last publish.
    pub fn encode(self: &Arc<Self>) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(HubCollector(self.clone())));
        let mut out = String::new();
        // Cannot fail: writing to a String.
        let _ = prometheus_client::encoding::text::encode(&mut out, &registry);
        out
    }
}

#[derive(Debug)]
struct HubCollector(Arc<MetricsHub>);

impl Collector for HubCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        for f in &self.0.families {
            // prometheus-client appends `_total` to counters itself.
            let name = f.name.strip_suffix("_total").unwrap_or(f.name);
            let mut me = encoder.encode_descriptor(name, f.help, None, f.kind)?;
            match &f.values {
                Values::Scalar(series) => {
                    for s in series {
                        let raw = s.value.load(Ordering::Relaxed);
                        // An unlabelled series is written bare (`name value`, not `name{} value`).
                        if s.labels.is_empty() {
                            encode_scalar(&mut me, f, raw)?;
                        } else {
                            encode_scalar(&mut me.encode_family(&s.labels)?, f, raw)?;
                        }
                    }
                }
                Values::Hist(hs) => {
                    for h in hs {
                        let buckets: Vec<(f64, u64)> = h
                            .bounds
                            .iter()
                            .zip(&h.buckets)
                            .map(|(&b, c)| (b, c.load(Ordering::Relaxed)))
                            .collect();
                        let mut fe = me.encode_family(&h.labels)?;
                        fe.encode_histogram::<NoLabelSet>(
                            f64::from_bits(h.sum.load(Ordering::Relaxed)),
                            h.count.load(Ordering::Relaxed),
                            &buckets,
                            None,
                        )?;
                    }
                }
            }
        }
        let mut me = encoder.encode_descriptor(
            "zlrouter_metrics_accept_errors",
            "Connections the metrics endpoint failed to accept (e.g. out of file descriptors); \
             each is logged, and accepting resumes after a back-off",
            None,
            MetricType::Counter,
        )?;
        me.encode_counter::<NoLabelSet, _, u64>(&self.0.accept_errors(), None)?;
        Ok(())
    }
}

fn encode_scalar(e: &mut MetricEncoder<'_>, f: &Family, raw: u64) -> Result<(), std::fmt::Error> {
    match (f.kind, is_float(f.name)) {
        (MetricType::Counter, _) => e.encode_counter::<NoLabelSet, _, u64>(&raw, None),
        (_, true) => e.encode_gauge(&f64::from_bits(raw)),
        (_, false) => e.encode_gauge(&(raw.min(i64::MAX as u64) as i64)),
    }
}
