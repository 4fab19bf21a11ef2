//! Classes whose policy holds its own queues (CoDel, FQ-CoDel, DualPI2, ZL-RED with isolation)
//! inside the engine: every packet accounted for (`enqueued = sent + dequeue_drops +
//! overflow_drops + shutdown_drops + backlog`), the discards handed back, dequeue-time marks
//! applied through the marker, a rate-limited sub-queue reported as a hold, the per-flow order
//! kept, and live reconfigurations between a FIFO policy and a discipline keeping every queued
//! packet.

use std::collections::HashMap;

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use zl_aqm::{
    AqmParams, CodelParams, Discard, DualPi2Params, Ecn, FlowId, FqCodelParams, IsolationParams,
    PacketMeta, TailDropParams, ZlRedParams,
};
use zl_core::{Color, Nanos};
use zl_qos::{Burst, ClassParams, ColorStats, QosEngine, QosParams, QosUpdate, ShaperParams};
use zl_zombie::ZombieParams;

const MS: u64 = 1_000_000;

/// One best-effort class with `aqm`, on a 10 Mb/s shaper (1 ms per 1250-byte frame).
fn params(aqm: AqmParams, max_packets: u32) -> QosParams {
    let mut be = ClassParams::weighted("be", 1, max_packets);
    be.aqm = Some(aqm);
    QosParams {
        link_rate_bps: None,
        classes: vec![be],
        classifier: Default::default(),
        scheduler: Default::default(),
        shaper: Some(ShaperParams {
            rate_bps: 10_000_000,
            burst_bytes: None,
            overhead_bytes: 0,
            max_packet_bytes: 1514,
        }),
    }
}

/// Items: (flow, sequence number within the flow).
type Item = (u64, u32);

fn pkt(flow: u64, ecn: Ecn) -> PacketMeta {
    PacketMeta {
        len: 1250,
        flow: FlowId(flow),
        src_host: flow as u16,
        ecn,
        ..PacketMeta::default()
    }
}

/// Sets the low bit of the sequence number: the test's "CE".
fn mark(item: &mut Item) -> bool {
    item.1 |= 1 << 31;
    true
}

fn total(e: &QosEngine<Item>) -> ColorStats {
    e.class_stats(0).unwrap().total()
}

struct Drive {
    e: QosEngine<Item>,
    rng: Xoshiro256PlusPlus,
    seq: HashMap<u64, u32>,
    sent: Vec<Item>,
    discarded: Vec<(Item, Discard)>,
    holds: u32,
}

impl Drive {
    fn new(p: &QosParams) -> Self {
        let mut e: QosEngine<Item> = QosEngine::new(p).unwrap();
        e.set_marker(mark);
        e.seed_dequeue(5);
        Drive {
            e,
            rng: Xoshiro256PlusPlus::seed_from_u64(1),
            seq: HashMap::new(),
            sent: Vec::new(),
            discarded: Vec::new(),
            holds: 0,
        }
    }

    fn arrive(&mut self, now: u64, flow: u64, ecn: Ecn) {
        let s = self.seq.entry(flow).or_default();
        let item = (flow, *s);
        *s += 1;
        let _ = self
            .e
            .enqueue(Nanos(now), &mut self.rng, None, pkt(flow, ecn), item, |i| {
                mark(i);
            });
    }

    fn send(&mut self, now: u64) -> Burst {
        let sent = &mut self.sent;
        let b = self.e.dequeue_burst(Nanos(now), 32, |i| sent.push(i));
        if b.held_until.is_some() && b.sent == 0 {
            self.holds += 1;
        }
        let discarded = &mut self.discarded;
        self.e.take_discarded(|d| {
            assert_eq!(d.class, 0);
            assert_eq!(d.color, Color::Green);
            discarded.push((d.item, d.cause));
        });
        b
    }

    /// Every arrival is sent, discarded after admission, dropped on arrival or still queued.
    fn check_conservation(&self) {
        let t = total(&self.e);
        let (queued, _) = self.e.queue_len(0).unwrap();
        assert_eq!(
            t.enqueued,
            t.dequeued + t.dequeue_drops + t.overflow_drops + t.shutdown_drops + u64::from(queued),
            "{t:?} queued {queued}"
        );
        assert_eq!(t.dequeued, self.sent.len() as u64);
        assert_eq!(
            t.dequeue_drops + t.overflow_drops,
            self.discarded.len() as u64
        );
        let arrived: u64 = self.seq.values().map(|&n| u64::from(n)).sum();
        assert_eq!(t.arrivals(), arrived);
    }

    /// The packets of each flow left in their order.
    fn check_order(&self) {
        let mut last: HashMap<u64, u32> = HashMap::new();
        for &(flow, s) in &self.sent {
            let s = s & !(1 << 31);
            if let Some(&l) = last.get(&flow) {
                assert!(s > l, "flow {flow}: {s} after {l}");
            }
            last.insert(flow, s);
        }
    }
}

/// FQ-CoDel as a class under a 2x overload of four flows and a sparse one, through overflows:
/// every packet accounted for, overflows handed back, per-flow order kept, the sparse flow
/// never waiting behind the bulk ones.
#[test]
fn fq_codel_class_accounts_for_every_packet() {
    let mut d = Drive::new(&params(AqmParams::FqCodel(FqCodelParams::default()), 200));
    for k in 0..20_000u64 {
        let now = k * MS / 2;
        d.arrive(now, 1 + k % 4, Ecn::NotEct);
        if k % 200 == 0 {
            d.arrive(now, 99, Ecn::NotEct);
        }
        d.send(now);
    }
    d.check_conservation();
    d.check_order();
    let t = total(&d.e);
    assert!(t.overflow_drops > 1000, "{t:?}");
    assert!(
        d.discarded.iter().all(|(i, _)| i.0 != 99),
        "the sparse flow lost nothing"
    );
    let sparse = d.sent.iter().filter(|i| i.0 == 99).count();
    assert_eq!(sparse as u32, d.seq[&99]);
    assert_eq!(d.e.aqm_kind(0), Some("fq-codel"));
}

/// CoDel with ECN as a class: a standing queue makes the control law mark, and the marks
/// reach the items through the engine's marker and the class's counter.
#[test]
fn dequeue_time_marks_go_through_the_marker() {
    let p = params(
        AqmParams::Codel(CodelParams {
            ecn: true,
            ..CodelParams::default()
        }),
        1000,
    );
    let mut d = Drive::new(&p);
    for k in 0..6000u64 {
        let now = k * MS * 9 / 10; // 10 % over the link
        d.arrive(now, 1, Ecn::Ect0);
        d.send(now);
    }
    d.check_conservation();
    let marked = d.sent.iter().filter(|i| i.1 & 1 << 31 != 0).count() as u64;
    assert!(marked > 10, "{marked}");
    assert_eq!(total(&d.e).marks, marked);
    assert_eq!(
        total(&d.e).dequeue_drops,
        0,
        "ECN-capable: marked, not dropped"
    );
}

/// DualPI2 as a class: ECT(1) packets go to the L queue and are marked by the step once they
/// wait past a millisecond, classic ones are dropped; all accounted for.
#[test]
fn dualpi2_class_marks_l4s_and_drops_classic() {
    let mut d = Drive::new(&params(AqmParams::DualPi2(DualPi2Params::default()), 1000));
    for k in 0..20_000u64 {
        let now = k * MS * 2 / 5; // 2.5x the link
        d.arrive(
            now,
            1 + k % 2,
            if k % 2 == 1 { Ecn::Ect1 } else { Ecn::NotEct },
        );
        d.send(now);
    }
    d.check_conservation();
    d.check_order();
    let l4s_marked = d
        .sent
        .iter()
        .filter(|i| i.0 == 2 && i.1 & 1 << 31 != 0)
        .count();
    let classic_marked = d
        .sent
        .iter()
        .filter(|i| i.0 == 1 && i.1 & 1 << 31 != 0)
        .count();
    assert!(l4s_marked > 100, "{l4s_marked}");
    assert_eq!(classic_marked, 0, "not-ECT packets are never marked");
    assert!(d
        .discarded
        .iter()
        .any(|(i, c)| i.0 == 1 && *c == Discard::Dequeue));
}

/// ZL-RED with isolation as a class: the flood is penalized and its sub-queue is held to the
/// fair share; when only its packets are queued the engine reports when the bucket lets the
/// next one go (a hold), and it is accounted for at the end as shutdown drops.
#[test]
fn isolation_class_holds_the_flood_and_reports_the_hold() {
    let zl = ZlRedParams {
        a: 10.0,
        // A short list, so the estimate is trusted after 2 400 arrivals (about 1.3 s here).
        zombie: ZombieParams {
            m: 200,
            ..ZombieParams::default()
        },
        isolation: Some(IsolationParams::default()),
        ..ZlRedParams::default()
    };
    let mut d = Drive::new(&params(AqmParams::ZlRed(zl), 300));
    // 20 flows at 4 % of the link each (80 % in all), a flood at the link rate.
    let mut now = 0;
    let mut sent_at_4s = 0;
    for k in 0..40_000u64 {
        now = k * MS / 4;
        if now == 4000 * MS {
            sent_at_4s = d.sent.len();
        }
        if k % 100 == 0 {
            for f in 0..20 {
                d.arrive(now, 100 + f, Ecn::NotEct);
            }
        }
        if k % 4 == 0 {
            d.arrive(now, 7, Ecn::NotEct);
        }
        d.send(now);
    }
    d.check_conservation();
    let QueueView { penalized, .. } = isolation_view(&d.e);
    assert_eq!(penalized, 1);
    // From 4 s on, the flood is sent at about the fair share: 1000 packets/s over 21 flows,
    // about 48/s.
    let flood = d.sent[sent_at_4s..].iter().filter(|i| i.0 == 7).count() as f64 / 6.0;
    assert!(flood > 30.0 && flood < 65.0, "flood sent {flood} packets/s");
    let light = d.sent[sent_at_4s..].iter().filter(|i| i.0 >= 100).count() as f64 / 6.0;
    assert!(
        light > 0.95 * 800.0,
        "the light flows sent {light} packets/s of 800"
    );
    assert!(d.holds > 0, "the flood's bucket held the class");
    // The end of the run: what is held goes as shutdown drops.
    let mut n = 0;
    d.e.discard_all(Nanos(now), |_| n += 1);
    let t = total(&d.e);
    assert_eq!(t.shutdown_drops, n as u64);
    assert_eq!(d.e.queue_len(0), Some((0, 0)));
    assert!(d.e.is_empty());
}

struct QueueView {
    penalized: u32,
}

fn isolation_view(e: &QosEngine<Item>) -> QueueView {
    let iso = e
        .discipline(0)
        .and_then(|d| d.isolated())
        .expect("isolation");
    QueueView {
        penalized: iso.penalized_count(),
    }
}

/// A live reconfiguration from a FIFO policy to FQ-CoDel and back keeps every queued packet,
/// in each flow's order, and the counters go on.
#[test]
fn reloads_between_a_fifo_and_a_discipline_keep_the_queue() {
    let fifo = params(AqmParams::TailDrop(TailDropParams {}), 500);
    let fq = params(AqmParams::FqCodel(FqCodelParams::default()), 500);
    let mut d = Drive::new(&fifo);
    for k in 0..300u64 {
        d.arrive(0, k % 7, Ecn::NotEct);
    }
    let before = total(&d.e);
    assert_eq!(d.e.queue_len(0).unwrap().0, 300);
    d.e.apply(QosUpdate::new(&fq, None).unwrap()).unwrap();
    assert_eq!(
        d.e.queue_len(0).unwrap().0,
        300,
        "kept through FIFO -> FQ-CoDel"
    );
    assert_eq!(total(&d.e).enqueued, before.enqueued, "counters go on");
    for k in 0..100u64 {
        d.send(k * MS);
    }
    d.e.apply(QosUpdate::new(&fifo, None).unwrap()).unwrap();
    let left = d.e.queue_len(0).unwrap().0;
    assert_eq!(left as usize + d.sent.len() + d.discarded.len(), 300);
    for k in 100..1000u64 {
        d.send(k * MS);
    }
    d.check_conservation();
    d.check_order();
    assert_eq!(d.sent.len() + d.discarded.len(), 300);
    assert_eq!(d.e.aqm_kind(0), Some("tail-drop"));
}

/// A discipline cannot be one color's policy: it holds the class's packets.
#[test]
fn a_discipline_per_color_is_refused_with_its_key() {
    let mut be = ClassParams::weighted("be", 1, 100);
    be.aqm_by_color = Some(zl_qos::ByColor {
        green: AqmParams::FqCodel(FqCodelParams::default()),
        yellow: AqmParams::TailDrop(TailDropParams {}),
        red: AqmParams::TailDrop(TailDropParams {}),
    });
    let p = QosParams {
        link_rate_bps: Some(10_000_000),
        classes: vec![be],
        classifier: Default::default(),
        scheduler: Default::default(),
        shaper: None,
    };
    let err = QosEngine::<Item>::new(&p).err().unwrap();
    assert_eq!(err.key, "classes[0].aqm_by_color.green.kind");
}
