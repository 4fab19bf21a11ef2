//! The simulator's own invariants with queue disciplines: what a discipline discards is
//! counted and freed, a hold makes the idle link wait, a dequeue mark reaches the packet.

use super::*;
use crate::discipline::DisciplineQueue;
use zl_aqm::{AqmParams, BuildContext};

fn cbr(rate_bps: f64, group: u16) -> FlowSpec {
    FlowSpec {
        source: SourceSpec::Cbr(CbrParams {
            rate_bps,
            packet_size: 1000,
            ecn: zl_core::Ecn::NotEct,
        }),
        access_delay: Nanos::from_millis(5),
        access_rate_bps: 0.0,
        egress_delay: Nanos::ZERO,
        start: Nanos::from_millis(u64::from(group)),
        dscp: None,
        group,
        src_host: None,
        dst_host: 0,
    }
}

/// Runs CBR flows through `aqm` (a discipline) for `secs` s and checks, every second, that
/// every packet sent is delivered, counted as dropped, or still alive in the arena (queued
/// or on a link): nothing discarded is lost or leaked. `each_second` sees the run too.
fn conserves(
    aqm: &str,
    flows: Vec<FlowSpec>,
    secs: u64,
    mut each_second: impl FnMut(u64, &Simulator),
) -> Simulator {
    let params: AqmParams = toml::from_str(aqm).expect("aqm toml");
    let ctx = BuildContext::new(10_000_000, 200).with_buffer(200, u64::MAX);
    let disc = params
        .build_discipline::<u32>(&ctx)
        .expect("valid")
        .expect("a discipline");
    let spec = SimSpec {
        seed: 7,
        duration: Nanos::from_secs(secs),
        warmup: Nanos::ZERO,
        bottleneck_rate_bps: 10e6,
        bottleneck_delay: Nanos::from_millis(5),
        sample_interval: None,
        flows,
    };
    let mut sim = Simulator::new(&spec, Box::new(DisciplineQueue::new(disc, 200, u64::MAX)))
        .expect("valid spec");
    for t in 1..=secs {
        sim.run_until(Nanos::from_secs(t));
        let outstanding: u64 = (sim.flows.iter())
            .map(|f| f.counters.sent - f.counters.delivered - f.counters.drops())
            .sum();
        assert_eq!(sim.core.arena.live() as u64, outstanding, "{aqm} at {t} s");
        let queued = sim.bottleneck.len_packets() as u64;
        assert!(
            outstanding >= queued,
            "{aqm}: {outstanding} < {queued} queued"
        );
        each_second(t, &sim);
    }
    sim
}

#[test]
fn discarded_packets_are_counted_and_freed() {
    let over = vec![cbr(8e6, 0), cbr(8e6, 1)];
    let sim = conserves("kind = \"fq-codel\"", over.clone(), 10, |_, _| {});
    let drops = |sim: &Simulator, f: fn(&FlowCounters) -> u64| -> u64 {
        sim.flows.iter().map(|x| f(&x.counters)).sum()
    };
    assert!(drops(&sim, |c| c.overflow_drops) > 0);
    assert!(drops(&sim, |c| c.dequeue_drops) > 0);
    let sim = conserves("kind = \"dualpi2\"", over, 10, |_, _| {});
    assert!(drops(&sim, |c| c.dequeue_drops) > 0);
    assert!(drops(&sim, |c| c.tail_drops) > 0);
}

/// Holds every packet until `until`, then sends it marked.
struct HoldUntil {
    until: Nanos,
    queued: Vec<(u32, Nanos)>,
}

impl Bottleneck for HoldUntil {
    fn enqueue(
        &mut self,
        now: Nanos,
        _rng: &mut SimRng,
        _meta: &mut PacketMeta,
        _dscp: Option<u8>,
        handle: u32,
    ) -> (Verdict, u8) {
        self.queued.push((handle, now));
        (Verdict::Enqueue, 0)
    }
    fn dequeue(&mut self, now: Nanos) -> Dequeue {
        if self.queued.is_empty() {
            Dequeue::Empty
        } else if now < self.until {
            Dequeue::Hold(self.until)
        } else {
            let (handle, enqueued_at) = self.queued.remove(0);
            Dequeue::Packet(crate::bottleneck::Dequeued {
                handle,
                enqueued_at,
                mark: true,
            })
        }
    }
    fn len_packets(&self) -> u32 {
        self.queued.len() as u32
    }
    fn len_bytes(&self) -> u64 {
        0
    }
    fn stats(&self) -> AqmStats {
        AqmStats::default()
    }
    fn capacity_packets(&self) -> u32 {
        u32::MAX
    }
}

#[test]
fn a_hold_makes_the_idle_link_wait_and_a_dequeue_mark_reaches_the_packet() {
    // One packet every 100 s: nothing but the hold can wake the link.
    let spec = SimSpec {
        seed: 1,
        duration: Nanos::from_secs(1),
        warmup: Nanos::ZERO,
        bottleneck_rate_bps: 10e6,
        bottleneck_delay: Nanos::from_millis(5),
        sample_interval: None,
        flows: vec![FlowSpec {
            start: Nanos::from_millis(1),
            ..cbr(80.0, 0)
        }],
    };
    let hold = HoldUntil {
        until: Nanos::from_millis(200),
        queued: Vec::new(),
    };
    let report = Simulator::new(&spec, Box::new(hold)).expect("valid").run();
    let c = report.flows[0].counters;
    assert_eq!((c.sent, c.delivered, c.marks), (1, 1, 1));
    // Sent at 1 ms, at the router at 6 ms, held until 200 ms.
    assert_eq!(c.queue_delay_sum, Nanos::from_millis(194).as_nanos());
}

#[test]
fn a_penalized_flood_is_held_to_its_share() {
    // 40 light flows (8 Mb/s together) and a 6 Mb/s flood on 10 Mb/s.
    let mut flows: Vec<FlowSpec> = (0..40).map(|_| cbr(200e3, 0)).collect();
    flows.push(cbr(6e6, 1));
    // The flood's deliveries from the second it is found penalized on.
    let mut since: Option<(u64, u64)> = None;
    let sim = conserves(
        "kind = \"zl-red\"\np_max = 0.15\nth_min = 5.0\na = 10.0\nisolation = {}",
        flows,
        20,
        |t, sim| {
            let iso = sim.bottleneck().discipline().and_then(|d| d.isolated());
            if since.is_none() && iso.is_some_and(|i| i.penalized_count() == 1) {
                since = Some((t, sim.flows[40].counters.delivered));
            }
        },
    );
    let iso = (sim.bottleneck().discipline())
        .and_then(|d| d.isolated())
        .expect("the isolation");
    assert_eq!(iso.penalized_count(), 1, "{:?}", iso.stats());
    assert!(iso.stats().penalty_sent > 0);
    let (t, delivered) = since.expect("penalized");
    assert!(t <= 15, "penalized only at {t} s");
    let rate = (sim.flows[40].counters.delivered - delivered) as f64 * 8000.0 / (20 - t) as f64;
    // About 40 light flows and the flood: a fair share near 0.25 Mb/s.
    assert!(
        rate < 1.5e6,
        "the penalized flood is served near its share, not at 6 Mb/s: {rate}"
    );
}
