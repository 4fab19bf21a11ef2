//! Engine invariants under random operation sequences: packets are conserved (every arrival
//! is queued, dropped and handed back, or departs), FIFO order holds within a class, the
//! limits are never exceeded, counters agree with what the caller saw, and nothing panics
//! whatever the code points, sizes and times.

use proptest::prelude::*;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use zl_aqm::{AqmParams, PacketMeta, RedParams, SojournParams};
use zl_core::{Color, Nanos};
use zl_qos::{
    BufferRule, ClassParams, ColorMode, Dequeue, MeterParams, QosEngine, QosParams, SchedMode,
    SchedulerParams, ShaperParams,
};

fn params(mode: SchedMode) -> QosParams {
    let meter = Some(MeterParams::Trtcm {
        cir_bps: 1_000_000,
        cbs_bytes: 3000,
        pir_bps: 2_000_000,
        pbs_bytes: 6000,
        mode: ColorMode::ColorAware,
    });
    let w = |q: u32| if mode == SchedMode::Drr { q * 1500 } else { q };
    QosParams {
        link_rate_bps: None,
        classes: vec![
            ClassParams {
                meter: meter.clone(),
                drop_red: true,
                ..ClassParams::strict("ef", 8)
            },
            ClassParams {
                meter: meter.clone(),
                aqm: Some(AqmParams::Sojourn(SojournParams::setting1())),
                ..ClassParams::weighted("af1", w(1), 16)
            },
            ClassParams {
                meter,
                aqm: Some(AqmParams::Red(RedParams {
                    min_th: 2.0,
                    max_th: 6.0,
                    ..RedParams::default()
                })),
                buffer: Some(BufferRule::Fixed {
                    packets: 12,
                    bytes: Some(9000),
                }),
                ..ClassParams::weighted("af2", w(4), 16)
            },
            ClassParams::weighted("be", w(5), 16),
        ],
        classifier: Default::default(),
        scheduler: SchedulerParams { mode },
        shaper: Some(ShaperParams {
            rate_bps: 10_000_000,
            burst_bytes: None,
            overhead_bytes: 24,
            max_packet_bytes: 1514,
        }),
    }
}

#[derive(Clone, Debug)]
enum Op {
    Arrive {
        gap: u64,
        dscp: Option<u8>,
        len: u32,
    },
    Depart {
        gap: u64,
    },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u64..2_000_000, proptest::option::of(0u8..70), 1u32..2000)
            .prop_map(|(gap, dscp, len)| Op::Arrive { gap, dscp, len }),
        (0u64..3_000_000).prop_map(|gap| Op::Depart { gap }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn packets_are_conserved_and_fifo_per_class(
        ops in proptest::collection::vec(op(), 1..400),
        drr in any::<bool>(),
    ) {
        let mode = if drr { SchedMode::Drr } else { SchedMode::Wrr };
        let mut e: QosEngine<u64> = QosEngine::new(&params(mode)).unwrap();
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let (mut now, mut id) = (0u64, 0u64);
        let (mut queued, mut dropped, mut departed) = (0u64, 0u64, 0u64);
        let mut last_out = [None::<u64>; 4];
        for op in ops {
            match op {
                Op::Arrive { gap, dscp, len } => {
                    now += gap;
                    id += 1;
                    let m = PacketMeta { len, ..PacketMeta::default() };
                    let (c, r) = e.enqueue(Nanos(now), &mut rng, dscp, m, id, |_| {});
                    prop_assert!(c.class < 4);
                    match r {
                        Ok(v) => { prop_assert!(v.admits()); queued += 1; }
                        Err(d) => {
                            prop_assert!(!d.verdict.admits());
                            prop_assert_eq!(d.item, id);
                            dropped += 1;
                        }
                    }
                }
                Op::Depart { gap } => {
                    now += gap;
                    match e.dequeue(Nanos(now)) {
                        Dequeue::Packet(d) => {
                            departed += 1;
                            prop_assert!(last_out[d.class].is_none_or(|p| p < d.item), "FIFO");
                            last_out[d.class] = Some(d.item);
                        }
                        Dequeue::Hold { until } => prop_assert!(until.0 > now),
                        Dequeue::Empty => prop_assert!(e.is_empty()),
                    }
                }
            }
            for c in 0..4 {
                let s = e.class_stats(c).unwrap();
                let cap = e.capacity(c).unwrap();
                prop_assert!(s.len_packets <= cap.packets && s.len_bytes <= cap.bytes);
            }
        }
        prop_assert_eq!(queued, departed + e.len() as u64);
        let (mut enq, mut drops, mut deq) = (0, 0, 0);
        for c in 0..4 {
            let t = e.class_stats(c).unwrap().total();
            enq += t.enqueued;
            drops += t.drops();
            deq += t.dequeued;
            prop_assert_eq!(t.sojourn.count, t.dequeued);
        }
        prop_assert_eq!((enq, drops, deq), (queued, dropped, departed));
        // EF polices red: no red packet was ever admitted there.
        prop_assert_eq!(e.class_stats(0).unwrap().color(Color::Red).enqueued, 0);
    }
}

fn any_meter() -> impl Strategy<Value = Option<MeterParams>> {
    let big = prop_oneof![1 => Just(0u64), 8 => 1000u64..10_000_000, 1 => any::<u64>()];
    proptest::option::weighted(
        0.3,
        prop_oneof![
            (big.clone(), big.clone(), big.clone()).prop_map(|(c, b, e)| MeterParams::Srtcm {
                cir_bps: c,
                cbs_bytes: b,
                ebs_bytes: e,
                mode: ColorMode::ColorBlind,
            }),
            (big.clone(), big.clone(), big.clone(), big).prop_map(|(c, b, p, pb)| {
                MeterParams::Trtcm {
                    cir_bps: c,
                    cbs_bytes: b,
                    pir_bps: p,
                    pbs_bytes: pb,
                    mode: ColorMode::ColorAware,
                }
            }),
        ],
    )
}

fn any_rule() -> impl Strategy<Value = Option<BufferRule>> {
    let f = prop_oneof![
        1 => Just(f64::NAN),
        1 => Just(-1.0),
        1 => Just(0.0),
        12 => 0.001f64..1e6,
        1 => Just(1e300)
    ];
    let u = prop_oneof![1 => Just(0u64), 12 => 1u64..1_000_000, 1 => any::<u64>()];
    proptest::option::weighted(
        0.3,
        prop_oneof![
            (0u32..100, proptest::option::of(u.clone()))
                .prop_map(|(packets, bytes)| BufferRule::Fixed { packets, bytes }),
            (u.clone(), f.clone())
                .prop_map(|(rate_bps, rtt_ms)| BufferRule::Bdp { rate_bps, rtt_ms }),
            (u.clone(), f.clone(), any::<u32>()).prop_map(|(rate_bps, rtt_ms, n)| {
                BufferRule::SqrtN {
                    rate_bps,
                    rtt_ms,
                    n,
                }
            }),
            (u.clone(), f.clone(), u.clone(), u, f).prop_map(
                |(rate_bps, rtt_ms, lo, hi, period)| {
                    BufferRule::SqrtNLive {
                        rate_bps,
                        rtt_ms,
                        floor_bytes: lo,
                        ceiling_bytes: hi,
                        period_ms: period,
                    }
                }
            ),
        ],
    )
}

/// Arbitrary numbers in every field: the engine is either rejected with a key or runs
/// arbitrary packets (sizes up to u32::MAX, times up to u64::MAX) without a panic; and the
/// generator is not vacuous (at least 30 of 1024 configs are accepted and run).
#[test]
fn arbitrary_configs_are_rejected_or_run() {
    let class = (
        prop_oneof![
            6 => (1u32..5000).prop_map(|q| (Some(q), None)),
            2 => (0u32..3).prop_map(|r| (None, Some(r))),
            1 => Just((Some(0), None)),
            1 => Just((Some(1), Some(1))),
            1 => Just((None, None)),
        ],
        prop_oneof![1 => Just(0u32), 8 => 1u32..64, 1 => Just(u32::MAX)],
        any_meter(),
        any_rule(),
    );
    let shaper = proptest::option::of((
        prop_oneof![3 => 1u64..100_000_000_000, 1 => any::<u64>()],
        proptest::option::of(prop_oneof![3 => 1u64..10_000_000, 1 => any::<u64>()]),
        prop_oneof![3 => 0u32..64, 1 => any::<u32>()],
        prop_oneof![3 => 1u32..9000, 1 => any::<u32>()],
    ));
    let strategy = (
        proptest::collection::vec(class, 0..4),
        shaper,
        proptest::option::of(
            prop_oneof![1 => Just(0u64), 6 => 1u64..10_000_000_000, 1 => any::<u64>()],
        ),
        proptest::collection::vec((any::<u64>(), any::<u32>(), any::<Option<u8>>()), 0..20),
    );
    let built = std::cell::Cell::new(0u32);
    let mut runner = proptest::test_runner::TestRunner::new_with_rng(
        ProptestConfig::with_cases(1024),
        proptest::test_runner::TestRng::deterministic_rng(
            proptest::test_runner::RngAlgorithm::ChaCha,
        ),
    );
    runner
        .run(&strategy, |(classes, shaper, link, pkts)| {
            let names = ["be", "af1", "af2", "ef"];
            let classes = classes
                .into_iter()
                .enumerate()
                .map(
                    |(i, ((weight, strict_rank), max_packets, meter, buffer))| ClassParams {
                        weight,
                        strict_rank,
                        max_packets,
                        meter,
                        buffer,
                        ..ClassParams::weighted(names[i], 1, 1)
                    },
                )
                .collect();
            let p = QosParams {
                link_rate_bps: link,
                classes,
                classifier: Default::default(),
                scheduler: Default::default(),
                shaper: shaper.map(
                    |(rate_bps, burst_bytes, overhead_bytes, max_packet_bytes)| ShaperParams {
                        rate_bps,
                        burst_bytes,
                        overhead_bytes,
                        max_packet_bytes,
                    },
                ),
            };
            match QosEngine::<()>::new(&p) {
                Err(e) => prop_assert!(!e.key.is_empty() && !e.reason.is_empty()),
                Ok(mut e) => {
                    built.set(built.get() + 1);
                    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
                    let mut now = 0u64;
                    for (gap, len, dscp) in pkts {
                        now = now.saturating_add(gap);
                        let m = PacketMeta {
                            len,
                            ..PacketMeta::default()
                        };
                        let _ = e.enqueue(Nanos(now), &mut rng, dscp, m, (), |_| {});
                        let _ = e.dequeue(Nanos(now));
                        e.offer_flow_estimate(Nanos(now), gap as f64);
                    }
                }
            }
            Ok(())
        })
        .unwrap();
    assert!(
        built.get() >= 30,
        "only {} of 1024 configs accepted",
        built.get()
    );
}

#[derive(Clone, Debug)]
enum BurstOp {
    Arrive {
        gap: u64,
        dscp: Option<u8>,
        len: u32,
    },
    Burst {
        gap: u64,
        max: usize,
    },
}

fn burst_op() -> impl Strategy<Value = BurstOp> {
    prop_oneof![
        3 => (
            0u64..400_000,
            proptest::option::of(prop_oneof![0u8..70, Just(46), Just(48)]),
            1u32..1600,
        )
            .prop_map(|(gap, dscp, len)| BurstOp::Arrive { gap, dscp, len }),
        1 => (0u64..3_000_000, 0usize..40).prop_map(|(gap, max)| BurstOp::Burst { gap, max }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]
    /// `dequeue_burst`, which asks the scheduler once per run of one class's packets, hands
    /// out exactly what as many `dequeue` calls (once per packet) would, in the same order,
    /// stops where they would (a full burst, the shaper's hold with its time, an empty
    /// engine), and leaves the same state behind: every counter, and the scheduler's and
    /// shaper's state, as the next bursts show. WRR and DRR, two strict ranks, with and
    /// without a shaper.
    #[test]
    fn dequeue_burst_is_repeated_dequeue(
        ops in proptest::collection::vec(burst_op(), 1..300),
        drr in any::<bool>(),
        shaped in any::<bool>(),
    ) {
        let mode = if drr { SchedMode::Drr } else { SchedMode::Wrr };
        let mut p = params(mode);
        p.classes.push(ClassParams { strict_rank: Some(1), ..ClassParams::strict("cs6", 8) });
        if !shaped {
            p.link_rate_bps = Some(10_000_000);
            p.shaper = None;
        }
        let mut one: QosEngine<u64> = QosEngine::new(&p).unwrap();
        let mut burst: QosEngine<u64> = QosEngine::new(&p).unwrap();
        let (mut r1, mut r2) = (
            Xoshiro256PlusPlus::seed_from_u64(5),
            Xoshiro256PlusPlus::seed_from_u64(5),
        );
        let (mut now, mut id) = (0u64, 0u64);
        let (mut by_one, mut by_burst) = (Vec::new(), Vec::new());
        for op in ops {
            match op {
                BurstOp::Arrive { gap, dscp, len } => {
                    now += gap;
                    id += 1;
                    let m = PacketMeta { len, ..PacketMeta::default() };
                    let (c1, v1) = one.enqueue(Nanos(now), &mut r1, dscp, m, id, |_| {});
                    let (c2, v2) = burst.enqueue(Nanos(now), &mut r2, dscp, m, id, |_| {});
                    prop_assert_eq!((c1, v1.is_ok()), (c2, v2.is_ok()));
                }
                BurstOp::Burst { gap, max } => {
                    now += gap;
                    let mut held = None;
                    let mut sent = 0;
                    while sent < max {
                        match one.dequeue(Nanos(now)) {
                            Dequeue::Packet(d) => {
                                by_one.push(d.item);
                                sent += 1;
                            }
                            Dequeue::Hold { until } => {
                                held = Some(until);
                                break;
                            }
                            Dequeue::Empty => break,
                        }
                    }
                    let b = burst.dequeue_burst(Nanos(now), max, |item| by_burst.push(item));
                    prop_assert_eq!((b.sent, b.held_until), (sent, held));
                    prop_assert_eq!(&by_one, &by_burst);
                }
            }
        }
        for c in 0..p.classes.len() {
            prop_assert_eq!(one.class_stats(c), burst.class_stats(c));
        }
    }
}
