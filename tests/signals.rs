//! SIGINT and SIGTERM stop a running router cleanly: the loop finishes its poll, counts what is
//! queued as `shutdown`, and the final table (balanced) is printed.

mod common;

fn skip(why: &str) {
    zl_afxdp::netns::skip("signal test", why);
}

/// Starts a long run, waits for its first progress output, sends `signal`, checks the exit.
fn stop_with(signal: &str) {
    let dir = common::scratch(&format!("signal-{signal}"));
    let cfg = dir.join("long.toml");
    // A 1000 s run at 100k packets/s of virtual time: far longer than the test waits.
    let text = zl_dataplane::DEFAULT_CONFIG.replace("duration_s = 10.0", "duration_s = 1000.0");
    std::fs::write(&cfg, text).unwrap();
    let running = common::spawn_until_progress(&["run", cfg.to_str().unwrap()]);
    let Some((out, rest)) = common::signal_and_wait(running, signal) else {
        return skip("the `kill` command is not available");
    };
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
