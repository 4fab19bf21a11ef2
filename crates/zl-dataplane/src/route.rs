//! The routing table: longest-prefix match for IPv4 and IPv6 over a full Internet table, read
//! by every receive path while a control thread changes it.
//!
//! The prefixes live in `zl_lpm` (DIR-24-8 for IPv4, a 16-bit root and 8-bit strides for
//! IPv6; lock-free lookups, one writer at a time updating atomic entries; its crate doc gives
//! the contract and why). Each rule maps to a next-hop id; the [`NextHop`]s themselves are
//! interned here, written once into a slot that readers load without a lock. A
//! [`RouteTable`] is a shared handle: clones (the single-thread loop's, each receive worker's,
//! a control thread's) are the same table, so [`RouteTable::insert`] / [`RouteTable::remove`]
//! from any thread take effect for the next lookup, with no pause of the poll loops.
//!
//! decided: distinct next hops are kept for the table's life (a router has as many as it has
//! neighbours and ports, far below [`MAX_NEXT_HOPS`]), so a reader never sees a slot reused.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::{Arc, Mutex, OnceLock};

use zl_lpm::{Lpm4, Lpm6, LpmError};
use zl_wire::MacAddr;

/// The most distinct next hops a table holds.
pub const MAX_NEXT_HOPS: usize = 1 << 16;
// `hop_ref` masks ids to the table.
const _: () = assert!(MAX_NEXT_HOPS.is_power_of_two());

/// Where a routed packet goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NextHop {
    /// Index of the egress port.
    pub port: u16,
    /// Destination MAC written into the frame (the next hop's address).
    pub mac: MacAddr,
    /// The gateway's address (`ip route ... via`), `None` for a directly connected
    /// destination or a static route given only a MAC.
    pub via: Option<IpAddr>,
}

impl NextHop {
    /// A next hop given by port and MAC only (a static `[[routes]]` entry).
    pub fn new(port: u16, mac: MacAddr) -> Self {
        NextHop {
            port,
            mac,
            via: None,
        }
    }
}

/// A prefix written as `address/length`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Prefix {
    pub addr: IpAddr,
    pub len: u8,
}

impl Prefix {
    /// The prefix with its host bits cleared (`10.1.2.3/8` is `10.0.0.0/8`): the key the
    /// table files it under.
    pub fn network(self) -> Prefix {
        let addr = match self.addr {
            IpAddr::V4(a) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.len)).unwrap_or(0);
                IpAddr::V4((u32::from(a) & mask).into())
            }
            IpAddr::V6(a) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.len))
                    .unwrap_or(0);
                IpAddr::V6((u128::from(a) & mask).into())
            }
        };
        Prefix {
            addr,
            len: self.len,
        }
    }
}

impl std::str::FromStr for Prefix {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (a, l) = s.split_once('/').ok_or("no `/length`")?;
        let addr: IpAddr = a
            .parse()
            .map_err(|_| format!("`{a}` is not an IP address"))?;
        let len: u8 = l
            .parse()
            .map_err(|_| format!("`{l}` is not a prefix length"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        if len > max {
            return Err(format!("prefix length {len} exceeds {max}"));
        }
        Ok(Prefix { addr, len })
    }
}

/// Why a route was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    #[error("{0}")]
    Table(#[from] LpmError),
    #[error("more than {MAX_NEXT_HOPS} distinct next hops")]
    NextHopsFull,
}

/// The writer's side of the next hops: ids by value, and how many rules use each.
#[derive(Default)]
struct HopIds {
    ids: HashMap<NextHop, u32>,
    uses: Vec<usize>,
}

struct Inner {
    v4: Lpm4,
    v6: Lpm6,
    /// Next hops by id, each set once before any rule refers to it. An array of its exact
    /// length, so that a lookup's id, masked to it, needs no bounds check.
    hops: Box<[OnceLock<NextHop>; MAX_NEXT_HOPS]>,
    /// Held by a writer for a whole change (both families and the next hops): writers take
    /// turns; readers never take it.
    writer: Mutex<HopIds>,
}

/// A routing table for both families: a shared handle (see the module doc).
#[derive(Clone)]
pub struct RouteTable {
    inner: Arc<Inner>,
}

impl Default for RouteTable {
    fn default() -> Self {
        RouteTable {
            inner: Arc::new(Inner {
                v4: Lpm4::default(),
                v6: Lpm6::default(),
                hops: (0..MAX_NEXT_HOPS)
                    .map(|_| OnceLock::new())
                    .collect::<Box<[_]>>()
                    .try_into()
                    .unwrap_or_else(|_| unreachable!("MAX_NEXT_HOPS slots")),
                writer: Mutex::new(HopIds::default()),
            }),
        }
    }
}

impl std::fmt::Debug for RouteTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RouteTable")
            .field("v4", &self.inner.v4)
            .field("v6", &self.inner.v6)
            .finish()
    }
}

impl RouteTable {
    fn writer(&self) -> std::sync::MutexGuard<'_, HopIds> {
        // Every change leaves the table whole at each store, so a panicked writer's table is
        // still usable.
        self.inner.writer.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Adds the route `prefix -> nh`, or changes its next hop; returns the next hop it
    /// replaced. Host bits set in the prefix are ignored (`10.1.2.3/8` is `10.0.0.0/8`). Safe
    /// to call from any thread while others forward.
    pub fn insert(&self, prefix: Prefix, nh: NextHop) -> Result<Option<NextHop>, RouteError> {
        let mut w = self.writer();
        let id = match w.ids.get(&nh) {
            Some(&id) => id,
            None => {
                let id = w.uses.len();
                if id >= MAX_NEXT_HOPS {
                    return Err(RouteError::NextHopsFull);
                }
                // Set before any rule points at it: the rule's Release store publishes it.
                let _ = self.inner.hops[id].set(nh);
                w.uses.push(0);
                w.ids.insert(nh, id as u32);
                id as u32
            }
        };
        let old = match prefix.addr {
            IpAddr::V4(a) => self.inner.v4.insert(a, prefix.len, id)?,
            IpAddr::V6(a) => self.inner.v6.insert(a, prefix.len, id)?,
        };
        w.uses[id as usize] += 1;
        Ok(old.map(|o| {
            w.uses[o as usize] -= 1;
            self.hop(o)
        }))
    }

    /// Adds a route (as [`RouteTable::insert`]), for building a table.
    pub fn add(&mut self, prefix: Prefix, nh: NextHop) -> Result<(), RouteError> {
        self.insert(prefix, nh).map(|_| ())
    }

    /// Removes the route for exactly `prefix`; returns its next hop. Addresses under it fall
    /// back to the next shorter route.
    pub fn remove(&self, prefix: Prefix) -> Option<NextHop> {
        let mut w = self.writer();
        let old = match prefix.addr {
            IpAddr::V4(a) => self.inner.v4.remove(a, prefix.len),
            IpAddr::V6(a) => self.inner.v6.remove(a, prefix.len),
        }?;
        w.uses[old as usize] -= 1;
        Some(self.hop(old))
    }

    /// The next hop of the route for exactly `prefix`.
    pub fn get(&self, prefix: Prefix) -> Option<NextHop> {
        let id = match prefix.addr {
            IpAddr::V4(a) => self.inner.v4.get(a, prefix.len),
            IpAddr::V6(a) => self.inner.v6.get(a, prefix.len),
        }?;
        Some(self.hop(id))
    }

    #[inline]
    fn hop(&self, id: u32) -> NextHop {
        *self.hop_ref(id)
    }

    #[inline]
    fn hop_ref(&self, id: u32) -> &NextHop {
        // Every id in a rule was set before the rule was stored (see `insert`).
        // Every id is below MAX_NEXT_HOPS (`insert`), a power of two: the mask changes none.
        self.inner.hops[id as usize & (MAX_NEXT_HOPS - 1)]
            .get()
            .expect("a rule's next hop is set before the rule")
    }

    /// The longest matching route's next hop. Lock-free.
    #[inline]
    pub fn lookup(&self, dst: IpAddr) -> Option<NextHop> {
        self.lookup_ref(dst).copied()
    }

    /// [`RouteTable::lookup`] without the copy: the next hop where the table keeps it (a
    /// next hop is never changed once set, see the module doc). The forwarding path reads
    /// only its port and MAC, so it need not copy the gateway address along.
    ///
    /// The family's test in line, each family's walk out of line: as one call it would take
    /// the address by a pointer into the caller's parsed headers, and after that escape the
    /// caller would read every header field back from memory.
    #[inline(always)]
    pub fn lookup_ref(&self, dst: IpAddr) -> Option<&NextHop> {
        match dst {
            IpAddr::V4(a) => self.lookup_v4(a),
            IpAddr::V6(a) => self.lookup_v6(&a),
        }
    }

    /// The IPv4 half of [`RouteTable::lookup_ref`]: the address by value.
    #[inline(never)]
    fn lookup_v4(&self, a: Ipv4Addr) -> Option<&NextHop> {
        self.inner.v4.lookup(a).map(|id| self.hop_ref(id))
    }

    /// The IPv6 half of [`RouteTable::lookup`], out of line: inlined, the compiler loaded the
    /// 16 address bytes ahead of the version check, and for an IPv4 packet that wide load
    /// over the parser's fresh 4-byte store stalled store-to-load forwarding (about 3 ns a
    /// packet in the pipeline benchmark).
    #[inline(never)]
    fn lookup_v6(&self, a: &Ipv6Addr) -> Option<&NextHop> {
        self.inner.v6.lookup(*a).map(|id| self.hop_ref(id))
    }

    /// The ports routes lead to now, each once.
    pub fn egress_ports(&self) -> Vec<u16> {
        let w = self.writer();
        let mut ports: Vec<u16> = (w.uses.iter().enumerate())
            .filter(|(_, &n)| n > 0)
            .map(|(id, _)| self.hop(id as u32).port)
            .collect();
        ports.sort_unstable();
        ports.dedup();
        ports
    }

    /// The number of routes of both families.
    pub fn len(&self) -> usize {
        self.inner.v4.len() + self.inner.v6.len()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The IPv4 and IPv6 tables' sizes and work done.
    pub fn stats(&self) -> (zl_lpm::LpmStats, zl_lpm::LpmStats) {
        (self.inner.v4.stats(), self.inner.v6.stats())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nh(port: u16) -> NextHop {
        NextHop::new(port, MacAddr([2, 0, 0, 0, 0, port as u8]))
    }

    #[test]
    fn longest_prefix_wins_for_both_families() {
        let mut t = RouteTable::default();
        t.add("0.0.0.0/0".parse().unwrap(), nh(0)).unwrap();
        t.add("10.0.0.0/8".parse().unwrap(), nh(1)).unwrap();
        t.add("10.1.0.0/16".parse().unwrap(), nh(2)).unwrap();
        t.add("10.1.2.3/32".parse().unwrap(), nh(3)).unwrap();
        t.add("2001:db8::/32".parse().unwrap(), nh(4)).unwrap();
        t.add("2001:db8:1::/48".parse().unwrap(), nh(5)).unwrap();
        let at = |s: &str| t.lookup(s.parse().unwrap()).map(|n| n.port);
        assert_eq!(at("192.0.2.1"), Some(0));
        assert_eq!(at("10.200.0.1"), Some(1));
        assert_eq!(at("10.1.9.9"), Some(2));
        assert_eq!(at("10.1.2.3"), Some(3));
        assert_eq!(at("2001:db8:1::9"), Some(5));
        assert_eq!(at("2001:db8:2::9"), Some(4));
        assert_eq!(at("2001:db9::1"), None);
        for a in ["192.0.2.1", "10.1.2.3", "2001:db8:1::9", "2001:db9::1"] {
            let a = a.parse().unwrap();
            assert_eq!(t.lookup_ref(a), t.lookup(a).as_ref(), "{a}");
        }
        assert_eq!(t.egress_ports(), vec![0, 1, 2, 3, 4, 5]);
    }

    #[test]
    fn a_clone_is_the_same_table_and_changes_apply_at_once() {
        let t = RouteTable::default();
        let control = t.clone();
        let p: Prefix = "198.51.100.0/24".parse().unwrap();
        let gw = NextHop {
            via: Some("192.0.2.1".parse().unwrap()),
            ..nh(1)
        };
        assert_eq!(control.insert(p, gw), Ok(None));
        assert_eq!(t.lookup("198.51.100.7".parse().unwrap()), Some(gw));
        assert_eq!(control.insert(p, nh(2)), Ok(Some(gw)));
        assert_eq!(t.egress_ports(), vec![2], "port 1 has no route left");
        assert_eq!(control.remove(p), Some(nh(2)));
        assert_eq!(t.lookup("198.51.100.7".parse().unwrap()), None);
        assert!(t.is_empty());
    }

    #[test]
    fn prefixes_are_validated() {
        assert!("10.0.0.0/33".parse::<Prefix>().is_err());
        assert!("10.0.0.0".parse::<Prefix>().is_err());
        assert!("::/129".parse::<Prefix>().is_err());
        assert_eq!("::/0".parse::<Prefix>().unwrap().len, 0);
    }
}
