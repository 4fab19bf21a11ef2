//! FQ-CoDel (docs/algorithms/fq-codel.md) against RFC 8290's pseudo-code (§4, in the form of
//! Linux `fq_codel_enqueue` / `fq_codel_dequeue` it describes), transcribed below as an oracle,
//! on random traces; and what it is for: a sparse flow goes first, bulk flows share the link
//! equally whatever their rates, an overflow drops from the fattest queue, and the CAKE host
//! modes give each host one share.

use std::collections::{HashMap, VecDeque};

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use zl_aqm::{
    Departure, Discard, Discipline, Ecn, FlowId, FqCodel, FqCodelParams, HostIsolation, Nanos,
    Next, PacketMeta, Queued,
};

const MS: u64 = 1_000_000;

fn meta(flow: u64, len: u32) -> PacketMeta {
    PacketMeta {
        len,
        flow: FlowId(flow),
        src_host: (flow >> 16) as u16,
        dst_host: 1,
        ecn: if flow % 3 == 0 {
            Ecn::Ect0
        } else {
            Ecn::NotEct
        },
        ..PacketMeta::default()
    }
}

fn fq(params: FqCodelParams, limit: u32) -> FqCodel<u32> {
    FqCodel::new(params.validate().unwrap(), limit, limit, u64::MAX)
}

/// One flow queue of the oracle: RFC 8289's CoDel variables.
#[derive(Default)]
struct OFlow {
    q: VecDeque<(u64, u32, bool, u32)>,
    deficit: i64,
    count: u32,
    lastcount: u32,
    dropping: bool,
    first_above_time: u64,
    drop_next: u64,
    listed: bool,
}

/// RFC 8290 §4 over RFC 8289's CoDel: hashed queues, `new_flows` / `old_flows`, DRR with a
/// quantum, CoDel per queue (its one-MTU test on the whole backlog, as Linux), drop from the
/// fattest queue (half its bytes, at most 64 packets) when the limit is passed.
struct Oracle {
    flows: HashMap<usize, OFlow>,
    new_flows: VecDeque<usize>,
    old_flows: VecDeque<usize>,
    quantum: i64,
    limit: usize,
    len: usize,
    bytes: u64,
    maxpacket: u32,
    ecn: bool,
}

impl Oracle {
    fn control_law(t: u64, count: u32) -> u64 {
        t + (100.0 * MS as f64 / f64::from(count).sqrt()) as u64
    }

    fn enqueue(
        &mut self,
        idx: usize,
        now: u64,
        len: u32,
        ect: bool,
        id: u32,
        dropped: &mut Vec<u32>,
    ) {
        let quantum = self.quantum;
        let f = self.flows.entry(idx).or_default();
        f.q.push_back((now, len, ect, id));
        self.len += 1;
        self.bytes += u64::from(len);
        self.maxpacket = self.maxpacket.max(len);
        if !f.listed {
            f.listed = true;
            f.deficit = quantum;
            self.new_flows.push_back(idx);
        }
        if self.len > self.limit {
            let fat = *self
                .flows
                .iter()
                .max_by_key(|(i, f)| {
                    (
                        f.q.iter().map(|p| u64::from(p.1)).sum::<u64>(),
                        std::cmp::Reverse(**i),
                    )
                })
                .unwrap()
                .0;
            let f = self.flows.get_mut(&fat).unwrap();
            let threshold = f.q.iter().map(|p| u64::from(p.1)).sum::<u64>() / 2;
            let (mut n, mut b) = (0, 0);
            while n < 64 && b < threshold.max(1) {
                let Some(p) = f.q.pop_front() else { break };
                b += u64::from(p.1);
                n += 1;
                self.len -= 1;
                self.bytes -= u64::from(p.1);
                dropped.push(p.3);
            }
        }
    }

    fn dodequeue(&mut self, idx: usize, now: u64) -> (Option<(u64, u32, bool, u32)>, bool) {
        let f = self.flows.get_mut(&idx).unwrap();
        let Some(p) = f.q.pop_front() else {
            f.first_above_time = 0;
            return (None, false);
        };
        self.len -= 1;
        self.bytes -= u64::from(p.1);
        let mut ok = false;
        if now.saturating_sub(p.0) < 5 * MS || self.bytes <= u64::from(self.maxpacket) {
            f.first_above_time = 0;
        } else if f.first_above_time == 0 {
            f.first_above_time = now + 100 * MS;
        } else if now >= f.first_above_time {
            ok = true;
        }
        (Some(p), ok)
    }

    fn codel_dequeue(
        &mut self,
        idx: usize,
        now: u64,
        dropped: &mut Vec<u32>,
    ) -> Option<(u32, u32, bool)> {
        let (mut p, mut ok) = self.dodequeue(idx, now);
        let ecn = self.ecn;
        let f = self.flows.get_mut(&idx).unwrap();
        if f.dropping {
            if !ok {
                f.dropping = false;
            }
            loop {
                let f = self.flows.get_mut(&idx).unwrap();
                if !(f.dropping && now >= f.drop_next) {
                    break;
                }
                f.count += 1;
                let pk = p.unwrap();
                if ecn && pk.2 {
                    f.drop_next = Self::control_law(f.drop_next, f.count);
                    return Some((pk.3, pk.1, true));
                }
                dropped.push(pk.3);
                (p, ok) = self.dodequeue(idx, now);
                let f = self.flows.get_mut(&idx).unwrap();
                if !ok {
                    f.dropping = false;
                } else {
                    f.drop_next = Self::control_law(f.drop_next, f.count);
                }
            }
            p.map(|p| (p.3, p.1, false))
        } else if ok {
            let pk = p.unwrap();
            let mut marked = false;
            if ecn && pk.2 {
                marked = true;
            } else {
                dropped.push(pk.3);
                (p, _) = self.dodequeue(idx, now);
            }
            let f = self.flows.get_mut(&idx).unwrap();
            f.dropping = true;
            let delta = f.count.wrapping_sub(f.lastcount);
            f.count = 1;
            if delta > 1 && now.saturating_sub(f.drop_next) < 16 * 100 * MS {
                f.count = delta;
            }
            f.drop_next = Self::control_law(now, f.count);
            f.lastcount = f.count;
            p.map(|p| (p.3, p.1, marked))
        } else {
            p.map(|p| (p.3, p.1, false))
        }
    }

    fn dequeue(&mut self, now: u64, dropped: &mut Vec<u32>) -> Option<(u32, bool)> {
        loop {
            let from_new = !self.new_flows.is_empty();
            let idx = if from_new {
                self.new_flows[0]
            } else if let Some(&i) = self.old_flows.front() {
                i
            } else {
                return None;
            };
            let quantum = self.quantum;
            let f = self.flows.get_mut(&idx).unwrap();
            if f.deficit <= 0 {
                f.deficit += quantum;
                if from_new {
                    self.new_flows.pop_front();
                } else {
                    self.old_flows.pop_front();
                }
                self.old_flows.push_back(idx);
                continue;
            }
            match self.codel_dequeue(idx, now, dropped) {
                None => {
                    if from_new {
                        self.new_flows.pop_front();
                    } else {
                        self.old_flows.pop_front();
                    }
                    if from_new && !self.old_flows.is_empty() {
                        self.old_flows.push_back(idx);
                    } else {
                        self.flows.get_mut(&idx).unwrap().listed = false;
                    }
                }
                Some((id, len, mark)) => {
                    self.flows.get_mut(&idx).unwrap().deficit -= i64::from(len);
                    return Some((id, mark));
                }
            }
        }
    }
}

impl Oracle {
    fn new(quantum: i64, limit: usize, ecn: bool) -> Self {
        Oracle {
            flows: HashMap::new(),
            new_flows: VecDeque::new(),
            old_flows: VecDeque::new(),
            quantum,
            limit,
            len: 0,
            bytes: 0,
            maxpacket: 0,
            ecn,
        }
    }
}

fn enqueue(d: &mut FqCodel<u32>, now: u64, m: PacketMeta, id: u32, dropped: &mut Vec<u32>) {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(0);
    let r = d.enqueue(
        Nanos(now),
        &m,
        None,
        id,
        &mut rng,
        |_| {},
        &mut |q: Queued<u32>, cause| {
            assert_eq!(cause, Discard::Overflow);
            dropped.push(q.item);
        },
    );
    assert!(r.is_ok());
}

fn dequeue(d: &mut FqCodel<u32>, now: u64, dropped: &mut Vec<u32>) -> Option<(u32, bool)> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(0);
    match d.dequeue(Nanos(now), &mut rng, &mut |q: Queued<u32>, _| {
        dropped.push(q.item)
    }) {
        Next::Packet(Departure { queued, mark }) => Some((queued.item, mark)),
        Next::Empty => None,
        Next::Hold(_) => panic!("fq-codel never holds"),
    }
}

/// The implementation and the pseudo-code make the same decisions packet by packet on random
/// traces of many flows (sparse and bulk, mixed sizes, ECN-capable or not), through overflows.
#[test]
fn random_traces_match_the_rfc_pseudo_code() {
    for seed in 0..24u64 {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let params = FqCodelParams {
            flows: [16, 64, 1024][seed as usize % 3],
            ecn: seed % 2 == 0,
            ..FqCodelParams::default()
        };
        let limit = [50usize, 200, 1000][seed as usize % 3];
        let mut d = fq(params, limit as u32);
        let mut o = Oracle::new(1514, limit, params.ecn);
        let (mut dd, mut od) = (Vec::new(), Vec::new());
        let flows = rng.random_range(2..40u64);
        let rate = 10e6;
        let mut now = 0u64;
        let mut next_tx = 0u64;
        for id in 0..20_000u32 {
            let flow = if rng.random_bool(0.2) {
                rng.random_range(0..flows)
            } else {
                rng.random_range(0..3)
            };
            let len = if rng.random_bool(0.3) { 100 } else { 1500 };
            now += rng.random_range(0..2 * MS * u64::from(len) / 1500 + 1);
            let m = meta(flow, len);
            enqueue(&mut d, now, m, id, &mut dd);
            let ect = m.ecn.is_ecn_capable();
            o.enqueue(d.queue_of(&m), now, len, ect, id, &mut od);
            assert_eq!(dd, od, "seed {seed}: overflow drops at {now}");
            while next_tx <= now {
                let a = dequeue(&mut d, next_tx, &mut dd);
                let b = o.dequeue(next_tx, &mut od);
                assert_eq!(a, b, "seed {seed} at {next_tx}");
                assert_eq!(dd, od, "seed {seed} at {next_tx}");
                next_tx += if a.is_some() {
                    (1500.0 * 8.0 / rate * 1e9) as u64
                } else {
                    now + 1 - next_tx
                };
            }
        }
        assert_eq!(d.len_packets() as usize, o.len, "seed {seed}");
        assert_eq!(d.len_bytes(), o.bytes, "seed {seed}");
        assert!(!dd.is_empty(), "seed {seed}: some drops");
    }
}

/// A sparse flow (a ping every 100 ms) waits for at most a packet or two behind four bulk flows
/// that keep a standing queue: it goes through `new_flows`.
#[test]
fn a_sparse_flow_goes_ahead_of_the_bulk_queues() {
    let mut d = fq(FqCodelParams::default(), 10_000);
    let mut dropped = Vec::new();
    let mut sent_at = HashMap::new();
    let tx = 1_200_000u64; // 10 Mb/s, 1500-byte packets
    let mut next_tx = 0;
    let mut enq = HashMap::new();
    let mut id = 0u32;
    let mut pings = Vec::new();
    for step in 0..20_000u64 {
        let now = step * 300_000; // 4 bulk arrivals per 1.2 ms: 2x overload
        let m = meta(1 + step % 4, 1500);
        enqueue(&mut d, now, m, id, &mut dropped);
        enq.insert(id, now);
        id += 1;
        if step % 333 == 0 {
            enqueue(&mut d, now, meta(100, 84), id, &mut dropped);
            enq.insert(id, now);
            pings.push(id);
            id += 1;
        }
        while next_tx <= now {
            if let Some((i, _)) = dequeue(&mut d, next_tx, &mut dropped) {
                sent_at.insert(i, next_tx);
            }
            next_tx += tx;
        }
    }
    let waits: Vec<u64> = pings
        .iter()
        .filter_map(|p| sent_at.get(p).map(|t| t - enq[p]))
        .collect();
    assert!(waits.len() > 50);
    let worst = *waits.iter().max().unwrap();
    assert!(
        worst <= 2 * tx,
        "a ping waited {} ms",
        worst as f64 / MS as f64
    );
    // While the unresponsive bulk flows (twice the link) stand in a queue of seconds.
    let bulk: Vec<u64> = sent_at
        .iter()
        .filter(|(i, _)| !pings.contains(i))
        .map(|(i, t)| t - enq[i])
        .collect();
    let mean = bulk.iter().sum::<u64>() as f64 / bulk.len() as f64;
    assert!(
        mean > 100.0 * worst as f64,
        "bulk sojourn {} ms",
        mean / MS as f64
    );
}

/// Four bulk flows at 1x, 2x, 4x and 8x a share of the link each get a quarter of it
/// (within 10 %), as DRR over the queues gives them.
#[test]
fn bulk_flows_share_the_link_equally_whatever_their_rates() {
    let mut d = fq(FqCodelParams::default(), 1000);
    let mut dropped = Vec::new();
    let mut sent = [0u64; 4];
    let tx = 1_200_000u64;
    let mut next_tx = 0;
    let weights = [1u64, 2, 4, 8];
    let mut flow_of = HashMap::new();
    let mut id = 0;
    for step in 0..200_000u64 {
        let now = step * 100_000;
        for (f, w) in weights.iter().enumerate() {
            // Flow f offers w/4 of the link: one packet every 4 * 1.2 ms / w.
            if step % (48 / w) == 0 {
                enqueue(&mut d, now, meta(f as u64 + 1, 1500), id, &mut dropped);
                flow_of.insert(id, f);
                id += 1;
            }
        }
        while next_tx <= now {
            if let Some((i, _)) = dequeue(&mut d, next_tx, &mut dropped) {
                if next_tx > 2_000 * MS {
                    sent[flow_of[&i]] += 1;
                }
            }
            next_tx += tx;
        }
    }
    let total: u64 = sent.iter().sum();
    for (f, &n) in sent.iter().enumerate() {
        let share = n as f64 / total as f64;
        // Flow 0 offers exactly its share, the others more: each about a quarter.
        assert!(
            (0.225..0.275).contains(&share),
            "flow {f}: {share} of {sent:?}"
        );
    }
}

/// Past the limit, packets go from the head of the queue with the most bytes: the flood's, not
/// the light flow's.
#[test]
fn an_overflow_drops_from_the_fattest_queue() {
    let mut d = fq(FqCodelParams::default(), 100);
    let mut dropped = Vec::new();
    for i in 0..10 {
        enqueue(&mut d, 0, meta(7, 1500), i, &mut dropped);
    }
    for i in 10..200 {
        enqueue(&mut d, 0, meta(9, 1500), i, &mut dropped);
    }
    assert!(!dropped.is_empty());
    assert!(
        dropped.iter().all(|&i| i >= 10),
        "only the flood's: {dropped:?}"
    );
    // Oldest first, from its head.
    assert_eq!(dropped[0], 10);
    assert!(d.len_packets() <= 100);
    assert_eq!(d.stats().drop_overlimit, dropped.len() as u64);
}

/// CAKE's `dual-srchost`: one host with 20 flows and four hosts with one flow each share the
/// link by host: about a fifth each (the 20 flows together get a fifth), where per-flow fairness
/// would give the big host 20/24. `triple-isolate` does the same when the flows go to distinct
/// destinations (with one destination for all, its destination share divides every flow alike,
/// and it is per flow again, as CAKE's).
#[test]
fn dual_srchost_gives_a_host_with_twenty_flows_one_host_share() {
    for (mode, big_share) in [
        (HostIsolation::DualSrchost, 0.2),
        (HostIsolation::TripleIsolate, 0.2),
        (HostIsolation::Flows, 20.0 / 24.0),
    ] {
        let params = FqCodelParams {
            isolate: mode,
            ..FqCodelParams::default()
        };
        let mut d = fq(params, 2000);
        let mut dropped = Vec::new();
        let mut host_of = HashMap::new();
        let mut sent = [0u64; 5];
        let tx = 1_200_000u64;
        let mut next_tx = 0;
        let mut id = 0;
        for step in 0..100_000u64 {
            let now = step * 200_000;
            // Host 0: flows 0..20; hosts 1..=4: one flow each. Every flow offers a packet
            // every 4 ms: 24 flows x 3 Mb/s against 10 Mb/s.
            if step % 20 == 0 {
                for f in 0..24u64 {
                    let host = if f < 20 { 0 } else { f - 19 };
                    let m = PacketMeta {
                        len: 1500,
                        flow: FlowId(1000 + f),
                        src_host: 40_000 + host as u16,
                        dst_host: 100 + f as u16,
                        ..PacketMeta::default()
                    };
                    enqueue(&mut d, now, m, id, &mut dropped);
                    host_of.insert(id, host as usize);
                    id += 1;
                }
            }
            while next_tx <= now {
                if let Some((i, _)) = dequeue(&mut d, next_tx, &mut dropped) {
                    if next_tx > 3_000 * MS {
                        sent[host_of[&i]] += 1;
                    }
                }
                next_tx += tx;
            }
        }
        let total: u64 = sent.iter().sum();
        let big = sent[0] as f64 / total as f64;
        assert!(
            (big - big_share).abs() < 0.04,
            "{}: the big host got {big} ({sent:?})",
            mode.name()
        );
    }
}

/// Hosts modes put a host's flows in one queue.
#[test]
fn srchost_queues_by_source_host() {
    let params = FqCodelParams {
        isolate: HostIsolation::Srchost,
        ..FqCodelParams::default()
    };
    let d = fq(params, 100);
    let a = PacketMeta {
        flow: FlowId(1),
        src_host: 5,
        ..PacketMeta::default()
    };
    let b = PacketMeta {
        flow: FlowId(2),
        ..a
    };
    assert_eq!(d.queue_of(&a), d.queue_of(&b));
}
