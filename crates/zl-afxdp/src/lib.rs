//! AF_XDP port for zlrouter: frames move between a NIC queue and the router through rings
//! shared with the kernel, without the socket layer.
//!
//! Where it sits: below the data plane, beside the pcap / DPDK ports; it implements
//! [`zl_port::Port`] by copying each received frame into a pool buffer and each transmitted
//! buffer into a UMEM chunk.
//!
//! Layers, bottom up (a module uses only those before it): `error` ([`AfXdpError`]), `ring`
//! (the mmap'ed rings), `insn` (the eBPF instruction), `bpf_sys` (the `bpf(2)` call),
//! `netdev` (an interface's index, MTU and MAC); `socket` ([`XskSocket`]: UMEM and rings),
//! [`program`] (the XDP program, assembled), `local_addrs` ([`LocalAddrs`], the program's
//! address maps); [`local_sync`] (keeps those maps equal to the kernel's addresses); [`bpf`]
//! (the program loaded with its maps and attached); [`halves`] (the receive and transmit
//! halves, which share the attachment and attach again after the interface comes back);
//! `port` ([`AfXdpPort`], the halves polled from one thread).
//!
//! What [`AfXdpPort::open`] does, in order:
//! 1. resolves the interface (`if_nametoindex`);
//! 2. creates an XSKMAP and loads the XDP program assembled here from raw eBPF instructions
//!    ([`program`]): by default it redirects only transit unicast IPv4 / IPv6 and passes the
//!    rest (ARP, NDP, the router's own addresses in [`LocalAddrs`], link-local, multicast,
//!    non-IP) to the kernel stack; it is attached with a BPF link in generic or native mode
//!    ([`bpf`]), so it is detached when the process exits, even on a crash;
//! 3. per configured RX queue, creates an AF_XDP socket with its own UMEM and fill /
//!    completion / RX / TX rings ([`XskSocket`]), binds it in copy or zero-copy mode, and
//!    registers it in the XSKMAP under its queue index.
//!
//! An attach or bind the kernel answers busy (EBUSY / EEXIST) is tried again for up to
//! [`BUSY_RETRY_FOR`] (a socket of a router killed a moment ago is still being released),
//! then reported with what holds the interface or queue and what removes it.
//!
//! The port splits ([`zl_port::SplitPort`]) into one receive half per queue ([`AfXdpRx`]: RX +
//! fill rings) and one transmit half ([`AfXdpTx`]: the first queue's TX + completion rings),
//! which the threaded router's workers own with no lock on the packet path ([`halves`]).
//!
//! Failures name the step and what to do: missing privileges, a missing interface, an
//! unsupported mode ([`AfXdpError`]). While running, an interface that disappears is noticed
//! within a few hundred idle polls (or at the next transmit wakeup), never spun on silently,
//! and handled per `on_gone` ([`OnGone`]): reported as [`zl_port::PortError::InterfaceGone`]
//! (the router exits naming the port), or waited for, re-attaching when it is back.
//!
//! Every frame offered for transmit is counted once: sent, refused on a full TX ring, too
//! long, dropped by the driver (a wakeup answered EBUSY in copy mode), abandoned on the ring,
//! or dropped while the interface is gone; refused wakeups (EAGAIN, ENOBUFS) are counted
//! retries ([`XskCounters`]).
//!
//! # Example
//!
//! A port's config as it appears in the router's TOML, and what opening it says when it
//! cannot: the error names the interface and what to check (opening a real interface needs
//! CAP_NET_ADMIN, CAP_NET_RAW and CAP_BPF; the data plane then drives it through
//! [`zl_port::Port`]).
//!
//! ```
//! use zl_afxdp::{AfXdpConfig, AfXdpError, AfXdpPort, XdpMode};
//!
//! let cfg: AfXdpConfig = toml::from_str(r#"ifname = "zlr-doc-none0""#).unwrap();
//! assert_eq!(cfg.queues, vec![0]);
//! assert_eq!(cfg.xdp_mode, XdpMode::Generic);
//! cfg.validate().unwrap();
//!
//! match AfXdpPort::open("wan", 0, &cfg) {
//!     Err(e @ AfXdpError::InterfaceNotFound { .. }) => {
//!         assert!(e.to_string().contains("ip link show"), "{e}")
//!     }
//!     other => panic!("{:?}", other.err()),
//! }
//!
//! // A bad value is refused before anything is opened.
//! let bad: AfXdpConfig = toml::from_str("ifname = \"eth1\"\nframe_size = 3000").unwrap();
//! assert!(matches!(bad.validate(), Err(AfXdpError::Config { .. })));
//! ```

pub mod bpf;
mod bpf_sys;
mod error;
pub mod halves;
mod insn;
mod local_addrs;
pub mod local_sync;
mod netdev;
mod port;
pub mod program;
mod ring;
mod socket;

pub use bpf::{ProgramProbe, Redirect};
pub use error::{classify, AfXdpError, ModeContext, Op};
pub use halves::{AfXdpRx, AfXdpTx, REATTACH_INTERVAL};
pub use local_addrs::LocalAddrs;
pub use netdev::interface_index;
pub use port::{AfXdpPort, BUSY_RETRY_FOR};
pub use socket::{XskCounters, XskKernelStats, XskRx, XskSocket, XskTx};

/// How the XDP program is attached (`xdp_mode = "generic" | "native"` in config).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum XdpMode {
    /// Generic (SKB) mode: works on every interface, after the kernel has built an skb.
    Generic,
    /// Native (driver) mode: runs in the driver's NAPI poll; needs driver support (veth has
    /// it).
    Native,
}

/// How the AF_XDP socket is bound (`bind_mode = "copy" | "zero-copy"` in config).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BindMode {
    /// The kernel copies frames between its buffers and the UMEM (every driver).
    Copy,
    /// The NIC DMAs straight into the UMEM (drivers with an XSK pool: i40e, ice, mlx5, ...;
    /// not veth).
    ZeroCopy,
}

/// What the port does when its interface disappears while running (`on_gone = "exit" |
/// "wait"` in config).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum OnGone {
    /// Report [`zl_port::PortError::InterfaceGone`]: the data plane stops and the router
    /// exits with a message naming the port (exit code 2).
    #[default]
    Exit,
    /// Log once (`tracing` warn), count every frame handed over for transmit as a
    /// `tx_link_gone` drop, look for an interface of the same name every
    /// [`REATTACH_INTERVAL`] of port time, and re-attach (new XDP link, new sockets and UMEM)
    /// when one is back.
    Wait,
}

/// Configuration of one AF_XDP port. Deserialises from a table where only `ifname` is
/// required, e.g. `{ ifname = "eth1", queues = [0, 1], xdp_mode = "native" }`; call
/// [`AfXdpConfig::validate`] (or [`crate::AfXdpPort::open`], which does) for the value checks.
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct AfXdpConfig {
    /// Interface name, e.g. `eth1`.
    pub ifname: String,
    /// RX queues to open one socket on each (TX uses the first one's socket).
    #[serde(default = "defaults::queues")]
    pub queues: Vec<u32>,
    #[serde(default = "defaults::xdp_mode")]
    pub xdp_mode: XdpMode,
    #[serde(default = "defaults::bind_mode")]
    pub bind_mode: BindMode,
    /// UMEM chunk size: 2048 or 4096 (aligned chunks must be a power of two within a page).
    #[serde(default = "defaults::frame_size")]
    pub frame_size: u32,
    /// RX and fill ring entries, also the number of RX chunks (a power of two).
    #[serde(default = "defaults::ring_size")]
    pub rx_ring_size: u32,
    /// TX and completion ring entries, also the number of TX chunks (a power of two).
    #[serde(default = "defaults::ring_size")]
    pub tx_ring_size: u32,
    /// Load and attach the redirect program. Off gives a transmit-only port (nothing is
    /// redirected to its sockets).
    #[serde(default = "defaults::attach_program")]
    pub attach_program: bool,
    /// Which frames the program redirects to the sockets: `transit` (default) or `all`.
    #[serde(default)]
    pub redirect: Redirect,
    /// Exit (default) or wait when the interface disappears mid-run.
    #[serde(default)]
    pub on_gone: OnGone,
}

mod defaults {
    pub fn queues() -> Vec<u32> {
        vec![0]
    }
    pub fn xdp_mode() -> super::XdpMode {
        super::XdpMode::Generic
    }
    pub fn bind_mode() -> super::BindMode {
        super::BindMode::Copy
    }
    pub fn frame_size() -> u32 {
        2048
    }
    pub fn ring_size() -> u32 {
        2048
    }
    pub fn attach_program() -> bool {
        true
    }
}

impl AfXdpConfig {
    /// Queue 0, generic XDP, copy mode, 2 KiB chunks, 2048-entry rings.
    pub fn new(ifname: &str) -> Self {
        AfXdpConfig {
            ifname: ifname.to_owned(),
            queues: defaults::queues(),
            xdp_mode: defaults::xdp_mode(),
            bind_mode: defaults::bind_mode(),
            frame_size: defaults::frame_size(),
            rx_ring_size: defaults::ring_size(),
            tx_ring_size: defaults::ring_size(),
            attach_program: defaults::attach_program(),
            redirect: Redirect::Transit,
            on_gone: OnGone::Exit,
        }
    }

    /// Checks the values the kernel would reject with a bare EINVAL.
    pub fn validate(&self) -> Result<(), AfXdpError> {
        let bad = |reason: String| {
            Err(AfXdpError::Config {
                ifname: self.ifname.clone(),
                reason,
            })
        };
        if self.ifname.is_empty()
            || self.ifname.len() >= libc::IFNAMSIZ
            || self.ifname.contains(['\0', '/', ' '])
        {
            return bad(format!(
                "`{}` is not a valid interface name (1..{} bytes, no NUL, '/' or space)",
                self.ifname,
                libc::IFNAMSIZ - 1
            ));
        }
        if self.queues.is_empty() {
            return bad("queues must name at least one RX queue".into());
        }
        let mut sorted = self.queues.clone();
        sorted.sort_unstable();
        sorted.dedup();
        if sorted.len() != self.queues.len() {
            return bad(format!("queues {:?} name a queue twice", self.queues));
        }
        if !matches!(self.frame_size, 2048 | 4096) {
            return bad(format!(
                "frame_size {} must be 2048 or 4096",
                self.frame_size
            ));
        }
        for (key, v) in [
            ("rx_ring_size", self.rx_ring_size),
            ("tx_ring_size", self.tx_ring_size),
        ] {
            if !v.is_power_of_two() || !(64..=65536).contains(&v) {
                return bad(format!("{key} {v} must be a power of two in 64..=65536"));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_validation_names_the_key() {
        let mut c = AfXdpConfig::new("veth0");
        assert!(c.validate().is_ok());
        c.rx_ring_size = 1000;
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("rx_ring_size"));
        let mut c = AfXdpConfig::new("veth0");
        c.frame_size = 3000;
        assert!(c.validate().unwrap_err().to_string().contains("frame_size"));
        let mut c = AfXdpConfig::new("veth0");
        c.queues = vec![1, 1];
        assert!(c.validate().unwrap_err().to_string().contains("twice"));
        let c = AfXdpConfig::new("a-name-longer-than-15");
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("interface name"));
    }

    #[test]
    fn config_from_toml_with_defaults_and_modes() {
        let c: AfXdpConfig = toml::from_str(r#"ifname = "eth1""#).unwrap();
        assert_eq!(c, AfXdpConfig::new("eth1"));
        let c: AfXdpConfig = toml::from_str(
            r#"
            ifname = "eth2"
            queues = [0, 1, 2]
            xdp_mode = "native"
            bind_mode = "zero-copy"
            rx_ring_size = 4096
            on_gone = "wait"
            "#,
        )
        .unwrap();
        assert_eq!(c.queues, vec![0, 1, 2]);
        assert_eq!(
            (c.xdp_mode, c.bind_mode),
            (XdpMode::Native, BindMode::ZeroCopy)
        );
        assert_eq!((c.rx_ring_size, c.tx_ring_size), (4096, 2048));
        assert_eq!(c.on_gone, OnGone::Wait);
        let err = toml::from_str::<AfXdpConfig>("ifname = \"e\"\non_gone = \"retry\"")
            .unwrap_err()
            .to_string();
        assert!(err.contains("retry"), "{err}");
        let err = toml::from_str::<AfXdpConfig>("ifname = \"e\"\nxdp_mode = \"fast\"")
            .unwrap_err()
            .to_string();
        assert!(err.contains("fast"), "{err}");
        let err = toml::from_str::<AfXdpConfig>("ifname = \"e\"\nrings = 4")
            .unwrap_err()
            .to_string();
        assert!(err.contains("rings"), "{err}");
    }
}
