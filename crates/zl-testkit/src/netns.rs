//! Throw-away network namespaces for the tests and benchmarks (Linux, root).
//!
//! A [`Netns`] is created with a unique `<prefix>-` name (`zlr-` unless a test binary set
//! its own prefix with [`set_prefix`]) and deleted on drop, also when a test panics;
//! interfaces inside it (veth pairs) go with it; [`veth_pair`] makes one with a veth pair in
//! it. [`Netns::run_in`] and [`Netns::spawn_in`] run a closure on a fresh thread that has
//! joined the namespace, so the caller's thread never changes namespace.

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

    /// Waits until `dev` is operationally up inside the namespace (`operstate` reads `up`), or
    /// `within` has passed (an error naming the last state read). A veth end that was just set
    /// up gets its carrier, and its qdisc, only when the kernel's link watcher runs: until
    /// then it drops what it sends.
    pub fn wait_oper_up(&self, dev: &str, within: std::time::Duration) -> io::Result<()> {
        let deadline = std::time::Instant::now() + within;
        loop {
            let state = self.exec(&["cat", &format!("/sys/class/net/{dev}/operstate")])?;
            if state.trim() == "up" {
                return Ok(());
            }
            if std::time::Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("{dev} still {} after {within:?}", state.trim()),
                ));
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }

    /// Waits until `dev` has an IPv6 link-local address that is no longer tentative, or
    /// `within` has passed (an error naming what `ip -6 addr` last showed). The kernel sends a
    /// neighbour solicitation that no packet of its own asked for (RTM_NEWNEIGH with NTF_USE,
    /// or a forwarded packet's next hop) only from a link-local address that has passed
    /// duplicate address detection: until then it sends nothing, and after three retries
    /// (3 s) it gives the entry up. Set `net.ipv6.conf.<dev>.accept_dad=0` before the address
    /// is made (the link set up, or IPv6 enabled) to skip the 1-2 s of DAD.
    pub fn wait_link_local(&self, dev: &str, within: std::time::Duration) -> io::Result<()> {
        let deadline = std::time::Instant::now() + within;
        loop {
            let shown = self.ip(&["-6", "-o", "addr", "show", "dev", dev, "scope", "link"])?;
            if shown.lines().any(|l| !l.contains("tentative")) {
                return Ok(());
            }
            if std::time::Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!(
                        "{dev} has no usable link-local address after {within:?}: {:?}",
                        shown.trim()
                    ),
                ));
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
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

/// A fresh namespace (tag `ns_tag`) with one veth pair `<if_prefix>a<n>` <-> `<if_prefix>b<n>`
/// in it, `n` from the pid: the setup of the tests that run routers on the two ends of one
/// link. `Err` is why it cannot be made here (not root, no namespaces, no veth), for
/// [`skip`]. Interface names have at most 15 bytes (IFNAMSIZ), so `if_prefix` at most 9.
pub fn veth_pair(ns_tag: &str, if_prefix: &str) -> Result<(Netns, String, String), String> {
    assert!(
        if_prefix.len() <= 9,
        "{if_prefix}: interface names have at most 15 bytes"
    );
    if !is_root() {
        return Err("needs root".into());
    }
    let ns =
        Netns::create(ns_tag).map_err(|e| format!("cannot create a network namespace: {e}"))?;
    let tag = std::process::id() % 100_000;
    let (a, b) = (format!("{if_prefix}a{tag}"), format!("{if_prefix}b{tag}"));
    ns.add_veth_pair(&a, &b)
        .map_err(|e| format!("cannot create a veth pair: {e}"))?;
    Ok((ns, a, b))
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = run(Command::new("ip").args(["netns", "del", &self.name]));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_veth_pair_comes_up_inside_its_namespace() {
        let (ns, a, b) = match veth_pair("vethpair", "zltkv") {
            Ok(made) => made,
            Err(why) => return skip("veth_pair test", &why),
        };
        for dev in [&a, &b] {
            assert!(dev.len() <= 15, "{dev}");
            ns.wait_oper_up(dev, std::time::Duration::from_secs(5))
                .unwrap();
        }
    }
}
