//! A foreign data plane's loop embedding ZL-RED: the loop owns the clock, the random source
//! and the queue, and asks the policy once per arriving packet. Nothing here is zlrouter's
//! data plane; this is what another Rust data plane writes.
//!
//! The trace, the queue and the output are the C example's
//! (`crates/zl-aqm-capi/examples/c/zlred_trace.c`, through the C ABI), defined identically:
//! for the same seed and packet count both print the same bytes, which CI checks. See that
//! file for the trace.
//!
//! Run: `cargo run -p zl-aqm --example foreign_loop -- [seed] [packets]`

use rand::RngCore;
use zl_aqm::{Admission, Arrival, FlowId, Nanos, PacketMeta, QueueView, ZlRed, ZlRedParams};

const GAP_NS: u64 = 1000;
const SERVICE_NS: u64 = 1100;
const CAPACITY: u32 = 300;
const FLOWS: u64 = 300;
const HEAVY_PERCENT: u64 = 3;

/// The loop's own random source: SplitMix64 over one word of state, as the C side keeps it
/// (`zl_rng_next`); `next_u32` is the high half of a step.
struct SplitMix64(u64);

impl RngCore for SplitMix64 {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }
    fn fill_bytes(&mut self, dst: &mut [u8]) {
        for chunk in dst.chunks_mut(8) {
            let word = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }
}

fn main() {
    let mut args = std::env::args().skip(1);
    let seed: u64 = args
        .next()
        .map_or(1, |s| s.parse().expect("seed: an integer"));
    let packets: u64 = args
        .next()
        .map_or(200_000, |s| s.parse().expect("packets: an integer"));

    let cfg = ZlRedParams::default()
        .validate(CAPACITY)
        .expect("the paper's defaults are valid for B = 300");
    let mut aqm = Admission::new(ZlRed::new(cfg));

    let mut flows = vec![(0u64, 0u64); FLOWS as usize];
    let mut trace_rng = SplitMix64(seed);
    let mut aqm_rng = SplitMix64(seed ^ 0x6A09_E667_F3BC_C909);
    let (mut q, mut next_departure) = (0u32, 0u64);

    for k in 0..packets {
        let now = k * GAP_NS;
        while q > 0 && next_departure <= now {
            q -= 1;
            if q > 0 {
                next_departure += SERVICE_NS;
            }
        }
        let r = trace_rng.next_u64();
        let flow = if r % 100 < HEAVY_PERCENT {
            0
        } else {
            1 + (r >> 32) % (FLOWS - 1)
        };
        let queue = QueueView {
            len_packets: q,
            len_bytes: 0,
            capacity_packets: CAPACITY,
            capacity_bytes: u64::MAX,
            head_enqueued_at: None,
            idle_since: None,
        };
        let pkt = PacketMeta {
            len: 1000,
            flow: FlowId(flow.wrapping_mul(0x9E37_79B9_7F4A_7C15)),
            ..PacketMeta::default()
        };
        let verdict = aqm.admit(&Arrival::new(Nanos(now), &queue, &pkt), &mut aqm_rng);
        let counts = &mut flows[flow as usize];
        counts.0 += 1;
        if verdict.admits() {
            if q == 0 {
                next_departure = now + SERVICE_NS;
            }
            q += 1;
        } else {
            counts.1 += 1;
        }
    }

    println!("# zl-red seed={seed} packets={packets} flows={FLOWS} capacity={CAPACITY}");
    println!("flow arrivals drops drop_ppm");
    for (f, &(arrivals, drops)) in flows.iter().enumerate() {
        let ppm = (drops * 1_000_000).checked_div(arrivals).unwrap_or(0);
        println!("{f} {arrivals} {drops} {ppm}");
    }
    let s = aqm.stats();
    println!(
        "enqueued={} marked={} early_drops={} forced_drops={} tail_drops={}",
        s.enqueued, s.marked, s.early_drops, s.forced_drops, s.tail_drops
    );
    let estimate = aqm.policy().zombie_list().estimated_flows();
    if estimate < 1e15 {
        println!("estimated_flows_milli={}", (estimate * 1000.0) as u64);
    } else {
        println!("estimated_flows_milli=inf");
    }
}
