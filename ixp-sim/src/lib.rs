//! ixp-sim: a cycle-level, discrete-event model of the Intel IXP1200 network processor that
//! predicts the packet rate of IPv4 forwarding, RED, SRED and ZL-RED (spec 06; section 5 of
//! the ZL-RED paper, which planned the IXP1200 port and left its evaluation "to be reported
//! later").
//!
//! Flow: a [`MachineParams`] (MEs, threads, receive/transmit split, clock, latency profile,
//! per-unit overrides) is validated into a [`MachineConfig`]; a [`WorkloadSpec`] (TOML
//! per-packet microprograms) is compiled into a [`Workload`]; [`simulate`] runs the
//! [`engine`] and returns a [`Report`] (Mpps, per-packet latency, ME busy / stalled / idle,
//! unit utilisation and queueing delay) next to the closed-form [`Bounds`] and the bound that
//! limits. [`sweep`] runs grids of these and writes CSV and plots.
//!
//! Units: time in core cycles inside the model, Mpps and ns in reports.
//!
//! # Layers
//!
//! Each module uses only those on the lines above it (`scripts/module-cycles` checks it):
//! `params`; `workload` (the microprograms); `bounds`, `engine` and `zombie_trace`;
//! `report` and `sweep`; `plot` (the figures of a sweep).

#![forbid(unsafe_code)]

pub mod bounds;
pub mod engine;
pub mod params;
pub mod plot;
pub mod report;
pub mod sweep;
pub mod workload;
pub mod zombie_trace;

pub use bounds::{Bounds, Demand};
pub use params::{
    LatencyProfile, MachineConfig, MachineParams, ParamError, Unit, UnitConfig, UnitParams,
};
pub use report::{MeFractions, Report, UnitReport};
pub use workload::{PacketCounts, Workload, WorkloadSpec};

/// How long to simulate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunLength {
    /// Cycles simulated before the counters start.
    pub warmup: u64,
    /// Cycles measured.
    pub measure: u64,
}

impl Default for RunLength {
    /// 20k cycles of warm-up, 1M measured (4.3 ms of a 232 MHz part).
    fn default() -> Self {
        Self {
            warmup: 20_000,
            measure: 1_000_000,
        }
    }
}

impl RunLength {
    /// A window long enough for a steady state at a rate near `bound` packets per cycle: at
    /// least `min` measured cycles and ~1000 packets (so packets in flight at the window's edges
    /// move the rate by ~2 % at most), after a warm-up that lets the receive stage fill the
    /// descriptor ring when it outpaces transmit (the ring's packets have used the IX bus and
    /// SDRAM but not yet left). Both capped at 100 M cycles.
    pub fn auto(cfg: &MachineConfig, bound: f64, min: RunLength) -> RunLength {
        const CAP: u64 = 100_000_000;
        let cycles_for = |packets: f64| {
            if bound > 0.0 && bound.is_finite() {
                (packets / bound).ceil().min(CAP as f64) as u64
            } else {
                CAP
            }
        };
        let measure = cycles_for(1000.0).clamp(min.measure.min(CAP), CAP);
        let warmup = cycles_for(2.0 * cfg.tx_ring_packets as f64)
            .max(measure / 10)
            .clamp(min.warmup.min(CAP), CAP);
        RunLength { warmup, measure }
    }
}

/// The per-packet counters the workload needs (empty when it uses none), from running the
/// real Zombie List on the workload's trace.
pub fn workload_counts(w: &Workload) -> Result<Vec<PacketCounts>, ParamError> {
    match (&w.zombie, w.uses_counters) {
        (Some(z), true) => zombie_trace::trace_counts(z),
        _ => Ok(Vec::new()),
    }
}

/// Simulates `workload` on `machine` with the given per-packet counters.
pub fn simulate_with_counts(
    machine: &MachineConfig,
    workload: &Workload,
    counts: &[PacketCounts],
    len: RunLength,
) -> Report {
    let bounds = Bounds::new(machine, workload, counts);
    let raw = engine::Engine::new(machine, workload, counts).run(len.warmup, len.measure);
    Report::new(&workload.name, machine, &raw, bounds, workload.tx.is_some())
}

/// Validates `machine` for `workload` and simulates it for exactly `len`.
pub fn simulate(
    machine: &MachineParams,
    workload: &Workload,
    len: RunLength,
) -> Result<Report, ParamError> {
    let cfg = machine.validate(workload.tx.is_some())?;
    let counts = workload_counts(workload)?;
    Ok(simulate_with_counts(&cfg, workload, &counts, len))
}

/// Validates and simulates for [`RunLength::auto`] of the workload's bound, at least `min`.
pub fn simulate_auto(
    machine: &MachineParams,
    workload: &Workload,
    min: RunLength,
) -> Result<Report, ParamError> {
    let cfg = machine.validate(workload.tx.is_some())?;
    let counts = workload_counts(workload)?;
    let bound = Bounds::new(&cfg, workload, &counts).limit().1;
    let len = RunLength::auto(&cfg, bound, min);
    Ok(simulate_with_counts(&cfg, workload, &counts, len))
}
