//! Forwarding rate of `zlrouter` on AF_XDP veth ports with real kernel senders (root; a
//! measurement, printed, never asserted; figures in docs/performance/real-traffic.md). The
//! lab of `zl_testkit::lab`: sender threads in their own namespaces flood 18-byte UDP
//! datagrams (64-byte frames) for 5 s through a router with no shaper; prints what the senders
//! sent, what the router received and forwarded, and what reached the receiver's interface,
//! per second.
//!
//! ```text
//! cargo build --release --bin zlrouter
//! sudo -E cargo run --release --example netns_rate [-- --mt] [--zlrouter PATH]
//! ```
//!
//! - default: one sender, the single-thread loop;
//! - `--mt`: two senders, and the router with the single-thread loop, then with 1 and 2
//!   receive workers times 1 and 2 transmit workers, one after the other in the same run
//!   (with 2 receive workers, worker 0 receives port r0 and the receiver's port, worker 1
//!   port r1; with 2 transmit workers, worker 0 sends on r0 and rx, the flood's one egress
//!   port, worker 1 on r1); namespaces `zlmt-*`, or `ZLR_NETNS_PREFIX`.
//!
//! `--zlrouter` names the router binary; by default the `zlrouter` beside this example's
//! directory (`target/release/zlrouter` for a release run), which `cargo run --example` does
//! not build: hence the `cargo build` first.

use std::net::UdpSocket;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use zl_testkit::lab::{is_root, stat, Lab, SenderSpec, RECEIVER_IP};

/// How long each flood lasts.
const SECS: f64 = 5.0;

/// The bottleneck (`rx`) egress: one tail-drop class, no shaper.
const QOS: &str = "[qos]\nlink_rate_bps = 100_000_000_000\n\
                   [[qos.classes]]\nname = \"be\"\nweight = 1\nmax_packets = 4096\n";

fn main() {
    let mut mt = false;
    let mut zlrouter = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--mt" => mt = true,
            "--zlrouter" => zlrouter = args.next().map(PathBuf::from),
            _ => usage(&format!("unknown argument {a:?}")),
        }
    }
    let zlrouter = zlrouter.unwrap_or_else(beside_this_example);
    if !zlrouter.is_file() {
        usage(&format!(
            "no router binary at {} (cargo build --release --bin zlrouter, or --zlrouter PATH)",
            zlrouter.display()
        ));
    }
    if !is_root() {
        usage("needs root (network namespaces, AF_XDP)");
    }
    if mt {
        let prefix = match std::env::var("ZLR_NETNS_PREFIX") {
            Ok(p) if !p.is_empty() => Box::leak(p.into_boxed_str()),
            _ => "zlmt",
        };
        zl_testkit::netns::set_prefix(prefix);
        for (workers, tx) in [(0u32, 1u32), (1, 1), (2, 1), (1, 2), (2, 2)] {
            let run = format!("rx_workers = {workers}\ntx_workers = {tx}");
            let m = measure(&zlrouter, &format!("rate{workers}{tx}"), 2, &run);
            println!("rx_workers = {workers}, tx_workers = {tx}: {m}");
        }
    } else {
        println!("{}", measure(&zlrouter, "rate", 1, ""));
    }
}

fn usage(why: &str) -> ! {
    eprintln!(
        "netns_rate: {why}\n\
         usage: netns_rate [--mt] [--zlrouter PATH] (root; see the source's head)"
    );
    std::process::exit(2);
}

/// `target/<profile>/zlrouter` for this example's `target/<profile>/examples/netns_rate`.
fn beside_this_example() -> PathBuf {
    let exe = std::env::current_exe().unwrap_or_default();
    let profile_dir = exe.parent().and_then(|d| d.parent());
    profile_dir.map_or_else(|| PathBuf::from("zlrouter"), |d| d.join("zlrouter"))
}

/// One flood from `senders` sender namespaces through the router (`run`: extra `[run]` keys)
/// for [`SECS`]; the line of rates to print, then the router's output.
fn measure(zlrouter: &std::path::Path, tag: &str, senders: usize, run: &str) -> String {
    let specs = vec![SenderSpec::PLAIN; senders];
    let mut lab = Lab::new(zlrouter, tag, &specs).unwrap_or_else(|e| {
        eprintln!("netns_rate: cannot build the namespaces: {e}");
        std::process::exit(1);
    });
    let cfg = lab.router_config(QOS, run);
    lab.start(tag, &cfg);
    let (r0, p0) = lab.receiver_rx();
    let floods: Vec<_> = lab
        .senders
        .iter()
        .map(|ns| {
            ns.spawn_in(move || -> u64 {
                let s = UdpSocket::bind(("0.0.0.0", 0)).expect("bind");
                let msg = [0u8; 18];
                let end = Instant::now() + Duration::from_secs_f64(SECS);
                let mut sent = 0u64;
                while Instant::now() < end {
                    for _ in 0..64 {
                        if s.send_to(&msg, (RECEIVER_IP, 9)).is_ok() {
                            sent += 1;
                        }
                    }
                }
                sent
            })
        })
        .collect();
    let sent: u64 = floods
        .into_iter()
        .map(|f| f.join().expect("flood thread").expect("flood"))
        .sum();
    std::thread::sleep(Duration::from_millis(300));
    let (r1, p1) = lab.receiver_rx();
    let (status, out) = lab.stop_router();
    if !status.success() {
        eprintln!("netns_rate: the router failed ({status:?}):\n{out}");
        std::process::exit(1);
    }
    let fwd = stat(&out, "totals.forwarded").unwrap_or(0);
    let rx = stat(&out, "totals.received").unwrap_or(0);
    format!(
        "sent {:.0} pkt/s, router received {:.0} pkt/s, forwarded {:.0} pkt/s, \
         receiver got {:.0} pkt/s ({:.1} Mbit/s of frames), dropped {}\n{out}",
        sent as f64 / SECS,
        rx as f64 / SECS,
        fwd as f64 / SECS,
        (p1 - p0) as f64 / SECS,
        (r1 - r0) as f64 * 8.0 / SECS / 1e6,
        stat(&out, "totals.dropped").unwrap_or(0)
    )
}
