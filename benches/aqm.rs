//! Per-packet decision cost of every AQM policy (`zl-aqm`), through `Admission<AqmPolicy>` as
//! the data plane's QoS engine calls it (the bounds check, the policy's decision, the counters), with a fast RNG (xoshiro256++) and a Zipf-like mix of 200 flows.
//!
//! ZL-RED runs with the occurrence table at M = 100, 1000, 10000 (targets: <= 25 ns per
//! decision at M = 1000, flat in M) and with the O(M) scan at M = 1000 (the paper's rejected
//! baseline, expected >= 50x slower). Queues are held in each policy's probabilistic region so
//! every decision draws and computes the full probability. Results: docs/performance/zl-aqm.md.
//!
//! `ZL_ROUNDS=1 cargo bench -p zlrouter --bench aqm` skips criterion and times the ZL-RED rows
//! (and `observe` alone) over 400 short rounds of 20 000 decisions (500 for the scan), printing
//! the minimum, 10th percentile and median per decision: on a machine shared with other work,
//! the rounds nobody interrupted give the idle machine's figure, where criterion's mean over
//! seconds-long samples does not.

use std::hint::black_box;
use std::time::Instant;

use criterion::{criterion_group, BenchmarkId, Criterion};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use zl_aqm::{
    Admission, AqmParams, AqmPolicy, Arrival, BuildContext, Color, Ecn, FlowId, Nanos,
    NonlinearRedParams, PacketMeta, PriorityEcnRedParams, QueueView, RedParams, SojournParams,
    SredParams, TailDropParams, ZlRedParams,
};
use zl_zombie::{OccurrenceMode, ZombieList, ZombieParams};

const FLOWS: usize = 200;
const MIX: usize = 4096;
const CAPACITY: u32 = 1000;

/// 4096 packets from 200 flows with Zipf(1) popularity, mixed ECN, priorities and colors.
fn packet_mix() -> Vec<PacketMeta> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(42);
    let weights: Vec<f64> = (1..=FLOWS).map(|k| 1.0 / k as f64).collect();
    let total: f64 = weights.iter().sum();
    (0..MIX)
        .map(|_| {
            let mut x = rng.random::<f64>() * total;
            let mut flow = FLOWS - 1;
            for (i, w) in weights.iter().enumerate() {
                if x < *w {
                    flow = i;
                    break;
                }
                x -= w;
            }
            PacketMeta {
                len: if rng.random_bool(0.3) { 64 } else { 1500 },
                flow: FlowId(0x9e37_79b9_7f4a_7c15u64.wrapping_mul(flow as u64 + 1)),
                ecn: if rng.random_bool(0.5) {
                    Ecn::Ect0
                } else {
                    Ecn::NotEct
                },
                has_cc_ext: false,
                priority: rng.random_range(9..=13),
                weight: 1,
                color: Color::ALL[rng.random_range(0..3)],
                src_host: flow as u16,
                dst_host: 0,
            }
        })
        .collect()
}

fn queue(len_packets: u32, now: Nanos) -> QueueView {
    QueueView {
        len_packets,
        len_bytes: len_packets as u64 * 1000,
        capacity_packets: CAPACITY,
        capacity_bytes: u64::MAX,
        head_enqueued_at: Some(now - Nanos::from_millis(12)),
        idle_since: None,
    }
}

/// Builds the policy and puts it at a steady state in its probabilistic region.
fn policy(
    params: &AqmParams,
    warm: usize,
    pkts: &[PacketMeta],
    q: &QueueView,
) -> Admission<AqmPolicy> {
    let ctx = BuildContext::new(10_000_000_000, CAPACITY);
    let mut p = Admission::new(params.build(&ctx).expect("valid bench params"));
    match p.policy_mut() {
        AqmPolicy::Red(r) => r.set_avg(10.0),
        AqmPolicy::PriorityEcnRed(r) => r.red_mut().set_avg(12_000.0),
        AqmPolicy::NonlinearRed(r) => r.set_avg(60.0),
        AqmPolicy::Sojourn(s) => s.set_avg_time_ms(12.0),
        _ => {}
    }
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
    for i in 0..warm {
        p.admit(&Arrival::new(Nanos(i as u64), q, &pkts[i % MIX]), &mut rng);
    }
    p
}

fn bench_one(c: &mut Criterion, group: &str, id: BenchmarkId, params: AqmParams, q_len: u32) {
    let pkts = packet_mix();
    let now = Nanos::from_secs(1);
    let q = queue(q_len, now);
    let warm = match &params {
        AqmParams::Sred(p) => 20 * p.zombie.m,
        AqmParams::ZlRed(p) => 20 * p.zombie.m,
        _ => 10_000,
    };
    let mut p = policy(&params, warm, &pkts, &q);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
    let mut i = 0usize;
    c.benchmark_group(group).bench_function(id, |b| {
        b.iter(|| {
            i = (i + 1) & (MIX - 1);
            black_box(p.admit(&Arrival::new(now, black_box(&q), &pkts[i]), &mut rng))
        })
    });
}

fn zlred(m: usize, occurrence: OccurrenceMode) -> AqmParams {
    AqmParams::ZlRed(ZlRedParams {
        zombie: ZombieParams {
            m,
            occurrence,
            ..ZombieParams::default()
        },
        ..ZlRedParams::default()
    })
}

fn policies(c: &mut Criterion) {
    let cases: [(&str, AqmParams, u32); 7] = [
        (
            "tail-drop",
            AqmParams::TailDrop(TailDropParams::default()),
            10,
        ),
        ("red", AqmParams::Red(RedParams::default()), 10),
        ("sred", AqmParams::Sred(SredParams::default()), 400),
        ("zl-red", zlred(1000, OccurrenceMode::Table), 400),
        (
            "priority-ecn-red",
            AqmParams::PriorityEcnRed(PriorityEcnRedParams::default()),
            12,
        ),
        (
            "nonlinear-red",
            AqmParams::NonlinearRed(NonlinearRedParams::default()),
            60,
        ),
        ("sojourn", AqmParams::Sojourn(SojournParams::default()), 5),
    ];
    for (name, params, q) in cases {
        bench_one(
            c,
            "aqm_decision",
            BenchmarkId::from_parameter(name),
            params,
            q,
        );
    }
}

fn zlred_scaling(c: &mut Criterion) {
    for m in [100, 1000, 10_000] {
        bench_one(
            c,
            "zlred_table",
            BenchmarkId::from_parameter(m),
            zlred(m, OccurrenceMode::Table),
            400,
        );
    }
    // The Zombie List's share of a ZL-RED decision: `observe` alone, same mix, M = 1000.
    let pkts = packet_mix();
    let list = ZombieList::new(ZombieParams::default().validate().expect("valid"));
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
    for i in 0..20_000 {
        list.observe(pkts[i % MIX].flow, Nanos(i as u64), &mut rng);
    }
    let mut i = 0usize;
    c.benchmark_group("zombie_observe")
        .bench_function(BenchmarkId::from_parameter(1000), |b| {
            b.iter(|| {
                i = (i + 1) & (MIX - 1);
                black_box(list.observe(pkts[i].flow, Nanos(1), &mut rng))
            })
        });
    bench_one(
        c,
        "zlred_scan",
        BenchmarkId::from_parameter(1000),
        zlred(1000, OccurrenceMode::Scan),
        400,
    );
}

/// Min, p10 and median ns per call of `f` over 400 rounds of `per` calls.
fn rounds(name: &str, per: usize, mut f: impl FnMut()) {
    let mut ns: Vec<f64> = (0..400)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..per {
                f();
            }
            t.elapsed().as_nanos() as f64 / per as f64
        })
        .collect();
    ns.sort_by(f64::total_cmp);
    println!(
        "{name:<20} min {:8.2}  p10 {:8.2}  median {:8.2} ns",
        ns[0],
        ns[ns.len() / 10],
        ns[ns.len() / 2]
    );
}

/// The `ZL_ROUNDS` mode (module doc): the same setups as the criterion rows.
fn zlred_rounds() {
    let pkts = packet_mix();
    let now = Nanos::from_secs(1);
    let q = queue(400, now);
    let cases = [
        ("zlred_table/100", 100, OccurrenceMode::Table, 20_000),
        ("zlred_table/1000", 1000, OccurrenceMode::Table, 20_000),
        ("zlred_table/10000", 10_000, OccurrenceMode::Table, 20_000),
        ("zlred_scan/1000", 1000, OccurrenceMode::Scan, 500),
    ];
    for (name, m, mode, per) in cases {
        let mut p = policy(&zlred(m, mode), 20 * m, &pkts, &q);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
        let mut i = 0usize;
        rounds(name, per, || {
            i = (i + 1) & (MIX - 1);
            black_box(p.admit(&Arrival::new(now, black_box(&q), &pkts[i]), &mut rng));
        });
    }
    let list = ZombieList::new(ZombieParams::default().validate().expect("valid"));
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(9);
    for i in 0..20_000 {
        list.observe(pkts[i % MIX].flow, Nanos(i as u64), &mut rng);
    }
    let mut i = 0usize;
    rounds("zombie_observe/1000", 20_000, || {
        i = (i + 1) & (MIX - 1);
        black_box(list.observe(pkts[i].flow, Nanos(1), &mut rng));
    });
}

criterion_group!(benches, policies, zlred_scaling);

fn main() {
    if std::env::var_os("ZL_ROUNDS").is_some() {
        zlred_rounds();
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
