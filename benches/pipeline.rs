//! The full data-plane pipeline on the in-memory port: rx burst (a copy into a pool buffer, as
//! a copy-mode NIC port) -> parse -> LPM route, TTL decrement with checksum update, MAC
//! rewrite -> DSCP classify -> one Zombie List observation (the port's flow estimate, shared
//! with ZL-RED) -> ZL-RED admission -> per-class queue -> WRR (with EF strict priority) ->
//! 10 Gbit/s shaper -> tx burst to a counting port. 64-byte frames from 256 flows, offered 5 %
//! above the shaper's rate so the queue sits in ZL-RED's drop region.
//!
//! Target: >= 15 Mpps per core (<= 67 ns per packet, 10GbE line rate for 64-byte frames).
//! Results and the command: docs/performance/dataplane.md.
//!
//! Two measurements of the same loop: wall time (criterion's default) and the thread's own
//! CPU time (`/proc/thread-self/schedstat`, nanoseconds on the CPU). On a shared, loaded
//! machine the wall time includes the time other processes hold the core; the CPU time does
//! not, so it is the per-core cost the target is about. The CPU clock advances at scheduler
//! ticks, so both groups use flat sampling (every sample spans many ticks).
//!
//! Fixed-poll mode, for instruction counts and decision checks: with `ZL_PIPELINE_POLLS=N`
//! set, the variant named by `ZL_PIPELINE_VARIANT` (`group/name`, default
//! `pipeline_cpu/zlred_wrr_shaper_64B_burst32`) is built, warmed as below, then polled exactly
//! N times in `measured_polls` (no criterion timing; every other variant is skipped), and its
//! counts printed. Two builds that decide alike print the same counts; under callgrind
//! `--toggle-collect='pipeline::measured_polls*'` counts exactly those N polls
//! (docs/performance/dataplane.md).

use std::hint::black_box;
use std::sync::atomic::{AtomicBool, Ordering};

use criterion::measurement::{Measurement, ValueFormatter};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use zl_core::Nanos;
use zl_dataplane::route::{NextHop, Prefix, RouteTable};
use zl_dataplane::{build_with_ports, BoxedPort, RouterConfig};
use zl_port::{MemoryPort, BATCH_CAPACITY};
use zl_wire::MacAddr;

const CONFIG: &str = r#"
[run]
work_budget = 32
seed = 1

# As configs/default.toml: the egress port's Zombie List estimates its active flows; ZL-RED
# decides on the same list (one observation per packet).
[metrics]
flow_estimate = true

[[ports]]
name = "rx"
kind = "external"
mac = "02:00:00:00:00:01"

[[ports]]
name = "tx"
kind = "sink"
mac = "02:00:00:00:00:02"

[[routes]]
prefix = "0.0.0.0/0"
port = "tx"
next_hop_mac = "02:00:00:00:00:fe"

[[routes]]
prefix = "10.0.0.0/8"
port = "rx"
next_hop_mac = "02:00:00:00:00:fd"

[[routes]]
prefix = "198.18.0.0/15"
port = "tx"
next_hop_mac = "02:00:00:00:00:fe"

[qos]
# A bucket of two bursts: the loop polls once per burst, so the shaper must be able to
# release a whole burst's worth of tokens at each poll.
shaper = { rate_bps = 10_000_000_000, overhead_bytes = 20, burst_bytes = 5376 }
scheduler = { mode = "wrr" }

[[qos.classes]]
name = "ef"
strict_rank = 0
max_packets = 64

[[qos.classes]]
name = "af1"
weight = 1
max_packets = 512

[[qos.classes]]
name = "be"
weight = 4
max_packets = 1024
aqm = { kind = "zl-red", a = 10 }
"#;

/// A 64-byte IPv4/UDP frame (60 bytes plus the FCS a NIC strips: 60 here would undercount;
/// the benchmark uses 64 bytes of frame as queued and shaped) from flow `i`.
fn frame(i: u32) -> Vec<u8> {
    frame_to(i, [198, 18, 0, 1])
}

/// [`frame`] to destination `dst`.
fn frame_to(i: u32, dst: [u8; 4]) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 0x10]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    // One flow in 16 is AF11, one in 32 EF, the rest best effort.
    ip[1] = match i % 32 {
        0 => 46 << 2,
        1 | 17 => 10 << 2,
        _ => 0,
    };
    ip[2..4].copy_from_slice(&50u16.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[172, 16, (i >> 8) as u8, i as u8]);
    ip[16..20].copy_from_slice(&dst);
    let c = zl_wire::checksum::checksum(ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f[34..36].copy_from_slice(&(1024 + i as u16).to_be_bytes());
    f[36..38].copy_from_slice(&9u16.to_be_bytes());
    f[38..40].copy_from_slice(&30u16.to_be_bytes());
    f
}

/// Nanoseconds this thread has run on a CPU (first field of `/proc/thread-self/schedstat`).
fn thread_cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Criterion measurement: the benchmark thread's CPU time.
struct ThreadCpuTime;

/// Formats CPU nanoseconds like wall-time nanoseconds.
struct CpuNanos;

impl ValueFormatter for CpuNanos {
    fn scale_values(&self, _typical: f64, _values: &mut [f64]) -> &'static str {
        "ns (cpu)"
    }
    fn scale_throughputs(
        &self,
        _typical: f64,
        throughput: &Throughput,
        values: &mut [f64],
    ) -> &'static str {
        let per_iter = match *throughput {
            Throughput::Elements(n) => n as f64,
            Throughput::Bytes(n) | Throughput::BytesDecimal(n) => n as f64,
            Throughput::Bits(n) => n as f64,
        };
        for v in values {
            *v = per_iter * 1e3 / *v;
        }
        "M/s (cpu)"
    }
    fn scale_for_machines(&self, _values: &mut [f64]) -> &'static str {
        "ns"
    }
}

impl Measurement for ThreadCpuTime {
    type Intermediate = u64;
    type Value = u64;
    fn start(&self) -> u64 {
        thread_cpu_ns()
    }
    fn end(&self, start: u64) -> u64 {
        thread_cpu_ns().saturating_sub(start)
    }
    fn add(&self, a: &u64, b: &u64) -> u64 {
        a + b
    }
    fn zero(&self) -> u64 {
        0
    }
    fn to_f64(&self, v: &u64) -> f64 {
        *v as f64
    }
    fn formatter(&self) -> &dyn ValueFormatter {
        &CpuNanos
    }
}

fn pipeline_wall(c: &mut Criterion) {
    let mut g = c.benchmark_group("pipeline_wall");
    bench_variant(&mut g, "zlred_wrr_shaper_64B_burst32", CONFIG);
    g.finish();
}

/// The full pipeline and, on the CPU clock only, six variants that show where the budget
/// goes: tail drop instead of ZL-RED, the IPv4 header checksum left to the NIC, no flow
/// estimate (ZL-RED on a list of its own that sees only best-effort packets), no named
/// top flows (`metrics.top_flows = 0`), and two disciplines in best effort (ZL-RED with
/// isolation, FQ-CoDel).
fn pipeline_cpu(c: &mut Criterion<ThreadCpuTime>) {
    let mut g = c.benchmark_group("pipeline_cpu");
    bench_variant(&mut g, "zlred_wrr_shaper_64B_burst32", CONFIG);
    let tail_drop = CONFIG.replace("aqm = { kind = \"zl-red\", a = 10 }", "");
    bench_variant(&mut g, "taildrop_wrr_shaper_64B_burst32", &tail_drop);
    let offload = CONFIG.replace("[run]", "[parse]\nverify_ipv4_checksum = false\n\n[run]");
    bench_variant(&mut g, "zlred_no_checksum_verify_64B_burst32", &offload);
    let no_estimate = CONFIG.replace("flow_estimate = true", "flow_estimate = false");
    bench_variant(&mut g, "zlred_no_flow_estimate_64B_burst32", &no_estimate);
    // The named top flows (crate::flows) off: what tracking them costs per packet.
    let no_top = CONFIG.replace(
        "flow_estimate = true",
        "flow_estimate = true\ntop_flows = 0",
    );
    bench_variant(&mut g, "zlred_no_top_flows_64B_burst32", &no_top);
    // Best effort held by a discipline: ZL-RED with flow isolation (256 flows at line rate,
    // so the box fills and penalizes) and FQ-CoDel.
    let isolation = CONFIG.replace(
        "aqm = { kind = \"zl-red\", a = 10 }",
        "aqm = { kind = \"zl-red\", a = 10, isolation = {} }",
    );
    bench_variant(&mut g, "zlred_isolation_64B_burst32", &isolation);
    let fq_codel = CONFIG.replace(
        "aqm = { kind = \"zl-red\", a = 10 }",
        "aqm = { kind = \"fq-codel\" }",
    );
    bench_variant(&mut g, "fq_codel_wrr_shaper_64B_burst32", &fq_codel);
    // The default config with its receive stages taking 1, 8 or 16 packets at a time
    // (`Dataplane::set_stage_width`) rather than the whole burst of 32: 1 is the reference
    // path, every packet through all the stages before the next.
    for width in [1, 8, 16] {
        let templates: Vec<Vec<u8>> = (0..256).map(frame).collect();
        let name = format!("zlred_wrr_shaper_64B_burst32_stages{width}");
        bench_frames(&mut g, &name, CONFIG, templates, width, |_| {});
    }
    g.finish();
}

fn bench_variant<M: Measurement>(
    g: &mut criterion::BenchmarkGroup<'_, M>,
    name: &str,
    config: &str,
) {
    let templates: Vec<Vec<u8>> = (0..256).map(frame).collect();
    bench_frames(g, name, config, templates, BATCH_CAPACITY, |_| {});
}

/// The routing table's cost in the pipeline: the same 4096 flows, each to its own
/// destination, through a 10-route table and through a 1 M-route one (`zl_lpm::synth`, the
/// public BGP table's prefix-length distribution; every destination inside one of its
/// prefixes, all routed to the egress port), in the same run.
fn pipeline_routes(c: &mut Criterion<ThreadCpuTime>) {
    let mut g = c.benchmark_group("pipeline_routes_cpu");
    if fixed_polls().is_some() && !fixed_variant().ends_with("_dsts") {
        return;
    }
    let table = zl_lpm::synth::v4_table(1_000_000, 7);
    let mut rng = zl_lpm::synth::Rng::new(11);
    let templates: Vec<Vec<u8>> = (0..4096)
        .map(|i| loop {
            let p = table[(rng.next_u64() % table.len() as u64) as usize];
            let dst = zl_lpm::synth::v4_inside(p, &mut rng).to_be_bytes();
            // Not into the config's own routes (10.0.0.0/8 leads back to the receive port).
            if dst[0] != 10 && dst[..2] != [198, 18] && dst[..2] != [198, 19] {
                break frame_to(i, dst);
            }
        })
        .collect();
    let tx = NextHop::new(1, MacAddr([2, 0, 0, 0, 0, 0xfe]));
    let ten = CONFIG.to_string()
        + &(0..7)
            .map(|i| {
                format!(
                    "\n[[routes]]\nprefix = \"100.{i}.0.0/16\"\nport = \"tx\"\nnext_hop_mac = \"02:00:00:00:00:fe\"\n"
                )
            })
            .collect::<String>();
    bench_frames(
        &mut g,
        "10_routes_4096_dsts",
        &ten,
        templates.clone(),
        BATCH_CAPACITY,
        |_| {},
    );
    let (name, width) = ("1M_routes_4096_dsts", BATCH_CAPACITY);
    bench_frames(&mut g, name, CONFIG, templates, width, |routes| {
        for &(a, len) in &table {
            let p = Prefix {
                addr: std::net::Ipv4Addr::from(a).into(),
                len,
            };
            routes.insert(p, tx).expect("the synthetic table fits");
        }
    });
    g.finish();
}

/// `ZL_PIPELINE_POLLS`: the fixed-poll mode's measured polls (module doc), when set.
fn fixed_polls() -> Option<u64> {
    let v = std::env::var("ZL_PIPELINE_POLLS").ok()?;
    Some(v.parse().expect("ZL_PIPELINE_POLLS: a number of polls"))
}

/// `ZL_PIPELINE_VARIANT`: the one variant the fixed-poll mode runs (by its name within the
/// group; the default config's, in both groups, runs once).
fn fixed_variant() -> String {
    std::env::var("ZL_PIPELINE_VARIANT").unwrap_or_else(|_| "zlred_wrr_shaper_64B_burst32".into())
}

/// The fixed-poll mode has run its variant.
static FIXED_RAN: AtomicBool = AtomicBool::new(false);

/// The fixed-poll mode's measured loop (out of line: callgrind's toggle-collect names it).
#[inline(never)]
fn measured_polls(dp: &mut zl_dataplane::Dataplane, now: &mut Nanos, step: Nanos, polls: u64) {
    for _ in 0..polls {
        *now += step;
        black_box(dp.poll(*now).unwrap());
    }
}

fn bench_frames<M: Measurement>(
    g: &mut criterion::BenchmarkGroup<'_, M>,
    name: &str,
    config: &str,
    templates: Vec<Vec<u8>>,
    stage_width: usize,
    add_routes: impl FnOnce(&RouteTable),
) {
    let fixed = fixed_polls();
    if fixed.is_some() && (fixed_variant() != name || FIXED_RAN.swap(true, Ordering::Relaxed)) {
        return;
    }
    let cfg = RouterConfig::from_toml(config).expect("bench config");
    let mut dp = build_with_ports(&cfg, std::path::Path::new("."), &mut |i, _| {
        Ok((i == 0).then(|| {
            Box::new(MemoryPort::cycling("rx", 0, templates.clone(), u64::MAX)) as BoxedPort
        }))
    })
    .expect("bench data plane");
    add_routes(&dp.routes().expect("router mode"));
    dp.set_stage_width(stage_width);
    // One burst of 32 frames of 64 + 20 bytes on the wire at 10 Gbit/s is 2150.4 ns; offer
    // each burst 5 % sooner than that.
    let step = Nanos((BATCH_CAPACITY as u64 * (64 + 20) * 8 * 100) / 105 / 10);
    let mut now = Nanos::ZERO;
    // Warm the queues into their steady state before measuring.
    for _ in 0..100_000 {
        now += step;
        dp.poll(now).unwrap();
    }
    if let Some(polls) = fixed {
        measured_polls(&mut dp, &mut now, step, polls);
    } else {
        bench_timed(g, name, &mut dp, &mut now, step);
    }
    let t = dp.totals();
    eprintln!(
        "{name}: received {} forwarded {} dropped {} queued {} (drop ratio {:.3})",
        t.received,
        t.forwarded,
        t.dropped(),
        dp.queued(),
        t.drop_ratio()
    );
}

/// Criterion's timed loop over one poll per iteration.
fn bench_timed<M: Measurement>(
    g: &mut criterion::BenchmarkGroup<'_, M>,
    name: &str,
    dp: &mut zl_dataplane::Dataplane,
    now: &mut Nanos,
    step: Nanos,
) {
    // Equal, long samples: the kernel updates a running thread's CPU time at scheduler ticks
    // (a few ms), so every sample must span many ticks for the CPU clock to resolve it.
    g.sampling_mode(criterion::SamplingMode::Flat);
    g.throughput(Throughput::Elements(BATCH_CAPACITY as u64));
    g.bench_function(name, |b| {
        b.iter(|| {
            *now += step;
            black_box(dp.poll(*now).unwrap())
        })
    });
}

criterion_group!(wall, pipeline_wall);
criterion_group! {
    name = cpu;
    config = Criterion::default().with_measurement(ThreadCpuTime);
    targets = pipeline_cpu, pipeline_routes
}
criterion_main!(wall, cpu);
