//! The event queue: a binary min-heap of small `Copy` events ordered by (time, insertion
//! sequence), so two events at the same nanosecond run in the order they were scheduled and a
//! seeded run replays bit for bit.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use zl_core::Nanos;

/// Which per-flow timer fired. A flow keeps the deadline it currently wants for each kind; a
/// firing whose deadline moved is re-armed or ignored, so timers are never cancelled in the heap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TimerKind {
    /// Retransmission timeout.
    Rto,
    /// Sender-side transmission clock: pacing, CBR and rate-based senders.
    Send,
    /// The receiver's delayed-ACK timer.
    DelAck,
    /// Start of the flow or of its next on/off transfer.
    Start,
}

/// Everything that can happen. 24 bytes, no heap data: packets travel by arena index.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// A data packet reaches the bottleneck router's queue.
    BottleneckArrive { pkt: u32 },
    /// The bottleneck link finished serialising its current packet.
    TxDone,
    /// The bottleneck said it holds packets back until now (a rate-limited sub-queue): the
    /// idle link asks again.
    LinkWake,
    /// A data packet reaches its receiver.
    ReceiverArrive { pkt: u32 },
    /// An acknowledgement (or TFRC feedback) reaches the sender. `ts` echoes the send time of
    /// the packet that triggered it (the TCP timestamp option), `ece` echoes a congestion mark.
    Ack {
        flow: u32,
        ack: u32,
        ece: bool,
        ts: Nanos,
    },
    /// A per-flow timer.
    Timer { flow: u32, kind: TimerKind },
    /// Periodic sampling of the queue and the flows.
    Sample,
    /// End of the warm-up: counters restart here.
    WarmupEnd,
}

#[derive(Clone, Copy, Debug)]
struct Entry {
    at: Nanos,
    seq: u64,
    event: Event,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        self.at == other.at && self.seq == other.seq
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Entry {
    /// Reversed so that `BinaryHeap` (a max-heap) pops the earliest event first.
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .at
            .cmp(&self.at)
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

/// Pending events in time order.
#[derive(Debug, Default)]
pub(crate) struct EventQueue {
    heap: BinaryHeap<Entry>,
    next_seq: u64,
    popped: u64,
}

impl EventQueue {
    pub(crate) fn with_capacity(n: usize) -> Self {
        EventQueue {
            heap: BinaryHeap::with_capacity(n),
            next_seq: 0,
            popped: 0,
        }
    }

    pub(crate) fn push(&mut self, at: Nanos, event: Event) {
        self.heap.push(Entry {
            at,
            seq: self.next_seq,
            event,
        });
        self.next_seq += 1;
    }

    pub(crate) fn pop(&mut self) -> Option<(Nanos, Event)> {
        let e = self.heap.pop()?;
        self.popped += 1;
        Some((e.at, e.event))
    }

    pub(crate) fn peek_time(&self) -> Option<Nanos> {
        self.heap.peek().map(|e| e.at)
    }

    /// Events handled so far.
    pub(crate) fn processed(&self) -> u64 {
        self.popped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pops_in_time_then_insertion_order() {
        let mut q = EventQueue::with_capacity(4);
        q.push(Nanos(5), Event::Sample);
        q.push(Nanos(1), Event::TxDone);
        q.push(Nanos(5), Event::WarmupEnd);
        q.push(Nanos(3), Event::BottleneckArrive { pkt: 7 });
        let order: Vec<_> = std::iter::from_fn(|| q.pop()).collect();
        assert_eq!(
            order,
            vec![
                (Nanos(1), Event::TxDone),
                (Nanos(3), Event::BottleneckArrive { pkt: 7 }),
                (Nanos(5), Event::Sample),
                (Nanos(5), Event::WarmupEnd),
            ]
        );
        assert_eq!(q.processed(), 4);
    }

    #[test]
    fn events_stay_small() {
        assert!(std::mem::size_of::<Event>() <= 24);
    }
}
