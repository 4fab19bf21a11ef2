//! SRED (docs/algorithms/sred.md) and ZL-RED (docs/algorithms/zl-red.md): the equations' steps and
//! factors, the paper's worked occurrence example, F = 0, and the fairness claim at a held queue.

use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use zl_aqm::sred::{sred_p1, sred_terms};
use zl_aqm::zlred::zlred_probability;
use zl_aqm::{
    Admission, AqmParams, AqmPolicy, Arrival, BuildContext, FlowId, Nanos, PacketMeta, QueueView,
    Sred, SredParams, Verdict, ZlRed, ZlRedInputs, ZlRedParams,
};
use zl_zombie::{Zombie, ZombieList, ZombieParams};

const B: u32 = 1000;

fn queue(len: u32) -> QueueView {
    QueueView {
        len_packets: len,
        len_bytes: len as u64 * 576,
        capacity_packets: B,
        capacity_bytes: u64::MAX,
        head_enqueued_at: None,
        idle_since: None,
    }
}

fn pkt(flow: u64) -> PacketMeta {
    PacketMeta {
        len: 576,
        flow: FlowId(flow),
        ..PacketMeta::default()
    }
}

/// Samples one of `normal` flows of weight 1 and one heavy flow (id 0) of weight `heavy`.
fn pick<R: Rng>(rng: &mut R, normal: u64, heavy: u64) -> u64 {
    let x = rng.random_range(0..normal + heavy);
    if x < heavy {
        0
    } else {
        1 + (x - heavy)
    }
}

#[test]
fn sred_eq_1_steps_at_b_sixth_and_b_third() {
    let p_max = 0.15;
    // B = 600: B/6 = 100, B/3 = 200.
    assert_eq!(sred_p1(0, 600, p_max), 0.0);
    assert_eq!(sred_p1(99, 600, p_max), 0.0);
    assert_eq!(sred_p1(100, 600, p_max), p_max / 4.0);
    assert_eq!(sred_p1(199, 600, p_max), p_max / 4.0);
    assert_eq!(sred_p1(200, 600, p_max), p_max);
    assert_eq!(sred_p1(600, 600, p_max), p_max);
    // B = 1000: B/6 = 166.7, B/3 = 333.3.
    assert_eq!(sred_p1(166, 1000, p_max), 0.0);
    assert_eq!(sred_p1(167, 1000, p_max), p_max / 4.0);
    assert_eq!(sred_p1(333, 1000, p_max), p_max / 4.0);
    assert_eq!(sred_p1(334, 1000, p_max), p_max);
}

#[test]
fn sred_eq_2_and_3_factors() {
    // 256 P = 2.56: p2 = p1 / 2.56^2.
    let t = sred_terms(0.15, false, 0.01);
    assert!((t.p2 - 0.15 / (2.56 * 2.56)).abs() < 1e-15);
    assert_eq!(t.p3, t.p2);
    let t = sred_terms(0.15, true, 0.01);
    assert!((t.p3 - t.p2 * 101.0).abs() < 1e-12);
    // 256 P < 1: the factor of (2) is capped at 1.
    let t = sred_terms(0.15, true, 0.002);
    assert_eq!(t.p2, 0.15);
    assert!((t.p3 - 0.15 * 501.0).abs() < 1e-9);
    // P = 0: factor 1, no hit term.
    let t = sred_terms(0.15, true, 0.0);
    assert_eq!((t.p2, t.p3), (0.15, 0.15));
}

/// The ZL-RED paper's figure 3 (docs/algorithms/zl-red.md): counts 21, 26, 6, 3, 20, 10, 3, 2; flow
/// 1 holds 26, 20, 2.
#[test]
fn paper_worked_example_f_51_t_99() {
    let counts = [
        (21, 2),
        (26, 1),
        (6, 3),
        (3, 4),
        (20, 1),
        (10, 5),
        (3, 6),
        (2, 1),
    ];
    let zombies: Vec<Zombie> = counts
        .iter()
        .map(|&(count, flow)| Zombie {
            flow: FlowId(flow),
            count,
            stamp: Nanos::ZERO,
        })
        .collect();
    let cfg = ZombieParams {
        m: 8,
        ..ZombieParams::default()
    }
    .validate()
    .unwrap();
    let list = ZombieList::from_zombies(cfg, &zombies).unwrap();
    assert_eq!(list.occurrence(FlowId(1)), 51);
    assert_eq!(list.total_occurrence(), 99);

    // With P(t) = 1/4 (four flows' worth), T P = 24.75 < F: flow 1 is misbehaving.
    let base = ZlRedInputs {
        q: 400.0,
        th_min: 5.0,
        b_third: 1000.0 / 3.0,
        p_max: 0.15,
        a: 1.0,
        hit: false,
        p_hit: 0.25,
        occurrence: 51,
        total: 99,
        p_avg: 0.0,
    };
    let t = zlred_probability(&base);
    assert_eq!(t.p1, 0.15);
    let p2 = 0.15 / (64.0 * 64.0);
    assert!((t.p2 - p2).abs() < 1e-15);
    assert_eq!(t.p3, t.p2);
    assert!(t.misbehaving);
    assert!((t.p4 - p2 * 51.0 / 24.75).abs() < 1e-15);
    assert_eq!(t.p5, t.p4, "P_avg = 0: p5 = p4");
    let t3 = zlred_probability(&ZlRedInputs { a: 3.0, ..base });
    assert!(
        (t3.p4 - 3.0 * t.p4).abs() < 1e-15,
        "a multiplies p4 of a misbehaving flow"
    );
    // Flow 3 (F = 7) is not misbehaving: a has no effect.
    let f3 = ZlRedInputs {
        occurrence: 7,
        a: 3.0,
        ..base
    };
    let t = zlred_probability(&f3);
    assert!(!t.misbehaving);
    assert!((t.p4 - p2 * 7.0 / 24.75).abs() < 1e-15);
    // Eq. (6) with a running P_avg.
    let t = zlred_probability(&ZlRedInputs { p_avg: 0.01, ..f3 });
    assert!((t.p5 - t.p4 * t.p3 / 0.01).abs() < 1e-15);
}

#[test]
fn zlred_start_threshold_eq_7_and_degenerate_inputs() {
    let base = ZlRedInputs {
        q: 0.0,
        th_min: 5.0,
        b_third: 1000.0 / 3.0,
        p_max: 0.15,
        a: 1.0,
        hit: false,
        p_hit: 0.0,
        occurrence: 1,
        total: 1000,
        p_avg: 0.0,
    };
    let p1 = |q: f64| zlred_probability(&ZlRedInputs { q, ..base }).p1;
    assert_eq!(p1(4.0), 0.0);
    assert_eq!(p1(5.0), 0.0375);
    assert_eq!(p1(333.0), 0.0375);
    assert_eq!(p1(334.0), 0.15);
    // P = 0: no flow information, p4 = p3.
    let t = zlred_probability(&ZlRedInputs { q: 400.0, ..base });
    assert_eq!((t.p3, t.p4, t.p5), (0.15, 0.15, 0.15));
    assert!(!t.misbehaving);
    // F = 0: p4 = 0 whatever else says.
    let t = zlred_probability(&ZlRedInputs {
        q: 400.0,
        occurrence: 0,
        p_hit: 0.01,
        hit: true,
        p_avg: 0.05,
        ..base
    });
    assert!(t.p3 > 1.0);
    assert_eq!((t.p4, t.p5), (0.0, 0.0));
}

/// A flow that never enters a full list (p_swap = 0) has F = 0, so p4 = 0: never dropped early.
#[test]
fn a_flow_with_no_zombie_is_never_dropped_early() {
    let params = ZlRedParams {
        zombie: ZombieParams {
            m: 100,
            p_swap: 0.0,
            ..ZombieParams::default()
        },
        ..ZlRedParams::default()
    };
    let mut zl = Admission::new(ZlRed::new(params.validate(B).unwrap()));
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(22);
    for f in 1..=100 {
        zl.admit(&Arrival::new(Nanos::ZERO, &queue(0), &pkt(f)), &mut rng);
    }
    for i in 0..20_000u64 {
        let f = if i % 2 == 0 { 5000 } else { 1 + i % 100 };
        let v = zl.admit(&Arrival::new(Nanos(i), &queue(500), &pkt(f)), &mut rng);
        if f == 5000 {
            assert_eq!(v, Verdict::Enqueue);
            assert_eq!(zl.policy().last_decision().p4, 0.0);
            assert!(zl.policy().last_decision().p3 > 0.0);
        }
    }
    assert!(zl.stats().early_drops > 0, "the listed flows are dropped");
}

/// Drops follow the computed probability: the count equals the sum of min(1, p) over the
/// decisions within 5 standard deviations (SRED: p3, ZL-RED: p5).
#[test]
fn observed_drops_follow_the_computed_probability() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(23);
    let mut sred = Admission::new(Sred::new(SredParams::default().validate(B).unwrap()));
    let mut zl = Admission::new(ZlRed::new(ZlRedParams::default().validate(B).unwrap()));
    let (mut exp_s, mut var_s, mut exp_z, mut var_z) = (0.0, 0.0, 0.0, 0.0);
    let q = queue(250);
    for i in 0..300_000u64 {
        let f = pick(&mut rng, 400, 10);
        sred.admit(&Arrival::new(Nanos(i), &q, &pkt(f)), &mut rng);
        let p = sred.policy().last_decision().p3.min(1.0);
        exp_s += p;
        var_s += p * (1.0 - p);
        zl.admit(&Arrival::new(Nanos(i), &q, &pkt(f)), &mut rng);
        let p = zl.policy().last_decision().p5.min(1.0);
        exp_z += p;
        var_z += p * (1.0 - p);
    }
    let got_s = sred.stats().early_drops as f64;
    let got_z = zl.stats().early_drops as f64;
    assert!(
        (got_s - exp_s).abs() < 5.0 * var_s.sqrt(),
        "SRED {got_s} vs {exp_s}"
    );
    assert!(
        (got_z - exp_z).abs() < 5.0 * var_z.sqrt(),
        "ZL-RED {got_z} vs {exp_z}"
    );
    // Below B/6 SRED never drops; ZL-RED starts at th_min = 5.
    let mut sred = Admission::new(Sred::new(SredParams::default().validate(B).unwrap()));
    let mut zl = Admission::new(ZlRed::new(ZlRedParams::default().validate(B).unwrap()));
    for i in 0..50_000u64 {
        let f = pick(&mut rng, 400, 10);
        assert_eq!(
            sred.admit(&Arrival::new(Nanos(i), &queue(150), &pkt(f)), &mut rng),
            Verdict::Enqueue
        );
        zl.admit(&Arrival::new(Nanos(i), &queue(150), &pkt(f)), &mut rng);
        assert_eq!(
            zl.admit(&Arrival::new(Nanos(i), &queue(4), &pkt(f)), &mut rng),
            Verdict::Enqueue
        );
    }
    assert!(zl.stats().early_drops > 0);
}

/// The ZL-RED claim (docs/algorithms/zl-red.md): at a held queue, a flow sending 10x the others'
/// rate is dropped at a higher rate than each of them, while the total drop rate stays within 10 %
/// of SRED's. 300 flows of weight 1 plus one of weight 10, both probabilistic regions.
#[test]
fn heavy_flow_is_punished_and_the_total_matches_sred() {
    let normal = 300u64;
    for q in [200u32, 400] {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(24 + q as u64);
        let mut sred = Admission::new(Sred::new(SredParams::default().validate(B).unwrap()));
        let mut zl = Admission::new(ZlRed::new(ZlRedParams::default().validate(B).unwrap()));
        let flows = normal as usize + 1;
        let (mut sent, mut lost_s, mut lost_z) =
            (vec![0u64; flows], vec![0u64; flows], vec![0u64; flows]);
        let n = 1_000_000u64;
        let warm = 100_000; // 100 / alpha: P(t) and P_avg have settled.
        let qv = queue(q);
        for i in 0..n {
            let f = pick(&mut rng, normal, 10);
            let a = sred.admit(&Arrival::new(Nanos(i), &qv, &pkt(f)), &mut rng);
            let b = zl.admit(&Arrival::new(Nanos(i), &qv, &pkt(f)), &mut rng);
            if i >= warm {
                sent[f as usize] += 1;
                lost_s[f as usize] += u64::from(!a.admits());
                lost_z[f as usize] += u64::from(!b.admits());
            }
        }
        let total = |l: &[u64]| l.iter().sum::<u64>() as f64 / sent.iter().sum::<u64>() as f64;
        let rate = |l: &[u64], f: usize| l[f] as f64 / sent[f] as f64;
        let worst_normal = (1..flows).map(|f| rate(&lost_z, f)).fold(0.0, f64::max);
        let heavy = rate(&lost_z, 0);
        assert!(
            heavy > 2.0 * worst_normal,
            "q {q}: heavy {heavy}, worst normal flow {worst_normal}"
        );
        let (ts, tz) = (total(&lost_s), total(&lost_z));
        assert!(
            (tz / ts - 1.0).abs() < 0.10,
            "q {q}: ZL-RED total {tz}, SRED {ts}"
        );
        // SRED itself barely tells the heavy flow apart (it was built to estimate N, not to
        // be fair); ZL-RED's punishment is much stronger.
        assert!(heavy / tz > 3.0 * rate(&lost_s, 0) / ts, "q {q}");
    }
}

#[test]
fn build_context_shares_one_zombie_list() {
    let cfg = ZombieParams {
        m: 64,
        alpha: Some(0.05),
        ..ZombieParams::default()
    }
    .validate()
    .unwrap();
    let list = Arc::new(ZombieList::new(cfg));
    let ctx = BuildContext::new(1_000_000_000, B).with_zombie_list(Arc::clone(&list));
    let a = AqmParams::ZlRed(ZlRedParams::default())
        .build(&ctx)
        .unwrap();
    let b = AqmParams::Sred(SredParams::default()).build(&ctx).unwrap();
    match (&a, &b) {
        (AqmPolicy::ZlRed(z), AqmPolicy::Sred(s)) => {
            assert!(Arc::ptr_eq(z.zombie_list(), &list));
            assert!(Arc::ptr_eq(s.zombie_list(), &list));
            assert_eq!(z.config().alpha, 0.05, "P_avg uses the shared list's alpha");
            assert_eq!(z.config().zombie.m(), 64);
        }
        _ => panic!("wrong variants"),
    }
    let mut a = Admission::new(a);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(25);
    for f in 0..10 {
        a.admit(&Arrival::new(Nanos::ZERO, &queue(0), &pkt(f)), &mut rng);
    }
    assert_eq!(
        list.total_occurrence(),
        10,
        "arrivals through the policy reach the shared list"
    );
    // Without a shared list each policy builds its own from its parameters.
    let own = AqmParams::ZlRed(ZlRedParams::default())
        .build(&BuildContext::new(1_000_000_000, B))
        .unwrap();
    match own {
        AqmPolicy::ZlRed(z) => assert_eq!(z.zombie_list().config().m(), 1000),
        _ => panic!("wrong variant"),
    }
}

#[test]
fn tail_drop_comes_first_and_spares_the_list() {
    let mut zl = Admission::new(ZlRed::new(ZlRedParams::default().validate(B).unwrap()));
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(26);
    let mut full = queue(B);
    full.capacity_packets = B;
    assert_eq!(
        zl.admit(&Arrival::new(Nanos::ZERO, &full, &pkt(1)), &mut rng),
        Verdict::TailDrop
    );
    assert_eq!(zl.policy().zombie_list().total_occurrence(), 0);
    let mut sred = Admission::new(Sred::new(SredParams::default().validate(B).unwrap()));
    assert_eq!(
        sred.admit(&Arrival::new(Nanos::ZERO, &full, &pkt(1)), &mut rng),
        Verdict::TailDrop
    );
    assert_eq!(sred.stats().tail_drops, 1);
}

/// The receive / transmit split: a policy fed observations of its shared list made by the
/// caller (an [`Arrival`] carrying it) decides exactly as one that observes the list itself, and
/// the list then holds each packet once.
#[test]
fn observed_upstream_decides_as_observing_itself() {
    let zp = ZombieParams::default();
    for params in [
        AqmParams::ZlRed(ZlRedParams::default()),
        AqmParams::Sred(SredParams::default()),
    ] {
        let own = Arc::new(ZombieList::new(zp.validate().unwrap()));
        let shared = Arc::new(ZombieList::new(zp.validate().unwrap()));
        let ctx = |l: &Arc<ZombieList>| {
            BuildContext::new(1_000_000_000, B).with_zombie_list(Arc::clone(l))
        };
        let mut a = Admission::new(params.build(&ctx(&own)).unwrap());
        let mut b = Admission::new(params.build(&ctx(&shared)).unwrap());
        let mut rng_a = Xoshiro256PlusPlus::seed_from_u64(7);
        let mut rng_b = Xoshiro256PlusPlus::seed_from_u64(7);
        let mut traffic = Xoshiro256PlusPlus::seed_from_u64(8);
        let mut early = 0;
        for i in 0..50_000u64 {
            let now = Nanos(i * 1000);
            let p = pkt(pick(&mut traffic, 200, 20));
            let q = queue(300 + (i % 500) as u32);
            let va = a.admit(&Arrival::new(now, &q, &p), &mut rng_a);
            let obs = shared.observe(p.flow, now, &mut rng_b);
            let vb = b.admit(&Arrival::new(now, &q, &p).observed(&obs), &mut rng_b);
            assert_eq!(va, vb, "arrival {i}");
            early += (va == Verdict::EarlyDrop) as u32;
        }
        assert!(early > 1000, "the run must exercise early drops: {early}");
        assert_eq!(a.stats(), b.stats());
        assert_eq!(own.total_occurrence(), shared.total_occurrence());
    }
}
