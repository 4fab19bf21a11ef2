//! Ethernet II framing (IEEE 802.3 §3.2) with stacked 802.1Q (C-tag, TPID 0x8100) and
//! 802.1ad (S-tag, "QinQ", TPID 0x88a8) VLAN tags, and the MAC rewrite a router applies on
//! forwarding.
//!
//! Layout: destination MAC (6 octets), source MAC (6), then EtherType/TPID (2). A VLAN tag is
//! TPID (2) + TCI (2: PCP 3 bits, DEI 1 bit, VID 12 bits), followed by the next EtherType.

use crate::be16;
use crate::error::{Header, MutateError, ParseError};

/// Length of the untagged header: two MACs and the EtherType.
pub const HEADER_LEN: usize = 14;
/// Length of one VLAN tag.
pub const VLAN_TAG_LEN: usize = 4;
/// Most VLAN tags [`parse`](crate::parse) walks (an S-tag and a C-tag).
///
/// decided: two tags cover 802.1ad provider bridging; a third tag is rejected
/// ([`ParseError::TooManyVlanTags`]) rather than walked without bound.
pub const MAX_VLAN_TAGS: usize = 2;

/// EtherType values this crate recognises.
pub mod ethertype {
    /// IPv4.
    pub const IPV4: u16 = 0x0800;
    /// IPv6.
    pub const IPV6: u16 = 0x86dd;
    /// ARP (not parsed: `ParseError::UnsupportedEtherType`).
    pub const ARP: u16 = 0x0806;
    /// IEEE 802.1Q customer VLAN tag.
    pub const VLAN: u16 = 0x8100;
    /// IEEE 802.1ad service VLAN tag (QinQ).
    pub const QINQ: u16 = 0x88a8;
}

/// A 48-bit MAC address.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// Parses `aa:bb:cc:dd:ee:ff` (two hex digits per octet, as `Display` writes it).
    pub fn parse(s: &str) -> Option<MacAddr> {
        let mut out = [0u8; 6];
        let mut parts = s.split(':');
        for b in &mut out {
            let p = parts.next()?;
            if p.len() != 2 {
                return None;
            }
            *b = u8::from_str_radix(p, 16).ok()?;
        }
        parts.next().is_none().then_some(MacAddr(out))
    }
}

impl core::fmt::Display for MacAddr {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let m = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            m[0], m[1], m[2], m[3], m[4], m[5]
        )
    }
}

/// A VLAN tag as read from the frame: its TPID and TCI, decoded by the accessors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VlanTag {
    /// The tag protocol identifier: [`ethertype::VLAN`] or [`ethertype::QINQ`].
    pub tpid: u16,
    /// The tag control information: PCP (3 bits) | DEI (1) | VID (12).
    pub tci: u16,
}

impl VlanTag {
    /// Priority code point (802.1p), 0..=7.
    pub const fn pcp(self) -> u8 {
        (self.tci >> 13) as u8
    }
    /// Drop eligible indicator.
    pub const fn dei(self) -> bool {
        self.tci & 0x1000 != 0
    }
    /// VLAN identifier, 0..=4095.
    pub const fn vid(self) -> u16 {
        self.tci & 0x0fff
    }
}

/// The link layer of a parsed frame.
///
/// The MACs are not copied here: they are always the frame's first 12 octets ([`dst_mac`],
/// [`src_mac`]), and writing them into every packet's [`PacketInfo`](crate::PacketInfo) would
/// cost the data plane about 12 instructions per packet that its common path never reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EthernetInfo {
    /// The outer tag (the S-tag of a QinQ frame, or the only tag).
    pub outer_vlan: Option<VlanTag>,
    /// The inner tag of a double-tagged frame.
    pub inner_vlan: Option<VlanTag>,
    /// The EtherType after the tags (IPv4 or IPv6 once parsing succeeded).
    pub ethertype: u16,
}

/// The destination MAC of `frame` (its first 6 octets); `None` for a shorter frame.
#[inline]
pub fn dst_mac(frame: &[u8]) -> Option<MacAddr> {
    frame.first_chunk::<6>().map(|m| MacAddr(*m))
}

/// The source MAC of `frame` (octets 6 to 11); `None` for a shorter frame.
#[inline]
pub fn src_mac(frame: &[u8]) -> Option<MacAddr> {
    frame
        .get(6..12)
        .and_then(|m| m.first_chunk::<6>())
        .map(|m| MacAddr(*m))
}

/// Parses the Ethernet header and up to [`MAX_VLAN_TAGS`] tags; returns the header and the
/// offset of the L3 header. With `vlan` false a tagged frame is
/// [`ParseError::UnsupportedEtherType`].
#[inline]
const fn is_tag(ethertype: u16) -> bool {
    matches!(ethertype, ethertype::VLAN | ethertype::QINQ)
}

/// Reads the tag at `offset` and the EtherType after it.
#[inline]
fn read_tag(frame: &[u8], offset: usize, tpid: u16) -> Result<(VlanTag, u16), ParseError> {
    if frame.len() < offset + VLAN_TAG_LEN {
        return Err(ParseError::Truncated {
            header: Header::Vlan,
            offset,
            needed: VLAN_TAG_LEN,
            available: frame.len() - offset,
        });
    }
    let tag = VlanTag {
        tpid,
        tci: be16(frame, offset),
    };
    Ok((tag, be16(frame, offset + 2)))
}

/// The tags and EtherType of a frame, and where its L3 header starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct LinkLayer {
    pub outer_vlan: Option<VlanTag>,
    pub inner_vlan: Option<VlanTag>,
    pub ethertype: u16,
    pub l3_offset: usize,
}

impl LinkLayer {
    /// The link-layer record of [`parse`](crate::parse)'s result.
    #[inline]
    pub fn info(&self) -> EthernetInfo {
        EthernetInfo {
            outer_vlan: self.outer_vlan,
            inner_vlan: self.inner_vlan,
            ethertype: self.ethertype,
        }
    }
}

/// Parses the Ethernet header and up to [`MAX_VLAN_TAGS`] tags. With `vlan` false a tagged
/// frame's EtherType is the TPID (and [`parse`](crate::parse) rejects it as unsupported).
#[inline]
pub(crate) fn parse_ethernet(frame: &[u8], vlan: bool) -> Result<LinkLayer, ParseError> {
    if frame.len() < HEADER_LEN {
        return Err(ParseError::Truncated {
            header: Header::Ethernet,
            offset: 0,
            needed: HEADER_LEN,
            available: frame.len(),
        });
    }
    let mut ethertype = be16(frame, 12);
    let mut outer_vlan = None;
    let mut inner_vlan = None;
    let mut offset = HEADER_LEN;
    // Unrolled for MAX_VLAN_TAGS = 2: the common untagged frame takes one branch.
    if vlan && is_tag(ethertype) {
        let (tag, next) = read_tag(frame, offset, ethertype)?;
        outer_vlan = Some(tag);
        ethertype = next;
        offset += VLAN_TAG_LEN;
        if is_tag(ethertype) {
            let (tag, next) = read_tag(frame, offset, ethertype)?;
            inner_vlan = Some(tag);
            ethertype = next;
            offset += VLAN_TAG_LEN;
            if is_tag(ethertype) {
                return Err(ParseError::TooManyVlanTags { max: MAX_VLAN_TAGS });
            }
        }
    }
    Ok(LinkLayer {
        outer_vlan,
        inner_vlan,
        ethertype,
        l3_offset: offset,
    })
}

/// Rewrites the destination and source MACs (router mode: next hop's MAC, our port's MAC).
/// No checksum covers them. A [`PacketInfo`](crate::PacketInfo) holds no MACs.
/// Fails, leaving the frame unchanged, on a buffer shorter than 12 bytes.
#[inline]
pub fn set_macs(frame: &mut [u8], dst: MacAddr, src: MacAddr) -> Result<(), MutateError> {
    let len = frame.len();
    let macs = frame.get_mut(..12).ok_or(MutateError::FrameMismatch {
        header: Header::Ethernet,
        offset: 0,
        len,
    })?;
    macs[..6].copy_from_slice(&dst.0);
    macs[6..].copy_from_slice(&src.0);
    Ok(())
}
