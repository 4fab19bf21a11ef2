//! rtnetlink messages (as `netlink-packet-route` decodes them) to this crate's types.
//! A message the types cannot hold (another table, MPLS, a multicast route, a multipath
//! route's second and later hops) gives `None` or is reduced as each function says.

use std::net::IpAddr;

use netlink_packet_route::address::{AddressAttribute, AddressMessage};
use netlink_packet_route::link::{LinkAttribute, LinkMessage};
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourMessage, NeighbourState as Nud,
};
use netlink_packet_route::route::{RouteAddress, RouteAttribute, RouteMessage, RouteType};
use netlink_packet_route::RouteNetlinkMessage;

use crate::{
    KernelAddr, KernelEvent, KernelLink, KernelNeighbour, KernelRoute, NeighbourState, RouteKind,
    MAIN_TABLE,
};

pub(crate) fn event(msg: RouteNetlinkMessage) -> Option<KernelEvent> {
    Some(match msg {
        RouteNetlinkMessage::NewAddress(m) => KernelEvent::AddrAdded(address(&m)?),
        RouteNetlinkMessage::DelAddress(m) => KernelEvent::AddrRemoved(address(&m)?),
        RouteNetlinkMessage::NewRoute(m) => KernelEvent::RouteAdded(route(&m)?),
        RouteNetlinkMessage::DelRoute(m) => KernelEvent::RouteRemoved(route(&m)?),
        RouteNetlinkMessage::NewNeighbour(m) => KernelEvent::Neighbour(neighbour(&m)?),
        RouteNetlinkMessage::NewLink(m) => KernelEvent::Link(link(&m)?),
        RouteNetlinkMessage::DelNeighbour(m) => {
            let n = neighbour(&m)?;
            KernelEvent::NeighbourRemoved {
                ifindex: n.ifindex,
                addr: n.addr,
            }
        }
        _ => return None,
    })
}

/// An RTM_NEWLINK without IFLA_MTU (none the kernel sends) gives `None`.
pub(crate) fn link(m: &LinkMessage) -> Option<KernelLink> {
    let mtu = m.attributes.iter().find_map(|a| match a {
        LinkAttribute::Mtu(mtu) => Some(*mtu),
        _ => None,
    })?;
    Some(KernelLink {
        ifindex: m.header.index,
        mtu,
    })
}

/// IFA_LOCAL is the interface's own address on point-to-point links, where IFA_ADDRESS is the
/// peer's; elsewhere both are the same. The own one wins.
pub(crate) fn address(m: &AddressMessage) -> Option<KernelAddr> {
    let mut addr = None;
    let mut local = None;
    let mut broadcast = None;
    for a in &m.attributes {
        match a {
            AddressAttribute::Address(ip) => addr = Some(*ip),
            AddressAttribute::Local(ip) => local = Some(*ip),
            AddressAttribute::Broadcast(b) => broadcast = Some(*b),
            _ => {}
        }
    }
    let addr = local.or(addr)?;
    let prefix_len = m.header.prefix_len;
    if prefix_len > max_prefix(addr) {
        return None;
    }
    Some(KernelAddr {
        ifindex: m.header.index,
        addr,
        prefix_len,
        broadcast,
    })
}

/// The address width in bits: the longest prefix an address of its family can have.
fn max_prefix(a: IpAddr) -> u8 {
    match a {
        IpAddr::V4(_) => 32,
        IpAddr::V6(_) => 128,
    }
}

fn ip(a: &RouteAddress) -> Option<IpAddr> {
    match a {
        RouteAddress::Inet(v4) => Some(IpAddr::V4(*v4)),
        RouteAddress::Inet6(v6) => Some(IpAddr::V6(*v6)),
        _ => None,
    }
}

/// Main-table unicast, blackhole and unreachable / prohibit routes. A multipath route keeps
/// its first hop (decided: no ECMP in the data plane yet; the route still forwards).
pub(crate) fn route(m: &RouteMessage) -> Option<KernelRoute> {
    let mut table = u32::from(m.header.table);
    let mut dst = None;
    let mut gateway = None;
    let mut oif = 0;
    let mut priority = 0;
    for a in &m.attributes {
        match a {
            RouteAttribute::Table(t) => table = *t,
            RouteAttribute::Destination(d) => dst = ip(d),
            RouteAttribute::Gateway(g) => gateway = ip(g),
            RouteAttribute::Oif(o) => oif = *o,
            RouteAttribute::Priority(p) => priority = *p,
            RouteAttribute::MultiPath(hops) => {
                if let Some(first) = hops.first() {
                    oif = first.interface_index;
                    for ha in &first.attributes {
                        if let RouteAttribute::Gateway(g) = ha {
                            gateway = ip(g);
                        }
                    }
                }
            }
            _ => {}
        }
    }
    // The header's one-byte table is RT_TABLE_UNSPEC for ids over 255; RTA_TABLE has them all.
    if table != MAIN_TABLE {
        return None;
    }
    let kind = match m.header.kind {
        RouteType::Unicast => RouteKind::Unicast,
        RouteType::BlackHole => RouteKind::Blackhole,
        RouteType::Unreachable | RouteType::Prohibit => RouteKind::Unreachable,
        _ => return None,
    };
    let len = m.header.destination_prefix_length;
    let dst = match dst {
        Some(d) => d,
        // The default route carries no RTA_DST.
        None => match m.header.address_family {
            netlink_packet_route::AddressFamily::Inet => IpAddr::V4(0.into()),
            netlink_packet_route::AddressFamily::Inet6 => IpAddr::V6(0.into()),
            _ => return None,
        },
    };
    // The kernel never sends a longer prefix; a message that does is not one (the tables
    // downstream shift masks by it).
    if len > max_prefix(dst) {
        return None;
    }
    Some(KernelRoute {
        dst,
        prefix_len: len,
        kind,
        gateway,
        oif,
        priority,
    })
}

pub(crate) fn neighbour(m: &NeighbourMessage) -> Option<KernelNeighbour> {
    let mut addr = None;
    let mut mac = None;
    for a in &m.attributes {
        match a {
            NeighbourAttribute::Destination(NeighbourAddress::Inet(v4)) => {
                addr = Some(IpAddr::V4(*v4))
            }
            NeighbourAttribute::Destination(NeighbourAddress::Inet6(v6)) => {
                addr = Some(IpAddr::V6(*v6))
            }
            NeighbourAttribute::LinkLayerAddress(l) if l.len() == 6 => {
                let mut b = [0u8; 6];
                b.copy_from_slice(l);
                mac = Some(b);
            }
            _ => {}
        }
    }
    let state = match m.header.state {
        Nud::Incomplete | Nud::None => NeighbourState::Incomplete,
        Nud::Reachable | Nud::Stale | Nud::Delay | Nud::Probe => NeighbourState::Usable,
        Nud::Permanent | Nud::Noarp => NeighbourState::Permanent,
        Nud::Failed => NeighbourState::Failed,
        _ => return None,
    };
    let mac = if state.is_usable() { mac } else { None };
    Some(KernelNeighbour {
        ifindex: m.header.ifindex,
        addr: addr?,
        mac,
        state,
    })
}
