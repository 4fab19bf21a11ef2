//! SIGINT and SIGTERM stop a running router cleanly: the loop finishes its poll, counts what is
//! queued as `shutdown`, and the final table (balanced) is printed.

mod common;

use std::io::{Read, Write};
use std::process::{Command, Stdio};

fn skip(why: &str) {
    let _ = writeln!(std::io::stderr(), "SKIPPED: signal test: {why}");
}

/// Starts a long run, waits for its first progress output, sends `signal`, checks the exit.
fn stop_with(signal: &str) {
    let dir = common::scratch(&format!("signal-{signal}"));
    let cfg = dir.join("long.toml");
    // A 1000 s run at 100k packets/s of virtual time: far longer than the test waits.
    let text = zl_dataplane::DEFAULT_CONFIG.replace("duration_s = 10.0", "duration_s = 1000.0");
    std::fs::write(&cfg, text).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_zlrouter"))
        .args(["run", cfg.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The progress line comes at the first progress point: the loop is running.
    let mut stderr = child.stderr.take().unwrap();
    let mut seen = Vec::new();
    let mut byte = [0u8; 1];
    while !String::from_utf8_lossy(&seen).contains(" s] rx ") {
        match stderr.read(&mut byte) {
            Ok(1) => seen.push(byte[0]),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "zlrouter exited before its first progress line: {}",
                    String::from_utf8_lossy(&seen)
                );
            }
        }
    }
    let status = Command::new("kill")
        .args([signal, &child.id().to_string()])
        .status();
    match status {
        Ok(s) if s.success() => {}
        _ => {
            let _ = child.kill();
            let _ = child.wait();
            return skip("the `kill` command is not available");
        }
    }
    let mut rest = String::new();
    let _ = stderr.read_to_string(&mut rest);
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "exit {:?}\n{stdout}\n{rest}",
        out.status
    );
    assert!(stdout.contains("stopped: interrupted"), "{stdout}");
    assert!(rest.contains("stopping (signal)"), "{rest}");
    // The fate line balances with nothing left queued.
    let line = stdout.lines().find(|l| l.starts_with("received ")).unwrap();
    let num = |key: &str| -> u64 {
        let at = line.find(key).unwrap() + key.len();
        line[at..]
            .trim_start()
            .split(|c: char| !c.is_ascii_digit())
            .next()
            .unwrap()
            .parse()
            .unwrap()
    };
    let (received, forwarded, dropped, queued) = (
        num("received"),
        num("forwarded"),
        num("dropped"),
        num("queued"),
    );
    assert_eq!(received, forwarded + dropped + queued, "{line}");
    assert_eq!(queued, 0, "{line}");
    assert!(received > 0);
}

#[test]
fn sigint_stops_cleanly_with_the_final_table() {
    stop_with("-INT");
}

#[test]
fn sigterm_stops_cleanly_with_the_final_table() {
    stop_with("-TERM");
}
