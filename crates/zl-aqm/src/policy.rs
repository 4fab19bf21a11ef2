//! Static dispatch over every policy (smoltcp's congestion-controller enum style) and the
//! serde-tagged parameters a config file names them by.
//!
//! ```toml
//! [aqm]
//! kind = "red"
//! min_th = 5
//! max_th = 15
//! ```

use serde::{Deserialize, Serialize};

use crate::nonlinear_red::{NonlinearRed, NonlinearRedParams};
use crate::priority_ecn::{PriorityEcnRed, PriorityEcnRedParams};
use crate::red::{Red, RedParams};
use crate::sojourn::{Sojourn, SojournParams};
use crate::tail_drop::{TailDrop, TailDropParams};
use crate::{Aqm, AqmConfigError, AqmStats, Nanos, PacketMeta, QueueView, Verdict};

/// What a policy needs that its parameters cannot say: facts about the queue and port it
/// serves, and state shared between queues.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct BuildContext {
    /// Egress link rate in bit/s (RED's idle decay time `s`).
    pub link_rate_bps: u64,
    /// The queue's capacity `B` in packets (SRED / ZL-RED thresholds `B/6`, `B/3`).
    pub capacity_packets: u32,
}

impl BuildContext {
    pub fn new(link_rate_bps: u64, capacity_packets: u32) -> Self {
        BuildContext {
            link_rate_bps,
            capacity_packets,
        }
    }
}

/// A policy's parameters as read from a config file, tagged by `kind`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum AqmParams {
    TailDrop(TailDropParams),
    Red(RedParams),
    PriorityEcnRed(PriorityEcnRedParams),
    NonlinearRed(NonlinearRedParams),
    Sojourn(SojournParams),
}

impl Default for AqmParams {
    fn default() -> Self {
        AqmParams::TailDrop(TailDropParams::default())
    }
}

impl AqmParams {
    /// The `kind` tag as written in config.
    pub fn kind(&self) -> &'static str {
        match self {
            AqmParams::TailDrop(_) => "tail-drop",
            AqmParams::Red(_) => "red",
            AqmParams::PriorityEcnRed(_) => "priority-ecn-red",
            AqmParams::NonlinearRed(_) => "nonlinear-red",
            AqmParams::Sojourn(_) => "sojourn",
        }
    }

    /// Validates the parameters and builds the runtime policy.
    pub fn build(&self, ctx: &BuildContext) -> Result<AqmPolicy, AqmConfigError> {
        Ok(match self {
            AqmParams::TailDrop(p) => AqmPolicy::TailDrop(p.build()),
            AqmParams::Red(p) => AqmPolicy::Red(Red::new(p.validate(ctx.link_rate_bps)?)),
            AqmParams::PriorityEcnRed(p) => {
                AqmPolicy::PriorityEcnRed(PriorityEcnRed::new(p.validate(ctx.link_rate_bps)?))
            }
            AqmParams::NonlinearRed(p) => AqmPolicy::NonlinearRed(NonlinearRed::new(p.validate()?)),
            AqmParams::Sojourn(p) => AqmPolicy::Sojourn(Sojourn::new(p.validate()?)),
        })
    }
}

/// Every policy behind one type, dispatched by `match` (no vtable, inlinable).
#[derive(Clone, Debug)]
pub enum AqmPolicy {
    TailDrop(TailDrop),
    Red(Red),
    PriorityEcnRed(PriorityEcnRed),
    NonlinearRed(NonlinearRed),
    Sojourn(Sojourn),
}

macro_rules! dispatch {
    ($self:expr, $p:ident => $e:expr) => {
        match $self {
            AqmPolicy::TailDrop($p) => $e,
            AqmPolicy::Red($p) => $e,
            AqmPolicy::PriorityEcnRed($p) => $e,
            AqmPolicy::NonlinearRed($p) => $e,
            AqmPolicy::Sojourn($p) => $e,
        }
    };
}

impl Aqm for AqmPolicy {
    #[inline]
    fn on_arrival<R: rand::RngCore + ?Sized>(
        &mut self,
        now: Nanos,
        rng: &mut R,
        queue: &QueueView,
        pkt: &PacketMeta,
    ) -> Verdict {
        dispatch!(self, p => p.on_arrival(now, rng, queue, pkt))
    }

    #[inline]
    fn on_dequeue(&mut self, now: Nanos, queue: &QueueView, pkt: &PacketMeta) {
        dispatch!(self, p => p.on_dequeue(now, queue, pkt))
    }

    fn stats(&self) -> &AqmStats {
        dispatch!(self, p => p.stats())
    }
}
