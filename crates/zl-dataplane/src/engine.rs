//! What the two engines share: a port with its egress stage ([`PortSlot`]), how a run ends
//! ([`StopReason`]), the check that forwarding names only ports the engine has
//! ([`UnknownPort`]), the one reload step ([`apply_egress`]) and the random streams' seeds.
//! Below both engines ([`crate::dataplane`], [`crate::mt`]) and the builder.

use zl_port::{PacketBuf, PortError};
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

/// [`Dataplane::new`] was given forwarding that sends packets to a port it does not have.
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
