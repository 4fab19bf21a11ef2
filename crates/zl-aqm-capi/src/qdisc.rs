//! The one place that calls into `zl_aqm`'s queue disciplines (CoDel, FQ-CoDel, DualPI2, ZL-RED
//! with flow isolation) for the C ABI: building one over the caller's `u64` handles, offering
//! an arrival, taking the next departure, reading the counters. The C surface
//! (`ffi_qdisc.rs`) sees only [`Qdisc`] and hands it a sink for the packets a discipline gives
//! back unsent, so a change to the `Discipline` trait is an edit here.

use std::sync::Arc;

use zl_aqm::{
    AqmConfigError, AqmParams, AqmStats, BuildContext, Discard, Discipline, Nanos, Next,
    QueueDiscipline, Queued, Verdict,
};
use zl_zombie::ZombieList;

use crate::policy::{aqm_stats, packet, verdict};
use crate::types::{
    ZlArrival, ZlCodelStats, ZlDeparture, ZlDequeueStatus, ZlDiscardCause, ZlDualPi2Stats,
    ZlFqCodelStats, ZlIsolationStats, ZlQdiscKind, ZlQdiscStats, ZlQueueParams, ZlVerdict,
    ZL_NO_TIME,
};

/// What every discipline's caller counts: the verdicts on arrival and what became of the
/// packets taken.
#[derive(Clone, Copy, Debug, Default)]
struct Counts {
    verdicts: AqmStats,
    dequeued: u64,
    marked_on_dequeue: u64,
    dequeue_drops: u64,
    overflow_drops: u64,
}

impl Counts {
    /// Counts a packet the discipline hands back unsent and passes its handle to `sink`.
    fn discard(&mut self, q: Queued<u64>, d: Discard, sink: &mut impl FnMut(u64, ZlDiscardCause)) {
        let cause = match d {
            Discard::Dequeue => {
                self.dequeue_drops += 1;
                ZlDiscardCause::ZL_DISCARD_DEQUEUE
            }
            Discard::Overflow => {
                self.overflow_drops += 1;
                ZlDiscardCause::ZL_DISCARD_OVERFLOW
            }
        };
        sink(q.item, cause);
    }
}

/// A discipline holding the caller's packet handles, with its counters.
#[derive(Debug)]
pub(crate) struct Qdisc {
    disc: QueueDiscipline<u64>,
    counts: Counts,
}

impl Qdisc {
    /// Validates `params` for `queue` and builds the discipline, its packet slots reserved for
    /// `queue.capacity_packets` (checked finite by the caller); the isolation observes `shared`
    /// when given, else a list of its own. `Ok(None)` for a kind that decides on the caller's
    /// FIFO (`zl_aqm_new_from_toml`'s).
    pub(crate) fn build(
        params: &AqmParams,
        queue: &ZlQueueParams,
        shared: Option<Arc<ZombieList>>,
    ) -> Result<Option<Qdisc>, AqmConfigError> {
        let mut ctx = BuildContext::new(queue.link_rate_bps, queue.capacity_packets)
            .with_buffer(queue.capacity_packets, queue.capacity_bytes);
        if let Some(list) = shared {
            ctx = ctx.with_zombie_list(list);
        }
        Ok(params.build_discipline(&ctx)?.map(|disc| Qdisc {
            disc,
            counts: Counts::default(),
        }))
    }

    /// Offers one arrival whose fields are in range (`ffi::arrival_in_range`). Packets the
    /// discipline pushes out to make room (possibly this one) go to `sink`.
    pub(crate) fn enqueue<R: rand::RngCore + ?Sized>(
        &mut self,
        a: &ZlArrival,
        handle: u64,
        rng: &mut R,
        sink: &mut impl FnMut(u64, ZlDiscardCause),
    ) -> ZlVerdict {
        let counts = &mut self.counts;
        let mut discard = |q: Queued<u64>, d: Discard| counts.discard(q, d, sink);
        // The item is the caller's handle: a mark on the packet is the caller's to apply, on
        // the verdict.
        let v = match self.disc.enqueue(
            Nanos(a.now_ns),
            &packet(a),
            None,
            handle,
            rng,
            |_| {},
            &mut discard,
        ) {
            Ok(v) => v,
            // decided: a discipline that hands the item back always says why with a drop
            // verdict; were it ever an admitting one, the packet is still not queued, and
            // C is told so by the one verdict that says "did not fit".
            Err((v, _)) if v.admits() => Verdict::TailDrop,
            Err((v, _)) => v,
        };
        self.counts.verdicts.record(v);
        verdict(v)
    }

    /// The packet to send at `now_ns` (in range); the packets the AQM drops on the way go to
    /// `sink`.
    pub(crate) fn dequeue<R: rand::RngCore + ?Sized>(
        &mut self,
        now_ns: u64,
        rng: &mut R,
        sink: &mut impl FnMut(u64, ZlDiscardCause),
    ) -> (ZlDequeueStatus, ZlDeparture) {
        let counts = &mut self.counts;
        let mut discard = |q: Queued<u64>, d: Discard| counts.discard(q, d, sink);
        let mut out = ZlDeparture {
            handle: 0,
            enqueued_ns: ZL_NO_TIME,
            hold_until_ns: ZL_NO_TIME,
            packet_len: 0,
            mark: 0,
        };
        let status = match self.disc.dequeue(Nanos(now_ns), rng, &mut discard) {
            Next::Packet(d) => {
                self.counts.dequeued += 1;
                if d.mark {
                    self.counts.marked_on_dequeue += 1;
                }
                out.handle = d.queued.item;
                out.enqueued_ns = d.queued.enqueued_at.0;
                out.packet_len = d.queued.meta.len;
                out.mark = u8::from(d.mark);
                ZlDequeueStatus::ZL_DEQUEUE_PACKET
            }
            Next::Hold(until) => {
                out.hold_until_ns = until.0;
                ZlDequeueStatus::ZL_DEQUEUE_HOLD
            }
            Next::Empty => ZlDequeueStatus::ZL_DEQUEUE_EMPTY,
        };
        (status, out)
    }

    /// Packets and bytes held.
    pub(crate) fn len(&self) -> (u32, u64) {
        (self.disc.len_packets(), self.disc.len_bytes())
    }

    /// Hands every packet still held to `f`, in the order the discipline would send them as
    /// far as it can say without deciding.
    pub(crate) fn drain(&mut self, mut f: impl FnMut(u64)) {
        self.disc.drain(|q| f(q.item));
    }

    /// Which discipline this is.
    pub(crate) fn kind(&self) -> ZlQdiscKind {
        match &self.disc {
            QueueDiscipline::Codel(_) => ZlQdiscKind::ZL_QDISC_CODEL,
            QueueDiscipline::FqCodel(_) => ZlQdiscKind::ZL_QDISC_FQ_CODEL,
            QueueDiscipline::DualPi2(_) => ZlQdiscKind::ZL_QDISC_DUALPI2,
            QueueDiscipline::Isolated(_) => ZlQdiscKind::ZL_QDISC_ZL_RED_ISOLATION,
        }
    }

    /// The common counters and the discipline's own.
    pub(crate) fn stats(&self) -> ZlQdiscStats {
        let c = &self.counts;
        let mut s = ZlQdiscStats {
            kind: self.kind(),
            enqueued: c.verdicts.enqueued,
            marked_on_enqueue: c.verdicts.marked,
            early_drops: c.verdicts.early_drops,
            forced_drops: c.verdicts.forced_drops,
            tail_drops: c.verdicts.tail_drops,
            dequeued: c.dequeued,
            marked_on_dequeue: c.marked_on_dequeue,
            dequeue_drops: c.dequeue_drops,
            overflow_drops: c.overflow_drops,
            codel: ZlCodelStats::default(),
            fq_codel: ZlFqCodelStats::default(),
            dualpi2: ZlDualPi2Stats::default(),
            isolation: ZlIsolationStats::default(),
        };
        match &self.disc {
            QueueDiscipline::Codel(d) => s.codel = codel(d.stats()),
            QueueDiscipline::FqCodel(d) => {
                let f = d.stats();
                let (new_flows_len, old_flows_len) = d.list_lens();
                s.codel = codel(&f.codel);
                s.fq_codel = ZlFqCodelStats {
                    new_flow_count: f.new_flow_count,
                    drop_overlimit: f.drop_overlimit,
                    new_flows_len,
                    old_flows_len,
                };
            }
            QueueDiscipline::DualPi2(d) => {
                let t = d.stats();
                let p = d.base_probability();
                let (l_queue_packets, c_queue_packets) = d.queue_lens();
                s.dualpi2 = ZlDualPi2Stats {
                    l_packets: t.l_packets,
                    c_packets: t.c_packets,
                    step_marks: t.step_marks,
                    coupled_marks: t.coupled_marks,
                    classic_marks: t.classic_marks,
                    classic_drops: t.classic_drops,
                    l4s_drops: t.l4s_drops,
                    base_probability: p,
                    // RFC 9332 §2.1: p_C = p'^2, p_CL = k p' (a probability, at most 1).
                    classic_probability: p * p,
                    l4s_probability: (d.config().coupling * p).min(1.0),
                    l_queue_packets,
                    c_queue_packets,
                };
            }
            QueueDiscipline::Isolated(d) => {
                let t = d.stats();
                let (normal, penalty) = d.aqm_stats();
                let (normal_queue_packets, penalty_queue_packets) = d.queue_lens();
                s.isolation = ZlIsolationStats {
                    flagged: t.flagged,
                    penalized: t.penalized,
                    cleared: t.cleared,
                    released: t.released,
                    box_full: t.box_full,
                    over_share_drops: t.over_share_drops,
                    penalty_sent: t.penalty_sent,
                    fair_share_bps: d.fair_share_bps(),
                    class_rate_bps: d.class_rate_bps(),
                    flows_estimate: d.flows_estimate(),
                    normal: aqm_stats(&normal),
                    penalty: aqm_stats(&penalty),
                    penalized_now: d.penalized_count(),
                    normal_queue_packets,
                    penalty_queue_packets,
                    normal_codel_drops: t.normal_codel_drops,
                    normal_codel_marks: t.normal_codel_marks,
                };
            }
        }
        s
    }
}

fn codel(c: &zl_aqm::CodelStats) -> ZlCodelStats {
    ZlCodelStats {
        dropped: c.dropped,
        ecn_marks: c.ecn_marks,
        maxpacket: c.maxpacket,
    }
}
