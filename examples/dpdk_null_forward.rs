//! DPDK forwarding rate on `net_null`: zlrouter's data plane (the full pipeline) and this
//! crate's port paths vs `dpdk-testpmd` in io-forward mode on the same devices, measured in
//! the same run, each on one forwarding core (the same core: testpmd's forwarding lcore and
//! this process's `-l`).
//!
//! Two `net_null` ports; traffic goes both ways, as testpmd's io mode forwards with two ports
//! on one core. Per round, in this order:
//! - testpmd io-forward (interactive: `start`, wait, `stop`; forwarded = the accumulated
//!   TX-packets over the time between the two commands);
//! - `forward_to`: mbufs handed from RX to TX without touching the data (testpmd's work);
//! - `Port` trait: each frame copied into a `zl_port::BufPool` buffer on receive and into a
//!   fresh mbuf on send, nothing else (the port's own cost);
//! - the data plane (`zl_dataplane::Dataplane::run_live`, what `zlrouter run` drives): router
//!   mode (parse, longest-prefix match, TTL decrement, MAC rewrite), the classifier, ZL-RED
//!   with ECN on a 1024-packet class, the scheduler, both directions;
//! - zero-copy (`zero_copy = true`: received mbufs lent to the data plane's buffers and
//!   transmitted as they are): the `Port` trait path, and the data plane in bridge mode, with
//!   the same copying data plane in bridge mode beside it. decided: not in router mode, because
//!   net_null hands out its mbufs again without writing them, so a frame rewritten in place
//!   (TTL decremented) comes back rewritten, and after 63 rounds the TTL runs out; bridge mode
//!   leaves frames as they are (but for ECN marks), so copying and zero-copy see the same
//!   frames.
//!
//! net_null hands out pool mbufs without writing them, so the ports' RX pools are prefilled
//! (`DpdkPort::prefill_rx_pool`) with 64-byte IPv4/UDP frames of 64 flows, routed to the other
//! port (testpmd does not look at the content, so its zeros cost it nothing).
//!
//! Usage: `cargo run --release --features dpdk-bench --example dpdk_null_forward --
//! [seconds per measurement, default 2] [rounds, default 2] [core, default 1]
//! [pipeline|bridge-zc|port|port-zc|mt]` (no root needed; no hugepages). Prints each round and
//! the median ratios; with one of the first four, only that path's rate (for a profiler).
//!
//! `mt`: the threaded router's scaling instead: four net_null ports of two queues
//! each (8 receive queues; p0 <-> p1 and p2 <-> p3 routed both ways, the pipeline's ZL-RED
//! class on each), run with 1, 2, 4, 8 receive workers and 1, 2, 4 transmit workers, every
//! worker free to run on every CPU the process may use (as `zlrouter run` places them); per
//! round the layouts in turn, each printed as a ratio to 1 x 1 in the same round.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use zl_core::Nanos;
use zl_dataplane::{build_with_ports, BoxedPort, BuildError, NoObserver, RouterConfig};
use zl_dpdk::{DpdkPort, DpdkPortConfig, Eal, EalConfig};
use zl_port::{Batch, BufPool, Port};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn measure(secs: f64, mut step: impl FnMut() -> u64) -> f64 {
    let t0 = Instant::now();
    let end = Duration::from_secs_f64(secs);
    let mut n = 0u64;
    let mut iter = 0u32;
    loop {
        n += step();
        iter = iter.wrapping_add(1);
        if iter % 1024 == 0 && t0.elapsed() >= end {
            break;
        }
    }
    n as f64 / t0.elapsed().as_secs_f64()
}

/// Waits until `text` (fed by `rx`) contains `needle`, for at most `limit`.
fn wait_for(rx: &mpsc::Receiver<Vec<u8>>, text: &mut String, needle: &str, limit: Duration) {
    let t0 = Instant::now();
    while !text.contains(needle) && t0.elapsed() < limit {
        if let Ok(chunk) = rx.recv_timeout(Duration::from_millis(50)) {
            text.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
}

/// testpmd io-forward on two net_null ports, its forwarding lcore on `core`: packets
/// forwarded per second between `start` and `stop`.
fn testpmd(secs: f64, core: u32) -> Res<f64> {
    let prefix = format!("zlr-tpmd-{}", std::process::id());
    let main_core = if core == 0 { 1 } else { 0 };
    let mut child = Command::new("dpdk-testpmd")
        .args([
            "--no-huge",
            "--no-pci",
            "-m",
            "512",
            "--file-prefix",
            &prefix,
        ])
        .args(["-l", &format!("{main_core},{core}"), "--main-lcore"])
        .arg(main_core.to_string())
        .args(["--vdev", "net_null0", "--vdev", "net_null1"])
        .args(["--log-level=*:warning", "--", "-i"])
        .args(["--total-num-mbufs=32768", "--forward-mode=io"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let mut stdin = child.stdin.take().ok_or("testpmd stdin")?;
    let mut stdout = child.stdout.take().ok_or("testpmd stdout")?;
    let (tx, rx) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = stdout.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    let mut text = String::new();
    wait_for(&rx, &mut text, "testpmd> ", Duration::from_secs(30));
    writeln!(stdin, "start")?;
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(secs));
    writeln!(stdin, "stop")?;
    let elapsed = t0.elapsed().as_secs_f64();
    wait_for(
        &rx,
        &mut text,
        "Accumulated forward statistics",
        Duration::from_secs(10),
    );
    wait_for(&rx, &mut text, "TX-total", Duration::from_secs(10));
    let _ = writeln!(stdin, "quit");
    drop(stdin);
    let _ = child.wait();
    let _ = reader.join();
    while let Ok(chunk) = rx.try_recv() {
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/{prefix}"));
    let acc = text
        .split("Accumulated forward statistics")
        .nth(1)
        .ok_or_else(|| format!("testpmd printed no totals:\n{text}"))?;
    let tx_packets: f64 = acc
        .split("TX-packets:")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|w| w.parse().ok())
        .ok_or_else(|| format!("no TX-packets in testpmd's totals:\n{acc}"))?;
    Ok(tx_packets / elapsed)
}

/// A 64-byte Ethernet + IPv4 + UDP frame of flow `flow` to `dst` (the last octet varies).
fn frame(flow: u8, dst: [u8; 3]) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0x0b, 0x01]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0x0b, 0x10]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[1] = 0b10; // ECT(0)
    ip[2..4].copy_from_slice(&50u16.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[10, 0, flow / 16, flow % 16]);
    ip[16..20].copy_from_slice(&[dst[0], dst[1], dst[2], flow]);
    let mut sum = 0u32;
    for w in ip.chunks(2) {
        sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    f[34..36].copy_from_slice(&(4000 + u16::from(flow)).to_be_bytes());
    f[36..38].copy_from_slice(&9u16.to_be_bytes());
    f[38..40].copy_from_slice(&30u16.to_be_bytes());
    f
}

const TO_P1: [u8; 3] = [198, 51, 100];
const TO_P0: [u8; 3] = [203, 0, 113];

const PIPELINE: &str = r#"
[run]
work_budget = 256

[[ports]]
name = "p0"
kind = "external"
mac = "02:00:00:00:0b:01"

[[ports]]
name = "p1"
kind = "external"
mac = "02:00:00:00:0b:02"

[[routes]]
prefix = "198.51.100.0/24"
port = "p1"
next_hop_mac = "02:00:00:00:0b:fe"

[[routes]]
prefix = "203.0.113.0/24"
port = "p0"
next_hop_mac = "02:00:00:00:0b:fd"

[qos]
link_rate_bps = 100_000_000_000
classifier = { default_class = "be", standard = false }

[[qos.classes]]
name = "be"
weight = 1
max_packets = 1024
aqm = { kind = "zl-red", ecn = true, th_min = 64, p_max = 0.02, a = 10, zombie = { m = 1000, p_swap = 0.25 } }
"#;

/// The data plane in `pipeline`: router mode (copying) or bridge mode, copying or zero-copy.
#[derive(Clone, Copy, Debug)]
enum Variant {
    Router,
    Bridge { zero_copy: bool },
}

/// `PIPELINE` in bridge mode: the routes replaced by one bridge pair.
fn bridge_config() -> String {
    let start = PIPELINE.find("[[routes]]").expect("routes in PIPELINE");
    let end = PIPELINE.find("[qos]").expect("qos in PIPELINE");
    format!(
        "{}[forwarding]\nmode = \"bridge\"\nbridge = [[\"p0\", \"p1\"]]\n\n{}",
        &PIPELINE[..start],
        &PIPELINE[end..]
    )
}

/// Opens net_null `n` with its RX pool holding frames of 64 flows to `dst`.
fn null_port(eal: &Eal, n: u16, dst: [u8; 3], zero_copy: bool) -> Res<DpdkPort> {
    let mut cfg = DpdkPortConfig::new(&format!("net_null{n}"));
    cfg.zero_copy = zero_copy;
    let mut port = DpdkPort::open(eal, &format!("p{n}"), n, &cfg)?;
    let frames: Vec<Vec<u8>> = (0..64).map(|f| frame(f, dst)).collect();
    let refs: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
    port.prefill_rx_pool(&refs);
    Ok(port)
}

/// The data plane on two prefilled net_null ports for `secs`: forwarded packets per second,
/// and the fate line's drops (none expected: the ports keep up with each other).
fn pipeline(eal: &'static Eal, secs: f64, variant: Variant) -> Res<Outcome> {
    let (cfg, zero_copy) = match variant {
        Variant::Router => (RouterConfig::from_toml(PIPELINE)?, false),
        Variant::Bridge { zero_copy } => (RouterConfig::from_toml(&bridge_config())?, zero_copy),
    };
    let mut supply = |i: usize,
                      _: &zl_dataplane::config::PortParams|
     -> Result<Option<BoxedPort>, BuildError> {
        let dst = if i == 0 { TO_P1 } else { TO_P0 };
        let port = null_port(eal, i as u16, dst, zero_copy).map_err(|e| BuildError::External {
            port: format!("p{i}"),
            detail: e.to_string(),
        })?;
        Ok(Some(Box::new(port)))
    };
    let mut dp = build_with_ports(&cfg, Path::new("."), &mut supply)?;
    for_seconds(secs, |stop, start| {
        let mut clock = || Nanos(start.elapsed().as_nanos() as u64);
        dp.run_live(stop, &mut clock, Nanos::from_millis(100), &mut NoObserver)?;
        Ok(*dp.totals())
    })
}

/// What one timed router run did.
struct Outcome {
    /// Forwarded packets per second.
    rate: f64,
    /// Packets forwarded in all (a profiler's divisor).
    forwarded: u64,
    /// Drops other than `shutdown`.
    dropped: u64,
}

/// Runs a router with `run` (given the stop flag, raised after `secs`, and the start of its
/// monotonic clock), which returns the router's totals.
fn for_seconds(
    secs: f64,
    run: impl FnOnce(&AtomicBool, Instant) -> Res<zl_dataplane::FateCounters>,
) -> Res<Outcome> {
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let timer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs_f64(secs));
            stop.store(true, Ordering::Relaxed);
        })
    };
    let start = Instant::now();
    let t = run(&stop, start)?;
    let elapsed = start.elapsed().as_secs_f64();
    timer.join().map_err(|_| "timer thread")?;
    Ok(Outcome {
        rate: t.forwarded as f64 / elapsed,
        forwarded: t.forwarded,
        dropped: t.dropped() - t.drops_of(zl_dataplane::DropCause::Shutdown),
    })
}

/// The port's own paths on two prefilled net_null ports: (`forward_to`, `Port` trait) packets
/// per second (`forward_to` measured only when `raw`; the `Port` trait with the ports'
/// `zero_copy`).
fn port_paths(eal: &Eal, secs: f64, raw: bool, zero_copy: bool) -> Res<(f64, f64)> {
    let mut p0 = null_port(eal, 0, TO_P1, zero_copy)?;
    let mut p1 = null_port(eal, 1, TO_P0, zero_copy)?;
    let raw = if raw {
        measure(secs, || {
            (p0.forward_to(&mut p1) + p1.forward_to(&mut p0)) as u64
        })
    } else {
        0.0
    };
    let mut pool = BufPool::new(1024, 2048);
    let mut batch = Batch::new();
    let copy = measure(secs, || {
        let mut n = 0;
        for forward in [true, false] {
            let (rx, tx) = if forward {
                (&mut p0, &mut p1)
            } else {
                (&mut p1, &mut p0)
            };
            let _ = rx.recv(Nanos(0), &mut pool, &mut batch);
            n += tx.send(Nanos(0), &mut batch, &mut pool).unwrap_or(0) as u64;
        }
        n
    });
    Ok((raw, copy))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

fn main() -> Res<()> {
    let mut args = std::env::args().skip(1);
    let secs: f64 = args.next().map_or(Ok(2.0), |s| s.parse())?;
    let rounds: usize = args.next().map_or(Ok(2), |s| s.parse())?;
    let core: u32 = args.next().map_or(Ok(1), |s| s.parse())?;
    let only = args.next();
    // Before the EAL pins this thread to `core`.
    let process_cpus = zl_dataplane::cpus::allowed_cpus()?;
    let prefix = format!("zlr-bench-{}", std::process::id());
    let mut eal_cfg = EalConfig::no_huge(&prefix);
    let l = eal_cfg
        .args
        .iter()
        .position(|a| a == "-l")
        .ok_or("-l in the defaults")?;
    eal_cfg.args[l + 1] = core.to_string();
    let eal = Eal::init(&eal_cfg)?;
    let result = match only.as_deref() {
        None => compare(eal, secs, rounds, core),
        // Only the data plane / the Port trait path, for a profiler.
        Some("pipeline") => pipeline(eal, secs, Variant::Router).map(|o| {
            println!(
                "pipeline {:.2} Mpps, forwarded {}, drops {}",
                o.rate / 1e6,
                o.forwarded,
                o.dropped
            );
        }),
        Some("bridge-zc") => pipeline(eal, secs, Variant::Bridge { zero_copy: true }).map(|o| {
            println!(
                "bridge zero-copy {:.2} Mpps, forwarded {}, drops {}",
                o.rate / 1e6,
                o.forwarded,
                o.dropped
            );
        }),
        Some("port") => port_paths(eal, secs, false, false).map(|(_, copy)| {
            println!("Port trait {:.2} Mpps", copy / 1e6);
        }),
        Some("port-zc") => port_paths(eal, secs, false, true).map(|(_, zc)| {
            println!("Port trait zero-copy {:.2} Mpps", zc / 1e6);
        }),
        Some("mt") => scaling(eal, secs, rounds, &process_cpus),
        Some(other) => {
            Err(format!("unknown mode {other:?} (pipeline, bridge-zc, port, port-zc, mt)").into())
        }
    };
    let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/{prefix}"));
    result
}

fn compare(eal: &'static Eal, secs: f64, rounds: usize, core: u32) -> Res<()> {
    println!(
        "net_null, 64-byte frames, 2 ports both ways, 1 forwarding core (cpu {core}), bursts of 32"
    );
    println!(
        "{:<6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "round", "testpmd", "forward_to", "Port", "Port zc", "pipeline", "bridge", "bridge zc"
    );
    let names = [
        "forward_to",
        "Port trait",
        "Port trait zero-copy",
        "pipeline (router)",
        "bridge (copying)",
        "bridge zero-copy",
    ];
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    let mut drops = 0;
    for round in 0..rounds {
        let reference = testpmd(secs, core)?;
        let (raw, copy) = port_paths(eal, secs, true, false)?;
        let (_, port_zc) = port_paths(eal, secs, false, true)?;
        let mut rates = vec![raw, copy, port_zc];
        for variant in [
            Variant::Router,
            Variant::Bridge { zero_copy: false },
            Variant::Bridge { zero_copy: true },
        ] {
            let run = pipeline(eal, secs, variant)?;
            drops += run.dropped;
            rates.push(run.rate);
        }
        print!("{:<6} {:>8.2} M", round, reference / 1e6);
        for r in &rates {
            print!(" {:>8.2} M", r / 1e6);
        }
        println!();
        for (v, r) in ratios.iter_mut().zip(&rates) {
            v.push(r / reference);
        }
    }
    for (name, v) in names.iter().zip(ratios) {
        let all: Vec<String> = v.iter().map(|r| format!("{r:.2}")).collect();
        println!(
            "median ratio {name:<22} / testpmd: {:.2}  (rounds: {})",
            median(v),
            all.join(", ")
        );
    }
    println!("target: pipeline / testpmd >= 0.5");
    println!("data plane drops other than shutdown, all rounds: {drops}");
    Ok(())
}

/// `PIPELINE` on four DPDK net_null ports of two queues each, p0 <-> p1 and p2 <-> p3 routed,
/// with `rx` receive and `tx` transmit workers.
fn scaling_config(rx: usize, tx: usize) -> String {
    // Only PIPELINE's QoS is kept; its ports and routes are replaced.
    let qos = PIPELINE.find("[qos]").expect("qos in PIPELINE");
    let mut c = format!("[run]\nwork_budget = 256\nrx_workers = {rx}\ntx_workers = {tx}\n\n");
    for n in 0..4 {
        c += &format!(
            "[[ports]]\nname = \"p{n}\"\nkind = \"dpdk\"\nmac = \"02:00:00:00:0b:0{n}\"\n\
             dpdk = {{ device = \"net_null{n}\", queues = 2 }}\n\n"
        );
    }
    for n in 0..4u8 {
        c += &format!(
            "[[routes]]\nprefix = \"{}.0/24\"\nport = \"p{n}\"\nnext_hop_mac = \"02:00:00:00:0b:f{n}\"\n\n",
            scaling_dst(n).map(|b| b.to_string()).join(".")
        );
    }
    c + &PIPELINE[qos..]
}

/// The /24 routed out of port `n` of the scaling run.
fn scaling_dst(n: u8) -> [u8; 3] {
    [198, 51, 100 + n]
}

/// The threaded router on the scaling config for `secs`: forwarded packets per second, and
/// the drops other than `shutdown` (ring-full when the transmit side falls behind).
fn threaded(
    eal: &'static Eal,
    secs: f64,
    (rx, tx): (usize, usize),
    cpus: &[usize],
) -> Res<Outcome> {
    let cfg = RouterConfig::from_toml(&scaling_config(rx, tx))?;
    let mut supply =
        |i: usize, p: &zl_dataplane::config::PortParams| -> Result<Option<BoxedPort>, BuildError> {
            let external = |e: &dyn std::fmt::Display| BuildError::External {
                port: p.name.clone(),
                detail: e.to_string(),
            };
            let mut pc = DpdkPortConfig::new(&format!("net_null{i}"));
            pc.queues = 2;
            pc.mbufs = 4095;
            let mut port = DpdkPort::open(eal, &p.name, i as u16, &pc).map_err(|e| external(&e))?;
            // Port 2k sends to 2k + 1 and back.
            let dst = scaling_dst((i ^ 1) as u8);
            let frames: Vec<Vec<u8>> = (0..64).map(|f| frame(f, dst)).collect();
            let refs: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
            port.prefill_rx_pool(&refs);
            Ok(Some(Box::new(port)))
        };
    let mut mt = zl_dataplane::build_threaded(&cfg, Path::new("."), &mut supply, rx)?;
    mt.place_workers(zl_dataplane::cpus::WorkerCpus::Any(cpus.to_vec()));
    for_seconds(secs, |stop, start| {
        let clock = move || Nanos(start.elapsed().as_nanos() as u64);
        mt.run(
            &clock,
            stop,
            Nanos::ZERO,
            Nanos::from_millis(100),
            &mut NoObserver,
        )?;
        Ok(zl_dataplane::RouterView::totals(&mt))
    })
}

fn scaling(eal: &'static Eal, secs: f64, rounds: usize, cpus: &[usize]) -> Res<()> {
    let layouts = [
        (1, 1),
        (2, 1),
        (4, 1),
        (8, 1),
        (1, 2),
        (2, 2),
        (4, 2),
        (1, 4),
        (2, 4),
        (4, 4),
        (8, 4),
    ];
    println!(
        "net_null x 4 ports x 2 queues, 64-byte frames, ZL-RED, threaded router on CPUs {cpus:?}"
    );
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); layouts.len()];
    for round in 0..rounds {
        let mut base = 0.0;
        for (i, &layout) in layouts.iter().enumerate() {
            let Outcome {
                rate,
                dropped: drops,
                ..
            } = threaded(eal, secs, layout, cpus)?;
            if i == 0 {
                base = rate;
            }
            ratios[i].push(rate / base);
            println!(
                "round {round} rx {} tx {}: {:.2} Mpps forwarded ({:.2}x of 1 x 1), {drops} dropped",
                layout.0,
                layout.1,
                rate / 1e6,
                rate / base
            );
        }
    }
    for (&(rx, tx), v) in layouts.iter().zip(ratios) {
        let all: Vec<String> = v.iter().map(|r| format!("{r:.2}")).collect();
        println!(
            "median rx {rx} tx {tx}: {:.2}x of 1 x 1 (rounds: {})",
            median(v),
            all.join(", ")
        );
    }
    Ok(())
}
