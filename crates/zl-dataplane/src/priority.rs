//! Where a packet's priority and weight come from (docs/algorithms/priority-ecn-red.md, "decided":
//! the router takes `pri` from a configurable source — the top four bits of the IPv6 traffic class,
//! 8 + the IP precedence, or a table from DSCP — and `w` from the extension header when present,
//! otherwise from the configured default).
//!
//! [`PriorityParams`] (config) is validated into a [`PriorityMap`]: one 256-entry table from
//! the TOS / traffic-class octet to `pri`, whatever the source, so the per-packet cost is one
//! load.

use serde::{Deserialize, Serialize};
use zl_qos::DscpSpec;
use zl_wire::PacketInfo;

use crate::error::{invalid, ConfigError};

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
    /// `table` maps code points to priorities; others get `table_default`.
    DscpTable,
}

/// One `[[priority.table]]` entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DscpPriority {
    /// A code point 0..=63 or a name (`ef`, `af11`, `cs3`, ...).
    pub dscp: DscpSpec,
    /// `pri`, 0..=15.
    pub priority: u8,
}

/// `[priority]` in config.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriorityParams {
    #[serde(default)]
    pub source: PrioritySourceKind,
    /// Weight `w` of packets without the extension header (0 = priority control off).
    #[serde(default)]
    pub default_weight: u8,
    /// For `source = "dscp-table"`.
    #[serde(default)]
    pub table: Vec<DscpPriority>,
    /// Priority of code points the table does not list; default 8 (the paper's lowest).
    #[serde(default = "eight")]
    pub table_default: u8,
}

fn eight() -> u8 {
    8
}

impl Default for PriorityParams {
    fn default() -> Self {
        PriorityParams {
            source: PrioritySourceKind::default(),
            default_weight: 0,
            table: Vec::new(),
            table_default: eight(),
        }
    }
}

/// The validated mapping, used per packet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PriorityMap {
    by_tos: [u8; 256],
    default_weight: u8,
}

impl Default for PriorityMap {
    fn default() -> Self {
        // Cannot fail: the default parameters are valid.
        PriorityParams::default().build().unwrap_or(PriorityMap {
            by_tos: [0; 256],
            default_weight: 0,
        })
    }
}

impl PriorityParams {
    /// Checks the table and precomputes `pri` for every TOS / traffic-class octet.
    pub fn build(&self) -> Result<PriorityMap, ConfigError> {
        if self.table_default > 15 {
            return Err(invalid(
                "priority.table_default",
                self.table_default,
                "0..=15",
            ));
        }
        if self.source != PrioritySourceKind::DscpTable && !self.table.is_empty() {
            return Err(invalid(
                "priority.table",
                "(present)",
                "a table only with source = \"dscp-table\"",
            ));
        }
        let mut by_dscp = [self.table_default; 64];
        for (i, e) in self.table.iter().enumerate() {
            let d = e.dscp.value().ok_or_else(|| {
                invalid(
                    format!("priority.table[{i}].dscp"),
                    format!("{:?}", e.dscp),
                    "0..=63 or a name such as ef, af11, cs3",
                )
            })?;
            if e.priority > 15 {
                return Err(invalid(
                    format!("priority.table[{i}].priority"),
                    e.priority,
                    "0..=15",
                ));
            }
            by_dscp[d as usize] = e.priority;
        }
        let mut by_tos = [0u8; 256];
        for (tos, p) in by_tos.iter_mut().enumerate() {
            let tos = tos as u8;
            *p = match self.source {
                PrioritySourceKind::TrafficClassHigh => tos >> 4,
                PrioritySourceKind::Precedence => 8 + (tos >> 5),
                PrioritySourceKind::DscpTable => by_dscp[(tos >> 2) as usize],
            };
        }
        Ok(PriorityMap {
            by_tos,
            default_weight: self.default_weight,
        })
    }
}

impl PriorityMap {
    #[inline]
    pub fn priority(&self, info: &PacketInfo) -> u8 {
        self.by_tos[info.tos as usize]
    }
    #[inline]
    pub fn weight(&self, info: &PacketInfo) -> u8 {
        match info.cc_ext {
            Some(h) => h.weight,
            None => self.default_weight,
        }
    }
    /// The weight of a packet without the congestion-control extension header.
    #[inline]
    pub fn default_weight(&self) -> u8 {
        self.default_weight
    }
    /// `pri` of a TOS / traffic-class octet.
    #[inline]
    pub fn of_tos(&self, tos: u8) -> u8 {
        self.by_tos[tos as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_source_maps_the_octet_as_documented() {
        let tc = PriorityParams::default().build().unwrap();
        assert_eq!(tc.of_tos(0xd2), 13); // top four bits of 1101_0010
        let prec = PriorityParams {
            source: PrioritySourceKind::Precedence,
            ..PriorityParams::default()
        }
        .build()
        .unwrap();
        assert_eq!(prec.of_tos(0), 8); // CS0
        assert_eq!(prec.of_tos(46 << 2), 13); // EF = 101110: precedence 5
        assert_eq!(prec.of_tos(0xff), 15);
        let table = PriorityParams {
            source: PrioritySourceKind::DscpTable,
            table: vec![
                DscpPriority {
                    dscp: DscpSpec::Name("ef".into()),
                    priority: 15,
                },
                DscpPriority {
                    dscp: DscpSpec::Number(10),
                    priority: 11,
                },
            ],
            ..PriorityParams::default()
        }
        .build()
        .unwrap();
        assert_eq!(table.of_tos((46 << 2) | 0b10), 15, "ECN bits ignored");
        assert_eq!(table.of_tos(10 << 2), 11);
        assert_eq!(table.of_tos(0), 8, "unlisted: table_default");
    }

    #[test]
    fn bad_tables_are_rejected_with_their_key() {
        let bad = |t: Vec<DscpPriority>| {
            PriorityParams {
                source: PrioritySourceKind::DscpTable,
                table: t,
                ..PriorityParams::default()
            }
            .build()
            .unwrap_err()
            .to_string()
        };
        let e = bad(vec![DscpPriority {
            dscp: DscpSpec::Number(64),
            priority: 9,
        }]);
        assert!(e.contains("priority.table[0].dscp"), "{e}");
        let e = bad(vec![DscpPriority {
            dscp: DscpSpec::Number(1),
            priority: 16,
        }]);
        assert!(
            e.contains("priority.table[0].priority") && e.contains("0..=15"),
            "{e}"
        );
        let e = PriorityParams {
            table: vec![DscpPriority {
                dscp: DscpSpec::Number(1),
                priority: 9,
            }],
            ..PriorityParams::default()
        }
        .build()
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("priority.table") && e.contains("dscp-table"),
            "{e}"
        );
    }
}
