//! A builder for the router configs the tests write.
//!
//! It writes TOML text, not a `RouterConfig`: the tests then go through the same parser and
//! validation as a user's file (so a test of the router also tests the config it reads), and
//! this crate does not depend on the data plane. Each builder names the parts a test is about
//! and fills the rest with the usual test values; anything the builder has no method for is
//! set with [`RouterToml::set`], [`PortToml::set`], [`FlowToml::set`] or [`ClassToml::set`]
//! and a TOML value written out.
//!
//! ```
//! use zl_testkit::config::{ClassToml, FlowToml, PortToml, QosToml, RouterToml};
//!
//! let text = RouterToml::new()
//!     .set("run", "seed", 11)
//!     .port(
//!         PortToml::generator("in", "02:00:00:00:00:01")
//!             .flow(FlowToml::udp("many", "10.0.0.1", "10.9.0.1").count(20).rate_bps(1_000_000)),
//!     )
//!     .port(PortToml::sink("out", "02:00:00:00:00:02"))
//!     .route("10.9.0.0/16", "out", Some("02:00:00:00:00:03"))
//!     .qos(
//!         QosToml::shaped(10_000_000)
//!             .class(ClassToml::new("be").weight(1).max_packets(200).aqm(r#"{ kind = "zl-red", a = 10 }"#)),
//!     )
//!     .to_toml();
//! let parsed: toml::Table = text.parse().unwrap();
//! assert_eq!(parsed["ports"][0]["generator"]["flows"][0]["count"].as_integer(), Some(20));
//! assert_eq!(parsed["routes"].as_array().unwrap().len(), 1);
//! ```

use std::fmt::{self, Display, Write as _};

/// One `key = value` line; the value is TOML already (strings carry their quotes).
#[derive(Clone, Debug)]
struct Line {
    key: String,
    value: String,
}

/// Lines whose values are the strings given (quoted here).
fn strings(pairs: &[(&str, &str)]) -> Vec<Line> {
    pairs
        .iter()
        .map(|&(key, value)| Line {
            key: key.to_owned(),
            value: quoted(value),
        })
        .collect()
}

fn write_lines(out: &mut String, lines: &[Line]) {
    for l in lines {
        let _ = writeln!(out, "{} = {}", l.key, l.value);
    }
}

fn set_line(lines: &mut Vec<Line>, key: &str, value: String) {
    match lines.iter_mut().find(|l| l.key == key) {
        Some(l) => l.value = value,
        None => lines.push(Line {
            key: key.to_owned(),
            value,
        }),
    }
}

/// A TOML string literal of `s` (quotes and backslashes escaped).
pub fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A whole router config: top-level tables (`[run]`, `[parse]`, `[metrics]`, ...), ports,
/// routes and the QoS.
#[derive(Clone, Debug, Default)]
pub struct RouterToml {
    tables: Vec<(String, Vec<Line>)>,
    ports: Vec<PortToml>,
    routes: Vec<Vec<Line>>,
    qos: Option<QosToml>,
    raw: String,
}

impl RouterToml {
    /// An empty config (the router's defaults for everything not set).
    pub fn new() -> Self {
        Self::default()
    }

    /// `[table] key = value`, `value` written with its `Display` (a number or a bool; a
    /// string needs [`quoted`], e.g. `.set("parse", "flow_key", quoted("5-tuple"))`).
    /// Setting a key twice keeps the last value.
    pub fn set(mut self, table: &str, key: &str, value: impl Display) -> Self {
        let lines = match self.tables.iter().position(|(t, _)| t == table) {
            Some(i) => &mut self.tables[i].1,
            None => {
                self.tables.push((table.to_owned(), Vec::new()));
                &mut self.tables.last_mut().expect("just pushed").1
            }
        };
        set_line(lines, key, value.to_string());
        self
    }

    /// Adds a port (`[[ports]]`), in order.
    pub fn port(mut self, port: PortToml) -> Self {
        self.ports.push(port);
        self
    }

    /// A static route (`[[routes]]`): `prefix` out of `port`, with the next hop's MAC when
    /// given (without it the router resolves the neighbour or floods, as configured).
    pub fn route(mut self, prefix: &str, port: &str, next_hop_mac: Option<&str>) -> Self {
        let mut lines = strings(&[("prefix", prefix), ("port", port)]);
        if let Some(mac) = next_hop_mac {
            lines.extend(strings(&[("next_hop_mac", mac)]));
        }
        self.routes.push(lines);
        self
    }

    /// Bridge mode (`[forwarding] mode = "bridge"`): frames cross between the two ports of
    /// each pair unchanged, in both directions.
    pub fn bridge(self, pairs: &[(&str, &str)]) -> Self {
        let pairs: Vec<String> = pairs
            .iter()
            .map(|&(a, b)| format!("[{}, {}]", quoted(a), quoted(b)))
            .collect();
        self.set("forwarding", "mode", quoted("bridge")).set(
            "forwarding",
            "bridge",
            format!("[{}]", pairs.join(", ")),
        )
    }

    /// The shared `[qos]` section every port's egress runs.
    pub fn qos(mut self, qos: QosToml) -> Self {
        self.qos = Some(qos);
        self
    }

    /// TOML text appended as it is, for what has no builder method (e.g. `[[dscp_map]]`).
    pub fn raw(mut self, toml: &str) -> Self {
        self.raw.push_str(toml);
        if !toml.ends_with('\n') {
            self.raw.push('\n');
        }
        self
    }

    /// The config's TOML text.
    pub fn to_toml(&self) -> String {
        self.to_string()
    }
}

impl Display for RouterToml {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        for (table, lines) in &self.tables {
            let _ = writeln!(out, "[{table}]");
            write_lines(&mut out, lines);
            out.push('\n');
        }
        for port in &self.ports {
            port.write(&mut out);
        }
        for route in &self.routes {
            out.push_str("[[routes]]\n");
            write_lines(&mut out, route);
            out.push('\n');
        }
        if let Some(qos) = &self.qos {
            qos.write(&mut out);
        }
        out.push_str(&self.raw);
        f.write_str(&out)
    }
}

/// One `[[ports]]` entry.
#[derive(Clone, Debug)]
pub struct PortToml {
    lines: Vec<Line>,
    /// `[ports.<sub>]` tables (`af_xdp`, `dpdk`, `pcap`, ...), in order.
    subtables: Vec<(String, Vec<Line>)>,
    flows: Vec<FlowToml>,
}

impl PortToml {
    /// A port of `kind` named `name` with the router's MAC `mac` on it.
    pub fn new(name: &str, kind: &str, mac: &str) -> Self {
        PortToml {
            lines: strings(&[("name", name), ("kind", kind), ("mac", mac)]),
            subtables: Vec::new(),
            flows: Vec::new(),
        }
    }

    /// A traffic generator port; add its flows with [`PortToml::flow`].
    pub fn generator(name: &str, mac: &str) -> Self {
        Self::new(name, "generator", mac)
    }

    /// A port that replays the pcap file `read` (relative to the config's directory).
    pub fn pcap_reader(name: &str, mac: &str, read: &str) -> Self {
        Self::new(name, "pcap", mac).set("pcap", format!("{{ read = {} }}", quoted(read)))
    }

    /// A port that writes what it is sent to the pcap file `write`.
    pub fn pcap_writer(name: &str, mac: &str, write: &str) -> Self {
        Self::new(name, "pcap", mac).set("pcap", format!("{{ write = {} }}", quoted(write)))
    }

    /// A port that replays the pcap file `read` and writes what it is sent to `write` (both
    /// relative to the config's directory).
    pub fn pcap(name: &str, mac: &str, read: &str, write: &str) -> Self {
        Self::new(name, "pcap", mac).set(
            "pcap",
            format!("{{ read = {}, write = {} }}", quoted(read), quoted(write)),
        )
    }

    /// A port that counts what it is sent and discards it.
    pub fn sink(name: &str, mac: &str) -> Self {
        Self::new(name, "sink", mac)
    }

    /// An AF_XDP port on `ifname` (the interface's own MAC unless `mac` is set with
    /// [`PortToml::set`]).
    pub fn af_xdp(name: &str, ifname: &str) -> Self {
        PortToml {
            lines: strings(&[("name", name), ("kind", "af-xdp")]),
            subtables: Vec::new(),
            flows: Vec::new(),
        }
        .sub("af_xdp", "ifname", quoted(ifname))
    }

    /// A DPDK port on `device` (an ethdev the EAL arguments create, a PCI address, or devargs
    /// to hot-plug such as `net_pcap0,rx_pcap=in.pcap`); the rest of its `[ports.dpdk]` table
    /// (`queues`, `mbufs`, ...) with [`PortToml::sub`].
    pub fn dpdk(name: &str, mac: &str, device: &str) -> Self {
        Self::new(name, "dpdk", mac).sub("dpdk", "device", quoted(device))
    }

    /// `key = value` on the port itself (`value` is TOML: strings through [`quoted`]).
    pub fn set(mut self, key: &str, value: impl Display) -> Self {
        set_line(&mut self.lines, key, value.to_string());
        self
    }

    /// The port without `key` (one the constructor wrote, e.g. `mac`), for the tests of a
    /// config that leaves a required key out.
    pub fn without(mut self, key: &str) -> Self {
        self.lines.retain(|l| l.key != key);
        self
    }

    /// `key = value` in the port's `[ports.<table>]` table.
    pub fn sub(mut self, table: &str, key: &str, value: impl Display) -> Self {
        let lines = match self.subtables.iter().position(|(t, _)| t == table) {
            Some(i) => &mut self.subtables[i].1,
            None => {
                self.subtables.push((table.to_owned(), Vec::new()));
                &mut self.subtables.last_mut().expect("just pushed").1
            }
        };
        set_line(lines, key, value.to_string());
        self
    }

    /// A generator flow group (`[[ports.generator.flows]]`).
    pub fn flow(mut self, flow: FlowToml) -> Self {
        self.flows.push(flow);
        self
    }

    fn write(&self, out: &mut String) {
        out.push_str("[[ports]]\n");
        write_lines(out, &self.lines);
        for (table, lines) in &self.subtables {
            let _ = writeln!(out, "[ports.{table}]");
            write_lines(out, lines);
        }
        for flow in &self.flows {
            out.push_str("[[ports.generator.flows]]\n");
            write_lines(out, &flow.lines);
        }
        out.push('\n');
    }
}

/// One generator flow group.
#[derive(Clone, Debug)]
pub struct FlowToml {
    lines: Vec<Line>,
}

impl FlowToml {
    /// A group of UDP flows named `name` from `src` to `dst` (the generator's defaults for
    /// count, rate and size until set).
    pub fn udp(name: &str, src: &str, dst: &str) -> Self {
        FlowToml {
            lines: strings(&[("name", name), ("src", src), ("dst", dst)]),
        }
    }

    /// Flows in the group.
    pub fn count(self, n: u32) -> Self {
        self.set("count", n)
    }

    /// Each flow's rate, bit/s.
    pub fn rate_bps(self, bps: u64) -> Self {
        self.set("rate_bps", bps)
    }

    /// Frame size, bytes.
    pub fn size(self, bytes: u32) -> Self {
        self.set("size", bytes)
    }

    /// The DSCP name or number the group's packets carry (`"ef"`, `"af11"`, `46`).
    pub fn dscp(self, dscp: &str) -> Self {
        self.set("dscp", quoted(dscp))
    }

    /// Marks the group as the misbehaving one (the report's misbehaving share).
    pub fn misbehaving(self) -> Self {
        self.set("misbehaving", true)
    }

    /// `key = value` on the flow group (`value` is TOML: strings through [`quoted`]).
    pub fn set(mut self, key: &str, value: impl Display) -> Self {
        set_line(&mut self.lines, key, value.to_string());
        self
    }
}

/// The `[qos]` section.
#[derive(Clone, Debug, Default)]
pub struct QosToml {
    lines: Vec<Line>,
    classes: Vec<ClassToml>,
}

impl QosToml {
    /// A QoS section with nothing set (the router's defaults).
    pub fn new() -> Self {
        Self::default()
    }

    /// A link of `rate_bps` with a shaper at that rate (the usual test bottleneck).
    pub fn shaped(rate_bps: u64) -> Self {
        Self::new()
            .set("link_rate_bps", rate_bps)
            .set("shaper", format!("{{ rate_bps = {rate_bps} }}"))
    }

    /// `key = value` in `[qos]` (`value` is TOML: strings through [`quoted`], inline tables
    /// written out).
    pub fn set(mut self, key: &str, value: impl Display) -> Self {
        set_line(&mut self.lines, key, value.to_string());
        self
    }

    /// A class (`[[qos.classes]]`), in order.
    pub fn class(mut self, class: ClassToml) -> Self {
        self.classes.push(class);
        self
    }

    /// The section on its own, as a QoS config alone is read (`zl_qos::QosParams`): its keys
    /// at the top level and its classes as `[[classes]]`.
    pub fn to_toml(&self) -> String {
        let mut out = String::new();
        self.write_body(&mut out, "classes");
        out
    }

    fn write(&self, out: &mut String) {
        out.push_str("[qos]\n");
        self.write_body(out, "qos.classes");
        out.push('\n');
    }

    /// The keys, then each class under `[[<classes>]]`.
    fn write_body(&self, out: &mut String, classes: &str) {
        write_lines(out, &self.lines);
        for class in &self.classes {
            let _ = writeln!(out, "[[{classes}]]");
            write_lines(out, &class.lines);
        }
    }
}

/// One QoS class.
#[derive(Clone, Debug)]
pub struct ClassToml {
    lines: Vec<Line>,
}

impl ClassToml {
    /// A class named `name`.
    pub fn new(name: &str) -> Self {
        ClassToml {
            lines: strings(&[("name", name)]),
        }
    }

    /// Strict priority rank (0 is served first).
    pub fn strict_rank(self, rank: u32) -> Self {
        self.set("strict_rank", rank)
    }

    /// WRR weight.
    pub fn weight(self, weight: u32) -> Self {
        self.set("weight", weight)
    }

    /// The class queue's bound, packets.
    pub fn max_packets(self, n: u32) -> Self {
        self.set("max_packets", n)
    }

    /// The class's AQM as an inline TOML table, e.g. `{ kind = "zl-red", a = 10 }`.
    pub fn aqm(self, inline_table: &str) -> Self {
        self.set("aqm", inline_table)
    }

    /// `key = value` on the class (`value` is TOML).
    pub fn set(mut self, key: &str, value: impl Display) -> Self {
        set_line(&mut self.lines, key, value.to_string());
        self
    }
}

/// A router config of two sink ports `a` and `b` and `routes` static IPv4 routes, for the
/// route-loading tests and measurements: route `i` is the /24 `(1 + i / 65536).(i / 256 %
/// 256).(i % 256).0/24`, except every 16th (`i % 16 == 0`), which is the /28 `.16/28` inside
/// it; even routes go to port `a` (next hop `02:00:00:00:00:01`), odd ones to `b`
/// (`02:00:00:00:00:02`).
pub fn route_table_toml(routes: u32) -> String {
    let mut text = String::from(
        "[[ports]]\nname = \"a\"\nkind = \"sink\"\nmac = \"02:00:00:00:01:01\"\n\
         [[ports]]\nname = \"b\"\nkind = \"sink\"\nmac = \"02:00:00:00:01:02\"\n",
    );
    for i in 0..routes {
        let (a, b, c) = (1 + (i >> 16), (i >> 8) & 0xff, i & 0xff);
        let (last, len) = if i % 16 == 0 { (16, 28) } else { (0, 24) };
        let port = if i % 2 == 0 { "a" } else { "b" };
        writeln!(
            text,
            "[[routes]]\nprefix = \"{a}.{b}.{c}.{last}/{len}\"\nport = \"{port}\"\n\
             next_hop_mac = \"02:00:00:00:00:0{}\"",
            i % 2 + 1
        )
        .expect("writing to a String cannot fail");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_set_twice_keeps_the_last_value_once() {
        let text = RouterToml::new()
            .set("run", "seed", 1)
            .set("run", "seed", 2)
            .to_toml();
        assert_eq!(text, "[run]\nseed = 2\n\n");
    }

    #[test]
    fn a_bridge_of_pcap_ports_is_written_as_the_router_reads_it() {
        let text = RouterToml::new()
            .bridge(&[("a", "b")])
            .port(PortToml::pcap(
                "a",
                "02:00:00:00:00:0a",
                "a-in.pcap",
                "a-out.pcap",
            ))
            .port(PortToml::pcap_writer(
                "b",
                "02:00:00:00:00:0b",
                "b-out.pcap",
            ))
            .to_toml();
        let t: toml::Table = text.parse().expect("valid TOML");
        let expected: toml::Table = r#"
            [forwarding]
            mode = "bridge"
            bridge = [["a", "b"]]
            [[ports]]
            name = "a"
            kind = "pcap"
            mac = "02:00:00:00:00:0a"
            pcap = { read = "a-in.pcap", write = "a-out.pcap" }
            [[ports]]
            name = "b"
            kind = "pcap"
            mac = "02:00:00:00:00:0b"
            pcap = { write = "b-out.pcap" }
        "#
        .parse()
        .unwrap();
        assert_eq!(t, expected);
    }

    #[test]
    fn a_port_without_a_key_leaves_only_that_key_out() {
        let text = RouterToml::new()
            .port(PortToml::sink("b", "02:00:00:00:00:0b").without("mac"))
            .to_toml();
        let t: toml::Table = text.parse().expect("valid TOML");
        let port = t["ports"][0].as_table().unwrap();
        assert!(port.get("mac").is_none(), "{text}");
        assert_eq!(port["kind"].as_str(), Some("sink"));
    }

    #[test]
    fn a_dpdk_port_is_written_as_the_router_reads_it() {
        let text = RouterToml::new()
            .port(
                PortToml::dpdk("in", "02:00:00:00:00:0a", "net_pcap0,rx_pcap=in.pcap")
                    .sub("dpdk", "queues", 2),
            )
            .to_toml();
        let t: toml::Table = text.parse().expect("valid TOML");
        let expected: toml::Table = r#"
            [[ports]]
            name = "in"
            kind = "dpdk"
            mac = "02:00:00:00:00:0a"
            dpdk = { device = "net_pcap0,rx_pcap=in.pcap", queues = 2 }
        "#
        .parse()
        .unwrap();
        assert_eq!(t, expected);
    }

    #[test]
    fn a_qos_section_alone_has_its_keys_at_the_top() {
        let text = QosToml::shaped(1_000_000)
            .class(ClassToml::new("be").weight(1))
            .to_toml();
        let t: toml::Table = text.parse().expect("valid TOML");
        let expected: toml::Table = r#"
            link_rate_bps = 1_000_000
            shaper = { rate_bps = 1_000_000 }
            [[classes]]
            name = "be"
            weight = 1
        "#
        .parse()
        .unwrap();
        assert_eq!(t, expected);
    }

    #[test]
    fn strings_are_escaped() {
        assert_eq!(quoted(r#"a"b\c"#), r#""a\"b\\c""#);
    }

    #[test]
    fn the_text_is_valid_toml_in_the_router_s_layout() {
        let text = RouterToml::new()
            .set("parse", "flow_key", quoted("5-tuple"))
            .port(PortToml::af_xdp("r0", "veth0").sub("af_xdp", "mode", quoted("native")))
            .port(
                PortToml::generator("g", "02:00:00:00:00:01").flow(
                    FlowToml::udp("f", "10.0.0.1", "10.1.0.1")
                        .count(2)
                        .dscp("ef")
                        .misbehaving(),
                ),
            )
            .route("10.1.0.0/16", "r0", None)
            .qos(QosToml::shaped(1_000_000).class(ClassToml::new("be").weight(1)))
            .raw("[metrics]\nflow_estimate = true")
            .to_toml();
        let t: toml::Table = text.parse().expect("valid TOML");
        let ports = t["ports"].as_array().unwrap();
        assert_eq!(ports[0]["af_xdp"]["mode"].as_str(), Some("native"));
        let flows = ports[1]["generator"]["flows"].as_array().unwrap();
        assert_eq!(flows[0]["misbehaving"].as_bool(), Some(true));
        assert_eq!(t["qos"]["shaper"]["rate_bps"].as_integer(), Some(1_000_000));
        assert_eq!(t["qos"]["classes"][0]["weight"].as_integer(), Some(1));
        assert_eq!(t["metrics"]["flow_estimate"].as_bool(), Some(true));
        assert!(t["routes"][0].get("next_hop_mac").is_none());
    }
}
