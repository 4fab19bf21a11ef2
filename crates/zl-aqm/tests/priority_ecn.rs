//! Priority-weighted ECN RED (docs/algorithms/priority-ecn-red.md, eq. 3): the paper's Table 1
//! ratios exactly, priority 15 never marked early, `w = 0` identical to RED, marking by design.

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use zl_aqm::priority_ecn::priority_factor;
use zl_aqm::{
    Admission, Arrival, Ecn, Nanos, PacketMeta, PriorityEcnRed, PriorityEcnRedParams, QueueView,
    Red, RedParams, Verdict,
};

const LINK: u64 = 1_000_000;

/// Table 1 of the paper: `p_new / p_a` for w = 0..4 and priorities 9, 11, 13 (b = 11).
#[test]
fn table_1_ratios_exactly() {
    let table: [(u8, [f64; 3]); 5] = [
        (0, [1.0, 1.0, 1.0]),
        (1, [1.5, 1.0, 0.5]),
        (2, [2.25, 1.0, 0.25]),
        (3, [3.375, 1.0, 0.125]),
        (4, [5.0625, 1.0, 0.0625]),
    ];
    for (w, row) in table {
        for (pri, want) in [9u8, 11, 13].into_iter().zip(row) {
            assert_eq!(priority_factor(pri, 11, w), want, "w {w} pri {pri}");
        }
    }
    for w in 1..=255u8 {
        assert_eq!(priority_factor(15, 11, w), 0.0);
    }
    assert_eq!(
        priority_factor(200, 11, 3),
        0.0,
        "priority above 15 reads as 15"
    );
    assert_eq!(priority_factor(8, 11, 1), 7.0 / 4.0);
}

fn queue_bytes(bytes: u64) -> QueueView {
    QueueView {
        len_packets: (bytes / 512) as u32,
        len_bytes: bytes,
        capacity_packets: 10_000,
        capacity_bytes: u64::MAX,
        head_enqueued_at: None,
        idle_since: None,
    }
}

fn pkt(pri: u8, w: u8, ecn: Ecn, cc: bool) -> PacketMeta {
    PacketMeta {
        len: 512,
        ecn,
        has_cc_ext: cc,
        priority: pri,
        weight: w,
        ..PacketMeta::default()
    }
}

fn policy() -> Admission<PriorityEcnRed> {
    Admission::new(PriorityEcnRed::new(
        PriorityEcnRedParams::default().validate(LINK).unwrap(),
    ))
}

#[test]
fn defaults_are_the_papers_section_4() {
    let p = PriorityEcnRedParams::default();
    assert_eq!(p.min_th, 6144.0);
    assert_eq!(p.max_th, 3.0 * 6144.0);
    assert_eq!(p.max_p, 0.02);
    assert_eq!(p.b, 11);
    assert!(p.ecn);
}

#[test]
fn priority_15_is_never_marked_early_but_is_forced_dropped() {
    let mut r = policy();
    let held = 17_000.0; // near max_th = 18432 bytes: p_b = 0.018
    r.policy_mut().red_mut().set_avg(held);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
    for _ in 0..50_000 {
        let v = r.admit(
            &Arrival::new(
                Nanos::ZERO,
                &queue_bytes(held as u64),
                &pkt(15, 4, Ecn::NotEct, true),
            ),
            &mut rng,
        );
        assert_eq!(v, Verdict::Enqueue);
    }
    r.policy_mut().red_mut().set_avg(20_000.0);
    let v = r.admit(
        &Arrival::new(
            Nanos::ZERO,
            &queue_bytes(20_000),
            &pkt(15, 4, Ecn::NotEct, true),
        ),
        &mut rng,
    );
    assert_eq!(v, Verdict::ForcedDrop);
}

#[test]
fn weight_zero_is_plain_red_decision_for_decision() {
    let mut pri = policy();
    let p = PriorityEcnRedParams::default();
    let mut red = Admission::new(Red::new(
        RedParams {
            min_th: p.min_th,
            max_th: p.max_th,
            max_p: p.max_p,
            w_q: p.w_q,
            unit: p.unit,
            idle_packet_bytes: p.idle_packet_bytes,
            ..RedParams::default()
        }
        .validate(LINK)
        .unwrap(),
    ));
    let mut rng_a = Xoshiro256PlusPlus::seed_from_u64(8);
    let mut rng_b = Xoshiro256PlusPlus::seed_from_u64(8);
    let mut early = 0;
    for i in 0..40_000u64 {
        let q = queue_bytes(6000 + (i * 7919) % 16_000);
        let pk = pkt(9 + (i % 5) as u8, 0, Ecn::Ect0, false);
        let a = pri.admit(&Arrival::new(Nanos(i), &q, &pk), &mut rng_a);
        let b = red.admit(&Arrival::new(Nanos(i), &q, &pk), &mut rng_b);
        assert_eq!(a, b, "arrival {i}");
        early += u32::from(a == Verdict::MarkCe);
    }
    assert!(
        early > 100,
        "the comparison must cover early decisions: {early}"
    );
}

/// With the count term, a stream of one priority sees marks at rate 1/E[gap]; the factor
/// scales p_a, so priority 9 (x1.5 at w = 1) is marked more often than 11, 11 more than 13.
/// Compared against the exact mean gap for p_a' = min(1, f * p_b / (1 - c p_b)).
#[test]
fn mark_rates_follow_the_priority_factor() {
    let held = 12_288.0; // midpoint: p_b = 0.01
    let p_b = 0.01f64;
    for (pri, w) in [(9u8, 1u8), (11, 1), (13, 1), (9, 4), (13, 4)] {
        let f = priority_factor(pri, 11, w);
        // P(gap > n) = prod_{c=0}^{n-1} (1 - p(c)); E[gap] = sum_{n>=0} P(gap > n).
        let mut survive = 1.0;
        let mut mean_gap = 0.0;
        for c in 0..100_000u32 {
            mean_gap += survive;
            let cp = c as f64 * p_b;
            let p = if cp >= 1.0 {
                1.0
            } else {
                (f * p_b / (1.0 - cp)).min(1.0)
            };
            survive *= 1.0 - p;
            if survive == 0.0 {
                break;
            }
        }
        let mut r = policy();
        r.policy_mut().red_mut().set_avg(held);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(9 + pri as u64);
        let n = 200_000;
        for _ in 0..n {
            let v = r.admit(
                &Arrival::new(
                    Nanos::ZERO,
                    &queue_bytes(held as u64),
                    &pkt(pri, w, Ecn::NotEct, true),
                ),
                &mut rng,
            );
            assert_ne!(
                v,
                Verdict::EarlyDrop,
                "the extension header makes it markable"
            );
        }
        let rate = r.stats().marked as f64 / n as f64;
        let want = 1.0 / mean_gap;
        assert!(
            (rate - want).abs() < 0.05 * want,
            "pri {pri} w {w}: rate {rate}, theory {want}"
        );
    }
}

#[test]
fn unmarkable_packets_are_dropped_instead() {
    let mut r = policy();
    r.policy_mut().red_mut().set_avg(18_000.0);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(10);
    let mut drops = 0;
    for _ in 0..10_000 {
        match r.admit(
            &Arrival::new(
                Nanos::ZERO,
                &queue_bytes(18_000),
                &pkt(9, 1, Ecn::NotEct, false),
            ),
            &mut rng,
        ) {
            Verdict::EarlyDrop => drops += 1,
            Verdict::Enqueue => {}
            v => panic!("{v:?}"),
        }
    }
    assert!(drops > 100);
}
