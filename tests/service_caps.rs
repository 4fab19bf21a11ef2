//! packaging/zlrouter.service runs zlrouter with only its `AmbientCapabilities`: this test
//! runs a router with exactly those (as the unprivileged uid 65534, through `setpriv`) on an
//! AF_XDP port of a veth in a namespace and shows it forwards what a root sender sends; then
//! drops each capability in turn and shows the router stops at once with an error naming it
//! (CAP_IPC_LOCK with RLIMIT_MEMLOCK at 64 KiB, where the UMEM cannot be pinned without it).
//! Root, namespaces, AF_XDP and setpriv / prlimit (util-linux) are needed; skipped otherwise
//! (a failure under ZLR_REQUIRE_ENV=1). Namespace and veths are named `zlxc...`.

mod common;

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

use zl_testkit::config::PortToml;
use zl_testkit::lab::lines_of;
use zl_testkit::netns::{veth_pair, Netns};
use zl_testkit::veth;

fn skip(why: &str) {
    zl_testkit::netns::skip("service capabilities test", why);
}

/// The unit's `AmbientCapabilities`, e.g. `["CAP_NET_ADMIN", ...]`.
fn unit_caps() -> Vec<String> {
    let unit = std::fs::read_to_string(common::root().join("packaging/zlrouter.service")).unwrap();
    let line = unit
        .lines()
        .find_map(|l| l.strip_prefix("AmbientCapabilities="))
        .expect("the unit sets AmbientCapabilities");
    let bounding = unit
        .lines()
        .find_map(|l| l.strip_prefix("CapabilityBoundingSet="))
        .expect("the unit sets CapabilityBoundingSet");
    assert_eq!(line, bounding, "ambient and bounding sets agree");
    line.split_whitespace().map(str::to_owned).collect()
}

/// The router in `ns` as uid/gid 65534 with exactly `caps` (inheritable, ambient and
/// bounding), RLIMIT_MEMLOCK at `memlock` bytes when given.
fn spawn_limited(
    ns: &Netns,
    dir: &std::path::Path,
    caps: &[String],
    memlock: Option<u64>,
) -> Child {
    let set: String = caps
        .iter()
        .map(|c| format!(",+{}", c.to_lowercase().trim_start_matches("cap_")))
        .collect();
    let set = format!("-all{set}");
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", ns.name()]);
    if let Some(m) = memlock {
        cmd.args(["prlimit", &format!("--memlock={m}:{m}")]);
    }
    cmd.args([
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        &format!("--inh-caps={set}"),
        &format!("--ambient-caps={set}"),
        &format!("--bounding-set={set}"),
        env!("CARGO_BIN_EXE_zlrouter"),
        "run",
        "receiver.toml",
    ])
    .current_dir(dir)
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap()
}

fn forwarded(line: &str) -> Option<u64> {
    let at = line.find(" fwd ")? + 5;
    line[at..].split_whitespace().next()?.parse().ok()
}

/// Waits (at most 20 s) for a progress line forwarding at least `n`.
fn wait_forwarded(rx: &Receiver<String>, n: u64) -> Result<(), Vec<String>> {
    let mut seen = Vec::new();
    let end = Instant::now() + Duration::from_secs(20);
    while let Some(left) = end.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(l) => {
                let done = forwarded(&l).is_some_and(|f| f >= n);
                seen.push(l);
                if done {
                    return Ok(());
                }
            }
            Err(_) => break,
        }
    }
    Err(seen)
}

/// Kills and reaps the children on every path out of the test.
struct Reaper(Vec<Child>);
impl Drop for Reaper {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Waits (at most 10 s) for `child` to exit; its status and stderr.
fn exit_of(mut child: Child) -> Option<(std::process::ExitStatus, String)> {
    let end = Instant::now() + Duration::from_secs(10);
    while Instant::now() < end {
        if let Ok(Some(status)) = child.try_wait() {
            let mut err = String::new();
            let _ = child.stderr.take().unwrap().read_to_string(&mut err);
            return Some((status, err));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

#[test]
fn the_units_capabilities_suffice_and_each_is_needed() {
    for tool in ["setpriv", "prlimit"] {
        if Command::new(tool).arg("--version").output().is_err() {
            return skip(&format!("{tool} (util-linux) is not installed"));
        }
    }
    let caps = unit_caps();
    assert!(caps.len() >= 3, "{caps:?}");
    zl_testkit::netns::set_prefix("zlxc");
    let (ns, ifa, ifb) = match veth_pair("svc", "zlxc") {
        Ok(made) => made,
        Err(why) => return skip(&why),
    };
    let dir = common::scratch("service-caps");
    std::fs::write(
        dir.join("receiver.toml"),
        veth::receiver(&ifa, PortToml::sink("out", "02:00:00:00:0a:0b")),
    )
    .unwrap();
    std::fs::write(dir.join("sender.toml"), veth::sender(&ifb)).unwrap();

    // With exactly the unit's capabilities, as an unprivileged uid: it forwards.
    let mut reaper = Reaper(vec![spawn_limited(&ns, &dir, &caps, None)]);
    let rx = lines_of(&mut reaper.0[0]);
    if let Err(seen) = wait_forwarded(&rx, 0) {
        panic!(
            "the router with the unit's capabilities {caps:?} did not start: {}",
            seen.join(" | ")
        );
    }
    let sender = Command::new("ip")
        .args([
            "netns",
            "exec",
            ns.name(),
            env!("CARGO_BIN_EXE_zlrouter"),
            "run",
            "--quiet",
            "sender.toml",
        ])
        .current_dir(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    reaper.0.push(sender);
    let got = wait_forwarded(&rx, 150);
    assert!(
        got.is_ok(),
        "the limited router did not forward the sender's frames: {got:?}"
    );
    drop(reaper);

    // Without any one of them it stops at once, naming it.
    for drop_one in &caps {
        let rest: Vec<String> = caps.iter().filter(|c| *c != drop_one).cloned().collect();
        let memlock = (drop_one == "CAP_IPC_LOCK").then_some(65536);
        let child = spawn_limited(&ns, &dir, &rest, memlock);
        let (status, err) =
            exit_of(child).unwrap_or_else(|| panic!("without {drop_one} the router did not stop"));
        assert_eq!(status.code(), Some(2), "without {drop_one}: {err}");
        assert!(err.contains(drop_one.as_str()), "without {drop_one}: {err}");
    }
    // And CAP_IPC_LOCK is what lets it run under that memlock limit.
    let mut reaper = Reaper(vec![spawn_limited(&ns, &dir, &caps, Some(65536))]);
    let rx = lines_of(&mut reaper.0[0]);
    assert!(
        wait_forwarded(&rx, 0).is_ok(),
        "with CAP_IPC_LOCK under 64 KiB memlock"
    );
}
