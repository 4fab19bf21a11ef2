//! The Diffserv bottleneck of docs/algorithms/diffserv.md: the router's own `zl_qos::QosEngine`
//! (DSCP classifier, trTCM/srTCM meters, a `zl-aqm` policy per class or per color, bounded class
//! queues, WRR/DRR and strict priority, optional shaper), configured by the same `QosParams` as the
//! router.
//!
//! The engine holds the simulator's packet handles (`u32`). Re-marking is reported by the
//! engine but not applied: the simulated path has no later hop that reads the DSCP. A class
//! sized by the `sqrt-n-live` rule is offered the Zombie List's estimate 1/P(t) at every
//! arrival, as the router offers it per packet.

use std::sync::Arc;

use zl_aqm::{AqmStats, PacketMeta, Verdict};
use zl_core::Nanos;
use zl_qos::{Dequeue, QosEngine, QosParams};
use zl_zombie::ZombieList;

use crate::bottleneck::{Bottleneck, Dequeued, SimRng};
use crate::sim::SimError;

/// `QosEngine` behind the [`Bottleneck`] trait.
pub struct QosBottleneck {
    engine: QosEngine<u32>,
    stats: AqmStats,
    bytes: u64,
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
        let engine = QosEngine::new(&p).map_err(|e| SimError::Invalid {
            key: "bottleneck.qos".into(),
            reason: e.to_string(),
        })?;
        Ok(QosBottleneck {
            engine,
            stats: AqmStats::default(),
            bytes: 0,
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
        if v.admits() {
            self.bytes += meta.len as u64;
        }
        (v, c.class as u8)
    }

    fn dequeue(&mut self, now: Nanos) -> Option<Dequeued> {
        match self.engine.dequeue(now) {
            Dequeue::Packet(d) => {
                self.bytes -= (d.meta.len as u64).min(self.bytes);
                Some(Dequeued {
                    handle: d.item,
                    enqueued_at: now - d.sojourn,
                })
            }
            // `build` refuses a shaper, so nothing is ever held.
            Dequeue::Hold { .. } | Dequeue::Empty => None,
        }
    }

    fn len_packets(&self) -> u32 {
        self.engine.len() as u32
    }

    fn len_bytes(&self) -> u64 {
        self.bytes
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
