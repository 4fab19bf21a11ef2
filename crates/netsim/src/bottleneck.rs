//! The bottleneck router's queueing: what happens between a packet's arrival at the router and
//! its turn on the bottleneck link. [`Bottleneck`] is implemented by [`FifoQueue`], one FIFO
//! whose admission is any [`zl_aqm::Aqm`] (the project's own policies, unchanged), by
//! [`crate::discipline`]'s queue disciplines that hold their own packets (CoDel, FQ-CoDel,
//! DualPI2, ZL-RED with isolation), and by the multi-class Diffserv pipeline in
//! [`crate::diffserv`].
//!
//! Contract for the simulator: after every [`Bottleneck::enqueue`] and [`Bottleneck::dequeue`]
//! it takes the packets the bottleneck discarded after admitting them
//! ([`Bottleneck::take_discarded`]), counts them as drops of their flows and frees them; a
//! [`Dequeue::Hold`] makes the link wait until then (or until the next arrival).

use std::collections::VecDeque;

use rand_xoshiro::Xoshiro256PlusPlus;
use zl_aqm::{Admission, Aqm, AqmStats, Arrival, Discard, PacketMeta, QueueView, Verdict};
use zl_core::Nanos;

/// The simulator's one random source type (seeded; passed into every policy).
pub type SimRng = Xoshiro256PlusPlus;

/// A packet leaving the bottleneck queue for the link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dequeued {
    /// The simulator's packet handle given at enqueue.
    pub handle: u32,
    /// When it joined the queue (sojourn = now - enqueued_at).
    pub enqueued_at: Nanos,
    /// The bottleneck signals congestion on it as it leaves (a dequeue-time ECN mark): the
    /// simulator sets CE on the packet, as for an enqueue-time `MarkCe`.
    pub mark: bool,
}

/// What the bottleneck has for the link when the link can take a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dequeue {
    /// The packet to send now.
    Packet(Dequeued),
    /// Packets are queued but none may leave before this time (a rate-limited sub-queue).
    Hold(Nanos),
    /// Nothing is queued.
    Empty,
}

/// A router output: admission, queueing and scheduling onto one link.
pub trait Bottleneck: Send {
    /// Offers an arriving packet carrying code point `dscp`; an admitting verdict means the
    /// bottleneck now holds `handle`. Returns the verdict and the class the packet was put in
    /// (0 for a single FIFO); a meter may change `meta.color`.
    fn enqueue(
        &mut self,
        now: Nanos,
        rng: &mut SimRng,
        meta: &mut PacketMeta,
        dscp: Option<u8>,
        handle: u32,
    ) -> (Verdict, u8);

    /// The next packet to transmit, or when there will be one.
    fn dequeue(&mut self, now: Nanos) -> Dequeue;

    /// Hands every packet discarded after its admission (at dequeue, or pushed out by a later
    /// arrival) to `f` with its cause, oldest first. Only disciplines that hold their own
    /// queues discard; a FIFO never does.
    fn take_discarded(&mut self, _f: &mut dyn FnMut(u32, Discard)) {}

    /// Seeds the random stream of dequeue-time decisions (DualPI2's). The simulator derives
    /// it from the run's seed, apart from the stream the arrivals draw from, so that adding a
    /// dequeue-time draw does not shift every later arrival's decision.
    fn seed_dequeue(&mut self, _seed: u64) {}

    /// Packets queued (all classes).
    fn len_packets(&self) -> u32;

    /// Bytes queued (all classes).
    fn len_bytes(&self) -> u64;

    /// Number of classes (queues) the bottleneck has.
    fn classes(&self) -> usize {
        1
    }

    /// Admission counters summed over classes.
    fn stats(&self) -> AqmStats;

    /// Periodic housekeeping (a live buffer-size rule re-evaluates its capacity here).
    fn tick(&mut self, _now: Nanos) {}

    /// Current capacity in packets, for reporting.
    fn capacity_packets(&self) -> u32;

    /// The queue discipline, where the policy holds its own queues (its lists, probability
    /// or penalty box, for reports and tests).
    fn discipline(&self) -> Option<&zl_aqm::QueueDiscipline<u32>> {
        None
    }
}

/// Plain tail drop, the baseline every paper compares against: the router's own policy.
pub use zl_aqm::TailDrop as DropTail;

/// Drops each arriving packet independently with probability `p` (a lossy link, for checking
/// TCP models against loss-rate formulas); what does not fit is tail-dropped by the queue's
/// [`Admission`].
#[derive(Clone, Debug, Default)]
pub struct RandomLoss {
    p: f64,
}

impl RandomLoss {
    pub fn new(p: f64) -> Self {
        RandomLoss {
            p: p.clamp(0.0, 1.0),
        }
    }
}

impl Aqm for RandomLoss {
    fn decide<R: rand::RngCore + ?Sized>(
        &mut self,
        _arrival: &Arrival<'_>,
        rng: &mut R,
    ) -> Verdict {
        use rand::Rng;
        if rng.random::<f64>() < self.p {
            Verdict::EarlyDrop
        } else {
            Verdict::Enqueue
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Slot {
    handle: u32,
    len: u32,
    enqueued_at: Nanos,
}

/// A FIFO of bounded size (packets and/or bytes) whose admission is decided by `A`, behind the
/// bounds check and counters common to every policy ([`Admission`]: a packet that does not fit
/// is tail-dropped whatever the policy's average says).
///
/// The AQM sees the queue as it is at the arrival (the [`QueueView`] contract).
pub struct FifoQueue<A> {
    aqm: Admission<A>,
    slots: VecDeque<Slot>,
    bytes: u64,
    capacity_packets: u32,
    capacity_bytes: u64,
    idle_since: Option<Nanos>,
    resize: Option<Box<dyn FnMut(Nanos) -> u32 + Send>>,
}

impl<A: Aqm> FifoQueue<A> {
    /// A queue of at most `capacity_packets` packets and `capacity_bytes` bytes
    /// (`u32::MAX` / `u64::MAX` for no bound of that kind).
    pub fn new(aqm: A, capacity_packets: u32, capacity_bytes: u64) -> Self {
        let prealloc = capacity_packets.min(1 << 16) as usize;
        FifoQueue {
            aqm: Admission::new(aqm),
            slots: VecDeque::with_capacity(prealloc),
            bytes: 0,
            capacity_packets,
            capacity_bytes,
            idle_since: Some(Nanos::ZERO),
            resize: None,
        }
    }

    /// Re-evaluates the packet capacity on every [`Bottleneck::tick`] (the live sqrt(N) rule).
    pub fn with_resizer(mut self, f: Box<dyn FnMut(Nanos) -> u32 + Send>) -> Self {
        self.resize = Some(f);
        self
    }

    /// The admission policy, for reading its own state.
    pub fn aqm(&self) -> &A {
        self.aqm.policy()
    }

    fn view(&self) -> QueueView {
        QueueView {
            len_packets: self.slots.len() as u32,
            len_bytes: self.bytes,
            capacity_packets: self.capacity_packets,
            capacity_bytes: self.capacity_bytes,
            head_enqueued_at: self.slots.front().map(|s| s.enqueued_at),
            idle_since: self.idle_since,
        }
    }
}

impl<A: Aqm + Send> Bottleneck for FifoQueue<A> {
    fn enqueue(
        &mut self,
        now: Nanos,
        rng: &mut SimRng,
        meta: &mut PacketMeta,
        _dscp: Option<u8>,
        handle: u32,
    ) -> (Verdict, u8) {
        let view = self.view();
        let v = self.aqm.admit(&Arrival::new(now, &view, meta), rng);
        if v.admits() {
            self.slots.push_back(Slot {
                handle,
                len: meta.len,
                enqueued_at: now,
            });
            self.bytes += meta.len as u64;
            self.idle_since = None;
        }
        (v, 0)
    }

    fn dequeue(&mut self, now: Nanos) -> Dequeue {
        let Some(s) = self.slots.pop_front() else {
            return Dequeue::Empty;
        };
        self.bytes -= s.len as u64;
        if self.slots.is_empty() {
            self.idle_since = Some(now);
        }
        let view = self.view();
        let meta = PacketMeta {
            len: s.len,
            ..PacketMeta::default()
        };
        self.aqm.on_dequeue(now, &view, &meta);
        Dequeue::Packet(Dequeued {
            handle: s.handle,
            enqueued_at: s.enqueued_at,
            mark: false,
        })
    }

    fn len_packets(&self) -> u32 {
        self.slots.len() as u32
    }

    fn len_bytes(&self) -> u64 {
        self.bytes
    }

    fn stats(&self) -> AqmStats {
        *self.aqm.stats()
    }

    fn tick(&mut self, now: Nanos) {
        if let Some(f) = self.resize.as_mut() {
            self.capacity_packets = f(now).max(1);
        }
    }

    fn capacity_packets(&self) -> u32 {
        self.capacity_packets
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn drop_tail_fifo_keeps_order_and_bounds() {
        let mut q = FifoQueue::new(DropTail, 2, u64::MAX);
        let mut rng = SimRng::seed_from_u64(1);
        let mut m = PacketMeta {
            len: 100,
            ..PacketMeta::default()
        };
        assert_eq!(
            q.enqueue(Nanos(1), &mut rng, &mut m, None, 10).0,
            Verdict::Enqueue
        );
        assert_eq!(
            q.enqueue(Nanos(2), &mut rng, &mut m, None, 11).0,
            Verdict::Enqueue
        );
        assert_eq!(
            q.enqueue(Nanos(3), &mut rng, &mut m, None, 12).0,
            Verdict::TailDrop
        );
        assert_eq!(q.len_bytes(), 200);
        assert!(matches!(q.dequeue(Nanos(4)), Dequeue::Packet(d) if d.handle == 10));
        assert_eq!(
            q.dequeue(Nanos(5)),
            Dequeue::Packet(Dequeued {
                handle: 11,
                enqueued_at: Nanos(2),
                mark: false,
            })
        );
        assert_eq!(q.dequeue(Nanos(6)), Dequeue::Empty);
        let s = q.stats();
        assert_eq!((s.enqueued, s.tail_drops), (2, 1));
    }
}
