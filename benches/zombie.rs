//! Per-packet cost of the `zl-zombie` Zombie List: `observe` (SRED steps 1-3 plus F and T)
//! with the occurrence table at M = 100, 1000, 10000 and with the O(M) scan at M = 1000, the
//! sequential `NaiveZombieList` at M = 1000, and the update rate of 1 and 2 threads
//! hammering one shared list, per packet (`observe`) and in bursts of 32 (`observe_batch`). Traffic: a fixed sequence of flow ids drawn from a skewed
//! distribution over 3M flows (heavy flows give hits, the tail gives overwrites and table
//! churn), replayed cyclically; the list is warmed with 20 M arrivals first.
//! Results: docs/performance/zl-zombie.md.

use std::hint::black_box;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Barrier;
use std::thread;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use zl_zombie::{
    FlowId, NaiveZombieList, Nanos, Observation, OccurrenceMode, ZombieList, ZombieParams,
};

const TRACE: usize = 1 << 16;

fn trace(m: usize, seed: u64) -> Vec<FlowId> {
    let k = 3 * m as u64;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    (0..TRACE)
        .map(|_| FlowId(rng.random_range(0..k * k).isqrt()))
        .collect()
}

fn warmed(m: usize, occurrence: OccurrenceMode) -> ZombieList {
    let cfg = ZombieParams {
        m,
        occurrence,
        ..ZombieParams::default()
    }
    .validate()
    .unwrap();
    let list = ZombieList::new(cfg);
    let flows = trace(m, 1);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(2);
    let warm = if occurrence == OccurrenceMode::Scan {
        20 * m
    } else {
        20_000_000
    };
    for i in 0..warm {
        list.observe(flows[i % TRACE], Nanos(i as u64), &mut rng);
    }
    list
}

fn bench_observe(c: &mut Criterion) {
    let mut g = c.benchmark_group("zombie/observe");
    g.throughput(Throughput::Elements(1));
    for (m, mode, name) in [
        (100, OccurrenceMode::Table, "table/M=100"),
        (1000, OccurrenceMode::Table, "table/M=1000"),
        (10_000, OccurrenceMode::Table, "table/M=10000"),
        (1000, OccurrenceMode::Scan, "scan/M=1000"),
    ] {
        let list = warmed(m, mode);
        let flows = trace(m, 3);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(4);
        let mut i = 0usize;
        g.bench_function(name, |b| {
            b.iter(|| {
                i = i.wrapping_add(1);
                black_box(list.observe(flows[i % TRACE], Nanos(i as u64), &mut rng))
            })
        });
    }
    let cfg = ZombieParams::default().validate().unwrap();
    let mut naive = NaiveZombieList::new(cfg);
    let flows = trace(1000, 3);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(4);
    for (i, &f) in flows.iter().enumerate() {
        naive.observe(f, Nanos(i as u64), &mut rng);
    }
    let mut i = 0usize;
    g.bench_function("naive/M=1000", |b| {
        b.iter(|| {
            i = i.wrapping_add(1);
            black_box(naive.observe(flows[i % TRACE], Nanos(i as u64), &mut rng))
        })
    });
    g.finish();
}

/// The longest core-to-core round trip (ns) of two nearby cores. The host moves this VM's two
/// vCPUs between nearby cores (a cache line's round trip 45-70 ns) and distant ones (330-480
/// ns, where two threads sharing the list take 2.6x the CPU time per observation); see
/// `crates/zl-zombie/examples/rounds.rs`, which drops the rounds run on distant cores.
const NEAR_NS: u64 = 150;
/// Two-thread `hammer` calls so far, and how many of them found the threads on distant cores.
static CALLS: AtomicUsize = AtomicUsize::new(0);
static FAR: AtomicUsize = AtomicUsize::new(0);

/// Threads 0 and 1 pass a counter back and forth 9 times; thread 0 returns the mean round
/// trip in ns of the last 8 (the first waits for the other thread to start).
fn round_trip(ball: &AtomicU64, t: u64) -> u64 {
    const PINGS: u64 = 8;
    let mut start = Instant::now();
    for k in 0..=PINGS {
        if k == 1 {
            start = Instant::now();
        }
        if t == 0 {
            ball.store(2 * k + 1, Ordering::Release);
        }
        let wait = if t == 0 { 2 * k + 2 } else { 2 * k + 1 };
        while ball.load(Ordering::Acquire) != wait {
            std::hint::spin_loop();
        }
        if t == 1 {
            ball.store(2 * k + 2, Ordering::Release);
        }
    }
    start.elapsed().as_nanos() as u64 / PINGS
}

/// `threads` threads share one list; each makes `iters / threads` observations, one by one
/// (`burst = 1`) or in bursts through `observe_batch`. The time reported is wall time per
/// observation of the whole group, so 2 threads scale perfectly when their time per
/// observation is half of one thread's. With 2 threads, the workers first measure their
/// core-to-core round trip (untimed), counted in `CALLS` / `FAR`.
fn hammer(list: &ZombieList, flows: &[FlowId], threads: u64, burst: usize, iters: u64) -> Duration {
    let start = Barrier::new(threads as usize + 1);
    let per_thread = iters.div_ceil(threads) as usize;
    let ball = AtomicU64::new(0);
    thread::scope(|s| {
        for t in 0..threads {
            let (start, ball) = (&start, &ball);
            s.spawn(move || {
                if threads == 2 {
                    let rt = round_trip(ball, t);
                    if t == 0 {
                        CALLS.fetch_add(1, Ordering::Relaxed);
                        if rt > NEAR_NS {
                            FAR.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(10 + t);
                let offset = t as usize * (TRACE / 2);
                let blank = Observation {
                    hit: false,
                    p: 0.0,
                    occurrence: 0,
                    total: 0,
                };
                let mut out = [blank; 32];
                start.wait();
                let mut i = 0;
                while i < per_thread {
                    let at = (offset + i) % TRACE;
                    if burst == 1 {
                        black_box(list.observe(flows[at], Nanos(i as u64), &mut rng));
                        i += 1;
                    } else {
                        let end = (at + burst).min(TRACE);
                        i += list.observe_batch(
                            &flows[at..end],
                            Nanos(i as u64),
                            &mut rng,
                            &mut out,
                        );
                        black_box(&out);
                    }
                }
            });
        }
        start.wait();
        // Leaving the scope joins every worker.
        Instant::now()
    })
    .elapsed()
}

fn bench_threads(c: &mut Criterion) {
    let mut g = c.benchmark_group("zombie/update-rate/M=1000");
    g.throughput(Throughput::Elements(1));
    let list = warmed(1000, OccurrenceMode::Table);
    let flows = trace(1000, 5);
    for (burst, name) in [(1, "observe"), (32, "batch32")] {
        for threads in [1u64, 2] {
            CALLS.store(0, Ordering::Relaxed);
            FAR.store(0, Ordering::Relaxed);
            g.bench_function(format!("{name}/threads={threads}"), |b| {
                b.iter_custom(|iters| hammer(&list, &flows, threads, burst, iters))
            });
            if threads == 2 {
                let (far, calls) = (FAR.load(Ordering::Relaxed), CALLS.load(Ordering::Relaxed));
                println!(
                    "{name}/threads=2: {far} of {calls} calls began with a core-to-core round trip > {NEAR_NS} ns (threads on distant cores, or one of them not running); the figure is this machine's 2-thread rate only when that is 0"
                );
            }
        }
    }
    g.finish();
}

criterion_group!(benches, bench_observe, bench_threads);
criterion_main!(benches);
