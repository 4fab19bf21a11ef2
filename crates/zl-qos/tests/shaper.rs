//! The egress shaper holds its rate (±1 % over 10 s of simulated time) with mixed packet
//! sizes, counting the wire overhead, both alone and behind the engine.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use zl_aqm::PacketMeta;
use zl_core::Nanos;
use zl_qos::{ClassParams, Dequeue, QosEngine, QosParams, Shaper, ShaperParams};

const TEN_S: u64 = 10_000_000_000;

fn mixed_len(r: &mut impl Rng) -> u32 {
    // IMIX-like: 64, 576 and 1500 bytes at 7:4:1, plus uniform sizes.
    match r.random_range(0..13) {
        0..=6 => 64,
        7..=10 => 576,
        11 => 1500,
        _ => r.random_range(64..=1514),
    }
}

#[test]
fn shaper_alone_holds_rate_within_one_percent() {
    for rate in [1_000_000u64, 100_000_000, 10_000_000_000] {
        let mut s = ShaperParams {
            rate_bps: rate,
            burst_bytes: None,
            overhead_bytes: 24,
            max_packet_bytes: 1514,
        }
        .build()
        .unwrap();
        let mut r = Xoshiro256PlusPlus::seed_from_u64(1);
        let (mut now, mut wire) = (Nanos::ZERO, 0u64);
        let mut len = mixed_len(&mut r);
        loop {
            if s.try_send(now, len) {
                wire += s.wire_bytes(len);
                len = mixed_len(&mut r);
            } else {
                now = s.next_send_time(now, len);
                if now.0 >= TEN_S {
                    break;
                }
            }
        }
        // The initial burst (one packet) is included; the rate must match to ±1 %.
        let got = wire as f64 * 8.0 / 10.0;
        assert!((got / rate as f64 - 1.0).abs() < 0.01, "{rate}: {got}");
        // Sharper: it is exact up to the burst, wire·8 <= rate·T + burst·8.
        assert!(wire * 8 <= rate * 10 + 1538 * 8, "{rate}: {wire}");
    }
}

#[test]
fn engine_behind_shaper_holds_rate() {
    let p = QosParams {
        link_rate_bps: None,
        classes: vec![
            ClassParams::weighted("be", 1, 2000),
            ClassParams::weighted("af1", 3, 2000),
        ],
        classifier: Default::default(),
        scheduler: Default::default(),
        shaper: Some(ShaperParams {
            rate_bps: 50_000_000,
            burst_bytes: Some(10_000),
            overhead_bytes: 24,
            max_packet_bytes: 1514,
        }),
    };
    let mut e: QosEngine<()> = QosEngine::new(&p).unwrap();
    let mut r = Xoshiro256PlusPlus::seed_from_u64(2);
    let (mut now, mut wire) = (Nanos::ZERO, 0u64);
    // Offered load above the rate (both classes kept backlogged).
    while now.0 < TEN_S {
        while e.len() < 100 {
            let len = mixed_len(&mut r);
            let dscp = [0u8, 10][r.random_range(0..2)];
            let m = PacketMeta {
                len,
                ..PacketMeta::default()
            };
            e.enqueue(now, &mut r, Some(dscp), m, (), |_| {}).1.unwrap();
        }
        match e.dequeue(now) {
            Dequeue::Packet(d) => wire += d.meta.len as u64 + 24,
            Dequeue::Hold { until } => now = until,
            Dequeue::Empty => unreachable!("kept backlogged"),
        }
    }
    let got = wire as f64 * 8.0 / 10.0;
    assert!((got / 50e6 - 1.0).abs() < 0.01, "{got}");
}

#[test]
fn shaper_never_sends_oversize_and_engine_drops_it() {
    let s = Shaper::new(1_000_000, 1538, 24);
    assert!(s.fits(1514));
    assert!(!s.fits(1515));
    assert_eq!(s.next_send_time(Nanos::ZERO, 9000), Nanos::MAX);

    let p = QosParams {
        link_rate_bps: None,
        classes: vec![ClassParams::weighted("be", 1, 10)],
        classifier: Default::default(),
        scheduler: Default::default(),
        shaper: Some(ShaperParams {
            rate_bps: 1_000_000,
            burst_bytes: None,
            overhead_bytes: 24,
            max_packet_bytes: 1514,
        }),
    };
    let mut e: QosEngine<u8> = QosEngine::new(&p).unwrap();
    let mut r = Xoshiro256PlusPlus::seed_from_u64(3);
    let m = PacketMeta {
        len: 1515,
        ..PacketMeta::default()
    };
    let (_, res) = e.enqueue(Nanos::ZERO, &mut r, Some(0), m, 9, |_| {});
    let dropped = res.unwrap_err();
    assert_eq!(
        (dropped.verdict, dropped.item),
        (zl_aqm::Verdict::TailDrop, 9)
    );
    assert_eq!(e.class_stats(0).unwrap().per_color[0].tail_drops, 1);
    assert_eq!(e.queue_len(0), Some((0, 0)));
    assert_eq!(e.queue_len(1), None);
    assert_eq!(e.dequeue(Nanos::ZERO), Dequeue::Empty);
}

/// `Shaper::send_run` is `try_send` for each length in turn up to the first refused, then
/// `next_send_time` of that one: the same count, the same time, the same shaper after
/// (tokens and clock), over rates, depths, overheads, clocks that stand still or step back,
/// empty runs, lengths that never fit and a bucket of `u64::MAX` units (`send_run`'s cold path).
#[test]
fn send_run_is_repeated_try_send() {
    let mut r = Xoshiro256PlusPlus::seed_from_u64(14);
    for _ in 0..2_000 {
        let rate = [1_000_000u64, 100_000_000, 10_000_000_000][r.random_range(0..3)];
        // Now and then a depth of `u64::MAX` units (no validated config has one: a full
        // bucket then takes even a saturated cost) or one just below it.
        let burst = match r.random_range(0..10) {
            0 => u64::MAX,
            1 => r.random_range(2_000_000_000..=2_305_843_009),
            _ => r.random_range(1_538u64..=20_000),
        };
        let overhead = [0u32, 20, 24][r.random_range(0..3)];
        let mut run = Shaper::new(rate, burst, overhead);
        let mut one = run.clone();
        let mut now = 0u64;
        for _ in 0..50 {
            now = match r.random_range(0..4) {
                0 => now,
                1 => now.saturating_sub(r.random_range(0..2_000)),
                _ => now + r.random_range(0..20_000),
            };
            let lens: Vec<u32> = (0..r.random_range(0..40))
                .map(|_| match r.random_range(0..20) {
                    0 => u32::MAX,
                    1 => (burst as u32).saturating_add(1),
                    _ => mixed_len(&mut r),
                })
                .collect();
            let got = run.send_run(Nanos(now), lens.iter().copied());
            let (mut sent, mut held) = (0u64, None);
            for &len in &lens {
                if !one.try_send(Nanos(now), len) {
                    held = Some(one.next_send_time(Nanos(now), len));
                    break;
                }
                sent += 1;
            }
            assert_eq!(
                got,
                (sent, held),
                "rate {rate} burst {burst} at {now}: {lens:?}"
            );
            assert_eq!(run, one);
        }
    }
}
