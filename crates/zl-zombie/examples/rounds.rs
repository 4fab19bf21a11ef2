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
//! - `rounds mt THREADS BURST private`: the same with one list per thread (nothing shared):
//!   the scaling this machine allows at all, the control for the shared runs.
//!
//! The host moves this VM's two vCPUs between nearby and distant physical cores from one
//! second to the next (measured: a cache line's round trip between the two threads is 45-70 ns
//! or 330-480 ns, and two threads sharing one list take 2.6x the CPU time per observation in
//! the second case, private lists no more). So before each round threads 0 and 1 pass a cache
//! line back and forth 8 times, and with `THREADS >= 2` a round counts only if that round trip
//! took at most [`NEAR_NS`]; the report gives the round trips' spread and how many rounds
//! each filter dropped.
//!
//! Traffic as in `benches/zombie.rs`: flow ids `isqrt(uniform(0..(3M)^2))` (3M flows, skewed),
//! list warmed with 4 M arrivals. Run: `cargo run -p zl-zombie --release --example rounds -- mt 2`.
//! Results: docs/performance/zl-zombie.md.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use zl_zombie::{FlowId, Nanos, Observation, ZombieList, ZombieParams};

const TRACE: usize = 1 << 16;
const PER_ROUND: usize = 2000;
const ROUNDS: usize = 2000;
/// The longest core-to-core round trip (ns) of a round that counts: nearby cores measure
/// 45-70 ns, distant ones 330-480 ns.
const NEAR_NS: f64 = 150.0;
/// Round trips measured before each round.
const PINGS: u64 = 8;

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

/// Threads 0 and 1 pass a counter back and forth [`PINGS`] times (round `r`'s values);
/// returns the mean round trip in ns as thread 0 measured it (0 on other threads).
fn ping(ball: &AtomicU64, t: usize, r: usize) -> f64 {
    let base = r as u64 * 2 * PINGS;
    let start = Instant::now();
    for k in 0..PINGS {
        let (send, wait) = if t == 0 {
            (base + 2 * k + 1, base + 2 * k + 2)
        } else {
            (base + 2 * k + 2, base + 2 * k + 1)
        };
        if t == 0 {
            ball.store(send, Ordering::Release);
        }
        while ball.load(Ordering::Acquire) != wait {
            std::hint::spin_loop();
        }
        if t == 1 {
            ball.store(send, Ordering::Release);
        }
    }
    if t == 0 {
        start.elapsed().as_nanos() as f64 / PINGS as f64
    } else {
        0.0
    }
}

fn mt(threads: usize, burst: usize, private: bool) {
    let lists: Vec<ZombieList> = (0..if private { threads } else { 1 })
        .map(|_| warmed(1000))
        .collect();
    let flows = trace(1000, 5);
    let arrived = AtomicUsize::new(0);
    let ball = AtomicU64::new(0);
    // Per thread, per round: (start, end, CPU ns, round trip ns before it).
    let runs: Vec<Vec<(Instant, Instant, u64, f64)>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let list = &lists[if private { t } else { 0 }];
                let (flows, arrived, ball) = (&flows, &arrived, &ball);
                s.spawn(move || {
                    let mut rng = Xoshiro256PlusPlus::seed_from_u64(10 + t as u64);
                    let mut at = t * TRACE / threads;
                    (0..ROUNDS)
                        .map(|r| {
                            arrived.fetch_add(1, Ordering::AcqRel);
                            while arrived.load(Ordering::Acquire) < (r + 1) * threads {
                                std::hint::spin_loop();
                            }
                            let rt = if threads >= 2 && t < 2 {
                                ping(ball, t, r)
                            } else {
                                0.0
                            };
                            let c = cpu_ns();
                            let t0 = Instant::now();
                            round(list, flows, &mut at, burst, &mut rng);
                            let t1 = Instant::now();
                            (t0, t1, cpu_ns() - c, rt)
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
    let (mut wall, mut cpu, mut trips) = (Vec::new(), Vec::new(), Vec::new());
    let (mut descheduled, mut far) = (0, 0);
    for r in 0..ROUNDS {
        let t0 = runs.iter().map(|v| v[r].0).min().expect("threads");
        let t1 = runs.iter().map(|v| v[r].1).max().expect("threads");
        let w = (t1 - t0).as_nanos() as f64;
        let c: f64 = runs.iter().map(|v| v[r].2 as f64).sum();
        let rt = runs[0][r].3;
        trips.push(rt);
        if c < 0.95 * threads as f64 * w {
            descheduled += 1;
        } else if threads >= 2 && rt > NEAR_NS {
            far += 1;
        } else {
            let obs = (threads * PER_ROUND) as f64;
            wall.push(w / obs);
            cpu.push(c / obs);
        }
    }
    let kind = if private { "private lists" } else { "one list" };
    println!(
        "threads {threads}, burst {burst}, {kind}: {} of {ROUNDS} rounds kept ({descheduled} not in parallel, {far} on distant cores); group wall / observation: {}; CPU / observation: {}",
        wall.len(),
        summary(wall),
        summary(cpu)
    );
    if threads >= 2 {
        trips.sort_by(f64::total_cmp);
        println!(
            "core-to-core round trip before each round: p10 {:.0} median {:.0} p90 {:.0} ns (rounds kept: <= {NEAR_NS} ns)",
            trips[ROUNDS / 10],
            trips[ROUNDS / 2],
            trips[ROUNDS * 9 / 10]
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg =
        |i: usize, default: usize| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(default);
    match args.first().map(String::as_str) {
        Some("mt") => mt(
            arg(1, 2).max(1),
            arg(2, 1),
            args.get(3).is_some_and(|a| a == "private"),
        ),
        _ => observe(arg(1, 1000)),
    }
}
