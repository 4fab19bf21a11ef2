//! Configuration errors: every rejection names the config key and the reason.

use core::fmt;

/// A rejected QoS parameter. `key` is the path as written in config
/// (e.g. `classes[1].meter.pir_bps`); `reason` says what was wrong in words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct QosConfigError {
    /// The config key, as a path (`classes[1].meter.pir_bps`).
    pub key: String,
    /// What was wrong, in words.
    pub reason: String,
}

impl QosConfigError {
    /// An error naming `key` and the `reason`.
    pub fn new(key: impl Into<String>, reason: impl Into<String>) -> Self {
        QosConfigError {
            key: key.into(),
            reason: reason.into(),
        }
    }

    /// The same error with `prefix.` put in front of its key (nesting a sub-config's error).
    pub fn within(mut self, prefix: &str) -> Self {
        self.key = if self.key.is_empty() {
            prefix.to_string()
        } else {
            format!("{prefix}.{}", self.key)
        };
        self
    }
}

impl fmt::Display for QosConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid QoS parameter `{}`: {}", self.key, self.reason)
    }
}

impl std::error::Error for QosConfigError {}
