//! The congestion-control IPv6 extension header of Ueno, Kimura, Ebihara (IPSJ 1999, figure 3;
//! docs/algorithms/wire.md).
//!
//! 8 octets:
//!
//! ```text
//!  octet 0: Next Header      octet 1: Hdr Ext Len (0: length is 8 + 8 * value octets)
//!  octet 2: bit 7 ECN | bit 6 CI | bits 5..0 flags (zero)
//!  octet 3: weight w (0..=255; 0 turns priority control off, eqn. 3 of the paper)
//!  octets 4..7: reserved (zero)
//! ```
//!
//! decided (docs/algorithms/wire.md): the paper's figure gives neither bit positions nor a header
//! type number; we use Next Header 253 (RFC 3692 / RFC 4727 experimental) by default, configurable
//! through [`ParseConfig::cc_ext_next_header`](crate::ParseConfig::cc_ext_next_header), the ECN bit
//! at octet 2 bit 7, the CI bit at octet 2 bit 6 and the weight in octet 3. A Hdr Ext Len above 0
//! is accepted and skipped as a longer header (room the paper reserves "for future use").

use crate::error::{Header, MutateError};

/// Next Header value announcing the header (RFC 3692 experimental), the default.
pub const DEFAULT_NEXT_HEADER: u8 = 253;
/// Length of the header with Hdr Ext Len 0.
pub const HEADER_LEN: usize = 8;
/// Octet holding the ECN and CI bits.
pub const FLAGS_OCTET: usize = 2;
/// Octet holding the weight.
pub const WEIGHT_OCTET: usize = 3;
/// The ECN bit, set by a congested router.
pub const ECN_BIT: u8 = 0x80;
/// The CI (congestion indication) bit, set by the receiver in ACKs.
pub const CI_BIT: u8 = 0x40;

/// The header as found in a parsed packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct CcExt {
    /// Offset of the header's first octet in the frame.
    pub offset: usize,
    /// The ECN bit: a router on the path marked the packet.
    pub ecn: bool,
    /// The CI bit: the receiver echoes a mark (ACKs).
    pub ci: bool,
    /// The priority weight `w` of eqn. 3.
    pub weight: u8,
}

impl CcExt {
    /// Reads the fields of a header starting at `frame[offset]`; the caller has checked that
    /// the header's octets lie inside the packet.
    pub(crate) fn read(frame: &[u8], offset: usize) -> CcExt {
        let flags = frame[offset + FLAGS_OCTET];
        CcExt {
            offset,
            ecn: flags & ECN_BIT != 0,
            ci: flags & CI_BIT != 0,
            weight: frame[offset + WEIGHT_OCTET],
        }
    }
}

/// The header's content, for building packets (senders, simulators, tests).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct CcExtRepr {
    /// The protocol of the header that follows.
    pub next_header: u8,
    /// The ECN bit: congestion was signalled on the path.
    pub ecn: bool,
    /// The CI bit of the priority-ECN RED header.
    pub ci: bool,
    /// The priority weight `w` (0 disables priority control).
    pub weight: u8,
}

impl CcExtRepr {
    /// The 8 octets of the header (Hdr Ext Len 0, flags and reserved octets zero).
    pub const fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut flags = 0;
        if self.ecn {
            flags |= ECN_BIT;
        }
        if self.ci {
            flags |= CI_BIT;
        }
        [self.next_header, 0, flags, self.weight, 0, 0, 0, 0]
    }

    /// Writes the header into the first 8 octets of `buf`.
    pub fn emit(&self, buf: &mut [u8]) -> Result<(), MutateError> {
        let len = buf.len();
        let dst = buf
            .get_mut(..HEADER_LEN)
            .ok_or(MutateError::FrameMismatch {
                header: Header::CcExtension,
                offset: 0,
                len,
            })?;
        dst.copy_from_slice(&self.to_bytes());
        Ok(())
    }
}
