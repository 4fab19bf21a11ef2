//! The built-in traffic generator: a virtual-time receive port that synthesises UDP flows.
//!
//! Each flow group of the config is `count` flows with the same per-flow rate, frame size
//! distribution, DSCP, ECN capability and arrival process (CBR, Poisson, or on-off with CBR
//! inside the on periods). Flow `i` of a group uses source address `src + i`, so flow keys
//! (src, src-dst, 5-tuple) tell the flows apart; with `same_src` every flow uses `src` (one host
//! with `count` connections), and only the 5-tuple (their source ports) tells them apart. A group marked `misbehaving` is labelled as
//! such in the reports; what makes it misbehave is its configuration (typically a rate well
//! above its fair share, sent whatever the drops, as an unresponsive UDP source).
//!
//! A group with a `tcp` table is responsive instead: each flow is a TCP Reno sender
//! (`super::reno`) whose segments go out as these UDP frames (flow and sequence number at the
//! start of the payload), no faster than the group's `rate_bps` (the sender's access link) and
//! no more than its window allows. The sink port that receives them records each delivery in
//! the generator's [`AckChannel`] (`super::acks`); the generator hands it to the flow's
//! receiver `rtt_ms` later and the receiver's cumulative ACK to the sender, so a segment the
//! router drops is never acknowledged and the sender backs off (three duplicate ACKs or its
//! timer), and a CE mark on an ECN-capable group halves its window. Everything happens in the
//! port's virtual time: sends, ACK arrivals and retransmission timers are events of one heap,
//! and [`Port::readiness`] names the earliest (or the earliest delivery waiting in the
//! channel), so the loop wakes the generator exactly when a sender may act.
//!
//! All randomness comes from one seeded generator, so a seed reproduces the run exactly.
//! Frames are written straight into pool buffers: no allocation per packet (the event heap
//! and the receivers' windows are reserved at build time).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::IpAddr;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};
use zl_core::{Ecn, Nanos};
use zl_port::{Batch, BufPool, Port, PortCounters, PortError, Readiness};
use zl_qos::DscpSpec;
use zl_wire::{checksum, MacAddr};

use super::acks::{AckChannel, SEGMENT_HEADER, SEGMENT_MAGIC};
use super::reno::{RenoSender, SegmentReceiver};
use crate::{invalid, ParamError};

/// Arrival process of a flow group.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Arrival {
    /// Constant bit rate: packets evenly spaced at `size * 8 / rate_bps`.
    #[default]
    Cbr,
    /// Exponential inter-arrival times with the CBR spacing as mean.
    Poisson,
    /// CBR during `on_ms`, silent during `off_ms`, repeating (the rate applies while on).
    OnOff,
}

/// One group of identical flows (a `[[ports.generator.flows]]` table).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FlowGroupParams {
    /// Name used in reports.
    pub name: String,
    /// Number of flows in the group.
    #[serde(default = "one")]
    pub count: u32,
    /// Offered rate of each flow in bits per second (frame bytes without FCS, times 8).
    pub rate_bps: u64,
    /// Frame size in bytes (Ethernet header to payload end, no FCS); 60..=1514.
    #[serde(default = "default_size")]
    pub size: u32,
    /// When set, sizes are uniform on `size..=size_max`.
    #[serde(default)]
    pub size_max: Option<u32>,
    /// DSCP of every packet: a number 0..=63 or a name (`ef`, `af11`, `cs1`, `be`).
    #[serde(default = "default_dscp")]
    pub dscp: DscpSpec,
    /// ECN field sent (`not-ect`, `ect0`, `ect1`, `ce`).
    #[serde(default)]
    pub ecn: Ecn,
    #[serde(default)]
    pub arrival: Arrival,
    /// On period for `on-off`, in milliseconds.
    #[serde(default = "default_on_off_ms")]
    pub on_ms: f64,
    /// Off period for `on-off`, in milliseconds.
    #[serde(default = "default_on_off_ms")]
    pub off_ms: f64,
    /// Labels the group as misbehaving in reports.
    #[serde(default)]
    pub misbehaving: bool,
    /// Source address of the first flow (IPv4 or IPv6); flow i uses `src + i`.
    pub src: IpAddr,
    /// Every flow of the group uses `src` itself instead: one host opening `count`
    /// connections, told apart by their source ports (a `5-tuple` flow key). Default false.
    #[serde(default)]
    pub same_src: bool,
    /// Destination address of every flow (same family as `src`).
    pub dst: IpAddr,
    /// UDP destination port.
    #[serde(default = "default_udp_port")]
    pub dst_port: u16,
    /// When the group starts sending, seconds of virtual time.
    #[serde(default)]
    pub start_s: f64,
    /// When it stops; the end of the run when absent.
    #[serde(default)]
    pub stop_s: Option<f64>,
    /// Makes every flow of the group a responsive TCP Reno sender (see the module doc);
    /// `rate_bps` is then its access link's rate, the most it can send.
    #[serde(default)]
    pub tcp: Option<TcpFlowParams>,
}

/// A responsive group's TCP settings (`[ports.generator.flows.tcp]`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TcpFlowParams {
    /// Round-trip time outside the router, ms: from the sink's delivery to the ACK reaching
    /// the sender (the generator-to-router hop takes no time).
    pub rtt_ms: f64,
    /// The receiver's advertised window, segments: the most a flow has in flight.
    #[serde(default = "default_window")]
    pub window: u32,
    /// Lower bound of the retransmission timeout, ms (RFC 6298 §2.4 says 1 s; Linux and
    /// ns-2 use 200 ms).
    #[serde(default = "default_min_rto_ms")]
    pub min_rto_ms: f64,
}

fn default_window() -> u32 {
    64
}
fn default_min_rto_ms() -> f64 {
    200.0
}
/// Largest advertised window, segments (each receiver holds one bit per segment of it).
const MAX_WINDOW: u32 = 65_536;

fn one() -> u32 {
    1
}
fn default_size() -> u32 {
    1000
}
fn default_dscp() -> DscpSpec {
    DscpSpec::Number(0)
}
fn default_on_off_ms() -> f64 {
    100.0
}
fn default_udp_port() -> u16 {
    9
}

/// The generator section of a port (`[ports.generator]`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GeneratorParams {
    /// Destination MAC written into generated frames; the receiving port's own MAC when absent.
    #[serde(default)]
    pub dst_mac: Option<String>,
    pub flows: Vec<FlowGroupParams>,
}

/// Longest on or off period, ms: keeps every virtual time far from `u64` overflow.
const MAX_PERIOD_MS: f64 = 3_600_000.0;
/// Latest start or stop time, s (the same bound as `run.duration_s`).
const MAX_TIME_S: f64 = 1e6;
/// Highest per-flow rate: 1 Tbit/s.
const MAX_RATE_BPS: u64 = 1_000_000_000_000;
pub(crate) const MIN_FRAME: u32 = 60;
pub(crate) const MAX_FRAME: u32 = 1514;
const ETH_LEN: usize = 14;
const IPV4_LEN: usize = 20;
const IPV6_LEN: usize = 40;
const UDP_LEN: usize = 8;

/// A validated flow group.
#[derive(Clone, Debug)]
struct Group {
    name: String,
    misbehaving: bool,
    rate_bps: u64,
    size: u32,
    size_max: u32,
    tos: u8,
    arrival: Arrival,
    on: Nanos,
    off: Nanos,
    start: Nanos,
    stop: Nanos,
    dst_port: u16,
    tcp: Option<GroupTcp>,
}

/// A responsive group's validated TCP settings.
#[derive(Clone, Copy, Debug)]
struct GroupTcp {
    rtt: Nanos,
    window: u32,
    min_rto: Nanos,
    /// The group's packets are ECN-capable: a CE mark is echoed and reacted to.
    ecn: bool,
}

#[derive(Clone, Debug)]
struct Flow {
    group: usize,
    src: IpAddr,
    dst: IpAddr,
    src_port: u16,
    ipv4_id: u16,
    tcp: Option<TcpFlow>,
}

/// A responsive flow: its sender, its receiver, and what of it waits in the event heap.
#[derive(Clone, Debug)]
struct TcpFlow {
    sender: RenoSender,
    receiver: SegmentReceiver,
    /// A `Send` event is in the heap.
    send_pending: bool,
    /// When the access link has finished the last segment.
    link_free: Nanos,
    /// The earliest `Timer` event in the heap.
    timer_at: Option<Nanos>,
}

/// What a responsive flow does at an instant. At one time, ACKs come first, then timers,
/// then sends (the derived order), so a sender sends on what it has just learned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum TcpEvent {
    /// The ACK of the delivery of `seq` reaches the sender.
    Ack { flow: u32, seq: u32, ce: bool },
    /// The retransmission timer may have expired.
    Timer { flow: u32 },
    /// The access link is free and the window may let a segment go.
    Send { flow: u32 },
}

/// A responsive flow's state, for tests and reports.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ResponsiveState {
    /// Index of the flow's group.
    pub group: usize,
    /// Congestion window, segments.
    pub cwnd: f64,
    pub ssthresh: f64,
    /// Retransmission timeouts so far.
    pub timeouts: u64,
}

/// What a group's flows have offered so far (for reports).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupInfo {
    pub name: String,
    pub misbehaving: bool,
    pub flows: u32,
}

/// Where a generator sits and what it derives from the run.
#[derive(Clone, Debug)]
pub struct GeneratorSetup<'a> {
    pub name: &'a str,
    /// Index of the port in the data plane.
    pub index: u16,
    /// The port's MAC (the default destination MAC of generated frames).
    pub own_mac: MacAddr,
    /// Config key of the generator table, for error messages (`ports[0].generator`).
    pub key_prefix: &'a str,
    pub seed: u64,
    /// End of the run: no packet is generated at or after it.
    pub end: Nanos,
    /// Tags of earlier generator ports' groups (this port's group k gets `tag_base + k + 1`).
    pub tag_base: u32,
    /// Where the sink records the responsive flows' deliveries; the generator makes its own
    /// (see [`GeneratorPort::acks`]) when absent and it has responsive groups.
    pub acks: Option<Arc<AckChannel>>,
}

/// The generator port.
#[derive(Debug)]
pub struct GeneratorPort {
    name: String,
    index: u16,
    src_mac: MacAddr,
    dst_mac: MacAddr,
    groups: Vec<Group>,
    /// Tag of group 0 minus one (groups of earlier generator ports come first).
    tag_base: u32,
    flows: Vec<Flow>,
    /// The open-loop flows' (next send time, flow index), earliest first.
    schedule: BinaryHeap<Reverse<(Nanos, u32)>>,
    /// The responsive flows' events, earliest first.
    events: BinaryHeap<Reverse<(Nanos, TcpEvent)>>,
    /// Deliveries of the responsive flows (`None` without any).
    acks: Option<Arc<AckChannel>>,
    /// The shortest return delay of a responsive group.
    min_rtt: Nanos,
    /// The latest stop of a responsive group: later deliveries wake nothing.
    tcp_stop: Nanos,
    rng: Xoshiro256PlusPlus,
    counters: PortCounters,
}

fn add_to_ip(ip: IpAddr, i: u32) -> IpAddr {
    match ip {
        IpAddr::V4(a) => IpAddr::V4(u32::from(a).wrapping_add(i).into()),
        IpAddr::V6(a) => IpAddr::V6(u128::from(a).wrapping_add(i as u128).into()),
    }
}

impl GeneratorPort {
    /// Validates `params` (errors name the key under `setup.key_prefix`) and schedules every
    /// flow's first packet.
    pub fn new(setup: &GeneratorSetup<'_>, params: &GeneratorParams) -> Result<Self, ParamError> {
        let GeneratorSetup {
            name,
            index,
            own_mac,
            key_prefix,
            seed,
            end,
            tag_base,
            ref acks,
        } = *setup;
        let dst_mac = match &params.dst_mac {
            Some(s) => MacAddr::parse(s).ok_or_else(|| {
                invalid(
                    format!("{key_prefix}.dst_mac"),
                    s,
                    "a MAC address like 02:00:00:00:00:01",
                )
            })?,
            None => own_mac,
        };
        if params.flows.is_empty() {
            return Err(invalid(
                format!("{key_prefix}.flows"),
                "[]",
                "at least one flow group",
            ));
        }
        let mut groups = Vec::new();
        let mut flows = Vec::new();
        for (gi, g) in params.flows.iter().enumerate() {
            let key = |f: &str| format!("{key_prefix}.flows[{gi}].{f}");
            if g.count == 0 || g.count > 1_000_000 {
                return Err(invalid(key("count"), g.count, "1..=1000000 flows"));
            }
            if g.rate_bps == 0 || g.rate_bps > MAX_RATE_BPS {
                return Err(invalid(
                    key("rate_bps"),
                    g.rate_bps,
                    "a rate above 0 bits/s, at most 1e12",
                ));
            }
            let is_v6 = g.src.is_ipv6();
            if g.dst.is_ipv6() != is_v6 {
                return Err(invalid(
                    key("dst"),
                    g.dst,
                    "an address of the same family as `src`",
                ));
            }
            let min = if is_v6 { 62 } else { MIN_FRAME };
            if !(min..=MAX_FRAME).contains(&g.size) {
                return Err(invalid(
                    key("size"),
                    g.size,
                    format!("{min}..={MAX_FRAME} bytes"),
                ));
            }
            let size_max = g.size_max.unwrap_or(g.size);
            if !(g.size..=MAX_FRAME).contains(&size_max) {
                return Err(invalid(
                    key("size_max"),
                    size_max,
                    format!("size..={MAX_FRAME} bytes"),
                ));
            }
            let dscp = g.dscp.value().ok_or_else(|| {
                invalid(
                    key("dscp"),
                    format!("{:?}", g.dscp),
                    "0..=63 or a name such as ef, af11, cs1, be",
                )
            })?;
            let ms = |v: f64, f: &str| {
                // At least 1 µs, so an on + off period is never zero nanoseconds.
                if v.is_finite() && (0.001..=MAX_PERIOD_MS).contains(&v) {
                    Ok(Nanos::from_secs_f64(v * 1e-3))
                } else {
                    Err(invalid(
                        key(f),
                        v,
                        "0.001 <= ms <= 3600000 (1 µs to one hour)",
                    ))
                }
            };
            let on = ms(g.on_ms, "on_ms")?;
            let off = ms(g.off_ms, "off_ms")?;
            if !(g.start_s.is_finite() && (0.0..=MAX_TIME_S).contains(&g.start_s)) {
                return Err(invalid(key("start_s"), g.start_s, "0 <= seconds <= 1e6"));
            }
            let start = Nanos::from_secs_f64(g.start_s);
            let stop = match g.stop_s {
                Some(s) if !(s.is_finite() && s > g.start_s && s <= MAX_TIME_S) => {
                    return Err(invalid(key("stop_s"), s, "start_s < seconds <= 1e6"))
                }
                Some(s) => Nanos::from_secs_f64(s).min(end),
                None => end,
            };
            let tcp = match &g.tcp {
                None => None,
                Some(t) => Some(Self::check_tcp(t, g, &key, is_v6)?),
            };
            groups.push(Group {
                name: g.name.clone(),
                misbehaving: g.misbehaving,
                rate_bps: g.rate_bps,
                size: g.size,
                size_max,
                tos: (dscp << 2) | g.ecn.bits(),
                arrival: g.arrival,
                on,
                off,
                start,
                stop,
                dst_port: g.dst_port,
                tcp,
            });
            for i in 0..g.count {
                flows.push(Flow {
                    group: gi,
                    src: if g.same_src {
                        g.src
                    } else {
                        add_to_ip(g.src, i)
                    },
                    dst: g.dst,
                    src_port: 10_000u16.wrapping_add(i as u16),
                    ipv4_id: 0,
                    tcp: tcp.map(|t| TcpFlow {
                        sender: RenoSender::new(t.window, t.min_rto),
                        receiver: SegmentReceiver::new(t.window),
                        send_pending: false,
                        link_free: Nanos::ZERO,
                        timer_at: None,
                    }),
                });
            }
        }
        if flows.len() > u32::MAX as usize {
            return Err(invalid(
                format!("{key_prefix}.flows"),
                flows.len(),
                "fewer flows in total",
            ));
        }
        // Each responsive flow has at most a window of segments in flight, so at most that
        // many deliveries wait in the channel and that many ACKs in the heap, plus one
        // timer and one send.
        let windows: usize = flows
            .iter()
            .filter_map(|f| groups[f.group].tcp.map(|t| t.window as usize + 2))
            .sum();
        let tcp_groups = || groups.iter().filter_map(|g| g.tcp.map(|t| (t, g.stop)));
        let min_rtt = tcp_groups().map(|(t, _)| t.rtt).min().unwrap_or(Nanos::MAX);
        let tcp_stop = tcp_groups().map(|(_, s)| s).max().unwrap_or(Nanos::ZERO);
        let acks = match (windows, acks) {
            (0, _) => None,
            (_, Some(a)) => Some(Arc::clone(a)),
            (n, None) => Some(Arc::new(AckChannel::new(index, n))),
        };
        let mut port = GeneratorPort {
            name: name.to_owned(),
            index,
            src_mac: MacAddr([0x02, 0x7a, 0x6c, 0x67, 0x65, 0x6e]),
            dst_mac,
            groups,
            tag_base,
            flows,
            schedule: BinaryHeap::new(),
            events: BinaryHeap::with_capacity(windows),
            acks,
            min_rtt,
            tcp_stop,
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            counters: PortCounters::default(),
        };
        for fi in 0..port.flows.len() {
            let g = &port.groups[port.flows[fi].group];
            // Spread the flows' first packets over one mean gap so they do not all start in
            // the same nanosecond.
            let gap = Self::mean_gap(g.rate_bps, (g.size + g.size_max) / 2);
            let first = g.start + Nanos((port.rng.random::<f64>() * gap.as_nanos() as f64) as u64);
            if first >= g.stop {
                continue;
            }
            match &mut port.flows[fi].tcp {
                Some(t) => {
                    t.send_pending = true;
                    let flow = fi as u32;
                    port.events.push(Reverse((first, TcpEvent::Send { flow })));
                }
                None => port.schedule.push(Reverse((first, fi as u32))),
            }
        }
        Ok(port)
    }

    /// Validates a responsive group's `tcp` table (and what the group must be to have one).
    fn check_tcp(
        t: &TcpFlowParams,
        g: &FlowGroupParams,
        key: &dyn Fn(&str) -> String,
        is_v6: bool,
    ) -> Result<GroupTcp, ParamError> {
        if !(t.rtt_ms.is_finite() && (0.001..=MAX_PERIOD_MS).contains(&t.rtt_ms)) {
            return Err(invalid(
                key("tcp.rtt_ms"),
                t.rtt_ms,
                "0.001 <= ms <= 3600000",
            ));
        }
        if !(1..=MAX_WINDOW).contains(&t.window) {
            return Err(invalid(key("tcp.window"), t.window, "1..=65536 segments"));
        }
        if !(t.min_rto_ms.is_finite() && (1.0..=60_000.0).contains(&t.min_rto_ms)) {
            return Err(invalid(
                key("tcp.min_rto_ms"),
                t.min_rto_ms,
                "1 <= ms <= 60000",
            ));
        }
        if g.arrival != Arrival::Cbr {
            return Err(invalid(
                key("arrival"),
                format!("{:?}", g.arrival),
                "\"cbr\" (the default) for a group with `tcp`: its window and ACKs pace it",
            ));
        }
        if g.size_max.is_some_and(|m| m != g.size) {
            return Err(invalid(
                key("size_max"),
                g.size_max.unwrap_or(g.size),
                "absent for a group with `tcp`: its segments all have `size` bytes",
            ));
        }
        let headers = ETH_LEN + if is_v6 { IPV6_LEN } else { IPV4_LEN } + UDP_LEN;
        let min = (headers + SEGMENT_HEADER) as u32;
        if g.size < min {
            return Err(invalid(
                key("size"),
                g.size,
                format!("at least {min} bytes for a group with `tcp` (headers and the segment's flow and sequence)"),
            ));
        }
        Ok(GroupTcp {
            rtt: Nanos::from_secs_f64(t.rtt_ms * 1e-3),
            window: t.window,
            min_rto: Nanos::from_secs_f64(t.min_rto_ms * 1e-3),
            ecn: g.ecn.is_ecn_capable(),
        })
    }

    /// The channel the sink ports record this generator's responsive deliveries in (`None`
    /// without responsive groups).
    pub fn acks(&self) -> Option<Arc<AckChannel>> {
        self.acks.clone()
    }

    /// The responsive flows' states, in flow order.
    pub fn responsive(&self) -> Vec<ResponsiveState> {
        (self.flows.iter())
            .filter_map(|f| {
                f.tcp.as_ref().map(|t| ResponsiveState {
                    group: f.group,
                    cwnd: t.sender.cwnd(),
                    ssthresh: t.sender.ssthresh(),
                    timeouts: t.sender.timeouts,
                })
            })
            .collect()
    }

    /// Moves the waiting deliveries into the event heap as ACKs at their arrival times.
    fn take_deliveries(&mut self) {
        let Some(acks) = &self.acks else {
            return;
        };
        let (flows, groups, events) = (&self.flows, &self.groups, &mut self.events);
        acks.drain(|d| {
            let Some(f) = flows.get(d.flow as usize).filter(|f| f.tcp.is_some()) else {
                return;
            };
            let g = &groups[f.group];
            let rtt = g.tcp.map_or(Nanos::ZERO, |t| t.rtt);
            let at = d.at + rtt;
            if at < g.stop {
                let (flow, seq, ce) = (d.flow, d.seq, d.ce);
                events.push(Reverse((at, TcpEvent::Ack { flow, seq, ce })));
            }
        });
    }

    /// After flow `fi` changed at `now`: queues its next send (when the window allows and none
    /// is queued) and its timer (when it expires before the one queued).
    fn reschedule(&mut self, fi: usize, now: Nanos) {
        let stop = self.groups[self.flows[fi].group].stop;
        let Some(t) = &mut self.flows[fi].tcp else {
            return;
        };
        let flow = fi as u32;
        if !t.send_pending && t.sender.can_send() {
            let at = now.max(t.link_free);
            if at < stop {
                t.send_pending = true;
                self.events.push(Reverse((at, TcpEvent::Send { flow })));
            }
        }
        if let Some(d) = t.sender.rto_deadline() {
            if d < stop && t.timer_at.is_none_or(|e| e > d) {
                t.timer_at = Some(d);
                self.events.push(Reverse((d, TcpEvent::Timer { flow })));
            }
        }
    }

    /// Runs a responsive flow's event at `t`; returns the segment to send, if any.
    fn on_event(&mut self, t: Nanos, ev: TcpEvent) -> Option<(usize, u32)> {
        let (fi, segment) = match ev {
            TcpEvent::Ack { flow, seq, ce } => {
                let fi = flow as usize;
                let ecn = self.groups[self.flows[fi].group].tcp.is_some_and(|g| g.ecn);
                let tcp = self.flows[fi].tcp.as_mut()?;
                let ack = tcp.receiver.deliver(seq);
                tcp.sender.on_ack(t, ack, ce && ecn);
                (fi, None)
            }
            TcpEvent::Timer { flow } => {
                let fi = flow as usize;
                let tcp = self.flows[fi].tcp.as_mut()?;
                if tcp.timer_at == Some(t) {
                    tcp.timer_at = None;
                }
                tcp.sender.on_timer(t);
                (fi, None)
            }
            TcpEvent::Send { flow } => {
                let fi = flow as usize;
                let g = &self.groups[self.flows[fi].group];
                let gap = Self::mean_gap(g.rate_bps, g.size);
                let tcp = self.flows[fi].tcp.as_mut()?;
                tcp.send_pending = false;
                let seq = tcp.sender.next_segment(t).map(|(seq, _)| seq);
                if seq.is_some() {
                    tcp.link_free = t + gap;
                }
                (fi, seq)
            }
        };
        self.reschedule(fi, t);
        segment.map(|s| (fi, s))
    }

    /// The flow groups, in config order (`tag_base` + index + 1 is the tag written into each
    /// buffer).
    pub fn groups(&self) -> Vec<GroupInfo> {
        let mut out: Vec<GroupInfo> = self
            .groups
            .iter()
            .map(|g| GroupInfo {
                name: g.name.clone(),
                misbehaving: g.misbehaving,
                flows: 0,
            })
            .collect();
        for f in &self.flows {
            out[f.group].flows += 1;
        }
        out
    }

    fn mean_gap(rate_bps: u64, size: u32) -> Nanos {
        Nanos(((size as u128 * 8 * 1_000_000_000) / rate_bps as u128).max(1) as u64)
    }

    /// Next send time of a flow after one sent at `t` with `size` bytes.
    fn next_time(&mut self, group: usize, t: Nanos, size: u32) -> Nanos {
        let g = &self.groups[group];
        let gap = Self::mean_gap(g.rate_bps, size);
        match g.arrival {
            Arrival::Cbr => t + gap,
            Arrival::Poisson => {
                // Inverse-CDF draw of an exponential gap; 1 - u is in (0, 1].
                let u: f64 = self.rng.random();
                t + Nanos::from_secs_f64(-(1.0 - u).ln() * gap.as_secs_f64()).max(Nanos(1))
            }
            Arrival::OnOff => {
                let period = g.on + g.off;
                let next = t + gap;
                let phase = Nanos((next - g.start).as_nanos() % period.as_nanos());
                if phase < g.on {
                    next
                } else {
                    next + (period - phase)
                }
            }
        }
    }

    /// Writes one frame of `size` bytes for flow `fi` into `room`; a responsive flow's
    /// `segment` number goes at the start of the payload.
    fn write_frame(&mut self, fi: usize, size: usize, room: &mut [u8], segment: Option<u32>) {
        let flow = &mut self.flows[fi];
        let g = &self.groups[flow.group];
        room[0..6].copy_from_slice(&self.dst_mac.0);
        room[6..12].copy_from_slice(&self.src_mac.0);
        let l4 = match (flow.src, flow.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                room[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
                let ip = &mut room[ETH_LEN..ETH_LEN + IPV4_LEN];
                let total = (size - ETH_LEN) as u16;
                ip[0] = 0x45;
                ip[1] = g.tos;
                ip[2..4].copy_from_slice(&total.to_be_bytes());
                ip[4..6].copy_from_slice(&flow.ipv4_id.to_be_bytes());
                flow.ipv4_id = flow.ipv4_id.wrapping_add(1);
                ip[6..8].copy_from_slice(&0x4000u16.to_be_bytes()); // DF
                ip[8] = 64;
                ip[9] = 17;
                ip[10..12].copy_from_slice(&[0, 0]);
                ip[12..16].copy_from_slice(&s.octets());
                ip[16..20].copy_from_slice(&d.octets());
                let sum = checksum::checksum(ip);
                ip[10..12].copy_from_slice(&sum.to_be_bytes());
                ETH_LEN + IPV4_LEN
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                room[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
                let ip = &mut room[ETH_LEN..ETH_LEN + IPV6_LEN];
                let payload = (size - ETH_LEN - IPV6_LEN) as u16;
                ip[0] = 0x60 | (g.tos >> 4);
                ip[1] = g.tos << 4;
                ip[2..4].copy_from_slice(&[0, 0]);
                ip[4..6].copy_from_slice(&payload.to_be_bytes());
                ip[6] = 17;
                ip[7] = 64;
                ip[8..24].copy_from_slice(&s.octets());
                ip[24..40].copy_from_slice(&d.octets());
                ETH_LEN + IPV6_LEN
            }
            // Rejected at construction: both addresses have the same family.
            _ => ETH_LEN + IPV4_LEN,
        };
        let udp_len = (size - l4) as u16;
        let pseudo = match (flow.src, flow.dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => {
                checksum::pseudo_header_sum(&s.octets(), &d.octets(), 17, udp_len.into())
            }
            (IpAddr::V6(s), IpAddr::V6(d)) => {
                checksum::pseudo_header_sum(&s.octets(), &d.octets(), 17, udp_len.into())
            }
            _ => 0,
        };
        room[l4 + UDP_LEN..size].fill(0);
        let mut summed = UDP_LEN;
        if let Some(seq) = segment {
            let p = &mut room[l4 + UDP_LEN..l4 + UDP_LEN + SEGMENT_HEADER];
            p[0..4].copy_from_slice(&SEGMENT_MAGIC);
            p[4..8].copy_from_slice(&(fi as u32).to_be_bytes());
            p[8..12].copy_from_slice(&seq.to_be_bytes());
            summed += SEGMENT_HEADER;
        }
        let udp = &mut room[l4..l4 + summed];
        udp[0..2].copy_from_slice(&flow.src_port.to_be_bytes());
        udp[2..4].copy_from_slice(&g.dst_port.to_be_bytes());
        udp[4..6].copy_from_slice(&udp_len.to_be_bytes());
        udp[6..8].copy_from_slice(&[0, 0]);
        // A real checksum (RFC 768; mandatory for IPv6, RFC 8200 §8.1). The payload past the
        // segment header is zeros, which add nothing to a one's complement sum, so only the
        // header and the segment header are summed. The router's rewrites (TTL / hop limit,
        // DSCP, ECN, MACs) are outside the pseudo-header and the segment, so it stays valid
        // through the router.
        let sum = checksum::udp_checksum(pseudo, checksum::ones_complement_sum(udp));
        udp[6..8].copy_from_slice(&sum.to_be_bytes());
    }

    /// Writes flow `fi`'s frame sent at `t` into a pool buffer and adds it to `batch`; false
    /// when no buffer could take it (counted).
    fn emit(
        &mut self,
        t: Nanos,
        fi: usize,
        size: u32,
        segment: Option<u32>,
        pool: &mut BufPool,
        batch: &mut Batch,
    ) -> bool {
        let Some(mut buf) = pool.alloc() else {
            self.counters.rx_no_buffer += 1;
            return false;
        };
        if buf.capacity() < size as usize {
            pool.free(buf);
            self.counters.rx_too_long += 1;
            return false;
        }
        self.write_frame(fi, size as usize, buf.data_room_mut(), segment);
        // Cannot fail: the capacity was checked above.
        let _ = buf.set_len(size as usize);
        buf.rx_time = t;
        buf.in_port = self.index;
        buf.tag = self.tag_base + self.flows[fi].group as u32 + 1;
        self.counters.rx_packets += 1;
        self.counters.rx_bytes += size as u64;
        if let Err(b) = batch.push(buf) {
            pool.free(b);
        }
        true
    }
}

impl Port for GeneratorPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn recv(
        &mut self,
        now: Nanos,
        pool: &mut BufPool,
        batch: &mut Batch,
    ) -> Result<usize, PortError> {
        self.take_deliveries();
        let mut added = 0;
        while !batch.is_full() {
            let open = self.schedule.peek().map(|r| r.0 .0);
            let responsive = self.events.peek().map(|r| r.0);
            // The earlier of the two heaps; at the same time the open-loop flows first.
            let open_first = match (open, responsive) {
                (Some(o), Some((r, _))) => o <= r,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break,
            };
            if !open_first {
                let Some(Reverse((t, ev))) = self.events.peek().copied() else {
                    break;
                };
                if t > now {
                    break;
                }
                self.events.pop();
                if let Some((fi, seq)) = self.on_event(t, ev) {
                    let size = self.groups[self.flows[fi].group].size;
                    if self.emit(t, fi, size, Some(seq), pool, batch) {
                        added += 1;
                    }
                }
                continue;
            }
            let Some(&Reverse((t, fi))) = self.schedule.peek() else {
                break;
            };
            if t > now {
                break;
            }
            self.schedule.pop();
            let fi = fi as usize;
            let group = self.flows[fi].group;
            let (size, size_max, stop) = {
                let g = &self.groups[group];
                (g.size, g.size_max, g.stop)
            };
            let size = if size_max > size {
                self.rng.random_range(size..=size_max)
            } else {
                size
            };
            let next = self.next_time(group, t, size);
            if next < stop {
                self.schedule.push(Reverse((next, fi as u32)));
            }
            if self.emit(t, fi, size, None, pool, batch) {
                added += 1;
            }
        }
        Ok(added)
    }

    /// The generator is also a sink: what is routed to it is counted and discarded.
    fn send(
        &mut self,
        _now: Nanos,
        batch: &mut Batch,
        pool: &mut BufPool,
    ) -> Result<usize, PortError> {
        Ok(self.counters.sink(batch, pool))
    }

    fn readiness(&self) -> Readiness {
        let open = self.schedule.peek().map(|r| r.0 .0);
        let responsive = self.events.peek().map(|r| r.0 .0);
        // A delivery waiting in the channel becomes an ACK no sooner than `min_rtt` after it.
        let waiting = (self.acks.as_ref())
            .and_then(|a| a.earliest())
            .map(|d| d + self.min_rtt)
            .filter(|&at| at < self.tcp_stop);
        match [open, responsive, waiting].into_iter().flatten().min() {
            Some(t) => Readiness::NextPacketAt(t),
            None => Readiness::Exhausted,
        }
    }

    fn counters(&self) -> PortCounters {
        self.counters
    }
}

/// The generator's halves: its flows (receive) and the sink it is for what is routed to it.
impl zl_port::SplitPort for GeneratorPort {
    fn split(self: Box<Self>) -> zl_port::Halves {
        zl_port::split_sink_port(*self)
    }
}
