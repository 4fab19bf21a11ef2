//! The sample frames of `zl_wire::vectors`, parsed field by field, rewritten, and broken in
//! every way the parser must reject.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use zl_wire::vectors::*;
use zl_wire::*;

fn cfg() -> ParseConfig {
    ParseConfig::default()
}

fn v6(last: u16) -> IpAddr {
    IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, 0, 0, 0, 0, last))
}

fn ipv4_header_verifies(frame: &[u8], info: &PacketInfo) -> bool {
    checksum::verifies(&frame[info.l3_offset..info.l4_offset])
}

#[test]
fn ipv4_tcp_fields() {
    let info = parse(&IPV4_TCP, &cfg()).unwrap();
    assert_eq!(
        ethernet::dst_mac(&IPV4_TCP),
        Some(MacAddr([2, 0, 0, 0, 0, 1]))
    );
    assert_eq!(
        ethernet::src_mac(&IPV4_TCP),
        Some(MacAddr([2, 0, 0, 0, 0, 2]))
    );
    assert_eq!(info.eth.outer_vlan, None);
    assert_eq!(info.l3_offset, 14);
    assert_eq!(info.ip_version, IpVersion::V4);
    assert_eq!(info.ip_header_len, 20);
    assert_eq!(info.ip_len, 40);
    assert_eq!(info.ip_end(), 54, "the 6 padding octets are not IP");
    assert_eq!(info.l4_offset, 34);
    assert_eq!(info.protocol, 6);
    assert_eq!(info.src, IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)));
    assert_eq!(info.dst, IpAddr::V4(Ipv4Addr::new(192, 168, 1, 2)));
    assert_eq!(
        info.ports,
        Some(Ports {
            src: 12345,
            dst: 80
        })
    );
    assert_eq!(info.dscp(), 10);
    assert_eq!(info.ecn(), Ecn::Ect0);
    assert_eq!(info.ttl, 64);
    assert_eq!(info.fragment, Fragment::None);
    assert_eq!(info.cc_ext, None);
    assert_eq!(info.flow, info.flow_key().hash(FlowKeyKind::SrcDst, 0));
}

#[test]
fn vlan_ipv4_options_udp_fields() {
    let info = parse(&VLAN_IPV4_OPTIONS_UDP, &cfg()).unwrap();
    let tag = info.eth.outer_vlan.unwrap();
    assert_eq!(
        (tag.tpid, tag.pcp(), tag.dei(), tag.vid()),
        (0x8100, 5, false, 100)
    );
    assert_eq!(info.eth.inner_vlan, None);
    assert_eq!(info.l3_offset, 18);
    assert_eq!(info.ip_header_len, 24);
    assert_eq!(info.l4_offset, 42);
    assert_eq!(info.ip_len, 24 + 12);
    assert_eq!(info.protocol, 17);
    assert_eq!(info.ports, Some(Ports { src: 5353, dst: 53 }));
    assert_eq!(info.ecn(), Ecn::NotEct);
    assert_eq!(info.ttl, 1);
    assert_eq!(info.src, IpAddr::V4(Ipv4Addr::new(172, 16, 0, 9)));
}

#[test]
fn qinq_later_fragment_fields() {
    let info = parse(&QINQ_IPV4_LATER_FRAGMENT, &cfg()).unwrap();
    let outer = info.eth.outer_vlan.unwrap();
    let inner = info.eth.inner_vlan.unwrap();
    assert_eq!((outer.tpid, outer.vid()), (0x88a8, 10));
    assert_eq!((inner.tpid, inner.dei(), inner.vid()), (0x8100, true, 20));
    assert_eq!(info.l3_offset, 22);
    assert_eq!(info.fragment, Fragment::Later);
    assert_eq!(info.protocol, 17);
    assert_eq!(info.ports, None, "a later fragment has no UDP header");
    assert_eq!(info.dscp(), 46);
    assert_eq!(info.ecn(), Ecn::Ect1);
}

#[test]
fn ipv6_cc_ext_udp_fields() {
    let info = parse(&IPV6_CC_EXT_UDP, &cfg()).unwrap();
    assert_eq!(info.ip_version, IpVersion::V6);
    assert_eq!(info.ip_header_len, 40);
    assert_eq!(info.ip_len, 40 + 8 + 8 + 8);
    assert_eq!(info.l4_offset, 14 + 40 + 8);
    assert_eq!(info.protocol, 17);
    assert_eq!(info.src, v6(1));
    assert_eq!(info.dst, v6(2));
    assert_eq!(
        info.ports,
        Some(Ports {
            src: 4000,
            dst: 5001
        })
    );
    assert_eq!(info.dscp(), 46);
    assert_eq!(info.ecn(), Ecn::Ect1);
    assert_eq!(info.ttl, 64);
    let ext = info.cc_ext.unwrap();
    assert_eq!(ext.offset, 54);
    assert!(!ext.ecn && ext.ci);
    assert_eq!(ext.weight, 4);
}

#[test]
fn ipv6_ext_chain_fields() {
    let info = parse(&IPV6_EXT_CHAIN_TCP, &cfg()).unwrap();
    // 8 (hop-by-hop) + 8 (destination options) + 8 (routing) + 8 (fragment) + 24 (AH) + 8 (cc)
    assert_eq!(info.l4_offset, 14 + 40 + 64);
    assert_eq!(info.protocol, 6);
    assert_eq!(info.fragment, Fragment::None, "atomic fragment (RFC 6946)");
    assert_eq!(
        info.ports,
        Some(Ports {
            src: 443,
            dst: 50000
        })
    );
    assert_eq!(info.ecn(), Ecn::NotEct);
    assert_eq!(info.ttl, 255);
    let ext = info.cc_ext.unwrap();
    assert_eq!(ext.offset, 14 + 40 + 56);
    assert!(ext.ecn && !ext.ci);
    assert_eq!(ext.weight, 200);
}

#[test]
fn ipv6_later_fragment_fields() {
    let info = parse(&IPV6_LATER_FRAGMENT, &cfg()).unwrap();
    assert_eq!(info.fragment, Fragment::Later);
    assert_eq!(info.protocol, 6);
    assert_eq!(info.l4_offset, 14 + 40 + 8);
    assert_eq!(info.ports, None);
    assert_eq!(info.ecn(), Ecn::Ect0);
}

#[test]
fn other_cc_ext_next_header_value() {
    let mut frame = IPV6_CC_EXT_UDP;
    frame[14 + 6] = 254;
    let cfg = ParseConfig {
        cc_ext_next_header: 254,
        ..cfg()
    };
    cfg.validate().unwrap();
    assert_eq!(parse(&frame, &cfg).unwrap().cc_ext.unwrap().weight, 4);
    // With the default (253) the 254 header is an unknown upper layer: no ext, no ports.
    let info = parse(&frame, &ParseConfig::default()).unwrap();
    assert_eq!((info.cc_ext, info.protocol, info.ports), (None, 254, None));
}

#[test]
fn config_rejects_taken_next_header() {
    for nh in [0u8, 6, 17, 43, 44, 50, 51, 58, 59, 60] {
        let err = ParseConfig {
            cc_ext_next_header: nh,
            ..cfg()
        }
        .validate()
        .unwrap_err();
        assert_eq!(err.param, "cc_ext_next_header");
    }
    ParseConfig::default().validate().unwrap();
}

#[test]
fn flow_key_kinds_on_frames() {
    let by = |kind| ParseConfig {
        flow_key: kind,
        hash_seed: 99,
        ..cfg()
    };
    let a = parse(&IPV4_TCP, &by(FlowKeyKind::FiveTuple)).unwrap();
    let mut other_port = IPV4_TCP;
    other_port[34 + 1] ^= 1; // source port; the TCP checksum is not verified by the parser
    let b = parse(&other_port, &by(FlowKeyKind::FiveTuple)).unwrap();
    assert_ne!(a.flow, b.flow);
    let a = parse(&IPV4_TCP, &by(FlowKeyKind::SrcDst)).unwrap();
    let b = parse(&other_port, &by(FlowKeyKind::SrcDst)).unwrap();
    assert_eq!(a.flow, b.flow);
}

// ---- malformed input ----

#[test]
fn every_truncation_is_an_error() {
    for frame in [
        &IPV4_TCP[..54],
        &VLAN_IPV4_OPTIONS_UDP[..],
        &QINQ_IPV4_LATER_FRAGMENT[..],
        &IPV6_CC_EXT_UDP[..],
        &IPV6_EXT_CHAIN_TCP[..],
        &IPV6_LATER_FRAGMENT[..],
    ] {
        assert!(parse(frame, &cfg()).is_ok());
        for len in 0..frame.len() {
            let err = parse(&frame[..len], &cfg()).unwrap_err();
            assert!(
                matches!(
                    err,
                    ParseError::Truncated { .. } | ParseError::LengthBeyondFrame { .. }
                ),
                "len {len}: {err:?}"
            );
        }
    }
}

#[test]
fn truncation_error_names_the_header() {
    assert_eq!(
        parse(&IPV4_TCP[..10], &cfg()),
        Err(ParseError::Truncated {
            header: Header::Ethernet,
            offset: 0,
            needed: 14,
            available: 10
        })
    );
    assert_eq!(
        parse(&VLAN_IPV4_OPTIONS_UDP[..16], &cfg()),
        Err(ParseError::Truncated {
            header: Header::Vlan,
            offset: 14,
            needed: 4,
            available: 2
        })
    );
    assert_eq!(
        parse(&VLAN_IPV4_OPTIONS_UDP[..18 + 22], &cfg()),
        Err(ParseError::Truncated {
            header: Header::Ipv4,
            offset: 18,
            needed: 24,
            available: 22
        })
    );
}

#[test]
fn bad_ihl() {
    let mut frame = IPV4_TCP;
    frame[14] = 0x44;
    assert_eq!(parse(&frame, &cfg()), Err(ParseError::BadIhl(4)));
}

#[test]
fn total_length_below_header() {
    let mut frame = IPV4_TCP;
    frame[16..18].copy_from_slice(&19u16.to_be_bytes());
    let cfg = ParseConfig {
        verify_ipv4_checksum: false,
        ..cfg()
    };
    assert_eq!(
        parse(&frame, &cfg),
        Err(ParseError::TotalLengthTooSmall {
            total_len: 19,
            header_len: 20
        })
    );
}

#[test]
fn total_length_beyond_frame() {
    let mut frame = IPV4_TCP;
    frame[16..18].copy_from_slice(&47u16.to_be_bytes());
    let cfg = ParseConfig {
        verify_ipv4_checksum: false,
        ..cfg()
    };
    assert_eq!(
        parse(&frame, &cfg),
        Err(ParseError::LengthBeyondFrame {
            claimed: 47,
            available: 46
        })
    );
}

#[test]
fn bad_ipv4_checksum_is_caught_or_ignored_as_configured() {
    let mut frame = IPV4_TCP;
    frame[24] ^= 0x01;
    assert!(matches!(
        parse(&frame, &cfg()),
        Err(ParseError::BadIpv4Checksum(_))
    ));
    let lax = ParseConfig {
        verify_ipv4_checksum: false,
        ..cfg()
    };
    assert!(parse(&frame, &lax).is_ok());
}

#[test]
fn version_must_match_ethertype() {
    let mut frame = IPV4_TCP;
    frame[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
    assert!(matches!(
        parse(&frame, &cfg()),
        Err(ParseError::Truncated { .. } | ParseError::IpVersionMismatch { .. })
    ));
    let mut frame = IPV6_CC_EXT_UDP;
    frame[14] = 0x4f;
    assert_eq!(
        parse(&frame, &cfg()),
        Err(ParseError::IpVersionMismatch {
            expected: 6,
            found: 4
        })
    );
}

#[test]
fn non_ip_and_disabled_vlan() {
    let mut frame = IPV4_TCP;
    frame[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    assert_eq!(
        parse(&frame, &cfg()),
        Err(ParseError::UnsupportedEtherType(0x0806))
    );
    let no_vlan = ParseConfig {
        vlan: false,
        ..cfg()
    };
    assert_eq!(
        parse(&VLAN_IPV4_OPTIONS_UDP, &no_vlan),
        Err(ParseError::UnsupportedEtherType(0x8100))
    );
}

#[test]
fn three_vlan_tags_rejected() {
    let mut frame = Vec::from(&QINQ_IPV4_LATER_FRAGMENT[..]);
    frame.splice(16..16, [0x81, 0x00, 0x00, 0x05]);
    assert_eq!(
        parse(&frame, &cfg()),
        Err(ParseError::TooManyVlanTags { max: 2 })
    );
}

#[test]
fn ext_chain_past_packet_end() {
    // The destination options header's length (octet 1) raised so it runs past the payload.
    let mut frame = IPV6_EXT_CHAIN_TCP;
    frame[14 + 40 + 8 + 1] = 200;
    assert!(matches!(
        parse(&frame, &cfg()),
        Err(ParseError::Truncated {
            header: Header::Ipv6Extension,
            offset: 62,
            needed: 1608,
            ..
        })
    ));
    // The payload length cut short so the chain ends inside the AH header.
    let mut frame = IPV6_EXT_CHAIN_TCP;
    frame[18..20].copy_from_slice(&40u16.to_be_bytes());
    assert!(matches!(
        parse(&frame, &cfg()),
        Err(ParseError::Truncated {
            header: Header::Ipv6Extension,
            offset: 86,
            ..
        })
    ));
}

#[test]
fn ext_chain_too_long() {
    let tight = ParseConfig {
        max_ext_headers: 5,
        ..cfg()
    };
    assert_eq!(
        parse(&IPV6_EXT_CHAIN_TCP, &tight),
        Err(ParseError::TooManyExtHeaders { max: 5 })
    );
    let exact = ParseConfig {
        max_ext_headers: 6,
        ..cfg()
    };
    assert!(parse(&IPV6_EXT_CHAIN_TCP, &exact).is_ok());
    // A chain of 40 destination-options headers: bounded by the default of 8.
    let mut frame = Vec::from(&IPV6_CC_EXT_UDP[..54]);
    frame[20] = 60;
    for _ in 0..40 {
        frame.extend_from_slice(&[60, 0, 1, 4, 0, 0, 0, 0]);
    }
    let payload = (frame.len() - 54) as u16;
    frame[18..20].copy_from_slice(&payload.to_be_bytes());
    assert_eq!(
        parse(&frame, &cfg()),
        Err(ParseError::TooManyExtHeaders { max: 8 })
    );
}

#[test]
fn hop_by_hop_must_be_first() {
    let mut frame = IPV6_EXT_CHAIN_TCP;
    frame[14 + 40 + 8] = 0; // destination options -> hop-by-hop
    assert_eq!(parse(&frame, &cfg()), Err(ParseError::HopByHopNotFirst));
}

#[test]
fn bad_tcp_data_offset() {
    let mut frame = IPV6_EXT_CHAIN_TCP;
    let l4 = 14 + 40 + 64;
    frame[l4 + 12] = 0x40;
    assert_eq!(parse(&frame, &cfg()), Err(ParseError::BadTcpDataOffset(4)));
    frame[l4 + 12] = 0x60;
    assert_eq!(parse(&frame, &cfg()), Err(ParseError::BadTcpDataOffset(6)));
}

// ---- rewrites ----

#[test]
fn set_ce_ipv4_updates_checksum() {
    let mut frame = IPV4_TCP;
    let mut info = parse(&frame, &cfg()).unwrap();
    assert_eq!(set_ce(&mut frame, &mut info), Ok(MarkOutcome::Ce));
    assert_eq!(frame[15], 0x2b);
    // Worked by hand: the TOS word 0x452a -> 0x452b lowers the checksum by one, 0x5cc7 -> 0x5cc6.
    assert_eq!(&frame[24..26], &[0x5c, 0xc6]);
    assert!(ipv4_header_verifies(&frame, &info));
    let reparsed = parse(&frame, &cfg()).unwrap();
    assert_eq!(reparsed, info);
    assert_eq!(reparsed.ecn(), Ecn::Ce);
    assert_eq!(reparsed.dscp(), 10);
    assert_eq!(
        set_ce(&mut frame, &mut info),
        Ok(MarkOutcome::AlreadyMarked)
    );
}

#[test]
fn set_ce_refuses_not_ect() {
    let mut frame = VLAN_IPV4_OPTIONS_UDP;
    let mut info = parse(&frame, &cfg()).unwrap();
    assert_eq!(set_ce(&mut frame, &mut info), Ok(MarkOutcome::NotMarkable));
    assert_eq!(frame, VLAN_IPV4_OPTIONS_UDP);
    assert_eq!(mark(&mut frame, &mut info), Ok(MarkOutcome::NotMarkable));
}

#[test]
fn set_ce_ipv6_traffic_class() {
    let mut frame = IPV6_LATER_FRAGMENT;
    let mut info = parse(&frame, &cfg()).unwrap();
    assert_eq!(set_ce(&mut frame, &mut info), Ok(MarkOutcome::Ce));
    // Version 6, traffic class 0x03, flow label 0.
    assert_eq!(&frame[14..16], &[0x60, 0x30]);
    assert_eq!(parse(&frame, &cfg()).unwrap(), info);
}

#[test]
fn mark_prefers_the_extension_header() {
    let mut frame = IPV6_CC_EXT_UDP;
    let mut info = parse(&frame, &cfg()).unwrap();
    assert_eq!(mark(&mut frame, &mut info), Ok(MarkOutcome::CcExtEcn));
    assert_eq!(frame[54 + 2], 0xc0, "ECN (bit 7) added to CI (bit 6)");
    assert_eq!(
        frame[14..16],
        IPV6_CC_EXT_UDP[14..16],
        "traffic class untouched"
    );
    let reparsed = parse(&frame, &cfg()).unwrap();
    assert_eq!(reparsed, info);
    assert!(reparsed.cc_ext.unwrap().ecn);
    assert_eq!(mark(&mut frame, &mut info), Ok(MarkOutcome::AlreadyMarked));
    let mut plain = IPV4_TCP;
    let mut info = parse(&plain, &cfg()).unwrap();
    assert_eq!(
        set_cc_ext_ecn(&mut plain, &mut info),
        Err(MutateError::NoCcExtension)
    );
}

#[test]
fn set_dscp_both_versions() {
    let mut frame = IPV4_TCP;
    let mut info = parse(&frame, &cfg()).unwrap();
    set_dscp(&mut frame, &mut info, 46).unwrap();
    assert_eq!(frame[15], (46 << 2) | 0b10, "ECN kept");
    assert!(ipv4_header_verifies(&frame, &info));
    assert_eq!(parse(&frame, &cfg()).unwrap(), info);
    assert_eq!(
        set_dscp(&mut frame, &mut info, 64),
        Err(MutateError::InvalidDscp(64))
    );

    let mut frame = IPV6_CC_EXT_UDP;
    let mut info = parse(&frame, &cfg()).unwrap();
    set_dscp(&mut frame, &mut info, 0).unwrap();
    assert_eq!(info.tos, 0b01);
    // Version 6 | traffic class 0x01 | flow label 0x12345.
    assert_eq!(&frame[14..18], &[0x60, 0x11, 0x23, 0x45]);
    assert_eq!(parse(&frame, &cfg()).unwrap(), info);
}

#[test]
fn decrement_ttl_and_expiry() {
    let mut frame = IPV4_TCP;
    let mut info = parse(&frame, &cfg()).unwrap();
    assert_eq!(
        decrement_ttl(&mut frame, &mut info),
        Ok(TtlOutcome::Forwarded { ttl: 63 })
    );
    // TTL/protocol word 0x4006 -> 0x3f06: checksum rises by 0x0100, 0x5cc7 -> 0x5dc7.
    assert_eq!(&frame[24..26], &[0x5d, 0xc7]);
    assert_eq!(parse(&frame, &cfg()).unwrap(), info);

    let mut frame = VLAN_IPV4_OPTIONS_UDP;
    let mut info = parse(&frame, &cfg()).unwrap();
    assert_eq!(
        decrement_ttl(&mut frame, &mut info),
        Ok(TtlOutcome::Expired)
    );
    assert_eq!(frame, VLAN_IPV4_OPTIONS_UDP);

    let mut frame = IPV6_LATER_FRAGMENT;
    let mut info = parse(&frame, &cfg()).unwrap();
    for expected in [2, 1] {
        assert_eq!(
            decrement_ttl(&mut frame, &mut info),
            Ok(TtlOutcome::Forwarded { ttl: expected })
        );
    }
    assert_eq!(
        decrement_ttl(&mut frame, &mut info),
        Ok(TtlOutcome::Expired)
    );
    assert_eq!(frame[14 + 7], 1);
}

#[test]
fn ttl_walk_down_keeps_ipv4_checksum_valid() {
    let mut frame = IPV4_TCP;
    let mut info = parse(&frame, &cfg()).unwrap();
    while let Ok(TtlOutcome::Forwarded { .. }) = decrement_ttl(&mut frame, &mut info) {
        assert!(ipv4_header_verifies(&frame, &info), "ttl {}", info.ttl);
    }
    assert_eq!(info.ttl, 1);
}

#[test]
fn rewrites_refuse_a_shorter_buffer() {
    let mut info = parse(&IPV6_CC_EXT_UDP, &cfg()).unwrap();
    let mut short = IPV6_CC_EXT_UDP[..40].to_vec();
    let before = short.clone();
    assert!(matches!(
        set_dscp(&mut short, &mut info, 1),
        Err(MutateError::FrameMismatch { .. })
    ));
    assert!(matches!(
        decrement_ttl(&mut short, &mut info),
        Err(MutateError::FrameMismatch { .. })
    ));
    assert!(matches!(
        mark(&mut short, &mut info),
        Err(MutateError::FrameMismatch { .. })
    ));
    assert!(set_macs(&mut short[..11], MacAddr::default(), MacAddr::default()).is_err());
    assert_eq!(short, before);
    assert_eq!(info, parse(&IPV6_CC_EXT_UDP, &cfg()).unwrap());
}

#[test]
fn mac_rewrite() {
    let mut frame = IPV4_TCP;
    let dst = MacAddr([0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff]);
    let src = MacAddr([0x02, 0x11, 0x22, 0x33, 0x44, 0x55]);
    set_macs(&mut frame, dst, src).unwrap();
    let info = parse(&frame, &cfg()).unwrap();
    assert_eq!(
        info,
        parse(&IPV4_TCP, &cfg()).unwrap(),
        "no parsed field is a MAC"
    );
    assert_eq!(
        (ethernet::dst_mac(&frame), ethernet::src_mac(&frame)),
        (Some(dst), Some(src))
    );
    assert_eq!(ethernet::dst_mac(&frame[..5]), None);
    assert_eq!(ethernet::src_mac(&frame[..11]), None);
    assert_eq!(frame[12..], IPV4_TCP[12..]);
    assert_eq!(dst.to_string(), "aa:bb:cc:dd:ee:ff");
}

#[test]
fn cc_ext_repr_round_trip() {
    let repr = CcExtRepr {
        next_header: 6,
        ecn: true,
        ci: false,
        weight: 200,
    };
    assert_eq!(repr.to_bytes(), IPV6_EXT_CHAIN_TCP[110..118]);
    let mut buf = [0u8; 8];
    repr.emit(&mut buf).unwrap();
    assert_eq!(buf, repr.to_bytes());
    assert!(repr.emit(&mut [0u8; 7]).is_err());
}
