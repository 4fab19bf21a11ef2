//! ICMP errors through the whole forward path, in memory: pcap ports in, pcap ports out, on
//! the single-thread loop and on the threaded router. Each error type is checked byte by
//! byte where it matters (addresses, MACs, type / code, MTU, checksums read back by
//! etherparse), with the counters and the conservation identity.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use etherparse::{
    icmpv4::{DestUnreachableHeader, TimeExceededCode},
    icmpv6, Icmpv4Header, Icmpv4Type, Icmpv6Header, Icmpv6Type, NetSlice, PacketBuilder,
    SlicedPacket, TransportSlice,
};
use zl_control::Snapshot;
use zl_core::Nanos;
use zl_dataplane::icmp::{IcmpCounters, IcmpKind};
use zl_dataplane::{build, DropCause, FateCounters, NoObserver, RouterConfig, RouterView};
use zl_testkit::config::{quoted, ClassToml, PortToml, QosToml, RouterToml};
use zl_testkit::{pcap, scratch};

/// The trace's frames, this far apart.
const GAP: Duration = Duration::from_micros(100);

const HOST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x10];
const ROUTER_A: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
const HOST_V4: [u8; 4] = [10, 0, 1, 2];
const FAR_V4: [u8; 4] = [192, 168, 2, 9];
const HOST_V6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];
const FAR_V6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9];
const NOWHERE_V6: [u8; 16] = [0x20, 0x01, 0x0d, 0xb8, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 9];

/// Port `a`: the capture `in.pcap` in, its ICMP errors out to `a-out.pcap`; `address` is its
/// `address` key (a TOML value).
fn port_a(address: &str) -> PortToml {
    PortToml::pcap("a", "02:00:00:00:00:01", "in.pcap", "a-out.pcap").set("address", address)
}

/// Port `b`: the routes' way out, to `b-out.pcap`, with an MTU the big frames exceed.
fn port_b() -> PortToml {
    PortToml::pcap_writer("b", "02:00:00:00:00:02", "b-out.pcap")
        .set("address", quoted("10.0.2.1/24"))
        .set("mtu", 1400)
}

/// Ports `a` and `b`, the far networks routed out of `b`, one best-effort class behind a
/// 1 Gbit/s shaper.
fn config_with(a: PortToml, b: PortToml) -> RouterToml {
    RouterToml::new()
        .set("run", "duration_s", "1.0")
        .set("run", "drain_s", "1.0")
        .set("run", "seed", 1)
        .port(a)
        .port(b)
        .route("192.168.2.0/24", "b", Some("02:00:00:00:00:fe"))
        .route("2001:db8:2::/48", "b", Some("02:00:00:00:00:fe"))
        .qos(
            QosToml::new()
                .set("shaper", "{ rate_bps = 1_000_000_000 }")
                .class(ClassToml::new("be").weight(1).max_packets(100)),
        )
}

/// Port `a`'s addresses: an IPv4 and an IPv6 one, a source for the errors of both.
const A_ADDRESSES: &str = r#"["10.0.1.1/24", "2001:db8:1::1/64"]"#;

/// The config most tests run: `a` with [`A_ADDRESSES`] beside [`port_b`].
fn config_toml() -> RouterToml {
    config_with(port_a(A_ADDRESSES), port_b())
}

/// [`config_toml`], parsed.
fn config() -> RouterConfig {
    RouterConfig::from_toml(&config_toml().to_toml()).unwrap()
}

fn udp4(dst: [u8; 4], ttl: u8, payload: usize, df: bool) -> Vec<u8> {
    let mut f = Vec::new();
    PacketBuilder::ethernet2(HOST_MAC, ROUTER_A)
        .ipv4(HOST_V4, dst, ttl)
        .udp(40000, 33434)
        .write(&mut f, &vec![0x11; payload])
        .unwrap();
    if !df {
        f[14 + 6] &= !0x40;
        f[24..26].fill(0);
        let c = zl_wire::checksum::checksum(&f[14..34]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
    }
    f
}

fn udp6(dst: [u8; 16], hop: u8, payload: usize) -> Vec<u8> {
    let mut f = Vec::new();
    PacketBuilder::ethernet2(HOST_MAC, ROUTER_A)
        .ipv6(HOST_V6, dst, hop)
        .udp(40000, 33434)
        .write(&mut f, &vec![0x22; payload])
        .unwrap();
    f
}

/// The ICMP type of an error frame, its checksums checked by etherparse, and its quote.
fn icmp_of(frame: &[u8]) -> (Result<Icmpv4Type, Icmpv6Type>, Vec<u8>) {
    assert_eq!(frame[..6], HOST_MAC, "back to the previous hop");
    assert_eq!(frame[6..12], ROUTER_A, "from the ingress port's MAC");
    let p = SlicedPacket::from_ethernet(frame).unwrap();
    match (p.net, p.transport) {
        (Some(NetSlice::Ipv4(ip)), Some(TransportSlice::Icmpv4(m))) => {
            let h = ip.header().to_header();
            assert_eq!(h.calc_header_checksum(), h.header_checksum);
            assert_eq!(h.source, [10, 0, 1, 1], "from the ingress port's address");
            assert_eq!(h.destination, HOST_V4);
            let c = Icmpv4Header::with_checksum(m.icmp_type(), m.payload()).checksum;
            assert_eq!(c, m.checksum());
            (Ok(m.icmp_type()), m.payload().to_vec())
        }
        (Some(NetSlice::Ipv6(ip)), Some(TransportSlice::Icmpv6(m))) => {
            let h = ip.header();
            assert_eq!(
                h.source(),
                [0x20, 1, 0x0d, 0xb8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1]
            );
            assert_eq!(h.destination(), HOST_V6);
            let c = Icmpv6Header::with_checksum(
                m.icmp_type(),
                h.source(),
                h.destination(),
                m.payload(),
            )
            .unwrap()
            .checksum;
            assert_eq!(c, m.checksum());
            (Err(m.icmp_type()), m.payload().to_vec())
        }
        other => panic!("not an ICMP error: {other:?}"),
    }
}

/// One frame of each case, in this order.
fn cases() -> Vec<Vec<u8>> {
    vec![
        udp4(FAR_V4, 1, 32, true),           // Time Exceeded
        udp6(FAR_V6, 1, 32),                 // Time Exceeded (hop limit)
        udp4([172, 16, 0, 1], 64, 32, true), // Net Unreachable
        udp6(NOWHERE_V6, 64, 32),            // No route
        udp4(FAR_V4, 64, 1472, true),        // 1500 octets, DF: Fragmentation Needed
        udp6(FAR_V6, 64, 1452),              // 1500 octets: Packet Too Big
        udp4(FAR_V4, 64, 1472, false),       // 1500 octets without DF: forwarded as is
        udp4(FAR_V4, 64, 1372, true),        // exactly 1400: forwarded
        udp4([224, 0, 0, 9], 64, 32, true),  // multicast, no route: no error
    ]
}

fn check_outputs(dir: &Path, t: &FateCounters, icmp: &IcmpCounters, a_tx: u64) {
    let a = pcap::read_frames(&dir.join("a-out.pcap"));
    let b = pcap::read_frames(&dir.join("b-out.pcap"));
    assert_eq!(t.received, 9);
    assert_eq!(t.drops_of(DropCause::TtlExpired), 2);
    assert_eq!(t.drops_of(DropCause::NoRoute), 3);
    assert_eq!(t.drops_of(DropCause::TooBig), 2);
    assert_eq!(t.forwarded, 2);
    assert_eq!(b.len(), 2, "the DF-less 1500 and the 1400 went on");
    assert_eq!(b[0].len(), 1514);
    assert_eq!(b[1].len(), 1414);
    assert_eq!(icmp.sent_of(IcmpKind::TimeExceeded), 2);
    assert_eq!(icmp.sent_of(IcmpKind::Unreachable), 2);
    assert_eq!(icmp.sent_of(IcmpKind::TooBig), 2);
    assert_eq!(icmp.suppressed, 1, "no error about a multicast packet");
    assert_eq!(a.len(), 6);
    assert_eq!(a_tx, 6, "the errors are in the ingress port's tx counters");
    // The threaded router may interleave the two families; sort by the error's own bytes.
    let mut kinds: Vec<_> = a.iter().map(|f| icmp_of(f)).collect();
    kinds.sort_by_key(|(k, q)| (format!("{k:?}"), q.len()));
    let frames = cases();
    let want: Vec<(Result<Icmpv4Type, Icmpv6Type>, Vec<u8>)> = {
        let mut w = vec![
            (
                Ok(Icmpv4Type::TimeExceeded(
                    TimeExceededCode::TtlExceededInTransit,
                )),
                frames[0][14..].to_vec(),
            ),
            (
                Err(Icmpv6Type::TimeExceeded(
                    icmpv6::TimeExceededCode::HopLimitExceeded,
                )),
                frames[1][14..].to_vec(),
            ),
            (
                Ok(Icmpv4Type::DestinationUnreachable(
                    DestUnreachableHeader::Network,
                )),
                frames[2][14..].to_vec(),
            ),
            (
                Err(Icmpv6Type::DestinationUnreachable(
                    icmpv6::DestUnreachableCode::NoRoute,
                )),
                frames[3][14..].to_vec(),
            ),
            (
                Ok(Icmpv4Type::DestinationUnreachable(
                    DestUnreachableHeader::FragmentationNeeded { next_hop_mtu: 1400 },
                )),
                // 576 octets of IPv4 error: 548 of quote, TTL as it came.
                frames[4][14..14 + 548].to_vec(),
            ),
            (
                Err(Icmpv6Type::PacketTooBig { mtu: 1400 }),
                // 1280 octets of IPv6 error: 1232 of quote.
                frames[5][14..14 + 1232].to_vec(),
            ),
        ];
        w.sort_by_key(|(k, q)| (format!("{k:?}"), q.len()));
        w
    };
    assert_eq!(kinds, want);
}

#[test]
fn each_error_type_leaves_the_ingress_port_single_thread() {
    let dir = scratch("icmp-st");
    pcap::write_spaced(&dir.join("in.pcap"), &cases(), GAP);
    let cfg = config();
    let mut dp = build(&cfg, &dir).unwrap();
    let stop = AtomicBool::new(false);
    dp.run_virtual(
        Nanos::from_secs(1),
        Nanos::from_secs(1),
        &stop,
        Nanos::from_millis(100),
        &mut NoObserver,
    )
    .unwrap();
    let t = *dp.totals();
    assert_eq!(t.received, t.forwarded + t.dropped() + dp.queued());
    let a_tx = dp.port_counters()[0].1.tx_packets;
    check_outputs(&dir, &t, dp.icmp(), a_tx);
    // The table, the JSON and the metrics show them.
    let snap = Snapshot::take(&dp, dp.now());
    let table = zl_control::report::render(&snap);
    assert!(table.contains("icmp errors sent 6"), "{table}");
    let json = snap.to_json();
    assert!(json.contains("\"time_exceeded\": 2"), "{json}");
    let hub = zl_control::metrics::MetricsHub::new(&dp);
    hub.store(snap);
    let prom = hub.encode();
    assert!(
        prom.contains("zlrouter_icmp_sent_total{type=\"too_big\"} 2"),
        "{prom}"
    );
    assert!(
        prom.contains("zlrouter_icmp_not_sent_total{reason=\"suppressed\"} 1"),
        "{prom}"
    );
}

#[test]
fn each_error_type_leaves_the_ingress_port_threaded() {
    let dir = scratch("icmp-mt");
    pcap::write_spaced(&dir.join("in.pcap"), &cases(), GAP);
    let cfg = config();
    let mut r = zl_dataplane::build_threaded(&cfg, &dir, &mut |_, _| Ok(None), 2).unwrap();
    let t = AtomicU64::new(0);
    let clock = move || Nanos(t.fetch_add(1_000, Ordering::Relaxed));
    let stop = AtomicBool::new(false);
    r.run(
        &clock,
        &stop,
        Nanos::from_secs(1),
        Nanos::from_millis(100),
        &mut NoObserver,
    )
    .unwrap();
    let totals = r.totals();
    assert_eq!(totals.received, totals.forwarded + totals.dropped());
    check_outputs(&dir, &totals, &r.icmp(), r.port_counters(0).tx_packets);
}

#[test]
fn a_burst_to_one_host_is_limited_to_six() {
    let dir = scratch("icmp-limit");
    let frames: Vec<Vec<u8>> = (0..20).map(|_| udp4(FAR_V4, 1, 32, true)).collect();
    pcap::write_spaced(&dir.join("in.pcap"), &frames, GAP);
    let cfg = config();
    let mut dp = build(&cfg, &dir).unwrap();
    let stop = AtomicBool::new(false);
    dp.run_virtual(
        Nanos::from_secs(1),
        Nanos::from_secs(1),
        &stop,
        Nanos::from_millis(100),
        &mut NoObserver,
    )
    .unwrap();
    // 20 frames 100 µs apart: the host's bucket of 6 and no refill (1 s per token).
    assert_eq!(dp.totals().drops_of(DropCause::TtlExpired), 20);
    assert_eq!(dp.icmp().sent_of(IcmpKind::TimeExceeded), 6);
    assert_eq!(dp.icmp().rate_limited, 14);
    assert_eq!(pcap::read_frames(&dir.join("a-out.pcap")).len(), 6);
}

#[test]
fn no_address_means_no_error_and_icmp_can_be_turned_off() {
    let dir = scratch("icmp-off");
    pcap::write_spaced(&dir.join("in.pcap"), &cases(), GAP);
    let no_addr = config_with(port_a(&quoted("2001:db8:1::1/64")), port_b()).to_toml();
    let cfg = RouterConfig::from_toml(&no_addr).unwrap();
    let mut dp = build(&cfg, &dir).unwrap();
    let stop = AtomicBool::new(false);
    dp.run_virtual(
        Nanos::from_secs(1),
        Nanos::from_secs(1),
        &stop,
        Nanos::from_millis(100),
        &mut NoObserver,
    )
    .unwrap();
    // The three IPv4 errors have no source; the three IPv6 ones go.
    assert_eq!(dp.icmp().no_source_address, 3);
    assert_eq!(dp.icmp().sent_total(), 3);

    let off = config_toml().set("icmp", "enabled", false).to_toml();
    let cfg = RouterConfig::from_toml(&off).unwrap();
    let mut dp = build(&cfg, &dir).unwrap();
    dp.run_virtual(
        Nanos::from_secs(1),
        Nanos::from_secs(1),
        &stop,
        Nanos::from_millis(100),
        &mut NoObserver,
    )
    .unwrap();
    assert_eq!(dp.icmp().sent_total(), 0);
    assert_eq!(dp.totals().drops_of(DropCause::TooBig), 2, "still dropped");
    assert!(pcap::read_frames(&dir.join("a-out.pcap")).is_empty());
}

#[test]
fn bad_addresses_and_mtus_are_rejected_by_key() {
    let bad = config_with(
        port_a(A_ADDRESSES),
        port_b().set("address", quoted("10.0.2.1")),
    )
    .to_toml();
    let e = RouterConfig::from_toml(&bad)
        .unwrap()
        .validate()
        .unwrap_err();
    assert!(e.to_string().contains("ports[1].address[0]"), "{e}");
    let bad = config_with(port_a(A_ADDRESSES), port_b().set("mtu", 20)).to_toml();
    let e = RouterConfig::from_toml(&bad)
        .unwrap()
        .validate()
        .unwrap_err();
    assert!(e.to_string().contains("ports[1].mtu"), "{e}");
}

/// `mac` may be left out on an af-xdp port only (the interface's own MAC is then the router's
/// MAC on the port, read when the port opens); on any other kind it is an error naming it.
#[test]
fn mac_may_be_left_out_only_on_af_xdp_ports() {
    let no_mac = config_with(port_a(A_ADDRESSES), port_b().without("mac")).to_toml();
    let e = RouterConfig::from_toml(&no_mac)
        .unwrap()
        .validate()
        .unwrap_err();
    assert!(e.to_string().contains("ports[1].mac"), "{e}");
    let af_xdp = config_with(
        port_a(A_ADDRESSES),
        PortToml::af_xdp("b", "b")
            .set("address", quoted("10.0.2.1/24"))
            .set("mtu", 1400),
    )
    .to_toml();
    assert_ne!(af_xdp, no_mac);
    RouterConfig::from_toml(&af_xdp)
        .unwrap()
        .validate()
        .expect("an af-xdp port takes its interface's MAC");
}
