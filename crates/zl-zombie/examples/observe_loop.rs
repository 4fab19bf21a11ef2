//! A fixed observe workload for `perf stat` (cycles per observation are robust on a shared,
//! loaded machine, where wall-clock benchmarks are not):
//!
//! `perf stat -e task-clock target/release/examples/observe_loop <M> <table|scan> <ops> <threads> [burst] [private]`
//!
//! Traffic as in `benches/zombie.rs`: flow ids drawn from a skewed distribution over 3M flows.
//! The list is warmed with `ops` arrivals first, then every thread makes `ops / threads` more;
//! the program prints the counts so the measured phase can be separated from the warm-up by
//! running with `ops = 0` too. `burst > 1` uses `observe_batch` with bursts of that size.
//! `private` gives every thread a list of its own (a control with no shared state: what the
//! machine itself allows two threads to scale).

use std::sync::Barrier;
use std::thread;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use zl_zombie::{FlowId, Nanos, Observation, OccurrenceMode, ZombieList, ZombieParams};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize, default: &str| args.get(i).cloned().unwrap_or_else(|| default.into());
    let m: usize = arg(1, "1000").parse().expect("M");
    let occurrence = match arg(2, "table").as_str() {
        "scan" => OccurrenceMode::Scan,
        _ => OccurrenceMode::Table,
    };
    let ops: u64 = arg(3, "10000000").parse().expect("ops");
    let threads: u64 = arg(4, "1").parse().expect("threads");
    let burst: usize = arg(5, "1").parse().expect("burst");
    let private = arg(6, "shared") == "private";
    let cfg = ZombieParams {
        m,
        occurrence,
        ..ZombieParams::default()
    }
    .validate()
    .expect("valid parameters");
    let list = ZombieList::new(cfg);
    let k = 3 * m as u64;
    let mut trace_rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let flows: Vec<FlowId> = (0..1 << 16)
        .map(|_| FlowId(trace_rng.random_range(0..k * k).isqrt()))
        .collect();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
    for i in 0..if private { 0 } else { ops as usize } {
        list.observe(flows[i % flows.len()], Nanos(i as u64), &mut rng);
    }
    let own: Vec<ZombieList> = (0..threads).map(|_| ZombieList::new(cfg)).collect();
    if private {
        for l in &own {
            for i in 0..ops as usize {
                l.observe(flows[i % flows.len()], Nanos(i as u64), &mut rng);
            }
        }
    }
    let start = Barrier::new(threads as usize);
    let hits: u64 = thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let list = if private { &own[t as usize] } else { &list };
                let (flows, start) = (&flows, &start);
                s.spawn(move || {
                    let mut rng = Xoshiro256PlusPlus::seed_from_u64(10 + t);
                    start.wait();
                    let mut hits = 0;
                    let blank = Observation {
                        hit: false,
                        p: 0.0,
                        occurrence: 0,
                        total: 0,
                    };
                    let mut out = vec![blank; burst.max(1)];
                    let (mut i, n) = (0, (ops / threads) as usize);
                    while i < n {
                        let at = (i + t as usize * 7919) % flows.len();
                        if burst <= 1 {
                            hits += list.observe(flows[at], Nanos(i as u64), &mut rng).hit as u64;
                            i += 1;
                        } else {
                            let end = (at + burst).min(flows.len());
                            let done = list.observe_batch(
                                &flows[at..end],
                                Nanos(i as u64),
                                &mut rng,
                                &mut out,
                            );
                            hits += out[..done].iter().filter(|o| o.hit).count() as u64;
                            i += done;
                        }
                    }
                    hits
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("worker")).sum()
    });
    list.check_invariants().expect("invariants at quiescence");
    for l in &own {
        l.check_invariants().expect("invariants at quiescence");
    }
    println!(
        "M={m} {occurrence:?} ops={ops} threads={threads} burst={burst} hits={hits} P={:.5} T={}",
        list.hit_frequency(),
        list.total_occurrence()
    );
}
