//! Properties every policy keeps on arbitrary packets and queues: no panic, a packet that does
//! not fit is always `TailDrop`, forced and tail drops are never marks, one counted verdict per
//! arrival, and the ZL-RED terms are never NaN or negative.

use proptest::prelude::*;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use zl_aqm::zlred::zlred_probability;
use zl_aqm::{
    Admission, AqmParams, Arrival, BuildContext, Color, Ecn, FlowId, Nanos, NonlinearRedParams,
    PacketMeta, PieEstimator, PieParams, PriorityEcnRedParams, QueueView, RedParams, SojournParams,
    SredParams, TailDropParams, Verdict, ZlRedInputs, ZlRedParams,
};
use zl_zombie::ZombieParams;

fn all_params() -> Vec<AqmParams> {
    let small = ZombieParams {
        m: 16,
        ..ZombieParams::default()
    };
    vec![
        AqmParams::TailDrop(TailDropParams::default()),
        AqmParams::Red(RedParams {
            gentle: true,
            ..RedParams::default()
        }),
        AqmParams::Red(RedParams::default()),
        AqmParams::Sred(SredParams {
            zombie: small,
            ..SredParams::default()
        }),
        AqmParams::ZlRed(ZlRedParams {
            zombie: small,
            a: 4.0,
            ecn: true,
            ..ZlRedParams::default()
        }),
        AqmParams::PriorityEcnRed(PriorityEcnRedParams::default()),
        AqmParams::NonlinearRed(NonlinearRedParams {
            w_q: 0.5,
            ..NonlinearRedParams::default()
        }),
        AqmParams::Sojourn(SojournParams {
            w: 0.5,
            ..SojournParams::default()
        }),
        AqmParams::Pie(PieParams {
            ecn: true,
            max_burst_ms: 0.0,
            ..PieParams::default()
        }),
        AqmParams::Pie(PieParams {
            estimator: PieEstimator::Timestamp,
            ..PieParams::default()
        }),
    ]
}

fn arb_arrival() -> impl Strategy<Value = (u64, QueueView, PacketMeta)> {
    (
        any::<u64>(),
        0u32..2000,
        any::<u64>(),
        0u32..2000,
        prop::option::of(any::<u64>()),
        prop::option::of(any::<u64>()),
        (
            any::<u32>(),
            0u64..64,
            0u8..4,
            any::<bool>(),
            any::<u8>(),
            any::<u8>(),
            0usize..3,
        ),
    )
        .prop_map(
            |(now, len, bytes, cap, head, idle, (plen, flow, ecn, cc, pri, w, color))| {
                (
                    now,
                    QueueView {
                        len_packets: len,
                        len_bytes: bytes >> 20,
                        capacity_packets: cap,
                        capacity_bytes: u64::MAX,
                        head_enqueued_at: head.map(Nanos),
                        idle_since: idle.map(Nanos),
                    },
                    PacketMeta {
                        len: plen,
                        flow: FlowId(flow),
                        ecn: Ecn::from_bits(ecn),
                        has_cc_ext: cc,
                        priority: pri,
                        weight: w,
                        color: Color::ALL[color],
                        src_host: (flow >> 8) as u16,
                        dst_host: flow as u16,
                    },
                )
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn every_policy_respects_the_verdict_rules(
        arrivals in prop::collection::vec(arb_arrival(), 1..200),
        seed in any::<u64>(),
    ) {
        let ctx = BuildContext::new(1_000_000_000, 1000);
        for params in all_params() {
            let mut p = Admission::new(params.build(&ctx).unwrap());
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
            for (i, (now, q, pkt)) in arrivals.iter().enumerate() {
                let v = p.admit(&Arrival::new(Nanos(*now), q, pkt), &mut rng);
                if q.is_full_for(pkt.len) {
                    prop_assert_eq!(v, Verdict::TailDrop, "{}", params.kind());
                }
                if v == Verdict::MarkCe {
                    prop_assert!(pkt.is_markable(), "{}", params.kind());
                }
                prop_assert_eq!(p.stats().arrivals(), i as u64 + 1);
            }
        }
    }

    #[test]
    fn zlred_terms_are_never_nan_or_negative(
        q in prop_oneof![0.0f64..5000.0, Just(400.0)],
        hit in any::<bool>(),
        p_hit in prop_oneof![0.0f64..=1.0, Just(5e-324), Just(1e-300), Just(0.0)],
        total in 0u64..1_000_000,
        frac in 0.0f64..=1.0,
        p_avg in 0.0f64..=1.0,
        a in 1.0f64..1000.0,
    ) {
        let t = zlred_probability(&ZlRedInputs {
            q,
            th_min: 5.0,
            b_third: 1000.0 / 3.0,
            p_max: 0.15,
            a,
            hit,
            p_hit,
            occurrence: (total as f64 * frac) as u64,
            total,
            p_avg,
        });
        for p in [t.p1, t.p2, t.p3, t.p4, t.p5] {
            // +inf is a certain drop; NaN would be a silent "never".
            prop_assert!(p >= 0.0, "{:?}", t);
        }
        prop_assert!(t.p2 <= t.p1 && t.p3 >= t.p2);
    }
}
