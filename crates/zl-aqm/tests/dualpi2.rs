//! DualPI2 (docs/algorithms/dualpi2.md) against RFC 9332: the classifier (ECT(1) and CE to the
//! L queue), the PI update on a worked sequence against the RFC's `dualpi2_update`, the coupled
//! probabilities (`p_C = p'^2` for classic packets, `k p'` for L4S ones) measured at a held
//! `p'`, the step marker, the scheduler's classic protection, and an unresponsive L4S flood
//! under overload.

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use zl_aqm::dualpi2::is_l4s;
use zl_aqm::{
    Departure, Discipline, DualPi2, DualPi2Params, Ecn, FlowId, Nanos, Next, PacketMeta, Queued,
};

const MS: u64 = 1_000_000;

fn pkt(ecn: Ecn) -> PacketMeta {
    PacketMeta {
        len: 1000,
        ecn,
        flow: FlowId(ecn.bits() as u64),
        ..PacketMeta::default()
    }
}

fn dualpi2(params: DualPi2Params) -> DualPi2<u32> {
    DualPi2::new(params.validate().unwrap(), 100_000, 100_000, u64::MAX)
}

fn enqueue(d: &mut DualPi2<u32>, now: u64, ecn: Ecn, id: u32) -> bool {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(0);
    d.enqueue(
        Nanos(now),
        &pkt(ecn),
        None,
        id,
        &mut rng,
        |_| {},
        &mut |_, _| {},
    )
    .is_ok()
}

fn dequeue(
    d: &mut DualPi2<u32>,
    now: u64,
    rng: &mut Xoshiro256PlusPlus,
    dropped: &mut Vec<u32>,
) -> Option<(u32, bool)> {
    match d.dequeue(Nanos(now), rng, &mut |q: Queued<u32>, _| {
        dropped.push(q.item)
    }) {
        Next::Packet(Departure { queued, mark }) => Some((queued.item, mark)),
        Next::Empty => None,
        Next::Hold(_) => panic!("dualpi2 never holds"),
    }
}

#[test]
fn ect1_and_ce_are_l4s() {
    assert!(is_l4s(&pkt(Ecn::Ect1)));
    assert!(is_l4s(&pkt(Ecn::Ce)));
    assert!(!is_l4s(&pkt(Ecn::Ect0)));
    assert!(!is_l4s(&pkt(Ecn::NotEct)));
    let mut d = dualpi2(DualPi2Params::default());
    for (i, e) in [Ecn::Ect1, Ecn::Ect0, Ecn::Ce, Ecn::NotEct]
        .into_iter()
        .enumerate()
    {
        assert!(enqueue(&mut d, 0, e, i as u32));
    }
    assert_eq!(d.queue_lens(), (2, 2));
    assert_eq!(d.stats().l_packets, 2);
}

/// RFC 9332 A.1's `dualpi2_update`: `p' += alpha (q - target) + beta (q - q_old)`, clamped to
/// [0, 1], on a worked sequence of delays.
#[test]
fn the_pi_update_follows_the_rfc_on_a_worked_sequence() {
    let mut d = dualpi2(DualPi2Params::default());
    let (alpha, beta, target) = (0.16, 3.2, 0.015);
    let (mut p, mut old) = (0.0f64, 0.0f64);
    let delays: Vec<f64> = (0..50)
        .map(|k| f64::from(k) * 0.001)
        .chain(std::iter::repeat_n(0.05, 100))
        .chain(std::iter::repeat_n(0.0, 100))
        .collect();
    for (k, q) in delays.iter().enumerate() {
        d.update(Nanos::from_secs_f64(*q));
        let q = Nanos::from_secs_f64(*q).as_secs_f64();
        p = (p + alpha * (q - target) + beta * (q - old)).clamp(0.0, 1.0);
        old = q;
        assert!((d.base_probability() - p).abs() < 1e-12, "step {k}");
    }
}

/// At a held base probability (delays that keep it still), classic packets are dropped with
/// `p'^2` and L4S packets marked with `k p'` (here 0.2: 4 % and 40 %).
#[test]
fn the_coupled_probabilities_are_squared_and_linear() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
    let p = 0.2;
    let mut held = dualpi2(DualPi2Params {
        alpha: p / 0.985,
        beta: 0.0,
        target_ms: 15.0,
        step_thresh_ms: 1e6,
        ..DualPi2Params::default()
    });
    // One update with a 1 s delay: p' = alpha * (1 - 0.015) = p.
    held.update(Nanos::from_secs_f64(1.0));
    assert!((held.base_probability() - p).abs() < 1e-12);
    // Then held there: the controller's state taken over by one whose gains are zero.
    let mut d = dualpi2(DualPi2Params {
        alpha: 0.0,
        beta: 0.0,
        step_thresh_ms: 1e6,
        ..DualPi2Params::default()
    });
    d.inherit_state(&held);
    let (mut c_drops, mut c_sent, mut l_marks, mut l_sent) = (0u32, 0u32, 0u32, 0u32);
    let mut dropped = Vec::new();
    let mut id = 0;
    for round in 0..40_000u64 {
        let now = round * MS;
        // Keep both queues above two MTUs so every packet is decided.
        while d.queue_lens().0 < 4 {
            enqueue(&mut d, now, Ecn::Ect1, id);
            id += 1;
        }
        while d.queue_lens().1 < 4 {
            enqueue(&mut d, now, Ecn::NotEct, id | 1 << 31);
            id += 1;
        }
        let before = dropped.len();
        if let Some((i, mark)) = dequeue(&mut d, now, &mut rng, &mut dropped) {
            if i & 1 << 31 != 0 {
                c_sent += 1;
            } else {
                l_sent += 1;
                l_marks += u32::from(mark);
            }
        }
        c_drops += (dropped.len() - before) as u32;
    }
    let pc = f64::from(c_drops) / f64::from(c_drops + c_sent);
    let pl = f64::from(l_marks) / f64::from(l_sent);
    assert!((pc - p * p).abs() < 0.01, "classic drop {pc} vs {}", p * p);
    assert!((pl - 2.0 * p).abs() < 0.02, "L4S mark {pl} vs {}", 2.0 * p);
}

/// An L4S packet that waited more than the step threshold (1 ms) is marked, even at p' = 0.
#[test]
fn the_step_marks_l4s_packets_past_a_millisecond() {
    let mut d = dualpi2(DualPi2Params::default());
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let mut dropped = Vec::new();
    assert!(enqueue(&mut d, 0, Ecn::Ect1, 1));
    assert!(enqueue(&mut d, 0, Ecn::Ect1, 2));
    assert_eq!(
        dequeue(&mut d, MS / 2, &mut rng, &mut dropped),
        Some((1, false))
    );
    assert_eq!(
        dequeue(&mut d, 2 * MS, &mut rng, &mut dropped),
        Some((2, true))
    );
    assert_eq!(d.stats().step_marks, 1);
}

/// With both queues backlogged, the classic queue keeps its protected share (10 % of the bytes)
/// though L goes first.
#[test]
fn the_classic_queue_keeps_its_protected_share() {
    let mut d = dualpi2(DualPi2Params {
        alpha: 0.0,
        beta: 0.0,
        step_thresh_ms: 1e6,
        ..DualPi2Params::default()
    });
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let mut dropped = Vec::new();
    let (mut l, mut c) = (0u32, 0u32);
    for k in 0..20_000u32 {
        while d.queue_lens().0 < 3 {
            enqueue(&mut d, u64::from(k), Ecn::Ect1, 0);
        }
        while d.queue_lens().1 < 3 {
            enqueue(&mut d, u64::from(k), Ecn::NotEct, 1);
        }
        match dequeue(&mut d, u64::from(k), &mut rng, &mut dropped) {
            Some((0, _)) => l += 1,
            Some((_, _)) => c += 1,
            None => {}
        }
    }
    let share = f64::from(c) / f64::from(l + c);
    assert!((share - 0.1).abs() < 0.01, "classic share {share}");
}

/// An unresponsive L4S flood at twice the link: marks cannot slow it, `p'` climbs to overload
/// (`k p' > 1`) and L4S packets are dropped, so a classic flow keeps a share of the link.
#[test]
fn an_unresponsive_l4s_flood_is_dropped_under_overload() {
    let mut d = dualpi2(DualPi2Params::default());
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
    let mut dropped = Vec::new();
    let tx = 800_000u64; // 10 Mb/s
    let mut next_tx = 0;
    let (mut l_sent, mut c_sent) = (0, 0);
    let mut max_p: f64 = 0.0;
    for (id, k) in (0..40_000u64).enumerate() {
        let id = id as u32;
        let now = k * 400_000; // L4S flood: one packet per 0.4 ms (20 Mb/s)
        if !enqueue(&mut d, now, Ecn::Ect1, id) {
            dropped.push(id);
        }
        if k % 8 == 0 {
            enqueue(&mut d, now, Ecn::NotEct, 1 << 31);
        }
        while next_tx <= now {
            match dequeue(&mut d, next_tx, &mut rng, &mut dropped) {
                Some((i, _)) if i & 1 << 31 != 0 => c_sent += 1,
                Some(_) => l_sent += 1,
                None => {}
            }
            next_tx += tx;
        }
        max_p = max_p.max(d.base_probability());
    }
    // It reached overload (k p' > 1) and holds the flood around it.
    assert!(max_p > 0.5, "p' at most {max_p}");
    assert!(d.stats().l4s_drops > 1000, "{:?}", d.stats());
    assert!(c_sent > 500, "classic sent {c_sent}, L4S {l_sent}");
}
