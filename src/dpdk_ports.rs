//! DPDK ports of the router config: `kind = "dpdk"` with a `[ports.dpdk]` table
//! (`zl_dpdk::DpdkPortConfig`) and the EAL from the top-level `[dpdk]` table
//! (`zl_dpdk::EalConfig`).
//!
//! The EAL is initialised once per process, before the first DPDK port is opened; without a
//! `[dpdk]` table it runs without hugepages or PCI devices (`EalConfig::no_huge`) under the
//! file prefix `zlrouter-<pid>`. decided: both tables are checked (types, unknown keys,
//! values; the error names the key) in every build, so a binary built without the `dpdk`
//! feature still reports a bad value before saying it cannot open the port.

use zl_dataplane::config::PortParams;
use zl_dataplane::port::SinkPort;
use zl_dataplane::{BoxedPort, BuildError, RouterConfig};
use zl_dpdk::{DpdkError, DpdkPortConfig, EalConfig};

/// Opens the DPDK ports of one build.
pub struct DpdkOpener {
    /// `zlrouter check`: in a build without DPDK, a port that passes every check is stood in
    /// for by a sink so the rest of the config is still built and checked.
    check_only: bool,
    /// Ports stood in for, reported by [`DpdkOpener::finish_check`].
    not_built: Vec<String>,
}

fn key_error(key: &str, e: toml::de::Error) -> String {
    format!("`{key}`: {}", e.to_string().trim_end())
}

/// The EAL arguments of `cfg` (`[dpdk]`, or the no-hugepage defaults).
pub fn eal_config(cfg: &RouterConfig) -> Result<EalConfig, String> {
    let eal = match &cfg.dpdk {
        None => EalConfig::no_huge(&format!("zlrouter-{}", std::process::id())),
        Some(table) => toml::Value::Table(table.clone())
            .try_into()
            .map_err(|e| key_error("dpdk", e))?,
    };
    eal.validate().map_err(|e| format!("`dpdk`: {e}"))?;
    Ok(eal)
}

impl DpdkOpener {
    /// For `zlrouter run`: every DPDK port is opened, or the build fails.
    pub fn open_all() -> Self {
        DpdkOpener {
            check_only: false,
            not_built: Vec::new(),
        }
    }

    /// For `zlrouter check`: see [`DpdkOpener::finish_check`].
    pub fn check() -> Self {
        DpdkOpener {
            check_only: true,
            not_built: Vec::new(),
        }
    }

    /// Opens port `i` (of kind `dpdk`).
    pub fn open(
        &mut self,
        cfg: &RouterConfig,
        i: usize,
        p: &PortParams,
    ) -> Result<BoxedPort, BuildError> {
        let fail = |detail: String| BuildError::External {
            port: p.name.clone(),
            detail,
        };
        let eal = eal_config(cfg).map_err(fail)?;
        let key = format!("ports[{i}].dpdk");
        let table = p.dpdk.clone().unwrap_or_default();
        let port_cfg: DpdkPortConfig = toml::Value::Table(table)
            .try_into()
            .map_err(|e| fail(key_error(&key, e)))?;
        match zl_dpdk::open_boxed(&eal, &p.name, i as u16, &port_cfg) {
            Ok(port) => Ok(port),
            Err(DpdkError::NotBuilt) if self.check_only => {
                self.not_built.push(p.name.clone());
                Ok(Box::new(SinkPort::new(&p.name)))
            }
            Err(e @ DpdkError::Config { .. }) => Err(fail(format!("`{key}`: {e}"))),
            Err(e) => Err(fail(e.to_string())),
        }
    }

    /// After a successful check build: an error when some DPDK port could not be opened
    /// because this binary has no DPDK.
    pub fn finish_check(self) -> Result<(), String> {
        if self.not_built.is_empty() {
            return Ok(());
        }
        Err(format!(
            "DPDK port(s) {:?}: {} (the rest of the config is valid)",
            self.not_built,
            DpdkError::NotBuilt
        ))
    }
}
