//! The ZL-RED paper's RTT case (its §4.3, docs/algorithms/zl-red.md) on real Linux TCP Reno
//! stacks through `zlrouter` (root; prints `SKIPPED ...` and passes otherwise): Reno connections
//! behind a short and a long delay line share one bottleneck, under tail drop and under ZL-RED
//! at the same rate and buffer; ZL-RED's per-flow Jain index must be the higher one.
//!
//! Why the setup is what it is (docs/real-traffic.md has the measurements):
//! - `flow_key = "5-tuple"`: the paper gives every connection its own sender host, so its
//!   (src, dst) flow id is one connection. Here a group's connections share one sender
//!   namespace, and with the default `src-dst` key the Zombie List sees two flows, not 16:
//!   `P(t)` ~ 0.5, SRED's `(1/(256 P))^2` leaves `p2 ~ 1e-5` and ZL-RED never acts.
//! - 45 Mbit/s (the paper's bottleneck) with one-way delays of 20 ms (the paper's `tau_rx`) and
//!   80 ms: SRED's (2) makes the total drop rate about `p_max (N/256)^2`, which Reno's
//!   `p ~ 1.5 (N / W_total)^2` matches only when the path holds a few hundred packets
//!   (`W_total` = rate x RTT + queue). At 8 Mbit/s and 10/40 ms (a smaller lab) it holds
//!   ~60, the queue sits at `B` and nearly every drop is a tail drop for either AQM.
//! - `B` = 200 packets, about the mean path's bandwidth-delay product (45 Mbit/s x 50 ms): the
//!   queue's delay (at most 53 ms) does not swamp the propagation delays, so tail drop shows
//!   Reno's RTT bias (with a 45 ms queue on 10/40 ms paths it was nearly fair).
//! - ZL-RED with the paper's constants (`p_max` 0.15, `th_min` 5, `M` 1000, `p_swap` 0.25)
//!   and `a` = 10 (figure 7 varies `a`; larger is fairer).

use std::io::Read;
use std::net::{IpAddr, TcpListener};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use zl_testkit::lab::*;

/// The binary the lab runs (only the root package's tests know where Cargo built it).
const ZLROUTER: &str = env!("CARGO_BIN_EXE_zlrouter");

/// One experiment: two sender namespaces (the short- and the long-delay group), `per_group`
/// Reno connections each, through the router's delay lines to one receiver.
#[derive(Clone, Copy, Debug)]
struct Setup {
    per_group: usize,
    /// One-way delay the router's delay line adds to each group's data, ms.
    delays: [f64; 2],
    /// Bottleneck rate, bit/s of frame bytes.
    rate: u64,
    /// Bottleneck buffer `B`, packets.
    buffer: u32,
    secs: f64,
    /// `[parse] flow_key`: what the Zombie List calls a flow.
    flow_key: &'static str,
}

/// What one run measured.
#[derive(Debug)]
struct Run {
    /// Per connection (connection `k` is in group `k % 2`): bytes acked over its life.
    bytes: Vec<f64>,
    /// Per connection received after the first quarter of the run (past slow start and the
    /// Zombie List's warm-up), with its group.
    steady: Vec<(usize, f64)>,
    retrans: Vec<u32>,
    srtt_ms: Vec<f64>,
    early: u64,
    forced: u64,
    tail: u64,
    /// Mean sampled bottleneck queue, packets, and the share of samples with an empty queue.
    q_mean: f64,
    q_empty: f64,
    /// How many queue-length samples the router's metrics gave (0: none could be read).
    q_samples: f64,
    /// 1/P(t) of the port's own estimator at the end.
    flows_est: f64,
    /// Frame bytes at the receiver from 1/4 of the run to its end, Mbit/s.
    link_mbps: f64,
    secs: f64,
    /// Frames the router's ports could not take in (no buffer, RX ring full, too long for a
    /// buffer: a GSO super-frame would show here).
    rx_drops: u64,
}

const METRICS: &str = "127.0.0.1:9464";

impl Run {
    fn jain(&self) -> f64 {
        jain(&self.bytes)
    }
    /// Two runs of one setup as one: their connections side by side (group parity kept, each
    /// run has an even number), counts summed, the queue and link figures averaged.
    fn pooled(mut self, o: Run) -> Run {
        let mean = |a: f64, b: f64| (a + b) / 2.0;
        self.bytes.extend(o.bytes);
        self.steady.extend(o.steady);
        self.retrans.extend(o.retrans);
        self.srtt_ms.extend(o.srtt_ms);
        Run {
            early: self.early + o.early,
            forced: self.forced + o.forced,
            tail: self.tail + o.tail,
            q_mean: mean(self.q_mean, o.q_mean),
            q_empty: mean(self.q_empty, o.q_empty),
            q_samples: self.q_samples + o.q_samples,
            flows_est: mean(self.flows_est, o.flows_est),
            link_mbps: mean(self.link_mbps, o.link_mbps),
            rx_drops: self.rx_drops + o.rx_drops,
            ..self
        }
    }
    /// Jain over the last three quarters of the run, and the short group's bytes there over
    /// the long group's.
    fn steady(&self) -> (f64, f64) {
        let b: Vec<f64> = self.steady.iter().map(|&(_, b)| b).collect();
        let g = |k: usize| -> f64 { self.steady.iter().filter(|x| x.0 == k).map(|x| x.1).sum() };
        (jain(&b), g(0) / g(1))
    }
    fn group<T: Copy + Into<f64>>(x: &[T], g: usize) -> f64 {
        x.iter().skip(g).step_by(2).map(|&v| v.into()).sum()
    }
    /// Short-delay group's bytes over the long-delay group's.
    fn bias(&self) -> f64 {
        Self::group(&self.bytes, 0) / Self::group(&self.bytes, 1)
    }
    /// Group `g`'s retransmitted segments per 100 full-sized segments delivered.
    fn loss_pct(&self, g: usize) -> f64 {
        100.0 * Self::group(&self.retrans, g) / (Self::group(&self.bytes, g) / 1448.0)
    }
    fn line(&self, name: &str) -> String {
        let n = self.bytes.len() as f64 / 2.0;
        format!(
            "{name:<9} J {:.3} short/long {:.2} | steady J {:.3} short/long {:.2} | Mbit/s per flow short {:.3} long {:.3} | \
             loss % short {:.2} long {:.2} | srtt ms short {:.0} long {:.0} | \
             drops early {} forced {} tail {} | q mean {:.1} empty {:.2} | 1/P {:.1} | link {:.3} | rx_drop {}",
            self.jain(),
            self.bias(),
            self.steady().0,
            self.steady().1,
            Self::group(&self.bytes, 0) * 8.0 / n / self.secs / 1e6,
            Self::group(&self.bytes, 1) * 8.0 / n / self.secs / 1e6,
            self.loss_pct(0),
            self.loss_pct(1),
            Self::group(&self.srtt_ms, 0) / n,
            Self::group(&self.srtt_ms, 1) / n,
            self.early,
            self.forced,
            self.tail,
            self.q_mean,
            self.q_empty,
            self.flows_est,
            self.link_mbps,
            self.rx_drops,
        )
    }
}

fn run_once(test: &str, s: &Setup, aqm: &str) -> Result<Run, String> {
    let specs: Vec<SenderSpec> = s
        .delays
        .iter()
        .map(|&d| SenderSpec {
            ecn: false,
            delay_ms: d,
        })
        .collect();
    let mut lab = Lab::new(ZLROUTER, test, &specs)
        .map_err(|e| format!("cannot build the namespaces: {e}"))?;
    let qos = format!(
        "[qos]\nlink_rate_bps = {r}\nshaper = {{ rate_bps = {r}, overhead_bytes = 0, burst_bytes = 30_000 }}\n\
         classifier = {{ default_class = \"be\", standard = false }}\n\
         [[qos.classes]]\nname = \"be\"\nweight = 1\nmax_packets = {b}\naqm = {aqm}\n",
        r = s.rate,
        b = s.buffer
    );
    let extra = format!(
        "[parse]\nflow_key = \"{}\"\n\n[metrics]\nlisten = \"{METRICS}\"\nflow_estimate = true\n",
        s.flow_key
    );
    let cfg = lab.router_config(&qos, &extra);
    // A router that does not start is a failure, not a skip: only the namespaces (above) are
    // the environment.
    lab.start(test, &cfg);
    let n = 2 * s.per_group;
    let sink = counting_sink(&lab, 7030, n);
    let flows: Vec<_> = (0..n)
        .map(|k| tcp_flow(&lab, k % 2, 7030, "reno", s.secs))
        .collect();
    std::thread::sleep(Duration::from_secs_f64(s.secs / 4.0));
    let (b0, _) = lab.receiver_rx();
    let at_quarter = sink.bytes();
    let t0 = Instant::now();
    let sums: Vec<TcpSummary> = flows
        .into_iter()
        .map(|f| f.join().unwrap().expect("flow"))
        .collect();
    let (b1, _) = lab.receiver_rx();
    let at_end = sink.bytes();
    let link_mbps = (b1 - b0) as f64 * 8.0 / t0.elapsed().as_secs_f64() / 1e6;
    let text = scrape_metrics(&lab, METRICS).unwrap_or_default();
    let (status, out) = lab.stop_router();
    assert!(status.success(), "{status:?}\n{out}");
    let q = "zlrouter_class_queue_length_packets";
    let rx = "{port=\"rx\",class=\"be\"";
    let count = metric(&text, &format!("{q}_count{rx}")).unwrap_or(0.0);
    let empty = metric(&text, &format!("{q}_bucket{rx},le=\"0\"")).unwrap_or(0.0);
    Ok(Run {
        bytes: sums.iter().map(|x| x.bytes_acked as f64).collect(),
        steady: at_end
            .iter()
            .enumerate()
            .map(|(i, &(g, b1))| (g, (b1 - at_quarter.get(i).map_or(0, |x| x.1)) as f64))
            .collect(),
        retrans: sums.iter().map(|x| x.total_retrans).collect(),
        srtt_ms: sums.iter().map(|x| x.srtt_us as f64 / 1e3).collect(),
        early: stat(&out, "totals.drops.early").unwrap_or(0),
        forced: stat(&out, "totals.drops.forced").unwrap_or(0),
        tail: stat(&out, "totals.drops.tail").unwrap_or(0),
        q_mean: metric(&text, &format!("{q}_sum{rx}")).unwrap_or(0.0) / count.max(1.0),
        q_empty: empty / count.max(1.0),
        q_samples: count,
        flows_est: metric(&text, "zlrouter_zombie_estimated_flows{port=\"rx\"").unwrap_or(0.0),
        link_mbps,
        secs: s.secs,
        rx_drops: rx_drops(&out),
    })
}

/// One tail-drop run and one ZL-RED run on the paper's setup whose links were both full. The
/// experiment needs the shaper to be the bottleneck, which two things can spoil:
/// - an AQM that idles the link (a fairness won that way is no win): its queue is then empty
///   for a share of the samples, which must stay below [`QUEUE_EMPTY_MAX`];
/// - a router starved of CPU by other load, which measures the machine (at a load average of
///   15 on two cores the link carried 24..27 of the 45 Mbit/s and srtt reached 1.2 s): the
///   link must carry at least [`LINK_KEPT_UP`] of the rate.
///
/// A pair that fails either is run once more, and if it fails again the test fails saying
/// which.
fn full_pair(test: &str) -> Result<(Run, Run), String> {
    let kept_up = |r: &Run| r.link_mbps * 1e6 >= LINK_KEPT_UP * PAPER.rate as f64;
    // No samples (the metrics could not be read) proves nothing: such a run does not count.
    let busy = |r: &Run| r.q_samples > 0.0 && r.q_empty < QUEUE_EMPTY_MAX;
    for attempt in 0..2 {
        let td = run_once(test, &PAPER, TAIL_DROP)?;
        let zl = run_once(test, &PAPER, ZL_RED)?;
        eprintln!("{}\n{}", td.line("tail drop"), zl.line("zl-red"));
        if kept_up(&td) && kept_up(&zl) && busy(&td) && busy(&zl) {
            return Ok((td, zl));
        }
        let mut why = Vec::new();
        if !(kept_up(&td) && kept_up(&zl)) {
            why.push(format!(
                "the router did not keep up: the link carried tail drop {:.1}, ZL-RED {:.1} of \
                 {} Mbit/s, and must carry {LINK_KEPT_UP} of it",
                td.link_mbps,
                zl.link_mbps,
                PAPER.rate / 1_000_000
            ));
        }
        if !(busy(&td) && busy(&zl)) {
            why.push(format!(
                "an AQM idled the link: the queue was empty in {:.2} of {} samples (tail drop) \
                 and {:.2} of {} (ZL-RED), and may be in less than {QUEUE_EMPTY_MAX}",
                td.q_empty, td.q_samples, zl.q_empty, zl.q_samples
            ));
        }
        let msg = format!(
            "the link was not full ({}; load average {})",
            why.join("; "),
            load_average()
        );
        // Neither AQM may win fairness by idling the link (and the router must keep up).
        assert!(attempt == 0, "{msg}");
        eprintln!("{msg}: once more");
    }
    unreachable!("the second attempt returns or fails")
}

/// A TCP sink in the receiver namespace whose per-connection byte counts can be read while
/// the flows run; each connection is tagged with its sender's group (0: sender 0).
struct CountingSink {
    conns: Connections,
}

/// (group, bytes received so far) per accepted connection.
type Connections = Arc<Mutex<Vec<(usize, Arc<AtomicU64>)>>>;

impl CountingSink {
    /// (group, bytes so far) per connection, in accept order.
    fn bytes(&self) -> Vec<(usize, u64)> {
        let c = self.conns.lock().unwrap_or_else(|p| p.into_inner());
        c.iter()
            .map(|(g, b)| (*g, b.load(Ordering::Relaxed)))
            .collect()
    }
}

fn counting_sink(lab: &Lab, port: u16, flows: usize) -> CountingSink {
    let conns: Connections = Arc::default();
    let list = Arc::clone(&conns);
    let (ready_tx, ready_rx) = mpsc::channel();
    let first: IpAddr = sender_ip(0).parse().expect("sender 0's address");
    // Detached: the accept loop and readers end when the flows close (or with the process).
    let _ = lab.rcv.spawn_in(move || {
        let l = TcpListener::bind((RECEIVER_IP, port)).expect("bind the sink");
        let _ = ready_tx.send(());
        for _ in 0..flows {
            let Ok((mut s, peer)) = l.accept() else {
                return;
            };
            let n = Arc::new(AtomicU64::new(0));
            let group = usize::from(peer.ip() != first);
            list.lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((group, Arc::clone(&n)));
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 65536];
                while let Ok(k @ 1..) = s.read(&mut buf) {
                    n.fetch_add(k as u64, Ordering::Relaxed);
                }
            });
        }
    });
    // Err only if the sink thread died (bind failed): the flows then fail to connect.
    let _ = ready_rx.recv();
    CountingSink { conns }
}

/// Every port's receive drops (no buffer, ring full, too long) in the final statistics.
fn rx_drops(out: &str) -> u64 {
    ["rx_no_buffer", "rx_ring_full", "rx_too_long"]
        .iter()
        .map(|k| stat(out, &format!("ports[*].{k}")).unwrap_or(0))
        .sum()
}

/// `/proc/loadavg`'s first three fields, for messages.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Repeats tail drop and ZL-RED on one setup and prints each run (a measurement; knobs from
/// `ZLR_RTT_*` environment variables).
#[test]
#[ignore = "minutes of real traffic; run by hand as root"]
fn rtt_sweep() {
    const TEST: &str = "rtt-sweep";
    if !is_root() {
        return skip(TEST, "needs root");
    }
    let key: String = env_or("ZLR_RTT_KEY", "5-tuple".to_owned());
    let s = Setup {
        per_group: env_or("ZLR_RTT_N", 8),
        delays: [env_or("ZLR_RTT_D0", 10.0), env_or("ZLR_RTT_D1", 40.0)],
        rate: env_or("ZLR_RTT_RATE", 8_000_000),
        buffer: env_or("ZLR_RTT_B", 30),
        secs: env_or("ZLR_RTT_SECS", 20.0),
        flow_key: Box::leak(key.into_boxed_str()),
    };
    let a: f64 = env_or("ZLR_RTT_A", 10.0);
    let th_min: f64 = env_or("ZLR_RTT_TH", 5.0);
    let p_max: f64 = env_or("ZLR_RTT_PMAX", 0.15);
    let runs: usize = env_or("ZLR_RTT_RUNS", 1);
    let zl = format!(
        "{{ kind = \"zl-red\", th_min = {th_min}, p_max = {p_max}, a = {a}, zombie = {{ m = 1000, p_swap = 0.25 }} }}"
    );
    eprintln!("{s:?} a {a} th_min {th_min} p_max {p_max}");
    let sred =
        format!("{{ kind = \"sred\", p_max = {p_max}, zombie = {{ m = 1000, p_swap = 0.25 }} }}");
    let mut aqms = vec![
        ("tail drop", "{ kind = \"tail-drop\" }"),
        ("zl-red", zl.as_str()),
    ];
    if env_or("ZLR_RTT_SRED", false) {
        aqms.push(("sred", sred.as_str()));
    }
    for r in 0..runs {
        for &(name, aqm) in &aqms {
            match run_once(TEST, &s, aqm) {
                Ok(run) => eprintln!("run {r} {}", run.line(name)),
                Err(e) => return skip(TEST, &e),
            }
        }
    }
}

/// The paper's §4.3 experiment at the lab's scale (see the file's head).
const PAPER: Setup = Setup {
    per_group: 8,
    delays: [20.0, 80.0],
    rate: 45_000_000,
    buffer: 200,
    secs: 20.0,
    flow_key: "5-tuple",
};

/// ZL-RED's unfairness `1 - J` must be below this share of tail drop's. A fixed gap in `J`
/// does not fit both a loaded and a quiet machine: under load tail drop's index was 0.66..0.84
/// and the gap +0.139..+0.294, but on a quiet machine tail drop reaches 0.83..0.92 and the gap
/// shrinks to +0.063..+0.147 (J is capped at 1) while ZL-RED still removes most of the
/// unfairness. Measured for single pairs: 0.10..0.21 quiet (8 pairs), 0.11..0.30 under load
/// (20 pairs); docs/real-traffic.md.
const UNFAIRNESS_SHARE: f64 = 0.5;

/// Pairs (a tail-drop run and a ZL-RED run) pooled into one judgement: tail drop's fairness
/// varies from run to run (whole-run J 0.83..0.92 on the quiet machine), two pairs halve that
/// variance.
const PAIRS: usize = 2;

/// The share of the rate the link must carry for a run to count: below it the router was
/// starved of CPU. Measured: 0.95 and above under a load average of up to 8 until November
/// 2026; then 0.81..0.99 in two CI runs at a load average of about 2 (the queue never empty,
/// so the router, not an AQM, left the link idle), with every fairness check still holding by
/// a wide margin; 24..27 of 45 Mbit/s (0.53..0.60, srtt 1.2 s) at a load average of 15.
const LINK_KEPT_UP: f64 = 0.8;

/// The share of queue-length samples (taken every 8 polls) that may find the queue empty: an
/// AQM that empties the queue idles the link. Measured: 0.00 in every run of both AQMs.
const QUEUE_EMPTY_MAX: f64 = 0.05;

const TAIL_DROP: &str = "{ kind = \"tail-drop\" }";
const ZL_RED: &str = "{ kind = \"zl-red\", th_min = 5, p_max = 0.15, a = 10, \
                      zombie = { m = 1000, p_swap = 0.25 } }";

/// Reno flows behind 20 ms and 80 ms delay lines, `PAIRS` runs under each AQM pooled: ZL-RED's
/// per-flow unfairness (`1 - J`) is below `UNFAIRNESS_SHARE` of tail drop's, and it gets there
/// by dropping early, which narrows the short-delay (faster) group's lead.
#[test]
fn reno_with_unequal_delays_is_fairer_under_zl_red_than_tail_drop() {
    const TEST: &str = "rtt";
    if !is_root() {
        return skip(TEST, "needs root");
    }
    let mut pairs = Vec::new();
    for _ in 0..PAIRS {
        match full_pair(TEST) {
            Ok(p) => pairs.push(p),
            Err(e) => return skip(TEST, &e),
        }
    }
    let (td, zl) = pairs
        .into_iter()
        .reduce(|(td, zl), (td2, zl2)| (td.pooled(td2), zl.pooled(zl2)))
        .expect("PAIRS > 0");
    eprintln!("pooled:\n{}\n{}", td.line("tail drop"), zl.line("zl-red"));
    // ZL-RED removes at least half of tail drop's unfairness, over the whole runs ...
    let share = |zl: f64, td: f64| (1.0 - zl) / (1.0 - td).max(1e-9);
    assert!(
        share(zl.jain(), td.jain()) < UNFAIRNESS_SHARE,
        "ZL-RED J {:.3} vs tail drop J {:.3}: unfairness 1 - J is {:.2} of tail drop's, not below {UNFAIRNESS_SHARE}",
        zl.jain(),
        td.jain(),
        share(zl.jain(), td.jain())
    );
    // ... stays the fairer one once slow start and the Zombie List's warm-up are over (where
    // tail drop is fairer too: 0.86..0.96, ZL-RED 0.98..0.99 quiet) ...
    let (steady_td, steady_zl) = (td.steady().0, zl.steady().0);
    assert!(
        steady_zl > steady_td,
        "over the last three quarters: ZL-RED J {steady_zl:.3} not above tail drop J {steady_td:.3}"
    );
    // ... and narrows the short-delay group's lead over the long-delay group.
    assert!(
        zl.bias() < td.bias(),
        "short/long goodput: ZL-RED {:.2}, tail drop {:.2}",
        zl.bias(),
        td.bias()
    );
    // How: a good part of ZL-RED's drops are its own early drops (at least 46 % in every
    // measured run; the rest are tail drops when the router is descheduled). Per-group loss
    // rates (retransmits) are printed, not asserted: under load those tail drops fall on
    // either group, and the long-delay group's rate came out lower under ZL-RED in all of the
    // quiet and the earlier loaded pairs but higher in 2 of 3 pooled runs at a load of 4..6.
    let early_share = zl.early as f64 / (zl.early + zl.tail).max(1) as f64;
    assert!(
        early_share > 0.25,
        "ZL-RED dropped early {} tail {}",
        zl.early,
        zl.tail
    );
}
