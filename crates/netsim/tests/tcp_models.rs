//! The TCP models against theory: link filling, the Mathis relation, Vegas's queue target,
//! fair sharing. Each run is a few simulated minutes at most and takes well under a second.

use netsim::{
    jain_index, DropTail, FifoQueue, FlowSpec, RandomLoss, SimReport, SimSpec, Simulator,
    SourceSpec, TcpParams, TcpVariant,
};
use zl_core::Nanos;

fn tcp(variant: TcpVariant, window_cap: u32) -> SourceSpec {
    SourceSpec::Tcp {
        params: TcpParams {
            variant,
            window_cap,
            packet_size: 1000,
            ..TcpParams::default()
        },
        web: None,
    }
}

fn flow(source: SourceSpec, access_ms: u64, start_ms: u64) -> FlowSpec {
    FlowSpec {
        source,
        access_delay: Nanos::from_millis(access_ms),
        access_rate_bps: 0.0,
        egress_delay: Nanos::ZERO,
        start: Nanos::from_millis(start_ms),
        dscp: None,
        group: 0,
        src_host: None,
        dst_host: 0,
    }
}

/// 10 Mb/s, one-way bottleneck delay 10 ms; with 10 ms access delay the RTT is 40 ms and the
/// BDP is 50 packets of 1000 bytes.
fn spec(flows: Vec<FlowSpec>, secs: u64) -> SimSpec {
    SimSpec {
        seed: 7,
        duration: Nanos::from_secs(secs),
        warmup: Nanos::from_secs(secs / 5),
        bottleneck_rate_bps: 10e6,
        bottleneck_delay: Nanos::from_millis(10),
        sample_interval: None,
        flows,
    }
}

fn run_droptail(s: &SimSpec, buffer: u32) -> SimReport {
    let q = FifoQueue::new(DropTail, buffer, u64::MAX);
    Simulator::new(s, Box::new(q)).expect("valid spec").run()
}

#[test]
fn lone_reno_fills_the_link_with_a_bdp_buffer() {
    let s = spec(vec![flow(tcp(TcpVariant::Reno, 10_000), 10, 0)], 100);
    let r = run_droptail(&s, 50);
    assert!(r.utilisation >= 0.95, "utilisation {}", r.utilisation);
    assert!(r.utilisation <= 1.0 + 1e-9);
    assert!(
        r.bottleneck.tail_drops > 0,
        "Reno must probe until it loses"
    );
}

#[test]
fn reno_throughput_follows_mathis_under_random_loss() {
    // Fast link (no queueing): RTT = 2 * (40 + 10) ms = 100 ms.
    for p in [0.002, 0.01] {
        let mut s = spec(vec![flow(tcp(TcpVariant::NewReno, 100_000), 40, 0)], 600);
        s.bottleneck_rate_bps = 1e9;
        let q = FifoQueue::new(RandomLoss::new(p), 100_000, u64::MAX);
        let r = Simulator::new(&s, Box::new(q)).expect("valid").run();
        let measured = r.flows[0].counters.sent as f64 / r.measured_s;
        let mathis = (1.0 / 0.1) * (1.5f64).sqrt() / p.sqrt();
        let ratio = measured / mathis;
        assert!(
            (0.8..=1.2).contains(&ratio),
            "p={p}: {measured:.1} pkt/s vs Mathis {mathis:.1} (ratio {ratio:.3})"
        );
    }
}

#[test]
fn lone_vegas_keeps_between_alpha_and_beta_packets_queued() {
    let s = spec(vec![flow(tcp(TcpVariant::Vegas, 10_000), 10, 0)], 60);
    let r = run_droptail(&s, 1000);
    assert_eq!(
        r.bottleneck.tail_drops, 0,
        "Vegas must not overflow a large buffer"
    );
    let q = r.mean_queue_packets;
    // alpha = 1, beta = 3; half a packet of slack for the one in transmission and rounding.
    assert!((0.5..=3.5).contains(&q), "mean queue {q} packets");
    assert!(r.utilisation > 0.95, "utilisation {}", r.utilisation);
}

#[test]
fn two_reno_flows_with_equal_rtt_share_fairly() {
    let flows = vec![
        flow(tcp(TcpVariant::Reno, 10_000), 10, 0),
        flow(tcp(TcpVariant::Reno, 10_000), 10, 1_300),
    ];
    let r = run_droptail(&spec(flows, 300), 50);
    let x: Vec<f64> = r.flows.iter().map(|f| f.goodput_bps).collect();
    let j = jain_index(&x);
    assert!(j >= 0.95, "Jain {j}, goodputs {x:?}");
    assert!(r.utilisation > 0.9);
}

#[test]
fn jain_index_extremes() {
    assert!((jain_index(&[1.0, 1.0, 1.0]) - 1.0).abs() < 1e-12);
    assert!((jain_index(&[1.0, 0.0, 0.0, 0.0]) - 0.25).abs() < 1e-12);
}

fn ns2(variant: TcpVariant, window_cap: u32) -> SourceSpec {
    SourceSpec::Tcp {
        params: TcpParams {
            variant,
            window_cap,
            packet_size: 1040,
            initial_window: 2,
            max_rto_ms: 60_000.0,
            model: netsim::TcpModel::Ns2,
            ..TcpParams::default()
        },
        web: None,
    }
}

/// The ns-2 senders (`model = "ns2"`) against the same theory: Reno and NewReno fill the link
/// with a BDP buffer, Tahoe (which restarts from one packet at every loss) fills less, and
/// NewReno follows Mathis under random loss.
#[test]
fn ns2_senders_fill_the_link_and_follow_mathis() {
    let mut util = Vec::new();
    for v in [TcpVariant::Reno, TcpVariant::NewReno, TcpVariant::Tahoe] {
        let s = spec(vec![flow(ns2(v, 10_000), 10, 0)], 100);
        let r = run_droptail(&s, 48);
        assert!(
            r.bottleneck.tail_drops > 0,
            "{v:?} must probe until it loses"
        );
        util.push(r.utilisation);
    }
    assert!(util[0] >= 0.95 && util[1] >= 0.95, "Reno/NewReno {util:?}");
    assert!(util[2] < util[0] && util[2] > 0.7, "Tahoe {util:?}");
    for p in [0.002, 0.01] {
        let mut s = spec(vec![flow(ns2(TcpVariant::NewReno, 100_000), 40, 0)], 600);
        s.bottleneck_rate_bps = 1e9;
        let q = FifoQueue::new(RandomLoss::new(p), 100_000, u64::MAX);
        let r = Simulator::new(&s, Box::new(q)).expect("valid").run();
        let measured = r.flows[0].counters.sent as f64 / r.measured_s;
        let mathis = (1.0 / 0.1) * (1.5f64).sqrt() / p.sqrt();
        let ratio = measured / mathis;
        assert!(
            (0.8..=1.2).contains(&ratio),
            "p={p}: {measured:.1} pkt/s vs Mathis {mathis:.1} (ratio {ratio:.3})"
        );
    }
}
