//! Ethernet II framing (IEEE 802.3 §3.2) with stacked 802.1Q (C-tag, TPID 0x8100) and
//! 802.1ad (S-tag, "QinQ", TPID 0x88a8) VLAN tags, and the MAC rewrite a router applies on
//! forwarding.
//!
//! Layout: destination MAC (6 octets), source MAC (6), then EtherType/TPID (2). A VLAN tag is
//! TPID (2) + TCI (2: PCP 3 bits, DEI 1 bit, VID 12 bits), followed by the next EtherType.

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
    pub const IPV4: u16 = 0x0800;
    pub const IPV6: u16 = 0x86dd;
    pub const ARP: u16 = 0x0806;
    /// IEEE 802.1Q customer VLAN tag.
    pub const VLAN: u16 = 0x8100;
    /// IEEE 802.1ad service VLAN tag (QinQ).
    pub const QINQ: u16 = 0x88a8;
}

/// A 48-bit MAC address.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MacAddr(pub [u8; 6]);

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

/// A VLAN tag as read from the frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct VlanTag {
    /// The tag protocol identifier: [`ethertype::VLAN`] or [`ethertype::QINQ`].
    pub tpid: u16,
    /// Priority code point (802.1p), 0..=7.
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN identifier, 0..=4095.
    pub vid: u16,
}

impl VlanTag {
    /// Decodes a tag from its TPID and TCI.
    pub const fn from_tci(tpid: u16, tci: u16) -> VlanTag {
        VlanTag {
            tpid,
            pcp: (tci >> 13) as u8,
            dei: tci & 0x1000 != 0,
            vid: tci & 0x0fff,
        }
    }
}

/// The link layer of a parsed frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EthernetInfo {
    pub dst: MacAddr,
    pub src: MacAddr,
    /// The outer tag (the S-tag of a QinQ frame, or the only tag).
    pub outer_vlan: Option<VlanTag>,
    /// The inner tag of a double-tagged frame.
    pub inner_vlan: Option<VlanTag>,
    /// The EtherType after the tags (IPv4 or IPv6 once parsing succeeded).
    pub ethertype: u16,
}

#[inline]
fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Parses the Ethernet header and up to [`MAX_VLAN_TAGS`] tags; returns the header and the
/// offset of the L3 header. With `vlan` false a tagged frame is
/// [`ParseError::UnsupportedEtherType`].
pub fn parse_ethernet(frame: &[u8], vlan: bool) -> Result<(EthernetInfo, usize), ParseError> {
    if frame.len() < HEADER_LEN {
        return Err(ParseError::Truncated {
            header: Header::Ethernet,
            offset: 0,
            needed: HEADER_LEN,
            available: frame.len(),
        });
    }
    let mut info = EthernetInfo {
        dst: MacAddr([frame[0], frame[1], frame[2], frame[3], frame[4], frame[5]]),
        src: MacAddr([frame[6], frame[7], frame[8], frame[9], frame[10], frame[11]]),
        outer_vlan: None,
        inner_vlan: None,
        ethertype: be16(frame, 12),
    };
    let mut offset = HEADER_LEN;
    let mut tags = 0;
    while vlan && matches!(info.ethertype, ethertype::VLAN | ethertype::QINQ) {
        if tags == MAX_VLAN_TAGS {
            return Err(ParseError::TooManyVlanTags { max: MAX_VLAN_TAGS });
        }
        if frame.len() < offset + VLAN_TAG_LEN {
            return Err(ParseError::Truncated {
                header: Header::Vlan,
                offset,
                needed: VLAN_TAG_LEN,
                available: frame.len() - offset,
            });
        }
        let tag = VlanTag::from_tci(info.ethertype, be16(frame, offset));
        if tags == 0 {
            info.outer_vlan = Some(tag);
        } else {
            info.inner_vlan = Some(tag);
        }
        info.ethertype = be16(frame, offset + 2);
        offset += VLAN_TAG_LEN;
        tags += 1;
    }
    Ok((info, offset))
}

/// Rewrites the destination and source MACs (router mode: next hop's MAC, our port's MAC).
/// No checksum covers them. A [`PacketInfo`](crate::PacketInfo) keeps the MACs as received.
/// Fails, leaving the frame unchanged, on a buffer shorter than 12 bytes.
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
