//! PIE (docs/algorithms/pie.md) against RFC 8033: the controller's update on a worked sequence
//! of delays against the RFC's `calculate_drop_prob` transcribed below, the dequeue-rate
//! estimator against a known link rate, the burst allowance, the §4.1 safeguards, and a
//! persistent overload held near the 15 ms target.

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use zl_aqm::{
    Admission, Aqm, Arrival, Ecn, Nanos, PacketMeta, Pie, PieEstimator, PieParams, QueueView,
    Verdict,
};

const MS: u64 = 1_000_000;

/// RFC 8033's `calculate_drop_prob` (§4.2 and its pseudo-code), times in seconds.
struct Oracle {
    drop_prob: f64,
    qdelay_old: f64,
}

impl Oracle {
    fn update(&mut self, qdelay: f64) {
        let (alpha, beta, target) = (0.125, 1.25, 0.015);
        let mut p = alpha * (qdelay - target) + beta * (qdelay - self.qdelay_old);
        if self.drop_prob < 0.000001 {
            p /= 2048.0;
        } else if self.drop_prob < 0.00001 {
            p /= 512.0;
        } else if self.drop_prob < 0.0001 {
            p /= 128.0;
        } else if self.drop_prob < 0.001 {
            p /= 32.0;
        } else if self.drop_prob < 0.01 {
            p /= 8.0;
        } else if self.drop_prob < 0.1 {
            p /= 2.0;
        }
        if self.drop_prob >= 0.1 && p > 0.02 {
            p = 0.02;
        }
        self.drop_prob += p;
        if qdelay == 0.0 && self.qdelay_old == 0.0 {
            self.drop_prob *= 0.98;
        }
        self.drop_prob = self.drop_prob.clamp(0.0, 1.0);
        self.qdelay_old = qdelay;
    }
}

fn pie(params: PieParams) -> Pie {
    Pie::new(params.validate().unwrap())
}

/// The controller on a worked sequence of delays (ramping up past the target, holding, then
/// draining to zero) moves `drop_prob` exactly as the RFC's update does.
#[test]
fn the_controller_follows_the_rfc_update_on_a_worked_sequence() {
    let mut p = pie(PieParams::default());
    let mut o = Oracle {
        drop_prob: 0.0,
        qdelay_old: 0.0,
    };
    let mut delays: Vec<f64> = (0..40).map(|k| f64::from(k) * 0.002).collect();
    delays.extend(std::iter::repeat_n(0.08, 200));
    delays.extend((0..40).rev().map(|k| f64::from(k) * 0.002));
    delays.extend(std::iter::repeat_n(0.0, 300));
    for (k, d) in delays.iter().enumerate() {
        p.update(Nanos::from_secs_f64(*d));
        o.update(Nanos::from_secs_f64(*d).as_secs_f64());
        let got = p.state().drop_prob;
        assert!(
            (got - o.drop_prob).abs() <= 1e-12 * o.drop_prob.max(1e-9),
            "step {k}: {got} vs {}",
            o.drop_prob
        );
    }
    // It rose above 0.1 while the delay was 80 ms, and decayed towards 0 after.
    assert!(p.state().drop_prob < 0.05);
}

fn view(bytes: u64, head: Option<Nanos>) -> QueueView {
    QueueView {
        len_packets: (bytes / 1000) as u32,
        len_bytes: bytes,
        capacity_packets: 100_000,
        capacity_bytes: u64::MAX,
        head_enqueued_at: head,
        idle_since: None,
    }
}

fn pkt(len: u32) -> PacketMeta {
    PacketMeta {
        len,
        ..PacketMeta::default()
    }
}

/// Departures at 10 Mb/s with a backlog above `dq_threshold`: the estimate reads 1.25 MB/s, and
/// Little's law turns 30 kB queued into 24 ms.
#[test]
fn the_dequeue_rate_estimator_measures_the_link() {
    let mut p = pie(PieParams::default());
    let tx = 800_000u64; // 1000 bytes at 10 Mb/s
    for k in 0..500u64 {
        p.on_dequeue(Nanos(k * tx), &view(30_000, None), &pkt(1000));
    }
    let rate = p.state().avg_dq_rate;
    assert!((rate - 1.25e6).abs() < 1.25e6 * 0.01, "{rate}");
    let d = p.qdelay(Nanos(500 * tx), &view(30_000, None));
    assert!((d.as_millis_f64() - 24.0).abs() < 0.5, "{d}");
}

/// A queue below `dq_threshold` is never measured (its rate would read the gaps between
/// arrivals, not the link).
#[test]
fn a_short_queue_is_not_measured() {
    let mut p = pie(PieParams::default());
    for k in 0..500u64 {
        p.on_dequeue(Nanos(k * MS), &view(2_000, None), &pkt(1000));
    }
    assert_eq!(p.state().avg_dq_rate, 0.0);
}

/// A link of 10 Mb/s offered 12 Mb/s of unresponsive traffic: after its burst allowance, PIE
/// drops about the sixth in excess and the queue delay settles near its 15 ms target (where a
/// FIFO's would grow by 0.2 s per second).
#[test]
fn a_persistent_overload_settles_near_the_target() {
    for estimator in [PieEstimator::Rate, PieEstimator::Timestamp] {
        let mut a = Admission::new(pie(PieParams {
            estimator,
            ..PieParams::default()
        }));
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
        let mut queue: std::collections::VecDeque<u64> = std::collections::VecDeque::new();
        let tx = 800_000u64;
        let arrive = 666_667u64;
        let (mut next_tx, mut dropped, mut offered) = (0u64, 0u64, 0u64);
        let mut delays = Vec::new();
        let mut first_drop = None;
        for k in 0..60_000u64 {
            let now = k * arrive;
            while next_tx <= now {
                if let Some(t) = queue.pop_front() {
                    let v = view(queue.len() as u64 * 1000, queue.front().map(|&t| Nanos(t)));
                    a.on_dequeue(Nanos(next_tx), &v, &pkt(1000));
                    if next_tx > 20_000 * MS {
                        delays.push(next_tx - t);
                    }
                }
                next_tx += tx;
            }
            let v = view(queue.len() as u64 * 1000, queue.front().map(|&t| Nanos(t)));
            let verdict = a.admit(&Arrival::new(Nanos(now), &v, &pkt(1000)), &mut rng);
            offered += 1;
            if verdict.admits() {
                queue.push_back(now);
            } else {
                dropped += 1;
                first_drop.get_or_insert(now);
            }
        }
        // No drop in the burst allowance (150 ms) after the queue started.
        assert!(
            first_drop.unwrap() > 150 * MS,
            "{estimator:?}: {first_drop:?}"
        );
        let share = dropped as f64 / offered as f64;
        assert!(
            (0.13..0.22).contains(&share),
            "{estimator:?}: drop share {share}"
        );
        delays.sort_unstable();
        let median = delays[delays.len() / 2] as f64 / MS as f64;
        assert!(
            (8.0..30.0).contains(&median),
            "{estimator:?}: median delay {median} ms"
        );
    }
}

/// §4.1: no early drop while at most two packets are queued, whatever `drop_prob` is; with
/// `ecn`, a markable packet is marked while `drop_prob <= 0.1` and dropped above it.
#[test]
fn safeguards_and_ecn_marking() {
    let mut p = pie(PieParams {
        ecn: true,
        max_burst_ms: 0.0,
        ..PieParams::default()
    });
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
    // Drive drop_prob to about 0.05 with a held delay of 40 ms.
    for _ in 0..60 {
        p.update(Nanos(40 * MS));
    }
    let dp = p.state().drop_prob;
    assert!(dp > 0.02 && dp <= 0.1, "{dp}");
    let ect = PacketMeta {
        ecn: Ecn::Ect0,
        ..pkt(1000)
    };
    let small = view(2000, None);
    let big = view(50_000, None);
    let now = Nanos(1);
    for _ in 0..1000 {
        assert_eq!(
            p.decide(&Arrival::new(now, &small, &ect), &mut rng),
            Verdict::Enqueue
        );
        let v = p.decide(&Arrival::new(now, &big, &ect), &mut rng);
        assert!(matches!(v, Verdict::Enqueue | Verdict::MarkCe), "{v:?}");
    }
    for _ in 0..200 {
        p.update(Nanos(200 * MS));
    }
    assert!(p.state().drop_prob > 0.1);
    let mut drops = 0;
    for _ in 0..1000 {
        let v = p.decide(&Arrival::new(now, &big, &ect), &mut rng);
        assert_ne!(v, Verdict::MarkCe);
        drops += u32::from(v == Verdict::EarlyDrop);
    }
    assert!(drops > 50);
}

#[test]
fn bad_parameters_are_named() {
    let e = PieParams {
        dq_threshold_bytes: 100,
        ..PieParams::default()
    }
    .validate()
    .unwrap_err();
    assert_eq!(e.param, "dq_threshold_bytes");
    let e = PieParams {
        alpha: -1.0,
        ..PieParams::default()
    }
    .validate()
    .unwrap_err();
    assert_eq!(e.param, "alpha");
}
