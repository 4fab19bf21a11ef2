//! Throw-away network namespaces for the port's tests and benchmarks (Linux, root).
//!
//! A [`Netns`] is created with a unique `<prefix>-` name (`zlr-` unless a test binary set
//! its own prefix with [`set_prefix`]) and deleted on drop, also when a test panics; interfaces inside it (veth pairs) go with it. [`Netns::run_in`] and
//! [`Netns::spawn_in`] run a closure on a fresh thread that has joined the namespace, so the
//! caller's thread never changes namespace.

use std::io;
use std::os::fd::AsRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::thread::JoinHandle;

/// The environment variable that turns every test's environment skip (not root, no network
/// namespaces, a router that does not start, a missing tool) into a failure. `.ci/run` sets
/// it: CI runs as root with every tool installed, so a skip there would hide a broken setup
/// or a regression behind a passing test.
pub const REQUIRE_ENV: &str = "ZLR_REQUIRE_ENV";

/// Says on stderr that `test` cannot run here and why (the test then returns and passes), or,
/// with [`REQUIRE_ENV`] set to anything but `0`, fails the test with the same words.
pub fn skip(test: &str, why: &str) {
    use std::io::Write;
    if std::env::var_os(REQUIRE_ENV).is_some_and(|v| v != "0") {
        panic!("{test} cannot run here: {why} ({REQUIRE_ENV} is set, so this fails instead of skipping)");
    }
    // The real stderr, not the test harness's captured one, so that a skip is visible.
    let _ = writeln!(io::stderr(), "SKIPPED {test}: {why}");
}

/// Whether the process runs as root (the tests that need it skip otherwise).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// A network namespace deleted on drop.
#[derive(Debug)]
pub struct Netns {
    name: String,
}

static SEQ: AtomicU32 = AtomicU32::new(0);
static PREFIX: Mutex<&'static str> = Mutex::new("zlr");

/// Sets the prefix of the namespaces this process creates from now on (default `zlr`), so
/// a test binary's namespaces can be told apart from another one's.
pub fn set_prefix(prefix: &'static str) {
    *PREFIX.lock().unwrap_or_else(|p| p.into_inner()) = prefix;
}

fn run(cmd: &mut Command) -> io::Result<String> {
    let out = cmd.output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

impl Netns {
    /// Creates `<prefix>-<tag>-<pid>-<seq>` (prefix `zlr` unless [`set_prefix`] said
    /// otherwise).
    pub fn create(tag: &str) -> io::Result<Self> {
        let prefix = *PREFIX.lock().unwrap_or_else(|p| p.into_inner());
        let name = format!(
            "{prefix}-{tag}-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        run(Command::new("ip").args(["netns", "add", &name]))?;
        let ns = Netns { name };
        ns.ip(&["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// `ip -n <ns> <args>`.
    pub fn ip(&self, args: &[&str]) -> io::Result<String> {
        run(Command::new("ip").arg("-n").arg(&self.name).args(args))
    }

    /// `ip netns exec <ns> <argv>`.
    pub fn exec(&self, argv: &[&str]) -> io::Result<String> {
        run(Command::new("ip")
            .args(["netns", "exec", &self.name])
            .args(argv))
    }

    /// Creates a veth pair `a` <-> `b` inside the namespace, both up, IPv6 off on both (no
    /// router solicitations on the wire).
    pub fn add_veth_pair(&self, a: &str, b: &str) -> io::Result<()> {
        self.add_veth_pair_with_queues(a, b, 1)
    }

    /// As [`Netns::add_veth_pair`], with `queues` RX and TX queues on each end.
    pub fn add_veth_pair_with_queues(&self, a: &str, b: &str, queues: u32) -> io::Result<()> {
        let q = queues.to_string();
        self.ip(&[
            "link",
            "add",
            a,
            "numrxqueues",
            &q,
            "numtxqueues",
            &q,
            "type",
            "veth",
            "peer",
            "name",
            b,
            "numrxqueues",
            &q,
            "numtxqueues",
            &q,
        ])?;
        for dev in [a, b] {
            self.exec(&[
                "sysctl",
                "-qw",
                &format!("net.ipv6.conf.{dev}.disable_ipv6=1"),
            ])?;
            self.ip(&["link", "set", dev, "up"])?;
        }
        Ok(())
    }

    /// A counter of `/sys/class/net/<dev>/statistics/<name>` as seen inside the namespace.
    pub fn link_stat(&self, dev: &str, name: &str) -> io::Result<u64> {
        let text = self.exec(&["cat", &format!("/sys/class/net/{dev}/statistics/{name}")])?;
        text.trim()
            .parse()
            .map_err(|e| io::Error::other(format!("{dev} {name}: {e}")))
    }

    /// Runs `f` on a new thread that joins this namespace first, and waits for it.
    pub fn run_in<R: Send + 'static>(
        &self,
        f: impl FnOnce() -> R + Send + 'static,
    ) -> io::Result<R> {
        match self.spawn_in(f).join() {
            Ok(r) => r,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }

    /// Runs `f` on a new thread that joins this namespace first; the handle yields `f`'s
    /// result, or the error of opening or joining the namespace.
    pub fn spawn_in<R: Send + 'static>(
        &self,
        f: impl FnOnce() -> R + Send + 'static,
    ) -> JoinHandle<io::Result<R>> {
        let path = format!("/var/run/netns/{}", self.name);
        std::thread::spawn(move || -> io::Result<R> {
            let file = std::fs::File::open(&path)?;
            // SAFETY: `file` is an open netns file; setns moves only this (new) thread into it.
            let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
            if r != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(f())
        })
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = run(Command::new("ip").args(["netns", "del", &self.name]));
    }
}

/// The forwarding benchmarks' line topology: `gen` (`g0` 10.0.1.2/24) -- `r0` (10.0.1.1/24)
/// `rtr` `r1` (10.0.2.1/24) -- `s0` (10.0.2.2/24) `sink`, IPv6 off everywhere, and a
/// permanent neighbour 10.0.2.99 -> `s0`'s MAC on `r1`, so frames to 10.0.2.99 are forwarded
/// by `rtr` and counted at `s0` without an answer travelling back.
pub struct LineTopology {
    pub gen: Netns,
    pub rtr: Netns,
    pub sink: Netns,
}

impl LineTopology {
    /// Creates the three namespaces (tags `tags`, under the current [`set_prefix`]) and
    /// links. With `rps_cpu`, `r0`'s receive packet steering sends every frame to that CPU's
    /// backlog (so the kernel forwards there rather than in the sender's softirq).
    pub fn create(tags: [&str; 3], rps_cpu: Option<usize>) -> io::Result<Self> {
        let t = LineTopology {
            gen: Netns::create(tags[0])?,
            rtr: Netns::create(tags[1])?,
            sink: Netns::create(tags[2])?,
        };
        for (dev, peer, ns) in [("r0", "g0", &t.gen), ("r1", "s0", &t.sink)] {
            t.rtr.ip(&[
                "link",
                "add",
                dev,
                "type",
                "veth",
                "peer",
                "name",
                peer,
                "netns",
                ns.name(),
            ])?;
        }
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
        let s0 = mac_text(t.sink.mac("s0")?);
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
        if let Some(cpu) = rps_cpu {
            t.rtr.exec(&[
                "sh",
                "-c",
                &format!(
                    "echo {:x} > /sys/class/net/r0/queues/rx-0/rps_cpus",
                    1u64 << cpu
                ),
            ])?;
        }
        Ok(t)
    }
}

impl LineTopology {
    /// A 60-byte Ethernet + IPv4 + UDP frame (64 on the wire with the FCS) from `gen`'s
    /// 10.0.1.2, UDP source port `sport`, to 10.0.2.99 (which `rtr` forwards to `sink`), with
    /// a valid IPv4 header checksum: the forwarding benchmarks' offered traffic.
    pub fn udp_frame(dst: [u8; 6], src: [u8; 6], sport: u16) -> Vec<u8> {
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
        let c = zl_wire::checksum::checksum(ip);
        ip[10..12].copy_from_slice(&c.to_be_bytes());
        f[34..36].copy_from_slice(&sport.to_be_bytes());
        f[36..38].copy_from_slice(&9u16.to_be_bytes());
        f[38..40].copy_from_slice(&26u16.to_be_bytes());
        f
    }
}

/// The best-effort class's ZL-RED line (the paper's constants) for
/// [`LineTopology::router_config`].
pub const BENCH_ZL_RED: &str = r#"aqm = { kind = "zl-red", th_min = 5, p_max = 0.15, a = 10 }"#;

impl LineTopology {
    /// A `zlrouter` config for the forwarding benchmarks on this topology: `ports` (the TOML of
    /// the router's two ports, `r0` then `r1`), the route to the sink's network out of `r1`
    /// (next hop `s0`'s MAC), the 5-tuple flow key, the flow estimate when `flow_estimate`,
    /// and the QoS: the Diffserv classifier, EF strict plus best effort with `be_aqm` (a TOML
    /// `aqm = ...` line such as [`BENCH_ZL_RED`], empty for tail drop), WRR and a 100 Gbit/s
    /// shaper (so the forwarding, not the shaper, is the limit).
    pub fn router_config(ports: &str, s0: [u8; 6], flow_estimate: bool, be_aqm: &str) -> String {
        format!(
            r#"[run]
pool_buffers = 16384

[parse]
flow_key = "5-tuple"

[metrics]
flow_estimate = {flow_estimate}

{ports}
[[routes]]
prefix = "10.0.2.0/24"
port = "r1"
next_hop_mac = "{s0}"

[qos]
link_rate_bps = 100_000_000_000
shaper = {{ rate_bps = 100_000_000_000, burst_bytes = 1_000_000 }}
scheduler = {{ mode = "wrr" }}
classifier = {{ default_class = "be" }}

[[qos.classes]]
name = "ef"
strict_rank = 0
max_packets = 100

[[qos.classes]]
name = "be"
weight = 1
max_packets = 1000
{be_aqm}
"#,
            s0 = mac_text(s0),
        )
    }
}

/// Pins the calling thread to `cpu` (the benchmarks keep the generator and the router on
/// separate cores); a CPU the process may not use leaves the affinity unchanged.
pub fn pin_thread_to_cpu(cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes inside it;
    // sched_setaffinity(0, ..) applies to the calling thread only.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// `aa:bb:cc:dd:ee:ff`.
pub fn mac_text(m: [u8; 6]) -> String {
    m.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}

impl Netns {
    /// The MAC address of `dev` inside the namespace.
    pub fn mac(&self, dev: &str) -> io::Result<[u8; 6]> {
        let text = self.exec(&["cat", &format!("/sys/class/net/{dev}/address")])?;
        let mut out = [0u8; 6];
        let mut parts = text.trim().split(':');
        for o in out.iter_mut() {
            let part = parts.next().unwrap_or("");
            *o = u8::from_str_radix(part, 16).map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{dev}: not a MAC address: {}", text.trim()),
                )
            })?;
        }
        Ok(out)
    }
}
