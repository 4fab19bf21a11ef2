//! What the two engines share: a port with its egress stage ([`PortSlot`]), how a run ends
//! ([`StopReason`]), the check that forwarding names only ports the engine has
//! ([`UnknownPort`]), the receive step of one port ([`receive_port`] over each engine's
//! [`Intake`]), the one reload step ([`apply_egress`]), the last step of a run ([`flush_all`])
//! and the random streams' seeds. Below both engines ([`crate::dataplane`], [`crate::mt`])
//! and the builder.

use zl_core::Nanos;
use zl_port::{Batch, PacketBuf, PortError};
use zl_qos::{QosConfigError, QosEngine, QosParams};
use zl_zombie::ZombieConfig;

use crate::egress::{Egress, EgressUpdate};
use crate::forward::Forwarding;
use crate::reload::Applied;

/// Seeds of the independent random streams, derived from the run's seed so that adding a
/// generator port does not shift the AQM's draws.
pub(crate) fn stream_seed(seed: u64, stream: u64) -> u64 {
    // SplitMix64's output `stream` from the run's seed: distinct, well-mixed seeds per stream.
    zl_core::splitmix64(seed, stream)
}

/// The stream of the admissions' draws ([`stream_seed`]): the single-thread loop's, and the
/// threaded router's first transmit worker's.
pub(crate) const ADMIT_STREAM: u64 = 0;
/// The stream of the Zombie Lists' observations: the single-thread loop's, and the threaded
/// router's receive worker `w`'s is `OBSERVE_STREAM + w`. Apart from the admissions' so that
/// a burst's observations may all come before its admissions (`crate::stages`).
pub(crate) const OBSERVE_STREAM: u64 = 1000;

/// A port owned by the data plane (moved to its forwarding thread; split into its halves for a
/// threaded run).
pub type BoxedPort = Box<dyn zl_port::SplitPort>;

/// A port and its egress stage, as both loops hold them.
pub struct PortSlot {
    pub port: BoxedPort,
    pub egress: Egress,
}

/// How a run ended (a failed port is the `Err` of the run instead).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// Every source finished and every queue drained.
    Finished,
    /// The drain time after the sources' end ran out; what was queued is counted `shutdown`.
    DrainTimeout,
    /// Stopped from outside (SIGINT / SIGTERM).
    Interrupted,
}

/// An engine ([`crate::dataplane::Dataplane::new`], [`crate::mt::MtRouter::new`]) was given
/// forwarding that sends packets to a port it does not have.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{what} leads to port index {port}, but the data plane has {ports} ports")]
pub struct UnknownPort {
    /// `"a route"` or `"a bridge peer"`.
    pub what: &'static str,
    pub port: u16,
    pub ports: usize,
}

impl UnknownPort {
    /// Refuses forwarding that names a port index out of `ports`.
    pub(crate) fn check(forwarding: &Forwarding, ports: usize) -> Result<(), UnknownPort> {
        let missing = |p: &u16| *p as usize >= ports;
        let unknown = match forwarding {
            Forwarding::Router(table) => (table.egress_ports().into_iter())
                .find(missing)
                .map(|p| ("a route", p)),
            Forwarding::Kernel(statics) => {
                (statics.iter().map(|r| r.port).find(missing)).map(|p| ("a route", p))
            }
            Forwarding::Bridge(peer) => {
                (peer.iter().flatten().copied().find(missing)).map(|p| ("a bridge peer", p))
            }
        };
        match unknown {
            Some((what, port)) => Err(UnknownPort { what, port, ports }),
            None => Ok(()),
        }
    }
}

impl PortSlot {
    /// A port with its egress on `qos`, no Zombie List.
    pub fn new(port: BoxedPort, qos: QosEngine<PacketBuf>) -> Self {
        PortSlot {
            port,
            egress: Egress::new(qos, None),
        }
    }

    /// A port whose egress QoS decides on a Zombie List of its own (built with `list`), which
    /// the receive workers observe once per packet: the paper's one list per output link.
    pub fn on_own_list(
        port: BoxedPort,
        qos: &QosParams,
        list: ZombieConfig,
    ) -> Result<Self, QosConfigError> {
        Ok(PortSlot {
            port,
            egress: Egress::on_own_list(qos, list)?,
        })
    }
}

/// Installs each port's new egress from `updates` (by port index) into `ports` (reached
/// through `egress`), all or none: every update is checked before any is installed. The one
/// reload step of both loops.
pub(crate) fn apply_egress<P>(
    ports: &mut [P],
    updates: Vec<Option<EgressUpdate>>,
    egress: impl Fn(&mut P) -> &mut Egress,
) -> Applied {
    for (i, (p, u)) in ports.iter_mut().zip(&updates).enumerate() {
        if let Some(u) = u {
            egress(p)
                .check(u)
                .map_err(|e| format!("port {i}: {}: {}", e.key, e.reason))?;
        }
    }
    for (p, u) in ports.iter_mut().zip(updates) {
        if let Some(u) = u {
            egress(p)
                .apply(u)
                .map_err(|e| format!("{}: {}", e.key, e.reason))?;
        }
    }
    Ok(())
}

/// The last step of a run on both engines, after every egress stage's `shutdown`: every
/// port flushed, even after one failed, so each port sends what it holds; the first error is
/// the run's.
pub(crate) fn flush_all<'a>(
    ports: impl IntoIterator<Item = &'a mut BoxedPort>,
) -> Result<(), PortError> {
    let mut first = Ok(());
    for port in ports {
        if let Err(e) = port.flush() {
            if first.is_ok() {
                first = Err(e);
            }
        }
    }
    first
}

/// What an engine does with the bursts of one port in its receive step: each engine's own
/// receive, forwarding and bookkeeping, in the one order [`receive_port`] keeps.
pub(crate) trait Intake {
    /// One burst from the port into `batch` (empty before).
    fn recv(&mut self, now: Nanos, batch: &mut Batch) -> Result<(), PortError>;
    /// A burst's arrivals (not an empty one's) counted (`Fates::received_burst`) before any
    /// of it moves on.
    fn arrived(&mut self, batch: &Batch);
    /// The burst through the receive stage, leaving `batch` empty.
    fn forward(&mut self, now: Nanos, batch: &mut Batch);
    /// Between two bursts of the same port, when another may follow.
    fn between(&mut self, _now: Nanos) -> Result<(), PortError> {
        Ok(())
    }
}

/// The receive step of both engines for one port (or receive half): bursts until `budget`
/// packets (checked between bursts, so at most `budget + 31`) or an empty burst. Each burst is
/// counted and forwarded, what the port delivered before an error too, so the counters stay
/// balanced and no buffer is stranded in the batch; then the error is the port's turn's end.
/// Returns the packets received and whether the turn ended on an empty burst.
#[inline(always)]
pub(crate) fn receive_port(
    intake: &mut impl Intake,
    now: Nanos,
    budget: usize,
    batch: &mut Batch,
) -> (usize, Result<bool, PortError>) {
    let mut received = 0;
    let mut left = budget;
    while left > 0 {
        let result = intake.recv(now, batch);
        let n = batch.len();
        received += n;
        left = left.saturating_sub(n);
        if n > 0 {
            intake.arrived(batch);
        }
        intake.forward(now, batch);
        if let Err(e) = result {
            return (received, Err(e));
        }
        if n == 0 {
            return (received, Ok(true));
        }
        if left > 0 {
            if let Err(e) = intake.between(now) {
                return (received, Err(e));
            }
        }
    }
    (received, Ok(false))
}
