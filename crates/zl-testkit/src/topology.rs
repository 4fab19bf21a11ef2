//! The forwarding benchmarks' and end-to-end tests' line topology (`gen` -- `rtr` -- `sink`),
//! its offered frame and the router config the benchmarks run on it.

use std::io;

use crate::frames::Udp;
use crate::netns::{mac_text, Netns};

/// The forwarding benchmarks' line topology: `gen` (`g0` 10.0.1.2/24) -- `r0` (10.0.1.1/24)
/// `rtr` `r1` (10.0.2.1/24) -- `s0` (10.0.2.2/24) `sink`, IPv6 off everywhere, and a
/// permanent neighbour 10.0.2.99 -> `s0`'s MAC on `r1`, so frames to 10.0.2.99 are forwarded
/// by `rtr` and counted at `s0` without an answer travelling back.
pub struct LineTopology {
    pub gen: Netns,
    pub rtr: Netns,
    pub sink: Netns,
}

impl LineTopology {
    /// Creates the three namespaces (tags `tags`, under the current [`crate::netns::set_prefix`]) and
    /// links. With `rps_cpu`, `r0`'s receive packet steering sends every frame to that CPU's
    /// backlog (so the kernel forwards there rather than in the sender's softirq).
    pub fn create(tags: [&str; 3], rps_cpu: Option<usize>) -> io::Result<Self> {
        let t = LineTopology {
            gen: Netns::create(tags[0])?,
            rtr: Netns::create(tags[1])?,
            sink: Netns::create(tags[2])?,
        };
        for (dev, peer, ns) in [("r0", "g0", &t.gen), ("r1", "s0", &t.sink)] {
            t.rtr.ip(&[
                "link",
                "add",
                dev,
                "type",
                "veth",
                "peer",
                "name",
                peer,
                "netns",
                ns.name(),
            ])?;
        }
        for (ns, dev, addr) in [
            (&t.gen, "g0", "10.0.1.2/24"),
            (&t.rtr, "r0", "10.0.1.1/24"),
            (&t.rtr, "r1", "10.0.2.1/24"),
            (&t.sink, "s0", "10.0.2.2/24"),
        ] {
            ns.exec(&[
                "sysctl",
                "-qw",
                &format!("net.ipv6.conf.{dev}.disable_ipv6=1"),
            ])?;
            ns.ip(&["addr", "add", addr, "dev", dev])?;
            ns.ip(&["link", "set", dev, "up"])?;
        }
        let s0 = mac_text(t.sink.mac("s0")?);
        t.rtr.ip(&[
            "neigh",
            "add",
            "10.0.2.99",
            "lladdr",
            &s0,
            "dev",
            "r1",
            "nud",
            "permanent",
        ])?;
        if let Some(cpu) = rps_cpu {
            t.rtr.exec(&[
                "sh",
                "-c",
                &format!(
                    "echo {:x} > /sys/class/net/r0/queues/rx-0/rps_cpus",
                    1u64 << cpu
                ),
            ])?;
        }
        Ok(t)
    }
}

impl LineTopology {
    /// A 60-byte Ethernet + IPv4 + UDP frame (64 on the wire with the FCS) from `gen`'s
    /// 10.0.1.2, UDP source port `sport`, to 10.0.2.99 (which `rtr` forwards to `sink`), with
    /// a valid IPv4 header checksum: the forwarding benchmarks' offered traffic.
    pub fn udp_frame(dst: [u8; 6], src: [u8; 6], sport: u16) -> Vec<u8> {
        Udp::v4([10, 0, 1, 2], [10, 0, 2, 99])
            .macs(dst, src)
            .ports(sport, 9)
            .build()
    }
}

/// The best-effort class's ZL-RED line (the paper's constants) for
/// [`LineTopology::router_config`].
pub const BENCH_ZL_RED: &str = r#"aqm = { kind = "zl-red", th_min = 5, p_max = 0.15, a = 10 }"#;

impl LineTopology {
    /// A `zlrouter` config for the forwarding benchmarks on this topology: `ports` (the TOML of
    /// the router's two ports, `r0` then `r1`), the route to the sink's network out of `r1`
    /// (next hop `s0`'s MAC), the 5-tuple flow key, the flow estimate when `flow_estimate`,
    /// and the QoS: the Diffserv classifier, EF strict plus best effort with `be_aqm` (a TOML
    /// `aqm = ...` line such as [`BENCH_ZL_RED`], empty for tail drop), WRR and a 100 Gbit/s
    /// shaper (so the forwarding, not the shaper, is the limit).
    pub fn router_config(ports: &str, s0: [u8; 6], flow_estimate: bool, be_aqm: &str) -> String {
        format!(
            r#"[run]
pool_buffers = 16384

[parse]
flow_key = "5-tuple"

[metrics]
flow_estimate = {flow_estimate}

{ports}
[[routes]]
prefix = "10.0.2.0/24"
port = "r1"
next_hop_mac = "{s0}"

[qos]
link_rate_bps = 100_000_000_000
shaper = {{ rate_bps = 100_000_000_000, burst_bytes = 1_000_000 }}
scheduler = {{ mode = "wrr" }}
classifier = {{ default_class = "be" }}

[[qos.classes]]
name = "ef"
strict_rank = 0
max_packets = 100

[[qos.classes]]
name = "be"
weight = 1
max_packets = 1000
{be_aqm}
"#,
            s0 = mac_text(s0),
        )
    }
}
