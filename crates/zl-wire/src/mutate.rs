//! In-place rewrites of a parsed frame: ECN marking (RFC 3168 CE, or the ECN bit of the
//! docs/algorithms/wire.md extension header), DSCP rewrite (RFC 2474), TTL / hop-limit decrement
//! (RFC 1812 §5.3.1, RFC 8200 §3).
//!
//! Each takes the frame and the [`PacketInfo`] that [`parse`](crate::parse) returned for it,
//! updates the bytes and the info together, and keeps the IPv4 header checksum valid with the
//! incremental update of RFC 1624 eqn. 3 (see [`checksum::update_word`]): a rewrite touches one
//! 16-bit word, so the update costs three additions instead of a pass over the header. IPv6 has
//! no header checksum; the TCP/UDP checksums do not cover the fields rewritten here.
//!
//! A buffer shorter than the info's offsets require is refused with
//! [`MutateError::FrameMismatch`] and left untouched: these functions do not panic.

use zl_core::Ecn;

use crate::cc_ext::{self, CcExt};
use crate::checksum;
use crate::error::{Header, MutateError};
use crate::ethernet;
use crate::ipv4;
use crate::ipv6;
use crate::parse::{IpVersion, PacketInfo, PlainIpv4};

/// The result of an ECN marking attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MarkOutcome {
    /// CE set in the IPv4 TOS / IPv6 traffic class.
    Ce,
    /// The extension header's ECN bit set.
    CcExtEcn,
    /// The mark was already there; nothing changed.
    AlreadyMarked,
    /// Not-ECT and no extension header: RFC 3168 §5 forbids setting CE; the caller drops.
    NotMarkable,
}

/// The result of a TTL / hop-limit decrement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TtlOutcome {
    /// Decremented; the packet may be forwarded with this TTL.
    Forwarded {
        /// The new TTL / hop limit, already written to the frame.
        ttl: u8,
    },
    /// The TTL was 0 or 1: the packet must not be forwarded (RFC 1812 §5.3.1; the router
    /// discards it and may send ICMP Time Exceeded). The frame is unchanged.
    Expired,
}

/// The parts of a parsed packet that the egress's rewrites touch: the IP header's place and
/// version, the TOS / traffic class octet, and the congestion-control extension header. A
/// copy of 32 bytes instead of the whole [`PacketInfo`], for a packet that is admitted on
/// another thread than the one that parsed it (the threaded router's rings): the transmit
/// side re-marks and marks with these offsets and never parses the frame again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QosHeaders {
    /// Offset of the IP header in the frame.
    pub l3_offset: usize,
    /// IPv4 or IPv6: where the TOS / traffic class lies and whether a checksum covers it.
    pub ip_version: IpVersion,
    /// The TOS octet or traffic class as last written.
    pub tos: u8,
    /// The congestion-control extension header, if the packet carries one.
    pub cc_ext: Option<CcExt>,
}

impl QosHeaders {
    /// The rewritable parts of `info`.
    #[inline]
    pub fn of(info: &PacketInfo) -> Self {
        QosHeaders {
            l3_offset: info.l3_offset,
            ip_version: info.ip_version,
            tos: info.tos,
            cc_ext: info.cc_ext,
        }
    }
    /// The Differentiated Services codepoint (RFC 2474), 0..=63.
    #[inline]
    pub const fn dscp(&self) -> u8 {
        self.tos >> 2
    }
    /// [`mark`] on these offsets.
    #[inline]
    pub fn mark(&mut self, frame: &mut [u8]) -> Result<MarkOutcome, MutateError> {
        mark_at(frame, &mut TosSite::of_headers(self))
    }
    /// [`set_dscp`] on these offsets.
    #[inline]
    pub fn set_dscp(&mut self, frame: &mut [u8], dscp: u8) -> Result<(), MutateError> {
        set_dscp_at(frame, &mut TosSite::of_headers(self), dscp)
    }
}

/// The fields a TOS / extension-header rewrite reads and updates, borrowed from a
/// [`PacketInfo`] or a [`QosHeaders`], so each rewrite is written once for both.
struct TosSite<'a> {
    l3_offset: usize,
    ip_version: IpVersion,
    tos: &'a mut u8,
    cc_ext: &'a mut Option<CcExt>,
}

impl<'a> TosSite<'a> {
    #[inline]
    fn of_info(info: &'a mut PacketInfo) -> Self {
        TosSite {
            l3_offset: info.l3_offset,
            ip_version: info.ip_version,
            tos: &mut info.tos,
            cc_ext: &mut info.cc_ext,
        }
    }
    #[inline]
    fn of_headers(h: &'a mut QosHeaders) -> Self {
        TosSite {
            l3_offset: h.l3_offset,
            ip_version: h.ip_version,
            tos: &mut h.tos,
            cc_ext: &mut h.cc_ext,
        }
    }
}

/// The first `min_len` bytes of the IP header at `l3_offset`, or `FrameMismatch`.
#[inline]
fn ip_header_mut(
    frame: &mut [u8],
    l3_offset: usize,
    ip_version: IpVersion,
) -> Result<&mut [u8], MutateError> {
    let (header, min_len) = match ip_version {
        IpVersion::V4 => (Header::Ipv4, ipv4::MIN_HEADER_LEN),
        IpVersion::V6 => (Header::Ipv6, ipv6::HEADER_LEN),
    };
    let len = frame.len();
    l3_offset
        .checked_add(min_len)
        .and_then(|end| frame.get_mut(l3_offset..end))
        .ok_or(MutateError::FrameMismatch {
            header,
            offset: l3_offset,
            len,
        })
}

/// Replaces the 16-bit word at the even offset `at` of the IPv4 header `ip` (at least
/// [`ipv4::MIN_HEADER_LEN`] bytes, as [`ip_header_mut`] returns) with `new`, and updates the
/// header checksum incrementally (RFC 1624 eqn. 3).
#[inline]
fn rewrite_ipv4_word(ip: &mut [u8], at: usize, new: [u8; 2]) {
    let old = u16::from_be_bytes([ip[at], ip[at + 1]]);
    let hc = u16::from_be_bytes([ip[ipv4::CHECKSUM], ip[ipv4::CHECKSUM + 1]]);
    let hc = checksum::update_word(hc, old, u16::from_be_bytes(new));
    ip[at..at + 2].copy_from_slice(&new);
    ip[ipv4::CHECKSUM..ipv4::CHECKSUM + 2].copy_from_slice(&hc.to_be_bytes());
}

/// Writes the whole TOS / traffic class octet.
#[inline]
fn write_tos(frame: &mut [u8], site: &mut TosSite<'_>, tos: u8) -> Result<(), MutateError> {
    let ip = ip_header_mut(frame, site.l3_offset, site.ip_version)?;
    match site.ip_version {
        // TOS is the low octet of the header's first 16-bit word.
        IpVersion::V4 => rewrite_ipv4_word(ip, ipv4::TOS - 1, [ip[0], tos]),
        IpVersion::V6 => {
            // The traffic class straddles octets 0 and 1 behind the 4-bit version.
            ip[0] = (ip[0] & 0xf0) | (tos >> 4);
            ip[1] = (tos << 4) | (ip[1] & 0x0f);
        }
    }
    *site.tos = tos;
    Ok(())
}

/// Sets CE (RFC 3168 §5) in the IPv4 TOS or IPv6 traffic class.
///
/// Returns [`MarkOutcome::Ce`], [`MarkOutcome::AlreadyMarked`] for a CE packet, or
/// [`MarkOutcome::NotMarkable`] (frame unchanged) for a Not-ECT packet.
#[inline]
pub fn set_ce(frame: &mut [u8], info: &mut PacketInfo) -> Result<MarkOutcome, MutateError> {
    set_ce_at(frame, &mut TosSite::of_info(info))
}

#[inline]
fn set_ce_at(frame: &mut [u8], site: &mut TosSite<'_>) -> Result<MarkOutcome, MutateError> {
    match Ecn::from_bits(*site.tos) {
        Ecn::NotEct => Ok(MarkOutcome::NotMarkable),
        Ecn::Ce => Ok(MarkOutcome::AlreadyMarked),
        Ecn::Ect0 | Ecn::Ect1 => {
            let tos = *site.tos | Ecn::Ce.bits();
            write_tos(frame, site, tos)?;
            Ok(MarkOutcome::Ce)
        }
    }
}

/// Sets the ECN bit of the congestion-control extension header (docs/algorithms/wire.md, octet 2
/// bit 7).
///
/// Returns [`MarkOutcome::CcExtEcn`] or [`MarkOutcome::AlreadyMarked`];
/// [`MutateError::NoCcExtension`] when the packet has no such header.
#[inline]
pub fn set_cc_ext_ecn(frame: &mut [u8], info: &mut PacketInfo) -> Result<MarkOutcome, MutateError> {
    set_cc_ext_ecn_at(frame, &mut TosSite::of_info(info))
}

#[inline]
fn set_cc_ext_ecn_at(frame: &mut [u8], site: &mut TosSite<'_>) -> Result<MarkOutcome, MutateError> {
    let ext = site.cc_ext.as_mut().ok_or(MutateError::NoCcExtension)?;
    if ext.ecn {
        return Ok(MarkOutcome::AlreadyMarked);
    }
    let len = frame.len();
    let flags = ext
        .offset
        .checked_add(cc_ext::FLAGS_OCTET)
        .and_then(|at| frame.get_mut(at))
        .ok_or(MutateError::FrameMismatch {
            header: Header::CcExtension,
            offset: ext.offset,
            len,
        })?;
    *flags |= cc_ext::ECN_BIT;
    ext.ecn = true;
    Ok(MarkOutcome::CcExtEcn)
}

/// Signals congestion the way docs/algorithms/wire.md decides: the extension header's ECN bit when
/// the packet carries the header, otherwise CE for an ECN-capable packet, otherwise
/// [`MarkOutcome::NotMarkable`] (the caller drops instead).
#[inline]
pub fn mark(frame: &mut [u8], info: &mut PacketInfo) -> Result<MarkOutcome, MutateError> {
    mark_at(frame, &mut TosSite::of_info(info))
}

#[inline]
fn mark_at(frame: &mut [u8], site: &mut TosSite<'_>) -> Result<MarkOutcome, MutateError> {
    if site.cc_ext.is_some() {
        set_cc_ext_ecn_at(frame, site)
    } else {
        set_ce_at(frame, site)
    }
}

/// Rewrites the DSCP (RFC 2474), keeping the ECN bits.
#[inline]
pub fn set_dscp(frame: &mut [u8], info: &mut PacketInfo, dscp: u8) -> Result<(), MutateError> {
    set_dscp_at(frame, &mut TosSite::of_info(info), dscp)
}

#[inline]
fn set_dscp_at(frame: &mut [u8], site: &mut TosSite<'_>, dscp: u8) -> Result<(), MutateError> {
    if dscp > 63 {
        return Err(MutateError::InvalidDscp(dscp));
    }
    if *site.tos >> 2 == dscp {
        return Ok(());
    }
    let tos = (dscp << 2) | (*site.tos & 0b11);
    write_tos(frame, site, tos)
}

/// Decrements the IPv4 TTL (with the checksum update) or the IPv6 hop limit.
///
/// decided: a TTL of 0 or 1 on arrival is [`TtlOutcome::Expired`] and the frame is left as it
/// came, so the caller can quote it in an ICMP Time Exceeded.
#[inline]
pub fn decrement_ttl(frame: &mut [u8], info: &mut PacketInfo) -> Result<TtlOutcome, MutateError> {
    decrement_ttl_at(frame, &mut info.ttl, info.l3_offset, info.ip_version)
}

/// [`decrement_ttl`] for a packet that [`parse_into_common`](crate::parse_into_common) took
/// (untagged IPv4 without options: the IP header at octet 14), with that offset and version
/// as constants rather than read from `info`: for a caller that keeps `info` in memory where
/// the compiler cannot see them, the data plane's per-packet path. Equal to
/// [`decrement_ttl`] for every such `info` (tested); `info` of any other frame is a caller's
/// error (a debug assertion; in release the rewrite is bounds-checked as always).
#[inline]
pub fn decrement_ttl_plain_ipv4(
    frame: &mut [u8],
    info: &mut PacketInfo,
) -> Result<TtlOutcome, MutateError> {
    debug_assert!(
        info.l3_offset == ethernet::HEADER_LEN && info.ip_version == IpVersion::V4,
        "not a frame parse_into_common took"
    );
    decrement_ttl_at(frame, &mut info.ttl, ethernet::HEADER_LEN, IpVersion::V4)
}

/// [`decrement_ttl`] for the common frame as [`PlainIpv4`] holds it: the same rewrite of
/// `frame` and the same outcome as [`decrement_ttl`] on its [`PlainIpv4::info`], and
/// `plain.ttl` as that would leave the info's.
#[inline]
pub fn decrement_ttl_plain(
    frame: &mut [u8],
    plain: &mut PlainIpv4,
) -> Result<TtlOutcome, MutateError> {
    decrement_ttl_at(frame, &mut plain.ttl, PlainIpv4::L3_OFFSET, IpVersion::V4)
}

/// [`decrement_ttl`] of the TTL `current` (the parsed headers' own, updated) with the IP
/// header at `l3_offset`, of `ip_version`.
#[inline(always)]
fn decrement_ttl_at(
    frame: &mut [u8],
    current: &mut u8,
    l3_offset: usize,
    ip_version: IpVersion,
) -> Result<TtlOutcome, MutateError> {
    if *current <= 1 {
        return Ok(TtlOutcome::Expired);
    }
    let ttl = *current - 1;
    let ip = ip_header_mut(frame, l3_offset, ip_version)?;
    match ip_version {
        // TTL and protocol share one 16-bit word: only its high octet drops by one (the frame's
        // TTL is `*current`, as parsed from it), so the checksum update needs neither word
        // (`checksum::update_high_octet_decrement`), here on the field in the machine's byte
        // order (`checksum::update_high_octet_decrement_ne`: no byte swaps).
        IpVersion::V4 => {
            let field = u16::from_ne_bytes([ip[ipv4::CHECKSUM], ip[ipv4::CHECKSUM + 1]]);
            let field = checksum::update_high_octet_decrement_ne(field);
            ip[ipv4::TTL] = ttl;
            ip[ipv4::CHECKSUM..ipv4::CHECKSUM + 2].copy_from_slice(&field.to_ne_bytes());
        }
        IpVersion::V6 => ip[ipv6::HOP_LIMIT] = ttl,
    }
    *current = ttl;
    Ok(TtlOutcome::Forwarded { ttl })
}
