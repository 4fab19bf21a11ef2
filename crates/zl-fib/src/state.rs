//! The control thread's view: the kernel's routes and neighbours and the config's static
//! routes, turned into a [`Fib`] snapshot after each batch of changes.

use std::collections::HashMap;
use std::net::IpAddr;

use zl_netlink::{KernelAddr, KernelEvent, KernelNeighbour, KernelRoute, RouteKind};
use zl_wire::MacAddr;

use crate::table::{mask4, mask6, Fib, PrefixMap, Target};

/// A `[[routes]]` entry of the config.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StaticRoute {
    /// The destination prefix.
    pub dst: IpAddr,
    /// The destination prefix's length.
    pub prefix_len: u8,
    /// zlrouter's egress port (its index in `[[ports]]`).
    pub port: u16,
    /// The next hop's address; `None` with no `mac`: the destination is on the link.
    pub gateway: Option<IpAddr>,
    /// `next_hop_mac`: overrides the neighbour table.
    pub mac: Option<MacAddr>,
}

fn masked(dst: IpAddr, len: u8) -> IpAddr {
    match dst {
        IpAddr::V4(a) => IpAddr::V4(mask4(a.into(), len).into()),
        IpAddr::V6(a) => IpAddr::V6(mask6(a.into(), len).into()),
    }
}

/// Everything the control thread knows; [`FibState::snapshot`] builds the table.
#[derive(Clone, Debug, Default)]
pub struct FibState {
    /// Kernel interface index -> zlrouter port.
    ports: HashMap<u32, u16>,
    statics: Vec<StaticRoute>,
    /// Kernel routes by (prefix, length), each with its metric; the lowest metric forwards.
    routes: HashMap<(IpAddr, u8), Vec<KernelRoute>>,
    /// Usable neighbour entries by (kernel interface, address).
    neighbours: HashMap<(u32, IpAddr), MacAddr>,
    /// Interface addresses by kernel interface: (address, prefix length).
    addresses: HashMap<u32, Vec<(IpAddr, u8)>>,
}

impl FibState {
    /// A state for zlrouter's ports, given as (kernel interface index, port index), and the
    /// config's static routes.
    pub fn new(ports: impl IntoIterator<Item = (u32, u16)>, statics: Vec<StaticRoute>) -> Self {
        FibState {
            ports: ports.into_iter().collect(),
            statics,
            ..FibState::default()
        }
    }

    /// Replaces the kernel part with a dump (at start, and after an event overrun).
    pub fn load(&mut self, routes: Vec<KernelRoute>, neighbours: Vec<KernelNeighbour>) {
        self.routes.clear();
        self.neighbours.clear();
        for r in routes {
            self.add_route(r);
        }
        for n in neighbours {
            self.set_neighbour(n);
        }
    }

    /// Replaces the interface addresses with a dump (at start, and after an overrun).
    pub fn load_addresses(&mut self, addrs: Vec<KernelAddr>) {
        self.addresses.clear();
        for a in addrs {
            self.add_address(&a);
        }
    }

    fn add_address(&mut self, a: &KernelAddr) {
        let list = self.addresses.entry(a.ifindex).or_default();
        if !list.contains(&(a.addr, a.prefix_len)) {
            list.push((a.addr, a.prefix_len));
        }
    }

    fn remove_address(&mut self, a: &KernelAddr) {
        if let Some(list) = self.addresses.get_mut(&a.ifindex) {
            list.retain(|&(x, _)| x != a.addr);
        }
    }

    fn add_route(&mut self, r: KernelRoute) {
        let key = (masked(r.dst, r.prefix_len), r.prefix_len);
        let same = self.routes.entry(key).or_default();
        // A route of the same metric replaces (`ip route replace`, a daemon's update).
        same.retain(|x| x.priority != r.priority);
        same.push(r);
    }

    fn remove_route(&mut self, r: &KernelRoute) {
        let key = (masked(r.dst, r.prefix_len), r.prefix_len);
        if let Some(same) = self.routes.get_mut(&key) {
            same.retain(|x| x.priority != r.priority);
            if same.is_empty() {
                self.routes.remove(&key);
            }
        }
    }

    fn set_neighbour(&mut self, n: KernelNeighbour) {
        match n.mac {
            Some(mac) if n.state.is_usable() => {
                self.neighbours.insert((n.ifindex, n.addr), MacAddr(mac));
            }
            _ => {
                self.neighbours.remove(&(n.ifindex, n.addr));
            }
        }
    }

    /// Applies one event; true when the table may have changed (a [`KernelEvent::Resync`]
    /// returns false: the caller dumps and calls [`FibState::load`]).
    pub fn apply(&mut self, e: KernelEvent) -> bool {
        match e {
            KernelEvent::RouteAdded(r) => self.add_route(r),
            KernelEvent::RouteRemoved(r) => self.remove_route(&r),
            KernelEvent::Neighbour(n) => self.set_neighbour(n),
            KernelEvent::NeighbourRemoved { ifindex, addr } => {
                self.neighbours.remove(&(ifindex, addr));
            }
            KernelEvent::AddrAdded(a) => self.add_address(&a),
            KernelEvent::AddrRemoved(a) => self.remove_address(&a),
            KernelEvent::Resync => return false,
        }
        true
    }

    /// The port of kernel interface `ifindex`, if it is one of zlrouter's.
    pub fn port_of(&self, ifindex: u32) -> Option<u16> {
        self.ports.get(&ifindex).copied()
    }

    /// The kernel interface of `port`.
    pub fn ifindex_of(&self, port: u16) -> Option<u32> {
        self.ports.iter().find(|(_, &p)| p == port).map(|(&i, _)| i)
    }

    /// The table as of now.
    pub fn snapshot(&self) -> Fib {
        let mut routes = PrefixMap::default();
        for (&(dst, len), same) in &self.routes {
            let Some(best) = same.iter().min_by_key(|r| r.priority) else {
                continue;
            };
            let target = match best.kind {
                RouteKind::Blackhole => Target::Blackhole,
                RouteKind::Unreachable => Target::Reject,
                RouteKind::Unicast => match self.port_of(best.oif) {
                    Some(port) => Target::Port {
                        port,
                        gateway: best.gateway,
                        mac: None,
                    },
                    None => Target::Elsewhere,
                },
            };
            routes.insert(dst, len, target);
        }
        // Static routes last: they win over a kernel route for the same prefix.
        for s in &self.statics {
            routes.insert(
                s.dst,
                s.prefix_len,
                Target::Port {
                    port: s.port,
                    gateway: s.gateway,
                    mac: s.mac,
                },
            );
        }
        let neighbours = self
            .neighbours
            .iter()
            .filter_map(|(&(ifindex, addr), &mac)| Some(((self.port_of(ifindex)?, addr), mac)))
            .collect();
        let addresses = self
            .addresses
            .iter()
            .filter_map(|(&ifindex, a)| Some((self.port_of(ifindex)?, a.clone())))
            .collect();
        Fib {
            routes,
            neighbours,
            addresses,
        }
    }
}
