//! RSS multi-queue through the threaded router (root, prints `SKIPPED ...` and passes
//! otherwise, fails instead with `ZLR_REQUIRE_ENV=1` as in CI): the sender's veth has 4 queues
//! (`ip link add ... numrxqueues 4 numtxqueues 4`, `ethtool -L`), the router's port on it opens
//! one AF_XDP socket per queue (`queues = [0, 1, 2, 3]`, native XDP, so that veth hands each
//! frame to the RX queue matching the sender's TX queue), and `zlrouter run` with
//! `rx_workers = 4` gives each queue's receive half to its own receive worker. 400 UDP flows
//! from the sender namespace (one datagram to each of 400 destination ports) are spread by the
//! sender's flow hash over its 4 TX queues: every receive worker receives, and the final table
//! balances. Namespaces `zlmq-*` (`ZLR_NETNS_PREFIX` renames them).

use zl_testkit::lab::*;
use zl_testkit::netns::{is_root, skip};

/// The binary the lab runs (only the root package's tests know where Cargo built it).
const ZLROUTER: &str = env!("CARGO_BIN_EXE_zlrouter");

fn prefix() -> &'static str {
    match std::env::var("ZLR_NETNS_PREFIX") {
        Ok(p) if !p.is_empty() => Box::leak(p.into_boxed_str()),
        _ => "zlmq",
    }
}

/// The per-worker receive counts of the `threads: N receive workers (received a / b / ...)`
/// line the threaded router prints at the end.
fn per_worker_received(out: &str) -> Option<Vec<u64>> {
    let line = out
        .lines()
        .find(|l| l.contains("receive workers (received "))?;
    let list = line.split("(received ").nth(1)?.split(')').next()?;
    list.split(" / ").map(|n| n.trim().parse().ok()).collect()
}

#[test]
fn every_receive_worker_gets_a_queue_of_a_multi_queue_port() {
    const TEST: &str = "mq4";
    if !is_root() {
        skip(TEST, "needs root");
        return;
    }
    zl_testkit::netns::set_prefix(prefix());
    let mut lab = match Lab::with_queues(ZLROUTER, TEST, &[SenderSpec::PLAIN], 4) {
        Ok(lab) => lab,
        Err(e) => {
            skip(TEST, &format!("cannot build 4-queue namespaces: {e}"));
            return;
        }
    };
    lab.sender_port_af_xdp = ", queues = [0, 1, 2, 3], xdp_mode = \"native\"".into();
    let qos = "[qos]\nlink_rate_bps = 100_000_000\n\
               classifier = { default_class = \"be\", standard = false }\n\
               [[qos.classes]]\nname = \"be\"\nweight = 1\nmax_packets = 1000\n\
               aqm = { kind = \"tail-drop\" }\n";
    let cfg = lab.router_config(qos, "rx_workers = 4");
    lab.start(TEST, &cfg);
    let sent = lab.senders[0]
        .run_in(|| -> std::io::Result<usize> {
            let s = std::net::UdpSocket::bind(("0.0.0.0", 0))?;
            let mut sent = 0;
            for port in 20_000..20_400u16 {
                s.send_to(b"zlmq", (RECEIVER_IP, port))?;
                sent += 1;
            }
            Ok(sent)
        })
        .expect("sender namespace")
        .expect("send");
    assert_eq!(sent, 400);
    // Every datagram reaches the receiver (bounded wait; the count is the assertion).
    let start = std::time::Instant::now();
    while lab.receiver_rx().1 < 400 && start.elapsed() < std::time::Duration::from_secs(5) {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let (status, out) = lab.stop_router();
    eprintln!("{out}");
    assert!(status.success(), "{status:?}\n{out}");
    let workers = per_worker_received(&out).unwrap_or_else(|| panic!("no threads line: {out}"));
    assert_eq!(workers.len(), 4, "{out}");
    assert!(
        workers.iter().all(|&n| n > 0),
        "every receive worker receives: {workers:?}"
    );
    let received = stat(&out, "totals.received").unwrap();
    let forwarded = stat(&out, "totals.forwarded").unwrap();
    let dropped = stat(&out, "totals.dropped").unwrap();
    zl_testkit::conservation::assert_conserved(received, forwarded, dropped, 0, &out);
    assert_eq!(stat(&out, "totals.queued"), Some(0), "{out}");
    assert!(received >= 400, "{out}");
}

#[test]
fn the_threads_line_is_parsed() {
    let out = "x\nthreads: 4 receive workers (received 10 / 0 / 7 / 3) and 1 transmit worker(s)\n";
    assert_eq!(per_worker_received(out), Some(vec![10, 0, 7, 3]));
    assert_eq!(per_worker_received("no such line"), None);
}
