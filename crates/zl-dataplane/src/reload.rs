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
//! kernel routing's settings (`routing`), the drop capture (`capture`), `metrics.top_flows`,
//! the forwarding mode and bridges (`forwarding`), the parser (`parse`), the run's shape
//! (`run.*`: workers, buffers, duration, seed), the control endpoint (`metrics.listen`,
//! `metrics.max_connections`, `metrics.request_timeout_s`, `metrics.token_file`) and
//! DPDK's EAL (`dpdk`); a port's classes themselves (their number, names, ring sizes
//! `max_packets`, one policy for every color or one per color); and, with kernel routing,
//! the static routes (the kernel's table is the live one there: `ip route`). decided: these
//! need the ports reopened, the buffer pool or the class rings rebuilt or the run
//! restarted, which loses what is queued; an operator restarts for them.
//!
//! How a reload reaches a running router: a [`Reloader`] (on the control thread, asked by
//! SIGHUP or by `zlrouter reload` through the control endpoint) re-reads the config file,
//! [`plan`]s, builds what changes ([`LiveUpdate`]: new QoS engines' parts, Zombie Lists,
//! the priority map; allocations and validation happen here, off the packet path), applies
//! static route changes to the shared lock-free table, and posts the rest in a
//! [`ReloadSlot`]. The forwarding loop looks at the slot once per poll (one relaxed load of
//! a flag when nothing is pending), installs the update between two polls and answers; the
//! [`Reloader`] waits for that answer ([`APPLY_TIMEOUT`]) before it reports the reload done.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use zl_zombie::ZombieList;

use crate::config::{PortParams, RouteSource, RouterConfig};
use crate::egress::{port_list, qos_error, EgressUpdate};
use crate::error::ConfigError;
use crate::flows::FlowTable;
use crate::priority::PriorityMap;
use crate::route::{NextHop, Prefix, RouteTable};

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
    /// The router runs its built-in default config: there is no file to re-read.
    #[error("the router runs the built-in default config: there is no config file to re-read")]
    NoFile,
    /// The forwarding loop did not install the update (it refused it, or the run is ending).
    #[error("the forwarding loop did not apply the reload: {0}")]
    NotApplied(String),
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

/// Port `i` keeps its classes: their number, names, ring sizes, and policy layout.
fn same_classes(i: usize, old: &RouterConfig, new: &RouterConfig) -> Result<(), ReloadError> {
    let (o, n) = (old.qos_of(i), new.qos_of(i));
    let key = new.qos_key(i);
    let port = &old.ports[i].name;
    if o.classes.len() != n.classes.len() {
        return Err(not_live(
            format!("{key}.classes"),
            format!(
                "port `{port}`: {} classes -> {}; the class rings hold the queued packets",
                o.classes.len(),
                n.classes.len()
            ),
        ));
    }
    for (j, (oc, nc)) in o.classes.iter().zip(&n.classes).enumerate() {
        let k = |f: &str| format!("{key}.classes[{j}].{f}");
        if oc.name != nc.name {
            return Err(not_live(
                k("name"),
                format!("port `{port}`: `{}` -> `{}`", oc.name, nc.name),
            ));
        }
        if oc.max_packets != nc.max_packets {
            return Err(not_live(
                k("max_packets"),
                format!(
                    "port `{port}`: {} -> {}; the ring and the buffer pool are sized at start \
                     (`buffer` changes the limit live, within the ring)",
                    oc.max_packets, nc.max_packets
                ),
            ));
        }
        if oc.aqm_by_color.is_some() != nc.aqm_by_color.is_some() {
            return Err(not_live(
                k("aqm_by_color"),
                format!("port `{port}`: one policy for every color <-> one per color"),
            ));
        }
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
        ("run.tx_workers", r.0.tx_workers != r.1.tx_workers),
        ("run.cpus", r.0.cpus != r.1.cpus),
        ("run.pool_buffers", r.0.pool_buffers != r.1.pool_buffers),
        ("run.work_budget", r.0.work_budget != r.1.work_budget),
        ("run.duration_s", r.0.duration_s != r.1.duration_s),
        ("run.drain_s", r.0.drain_s != r.1.drain_s),
        ("run.seed", r.0.seed != r.1.seed),
        ("forwarding", old.forwarding != new.forwarding),
        ("parse", old.parse != new.parse),
        ("metrics.listen", old.metrics.listen != new.metrics.listen),
        (
            "metrics.max_connections",
            old.metrics.max_connections != new.metrics.max_connections,
        ),
        (
            "metrics.request_timeout_s",
            old.metrics.request_timeout_s != new.metrics.request_timeout_s,
        ),
        (
            "metrics.token_file",
            old.metrics.token_file != new.metrics.token_file,
        ),
        ("dpdk", old.dpdk != new.dpdk),
        ("icmp", old.icmp != new.icmp),
        ("routing", old.routing != new.routing),
        ("capture", old.capture != new.capture),
        (
            "metrics.top_flows",
            old.metrics.top_flows != new.metrics.top_flows,
        ),
    ] {
        if changed {
            return Err(not_live(key, "changed"));
        }
    }
    for i in 0..old.ports.len() {
        same_classes(i, old, new)?;
    }
    if old.routing.source == RouteSource::Kernel && old.routes != new.routes {
        return Err(not_live(
            "routes",
            "with routing.source = \"kernel\" the kernel's table is the live one: change routes \
             with `ip route` or the routing daemon",
        ));
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
    // The net under the checks above: with every live part taken from the running config,
    // the new one must be the running one, so that no key is ever silently left unapplied.
    let mut rest = new.clone();
    rest.qos.clone_from(&old.qos);
    rest.routes.clone_from(&old.routes);
    rest.priority.clone_from(&old.priority);
    rest.metrics.flow_estimate = old.metrics.flow_estimate;
    rest.metrics.flow_estimate_zombie = old.metrics.flow_estimate_zombie;
    for (r, o) in rest.ports.iter_mut().zip(&old.ports) {
        r.qos.clone_from(&o.qos);
    }
    if rest != *old {
        return Err(not_live(
            "(a key this version cannot apply live)",
            "changed",
        ));
    }
    Ok(ReloadPlan {
        qos_ports,
        routes: old.routes != new.routes,
        priority: old.priority != new.priority,
        flow_estimate: old.metrics.flow_estimate != new.metrics.flow_estimate
            || old.metrics.flow_estimate_zombie != new.metrics.flow_estimate_zombie,
    })
}

/// What a reload hands the forwarding loop, installed between two polls.
pub struct LiveUpdate {
    /// By port index: the port's new egress, where it changes.
    pub egress: Vec<Option<EgressUpdate>>,
    /// The new priority map, where it changes.
    pub priority: Option<PriorityMap>,
}

impl LiveUpdate {
    /// True when the loop has nothing to install.
    pub fn is_empty(&self) -> bool {
        self.egress.iter().all(Option::is_none) && self.priority.is_none()
    }
}

/// The loop's answer: installed, or why not.
pub type Applied = Result<(), String>;

/// Where a [`Reloader`] leaves an update for the forwarding loop and waits for its answer:
/// one update at a time. The loop's side ([`ReloadSlot::take`]) costs one relaxed load when
/// nothing is pending; the lock is taken only to hand over a posted update.
#[derive(Default)]
pub struct ReloadSlot {
    pending: AtomicBool,
    posted: Mutex<Option<(LiveUpdate, mpsc::SyncSender<Applied>)>>,
}

impl ReloadSlot {
    /// An empty slot, shared by a [`Reloader`] and a loop.
    pub fn new() -> Arc<Self> {
        Arc::new(ReloadSlot::default())
    }

    /// Leaves `update` for the loop; its answer arrives on the returned receiver. An update
    /// the loop never took is replaced.
    pub fn post(&self, update: LiveUpdate) -> mpsc::Receiver<Applied> {
        let (tx, rx) = mpsc::sync_channel(1);
        *self.posted.lock().unwrap_or_else(PoisonError::into_inner) = Some((update, tx));
        // Release: the update is in place before the loop sees the flag.
        self.pending.store(true, Ordering::Release);
        rx
    }

    /// The loop's side, between polls: the posted update and where to answer, if any.
    #[inline]
    pub fn take(&self) -> Option<(LiveUpdate, mpsc::SyncSender<Applied>)> {
        // Relaxed first: the common case, nothing posted, is one load.
        if !self.pending.load(Ordering::Relaxed) {
            return None;
        }
        self.take_posted()
    }

    #[cold]
    fn take_posted(&self) -> Option<(LiveUpdate, mpsc::SyncSender<Applied>)> {
        // Acquire: pairs with `post`'s release.
        if !self.pending.swap(false, Ordering::Acquire) {
            return None;
        }
        self.posted
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }
}

/// How long a [`Reloader`] waits for the loop to install an update: a loop polls far more
/// often; a loop that does not answer in this time is stopping (or stuck in a port).
pub const APPLY_TIMEOUT: Duration = Duration::from_secs(5);

/// What a successful reload changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReloadOutcome {
    /// The keys that changed live (empty: the file is the running config).
    pub changed: Vec<String>,
    /// Static routes added or changed, and removed.
    pub routes_set: usize,
    pub routes_removed: usize,
}

impl std::fmt::Display for ReloadOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.changed.is_empty() {
            return write!(f, "reloaded: nothing changed");
        }
        write!(f, "reloaded: {}", self.changed.join(", "))?;
        if self.routes_set + self.routes_removed > 0 {
            write!(
                f,
                " ({} route(s) added or changed, {} removed)",
                self.routes_set, self.routes_removed
            )?;
        }
        Ok(())
    }
}

/// The control side of live reloads: re-reads the config file, plans, builds the update,
/// hands it to the loop through its [`ReloadSlot`] and waits for the answer. The running
/// config it compares with becomes the new one only when a reload is applied.
pub struct Reloader {
    path: Option<PathBuf>,
    /// What the command line overrides in every config it reads (`--duration`, ...).
    overrides: Box<dyn Fn(&mut RouterConfig) + Send>,
    running: RouterConfig,
    /// Each port's Zombie List as the loop holds it now.
    lists: Vec<Option<Arc<ZombieList>>>,
    /// The shared static routing table (router mode).
    routes: Option<RouteTable>,
    slot: Arc<ReloadSlot>,
}

impl Reloader {
    /// A reloader for a router built from `running` (read from `path`, `None` for the
    /// built-in default, with `overrides` applied), whose loop holds `lists` (by port) and
    /// routes by `routes`, and takes updates from `slot`.
    pub fn new(
        path: Option<PathBuf>,
        overrides: Box<dyn Fn(&mut RouterConfig) + Send>,
        running: RouterConfig,
        lists: Vec<Option<Arc<ZombieList>>>,
        routes: Option<RouteTable>,
        slot: Arc<ReloadSlot>,
    ) -> Self {
        Reloader {
            path,
            overrides,
            running,
            lists,
            routes,
            slot,
        }
    }

    /// The config running now.
    pub fn running(&self) -> &RouterConfig {
        &self.running
    }

    /// Re-reads the file and applies what changed (see the module doc), waiting for the loop
    /// to install it. On any error nothing has changed.
    pub fn reload(&mut self) -> Result<ReloadOutcome, ReloadError> {
        let path = self.path.as_ref().ok_or(ReloadError::NoFile)?;
        let mut new = RouterConfig::load(path)?;
        (self.overrides)(&mut new);
        self.reload_to(new)
    }

    /// Applies `new` (as if read from the file), waiting for the loop to install it.
    pub fn reload_to(&mut self, new: RouterConfig) -> Result<ReloadOutcome, ReloadError> {
        let pending = self.begin(new)?;
        self.finish(pending, APPLY_TIMEOUT)
    }

    /// The first half of [`Reloader::reload_to`], for a caller on the loop's own thread (a
    /// test's observer in virtual time): plans, builds and posts the update; nothing has
    /// changed yet. The loop installs it at its next poll; [`Reloader::finish`] then collects
    /// its answer and applies the route changes.
    pub fn begin(&mut self, new: RouterConfig) -> Result<PendingReload, ReloadError> {
        let plan = plan(&self.running, &new)?;
        let (update, lists) = self.build(&plan, &new)?;
        let routes = match (&self.routes, plan.routes) {
            (Some(_), true) => Some(route_changes(&self.running, &new)?),
            _ => None,
        };
        let mut changed = plan.keys();
        for (i, l) in lists.iter().enumerate() {
            if l.is_some() && !plan.qos_ports.contains(&i) {
                changed.push(format!("ports[{i}] Zombie List"));
            }
        }
        let answer = (!update.is_empty()).then(|| self.slot.post(update));
        Ok(PendingReload {
            new,
            lists,
            routes,
            changed,
            answer,
        })
    }

    /// The second half: waits up to `timeout` for the loop's answer, then applies the route
    /// changes and makes the new config the running one. On an error nothing has changed.
    pub fn finish(
        &mut self,
        p: PendingReload,
        timeout: Duration,
    ) -> Result<ReloadOutcome, ReloadError> {
        if let Some(answer) = &p.answer {
            match answer.recv_timeout(timeout) {
                Ok(Ok(())) => {}
                Ok(Err(e)) => return Err(ReloadError::NotApplied(e)),
                Err(_) => {
                    // Take it back so a loop that comes later does not install it unasked.
                    let _ = self.slot.take();
                    return Err(ReloadError::NotApplied(format!(
                        "no answer within {} ms (is the run ending?)",
                        timeout.as_millis()
                    )));
                }
            }
        }
        let (mut set, mut removed) = (0, 0);
        if let (Some(table), Some((to_set, to_remove))) = (&self.routes, p.routes) {
            // New and changed routes first, removals last: a prefix never has no route
            // where the new table has one.
            for (prefix, hop) in to_set {
                table.insert(prefix, hop).map_err(|e| {
                    ReloadError::NotApplied(format!("route {}/{}: {e}", prefix.addr, prefix.len))
                })?;
                set += 1;
            }
            for prefix in to_remove {
                table.remove(prefix);
                removed += 1;
            }
        }
        for (i, l) in p.lists.into_iter().enumerate() {
            if let Some(l) = l {
                self.lists[i] = l;
            }
        }
        self.running = p.new;
        Ok(ReloadOutcome {
            changed: p.changed,
            routes_set: set,
            routes_removed: removed,
        })
    }

    /// The loop's part of `plan` (QoS, lists, priority), built here, and the ports whose list
    /// changes (to the list given).
    #[allow(clippy::type_complexity)]
    fn build(
        &self,
        plan: &ReloadPlan,
        new: &RouterConfig,
    ) -> Result<(LiveUpdate, Vec<Option<Option<Arc<ZombieList>>>>), ReloadError> {
        let mut egress = Vec::with_capacity(new.ports.len());
        let mut lists = Vec::with_capacity(new.ports.len());
        for i in 0..new.ports.len() {
            let params = new.qos_of(i);
            let key = new.qos_key(i);
            let wanted = port_list(
                &params,
                &key,
                new.estimates_flows(&params),
                new.metrics.flow_estimate_zombie,
            )?;
            let list_changes = match (&wanted, &self.lists[i]) {
                (None, None) => false,
                (Some(zc), Some(l)) => l.config() != zc,
                _ => true,
            };
            let new_list = list_changes.then(|| wanted.map(|zc| Arc::new(ZombieList::new(zc))));
            if !list_changes && !plan.qos_ports.contains(&i) {
                egress.push(None);
                lists.push(None);
                continue;
            }
            let list = match &new_list {
                Some(l) => l.clone(),
                None => self.lists[i].clone(),
            };
            let qos = zl_qos::QosUpdate::new(&params, list.as_ref()).map_err(qos_error(&key))?;
            let observe_by = params.zombie_key().map_err(qos_error(&key))?.0;
            egress.push(Some(EgressUpdate {
                qos,
                observe_by,
                list: new_list.clone().map(|l| {
                    let flows = l.as_ref().and_then(|_| FlowTable::of_config(new));
                    (l, flows)
                }),
            }));
            lists.push(new_list);
        }
        let priority = if plan.priority {
            Some(new.priority.build()?)
        } else {
            None
        };
        Ok((LiveUpdate { egress, priority }, lists))
    }
}

/// A reload posted to the loop ([`Reloader::begin`]), to be collected by
/// [`Reloader::finish`].
pub struct PendingReload {
    new: RouterConfig,
    lists: Vec<Option<Option<Arc<ZombieList>>>>,
    #[allow(clippy::type_complexity)]
    routes: Option<(Vec<(Prefix, NextHop)>, Vec<Prefix>)>,
    changed: Vec<String>,
    answer: Option<mpsc::Receiver<Applied>>,
}

/// Static routes: what to insert (new or changed) and what to remove, from `old` to `new`.
#[allow(clippy::type_complexity)]
fn route_changes(
    old: &RouterConfig,
    new: &RouterConfig,
) -> Result<(Vec<(Prefix, NextHop)>, Vec<Prefix>), ReloadError> {
    let routes =
        |c: &RouterConfig| -> Result<HashMap<(std::net::IpAddr, u8), NextHop>, ConfigError> {
            // Keyed as the table files them, host bits cleared: `10.1.2.3/8` rewritten as
            // `10.0.0.0/8` is the same route, not a new one plus a removal (which, applied
            // in that order, would remove the route).
            Ok(c.static_routes()?
                .into_iter()
                .map(|(p, h)| {
                    let p = p.network();
                    ((p.addr, p.len), h)
                })
                .collect())
        };
    let (o, n) = (routes(old)?, routes(new)?);
    let mut set: Vec<(Prefix, NextHop)> = n
        .iter()
        .filter(|(k, h)| o.get(k) != Some(h))
        .map(|(&(addr, len), &h)| (Prefix { addr, len }, h))
        .collect();
    set.sort_by_key(|(p, _)| (p.addr, p.len));
    let mut removed: Vec<Prefix> = o
        .keys()
        .filter(|k| !n.contains_key(k))
        .map(|&(addr, len)| Prefix { addr, len })
        .collect();
    removed.sort_by_key(|p| (p.addr, p.len));
    Ok((set, removed))
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
    fn capture_routing_and_top_flows_are_refused_not_ignored() {
        let old = default();
        let mut new = old.clone();
        new.metrics.top_flows = Some(3);
        let e = plan(&old, &new).unwrap_err().to_string();
        assert!(e.contains("`metrics.top_flows`"), "{e}");
        let mut new = old.clone();
        new.routing.unres_qlen += 1;
        let e = plan(&old, &new).unwrap_err().to_string();
        assert!(e.contains("`routing`"), "{e}");
    }

    #[test]
    fn a_route_rewritten_without_its_host_bits_is_the_same_route() {
        let with = |prefix: &str, mac: &str| {
            cfg(&DEFAULT_CONFIG.replace(
                "prefix = \"0.0.0.0/0\"\nport = \"wan\"\nnext_hop_mac = \"02:00:00:00:00:fe\"",
                &format!("prefix = \"{prefix}\"\nport = \"wan\"\nnext_hop_mac = \"{mac}\""),
            ))
        };
        let old = with("10.1.2.3/8", "02:00:00:00:00:fe");
        assert!(old.routes.iter().any(|r| r.prefix == "10.1.2.3/8"));
        let (set, removed) = route_changes(&old, &with("10.0.0.0/8", "02:00:00:00:00:fe")).unwrap();
        assert!(set.is_empty() && removed.is_empty(), "{set:?} {removed:?}");
        // A new next hop for it is a change of that route, never a removal.
        let (set, removed) = route_changes(&old, &with("10.0.0.0/8", "02:00:00:00:00:fd")).unwrap();
        assert_eq!(set.len(), 1, "{set:?}");
        assert!(removed.is_empty(), "{removed:?}");
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
