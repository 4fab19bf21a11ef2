//! SIGINT and SIGTERM stop a running router cleanly: the loop finishes its poll, counts what is
//! queued as `shutdown`, and the final table (balanced) is printed.

mod common;

use zl_testkit::config::{ClassToml, FlowToml, PortToml, QosToml, RouterToml};

fn skip(why: &str) {
    zl_testkit::netns::skip("signal test", why);
}

/// Starts a long run, waits for its first progress output, sends `signal`, checks the exit.
fn stop_with(signal: &str) {
    let dir = common::scratch(&format!("signal-{signal}"));
    let cfg = dir.join("long.toml");
    // A 1000 s run at 100k packets/s of virtual time: far longer than the test waits.
    let text = zl_dataplane::DEFAULT_CONFIG.replace("duration_s = 10.0", "duration_s = 1000.0");
    std::fs::write(&cfg, text).unwrap();
    let running = common::spawn_until_progress(&["run", cfg.to_str().unwrap(), "--json"]);
    let Some((out, rest)) = common::signal_and_wait(running, signal) else {
        return skip("the `kill` command is not available");
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "exit {:?}\n{stdout}\n{rest}",
        out.status
    );
    assert!(rest.contains("stopped: interrupted"), "{rest}");
    assert!(rest.contains("stopping (signal SIG"), "{rest}");
    // The final statistics balance with nothing left queued.
    let [received, forwarded, dropped, queued] = common::final_totals(&stdout);
    zl_testkit::conservation::assert_conserved(received, forwarded, dropped, queued, &stdout);
    assert_eq!(queued, 0, "{stdout}");
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

/// SIGHUP reloads the config (tests/reload.rs) rather than killing the router without its
/// final table: the run goes on, says what the reload changed, and a later SIGTERM still ends
/// it with the final table.
#[test]
fn sighup_reloads_and_the_run_goes_on() {
    let dir = common::scratch("signal-hup");
    let cfg = dir.join("long.toml");
    let text = zl_dataplane::DEFAULT_CONFIG.replace("duration_s = 10.0", "duration_s = 1000.0");
    std::fs::write(&cfg, text).unwrap();
    let mut running = common::spawn_until_progress(&["run", cfg.to_str().unwrap(), "--json"]);
    let pid = running.child.id().to_string();
    if !std::process::Command::new("kill")
        .args(["-HUP", &pid])
        .status()
        .is_ok_and(|s| s.success())
    {
        let _ = common::signal_and_wait(running, "-KILL");
        return skip("the `kill` command is not available");
    }
    // The reload (re-read, validate, compare) runs on the control thread beside a loop that
    // keeps a core busy, so it can take seconds on a loaded machine: wait for its line.
    let reloaded = common::read_stderr_until(&mut running, "SIGHUP: reloaded");
    assert!(reloaded, "no reload line: {}", running.seen);
    assert!(
        running.seen.contains("SIGHUP: reloaded: nothing changed"),
        "{}",
        running.seen
    );
    let (out, rest) = common::signal_and_wait(running, "-TERM").expect("kill worked above");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{rest}");
    assert!(rest.contains("stopping (signal SIGTERM)"), "{rest}");
    assert!(rest.contains("stopped: interrupted"), "{rest}");
    let [received, forwarded, dropped, queued] = common::final_totals(&stdout);
    zl_testkit::conservation::assert_conserved(received, forwarded, dropped, queued, &stdout);
    assert_eq!(queued, 0, "{stdout}");
}

/// Every record of the capture at `path`, parsed; panics on a record cut short.
fn whole_records(path: &std::path::Path) -> usize {
    let bytes = std::fs::read(path).unwrap();
    let mut r = pcap_file::pcap::PcapReader::new(&bytes[..])
        .unwrap_or_else(|e| panic!("{}: {e} ({} bytes)", path.display(), bytes.len()));
    let mut n = 0;
    while let Some(p) = r.next_packet() {
        p.unwrap_or_else(|e| panic!("record {n} of {}: {e}", path.display()));
        n += 1;
    }
    n
}

/// A router killed outright leaves no capture cut in the middle of a packet (`capinfos`: "cut
/// short in the middle of a packet"), and a slow capture does not stay in memory until the
/// end of the run: the capture is written whole records at a time, on a timer too: a slow threaded run (its generator paced by the wall clock, 20 frames of 100 bytes a
/// second: the old 8 KiB buffer took 4 s to fill) has whole records on disk within 1.5 s, and
/// after a SIGKILL (no handler runs) the capture reads to its end.
#[test]
fn a_slow_capture_reaches_the_disk_on_the_flush_timer() {
    let dir = common::scratch("signal-capture-timer");
    let cfg = dir.join("slow.toml");
    let text = RouterToml::new()
        .set("run", "duration_s", "1000.0")
        .set("run", "rx_workers", 1)
        .port(
            PortToml::generator("gen", "02:00:00:00:00:01").flow(
                FlowToml::udp("slow", "10.0.0.1", "192.0.2.1")
                    .rate_bps(16_000)
                    .size(100),
            ),
        )
        .port(PortToml::pcap_writer(
            "out",
            "02:00:00:00:00:02",
            "out.pcap",
        ))
        .route("0.0.0.0/0", "out", Some("02:00:00:00:00:fe"))
        .qos(
            QosToml::new()
                .set("link_rate_bps", 1_000_000_000)
                .class(ClassToml::new("be").weight(1)),
        )
        .to_toml();
    std::fs::write(&cfg, text).unwrap();
    let running = common::spawn_until_progress(&["run", cfg.to_str().unwrap()]);
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let path = dir.join("out.pcap");
    let on_disk = std::fs::metadata(&path).map_or(0, |m| m.len());
    let Some((_, rest)) = common::signal_and_wait(running, "-KILL") else {
        return skip("the `kill` command is not available");
    };
    assert!(
        on_disk > 24,
        "no record on disk after 1.5 s ({on_disk} bytes): {rest}"
    );
    assert!(whole_records(&path) > 0);
}
