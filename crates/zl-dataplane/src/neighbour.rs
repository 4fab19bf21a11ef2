//! Kernel routing's neighbour stage, one per forwarding thread, the same for both engines: a
//! packet whose next hop has no MAC yet waits here (bounded per next hop and in next hops,
//! `zl_fib::NeighbourWait`) while the kernel resolves it; once per poll or round the stage
//! takes in the newest table and gives back the packets it resolves (to be routed again) and
//! those that waited too long (dropped as `no_neighbour` with Host Unreachable).
//!
//! Each thread keeps its own wait (no lock on the packet path); the resolve requests of all
//! threads go to the one follower thread through its lock-free queue. A next hop that packets
//! on two receive workers wait for is asked for twice, which the kernel answers once.

use std::net::IpAddr;

use zl_core::Nanos;
use zl_fib::{Hold, NeighbourWait};
use zl_port::{BufPool, PacketBuf};
use zl_wire::MacAddr;

use crate::fates::Fates;
use crate::forward::Forwarder;
use crate::stats::DropCause;

/// How long a next hop's packets wait for its MAC: the kernel gives up after
/// `mcast_solicit` (3) probes `retrans_time` (1 s) apart.
const WAIT: Nanos = Nanos::from_millis(3000);
/// Next hops that may have packets waiting at once, per thread.
const HOPS: usize = 256;
/// Packets per next hop when the config does not say (`routing.unres_qlen`).
pub(crate) const DEFAULT_UNRES_QLEN: usize = 32;

/// One thread's waiting packets and its scratch space (no allocation per poll once grown).
pub(crate) struct NeighbourStage {
    wait: NeighbourWait<PacketBuf>,
    released: Vec<(u16, MacAddr, PacketBuf)>,
}

impl NeighbourStage {
    /// At most `unres_qlen` packets for each next hop.
    pub(crate) fn new(unres_qlen: usize) -> Self {
        NeighbourStage {
            wait: NeighbourWait::new(unres_qlen, HOPS, WAIT),
            released: Vec::new(),
        }
    }

    /// Packets held now.
    pub(crate) fn len(&self) -> usize {
        self.wait.len()
    }

    /// True when no packet is held.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.wait.is_empty()
    }

    /// A packet to `dst` whose next hop has no MAC (forwarding said `no_neighbour`): held,
    /// the kernel asked to resolve the next hop for the first one; or, past the bounds,
    /// left in `dropped` with the packets of a next hop that gave its place up to this one
    /// (count them `no_neighbour`, no ICMP error: the kernel's queue overflow sends none). A
    /// next hop the wait has no place for is still resolved, so later packets find its MAC.
    pub(crate) fn hold(
        &mut self,
        now: Nanos,
        forwarder: &Forwarder,
        buf: PacketBuf,
        dst: Option<IpAddr>,
        dropped: &mut Vec<PacketBuf>,
    ) {
        let Some((port, hop)) = dst.and_then(|d| forwarder.unresolved(d)) else {
            return dropped.push(buf);
        };
        match self.wait.hold(now, port, hop, buf, dropped) {
            Hold::HeldFirst => forwarder.request_resolve(port, hop),
            Hold::Held => {}
            Hold::Full(buf) => dropped.push(buf),
            Hold::Refused(buf) => {
                forwarder.request_resolve(port, hop);
                dropped.push(buf);
            }
        }
    }

    /// Once per poll with packets waiting (after `Forwarder::refresh`, the thread's one place
    /// to take in a new table): the waiting packets the table resolves, in arrival order per
    /// next hop, go to
    /// `released` (route them again: their MAC, TTL and queue as any packet's); those that
    /// waited too long to `expired` (`no_neighbour`, with Host Unreachable as the kernel
    /// sends when ARP / NDP fails for a queued packet).
    ///
    /// `changed`: whether the caller's `Forwarder::refresh` just took in a new table (the
    /// caller refreshes first, so that a thread with nothing waiting, every thread under
    /// static routing, pays one load and compare per poll and nothing else).
    pub(crate) fn follow(
        &mut self,
        now: Nanos,
        changed: bool,
        forwarder: &Forwarder,
        released: &mut Vec<PacketBuf>,
        expired: &mut Vec<PacketBuf>,
    ) {
        if changed {
            if let Some(fib) = forwarder.kernel_fib() {
                self.wait.release(fib, &mut self.released);
            }
            released.extend(self.released.drain(..).map(|(_, _, buf)| buf));
        }
        self.wait.expire(now, expired);
    }

    /// The end of a run, on both engines: every packet still waiting is not sent, counted
    /// `shutdown`, its buffer back in `pool`.
    pub(crate) fn shut_down(&mut self, fates: &mut Fates, pool: &mut BufPool) {
        let mut waiting = Vec::with_capacity(self.len());
        self.wait.expire(Nanos(u64::MAX), &mut waiting);
        for buf in waiting {
            fates.dropped(&buf, DropCause::Shutdown);
            pool.free(buf);
        }
    }
}
