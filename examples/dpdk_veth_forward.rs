//! `dpdk-testpmd` forwarding between two veths, next to the kernel's `ip_forward`, on the
//! topology and offered load of zl-afxdp's `afxdp_forward` benchmark (needs root), so its
//! figures for zlrouter's AF_XDP ports can be read against testpmd's through the kernel's rate
//! in each run.
//!
//! ```text
//!  ns gen            ns rtr                         ns sink
//!  g0 10.0.1.2 <-> r0 10.0.1.1 | r1 10.0.2.1 <-> s0 10.0.2.2
//! ```
//! A generator in `gen` sends 64-byte UDP/IPv4 frames to 10.0.2.99 (r0's MAC) from an
//! AF_XDP TX socket on g0 pinned to CPU 0, cycling over 1024 UDP source ports, flat out.
//! r0's RPS mask sends its receive work to CPU 1 (the router core, as `afxdp_forward
//! --fair`). In `rtr`, one after the other:
//! - kernel: `net.ipv4.ip_forward=1` and a permanent neighbour for 10.0.2.99 (s0's MAC);
//! - testpmd on `net_af_packet` vdevs on r0 and r1, then on `net_af_xdp` vdevs (native XDP
//!   on veth, copy mode), `--forward-mode=mac` (destination MAC rewritten to s0's, as a
//!   router does), its forwarding lcore on CPU 1, no hugepages.
//!
//! The forwarded rate is s0's `rx_packets` over the generation window plus 200 ms of drain.
//! Namespaces are named `zldp-*` and deleted at the end.
//!
//! With `--zlrouter PATH` (a `zlrouter` built with `--features dpdk`), also `zlrouter run` with
//! DPDK ports on the same vdevs (its poll loop on the router core, the full pipeline of
//! `afxdp_forward`'s zlrouter runs), stopped with SIGINT after the load.
//!
//! Usage: `cargo run --release -p zl-dpdk --features dpdk --example dpdk_veth_forward --
//! [seconds, default 3] [--zlrouter target/release/zlrouter]`.

use std::io::{Read, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use zl_afxdp::{AfXdpConfig, AfXdpPort};
use zl_testkit::netns::{mac_text, pin_thread_to_cpu, set_prefix};
use zl_testkit::topology::{LineTopology as Topology, BENCH_ZL_RED};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

const SENDER_CPU: usize = 0;
const ROUTER_CPU: usize = 1;

/// The line topology of `zl_afxdp::netns` in `zldp-*` namespaces, `r0`'s RPS on the router
/// core.
fn topology() -> Res<Topology> {
    set_prefix("zldp");
    Ok(Topology::create(
        ["vgen", "vrtr", "vsnk"],
        Some(ROUTER_CPU),
    )?)
}

/// Sends `frames` from g0 for `secs`, flat out; returns (frames sent, forwarded at s0).
fn offer(t: &Topology, secs: f64, frames: Vec<Vec<u8>>) -> Res<(u64, u64)> {
    let s0_before = t.sink.link_stat("s0", "rx_packets")?;
    let sent = t
        .gen
        .run_in(move || -> Result<u64, String> {
            let cfg = AfXdpConfig {
                attach_program: false,
                rx_ring_size: 64,
                tx_ring_size: 2048,
                ..AfXdpConfig::new("g0")
            };
            let mut port = AfXdpPort::open("gen", 0, &cfg).map_err(|e| e.to_string())?;
            pin_thread_to_cpu(SENDER_CPU);
            let t0 = Instant::now();
            let end = Duration::from_secs_f64(secs);
            let (mut sent, mut next) = (0u64, 0usize);
            while t0.elapsed() < end {
                let burst = (0..32).map(|i| frames[(next + i) % frames.len()].as_slice());
                let n = port.send_burst(burst).map_err(|e| e.to_string())?;
                next = (next + n) % frames.len();
                sent += n as u64;
            }
            Ok(sent)
        })?
        .map_err(|e| format!("generator: {e}"))?;
    std::thread::sleep(Duration::from_millis(200));
    let forwarded = t.sink.link_stat("s0", "rx_packets")? - s0_before;
    Ok((sent, forwarded))
}

struct Testpmd {
    child: Child,
    stdin: ChildStdin,
    out: mpsc::Receiver<Vec<u8>>,
    text: String,
    prefix: String,
}

impl Testpmd {
    fn start(t: &Topology, vdevs: [String; 2], s0: [u8; 6], g0: [u8; 6]) -> Res<Self> {
        let prefix = format!("zldp-tpmd-{}", std::process::id());
        let mut child = Command::new("ip")
            .args(["netns", "exec", t.rtr.name(), "dpdk-testpmd"])
            .args([
                "--no-huge",
                "--no-pci",
                "-m",
                "512",
                "--file-prefix",
                &prefix,
            ])
            .args(["-l", &format!("{SENDER_CPU},{ROUTER_CPU}"), "--main-lcore"])
            .arg(SENDER_CPU.to_string())
            .args(["--vdev", &vdevs[0], "--vdev", &vdevs[1]])
            .args([
                "--log-level=*:warning",
                "--",
                "-i",
                "--total-num-mbufs=32768",
            ])
            .args(["--forward-mode=mac"])
            .arg(format!("--eth-peer=1,{}", mac_text(s0)))
            .arg(format!("--eth-peer=0,{}", mac_text(g0)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let stdin = child.stdin.take().ok_or("testpmd stdin")?;
        let mut stdout = child.stdout.take().ok_or("testpmd stdout")?;
        let (tx, out) = mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stdout.read(&mut buf) {
                if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                    break;
                }
            }
        });
        let mut pmd = Testpmd {
            child,
            stdin,
            out,
            text: String::new(),
            prefix,
        };
        if !pmd.wait_for("testpmd> ", Duration::from_secs(30)) {
            let mut err = String::new();
            if let Some(mut e) = pmd.child.stderr.take() {
                let _ = pmd.child.kill();
                let _ = e.read_to_string(&mut err);
            }
            return Err(format!("testpmd did not start:\n{}\n{err}", pmd.text).into());
        }
        Ok(pmd)
    }

    fn wait_for(&mut self, needle: &str, limit: Duration) -> bool {
        let t0 = Instant::now();
        while !self.text.contains(needle) && t0.elapsed() < limit {
            match self.out.recv_timeout(Duration::from_millis(50)) {
                Ok(chunk) => self.text.push_str(&String::from_utf8_lossy(&chunk)),
                Err(mpsc::RecvTimeoutError::Disconnected) => return false,
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
        }
        self.text.contains(needle)
    }

    fn command(&mut self, cmd: &str) -> Res<()> {
        writeln!(self.stdin, "{cmd}")?;
        Ok(())
    }

    /// Ends testpmd; returns everything it printed.
    fn quit(mut self) -> String {
        let _ = self.command("quit");
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/{}", self.prefix));
        while let Ok(chunk) = self.out.recv_timeout(Duration::from_millis(500)) {
            self.text.push_str(&String::from_utf8_lossy(&chunk));
        }
        self.text
    }
}

/// zlrouter's config: DPDK ports `vdev0` / `vdev1` on r0 / r1 (EAL on the router core), and
/// the full pipeline of `afxdp_forward`'s zlrouter runs: 5-tuple flow key, the flow estimate,
/// Diffserv classifier, EF strict + best effort with ZL-RED, WRR, a 100 Gbit/s shaper.
fn zlrouter_config(driver: &str, r0: [u8; 6], r1: [u8; 6], s0: [u8; 6]) -> String {
    let pid = std::process::id();
    let ports = format!(
        r#"[dpdk]
args = ["--no-huge", "--no-pci", "-m", "512", "--file-prefix", "zldp-zlr-{pid}", "-l", "{ROUTER_CPU}", "--log-level=*:warning"]

[[ports]]
name = "r0"
kind = "dpdk"
mac = "{r0}"
dpdk = {{ device = "{driver}0,iface=r0" }}

[[ports]]
name = "r1"
kind = "dpdk"
mac = "{r1}"
dpdk = {{ device = "{driver}1,iface=r1" }}
"#,
        r0 = mac_text(r0),
        r1 = mac_text(r1),
    );
    Topology::router_config(&ports, s0, true, BENCH_ZL_RED)
}

/// Runs `zlrouter run` in `rtr` (its poll loop on the router core: the EAL pins it there)
/// while the generator offers the load; returns (offered, forwarded).
fn run_zlrouter(
    t: &Topology,
    bin: &std::path::Path,
    driver: &str,
    secs: f64,
    frames: &[Vec<u8>],
) -> Res<(u64, u64)> {
    let dir = std::env::temp_dir().join(format!("zldp-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let cfg = dir.join("router.toml");
    let (r0, r1, s0) = (t.rtr.mac("r0")?, t.rtr.mac("r1")?, t.sink.mac("s0")?);
    std::fs::write(&cfg, zlrouter_config(driver, r0, r1, s0))?;
    let mut child = Command::new("ip")
        .args(["netns", "exec", t.rtr.name()])
        .arg(bin)
        .arg("run")
        .arg(&cfg)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let pid = child.id() as libc::pid_t;
    let mut stderr = child.stderr.take().ok_or("no stderr")?;
    let (tx, rx) = mpsc::channel::<Vec<u8>>();
    let reader = std::thread::spawn(move || {
        let mut buf = [0u8; 1024];
        while let Ok(n) = stderr.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    // Up once it prints its first progress line.
    let mut seen = String::new();
    let t0 = Instant::now();
    while !seen.contains(" fwd ") && t0.elapsed() < Duration::from_secs(30) {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(chunk) => seen.push_str(&String::from_utf8_lossy(&chunk)),
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
    }
    let result = if seen.contains(" fwd ") {
        offer(t, secs, frames.to_vec())
    } else {
        Err(format!("zlrouter did not start: {seen}").into())
    };
    // SAFETY: kill(2) on the pid of our own child, not yet reaped.
    unsafe { libc::kill(pid, libc::SIGINT) };
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait()?.is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    if child.try_wait()?.is_none() {
        let _ = child.kill();
    }
    let _ = child.wait();
    let _ = reader.join();
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/zldp-zlr-{}", std::process::id()));
    result
}

fn main() -> Res<()> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Err("needs root (namespaces, veths, XDP)".into());
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let zlrouter = args
        .iter()
        .position(|a| a == "--zlrouter")
        .and_then(|i| args.get(i + 1))
        .map(std::path::PathBuf::from);
    let secs: f64 = args
        .first()
        .filter(|a| !a.starts_with("--"))
        .map_or(Ok(3.0), |s| s.parse())?;
    let t = topology()?;
    let (r0, g0, s0) = (t.rtr.mac("r0")?, t.gen.mac("g0")?, t.sink.mac("s0")?);
    let frames: Vec<Vec<u8>> = (0..1024)
        .map(|i| Topology::udp_frame(r0, g0, 1024 + i))
        .collect();

    println!("veth gen -> rtr -> sink, 64-byte UDP, 1024 flows, sender CPU {SENDER_CPU}, router CPU {ROUTER_CPU}, {secs} s");
    println!(
        "{:<34} {:>12} {:>12} {:>10}",
        "router", "offered", "forwarded", "vs kernel"
    );
    t.rtr.exec(&["sysctl", "-qw", "net.ipv4.ip_forward=1"])?;
    let (sent, kernel) = offer(&t, secs, frames.clone())?;
    t.rtr.exec(&["sysctl", "-qw", "net.ipv4.ip_forward=0"])?;
    let kernel_pps = kernel as f64 / secs;
    println!(
        "{:<34} {:>8.3} Mpps {:>8.3} Mpps {:>10.2}",
        "kernel ip_forward",
        sent as f64 / secs / 1e6,
        kernel_pps / 1e6,
        1.0
    );
    for (name, vdevs) in [
        (
            "testpmd mac-fwd, net_af_packet",
            [
                "net_af_packet0,iface=r0".to_owned(),
                "net_af_packet1,iface=r1".to_owned(),
            ],
        ),
        (
            "testpmd mac-fwd, net_af_xdp",
            [
                "net_af_xdp0,iface=r0".to_owned(),
                "net_af_xdp1,iface=r1".to_owned(),
            ],
        ),
    ] {
        let mut pmd = match Testpmd::start(&t, vdevs, s0, g0) {
            Ok(p) => p,
            Err(e) => {
                println!("{name:<34} could not run: {e}");
                continue;
            }
        };
        pmd.command("start")?;
        let (sent, fwd) = offer(&t, secs, frames.clone())?;
        pmd.command("stop")?;
        // testpmd's stdout is block-buffered on a pipe: its totals arrive when it exits.
        let text = pmd.quit();
        let totals = text
            .split("Accumulated forward statistics")
            .nth(1)
            .map(|a| a.split_whitespace().take(24).collect::<Vec<_>>().join(" "))
            .unwrap_or_default();
        if std::env::var_os("ZLDP_VERBOSE").is_some() {
            println!("  testpmd totals: {totals}");
        }
        let pps = fwd as f64 / secs;
        println!(
            "{:<34} {:>8.3} Mpps {:>8.3} Mpps {:>10.2}",
            name,
            sent as f64 / secs / 1e6,
            pps / 1e6,
            pps / kernel_pps
        );
    }
    if let Some(bin) = &zlrouter {
        for driver in ["net_af_packet", "net_af_xdp"] {
            let name = format!("zlrouter pipeline, {driver}");
            match run_zlrouter(&t, bin, driver, secs, &frames) {
                Ok((sent, fwd)) => {
                    let pps = fwd as f64 / secs;
                    println!(
                        "{:<34} {:>8.3} Mpps {:>8.3} Mpps {:>10.2}",
                        name,
                        sent as f64 / secs / 1e6,
                        pps / 1e6,
                        pps / kernel_pps
                    );
                }
                Err(e) => println!("{name:<34} could not run: {e}"),
            }
        }
    }
    Ok(())
}
