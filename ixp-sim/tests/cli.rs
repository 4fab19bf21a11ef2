//! The `ixp-sim` binary: `run` prints the figures, bad input exits 2 naming the field,
//! `sweep` writes a CSV and PNG/SVG plots.

use std::process::Command;

fn ixp_sim(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ixp-sim"))
        .args(args)
        .output()
        .expect("run ixp-sim");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn run_prints_the_figures() {
    let (code, out, err) = ixp_sim(&[
        "run",
        "zlred-table",
        "--rx-tx",
        "16:8",
        "--clock",
        "200",
        "--profile",
        "seed",
        "--cycles",
        "50000",
    ]);
    assert_eq!(code, 0, "{err}");
    for needle in [
        "Mpps",
        "latency",
        "rx MEs",
        "tx MEs",
        "sram",
        "sdram",
        "bottleneck",
        "200 MHz",
    ] {
        assert!(out.contains(needle), "missing {needle:?} in\n{out}");
    }
}

#[test]
fn json_report_parses() {
    let (code, out, err) = ixp_sim(&["run", "ipv4", "--json", "--cycles", "20000"]);
    assert_eq!(code, 0, "{err}");
    let v: serde_json::Value = serde_json::from_str(&out).expect("valid JSON");
    assert_eq!(v["workload"], "ipv4");
    assert!(v["mpps"].as_f64().unwrap() > 1.0);
    assert_eq!(v["units"].as_array().unwrap().len(), 5);
    assert_eq!(v["bottleneck"], "ix-bus bandwidth");
}

#[test]
fn bad_input_exits_2_naming_the_field() {
    for (args, field) in [
        (vec!["run", "ipv4", "--rx-tx", "10:14"], "rx_threads"),
        (vec!["run", "ipv4", "--rx-tx", "16:9"], "--rx-tx"),
        (vec!["run", "ipv4", "--clock", "20"], "clock_mhz"),
        (vec!["run", "ipv4", "--profile", "fast"], "--profile"),
        (
            vec!["run", "ipv4", "--latency", "sram=30-20"],
            "units.sram.latency",
        ),
        (
            vec!["run", "ipv4", "--place", "zombie_list=sdram"],
            "regions.zombie_list",
        ),
        (vec!["run", "ipv4", "--zombie-m", "10"], "--zombie-m"),
        (vec!["run", "/nonexistent/w.toml"], "WORKLOAD"),
    ] {
        let (code, _, err) = ixp_sim(&args);
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(err.contains(field), "{args:?}: {err:?} should name {field}");
    }
}

#[test]
fn sweep_writes_csv_and_plots() {
    let dir = std::env::temp_dir().join(format!("ixp-sim-cli-{}", std::process::id()));
    let d = dir.to_str().unwrap();
    // Plot text needs a system font (plotters' ttf backend via fontconfig); without one the
    // plots are skipped and said so, the CSV and tables are still checked.
    let fonts = [
        "/usr/share/fonts",
        "/usr/local/share/fonts",
        "/System/Library/Fonts",
    ]
    .iter()
    .any(|p| std::path::Path::new(p).is_dir());
    let mut args = vec![
        "sweep",
        "--out",
        d,
        "--m",
        "10,100",
        "--thread-counts",
        "2,4",
        "--cycles",
        "20000",
    ];
    if !fonts {
        eprintln!("no system fonts found: skipping the plot files");
        args.push("--no-plots");
    }
    let (code, out, err) = ixp_sim(&args);
    assert_eq!(code, 0, "{err}");
    let csv = std::fs::read_to_string(dir.join("sweep.csv")).unwrap();
    let mut lines = csv.lines();
    assert!(lines
        .next()
        .unwrap()
        .starts_with("profile,workload,placement,m,"));
    // Per profile: 5 workloads x (base + 1 other thread count + 4 other splits) + 2 ZL-RED
    // designs x 2 sizes x 2 placements.
    assert_eq!(lines.count(), 2 * (5 * 6 + 8), "{out}");
    let md = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(md.contains("| datasheet | zlred-table | 100 |"), "{md}");
    assert_eq!(md.matches("\n| seed | ipv4 |").count(), 3, "{md}");
    for f in ["mpps_vs_m", "mpps_vs_threads", "mpps_vs_split"] {
        if !fonts {
            break;
        }
        for ext in ["png", "svg"] {
            let p = dir.join(format!("{f}.{ext}"));
            assert!(
                std::fs::metadata(&p)
                    .map(|m| m.len() > 1000)
                    .unwrap_or(false),
                "{p:?}"
            );
        }
    }
    std::fs::remove_dir_all(&dir).ok();
}
