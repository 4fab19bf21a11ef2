//! Multi-threaded forwarding: the receive / transmit split of the IXP1200 design (spec/06).
//!
//! ```text
//!  rx worker 0: ports' recv -> Forwarder::forward (parse, route / bridge, TTL, MACs)
//!               -> observe the egress port's Zombie List -> ring of the egress port --+
//!  rx worker 1: (its own ports, the same steps)  -------------------------------------+
//!                                                                                     |
//!  tx worker:  per egress port: ring -> classify -> AQM on the receive worker's       |
//!              observation -> class queues -> schedule + shape -> port send <---------+
//!              sent and dropped buffers -> return ring -> the rx workers' pools
//! ```
//!
//! [`MtRouter`] holds the same parts as the single-thread [`crate::Dataplane`]: ports, one
//! [`QosEngine`] per egress port, the [`Forwarder`], the generator flow groups. With
//! `rx_workers = N` the ports' receive sides are dealt to N receive workers (port `i` to
//! worker `i mod N`); each worker owns its [`BufPool`] and forwards with the same
//! [`Forwarder::forward`] as `Dataplane::process`, so routing, bridging and the drop causes
//! `parse_error`, `no_route`, `ttl_expired` are the same. A forwarded packet is observed once,
//! on the receive worker, in its egress port's shared lock-free [`ZombieList`], and travels with
//! that [`Observation`] through the egress port's multi-producer ring ([`ArrayQueue`]); a full
//! ring is the counted drop `ring_full`, never a wait. The transmit worker (the calling thread)
//! alone touches the QoS engines: it decides with `QosEngine::enqueue_classified_observed` on
//! the carried observation (an engine built with `QosEngine::with_zombie_list` on the port's
//! list, so SRED / ZL-RED never observe again), schedules, shapes and sends.
//!
//! decided: one transmit worker serves every egress port: the per-class algorithms stay
//! single-threaded and unchanged, and one egress link (the IXP design's bottleneck) cannot be
//! shared by several schedulers anyway. A transmit thread per egress port is the next step
//! once a machine with cores to spare shows this one saturated (the 2-core test machine
//! cannot tell: docs/performance/real-traffic.md).
//!
//! decided: a port's receive and transmit halves are one [`Port`](zl_port::Port) object (an
//! AF_XDP socket has both rings), so each port sits behind a `Mutex`: a receive worker takes
//! it with `try_lock` for one receive burst (and skips the port for this round when the
//! transmit worker holds it or has flagged that it waits for it, so a port polled without
//! pause cannot starve the sends), the transmit worker with `lock` for one send burst. Nothing else is locked per
//! packet; the progress counters are copied under a `try_lock` once per progress period.
//!
//! Conservation, exact when the run has stopped (the same identity as the single-thread loop):
//! `received = forwarded + Σ drops[cause] + queued`, with `ring_full` one of the causes. At the
//! end (every source finished, the drain time over, or a stop from SIGINT / SIGTERM) the
//! receive workers stop first, then what is left in the rings and the class queues is counted
//! as `shutdown`, so `queued` is 0. Time is passed in (`clock`), never read here.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError, TryLockError};

use crossbeam_queue::ArrayQueue;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use zl_aqm::PacketMeta;
use zl_core::Nanos;
use zl_port::{
    Batch, BufPool, PacketBuf, PortCounters, PortError, Readiness, BATCH_CAPACITY, DEFAULT_BUF_SIZE,
};
use zl_qos::{Dequeue, QosConfigError, QosEngine, QosParams};
use zl_wire::ParseConfig;
use zl_zombie::{Observation, ZombieConfig, ZombieList};

use crate::build::{stream_seed, BoxedPort, BuildError};
use crate::config::{invalid, ConfigError, RouterConfig, MAX_POOL_BUFFERS};
use crate::dataplane::{Dataplane, QueueLengthHistogram, StopReason, QLEN_SAMPLE_EVERY};
use crate::forward::{Forwarder, Ingress};
use crate::stats::{count_fate, DropCause, FateCounters, GroupStats};
use crate::view::{RouterView, ViewObserver};

/// The transmit worker offers each port's flow estimate 1/P(t) to its engine (`sqrt-n-live`
/// buffers) every this many rounds: reading P(t) touches cache lines every receive worker
/// writes.
const ESTIMATE_EVERY: u64 = 64;

/// Packets each egress port's receive -> transmit ring holds.
pub const RING_PACKETS: usize = 4096;

/// How a threaded run is sized.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MtParams {
    /// Receive workers (at least 1; more than the ports leaves the extra ones out).
    pub rx_workers: usize,
    /// Capacity of each egress port's ring, packets (at least 1).
    pub ring_capacity: usize,
    /// Buffers in each receive worker's pool.
    pub pool_per_worker: usize,
    /// Packets a receive worker takes from one port per round (checked between bursts of 32),
    /// and packets the transmit worker takes from one ring per round.
    pub work_budget: usize,
    /// Seeds every worker's random generator.
    pub seed: u64,
}

/// One port of a threaded router.
pub struct MtPort {
    pub port: BoxedPort,
    /// The port's egress QoS. When `zombie` is set, build it with
    /// `QosEngine::with_zombie_list` on that list, so its SRED / ZL-RED policies decide on the
    /// receive workers' observations.
    pub qos: QosEngine<PacketBuf>,
    /// The egress port's Zombie List, observed by the receive workers (none: nothing to
    /// observe; SRED / ZL-RED policies, if any, then observe their own lists on the transmit
    /// worker).
    pub zombie: Option<Arc<ZombieList>>,
}

impl MtPort {
    /// A port whose egress QoS decides on a Zombie List of its own (built with `list`), which
    /// the receive workers observe once per packet: the paper's one list per output link.
    pub fn on_own_list(
        port: BoxedPort,
        qos: &QosParams,
        list: ZombieConfig,
    ) -> Result<Self, QosConfigError> {
        let list = Arc::new(ZombieList::new(list));
        Ok(MtPort {
            port,
            qos: QosEngine::with_zombie_list(qos, &list)?,
            zombie: Some(list),
        })
    }
}

/// A packet on its way from a receive worker to the transmit worker.
struct Item {
    buf: PacketBuf,
    meta: PacketMeta,
    dscp: Option<u8>,
    obs: Option<Observation>,
}

/// What a receive worker counted.
#[derive(Clone, Debug, Default)]
struct RxCounts {
    totals: FateCounters,
    groups: Vec<GroupStats>,
}

/// The multi-threaded router: the parts of a [`Dataplane`], run by [`MtRouter::run`].
pub struct MtRouter {
    ports: Vec<BoxedPort>,
    names: Vec<String>,
    qos: Vec<QosEngine<PacketBuf>>,
    zombies: Vec<Option<Arc<ZombieList>>>,
    qlen_hist: Vec<Vec<QueueLengthHistogram>>,
    forwarder: Forwarder,
    params: MtParams,
    /// Port counters as of the last progress report (ports are locked to read them).
    counters: Vec<PortCounters>,
    /// The whole run's counters: the receive workers' plus the transmit worker's.
    totals: FateCounters,
    groups: Vec<GroupStats>,
    /// The transmit worker's own counters.
    tx_totals: FateCounters,
    tx_groups: Vec<GroupStats>,
    /// Each receive worker's counters, as of its last report (final after a run).
    worker_totals: Vec<FateCounters>,
    /// Each receive worker's counters at the end of the last run (a next run goes on from
    /// them).
    rx: Vec<RxCounts>,
    /// Packets in the rings, as of the last progress report (0 after a run).
    in_rings: u64,
    now: Nanos,
}

/// A port's QoS engine built on its shared Zombie List, and the list.
type EngineOnList = (QosEngine<PacketBuf>, Arc<ZombieList>);

/// Port `i`'s Zombie List from its SRED / ZL-RED policies' settings and an engine on it, or
/// `None` when no policy uses one.
fn policy_list(cfg: &RouterConfig, i: usize) -> Result<Option<EngineOnList>, ConfigError> {
    let params = cfg.qos_of(i);
    let key = if cfg.ports[i].qos.is_some() {
        format!("ports[{i}].qos")
    } else {
        "qos".to_owned()
    };
    let qos_err = |e: zl_qos::QosConfigError| ConfigError::Qos {
        key: format!("{key}.{}", e.key),
        reason: e.reason,
    };
    let Some((zkey, zp)) = params.zombie_params().map_err(qos_err)? else {
        return Ok(None);
    };
    let zc = zp
        .validate()
        .map_err(|e| invalid(format!("{key}.{zkey}"), format!("{zp:?}"), e.to_string()))?;
    let list = Arc::new(ZombieList::new(zc));
    let engine = QosEngine::with_zombie_list(&params, &list).map_err(qos_err)?;
    Ok(Some((engine, list)))
}

/// The receive side's shared state, borrowed by every worker for the length of a run.
struct Shared<'a> {
    ports: &'a [Mutex<BoxedPort>],
    /// Set while the transmit worker waits for (or holds) a port's lock: receive workers then
    /// leave that port alone, so a port polled without pause cannot starve the sends.
    tx_waiting: &'a [AtomicBool],
    rings: &'a [ArrayQueue<Item>],
    returns: &'a ArrayQueue<PacketBuf>,
    zombies: &'a [Option<Arc<ZombieList>>],
    forwarder: &'a Forwarder,
    /// Set when the receive workers must stop (the run is over).
    quit: &'a AtomicBool,
    failed: &'a AtomicBool,
    /// Receive workers still running.
    running: &'a AtomicUsize,
    progress: &'a [Mutex<RxCounts>],
}

fn lock_port(m: &Mutex<BoxedPort>) -> std::sync::MutexGuard<'_, BoxedPort> {
    // A worker that panicked while holding a port leaves it usable: its state is the port's.
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A packet leaving its queue: counted as forwarded and put in the transmit batch `out`
/// (whose room the caller checked; a full batch hands the buffer back through `returns`).
fn departs(
    totals: &mut FateCounters,
    groups: &mut [GroupStats],
    b: PacketBuf,
    out: &mut Batch,
    returns: &ArrayQueue<PacketBuf>,
) {
    let len = b.len() as u64;
    count_fate(totals, groups, b.tag, |c| {
        c.forwarded += 1;
        c.forwarded_bytes += len;
    });
    if let Err(b) = out.push(b) {
        let _ = returns.push(b);
    }
}

fn zeroed(groups: &[GroupStats]) -> Vec<GroupStats> {
    groups
        .iter()
        .map(|g| GroupStats {
            fate: FateCounters::default(),
            ..g.clone()
        })
        .collect()
}

fn add_groups(into: &mut [GroupStats], from: &[GroupStats]) {
    for (a, b) in into.iter_mut().zip(from) {
        a.fate.add(&b.fate);
    }
}

impl MtRouter {
    /// Assembles a threaded router from built parts. `groups` are the generator flow groups
    /// (their counters are reset).
    pub fn new(
        ports: Vec<MtPort>,
        forwarder: Forwarder,
        groups: Vec<GroupStats>,
        params: MtParams,
    ) -> Self {
        let names = ports.iter().map(|p| p.port.name().to_owned()).collect();
        let counters = ports.iter().map(|p| p.port.counters()).collect();
        let qlen_hist = ports
            .iter()
            .map(|p| vec![QueueLengthHistogram::default(); p.qos.class_names().len()])
            .collect();
        let mut out = MtRouter {
            names,
            counters,
            qlen_hist,
            ports: Vec::with_capacity(ports.len()),
            qos: Vec::with_capacity(ports.len()),
            zombies: Vec::with_capacity(ports.len()),
            forwarder,
            params,
            totals: FateCounters::default(),
            tx_totals: FateCounters::default(),
            tx_groups: zeroed(&groups),
            groups: zeroed(&groups),
            worker_totals: Vec::new(),
            rx: Vec::new(),
            in_rings: 0,
            now: Nanos::ZERO,
        };
        for p in ports {
            out.ports.push(p.port);
            out.qos.push(p.qos);
            out.zombies.push(p.zombie);
        }
        out
    }

    /// Takes a built [`Dataplane`] of `cfg` apart into a threaded router with `rx_workers`
    /// receive workers: the same ports, QoS engines, Zombie Lists, forwarding and flow groups.
    /// Each worker's pool gets `run.pool_buffers` buffers (default: what the single-thread pool
    /// would get, plus the rings).
    pub fn from_dataplane(
        mut dp: Dataplane,
        cfg: &RouterConfig,
        rx_workers: usize,
    ) -> Result<Self, BuildError> {
        let forwarding = cfg.forwarding()?;
        if matches!(forwarding, crate::config::Forwarding::Kernel(_)) {
            return Err(crate::config::invalid(
                "routing.source",
                "\"kernel\"",
                "\"static\" with rx_workers > 0: kernel routing runs on the single-thread loop (rx_workers = 0)",
            )
            .into());
        }
        let groups = dp.groups().to_vec();
        let slots = std::mem::take(&mut dp.slots);
        let macs = slots.iter().map(|s| s.mac).collect();
        let egress = (0..slots.len())
            .filter(|&i| forwarding.is_egress(i as u16))
            .count();
        let pool_per_worker = match cfg.run.pool_buffers {
            Some(n) => n as usize,
            None => (dp.pool_total() + egress * RING_PACKETS).min(MAX_POOL_BUFFERS as usize),
        };
        let forwarder = Forwarder::new(forwarding, cfg.parse, cfg.priority.build()?, macs);
        let mut ports = Vec::with_capacity(slots.len());
        for (i, s) in slots.into_iter().enumerate() {
            let (qos, zombie) = match s.zombie {
                Some(list) => (s.qos, Some(list)),
                // No flow estimate on this port: its SRED / ZL-RED policies, if any, still
                // need one list that the receive workers observe.
                None => match policy_list(cfg, i)? {
                    Some((qos, list)) => (qos, Some(list)),
                    None => (s.qos, None),
                },
            };
            ports.push(MtPort {
                port: s.port,
                qos,
                zombie,
            });
        }
        let params = MtParams {
            rx_workers: rx_workers.max(1),
            ring_capacity: RING_PACKETS,
            pool_per_worker,
            work_budget: cfg.run.work_budget.max(1) as usize,
            seed: cfg.run.seed,
        };
        Ok(MtRouter::new(ports, forwarder, groups, params))
    }

    pub fn params(&self) -> &MtParams {
        &self.params
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
        self.zombies.get(port)?.as_deref()
    }
    /// True when a port must be driven by a real clock.
    pub fn has_live_ports(&self) -> bool {
        self.ports.iter().any(|p| p.readiness() == Readiness::Live)
    }

    /// Runs the receive workers and the transmit worker (this thread) on `clock` (shared by
    /// every thread; monotonic) until every receive port is exhausted and everything queued is
    /// sent, or `drain` of `clock` time has passed since the ports ran out, or `stop` is set,
    /// or a port fails. `observer` gets a view every `period`. What is still queued at the end
    /// is counted as `shutdown`.
    pub fn run<C>(
        &mut self,
        clock: &C,
        stop: &AtomicBool,
        drain: Nanos,
        period: Nanos,
        observer: &mut dyn ViewObserver,
    ) -> Result<StopReason, PortError>
    where
        C: Fn() -> Nanos + Sync,
    {
        let n_ports = self.ports.len();
        let workers = self.params.rx_workers.clamp(1, n_ports.max(1));
        let ports: Vec<Mutex<BoxedPort>> = std::mem::take(&mut self.ports)
            .into_iter()
            .map(Mutex::new)
            .collect();
        let rings: Vec<ArrayQueue<Item>> = (0..n_ports)
            .map(|_| ArrayQueue::new(self.params.ring_capacity.max(1)))
            .collect();
        let total_bufs = self.params.pool_per_worker * workers;
        let returns: ArrayQueue<PacketBuf> = ArrayQueue::new(total_bufs.max(1));
        let quit = AtomicBool::new(false);
        let failed = AtomicBool::new(false);
        let running = AtomicUsize::new(workers);
        // Each worker goes on from its counts of a previous run, if any.
        let starts: Vec<RxCounts> = (0..workers)
            .map(|w| {
                self.rx.get(w).cloned().unwrap_or_else(|| RxCounts {
                    totals: FateCounters::default(),
                    groups: zeroed(&self.groups),
                })
            })
            .collect();
        let progress: Vec<Mutex<RxCounts>> = starts.iter().cloned().map(Mutex::new).collect();
        // The workers' own handles (Arc clones; the forwarding tables are small), so the
        // transmit worker keeps `&mut self`.
        let zombies = self.zombies.clone();
        let forwarder = self.forwarder.clone();
        let tx_waiting: Vec<AtomicBool> = (0..n_ports).map(|_| AtomicBool::new(false)).collect();
        let shared = Shared {
            ports: &ports,
            tx_waiting: &tx_waiting,
            rings: &rings,
            returns: &returns,
            zombies: &zombies,
            forwarder: &forwarder,
            quit: &quit,
            failed: &failed,
            running: &running,
            progress: &progress,
        };
        let params = self.params.clone();
        let (results, tx_outcome) = std::thread::scope(|s| {
            let mut handles = Vec::with_capacity(workers);
            for (w, start) in starts.into_iter().enumerate() {
                let mine: Vec<usize> = (w..n_ports).step_by(workers).collect();
                let (shared, params) = (&shared, &params);
                let kept = start.clone();
                let spawned = std::thread::Builder::new()
                    .name(format!("zlrouter-rx{w}"))
                    .spawn_scoped(s, move || {
                        rx_worker(w, &mine, shared, params, start, clock, stop, period)
                    });
                match spawned {
                    Ok(h) => handles.push((h, kept)),
                    Err(e) => {
                        // A worker that cannot start counts as a failed run; the ports it
                        // would have served received nothing.
                        running.fetch_sub(1, Ordering::AcqRel);
                        failed.store(true, Ordering::Relaxed);
                        tracing::error!("zlrouter: cannot start receive worker {w}: {e}");
                    }
                }
            }
            let tx = self.tx_loop(&shared, clock, stop, drain, period, observer);
            // The receive workers stop before the leftovers are counted.
            quit.store(true, Ordering::Relaxed);
            // A worker that panicked keeps the counts it started with.
            let results: Vec<(RxCounts, Option<PortError>)> = handles
                .into_iter()
                .map(|(h, kept)| h.join().unwrap_or((kept, None)))
                .collect();
            (results, tx)
        });
        let (reason, mut error) = tx_outcome;
        // Everything left is counted `shutdown`: the rings, then the class queues.
        for ring in &rings {
            while let Some(item) = ring.pop() {
                count_fate(
                    &mut self.tx_totals,
                    &mut self.tx_groups,
                    item.buf.tag,
                    |c| c.drop(DropCause::Shutdown),
                );
            }
        }
        for p in 0..n_ports {
            let mut t = self.now;
            loop {
                match self.qos[p].dequeue(t) {
                    Dequeue::Packet(d) => {
                        count_fate(&mut self.tx_totals, &mut self.tx_groups, d.item.tag, |c| {
                            c.drop(DropCause::Shutdown)
                        })
                    }
                    Dequeue::Hold { until } => t = until.max(t + Nanos(1)),
                    Dequeue::Empty => break,
                }
            }
        }
        self.ports = ports
            .into_iter()
            .map(|m| m.into_inner().unwrap_or_else(PoisonError::into_inner))
            .collect();
        for port in &mut self.ports {
            if let Err(e) = port.flush() {
                error.get_or_insert(e);
            }
        }
        self.worker_totals = results.iter().map(|(c, _)| c.totals).collect();
        self.totals = self.tx_totals;
        self.groups.clone_from(&self.tx_groups);
        self.rx.clear();
        for (c, e) in results {
            self.totals.add(&c.totals);
            add_groups(&mut self.groups, &c.groups);
            self.rx.push(c);
            if let Some(e) = e {
                error.get_or_insert(e);
            }
        }
        self.in_rings = 0;
        self.counters = self.ports.iter().map(|p| p.counters()).collect();
        observer.progress(self.now, self);
        match error {
            Some(e) => Err(e),
            None => Ok(reason),
        }
    }

    /// The transmit worker: rings -> QoS engines -> ports, until the run ends.
    fn tx_loop<C>(
        &mut self,
        sh: &Shared<'_>,
        clock: &C,
        stop: &AtomicBool,
        drain: Nanos,
        period: Nanos,
        observer: &mut dyn ViewObserver,
    ) -> (StopReason, Option<PortError>)
    where
        C: Fn() -> Nanos + Sync,
    {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(stream_seed(self.params.seed, 0));
        let parse = *self.forwarder.parse_config();
        let mut out = Batch::new();
        // Takes the sent buffers back (up to all the workers' buffers) for the return ring.
        let mut sent = BufPool::empty(
            self.params.pool_per_worker * sh.progress.len(),
            DEFAULT_BUF_SIZE,
        );
        let mut rounds: u64 = 0;
        let mut next_report = clock() + period;
        let mut sources_done_at: Option<Nanos> = None;
        let mut idle = 0u32;
        let budget = self.params.work_budget;
        loop {
            let now = clock().max(self.now);
            self.now = now;
            rounds = rounds.wrapping_add(1);
            let mut moved = 0usize;
            for p in 0..self.qos.len() {
                // Admission in bursts, each followed by its transmit, so that a queue whose
                // link keeps up never holds more than the cut-through leaves (see `admit`).
                let mut left = budget;
                loop {
                    let chunk = left.min(BATCH_CAPACITY);
                    let n = self.admit(
                        p,
                        now,
                        &sh.rings[p],
                        sh.returns,
                        &parse,
                        &mut rng,
                        chunk,
                        &mut out,
                    );
                    moved += n;
                    left -= n;
                    if let Err(e) = self.transmit(p, now, sh, &mut out, &mut sent) {
                        sh.failed.store(true, Ordering::Relaxed);
                        return (StopReason::Finished, Some(e));
                    }
                    if n < chunk || left == 0 {
                        break;
                    }
                }
                if rounds % ESTIMATE_EVERY == 0 {
                    if let Some(z) = &self.zombies[p] {
                        self.qos[p].offer_zombie_estimate(now, z);
                    }
                }
                if rounds % QLEN_SAMPLE_EVERY == 0 {
                    let qos = &self.qos[p];
                    for (c, h) in self.qlen_hist[p].iter_mut().enumerate() {
                        h.record(qos.queue_len(c).map_or(0, |(packets, _)| packets));
                    }
                }
            }
            if now >= next_report {
                self.report_progress(sh, now, observer);
                next_report = now + period;
            }
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
                let empty = sh.rings.iter().all(ArrayQueue::is_empty)
                    && self.qos.iter().all(QosEngine::is_empty);
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

    /// Classifies and admits up to `budget` packets from `ring` into port `p`'s engine. A
    /// packet admitted to the port with nothing else queued leaves at once into `out` (the
    /// transmit batch, empty on entry and sent by `transmit` before anything it dequeues)
    /// when the shaper lets it, as `Dataplane`'s cut-through does: so that a queue whose link
    /// keeps up does not hold a whole admission round, which an AQM would read as congestion.
    #[allow(clippy::too_many_arguments)]
    fn admit(
        &mut self,
        p: usize,
        now: Nanos,
        ring: &ArrayQueue<Item>,
        returns: &ArrayQueue<PacketBuf>,
        parse: &ParseConfig,
        rng: &mut Xoshiro256PlusPlus,
        budget: usize,
        out: &mut Batch,
    ) -> usize {
        let qos = &mut self.qos[p];
        let mut n = 0;
        while n < budget {
            let Some(item) = ring.pop() else { break };
            n += 1;
            let Item {
                mut buf,
                meta,
                dscp,
                obs,
            } = item;
            let class = qos.classify(now, dscp, meta.len);
            if let Some(d) = class.remark {
                // The headers were parsed on the receive worker; parse again to rewrite them
                // (only on a re-mark).
                if let Ok(mut info) = zl_wire::parse(buf.as_slice(), parse) {
                    let _ = zl_wire::set_dscp(buf.as_mut_slice(), &mut info, d);
                }
            }
            let tag = buf.tag;
            let mut marked = false;
            let result = qos.enqueue_classified_observed(
                now,
                rng,
                &class,
                meta,
                buf,
                |b| {
                    if let Ok(mut info) = zl_wire::parse(b.as_slice(), parse) {
                        marked = matches!(
                            zl_wire::mark(b.as_mut_slice(), &mut info),
                            Ok(zl_wire::MarkOutcome::Ce
                                | zl_wire::MarkOutcome::CcExtEcn
                                | zl_wire::MarkOutcome::AlreadyMarked)
                        );
                    }
                },
                obs.as_ref(),
            );
            match result {
                Ok(_) => {
                    if marked {
                        count_fate(&mut self.tx_totals, &mut self.tx_groups, tag, |c| {
                            c.marked += 1
                        });
                    }
                    if !out.is_full() {
                        let (totals, groups) = (&mut self.tx_totals, &mut self.tx_groups);
                        qos.release_if_alone(now, class.class, |b| {
                            departs(totals, groups, b, out, returns)
                        });
                    }
                }
                Err(dropped) => {
                    let cause = DropCause::of_verdict(dropped.verdict).unwrap_or(DropCause::Tail);
                    count_fate(&mut self.tx_totals, &mut self.tx_groups, tag, |c| {
                        c.drop(cause)
                    });
                    let _ = returns.push(dropped.item);
                }
            }
        }
        n
    }

    /// Sends what port `p`'s scheduler and shaper release, a burst at a time.
    fn transmit(
        &mut self,
        p: usize,
        now: Nanos,
        sh: &Shared<'_>,
        out: &mut Batch,
        sent: &mut BufPool,
    ) -> Result<(), PortError> {
        loop {
            let (totals, groups) = (&mut self.tx_totals, &mut self.tx_groups);
            self.qos[p].dequeue_burst(now, out.room(), |b| {
                departs(totals, groups, b, out, sh.returns)
            });
            if out.is_empty() {
                return Ok(());
            }
            let full = out.is_full();
            sh.tx_waiting[p].store(true, Ordering::Relaxed);
            let mut port = lock_port(&sh.ports[p]);
            sh.tx_waiting[p].store(false, Ordering::Relaxed);
            let result = port.send(now, out, sent);
            drop(port);
            // A failing port may leave packets in the batch; their buffers go back (they were
            // counted as forwarded, the port counts its own errors).
            for b in out.drain() {
                let _ = sh.returns.push(b);
            }
            while sent.available() > 0 {
                if let Some(b) = sent.alloc() {
                    let _ = sh.returns.push(b);
                }
            }
            result?;
            if !full {
                return Ok(());
            }
        }
    }

    /// Gathers the workers' counters and the ports' into this router and shows it.
    fn report_progress(&mut self, sh: &Shared<'_>, now: Nanos, observer: &mut dyn ViewObserver) {
        let mut totals = self.tx_totals;
        let mut groups = self.tx_groups.clone();
        let mut workers = Vec::with_capacity(sh.progress.len());
        for m in sh.progress {
            let c = m.lock().unwrap_or_else(PoisonError::into_inner);
            totals.add(&c.totals);
            add_groups(&mut groups, &c.groups);
            workers.push(c.totals);
        }
        self.totals = totals;
        self.groups = groups;
        self.worker_totals = workers;
        self.in_rings = sh.rings.iter().map(|r| r.len() as u64).sum();
        for (p, m) in sh.ports.iter().enumerate() {
            self.counters[p] = lock_port(m).counters();
        }
        observer.progress(now, self);
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

/// One receive worker: its ports' bursts -> forward -> observe -> egress ring.
#[allow(clippy::too_many_arguments)]
fn rx_worker<C>(
    w: usize,
    mine: &[usize],
    sh: &Shared<'_>,
    params: &MtParams,
    mut counts: RxCounts,
    clock: &C,
    stop: &AtomicBool,
    period: Nanos,
) -> (RxCounts, Option<PortError>)
where
    C: Fn() -> Nanos + Sync,
{
    let mut pool = BufPool::new(params.pool_per_worker, DEFAULT_BUF_SIZE);
    let mut batch = Batch::new();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(stream_seed(params.seed, 1000 + w as u64));
    let mut exhausted = vec![false; mine.len()];
    let mut error = None;
    let mut next_report = Nanos::ZERO;
    let mut idle = 0u32;
    // Relaxed: the flags carry no data.
    'run: while !sh.quit.load(Ordering::Relaxed)
        && !stop.load(Ordering::Relaxed)
        && !sh.failed.load(Ordering::Relaxed)
    {
        while pool.available() < pool.total() {
            match sh.returns.pop() {
                Some(b) => pool.free(b),
                None => break,
            }
        }
        let now = clock();
        let mut got = 0;
        let ring_full_before = counts.totals.drops_of(DropCause::RingFull);
        for (k, &p) in mine.iter().enumerate() {
            if exhausted[k] {
                continue;
            }
            let mut left = params.work_budget;
            while left > 0 {
                // Relaxed: a hint only; the lock orders the port's state.
                if sh.tx_waiting[p].load(Ordering::Relaxed) {
                    break;
                }
                let mut port = match sh.ports[p].try_lock() {
                    Ok(g) => g,
                    Err(TryLockError::Poisoned(g)) => g.into_inner(),
                    // The transmit worker is sending on it: next round.
                    Err(TryLockError::WouldBlock) => break,
                };
                let result = port.recv(now, &mut pool, &mut batch);
                let n = batch.len();
                let readiness = if n == 0 { Some(port.readiness()) } else { None };
                drop(port);
                got += n;
                left = left.saturating_sub(n);
                // What the port delivered before an error is forwarded like any burst.
                for buf in batch.drain() {
                    forward_one(buf, now, sh, &mut pool, &mut rng, &mut counts);
                }
                if let Err(e) = result {
                    error = Some(e);
                    sh.failed.store(true, Ordering::Relaxed);
                    break 'run;
                }
                if n == 0 {
                    exhausted[k] = readiness == Some(Readiness::Exhausted);
                    break;
                }
            }
        }
        if now >= next_report {
            if let Ok(mut c) = sh.progress[w].try_lock() {
                c.totals = counts.totals;
                c.groups.clone_from(&counts.groups);
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
    if let Ok(mut c) = sh.progress[w].lock() {
        c.totals = counts.totals;
        c.groups.clone_from(&counts.groups);
    }
    // Release: the ring pushes above happen before the transmit worker sees this worker done.
    sh.running.fetch_sub(1, Ordering::Release);
    (counts, error)
}

/// Forwards one received packet into its egress port's ring (or counts why not).
#[inline]
fn forward_one(
    mut buf: PacketBuf,
    now: Nanos,
    sh: &Shared<'_>,
    pool: &mut BufPool,
    rng: &mut Xoshiro256PlusPlus,
    counts: &mut RxCounts,
) {
    let len = buf.len() as u64;
    let tag = buf.tag;
    count_fate(&mut counts.totals, &mut counts.groups, tag, |c| {
        c.received += 1;
        c.received_bytes += len;
    });
    let drop_as = |cause: DropCause, counts: &mut RxCounts| {
        count_fate(&mut counts.totals, &mut counts.groups, tag, |c| {
            c.drop(cause)
        });
    };
    let Ingress { info, meta } = match sh.forwarder.forward(&mut buf) {
        Ok(ingress) => ingress,
        Err(cause) => {
            drop_as(cause, counts);
            return pool.free(buf);
        }
    };
    let out = buf.out_port as usize;
    let Some(ring) = sh.rings.get(out) else {
        drop_as(DropCause::NoRoute, counts);
        return pool.free(buf);
    };
    let obs = sh
        .zombies
        .get(out)
        .and_then(Option::as_ref)
        .map(|z| z.observe(meta.flow, now, rng));
    let item = Item {
        buf,
        meta,
        dscp: info.as_ref().map(|i| i.dscp()),
        obs,
    };
    if let Err(item) = ring.push(item) {
        drop_as(DropCause::RingFull, counts);
        pool.free(item.buf);
    }
}

impl RouterView for MtRouter {
    fn totals(&self) -> FateCounters {
        self.totals
    }
    fn groups(&self) -> &[GroupStats] {
        &self.groups
    }
    fn queued(&self) -> u64 {
        self.in_rings + self.qos.iter().map(|q| q.len() as u64).sum::<u64>()
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
        &self.qos[port]
    }
    fn qlen_hist(&self, port: usize) -> &[QueueLengthHistogram] {
        &self.qlen_hist[port]
    }
    fn zombie_list(&self, port: usize) -> Option<&ZombieList> {
        self.zombie(port)
    }
}
