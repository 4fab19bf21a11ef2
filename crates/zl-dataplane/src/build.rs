//! Turning a validated [`RouterConfig`] into a running router: the single-thread
//! [`Dataplane`] ([`build_with_ports`]) or the threaded [`MtRouter`] ([`build_threaded`]),
//! both from the same parts ([`RouterParts`]), so the ports, the egress stages (and which
//! Zombie List a ZL-RED class decides on: `crate::egress::port_egress`), the forwarding and
//! the flow groups are built in one place.

use std::path::Path;

use zl_core::Nanos;
use zl_port::{BufPool, BATCH_CAPACITY, DEFAULT_BUF_SIZE};

use crate::capture::{CaptureTap, CaptureWriter};
use crate::config::{
    invalid, parse_mac, ConfigError, PortKind, PortParams, RouterConfig, MAX_POOL_BUFFERS,
};
use crate::dataplane::Dataplane;
use crate::egress::port_egress;
use crate::engine::{stream_seed, BoxedPort, PortSlot};
use crate::flows::FlowTable;
use crate::forward::Forwarder;
use crate::mt::{MtParams, MtRouter, RING_PACKETS};
use crate::port::{FileAccess, GeneratorPort, GeneratorSetup, PcapPort, SinkPort};
use crate::stats::GroupStats;

/// A build failure: the config, or a port that could not open.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Port(#[from] zl_port::PortError),
    /// A port the embedding program opens (AF_XDP, DPDK) failed to open.
    #[error("port `{port}`: {detail}")]
    External { port: String, detail: String },
}

/// What [`build_with_ports`] asks for each port: `Ok(Some(port))` to supply it, `Ok(None)` to
/// let the config build it, `Err` to stop.
pub type PortSupplier<'a> =
    dyn FnMut(usize, &PortParams) -> Result<Option<BoxedPort>, BuildError> + 'a;

/// Builds the data plane of `cfg`; relative pcap paths are taken from `base`. Ports of kind
/// `external` are rejected: use [`build_with_ports`].
pub fn build(cfg: &RouterConfig, base: &Path) -> Result<Dataplane, BuildError> {
    build_with_ports(cfg, base, &mut |_, _| Ok(None))
}

/// Builds the data plane of `cfg`, asking `supply(index, params)` for each port first: a
/// port it returns is used as is (its `recv` must stamp `in_port = index`); for `Ok(None)`
/// the port is built from its config; an error stops the build. Ports of kind `af-xdp` and
/// `external` must be supplied.
pub fn build_with_ports(
    cfg: &RouterConfig,
    base: &Path,
    supply: &mut PortSupplier<'_>,
) -> Result<Dataplane, BuildError> {
    build_dataplane(cfg, base, supply, FileAccess::Open)
}

/// [`build_with_ports`] for `zlrouter check`: every check a build makes, without writing a
/// file (output captures are checked, not created or truncated). The data plane it returns
/// is for inspection; its pcap ports write nothing.
pub fn check_with_ports(
    cfg: &RouterConfig,
    base: &Path,
    supply: &mut PortSupplier<'_>,
) -> Result<Dataplane, BuildError> {
    build_dataplane(cfg, base, supply, FileAccess::CheckOnly)
}

fn build_dataplane(
    cfg: &RouterConfig,
    base: &Path,
    supply: &mut PortSupplier<'_>,
    access: FileAccess,
) -> Result<Dataplane, BuildError> {
    let parts = build_parts(cfg, base, supply, access)?;
    let pool = BufPool::new(parts.pool_buffers, DEFAULT_BUF_SIZE);
    let capture = match access {
        FileAccess::Open => start_capture(cfg, base, &parts.slots)?,
        FileAccess::CheckOnly => None,
    };
    let mut dp = Dataplane::new(
        parts.slots,
        pool,
        parts.forwarder,
        cfg.run.seed,
        cfg.run.work_budget,
        parts.groups,
    )
    // `validate` has checked every route's and bridge peer's port.
    .map_err(|e| invalid("routes", e.port, e.to_string()))?;
    if let Some((tap, writer)) = capture {
        dp.set_capture(tap, writer);
    }
    Ok(dp)
}

/// Starts the drop capture of `cfg`, if it has one, with the names of its ports and classes.
fn start_capture(
    cfg: &RouterConfig,
    base: &Path,
    slots: &[PortSlot],
) -> Result<Option<(CaptureTap, CaptureWriter)>, BuildError> {
    let Some(params) = &cfg.capture else {
        return Ok(None);
    };
    let ports = slots.iter().map(|s| s.port.name().to_owned()).collect();
    let classes = slots
        .iter()
        .map(|s| s.egress.qos.class_names().to_vec())
        .collect();
    Ok(Some(CaptureWriter::start(params, base, ports, classes)?))
}

/// Builds the threaded router of `cfg` with `rx_workers` receive workers and `run.tx_workers`
/// transmit workers (ports supplied as for [`build_with_ports`]). Each receive worker's pool
/// gets `run.pool_buffers` buffers (default: what the single-thread pool would get, plus the
/// rings of the egress ports).
pub fn build_threaded(
    cfg: &RouterConfig,
    base: &Path,
    supply: &mut PortSupplier<'_>,
    rx_workers: usize,
) -> Result<MtRouter, BuildError> {
    let parts = build_parts(cfg, base, supply, FileAccess::Open)?;
    let capture = start_capture(cfg, base, &parts.slots)?;
    let pool_per_worker = match cfg.run.pool_buffers {
        Some(n) => n as usize,
        None => {
            (parts.pool_buffers + parts.egress_ports * RING_PACKETS).min(MAX_POOL_BUFFERS as usize)
        }
    };
    let params = MtParams {
        rx_workers: rx_workers.max(1),
        tx_workers: cfg.run.tx_workers.max(1) as usize,
        ring_capacity: RING_PACKETS,
        pool_per_worker,
        work_budget: cfg.run.work_budget.max(1) as usize,
        seed: cfg.run.seed,
        // `run.cpus` is checked against the CPUs the process may use by its caller
        // (`crate::cpus::WorkerCpus::from_config`, then `MtRouter::place_workers`).
        cpus: Default::default(),
    };
    // `validate` has checked every route's and bridge peer's port.
    let mut router = MtRouter::new(parts.slots, parts.forwarder, parts.groups, params)
        .map_err(|e| invalid("routes", e.port, e.to_string()))?;
    if let Some((tap, writer)) = capture {
        router.set_capture(tap, writer);
    }
    Ok(router)
}

/// What both routers are assembled from.
struct RouterParts {
    slots: Vec<PortSlot>,
    forwarder: Forwarder,
    groups: Vec<GroupStats>,
    /// Buffers of the single-thread pool: every egress port's class queues plus four bursts
    /// per port, or `run.pool_buffers`.
    pool_buffers: usize,
    /// Ports a route or bridge pair sends to.
    egress_ports: usize,
}

/// Validates `cfg` and builds its ports (asking `supply` first), their egress stages for
/// `threading`, the forwarder and the generator flow groups; pcap ports open their files
/// as `access` says.
fn build_parts(
    cfg: &RouterConfig,
    base: &Path,
    supply: &mut PortSupplier<'_>,
    access: FileAccess,
) -> Result<RouterParts, BuildError> {
    cfg.validate()?;
    let end = Nanos::from_secs_f64(cfg.run.duration_s);
    let mut slots = Vec::with_capacity(cfg.ports.len());
    let mut groups = Vec::new();
    let forwarding = cfg.forwarding()?;
    let mut ring_total: u64 = 0;
    let mut egress_ports = 0;
    let mut macs = Vec::with_capacity(cfg.ports.len());
    // The generators' acknowledgement channels, and the sinks built here that receive them.
    let mut acks = Vec::new();
    let mut sinks = Vec::new();
    for (i, p) in cfg.ports.iter().enumerate() {
        let idx = i as u16;
        let mac_key = format!("ports[{i}].mac");
        // Absent on an af-xdp port (`validate` allows only that): the interface's own.
        let configured = parse_mac(&p.mac);
        let need_mac = || invalid(&mac_key, &p.mac, "a MAC address");
        let qos_params = cfg.qos_of(i);
        let mut egress = port_egress(
            &qos_params,
            &cfg.qos_key(i),
            cfg.estimates_flows(&qos_params),
            cfg.metrics.flow_estimate_zombie,
        )?;
        if egress.zombie.is_some() {
            egress.flows = FlowTable::of_config(cfg);
        }
        // The stream of the port's dequeue-time decisions (DualPI2's): its own, so the
        // arrivals' draws do not depend on when the link takes packets.
        egress
            .qos
            .seed_dequeue(stream_seed(cfg.run.seed, 2000 + i as u64));
        // Only queues packets can reach hold buffers: a port no route or bridge pair sends
        // to keeps its (empty) engine but adds nothing to the pool.
        if forwarding.is_egress(idx) {
            egress_ports += 1;
            ring_total += qos_params
                .classes
                .iter()
                .map(|c| c.max_packets as u64)
                .sum::<u64>();
        }
        let supplied = supply(i, p)?;
        let port: BoxedPort = match (supplied, p.kind) {
            (Some(port), _) => port,
            (None, PortKind::AfXdp) => {
                return Err(invalid(
                    format!("ports[{i}].kind"),
                    "\"af-xdp\"",
                    "a port kind this program opens: AF_XDP ports are opened by the zlrouter binary",
                )
                .into())
            }
            (None, PortKind::Dpdk) => {
                return Err(invalid(
                    format!("ports[{i}].kind"),
                    "\"dpdk\"",
                    "a port kind this program opens: DPDK ports are opened by the zlrouter binary",
                )
                .into())
            }
            (None, PortKind::External) => {
                return Err(invalid(
                    format!("ports[{i}].kind"),
                    "\"external\"",
                    "a port kind zlrouter builds itself (generator, pcap, sink); external ports are supplied by the embedding program",
                )
                .into())
            }
            (None, PortKind::Generator) => {
                let g = p.generator.as_ref().ok_or_else(|| {
                    invalid(
                        format!("ports[{i}].generator"),
                        "(missing)",
                        "a generator table",
                    )
                })?;
                let tag_base = groups.len() as u32;
                let key_prefix = format!("ports[{i}].generator");
                let setup = GeneratorSetup {
                    name: &p.name,
                    index: idx,
                    own_mac: configured.ok_or_else(need_mac)?,
                    key_prefix: &key_prefix,
                    seed: stream_seed(cfg.run.seed, 1 + i as u64),
                    end,
                    tag_base,
                    acks: None,
                };
                let gen = GeneratorPort::new(&setup, g).map_err(ConfigError::from)?;
                acks.extend(gen.acks());
                for info in gen.groups() {
                    groups.push(GroupStats {
                        name: info.name,
                        port: p.name.clone(),
                        misbehaving: info.misbehaving,
                        flows: info.flows,
                        fate: Default::default(),
                    });
                }
                Box::new(gen)
            }
            (None, PortKind::Pcap) => {
                let pc = p.pcap.as_ref().ok_or_else(|| {
                    invalid(format!("ports[{i}].pcap"), "(missing)", "a pcap table")
                })?;
                Box::new(PcapPort::open_with(&p.name, idx, pc, base, access)?)
            }
            (None, PortKind::Sink) => {
                sinks.push(i);
                Box::new(SinkPort::new(&p.name))
            }
        };
        let mac = match configured {
            Some(m) => m,
            None => port.mac().map(zl_wire::MacAddr).ok_or_else(|| {
                invalid(
                    &mac_key,
                    "(absent)",
                    "a MAC address: the port's interface reports none",
                )
            })?,
        };
        macs.push(mac);
        slots.push(PortSlot { port, egress });
    }
    if !acks.is_empty() {
        // Every sink this build made is a receiving end of the responsive flows (whichever a
        // route sends them to). Nothing has used the plain sinks yet: they are replaced.
        for &i in &sinks {
            let name = slots[i].port.name().to_owned();
            slots[i].port = Box::new(SinkPort::with_acks(&name, acks.clone()));
        }
    }
    let pool_buffers = match cfg.run.pool_buffers {
        Some(n) => n as usize,
        None => (ring_total + 4 * BATCH_CAPACITY as u64 * cfg.ports.len() as u64)
            .min(MAX_POOL_BUFFERS as u64) as usize,
    };
    let mut forwarder = Forwarder::new(forwarding, cfg.parse, cfg.priority.build()?, macs);
    let l3 = (slots.iter().enumerate())
        .map(|(i, s)| cfg.port_l3(i, s.port.as_ref()))
        .collect();
    forwarder.set_l3(l3, cfg.icmp);
    Ok(RouterParts {
        slots,
        forwarder,
        groups,
        pool_buffers,
        egress_ports,
    })
}
