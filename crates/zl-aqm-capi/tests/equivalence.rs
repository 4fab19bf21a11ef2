//! Every policy through the C ABI decides exactly as the same policy called from Rust: for
//! each of the eight kinds (built from TOML, as `zl_aqm_new_from_toml` builds them; PIE with
//! each of its delay estimators), 50 000 arrivals with every field random in its range (queue
//! lengths around each policy's thresholds, head-of-line and idle times, ECN codepoints,
//! colors, priorities, the extension header, the host hashes), and a departure told after
//! every fifth, give the same verdicts, the same counters and leave the same random state.
//! This is what proves the field mapping of `ZlArrival` onto `QueueView` / `PacketMeta`.

use std::ffi::CString;

use rand::RngCore;
use zl_aqm::{
    Admission, AqmParams, Arrival, BuildContext, Color, Ecn, FlowId, Nanos, PacketMeta, QueueView,
};
use zl_aqm_capi::*;

const KINDS: [&str; 9] = [
    "kind = \"tail-drop\"",
    "kind = \"red\"\nmin_th = 20\nmax_th = 60\nmax_p = 0.1\nw_q = 0.02\ngentle = true",
    "kind = \"sred\"\necn = true",
    "kind = \"zl-red\"\nth_min = 10\na = 2\necn = true",
    "kind = \"priority-ecn-red\"\nunit = \"packets\"\nmin_th = 20\nmax_th = 60\nw_q = 0.02",
    "kind = \"nonlinear-red\"\nq_min = 20\nq_max = 80\nw_q = 0.01\ngamma = 3\necn = true",
    "kind = \"sojourn\"\nw = 0.05",
    // PIE's gains raised so that 100 ms of arrivals (100 updates) reach every region.
    "kind = \"pie\"\necn = true\ntarget_ms = 0.5\nt_update_ms = 1\nmax_burst_ms = 5\nalpha = 1000",
    "kind = \"pie\"\nestimator = \"timestamp\"\nt_update_ms = 1\nmax_burst_ms = 0\nalpha = 200",
];

#[test]
fn every_kind_decides_as_in_rust() {
    let queue = ZlQueueParams {
        capacity_packets: 300,
        capacity_bytes: 300 * 1500,
        link_rate_bps: 100_000_000,
    };
    for kind in KINDS {
        let params: AqmParams = toml::from_str(kind).expect(kind);
        let mut rust = Admission::new(
            params
                .build(&BuildContext::new(
                    queue.link_rate_bps,
                    queue.capacity_packets,
                ))
                .expect(kind),
        );
        let text = CString::new(kind).unwrap();
        let mut c = std::ptr::null_mut();
        // SAFETY: valid pointers to locals; `c` is written by the constructor.
        let status =
            unsafe { zl_aqm_new_from_toml(text.as_ptr(), &queue, std::ptr::null(), &mut c) };
        assert_eq!(status, ZlStatus::ZL_OK, "{kind}");

        let (mut rng_c, mut rng_rust) = (17u64, 17u64);
        let mut gen = 99u64;
        let mut seen = [0u32; 6];
        for i in 0..50_000u64 {
            let r = zl_rng_next_safe(&mut gen);
            let now = 100_000_000 + i * 2_000;
            // A sawtooth 0..160 with jitter, so the averages cross every region; now and then
            // a full queue (tail drop).
            let queue_packets = if r % 50 == 0 {
                300
            } else {
                ((i / 40) % 160 + r % 10) as u32
            };
            let a = ZlArrival {
                flow_hash: (r >> 9) % 120,
                now_ns: now,
                queue_bytes: u64::from(queue_packets) * 1200 + (r >> 40) % 1000,
                head_enqueued_ns: if queue_packets == 0 {
                    ZL_NO_TIME
                } else {
                    now - (r >> 20) % 60_000_000
                },
                idle_since_ns: if queue_packets == 0 && r & 1 == 0 {
                    now - (r >> 30) % 5_000_000
                } else {
                    ZL_NO_TIME
                },
                queue_packets,
                packet_len: 64 + ((r >> 12) % 1437) as u32,
                src_host: (r >> 24) as u16,
                dst_host: (r >> 56) as u16,
                ecn: ((r >> 3) % 4) as u8,
                color: ((r >> 5) % 3) as u8,
                priority: ((r >> 7) % 16) as u8,
                weight: (r >> 48) as u8,
                has_cc_ext: ((r >> 2) % 2) as u8,
            };
            // SAFETY: `c` is live; the arrival and the state are locals.
            let v_c = unsafe { zl_aqm_arrive(c, &a, &mut rng_c) };
            let view = QueueView {
                len_packets: a.queue_packets,
                len_bytes: a.queue_bytes,
                capacity_packets: queue.capacity_packets,
                capacity_bytes: queue.capacity_bytes,
                head_enqueued_at: (a.head_enqueued_ns != ZL_NO_TIME)
                    .then_some(Nanos(a.head_enqueued_ns)),
                idle_since: (a.idle_since_ns != ZL_NO_TIME).then_some(Nanos(a.idle_since_ns)),
            };
            let pkt = PacketMeta {
                len: a.packet_len,
                flow: FlowId(a.flow_hash),
                ecn: Ecn::from_bits(a.ecn),
                has_cc_ext: a.has_cc_ext == 1,
                priority: a.priority,
                weight: a.weight,
                color: Color::ALL[usize::from(a.color)],
                src_host: a.src_host,
                dst_host: a.dst_host,
            };
            let v_rust = rust.admit(
                &Arrival::new(Nanos(now), &view, &pkt),
                &mut SplitMix64(&mut rng_rust),
            );
            assert_eq!(v_c as u32, v_rust as u32, "{kind}: arrival {i}: {a:?}");
            seen[v_c as usize] += 1;
            if i % 5 == 4 && a.queue_packets > 0 {
                // This packet is told as a departure, the queue one packet shorter behind it
                // (PIE's rate estimator; the other policies ignore departures).
                let mut d = a;
                d.queue_packets -= 1;
                d.queue_bytes = d.queue_bytes.saturating_sub(u64::from(d.packet_len));
                // SAFETY: `c` is live; `d` a local.
                assert_eq!(unsafe { zl_aqm_depart(c, &d) }, ZlStatus::ZL_OK);
                let after = QueueView {
                    len_packets: d.queue_packets,
                    len_bytes: d.queue_bytes,
                    ..view
                };
                rust.on_dequeue(Nanos(now), &after, &pkt);
            }
        }
        assert_eq!(rng_c, rng_rust, "{kind}: the same draws");
        let mut stats = ZlAqmStats::default();
        // SAFETY: `c` is live, `stats` a local.
        unsafe {
            assert_eq!(zl_aqm_stats(c, &mut stats), ZlStatus::ZL_OK);
            zl_aqm_free(c);
        }
        let s = rust.stats();
        assert_eq!(
            (
                stats.enqueued,
                stats.marked,
                stats.early_drops,
                stats.forced_drops,
                stats.tail_drops
            ),
            (
                s.enqueued,
                s.marked,
                s.early_drops,
                s.forced_drops,
                s.tail_drops
            ),
            "{kind}"
        );
        // Each kind reached several kinds of verdict (not a test that enqueues everything).
        let kinds_seen = seen.iter().filter(|&&n| n > 0).count();
        assert!(
            kinds_seen >= if kind.contains("tail-drop") { 2 } else { 3 },
            "{kind}: {seen:?}"
        );
        println!("{kind:?}: {seen:?}");
    }
}

/// `zl_rng_next` on a local, without `unsafe` at every call.
fn zl_rng_next_safe(state: &mut u64) -> u64 {
    SplitMix64(state).next_u64()
}
