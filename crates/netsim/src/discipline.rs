//! The bottleneck for policies that hold their own packets (`zl_aqm::QueueDiscipline`: CoDel,
//! FQ-CoDel, DualPI2, ZL-RED with flow isolation), built when the configured
//! `bottleneck.aqm` [`holds_queues`](zl_aqm::AqmParams::holds_queues).
//!
//! The discipline holds the simulator's packet handles (`u32`) and decides when they leave:
//! - an enqueue-time mark (the isolation's ZL-RED) comes back as the arrival's `MarkCe`
//!   verdict, which the simulator applies as for a FIFO policy; a dequeue-time mark (CoDel's,
//!   FQ-CoDel's, DualPI2's) comes back in [`Dequeued::mark`];
//! - packets discarded after admission (CoDel's and DualPI2's drops as they leave, FQ-CoDel's
//!   drops from its fattest queue when the buffer overflows) are kept, with their cause, until
//!   the simulator takes them ([`Bottleneck::take_discarded`]) to count and free them;
//! - a rate-limited penalty sub-queue of the isolation answers [`Dequeue::Hold`].
//!
//! Dequeue-time randomness (DualPI2's probabilities) comes from a stream of its own, seeded by
//! the simulator from the run's seed ([`Bottleneck::seed_dequeue`]).

use rand::SeedableRng;
use zl_aqm::{AqmStats, Discard, Discipline, Next, PacketMeta, QueueDiscipline, Verdict};
use zl_core::Nanos;

use crate::bottleneck::{Bottleneck, Dequeue, Dequeued, SimRng};

/// A [`QueueDiscipline`] behind the [`Bottleneck`] trait.
pub struct DisciplineQueue {
    disc: Box<QueueDiscipline<u32>>,
    /// The arrivals' verdicts, counted as `Admission` counts them for a FIFO policy.
    stats: AqmStats,
    /// Discarded handles not yet taken by the simulator, which takes them after every call:
    /// it holds one call's discards (an overflow's batch, a dequeue's run of drops) and, once
    /// grown to the largest of those, does not allocate again.
    discarded: Vec<(u32, Discard)>,
    rng: SimRng,
    capacity_packets: u32,
    capacity_bytes: u64,
    resize: Option<Box<dyn FnMut(Nanos) -> u32 + Send>>,
}

impl DisciplineQueue {
    /// Runs `disc`, whose packet limit is `capacity_packets` and byte limit `capacity_bytes`
    /// (as it was built with; [`DisciplineQueue::with_resizer`] changes them live).
    pub fn new(disc: QueueDiscipline<u32>, capacity_packets: u32, capacity_bytes: u64) -> Self {
        DisciplineQueue {
            disc: Box::new(disc),
            stats: AqmStats::default(),
            discarded: Vec::with_capacity(256),
            rng: SimRng::seed_from_u64(0),
            capacity_packets,
            capacity_bytes,
            resize: None,
        }
    }

    /// Re-evaluates the packet limit on every [`Bottleneck::tick`] (the live sqrt(N) rule);
    /// the discipline's arena must hold the largest value `f` returns.
    pub fn with_resizer(mut self, f: Box<dyn FnMut(Nanos) -> u32 + Send>) -> Self {
        self.resize = Some(f);
        self
    }
}

impl Bottleneck for DisciplineQueue {
    fn enqueue(
        &mut self,
        now: Nanos,
        rng: &mut SimRng,
        meta: &mut PacketMeta,
        _dscp: Option<u8>,
        handle: u32,
    ) -> (Verdict, u8) {
        let discarded = &mut self.discarded;
        // The mark of an enqueue-time `MarkCe` is applied by the simulator from the verdict,
        // so the item itself needs none.
        let r = self
            .disc
            .enqueue(now, meta, None, handle, rng, |_| {}, &mut |q, cause| {
                discarded.push((q.item, cause))
            });
        let v = match r {
            Ok(v) => v,
            Err((v, _)) => v,
        };
        self.stats.record(v);
        (v, 0)
    }

    fn dequeue(&mut self, now: Nanos) -> Dequeue {
        let discarded = &mut self.discarded;
        match self.disc.dequeue(now, &mut self.rng, &mut |q, cause| {
            discarded.push((q.item, cause))
        }) {
            Next::Packet(d) => Dequeue::Packet(Dequeued {
                handle: d.queued.item,
                enqueued_at: d.queued.enqueued_at,
                mark: d.mark,
            }),
            Next::Hold(until) => Dequeue::Hold(until),
            Next::Empty => Dequeue::Empty,
        }
    }

    fn take_discarded(&mut self, f: &mut dyn FnMut(u32, Discard)) {
        for (h, cause) in self.discarded.drain(..) {
            f(h, cause);
        }
    }

    fn seed_dequeue(&mut self, seed: u64) {
        self.rng = SimRng::seed_from_u64(seed);
    }

    fn len_packets(&self) -> u32 {
        self.disc.len_packets()
    }

    fn len_bytes(&self) -> u64 {
        self.disc.len_bytes()
    }

    fn stats(&self) -> AqmStats {
        self.stats
    }

    fn tick(&mut self, now: Nanos) {
        if let Some(f) = self.resize.as_mut() {
            self.capacity_packets = f(now).max(1);
            self.disc
                .set_capacity(self.capacity_packets, self.capacity_bytes);
        }
    }

    fn capacity_packets(&self) -> u32 {
        self.capacity_packets
    }

    fn discipline(&self) -> Option<&QueueDiscipline<u32>> {
        Some(&self.disc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zl_aqm::{AqmParams, BuildContext, CodelParams, FqCodelParams};
    use zl_core::{Ecn, FlowId};

    fn build(p: AqmParams, capacity: u32) -> DisciplineQueue {
        let ctx = BuildContext::new(10_000_000, capacity).with_buffer(capacity, u64::MAX);
        let disc = p
            .build_discipline::<u32>(&ctx)
            .expect("valid parameters")
            .expect("a discipline");
        DisciplineQueue::new(disc, capacity, u64::MAX)
    }

    fn meta(flow: u64, ecn: Ecn) -> PacketMeta {
        PacketMeta {
            len: 1000,
            flow: FlowId(flow),
            ecn,
            ..PacketMeta::default()
        }
    }

    fn taken(q: &mut DisciplineQueue) -> Vec<(u32, Discard)> {
        let mut out = Vec::new();
        q.take_discarded(&mut |h, c| out.push((h, c)));
        out
    }

    #[test]
    fn codel_drops_and_marks_at_dequeue_and_hands_the_drops_back() {
        let ms = Nanos::from_millis;
        for ecn in [false, true] {
            let mut q = build(
                AqmParams::Codel(CodelParams {
                    ecn,
                    ..CodelParams::default()
                }),
                100,
            );
            let mut rng = SimRng::seed_from_u64(1);
            for h in 0..50 {
                let mut m = meta(1, Ecn::Ect0);
                assert_eq!(
                    q.enqueue(Nanos::ZERO, &mut rng, &mut m, None, h).0,
                    Verdict::Enqueue
                );
            }
            // The sojourn is above the 5 ms target from the first dequeue (100 ms) on, so the
            // dequeues from 200 ms (one 100 ms interval later) are past `first_above_time`.
            let mut sent = Vec::new();
            let mut marks = 0;
            for i in 0..10 {
                match q.dequeue(ms(100 + 20 * i)) {
                    Dequeue::Packet(d) => {
                        sent.push(d.handle);
                        marks += u32::from(d.mark);
                    }
                    other => panic!("a packet is queued: {other:?}"),
                }
            }
            let dropped = taken(&mut q);
            assert_eq!(q.stats().enqueued, 50);
            if ecn {
                assert!(marks >= 1, "ECN-capable packets are marked, not dropped");
                assert!(dropped.is_empty(), "{dropped:?}");
            } else {
                assert_eq!(marks, 0);
                assert!(!dropped.is_empty(), "the control law drops at dequeue");
                assert!(dropped.iter().all(|(_, c)| *c == Discard::Dequeue));
            }
            // Every handle is either sent, discarded or still queued, once.
            let mut all: Vec<u32> = sent
                .iter()
                .copied()
                .chain(dropped.iter().map(|d| d.0))
                .collect();
            all.sort_unstable();
            all.dedup();
            assert_eq!(all.len() + q.len_packets() as usize, 50);
        }
    }

    #[test]
    fn fq_codel_overflow_pushes_out_the_fattest_flow() {
        let mut q = build(AqmParams::FqCodel(FqCodelParams::default()), 20);
        let mut rng = SimRng::seed_from_u64(1);
        for h in 0..20 {
            let mut m = meta(7, Ecn::NotEct);
            q.enqueue(Nanos(h as u64), &mut rng, &mut m, None, h);
        }
        assert!(taken(&mut q).is_empty());
        let mut m = meta(8, Ecn::NotEct);
        assert_eq!(
            q.enqueue(Nanos(100), &mut rng, &mut m, None, 99).0,
            Verdict::Enqueue
        );
        let dropped = taken(&mut q);
        assert!(!dropped.is_empty());
        assert!(
            dropped
                .iter()
                .all(|&(h, c)| h < 20 && c == Discard::Overflow),
            "the flood's oldest packets go, not the new flow's: {dropped:?}"
        );
        // The new flow's packet waits only for the flood's first quantum (1514 bytes: two of
        // its packets) before the round robin reaches it.
        let first: Vec<u32> = (0..3)
            .map(|i| match q.dequeue(Nanos(200 + i)) {
                Dequeue::Packet(d) => d.handle,
                other => panic!("packets are queued: {other:?}"),
            })
            .collect();
        assert_eq!(first[2], 99, "{first:?}");
    }
}
