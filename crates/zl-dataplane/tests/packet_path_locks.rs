//! "No lock on the packet path" as a rule the tests check: the functions of `src/mt.rs` and
//! `src/stages.rs` that every packet goes through, on the receive and the transmit workers,
//! may not name `Mutex` or `RwLock` nor call `.lock()`, `.try_lock()`, `.read()`/`.write()`
//! of a lock, or `lock_port(`. A line that must (for now) says why, on the line itself or on the
//! line just above, with a `// lock-ok: <reason>` comment, so each exception is in plain view
//! and counted here.
//!
//! The rule reads the source, so a lock added to one of these functions (or a helper renamed
//! away from the list) fails this test, in CI's `cargo test --workspace`.

use zl_testkit::source::fn_body;

const MT: &str = include_str!("../src/mt.rs");
const STAGES: &str = include_str!("../src/stages.rs");

/// The receive stages both engines run: (how the function's signature starts, what it is).
const STAGE_PATH: &[(&str, &str)] = &[
    (
        "pub(crate) fn forward_stage(",
        "the forward stage of a burst",
    ),
    (
        "pub(crate) fn observe_stage<",
        "the observe stage of a burst",
    ),
    ("fn observe_run<", "the observation of one port's run"),
];

/// The threaded router's packet path: (how the function's signature starts, what it is).
const PACKET_PATH: &[(&str, &str)] = &[
    ("fn rx_worker<", "a receive worker's loop"),
    (
        "fn forward_burst(",
        "a receive worker's stages of one burst",
    ),
    ("fn discard(", "a packet forwarding did not keep"),
    ("fn take_ring(", "a transmit worker's admission from a ring"),
    ("fn admit_run(", "a transmit worker's admission of a run"),
    ("fn round(", "one transmit round over a worker's ports"),
    ("fn tx_helper<", "a transmit helper's loop"),
    ("fn send(", "the egress link's send burst"),
    ("fn recycle(", "the egress link's buffer return"),
    ("fn give(", "the return ring's push"),
];

/// The exceptions allowed today, each marked `// lock-ok:` on its line. Lowering this is the
/// point; raising it needs a reason in review.
const ALLOWED_EXCEPTIONS: usize = 4;

const FORBIDDEN: &[&str] = &[
    "Mutex",
    "RwLock",
    ".lock()",
    ".try_lock()",
    "lock_port(",
    ".read().",
    ".write().",
];

/// The lines of `body` that take or name a lock: (forbidden and unmarked, marked exceptions).
fn locks(body: &str) -> (Vec<String>, usize) {
    let mut bad = Vec::new();
    let mut marked = 0;
    let mut above = "";
    for line in body.lines() {
        let code = line.split("//").next().unwrap_or("");
        let excused = line.contains("// lock-ok:") || above.trim_start().starts_with("// lock-ok:");
        above = line;
        if FORBIDDEN.iter().any(|f| code.contains(f)) {
            if excused {
                marked += 1;
            } else {
                bad.push(line.trim().to_owned());
            }
        }
    }
    (bad, marked)
}

#[test]
fn no_lock_is_taken_on_the_packet_path() {
    let mut marked = 0;
    let path = (PACKET_PATH.iter().map(|p| ("src/mt.rs", MT, p)))
        .chain(STAGE_PATH.iter().map(|p| ("src/stages.rs", STAGES, p)));
    for (file, text, (start, what)) in path {
        let b = fn_body(text, start)
            .unwrap_or_else(|| panic!("{file} has no `{start}` ({what}): update the list"));
        let (bad, m) = locks(b);
        assert!(
            bad.is_empty(),
            "a lock on the packet path in `{start}` ({what}): {bad:?}"
        );
        marked += m;
    }
    assert!(
        marked <= ALLOWED_EXCEPTIONS,
        "{marked} `// lock-ok:` exceptions on the packet path, {ALLOWED_EXCEPTIONS} allowed"
    );
}

/// The port types whose halves share the port behind a lock (`zl_port::split_locked`, one lock
/// per burst). None: every port type the router runs has halves of its own (AF_XDP and DPDK
/// were the last); adding one here needs a reason in review.
const LOCKED_PORTS: &[&str] = &[];

/// Every `src/` file of the workspace's crates and of the root package.
fn sources() -> Vec<std::path::PathBuf> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut dirs = vec![root.join("src")];
    for c in std::fs::read_dir(root.join("crates")).unwrap() {
        dirs.push(c.unwrap().path().join("src"));
    }
    let mut files = Vec::new();
    while let Some(d) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                files.push(p);
            }
        }
    }
    files
}

/// A port type that the threaded router runs splits into halves of its own: only the ports in
/// [`LOCKED_PORTS`] share themselves behind a lock.
#[test]
fn only_the_listed_ports_split_behind_a_lock() {
    let mut found = Vec::new();
    for f in sources() {
        let text = std::fs::read_to_string(&f).unwrap();
        let is_def = f.ends_with("zl-port/src/halves.rs") || f.ends_with("zl-port/src/lib.rs");
        if !is_def && text.contains("split_locked(") {
            found.push(f.display().to_string());
        }
    }
    for f in &found {
        assert!(
            LOCKED_PORTS.iter().any(|l| f.ends_with(l)),
            "{f} splits a port behind a lock (zl_port::split_locked): give it halves of its own"
        );
    }
    for l in LOCKED_PORTS {
        assert!(
            found.iter().any(|f| f.ends_with(l)),
            "{l} no longer splits behind a lock: take it off LOCKED_PORTS"
        );
    }
}

/// The checker itself finds a lock, and takes a marked one only as an exception.
#[test]
fn the_rule_catches_a_lock() {
    let src =
        "fn forward_one(x: u32) {\n    if x > 0 {\n        let g = m.lock().unwrap();\n    }\n}\n\
               fn other() { m.lock(); }\n";
    let b = fn_body(src, "fn forward_one(").unwrap();
    assert!(!b.contains("other"));
    assert_eq!(locks(b).0, vec!["let g = m.lock().unwrap();".to_owned()]);
    let marked =
        "fn f() {\n    let g = m.try_lock(); // lock-ok: a test\n    // a .lock() in a comment\n\
                  // lock-ok: above\n    let h = m.lock();\n    let i = m.lock();\n}\n";
    assert_eq!(
        locks(fn_body(marked, "fn f(").unwrap()),
        (vec!["let i = m.lock();".to_owned()], 2)
    );
    assert_eq!(
        locks("fn g() { let s: Mutex<u8>; }").0,
        vec!["fn g() { let s: Mutex<u8>; }"]
    );
}
