//! Many threads hammering one list, then the invariants of spec/01 §4 at quiescence.

use std::sync::Barrier;
use std::thread;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use zl_zombie::{FlowId, Nanos, ZombieList, ZombieParams};

/// `threads` threads each make `ops` observations of skewed traffic over about
/// `3 * m` flows (heavy flows give hits, the tail gives overwrites and table churn).
fn hammer(m: usize, threads: u64, ops: u64) -> ZombieList {
    let cfg = ZombieParams {
        m,
        ..ZombieParams::default()
    }
    .validate()
    .unwrap();
    let list = ZombieList::new(cfg);
    let k = 3 * m as u64;
    let start = Barrier::new(threads as usize);
    thread::scope(|s| {
        for t in 0..threads {
            let (list, start) = (&list, &start);
            s.spawn(move || {
                start.wait();
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(t);
                for i in 0..ops {
                    let r: u64 = rng.random_range(0..k * k);
                    list.observe(FlowId(r.isqrt()), Nanos(i), &mut rng);
                }
            });
        }
    });
    list
}

#[test]
fn four_threads_m100() {
    let list = hammer(100, 4, 200_000);
    list.check_invariants().unwrap();
    assert_eq!(list.table_full_events(), 0);
    assert_eq!(list.zombies().len(), 100);
}

#[test]
fn four_threads_m1000() {
    let list = hammer(1000, 4, 200_000);
    list.check_invariants().unwrap();
    assert_eq!(list.table_full_events(), 0);
    assert_eq!(list.zombies().len(), 1000);
    let p = list.hit_frequency();
    assert!((0.0..=1.0).contains(&p), "P(t) = {p}");
}

/// Maximum contention: every thread draws the same one or two zombies, and the 3- or
/// 6-entry table is reused constantly.
#[test]
fn four_threads_tiny_lists() {
    for m in [1, 2] {
        let list = hammer(m, 4, 50_000);
        list.check_invariants().unwrap();
    }
}

/// The same with bursts of 32 through `observe_batch`.
#[test]
fn four_threads_batches_m1000() {
    let cfg = ZombieParams::default().validate().unwrap();
    let list = ZombieList::new(cfg);
    let start = Barrier::new(4);
    thread::scope(|s| {
        for t in 0..4u64 {
            let (list, start) = (&list, &start);
            s.spawn(move || {
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(t);
                let blank = zl_zombie::Observation {
                    hit: false,
                    p: 0.0,
                    occurrence: 0,
                    total: 0,
                };
                let mut out = [blank; 32];
                start.wait();
                for i in 0..5_000u64 {
                    let flows: Vec<FlowId> = (0..32)
                        .map(|_| FlowId(rng.random_range(0..9_000_000u64).isqrt()))
                        .collect();
                    list.observe_batch(&flows, Nanos(i), &mut rng, &mut out);
                    assert!(out.iter().all(|o| (0.0..=1.0).contains(&o.p)));
                }
            });
        }
    });
    list.check_invariants().unwrap();
    assert_eq!(list.table_full_events(), 0);
}
