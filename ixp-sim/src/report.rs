//! What a run predicts, in the units a reader wants (Mpps, ns, fractions), and its text form.

use crate::bounds::Bounds;
use crate::engine::RawResult;
use crate::params::{LatencyProfile, MachineConfig, Unit};
use serde::Serialize;
use std::fmt;

/// Fractions of the measured cycles an ME group spent executing, stalled on a full command
/// queue, and with no ready thread. They sum to 1 within the rounding of the window edges.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct MeFractions {
    pub busy: f64,
    pub stalled: f64,
    pub idle: f64,
}

/// One unit over the measured window.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct UnitReport {
    pub unit: Unit,
    pub refs_per_packet: f64,
    /// Fraction of cycles the unit's bus was busy.
    pub utilisation: f64,
    /// Mean cycles a command waited for the bus.
    pub mean_queue_delay_cycles: f64,
    /// Mean issue-to-completion cycles (unloaded latency plus queueing).
    pub mean_latency_cycles: f64,
}

/// The prediction of one run.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    pub workload: String,
    pub clock_mhz: f64,
    pub mes: u32,
    pub threads_per_me: u32,
    pub rx_threads: u32,
    pub tx_threads: u32,
    pub profile: LatencyProfile,
    pub cycles: u64,
    pub packets: u64,
    pub packets_per_cycle: f64,
    pub mpps: f64,
    pub latency_mean_cycles: f64,
    pub latency_p99_cycles: f64,
    pub latency_mean_ns: f64,
    pub rx_me: MeFractions,
    pub tx_me: Option<MeFractions>,
    pub units: Vec<UnitReport>,
    /// Times a receive thread waited for room in the descriptor ring (transmit is slower).
    pub ring_full_waits: u64,
    pub bounds: Bounds,
    /// The smallest closed-form bound, packets per cycle, and its name.
    pub bound_limit: f64,
    pub bottleneck: String,
    pub events: u64,
}

impl Report {
    pub fn new(
        workload: &str,
        cfg: &MachineConfig,
        raw: &RawResult,
        bounds: Bounds,
        has_tx: bool,
    ) -> Report {
        let cycles = raw.cycles.max(1) as f64;
        let pkts = raw.packets.max(1) as f64;
        let group = |rx: bool| {
            let ms: Vec<_> = raw.mes.iter().filter(|m| m.rx == rx).collect();
            let total = cycles * ms.len().max(1) as f64;
            let busy = ms.iter().map(|m| m.busy as f64).sum::<f64>() / total;
            let stalled = ms.iter().map(|m| m.stalled as f64).sum::<f64>() / total;
            let idle = ms.iter().map(|m| m.idle as f64).sum::<f64>() / total;
            MeFractions {
                busy,
                stalled,
                idle,
            }
        };
        let units = Unit::ALL
            .iter()
            .map(|&u| {
                let c = &raw.units[u.index()];
                let refs = c.refs.max(1) as f64;
                UnitReport {
                    unit: u,
                    refs_per_packet: c.refs as f64 / pkts,
                    utilisation: c.busy / cycles,
                    mean_queue_delay_cycles: if c.refs > 0 {
                        c.queue_delay / refs
                    } else {
                        0.0
                    },
                    mean_latency_cycles: if c.refs > 0 { c.latency / refs } else { 0.0 },
                }
            })
            .collect();
        let mut samples = raw.latency_samples.clone();
        samples.sort_unstable();
        let p99 = if samples.is_empty() {
            0.0
        } else {
            samples[((samples.len() - 1) as f64 * 0.99).round() as usize] as f64
        };
        let latency_mean_cycles = if raw.latency_count == 0 {
            0.0
        } else {
            raw.latency_sum / raw.latency_count as f64
        };
        let ppc = raw.packets as f64 / cycles;
        let (bottleneck, bound_limit) = bounds.limit();
        let total_threads = cfg.mes * cfg.threads_per_me;
        let rx_threads = if has_tx {
            cfg.rx_mes * cfg.threads_per_me
        } else {
            total_threads
        };
        Report {
            workload: workload.to_string(),
            clock_mhz: cfg.clock_mhz,
            mes: cfg.mes,
            threads_per_me: cfg.threads_per_me,
            rx_threads,
            tx_threads: total_threads - rx_threads,
            profile: cfg.profile,
            cycles: raw.cycles,
            packets: raw.packets,
            packets_per_cycle: ppc,
            mpps: ppc * cfg.clock_mhz,
            latency_mean_cycles,
            latency_p99_cycles: p99,
            latency_mean_ns: latency_mean_cycles * 1e3 / cfg.clock_mhz,
            rx_me: group(true),
            tx_me: has_tx.then(|| group(false)),
            units,
            ring_full_waits: raw.ring_full_waits,
            bounds,
            bound_limit,
            bottleneck,
            events: raw.events,
        }
    }

    pub fn unit(&self, u: Unit) -> &UnitReport {
        &self.units[u.index()]
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "workload {}: {} MEs x {} threads ({} rx / {} tx), {} MHz, profile {:?}",
            self.workload,
            self.mes,
            self.threads_per_me,
            self.rx_threads,
            self.tx_threads,
            self.clock_mhz,
            self.profile
        )?;
        writeln!(
            f,
            "throughput   {:.3} Mpps ({:.5} packets/cycle over {} cycles, {} packets)",
            self.mpps, self.packets_per_cycle, self.cycles, self.packets
        )?;
        writeln!(
            f,
            "latency      mean {:.0} cycles = {:.0} ns, p99 {:.0} cycles (processing, ring wait excluded)",
            self.latency_mean_cycles, self.latency_mean_ns, self.latency_p99_cycles
        )?;
        let fr = |f: &mut fmt::Formatter<'_>, name: &str, m: &MeFractions| {
            writeln!(
                f,
                "{name:<12} busy {:.3}  stalled {:.3}  idle {:.3}",
                m.busy, m.stalled, m.idle
            )
        };
        fr(f, "rx MEs", &self.rx_me)?;
        if let Some(t) = &self.tx_me {
            fr(f, "tx MEs", t)?;
        }
        writeln!(
            f,
            "{:<8} {:>9} {:>12} {:>14} {:>14}",
            "unit", "refs/pkt", "utilisation", "queue (cyc)", "latency (cyc)"
        )?;
        for u in &self.units {
            if u.refs_per_packet > 0.0 {
                writeln!(
                    f,
                    "{:<8} {:>9.2} {:>12.3} {:>14.1} {:>14.1}",
                    u.unit.name(),
                    u.refs_per_packet,
                    u.utilisation,
                    u.mean_queue_delay_cycles,
                    u.mean_latency_cycles
                )?;
            }
        }
        if self.ring_full_waits > 0 {
            writeln!(
                f,
                "ring full   {} times (receive outpaces transmit)",
                self.ring_full_waits
            )?;
        }
        let demand = |f: &mut fmt::Formatter<'_>, name: &str, d: &crate::bounds::Demand| {
            write!(
                f,
                "{name} per packet: I = {:.0} cycles, one thread alone {:.0} cycles; refs",
                d.compute, d.serial
            )?;
            for u in Unit::ALL {
                if d.refs[u.index()] > 0.0 {
                    write!(f, " {} {:.2}", u.name(), d.refs[u.index()])?;
                }
            }
            writeln!(f)
        };
        demand(f, "rx", &self.bounds.rx_demand)?;
        if let Some(t) = &self.bounds.tx_demand {
            demand(f, "tx", t)?;
        }
        writeln!(f, "closed-form bounds (Mpps):")?;
        for (name, b) in self.bounds.named() {
            writeln!(f, "  {name:<20} {:.3}", b * self.clock_mhz)?;
        }
        writeln!(
            f,
            "bottleneck   {} (bound {:.3} Mpps; simulated / bound = {:.3})",
            self.bottleneck,
            self.bound_limit * self.clock_mhz,
            self.packets_per_cycle / self.bound_limit
        )
    }
}
