//! Live reload under real traffic on AF_XDP veths (root): a kernel UDP sender
//! offers 8 Mbit/s through `zlrouter` to a receiver behind a 4 Mbit/s shaper; SIGHUP with
//! the shaper halved in the file halves what reaches the receiver within a second; SIGHUP with
//! an invalid file is refused (logged) and the rate stays; the final table balances across
//! both. Measured at the receiver's interface, in the same run (rates are ratios, not
//! absolute times).

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zl_testkit::lab::*;

/// The binary the lab runs (only the root package's tests know where Cargo built it).
const ZLROUTER: &str = env!("CARGO_BIN_EXE_zlrouter");

const TEST: &str = "reload";

fn bottleneck(rate_bps: u64) -> String {
    format!(
        "[qos]\nshaper = {{ rate_bps = {rate_bps} }}\n\
         [[qos.classes]]\nname = \"be\"\nweight = 1\nmax_packets = 200\n"
    )
}

/// Bytes per second reaching the receiver over `secs`.
fn receiver_rate(lab: &Lab, secs: f64) -> f64 {
    let (b0, t0) = lab.receiver_rx_bytes_at();
    std::thread::sleep(Duration::from_secs_f64(secs));
    let (b1, t1) = lab.receiver_rx_bytes_at();
    (b1 - b0) as f64 / (t1 - t0).as_secs_f64()
}

fn sighup(lab: &Lab) {
    let pid = lab.router.as_ref().expect("router running").pid();
    // SAFETY: kill(2) on the router this test started (a child not yet reaped, so its PID
    // is not reused); no memory is involved.
    let rc = unsafe { libc::kill(pid as libc::pid_t, libc::SIGHUP) };
    assert_eq!(rc, 0, "kill -HUP {pid}");
}

#[test]
fn sighup_halves_the_shaper_under_real_traffic_and_an_invalid_file_is_refused() {
    let Some(mut lab) = Lab::or_skip(ZLROUTER, TEST, &[SenderSpec::PLAIN]) else {
        return;
    };
    let cfg = |rate: u64| lab.router_config(&bottleneck(rate), "");
    let (fast, slow) = (cfg(4_000_000), cfg(2_000_000));
    lab.start(TEST, &fast);
    let path = lab.dir.join("router.toml");

    // 1000 datagrams of 1000 bytes a second (8 Mbit/s: a rate a loaded 2-core machine
    // keeps up with), paced, until told to stop.
    let run = Arc::new(AtomicBool::new(true));
    let going = run.clone();
    let sender = lab.senders[0].spawn_in(move || -> u64 {
        let s = UdpSocket::bind(("0.0.0.0", 0)).expect("bind");
        let msg = [0u8; 1000];
        let start = Instant::now();
        let mut sent = 0u64;
        while going.load(Ordering::Relaxed) {
            let due = start + Duration::from_micros(1000 * sent);
            if let Some(wait) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            if s.send_to(&msg, (RECEIVER_IP, 9)).is_ok() {
                sent += 1;
            }
        }
        sent
    });
    let stop_sender = |run: &AtomicBool| run.store(false, Ordering::Relaxed);

    std::thread::sleep(Duration::from_millis(1500));
    let before = receiver_rate(&lab, 2.0);

    std::fs::write(&path, &slow).unwrap();
    sighup(&lab);
    let router = lab.router.as_mut().unwrap();
    if let Err(seen) = router.wait_for_log("SIGHUP: reloaded", Duration::from_secs(10)) {
        stop_sender(&run);
        panic!("no reload logged within 10 s: {seen}");
    }
    std::thread::sleep(Duration::from_secs(1));
    let after = receiver_rate(&lab, 2.0);

    std::fs::write(&path, slow.replace("rate_bps = 2000000", "rate_bps = 0")).unwrap();
    sighup(&lab);
    let router = lab.router.as_mut().unwrap();
    let refused = router.wait_for_log("reload refused", Duration::from_secs(10));
    let still = receiver_rate(&lab, 1.5);
    stop_sender(&run);
    let sent = sender.join().unwrap().expect("sender");
    std::thread::sleep(Duration::from_millis(300));
    let (status, out) = lab.stop_router();

    assert!(status.success(), "{status:?}\n{out}");
    assert!(
        refused.is_ok(),
        "the invalid file was not refused: {refused:?}\n{out}"
    );
    assert!(sent > 5_000, "sent {sent}");
    let ratio = after / before;
    let kept = still / before;
    eprintln!(
        "receiver {before:.0} B/s, after the reload {after:.0} B/s ({ratio:.3}), after the \
         refused one {kept:.3} of the first"
    );
    // ±0.15: a shaper polled by a thread that shares 2 cores with the sender and the test
    // loses a little of its rate when descheduled, more at the higher rate (measured 0.535 and
    // 0.551 under load); no change at all would read 1.0.
    assert!(
        (ratio - 0.5).abs() < 0.15,
        "receiver {before:.0} B/s -> {after:.0} B/s after the reload (ratio {ratio:.3})\n{out}"
    );
    assert!(
        (kept - 0.5).abs() < 0.15,
        "after the refused reload: {kept:.3} of the first rate\n{out}"
    );
    let v = |k: &str| stat(&out, &format!("totals.{k}")).unwrap_or_else(|| panic!("{k}: {out}"));
    assert_eq!(
        v("received"),
        v("forwarded") + v("dropped") + v("queued"),
        "{out}"
    );
}
