//! Multi-threaded forwarding: the receive / transmit split of the IXP1200 design (docs/ixp-sim.md).
//!
//! ```text
//!  rx worker 0: ports' recv burst -> forward stage (parse, route / bridge, TTL, MACs;
//!               kernel routing: the worker's neighbour wait, crate::neighbour)
//!               -> observe stage (the egress ports' Zombie Lists) -> ring of the egress port --+
//!  rx worker 1: (its own ports, the same steps)  ---------------------------------------------+
//!                                                                                            |
//!  tx worker k: per egress port j with j mod M = k: ring -> classify -> AQM on the           |
//!              receive worker's observation -> class queues -> schedule + shape ->           |
//!              port send <-------------------------------------------------------------------+
//!              sent and dropped buffers -> return ring -> the rx workers' pools
//! ```
//!
//! [`MtRouter`] holds the same parts as the single-thread [`crate::Dataplane`], built by the
//! same builder (`crate::build::build_threaded`): ports, one [`Egress`] per port, the
//! [`Forwarder`], the generator flow groups. The single-thread loop is its one-worker case
//! without the ring: both run the same receive stages over each burst (`crate::stages`:
//! forward, then observe in the egress ports' lists) and the same egress stage
//! ([`Egress::admit`], [`Egress::transmit`], [`Egress::tick`], [`Egress::shutdown`]), and
//! count every fate through [`Fates`]. With
//! `rx_workers = N` the ports' receive queues are dealt to N receive workers; each worker owns
//! its [`BufPool`] and its neighbour wait, and forwards with the same stages as `Dataplane`
//! does, rejecting with the same
//! `crate::reject::reject`, so routing (static, the kernel's table, bridging), the ICMP errors
//! and the drop causes are the same. A forwarded packet is observed once,
//! on the receive worker, in its egress port's shared lock-free [`ZombieList`], and travels with
//! that [`Observation`] and its parsed headers' rewritable parts ([`QosHeaders`], so the frame
//! is never parsed again) through the egress port's multi-producer ring ([`ArrayQueue`]); a
//! full ring is the counted drop `ring_full`, never a wait. With `tx_workers = M` the egress
//! ports are dealt to M transmit workers (port `j` to worker `j mod M`; worker 0 is the
//! calling thread): each alone touches its ports' egress stages ([`TxShard`]): it admits on
//! the carried observation (the port's engine decides on the port's list, so SRED / ZL-RED
//! never observe again), schedules, shapes and sends. Sent and dropped buffers go back to the
//! receive workers' pools through one return ring that holds every buffer ([`ReturnRing`]:
//! bounded, and a push never finds it full; were it to, the buffer is counted in
//! [`MtRouter::returns_lost`]).
//!
//! decided: one egress port is never shared by two transmit workers: its class queues,
//! scheduler and shaper stay single-threaded and unchanged (one egress link cannot be
//! scheduled by several schedulers anyway), and M egress links are scheduled on up to M cores.
//!
//! decided: worker 0 (the calling thread) is also the coordinator: it takes the progress
//! reports and the live reloads, and decides when the run ends. For a report or a reload it
//! asks every other transmit worker for its shard (`MtRouter::take_shards`: a counter the
//! workers look at once per round, and a channel of one each way), so that for that moment it
//! holds every port's egress stage and counters: a report shows every port as of one round,
//! and a live update is checked against every port and applied to all of them or to none, by
//! the same `apply_egress` as the single-thread loop, and the receive workers' state replaced
//! once. The cost is a pause of the other transmit workers for the length of a report or a
//! reload (every progress period, 1 s in `zlrouter run`; the rings, 4096 packets, absorb it).
//! The alternatives were worse: each worker applying its own ports' part of an update cannot
//! refuse the whole update once another worker has applied its part (not all-or-nothing), and
//! a lock around each port's egress would put a lock on the packet path. A worker that ends
//! (a failed port, a stop) makes the handover fail, and the run ends with it.
//!
//! decided: each port is split into its halves for the length of a run
//! ([`SplitPort`](zl_port::SplitPort)): one receive half per receive queue, and one transmit
//! half. The receive halves of all ports, in port order, are dealt to the receive workers (half
//! `s` to worker `s mod N`), so `rx_workers` may exceed the ports when ports have several
//! queues; a port's transmit half travels with its egress stage in its transmit worker's shard.
//! No port is locked: each half has one owner. At the end of the run the halves are joined
//! back into the port ([`Joined`]), which splits into the same halves for the next run. A port
//! type without halves of its own would share itself behind a lock taken per burst
//! ([`zl_port::split_locked`]); `tests/packet_path_locks.rs` fails if one of ours does.
//! Nothing else is locked per packet; the workers' counters and their receive halves'
//! counters are copied under a `try_lock` once per progress period.
//!
//! Conservation, exact when the run has stopped (the same identity as the single-thread loop):
//! `received = forwarded + Σ drops[cause] + queued`, with `ring_full` one of the causes. At the
//! end (every source finished and every transmit worker's rings and queues empty, the drain
//! time over, or a stop from SIGINT / SIGTERM) every worker stops, then what is left in the
//! rings and the class queues is counted as `shutdown`, so `queued` is 0. Time is passed in
//! (`clock`), never read here.
//!
//! Live (a progress report while the workers run), the receive side leads: a worker counts a
//! burst as received and publishes that count (`Lead`, a release store) before it forwards
//! the burst, and the coordinator reads the leads last, after the transmit workers' counters
//! and class queues (all handed over) and the receive workers' other counters. So every packet whose fate a report counts is in
//! its `received`, and `received = forwarded + Σ drops + queued + in_flight` holds with
//! `in_flight >= 0`: the packets in the rings, in a worker's hands, or dropped by a worker
//! since it last published its drops (at most half a progress period ago). `queued` is the
//! class queues alone (were the receive counts read as last published, the transmit side
//! could have counted packets they had not, and `in_flight` would go negative).

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, PoisonError};

use crossbeam_queue::ArrayQueue;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use zl_aqm::PacketMeta;
use zl_core::Nanos;
use zl_port::{
    Batch, BufPool, Halves, Joined, PacketBuf, PortCounters, PortError, Readiness, RxHalf, TxHalf,
    BATCH_CAPACITY, DEFAULT_BUF_SIZE,
};
use zl_qos::QosEngine;
use zl_wire::{PacketInfo, QosHeaders};
use zl_zombie::{Observation, ZombieList};

use crate::capture::{CaptureStats, CaptureTap, CaptureWriter};
use crate::cpus::WorkerCpus;
use crate::egress::{Egress, Link, QueueLengthHistogram};
use crate::engine::{
    apply_egress, flush_all, receive_port, stream_seed, BoxedPort, Intake, PortSlot, StopReason,
    UnknownPort, ADMIT_STREAM, OBSERVE_STREAM,
};
use crate::fates::Fates;
use crate::forward::{Forwarder, Forwarding};
use crate::icmp::{IcmpKind, IcmpSender};
use crate::neighbour::{NeighbourStage, DEFAULT_UNRES_QLEN};
use crate::reload::{Applied, LiveUpdate, ReloadSlot};
use crate::stages::{forward_stage, observe_stage, Lanes};
use crate::stats::{DropCause, FateCounters, GroupStats};
use crate::view::{Observer, RouterView};

/// Packets each egress port's receive -> transmit ring holds.
pub const RING_PACKETS: usize = 4096;

/// How a threaded run is sized.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MtParams {
    /// Receive workers (at least 1; more than the ports leaves the extra ones out).
    pub rx_workers: usize,
    /// Transmit workers (at least 1; more than the ports leaves the extra ones out): egress
    /// port `j` is served by worker `j mod tx_workers`, worker 0 being the calling thread.
    pub tx_workers: usize,
    /// Capacity of each egress port's ring, packets (at least 1).
    pub ring_capacity: usize,
    /// Buffers in each receive worker's pool.
    pub pool_per_worker: usize,
    /// Packets a receive worker takes from one port per round (checked between bursts of 32),
    /// and packets a transmit worker takes from one ring per round.
    pub work_budget: usize,
    /// Seeds every worker's random generator.
    pub seed: u64,
    /// The CPUs each worker runs on (`run.cpus`; the router binary gives the workers every CPU
    /// the process may use when it is absent).
    pub cpus: WorkerCpus,
}

/// A packet on its way from a receive worker to its egress port's transmit worker.
struct Item {
    buf: PacketBuf,
    meta: PacketMeta,
    /// What the egress rewrites, as parsed on the receive worker (`None`: a bridged frame
    /// that did not parse).
    headers: Option<QosHeaders>,
    obs: Option<Observation>,
    /// An ICMP error the receive worker wrote over a dropped packet (`crate::icmp`): it goes
    /// to the port's `Egress::originate`, past classification and admission.
    icmp: Option<IcmpKind>,
}

/// The multi-threaded router: the parts of a [`crate::Dataplane`], run by [`MtRouter::run`].
pub struct MtRouter {
    ports: Vec<BoxedPort>,
    names: Vec<String>,
    egress: Vec<Egress>,
    forwarder: Forwarder,
    params: MtParams,
    /// Port counters as of the last progress report (each half's, as its owner last
    /// published it).
    counters: Vec<PortCounters>,
    /// The whole run's counters: the receive workers' plus the transmit workers'.
    fates: Fates,
    /// The transmit workers' counters, summed (during a run: as of the last handover).
    tx_fates: Fates,
    /// Each receive worker's counters, as of its last report (final after a run).
    worker_totals: Vec<FateCounters>,
    /// Each receive worker's counters at the end of the last run (a next run goes on from
    /// them).
    rx: Vec<Fates>,
    now: Nanos,
    /// The drop capture's writer thread (`[capture]`), closed at the end of a run.
    capture: Option<CaptureWriter>,
    /// Where live reloads arrive (`crate::reload`), looked at once per transmit round.
    reload: Option<Arc<ReloadSlot>>,
    /// Sent or dropped buffers the return ring had no room for, over every run (0 unless the
    /// ring's sizing is wrong: see [`ReturnRing`]).
    returns_lost: u64,
    /// Kernel routing: packets each receive worker holds per unresolved next hop
    /// (`routing.unres_qlen`).
    unres_qlen: usize,
}

/// What the receive workers forward with, replaced as a whole by a live reload: each worker
/// keeps its own copy and takes the new one when [`Shared::rx_generation`] moves.
#[derive(Clone)]
struct RxState {
    forwarder: Forwarder,
    /// Each egress port's Zombie List, observed on receive, and what it observes a packet by.
    zombies: Vec<Option<(Arc<ZombieList>, zl_aqm::IsolateBy)>>,
}

/// The receive side's shared state, borrowed by every worker for the length of a run.
struct Shared<'a> {
    rings: &'a [ArrayQueue<Item>],
    returns: &'a ReturnRing,
    /// The receive workers' forwarding state as of the last reload, and its generation (a
    /// worker compares it once per round; the lock is taken only to copy a new state).
    rx_state: &'a Mutex<RxState>,
    rx_generation: &'a AtomicU64,
    /// Set when the receive workers must stop (the run is over).
    quit: &'a AtomicBool,
    failed: &'a AtomicBool,
    /// Receive workers still running.
    running: &'a AtomicUsize,
    /// Set when the transmit helpers must stop (the coordinator has ended the run).
    tx_quit: &'a AtomicBool,
    /// Moved by the coordinator to ask every transmit helper for its shard ([`TxShard`]).
    handover: &'a AtomicU64,
    /// Transmit worker `k` has seen the receive workers done and then its rings and class
    /// queues empty: it has nothing left to send, ever (index 0, the coordinator, unused).
    drained: &'a [AtomicBool],
    progress: &'a [Mutex<Published>],
    /// Each receive worker's received count, published before the burst is forwarded.
    leads: &'a [Lead],
    /// Kernel routing: each receive worker's neighbour wait per next hop; `None` otherwise.
    unres_qlen: Option<usize>,
}

/// A receive worker's `received` packets and bytes, stored (release) before it forwards the
/// burst they count, read (acquire) by the coordinator's progress report after every
/// other counter: the receive side leads (see the module doc). Its own cache line: written
/// once per burst by its worker only.
#[repr(align(128))]
struct Lead {
    packets: AtomicU64,
    bytes: AtomicU64,
}

impl Lead {
    fn new(totals: &FateCounters) -> Lead {
        Lead {
            packets: AtomicU64::new(totals.received),
            bytes: AtomicU64::new(totals.received_bytes),
        }
    }

    fn publish(&self, totals: &FateCounters) {
        self.bytes.store(totals.received_bytes, Ordering::Relaxed);
        // Release: this store happens before the pushes of the burst it counts (and before the
        // worker's later publishes of those packets' drops), so a reader that has seen any of
        // them and then loads `packets` with acquire reads at least this count.
        self.packets.store(totals.received, Ordering::Release);
    }

    /// Overwrites `totals`' received counts with the lead.
    fn read_into(&self, totals: &mut FateCounters) {
        // Acquire: pairs with `publish` (see there).
        totals.received = self.packets.load(Ordering::Acquire);
        totals.received_bytes = self.bytes.load(Ordering::Relaxed);
    }
}

/// What a receive worker publishes once per half progress period for the coordinator's
/// reports: its counters, and its receive halves' counters by port.
struct Published {
    fates: Fates,
    ports: Vec<(usize, PortCounters)>,
}

/// A receive half in a worker's hands: (its place among every port's receive halves, its
/// port, the half).
type Source = (usize, usize, Box<dyn RxHalf>);

/// The way sent and dropped buffers go back from the transmit workers to the receive
/// workers' pools: one multi-producer, multi-consumer ring holding as many buffers as every
/// pool together, so a push always finds room (the buffers in the ring are a subset of all
/// buffers) and no buffer is lost; a push that finds it full would be a sizing bug, counted in
/// `lost` ([`MtRouter::returns_lost`]) rather than waited on.
///
/// decided: one shared ring rather than M x N single-producer rings: any receive worker may
/// take any buffer (every pool has the same buffer size), so one bound covers all, and the
/// cost is one compare-and-swap per buffer, as on the egress rings.
struct ReturnRing {
    ring: ArrayQueue<PacketBuf>,
    lost: AtomicU64,
}

impl ReturnRing {
    #[inline]
    fn give(&self, buf: PacketBuf) {
        if self.ring.push(buf).is_err() {
            // Relaxed: a counter, read after the joins.
            self.lost.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// A transmit worker's link to a port: the port's transmit half, and the return ring to the
/// receive workers' pools.
struct RingLink<'a> {
    port: &'a mut dyn TxHalf,
    /// Takes the sent buffers back (up to all the workers' buffers) for the return ring.
    sent: &'a mut BufPool,
    returns: &'a ReturnRing,
}

impl Link for RingLink<'_> {
    fn send(&mut self, now: Nanos, batch: &mut Batch) -> Result<(), PortError> {
        let result = self.port.send(now, batch, self.sent);
        while let Some(b) = self.sent.alloc() {
            self.returns.give(b);
        }
        result.map(|_| ())
    }
    fn recycle(&mut self, buf: PacketBuf) {
        self.returns.give(buf);
    }
}

/// One transmit worker's share of the egress side: the egress stages of the ports it serves
/// (port `j` is worker `j mod M`'s) and its counters. A helper worker (`k >= 1`) hands its
/// shard to the coordinator (worker 0, the calling thread) when asked, and waits for it back:
/// the one moment another thread touches a port's egress (module doc).
struct TxShard {
    /// The ports it serves, ascending.
    ports: Vec<usize>,
    /// Their egress stages, in the order of `ports` (empty while handed over).
    egress: Vec<Egress>,
    /// Their transmit halves, in the order of `ports`.
    tx: Vec<Box<dyn TxHalf>>,
    /// The worker's counters.
    fates: Fates,
}

impl TxShard {
    /// Nothing waits in the shard's rings or class queues.
    fn is_empty(&self, sh: &Shared<'_>) -> bool {
        self.ports.iter().all(|&p| sh.rings[p].is_empty())
            && self.egress.iter().all(|e| e.qos.is_empty())
    }
}

/// What a transmit worker keeps to itself from round to round (never handed over).
struct TxWorker {
    admit: AdmitStage,
    rounds: u64,
    /// Takes the sent buffers back from a port (up to all the pools' buffers), for the
    /// return ring.
    sent: BufPool,
    budget: usize,
}

impl TxWorker {
    fn new(k: usize, params: &MtParams, total_bufs: usize) -> TxWorker {
        // Worker 0 keeps the stream of the one transmit worker there was before.
        let stream = if k == 0 {
            ADMIT_STREAM
        } else {
            2000 + k as u64
        };
        TxWorker {
            admit: AdmitStage {
                rng: Xoshiro256PlusPlus::seed_from_u64(stream_seed(params.seed, stream)),
                burst: Batch::new(),
                lanes: Box::default(),
            },
            rounds: 0,
            sent: BufPool::empty(total_bufs, DEFAULT_BUF_SIZE),
            budget: params.work_budget,
        }
    }

    /// One round over `shard`'s ports (the transmit half of the single-thread loop's poll):
    /// each port's ring admitted in bursts, each burst followed by its transmit, as the
    /// single-thread loop transmits after each receive burst (a queue whose link keeps up then
    /// never holds more than the cut-through leaves: see `Egress::admit`), then the port's
    /// tick. Returns the packets taken from the rings.
    fn round(
        &mut self,
        shard: &mut TxShard,
        sh: &Shared<'_>,
        now: Nanos,
    ) -> Result<usize, PortError> {
        self.rounds = self.rounds.wrapping_add(1);
        let TxShard {
            ports,
            egress,
            tx,
            fates,
        } = shard;
        let mut moved = 0usize;
        for ((&p, egress), port) in ports.iter().zip(egress.iter_mut()).zip(tx.iter_mut()) {
            let mut link = RingLink {
                port: port.as_mut(),
                sent: &mut self.sent,
                returns: sh.returns,
            };
            let mut left = self.budget;
            loop {
                let chunk = left.min(BATCH_CAPACITY);
                let ring = &sh.rings[p];
                let n = (self.admit).take_ring(egress, fates, now, ring, sh.returns, chunk);
                moved += n;
                left -= n;
                egress.transmit(now, &mut link, fates)?;
                if n < chunk || left == 0 {
                    break;
                }
            }
            port.tick(now)?;
            egress.tick(now, self.rounds);
        }
        Ok(moved)
    }
}

/// The coordinator's end of the handover channels to one transmit helper.
struct HelperLink {
    /// The helper's shard, handed over.
    taken: mpsc::Receiver<TxShard>,
    /// The shard, given back (and the helper's first one).
    back: mpsc::SyncSender<TxShard>,
}

/// A transmit helper's end of the handover channels.
struct HandoverEnd {
    give: mpsc::SyncSender<TxShard>,
    back: mpsc::Receiver<TxShard>,
}

impl MtRouter {
    /// Assembles a threaded router from built parts (see `crate::build::build_threaded` for
    /// the config path). `groups` are the generator flow groups (their counters are reset).
    /// Forwarding that names a port index `slots` does not have (a route's port, a bridge
    /// peer) is refused, as [`crate::Dataplane::new`] refuses it.
    pub fn new(
        slots: Vec<PortSlot>,
        forwarder: Forwarder,
        groups: Vec<GroupStats>,
        params: MtParams,
    ) -> Result<Self, UnknownPort> {
        UnknownPort::check(forwarder.forwarding(), slots.len())?;
        let names = slots.iter().map(|s| s.port.name().to_owned()).collect();
        let counters = slots.iter().map(|s| s.port.counters()).collect();
        let fates = Fates::new(groups).zeroed();
        let (ports, egress) = slots.into_iter().map(|s| (s.port, s.egress)).unzip();
        Ok(MtRouter {
            names,
            counters,
            ports,
            egress,
            forwarder,
            params,
            tx_fates: fates.zeroed(),
            fates,
            worker_totals: Vec::new(),
            rx: Vec::new(),
            now: Nanos::ZERO,
            capture: None,
            reload: None,
            returns_lost: 0,
            unres_qlen: DEFAULT_UNRES_QLEN,
        })
    }

    /// Kernel routing (`[routing] source = "kernel"`): follows the kernel's tables from now
    /// on (`Forwarder::follow_kernel`); every receive worker routes by them and holds the
    /// packets of unresolved next hops in its own wait of `unres_qlen` per next hop, as the
    /// single-thread loop does (`crate::neighbour`).
    pub fn follow_kernel(
        &mut self,
        ports: Vec<(u32, u16)>,
        unres_qlen: usize,
    ) -> std::io::Result<()> {
        self.forwarder.follow_kernel(ports)?;
        self.unres_qlen = unres_qlen;
        Ok(())
    }

    /// Captures drops through `tap` (every worker's counters carry a copy), written by
    /// `writer`'s thread.
    pub fn set_capture(&mut self, tap: CaptureTap, writer: CaptureWriter) {
        self.fates.capture = Some(tap.clone());
        self.tx_fates.capture = Some(tap);
        self.capture = Some(writer);
    }

    /// The drop capture's counters, when capturing.
    pub fn capture_stats(&self) -> Option<CaptureStats> {
        self.capture.as_ref().map(CaptureWriter::stats)
    }

    /// Where live reloads reach this router (`crate::reload::Reloader`): made on the first
    /// call, looked at once per transmit round from then on.
    pub fn reload_slot(&mut self) -> Arc<ReloadSlot> {
        self.reload.get_or_insert_with(ReloadSlot::new).clone()
    }

    /// Each port's Zombie List as the egress stages hold them now.
    pub fn zombie_lists(&self) -> Vec<Option<Arc<ZombieList>>> {
        self.egress.iter().map(|e| e.zombie.clone()).collect()
    }

    /// Each port's list with what it observes a packet by, for the receive workers.
    fn rx_zombies(&self) -> Vec<Option<(Arc<ZombieList>, zl_aqm::IsolateBy)>> {
        (self.egress.iter())
            .map(|e| e.zombie.clone().map(|z| (z, e.observe_by)))
            .collect()
    }

    /// Where the next [`MtRouter::run`] puts its workers.
    pub fn place_workers(&mut self, cpus: WorkerCpus) {
        self.params.cpus = cpus;
    }

    pub fn params(&self) -> &MtParams {
        &self.params
    }
    /// Sent or dropped buffers that found the return ring full, over every run: 0 unless the
    /// ring's sizing is wrong (the buffers are then freed, not pooled).
    pub fn returns_lost(&self) -> u64 {
        self.returns_lost
    }
    /// Each receive worker's counters (after a run: final).
    pub fn worker_totals(&self) -> &[FateCounters] {
        &self.worker_totals
    }
    /// The routing table (router mode), shared with the receive workers: routes inserted or
    /// removed through it from another thread apply to their next lookup (see `crate::route`).
    pub fn routes(&self) -> Option<crate::route::RouteTable> {
        self.forwarder.routes().cloned()
    }
    /// The time of the last progress report or of the run's end.
    pub fn now(&self) -> Nanos {
        self.now
    }
    /// The Zombie List of each port, when it has one.
    pub fn zombie(&self, port: usize) -> Option<&ZombieList> {
        self.egress.get(port)?.zombie.as_deref()
    }
    /// True when a port must be driven by a real clock.
    pub fn has_live_ports(&self) -> bool {
        self.ports.iter().any(|p| p.readiness() == Readiness::Live)
    }

    /// Runs the receive workers and the transmit workers (worker 0 is this thread) on `clock`
    /// (shared by every thread; monotonic) until every receive port is exhausted and
    /// everything queued is sent, or `drain` of `clock` time has passed since the ports ran
    /// out, or `stop` is set, or a port fails. `observer` gets the router every `period`.
    /// What is still queued at the end is counted as `shutdown`.
    pub fn run<C>(
        &mut self,
        clock: &C,
        stop: &AtomicBool,
        drain: Nanos,
        period: Nanos,
        observer: &mut dyn Observer<MtRouter>,
    ) -> Result<StopReason, PortError>
    where
        C: Fn() -> Nanos + Sync,
    {
        let n_ports = self.ports.len();
        // Every port in halves: its receive halves dealt to the receive workers (half `s` of
        // all of them to worker `s mod N`), its transmit half to its transmit worker.
        let mut sources: Vec<Source> = Vec::new();
        let mut txs: Vec<Option<Box<dyn TxHalf>>> = Vec::with_capacity(n_ports);
        for (p, port) in std::mem::take(&mut self.ports).into_iter().enumerate() {
            let Halves { rx, tx } = port.split();
            let first = sources.len();
            sources.extend((rx.into_iter().enumerate()).map(|(i, h)| (first + i, p, h)));
            txs.push(Some(tx));
        }
        let workers = self.params.rx_workers.clamp(1, sources.len().max(1));
        let tx_workers = self.params.tx_workers.clamp(1, n_ports.max(1));
        let mut dealt: Vec<Vec<Source>> = (0..workers).map(|_| Vec::new()).collect();
        for source in sources {
            dealt[source.0 % workers].push(source);
        }
        // Each worker's halves: taken by its thread when it starts and put back when it ends
        // (also from a panic), so they are here to join again after the run, started or not.
        let slots: Vec<Mutex<Option<Vec<Source>>>> =
            dealt.into_iter().map(|d| Mutex::new(Some(d))).collect();
        let rings: Vec<ArrayQueue<Item>> = (0..n_ports)
            .map(|_| ArrayQueue::new(self.params.ring_capacity.max(1)))
            .collect();
        let total_bufs = self.params.pool_per_worker * workers;
        let returns = ReturnRing {
            ring: ArrayQueue::new(total_bufs.max(1)),
            lost: AtomicU64::new(0),
        };
        let quit = AtomicBool::new(false);
        let tx_quit = AtomicBool::new(false);
        let failed = AtomicBool::new(false);
        let running = AtomicUsize::new(workers);
        let handover = AtomicU64::new(0);
        let drained: Vec<AtomicBool> = (0..tx_workers).map(|_| AtomicBool::new(false)).collect();
        // Each worker goes on from its counts of a previous run, if any.
        let starts: Vec<Fates> = (0..workers)
            .map(|w| {
                self.rx
                    .get(w)
                    .cloned()
                    .unwrap_or_else(|| self.fates.zeroed())
            })
            .collect();
        let progress: Vec<Mutex<Published>> = (starts.iter().cloned())
            .map(|fates| {
                Mutex::new(Published {
                    fates,
                    ports: Vec::new(),
                })
            })
            .collect();
        let leads: Vec<Lead> = starts.iter().map(|f| Lead::new(&f.totals)).collect();
        // The workers' own handles (Arc clones; the forwarding tables are small), so the
        // transmit worker keeps `&mut self`.
        let rx_state = Mutex::new(RxState {
            forwarder: self.forwarder.clone(),
            zombies: self.rx_zombies(),
        });
        let rx_generation = AtomicU64::new(0);
        // The egress side dealt to the transmit workers: port j to worker j mod M. Worker 0
        // goes on from the transmit counters of a previous run, the others from zero.
        let mut shards: Vec<TxShard> = (0..tx_workers)
            .map(|k| {
                let ports: Vec<usize> = (k..n_ports).step_by(tx_workers).collect();
                let tx = (ports.iter())
                    .map(|&p| txs[p].take().expect("each port is in one shard"))
                    .collect();
                TxShard {
                    ports,
                    egress: Vec::new(),
                    tx,
                    fates: self.tx_fates.zeroed(),
                }
            })
            .collect();
        shards[0].fates = self.tx_fates.clone();
        for (p, e) in std::mem::take(&mut self.egress).into_iter().enumerate() {
            shards[p % tx_workers].egress.push(e);
        }
        let mut own = shards.remove(0);
        let mut coordinator = TxWorker::new(0, &self.params, total_bufs);
        let shared = Shared {
            rings: &rings,
            returns: &returns,
            rx_state: &rx_state,
            rx_generation: &rx_generation,
            quit: &quit,
            failed: &failed,
            running: &running,
            tx_quit: &tx_quit,
            handover: &handover,
            drained: &drained,
            progress: &progress,
            leads: &leads,
            unres_qlen: matches!(self.forwarder.forwarding(), Forwarding::Kernel(_))
                .then_some(self.unres_qlen),
        };
        let params = self.params.clone();
        // This thread is transmit worker 0 for the run, then goes back where it was.
        let caller_cpus = match params.cpus {
            WorkerCpus::Inherit => None,
            _ => crate::cpus::allowed_cpus().ok(),
        };
        params.cpus.place(workers, "transmit worker 0");
        let (results, helper_shards, tx_outcome) = std::thread::scope(|s| {
            let mut handles = Vec::with_capacity(workers);
            for ((w, start), slot) in starts.into_iter().enumerate().zip(&slots) {
                let (shared, params) = (&shared, &params);
                let kept = start.clone();
                let spawned = std::thread::Builder::new()
                    .name(format!("zlrouter-rx{w}"))
                    .spawn_scoped(s, move || {
                        params.cpus.place(w, &format!("receive worker {w}"));
                        let mut mine = take_slot(slot);
                        let run = std::panic::catch_unwind(AssertUnwindSafe(|| {
                            rx_worker(w, &mut mine, shared, params, start, clock, stop, period)
                        }));
                        if run.is_err() {
                            tracing::error!("zlrouter: receive worker {w} panicked");
                            shared.failed.store(true, Ordering::Relaxed);
                            // Release: as the worker's own end (`rx_worker`).
                            shared.running.fetch_sub(1, Ordering::Release);
                        }
                        *slot.lock().unwrap_or_else(PoisonError::into_inner) = Some(mine);
                        run.ok()
                    });
                match spawned {
                    Ok(h) => handles.push((h, kept)),
                    Err(e) => {
                        // A worker that cannot start counts as a failed run; the halves it
                        // would have served received nothing.
                        running.fetch_sub(1, Ordering::AcqRel);
                        failed.store(true, Ordering::Relaxed);
                        tracing::error!("zlrouter: cannot start receive worker {w}: {e}");
                    }
                }
            }
            let mut helpers = Vec::with_capacity(tx_workers - 1);
            let mut links = Vec::with_capacity(tx_workers - 1);
            for (i, shard) in shards.into_iter().enumerate() {
                let k = i + 1;
                let (give, taken) = mpsc::sync_channel(1);
                let (back, back_rx) = mpsc::sync_channel(1);
                let end = HandoverEnd {
                    give,
                    back: back_rx,
                };
                let worker = TxWorker::new(k, &params, total_bufs);
                let (shared, cpus) = (&shared, &params.cpus);
                let spawned = std::thread::Builder::new()
                    .name(format!("zlrouter-tx{k}"))
                    .spawn_scoped(s, move || {
                        cpus.place(workers + k, &format!("transmit worker {k}"));
                        tx_helper(k, worker, end, shared, clock, stop)
                    });
                match spawned {
                    Ok(h) => {
                        // The helper's first shard: the channel holds one, so this never waits.
                        let _ = back.send(shard);
                        helpers.push(h);
                        links.push(HelperLink { taken, back });
                    }
                    Err(e) => {
                        // Its ports stay with the coordinator, so no egress is lost; the run
                        // counts as failed, as for a receive worker.
                        own.ports.extend(shard.ports);
                        own.egress.extend(shard.egress);
                        own.fates.add(&shard.fates);
                        failed.store(true, Ordering::Relaxed);
                        tracing::error!("zlrouter: cannot start transmit worker {k}: {e}");
                    }
                }
            }
            let tx = self.tx_loop(
                &shared,
                &mut own,
                &mut coordinator,
                &links,
                clock,
                stop,
                drain,
                period,
                observer,
            );
            // Every worker stops before the leftovers are counted.
            quit.store(true, Ordering::Relaxed);
            tx_quit.store(true, Ordering::Relaxed);
            // A receive worker that panicked keeps the counts it started with.
            let results: Vec<(Fates, Option<PortError>)> = handles
                .into_iter()
                .map(|(h, kept)| h.join().ok().flatten().unwrap_or((kept, None)))
                .collect();
            // A transmit helper holds egress state nobody else has: its panic is the run's.
            let helper_shards: Vec<(Option<TxShard>, Option<PortError>)> = helpers
                .into_iter()
                .map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
                .collect();
            (results, helper_shards, tx)
        });
        if let Some(cpus) = caller_cpus {
            WorkerCpus::Any(cpus).place(0, "the calling thread");
        }
        let (reason, mut error) = tx_outcome;
        let mut others = Vec::with_capacity(helper_shards.len());
        for (shard, e) in helper_shards {
            // `None` only from a helper whose coordinator unwound mid-handover, and this is
            // the coordinator, past every handover.
            others.push(shard.expect("every handed-over shard was given back"));
            if let Some(e) = e {
                error.get_or_insert(e);
            }
        }
        self.collect_egress(n_ports, &mut own, &mut others);
        let mut txs = collect_tx(n_ports, &mut own, &mut others);
        // Everything left is counted `shutdown`: the rings, then the egress stages.
        for ring in &rings {
            while let Some(item) = ring.pop() {
                match item.icmp {
                    // An error not sent is no received packet: counted as not sent.
                    Some(_) => self.tx_fates.icmp.no_room += 1,
                    None => self.tx_fates.dropped(&item.buf, DropCause::Shutdown),
                }
            }
        }
        for (egress, tx) in self.egress.iter_mut().zip(&mut txs) {
            let mut link = RingLink {
                port: tx.as_mut(),
                sent: &mut coordinator.sent,
                returns: &returns,
            };
            if let Err(e) = egress.shutdown(self.now, &mut link, &mut self.tx_fates) {
                error.get_or_insert(e);
            }
        }
        self.returns_lost += returns.lost.load(Ordering::Relaxed);
        // Every port joined again from its halves, its receive halves in their first order.
        let mut halves: Vec<Source> = slots.into_iter().flat_map(take_owned_slot).collect();
        halves.sort_unstable_by_key(|h| h.0);
        let mut rx_of: Vec<Vec<Box<dyn RxHalf>>> = (0..n_ports).map(|_| Vec::new()).collect();
        for (_, p, h) in halves {
            rx_of[p].push(h);
        }
        self.ports = (rx_of.into_iter().zip(txs))
            .map(|(rx, tx)| Box::new(Joined::new(Halves { rx, tx })) as BoxedPort)
            .collect();
        if let Err(e) = flush_all(&mut self.ports) {
            error.get_or_insert(e);
        }
        self.worker_totals = results.iter().map(|(c, _)| c.totals).collect();
        self.fates = self.tx_fates.clone();
        self.rx.clear();
        for (c, e) in results {
            self.fates.add(&c);
            self.rx.push(c);
            if let Some(e) = e {
                error.get_or_insert(e);
            }
        }
        self.counters = self.ports.iter().map(|p| p.counters()).collect();
        if let Some(c) = &mut self.capture {
            c.close();
        }
        observer.progress(self.now, self);
        match error {
            Some(e) => Err(e),
            None => Ok(reason),
        }
    }

    /// Puts every shard's egress stages back in `self.egress` (by port) and their counters,
    /// summed, in `self.tx_fates`; the shards keep their ports, for [`MtRouter::deal_egress`].
    fn collect_egress(&mut self, n_ports: usize, own: &mut TxShard, others: &mut [TxShard]) {
        let mut slots: Vec<Option<Egress>> = (0..n_ports).map(|_| None).collect();
        let mut fates = own.fates.clone();
        for shard in std::iter::once(&mut *own).chain(others.iter_mut()) {
            for (&p, e) in shard.ports.iter().zip(shard.egress.drain(..)) {
                slots[p] = Some(e);
            }
        }
        for shard in others.iter() {
            fates.add(&shard.fates);
        }
        self.tx_fates = fates;
        self.egress = slots
            .into_iter()
            .map(|e| e.expect("the shards' ports are every port, each once"))
            .collect();
    }

    /// Deals `self.egress` back to the shards, each its ports' stages.
    fn deal_egress(&mut self, own: &mut TxShard, others: &mut [TxShard]) {
        let mut slots: Vec<Option<Egress>> = self.egress.drain(..).map(Some).collect();
        for shard in std::iter::once(own).chain(others.iter_mut()) {
            shard.egress = (shard.ports.iter())
                .map(|&p| slots[p].take().expect("each port is in one shard"))
                .collect();
        }
    }

    /// Takes every helper's shard (each hands it over at its next round and waits), so that
    /// `self` holds every port's egress stage at one moment: a live update then applies to
    /// every port or none, and a progress report sees every port as of the same round. `None`
    /// when a helper has ended (a failed port, a stop, a panic): the shards taken are given
    /// back and the run must end.
    fn take_shards(&mut self, sh: &Shared<'_>, links: &[HelperLink]) -> Option<Vec<TxShard>> {
        // Relaxed: the request carries no data; the shards travel through the channels.
        sh.handover.fetch_add(1, Ordering::Relaxed);
        let taken: Vec<Option<TxShard>> = links.iter().map(|l| l.taken.recv().ok()).collect();
        if taken.iter().all(Option::is_some) {
            return Some(taken.into_iter().flatten().collect());
        }
        for (l, shard) in links.iter().zip(taken) {
            if let Some(shard) = shard {
                let _ = l.back.send(shard);
            }
        }
        None
    }

    /// Transmit worker 0 and the coordinator: its shard's rings -> egress stages -> ports,
    /// plus the live reloads, the progress reports and the end of the run, until it ends.
    #[allow(clippy::too_many_arguments)]
    fn tx_loop<C>(
        &mut self,
        sh: &Shared<'_>,
        own: &mut TxShard,
        worker: &mut TxWorker,
        links: &[HelperLink],
        clock: &C,
        stop: &AtomicBool,
        drain: Nanos,
        period: Nanos,
        observer: &mut dyn Observer<MtRouter>,
    ) -> (StopReason, Option<PortError>)
    where
        C: Fn() -> Nanos + Sync,
    {
        let n_ports = sh.rings.len();
        let mut next_report = clock() + period;
        let mut sources_done_at: Option<Nanos> = None;
        let mut idle = 0u32;
        loop {
            let now = clock().max(self.now);
            self.now = now;
            own.fates.set_clock(now);
            let update = self.reload.as_ref().and_then(|r| r.take());
            if update.is_some() || now >= next_report {
                let Some(mut others) = self.take_shards(sh, links) else {
                    if let Some((_, answer)) = update {
                        let _ = answer.send(Err("the router is stopping".into()));
                    }
                    // Relaxed: the flag carries no data.
                    let reason = if stop.load(Ordering::Relaxed) {
                        StopReason::Interrupted
                    } else {
                        StopReason::Finished
                    };
                    return (reason, None);
                };
                self.collect_egress(n_ports, own, &mut others);
                if let Some((update, answer)) = update {
                    let applied = self.apply_live(sh, update);
                    // The reloader may have given up waiting: then nobody hears the answer.
                    let _ = answer.send(applied);
                }
                if now >= next_report {
                    self.report_progress(sh, now, observer, own, &others);
                    next_report = now + period;
                }
                self.deal_egress(own, &mut others);
                for (l, shard) in links.iter().zip(others) {
                    // The helper waits for it: the channel holds one, so this never waits.
                    let _ = l.back.send(shard);
                }
            }
            let moved = match worker.round(own, sh, now) {
                Ok(n) => n,
                Err(e) => {
                    sh.failed.store(true, Ordering::Relaxed);
                    return (StopReason::Finished, Some(e));
                }
            };
            // Relaxed: the flags carry no data; the counters come through the joins.
            if stop.load(Ordering::Relaxed) {
                return (StopReason::Interrupted, None);
            }
            if sh.failed.load(Ordering::Relaxed) {
                return (StopReason::Finished, None);
            }
            // Acquire: pairs with each worker's release, so its last ring pushes are visible.
            if sh.running.load(Ordering::Acquire) == 0 {
                let done_at = *sources_done_at.get_or_insert(now);
                // Relaxed: a helper sets its flag after its own acquire of `running` and its
                // look at its rings and queues; nothing else is read through it.
                let empty =
                    own.is_empty(sh) && sh.drained[1..].iter().all(|d| d.load(Ordering::Relaxed));
                if empty {
                    return (StopReason::Finished, None);
                }
                if now > done_at + drain {
                    return (StopReason::DrainTimeout, None);
                }
            }
            idle = if moved == 0 { idle + 1 } else { 0 };
            pause(idle);
        }
    }

    /// Installs a live update between two rounds, every transmit worker's shard in hand
    /// (`take_shards`): every port's egress stage or none, then the receive workers'
    /// forwarding state (the priority map, the lists they observe), which each worker takes at
    /// its next round.
    fn apply_live(&mut self, sh: &Shared<'_>, u: LiveUpdate) -> Applied {
        apply_egress(&mut self.egress, u.egress, |e| e)?;
        if let Some(p) = u.priority {
            self.forwarder.set_priority(p);
        }
        let mut state = sh.rx_state.lock().unwrap_or_else(PoisonError::into_inner);
        *state = RxState {
            forwarder: self.forwarder.clone(),
            zombies: self.rx_zombies(),
        };
        // Release: the new state is in place before a worker sees the generation move.
        sh.rx_generation.fetch_add(1, Ordering::Release);
        Ok(())
    }

    /// Gathers the workers' counters and the ports' into this router and shows it.
    fn report_progress(
        &mut self,
        sh: &Shared<'_>,
        now: Nanos,
        observer: &mut dyn Observer<MtRouter>,
        own: &TxShard,
        others: &[TxShard],
    ) {
        // Order matters (the module doc): the transmit workers' counters and queues (as they
        // stand: every shard is in hand), then each receive worker's published counters, then
        // its lead, so `received` covers every fate counted before it.
        let mut fates = self.tx_fates.clone();
        let mut workers = Vec::with_capacity(sh.progress.len());
        let mut rx = vec![PortCounters::default(); self.counters.len()];
        for m in sh.progress {
            let c = m.lock().unwrap_or_else(PoisonError::into_inner);
            fates.add(&c.fates);
            workers.push(c.fates.totals);
            for (p, counters) in &c.ports {
                rx[*p].add_rx(counters);
            }
        }
        for (c, lead) in workers.iter_mut().zip(sh.leads) {
            lead.read_into(c);
        }
        fates.totals.received =
            self.tx_fates.totals.received + workers.iter().map(|c| c.received).sum::<u64>();
        fates.totals.received_bytes = self.tx_fates.totals.received_bytes
            + workers.iter().map(|c| c.received_bytes).sum::<u64>();
        self.fates = fates;
        self.worker_totals = workers;
        for shard in std::iter::once(own).chain(others) {
            for (&p, tx) in shard.ports.iter().zip(&shard.tx) {
                self.counters[p] = PortCounters::joined(&rx[p], &tx.counters());
            }
        }
        observer.progress(now, self);
    }
}

/// A transmit worker's admit stage: the packets it takes from a ring, admitted a run at a
/// time through `Egress::admit_run` as the single-thread loop's admit stage does, on its
/// admission stream.
struct AdmitStage {
    rng: Xoshiro256PlusPlus,
    /// The run taken from the ring, with what the receive worker learned of each packet in
    /// its lane.
    burst: Batch,
    lanes: Box<Lanes>,
}

impl AdmitStage {
    /// Admits up to `budget` (at most a burst) packets from `ring` through `egress`, in the
    /// ring's order; dropped buffers go back through `returns`. An ICMP error the receive
    /// worker wrote goes to `Egress::originate` after the packets before it are admitted; a
    /// packet whose observation does not match whether `egress` has a list (one observed
    /// before a reload and admitted after it) is admitted alone on what it carries.
    fn take_ring(
        &mut self,
        egress: &mut Egress,
        fates: &mut Fates,
        now: Nanos,
        ring: &ArrayQueue<Item>,
        returns: &ReturnRing,
        budget: usize,
    ) -> usize {
        let budget = budget.min(BATCH_CAPACITY);
        let mut n = 0;
        while n < budget {
            let Some(item) = ring.pop() else { break };
            n += 1;
            let Item {
                mut buf,
                meta,
                mut headers,
                obs,
                icmp,
            } = item;
            if icmp.is_some() || obs.is_some() != egress.zombie.is_some() {
                self.admit_run(egress, fates, now, returns);
                let left = match icmp {
                    Some(kind) => egress.originate(buf, kind, fates),
                    None => {
                        let (h, o) = (headers.as_mut(), obs.as_ref());
                        egress.admit(now, &mut self.rng, &mut buf, meta, h, o, fates)
                    }
                };
                if let Some(b) = left {
                    returns.give(b);
                }
                continue;
            }
            let i = self.burst.len();
            self.lanes.kept[i] = (meta, headers);
            if let Some(o) = obs {
                self.lanes.obs[i] = o;
            }
            self.burst.push_within_room(buf);
        }
        self.admit_run(egress, fates, now, returns);
        n
    }

    /// The packets taken so far, admitted; the burst is left empty.
    fn admit_run(&mut self, egress: &mut Egress, fates: &mut Fates, now: Nanos, r: &ReturnRing) {
        let n = self.burst.len();
        let (kept, obs) = (&mut self.lanes.kept[..n], &self.lanes.obs[..n]);
        let bufs = self.burst.as_mut_slice();
        egress.admit_run(now, &mut self.rng, bufs, kept, obs, fates, |b| r.give(b));
        self.burst.clear();
    }
}
/// Rounds without work before a polling thread offers its core to others each round.
const IDLE_ROUNDS_BEFORE_YIELD: u32 = 64;

/// What a polling thread does after `idle` rounds in a row without work: spin a little, then
/// yield the core (a machine with fewer cores than threads still makes progress).
#[inline]
fn pause(idle: u32) {
    match idle {
        0 => {}
        n if n < IDLE_ROUNDS_BEFORE_YIELD => std::hint::spin_loop(),
        _ => std::thread::yield_now(),
    }
}

/// Copies a receive worker's counters and its receive halves' into its published report.
fn publish(to: &mut Published, counts: &Fates, mine: &[Source]) {
    to.fates.clone_from(counts);
    to.ports.clear();
    (to.ports).extend(mine.iter().map(|(_, p, h)| (*p, h.counters())));
}

/// A receive worker's halves, taken from its slot when its thread starts.
fn take_slot(slot: &Mutex<Option<Vec<Source>>>) -> Vec<Source> {
    let mut slot = slot.lock().unwrap_or_else(PoisonError::into_inner);
    slot.take().unwrap_or_default()
}

/// The halves left in a slot after the run (its worker's, put back, or never taken).
fn take_owned_slot(slot: Mutex<Option<Vec<Source>>>) -> Vec<Source> {
    let slot = slot.into_inner().unwrap_or_else(PoisonError::into_inner);
    slot.unwrap_or_default()
}

/// Every shard's transmit halves, by port (the shards keep their ports).
fn collect_tx(n_ports: usize, own: &mut TxShard, others: &mut [TxShard]) -> Vec<Box<dyn TxHalf>> {
    let mut slots: Vec<Option<Box<dyn TxHalf>>> = (0..n_ports).map(|_| None).collect();
    for shard in std::iter::once(own).chain(others.iter_mut()) {
        for (&p, tx) in shard.ports.iter().zip(shard.tx.drain(..)) {
            slots[p] = Some(tx);
        }
    }
    slots
        .into_iter()
        .map(|t| t.expect("the shards' ports are every port, each once"))
        .collect()
}

/// Transmit worker `k >= 1`: its shard's rings -> egress stages -> ports, until the
/// coordinator ends the run (or a stop, or a failure); hands its shard to the coordinator when
/// asked and waits for it back (see `MtRouter::take_shards`). Returns its shard (`None` only
/// when the coordinator is gone mid-handover, i.e. unwinding) and its port's error.
fn tx_helper<C>(
    k: usize,
    mut worker: TxWorker,
    end: HandoverEnd,
    sh: &Shared<'_>,
    clock: &C,
    stop: &AtomicBool,
) -> (Option<TxShard>, Option<PortError>)
where
    C: Fn() -> Nanos + Sync,
{
    let Ok(mut shard) = end.back.recv() else {
        return (None, None);
    };
    // The handover requests answered: the coordinator moves `handover` once per request and
    // waits for every helper before it moves it again, so comparing with the last one seen
    // answers each exactly once (0: none yet, as `handover` starts).
    let mut seen = 0u64;
    let mut last = Nanos::ZERO;
    let mut idle = 0u32;
    let mut drained = false;
    // Relaxed: the flags carry no data.
    while !sh.tx_quit.load(Ordering::Relaxed)
        && !stop.load(Ordering::Relaxed)
        && !sh.failed.load(Ordering::Relaxed)
    {
        // Relaxed: the request carries no data; the shard travels through the channels,
        // which order everything done to it before and after.
        let request = sh.handover.load(Ordering::Relaxed);
        if request != seen {
            seen = request;
            if let Err(mpsc::SendError(s)) = end.give.send(shard) {
                shard = s;
                break;
            }
            match end.back.recv() {
                Ok(s) => shard = s,
                Err(_) => return (None, None),
            }
        }
        let now = clock().max(last);
        last = now;
        shard.fates.set_clock(now);
        let moved = match worker.round(&mut shard, sh, now) {
            Ok(n) => n,
            Err(e) => {
                sh.failed.store(true, Ordering::Relaxed);
                return (Some(shard), Some(e));
            }
        };
        // Acquire: pairs with each receive worker's release, so its last ring pushes are
        // visible before the rings are looked at.
        if !drained && sh.running.load(Ordering::Acquire) == 0 && shard.is_empty(sh) {
            drained = true;
            // Relaxed: see the coordinator's load.
            sh.drained[k].store(true, Ordering::Relaxed);
        }
        idle = if moved == 0 { idle + 1 } else { 0 };
        pause(idle);
    }
    (Some(shard), None)
}

/// A receive worker's intake of one receive half ([`receive_port`], as the single loop's):
/// each burst counted and its count published ([`Lead`]) before any of it moves on, then
/// the burst through [`forward_burst`].
struct HalfIntake<'a, 's> {
    half: &'a mut dyn RxHalf,
    pool: &'a mut BufPool,
    rng: &'a mut Xoshiro256PlusPlus,
    icmp: &'a mut IcmpSender,
    counts: &'a mut Fates,
    neighbour: Option<&'a mut NeighbourStage>,
    ctx: (&'a Shared<'s>, &'a RxState),
    lead: &'a Lead,
    lanes: &'a mut Lanes,
}

impl Intake for HalfIntake<'_, '_> {
    #[inline(always)]
    fn recv(&mut self, now: Nanos, batch: &mut Batch) -> Result<(), PortError> {
        self.half.recv(now, self.pool, batch).map(|_| ())
    }
    #[inline(always)]
    fn arrived(&mut self, batch: &Batch) {
        self.counts.received_burst(batch);
        self.lead.publish(&self.counts.totals);
    }
    #[inline(always)]
    fn forward(&mut self, now: Nanos, batch: &mut Batch) {
        forward_burst(
            batch,
            now,
            self.ctx,
            self.lanes,
            self.pool,
            self.rng,
            self.icmp,
            self.counts,
            self.neighbour.as_deref_mut(),
        );
    }
}

/// One receive worker: its ports' bursts -> forward -> observe -> egress ring.
#[allow(clippy::too_many_arguments)]
fn rx_worker<C>(
    w: usize,
    mine: &mut [Source],
    sh: &Shared<'_>,
    params: &MtParams,
    mut counts: Fates,
    clock: &C,
    stop: &AtomicBool,
    period: Nanos,
) -> (Fates, Option<PortError>)
where
    C: Fn() -> Nanos + Sync,
{
    let mut pool = BufPool::new(params.pool_per_worker, DEFAULT_BUF_SIZE);
    let mut batch = Batch::new();
    let mut lanes = Box::<Lanes>::default();
    let mut rng =
        Xoshiro256PlusPlus::seed_from_u64(stream_seed(params.seed, OBSERVE_STREAM + w as u64));
    let mut exhausted = vec![false; mine.len()];
    // This worker's copy of the forwarding state, and the reload generation it is of.
    let mut generation = sh.rx_generation.load(Ordering::Acquire);
    let mut state = sh
        .rx_state
        .lock() // lock-ok: once, before the loop
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    // Each worker limits its errors to its share of the global rate (`crate::icmp`).
    let mut icmp = IcmpSender::new(state.forwarder.icmp_params(), sh.progress.len() as u32);
    let mut error = None;
    let mut next_report = Nanos::ZERO;
    let mut idle = 0u32;
    // Kernel routing: this worker's packets waiting for a next hop's MAC.
    let mut neighbour = sh.unres_qlen.map(NeighbourStage::new);
    let (mut released, mut expired) = (Vec::new(), Vec::new());
    // Relaxed: the flags carry no data.
    'run: while !sh.quit.load(Ordering::Relaxed)
        && !stop.load(Ordering::Relaxed)
        && !sh.failed.load(Ordering::Relaxed)
    {
        // Acquire: pairs with the coordinator's release after it replaced the state.
        let now_generation = sh.rx_generation.load(Ordering::Acquire);
        if now_generation != generation {
            generation = now_generation;
            // lock-ok: once per live reload
            state.clone_from(&sh.rx_state.lock().unwrap_or_else(PoisonError::into_inner));
        }
        while pool.available() < pool.total() {
            match sh.returns.ring.pop() {
                Some(b) => pool.free(b),
                None => break,
            }
        }
        let now = clock();
        counts.set_clock(now);
        let changed = state.forwarder.refresh();
        if let Some(stage) = neighbour.as_mut().filter(|s| !s.is_empty()) {
            stage.follow(now, changed, &state.forwarder, &mut released, &mut expired);
            // In bursts, in their order, through the same stages as a received burst.
            let mut released = released.drain(..).peekable();
            while released.peek().is_some() {
                (released.by_ref().take(BATCH_CAPACITY)).for_each(|b| batch.push_within_room(b));
                let ctx = (sh, &state);
                forward_burst(
                    &mut batch,
                    now,
                    ctx,
                    &mut lanes,
                    &mut pool,
                    &mut rng,
                    &mut icmp,
                    &mut counts,
                    Some(&mut *stage),
                );
            }
            for buf in expired.drain(..) {
                // Held as it arrived; parsed again (cold).
                let info = state.forwarder.parse_again(&buf);
                let cause = DropCause::NoNeighbour;
                let ctx = (sh, &state);
                reject(
                    buf,
                    info.as_ref(),
                    cause,
                    now,
                    ctx,
                    &mut pool,
                    &mut icmp,
                    &mut counts,
                );
            }
        }
        let mut got = 0;
        let ring_full_before = counts.totals.drops_of(DropCause::RingFull);
        for (k, (_, _, half)) in mine.iter_mut().enumerate() {
            if exhausted[k] {
                continue;
            }
            let mut intake = HalfIntake {
                half: half.as_mut(),
                pool: &mut pool,
                rng: &mut rng,
                icmp: &mut icmp,
                counts: &mut counts,
                neighbour: neighbour.as_mut(),
                ctx: (sh, &state),
                lead: &sh.leads[w],
                lanes: &mut lanes,
            };
            let (n, end) = receive_port(&mut intake, now, params.work_budget, &mut batch);
            got += n;
            match end {
                Ok(true) => exhausted[k] = half.readiness() == Readiness::Exhausted,
                Ok(false) => {}
                Err(e) => {
                    error = Some(e);
                    sh.failed.store(true, Ordering::Relaxed);
                    break 'run;
                }
            }
        }
        if now >= next_report {
            // lock-ok: once per half progress period, never waits
            if let Ok(mut c) = sh.progress[w].try_lock() {
                publish(&mut c, &counts, mine);
            }
            next_report = now + Nanos(period.0 / 2);
        }
        if exhausted.iter().all(|&e| e) {
            break;
        }
        if counts.totals.drops_of(DropCause::RingFull) > ring_full_before {
            // The transmit worker is behind: where threads share cores, let it run.
            std::thread::yield_now();
        } else {
            idle = if got == 0 { idle + 1 } else { 0 };
            pause(idle);
        }
    }
    if let Some(stage) = &mut neighbour {
        stage.shut_down(&mut counts, &mut pool);
    }
    // lock-ok: once, after the loop
    if let Ok(mut c) = sh.progress[w].lock() {
        publish(&mut c, &counts, mine);
    }
    // Release: the ring pushes above happen before the transmit workers see this worker done.
    sh.running.fetch_sub(1, Ordering::Release);
    (counts, error)
}

/// A packet forwarding dropped for `cause` (`info`: its headers, when they parsed):
/// counted, and the ICMP error about it, when one is due, goes into its ingress port's ring
/// (`Forwarder::icmp_error`); else its buffer is recycled.
#[cold]
#[allow(clippy::too_many_arguments)]
fn reject(
    mut buf: PacketBuf,
    info: Option<&PacketInfo>,
    cause: DropCause,
    now: Nanos,
    (sh, state): (&Shared<'_>, &RxState),
    pool: &mut BufPool,
    icmp: &mut IcmpSender,
    fates: &mut Fates,
) {
    let kind = crate::reject::reject(&state.forwarder, icmp, fates, now, &mut buf, info, cause);
    let (Some(kind), Some(ring)) = (kind, sh.rings.get(buf.out_port as usize)) else {
        return pool.free(buf);
    };
    let item = Item {
        buf,
        meta: PacketMeta::default(),
        headers: None,
        obs: None,
        icmp: Some(kind),
    };
    if let Err(item) = ring.push(item) {
        fates.icmp.no_room += 1;
        pool.free(item.buf);
    }
}

/// A receive worker's stages of one burst (counted as received before, see
/// [`crate::stages`]): the burst forwarded, then observed in its egress ports' lists, then each
/// packet pushed on its egress port's ring with its observation and rewritable headers, in
/// the burst's order. A packet forwarding did not keep goes to [`discard`]. `burst` is left
/// empty.
#[inline]
#[allow(clippy::too_many_arguments)]
fn forward_burst(
    burst: &mut Batch,
    now: Nanos,
    (sh, state): (&Shared<'_>, &RxState),
    lanes: &mut Lanes,
    pool: &mut BufPool,
    rng: &mut Xoshiro256PlusPlus,
    icmp: &mut IcmpSender,
    fates: &mut Fates,
    mut neighbour: Option<&mut NeighbourStage>,
) {
    forward_stage(&state.forwarder, burst, lanes);
    for (buf, cause) in lanes.discarded.drain(..) {
        let stage = neighbour.as_deref_mut();
        discard(buf, cause, now, (sh, state), pool, icmp, fates, stage);
    }
    let list_of =
        |p: usize| (state.zombies.get(p).and_then(Option::as_ref)).map(|(z, by)| (&**z, *by));
    observe_stage(now, rng, burst, lanes, list_of);
    for ((buf, &(meta, headers)), obs) in burst.drain().zip(&lanes.kept).zip(&lanes.obs) {
        let out = buf.out_port as usize;
        let Some(ring) = sh.rings.get(out) else {
            fates.dropped(&buf, DropCause::NoRoute);
            pool.free(buf);
            continue;
        };
        let obs = list_of(out).map(|_| *obs);
        let item = Item {
            buf,
            meta,
            headers,
            obs,
            icmp: None,
        };
        if let Err(item) = ring.push(item) {
            fates.dropped(&item.buf, DropCause::RingFull);
            pool.free(item.buf);
        }
    }
}

/// A packet forwarding did not keep (`cause`): held for its next hop's MAC (kernel routing,
/// `neighbour`), or rejected ([`reject`]).
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
fn discard(
    buf: PacketBuf,
    cause: DropCause,
    now: Nanos,
    (sh, state): (&Shared<'_>, &RxState),
    pool: &mut BufPool,
    icmp: &mut IcmpSender,
    fates: &mut Fates,
    neighbour: Option<&mut NeighbourStage>,
) {
    let parsed = state.forwarder.parse_again(&buf);
    match cause {
        DropCause::NoNeighbour if neighbour.is_some() => {
            let mut dropped = Vec::new();
            if let Some(stage) = neighbour {
                let dst = parsed.as_ref().map(|i| i.dst);
                stage.hold(now, &state.forwarder, buf, dst, &mut dropped);
            }
            for buf in dropped {
                fates.dropped(&buf, DropCause::NoNeighbour);
                pool.free(buf);
            }
        }
        cause => reject(
            buf,
            parsed.as_ref(),
            cause,
            now,
            (sh, state),
            pool,
            icmp,
            fates,
        ),
    }
}

impl RouterView for MtRouter {
    fn totals(&self) -> FateCounters {
        self.fates.totals
    }
    fn groups(&self) -> &[GroupStats] {
        &self.fates.groups
    }
    fn queued(&self) -> u64 {
        // The rings are in `in_flight` while the workers run (see the module doc), empty after.
        self.egress.iter().map(|e| e.qos.len() as u64).sum::<u64>()
    }
    fn port_count(&self) -> usize {
        self.names.len()
    }
    fn port_name(&self, port: usize) -> &str {
        &self.names[port]
    }
    fn port_counters(&self, port: usize) -> PortCounters {
        match self.ports.get(port) {
            Some(p) => p.counters(),
            None => self.counters[port],
        }
    }
    fn qos(&self, port: usize) -> &QosEngine<PacketBuf> {
        &self.egress[port].qos
    }
    fn qlen_hist(&self, port: usize) -> &[QueueLengthHistogram] {
        &self.egress[port].qlen_hist
    }
    fn zombie_list(&self, port: usize) -> Option<&ZombieList> {
        self.zombie(port)
    }
    fn flow_table(&self, port: usize) -> Option<&crate::flows::FlowTable> {
        self.egress.get(port)?.flows.as_ref()
    }
    fn capture_stats(&self) -> Option<CaptureStats> {
        MtRouter::capture_stats(self)
    }
    fn fib(&self) -> Option<crate::view::FibSnapshot> {
        self.forwarder
            .fib_follow()
            .map(crate::view::FibSnapshot::of)
    }
    fn icmp(&self) -> crate::icmp::IcmpCounters {
        self.fates.icmp
    }
}
