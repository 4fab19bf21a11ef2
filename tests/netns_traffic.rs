//! Real Linux traffic through `zlrouter` (root; each test prints `SKIPPED ...` and passes
//! otherwise): sender namespaces -> the router namespace (the `zlrouter` binary on AF_XDP
//! ports, kernel forwarding off) -> a receiver namespace. See `tests/netns/mod.rs` for the lab
//! and docs/real-traffic.md for what each test shows.

mod netns;

use netns::*;

/// The bottleneck: `rate` bit/s of frame bytes (shaper overhead 0, so frame bytes on the
/// receiver's interface are what the shaper counts), `max_packets` of buffer, `aqm`.
fn bottleneck(rate: u64, max_packets: u32, aqm: &str) -> String {
    format!(
        "[qos]\nlink_rate_bps = {rate}\n\
         shaper = {{ rate_bps = {rate}, overhead_bytes = 0 }}\n\
         classifier = {{ default_class = \"be\", standard = false }}\n\
         [[qos.classes]]\nname = \"be\"\nweight = 1\nmax_packets = {max_packets}\naqm = {aqm}\n"
    )
}

fn lab_or_skip(test: &str, specs: &[SenderSpec], qos: &str) -> Option<Lab> {
    if !is_root() {
        skip(test, "needs root");
        return None;
    }
    let mut lab = match Lab::new(test, specs) {
        Ok(l) => l,
        Err(e) => {
            skip(test, &format!("cannot build the namespaces: {e}"));
            return None;
        }
    };
    let cfg = lab.router_config(qos, "");
    if let Err(e) = lab.start_router(&cfg) {
        skip(test, &format!("the AF_XDP router did not start: {e}"));
        return None;
    }
    Some(lab)
}

#[test]
fn udp_and_tcp_flow_both_ways() {
    let qos = bottleneck(8_000_000, 200, "{ kind = \"tail-drop\" }");
    let Some(mut lab) = lab_or_skip("both", &[SenderSpec::PLAIN], &qos) else {
        return;
    };
    // UDP: every datagram crosses the router twice (sender -> receiver, echo back).
    let back = udp_echo(&lab, 7001, 200).expect("udp echo");
    assert!(back >= 198, "only {back} of 200 UDP echoes came back");
    // TCP: a bulk flow each way over one connection per direction.
    let sink = tcp_sink(&lab, 7002, 1);
    let flow = tcp_flow(&lab, 0, 7002, "cubic", 1.0);
    let sent = flow.join().unwrap().expect("flow");
    let got = sink.join().unwrap().expect("sink");
    assert!(sent.bytes_acked > 100_000, "{sent:?}");
    assert!(got[0] >= sent.bytes_acked, "{got:?} vs {sent:?}");
    let (status, out) = lab.stop_router();
    assert!(status.success(), "{status:?}\n{out}");
    assert!(out.contains("+ queued 0"), "{out}");
    let fwd = table_value(&out, "received", "forwarded").unwrap();
    assert!(fwd > 400, "{out}");
}
