//! Zero-copy packet views for the zlrouter data plane: Ethernet with 802.1Q / 802.1ad (QinQ)
//! tags, IPv4 with options, IPv6 with its extension-header chain (including the
//! congestion-control extension header of docs/algorithms/wire.md), TCP and UDP ports; flow keys
//! hashed to [`FlowId`]; and the in-place rewrites a router applies (ECN CE marking, DSCP, TTL,
//! MACs).
//!
//! # Where it sits
//!
//! Bottom of the stack, beside `zl-core`: the data plane (an I/O backend hands it a frame)
//! calls [`parse`] once per packet, builds the AQM's `PacketMeta` from the [`PacketInfo`]
//! (flow, ECN, DSCP, extension-header weight), and after the AQM's verdict applies
//! [`mark`] / [`set_ce`] / [`set_dscp`] / [`decrement_ttl`] / [`set_macs`] to the same bytes.
//!
//! # Contract
//!
//! - [`parse`] never panics, on any bytes: a malformed frame (truncated, bad IHL, a length
//!   beyond the frame, an extension-header chain that runs past the packet or is longer than
//!   [`ParseConfig::max_ext_headers`]) is a [`ParseError`].
//! - Once [`parse`] succeeds, no accessor panics: every offset in the [`PacketInfo`], with the
//!   length of the header it names, lies inside the frame, and the rewrites check the buffer
//!   they are given against those offsets ([`MutateError::FrameMismatch`] otherwise).
//! - No allocation, no clock, no randomness: the hash seed is configuration.
//! - Fixed offsets on the per-packet path; `etherparse` serves only to build packets in tests.
//!
//! # Example
//!
//! ```
//! use zl_wire::{mark, parse, vectors::IPV4_TCP, Ecn, MarkOutcome, ParseConfig};
//!
//! let cfg = ParseConfig::default();
//! let mut frame = IPV4_TCP;
//! let mut info = parse(&frame, &cfg)?;
//! assert_eq!(info.ecn(), Ecn::Ect0);
//! // The AQM said "mark": CE is set and the IPv4 header checksum updated in place.
//! assert_eq!(mark(&mut frame, &mut info)?, MarkOutcome::Ce);
//! assert_eq!(parse(&frame, &cfg)?.ecn(), Ecn::Ce);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The IPv4 header checksum is updated incrementally (RFC 1624 eqn. 3) by every rewrite that
//! touches the header; see [`checksum`].
//!
//! # Layers
//!
//! Each module uses only those on the lines above it (`scripts/module-cycles` checks it):
//! `checksum`, `error`, `flow` (flow keys and their hash), `ip` (what IPv4 and IPv6 share)
//! and `vectors` (sample frames); `cc_ext`, `ethernet` and `ipv4`; `ipv6`; `parse` (the one
//! parse of a frame); `icmp` (the errors a router writes) and `mutate` (the in-place
//! rewrites).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cc_ext;
pub mod checksum;
mod error;
pub mod ethernet;
mod flow;
pub mod icmp;
mod ip;
pub mod ipv4;
pub mod ipv6;
pub mod mutate;
mod parse;
pub mod vectors;

/// The big-endian 16-bit word at `b[at..at + 2]`; the caller has checked the bounds.
#[inline]
pub(crate) fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

pub use cc_ext::{CcExt, CcExtRepr};
pub use error::{Header, MutateError, ParseError};
pub use ethernet::{set_macs, EthernetInfo, MacAddr, VlanTag, MAX_VLAN_TAGS};
pub use flow::{host_hash, host_hash_v4, FlowKey, FlowKeyKind, Ports};
pub use icmp::{error_allowed, write_error, write_error_in_place, IcmpBuildError, IcmpError};
pub use ip::Fragment;
pub use mutate::{
    decrement_ttl, decrement_ttl_plain, decrement_ttl_plain_ipv4, mark, set_cc_ext_ecn, set_ce,
    set_dscp, MarkOutcome, QosHeaders, TtlOutcome,
};
pub use parse::{
    parse, parse_into, parse_into_common, parse_into_general, IpVersion, PacketInfo, ParseConfig,
    ParseConfigError, PlainIpv4,
};
pub use zl_core::{Ecn, FlowId};
