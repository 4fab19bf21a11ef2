//! Restarting an AF_XDP router right after `kill -9` (Linux, root): the kernel releases the
//! killed process's AF_XDP socket asynchronously, so the new start can find the interface or
//! its queue busy (EBUSY) for a moment; the port retries at open (`BUSY_RETRY_FOR`, 2 s) and
//! every restart comes up. A router started while another still holds the interface waits,
//! comes up once the holder is killed, and one whose interface stays held fails after the
//! wait with an error that says what holds it and what removes it. Namespaces are named
//! `zlcap-...`; only the routers this test started are signalled, by PID.

mod common;

use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use zl_testkit::config::{quoted, ClassToml, PortToml, QosToml, RouterToml};
use zl_testkit::lab::lines_of;
use zl_testkit::netns::{veth_pair, Netns};

fn skip(why: &str) {
    zl_testkit::netns::skip("AF_XDP restart after kill -9", why);
}

/// The router on veth end `ifname`: its AF_XDP port is the one restarted; what it receives
/// is routed to a sink.
fn router(ifname: &str) -> String {
    RouterToml::new()
        .port(PortToml::af_xdp("a", ifname).set("mac", quoted("02:00:00:00:0c:0a")))
        .port(PortToml::sink("out", "02:00:00:00:0c:0b"))
        .route("10.78.1.0/24", "out", Some("02:00:00:00:0c:fe"))
        .qos(
            QosToml::new()
                .set("link_rate_bps", 1_000_000_000)
                .class(ClassToml::new("be").weight(1)),
        )
        .to_toml()
}

/// A router started by this test; killed (by its PID) and reaped on drop.
struct Router {
    child: Child,
    lines: Receiver<String>,
    seen: Vec<String>,
}

impl Drop for Router {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Router {
    fn spawn(ns: &Netns, dir: &std::path::Path, log: &str) -> Router {
        // `ip netns exec` execs the router in place (same pid), so signals reach it.
        let mut child = Command::new("ip")
            .args(["netns", "exec", ns.name(), env!("CARGO_BIN_EXE_zlrouter")])
            .args(["run", "router.toml"])
            .env("RUST_LOG", log)
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn zlrouter");
        let lines = lines_of(&mut child);
        Router {
            child,
            lines,
            seen: Vec::new(),
        }
    }

    /// Waits (bounded) for the first progress line: the ports are open and the loop runs.
    /// `Err`: what the router printed before it exited or the bound ran out.
    fn wait_started(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) if l.contains(" s] rx ") => return Ok(()),
                Ok(l) => self.seen.push(l),
                Err(_) => return Err(self.seen.join(" | ")),
            }
        }
    }

    /// SIGKILL, and waits until the process is reaped (the kernel has closed its files).
    fn kill9(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn restarts_right_after_kill_9_come_up() {
    zl_testkit::netns::set_prefix("zlcap");
    let (ns, ifa, _) = match veth_pair("restart", "zlcp") {
        Ok(made) => made,
        Err(why) => return skip(&why),
    };
    let dir = common::scratch("afxdp-restart");
    std::fs::write(dir.join("router.toml"), router(&ifa)).unwrap();

    // 1. Started, killed with SIGKILL, started again at once (no pause), 6 times: every
    //    start comes up.
    let mut router = Router::spawn(&ns, &dir, "warn");
    if let Err(seen) = router.wait_started() {
        panic!("the AF_XDP router did not start: {seen}");
    }
    for i in 1..=6 {
        router.kill9();
        let t = Instant::now();
        router = Router::spawn(&ns, &dir, "warn");
        if let Err(seen) = router.wait_started() {
            panic!("restart {i} right after kill -9 failed: {seen}");
        }
        eprintln!("restart {i}: up in {} ms", t.elapsed().as_millis());
    }

    // 2. A router started while another holds the interface waits for it (logging the wait
    //    once, at info) and comes up once the holder is killed: the retry at open, which a
    //    start that gave up at the first EBUSY would fail.
    let mut second = Router::spawn(&ns, &dir, "info");
    let waiting = (|| {
        let deadline = Instant::now() + Duration::from_secs(10);
        while let Ok(l) = second
            .lines
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
        {
            let busy = l.contains("found it busy");
            second.seen.push(l);
            if busy {
                return true;
            }
        }
        false
    })();
    assert!(waiting, "no busy wait logged: {}", second.seen.join(" | "));
    router.kill9();
    if let Err(seen) = second.wait_started() {
        panic!("the second router did not come up once the first was killed: {seen}");
    }

    // 3. One whose interface stays held fails after the wait, saying what holds it and what
    //    removes it (not `ip link set ... xdp off`, which leaves a BPF link attached).
    let mut third = Router::spawn(&ns, &dir, "warn");
    let t = Instant::now();
    let exited = common::watchdog(third.child.id(), common::CHILD_WITHIN);
    let status = third.child.wait().unwrap();
    let _ = exited.send(());
    // Its standard error to the end (the reader stops at the closed pipe).
    while let Ok(l) = third.lines.recv_timeout(Duration::from_secs(10)) {
        third.seen.push(l);
    }
    let err = third.seen.join(" | ");
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(
        t.elapsed() >= zl_afxdp::BUSY_RETRY_FOR,
        "gave up after {:?}: {err}",
        t.elapsed()
    );
    for want in [
        "another XDP program is attached",
        "still after retrying for",
        "bpftool link show",
        "does nothing to a link",
    ] {
        assert!(err.contains(want), "{want}: {err}");
    }
    drop(second);
}
