//! The poll-mode loop: rx burst -> parse -> route or bridge -> classify -> meter -> AQM
//! admission -> per-class queue -> schedule -> shape -> tx burst.
//!
//! One [`Dataplane`] runs on one thread and owns its ports, its buffer pool and one
//! `zl_qos::QosEngine` per egress port. [`Dataplane::poll`] does one round at a given `now`:
//! it receives bursts from each port until `work_budget` packets (checked between bursts, so
//! at most `work_budget + 31`), pushes each through forwarding and its egress port's QoS
//! engine, then lets every egress port send what its scheduler and shaper release. The driver chooses the clock: [`Dataplane::run_virtual`] jumps virtual time from
//! event to event (the next packet of a pcap or generator port, or the time a shaper releases
//! a held packet), so a run is deterministic with its seed; a live driver passes the
//! monotonic clock.
//!
//! Nothing here allocates per packet: buffers come from the pool, batches and queues are
//! reserved at build time, counters are fixed arrays.

use std::sync::atomic::{AtomicBool, Ordering};

use rand_xoshiro::Xoshiro256PlusPlus;
use zl_core::Nanos;
use zl_port::{Batch, BufPool, PacketBuf, Port, PortCounters, PortError, Readiness};
use zl_qos::{Dequeue, QosEngine};
use zl_wire::{MacAddr, ParseConfig};

use crate::config::Forwarding;
use crate::forward::{Forwarder, Ingress};
use crate::priority::PriorityMap;
use crate::stats::{DropCause, FateCounters, GroupStats};

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
    /// The port's own Zombie List when its active flows are estimated (`metrics.flow_estimate`
    /// or a `sqrt-n-live` buffer rule). decided: a list separate from any ZL-RED / SRED
    /// policy's, which the QoS engine keeps internal; it observes every packet offered to the
    /// port's egress, before admission, as SRED's list does.
    pub zombie: Option<zl_zombie::ZombieList>,
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
    if let Some(g) = (tag as usize)
        .checked_sub(1)
        .and_then(|i| groups.get_mut(i))
    {
        count(&mut g.fate);
    }
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
    totals: FateCounters,
    groups: Vec<GroupStats>,
    now: Nanos,
    polls: u64,
}

impl Dataplane {
    /// Assembles a data plane from built parts (see `crate::build` for the config path).
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
    ) -> Self {
        let macs = slots.iter().map(|s| s.mac).collect();
        Dataplane {
            forwarder: Forwarder::new(forwarding, parse, priority, macs),
            slots,
            pool,
            rng,
            budget: work_budget.max(1) as usize,
            rx: Some(Batch::new()),
            tx: Batch::new(),
            totals: FateCounters::default(),
            groups,
            now: Nanos::ZERO,
            polls: 0,
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
    /// Packets waiting in every egress queue.
    pub fn queued(&self) -> u64 {
        self.slots.iter().map(|s| s.qos.len() as u64).sum()
    }
    /// Buffers handed out by the pool right now (queued packets plus none in flight between
    /// polls): the memory bound the configured buffers impose.
    pub fn buffers_in_use(&self) -> usize {
        self.pool.in_use()
    }
    pub fn pool_total(&self) -> usize {
        self.pool.total()
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

    /// One poll at `now`: receive up to the work budget per port, forward and enqueue, then
    /// transmit what the schedulers and shapers release. Returns the packets received.
    pub fn poll(&mut self, now: Nanos) -> Result<usize, PortError> {
        self.now = now;
        self.polls = self.polls.wrapping_add(1);
        let mut rx = self.rx.take().unwrap_or_default();
        let result = self.receive(now, &mut rx);
        self.rx = Some(rx);
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
                for buf in rx.drain() {
                    self.process(now, buf);
                }
                result?;
                if n == 0 {
                    break;
                }
            }
        }
        Ok(received)
    }

    /// Forwarding (`crate::forward`), classification, metering and admission of one received
    /// packet.
    #[inline]
    fn process(&mut self, now: Nanos, mut buf: PacketBuf) {
        let len = buf.len() as u32;
        count_fate(&mut self.totals, &mut self.groups, buf.tag, |c| {
            c.received += 1;
            c.received_bytes += len as u64;
        });
        let Ingress { mut info, meta } = match self.forwarder.forward(&mut buf) {
            Ok(ingress) => ingress,
            Err(cause) => return self.count_drop(buf, cause),
        };
        let mut info = info.as_mut();
        let slot = &mut self.slots[buf.out_port as usize];
        if let Some(z) = &slot.zombie {
            z.observe(meta.flow, now, &mut self.rng);
        }
        let class = slot
            .qos
            .classify(now, info.as_deref().map(|i| i.dscp()), len);
        if let (Some(d), Some(i)) = (class.remark, info.as_deref_mut()) {
            // Cannot fail: `i` was parsed from these bytes and only rewritten in place since.
            let _ = zl_wire::set_dscp(buf.as_mut_slice(), i, d);
        }
        let tag = buf.tag;
        let mut marked = false;
        let result = slot
            .qos
            .enqueue_classified(now, &mut self.rng, &class, meta, buf, |b| {
                if let Some(i) = info {
                    marked = matches!(
                        zl_wire::mark(b.as_mut_slice(), i),
                        Ok(zl_wire::MarkOutcome::Ce
                            | zl_wire::MarkOutcome::CcExtEcn
                            | zl_wire::MarkOutcome::AlreadyMarked)
                    );
                }
            });
        match result {
            Ok(_) => {
                if marked {
                    count_fate(&mut self.totals, &mut self.groups, tag, |c| c.marked += 1);
                }
            }
            Err(dropped) => {
                let cause = DropCause::of_verdict(dropped.verdict).unwrap_or(DropCause::Tail);
                self.count_drop(dropped.item, cause);
            }
        }
    }

    /// Lets every egress port send what its scheduler and shaper release, a burst at a time.
    fn transmit(&mut self, now: Nanos) -> Result<(), PortError> {
        for p in 0..self.slots.len() {
            let slot = &mut self.slots[p];
            slot.held_until = None;
            if let Some(z) = &slot.zombie {
                slot.qos.offer_zombie_estimate(now, z);
            }
            if self.polls % QLEN_SAMPLE_EVERY == 0 {
                for (c, h) in slot.qlen_hist.iter_mut().enumerate() {
                    h.record(slot.qos.queue_len(c).map_or(0, |(packets, _)| packets));
                }
            }
            loop {
                while !self.tx.is_full() {
                    match slot.qos.dequeue(now) {
                        Dequeue::Packet(d) => {
                            let b = d.item;
                            let len = b.len() as u64;
                            count_fate(&mut self.totals, &mut self.groups, b.tag, |c| {
                                c.forwarded += 1;
                                c.forwarded_bytes += len;
                            });
                            // Cannot fail: the loop checks for room first.
                            if let Err(b) = self.tx.push(b) {
                                self.pool.free(b);
                            }
                        }
                        Dequeue::Hold { until } => {
                            slot.held_until = Some(until);
                            break;
                        }
                        Dequeue::Empty => break,
                    }
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
        let mut first = Ok(());
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
