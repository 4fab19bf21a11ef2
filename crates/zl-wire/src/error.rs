//! The typed errors of parsing and rewriting. Every malformed input maps to one variant; nothing
//! in this crate panics on bad bytes.

/// The header a [`ParseError`] or [`MutateError`] refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Header {
    /// The Ethernet header.
    Ethernet,
    /// An 802.1Q / 802.1ad tag.
    Vlan,
    /// The IPv4 header.
    Ipv4,
    /// The IPv6 fixed header.
    Ipv6,
    /// An IPv6 extension header.
    Ipv6Extension,
    /// The congestion-control extension header of priority-weighted ECN RED.
    CcExtension,
    /// The TCP header.
    Tcp,
    /// The UDP header.
    Udp,
}

impl core::fmt::Display for Header {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Header::Ethernet => "Ethernet",
            Header::Vlan => "802.1Q/802.1ad tag",
            Header::Ipv4 => "IPv4",
            Header::Ipv6 => "IPv6",
            Header::Ipv6Extension => "IPv6 extension header",
            Header::CcExtension => "congestion-control extension header",
            Header::Tcp => "TCP",
            Header::Udp => "UDP",
        })
    }
}

/// Why [`parse`](crate::parse) rejected a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum ParseError {
    /// The bytes end (frame end, or the end of the IP packet for headers inside it) before the
    /// header does.
    #[error("{header} truncated: needs {needed} bytes at offset {offset}, {available} available")]
    Truncated {
        /// The header cut short.
        header: Header,
        /// Where it starts in the frame.
        offset: usize,
        /// The bytes it needs.
        needed: usize,
        /// The bytes there are from `offset`.
        available: usize,
    },
    /// Not IPv4 or IPv6 (ARP, LLDP, ...), or a VLAN tag while VLAN parsing is off.
    #[error("unsupported EtherType {0:#06x}")]
    UnsupportedEtherType(u16),
    /// More stacked VLAN tags than [`MAX_VLAN_TAGS`](crate::MAX_VLAN_TAGS).
    #[error("more than {max} VLAN tags")]
    TooManyVlanTags {
        /// The most tags walked.
        max: usize,
    },
    /// The IP version nibble disagrees with the EtherType.
    #[error("IP version {found} where the EtherType announced {expected}")]
    IpVersionMismatch {
        /// The version the EtherType announced.
        expected: u8,
        /// The version nibble found.
        found: u8,
    },
    /// IPv4 IHL below 5 (a header is at least 20 bytes).
    #[error("IPv4 IHL {0} below the minimum of 5")]
    BadIhl(u8),
    /// IPv4 total length below the header length.
    #[error("IPv4 total length {total_len} below the header length {header_len}")]
    TotalLengthTooSmall {
        /// The total length field.
        total_len: u16,
        /// IHL * 4.
        header_len: usize,
    },
    /// The IP packet claims more bytes than the frame holds.
    #[error("IP packet length {claimed} exceeds the {available} bytes left in the frame")]
    LengthBeyondFrame {
        /// The IP packet's length, as its header gives it.
        claimed: usize,
        /// The frame bytes from the IP header on.
        available: usize,
    },
    /// The IPv4 header checksum does not verify (only when
    /// [`ParseConfig::verify_ipv4_checksum`](crate::ParseConfig::verify_ipv4_checksum) is set).
    #[error("IPv4 header checksum {0:#06x} does not verify")]
    BadIpv4Checksum(u16),
    /// A TCP data offset below 5 or past the end of the IP packet.
    #[error("TCP data offset {0} invalid")]
    BadTcpDataOffset(u8),
    /// A hop-by-hop options header anywhere but directly after the IPv6 header (RFC 8200 §4.1).
    #[error("hop-by-hop options header not first in the chain")]
    HopByHopNotFirst,
    /// The extension-header chain is longer than
    /// [`ParseConfig::max_ext_headers`](crate::ParseConfig::max_ext_headers).
    #[error("more than {max} IPv6 extension headers")]
    TooManyExtHeaders {
        /// The most extension headers walked.
        max: u8,
    },
}

/// Why a rewrite was refused. The frame is left unchanged whenever one is returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, thiserror::Error)]
pub enum MutateError {
    /// The buffer is shorter than the offsets in the [`PacketInfo`](crate::PacketInfo) need:
    /// it is not the frame that was parsed.
    #[error("{header} at offset {offset} does not fit in a {len}-byte frame")]
    FrameMismatch {
        /// The header the rewrite needed.
        header: Header,
        /// Where the parse found it.
        offset: usize,
        /// The buffer's length.
        len: usize,
    },
    /// The packet carries no congestion-control extension header.
    #[error("no congestion-control extension header")]
    NoCcExtension,
    /// A DSCP above 63.
    #[error("DSCP {0} out of range 0..=63")]
    InvalidDscp(u8),
}
