//! The threaded router on real interfaces (root; prints `SKIPPED ...` and passes otherwise):
//! `zlrouter run` with `run.rx_workers = 2` on AF_XDP veths between a sender namespace and a
//! receiver namespace (the lab of `tests/netns/mod.rs`, namespaces `zlmt-*`) forwards UDP and
//! TCP both ways, and its final table balances with nothing left queued after SIGINT.

mod netns;

use netns::*;

#[test]
fn two_rx_workers_forward_udp_and_tcp_both_ways() {
    const TEST: &str = "mt2";
    zl_afxdp::netns::set_prefix("zlmt");
    if !is_root() {
        return skip(TEST, "needs root");
    }
    let mut lab = match Lab::new(TEST, &[SenderSpec::PLAIN]) {
        Ok(l) => l,
        Err(e) => return skip(TEST, &format!("cannot build the namespaces: {e}")),
    };
    let qos = "[qos]\nlink_rate_bps = 8_000_000\n\
               shaper = { rate_bps = 8_000_000, overhead_bytes = 0, burst_bytes = 30_000 }\n\
               classifier = { default_class = \"be\", standard = false }\n\
               [[qos.classes]]\nname = \"be\"\nweight = 1\nmax_packets = 200\n\
               aqm = { kind = \"tail-drop\" }\n";
    // `extra` lands in the `[run]` table the lab opens.
    let cfg = lab.router_config(qos, "rx_workers = 2");
    if let Err(e) = lab.start_router(&cfg) {
        return skip(TEST, &format!("the AF_XDP router did not start: {e}"));
    }
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
    assert!(out.contains("+ queued 0"), "{out}");
    let received = table_value(&out, "received", "received").unwrap();
    let forwarded = table_value(&out, "received", "forwarded").unwrap();
    let dropped = table_value(&out, "received", "dropped").unwrap();
    assert_eq!(received, forwarded + dropped, "{out}");
    assert!(forwarded > 400, "{out}");
}
