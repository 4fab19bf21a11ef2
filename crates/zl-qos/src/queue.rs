//! A class queue: FIFO of caller-defined items, bounded in packets and bytes, with the
//! enqueue timestamp of every packet kept for the sojourn measure of docs/algorithms/sojourn.md.
//!
//! The ring is a `VecDeque` reserved once at its largest capacity (`max_packets`) and never
//! grown, so no enqueue allocates. The active limits ([`Capacity`]) may be lowered or raised
//! at run time (buffer sizing, `sizing.rs`) up to `max_packets`; lowering them never drops
//! packets already queued, it only refuses new ones until the queue drains below the limit.
//!
//! The queue maintains the [`QueueView`] the AQM policies read: `head_enqueued_at` (the
//! sojourn manager's `now - enqueue_time` of the head, docs/algorithms/sojourn.md "decided") and
//! `idle_since` (RED's idle-time decay, docs/algorithms/red.md, step 1).

use std::collections::VecDeque;

use zl_aqm::{PacketMeta, QueueView};
use zl_core::Nanos;

/// A queue's active limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capacity {
    /// Most packets queued at once.
    pub packets: u32,
    /// Most bytes queued at once.
    pub bytes: u64,
}

/// One queued packet (the type `zl_aqm`'s disciplines hold too).
pub use zl_aqm::Queued;

/// The FIFO of one class.
#[derive(Debug)]
pub struct ClassQueue<T> {
    ring: VecDeque<Queued<T>>,
    max_packets: u32,
    /// The [`QueueView`] an arrival sees, kept up to date by every push, pop and limit change
    /// (its length, bytes, limits and idle time are this queue's own), with
    /// `head_enqueued_at` left `None`: an arrival borrows it
    /// ([`ClassQueue::view_without_head`]) instead of copying six fields into a new one, and
    /// [`ClassQueue::view`] adds the head.
    state: QueueView,
}

impl<T> ClassQueue<T> {
    /// A queue whose ring holds at most `max_packets`, with active limits `cap` (clamped to
    /// `max_packets`). Allocates the ring now.
    pub fn new(max_packets: u32, cap: Capacity) -> Self {
        ClassQueue {
            ring: VecDeque::with_capacity(max_packets as usize),
            max_packets,
            state: QueueView {
                len_packets: 0,
                len_bytes: 0,
                capacity_packets: cap.packets.min(max_packets),
                capacity_bytes: cap.bytes,
                head_enqueued_at: None,
                idle_since: Some(Nanos::ZERO),
            },
        }
    }

    /// Packets queued.
    pub fn len(&self) -> u32 {
        self.ring.len() as u32
    }

    /// True when no packet is queued.
    pub fn is_empty(&self) -> bool {
        self.ring.is_empty()
    }

    /// Bytes queued.
    pub fn bytes(&self) -> u64 {
        self.state.len_bytes
    }

    /// The limits in force now (a live buffer rule may change them).
    pub fn capacity(&self) -> Capacity {
        Capacity {
            packets: self.state.capacity_packets,
            bytes: self.state.capacity_bytes,
        }
    }

    /// The ring's size: the most packets the queue can ever hold.
    pub fn max_packets(&self) -> u32 {
        self.max_packets
    }

    /// Sets the active limits (packets clamped to `max_packets`).
    pub fn set_capacity(&mut self, cap: Capacity) {
        self.state.capacity_packets = cap.packets.min(self.max_packets);
        self.state.capacity_bytes = cap.bytes;
    }

    /// The state the AQM sees for an arrival now.
    #[inline]
    pub fn view(&self) -> QueueView {
        QueueView {
            head_enqueued_at: self.ring.front().map(|q| q.enqueued_at),
            ..self.state
        }
    }

    /// The lengths of the first `n` queued packets (of all when fewer), head first.
    #[inline]
    pub fn lens(&self, n: usize) -> impl Iterator<Item = u32> + '_ {
        self.ring
            .range(..n.min(self.ring.len()))
            .map(|q| q.meta.len)
    }

    /// [`ClassQueue::view`] without the head's enqueue time, borrowed: the view the queue
    /// keeps, whose `head_enqueued_at` is `None`. For an arrival whose policy does not read
    /// that field ([`zl_aqm::AqmPolicy::reads_head_time`]): neither the ring's head is read
    /// nor the view copied.
    #[inline]
    pub fn view_without_head(&self) -> &QueueView {
        &self.state
    }

    /// The metadata of the packet `i` places behind the head (0: the head).
    pub(crate) fn meta_at(&self, i: usize) -> Option<&PacketMeta> {
        self.ring.get(i).map(|q| &q.meta)
    }

    /// When the packet `i` places behind the head was queued.
    pub(crate) fn enqueued_at(&self, i: usize) -> Option<Nanos> {
        self.ring.get(i).map(|q| q.enqueued_at)
    }

    /// Length in bytes of the head packet.
    #[inline]
    pub fn head_len(&self) -> Option<u32> {
        self.ring.front().map(|q| q.meta.len)
    }

    /// Appends a packet, or hands it back when the limits are reached.
    #[inline]
    pub fn push(&mut self, now: Nanos, meta: PacketMeta, item: T) -> Result<(), T> {
        if self.view().is_full_for(meta.len) {
            return Err(item);
        }
        self.push_fitting(now, meta, move || item);
        Ok(())
    }

    /// [`ClassQueue::push`] for a packet the caller has already checked against
    /// [`ClassQueue::view`]`.is_full_for` (the engine's arrival path, through
    /// [`zl_aqm::Admission`]). Past the bounds the ring
    /// still holds the packet, growing beyond its reservation: a caller's bug costs memory,
    /// not a lost packet. The item is taken (`take`) only once the ring has its room, so a
    /// caller's item moves once, from where it lies into the ring (taken before the room
    /// check, the 40-byte buffer would go through the stack around the growing call).
    #[inline]
    pub(crate) fn push_fitting(&mut self, now: Nanos, meta: PacketMeta, take: impl FnOnce() -> T) {
        debug_assert!(!self.view().is_full_for(meta.len));
        self.state.len_packets += 1;
        self.state.len_bytes += meta.len as u64;
        self.state.idle_since = None;
        if self.ring.len() == self.ring.capacity() {
            return self.push_growing(now, meta, take);
        }
        self.ring.push_back(Queued {
            item: take(),
            meta,
            enqueued_at: now,
        });
    }

    /// [`ClassQueue::push_fitting`] into a full ring (it grows): off the arrival path.
    #[cold]
    #[inline(never)]
    fn push_growing(&mut self, now: Nanos, meta: PacketMeta, take: impl FnOnce() -> T) {
        self.ring.push_back(Queued {
            item: take(),
            meta,
            enqueued_at: now,
        });
    }

    /// Appends a packet a class's discipline chose to send next, or one moved over by a
    /// reconfiguration, with its enqueue time, whatever the limits (it was admitted already).
    pub(crate) fn push_held(&mut self, q: Queued<T>) {
        self.state.len_packets += 1;
        self.state.len_bytes += q.meta.len as u64;
        self.state.idle_since = None;
        self.ring.push_back(q);
    }

    /// The item of the packet queued last, to rewrite in place (the engine's congestion mark).
    #[inline]
    pub(crate) fn back_item_mut(&mut self) -> Option<&mut T> {
        self.ring.back_mut().map(|q| &mut q.item)
    }

    /// Removes the head packet; `now` starts the idle period if the queue empties.
    #[inline]
    pub fn pop(&mut self, now: Nanos) -> Option<Queued<T>> {
        let q = self.ring.pop_front()?;
        self.state.len_packets -= 1;
        self.state.len_bytes -= q.meta.len as u64;
        if self.ring.is_empty() {
            self.state.idle_since = Some(now);
        }
        Some(q)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(len: u32) -> PacketMeta {
        PacketMeta {
            len,
            ..PacketMeta::default()
        }
    }

    #[test]
    fn bounds_and_view() {
        let mut q = ClassQueue::new(
            3,
            Capacity {
                packets: 10,
                bytes: 2500,
            },
        );
        assert_eq!(q.capacity().packets, 3);
        assert!(q.push(Nanos(5), meta(1000), 1).is_ok());
        assert!(q.push(Nanos(6), meta(1000), 2).is_ok());
        assert_eq!(q.push(Nanos(7), meta(1000), 3), Err(3), "byte limit");
        assert!(q.push(Nanos(7), meta(400), 4).is_ok());
        assert_eq!(q.push(Nanos(8), meta(1), 5), Err(5), "packet limit");
        let v = q.view();
        assert_eq!((v.len_packets, v.len_bytes), (3, 2400));
        assert_eq!(v.head_enqueued_at, Some(Nanos(5)));
        assert_eq!(v.idle_since, None);
        let without_head = |v: QueueView| QueueView {
            head_enqueued_at: None,
            ..v
        };
        assert_eq!(*q.view_without_head(), without_head(v));
        for _ in 0..3 {
            q.pop(Nanos(20)).unwrap();
        }
        assert_eq!(q.view().idle_since, Some(Nanos(20)));
        assert_eq!(*q.view_without_head(), without_head(q.view()));
        assert_eq!(q.bytes(), 0);
    }

    #[test]
    fn lens_are_the_first_n_head_first() {
        let mut q = ClassQueue::new(
            4,
            Capacity {
                packets: 4,
                bytes: 10_000,
            },
        );
        for (i, len) in [100, 200, 300].into_iter().enumerate() {
            q.push(Nanos(i as u64), meta(len), i).unwrap();
        }
        q.pop(Nanos(5)).unwrap();
        q.push(Nanos(6), meta(400), 3).unwrap();
        q.push(Nanos(7), meta(500), 4).unwrap();
        let lens = |n| q.lens(n).collect::<Vec<_>>();
        assert_eq!(lens(0), Vec::<u32>::new());
        assert_eq!(lens(2), [200, 300]);
        assert_eq!(lens(4), [200, 300, 400, 500]);
        assert_eq!(lens(9), [200, 300, 400, 500]);
    }
}
