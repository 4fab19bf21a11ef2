//! Forwarding rate of `zlrouter` on AF_XDP veth ports with real kernel senders (root;
//! `#[ignore]`d: a measurement, not a check). One sender thread floods 18-byte UDP datagrams
//! (64-byte frames) for 5 s through a router with no shaper; prints what the sender sent, what
//! the router received and forwarded, and what reached the receiver's interface, per second.
//!
//! ```text
//! sudo -E cargo test --test netns_rate -- --ignored --nocapture
//! ```

mod netns;

use std::net::UdpSocket;
use std::time::{Duration, Instant};

use netns::*;

#[test]
#[ignore = "a measurement; run by hand as root"]
fn udp_flood_forwarding_rate() {
    const TEST: &str = "rate";
    const SECS: f64 = 5.0;
    let Some(mut lab) = Lab::or_skip(TEST, &[SenderSpec::PLAIN]) else {
        return;
    };
    let qos = "[qos]\nlink_rate_bps = 100_000_000_000\n\
               [[qos.classes]]\nname = \"be\"\nweight = 1\nmax_packets = 4096\n";
    let cfg = lab.router_config(qos, "");
    lab.start(TEST, &cfg);
    let (r0, p0) = lab.receiver_rx();
    let flood = lab.senders[0].spawn_in(move || -> u64 {
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
    });
    let sent = flood.join().unwrap().expect("flood");
    std::thread::sleep(Duration::from_millis(300));
    let (r1, p1) = lab.receiver_rx();
    let (status, out) = lab.stop_router();
    assert!(status.success(), "{status:?}\n{out}");
    let fwd = stat(&out, "totals.forwarded").unwrap_or(0);
    let rx = stat(&out, "totals.received").unwrap_or(0);
    eprintln!(
        "sent {:.0} pkt/s, router received {:.0} pkt/s, forwarded {:.0} pkt/s, \
         receiver got {:.0} pkt/s ({:.1} Mbit/s of frames)\n{out}",
        sent as f64 / SECS,
        rx as f64 / SECS,
        fwd as f64 / SECS,
        (p1 - p0) as f64 / SECS,
        (r1 - r0) as f64 * 8.0 / SECS / 1e6
    );
}
