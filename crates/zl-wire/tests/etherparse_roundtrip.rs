//! Packets built with etherparse (random fields, VLAN tags, IPv4 options, IPv6 extension headers,
//! the congestion-control header of docs/algorithms/wire.md spliced in): our fixed-offset parser
//! must agree with `etherparse::SlicedPacket` on every field, and after our rewrites etherparse
//! must read the new values and a valid IPv4 header checksum.

use etherparse::{
    IpAuthHeader, IpDscp, IpEcn, IpFragOffset, IpHeaders, IpNumber, Ipv4Extensions, Ipv4Header,
    Ipv4Options, Ipv6Extensions, Ipv6FlowLabel, Ipv6FragmentHeader, Ipv6Header, Ipv6RawExtHeader,
    Ipv6RoutingExtensions, NetSlice, PacketBuilder, SlicedPacket, TransportSlice, VlanId,
};
use proptest::prelude::*;
use zl_wire::*;

#[derive(Clone, Debug)]
struct Spec {
    vlans: u8,
    vids: (u16, u16),
    v6: bool,
    tos: u8,
    ttl: u8,
    src: [u8; 16],
    dst: [u8; 16],
    tcp: bool,
    ports: (u16, u16),
    payload_len: usize,
    v4_option_words: u8,
    hop_by_hop: bool,
    dest_options: bool,
    routing: bool,
    fragment: Option<(u16, bool)>,
    auth: bool,
    cc_ext: Option<(bool, bool, u8)>,
}

fn spec() -> impl Strategy<Value = Spec> {
    (
        (
            0u8..=2,
            1u16..4095,
            1u16..4095,
            any::<bool>(),
            any::<u8>(),
            any::<u8>(),
        ),
        (
            any::<[u8; 16]>(),
            any::<[u8; 16]>(),
            any::<bool>(),
            any::<(u16, u16)>(),
        ),
        (0usize..64, 0u8..=10),
        (any::<bool>(), any::<bool>(), any::<bool>(), any::<bool>()),
        prop::option::of((prop_oneof![Just(0u16), 1u16..0x1fff], any::<bool>())),
        prop::option::of(any::<(bool, bool, u8)>()),
    )
        .prop_map(|(a, b, c, d, fragment, cc_ext)| Spec {
            vlans: a.0,
            vids: (a.1, a.2),
            v6: a.3,
            tos: a.4,
            ttl: a.5,
            src: b.0,
            dst: b.1,
            tcp: b.2,
            ports: b.3,
            payload_len: c.0,
            v4_option_words: c.1,
            hop_by_hop: d.0,
            dest_options: d.1,
            routing: d.2,
            auth: d.3,
            fragment,
            cc_ext,
        })
}

fn ip_headers(s: &Spec) -> IpHeaders {
    let proto = if s.tcp { IpNumber::TCP } else { IpNumber::UDP };
    if s.v6 {
        let pad = [1u8, 4, 0, 0, 0, 0]; // PadN: the 6 octets after Next Header / Hdr Ext Len
        let exts = Ipv6Extensions {
            hop_by_hop_options: s
                .hop_by_hop
                .then(|| Ipv6RawExtHeader::new_raw(proto, &pad).unwrap()),
            destination_options: s
                .dest_options
                .then(|| Ipv6RawExtHeader::new_raw(proto, &pad).unwrap()),
            routing: s.routing.then(|| Ipv6RoutingExtensions {
                routing: Ipv6RawExtHeader::new_raw(proto, &[253, 0, 0, 0, 0, 0]).unwrap(),
                final_destination_options: None,
            }),
            fragment: s.fragment.map(|(offset, more)| {
                Ipv6FragmentHeader::new(proto, IpFragOffset::try_new(offset).unwrap(), more, 7)
            }),
            auth: s
                .auth
                .then(|| IpAuthHeader::new(proto, 0x100, 1, &[0xab; 12]).unwrap()),
        };
        let header = Ipv6Header {
            traffic_class: s.tos,
            flow_label: Ipv6FlowLabel::try_new(0x54321).unwrap(),
            payload_length: 0,
            next_header: proto,
            hop_limit: s.ttl,
            source: s.src,
            destination: s.dst,
        };
        IpHeaders::Ipv6(header, exts)
    } else {
        let mut header = Ipv4Header::new(
            0,
            s.ttl,
            proto,
            s.src[..4].try_into().unwrap(),
            s.dst[..4].try_into().unwrap(),
        )
        .unwrap();
        header.dscp = IpDscp::try_new(s.tos >> 2).unwrap();
        header.ecn = IpEcn::try_new(s.tos & 3).unwrap();
        header.options =
            Ipv4Options::try_from(&vec![1u8; usize::from(s.v4_option_words) * 4][..]).unwrap();
        if let Some((offset, more)) = s.fragment {
            header.dont_fragment = false;
            header.more_fragments = more;
            header.fragment_offset = IpFragOffset::try_new(offset).unwrap();
        }
        IpHeaders::Ipv4(header, Ipv4Extensions::default())
    }
}

fn build(s: &Spec) -> Vec<u8> {
    let mac_src = [2, 0, 0, 0, 0, 2];
    let mac_dst = [2, 0, 0, 0, 0, 1];
    let eth = PacketBuilder::ethernet2(mac_src, mac_dst);
    let ip = match s.vlans {
        0 => eth.ip(ip_headers(s)),
        1 => eth
            .single_vlan(VlanId::try_new(s.vids.0).unwrap())
            .ip(ip_headers(s)),
        _ => eth
            .double_vlan(
                VlanId::try_new(s.vids.0).unwrap(),
                VlanId::try_new(s.vids.1).unwrap(),
            )
            .ip(ip_headers(s)),
    };
    let payload = vec![0x5a; s.payload_len];
    let mut out = Vec::new();
    if s.tcp {
        ip.tcp(s.ports.0, s.ports.1, 1, 1000)
            .write(&mut out, &payload)
            .unwrap();
    } else {
        ip.udp(s.ports.0, s.ports.1)
            .write(&mut out, &payload)
            .unwrap();
    }
    out
}

/// Inserts the congestion-control header right after the IPv6 header (after hop-by-hop,
/// which must stay first), rethreading Next Header and the payload length.
fn splice_cc_ext(frame: &mut Vec<u8>, l3: usize, hop_by_hop: bool, ext: (bool, bool, u8)) {
    let (prev_nh, at) = if hop_by_hop {
        (l3 + 40, l3 + 48)
    } else {
        (l3 + 6, l3 + 40)
    };
    let repr = CcExtRepr {
        next_header: frame[prev_nh],
        ecn: ext.0,
        ci: ext.1,
        weight: ext.2,
    };
    frame[prev_nh] = cc_ext::DEFAULT_NEXT_HEADER;
    frame.splice(at..at, repr.to_bytes());
    let payload_len = u16::from_be_bytes([frame[l3 + 4], frame[l3 + 5]]) + 8;
    frame[l3 + 4..l3 + 6].copy_from_slice(&payload_len.to_be_bytes());
}

fn offset_in(frame: &[u8], part: &[u8]) -> usize {
    part.as_ptr() as usize - frame.as_ptr() as usize
}

/// Checks our parse of `ours` against etherparse's slicing of `theirs` (the same packet
/// without the spliced header, whose offsets lie `shift` octets earlier past the splice).
fn check_agreement(s: &Spec, ours: &[u8], theirs: &[u8], shift: usize) {
    let cfg = ParseConfig::default();
    let info = parse(ours, &cfg).unwrap_or_else(|e| panic!("{e}: {s:?}"));
    let sliced = SlicedPacket::from_ethernet(theirs).unwrap();

    assert_eq!(info.l3_offset, 14 + 4 * usize::from(s.vlans));
    let tags = [info.eth.outer_vlan, info.eth.inner_vlan];
    for (i, tag) in tags.iter().enumerate() {
        if i < usize::from(s.vlans) {
            let tag = tag.unwrap();
            assert_eq!(tag.vid(), if i == 0 { s.vids.0 } else { s.vids.1 });
        } else {
            assert!(tag.is_none());
        }
    }

    let (ip_payload, fragmented) = match sliced.net.as_ref().unwrap() {
        NetSlice::Ipv4(ip) => {
            let h = ip.header();
            assert_eq!(info.ip_version, IpVersion::V4);
            assert_eq!(info.src, core::net::IpAddr::V4(h.source_addr()));
            assert_eq!(info.dst, core::net::IpAddr::V4(h.destination_addr()));
            assert_eq!(info.dscp(), h.dcp().value());
            assert_eq!(info.ecn().bits(), h.ecn().value());
            assert_eq!(info.ttl, h.ttl());
            assert_eq!(info.ip_len, usize::from(h.total_len()));
            assert_eq!(info.ip_header_len, h.slice().len());
            (ip.payload(), ip.is_payload_fragmented())
        }
        NetSlice::Ipv6(ip) => {
            let h = ip.header();
            assert_eq!(info.ip_version, IpVersion::V6);
            assert_eq!(info.src, core::net::IpAddr::V6(h.source_addr()));
            assert_eq!(info.dst, core::net::IpAddr::V6(h.destination_addr()));
            assert_eq!(info.tos, h.traffic_class());
            assert_eq!(info.ttl, h.hop_limit());
            assert_eq!(info.ip_len, 40 + usize::from(h.payload_length()) + shift);
            (ip.payload(), ip.is_payload_fragmented())
        }
        NetSlice::Arp(_) => unreachable!("built IP"),
    };
    let transport = if s.tcp { 6 } else { 17 };
    match (s.v6, info.fragment) {
        (true, Fragment::First) => {
            // decided: we walk a first fragment's chain on to the upper-layer header (RFC 7112
            // puts the whole chain in the first fragment); etherparse stops at the fragment
            // header.
            let transport_len = if s.tcp { 20 } else { 8 };
            assert_eq!(info.protocol, transport);
            assert_eq!(info.l4_offset, ours.len() - s.payload_len - transport_len);
        }
        (true, Fragment::Later) => {
            // What follows a non-first fragment header is data, not a header: we stop there;
            // etherparse 0.19 may read on into the fragment data.
            let earlier = [s.hop_by_hop, s.dest_options, s.routing];
            let headers = earlier.iter().filter(|&&present| present).count();
            let after_fragment = info.l3_offset + 40 + shift + 8 * headers + 8;
            assert_eq!(info.protocol, if s.auth { 51 } else { transport });
            assert_eq!(info.l4_offset, after_fragment);
        }
        _ => {
            assert_eq!(info.protocol, ip_payload.ip_number.0);
            assert_eq!(
                info.l4_offset,
                offset_in(theirs, ip_payload.payload) + shift
            );
        }
    }
    assert_eq!(info.fragment != Fragment::None, fragmented);
    let ports = match &sliced.transport {
        Some(TransportSlice::Tcp(t)) => Some(Ports {
            src: t.source_port(),
            dst: t.destination_port(),
        }),
        Some(TransportSlice::Udp(u)) => Some(Ports {
            src: u.source_port(),
            dst: u.destination_port(),
        }),
        _ => None,
    };
    assert_eq!(info.ports, ports);
    if !fragmented {
        assert_eq!(
            info.ports,
            Some(Ports {
                src: s.ports.0,
                dst: s.ports.1
            })
        );
    }
    match (s.v6, s.cc_ext) {
        (true, Some((ecn, ci, weight))) => {
            let ext = info.cc_ext.unwrap();
            assert_eq!((ext.ecn, ext.ci, ext.weight), (ecn, ci, weight));
        }
        _ => assert_eq!(info.cc_ext, None),
    }
}

/// etherparse 0.19 writes the IPv6 fragment header's offset and M flag at non-RFC bit
/// positions (etherparse issue #150, fixed in 0.20 by PR #151): it reads back its own layout,
/// so `theirs` keeps it and `ours` gets octets 2-3 re-encoded per RFC 8200 §4.5
/// (offset << 3 | M).
fn fix_fragment_header(frame: &mut [u8], l3: usize, s: &Spec) {
    if let Some((offset, more)) = s.fragment {
        let earlier = [s.hop_by_hop, s.dest_options, s.routing];
        let at = l3 + 40 + 8 * earlier.iter().filter(|&&present| present).count();
        let word = (offset << 3) | u16::from(more);
        frame[at + 2..at + 4].copy_from_slice(&word.to_be_bytes());
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn parser_agrees_with_etherparse(s in spec()) {
        let built = build(&s);
        let l3 = 14 + 4 * usize::from(s.vlans);
        let mut ours = built.clone();
        let mut shift = 0;
        if s.v6 {
            fix_fragment_header(&mut ours, l3, &s);
            if let Some(ext) = s.cc_ext {
                splice_cc_ext(&mut ours, l3, s.hop_by_hop, ext);
                shift = 8;
            }
        }
        check_agreement(&s, &ours, &built, shift);
    }

    #[test]
    fn rewrites_read_back_through_etherparse(s in spec(), dscp in 0u8..64) {
        let mut frame = build(&s);
        if s.v6 {
            fix_fragment_header(&mut frame, 14 + 4 * usize::from(s.vlans), &s);
        }
        let cfg = ParseConfig::default();
        let mut info = parse(&frame, &cfg).unwrap();
        let before = info;
        let marked = set_ce(&mut frame, &mut info).unwrap();
        set_dscp(&mut frame, &mut info, dscp).unwrap();
        let ttl = decrement_ttl(&mut frame, &mut info).unwrap();

        let sliced = SlicedPacket::from_ethernet(&frame).unwrap();
        let (tos, hop) = match sliced.net.as_ref().unwrap() {
            NetSlice::Ipv4(ip) => {
                let h = ip.header();
                prop_assert_eq!(h.header_checksum(), h.to_header().calc_header_checksum());
                ((h.dcp().value() << 2) | h.ecn().value(), h.ttl())
            }
            NetSlice::Ipv6(ip) => (ip.header().traffic_class(), ip.header().hop_limit()),
            NetSlice::Arp(_) => unreachable!("built IP"),
        };
        prop_assert_eq!(tos >> 2, dscp);
        let expected_ecn = match marked {
            MarkOutcome::Ce | MarkOutcome::AlreadyMarked => 0b11,
            _ => before.tos & 0b11,
        };
        prop_assert_eq!(tos & 0b11, expected_ecn);
        prop_assert_eq!(marked == MarkOutcome::NotMarkable, before.ecn() == Ecn::NotEct);
        match ttl {
            TtlOutcome::Forwarded { ttl } => {
                prop_assert_eq!(ttl, before.ttl - 1);
                prop_assert_eq!(hop, ttl);
            }
            TtlOutcome::Expired => {
                prop_assert!(before.ttl <= 1);
                prop_assert_eq!(hop, before.ttl);
            }
        }
        // Our own view of the rewritten frame matches the info the rewrites kept.
        prop_assert_eq!(parse(&frame, &cfg).unwrap(), info);
    }
}
