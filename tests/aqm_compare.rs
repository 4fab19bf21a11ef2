//! The AQM comparison harness (`scripts/aqm-compare`, docs/aqm-comparison.md) end to end, short
//! (root; about 80 s): its flood scenario through FQ-CoDel and ZL-RED with isolation on real
//! Linux TCP and iperf3 through this build's `zlrouter`, and through the kernel's own
//! forwarding with `pfifo` under `htb` (the reference path, with the one leaf qdisc every kernel
//! has). The figures themselves are the harness's to report; this checks that it runs, that
//! every run measured something, and what holds at any duration: FQ-CoDel holds each flood
//! near its share, and the isolation names the floods in `zlrouter flows`.

use std::path::Path;
use std::process::Command;

use zl_testkit::netns::{is_root, skip};

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn the_harness_runs_the_flood_through_fq_codel_the_isolation_and_the_kernel() {
    const TEST: &str = "aqm_compare";
    if !is_root() {
        return skip(TEST, "needs root");
    }
    if let Some(t) = ["python3", "iperf3", "ping", "ethtool", "tc", "ss"]
        .into_iter()
        .find(|t| !have(t))
    {
        return skip(TEST, &format!("`{t}` is not installed"));
    }
    let out = std::env::temp_dir().join(format!("zlaqmc-test-{}", std::process::id()));
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/aqm-compare/aqm-compare");
    let run = Command::new("python3")
        .arg(&script)
        .args([
            "--scale",
            "0.2",
            "--scenarios",
            "flood",
            "--kernel",
            "pfifo",
        ])
        .args(["--policies", "fq-codel,zl-red-isolation"])
        .args(["--zlrouter", env!("CARGO_BIN_EXE_zlrouter")])
        .arg("--out")
        .arg(&out)
        .output()
        .expect("run python3");
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "the harness failed:\n{stderr}");
    let results: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("results.json")).unwrap()).unwrap();
    let _ = std::fs::remove_dir_all(&out);
    let flood = |policy: &str| results["results"][policy]["flood"].clone();
    for policy in ["fq-codel", "zl-red-isolation", "kernel pfifo"] {
        let r = flood(policy);
        assert!(r.get("error").is_none(), "{policy}: {r}\n{stderr}");
        let udp: Vec<f64> = (r["udp_mbit"].as_array().unwrap().iter())
            .map(|v| v.as_f64().unwrap())
            .collect();
        assert!(udp.iter().all(|&u| u > 0.5), "{policy}: {r}");
        assert!(
            r["tcp_goodput_mbit"].as_f64().unwrap() > 0.5,
            "{policy}: {r}"
        );
    }
    // FQ-CoDel: each flood near its share of 20 Mbit/s among 7 flows (TCP leaves some of its
    // share to them: the queue is work-conserving).
    for share in flood("fq-codel")["udp_share_of_fair"].as_array().unwrap() {
        assert!(share.as_f64().unwrap() < 2.0, "{}", flood("fq-codel"));
    }
    // The isolation: the floods are in `zlrouter flows` as misbehaving.
    let iso = flood("zl-red-isolation");
    assert!(iso["seconds_to_named"].as_f64().is_some(), "{iso}");
    assert!(!iso["flood_ids"].as_array().unwrap().is_empty(), "{iso}");
}
