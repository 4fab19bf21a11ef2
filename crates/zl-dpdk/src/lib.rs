//! DPDK port for zlrouter: a poll-mode ethdev behind [`zl_port::Port`], which splits into one
//! receive half per RX queue and a transmit half ([`zl_port::SplitPort`]).
//!
//! Where it sits: beside the AF_XDP port, below the data plane. It needs the `dpdk` feature
//! and the system's DPDK 22.11 (`libdpdk-dev`); without them this crate still compiles, keeps
//! its config and error types, and [`Eal::init`] answers [`DpdkError::NotBuilt`], so the data
//! plane can name DPDK ports in its config on every machine and fail with a clear message.
//!
//! Layers, bottom up (a module uses only those before it): `config` (the port and EAL configs
//! and [`DpdkError`], in every build); `eal` (the EAL handle, DPDK's error text), `lcore`
//! (other threads made lcores) and `lend` (zero-copy: mbufs lent to buffers); `device` (the
//! opened ethdev and its mbuf pools, which the queues share, and the burst size); `queue` (an
//! RX queue per receive half, a TX queue for the transmit half); `port` (opens the device and
//! its queues: `DpdkPort`); `bench` (frame-level helpers on the port).
//!
//! Contract:
//! - The EAL is initialised once per process ([`Eal::init`]), with the EAL arguments from
//!   config ([`EalConfig::args`]); a second call with the same arguments returns the same
//!   handle, with different ones an error (DPDK cannot re-initialise).
//! - `DpdkPort::open` finds the ethdev named by the config's device string, probing it as a
//!   hot-plugged device (a vdev such as `net_null0`, `net_ring0`,
//!   `net_pcap0,rx_pcap=in.pcap,tx_pcap=out.pcap`, `net_af_packet0,iface=veth0`) when the EAL
//!   arguments did not create it; then configures `queues` RX and TX queues (RSS on IP
//!   addresses and TCP/UDP ports over the RX queues, as far as the device hashes them), each RX
//!   queue with its own mbuf pool on the device's NUMA socket, and starts it.
//! - `recv` copies each received frame into a pool buffer and frees the mbufs in bulk; `send`
//!   copies each buffer into a fresh mbuf of the port's own TX pool; what `rte_eth_tx_burst`
//!   does not take is freed and counted as `tx_ring_full`. Each burst costs one FFI call each
//!   way (plus the bulk free on receive): the C shim does the per-mbuf work. Multi-segment
//!   frames are dropped and counted (`rx_too_long`).
//! - With `zero_copy`, `recv` lends each received mbuf to its pool buffer instead of copying,
//!   and any DPDK port's `send` transmits a lent mbuf as it is (`src/lend.rs`).
//! - Split, each RX queue ([`DpdkRxQueue`]) and the TX side ([`DpdkTxQueue`], TX queue 0) may
//!   run on its own thread without a lock; they share the device, which is stopped and closed
//!   when the last of them is dropped.
//!
//! # Example
//!
//! A port's config as in the router's TOML, and the EAL arguments that run without
//! hugepages or PCI devices (what the tests and CI use with `net_null` / `net_ring` vdevs);
//! [`Eal::init`] with them, then [`DpdkPort::open`], gives the [`zl_port::Port`].
//!
//! ```
//! use zl_dpdk::{DpdkPortConfig, EalConfig};
//!
//! let port: DpdkPortConfig =
//!     toml::from_str(r#"device = "net_pcap0,rx_pcap=in.pcap,tx_pcap=out.pcap""#).unwrap();
//! assert_eq!(port.ethdev_name(), "net_pcap0");
//! port.validate().unwrap();
//!
//! let eal = EalConfig::no_huge("zlr-doc");
//! assert!(eal.args.iter().any(|a| a == "--no-huge"));
//! eal.validate().unwrap();
//! // An empty argument is named by its key instead of reaching DPDK.
//! let bad = EalConfig { args: vec!["--no-pci".into(), String::new()] };
//! assert!(bad.validate().unwrap_err().to_string().contains("args[1]"));
//! ```

#[cfg(all(dpdk_available, feature = "bench"))]
mod bench;
mod config;
#[cfg(dpdk_available)]
mod device;
#[cfg(dpdk_available)]
mod eal;
#[cfg(dpdk_available)]
mod lcore;
#[cfg(all(dpdk_available, feature = "zero-copy"))]
mod lend;
#[cfg(dpdk_available)]
mod port;
#[cfg(dpdk_available)]
mod queue;

pub use config::{DpdkError, DpdkPortConfig, EalConfig, MAX_QUEUES};
#[cfg(dpdk_available)]
pub use device::EthStats;
#[cfg(dpdk_available)]
pub use eal::Eal;
#[cfg(dpdk_available)]
pub use lcore::lcore_id;
#[cfg(dpdk_available)]
pub use port::DpdkPort;
#[cfg(dpdk_available)]
pub use queue::{DpdkRxQueue, DpdkTxQueue};

/// Opens `cfg` as a [`zl_port::SplitPort`] for a data plane, after initialising the EAL with `eal`
/// (once per process: every port must pass the same `eal`). Both configs are validated first,
/// so a build without DPDK still reports a bad value before [`DpdkError::NotBuilt`].
pub fn open_boxed(
    eal: &EalConfig,
    name: &str,
    index: u16,
    cfg: &DpdkPortConfig,
) -> Result<Box<dyn zl_port::SplitPort>, DpdkError> {
    eal.validate()?;
    cfg.validate()?;
    #[cfg(dpdk_available)]
    {
        let eal = Eal::init(eal)?;
        Ok(Box::new(DpdkPort::open(eal, name, index, cfg)?))
    }
    #[cfg(not(dpdk_available))]
    {
        let _ = (name, index);
        Err(DpdkError::NotBuilt)
    }
}

/// Whether this build can drive DPDK (feature `dpdk` on and DPDK found at build time).
pub const AVAILABLE: bool = cfg!(dpdk_available);

/// The EAL handle in a build without DPDK: every call says how to get one.
#[cfg(not(dpdk_available))]
#[derive(Debug)]
pub struct Eal(());

#[cfg(not(dpdk_available))]
impl Eal {
    /// Always [`DpdkError::NotBuilt`] in this build.
    pub fn init(_config: &EalConfig) -> Result<&'static Eal, DpdkError> {
        Err(DpdkError::NotBuilt)
    }
}
