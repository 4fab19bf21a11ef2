//! Scenario files (`configs/netsim/*.toml`): one base run, a sweep over any of its keys, and
//! what to plot. Unknown keys are rejected, and every invalid value is reported with its key.
//!
//! ```toml
//! name = "zlred-fairness"
//! title = "Reno vs Vegas under SRED and ZL-RED"
//! [run]                       # one simulation (RunConfig)
//! seed = 1
//! duration_s = 500.0
//! ...
//! [[sweep]]                   # cartesian product over axes; `keys` moves several keys together
//! key = "bottleneck.buffer_packets"
//! values = [1000, 5000, 10000]
//! [plot]
//! x = "bottleneck.buffer_packets"
//! y = "goodput_mean_kbps"
//! ```

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use zl_aqm::{AqmParams, AqmPolicy, BuildContext};
use zl_core::Nanos;
use zl_zombie::{ZombieList, ZombieParams};

use crate::bottleneck::{Bottleneck, FifoQueue};
use crate::diffserv::QosBottleneck;
use crate::discipline::DisciplineQueue;
use crate::probe::{EwmaProbe, ZombieProbe};
use crate::sim::{FlowSpec, Probe, SimError, SimSpec, SourceSpec};
use crate::tcp::{TcpParams, WebParams};
use crate::udp::{CbrParams, TfrcParams};

fn invalid(key: impl Into<String>, reason: impl Into<String>) -> SimError {
    SimError::Invalid {
        key: key.into(),
        reason: reason.into(),
    }
}

/// How the bottleneck buffer is sized (docs/algorithms/buffer-sizing.md).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum BufferRule {
    /// `buffer_packets` as given.
    #[default]
    Fixed,
    /// Bandwidth-delay product `C * RTT`.
    Bdp,
    /// `C * RTT / sqrt(N)`, N = the number of long-lived TCP flows configured.
    SqrtN,
    /// `C * RTT / sqrt(1/P(t))` with 1/P(t) the Zombie List's live flow estimate, re-evaluated at
    /// every sample tick, never below `buffer_floor_packets` (docs/algorithms/buffer-sizing.md
    /// "decided").
    LiveSqrtN,
}

/// The bottleneck router and link.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BottleneckConfig {
    pub rate_mbps: f64,
    /// One-way propagation delay of the bottleneck link.
    pub delay_ms: f64,
    #[serde(default)]
    pub buffer: BufferRule,
    /// Capacity for `buffer = "fixed"`; the ceiling for the other rules when set.
    #[serde(default)]
    pub buffer_packets: Option<u32>,
    /// Capacity in bytes (optional second bound).
    #[serde(default)]
    pub buffer_bytes: Option<u64>,
    /// RTT the sizing rules use, ms; default: the mean propagation RTT of the flows.
    #[serde(default)]
    pub buffer_rtt_ms: Option<f64>,
    /// N for `buffer = "sqrt-n"`; default: the long-lived TCP flows (all flows if none).
    #[serde(default)]
    pub buffer_n: Option<u32>,
    /// Lowest capacity a rule may give, packets.
    #[serde(default = "default_floor")]
    pub buffer_floor_packets: u32,
    /// The queue's policy (zl-aqm): an admission policy on a single FIFO, or a discipline that
    /// holds its own queues (`codel`, `fq-codel`, `dualpi2`, `zl-red` with `isolation`).
    #[serde(default)]
    pub aqm: AqmParams,
    /// The router's Diffserv pipeline (`zl_qos::QosParams`, as in the router's config)
    /// instead of a single FIFO; `aqm` and the buffer keys are then unused.
    #[serde(default)]
    pub qos: Option<zl_qos::QosParams>,
}

fn default_floor() -> u32 {
    2
}

/// What the flows of a group send.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SourceKind {
    #[default]
    Tcp,
    Cbr,
    Tfrc,
}

/// `count` flows with the same settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupConfig {
    pub name: String,
    pub count: u32,
    #[serde(default)]
    pub kind: SourceKind,
    #[serde(default)]
    pub tcp: TcpParams,
    /// On/off transfers instead of one endless transfer (TCP only).
    #[serde(default)]
    pub web: Option<WebParams>,
    #[serde(default)]
    pub cbr: Option<CbrParams>,
    #[serde(default)]
    pub tfrc: Option<TfrcParams>,
    /// Sender -> router delay, ms; with `access_delay_max_ms` the group's flows are spread
    /// evenly from this value to that one.
    pub access_delay_ms: f64,
    #[serde(default)]
    pub access_delay_max_ms: Option<f64>,
    /// Access link rate, Mb/s (0 = unlimited).
    #[serde(default)]
    pub access_rate_mbps: f64,
    #[serde(default)]
    pub egress_delay_ms: f64,
    /// Start times are drawn uniformly in `[start_s, start_s + start_spread_s]`.
    #[serde(default)]
    pub start_s: f64,
    #[serde(default = "default_spread")]
    pub start_spread_s: f64,
    /// Diffserv code point of the group's packets (0..=63), read by a `qos` bottleneck's
    /// classifier; none = unclassifiable (the default class).
    #[serde(default)]
    pub dscp: Option<u8>,
    /// The host the group's flows send from (what per-host isolation keys on); with `hosts`,
    /// the first of `hosts` consecutive hosts the flows take in turn. None: each flow a host
    /// of its own, numbered by its index among all flows (explicit numbers share that space).
    #[serde(default)]
    pub host: Option<u16>,
    /// How many hosts, from `host` on, the group's flows are spread over (round robin).
    #[serde(default = "one_host")]
    pub hosts: u16,
    /// The host the group's flows send to. Default 0, the one receiver of the dumbbell.
    #[serde(default)]
    pub dst_host: u16,
}

fn one_host() -> u16 {
    1
}

fn default_spread() -> f64 {
    1.0
}

/// A passive observer traced over time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
pub enum ProbeConfig {
    /// A Zombie List beside the queue; traces 1/P(t) (figure 2 of the ZL-RED paper,
    /// docs/algorithms/zombie-list.md).
    Zombie {
        #[serde(default)]
        zombie: ZombieParams,
    },
    /// RED's average queue with weight `w_q` (the quantity docs/algorithms/nonlinear-red.md plots).
    Ewma { w_q: f64 },
}

/// One simulation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunConfig {
    #[serde(default = "default_seed")]
    pub seed: u64,
    pub duration_s: f64,
    #[serde(default)]
    pub warmup_s: f64,
    #[serde(default)]
    pub sample_interval_s: Option<f64>,
    pub bottleneck: BottleneckConfig,
    pub groups: Vec<GroupConfig>,
    #[serde(default)]
    pub probe: Option<ProbeConfig>,
}

fn default_seed() -> u64 {
    1
}

fn positive(key: &str, v: f64) -> Result<f64, SimError> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(invalid(key, format!("{v} must be a finite number > 0")))
    }
}

/// The longest time any setting may name, seconds (11.6 days): sums of a few such times stay
/// far inside `Nanos`' u64 range (584 years), so no arithmetic on them can overflow.
const MAX_SECONDS: f64 = 1e6;

/// A time in seconds: finite, `>= 0` (`> 0` when `strict`), at most [`MAX_SECONDS`].
fn seconds(key: &str, v: f64, strict: bool) -> Result<f64, SimError> {
    if v.is_finite() && (v > 0.0 || (!strict && v == 0.0)) && v <= MAX_SECONDS {
        Ok(v)
    } else {
        let low = if strict { "> 0" } else { ">= 0" };
        Err(invalid(
            key,
            format!("{v} must be a number of seconds {low} and <= {MAX_SECONDS}"),
        ))
    }
}

/// A time in milliseconds, as [`seconds`].
fn millis(key: &str, v: f64, strict: bool) -> Result<f64, SimError> {
    seconds(key, v * 1e-3, strict).map(|_| v)
}

fn non_negative(key: &str, v: f64) -> Result<f64, SimError> {
    if v.is_finite() && v >= 0.0 {
        Ok(v)
    } else {
        Err(invalid(key, format!("{v} must be a finite number >= 0")))
    }
}

fn ms(v: f64) -> Nanos {
    Nanos::from_secs_f64(v * 1e-3)
}

/// The largest buffer a policy that holds its own queues may have, packets: its arena is
/// reserved when the run is built (4 Mi packets, as a `zl-qos` class's ring).
const MAX_ARENA_PACKETS: u32 = 1 << 22;

/// A run ready to start: the spec, the bottleneck and the probe.
pub struct BuiltRun {
    pub spec: SimSpec,
    pub bottleneck: Box<dyn Bottleneck>,
    pub probe: Option<Box<dyn Probe>>,
    /// Bottleneck capacity in packets at the start.
    pub capacity_packets: u32,
}

impl RunConfig {
    /// Checks every value and builds the run.
    pub fn build(&self) -> Result<BuiltRun, SimError> {
        let duration = seconds("duration_s", self.duration_s, true)?;
        let warmup = seconds("warmup_s", self.warmup_s, false)?;
        if warmup >= duration {
            return Err(invalid("warmup_s", "must be shorter than duration_s"));
        }
        let b = &self.bottleneck;
        let rate = positive("bottleneck.rate_mbps", b.rate_mbps)? * 1e6;
        if rate < 1.0 {
            return Err(invalid(
                "bottleneck.rate_mbps",
                format!("{} must be at least 1e-6 (1 bit/s)", b.rate_mbps),
            ));
        }
        let delay = millis("bottleneck.delay_ms", b.delay_ms, false)?;
        if self.groups.is_empty() {
            return Err(invalid("groups", "at least one group is needed"));
        }
        let mut rng = <crate::SimRng as rand::SeedableRng>::seed_from_u64(self.seed ^ 0x5eed);
        let mut flows = Vec::new();
        let mut rtt_sum = 0.0;
        let mut long_lived = 0u32;
        let mut pkt_size = None;
        for (gi, g) in self.groups.iter().enumerate() {
            let key = |k: &str| format!("groups[{gi}].{k}");
            let d0 = millis(&key("access_delay_ms"), g.access_delay_ms, false)?;
            let d1 = match g.access_delay_max_ms {
                Some(v) => millis(&key("access_delay_max_ms"), v, false)?,
                None => d0,
            };
            let access_rate = non_negative(&key("access_rate_mbps"), g.access_rate_mbps)? * 1e6;
            let egress = millis(&key("egress_delay_ms"), g.egress_delay_ms, false)?;
            let start = seconds(&key("start_s"), g.start_s, false)?;
            if let Some(d) = g.dscp.filter(|d| *d > 63) {
                return Err(invalid(
                    key("dscp"),
                    format!("{d} is not a code point 0..=63"),
                ));
            }
            let spread = seconds(&key("start_spread_s"), g.start_spread_s, false)?;
            let host = |i: u32| -> Result<Option<u16>, SimError> {
                match g.host {
                    None if g.hosts == 1 => Ok(None),
                    None => Err(invalid(
                        key("hosts"),
                        "needs `host`, the first host's number",
                    )),
                    Some(h) => {
                        if g.hosts == 0 || u32::from(h) + u32::from(g.hosts) > 1 << 16 {
                            return Err(invalid(
                                key("hosts"),
                                format!(
                                    "{} hosts from {h} must be 1..=65536 numbers in 0..=65535",
                                    g.hosts
                                ),
                            ));
                        }
                        Ok(Some(h + (i % u32::from(g.hosts)) as u16))
                    }
                }
            };
            host(0)?;
            let source =
                match g.kind {
                    SourceKind::Tcp => {
                        pkt_size.get_or_insert(g.tcp.packet_size);
                        if g.web.is_none() {
                            long_lived += g.count;
                        }
                        SourceSpec::Tcp {
                            params: g.tcp,
                            web: g.web,
                        }
                    }
                    SourceKind::Cbr => SourceSpec::Cbr(g.cbr.ok_or_else(|| {
                        invalid(key("cbr"), "kind = \"cbr\" needs a [cbr] table")
                    })?),
                    SourceKind::Tfrc => SourceSpec::Tfrc(g.tfrc.ok_or_else(|| {
                        invalid(key("tfrc"), "kind = \"tfrc\" needs a [tfrc] table")
                    })?),
                };
            let probe_flow = FlowSpec {
                source,
                access_delay: Nanos::ZERO,
                access_rate_bps: access_rate,
                egress_delay: Nanos::ZERO,
                start: Nanos::ZERO,
                dscp: g.dscp,
                group: gi as u16,
                src_host: None,
                dst_host: g.dst_host,
            };
            crate::sim::check_flow(0, &probe_flow).map_err(
                |SimError::Invalid { key: k, reason }| {
                    invalid(k.replace("flows[0]", &format!("groups[{gi}]")), reason)
                },
            )?;
            for i in 0..g.count {
                let frac = if g.count > 1 {
                    i as f64 / (g.count - 1) as f64
                } else {
                    0.0
                };
                let access = d0 + (d1 - d0) * frac;
                let jitter: f64 = rand::Rng::random::<f64>(&mut rng) * spread;
                rtt_sum += 2.0 * (access + delay + egress);
                flows.push(FlowSpec {
                    source,
                    access_delay: ms(access),
                    access_rate_bps: access_rate,
                    egress_delay: ms(egress),
                    start: Nanos::from_secs_f64(start + jitter),
                    dscp: g.dscp,
                    group: gi as u16,
                    src_host: host(i)?,
                    dst_host: g.dst_host,
                });
            }
        }
        if flows.is_empty() {
            return Err(invalid(
                "groups",
                "the groups hold no flow (every count is 0)",
            ));
        }
        let n_flows = flows.len() as f64;
        let n_sqrt = match b.buffer_n {
            Some(0) => return Err(invalid("bottleneck.buffer_n", "must be >= 1")),
            Some(n) => n,
            None if long_lived > 0 => long_lived,
            None => flows.len() as u32,
        };
        let rtt_ms = match b.buffer_rtt_ms {
            Some(v) => millis("bottleneck.buffer_rtt_ms", v, true)?,
            None => rtt_sum / n_flows,
        };
        let pkt = pkt_size.unwrap_or(1000) as f64;
        let bdp = rate * rtt_ms * 1e-3 / (8.0 * pkt);
        let floor = b.buffer_floor_packets.max(1);
        let capacity = match b.buffer {
            BufferRule::Fixed => b.buffer_packets.ok_or_else(|| {
                invalid(
                    "bottleneck.buffer_packets",
                    "needed when buffer = \"fixed\"",
                )
            })?,
            BufferRule::Bdp => (bdp.round() as u32).max(floor),
            BufferRule::SqrtN | BufferRule::LiveSqrtN => {
                ((bdp / (n_sqrt as f64).sqrt()).round() as u32).max(floor)
            }
        };
        let capacity = match (b.buffer, b.buffer_packets) {
            (BufferRule::Fixed, _) | (_, None) => capacity,
            (_, Some(ceiling)) => capacity.min(ceiling),
        };
        if capacity == 0 {
            return Err(invalid("bottleneck.buffer_packets", "must be >= 1"));
        }
        let cap_bytes = b.buffer_bytes.unwrap_or(u64::MAX);
        let sample_interval = match self.sample_interval_s {
            Some(s) => Some(Nanos::from_secs_f64(seconds("sample_interval_s", s, true)?)),
            None if b.buffer == BufferRule::LiveSqrtN => Some(Nanos::from_millis(100)),
            None => None,
        };
        let spec = SimSpec {
            seed: self.seed,
            duration: Nanos::from_secs_f64(duration),
            warmup: Nanos::from_secs_f64(warmup),
            bottleneck_rate_bps: rate,
            bottleneck_delay: ms(delay),
            sample_interval,
            flows,
        };
        let ctx = BuildContext::new(rate as u64, capacity);
        let qos_live = b.qos.as_ref().is_some_and(|q| {
            q.classes
                .iter()
                .any(|c| matches!(c.buffer, Some(zl_qos::BufferRule::SqrtNLive { .. })))
        });
        let live = b.buffer == BufferRule::LiveSqrtN || qos_live;
        if live && matches!(self.probe, Some(ProbeConfig::Ewma { .. })) {
            return Err(invalid(
                "probe",
                "a live sqrt(N) buffer needs the zombie probe (or none)",
            ));
        }
        // SRED and ZL-RED keep a Zombie List; the probe and the live sqrt(N) rule read that
        // same list rather than a second one, so 1/P(t) is the policy's own estimate.
        let policy_zombie = match &b.aqm {
            AqmParams::Sred(p) if b.qos.is_none() => Some(p.zombie),
            AqmParams::ZlRed(p) if b.qos.is_none() => Some(p.zombie),
            _ => None,
        };
        let zombie_params = match (&self.probe, policy_zombie) {
            (_, Some(p)) => Some(p),
            (Some(ProbeConfig::Zombie { zombie }), None) => Some(*zombie),
            _ if live => Some(ZombieParams::default()),
            _ => None,
        };
        let list = match zombie_params {
            Some(p) => {
                let cfg = p
                    .validate()
                    .map_err(|e| invalid("probe.zombie", e.to_string()))?;
                Some(Arc::new(ZombieList::new(cfg)))
            }
            None => None,
        };
        let wants_zombie = matches!(self.probe, Some(ProbeConfig::Zombie { .. })) || live;
        let probe: Option<Box<dyn Probe>> = match (&self.probe, &list) {
            (Some(ProbeConfig::Ewma { w_q }), _) => {
                if !(w_q.is_finite() && *w_q > 0.0 && *w_q <= 1.0) {
                    return Err(invalid("probe.w_q", "must be in (0, 1]"));
                }
                Some(Box::new(EwmaProbe::new(*w_q)))
            }
            (_, Some(l)) if wants_zombie && policy_zombie.is_some() => {
                Some(Box::new(ZombieProbe::passive(l.clone())))
            }
            (_, Some(l)) if wants_zombie => Some(Box::new(ZombieProbe::new(l.clone()))),
            _ => None,
        };
        let ctx = match (&list, policy_zombie) {
            (Some(l), Some(_)) => ctx.with_zombie_list(l.clone()),
            _ => ctx,
        };
        let bottleneck: Box<dyn Bottleneck> = if let Some(q) = &b.qos {
            let feed = if qos_live { list.clone() } else { None };
            Box::new(QosBottleneck::build(q, rate, feed, pkt as u32)?)
        } else {
            let ceiling = b.buffer_packets.unwrap_or(u32::MAX);
            let resize = match (b.buffer, list) {
                (BufferRule::LiveSqrtN, Some(list)) => {
                    let resize = move |_now: Nanos| -> u32 {
                        let n = list.estimated_flows();
                        let n = if n.is_finite() && n >= 1.0 { n } else { 1.0 };
                        ((bdp / n.sqrt()).round() as u32).clamp(floor, ceiling)
                    };
                    Some(Box::new(resize) as Box<dyn FnMut(Nanos) -> u32 + Send>)
                }
                _ => None,
            };
            let aqm_err = |e: zl_aqm::AqmConfigError| {
                invalid(format!("bottleneck.aqm.{}", e.param), e.to_string())
            };
            if b.aqm.holds_queues() {
                // The discipline reserves its arena now: room for the most the live rule can
                // ask for (BDP / sqrt(1), under the ceiling).
                let most = match resize {
                    Some(_) => (bdp.round().min(f64::from(ceiling)) as u32).max(floor),
                    None => capacity,
                };
                let ring = most.max(capacity);
                if ring > MAX_ARENA_PACKETS {
                    return Err(invalid(
                        "bottleneck.buffer_packets",
                        format!(
                            "{ring} packets: a policy that holds its own queues reserves them \
                             up front, at most {MAX_ARENA_PACKETS}"
                        ),
                    ));
                }
                let disc = b
                    .aqm
                    .build_discipline::<u32>(&ctx.with_buffer(ring, cap_bytes))
                    .map_err(aqm_err)?
                    .ok_or_else(|| invalid("bottleneck.aqm", "holds no queues"))?;
                let q = DisciplineQueue::new(disc, capacity, cap_bytes);
                match resize {
                    Some(f) => Box::new(q.with_resizer(f)),
                    None => Box::new(q),
                }
            } else {
                let policy: AqmPolicy = b.aqm.build(&ctx).map_err(aqm_err)?;
                let q = FifoQueue::new(policy, capacity, cap_bytes);
                match resize {
                    Some(f) => Box::new(q.with_resizer(f)),
                    None => Box::new(q),
                }
            }
        };
        Ok(BuiltRun {
            spec,
            bottleneck,
            probe,
            capacity_packets: capacity,
        })
    }
}
