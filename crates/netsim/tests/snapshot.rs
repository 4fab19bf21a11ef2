//! Determinism: the same seed gives the same results bit for bit, and a small reference table
//! is kept as a snapshot (`tests/snapshots/mixed.csv`). Set `NETSIM_UPDATE_SNAPSHOTS=1` to
//! rewrite it after an intended change, and say why in the commit.

use netsim::report::csv;
use netsim::scenario::{rows, run_points, Scenario};

const SCENARIO: &str = r#"
name = "mixed"
title = "Reno, NewReno, Vegas, paced, ECN, CBR and TFRC through RED and SRED"
[run]
seed = 42
duration_s = 20.0
warmup_s = 5.0
sample_interval_s = 1.0
probe = { kind = "zombie", zombie = { m = 100 } }
[run.bottleneck]
rate_mbps = 10.0
delay_ms = 10.0
buffer_packets = 100
aqm = { kind = "red", min_th = 10.0, max_th = 30.0, max_p = 0.1, w_q = 0.002, ecn = true }
[[run.groups]]
name = "reno"
count = 3
access_delay_ms = 5.0
access_delay_max_ms = 30.0
tcp = { variant = "reno", window_cap = 200, delayed_ack = true }
[[run.groups]]
name = "newreno-ecn"
count = 2
access_delay_ms = 10.0
tcp = { variant = "new-reno", window_cap = 200, ecn = "rfc3168" }
[[run.groups]]
name = "vegas-paced"
count = 2
access_delay_ms = 10.0
tcp = { variant = "vegas", window_cap = 200, paced = true }
[[run.groups]]
name = "web"
count = 4
access_delay_ms = 10.0
tcp = { variant = "reno", window_cap = 200 }
web = { mean_size_packets = 20.0, shape = 1.5, mean_off_ms = 300.0 }
[[run.groups]]
name = "cbr"
kind = "cbr"
count = 1
access_delay_ms = 1.0
cbr = { rate_bps = 1000000.0, packet_size = 500 }
[[run.groups]]
name = "tfrc"
kind = "tfrc"
count = 1
access_delay_ms = 10.0
tfrc = { packet_size = 1000, max_rate_bps = 10000000.0 }
[[sweep]]
name = "aqm"
key = "bottleneck.aqm"
labels = ["RED-ECN", "SRED"]
values = [
  { kind = "red", min_th = 10.0, max_th = 30.0, max_p = 0.1, w_q = 0.002, ecn = true },
  { kind = "sred", p_max = 0.15, zombie = { m = 100 } },
]
[[plots]]
file = "unused"
x = "aqm"
y = "goodput_mean_kbps"
"#;

fn table() -> String {
    let sc = Scenario::parse(SCENARIO).expect("valid scenario");
    let points = sc.expand(false).expect("valid points");
    let results = run_points(&points, false).expect("runs");
    csv(&rows(&results))
}

#[test]
fn same_seed_same_results_bit_for_bit() {
    let sc = Scenario::parse(SCENARIO).expect("valid scenario");
    let points = sc.expand(false).expect("valid points");
    let a = run_points(&points, false).expect("runs");
    let b = run_points(&points, false).expect("runs");
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(
            x.report, y.report,
            "reports differ between two runs of one seed"
        );
    }
    let mut other = points.clone();
    other[0].run.seed = 43;
    let c = run_points(&other[..1], false).expect("runs");
    assert_ne!(
        c[0].report.flows, a[0].report.flows,
        "a different seed should change the run"
    );
}

#[test]
fn reference_table_matches_snapshot() {
    let got = table();
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/snapshots/mixed.csv");
    if std::env::var_os("NETSIM_UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, &got).expect("write snapshot");
    }
    let want = std::fs::read_to_string(&path)
        .expect("snapshot exists (NETSIM_UPDATE_SNAPSHOTS=1 creates it)");
    assert_eq!(
        got, want,
        "results changed; if intended, regenerate with NETSIM_UPDATE_SNAPSHOTS=1"
    );
}
