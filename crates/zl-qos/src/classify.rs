//! DSCP classifier and re-marker: DSCP (IPv4 TOS or IPv6 traffic class, upper six bits) ->
//! class and incoming color through a 64-entry table; after metering, color -> the class's
//! AFx1/AFx2/AFx3 code point (RFC 2597 §6).
//!
//! Standard code points (RFC 2474, RFC 2597, RFC 3246): CSn = 8n; AFxy = 8x + 2y; EF = 46.
//! The standard table maps AFxy to the class named `afx` with color y-1 (AFx1 green, AFx2
//! yellow, AFx3 red), EF to `ef`, CSn to `csn` and CS0 to `be`, each only where a class of
//! that name is configured; explicit entries override it. Code points that map nowhere go to
//! the default class (counted as unmapped), as do packets the data plane could not parse
//! (`dscp = None`, counted as unparsed). The data plane parses headers; this module takes the
//! code point only.

use serde::{Deserialize, Serialize};
use zl_core::Color;

use crate::error::QosConfigError;

/// Expedited Forwarding (RFC 3246).
pub const EF: u8 = 46;

/// AFxy (RFC 2597): `x` in 1..=4, `y` in 1..=3.
pub const fn af(x: u8, y: u8) -> u8 {
    8 * x + 2 * y
}

/// Class Selector n (RFC 2474): `n` in 0..=7.
pub const fn cs(n: u8) -> u8 {
    8 * n
}

/// A code point as written in config: a number 0..=63 or a name (`af11`, `ef`, `cs3`, ...).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum DscpSpec {
    /// The code point as a number, 0..=63.
    Number(u8),
    /// The code point by name (`ef`, `af11`..`af43`, `cs0`..`cs7`, `be`).
    Name(String),
}

impl DscpSpec {
    /// The 6-bit code point, or `None` if out of range or not a known name.
    pub fn value(&self) -> Option<u8> {
        match self {
            DscpSpec::Number(n) => (*n < 64).then_some(*n),
            DscpSpec::Name(s) => dscp_by_name(s),
        }
    }
}

/// `af11`..`af43`, `ef`, `cs0`..`cs7`, `be` / `default` (= CS0), case-insensitive.
pub fn dscp_by_name(name: &str) -> Option<u8> {
    let s = name.to_ascii_lowercase();
    let b = s.as_bytes();
    match b {
        b"ef" => Some(EF),
        b"be" | b"default" => Some(0),
        [b'a', b'f', x @ b'1'..=b'4', y @ b'1'..=b'3'] => Some(af(x - b'0', y - b'0')),
        [b'c', b's', n @ b'0'..=b'7'] => Some(cs(n - b'0')),
        _ => None,
    }
}

/// One explicit table entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DscpRule {
    /// The code point this entry maps.
    pub dscp: DscpSpec,
    /// The class it goes to, by name.
    pub class: String,
    /// The incoming color it carries (for color-aware meters). Default green.
    #[serde(default)]
    pub color: Color,
}

/// Result of a lookup.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// The code point is in the table.
    Mapped {
        /// The class index.
        class: usize,
        /// The entry's incoming color.
        color: Color,
    },
    /// No entry: the default class, green.
    Unmapped {
        /// The default class's index.
        class: usize,
    },
    /// No code point (unparsable packet or value > 63): the default class, green.
    Unparsed {
        /// The default class's index.
        class: usize,
    },
}

impl Lookup {
    /// The class index, whatever the case.
    #[inline]
    pub fn class(self) -> usize {
        match self {
            Lookup::Mapped { class, .. }
            | Lookup::Unmapped { class }
            | Lookup::Unparsed { class } => class,
        }
    }
    /// The incoming color: the entry's when mapped, else green.
    #[inline]
    pub fn color(self) -> Color {
        match self {
            Lookup::Mapped { color, .. } => color,
            _ => Color::Green,
        }
    }
}

/// The 64-entry DSCP table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DscpTable {
    entries: [Option<(u8, Color)>; 64],
    default_class: usize,
}

impl DscpTable {
    /// Builds the table over the configured `class_names`: the standard mapping when
    /// `standard` is true, then `rules` on top. Errors name the rule's key.
    pub fn build(
        class_names: &[String],
        default_class: &str,
        standard: bool,
        rules: &[DscpRule],
    ) -> Result<Self, QosConfigError> {
        let find = |n: &str| class_names.iter().position(|c| c.eq_ignore_ascii_case(n));
        let default = find(default_class).ok_or_else(|| {
            QosConfigError::new(
                "default_class",
                format!("`{default_class}` is not a configured class"),
            )
        })?;
        let mut entries = [None; 64];
        if standard {
            for (dscp, entry) in entries.iter_mut().enumerate() {
                *entry = standard_entry(dscp as u8)
                    .and_then(|(name, color)| find(&name).map(|c| (c as u8, color)));
            }
        }
        for (i, r) in rules.iter().enumerate() {
            let dscp = r.dscp.value().ok_or_else(|| {
                QosConfigError::new(
                    format!("dscp[{i}].dscp"),
                    format!("{:?} is not a code point 0..=63 or a known name", r.dscp),
                )
            })?;
            let class = find(&r.class).ok_or_else(|| {
                QosConfigError::new(
                    format!("dscp[{i}].class"),
                    format!("`{}` is not a configured class", r.class),
                )
            })?;
            entries[dscp as usize] = Some((class as u8, r.color));
        }
        Ok(DscpTable {
            entries,
            default_class: default,
        })
    }

    /// Class and incoming color of a packet with code point `dscp`.
    #[inline]
    pub fn lookup(&self, dscp: Option<u8>) -> Lookup {
        match dscp {
            Some(d) if d < 64 => match self.entries[d as usize] {
                Some((class, color)) => Lookup::Mapped {
                    class: class as usize,
                    color,
                },
                None => Lookup::Unmapped {
                    class: self.default_class,
                },
            },
            _ => Lookup::Unparsed {
                class: self.default_class,
            },
        }
    }

    /// The index of the class unmapped and unparsable packets go to.
    pub fn default_class(&self) -> usize {
        self.default_class
    }
}

/// The standard class name and color of a code point.
fn standard_entry(dscp: u8) -> Option<(String, Color)> {
    if dscp == EF {
        return Some(("ef".into(), Color::Green));
    }
    if dscp == 0 {
        return Some(("be".into(), Color::Green));
    }
    if dscp % 8 == 0 {
        return Some((format!("cs{}", dscp / 8), Color::Green));
    }
    let (x, rest) = (dscp / 8, dscp % 8);
    if (1..=4).contains(&x) && matches!(rest, 2 | 4 | 6) {
        return Some((format!("af{x}"), Color::ALL[(rest / 2 - 1) as usize]));
    }
    None
}

/// The standard re-marking of an AF class named `afx`: `[AFx1, AFx2, AFx3]`.
pub fn standard_remark(class_name: &str) -> Option<[u8; 3]> {
    let b = class_name.as_bytes();
    match b {
        [a, f, x @ b'1'..=b'4']
            if a.eq_ignore_ascii_case(&b'a') && f.eq_ignore_ascii_case(&b'f') =>
        {
            let x = x - b'0';
            Some([af(x, 1), af(x, 2), af(x, 3)])
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_code_points() {
        assert_eq!(af(1, 1), 10);
        assert_eq!(af(4, 3), 38);
        assert_eq!(dscp_by_name("AF22"), Some(20));
        assert_eq!(dscp_by_name("cs7"), Some(56));
        assert_eq!(dscp_by_name("af44"), None);
        assert_eq!(standard_remark("af3"), Some([26, 28, 30]));
        assert_eq!(standard_remark("ef"), None);
    }
}
