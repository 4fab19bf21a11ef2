//! The error of a configuration the router cannot run, at the bottom of the crate: every
//! stage validates its own parameters and reports through it, and the config that aggregates
//! them ([`crate::config`]) only adds the keys' place in the file.

/// A configuration the router cannot run.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    /// Bad syntax, a wrong type or an unknown key (the message names the key and the line).
    #[error("config syntax: {0}")]
    Syntax(String),
    /// A QoS value outside what is allowed (`zl_qos` states the value and the rule together).
    #[error("invalid `{key}`: {reason}")]
    Qos { key: String, reason: String },
    /// A value outside what is allowed.
    #[error("invalid `{key}` = {value}: expected {expected}")]
    Invalid {
        key: String,
        value: String,
        expected: String,
    },
}

pub(crate) fn invalid(
    key: impl Into<String>,
    value: impl ToString,
    expected: impl Into<String>,
) -> ConfigError {
    ConfigError::Invalid {
        key: key.into(),
        value: value.to_string(),
        expected: expected.into(),
    }
}

/// A traffic source's parameter error is a config error on its key.
impl From<zl_traffic::ParamError> for ConfigError {
    fn from(e: zl_traffic::ParamError) -> Self {
        ConfigError::Invalid {
            key: e.key,
            value: e.value,
            expected: e.expected,
        }
    }
}
