//! The config loader and builder never panic: arbitrary values in every numeric field give a
//! config that runs or a typed error.

use std::sync::atomic::AtomicBool;

use proptest::prelude::*;
use zl_core::Nanos;
use zl_dataplane::{build, NoObserver, RouterConfig};

/// Mostly in `valid`, sometimes an edge (zero, negative, NaN, infinite, huge).
fn f64_in(valid: std::ops::Range<f64>) -> impl Strategy<Value = f64> {
    prop_oneof![
        1 => Just(0.0),
        1 => Just(-1.0),
        1 => Just(f64::NAN),
        1 => Just(f64::INFINITY),
        1 => Just(1e300),
        40 => valid,
    ]
}

/// Mostly in `valid`, sometimes 0 or beyond TOML's i64 (a syntax error, tested too).
fn u64_in(valid: std::ops::Range<u64>) -> impl Strategy<Value = u64> {
    prop_oneof![
        1 => Just(0u64),
        1 => Just(i64::MAX as u64),
        1 => Just(u64::MAX),
        40 => valid,
    ]
}

fn toml_f64(v: f64) -> String {
    if v.is_nan() {
        "nan".into()
    } else if v.is_infinite() {
        if v > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        }
    } else {
        format!("{v:?}")
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_numbers_never_panic(
        duration in f64_in(0.001..5.0),
        drain in f64_in(0.0..2.0),
        budget in u64_in(1..70_000),
        count in u64_in(1..200),
        rate in u64_in(1..10_000_000),
        size in 50u64..1530,
        size_extra in 0u64..100,
        on_ms in f64_in(0.000_000_1..1e6),
        off_ms in f64_in(0.000_000_1..1e6),
        start in f64_in(0.0..0.01),
        stop_extra in f64_in(0.0..0.01),
        max_packets in u64_in(1..5_000),
        shaper in u64_in(1..100_000_000_000),
        prefix_len in 0u32..34,
        arrival in prop::sample::select(vec!["cbr", "poisson", "on-off"]),
    ) {
        let text = format!(
            r#"
[run]
duration_s = {duration}
drain_s = {drain}
work_budget = {budget}

[[ports]]
name = "in"
kind = "generator"
mac = "02:00:00:00:00:01"
[[ports.generator.flows]]
name = "f"
count = {count}
rate_bps = {rate}
size = {size}
size_max = {size_max}
arrival = "{arrival}"
on_ms = {on_ms}
off_ms = {off_ms}
start_s = {start}
stop_s = {stop}
src = "10.0.0.1"
dst = "10.9.0.1"

[[ports]]
name = "out"
kind = "sink"
mac = "02:00:00:00:00:02"

[[routes]]
prefix = "10.0.0.0/{prefix_len}"
port = "out"
next_hop_mac = "02:00:00:00:00:03"

[qos]
shaper = {{ rate_bps = {shaper} }}
[[qos.classes]]
name = "be"
weight = 1
max_packets = {max_packets}
"#,
            size_max = size + size_extra,
            stop = toml_f64(start + stop_extra),
            duration = toml_f64(duration),
            drain = toml_f64(drain),
            on_ms = toml_f64(on_ms),
            off_ms = toml_f64(off_ms),
            start = toml_f64(start),
        );
        let Ok(mut cfg) = RouterConfig::from_toml(&text) else { return Ok(()) };
        // Keep accepted runs short: what is tested is that nothing panics.
        if cfg.run.duration_s.is_finite() && cfg.run.duration_s > 0.0 {
            cfg.run.duration_s = cfg.run.duration_s.min(0.002);
        }
        if let Ok(mut dp) = build(&cfg, std::path::Path::new(".")) {
            let stop = AtomicBool::new(false);
            dp.run_virtual(Nanos::from_millis(2), Nanos::from_millis(1), &stop, Nanos::from_millis(1), &mut NoObserver)
                .unwrap();
            let t = dp.totals();
            prop_assert_eq!(t.received, t.forwarded + t.dropped() + dp.queued());
        }
    }
}
