//! Congestion controls against the AQMs on real Linux stacks (root; `#[ignore]`d: about five
//! minutes). Three sender namespaces, two flows each, one congestion control per namespace
//! (reno, cubic, bbr via `TCP_CONGESTION`), each behind a 10 ms delay line, share an
//! 8 Mbit/s, 100-packet bottleneck for 60 s under tail drop, RED, SRED and ZL-RED.
//!
//! ```text
//! sudo -E cargo test --test netns_cc -- --ignored --nocapture
//! ```
//!
//! Prints a markdown table (docs/real-traffic.md holds one run's); with
//! `ZLR_REAL_TRAFFIC_OUT=<file>` also writes it there. Asserts only what holds run after run:
//! the link is kept full (receiver frame bytes within 5 % of the rate) and every flow moves.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use zl_testkit::lab::*;

/// The binary the lab runs (only the root package's tests know where Cargo built it).
const ZLROUTER: &str = env!("CARGO_BIN_EXE_zlrouter");

const RATE: u64 = 8_000_000;
const SECS: f64 = 60.0;
const CCS: [&str; 3] = ["reno", "cubic", "bbr"];
const PER_CC: usize = 2;

const AQMS: [(&str, &str); 4] = [
    ("tail drop", "{ kind = \"tail-drop\" }"),
    (
        "RED",
        "{ kind = \"red\", min_th = 5.0, max_th = 30.0, max_p = 0.1, w_q = 0.002 }",
    ),
    (
        "SRED",
        "{ kind = \"sred\", p_max = 0.15, zombie = { m = 1000, p_swap = 0.25 } }",
    ),
    (
        "ZL-RED",
        "{ kind = \"zl-red\", th_min = 5, p_max = 0.15, a = 10, zombie = { m = 1000, p_swap = 0.25 } }",
    ),
];

#[test]
#[ignore = "five minutes of real traffic; run by hand as root"]
fn congestion_controls_under_each_aqm() {
    const TEST: &str = "cc";
    if !is_root() {
        return skip(TEST, "needs root");
    }
    if let Some(cc) = CCS.iter().find(|c| !congestion_available(c)) {
        return skip(
            TEST,
            &format!("the kernel lacks the `{cc}` congestion control"),
        );
    }
    let mut table = String::from(
        "| AQM | reno Mbit/s | cubic Mbit/s | bbr Mbit/s | Jain (6 flows) | link Mbit/s | \
         retrans reno/cubic/bbr | srtt ms reno/cubic/bbr | router drops (early/forced/tail) |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    for (name, aqm) in AQMS {
        let qos = format!(
            "[qos]\nlink_rate_bps = {RATE}\nshaper = {{ rate_bps = {RATE}, overhead_bytes = 0, burst_bytes = 30_000 }}\n\
             classifier = {{ default_class = \"be\", standard = false }}\n\
             [[qos.classes]]\nname = \"be\"\nweight = 1\nmax_packets = 100\naqm = {aqm}\n"
        );
        let specs = [SenderSpec {
            ecn: false,
            delay_ms: 10.0,
        }; 3];
        let Some(mut lab) = Lab::or_skip(ZLROUTER, TEST, &specs) else {
            return;
        };
        let cfg = lab.router_config(&qos, "");
        lab.start(TEST, &cfg);
        let sink = tcp_sink(&lab, 7040, CCS.len() * PER_CC);
        let flows: Vec<_> = (0..CCS.len() * PER_CC)
            .map(|k| tcp_flow(&lab, k % CCS.len(), 7040, CCS[k % CCS.len()], SECS))
            .collect();
        std::thread::sleep(Duration::from_secs(10));
        let (b0, _) = lab.receiver_rx();
        let t0 = Instant::now();
        std::thread::sleep(Duration::from_secs_f64(SECS - 15.0));
        let (b1, _) = lab.receiver_rx();
        let link = (b1 - b0) as f64 * 8.0 / t0.elapsed().as_secs_f64();
        let sums: Vec<TcpSummary> = flows
            .into_iter()
            .map(|f| f.join().unwrap().expect("flow"))
            .collect();
        let _ = sink.join();
        let (status, out) = lab.stop_router();
        assert!(status.success(), "{status:?}\n{out}");
        let bytes: Vec<f64> = sums.iter().map(|s| s.bytes_acked as f64).collect();
        let per_cc = |c: usize| {
            let v: Vec<&TcpSummary> = sums.iter().skip(c).step_by(CCS.len()).collect();
            (
                v.iter().map(|s| s.bytes_acked as f64).sum::<f64>() * 8.0 / SECS / 1e6,
                v.iter().map(|s| s.total_retrans).sum::<u32>(),
                v.iter().map(|s| s.srtt_us as f64).sum::<f64>() / v.len() as f64 / 1e3,
            )
        };
        let c: Vec<_> = (0..CCS.len()).map(per_cc).collect();
        let early = stat(&out, "totals.drops.early").unwrap_or(0);
        let forced = stat(&out, "totals.drops.forced").unwrap_or(0);
        let tail = stat(&out, "totals.drops.tail").unwrap_or(0);
        writeln!(
            table,
            "| {name} | {:.2} | {:.2} | {:.2} | {:.3} | {:.3} | {}/{}/{} | {:.0}/{:.0}/{:.0} | {early}/{forced}/{tail} |",
            c[0].0,
            c[1].0,
            c[2].0,
            jain(&bytes),
            link / 1e6,
            c[0].1,
            c[1].1,
            c[2].1,
            c[0].2,
            c[1].2,
            c[2].2,
        )
        .unwrap();
        eprintln!("{name}: {sums:?}");
        let err = (link - RATE as f64).abs() / RATE as f64;
        assert!(err < 0.05, "{name}: link {link:.0} bit/s vs {RATE}");
        assert!(bytes.iter().all(|&b| b > 0.0), "{name}: a flow never moved");
    }
    eprintln!("{table}");
    if let Ok(path) = std::env::var("ZLR_REAL_TRAFFIC_OUT") {
        std::fs::write(path, &table).expect("write the table");
    }
}
