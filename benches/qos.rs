//! Per-packet cost of the Diffserv pipeline (`zl-qos`): classify + meter + AQM + enqueue on
//! arrival, WRR + shaper + dequeue on departure, with 4 classes (EF strict, AF1/AF2/AF3 WRR
//! 1:4:5, trTCM meters, the sojourn manager on AF1/AF2, RED on AF3), as the data plane calls
//! it. Target: <= 40 ns per packet (one arrival and one departure). Also the meters and the
//! shaper alone. Results: docs/performance/zl-qos.md.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use zl_aqm::{AqmParams, PacketMeta, RedParams, SojournParams};
use zl_core::{Color, Nanos};
use zl_qos::{
    ClassParams, ClassifierParams, ColorMode, Dequeue, MeterParams, QosEngine, QosParams,
    SchedMode, SchedulerParams, Shaper, ShaperParams, Trtcm,
};

const BATCH: usize = 1024;

fn trtcm(cir: u64) -> Option<MeterParams> {
    Some(MeterParams::Trtcm {
        cir_bps: cir,
        cbs_bytes: 64_000,
        pir_bps: cir * 2,
        pbs_bytes: 64_000,
        mode: ColorMode::ColorAware,
    })
}

fn engine() -> QosEngine<u32> {
    let class = |name: &str, weight: Option<u32>, aqm: AqmParams, cir: u64| ClassParams {
        weight,
        strict_rank: weight.is_none().then_some(0),
        meter: trtcm(cir),
        aqm: Some(aqm),
        ..ClassParams::weighted(name, 1, 4096)
    };
    let red = AqmParams::Red(RedParams {
        min_th: 64.0,
        max_th: 512.0,
        ..RedParams::default()
    });
    let sojourn = AqmParams::Sojourn(SojournParams::setting1());
    let p = QosParams {
        link_rate_bps: None,
        classes: vec![
            class("ef", None, AqmParams::default(), 1_000_000_000),
            class("af1", Some(1), sojourn.clone(), 1_000_000_000),
            class("af2", Some(4), sojourn, 4_000_000_000),
            class("af3", Some(5), red, 5_000_000_000),
        ],
        classifier: ClassifierParams {
            default_class: "af3".into(),
            ..ClassifierParams::default()
        },
        scheduler: SchedulerParams {
            mode: SchedMode::Wrr,
        },
        shaper: Some(ShaperParams {
            rate_bps: 10_000_000_000,
            burst_bytes: Some(1_000_000),
            overhead_bytes: 24,
            max_packet_bytes: 1514,
        }),
    };
    QosEngine::new(&p).unwrap()
}

/// A mix of code points (EF 10 %, AF11..AF33 the rest) and sizes (64..1500 bytes).
fn mix() -> Vec<(u8, u32)> {
    let mut r = Xoshiro256PlusPlus::seed_from_u64(9);
    let dscps = [46u8, 10, 12, 14, 18, 20, 22, 26, 28, 30];
    (0..BATCH)
        .map(|_| {
            let d = dscps[r.random_range(0..dscps.len())];
            let len = [64u32, 576, 1500][r.random_range(0..3)];
            (d, len)
        })
        .collect()
}

fn pipeline(c: &mut Criterion) {
    let mut g = c.benchmark_group("qos");
    g.throughput(Throughput::Elements(BATCH as u64));
    let mix = mix();
    let mut e = engine();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    // 10 Gbit/s at ~700-byte packets is ~560 ns per packet; advance time by 560 ns per
    // packet so the shaper and meters see a realistic load, and keep ~100 packets queued.
    let mut now = 0u64;
    for (i, &(d, len)) in mix.iter().enumerate().take(100) {
        let meta = PacketMeta {
            len,
            ..PacketMeta::default()
        };
        let _ = e.enqueue(Nanos(now), &mut rng, Some(d), meta, i as u32, |_| {});
    }
    g.bench_function("classify_meter_enqueue_wrr_shape_dequeue_4_classes", |b| {
        b.iter(|| {
            for &(d, len) in &mix {
                now += 560;
                let meta = PacketMeta {
                    len,
                    ..PacketMeta::default()
                };
                let (_, r) = e.enqueue(Nanos(now), &mut rng, Some(d), meta, 0, |_| {});
                let _ = black_box(r);
                if let Dequeue::Packet(p) = e.dequeue(Nanos(now)) {
                    black_box(p.item);
                }
            }
        })
    });

    let mut m = Trtcm::new(
        1_000_000_000,
        64_000,
        2_000_000_000,
        64_000,
        ColorMode::ColorBlind,
    );
    let mut t = 0u64;
    g.bench_function("trtcm_color", |b| {
        b.iter(|| {
            for &(_, len) in &mix {
                t += 560;
                black_box(m.color(Nanos(t), len, Color::Green));
            }
        })
    });

    let mut s = Shaper::new(10_000_000_000, 1_000_000, 24);
    let mut t = 0u64;
    g.bench_function("shaper_try_send", |b| {
        b.iter(|| {
            for &(_, len) in &mix {
                t += 560;
                black_box(s.try_send(Nanos(t), len));
            }
        })
    });
    g.finish();
}

criterion_group!(benches, pipeline);
criterion_main!(benches);
