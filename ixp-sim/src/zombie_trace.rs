//! Per-packet memory-operation counts of the Zombie List, taken by running the real
//! `zl-zombie` code (`ZombieList::observe_counted`) on a synthetic trace (spec 01 §2 and §4;
//! seed §5.2.3).
//!
//! The ZL-RED programs repeat their slot, table and global-word references as many times as
//! these counts say, so the simulated SRAM traffic follows the data structure's actual
//! behaviour (appends, hits, overwrites, closed-hashing probe chains, the O(M) scan) rather
//! than a guessed average. Each counted operation is one 64-bit word reference in the
//! shipped workloads (`zl-zombie` counts word loads, CASes and stores).
//!
//! decided: the counts describe the steady state: the list is first filled and mixed (M
//! arrivals fill it, about M / p_swap more renew it) and those arrivals are not kept.
//! decided: the trace is `flows` equal-rate flows drawn uniformly per packet; SRED (`none`)
//! runs the list in table mode and its program reads only the slot counters.

use crate::workload::{Counter, PacketCounts, ZombieSpec};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use zl_core::{FlowId, Nanos};
use zl_zombie::{OccurrenceMode, ZombieList, ZombieParams};

/// Runs the Zombie List of `spec` on its trace and returns each packet's counts. The spec
/// must have been validated (`WorkloadSpec::compile`); an M the list rejects gives an error
/// naming `zombie.m` or `zombie.p_swap`.
pub fn trace_counts(spec: &ZombieSpec) -> Result<Vec<PacketCounts>, crate::ParamError> {
    // On the defaults (alpha = 1/M), so a field added to the list's parameters keeps its
    // default here.
    let params = ZombieParams {
        m: spec.m,
        p_swap: spec.p_swap,
        occurrence: if spec.occurrence == "scan" {
            OccurrenceMode::Scan
        } else {
            OccurrenceMode::Table
        },
        ..ZombieParams::default()
    };
    let cfg = params
        .validate()
        .map_err(|e| crate::ParamError::new("zombie", e.to_string()))?;
    let list = ZombieList::new(cfg);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(spec.seed);
    let flows: Vec<FlowId> = (0..spec.flows).map(|_| FlowId(rng.random())).collect();
    let warmup = spec.m + (spec.m as f64 / spec.p_swap.max(0.05)).ceil() as usize;
    let mut out = Vec::with_capacity(spec.trace_packets as usize);
    for n in 0..warmup + spec.trace_packets as usize {
        let flow = flows[rng.random_range(0..flows.len())];
        let (obs, ops) = list.observe_counted(flow, Nanos(n as u64 * 1000), &mut rng);
        if n < warmup {
            continue;
        }
        let overwrite = !obs.hit && n >= spec.m && ops.slot_writes > 0;
        let mut c = [0u32; Counter::COUNT];
        c[Counter::SlotReads.index()] = ops.slot_reads;
        c[Counter::SlotWrites.index()] = ops.slot_writes;
        c[Counter::TableProbes.index()] = ops.table_probes;
        c[Counter::TableWrites.index()] = ops.table_writes;
        c[Counter::TotalWrites.index()] = ops.total_writes;
        c[Counter::Overwrites.index()] = overwrite as u32;
        c[Counter::Hit.index()] = obs.hit as u32;
        out.push(PacketCounts(c));
    }
    Ok(out)
}

/// Mean of each counter over `counts`.
pub fn mean_counts(counts: &[PacketCounts]) -> [f64; Counter::COUNT] {
    let mut m = [0.0; Counter::COUNT];
    for c in counts {
        for (a, v) in m.iter_mut().zip(c.0) {
            *a += v as f64;
        }
    }
    if !counts.is_empty() {
        for a in &mut m {
            *a /= counts.len() as f64;
        }
    }
    m
}
