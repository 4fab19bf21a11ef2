//! Faults with real interfaces (root; `SKIPPED ...` otherwise): an AF_XDP port whose interface
//! is deleted under the running `zlrouter` ends the run with a message naming it (exit 2),
//! the final table printed first; never a silent spin.

mod netns;

use netns::*;

#[test]
fn an_interface_deleted_mid_run_ends_the_run_with_a_clear_message() {
    const TEST: &str = "gone";
    if !is_root() {
        return skip(TEST, "needs root");
    }
    let mut lab = match Lab::new(TEST, &[SenderSpec::PLAIN]) {
        Ok(l) => l,
        Err(e) => return skip(TEST, &format!("cannot build the namespaces: {e}")),
    };
    let qos = "[qos]\nlink_rate_bps = 8_000_000\nshaper = { rate_bps = 8_000_000 }\n\
               [[qos.classes]]\nname = \"be\"\nweight = 1\nmax_packets = 100\n";
    let cfg = lab.router_config(qos, "");
    if let Err(e) = lab.start_router(&cfg) {
        return skip(TEST, &format!("the AF_XDP router did not start: {e}"));
    }
    // Traffic first, so the port is busy when its interface goes.
    let back = udp_echo(&lab, 7030, 50).expect("udp echo");
    assert!(back >= 48, "{back} of 50 echoes");
    lab.rtr.ip(&["link", "del", "r0"]).expect("delete r0");
    let (status, out) = lab.router.take().expect("router").wait_exit();
    eprintln!("{status:?}\n{out}");
    assert_eq!(status.code(), Some(2), "{out}");
    assert!(out.contains("stopped: a port failed"), "{out}");
    assert!(out.contains("received "), "final table missing:\n{out}");
    let err = out.split("--- stderr ---").nth(1).unwrap_or("");
    assert!(
        err.contains("r0"),
        "the error does not name the port:\n{err}"
    );
}

/// A UDP flood into a 64-entry AF_XDP RX ring: the kernel's ring-full drops reach the final
/// table (`rx_drop ring`), and every frame the router did take is accounted for.
#[test]
fn a_full_rx_ring_is_counted_in_the_final_table() {
    const TEST: &str = "ring";
    if !is_root() {
        return skip(TEST, "needs root");
    }
    let mut lab = match Lab::new(TEST, &[SenderSpec::PLAIN]) {
        Ok(l) => l,
        Err(e) => return skip(TEST, &format!("cannot build the namespaces: {e}")),
    };
    lab.sender_port_af_xdp = ", rx_ring_size = 64, tx_ring_size = 64".into();
    let qos = "[qos]\nlink_rate_bps = 100_000_000_000\n\
               [[qos.classes]]\nname = \"be\"\nweight = 1\nmax_packets = 1000\n";
    let cfg = lab.router_config(qos, "");
    if let Err(e) = lab.start_router(&cfg) {
        return skip(TEST, &format!("the AF_XDP router did not start: {e}"));
    }
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
    let ring = table_value(&out, "port r0", "ring").expect("rx_drop ring of r0");
    let rx = table_value(&out, "port r0", "rx").expect("rx of r0");
    assert!(
        ring > 0,
        "a 64-entry ring under a flood never filled:\n{out}"
    );
    // What the kernel offered the socket: taken or counted as ring-full, never more than sent.
    assert!(rx + ring <= sent + 100, "sent {sent}, rx {rx}, ring {ring}");
    assert!(out.contains("+ queued 0"), "{out}");
}
