//! Live reconfiguration: a reload changes the running router's QoS while it
//! forwards. Under traffic (the generator in virtual time, and a threaded router on the wall
//! clock driven through `zlrouter reload` and SIGHUP): halving the shaper's rate halves the
//! egress rate within a second, queued packets stay queued, the conservation identity is
//! exact across the reload; an invalid config is refused with its error and the old one keeps
//! running; a reload that adds a port is refused naming the key.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use zl_core::Nanos;
use zl_dataplane::reload::{PendingReload, ReloadError, Reloader};
use zl_dataplane::view::RouterView;
use zl_dataplane::{build, Dataplane, Observer, RouterConfig};

/// A generator offering 12 Mbit/s of CBR frames to `out`, shaped to `shaper_bps`.
fn config(shaper_bps: u64, duration_s: f64, extra: &str) -> String {
    format!(
        r#"
[run]
duration_s = {duration_s}
drain_s = 0.5
seed = 3
{extra}

[metrics]
flow_estimate = true

[[ports]]
name = "gen"
kind = "generator"
mac = "02:00:00:00:00:01"
[[ports.generator.flows]]
name = "cbr"
count = 12
rate_bps = 1_000_000
size = 1000
arrival = "cbr"
src = "10.0.1.1"
dst = "192.0.2.1"

[[ports]]
name = "out"
kind = "sink"
mac = "02:00:00:00:00:02"

[qos]
shaper = {{ rate_bps = {shaper_bps} }}
[[qos.classes]]
name = "be"
weight = 1
max_packets = 300
aqm = {{ kind = "red", min_th = 20.0, max_th = 60.0 }}

[[routes]]
prefix = "0.0.0.0/0"
port = "out"
next_hop_mac = "02:00:00:00:00:fe"
"#
    )
}

fn reloader_of(dp: &mut Dataplane, cfg: &RouterConfig, path: &std::path::Path) -> Reloader {
    Reloader::new(
        Some(path.to_owned()),
        Box::new(|_| {}),
        cfg.clone(),
        dp.zombie_lists(),
        dp.routes(),
        dp.reload_slot(),
    )
}

/// Records `out`'s transmitted bytes every progress period, and reloads at `at`.
struct ReloadAt {
    at: Nanos,
    reloader: Reloader,
    new: Option<RouterConfig>,
    pending: Option<PendingReload>,
    /// (time, out's tx bytes, packets queued)
    samples: Vec<(Nanos, u64, u64)>,
    applied: Option<Nanos>,
}

impl<R: RouterView> Observer<R> for ReloadAt {
    fn progress(&mut self, now: Nanos, dp: &R) {
        let out = dp.port_counters(1).tx_bytes;
        self.samples.push((now, out, dp.queued()));
        if let Some(p) = self.pending.take() {
            // The loop installed it at the poll after `begin`, before this call: no wait.
            let done = self.reloader.finish(p, Duration::ZERO).expect("applied");
            assert!(done.changed.iter().any(|k| k.contains("qos")), "{done:?}");
            self.applied = Some(now);
        }
        if now >= self.at {
            if let Some(new) = self.new.take() {
                self.pending = Some(self.reloader.begin(new).expect("a live change"));
            }
        }
    }
}

/// Bytes per second of `out` between the samples nearest `from` and `to`.
fn rate(samples: &[(Nanos, u64, u64)], from: f64, to: f64) -> f64 {
    let at = |t: f64| {
        samples
            .iter()
            .min_by_key(|s| (s.0.as_secs_f64() - t).abs().to_bits())
            .copied()
            .unwrap()
    };
    let (a, b) = (at(from), at(to));
    (b.1 - a.1) as f64 / (b.0.as_secs_f64() - a.0.as_secs_f64())
}

#[test]
fn a_reload_in_virtual_time_halves_the_egress_rate_within_a_second_and_loses_nothing() {
    let dir = common::scratch("reload-virtual");
    let path = dir.join("router.toml");
    std::fs::write(&path, config(8_000_000, 8.0, "")).unwrap();
    let cfg = RouterConfig::load(&path).unwrap();
    let mut dp = build(&cfg, &dir).unwrap();
    let reloader = reloader_of(&mut dp, &cfg, &path);
    let new = RouterConfig::from_toml(&config(4_000_000, 8.0, "")).unwrap();
    let mut obs = ReloadAt {
        at: Nanos::from_secs(3),
        reloader,
        new: Some(new),
        pending: None,
        samples: Vec::new(),
        applied: None,
    };
    let stop = AtomicBool::new(false);
    dp.run_virtual(
        Nanos::from_secs(8),
        Nanos::from_millis(500),
        &stop,
        Nanos::from_millis(100),
        &mut obs,
    )
    .unwrap();
    let applied = obs.applied.expect("the reload was applied").as_secs_f64();
    assert!((3.0..3.3).contains(&applied), "applied at {applied} s");
    // A backlog builds at 12 Mbit/s offered against 8: the queue holds packets at the reload.
    let queued_at_reload = obs
        .samples
        .iter()
        .find(|s| s.0.as_secs_f64() >= 3.0)
        .unwrap()
        .2;
    assert!(queued_at_reload > 10, "{queued_at_reload}");
    let before = rate(&obs.samples, 1.0, 3.0);
    // Within one second of the reload the rate is the new one.
    let after = rate(&obs.samples, applied + 1.0, 7.5);
    let ratio = after / before;
    assert!(
        (ratio - 0.5).abs() < 0.03,
        "egress {before:.0} B/s -> {after:.0} B/s (ratio {ratio:.3})"
    );
    // Also the first second after it: the new rate from the reload on.
    let first = rate(&obs.samples, applied, applied + 1.0) / before;
    assert!((first - 0.5).abs() < 0.06, "first second after: {first:.3}");
    // Every packet accounted for across the reload: forwarded, dropped by a cause, or
    // counted at shutdown; nothing lost by the reload itself.
    common::assert_conserved(&dp);
    let running = obs.reloader.running();
    assert_eq!(
        running
            .qos
            .as_ref()
            .unwrap()
            .shaper
            .as_ref()
            .unwrap()
            .rate_bps,
        4_000_000
    );
}

/// With two transmit workers (`gen` on worker 0, `out` on worker 1) a reload that
/// halves the shaper is installed by the coordinator while it holds every worker's egress (one
/// handover), and reaches `out`, the other worker's port: its rate halves from the reload on
/// (virtual time: every clock read 1 µs), and every packet is counted.
#[test]
fn a_reload_with_two_transmit_workers_reaches_the_other_workers_port() {
    let dir = common::scratch("reload-mt");
    let path = dir.join("router.toml");
    let extra = "rx_workers = 1\ntx_workers = 2";
    std::fs::write(&path, config(8_000_000, 4.0, extra)).unwrap();
    let cfg = RouterConfig::load(&path).unwrap();
    let mut r = zl_dataplane::build_threaded(&cfg, &dir, &mut |_, _| Ok(None), 1).unwrap();
    assert_eq!(r.params().tx_workers, 2);
    let reloader = Reloader::new(
        Some(path.clone()),
        Box::new(|_| {}),
        cfg.clone(),
        r.zombie_lists(),
        r.routes(),
        r.reload_slot(),
    );
    let new = RouterConfig::from_toml(&config(4_000_000, 4.0, extra)).unwrap();
    let mut obs = ReloadAt {
        at: Nanos::from_secs(2),
        reloader,
        new: Some(new),
        pending: None,
        samples: Vec::new(),
        applied: None,
    };
    let t = AtomicU64::new(0);
    let clock = || Nanos(t.fetch_add(1_000, Ordering::Relaxed));
    let stop = AtomicBool::new(false);
    r.run(
        &clock,
        &stop,
        Nanos::from_millis(500),
        Nanos::from_millis(100),
        &mut obs,
    )
    .unwrap();
    let applied = obs.applied.expect("the reload was applied").as_secs_f64();
    assert!((2.0..2.3).contains(&applied), "applied at {applied} s");
    let before = rate(&obs.samples, 1.0, 2.0);
    let after = rate(&obs.samples, applied + 0.3, 3.9);
    let ratio = after / before;
    assert!(
        (ratio - 0.5).abs() < 0.05,
        "egress {before:.0} B/s -> {after:.0} B/s (ratio {ratio:.3})"
    );
    let t = r.totals();
    zl_testkit::conservation::assert_conserved(
        t.received,
        t.forwarded,
        t.dropped(),
        r.queued(),
        format_args!("{t:?}"),
    );
    assert_eq!(r.queued(), 0);
}

#[test]
fn an_invalid_config_or_a_new_port_is_refused_and_the_old_config_keeps_running() {
    let dir = common::scratch("reload-refused");
    let path = dir.join("router.toml");
    let good = config(8_000_000, 8.0, "");
    std::fs::write(&path, &good).unwrap();
    let cfg = RouterConfig::load(&path).unwrap();
    let mut dp = build(&cfg, &dir).unwrap();
    let mut reloader = reloader_of(&mut dp, &cfg, &path);

    // Not TOML.
    std::fs::write(&path, "[qos\nshaper = ").unwrap();
    let e = reloader.reload().unwrap_err();
    assert!(matches!(e, ReloadError::Invalid(_)), "{e}");
    // TOML that does not validate: the error names its key.
    std::fs::write(&path, good.replace("rate_bps = 8000000", "rate_bps = 0")).unwrap();
    let e = reloader.reload().unwrap_err().to_string();
    assert!(e.contains("invalid") && e.contains("rate_bps"), "{e}");
    // A new port.
    let with_port = good.replace(
        "[qos]",
        "[[ports]]\nname = \"extra\"\nkind = \"sink\"\nmac = \"02:00:00:00:00:03\"\n\n[qos]",
    );
    std::fs::write(&path, with_port).unwrap();
    let e = reloader.reload().unwrap_err();
    assert!(
        matches!(&e, ReloadError::NotLive { key, .. } if key == "ports"),
        "{e}"
    );
    assert!(e.to_string().contains("adds port `extra`"), "{e}");
    // A class's ring.
    std::fs::write(
        &path,
        good.replace("max_packets = 300", "max_packets = 600"),
    )
    .unwrap();
    let e = reloader.reload().unwrap_err().to_string();
    assert!(e.contains("`qos.classes[0].max_packets`"), "{e}");
    // Nothing was posted to the loop and the running config is the old one.
    assert_eq!(reloader.running(), &cfg);
    assert!(dp.reload_slot().take().is_none());
}

/// Kills the router this test started (by its PID, SIGKILL) if the test fails before it
/// stops it: a failed assertion must not leave a router running.
struct KillOnDrop(u32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &self.0.to_string()])
                .status();
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `zlrouter` with `args`, its exit status, stdout and stderr.
fn cli(args: &[&str]) -> (bool, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_zlrouter"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `out`'s transmitted bytes and the snapshot's time, from the live `/stats.json`.
fn out_tx(addr: &str) -> (f64, u64) {
    let (ok, text, err) = cli(&["stats", "--json", "--addr", addr]);
    assert!(ok, "{err}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let port = v["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "out")
        .unwrap();
    (
        v["time_s"].as_f64().unwrap(),
        port["tx_bytes"].as_u64().unwrap(),
    )
}

/// Egress bytes per second over about `secs` of the router's clock.
fn live_rate(addr: &str, secs: f64) -> f64 {
    let a = out_tx(addr);
    std::thread::sleep(Duration::from_secs_f64(secs));
    let b = out_tx(addr);
    (b.1 - a.1) as f64 / (b.0 - a.0)
}

#[test]
fn zlrouter_reload_and_sighup_change_a_running_threaded_router() {
    let dir = common::scratch("reload-cli");
    let path = dir.join("router.toml");
    let port = free_port();
    let addr = format!("127.0.0.1:{port}");
    // The threaded router: its generator offers on the wall clock, at a tenth of the rates
    // above (1.2 Mbit/s into 800 kbit/s), so that a loaded machine keeps up with it.
    let text = |rate: u64| {
        config(rate, 300.0, "rx_workers = 1")
            .replace("rate_bps = 1_000_000", "rate_bps = 100_000")
            .replace(
                "flow_estimate = true",
                &format!("flow_estimate = true\nlisten = \"{addr}\""),
            )
    };
    std::fs::write(&path, text(800_000)).unwrap();
    let running = common::spawn_until_progress(&["run", path.to_str().unwrap(), "--json"]);
    let _guard = KillOnDrop(running.child.id());

    // Settle, then the rate at 800 kbit/s.
    std::thread::sleep(Duration::from_secs(1));
    let before = live_rate(&addr, 1.5);

    std::fs::write(&path, text(400_000)).unwrap();
    let (ok, said, err) = cli(&["reload", "--addr", &addr]);
    assert!(ok, "{said}{err}");
    assert!(said.contains("reloaded:") && said.contains("qos"), "{said}");
    // Within one second of the reload the rate is the new one.
    std::thread::sleep(Duration::from_secs(1));
    let after = live_rate(&addr, 1.5);
    let ratio = after / before;
    assert!(
        (ratio - 0.5).abs() < 0.1,
        "egress {before:.0} B/s -> {after:.0} B/s (ratio {ratio:.3})"
    );

    // Refused: an invalid config (the old one keeps running), and a new port.
    std::fs::write(&path, text(0)).unwrap();
    let (ok, _, err) = cli(&["reload", "--addr", &addr]);
    assert!(!ok, "{err}");
    assert!(
        err.contains("rate_bps") && err.contains("old config keeps running"),
        "{err}"
    );
    let extra = text(400_000).replace(
        "[qos]",
        "[[ports]]\nname = \"extra\"\nkind = \"sink\"\nmac = \"02:00:00:00:00:03\"\n\n[qos]",
    );
    std::fs::write(&path, extra).unwrap();
    let (ok, _, err) = cli(&["reload", "--addr", &addr]);
    assert!(!ok && err.contains("`ports`"), "{err}");
    let still = live_rate(&addr, 1.0) / before;
    assert!((still - 0.5).abs() < 0.1, "after the refusals: {still:.3}");

    // SIGHUP reloads too: back to 800 kbit/s.
    std::fs::write(&path, text(800_000)).unwrap();
    let pid = running.child.id().to_string();
    assert!(std::process::Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .unwrap()
        .success());
    // The signal's reload runs on the control thread: wait until it is counted (bounded).
    let applied = |n: u32| {
        let (_, metrics, _) = cli(&["stats", "--raw", "--addr", &addr]);
        metrics.contains(&format!(
            "zlrouter_config_reloads_total{{result=\"applied\"}} {n}"
        ))
    };
    for _ in 0..100 {
        if applied(2) {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(applied(2), "the SIGHUP reload was not applied within 10 s");
    std::thread::sleep(Duration::from_secs(1));
    // Back up from half (within 20 %: a wall-clock run on a loaded 2-core machine).
    let back = live_rate(&addr, 1.5) / before;
    assert!(back > 0.8, "after SIGHUP: {back:.3}");

    let (out, rest) = common::signal_and_wait(running, "-TERM").expect("kill is available");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{rest}");
    assert!(rest.contains("SIGHUP: reloaded"), "{rest}");
    assert!(rest.contains("POST /reload: reload refused"), "{rest}");
    // Conserved across three reloads and two refusals.
    let [received, forwarded, dropped, queued] = common::final_totals(&stdout);
    zl_testkit::conservation::assert_conserved(received, forwarded, dropped, queued, &stdout);
}
