//! Helpers shared by the root integration tests.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;

use zl_core::Nanos;
use zl_dataplane::{build, Dataplane, NoObserver, RouterConfig, StopReason};

/// The repository root.
pub fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A fresh scratch directory under the target dir, unique to `name`.
pub fn scratch(name: &str) -> PathBuf {
    let dir = root().join("target").join("zlrouter-tests").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

/// Builds and runs `cfg` in virtual time to its end (plus its drain time).
pub fn run(cfg: &RouterConfig, base: &Path) -> (Dataplane, StopReason) {
    let mut dp = build(cfg, base).expect("config builds");
    let stop = AtomicBool::new(false);
    let reason = dp
        .run_virtual(
            Nanos::from_secs_f64(cfg.run.duration_s),
            Nanos::from_secs_f64(cfg.run.drain_s),
            &stop,
            Nanos::from_millis(100),
            &mut NoObserver,
        )
        .expect("run completes");
    (dp, reason)
}

/// The conservation identity, exactly: every received packet was forwarded, dropped by a
/// named cause, or is still queued; and the ports agree with the data plane's counts.
pub fn assert_conserved(dp: &Dataplane) {
    let t = dp.totals();
    assert_eq!(
        t.received,
        t.forwarded + t.dropped() + dp.queued(),
        "received = forwarded + dropped + queued ({t:?}, queued {})",
        dp.queued()
    );
    let rx: u64 = dp.port_counters().iter().map(|(_, c)| c.rx_packets).sum();
    let tx: u64 = dp
        .port_counters()
        .iter()
        .map(|(_, c)| c.tx_packets + c.tx_dropped())
        .sum();
    assert_eq!(rx, t.received, "ports' rx = data plane's received");
    assert_eq!(
        tx, t.forwarded,
        "ports' tx + tx drops = data plane's forwarded"
    );
    let groups: u64 = dp.groups().iter().map(|g| g.fate.received).sum();
    if !dp.groups().is_empty() {
        assert_eq!(groups, t.received, "flow groups account for every packet");
        for g in dp.groups() {
            assert!(
                g.fate.forwarded + g.fate.dropped() <= g.fate.received,
                "group {}",
                g.name
            );
        }
    }
    // Between polls no buffer is in flight: what the pool lent out is what is queued.
    assert_eq!(
        dp.buffers_in_use() as u64,
        dp.queued(),
        "pool buffers in use = queued packets"
    );
}
