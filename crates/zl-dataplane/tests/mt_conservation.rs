//! The multi-threaded receive / transmit split (`zl_dataplane::mt`): with two receive workers
//! on in-memory ports sharing one Zombie List, every packet is counted exactly once, the shared
//! list is fed by both workers, and a stop leaves the
//! identity exact with what was queued counted.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use zl_core::Nanos;
use zl_dataplane::mt::{run_mt, MtParams};
use zl_port::{Batch, BufPool, MemoryPort, Port, PortCounters, PortError, Readiness};
use zl_qos::QosParams;
use zl_wire::{FlowKeyKind, ParseConfig};
use zl_zombie::{ZombieList, ZombieParams};

/// An IPv4/UDP frame from 10.0.`net`.`host` to 192.0.2.1, valid header checksum.
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

fn params(max_packets: u32, rate_bps: u64) -> MtParams {
    let qos: QosParams = toml::from_str(&format!(
        "link_rate_bps = {rate_bps}\nshaper = {{ rate_bps = {rate_bps} }}\n\
         [[classes]]\nname = \"be\"\nweight = 1\nmax_packets = {max_packets}\n\
         aqm = {{ kind = \"red\", min_th = 5.0, max_th = 20.0, max_p = 0.1, w_q = 0.02 }}\n"
    ))
    .unwrap();
    MtParams {
        // More buffers per worker than the ring and the queue hold together, so a worker's
        // pool never runs dry: overload shows as ring-full and AQM drops.
        ring_capacity: 256,
        pool_per_worker: 2048,
        qos,
        parse: ParseConfig::default(),
        flow_key: FlowKeyKind::SrcDst,
        seed: 7,
    }
}

fn zombies() -> Arc<ZombieList> {
    let p = ZombieParams {
        m: 1000,
        p_swap: 0.25,
        ..ZombieParams::default()
    };
    Arc::new(ZombieList::new(p.validate().unwrap()))
}

#[test]
fn two_rx_workers_conserve_every_packet() {
    // Port 0: 8 flows plus one malformed frame per 9; port 1: 8 other flows.
    const PER_PORT: u64 = 9 * 20_000;
    let mut t0: Vec<Vec<u8>> = (1..=8).map(|h| frame(0, h)).collect();
    t0.push(vec![0u8; 10]);
    let t1: Vec<Vec<u8>> = (1..=8).map(|h| frame(1, h)).collect();
    let rx = vec![
        MemoryPort::cycling("a", 0, t0, PER_PORT),
        MemoryPort::cycling("b", 1, t1, PER_PORT),
    ];
    let tx = MemoryPort::cycling("out", 2, Vec::new(), 0);
    // Virtual time: every clock read advances 1 µs (all threads together).
    let t = AtomicU64::new(0);
    let clock = || Nanos(t.fetch_add(1_000, Ordering::Relaxed));
    let stop = AtomicBool::new(false);
    let r = run_mt(rx, tx, &params(64, 200_000_000), zombies(), clock, &stop).unwrap();
    assert!(r.error.is_none(), "{:?}", r.error);
    // Every frame offered was received (the pools are larger than ring + queue).
    let port_dropped: u64 = r.rx.iter().map(|s| s.port_rx_dropped).sum();
    assert_eq!(r.received() + port_dropped, 2 * PER_PORT, "{r:?}");
    assert_eq!(port_dropped, 0, "a worker's pool ran dry: {r:?}");
    assert_eq!(r.rx[0].parse_errors, PER_PORT / 9, "{r:?}");
    assert_eq!(r.rx[1].parse_errors, 0, "{r:?}");
    assert_eq!(r.queued, 0, "a finished run drains: {r:?}");
    assert!(r.balanced(), "{r:?}");
    assert!(r.tx.forwarded > 0, "{r:?}");
    assert_eq!(
        r.rx.iter().map(|s| s.passed).sum::<u64>(),
        r.tx.taken,
        "{r:?}"
    );
}

/// A port that raises `stop` once it has received `after` frames (then keeps receiving).
struct StopAfter<'a> {
    inner: MemoryPort,
    after: u64,
    stop: &'a AtomicBool,
}

impl Port for StopAfter<'_> {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn recv(
        &mut self,
        now: Nanos,
        pool: &mut BufPool,
        batch: &mut Batch,
    ) -> Result<usize, PortError> {
        let n = self.inner.recv(now, pool, batch)?;
        self.after = self.after.saturating_sub(n as u64);
        if self.after == 0 {
            self.stop.store(true, Ordering::Relaxed);
        }
        Ok(n)
    }
    fn send(
        &mut self,
        now: Nanos,
        batch: &mut Batch,
        pool: &mut BufPool,
    ) -> Result<usize, PortError> {
        self.inner.send(now, batch, pool)
    }
    fn readiness(&self) -> Readiness {
        self.inner.readiness()
    }
    fn counters(&self) -> PortCounters {
        self.inner.counters()
    }
}

#[test]
fn a_stop_mid_run_keeps_the_identity_exact() {
    let stop = AtomicBool::new(false);
    // Sources far longer than the run: worker 0's port raises the stop after 50 000 frames.
    let rx: Vec<StopAfter> = (0..2u16)
        .map(|w| StopAfter {
            inner: MemoryPort::cycling(
                "src",
                w,
                (1..=4).map(|h| frame(w as u8, h)).collect(),
                100_000_000,
            ),
            after: if w == 0 { 50_000 } else { u64::MAX },
            stop: &stop,
        })
        .collect();
    let tx = MemoryPort::cycling("out", 2, Vec::new(), 0);
    let t = AtomicU64::new(0);
    let clock = || Nanos(t.fetch_add(1_000, Ordering::Relaxed));
    // A slow shaper (10 Mbit/s) so the queue and the ring are full when the stop comes.
    let r = run_mt(rx, tx, &params(64, 10_000_000), zombies(), clock, &stop).unwrap();
    assert!(r.error.is_none(), "{:?}", r.error);
    assert!(r.rx[0].received >= 50_000, "{r:?}");
    assert!(r.balanced(), "{r:?}");
    assert!(r.rx.iter().all(|s| s.port_rx_dropped == 0), "{r:?}");
    let t = &r.tx;
    let ring_full: u64 = r.rx.iter().map(|s| s.ring_full).sum();
    assert!(
        t.early_drops + t.forced_drops + t.tail_drops + ring_full > 0,
        "an overloaded link dropped nothing: {r:?}"
    );
}
