//! RED (docs/algorithms/red.md): observed mark/drop rates and gaps at a held average against the
//! theory of the count term, ECN marking, forced and tail drops, gentle mode, idle decay, byte
//! mode.

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use zl_aqm::red::count_adjusted;
use zl_aqm::{
    Admission, Arrival, Ecn, Nanos, PacketMeta, QueueUnit, QueueView, Red, RedParams, RedRegion,
    Verdict,
};

const LINK: u64 = 10_000_000; // 10 Mb/s: s = 500 B * 8 / 10 Mb/s = 400 us

fn queue(len: u32) -> QueueView {
    QueueView {
        len_packets: len,
        len_bytes: len as u64 * 500,
        capacity_packets: 1000,
        capacity_bytes: u64::MAX,
        head_enqueued_at: None,
        idle_since: None,
    }
}

fn pkt(ecn: Ecn) -> PacketMeta {
    PacketMeta {
        len: 500,
        ecn,
        ..PacketMeta::default()
    }
}

fn red(params: RedParams) -> Admission<Red> {
    Admission::new(Red::new(params.validate(LINK).unwrap()))
}

fn params() -> RedParams {
    RedParams {
        min_th: 5.0,
        max_th: 15.0,
        max_p: 0.1,
        ..RedParams::default()
    }
}

/// At a held average with p_b = 0.05 the gap between drops is uniform on 1..=20:
/// mean 10.5 (drop rate 1/10.5), each gap length with probability 0.05.
#[test]
fn held_average_drop_gaps_are_uniform_as_the_count_term_predicts() {
    let mut r = red(params());
    r.policy_mut().set_avg(10.0);
    assert_eq!(r.policy().config().region(10.0), RedRegion::Early(0.05));
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let q = queue(10);
    let p = pkt(Ecn::NotEct);
    let mut hist = [0u64; 21];
    let mut since = 0usize;
    let n = 300_000;
    for _ in 0..n {
        since += 1;
        match r.admit(&Arrival::new(Nanos::ZERO, &q, &p), &mut rng) {
            Verdict::EarlyDrop => {
                assert!(since <= 20, "gap {since} beyond 1/p_b");
                hist[since] += 1;
                since = 0;
            }
            Verdict::Enqueue => {}
            v => panic!("unexpected {v:?}"),
        }
        assert_eq!(r.policy().avg(), 10.0, "the held queue keeps avg fixed");
    }
    let drops: u64 = hist.iter().sum();
    let gaps: u64 = hist.iter().enumerate().map(|(g, c)| g as u64 * c).sum();
    let mean_gap = gaps as f64 / drops as f64;
    // sd of a uniform 1..=20 gap is 5.77; with ~28 600 gaps the mean's sd is 0.034.
    assert!((mean_gap - 10.5).abs() < 0.17, "mean gap {mean_gap}");
    let rate = r.stats().early_drops as f64 / n as f64;
    assert!((rate - 1.0 / 10.5).abs() < 0.0015, "drop rate {rate}");
    // Chi-square over the 20 gap lengths, 19 degrees of freedom: 43.8 is the 0.999 quantile.
    let expected = drops as f64 / 20.0;
    let chi2: f64 = hist[1..]
        .iter()
        .map(|&c| (c as f64 - expected).powi(2) / expected)
        .sum();
    assert!(chi2 < 43.8, "chi2 {chi2}, histogram {hist:?}");
}

#[test]
fn count_term_values() {
    assert_eq!(count_adjusted(0.05, 0), 0.05);
    assert!((count_adjusted(0.05, 10) - 0.1).abs() < 1e-15);
    assert_eq!(count_adjusted(0.05, 19), 0.05 / (1.0 - 19.0 * 0.05));
    assert_eq!(count_adjusted(0.05, 20), 1.0);
    assert_eq!(count_adjusted(0.05, 1000), 1.0);
}

#[test]
fn ecn_capable_packets_are_marked_and_others_dropped() {
    for (ecn_on, ecn, expect) in [
        (true, Ecn::Ect0, Verdict::MarkCe),
        (true, Ecn::Ect1, Verdict::MarkCe),
        (true, Ecn::Ce, Verdict::MarkCe),
        (true, Ecn::NotEct, Verdict::EarlyDrop),
        (false, Ecn::Ect0, Verdict::EarlyDrop),
    ] {
        let mut r = red(RedParams {
            ecn: ecn_on,
            ..params()
        });
        r.policy_mut().set_avg(14.0);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
        let mut seen = 0;
        for _ in 0..2000 {
            let v = r.admit(&Arrival::new(Nanos::ZERO, &queue(14), &pkt(ecn)), &mut rng);
            if v != Verdict::Enqueue {
                assert_eq!(v, expect, "ecn option {ecn_on}, field {ecn:?}");
                seen += 1;
            }
        }
        assert!(seen > 100, "only {seen} early decisions");
        let s = r.stats();
        assert_eq!(s.arrivals(), 2000);
        assert_eq!(s.marked + s.early_drops, seen);
    }
    let mut cc = pkt(Ecn::NotEct);
    cc.has_cc_ext = true;
    assert!(cc.is_markable());
}

#[test]
fn forced_and_tail_drops_always_drop_even_ecn_packets() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
    let mut r = red(params());
    r.policy_mut().set_avg(20.0);
    for _ in 0..100 {
        assert_eq!(
            r.admit(
                &Arrival::new(Nanos::ZERO, &queue(20), &pkt(Ecn::Ect0)),
                &mut rng
            ),
            Verdict::ForcedDrop
        );
    }
    let mut r = red(params());
    let mut full = queue(0);
    full.capacity_packets = 0;
    assert_eq!(r.policy().avg(), 0.0);
    for _ in 0..100 {
        assert_eq!(
            r.admit(&Arrival::new(Nanos::ZERO, &full, &pkt(Ecn::Ect0)), &mut rng),
            Verdict::TailDrop
        );
    }
    let mut bytes_full = queue(3);
    bytes_full.capacity_bytes = 1900; // 1500 queued + 500 does not fit
    assert_eq!(
        r.admit(
            &Arrival::new(Nanos::ZERO, &bytes_full, &pkt(Ecn::Ect0)),
            &mut rng
        ),
        Verdict::TailDrop
    );
    assert_eq!(r.stats().tail_drops, 101);
    assert_eq!(r.stats().arrivals(), 101);
}

#[test]
fn gentle_mode_ramps_from_max_p_to_one_between_max_th_and_twice_max_th() {
    let gentle = red(RedParams {
        gentle: true,
        ..params()
    });
    let c = gentle.policy().config();
    assert_eq!(c.region(15.0), RedRegion::Early(0.1));
    match c.region(20.0) {
        RedRegion::Early(p) => assert!((p - (0.1 + 0.9 * 5.0 / 15.0)).abs() < 1e-12),
        r => panic!("{r:?}"),
    }
    match c.region(29.999) {
        RedRegion::Early(p) => assert!(p < 1.0 && p > 0.99),
        r => panic!("{r:?}"),
    }
    assert_eq!(c.region(30.0), RedRegion::Forced);
    assert_eq!(
        red(params()).policy().config().region(15.0),
        RedRegion::Forced
    );

    // Observed: at avg 25, p_b = 0.7; with the count term the second packet after a drop is
    // always dropped (p_a = 0.7/0.3 > 1): mean gap 0.7*1 + 0.3*2 = 1.3.
    let mut r = red(RedParams {
        gentle: true,
        ..params()
    });
    r.policy_mut().set_avg(25.0);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(4);
    let n = 100_000;
    for _ in 0..n {
        let v = r.admit(
            &Arrival::new(Nanos::ZERO, &queue(25), &pkt(Ecn::NotEct)),
            &mut rng,
        );
        assert_ne!(v, Verdict::ForcedDrop);
    }
    let rate = r.stats().early_drops as f64 / n as f64;
    assert!((rate - 1.0 / 1.3).abs() < 0.01, "rate {rate}");
}

#[test]
fn idle_period_decays_the_average_by_one_minus_w_q_to_the_m() {
    let mut r = red(params());
    let s = r.policy().config().idle_packet_time();
    assert!((s - 400_000.0).abs() < 1e-6, "s = {s} ns");
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
    for m in [1.0f64, 10.0, 250.0, 1234.5] {
        r.policy_mut().set_avg(12.0);
        let t0 = Nanos::from_secs(1);
        let now = t0 + Nanos((m * s).round() as u64);
        let mut q = queue(0);
        q.idle_since = Some(t0);
        r.admit(&Arrival::new(now, &q, &pkt(Ecn::NotEct)), &mut rng);
        // decay over m packet times, then the arrival's own update with q = 0.
        let expect = 12.0 * (1.0 - 0.002f64).powf(m) * (1.0 - 0.002);
        assert!(
            (r.policy().avg() - expect).abs() < 1e-9 * expect,
            "m = {m}: avg {} expected {expect}",
            r.policy().avg()
        );
    }
    // No idle_since: only the EWMA step.
    r.policy_mut().set_avg(12.0);
    r.admit(
        &Arrival::new(Nanos::from_secs(9), &queue(0), &pkt(Ecn::NotEct)),
        &mut rng,
    );
    assert!((r.policy().avg() - 12.0 * 0.998).abs() < 1e-12);
}

#[test]
fn average_converges_to_a_held_queue_as_the_ewma_predicts() {
    let mut r = red(RedParams {
        unit: QueueUnit::Bytes,
        min_th: 5000.0,
        max_th: 15000.0,
        ..params()
    });
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(6);
    let q = queue(4); // 2000 bytes, below min_th
    for _ in 0..1000 {
        assert_eq!(
            r.admit(&Arrival::new(Nanos::ZERO, &q, &pkt(Ecn::NotEct)), &mut rng),
            Verdict::Enqueue
        );
    }
    let expect = 2000.0 * (1.0 - 0.998f64.powi(1000));
    assert!(
        (r.policy().avg() - expect).abs() < 1e-6,
        "{} vs {expect}",
        r.policy().avg()
    );
}

/// ns-2's RED options: `count_term = "wait"` spaces marks uniformly on `1/p_b..2/p_b`
/// arrivals, and `spare_queue_packets` admits arrivals to a short queue whatever `avg` says.
#[test]
fn ns2_wait_and_spared_short_queue() {
    let cfg = RedParams {
        count_term: zl_aqm::CountTerm::Wait,
        spare_queue_packets: Some(1),
        ..RedParams::default()
    }
    .validate(LINK)
    .unwrap();
    let mut aqm = Admission::new(Red::new(cfg));
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
    // avg 10 of 5..15: p_b = 0.01, so marks come every 100..=200 arrivals.
    let (mut gap, mut gaps) = (0u32, Vec::new());
    for _ in 0..200_000 {
        aqm.policy_mut().set_avg(10.0);
        let v = aqm.admit(
            &Arrival::new(Nanos::ZERO, &queue(10), &pkt(Ecn::Ect0)),
            &mut rng,
        );
        gap += 1;
        if v == Verdict::MarkCe {
            gaps.push(gap);
            gap = 0;
        }
    }
    let (lo, hi) = (*gaps.iter().min().unwrap(), *gaps.iter().max().unwrap());
    assert!(lo >= 100 && hi <= 201, "gaps {lo}..{hi}");
    // Far above max_th, a queue of one packet is spared; two packets are not.
    for (len, want) in [(1, Verdict::Enqueue), (2, Verdict::ForcedDrop)] {
        aqm.policy_mut().set_avg(100.0);
        let v = aqm.admit(
            &Arrival::new(Nanos::ZERO, &queue(len), &pkt(Ecn::NotEct)),
            &mut rng,
        );
        assert_eq!(v, want, "queue {len}");
    }
}
