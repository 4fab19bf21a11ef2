//! The threaded router on real interfaces (root; prints `SKIPPED ...` and passes otherwise):
//! `zlrouter run` with `run.rx_workers = 2` on AF_XDP veths between a sender namespace and a
//! receiver namespace (the lab of `zl_testkit::lab`, namespaces `zlmt-*`) forwards UDP and
//! TCP both ways, and its final table balances with nothing left queued after SIGINT; with
//! `rx_workers = 2` and `tx_workers = 2` under tenfold overload, the same.
//!
//! `ZLR_NETNS_PREFIX` renames the namespaces (default `zlmt`), so that runs beside each other
//! on one machine keep apart.

use zl_testkit::lab::*;

/// The binary the lab runs (only the root package's tests know where Cargo built it).
const ZLROUTER: &str = env!("CARGO_BIN_EXE_zlrouter");

/// The namespaces' prefix: `ZLR_NETNS_PREFIX`, or `zlmt`.
fn prefix() -> &'static str {
    match std::env::var("ZLR_NETNS_PREFIX") {
        Ok(p) if !p.is_empty() => Box::leak(p.into_boxed_str()),
        _ => "zlmt",
    }
}

#[test]
fn two_rx_workers_forward_udp_and_tcp_both_ways() {
    const TEST: &str = "mt2";
    zl_testkit::netns::set_prefix(prefix());
    let Some(mut lab) = Lab::or_skip(ZLROUTER, TEST, &[SenderSpec::PLAIN]) else {
        return;
    };
    let qos = "[qos]\nlink_rate_bps = 8_000_000\n\
               shaper = { rate_bps = 8_000_000, overhead_bytes = 0, burst_bytes = 30_000 }\n\
               classifier = { default_class = \"be\", standard = false }\n\
               [[qos.classes]]\nname = \"be\"\nweight = 1\nmax_packets = 200\n\
               aqm = { kind = \"tail-drop\" }\n";
    // `extra` lands in the `[run]` table the lab opens.
    let cfg = lab.router_config(qos, "rx_workers = 2");
    lab.start(TEST, &cfg);
    // UDP: every datagram crosses the router twice (sender -> receiver, echo back), through
    // different receive workers (port r0 is worker 0's, rx worker 1's).
    let back = udp_echo(&lab, 7101, 200).expect("udp echo");
    assert!(back >= 198, "only {back} of 200 UDP echoes came back");
    // TCP: a bulk flow, data one way and ACKs the other.
    let sink = tcp_sink(&lab, 7102, 1);
    let flow = tcp_flow(&lab, 0, 7102, "cubic", 1.0);
    let sent = flow.join().unwrap().expect("flow");
    let got = sink.join().unwrap().expect("sink");
    assert!(sent.bytes_acked > 100_000, "{sent:?}");
    assert!(got[0] >= sent.bytes_acked, "{got:?} vs {sent:?}");
    let (status, out) = lab.stop_router();
    eprintln!("{out}");
    assert!(status.success(), "{status:?}\n{out}");
    assert!(out.contains("threads: 2 receive workers"), "{out}");
    assert_eq!(stat(&out, "totals.queued"), Some(0), "{out}");
    let received = stat(&out, "totals.received").unwrap();
    let forwarded = stat(&out, "totals.forwarded").unwrap();
    let dropped = stat(&out, "totals.dropped").unwrap();
    zl_testkit::conservation::assert_conserved(received, forwarded, dropped, 0, &out);
    assert!(forwarded > 400, "{out}");
}

/// Two receive and two transmit workers (ports r0 and rx on transmit worker 0, r1 on
/// worker 1) under tenfold overload: both senders flood 64-byte frames at the receiver for
/// 2 s through rx, shaped to 1 Mbit/s (about 1950 frames a second; two senders offer far more
/// than ten times that on any machine that runs the lab), while the receiver floods sender 1
/// through r1 (unshaped) and sender 0 checks the path with UDP echoes first. After SIGINT the
/// final table balances exactly with nothing queued, both transmit workers' ports sent, and the
/// overload shows as drops.
#[test]
fn two_rx_and_two_tx_workers_balance_under_tenfold_overload() {
    use std::net::UdpSocket;
    use std::time::{Duration, Instant};
    const TEST: &str = "mt22";
    zl_testkit::netns::set_prefix(prefix());
    let Some(mut lab) = Lab::or_skip(ZLROUTER, TEST, &[SenderSpec::PLAIN, SenderSpec::PLAIN])
    else {
        return;
    };
    let qos = "[qos]\nlink_rate_bps = 1_000_000\n\
               shaper = { rate_bps = 1_000_000, overhead_bytes = 0 }\n\
               classifier = { default_class = \"be\", standard = false }\n\
               [[qos.classes]]\nname = \"be\"\nweight = 1\nmax_packets = 200\n\
               aqm = { kind = \"red\", min_th = 20.0, max_th = 60.0 }\n";
    let cfg = lab.router_config(qos, "rx_workers = 2\ntx_workers = 2");
    lab.start(TEST, &cfg);
    let back = udp_echo(&lab, 7201, 50).expect("udp echo");
    assert!(back >= 45, "only {back} of 50 UDP echoes came back");
    let flood = |to: String| {
        move || -> u64 {
            let s = UdpSocket::bind(("0.0.0.0", 0)).expect("bind");
            let end = Instant::now() + Duration::from_secs(2);
            let mut sent = 0u64;
            while Instant::now() < end {
                for _ in 0..64 {
                    if s.send_to(&[0u8; 18], (to.as_str(), 9)).is_ok() {
                        sent += 1;
                    }
                }
            }
            sent
        }
    };
    let mut floods: Vec<_> = (lab.senders.iter())
        .map(|ns| ns.spawn_in(flood(RECEIVER_IP.to_owned())))
        .collect();
    floods.push(lab.rcv.spawn_in(flood(sender_ip(1))));
    let sent: Vec<u64> = floods
        .into_iter()
        .map(|f| f.join().unwrap().unwrap())
        .collect();
    let (status, out) = lab.stop_router();
    eprintln!("sent {sent:?}\n{out}");
    assert!(status.success(), "{status:?}\n{out}");
    assert!(
        out.contains("threads: 2 receive workers") && out.contains("2 transmit worker(s)"),
        "{out}"
    );
    assert_eq!(stat(&out, "totals.queued"), Some(0), "{out}");
    let received = stat(&out, "totals.received").unwrap();
    let forwarded = stat(&out, "totals.forwarded").unwrap();
    let dropped = stat(&out, "totals.dropped").unwrap();
    zl_testkit::conservation::assert_conserved(received, forwarded, dropped, 0, &out);
    let tx = |port: &str| stat(&out, &format!("ports[{port}].tx_packets")).unwrap();
    // Transmit worker 0 sent on rx (and r0: the echoes), worker 1 on r1.
    assert!(tx("rx") > 0 && tx("r0") > 0 && tx("r1") > 0, "{out}");
    // The overload was dropped, by cause, at rx's queue or the rings.
    assert!(dropped > 0, "{out}");
}
