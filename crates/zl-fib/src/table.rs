//! The immutable forwarding table the poll loop reads, and its publication.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use arc_swap::ArcSwap;
use zl_wire::MacAddr;

/// What the data plane does with a packet to a destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Send out of `port` to `mac`.
    Forward {
        /// zlrouter's egress port.
        port: u16,
        /// The next hop's MAC address.
        mac: MacAddr,
    },
    /// The route says `port` via `next_hop`, whose MAC is not known yet: hold the packet
    /// (bounded) and have the kernel resolve it.
    Resolve {
        /// zlrouter's egress port.
        port: u16,
        /// The address to resolve: the gateway, or the destination on a connected route.
        next_hop: IpAddr,
    },
    /// No route, or the best route leaves through an interface that is not one of zlrouter's
    /// ports (the kernel's own, e.g. a management port): counted `no_route`.
    NoRoute,
    /// An unreachable / prohibit route: dropped (counted `no_route`) with Destination
    /// Unreachable to the sender.
    Reject,
    /// A blackhole route: dropped (counted `no_route`) silently, as the kernel does.
    Blackhole,
}

/// Where a chosen route sends packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// Out of `port`, to `gateway` or (None) to the destination itself; `mac` overrides the
    /// neighbour table (a static route's `next_hop_mac`).
    Port {
        port: u16,
        gateway: Option<IpAddr>,
        mac: Option<MacAddr>,
    },
    /// The kernel's interface `oif` is not one of zlrouter's ports.
    Elsewhere,
    Reject,
    Blackhole,
}

/// Longest-prefix match by per-length hash maps, lengths kept longest first. Insert and
/// remove are O(1) (a length list of at most 33 / 129 entries is re-sorted only when a
/// length comes into use or goes out of it); a clone is a copy of the maps' memory (keys and
/// values are `Copy`), which is what publishing a snapshot costs.
#[derive(Clone, Debug, Default)]
pub(crate) struct PrefixMap {
    v4: HashMap<(u8, u32), Target>,
    v6: HashMap<(u8, u128), Target>,
    v4_lens: Vec<u8>,
    v6_lens: Vec<u8>,
    /// Prefixes held per length, to drop a length from the probe list when its last goes.
    v4_count: Vec<u32>,
    v6_count: Vec<u32>,
}

pub(crate) fn mask4(a: u32, len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        a & (u32::MAX << (32 - len))
    }
}

pub(crate) fn mask6(a: u128, len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        a & (u128::MAX << (128 - len))
    }
}

/// Counts a prefix of length `len` in or out of `count`, keeping `lens` (longest first)
/// the lengths with at least one prefix.
fn count_len(count: &mut Vec<u32>, lens: &mut Vec<u8>, len: u8, added: bool) {
    let i = usize::from(len);
    if count.len() <= i {
        count.resize(i + 1, 0);
    }
    if added {
        count[i] += 1;
        if count[i] == 1 {
            lens.push(len);
            lens.sort_unstable_by(|a, b| b.cmp(a));
        }
    } else {
        count[i] = count[i].saturating_sub(1);
        if count[i] == 0 {
            lens.retain(|&l| l != len);
        }
    }
}

/// A map emptied to a quarter of its room gives half of it back: a clone copies the whole
/// room, so a table that once held a million routes would otherwise cost a million-entry
/// copy per snapshot after they were withdrawn. Amortised O(1) per removal.
fn shrink<K: std::hash::Hash + Eq, V>(m: &mut HashMap<K, V>) {
    if m.capacity() > 1024 && m.len() * 4 < m.capacity() {
        m.shrink_to(m.len() * 2);
    }
}

impl PrefixMap {
    pub(crate) fn insert(&mut self, dst: IpAddr, len: u8, t: Target) {
        match dst {
            IpAddr::V4(a) => {
                if self.v4.insert((len, mask4(a.into(), len)), t).is_none() {
                    count_len(&mut self.v4_count, &mut self.v4_lens, len, true);
                }
            }
            IpAddr::V6(a) => {
                if self.v6.insert((len, mask6(a.into(), len)), t).is_none() {
                    count_len(&mut self.v6_count, &mut self.v6_lens, len, true);
                }
            }
        }
    }

    pub(crate) fn remove(&mut self, dst: IpAddr, len: u8) {
        match dst {
            IpAddr::V4(a) => {
                if self.v4.remove(&(len, mask4(a.into(), len))).is_some() {
                    count_len(&mut self.v4_count, &mut self.v4_lens, len, false);
                    shrink(&mut self.v4);
                }
            }
            IpAddr::V6(a) => {
                if self.v6.remove(&(len, mask6(a.into(), len))).is_some() {
                    count_len(&mut self.v6_count, &mut self.v6_lens, len, false);
                    shrink(&mut self.v6);
                }
            }
        }
    }

    pub(crate) fn clear(&mut self) {
        *self = PrefixMap::default();
    }

    pub(crate) fn lookup(&self, dst: IpAddr) -> Option<Target> {
        match dst {
            IpAddr::V4(a) => {
                let a = u32::from(a);
                self.v4_lens
                    .iter()
                    .find_map(|&l| self.v4.get(&(l, mask4(a, l))).copied())
            }
            IpAddr::V6(a) => {
                let a = u128::from(a);
                self.v6_lens
                    .iter()
                    .find_map(|&l| self.v6.get(&(l, mask6(a, l))).copied())
            }
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.v4.len() + self.v6.len()
    }
}

/// One consistent forwarding table: routes and neighbours, by zlrouter port.
#[derive(Clone, Debug, Default)]
pub struct Fib {
    pub(crate) routes: PrefixMap,
    pub(crate) neighbours: HashMap<(u16, IpAddr), MacAddr>,
    /// Each port's interface addresses (address, prefix length), as the kernel has them.
    pub(crate) addresses: HashMap<u16, Vec<(IpAddr, u8)>>,
    /// Each port's interface MTU, as the kernel has it now (`ip link set X mtu N` follows).
    pub(crate) mtus: HashMap<u16, u32>,
}

impl Fib {
    /// The decision for a packet to `dst` (see the crate doc).
    #[inline]
    pub fn decide(&self, dst: IpAddr) -> Decision {
        match self.routes.lookup(dst) {
            None | Some(Target::Elsewhere) => Decision::NoRoute,
            Some(Target::Reject) => Decision::Reject,
            Some(Target::Blackhole) => Decision::Blackhole,
            Some(Target::Port {
                port,
                mac: Some(mac),
                ..
            }) => Decision::Forward { port, mac },
            Some(Target::Port { port, gateway, .. }) => {
                let next_hop = gateway.unwrap_or(dst);
                match self.neighbours.get(&(port, next_hop)) {
                    Some(&mac) => Decision::Forward { port, mac },
                    None => Decision::Resolve { port, next_hop },
                }
            }
        }
    }

    /// The MAC of `next_hop` on `port`, if known.
    pub fn neighbour(&self, port: u16, next_hop: IpAddr) -> Option<MacAddr> {
        self.neighbours.get(&(port, next_hop)).copied()
    }

    /// Routes held (both families).
    pub fn route_count(&self) -> usize {
        self.routes.len()
    }

    /// The kernel's MTU of `port`'s interface now: the largest IP packet it sends (`None`
    /// before the kernel said, e.g. a table built by hand).
    pub fn mtu(&self, port: u16) -> Option<u32> {
        self.mtus.get(&port).copied()
    }

    /// The kernel's addresses of `port`'s interface (address, prefix length).
    pub fn addresses(&self, port: u16) -> &[(IpAddr, u8)] {
        self.addresses.get(&port).map_or(&[], Vec::as_slice)
    }
}

/// The address among `addrs` a router sends from towards `toward` (the source of an ICMP
/// error about a packet from `toward`): of `toward`'s IP version; the one whose prefix holds
/// `toward`, else a global one (not IPv6 link-local), else any; `None` when none is of that
/// version. A simplified RFC 6724 source selection (same subnet, then scope), as Linux's
/// `icmp_send` ends up choosing on a connected neighbour.
pub fn pick_source(addrs: &[(IpAddr, u8)], toward: IpAddr) -> Option<IpAddr> {
    let same_family = || {
        addrs
            .iter()
            .filter(move |(a, _)| a.is_ipv4() == toward.is_ipv4())
    };
    let holds = |&&(a, len): &&(IpAddr, u8)| match (a, toward) {
        (IpAddr::V4(a), IpAddr::V4(t)) => mask4(a.into(), len) == mask4(t.into(), len),
        (IpAddr::V6(a), IpAddr::V6(t)) => mask6(a.into(), len) == mask6(t.into(), len),
        _ => false,
    };
    let global = |&&(a, _): &&(IpAddr, u8)| match a {
        IpAddr::V6(a) => a.segments()[0] & 0xffc0 != 0xfe80,
        IpAddr::V4(_) => true,
    };
    (same_family().find(holds))
        .or_else(|| same_family().find(global))
        .or_else(|| same_family().next())
        .map(|&(a, _)| a)
}

/// The control side's end: publishes new snapshots.
#[derive(Clone, Debug)]
pub struct FibHandle {
    current: Arc<ArcSwap<Fib>>,
}

impl FibHandle {
    /// A handle publishing `fib` as the first snapshot.
    pub fn new(fib: Fib) -> Self {
        FibHandle {
            current: Arc::new(ArcSwap::from_pointee(fib)),
        }
    }

    /// Makes `fib` the table every reader picks up at its next refresh.
    pub fn publish(&self, fib: Fib) {
        self.current.store(Arc::new(fib));
    }

    /// A reader for one poll loop.
    pub fn reader(&self) -> FibReader {
        FibReader {
            source: self.current.clone(),
            held: self.current.load_full(),
        }
    }
}

/// The poll loop's end: holds one snapshot and swaps to the newest at [`FibReader::refresh`].
#[derive(Clone, Debug)]
pub struct FibReader {
    source: Arc<ArcSwap<Fib>>,
    held: Arc<Fib>,
}

impl FibReader {
    /// Picks up the newest snapshot (call between polls); true when it changed. A load and a
    /// pointer compare when nothing changed; never blocks.
    #[inline]
    pub fn refresh(&mut self) -> bool {
        let now = self.source.load();
        if Arc::ptr_eq(&now, &self.held) {
            return false;
        }
        self.held = arc_swap::Guard::into_inner(now);
        true
    }

    /// The snapshot held since the last refresh.
    #[inline]
    pub fn fib(&self) -> &Fib {
        &self.held
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn a_map_emptied_gives_its_room_back_and_its_lengths() {
        let mut m = PrefixMap::default();
        let p = |i: u32| IpAddr::V4(Ipv4Addr::from(0x4000_0000 + (i << 8)));
        for i in 0..100_000 {
            m.insert(p(i), 24, Target::Blackhole);
        }
        m.insert(p(0), 16, Target::Reject);
        assert_eq!(m.v4_lens, [24, 16]);
        for i in 0..100_000 {
            m.remove(p(i), 24);
        }
        assert_eq!(m.len(), 1);
        assert_eq!(m.v4_lens, [16]);
        assert!(m.v4.capacity() <= 2048, "room left: {}", m.v4.capacity());
        assert_eq!(m.lookup(p(5)), Some(Target::Reject));
    }
}
