//! The IPv4 header (RFC 791 §3.1), options skipped by IHL.
//!
//! Layout (octets): 0 version(4 bits) | IHL(4); 1 TOS = DSCP(6) | ECN(2) (RFC 2474, RFC 3168);
//! 2-3 total length; 4-5 identification; 6-7 flags(3) | fragment offset(13, in 8-octet units);
//! 8 TTL; 9 protocol; 10-11 header checksum; 12-15 source; 16-19 destination; 20.. options.

use crate::be16;
use crate::checksum;
use crate::error::{Header, ParseError};
use crate::ip::Fragment;

/// Length of a header without options.
pub const MIN_HEADER_LEN: usize = 20;

pub(crate) const TOS: usize = 1;
pub(crate) const TOTAL_LEN: usize = 2;
pub(crate) const FLAGS_FRAG: usize = 6;
pub(crate) const TTL: usize = 8;
pub(crate) const PROTOCOL: usize = 9;
pub(crate) const CHECKSUM: usize = 10;
pub(crate) const SRC: usize = 12;
pub(crate) const DST: usize = 16;

pub(crate) const MORE_FRAGMENTS: u16 = 0x2000;
pub(crate) const FRAG_OFFSET_MASK: u16 = 0x1fff;

/// The IPv4 fields [`parse`](crate::parse) extracts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Ipv4Fields {
    pub header_len: usize,
    pub total_len: usize,
    pub tos: u8,
    pub ttl: u8,
    pub protocol: u8,
    pub src: [u8; 4],
    pub dst: [u8; 4],
    pub fragment: Fragment,
}

/// Parses the header at `frame[l3..]`. The total length must fit in the frame (bytes after it
/// are link-layer padding and are ignored).
#[inline]
pub(crate) fn parse_ipv4(
    frame: &[u8],
    l3: usize,
    verify_checksum: bool,
) -> Result<Ipv4Fields, ParseError> {
    let available = frame.len().saturating_sub(l3);
    if available < MIN_HEADER_LEN {
        return Err(ParseError::Truncated {
            header: Header::Ipv4,
            offset: l3,
            needed: MIN_HEADER_LEN,
            available,
        });
    }
    let ip = &frame[l3..];
    let version = ip[0] >> 4;
    if version != 4 {
        return Err(ParseError::IpVersionMismatch {
            expected: 4,
            found: version,
        });
    }
    let ihl = ip[0] & 0x0f;
    if ihl < 5 {
        return Err(ParseError::BadIhl(ihl));
    }
    let header_len = usize::from(ihl) * 4;
    if available < header_len {
        return Err(ParseError::Truncated {
            header: Header::Ipv4,
            offset: l3,
            needed: header_len,
            available,
        });
    }
    let total_len = usize::from(be16(ip, TOTAL_LEN));
    if total_len < header_len {
        return Err(ParseError::TotalLengthTooSmall {
            total_len: total_len as u16,
            header_len,
        });
    }
    if total_len > available {
        return Err(ParseError::LengthBeyondFrame {
            claimed: total_len,
            available,
        });
    }
    if verify_checksum && !checksum::verifies(&ip[..header_len]) {
        return Err(ParseError::BadIpv4Checksum(be16(ip, CHECKSUM)));
    }
    let flags_frag = be16(ip, FLAGS_FRAG);
    let fragment = match (
        flags_frag & FRAG_OFFSET_MASK,
        flags_frag & MORE_FRAGMENTS != 0,
    ) {
        (0, false) => Fragment::None,
        (0, true) => Fragment::First,
        _ => Fragment::Later,
    };
    Ok(Ipv4Fields {
        header_len,
        total_len,
        tos: ip[TOS],
        ttl: ip[TTL],
        protocol: ip[PROTOCOL],
        src: [ip[SRC], ip[SRC + 1], ip[SRC + 2], ip[SRC + 3]],
        dst: [ip[DST], ip[DST + 1], ip[DST + 2], ip[DST + 3]],
        fragment,
    })
}
