//! Fuzzes config reloads as they arrive: the re-read text goes through
//! `RouterConfig::from_toml` and then `zl_dataplane::reload::plan` against the running config
//! (the built-in default, what `zlrouter run` runs without a file).
//!
//! Checked: no panic; the answer is a plan or a typed refusal, and every refusal names a key
//! (`ports[1].kind`, `run.seed`, `qos.classes[0].aqm.p_max`, ...) that its message shows.
//! An allowed reload lists its changes by key, and the new config reloaded onto itself
//! changes nothing.
//!
//! decided: the way back (new -> running) is not planned: `plan` validates its second
//! argument, and validating the default config builds its `0.0.0.0/0` route into the
//! DIR-24-8 table (16.7 M entry stores, about 10 s under AddressSanitizer). For the same
//! reason the seeds route `198.51.100.0/24` where the default routes `0.0.0.0/0`.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use zl_dataplane::config::ConfigError;
use zl_dataplane::reload::{plan, ReloadError};
use zl_dataplane::{RouterConfig, DEFAULT_CONFIG};

fn running() -> &'static RouterConfig {
    static RUNNING: OnceLock<RouterConfig> = OnceLock::new();
    RUNNING.get_or_init(|| {
        let c = RouterConfig::from_toml(DEFAULT_CONFIG).expect("the default config parses");
        c.validate().expect("the default config is valid");
        c
    })
}

/// The key a refusal names, checked to appear in its message.
fn key_of(e: &ReloadError) -> &str {
    let key = match e {
        ReloadError::NotLive { key, .. } => key,
        ReloadError::Invalid(ConfigError::Invalid { key, .. } | ConfigError::Qos { key, .. }) => {
            key
        }
        ReloadError::Invalid(other) => panic!("a refusal that names no key: {other}"),
        // A `Reloader`'s own errors (no file, the loop did not answer): `plan` never gives them.
        ReloadError::NoFile | ReloadError::NotApplied(_) => panic!("not a plan's refusal: {e}"),
    };
    assert!(!key.is_empty(), "an empty key: {e}");
    assert!(e.to_string().contains(key.as_str()), "`{key}` not in: {e}");
    key
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(new) = RouterConfig::from_toml(&text) else {
        return;
    };
    match plan(running(), &new) {
        Err(e) => {
            key_of(&e);
        }
        Ok(p) => {
            assert!(p.keys().iter().all(|k| !k.is_empty()), "{p:?}");
            assert_eq!(p.is_empty(), p.keys().is_empty(), "{p:?}");
            // `plan` validated `new`.
            match plan(&new, &new) {
                Ok(same) => assert!(same.is_empty(), "reloaded onto itself it changes {same:?}"),
                Err(e) => panic!("a valid config reloaded onto itself is refused: {e}"),
            }
        }
    }
});
