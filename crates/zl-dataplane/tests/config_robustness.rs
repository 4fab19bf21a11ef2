//! Bad config values are refused with an error that names the key (`ports[0].mtu`,
//! `qos.classes[1].max_packets`), and the loader and builder never panic: arbitrary values in
//! every numeric field give a config that runs, or an error naming a key whose value breaks a
//! documented rule; a config no rule refuses must build and run.

use std::sync::atomic::AtomicBool;

use proptest::prelude::*;
use zl_core::Nanos;
use zl_dataplane::{build, ConfigError, NoObserver, RouterConfig};

/// What loading and building `text` says: `Ok` for a data plane that was built (then run for
/// two virtual milliseconds, counters checked), else the error (syntax or a rule) as text.
fn load_build_run(text: &str) -> Result<(), Rejection> {
    let mut cfg = RouterConfig::from_toml(text).map_err(|e| match e {
        ConfigError::Syntax(_) => Rejection::Syntax(e.to_string()),
        other => Rejection::Rule(other.to_string()),
    })?;
    cfg.validate().map_err(|e| Rejection::Rule(e.to_string()))?;
    // Keep accepted runs short: the run checks that nothing panics and nothing is lost.
    cfg.run.duration_s = cfg.run.duration_s.min(0.002);
    let mut dp =
        build(&cfg, std::path::Path::new(".")).map_err(|e| Rejection::Rule(e.to_string()))?;
    let stop = AtomicBool::new(false);
    dp.run_virtual(
        Nanos::from_millis(2),
        Nanos::from_millis(1),
        &stop,
        Nanos::from_millis(1),
        &mut NoObserver,
    )
    .unwrap();
    let t = dp.totals();
    zl_testkit::conservation::assert_conserved(
        t.received,
        t.forwarded,
        t.dropped(),
        dp.queued(),
        format_args!("{t:?}"),
    );
    Ok(())
}

#[derive(Debug)]
enum Rejection {
    /// TOML syntax, a type (a number beyond its field's range) or an unknown key: the message
    /// quotes the offending line, so it names the key as written.
    Syntax(String),
    /// A value against a rule: the message names the full key in backquotes.
    Rule(String),
}

/// `result` is a rejection naming `key`: in backquotes for a rule, as written on the quoted
/// line for a syntax error.
#[track_caller]
fn assert_names(result: Result<(), Rejection>, key: &str) {
    match result {
        Ok(()) => panic!("accepted; expected an error naming `{key}`"),
        Err(Rejection::Rule(msg)) => {
            assert!(
                msg.contains(&format!("`{key}`")),
                "expected `{key}` in: {msg}"
            )
        }
        Err(Rejection::Syntax(msg)) => panic!("syntax error; expected `{key}` refused: {msg}"),
    }
}

/// A config that runs; each case below changes one line of it.
const BASE: &str = r#"
[run]
duration_s = 0.002
drain_s = 0.001
work_budget = 64

[[ports]]
name = "in"
kind = "generator"
mac = "02:00:00:00:00:01"
mtu = 1500
[[ports.generator.flows]]
name = "f"
count = 2
rate_bps = 1_000_000
size = 100
size_max = 200
arrival = "on-off"
on_ms = 1.0
off_ms = 1.0
start_s = 0.0
stop_s = 0.002
src = "10.0.0.1"
dst = "10.9.0.1"

[[ports]]
name = "out"
kind = "sink"
mac = "02:00:00:00:00:02"

[[routes]]
prefix = "10.9.0.0/16"
port = "out"
next_hop_mac = "02:00:00:00:00:03"

[qos]
shaper = { rate_bps = 10_000_000 }
[[qos.classes]]
name = "ef"
weight = 1
max_packets = 100
[[qos.classes]]
name = "be"
weight = 1
max_packets = 1000
"#;

/// `BASE` with the one occurrence of `line` replaced by `with`.
fn base_with(line: &str, with: &str) -> String {
    assert_eq!(BASE.matches(line).count(), 1, "{line:?} once in BASE");
    BASE.replacen(line, with, 1)
}

#[test]
fn the_base_config_runs() {
    load_build_run(BASE).unwrap();
}

#[test]
fn each_bad_value_is_refused_naming_its_key() {
    let gen = "ports[0].generator";
    let cases: &[(&str, &str, &str)] = &[
        ("duration_s = 0.002", "duration_s = 0.0", "run.duration_s"),
        ("duration_s = 0.002", "duration_s = nan", "run.duration_s"),
        ("drain_s = 0.001", "drain_s = -1.0", "run.drain_s"),
        ("work_budget = 64", "work_budget = 0", "run.work_budget"),
        ("work_budget = 64", "work_budget = 65537", "run.work_budget"),
        ("mtu = 1500", "mtu = 67", "ports[0].mtu"),
        ("mtu = 1500", "mtu = 65536", "ports[0].mtu"),
        (
            "mac = \"02:00:00:00:00:02\"",
            "mac = \"02:00:00:00:00\"",
            "ports[1].mac",
        ),
        ("count = 2", "count = 0", &format!("{gen}.flows[0].count")),
        (
            "count = 2",
            "count = 1000001",
            &format!("{gen}.flows[0].count"),
        ),
        (
            "rate_bps = 1_000_000",
            "rate_bps = 0",
            &format!("{gen}.flows[0].rate_bps"),
        ),
        ("size = 100", "size = 59", &format!("{gen}.flows[0].size")),
        (
            "size_max = 200",
            "size_max = 1515",
            &format!("{gen}.flows[0].size_max"),
        ),
        (
            "size_max = 200",
            "size_max = 99",
            &format!("{gen}.flows[0].size_max"),
        ),
        (
            "on_ms = 1.0",
            "on_ms = 0.0001",
            &format!("{gen}.flows[0].on_ms"),
        ),
        (
            "off_ms = 1.0",
            "off_ms = inf",
            &format!("{gen}.flows[0].off_ms"),
        ),
        (
            "start_s = 0.0",
            "start_s = -1.0",
            &format!("{gen}.flows[0].start_s"),
        ),
        (
            "stop_s = 0.002",
            "stop_s = 0.0",
            &format!("{gen}.flows[0].stop_s"),
        ),
        (
            "prefix = \"10.9.0.0/16\"",
            "prefix = \"10.9.0.0/33\"",
            "routes[0].prefix",
        ),
        ("port = \"out\"", "port = \"nowhere\"", "routes[0].port"),
        (
            "next_hop_mac = \"02:00:00:00:00:03\"",
            "next_hop_mac = \"02:00\"",
            "routes[0].next_hop_mac",
        ),
        (
            "max_packets = 1000",
            "max_packets = 0",
            "qos.classes[1].max_packets",
        ),
        (
            "max_packets = 100\n",
            "max_packets = 4194305\n",
            "qos.classes[0].max_packets",
        ),
        (
            "rate_bps = 10_000_000",
            "rate_bps = 0",
            "qos.shaper.rate_bps",
        ),
    ];
    for (line, with, key) in cases {
        assert_names(load_build_run(&base_with(line, with)), key);
    }
}

#[test]
fn a_port_s_own_qos_is_named_under_the_port() {
    let text = base_with(
        "mac = \"02:00:00:00:00:02\"",
        "mac = \"02:00:00:00:00:02\"\n\
         [ports.qos]\n\
         link_rate_bps = 10_000_000\n\
         [[ports.qos.classes]]\n\
         name = \"be\"\n\
         weight = 1\n\
         max_packets = 0",
    );
    assert_names(load_build_run(&text), "ports[1].qos.classes[0].max_packets");
}

#[test]
fn syntax_errors_name_the_key() {
    // Unknown keys, wrong types and numbers beyond their field: the message quotes the line.
    for (line, with, key) in [
        ("mtu = 1500", "mtu_bytes = 1500", "mtu_bytes"),
        ("count = 2", "count = \"two\"", "count"),
        ("count = 2", "count = 9223372036854775807", "count"),
        ("work_budget = 64", "work_budget = -1", "work_budget"),
        ("count = 2", "count = 4294967296", "count"),
        (
            "rate_bps = 1_000_000",
            "rate_bps = 18446744073709551616",
            "rate_bps",
        ),
    ] {
        match load_build_run(&base_with(line, with)) {
            Err(Rejection::Syntax(msg)) => assert!(msg.contains(key), "expected {key} in: {msg}"),
            other => panic!("{with}: expected a syntax error, got {other:?}"),
        }
    }
}

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

/// Mostly in `valid`, sometimes 0, beyond a `u32` field (a type error) or at the top of a
/// `u64` field (which TOML, read into a `u64`, accepts: a rule refuses it).
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

/// What a generated value breaks: nothing, its field's type (TOML integers are i64; `u32`
/// fields hold less), or a documented rule.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Fault {
    None,
    Type,
    Rule,
}

fn int_fault(v: u64, max: u64, valid: impl Fn(u64) -> bool) -> Fault {
    if v > max {
        Fault::Type
    } else if valid(v) {
        Fault::None
    } else {
        Fault::Rule
    }
}

fn f64_fault(valid: bool) -> Fault {
    if valid {
        Fault::None
    } else {
        Fault::Rule
    }
}

const U32: u64 = u32::MAX as u64;
const U64: u64 = u64::MAX;

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_numbers_are_run_or_refused_naming_a_bad_key(
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
        let size_max = size + size_extra;
        let stop = start + stop_extra;
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
            stop = toml_f64(stop),
            duration = toml_f64(duration),
            drain = toml_f64(drain),
            on_ms = toml_f64(on_ms),
            off_ms = toml_f64(off_ms),
            start = toml_f64(start),
        );
        let gen = "ports[0].generator.flows[0]";
        let ms_ok = |v: f64| v.is_finite() && (0.001..=3_600_000.0).contains(&v);
        // (full key, key as written, fault), by the rules of `RouterConfig::validate`, the
        // generator's and `zl_qos`'s (their error messages state the same bounds).
        let faults = [
            ("run.duration_s", "duration_s",
                f64_fault(duration.is_finite() && duration > 0.0 && duration <= 1e6)),
            ("run.drain_s", "drain_s",
                f64_fault(drain.is_finite() && (0.0..=1e6).contains(&drain))),
            ("run.work_budget", "work_budget", int_fault(budget, U32, |v| (1..=65_536).contains(&v))),
            ("routes[0].prefix", "prefix", f64_fault(prefix_len <= 32)),
            ("qos.classes[0].max_packets", "max_packets",
                int_fault(max_packets, U32, |v| (1..=1 << 22).contains(&v))),
            ("qos.shaper.rate_bps", "rate_bps",
                int_fault(shaper, U64, |v| (1..=10_000_000_000_000).contains(&v))),
            (&format!("{gen}.count"), "count", int_fault(count, U32, |v| (1..=1_000_000).contains(&v))),
            (&format!("{gen}.rate_bps"), "rate_bps",
                int_fault(rate, U64, |v| (1..=1_000_000_000_000).contains(&v))),
            (&format!("{gen}.size"), "size", f64_fault((60..=1514).contains(&size))),
            (&format!("{gen}.size_max"), "size_max", f64_fault(size_max <= 1514)),
            (&format!("{gen}.on_ms"), "on_ms", f64_fault(ms_ok(on_ms))),
            (&format!("{gen}.off_ms"), "off_ms", f64_fault(ms_ok(off_ms))),
            (&format!("{gen}.start_s"), "start_s",
                f64_fault(start.is_finite() && (0.0..=1e6).contains(&start))),
            (&format!("{gen}.stop_s"), "stop_s",
                f64_fault(stop.is_finite() && stop > start && stop <= 1e6)),
        ];
        let of = |f: Fault| faults.iter().filter(move |(_, _, x)| *x == f);
        match load_build_run(&text) {
            Ok(()) => prop_assert!(
                of(Fault::Type).chain(of(Fault::Rule)).next().is_none(),
                "accepted, yet these values break a rule: {:?}",
                of(Fault::Type).chain(of(Fault::Rule)).map(|f| f.0).collect::<Vec<_>>()
            ),
            Err(Rejection::Syntax(msg)) => prop_assert!(
                of(Fault::Type).any(|(_, written, _)| msg.contains(written)),
                "syntax error naming none of the values beyond their type {:?}: {msg}",
                of(Fault::Type).map(|f| f.1).collect::<Vec<_>>()
            ),
            Err(Rejection::Rule(msg)) => prop_assert!(
                of(Fault::Type).next().is_none()
                    && of(Fault::Rule).any(|(key, _, _)| msg.contains(&format!("`{key}`"))),
                "refused naming none of the keys whose values break a rule {:?}: {msg}",
                of(Fault::Rule).map(|f| f.0).collect::<Vec<_>>()
            ),
        }
    }
}
