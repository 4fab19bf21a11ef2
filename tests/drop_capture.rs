//! Drop capture (`[capture]`): every dropped packet, and every marked one when
//! asked, is in the pcapng file with its cause as the packet's comment, so the counts per
//! cause in the capture (read back by tshark, and by pcap-file) equal the final table's when
//! the rate cap is not hit; over the cap or past a full ring, what is missing is counted.
//! The single-thread loop and the threaded workers capture through the same hook.

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use pcap_file::pcap::{PcapPacket, PcapWriter};
use pcap_file::pcapng::{Block, PcapNgReader};
use serde_json::Value;
use zl_dataplane::DropCause;
use zl_testkit::frames::Udp;

fn ipv4_udp(src: [u8; 4], dst: [u8; 4], tos: u8, ttl: u8, len: usize) -> Vec<u8> {
    Udp::v4(src, dst).tos(tos).ttl(ttl).len(len).build()
}

/// 1 s of 1000-byte frames every 400 µs (20 Mbit/s into a 10 Mbit/s shaper): half ECT(0)
/// (marked early), half not-ECT (dropped early), plus every 50th with TTL 1, every 50th
/// without a route, every 50th a runt.
fn write_input(path: &Path) {
    let mut w = PcapWriter::new(std::fs::File::create(path).unwrap()).unwrap();
    for i in 0..2500u32 {
        let t = Duration::from_micros(400 * i as u64);
        let src = [10, 0, 0, 1 + (i % 8) as u8];
        let f = match i % 50 {
            7 => ipv4_udp(src, [192, 0, 2, 1], 0, 1, 1000),
            17 => ipv4_udp(src, [203, 0, 113, 1], 0, 64, 1000),
            27 => vec![0u8; 20],
            _ => ipv4_udp(
                src,
                [192, 0, 2, 1],
                if i % 2 == 0 { 2 } else { 0 },
                64,
                1000,
            ),
        };
        w.write_packet(&PcapPacket::new(t, f.len() as u32, &f))
            .unwrap();
    }
}

/// RED with ECN behind a 10 Mbit/s shaper, `capture` (the `[capture]` table's lines), the
/// single-thread loop or one receive worker.
fn config(capture: &str, threaded: bool) -> String {
    common::pcap_replay(common::sink_out())
        .set("run", "duration_s", 1.0)
        .set("run", "drain_s", 0.5)
        .set("run", "seed", 3)
        .set("run", "rx_workers", u32::from(threaded))
        .qos(common::red_ecn_egress(40))
        .raw(&format!("[capture]\n{capture}"))
        .to_toml()
}

/// Runs `zlrouter run <cfg> --json` in `dir`; the final statistics.
fn run(dir: &Path, cfg: &str) -> Value {
    std::fs::write(dir.join("router.toml"), cfg).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_zlrouter"))
        .args(["run", "router.toml", "--quiet", "--json"])
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The `cause=` of every packet's comment, counted, read with pcap-file; also checks each
/// comment names the ports (and, for the egress causes, the class and color).
fn causes_in(path: &Path) -> BTreeMap<String, u64> {
    let mut r = PcapNgReader::new(std::fs::File::open(path).unwrap()).unwrap();
    let mut out = BTreeMap::new();
    while let Some(b) = r.next_block() {
        if let Block::EnhancedPacket(p) = b.unwrap() {
            let comment = p
                .options
                .iter()
                .find_map(|o| match o {
                    pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketOption::Comment(
                        c,
                    ) => Some(c.to_string()),
                    _ => None,
                })
                .expect("every packet has a comment");
            let cause = comment
                .strip_prefix("cause=")
                .and_then(|c| c.split(' ').next())
                .unwrap()
                .to_owned();
            assert!(comment.contains(" in=in"), "{comment}");
            if ["early", "forced", "tail", "marked"].contains(&cause.as_str()) {
                assert!(
                    comment.contains(" out=out class=be color=green"),
                    "{comment}"
                );
            }
            *out.entry(cause).or_default() += 1;
        }
    }
    out
}

/// The same counts as tshark reads them (`frame.comment`), or `None` (skipped) without
/// tshark.
fn tshark_causes(path: &Path) -> Option<BTreeMap<String, u64>> {
    let Ok(o) = Command::new("tshark").arg("-v").output() else {
        zl_testkit::netns::skip(
            "drop capture tshark check",
            "tshark is not installed; .ci/run installs it",
        );
        return None;
    };
    assert!(o.status.success());
    let out = Command::new("tshark")
        .args([
            "-r",
            path.to_str().unwrap(),
            "-T",
            "fields",
            "-e",
            "frame.comment",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut m = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let cause = line
            .strip_prefix("cause=")
            .unwrap()
            .split(' ')
            .next()
            .unwrap();
        *m.entry(cause.to_owned()).or_default() += 1;
    }
    // The display filter of docs/operations.md selects exactly the early drops.
    let early = Command::new("tshark")
        .args([
            "-r",
            path.to_str().unwrap(),
            "-Y",
            "frame.comment contains \"cause=early\"",
        ])
        .output()
        .unwrap();
    let n = String::from_utf8_lossy(&early.stdout).lines().count() as u64;
    assert_eq!(n, m.get("early").copied().unwrap_or(0));
    Some(m)
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap()
}

/// Capture counts per cause equal the table's, on both loops.
#[test]
fn capture_counts_equal_the_final_tables_counts() {
    for threaded in [false, true] {
        let dir = common::scratch(if threaded {
            "drop-capture-mt"
        } else {
            "drop-capture"
        });
        write_input(&dir.join("in.pcap"));
        let v = run(
            &dir,
            &config("file = \"drops.pcapng\"\nmarked = true", threaded),
        );
        let t = &v["totals"];
        let mut want: BTreeMap<String, u64> = DropCause::ALL
            .iter()
            .map(|c| (c.name().to_owned(), u(&t["drops"][c.name()])))
            .filter(|(_, n)| *n > 0)
            .collect();
        want.insert("marked".into(), u(&t["marked"]));
        for cause in [
            "parse_error",
            "no_route",
            "ttl_expired",
            "early",
            "forced",
            "marked",
        ] {
            assert!(want.get(cause).copied().unwrap_or(0) > 0, "{cause}: {t}");
        }
        let got = causes_in(&dir.join("drops.pcapng"));
        assert_eq!(got, want, "threaded {threaded}");
        let cap = &v["capture"];
        assert_eq!(u(&cap["overflow"]) + u(&cap["rate_limited"]), 0, "{cap}");
        assert_eq!(u(&cap["written"]), got.values().sum::<u64>());
        if let Some(ts) = tshark_causes(&dir.join("drops.pcapng")) {
            assert_eq!(ts, want, "tshark, threaded {threaded}");
        }
    }
}

/// Only the causes asked for; over the rate cap the rest is counted `rate_limited`; a small
/// rotation size makes several complete files that hold every captured packet between them.
#[test]
fn causes_cap_and_rotation() {
    let dir = common::scratch("drop-capture-options");
    write_input(&dir.join("in.pcap"));
    let v = run(
        &dir,
        &config(
            "file = \"drops.pcapng\"\ncauses = [\"forced\", \"no_route\"]\nsnap_len = 128\nrotate_bytes = 65536",
            false,
        ),
    );
    let t = &v["totals"]["drops"];
    let mut got: BTreeMap<String, u64> = BTreeMap::new();
    let files = u(&v["capture"]["files"]);
    assert!(files >= 2, "{}", v["capture"]);
    for k in 0..files {
        let name = if k == 0 {
            "drops.pcapng".to_owned()
        } else {
            format!("drops-{k}.pcapng")
        };
        for (c, n) in causes_in(&dir.join(name)) {
            *got.entry(c).or_default() += n;
        }
    }
    let want: BTreeMap<String, u64> =
        [("no_route", u(&t["no_route"])), ("forced", u(&t["forced"]))]
            .into_iter()
            .map(|(c, n)| (c.to_owned(), n))
            .collect();
    assert_eq!(got, want);

    let dir = common::scratch("drop-capture-cap");
    write_input(&dir.join("in.pcap"));
    let v = run(
        &dir,
        &config("file = \"drops.pcapng\"\nrate_pps = 100", false),
    );
    let dropped = u(&v["totals"]["dropped"]);
    let written = u(&v["capture"]["written"]);
    let limited = u(&v["capture"]["rate_limited"]);
    // A burst of one second's worth (100), then 100 per second of the run's clock.
    let most = 100 + (100.0 * v["time_s"].as_f64().unwrap()).ceil() as u64;
    assert!(
        (100..=most).contains(&written),
        "{} (at most {most})",
        v["capture"]
    );
    assert_eq!(written + limited, dropped);
    assert_eq!(
        causes_in(&dir.join("drops.pcapng")).values().sum::<u64>(),
        written
    );
}

/// A bad `[capture]` is refused naming the key.
#[test]
fn invalid_capture_options_name_the_key() {
    let dir = common::scratch("drop-capture-invalid");
    write_input(&dir.join("in.pcap"));
    for (opt, key) in [
        ("causes = [\"early\", \"bogus\"]", "capture.causes[1]"),
        ("snap_len = 10", "capture.snap_len"),
        ("rate_pps = 0", "capture.rate_pps"),
        ("rotate_bytes = 100", "capture.rotate_bytes"),
    ] {
        std::fs::write(
            dir.join("bad.toml"),
            config(&format!("file = \"d.pcapng\"\n{opt}"), false),
        )
        .unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_zlrouter"))
            .args(["check", "bad.toml"])
            .current_dir(&dir)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{opt}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(key), "{opt}: {err}");
    }
}
