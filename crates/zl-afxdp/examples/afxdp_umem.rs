//! What a port's UMEMs cost (docs/afxdp.md "Queues"): the resident memory a port
//! with 1, 2 and 4 queues adds when it opens (default rings: 2048 RX and 2048 TX chunks of
//! 2 KiB; the UMEM is mapped MAP_POPULATE, so RSS is what it pins), and how long the open
//! takes (program load and attach included), 5 opens each, on a 4-queue veth with native XDP
//! in a namespace `zlafu-...`. Needs root.
//!
//! `cargo run --release -p zl-afxdp --example afxdp_umem`

use std::time::{Duration, Instant};

use zl_afxdp::{AfXdpConfig, AfXdpPort, XdpMode};
use zl_testkit::netns::Netns;

/// VmRSS of this process, in KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    (status.lines())
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmRSS")
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    zl_testkit::netns::set_prefix("zlafu");
    let ns = Netns::create("umem")?;
    ns.add_veth_pair_with_queues("zx0", "zx1", 4)?;
    ns.run_in(|| {
        for queues in [1u32, 2, 4] {
            let cfg = AfXdpConfig {
                queues: (0..queues).collect(),
                xdp_mode: XdpMode::Native,
                ..AfXdpConfig::new("zx0")
            };
            let mut samples = Vec::new();
            for _ in 0..5 {
                // The kernel releases the previous port's sockets asynchronously: a bind to
                // the same queue right after answers EBUSY for a moment, so retry.
                let (port, open, before) = loop {
                    let before = rss_kib();
                    let t = Instant::now();
                    match AfXdpPort::open("p", 0, &cfg) {
                        Ok(p) => break (p, t.elapsed(), before),
                        Err(_) => std::thread::sleep(Duration::from_millis(20)),
                    }
                };
                samples.push((rss_kib() - before, open.as_micros()));
                drop(port);
            }
            println!("{queues} queue(s): (RSS added KiB, open us) x5: {samples:?}");
        }
    })?;
    Ok(())
}
