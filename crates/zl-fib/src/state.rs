//! The control thread's view: the kernel's routes and neighbours and the config's static
//! routes, turned into a [`Fib`] snapshot after each batch of changes.
//!
//! decided: the prefix map a snapshot carries is kept up to date here, one prefix per event
//! (the best route of that prefix chosen again), so that a snapshot is a copy of memory and
//! not a rebuild: following N routes costs O(N) work however they are batched.

use std::collections::HashMap;
use std::net::IpAddr;

use zl_netlink::{KernelAddr, KernelEvent, KernelLink, KernelNeighbour, KernelRoute, RouteKind};
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
    /// Interface MTUs by kernel interface.
    mtus: HashMap<u32, u32>,
    /// The table the snapshots carry: for each prefix, the static route or the kernel's best.
    table: PrefixMap,
}

impl FibState {
    /// A state for zlrouter's ports, given as (kernel interface index, port index), and the
    /// config's static routes.
    pub fn new(ports: impl IntoIterator<Item = (u32, u16)>, statics: Vec<StaticRoute>) -> Self {
        let mut s = FibState {
            ports: ports.into_iter().collect(),
            statics,
            ..FibState::default()
        };
        s.reset_table();
        s
    }

    /// The table with the static routes only.
    fn reset_table(&mut self) {
        self.table.clear();
        for s in &self.statics {
            self.table.insert(s.dst, s.prefix_len, static_target(s));
        }
    }

    /// Replaces the kernel part with a dump (at start, and after an event overrun).
    pub fn load(&mut self, routes: Vec<KernelRoute>, neighbours: Vec<KernelNeighbour>) {
        self.routes.clear();
        self.neighbours.clear();
        self.reset_table();
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

    /// Replaces the interface MTUs with a dump (at start, and after an overrun).
    pub fn load_links(&mut self, links: Vec<KernelLink>) {
        self.mtus = links.into_iter().map(|l| (l.ifindex, l.mtu)).collect();
    }

    fn add_route(&mut self, r: KernelRoute) {
        let key = (masked(r.dst, r.prefix_len), r.prefix_len);
        let same = self.routes.entry(key).or_default();
        // A route of the same metric replaces (`ip route replace`, a daemon's update).
        same.retain(|x| x.priority != r.priority);
        same.push(r);
        self.choose(key);
    }

    fn remove_route(&mut self, r: &KernelRoute) {
        let key = (masked(r.dst, r.prefix_len), r.prefix_len);
        if let Some(same) = self.routes.get_mut(&key) {
            same.retain(|x| x.priority != r.priority);
            if same.is_empty() {
                self.routes.remove(&key);
            }
        }
        self.choose(key);
    }

    /// Sets the table's entry for one prefix: a static route for it wins, else the kernel's
    /// route of the lowest metric, else none.
    fn choose(&mut self, (dst, len): (IpAddr, u8)) {
        if self
            .statics
            .iter()
            .any(|s| s.prefix_len == len && masked(s.dst, len) == dst)
        {
            return;
        }
        let best = self
            .routes
            .get(&(dst, len))
            .and_then(|same| same.iter().min_by_key(|r| r.priority));
        match best {
            Some(best) => {
                let target = match best.kind {
                    RouteKind::Blackhole => Target::Blackhole,
                    RouteKind::Unreachable => Target::Reject,
                    RouteKind::Unicast => match self.ports.get(&best.oif) {
                        Some(&port) => Target::Port {
                            port,
                            gateway: best.gateway,
                            mac: None,
                        },
                        None => Target::Elsewhere,
                    },
                };
                self.table.insert(dst, len, target);
            }
            None => self.table.remove(dst, len),
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
            KernelEvent::Link(l) => {
                // Only zlrouter's own interfaces matter; an unchanged MTU (a link going up
                // or down announces it again) publishes nothing.
                if !self.ports.contains_key(&l.ifindex)
                    || self.mtus.insert(l.ifindex, l.mtu) == Some(l.mtu)
                {
                    return false;
                }
            }
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

    /// Prefixes in the table (kernel routes on any interface and static routes).
    pub fn route_count(&self) -> usize {
        self.table.len()
    }

    /// The table as of now: a copy of the prefix map kept by the events, and the neighbours,
    /// addresses and MTUs of zlrouter's ports.
    pub fn snapshot(&self) -> Fib {
        let routes = self.table.clone();
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
        let mtus = self
            .mtus
            .iter()
            .filter_map(|(&ifindex, &mtu)| Some((self.port_of(ifindex)?, mtu)))
            .collect();
        Fib {
            routes,
            neighbours,
            addresses,
            mtus,
        }
    }
}

fn static_target(s: &StaticRoute) -> Target {
    Target::Port {
        port: s.port,
        gateway: s.gateway,
        mac: s.mac,
    }
}
