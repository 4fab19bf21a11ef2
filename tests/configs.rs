//! Every config in `configs/` loads and runs for a short virtual time with the conservation
//! identity exact; invalid configs are rejected with messages that name the key, the value and
//! what was expected.

mod common;

use zl_dataplane::config::PortKind;
use zl_dataplane::{build, RouterConfig, StopReason, DEFAULT_CONFIG};

#[test]
fn every_shipped_config_loads_and_runs_briefly() {
    let dir = common::root().join("configs");
    let mut seen = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("configs/ exists") {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        let mut cfg =
            RouterConfig::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if cfg.ports.iter().any(|p| p.kind == PortKind::AfXdp) {
            // Needs live interfaces (linux-router.toml): loaded, validated and its forwarding
            // resolved here; tests/kernel_routing.rs runs the same settings on the lab's veths.
            cfg.forwarding()
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            seen.push(path.file_name().unwrap().to_string_lossy().into_owned());
            continue;
        }
        cfg.run.duration_s = cfg.run.duration_s.min(1.0);
        cfg.run.drain_s = 0.5;
        let (dp, reason) = common::run(&cfg, &dir);
        let t = dp.totals();
        assert!(
            t.received > 100,
            "{}: only {} packets",
            path.display(),
            t.received
        );
        assert!(t.forwarded > 0, "{}: nothing forwarded", path.display());
        assert!(matches!(
            reason,
            StopReason::Finished | StopReason::DrainTimeout
        ));
        common::assert_conserved(&dp);
        seen.push(path.file_name().unwrap().to_string_lossy().into_owned());
    }
    seen.sort();
    let expected = [
        "buffer-sizing.toml",
        "default.toml",
        "diffserv-sojourn.toml",
        "linux-router.toml",
        "nonlinear-red.toml",
        "priority-ecn.toml",
        "sred.toml",
        "zlred.toml",
    ];
    for e in expected {
        assert!(seen.iter().any(|s| s == e), "configs/{e} is missing");
    }
}

#[test]
fn the_embedded_default_is_configs_default() {
    let on_disk = std::fs::read_to_string(common::root().join("configs/default.toml")).unwrap();
    assert_eq!(on_disk, DEFAULT_CONFIG);
}

/// A valid minimal config, with `{}` replaced by the case's extra text.
const BASE: &str = r#"
[run]
duration_s = 0.1

[[ports]]
name = "in"
kind = "generator"
mac = "02:00:00:00:00:01"
[[ports.generator.flows]]
name = "f"
rate_bps = 1_000_000
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
link_rate_bps = 10_000_000
[[qos.classes]]
name = "be"
weight = 1
"#;

fn error_of(text: &str) -> String {
    let cfg = match RouterConfig::from_toml(text) {
        Ok(c) => c,
        Err(e) => return e.to_string(),
    };
    match build(&cfg, &common::root()) {
        Ok(_) => String::from("(accepted)"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn the_minimal_base_config_is_valid() {
    assert_eq!(error_of(BASE), "(accepted)");
}

#[test]
fn invalid_configs_are_rejected_with_the_key_value_and_expectation() {
    let replace = |from: &str, to: &str| {
        assert!(BASE.contains(from), "test bug: {from:?} not in BASE");
        BASE.replacen(from, to, 1)
    };
    let checks: Vec<(String, Vec<&str>)> = vec![
        (
            format!("{BASE}\n[bogus]\nx = 1\n"),
            vec!["unknown field `bogus`"],
        ),
        (
            replace("duration_s = 0.1", "duration_s = -1.0"),
            vec!["run.duration_s", "-1", "0 < seconds"],
        ),
        (
            replace("duration_s = 0.1", "duration_s = 0.1\nwork_budget = 0"),
            vec!["run.work_budget", "0", "1..=65536"],
        ),
        (
            replace("mac = \"02:00:00:00:00:01\"", "mac = \"02:00:00:00:00\""),
            vec!["ports[0].mac", "02:00:00:00:00", "MAC address"],
        ),
        (
            replace("name = \"out\"", "name = \"in\""),
            vec!["ports[1].name", "\"in\"", "unique"],
        ),
        (
            replace("kind = \"sink\"", "kind = \"nic\""),
            vec!["unknown variant `nic`", "generator", "pcap", "sink"],
        ),
        (
            replace("kind = \"sink\"", "kind = \"pcap\""),
            vec!["ports[1].pcap", "[ports.pcap]"],
        ),
        (
            replace("prefix = \"10.9.0.0/16\"", "prefix = \"10.9.0.0/33\""),
            vec!["routes[0].prefix", "10.9.0.0/33", "exceeds 32"],
        ),
        (
            replace("port = \"out\"", "port = \"wan\""),
            vec!["routes[0].port", "\"wan\"", "configured port"],
        ),
        (
            replace(
                "next_hop_mac = \"02:00:00:00:00:03\"",
                "next_hop_mac = \"xx\"",
            ),
            vec!["routes[0].next_hop_mac", "\"xx\""],
        ),
        (
            replace("rate_bps = 1_000_000", "rate_bps = 0"),
            vec!["ports[0].generator.flows[0].rate_bps", "0", "above 0"],
        ),
        (
            replace("rate_bps = 1_000_000", "rate_bps = 1_000_000\nsize = 20"),
            vec!["ports[0].generator.flows[0].size", "20", "60..=1514"],
        ),
        (
            replace("dst = \"10.9.0.1\"", "dst = \"2001:db8::1\""),
            vec!["flows[0].dst", "2001:db8::1", "same family"],
        ),
        (
            replace(
                "rate_bps = 1_000_000",
                "rate_bps = 1_000_000\ndscp = \"af99\"",
            ),
            vec!["flows[0].dscp", "af99"],
        ),
        (
            replace("weight = 1", "weight = 0"),
            vec!["qos.classes[0].weight", "> 0"],
        ),
        (
            replace(
                "weight = 1",
                "weight = 1\naqm = { kind = \"red\", min_th = 10.0, max_th = 5.0 }",
            ),
            vec!["qos.classes[0].aqm.max_th", "5"],
        ),
        (
            replace("weight = 1", "weight = 1\naqm = { kind = \"cake\" }"),
            vec!["unknown variant `cake`"],
        ),
        (
            replace(
                "[[routes]]",
                "[forwarding]\nmode = \"bridge\"\nbridge = [[\"in\", \"nowhere\"]]\n[[routes]]",
            ),
            vec!["routes", "bridge"],
        ),
        (
            replace("[qos]", "[parse]\ncc_ext_next_header = 6\n[qos]"),
            vec!["parse.cc_ext_next_header", "6"],
        ),
        (
            replace(
                "[qos]",
                "[priority]\nsource = \"dscp-table\"\ntable = [{ dscp = \"ef\", priority = 16 }]\n[qos]",
            ),
            vec!["priority.table[0].priority", "16", "0..=15"],
        ),
        (
            replace("kind = \"sink\"", "kind = \"af-xdp\""),
            vec!["ports[1].af_xdp", "[ports.af_xdp]", "ifname"],
        ),
    ];
    for (text, needles) in checks {
        let msg = error_of(&text);
        for n in &needles {
            assert!(msg.contains(n), "error {msg:?} should mention {n:?}");
        }
    }
}

#[test]
fn a_missing_pcap_file_is_a_port_error_naming_the_port() {
    let text = BASE.replacen(
        "kind = \"sink\"",
        "kind = \"pcap\"\npcap = { read = \"no/such/file.pcap\" }",
        1,
    );
    let msg = error_of(&text);
    assert!(
        msg.contains("port `out`") && msg.contains("opening the pcap"),
        "{msg}"
    );
}
