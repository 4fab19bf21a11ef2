//! Raw AF_XDP forwarding rate between two veths vs the kernel's `ip_forward`, on the same
//! topology and offered load (needs root).
//!
//! ```text
//!  ns gen            ns rtr                         ns sink
//!  g0 10.0.1.2 <-> r0 10.0.1.1 | r1 10.0.2.1 <-> s0 10.0.2.2
//! ```
//! A generator in `gen` sends 64-byte UDP/IPv4 frames to 10.0.2.99 (r0's MAC) from an
//! AF_XDP TX socket on g0. `rtr` forwards them to `s0`, either
//! - kernel: `net.ipv4.ip_forward=1` and a permanent neighbour for 10.0.2.99 (s0's MAC), or
//! - afxdp: an [`AfXdpPort`] on r0 (generic or native XDP, copy mode) and a transmit-only one
//!   on r1; a
//!   busy-polling thread rewrites the Ethernet addresses, decrements the TTL (RFC 1624
//!   incremental checksum) and transmits, waking the kernel once per 32 frames or when
//!   its input goes idle.
//!
//! The forwarded rate is s0's `rx_packets` over the run. `sink` drops the frames in its IP
//! layer (10.0.2.99 is not its address and it does not forward).
//!
//! Usage: `cargo run --release -p zl-afxdp --example afxdp_forward -- [seconds] [pps]
//! [generic|native]` (pps 0 = as fast as the generator can).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use zl_afxdp::netns::{is_root, Netns};
use zl_afxdp::{AfXdpConfig, AfXdpPort, XdpMode};

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

fn mac(ns: &Netns, dev: &str) -> Res<[u8; 6]> {
    let text = ns.exec(&["cat", &format!("/sys/class/net/{dev}/address")])?;
    let mut out = [0u8; 6];
    for (o, part) in out.iter_mut().zip(text.trim().split(':')) {
        *o = u8::from_str_radix(part, 16)?;
    }
    Ok(out)
}

/// Pins the calling thread to one CPU (the generator to CPU 0, the forwarder to CPU 1), so the
/// two busy loops do not share a core with each other.
fn pin_to_cpu(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes inside it;
    // sched_setaffinity(0, ..) applies to the calling thread only.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

fn ipv4_checksum(header: &[u8]) -> u16 {
    let mut sum: u32 = header
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// 64-byte Ethernet + IPv4 + UDP frame (without FCS).
fn udp_frame(dst: [u8; 6], src: [u8; 6]) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[0..6].copy_from_slice(&dst);
    f[6..12].copy_from_slice(&src);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&46u16.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[10, 0, 1, 2]);
    ip[16..20].copy_from_slice(&[10, 0, 2, 99]);
    let c = ipv4_checksum(ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f[34..36].copy_from_slice(&4000u16.to_be_bytes());
    f[36..38].copy_from_slice(&9u16.to_be_bytes());
    f[38..40].copy_from_slice(&26u16.to_be_bytes());
    f
}

/// TTL - 1 with the RFC 1624 incremental checksum update (HC' = ~(~HC + ~m + m')).
fn decrement_ttl(ip: &mut [u8]) -> bool {
    if ip[8] <= 1 {
        return false;
    }
    let old = u16::from_be_bytes([ip[8], ip[9]]);
    ip[8] -= 1;
    let new = u16::from_be_bytes([ip[8], ip[9]]);
    let hc = u16::from_be_bytes([ip[10], ip[11]]);
    let mut sum = u32::from(!hc) + u32::from(!old) + u32::from(new);
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    true
}

struct Topology {
    gen: Netns,
    rtr: Netns,
    sink: Netns,
}

fn topology() -> Res<Topology> {
    let t = Topology {
        gen: Netns::create("bgen")?,
        rtr: Netns::create("brtr")?,
        sink: Netns::create("bsnk")?,
    };
    t.rtr.ip(&[
        "link",
        "add",
        "r0",
        "type",
        "veth",
        "peer",
        "name",
        "g0",
        "netns",
        t.gen.name(),
    ])?;
    t.rtr.ip(&[
        "link",
        "add",
        "r1",
        "type",
        "veth",
        "peer",
        "name",
        "s0",
        "netns",
        t.sink.name(),
    ])?;
    for (ns, dev, addr) in [
        (&t.gen, "g0", "10.0.1.2/24"),
        (&t.rtr, "r0", "10.0.1.1/24"),
        (&t.rtr, "r1", "10.0.2.1/24"),
        (&t.sink, "s0", "10.0.2.2/24"),
    ] {
        ns.exec(&[
            "sysctl",
            "-qw",
            &format!("net.ipv6.conf.{dev}.disable_ipv6=1"),
        ])?;
        ns.ip(&["addr", "add", addr, "dev", dev])?;
        ns.ip(&["link", "set", dev, "up"])?;
    }
    let s0 = mac(&t.sink, "s0")?;
    let s0 = s0
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":");
    t.rtr.ip(&[
        "neigh",
        "add",
        "10.0.2.99",
        "lladdr",
        &s0,
        "dev",
        "r1",
        "nud",
        "permanent",
    ])?;
    Ok(t)
}

/// Sends frames from g0 for `secs` at `pps` (0: flat out); returns frames sent.
fn generate(t: &Topology, secs: f64, pps: u64, frame: Vec<u8>, start: Arc<Barrier>) -> Res<u64> {
    let r = t.gen.run_in(move || -> Res<u64> {
        let cfg = AfXdpConfig {
            attach_program: false,
            rx_ring_size: 64,
            tx_ring_size: 2048,
            ..AfXdpConfig::new("g0")
        };
        let mut port = AfXdpPort::open("gen", 0, &cfg)?;
        pin_to_cpu(0);
        start.wait();
        let t0 = Instant::now();
        let end = Duration::from_secs_f64(secs);
        let burst = [frame.as_slice(); 32];
        let mut sent = 0u64;
        loop {
            let el = t0.elapsed();
            if el >= end {
                break;
            }
            if pps > 0 && sent as f64 >= el.as_secs_f64() * pps as f64 {
                continue;
            }
            sent += port.send_burst(burst.iter().copied())? as u64;
        }
        Ok(sent)
    })?;
    r
}

fn counters(t: &Topology) -> Res<(u64, u64)> {
    Ok((
        t.gen.link_stat("g0", "tx_packets")?,
        t.sink.link_stat("s0", "rx_packets")?,
    ))
}

struct RunResult {
    offered: u64,
    forwarded: u64,
    secs: f64,
}

fn run_kernel(t: &Topology, secs: f64, pps: u64, frame: &[u8]) -> Res<RunResult> {
    t.rtr.exec(&["sysctl", "-qw", "net.ipv4.ip_forward=1"])?;
    let (g0, s0) = counters(t)?;
    generate(t, secs, pps, frame.to_vec(), Arc::new(Barrier::new(1)))?;
    let (g1, s1) = counters(t)?;
    t.rtr.exec(&["sysctl", "-qw", "net.ipv4.ip_forward=0"])?;
    Ok(RunResult {
        offered: g1 - g0,
        forwarded: s1 - s0,
        secs,
    })
}

fn run_afxdp(
    t: &Topology,
    secs: f64,
    pps: u64,
    mode: XdpMode,
    frame: &[u8],
) -> Res<(RunResult, u64)> {
    let r1_mac = mac(&t.rtr, "r1")?;
    let s0_mac = mac(&t.sink, "s0")?;
    let stop = Arc::new(AtomicBool::new(false));
    let fwd = Arc::new(AtomicU64::new(0));
    let start = Arc::new(Barrier::new(2));
    let (g0, s0) = counters(t)?;
    let result = std::thread::scope(|scope| -> Res<RunResult> {
        let (stop2, fwd2, start2) = (stop.clone(), fwd.clone(), start.clone());
        let rtr = &t.rtr;
        let forwarder = scope.spawn(move || {
            rtr.run_in(move || -> Res<()> {
                let rx_cfg = AfXdpConfig {
                    xdp_mode: mode,
                    ..AfXdpConfig::new("r0")
                };
                let tx_cfg = AfXdpConfig {
                    attach_program: false,
                    ..AfXdpConfig::new("r1")
                };
                let mut rx = AfXdpPort::open("r0", 0, &rx_cfg)?;
                let mut tx = AfXdpPort::open("r1", 1, &tx_cfg)?;
                pin_to_cpu(1);
                start2.wait();
                let mut scratch = [0u8; 2048];
                let mut n = 0u64;
                let mut pending = 0usize;
                while !stop2.load(Ordering::Relaxed) {
                    let tx_sock = &mut tx.sockets_mut()[0];
                    let got = rx.recv_with(32, |f| {
                        if f.len() < 34 || f.len() > scratch.len() {
                            return;
                        }
                        let buf = &mut scratch[..f.len()];
                        buf.copy_from_slice(f);
                        buf[0..6].copy_from_slice(&s0_mac);
                        buf[6..12].copy_from_slice(&r1_mac);
                        if decrement_ttl(&mut buf[14..34]) && tx_sock.stage_tx(buf) {
                            n += 1;
                            pending += 1;
                        }
                    })?;
                    // One wakeup (a syscall) per full burst, or when the input went idle.
                    if pending >= 32 || (got == 0 && pending > 0) {
                        tx_sock.flush_tx()?;
                        pending = 0;
                    }
                }
                fwd2.store(n, Ordering::Relaxed);
                eprintln!("r0 socket (kernel counters): {:?}", rx.kernel_stats()?);
                eprintln!("r1 socket: {:?}", tx.sockets()[0].counters());
                Ok(())
            })
        });
        generate(t, secs, pps, frame.to_vec(), start)?;
        // Let the forwarder drain what is already in its rings.
        let t_drain = Instant::now();
        while t_drain.elapsed() < Duration::from_millis(200) {
            std::hint::spin_loop();
        }
        stop.store(true, Ordering::Relaxed);
        forwarder.join().map_err(|_| "forwarder panicked")???;
        let (g1, s1) = counters(t)?;
        Ok(RunResult {
            offered: g1 - g0,
            forwarded: s1 - s0,
            secs,
        })
    })?;
    Ok((result, fwd.load(Ordering::Relaxed)))
}

fn main() -> Res<()> {
    if !is_root() {
        eprintln!("afxdp_forward needs root (namespaces, veth, XDP)");
        std::process::exit(2);
    }
    let args: Vec<String> = std::env::args().collect();
    let secs: f64 = args.get(1).map_or(Ok(3.0), |s| s.parse())?;
    let pps: u64 = args.get(2).map_or(Ok(0), |s| s.parse())?;
    let mode = match args.get(3).map(String::as_str) {
        None | Some("generic") => XdpMode::Generic,
        Some("native") => XdpMode::Native,
        Some(other) => return Err(format!("mode {other:?}: expected generic or native").into()),
    };
    let t = topology()?;
    let frame = udp_frame(mac(&t.rtr, "r0")?, mac(&t.gen, "g0")?);
    let k = run_kernel(&t, secs, pps, &frame)?;
    let (x, staged) = run_afxdp(&t, secs, pps, mode, &frame)?;
    let rate = |r: &RunResult, n: u64| n as f64 / r.secs / 1e6;
    println!(
        "offered load: {}",
        if pps == 0 {
            "flat out".to_string()
        } else {
            format!("{pps} pps")
        }
    );
    println!(
        "{:<14} {:>12} {:>12} {:>10}",
        "path", "offered Mpps", "fwd Mpps", "delivered"
    );
    for (name, r) in [("kernel fwd", &k), ("AF_XDP fwd", &x)] {
        println!(
            "{:<14} {:>12.3} {:>12.3} {:>9.1}%",
            name,
            rate(r, r.offered),
            rate(r, r.forwarded),
            100.0 * r.forwarded as f64 / r.offered.max(1) as f64
        );
    }
    println!("AF_XDP frames staged by the forwarder: {staged}");
    println!(
        "ratio AF_XDP / kernel (forwarded rate): {:.2}",
        rate(&x, x.forwarded) / rate(&k, k.forwarded).max(1e-9)
    );
    Ok(())
}
