//! The ICMP errors of `zl_wire::icmp`: a pinned byte vector, and every message read back by
//! etherparse (an independent parser) with its checksums recomputed there.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use etherparse::{
    icmpv4::{DestUnreachableHeader, TimeExceededCode},
    icmpv6::DestUnreachableCode,
    Icmpv4Header, Icmpv4Type, Icmpv6Header, Icmpv6Type, NetSlice, PacketBuilder, SlicedPacket,
    TransportSlice,
};
use proptest::prelude::*;
use zl_wire::icmp::{self, IcmpBuildError, IcmpError};
use zl_wire::{parse, vectors, MacAddr, ParseConfig};

const ROUTER_MAC: MacAddr = MacAddr([0x02, 0, 0, 0, 0, 0xaa]);
const ROUTER_V4: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 1, 1));
const ROUTER_V6: IpAddr = IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, 0xff));

/// Time Exceeded about `vectors::IPV4_TCP` (10.0.0.1 -> 192.168.1.2, TTL 64) from 10.0.1.1,
/// ident 0x0102: the quote is the 40-octet IP packet without the frame's 6 octets of padding.
/// Decoded by `tshark` (`Time-to-live exceeded (Time to live exceeded in transit)`, checksum
/// `[correct]`, IP header checksum `[correct]`).
const TIME_EXCEEDED_IPV4_TCP: [u8; 82] = [
    // Ethernet: back to 02:..:02 from the router, IPv4.
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0xaa, 0x08, 0x00,
    // IPv4: TOS 0xc0, length 68, ident 0x0102, TTL 64, ICMP, 10.0.1.1 -> 10.0.0.1.
    0x45, 0xc0, 0x00, 0x44, 0x01, 0x02, 0x00, 0x00, 0x40, 0x01, 0x63, 0xf6, 0x0a, 0x00, 0x01, 0x01,
    0x0a, 0x00, 0x00, 0x01, //
    // ICMP 11 / 0, checksum, unused.
    0x0b, 0x00, 0xc0, 0xc5, 0x00, 0x00, 0x00, 0x00, //
    // The quote: the offending IP packet as it arrived.
    0x45, 0x2a, 0x00, 0x28, 0x12, 0x34, 0x40, 0x00, 0x40, 0x06, 0x5c, 0xc7, 0x0a, 0x00, 0x00, 0x01,
    0xc0, 0xa8, 0x01, 0x02, 0x30, 0x39, 0x00, 0x50, 0x01, 0x02, 0x03, 0x04, 0x0a, 0x0b, 0x0c, 0x0d,
    0x50, 0x10, 0xff, 0xff, 0x99, 0x82, 0x00, 0x00,
];

fn build(frame: &[u8], error: IcmpError, src: IpAddr) -> Result<Vec<u8>, IcmpBuildError> {
    let info = parse(frame, &ParseConfig::default()).expect("test frame parses");
    let mut out = vec![0u8; 2048];
    let len = icmp::write_error(frame, &info, error, src, ROUTER_MAC, 0x0102, &mut out)?;
    out.truncate(len);
    Ok(out)
}

/// Reads `frame` with etherparse, checks the IPv4 header checksum (when IPv4) and the ICMP
/// checksum recomputed there, and returns the ICMP type with the quoted payload.
fn read_back(frame: &[u8]) -> (Result<Icmpv4Type, Icmpv6Type>, Vec<u8>) {
    let p = SlicedPacket::from_ethernet(frame).expect("etherparse reads the error");
    match (p.net, p.transport) {
        (Some(NetSlice::Ipv4(ip)), Some(TransportSlice::Icmpv4(m))) => {
            let h = ip.header().to_header();
            assert_eq!(h.calc_header_checksum(), h.header_checksum, "IPv4 checksum");
            assert!(!h.dont_fragment);
            assert_eq!(h.time_to_live, 64);
            let want = Icmpv4Header::with_checksum(m.icmp_type(), m.payload()).checksum;
            assert_eq!(m.checksum(), want, "ICMPv4 checksum");
            (Ok(m.icmp_type()), m.payload().to_vec())
        }
        (Some(NetSlice::Ipv6(ip)), Some(TransportSlice::Icmpv6(m))) => {
            let h = ip.header();
            let want = Icmpv6Header::with_checksum(
                m.icmp_type(),
                h.source(),
                h.destination(),
                m.payload(),
            )
            .unwrap()
            .checksum;
            assert_eq!(m.checksum(), want, "ICMPv6 checksum");
            assert_eq!(h.hop_limit(), 64);
            (Err(m.icmp_type()), m.payload().to_vec())
        }
        other => panic!("not an ICMP error: {other:?}"),
    }
}

fn udp4(payload: usize, dst: [u8; 4]) -> Vec<u8> {
    let mut f = Vec::new();
    PacketBuilder::ethernet2([2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 1])
        .ipv4([10, 0, 0, 1], dst, 9)
        .udp(4000, 33434)
        .write(&mut f, &vec![0x5a; payload])
        .unwrap();
    f
}

fn udp6(payload: usize) -> Vec<u8> {
    let mut f = Vec::new();
    let mut src = [0u8; 16];
    src[..4].copy_from_slice(&[0x20, 0x01, 0x0d, 0xb8]);
    src[15] = 1;
    let mut dst = src;
    dst[15] = 2;
    PacketBuilder::ethernet2([2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 1])
        .ipv6(src, dst, 9)
        .udp(4000, 33434)
        .write(&mut f, &vec![0xa5; payload])
        .unwrap();
    f
}

#[test]
fn time_exceeded_matches_the_pinned_bytes() {
    let out = build(&vectors::IPV4_TCP, IcmpError::TimeExceeded, ROUTER_V4).unwrap();
    assert_eq!(out, TIME_EXCEEDED_IPV4_TCP);
    let (ty, quote) = read_back(&out);
    assert_eq!(
        ty,
        Ok(Icmpv4Type::TimeExceeded(
            TimeExceededCode::TtlExceededInTransit
        ))
    );
    assert_eq!(quote, vectors::IPV4_TCP[14..54]);
}

#[test]
fn ipv4_errors_read_back_with_their_codes_and_mtu() {
    let frame = udp4(100, [192, 168, 1, 2]);
    let out = build(&frame, IcmpError::NoRoute, ROUTER_V4).unwrap();
    assert_eq!(
        read_back(&out).0,
        Ok(Icmpv4Type::DestinationUnreachable(
            DestUnreachableHeader::Network
        ))
    );
    let out = build(&frame, IcmpError::TooBig { mtu: 1400 }, ROUTER_V4).unwrap();
    let (ty, quote) = read_back(&out);
    assert_eq!(
        ty,
        Ok(Icmpv4Type::DestinationUnreachable(
            DestUnreachableHeader::FragmentationNeeded { next_hop_mtu: 1400 }
        ))
    );
    assert_eq!(quote, frame[14..]);
    // Addressed back: MACs swapped to the previous hop, IP to the packet's source.
    assert_eq!(out[..6], frame[6..12]);
    assert_eq!(out[6..12], ROUTER_MAC.0);
    assert_eq!(out[26..30], [10, 0, 1, 1]);
    assert_eq!(out[30..34], [10, 0, 0, 1]);
}

#[test]
fn ipv6_errors_read_back_with_pseudo_header_checksums() {
    let frame = udp6(100);
    let out = build(&frame, IcmpError::TimeExceeded, ROUTER_V6).unwrap();
    assert_eq!(
        read_back(&out).0,
        Err(Icmpv6Type::TimeExceeded(
            etherparse::icmpv6::TimeExceededCode::HopLimitExceeded
        ))
    );
    let out = build(&frame, IcmpError::NoRoute, ROUTER_V6).unwrap();
    assert_eq!(
        read_back(&out).0,
        Err(Icmpv6Type::DestinationUnreachable(
            DestUnreachableCode::NoRoute
        ))
    );
    let out = build(&frame, IcmpError::TooBig { mtu: 1400 }, ROUTER_V6).unwrap();
    let (ty, quote) = read_back(&out);
    assert_eq!(ty, Err(Icmpv6Type::PacketTooBig { mtu: 1400 }));
    assert_eq!(quote, frame[14..]);
    let ext = build(
        &vectors::IPV6_EXT_CHAIN_TCP,
        IcmpError::TimeExceeded,
        ROUTER_V6,
    )
    .unwrap();
    assert_eq!(read_back(&ext).1, vectors::IPV6_EXT_CHAIN_TCP[14..]);
}

#[test]
fn quotes_stop_at_576_and_1280_octets() {
    let out = build(
        &udp4(1472, [192, 168, 1, 2]),
        IcmpError::TooBig { mtu: 1400 },
        ROUTER_V4,
    )
    .unwrap();
    assert_eq!(out.len(), 14 + 576);
    assert_eq!(read_back(&out).1.len(), 576 - 28);
    let out = build(&udp6(1452), IcmpError::TooBig { mtu: 1280 }, ROUTER_V6).unwrap();
    assert_eq!(out.len(), 14 + 1280);
    assert_eq!(read_back(&out).1.len(), 1280 - 48);
}

#[test]
fn vlan_tags_stay_and_ipv4_options_are_quoted() {
    let frame = vectors::VLAN_IPV4_OPTIONS_UDP;
    let out = build(&frame, IcmpError::TimeExceeded, ROUTER_V4).unwrap();
    assert_eq!(out[12..18], frame[12..18], "802.1Q tag and EtherType kept");
    let p = SlicedPacket::from_ethernet(&out).unwrap();
    let Some(TransportSlice::Icmpv4(m)) = p.transport else {
        panic!("ICMPv4 expected")
    };
    assert_eq!(m.payload(), &frame[18..]);
    let info = parse(&out, &ParseConfig::default()).unwrap();
    assert_eq!(info.eth.outer_vlan.map(|t| t.vid()), Some(100));
    assert_eq!(icmp::icmp_type_code(&out, &info), Some((11, 0)));
}

#[test]
fn bad_requests_are_errors() {
    assert_eq!(
        build(&vectors::IPV4_TCP, IcmpError::NoRoute, ROUTER_V6),
        Err(IcmpBuildError::FamilyMismatch)
    );
    let info = parse(&vectors::IPV4_TCP, &ParseConfig::default()).unwrap();
    let mut small = [0u8; 60];
    small.copy_from_slice(&vectors::IPV4_TCP);
    assert_eq!(
        icmp::write_error_in_place(
            &mut small,
            60,
            &info,
            IcmpError::NoRoute,
            ROUTER_V4,
            ROUTER_MAC,
            0
        ),
        Err(IcmpBuildError::NoRoom { room: 60 })
    );
    assert_eq!(
        icmp::write_error_in_place(
            &mut small,
            30,
            &info,
            IcmpError::NoRoute,
            ROUTER_V4,
            ROUTER_MAC,
            0
        ),
        Err(IcmpBuildError::FrameMismatch)
    );
}

#[test]
fn no_errors_about_errors_fragments_or_groups() {
    let cfg = ParseConfig::default();
    let allowed = |f: &[u8]| icmp::error_allowed(f, &parse(f, &cfg).unwrap());
    assert!(allowed(&vectors::IPV4_TCP));
    assert!(allowed(&udp6(10)));
    assert!(!allowed(&vectors::QINQ_IPV4_LATER_FRAGMENT));
    assert!(!allowed(&vectors::IPV6_LATER_FRAGMENT));
    // An error about an error, in both families.
    let err4 = build(&vectors::IPV4_TCP, IcmpError::TimeExceeded, ROUTER_V4).unwrap();
    assert!(!allowed(&err4));
    let err6 = build(&udp6(10), IcmpError::NoRoute, ROUTER_V6).unwrap();
    assert!(!allowed(&err6));
    // Echo requests are not errors.
    let mut echo = Vec::new();
    PacketBuilder::ethernet2([2, 0, 0, 0, 0, 2], [2, 0, 0, 0, 0, 1])
        .ipv4([10, 0, 0, 1], [192, 168, 1, 2], 1)
        .icmpv4_echo_request(1, 1)
        .write(&mut echo, &[0; 8])
        .unwrap();
    assert!(allowed(&echo));
    // Multicast and broadcast destinations, a broadcast MAC.
    assert!(!allowed(&udp4(8, [224, 0, 0, 9])));
    assert!(!allowed(&udp4(8, [255, 255, 255, 255])));
    let mut bcast = udp4(8, [192, 168, 1, 2]);
    bcast[..6].fill(0xff);
    assert!(!allowed(&bcast));
}

#[test]
fn dont_fragment_is_read_from_the_header() {
    let cfg = ParseConfig::default();
    let f = vectors::IPV4_TCP;
    assert!(icmp::ipv4_dont_fragment(&f, &parse(&f, &cfg).unwrap()));
    let f = vectors::VLAN_IPV4_OPTIONS_UDP;
    assert!(!icmp::ipv4_dont_fragment(&f, &parse(&f, &cfg).unwrap()));
}

proptest! {
    /// Any parsed frame, any error: no panic, and a built error parses back as ICMP from the
    /// router with its checksums right.
    #[test]
    fn any_parsed_frame_builds_a_valid_error(
        bytes in proptest::collection::vec(any::<u8>(), 0..1600),
        v6 in any::<bool>(),
        kind in 0u8..3,
        room in 0usize..2048,
    ) {
        let mut frame = if v6 { udp6(0) } else { udp4(0, [192, 168, 1, 2]) };
        frame.extend_from_slice(&bytes);
        // Half the frames keep a valid length field; the rest are any bytes after the header.
        let cfg = ParseConfig::default();
        let Ok(info) = parse(&frame, &cfg) else { return Ok(()) };
        let error = [IcmpError::TimeExceeded, IcmpError::NoRoute, IcmpError::TooBig { mtu: 1280 }]
            [kind as usize];
        let src = if v6 { ROUTER_V6 } else { ROUTER_V4 };
        let mut out = vec![0u8; room];
        if let Ok(len) = icmp::write_error(&frame, &info, error, src, ROUTER_MAC, 7, &mut out) {
            let (_, quote) = read_back(&out[..len]);
            prop_assert_eq!(&quote[..], &frame[14..14 + quote.len()]);
        }
    }
}

#[test]
fn host_unreachable_has_its_own_codes() {
    let out = build(
        &udp4(20, [192, 168, 1, 2]),
        IcmpError::HostUnreachable,
        ROUTER_V4,
    )
    .unwrap();
    assert_eq!(
        read_back(&out).0,
        Ok(Icmpv4Type::DestinationUnreachable(
            DestUnreachableHeader::Host
        ))
    );
    let out = build(&udp6(20), IcmpError::HostUnreachable, ROUTER_V6).unwrap();
    assert_eq!(
        read_back(&out).0,
        Err(Icmpv6Type::DestinationUnreachable(
            DestUnreachableCode::Address
        ))
    );
}
