//! Simulation speed: simulated ME-cycles per second of wall time (target >= 50 M).
//! Throughput is reported in "elements" = MEs x measured cycles, so criterion's elem/s is
//! ME-cycles per second.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use ixp_sim::sweep::shipped_workload;
use ixp_sim::{simulate_with_counts, workload_counts, MachineParams, RunLength, WorkloadSpec};
use std::hint::black_box;

fn engine(c: &mut Criterion) {
    let len = RunLength {
        warmup: 0,
        measure: 1_000_000,
    };
    let mut g = c.benchmark_group("simulate");
    for name in ["ipv4", "zlred-table", "zlred-scan"] {
        let w = WorkloadSpec::from_toml(shipped_workload(name).unwrap())
            .unwrap()
            .compile()
            .unwrap();
        let cfg = MachineParams::default().validate(true).unwrap();
        let counts = workload_counts(&w).unwrap();
        g.throughput(Throughput::Elements(cfg.mes as u64 * len.measure));
        g.bench_function(name, |b| {
            b.iter(|| black_box(simulate_with_counts(&cfg, &w, &counts, len)).packets)
        });
    }
    g.finish();
}

criterion_group!(benches, engine);
criterion_main!(benches);
