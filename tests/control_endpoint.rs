//! The control endpoint: only the operator changes the router through it, and a flood of
//! connections cannot take it away from them.
//!
//! - `POST /reload` needs the control token: refused without it or with a wrong one (`401`),
//!   refused from a web page (an `Origin` header, `403`), applied with it; `zlrouter reload`
//!   finds the token through `--config` or `--token-file`, and as `nobody` (root needed to
//!   switch users) cannot read it and is refused with the reason.
//! - Paths match exactly: `/reloadZZZ` and `/metricsXYZ` are `404`.
//! - Under 1 100 idle and 200 drip-feeding connections, with the router's file-descriptor
//!   limit at 1 024 (so holding them all would exhaust it), a reload, a scrape and a SIGHUP
//!   reload all work; the oldest waiting connections are evicted, the rest cut at the request
//!   deadline, and both are counted in `/metrics`.
//! - Bound beyond loopback (in a network namespace of its own, root), the router warns at
//!   start and serves `/stats.json` only with the token; `/metrics` stays open.

mod common;

use std::io::{BufRead, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn skip(why: &str) {
    zl_testkit::netns::skip("control endpoint test", why);
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The built-in default config, running for 1000 s, its endpoint on `listen` with the
/// token in `token` and `extra` lines in `[metrics]`; written to `dir/router.toml`.
fn config(dir: &Path, listen: &str, token: &Path, extra: &str) -> PathBuf {
    let text = zl_dataplane::DEFAULT_CONFIG
        .replace("duration_s = 10.0", "duration_s = 1000.0")
        .replace(
            "[metrics]",
            &format!(
                "[metrics]\nlisten = \"{listen}\"\ntoken_file = \"{}\"\n{extra}",
                token.display()
            ),
        );
    let path = dir.join("router.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// `program args` (ending in a `zlrouter run`), read until its first progress line.
fn spawn_router(program: &str, args: &[&str]) -> common::Running {
    let mut child = Command::new(program)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {program}: {e}"));
    let progress_seen = common::watchdog(child.id(), common::CHILD_WITHIN);
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
    let _ = progress_seen.send(());
    common::Running {
        child,
        stderr,
        seen: String::from_utf8_lossy(&seen).into_owned(),
    }
}

/// Kills the router this test started (SIGKILL, by its PID) if the test fails before it
/// stops it.
struct KillOnDrop(u32);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = Command::new("kill")
                .args(["-KILL", &self.0.to_string()])
                .status();
        }
    }
}

/// Sends `head` (a whole request head) to `addr`: the answer's status code and body.
fn http(addr: SocketAddr, head: &str) -> (u16, String) {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5))
        .unwrap_or_else(|e| panic!("connect {addr}: {e}"));
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(head.as_bytes()).unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text)
        .unwrap_or_else(|e| panic!("{head:?} to {addr}: {e}"));
    let code = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("not an HTTP answer to {head:?}: {text:?}"));
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (code, body.to_owned())
}

/// `METHOD target` with `headers` (each ending `\r\n`).
fn req(line: &str, headers: &str) -> String {
    format!("{line} HTTP/1.0\r\nHost: zlrouter\r\n{headers}\r\n")
}

fn bearer(token: &str) -> String {
    format!("Authorization: Bearer {token}\r\n")
}

/// The value of the unlabelled or labelled series `name` in a Prometheus text.
fn series(metrics: &str, name: &str) -> u64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or_else(|| panic!("no series {name}: {metrics}"))
}

fn scrape(addr: SocketAddr) -> String {
    let (code, body) = http(addr, &req("GET /metrics", ""));
    assert_eq!(code, 200, "{body}");
    body
}

/// `zlrouter ARGS`, run as `user` when given (through `runuser`): success, stdout, stderr.
fn cli(user: Option<&str>, args: &[&str]) -> (bool, String, String) {
    let bin = env!("CARGO_BIN_EXE_zlrouter");
    let mut cmd = match user {
        Some(u) => {
            let mut c = Command::new("runuser");
            c.args(["-u", u, "--", bin]);
            c
        }
        None => Command::new(bin),
    };
    let out = cmd.args(args).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn reload_needs_the_token_from_the_same_host_and_paths_match_exactly() {
    let dir = common::scratch("control-token");
    let token_file = dir.join("control.token");
    let port = free_port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let cfg = config(&dir, &addr.to_string(), &token_file, "");
    let cfg_s = cfg.to_str().unwrap();
    let running = common::spawn_until_progress(&["run", cfg_s, "--json"]);
    let _guard = KillOnDrop(running.child.id());
    assert!(
        running
            .seen
            .contains(&format!("control token in {}", token_file.display())),
        "{}",
        running.seen
    );

    // The router made the token: private to its user.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&token_file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let token = std::fs::read_to_string(&token_file).unwrap();
    let token = token.trim();
    assert_eq!(token.len(), 64, "{token:?}");

    // Without the token, with a wrong one, from a web page: refused. With it: applied.
    let (code, body) = http(addr, &req("POST /reload", ""));
    assert_eq!(code, 401, "{body}");
    assert!(body.contains("control token"), "{body}");
    let wrong = token.replace(&token[..1], if &token[..1] == "a" { "b" } else { "a" });
    assert_eq!(http(addr, &req("POST /reload", &bearer(&wrong))).0, 401);
    let from_page = format!("{}Origin: http://example.com\r\n", bearer(token));
    let (code, body) = http(addr, &req("POST /reload", &from_page));
    assert_eq!(code, 403, "{body}");
    let (code, body) = http(addr, &req("POST /reload", &bearer(token)));
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("reloaded: nothing changed"), "{body}");

    // Exact paths: a longer one is not the route, even with the token.
    assert_eq!(http(addr, &req("POST /reloadZZZ", &bearer(token))).0, 404);
    assert_eq!(http(addr, &req("GET /metricsXYZ", "")).0, 404);
    assert_eq!(http(addr, &req("GET /reload", &bearer(token))).0, 405);
    // Read-only scrapes stay open on loopback, a query string ignored.
    assert_eq!(http(addr, &req("GET /metrics?x=1", "")).0, 200);
    assert_eq!(http(addr, &req("GET /stats.json", "")).0, 200);

    // The command line finds the token through the config or a flag.
    let (ok, said, err) = cli(None, &["reload", "--config", cfg_s]);
    assert!(ok, "{said}{err}");
    assert!(said.contains("reloaded: nothing changed"), "{said}");
    let (ok, said, err) = cli(
        None,
        &[
            "reload",
            "--addr",
            &addr.to_string(),
            "--token-file",
            token_file.to_str().unwrap(),
        ],
    );
    assert!(ok, "{said}{err}");

    // Another router's token: refused, and told which file it came from.
    let other = dir.join("other.token");
    std::fs::write(&other, format!("{wrong}\n")).unwrap();
    let (ok, _, err) = cli(
        None,
        &[
            "reload",
            "--addr",
            &addr.to_string(),
            "--token-file",
            other.to_str().unwrap(),
        ],
    );
    assert!(
        !ok && err.contains("is not this router's") && err.contains("other.token"),
        "{err}"
    );

    // Another local user cannot read the token: refused, and told why.
    let nobody = zl_testkit::netns::is_root()
        && Command::new("runuser")
            .args(["-u", "nobody", "--", "true"])
            .status()
            .is_ok_and(|s| s.success());
    if nobody {
        for args in [
            vec!["reload", "--config", cfg_s],
            vec![
                "reload",
                "--addr",
                &addr.to_string(),
                "--token-file",
                token_file.to_str().unwrap(),
            ],
        ] {
            let (ok, said, err) = cli(Some("nobody"), &args);
            assert!(!ok, "nobody reloaded: {said}{err}");
            assert!(
                err.contains("refused: this needs the router's control token")
                    && err.contains("Permission denied")
                    && err.contains(token_file.to_str().unwrap()),
                "{err}"
            );
        }
    }

    let metrics = scrape(addr);
    let refused = |reason: &str| {
        series(
            &metrics,
            &format!("zlrouter_metrics_requests_refused_total{{reason=\"{reason}\"}}"),
        )
    };
    let by_nobody = if nobody { 2 } else { 0 };
    assert_eq!(refused("unauthorized"), 3 + by_nobody, "{metrics}");
    assert_eq!(refused("cross_origin"), 1, "{metrics}");
    assert_eq!(
        series(
            &metrics,
            "zlrouter_config_reloads_total{result=\"applied\"}"
        ),
        3,
        "{metrics}"
    );

    let (out, rest) = common::signal_and_wait(running, "-TERM").expect("kill is available");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{rest}");
    let [received, forwarded, dropped, queued] = common::final_totals(&stdout);
    zl_testkit::conservation::assert_conserved(received, forwarded, dropped, queued, &stdout);
    if !nobody {
        skip("the `nobody` part needs root and runuser");
    }
}

/// Holds `idle` connections that send nothing and `slow` ones that send a byte of a request
/// every 200 ms, printing `ready` once all are connected; run for `secs`.
const FLOOD: &str = r#"
import resource, socket, sys, time
host, port, idle, slow, secs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5])
need = idle + slow + 64
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
if soft < need:
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, max(hard, need)))
    except (ValueError, OSError) as e:
        print("cannot hold %d connections: %s" % (need, e), flush=True)
        sys.exit(3)
held = [socket.create_connection((host, port)) for _ in range(idle)]
drip = []
for _ in range(slow):
    s = socket.create_connection((host, port))
    s.send(b"G")
    drip.append(s)
print("ready", flush=True)
end = time.time() + secs
while time.time() < end:
    for s in drip:
        try:
            s.send(b"E")
        except OSError:
            pass
    time.sleep(0.2)
"#;

#[test]
fn a_flood_of_idle_and_slow_connections_leaves_reload_and_scrape_working() {
    if Command::new("python3")
        .arg("-c")
        .arg("pass")
        .status()
        .map_or(true, |s| !s.success())
    {
        return skip("python3 is not installed");
    }
    let dir = common::scratch("control-flood");
    let token_file = dir.join("control.token");
    let port = free_port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    // A 2 s request deadline: the connections left waiting are cut within the test.
    let cfg = config(
        &dir,
        &addr.to_string(),
        &token_file,
        "request_timeout_s = 2.0\n",
    );
    let cfg_s = cfg.to_str().unwrap();
    // A hard limit of 1 024 descriptors: holding every connection would run out of them.
    let mut running = spawn_router(
        "sh",
        &[
            "-c",
            "ulimit -n 1024 && exec \"$0\" \"$@\"",
            env!("CARGO_BIN_EXE_zlrouter"),
            "run",
            cfg_s,
            "--json",
        ],
    );
    let pid = running.child.id();
    let _guard = KillOnDrop(pid);

    let mut flood = Command::new("python3")
        .args([
            "-c",
            FLOOD,
            "127.0.0.1",
            &port.to_string(),
            "1100",
            "200",
            "30",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let flood_bound = common::watchdog(flood.id(), Duration::from_secs(60));
    let mut line = String::new();
    let _ = std::io::BufReader::new(flood.stdout.take().unwrap()).read_line(&mut line);
    if line.trim() != "ready" {
        let _ = flood.kill();
        let _ = flood.wait();
        let _ = common::signal_and_wait(running, "-KILL");
        return skip(&format!("the flood did not start: {line:?}"));
    }

    // Everything at once: the operator's reload, a scrape and the signal's reload.
    let start = Instant::now();
    let (ok, said, err) = cli(None, &["reload", "--config", cfg_s]);
    let reload_took = start.elapsed();
    assert!(ok, "{said}{err}");
    assert!(said.contains("reloaded: nothing changed"), "{said}");
    let metrics = scrape(addr);
    let scrape_took = start.elapsed() - reload_took;
    let open = series(&metrics, "zlrouter_metrics_connections_open");
    let evicted = series(
        &metrics,
        "zlrouter_metrics_connections_cut_total{reason=\"evicted\"}",
    );
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count());
    assert!(Command::new("kill")
        .args(["-HUP", &pid.to_string()])
        .status()
        .unwrap()
        .success());
    assert!(
        common::read_stderr_until(&mut running, "SIGHUP: reloaded"),
        "no SIGHUP reload under the flood: {}",
        running.seen
    );
    eprintln!(
        "under 1100 idle + 200 slow connections: reload {reload_took:?}, scrape \
         {scrape_took:?}, {open} connections open, {evicted} evicted, {fds} descriptors"
    );
    assert!(open <= 256, "{metrics}");
    // 1 300 connections and the requests above, at most 256 open at a time.
    assert!(evicted >= 1_300 - 256, "{metrics}");
    assert!(fds > 0 && fds < 512, "{fds} descriptors open");
    assert!(reload_took < Duration::from_secs(3), "{reload_took:?}");

    // The connections left waiting (the last 256, the drip-feeders among them) are cut at the
    // 2 s deadline, counted.
    let deadline = |m: &str| {
        series(
            m,
            "zlrouter_metrics_connections_cut_total{reason=\"deadline\"}",
        )
    };
    let mut cut = 0;
    let wait = Instant::now();
    while cut < 200 && wait.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(250));
        cut = deadline(&scrape(addr));
    }
    let _ = flood.kill();
    let _ = flood.wait();
    let _ = flood_bound.send(());
    assert!(cut >= 200, "{} cut by the deadline", cut);
    let metrics = scrape(addr);
    assert_eq!(
        series(&metrics, "zlrouter_metrics_accept_errors_total"),
        0,
        "{metrics}"
    );

    let (out, rest) = common::signal_and_wait(running, "-TERM").expect("kill is available");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{rest}");
    assert!(!rest.contains("accept failed"), "{rest}");
    let [received, forwarded, dropped, queued] = common::final_totals(&stdout);
    zl_testkit::conservation::assert_conserved(received, forwarded, dropped, queued, &stdout);
}

#[test]
fn beyond_loopback_the_router_warns_and_serves_stats_only_with_the_token() {
    if !zl_testkit::netns::is_root() {
        return skip("needs root (a network namespace)");
    }
    zl_testkit::netns::set_prefix("zlctl");
    let ns = match zl_testkit::netns::Netns::create("lan") {
        Ok(ns) => ns,
        Err(e) => return skip(&format!("cannot create a network namespace: {e}")),
    };
    // An address of the namespace's own, not loopback: only this test reaches it.
    ns.ip(&["addr", "add", "10.253.0.1/32", "dev", "lo"])
        .unwrap();
    let dir = common::scratch("control-lan");
    let token_file = dir.join("control.token");
    let addr: SocketAddr = "10.253.0.1:9464".parse().unwrap();
    let cfg = config(&dir, &addr.to_string(), &token_file, "");
    let running = spawn_router(
        "ip",
        &[
            "netns",
            "exec",
            ns.name(),
            env!("CARGO_BIN_EXE_zlrouter"),
            "run",
            cfg.to_str().unwrap(),
            "--json",
        ],
    );
    let _guard = KillOnDrop(running.child.id());
    assert!(
        running.seen.contains("beyond loopback"),
        "no warning: {}",
        running.seen
    );
    let token = std::fs::read_to_string(&token_file)
        .unwrap()
        .trim()
        .to_owned();
    let answers = ns
        .run_in(move || {
            [
                req("GET /metrics", ""),
                req("GET /stats.json", ""),
                req("GET /stats.json", &bearer(&token)),
                req("POST /reload", ""),
                req("POST /reload", &bearer(&token)),
            ]
            .map(|r| http(addr, &r).0)
        })
        .unwrap();
    assert_eq!(answers, [200, 401, 200, 401, 200]);
    let (out, rest) = common::signal_and_wait(running, "-TERM").expect("kill is available");
    assert!(out.status.success(), "{rest}");
}
