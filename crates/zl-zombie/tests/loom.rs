//! Loom models of concurrent `observe` (run with
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test -p zl-zombie --release --test loom`).
//!
//! Two threads on a tiny list; loom explores their interleavings (preemption bound 3, 2 for
//! the burst model) and every execution must end with the invariants of
//! docs/algorithms/zombie-list.md intact.
#![cfg(loom)]

use loom::sync::Arc;
use loom::thread;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use zl_zombie::{FlowId, Nanos, Zombie, ZombieList, ZombieParams};

fn model(f: impl Fn() + Sync + Send + 'static) {
    model_bounded(3, f);
}

fn model_bounded(preemptions: usize, f: impl Fn() + Sync + Send + 'static) {
    let mut builder = loom::model::Builder::new();
    builder.preemption_bound = Some(preemptions);
    builder.check(f);
}

fn list(m: usize, p_swap: f64, zombies: &[(u64, u64)]) -> ZombieList {
    let cfg = ZombieParams {
        m,
        p_swap,
        ..ZombieParams::default()
    }
    .validate()
    .unwrap();
    let zombies: Vec<Zombie> = zombies
        .iter()
        .map(|&(flow, count)| Zombie {
            flow: FlowId(flow),
            count,
            stamp: Nanos::ZERO,
        })
        .collect();
    ZombieList::from_zombies(cfg, &zombies).unwrap()
}

/// Runs one observe per (flow, seed) on its own thread, then checks the invariants.
fn run(list: ZombieList, ops: &'static [(u64, u64)]) {
    let list = Arc::new(list);
    let handles: Vec<_> = ops
        .iter()
        .map(|&(flow, seed)| {
            let list = list.clone();
            thread::spawn(move || {
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
                list.observe(FlowId(flow), Nanos(1), &mut rng);
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    list.check_invariants().unwrap();
}

/// M = 1, full with flow 1: one thread hits, the other overwrites (p_swap = 1).
#[test]
fn hit_races_overwrite_m1() {
    model(|| run(list(1, 1.0, &[(1, 0)]), &[(1, 1), (2, 2)]));
}

/// M = 1: two different new flows overwrite the same zombie at once.
#[test]
fn two_overwrites_m1() {
    model(|| run(list(1, 1.0, &[(1, 3)]), &[(2, 1), (3, 2)]));
}

/// M = 1: the same new flow inserted by both threads (concurrent claim of one key).
#[test]
fn same_new_flow_twice_m1() {
    model(|| run(list(1, 1.0, &[(1, 0)]), &[(2, 1), (2, 2)]));
}

/// M = 2, empty: both threads append (concurrent claims of `len` and of table entries).
#[test]
fn concurrent_appends_m2() {
    model(|| run(list(2, 1.0, &[]), &[(1, 1), (1, 2)]));
}

/// M = 2, one zombie present: an append races an observe that sees the list still filling
/// or already full.
#[test]
fn append_races_compare_m2() {
    model(|| run(list(2, 1.0, &[(1, 0)]), &[(2, 1), (3, 5)]));
}

/// M = 2, full: hits on both zombies of one flow race an overwrite of the other flow.
#[test]
fn hits_race_overwrite_m2() {
    model(|| run(list(2, 1.0, &[(1, 2), (2, 0)]), &[(1, 3), (3, 4)]));
}

/// The flow-id hash of `table.rs` (bucket = low bits).
fn mix(x: u64) -> u64 {
    zl_zombie::flow_hash(zl_zombie::FlowId(x))
}

/// The first `n` flow ids whose first probe is bucket 0 of a 2-bucket table (M = 2).
fn bucket0_flows(n: usize) -> Vec<u64> {
    (1u64..).filter(|&f| mix(f) & 1 == 0).take(n).collect()
}

/// M = 2, both zombies' flows and both new flows hash to bucket 0 (3 entries): the second
/// claim finds bucket 0 full and spills to bucket 1, past a frozen or live entry, while the
/// two overwrites release the old flows' entries.
#[test]
fn overwrites_spill_past_a_full_bucket_m2() {
    let f = bucket0_flows(4);
    let ops: &'static [(u64, u64)] = Box::leak(vec![(f[2], 1), (f[3], 2)].into_boxed_slice());
    let zombies = [(f[0], 1), (f[1], 0)];
    model(move || run(list(2, 1.0, &zombies), ops));
}

/// M = 1: two threads each observe a burst of two (flows 1 then 2, and 2 then 3) with
/// `observe_batch`: list updates interleave, P(t) is published once per burst. (Preemption
/// bound 2: with 3 the model takes minutes.)
#[test]
fn two_batches_m1() {
    model_bounded(2, || {
        let list = Arc::new(list(1, 1.0, &[(1, 0)]));
        let handles: Vec<_> = [([1u64, 2], 1u64), ([2, 3], 2)]
            .into_iter()
            .map(|(flows, seed)| {
                let list = list.clone();
                thread::spawn(move || {
                    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
                    let blank = zl_zombie::Observation {
                        hit: false,
                        p: 0.0,
                        occurrence: 0,
                        total: 0,
                    };
                    let mut out = [blank; 2];
                    let flows = flows.map(FlowId);
                    assert_eq!(list.observe_batch(&flows, Nanos(1), &mut rng, &mut out), 2);
                    assert!(out.iter().all(|o| (0.0..=1.0).contains(&o.p)));
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        list.check_invariants().unwrap();
    });
}

/// `occurrence` never adds a recycled entry's old count to its new flow. M = 1 (one bucket of
/// three entries), flow 1 holds its entry with F = 6; the writer overwrites it with flow 2
/// (flow 1's entry goes dead), then flow 2 with flow 3, which reuses flow 1's dead entry. A
/// reader that loaded that entry's state while it still counted flow 1's 6, and its key after
/// flow 3 took it, must not report F(3) = 6: F(3) is 0 or 1 at every instant. (Without the
/// generation recheck in `occurrence`, loom finds F(3) = 6. The reader runs on its own loom
/// thread: work on the model's main thread before a join was not interleaved.)
#[test]
fn occurrence_never_counts_a_recycled_entry() {
    model(|| {
        let list = Arc::new(list(1, 1.0, &[(1, 5)]));
        let writer = {
            let list = list.clone();
            thread::spawn(move || {
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
                list.observe(FlowId(2), Nanos(1), &mut rng);
                list.observe(FlowId(3), Nanos(2), &mut rng);
            })
        };
        let reader = {
            let list = list.clone();
            thread::spawn(move || list.occurrence(FlowId(3)))
        };
        let f = reader.join().unwrap();
        assert!(f <= 1, "F(3) = {f}");
        writer.join().unwrap();
        assert_eq!(list.occurrence(FlowId(3)), 1);
        list.check_invariants().unwrap();
    });
}
