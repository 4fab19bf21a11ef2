//! Multi-threaded forwarding: the receive / transmit split of the IXP1200 design (spec/06).
//!
//! ```text
//!  rx worker 0: port.recv -> parse -> flow id -> ZombieList::observe --+
//!  rx worker 1: port.recv -> parse -> flow id -> ZombieList::observe --+--> ArrayQueue (MPMC,
//!  ...                                                                 |    lock-free) --+
//!                                                                                         |
//!  tx worker: ring -> QosEngine::enqueue (AQM) -> schedule + shape -> port.send <---------+
//!             sent buffers -> return ring (lock-free) -> the rx workers' pools
//! ```
//!
//! Each receive worker owns one port and its own [`BufPool`]; the workers share one
//! lock-free [`ZombieList`] (via `Arc`), observed once per parsed packet, whose `1/P(t)` the
//! transmit worker offers to the QoS engine (`QosEngine::offer_zombie_estimate`, the
//! `sqrt-n-live` buffer rule and the flow-count metric). Packets reach the single transmit
//! worker through one multi-producer [`ArrayQueue`]; a full ring is a counted drop
//! (`ring_full`), never a wait. The transmit worker alone touches the QoS engine (AQM, queues,
//! scheduler, shaper), so the per-class algorithms stay single-threaded and unchanged.
//! Transmitted (and dropped) buffers go back through a second lock-free ring, from which a
//! receive worker refills its pool up to its own size.
//!
//! decided: one egress port per [`run_mt`] (the bottleneck of the IXP design); frames are not
//! routed or rewritten here (no TTL / MAC change), only classified by DSCP and marked CE by the
//! AQM, so this measures the receive / queue / transmit split itself.
//!
//! Conservation, exact when every thread has stopped ([`MtReport::balanced`]):
//! `received = parse_errors + ring_full + aqm_dropped + tx_port_dropped + forwarded + queued`;
//! what a port dropped before handing a frame over (no free buffer: the transmit side holds
//! them) is the port's own `rx_dropped`, reported per worker beside `received`.
//! Time is passed in (`clock`), never read here.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use crossbeam_queue::ArrayQueue;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use zl_aqm::{PacketMeta, Verdict};
use zl_core::{Ecn, Nanos};
use zl_port::{Batch, BufPool, PacketBuf, Port, PortError, Readiness};
use zl_qos::{Dequeue, QosEngine, QosParams};
use zl_wire::{parse, FlowKey, FlowKeyKind, ParseConfig};
use zl_zombie::ZombieList;

/// Parameters of a multi-threaded run.
#[derive(Clone, Debug)]
pub struct MtParams {
    /// Capacity of the receive -> transmit ring, packets (at least 1).
    pub ring_capacity: usize,
    /// Buffers in each receive worker's pool.
    pub pool_per_worker: usize,
    /// The egress QoS (classes, AQM, scheduler, shaper).
    pub qos: QosParams,
    pub parse: ParseConfig,
    pub flow_key: FlowKeyKind,
    /// Seeds the flow hash and every worker's random generator.
    pub seed: u64,
}

/// One receive worker's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxStats {
    pub received: u64,
    pub parse_errors: u64,
    /// Packets refused by a full receive -> transmit ring.
    pub ring_full: u64,
    /// Packets handed to the transmit worker.
    pub passed: u64,
    /// What the port itself dropped before handing it over (no free buffer, ring overflow):
    /// `PortCounters::rx_dropped` at the end. Not part of `received`.
    pub port_rx_dropped: u64,
}

/// The transmit worker's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TxStats {
    /// Packets taken off the ring.
    pub taken: u64,
    pub marked: u64,
    pub early_drops: u64,
    pub forced_drops: u64,
    pub tail_drops: u64,
    /// Packets the egress port sent.
    pub forwarded: u64,
    /// Packets the egress port counted as transmit drops.
    pub tx_port_dropped: u64,
}

/// What a run did.
#[derive(Debug)]
pub struct MtReport {
    pub rx: Vec<RxStats>,
    pub tx: TxStats,
    /// Packets still in the ring or the class queues when the run stopped.
    pub queued: u64,
    /// The shared Zombie List's flow estimate at the end, `1/P(t)`.
    pub estimated_flows: f64,
    /// The first port error, if a port failed (the run then stops).
    pub error: Option<PortError>,
}

impl MtReport {
    pub fn received(&self) -> u64 {
        self.rx.iter().map(|r| r.received).sum()
    }

    /// Every packet counted exactly once.
    pub fn balanced(&self) -> bool {
        let rx_lost: u64 = self.rx.iter().map(|r| r.parse_errors + r.ring_full).sum();
        let t = &self.tx;
        self.received()
            == rx_lost
                + t.early_drops
                + t.forced_drops
                + t.tail_drops
                + t.tx_port_dropped
                + t.forwarded
                + self.queued
    }
}

/// A packet on its way from a receive worker to the transmit worker.
struct Item {
    buf: PacketBuf,
    meta: PacketMeta,
    dscp: u8,
}

/// What a receive worker needs to turn a frame into an [`Item`].
fn item_of(buf: PacketBuf, p: &MtParams) -> Result<Item, PacketBuf> {
    let Ok(info) = parse(buf.as_slice(), &p.parse) else {
        return Err(buf);
    };
    let key = FlowKey {
        src: info.src,
        dst: info.dst,
        protocol: info.protocol,
        ports: info.ports,
    };
    let meta = PacketMeta {
        len: buf.len() as u32,
        flow: key.hash(p.flow_key, p.seed),
        ecn: Ecn::from_bits(info.tos & 3),
        ..PacketMeta::default()
    };
    Ok(Item {
        buf,
        meta,
        dscp: info.tos >> 2,
    })
}

fn set_ce(buf: &mut PacketBuf, parse_cfg: &ParseConfig) {
    if let Ok(mut info) = parse(buf.as_slice(), parse_cfg) {
        // A frame that cannot be marked stays as it is; the AQM counted the mark.
        let _ = zl_wire::set_ce(buf.as_mut_slice(), &mut info);
    }
}

/// Runs `rx_ports.len()` receive workers and one transmit worker (the calling thread) until
/// every receive port is exhausted and everything queued is sent, or `stop` is set, or a port
/// fails. `clock` gives the time on every thread (monotonic; shared). `zombies` is the shared
/// Zombie List.
pub fn run_mt<P, Q, C>(
    rx_ports: Vec<P>,
    mut tx_port: Q,
    params: &MtParams,
    zombies: Arc<ZombieList>,
    clock: C,
    stop: &AtomicBool,
) -> Result<MtReport, zl_qos::QosConfigError>
where
    P: Port + Send,
    Q: Port,
    C: Fn() -> Nanos + Sync,
{
    let mut engine: QosEngine<PacketBuf> = QosEngine::new(&params.qos)?;
    let workers = rx_ports.len();
    let ring: ArrayQueue<Item> = ArrayQueue::new(params.ring_capacity.max(1));
    let returns: ArrayQueue<PacketBuf> = ArrayQueue::new((params.pool_per_worker * workers).max(1));
    let running = AtomicUsize::new(workers);
    let failed = AtomicBool::new(false);
    let buf_size = zl_port::DEFAULT_BUF_SIZE;

    std::thread::scope(|s| {
        let mut handles = Vec::new();
        for (w, mut port) in rx_ports.into_iter().enumerate() {
            let (ring, returns, running, failed, zombies, clock) =
                (&ring, &returns, &running, &failed, &zombies, &clock);
            handles.push(s.spawn(move || {
                let mut pool = BufPool::new(params.pool_per_worker, buf_size);
                let mut batch = Batch::new();
                let mut rng = Xoshiro256PlusPlus::seed_from_u64(params.seed ^ (w as u64 + 1));
                let mut st = RxStats::default();
                let mut error = None;
                while !stop.load(Ordering::Relaxed) && !failed.load(Ordering::Relaxed) {
                    while pool.available() < pool.total() {
                        match returns.pop() {
                            Some(b) => pool.free(b),
                            None => break,
                        }
                    }
                    let now = clock();
                    match port.recv(now, &mut pool, &mut batch) {
                        Ok(_) => {}
                        Err(e) => {
                            failed.store(true, Ordering::Relaxed);
                            error = Some(e);
                            break;
                        }
                    }
                    let empty = batch.is_empty();
                    for buf in batch.drain() {
                        st.received += 1;
                        match item_of(buf, params) {
                            Err(buf) => {
                                st.parse_errors += 1;
                                pool.free(buf);
                            }
                            Ok(item) => {
                                zombies.observe(item.meta.flow, now, &mut rng);
                                match ring.push(item) {
                                    Ok(()) => st.passed += 1,
                                    Err(item) => {
                                        st.ring_full += 1;
                                        pool.free(item.buf);
                                    }
                                }
                            }
                        }
                    }
                    if empty {
                        if port.readiness() == Readiness::Exhausted {
                            break;
                        }
                        std::hint::spin_loop();
                    }
                }
                st.port_rx_dropped = port.counters().rx_dropped();
                running.fetch_sub(1, Ordering::Release);
                (st, error)
            }));
        }

        // The transmit worker.
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(params.seed);
        let mut tx = TxStats::default();
        let mut out = Batch::new();
        let total_bufs = params.pool_per_worker * workers;
        // A pool that owns no buffers: it takes the sent buffers back (up to all of the
        // workers' buffers) so they can be handed to the return ring.
        let mut sent_pool = BufPool::empty(total_bufs, buf_size);
        let mut error = None;
        let mut since_estimate = 0u32;
        loop {
            let now = clock();
            let rx_done = running.load(Ordering::Acquire) == 0;
            while let Some(item) = ring.pop() {
                tx.taken += 1;
                let Item { buf, meta, dscp } = item;
                let (_, r) = engine.enqueue(now, &mut rng, Some(dscp), meta, buf, |b| {
                    set_ce(b, &params.parse)
                });
                match r {
                    Ok(Verdict::MarkCe) => tx.marked += 1,
                    Ok(_) => {}
                    Err(d) => {
                        match d.verdict {
                            Verdict::EarlyDrop => tx.early_drops += 1,
                            Verdict::ForcedDrop => tx.forced_drops += 1,
                            _ => tx.tail_drops += 1,
                        }
                        let _ = returns.push(d.item);
                    }
                }
                since_estimate += 1;
                if since_estimate >= 64 {
                    since_estimate = 0;
                    engine.offer_zombie_estimate(now, &zombies);
                }
            }
            while !out.is_full() {
                match engine.dequeue(now) {
                    Dequeue::Packet(d) => {
                        // Batch has room: checked above.
                        let _ = out.push(d.item);
                    }
                    Dequeue::Hold { .. } | Dequeue::Empty => break,
                }
            }
            if !out.is_empty() {
                let n = out.len() as u64;
                match tx_port.send(now, &mut out, &mut sent_pool) {
                    Ok(sent) => {
                        tx.forwarded += sent as u64;
                        tx.tx_port_dropped += n - sent as u64;
                    }
                    Err(e) => {
                        failed.store(true, Ordering::Relaxed);
                        error = Some(e);
                    }
                }
                while let Some(b) = sent_pool.alloc() {
                    let _ = returns.push(b);
                }
            }
            if error.is_some() || failed.load(Ordering::Relaxed) || stop.load(Ordering::Relaxed) {
                break;
            }
            if rx_done && ring.is_empty() && engine.is_empty() {
                break;
            }
        }
        let _ = tx_port.flush();
        let mut rx = Vec::new();
        for h in handles {
            let (st, e) = h.join().unwrap_or_default();
            if error.is_none() {
                error = e;
            }
            rx.push(st);
        }
        Ok(MtReport {
            rx,
            tx,
            queued: (ring.len() + engine.len()) as u64,
            estimated_flows: zombies.estimated_flows(),
            error,
        })
    })
}
