//! The C parameter structs to and from `zl_aqm` / `zl_zombie`'s own parameters: defaults come
//! from those crates (so the two never drift), and the `uint8_t` flags and selectors are
//! range-checked here; the numeric ranges are checked by the crates' `validate`.

use zl_aqm::{PieEstimator, PieParams, QueueUnit, RedParams, SredParams, ZlRedParams};
use zl_zombie::{OccurrenceMode, ZombieParams};

use crate::types::{ZlPieParams, ZlRedParams as CRed, ZlSredParams, ZlZlredParams, ZlZombieParams};

/// A flag that C passes as `uint8_t`: 0 or 1.
fn flag(name: &str, v: u8) -> Result<bool, String> {
    match v {
        0 => Ok(false),
        1 => Ok(true),
        _ => Err(format!("{name} = {v}: expected 0 or 1")),
    }
}

impl From<&ZombieParams> for ZlZombieParams {
    fn from(p: &ZombieParams) -> Self {
        ZlZombieParams {
            // MAX_M = 2^22 fits; a larger configured m is refused by validate anyway.
            m: u32::try_from(p.m).unwrap_or(u32::MAX),
            p_swap: p.p_swap,
            alpha: p.alpha.unwrap_or(0.0),
            occurrence: match p.occurrence {
                OccurrenceMode::Table => 0,
                OccurrenceMode::Scan => 1,
            },
        }
    }
}

/// The Zombie List's parameters (validated later by `ZombieParams::validate`).
pub(crate) fn zombie(p: &ZlZombieParams) -> Result<ZombieParams, String> {
    let occurrence = match p.occurrence {
        0 => OccurrenceMode::Table,
        1 => OccurrenceMode::Scan,
        v => {
            return Err(format!(
                "zombie.occurrence = {v}: expected 0 (table) or 1 (scan)"
            ))
        }
    };
    Ok(ZombieParams {
        m: p.m as usize,
        p_swap: p.p_swap,
        // 0 asks for the default 1/M; any other value is checked by validate.
        alpha: (p.alpha != 0.0).then_some(p.alpha),
        occurrence,
    })
}

impl From<&RedParams> for CRed {
    fn from(p: &RedParams) -> Self {
        CRed {
            min_th: p.min_th,
            max_th: p.max_th,
            max_p: p.max_p,
            w_q: p.w_q,
            idle_packet_bytes: p.idle_packet_bytes,
            gentle: u8::from(p.gentle),
            ecn: u8::from(p.ecn),
            unit: match p.unit {
                QueueUnit::Packets => 0,
                QueueUnit::Bytes => 1,
            },
        }
    }
}

/// RED's parameters.
pub(crate) fn red(p: &CRed) -> Result<RedParams, String> {
    Ok(RedParams {
        min_th: p.min_th,
        max_th: p.max_th,
        max_p: p.max_p,
        w_q: p.w_q,
        gentle: flag("gentle", p.gentle)?,
        ecn: flag("ecn", p.ecn)?,
        unit: match p.unit {
            0 => QueueUnit::Packets,
            1 => QueueUnit::Bytes,
            v => return Err(format!("unit = {v}: expected 0 (packets) or 1 (bytes)")),
        },
        idle_packet_bytes: p.idle_packet_bytes,
        ..RedParams::default()
    })
}

impl From<&SredParams> for ZlSredParams {
    fn from(p: &SredParams) -> Self {
        ZlSredParams {
            p_max: p.p_max,
            ecn: u8::from(p.ecn),
            zombie: (&p.zombie).into(),
        }
    }
}

/// SRED's parameters.
pub(crate) fn sred(p: &ZlSredParams) -> Result<SredParams, String> {
    Ok(SredParams {
        p_max: p.p_max,
        ecn: flag("ecn", p.ecn)?,
        zombie: zombie(&p.zombie)?,
    })
}

impl From<&ZlRedParams> for ZlZlredParams {
    fn from(p: &ZlRedParams) -> Self {
        ZlZlredParams {
            p_max: p.p_max,
            th_min: p.th_min,
            a: p.a,
            ecn: u8::from(p.ecn),
            zombie: (&p.zombie).into(),
        }
    }
}

/// ZL-RED's parameters.
pub(crate) fn zlred(p: &ZlZlredParams) -> Result<ZlRedParams, String> {
    Ok(ZlRedParams {
        p_max: p.p_max,
        th_min: p.th_min,
        a: p.a,
        ecn: flag("ecn", p.ecn)?,
        zombie: zombie(&p.zombie)?,
        isolation: None,
    })
}

impl From<&PieParams> for ZlPieParams {
    fn from(p: &PieParams) -> Self {
        ZlPieParams {
            target_ms: p.target_ms,
            t_update_ms: p.t_update_ms,
            max_burst_ms: p.max_burst_ms,
            alpha: p.alpha,
            beta: p.beta,
            dq_threshold_bytes: p.dq_threshold_bytes,
            ecn: u8::from(p.ecn),
            estimator: match p.estimator {
                PieEstimator::Rate => 0,
                PieEstimator::Timestamp => 1,
            },
        }
    }
}

/// PIE's parameters.
pub(crate) fn pie(p: &ZlPieParams) -> Result<PieParams, String> {
    Ok(PieParams {
        target_ms: p.target_ms,
        t_update_ms: p.t_update_ms,
        max_burst_ms: p.max_burst_ms,
        alpha: p.alpha,
        beta: p.beta,
        ecn: flag("ecn", p.ecn)?,
        estimator: match p.estimator {
            0 => PieEstimator::Rate,
            1 => PieEstimator::Timestamp,
            v => {
                return Err(format!(
                    "estimator = {v}: expected 0 (dequeue rate) or 1 (timestamp)"
                ))
            }
        },
        dq_threshold_bytes: p.dq_threshold_bytes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The C defaults convert back to the crates' defaults exactly.
    #[test]
    fn defaults_round_trip() {
        assert_eq!(
            red(&(&RedParams::default()).into()),
            Ok(RedParams::default())
        );
        assert_eq!(
            sred(&(&SredParams::default()).into()),
            Ok(SredParams::default())
        );
        assert_eq!(
            zlred(&(&ZlRedParams::default()).into()),
            Ok(ZlRedParams::default())
        );
        assert_eq!(
            pie(&(&PieParams::default()).into()),
            Ok(PieParams::default())
        );
        let timestamp = PieParams {
            estimator: PieEstimator::Timestamp,
            ecn: true,
            ..PieParams::default()
        };
        assert_eq!(pie(&(&timestamp).into()), Ok(timestamp));
        let explicit = ZombieParams {
            alpha: Some(0.01),
            occurrence: OccurrenceMode::Scan,
            ..ZombieParams::default()
        };
        assert_eq!(zombie(&(&explicit).into()), Ok(explicit));
    }

    /// Flags and selectors outside their values are refused with the field's name.
    #[test]
    fn out_of_range_selectors_are_named() {
        let mut p: CRed = (&RedParams::default()).into();
        p.gentle = 2;
        assert_eq!(red(&p).unwrap_err(), "gentle = 2: expected 0 or 1");
        p.gentle = 0;
        p.unit = 7;
        assert!(red(&p).unwrap_err().starts_with("unit = 7"));
        let mut z: ZlZombieParams = (&ZombieParams::default()).into();
        z.occurrence = 9;
        assert!(zombie(&z).unwrap_err().starts_with("zombie.occurrence = 9"));
        let mut pp: ZlPieParams = (&PieParams::default()).into();
        pp.estimator = 2;
        assert!(pie(&pp).unwrap_err().starts_with("estimator = 2"));
        pp.estimator = 0;
        pp.ecn = 3;
        assert_eq!(pie(&pp).unwrap_err(), "ecn = 3: expected 0 or 1");
    }
}
