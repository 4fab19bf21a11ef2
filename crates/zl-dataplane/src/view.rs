//! What the final table ([`crate::report`]) and the metrics endpoint ([`crate::metrics`]) read
//! from a router: the single-thread [`Dataplane`] or a multi-threaded run
//! ([`crate::mt::MtRouter`] at the end, a progress snapshot during the run).

use serde::Serialize;
use zl_core::Nanos;
use zl_port::{PacketBuf, PortCounters};
use zl_qos::QosEngine;
use zl_zombie::ZombieList;

use crate::egress::QueueLengthHistogram;
use crate::flows::FlowTable;
use crate::icmp::IcmpCounters;
use crate::stats::{FateCounters, GroupStats};

/// A read-only view of a router's counters, by port index.
pub trait RouterView {
    /// Fate of every packet received so far.
    fn totals(&self) -> FateCounters;
    /// Fate per generator flow group.
    fn groups(&self) -> &[GroupStats];
    /// Packets waiting (egress queues, and the receive -> transmit rings of a threaded run).
    fn queued(&self) -> u64;
    /// Number of ports.
    fn port_count(&self) -> usize;
    fn port_name(&self, port: usize) -> &str;
    fn port_counters(&self, port: usize) -> PortCounters;
    /// The egress QoS engine of `port` (classes, AQM counters, queue lengths).
    fn qos(&self, port: usize) -> &QosEngine<PacketBuf>;
    /// Queue-length samples per class of `port`.
    fn qlen_hist(&self, port: usize) -> &[QueueLengthHistogram];
    /// The Zombie List of `port`'s egress, when it has one.
    fn zombie_list(&self, port: usize) -> Option<&ZombieList>;
    /// The drop capture's counters, when capturing (`[capture]`).
    fn capture_stats(&self) -> Option<crate::capture::CaptureStats> {
        None
    }
    /// Kernel routing: how the table follows the kernel's (`None` with static routes).
    fn fib(&self) -> Option<FibSnapshot> {
        None
    }
    /// The named flows of `port`'s egress, when it tracks them.
    fn flow_table(&self, port: usize) -> Option<&FlowTable>;
    /// The ICMP errors the router sent and held back (`crate::icmp`).
    fn icmp(&self) -> IcmpCounters;
    /// Active flows at `port`'s egress estimated by its Zombie List (1/P(t)), when it has one.
    fn estimated_flows(&self, port: usize) -> Option<f64> {
        self.zombie_list(port).map(ZombieList::estimated_flows)
    }
}

/// Called by a loop's driver at a low rate (every `period` of its clock) with the router
/// it drives: the one observer of both loops (`R` is [`Dataplane`] for the single-thread loop,
/// [`crate::mt::MtRouter`] for the threaded one; an observer that only reads counters
/// implements it for every `R: RouterView`).
pub trait Observer<R: ?Sized> {
    fn progress(&mut self, now: Nanos, router: &R);
}

/// An observer that does nothing.
pub struct NoObserver;
impl<R: ?Sized> Observer<R> for NoObserver {
    fn progress(&mut self, _: Nanos, _: &R) {}
}

/// The forwarding table that follows the kernel (`[routing] source = "kernel"`).
#[derive(Clone, Debug, Serialize)]
pub struct FibSnapshot {
    /// Prefixes in the table the data plane reads (kernel routes and static routes).
    pub routes: u64,
    /// How long the oldest kernel change read but not yet in that table has waited, seconds
    /// (0 when the two agree).
    pub lag_s: f64,
    /// Kernel events applied (routes, neighbours, addresses, links).
    pub events: u64,
    /// Tables published to the data plane.
    pub publishes: u64,
    /// Times the kernel dropped events (socket overrun) and the tables were read again.
    pub resyncs: u64,
    /// How long the last table took to build, seconds.
    pub last_build_s: f64,
}

impl FibSnapshot {
    pub fn of(s: &zl_fib::FollowStats) -> Self {
        FibSnapshot {
            routes: s.routes(),
            lag_s: s.lag().as_secs_f64(),
            events: s.events(),
            publishes: s.publishes(),
            resyncs: s.resyncs(),
            last_build_s: s.last_build().as_secs_f64(),
        }
    }
}
