//! The machine-readable output: `zlrouter run --json`, `GET /stats.json` and
//! `zlrouter stats --json` carry every counter of the text table, and the conservation
//! identity holds in them; the Prometheus text and the JSON of one publish agree.

mod common;

use std::process::Command;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use serde_json::Value;
use zl_control::control::ControlThread;
use zl_control::metrics::MetricsHub;
use zl_core::Nanos;
use zl_dataplane::{Dataplane, DropCause, Observer, RouterConfig, DEFAULT_CONFIG};

fn zlrouter(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_zlrouter"))
        .args(args)
        .current_dir(common::root())
        .output()
        .expect("zlrouter runs")
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// `received = forwarded + dropped + queued + in_flight`, and `dropped` is the sum of the
/// causes, every cause of `DropCause::ALL` present.
fn assert_identity(totals: &Value) {
    let drops = totals["drops"].as_object().expect("drops by cause");
    for c in DropCause::ALL {
        assert!(drops.contains_key(c.name()), "cause {} missing", c.name());
    }
    let sum: u64 = drops.values().map(u).sum();
    assert_eq!(sum, u(&totals["dropped"]), "{totals}");
    let in_flight = totals["in_flight"].as_i64().unwrap();
    assert_eq!(
        u(&totals["received"]) as i64,
        (u(&totals["forwarded"]) + sum + u(&totals["queued"])) as i64 + in_flight,
        "{totals}"
    );
}

/// The numbers after `key ` in the first line starting with `start`.
fn after(line: &str, key: &str) -> u64 {
    let rest = &line[line
        .find(&format!("{key} "))
        .unwrap_or_else(|| panic!("{key} in {line}"))
        + key.len()
        + 1..];
    rest.split_whitespace()
        .next()
        .unwrap()
        .trim_matches(['(', ')'])
        .parse()
        .unwrap()
}

#[test]
fn run_json_carries_every_counter_of_the_table_and_balances() {
    let args = ["run", "--quiet", "--duration", "2", "--seed", "7"];
    let text = zlrouter(&args);
    let json = zlrouter(&[&args[..], &["--json"]].concat());
    assert!(
        json.status.success(),
        "{}",
        String::from_utf8_lossy(&json.stderr)
    );
    let text = String::from_utf8(text.stdout).unwrap();
    let v: Value = serde_json::from_slice(&json.stdout).expect("stdout is one JSON document");
    assert_eq!(v["schema"], 1);
    let t = &v["totals"];
    assert_identity(t);
    assert_eq!(
        t["in_flight"], 0,
        "a single-thread run's snapshot has nothing in flight"
    );
    assert!(
        u(&t["received"]) > 1000 && u(&t["drops"]["early"]) > 0,
        "{t}"
    );

    // The table's fate line, number by number.
    let fate = text.lines().find(|l| l.starts_with("received ")).unwrap();
    assert_eq!(after(fate, "received"), u(&t["received"]));
    assert_eq!(after(fate, "forwarded"), u(&t["forwarded"]));
    assert_eq!(after(fate, "dropped"), u(&t["dropped"]));
    assert_eq!(after(fate, "queued"), u(&t["queued"]));
    assert_eq!(after(fate, "marked"), u(&t["marked"]));
    for c in DropCause::ALL {
        assert_eq!(
            after(fate, c.name()),
            u(&t["drops"][c.name()]),
            "{}",
            c.name()
        );
    }
    // Every port line's counters.
    for p in v["ports"].as_array().unwrap() {
        let name = p["name"].as_str().unwrap();
        let line = text
            .lines()
            .find(|l| l.split_whitespace().take(2).eq(["port", name]))
            .unwrap_or_else(|| panic!("port {name} in\n{text}"));
        let nums: Vec<u64> = line
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        let keys = [
            "rx_packets",
            "rx_bytes",
            "tx_packets",
            "tx_bytes",
            "rx_no_buffer",
            "rx_ring_full",
            "rx_too_long",
            "tx_ring_full",
            "tx_no_buffer",
            "tx_errors",
            "tx_link_gone",
        ];
        let want: Vec<u64> = keys.iter().map(|k| u(&p[*k])).collect();
        assert_eq!(nums, want, "{line}");
        assert!(p["classifier"]["unmapped"].is_u64());
        assert!(p["link_gone_events"].is_u64() && p["link_reattached"].is_u64());
    }
    // Every class and color line: sent, marks and drops per cause.
    let mut colors_seen = 0;
    for p in v["ports"].as_array().unwrap() {
        for c in p["classes"].as_array().unwrap() {
            for k in c["colors"].as_array().unwrap() {
                if u(&k["arrived"]) == 0 && u(&k["sent"]) == 0 {
                    continue;
                }
                let want = format!(
                    "arrived {:>8} sent {:>8} marked {:>6} dropped early {:>6} forced {:>6} tail {:>6} shutdown {:>6}",
                    u(&k["arrived"]),
                    u(&k["sent"]),
                    u(&k["marked"]),
                    u(&k["early_drops"]),
                    u(&k["forced_drops"]),
                    u(&k["tail_drops"]),
                    u(&k["shutdown_drops"])
                );
                assert!(text.contains(&want), "{want} not in\n{text}");
                assert_eq!(
                    u(&k["arrived"]),
                    u(&k["enqueued"])
                        + u(&k["early_drops"])
                        + u(&k["forced_drops"])
                        + u(&k["tail_drops"])
                );
                colors_seen += 1;
            }
        }
    }
    assert!(colors_seen >= 4, "{colors_seen}");
    // Generator groups.
    for g in v["groups"].as_array().unwrap() {
        let line = text
            .lines()
            .find(|l| l.split_whitespace().next() == g["name"].as_str())
            .unwrap();
        let nums: Vec<u64> = line
            .split_whitespace()
            .filter_map(|w| w.parse().ok())
            .collect();
        let want = [
            &g["flows"],
            &g["offered"],
            &g["forwarded"],
            &g["dropped"],
            &g["marked"],
        ]
        .map(u);
        assert_eq!(nums, want, "{line}");
    }
    assert!(
        v["ports"][0]["zombie"]["table_full_events"].is_u64(),
        "{}",
        v["ports"][0]
    );
}

/// Parses `name{labels} value` lines of a Prometheus text.
fn prom(text: &str, name: &str) -> Vec<(String, f64)> {
    let mut out = Vec::new();
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = l.rsplit_once(' ') else {
            continue;
        };
        if series.split('{').next() == Some(name) {
            out.push((series.to_owned(), value.parse().expect("a number")));
        }
    }
    out
}

/// Publishes to a hub every 100 ms of virtual time and checks each publish: the identity
/// exact in the Prometheus text and in the JSON of the same snapshot.
struct Scraper {
    hub: Arc<MetricsHub>,
    checked: u32,
}

impl Observer<Dataplane> for Scraper {
    fn progress(&mut self, now: Nanos, dp: &Dataplane) {
        self.hub.publish(now, dp);
        let text = self.hub.encode();
        let one = |n: &str| prom(&text, n)[0].1 as u64;
        let dropped: f64 = prom(&text, "zlrouter_dropped_packets_total")
            .iter()
            .map(|s| s.1)
            .sum();
        assert_eq!(
            one("zlrouter_received_packets_total"),
            one("zlrouter_forwarded_packets_total")
                + dropped as u64
                + one("zlrouter_queued_packets"),
            "{text}"
        );
        let v: Value = serde_json::from_str(&self.hub.snapshot().to_json()).unwrap();
        assert_identity(&v["totals"]);
        assert_eq!(
            u(&v["totals"]["received"]),
            one("zlrouter_received_packets_total")
        );
        self.checked += 1;
    }
}

#[test]
fn every_scrape_balances_and_stats_json_serves_the_snapshot() {
    let mut cfg = RouterConfig::from_toml(DEFAULT_CONFIG).unwrap();
    cfg.run.duration_s = 1.0;
    let mut dp = zl_dataplane::build(&cfg, &common::root()).unwrap();
    let hub = Arc::new(MetricsHub::new(&dp));
    let mut scraper = Scraper {
        hub: hub.clone(),
        checked: 0,
    };
    dp.run_virtual(
        Nanos::from_secs(1),
        Nanos::from_secs(1),
        &AtomicBool::new(false),
        Nanos::from_millis(100),
        &mut scraper,
    )
    .unwrap();
    assert!(scraper.checked >= 10, "{}", scraper.checked);

    let control = ControlThread::start(
        Some("127.0.0.1:0"),
        hub,
        Arc::new(AtomicBool::new(false)),
        None,
    )
    .unwrap();
    let addr = control.local_addr().unwrap().to_string();
    let out = zlrouter(&["stats", "--json", "--addr", &addr]);
    control.stop();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("stats --json prints JSON");
    assert_identity(&v["totals"]);
    assert_eq!(u(&v["totals"]["received"]), dp.totals().received);
    assert_eq!(u(&v["totals"]["forwarded"]), dp.totals().forwarded);
}
