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

/// A fresh scratch directory for one test, unique to `name` within the test binary
/// (`zl_testkit::scratch`, which every test of the workspace uses).
pub fn scratch(name: &str) -> PathBuf {
    zl_testkit::scratch(name)
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

/// The final statistics of a run started with `--json` (its whole standard output, one JSON
/// document): `[received, forwarded, dropped, queued]` from its `totals`.
pub fn final_totals(stdout: &str) -> [u64; 4] {
    let v: serde_json::Value = serde_json::from_str(stdout)
        .unwrap_or_else(|e| panic!("stdout is not the JSON statistics ({e}): {stdout}"));
    ["received", "forwarded", "dropped", "queued"].map(|key| {
        v["totals"][key]
            .as_u64()
            .unwrap_or_else(|| panic!("totals.{key} missing: {stdout}"))
    })
}

/// The conservation identity, exactly: every received packet was forwarded, dropped by a
/// named cause, or is still queued; and the ports agree with the data plane's counts.
pub fn assert_conserved(dp: &Dataplane) {
    let t = dp.totals();
    zl_testkit::conservation::assert_conserved(
        t.received,
        t.forwarded,
        t.dropped(),
        dp.queued(),
        format_args!("{t:?}"),
    );
    let rx: u64 = dp.port_counters().iter().map(|(_, c)| c.rx_packets).sum();
    let tx: u64 = dp
        .port_counters()
        .iter()
        .map(|(_, c)| c.tx_packets + c.tx_dropped())
        .sum();
    assert_eq!(rx, t.received, "ports' rx = data plane's received");
    // ICMP errors are frames the router originates: in the ports' tx, not in `forwarded`.
    assert_eq!(
        tx,
        t.forwarded + dp.icmp().sent_total(),
        "ports' tx + tx drops = data plane's forwarded + ICMP errors sent"
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

/// A `zlrouter` child whose run has reached its first progress line (the loop is running).
pub struct Running {
    pub child: std::process::Child,
    pub stderr: std::process::ChildStderr,
    /// Standard error up to and including the first progress line.
    pub seen: String,
}

/// How long a `zlrouter` child may take to print its first progress line, or to exit after a
/// signal, before the test kills it (a bound for a hang, far above the ~0.1 s either takes):
/// the test then fails with what the child printed instead of hanging.
pub const CHILD_WITHIN: std::time::Duration = std::time::Duration::from_secs(60);

/// Kills the child `pid` (SIGKILL, by its PID: a child of this test not yet reaped, so the
/// PID cannot have been reused) unless the returned sender is used or dropped within `within`.
pub fn watchdog(pid: u32, within: std::time::Duration) -> std::sync::mpsc::Sender<()> {
    let (done, wait) = std::sync::mpsc::channel::<()>();
    std::thread::spawn(move || {
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = wait.recv_timeout(within) {
            let _ = std::process::Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
        }
    });
    done
}

/// Spawns `zlrouter ARGS` and reads its standard error until the first progress line
/// (`[  t s] rx ...`). Panics, after reaping the child, if it exits before one (or is killed
/// for printing none within a minute).
pub fn spawn_until_progress(args: &[&str]) -> Running {
    use std::io::Read;
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_zlrouter"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn zlrouter");
    let progress_seen = watchdog(child.id(), CHILD_WITHIN);
    let mut stderr = child.stderr.take().expect("piped stderr");
    let mut seen = Vec::new();
    let mut byte = [0u8; 1];
    while !String::from_utf8_lossy(&seen).contains(" s] rx ") {
        match stderr.read(&mut byte) {
            Ok(1) => seen.push(byte[0]),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "zlrouter exited before its first progress line: {}",
                    String::from_utf8_lossy(&seen)
                );
            }
        }
    }
    let _ = progress_seen.send(());
    Running {
        child,
        stderr,
        seen: String::from_utf8_lossy(&seen).into_owned(),
    }
}

/// Reads the child's standard error on until it contains `needle`, appending what it reads to
/// `r.seen`: a readiness wait for something the router logs (a reload done) instead of a
/// guessed sleep. Bounded: a child that prints no such line within [`CHILD_WITHIN`] is killed,
/// its stream ends, and this returns false.
pub fn read_stderr_until(r: &mut Running, needle: &str) -> bool {
    use std::io::Read;
    let give_up = watchdog(r.child.id(), CHILD_WITHIN);
    let mut byte = [0u8; 1];
    let mut line = Vec::new();
    let found = loop {
        match r.stderr.read(&mut byte) {
            Ok(1) => {
                line.push(byte[0]);
                if byte[0] == b'\n' || byte[0] == b'\r' {
                    let text = String::from_utf8_lossy(&line).into_owned();
                    r.seen.push_str(&text);
                    line.clear();
                    if text.contains(needle) {
                        break true;
                    }
                }
            }
            _ => {
                r.seen.push_str(&String::from_utf8_lossy(&line));
                break false;
            }
        }
    };
    let _ = give_up.send(());
    found
}

/// Sends `signal` (`-INT`, `-TERM`) to the child this test started, by its PID, and waits for
/// it (bounded: a child still running a minute later is killed, and its status says so): its
/// output and the rest of its standard error. `None` (the child killed and reaped) when the
/// `kill` command is not available.
pub fn signal_and_wait(r: Running, signal: &str) -> Option<(std::process::Output, String)> {
    use std::io::Read;
    let Running {
        mut child,
        mut stderr,
        ..
    } = r;
    let sent = std::process::Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status();
    if !sent.is_ok_and(|s| s.success()) {
        let _ = child.kill();
        let _ = child.wait();
        return None;
    }
    let exited = watchdog(child.id(), CHILD_WITHIN);
    // Both pipes drained at once: the final JSON on stdout can outgrow a pipe's buffer, and a
    // child blocked writing it would never close stderr.
    let rest = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = stderr.read_to_string(&mut rest);
        rest
    });
    let out = child.wait_with_output().expect("wait for zlrouter");
    let _ = exited.send(());
    Some((out, rest.join().unwrap_or_default()))
}

/// The replay bench of the pcap tests: port `in` (`02:00:00:00:00:01`) replays `in.pcap`,
/// port `out` (`02:00:00:00:00:02`) is `out`, and 192.0.2.0/24 goes out of it to the next hop
/// `02:00:00:00:00:fe`. Tests add their `[run]`, `[qos]` and the rest.
pub fn pcap_replay(out: zl_testkit::config::PortToml) -> zl_testkit::config::RouterToml {
    use zl_testkit::config::{PortToml, RouterToml};
    RouterToml::new()
        .port(PortToml::pcap_reader("in", "02:00:00:00:00:01", "in.pcap"))
        .port(out)
        .route("192.0.2.0/24", "out", Some(NEXT_HOP_MAC))
}

/// The next hop's MAC in [`pcap_replay`].
pub const NEXT_HOP_MAC: &str = "02:00:00:00:00:fe";

/// The sink port `out` of [`pcap_replay`].
pub fn sink_out() -> zl_testkit::config::PortToml {
    zl_testkit::config::PortToml::sink("out", "02:00:00:00:00:02")
}

/// One best-effort class with RED and ECN behind a 10 Mbit/s shaper, the classifier putting
/// everything in it: the pcap tests' egress, which marks and drops early at their loads.
pub fn red_ecn_egress(max_packets: u32) -> zl_testkit::config::QosToml {
    use zl_testkit::config::{ClassToml, QosToml};
    QosToml::new()
        .set("shaper", "{ rate_bps = 10_000_000 }")
        .set(
            "classifier",
            r#"{ default_class = "be", standard = false }"#,
        )
        .class(ClassToml::new("be").weight(1).max_packets(max_packets).aqm(
            r#"{ kind = "red", min_th = 4.0, max_th = 30.0, max_p = 0.5, w_q = 0.2, ecn = true }"#,
        ))
}
