//! Every scenario in `configs/netsim/` parses, expands (full and quick) and runs; invalid
//! scenarios are rejected with a message naming the key.

use std::path::PathBuf;

use netsim::report::trace_csv;
use netsim::scenario::{rows, run_point, set_path, Scenario};

fn config_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../configs/netsim")
}

fn scenarios() -> Vec<(String, Scenario)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(config_dir()).expect("configs/netsim exists") {
        let p = e.expect("dir entry").path();
        if p.extension().is_some_and(|x| x == "toml") {
            let text = std::fs::read_to_string(&p).expect("readable");
            let sc = Scenario::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            out.push((p.display().to_string(), sc));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[test]
fn every_scenario_expands_and_its_first_and_last_points_run() {
    let all = scenarios();
    assert!(
        all.len() >= 10,
        "expected the scenario set, found {}",
        all.len()
    );
    for (path, sc) in &all {
        let full = sc.expand(false).unwrap_or_else(|e| panic!("{path}: {e}"));
        let quick = sc
            .expand(true)
            .unwrap_or_else(|e| panic!("{path} (quick): {e}"));
        assert_eq!(full.len(), quick.len(), "{path}");
        assert!(!sc.plots.is_empty(), "{path}: no plot");
        for p in [full.first(), full.last()].into_iter().flatten() {
            // A 3-second cut of the point, enough to exercise every component it uses.
            let mut p = p.clone();
            p.run.duration_s = 3.0;
            p.run.warmup_s = 1.0;
            let r = run_point(&p, &|_| {}).unwrap_or_else(|e| panic!("{path}: {e}"));
            let rs = rows(std::slice::from_ref(&r));
            assert!(!rs.is_empty(), "{path}: no rows");
            assert!(r.report.events > 0, "{path}");
            assert!((0.0..=1.0 + 1e-9).contains(&r.report.utilisation), "{path}");
        }
    }
}

fn base() -> toml::Value {
    toml::from_str(
        r#"
        name = "t"
        title = "t"
        [run]
        duration_s = 2.0
        [run.bottleneck]
        rate_mbps = 10.0
        delay_ms = 5.0
        buffer_packets = 50
        aqm = { kind = "red", min_th = 5.0, max_th = 15.0, max_p = 0.1, w_q = 0.002 }
        [[run.groups]]
        name = "a"
        count = 2
        access_delay_ms = 5.0
        "#,
    )
    .expect("valid toml")
}

fn error_with(key: &str, value: toml::Value) -> String {
    let mut v = base();
    set_path(&mut v, key, &value).expect("settable");
    let text = toml::to_string(&v).expect("serialisable");
    match Scenario::parse(&text).and_then(|s| s.expand(false)) {
        Ok(_) => panic!("{key} = {value} was accepted"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn the_base_scenario_is_valid() {
    let text = toml::to_string(&base()).expect("serialisable");
    let sc = Scenario::parse(&text).expect("parses");
    assert_eq!(sc.expand(false).expect("valid").len(), 1);
}

#[test]
fn invalid_values_are_rejected_with_their_key() {
    let table = |t: &str| -> toml::Value { toml::from_str(t).expect("toml table") };
    let cases: [(&str, toml::Value, &str); 22] = [
        ("run.duration_s", (-1.0).into(), "duration_s"),
        // Finite but past what `Nanos` arithmetic can hold once added to other times.
        ("run.duration_s", 1e300.into(), "duration_s"),
        ("run.groups.0.start_s", 1e18.into(), "groups[0].start_s"),
        (
            "run.bottleneck.delay_ms",
            1e300.into(),
            "bottleneck.delay_ms",
        ),
        (
            "run.bottleneck.rate_mbps",
            1e-300.into(),
            "bottleneck.rate_mbps",
        ),
        (
            "run.groups.0.tcp.max_rto_ms",
            1e300.into(),
            "groups[0].min_rto_ms",
        ),
        ("name", "../escape".into(), "name"),
        ("name", "".into(), "name"),
        ("run.warmup_s", 5.0.into(), "warmup_s"),
        (
            "run.bottleneck.rate_mbps",
            0.0.into(),
            "bottleneck.rate_mbps",
        ),
        ("run.bottleneck.aqm.max_p", 2.0.into(), "max_p"),
        ("run.groups.0.tcp.priority", 3.into(), "groups[0].priority"),
        (
            "run.groups.0.tcp.window_cap",
            0.into(),
            "groups[0].window_cap",
        ),
        (
            "run.groups.0.access_delay_ms",
            (-3.0).into(),
            "groups[0].access_delay_ms",
        ),
        ("run.groups.0.kind", "cbr".into(), "groups[0].cbr"),
        ("run.groups.0.bogus", 1.into(), "bogus"),
        ("run.groups.0.dscp", 64.into(), "groups[0].dscp"),
        (
            "run.groups.0.tcp.initial_rto_ms",
            f64::INFINITY.into(),
            "groups[0].min_rto_ms",
        ),
        (
            "run.groups.0.tcp.delack_ms",
            f64::INFINITY.into(),
            "groups[0].delack_ms",
        ),
        // `hosts` counts from `host`, which must be given.
        ("run.groups.0.hosts", 3.into(), "groups[0].hosts"),
        (
            "run.groups.0",
            table("name = \"a\"\ncount = 2\naccess_delay_ms = 5.0\nhost = 65535\nhosts = 2"),
            "groups[0].hosts",
        ),
        // A discipline's own parameters are checked and named too.
        (
            "run.bottleneck.aqm",
            table("kind = \"fq-codel\"\nquantum = 10"),
            "bottleneck.aqm.quantum",
        ),
    ];
    for (key, value, expect) in cases {
        let msg = error_with(key, value);
        assert!(
            msg.contains(expect),
            "{key}: message `{msg}` does not name `{expect}`"
        );
    }
}

#[test]
fn sweep_errors_name_the_axis() {
    let mut v = base();
    let axis: toml::Value = toml::from_str("key = \"groups.5.count\"\nvalues = [1]").expect("toml");
    set_path(&mut v, "sweep", &toml::Value::Array(vec![axis])).expect("settable");
    let text = toml::to_string(&v).expect("serialisable");
    let err = Scenario::parse(&text)
        .and_then(|s| s.expand(false))
        .expect_err("index out of range");
    assert!(err.to_string().contains("groups.5.count"), "{err}");
}

#[test]
fn a_group_with_no_flows_gets_no_row() {
    let mut v = base();
    let empty: toml::Value =
        toml::from_str("name = \"none\"\ncount = 0\naccess_delay_ms = 5.0").expect("toml");
    v["run"]["groups"]
        .as_array_mut()
        .expect("groups array")
        .push(empty);
    let text = toml::to_string(&v).expect("serialisable");
    let points = Scenario::parse(&text)
        .expect("parses")
        .expand(false)
        .expect("a group may be empty while another has flows");
    let r = run_point(&points[0], &|_| {}).expect("runs");
    let groups: Vec<String> = rows(std::slice::from_ref(&r))
        .into_iter()
        .map(|row| row.group)
        .collect();
    assert_eq!(groups, ["a"]);
}

#[test]
fn trace_rows_have_a_value_per_header_column() {
    let mut v = base();
    set_path(&mut v, "run.sample_interval_s", &0.5.into()).expect("settable");
    let text = toml::to_string(&v).expect("serialisable");
    let points = Scenario::parse(&text)
        .expect("parses")
        .expand(false)
        .expect("valid");
    let r = run_point(&points[0], &|_| {}).expect("runs");
    let csv = trace_csv(std::slice::from_ref(&r));
    let mut lines = csv.lines();
    let header = lines.next().expect("header").split(',').collect::<Vec<_>>();
    assert_eq!(header[3], "capacity_pkts");
    let mut n = 0;
    for line in lines {
        let cols: Vec<&str> = line.split(',').collect();
        assert_eq!(cols.len(), header.len(), "row `{line}`");
        assert_eq!(
            cols[3], "50",
            "capacity of a 50-packet buffer, row `{line}`"
        );
        n += 1;
    }
    assert!(n >= 3, "expected a sample every 0.5 s over 2 s, got {n}");
}

#[test]
fn a_discipline_refuses_a_buffer_it_cannot_reserve() {
    let mut v = base();
    set_path(
        &mut v,
        "run.bottleneck.aqm",
        &toml::from_str("kind = \"codel\"").expect("toml"),
    )
    .expect("settable");
    set_path(&mut v, "run.bottleneck.buffer_packets", &100_000_000.into()).expect("settable");
    let text = toml::to_string(&v).expect("serialisable");
    let err = Scenario::parse(&text)
        .and_then(|s| s.expand(false))
        .expect_err("a 100 M packet arena");
    assert!(
        err.to_string().contains("bottleneck.buffer_packets"),
        "{err}"
    );
    // The same buffer on a FIFO (which grows as it fills) is accepted.
    let mut v = base();
    set_path(&mut v, "run.bottleneck.buffer_packets", &100_000_000.into()).expect("settable");
    let text = toml::to_string(&v).expect("serialisable");
    assert!(Scenario::parse(&text).and_then(|s| s.expand(false)).is_ok());
}
