//! Faults with real interfaces (root; `SKIPPED ...` otherwise): an AF_XDP port whose interface
//! is deleted under the running `zlrouter` ends the run with a message naming it (exit 2),
//! the final table printed first, or, with `on_gone = "wait"`, counts what it is given to send
//! as dropped and resumes when the interface is back; never a silent spin. Namespaces are
//! named `zlxf-...`.

use std::time::{Duration, Instant};

use zl_testkit::lab::*;

/// The binary the lab runs (only the root package's tests know where Cargo built it).
const ZLROUTER: &str = env!("CARGO_BIN_EXE_zlrouter");

#[test]
fn an_interface_deleted_mid_run_ends_the_run_with_a_clear_message() {
    const TEST: &str = "gone";
    zl_testkit::netns::set_prefix("zlxf");
    let Some(mut lab) = Lab::or_skip(ZLROUTER, TEST, &[SenderSpec::PLAIN]) else {
        return;
    };
    let qos = "[qos]\nlink_rate_bps = 8_000_000\nshaper = { rate_bps = 8_000_000 }\n\
               [[qos.classes]]\nname = \"be\"\nweight = 1\nmax_packets = 100\n";
    let cfg = lab.router_config(qos, "");
    lab.start(TEST, &cfg);
    // Traffic first, so the port is busy when its interface goes.
    let back = udp_echo(&lab, 7030, 50).expect("udp echo");
    assert!(back >= 48, "{back} of 50 echoes");
    lab.rtr.ip(&["link", "del", "r0"]).expect("delete r0");
    let (status, out) = lab.router.take().expect("router").wait_exit();
    eprintln!("{status:?}\n{out}");
    assert_eq!(status.code(), Some(2), "{out}");
    assert!(out.contains("stopped: a port failed"), "{out}");
    assert!(
        stat(&out, "totals.received").is_some(),
        "final statistics missing:\n{out}"
    );
    let err = out.split("--- stderr ---").nth(1).unwrap_or("");
    assert!(
        err.contains("r0"),
        "the error does not name the port:\n{err}"
    );
    assert!(
        err.contains("on_gone = \"wait\""),
        "the error does not say how to wait instead:\n{err}"
    );
}

/// A UDP flood into a 64-entry AF_XDP RX ring: the kernel's ring-full drops reach the final
/// table (`rx_drop ring`), and every frame the router did take is accounted for.
#[test]
fn a_full_rx_ring_is_counted_in_the_final_table() {
    const TEST: &str = "ring";
    zl_testkit::netns::set_prefix("zlxf");
    let Some(mut lab) = Lab::or_skip(ZLROUTER, TEST, &[SenderSpec::PLAIN]) else {
        return;
    };
    lab.sender_port_af_xdp = ", rx_ring_size = 64, tx_ring_size = 64".into();
    let qos = "[qos]\nlink_rate_bps = 100_000_000_000\n\
               [[qos.classes]]\nname = \"be\"\nweight = 1\nmax_packets = 1000\n";
    let cfg = lab.router_config(qos, "");
    lab.start(TEST, &cfg);
    // The router is frozen (SIGSTOP to its PID) while the flood arrives: the 64-entry ring
    // fills whatever the machine's speed, and the rest are the kernel's ring-full drops.
    lab.router.as_ref().expect("router").pause();
    let flood = lab.senders[0].spawn_in(|| -> u64 {
        let s = std::net::UdpSocket::bind(("0.0.0.0", 0)).expect("bind");
        let mut sent = 0;
        for _ in 0..20_000 {
            if s.send_to(&[0u8; 18], (RECEIVER_IP, 9)).is_ok() {
                sent += 1;
            }
        }
        sent
    });
    let sent: u64 = flood.join().unwrap().expect("flood");
    lab.router.as_ref().expect("router").resume();
    let (status, out) = lab.stop_router();
    eprintln!("sent {sent}\n{out}");
    assert!(status.success(), "{status:?}\n{out}");
    let ring = stat(&out, "ports[r0].rx_ring_full").expect("rx_drop ring of r0");
    let rx = stat(&out, "ports[r0].rx_packets").expect("rx of r0");
    assert!(
        ring > 0,
        "a 64-entry ring under a flood never filled:\n{out}"
    );
    // What the kernel offered the socket: taken or counted as ring-full, never more than sent.
    assert!(rx + ring <= sent + 100, "sent {sent}, rx {rx}, ring {ring}");
    assert_eq!(stat(&out, "totals.queued"), Some(0), "{out}");
}

/// Recreates sender 0's link after `r0` was deleted (the veth pair went with it), as
/// `Lab::new` built it: `r0` (router MAC) in the router namespace, `g0` with the sender's
/// address, static neighbour and default route in the sender namespace.
fn recreate_sender_link(lab: &Lab) -> std::io::Result<()> {
    let (rtr, snd) = (&lab.rtr, &lab.senders[0]);
    rtr.ip(&[
        "link",
        "add",
        "r0",
        "type",
        "veth",
        "peer",
        "name",
        "g0",
        "netns",
        snd.name(),
    ])?;
    rtr.exec(&["sysctl", "-qw", "net.ipv6.conf.r0.disable_ipv6=1"])?;
    rtr.ip(&["link", "set", "r0", "address", "02:00:00:09:01:01"])?;
    snd.exec(&["sysctl", "-qw", "net.ipv6.conf.g0.disable_ipv6=1"])?;
    snd.ip(&["link", "set", "g0", "address", "02:00:00:09:01:02"])?;
    snd.ip(&["addr", "add", "10.9.1.2/24", "dev", "g0"])?;
    for (ns, dev) in [(rtr, "r0"), (snd, "g0")] {
        ns.exec(&[
            "ethtool", "-K", dev, "tx", "off", "rx", "off", "tso", "off", "gso", "off", "gro",
            "off",
        ])?;
        ns.ip(&["link", "set", dev, "up"])?;
    }
    snd.ip(&[
        "neigh",
        "replace",
        "10.9.1.1",
        "lladdr",
        "02:00:00:09:01:01",
        "dev",
        "g0",
        "nud",
        "permanent",
    ])?;
    snd.ip(&["route", "add", "default", "via", "10.9.1.1"])?;
    Ok(())
}

/// `on_gone = "wait"`: `r0` is deleted under the running router, 50 datagrams routed to it
/// while it is gone are counted as transmit drops of `r0` (`tx_drop gone`), the veth is
/// recreated, the port re-attaches by itself and echoes flow again; each event is logged once;
/// the run ends by SIGINT with exit 0 and a balanced table.
#[test]
fn with_on_gone_wait_a_deleted_interface_is_waited_for_and_traffic_resumes() {
    const TEST: &str = "wait";
    zl_testkit::netns::set_prefix("zlxf");
    let Some(mut lab) = Lab::or_skip(ZLROUTER, TEST, &[SenderSpec::PLAIN]) else {
        return;
    };
    lab.sender_port_af_xdp = ", on_gone = \"wait\"".into();
    let qos = "[qos]\nlink_rate_bps = 1_000_000_000\n\
               [[qos.classes]]\nname = \"be\"\nweight = 1\nmax_packets = 1000\n";
    // The metrics endpoint (inside the router namespace) says when the router has counted
    // what was sent while r0 was gone.
    const METRICS: &str = "127.0.0.1:9464";
    let cfg = lab.router_config(qos, &format!("\n[metrics]\nlisten = \"{METRICS}\"\n"));
    lab.start(TEST, &cfg);
    let before = udp_echo(&lab, 7040, 20).expect("udp echo before");
    assert!(before >= 18, "{before} of 20 echoes before the fault");

    lab.rtr.ip(&["link", "del", "r0"]).expect("delete r0");
    // Readiness: the router notices on its next health check of r0's socket (every 256 idle
    // polls) and logs it. Datagrams routed to r0 before that (a router descheduled right
    // then, on a loaded machine) would meet a socket whose interface went but which is not
    // yet retired, and count as transmit errors, not `gone`.
    lab.router
        .as_mut()
        .expect("router")
        .wait_for_log("interface `r0` is gone", Duration::from_secs(20))
        .unwrap_or_else(|e| panic!("{e}"));
    // While r0 is gone: the receiver sends 50 datagrams to the sender's address; the router
    // takes them on `rx` and routes them to r0, which counts each as a transmit drop.
    const WHILE_GONE: u64 = 50;
    let sent = lab
        .rcv
        .run_in(|| -> u64 {
            let s = std::net::UdpSocket::bind((RECEIVER_IP, 0)).expect("bind");
            (0..WHILE_GONE)
                .filter(|_| s.send_to(&[7u8; 18], (sender_ip(0).as_str(), 9)).is_ok())
                .count() as u64
        })
        .expect("send while gone");
    assert_eq!(sent, WHILE_GONE);
    // r0 comes back only once the router counted all 50 (bounded; the table below says what
    // it counted if not): a router descheduled until after the link is back would find r0
    // again and transmit what it had not yet taken from `rx`.
    let gone_metric = "zlrouter_port_tx_link_gone_total{port=\"r0\"}";
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        let text = scrape_metrics(&lab, METRICS).unwrap_or_default();
        if metric(&text, gone_metric) == Some(WHILE_GONE as f64) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }

    recreate_sender_link(&lab).expect("recreate r0 / g0");
    // The port looks for r0 every 100 ms of its clock: echoes come back once it re-attached.
    let mut after = 0;
    for _ in 0..20 {
        after = udp_echo(&lab, 7041, 10).expect("udp echo after");
        if after >= 9 {
            break;
        }
    }
    assert!(
        after >= 9,
        "traffic did not resume after r0 came back: {after} of 10"
    );

    let (status, out) = lab.stop_router();
    eprintln!("{out}");
    assert!(
        status.success(),
        "the router did not wait for r0: {status:?}\n{out}"
    );
    assert!(out.contains("stopped: interrupted"), "{out}");
    assert_eq!(stat(&out, "totals.queued"), Some(0), "{out}");
    // Logged once when it went, once when it came back (tracing, on stderr).
    let log = out.split("--- stderr ---").nth(1).unwrap_or("");
    assert_eq!(log.matches("interface `r0` is gone").count(), 1, "{log}");
    assert_eq!(log.matches("interface `r0` is back").count(), 1, "{log}");
    let gone = stat(&out, "ports[r0].tx_link_gone").expect("tx_drop gone of r0");
    let err = stat(&out, "ports[r0].tx_errors").expect("tx_drop err of r0");
    assert_eq!(err, 0, "{out}");
    assert_eq!(
        gone, WHILE_GONE,
        "every frame routed to r0 while it was gone is a counted drop:\n{out}"
    );
    // The port counted the interface going once and its re-attach once (the table's link line).
    assert_eq!(stat(&out, "ports[r0].link_gone_events"), Some(1), "{out}");
    assert_eq!(stat(&out, "ports[r0].link_reattached"), Some(1), "{out}");
    let tx = stat(&out, "ports[r0].tx_packets").expect("tx of r0");
    // r0's egress class (the first class line) handed the port exactly what it sent or dropped.
    let handed = stat(&out, "ports[r0].classes[be].colors[*].sent").expect("r0's class");
    assert_eq!(
        tx + gone,
        handed,
        "r0: tx {tx} + gone {gone} != handed over {handed}"
    );
    assert!(
        tx >= (before + after) as u64,
        "r0 sent {tx} frames, fewer than the {} echoes that came back",
        before + after
    );
}
