//! Event-loop speed: a 45 Mb/s bottleneck under ZL-RED with 100 Reno flows (the ZL-RED paper's
//! setting), and the same with a tail-drop FIFO. Throughput is reported in events per second.
//!
//! `cargo bench -p netsim --bench events -- --warm-up-time 1 --measurement-time 3`

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use netsim::scenario::{run_point, Scenario};

fn scenario(aqm: &str, secs: f64) -> netsim::scenario::Point {
    let text = format!(
        r#"
        name = "bench"
        title = "bench"
        [run]
        duration_s = {secs}
        warmup_s = 1.0
        [run.bottleneck]
        rate_mbps = 45.0
        delay_ms = 20.0
        buffer_packets = 1000
        aqm = {aqm}
        [[run.groups]]
        name = "reno"
        count = 100
        access_delay_ms = 20.0
        tcp = {{ variant = "reno", packet_size = 1000, window_cap = 10000 }}
        "#
    );
    let sc = Scenario::parse(&text).expect("valid bench scenario");
    sc.expand(false).expect("valid").remove(0)
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("netsim");
    g.sample_size(10);
    for (name, aqm) in [
        (
            "zl-red_100flows_10s",
            r#"{ kind = "zl-red", p_max = 0.15, th_min = 5.0, a = 1.0 }"#,
        ),
        ("tail-drop_100flows_10s", r#"{ kind = "tail-drop" }"#),
    ] {
        let point = scenario(aqm, 10.0);
        let events = run_point(&point, &|_| {}).expect("runs").report.events;
        g.throughput(Throughput::Elements(events));
        g.bench_function(name, |b| {
            b.iter(|| run_point(&point, &|_| {}).expect("runs").report.events)
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
