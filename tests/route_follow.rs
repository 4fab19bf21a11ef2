//! A routing table installed and withdrawn in bulk (Linux, root): `ip -batch` adds 20 000
//! routes in the router's namespace while zlrouter forwards with `[routing] source =
//! "kernel"`, then deletes them. zlrouter must forward to the last added route, and stop
//! forwarding to the last deleted one, within a bound stated below, while every ping to an
//! unaffected prefix (the receiver's own subnet) is forwarded.
//!
//! The bound is a correctness guard, not a speed target: a follower that rebuilt its table
//! per event took minutes for this many routes. The speed (100 k and 1 M routes, the
//! follower's CPU and memory) is measured by `scripts/route-follow` and recorded in
//! docs/PERFORMANCE.md.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use zl_testkit::lab::{kernel_router, sender_ip, stat, Lab, SenderSpec, RECEIVER_IP};

/// The binary the lab runs (only the root package's tests know where Cargo built it).
const ZLROUTER: &str = env!("CARGO_BIN_EXE_zlrouter");

const ROUTES: u32 = 20_000;
/// How long zlrouter may take to follow the whole batch once `ip -batch` returned.
const BOUND: Duration = Duration::from_secs(5);

/// The `i`th route's prefix: /24s from 10.128.0.0 on.
fn prefix(i: u32) -> String {
    let a = 0x0a80_0000u32 + (i << 8);
    format!("{}/24", std::net::Ipv4Addr::from(a))
}

/// An address inside the `i`th prefix.
fn inside(i: u32) -> String {
    std::net::Ipv4Addr::from(0x0a80_0000u32 + (i << 8) + 1).to_string()
}

/// One echo to `to` from the sender, answered within 200 ms.
fn answered(lab: &Lab, to: &str) -> bool {
    Command::new("ip")
        .args(["netns", "exec", lab.senders[0].name()])
        .args(["ping", "-n", "-q", "-c", "1", "-W", "0.2", to])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Seconds until `answered(to) == want`, or `None` past `BOUND`.
fn until(lab: &Lab, to: &str, want: bool) -> Option<Duration> {
    let t0 = Instant::now();
    while t0.elapsed() < BOUND {
        if answered(lab, to) == want {
            return Some(t0.elapsed());
        }
    }
    None
}

/// `ip -batch` of `lines` in the router's namespace; how long the kernel took.
fn batch(lab: &Lab, lines: &str) -> Duration {
    let path = lab.dir.join("routes.batch");
    std::fs::write(&path, lines).unwrap();
    let t0 = Instant::now();
    lab.rtr
        .ip(&["-batch", path.to_str().unwrap()])
        .expect("ip -batch");
    t0.elapsed()
}

/// CPU seconds the router's `zlr-fib` thread has used.
fn follower_cpu(pid: u32) -> f64 {
    let tick = 100.0; // USER_HZ on Linux
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return f64::NAN;
    };
    for t in tasks.flatten() {
        let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
        if comm.trim() != "zlr-fib" {
            continue;
        }
        let stat = std::fs::read_to_string(t.path().join("stat")).unwrap_or_default();
        // Fields after the parenthesised name: state is 3rd, utime 14th, stime 15th.
        let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
        let f: Vec<f64> = rest
            .split_whitespace()
            .map(|x| x.parse().unwrap_or(0.0))
            .collect();
        return (f.get(11).unwrap_or(&0.0) + f.get(12).unwrap_or(&0.0)) / tick;
    }
    f64::NAN
}

#[test]
fn twenty_thousand_routes_added_and_deleted_are_followed_without_loss_elsewhere() {
    const TEST: &str =
        "twenty_thousand_routes_added_and_deleted_are_followed_without_loss_elsewhere";
    let Some(mut lab) = Lab::or_skip(ZLROUTER, TEST, &[SenderSpec::PLAIN]) else {
        return;
    };
    let last = inside(ROUTES - 1);
    {
        let (rtr, rcv) = (&lab.rtr, &lab.rcv);
        rtr.ip(&["addr", "add", "10.9.1.1/24", "dev", "r0"])
            .unwrap();
        rtr.ip(&["addr", "add", "10.9.100.1/24", "dev", "rx"])
            .unwrap();
        rtr.exec(&["sysctl", "-qw", "net.ipv4.ip_forward=0"])
            .unwrap();
        // The last prefix's address lives on the receiver.
        rcv.ip(&["addr", "add", &format!("{last}/32"), "dev", "lo"])
            .unwrap();
    }
    lab.start(TEST, &kernel_router(true).to_toml());
    assert!(
        until(&lab, RECEIVER_IP, true).is_some(),
        "warm-up: the receiver is not reachable"
    );
    assert!(!answered(&lab, &last), "no route to {last} yet");
    let pid = lab.router.as_ref().unwrap().pid();

    // Pings to the receiver's own subnet all along: 200 a second for 6 s, none may be lost.
    let steady = Command::new("ip")
        .args(["netns", "exec", lab.senders[0].name()])
        .args(["ping", "-n", "-q", "-i", "0.005", "-c", "1200", "-W", "1"])
        .arg(RECEIVER_IP)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ping");
    std::thread::sleep(Duration::from_millis(300));

    let cpu0 = follower_cpu(pid);
    let adds: String = (0..ROUTES)
        .map(|i| format!("route add {} via {RECEIVER_IP}\n", prefix(i)))
        .collect();
    let kernel_add = batch(&lab, &adds);
    let added = until(&lab, &last, true);
    let cpu_add = follower_cpu(pid) - cpu0;
    let dels: String = (0..ROUTES)
        .map(|i| format!("route del {} via {RECEIVER_IP}\n", prefix(i)))
        .collect();
    let kernel_del = batch(&lab, &dels);
    let deleted = until(&lab, &last, false);
    let cpu_all = follower_cpu(pid) - cpu0;
    eprintln!(
        "{ROUTES} routes: ip -batch add {kernel_add:?}, followed {added:?} after; \
         del {kernel_del:?}, followed {deleted:?} after; follower CPU {cpu_add:.2} s (add), \
         {cpu_all:.2} s (both)"
    );

    let out = steady.wait_with_output().expect("ping");
    let text = String::from_utf8_lossy(&out.stdout);
    let (status, json) = lab.stop_router();
    assert!(
        added.is_some(),
        "{last} not forwarded within {BOUND:?} of ip -batch adding {ROUTES} routes"
    );
    assert!(
        deleted.is_some(),
        "{last} still forwarded {BOUND:?} after ip -batch deleted {ROUTES} routes"
    );
    assert!(
        text.contains("1200 packets transmitted, 1200 received"),
        "pings to an unaffected prefix were lost while routes changed: {text}"
    );
    assert!(status.success(), "{json}");
    // Both batches were read as events, never as a re-dump after an overrun.
    assert_eq!(stat(&json, "fib.resyncs"), Some(0), "{json}");
    assert!(
        stat(&json, "fib.events").unwrap_or(0) >= u64::from(2 * ROUTES),
        "{json}"
    );
    // Only the connected routes remain (two subnets; the kernel's local table is not read).
    assert!(stat(&json, "fib.routes").unwrap_or(u64::MAX) < 10, "{json}");
    let _ = sender_ip(0);
}
