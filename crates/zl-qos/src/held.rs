//! Classes whose policy holds its own queues (`zl_aqm::QueueDiscipline`: CoDel, FQ-CoDel,
//! DualPI2, ZL-RED with isolation), beside the FIFO classes of the engine's fast path.
//!
//! Such a class keeps its packets in the discipline, and the packet its discipline has chosen
//! to send next at the head of the class's own ring (the *head slot*): the scheduler, the
//! shaper and the transmit burst see that packet exactly as they see a FIFO class's head, and
//! the FIFO path pays one test per arrival and one per transmit run for the classes that hold
//! queues. The discipline decides when its packet is taken into the head slot: when the slot
//! empties (the previous packet left for the link) or a packet arrives to an empty class, as
//! Linux's `qdisc_peek_dequeued` makes a child qdisc decide when its parent first looks at
//! it, so a dequeue-time AQM (CoDel's sojourn, DualPI2's step) measures the wait up to the
//! moment the link becomes free for the packet. A packet the discipline discards after
//! admitting it (at dequeue, or pushed out by an overflow) is counted in its class and color
//! (`dequeue_drops`, `overflow_drops`) and handed back through [`Discarded`].

use rand::RngCore;
use zl_aqm::{Discard, Discipline, Next, PacketMeta, Queued, Verdict};
use zl_core::{Color, Nanos};
use zl_zombie::Observation;

use crate::class::{Class, Dropped, Held, HostReader};

/// A packet a discipline discarded after admitting it: the caller counts and frees it.
#[derive(Debug, PartialEq, Eq)]
pub struct Discarded<T> {
    /// The caller's item.
    pub item: T,
    /// Its class.
    pub class: usize,
    /// Its color.
    pub color: Color,
    /// Why it was discarded.
    pub cause: Discard,
}

/// What a held class's operations need of the engine beside the class itself.
pub(crate) struct Ctx<'a, T> {
    pub(crate) discards: &'a mut Vec<Discarded<T>>,
    pub(crate) marker: Option<fn(&mut T) -> bool>,
    pub(crate) hosts: Option<HostReader<T>>,
    pub(crate) rng: &'a mut dyn RngCore,
}

/// Counts a discarded packet in its class and color and keeps it for the caller.
fn discard_into<T>(
    stats: &mut crate::stats::ClassStats,
    discards: &mut Vec<Discarded<T>>,
    class: usize,
    q: Queued<T>,
    cause: Discard,
) {
    let color = q.meta.color;
    let s = &mut stats.per_color[color.index()];
    match cause {
        Discard::Dequeue => s.dequeue_drops += 1,
        Discard::Overflow => s.overflow_drops += 1,
    }
    discards.push(Discarded {
        item: q.item,
        class,
        color,
        cause,
    });
}

/// An arrival to a held class (`QosEngine::enqueue_classified_taken`'s path for it): the
/// policing of red packets and the shaper's size check as for a FIFO class, then the
/// discipline's own decision; an admitted packet arriving to an empty class goes straight to
/// its head slot. A mark the discipline sets on arrival goes through the engine's marker, as
/// its marks at departure do.
///
/// decided: out of line, with every value by value and no closure of the caller's. A caller's
/// local whose address reached this call (its parsed headers, through its mark closure) would
/// live in memory on the FIFO path too: 21 to 25 more instructions per packet in the pipeline
/// bench for a branch never taken there.
#[cold]
#[inline(never)]
#[allow(clippy::too_many_arguments)]
pub(crate) fn enqueue<T, R: RngCore + ?Sized>(
    class: &mut Class<T>,
    ctx: Ctx<'_, T>,
    now: Nanos,
    rng: &mut R,
    ci: usize,
    color: Color,
    meta: PacketMeta,
    take: impl FnOnce() -> T,
    obs: Option<Observation>,
    shaper_fits: bool,
) -> Result<Verdict, Dropped<T>> {
    let Class {
        queue,
        aqm,
        stats,
        drop_red,
        ..
    } = class;
    let crate::class::ClassAqm::Queues(held) = aqm else {
        unreachable!("a held class's path");
    };
    let early = if *drop_red && color == Color::Red {
        Some(Verdict::ForcedDrop)
    } else if !shaper_fits {
        Some(Verdict::TailDrop)
    } else {
        None
    };
    let item = take();
    let verdict = match early {
        Some(v) => Err((v, item)),
        None => {
            let meta = held.with_hosts(meta, &item, ctx.hosts);
            let discards = &mut *ctx.discards;
            let marker = ctx.marker;
            let mark = |item: &mut T| {
                if let Some(m) = marker {
                    m(item);
                }
            };
            held.disc.enqueue(
                now,
                &meta,
                obs.as_ref(),
                item,
                rng,
                mark,
                &mut |q, cause| discard_into(stats, discards, ci, q, cause),
            )
        }
    };
    let v = match &verdict {
        Ok(v) => *v,
        Err((v, _)) => *v,
    };
    held.stats.record(v);
    stats.per_color[color.index()].record_verdict(v, meta.len);
    match verdict {
        Ok(v) => {
            if queue.is_empty() {
                refill_slot(queue, held, stats, ci, now, ctx);
            }
            Ok(v)
        }
        Err((verdict, item)) => Err(Dropped { verdict, item }),
    }
}

/// Fills the class's empty head slot from its discipline at `now` (the packet it sends next),
/// or notes when it can (a rate-limited sub-queue).
pub(crate) fn refill<T>(class: &mut Class<T>, ci: usize, now: Nanos, ctx: Ctx<'_, T>) {
    let Class {
        queue, aqm, stats, ..
    } = class;
    if let crate::class::ClassAqm::Queues(held) = aqm {
        if queue.is_empty() {
            refill_slot(queue, held, stats, ci, now, ctx);
        }
    }
}

fn refill_slot<T>(
    queue: &mut crate::queue::ClassQueue<T>,
    held: &mut Held<T>,
    stats: &mut crate::stats::ClassStats,
    ci: usize,
    now: Nanos,
    ctx: Ctx<'_, T>,
) {
    let discards = ctx.discards;
    let next = held.disc.dequeue(now, ctx.rng, &mut |q, cause| {
        discard_into(stats, discards, ci, q, cause)
    });
    match next {
        Next::Packet(d) => {
            let mut q = d.queued;
            if d.mark && ctx.marker.is_some_and(|m| m(&mut q.item)) {
                stats.per_color[q.meta.color.index()].marks += 1;
            }
            held.hold = None;
            queue.push_held(q);
        }
        Next::Hold(until) => held.hold = Some(until),
        Next::Empty => held.hold = None,
    }
}

/// Packets a held class holds beyond its head slot.
#[inline]
pub(crate) fn held_len<T>(class: &Class<T>) -> (u32, u64) {
    match &class.aqm {
        crate::class::ClassAqm::Queues(h) => (h.disc.len_packets(), h.disc.len_bytes()),
        _ => (0, 0),
    }
}
