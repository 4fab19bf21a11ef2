//! "No lock on the packet path" for the AF_XDP halves, as a rule the tests check
//! (the data plane's own is `zl-dataplane/tests/packet_path_locks.rs`):
//! - the functions every burst goes through (a receive half's `recv`, the transmit half's
//!   `send`, the attachment check `ready`, and the socket parts' ring work and wakeups) may
//!   not name `Mutex` or `RwLock` nor call `.lock()` / `.try_lock()`;
//! - in `src/halves.rs`, the one file with a lock, every function that takes it is `#[cold]`
//!   (the interface gone or back, one look per 100 ms), or is the lock helper itself.
//!
//! The rule reads the source, so a lock added on the packet path, or a lock-taking function
//! that loses its `#[cold]`, fails this test in CI's `cargo test --workspace`.

use zl_testkit::source::fn_body;

const HALVES: &str = include_str!("../src/halves.rs");
const SOCKET: &str = include_str!("../src/socket.rs");
const RING: &str = include_str!("../src/ring.rs");

/// The packet path: (file, how the function's signature starts, what it is).
const PACKET_PATH: &[(&str, &str, &str)] = &[
    (HALVES, "fn recv(", "a receive half's burst"),
    (HALVES, "fn send(", "the transmit half's burst"),
    (HALVES, "fn ready(", "the attachment check of every burst"),
    (
        SOCKET,
        "pub fn recv_with(",
        "RX ring to frames, chunks back to fill",
    ),
    (SOCKET, "fn wakeup_rx(", "the receive wakeup / health check"),
    (SOCKET, "pub fn stage_tx(", "a frame into a TX chunk"),
    (SOCKET, "pub fn flush_tx(", "publishing the TX ring"),
    (SOCKET, "fn kick_tx(", "the transmit wakeup"),
    (SOCKET, "fn reclaim(", "completion ring to free chunks"),
];

const FORBIDDEN: &[&str] = &["Mutex", "RwLock", ".lock()", ".try_lock()"];

/// The code lines (comments stripped) of `text` that name or take a lock.
fn locks(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| {
            let code = l.split("//").next().unwrap_or("");
            FORBIDDEN.iter().any(|f| code.contains(f))
        })
        .map(|l| l.trim().to_owned())
        .collect()
}

/// The signatures of the functions in `source` that take a lock without being `#[cold]`
/// (the lock helper `fn lock(` excepted): for each `.lock()` / `.try_lock()`, the nearest
/// `fn ` above it and the attribute lines just above that.
fn uncold_lockers(source: &str) -> Vec<String> {
    let lines: Vec<&str> = source.lines().collect();
    let mut bad = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        if !(code.contains(".lock()") || code.contains(".try_lock()")) {
            continue;
        }
        let Some(f) = (0..=i)
            .rev()
            .find(|&j| lines[j].trim_start().contains("fn "))
        else {
            bad.push(line.trim().to_owned());
            continue;
        };
        let sig = lines[f].trim();
        let attrs = (0..f)
            .rev()
            .map(|j| lines[j].trim())
            .take_while(|l| l.starts_with("#[") || l.starts_with("///"));
        let cold = attrs.into_iter().any(|l| l == "#[cold]");
        if !cold && !sig.contains("fn lock(") && !bad.iter().any(|b| b == sig) {
            bad.push(sig.to_owned());
        }
    }
    bad
}

#[test]
fn no_lock_is_taken_on_the_afxdp_packet_path() {
    for (source, start, what) in PACKET_PATH {
        let b = fn_body(source, start)
            .unwrap_or_else(|| panic!("no `{start}` ({what}) in zl-afxdp: update the list"));
        let bad = locks(b);
        assert!(bad.is_empty(), "a lock in `{start}` ({what}): {bad:?}");
    }
    assert!(locks(SOCKET).is_empty(), "{:?}", locks(SOCKET));
    assert!(locks(RING).is_empty(), "{:?}", locks(RING));
    let bad = uncold_lockers(HALVES);
    assert!(
        bad.is_empty(),
        "functions taking the lock, not #[cold]: {bad:?}"
    );
}

/// The checks themselves find a lock, and a lock-taking function that is not cold.
#[test]
fn the_rules_catch_a_lock() {
    let src = "fn recv(x: u32) {\n    if x > 0 {\n        let g = m.lock();\n    }\n}\n\
               fn other() { m.lock(); }\n";
    let b = fn_body(src, "fn recv(").unwrap();
    assert!(!b.contains("other"));
    assert_eq!(locks(b), vec!["let g = m.lock();".to_owned()]);
    assert!(locks("fn f() {\n    // a .lock() in a comment\n}\n").is_empty());
    let src = "    #[cold]\n    fn sync(&mut self) {\n        let st = self.shared.lock();\n    }\n\
               \n    /// Doc.\n    #[inline]\n    fn hot(&mut self) {\n        let s = x.try_lock();\n    }\n\
               \n    fn lock(&self) -> G {\n        self.state.lock()\n    }\n";
    assert_eq!(uncold_lockers(src), vec!["fn hot(&mut self) {".to_owned()]);
}
