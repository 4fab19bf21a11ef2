//! ICMP errors a router sends about a packet it cannot forward: ICMPv4 (RFC 792) and ICMPv6
//! (RFC 4443), written over the offending frame's own buffer.
//!
//! # Messages
//!
//! | [`IcmpError`]      | ICMPv4 (type / code)                       | ICMPv6 (type / code)     |
//! |--------------------|--------------------------------------------|--------------------------|
//! | `TimeExceeded`     | 11 / 0 TTL exceeded in transit             | 3 / 0 hop limit exceeded |
//! | `NoRoute`          | 3 / 0 net unreachable (RFC 1812 §5.2.7.1)  | 1 / 0 no route           |
//! | `HostUnreachable`  | 3 / 1 host unreachable (the next hop did not resolve) | 1 / 3 address unreachable |
//! | `TooBig { mtu }`   | 3 / 4 fragmentation needed, next-hop MTU in octets 6-7 (RFC 1191 §4) | 2 / 0 Packet Too Big, MTU in octets 4-7 (RFC 8201) |
//!
//! # Layout of what [`write_error_in_place`] produces
//!
//! The frame's own link-layer header (with its VLAN tags, so the error leaves on the VLAN the
//! packet came from), addressed back to the frame's source MAC from the router's MAC; then a
//! new IP header from the router's address to the offending packet's source; the 8-octet
//! ICMP header; then as much of the offending IP packet as fits in 576 octets of IPv4 (RFC
//! 1812 §4.3.2.3) or 1280 of IPv6 (RFC 4443 §2.4 (c)), as it arrived (TTL not yet
//! decremented, link-layer padding left out). The ICMPv4 checksum covers the ICMP message,
//! the ICMPv6 checksum the message and the RFC 8200 §8.1 pseudo-header.
//!
//! # When not to send one
//!
//! [`error_allowed`] is RFC 1812 §4.3.2.7 (and RFC 4443 §2.4 (e)): never about an ICMP error,
//! a non-first fragment, a packet sent to a link-layer or IP multicast / broadcast address,
//! or a packet whose source does not name one host (unspecified, loopback, multicast,
//! limited broadcast).
//!
//! # Contract
//!
//! Nothing here panics on any bytes or any [`PacketInfo`]: a frame that does not match its
//! info, or a buffer too small for the message, is an [`IcmpBuildError`]. No allocation.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::checksum::{checksum, ones_complement_sum};
use crate::ethernet::{self, MacAddr};
use crate::ipv6::protocol as next_header;
use crate::{be16, Fragment, IpVersion, PacketInfo};

/// The ICMP header: type, code, checksum, 4 octets of type-specific data.
pub const HEADER_LEN: usize = 8;
/// The largest ICMPv4 error datagram (RFC 1812 §4.3.2.3).
pub const MAX_V4_ERROR_LEN: usize = 576;
/// The largest ICMPv6 error packet: the IPv6 minimum MTU (RFC 4443 §2.4 (c)).
pub const MAX_V6_ERROR_LEN: usize = 1280;
/// TTL / hop limit of the errors (Linux's `ip_default_ttl` and IPv6 default hop limit).
pub const ERROR_TTL: u8 = 64;
/// IPv4 TOS of the errors: precedence 6, internetwork control (RFC 1812 §4.3.2.5), as Linux.
pub const ERROR_TOS: u8 = 0xc0;

/// ICMPv4 protocol number.
pub const PROTO_ICMPV4: u8 = 1;

/// ICMPv4 types (RFC 792).
pub mod v4_type {
    /// Echo Reply.
    pub const ECHO_REPLY: u8 = 0;
    /// Destination Unreachable (code 0 net, 4 fragmentation needed).
    pub const DEST_UNREACHABLE: u8 = 3;
    /// Source Quench (deprecated, RFC 6633).
    pub const SOURCE_QUENCH: u8 = 4;
    /// Redirect.
    pub const REDIRECT: u8 = 5;
    /// Echo Request.
    pub const ECHO_REQUEST: u8 = 8;
    /// Time Exceeded (code 0: TTL exceeded in transit).
    pub const TIME_EXCEEDED: u8 = 11;
    /// Parameter Problem.
    pub const PARAMETER_PROBLEM: u8 = 12;
}

/// ICMPv6 types (RFC 4443 §2.1): below 128 errors, from 128 informational.
pub mod v6_type {
    /// Destination Unreachable (code 0: no route).
    pub const DEST_UNREACHABLE: u8 = 1;
    /// Packet Too Big.
    pub const PACKET_TOO_BIG: u8 = 2;
    /// Time Exceeded (code 0: hop limit exceeded).
    pub const TIME_EXCEEDED: u8 = 3;
    /// Parameter Problem.
    pub const PARAMETER_PROBLEM: u8 = 4;
    /// Echo Request.
    pub const ECHO_REQUEST: u8 = 128;
    /// Echo Reply.
    pub const ECHO_REPLY: u8 = 129;
}

/// Why the router reports a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum IcmpError {
    /// The TTL / hop limit expired in transit.
    TimeExceeded,
    /// No route matched the destination.
    NoRoute,
    /// The next hop's link-layer address did not resolve (ARP / NDP failed).
    HostUnreachable,
    /// The packet is larger than the egress link's MTU (IPv4 with DF set, or any IPv6).
    TooBig {
        /// The egress link's MTU, octets.
        mtu: u32,
    },
}

impl IcmpError {
    /// The ICMP (type, code) of this error for `version`.
    pub const fn type_code(self, version: IpVersion) -> (u8, u8) {
        match (self, version) {
            (IcmpError::TimeExceeded, IpVersion::V4) => (v4_type::TIME_EXCEEDED, 0),
            (IcmpError::NoRoute, IpVersion::V4) => (v4_type::DEST_UNREACHABLE, 0),
            (IcmpError::HostUnreachable, IpVersion::V4) => (v4_type::DEST_UNREACHABLE, 1),
            (IcmpError::TooBig { .. }, IpVersion::V4) => (v4_type::DEST_UNREACHABLE, 4),
            (IcmpError::TimeExceeded, IpVersion::V6) => (v6_type::TIME_EXCEEDED, 0),
            (IcmpError::NoRoute, IpVersion::V6) => (v6_type::DEST_UNREACHABLE, 0),
            (IcmpError::HostUnreachable, IpVersion::V6) => (v6_type::DEST_UNREACHABLE, 3),
            (IcmpError::TooBig { .. }, IpVersion::V6) => (v6_type::PACKET_TOO_BIG, 0),
        }
    }

    /// The 4 type-specific octets after the checksum.
    const fn rest_of_header(self, version: IpVersion) -> [u8; 4] {
        match (self, version) {
            // RFC 1191 §4: "unused" (16 bits) then the next-hop MTU (16 bits).
            (IcmpError::TooBig { mtu }, IpVersion::V4) => {
                let m = if mtu > u16::MAX as u32 {
                    u16::MAX
                } else {
                    mtu as u16
                };
                let b = m.to_be_bytes();
                [0, 0, b[0], b[1]]
            }
            // RFC 4443 §3.2: the MTU, 32 bits.
            (IcmpError::TooBig { mtu }, IpVersion::V6) => mtu.to_be_bytes(),
            _ => [0; 4],
        }
    }
}

/// Why [`write_error_in_place`] wrote nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IcmpBuildError {
    /// The frame is shorter than its info says, or the info's offsets disagree.
    #[error("the frame does not match its parsed headers")]
    FrameMismatch,
    /// The router's address is not of the offending packet's IP version.
    #[error("the source address is not of the packet's IP version")]
    FamilyMismatch,
    /// The buffer cannot hold the link-layer header, IP and ICMP headers and the 8 octets of
    /// quote every error carries at least.
    #[error("a {room}-octet buffer cannot hold the ICMP error")]
    NoRoom {
        /// The buffer's size, octets.
        room: usize,
    },
}

/// Whether the IPv4 packet in `frame` has Don't Fragment set (false for IPv6 and for a
/// frame that does not match `info`).
#[inline]
pub fn ipv4_dont_fragment(frame: &[u8], info: &PacketInfo) -> bool {
    info.ip_version == IpVersion::V4
        && frame
            .get(info.l3_offset + 6)
            .is_some_and(|flags| flags & 0x40 != 0)
}

/// Whether RFC 1812 §4.3.2.7 / RFC 4443 §2.4 (e) let a router send an ICMP error about the
/// packet in `frame` (see the module doc).
pub fn error_allowed(frame: &[u8], info: &PacketInfo) -> bool {
    if info.fragment == Fragment::Later || ethernet::dst_mac(frame).is_some_and(is_group_mac) {
        return false;
    }
    // The destination a group, or a source that names no single host.
    let excluded = match (info.src, info.dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            d.is_multicast()
                || d.is_broadcast()
                || s.is_unspecified()
                || s.is_loopback()
                || s.is_multicast()
                || s.octets()[0] >= 240
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            d.is_multicast() || s.is_unspecified() || s.is_loopback() || s.is_multicast()
        }
        _ => true,
    };
    !excluded && !is_icmp_error(frame, info)
}

/// A group (multicast or broadcast) MAC: the I/G bit of the first octet.
const fn is_group_mac(mac: MacAddr) -> bool {
    mac.0[0] & 1 != 0
}

/// Whether the packet is itself an ICMP error (an unknown type counts as one, as a router
/// cannot tell; RFC 1812 §4.3.2.7 asks for no error about an error). A packet whose ICMP
/// header is cut off counts as one too.
fn is_icmp_error(frame: &[u8], info: &PacketInfo) -> bool {
    let Some(&ty) = frame
        .get(info.l4_offset)
        .filter(|_| info.l4_offset < info.ip_end())
    else {
        return matches!(
            (info.ip_version, info.protocol),
            (IpVersion::V4, PROTO_ICMPV4) | (IpVersion::V6, next_header::ICMPV6)
        );
    };
    match (info.ip_version, info.protocol) {
        (IpVersion::V4, PROTO_ICMPV4) => !matches!(
            ty,
            v4_type::ECHO_REPLY | v4_type::ECHO_REQUEST | 13..=18 // timestamp, info, mask
        ),
        (IpVersion::V6, next_header::ICMPV6) => ty < 128,
        _ => false,
    }
}

/// Rewrites the frame `room[..frame_len]` (parsed as `info`) into the ICMP error `error` about
/// it, from `src` (the router's address on the ingress link, of the packet's IP version) and
/// `own_mac` back to the frame's source MAC, and returns the new frame length. `ident` is the
/// IPv4 identification of the error (unused for IPv6). `room` is the buffer's whole data
/// room: the error can be longer than the frame (a short packet quoted in full).
///
/// The caller checks [`error_allowed`] first; this only builds.
pub fn write_error_in_place(
    room: &mut [u8],
    frame_len: usize,
    info: &PacketInfo,
    error: IcmpError,
    src: IpAddr,
    own_mac: MacAddr,
    ident: u16,
) -> Result<usize, IcmpBuildError> {
    let l3 = info.l3_offset;
    if frame_len > room.len()
        || info.ip_end() > frame_len
        || l3 < ethernet::HEADER_LEN
        || info.ip_len < info.ip_header_len
    {
        return Err(IcmpBuildError::FrameMismatch);
    }
    let (ip_header_len, max_len) = match (info.ip_version, src) {
        (IpVersion::V4, IpAddr::V4(_)) => (20, MAX_V4_ERROR_LEN),
        (IpVersion::V6, IpAddr::V6(_)) => (40, MAX_V6_ERROR_LEN),
        _ => return Err(IcmpBuildError::FamilyMismatch),
    };
    let quote_at = l3 + ip_header_len + HEADER_LEN;
    // RFC 792 asks for the IP header and 64 bits of data at least.
    let min_quote = info.ip_len.min(info.ip_header_len + 8);
    if room.len() < quote_at + min_quote {
        return Err(IcmpBuildError::NoRoom { room: room.len() });
    }
    let quote_len = info
        .ip_len
        .min(max_len - ip_header_len - HEADER_LEN)
        .min(room.len() - quote_at);
    let (dst, (ty, code)) = (info.src, error.type_code(info.ip_version));
    // The quote first: it moves up over where the new headers go.
    room.copy_within(l3..l3 + quote_len, quote_at);
    // Back to the previous hop, from the router; VLAN tags and EtherType stay.
    // (`room` holds at least the Ethernet header: `l3` was checked above.)
    room.copy_within(6..12, 0);
    room[6..12].copy_from_slice(&own_mac.0);
    let icmp_len = HEADER_LEN + quote_len;
    let icmp_at = l3 + ip_header_len;
    room[icmp_at] = ty;
    room[icmp_at + 1] = code;
    room[icmp_at + 2..icmp_at + 4].fill(0);
    room[icmp_at + 4..icmp_at + 8].copy_from_slice(&error.rest_of_header(info.ip_version));
    let ip = &mut room[l3..l3 + ip_header_len];
    match (src, dst) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            write_ipv4_header(ip, s, d, (ip_header_len + icmp_len) as u16, ident);
            let sum = checksum(&room[icmp_at..icmp_at + icmp_len]);
            room[icmp_at + 2..icmp_at + 4].copy_from_slice(&sum.to_be_bytes());
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            write_ipv6_header(ip, s, d, icmp_len as u16);
            let sum = icmpv6_checksum(&s, &d, &room[icmp_at..icmp_at + icmp_len]);
            room[icmp_at + 2..icmp_at + 4].copy_from_slice(&sum.to_be_bytes());
        }
        _ => return Err(IcmpBuildError::FamilyMismatch),
    }
    Ok(icmp_at + icmp_len)
}

/// [`write_error_in_place`] into a separate buffer `out`: the frame is copied there first.
/// The entry point for fuzzing and for callers that keep the offending frame.
#[allow(clippy::too_many_arguments)]
pub fn write_error(
    frame: &[u8],
    info: &PacketInfo,
    error: IcmpError,
    src: IpAddr,
    own_mac: MacAddr,
    ident: u16,
    out: &mut [u8],
) -> Result<usize, IcmpBuildError> {
    let Some(copy) = out.get_mut(..frame.len()) else {
        return Err(IcmpBuildError::NoRoom { room: out.len() });
    };
    copy.copy_from_slice(frame);
    write_error_in_place(out, frame.len(), info, error, src, own_mac, ident)
}

/// A 20-octet IPv4 header, protocol ICMP, DF clear, checksum filled in.
///
/// decided: DF clear, so the error (up to 576 octets) may be fragmented on a path with a
/// smaller MTU, and a unique-enough `ident` from the caller (RFC 6864 §4.1 asks for one on
/// a non-atomic datagram).
fn write_ipv4_header(ip: &mut [u8], src: Ipv4Addr, dst: Ipv4Addr, total_len: u16, ident: u16) {
    ip[0] = 0x45;
    ip[1] = ERROR_TOS;
    ip[2..4].copy_from_slice(&total_len.to_be_bytes());
    ip[4..6].copy_from_slice(&ident.to_be_bytes());
    ip[6..8].fill(0);
    ip[8] = ERROR_TTL;
    ip[9] = PROTO_ICMPV4;
    ip[10..12].fill(0);
    ip[12..16].copy_from_slice(&src.octets());
    ip[16..20].copy_from_slice(&dst.octets());
    let sum = checksum(ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
}

/// A 40-octet IPv6 header, traffic class and flow label 0, next header ICMPv6.
fn write_ipv6_header(ip: &mut [u8], src: Ipv6Addr, dst: Ipv6Addr, payload_len: u16) {
    ip[0..4].copy_from_slice(&[0x60, 0, 0, 0]);
    ip[4..6].copy_from_slice(&payload_len.to_be_bytes());
    ip[6] = next_header::ICMPV6;
    ip[7] = ERROR_TTL;
    ip[8..24].copy_from_slice(&src.octets());
    ip[24..40].copy_from_slice(&dst.octets());
}

/// The ICMPv6 checksum (RFC 4443 §2.3) of `message` (its checksum field zero): over the RFC
/// 8200 §8.1 pseudo-header (source, destination, upper-layer length as 32 bits, three zero
/// octets, next header 58) and the message.
pub fn icmpv6_checksum(src: &Ipv6Addr, dst: &Ipv6Addr, message: &[u8]) -> u16 {
    let mut pseudo = [0u8; 40];
    pseudo[0..16].copy_from_slice(&src.octets());
    pseudo[16..32].copy_from_slice(&dst.octets());
    pseudo[32..36].copy_from_slice(&(message.len() as u32).to_be_bytes());
    pseudo[39] = next_header::ICMPV6;
    let sum = u32::from(ones_complement_sum(&pseudo)) + u32::from(ones_complement_sum(message));
    !(((sum & 0xffff) + (sum >> 16)) as u16)
}

/// The ICMP (type, code) of the packet in `frame` when it is ICMPv4 / ICMPv6 with its header
/// present; for tests and counters.
pub fn icmp_type_code(frame: &[u8], info: &PacketInfo) -> Option<(u8, u8)> {
    let is_icmp = matches!(
        (info.ip_version, info.protocol),
        (IpVersion::V4, PROTO_ICMPV4) | (IpVersion::V6, next_header::ICMPV6)
    );
    (is_icmp && info.l4_offset + 4 <= info.ip_end()).then(|| {
        let w = be16(frame, info.l4_offset);
        ((w >> 8) as u8, w as u8)
    })
}
