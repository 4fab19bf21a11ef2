//! A foreign data plane's egress port running zl-qos: the loop owns a virtual clock, its random
//! source and the packets (here plain indices into its own buffer table), and hands the QoS
//! engine one arrival or one transmit opportunity at a time. Time and randomness are passed
//! in, so this is the same code zlrouter and netsim run, here on a clock that jumps.
//!
//! Three classes on a 10 Mbit/s link: EF strictly first, AF1 and BE sharing the rest by WRR
//! 3:1, ZL-RED on BE. Offered: 4, 6 and 8 Mbit/s (1.8x the link). Printed: what each class
//! sent and dropped, by cause.
//!
//! Run: `cargo run -p zl-qos --example foreign_scheduler`

use rand::{RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use zl_aqm::PacketMeta;
use zl_core::{FlowId, Nanos};
use zl_qos::{Dequeue, QosEngine, QosParams};

const CONFIG: &str = r#"
link_rate_bps = 10_000_000
[scheduler]
mode = "wrr"
[shaper]
rate_bps = 10_000_000
overhead_bytes = 0
[classifier]
default_class = "be"
[[classes]]
name = "ef"
strict_rank = 0
max_packets = 50
[[classes]]
name = "af1"
weight = 3
max_packets = 100
aqm = { kind = "red", min_th = 20, max_th = 60 }
[[classes]]
name = "be"
weight = 1
max_packets = 300
aqm = { kind = "zl-red" }
"#;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let params: QosParams = toml::from_str(CONFIG)?;
    let mut qos: QosEngine<u32> = QosEngine::new(&params)?;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(2026);

    // Offered load per class (DSCP, bit/s) with 1000-byte packets; arrivals are Poisson.
    // DSCP 46 is EF, 10 is AF11 (the standard table); unmarked traffic goes to BE.
    let sources = [(Some(46u8), 4e6), (Some(10), 6e6), (None, 8e6)];
    let len = 1000u32;
    let mut next_arrival: Vec<f64> = vec![0.0; sources.len()];
    let mut sent = vec![0u64; qos.class_names().len()];
    let (mut now, end, mut next_tx) = (0.0f64, 2.0f64, 0.0f64);
    let mut buffer_index = 0u32;

    while now < end {
        // The next event on the loop's own clock: an arrival or the link being free.
        let (src, t_arrival) = next_arrival
            .iter()
            .enumerate()
            .fold((0, f64::MAX), |m, (i, &t)| if t < m.1 { (i, t) } else { m });
        if t_arrival <= next_tx {
            now = t_arrival;
            let (dscp, rate) = sources[src];
            let meta = PacketMeta {
                len,
                flow: FlowId(rng.next_u64() % 64 + 100 * src as u64),
                ..PacketMeta::default()
            };
            buffer_index += 1;
            let _ = qos.enqueue(
                Nanos::from_secs_f64(now),
                &mut rng,
                dscp,
                meta,
                buffer_index,
                |_| {},
            );
            let u = (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64;
            next_arrival[src] = now - (1.0 - u).ln() * f64::from(len * 8) / rate;
        } else {
            now = next_tx;
            match qos.dequeue(Nanos::from_secs_f64(now)) {
                Dequeue::Packet(d) => {
                    sent[d.class] += 1;
                    next_tx = now + f64::from(d.meta.len * 8) / 10e6;
                }
                Dequeue::Hold { until } => next_tx = until.as_secs_f64(),
                Dequeue::Empty => next_tx = t_arrival,
            }
        }
    }

    println!("class   sent  early  forced  tail   (2 s, 10 Mbit/s link, offered 4 + 6 + 8 Mbit/s)");
    for (i, name) in qos.class_names().iter().enumerate() {
        let s = qos.class_stats(i).map(|s| s.total()).unwrap_or_default();
        println!(
            "{name:<5} {:>6} {:>6} {:>7} {:>5}",
            sent[i], s.early_drops, s.forced_drops, s.tail_drops
        );
    }
    Ok(())
}
