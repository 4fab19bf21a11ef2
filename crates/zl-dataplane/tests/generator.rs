//! The traffic generator offers what its config says: rates, sizes, DSCP/ECN, arrival
//! processes, and well-formed frames that `zl_wire` parses.

use zl_core::{Ecn, Nanos};
use zl_dataplane::port::{GeneratorParams, GeneratorPort, GeneratorSetup};
use zl_port::{Batch, BufPool, Port, Readiness};
use zl_wire::{MacAddr, ParseConfig};

fn params(extra: &str) -> GeneratorParams {
    let text = format!(
        r#"
[[flows]]
name = "g"
src = "10.0.0.1"
dst = "10.9.0.1"
{extra}
"#
    );
    toml::from_str(&text).unwrap()
}

fn generator(p: &GeneratorParams, end: Nanos, seed: u64) -> GeneratorPort {
    let setup = GeneratorSetup {
        name: "gen",
        index: 3,
        own_mac: MacAddr([2, 0, 0, 0, 0, 1]),
        key_prefix: "ports[0].generator",
        seed,
        end,
        tag_base: 0,
        acks: None,
    };
    GeneratorPort::new(&setup, p).unwrap()
}

/// Drains the generator in virtual time; returns (time, frame) of every packet.
fn drain(g: &mut GeneratorPort) -> Vec<(Nanos, Vec<u8>)> {
    let mut pool = BufPool::new(64, 2048);
    let mut batch = Batch::new();
    let mut out = Vec::new();
    while let Readiness::NextPacketAt(t) = g.readiness() {
        g.recv(t, &mut pool, &mut batch).unwrap();
        for b in batch.drain() {
            assert_eq!(b.in_port, 3);
            out.push((b.rx_time, b.as_slice().to_vec()));
            pool.free(b);
        }
    }
    out
}

#[test]
fn cbr_offers_exactly_its_rate_with_even_spacing() {
    // 1 Mbit/s of 1000-byte frames: one every 8 ms, 125 per second.
    let p = params("rate_bps = 1_000_000\nsize = 1000\narrival = \"cbr\"");
    let pkts = drain(&mut generator(&p, Nanos::from_secs(2), 1));
    assert!((249..=250).contains(&pkts.len()), "{}", pkts.len());
    for w in pkts.windows(2) {
        assert_eq!((w[1].0 - w[0].0).as_nanos(), 8_000_000);
    }
}

#[test]
fn poisson_offers_its_mean_rate_with_exponential_gaps() {
    // 100 flows x 80 kbit/s of 1000-byte frames: 1000 packets per second in total.
    let p = params("count = 100\nrate_bps = 80_000\nsize = 1000\narrival = \"poisson\"");
    let pkts = drain(&mut generator(&p, Nanos::from_secs(20), 9));
    let n = pkts.len() as f64;
    // 20 000 expected; a Poisson count's sd is ~141: allow 4 sd.
    assert!((n - 20_000.0).abs() < 600.0, "{n}");
    // Merged Poisson streams: the gaps' coefficient of variation is ~1 (CBR would be ~0).
    let gaps: Vec<f64> = pkts
        .windows(2)
        .map(|w| (w[1].0 - w[0].0).as_nanos() as f64)
        .collect();
    let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
    let var = gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64;
    let cv = var.sqrt() / mean;
    assert!((cv - 1.0).abs() < 0.05, "cv {cv}");
}

#[test]
fn on_off_sends_only_in_on_periods() {
    let p = params(
        "rate_bps = 8_000_000\nsize = 1000\narrival = \"on-off\"\non_ms = 100.0\noff_ms = 300.0",
    );
    let pkts = drain(&mut generator(&p, Nanos::from_secs(4), 2));
    // 1 ms per packet while on: ~100 per 400 ms cycle, 10 cycles.
    assert!((990..=1010).contains(&pkts.len()), "{}", pkts.len());
    // Cycles start at the group's start time (0); every packet falls in an on period.
    for (t, _) in &pkts {
        let phase = t.as_nanos() % 400_000_000;
        assert!(phase < 100_000_000, "packet at phase {phase} ns");
    }
}

#[test]
fn frames_parse_and_carry_the_configured_fields() {
    let p = params("rate_bps = 1_000_000\nsize = 64\nsize_max = 1500\ndscp = \"af21\"\necn = \"ect0\"\ncount = 4");
    let pkts = drain(&mut generator(&p, Nanos::from_secs(1), 3));
    let cfg = ParseConfig::default();
    let mut sizes = std::collections::HashSet::new();
    let mut flows = std::collections::HashSet::new();
    for (_, f) in &pkts {
        let info = zl_wire::parse(f, &cfg).expect("generated frames parse (checksum verified)");
        assert_eq!(info.dscp(), 18);
        assert_eq!(info.ecn(), Ecn::Ect0);
        assert!((64..=1500).contains(&f.len()));
        sizes.insert(f.len());
        flows.insert(info.flow);
    }
    assert_eq!(flows.len(), 4, "count = 4 gives four flows");
    assert!(sizes.len() > 50, "sizes are spread over 64..=1500");
}

#[test]
fn ipv6_frames_parse() {
    let p: GeneratorParams = toml::from_str(
        r#"
[[flows]]
name = "v6"
src = "2001:db8::1"
dst = "2001:db8:9::1"
rate_bps = 1_000_000
size = 100
ecn = "ect1"
"#,
    )
    .unwrap();
    let pkts = drain(&mut generator(&p, Nanos::from_millis(100), 4));
    assert!(!pkts.is_empty());
    for (_, f) in &pkts {
        let info = zl_wire::parse(f, &ParseConfig::default()).unwrap();
        assert_eq!(info.ecn(), Ecn::Ect1);
        assert_eq!(info.ip_len + 14, f.len());
    }
}

#[test]
fn the_same_seed_gives_the_same_traffic() {
    let p =
        params("count = 10\nrate_bps = 100_000\narrival = \"poisson\"\nsize = 64\nsize_max = 1500");
    let a = drain(&mut generator(&p, Nanos::from_secs(1), 5));
    let b = drain(&mut generator(&p, Nanos::from_secs(1), 5));
    let c = drain(&mut generator(&p, Nanos::from_secs(1), 6));
    assert_eq!(a, b);
    assert_ne!(a, c);
}

/// The UDP checksum of `frame` (Ethernet + IPv4 or IPv6 + UDP) verifies, written out as RFC
/// 768 defines it: the pseudo-header in front of the segment sums to 0xffff. Independent of
/// zl_wire's pseudo-header code.
fn udp_checksum_verifies(frame: &[u8]) -> bool {
    let (pseudo, seg) = match u16::from_be_bytes([frame[12], frame[13]]) {
        0x0800 => {
            let seg = &frame[34..];
            let mut p = frame[26..34].to_vec();
            p.extend_from_slice(&[0, 17]);
            p.extend_from_slice(&(seg.len() as u16).to_be_bytes());
            (p, seg)
        }
        0x86dd => {
            let seg = &frame[54..];
            let mut p = frame[22..54].to_vec();
            p.extend_from_slice(&(seg.len() as u32).to_be_bytes());
            p.extend_from_slice(&[0, 0, 0, 17]);
            (p, seg)
        }
        other => panic!("ethertype {other:#x}"),
    };
    let stored = u16::from_be_bytes([seg[6], seg[7]]);
    let mut all = pseudo;
    all.extend_from_slice(seg);
    stored != 0 && zl_wire::checksum::ones_complement_sum(&all) == 0xffff
}

/// Every frame the generator writes, IPv4 and IPv6, every size of a range (odd lengths too),
/// carries a UDP checksum that verifies: a checksum of 0 is illegal for IPv6 (RFC 8200 §8.1;
/// tshark flags every such frame).
#[test]
fn udp_checksums_are_real_and_verify() {
    for (src, dst) in [("10.0.0.1", "10.9.0.1"), ("2001:db8::1", "2001:db8:9::1")] {
        let p: GeneratorParams = toml::from_str(&format!(
            r#"
[[flows]]
name = "g"
count = 3
src = "{src}"
dst = "{dst}"
rate_bps = 10_000_000
size = 62
size_max = 1514
"#
        ))
        .unwrap();
        let pkts = drain(&mut generator(&p, Nanos::from_millis(200), 9));
        assert!(pkts.len() > 100);
        for (_, f) in &pkts {
            assert!(
                udp_checksum_verifies(f),
                "{src}: {} bytes: {f:02x?}",
                f.len()
            );
        }
    }
}

fn tcp_generator(extra: &str, end: Nanos) -> GeneratorPort {
    let p = params(&format!("rate_bps = 100_000_000\nsize = 1000\n{extra}"));
    generator(&p, end, 1)
}

/// The (flow, sequence) a responsive segment carries at the start of its UDP payload.
fn segment(frame: &[u8]) -> (u32, u32) {
    let p = &frame[42..54];
    assert_eq!(&p[0..4], b"zlRn");
    (
        u32::from_be_bytes(p[4..8].try_into().unwrap()),
        u32::from_be_bytes(p[8..12].try_into().unwrap()),
    )
}

#[test]
fn unacknowledged_a_responsive_flow_sends_its_first_window_then_retransmits_on_its_timer() {
    // No sink: nothing is ever acknowledged. Two segments (the initial window), then segment
    // 0 again each time the timer expires: after 1 s (RFC 6298's initial timeout), then after
    // 2 s and 4 s more (back-off), all before the end at 10 s.
    let mut g = tcp_generator("tcp = { rtt_ms = 10.0 }", Nanos::from_secs(10));
    let pkts = drain(&mut g);
    let seqs: Vec<u32> = pkts.iter().map(|(_, f)| segment(f).1).collect();
    assert_eq!(seqs, [0, 1, 0, 0, 0]);
    let t: Vec<f64> = pkts.iter().map(|(t, _)| t.as_secs_f64()).collect();
    // The second segment follows the first by one frame time on the 100 Mbit/s access link.
    assert_eq!((pkts[1].0 - pkts[0].0).as_nanos(), 80_000);
    for (k, gap) in [(2, 1.0), (3, 2.0), (4, 4.0)] {
        let since = t[k] - if k == 2 { t[0] } else { t[k - 1] };
        assert!((since - gap).abs() < 1e-3, "retransmission {k}: {since} s");
    }
    let s = g.responsive();
    assert_eq!((s.len(), s[0].timeouts, s[0].cwnd), (1, 3, 1.0));
}

#[test]
fn acknowledged_at_once_a_responsive_flow_doubles_its_window_each_round_trip_up_to_its_cap() {
    // A perfect sink: every segment is delivered the moment it is sent, and its ACK reaches
    // the sender `rtt_ms` = 10 ms later. Slow start: 2, 4, 8, 16 segments per round trip, then
    // the advertised window (16) caps it.
    let mut g = tcp_generator(
        "tcp = { rtt_ms = 10.0, window = 16 }",
        Nanos::from_millis(75),
    );
    let acks = g
        .acks()
        .expect("a responsive group has an acknowledgement channel");
    let mut pool = BufPool::new(64, 2048);
    let mut batch = Batch::new();
    let mut per_round = [0u32; 8];
    let mut frames = Vec::new();
    while let Readiness::NextPacketAt(t) = g.readiness() {
        g.recv(t, &mut pool, &mut batch).unwrap();
        for b in batch.drain() {
            assert!(acks.delivered(b.rx_time, b.in_port, b.as_slice()));
            per_round[(b.rx_time.as_nanos() / 10_000_000) as usize] += 1;
            frames.push(b.as_slice().to_vec());
            pool.free(b);
        }
    }
    assert_eq!(per_round, [2, 4, 8, 16, 16, 16, 16, 16]);
    let seqs: Vec<u32> = frames.iter().map(|f| segment(f).1).collect();
    assert_eq!(
        seqs,
        (0..94).collect::<Vec<_>>(),
        "in order, nothing resent"
    );
    assert!(frames.iter().all(|f| udp_checksum_verifies(f)));
    assert_eq!(acks.overflows(), 0);
    let s = g.responsive()[0];
    assert_eq!((s.cwnd, s.timeouts), (16.0, 0));
}

#[test]
fn a_delivery_of_another_port_or_a_plain_frame_is_not_a_segment() {
    let mut g = tcp_generator("tcp = { rtt_ms = 10.0 }", Nanos::from_millis(1));
    let acks = g.acks().unwrap();
    let pkts = drain(&mut g);
    let (_, f) = &pkts[0];
    assert!(
        !acks.delivered(Nanos::ZERO, 4, f),
        "received by another port"
    );
    let plain = drain(&mut generator(
        &params("rate_bps = 1_000_000"),
        Nanos::from_millis(10),
        1,
    ));
    assert!(
        !acks.delivered(Nanos::ZERO, 3, &plain[0].1),
        "an open-loop frame"
    );
    assert!(acks.delivered(Nanos::ZERO, 3, f));
}

#[test]
fn responsive_groups_reject_what_a_window_cannot_pace() {
    let reject = |extra: &str, key: &str| {
        let p = params(&format!("rate_bps = 1_000_000\n{extra}"));
        let setup = GeneratorSetup {
            name: "gen",
            index: 3,
            own_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            key_prefix: "ports[0].generator",
            seed: 1,
            end: Nanos::from_secs(1),
            tag_base: 0,
            acks: None,
        };
        let err = GeneratorPort::new(&setup, &p).unwrap_err().to_string();
        assert!(err.contains(key), "{extra}: {err}");
    };
    reject(
        "arrival = \"poisson\"\ntcp = { rtt_ms = 10.0 }",
        "ports[0].generator.flows[0].arrival",
    );
    reject(
        "size = 100\nsize_max = 200\ntcp = { rtt_ms = 10.0 }",
        "flows[0].size_max",
    );
    reject("tcp = { rtt_ms = 0.0 }", "flows[0].tcp.rtt_ms");
    reject("tcp = { rtt_ms = 10.0, window = 0 }", "flows[0].tcp.window");
    reject(
        "tcp = { rtt_ms = 10.0, min_rto_ms = 0.5 }",
        "flows[0].tcp.min_rto_ms",
    );
}
