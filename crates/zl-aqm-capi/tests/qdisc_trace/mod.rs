//! The trace of `examples/c/qdisc_trace.c`, replayed through `zl_aqm`'s `QueueDiscipline`
//! directly (no C ABI), printing what the C program prints: the same seed and packet count
//! must give the same bytes. The constants and the trace are the C program's (see its header
//! comment); items are the arrival numbers, which the C program keeps in its packet pool.

use std::fmt::Write;

use rand::RngCore;
use zl_aqm::{
    AqmParams, AqmStats, BuildContext, Discard, Discipline, Ecn, FlowId, Nanos, Next, PacketMeta,
    QueueDiscipline, Verdict,
};
use zl_aqm_capi::SplitMix64;

const NS_PER_BYTE: u64 = 80;
const BULK_LEN: u32 = 1500;
const BULK_GAP_NS: u64 = 96_000;
const SPARSE_LEN: u32 = 100;
const SPARSE_GAP_NS: u64 = 10_000_000;
const HEAVY_PERCENT: u64 = 40;
const FLOWS: usize = 10;
const SPARSE_FLOW: u32 = 9;
const CAPACITY: u32 = 500;

#[derive(Default)]
struct FlowCount {
    arrivals: u64,
    sent: u64,
    marked: u64,
    refused: u64,
    discarded: u64,
    sojourn_ns: u64,
    sojourn_max_ns: u64,
}

#[derive(Default)]
struct Counts {
    verdicts: AqmStats,
    dequeued: u64,
    marked_on_dequeue: u64,
    dequeue_drops: u64,
    overflow_drops: u64,
}

fn fnv(mut h: u64, x: u64) -> u64 {
    for i in 0..8 {
        h ^= (x >> (8 * i)) & 0xff;
        h = h.wrapping_mul(0x0100_0000_01B3);
    }
    h
}

/// The C program's output for `seed`, `packets` bulk arrivals and `mode` (`fq-codel` or
/// `isolation`).
pub fn run(seed: u64, packets: u64, mode: &str) -> String {
    let toml = match mode {
        "fq-codel" => "kind = \"fq-codel\"\n",
        "isolation" => "kind = \"zl-red\"\n[isolation]\n",
        _ => panic!("mode {mode}"),
    };
    let params: AqmParams = toml::from_str(toml).expect("the example's TOML");
    let ctx = BuildContext::new(100_000_000, CAPACITY).with_buffer(CAPACITY, u64::MAX);
    let mut q: QueueDiscipline<u64> = params
        .build_discipline(&ctx)
        .expect("valid")
        .expect("a discipline");

    let mut trace_rng = seed;
    let mut qdisc_rng = seed ^ 0x6A09_E667_F3BC_C909;
    let (mut link_free, mut digest, mut serial) = (0u64, 0xcbf2_9ce4_8422_2325u64, 0u64);
    let (mut bulk, mut next_sparse) = (0u64, 0u64);
    let mut flows: Vec<FlowCount> = (0..FLOWS).map(|_| FlowCount::default()).collect();
    let mut flow_of: Vec<u32> = Vec::new();
    let mut counts = Counts::default();
    let mut in_use = 0u64;

    while bulk < packets {
        let next_bulk = bulk * BULK_GAP_NS;
        let sparse = next_sparse < next_bulk;
        let now = if sparse { next_sparse } else { next_bulk };

        while link_free <= now {
            let mut discard = |item: u64, d: Discard| {
                match d {
                    Discard::Dequeue => counts.dequeue_drops += 1,
                    Discard::Overflow => counts.overflow_drops += 1,
                }
                flows[flow_of[item as usize] as usize].discarded += 1;
                in_use -= 1;
            };
            match q.dequeue(
                Nanos(link_free),
                &mut SplitMix64(&mut qdisc_rng),
                &mut |e, d| discard(e.item, d),
            ) {
                Next::Packet(p) => {
                    counts.dequeued += 1;
                    counts.marked_on_dequeue += u64::from(p.mark);
                    let f = &mut flows[flow_of[p.queued.item as usize] as usize];
                    let sojourn = link_free - p.queued.enqueued_at.0;
                    f.sent += 1;
                    f.marked += u64::from(p.mark);
                    f.sojourn_ns += sojourn;
                    f.sojourn_max_ns = f.sojourn_max_ns.max(sojourn);
                    digest = fnv(
                        fnv(fnv(digest, p.queued.item), link_free),
                        u64::from(p.mark),
                    );
                    in_use -= 1;
                    link_free += u64::from(p.queued.meta.len) * NS_PER_BYTE;
                }
                Next::Hold(until) => {
                    link_free = if until.0 > link_free {
                        until.0
                    } else {
                        link_free + 1
                    };
                }
                Next::Empty => {
                    link_free = now;
                    break;
                }
            }
        }

        let (flow, len, ecn) = if sparse {
            next_sparse += SPARSE_GAP_NS;
            (SPARSE_FLOW, SPARSE_LEN, Ecn::NotEct)
        } else {
            let r = SplitMix64(&mut trace_rng).next_u64();
            let flow = if r % 100 < HEAVY_PERCENT {
                0
            } else {
                1 + ((r >> 32) % 8) as u32
            };
            bulk += 1;
            let ecn = if flow % 2 == 0 {
                Ecn::Ect0
            } else {
                Ecn::NotEct
            };
            (flow, BULK_LEN, ecn)
        };
        let pkt = PacketMeta {
            len,
            flow: FlowId(u64::from(flow + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            ecn,
            src_host: (1 + flow) as u16,
            dst_host: 0,
            ..PacketMeta::default()
        };
        flows[flow as usize].arrivals += 1;
        flow_of.push(flow);
        let item = serial;
        serial += 1;
        in_use += 1;
        let mut discarded = Vec::new();
        let v = match q.enqueue(
            Nanos(now),
            &pkt,
            None,
            item,
            &mut SplitMix64(&mut qdisc_rng),
            |_| {},
            &mut |e, d| discarded.push((e.item, d)),
        ) {
            Ok(v) => v,
            Err((v, _)) => v,
        };
        for (item, d) in discarded {
            match d {
                Discard::Dequeue => counts.dequeue_drops += 1,
                Discard::Overflow => counts.overflow_drops += 1,
            }
            flows[flow_of[item as usize] as usize].discarded += 1;
            in_use -= 1;
        }
        counts.verdicts.record(v);
        if !v.admits() {
            flows[flow as usize].refused += 1;
            in_use -= 1;
        } else if v == Verdict::MarkCe {
            flows[flow as usize].marked += 1;
        }
    }

    let mut out = String::new();
    let o = &mut out;
    writeln!(
        o,
        "# qdisc_trace {mode} seed={seed} packets={packets} capacity={CAPACITY}"
    )
    .unwrap();
    writeln!(
        o,
        "flow arrivals sent marked refused discarded sojourn_avg_us sojourn_max_us"
    )
    .unwrap();
    for (i, f) in flows.iter().enumerate() {
        let avg = f.sojourn_ns.checked_div(f.sent).map_or(0, |ns| ns / 1000);
        writeln!(
            o,
            "{i} {} {} {} {} {} {avg} {}",
            f.arrivals,
            f.sent,
            f.marked,
            f.refused,
            f.discarded,
            f.sojourn_max_ns / 1000
        )
        .unwrap();
    }
    let v = &counts.verdicts;
    writeln!(
        o,
        "enqueued={} marked_on_enqueue={} early_drops={} forced_drops={} tail_drops={}",
        v.enqueued, v.marked, v.early_drops, v.forced_drops, v.tail_drops
    )
    .unwrap();
    writeln!(
        o,
        "dequeued={} marked_on_dequeue={} dequeue_drops={} overflow_drops={}",
        counts.dequeued, counts.marked_on_dequeue, counts.dequeue_drops, counts.overflow_drops
    )
    .unwrap();
    match &q {
        QueueDiscipline::FqCodel(d) => {
            let s = d.stats();
            writeln!(
                o,
                "fq-codel: new_flow_count={} drop_overlimit={} ecn_marks={} codel_drops={}",
                s.new_flow_count, s.drop_overlimit, s.codel.ecn_marks, s.codel.dropped
            )
            .unwrap();
        }
        QueueDiscipline::Isolated(d) => {
            let s = d.stats();
            writeln!(
                o,
                "isolation: flagged={} penalized={} released={} penalty_sent={} \
                 fair_share_bps={}",
                s.flagged,
                s.penalized,
                s.released,
                s.penalty_sent,
                d.fair_share_bps() as u64
            )
            .unwrap();
        }
        _ => unreachable!("the example's two modes"),
    }
    writeln!(o, "departures_fnv={digest:016x}").unwrap();
    let queued = q.len_packets();
    let mut handed_back = 0u64;
    q.drain(|_| handed_back += 1);
    in_use -= handed_back;
    writeln!(
        o,
        "queued_at_end={queued} handed_back_at_free={handed_back} pool_in_use={in_use}"
    )
    .unwrap();
    out
}
