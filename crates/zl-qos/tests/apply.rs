//! A live reconfiguration ([`QosEngine::apply`]): what is queued stays queued, counters go on,
//! the new rates and parameters take effect at once, the AQM keeps its running average, and
//! an update that changes the classes themselves is refused with nothing changed.

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use zl_aqm::{AqmParams, PacketMeta, RedParams, Verdict};
use zl_core::{Color, Nanos};
use zl_qos::{ClassParams, Dequeue, QosEngine, QosParams, QosUpdate, ShaperParams};

fn params(rate_bps: u64, red: RedParams) -> QosParams {
    let mut be = ClassParams::weighted("be", 1, 1000);
    be.aqm = Some(AqmParams::Red(red));
    QosParams {
        link_rate_bps: None,
        classes: vec![be, ClassParams::weighted("af1", 3, 1000)],
        classifier: Default::default(),
        scheduler: Default::default(),
        shaper: Some(ShaperParams {
            rate_bps,
            burst_bytes: None,
            overhead_bytes: 24,
            max_packet_bytes: 1514,
        }),
    }
}

fn red(min_th: f64, max_th: f64) -> RedParams {
    RedParams {
        min_th,
        max_th,
        w_q: 0.01,
        ecn: false,
        ..RedParams::default()
    }
}

fn pkt() -> PacketMeta {
    PacketMeta {
        len: 1000,
        ..PacketMeta::default()
    }
}

/// An engine holding 100 arrivals of class `be` (nothing dequeued), and its rng.
fn loaded(p: &QosParams) -> (QosEngine<u32>, Xoshiro256PlusPlus) {
    let mut e: QosEngine<u32> = QosEngine::new(p).unwrap();
    let mut r = Xoshiro256PlusPlus::seed_from_u64(7);
    for i in 0..100 {
        let _ = e.enqueue(Nanos::ZERO, &mut r, Some(0), pkt(), i, |_| {});
    }
    (e, r)
}

/// How long the engine takes to send `n` packets from `now` on (the shaper's pace).
fn time_to_send(e: &mut QosEngine<u32>, mut now: Nanos, n: usize) -> Nanos {
    let start = now;
    let mut sent = 0;
    while sent < n {
        match e.dequeue(now) {
            Dequeue::Packet(_) => sent += 1,
            Dequeue::Hold { until } => now = until,
            Dequeue::Empty => panic!("emptied after {sent}"),
        }
    }
    now - start
}

#[test]
fn queued_packets_stay_counters_go_on_and_the_new_rate_applies_at_once() {
    let (mut e, _) = loaded(&params(8_000_000, red(10.0, 30.0)));
    let queued = e.queue_len(0).unwrap();
    assert!(queued.0 > 50, "{queued:?}");
    let before = e.class_stats(0).unwrap();
    let aqm_before = e.aqm_stats(0, Color::Green).unwrap();
    let t_old = time_to_send(&mut e, Nanos::ZERO, 20);

    let u = QosUpdate::new(&params(4_000_000, red(10.0, 40.0)), None).unwrap();
    e.apply(u).unwrap();
    let after = e.class_stats(0).unwrap();
    assert_eq!(
        after.len_packets,
        queued.0 - 20,
        "queued packets stay queued"
    );
    let (b, a) = (before.per_color[0], after.per_color[0]);
    assert_eq!(
        (a.enqueued, a.early_drops, a.forced_drops, a.tail_drops),
        (b.enqueued, b.early_drops, b.forced_drops, b.tail_drops),
        "the counters go on"
    );
    assert_eq!(a.dequeued, b.dequeued + 20);
    assert_eq!(e.aqm_stats(0, Color::Green).unwrap(), aqm_before);
    // Half the rate: twice the time per packet (one packet of burst either way).
    let t_new = time_to_send(&mut e, t_old, 20);
    let ratio = t_new.0 as f64 / t_old.0 as f64;
    assert!(
        (ratio - 2.0).abs() < 0.15,
        "{t_old:?} -> {t_new:?} ({ratio})"
    );
}

#[test]
fn the_red_average_goes_on_across_a_reload() {
    // 100 arrivals with w_q = 0.01 leave the average far above max_th = 30 ...
    let (mut carried, mut r) = loaded(&params(8_000_000, red(10.0, 30.0)));
    carried
        .apply(QosUpdate::new(&params(8_000_000, red(10.0, 31.0)), None).unwrap())
        .unwrap();
    let (_, v) = carried.enqueue(Nanos::ZERO, &mut r, Some(0), pkt(), 1000, |_| {});
    // ... so the next arrival is a forced drop: the new policy took over the average.
    assert_eq!(v.unwrap_err().verdict, Verdict::ForcedDrop);

    // A policy built fresh with the same parameters starts from an average of 0 and admits.
    let mut fresh: QosEngine<u32> = QosEngine::new(&params(8_000_000, red(10.0, 31.0))).unwrap();
    let (_, v) = fresh.enqueue(Nanos::ZERO, &mut r, Some(0), pkt(), 1000, |_| {});
    assert_eq!(v.unwrap(), Verdict::Enqueue);
}

#[test]
fn changing_the_classes_is_refused_naming_the_key_and_changes_nothing() {
    let p = params(8_000_000, red(10.0, 30.0));
    let (mut e, _) = loaded(&p);
    let len = e.queue_len(0);

    let mut fewer = p.clone();
    fewer.classes.pop();
    let err = e.apply(QosUpdate::new(&fewer, None).unwrap()).unwrap_err();
    assert_eq!(err.key, "classes", "{err}");

    let mut bigger = p.clone();
    bigger.classes[1].max_packets = 2000;
    let err = e.apply(QosUpdate::new(&bigger, None).unwrap()).unwrap_err();
    assert_eq!(err.key, "classes[1].max_packets", "{err}");

    let mut renamed = p.clone();
    renamed.classes[1].name = "af2".into();
    let err = e
        .apply(QosUpdate::new(&renamed, None).unwrap())
        .unwrap_err();
    assert_eq!(err.key, "classes[1].name", "{err}");

    assert_eq!(e.queue_len(0), len);
    // The old shaper still runs, as on an engine that was never asked to change.
    let (mut untouched, _) = loaded(&p);
    assert_eq!(
        time_to_send(&mut e, Nanos::ZERO, 11),
        time_to_send(&mut untouched, Nanos::ZERO, 11)
    );
}
