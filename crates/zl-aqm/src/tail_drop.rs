//! Tail drop (drop-tail FIFO): admit while the buffer has room, drop otherwise
//! (spec/01 §1 step 6, the baseline every paper compares against).
//!
//! No parameters: the capacity belongs to the queue and reaches the policy through
//! [`QueueView`].

use serde::{Deserialize, Serialize};

use crate::{Aqm, AqmStats, Nanos, PacketMeta, QueueView, Verdict};

/// Config for tail drop. It has no fields; the type exists so a config file can name the
/// policy (`kind = "tail-drop"`) and reject stray keys.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TailDropParams {}

impl TailDropParams {
    /// The policy (nothing to validate).
    pub fn build(&self) -> TailDrop {
        TailDrop::default()
    }
}

/// Drop-tail state: only the counters.
#[derive(Clone, Debug, Default)]
pub struct TailDrop {
    stats: AqmStats,
}

impl Aqm for TailDrop {
    fn on_arrival<R: rand::RngCore + ?Sized>(
        &mut self,
        _now: Nanos,
        _rng: &mut R,
        queue: &QueueView,
        pkt: &PacketMeta,
    ) -> Verdict {
        let v = if queue.is_full_for(pkt.len) {
            Verdict::TailDrop
        } else {
            Verdict::Enqueue
        };
        self.stats.record(v);
        v
    }

    fn stats(&self) -> &AqmStats {
        &self.stats
    }
}
