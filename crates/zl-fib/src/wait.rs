//! Packets waiting for a next hop's MAC, bounded per next hop like the kernel's
//! `unres_qlen` and in the next hops waiting at once: the data plane's side of neighbour
//! resolution. Time is passed in.
//!
//! decided: a new next hop always gets a place unless every place holds a next hop that
//! resolved before. When all `max_hops` places are taken, the *unknown* next hop that has
//! waited longest gives its place up: its packets are dropped (`no_neighbour`, without an
//! ICMP error, as the kernel's forced neighbour garbage collection frees an incomplete
//! entry's queue silently) and its resolution, already asked for, goes on in the kernel.
//! A *known* next hop (one this wait released with a MAC before, e.g. a neighbour whose
//! entry expired or was flushed and is resolved again; the latest [`KNOWN_PER_PLACE`] ×
//! `max_hops` of them are remembered) is never evicted for an unknown one, and evicts the
//! oldest unknown one when it needs a place; only when every place is a known next hop does
//! a new known one evict the oldest known one, and a new unknown one is refused (its packet
//! dropped, its resolution still asked for: [`Hold::Refused`]). So a scan of new on-link
//! destinations, at any rate, competes only with itself: each scanned next hop still waits
//! as long as `max_hops` newer ones take to come (256 places at 200 a second: ~1.3 s, where
//! a live neighbour answers within milliseconds), and an established neighbour's packets
//! wait as if there were no scan. Rejected: refusing new next hops when full (what the
//! kernel does past `gc_thresh3`), which lets a scan hold every place for the whole
//! timeout, and a fixed share reserved for known next hops, which a scan cannot use when
//! nothing else waits and which must be sized without knowing the traffic.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::IpAddr;

use zl_core::Nanos;
use zl_wire::MacAddr;

use crate::table::Fib;

/// Next hops remembered as resolved before, per place of the wait (the bound of the set).
pub const KNOWN_PER_PLACE: usize = 4;

/// What [`NeighbourWait::hold`] did with a packet.
#[derive(Debug)]
pub enum Hold<T> {
    /// Held; the first packet for this next hop: ask the kernel to resolve it.
    HeldFirst,
    /// Held behind others for the same next hop (resolution already asked).
    Held,
    /// This next hop's queue is full (resolution already asked): count the packet
    /// `no_neighbour` and free it.
    Full(T),
    /// No place for this next hop (every place holds a known next hop, or the wait holds
    /// nothing at all: `per_hop` or `max_hops` 0): count the packet `no_neighbour`, free it,
    /// and still ask the kernel to resolve the next hop, so that later packets find its MAC.
    Refused(T),
}

/// (port, next hop).
type Key = (u16, IpAddr);

struct Waiting<T> {
    since: Nanos,
    /// The entry's number, which its place in `order` carries (an entry's place there
    /// outlives it: see [`NeighbourWait::order`]).
    seq: u64,
    known: bool,
    packets: VecDeque<T>,
}

/// Held packets by (port, next hop).
pub struct NeighbourWait<T> {
    per_hop: usize,
    max_hops: usize,
    timeout: Nanos,
    waiting: HashMap<Key, Waiting<T>>,
    /// The waiting next hops in the order they came, unknown ones (`[0]`) and known ones
    /// (`[1]`) apart, each with its entry's `seq`: the eviction order and, as every entry
    /// starts at the `now` it came (time does not go back), the expiry order, so that
    /// neither looks through the whole table. A released or evicted entry's place stays
    /// until it reaches the front or the queue is compacted (when it holds more than twice
    /// the places plus a slack), so each queue is bounded and the work per packet O(1)
    /// amortised.
    order: [VecDeque<(Key, u64)>; 2],
    next_seq: u64,
    /// Next hops released with a MAC before, the latest `known_cap` of them.
    known: HashSet<Key>,
    known_order: VecDeque<Key>,
    known_cap: usize,
    /// Packets held now.
    held: usize,
}

const UNKNOWN: usize = 0;
const KNOWN: usize = 1;

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
            order: [VecDeque::new(), VecDeque::new()],
            next_seq: 0,
            known: HashSet::new(),
            known_order: VecDeque::new(),
            known_cap: max_hops.saturating_mul(KNOWN_PER_PLACE),
            held: 0,
        }
    }

    /// Holds `pkt` for `next_hop` on `port`. A next hop that had to give its place up for
    /// this one (see the module doc) leaves its packets in `evicted` (count them
    /// `no_neighbour`).
    pub fn hold(
        &mut self,
        now: Nanos,
        port: u16,
        next_hop: IpAddr,
        pkt: T,
        evicted: &mut Vec<T>,
    ) -> Hold<T> {
        let key = (port, next_hop);
        if let Some(w) = self.waiting.get_mut(&key) {
            if w.packets.len() < self.per_hop {
                w.packets.push_back(pkt);
                self.held += 1;
                return Hold::Held;
            }
            return Hold::Full(pkt);
        }
        if self.per_hop == 0 || self.max_hops == 0 {
            return Hold::Refused(pkt);
        }
        let known = self.known.contains(&key);
        if self.waiting.len() >= self.max_hops
            && !self.evict_oldest(UNKNOWN, evicted)
            && !(known && self.evict_oldest(KNOWN, evicted))
        {
            return Hold::Refused(pkt);
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        let mut packets = VecDeque::with_capacity(self.per_hop.min(8));
        packets.push_back(pkt);
        self.held += 1;
        self.waiting.insert(
            key,
            Waiting {
                since: now,
                seq,
                known,
                packets,
            },
        );
        let class = usize::from(known);
        self.order[class].push_back((key, seq));
        if self.order[class].len() > 2 * self.max_hops + 64 {
            let waiting = &self.waiting;
            self.order[class].retain(|(k, s)| waiting.get(k).is_some_and(|w| w.seq == *s));
        }
        Hold::HeldFirst
    }

    /// Removes the entry of `class` that came first, its packets into `out`; false when
    /// that class holds none.
    fn evict_oldest(&mut self, class: usize, out: &mut Vec<T>) -> bool {
        while let Some((key, seq)) = self.order[class].pop_front() {
            if self.waiting.get(&key).is_some_and(|w| w.seq == seq) {
                if let Some(w) = self.waiting.remove(&key) {
                    self.held -= w.packets.len();
                    out.extend(w.packets);
                }
                return true;
            }
        }
        false
    }

    /// Packets whose next hop `fib` now resolves, in arrival order per next hop, with their
    /// port and MAC. Those next hops are known from now on (see the module doc).
    pub fn release(&mut self, fib: &Fib, out: &mut Vec<(u16, MacAddr, T)>) {
        let ready: Vec<(Key, MacAddr)> = self
            .waiting
            .keys()
            .filter_map(|&(port, hop)| Some(((port, hop), fib.neighbour(port, hop)?)))
            .collect();
        for (key, mac) in ready {
            if let Some(w) = self.waiting.remove(&key) {
                self.held -= w.packets.len();
                out.extend(w.packets.into_iter().map(|p| (key.0, mac, p)));
                if !w.known {
                    self.learn(key);
                }
            }
        }
    }

    /// Remembers `key` as resolved before, forgetting the one learnt longest ago past the
    /// bound.
    fn learn(&mut self, key: Key) {
        if self.known_cap == 0 || !self.known.insert(key) {
            return;
        }
        self.known_order.push_back(key);
        if self.known_order.len() > self.known_cap {
            if let Some(old) = self.known_order.pop_front() {
                self.known.remove(&old);
            }
        }
    }

    /// Whether `next_hop` on `port` resolved here before (see the module doc).
    pub fn is_known(&self, port: u16, next_hop: IpAddr) -> bool {
        self.known.contains(&(port, next_hop))
    }

    /// Packets of next hops that waited longer than the timeout (count them
    /// `no_neighbour`).
    pub fn expire(&mut self, now: Nanos, out: &mut Vec<T>) {
        for class in [UNKNOWN, KNOWN] {
            while let Some(&(key, seq)) = self.order[class].front() {
                let live = self.waiting.get(&key).filter(|w| w.seq == seq);
                if live.is_some_and(|w| now.0.saturating_sub(w.since.0) < self.timeout.0) {
                    break;
                }
                self.order[class].pop_front();
                // A released or evicted entry's place just goes (its key may wait again
                // under a newer `seq`, which stays).
                if live.is_some() {
                    if let Some(w) = self.waiting.remove(&key) {
                        self.held -= w.packets.len();
                        out.extend(w.packets);
                    }
                }
            }
        }
    }

    /// Packets held now.
    pub fn len(&self) -> usize {
        self.held
    }

    /// True when no packet is held.
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUT: Nanos = Nanos::from_millis(3000);

    fn ip(i: u32) -> IpAddr {
        IpAddr::V4(std::net::Ipv4Addr::from(0x0a42_0000 + i))
    }
    fn ms(t: u64) -> Nanos {
        Nanos::from_millis(t)
    }
    /// A table that resolves `hops` on port 0 (each to a MAC of its last octet).
    fn fib_with(hops: &[IpAddr]) -> Fib {
        let mut f = Fib::default();
        for h in hops {
            let last = match h {
                IpAddr::V4(a) => a.octets()[3],
                IpAddr::V6(a) => a.octets()[15],
            };
            f.neighbours.insert((0, *h), MacAddr([2, 0, 0, 0, 0, last]));
        }
        f
    }
    /// Holds `pkt`, asserting that nothing is evicted; what `hold` said.
    fn hold(w: &mut NeighbourWait<u32>, t: u64, hop: IpAddr, pkt: u32) -> Hold<u32> {
        let mut ev = Vec::new();
        let h = w.hold(ms(t), 0, hop, pkt, &mut ev);
        assert!(ev.is_empty(), "evicted {ev:?}");
        h
    }
    /// Makes `hop` known: one packet held and released.
    fn resolve_once(w: &mut NeighbourWait<u32>, t: u64, hop: IpAddr) {
        assert!(matches!(hold(w, t, hop, 0), Hold::HeldFirst));
        let mut out = Vec::new();
        w.release(&fib_with(&[hop]), &mut out);
        assert_eq!(out.len(), 1);
        assert!(w.is_known(0, hop));
    }

    #[test]
    fn a_full_table_gives_the_oldest_waiting_place_to_a_new_next_hop() {
        let mut w = NeighbourWait::new(2, 3, TIMEOUT);
        for i in 0..3 {
            assert!(matches!(
                hold(&mut w, i, ip(i as u32), i as u32),
                Hold::HeldFirst
            ));
        }
        assert!(matches!(hold(&mut w, 3, ip(0), 10), Hold::Held));
        let mut ev = Vec::new();
        assert!(matches!(
            w.hold(ms(4), 0, ip(3), 3, &mut ev),
            Hold::HeldFirst
        ));
        assert_eq!(ev, vec![0, 10], "the first next hop's packets, in order");
        assert_eq!(w.len(), 3);
        // The evicted next hop comes back as a new one (its resolution asked again), and
        // the next oldest gives its place.
        ev.clear();
        assert!(matches!(
            w.hold(ms(5), 0, ip(0), 11, &mut ev),
            Hold::HeldFirst
        ));
        assert_eq!(ev, vec![1]);
    }

    #[test]
    fn a_scan_cannot_take_the_place_of_a_neighbour_that_resolved_before() {
        let mut w = NeighbourWait::new(4, 8, TIMEOUT);
        let neighbour = ip(0xffff);
        resolve_once(&mut w, 0, neighbour);
        // The neighbour's entry is flushed in the kernel: packets for it wait again, in the
        // middle of a scan of 1000 new destinations a millisecond apart (far more than the
        // table holds), none of which resolves.
        let mut evicted = Vec::new();
        for i in 0..1000u32 {
            let t = 1000 + u64::from(i);
            if i == 100 {
                assert!(matches!(
                    w.hold(ms(t), 0, neighbour, 7, &mut evicted),
                    Hold::HeldFirst
                ));
            }
            let h = w.hold(ms(t), 0, ip(i), 1_000 + i, &mut evicted);
            assert!(matches!(h, Hold::HeldFirst), "scan hop {i}: {h:?}");
        }
        assert!(!evicted.contains(&7), "the neighbour's packet stayed");
        // Every scan hop but the last 7 gave its place up (the neighbour holds one place).
        assert_eq!(evicted.len(), 1000 - 7);
        assert_eq!(w.len(), 8);
        let mut out = Vec::new();
        w.release(&fib_with(&[neighbour]), &mut out);
        assert_eq!(out, vec![(0, MacAddr([2, 0, 0, 0, 0, 0xff]), 7)]);
    }

    #[test]
    fn with_every_place_known_an_unknown_hop_is_refused_and_a_known_one_evicts_the_oldest() {
        let mut w = NeighbourWait::new(4, 2, TIMEOUT);
        let (a, b, c) = (ip(1), ip(2), ip(3));
        for h in [a, b, c] {
            resolve_once(&mut w, 0, h);
        }
        assert!(matches!(hold(&mut w, 10, a, 1), Hold::HeldFirst));
        assert!(matches!(hold(&mut w, 11, b, 2), Hold::HeldFirst));
        assert!(matches!(hold(&mut w, 12, ip(9), 3), Hold::Refused(3)));
        let mut ev = Vec::new();
        assert!(matches!(w.hold(ms(13), 0, c, 4, &mut ev), Hold::HeldFirst));
        assert_eq!(ev, vec![1], "the known hop that waited longest");
    }

    #[test]
    fn nothing_is_held_with_no_room_per_hop_but_resolution_is_still_asked() {
        let mut w = NeighbourWait::new(0, 256, TIMEOUT);
        assert!(matches!(hold(&mut w, 0, ip(1), 1), Hold::Refused(1)));
        assert!(matches!(hold(&mut w, 0, ip(1), 2), Hold::Refused(2)));
        assert!(w.is_empty());
        let mut w = NeighbourWait::new(4, 0, TIMEOUT);
        assert!(matches!(hold(&mut w, 0, ip(1), 1), Hold::Refused(1)));
    }

    #[test]
    fn expiry_takes_the_entry_that_waits_not_an_earlier_one_of_the_same_hop() {
        let mut w = NeighbourWait::new(4, 4, TIMEOUT);
        let a = ip(1);
        assert!(matches!(hold(&mut w, 0, a, 1), Hold::HeldFirst));
        let mut ev = Vec::new();
        // Released (a MAC came), then waiting again later (flushed): a newer entry.
        w.release(&fib_with(&[a]), &mut Vec::new());
        assert!(matches!(
            w.hold(ms(2000), 0, a, 2, &mut ev),
            Hold::HeldFirst
        ));
        let mut gone = Vec::new();
        w.expire(ms(3000), &mut gone);
        assert!(
            gone.is_empty(),
            "the first entry's time is not the second's"
        );
        w.expire(ms(4999), &mut gone);
        assert!(gone.is_empty());
        w.expire(ms(5000), &mut gone);
        assert_eq!(gone, vec![2]);
        assert!(w.is_empty());
        assert_eq!(w.len(), 0);
    }

    #[test]
    fn the_order_queues_and_the_known_set_stay_bounded() {
        let mut w = NeighbourWait::new(1, 4, TIMEOUT);
        for i in 0..10_000u32 {
            assert!(matches!(hold(&mut w, 0, ip(i), i), Hold::HeldFirst));
            w.release(&fib_with(&[ip(i)]), &mut Vec::new());
            assert!(w.order[UNKNOWN].len() <= 2 * 4 + 65);
        }
        assert_eq!(w.known.len(), 4 * KNOWN_PER_PLACE);
        assert!(w.is_known(0, ip(9_999)));
        assert!(!w.is_known(0, ip(0)), "learnt longest ago, forgotten");
    }
}
