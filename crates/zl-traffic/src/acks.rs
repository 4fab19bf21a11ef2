//! The return path of the generator's responsive flows: what the egress sink delivered, handed
//! back to the generator that sent it.
//!
//! ```text
//!  generator port --segment (flow, seq in the UDP payload)--> router --> sink port
//!       ^                                                                  |
//!       +-- AckChannel: Delivery { at, flow, seq, ce } <-- delivered() ----+
//! ```
//!
//! A [`SinkPort`](super::SinkPort) built with a generator's channel reads each frame it is
//! sent whose `in_port` is that generator: a responsive segment carries [`SEGMENT_MAGIC`], its
//! flow index and its sequence number at the start of the UDP payload. The sink records the
//! delivery time (its `now`: the virtual time the router transmitted the frame) and whether the
//! frame arrived CE-marked. The generator drains the channel on its next receive call and
//! hands each delivery to the flow's receiver once the group's return delay has passed; a
//! dropped segment is never delivered and so never acknowledged, which is how the sender
//! learns of a drop (duplicate ACKs or its timer), as across a real bottleneck.
//!
//! The channel is a bounded lock-free queue ([`ArrayQueue`]): the sink runs on the transmit
//! side (the single-thread loop, or the threaded router's transmit worker) and the generator
//! on a receive side, and neither may block. Its capacity is the generator's responsive flows'
//! windows summed: at most that many segments are in flight, so at most that many deliveries
//! can wait; one that finds it full anyway is counted in [`AckChannel::overflows`] and lost,
//! which a cumulative ACK tolerates. The earliest waiting delivery time is kept beside the
//! queue so the generator can tell the loop when to wake it ([`zl_port::Readiness`]) without
//! draining.

use std::sync::atomic::{AtomicU64, Ordering};

use crossbeam_queue::ArrayQueue;
use zl_core::Nanos;

/// First bytes of a responsive segment's UDP payload ("zlRn"), then flow and sequence (u32,
/// big endian).
pub(crate) const SEGMENT_MAGIC: [u8; 4] = *b"zlRn";
/// Payload bytes a responsive segment carries: magic, flow, sequence.
pub(crate) const SEGMENT_HEADER: usize = 12;

/// A responsive segment the sink received.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Delivery {
    /// When the router transmitted it.
    pub at: Nanos,
    /// The flow's index in its generator.
    pub flow: u32,
    pub seq: u32,
    /// It arrived CE-marked.
    pub ce: bool,
}

/// The deliveries of one generator's responsive flows, shared by that generator and the sink
/// ports.
#[derive(Debug)]
pub struct AckChannel {
    /// The generator's port index: only frames it received are read.
    generator: u16,
    queue: ArrayQueue<Delivery>,
    /// The earliest `at` waiting in `queue` (`u64::MAX`: none), a wake-up hint.
    earliest: AtomicU64,
    overflows: AtomicU64,
}

impl AckChannel {
    /// A channel for the generator at port index `generator`, room for `capacity` deliveries.
    pub fn new(generator: u16, capacity: usize) -> Self {
        AckChannel {
            generator,
            queue: ArrayQueue::new(capacity.max(1)),
            earliest: AtomicU64::new(u64::MAX),
            overflows: AtomicU64::new(0),
        }
    }

    /// The generator's port index.
    pub fn generator(&self) -> u16 {
        self.generator
    }

    /// The sink's side: `frame`, received by port `in_port`, was transmitted at `now`. Records
    /// it when it is a responsive segment of this channel's generator; true if so.
    pub fn delivered(&self, now: Nanos, in_port: u16, frame: &[u8]) -> bool {
        if in_port != self.generator {
            return false;
        }
        let Some((flow, seq, ce)) = read_segment(frame) else {
            return false;
        };
        let d = Delivery {
            at: now,
            flow,
            seq,
            ce,
        };
        if self.queue.push(d).is_err() {
            // Relaxed: a statistic, read after the run.
            self.overflows.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        // Relaxed: a hint only. The generator reads the deliveries themselves from the queue
        // (whose push and pop synchronise); a stale hint wakes it early or at its next event.
        self.earliest.fetch_min(now.as_nanos(), Ordering::Relaxed);
        true
    }

    /// The generator's side: every waiting delivery, oldest first.
    pub(crate) fn drain(&self, mut f: impl FnMut(Delivery)) {
        // Reset the hint before popping: a delivery pushed meanwhile lowers it again.
        self.earliest.store(u64::MAX, Ordering::Relaxed);
        while let Some(d) = self.queue.pop() {
            f(d);
        }
    }

    /// When the earliest waiting delivery was transmitted, if any waits.
    pub(crate) fn earliest(&self) -> Option<Nanos> {
        match self.earliest.load(Ordering::Relaxed) {
            u64::MAX => None,
            t => Some(Nanos(t)),
        }
    }

    /// Deliveries lost because the channel was full.
    pub fn overflows(&self) -> u64 {
        self.overflows.load(Ordering::Relaxed)
    }
}

/// The (flow, sequence, CE) of a responsive segment's frame (Ethernet, IPv4 or IPv6, UDP), or
/// `None` for any other frame.
pub(crate) fn read_segment(frame: &[u8]) -> Option<(u32, u32, bool)> {
    let ethertype = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
    let (ecn, l4) = match ethertype {
        0x0800 => {
            let ihl = (*frame.get(14)? & 0x0f) as usize * 4;
            if *frame.get(23)? != 17 {
                return None;
            }
            (*frame.get(15)? & 0x03, 14 + ihl)
        }
        0x86dd => {
            if *frame.get(20)? != 17 {
                return None;
            }
            (((*frame.get(15)?) >> 4) & 0x03, 14 + 40)
        }
        _ => return None,
    };
    let p = frame.get(l4 + 8..l4 + 8 + SEGMENT_HEADER)?;
    if p[0..4] != SEGMENT_MAGIC {
        return None;
    }
    let flow = u32::from_be_bytes([p[4], p[5], p[6], p[7]]);
    let seq = u32::from_be_bytes([p[8], p[9], p[10], p[11]]);
    Some((flow, seq, ecn == zl_core::Ecn::Ce.bits()))
}
