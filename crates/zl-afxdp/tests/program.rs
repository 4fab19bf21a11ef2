//! The XDP program's decision for every kind of frame, asked of the kernel itself: the
//! program is loaded (verifier included) and run on each frame with `BPF_PROG_TEST_RUN`
//! (needs root; skips otherwise, fails with ZLR_REQUIRE_ENV set).
//!
//! The probe's program answers XDP_DROP where the service program redirects to the AF_XDP
//! socket (transit) and XDP_PASS where the kernel stack gets the frame.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use zl_afxdp::program::{XDP_DROP, XDP_PASS};
use zl_afxdp::ProgramProbe;
use zl_testkit::netns::{is_root, skip};

const TRANSIT: i32 = XDP_DROP;
const KERNEL: i32 = XDP_PASS;

const ROUTER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
const HOST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];

fn probe(test: &str) -> Option<ProgramProbe> {
    if !is_root() {
        skip(
            test,
            "needs root (bpf(BPF_PROG_LOAD) and BPF_PROG_TEST_RUN)",
        );
        return None;
    }
    Some(ProgramProbe::load().expect("the verifier accepts the program"))
}

fn eth(dst: [u8; 6], ethertype: u16) -> Vec<u8> {
    let mut f = Vec::with_capacity(128);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&HOST_MAC);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

/// An IPv4/UDP frame to `dst` (checksums are not the program's business).
fn v4(dst_mac: [u8; 6], dst: Ipv4Addr) -> Vec<u8> {
    let mut f = eth(dst_mac, 0x0800);
    f.extend_from_slice(&[0x45, 0, 0, 28, 0, 0, 0x40, 0, 64, 17, 0, 0]);
    f.extend_from_slice(&[10, 0, 1, 2]);
    f.extend_from_slice(&dst.octets());
    f.extend_from_slice(&[0x30, 0x39, 0x30, 0x39, 0, 8, 0, 0]);
    f.resize(60, 0);
    f
}

/// An IPv6 frame to `dst` with next header `nh` and `payload`.
fn v6(dst_mac: [u8; 6], dst: Ipv6Addr, nh: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = eth(dst_mac, 0x86dd);
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    f.extend_from_slice(&[nh, 64]);
    f.extend_from_slice(&"2001:db8:1::2".parse::<Ipv6Addr>().unwrap().octets());
    f.extend_from_slice(&dst.octets());
    f.extend_from_slice(payload);
    f
}

fn udp6(dst_mac: [u8; 6], dst: &str) -> Vec<u8> {
    v6(
        dst_mac,
        dst.parse().unwrap(),
        17,
        &[0x30, 0x39, 0x30, 0x39, 0, 8, 0, 0],
    )
}

fn icmp6(dst: &str, ty: u8) -> Vec<u8> {
    v6(
        ROUTER_MAC,
        dst.parse().unwrap(),
        58,
        &[ty, 0, 0, 0, 0, 0, 0, 0],
    )
}

#[test]
fn transit_unicast_goes_to_the_socket_and_the_rest_to_the_kernel() {
    let Some(p) = probe("transit_unicast_goes_to_the_socket_and_the_rest_to_the_kernel") else {
        return;
    };
    let cases: Vec<(&str, Vec<u8>, i32)> = vec![
        (
            "IPv4 transit",
            v4(ROUTER_MAC, Ipv4Addr::new(10, 0, 2, 2)),
            TRANSIT,
        ),
        ("IPv6 transit", udp6(ROUTER_MAC, "2001:db8:2::2"), TRANSIT),
        (
            "IPv6 transit echo request",
            icmp6("2001:db8:2::2", 128),
            TRANSIT,
        ),
        (
            "IPv6 transit ICMPv6 type 138",
            icmp6("2001:db8:2::2", 138),
            TRANSIT,
        ),
        (
            "ARP request (broadcast)",
            {
                let mut f = eth([0xff; 6], 0x0806);
                f.resize(60, 0);
                f
            },
            KERNEL,
        ),
        (
            "ARP reply (unicast)",
            {
                let mut f = eth(ROUTER_MAC, 0x0806);
                f.resize(60, 0);
                f
            },
            KERNEL,
        ),
        (
            "LLDP",
            {
                let mut f = eth([0x01, 0x80, 0xc2, 0, 0, 0x0e], 0x88cc);
                f.resize(60, 0);
                f
            },
            KERNEL,
        ),
        (
            "VLAN-tagged",
            {
                let mut f = eth(ROUTER_MAC, 0x8100);
                f.resize(60, 0);
                f
            },
            KERNEL,
        ),
        (
            "IPv4 multicast MAC",
            v4([0x01, 0, 0x5e, 0, 0, 5], Ipv4Addr::new(224, 0, 0, 5)),
            KERNEL,
        ),
        (
            "IPv4 multicast in a unicast frame",
            v4(ROUTER_MAC, Ipv4Addr::new(239, 1, 1, 1)),
            KERNEL,
        ),
        (
            "IPv4 limited broadcast",
            v4([0xff; 6], Ipv4Addr::BROADCAST),
            KERNEL,
        ),
        (
            "IPv6 multicast",
            udp6([0x33, 0x33, 0, 0, 0, 1], "ff02::1"),
            KERNEL,
        ),
        (
            "IPv6 multicast in a unicast frame",
            udp6(ROUTER_MAC, "ff0e::1"),
            KERNEL,
        ),
        ("IPv6 link-local", udp6(ROUTER_MAC, "fe80::1"), KERNEL),
        (
            "IPv6 fec0:: is not link-local",
            udp6(ROUTER_MAC, "fec0::1"),
            TRANSIT,
        ),
        (
            "NDP neighbour solicitation (unicast NUD probe)",
            icmp6("2001:db8:2::2", 135),
            KERNEL,
        ),
        (
            "NDP neighbour advertisement",
            icmp6("2001:db8:2::2", 136),
            KERNEL,
        ),
        (
            "NDP router solicitation",
            icmp6("2001:db8:2::2", 133),
            KERNEL,
        ),
        ("NDP redirect", icmp6("2001:db8:2::2", 137), KERNEL),
        // (A frame shorter than the Ethernet header cannot be test-run: the kernel refuses
        // it with EINVAL; the program's first bounds check covers it.)
        ("Ethernet header alone", eth(ROUTER_MAC, 0x0800), KERNEL),
        (
            "truncated IPv4 header",
            v4(ROUTER_MAC, Ipv4Addr::new(10, 0, 2, 2))[..30].to_vec(),
            KERNEL,
        ),
        (
            "truncated IPv6 header",
            udp6(ROUTER_MAC, "2001:db8:2::2")[..50].to_vec(),
            KERNEL,
        ),
        (
            "ICMPv6 without its type byte",
            v6(ROUTER_MAC, "2001:db8:2::2".parse().unwrap(), 58, &[]),
            KERNEL,
        ),
        (
            "IPv4 EtherType, version 6",
            {
                let mut f = v4(ROUTER_MAC, Ipv4Addr::new(10, 0, 2, 2));
                f[14] = 0x65;
                f
            },
            KERNEL,
        ),
    ];
    for (what, frame, want) in &cases {
        let got = p
            .run(frame)
            .unwrap_or_else(|e| panic!("test run of {what}: {e}"));
        assert_eq!(got, *want, "{what}");
    }
}

#[test]
fn the_routers_own_addresses_go_to_the_kernel_while_they_are_its_own() {
    let Some(p) = probe("the_routers_own_addresses_go_to_the_kernel_while_they_are_its_own") else {
        return;
    };
    let mine4 = Ipv4Addr::new(10, 0, 1, 1);
    let bcast4 = Ipv4Addr::new(10, 0, 1, 255);
    let mine6: Ipv6Addr = "2001:db8:1::1".parse().unwrap();
    let to4 = v4(ROUTER_MAC, mine4);
    let to_bcast = v4(ROUTER_MAC, bcast4);
    let to6 = udp6(ROUTER_MAC, "2001:db8:1::1");
    let ping6 = icmp6("2001:db8:1::1", 128);
    let neighbour4 = v4(ROUTER_MAC, Ipv4Addr::new(10, 0, 1, 2));
    for f in [&to4, &to_bcast, &to6, &ping6, &neighbour4] {
        assert_eq!(p.run(f).unwrap(), TRANSIT, "before the addresses are known");
    }
    p.local.insert(IpAddr::V4(mine4)).unwrap();
    p.local.insert(IpAddr::V4(bcast4)).unwrap();
    p.local.insert(IpAddr::V6(mine6)).unwrap();
    for f in [&to4, &to_bcast, &to6, &ping6] {
        assert_eq!(
            p.run(f).unwrap(),
            KERNEL,
            "one of the router's own addresses"
        );
    }
    assert_eq!(
        p.run(&neighbour4).unwrap(),
        TRANSIT,
        "a neighbour's address is transit"
    );
    p.local.remove(IpAddr::V4(mine4)).unwrap();
    p.local.remove(IpAddr::V6(mine6)).unwrap();
    p.local
        .remove(IpAddr::V6(mine6))
        .expect("removing twice is no error");
    assert_eq!(p.run(&to4).unwrap(), TRANSIT);
    assert_eq!(p.run(&to6).unwrap(), TRANSIT);
    assert_eq!(
        p.run(&to_bcast).unwrap(),
        KERNEL,
        "the broadcast address stays"
    );
}
