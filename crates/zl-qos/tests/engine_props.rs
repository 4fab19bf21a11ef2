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
