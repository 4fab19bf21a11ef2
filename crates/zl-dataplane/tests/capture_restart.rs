//! A start keeps the previous run's drop capture: the file and its rotations move to the
//! `.prev` set (replacing an older one, whose extra files are removed) instead of being
//! truncated; a set without a packet replaces nothing; a move that fails leaves the old
//! capture as it was and the new run captures nothing, counting each packet as lost.

use std::path::{Path, PathBuf};

use pcap_file::pcapng::{Block, PcapNgReader};
use zl_core::{Color, Nanos};
use zl_dataplane::capture::{keep_previous, member, CaptureParams, CaptureWriter, PREV};
use zl_dataplane::DropCause;
use zl_port::BufPool;

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("zl-capture-restart-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// One run of the capture in `dir`: `drops` dropped 1000-byte frames, files of at least
/// 65536 bytes (about 60 frames each); its statistics.
fn run(dir: &Path, drops: u64) -> zl_dataplane::capture::CaptureStats {
    let params = CaptureParams {
        file: "drops.pcapng".into(),
        causes: None,
        marked: false,
        snap_len: 65535,
        rate_pps: None,
        rotate_bytes: Some(65536),
        ring: 16,
    };
    let (mut tap, mut writer) = CaptureWriter::start(
        &params,
        dir,
        vec!["lan".into(), "wan".into()],
        vec![vec![], vec!["be".into()]],
    )
    .unwrap();
    let mut pool = BufPool::new(1, 2048);
    for t in 0..drops {
        let mut buf = pool.alloc().unwrap();
        buf.copy_from(&[t as u8; 1000]).unwrap();
        buf.out_port = 1;
        tap.set_clock(Nanos(t));
        tap.dropped(&buf, DropCause::Early, Some((0, Color::Green)));
        pool.free(buf);
        // The ring holds 16: let the writer keep up, so nothing overflows.
        while tap.stats().written + tap.stats().write_errors + 8 < t {
            std::thread::yield_now();
        }
    }
    writer.close();
    writer.stats()
}

/// The packets of one pcapng file (pcap-file fails on a block cut short).
fn packets(path: &Path) -> u64 {
    let mut r = PcapNgReader::new(std::fs::File::open(path).unwrap()).unwrap();
    let mut n = 0;
    while let Some(b) = r.next_block() {
        if matches!(b.unwrap(), Block::EnhancedPacket(_)) {
            n += 1;
        }
    }
    n
}

/// The files of `dir`, by name, with their contents.
fn files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().to_string_lossy().into_owned(),
                std::fs::read(e.path()).unwrap_or_default(),
            )
        })
        .collect();
    v.sort();
    v
}

/// `files` with the names of one set renamed to the `.prev` set's.
fn as_prev(set: &[(String, Vec<u8>)]) -> Vec<(String, Vec<u8>)> {
    let mut v: Vec<_> = set
        .iter()
        .map(|(n, b)| {
            let name = match n.strip_prefix("drops-") {
                Some(rest) => format!("drops{PREV}-{rest}"),
                None => n.replace("drops.", &format!("drops{PREV}.")),
            };
            (name, b.clone())
        })
        .collect();
    v.sort();
    v
}

#[test]
fn names_of_the_previous_set() {
    let base = Path::new("/var/lib/zlrouter/drops.pcapng");
    assert_eq!(member(base, "", 0), base);
    assert_eq!(
        member(base, "", 2),
        Path::new("/var/lib/zlrouter/drops-2.pcapng")
    );
    assert_eq!(
        member(base, PREV, 0),
        Path::new("/var/lib/zlrouter/drops.prev.pcapng")
    );
    assert_eq!(
        member(base, PREV, 3),
        Path::new("/var/lib/zlrouter/drops.prev-3.pcapng")
    );
    let bare = Path::new("cap");
    assert_eq!(member(bare, PREV, 0), Path::new("cap.prev"));
    assert_eq!(member(bare, PREV, 1), Path::new("cap.prev-1"));
}

/// Three runs of different lengths: each start moves the run before it to the `.prev` set
/// whole (same bytes), and the set of two runs back is gone, none of its extra files left.
#[test]
fn each_start_keeps_one_previous_run_whole() {
    let dir = scratch("three");
    let first = run(&dir, 200);
    assert_eq!(first.written, 200);
    let one = files(&dir);
    assert!(one.len() >= 3, "rotated into several files: {one:?}");
    let in_one: u64 = one.iter().map(|(n, _)| packets(&dir.join(n))).sum();
    assert_eq!(in_one, 200);

    let second = run(&dir, 30);
    assert_eq!(second.written, 30);
    let now = files(&dir);
    let (prev, cur): (Vec<_>, Vec<_>) = now.into_iter().partition(|(n, _)| n.contains(PREV));
    assert_eq!(prev, as_prev(&one), "the first run's files, moved whole");
    assert_eq!(cur.len(), 1, "{cur:?}");
    assert_eq!(packets(&dir.join("drops.pcapng")), 30);

    run(&dir, 10);
    let now = files(&dir);
    let (prev, cur): (Vec<_>, Vec<_>) = now.into_iter().partition(|(n, _)| n.contains(PREV));
    assert_eq!(
        prev.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>(),
        ["drops.prev.pcapng"],
        "only the second run's one file: the first run's rotations removed"
    );
    assert_eq!(packets(&dir.join("drops.prev.pcapng")), 30);
    assert_eq!(cur.len(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A run that captured nothing leaves a file of headers only: the next start does not move
/// it, and the `.prev` set of the run that captured stays.
#[test]
fn a_run_without_a_packet_replaces_nothing() {
    let dir = scratch("empty");
    run(&dir, 100);
    run(&dir, 5);
    let empty = run(&dir, 0);
    assert_eq!((empty.written, empty.files), (0, 1));
    // The 5-packet run is the `.prev` set; drops.pcapng holds headers only.
    let prev = |d: &Path| -> Vec<_> {
        files(d)
            .into_iter()
            .filter(|(n, _)| n.contains(PREV))
            .collect()
    };
    let was = prev(&dir);
    assert_eq!(was.len(), 1);
    assert_eq!(packets(&dir.join("drops.prev.pcapng")), 5);
    run(&dir, 7);
    assert_eq!(
        prev(&dir),
        was,
        "the empty run replaced the previous capture"
    );
    assert_eq!(packets(&dir.join("drops.pcapng")), 7);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A move that fails (here a directory where the `.prev` file would go: `rename` refuses it
/// even to root, as a read-only file system or a directory the router cannot write would):
/// the capture starts anyway, writes nothing, counts every packet as a write error, and the
/// previous capture is byte for byte what it was.
#[test]
fn a_capture_that_cannot_be_moved_is_left_alone_and_nothing_is_written() {
    let dir = scratch("blocked");
    run(&dir, 20);
    let before = std::fs::read(dir.join("drops.pcapng")).unwrap();
    std::fs::create_dir_all(dir.join("drops.prev.pcapng").join("in-the-way")).unwrap();
    let blocked = run(&dir, 12);
    assert_eq!(
        (blocked.written, blocked.files, blocked.write_errors),
        (0, 0, 12)
    );
    assert_eq!(std::fs::read(dir.join("drops.pcapng")).unwrap(), before);
    assert!(!dir.join("drops-1.pcapng").exists());
    let err = keep_previous(&dir.join("drops.pcapng")).unwrap_err();
    assert!(
        err.contains("drops.pcapng") && err.contains("drops.prev.pcapng"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
