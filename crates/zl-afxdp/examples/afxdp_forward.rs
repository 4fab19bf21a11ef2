//! AF_XDP forwarding between two veths vs the kernel's `ip_forward`, on the same topology and
//! offered load, in one run (needs root): the kernel, a raw AF_XDP forwarding loop, and (with
//! `--zlrouter PATH`) the `zlrouter` binary with its full pipeline.
//!
//! ```text
//!  ns gen            ns rtr                         ns sink
//!  g0 10.0.1.2 <-> r0 10.0.1.1 | r1 10.0.2.1 <-> s0 10.0.2.2
//! ```
//! A generator in `gen` sends 64-byte UDP/IPv4 frames to 10.0.2.99 (r0's MAC) from an
//! AF_XDP TX socket on g0, pinned to CPU 0 (the sender core), cycling over `--flows` UDP
//! source ports (default 1024 flows, so the Zombie List sees many flows, not one). `rtr` forwards them to `s0`:
//! - kernel: `net.ipv4.ip_forward=1` and a permanent neighbour for 10.0.2.99 (s0's MAC);
//! - raw AF_XDP: an [`AfXdpPort`] on r0 (generic or native XDP, copy mode) and a transmit-only
//!   one on r1; a busy-polling thread pinned to CPU 1 (the router core) rewrites the Ethernet
//!   addresses, decrements the TTL (RFC 1624 incremental checksum) and transmits, waking the
//!   kernel once per 32 frames or when its input goes idle (with `--busy-poll`, r0's socket
//!   uses preferred busy polling and the loop drives r0's NAPI with `recvfrom` when idle);
//! - zlrouter: `zlrouter run` (pinned to CPU 1 with `taskset`) with AF_XDP ports on r0 and
//!   r1 and the full pipeline: parse with checksum check, LPM route, TTL and MAC rewrite,
//!   Diffserv classifier, ZL-RED on the best-effort class, the Zombie List flow estimate,
//!   WRR and the shaper (at 100 Gbit/s, so it never holds a frame back); `--tail-drop` runs
//!   the best-effort class without ZL-RED and without the flow estimate, to see what they cost.
//!
//! Fairness (`--fair`, the default): the kernel forwards in the softirq of whichever CPU
//! received the frame, and veth receives in the sender's own `sendto`, so without care the
//! kernel forwards on the sender core for free while zlrouter must use another core. With
//! `--fair`, r0's RPS mask sends every received frame to CPU 1's backlog in every run, so the
//! kernel's forwarding, and the XDP program plus XSK copy of the AF_XDP runs, all happen on
//! the router core; the sender core only builds and sends frames. `--unfair` leaves RPS off
//! (the kernel then forwards on CPU 0, inside the generator's send).
//!
//! The forwarded rate is s0's `rx_packets` over the generation window (plus 200 ms of drain).
//! `sink` drops the frames in its IP layer (10.0.2.99 is not its address and it does not
//! forward).
//!
//! Usage: `cargo run --release -p zl-afxdp --example afxdp_forward -- [seconds] [pps]
//! [generic|native] [--fair|--unfair] [--rt] [--rx-ring N] [--no-raw] [--tail-drop]
//! [--flows N] [--busy-poll]
//! [--zlrouter target/release/zlrouter]` (pps 0 = as fast as the generator can; `--rx-ring`:
//! r0's RX and fill ring entries, default 2048).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::time::{Duration, Instant};

use zl_afxdp::{AfXdpConfig, AfXdpPort, XdpMode};
use zl_testkit::netns::{is_root, mac_text, pin_thread_to_cpu};
use zl_testkit::topology::{LineTopology as Topology, BENCH_ZL_RED};

type Res<T> = Result<T, Box<dyn std::error::Error + Send + Sync>>;

/// The sender core (generator) and the router core (forwarder, RPS target).
const SENDER_CPU: usize = 0;
const ROUTER_CPU: usize = 1;
/// SCHED_FIFO priority of the router's thread with `--rt`.
const RT_PRIORITY: i32 = 50;
/// ksoftirqd's priority relative to the router's thread (env ZLXF_SOFTIRQ_DELTA, default -1).
static SOFTIRQ_ABOVE_ROUTER: std::sync::LazyLock<i32> = std::sync::LazyLock::new(|| {
    std::env::var("ZLXF_SOFTIRQ_DELTA")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(-1)
});

/// Gives the calling thread SCHED_FIFO priority `prio` (the router core's busy loop must not
/// be time-sliced against other work on a shared machine; the kernel's softirq, which the
/// kernel path runs in, preempts ordinary threads the same way).
fn realtime(prio: i32) {
    let p = libc::sched_param {
        sched_priority: prio,
    };
    // SAFETY: a valid sched_param; pid 0 is the calling thread.
    let r = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) };
    if r != 0 {
        eprintln!(
            "SCHED_FIFO refused ({}); running time-sliced",
            std::io::Error::last_os_error()
        );
    }
}

/// With `--rt`, the router core's `ksoftirqd` runs SCHED_FIFO one step above the router's
/// thread for the whole benchmark, so softirq work deferred to it (the kernel's forwarding, the
/// XDP program and XSK copy) is neither starved by the router's busy loop nor time-sliced
/// against other work on a shared machine; restored to SCHED_OTHER on drop.
struct SoftirqRt {
    pid: Option<String>,
}

impl SoftirqRt {
    fn raise(on: bool) -> Res<Self> {
        if !on {
            return Ok(SoftirqRt { pid: None });
        }
        let out = Command::new("pgrep")
            .args(["-x", &format!("ksoftirqd/{ROUTER_CPU}")])
            .output()?;
        let pid = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if pid.is_empty() {
            return Err(format!("no ksoftirqd/{ROUTER_CPU} visible").into());
        }
        let prio = (RT_PRIORITY + *SOFTIRQ_ABOVE_ROUTER).to_string();
        let st = Command::new("chrt")
            .args(["-f", "-p", &prio, &pid])
            .status()?;
        if !st.success() {
            return Err(format!("chrt -f -p {prio} {pid} failed").into());
        }
        Ok(SoftirqRt { pid: Some(pid) })
    }
}

impl Drop for SoftirqRt {
    fn drop(&mut self) {
        if let Some(pid) = &self.pid {
            let _ = Command::new("chrt").args(["-o", "-p", "0", pid]).status();
        }
    }
}

/// Preferred busy polling on an XSK socket (Linux 5.11+): the socket's NAPI is polled from
/// the application's `recvfrom` instead of softirq (raw loop, `--busy-poll`).
fn prefer_busy_poll(fd: std::os::fd::RawFd) -> Res<()> {
    // asm-generic/socket.h (x86-64): SO_BUSY_POLL 46, SO_PREFER_BUSY_POLL 69,
    // SO_BUSY_POLL_BUDGET 70.
    for (opt, value) in [(69, 1i32), (46, 20), (70, 64)] {
        // SAFETY: `value` is a live c_int of the size passed; the kernel copies it.
        let r = unsafe {
            libc::setsockopt(
                fd,
                libc::SOL_SOCKET,
                opt,
                (&value as *const i32).cast(),
                std::mem::size_of::<i32>() as libc::socklen_t,
            )
        };
        if r != 0 {
            return Err(format!(
                "setsockopt({opt}) for busy polling: {}",
                std::io::Error::last_os_error()
            )
            .into());
        }
    }
    Ok(())
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

/// The line topology of `zl_afxdp::netns`, in `zlxf-*` namespaces; with `fair`, `r0`'s RPS
/// sends every frame to the router core.
fn topology(fair: bool) -> Res<Topology> {
    zl_testkit::netns::set_prefix("zlxf");
    Ok(Topology::create(
        ["bgen", "brtr", "bsnk"],
        fair.then_some(ROUTER_CPU),
    )?)
}

/// Sends frames from g0 for `secs` at `pps` (0: flat out); returns frames sent.
fn generate(
    t: &Topology,
    secs: f64,
    pps: u64,
    frames: Vec<Vec<u8>>,
    start: Arc<Barrier>,
    rt: bool,
) -> Res<u64> {
    let r = t.gen.run_in(move || -> Res<u64> {
        let cfg = AfXdpConfig {
            attach_program: false,
            rx_ring_size: 64,
            tx_ring_size: 2048,
            ..AfXdpConfig::new("g0")
        };
        let mut port = AfXdpPort::open("gen", 0, &cfg)?;
        pin_thread_to_cpu(SENDER_CPU);
        if rt {
            realtime(RT_PRIORITY);
        }
        start.wait();
        let t0 = Instant::now();
        let end = Duration::from_secs_f64(secs);
        let mut sent = 0u64;
        let mut next = 0;
        loop {
            let el = t0.elapsed();
            if el >= end {
                break;
            }
            if pps > 0 && sent as f64 >= el.as_secs_f64() * pps as f64 {
                continue;
            }
            let burst = (0..32).map(|i| frames[(next + i) % frames.len()].as_slice());
            let n = port.send_burst(burst)?;
            next = (next + n) % frames.len();
            sent += n as u64;
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

fn run_kernel(t: &Topology, secs: f64, pps: u64, frames: &[Vec<u8>], rt: bool) -> Res<RunResult> {
    t.rtr.exec(&["sysctl", "-qw", "net.ipv4.ip_forward=1"])?;
    let (g0, s0) = counters(t)?;
    generate(t, secs, pps, frames.to_vec(), Arc::new(Barrier::new(1)), rt)?;
    let (g1, s1) = counters(t)?;
    t.rtr.exec(&["sysctl", "-qw", "net.ipv4.ip_forward=0"])?;
    Ok(RunResult {
        offered: g1 - g0,
        forwarded: s1 - s0,
        secs,
    })
}

fn run_afxdp(t: &Topology, a: &Args, frames: &[Vec<u8>]) -> Res<(RunResult, u64)> {
    let (secs, pps, mode, rt, rx_ring, busy_poll) =
        (a.secs, a.pps, a.mode, a.rt, a.rx_ring, a.busy_poll);
    let r1_mac = t.rtr.mac("r1")?;
    let s0_mac = t.sink.mac("s0")?;
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
                    rx_ring_size: rx_ring,
                    ..AfXdpConfig::new("r0")
                };
                let tx_cfg = AfXdpConfig {
                    attach_program: false,
                    ..AfXdpConfig::new("r1")
                };
                let mut rx = AfXdpPort::open("r0", 0, &rx_cfg)?;
                let mut tx = AfXdpPort::open("r1", 1, &tx_cfg)?;
                let rx_fd = rx.rx_halves()[0].fd().ok_or("r0 has no socket")?;
                if busy_poll {
                    prefer_busy_poll(rx_fd)?;
                }
                pin_thread_to_cpu(ROUTER_CPU);
                if rt {
                    realtime(RT_PRIORITY);
                }
                start2.wait();
                let mut scratch = [0u8; 2048];
                let mut n = 0u64;
                let mut pending = 0usize;
                while !stop2.load(Ordering::Relaxed) {
                    let tx_sock = tx.tx_half().socket().ok_or("r1 has no socket")?;
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
                    if busy_poll && got == 0 {
                        // Drives r0's NAPI from this thread (napi_busy_loop).
                        // SAFETY: a zero-length non-blocking recvfrom with null buffers.
                        unsafe {
                            libc::recvfrom(
                                rx_fd,
                                std::ptr::null_mut(),
                                0,
                                libc::MSG_DONTWAIT,
                                std::ptr::null_mut(),
                                std::ptr::null_mut(),
                            );
                        }
                    }
                    // One wakeup (a syscall) per full burst, or when the input went idle.
                    if pending >= 32 || (got == 0 && pending > 0) {
                        tx_sock.flush_tx()?;
                        pending = 0;
                    }
                }
                fwd2.store(n, Ordering::Relaxed);
                eprintln!("r0 socket (kernel counters): {:?}", rx.kernel_stats()?);
                eprintln!("r1 socket: {:?}", tx.tx_half().socket_counters());
                Ok(())
            })
        });
        generate(t, secs, pps, frames.to_vec(), start, rt)?;
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

/// The router's config for the zlrouter run: AF_XDP on r0 (in) and r1 (out, transmit only),
/// the full pipeline on r1's egress with a shaper that never holds a frame back.
fn zlrouter_config(
    mode: XdpMode,
    rx_ring: u32,
    tail_drop: bool,
    r0: [u8; 6],
    r1: [u8; 6],
    s0: [u8; 6],
) -> String {
    let m = mac_text;
    let mode = match mode {
        XdpMode::Generic => "generic",
        XdpMode::Native => "native",
    };
    let ports = format!(
        r#"[[ports]]
name = "r0"
kind = "af-xdp"
mac = "{r0}"
af_xdp = {{ ifname = "r0", xdp_mode = "{mode}", rx_ring_size = {rx_ring} }}

[[ports]]
name = "r1"
kind = "af-xdp"
mac = "{r1}"
af_xdp = {{ ifname = "r1", attach_program = false }}
"#,
        r0 = m(r0),
        r1 = m(r1),
    );
    let aqm = if tail_drop { "" } else { BENCH_ZL_RED };
    Topology::router_config(&ports, s0, !tail_drop, aqm)
}

/// A number after `key` in the first line of `text` starting with `start`.
fn table_value(text: &str, start: &str, key: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(start))?;
    let at = line.find(key)? + key.len();
    line[at..].split_whitespace().next()?.parse().ok()
}

/// Runs `zlrouter` (pinned to the router core) in `rtr` while the generator offers the load.
/// Returns the run and the router's final table.
fn run_zlrouter(
    t: &Topology,
    bin: &Path,
    a: &Args,
    frames: &[Vec<u8>],
) -> Res<(RunResult, String)> {
    let (secs, pps, mode, rt, rx_ring) = (a.secs, a.pps, a.mode, a.rt, a.rx_ring);
    let dir = std::env::temp_dir().join(format!("zlxf-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let cfg = dir.join("router.toml");
    std::fs::write(
        &cfg,
        zlrouter_config(
            mode,
            rx_ring,
            a.tail_drop,
            t.rtr.mac("r0")?,
            t.rtr.mac("r1")?,
            t.sink.mac("s0")?,
        ),
    )?;
    let mut child = Command::new("ip")
        .args(["netns", "exec", t.rtr.name()])
        .arg(bin)
        .arg("run")
        .arg(&cfg)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    // `ip netns exec` execs in place: the child's pid is zlrouter's, and the pid is also the
    // tid of its main thread, the one that runs the poll loop.
    let pid = child.id() as libc::pid_t;
    let mut stderr = child.stderr.take().ok_or("no stderr")?;
    let (tx, rx) = mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        let mut all = Vec::new();
        let mut byte = [0u8; 1];
        let mut line = Vec::new();
        while let Ok(1) = stderr.read(&mut byte) {
            all.push(byte[0]);
            if byte[0] == b'\r' || byte[0] == b'\n' {
                let _ = tx.send(String::from_utf8_lossy(&line).into_owned());
                line.clear();
            } else {
                line.push(byte[0]);
            }
        }
        String::from_utf8_lossy(&all).into_owned()
    });
    // Up once it prints its first progress line.
    let ready = loop {
        match rx.recv_timeout(Duration::from_secs(20)) {
            Ok(l) if l.contains(" fwd ") => break true,
            Ok(_) => continue,
            Err(_) => break false,
        }
    };
    let stop = |child: &mut std::process::Child| {
        // SAFETY: kill(2) on the pid of our own child, not yet reaped.
        unsafe { libc::kill(pid, libc::SIGINT) };
        let _ = child.wait();
    };
    if !ready {
        stop(&mut child);
        let err = reader.join().unwrap_or_default();
        return Err(format!("zlrouter did not start: {err}").into());
    }
    // Only the poll loop's thread goes to the router core (and SCHED_FIFO with --rt); the
    // control and signal threads stay where the scheduler puts them.
    let (tid, cpu, prio) = (
        pid.to_string(),
        ROUTER_CPU.to_string(),
        RT_PRIORITY.to_string(),
    );
    let mut pin = vec![vec!["taskset", "-p", "-c", cpu.as_str(), tid.as_str()]];
    if rt {
        pin.push(vec!["chrt", "-f", "-p", prio.as_str(), tid.as_str()]);
    }
    for argv in pin {
        let st = Command::new(argv[0])
            .args(&argv[1..])
            .stdout(Stdio::null())
            .status()?;
        if !st.success() {
            stop(&mut child);
            return Err(format!("{argv:?} failed").into());
        }
    }
    let (g0, s0) = counters(t)?;
    generate(t, secs, pps, frames.to_vec(), Arc::new(Barrier::new(1)), rt)?;
    let t_drain = Instant::now();
    while t_drain.elapsed() < Duration::from_millis(200) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let (g1, s1) = counters(t)?;
    // SAFETY: as above.
    unsafe { libc::kill(pid, libc::SIGINT) };
    // Bounded: a router that does not stop within 20 s is killed (and the run reported).
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait()?.is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    if child.try_wait()?.is_none() {
        let _ = child.kill();
    }
    let mut out = String::new();
    if let Some(mut o) = child.stdout.take() {
        o.read_to_string(&mut out)?;
    }
    let status = child.wait()?;
    let _ = reader.join();
    let _ = std::fs::remove_dir_all(&dir);
    if !status.success() {
        return Err(format!("zlrouter exited with {status}:\n{out}").into());
    }
    Ok((
        RunResult {
            offered: g1 - g0,
            forwarded: s1 - s0,
            secs,
        },
        out,
    ))
}

struct Args {
    secs: f64,
    pps: u64,
    mode: XdpMode,
    fair: bool,
    zlrouter: Option<PathBuf>,
    raw: bool,
    rt: bool,
    rx_ring: u32,
    tail_drop: bool,
    flows: u32,
    busy_poll: bool,
}

fn args() -> Res<Args> {
    let mut a = Args {
        secs: 3.0,
        pps: 0,
        mode: XdpMode::Generic,
        fair: true,
        zlrouter: None,
        raw: true,
        rt: false,
        rx_ring: 2048,
        tail_drop: false,
        flows: 1024,
        busy_poll: false,
    };
    let mut positional = 0;
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--fair" => a.fair = true,
            "--unfair" => a.fair = false,
            "--no-raw" => a.raw = false,
            "--rt" => a.rt = true,
            "--tail-drop" => a.tail_drop = true,
            "--busy-poll" => a.busy_poll = true,
            "--flows" => a.flows = it.next().ok_or("--flows needs a count")?.parse()?,
            "--rx-ring" => a.rx_ring = it.next().ok_or("--rx-ring needs a size")?.parse()?,
            "--zlrouter" => a.zlrouter = Some(it.next().ok_or("--zlrouter needs a path")?.into()),
            "generic" => a.mode = XdpMode::Generic,
            "native" => a.mode = XdpMode::Native,
            other if positional == 0 => {
                a.secs = other.parse()?;
                positional += 1;
            }
            other if positional == 1 => {
                a.pps = other.parse()?;
                positional += 1;
            }
            other => return Err(format!("unexpected argument {other:?}").into()),
        }
    }
    if !(1..=60_000).contains(&a.flows) {
        return Err(format!("--flows {}: expected 1..=60000", a.flows).into());
    }
    Ok(a)
}

fn main() -> Res<()> {
    if !is_root() {
        eprintln!("afxdp_forward needs root (namespaces, veth, XDP)");
        std::process::exit(2);
    }
    let a = args()?;
    // The coordinating thread (and every helper it spawns, until they pin themselves) stays
    // off the router core: with --rt the router's busy loop would starve it there.
    pin_thread_to_cpu(SENDER_CPU);
    let (secs, pps, mode) = (a.secs, a.pps, a.mode);
    let t = topology(a.fair)?;
    if a.busy_poll {
        // The NAPI defers to the busy-polling socket instead of re-arming in softirq.
        t.rtr.exec(&[
            "sh",
            "-c",
            "echo 2 > /sys/class/net/r0/napi_defer_hard_irqs && \
             echo 200000 > /sys/class/net/r0/gro_flush_timeout",
        ])?;
    }
    let _softirq = SoftirqRt::raise(a.rt)?;
    let (r0, g0) = (t.rtr.mac("r0")?, t.gen.mac("g0")?);
    let frames: Vec<Vec<u8>> = (0..a.flows)
        .map(|i| Topology::udp_frame(r0, g0, 4000 + i as u16))
        .collect();
    eprintln!("kernel ip_forward run ({secs} s)");
    let k = run_kernel(&t, secs, pps, &frames, a.rt)?;
    let raw = if a.raw {
        eprintln!("raw AF_XDP run ({secs} s)");
        Some(run_afxdp(&t, &a, &frames)?)
    } else {
        None
    };
    let zl = match &a.zlrouter {
        Some(bin) => {
            eprintln!("zlrouter run ({secs} s): {}", bin.display());
            Some(run_zlrouter(&t, bin, &a, &frames)?)
        }
        None => None,
    };
    let rate = |r: &RunResult, n: u64| n as f64 / r.secs / 1e6;
    println!(
        "offered load: {}; XDP mode on r0: {mode:?}; {}",
        if pps == 0 {
            "flat out".to_string()
        } else {
            format!("{pps} pps")
        },
        if a.fair {
            "fair: r0's RPS sends every frame to the router core (CPU 1) in every run"
        } else {
            "unfair: no RPS, the kernel forwards in the sender's softirq (CPU 0)"
        }
    );
    println!(
        "{:<14} {:>12} {:>12} {:>10} {:>16}",
        "path", "offered Mpps", "fwd Mpps", "delivered", "ratio vs kernel"
    );
    let mut rows = vec![("kernel fwd", &k)];
    if let Some((x, _)) = &raw {
        rows.push(("raw AF_XDP", x));
    }
    if let Some((z, _)) = &zl {
        rows.push(("zlrouter", z));
    }
    for (name, r) in rows {
        println!(
            "{:<14} {:>12.3} {:>12.3} {:>9.1}% {:>16.2}",
            name,
            rate(r, r.offered),
            rate(r, r.forwarded),
            100.0 * r.forwarded as f64 / r.offered.max(1) as f64,
            rate(r, r.forwarded) / rate(&k, k.forwarded).max(1e-9)
        );
    }
    if let Some((_, staged)) = raw {
        println!("raw AF_XDP frames staged by the forwarder: {staged}");
    }
    if let Some((z, table)) = zl {
        for key in ["port r0", "port r1", "received "] {
            if let Some(l) = table.lines().find(|l| l.starts_with(key)) {
                println!("zlrouter: {l}");
            }
        }
        let ring = table_value(&table, "port r0", "ring").unwrap_or(0);
        println!(
            "ratio zlrouter / kernel (forwarded rate): {:.2} (zlrouter lost {} frames to a full \
             r0 RX ring or an empty fill ring)",
            rate(&z, z.forwarded) / rate(&k, k.forwarded).max(1e-9),
            ring
        );
    }
    Ok(())
}
