//! The DPDK example (`examples/c/dpdk_zlred.c`): ZL-RED through the C ABI in front of an
//! `rte_ring` egress queue on a `net_null` port. Built against the system's libdpdk
//! (pkg-config) and run with the EAL arguments that need no hugepages and no PCI device.
//! Only with `--features dpdk` (CI's DPDK step); the feature asks for DPDK, so a missing
//! libdpdk is a failure here, not a skip.
#![cfg(feature = "dpdk")]

mod common;

use std::path::Path;
use std::process::Command;

use common::lib_dir;

#[test]
fn dpdk_example_drops_the_heavy_flow_most() {
    let pkg = Command::new("pkg-config")
        .args(["--cflags", "--libs", "libdpdk"])
        .output()
        .expect("pkg-config");
    assert!(
        pkg.status.success(),
        "pkg-config finds no libdpdk (install libdpdk-dev): {}",
        String::from_utf8_lossy(&pkg.stderr)
    );
    let flags = String::from_utf8(pkg.stdout).expect("UTF-8");
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = lib_dir();
    let exe = lib.join("c-dpdk_zlred");
    let out = Command::new("cc")
        .args(["-O2", "-std=gnu11", "-Wall", "-Wextra", "-Werror", "-I"])
        .arg(crate_dir.join("include"))
        .arg(crate_dir.join("examples/c/dpdk_zlred.c"))
        .args(flags.split_whitespace())
        .arg(lib.join("libzl_aqm_capi.a"))
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&exe)
        .output()
        .expect("running cc");
    assert!(
        out.status.success(),
        "cc dpdk_zlred.c: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    let prefix = format!("zlr-capi-{}", std::process::id());
    let run = Command::new(&exe)
        .args([
            "--no-huge",
            "--no-pci",
            "-m",
            "512",
            "--file-prefix",
            &prefix,
        ])
        .args([
            "-l",
            "0",
            "--vdev",
            "net_null0",
            "--log-level=*:warning",
            "--",
            "300000",
        ])
        .output()
        .expect("running dpdk_zlred");
    let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/{prefix}"));
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "dpdk_zlred failed:\n{stdout}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let field = |name: &str| -> f64 {
        stdout
            .split_whitespace()
            .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in:\n{stdout}"))
    };
    assert_eq!(field("received"), 300_000.0, "{stdout}");
    assert_eq!(
        field("ring_full"),
        0.0,
        "ZL-RED's tail drop keeps the ring from overflowing"
    );
    // The link serves 29 of 32 arrivals: about 9 % must go, mostly by early drop.
    let dropped = field("early_drops") + field("tail_drops") + field("forced_drops");
    assert!((0.07..0.12).contains(&(dropped / 300_000.0)), "{stdout}");
    let (heavy, others) = (
        field("heavy_flow_drop_rate"),
        field("other_flows_drop_rate"),
    );
    assert!(heavy > 3.0 * others, "{stdout}");
}
