//! Exponential nonlinear RED (eq. 1-2) and its 1-D discrete model (eq. 3-5),
//! docs/algorithms/nonlinear-red.md.

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use zl_aqm::nonlinear_model::NonlinearRedModel;
use zl_aqm::nonlinear_red::exponential_probability;
use zl_aqm::{
    Admission, Arrival, Nanos, NonlinearRed, NonlinearRedParams, PacketMeta, QueueView, RedParams,
    RedRegion, Verdict,
};

fn queue(len: u32) -> QueueView {
    QueueView {
        len_packets: len,
        len_bytes: len as u64 * 1040,
        capacity_packets: 10_000,
        capacity_bytes: u64::MAX,
        head_enqueued_at: None,
        idle_since: None,
    }
}

#[test]
fn gamma_zero_is_linear_red_without_the_count_term() {
    let nl = NonlinearRedParams {
        gamma: 0.0,
        ..NonlinearRedParams::default()
    }
    .validate(100_000_000)
    .unwrap();
    let red = RedParams {
        min_th: 30.0,
        max_th: 90.0,
        max_p: 0.02,
        ..RedParams::default()
    }
    .validate(100_000_000)
    .unwrap();
    for i in 0..=600 {
        let avg = 30.0 + i as f64 * 0.1;
        let p = nl.probability(avg);
        match red.region(avg) {
            RedRegion::Early(p_b) => assert!((p - p_b).abs() < 1e-15, "avg {avg}"),
            RedRegion::Forced => assert_eq!(p, 1.0),
            RedRegion::Below => assert_eq!(p, 0.0),
        }
    }
    // Observed: no count term, so at a held avg of 60 the drop rate is p = 0.01 itself
    // (RED's count term would give 1/50.5 = 0.0198).
    let mut aqm = Admission::new(NonlinearRed::new(nl));
    aqm.policy_mut().set_avg(60.0);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(11);
    let n = 400_000;
    for _ in 0..n {
        let v = aqm.admit(
            &Arrival::new(Nanos::ZERO, &queue(60), &PacketMeta::default()),
            &mut rng,
        );
        assert!(matches!(v, Verdict::Enqueue | Verdict::EarlyDrop));
    }
    let rate = aqm.stats().early_drops as f64 / n as f64;
    // sd of the rate: sqrt(0.01 * 0.99 / 4e5) = 1.6e-4.
    assert!((rate - 0.01).abs() < 8e-4, "rate {rate}");
}

#[test]
fn probability_reaches_p_max_at_x_one_and_falls_with_gamma_inside() {
    for gamma in [0.0, 1.0, 5.0, 300.0] {
        let p = exponential_probability(90.0 - 1e-9, 30.0, 90.0, 0.02, gamma);
        assert!((p - 0.02).abs() < 1e-8, "gamma {gamma}: p {p}");
        assert_eq!(exponential_probability(30.0, 30.0, 90.0, 0.02, gamma), 0.0);
        assert_eq!(exponential_probability(90.0, 30.0, 90.0, 0.02, gamma), 1.0);
        let mut prev = 0.0;
        for i in 1..600 {
            let p = exponential_probability(30.0 + i as f64 * 0.1, 30.0, 90.0, 0.02, gamma);
            assert!(p > prev, "increasing in avg");
            prev = p;
        }
    }
    // Larger gamma keeps p lower inside the range: at x = 0.5, p = 0.01 * exp(-gamma / 2).
    let at_half = |g| exponential_probability(60.0, 30.0, 90.0, 0.02, g);
    assert!((at_half(5.0) - 0.01 * (-2.5f64).exp()).abs() < 1e-15);
    assert!(at_half(0.0) > at_half(5.0) && at_half(5.0) > at_half(300.0));
}

#[test]
fn forced_drop_above_q_max() {
    let mut aqm = Admission::new(NonlinearRed::new(
        NonlinearRedParams::default().validate(100_000_000).unwrap(),
    ));
    aqm.policy_mut().set_avg(95.0);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(12);
    let v = aqm.admit(
        &Arrival::new(Nanos::ZERO, &queue(95), &PacketMeta::default()),
        &mut rng,
    );
    assert_eq!(v, Verdict::ForcedDrop);
}

const GAMMAS: [f64; 7] = [0.0, 1.0, 5.0, 20.0, 50.0, 100.0, 300.0];

#[test]
fn fixed_point_rises_with_gamma_for_n_3_and_10() {
    for n in [3.0, 10.0] {
        let mut prev = 0.0;
        for gamma in GAMMAS {
            let m = NonlinearRedModel::paper(n, gamma);
            let q = m.fixed_point().expect("a fixed point in (q_min, q_max)");
            assert!(q > 30.0 && q < 90.0);
            assert!((q - m.target(q)).abs() < 1e-6, "q = g(q) at the root");
            assert!(q > prev, "N {n}: q*({gamma}) = {q} not above {prev}");
            prev = q;
        }
    }
    // More connections, higher queue (the paper's results, docs/algorithms/nonlinear-red.md).
    let q3 = NonlinearRedModel::paper(3.0, 5.0).fixed_point().unwrap();
    let q10 = NonlinearRedModel::paper(10.0, 5.0).fixed_point().unwrap();
    assert!(q10 > q3);
}

#[test]
fn iterating_the_map_converges_to_the_fixed_point() {
    for (n, gamma) in [(3.0, 0.0), (3.0, 5.0), (10.0, 5.0)] {
        let m = NonlinearRedModel::paper(n, gamma);
        let q_star = m.fixed_point().unwrap();
        // w_q = 8.31e-5: a time constant of ~12 000 steps; 400 000 steps is ~33 of them.
        let q = m.iterate(31.0, 400_000);
        assert!(
            (q - q_star).abs() < 1e-3 * q_star,
            "N {n} gamma {gamma}: {q} vs {q_star}"
        );
    }
}

#[test]
fn eq_5_matches_the_finite_difference_of_the_fixed_point() {
    for n in [3.0, 10.0] {
        for gamma in [0.5, 1.0, 5.0, 20.0, 100.0, 300.0] {
            let q_star = NonlinearRedModel::paper(n, gamma).fixed_point().unwrap();
            let h = 1e-4 * gamma;
            let up = NonlinearRedModel::paper(n, gamma + h)
                .fixed_point()
                .unwrap();
            let down = NonlinearRedModel::paper(n, gamma - h)
                .fixed_point()
                .unwrap();
            let fd = (up - down) / (2.0 * h);
            let eq5 = NonlinearRedModel::paper(n, gamma).dq_dgamma(q_star);
            assert!(eq5 > 0.0);
            assert!(
                (eq5 - fd).abs() < 1e-4 * eq5.abs(),
                "N {n} gamma {gamma}: eq5 {eq5}, finite difference {fd}"
            );
        }
    }
}

/// ns-2's `wait_` count term (red.cc `modify_p`): no drop while `count * p < 1`, then
/// `p / (2 - count * p)`, then 1, with `count` including the arriving packet.
#[test]
fn wait_count_term_matches_ns2_modify_p() {
    use zl_aqm::CountTerm;
    let p = 0.1;
    // count = unmarked arrivals before this one; ns-2's count is one more.
    assert_eq!(CountTerm::Wait.apply(p, 8), 0.0); // 9 * 0.1 < 1
    assert!((CountTerm::Wait.apply(p, 9) - 0.1).abs() < 1e-12); // 1.0: 0.1 / (2 - 1)
    assert!((CountTerm::Wait.apply(p, 14) - 0.2).abs() < 1e-12); // 1.5: 0.1 / 0.5
    assert_eq!(CountTerm::Wait.apply(p, 19), 1.0); // 2.0
    assert_eq!(CountTerm::None.apply(p, 19), p);
    assert!((CountTerm::Uniform.apply(p, 5) - 0.2).abs() < 1e-12); // 0.1 / (1 - 0.5)

    // Observed: at a held avg of 60 (p = 0.01) the gaps between drops are uniform on
    // 100..=200 arrivals, mean ~150, so the drop rate is ~1/150.
    let nl = NonlinearRedParams {
        gamma: 0.0,
        count_term: CountTerm::Wait,
        ..NonlinearRedParams::default()
    }
    .validate(100_000_000)
    .unwrap();
    let mut aqm = Admission::new(NonlinearRed::new(nl));
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
    let (mut gap, mut gaps) = (0u32, Vec::new());
    for _ in 0..300_000 {
        aqm.policy_mut().set_avg(60.0);
        let v = aqm.admit(
            &Arrival::new(Nanos::ZERO, &queue(60), &PacketMeta::default()),
            &mut rng,
        );
        gap += 1;
        if v == Verdict::EarlyDrop {
            gaps.push(gap);
            gap = 0;
        }
    }
    let (lo, hi) = (gaps.iter().min().unwrap(), gaps.iter().max().unwrap());
    assert!(*lo >= 100 && *hi <= 201, "gaps {lo}..{hi}");
    let mean = gaps.iter().sum::<u32>() as f64 / gaps.len() as f64;
    assert!((mean - 150.0).abs() < 3.0, "mean gap {mean}");
}

/// ns-2 decides only when `qlen > 1` (bytes in byte mode): with `spare_queue_packets`, an
/// arrival to a queue that short is admitted even with `avg` above `q_max`.
#[test]
fn spared_short_queue_is_admitted_above_q_max() {
    let nl = NonlinearRedParams {
        spare_queue_packets: Some(1),
        ..NonlinearRedParams::default()
    }
    .validate(100_000_000)
    .unwrap();
    let mut aqm = Admission::new(NonlinearRed::new(nl));
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    for (len, want) in [
        (0, Verdict::Enqueue),
        (1, Verdict::Enqueue),
        (2, Verdict::ForcedDrop),
    ] {
        aqm.policy_mut().set_avg(200.0);
        let v = aqm.admit(
            &Arrival::new(Nanos::ZERO, &queue(len), &PacketMeta::default()),
            &mut rng,
        );
        assert_eq!(v, want, "queue {len}");
    }
    // Without the option (the paper's equations) the empty queue's arrival is dropped too.
    let mut plain = Admission::new(NonlinearRed::new(
        NonlinearRedParams::default().validate(100_000_000).unwrap(),
    ));
    plain.policy_mut().set_avg(200.0);
    let v = plain.admit(
        &Arrival::new(Nanos::ZERO, &queue(0), &PacketMeta::default()),
        &mut rng,
    );
    assert_eq!(v, Verdict::ForcedDrop);
}

/// ns-2's idle decay: an empty queue for `t` counts `m = int(t * C / (8 * mean_pktsize))`
/// arrivals of an empty queue before this one's update.
#[test]
fn idle_decay_counts_whole_packet_times_as_ns2() {
    let nl = NonlinearRedParams {
        idle_packet_bytes: Some(1040),
        ..NonlinearRedParams::default()
    }
    .validate(100_000_000)
    .unwrap();
    let w = nl.w_q;
    let s_ns = 1040.0 * 8.0 * 1e9 / 1e8; // 83 200 ns per packet
    let mut aqm = Admission::new(NonlinearRed::new(nl));
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let idle = QueueView {
        idle_since: Some(Nanos::ZERO),
        ..queue(0)
    };
    // 1000.5 packet times idle: m = 1000, then one update with q = 0.
    let now = Nanos((1000.5 * s_ns) as u64);
    aqm.policy_mut().set_avg(100.0);
    aqm.admit(&Arrival::new(now, &idle, &PacketMeta::default()), &mut rng);
    let want = 100.0 * (1.0 - w).powi(1001);
    assert!(
        (aqm.policy().avg() - want).abs() < 1e-9,
        "{} vs {want}",
        aqm.policy().avg()
    );
    // Without the option the same arrival is one plain EWMA step.
    let mut plain = Admission::new(NonlinearRed::new(
        NonlinearRedParams::default().validate(100_000_000).unwrap(),
    ));
    plain.policy_mut().set_avg(100.0);
    plain.admit(&Arrival::new(now, &idle, &PacketMeta::default()), &mut rng);
    assert!((plain.policy().avg() - 100.0 * (1.0 - w)).abs() < 1e-9);
}
