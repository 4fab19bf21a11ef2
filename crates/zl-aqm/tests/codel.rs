//! CoDel (docs/algorithms/codel.md) against RFC 8289's pseudo-code, transcribed below as an
//! oracle (§5, with the ECN mark of Linux `codel_dequeue` and `MAXPACKET` the largest packet
//! seen), on worked sequences and on random traces; and its behaviour: a standing queue is
//! driven to the target, the drop spacing follows `interval / sqrt(count)`.

use std::collections::VecDeque;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use zl_aqm::codel::control_law;
use zl_aqm::{
    Codel, CodelParams, Departure, Discard, Discipline, Ecn, Nanos, Next, PacketMeta, Queued,
    Verdict,
};

const MS: u64 = 1_000_000;

/// RFC 8289 §5's `codel_queue_t`, line by line (times in ns, `first_above_time_ = 0` for
/// "below").
struct Oracle {
    q: VecDeque<(u64, u32, bool, u32)>, // (tstamp, len, ect, id)
    bytes: u64,
    maxpacket: u32,
    target: u64,
    interval: u64,
    ecn: bool,
    count: u32,
    lastcount: u32,
    dropping: bool,
    first_above_time: u64,
    drop_next: u64,
}

struct DodequeueResult {
    p: Option<(u64, u32, bool, u32)>,
    ok_to_drop: bool,
}

impl Oracle {
    fn new(target: u64, interval: u64, ecn: bool) -> Self {
        Oracle {
            q: VecDeque::new(),
            bytes: 0,
            maxpacket: 0,
            target,
            interval,
            ecn,
            count: 0,
            lastcount: 0,
            dropping: false,
            first_above_time: 0,
            drop_next: 0,
        }
    }

    fn enqueue(&mut self, now: u64, len: u32, ect: bool, id: u32) {
        self.maxpacket = self.maxpacket.max(len);
        self.bytes += u64::from(len);
        self.q.push_back((now, len, ect, id));
    }

    fn control_law(&self, t: u64, count: u32) -> u64 {
        t + (self.interval as f64 / f64::from(count).sqrt()) as u64
    }

    fn dodequeue(&mut self, now: u64) -> DodequeueResult {
        let p = self.q.pop_front();
        let Some(pkt) = p else {
            self.first_above_time = 0;
            return DodequeueResult {
                p: None,
                ok_to_drop: false,
            };
        };
        self.bytes -= u64::from(pkt.1);
        let mut r = DodequeueResult {
            p: Some(pkt),
            ok_to_drop: false,
        };
        let sojourn_time = now.saturating_sub(pkt.0);
        if sojourn_time < self.target || self.bytes <= u64::from(self.maxpacket) {
            self.first_above_time = 0;
        } else if self.first_above_time == 0 {
            self.first_above_time = now + self.interval;
        } else if now >= self.first_above_time {
            r.ok_to_drop = true;
        }
        r
    }

    /// Returns the packet sent (id, marked) and pushes the dropped ids.
    fn dequeue(&mut self, now: u64, dropped: &mut Vec<u32>) -> Option<(u32, bool)> {
        let mut r = self.dodequeue(now);
        if self.dropping {
            if !r.ok_to_drop {
                self.dropping = false;
            }
            while now >= self.drop_next && self.dropping {
                self.count += 1;
                let p = r.p.expect("ok_to_drop implies a packet");
                if self.ecn && p.2 {
                    self.drop_next = self.control_law(self.drop_next, self.count);
                    return Some((p.3, true));
                }
                dropped.push(p.3);
                r = self.dodequeue(now);
                if !r.ok_to_drop {
                    self.dropping = false;
                } else {
                    self.drop_next = self.control_law(self.drop_next, self.count);
                }
            }
            r.p.map(|p| (p.3, false))
        } else if r.ok_to_drop {
            let p = r.p.expect("ok_to_drop implies a packet");
            let mut marked = false;
            if self.ecn && p.2 {
                marked = true;
            } else {
                dropped.push(p.3);
                r = self.dodequeue(now);
            }
            self.dropping = true;
            let delta = self.count.wrapping_sub(self.lastcount);
            self.count = 1;
            if delta > 1 && now.saturating_sub(self.drop_next) < 16 * self.interval {
                self.count = delta;
            }
            self.drop_next = self.control_law(now, self.count);
            self.lastcount = self.count;
            r.p.map(|p| (p.3, marked))
        } else {
            r.p.map(|p| (p.3, false))
        }
    }
}

fn meta(len: u32, ect: bool) -> PacketMeta {
    PacketMeta {
        len,
        ecn: if ect { Ecn::Ect0 } else { Ecn::NotEct },
        ..PacketMeta::default()
    }
}

fn codel(ecn: bool) -> Codel<u32> {
    let cfg = CodelParams {
        ecn,
        ..CodelParams::default()
    }
    .validate()
    .unwrap();
    Codel::new(cfg, 100_000, 100_000, u64::MAX)
}

fn enqueue(c: &mut Codel<u32>, now: u64, len: u32, ect: bool, id: u32) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(0);
    let v = c.enqueue(
        Nanos(now),
        &meta(len, ect),
        None,
        id,
        &mut rng,
        |_| {},
        &mut |_, _| panic!("codel never pushes out"),
    );
    assert_eq!(v, Ok(Verdict::Enqueue));
}

fn dequeue(c: &mut Codel<u32>, now: u64, dropped: &mut Vec<u32>) -> Option<(u32, bool)> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(0);
    match c.dequeue(Nanos(now), &mut rng, &mut |q: Queued<u32>, cause| {
        assert_eq!(cause, Discard::Dequeue);
        dropped.push(q.item);
    }) {
        Next::Packet(Departure { queued, mark }) => Some((queued.item, mark)),
        Next::Empty => None,
        Next::Hold(_) => panic!("codel never holds"),
    }
}

/// A worked sequence: 1500-byte packets arrive every 1 ms into a link that sends one every
/// 2 ms from t = 0, so the sojourn grows by 1 ms per packet sent. The sojourn passes 5 ms at
/// the 6th departure (t = 10 ms), stays above for an interval, and the first drop comes at the
/// first departure at or after 10 + 100 ms; the next ones at `interval / sqrt(count)`.
#[test]
fn a_growing_queue_is_dropped_from_after_one_interval_above_target() {
    let mut c = codel(false);
    let mut dropped = Vec::new();
    let mut drop_times = Vec::new();
    for t in 0..400u64 {
        enqueue(&mut c, t * MS, 1500, false, t as u32);
        if t % 2 == 0 {
            let before = dropped.len();
            let sent = dequeue(&mut c, t * MS, &mut dropped);
            assert!(sent.is_some());
            for _ in before..dropped.len() {
                drop_times.push(t);
            }
        }
    }
    // The sojourn of the packet leaving at t = 2k ms is k ms: >= 5 ms from t = 10 ms.
    assert_eq!(
        drop_times[0], 110,
        "first drop one interval after t = 10 ms: {drop_times:?}"
    );
    // Drop k + 1 is due `interval / sqrt(k)` after drop k was due (count = k after it), and
    // happens at the first departure from then: 210, 280.7 -> 282, 338.4 -> 340, 388.4 -> 390.
    let mut due = Nanos(110 * MS);
    for (k, &t) in drop_times.iter().enumerate().skip(1).take(8) {
        due = control_law(due, Nanos(100 * MS), k as u32);
        let departure = due.0.div_ceil(2 * MS) * 2;
        assert_eq!(t * MS, departure * MS, "drop {k}: {drop_times:?}");
    }
    assert_eq!(&drop_times[..5], [110, 210, 282, 340, 390]);
}

/// The implementation and the RFC's pseudo-code make the same decisions, packet by packet, on
/// random traces: bursts, idle periods, mixed sizes, ECN-capable packets, with and without ECN.
#[test]
fn random_traces_match_the_rfc_pseudo_code() {
    for seed in 0..40u64 {
        let ecn = seed % 2 == 1;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let mut c = codel(ecn);
        let mut o = Oracle::new(5 * MS, 100 * MS, ecn);
        let (mut dc, mut dor) = (Vec::new(), Vec::new());
        let mut now = 0u64;
        let mut id = 0u32;
        // A link of 1..10 Mb/s against arrivals at 0.5..3 times its rate, in phases.
        for phase in 0..30 {
            let rate = rng.random_range(1e6..10e6);
            let load = rng.random_range(0.5..3.0);
            let end = now + rng.random_range(100..1500) * MS;
            let mut next_tx = now;
            while now < end {
                let len = if rng.random_bool(0.3) { 64 } else { 1500 };
                let gap = (f64::from(len) * 8.0 / (rate * load) * 1e9) as u64;
                now += rng.random_range(gap / 2..=gap + gap / 2 + 1);
                let ect = rng.random_bool(0.5);
                enqueue(&mut c, now, len, ect, id);
                o.enqueue(now, len, ect, id);
                id += 1;
                while next_tx <= now {
                    let a = dequeue(&mut c, next_tx, &mut dc);
                    let b = o.dequeue(next_tx, &mut dor);
                    assert_eq!(a, b, "seed {seed} phase {phase} at {next_tx}");
                    assert_eq!(dc, dor, "seed {seed} phase {phase} at {next_tx}");
                    let sent_len = 1500.0;
                    next_tx += if a.is_some() {
                        (sent_len * 8.0 / rate * 1e9) as u64
                    } else {
                        // Idle link: polled again at the next arrival.
                        now + 1 - next_tx
                    };
                }
            }
        }
        assert!(!dc.is_empty(), "seed {seed}: some drops");
        assert_eq!(c.len_packets() as usize, o.q.len());
        assert_eq!(c.len_bytes(), o.bytes);
    }
}

/// With ECN, an ECN-capable packet the law would drop is sent marked; not-ECT ones are dropped.
#[test]
fn ecn_marks_instead_of_dropping_markable_packets() {
    let mut c = codel(true);
    let mut dropped = Vec::new();
    let (mut marked_ect, mut marked_other) = (0, 0);
    for t in 0..2000u64 {
        enqueue(&mut c, t * MS, 1500, t % 2 == 0, t as u32);
        if t % 2 == 0 {
            if let Some((id, mark)) = dequeue(&mut c, t * MS, &mut dropped) {
                if mark {
                    if id % 2 == 0 {
                        marked_ect += 1;
                    } else {
                        marked_other += 1;
                    }
                }
            }
        }
    }
    assert!(marked_ect > 10, "{marked_ect}");
    assert_eq!(marked_other, 0);
    assert!(dropped.iter().all(|id| id % 2 == 1), "only not-ECT dropped");
    assert_eq!(c.stats().ecn_marks, marked_ect);
}

/// A sustained 10 % overload of unresponsive traffic: CoDel's drop rate climbs to the excess
/// and the queue stays tens of milliseconds long, where a FIFO's would grow by 0.1 s per second
/// (to about 6 s here).
#[test]
fn a_persistent_overload_is_held_near_the_target() {
    let mut c = codel(false);
    let mut dropped = Vec::new();
    let mut sojourns = Vec::new();
    // 10 Mb/s link: 1.2 ms per 1500-byte packet; arrivals every 1.09 ms (10 % over).
    let tx = 1_200_000u64;
    let mut next_tx = 0;
    let mut enq = std::collections::HashMap::new();
    for k in 0..60_000u64 {
        let now = k * 1_090_000;
        enqueue(&mut c, now, 1500, false, k as u32);
        enq.insert(k as u32, now);
        while next_tx <= now {
            if let Some((id, _)) = dequeue(&mut c, next_tx, &mut dropped) {
                sojourns.push(next_tx - enq[&id]);
            }
            next_tx += tx;
        }
    }
    // The second half of the run: the median sojourn stays a few targets long (unresponsive
    // traffic does not back off, so the law drops at the excess rate around a standing queue).
    let mut late: Vec<u64> = sojourns[sojourns.len() / 2..].to_vec();
    late.sort_unstable();
    let median = late[late.len() / 2] as f64 / MS as f64;
    let p99 = late[late.len() * 99 / 100] as f64 / MS as f64;
    assert!((3.0..40.0).contains(&median), "median sojourn {median} ms");
    assert!(p99 < 80.0, "p99 sojourn {p99} ms");
    // It dropped about the 9 % excess, not much more.
    let share = dropped.len() as f64 / 60_000.0;
    assert!((0.07..0.12).contains(&share), "drop share {share}");
}

/// A full buffer tail-drops on arrival (CoDel itself only decides at dequeue).
#[test]
fn a_full_buffer_tail_drops() {
    let cfg = CodelParams::default().validate().unwrap();
    let mut c: Codel<u32> = Codel::new(cfg, 4, 3, u64::MAX);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(0);
    for i in 0..3 {
        assert!(c
            .enqueue(
                Nanos(0),
                &meta(100, false),
                None,
                i,
                &mut rng,
                |_| {},
                &mut |_, _| {}
            )
            .is_ok());
    }
    assert_eq!(
        c.enqueue(
            Nanos(0),
            &meta(100, false),
            None,
            9,
            &mut rng,
            |_| {},
            &mut |_, _| {}
        ),
        Err((Verdict::TailDrop, 9))
    );
}

#[test]
fn bad_parameters_are_named() {
    let e = CodelParams {
        target_ms: 200.0,
        ..CodelParams::default()
    }
    .validate()
    .unwrap_err();
    assert_eq!(e.param, "interval_ms");
    let e = CodelParams {
        target_ms: -1.0,
        ..CodelParams::default()
    }
    .validate()
    .unwrap_err();
    assert_eq!(e.param, "target_ms");
}
