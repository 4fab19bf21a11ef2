//! Sweeps over latency profile, workload, Zombie List size M and placement (SRAM or SDRAM),
//! threads per ME and the receive/transmit split; CSV and markdown tables of the results (the
//! plots are in `plot`).

use crate::params::{LatencyProfile, MachineParams, ParamError, Unit};
use crate::workload::WorkloadSpec;
use crate::{simulate_with_counts, workload_counts, RunLength};
use std::fmt::Write as _;

/// The shipped workloads, by name.
pub const SHIPPED: [(&str, &str); 5] = [
    ("ipv4", include_str!("../workloads/ipv4.toml")),
    ("red", include_str!("../workloads/red.toml")),
    ("sred", include_str!("../workloads/sred.toml")),
    ("zlred-table", include_str!("../workloads/zlred-table.toml")),
    ("zlred-scan", include_str!("../workloads/zlred-scan.toml")),
];

/// The text of a shipped workload.
pub fn shipped_workload(name: &str) -> Option<&'static str> {
    SHIPPED.iter().find(|s| s.0 == name).map(|s| s.1)
}

/// Regions that move together when the Zombie List is placed on another unit.
pub const ZOMBIE_REGIONS: [&str; 2] = ["zombie_list", "occurrence_table"];

/// What to sweep. Both latency profiles and all shipped workloads are always swept.
#[derive(Clone, Debug)]
pub struct SweepSpec {
    /// The machine every point starts from (its profile is replaced by each profile in turn).
    pub base: MachineParams,
    /// Zombie List sizes for the ZL-RED workloads.
    pub zombie_m: Vec<usize>,
    /// Threads per ME, at the base receive/transmit split.
    pub threads: Vec<u32>,
    /// Minimum warm-up and measured cycles; each point runs at least [`RunLength::auto`].
    pub len: RunLength,
}

/// One simulated point.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepRow {
    pub profile: LatencyProfile,
    pub workload: String,
    /// Unit holding the Zombie List and occurrence table ("-" for workloads without one).
    pub placement: String,
    pub m: usize,
    pub mes: u32,
    pub threads_per_me: u32,
    pub rx_threads: u32,
    pub tx_threads: u32,
    pub mpps: f64,
    pub bound_mpps: f64,
    pub bottleneck: String,
    pub latency_ns: f64,
    pub rx_busy: f64,
    pub rx_stalled: f64,
    pub rx_idle: f64,
    pub tx_busy: f64,
    pub sram_util: f64,
    pub sdram_util: f64,
    pub sram_queue_cycles: f64,
    pub sdram_queue_cycles: f64,
}

pub(crate) fn profile_name(p: LatencyProfile) -> &'static str {
    match p {
        LatencyProfile::Seed => "seed",
        LatencyProfile::Datasheet => "datasheet",
    }
}

/// One point: `placement` moves the Zombie List regions, `m` sets M, `rx_threads` the split.
fn point(
    base: &MachineParams,
    name: &str,
    placement: Option<Unit>,
    m: Option<usize>,
    len: RunLength,
) -> Result<SweepRow, ParamError> {
    let mut spec = WorkloadSpec::from_toml(shipped_workload(name).unwrap_or_default())?;
    if let Some(u) = placement {
        for r in ZOMBIE_REGIONS {
            if spec.regions.contains_key(r) {
                spec.place(r, u)?;
            }
        }
    }
    if let (Some(m), Some(z)) = (m, spec.zombie.as_mut()) {
        z.m = m;
    }
    let w = spec.compile()?;
    let cfg = base.validate(w.tx.is_some())?;
    let counts = workload_counts(&w)?;
    let bound = crate::Bounds::new(&cfg, &w, &counts).limit().1;
    let r = simulate_with_counts(&cfg, &w, &counts, RunLength::auto(&cfg, bound, len));
    Ok(SweepRow {
        profile: base.profile,
        workload: name.to_string(),
        placement: placement.map_or("-".into(), |u| u.name().into()),
        m: w.zombie.as_ref().map_or(0, |z| z.m),
        mes: r.mes,
        threads_per_me: r.threads_per_me,
        rx_threads: r.rx_threads,
        tx_threads: r.tx_threads,
        mpps: r.mpps,
        bound_mpps: r.bound_limit * r.clock_mhz,
        bottleneck: r.bottleneck.clone(),
        latency_ns: r.latency_mean_ns,
        rx_busy: r.rx_me.busy,
        rx_stalled: r.rx_me.stalled,
        rx_idle: r.rx_me.idle,
        tx_busy: r.tx_me.map_or(0.0, |t| t.busy),
        sram_util: r.unit(Unit::Sram).utilisation,
        sdram_util: r.unit(Unit::Sdram).utilisation,
        sram_queue_cycles: r.unit(Unit::Sram).mean_queue_delay_cycles,
        sdram_queue_cycles: r.unit(Unit::Sdram).mean_queue_delay_cycles,
    })
}

/// Runs the sweep: for each profile, (a) every workload at the base machine and at each
/// thread count and each receive/transmit split (whole MEs), with ZL-RED at its file's M in
/// SRAM; (b) both ZL-RED workloads at every M with the Zombie List in SRAM and in SDRAM.
pub fn run(spec: &SweepSpec) -> Result<Vec<SweepRow>, ParamError> {
    let mut rows = Vec::new();
    let base_threads = spec.base.threads_per_me;
    for profile in [LatencyProfile::Seed, LatencyProfile::Datasheet] {
        let base = MachineParams {
            profile,
            ..spec.base.clone()
        };
        base.validate(true)?;
        let mut machines = vec![base.clone()];
        for &t in &spec.threads {
            if t != base_threads {
                machines.push(MachineParams {
                    threads_per_me: t,
                    rx_threads: base.rx_threads.map(|rx| rx / base_threads * t),
                    ..base.clone()
                });
            }
        }
        let base_rx = base.validate(true)?.rx_mes;
        for rx_mes in 1..base.mes {
            if rx_mes != base_rx {
                machines.push(MachineParams {
                    rx_threads: Some(rx_mes * base_threads),
                    ..base.clone()
                });
            }
        }
        for (name, _) in SHIPPED {
            for m in &machines {
                rows.push(point(m, name, None, None, spec.len)?);
            }
        }
        for name in ["zlred-table", "zlred-scan"] {
            for &m in &spec.zombie_m {
                for unit in [Unit::Sram, Unit::Sdram] {
                    rows.push(point(&base, name, Some(unit), Some(m), spec.len)?);
                }
            }
        }
    }
    Ok(rows)
}

/// The rows as CSV with a header line.
pub fn to_csv(rows: &[SweepRow]) -> String {
    let mut s = String::from(
        "profile,workload,placement,m,mes,threads_per_me,rx_threads,tx_threads,mpps,bound_mpps,\
         bottleneck,latency_ns,rx_busy,rx_stalled,rx_idle,tx_busy,sram_util,sdram_util,\
         sram_queue_cycles,sdram_queue_cycles\n",
    );
    for r in rows {
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{},{},{:.6},{:.6},{},{:.1},{:.3},{:.3},{:.3},{:.3},{:.3},{:.3},{:.2},{:.2}",
            profile_name(r.profile),
            r.workload,
            r.placement,
            r.m,
            r.mes,
            r.threads_per_me,
            r.rx_threads,
            r.tx_threads,
            r.mpps,
            r.bound_mpps,
            r.bottleneck,
            r.latency_ns,
            r.rx_busy,
            r.rx_stalled,
            r.rx_idle,
            r.tx_busy,
            r.sram_util,
            r.sdram_util,
            r.sram_queue_cycles,
            r.sdram_queue_cycles
        );
    }
    s
}

/// Markdown tables of a sweep: the paper's machine, M and placement, threads per ME, and the
/// receive/transmit split, each point with its bottleneck.
pub fn to_markdown(rows: &[SweepRow]) -> String {
    let mut s = String::new();
    let profiles = [LatencyProfile::Seed, LatencyProfile::Datasheet];
    let paper = |r: &&SweepRow| r.threads_per_me == 4 && r.rx_threads == 16 && r.tx_threads == 8;
    let cell = |r: &SweepRow| format!("{:.3} ({})", r.mpps, r.bottleneck);
    let _ = writeln!(
        s,
        "### The paper's machine: 6 MEs x 4 threads, 16 receive / 8 transmit, Zombie List in SRAM\n"
    );
    let _ = writeln!(
        s,
        "| profile | workload | Mpps | bound | sim/bound | bottleneck | latency (ns) | rx MEs busy/stalled/idle | SRAM util, queue (cycles) | SDRAM util, queue (cycles) |\n|---|---|---|---|---|---|---|---|---|---|"
    );
    for r in rows.iter().filter(|r| r.placement == "-").filter(paper) {
        let _ = writeln!(
            s,
            "| {} | {} | {:.3} | {:.3} | {:.2} | {} | {:.0} | {:.2}/{:.2}/{:.2} | {:.2}, {:.1} | {:.2}, {:.1} |",
            profile_name(r.profile),
            r.workload,
            r.mpps,
            r.bound_mpps,
            r.mpps / r.bound_mpps,
            r.bottleneck,
            r.latency_ns,
            r.rx_busy,
            r.rx_stalled,
            r.rx_idle,
            r.sram_util,
            r.sram_queue_cycles,
            r.sdram_util,
            r.sdram_queue_cycles
        );
    }
    let _ = writeln!(
        s,
        "\n### ZL-RED vs Zombie List size M and placement (16 / 8, 4 threads per ME)\n"
    );
    let _ = writeln!(
        s,
        "| profile | design | M | Zombie List in SRAM: Mpps (bottleneck) | in SDRAM: Mpps (bottleneck) |\n|---|---|---|---|---|"
    );
    for p in profiles {
        for w in ["zlred-table", "zlred-scan"] {
            let mut ms: Vec<usize> = rows
                .iter()
                .filter(|r| r.workload == w && r.placement != "-")
                .map(|r| r.m)
                .collect();
            ms.sort_unstable();
            ms.dedup();
            for m in ms {
                let at = |pl: &str| {
                    rows.iter()
                        .find(|r| {
                            r.profile == p && r.workload == w && r.m == m && r.placement == pl
                        })
                        .map_or(String::new(), cell)
                };
                let _ = writeln!(
                    s,
                    "| {} | {} | {m} | {} | {} |",
                    profile_name(p),
                    w,
                    at("sram"),
                    at("sdram")
                );
            }
        }
    }
    let base: Vec<&SweepRow> = rows.iter().filter(|r| r.placement == "-").collect();
    let mut threads: Vec<u32> = base.iter().map(|r| r.threads_per_me).collect();
    threads.sort_unstable();
    threads.dedup();
    let _ = write!(
        s,
        "\n### Threads per ME (two thirds of the MEs receive)\n\n| profile | workload |"
    );
    for t in &threads {
        let _ = write!(s, " {t} thread(s)/ME |");
    }
    let _ = writeln!(s, "\n|---|---|{}", "---|".repeat(threads.len()));
    let two_thirds = |r: &&&SweepRow| r.rx_threads * 3 == (r.rx_threads + r.tx_threads) * 2;
    for p in profiles {
        for (w, _) in SHIPPED {
            let _ = write!(s, "| {} | {w} |", profile_name(p));
            for t in &threads {
                let c = base
                    .iter()
                    .filter(two_thirds)
                    .find(|r| r.profile == p && r.workload == w && r.threads_per_me == *t)
                    .map_or(String::new(), |r| cell(r));
                let _ = write!(s, " {c} |");
            }
            let _ = writeln!(s);
        }
    }
    let mut splits: Vec<(u32, u32)> = base
        .iter()
        .filter(|r| r.threads_per_me == 4)
        .map(|r| (r.rx_threads, r.tx_threads))
        .collect();
    splits.sort_unstable();
    splits.dedup();
    let _ = write!(
        s,
        "\n### Receive / transmit split (4 threads per ME)\n\n| profile | workload |"
    );
    for (rx, tx) in &splits {
        let _ = write!(s, " {rx} rx : {tx} tx |");
    }
    let _ = writeln!(s, "\n|---|---|{}", "---|".repeat(splits.len()));
    for p in profiles {
        for (w, _) in SHIPPED {
            let _ = write!(s, "| {} | {w} |", profile_name(p));
            for (rx, tx) in &splits {
                let c = base
                    .iter()
                    .find(|r| {
                        r.profile == p
                            && r.workload == w
                            && r.threads_per_me == 4
                            && r.rx_threads == *rx
                            && r.tx_threads == *tx
                    })
                    .map_or(String::new(), |r| cell(r));
                let _ = write!(s, " {c} |");
            }
            let _ = writeln!(s);
        }
    }
    s
}
