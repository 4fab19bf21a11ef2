//! The router's configuration: one TOML file (serde) describing the run, the parser, the
//! ports, forwarding (router with static routes, or bridge), the QoS of each egress port
//! (classes, meters, AQM per class and color, scheduler, shaper, buffer rule; see
//! `zl_qos::QosParams`) and the metrics endpoint.
//!
//! Loading goes in two steps: [`RouterConfig::from_toml`] (syntax and types: unknown keys are
//! rejected, the error names the key) and [`RouterConfig::validate`] (values and cross
//! references: the error names the key, the value and what was expected).

use std::collections::HashSet;
use std::net::ToSocketAddrs;
use std::path::Path;

use serde::{Deserialize, Serialize};
use zl_qos::{ClassParams, QosParams};
use zl_wire::{MacAddr, ParseConfig};

pub use crate::cpus::MAX_CPU;
pub(crate) use crate::error::invalid;
pub use crate::error::ConfigError;
pub use crate::forward::Forwarding;
use crate::icmp::{IcmpParams, PortL3};
use crate::port::{GeneratorParams, PcapParams};
use crate::priority::PriorityParams;
use crate::route::{NextHop, Prefix, RouteTable};

/// Parses `aa:bb:cc:dd:ee:ff` (`MacAddr::parse`).
pub fn parse_mac(s: &str) -> Option<MacAddr> {
    MacAddr::parse(s)
}

/// Most packet buffers a pool may hold: 2 GiB of 2 KiB buffers.
pub const MAX_POOL_BUFFERS: u32 = 1 << 20;

/// `[run]`: how long and how the loop runs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunParams {
    /// Virtual-time length of the run in seconds (generator and pcap ports stop offering
    /// traffic at this time). Live ports run until stopped.
    #[serde(default = "default_duration")]
    pub duration_s: f64,
    /// After the sources stop, how long (virtual seconds) queues may drain before what is
    /// left is counted as `shutdown` drops.
    #[serde(default = "default_drain")]
    pub drain_s: f64,
    /// Seed of every random decision (generator, AQM): a seed reproduces the run.
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Packets received per port per poll (the per-poll work budget). It is checked between
    /// receive bursts of up to `BATCH_CAPACITY` (32), so a poll takes at least one burst and
    /// at most `work_budget + 31` packets from a port.
    #[serde(default = "default_budget")]
    pub work_budget: u32,
    /// Packet buffers in the pool; default: the rings of every egress port's queues plus four
    /// bursts per port, at most [`MAX_POOL_BUFFERS`]. With `rx_workers`: each receive
    /// worker's pool (default: the same plus the receive -> transmit rings).
    #[serde(default)]
    pub pool_buffers: Option<u32>,
    /// Receive workers of the threaded router (`crate::mt`): 0 (the default) runs the
    /// single-thread loop; N >= 1 deals the ports' receive halves (one per receive queue:
    /// [`PortParams::receive_queues`]) to N threads (half s to worker s mod N) feeding the
    /// transmit threads (`tx_workers`), at most one worker per receive queue. The run is then driven by the monotonic clock, generator and pcap ports included.
    #[serde(default)]
    pub rx_workers: u32,
    /// Transmit workers of the threaded router (1 ..= the number of ports; default 1): egress
    /// port j is scheduled and sent by worker j mod M, which owns its QoS engine. Needs
    /// `rx_workers >= 1` when above 1.
    #[serde(default = "default_tx_workers")]
    pub tx_workers: u32,
    /// CPUs the threaded router's workers are pinned to, one worker per CPU in this order:
    /// receive workers 0..N, then transmit workers 0..M (transmit worker 0 is the main
    /// thread), cycling over the list when it is shorter. Absent (the default): every worker
    /// may run on every CPU the process was allowed when it started (so a DPDK EAL, which pins
    /// its main thread to the first core of `-l`, does not confine the workers to that core).
    /// Needs `rx_workers >= 1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<Vec<u32>>,
}

/// Most receive workers a threaded run may have.
pub const MAX_RX_WORKERS: u32 = 64;

fn default_duration() -> f64 {
    10.0
}
fn default_drain() -> f64 {
    1.0
}
fn default_seed() -> u64 {
    1
}
fn default_budget() -> u32 {
    256
}
fn default_tx_workers() -> u32 {
    1
}

impl Default for RunParams {
    fn default() -> Self {
        RunParams {
            duration_s: default_duration(),
            drain_s: default_drain(),
            seed: default_seed(),
            work_budget: default_budget(),
            pool_buffers: None,
            rx_workers: 0,
            tx_workers: default_tx_workers(),
            cpus: None,
        }
    }
}

/// What a port is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PortKind {
    /// The built-in traffic generator (`[ports.generator]`); also a sink for what it is sent.
    Generator,
    /// pcap files (`[ports.pcap]`): replay one, write one, or both.
    Pcap,
    /// Counts and discards what it is sent; receives nothing.
    Sink,
    /// An AF_XDP socket on a Linux interface (`[ports.af_xdp]`, `zl_afxdp::AfXdpConfig`: at
    /// least `ifname`). Opened by the `zlrouter` binary (needs root or CAP_NET_ADMIN and
    /// CAP_BPF); the data plane itself does not depend on the backend.
    AfXdp,
    /// A DPDK ethdev (`[ports.dpdk]`, `zl_dpdk::DpdkPortConfig`: at least `device`, e.g.
    /// `net_pcap0,rx_pcap=in.pcap,tx_pcap=out.pcap`), with the EAL set up from the top-level
    /// `[dpdk]` table. Opened by the `zlrouter` binary built with `--features dpdk`.
    Dpdk,
    /// Supplied by the program embedding the data plane (a DPDK port, the in-memory port of a
    /// benchmark) through [`crate::build_with_ports`].
    External,
}

/// `[[ports]]`: one port.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortParams {
    pub name: String,
    pub kind: PortKind,
    /// The port's own MAC (the source MAC of routed frames leaving it, and of its ICMP
    /// errors). Absent on an `af-xdp` port: its interface's own MAC (read when it opens),
    /// as on a Linux router; required on every other kind.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub mac: String,
    #[serde(default)]
    pub generator: Option<GeneratorParams>,
    #[serde(default)]
    pub pcap: Option<PcapParams>,
    /// The AF_XDP backend's own table, passed to it unread (it rejects unknown keys).
    #[serde(default)]
    pub af_xdp: Option<toml::Table>,
    /// The DPDK backend's own table, passed to it unread (it rejects unknown keys).
    #[serde(default)]
    pub dpdk: Option<toml::Table>,
    /// QoS of this port's egress; the top-level `[qos]` when absent.
    #[serde(default)]
    pub qos: Option<QosParams>,
    /// The router's addresses on this port's link, `address/length`, IPv4 and / or IPv6 (one
    /// string or a list): the source of the ICMP errors sent out of this port
    /// (`crate::icmp`). Absent: the interface's own addresses where the port has an
    /// interface (AF_XDP; read when it opens). With `routing.source = "kernel"` the
    /// interface's addresses as the kernel has them now (followed through netlink) come
    /// first. Without an address of a version, no error of that version leaves the port
    /// (counted `no_source_address`).
    #[serde(
        default,
        deserialize_with = "one_or_many",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub address: Vec<String>,
    /// The largest IP packet this port sends (octets, IP header included, like `ip link`'s
    /// `mtu`): a larger one is dropped as `too_big` with Fragmentation Needed (IPv4 with DF)
    /// or Packet Too Big (IPv6) to its sender; a larger IPv4 one without DF goes unchanged
    /// (decided: zlrouter does not fragment). Absent: the interface's MTU where the port has
    /// one (AF_XDP, read at start), else no check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mtu: Option<u32>,
}

impl PortParams {
    /// The receive queues the port has, each a receive half a receive worker can serve: an
    /// AF_XDP port's `queues` list, a DPDK port's `queues` count, 1 for the others (the
    /// backends check their own tables; an entry they would refuse counts 1 here).
    pub fn receive_queues(&self) -> usize {
        let queues = |t: &Option<toml::Table>| t.as_ref().and_then(|t| t.get("queues")).cloned();
        let n = match self.kind {
            PortKind::AfXdp => match queues(&self.af_xdp) {
                Some(toml::Value::Array(a)) => a.len(),
                _ => 1,
            },
            PortKind::Dpdk => match queues(&self.dpdk) {
                Some(toml::Value::Integer(n)) => usize::try_from(n).unwrap_or(1),
                _ => 1,
            },
            _ => 1,
        };
        n.max(1)
    }
}

/// A string or a list of strings.
fn one_or_many<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(d)? {
        OneOrMany::One(s) => vec![s],
        OneOrMany::Many(v) => v,
    })
}

/// Forwarding mode.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// IPv4/IPv6 longest-prefix match over `[[routes]]`, TTL / hop-limit decrement, MAC rewrite.
    #[default]
    Router,
    /// Frames go unchanged (except AQM marks) between the ports of each `bridge` pair.
    Bridge,
}

/// `[forwarding]`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForwardingParams {
    #[serde(default)]
    pub mode: Mode,
    /// Bridge mode: pairs of port names, each forwarding both ways.
    #[serde(default)]
    pub bridge: Vec<[String; 2]>,
}

/// Where routes and next-hop MACs come from (`[routing] source`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RouteSource {
    /// Only the config's `[[routes]]`, each with its `next_hop_mac`.
    #[default]
    Static,
    /// The kernel's main table and neighbour table, dumped at start and followed through
    /// rtnetlink while forwarding (`ip route`, BIRD, FRR, ARP, NDP); `[[routes]]` mixed in
    /// (a static route wins for its prefix, its `next_hop_mac` overriding the neighbour
    /// table). Needs AF_XDP ports (their interfaces are the kernel's); runs on either engine.
    Kernel,
}

/// `[routing]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoutingParams {
    #[serde(default)]
    pub source: RouteSource,
    /// Kernel routing: packets held per next hop while the kernel resolves its MAC (as the
    /// kernel's `unres_qlen`); more are dropped as `no_neighbour`.
    #[serde(default = "RoutingParams::default_unres_qlen")]
    pub unres_qlen: u32,
}

impl RoutingParams {
    fn default_unres_qlen() -> u32 {
        32
    }
}

impl Default for RoutingParams {
    fn default() -> Self {
        RoutingParams {
            source: RouteSource::Static,
            unres_qlen: Self::default_unres_qlen(),
        }
    }
}

/// `[[routes]]`: one static route.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouteParams {
    /// `address/length`, IPv4 or IPv6.
    pub prefix: String,
    /// Egress port name.
    pub port: String,
    /// The next hop's MAC (destination MAC of forwarded frames).
    pub next_hop_mac: String,
}

/// `[metrics]`: the Prometheus endpoint.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetricsParams {
    /// Address to serve `/metrics` on (`host:port`, or a bare port number on 127.0.0.1); none
    /// disables the endpoint. Loopback by default so a router does not expose its counters to
    /// the network unless asked.
    #[serde(default)]
    pub listen: Option<String>,
    /// Keep a Zombie List per egress port to estimate its active flows, 1/P(t) (SRED
    /// step 3, docs/algorithms/zombie-list.md), exported as `zlrouter_zombie_estimated_flows`.
    /// Always on for a port whose QoS has a `sqrt-n-live` buffer rule, which takes N from it.
    #[serde(default)]
    pub flow_estimate: bool,
    /// The estimating list's parameters (M = 1000, p_swap = 0.25, alpha = 1/M by default).
    #[serde(default)]
    pub flow_estimate_zombie: Option<zl_zombie::ZombieParams>,
    /// Rows of each port's list of flows with the largest occurrence F in its Zombie List
    /// (`zlrouter flows`, the final table, `zlrouter_top_flow_*`; see `crate::flows`); 10
    /// by default, 0 turns the flow tracking off. Only ports with a Zombie List have one.
    #[serde(default)]
    pub top_flows: Option<usize>,
    /// The most connections the endpoint holds open at once
    /// ([`crate::control::DEFAULT_MAX_CONNECTIONS`] by default, 1 ..= 65536); a new one beyond
    /// it closes the oldest that has not yet sent its whole request (`crate::control`).
    #[serde(default)]
    pub max_connections: Option<usize>,
    /// Seconds a client has from connecting to send its whole request head
    /// ([`crate::control::DEFAULT_REQUEST_TIMEOUT`] by default, above 0 and at most 300): an
    /// idle or drip-feeding client is cut then.
    #[serde(default)]
    pub request_timeout_s: Option<f64>,
    /// The file holding the control token that `POST /reload` must present
    /// (`Authorization: Bearer`); relative to the config's directory. Read if it exists
    /// (owned by the router's user or root, no access for others), else created with a
    /// random token, mode 0600. Without it: `/run/zlrouter/control.token`, then
    /// `$XDG_RUNTIME_DIR/zlrouter/`, then `/tmp/zlrouter-<uid>/` (`crate::control::token`).
    #[serde(default)]
    pub token_file: Option<String>,
}

/// The whole file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RouterConfig {
    #[serde(default)]
    pub run: RunParams,
    #[serde(default)]
    pub parse: ParseConfig,
    /// Where priority and weight come from (priority-ECN RED, docs/algorithms/priority-ecn-red.md).
    #[serde(default)]
    pub priority: PriorityParams,
    pub ports: Vec<PortParams>,
    #[serde(default)]
    pub forwarding: ForwardingParams,
    #[serde(default)]
    pub routes: Vec<RouteParams>,
    #[serde(default)]
    pub routing: RoutingParams,
    /// QoS of every egress port without its own `qos`; one best-effort tail-drop class of
    /// 1000 packets when absent.
    #[serde(default)]
    pub qos: Option<QosParams>,
    #[serde(default)]
    pub metrics: MetricsParams,
    /// `[capture]`: dropped (and optionally marked) packets to a pcapng file, with their
    /// causes (`crate::capture`).
    #[serde(default)]
    pub capture: Option<crate::capture::CaptureParams>,
    /// `[icmp]`: the ICMP errors the router sends and their rate limit (`crate::icmp`).
    #[serde(default)]
    pub icmp: IcmpParams,
    /// `[dpdk]`: the EAL of every DPDK port (`zl_dpdk::EalConfig`), passed to the binary
    /// unread; without it the binary uses `--no-huge --no-pci` defaults.
    #[serde(default)]
    pub dpdk: Option<toml::Table>,
}

/// The built-in default configuration (`zlrouter run` with no file).
pub const DEFAULT_CONFIG: &str = include_str!("../../../configs/default.toml");

/// The address to bind for a metrics `listen` value: `host:port` as given, or a bare port on
/// loopback (`"9464"` is `127.0.0.1:9464`: counters are not exposed to the network unless an
/// address says so). Errors say what was expected; nothing is bound.
pub fn listen_address(listen: &str) -> Result<String, String> {
    if let Ok(port) = listen.parse::<u16>() {
        return Ok(format!("127.0.0.1:{port}"));
    }
    match listen.to_socket_addrs().map(|mut a| a.next()) {
        Ok(Some(_)) => Ok(listen.to_owned()),
        Ok(None) => Err("a host:port whose host resolves to an address".to_owned()),
        Err(e) => Err(format!(
            "host:port (e.g. 127.0.0.1:9464) or a port number: {e}"
        )),
    }
}

impl RouterConfig {
    /// Parses TOML text (syntax, types, unknown keys).
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        toml::from_str(text).map_err(|e| ConfigError::Syntax(e.to_string()))
    }

    /// Reads and parses a file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError::Read {
            path: path.display().to_string(),
            source: e,
        })?;
        let cfg = Self::from_toml(&text)?;
        cfg.validate()?;
        Ok(cfg)
    }

    /// The key naming port `i`'s QoS table in errors: its own (`ports[i].qos`), else the
    /// global one (`qos`).
    pub fn qos_key(&self, i: usize) -> String {
        if self.ports[i].qos.is_some() {
            format!("ports[{i}].qos")
        } else {
            "qos".to_owned()
        }
    }

    /// Whether an egress with QoS `params` estimates its active flows (1/P(t)): asked for
    /// with `metrics.flow_estimate`, or needed by a class sized by the `sqrt-n-live` rule.
    pub fn estimates_flows(&self, params: &QosParams) -> bool {
        self.metrics.flow_estimate
            || params
                .classes
                .iter()
                .any(|c| matches!(c.buffer, Some(zl_qos::BufferRule::SqrtNLive { .. })))
    }

    /// The QoS parameters of port `i`'s egress.
    pub fn qos_of(&self, i: usize) -> QosParams {
        self.ports[i]
            .qos
            .clone()
            .or_else(|| self.qos.clone())
            .unwrap_or_else(|| QosParams {
                link_rate_bps: None,
                classes: vec![ClassParams::weighted("be", 1, 1000)],
                classifier: Default::default(),
                scheduler: Default::default(),
                shaper: None,
            })
    }

    /// Checks values and cross references that serde cannot (everything the run needs
    /// besides opening files and building the QoS engines, which check their own keys).
    /// Port `i`'s addresses and MTU: as configured (an unparsable address, which `validate`
    /// rejects, is skipped), else what the port's interface reports (`port`'s
    /// `Port::addresses` and `Port::mtu`, asked only when needed).
    pub fn port_l3(&self, i: usize, port: &dyn zl_port::Port) -> PortL3 {
        let Some(p) = self.ports.get(i) else {
            return PortL3::default();
        };
        let configured: Vec<_> = (p.address.iter())
            .filter_map(|a| a.parse::<Prefix>().ok())
            .map(|a| (a.addr, a.len))
            .collect();
        PortL3 {
            addresses: if configured.is_empty() {
                port.addresses()
            } else {
                configured
            },
            mtu: p.mtu.or_else(|| port.mtu()),
            mtu_configured: p.mtu.is_some(),
        }
    }

    pub fn validate(&self) -> Result<(), ConfigError> {
        let r = &self.run;
        if !(r.duration_s.is_finite() && r.duration_s > 0.0 && r.duration_s <= 1e6) {
            return Err(invalid(
                "run.duration_s",
                r.duration_s,
                "0 < seconds <= 1e6",
            ));
        }
        if !(r.drain_s.is_finite() && r.drain_s >= 0.0 && r.drain_s <= 1e6) {
            return Err(invalid("run.drain_s", r.drain_s, "0 <= seconds <= 1e6"));
        }
        if r.work_budget == 0 || r.work_budget > 65_536 {
            return Err(invalid(
                "run.work_budget",
                r.work_budget,
                "1..=65536 packets per poll",
            ));
        }
        if let Some(n) = r.pool_buffers {
            if !(64..=MAX_POOL_BUFFERS).contains(&n) {
                return Err(invalid(
                    "run.pool_buffers",
                    n,
                    "64..=1048576 buffers (2 KiB each)",
                ));
            }
        }
        self.parse
            .validate()
            .map_err(|e| invalid(format!("parse.{}", e.param), e.value, e.expected))?;
        if let Some(c) = &self.capture {
            c.validate()?;
        }
        self.priority.build()?;
        if self.ports.is_empty() {
            return Err(invalid("ports", "[]", "at least one [[ports]] entry"));
        }
        if self.ports.len() > u16::MAX as usize {
            return Err(invalid("ports", self.ports.len(), "at most 65535 ports"));
        }
        let queues: usize = self.ports.iter().map(PortParams::receive_queues).sum();
        if r.rx_workers as usize > queues || r.rx_workers > MAX_RX_WORKERS {
            return Err(invalid(
                "run.rx_workers",
                r.rx_workers,
                format!(
                    "0 (single thread) or 1..={} receive workers (at most one per receive \
                     queue: {queues} queues on {} ports, and at most {MAX_RX_WORKERS})",
                    queues.min(MAX_RX_WORKERS as usize),
                    self.ports.len()
                ),
            ));
        }
        if r.tx_workers == 0 || r.tx_workers as usize > self.ports.len() {
            return Err(invalid(
                "run.tx_workers",
                r.tx_workers,
                format!(
                    "1..={} transmit workers (at most one per port: {} ports)",
                    self.ports.len(),
                    self.ports.len()
                ),
            ));
        }
        if r.tx_workers > 1 && r.rx_workers == 0 {
            return Err(invalid(
                "run.tx_workers",
                r.tx_workers,
                "1 with rx_workers = 0 (the single-thread loop has no transmit workers); set rx_workers >= 1 for more",
            ));
        }
        if let Some(cpus) = &r.cpus {
            if r.rx_workers == 0 {
                return Err(invalid(
                    "run.cpus",
                    format!("{cpus:?}"),
                    "absent with rx_workers = 0 (it places the threaded router's workers; \
                     pin the single-thread loop with taskset)",
                ));
            }
            if cpus.is_empty() || cpus.iter().any(|&c| c >= MAX_CPU) {
                return Err(invalid(
                    "run.cpus",
                    format!("{cpus:?}"),
                    format!("a non-empty list of CPU numbers below {MAX_CPU}"),
                ));
            }
        }
        let mut names = HashSet::new();
        for (i, p) in self.ports.iter().enumerate() {
            let key = |f: &str| format!("ports[{i}].{f}");
            if p.name.is_empty() || !names.insert(p.name.as_str()) {
                return Err(invalid(
                    key("name"),
                    format!("{:?}", p.name),
                    "a unique, non-empty port name",
                ));
            }
            for (k, a) in p.address.iter().enumerate() {
                if a.parse::<Prefix>().is_err() {
                    return Err(invalid(
                        format!("ports[{i}].address[{k}]"),
                        format!("{a:?}"),
                        "address/length, like 10.0.1.1/24 or 2001:db8:1::1/64",
                    ));
                }
            }
            if let Some(mtu) = p.mtu.filter(|m| !(68..=65_535).contains(m)) {
                return Err(invalid(key("mtu"), mtu, "68..=65535 octets"));
            }
            let from_interface = p.mac.is_empty() && p.kind == PortKind::AfXdp;
            if !from_interface && parse_mac(&p.mac).is_none() {
                return Err(invalid(
                    key("mac"),
                    format!("{:?}", p.mac),
                    "a MAC address like 02:00:00:00:00:01",
                ));
            }
            match p.kind {
                PortKind::Generator if p.generator.is_none() => {
                    return Err(invalid(
                        key("generator"),
                        "(missing)",
                        "a [ports.generator] table for kind = \"generator\"",
                    ))
                }
                PortKind::Pcap if p.pcap.is_none() => {
                    return Err(invalid(
                        key("pcap"),
                        "(missing)",
                        "a [ports.pcap] table for kind = \"pcap\"",
                    ))
                }
                _ => {}
            }
            if p.kind == PortKind::AfXdp && p.af_xdp.is_none() {
                return Err(invalid(
                    key("af_xdp"),
                    "(missing)",
                    "a [ports.af_xdp] table (at least ifname) for kind = \"af-xdp\"",
                ));
            }
            if p.kind != PortKind::AfXdp && p.af_xdp.is_some() {
                return Err(invalid(
                    key("af_xdp"),
                    "(present)",
                    "only on a port of kind = \"af-xdp\"",
                ));
            }
            if p.kind == PortKind::Dpdk && p.dpdk.is_none() {
                return Err(invalid(
                    key("dpdk"),
                    "(missing)",
                    "a [ports.dpdk] table (at least device) for kind = \"dpdk\"",
                ));
            }
            if p.kind != PortKind::Dpdk && p.dpdk.is_some() {
                return Err(invalid(
                    key("dpdk"),
                    "(present)",
                    "only on a port of kind = \"dpdk\"",
                ));
            }
            if p.kind != PortKind::Generator && p.generator.is_some() {
                return Err(invalid(
                    key("generator"),
                    "(present)",
                    "only on a port of kind = \"generator\"",
                ));
            }
            if p.kind != PortKind::Pcap && p.pcap.is_some() {
                return Err(invalid(
                    key("pcap"),
                    "(present)",
                    "only on a port of kind = \"pcap\"",
                ));
            }
        }
        if let Some(listen) = &self.metrics.listen {
            listen_address(listen)
                .map_err(|e| invalid("metrics.listen", format!("{listen:?}"), e))?;
        }
        if let Some(n) = self.metrics.max_connections {
            if !(1..=65_536).contains(&n) {
                return Err(invalid("metrics.max_connections", n, "1 ..= 65536"));
            }
        }
        if let Some(t) = self.metrics.request_timeout_s {
            if !(t > 0.0 && t <= 300.0) {
                return Err(invalid(
                    "metrics.request_timeout_s",
                    t,
                    "seconds, above 0 and at most 300",
                ));
            }
        }
        if self.metrics.token_file.as_deref() == Some("") {
            return Err(invalid("metrics.token_file", "\"\"", "a file path"));
        }
        self.check_forwarding()?;
        Ok(())
    }

    /// Whether forwarding follows the kernel's routes (`[routing] source = "kernel"` in router
    /// mode).
    pub fn kernel_routing(&self) -> bool {
        self.forwarding.mode == Mode::Router && self.routing.source == RouteSource::Kernel
    }

    /// Checks what [`RouterConfig::forwarding`] checks without building the routing table
    /// (with a default route, that fills the whole 2^24-entry first level of the IPv4 table:
    /// about a second, for every `check`, start and reload). Only a table too full to hold the
    /// routes is left to the build, which names the route.
    fn check_forwarding(&self) -> Result<(), ConfigError> {
        match self.forwarding.mode {
            Mode::Router => self.checked_static_routes().map(|_| ()),
            Mode::Bridge => self.forwarding().map(|_| ()),
        }
    }

    /// [`RouterConfig::static_routes`], refused with the route's key when a prefix repeats an
    /// earlier route's (host bits ignored, as the table does) or the routes name more distinct
    /// next hops than a table holds; and `forwarding.bridge` refused in router mode.
    fn checked_static_routes(&self) -> Result<Vec<(Prefix, NextHop)>, ConfigError> {
        if !self.forwarding.bridge.is_empty() {
            return Err(invalid(
                "forwarding.bridge",
                "(present)",
                "bridge pairs only with mode = \"bridge\"",
            ));
        }
        let routes = self.static_routes()?;
        let mut seen = std::collections::HashSet::with_capacity(routes.len());
        let mut hops = std::collections::HashSet::new();
        for (i, (prefix, hop)) in routes.iter().enumerate() {
            if !seen.insert(prefix.network()) {
                return Err(invalid(
                    format!("routes[{i}].prefix"),
                    format!("{:?}", self.routes[i].prefix),
                    "a prefix no earlier route has (one route per prefix)",
                ));
            }
            hops.insert(*hop);
            if hops.len() > crate::route::MAX_NEXT_HOPS {
                return Err(invalid(
                    format!("routes[{i}].next_hop_mac"),
                    format!("{:?}", self.routes[i].next_hop_mac),
                    format!("at most {} distinct next hops", crate::route::MAX_NEXT_HOPS),
                ));
            }
        }
        Ok(routes)
    }

    fn port_index(&self, name: &str) -> Option<u16> {
        self.ports
            .iter()
            .position(|p| p.name == name)
            .map(|i| i as u16)
    }

    /// The `[[routes]]`, parsed and resolved to port indices, in config order.
    pub fn static_routes(&self) -> Result<Vec<(Prefix, NextHop)>, ConfigError> {
        let mut out = Vec::with_capacity(self.routes.len());
        for (i, rt) in self.routes.iter().enumerate() {
            let key = |f: &str| format!("routes[{i}].{f}");
            let prefix: Prefix = rt.prefix.parse().map_err(|e: String| {
                invalid(
                    key("prefix"),
                    format!("{:?}", rt.prefix),
                    format!("address/length ({e})"),
                )
            })?;
            let port = self.port_index(&rt.port).ok_or_else(|| {
                invalid(
                    key("port"),
                    format!("{:?}", rt.port),
                    "the name of a configured port",
                )
            })?;
            let mac = parse_mac(&rt.next_hop_mac).ok_or_else(|| {
                invalid(
                    key("next_hop_mac"),
                    format!("{:?}", rt.next_hop_mac),
                    "a MAC address like 02:00:00:00:00:01",
                )
            })?;
            out.push((prefix, NextHop::new(port, mac)));
        }
        Ok(out)
    }

    /// Resolves forwarding to port indices.
    pub fn forwarding(&self) -> Result<Forwarding, ConfigError> {
        match self.forwarding.mode {
            Mode::Router => {
                let routes = self.checked_static_routes()?;
                if self.routing.source == RouteSource::Kernel {
                    // The kernel's table is built when the data plane follows it; these
                    // routes are mixed in then.
                    return Ok(Forwarding::Kernel(
                        routes
                            .into_iter()
                            .map(|(prefix, hop)| zl_fib::StaticRoute {
                                dst: prefix.addr,
                                prefix_len: prefix.len,
                                port: hop.port,
                                gateway: None,
                                mac: Some(hop.mac),
                            })
                            .collect(),
                    ));
                }
                let table = RouteTable::default();
                for (i, (prefix, hop)) in routes.into_iter().enumerate() {
                    // Repeated prefixes and too many next hops were refused above.
                    table.insert(prefix, hop).map_err(|e| {
                        invalid(
                            format!("routes[{i}].prefix"),
                            format!("{:?}", self.routes[i].prefix),
                            format!("a prefix the routing table can hold ({e})"),
                        )
                    })?;
                }
                Ok(Forwarding::Router(table))
            }
            Mode::Bridge => {
                if !self.routes.is_empty() {
                    return Err(invalid(
                        "routes",
                        "(present)",
                        "no [[routes]] with mode = \"bridge\"",
                    ));
                }
                let mut peer = vec![None; self.ports.len()];
                for (i, [a, b]) in self.forwarding.bridge.iter().enumerate() {
                    let key = format!("forwarding.bridge[{i}]");
                    let ia = self.port_index(a).ok_or_else(|| {
                        invalid(&key, format!("{a:?}"), "the name of a configured port")
                    })?;
                    let ib = self.port_index(b).ok_or_else(|| {
                        invalid(&key, format!("{b:?}"), "the name of a configured port")
                    })?;
                    if ia == ib || peer[ia as usize].is_some() || peer[ib as usize].is_some() {
                        return Err(invalid(
                            key,
                            format!("[{a:?}, {b:?}]"),
                            "two different ports, each in one pair only",
                        ));
                    }
                    peer[ia as usize] = Some(ib);
                    peer[ib as usize] = Some(ia);
                }
                Ok(Forwarding::Bridge(peer))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs_parse_strictly() {
        assert_eq!(
            parse_mac("02:00:00:00:00:0a"),
            Some(MacAddr([2, 0, 0, 0, 0, 10]))
        );
        assert_eq!(parse_mac("02:00:00:00:00"), None);
        assert_eq!(parse_mac("02:00:00:00:00:00:01"), None);
        assert_eq!(parse_mac("2:00:00:00:00:00"), None);
        assert_eq!(parse_mac("zz:00:00:00:00:00"), None);
    }

    fn with_workers(n: &str) -> Result<RouterConfig, ConfigError> {
        with_run(&format!("rx_workers = {n}"))
    }

    fn with_run(run: &str) -> Result<RouterConfig, ConfigError> {
        let text = format!(
            "[run]\n{run}\n\
             [[ports]]\nname = \"a\"\nkind = \"sink\"\nmac = \"02:00:00:00:00:01\"\n\
             [[ports]]\nname = \"b\"\nkind = \"sink\"\nmac = \"02:00:00:00:00:02\"\n"
        );
        let cfg = RouterConfig::from_toml(&text)?;
        cfg.validate()?;
        Ok(cfg)
    }

    #[test]
    fn rx_workers_is_checked_against_the_ports() {
        assert_eq!(RunParams::default().rx_workers, 0);
        assert_eq!(with_workers("0").unwrap().run.rx_workers, 0);
        assert_eq!(with_workers("2").unwrap().run.rx_workers, 2);
        let e = with_workers("3").unwrap_err().to_string();
        assert!(
            e.contains("run.rx_workers") && e.contains("= 3") && e.contains("1..=2"),
            "{e}"
        );
        let e = with_workers("-1").unwrap_err().to_string();
        assert!(e.contains("rx_workers"), "{e}");
    }

    /// A port with several receive queues takes a receive worker per queue.
    #[test]
    fn rx_workers_may_exceed_the_ports_by_their_receive_queues() {
        let text = |workers: u32| {
            format!(
                "[run]\nrx_workers = {workers}\n\
                 [[ports]]\nname = \"a\"\nkind = \"af-xdp\"\nmac = \"02:00:00:00:00:01\"\n\
                 af_xdp = {{ ifname = \"zl0\", queues = [0, 1, 2] }}\n\
                 [[ports]]\nname = \"b\"\nkind = \"dpdk\"\nmac = \"02:00:00:00:00:02\"\n\
                 dpdk = {{ device = \"net_null0\", queues = 2 }}\n\
                 [[ports]]\nname = \"c\"\nkind = \"sink\"\nmac = \"02:00:00:00:00:03\"\n"
            )
        };
        let check = |w| RouterConfig::from_toml(&text(w)).and_then(|c| c.validate());
        if let Err(e) = check(6) {
            panic!("{e}");
        }
        let e = check(7).unwrap_err().to_string();
        assert!(
            e.contains("1..=6") && e.contains("6 queues on 3 ports"),
            "{e}"
        );
    }

    #[test]
    fn tx_workers_is_checked_against_the_ports_and_the_receive_workers() {
        assert_eq!(RunParams::default().tx_workers, 1);
        assert_eq!(with_run("").unwrap().run.tx_workers, 1);
        let two = with_run("rx_workers = 1\ntx_workers = 2").unwrap();
        assert_eq!(two.run.tx_workers, 2);
        let e = with_run("rx_workers = 1\ntx_workers = 3")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("run.tx_workers") && e.contains("= 3") && e.contains("1..=2"),
            "{e}"
        );
        let e = with_run("rx_workers = 1\ntx_workers = 0")
            .unwrap_err()
            .to_string();
        assert!(e.contains("run.tx_workers") && e.contains("= 0"), "{e}");
        let e = with_run("tx_workers = 2").unwrap_err().to_string();
        assert!(
            e.contains("run.tx_workers") && e.contains("rx_workers = 0"),
            "{e}"
        );
    }

    #[test]
    fn cpus_needs_workers_and_real_cpu_numbers() {
        assert_eq!(with_run("").unwrap().run.cpus, None);
        let c = with_run("rx_workers = 1\ncpus = [3, 1]").unwrap();
        assert_eq!(c.run.cpus, Some(vec![3, 1]));
        for (run, says) in [
            ("cpus = [1]", "rx_workers = 0"),
            ("rx_workers = 1\ncpus = []", "non-empty"),
            ("rx_workers = 1\ncpus = [1024]", "below 1024"),
        ] {
            let e = with_run(run).unwrap_err().to_string();
            assert!(e.contains("run.cpus") && e.contains(says), "{run}: {e}");
        }
    }
}
