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

use crate::codel::{Codel, CodelParams};
use crate::dualpi2::{DualPi2, DualPi2Params};
use crate::fq_codel::{FqCodel, FqCodelParams};
use crate::isolation::Isolated;
use crate::nonlinear_red::{NonlinearRed, NonlinearRedParams};
use crate::pie::{Pie, PieParams};
use crate::priority_ecn::{PriorityEcnRed, PriorityEcnRedParams};
use crate::queues::{Discard, Discipline, Next, Queued};
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
    /// The most packets the queue can ever hold (a discipline's arena); `capacity_packets`
    /// unless set.
    pub ring_packets: u32,
    /// The queue's capacity in bytes (`u64::MAX`: bounded in packets only).
    pub capacity_bytes: u64,
}

impl BuildContext {
    /// A context for a queue of `capacity_packets` on a link of `link_rate_bps`, with no shared
    /// Zombie List.
    pub fn new(link_rate_bps: u64, capacity_packets: u32) -> Self {
        BuildContext {
            link_rate_bps,
            capacity_packets,
            zombie_list: None,
            ring_packets: capacity_packets,
            capacity_bytes: u64::MAX,
        }
    }

    /// A discipline's arena of `ring_packets` (at least `capacity_packets`) and its byte limit.
    pub fn with_buffer(mut self, ring_packets: u32, capacity_bytes: u64) -> Self {
        self.ring_packets = ring_packets.max(self.capacity_packets);
        self.capacity_bytes = capacity_bytes;
        self
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
    /// `kind = "codel"`.
    Codel(CodelParams),
    /// `kind = "fq-codel"`.
    FqCodel(FqCodelParams),
    /// `kind = "pie"`.
    Pie(PieParams),
    /// `kind = "dualpi2"`.
    #[serde(rename = "dualpi2")]
    DualPi2(DualPi2Params),
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
            AqmParams::Codel(_) => "codel",
            AqmParams::FqCodel(_) => "fq-codel",
            AqmParams::Pie(_) => "pie",
            AqmParams::DualPi2(_) => "dualpi2",
        }
    }

    /// True when the policy holds its packets in queues of its own ([`QueueDiscipline`],
    /// built by [`AqmParams::build_discipline`]): CoDel, FQ-CoDel, DualPI2 and ZL-RED with
    /// isolation. The others decide on the caller's FIFO ([`AqmParams::build`]).
    pub fn holds_queues(&self) -> bool {
        match self {
            AqmParams::Codel(_) | AqmParams::FqCodel(_) | AqmParams::DualPi2(_) => true,
            AqmParams::ZlRed(p) => p.isolation.is_some(),
            _ => false,
        }
    }

    /// Validates the parameters and builds a discipline that holds its own queues, or
    /// `Ok(None)` for a policy that decides on the caller's FIFO.
    pub fn build_discipline<T>(
        &self,
        ctx: &BuildContext,
    ) -> Result<Option<QueueDiscipline<T>>, AqmConfigError> {
        let (slots, packets, bytes) = (
            ctx.ring_packets.max(ctx.capacity_packets),
            ctx.capacity_packets,
            ctx.capacity_bytes,
        );
        Ok(Some(match self {
            AqmParams::Codel(p) => {
                QueueDiscipline::Codel(Codel::new(p.validate()?, slots, packets, bytes))
            }
            AqmParams::FqCodel(p) => {
                QueueDiscipline::FqCodel(FqCodel::new(p.validate()?, slots, packets, bytes))
            }
            AqmParams::DualPi2(p) => {
                QueueDiscipline::DualPi2(DualPi2::new(p.validate()?, slots, packets, bytes))
            }
            AqmParams::ZlRed(p) => {
                let Some(iso) = &p.isolation else {
                    return Ok(None);
                };
                let cfg = iso.validate(p, ctx.capacity_packets)?;
                let list = match &ctx.zombie_list {
                    Some(list) => Arc::clone(list),
                    None => Arc::new(ZombieList::new(cfg.normal.zombie)),
                };
                QueueDiscipline::Isolated(Isolated::new(
                    cfg,
                    list,
                    slots,
                    packets,
                    bytes,
                    ctx.link_rate_bps,
                ))
            }
            _ => return Ok(None),
        }))
    }

    /// Validates the parameters and builds the runtime policy of a FIFO the caller keeps. A
    /// policy that holds its own queues ([`AqmParams::holds_queues`]) is refused here: build it
    /// with [`AqmParams::build_discipline`].
    pub fn build(&self, ctx: &BuildContext) -> Result<AqmPolicy, AqmConfigError> {
        if self.holds_queues() {
            return Err(AqmConfigError {
                param: "kind",
                value: self.kind().to_owned(),
                expected: "a policy deciding on a FIFO (this one holds its own queues: \
                           AqmParams::build_discipline)"
                    .to_owned(),
            });
        }
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
            AqmParams::Pie(p) => AqmPolicy::Pie(Pie::new(p.validate()?)),
            AqmParams::Codel(_) | AqmParams::FqCodel(_) | AqmParams::DualPi2(_) => {
                unreachable!("refused above: holds its own queues")
            }
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
    /// PIE.
    Pie(Pie),
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
            AqmPolicy::Pie($p) => $e,
        }
    };
}

impl AqmPolicy {
    /// The `kind` it was configured by.
    pub fn kind(&self) -> &'static str {
        match self {
            AqmPolicy::TailDrop(_) => "tail-drop",
            AqmPolicy::Red(_) => "red",
            AqmPolicy::Sred(_) => "sred",
            AqmPolicy::ZlRed(_) => "zl-red",
            AqmPolicy::PriorityEcnRed(_) => "priority-ecn-red",
            AqmPolicy::NonlinearRed(_) => "nonlinear-red",
            AqmPolicy::Sojourn(_) => "sojourn",
            AqmPolicy::Pie(_) => "pie",
        }
    }

    /// True when the policy reads [`QueueView::head_enqueued_at`] (the sojourn manager, in
    /// its decision and on a tail drop). For every other policy a caller may leave that field
    /// `None` whatever the queue holds: the QoS engine then does not read its ring's head on
    /// each arrival.
    #[inline]
    pub fn reads_head_time(&self) -> bool {
        match self {
            AqmPolicy::Sojourn(_) => true,
            AqmPolicy::Pie(p) => p.reads_head_time(),
            _ => false,
        }
    }

    /// True when the policy acts on departures ([`Aqm::on_dequeue`]: PIE's dequeue-rate
    /// estimator); the others' hook does nothing, and a caller may skip building its view.
    #[inline]
    pub fn reads_departures(&self) -> bool {
        matches!(self, AqmPolicy::Pie(_))
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
            (P::Pie(n), P::Pie(o)) => n.inherit_state(o),
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

/// Every discipline that holds its own queues, behind one type, dispatched by `match`.
// The variants differ in size (the isolation's two ZL-RED admissions and its box header);
// a holder keeps the whole enum behind one box, off its FIFO path.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum QueueDiscipline<T> {
    /// CoDel on one FIFO.
    Codel(Codel<T>),
    /// FQ-CoDel.
    FqCodel(FqCodel<T>),
    /// DualPI2.
    DualPi2(DualPi2<T>),
    /// ZL-RED with flow isolation.
    Isolated(Isolated<T>),
}

macro_rules! dispatch_queues {
    ($self:expr, $d:ident => $e:expr) => {
        match $self {
            QueueDiscipline::Codel($d) => $e,
            QueueDiscipline::FqCodel($d) => $e,
            QueueDiscipline::DualPi2($d) => $e,
            QueueDiscipline::Isolated($d) => $e,
        }
    };
}

impl<T> QueueDiscipline<T> {
    /// True when the discipline reads the packets' hosts (`PacketMeta::src_host` and
    /// `dst_host`): FQ-CoDel in a host mode, isolation by host. A caller that fills them only
    /// for such a discipline saves two hashes per packet elsewhere.
    pub fn reads_hosts(&self) -> bool {
        match self {
            QueueDiscipline::FqCodel(f) => f.config().isolate != crate::HostIsolation::Flows,
            QueueDiscipline::Isolated(i) => i.config().by != crate::IsolateBy::Flow,
            QueueDiscipline::Codel(_) | QueueDiscipline::DualPi2(_) => false,
        }
    }

    /// The `kind` it was configured by.
    pub fn kind(&self) -> &'static str {
        match self {
            QueueDiscipline::Codel(_) => "codel",
            QueueDiscipline::FqCodel(_) => "fq-codel",
            QueueDiscipline::DualPi2(_) => "dualpi2",
            QueueDiscipline::Isolated(_) => "zl-red",
        }
    }

    /// Takes over `old`'s running state where it is the same discipline (its counters, its
    /// controller, the isolation's penalty box); the queued packets themselves are moved by
    /// the caller ([`Discipline::drain`] from the old, [`Discipline::adopt`] into this one).
    pub fn inherit_state(&mut self, old: &QueueDiscipline<T>) {
        use QueueDiscipline as Q;
        match (self, old) {
            (Q::Codel(n), Q::Codel(o)) => n.inherit_state(o),
            (Q::FqCodel(n), Q::FqCodel(o)) => n.inherit_state(o),
            (Q::DualPi2(n), Q::DualPi2(o)) => n.inherit_state(o),
            (Q::Isolated(n), Q::Isolated(o)) => n.inherit_state(o),
            _ => {}
        }
    }

    /// The isolation discipline, when it is one (its penalty box for reports).
    pub fn isolated(&self) -> Option<&Isolated<T>> {
        match self {
            QueueDiscipline::Isolated(i) => Some(i),
            _ => None,
        }
    }
}

impl<T> Discipline<T> for QueueDiscipline<T> {
    #[inline]
    fn enqueue<R: rand::RngCore + ?Sized>(
        &mut self,
        now: Nanos,
        pkt: &PacketMeta,
        observed: Option<&zl_zombie::Observation>,
        item: T,
        rng: &mut R,
        mark: impl FnOnce(&mut T),
        discard: &mut impl FnMut(Queued<T>, Discard),
    ) -> Result<Verdict, (Verdict, T)> {
        dispatch_queues!(self, d => d.enqueue(now, pkt, observed, item, rng, mark, discard))
    }

    #[inline]
    fn dequeue<R: rand::RngCore + ?Sized>(
        &mut self,
        now: Nanos,
        rng: &mut R,
        discard: &mut impl FnMut(Queued<T>, Discard),
    ) -> Next<T> {
        dispatch_queues!(self, d => d.dequeue(now, rng, discard))
    }

    #[inline]
    fn len_packets(&self) -> u32 {
        dispatch_queues!(self, d => d.len_packets())
    }

    #[inline]
    fn len_bytes(&self) -> u64 {
        dispatch_queues!(self, d => d.len_bytes())
    }

    fn set_capacity(&mut self, packets: u32, bytes: u64) {
        dispatch_queues!(self, d => d.set_capacity(packets, bytes))
    }

    fn adopt(&mut self, q: Queued<T>) -> Result<(), Queued<T>> {
        dispatch_queues!(self, d => d.adopt(q))
    }

    fn drain(&mut self, f: impl FnMut(Queued<T>)) {
        dispatch_queues!(self, d => d.drain(f))
    }
}
