//! The discrete-event simulator: a dumbbell of flows sharing one bottleneck link.
//!
//! Each flow has its own access link (rate, propagation delay) into the bottleneck router;
//! the router's queue is any [`Bottleneck`] (the project's AQM and QoS code, unchanged); the
//! bottleneck link serialises one packet at a time at its rate and adds its propagation delay;
//! ACKs return over an uncongested reverse path (see [`crate::flow`]).
//!
//! Determinism: one seeded random source feeds every random decision of the arrivals in a
//! fixed order, a second one derived from the same seed the bottleneck's dequeue-time
//! decisions, and the event queue orders equal times by insertion, so a seed reproduces a run
//! bit for bit.

use rand::SeedableRng;
use zl_aqm::{AqmStats, Discard, PacketMeta, Verdict};
use zl_core::{FlowId, Nanos};

use crate::bottleneck::{Bottleneck, Dequeue, SimRng};
use crate::delay::DelayHistogram;
use crate::event::{Event, EventQueue, TimerKind};
use crate::flow::{Core, FlowCounters, FlowIo, Path};
use crate::packet::{Packet, PacketArena};
use crate::receiver::TcpReceiver;
use crate::tcp::{EcnMode, TcpModel, TcpParams, TcpSender, TcpVariant, WebParams};
use crate::tcp_ns2::Ns2Sender;
use crate::udp::{CbrParams, CbrSender, TfrcParams, TfrcSender};

/// What a flow sends.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SourceSpec {
    /// TCP; `web` turns the endless transfer into on/off transfers.
    Tcp {
        params: TcpParams,
        web: Option<WebParams>,
    },
    Cbr(CbrParams),
    Tfrc(TfrcParams),
}

/// One flow of the dumbbell.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlowSpec {
    pub source: SourceSpec,
    /// Sender -> router propagation delay.
    pub access_delay: Nanos,
    /// Sender's access link rate in bit/s; 0 for unlimited.
    pub access_rate_bps: f64,
    /// Extra delay after the bottleneck link (receiver's side).
    pub egress_delay: Nanos,
    /// When the flow starts.
    pub start: Nanos,
    /// Diffserv code point of the flow's packets (`None`: unclassifiable, default class).
    pub dscp: Option<u8>,
    /// A label for grouping in reports (e.g. 0 = Reno, 1 = Vegas).
    pub group: u16,
    /// The sending host (`PacketMeta::src_host`, what per-host isolation keys on); `None`:
    /// a host of its own, numbered by the flow's index.
    pub src_host: Option<u16>,
    /// The receiving host (`PacketMeta::dst_host`).
    pub dst_host: u16,
}

/// The stream number of the bottleneck's dequeue-time random source
/// (`zl_core::splitmix64(seed, DEQUEUE_STREAM)`).
const DEQUEUE_STREAM: u64 = 2;

/// The whole run.
#[derive(Clone, Debug, PartialEq)]
pub struct SimSpec {
    pub seed: u64,
    pub duration: Nanos,
    /// Counters restart at this time; results cover `[warmup, duration)`.
    pub warmup: Nanos,
    /// Bottleneck rate, bit/s.
    pub bottleneck_rate_bps: f64,
    /// Bottleneck one-way propagation delay.
    pub bottleneck_delay: Nanos,
    /// Period of the queue/probe trace; `None` for no trace.
    pub sample_interval: Option<Nanos>,
    pub flows: Vec<FlowSpec>,
}

/// A passive observer of bottleneck arrivals (the Zombie List's 1/P(t), an EWMA of the queue),
/// traced at every sample.
pub trait Probe: Send {
    fn on_arrival(&mut self, now: Nanos, queue_len: u32, flow: FlowId, rng: &mut SimRng);
    fn value(&self) -> f64;
}

/// One row of the trace.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    pub t: f64,
    pub queue_packets: u32,
    /// Bottleneck capacity (packets) at this time; changes under a live sizing rule.
    pub capacity_packets: u32,
    pub probe: f64,
    /// Congestion window of flow 0 (TCP), packets.
    pub cwnd0: f64,
}

/// Bottleneck queueing delay statistics of one class.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SojournStats {
    pub sum_s: f64,
    pub n: u64,
    /// Counts in 1 ms bins; the last bin holds everything longer.
    pub hist_ms: Vec<u64>,
}

impl SojournStats {
    pub const BINS: usize = 500;

    pub fn mean_s(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum_s / self.n as f64
        }
    }
}

/// Results of one flow over the measured interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlowReport {
    pub group: u16,
    /// The bottleneck class its packets last went to.
    pub class: u8,
    pub counters: FlowCounters,
    /// Goodput (in-order delivered bytes), bit/s.
    pub goodput_bps: f64,
}

impl FlowReport {
    /// Fraction of this flow's packets lost at the bottleneck.
    pub fn loss_rate(&self) -> f64 {
        let arrivals = self.counters.delivered + self.counters.drops();
        if arrivals == 0 {
            0.0
        } else {
            self.counters.drops() as f64 / (self.counters.sent.max(arrivals)) as f64
        }
    }
}

/// Results of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct SimReport {
    pub flows: Vec<FlowReport>,
    /// Length of the measured interval, s.
    pub measured_s: f64,
    /// Busy fraction of the bottleneck link.
    pub utilisation: f64,
    /// Time-averaged bottleneck queue, packets.
    pub mean_queue_packets: f64,
    /// Bottleneck admission counters over the measured interval.
    pub bottleneck: AqmStats,
    pub samples: Vec<Sample>,
    /// Per-class queueing delay.
    pub sojourn: Vec<SojournStats>,
    /// Bottleneck queueing delay of each group's packets, indexed by [`FlowSpec::group`].
    pub group_delay: Vec<DelayHistogram>,
    /// Packets a queue discipline admitted and then discarded, over the measured interval:
    /// as they left, and pushed out to make room.
    pub dequeue_drops: u64,
    pub overflow_drops: u64,
    /// Events processed (whole run, warm-up included).
    pub events: u64,
}

impl SimReport {
    /// Fraction of bottleneck arrivals dropped (on arrival, or after admission by a queue
    /// discipline).
    pub fn loss_rate(&self) -> f64 {
        let a = self.bottleneck.arrivals();
        if a == 0 {
            0.0
        } else {
            let after = self.dequeue_drops + self.overflow_drops;
            (a - self.bottleneck.enqueued + after) as f64 / a as f64
        }
    }
}

/// Jain's fairness index `(sum x)^2 / (n sum x^2)`: 1 when all equal, 1/n when one takes all.
pub fn jain_index(xs: &[f64]) -> f64 {
    let n = xs.len() as f64;
    let s: f64 = xs.iter().sum();
    let s2: f64 = xs.iter().map(|x| x * x).sum();
    if s2 == 0.0 {
        1.0
    } else {
        s * s / (n * s2)
    }
}

/// A spec that cannot run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SimError {
    #[error("invalid `{key}`: {reason}")]
    Invalid { key: String, reason: String },
}

fn invalid(key: impl Into<String>, reason: impl Into<String>) -> SimError {
    SimError::Invalid {
        key: key.into(),
        reason: reason.into(),
    }
}

enum Source {
    Tcp(Box<TcpSender>, TcpReceiver),
    Ns2(Box<Ns2Sender>, TcpReceiver),
    Cbr(CbrSender),
    Tfrc(TfrcSender),
}

struct Flow {
    source: Source,
    path: Path,
    template: Packet,
    counters: FlowCounters,
    base: FlowCounters,
    group: u16,
    class: u8,
    delack: Nanos,
    src_host: u16,
    dst_host: u16,
}

/// A configured run.
pub struct Simulator {
    core: Core,
    flows: Vec<Flow>,
    bottleneck: Box<dyn Bottleneck>,
    probe: Option<Box<dyn Probe>>,
    ns_per_byte: f64,
    link_delay: Nanos,
    in_service: Option<u32>,
    /// The pending [`Event::LinkWake`] that counts (an earlier hold's later wake is stale).
    wake_at: Option<Nanos>,
    duration: Nanos,
    warmup: Nanos,
    sample_interval: Option<Nanos>,
    busy_ns: u64,
    queue_area: f64,
    queue_last_change: Nanos,
    queue_len: u32,
    base_stats: AqmStats,
    samples: Vec<Sample>,
    sojourn: Vec<SojournStats>,
    group_delay: Vec<DelayHistogram>,
}

impl Simulator {
    /// Builds a run; every spec value is checked and a bad one is named.
    pub fn new(spec: &SimSpec, mut bottleneck: Box<dyn Bottleneck>) -> Result<Self, SimError> {
        if spec.bottleneck_rate_bps.is_nan() || spec.bottleneck_rate_bps <= 0.0 {
            return Err(invalid("bottleneck.rate_mbps", "must be > 0"));
        }
        if spec.duration == Nanos::ZERO {
            return Err(invalid("duration_s", "must be > 0"));
        }
        if spec.warmup >= spec.duration {
            return Err(invalid("warmup_s", "must be shorter than duration_s"));
        }
        if spec.flows.is_empty() {
            return Err(invalid("flows", "at least one flow is needed"));
        }
        let mut flows = Vec::with_capacity(spec.flows.len());
        let classes = bottleneck.classes().max(1);
        for (i, f) in spec.flows.iter().enumerate() {
            flows.push(build_flow(i, f, spec.bottleneck_delay)?);
        }
        let n = spec.flows.len();
        let groups = spec
            .flows
            .iter()
            .map(|f| f.group as usize + 1)
            .max()
            .unwrap_or(1);
        bottleneck.seed_dequeue(zl_core::splitmix64(spec.seed, DEQUEUE_STREAM));
        let samples = spec
            .sample_interval
            .map(|s| (spec.duration.as_nanos() / s.as_nanos().max(1)) as usize + 1)
            .unwrap_or(0);
        let mut core = Core {
            now: Nanos::ZERO,
            events: EventQueue::with_capacity(64 * n + 1024),
            arena: PacketArena::with_capacity(64 * n + 1024),
            rng: SimRng::seed_from_u64(spec.seed),
        };
        for (i, f) in spec.flows.iter().enumerate() {
            core.events.push(
                f.start,
                Event::Timer {
                    flow: i as u32,
                    kind: TimerKind::Start,
                },
            );
        }
        core.events.push(spec.warmup, Event::WarmupEnd);
        if let Some(s) = spec.sample_interval {
            core.events.push(s, Event::Sample);
        }
        Ok(Simulator {
            core,
            flows,
            bottleneck,
            probe: None,
            ns_per_byte: 8e9 / spec.bottleneck_rate_bps,
            link_delay: spec.bottleneck_delay,
            in_service: None,
            wake_at: None,
            duration: spec.duration,
            warmup: spec.warmup,
            sample_interval: spec.sample_interval,
            busy_ns: 0,
            queue_area: 0.0,
            queue_last_change: Nanos::ZERO,
            queue_len: 0,
            base_stats: AqmStats::default(),
            samples: Vec::with_capacity(samples),
            sojourn: vec![
                SojournStats {
                    hist_ms: vec![0; SojournStats::BINS],
                    ..Default::default()
                };
                classes
            ],
            group_delay: vec![DelayHistogram::default(); groups],
        })
    }

    /// Attaches a passive observer of bottleneck arrivals, traced with the queue.
    pub fn with_probe(mut self, probe: Box<dyn Probe>) -> Self {
        self.probe = Some(probe);
        self
    }

    /// The bottleneck, for reading its state between [`Simulator::run_until`] calls.
    pub fn bottleneck(&self) -> &dyn Bottleneck {
        self.bottleneck.as_ref()
    }

    /// Simulated time reached.
    pub fn now(&self) -> Nanos {
        self.core.now
    }

    /// Processes events up to `until` (capped at the run's end).
    pub fn run_until(&mut self, until: Nanos) {
        let until = until.min(self.duration);
        while let Some(t) = self.core.events.peek_time() {
            if t >= until {
                break;
            }
            let Some((t, ev)) = self.core.events.pop() else {
                break;
            };
            self.core.now = t;
            self.handle(ev);
        }
        self.core.now = until;
    }

    /// Runs to the end and reports.
    pub fn run(mut self) -> SimReport {
        self.run_until(self.duration);
        self.finish()
    }

    /// Reports on what has run (call after `run_until(duration)`).
    pub fn finish(mut self) -> SimReport {
        let end = self.duration;
        self.account_queue(end);
        let measured = (end - self.warmup).as_secs_f64();
        let flows: Vec<FlowReport> = self
            .flows
            .iter()
            .map(|f| {
                let c = f.counters.since(&f.base);
                FlowReport {
                    group: f.group,
                    class: f.class,
                    counters: c,
                    goodput_bps: c.delivered_bytes as f64 * 8.0 / measured,
                }
            })
            .collect();
        let s = self.bottleneck.stats();
        let b = self.base_stats;
        let discarded = |f: fn(&FlowReport) -> u64| flows.iter().map(f).sum::<u64>();
        let dequeue_drops = discarded(|f| f.counters.dequeue_drops);
        let overflow_drops = discarded(|f| f.counters.overflow_drops);
        SimReport {
            flows,
            measured_s: measured,
            utilisation: self.busy_ns as f64 * 1e-9 / measured,
            mean_queue_packets: self.queue_area / (end - self.warmup).as_nanos() as f64,
            bottleneck: AqmStats {
                enqueued: s.enqueued - b.enqueued,
                marked: s.marked - b.marked,
                early_drops: s.early_drops - b.early_drops,
                forced_drops: s.forced_drops - b.forced_drops,
                tail_drops: s.tail_drops - b.tail_drops,
            },
            samples: self.samples,
            sojourn: self.sojourn,
            group_delay: self.group_delay,
            dequeue_drops,
            overflow_drops,
            events: self.core.events.processed(),
        }
    }

    fn account_queue(&mut self, now: Nanos) {
        if now > self.warmup {
            let from = self.queue_last_change.max(self.warmup);
            self.queue_area += self.queue_len as f64 * (now - from).as_nanos() as f64;
        }
        self.queue_last_change = now;
        self.queue_len = self.bottleneck.len_packets();
    }

    fn io(&mut self, i: usize) -> (&mut Source, FlowIo<'_>) {
        let f = &mut self.flows[i];
        (
            &mut f.source,
            FlowIo {
                core: &mut self.core,
                path: &mut f.path,
                counters: &mut f.counters,
                flow: i as u32,
                template: f.template,
            },
        )
    }

    fn handle(&mut self, ev: Event) {
        let now = self.core.now;
        match ev {
            Event::BottleneckArrive { pkt } => self.arrive(pkt),
            Event::TxDone => {
                if let Some(h) = self.in_service.take() {
                    let p = self.core.arena.get(h);
                    let flow = p.flow as usize;
                    if now > self.warmup {
                        // Only the part of the transmission after the warm-up counts.
                        let tx = (p.len as f64 * self.ns_per_byte) as u64;
                        self.busy_ns += tx.min((now - self.warmup).as_nanos());
                    }
                    let at = now + self.link_delay + self.flows[flow].path.egress_delay;
                    self.core.events.push(at, Event::ReceiverArrive { pkt: h });
                }
                self.start_tx();
            }
            Event::LinkWake => {
                if self.wake_at == Some(now) {
                    self.wake_at = None;
                    if self.in_service.is_none() {
                        self.start_tx();
                    }
                }
            }
            Event::ReceiverArrive { pkt } => self.deliver(pkt),
            Event::Ack { flow, ack, ece, ts } => {
                let (src, mut io) = self.io(flow as usize);
                match src {
                    Source::Tcp(s, _) => s.on_ack(&mut io, ack, ece, ts),
                    Source::Ns2(s, _) => s.on_ack(&mut io, ack, ece),
                    Source::Tfrc(s) => s.on_feedback(&mut io, ack, ts),
                    Source::Cbr(_) => {}
                }
            }
            Event::Timer { flow, kind } => self.timer(flow as usize, kind),
            Event::Sample => {
                let cwnd0 = match &self.flows[0].source {
                    Source::Tcp(s, _) => s.last_cwnd,
                    Source::Ns2(s, _) => s.last_cwnd,
                    _ => 0.0,
                };
                self.samples.push(Sample {
                    t: now.as_secs_f64(),
                    queue_packets: self.bottleneck.len_packets(),
                    capacity_packets: self.bottleneck.capacity_packets(),
                    probe: self.probe.as_ref().map_or(f64::NAN, |p| p.value()),
                    cwnd0,
                });
                self.bottleneck.tick(now);
                if let Some(s) = self.sample_interval {
                    self.core.events.push(now + s, Event::Sample);
                }
            }
            Event::WarmupEnd => {
                for f in &mut self.flows {
                    f.base = f.counters;
                }
                self.base_stats = self.bottleneck.stats();
                self.account_queue(now);
                self.queue_area = 0.0;
                for s in &mut self.sojourn {
                    *s = SojournStats {
                        hist_ms: vec![0; SojournStats::BINS],
                        ..Default::default()
                    };
                }
                for h in &mut self.group_delay {
                    *h = DelayHistogram::default();
                }
            }
        }
    }

    fn arrive(&mut self, h: u32) {
        let now = self.core.now;
        let p = *self.core.arena.get(h);
        let flow = p.flow as usize;
        if let Some(probe) = self.probe.as_mut() {
            probe.on_arrival(now, self.queue_len, FlowId(flow as u64), &mut self.core.rng);
        }
        let mut meta = PacketMeta {
            len: p.len,
            flow: FlowId(flow as u64),
            ecn: p.ecn,
            has_cc_ext: p.cc_ext,
            priority: p.priority,
            weight: p.weight,
            color: p.color,
            src_host: self.flows[flow].src_host,
            dst_host: self.flows[flow].dst_host,
        };
        let (v, class) = self
            .bottleneck
            .enqueue(now, &mut self.core.rng, &mut meta, p.dscp, h);
        self.flows[flow].class = class;
        let c = &mut self.flows[flow].counters;
        match v {
            Verdict::Enqueue | Verdict::MarkCe => {
                let q = self.core.arena.get_mut(h);
                q.class = class;
                if v == Verdict::MarkCe {
                    q.marked = true;
                    c.marks += 1;
                }
            }
            Verdict::EarlyDrop => c.early_drops += 1,
            Verdict::ForcedDrop => c.forced_drops += 1,
            Verdict::TailDrop => c.tail_drops += 1,
        }
        if !v.admits() {
            self.core.arena.free(h);
        }
        // An arrival may push queued packets out (FQ-CoDel's overflow), itself included.
        let discarded = self.take_discarded();
        if v.admits() || discarded > 0 {
            self.account_queue(now);
        }
        if v.admits() && self.in_service.is_none() {
            self.start_tx();
        }
    }

    /// Counts and frees the packets the bottleneck discarded after admitting them; returns
    /// how many.
    fn take_discarded(&mut self) -> usize {
        let mut n = 0;
        let (flows, arena) = (&mut self.flows, &mut self.core.arena);
        self.bottleneck.take_discarded(&mut |h, cause| {
            let c = &mut flows[arena.get(h).flow as usize].counters;
            match cause {
                Discard::Dequeue => c.dequeue_drops += 1,
                Discard::Overflow => c.overflow_drops += 1,
            }
            arena.free(h);
            n += 1;
        });
        n
    }

    /// The link is free: sends the bottleneck's next packet, or waits until it may.
    fn start_tx(&mut self) {
        let now = self.core.now;
        let next = self.bottleneck.dequeue(now);
        let discarded = self.take_discarded();
        let d = match next {
            Dequeue::Packet(d) => d,
            Dequeue::Hold(until) => {
                // Never at `now` itself: the bottleneck would answer the same.
                let until = until.max(now + Nanos(1));
                if self.wake_at.is_none_or(|w| until < w) {
                    self.wake_at = Some(until);
                    self.core.events.push(until, Event::LinkWake);
                }
                if discarded > 0 {
                    self.account_queue(now);
                }
                return;
            }
            Dequeue::Empty => {
                if discarded > 0 {
                    self.account_queue(now);
                }
                return;
            }
        };
        self.account_queue(now);
        if d.mark {
            self.core.arena.get_mut(d.handle).marked = true;
        }
        let p = *self.core.arena.get(d.handle);
        let wait = now - d.enqueued_at;
        let f = &mut self.flows[p.flow as usize];
        if let Some(h) = self.group_delay.get_mut(f.group as usize) {
            h.record(wait.as_nanos());
        }
        let c = &mut f.counters;
        c.marks += u64::from(d.mark);
        c.queue_delay_sum += wait.as_nanos();
        c.queue_delay_n += 1;
        if let Some(s) = self.sojourn.get_mut(p.class as usize) {
            s.sum_s += wait.as_secs_f64();
            s.n += 1;
            let bin = ((wait.as_nanos() / 1_000_000) as usize).min(SojournStats::BINS - 1);
            s.hist_ms[bin] += 1;
        }
        self.in_service = Some(d.handle);
        let tx = Nanos((p.len as f64 * self.ns_per_byte).round() as u64);
        self.core.events.push(now + tx, Event::TxDone);
    }

    fn deliver(&mut self, h: u32) {
        let p = *self.core.arena.get(h);
        self.core.arena.free(h);
        let i = p.flow as usize;
        let now = self.core.now;
        let f = &mut self.flows[i];
        f.counters.e2e_delay_sum += (now - p.sent_at).as_nanos();
        f.counters.e2e_delay_n += 1;
        let back = now + f.path.return_delay;
        match &mut f.source {
            Source::Tcp(_, rx) | Source::Ns2(_, rx) => {
                let r = rx.on_packet_cwr(p.seq, p.sent_at, p.marked, p.cwr);
                f.counters.delivered += r.delivered as u64;
                f.counters.delivered_bytes += r.delivered as u64 * p.len as u64;
                if let Some(a) = r.ack {
                    let ev = Event::Ack {
                        flow: i as u32,
                        ack: a.ack,
                        ece: a.ece,
                        ts: a.ts,
                    };
                    self.core.events.push(back, ev);
                }
                if r.arm_delack {
                    rx.delack_armed = true;
                    let ev = Event::Timer {
                        flow: i as u32,
                        kind: TimerKind::DelAck,
                    };
                    self.core.events.push(now + f.delack, ev);
                }
            }
            Source::Tfrc(_) => {
                f.counters.delivered += 1;
                f.counters.delivered_bytes += p.len as u64;
                let ev = Event::Ack {
                    flow: i as u32,
                    ack: p.seq,
                    ece: p.marked,
                    ts: p.sent_at,
                };
                self.core.events.push(back, ev);
            }
            Source::Cbr(_) => {
                f.counters.delivered += 1;
                f.counters.delivered_bytes += p.len as u64;
            }
        }
    }

    fn timer(&mut self, i: usize, kind: TimerKind) {
        if kind == TimerKind::DelAck {
            let now = self.core.now;
            let f = &mut self.flows[i];
            if let Source::Tcp(_, rx) | Source::Ns2(_, rx) = &mut f.source {
                if let Some(a) = rx.on_delack() {
                    let ev = Event::Ack {
                        flow: i as u32,
                        ack: a.ack,
                        ece: a.ece,
                        ts: a.ts,
                    };
                    self.core.events.push(now + f.path.return_delay, ev);
                }
            }
            return;
        }
        let (src, mut io) = self.io(i);
        match (src, kind) {
            (Source::Tcp(s, _), k) => s.on_timer(&mut io, k),
            (Source::Ns2(s, _), k) => s.on_timer(&mut io, k),
            (Source::Cbr(s), TimerKind::Start) => s.start(&mut io),
            (Source::Cbr(s), TimerKind::Send) => s.tick(&mut io),
            (Source::Tfrc(s), TimerKind::Start) => s.start(&mut io),
            (Source::Tfrc(s), TimerKind::Send) => s.on_timer(&mut io),
            _ => {}
        }
    }
}

/// The longest time a flow setting may name, ms (1e6 s), and the slowest rate, bit/s: with
/// these bounds no timer or serialisation time can overflow `Nanos` (u64 ns, 584 years).
const MAX_MS: f64 = 1e9;
const MIN_RATE_BPS: f64 = 1.0;

/// Checks one flow's values; the error names the key (`flows[i].x`, or `groups[g].x` once
/// the caller renames it).
pub fn check_flow(i: usize, f: &FlowSpec) -> Result<(), SimError> {
    let key = |k: &str| format!("flows[{i}].{k}");
    let r = f.access_rate_bps;
    if !r.is_finite() || r < 0.0 || (r > 0.0 && r < MIN_RATE_BPS) {
        return Err(invalid(
            key("access_rate_mbps"),
            "must be 0 (unlimited) or at least 1e-6 (1 bit/s)",
        ));
    }
    match f.source {
        SourceSpec::Tcp { params, web } => {
            if params.packet_size < 40 {
                return Err(invalid(key("packet_size"), "must be >= 40 bytes"));
            }
            if params.window_cap == 0 || params.window_cap > 1 << 24 {
                return Err(invalid(
                    key("window_cap"),
                    "must be in 1..=16777216 packets",
                ));
            }
            if params.variant == TcpVariant::Tahoe && params.model != TcpModel::Ns2 {
                return Err(invalid(
                    key("variant"),
                    "tahoe is ns-2's Agent/TCP: it needs model = \"ns2\"",
                ));
            }
            if params.model == TcpModel::Ns2 {
                if params.variant == TcpVariant::Vegas || params.paced || web.is_some() {
                    return Err(invalid(
                        key("model"),
                        "the ns2 model has tahoe, reno and new-reno endless transfers, unpaced",
                    ));
                }
                if !params.tcp_tick_ms.is_finite()
                    || params.tcp_tick_ms <= 0.0
                    || params.tcp_tick_ms > 1e4
                {
                    return Err(invalid(key("tcp_tick_ms"), "must be in (0, 1e4] ms"));
                }
            }
            if params.initial_window == 0 {
                return Err(invalid(key("initial_window"), "must be >= 1"));
            }
            let bad_ms = |v: f64| !v.is_finite() || v <= 0.0 || v > MAX_MS;
            if bad_ms(params.min_rto_ms)
                || bad_ms(params.initial_rto_ms)
                || bad_ms(params.max_rto_ms)
            {
                return Err(invalid(
                    key("min_rto_ms"),
                    "RTO bounds must be > 0 and <= 1e9 ms",
                ));
            }
            if !params.delack_ms.is_finite() || params.delack_ms < 0.0 || params.delack_ms > MAX_MS
            {
                return Err(invalid(key("delack_ms"), "must be in 0..=1e9 ms"));
            }
            if !(8..=15).contains(&params.priority) {
                return Err(invalid(
                    key("priority"),
                    "must be in 8..=15 (docs/algorithms/priority-ecn-red.md)",
                ));
            }
            if let Some(w) = web {
                let finite = w.shape.is_finite()
                    && w.mean_size_packets.is_finite()
                    && w.mean_off_ms.is_finite();
                let ok = finite
                    && w.shape > 1.0
                    && w.mean_size_packets >= 1.0
                    && (0.0..=MAX_MS).contains(&w.mean_off_ms);
                if !ok {
                    return Err(invalid(
                        key("web"),
                        "needs shape > 1, mean_size_packets >= 1, 0 <= mean_off_ms <= 1e9",
                    ));
                }
            }
        }
        SourceSpec::Cbr(p) => {
            if !p.rate_bps.is_finite() || p.rate_bps < MIN_RATE_BPS || p.packet_size == 0 {
                return Err(invalid(
                    key("cbr"),
                    "CBR needs rate_bps >= 1 and packet_size > 0",
                ));
            }
        }
        SourceSpec::Tfrc(p) => {
            if !p.max_rate_bps.is_finite() || p.max_rate_bps < MIN_RATE_BPS || p.packet_size == 0 {
                return Err(invalid(
                    key("tfrc"),
                    "TFRC needs max_rate_bps >= 1 and packet_size > 0",
                ));
            }
        }
    }
    Ok(())
}

fn build_flow(i: usize, f: &FlowSpec, link_delay: Nanos) -> Result<Flow, SimError> {
    check_flow(i, f)?;
    let mut template = Packet {
        dscp: f.dscp,
        ..Packet::default()
    };
    let mut delack = Nanos::ZERO;
    let source = match f.source {
        SourceSpec::Tcp { params, web } => {
            template.ecn = match params.ecn {
                EcnMode::Off => zl_core::Ecn::NotEct,
                EcnMode::Rfc3168 | EcnMode::PriorityExt => zl_core::Ecn::Ect0,
            };
            template.cc_ext = params.ecn == EcnMode::PriorityExt;
            template.priority = params.priority;
            template.weight = params.weight;
            delack = Nanos::from_secs_f64(params.delack_ms * 1e-3);
            match params.model {
                TcpModel::Netsim => Source::Tcp(
                    Box::new(TcpSender::new(params, web)),
                    TcpReceiver::new(params.window_cap, params.delayed_ack),
                ),
                TcpModel::Ns2 => Source::Ns2(
                    Box::new(Ns2Sender::new(params)),
                    TcpReceiver::with_echo(
                        params.window_cap,
                        params.delayed_ack,
                        params.echo_until_cwr,
                    ),
                ),
            }
        }
        SourceSpec::Cbr(p) => {
            template.ecn = p.ecn;
            Source::Cbr(CbrSender::new(p))
        }
        SourceSpec::Tfrc(p) => Source::Tfrc(TfrcSender::new(p)),
    };
    let access_ns_per_byte = if f.access_rate_bps > 0.0 {
        8e9 / f.access_rate_bps
    } else {
        0.0
    };
    Ok(Flow {
        source,
        path: Path {
            access_delay: f.access_delay,
            access_ns_per_byte,
            access_free: Nanos::ZERO,
            egress_delay: f.egress_delay,
            return_delay: f.access_delay + link_delay + f.egress_delay,
        },
        template,
        counters: FlowCounters::default(),
        base: FlowCounters::default(),
        group: f.group,
        class: 0,
        delack,
        src_host: f.src_host.unwrap_or(i as u16),
        dst_host: f.dst_host,
    })
}

#[cfg(test)]
#[path = "sim_tests.rs"]
mod tests;
