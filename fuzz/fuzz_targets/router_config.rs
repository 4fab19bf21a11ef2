//! Fuzzes the router's config loader: `RouterConfig::from_toml`, `validate`, and the build of a
//! data plane from whatever validates.
//!
//! Checked: no panic for any text. A config that validates either builds or fails with a
//! `BuildError` (a pcap file that is not there, a port kind this build opens elsewhere): the
//! supplier refuses every external port, and the build is `check_with_ports` (what
//! `zlrouter check` runs), which writes no file; `base` is an empty directory. The input is the TOML text itself (lossy UTF-8), so the corpus can be
//! seeded with `configs/*.toml`.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use zl_dataplane::{check_with_ports, RouterConfig};

fn base() -> &'static PathBuf {
    static BASE: OnceLock<PathBuf> = OnceLock::new();
    BASE.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("zl-fuzz-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a scratch directory for pcap outputs");
        dir
    })
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let Ok(cfg) = RouterConfig::from_toml(&text) else {
        return;
    };
    if cfg.validate().is_err() {
        return;
    }
    // Large but valid pools and queues are allowed by the config; keep the fuzzer's memory
    // bounded by building only modest ones.
    if cfg.run.pool_buffers.is_some_and(|n| n > 1 << 16) {
        return;
    }
    let _ = check_with_ports(&cfg, base(), &mut |_, _| Ok(None));
});
