//! The Diffserv bottleneck of docs/algorithms/diffserv.md: the router's own `zl_qos::QosEngine`
//! (DSCP classifier, trTCM/srTCM meters, a `zl-aqm` policy per class or per color, bounded class
//! queues, WRR/DRR and strict priority, optional shaper), configured by the same `QosParams` as the
//! router.
//!
//! The engine holds the simulator's packet handles (`u32`). Re-marking is reported by the
//! engine but not applied: the simulated path has no later hop that reads the DSCP. A class
//! sized by the `sqrt-n-live` rule is offered the Zombie List's estimate 1/P(t) at every
//! arrival, as the router offers it per packet.
//!
//! A class whose policy holds its own queues (CoDel, FQ-CoDel, DualPI2, ZL-RED with isolation)
//! marks at dequeue through the engine's marker, which sets [`MARKED`] in the handle (the
//! engine's marker is a plain `fn`, with no access to the simulator's packets); the packets it
//! discards after admission and its rate-limited sub-queues' holds reach the simulator as a
//! [`crate::discipline::DisciplineQueue`]'s do.

use std::sync::Arc;

use zl_aqm::{AqmStats, Discard, PacketMeta, Verdict};
use zl_core::Nanos;
use zl_qos::{QosEngine, QosParams};
use zl_zombie::ZombieList;

use crate::bottleneck::{Bottleneck, Dequeue, Dequeued, SimRng};
use crate::sim::SimError;

/// The handle bit a dequeue-time mark sets. Handles index the simulator's packet arena, which
/// would need 2^31 packets in flight at once to reach it.
pub const MARKED: u32 = 1 << 31;

fn mark_handle(h: &mut u32) -> bool {
    *h |= MARKED;
    true
}

/// `QosEngine` behind the [`Bottleneck`] trait.
pub struct QosBottleneck {
    engine: QosEngine<u32>,
    stats: AqmStats,
    zombies: Option<Arc<ZombieList>>,
    /// Bytes per packet used to express byte capacities in packets for reports.
    typical_len: u32,
}

impl QosBottleneck {
    /// Builds the engine for a link of `rate_bps` (used when `link_rate_bps` is not set).
    /// `zombies` feeds the `sqrt-n-live` classes; `typical_len` converts byte capacities to
    /// packets in reports.
    pub fn build(
        params: &QosParams,
        rate_bps: f64,
        zombies: Option<Arc<ZombieList>>,
        typical_len: u32,
    ) -> Result<Self, SimError> {
        if params.shaper.is_some() {
            return Err(SimError::Invalid {
                key: "bottleneck.qos.shaper".into(),
                reason: "the simulated link is the shaper: set bottleneck.rate_mbps instead".into(),
            });
        }
        let mut p = params.clone();
        p.link_rate_bps.get_or_insert(rate_bps as u64);
        let mut engine = QosEngine::new(&p).map_err(|e| SimError::Invalid {
            key: "bottleneck.qos".into(),
            reason: e.to_string(),
        })?;
        engine.set_marker(mark_handle);
        Ok(QosBottleneck {
            engine,
            stats: AqmStats::default(),
            zombies,
            typical_len: typical_len.max(1),
        })
    }
}

impl Bottleneck for QosBottleneck {
    fn enqueue(
        &mut self,
        now: Nanos,
        rng: &mut SimRng,
        meta: &mut PacketMeta,
        dscp: Option<u8>,
        handle: u32,
    ) -> (Verdict, u8) {
        if let Some(z) = &self.zombies {
            self.engine.offer_zombie_estimate(now, z);
        }
        let (c, r) = self.engine.enqueue(now, rng, dscp, *meta, handle, |_| {});
        meta.color = c.color;
        let v = match r {
            Ok(v) => v,
            Err(d) => d.verdict,
        };
        self.stats.record(v);
        (v, c.class as u8)
    }

    fn dequeue(&mut self, now: Nanos) -> Dequeue {
        match self.engine.dequeue(now) {
            zl_qos::Dequeue::Packet(d) => Dequeue::Packet(Dequeued {
                handle: d.item & !MARKED,
                enqueued_at: now - d.sojourn,
                mark: d.item & MARKED != 0,
            }),
            // `build` refuses a shaper: only a class's rate-limited sub-queue holds.
            zl_qos::Dequeue::Hold { until } => Dequeue::Hold(until),
            zl_qos::Dequeue::Empty => Dequeue::Empty,
        }
    }

    fn take_discarded(&mut self, f: &mut dyn FnMut(u32, Discard)) {
        if self.engine.has_discarded() {
            self.engine.take_discarded(|d| f(d.item & !MARKED, d.cause));
        }
    }

    fn seed_dequeue(&mut self, seed: u64) {
        self.engine.seed_dequeue(seed);
    }

    fn len_packets(&self) -> u32 {
        self.engine.len() as u32
    }

    fn len_bytes(&self) -> u64 {
        (0..self.classes())
            .filter_map(|c| self.engine.queue_len(c))
            .map(|(_, bytes)| bytes)
            .sum()
    }

    fn classes(&self) -> usize {
        self.engine.class_names().len()
    }

    fn stats(&self) -> AqmStats {
        self.stats
    }

    fn capacity_packets(&self) -> u32 {
        (0..self.classes())
            .filter_map(|c| self.engine.capacity(c))
            .map(|cap| (cap.bytes / self.typical_len as u64).min(cap.packets as u64) as u32)
            .sum()
    }
}
