//! The per-packet entry point: [`parse`] a frame once into a [`PacketInfo`] of offsets and
//! fields, then read the info and hand it to the rewrites in [`mutate`](crate::mutate).
//!
//! The walk is Ethernet -> up to two VLAN tags -> IPv4 (options skipped by IHL) or IPv6 (the
//! extension-header chain walked) -> the TCP or UDP ports. Every read is at a fixed or computed
//! offset checked against the frame (or, inside the IP packet, against the IP length) first.

use crate::be16;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use serde::{Deserialize, Serialize};
use zl_core::{Ecn, FlowId};

use crate::cc_ext::{self, CcExt};
use crate::error::{Header, ParseError};
use crate::ethernet::{self, ethertype, EthernetInfo};
use crate::flow::{FlowKey, FlowKeyKind, Ports};
use crate::ip::Fragment;
use crate::ipv4;
use crate::ipv6::{self, protocol};

/// How [`parse`] reads frames. Build it once from config; [`ParseConfig::validate`] before use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ParseConfig {
    /// Walk 802.1Q / 802.1ad tags (up to [`MAX_VLAN_TAGS`](crate::MAX_VLAN_TAGS)); when false a
    /// tagged frame is [`ParseError::UnsupportedEtherType`].
    pub vlan: bool,
    /// The Next Header value of the congestion-control extension header (docs/algorithms/wire.md,
    /// 253).
    pub cc_ext_next_header: u8,
    /// Most IPv6 extension headers walked before [`ParseError::TooManyExtHeaders`].
    ///
    /// decided: 8, one of each type RFC 8200 §4.1 lists (destination options counted twice)
    /// plus the congestion-control header.
    pub max_ext_headers: u8,
    /// Verify the IPv4 header checksum (RFC 1812 §5.2.2: a router must). Turn off only where
    /// the NIC has already verified it.
    pub verify_ipv4_checksum: bool,
    /// The flow key [`PacketInfo::flow`] is computed from.
    pub flow_key: FlowKeyKind,
    /// Seed of the flow hash.
    pub hash_seed: u64,
}

impl Default for ParseConfig {
    fn default() -> Self {
        ParseConfig {
            vlan: true,
            cc_ext_next_header: cc_ext::DEFAULT_NEXT_HEADER,
            max_ext_headers: 8,
            verify_ipv4_checksum: true,
            flow_key: FlowKeyKind::SrcDst,
            hash_seed: 0,
        }
    }
}

/// A [`ParseConfig`] value outside its allowed range.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid parse parameter `{param}` = {value}: expected {expected}")]
pub struct ParseConfigError {
    /// The parameter's name, as in [`ParseConfig`].
    pub param: &'static str,
    /// The value given, formatted.
    pub value: String,
    /// The allowed range, in words.
    pub expected: &'static str,
}

impl ParseConfig {
    /// Rejects a `cc_ext_next_header` that names a header or protocol the parser already
    /// interprets (the walk would read, say, TCP as the extension header).
    pub fn validate(&self) -> Result<(), ParseConfigError> {
        const TAKEN: [u8; 15] = [
            protocol::HOP_BY_HOP,
            protocol::TCP,
            protocol::UDP,
            protocol::ROUTING,
            protocol::FRAGMENT,
            protocol::ESP,
            protocol::AH,
            protocol::ICMPV6,
            protocol::NO_NEXT_HEADER,
            protocol::DEST_OPTIONS,
            protocol::MOBILITY,
            protocol::HIP,
            protocol::SHIM6,
            4,  // IPv4 encapsulation
            41, // IPv6 encapsulation
        ];
        if TAKEN.contains(&self.cc_ext_next_header) {
            return Err(ParseConfigError {
                param: "cc_ext_next_header",
                value: self.cc_ext_next_header.to_string(),
                expected: "a protocol number not otherwise interpreted \
                           (253 or 254 per RFC 3692 are the experimental values)",
            });
        }
        Ok(())
    }
}

/// The IP version of a parsed packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IpVersion {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

/// What [`parse`] found: offsets into the frame and the fields the data plane and the AQM read.
///
/// Offsets are from the first octet of the frame. Contract: every offset, with the length of
/// the header it names, lies within the parsed frame; the rewrites in
/// [`mutate`](crate::mutate) rely on it and refuse (with a typed error) a shorter buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PacketInfo {
    /// VLAN tags, EtherType (the MACs are the frame's first 12 octets:
    /// [`ethernet::dst_mac`], [`ethernet::src_mac`]).
    pub eth: EthernetInfo,
    /// Offset of the IP header.
    pub l3_offset: usize,
    /// IPv4 or IPv6.
    pub ip_version: IpVersion,
    /// Length of the IPv4 header with options (IHL * 4), or 40 for IPv6.
    pub ip_header_len: usize,
    /// Length of the IP packet (IPv4 total length; IPv6 40 + payload length). Frame bytes
    /// beyond `l3_offset + ip_len` are link-layer padding.
    pub ip_len: usize,
    /// Offset of the upper-layer header: after IPv4 options, or after the last IPv6 extension
    /// header walked.
    pub l4_offset: usize,
    /// The upper-layer protocol (IPv4 protocol; for IPv6 the Next Header that ended the walk).
    pub protocol: u8,
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// TCP / UDP ports; `None` for other protocols and for fragments.
    pub ports: Option<Ports>,
    /// The IPv4 TOS octet or the IPv6 traffic class: DSCP in the upper 6 bits, ECN in the lower 2.
    pub tos: u8,
    /// IPv4 TTL or IPv6 hop limit.
    pub ttl: u8,
    /// Whether the packet is a fragment, and which.
    pub fragment: Fragment,
    /// The congestion-control extension header of docs/algorithms/wire.md, if the packet carries
    /// one.
    pub cc_ext: Option<CcExt>,
    /// The flow, hashed with the configured key kind and seed.
    pub flow: FlowId,
}

impl PacketInfo {
    /// The Differentiated Services codepoint (RFC 2474), 0..=63.
    #[inline]
    pub const fn dscp(&self) -> u8 {
        self.tos >> 2
    }

    /// The ECN field (RFC 3168 §5).
    #[inline]
    pub const fn ecn(&self) -> Ecn {
        Ecn::from_bits(self.tos)
    }

    /// The fields a flow key is drawn from.
    #[inline]
    pub const fn flow_key(&self) -> FlowKey {
        FlowKey {
            src: self.src,
            dst: self.dst,
            protocol: self.protocol,
            ports: self.ports,
        }
    }

    /// The offset one past the IP packet's last octet.
    #[inline]
    pub const fn ip_end(&self) -> usize {
        self.l3_offset + self.ip_len
    }
}

/// Reads the ports of a TCP or UDP header at `l4`, bounded by `end` (the IP packet's end).
fn parse_ports(frame: &[u8], l4: usize, end: usize, proto: u8) -> Result<Ports, ParseError> {
    let (header, min_len) = if proto == protocol::TCP {
        (Header::Tcp, 20)
    } else {
        (Header::Udp, 8)
    };
    let available = end - l4;
    if available < min_len {
        return Err(ParseError::Truncated {
            header,
            offset: l4,
            needed: min_len,
            available,
        });
    }
    if proto == protocol::TCP {
        let data_offset = frame[l4 + 12] >> 4;
        if data_offset < 5 || usize::from(data_offset) * 4 > available {
            return Err(ParseError::BadTcpDataOffset(data_offset));
        }
    }
    Ok(Ports {
        src: be16(frame, l4),
        dst: be16(frame, l4 + 2),
    })
}

/// The layer-3 part of a [`PacketInfo`].
struct L3Fields {
    ip_version: IpVersion,
    ip_header_len: usize,
    ip_len: usize,
    l4_offset: usize,
    protocol: u8,
    src: IpAddr,
    dst: IpAddr,
    tos: u8,
    ttl: u8,
    fragment: Fragment,
    cc_ext: Option<CcExt>,
}

fn parse_l3_ipv4(frame: &[u8], l3: usize, cfg: &ParseConfig) -> Result<L3Fields, ParseError> {
    let f = ipv4::parse_ipv4(frame, l3, cfg.verify_ipv4_checksum)?;
    Ok(L3Fields {
        ip_version: IpVersion::V4,
        ip_header_len: f.header_len,
        ip_len: f.total_len,
        l4_offset: l3 + f.header_len,
        protocol: f.protocol,
        src: IpAddr::V4(Ipv4Addr::from(f.src)),
        dst: IpAddr::V4(Ipv4Addr::from(f.dst)),
        tos: f.tos,
        ttl: f.ttl,
        fragment: f.fragment,
        cc_ext: None,
    })
}

fn parse_l3_ipv6(frame: &[u8], l3: usize, cfg: &ParseConfig) -> Result<L3Fields, ParseError> {
    let f = ipv6::parse_ipv6(frame, l3)?;
    let chain = ipv6::walk_extensions(
        frame,
        l3 + ipv6::HEADER_LEN,
        l3 + f.total_len,
        f.next_header,
        cfg.cc_ext_next_header,
        cfg.max_ext_headers,
    )?;
    Ok(L3Fields {
        ip_version: IpVersion::V6,
        ip_header_len: ipv6::HEADER_LEN,
        ip_len: f.total_len,
        l4_offset: chain.upper_offset,
        protocol: chain.protocol,
        src: IpAddr::V6(Ipv6Addr::from(f.src)),
        dst: IpAddr::V6(Ipv6Addr::from(f.dst)),
        tos: f.traffic_class,
        ttl: f.hop_limit,
        fragment: chain.fragment,
        cc_ext: chain.cc_ext,
    })
}

/// Parses one frame. Allocation-free; never panics. See the crate docs for the contract.
#[inline]
pub fn parse(frame: &[u8], cfg: &ParseConfig) -> Result<PacketInfo, ParseError> {
    let mut plain = None;
    match (parse_plain_ipv4(frame, cfg, &mut plain), plain) {
        (true, Some(info)) => Ok(info),
        _ => parse_any(frame, cfg),
    }
}

/// [`parse`] into a place the caller keeps: `*out` becomes `Some` of what `parse` returns,
/// or `None` when it returns an error (returned here too).
///
/// The result is the same; only where it is written differs. A [`PacketInfo`] is about 140
/// bytes: `parse` returns it by value, and a caller that keeps it in an `Option` of its own
/// copies it at every step, while here the common frame's fields are written straight into
/// `out` (the data plane's per-packet path; measured in docs/performance/dataplane.md).
#[inline]
pub fn parse_into(
    frame: &[u8],
    cfg: &ParseConfig,
    out: &mut Option<PacketInfo>,
) -> Result<(), ParseError> {
    if parse_plain_ipv4(frame, cfg, out) {
        return Ok(());
    }
    parse_into_general(frame, cfg, out)
}

/// [`parse_into`] in two steps for a caller that continues differently after each:
/// [`parse_into_common`] first, and only when it returns false this.
#[inline]
pub fn parse_into_general(
    frame: &[u8],
    cfg: &ParseConfig,
    out: &mut Option<PacketInfo>,
) -> Result<(), ParseError> {
    match parse_any(frame, cfg) {
        Ok(info) => {
            *out = Some(info);
            Ok(())
        }
        Err(e) => {
            *out = None;
            Err(e)
        }
    }
}

/// The first step of [`parse_into`]: the common frame (untagged IPv4 without options that
/// parses) written to `*out` (true), or nothing written (false; then
/// [`parse_into_general`]). A caller that continues in line after each step sees the
/// common frame's constant fields (offsets, version) as constants.
#[inline(always)]
pub fn parse_into_common(frame: &[u8], cfg: &ParseConfig, out: &mut Option<PacketInfo>) -> bool {
    parse_plain_ipv4(frame, cfg, out)
}

/// The common case in one straight pass ([`PlainIpv4::parse`]), written to `*out` as the
/// whole [`PacketInfo`] (true); false, with `out` untouched, for every other frame.
#[inline(always)]
fn parse_plain_ipv4(frame: &[u8], cfg: &ParseConfig, out: &mut Option<PacketInfo>) -> bool {
    match PlainIpv4::parse(frame, cfg) {
        Some(plain) => {
            *out = Some(plain.info());
            true
        }
        None => false,
    }
}

/// The common frame as [`parse`] reads it, in the fields that vary: an untagged Ethernet frame
/// carrying IPv4 without options, so its offsets, IP version and the absence of tags and of a
/// congestion-control header are known without being stored ([`PlainIpv4::info`] is the whole
/// [`PacketInfo`]).
///
/// A caller that keeps the parse in its registers reads these; writing the ~140-byte
/// `PacketInfo` for every packet costs the data plane about 20 instructions per packet, most
/// of them constants.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PlainIpv4 {
    /// Length of the IP packet (the IPv4 total length).
    pub ip_len: u16,
    /// The IPv4 protocol.
    pub protocol: u8,
    /// Source address.
    pub src: Ipv4Addr,
    /// Destination address.
    pub dst: Ipv4Addr,
    /// TCP / UDP ports; `None` for other protocols and for fragments.
    pub ports: Option<Ports>,
    /// The TOS octet: DSCP in the upper 6 bits, ECN in the lower 2.
    pub tos: u8,
    /// The TTL.
    pub ttl: u8,
    /// Whether the packet is a fragment, and which.
    pub fragment: Fragment,
    /// The flow, hashed with the configured key kind and seed.
    pub flow: FlowId,
}

impl PlainIpv4 {
    /// Offset of the IP header: right after the untagged Ethernet header.
    pub const L3_OFFSET: usize = ethernet::HEADER_LEN;
    /// Offset of the upper-layer header: after the 20-octet IPv4 header.
    pub const L4_OFFSET: usize = Self::L3_OFFSET + ipv4::MIN_HEADER_LEN;

    /// The common case in one straight pass: an untagged Ethernet frame of at least 38 octets
    /// carrying IPv4 without options, valid as far as [`parse`]'s general walk checks it
    /// (`Some`). `None` sends every other frame (shorter, tagged, IPv6, options, and any
    /// frame the walk would reject) the general way, so that both give the same result for
    /// every frame (tested against each other on mutated frames). Always inlined: it is the
    /// data plane's parse of every packet, and as a call it costs its caller about 6
    /// instructions per packet (spills and the call; measured in the pipeline bench).
    #[inline(always)]
    pub fn parse(frame: &[u8], cfg: &ParseConfig) -> Option<PlainIpv4> {
        const L3: usize = PlainIpv4::L3_OFFSET;
        const L4: usize = PlainIpv4::L4_OFFSET;
        // The headers with the layer-4 ports (TCP and UDP both start with them): a frame too
        // short for them goes the general way, and the ports are read from the fixed-size
        // head with no bounds check of their own.
        const HEAD: usize = L4 + 4;
        let head: &[u8; HEAD] = frame.get(..HEAD)?.try_into().ok()?;
        if be16(head, 12) != ethertype::IPV4 || head[L3] != 0x45 {
            return None;
        }
        let ip_len = be16(head, L3 + ipv4::TOTAL_LEN);
        // `ip_len < 20 || ip_len > frame.len() - L3` as one comparison: below 20 the
        // difference wraps past any frame (the frame is at least `HEAD` octets): one compare
        // and branch on every packet instead of two.
        if usize::from(ip_len).wrapping_sub(ipv4::MIN_HEADER_LEN) > frame.len() - L4 {
            return None;
        }
        if cfg.verify_ipv4_checksum && !crate::checksum::verifies(&head[L3..L4]) {
            return None;
        }
        let flags_frag = be16(head, L3 + ipv4::FLAGS_FRAG);
        let fragment = match (
            flags_frag & ipv4::FRAG_OFFSET_MASK,
            flags_frag & ipv4::MORE_FRAGMENTS != 0,
        ) {
            (0, false) => Fragment::None,
            (0, true) => Fragment::First,
            _ => Fragment::Later,
        };
        let protocol = head[L3 + ipv4::PROTOCOL];
        let ports = match (protocol, fragment) {
            (protocol::TCP | protocol::UDP, Fragment::None) => {
                let min_len = if protocol == protocol::TCP { 20 } else { 8 };
                let available = usize::from(ip_len) - ipv4::MIN_HEADER_LEN;
                if available < min_len {
                    return None;
                }
                if protocol == protocol::TCP {
                    let data_offset = frame[L4 + 12] >> 4;
                    if data_offset < 5 || usize::from(data_offset) * 4 > available {
                        return None;
                    }
                }
                Some(Ports {
                    src: be16(head, L4),
                    dst: be16(head, L4 + 2),
                })
            }
            _ => None,
        };
        let at = |o: usize| Ipv4Addr::from([head[o], head[o + 1], head[o + 2], head[o + 3]]);
        let mut plain = PlainIpv4 {
            ip_len,
            protocol,
            src: at(L3 + ipv4::SRC),
            dst: at(L3 + ipv4::DST),
            ports,
            tos: head[L3 + ipv4::TOS],
            ttl: head[L3 + ipv4::TTL],
            fragment,
            flow: FlowId(0),
        };
        // The fields first, the flow hash after from what was written: computed ahead, it
        // would keep the ports alive across the hash's key-kind branches, spilled to the
        // stack.
        plain.flow = plain.flow_key().hash(cfg.flow_key, cfg.hash_seed);
        Some(plain)
    }

    /// The fields a flow key is drawn from.
    #[inline]
    pub const fn flow_key(&self) -> FlowKey {
        FlowKey {
            src: IpAddr::V4(self.src),
            dst: IpAddr::V4(self.dst),
            protocol: self.protocol,
            ports: self.ports,
        }
    }

    /// The ECN field (RFC 3168 §5).
    #[inline]
    pub const fn ecn(&self) -> Ecn {
        Ecn::from_bits(self.tos)
    }

    /// The whole [`PacketInfo`] of the frame: what [`parse`] returns for it.
    #[inline]
    pub const fn info(&self) -> PacketInfo {
        PacketInfo {
            eth: EthernetInfo {
                outer_vlan: None,
                inner_vlan: None,
                ethertype: ethertype::IPV4,
            },
            l3_offset: Self::L3_OFFSET,
            ip_version: IpVersion::V4,
            ip_header_len: ipv4::MIN_HEADER_LEN,
            ip_len: self.ip_len as usize,
            l4_offset: Self::L4_OFFSET,
            protocol: self.protocol,
            src: IpAddr::V4(self.src),
            dst: IpAddr::V4(self.dst),
            ports: self.ports,
            tos: self.tos,
            ttl: self.ttl,
            fragment: self.fragment,
            cc_ext: None,
            flow: self.flow,
        }
    }
}

/// [`parse`] for any frame: the walk of the crate docs.
fn parse_any(frame: &[u8], cfg: &ParseConfig) -> Result<PacketInfo, ParseError> {
    let link = ethernet::parse_ethernet(frame, cfg.vlan)?;
    let l3 = link.l3_offset;
    let f = match link.ethertype {
        ethertype::IPV4 => parse_l3_ipv4(frame, l3, cfg)?,
        ethertype::IPV6 => parse_l3_ipv6(frame, l3, cfg)?,
        other => return Err(ParseError::UnsupportedEtherType(other)),
    };
    let ports = match (f.protocol, f.fragment) {
        (protocol::TCP | protocol::UDP, Fragment::None) => {
            Some(parse_ports(frame, f.l4_offset, l3 + f.ip_len, f.protocol)?)
        }
        _ => None,
    };
    let key = FlowKey {
        src: f.src,
        dst: f.dst,
        protocol: f.protocol,
        ports,
    };
    Ok(PacketInfo {
        eth: link.info(),
        l3_offset: l3,
        ip_version: f.ip_version,
        ip_header_len: f.ip_header_len,
        ip_len: f.ip_len,
        l4_offset: f.l4_offset,
        protocol: f.protocol,
        src: f.src,
        dst: f.dst,
        ports,
        tos: f.tos,
        ttl: f.ttl,
        fragment: f.fragment,
        cc_ext: f.cc_ext,
        flow: key.hash(cfg.flow_key, cfg.hash_seed),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vectors;
    use proptest::prelude::*;

    /// An untagged IPv4 frame built from `IPV4_TCP` with the fields the plain path branches
    /// on overridden, byte flips applied, cut to `cut` bytes, the header checksum recomputed
    /// when `fix`.
    #[allow(clippy::too_many_arguments)]
    fn frame(
        ethertype: u16,
        ver_ihl: u8,
        total_len: Option<u16>,
        flags_frag: u16,
        proto: u8,
        tcp_offset: u8,
        flips: &[(usize, u8)],
        cut: usize,
        fix: bool,
    ) -> Vec<u8> {
        let mut f = vectors::IPV4_TCP.to_vec();
        f[12..14].copy_from_slice(&ethertype.to_be_bytes());
        f[14] = ver_ihl;
        if let Some(t) = total_len {
            f[16..18].copy_from_slice(&t.to_be_bytes());
        }
        f[20..22].copy_from_slice(&flags_frag.to_be_bytes());
        f[23] = proto;
        f[34 + 12] = tcp_offset;
        for &(at, x) in flips {
            let n = f.len();
            f[at % n] ^= x;
        }
        if fix {
            f[24..26].fill(0);
            let c = crate::checksum::checksum(&f[14..34]);
            f[24..26].copy_from_slice(&c.to_be_bytes());
        }
        f.truncate(cut);
        f
    }

    fn configs() -> [ParseConfig; 3] {
        let d = ParseConfig::default();
        [
            d,
            ParseConfig {
                verify_ipv4_checksum: false,
                flow_key: FlowKeyKind::FiveTuple,
                ..d
            },
            ParseConfig {
                vlan: false,
                flow_key: FlowKeyKind::Src,
                hash_seed: 7,
                ..d
            },
        ]
    }

    /// The plain path's result for `f`, `None` when it declines the frame.
    fn plain(f: &[u8], cfg: &ParseConfig) -> Option<PacketInfo> {
        let mut out = None;
        let taken = parse_into_common(f, cfg, &mut out);
        assert_eq!(taken, out.is_some(), "true exactly when it wrote a result");
        assert_eq!(
            PlainIpv4::parse(f, cfg).map(|p| p.info()),
            out,
            "the plain form"
        );
        out
    }

    /// What `parse_into` leaves, starting from a place that holds another frame's result.
    fn parsed_into(f: &[u8], cfg: &ParseConfig) -> Result<PacketInfo, ParseError> {
        let mut out = parse(&vectors::IPV4_TCP, cfg).ok();
        let r = parse_into(f, cfg, &mut out);
        match (r, out) {
            (Ok(()), Some(info)) => Ok(info),
            (Err(e), None) => Err(e),
            (r, out) => panic!("parse_into returned {r:?} but left {out:?}"),
        }
    }

    #[test]
    fn plain_path_takes_the_common_frames() {
        let udp = frame(0x0800, 0x45, None, 0x4000, 17, 0x50, &[], 60, true);
        for cfg in configs() {
            assert!(plain(&vectors::IPV4_TCP, &cfg).is_some());
            assert!(plain(&udp, &cfg).is_some());
            assert_eq!(parsed_into(&udp, &cfg), parse_any(&udp, &cfg));
            assert_eq!(parse(&udp, &cfg), parse_any(&udp, &cfg));
            for other in [
                &vectors::VLAN_IPV4_OPTIONS_UDP[..],
                &vectors::QINQ_IPV4_LATER_FRAGMENT,
                &vectors::IPV6_CC_EXT_UDP,
            ] {
                assert!(plain(other, &cfg).is_none());
                assert_eq!(parse(other, &cfg), parse_any(other, &cfg));
                assert_eq!(parsed_into(other, &cfg), parse_any(other, &cfg));
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4000))]
        /// The plain IPv4 path and the general walk agree on every frame, valid or not, and
        /// `parse_into` leaves what `parse` returns.
        #[test]
        fn plain_path_equals_the_general_walk(
            ethertype in prop_oneof![Just(0x0800u16), Just(0x8100), Just(0x86dd), any::<u16>()],
            ver_ihl in prop_oneof![Just(0x45u8), Just(0x46), Just(0x44), Just(0x65), any::<u8>()],
            total_len in prop_oneof![Just(None), (0u16..80).prop_map(Some), any::<u16>().prop_map(Some)],
            flags_frag in prop_oneof![Just(0u16), Just(0x4000), Just(0x2000), Just(0x0001), any::<u16>()],
            proto in prop_oneof![Just(6u8), Just(17), Just(1), any::<u8>()],
            tcp_offset in prop_oneof![Just(0x50u8), Just(0x40), Just(0xf0), any::<u8>()],
            flips in proptest::collection::vec((0usize..60, any::<u8>()), 0..3),
            cut in prop_oneof![Just(60usize), 0usize..=60],
            fix in any::<bool>(),
        ) {
            let f = frame(ethertype, ver_ihl, total_len, flags_frag, proto, tcp_offset, &flips, cut, fix);
            for cfg in configs() {
                prop_assert_eq!(parse(&f, &cfg), parse_any(&f, &cfg));
                prop_assert_eq!(parsed_into(&f, &cfg), parse_any(&f, &cfg));
                if let Some(p) = PlainIpv4::parse(&f, &cfg) {
                    prop_assert_eq!(Ok(p.info()), parse_any(&f, &cfg));
                }
            }
        }
    }
}
