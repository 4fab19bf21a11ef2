//! Where a packet's priority and weight come from (spec/02, "decided": the router takes `pri`
//! from a configurable source; `w` from the extension header when present, otherwise from
//! the configured default).

use serde::{Deserialize, Serialize};
use zl_wire::PacketInfo;

/// The source of the 4-bit priority `pri` (8 lowest .. 15 highest in the paper's use).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PrioritySourceKind {
    /// The top 4 bits of the IPv6 traffic class (the RFC 1883 priority position); for IPv4,
    /// the top 4 bits of the TOS octet.
    #[default]
    TrafficClassHigh,
    /// 8 + the 3-bit IP precedence (the DSCP class selector), so CS0 -> 8 ... CS7 -> 15.
    Precedence,
}

/// `[priority]` in config.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PrioritySource {
    #[serde(default)]
    pub source: PrioritySourceKind,
    /// Weight `w` of packets without the extension header (0 = priority control off).
    #[serde(default)]
    pub default_weight: u8,
}

impl PrioritySource {
    #[inline]
    pub fn priority(&self, info: &PacketInfo) -> u8 {
        match self.source {
            PrioritySourceKind::TrafficClassHigh => info.tos >> 4,
            PrioritySourceKind::Precedence => 8 + (info.tos >> 5),
        }
    }
    #[inline]
    pub fn weight(&self, info: &PacketInfo) -> u8 {
        match info.cc_ext {
            Some(h) => h.weight,
            None => self.default_weight,
        }
    }
}
