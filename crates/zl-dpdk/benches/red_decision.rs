//! ZL-RED's decision against DPDK's own RED decision (`rte_red_enqueue`, librte_sched, through
//! the `zl-dpdk-sys` binding: one call into the C shim per decision), in one criterion run, so
//! that their ratio is measured on the same machine in the same minutes (this machine's speed
//! changes ~2x from day to day, the ratio does not).
//!
//! Rows of the group `red_decision`:
//! - `zl-red`: one ZL-RED arrival through `Admission<AqmPolicy>` as the QoS engine calls it,
//!   observing its own Zombie List (M = 1000, occurrence table), the setup of
//!   `benches/aqm.rs`'s `zlred_table/1000`: 200 flows of Zipf popularity, queue held at 400 of
//!   1000 packets (the probabilistic region: every decision computes the full probability);
//! - `zl-red_on_observation`: the same decision on an observation of the list made upstream
//!   (the data plane's path: the receive side observes the egress port's list, the egress
//!   decides), the observations precomputed, so the row is ZL-RED's equations and draw alone;
//! - `zl-red_burst`: the list observed and the decisions made a burst of 32 arrivals at a time,
//!   stage by stage, as the data plane's vector stages do: the burst through
//!   `ZombieList::observe_batch` (every flow's first bucket loaded up front, P(t) stored once),
//!   then each arrival decided on its observation, on the same policy and list as `zl-red`.
//!   One criterion iteration is one burst (its throughput is in decisions); the row's report
//!   counts decisions;
//! - `rte_red`: `rte_red_enqueue` on a non-empty queue of 200 packets with `w_q = 2^-9`,
//!   `th_min = 5`, `th_max = 333` (ZL-RED's `B/3`), `1/p_max = 7` (ZL-RED's 0.15), so its
//!   average sits in the region where it computes its probability and tests its random number.
//!
//! Each row prints its decisions and drop ratio after the run (every row must drop: a
//! decision that never drops would skip its probability). Run:
//! `cargo bench -p zl-dpdk --features dpdk --bench red_decision -- --warm-up-time 1
//! --measurement-time 3`; results in docs/performance/dataplane.md and docs/PERFORMANCE.md,
//! the burst row's in docs/performance/zl-zombie.md.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use zl_aqm::{
    Admission, AqmParams, AqmPolicy, Arrival, BuildContext, Color, Ecn, FlowId, Nanos, PacketMeta,
    QueueView, Verdict, ZlRedParams,
};
use zl_dpdk_sys as sys;
use zl_zombie::Observation;

const FLOWS: usize = 200;
const MIX: usize = 4096;
const CAPACITY: u32 = 1000;
/// Arrivals per burst in `zl-red_burst` (the data plane's receive burst).
const BURST: usize = 32;

/// 4096 packets from 200 flows of Zipf(1) popularity (as `benches/aqm.rs`).
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
                ecn: Ecn::NotEct,
                has_cc_ext: false,
                priority: 8,
                weight: 0,
                color: Color::Green,
                src_host: flow as u16,
                dst_host: 0,
            }
        })
        .collect()
}

fn queue(len_packets: u32) -> QueueView {
    QueueView {
        len_packets,
        len_bytes: len_packets as u64 * 1000,
        capacity_packets: CAPACITY,
        capacity_bytes: u64::MAX,
        head_enqueued_at: None,
        idle_since: None,
    }
}

/// ZL-RED with the paper's defaults (M = 1000, occurrence table), warmed on the mix.
fn zlred(pkts: &[PacketMeta], q: &QueueView) -> (Admission<AqmPolicy>, Xoshiro256PlusPlus) {
    let ctx = BuildContext::new(10_000_000_000, CAPACITY);
    let mut p = Admission::new(
        AqmParams::ZlRed(ZlRedParams::default())
            .build(&ctx)
            .expect("valid ZL-RED parameters"),
    );
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
    for i in 0..20_000 {
        p.admit(&Arrival::new(Nanos(i as u64), q, &pkts[i % MIX]), &mut rng);
    }
    (p, rng)
}

fn drops(v: Verdict) -> u64 {
    u64::from(!v.admits())
}

/// A row's decisions and drop ratio (the decisions also divide a callgrind count of the run).
fn report(row: &str, n: u64, dropped: u64) {
    eprintln!(
        "{row}: {n} decisions, drop ratio {:.3}",
        dropped as f64 / n.max(1) as f64
    );
}

fn red_decision(c: &mut Criterion) {
    let pkts = packet_mix();
    let now = Nanos::from_secs(1);
    let q = queue(400);
    let mut g = c.benchmark_group("red_decision");

    let (mut p, mut rng) = zlred(&pkts, &q);
    let (mut i, mut n, mut dropped) = (0usize, 0u64, 0u64);
    g.bench_function("zl-red", |b| {
        b.iter(|| {
            i = (i + 1) & (MIX - 1);
            let v = p.admit(&Arrival::new(now, black_box(&q), &pkts[i]), &mut rng);
            n += 1;
            dropped += drops(v);
            black_box(v)
        })
    });
    report("zl-red", n, dropped);

    // Observations of the policy's own list, made before the timing.
    let (mut p, mut rng) = zlred(&pkts, &q);
    let list = match p.policy_mut() {
        AqmPolicy::ZlRed(z) => std::sync::Arc::clone(z.zombie_list()),
        _ => unreachable!("built as ZL-RED"),
    };
    let obs: Vec<Observation> = pkts
        .iter()
        .map(|pkt| list.observe(pkt.flow, now, &mut rng))
        .collect();
    let (mut i, mut n, mut dropped) = (0usize, 0u64, 0u64);
    g.bench_function("zl-red_on_observation", |b| {
        b.iter(|| {
            i = (i + 1) & (MIX - 1);
            let a = Arrival::new(now, black_box(&q), &pkts[i]).observed(&obs[i]);
            let v = p.admit(&a, &mut rng);
            n += 1;
            dropped += drops(v);
            black_box(v)
        })
    });
    report("zl-red_on_observation", n, dropped);

    let mut cfg = sys::rte_red_config::default();
    let mut red = sys::rte_red::default();
    // SAFETY: both point to live, writable structs of the types the functions take.
    let (rc_cfg, rc_red) = unsafe {
        (
            sys::rte_red_config_init(&mut cfg, 9, 5, 333, 7),
            sys::rte_red_rt_data_init(&mut red),
        )
    };
    assert_eq!((rc_cfg, rc_red), (0, 0), "rte_red setup");
    let rte_q: u32 = 200;
    for _ in 0..20_000 {
        // SAFETY: `cfg` was initialised by rte_red_config_init, `red` by rte_red_rt_data_init.
        unsafe { sys::zl_rte_red_enqueue(&cfg, &mut red, rte_q, 0) };
    }
    let (mut n, mut dropped) = (0u64, 0u64);
    g.bench_function("rte_red", |b| {
        b.iter(|| {
            // SAFETY: as above.
            let v = unsafe { sys::zl_rte_red_enqueue(&cfg, &mut red, black_box(rte_q), 0) };
            n += 1;
            dropped += u64::from(v != 0);
            black_box(v)
        })
    });
    report("rte_red", n, dropped);

    // Last, so that its throughput (decisions per burst) applies to this row alone.
    let (mut p, mut rng) = zlred(&pkts, &q);
    let list = match p.policy_mut() {
        AqmPolicy::ZlRed(z) => std::sync::Arc::clone(z.zombie_list()),
        _ => unreachable!("built as ZL-RED"),
    };
    let flows: Vec<FlowId> = pkts.iter().map(|pkt| pkt.flow).collect();
    let blank = Observation {
        hit: false,
        p: 0.0,
        occurrence: 0,
        total: 0,
    };
    let mut obs = [blank; BURST];
    let (mut at, mut n, mut dropped) = (0usize, 0u64, 0u64);
    g.throughput(Throughput::Elements(BURST as u64));
    g.bench_function("zl-red_burst", |b| {
        b.iter(|| {
            at = (at + BURST) & (MIX - 1);
            let burst = &pkts[at..at + BURST];
            let k = list.observe_batch(&flows[at..at + BURST], now, &mut rng, &mut obs);
            for (pkt, o) in burst[..k].iter().zip(&obs) {
                let a = Arrival::new(now, black_box(&q), pkt).observed(o);
                let v = p.admit(&a, &mut rng);
                dropped += drops(v);
                black_box(v);
            }
            n += k as u64;
        })
    });
    report("zl-red_burst", n, dropped);
    g.finish();
}

criterion_group!(benches, red_decision);
criterion_main!(benches);
