//! The egress Zombie List's flow estimate 1/P(t): it tracks the number of flows, it is
//! exported, and `sqrt-n-live` buffers follow it (spec/03 "decided").

mod common;

use zl_dataplane::RouterConfig;

fn config(flows: u32, live: bool) -> RouterConfig {
    let buffer = if live {
        r#"buffer = { rule = "sqrt-n-live", rate_bps = 100_000_000, rtt_ms = 100.0, floor_bytes = 10_000, ceiling_bytes = 1_250_000, period_ms = 50.0 }"#
    } else {
        ""
    };
    let text = format!(
        r#"
[run]
duration_s = 2.0
drain_s = 0.1
seed = 3
[metrics]
flow_estimate = true
[[ports]]
name = "in"
kind = "generator"
mac = "02:00:00:00:00:01"
[[ports.generator.flows]]
name = "equal"
count = {flows}
rate_bps = {rate}
size = 500
arrival = "poisson"
src = "10.0.0.1"
dst = "10.9.0.1"
[[ports]]
name = "out"
kind = "sink"
mac = "02:00:00:00:00:02"
[[routes]]
prefix = "0.0.0.0/0"
port = "out"
next_hop_mac = "02:00:00:00:00:03"
[qos]
shaper = {{ rate_bps = 100_000_000 }}
[[qos.classes]]
name = "be"
weight = 1
max_packets = 4000
{buffer}
"#,
        rate = 40_000_000 / flows as u64,
    );
    RouterConfig::from_toml(&text).unwrap()
}

#[test]
fn the_estimate_follows_the_number_of_equal_flows() {
    for flows in [10u32, 50] {
        let (dp, _) = common::run(&config(flows, false), &common::root());
        common::assert_conserved(&dp);
        let n = dp.slots()[1].estimated_flows().unwrap();
        // N equal flows give 1/P = N (spec/01 eq. 3.4); M = 1000 and alpha = 1/M leave a
        // few-percent error after 2 s of about 20 000 arrivals.
        assert!(
            (n - flows as f64).abs() < 0.25 * flows as f64,
            "{flows} flows estimated as {n}"
        );
    }
}

#[test]
fn sqrt_n_live_buffers_follow_the_estimate() {
    let (dp, _) = common::run(&config(25, true), &common::root());
    let out = &dp.slots()[1];
    let n = out.estimated_flows().unwrap();
    let cap = out.qos.capacity(0).unwrap();
    // C * RTT / sqrt(N) with C * RTT = 1.25 MB.
    let expected = 1_250_000.0 / n.sqrt();
    assert!(
        (cap.bytes as f64 - expected).abs() < 0.05 * expected,
        "capacity {} B, expected {expected:.0} B for N = {n:.1}",
        cap.bytes
    );
}
