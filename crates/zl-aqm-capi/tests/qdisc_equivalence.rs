//! Every queue discipline through the C ABI (`zl_qdisc_*`) acts exactly as the same discipline
//! called from Rust (`zl_aqm::QueueDiscipline<u64>`): for CoDel, FQ-CoDel (flows and a CAKE
//! host mode), DualPI2 and ZL-RED with isolation (by flow and by source host), each built from
//! the same TOML, 63 000 random steps (arrivals of 40 flows on 12 hosts with random lengths and
//! ECN codepoints, one flow heavy, and dequeues, over an overloaded queue, then dequeues until
//! it empties, then a few arrivals) give the same
//! verdicts, the same departures (handle, enqueue time, mark, hold time), the same discarded
//! handles with the same causes, in the same order, the same counters, the same random state,
//! and `zl_qdisc_free` hands back the packets still queued in the order `drain` gives them.
//! This is what proves the mapping of `ZlArrival` onto `PacketMeta` (host hashes included) and
//! of `Next` / `Discard` onto the C results.

use std::ffi::{c_void, CString};

use rand::RngCore;
use zl_aqm::{
    AqmParams, BuildContext, Discard, Discipline, Ecn, FlowId, Nanos, Next, PacketMeta,
    QueueDiscipline, Verdict,
};
use zl_aqm_capi::*;

const KINDS: [&str; 6] = [
    "kind = \"codel\"\necn = true\ntarget_ms = 0.2\ninterval_ms = 2",
    "kind = \"fq-codel\"\nflows = 64\ntarget_ms = 0.2\ninterval_ms = 2\ndrop_batch = 8",
    "kind = \"fq-codel\"\nflows = 64\nisolate = \"triple-isolate\"\ntarget_ms = 0.2\n\
     interval_ms = 2",
    "kind = \"dualpi2\"\nt_update_ms = 1\ntarget_ms = 1\nstep_thresh_ms = 0.5",
    "kind = \"zl-red\"\na = 10\necn = true\n[zombie]\nm = 100\n\
     [isolation]\nmax_flows = 8\nwindow_ms = 2\nconfirm = 2\nhold = 1",
    "kind = \"zl-red\"\na = 10\n[zombie]\nm = 100\n\
     [isolation]\nby = \"srchost\"\nmax_flows = 4\nwindow_ms = 2\nconfirm = 2",
];

const QUEUE: ZlQueueParams = ZlQueueParams {
    capacity_packets: 200,
    capacity_bytes: 200 * 1000,
    link_rate_bps: 1_000_000_000,
};

type Discards = Vec<(u64, ZlDiscardCause)>;

/// The discard callback: appends to the `Discards` that `ctx` points to.
unsafe extern "C" fn collect(ctx: *mut c_void, handle: u64, cause: ZlDiscardCause) {
    // SAFETY: `ctx` is the test's boxed `Discards`, alive while the qdisc is, and not
    // borrowed elsewhere during a call.
    unsafe { (*ctx.cast::<Discards>()).push((handle, cause)) };
}

fn cause(d: Discard) -> ZlDiscardCause {
    match d {
        Discard::Dequeue => ZlDiscardCause::ZL_DISCARD_DEQUEUE,
        Discard::Overflow => ZlDiscardCause::ZL_DISCARD_OVERFLOW,
    }
}

fn meta(a: &ZlArrival) -> PacketMeta {
    PacketMeta {
        len: a.packet_len,
        flow: FlowId(a.flow_hash),
        ecn: Ecn::from_bits(a.ecn),
        src_host: a.src_host,
        dst_host: a.dst_host,
        ..PacketMeta::default()
    }
}

/// What the test saw happen, counted on the Rust side.
#[derive(Debug, Default)]
struct Seen {
    verdicts: [u64; 5],
    sent: u64,
    marked: u64,
    holds: u64,
    dequeue_drops: u64,
    overflow_drops: u64,
}

#[test]
fn every_discipline_acts_as_in_rust() {
    for kind in KINDS {
        let params: AqmParams = toml::from_str(kind).expect(kind);
        let ctx = BuildContext::new(QUEUE.link_rate_bps, QUEUE.capacity_packets)
            .with_buffer(QUEUE.capacity_packets, QUEUE.capacity_bytes);
        let mut rust: QueueDiscipline<u64> = params
            .build_discipline(&ctx)
            .expect(kind)
            .expect("a discipline");

        let text = CString::new(kind).unwrap();
        let sink: *mut Discards = Box::into_raw(Box::default());
        let mut c = std::ptr::null_mut();
        // SAFETY: valid pointers to locals; `sink` outlives the qdisc (freed after it).
        let status = unsafe {
            zl_qdisc_new_from_toml(
                text.as_ptr(),
                &QUEUE,
                std::ptr::null(),
                Some(collect),
                sink.cast(),
                &mut c,
            )
        };
        assert_eq!(status, ZlStatus::ZL_OK, "{kind}");

        let (mut rng_c, mut rng_rust) = (5u64, 5u64);
        let mut gen = 1234u64;
        let mut now = 1_000_000u64;
        let mut handle = 0u64;
        let mut seen = Seen::default();
        let mut rust_discards = Discards::new();
        for step in 0..63_000u32 {
            let r = SplitMix64(&mut gen).next_u64();
            now += 1_000 + (r >> 50) % 2_000;
            // Arrivals at about 1.4 times the dequeues, so the queue stays near its limits;
            // then only dequeues, until the isolation holds its penalty queues back with the
            // normal queue empty; then a few arrivals, for the free to hand back.
            let arrive = match step {
                0..60_000 => r % 100 < 58,
                60_000..62_980 => false,
                _ => true,
            };
            if arrive {
                let flow = if r % 7 == 0 { 0 } else { 1 + (r >> 8) % 39 };
                let mut a = zl_arrival_default();
                a.flow_hash = flow.wrapping_mul(0x9E37_79B9_7F4A_7C15);
                a.now_ns = now;
                a.packet_len = 64 + ((r >> 16) % 1437) as u32;
                a.ecn = ((r >> 28) % 4) as u8;
                a.src_host = (flow % 12) as u16;
                a.dst_host = ((r >> 40) % 3) as u16;
                // The queue fields are ignored by a qdisc: garbage must not matter.
                a.queue_packets = (r >> 33) as u32;
                handle += 1;
                // SAFETY: `c` is live; locals.
                let v_c = unsafe { zl_qdisc_enqueue(c, &a, handle, &mut rng_c) };
                let v_rust = match rust.enqueue(
                    Nanos(now),
                    &meta(&a),
                    None,
                    handle,
                    &mut SplitMix64(&mut rng_rust),
                    |_| {},
                    &mut |q, d| rust_discards.push((q.item, cause(d))),
                ) {
                    Ok(v) => v,
                    Err((v, item)) => {
                        assert_eq!(item, handle, "{kind}: the refused item comes back");
                        v
                    }
                };
                assert_eq!(v_c as u32, v_rust as u32, "{kind}: step {step}: {a:?}");
                seen.verdicts[v_rust as usize] += 1;
            } else {
                let mut d = ZlDeparture {
                    handle: 7,
                    enqueued_ns: 7,
                    hold_until_ns: 7,
                    packet_len: 7,
                    mark: 7,
                };
                // SAFETY: `c` is live; locals.
                let st = unsafe { zl_qdisc_dequeue(c, now, &mut rng_c, &mut d) };
                let next = rust.dequeue(Nanos(now), &mut SplitMix64(&mut rng_rust), &mut |q, d| {
                    rust_discards.push((q.item, cause(d)))
                });
                match next {
                    Next::Packet(p) => {
                        assert_eq!(st, ZlDequeueStatus::ZL_DEQUEUE_PACKET, "{kind}: {step}");
                        let expect = ZlDeparture {
                            handle: p.queued.item,
                            enqueued_ns: p.queued.enqueued_at.0,
                            hold_until_ns: ZL_NO_TIME,
                            packet_len: p.queued.meta.len,
                            mark: u8::from(p.mark),
                        };
                        assert_eq!(d, expect, "{kind}: step {step}");
                        seen.sent += 1;
                        seen.marked += u64::from(p.mark);
                    }
                    Next::Hold(until) => {
                        assert_eq!(st, ZlDequeueStatus::ZL_DEQUEUE_HOLD, "{kind}: {step}");
                        assert_eq!(d.hold_until_ns, until.0, "{kind}: step {step}");
                        assert_eq!((d.handle, d.enqueued_ns), (0, ZL_NO_TIME));
                        seen.holds += 1;
                    }
                    Next::Empty => {
                        assert_eq!(st, ZlDequeueStatus::ZL_DEQUEUE_EMPTY, "{kind}: {step}");
                        assert_eq!(d.hold_until_ns, ZL_NO_TIME);
                    }
                }
            }
            // SAFETY: no call is running; the callback's `Discards` is ours between calls.
            let c_discards = unsafe { &mut *sink };
            assert_eq!(*c_discards, rust_discards, "{kind}: step {step}");
            for &(_, cause) in c_discards.iter() {
                match cause {
                    ZlDiscardCause::ZL_DISCARD_DEQUEUE => seen.dequeue_drops += 1,
                    ZlDiscardCause::ZL_DISCARD_OVERFLOW => seen.overflow_drops += 1,
                    ZlDiscardCause::ZL_DISCARD_FREE => panic!("{kind}: a free before the end"),
                }
            }
            c_discards.clear();
            rust_discards.clear();
        }
        assert_eq!(rng_c, rng_rust, "{kind}: the same draws");

        let mut stats = std::mem::MaybeUninit::<ZlQdiscStats>::uninit();
        let (mut packets, mut bytes) = (0u32, 0u64);
        // SAFETY: `c` is live; the out-pointers are locals.
        let stats = unsafe {
            assert_eq!(zl_qdisc_stats(c, stats.as_mut_ptr()), ZlStatus::ZL_OK);
            assert_eq!(zl_qdisc_len(c, &mut packets, &mut bytes), ZlStatus::ZL_OK);
            stats.assume_init()
        };
        assert_eq!((packets, bytes), (rust.len_packets(), rust.len_bytes()));
        check_stats(kind, &stats, &rust, &seen, packets);
        println!("{kind:?}: {seen:?} queued {packets}");

        // Free: the packets still queued come back in the order `drain` gives them.
        let mut drained = Vec::new();
        rust.drain(|q| drained.push((q.item, ZlDiscardCause::ZL_DISCARD_FREE)));
        // SAFETY: `c` is live and freed once; `sink` is freed after it.
        unsafe {
            assert_eq!(zl_qdisc_free(c), ZlStatus::ZL_OK);
            let c_discards = Box::from_raw(sink);
            assert_eq!(*c_discards, drained, "{kind}: handed back at free");
        }
        assert_eq!(drained.len(), packets as usize);
    }
}

/// The C counters against the Rust discipline's and the test's own counts, and what each kind
/// must have gone through for the comparison to mean something.
fn check_stats(
    kind: &str,
    s: &ZlQdiscStats,
    rust: &QueueDiscipline<u64>,
    seen: &Seen,
    queued: u32,
) {
    let v = &seen.verdicts;
    let enq = v[Verdict::Enqueue as usize] + v[Verdict::MarkCe as usize];
    assert_eq!(
        (
            s.enqueued,
            s.marked_on_enqueue,
            s.early_drops,
            s.forced_drops,
            s.tail_drops
        ),
        (
            enq,
            v[Verdict::MarkCe as usize],
            v[Verdict::EarlyDrop as usize],
            v[Verdict::ForcedDrop as usize],
            v[Verdict::TailDrop as usize]
        ),
        "{kind}"
    );
    assert_eq!(
        (
            s.dequeued,
            s.marked_on_dequeue,
            s.dequeue_drops,
            s.overflow_drops
        ),
        (
            seen.sent,
            seen.marked,
            seen.dequeue_drops,
            seen.overflow_drops
        ),
        "{kind}"
    );
    // Every handle taken is accounted for once.
    assert_eq!(
        s.enqueued,
        s.dequeued + s.dequeue_drops + s.overflow_drops + u64::from(queued),
        "{kind}"
    );
    assert!(seen.sent > 1000, "{kind}: {seen:?}");
    match rust {
        QueueDiscipline::Codel(d) => {
            assert_eq!(s.kind, ZlQdiscKind::ZL_QDISC_CODEL);
            let t = d.stats();
            assert_eq!(
                (s.codel.dropped, s.codel.ecn_marks, s.codel.maxpacket),
                (t.dropped, t.ecn_marks, t.maxpacket)
            );
            assert!(
                s.dequeue_drops > 0 && s.marked_on_dequeue > 0,
                "{kind}: {s:?}"
            );
        }
        QueueDiscipline::FqCodel(d) => {
            assert_eq!(s.kind, ZlQdiscKind::ZL_QDISC_FQ_CODEL);
            let t = d.stats();
            assert_eq!(
                (s.codel.dropped, s.codel.ecn_marks, s.codel.maxpacket),
                (t.codel.dropped, t.codel.ecn_marks, t.codel.maxpacket)
            );
            let (new_len, old_len) = d.list_lens();
            assert_eq!(
                s.fq_codel,
                ZlFqCodelStats {
                    new_flow_count: t.new_flow_count,
                    drop_overlimit: t.drop_overlimit,
                    new_flows_len: new_len,
                    old_flows_len: old_len,
                }
            );
            assert!(
                s.overflow_drops > 0 && s.dequeue_drops > 0 && s.marked_on_dequeue > 0,
                "{kind}: {s:?}"
            );
        }
        QueueDiscipline::DualPi2(d) => {
            assert_eq!(s.kind, ZlQdiscKind::ZL_QDISC_DUALPI2);
            let t = d.stats();
            let p = d.base_probability();
            let (l, cq) = d.queue_lens();
            assert_eq!(
                s.dualpi2,
                ZlDualPi2Stats {
                    l_packets: t.l_packets,
                    c_packets: t.c_packets,
                    step_marks: t.step_marks,
                    coupled_marks: t.coupled_marks,
                    classic_marks: t.classic_marks,
                    classic_drops: t.classic_drops,
                    l4s_drops: t.l4s_drops,
                    base_probability: p,
                    classic_probability: p * p,
                    l4s_probability: (2.0 * p).min(1.0),
                    l_queue_packets: l,
                    c_queue_packets: cq,
                }
            );
            assert!(
                s.dequeue_drops > 0 && s.marked_on_dequeue > 0 && s.tail_drops > 0,
                "{kind}: {s:?}"
            );
        }
        QueueDiscipline::Isolated(d) => {
            assert_eq!(s.kind, ZlQdiscKind::ZL_QDISC_ZL_RED_ISOLATION);
            let t = d.stats();
            let i = &s.isolation;
            assert_eq!(
                (
                    i.flagged,
                    i.penalized,
                    i.cleared,
                    i.released,
                    i.box_full,
                    i.over_share_drops,
                    i.penalty_sent,
                    i.penalized_now
                ),
                (
                    t.flagged,
                    t.penalized,
                    t.cleared,
                    t.released,
                    t.box_full,
                    t.over_share_drops,
                    t.penalty_sent,
                    d.penalized_count()
                )
            );
            assert_eq!(
                (i.fair_share_bps, i.class_rate_bps, i.flows_estimate),
                (d.fair_share_bps(), d.class_rate_bps(), d.flows_estimate())
            );
            let (normal, penalty) = d.aqm_stats();
            assert_eq!(
                (i.normal.enqueued, i.normal.early_drops, i.penalty.enqueued),
                (normal.enqueued, normal.early_drops, penalty.enqueued)
            );
            assert_eq!(
                (i.normal_queue_packets, i.penalty_queue_packets),
                d.queue_lens()
            );
            assert!(i.penalized > 0 && i.penalty_sent > 0, "{kind}: {i:?}");
            assert!(seen.holds > 0, "{kind}: {seen:?}");
            assert!(s.early_drops > 0, "{kind}: {s:?}");
        }
    }
}
