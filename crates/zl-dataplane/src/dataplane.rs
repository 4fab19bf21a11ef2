//! The poll-mode loop: rx burst -> parse -> route or bridge -> classify -> meter -> AQM
//! admission -> per-class queue -> schedule -> shape -> tx burst.
//!
//! One [`Dataplane`] runs on one thread and owns its ports, its buffer pool and one
//! `zl_qos::QosEngine` per egress port. [`Dataplane::poll`] does one round at a given `now`:
//! it receives bursts from each port until `work_budget` packets (checked between bursts, so
//! at most `work_budget + 31`), pushes each through forwarding and its egress port's QoS
//! engine, and after each burst lets every egress port send what its scheduler and shaper
//! release. A packet admitted to a port with nothing queued whose shaper lets it go leaves at
//! once (`Dataplane::cut_through`), so a queue whose link keeps up stays empty instead of
//! holding the burst, which an AQM would read as congestion. The driver chooses the clock:
//! [`Dataplane::run_virtual`] jumps virtual time from
//! event to event (the next packet of a pcap or generator port, or the time a shaper releases
//! a held packet), so a run is deterministic with its seed; a live driver passes the
//! monotonic clock.
//!
//! Nothing here allocates per packet: buffers come from the pool, batches and queues are
//! reserved at build time, counters are fixed arrays.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rand_xoshiro::Xoshiro256PlusPlus;
use zl_core::Nanos;
use zl_port::{Batch, BufPool, PacketBuf, Port, PortCounters, PortError, Readiness};
use zl_qos::{Dequeue, QosEngine, QosParams};
use zl_wire::{MacAddr, ParseConfig};

use zl_zombie::{ZombieList, ZombieParams};

use crate::config::{invalid, ConfigError, Forwarding};
use crate::forward::Forwarder;
use crate::priority::PriorityMap;
use crate::route::RouteTable;
use crate::stats::{DropCause, FateCounters, GroupStats};
use zl_fib::{Hold, NeighbourWait};

/// A port plus what the data plane keeps beside it.
pub struct PortSlot {
    pub port: Box<dyn Port + Send>,
    pub mac: MacAddr,
    pub qos: QosEngine<PacketBuf>,
    /// The shaper holds the head packet until then.
    pub held_until: Option<Nanos>,
    /// Queue-length samples per class (every [`QLEN_SAMPLE_EVERY`] polls), log2 buckets
    /// (`[0] = empty, [k] = 2^(k-1)..2^k - 1`).
    pub qlen_hist: Vec<QueueLengthHistogram>,
    /// The port's Zombie List when its active flows are estimated (`metrics.flow_estimate` or
    /// a `sqrt-n-live` buffer rule). It observes every packet offered to the port's egress,
    /// once, before admission. decided: it is also the list of every SRED / ZL-RED policy of
    /// the port (the paper keeps one list per output link), which decide on that one
    /// observation instead of observing a list of their own (built by `port_qos`).
    pub zombie: Option<Arc<ZombieList>>,
}

/// Builds the QoS engine of one egress port from `params` (whose errors are reported under
/// `qos_key`) and, when `estimate` asks for the port's flow estimate, the port's Zombie List,
/// shared with the engine's SRED / ZL-RED policies (`QosEngine::with_zombie_list`).
///
/// The list's parameters: `estimate_params` (`metrics.flow_estimate_zombie`) when given, else
/// those of the port's SRED / ZL-RED policies (so turning the estimate on leaves their
/// configuration as written), else the defaults (M = 1000, occurrence table: an observation
/// reads F and T in any mode, and a scan would read all M zombies per packet).
/// decided: `estimate_params` that differ from the policies' `zombie` settings are an error
/// naming both keys, not a silent override.
pub(crate) fn port_qos(
    params: &QosParams,
    qos_key: &str,
    estimate: bool,
    estimate_params: Option<ZombieParams>,
) -> Result<(QosEngine<PacketBuf>, Option<Arc<ZombieList>>), ConfigError> {
    let qos_err = |e: zl_qos::QosConfigError| ConfigError::Qos {
        key: format!("{qos_key}.{}", e.key),
        reason: e.reason,
    };
    if !estimate {
        return Ok((QosEngine::new(params).map_err(qos_err)?, None));
    }
    const ESTIMATE_KEY: &str = "metrics.flow_estimate_zombie";
    let (key, zp) = match (estimate_params, params.zombie_params().map_err(qos_err)?) {
        (Some(m), Some((k, p))) if m != p => {
            return Err(invalid(
                ESTIMATE_KEY,
                format!("{m:?}"),
                format!(
                    "the settings of `{qos_key}.{k}` ({p:?}): the port's flow estimate and its \
                     SRED / ZL-RED policies share one Zombie List; set them equal or leave \
                     `{ESTIMATE_KEY}` out"
                ),
            ))
        }
        (Some(m), _) => (ESTIMATE_KEY.to_owned(), m),
        (None, Some((k, p))) => (format!("{qos_key}.{k}"), p),
        (None, None) => (ESTIMATE_KEY.to_owned(), ZombieParams::default()),
    };
    let zc = zp
        .validate()
        .map_err(|e| invalid(key, format!("{zp:?}"), e.to_string()))?;
    let list = Arc::new(ZombieList::new(zc));
    let engine = QosEngine::with_zombie_list(params, &list).map_err(qos_err)?;
    Ok((engine, Some(list)))
}

impl PortSlot {
    /// Active flows at this egress estimated as 1/P(t), when estimated.
    pub fn estimated_flows(&self) -> Option<f64> {
        self.zombie.as_ref().map(|z| z.estimated_flows())
    }
}

/// Buckets of the queue-length histogram: 0, 1, 2-3, 4-7, ..., >= 2^14.
pub const QLEN_BUCKETS: usize = 16;

/// Samples of a queue's length in packets, log2 buckets, with their sum (for the mean).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct QueueLengthHistogram {
    /// `[0]` = empty, `[k]` = `2^(k-1) ..= 2^k - 1`, the last bucket open-ended.
    pub buckets: [u64; QLEN_BUCKETS],
    pub sum: u64,
}

impl QueueLengthHistogram {
    #[inline]
    pub fn record(&mut self, len: u32) {
        let bucket = (u32::BITS - len.leading_zeros()) as usize;
        self.buckets[bucket.min(QLEN_BUCKETS - 1)] += 1;
        self.sum += len as u64;
    }
    pub fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }
}

/// Queue lengths are sampled every this many polls (each sample reads every class's length
/// with `QosEngine::queue_len`, which copies no counters).
pub const QLEN_SAMPLE_EVERY: u64 = 8;

/// How a run ended (a failed port is the `Err` of the run instead).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// Every source finished and every queue drained.
    Finished,
    /// The drain time after the sources' end ran out; what was queued is counted `shutdown`.
    DrainTimeout,
    /// Stopped from outside (SIGINT / SIGTERM).
    Interrupted,
}

/// Called by the loop at a low rate (every `period` of the driver's time).
pub trait Observer {
    fn progress(&mut self, now: Nanos, dp: &Dataplane);
}

/// An observer that does nothing.
pub struct NoObserver;
impl Observer for NoObserver {
    fn progress(&mut self, _: Nanos, _: &Dataplane) {}
}

/// Applies `count` to the totals and to the flow group a buffer's tag names (`tag` = group
/// index + 1; 0 or an unknown tag: the totals only).
#[inline]
fn count_fate(
    totals: &mut FateCounters,
    groups: &mut [GroupStats],
    tag: u32,
    count: impl Fn(&mut FateCounters),
) {
    count(totals);
    count_group(groups, tag, count);
}

/// Counts a packet leaving its queue for the port in its flow group; returns its length for
/// the totals (which the callers add up per burst).
#[inline]
fn departs(groups: &mut [GroupStats], b: &PacketBuf) -> u64 {
    let len = b.len() as u64;
    count_group(groups, b.tag, |c| {
        c.forwarded += 1;
        c.forwarded_bytes += len;
    });
    len
}

/// Applies `count` to the flow group a buffer's tag names only (the caller counts the totals).
#[inline]
fn count_group(groups: &mut [GroupStats], tag: u32, count: impl Fn(&mut FateCounters)) {
    if let Some(g) = (tag as usize)
        .checked_sub(1)
        .and_then(|i| groups.get_mut(i))
    {
        count(&mut g.fate);
    }
}

/// [`Dataplane::new`] was given forwarding that sends packets to a port it does not have.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{what} leads to port index {port}, but the data plane has {ports} ports")]
pub struct UnknownPort {
    /// `"a route"` or `"a bridge peer"`.
    pub what: &'static str,
    pub port: u16,
    pub ports: usize,
}

/// The forwarding engine of one thread.
pub struct Dataplane {
    pub(crate) slots: Vec<PortSlot>,
    pool: BufPool,
    forwarder: Forwarder,
    rng: Xoshiro256PlusPlus,
    budget: usize,
    /// The receive batch; taken out for the length of a poll so `process` can borrow `self`
    /// (`Option` so that taking it allocates no stand-in batch).
    rx: Option<Batch>,
    tx: Batch,
    /// Per port: packets that left their queue at once on arrival (see
    /// `Dataplane::cut_through`), sent first at the port's next transmit.
    pending: Vec<Batch>,
    totals: FateCounters,
    groups: Vec<GroupStats>,
    now: Nanos,
    polls: u64,
    /// Kernel routing: packets waiting for their next hop's MAC (bounded per next hop).
    neighbour_wait: NeighbourWait<PacketBuf>,
    /// Scratch for released / expired waiting packets (no allocation per poll once grown).
    released: Vec<(u16, zl_wire::MacAddr, PacketBuf)>,
    expired: Vec<PacketBuf>,
}

/// How long a next hop's packets wait for its MAC: the kernel gives up after
/// `mcast_solicit` (3) probes `retrans_time` (1 s) apart.
const NEIGHBOUR_WAIT: Nanos = Nanos::from_millis(3000);
/// Next hops that may have packets waiting at once.
const NEIGHBOUR_WAIT_HOPS: usize = 256;
/// Packets per next hop when the config does not say (`routing.unres_qlen`).
const DEFAULT_UNRES_QLEN: usize = 32;

impl Dataplane {
    /// Assembles a data plane from built parts (see `crate::build` for the config path).
    /// Forwarding that names a port index `slots` does not have (a route's port, a bridge
    /// peer) is refused.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        slots: Vec<PortSlot>,
        pool: BufPool,
        forwarding: Forwarding,
        parse: ParseConfig,
        priority: PriorityMap,
        rng: Xoshiro256PlusPlus,
        work_budget: u32,
        groups: Vec<GroupStats>,
    ) -> Result<Self, UnknownPort> {
        let ports = slots.len();
        let missing = |p: &u16| *p as usize >= ports;
        let unknown = match &forwarding {
            Forwarding::Router(table) => (table.egress_ports().into_iter())
                .find(missing)
                .map(|p| ("a route", p)),
            Forwarding::Kernel(statics) => {
                (statics.iter().map(|r| r.port).find(missing)).map(|p| ("a route", p))
            }
            Forwarding::Bridge(peer) => {
                (peer.iter().flatten().copied().find(missing)).map(|p| ("a bridge peer", p))
            }
        };
        if let Some((what, port)) = unknown {
            return Err(UnknownPort { what, port, ports });
        }
        let macs = slots.iter().map(|s| s.mac).collect();
        let pending = slots.iter().map(|_| Batch::new()).collect();
        Ok(Dataplane {
            forwarder: Forwarder::new(forwarding, parse, priority, macs),
            slots,
            pool,
            rng,
            budget: work_budget.max(1) as usize,
            rx: Some(Batch::new()),
            tx: Batch::new(),
            pending,
            totals: FateCounters::default(),
            groups,
            now: Nanos::ZERO,
            polls: 0,
            neighbour_wait: NeighbourWait::new(
                DEFAULT_UNRES_QLEN,
                NEIGHBOUR_WAIT_HOPS,
                NEIGHBOUR_WAIT,
            ),
            released: Vec::new(),
            expired: Vec::new(),
        })
    }

    /// Kernel routing (`[routing] source = "kernel"`): dumps the kernel's main table and
    /// neighbour table in the calling thread's namespace and follows them on a control thread
    /// from now on; `ports` maps each kernel interface index to its port index;
    /// `unres_qlen` bounds the packets held per unresolved next hop.
    pub fn follow_kernel(
        &mut self,
        ports: Vec<(u32, u16)>,
        unres_qlen: usize,
    ) -> std::io::Result<()> {
        let Forwarding::Kernel(statics) = self.forwarder.forwarding() else {
            return Err(std::io::Error::other(
                "the config's routing.source is not \"kernel\"",
            ));
        };
        let state = zl_fib::FibState::new(ports, statics.clone());
        let resolve = zl_fib::ResolveQueue::new(1024);
        let (handle, follower) = zl_fib::FibFollower::start(state, resolve.clone())?;
        self.forwarder.set_kernel_fib(crate::forward::KernelFib {
            reader: handle.reader(),
            resolve,
            follower: Some(std::sync::Arc::new(follower)),
        });
        self.neighbour_wait = NeighbourWait::new(unres_qlen, NEIGHBOUR_WAIT_HOPS, NEIGHBOUR_WAIT);
        Ok(())
    }

    /// Kernel routing, once per poll: the newest table, the waiting packets it resolves
    /// (forwarded now, in arrival order) and those that waited too long (`no_neighbour`).
    fn follow_table(&mut self, now: Nanos) {
        let changed = self.forwarder.refresh();
        if self.neighbour_wait.is_empty() {
            return;
        }
        if changed {
            let mut released = std::mem::take(&mut self.released);
            if let Some(fib) = self.forwarder.kernel_fib() {
                self.neighbour_wait.release(fib, &mut released);
            }
            for (_, _, buf) in released.drain(..) {
                // Routed again with the new table: its MAC, TTL and queue as any packet.
                self.forward_and_admit(now, buf);
            }
            self.released = released;
        }
        let mut expired = std::mem::take(&mut self.expired);
        self.neighbour_wait.expire(now, &mut expired);
        for buf in expired.drain(..) {
            self.count_drop(buf, DropCause::NoNeighbour);
        }
        self.expired = expired;
    }

    /// A packet whose next hop has no MAC yet: held (asking the kernel to resolve the next
    /// hop for the first one) or, past the bound, dropped as `no_neighbour`.
    fn hold_for_neighbour(&mut self, now: Nanos, buf: PacketBuf, dst: Option<std::net::IpAddr>) {
        let Some((port, hop)) = dst.and_then(|d| self.forwarder.unresolved(d)) else {
            return self.count_drop(buf, DropCause::NoNeighbour);
        };
        match self.neighbour_wait.hold(now, port, hop, buf) {
            Hold::HeldFirst => self.forwarder.request_resolve(port, hop),
            Hold::Held => {}
            Hold::Full(buf) => self.count_drop(buf, DropCause::NoNeighbour),
        }
    }

    /// Fate of every packet received so far.
    pub fn totals(&self) -> &FateCounters {
        &self.totals
    }
    /// Fate per generator flow group.
    pub fn groups(&self) -> &[GroupStats] {
        &self.groups
    }
    /// The ports, their engines and histograms.
    pub fn slots(&self) -> &[PortSlot] {
        &self.slots
    }
    /// Counters of every port.
    pub fn port_counters(&self) -> Vec<(String, PortCounters)> {
        self.slots
            .iter()
            .map(|s| (s.port.name().to_owned(), s.port.counters()))
            .collect()
    }
    /// Packets waiting in every egress queue, and for a next hop's MAC (kernel routing).
    pub fn queued(&self) -> u64 {
        self.slots.iter().map(|s| s.qos.len() as u64).sum::<u64>()
            + self.neighbour_wait.len() as u64
    }
    /// Buffers handed out by the pool right now (queued packets plus none in flight between
    /// polls): the memory bound the configured buffers impose.
    pub fn buffers_in_use(&self) -> usize {
        self.pool.in_use()
    }
    pub fn pool_total(&self) -> usize {
        self.pool.total()
    }
    /// The routing table (router mode), shared with the loop: routes inserted or removed
    /// through it from another thread apply to the next lookup (see `crate::route`).
    pub fn routes(&self) -> Option<RouteTable> {
        self.forwarder.routes().cloned()
    }
    /// The time of the last poll.
    pub fn now(&self) -> Nanos {
        self.now
    }

    #[inline]
    fn count_drop(&mut self, buf: PacketBuf, cause: DropCause) {
        count_fate(&mut self.totals, &mut self.groups, buf.tag, |c| {
            c.drop(cause)
        });
        self.pool.free(buf);
    }

    /// One poll at `now`: receive up to the work budget per port, forward and enqueue, and
    /// after each burst transmit what the schedulers and shapers release. Returns the packets
    /// received.
    pub fn poll(&mut self, now: Nanos) -> Result<usize, PortError> {
        self.now = now;
        self.polls = self.polls.wrapping_add(1);
        self.follow_table(now);
        let mut rx = self.rx.take().unwrap_or_default();
        let result = self.receive(now, &mut rx);
        self.rx = Some(rx);
        self.offer_and_sample(now);
        match result {
            Ok(received) => {
                self.transmit(now)?;
                Ok(received)
            }
            Err(e) => {
                // The error of the failed port is the one reported.
                let _ = self.transmit(now);
                Err(e)
            }
        }
    }

    /// Once per poll, before its last transmit: offers each port's flow estimate to its QoS
    /// engine and samples the queue lengths every [`QLEN_SAMPLE_EVERY`] polls.
    fn offer_and_sample(&mut self, now: Nanos) {
        let sample = self.polls % QLEN_SAMPLE_EVERY == 0;
        for slot in &mut self.slots {
            if let Some(z) = &slot.zombie {
                slot.qos.offer_zombie_estimate(now, z);
            }
            if sample {
                for (c, h) in slot.qlen_hist.iter_mut().enumerate() {
                    h.record(slot.qos.queue_len(c).map_or(0, |(packets, _)| packets));
                }
            }
        }
    }

    /// Receives up to the work budget from every port through `rx`, processing each burst.
    fn receive(&mut self, now: Nanos, rx: &mut Batch) -> Result<usize, PortError> {
        let mut received = 0;
        for p in 0..self.slots.len() {
            let mut left = self.budget;
            while left > 0 {
                let result = self.slots[p].port.recv(now, &mut self.pool, rx);
                // What the port delivered before an error is processed like any burst, so
                // the counters stay balanced and no buffer is stranded in the batch.
                let n = rx.len();
                received += n;
                left = left.saturating_sub(n);
                // The totals' receive counts for the burst at once (a register sum, not a
                // read-modify-write of the counters per packet); flow groups per packet.
                let mut bytes = 0;
                for buf in rx.drain() {
                    bytes += buf.len() as u64;
                    self.process(now, buf);
                }
                self.totals.received += n as u64;
                self.totals.received_bytes += bytes;
                result?;
                if n == 0 {
                    break;
                }
                if left > 0 {
                    // Another burst may follow: send what this one released first (what left
                    // its queue on arrival, and what the shapers release).
                    self.transmit(now)?;
                }
            }
        }
        Ok(received)
    }

    /// Forwarding (`crate::forward`), classification, metering and admission of one received
    /// packet.
    #[inline]
    fn process(&mut self, now: Nanos, buf: PacketBuf) {
        let len = buf.len() as u32;
        count_group(&mut self.groups, buf.tag, |c| {
            c.received += 1;
            c.received_bytes += len as u64;
        });
        self.forward_and_admit(now, buf);
    }

    /// [`Dataplane::process`] after the receive count: also the path of a packet released
    /// from the neighbour wait.
    #[inline]
    fn forward_and_admit(&mut self, now: Nanos, mut buf: PacketBuf) {
        let len = buf.len() as u32;
        // The parsed headers stay in this one place from the parse to the last rewrite.
        let mut parsed = None;
        let meta = match self.forwarder.forward_in_place(&mut buf, &mut parsed) {
            Ok(meta) => meta,
            Err(DropCause::NoNeighbour) => {
                let dst = parsed.as_ref().map(|i| i.dst);
                return self.hold_for_neighbour(now, buf, dst);
            }
            Err(cause) => return self.count_drop(buf, cause),
        };
        let mut info = parsed.as_mut();
        let slot = &mut self.slots[buf.out_port as usize];
        // The port's list, observed once; its SRED / ZL-RED policies decide on this.
        let observed = slot
            .zombie
            .as_ref()
            .map(|z| z.observe(meta.flow, now, &mut self.rng));
        let class = slot
            .qos
            .classify(now, info.as_deref().map(|i| i.dscp()), len);
        if let (Some(d), Some(i)) = (class.remark, info.as_deref_mut()) {
            // Cannot fail: `i` was parsed from these bytes and only rewritten in place since.
            let _ = zl_wire::set_dscp(buf.as_mut_slice(), i, d);
        }
        let (tag, out_port) = (buf.tag, buf.out_port as usize);
        let mut marked = false;
        let result = slot.qos.enqueue_classified_observed(
            now,
            &mut self.rng,
            &class,
            meta,
            buf,
            |b| {
                if let Some(i) = info {
                    marked = matches!(
                        zl_wire::mark(b.as_mut_slice(), i),
                        Ok(zl_wire::MarkOutcome::Ce
                            | zl_wire::MarkOutcome::CcExtEcn
                            | zl_wire::MarkOutcome::AlreadyMarked)
                    );
                }
            },
            observed.as_ref(),
        );
        match result {
            Ok(_) => {
                if marked {
                    count_fate(&mut self.totals, &mut self.groups, tag, |c| c.marked += 1);
                }
                self.cut_through(now, out_port, class.class);
            }
            Err(dropped) => {
                let cause = DropCause::of_verdict(dropped.verdict).unwrap_or(DropCause::Tail);
                self.count_drop(dropped.item, cause);
            }
        }
    }

    /// A packet just admitted to an otherwise empty port leaves its queue at once when the
    /// shaper lets it (`QosEngine::release_if_alone`), into the port's pending batch, as it
    /// would on a link that keeps up: the poll loop takes a whole receive burst before it
    /// transmits, and without this a queue whose link keeps up would hold up to a burst (32)
    /// that an AQM reads as congestion (ZL-RED's `th_min` is 5). The pending batch is sent
    /// before anything dequeued later. The packet is counted as forwarded here, as the
    /// transmit step counts what it dequeues.
    #[inline]
    fn cut_through(&mut self, now: Nanos, port: usize, class: usize) {
        let slot = &mut self.slots[port];
        let pending = &mut self.pending[port];
        if pending.is_full() {
            return;
        }
        let groups = &mut self.groups;
        let mut bytes = 0;
        let burst = slot.qos.release_if_alone(now, class, |b| {
            bytes += departs(groups, &b);
            // Cannot fail: the batch has room (checked above).
            let _ = pending.push(b);
        });
        self.totals.forwarded += burst.sent as u64;
        self.totals.forwarded_bytes += bytes;
        if burst.held_until.is_some() {
            slot.held_until = burst.held_until;
        }
    }

    /// Lets every egress port send what its scheduler and shaper release, a burst at a time,
    /// after what left its queue on arrival (`cut_through`).
    fn transmit(&mut self, now: Nanos) -> Result<(), PortError> {
        for p in 0..self.slots.len() {
            let slot = &mut self.slots[p];
            slot.held_until = None;
            // `self.tx` is empty here; the pending batch goes out first.
            std::mem::swap(&mut self.tx, &mut self.pending[p]);
            loop {
                let (totals, groups, tx, pool) = (
                    &mut self.totals,
                    &mut self.groups,
                    &mut self.tx,
                    &mut self.pool,
                );
                let mut bytes = 0;
                let burst = slot.qos.dequeue_burst(now, tx.room(), |b| {
                    bytes += departs(groups, &b);
                    // Cannot fail: the burst is at most the batch's room.
                    if let Err(b) = tx.push(b) {
                        pool.free(b);
                    }
                });
                totals.forwarded += burst.sent as u64;
                totals.forwarded_bytes += bytes;
                if burst.held_until.is_some() {
                    slot.held_until = burst.held_until;
                }
                if self.tx.is_empty() {
                    break;
                }
                let full = self.tx.is_full();
                if let Err(e) = slot.port.send(now, &mut self.tx, &mut self.pool) {
                    // A failing port may leave packets in the batch; their buffers go back
                    // (they were counted as forwarded, the port counts its own errors).
                    for b in self.tx.drain() {
                        self.pool.free(b);
                    }
                    return Err(e);
                }
                if !full {
                    break;
                }
            }
        }
        Ok(())
    }

    /// The earliest time something can happen after a poll at `now`: a virtual port's next
    /// packet, or a shaper releasing a held packet. `Some(now)` when a queue could send at
    /// once; `None` when every port is exhausted and every queue is empty.
    pub fn next_event(&self, now: Nanos) -> Option<Nanos> {
        let mut next: Option<Nanos> = None;
        let mut consider = |t: Nanos| next = Some(next.map_or(t, |n: Nanos| n.min(t)));
        for s in &self.slots {
            match s.port.readiness() {
                Readiness::Live => consider(now),
                Readiness::NextPacketAt(t) => consider(t.max(now)),
                Readiness::Exhausted => {}
            }
            if !s.qos.is_empty() {
                consider(s.held_until.unwrap_or(now).max(now));
            }
        }
        next
    }

    /// Drives the loop in virtual time from 0: sources stop offering at `end`, queues may
    /// drain until `end + drain`; then what is still queued is counted as `shutdown`. `stop`
    /// is checked every poll; `observer` is called every `period` of virtual time.
    pub fn run_virtual(
        &mut self,
        end: Nanos,
        drain: Nanos,
        stop: &AtomicBool,
        period: Nanos,
        observer: &mut dyn Observer,
    ) -> Result<StopReason, PortError> {
        // A live port never becomes "not ready": virtual time could not advance past it.
        if let Some(s) = self
            .slots
            .iter()
            .find(|s| s.port.readiness() == Readiness::Live)
        {
            return Err(PortError::BadInput {
                port: s.port.name().to_owned(),
                detail: "a live port cannot run in virtual time; use run_live".into(),
            });
        }
        let deadline = end + drain;
        let mut now = Nanos::ZERO;
        let mut next_report = period;
        let reason = loop {
            // Relaxed: the flag only asks the loop to stop; no data is published with it.
            if stop.load(Ordering::Relaxed) {
                break Ok(StopReason::Interrupted);
            }
            if let Err(e) = self.poll(now) {
                break Err(e);
            }
            if now >= next_report {
                observer.progress(now, self);
                next_report = now + period;
            }
            match self.next_event(now) {
                None => break Ok(StopReason::Finished),
                Some(t) if t > deadline => break Ok(StopReason::DrainTimeout),
                Some(t) => now = t,
            }
        };
        self.finish(reason, observer)
    }

    /// Ends a run: counts what is queued as `shutdown` and flushes the ports even when a port
    /// failed (the counters stay balanced for the final report); the first error wins.
    fn finish(
        &mut self,
        reason: Result<StopReason, PortError>,
        observer: &mut dyn Observer,
    ) -> Result<StopReason, PortError> {
        let shut = self.shutdown();
        observer.progress(self.now, self);
        let reason = reason?;
        shut?;
        Ok(reason)
    }

    /// True when a port must be driven by a real clock ([`Readiness::Live`]).
    pub fn has_live_ports(&self) -> bool {
        self.slots
            .iter()
            .any(|s| s.port.readiness() == Readiness::Live)
    }

    /// Drives the loop on `clock` (the monotonic clock for NIC ports; a test may pass a fake
    /// one) until `stop` is set or every port is exhausted with every queue empty. `observer`
    /// is called every `period` of that clock. What is queued at the end is counted as
    /// `shutdown`.
    pub fn run_live(
        &mut self,
        stop: &AtomicBool,
        clock: &mut dyn FnMut() -> Nanos,
        period: Nanos,
        observer: &mut dyn Observer,
    ) -> Result<StopReason, PortError> {
        let mut next_report = clock() + period;
        let reason = loop {
            // Relaxed: the flag only asks the loop to stop; no data is published with it.
            if stop.load(Ordering::Relaxed) {
                break Ok(StopReason::Interrupted);
            }
            let now = clock().max(self.now);
            if let Err(e) = self.poll(now) {
                break Err(e);
            }
            if now >= next_report {
                observer.progress(now, self);
                next_report = now + period;
            }
            if self.next_event(now).is_none() {
                break Ok(StopReason::Finished);
            }
        };
        self.finish(reason, observer)
    }

    /// Stops: counts every packet still queued as a `shutdown` drop, recycles its buffer,
    /// and flushes every port (returning the first flush error).
    pub fn shutdown(&mut self) -> Result<(), PortError> {
        let mut first = Ok(());
        // What left its queue on arrival was counted as forwarded: it is sent (a poll that
        // failed on another port's send may have left it here).
        for (slot, pending) in self.slots.iter_mut().zip(&mut self.pending) {
            if pending.is_empty() {
                continue;
            }
            if let Err(e) = slot.port.send(self.now, pending, &mut self.pool) {
                for b in pending.drain() {
                    self.pool.free(b);
                }
                if first.is_ok() {
                    first = Err(e);
                }
            }
        }
        // Packets still waiting for a next hop's MAC are not sent.
        let mut waiting = std::mem::take(&mut self.expired);
        self.neighbour_wait.expire(Nanos(u64::MAX), &mut waiting);
        for buf in waiting.drain(..) {
            self.count_drop(buf, DropCause::Shutdown);
        }
        self.expired = waiting;
        for p in 0..self.slots.len() {
            // Dequeue in (virtual) time steps the shaper allows; the packets are counted, not
            // sent. They also appear in their class's `dequeued` count.
            let mut t = self.now;
            loop {
                match self.slots[p].qos.dequeue(t) {
                    Dequeue::Packet(d) => self.count_drop(d.item, DropCause::Shutdown),
                    Dequeue::Hold { until } => t = until.max(t + Nanos(1)),
                    Dequeue::Empty => break,
                }
            }
        }
        for s in &mut self.slots {
            if let Err(e) = s.port.flush() {
                if first.is_ok() {
                    first = Err(e);
                }
            }
        }
        first
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::{build_with_ports, BoxedPort, BuildError};
    use crate::config::RouterConfig;
    use crate::priority::PriorityParams;
    use crate::route::{NextHop, RouteTable};
    use rand::SeedableRng;
    use zl_port::MemoryPort;

    /// A 64-byte IPv4/UDP frame from 172.16.x.y (flow `i`), DSCP `dscp`.
    fn frame(i: u16, dscp: u8) -> Vec<u8> {
        let mut f = vec![0u8; 64];
        f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 0x10]);
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        let ip = &mut f[14..34];
        ip[0] = 0x45;
        ip[1] = dscp << 2;
        ip[2..4].copy_from_slice(&50u16.to_be_bytes());
        ip[8] = 64;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&[172, 16, (i >> 8) as u8, i as u8]);
        ip[16..20].copy_from_slice(&[198, 18, 0, 1]);
        let c = zl_wire::checksum::checksum(ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        f[34..36].copy_from_slice(&1024u16.to_be_bytes());
        f[36..38].copy_from_slice(&9u16.to_be_bytes());
        f[38..40].copy_from_slice(&30u16.to_be_bytes());
        f
    }

    const ROUTER: &str = r#"
[[ports]]
name = "rx"
kind = "external"
mac = "02:00:00:00:00:01"

[[ports]]
name = "tx"
kind = "sink"
mac = "02:00:00:00:00:02"

[[routes]]
prefix = "0.0.0.0/0"
port = "tx"
next_hop_mac = "02:00:00:00:00:fe"

[qos]
link_rate_bps = 1_000_000_000

[[qos.classes]]
name = "ef"
strict_rank = 0
max_packets = 64

[[qos.classes]]
name = "be"
weight = 1
max_packets = 1000
aqm = { kind = "zl-red", a = 10, zombie = { m = 500, p_swap = 0.25 } }
"#;

    /// Builds `metrics` + [`ROUTER`] with `frames` offered on port 0.
    fn build(metrics: &str, frames: Vec<Vec<u8>>) -> Result<Dataplane, BuildError> {
        let cfg = RouterConfig::from_toml(&format!("{metrics}\n{ROUTER}"))?;
        let n = frames.len() as u64;
        build_with_ports(&cfg, std::path::Path::new("."), &mut |i, _| {
            Ok((i == 0)
                .then(|| Box::new(MemoryPort::cycling("rx", 0, frames.clone(), n)) as BoxedPort))
        })
    }

    /// With the flow estimate on, the port's list is the ZL-RED policy's list (its `zombie`
    /// settings, M = 500) and every packet offered to the port, EF included, enters it once.
    #[test]
    fn port_list_is_the_policies_list_observed_once_per_packet() {
        let frames: Vec<Vec<u8>> = (0..100)
            .map(|i| frame(i, [46, 0, 0, 0][i as usize % 4]))
            .collect();
        let mut dp = build("[metrics]\nflow_estimate = true\n", frames.clone()).unwrap();
        while dp.totals().received < 100 {
            dp.poll(Nanos::from_micros(dp.polls + 1)).unwrap();
        }
        let list = dp.slots()[1].zombie.as_ref().expect("estimated");
        assert_eq!(list.config().m(), 500, "the ZL-RED class's settings");
        assert_eq!(Arc::strong_count(list), 2, "the slot and the ZL-RED policy");
        // 100 flows into a list of 500 that starts empty: each arrival adds exactly one.
        assert_eq!(list.total_occurrence(), 100, "one observation per packet");
        assert!(dp.slots()[0].zombie.is_some(), "every port is estimated");
        // Without the estimate no port list exists; the policy keeps its own.
        let dp = build("", frames).unwrap();
        assert!(dp.slots().iter().all(|s| s.zombie.is_none()));
    }

    /// `metrics.flow_estimate_zombie` that differs from the policy's `zombie` is refused, the
    /// message naming both keys; equal settings are accepted.
    #[test]
    fn estimate_settings_must_match_the_policies() {
        let metrics = |m: u32| {
            format!(
                "[metrics]\nflow_estimate = true\n\
                 flow_estimate_zombie = {{ m = {m}, p_swap = 0.25 }}\n"
            )
        };
        let err = build(&metrics(1000), vec![])
            .err()
            .expect("refused")
            .to_string();
        assert!(err.contains("metrics.flow_estimate_zombie"), "{err}");
        assert!(err.contains("qos.classes[1].aqm.zombie"), "{err}");
        let dp = build(&metrics(500), vec![]).unwrap();
        assert_eq!(dp.slots()[1].zombie.as_ref().unwrap().config().m(), 500);
    }

    /// 256 packets per poll (a work budget of 8 bursts of 32) into the router with `extra`
    /// TOML before the ports (e.g. a shaper), for `polls` polls one microsecond apart.
    fn bursts_through(extra: &str, polls: u64) -> Dataplane {
        let frames: Vec<Vec<u8>> = (0..64).map(|i| frame(i, 0)).collect();
        let text = format!("[run]\nwork_budget = 256\n{ROUTER}{extra}");
        let cfg = RouterConfig::from_toml(&text).unwrap();
        let mut dp = build_with_ports(&cfg, std::path::Path::new("."), &mut |i, _| {
            Ok((i == 0).then(|| {
                Box::new(MemoryPort::cycling("rx", 0, frames.clone(), 256 * polls)) as BoxedPort
            }))
        })
        .unwrap();
        for t in 1..=polls {
            assert_eq!(dp.poll(Nanos::from_micros(t)).unwrap(), 256);
        }
        assert_eq!(dp.totals().received, 256 * polls);
        dp
    }

    /// On a link that keeps up (no shaper) nothing waits: each packet admitted to the empty
    /// port leaves at once (`cut_through`), so ZL-RED (`th_min` 5) sees an empty queue and
    /// drops nothing, although every poll takes 256 packets in bursts of 32 before it
    /// transmits (without the cut-through: 224 of the 4096 packets dropped early, 5.5 %).
    #[test]
    fn a_link_that_keeps_up_queues_and_drops_nothing() {
        let polls = 16u64;
        let dp = bursts_through("", polls);
        let t = dp.totals();
        assert_eq!((t.forwarded, t.dropped()), (256 * polls, 0), "{t:?}");
        let be = &dp.slots()[1].qlen_hist[1];
        assert_eq!(be.count(), polls / QLEN_SAMPLE_EVERY);
        assert!(be.buckets[1..].iter().all(|&n| n == 0), "{be:?}");
        let c = dp.port_counters();
        assert_eq!(c[1].1.tx_packets, 256 * polls, "{c:?}");
    }

    /// With the shaper as the bottleneck (1 Gbit/s against ~130 Gbit/s offered) packets wait
    /// in their class as before, and ZL-RED drops early there: the cut-through only applies to
    /// a port with nothing queued whose shaper lets the packet go at once.
    #[test]
    fn a_shaped_link_still_queues_and_drops_early() {
        let dp = bursts_through("\n[qos.shaper]\nrate_bps = 1_000_000_000\n", 16);
        let t = dp.totals();
        assert!(t.drops_of(DropCause::Early) > 0, "{t:?}");
        assert!(t.forwarded < 256 * 16 / 10, "{t:?}");
        let be = &dp.slots()[1].qlen_hist[1];
        assert!(be.buckets[5..].iter().sum::<u64>() > 0, "{be:?}");
    }

    /// `Dataplane::new` refuses a route or bridge peer to a port index it does not have.
    #[test]
    fn new_refuses_forwarding_to_a_missing_port() {
        let params: QosParams =
            toml::from_str("link_rate_bps = 1_000_000\n[[classes]]\nname = 'be'\nweight = 1\n")
                .unwrap();
        let slots = || {
            (0..2)
                .map(|i| PortSlot {
                    port: Box::new(MemoryPort::cycling("p", i, vec![], 0)),
                    mac: MacAddr([2, 0, 0, 0, 0, i as u8]),
                    qos: QosEngine::new(&params).unwrap(),
                    held_until: None,
                    qlen_hist: vec![QueueLengthHistogram::default()],
                    zombie: None,
                })
                .collect::<Vec<_>>()
        };
        let new = |forwarding| {
            Dataplane::new(
                slots(),
                BufPool::new(4, 2048),
                forwarding,
                ParseConfig::default(),
                PriorityParams::default().build().unwrap(),
                Xoshiro256PlusPlus::seed_from_u64(1),
                32,
                Vec::new(),
            )
        };
        let table = |port| {
            let mut t = RouteTable::default();
            let nh = NextHop::new(port, MacAddr([2, 0, 0, 0, 0, 0xfe]));
            t.add("10.0.0.0/8".parse().unwrap(), nh).unwrap();
            t.add("0.0.0.0/0".parse().unwrap(), NextHop { port: 1, ..nh })
                .unwrap();
            t
        };
        assert!(new(Forwarding::Router(table(1))).is_ok());
        let err = new(Forwarding::Router(table(2))).err().unwrap();
        assert_eq!(
            err,
            UnknownPort {
                what: "a route",
                port: 2,
                ports: 2
            }
        );
        assert!(new(Forwarding::Bridge(vec![Some(1), Some(0)])).is_ok());
        let err = new(Forwarding::Bridge(vec![Some(1), Some(7)]))
            .err()
            .unwrap();
        assert_eq!((err.what, err.port), ("a bridge peer", 7));
        assert!(err.to_string().contains("port index 7"), "{err}");
    }
}
