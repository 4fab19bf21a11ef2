//! The other traffic sources against what they must do: ECN senders are marked instead of
//! dropped, pacing smooths bursts into a tiny buffer, TFRC is TCP-friendly, CBR delivers its
//! rate, web transfers complete in a time a model predicts.

use netsim::scenario::{run_point, Scenario};
use netsim::SimReport;

fn run(text: &str) -> (SimReport, Vec<String>) {
    let sc = Scenario::parse(text).expect("valid scenario");
    let p = sc.expand(false).expect("valid").remove(0);
    let names = p.run.groups.iter().map(|g| g.name.clone()).collect();
    (run_point(&p, &|_| {}).expect("runs").report, names)
}

fn group_goodput(r: &SimReport, g: u16) -> f64 {
    r.flows
        .iter()
        .filter(|f| f.group == g)
        .map(|f| f.goodput_bps)
        .sum()
}

const HEAD: &str = r#"
name = "t"
title = "t"
[[plots]]
file = "x"
y = "utilisation"
"#;

#[test]
fn ecn_flows_are_marked_not_dropped_by_red() {
    let (r, _) = run(&format!(
        r#"{HEAD}
        [run]
        duration_s = 60.0
        warmup_s = 10.0
        [run.bottleneck]
        rate_mbps = 10.0
        delay_ms = 10.0
        buffer_packets = 200
        aqm = {{ kind = "red", min_th = 5.0, max_th = 15.0, max_p = 0.1, w_q = 0.002, ecn = true }}
        [[run.groups]]
        name = "ecn"
        count = 2
        access_delay_ms = 10.0
        tcp = {{ variant = "new-reno", window_cap = 1000, ecn = "rfc3168" }}
        [[run.groups]]
        name = "plain"
        count = 2
        access_delay_ms = 10.0
        tcp = {{ variant = "new-reno", window_cap = 1000 }}
        "#
    ));
    let ecn: Vec<_> = r.flows.iter().filter(|f| f.group == 0).collect();
    let plain: Vec<_> = r.flows.iter().filter(|f| f.group == 1).collect();
    assert!(
        ecn.iter()
            .all(|f| f.counters.marks > 10 && f.counters.early_drops == 0),
        "{ecn:?}"
    );
    assert!(
        plain
            .iter()
            .all(|f| f.counters.marks == 0 && f.counters.early_drops > 0),
        "{plain:?}"
    );
    // Marks cost no retransmission, so ECN flows do at least as well as loss-signalled ones.
    assert!(group_goodput(&r, 0) > 0.9 * group_goodput(&r, 1));
    assert!(r.utilisation > 0.85, "{}", r.utilisation);
}

#[test]
fn pacing_fills_a_tiny_buffer_that_bursts_cannot() {
    // Enachescu et al.: with fast access links, window bursts overflow a buffer of a few tens
    // of packets that evenly spaced packets fit (10 flows, 100 Mb/s, BDP ~ 875 packets).
    let util = |paced: bool| {
        run(&format!(
            r#"{HEAD}
            [run]
            duration_s = 30.0
            warmup_s = 10.0
            [run.bottleneck]
            rate_mbps = 100.0
            delay_ms = 10.0
            buffer_packets = 20
            [[run.groups]]
            name = "a"
            count = 10
            access_delay_ms = 10.0
            access_delay_max_ms = 40.0
            access_rate_mbps = 1000.0
            tcp = {{ variant = "reno", window_cap = 1000, paced = {paced} }}
            "#
        ))
        .0
        .utilisation
    };
    let (bursty, paced) = (util(false), util(true));
    assert!(paced > bursty + 0.1, "paced {paced} vs non-paced {bursty}");
}

#[test]
fn tfrc_is_tcp_friendly() {
    let (r, _) = run(&format!(
        r#"{HEAD}
        [run]
        duration_s = 120.0
        warmup_s = 20.0
        [run.bottleneck]
        rate_mbps = 10.0
        delay_ms = 10.0
        buffer_packets = 60
        aqm = {{ kind = "red", min_th = 10.0, max_th = 30.0, max_p = 0.1, w_q = 0.002 }}
        [[run.groups]]
        name = "tfrc"
        kind = "tfrc"
        count = 2
        access_delay_ms = 10.0
        tfrc = {{ packet_size = 1000, max_rate_bps = 10000000.0 }}
        [[run.groups]]
        name = "tcp"
        count = 2
        access_delay_ms = 10.0
        tcp = {{ variant = "new-reno", window_cap = 1000 }}
        "#
    ));
    let ratio = group_goodput(&r, 0) / group_goodput(&r, 1);
    // TCP-friendly: within a factor of two of TCP on the same path (RFC 5348 §1's goal).
    assert!((0.5..=2.0).contains(&ratio), "TFRC / TCP = {ratio}");
    assert!(r.utilisation > 0.9);
}

#[test]
fn cbr_delivers_its_rate_on_an_idle_path() {
    let (r, _) = run(&format!(
        r#"{HEAD}
        [run]
        duration_s = 10.0
        warmup_s = 1.0
        [run.bottleneck]
        rate_mbps = 10.0
        delay_ms = 10.0
        buffer_packets = 10
        [[run.groups]]
        name = "cbr"
        kind = "cbr"
        count = 1
        access_delay_ms = 1.0
        cbr = {{ rate_bps = 2000000.0, packet_size = 500 }}
        "#
    ));
    let g = r.flows[0].goodput_bps;
    assert!((g / 2e6 - 1.0).abs() < 0.01, "goodput {g}");
    assert_eq!(r.flows[0].counters.drops(), 0);
    assert!((r.utilisation - 0.2).abs() < 0.01);
}

#[test]
fn web_transfers_complete_in_slow_start_time() {
    // One host, fixed-size-ish transfers (shape 50: nearly constant 31 packets) on an empty
    // path: slow start from 1 packet needs ceil(log2(31 + 1)) = 5 RTTs of 60 ms, plus the
    // last packet's one-way trip; the transfer time is about 5 RTT = 0.3 s.
    let (r, _) = run(&format!(
        r#"{HEAD}
        [run]
        duration_s = 60.0
        warmup_s = 5.0
        [run.bottleneck]
        rate_mbps = 100.0
        delay_ms = 10.0
        buffer_packets = 1000
        [[run.groups]]
        name = "web"
        count = 1
        access_delay_ms = 20.0
        tcp = {{ variant = "reno", window_cap = 1000 }}
        web = {{ mean_size_packets = 31.0, shape = 50.0, mean_off_ms = 200.0 }}
        "#
    ));
    let c = r.flows[0].counters;
    assert!(c.transfers > 50, "{c:?}");
    let mean = c.transfer_time_sum as f64 * 1e-9 / c.transfers as f64;
    assert!((0.25..=0.36).contains(&mean), "mean transfer {mean} s");
}
