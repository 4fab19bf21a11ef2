//! Configuration and errors of the DPDK port; present in every build.

/// EAL arguments, as they would follow the program name on a DPDK command line
/// (`args = ["--no-huge", "--no-pci", ...]` in config).
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct EalConfig {
    pub args: Vec<String>,
}

impl EalConfig {
    /// Arguments that run anywhere, without hugepages or PCI devices: `--no-huge --no-pci
    /// -m 512 --file-prefix <prefix> -l 0 --log-level=*:warning`. The unique prefix keeps
    /// concurrent processes (CI jobs, tests, testpmd) apart; their runtime files go to
    /// `/var/run/dpdk/<prefix>`.
    pub fn no_huge(file_prefix: &str) -> Self {
        EalConfig {
            args: [
                "--no-huge",
                "--no-pci",
                "-m",
                "512",
                "--file-prefix",
                file_prefix,
                "-l",
                "0",
                "--log-level=*:warning",
            ]
            .iter()
            .map(|s| s.to_string())
            .collect(),
        }
    }

    /// Checks what DPDK would otherwise reject obscurely: an empty argument or one holding
    /// a NUL. The error names the key (`args[i]`).
    pub fn validate(&self) -> Result<(), DpdkError> {
        for (i, a) in self.args.iter().enumerate() {
            if a.is_empty() || a.contains('\0') {
                return Err(DpdkError::EalConfig {
                    key: format!("args[{i}]"),
                    reason: format!("{a:?} must be a non-empty string without NUL"),
                });
            }
        }
        Ok(())
    }
}

/// One DPDK port. Deserialises from a table where only `device` is required.
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct DpdkPortConfig {
    /// The device: an ethdev name created by the EAL arguments (`net_null0` after
    /// `--vdev net_null0`), a PCI address, or devargs to hot-plug (`net_ring0`,
    /// `net_pcap0,rx_pcap=in.pcap,tx_pcap=out.pcap`).
    pub device: String,
    #[serde(default = "defaults::descriptors")]
    pub rx_descriptors: u16,
    #[serde(default = "defaults::descriptors")]
    pub tx_descriptors: u16,
    /// Mbufs in the port's pool (DPDK likes 2^n - 1).
    #[serde(default = "defaults::mbufs")]
    pub mbufs: u32,
    /// Per-lcore mbuf cache.
    #[serde(default = "defaults::mbuf_cache")]
    pub mbuf_cache: u32,
    /// Receive queues and transmit queues (as many of each). Above 1 the device spreads
    /// received flows over its receive queues by RSS where it can; each receive queue has its
    /// own pool of `mbufs` mbufs and becomes its own receive half (`zl_port::SplitPort`).
    #[serde(default = "defaults::queues")]
    pub queues: u16,
    /// Received frames stay in their mbufs, lent to the data plane's buffers, and a DPDK
    /// port transmits such a frame as it is (no copy either way). The RX pools then also hold
    /// the frames the data plane queues: size `mbufs` for them.
    #[serde(default)]
    pub zero_copy: bool,
}

/// The most queues of each kind a port may have (DPDK's `RTE_MAX_QUEUES_PER_PORT`).
pub const MAX_QUEUES: u16 = 1024;

mod defaults {
    pub fn descriptors() -> u16 {
        1024
    }
    pub fn mbufs() -> u32 {
        8191
    }
    pub fn mbuf_cache() -> u32 {
        256
    }
    pub fn queues() -> u16 {
        1
    }
}

impl DpdkPortConfig {
    /// One queue each way, 1024 RX / TX descriptors, 8191 mbufs, a 256-mbuf cache.
    pub fn new(device: &str) -> Self {
        DpdkPortConfig {
            device: device.to_owned(),
            rx_descriptors: defaults::descriptors(),
            tx_descriptors: defaults::descriptors(),
            mbufs: defaults::mbufs(),
            mbuf_cache: defaults::mbuf_cache(),
            queues: defaults::queues(),
            zero_copy: false,
        }
    }

    /// The ethdev name: the device string up to its first comma.
    pub fn ethdev_name(&self) -> &str {
        self.device.split(',').next().unwrap_or("")
    }

    pub fn validate(&self) -> Result<(), DpdkError> {
        let bad = |reason: String| {
            Err(DpdkError::Config {
                device: self.device.clone(),
                reason,
            })
        };
        if self.ethdev_name().is_empty() || self.device.contains('\0') {
            return bad("device must name an ethdev (e.g. net_null0) and hold no NUL".into());
        }
        if self.rx_descriptors == 0 || self.tx_descriptors == 0 {
            return bad("rx_descriptors and tx_descriptors must be > 0".into());
        }
        if self.queues == 0 || self.queues > MAX_QUEUES {
            return bad(format!("queues {} must be 1..={MAX_QUEUES}", self.queues));
        }
        if self.zero_copy && !cfg!(feature = "zero-copy") {
            return bad(
                "zero_copy = true needs a build with zero-copy DPDK (zlrouter's cargo \
                 feature `dpdk-zero-copy`, zl-dpdk's `zero-copy`)"
                    .into(),
            );
        }
        if self.mbufs < u32::from(self.rx_descriptors) + 64 {
            return bad(format!(
                "mbufs {} must exceed rx_descriptors {} by at least one burst",
                self.mbufs, self.rx_descriptors
            ));
        }
        if self.mbuf_cache > 512 || self.mbuf_cache > self.mbufs / 2 {
            return bad(format!(
                "mbuf_cache {} must be <= 512 and <= mbufs / 2",
                self.mbuf_cache
            ));
        }
        Ok(())
    }
}

/// Everything that can go wrong with DPDK.
#[derive(Debug, thiserror::Error)]
pub enum DpdkError {
    #[error(
        "this zlrouter was built without DPDK: rebuild with `--features dpdk` on a machine with \
         libdpdk-dev 22.11, pkg-config and libclang-dev"
    )]
    NotBuilt,
    #[error("invalid EAL config `{key}`: {reason}")]
    EalConfig { key: String, reason: String },
    #[error("invalid DPDK config for `{device}`: {reason}")]
    Config { device: String, reason: String },
    #[error("rte_eal_init({args:?}) failed: {reason}")]
    EalInit { args: Vec<String>, reason: String },
    #[error(
        "the EAL is already initialised with {existing:?}; DPDK allows one initialisation per \
         process, so every port must share those arguments (asked for {requested:?})"
    )]
    EalArgsDiffer {
        existing: Vec<String>,
        requested: Vec<String>,
    },
    #[error("no DPDK device `{device}`: probing it failed: {reason}")]
    NoSuchDevice { device: String, reason: String },
    #[error("DPDK port `{device}`: {op} failed: {reason}")]
    Port {
        device: String,
        op: &'static str,
        reason: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ethdev_name_is_the_devargs_head() {
        let c = DpdkPortConfig::new("net_pcap0,rx_pcap=a.pcap,tx_pcap=b.pcap");
        assert_eq!(c.ethdev_name(), "net_pcap0");
        assert!(c.validate().is_ok());
    }

    #[test]
    fn bad_configs_name_the_key() {
        let mut c = DpdkPortConfig::new("net_null0");
        c.mbufs = 100;
        assert!(c.validate().unwrap_err().to_string().contains("mbufs"));
        let mut c = DpdkPortConfig::new("net_null0");
        c.mbuf_cache = 1000;
        assert!(c.validate().unwrap_err().to_string().contains("mbuf_cache"));
        assert!(DpdkPortConfig::new(",x").validate().is_err());
        for q in [0, MAX_QUEUES + 1] {
            let mut c = DpdkPortConfig::new("net_null0");
            c.queues = q;
            assert!(c.validate().unwrap_err().to_string().contains("queues"));
        }
    }

    #[test]
    fn configs_from_toml() {
        let p: DpdkPortConfig = toml::from_str(r#"device = "net_null0""#).unwrap();
        assert_eq!(p, DpdkPortConfig::new("net_null0"));
        let p: DpdkPortConfig = toml::from_str("device = \"0000:3b:00.0\"\nmbufs = 16383").unwrap();
        assert_eq!(p.mbufs, 16383);
        let e: EalConfig = toml::from_str(r#"args = ["--no-huge", "-l", "0"]"#).unwrap();
        assert_eq!(e.args, ["--no-huge", "-l", "0"]);
        let p: DpdkPortConfig = toml::from_str("device = \"net_null0\"\nqueues = 4").unwrap();
        assert_eq!((p.queues, p.zero_copy), (4, false));
        let p: DpdkPortConfig = toml::from_str("device = \"n\"\nzero_copy = true").unwrap();
        assert!(p.zero_copy);
        assert!(toml::from_str::<DpdkPortConfig>("device = \"x\"\nqueue = 2").is_err());
    }

    /// `zero_copy = true` needs the build feature; the error names it.
    #[test]
    fn zero_copy_needs_its_build_feature() {
        let mut p = DpdkPortConfig::new("net_null0");
        p.zero_copy = true;
        let checked = p.validate();
        if cfg!(feature = "zero-copy") {
            assert!(checked.is_ok(), "{checked:?}");
        } else {
            let e = checked.unwrap_err().to_string();
            assert!(
                e.contains("zero_copy") && e.contains("dpdk-zero-copy"),
                "{e}"
            );
        }
    }

    #[test]
    fn bad_eal_args_name_the_key() {
        let e = EalConfig {
            args: vec!["--no-huge".into(), String::new()],
        };
        assert!(e.validate().unwrap_err().to_string().contains("args[1]"));
        assert!(EalConfig::no_huge("p").validate().is_ok());
    }

    #[test]
    fn eal_defaults_need_no_hugepages() {
        let e = EalConfig::no_huge("zlr-x");
        assert!(e.args.iter().any(|a| a == "--no-huge"));
        assert!(e.args.windows(2).any(|w| w == ["--file-prefix", "zlr-x"]));
    }
}
