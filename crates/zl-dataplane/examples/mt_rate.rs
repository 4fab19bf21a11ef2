//! Forwarding rate of the threaded router (`zl_dataplane::mt`) with 1 and 2 receive workers
//! and 1 and 2 transmit workers, each layout as a ratio to 1 + 1 measured in the same run (a
//! measurement, printed, never asserted; figures in docs/performance/real-traffic.md):
//!
//! ```text
//! cargo run --release -p zl-dataplane --example mt_rate
//! ```
//!
//! Two in-memory source ports (100-byte IPv4/UDP frames, 8 flows each) routed to two egress
//! ports (LPM, TTL, MAC rewrite), each egress with one ZL-RED class of 4096 packets on the
//! port's shared Zombie List and no shaper (no virtual time: the workers run flat out on the
//! monotonic clock, and the egress ports count what they send); the rate is packets received
//! and forwarded per second of wall time. With 2 transmit workers, each egress port has its
//! own.

use std::sync::atomic::AtomicBool;
use std::time::Instant;

use zl_core::Nanos;
use zl_dataplane::config::Forwarding;
use zl_dataplane::dataplane::PortSlot;
use zl_dataplane::forward::Forwarder;
use zl_dataplane::mt::{MtParams, MtRouter};
use zl_dataplane::priority::PriorityMap;
use zl_dataplane::route::{NextHop, RouteTable};
use zl_dataplane::view::{NoObserver, RouterView};
use zl_port::{MemoryPort, SplitPort};
use zl_qos::QosParams;
use zl_testkit::frames::Udp;
use zl_wire::{MacAddr, ParseConfig};
use zl_zombie::ZombieParams;

/// Flow `host` of source `net`: 10.0.net.host -> 192.0.(2 + net).1, 100 bytes. The MACs are
/// zero: the router takes frames whatever their destination MAC.
fn frame(net: u8, host: u8) -> Vec<u8> {
    Udp::v4([10, 0, net, host], [192, 0, 2 + net, 1])
        .macs([0; 6], [0; 6])
        .len(100)
        .build()
}

fn router((workers, tx_workers): (usize, usize), per_port: u64) -> MtRouter {
    let qos: QosParams = toml::from_str(
        "link_rate_bps = 100_000_000_000\n[[classes]]\nname = \"be\"\nweight = 1\n\
         max_packets = 4096\naqm = { kind = \"zl-red\", th_min = 5, p_max = 0.15, a = 10 }\n",
    )
    .unwrap();
    let mut table = RouteTable::default();
    for (net, port) in [(2u8, 2u16), (3, 3)] {
        table
            .add(
                format!("192.0.{net}.0/24").parse().unwrap(),
                NextHop::new(port, MacAddr([2, 0, 0, 0, net, 1])),
            )
            .unwrap();
    }
    let mut ports: Vec<Box<dyn SplitPort>> = (0..2u8)
        .map(|w| {
            Box::new(MemoryPort::cycling(
                "src",
                w as u16,
                (1..=8).map(|h| frame(w, h)).collect(),
                per_port,
            )) as Box<dyn SplitPort>
        })
        .collect();
    for i in 2..4u16 {
        ports.push(Box::new(MemoryPort::cycling("out", i, Vec::new(), 0)));
    }
    let macs = (0..4).map(|i| MacAddr([2, 0, 0, 0, 0, i])).collect();
    let forwarder = Forwarder::new(
        Forwarding::Router(table),
        ParseConfig::default(),
        PriorityMap::default(),
        macs,
    );
    let ports = ports
        .into_iter()
        .map(|port| {
            PortSlot::on_own_list(port, &qos, ZombieParams::default().validate().unwrap()).unwrap()
        })
        .collect();
    MtRouter::new(
        ports,
        forwarder,
        Vec::new(),
        MtParams {
            rx_workers: workers,
            tx_workers,
            ring_capacity: 4096,
            pool_per_worker: 16_384,
            work_budget: 256,
            seed: 1,
            cpus: Default::default(),
        },
    )
    .expect("every route leads to a port given")
}

fn main() {
    const PER_PORT: u64 = 2_000_000;
    const LAYOUTS: [(usize, usize); 4] = [(1, 1), (2, 1), (1, 2), (2, 2)];
    // Twice over, interleaved, so a slow patch of the machine does not land on one layout.
    let mut rates = [(0.0f64, 0.0f64); LAYOUTS.len()];
    for _ in 0..2 {
        for (i, &(rx, tx)) in LAYOUTS.iter().enumerate() {
            let mut r = router((rx, tx), PER_PORT);
            let start = Instant::now();
            let clock = || Nanos(start.elapsed().as_nanos() as u64);
            let stop = AtomicBool::new(false);
            r.run(
                &clock,
                &stop,
                Nanos::from_secs(10),
                Nanos::from_millis(100),
                &mut NoObserver,
            )
            .unwrap();
            let secs = start.elapsed().as_secs_f64();
            let t = r.totals();
            zl_testkit::conservation::assert_conserved(
                t.received,
                t.forwarded,
                t.dropped(),
                r.queued(),
                format_args!("{rx} rx / {tx} tx worker(s): {t:?}"),
            );
            let (rx_rate, fwd_rate) = (t.received as f64 / secs, t.forwarded as f64 / secs);
            println!(
                "{rx} rx / {tx} tx worker(s): received {} forwarded {} dropped {} (ring_full {}) \
                 in {secs:.3} s: {:.2} Mpkt/s received, {:.2} Mpkt/s forwarded",
                t.received,
                t.forwarded,
                t.dropped(),
                t.drops_of(zl_dataplane::DropCause::RingFull),
                rx_rate / 1e6,
                fwd_rate / 1e6
            );
            rates[i].0 += rx_rate / 2.0;
            rates[i].1 += fwd_rate / 2.0;
        }
    }
    let base = rates[0];
    println!("| rx workers | tx workers | received (x 1/1) | forwarded (x 1/1) |");
    for (&(rx, tx), r) in LAYOUTS.iter().zip(&rates) {
        println!(
            "| {rx} | {tx} | {:.2} ({:.2} Mpkt/s) | {:.2} ({:.2} Mpkt/s) |",
            r.0 / base.0,
            r.0 / 1e6,
            r.1 / base.1,
            r.1 / 1e6
        );
    }
}
