//! The data plane's own counters: the fate of every received packet, by named cause.
//!
//! Conservation identity (checked exactly by the tests):
//! `received = forwarded + Σ drops[cause] + queued`, where `received` counts frames the ports
//! handed over, `forwarded` frames handed to a port's transmit (a port's own transmit drops
//! are then in its [`zl_port::PortCounters`]), and `queued` frames still in egress queues.

use zl_aqm::Verdict;

/// Why the data plane discarded a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DropCause {
    /// The frame did not parse as Ethernet + IPv4/IPv6 (router mode).
    ParseError,
    /// No route matched the destination, or a bridge port without a peer.
    NoRoute,
    /// TTL / hop limit expired (the sender gets Time Exceeded, `crate::icmp`).
    TtlExpired,
    /// Larger than the egress port's MTU and not to be fragmented (IPv4 with DF, or IPv6):
    /// the sender gets Fragmentation Needed / Packet Too Big (`crate::icmp`).
    TooBig,
    /// AQM early (probabilistic) drop.
    Early,
    /// AQM forced drop (e.g. RED's `avg >= max_th`).
    Forced,
    /// Queue full (packets or bytes), or a packet larger than the shaper's burst.
    Tail,
    /// Still queued when the run stopped and the drain time was over.
    Shutdown,
    /// Multi-threaded forwarding (`crate::mt`): a receive worker found the ring to its
    /// packet's egress port full. Always 0 on the single-thread loop.
    RingFull,
    /// Kernel routing (`[routing] source = "kernel"`): the next hop's MAC was not known and
    /// its wait queue (`routing.unres_qlen` packets per next hop) was full, or it was not
    /// resolved within the wait's timeout.
    NoNeighbour,
}

impl DropCause {
    pub const ALL: [DropCause; 10] = [
        DropCause::ParseError,
        DropCause::NoRoute,
        DropCause::TtlExpired,
        DropCause::TooBig,
        DropCause::Early,
        DropCause::Forced,
        DropCause::Tail,
        DropCause::Shutdown,
        DropCause::RingFull,
        DropCause::NoNeighbour,
    ];
    pub const fn index(self) -> usize {
        self as usize
    }
    pub const fn name(self) -> &'static str {
        match self {
            DropCause::ParseError => "parse_error",
            DropCause::NoRoute => "no_route",
            DropCause::TtlExpired => "ttl_expired",
            DropCause::TooBig => "too_big",
            DropCause::Early => "early",
            DropCause::Forced => "forced",
            DropCause::Tail => "tail",
            DropCause::Shutdown => "shutdown",
            DropCause::RingFull => "ring_full",
            DropCause::NoNeighbour => "no_neighbour",
        }
    }
    /// The cause of an AQM verdict that discards, `None` for admitting verdicts.
    pub const fn of_verdict(v: Verdict) -> Option<DropCause> {
        match v {
            Verdict::Enqueue | Verdict::MarkCe => None,
            Verdict::EarlyDrop => Some(DropCause::Early),
            Verdict::ForcedDrop => Some(DropCause::Forced),
            Verdict::TailDrop => Some(DropCause::Tail),
        }
    }
}

/// Counts of one packet population (all traffic, or one generator flow group).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FateCounters {
    pub received: u64,
    pub received_bytes: u64,
    pub forwarded: u64,
    pub forwarded_bytes: u64,
    /// Packets admitted with a congestion mark (CE or the extension header's ECN bit).
    pub marked: u64,
    pub drops: [u64; DropCause::ALL.len()],
}

impl FateCounters {
    /// Adds `other`'s counts (the receive and transmit halves of a multi-threaded run).
    pub fn add(&mut self, other: &FateCounters) {
        self.received += other.received;
        self.received_bytes += other.received_bytes;
        self.forwarded += other.forwarded;
        self.forwarded_bytes += other.forwarded_bytes;
        self.marked += other.marked;
        for (a, b) in self.drops.iter_mut().zip(other.drops) {
            *a += b;
        }
    }
    pub fn drop(&mut self, cause: DropCause) {
        self.drops[cause.index()] += 1;
    }
    pub fn dropped(&self) -> u64 {
        self.drops.iter().sum()
    }
    pub fn drops_of(&self, cause: DropCause) -> u64 {
        self.drops[cause.index()]
    }
    /// Each cause's drops with its name ([`DropCause::name`]), in [`DropCause::ALL`]'s order.
    pub fn drops_by_name(&self) -> impl Iterator<Item = (&'static str, u64)> + '_ {
        DropCause::ALL.iter().map(|&c| (c.name(), self.drops_of(c)))
    }
    /// Fraction of received packets dropped (0 when nothing was received).
    pub fn drop_ratio(&self) -> f64 {
        if self.received == 0 {
            0.0
        } else {
            self.dropped() as f64 / self.received as f64
        }
    }
}

/// Counters of a generator flow group, with its label.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupStats {
    pub name: String,
    pub port: String,
    pub misbehaving: bool,
    pub flows: u32,
    pub fate: FateCounters,
}
