//! Cost of one packet through the delay line: a push and, a delay later, its pop.
//!
//! Steady state of a 10 ms line at 10 µs ticks carrying 1 Mpps: each iteration advances time
//! by 1 µs, pushes one item and drains what is due (one item on average).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use std::hint::black_box;
use zl_core::Nanos;
use zl_delay::{DelayLine, DelayLineConfig};

fn steady_state(c: &mut Criterion) {
    let mut group = c.benchmark_group("delay_line");
    group.throughput(Throughput::Elements(1));
    group.bench_function("push_and_pop_10ms_at_1Mpps", |b| {
        let mut line: DelayLine<u64> =
            DelayLine::new(DelayLineConfig::from_millis(10, 16_384)).unwrap();
        let mut now = 0u64;
        // Fill the line to its steady occupancy (10,000 items in flight).
        for i in 0..10_000 {
            now += 1_000;
            line.push(Nanos(now), i).unwrap();
            while line.pop_due(Nanos(now)).is_some() {}
        }
        let mut i = 0u64;
        b.iter(|| {
            now += 1_000;
            i += 1;
            let _ = line.push(Nanos(now), black_box(i));
            while let Some(x) = line.pop_due(Nanos(now)) {
                black_box(x);
            }
        });
        assert_eq!(line.stats().overflow_drops, 0);
    });
    group.finish();
}

criterion_group!(benches, steady_state);
criterion_main!(benches);
