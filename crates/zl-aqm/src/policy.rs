//! Static dispatch over every policy (smoltcp's congestion-controller enum style) and the
//! serde-tagged parameters a config file names them by.
//!
//! ```toml
//! [aqm]
//! kind = "red"
//! min_th = 5
//! max_th = 15
//! ```

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use zl_zombie::ZombieList;

use crate::nonlinear_red::{NonlinearRed, NonlinearRedParams};
use crate::priority_ecn::{PriorityEcnRed, PriorityEcnRedParams};
use crate::red::{Red, RedParams};
use crate::sojourn::{Sojourn, SojournParams};
use crate::sred::{Sred, SredParams};
use crate::tail_drop::{TailDrop, TailDropParams};
use crate::zlred::{ZlRed, ZlRedParams};
use crate::{Aqm, AqmConfigError, Arrival, Nanos, PacketMeta, QueueView, Verdict};

/// What a policy needs that its parameters cannot say: facts about the queue and port it
/// serves, and state shared between queues.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct BuildContext {
    /// Egress link rate in bit/s (RED's idle decay time `s`).
    pub link_rate_bps: u64,
    /// The queue's capacity `B` in packets (SRED / ZL-RED thresholds `B/6`, `B/3`).
    pub capacity_packets: u32,
    /// A Zombie List shared by several SRED / ZL-RED queues or forwarding threads; `None`
    /// gives each such policy its own list built from its `zombie` parameters.
    pub zombie_list: Option<Arc<ZombieList>>,
}

impl BuildContext {
    /// A context for a queue of `capacity_packets` on a link of `link_rate_bps`, with no shared
    /// Zombie List.
    pub fn new(link_rate_bps: u64, capacity_packets: u32) -> Self {
        BuildContext {
            link_rate_bps,
            capacity_packets,
            zombie_list: None,
        }
    }

    /// Shares `list` with every SRED / ZL-RED policy built from this context.
    pub fn with_zombie_list(mut self, list: Arc<ZombieList>) -> Self {
        self.zombie_list = Some(list);
        self
    }
}

/// A policy's parameters as read from a config file, tagged by `kind`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum AqmParams {
    /// `kind = "tail-drop"`.
    TailDrop(TailDropParams),
    /// `kind = "red"`.
    Red(RedParams),
    /// `kind = "sred"`.
    Sred(SredParams),
    /// `kind = "zl-red"`.
    ZlRed(ZlRedParams),
    /// `kind = "priority-ecn-red"`.
    PriorityEcnRed(PriorityEcnRedParams),
    /// `kind = "nonlinear-red"`.
    NonlinearRed(NonlinearRedParams),
    /// `kind = "sojourn"`.
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
            AqmParams::Sred(_) => "sred",
            AqmParams::ZlRed(_) => "zl-red",
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
            AqmParams::Sred(p) => {
                let cfg = p.validate(ctx.capacity_packets)?;
                AqmPolicy::Sred(match &ctx.zombie_list {
                    Some(list) => Sred::with_list(cfg, Arc::clone(list)),
                    None => Sred::new(cfg),
                })
            }
            AqmParams::ZlRed(p) => {
                let cfg = p.validate(ctx.capacity_packets)?;
                AqmPolicy::ZlRed(match &ctx.zombie_list {
                    Some(list) => ZlRed::with_list(cfg, Arc::clone(list)),
                    None => ZlRed::new(cfg),
                })
            }
            AqmParams::PriorityEcnRed(p) => {
                AqmPolicy::PriorityEcnRed(PriorityEcnRed::new(p.validate(ctx.link_rate_bps)?))
            }
            AqmParams::NonlinearRed(p) => {
                AqmPolicy::NonlinearRed(NonlinearRed::new(p.validate(ctx.link_rate_bps)?))
            }
            AqmParams::Sojourn(p) => AqmPolicy::Sojourn(Sojourn::new(p.validate()?)),
        })
    }
}

/// Every policy behind one type, dispatched by `match` (no vtable, inlinable).
#[derive(Debug)]
pub enum AqmPolicy {
    /// Drop-tail.
    TailDrop(TailDrop),
    /// RED / ECN.
    Red(Red),
    /// SRED.
    Sred(Sred),
    /// ZL-RED.
    ZlRed(ZlRed),
    /// Priority-weighted ECN RED.
    PriorityEcnRed(PriorityEcnRed),
    /// Exponential nonlinear RED.
    NonlinearRed(NonlinearRed),
    /// The per-color sojourn-time manager.
    Sojourn(Sojourn),
}

macro_rules! dispatch {
    ($self:expr, $p:ident => $e:expr) => {
        match $self {
            AqmPolicy::TailDrop($p) => $e,
            AqmPolicy::Red($p) => $e,
            AqmPolicy::Sred($p) => $e,
            AqmPolicy::ZlRed($p) => $e,
            AqmPolicy::PriorityEcnRed($p) => $e,
            AqmPolicy::NonlinearRed($p) => $e,
            AqmPolicy::Sojourn($p) => $e,
        }
    };
}

impl AqmPolicy {
    /// True when the policy reads [`QueueView::head_enqueued_at`] (the sojourn manager, in
    /// its decision and on a tail drop). For every other policy a caller may leave that field
    /// `None` whatever the queue holds: the QoS engine then does not read its ring's head on
    /// each arrival.
    #[inline]
    pub fn reads_head_time(&self) -> bool {
        matches!(self, AqmPolicy::Sojourn(_))
    }

    /// Takes over `old`'s running state where `old` is the same policy, keeping this one's
    /// parameters: the averages, the count since the last mark or drop, the latest terms.
    /// A live reconfiguration then goes on from where the old policy was instead of from an
    /// empty queue's average. A different policy keeps its fresh state: nothing of the old
    /// one means the same to it. decided: not in the papers, which never change a running
    /// policy; a RED average re-learnt from zero would under-drop for about `1 / w_q` packets.
    pub fn inherit_state(&mut self, old: &AqmPolicy) {
        use AqmPolicy as P;
        match (self, old) {
            (P::Red(n), P::Red(o)) => n.inherit_state(o),
            (P::Sred(n), P::Sred(o)) => n.inherit_state(o),
            (P::ZlRed(n), P::ZlRed(o)) => n.inherit_state(o),
            (P::PriorityEcnRed(n), P::PriorityEcnRed(o)) => n.inherit_state(o),
            (P::NonlinearRed(n), P::NonlinearRed(o)) => n.inherit_state(o),
            (P::Sojourn(n), P::Sojourn(o)) => n.inherit_state(o),
            _ => {}
        }
    }
}

impl Aqm for AqmPolicy {
    /// ZL-RED, the data plane's default, is tested for first with one compare; the others go
    /// through the `match`. Always inlined, so that a caller's loop carries no call, prologue
    /// or jump table around the decision (measured in `red_decision`, docs/performance/dataplane.md).
    #[inline(always)]
    fn decide<R: rand::RngCore + ?Sized>(&mut self, arrival: &Arrival<'_>, rng: &mut R) -> Verdict {
        if let AqmPolicy::ZlRed(p) = self {
            return p.decide(arrival, rng);
        }
        // The others on copies of the packet and the observation (`Arrival::detached`): their
        // out-of-line calls then borrow these, not the caller's.
        let (pkt, zombie) = arrival.detached();
        let arrival = Arrival {
            pkt: &pkt,
            zombie: zombie.as_ref(),
            ..*arrival
        };
        dispatch!(self, p => p.decide(&arrival, rng))
    }

    #[inline]
    fn on_tail_drop(&mut self, arrival: &Arrival<'_>) {
        dispatch!(self, p => p.on_tail_drop(arrival))
    }

    #[inline]
    fn on_dequeue(&mut self, now: Nanos, queue: &QueueView, pkt: &PacketMeta) {
        dispatch!(self, p => p.on_dequeue(now, queue, pkt))
    }
}
