//! The single-thread poll-mode loop: rx burst -> parse -> route or bridge -> [Zombie List
//! observation] -> classify -> meter -> AQM admission -> per-class queue -> schedule -> shape
//! -> tx burst.
//!
//! It is the one-worker case of the threaded router ([`crate::mt`]): the same receive stages
//! over each burst ([`crate::stages`]: forward, then observe in the egress ports' lists) and
//! the same egress stage ([`Egress`]: admit / transmit / tick / shutdown), called on one
//! thread with no ring between them. One [`Dataplane`] owns its ports, its buffer pool and
//! one [`Egress`] per port. [`Dataplane::poll`] does one round at a given `now`: it receives
//! bursts from each port until `work_budget` packets (checked between bursts, so at most
//! `work_budget + 31`), takes each burst stage by stage through forwarding, its egress ports'
//! lists and their admission, and after each burst lets every egress port send what its
//! scheduler and shaper release. A packet admitted to a port with nothing queued whose shaper
//! lets it go leaves at once (the cut-through of [`Egress::admit`]), so a queue whose link
//! keeps up stays empty instead of holding the burst, which an AQM would read as congestion.
//! The driver chooses the clock: [`Dataplane::run_virtual`] jumps virtual time from event to
//! event (the next packet of a pcap or generator port, or the time a shaper releases a held
//! packet), so a run is deterministic with its seed; a live driver passes the monotonic clock.
//!
//! Between two polls (`Dataplane::poll` returns, the driver calls its observer and picks the
//! next time) is the one place where the loop may take in changes from outside.
//!
//! Nothing here allocates per packet: buffers come from the pool, batches and queues are
//! reserved at build time, counters are fixed arrays.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use zl_core::Nanos;
use zl_port::{Batch, BufPool, PacketBuf, PortCounters, PortError, Readiness, BATCH_CAPACITY};
use zl_qos::QosEngine;
use zl_zombie::ZombieList;

use crate::capture::{CaptureStats, CaptureTap, CaptureWriter};
use crate::egress::Link;
use crate::engine::{
    apply_egress, flush_all, receive_port, stream_seed, BoxedPort, Intake, ADMIT_STREAM,
    OBSERVE_STREAM,
};
pub use crate::engine::{PortSlot, StopReason, UnknownPort};
use crate::fates::Fates;
use crate::flows::FlowTable;
use crate::forward::Forwarder;
use crate::icmp::{IcmpCounters, IcmpSender};
use crate::neighbour::{NeighbourStage, DEFAULT_UNRES_QLEN};
use crate::reject::reject;
use crate::reload::{Applied, LiveUpdate, ReloadSlot};
use crate::route::RouteTable;
use crate::stages::{forward_stage, observe_stage, Lanes};
use crate::stats::{DropCause, FateCounters, GroupStats};
use crate::view::{FibSnapshot, Observer, RouterView};

pub use crate::egress::{QueueLengthHistogram, QLEN_BUCKETS, QLEN_SAMPLE_EVERY};

/// The single-thread loop's link to a port: its send, and the loop's own pool.
struct PoolLink<'a> {
    port: &'a mut BoxedPort,
    pool: &'a mut BufPool,
}

impl Link for PoolLink<'_> {
    #[inline]
    fn send(&mut self, now: Nanos, batch: &mut Batch) -> Result<(), PortError> {
        self.port.send(now, batch, self.pool).map(|_| ())
    }
    #[inline]
    fn recycle(&mut self, buf: PacketBuf) {
        self.pool.free(buf);
    }
}

/// The single loop's receive step for one port: its bursts through the receive stages,
/// and after each what the egress ports release ([`Dataplane::transmit`]: what left its queue
/// on arrival, and what the shapers release).
struct PortIntake<'a> {
    dp: &'a mut Dataplane,
    port: usize,
}

impl Intake for PortIntake<'_> {
    #[inline(always)]
    fn recv(&mut self, now: Nanos, batch: &mut Batch) -> Result<(), PortError> {
        let dp = &mut *self.dp;
        dp.slots[self.port]
            .port
            .recv(now, &mut dp.pool, batch)
            .map(|_| ())
    }
    #[inline(always)]
    fn arrived(&mut self, batch: &Batch) {
        // The totals at once (a register sum, not a read-modify-write of the counters per
        // packet), the flow groups per packet. Then each packet goes to the receive stage
        // straight from the batch (counted in the loop, it would be copied through the stack
        // twice on its way into the call).
        self.dp.fates.received_burst(batch);
    }
    #[inline(always)]
    fn forward(&mut self, now: Nanos, batch: &mut Batch) {
        self.dp.take_through_stages(now, batch);
    }
    #[inline(always)]
    fn between(&mut self, now: Nanos) -> Result<(), PortError> {
        self.dp.transmit(now)
    }
}

/// The forwarding engine of one thread.
pub struct Dataplane {
    pub(crate) slots: Vec<PortSlot>,
    pool: BufPool,
    forwarder: Forwarder,
    /// The admissions' draws (`ADMIT_STREAM`) and the lists' observations'
    /// (`OBSERVE_STREAM`), apart so that the stages may take a burst in any grouping
    /// (`crate::stages`).
    admit_rng: Xoshiro256PlusPlus,
    observe_rng: Xoshiro256PlusPlus,
    /// What the stages know of the burst's packets.
    lanes: Box<Lanes>,
    /// The packets each stage takes at once ([`Dataplane::set_stage_width`]).
    width: usize,
    /// A stage width below the receive burst's: the burst's packets, `width` at a time.
    part: Option<Batch>,
    budget: usize,
    /// The receive batch; taken out for the length of a poll so `forward_burst` can borrow `self`
    /// (`Option` so that taking it allocates no stand-in batch).
    rx: Option<Batch>,
    fates: Fates,
    now: Nanos,
    polls: u64,
    /// Kernel routing: packets waiting for their next hop's MAC (bounded per next hop).
    neighbour: NeighbourStage,
    /// Scratch for released / expired waiting packets (no allocation per poll once grown).
    released: Vec<PacketBuf>,
    expired: Vec<PacketBuf>,
    /// The drop capture's writer thread (`[capture]`), closed at the end of a run.
    capture: Option<CaptureWriter>,
    /// The ICMP errors about dropped packets: the rate limit's state (`crate::icmp`).
    icmp: IcmpSender,
    /// Where live reloads arrive (`crate::reload`), looked at once per poll.
    reload: Option<Arc<ReloadSlot>>,
}

impl Dataplane {
    /// Assembles a data plane from built parts (see `crate::build` for the config path), its
    /// random streams seeded from `seed`. Forwarding that names a port index `slots` does not
    /// have (a route's port, a bridge peer) is refused.
    pub fn new(
        slots: Vec<PortSlot>,
        pool: BufPool,
        forwarder: Forwarder,
        seed: u64,
        work_budget: u32,
        groups: Vec<GroupStats>,
    ) -> Result<Self, UnknownPort> {
        UnknownPort::check(forwarder.forwarding(), slots.len())?;
        let forwarder_icmp = forwarder.icmp_params();
        Ok(Dataplane {
            forwarder,
            slots,
            pool,
            admit_rng: Xoshiro256PlusPlus::seed_from_u64(stream_seed(seed, ADMIT_STREAM)),
            observe_rng: Xoshiro256PlusPlus::seed_from_u64(stream_seed(seed, OBSERVE_STREAM)),
            lanes: Box::default(),
            width: BATCH_CAPACITY,
            part: None,
            budget: work_budget.max(1) as usize,
            rx: Some(Batch::new()),
            fates: Fates::new(groups),
            now: Nanos::ZERO,
            polls: 0,
            neighbour: NeighbourStage::new(DEFAULT_UNRES_QLEN),
            released: Vec::new(),
            expired: Vec::new(),
            capture: None,
            icmp: IcmpSender::new(forwarder_icmp, 1),
            reload: None,
        })
    }

    /// Where live reloads reach this loop (`crate::reload::Reloader`): made on the first
    /// call, looked at once per poll from then on.
    pub fn reload_slot(&mut self) -> Arc<ReloadSlot> {
        self.reload.get_or_insert_with(ReloadSlot::new).clone()
    }

    /// Each port's Zombie List as the egress stages hold them now (for a `Reloader`).
    pub fn zombie_lists(&self) -> Vec<Option<Arc<zl_zombie::ZombieList>>> {
        self.slots.iter().map(|s| s.egress.zombie.clone()).collect()
    }

    /// Between polls: installs a posted reload, if any, and answers it.
    #[inline]
    fn take_reload(&mut self) {
        let Some((update, answer)) = self.reload.as_ref().and_then(|r| r.take()) else {
            return;
        };
        let applied = self.apply_live(update);
        // The reloader may have given up waiting: then nobody hears the answer.
        let _ = answer.send(applied);
    }

    /// Installs a live update: every port's new egress, checked first so that a refused one
    /// changes nothing, then the priority map.
    fn apply_live(&mut self, u: LiveUpdate) -> Applied {
        apply_egress(&mut self.slots, u.egress, |s| &mut s.egress)?;
        if let Some(p) = u.priority {
            self.forwarder.set_priority(p);
        }
        Ok(())
    }

    /// The drop capture's counters, when capturing.
    pub fn capture_stats(&self) -> Option<CaptureStats> {
        self.capture.as_ref().map(CaptureWriter::stats)
    }

    /// Captures drops through `tap` (counted where [`Fates`] counts them), written by
    /// `writer`'s thread.
    pub fn set_capture(&mut self, tap: CaptureTap, writer: CaptureWriter) {
        self.fates.capture = Some(tap);
        self.capture = Some(writer);
    }

    /// Kernel routing (`[routing] source = "kernel"`): follows the kernel's tables from now
    /// on (`Forwarder::follow_kernel`; `ports` maps each kernel interface index to its port
    /// index); `unres_qlen` bounds the packets held per unresolved next hop.
    pub fn follow_kernel(
        &mut self,
        ports: Vec<(u32, u16)>,
        unres_qlen: usize,
    ) -> std::io::Result<()> {
        self.forwarder.follow_kernel(ports)?;
        self.neighbour = NeighbourStage::new(unres_qlen);
        Ok(())
    }

    /// Kernel routing, once per poll: the newest table, the waiting packets it resolves
    /// (routed again now, in bursts through the receive batch, empty between polls) and those
    /// that waited too long (`no_neighbour`, Host Unreachable).
    #[inline]
    fn follow_table(&mut self, now: Nanos) {
        let changed = self.forwarder.refresh();
        if self.neighbour.is_empty() {
            return;
        }
        self.release_and_expire(now, changed);
    }

    /// [`Dataplane::follow_table`] with packets waiting (kernel routing only).
    #[cold]
    #[inline(never)]
    fn release_and_expire(&mut self, now: Nanos, changed: bool) {
        let (mut released, mut expired) = (
            std::mem::take(&mut self.released),
            std::mem::take(&mut self.expired),
        );
        (self.neighbour).follow(now, changed, &self.forwarder, &mut released, &mut expired);
        if !released.is_empty() {
            let mut burst = self.rx.take().unwrap_or_default();
            for buf in released.drain(..) {
                burst.push_within_room(buf);
                if burst.is_full() {
                    self.take_through_stages(now, &mut burst);
                }
            }
            self.take_through_stages(now, &mut burst);
            self.rx = Some(burst);
        }
        for buf in expired.drain(..) {
            // Held as it arrived; parsed again (cold).
            let info = self.forwarder.parse_again(&buf);
            self.drop_or_reply(now, buf, info.as_ref(), DropCause::NoNeighbour);
        }
        (self.released, self.expired) = (released, expired);
    }

    /// A packet whose next hop has no MAC yet (`NeighbourStage::hold`).
    fn hold_for_neighbour(&mut self, now: Nanos, buf: PacketBuf, dst: Option<std::net::IpAddr>) {
        let mut dropped = std::mem::take(&mut self.expired);
        self.neighbour
            .hold(now, &self.forwarder, buf, dst, &mut dropped);
        for buf in dropped.drain(..) {
            self.count_drop(buf, DropCause::NoNeighbour);
        }
        self.expired = dropped;
    }

    /// The forwarding state (routes, MACs, addresses and MTUs).
    pub fn forwarder(&self) -> &Forwarder {
        &self.forwarder
    }
    /// The ICMP errors sent and held back so far.
    pub fn icmp(&self) -> &IcmpCounters {
        &self.fates.icmp
    }

    /// Counts a packet forwarding dropped and sends the ICMP error about it when one is due
    /// (`Forwarder::icmp_error`, then the ingress port's `Egress::originate`); else recycles
    /// its buffer.
    #[cold]
    fn drop_or_reply(
        &mut self,
        now: Nanos,
        mut buf: PacketBuf,
        info: Option<&zl_wire::PacketInfo>,
        cause: DropCause,
    ) {
        let fates = &mut self.fates;
        let kind = reject(
            &self.forwarder,
            &mut self.icmp,
            fates,
            now,
            &mut buf,
            info,
            cause,
        );
        let (Some(kind), Some(slot)) = (kind, self.slots.get_mut(buf.out_port as usize)) else {
            return self.pool.free(buf);
        };
        if let Some(buf) = slot.egress.originate(buf, kind, fates) {
            self.pool.free(buf);
        }
    }

    /// Counts a discarded packet (`Fates::dropped`) and recycles its buffer.
    #[inline]
    fn count_drop(&mut self, buf: PacketBuf, cause: DropCause) {
        self.fates.dropped(&buf, cause);
        self.pool.free(buf);
    }

    /// Fate of every packet received so far.
    pub fn totals(&self) -> &FateCounters {
        &self.fates.totals
    }
    /// Fate per generator flow group.
    pub fn groups(&self) -> &[GroupStats] {
        &self.fates.groups
    }
    /// The ports and their egress stages.
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
        self.slots
            .iter()
            .map(|s| s.egress.qos.len() as u64)
            .sum::<u64>()
            + self.neighbour.len() as u64
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

    /// One poll at `now`: receive up to the work budget per port, forward and admit, and
    /// after each burst transmit what the schedulers and shapers release; then each egress's
    /// tick and a last transmit. Returns the packets received.
    pub fn poll(&mut self, now: Nanos) -> Result<usize, PortError> {
        self.now = now;
        self.fates.set_clock(now);
        self.polls = self.polls.wrapping_add(1);
        self.take_reload();
        self.follow_table(now);
        let mut rx = self.rx.take().unwrap_or_default();
        let result = self.receive(now, &mut rx);
        self.rx = Some(rx);
        for s in &mut self.slots {
            s.egress.tick(now, self.polls);
        }
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

    /// Receives up to the work budget from every port through `rx`, processing each burst
    /// ([`receive_port`], as the threaded router's receive workers do).
    fn receive(&mut self, now: Nanos, rx: &mut Batch) -> Result<usize, PortError> {
        let mut received = 0;
        for port in 0..self.slots.len() {
            let budget = self.budget;
            let (n, end) = receive_port(&mut PortIntake { dp: self, port }, now, budget, rx);
            received += n;
            end?;
        }
        Ok(received)
    }

    /// `burst` through the receive stages ([`Dataplane::forward_burst`]), `width` packets at
    /// a time; `burst` is left empty.
    #[inline(always)]
    fn take_through_stages(&mut self, now: Nanos, burst: &mut Batch) {
        if burst.len() > self.width {
            return self.forward_in_widths(now, burst);
        }
        self.forward_burst(now, burst);
    }

    /// The stages of `burst` (at most `width` packets), which it leaves empty: forward
    /// ([`forward_stage`]), the packets forwarding discarded held or rejected, observe
    /// ([`observe_stage`]), then admit each packet to its egress port (`Egress::admit`).
    /// The one copy of the receive stages (its callers: [`Dataplane::take_through_stages`],
    /// for the receive step and the neighbour wait's release, and the reference path's
    /// [`Dataplane::forward_in_widths`]).
    #[inline(always)]
    fn forward_burst(&mut self, now: Nanos, burst: &mut Batch) {
        forward_stage(&self.forwarder, burst, &mut self.lanes);
        if !self.lanes.discarded.is_empty() {
            self.not_forwarded(now);
        }
        let slots = &self.slots;
        let list_of = |p: usize| {
            let e = &slots.get(p)?.egress;
            Some((&**e.zombie.as_ref()?, e.observe_by))
        };
        observe_stage(now, &mut self.observe_rng, burst, &mut self.lanes, list_of);
        self.admit_stage(now, burst);
    }

    /// The admit stage: each run of `burst`'s packets bound for one port admitted to its
    /// egress (`Egress::admit_run`) on what the earlier stages left in their lanes, in order;
    /// `burst` is left empty.
    #[inline(never)]
    fn admit_stage(&mut self, now: Nanos, burst: &mut Batch) {
        let lanes = &mut *self.lanes;
        let mut bufs = burst.as_mut_slice();
        let mut kept = &mut lanes.kept[..];
        let mut obs = &lanes.obs[..];
        while let Some(first) = bufs.first() {
            let port = first.out_port;
            let n = 1 + bufs[1..].iter().take_while(|b| b.out_port == port).count();
            let (run, rest) = std::mem::take(&mut bufs).split_at_mut(n);
            let (run_kept, kept_rest) = std::mem::take(&mut kept).split_at_mut(n);
            let (run_obs, obs_rest) = obs.split_at(n);
            let pool = &mut self.pool;
            self.slots[port as usize].egress.admit_run(
                now,
                &mut self.admit_rng,
                run,
                run_kept,
                run_obs,
                &mut self.fates,
                |b| pool.free(b),
            );
            (bufs, kept, obs) = (rest, kept_rest, obs_rest);
        }
        burst.clear();
    }

    /// [`Dataplane::forward_burst`] of `burst`'s packets `width` at a time, in order: with a
    /// width of 1, every packet through all the stages before the next, the reference the
    /// burst path is held to.
    #[cold]
    #[inline(never)]
    fn forward_in_widths(&mut self, now: Nanos, burst: &mut Batch) {
        let mut part = self.part.take().unwrap_or_default();
        for buf in burst.drain() {
            part.push_within_room(buf);
            if part.len() >= self.width {
                self.forward_burst(now, &mut part);
            }
        }
        self.forward_burst(now, &mut part);
        self.part = Some(part);
    }

    /// How many packets each receive stage takes at once: `width` clamped to 1..=32, 32 (a
    /// whole receive burst) unless set. 1 takes every packet through all the stages before
    /// the next one: the packet-at-a-time reference path, which decides as the burst path
    /// does (`crate::stages`), at a higher cost per packet.
    pub fn set_stage_width(&mut self, width: usize) {
        self.width = width.clamp(1, BATCH_CAPACITY);
    }

    /// The packets the forward stage discarded: each held for its next hop's MAC, or dropped
    /// with the ICMP error about it when one is due, in their order.
    #[cold]
    #[inline(never)]
    fn not_forwarded(&mut self, now: Nanos) {
        let mut discarded = std::mem::take(&mut self.lanes.discarded);
        for (buf, cause) in discarded.drain(..) {
            let info = self.forwarder.parse_again(&buf);
            match cause {
                DropCause::NoNeighbour => {
                    let dst = info.as_ref().map(|i| i.dst);
                    self.hold_for_neighbour(now, buf, dst)
                }
                cause => self.drop_or_reply(now, buf, info.as_ref(), cause),
            }
        }
        self.lanes.discarded = discarded;
    }

    /// Lets every egress port send what its scheduler and shaper release.
    fn transmit(&mut self, now: Nanos) -> Result<(), PortError> {
        for PortSlot { port, egress } in &mut self.slots {
            let mut link = PoolLink {
                port,
                pool: &mut self.pool,
            };
            egress.transmit(now, &mut link, &mut self.fates)?;
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
            if !s.egress.qos.is_empty() {
                consider(s.egress.held_until.unwrap_or(now).max(now));
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
        observer: &mut dyn Observer<Dataplane>,
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
        observer: &mut dyn Observer<Dataplane>,
    ) -> Result<StopReason, PortError> {
        let shut = self.shutdown();
        if let Some(c) = &mut self.capture {
            c.close();
        }
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
        observer: &mut dyn Observer<Dataplane>,
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
    /// and flushes every port (returning the first error).
    pub fn shutdown(&mut self) -> Result<(), PortError> {
        let mut first = Ok(());
        for PortSlot { port, egress } in &mut self.slots {
            let mut link = PoolLink {
                port,
                pool: &mut self.pool,
            };
            if let Err(e) = egress.shutdown(self.now, &mut link, &mut self.fates) {
                if first.is_ok() {
                    first = Err(e);
                }
            }
        }
        self.neighbour.shut_down(&mut self.fates, &mut self.pool);
        let flushed = flush_all(self.slots.iter_mut().map(|s| &mut s.port));
        first.and(flushed)
    }
}

impl RouterView for Dataplane {
    fn totals(&self) -> FateCounters {
        *Dataplane::totals(self)
    }
    fn groups(&self) -> &[GroupStats] {
        Dataplane::groups(self)
    }
    fn queued(&self) -> u64 {
        Dataplane::queued(self)
    }
    fn port_count(&self) -> usize {
        self.slots().len()
    }
    fn port_name(&self, port: usize) -> &str {
        self.slots()[port].port.name()
    }
    fn port_counters(&self, port: usize) -> PortCounters {
        self.slots()[port].port.counters()
    }
    fn qos(&self, port: usize) -> &QosEngine<PacketBuf> {
        &self.slots()[port].egress.qos
    }
    fn qlen_hist(&self, port: usize) -> &[QueueLengthHistogram] {
        &self.slots()[port].egress.qlen_hist
    }
    fn zombie_list(&self, port: usize) -> Option<&ZombieList> {
        self.slots()[port].egress.zombie.as_deref()
    }
    fn flow_table(&self, port: usize) -> Option<&FlowTable> {
        self.slots()[port].egress.flows.as_ref()
    }
    fn capture_stats(&self) -> Option<crate::capture::CaptureStats> {
        Dataplane::capture_stats(self)
    }
    fn icmp(&self) -> IcmpCounters {
        *Dataplane::icmp(self)
    }
    fn fib(&self) -> Option<FibSnapshot> {
        self.forwarder().fib_follow().map(FibSnapshot::of)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::{build_with_ports, BuildError};
    use crate::config::RouterConfig;
    use crate::forward::Forwarding;
    use crate::priority::PriorityParams;
    use crate::route::{NextHop, RouteTable};
    use std::sync::Arc;
    use zl_port::MemoryPort;
    use zl_qos::{QosEngine, QosParams};
    use zl_wire::{MacAddr, ParseConfig};

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
        // Bounded: a regression that stops receiving fails here instead of hanging (100
        // frames take a few bursts; 1000 polls is room, not a measurement).
        for _ in 0..1000 {
            if dp.totals().received >= 100 {
                break;
            }
            dp.poll(Nanos::from_micros(dp.polls + 1)).unwrap();
        }
        assert!(
            dp.totals().received >= 100,
            "100 frames within 1000 polls: {:?}",
            dp.totals()
        );
        let list = dp.slots()[1].egress.zombie.as_ref().expect("estimated");
        assert_eq!(list.config().m(), 500, "the ZL-RED class's settings");
        assert_eq!(Arc::strong_count(list), 2, "the slot and the ZL-RED policy");
        // 100 flows into a list of 500 that starts empty: each arrival adds exactly one.
        assert_eq!(list.total_occurrence(), 100, "one observation per packet");
        assert!(
            dp.slots()[0].egress.zombie.is_some(),
            "every port is estimated"
        );
        // Without the estimate each port keeps the same list, the one its ZL-RED policy
        // decides on, fed every packet bound for the port (as on the threaded router).
        let dp = build("", frames).unwrap();
        for s in dp.slots() {
            let list = s.egress.zombie.as_ref().expect("the policy's list");
            assert_eq!(list.config().m(), 500);
            assert_eq!(Arc::strong_count(list), 2, "the slot and the ZL-RED policy");
        }
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
        assert_eq!(
            dp.slots()[1].egress.zombie.as_ref().unwrap().config().m(),
            500
        );
        // Out of range is a range error on the key itself, not a mismatch,
        // and is refused whether or not the estimate is on.
        for text in [
            metrics(0),
            "[metrics]\nflow_estimate_zombie = { m = 0 }\n".to_owned(),
        ] {
            let err = build(&text, vec![]).err().expect("refused").to_string();
            assert!(
                err.contains("`metrics.flow_estimate_zombie.m` = 0"),
                "{err}"
            );
            assert!(err.contains("1 <= m <="), "{err}");
            assert!(!err.contains("qos.classes"), "{err}");
        }
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
        let be = &dp.slots()[1].egress.qlen_hist[1];
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
        let be = &dp.slots()[1].egress.qlen_hist[1];
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
                .map(|i| {
                    PortSlot::new(
                        Box::new(MemoryPort::cycling("p", i, vec![], 0)),
                        QosEngine::new(&params).unwrap(),
                    )
                })
                .collect::<Vec<_>>()
        };
        let new = |forwarding| {
            let macs = (0..2).map(|i| MacAddr([2, 0, 0, 0, 0, i])).collect();
            Dataplane::new(
                slots(),
                BufPool::new(4, 2048),
                Forwarder::new(
                    forwarding,
                    ParseConfig::default(),
                    PriorityParams::default().build().unwrap(),
                    macs,
                ),
                1,
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
