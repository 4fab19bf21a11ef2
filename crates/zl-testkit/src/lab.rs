//! Real traffic through the `zlrouter` binary (Linux, root): a lab of network namespaces
//!
//! ```text
//!   zlr-<tag>-snd0 g0 10.9.1.2 --- r0 |                 |
//!   zlr-<tag>-snd1 g0 10.9.2.2 --- r1 | zlr-<tag>-rtr   | rx --- s0 10.9.100.2 zlr-<tag>-rcv
//!   ...                               | (zlrouter, AF_XDP on every r*, kernel forwarding off)
//! ```
//!
//! Every namespace is a [`Netns`] (unique `zlr-` name with the pid, deleted on drop), the router
//! process is killed and reaped on drop, and only that PID is ever signalled. The end hosts use
//! static neighbours for the router's MACs (the router answers no ARP) and have checksum and
//! segmentation offloads off, so every frame on the wire is a complete, checksummed frame no
//! larger than the MTU (generic XDP hands AF_XDP the frame as it is). The test's own TCP and
//! UDP endpoints are threads that joined a namespace (`setns`), so no external tool is needed.
//!
//! The lab runs the `zlrouter` binary its caller names: only the root package's integration
//! tests know where Cargo built it (`env!("CARGO_BIN_EXE_zlrouter")`), so they pass that path
//! to [`Lab::or_skip`], [`Lab::new`] or [`Lab::with_queues`].

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::config::{quoted, ClassToml, PortToml, QosToml, RouterToml};

pub use crate::netns::{is_root, skip, Netns};

/// The receiver's address.
pub const RECEIVER_IP: &str = "10.9.100.2";

/// One sender namespace.
#[derive(Clone, Copy, Debug)]
pub struct SenderSpec {
    /// `net.ipv4.tcp_ecn` in the namespace (1: request ECN; 0: never).
    pub ecn: bool,
    /// One-way delay the router's delay line adds to what this sender sends (0: none).
    pub delay_ms: f64,
}

impl SenderSpec {
    pub const PLAIN: SenderSpec = SenderSpec {
        ecn: false,
        delay_ms: 0.0,
    };
}

fn sender_mac(i: usize) -> String {
    format!("02:00:00:09:{:02x}:02", i + 1)
}
fn router_mac(i: usize) -> String {
    format!("02:00:00:09:{:02x}:01", i + 1)
}
const RX_MAC: &str = "02:00:00:09:64:01";
const RCV_MAC: &str = "02:00:00:09:64:02";

/// The sender `i`'s address.
pub fn sender_ip(i: usize) -> String {
    format!("10.9.{}.2", i + 1)
}

/// A running `zlrouter`, killed and reaped on drop.
pub struct Router {
    child: Option<Child>,
    lines: Receiver<String>,
    /// Standard-error lines [`Router::wait_for_log`] read, kept for the final output.
    seen: Vec<String>,
}

/// How long a router is given to exit after SIGINT (or by itself) before it is killed: a
/// bound for a router that hangs, far above the ~0.1 s a stop takes, so that a slow machine
/// does not reach it.
const EXIT_WITHIN: Duration = Duration::from_secs(60);

impl Router {
    /// The process id (only this one is ever signalled).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Freezes the router (SIGSTOP), e.g. to let a ring fill deterministically.
    pub fn pause(&self) {
        signal(self.pid(), libc::SIGSTOP);
    }

    /// Resumes it (SIGCONT).
    pub fn resume(&self) {
        signal(self.pid(), libc::SIGCONT);
    }

    /// SIGINT, then the exit status and the output once it exits (the JSON statistics, then
    /// `--- stderr ---` and the standard error; read with [`stat`]) (bounded:
    /// [`EXIT_WITHIN`], then SIGKILL, and the status says so).
    pub fn stop(mut self) -> (std::process::ExitStatus, String) {
        let child = self.child.take().expect("router running");
        signal(child.id(), libc::SIGINT);
        self.collect(child)
    }

    /// Waits (bounded: [`EXIT_WITHIN`], then SIGKILL) for the router to exit by itself.
    pub fn wait_exit(mut self) -> (std::process::ExitStatus, String) {
        let child = self.child.take().expect("router running");
        self.collect(child)
    }

    /// Reads the router's standard error until a line containing `needle` (bounded by
    /// `within`): a readiness wait for something the router logs, e.g. that it noticed an
    /// interface go. The lines read stay part of the output [`Router::stop`] returns. `Err`
    /// carries the lines seen.
    pub fn wait_for_log(&mut self, needle: &str, within: Duration) -> Result<(), String> {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(l) => {
                    let found = l.contains(needle);
                    self.seen.push(l);
                    if found {
                        return Ok(());
                    }
                }
                Err(_) => {
                    return Err(format!(
                        "no `{needle}` from the router within {within:?}: {}",
                        self.seen.join(" | ")
                    ))
                }
            }
        }
    }

    fn collect(&mut self, mut child: Child) -> (std::process::ExitStatus, String) {
        // Stdout is read while the router exits, so a long table never blocks it on the pipe.
        let stdout = child.stdout.take().map(|mut s| {
            std::thread::spawn(move || {
                let mut out = String::new();
                let _ = s.read_to_string(&mut out);
                out
            })
        });
        let deadline = Instant::now() + EXIT_WITHIN;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        if let Ok(None) = child.try_wait() {
            let _ = child.kill();
            self.seen.push(format!(
                "(the test killed the router: it had not exited within {EXIT_WITHIN:?})"
            ));
        }
        let status = child.wait().expect("wait for zlrouter");
        let out = stdout.and_then(|h| h.join().ok()).unwrap_or_default();
        // Whatever the router wrote on stderr after its progress lines (the error, if any).
        let mut err = String::new();
        for l in self.seen.drain(..) {
            err.push_str(&l);
            err.push('\n');
        }
        while let Ok(l) = self.lines.recv_timeout(Duration::from_millis(200)) {
            err.push_str(&l);
            err.push('\n');
        }
        (status, format!("{out}\n--- stderr ---\n{err}"))
    }
}

impl Drop for Router {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: kill(2) on the PID of a child this process started and has not yet reaped, so
    // the PID cannot have been reused.
    unsafe {
        libc::kill(pid as libc::pid_t, sig);
    }
}

/// The namespaces of one test; the router (if started) is dropped first.
pub struct Lab {
    pub router: Option<Router>,
    pub rtr: Netns,
    pub senders: Vec<Netns>,
    pub rcv: Netns,
    pub specs: Vec<SenderSpec>,
    pub dir: PathBuf,
    /// The `zlrouter` binary [`Lab::start_router`] runs.
    pub router_bin: PathBuf,
    /// Extra keys for the senders' `r<i>` AF_XDP tables (e.g. `", rx_ring_size = 64"`).
    pub sender_port_af_xdp: String,
    /// One lab at a time per test binary: each router busy-polls a core, and two at once on a
    /// small machine would measure the machine, not the router. Dropped last.
    _one_at_a_time: MutexGuard<'static, ()>,
}

static ONE_LAB: Mutex<()> = Mutex::new(());

fn setup_host(
    ns: &Netns,
    dev: &str,
    mac: &str,
    addr: &str,
    gw: &str,
    gw_mac: &str,
) -> io::Result<()> {
    ns.exec(&[
        "sysctl",
        "-qw",
        &format!("net.ipv6.conf.{dev}.disable_ipv6=1"),
    ])?;
    ns.ip(&["link", "set", dev, "address", mac])?;
    ns.ip(&["addr", "add", &format!("{addr}/24"), "dev", dev])?;
    offloads_off(ns, dev)?;
    ns.ip(&["link", "set", dev, "up"])?;
    ns.ip(&[
        "neigh",
        "replace",
        gw,
        "lladdr",
        gw_mac,
        "dev",
        dev,
        "nud",
        "permanent",
    ])?;
    ns.ip(&["route", "add", "default", "via", gw])?;
    Ok(())
}

fn offloads_off(ns: &Netns, dev: &str) -> io::Result<()> {
    ns.exec(&[
        "ethtool", "-K", dev, "tx", "off", "rx", "off", "tso", "off", "gso", "off", "gro", "off",
    ])
    .map(|_| ())
}

impl Lab {
    /// A lab for `test` with `specs` that runs the router `router_bin`, or `None` after saying
    /// why it cannot run here (not root, or the namespaces cannot be built; with
    /// `ZLR_REQUIRE_ENV` set, a failure).
    pub fn or_skip(router_bin: impl AsRef<Path>, test: &str, specs: &[SenderSpec]) -> Option<Lab> {
        if !is_root() {
            skip(test, "needs root");
            return None;
        }
        Lab::new(router_bin, test, specs)
            .map_err(|e| skip(test, &format!("cannot build the namespaces: {e}")))
            .ok()
    }

    /// Starts the router on `config`, or fails the test: the lab exists, so the environment
    /// is there, and a router that does not start in it is a defect, not a reason to skip
    /// (with or without `ZLR_REQUIRE_ENV`). The lab's namespaces go when the panic drops it.
    pub fn start(&mut self, test: &str, config: &str) {
        if let Err(e) = self.start_router(config) {
            panic!("{test}: the AF_XDP router did not start: {e}");
        }
    }

    /// Builds the namespaces and links for a router `router_bin`; `Err` means the machine
    /// cannot (the caller skips).
    pub fn new(router_bin: impl AsRef<Path>, tag: &str, specs: &[SenderSpec]) -> io::Result<Lab> {
        Lab::with_queues(router_bin, tag, specs, 1)
    }

    /// As [`Lab::new`], with `queues` RX and TX queues on both ends of every sender's veth
    /// (`r<i>` <-> `g0`; created so and set with `ethtool -L`), for multi-queue AF_XDP ports.
    pub fn with_queues(
        router_bin: impl AsRef<Path>,
        tag: &str,
        specs: &[SenderSpec],
        queues: u32,
    ) -> io::Result<Lab> {
        let guard = ONE_LAB
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let rtr = Netns::create(&format!("{tag}-rtr"))?;
        let rcv = Netns::create(&format!("{tag}-rcv"))?;
        let mut senders = Vec::new();
        for (i, spec) in specs.iter().enumerate() {
            let ns = Netns::create(&format!("{tag}-snd{i}"))?;
            ns.exec(&[
                "sysctl",
                "-qw",
                &format!("net.ipv4.tcp_ecn={}", u8::from(spec.ecn)),
            ])?;
            let r = format!("r{i}");
            let q = queues.to_string();
            rtr.ip(&[
                "link",
                "add",
                &r,
                "numrxqueues",
                &q,
                "numtxqueues",
                &q,
                "type",
                "veth",
                "peer",
                "name",
                "g0",
                "numrxqueues",
                &q,
                "numtxqueues",
                &q,
                "netns",
                ns.name(),
            ])?;
            if queues > 1 {
                rtr.exec(&["ethtool", "-L", &r, "rx", &q, "tx", &q])?;
                ns.exec(&["ethtool", "-L", "g0", "rx", &q, "tx", &q])?;
            }
            rtr.exec(&[
                "sysctl",
                "-qw",
                &format!("net.ipv6.conf.{r}.disable_ipv6=1"),
            ])?;
            rtr.ip(&["link", "set", &r, "address", &router_mac(i)])?;
            offloads_off(&rtr, &r)?;
            rtr.ip(&["link", "set", &r, "up"])?;
            let gw = format!("10.9.{}.1", i + 1);
            setup_host(
                &ns,
                "g0",
                &sender_mac(i),
                &sender_ip(i),
                &gw,
                &router_mac(i),
            )?;
            senders.push(ns);
        }
        rtr.ip(&[
            "link",
            "add",
            "rx",
            "type",
            "veth",
            "peer",
            "name",
            "s0",
            "netns",
            rcv.name(),
        ])?;
        rtr.exec(&["sysctl", "-qw", "net.ipv6.conf.rx.disable_ipv6=1"])?;
        rtr.exec(&["sysctl", "-qw", "net.ipv4.ip_forward=0"])?;
        rtr.ip(&["link", "set", "rx", "address", RX_MAC])?;
        offloads_off(&rtr, "rx")?;
        rtr.ip(&["link", "set", "rx", "up"])?;
        setup_host(&rcv, "s0", RCV_MAC, RECEIVER_IP, "10.9.100.1", RX_MAC)?;
        let dir = std::env::temp_dir().join(format!("{}-{}", rtr.name(), "cfg"));
        std::fs::create_dir_all(&dir)?;
        Ok(Lab {
            router: None,
            rtr,
            senders,
            rcv,
            specs: specs.to_vec(),
            dir,
            router_bin: router_bin.as_ref().to_path_buf(),
            sender_port_af_xdp: String::new(),
            _one_at_a_time: guard,
        })
    }

    /// The router's config: the AF_XDP ports `r<i>` (each with its sender's delay line and a
    /// fast tail-drop egress for the ACKs) and `rx`, whose egress gets `bottleneck_qos` (a
    /// top-level `[qos]` table with its classes), plus `extra` (more top-level tables).
    pub fn router_config(&self, bottleneck_qos: &str, extra: &str) -> String {
        let mut c = String::from("[run]\npool_buffers = 65536\n\n");
        c.push_str(extra);
        c.push('\n');
        for (i, spec) in self.specs.iter().enumerate() {
            let delay = if spec.delay_ms > 0.0 {
                format!(
                    ", delay = {{ delay_ms = {}, capacity = 8192 }}",
                    spec.delay_ms
                )
            } else {
                String::new()
            };
            c.push_str(&format!(
                "[[ports]]\nname = \"r{i}\"\nkind = \"af-xdp\"\nmac = \"{}\"\n\
                 af_xdp = {{ ifname = \"r{i}\"{delay}{} }}\n\
                 qos = {{ link_rate_bps = 1_000_000_000, classes = [{{ name = \"be\", weight = 1, max_packets = 1000 }}] }}\n\n",
                router_mac(i),
                self.sender_port_af_xdp
            ));
            c.push_str(&format!(
                "[[routes]]\nprefix = \"10.9.{}.0/24\"\nport = \"r{i}\"\nnext_hop_mac = \"{}\"\n\n",
                i + 1,
                sender_mac(i)
            ));
        }
        c.push_str(&format!(
            "[[ports]]\nname = \"rx\"\nkind = \"af-xdp\"\nmac = \"{RX_MAC}\"\naf_xdp = {{ ifname = \"rx\" }}\n\n\
             [[routes]]\nprefix = \"10.9.100.0/24\"\nport = \"rx\"\nnext_hop_mac = \"{RCV_MAC}\"\n\n"
        ));
        c.push_str(bottleneck_qos);
        c
    }

    /// Starts `zlrouter run` ([`Lab::router_bin`]) in the router namespace on `config`; waits
    /// (bounded) for its first progress line. `Err` carries what it printed.
    pub fn start_router(&mut self, config: &str) -> Result<(), String> {
        let path = self.dir.join("router.toml");
        std::fs::write(&path, config).map_err(|e| e.to_string())?;
        let mut child = Command::new("ip")
            .args(["netns", "exec", self.rtr.name()])
            .arg(&self.router_bin)
            .arg("run")
            .arg(&path)
            // The final statistics as JSON on stdout ([`stat`] reads them); the lines for
            // people (why the run stopped, the threads) go to stderr.
            .arg("--json")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| e.to_string())?;
        let lines = lines_of(&mut child);
        let router = Router {
            child: Some(child),
            lines,
            seen: Vec::new(),
        };
        let mut seen = Vec::new();
        loop {
            match router.lines.recv_timeout(Duration::from_secs(20)) {
                Ok(l) if l.contains(" fwd ") => break,
                Ok(l) => seen.push(l),
                Err(_) => {
                    let (status, out) = router.stop();
                    return Err(format!("{status:?} {} {out}", seen.join(" | ")));
                }
            }
        }
        self.router = Some(router);
        Ok(())
    }

    /// Stops the router (SIGINT) and returns its exit status and output.
    pub fn stop_router(&mut self) -> (std::process::ExitStatus, String) {
        self.router.take().expect("router started").stop()
    }

    /// The receiver interface's frame byte and packet counters.
    pub fn receiver_rx(&self) -> (u64, u64) {
        (
            self.rcv.link_stat("s0", "rx_bytes").unwrap_or(0),
            self.rcv.link_stat("s0", "rx_packets").unwrap_or(0),
        )
    }

    /// The receiver interface's frame bytes (`rx_bytes` of `s0`) and the instant they were
    /// read: read by a thread inside the receiver namespace (`/proc/thread-self/net/dev`), so
    /// the instant is that of the read itself, not of a spawned command's start or end (tens
    /// of ms apart on a loaded machine). Where that file cannot be read, `ip netns exec cat`
    /// and the midpoint of the call.
    pub fn receiver_rx_bytes_at(&self) -> (u64, Instant) {
        let read = self.rcv.run_in(|| {
            let text = std::fs::read_to_string("/proc/thread-self/net/dev").ok()?;
            let at = Instant::now();
            let line = text.lines().find(|l| l.trim_start().starts_with("s0:"))?;
            let bytes = line
                .split_once(':')?
                .1
                .split_whitespace()
                .next()?
                .parse()
                .ok()?;
            Some((bytes, at))
        });
        if let Ok(Some(r)) = read {
            return r;
        }
        let before = Instant::now();
        let bytes = self.rcv.link_stat("s0", "rx_bytes").unwrap_or(0);
        (bytes, before + before.elapsed() / 2)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        self.router.take();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Forwards every progress / log line of `child`'s stderr (split on CR and LF).
pub fn lines_of(child: &mut Child) -> Receiver<String> {
    let mut stderr = child.stderr.take().expect("piped stderr");
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let mut line = Vec::new();
        let mut byte = [0u8; 1];
        while let Ok(1) = stderr.read(&mut byte) {
            if byte[0] == b'\r' || byte[0] == b'\n' {
                if !line.is_empty()
                    && tx
                        .send(String::from_utf8_lossy(&line).into_owned())
                        .is_err()
                {
                    return;
                }
                line.clear();
            } else {
                line.push(byte[0]);
            }
        }
        let _ = tx.send(String::from_utf8_lossy(&line).into_owned());
    });
    rx
}

/// The head of the kernel's `struct tcp_info` (include/uapi/linux/tcp.h) up to
/// `tcpi_delivered_ce`, in the kernel's field order.
#[repr(C)]
#[derive(Default)]
struct TcpInfoHead {
    state: u8,
    ca_state: u8,
    retransmits: u8,
    probes: u8,
    backoff: u8,
    options: u8,
    wscale: u8,
    flags: u8,
    u32s: [u32; 24],
    pacing_rate: u64,
    max_pacing_rate: u64,
    bytes_acked: u64,
    bytes_received: u64,
    segs_out: u32,
    segs_in: u32,
    notsent_bytes: u32,
    min_rtt: u32,
    data_segs_in: u32,
    data_segs_out: u32,
    delivery_rate: u64,
    busy_time: u64,
    rwnd_limited: u64,
    sndbuf_limited: u64,
    delivered: u32,
    delivered_ce: u32,
}

/// `TCPI_OPT_ECN`: ECN was negotiated.
const TCPI_OPT_ECN: u8 = 8;

/// What a sending socket's `TCP_INFO` says at the end of a flow.
#[derive(Clone, Copy, Debug, Default)]
pub struct TcpSummary {
    /// Payload bytes the peer acknowledged.
    pub bytes_acked: u64,
    /// Segments retransmitted over the connection's life (losses, here AQM / tail drops).
    pub total_retrans: u32,
    /// Segments delivered with a CE echo (ECE).
    pub delivered_ce: u32,
    /// ECN negotiated on the connection.
    pub ecn: bool,
    /// Smoothed RTT, µs.
    pub srtt_us: u32,
}

fn tcp_summary(s: &TcpStream) -> TcpSummary {
    let mut info = TcpInfoHead::default();
    let mut len = std::mem::size_of::<TcpInfoHead>() as libc::socklen_t;
    // SAFETY: `info` is a writable buffer of `len` bytes; the kernel writes at most `len`.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut TcpInfoHead).cast(),
            &mut len,
        )
    };
    if r != 0 {
        return TcpSummary::default();
    }
    TcpSummary {
        bytes_acked: info.bytes_acked,
        total_retrans: info.u32s[23],
        delivered_ce: info.delivered_ce,
        ecn: info.options & TCPI_OPT_ECN != 0,
        srtt_us: info.u32s[15],
    }
}

fn set_congestion(s: &TcpStream, cc: &str) -> io::Result<()> {
    // SAFETY: the name buffer is valid for its length; the kernel copies it.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            cc.as_ptr().cast(),
            cc.len() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// A TCP sink in the receiver namespace: accepts `flows` connections on `port` and counts
/// what each delivers (bytes per connection, in accept order).
pub fn tcp_sink(lab: &Lab, port: u16, flows: usize) -> JoinHandle<io::Result<Vec<u64>>> {
    let (ready_tx, ready_rx) = channel();
    let h = lab.rcv.spawn_in(move || -> Vec<u64> {
        let l = TcpListener::bind((RECEIVER_IP, port)).expect("bind the sink");
        let _ = ready_tx.send(());
        let mut handles = Vec::new();
        for _ in 0..flows {
            let (mut s, _) = l.accept().expect("accept");
            handles.push(std::thread::spawn(move || {
                let mut buf = vec![0u8; 65536];
                let mut n = 0u64;
                loop {
                    match s.read(&mut buf) {
                        Ok(0) | Err(_) => return n,
                        Ok(k) => n += k as u64,
                    }
                }
            }));
        }
        handles.into_iter().map(|h| h.join().unwrap_or(0)).collect()
    });
    // Returns once the sink listens, or at once if its thread ended (the join says why): no
    // timeout for a loaded machine to outrun.
    let _ = ready_rx.recv();
    h
}

/// A bulk TCP flow from sender `i` to the sink on `port` under congestion control `cc`, for
/// `secs` of wall time; the socket's summary at the end.
pub fn tcp_flow(
    lab: &Lab,
    i: usize,
    port: u16,
    cc: &'static str,
    secs: f64,
) -> JoinHandle<io::Result<TcpSummary>> {
    lab.senders[i].spawn_in(move || -> TcpSummary {
        let dst: SocketAddr = format!("{RECEIVER_IP}:{port}").parse().expect("addr");
        let mut s = connect(dst);
        set_congestion(&s, cc).expect("TCP_CONGESTION");
        s.set_write_timeout(Some(Duration::from_millis(200))).ok();
        let chunk = vec![0x5au8; 16384];
        let end = Instant::now() + Duration::from_secs_f64(secs);
        while Instant::now() < end {
            match s.write(&chunk) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == io::ErrorKind::TimedOut => {}
                Err(e) => panic!("write: {e}"),
            }
        }
        let summary = tcp_summary(&s);
        let _ = s.shutdown(Shutdown::Both);
        summary
    })
}

/// Connects to `dst`, trying up to three times (5 s each); the panic names every error. (On
/// the loaded 2-core machine a first run after a rebuild twice had a few of 16 connections
/// fail, cause not found; each failed attempt is printed.)
fn connect(dst: SocketAddr) -> TcpStream {
    let mut errors = Vec::new();
    for _ in 0..3 {
        match TcpStream::connect_timeout(&dst, Duration::from_secs(5)) {
            Ok(s) => return s,
            Err(e) => {
                let _ = writeln!(io::stderr(), "connect to {dst}: {e}");
                errors.push(e.to_string());
            }
        }
    }
    panic!("connect to {dst}: {}", errors.join("; "))
}

/// The congestion control a flow actually runs (the kernel may lack a module).
pub fn congestion_available(cc: &str) -> bool {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .is_ok_and(|s| s.split_whitespace().any(|c| c == cc))
}

/// UDP echo between sender 0 and the receiver: `n` numbered datagrams out, one at a time
/// (the next once the echo is back or after 500 ms), each echoed back; how many distinct
/// datagrams made the round trip. An echo that comes back late (a router descheduled for a
/// while on a loaded machine) still counts, whenever it arrives up to 1 s after the last
/// datagram, and does not throw later echoes out of step; a datagram the router lost, or
/// corrupted, never counts.
pub fn udp_echo(lab: &Lab, port: u16, n: usize) -> io::Result<usize> {
    let (ready_tx, ready_rx) = channel();
    let done = Arc::new(AtomicBool::new(false));
    let server_done = done.clone();
    let server = lab.rcv.spawn_in(move || {
        let s = UdpSocket::bind((RECEIVER_IP, port)).expect("bind");
        s.set_read_timeout(Some(Duration::from_millis(100))).ok();
        let _ = ready_tx.send(());
        let mut buf = [0u8; 2048];
        // Echoes until the client is done (not until an idle timeout, which a slow machine
        // could reach in the middle of the exchange).
        while !server_done.load(Ordering::Relaxed) {
            if let Ok((k, from)) = s.recv_from(&mut buf) {
                let _ = s.send_to(&buf[..k], from);
            }
        }
    });
    // Once the server is bound, or at once if its thread ended.
    let _ = ready_rx.recv();
    let client = lab.senders[0].spawn_in(move || -> usize {
        let s = UdpSocket::bind(("0.0.0.0", 0)).expect("bind");
        s.set_read_timeout(Some(Duration::from_millis(50))).ok();
        let mut back = vec![false; n];
        let mut buf = [0u8; 2048];
        // Reads echoes until `until`, or until datagram `want` is back; marks each one.
        let mut read_until = |until: Instant, want: Option<usize>, back: &mut Vec<bool>| {
            while Instant::now() < until {
                if let Ok((len, _)) = s.recv_from(&mut buf) {
                    if len == 4 {
                        let k = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
                        if k < back.len() {
                            back[k] = true;
                            if want == Some(k) {
                                return;
                            }
                        }
                    }
                }
            }
        };
        for k in 0..n {
            let _ = s.send_to(&(k as u32).to_be_bytes(), (RECEIVER_IP, port));
            read_until(
                Instant::now() + Duration::from_millis(500),
                Some(k),
                &mut back,
            );
        }
        if back.iter().any(|b| !b) {
            read_until(Instant::now() + Duration::from_secs(1), None, &mut back);
        }
        back.iter().filter(|b| **b).count()
    });
    let back = client.join();
    done.store(true, Ordering::Relaxed);
    let _ = server.join();
    back.expect("client thread")
}

/// Jain's fairness index of `x`: (sum x)^2 / (n sum x^2), 1 when all equal, 1/n at worst.
pub fn jain(x: &[f64]) -> f64 {
    let s: f64 = x.iter().sum();
    let s2: f64 = x.iter().map(|v| v * v).sum();
    if s2 == 0.0 {
        return 0.0;
    }
    s * s / (x.len() as f64 * s2)
}

/// A count from the router's final statistics in `out` (what [`Router::stop`] returns: the
/// JSON document the lab's `--json` run prints, then its standard error). `path` is dotted:
/// `totals.forwarded`, `totals.drops.no_route`, `icmp.sent.time_exceeded`; an array element
/// is chosen by name (`ports[r0].rx_ring_full`, `ports[r0].classes[be].colors[*].sent`) or
/// summed over with `[*]` (`ports[*].rx_no_buffer`). `None` when the path is not there.
pub fn stat(out: &str, path: &str) -> Option<u64> {
    let json = out.split("\n--- stderr ---").next()?;
    let v: serde_json::Value = serde_json::from_str(json).ok()?;
    sum_at(&v, &path.split('.').collect::<Vec<_>>())
}

fn sum_at(v: &serde_json::Value, path: &[&str]) -> Option<u64> {
    let Some((head, rest)) = path.split_first() else {
        return v.as_u64();
    };
    match head.split_once('[') {
        Some((field, sel)) => {
            let items = v.get(field)?.as_array()?;
            match sel.trim_end_matches(']') {
                "*" => items.iter().map(|i| sum_at(i, rest)).sum(),
                name => sum_at(items.iter().find(|i| i["name"] == name)?, rest),
            }
        }
        None => sum_at(v.get(*head)?, rest),
    }
}

/// The router's Prometheus text from its metrics endpoint `addr` (a `[metrics] listen`
/// address inside the router namespace), read from a thread that joined that namespace.
pub fn scrape_metrics(lab: &Lab, addr: &str) -> io::Result<String> {
    let addr: SocketAddr = addr
        .parse()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, format!("{addr}: {e}")))?;
    lab.rtr
        .spawn_in(move || -> io::Result<String> {
            let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
            s.set_read_timeout(Some(Duration::from_secs(5)))?;
            s.write_all(b"GET /metrics HTTP/1.0\r\nHost: zlrouter\r\n\r\n")?;
            let mut text = String::new();
            s.read_to_string(&mut text)?;
            Ok(text)
        })
        .join()
        .map_err(|_| io::Error::other("the scrape thread panicked"))??
}

/// The value of the Prometheus sample whose line starts with `prefix` (metric name and the
/// start of its labels), e.g. `zlrouter_class_queue_length_packets_sum{port="rx"`.
pub fn metric(text: &str, prefix: &str) -> Option<f64> {
    text.lines()
        .find(|l| l.starts_with(prefix))?
        .rsplit_once(' ')?
        .1
        .parse()
        .ok()
}

/// Whether every `(tool, version flag, Debian package)` runs here (`.ci/run` installs them);
/// else `test` skips ([`skip`]) naming the first that is missing.
pub fn tools(test: &str, needed: &[(&str, &str, &str)]) -> bool {
    for &(tool, arg, pkg) in needed {
        if !Command::new(tool)
            .arg(arg)
            .output()
            .is_ok_and(|o| o.status.success())
        {
            skip(test, &format!("needs {tool} ({pkg})"));
            return false;
        }
    }
    true
}

/// `cmd args` in `ns`, bounded by `secs` (coreutils `timeout`): (success, stdout + stderr).
pub fn run_in(ns: &Netns, secs: u32, cmd: &[&str]) -> (bool, String) {
    let out = Command::new("ip")
        .args(["netns", "exec", ns.name(), "timeout", &secs.to_string()])
        .args(cmd)
        .output()
        .expect("run a tool in the namespace");
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// `count` pings 0.1 s apart from `ns` to `to` (`extra`: more of ping's options), every one
/// answered; else ping's words.
pub fn all_back(ns: &Netns, to: &str, count: u32, extra: &[&str]) -> Result<(), String> {
    let c = count.to_string();
    let mut cmd = vec!["ping", "-n", "-q", "-W", "1", "-i", "0.1", "-c", &c];
    cmd.extend_from_slice(extra);
    cmd.push(to);
    let (ok, text) = run_in(ns, 30, &cmd);
    if ok && text.contains(&format!("{count} received")) {
        Ok(())
    } else {
        Err(format!("ping {to}: {text}"))
    }
}

/// One echo of `payload` octets from `ns` to `to` with Don't Fragment (IPv6 when `to` has a
/// colon), waited for one second: (answered, what ping said, an ICMP error among it).
pub fn ping_df(ns: &Netns, to: &str, payload: u32) -> (bool, String) {
    let size = payload.to_string();
    let mut cmd = vec![
        "ping", "-n", "-c", "1", "-W", "1", "-M", "do", "-s", &size, to,
    ];
    if to.contains(':') {
        cmd.insert(1, "-6");
    }
    run_in(ns, 10, &cmd)
}

/// A tshark capture of `dev` in `ns` (pcapng), stopped by PID on drop or by
/// [`Capture::stop`].
pub struct Capture {
    child: Option<Child>,
    path: PathBuf,
}

impl Capture {
    /// Starts capturing and waits (bounded) until tshark says it captures.
    pub fn start(ns: &Netns, dev: &str, path: PathBuf) -> Capture {
        use std::io::BufRead;
        let mut child = Command::new("ip")
            .args(["netns", "exec", ns.name(), "tshark", "-q", "-i", dev])
            .args(["-a", "duration:60", "-w"])
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start tshark");
        let stderr = child.stderr.take().expect("piped");
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            for line in io::BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut cap = Capture {
            child: Some(child),
            path,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(l) if l.contains("Capturing on") => return cap,
                Ok(_) => {}
                Err(_) => {
                    cap.stop();
                    panic!("tshark did not start capturing on {dev}");
                }
            }
        }
    }

    /// Stops the capture (SIGINT to tshark's PID, reaped) and returns the file.
    pub fn stop(&mut self) -> PathBuf {
        if let Some(mut c) = self.child.take() {
            // A moment for the last frames to be written.
            std::thread::sleep(Duration::from_millis(300));
            // SAFETY: kill(2) on the PID of a child this process started and has not reaped.
            unsafe {
                libc::kill(c.id() as libc::pid_t, libc::SIGINT);
            }
            let _ = c.wait();
        }
        self.path.clone()
    }
}

impl Drop for Capture {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// tshark's lines for the frames of `file` that match `filter` (`fields`, tab-separated; none:
/// tshark's one-line summaries), with every checksum it knows verified (IPv4 header, UDP,
/// TCP; ICMP and ICMPv6 always are), so a bad one shows in the expert filters.
pub fn tshark(file: &Path, filter: &str, fields: &[&str]) -> Vec<String> {
    let mut cmd = Command::new("tshark");
    cmd.arg("-r").arg(file);
    for pref in [
        "ip.check_checksum:TRUE",
        "udp.check_checksum:TRUE",
        "tcp.check_checksum:TRUE",
    ] {
        cmd.args(["-o", pref]);
    }
    cmd.args(["-Y", filter]);
    if !fields.is_empty() {
        cmd.args(["-T", "fields"]);
        for f in fields {
            cmd.args(["-e", f]);
        }
    }
    let out = cmd.output().expect("run tshark");
    assert!(
        out.status.success(),
        "tshark: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The router of the kernel-routing tests (`[routing] source = "kernel"`, `unres_qlen = 8`):
/// the first sender's port `r0` (with its lab MAC when `r0_mac`, else the interface's own) and
/// `rx` on AF_XDP, no route or neighbour of its own, one best-effort class of 1000 packets on
/// a 1 Gbit/s link. The tests add what they vary (`rx_workers`, ...) to the builder.
pub fn kernel_router(r0_mac: bool) -> RouterToml {
    let mut r0 = PortToml::af_xdp("r0", "r0");
    if r0_mac {
        r0 = r0.set("mac", quoted(&router_mac(0)));
    }
    RouterToml::new()
        .set("run", "pool_buffers", 65536)
        .set("routing", "source", quoted("kernel"))
        .set("routing", "unres_qlen", 8)
        .port(r0)
        .port(PortToml::af_xdp("rx", "rx").set("mac", quoted(RX_MAC)))
        .qos(
            QosToml::new()
                .set("link_rate_bps", 1_000_000_000)
                .class(ClassToml::new("be").weight(1).max_packets(1000)),
        )
}
