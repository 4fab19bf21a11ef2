//! Many threads hammering one list, then the invariants of docs/algorithms/zombie-list.md at
//! quiescence.

use std::sync::Barrier;
use std::thread;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use zl_zombie::{FlowId, Nanos, ZombieList, ZombieParams};

/// Operations are divided by this under miri (`scripts/miri-ci.sh`), which interprets every
/// step: a few hundred interleaved updates per thread there, the full counts natively.
const SCALE: u64 = if cfg!(miri) { 500 } else { 1 };

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
    let list = hammer(100, 4, 200_000 / SCALE);
    list.check_invariants().unwrap();
    assert_eq!(list.table_full_events(), 0);
    assert_eq!(list.zombies().len(), 100);
}

#[test]
fn four_threads_m1000() {
    let list = hammer(1000, 4, 200_000 / SCALE);
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
        let list = hammer(m, 4, 50_000 / SCALE);
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
                for i in 0..5_000u64 / SCALE {
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

/// Quantifies the P(t) steps two threads lose to each other (decided in `update_p`: load +
/// store, no CAS, one P(t) per thread). One zombie of flow 1, every arrival a hit,
/// alpha = 1e-6: sequentially `P = 1 - (1 - alpha)^k` after k steps, so P gives the number of
/// steps that survived. Each thread normally has its own shard (then each keeps all K of its
/// steps); two threads whose numbers collide share one, and then lose steps to each other.
/// No step may be counted twice (kept <= 2K); the loss is printed, not asserted (it depends
/// on the shards and on how often the threads overlap). T and F lose nothing.
#[test]
fn p_steps_lost_under_contention_are_counted() {
    let cfg = ZombieParams {
        m: 1,
        alpha: Some(1e-6),
        ..ZombieParams::default()
    }
    .validate()
    .unwrap();
    let z = zl_zombie::Zombie {
        flow: FlowId(1),
        count: 0,
        stamp: Nanos::ZERO,
    };
    let list = ZombieList::from_zombies(cfg, &[z]).unwrap();
    let per_thread = 200_000u64 / SCALE;
    let start = Barrier::new(2);
    thread::scope(|s| {
        for t in 0..2u64 {
            let (list, start) = (&list, &start);
            s.spawn(move || {
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(t);
                start.wait();
                for i in 0..per_thread {
                    assert!(list.observe(FlowId(1), Nanos(i), &mut rng).hit);
                }
            });
        }
    });
    list.check_invariants().unwrap();
    let kept = (1.0 - list.hit_frequency()).ln() / (1.0 - 1e-6f64).ln();
    let lost = 1.0 - kept / (2 * per_thread) as f64;
    println!(
        "P(t) steps kept {kept:.0} of {}, lost {:.2} %",
        2 * per_thread,
        lost * 100.0
    );
    assert!(kept <= (2 * per_thread) as f64 + 0.5, "kept {kept}");
    assert!(kept >= per_thread as f64 * 0.01, "kept {kept}");
}

/// P(t) per thread (decided in `update_p`): a thread joining a running list continues from the
/// list's P(t), not from 0; each thread's observations follow its own arrivals' hits; and
/// `hit_frequency` is the mean of the shards in use.
#[test]
fn p_per_thread_starts_from_the_lists_and_follows_its_own_hits() {
    let cfg = ZombieParams {
        m: 1,
        alpha: Some(0.01),
        ..ZombieParams::default()
    }
    .validate()
    .unwrap();
    let z = zl_zombie::Zombie {
        flow: FlowId(1),
        count: 0,
        stamp: Nanos::ZERO,
    };
    let list = ZombieList::from_zombies(cfg, &[z]).unwrap();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
    // SRED's EWMA step, written as the crate computes it.
    let ewma = |p: f64, hit: f64| (1.0 - 0.01) * p + 0.01 * hit;
    // This thread: 100 hits.
    let mut p = 0.0;
    for i in 0..100 {
        let o = list.observe(FlowId(1), Nanos(i), &mut rng);
        p = ewma(p, 1.0);
        assert!(o.hit);
        assert_eq!(o.p, p);
    }
    assert_eq!(list.hit_frequency(), p, "one thread: its own P(t) exactly");
    // Another thread, all misses.
    let (first, last, misses) = thread::scope(|s| {
        s.spawn(|| {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(8);
            let mut first = None;
            let mut last = 0.0;
            let mut misses = 0;
            for i in 0..200u64 {
                // A new flow on every arrival: never a hit.
                let o = list.observe(FlowId(1000 + i), Nanos(i), &mut rng);
                assert!(!o.hit);
                first.get_or_insert(o.p);
                last = o.p;
                misses += 1;
            }
            (first.unwrap(), last, misses)
        })
        .join()
        .unwrap()
    });
    assert_eq!(
        first,
        ewma(p, 0.0),
        "the joining thread starts from the list's P(t)"
    );
    let expect = p * 0.99f64.powi(misses);
    assert!((last - expect).abs() < 1e-12, "{last} vs {expect}");
    // Two shards in use (or, if the two threads' numbers collide, one holding `last`).
    let mean = (p + last) / 2.0;
    let h = list.hit_frequency();
    assert!(
        h == mean || h == last,
        "hit_frequency {h}: mean {mean}, last {last}"
    );
    list.check_invariants().unwrap();
}
