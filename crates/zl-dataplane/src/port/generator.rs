//! The built-in traffic generator: a virtual-time receive port that synthesises UDP flows.
//!
//! Each flow group of the config is `count` flows with the same per-flow rate, frame size
//! distribution, DSCP, ECN capability and arrival process (CBR, Poisson, or on-off with CBR
//! inside the on periods). Flow `i` of a group uses source address `src + i`, so flow keys
//! (src, src-dst, 5-tuple) tell the flows apart. A group marked `misbehaving` is labelled as
//! such in the reports; what makes it misbehave is its configuration (typically a rate well
//! above its fair share, sent whatever the drops, as an unresponsive UDP source).
//!
//! All randomness comes from one seeded generator, so a seed reproduces the run exactly.
//! Frames are written straight into pool buffers: no allocation per packet.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::IpAddr;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::{Deserialize, Serialize};
use zl_core::{Ecn, Nanos};
use zl_port::{Batch, BufPool, Port, PortCounters, PortError, Readiness};
use zl_qos::DscpSpec;
use zl_wire::{checksum, MacAddr};

use crate::config::{invalid, ConfigError};

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
}

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
}

#[derive(Clone, Debug)]
struct Flow {
    group: usize,
    src: IpAddr,
    dst: IpAddr,
    src_port: u16,
    ipv4_id: u16,
}

/// What a group's flows have offered so far (for reports).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupInfo {
    pub name: String,
    pub misbehaving: bool,
    pub flows: u32,
}

/// Where a generator sits and what it derives from the run.
#[derive(Clone, Copy, Debug)]
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
    /// (next send time, flow index), earliest first.
    schedule: BinaryHeap<Reverse<(Nanos, u32)>>,
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
    pub fn new(setup: &GeneratorSetup<'_>, params: &GeneratorParams) -> Result<Self, ConfigError> {
        let GeneratorSetup {
            name,
            index,
            own_mac,
            key_prefix,
            seed,
            end,
            tag_base,
        } = *setup;
        let dst_mac = match &params.dst_mac {
            Some(s) => crate::config::parse_mac(s).ok_or_else(|| {
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
            });
            for i in 0..g.count {
                flows.push(Flow {
                    group: gi,
                    src: add_to_ip(g.src, i),
                    dst: g.dst,
                    src_port: 10_000u16.wrapping_add(i as u16),
                    ipv4_id: 0,
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
        let mut port = GeneratorPort {
            name: name.to_owned(),
            index,
            src_mac: MacAddr([0x02, 0x7a, 0x6c, 0x67, 0x65, 0x6e]),
            dst_mac,
            groups,
            tag_base,
            flows,
            schedule: BinaryHeap::new(),
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            counters: PortCounters::default(),
        };
        for fi in 0..port.flows.len() {
            let g = &port.groups[port.flows[fi].group];
            // Spread the flows' first packets over one mean gap so they do not all start in
            // the same nanosecond.
            let gap = Self::mean_gap(g.rate_bps, (g.size + g.size_max) / 2);
            let first = g.start + Nanos((port.rng.random::<f64>() * gap.as_nanos() as f64) as u64);
            if first < port.groups[port.flows[fi].group].stop {
                port.schedule.push(Reverse((first, fi as u32)));
            }
        }
        Ok(port)
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

    /// Writes one frame of `size` bytes for flow `fi` into `room`.
    fn write_frame(&mut self, fi: usize, size: usize, room: &mut [u8]) {
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
        let udp = &mut room[l4..l4 + UDP_LEN];
        udp[0..2].copy_from_slice(&flow.src_port.to_be_bytes());
        udp[2..4].copy_from_slice(&g.dst_port.to_be_bytes());
        udp[4..6].copy_from_slice(&udp_len.to_be_bytes());
        udp[6..8].copy_from_slice(&[0, 0]);
        // A real checksum (RFC 768; mandatory for IPv6, RFC 8200 §8.1). The payload is zeros,
        // which add nothing to a one's complement sum, so only the header is summed. The
        // router's rewrites (TTL / hop limit, DSCP, ECN, MACs) are outside the pseudo-header
        // and the segment, so it stays valid through the router.
        let sum = checksum::udp_checksum(pseudo, checksum::ones_complement_sum(udp));
        udp[6..8].copy_from_slice(&sum.to_be_bytes());
        room[l4 + UDP_LEN..size].fill(0);
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
        let mut added = 0;
        while !batch.is_full() {
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
            let Some(mut buf) = pool.alloc() else {
                self.counters.rx_no_buffer += 1;
                continue;
            };
            if buf.capacity() < size as usize {
                pool.free(buf);
                self.counters.rx_too_long += 1;
                continue;
            }
            self.write_frame(fi, size as usize, buf.data_room_mut());
            // Cannot fail: the capacity was checked above.
            let _ = buf.set_len(size as usize);
            buf.rx_time = t;
            buf.in_port = self.index;
            buf.tag = self.tag_base + group as u32 + 1;
            self.counters.rx_packets += 1;
            self.counters.rx_bytes += size as u64;
            if let Err(b) = batch.push(buf) {
                pool.free(b);
            }
            added += 1;
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
        match self.schedule.peek() {
            Some(Reverse((t, _))) => Readiness::NextPacketAt(*t),
            None => Readiness::Exhausted,
        }
    }

    fn counters(&self) -> PortCounters {
        self.counters
    }
}
