//! DPDK ports from the router config (`kind = "dpdk"`, `[ports.dpdk]`, `[dpdk]`), through the
//! `zlrouter` binary:
//! - bad `[ports.dpdk]` / `[dpdk]` values are rejected by `zlrouter check`, naming the key
//!   (every build: the tables are checked before DPDK is needed);
//! - a build without DPDK says how to get one;
//! - with DPDK (`cargo test --features dpdk --test dpdk_config`, as root): `zlrouter run`
//!   between two `net_pcap` vdevs through ZL-RED behind a 10 Mbit/s shaper, offered a burst
//!   far above that rate: the output pcap holds exactly the forwarded frames (routed: TTL 63,
//!   next-hop MAC), the conservation identity holds, ECN-capable flows are marked and
//!   the others dropped. Skips with a message without root or without DPDK.

mod common;

use std::io::Read;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use zl_testkit::config::{quoted, ClassToml, PortToml, QosToml, RouterToml};
use zl_testkit::pcap;

/// The input traces' frames, this far apart.
const GAP: std::time::Duration = std::time::Duration::from_micros(1);

const IN_MAC: [u8; 6] = [0x02, 0, 0, 0, 0x0d, 0x01];
const NEXT_HOP_MAC: [u8; 6] = [0x02, 0, 0, 0, 0x0d, 0xfe];
/// Frames in the input pcap: 8 flows, 4 of them ECN-capable.
const FRAMES: u32 = 2400;
const FRAME_LEN: usize = 1000;

fn zlrouter(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_zlrouter"))
        .args(args)
        .output()
        .expect("zlrouter runs")
}

/// The input port `in` on `device`.
fn input(device: &str) -> PortToml {
    PortToml::dpdk("in", "02:00:00:00:0d:01", device)
}

/// The input port on the one-queue trace `in.pcap` in `dir`.
fn pcap_input(dir: &Path) -> PortToml {
    let d = dir.display();
    input(&format!(
        "net_pcap0,rx_pcap={d}/in.pcap,tx_pcap={d}/in-tx.pcap"
    ))
}

/// The two DPDK ports, `input` and `out` (writing `out.pcap` in `dir`), and ZL-RED with ECN
/// behind a 10 Mbit/s shaper: [`config`] without its route.
fn unrouted(dir: &Path, input: PortToml) -> RouterToml {
    let d = dir.display();
    RouterToml::new()
        .set("parse", "flow_key", quoted("src-dst"))
        .port(input)
        .port(PortToml::dpdk(
            "out",
            "02:00:00:00:0d:02",
            &format!("net_pcap1,rx_pcap={d}/empty.pcap,tx_pcap={d}/out.pcap"),
        ))
        .qos(
            QosToml::shaped(10_000_000)
                .set(
                    "classifier",
                    r#"{ default_class = "be", standard = false }"#,
                )
                .class(ClassToml::new("be").weight(1).max_packets(200).aqm(
                    "{ kind = \"zl-red\", ecn = true, th_min = 5, p_max = 0.15, a = 10, \
                     zombie = { m = 100, p_swap = 0.25 } }",
                )),
        )
}

/// The routed config with two DPDK ports: 198.51.100.0/24 leaves by `out` to the next hop
/// [`NEXT_HOP_MAC`]. Tests add the EAL arguments (`[dpdk]`).
fn config(dir: &Path, input: PortToml) -> RouterToml {
    unrouted(dir, input).route("198.51.100.0/24", "out", Some("02:00:00:00:0d:fe"))
}

/// The EAL arguments (`[dpdk] args`) of a run without hugepages or PCI devices, its files
/// under `--file-prefix prefix`.
fn eal_args(prefix: &str) -> String {
    format!(
        "[\"--no-huge\", \"--no-pci\", \"-m\", \"256\", \"--file-prefix\", {}, \"-l\", \"0\", \
         \"--log-level=*:warning\"]",
        quoted(prefix)
    )
}

fn check_fails_naming(dir: &Path, text: &str, needles: &[&str]) {
    let path = dir.join("bad.toml");
    std::fs::write(&path, text).unwrap();
    let out = zlrouter(&["check", path.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    for n in needles {
        assert!(err.contains(n), "{err}\nshould mention {n:?}");
    }
}

#[test]
fn bad_dpdk_values_are_rejected_naming_the_key() {
    let dir = common::scratch("dpdk-config-bad");
    let eal = eal_args("zlr-dpdkcfg-bad");
    // The config with `key = value` added to the input port's `[ports.dpdk]`.
    let bad_input = |key: &str, value: u32| {
        config(&dir, pcap_input(&dir).sub("dpdk", key, value))
            .set("dpdk", "args", &eal)
            .to_toml()
    };
    check_fails_naming(
        &dir,
        &bad_input("mbufs", 10),
        &["port `in`", "ports[0].dpdk", "mbufs 10"],
    );
    check_fails_naming(
        &dir,
        &bad_input("bogus", 1),
        &["ports[0].dpdk", "unknown field `bogus`"],
    );
    check_fails_naming(
        &dir,
        &bad_input("rx_descriptors", 0),
        &["ports[0].dpdk", "rx_descriptors"],
    );
    check_fails_naming(
        &dir,
        &config(&dir, pcap_input(&dir))
            .set("dpdk", "args", r#"["--no-huge", ""]"#)
            .to_toml(),
        &["`dpdk`", "args[1]"],
    );
    check_fails_naming(
        &dir,
        &config(&dir, pcap_input(&dir))
            .set("dpdk", "args", r#"["--no-huge"]"#)
            .set("dpdk", "huge", false)
            .to_toml(),
        &["`dpdk`", "unknown field `huge`"],
    );
    check_fails_naming(
        &dir,
        &config(&dir, pcap_input(&dir))
            .set("dpdk", "args", 5)
            .to_toml(),
        &["`dpdk`", "invalid type"],
    );
    // A DPDK port without its `[ports.dpdk]` table.
    let missing = config(&dir, PortToml::new("in", "dpdk", "02:00:00:00:0d:01"))
        .set("dpdk", "args", &eal)
        .to_toml();
    check_fails_naming(&dir, &missing, &["ports[0].dpdk", "(missing)"]);
}

#[test]
fn a_build_without_dpdk_says_how_to_rebuild() {
    // Only a build without DPDK can show this; a build with it has nothing to check here (not
    // an environment skip, so not subject to ZLR_REQUIRE_ENV).
    if zl_dpdk::AVAILABLE {
        eprintln!("SKIPPED a_build_without_dpdk_says_how_to_rebuild: this build has DPDK");
        return;
    }
    let dir = common::scratch("dpdk-config-not-built");
    let path = dir.join("dpdk.toml");
    let eal = eal_args("zlr-dpdkcfg-nb");
    std::fs::write(
        &path,
        config(&dir, pcap_input(&dir))
            .set("dpdk", "args", &eal)
            .to_toml(),
    )
    .unwrap();
    for cmd in ["check", "run"] {
        let out = zlrouter(&[cmd, path.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{cmd}: {err}");
        assert!(
            err.contains("built without DPDK") && err.contains("--features dpdk"),
            "{cmd}: {err}"
        );
        assert!(
            err.contains("`in`") || err.contains("\"in\""),
            "{cmd} names the port: {err}"
        );
    }
    // `check` still checks the rest: a bad route is reported, not the missing DPDK.
    let text = unrouted(&dir, pcap_input(&dir))
        .route("198.51.100.0/24", "nowhere", Some("02:00:00:00:0d:fe"))
        .set("dpdk", "args", &eal)
        .to_toml();
    check_fails_naming(&dir, &text, &["routes[0].port", "nowhere"]);
}

/// An Ethernet + IPv4 + UDP frame of `FRAME_LEN` bytes from flow `flow` (ECT(0) when `ect`).
fn frame(flow: u8, seq: u32, ect: bool) -> Vec<u8> {
    let mut f = vec![0u8; FRAME_LEN];
    f[0..6].copy_from_slice(&IN_MAC);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0x0d, 0x10 + flow]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[1] = if ect { 0b10 } else { 0 };
    ip[2..4].copy_from_slice(&((FRAME_LEN - 14) as u16).to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[10, 1, 0, flow]);
    ip[16..20].copy_from_slice(&[198, 51, 100, flow]);
    let sum = zl_wire::checksum::checksum(ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    f[34..36].copy_from_slice(&(5000 + u16::from(flow)).to_be_bytes());
    f[36..38].copy_from_slice(&9u16.to_be_bytes());
    f[38..40].copy_from_slice(&((FRAME_LEN - 34) as u16).to_be_bytes());
    f[42..46].copy_from_slice(&seq.to_be_bytes());
    f
}

/// `[received, forwarded, dropped, queued, marked, early drops]` from the final statistics of
/// `zlrouter run --json` (stdout: one JSON document).
fn fates(stdout: &str) -> [u64; 6] {
    let v: serde_json::Value = serde_json::from_str(stdout)
        .unwrap_or_else(|e| panic!("not one JSON document ({e}):\n{stdout}"));
    let t = &v["totals"];
    let n = |x: &serde_json::Value, key: &str| {
        x.as_u64()
            .unwrap_or_else(|| panic!("no totals {key} in\n{stdout}"))
    };
    [
        n(&t["received"], "received"),
        n(&t["forwarded"], "forwarded"),
        n(&t["dropped"], "dropped"),
        n(&t["queued"], "queued"),
        n(&t["marked"], "marked"),
        n(&t["drops"]["early"], "drops.early"),
    ]
}

#[test]
fn zlrouter_runs_between_two_net_pcap_ports_through_zl_red() {
    run_through_zl_red(
        "zlrouter_runs_between_two_net_pcap_ports_through_zl_red",
        false,
    );
}

/// The same run on the threaded router: the input port has two receive queues (two
/// `rx_pcap` files, half the frames each), split into two receive halves on two receive
/// workers, and, in a build with `dpdk-zero-copy`, `zero_copy` (its mbufs lent to the data
/// plane, rewritten in place and sent as they are). Every assertion of the single-thread run
/// holds.
#[test]
fn threaded_zero_copy_run_on_two_receive_queues() {
    run_through_zl_red("threaded_zero_copy_run_on_two_receive_queues", true);
}

fn run_through_zl_red(test: &str, threaded_zero_copy: bool) {
    // A build without the `dpdk` feature is the build's choice, not the environment's, so it
    // prints SKIPPED whatever ZLR_REQUIRE_ENV says (`cargo test --workspace` builds without
    // it); CI runs this file again with `--features dpdk` and, under ZLR_REQUIRE_ENV, fails
    // when libdpdk is missing (.ci/run). The environment's own skips below obey it.
    if !zl_dpdk::AVAILABLE {
        eprintln!(
            "SKIPPED {test}: built without DPDK (run `cargo test --features dpdk --test \
             dpdk_config` with libdpdk-dev)"
        );
        return;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        zl_testkit::netns::skip(test, "not root");
        return;
    }
    let dir = common::scratch(if threaded_zero_copy {
        "dpdk-config-mt"
    } else {
        "dpdk-config-run"
    });
    let frames: Vec<Vec<u8>> = (0..FRAMES)
        .map(|i| {
            let flow = (i % 8) as u8;
            frame(flow, i, flow < 4)
        })
        .collect();
    pcap::write_spaced(&dir.join("empty.pcap"), &[], GAP);
    let prefix = format!(
        "zlr-dpdkcfg-{}-{}",
        std::process::id(),
        u8::from(threaded_zero_copy)
    );
    let path = dir.join("dpdk.toml");
    let routed = if threaded_zero_copy {
        let (even, odd): (Vec<_>, Vec<_>) = frames
            .iter()
            .cloned()
            .enumerate()
            .partition(|(i, _)| i % 2 == 0);
        let strip = |v: Vec<(usize, Vec<u8>)>| v.into_iter().map(|(_, f)| f).collect::<Vec<_>>();
        pcap::write_spaced(&dir.join("in0.pcap"), &strip(even), GAP);
        pcap::write_spaced(&dir.join("in1.pcap"), &strip(odd), GAP);
        let d = dir.display();
        let device = format!(
            "net_pcap0,rx_pcap={d}/in0.pcap,rx_pcap={d}/in1.pcap,tx_pcap={d}/in-tx0.pcap,\
             tx_pcap={d}/in-tx1.pcap"
        );
        let mut two_queues = input(&device).sub("dpdk", "queues", 2);
        if cfg!(feature = "dpdk-zero-copy") {
            two_queues = two_queues.sub("dpdk", "zero_copy", true);
        }
        config(&dir, two_queues).set("run", "rx_workers", 2)
    } else {
        pcap::write_spaced(&dir.join("in.pcap"), &frames, GAP);
        config(&dir, pcap_input(&dir))
    };
    let text = routed.set("dpdk", "args", eal_args(&prefix)).to_toml();
    std::fs::write(&path, text).unwrap();

    let mut child = Command::new(env!("CARGO_BIN_EXE_zlrouter"))
        .args(["run", "--json", path.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id() as libc::pid_t;
    // A safety net, not a measurement: a router that never gets there is killed so the test
    // fails instead of hanging.
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let watchdog = std::thread::spawn(move || {
        if done_rx
            .recv_timeout(std::time::Duration::from_secs(120))
            .is_err()
        {
            // SAFETY: signals our own child by its pid.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    });
    // The progress line says when every frame of the file was received and the queue has
    // drained; then SIGINT ends the run (a live port never runs dry by itself).
    let want = format!("rx {FRAMES} ");
    let mut stderr = child.stderr.take().unwrap();
    let mut seen = Vec::new();
    let mut byte = [0u8; 1];
    loop {
        let text = String::from_utf8_lossy(&seen);
        let last = text.rsplit('\r').next().unwrap_or("");
        if last.contains(&want) && last.trim_end().ends_with("queued 0") {
            break;
        }
        match stderr.read(&mut byte) {
            Ok(1) => seen.push(byte[0]),
            _ => {
                let out = child.wait_with_output().unwrap();
                panic!(
                    "zlrouter ended before receiving every frame: {}\n{}",
                    String::from_utf8_lossy(&seen),
                    String::from_utf8_lossy(&out.stdout)
                );
            }
        }
    }
    // SAFETY: signals our own child by its pid.
    unsafe { libc::kill(pid, libc::SIGINT) };
    // Both pipes drained at once: a child blocked writing a full stdout pipe never closes
    // stderr.
    let rest = std::thread::spawn(move || {
        let mut rest = String::new();
        let _ = stderr.read_to_string(&mut rest);
        rest
    });
    let out = child.wait_with_output().unwrap();
    let rest = rest.join().unwrap_or_default();
    let _ = done_tx.send(());
    watchdog.join().unwrap();
    let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/{prefix}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{rest}");

    let [received, forwarded, dropped, queued, marked, early] = fates(&stdout);
    assert_eq!(received, u64::from(FRAMES), "{stdout}");
    zl_testkit::conservation::assert_conserved(received, forwarded, dropped, queued, &stdout);
    assert_eq!(queued, 0, "{stdout}");
    // 2400 kB offered at once to a 10 Mbit/s shaper behind a 200-packet queue: most is
    // dropped; ZL-RED's early decisions mark the ECN-capable flows and drop the others.
    assert!(dropped > u64::from(FRAMES) / 2, "{stdout}");
    assert!(marked > 0 && early > 0, "{stdout}");
    assert!(
        forwarded >= 200,
        "at least one queue's worth leaves: {stdout}"
    );

    let written = pcap::read_frames(&dir.join("out.pcap"));
    assert_eq!(
        written.len() as u64,
        forwarded,
        "every forwarded frame is written"
    );
    let mut ce = 0;
    for f in &written {
        assert_eq!(f.len(), FRAME_LEN);
        assert_eq!(f[0..6], NEXT_HOP_MAC, "routed to the next hop");
        assert_eq!(f[14 + 8], 63, "TTL decremented");
        assert!(zl_wire::checksum::verifies(&f[14..34]), "IPv4 checksum");
        if f[15] & 0b11 == 0b11 {
            ce += 1;
            assert!(f[14 + 15] < 4, "only ECN-capable flows are marked");
        }
    }
    assert_eq!(ce, marked, "each mark is a CE frame on the wire");
    tshark_agrees(&dir.join("out.pcap"), forwarded, ce);
}

/// When tshark is installed: it reads the router's output file and counts the same frames
/// and CE marks.
fn tshark_agrees(path: &Path, frames: u64, ce: u64) {
    let out = Command::new("tshark")
        .args([
            "-r",
            path.to_str().unwrap(),
            "-T",
            "fields",
            "-e",
            "ip.dsfield.ecn",
        ])
        .output();
    let out = match out {
        Ok(out) => out,
        Err(e) => {
            // A missing tool is the environment: a skip, a failure under ZLR_REQUIRE_ENV.
            zl_testkit::netns::skip(
                "dpdk_config tshark cross-check",
                &format!("tshark not run ({e}): the pcap was checked in Rust only"),
            );
            return;
        }
    };
    assert!(
        out.status.success(),
        "tshark cannot read the output: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len() as u64, frames, "tshark's frame count");
    assert_eq!(
        lines.iter().filter(|l| l.trim() == "3").count() as u64,
        ce,
        "tshark's CE count"
    );
}
