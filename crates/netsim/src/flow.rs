//! What a traffic source sees of the simulator: its path (access link and delays), its
//! counters, and a handle to send packets and set timers at the current simulated time.

use zl_core::Nanos;

use crate::bottleneck::SimRng;
use crate::event::{Event, EventQueue, TimerKind};
use crate::packet::{Packet, PacketArena};

/// The simulator state every source touches: clock, event queue, packet arena, random source.
pub(crate) struct Core {
    pub now: Nanos,
    pub events: EventQueue,
    pub arena: PacketArena,
    pub rng: SimRng,
}

/// One flow's path through the dumbbell.
///
/// Forward: sender -> access link (own rate, own propagation delay, unbounded FIFO) ->
/// bottleneck queue -> bottleneck link -> `egress_delay` -> receiver. Reverse: the ACK takes
/// `return_delay` and never queues (decided: the reverse path is uncongested, as in the
/// papers' dumbbells where only data crosses the bottleneck in the loaded direction).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Path {
    pub access_delay: Nanos,
    /// Nanoseconds per byte on the access link; 0 for an infinitely fast one.
    pub access_ns_per_byte: f64,
    /// When the access link finishes its current backlog.
    pub access_free: Nanos,
    pub egress_delay: Nanos,
    pub return_delay: Nanos,
}

/// Per-flow counters. `Copy`, so the warm-up snapshot is a plain copy and results are
/// `end - snapshot`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct FlowCounters {
    /// Packets the sender emitted (retransmissions included).
    pub sent: u64,
    /// Retransmitted packets.
    pub retransmits: u64,
    /// Packets delivered in order to the application (goodput), in packets and bytes.
    pub delivered: u64,
    pub delivered_bytes: u64,
    /// Packets lost at the bottleneck, by cause.
    pub early_drops: u64,
    pub forced_drops: u64,
    pub tail_drops: u64,
    /// Packets a queue discipline admitted and then dropped as they left (CoDel's control
    /// law, DualPI2's classic drop).
    pub dequeue_drops: u64,
    /// Packets a queue discipline admitted and then pushed out to make room (FQ-CoDel's drop
    /// from its fattest queue).
    pub overflow_drops: u64,
    /// Packets marked (CE or the extension header's ECN bit).
    pub marks: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// Sum of bottleneck queueing delays (ns) and their count.
    pub queue_delay_sum: u64,
    pub queue_delay_n: u64,
    /// Sum of one-way delays sender -> receiver (ns) and their count.
    pub e2e_delay_sum: u64,
    pub e2e_delay_n: u64,
    /// Completed on/off transfers and the sum of their durations (ns).
    pub transfers: u64,
    pub transfer_time_sum: u64,
}

impl FlowCounters {
    pub fn drops(&self) -> u64 {
        self.early_drops
            + self.forced_drops
            + self.tail_drops
            + self.dequeue_drops
            + self.overflow_drops
    }

    /// `self - base`, field by field.
    pub fn since(&self, base: &FlowCounters) -> FlowCounters {
        FlowCounters {
            sent: self.sent - base.sent,
            retransmits: self.retransmits - base.retransmits,
            delivered: self.delivered - base.delivered,
            delivered_bytes: self.delivered_bytes - base.delivered_bytes,
            early_drops: self.early_drops - base.early_drops,
            forced_drops: self.forced_drops - base.forced_drops,
            tail_drops: self.tail_drops - base.tail_drops,
            dequeue_drops: self.dequeue_drops - base.dequeue_drops,
            overflow_drops: self.overflow_drops - base.overflow_drops,
            marks: self.marks - base.marks,
            timeouts: self.timeouts - base.timeouts,
            queue_delay_sum: self.queue_delay_sum - base.queue_delay_sum,
            queue_delay_n: self.queue_delay_n - base.queue_delay_n,
            e2e_delay_sum: self.e2e_delay_sum - base.e2e_delay_sum,
            e2e_delay_n: self.e2e_delay_n - base.e2e_delay_n,
            transfers: self.transfers - base.transfers,
            transfer_time_sum: self.transfer_time_sum - base.transfer_time_sum,
        }
    }
}

/// A sender's retransmission timer, moved without an event per move: the deadline changes
/// freely, at most one `TimerKind::Rto` event is pending (at the earliest deadline set since
/// the last one fired), and an event that finds the deadline later re-schedules itself.
/// Shared by both TCP models (`crate::tcp`, `crate::tcp_ns2`).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct RtoTimer {
    deadline: Option<Nanos>,
    event_at: Option<Nanos>,
}

impl RtoTimer {
    /// Expires at `d` (earlier or later than before).
    pub(crate) fn arm(&mut self, io: &mut FlowIo<'_>, d: Nanos) {
        self.deadline = Some(d);
        if self.event_at.is_none_or(|e| e > d) {
            self.event_at = Some(d);
            io.timer(d, TimerKind::Rto);
        }
    }

    /// Stops it (a pending event then finds nothing to do).
    pub(crate) fn cancel(&mut self) {
        self.deadline = None;
    }

    pub(crate) fn is_armed(&self) -> bool {
        self.deadline.is_some()
    }

    /// A `TimerKind::Rto` event at `now`: true when the deadline has come (the timer is then
    /// stopped); a stale event, or one before the deadline (re-scheduled), is false.
    pub(crate) fn fired(&mut self, io: &mut FlowIo<'_>, now: Nanos) -> bool {
        if self.event_at != Some(now) {
            return false;
        }
        self.event_at = None;
        let Some(d) = self.deadline else {
            return false;
        };
        if now < d {
            self.event_at = Some(d);
            io.timer(d, TimerKind::Rto);
            return false;
        }
        self.deadline = None;
        true
    }
}

/// A source's handle on the simulator for the duration of one callback.
pub(crate) struct FlowIo<'a> {
    pub core: &'a mut Core,
    pub path: &'a mut Path,
    pub counters: &'a mut FlowCounters,
    pub flow: u32,
    /// Fields every packet of this flow carries (ECN, priority, class...).
    pub template: Packet,
}

impl FlowIo<'_> {
    pub fn now(&self) -> Nanos {
        self.core.now
    }

    pub fn rng(&mut self) -> &mut SimRng {
        &mut self.core.rng
    }

    /// Emits packet `seq` of `len` bytes: it crosses the access link and is scheduled to
    /// reach the bottleneck.
    pub fn send(&mut self, seq: u32, len: u32, retransmit: bool) {
        self.send_flagged(seq, len, retransmit, false);
    }

    /// As [`FlowIo::send`], with the CWR flag set as given.
    pub fn send_flagged(&mut self, seq: u32, len: u32, retransmit: bool, cwr: bool) {
        let now = self.core.now;
        let start = if self.path.access_free > now {
            self.path.access_free
        } else {
            now
        };
        let tx = Nanos((len as f64 * self.path.access_ns_per_byte).round() as u64);
        self.path.access_free = start + tx;
        let arrive = start + tx + self.path.access_delay;
        let pkt = Packet {
            flow: self.flow,
            seq,
            len,
            sent_at: now,
            cwr,
            ..self.template
        };
        let idx = self.core.arena.alloc(pkt);
        self.core
            .events
            .push(arrive, Event::BottleneckArrive { pkt: idx });
        self.counters.sent += 1;
        if retransmit {
            self.counters.retransmits += 1;
        }
    }

    pub fn timer(&mut self, at: Nanos, kind: TimerKind) {
        self.core.events.push(
            at,
            Event::Timer {
                flow: self.flow,
                kind,
            },
        );
    }
}
