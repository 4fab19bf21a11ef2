//! zlrouter's view of the Linux kernel's routing state, through rtnetlink: the router's own
//! addresses, the main routing table and the neighbour (ARP / NDP) table, each dumped once
//! and then followed as the kernel announces changes.
//!
//! Where it sits: beside the data plane, on control threads only. Nothing here is called from
//! the poll loop; what it learns reaches the loop as messages or snapshots built by the
//! caller (the XDP program's address maps in `zl-afxdp`, the data plane's route and neighbour
//! tables). The kernel stays the control plane: `ip addr`, `ip route`, routing daemons (BIRD,
//! FRR) and the kernel's own ARP / NDP write these tables; zlrouter reads them.
//!
//! Contract:
//! - [`Rtnl::dump_addresses`], [`Rtnl::dump_routes`], [`Rtnl::dump_neighbours`] return the
//!   current tables as [`KernelAddr`], [`KernelRoute`], [`KernelNeighbour`] (messages the
//!   types cannot hold, e.g. MPLS routes, are skipped, never an error).
//! - [`Follower`] subscribes to the multicast groups *before* its caller dumps, so no change
//!   falls between the dump and the first event; applying the dump and then the events in
//!   order converges on the kernel's state (every event is idempotent: an add replaces, a
//!   delete of something absent is nothing). [`Follower::next`] waits at most its timeout.
//!   An overrun socket (ENOBUFS: the kernel dropped events) is reported as
//!   [`KernelEvent::Resync`]: the caller dumps again.
//! - [`Rtnl::resolve_neighbour`] asks the kernel to resolve a next hop (RTM_NEWNEIGH with
//!   NTF_USE, what the kernel does itself when it has a packet for an unknown neighbour): it
//!   sends the ARP request / neighbour solicitation, and the answer arrives as a
//!   [`KernelEvent::Neighbour`].
//!
//! Only the main table (254) is read: policy routing tables and VRFs are out of scope.

mod parse;
mod socket;

use std::net::{IpAddr, Ipv4Addr};

pub use socket::{Follower, Rtnl};

/// The kernel's main routing table (`RT_TABLE_MAIN`).
pub const MAIN_TABLE: u32 = 254;

/// One of the router's own addresses (`ip addr`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelAddr {
    pub ifindex: u32,
    pub addr: IpAddr,
    pub prefix_len: u8,
    /// The IPv4 subnet broadcast address (IFA_BROADCAST), also one of the router's own.
    pub broadcast: Option<Ipv4Addr>,
}

/// What a route does with a matching packet (`rtm_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RouteKind {
    /// Forwarded: to `gateway` when set, else straight to the destination on `oif`
    /// (a connected route).
    Unicast,
    /// Dropped silently (`ip route add blackhole`).
    Blackhole,
    /// Dropped with Destination Unreachable (`unreachable`, `prohibit`).
    Unreachable,
}

/// One route of the main table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelRoute {
    /// The destination prefix (host bits zero).
    pub dst: IpAddr,
    pub prefix_len: u8,
    pub kind: RouteKind,
    /// The next hop's address; `None` for a connected route (the destination is on the link).
    pub gateway: Option<IpAddr>,
    /// The egress interface (0 for blackhole / unreachable).
    pub oif: u32,
    /// The route's metric (`ip route ... metric N`); among routes to the same prefix the
    /// kernel forwards on the lowest.
    pub priority: u32,
}

/// A neighbour table entry (`ip neigh`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelNeighbour {
    pub ifindex: u32,
    pub addr: IpAddr,
    /// The link-layer address; `None` while the entry resolves (INCOMPLETE) or after it
    /// failed (FAILED).
    pub mac: Option<[u8; 6]>,
    pub state: NeighbourState,
}

/// The neighbour states zlrouter tells apart (`NUD_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NeighbourState {
    /// Resolving: no MAC yet.
    Incomplete,
    /// A MAC the kernel trusts now or is re-checking (REACHABLE, STALE, DELAY, PROBE); frames
    /// may use it, as the kernel's own do.
    Usable,
    /// Static (PERMANENT, NOARP).
    Permanent,
    /// Resolution failed: no MAC.
    Failed,
}

impl NeighbourState {
    /// Whether frames can be sent with this entry's MAC.
    pub fn is_usable(self) -> bool {
        matches!(self, NeighbourState::Usable | NeighbourState::Permanent)
    }
}

/// One change announced by the kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KernelEvent {
    AddrAdded(KernelAddr),
    AddrRemoved(KernelAddr),
    RouteAdded(KernelRoute),
    RouteRemoved(KernelRoute),
    Neighbour(KernelNeighbour),
    NeighbourRemoved {
        ifindex: u32,
        addr: IpAddr,
    },
    /// The kernel dropped events (socket buffer overrun): dump the tables again.
    Resync,
}

/// Multicast groups a [`Follower`] can join.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Groups {
    pub addresses: bool,
    pub routes: bool,
    pub neighbours: bool,
}

impl Groups {
    pub const ALL: Groups = Groups {
        addresses: true,
        routes: true,
        neighbours: true,
    };
}
