//! Misbehaving flows, named: the default config's misbehaving flows are the top of
//! its egress list, named by address, with their packets and drops; a pcap replay gives the
//! same list for the same seed; the Prometheus series of the list are bounded by
//! `metrics.top_flows`.

mod common;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use pcap_file::pcap::{PcapPacket, PcapWriter};
use serde_json::Value;
use zl_control::metrics::MetricsHub;
use zl_core::Nanos;
use zl_dataplane::{RouterConfig, DEFAULT_CONFIG};
use zl_testkit::config::{ClassToml, QosToml};
use zl_testkit::frames::Udp;

fn zlrouter(args: &[&str], dir: &Path) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_zlrouter"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("zlrouter runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is one JSON document")
}

fn top_flows<'a>(v: &'a Value, port: &str) -> &'a Vec<Value> {
    v["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == port)
        .unwrap_or_else(|| panic!("port {port}"))["top_flows"]
        .as_array()
        .unwrap()
}

/// `zlrouter run` with no arguments: the flows the config marks misbehaving (their groups'
/// `misbehaving = true`, however many) are the top of the egress list, each named, flagged
/// by eq. (4), with its egress drops by cause; every flow of a well-behaved group is below
/// them. The text table lists the same flows in the same order.
#[test]
fn default_config_lists_its_misbehaving_flows_on_top() {
    let root = common::root();
    let v = zlrouter(&["run", "--quiet", "--json"], &root);
    let groups = v["groups"].as_array().unwrap();
    let bad: Vec<&str> = groups
        .iter()
        .filter(|g| g["misbehaving"] == true)
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    let n_bad: u64 = groups
        .iter()
        .filter(|g| g["misbehaving"] == true)
        .map(|g| g["flows"].as_u64().unwrap())
        .sum();
    assert!(n_bad > 0, "the default config has misbehaving flows");
    // The egress port of the default route.
    let cfg = RouterConfig::from_toml(DEFAULT_CONFIG).unwrap();
    let wan = &cfg.routes[0].port;
    let flows = top_flows(&v, wan);
    assert!(flows.len() > n_bad as usize, "{flows:?}");
    let mut keys = std::collections::BTreeSet::new();
    for (rank, f) in flows.iter().enumerate() {
        let group = f["group"].as_str().unwrap_or("");
        if rank < n_bad as usize {
            assert!(bad.contains(&group), "rank {}: {f}", rank + 1);
            assert_eq!(f["misbehaving"], true, "{f}");
            assert!(f["relative_occurrence"].as_f64().unwrap() > 1.0, "{f}");
            assert!(f["packets"].as_u64().unwrap() > 0, "{f}");
            let drops: u64 = f["drops"]
                .as_object()
                .unwrap()
                .values()
                .map(|d| d.as_u64().unwrap())
                .sum();
            assert!(drops > 0 && drops < f["packets"].as_u64().unwrap(), "{f}");
            assert!(keys.insert(f["key"].as_str().unwrap().to_owned()), "{f}");
        } else {
            assert!(!bad.contains(&group), "rank {}: {f}", rank + 1);
        }
        // Sorted by F, the share F/T consistent with it.
        if rank > 0 {
            assert!(f["occurrence"].as_u64() <= flows[rank - 1]["occurrence"].as_u64());
        }
    }
    // The misbehaving group's sources, as the text table shows them, in the same order.
    let out = Command::new(env!("CARGO_BIN_EXE_zlrouter"))
        .args(["run", "--quiet"])
        .current_dir(&root)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let table: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("== top flows"))
        .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .collect();
    assert_eq!(table.len(), flows.len(), "{text}");
    for (line, f) in table.iter().zip(flows) {
        assert!(line.contains(f["key"].as_str().unwrap()), "{line} vs {f}");
    }
}

/// 2 s of 1000-byte frames: four sources at 100 packets/s each (10.0.9.x) and forty at
/// 10 packets/s (10.0.1.x), 6.4 Mbit/s in all, interleaved in a fixed order.
fn write_capture(path: &Path) {
    let mut w = PcapWriter::new(std::fs::File::create(path).unwrap()).unwrap();
    let mut t = Duration::ZERO;
    for k in 0..800u32 {
        for src in [
            [10, 0, 9, 1 + (k % 4) as u8],
            [10, 0, 1, 1 + (k % 40) as u8],
        ] {
            let f = Udp::v4(src, [192, 0, 2, 10]).len(1000).build();
            w.write_packet(&PcapPacket::new(t, f.len() as u32, &f))
                .unwrap();
            t += Duration::from_micros(1250);
        }
    }
}

/// The capture replayed into a 4 Mbit/s ZL-RED egress, top 6 flows listed.
fn replay_config() -> String {
    common::pcap_replay(common::sink_out())
        .set("run", "duration_s", 2.0)
        .set("run", "drain_s", 1.0)
        .set("metrics", "flow_estimate", true)
        .set("metrics", "top_flows", 6)
        .qos(
            QosToml::shaped(4_000_000).class(
                ClassToml::new("be")
                    .weight(1)
                    .max_packets(200)
                    .aqm(r#"{ kind = "zl-red", th_min = 5, p_max = 0.15, a = 10 }"#),
            ),
        )
        .to_toml()
}

/// A replay of one capture with one seed twice gives the same list, value for value; its
/// top 4 are the four heavy sources.
#[test]
fn pcap_replay_lists_the_same_flows_for_the_same_seed() {
    let dir = common::scratch("top-flows-replay");
    write_capture(&dir.join("in.pcap"));
    std::fs::write(dir.join("replay.toml"), replay_config()).unwrap();
    let run = || {
        let v = zlrouter(
            &["run", "replay.toml", "--quiet", "--json", "--seed", "5"],
            &dir,
        );
        top_flows(&v, "out").clone()
    };
    let (a, b) = (run(), run());
    assert_eq!(a.len(), 6, "{a:?}");
    assert_eq!(a, b);
    let mut top4: Vec<&str> = a[..4].iter().map(|f| f["src"].as_str().unwrap()).collect();
    top4.sort();
    assert_eq!(
        top4,
        ["10.0.9.1", "10.0.9.2", "10.0.9.3", "10.0.9.4"],
        "{a:?}"
    );
    for f in &a[..4] {
        assert_eq!(
            f["key"],
            format!("{} > 192.0.2.10", f["src"].as_str().unwrap())
        );
        assert_eq!(f["misbehaving"], true);
    }
}

/// The Prometheus text carries the top list as `zlrouter_top_flow_*{port, rank, flow}`: at
/// most `metrics.top_flows` ranks per port, the first named as the JSON's first.
#[test]
fn top_flows_are_bounded_prometheus_series() {
    let cfg = RouterConfig::from_toml(&DEFAULT_CONFIG.replace(
        "flow_estimate = true",
        "flow_estimate = true\ntop_flows = 3",
    ))
    .unwrap();
    let (dp, _) = common::run(&cfg, &common::root());
    let hub = MetricsHub::new(&dp);
    hub.publish(Nanos::from_secs(10), &dp);
    let text = hub.encode();
    let snap = hub.snapshot();
    let wan = snap.ports.iter().find(|p| !p.top_flows.is_empty()).unwrap();
    assert_eq!(wan.top_flows.len(), 3);
    let series: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("zlrouter_top_flow_occurrence{"))
        .collect();
    assert_eq!(series.len(), 3, "{text}");
    let first = &wan.top_flows[0];
    assert!(
        series[0].contains(&format!(
            "port=\"{}\",rank=\"1\",flow=\"{}\"",
            wan.name,
            first.key.as_deref().unwrap()
        )),
        "{}",
        series[0]
    );
    assert!(
        series[0].ends_with(&format!(" {}", first.occurrence)),
        "{}",
        series[0]
    );
    assert!(text.contains("zlrouter_top_flow_misbehaving{"), "{text}");
}

/// `zlrouter flows` reads a running router's list (from `/stats.json`): the table, `--top`,
/// `--port`, `--json`; `zlrouter stats` summarises the same ranks.
#[test]
fn cli_flows_reads_a_running_router() {
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;
    use zl_control::control::ControlThread;

    let cfg = RouterConfig::from_toml(DEFAULT_CONFIG).unwrap();
    let (dp, _) = common::run(&cfg, &common::root());
    let hub = Arc::new(MetricsHub::new(&dp));
    hub.publish(Nanos::from_secs(10), &dp);
    let snap = hub.snapshot();
    let control = ControlThread::start(
        Some("127.0.0.1:0"),
        hub.clone(),
        Arc::new(AtomicBool::new(false)),
        None,
    )
    .unwrap();
    let addr = control.local_addr().unwrap().to_string();
    let cli = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_zlrouter"))
            .args(args)
            .output()
            .unwrap()
    };
    let table = cli(&["flows", "--addr", &addr, "--top", "2"]);
    let json = cli(&["flows", "--addr", &addr, "--json", "--port", "wan"]);
    let wrong = cli(&["flows", "--addr", &addr, "--port", "nope"]);
    let summary = cli(&["stats", "--addr", &addr]);
    control.stop();

    let wan = snap.ports.iter().find(|p| p.name == "wan").unwrap();
    let text = String::from_utf8(table.stdout).unwrap();
    assert!(table.status.success(), "{text}");
    let rows: Vec<&str> = text
        .lines()
        .filter(|l| l.trim_start().starts_with(|c: char| c.is_ascii_digit()))
        .collect();
    assert_eq!(rows.len(), 2, "{text}");
    for (row, f) in rows.iter().zip(&wan.top_flows) {
        assert!(row.contains(f.key.as_deref().unwrap()), "{row}");
        assert!(row.contains(&format!(" {} ", f.occurrence)), "{row}");
    }
    let v: Value = serde_json::from_slice(&json.stdout).unwrap();
    let listed = v["wan"].as_array().unwrap();
    assert_eq!(listed.len(), 10.min(wan.top_flows.len()));
    assert_eq!(listed[0]["key"], wan.top_flows[0].key.as_deref().unwrap());
    assert_eq!(listed[0]["occurrence"], wan.top_flows[0].occurrence);
    assert!(!wrong.status.success());
    let err = String::from_utf8_lossy(&wrong.stderr);
    assert!(err.contains("no port named `nope`"), "{err}");
    let summary = String::from_utf8(summary.stdout).unwrap();
    assert!(
        summary.contains(&format!(
            "top flow  1 {}",
            wan.top_flows[0].key.as_deref().unwrap()
        )),
        "{summary}"
    );
}
