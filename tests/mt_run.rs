//! `zlrouter` with `run.rx_workers` (no root): the built-in default's generator traffic runs
//! through the threaded router on the monotonic clock and its final statistics (read from
//! `run --json`, not the text table) balance, with each receive worker's count in the table;
//! its metrics endpoint serves the threads' counters; SIGINT mid-run counts what was queued;
//! a worker count the ports cannot use is refused naming the key.

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Command;

/// The final statistics of `zlrouter run --json` (stdout) balance with nothing left queued:
/// received = forwarded + dropped, and something was forwarded.
fn assert_balanced(json: &str) {
    let v: serde_json::Value = serde_json::from_str(json)
        .unwrap_or_else(|e| panic!("not one JSON document ({e}):\n{json}"));
    let n = |key: &str| {
        v["totals"][key]
            .as_u64()
            .unwrap_or_else(|| panic!("no totals.{key} in\n{json}"))
    };
    assert_eq!(n("queued"), 0, "{json}");
    assert_eq!(n("received"), n("forwarded") + n("dropped"), "{json}");
    assert!(n("forwarded") > 0, "{json}");
}

fn config(name: &str, duration_s: f64, workers: u32) -> std::path::PathBuf {
    let dir = common::scratch(name);
    let cfg = dir.join("mt.toml");
    let text = zl_dataplane::DEFAULT_CONFIG.replace(
        "duration_s = 10.0",
        &format!("duration_s = {duration_s}\nrx_workers = {workers}"),
    );
    assert!(text.contains("rx_workers"), "the default config changed");
    std::fs::write(&cfg, text).unwrap();
    cfg
}

#[test]
fn generator_traffic_through_two_rx_workers_balances() {
    let cfg = config("mt-run", 0.3, 2);
    let run = |extra: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_zlrouter"))
            .args(["run", "-q"])
            .args(extra)
            .arg(&cfg)
            .output()
            .unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        assert!(out.status.success(), "{stdout}\n{stderr}");
        (stdout, stderr)
    };
    // The counters from the JSON document (with --json, why the run stopped goes to stderr).
    let (json, stderr) = run(&["--json"]);
    assert_balanced(&json);
    // The run ends by itself: its sources finish and the queues drain, or, on a loaded machine
    // where a worker thread waits for a core, the drain time runs out first and what was still
    // queued is counted as shutdown drops (assert_balanced: nothing left queued either way).
    assert!(
        stderr.contains("stopped: every source finished")
            || stderr.contains("stopped: drain time over"),
        "{stderr}"
    );
    // The table names the workers (a line the JSON does not carry).
    let (table, _) = run(&[]);
    assert!(table.contains("threads: 2 receive workers"), "{table}");
}

#[test]
fn sigint_stops_the_threads_and_counts_what_was_queued() {
    let cfg = config("mt-sigint", 1000.0, 2);
    let running = common::spawn_until_progress(&[
        "run",
        "--json",
        "--metrics",
        "127.0.0.1:0",
        cfg.to_str().unwrap(),
    ]);
    // The metrics endpoint serves the threaded router's counters.
    let seen = &running.seen;
    let addr = seen
        .split("metrics on http://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .unwrap_or_else(|| panic!("no metrics address in {seen}"))
        .to_owned();
    let scrape = || {
        let mut s = TcpStream::connect(&addr).unwrap();
        s.write_all(b"GET /metrics HTTP/1.0\r\nHost: zlrouter\r\n\r\n")
            .unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        text
    };
    // Stopped once something has been forwarded (the transmit worker may wait for a core on
    // a loaded machine), so the final statistics have a forwarded count to check; bounded.
    let forwarded = |text: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix("zlrouter_forwarded_packets_total "))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    let mut text = scrape();
    for _ in 0..300 {
        if forwarded(&text) > 0.0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
        text = scrape();
    }
    assert!(
        forwarded(&text) > 0.0,
        "nothing forwarded within 30 s: {text}"
    );
    assert!(text.contains("zlrouter_received_packets_total "), "{text}");
    assert!(
        text.contains("zlrouter_dropped_packets_total{cause=\"ring_full\"}"),
        "{text}"
    );
    assert!(
        text.contains("zlrouter_class_enqueued_packets_total{port=\"wan\""),
        "{text}"
    );
    // Only the child this test started is signalled, by its PID.
    let Some((out, rest)) = common::signal_and_wait(running, "-INT") else {
        zl_testkit::netns::skip("mt sigint", "the `kill` command is not available");
        return;
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "exit {:?}\n{stdout}\n{rest}",
        out.status
    );
    assert!(rest.contains("stopped: interrupted"), "{rest}");
    assert_balanced(&stdout);
}

#[test]
fn more_rx_workers_than_ports_is_refused_naming_the_key() {
    // The default config has two ports.
    let cfg = config("mt-check", 1.0, 3);
    let out = Command::new(env!("CARGO_BIN_EXE_zlrouter"))
        .args(["check", cfg.to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("run.rx_workers") && stderr.contains("= 3"),
        "{stderr}"
    );
}
