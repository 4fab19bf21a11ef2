//! PIE as a class's FIFO policy in the engine: its dequeue-rate estimator (RFC 8033 §4.3)
//! hears every departure, in bursts as in single dequeues, and PIE holds the queueing delay
//! near its target on an overloaded link.

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use zl_aqm::{AqmParams, AqmPolicy, FlowId, PacketMeta, PieParams};
use zl_core::Nanos;
use zl_qos::{ClassParams, QosEngine, QosParams, ShaperParams};

const MS: u64 = 1_000_000;

/// One class under PIE on a 10 Mb/s shaper: a 1250-byte packet leaves every millisecond.
fn engine() -> QosEngine<u64> {
    let mut be = ClassParams::weighted("be", 1, 1000);
    be.aqm = Some(AqmParams::Pie(PieParams::default()));
    QosEngine::new(&QosParams {
        link_rate_bps: None,
        classes: vec![be],
        classifier: Default::default(),
        scheduler: Default::default(),
        shaper: Some(ShaperParams {
            rate_bps: 10_000_000,
            burst_bytes: None,
            overhead_bytes: 0,
            max_packet_bytes: 1514,
        }),
    })
    .unwrap()
}

fn pie(e: &QosEngine<u64>) -> &zl_aqm::Pie {
    match e.fifo_policy(0) {
        Some(AqmPolicy::Pie(p)) => p,
        other => panic!("{other:?}"),
    }
}

/// Offers 1.25x the link for `secs` seconds, taking packets in bursts of up to `burst` each
/// millisecond (1 takes them with `dequeue`); returns the mean sojourn over the last second.
fn run(burst: usize, secs: u64) -> (QosEngine<u64>, f64) {
    let mut e = engine();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
    let (mut sojourn_sum, mut sent_late) = (0.0, 0u64);
    let mut queued_at = std::collections::HashMap::new();
    let mut seq = 0u64;
    for t in 0..secs * 1000 {
        let now = Nanos(t * MS);
        // 5 arrivals every 4 ms.
        if t % 4 == 0 {
            for _ in 0..5 {
                let meta = PacketMeta {
                    len: 1250,
                    flow: FlowId(seq % 7),
                    ..PacketMeta::default()
                };
                let (_, r) = e.enqueue(now, &mut rng, None, meta, seq, |_| {});
                if r.is_ok() {
                    queued_at.insert(seq, now);
                }
                seq += 1;
            }
        }
        let mut took = |item: u64| {
            let at = queued_at.remove(&item).unwrap();
            if t >= (secs - 1) * 1000 {
                sojourn_sum += (now - at).as_millis_f64();
                sent_late += 1;
            }
        };
        if burst == 1 {
            if let zl_qos::Dequeue::Packet(d) = e.dequeue(now) {
                took(d.item);
            }
        } else {
            e.dequeue_burst(now, burst, &mut took);
        }
    }
    let mean = sojourn_sum / sent_late as f64;
    (e, mean)
}

#[test]
fn pie_hears_every_departure_and_holds_the_delay_near_its_target() {
    for burst in [1, 32] {
        let (e, mean_ms) = run(burst, 8);
        let s = pie(&e).state();
        // The link's rate, 1.25 MB/s, measured from the departures.
        assert!(
            (1.1e6..1.4e6).contains(&s.avg_dq_rate),
            "burst {burst}: dequeue rate {} B/s",
            s.avg_dq_rate
        );
        assert!(s.drop_prob > 0.0, "burst {burst}: {s:?}");
        // The target is 15 ms: the mean sojourn of the last second sits near it, far below
        // the 1000-packet buffer's second.
        assert!(
            (5.0..40.0).contains(&mean_ms),
            "burst {burst}: mean sojourn {mean_ms} ms"
        );
    }
}
