//! A foreign data plane's worker threads sharing one Zombie List: each worker has its own
//! random source and reads its own clock (here a per-thread counter of nanoseconds), and
//! shows every arriving packet's flow to the shared list; a control thread reads the flow
//! estimate 1/P(t) while they run, without stopping them.
//!
//! Traffic: every worker draws its packets from the same 200 equally active flows, so 1/P(t)
//! settles near 200; the main thread prints it as it goes and checks the list's invariants
//! once the workers have stopped.
//!
//! Run: `cargo run -p zl-zombie --example foreign_threads [threads]`

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use zl_zombie::{FlowId, Nanos, ZombieList, ZombieParams};

const FLOWS: u64 = 200;
const PACKETS_PER_WORKER: u64 = 500_000;

fn main() {
    let threads: u64 = std::env::args()
        .nth(1)
        .map_or(2, |s| s.parse().expect("threads: an integer"));
    let cfg = ZombieParams::default()
        .validate()
        .expect("the paper's defaults are valid");
    let list = Arc::new(ZombieList::new(cfg));
    let done = Arc::new(AtomicBool::new(false));

    let workers: Vec<_> = (0..threads)
        .map(|w| {
            let list = Arc::clone(&list);
            thread::spawn(move || {
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(100 + w);
                let mut now = Nanos::ZERO;
                for _ in 0..PACKETS_PER_WORKER {
                    now += Nanos(700); // this worker's clock: one arrival every 700 ns
                    let flow = FlowId(rng.random_range(0..FLOWS));
                    list.observe(flow, now, &mut rng);
                }
            })
        })
        .collect();

    // The control plane: reads the estimate while the workers run (atomic loads only).
    let reader = {
        let (list, done) = (Arc::clone(&list), Arc::clone(&done));
        thread::spawn(move || {
            while !done.load(Ordering::Relaxed) {
                println!(
                    "1/P(t) = {:8.1}   T = {}",
                    list.estimated_flows(),
                    list.total_occurrence()
                );
                thread::sleep(Duration::from_millis(100));
            }
        })
    };
    for w in workers {
        w.join().expect("worker");
    }
    done.store(true, Ordering::Relaxed);
    reader.join().expect("reader");

    let estimate = list.estimated_flows();
    println!("{threads} workers, {FLOWS} flows: final 1/P(t) = {estimate:.1}");
    list.check_invariants()
        .expect("T and every F agree with the zombies at quiescence");
    println!("invariants hold: T = {}", list.total_occurrence());
}
