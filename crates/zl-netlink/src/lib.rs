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
//! - [`Rtnl::dump_addresses`], [`Rtnl::dump_routes`], [`Rtnl::dump_neighbours`],
//!   [`Rtnl::dump_links`] return the current tables as [`KernelAddr`], [`KernelRoute`],
//!   [`KernelNeighbour`], [`KernelLink`] (messages the types cannot hold, e.g. MPLS routes,
//!   are skipped, never an error).
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
//!
//! # Example
//!
//! A control thread dumps the tables, then follows the kernel's announcements. What a
//! datagram from the kernel means does not need a socket: [`decode_events`] is what
//! [`Follower::next`] runs on each one. Here, the `RTM_NEWROUTE` a Linux 6.x kernel sent for
//! `ip route add 198.51.100.0/24 via 10.7.0.2 dev zt0` (ifindex 3):
//!
//! ```
//! use std::net::{IpAddr, Ipv4Addr};
//! use zl_netlink::{decode_events, KernelEvent, RouteKind};
//!
//! let datagram: [u8; 60] = [
//!     0x3c, 0x00, 0x00, 0x00, 0x18, 0x00, 0x00, 0x06, 0x5a, 0x19, 0x06, 0x6b, 0xfd, 0x10,
//!     0x00, 0x00, 0x02, 0x18, 0x00, 0x00, 0xfe, 0x03, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00,
//!     0x08, 0x00, 0x0f, 0x00, 0xfe, 0x00, 0x00, 0x00, 0x08, 0x00, 0x01, 0x00, 0xc6, 0x33,
//!     0x64, 0x00, 0x08, 0x00, 0x05, 0x00, 0x0a, 0x07, 0x00, 0x02, 0x08, 0x00, 0x04, 0x00,
//!     0x03, 0x00, 0x00, 0x00,
//! ];
//! let events = decode_events(&datagram).unwrap();
//! let KernelEvent::RouteAdded(route) = &events[0] else {
//!     panic!("{events:?}")
//! };
//! assert_eq!(route.dst, IpAddr::V4(Ipv4Addr::new(198, 51, 100, 0)));
//! assert_eq!(route.prefix_len, 24);
//! assert_eq!(route.kind, RouteKind::Unicast);
//! assert_eq!(route.gateway, Some(IpAddr::V4(Ipv4Addr::new(10, 7, 0, 2))));
//! assert_eq!(route.oif, 3);
//! // Truncated or foreign input is an error or nothing, never a panic.
//! assert!(decode_events(&datagram[..20]).map_or(true, |e| e.is_empty()));
//! ```
//!
//! # Layers
//!
//! `parse` (rtnetlink messages to this crate's types) below `socket` (the two sockets that
//! send, receive and hand the parsed messages on); `scripts/module-cycles` checks that no
//! import goes the other way.

#![warn(missing_docs)]

mod parse;
mod socket;

use std::net::{IpAddr, Ipv4Addr};

pub use socket::{decode_events, Follower, Rtnl};

/// The kernel's main routing table (`RT_TABLE_MAIN`).
pub const MAIN_TABLE: u32 = 254;

/// One of the router's own addresses (`ip addr`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelAddr {
    /// The interface the address is on (`ip link`'s index).
    pub ifindex: u32,
    /// The address itself.
    pub addr: IpAddr,
    /// The length of its subnet's prefix (`/24`).
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
    /// The destination prefix's length (0 for the default route).
    pub prefix_len: u8,
    /// What the route does with a matching packet.
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
    /// The interface the neighbour is reached on.
    pub ifindex: u32,
    /// The neighbour's network-layer address.
    pub addr: IpAddr,
    /// The link-layer address; `None` while the entry resolves (INCOMPLETE) or after it
    /// failed (FAILED).
    pub mac: Option<[u8; 6]>,
    /// The entry's state, as far as zlrouter tells states apart.
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

/// One interface's link-layer facts zlrouter follows (`ip link`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelLink {
    /// The interface's index.
    pub ifindex: u32,
    /// Its MTU (IFLA_MTU): the largest IP packet it sends.
    pub mtu: u32,
}

/// One change announced by the kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KernelEvent {
    /// An interface was added or changed (RTM_NEWLINK: `ip link set X mtu N`, up, down).
    Link(KernelLink),
    /// An address was added (RTM_NEWADDR).
    AddrAdded(KernelAddr),
    /// An address was removed (RTM_DELADDR).
    AddrRemoved(KernelAddr),
    /// A route of the main table was added or replaced (RTM_NEWROUTE).
    RouteAdded(KernelRoute),
    /// A route of the main table was removed (RTM_DELROUTE).
    RouteRemoved(KernelRoute),
    /// A neighbour entry was added or changed state (RTM_NEWNEIGH).
    Neighbour(KernelNeighbour),
    /// A neighbour entry was removed (RTM_DELNEIGH).
    NeighbourRemoved {
        /// The interface the entry was on.
        ifindex: u32,
        /// The neighbour's network-layer address.
        addr: IpAddr,
    },
    /// The kernel dropped events (socket buffer overrun): dump the tables again.
    Resync,
}

/// Multicast groups a [`Follower`] can join.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Groups {
    /// IPv4 and IPv6 address changes (RTNLGRP_IPV4_IFADDR, RTNLGRP_IPV6_IFADDR).
    pub addresses: bool,
    /// IPv4 and IPv6 route changes (RTNLGRP_IPV4_ROUTE, RTNLGRP_IPV6_ROUTE).
    pub routes: bool,
    /// Neighbour table changes (RTNLGRP_NEIGH).
    pub neighbours: bool,
    /// Interface changes (RTNLGRP_LINK): MTU, state.
    pub links: bool,
}

impl Groups {
    /// Every group: addresses, routes, neighbours and links.
    pub const ALL: Groups = Groups {
        addresses: true,
        routes: true,
        neighbours: true,
        links: true,
    };
}
