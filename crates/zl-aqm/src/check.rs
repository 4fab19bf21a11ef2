//! Parameter checks shared by every `XParams::validate`: each failure names the parameter as
//! written in config and the rule it broke.

use crate::AqmConfigError;

pub(crate) fn err(param: &'static str, value: impl ToString, expected: &str) -> AqmConfigError {
    AqmConfigError {
        param,
        value: value.to_string(),
        expected: expected.to_string(),
    }
}

/// `0 < v <= 1` (a probability that must be able to act, or an EWMA weight).
pub(crate) fn unit_open_closed(param: &'static str, v: f64) -> Result<f64, AqmConfigError> {
    if v > 0.0 && v <= 1.0 {
        Ok(v)
    } else {
        Err(err(param, v, &format!("0 < {param} <= 1")))
    }
}

/// `0 <= v <= 1`.
pub(crate) fn unit_closed(param: &'static str, v: f64) -> Result<f64, AqmConfigError> {
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(err(param, v, &format!("0 <= {param} <= 1")))
    }
}

/// `0 <= v < inf`.
pub(crate) fn non_negative(param: &'static str, v: f64) -> Result<f64, AqmConfigError> {
    if v >= 0.0 && v.is_finite() {
        Ok(v)
    } else {
        Err(err(param, v, &format!("0 <= {param}, finite")))
    }
}

/// `lo < hi`, both already checked non-negative; reported against `hi`'s name.
pub(crate) fn ordered(
    hi_param: &'static str,
    lo_param: &'static str,
    lo: f64,
    hi: f64,
) -> Result<(), AqmConfigError> {
    if hi > lo && hi.is_finite() {
        Ok(())
    } else {
        Err(err(
            hi_param,
            hi,
            &format!("{lo_param} ({lo}) < {hi_param}, finite"),
        ))
    }
}
