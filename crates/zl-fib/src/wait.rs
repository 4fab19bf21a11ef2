//! Packets waiting for a next hop's MAC, bounded per next hop like the kernel's
//! `unres_qlen`: the data plane's side of neighbour resolution. Time is passed in.

use std::collections::{HashMap, VecDeque};
use std::net::IpAddr;

use zl_core::Nanos;
use zl_wire::MacAddr;

use crate::table::Fib;

/// What [`NeighbourWait::hold`] did with a packet.
#[derive(Debug)]
pub enum Hold<T> {
    /// Held; the first packet for this next hop: ask the kernel to resolve it.
    HeldFirst,
    /// Held behind others for the same next hop (resolution already asked).
    Held,
    /// The next hop's queue (or the number of next hops waiting) is full: count the packet
    /// `no_neighbour` and free it.
    Full(T),
}

struct Waiting<T> {
    since: Nanos,
    packets: VecDeque<T>,
}

/// Held packets by (port, next hop).
pub struct NeighbourWait<T> {
    per_hop: usize,
    max_hops: usize,
    timeout: Nanos,
    waiting: HashMap<(u16, IpAddr), Waiting<T>>,
}

impl<T> NeighbourWait<T> {
    /// At most `per_hop` packets for each of at most `max_hops` next hops, each next hop
    /// given up after `timeout` without a MAC (the kernel's resolution takes ~3 s to fail
    /// with the default `mcast_solicit` 3 × `retrans_time` 1 s).
    pub fn new(per_hop: usize, max_hops: usize, timeout: Nanos) -> Self {
        NeighbourWait {
            per_hop,
            max_hops,
            timeout,
            waiting: HashMap::new(),
        }
    }

    /// Holds `pkt` for `next_hop` on `port`.
    pub fn hold(&mut self, now: Nanos, port: u16, next_hop: IpAddr, pkt: T) -> Hold<T> {
        let n_hops = self.waiting.len();
        match self.waiting.get_mut(&(port, next_hop)) {
            Some(w) if w.packets.len() < self.per_hop => {
                w.packets.push_back(pkt);
                Hold::Held
            }
            Some(_) => Hold::Full(pkt),
            None if n_hops < self.max_hops && self.per_hop > 0 => {
                let mut packets = VecDeque::with_capacity(self.per_hop);
                packets.push_back(pkt);
                self.waiting.insert(
                    (port, next_hop),
                    Waiting {
                        since: now,
                        packets,
                    },
                );
                Hold::HeldFirst
            }
            None => Hold::Full(pkt),
        }
    }

    /// Packets whose next hop `fib` now resolves, in arrival order per next hop, with their
    /// port and MAC.
    pub fn release(&mut self, fib: &Fib, out: &mut Vec<(u16, MacAddr, T)>) {
        let ready: Vec<(u16, IpAddr)> = self
            .waiting
            .keys()
            .filter(|(port, hop)| fib.neighbour(*port, *hop).is_some())
            .copied()
            .collect();
        for key in ready {
            let Some(mac) = fib.neighbour(key.0, key.1) else {
                continue;
            };
            if let Some(w) = self.waiting.remove(&key) {
                out.extend(w.packets.into_iter().map(|p| (key.0, mac, p)));
            }
        }
    }

    /// Packets of next hops that waited longer than the timeout (count them
    /// `no_neighbour`).
    pub fn expire(&mut self, now: Nanos, out: &mut Vec<T>) {
        let timeout = self.timeout;
        let old: Vec<(u16, IpAddr)> = self
            .waiting
            .iter()
            .filter(|(_, w)| now.0.saturating_sub(w.since.0) >= timeout.0)
            .map(|(k, _)| *k)
            .collect();
        for k in old {
            if let Some(w) = self.waiting.remove(&k) {
                out.extend(w.packets);
            }
        }
    }

    /// Packets held now.
    pub fn len(&self) -> usize {
        self.waiting.values().map(|w| w.packets.len()).sum()
    }

    /// True when no packet is held.
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }
}
