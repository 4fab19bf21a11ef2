//! Two routers facing each other over the two ends of a veth pair ([`crate::netns::veth_pair`]),
//! each on an AF_XDP port: the sender's config and the receiver's, as the AF_XDP end-to-end
//! and service-capability tests run them.

use crate::config::{quoted, ClassToml, FlowToml, PortToml, QosToml, RouterToml};

/// Both routers' egress: a 1 Gbit/s link, one best-effort class.
pub fn gigabit_be() -> QosToml {
    QosToml::new()
        .set("link_rate_bps", 1_000_000_000)
        .class(ClassToml::new("be").weight(1))
}

/// The receiving router on veth end `ifname` (port `a`, MAC 02:00:00:00:0a:0a): what its
/// AF_XDP port receives (the sender's 10.77.1.0/24 traffic) is routed to `out`, a port named
/// "out" (a pcap writer, a sink).
pub fn receiver(ifname: &str, out: PortToml) -> String {
    RouterToml::new()
        .port(PortToml::af_xdp("a", ifname).set("mac", quoted("02:00:00:00:0a:0a")))
        .port(out)
        .route("10.77.1.0/24", "out", Some("02:00:00:00:0a:fe"))
        .qos(gigabit_be())
        .to_toml()
}

/// The sending router on veth end `ifname` (port `b`): 0.2 s of 800 kbit/s of 100-byte frames
/// (200 frames) out of its AF_XDP port, to the receiver's MAC.
pub fn sender(ifname: &str) -> String {
    RouterToml::new()
        .set("run", "duration_s", 0.2)
        .port(
            PortToml::generator("gen", "02:00:00:00:0b:01").flow(
                FlowToml::udp("probe", "10.77.0.2", "10.77.1.1")
                    .rate_bps(800_000)
                    .size(100),
            ),
        )
        .port(PortToml::af_xdp("b", ifname).set("mac", quoted("02:00:00:00:0b:0b")))
        .route("10.77.1.0/24", "b", Some("02:00:00:00:0a:0a"))
        .qos(gigabit_be())
        .to_toml()
}
