//! Fault tests of the `zlrouter` binary: what a hostile or unlucky user does to it. Each
//! test says what went wrong without the behaviour it pins.
//!
//! - `check` writes nothing (an existing output capture keeps its bytes);
//! - `check` refuses the `metrics.listen` values `run` refuses, and accepts a bare port;
//! - a closed stdout pipe ends the process quietly (status 141, no panic), for `run` and
//!   `stats`; a full stdout is one clear error (status 2);
//! - an OS error is printed once, not twice;
//! - warnings carry no colour codes on a pipe and start on their own line, and frames of an
//!   input capture left unread at the end of the run are counted in one;
//! - `stats` against an endpoint that never answers says so in words;
//! - the metrics endpoint keeps answering after `accept()` failed for lack of file
//!   descriptors, and counts the failures.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use zl_testkit::config::{quoted, ClassToml, PortToml, QosToml, RouterToml};

fn zlrouter() -> Command {
    Command::new(env!("CARGO_BIN_EXE_zlrouter"))
}

/// Runs `cmd` to its end, killed (by PID) if it outlives `common::CHILD_WITHIN`.
fn output(mut cmd: Command) -> Output {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn zlrouter");
    let done = common::watchdog(child.id(), common::CHILD_WITHIN);
    let out = child.wait_with_output().expect("wait for zlrouter");
    let _ = done.send(());
    out
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A bridge from a pcap (replayed) to a pcap (written).
fn pcap_bridge(read: &str, write: &str) -> RouterToml {
    RouterToml::new()
        .set("run", "duration_s", "1.0")
        .set("run", "drain_s", 0.5)
        .bridge(&[("a", "b")])
        .port(PortToml::pcap_reader("a", "02:00:00:00:00:0a", read))
        .port(PortToml::pcap_writer("b", "02:00:00:00:00:0b", write))
        .qos(
            QosToml::new()
                .set("link_rate_bps", 1_000_000_000)
                .class(ClassToml::new("be").weight(1)),
        )
}

/// `config` written to `router.toml` in `dir`; its path.
fn write_config(dir: &Path, config: &RouterToml) -> PathBuf {
    let path = dir.join("router.toml");
    std::fs::write(&path, config.to_toml()).unwrap();
    path
}

/// A capture of 60-byte Ethernet frames at the given times (seconds after the first).
fn write_capture(path: &Path, times_s: &[f64]) {
    let file = std::fs::File::create(path).unwrap();
    let mut w = pcap_file::pcap::PcapWriter::new(file).unwrap();
    for &t in times_s {
        let mut f = vec![0u8; 60];
        f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x0a]);
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        w.write_packet(&pcap_file::pcap::PcapPacket::new(
            Duration::from_secs_f64(1000.0 + t),
            60,
            &f,
        ))
        .unwrap();
    }
}

/// `zlrouter check` created every `pcap.write` file while validating, so checking a
/// config truncated the capture of its last run (772 184 bytes became 24).
#[test]
fn check_leaves_an_existing_output_capture_alone() {
    let dir = common::scratch("faults-check-writes-nothing");
    write_capture(&dir.join("in.pcap"), &[0.0, 0.1]);
    let before: Vec<u8> = (0..50_000u32).map(|i| (i * 7) as u8).collect();
    std::fs::write(dir.join("out.pcap"), &before).unwrap();
    let cfg = write_config(&dir, &pcap_bridge("in.pcap", "out.pcap"));
    let mut cmd = zlrouter();
    cmd.args(["check", cfg.to_str().unwrap()]);
    let out = output(cmd);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        std::fs::read(dir.join("out.pcap")).unwrap(),
        before,
        "check changed the output capture"
    );
    // A new output in a directory that does not exist yet: not created either.
    let cfg = write_config(&dir, &pcap_bridge("in.pcap", "later/out.pcap"));
    let mut cmd = zlrouter();
    cmd.args(["check", cfg.to_str().unwrap()]);
    let out = output(cmd);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(!dir.join("later").exists(), "check created a directory");
}

/// `check` passed `metrics.listen` values that `run` refused (`"not-an-addr"`), and
/// refused nothing; a bare port is accepted in the config as on the command line.
#[test]
fn check_validates_metrics_listen_as_run_does() {
    let dir = common::scratch("faults-metrics-listen");
    write_capture(&dir.join("in.pcap"), &[0.0]);
    for (listen, ok) in [
        ("not-an-addr", false),
        ("127.0.0.1", false),
        ("127.0.0.1:99999", false),
        ("", false),
        ("19469", true),
        ("127.0.0.1:0", true),
        ("[::1]:0", true),
    ] {
        let cfg = write_config(
            &dir,
            &pcap_bridge("in.pcap", "out.pcap").set("metrics", "listen", quoted(listen)),
        );
        let mut cmd = zlrouter();
        cmd.args(["check", cfg.to_str().unwrap()]);
        let out = output(cmd);
        let err = text(&out.stderr);
        assert_eq!(out.status.success(), ok, "listen = {listen:?}: {err}");
        if !ok {
            assert!(err.contains("metrics.listen"), "{err}");
            assert_eq!(out.status.code(), Some(2), "{err}");
        }
    }
}

/// `zlrouter run | head -1` panicked (exit 101 with a backtrace) when its stdout
/// pipe was closed. Now the process ends quietly with status 141 (as if killed by SIGPIPE).
#[test]
fn a_closed_stdout_pipe_ends_run_quietly() {
    let mut child = zlrouter()
        .args(["run", "--duration", "0.2", "--quiet"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let done = common::watchdog(child.id(), common::CHILD_WITHIN);
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let _ = done.send(());
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(141), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// A one-shot HTTP server answering the first request with `body` (or, with `body = None`,
/// reading it and never answering); returns its address.
fn fake_endpoint(body: Option<String>) -> (String, std::thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let h = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut buf = [0u8; 1024];
        let _ = s.read(&mut buf);
        match body {
            Some(b) => {
                let _ = write!(
                    s,
                    "HTTP/1.0 200 OK\r\nContent-Length: {}\r\n\r\n{b}",
                    b.len()
                );
            }
            // Held open past the client's timeout.
            None => std::thread::sleep(Duration::from_secs(8)),
        }
    });
    (addr, h)
}

/// `stats --raw | head -1`: the same quiet end on a closed pipe.
#[test]
fn a_closed_stdout_pipe_ends_stats_quietly() {
    let body: String = (0..20_000)
        .map(|i| format!("zlrouter_fake_total{{n=\"{i}\"}} {i}\n"))
        .collect();
    let (addr, server) = fake_endpoint(Some(body));
    let mut child = zlrouter()
        .args(["stats", "--raw", "--addr", &addr])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let done = common::watchdog(child.id(), common::CHILD_WITHIN);
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let _ = done.send(());
    let _ = server.join();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(141), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// `zlrouter run > /dev/full`: one clear error, status 2, no panic.
#[test]
fn a_full_stdout_is_one_clear_error() {
    let full = match std::fs::OpenOptions::new().write(true).open("/dev/full") {
        Ok(full) => full,
        Err(e) => {
            zl_testkit::netns::skip(
                "a_full_stdout_is_one_clear_error",
                &format!("cannot open /dev/full for writing: {e}"),
            );
            return;
        }
    };
    let child = zlrouter()
        .args(["run", "--duration", "0.2", "--quiet"])
        .stdout(Stdio::from(full))
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let done = common::watchdog(child.id(), common::CHILD_WITHIN);
    let out = child.wait_with_output().unwrap();
    let _ = done.send(());
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(
        err.matches("No space left on device").count(),
        1,
        "reported once: {err}"
    );
    assert!(err.contains("writing to standard output"), "{err}");
}

/// An OS error was printed twice ("Not a directory (os error 20): Not a directory
/// (os error 20)"), once by the port error's text and once as its source.
#[test]
fn an_os_error_is_printed_once() {
    let dir = common::scratch("faults-os-error-once");
    write_capture(&dir.join("in.pcap"), &[0.0]);
    let cfg = write_config(&dir, &pcap_bridge("in.pcap", "/dev/null/x/out.pcap"));
    let mut cmd = zlrouter();
    cmd.args(["run", "--quiet", cfg.to_str().unwrap()]);
    let out = output(cmd);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.matches("(os error 20)").count(), 1, "{err}");
}

/// Frames of an input capture timestamped after `duration + drain` were never read
/// and never mentioned; warnings carried ANSI colour codes on a pipe and were appended to the
/// progress line. Now the warning counts them, without escape codes, on a line of its own.
#[test]
fn unread_capture_frames_are_reported_in_a_plain_warning() {
    let dir = common::scratch("faults-unread-frames");
    // Three frames inside the run (1 s + 0.5 s drain), seven after it.
    let times = [0.0, 0.5, 1.2, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 7.0];
    write_capture(&dir.join("in.pcap"), &times);
    let cfg = write_config(&dir, &pcap_bridge("in.pcap", "out.pcap"));
    let mut cmd = zlrouter();
    cmd.args(["run", cfg.to_str().unwrap()]);
    let out = output(cmd);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(!err.contains('\u{1b}'), "escape codes on a pipe: {err:?}");
    let line = err
        .lines()
        .find(|l| l.contains("not replayed"))
        .unwrap_or_else(|| panic!("no warning about the unread frames: {err}"));
    assert!(line.contains("7 frame(s)"), "{line}");
    assert!(line.contains("in.pcap"), "{line}");
    assert!(
        line.trim_start().starts_with("WARN") || line.contains(" WARN "),
        "{line:?}"
    );
    assert!(!line.contains(" s] rx "), "on the progress line: {line:?}");
}

/// A `stats` timeout showed as "Resource temporarily unavailable (os error 11)".
#[test]
fn a_stats_timeout_says_so() {
    let (addr, server) = fake_endpoint(None);
    let mut cmd = zlrouter();
    cmd.args(["stats", "--addr", &addr]);
    let out = output(cmd);
    let _ = server.join();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("did not answer within 5 s"), "{err}");
    assert!(!err.contains("os error 11"), "{err}");
}

/// GET /metrics on `addr`: the answer, or `None` when nothing came within `within`.
fn scrape(addr: &str, within: Duration) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&addr.parse().ok()?, within).ok()?;
    s.set_read_timeout(Some(within)).ok()?;
    s.write_all(b"GET /metrics HTTP/1.0\r\n\r\n").ok()?;
    let mut body = String::new();
    s.read_to_string(&mut body).ok()?;
    (!body.is_empty()).then_some(body)
}

/// One failed `accept()` (the process at its file-descriptor limit) disabled the
/// endpoint's accept branch for good: `curl /metrics` never answered again. Now the failure is
/// counted, logged, backed off and retried, and the endpoint answers once descriptors are free.
#[test]
fn the_metrics_endpoint_survives_running_out_of_file_descriptors() {
    use std::os::unix::process::CommandExt;
    let dir = common::scratch("faults-accept-emfile");
    let cfg = dir.join("long.toml");
    std::fs::write(
        &cfg,
        zl_dataplane::DEFAULT_CONFIG.replace("duration_s = 10.0", "duration_s = 1000.0"),
    )
    .unwrap();
    let mut cmd = zlrouter();
    cmd.args(["run", cfg.to_str().unwrap(), "--metrics", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: `setrlimit` is async-signal-safe; the closure touches nothing else.
    unsafe {
        cmd.pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 40,
                rlim_max: 40,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    let done = common::watchdog(child.id(), common::CHILD_WITHIN);
    let mut stderr = child.stderr.take().unwrap();
    let mut seen = Vec::new();
    let mut byte = [0u8; 1];
    while !text(&seen).contains(" s] rx ") {
        match stderr.read(&mut byte) {
            Ok(1) => seen.push(byte[0]),
            _ => break,
        }
    }
    let seen = text(&seen);
    let addr = seen
        .split("metrics on http://")
        .nth(1)
        .and_then(|r| r.split("/metrics").next())
        .map(str::to_owned);
    let result = std::panic::catch_unwind(|| {
        let addr = addr.unwrap_or_else(|| panic!("no metrics address: {seen}"));
        // The endpoint keeps its connections to half the limit (20 of 40), so its own
        // clients cannot exhaust it: lower the running router's limit to leave it two free
        // descriptor numbers (new ones take the lowest free), as if the rest of the process
        // had taken the others.
        let used: Vec<u64> = std::fs::read_dir(format!("/proc/{}/fd", child.id()))
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .collect();
        let two_free = (0..40u64)
            .filter(|n| !used.contains(n))
            .nth(1)
            .expect("two free descriptors below 40");
        let lim = libc::rlimit {
            rlim_cur: two_free + 1,
            rlim_max: 40,
        };
        // SAFETY: `lim` is a valid rlimit; the old limit is not asked for (null).
        let set = unsafe {
            libc::prlimit(
                child.id() as libc::pid_t,
                libc::RLIMIT_NOFILE,
                &lim,
                std::ptr::null_mut(),
            )
        };
        assert_eq!(set, 0, "prlimit: {}", std::io::Error::last_os_error());
        // 100 idle connections: the router fails to accept most.
        let held: Vec<TcpStream> = (0..100)
            .filter_map(|_| TcpStream::connect(&addr).ok())
            .collect();
        std::thread::sleep(Duration::from_millis(500));
        drop(held);
        // The idle connections are closed; the endpoint must answer again (bounded wait).
        let start = Instant::now();
        let mut answer = None;
        while answer.is_none() && start.elapsed() < Duration::from_secs(20) {
            answer = scrape(&addr, Duration::from_secs(2));
        }
        let answer = answer.expect("the metrics endpoint never answered again");
        let errors: u64 = answer
            .lines()
            .find(|l| l.starts_with("zlrouter_metrics_accept_errors_total "))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no accept error counter: {answer}"));
        assert!(errors > 0, "accept never failed: the test did not test it");
    });
    let _ = child.kill();
    let _ = child.wait();
    let _ = done.send(());
    let mut rest = String::new();
    let _ = stderr.read_to_string(&mut rest);
    if let Err(e) = result {
        eprintln!("zlrouter stderr:\n{rest}");
        std::panic::resume_unwind(e);
    }
    assert!(rest.contains("accept failed"), "not logged: {rest}");
}
