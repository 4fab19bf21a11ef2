//! End to end on a veth pair with AF_XDP (Linux, root): one `zlrouter` generates 200 frames
//! and sends them out of veth `b` through its AF_XDP port; a second `zlrouter` receives them
//! on veth `a` through its own AF_XDP port, routes them (TTL, MACs) and writes them to a pcap.
//! Both run on the live clock and stop on SIGINT with balanced tables. Skipped, with a message,
//! where namespaces or AF_XDP are not available. Namespace and veths are named `zlxf...`.

mod common;

use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::Duration;

use zl_testkit::config::PortToml;
use zl_testkit::lab::lines_of;
use zl_testkit::netns::{veth_pair, Netns};
use zl_testkit::veth;

fn skip(why: &str) {
    zl_testkit::netns::skip("AF_XDP end-to-end test", why);
}

/// The `fwd` count of a progress line.
fn forwarded(line: &str) -> Option<u64> {
    let at = line.find(" fwd ")? + 5;
    line[at..].split_whitespace().next()?.parse().ok()
}

/// Waits (bounded) for a progress line forwarding at least `n`; returns the lines seen.
fn wait_forwarded(rx: &Receiver<String>, n: u64) -> Result<Vec<String>, Vec<String>> {
    let mut seen = Vec::new();
    loop {
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(l) => {
                let done = forwarded(&l).is_some_and(|f| f >= n);
                seen.push(l);
                if done {
                    return Ok(seen);
                }
            }
            Err(_) => return Err(seen),
        }
    }
}

fn spawn(ns: &Netns, dir: &std::path::Path, cfg: &str) -> Child {
    Command::new("ip")
        .args([
            "netns",
            "exec",
            ns.name(),
            env!("CARGO_BIN_EXE_zlrouter"),
            "run",
            cfg,
            "--json",
        ])
        .current_dir(dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn interrupt(child: &Child) {
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
}

/// The rest of a router's standard error lines, up to its end (bounded: 30 s per line).
fn rest_of(rx: &Receiver<String>) -> Vec<String> {
    let mut rest = Vec::new();
    while let Ok(l) = rx.recv_timeout(Duration::from_secs(30)) {
        rest.push(l);
    }
    rest
}

/// Kills and reaps both children on every path out of the test.
struct Reaper(Vec<Child>);
impl Drop for Reaper {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

#[test]
fn two_routers_over_af_xdp_on_a_veth_pair() {
    zl_testkit::netns::set_prefix("zlxf");
    let (ns, ifa, ifb) = match veth_pair("dpe2e", "zlxf") {
        Ok(made) => made,
        Err(why) => return skip(&why),
    };
    let dir = common::scratch("af-xdp-e2e");
    std::fs::write(
        dir.join("receiver.toml"),
        veth::receiver(
            &ifa,
            PortToml::pcap_writer("out", "02:00:00:00:0a:0b", "out.pcap"),
        ),
    )
    .unwrap();
    std::fs::write(dir.join("sender.toml"), veth::sender(&ifb)).unwrap();

    // `ip netns exec` execs the router in place (same pid), so signals reach it.
    let mut reaper = Reaper(vec![spawn(&ns, &dir, "receiver.toml")]);
    let rx_lines = lines_of(&mut reaper.0[0]);
    // The receiver is up once it prints its first progress line.
    // A router that does not start here (root, a namespace, a veth) is a failure, not a skip.
    if let Err(seen) = wait_forwarded(&rx_lines, 0) {
        panic!("the AF_XDP receiver did not start: {}", seen.join(" | "));
    }
    reaper.0.push(spawn(&ns, &dir, "sender.toml"));
    let tx_lines = lines_of(&mut reaper.0[1]);
    let sent = wait_forwarded(&tx_lines, 200);
    assert!(
        sent.is_ok(),
        "sender never forwarded its 200 frames: {:?}",
        sent
    );
    interrupt(&reaper.0[1]);
    let got = wait_forwarded(&rx_lines, 200);
    assert!(
        got.is_ok(),
        "receiver never forwarded 200 frames: {:?}",
        got
    );
    interrupt(&reaper.0[0]);

    let sender = reaper.0.pop().unwrap();
    let receiver = reaper.0.pop().unwrap();
    for (child, who, lines) in [
        (sender, "sender", &tx_lines),
        (receiver, "receiver", &rx_lines),
    ] {
        // Bounded: a router still running a minute after SIGINT is killed (the status says so).
        let exited = common::watchdog(child.id(), common::CHILD_WITHIN);
        let out = child.wait_with_output().unwrap();
        let _ = exited.send(());
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{who}: {:?}\n{stdout}", out.status);
        let rest = rest_of(lines);
        assert!(
            rest.iter().any(|l| l.contains("stopped: interrupted")),
            "{who}: {rest:?}"
        );
        let [received, forwarded, dropped, queued] = common::final_totals(&stdout);
        zl_testkit::conservation::assert_conserved(
            received,
            forwarded,
            dropped,
            queued,
            format_args!("{who}: {stdout}"),
        );
        assert_eq!(queued, 0, "{who}: {stdout}");
    }

    let mut r =
        pcap_file::pcap::PcapReader::new(std::fs::File::open(dir.join("out.pcap")).unwrap())
            .unwrap();
    let mut frames = 0;
    while let Some(p) = r.next_packet() {
        let f = p.unwrap().data.into_owned();
        assert_eq!(&f[0..6], &[2, 0, 0, 0, 0x0a, 0xfe], "next hop MAC");
        assert_eq!(&f[6..12], &[2, 0, 0, 0, 0x0a, 0x0b], "egress port MAC");
        assert_eq!(f[14 + 8], 62, "TTL decremented by both routers");
        assert!(
            zl_wire::checksum::verifies(&f[14..34]),
            "IPv4 header checksum valid"
        );
        frames += 1;
    }
    assert_eq!(frames, 200);
}
