//! The drop capture through a crash and a full disk: each pcapng block reaches the file in one
//! write, so a router killed outright (`kill -9`, no handler runs) mid-overload leaves a file
//! that tshark reads to its end; on a full file system the capture says "No space left on
//! device" while running (once), cuts a partial block back off, and `written` is exactly the
//! packets in the file.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use zl_testkit::config::{quoted, ClassToml, FlowToml, PortToml, QosToml, RouterToml};

/// 1000-byte frames at 200 Mbit/s into a 10 Mbit/s shaper with a short tail-drop queue:
/// nearly every packet is dropped and captured into `capture_file`; tests add the rest of
/// their `[capture]` table with `.set("capture", ...)`. The single-thread loop on virtual time
/// runs as fast as it can (drops in the hundreds of thousands per second of wall time, more
/// than the writer takes: the ring overflows too).
fn overload(capture_file: &str) -> RouterToml {
    RouterToml::new()
        // Far longer than any test lets it run: each one ends it with a signal.
        .set("run", "duration_s", "100000.0")
        .port(
            PortToml::generator("gen", "02:00:00:00:00:01").flow(
                FlowToml::udp("flood", "10.0.0.1", "192.0.2.1")
                    .rate_bps(200_000_000)
                    .size(1000),
            ),
        )
        .port(common::sink_out())
        .route("0.0.0.0/0", "out", Some(common::NEXT_HOP_MAC))
        .qos(
            QosToml::new()
                .set("shaper", "{ rate_bps = 10_000_000 }")
                .set(
                    "classifier",
                    r#"{ default_class = "be", standard = false }"#,
                )
                .class(ClassToml::new("be").weight(1).max_packets(16)),
        )
        .set("capture", "file", quoted(capture_file))
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
        std::fs::write(
            &cfg,
            overload("drops.pcapng")
                .set("capture", "snap_len", 200)
                .to_toml(),
        )
        .unwrap();
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
    std::fs::write(&cfg, overload("small/drops.pcapng").to_toml()).unwrap();
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

/// The files of the capture set `tag` (`""`, or `.prev`) in `dir`: `drops<tag>.pcapng`, then
/// `drops<tag>-1.pcapng`, ... up to the first missing, with their bytes.
fn capture_set(dir: &Path, tag: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let mut set = Vec::new();
    for i in 0u64.. {
        let name = match i {
            0 => format!("drops{tag}.pcapng"),
            i => format!("drops{tag}-{i}.pcapng"),
        };
        match std::fs::read(dir.join(&name)) {
            Ok(bytes) => set.push((dir.join(name), bytes)),
            Err(_) if i == 0 => {}
            Err(_) => break,
        }
    }
    set
}

/// Starts the router on `cfg` and kills it (`kill -9`) once `ready(dir)`; what it printed
/// before its first progress line.
fn run_and_kill_9(cfg: &Path, ready: impl Fn(&Path) -> bool) -> Option<String> {
    let running = common::spawn_until_progress(&["run", cfg.to_str().unwrap(), "--json"]);
    let dir = cfg.parent().unwrap();
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !ready(dir) && std::time::Instant::now() < give_up {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let seen = running.seen.clone();
    let (out, rest) = common::signal_and_wait(running, "-KILL")?;
    assert!(!out.status.success(), "not killed: {rest}");
    assert!(ready(dir), "not ready within 20 s: {seen}{rest}");
    Some(seen)
}

/// `systemd` restarts a crashed router 2 s later: the start keeps the crash's capture (the
/// file and its rotations, moved to `drops.prev*.pcapng` byte for byte, tshark reading each to
/// its end with the packets it held) instead of truncating it, and says where it went; a third
/// start keeps only the run before it (the first run's files gone, none left over), so a crash
/// loop holds at most two runs' captures.
#[test]
fn a_restart_after_kill_9_keeps_the_crashed_runs_capture() {
    const TEST: &str = "drop capture kept through a restart";
    if !have_tshark(TEST) {
        return;
    }
    let dir = common::scratch("capture-restart");
    let cfg = dir.join("flood.toml");
    // 20 captures a second of virtual time (the loop runs it about 35 times as fast): files of
    // 64 KiB (about 200 blocks of ~300 bytes) a few tenths of a second apart.
    std::fs::write(
        &cfg,
        overload("drops.pcapng")
            .set("capture", "snap_len", 200)
            .set("capture", "rate_pps", 20)
            .set("capture", "rotate_bytes", 65536)
            .to_toml(),
    )
    .unwrap();
    let holds_packets =
        |d: &Path| std::fs::metadata(d.join("drops.pcapng")).is_ok_and(|m| m.len() > 1000);
    let Some(_) = run_and_kill_9(&cfg, |d| d.join("drops-2.pcapng").exists()) else {
        return zl_testkit::netns::skip(TEST, "the `kill` command is not available");
    };
    let first = capture_set(&dir, "");
    let counts: Vec<u64> = first.iter().map(|(p, _)| blocks(p)).collect();
    assert!(
        first.len() >= 3 && counts.iter().all(|&n| n > 0),
        "{counts:?}"
    );

    let seen = run_and_kill_9(&cfg, holds_packets).unwrap();
    assert!(
        seen.contains("previous run's capture is now")
            && seen.contains(dir.join("drops.prev.pcapng").to_str().unwrap()),
        "the start does not say where the capture went: {seen}"
    );
    let prev = capture_set(&dir, ".prev");
    assert_eq!(prev.len(), first.len(), "{seen}");
    for (((p, bytes), (_, was)), n) in prev.iter().zip(&first).zip(&counts) {
        assert!(
            bytes == was,
            "{} is not the crashed run's file",
            p.display()
        );
        assert_eq!(tshark_packets(p), *n, "{}", p.display());
    }
    let second = capture_set(&dir, "");
    let second_packets = blocks(&second[0].0);

    let seen = run_and_kill_9(&cfg, holds_packets).unwrap();
    assert!(seen.contains("replacing the one before it"), "{seen}");
    let prev = capture_set(&dir, ".prev");
    assert!(
        prev.iter()
            .map(|(_, b)| b)
            .eq(second.iter().map(|(_, b)| b)),
        "the .prev set is not the second run's"
    );
    assert_eq!(tshark_packets(&prev[0].0), second_packets);
    // Nothing else: the first run's extra rotations are gone.
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let third = capture_set(&dir, "");
    assert_eq!(
        names.len(),
        1 + prev.len() + third.len(),
        "more than the config, one previous set and the current one: {names:?}"
    );
    eprintln!(
        "restarts: first run {} files ({} packets) kept whole, then replaced by the second's {}",
        first.len(),
        counts.iter().sum::<u64>(),
        second.len()
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A restart where the crash's capture cannot be moved aside (its file system now read-only):
/// the router starts and forwards anyway, says why nothing is captured, counts every packet it
/// would have captured as a write error, and leaves the old capture byte for byte as it was.
#[test]
fn a_capture_that_cannot_be_moved_is_left_whole_and_the_router_runs() {
    const TEST: &str = "drop capture on a read-only file system after a restart";
    if !zl_testkit::netns::is_root() {
        return zl_testkit::netns::skip(TEST, "needs root to mount a tmpfs");
    }
    let dir = common::scratch("capture-restart-ro");
    let fs = match SmallFs::mount(dir.join("small")) {
        Ok(fs) => fs,
        Err(e) => return zl_testkit::netns::skip(TEST, &format!("cannot mount a tmpfs: {e}")),
    };
    let cfg = dir.join("flood.toml");
    std::fs::write(
        &cfg,
        overload("small/drops.pcapng")
            .set("capture", "snap_len", 200)
            .set("capture", "rate_pps", 20)
            .to_toml(),
    )
    .unwrap();
    let path = fs.0.join("drops.pcapng");
    let ready = |_: &Path| std::fs::metadata(&path).is_ok_and(|m| m.len() > 1000);
    if run_and_kill_9(&cfg, ready).is_none() {
        return zl_testkit::netns::skip(TEST, "the `kill` command is not available");
    }
    let before = std::fs::read(&path).unwrap();
    let remounted = Command::new("mount")
        .args(["-o", "remount,ro"])
        .arg(&fs.0)
        .status();
    assert!(remounted.is_ok_and(|s| s.success()), "remount read-only");
    let running = common::spawn_until_progress(&["run", cfg.to_str().unwrap(), "--json"]);
    let seen = running.seen.clone();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let (out, rest) = common::signal_and_wait(running, "-TERM").unwrap();
    assert!(out.status.success(), "{seen}{rest}");
    assert!(
        seen.contains("could not be moved aside") && seen.contains("Read-only file system"),
        "{seen}"
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let cap = &v["capture"];
    assert_eq!(cap["files"].as_u64(), Some(0), "{cap}");
    assert_eq!(cap["written"].as_u64(), Some(0), "{cap}");
    assert!(cap["write_errors"].as_u64().unwrap() > 0, "{cap}");
    assert!(
        v["totals"]["forwarded"].as_u64().unwrap() > 0,
        "{}",
        v["totals"]
    );
    assert!(
        std::fs::read(&path).unwrap() == before,
        "the old capture changed"
    );
    assert!(!fs.0.join("drops.prev.pcapng").exists());
}
