//! Per-observation cost on a shared, loaded machine: many short rounds, keeping the rounds
//! nobody interrupted.
//!
//! Criterion's mean over seconds-long samples includes every time the scheduler took the
//! core away; on the project's 2-core VM under other builds that doubles figures and hides
//! whether two threads scale at all (both rarely run at once). Here each round is short
//! (2000 observations per thread, about 60 us), so many rounds run undisturbed:
//!
//! - `rounds observe [M]`: one thread; the minimum, 10th percentile and median of the
//!   per-observation time over 2000 rounds (the minimum and p10 match an idle machine's
//!   criterion figure within a few percent).
//! - `rounds mt THREADS [BURST]`: THREADS threads on one list (M = 1000), released together
//!   by a spin barrier each round; a round counts only if the threads' CPU time
//!   (`CLOCK_THREAD_CPUTIME_ID`) covers at least 95 % of THREADS times its wall time, i.e.
//!   they all ran in parallel throughout. Reports the group's wall time per observation over
//!   those rounds (2 threads scale 2x when it is half of one thread's) and the CPU time per
//!   observation of each thread (what contention adds). `BURST > 1` uses `observe_batch`.
//!
//! Traffic as in `benches/zombie.rs`: flow ids `isqrt(uniform(0..(3M)^2))` (3M flows, skewed),
//! list warmed with 4 M arrivals. Run: `cargo run -p zl-zombie --release --example rounds -- mt 2`.
//! Results: docs/performance/zl-zombie.md.

use std::hint::black_box;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use zl_zombie::{FlowId, Nanos, Observation, ZombieList, ZombieParams};

const TRACE: usize = 1 << 16;
const PER_ROUND: usize = 2000;
const ROUNDS: usize = 2000;

fn trace(m: usize, seed: u64) -> Vec<FlowId> {
    let k = 3 * m as u64;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    (0..TRACE)
        .map(|_| FlowId(rng.random_range(0..k * k).isqrt()))
        .collect()
}

fn warmed(m: usize) -> ZombieList {
    let cfg = ZombieParams {
        m,
        ..ZombieParams::default()
    }
    .validate()
    .expect("valid M");
    let list = ZombieList::new(cfg);
    let flows = trace(m, 1);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
    for i in 0..4_000_000 {
        list.observe(flows[i % TRACE], Nanos(i as u64), &mut rng);
    }
    list
}

/// This thread's CPU time in ns (`CLOCK_THREAD_CPUTIME_ID`; `/proc/thread-self/schedstat` is
/// only brought up to date at scheduler events, too coarse for 60 us rounds).
fn cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call, and
    // CLOCK_THREAD_CPUTIME_ID is a clock every Linux provides.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn summary(mut v: Vec<f64>) -> String {
    if v.is_empty() {
        return "no round".into();
    }
    v.sort_by(f64::total_cmp);
    format!(
        "min {:.2} p10 {:.2} median {:.2} ns",
        v[0],
        v[v.len() / 10],
        v[v.len() / 2]
    )
}

/// One round of `n` observations (or bursts) by one thread, starting at trace position `at`.
fn round(
    list: &ZombieList,
    flows: &[FlowId],
    at: &mut usize,
    burst: usize,
    rng: &mut Xoshiro256PlusPlus,
) {
    let blank = Observation {
        hit: false,
        p: 0.0,
        occurrence: 0,
        total: 0,
    };
    let mut out = [blank; 32];
    let mut i = 0;
    while i < PER_ROUND {
        if burst <= 1 {
            black_box(list.observe(flows[*at], Nanos(i as u64), rng));
            *at = (*at + 1) % TRACE;
            i += 1;
        } else {
            let end = (*at + burst.min(32)).min(TRACE);
            let n = list.observe_batch(&flows[*at..end], Nanos(i as u64), rng, &mut out);
            black_box(&out);
            *at = (*at + n) % TRACE;
            i += n;
        }
    }
}

fn observe(m: usize) {
    let list = warmed(m);
    let flows = trace(m, 3);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(4);
    let mut at = 0;
    let per_obs: Vec<f64> = (0..ROUNDS)
        .map(|_| {
            let t = Instant::now();
            round(&list, &flows, &mut at, 1, &mut rng);
            t.elapsed().as_nanos() as f64 / PER_ROUND as f64
        })
        .collect();
    println!("observe M = {m}: {}", summary(per_obs));
}

fn mt(threads: usize, burst: usize) {
    let list = warmed(1000);
    let flows = trace(1000, 5);
    let arrived = AtomicUsize::new(0);
    // Per thread, per round: (start, end, CPU ns).
    let runs: Vec<Vec<(Instant, Instant, u64)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let (list, flows, arrived) = (&list, &flows, &arrived);
                s.spawn(move || {
                    let mut rng = Xoshiro256PlusPlus::seed_from_u64(10 + t as u64);
                    let mut at = t * TRACE / threads;
                    (0..ROUNDS)
                        .map(|r| {
                            arrived.fetch_add(1, Ordering::AcqRel);
                            while arrived.load(Ordering::Acquire) < (r + 1) * threads {
                                std::hint::spin_loop();
                            }
                            let c = cpu_ns();
                            let t0 = Instant::now();
                            round(list, flows, &mut at, burst, &mut rng);
                            let t1 = Instant::now();
                            (t0, t1, cpu_ns() - c)
                        })
                        .collect()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("worker"))
            .collect()
    });
    let (mut wall, mut cpu) = (Vec::new(), Vec::new());
    for r in 0..ROUNDS {
        let t0 = runs.iter().map(|v| v[r].0).min().expect("threads");
        let t1 = runs.iter().map(|v| v[r].1).max().expect("threads");
        let w = (t1 - t0).as_nanos() as f64;
        let c: f64 = runs.iter().map(|v| v[r].2 as f64).sum();
        if c >= 0.95 * threads as f64 * w {
            let obs = (threads * PER_ROUND) as f64;
            wall.push(w / obs);
            cpu.push(c / obs);
        }
    }
    println!(
        "threads {threads}, burst {burst}: {} of {ROUNDS} rounds ran in parallel; group wall / observation: {}; CPU / observation: {}",
        wall.len(),
        summary(wall),
        summary(cpu)
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg =
        |i: usize, default: usize| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(default);
    match args.first().map(String::as_str) {
        Some("mt") => mt(arg(1, 2).max(1), arg(2, 1)),
        _ => observe(arg(1, 1000)),
    }
}
