//! The one place that calls into `zl_aqm`'s policies: building one from its parameters and a
//! queue, deciding one arrival, reading its counters and its Zombie List. The C surface
//! (`ffi.rs`) sees only [`Policy`], so a change to the `Aqm` trait or to [`Admission`] is an
//! edit here.

use std::sync::Arc;

use zl_aqm::{
    Admission, AqmConfigError, AqmParams, AqmPolicy, AqmStats, Arrival, BuildContext, PacketMeta,
    QueueView, Verdict,
};
use zl_core::{Color, Ecn, FlowId, Nanos};
use zl_zombie::ZombieList;

use crate::types::{ZlAqmKind, ZlAqmStats, ZlArrival, ZlQueueParams, ZlVerdict, ZL_NO_TIME};

/// A policy serving one egress queue of fixed capacity.
#[derive(Debug)]
pub(crate) struct Policy {
    policy: Admission<AqmPolicy>,
    capacity_packets: u32,
    capacity_bytes: u64,
}

impl Policy {
    /// Validates `params` for `queue` and builds the policy; SRED and ZL-RED run on `shared`
    /// when given, else on a list of their own. The caller has refused the kinds that hold
    /// their own queues (`AqmParams::holds_queues`).
    pub(crate) fn build(
        params: &AqmParams,
        queue: &ZlQueueParams,
        shared: Option<Arc<ZombieList>>,
    ) -> Result<Policy, AqmConfigError> {
        let mut ctx = BuildContext::new(queue.link_rate_bps, queue.capacity_packets);
        if let Some(list) = shared {
            ctx = ctx.with_zombie_list(list);
        }
        Ok(Policy {
            policy: Admission::new(params.build(&ctx)?),
            capacity_packets: queue.capacity_packets,
            capacity_bytes: queue.capacity_bytes,
        })
    }

    /// The decision for one arrival whose fields are in range (`ffi::arrival_in_range`).
    #[inline(always)]
    pub(crate) fn arrive<R: rand::RngCore + ?Sized>(
        &mut self,
        a: &ZlArrival,
        rng: &mut R,
    ) -> ZlVerdict {
        let (queue, pkt) = self.views(a);
        verdict(
            self.policy
                .admit(&Arrival::new(Nanos(a.now_ns), &queue, &pkt), rng),
        )
    }

    /// The queue and the packet as `zl_aqm` describes them.
    #[inline(always)]
    fn views(&self, a: &ZlArrival) -> (QueueView, PacketMeta) {
        let queue = QueueView {
            len_packets: a.queue_packets,
            len_bytes: a.queue_bytes,
            capacity_packets: self.capacity_packets,
            capacity_bytes: self.capacity_bytes,
            head_enqueued_at: time(a.head_enqueued_ns),
            idle_since: time(a.idle_since_ns),
        };
        (queue, packet(a))
    }

    /// A packet left the queue; `a` describes it and the queue after its departure.
    pub(crate) fn depart(&mut self, a: &ZlArrival) {
        let (queue, pkt) = self.views(a);
        self.policy.on_dequeue(Nanos(a.now_ns), &queue, &pkt);
    }

    /// The policy's counters.
    pub(crate) fn stats(&self) -> ZlAqmStats {
        aqm_stats(self.policy.stats())
    }

    /// The Zombie List the policy observes (SRED and ZL-RED), shared or its own.
    pub(crate) fn zombie_list(&self) -> Option<&Arc<ZombieList>> {
        match self.policy.policy() {
            AqmPolicy::Sred(p) => Some(p.zombie_list()),
            AqmPolicy::ZlRed(p) => Some(p.zombie_list()),
            _ => None,
        }
    }

    /// Which policy this is.
    pub(crate) fn kind(&self) -> ZlAqmKind {
        match self.policy.policy() {
            AqmPolicy::TailDrop(_) => ZlAqmKind::ZL_AQM_TAIL_DROP,
            AqmPolicy::Red(_) => ZlAqmKind::ZL_AQM_RED,
            AqmPolicy::Sred(_) => ZlAqmKind::ZL_AQM_SRED,
            AqmPolicy::ZlRed(_) => ZlAqmKind::ZL_AQM_ZL_RED,
            AqmPolicy::PriorityEcnRed(_) => ZlAqmKind::ZL_AQM_PRIORITY_ECN_RED,
            AqmPolicy::NonlinearRed(_) => ZlAqmKind::ZL_AQM_NONLINEAR_RED,
            AqmPolicy::Sojourn(_) => ZlAqmKind::ZL_AQM_SOJOURN,
            AqmPolicy::Pie(_) => ZlAqmKind::ZL_AQM_PIE,
        }
    }
}

/// Verdict counters as C sees them.
pub(crate) fn aqm_stats(s: &AqmStats) -> ZlAqmStats {
    ZlAqmStats {
        enqueued: s.enqueued,
        marked: s.marked,
        early_drops: s.early_drops,
        forced_drops: s.forced_drops,
        tail_drops: s.tail_drops,
    }
}

/// The packet of an arrival whose fields are in range, as `zl_aqm` describes it.
#[inline(always)]
pub(crate) fn packet(a: &ZlArrival) -> PacketMeta {
    PacketMeta {
        len: a.packet_len,
        flow: FlowId(a.flow_hash),
        ecn: Ecn::from_bits(a.ecn),
        has_cc_ext: a.has_cc_ext != 0,
        priority: a.priority,
        weight: a.weight,
        color: Color::ALL[usize::from(a.color)],
        src_host: a.src_host,
        dst_host: a.dst_host,
    }
}

#[inline(always)]
fn time(ns: u64) -> Option<Nanos> {
    (ns != ZL_NO_TIME).then_some(Nanos(ns))
}

#[inline(always)]
pub(crate) fn verdict(v: Verdict) -> ZlVerdict {
    match v {
        Verdict::Enqueue => ZlVerdict::ZL_VERDICT_ENQUEUE,
        Verdict::MarkCe => ZlVerdict::ZL_VERDICT_MARK,
        Verdict::EarlyDrop => ZlVerdict::ZL_VERDICT_EARLY_DROP,
        Verdict::ForcedDrop => ZlVerdict::ZL_VERDICT_FORCED_DROP,
        Verdict::TailDrop => ZlVerdict::ZL_VERDICT_TAIL_DROP,
    }
}
