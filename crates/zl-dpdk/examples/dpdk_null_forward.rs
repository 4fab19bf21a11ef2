//! DPDK forwarding rate on `net_null` through this crate vs `dpdk-testpmd` in io-forward mode
//! on the same devices, in one run (single forwarding core each).
//!
//! Two `net_null` ports; each loop iteration moves one burst (up to 32) from port 0 to port 1
//! and one from port 1 to port 0, as testpmd's io mode does with two ports on one core:
//! - `forward_to`: mbufs handed from RX to TX without touching the data (testpmd's work);
//! - `Port` trait: each frame copied into a `zl_port::BufPool` buffer on receive and into a
//!   fresh mbuf on send (what the router's data plane does).
//!
//! Usage: `cargo run --release -p zl-dpdk --features dpdk --example dpdk_null_forward --
//! [seconds]` (root not needed; runs without hugepages).

use std::process::Command;
use std::time::{Duration, Instant};

use zl_core::Nanos;
use zl_dpdk::{DpdkPort, DpdkPortConfig, Eal, EalConfig};
use zl_port::{Batch, BufPool, Port};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn measure(secs: f64, mut step: impl FnMut() -> u64) -> f64 {
    let t0 = Instant::now();
    let end = Duration::from_secs_f64(secs);
    let mut n = 0u64;
    let mut iter = 0u32;
    loop {
        n += step();
        iter = iter.wrapping_add(1);
        if iter % 1024 == 0 && t0.elapsed() >= end {
            break;
        }
    }
    n as f64 / t0.elapsed().as_secs_f64()
}

/// Runs testpmd io-forward on two net_null ports for `secs` and returns the forwarded rate
/// (both ports' RX-pps summed, averaged over the per-second reports after the first).
fn testpmd(secs: u64) -> Res<f64> {
    let prefix = format!("zlr-tpmd-{}", std::process::id());
    let out = Command::new("timeout")
        .args(["-s", "INT", &(secs + 3).to_string(), "dpdk-testpmd"])
        .args([
            "--no-huge",
            "--no-pci",
            "-m",
            "512",
            "--file-prefix",
            &prefix,
            "-l",
            "0-1",
        ])
        .args([
            "--vdev",
            "net_null0",
            "--vdev",
            "net_null1",
            "--log-level=*:warning",
            "--",
        ])
        .args([
            "--total-num-mbufs=32768",
            "--forward-mode=io",
            "--auto-start",
        ])
        .args(["--stats-period", "1"])
        .output()?;
    let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/{prefix}"));
    let text = String::from_utf8_lossy(&out.stdout);
    let rx: Vec<f64> = text
        .lines()
        .filter_map(|l| l.trim().strip_prefix("Rx-pps:"))
        .filter_map(|rest| rest.split_whitespace().next()?.parse().ok())
        .collect();
    // Lines come in (port 0, port 1) pairs, one pair per period; the first period includes
    // start-up, so it is left out.
    let periods: Vec<f64> = rx.chunks_exact(2).map(|p| p[0] + p[1]).collect();
    if periods.len() < 2 {
        return Err(format!("testpmd printed too few reports:\n{text}").into());
    }
    let steady = &periods[1..];
    Ok(steady.iter().sum::<f64>() / steady.len() as f64)
}

fn main() -> Res<()> {
    let secs: f64 = std::env::args().nth(1).map_or(Ok(3.0), |s| s.parse())?;
    let prefix = format!("zlr-bench-{}", std::process::id());
    let eal = Eal::init(&EalConfig::no_huge(&prefix))?;
    let mut p0 = DpdkPort::open(eal, "n0", 0, &DpdkPortConfig::new("net_null0"))?;
    let mut p1 = DpdkPort::open(eal, "n1", 1, &DpdkPortConfig::new("net_null1"))?;

    let zero_copy = measure(secs, || {
        (p0.forward_to(&mut p1) + p1.forward_to(&mut p0)) as u64
    });

    let mut pool = BufPool::new(1024, 2048);
    let mut batch = Batch::new();
    let copy = measure(secs, || {
        let mut n = 0;
        for forward in [true, false] {
            let (rx, tx) = if forward {
                (&mut p0, &mut p1)
            } else {
                (&mut p1, &mut p0)
            };
            let _ = rx.recv(Nanos(0), &mut pool, &mut batch);
            n += tx.send(Nanos(0), &mut batch, &mut pool).unwrap_or(0) as u64;
        }
        n
    });
    drop((p0, p1));
    let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/{prefix}"));

    let reference = testpmd(secs.ceil() as u64)?;
    println!("net_null, 64-byte frames, 2 ports, 1 forwarding core, bursts of 32");
    println!("{:<34} {:>10}", "path", "Mpps");
    println!(
        "{:<34} {:>10.2}",
        "dpdk-testpmd io-forward",
        reference / 1e6
    );
    println!(
        "{:<34} {:>10.2}",
        "zl-dpdk forward_to (no copy)",
        zero_copy / 1e6
    );
    println!(
        "{:<34} {:>10.2}",
        "zl-dpdk Port trait (copy in/out)",
        copy / 1e6
    );
    println!("ratio forward_to / testpmd: {:.2}", zero_copy / reference);
    println!("ratio Port trait / testpmd: {:.2}", copy / reference);
    Ok(())
}
