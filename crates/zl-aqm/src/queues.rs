//! Queue disciplines: policies that hold their packets in sub-queues of their own and decide
//! when packets arrive *and* when they leave (CoDel, FQ-CoDel, DualPI2, ZL-RED with flow
//! isolation), beside the enqueue-time policies of [`crate::Aqm`] that decide on a FIFO the
//! caller keeps.
//!
//! Contract ([`Discipline`]): the caller offers each arrival with [`Discipline::enqueue`] (the
//! time, the packet's [`PacketMeta`], the caller's opaque item, and where a shared Zombie List
//! was observed upstream, that observation) and asks for the next packet to send with
//! [`Discipline::dequeue`] when its link can take one. A discipline may discard packets it had
//! admitted: at dequeue (CoDel's control law, DualPI2's classic drop) or to make room
//! (FQ-CoDel's drop from the fattest queue); it hands each back through the caller's
//! `discard` sink with its [`Discard`] cause, so the caller counts and frees it. Time and
//! randomness are passed in; nothing allocates per packet: every sub-queue lives in one arena
//! ([`SubQueues`]) reserved when the discipline is built.
//!
//! A dequeue-time decision is made when the caller asks for the packet, as Linux's
//! `qdisc_peek_dequeued` makes a child qdisc decide when its parent (a shaper, a scheduler)
//! first looks at it: a caller that cannot send the packet at once keeps it (the QoS engine
//! keeps it at its class's head) and sends it later without asking again.

use zl_core::{FlowId, Nanos};
use zl_zombie::Observation;

use crate::PacketMeta;

/// One packet a discipline holds: the caller's item, what the policy knows of it, and when it
/// was queued (its sojourn is `now - enqueued_at`).
#[derive(Debug, PartialEq, Eq)]
pub struct Queued<T> {
    /// The caller's item (a buffer, a simulated packet's handle).
    pub item: T,
    /// What the policy saw of the packet.
    pub meta: PacketMeta,
    /// When it was queued.
    pub enqueued_at: Nanos,
}

/// Why a discipline discarded a packet it had admitted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Discard {
    /// Its AQM dropped it as it left (CoDel's control law, DualPI2's classic drop).
    Dequeue,
    /// A later arrival found the buffer full and this packet was pushed out to make room
    /// (FQ-CoDel drops from the head of the fattest queue, RFC 8290 §4.1).
    Overflow,
}

/// The packet a discipline sends next.
#[derive(Debug, PartialEq, Eq)]
pub struct Departure<T> {
    /// The packet, out of the discipline.
    pub queued: Queued<T>,
    /// The discipline signals congestion on it: the caller sets CE (or the extension header's
    /// ECN bit) before sending it. Only ever set on a markable packet.
    pub mark: bool,
}

/// What [`Discipline::dequeue`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Next<T> {
    /// The packet to send now.
    Packet(Departure<T>),
    /// Packets are queued but none may leave before this time (a rate-limited sub-queue).
    Hold(Nanos),
    /// Nothing is queued.
    Empty,
}

/// A queue discipline: a policy that holds its packets (see the module doc). The caller
/// (`zl-qos`'s class queue, netsim's bottleneck, the C ABI) owns the clock, the random source
/// and the items.
pub trait Discipline<T> {
    /// Offers one arrival. `Ok` when the packet is queued (`Enqueue`, or `MarkCe` after
    /// `mark` was applied to the item); `Err` hands the item back with the drop's verdict.
    /// Packets pushed out to make room go to `discard`.
    #[allow(clippy::too_many_arguments)]
    fn enqueue<R: rand::RngCore + ?Sized>(
        &mut self,
        now: Nanos,
        pkt: &PacketMeta,
        observed: Option<&Observation>,
        item: T,
        rng: &mut R,
        mark: impl FnOnce(&mut T),
        discard: &mut impl FnMut(Queued<T>, Discard),
    ) -> Result<crate::Verdict, (crate::Verdict, T)>;

    /// The packet to send at `now` (the packets its AQM drops on the way go to `discard`).
    fn dequeue<R: rand::RngCore + ?Sized>(
        &mut self,
        now: Nanos,
        rng: &mut R,
        discard: &mut impl FnMut(Queued<T>, Discard),
    ) -> Next<T>;

    /// Packets held.
    fn len_packets(&self) -> u32;

    /// Bytes held.
    fn len_bytes(&self) -> u64;

    /// The buffer's limits (a live buffer rule may change them; lowering them never discards
    /// what is queued, it refuses arrivals until the backlog is below them).
    fn set_capacity(&mut self, packets: u32, bytes: u64);

    /// Takes a packet queued by another discipline (a live reconfiguration), with no decision:
    /// it goes where an arrival of its flow would. `Err` hands it back when the arena is full.
    fn adopt(&mut self, q: Queued<T>) -> Result<(), Queued<T>>;

    /// Takes every packet, in the order the discipline would send them as far as it can say
    /// without deciding anything (a reconfiguration to another discipline, the end of a run).
    fn drain(&mut self, f: impl FnMut(Queued<T>));
}

/// The "no packet" link of the arena.
const NIL: u32 = u32::MAX;

#[derive(Debug)]
struct Slot<T> {
    entry: Option<Queued<T>>,
    next: u32,
}

/// One sub-queue's ends and size (its packets are linked in the arena).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SubQueue {
    head: u32,
    tail: u32,
    len: u32,
    bytes: u64,
}

impl Default for SubQueue {
    fn default() -> Self {
        SubQueue {
            head: NIL,
            tail: NIL,
            len: 0,
            bytes: 0,
        }
    }
}

impl SubQueue {
    /// Packets in this sub-queue.
    #[inline]
    pub fn len(&self) -> u32 {
        self.len
    }
    /// Bytes in this sub-queue.
    #[inline]
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
    /// True when it holds no packet.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// `n` FIFO sub-queues sharing one arena of packet slots, reserved once: a push takes a free
/// slot and links it at its sub-queue's tail, a pop unlinks the head; neither allocates. The
/// arena's size bounds the packets held by all sub-queues together.
#[derive(Debug)]
pub struct SubQueues<T> {
    slots: Vec<Slot<T>>,
    /// Head of the free list of slots.
    free: u32,
    queues: Box<[SubQueue]>,
    len: u32,
    bytes: u64,
}

impl<T> SubQueues<T> {
    /// `queues` empty sub-queues over an arena of `slots` packets (allocated now).
    pub fn new(queues: usize, slots: u32) -> Self {
        let slots = slots.max(1);
        let arena = (0..slots)
            .map(|i| Slot {
                entry: None,
                next: if i + 1 < slots { i + 1 } else { NIL },
            })
            .collect();
        SubQueues {
            slots: arena,
            free: 0,
            queues: vec![SubQueue::default(); queues.max(1)].into_boxed_slice(),
            len: 0,
            bytes: 0,
        }
    }

    /// The number of sub-queues.
    #[inline]
    pub fn queues(&self) -> usize {
        self.queues.len()
    }

    /// The arena's size: the most packets all sub-queues can hold together.
    #[inline]
    pub fn capacity(&self) -> u32 {
        self.slots.len() as u32
    }

    /// Packets in all sub-queues.
    #[inline]
    pub fn len(&self) -> u32 {
        self.len
    }

    /// True when no sub-queue holds a packet.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes in all sub-queues.
    #[inline]
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Sub-queue `q`'s size. Panics when `q` is out of range (a discipline's own index).
    #[inline]
    pub fn queue(&self, q: usize) -> &SubQueue {
        &self.queues[q]
    }

    /// Appends to sub-queue `q`; hands the packet back when the arena is full.
    pub fn push_back(&mut self, q: usize, entry: Queued<T>) -> Result<(), Queued<T>> {
        let s = self.free;
        if s == NIL {
            return Err(entry);
        }
        let len = entry.meta.len as u64;
        let slot = &mut self.slots[s as usize];
        self.free = slot.next;
        slot.entry = Some(entry);
        slot.next = NIL;
        let sq = &mut self.queues[q];
        if sq.tail == NIL {
            sq.head = s;
        } else {
            self.slots[sq.tail as usize].next = s;
        }
        sq.tail = s;
        sq.len += 1;
        sq.bytes += len;
        self.len += 1;
        self.bytes += len;
        Ok(())
    }

    /// Removes the head of sub-queue `q`.
    pub fn pop_front(&mut self, q: usize) -> Option<Queued<T>> {
        let sq = &mut self.queues[q];
        let s = sq.head;
        if s == NIL {
            return None;
        }
        let slot = &mut self.slots[s as usize];
        let entry = slot.entry.take()?;
        sq.head = slot.next;
        if sq.head == NIL {
            sq.tail = NIL;
        }
        slot.next = self.free;
        self.free = s;
        let len = entry.meta.len as u64;
        sq.len -= 1;
        sq.bytes -= len;
        self.len -= 1;
        self.bytes -= len;
        Some(entry)
    }

    /// The head of sub-queue `q`.
    #[inline]
    pub fn front(&self, q: usize) -> Option<&Queued<T>> {
        let s = self.queues[q].head;
        if s == NIL {
            return None;
        }
        self.slots[s as usize].entry.as_ref()
    }
}

/// What a flow-isolating discipline keys its flows or hosts by.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "kebab-case")]
pub enum IsolateBy {
    /// The packet's flow ([`PacketMeta::flow`], the data plane's `parse.flow_key`).
    #[default]
    Flow,
    /// The source host ([`PacketMeta::src_host`]).
    #[serde(rename = "srchost")]
    SrcHost,
    /// The destination host ([`PacketMeta::dst_host`]).
    #[serde(rename = "dsthost")]
    DstHost,
}

impl IsolateBy {
    /// The key a packet is isolated by. Host keys are the 16-bit host hashes of
    /// [`PacketMeta`], set apart from every flow id by their high bits.
    #[inline]
    pub fn key(self, pkt: &PacketMeta) -> FlowId {
        match self {
            IsolateBy::Flow => pkt.flow,
            IsolateBy::SrcHost => FlowId(HOST_KEY | u64::from(pkt.src_host)),
            IsolateBy::DstHost => FlowId(HOST_KEY | (1 << 16) | u64::from(pkt.dst_host)),
        }
    }

    /// The name used in config files.
    pub fn name(self) -> &'static str {
        match self {
            IsolateBy::Flow => "flow",
            IsolateBy::SrcHost => "srchost",
            IsolateBy::DstHost => "dsthost",
        }
    }
}

/// The high bits of a host key ([`IsolateBy::key`]).
const HOST_KEY: u64 = 0x486f_7374 << 32;

#[cfg(test)]
mod tests {
    use super::*;

    fn q(len: u32, tag: u32) -> Queued<u32> {
        Queued {
            item: tag,
            meta: PacketMeta {
                len,
                ..PacketMeta::default()
            },
            enqueued_at: Nanos(u64::from(tag)),
        }
    }

    #[test]
    fn sub_queues_are_fifos_sharing_one_arena() {
        let mut s = SubQueues::new(3, 4);
        assert!(s.push_back(0, q(100, 1)).is_ok());
        assert!(s.push_back(2, q(200, 2)).is_ok());
        assert!(s.push_back(0, q(300, 3)).is_ok());
        assert!(s.push_back(1, q(400, 4)).is_ok());
        assert_eq!(s.push_back(1, q(500, 5)).unwrap_err().item, 5, "arena full");
        assert_eq!((s.len(), s.bytes()), (4, 1000));
        assert_eq!((s.queue(0).len(), s.queue(0).bytes()), (2, 400));
        assert_eq!(s.front(0).map(|e| e.item), Some(1));
        assert_eq!(s.pop_front(0).map(|e| e.item), Some(1));
        assert_eq!(s.pop_front(0).map(|e| e.item), Some(3));
        assert_eq!(s.pop_front(0), None);
        // Freed slots are reused, order kept.
        assert!(s.push_back(2, q(10, 6)).is_ok());
        assert!(s.push_back(2, q(10, 7)).is_ok());
        let drained: Vec<u32> = std::iter::from_fn(|| s.pop_front(2).map(|e| e.item)).collect();
        assert_eq!(drained, [2, 6, 7]);
        assert_eq!(s.pop_front(1).map(|e| e.item), Some(4));
        assert!(s.is_empty());
        assert_eq!(s.bytes(), 0);
    }

    #[test]
    fn host_keys_never_meet_each_other() {
        let pkt = PacketMeta {
            src_host: 7,
            dst_host: 7,
            ..PacketMeta::default()
        };
        assert_ne!(IsolateBy::SrcHost.key(&pkt), IsolateBy::DstHost.key(&pkt));
        assert_eq!(IsolateBy::Flow.key(&pkt), pkt.flow);
    }
}
