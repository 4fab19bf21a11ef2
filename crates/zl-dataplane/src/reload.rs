//! What a config reload may change while the router forwards, decided before anything is
//! touched: [`plan`] compares the running config with the re-read one and either returns the
//! [`ReloadPlan`] (which parts change live) or refuses the reload with a [`ReloadError`]
//! naming the key that cannot change live, or the new config's own validation error. A
//! refused reload changes nothing: the old config keeps running.
//!
//! Live (applied between polls, queued packets staying queued and counters continuing):
//! the egress QoS of every port (AQM parameters, class weights and quanta, meter and shaper
//! rates, buffer rules: `qos` and `ports[i].qos`), the static routes (`routes`), the priority
//! map (`priority`) and the flow-estimate settings (`metrics.flow_estimate`,
//! `metrics.flow_estimate_zombie`).
//!
//! Not live, refused naming the key: the set of ports (adding or removing one: `ports`), a
//! port's name, backend, MAC, addresses, MTU or backend settings (`ports[i].kind`,
//! `ports[i].af_xdp`, `ports[i].address`, `ports[i].mtu`, ...), the ICMP settings (`icmp`),
//! the forwarding mode and bridges (`forwarding`), the parser (`parse`), the run's shape
//! (`run.*`: workers, buffers, duration, seed), the metrics address (`metrics.listen`) and
//! DPDK's EAL (`dpdk`). decided: these need the ports reopened, the buffer pool rebuilt or
//! the run restarted, which loses what is queued; an operator restarts for them.

use crate::config::{ConfigError, PortParams, RouterConfig};

/// What changes live, port by port.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReloadPlan {
    /// Ports (by index) whose egress QoS parameters change.
    pub qos_ports: Vec<usize>,
    /// The static routes change.
    pub routes: bool,
    /// The priority map changes.
    pub priority: bool,
    /// The flow-estimate settings change.
    pub flow_estimate: bool,
}

impl ReloadPlan {
    /// True when the new config is the running one.
    pub fn is_empty(&self) -> bool {
        *self == ReloadPlan::default()
    }

    /// The changed keys, for the reload's log line.
    pub fn keys(&self) -> Vec<String> {
        let mut k: Vec<String> = self
            .qos_ports
            .iter()
            .map(|p| format!("ports[{p}].qos"))
            .collect();
        if self.routes {
            k.push("routes".into());
        }
        if self.priority {
            k.push("priority".into());
        }
        if self.flow_estimate {
            k.push("metrics.flow_estimate".into());
        }
        k
    }
}

/// Why a reload was refused (the old config keeps running).
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    /// The new config does not load or validate.
    #[error("the new config is invalid: {0}")]
    Invalid(#[from] ConfigError),
    /// A change that needs a restart.
    #[error("`{key}` cannot change while the router runs ({what}); restart to apply it")]
    NotLive { key: String, what: String },
}

fn not_live(key: impl Into<String>, what: impl Into<String>) -> ReloadError {
    ReloadError::NotLive {
        key: key.into(),
        what: what.into(),
    }
}

/// The port's I/O identity: everything but its QoS.
fn port_identity(i: usize, old: &PortParams, new: &PortParams) -> Result<(), ReloadError> {
    let key = |k: &str| format!("ports[{i}].{k}");
    if old.name != new.name {
        return Err(not_live(
            key("name"),
            format!("`{}` renamed `{}`", old.name, new.name),
        ));
    }
    if old.kind != new.kind {
        return Err(not_live(
            key("kind"),
            format!(
                "port `{}`'s backend {:?} -> {:?}",
                old.name, old.kind, new.kind
            ),
        ));
    }
    if old.mac != new.mac {
        return Err(not_live(key("mac"), format!("port `{}`", old.name)));
    }
    let backend = [
        ("generator", old.generator != new.generator),
        ("pcap", old.pcap != new.pcap),
        ("af_xdp", old.af_xdp != new.af_xdp),
        ("dpdk", old.dpdk != new.dpdk),
        // Read into the forwarding state at build (`crate::icmp`).
        ("address", old.address != new.address),
        ("mtu", old.mtu != new.mtu),
    ];
    if let Some((k, _)) = backend.iter().find(|(_, changed)| *changed) {
        return Err(not_live(
            key(k),
            format!("port `{}`'s backend settings", old.name),
        ));
    }
    Ok(())
}

/// Decides what a reload from `old` to `new` changes, or why it is refused. `new` is
/// validated first.
pub fn plan(old: &RouterConfig, new: &RouterConfig) -> Result<ReloadPlan, ReloadError> {
    new.validate()?;
    if old.ports.len() != new.ports.len() {
        let names =
            |c: &RouterConfig| -> Vec<String> { c.ports.iter().map(|p| p.name.clone()).collect() };
        let (o, n) = (names(old), names(new));
        let what = match (
            n.iter().find(|p| !o.contains(p)),
            o.iter().find(|p| !n.contains(p)),
        ) {
            (Some(added), _) if n.len() > o.len() => format!("adds port `{added}`"),
            (_, Some(removed)) => format!("removes port `{removed}`"),
            _ => format!("{} ports -> {}", o.len(), n.len()),
        };
        return Err(not_live("ports", what));
    }
    for (i, (o, n)) in old.ports.iter().zip(&new.ports).enumerate() {
        port_identity(i, o, n)?;
    }
    let r = (&old.run, &new.run);
    for (key, changed) in [
        ("run.rx_workers", r.0.rx_workers != r.1.rx_workers),
        ("run.pool_buffers", r.0.pool_buffers != r.1.pool_buffers),
        ("run.work_budget", r.0.work_budget != r.1.work_budget),
        ("run.duration_s", r.0.duration_s != r.1.duration_s),
        ("run.drain_s", r.0.drain_s != r.1.drain_s),
        ("run.seed", r.0.seed != r.1.seed),
        ("forwarding", old.forwarding != new.forwarding),
        ("parse", old.parse != new.parse),
        ("metrics.listen", old.metrics.listen != new.metrics.listen),
        ("dpdk", old.dpdk != new.dpdk),
        ("icmp", old.icmp != new.icmp),
    ] {
        if changed {
            return Err(not_live(key, "changed"));
        }
    }
    // A port's effective QoS: its own table, else the global one.
    let qos = |c: &RouterConfig, p: &PortParams| p.qos.clone().or_else(|| c.qos.clone());
    let qos_ports = old
        .ports
        .iter()
        .zip(&new.ports)
        .enumerate()
        .filter(|(_, (o, n))| qos(old, o) != qos(new, n))
        .map(|(i, _)| i)
        .collect();
    Ok(ReloadPlan {
        qos_ports,
        routes: old.routes != new.routes,
        priority: old.priority != new.priority,
        flow_estimate: old.metrics.flow_estimate != new.metrics.flow_estimate
            || old.metrics.flow_estimate_zombie != new.metrics.flow_estimate_zombie,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::DEFAULT_CONFIG;

    fn cfg(text: &str) -> RouterConfig {
        RouterConfig::from_toml(text).unwrap()
    }

    fn default() -> RouterConfig {
        cfg(DEFAULT_CONFIG)
    }

    #[test]
    fn the_same_config_changes_nothing() {
        let p = plan(&default(), &default()).unwrap();
        assert!(p.is_empty(), "{p:?}");
    }

    #[test]
    fn a_link_rate_is_a_live_qos_change_of_every_port_using_the_global_qos() {
        let old = default();
        let mut new = old.clone();
        let q = new
            .qos
            .as_mut()
            .expect("the default config has a global [qos]");
        q.link_rate_bps = q.link_rate_bps.map(|r| r / 2).or(Some(1_000_000));
        let p = plan(&old, &new).unwrap();
        let users: Vec<usize> = (0..old.ports.len())
            .filter(|&i| old.ports[i].qos.is_none())
            .collect();
        assert!(!users.is_empty());
        assert_eq!(p.qos_ports, users);
        assert!(!p.routes && !p.priority && !p.flow_estimate);
    }

    #[test]
    fn adding_a_port_is_refused_naming_the_key_and_the_port() {
        let old = default();
        let mut new = old.clone();
        let mut extra = new.ports[0].clone();
        extra.name = "extra0".into();
        new.ports.push(extra);
        let e = plan(&old, &new).unwrap_err();
        let text = e.to_string();
        assert!(
            matches!(e, ReloadError::NotLive { ref key, .. } if key == "ports"),
            "{text}"
        );
        assert!(text.contains("adds port `extra0`"), "{text}");
        // And removing one.
        let e = plan(&new, &old).unwrap_err().to_string();
        assert!(
            e.contains("`ports`") && e.contains("removes port `extra0`"),
            "{e}"
        );
    }

    #[test]
    fn a_port_identity_change_is_refused_naming_the_key() {
        let old = default();
        let mut new = old.clone();
        new.ports[0].mac = "02:00:00:00:00:99".into();
        let e = plan(&old, &new).unwrap_err();
        assert!(
            matches!(&e, ReloadError::NotLive { key, .. } if key == "ports[0].mac"),
            "{e}"
        );
    }

    #[test]
    fn run_shape_changes_are_refused_naming_the_key() {
        let old = default();
        let mut new = old.clone();
        new.run.rx_workers = 2;
        let e = plan(&old, &new).unwrap_err().to_string();
        assert!(e.contains("`run.rx_workers`"), "{e}");
    }

    #[test]
    fn an_invalid_config_is_refused_with_its_error() {
        let old = default();
        let mut new = old.clone();
        new.run.duration_s = 0.0;
        let e = plan(&old, &new).unwrap_err();
        assert!(matches!(e, ReloadError::Invalid(_)), "{e}");
        assert!(e.to_string().contains("run.duration_s"), "{e}");
    }

    #[test]
    fn routes_and_flow_estimate_are_live() {
        let old = default();
        let mut new = old.clone();
        new.metrics.flow_estimate = !old.metrics.flow_estimate;
        let p = plan(&old, &new).unwrap();
        assert!(p.flow_estimate && p.qos_ports.is_empty(), "{p:?}");
    }
}
