//! The IPv6 header (RFC 8200 §3) and its extension-header chain (RFC 8200 §4).
//!
//! Fixed header (octets): 0-3 version(4 bits) | traffic class(8) | flow label(20);
//! 4-5 payload length; 6 next header; 7 hop limit; 8-23 source; 24-39 destination.
//! The traffic class holds DSCP (upper 6 bits) and ECN (lower 2), so ECN sits in bits 5..4 of
//! octet 1.
//!
//! Extension headers walked: hop-by-hop (0), routing (43), fragment (44), destination options
//! (60), mobility (135), HIP (139), shim6 (140): "Hdr Ext Len" in 8-octet units not counting
//! the first 8; AH (51, RFC 4302): "Payload Len" in 4-octet units minus 2; and the
//! congestion-control header of docs/algorithms/wire.md (see [`cc_ext`](crate::cc_ext)). ESP (50)
//! and No Next Header (59) end the walk: what follows is opaque.

use crate::be16;
use crate::cc_ext::CcExt;
use crate::error::{Header, ParseError};
use crate::ip::Fragment;

/// Length of the fixed header.
pub const HEADER_LEN: usize = 40;

pub(crate) const PAYLOAD_LEN: usize = 4;
pub(crate) const NEXT_HEADER: usize = 6;
pub(crate) const HOP_LIMIT: usize = 7;
pub(crate) const SRC: usize = 8;
pub(crate) const DST: usize = 24;

/// Next Header / protocol numbers (IANA "Assigned Internet Protocol Numbers").
pub mod protocol {
    /// IPv6 hop-by-hop options (RFC 8200 §4.3).
    pub const HOP_BY_HOP: u8 = 0;
    /// TCP.
    pub const TCP: u8 = 6;
    /// UDP.
    pub const UDP: u8 = 17;
    /// IPv6 routing header (RFC 8200 §4.4).
    pub const ROUTING: u8 = 43;
    /// IPv6 fragment header (RFC 8200 §4.5).
    pub const FRAGMENT: u8 = 44;
    /// Encapsulating security payload (RFC 4303): ends the walk, its payload is encrypted.
    pub const ESP: u8 = 50;
    /// Authentication header (RFC 4302).
    pub const AH: u8 = 51;
    /// ICMPv6.
    pub const ICMPV6: u8 = 58;
    /// No next header (RFC 8200 §4.7).
    pub const NO_NEXT_HEADER: u8 = 59;
    /// IPv6 destination options (RFC 8200 §4.6).
    pub const DEST_OPTIONS: u8 = 60;
    /// Mobility header (RFC 6275).
    pub const MOBILITY: u8 = 135;
    /// Host identity protocol (RFC 7401).
    pub const HIP: u8 = 139;
    /// Shim6 (RFC 5533).
    pub const SHIM6: u8 = 140;
}

/// The IPv6 fields [`parse`](crate::parse) extracts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ipv6Fields {
    pub total_len: usize,
    pub traffic_class: u8,
    pub hop_limit: u8,
    pub next_header: u8,
    pub src: [u8; 16],
    pub dst: [u8; 16],
}

/// Where the extension-header chain ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ChainEnd {
    /// Offset in the frame of the first octet after the last extension header walked.
    pub upper_offset: usize,
    /// The Next Header value there (the upper-layer protocol, or ESP / No Next Header, or the
    /// next header of a non-first fragment).
    pub protocol: u8,
    pub fragment: Fragment,
    pub cc_ext: Option<CcExt>,
}

/// Parses the fixed header at `frame[l3..]`; the payload length must fit in the frame.
#[inline]
pub(crate) fn parse_ipv6(frame: &[u8], l3: usize) -> Result<Ipv6Fields, ParseError> {
    let available = frame.len().saturating_sub(l3);
    if available < HEADER_LEN {
        return Err(ParseError::Truncated {
            header: Header::Ipv6,
            offset: l3,
            needed: HEADER_LEN,
            available,
        });
    }
    let ip = &frame[l3..];
    let version = ip[0] >> 4;
    if version != 6 {
        return Err(ParseError::IpVersionMismatch {
            expected: 6,
            found: version,
        });
    }
    let total_len = HEADER_LEN + usize::from(be16(ip, PAYLOAD_LEN));
    if total_len > available {
        return Err(ParseError::LengthBeyondFrame {
            claimed: total_len,
            available,
        });
    }
    let mut src = [0; 16];
    src.copy_from_slice(&ip[SRC..SRC + 16]);
    let mut dst = [0; 16];
    dst.copy_from_slice(&ip[DST..DST + 16]);
    Ok(Ipv6Fields {
        total_len,
        traffic_class: (ip[0] << 4) | (ip[1] >> 4),
        hop_limit: ip[HOP_LIMIT],
        next_header: ip[NEXT_HEADER],
        src,
        dst,
    })
}

/// Walks the extension headers from `start` (just after the fixed header) to `end` (the end
/// of the IPv6 packet), beginning with Next Header `first`.
///
/// Every header advances the offset by at least 8 octets, so the walk cannot loop; it stops
/// with [`ParseError::TooManyExtHeaders`] after `max_headers` headers all the same, so a chain
/// of padding headers costs a bounded amount of work.
#[inline]
pub(crate) fn walk_extensions(
    frame: &[u8],
    start: usize,
    end: usize,
    first: u8,
    cc_ext_next_header: u8,
    max_headers: u8,
) -> Result<ChainEnd, ParseError> {
    let mut offset = start;
    let mut next = first;
    let mut count: u8 = 0;
    let mut fragment = Fragment::None;
    let mut cc_ext = None;
    loop {
        let is_cc_ext = next == cc_ext_next_header;
        let walked = is_cc_ext
            || matches!(
                next,
                protocol::HOP_BY_HOP
                    | protocol::ROUTING
                    | protocol::FRAGMENT
                    | protocol::DEST_OPTIONS
                    | protocol::AH
                    | protocol::MOBILITY
                    | protocol::HIP
                    | protocol::SHIM6
            );
        if !walked {
            break;
        }
        if next == protocol::HOP_BY_HOP && count > 0 && !is_cc_ext {
            return Err(ParseError::HopByHopNotFirst);
        }
        if count == max_headers {
            return Err(ParseError::TooManyExtHeaders { max: max_headers });
        }
        let header = if is_cc_ext {
            Header::CcExtension
        } else {
            Header::Ipv6Extension
        };
        // Every extension header is at least 8 octets; its first two say how long it is.
        if end - offset < 8 {
            return Err(ParseError::Truncated {
                header,
                offset,
                needed: 8,
                available: end - offset,
            });
        }
        let len = if next == protocol::AH {
            (usize::from(frame[offset + 1]) + 2) * 4
        } else if next == protocol::FRAGMENT && !is_cc_ext {
            8
        } else {
            (usize::from(frame[offset + 1]) + 1) * 8
        };
        if end - offset < len {
            return Err(ParseError::Truncated {
                header,
                offset,
                needed: len,
                available: end - offset,
            });
        }
        if is_cc_ext {
            cc_ext = Some(CcExt::read(frame, offset));
        }
        let this = next;
        next = frame[offset];
        offset += len;
        count += 1;
        if this == protocol::FRAGMENT && !is_cc_ext {
            let off_flags = be16(frame, offset - len + 2);
            let frag_offset = off_flags >> 3;
            let more = off_flags & 1 != 0;
            match (frag_offset, more) {
                // An atomic fragment (RFC 6946) is a whole datagram: keep walking.
                (0, false) => {}
                (0, true) => fragment = Fragment::First,
                _ => {
                    // The bytes after a non-first fragment header are a slice of the
                    // fragmentable part, not a header.
                    fragment = Fragment::Later;
                    break;
                }
            }
        }
    }
    Ok(ChainEnd {
        upper_offset: offset,
        protocol: next,
        fragment,
        cc_ext,
    })
}
