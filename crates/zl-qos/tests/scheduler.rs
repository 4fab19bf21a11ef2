//! WRR and DRR through the engine: shares under saturation, byte fairness, strict priority,
//! no starvation, and the paper's 16 ms WRR round (Maeda et al., figure 7;
//! docs/algorithms/wrr-drr.md).

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use zl_aqm::PacketMeta;
use zl_core::Nanos;
use zl_qos::{
    ClassParams, ClassifierParams, Dequeue, DscpRule, DscpSpec, QosEngine, QosParams, SchedMode,
    SchedulerParams, ShaperParams,
};

/// Classes `c0, c1, ...` with the given weights (or strict for `None`), DSCP `i` -> class `i`.
fn params(weights: &[Option<u32>], mode: SchedMode, shaper: Option<ShaperParams>) -> QosParams {
    let classes = weights
        .iter()
        .enumerate()
        .map(|(i, w)| match w {
            Some(w) => ClassParams::weighted(&format!("c{i}"), *w, 10_000),
            None => ClassParams::strict(&format!("c{i}"), 10_000),
        })
        .collect();
    QosParams {
        link_rate_bps: Some(1_000_000_000),
        classes,
        classifier: ClassifierParams {
            default_class: "c0".into(),
            standard: false,
            dscp: (0..weights.len())
                .map(|i| DscpRule {
                    dscp: DscpSpec::Number(i as u8),
                    class: format!("c{i}"),
                    color: zl_core::Color::Green,
                })
                .collect(),
        },
        scheduler: SchedulerParams { mode },
        shaper,
    }
}

fn meta(len: u32) -> PacketMeta {
    PacketMeta {
        len,
        ..PacketMeta::default()
    }
}

fn rng() -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(7)
}

/// Keeps each listed class backlogged with `len(class)`-byte packets and dequeues `n`
/// packets; returns (packets, bytes) per class and the dequeue order.
fn saturate(
    e: &mut QosEngine<u32>,
    classes: usize,
    len: impl Fn(usize) -> u32,
    n: usize,
) -> (Vec<u64>, Vec<u64>, Vec<usize>) {
    let mut r = rng();
    let (mut pk, mut by, mut order) = (vec![0; classes], vec![0; classes], Vec::new());
    for c in 0..classes {
        for _ in 0..50 {
            e.enqueue(Nanos::ZERO, &mut r, Some(c as u8), meta(len(c)), 0, |_| {})
                .1
                .unwrap();
        }
    }
    for _ in 0..n {
        match e.dequeue(Nanos::ZERO) {
            Dequeue::Packet(d) => {
                pk[d.class] += 1;
                by[d.class] += d.meta.len as u64;
                order.push(d.class);
                e.enqueue(Nanos::ZERO, &mut r, Some(d.class as u8), d.meta, 0, |_| {})
                    .1
                    .unwrap();
            }
            other => panic!("saturated engine returned {other:?}"),
        }
    }
    (pk, by, order)
}

#[test]
fn wrr_packet_shares_match_weights() {
    // Weights 1:4:5 (the paper's 10/40/50 %) and 2:3:5, saturated, mixed packet sizes: WRR
    // shares packets, so each share must be within ±2 % (relative) of its weight.
    for weights in [[1, 4, 5], [2, 3, 5]] {
        let p = params(&weights.map(Some), SchedMode::Wrr, None);
        let mut e = QosEngine::new(&p).unwrap();
        let sizes = [64, 1500, 576];
        let (pk, _, _) = saturate(&mut e, 3, |c| sizes[c], 10_003);
        let total: u64 = pk.iter().sum();
        for (c, &w) in weights.iter().enumerate() {
            let share = pk[c] as f64 / total as f64;
            let want = w as f64 / 10.0;
            assert!(
                (share / want - 1.0).abs() < 0.02,
                "{weights:?}: class {c} {share} vs {want}"
            );
        }
    }
}

#[test]
fn drr_byte_fairness_with_mixed_sizes() {
    // Equal byte quanta, 64-byte packets against 1500-byte packets: bytes, not packets, are
    // shared equally (±2 %); with quanta 1500:4500 the bytes split 1:3.
    // Quanta far below the packet sizes (1 and 3 bytes) still split bytes 1:3.
    for (quanta, want) in [([1500, 1500], 0.5), ([1500, 4500], 0.25), ([3, 1], 0.75)] {
        let p = params(&quanta.map(Some), SchedMode::Drr, None);
        let mut e = QosEngine::new(&p).unwrap();
        let (_, by, _) = saturate(&mut e, 2, |c| if c == 0 { 64 } else { 1500 }, 50_000);
        let share = by[0] as f64 / (by[0] + by[1]) as f64;
        assert!(
            (share / want - 1.0).abs() < 0.02,
            "{quanta:?}: {share} vs {want}"
        );
    }
}

#[test]
fn strict_class_is_served_first_and_weighted_classes_do_not_starve() {
    let p = params(&[Some(1), Some(100), None], SchedMode::Wrr, None);
    let mut e: QosEngine<u32> = QosEngine::new(&p).unwrap();
    let mut r = rng();
    for c in [0u8, 1, 2, 0, 1, 2] {
        e.enqueue(Nanos::ZERO, &mut r, Some(c), meta(100), c as u32, |_| {})
            .1
            .unwrap();
    }
    let first: Vec<u32> = (0..2)
        .map(|_| match e.dequeue(Nanos::ZERO) {
            Dequeue::Packet(d) => d.item,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(first, [2, 2], "the strict class drains first");

    // Weight 1 against 100: class 0 still gets one packet in every round of 101.
    let p = params(&[Some(1), Some(100)], SchedMode::Wrr, None);
    let mut e = QosEngine::new(&p).unwrap();
    let (_, _, order) = saturate(&mut e, 2, |_| 100, 5_050);
    for w in order.windows(101) {
        assert!(
            w.contains(&0) && w.contains(&1),
            "a class starved in a window"
        );
    }
}

#[test]
fn empty_classes_are_skipped_work_conserving() {
    let p = params(&[Some(1), Some(4), Some(5)], SchedMode::Wrr, None);
    let mut e: QosEngine<u32> = QosEngine::new(&p).unwrap();
    let mut r = rng();
    for i in 0..7 {
        e.enqueue(Nanos::ZERO, &mut r, Some(0), meta(100), i, |_| {})
            .1
            .unwrap();
    }
    // Only class 0 is backlogged: it gets every slot although its weight is 1.
    for i in 0..7 {
        match e.dequeue(Nanos::ZERO) {
            Dequeue::Packet(d) => assert_eq!(d.item, i),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(e.dequeue(Nanos::ZERO), Dequeue::Empty);
}

#[test]
fn paper_wrr_round_is_16_ms_at_5_mbps() {
    // docs/algorithms/wrr-drr.md: 5 Mbit/s, 1 KB (1000-byte) packets take 1.6 ms each; 1 + 4 + 5
    // packets per round gives 16 ms between AF1's turns. Measured: exactly 16 ms between
    // consecutive class-0 departures once every class is backlogged (no wire overhead).
    let shaper = ShaperParams {
        rate_bps: 5_000_000,
        burst_bytes: Some(1000),
        overhead_bytes: 0,
        max_packet_bytes: 1000,
    };
    let p = params(&[Some(1), Some(4), Some(5)], SchedMode::Wrr, Some(shaper));
    let mut e: QosEngine<u32> = QosEngine::new(&p).unwrap();
    let mut r = rng();
    for c in 0..3u8 {
        for _ in 0..200 {
            e.enqueue(Nanos::ZERO, &mut r, Some(c), meta(1000), 0, |_| {})
                .1
                .unwrap();
        }
    }
    let mut now = Nanos::ZERO;
    let mut af1_departures = Vec::new();
    while af1_departures.len() < 20 {
        match e.dequeue(now) {
            Dequeue::Packet(d) => {
                if d.class == 0 {
                    af1_departures.push(now);
                }
            }
            Dequeue::Hold { until } => now = until,
            Dequeue::Empty => panic!("ran dry"),
        }
    }
    for w in af1_departures.windows(2) {
        assert_eq!(w[1] - w[0], Nanos::from_millis(16));
    }
}

/// Plain DRR (Shreedhar & Varghese, without the round skipping): the oracle.
struct NaiveDrr {
    quantum: Vec<u64>,
    deficit: Vec<u64>,
    cur: usize,
}

impl NaiveDrr {
    fn new(quantum: &[u32]) -> Self {
        let quantum: Vec<u64> = quantum.iter().map(|&q| q as u64).collect();
        let mut deficit = vec![0; quantum.len()];
        deficit[0] = quantum[0];
        NaiveDrr {
            quantum,
            deficit,
            cur: 0,
        }
    }

    fn next(&mut self, queues: &mut [std::collections::VecDeque<u32>]) -> Option<usize> {
        if queues.iter().all(|q| q.is_empty()) {
            return None;
        }
        let n = queues.len();
        loop {
            let c = self.cur;
            match queues[c].front() {
                Some(&len) if len as u64 <= self.deficit[c] => {
                    queues[c].pop_front();
                    self.deficit[c] = if queues[c].is_empty() {
                        0
                    } else {
                        self.deficit[c] - len as u64
                    };
                    return Some(c);
                }
                Some(_) => {}
                None => self.deficit[c] = 0,
            }
            self.cur = (c + 1) % n;
            self.deficit[self.cur] += self.quantum[self.cur];
        }
    }
}

proptest::proptest! {
    #[test]
    fn drr_matches_plain_drr_order(
        quanta in proptest::collection::vec(1u32..2000, 1..5),
        loads in proptest::collection::vec(proptest::collection::vec(1u32..1600, 0..30), 5),
    ) {
        use zl_qos::{SchedClass, Scheduler};
        let n = quanta.len();
        let mut a: Vec<std::collections::VecDeque<u32>> =
            loads.iter().take(n).map(|l| l.iter().copied().collect()).collect();
        let mut b = a.clone();
        let places: Vec<_> = quanta.iter().map(|&q| SchedClass::Weighted { quantum: q }).collect();
        let mut s = Scheduler::new(SchedMode::Drr, &places);
        let mut oracle = NaiveDrr::new(&quanta);
        loop {
            let got = s.peek(|c| a[c].front().copied());
            let want = oracle.next(&mut b);
            proptest::prop_assert_eq!(got, want);
            let Some(c) = got else { break };
            let len = a[c].pop_front().unwrap();
            s.commit(c, len, a[c].is_empty());
        }
    }
}

#[test]
fn ef_arriving_during_a_shaper_hold_goes_first() {
    // The shaper holds a WRR packet; an EF packet arriving meanwhile is the next to leave,
    // and the held WRR packet follows without having lost its turn.
    let shaper = ShaperParams {
        rate_bps: 8_000_000,
        burst_bytes: Some(1000),
        overhead_bytes: 0,
        max_packet_bytes: 1000,
    };
    let p = params(&[Some(1), Some(1), None], SchedMode::Wrr, Some(shaper));
    let mut e: QosEngine<u32> = QosEngine::new(&p).unwrap();
    let mut r = rng();
    for (c, id) in [(0u8, 1u32), (0, 2), (1, 3)] {
        e.enqueue(Nanos::ZERO, &mut r, Some(c), meta(1000), id, |_| {})
            .1
            .unwrap();
    }
    let Dequeue::Packet(d) = e.dequeue(Nanos::ZERO) else {
        panic!("first packet fits the burst")
    };
    assert_eq!(d.item, 1);
    let Dequeue::Hold { until } = e.dequeue(Nanos::ZERO) else {
        panic!("the shaper must hold")
    };
    assert_eq!(until, Nanos::from_millis(1));
    e.enqueue(Nanos(500_000), &mut r, Some(2), meta(1000), 9, |_| {})
        .1
        .unwrap();
    let order: Vec<u32> = (0..3)
        .map(|i| match e.dequeue(Nanos::from_millis(1 + i)) {
            Dequeue::Packet(d) => d.item,
            other => panic!("{other:?}"),
        })
        .collect();
    // EF first; then class 1 (class 0 used its one-packet turn on item 1), then class 0.
    assert_eq!(order, [9, 3, 2]);
}

/// `dequeue_idle` on an empty engine moves the scheduler on exactly as a `dequeue_burst` that
/// finds nothing (a WRR round by one class, DRR deficits cleared), so what is queued next
/// leaves in the same order after any number of idle polls; with a packet queued it does
/// nothing.
#[test]
fn dequeue_idle_is_an_empty_dequeue_burst() {
    for mode in [SchedMode::Wrr, SchedMode::Drr] {
        let p = params(&[Some(2), Some(1), Some(3)], mode, None);
        let mut a: QosEngine<u32> = QosEngine::new(&p).unwrap();
        let mut b: QosEngine<u32> = QosEngine::new(&p).unwrap();
        let mut r = rng();
        for idle_polls in 0..5 {
            for _ in 0..idle_polls {
                let burst = a.dequeue_burst(Nanos::ZERO, 32, |_| panic!("nothing is queued"));
                assert_eq!((burst.sent, burst.held_until), (0, None));
                assert!(b.dequeue_idle());
            }
            for c in 0..3u8 {
                for k in 0..2 {
                    let item = 10 * c as u32 + k;
                    for e in [&mut a, &mut b] {
                        let len = 100 + 400 * c as u32;
                        e.enqueue(Nanos::ZERO, &mut r, Some(c), meta(len), item, |_| {})
                            .1
                            .unwrap();
                    }
                }
            }
            assert!(!b.dequeue_idle(), "a packet is queued");
            let (mut oa, mut ob) = (Vec::new(), Vec::new());
            for take in [4, 32] {
                a.dequeue_burst(Nanos::ZERO, take, |x| oa.push(x));
                b.dequeue_burst(Nanos::ZERO, take, |x| ob.push(x));
                assert_eq!(oa, ob, "{mode:?} after {idle_polls} idle polls");
            }
            assert_eq!(oa.len(), 6);
            assert!(a.is_empty() && b.is_empty());
        }
    }
}
