//! The egress stage of one port, written once for both loops: classify -> meter -> AQM
//! admission (on the port's Zombie List observation) -> per-class queue -> the cut-through of
//! a packet alone in an idle port -> schedule + shape -> the port's send, and the shutdown
//! drain.
//!
//! The single-thread [`crate::Dataplane`] and the threaded router's transmit worker
//! ([`crate::mt`]) own one [`Egress`] per port and call the same four steps:
//!
//! - [`Egress::admit`]: one packet whose forwarding is done (its [`PacketMeta`], its parsed
//!   headers' rewritable parts, its observation in the port's list);
//! - [`Egress::transmit`]: what the scheduler and shaper release, a burst at a time, after
//!   what left its queue on arrival;
//! - [`Egress::tick`]: once per round of the loop, the flow estimate offered to the engine
//!   and the queue lengths sampled (one rule for both loops);
//! - [`Egress::shutdown`]: at the end of a run, what is still queued counted `shutdown`;
//!
//! and, for a frame the router itself originates on the port (an ICMP error, `crate::icmp`),
//! [`Egress::originate`].
//!
//! The port itself is reached through a [`Link`] (send a batch, recycle a buffer): the
//! single-thread loop's port and pool, or the threaded router's transmit half of the port and
//! its return ring.
//! Every count goes through [`Fates`], so a packet's fate is counted in one place whichever
//! loop runs.

use std::sync::Arc;

use rand::RngCore;
use zl_aqm::{Discard, IsolateBy, PacketMeta};
use zl_core::Nanos;
use zl_port::{Batch, PacketBuf, PortError};
use zl_qos::{QosEngine, QosParams};
use zl_wire::{MarkOutcome, PacketInfo, QosHeaders};
use zl_zombie::{Observation, ZombieConfig, ZombieList, ZombieParams};

use crate::error::{invalid, ConfigError};
use crate::fates::Fates;
use crate::flows::FlowTable;
use crate::forward::Kept;
use crate::stats::DropCause;

/// Buckets of the queue-length histogram: 0, 1, 2-3, 4-7, ..., >= 2^14.
pub const QLEN_BUCKETS: usize = 16;

/// Queue lengths are sampled every this many rounds of a loop (each sample reads every class's
/// length with `QosEngine::queue_len`, which copies no counters).
pub const QLEN_SAMPLE_EVERY: u64 = 8;

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

/// The parsed headers an admitted packet's re-mark (DSCP) and congestion mark (ECN, or the
/// extension header's ECN bit) rewrite: the whole [`PacketInfo`] where the packet was parsed
/// on the same thread, the 32-byte [`QosHeaders`] where it crossed a ring. Either way the
/// frame is parsed once, on receive.
pub trait Rewrite {
    fn dscp(&self) -> u8;
    /// Rewrites the DSCP, keeping the ECN bits.
    fn set_dscp(&mut self, frame: &mut [u8], dscp: u8);
    /// Marks congestion; true when the packet leaves marked.
    fn mark(&mut self, frame: &mut [u8]) -> bool;
}

/// A mark the AQM asked for counts when the packet carries one afterwards (set now, or
/// already there).
#[inline]
fn is_marked(outcome: Result<MarkOutcome, zl_wire::MutateError>) -> bool {
    matches!(
        outcome,
        Ok(MarkOutcome::Ce | MarkOutcome::CcExtEcn | MarkOutcome::AlreadyMarked)
    )
}

impl Rewrite for PacketInfo {
    #[inline]
    fn dscp(&self) -> u8 {
        PacketInfo::dscp(self)
    }
    #[inline]
    fn set_dscp(&mut self, frame: &mut [u8], dscp: u8) {
        // Cannot fail: the offsets were parsed from these bytes and only rewritten in place.
        let _ = zl_wire::set_dscp(frame, self, dscp);
    }
    #[inline]
    fn mark(&mut self, frame: &mut [u8]) -> bool {
        is_marked(zl_wire::mark(frame, self))
    }
}

impl Rewrite for QosHeaders {
    #[inline]
    fn dscp(&self) -> u8 {
        QosHeaders::dscp(self)
    }
    #[inline]
    fn set_dscp(&mut self, frame: &mut [u8], dscp: u8) {
        // Cannot fail: as for `PacketInfo`.
        let _ = QosHeaders::set_dscp(self, frame, dscp);
    }
    #[inline]
    fn mark(&mut self, frame: &mut [u8]) -> bool {
        is_marked(QosHeaders::mark(self, frame))
    }
}

/// Where an egress port's packets go: the port's send, and the pool its buffers come back to.
pub trait Link {
    /// Sends the batch. On `Ok` the batch is empty; on `Err` what is left in it is recycled
    /// by the caller.
    fn send(&mut self, now: Nanos, batch: &mut Batch) -> Result<(), PortError>;
    /// Takes back a buffer that will not be sent (dropped, or left by a failed send).
    fn recycle(&mut self, buf: PacketBuf);
}

/// One egress port: its QoS engine, its Zombie List, its queue-length samples, the shaper's
/// hold time and the batch of packets about to be sent.
pub struct Egress {
    pub qos: QosEngine<PacketBuf>,
    /// The port's Zombie List when it has one (see [`port_egress`] for when): it observes
    /// every packet offered to the port's egress, once, before admission, and the port's SRED /
    /// ZL-RED policies decide on that observation (the paper keeps one list per output link).
    pub zombie: Option<Arc<ZombieList>>,
    /// What the list observes a packet by: its flow, or its host where a ZL-RED class
    /// isolates by host (`QosParams::zombie_key`).
    pub observe_by: IsolateBy,
    /// Queue-length samples per class (every [`QLEN_SAMPLE_EVERY`] rounds), log2 buckets.
    pub qlen_hist: Vec<QueueLengthHistogram>,
    /// The flows that matter on the port's list, named (only with a list; see
    /// [`crate::flows`]).
    pub flows: Option<FlowTable>,
    /// The shaper holds the head packet until then.
    pub held_until: Option<Nanos>,
    /// Packets leaving for the port: what left its queue at once on arrival (see
    /// [`Egress::admit`]), then each burst [`Egress::transmit`] dequeues.
    pending: Batch,
}

/// A live reconfiguration of one egress port, built off the packet path
/// (`crate::reload`) and installed between two polls by [`Egress::apply`].
pub struct EgressUpdate {
    /// The new QoS (built on the list the port keeps after the update).
    pub qos: zl_qos::QosUpdate<PacketBuf>,
    /// `Some(list)` when the port's Zombie List changes (the flow-estimate settings, or the
    /// policies' list parameters): the new list (`None`: the port keeps none), with the named
    /// flows table to go with it (a new list starts a new table).
    pub list: Option<(Option<Arc<ZombieList>>, Option<FlowTable>)>,
    /// What the list observes packets by after the update.
    pub observe_by: IsolateBy,
}

impl Egress {
    /// Installs `u` (see [`EgressUpdate`], `QosEngine::apply`): what is queued stays queued
    /// and every counter goes on; refused, with nothing changed, when `u`'s classes are not
    /// this port's.
    pub fn apply(&mut self, u: EgressUpdate) -> Result<(), zl_qos::QosConfigError> {
        self.qos.apply(u.qos)?;
        if let Some((list, flows)) = u.list {
            self.zombie = list;
            self.flows = flows;
        }
        self.observe_by = u.observe_by;
        Ok(())
    }

    /// Whether `u` can be installed ([`Egress::apply`] would not refuse it).
    pub fn check(&self, u: &EgressUpdate) -> Result<(), zl_qos::QosConfigError> {
        self.qos.check(&u.qos)
    }

    /// An egress on `qos`, whose SRED / ZL-RED policies, if any, decide on `zombie` when it is
    /// given (build the engine with `QosEngine::with_zombie_list` on that list).
    pub fn new(mut qos: QosEngine<PacketBuf>, zombie: Option<Arc<ZombieList>>) -> Self {
        let classes = qos.class_names().len();
        qos.set_marker(mark_frame);
        qos.set_host_reader(frame_hosts);
        Egress {
            qos,
            zombie,
            observe_by: IsolateBy::Flow,
            qlen_hist: vec![QueueLengthHistogram::default(); classes],
            flows: None,
            held_until: None,
            pending: Batch::new(),
        }
    }

    /// An egress whose QoS decides on a Zombie List of its own (built with `list`), observed
    /// once per packet.
    pub fn on_own_list(
        qos: &QosParams,
        list: ZombieConfig,
    ) -> Result<Self, zl_qos::QosConfigError> {
        let list = Arc::new(ZombieList::new(list));
        let engine = QosEngine::with_zombie_list(qos, &list)?;
        Ok(Egress::new(engine, Some(list)))
    }

    /// Active flows at this egress estimated as 1/P(t), when it has a list.
    pub fn estimated_flows(&self) -> Option<f64> {
        self.zombie.as_ref().map(|z| z.estimated_flows())
    }

    /// Classifies, re-marks, meters and admits one forwarded packet (`meta`, its rewritable
    /// `headers` when it parsed, its `observed` arrival in the port's list). An admitted
    /// packet alone in the port leaves its queue at once into the pending batch when the
    /// shaper lets it (`QosEngine::release_if_alone`), as it would on a link that keeps up: a
    /// loop takes a whole receive burst before it transmits, and without this a queue whose
    /// link keeps up would hold up to a burst (32) that an AQM reads as congestion (ZL-RED's
    /// `th_min` is 5). It is counted as forwarded here, as `transmit` counts what it dequeues.
    /// A discarded packet is counted with its cause and handed back for the caller to recycle.
    /// Either way the packet is moved out of `buf` ([`PacketBuf::take`], left hollow) only
    /// when its verdict is known, straight into its queue (see
    /// `QosEngine::enqueue_classified_taken`).
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn admit<R: RngCore + ?Sized, H: Rewrite>(
        &mut self,
        now: Nanos,
        rng: &mut R,
        buf: &mut PacketBuf,
        meta: PacketMeta,
        mut headers: Option<&mut H>,
        observed: Option<&Observation>,
        fates: &mut Fates,
    ) -> Option<PacketBuf> {
        let class = self
            .qos
            .classify(now, headers.as_deref().map(|h| h.dscp()), meta.len);
        if let (Some(d), Some(h)) = (class.remark, headers.as_deref_mut()) {
            h.set_dscp(buf.as_mut_slice(), d);
        }
        let tracked = match (&mut self.flows, &self.zombie) {
            (Some(t), Some(list)) => t.arrives(
                now,
                meta.flow,
                observed.filter(|o| o.hit).map(|o| o.occurrence),
                buf,
                list,
            ),
            _ => None,
        };
        let mut marked = false;
        let color = class.color;
        let result = self.qos.enqueue_classified_taken(
            now,
            rng,
            &class,
            meta,
            || buf.take(),
            |b| {
                if let Some(h) = headers {
                    marked = h.mark(b.as_mut_slice());
                }
                if marked {
                    fates.marked(b, class.class, color);
                }
            },
            observed,
        );
        match result {
            Ok(_) => {
                if let Some(t) = tracked {
                    t.decided(Ok(marked));
                }
                self.cut_through(now, class.class, fates);
                None
            }
            Err(dropped) => {
                let cause = DropCause::of_verdict(dropped.verdict).unwrap_or(DropCause::Tail);
                fates.dropped_in(&dropped.item, cause, class.class, color);
                if let Some(t) = tracked {
                    t.decided(Err(cause));
                }
                Some(dropped.item)
            }
        }
    }

    /// [`Egress::admit`] of a run of packets bound for this port, in order, each on its
    /// metadata and headers (`kept`) and, where the port has a list, its observation (`obs`);
    /// `recycle` takes each discarded packet. The packets are moved out of `bufs`, left
    /// hollow.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn admit_run<R: RngCore + ?Sized>(
        &mut self,
        now: Nanos,
        rng: &mut R,
        bufs: &mut [PacketBuf],
        kept: &mut [Kept],
        obs: &[Observation],
        fates: &mut Fates,
        mut recycle: impl FnMut(PacketBuf),
    ) {
        let listed = self.zombie.is_some();
        (bufs.iter_mut().zip(kept).zip(obs)).for_each(|((buf, (meta, headers)), obs)| {
            let observed = listed.then_some(obs);
            if let Some(b) = self.admit(now, rng, buf, *meta, headers.as_mut(), observed, fates) {
                recycle(b);
            }
        });
    }

    /// Puts a frame the router originates on this port (the ICMP error of `kind` about a
    /// packet received here, `crate::icmp`) into the batch the port sends next, ahead of its
    /// class queues: not classified, not subject to the AQM or the shaper, not counted as
    /// forwarded (it is no received packet) but as an ICMP error sent. A full batch hands it
    /// back (counted `no_room`) for the caller to recycle.
    #[inline]
    pub fn originate(
        &mut self,
        buf: PacketBuf,
        kind: crate::icmp::IcmpKind,
        fates: &mut Fates,
    ) -> Option<PacketBuf> {
        match self.pending.push(buf) {
            Ok(()) => {
                fates.icmp.sent[kind as usize] += 1;
                None
            }
            Err(buf) => {
                fates.icmp.no_room += 1;
                Some(buf)
            }
        }
    }

    /// The packet just admitted to `class` leaves at once if it is alone in the port and the
    /// shaper lets it (see [`Egress::admit`]).
    #[inline]
    fn cut_through(&mut self, now: Nanos, class: usize, fates: &mut Fates) {
        let pending = &mut self.pending;
        if pending.is_full() {
            return;
        }
        // At most one packet, counted as it leaves: counted after, from the batch with
        // `Fates::departed_burst` as `transmit_queued` does, it costs about 31 instructions
        // per packet more in the pipeline bench (LLVM's inlining into the receive loop).
        let mut bytes = 0;
        let burst = self.qos.release_if_alone(now, class, |b| {
            bytes += fates.departs(&b);
            // Cannot fail: the batch has room (checked above).
            let _ = pending.push(b);
        });
        fates.departed(burst.sent, bytes);
        if burst.held_until.is_some() {
            self.held_until = burst.held_until;
        }
    }

    /// Sends what the scheduler and shaper release, a burst at a time, after what left its
    /// queue on arrival. A packet is counted as forwarded when it leaves its queue; a failing
    /// port's leftovers are recycled (the port counts its own errors).
    ///
    /// A port with nothing queued and nothing pending (an idle port, polled like the others)
    /// takes a short path in line (`QosEngine::dequeue_idle`), not the burst loop's call.
    #[inline]
    pub fn transmit(
        &mut self,
        now: Nanos,
        link: &mut impl Link,
        fates: &mut Fates,
    ) -> Result<(), PortError> {
        // An engine with discards to take is not idle (`QosEngine::dequeue_idle`).
        if self.pending.is_empty() && self.qos.dequeue_idle() {
            self.held_until = None;
            return Ok(());
        }
        let sent = self.transmit_queued(now, link, fates);
        if self.qos.has_discarded() {
            self.take_discarded(link, fates);
        }
        sent
    }

    /// Counts and recycles what a class's discipline discarded after admitting it (an AQM
    /// drop at dequeue counts `early`, a packet pushed out by an overflow `tail`, as the
    /// arrival's own drops do).
    #[cold]
    #[inline(never)]
    fn take_discarded(&mut self, link: &mut impl Link, fates: &mut Fates) {
        self.qos.take_discarded(|d| {
            let cause = match d.cause {
                Discard::Dequeue => DropCause::Early,
                Discard::Overflow => DropCause::Tail,
            };
            fates.dropped_in(&d.item, cause, d.class, d.color);
            link.recycle(d.item);
        });
    }

    /// [`Egress::transmit`] with something queued or pending.
    fn transmit_queued(
        &mut self,
        now: Nanos,
        link: &mut impl Link,
        fates: &mut Fates,
    ) -> Result<(), PortError> {
        self.held_until = None;
        loop {
            let pending = &mut self.pending;
            let start = pending.len();
            let burst = self.qos.dequeue_burst(now, pending.room(), |b| {
                // The burst is at most the batch's room.
                pending.push_within_room(b);
            });
            // Counted after the burst, from the batch (the loop above only moves packets).
            fates.departed_burst(self.pending.iter().skip(start));
            if burst.held_until.is_some() {
                self.held_until = burst.held_until;
            }
            if self.pending.is_empty() {
                return Ok(());
            }
            let full = self.pending.is_full();
            self.send_pending(now, link)?;
            if !full {
                return Ok(());
            }
        }
    }

    fn send_pending(&mut self, now: Nanos, link: &mut impl Link) -> Result<(), PortError> {
        let result = link.send(now, &mut self.pending);
        if result.is_err() {
            for b in self.pending.drain() {
                link.recycle(b);
            }
        }
        result
    }

    /// Once per round of the loop, after its admissions: offers the port's flow estimate to
    /// its engine (read only by `sqrt-n-live` buffer rules) and samples the queue lengths every
    /// [`QLEN_SAMPLE_EVERY`] rounds.
    #[inline]
    pub fn tick(&mut self, now: Nanos, round: u64) {
        if let Some(z) = &self.zombie {
            self.qos.offer_zombie_estimate(now, z);
        }
        if round % QLEN_SAMPLE_EVERY == 0 {
            for (c, h) in self.qlen_hist.iter_mut().enumerate() {
                h.record(self.qos.queue_len(c).map_or(0, |(packets, _)| packets));
            }
        }
    }

    /// Ends the port's run at `now`: sends what already left its queue (counted as forwarded),
    /// then discards the rest, counted as `shutdown` drops (in the totals and in its class's
    /// `shutdown_drops`, never in the class's `dequeued`: the link did not carry it).
    pub fn shutdown(
        &mut self,
        now: Nanos,
        link: &mut impl Link,
        fates: &mut Fates,
    ) -> Result<(), PortError> {
        let sent = if self.pending.is_empty() {
            Ok(())
        } else {
            self.send_pending(now, link)
        };
        if self.qos.has_discarded() {
            self.take_discarded(link, fates);
        }
        self.qos.discard_all(now, |item| {
            fates.dropped(&item, DropCause::Shutdown);
            link.recycle(item);
        });
        sent
    }
}

/// What a port's list observes a packet of `flow` by: its flow, or its host hashed from the
/// frame (`Egress::observe_by`).
#[inline]
pub(crate) fn observe_key(
    by: IsolateBy,
    flow: zl_core::FlowId,
    buf: &PacketBuf,
) -> zl_core::FlowId {
    match by {
        IsolateBy::Flow => flow,
        by => host_key(by, buf),
    }
}

#[cold]
#[inline(never)]
fn host_key(by: IsolateBy, buf: &PacketBuf) -> zl_core::FlowId {
    let (src_host, dst_host) = frame_hosts(buf);
    by.key(&PacketMeta {
        src_host,
        dst_host,
        ..PacketMeta::default()
    })
}

/// The 16-bit hashes of a frame's source and destination addresses (`zl_wire::host_hash`),
/// for what isolates hosts (a list observing by host, FQ-CoDel's host modes, isolation by
/// host); (0, 0) for a frame that does not parse. decided: hashed from the frame where read,
/// not by the forwarder for every packet: carried in every packet's metadata they cost the
/// common path about ten instructions per packet (the pipeline bench).
pub(crate) fn frame_hosts(buf: &PacketBuf) -> (u16, u16) {
    match zl_wire::parse(buf.as_slice(), &zl_wire::ParseConfig::default()) {
        Ok(info) => (zl_wire::host_hash(info.src), zl_wire::host_hash(info.dst)),
        Err(_) => (0, 0),
    }
}

/// Sets CE (or the extension header's ECN bit) on a frame a class's discipline marks as it
/// leaves (CoDel, FQ-CoDel, DualPI2): the frame is parsed again for its offsets, once per mark.
/// True when the frame leaves marked.
fn mark_frame(buf: &mut PacketBuf) -> bool {
    let frame = buf.as_mut_slice();
    match zl_wire::parse(frame, &zl_wire::ParseConfig::default()) {
        Ok(mut info) => is_marked(zl_wire::mark(frame, &mut info)),
        Err(_) => false,
    }
}

/// The one place that decides a port's Zombie List and builds its egress from `params` (whose
/// errors are reported under `qos_key`).
///
/// The port has a list when its active flows are estimated (`estimate`: `metrics.flow_estimate`
/// or a `sqrt-n-live` buffer rule), or when an SRED / ZL-RED policy needs one. Its SRED /
/// ZL-RED policies then decide on that list, which sees every packet bound for the port: the
/// papers' one list per output link. decided: the same on both engines (a receive worker
/// observes a packet before it is classified, so a list per class cannot be kept there); a
/// policy of one class among several is driven by the whole link's flows.
///
/// The list's parameters: `estimate_params` (`metrics.flow_estimate_zombie`) when the estimate
/// is on and they are given, else those of the port's SRED / ZL-RED policies (so turning the
/// estimate on leaves their configuration as written), else the defaults (M = 1000,
/// occurrence table: an observation reads F and T in any mode, and a scan would read all M
/// zombies per packet).
/// decided: `estimate_params` that differ from the policies' `zombie` settings are an error
/// naming both keys, not a silent override.
pub(crate) fn port_egress(
    params: &QosParams,
    qos_key: &str,
    estimate: bool,
    estimate_params: Option<ZombieParams>,
) -> Result<Egress, ConfigError> {
    let qos_err = qos_error(qos_key);
    let mut egress = match port_list(params, qos_key, estimate, estimate_params)? {
        None => Egress::new(QosEngine::new(params).map_err(&qos_err)?, None),
        Some(zc) => Egress::on_own_list(params, zc).map_err(&qos_err)?,
    };
    egress.observe_by = params.zombie_key().map_err(qos_err)?.0;
    Ok(egress)
}

/// A QoS error under the port's QoS table `qos_key`.
pub(crate) fn qos_error(qos_key: &str) -> impl Fn(zl_qos::QosConfigError) -> ConfigError + '_ {
    move |e| ConfigError::Qos {
        key: format!("{qos_key}.{}", e.key),
        reason: e.reason,
    }
}

/// The Zombie List a port's egress keeps, if any ([`port_egress`] says when), as its
/// validated configuration.
pub(crate) fn port_list(
    params: &QosParams,
    qos_key: &str,
    estimate: bool,
    estimate_params: Option<ZombieParams>,
) -> Result<Option<ZombieConfig>, ConfigError> {
    let qos_err = qos_error(qos_key);
    const ESTIMATE_KEY: &str = "metrics.flow_estimate_zombie";
    // Out of range is reported as such, estimate on or off, before any comparison with the
    // policies' settings.
    if let Some(m) = &estimate_params {
        m.validate().map_err(|e| zombie_invalid(ESTIMATE_KEY, e))?;
    }
    let policies = params.zombie_params().map_err(qos_err)?;
    if !estimate && policies.is_none() {
        return Ok(None);
    }
    let estimate_params = estimate_params.filter(|_| estimate);
    let (key, zp) = match (estimate_params, policies) {
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
    zp.validate().map(Some).map_err(|e| zombie_invalid(&key, e))
}

/// A Zombie List parameter out of range, named under the list's table `key`.
fn zombie_invalid(key: &str, e: zl_zombie::ZombieConfigError) -> ConfigError {
    invalid(format!("{key}.{}", e.param()), e.value(), e.expected())
}
