//! The drop capture through a crash and a full disk: each pcapng block reaches the file in one
//! write, so a router killed outright (`kill -9`, no handler runs) mid-overload leaves a file
//! that tshark reads to its end; on a full file system the capture says "No space left on
//! device" while running (once), cuts a partial block back off, and `written` is exactly the
//! packets in the file.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// 1000-byte frames at 200 Mbit/s into a 10 Mbit/s shaper with a short tail-drop queue:
/// nearly every packet is dropped and captured; `capture` is the `[capture]` table's lines.
/// The single-thread loop on virtual time runs as fast as it can (drops in the hundreds of
/// thousands per second of wall time, more than the writer takes: the ring overflows too).
fn overload(capture: &str) -> String {
    format!(
        r#"
[run]
duration_s = 100000.0

[[ports]]
name = "gen"
kind = "generator"
mac = "02:00:00:00:00:01"
[[ports.generator.flows]]
name = "flood"
rate_bps = 200_000_000
size = 1000
src = "10.0.0.1"
dst = "192.0.2.1"

[[ports]]
name = "out"
kind = "sink"
mac = "02:00:00:00:00:02"

[qos]
shaper = {{ rate_bps = 10_000_000 }}
classifier = {{ default_class = "be", standard = false }}
[[qos.classes]]
name = "be"
weight = 1
max_packets = 16

[[routes]]
prefix = "0.0.0.0/0"
port = "out"
next_hop_mac = "02:00:00:00:00:fe"

[capture]
{capture}
"#
    )
}

/// Whether tshark is here; skipped (SKIPPED, or a failure under `ZLR_REQUIRE_ENV`) if not.
fn have_tshark(test: &str) -> bool {
    if Command::new("tshark").arg("-v").output().is_ok() {
        return true;
    }
    zl_testkit::netns::skip(test, "tshark is not installed; .ci/run installs it");
    false
}

/// The packets tshark reads from `path`, after checking that it read the file to its end
/// without an error (exit status, and no "cut short" or "damaged" on stderr).
fn tshark_packets(path: &Path) -> u64 {
    let out = Command::new("tshark")
        .args([
            "-r",
            path.to_str().unwrap(),
            "-T",
            "fields",
            "-e",
            "frame.number",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && !err.contains("cut short") && !err.contains("damaged"),
        "tshark on {}: {:?} {err}",
        path.display(),
        out.status
    );
    String::from_utf8_lossy(&out.stdout).lines().count() as u64
}

/// The packet blocks of `path`, read with pcap-file, which fails on any partial block.
fn blocks(path: &Path) -> u64 {
    let bytes = std::fs::read(path).unwrap();
    let mut r = pcap_file::pcapng::PcapNgReader::new(&bytes[..])
        .unwrap_or_else(|e| panic!("{}: {e} ({} bytes)", path.display(), bytes.len()));
    let mut n = 0;
    while let Some(b) = r.next_block() {
        let b = b.unwrap_or_else(|e| panic!("block after {n} packets of {}: {e}", path.display()));
        if matches!(b, pcap_file::pcapng::Block::EnhancedPacket(_)) {
            n += 1;
        }
    }
    n
}

/// `kill -9` at different points of an overloaded run: every time the capture reads to its end
/// (tshark and pcap-file agree on the number of packets) and holds packets.
#[test]
fn a_capture_cut_by_kill_9_reads_to_its_end() {
    if !have_tshark("drop capture after kill -9") {
        return;
    }
    // Blocks of about 300 bytes, so a buffered writer's cut (at its buffer's size) would
    // almost always fall inside one.
    for (round, after_ms) in [50u64, 100, 150, 200, 250].into_iter().enumerate() {
        let dir = common::scratch(&format!("capture-kill9-{round}"));
        let cfg = dir.join("flood.toml");
        std::fs::write(&cfg, overload("file = \"drops.pcapng\"\nsnap_len = 200")).unwrap();
        let running = common::spawn_until_progress(&["run", cfg.to_str().unwrap(), "--json"]);
        std::thread::sleep(std::time::Duration::from_millis(after_ms));
        let Some((out, rest)) = common::signal_and_wait(running, "-KILL") else {
            return zl_testkit::netns::skip(
                "drop capture after kill -9",
                "the `kill` command is not available",
            );
        };
        assert!(!out.status.success(), "not killed: {rest}");
        let path = dir.join("drops.pcapng");
        let n = tshark_packets(&path);
        assert_eq!(
            n,
            blocks(&path),
            "round {round}: tshark and pcap-file disagree"
        );
        assert!(n > 0, "round {round}: nothing captured in {after_ms} ms");
        eprintln!(
            "kill -9 after {after_ms} ms: {n} packets, {} bytes, read to the end",
            std::fs::metadata(&path).unwrap().len()
        );
        // Tens of MB each: not kept once checked.
        let _ = std::fs::remove_file(&path);
    }
}

/// A tmpfs of 64 KiB mounted over a directory of this test, unmounted and removed on drop.
struct SmallFs(PathBuf);

impl SmallFs {
    fn mount(dir: PathBuf) -> Result<SmallFs, String> {
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=64k", "zlcap-full"])
            .arg(&dir)
            .output()
            .map_err(|e| e.to_string())?;
        if !out.status.success() {
            let _ = std::fs::remove_dir(&dir);
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        Ok(SmallFs(dir))
    }
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// On a file system that fills up while the router runs: the OS's reason is logged while it
/// runs, once; the file still reads to its end; `written` counts exactly the packets in it
/// and every captured packet that did not fit is a `write_errors`.
#[test]
fn a_full_disk_is_named_while_running_and_the_file_stays_whole() {
    const TEST: &str = "drop capture on a full disk";
    if !zl_testkit::netns::is_root() {
        return zl_testkit::netns::skip(TEST, "needs root to mount a small tmpfs");
    }
    if !have_tshark(TEST) {
        return;
    }
    let dir = common::scratch("capture-full-disk");
    let fs = match SmallFs::mount(dir.join("small")) {
        Ok(fs) => fs,
        Err(e) => return zl_testkit::netns::skip(TEST, &format!("cannot mount a tmpfs: {e}")),
    };
    let cfg = dir.join("flood.toml");
    std::fs::write(&cfg, overload("file = \"small/drops.pcapng\"")).unwrap();
    let mut running = common::spawn_until_progress(&["run", cfg.to_str().unwrap(), "--json"]);
    // While it runs: the router is still up when the reason appears (the 64 KiB can fill
    // before the first progress line, which `seen` already holds).
    const REASON: &str = "No space left on device";
    let named = running.seen.contains(REASON) || common::read_stderr_until(&mut running, REASON);
    assert!(named, "no \"{REASON}\": {}", running.seen);
    assert!(
        running.child.try_wait().unwrap().is_none(),
        "the router exited: {}",
        running.seen
    );
    let running_seen = running.seen.clone();
    let Some((out, rest)) = common::signal_and_wait(running, "-TERM") else {
        return zl_testkit::netns::skip(TEST, "the `kill` command is not available");
    };
    assert!(out.status.success(), "{rest}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let cap = &v["capture"];
    let path = fs.0.join("drops.pcapng");
    let n = tshark_packets(&path);
    assert_eq!(n, blocks(&path));
    assert!(n > 0, "{cap}");
    assert_eq!(cap["written"].as_u64(), Some(n), "{cap}");
    assert!(cap["write_errors"].as_u64().unwrap() > 0, "{cap}");
    // Logged once, not per packet (the retries once a second find the disk still full).
    assert_eq!(
        running_seen.matches(REASON).count() + rest.matches(REASON).count(),
        1,
        "logged more than once: {running_seen} {rest}"
    );
    eprintln!(
        "full disk: {n} packets in {} bytes; {cap}",
        std::fs::metadata(&path).unwrap().len()
    );
}
