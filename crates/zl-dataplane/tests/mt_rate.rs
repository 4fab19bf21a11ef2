//! Forwarding rate of `zl_dataplane::mt` with 1 and 2 receive workers (`#[ignore]`d: a
//! measurement, not a check; figures in docs/performance/real-traffic.md):
//!
//! ```text
//! cargo test -p zl-dataplane --test mt_rate -- --ignored --nocapture
//! ```
//!
//! In-memory sources (100-byte IPv4/UDP frames, 8 flows each), one class of 4096 packets with
//! tail drop, no shaper; the rate is packets forwarded per second of wall time.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use zl_core::Nanos;
use zl_dataplane::mt::{run_mt, MtParams};
use zl_port::MemoryPort;
use zl_qos::QosParams;
use zl_wire::{FlowKeyKind, ParseConfig};
use zl_zombie::{ZombieList, ZombieParams};

fn frame(net: u8, host: u8) -> Vec<u8> {
    let mut f = vec![0u8; 100];
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&86u16.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[10, 0, net, host]);
    ip[16..20].copy_from_slice(&[192, 0, 2, 1]);
    let sum = zl_wire::checksum::checksum(ip);
    ip[10..12].copy_from_slice(&sum.to_be_bytes());
    f
}

#[test]
#[ignore = "a measurement; run by hand"]
fn forwarding_rate_with_1_and_2_rx_workers() {
    const TOTAL: u64 = 4_000_000;
    for workers in [1u16, 2] {
        let qos: QosParams = toml::from_str(
            "link_rate_bps = 100_000_000_000\n[[classes]]\nname = \"be\"\nweight = 1\nmax_packets = 4096\n",
        )
        .unwrap();
        let params = MtParams {
            ring_capacity: 4096,
            pool_per_worker: 16_384,
            qos,
            parse: ParseConfig::default(),
            flow_key: FlowKeyKind::SrcDst,
            seed: 1,
        };
        let rx: Vec<MemoryPort> = (0..workers)
            .map(|w| {
                MemoryPort::cycling(
                    "src",
                    w,
                    (1..=8).map(|h| frame(w as u8, h)).collect(),
                    TOTAL / workers as u64,
                )
            })
            .collect();
        let tx = MemoryPort::cycling("out", 9, Vec::new(), 0);
        let zombies = Arc::new(ZombieList::new(ZombieParams::default().validate().unwrap()));
        let start = Instant::now();
        let clock = || Nanos(start.elapsed().as_nanos() as u64);
        let stop = AtomicBool::new(false);
        let r = run_mt(rx, tx, &params, zombies, clock, &stop).unwrap();
        let secs = start.elapsed().as_secs_f64();
        assert!(r.balanced(), "{r:?}");
        let ring_full: u64 = r.rx.iter().map(|s| s.ring_full).sum();
        eprintln!(
            "{workers} rx worker(s): received {} forwarded {} ring_full {ring_full} tail {} in {secs:.3} s: {:.2} Mpkt/s forwarded, {:.2} Mpkt/s received",
            r.received(),
            r.tx.forwarded,
            r.tx.tail_drops,
            r.tx.forwarded as f64 / secs / 1e6,
            r.received() as f64 / secs / 1e6
        );
    }
}
