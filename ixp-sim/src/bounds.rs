//! Closed-form throughput bounds (spec 06, "What the simulator must show"):
//!
//! `throughput = min( N f / I, N k f / (I + sum_m n_m L_m), 1 / (n_m S_m) for each unit m )`
//!
//! with f the clock, N MEs and k threads per ME of a stage, I its compute cycles per packet
//! (ALU microwords plus one issue cycle per command plus context-swap cycles), n_m its
//! references per packet to unit m, L_m their mean unloaded latency and S_m their bus
//! occupancy. The IX bus is one of the units. decided: the latency sum counts what a thread
//! waits for: an asynchronous reference (`sync = false`) adds only the part of its latency
//! that outlasts the work issued before the next `wait` (see [`Demand::serial`]); one still
//! outstanding at the end of the packet is not counted. A packet crosses both stages when the
//! workload has a transmit program, so each stage gives its own compute and latency bound and
//! the unit bounds add the references of both. Units here are packets per core cycle.

use crate::params::{MachineConfig, Unit};
use crate::workload::{Count, Instr, PacketCounts, Program, Workload};
use serde::Serialize;

/// Mean per-packet demand of one program.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Demand {
    /// Compute cycles per packet, I (includes command issue and context-swap cycles).
    pub compute: f64,
    /// References per packet, n_m, by unit.
    pub refs: [f64; Unit::COUNT],
    /// Bus occupancy per packet, sum of S_m over the references, by unit.
    pub occupancy: [f64; Unit::COUNT],
    /// Unloaded latency per packet, sum of L_m over the references, by unit.
    pub latency: [f64; Unit::COUNT],
    /// One thread's unloaded cycles per packet, `I + sum n_m L_m` over the references it
    /// waits for: asynchronous references overlap the work up to the next `wait`, so only
    /// what they stick out beyond it counts.
    pub serial: f64,
}

impl Demand {
    /// Walks `program`, taking each per-packet counter at its mean over `counts`.
    pub fn of(program: &Program, cfg: &MachineConfig, counts: &[PacketCounts]) -> Demand {
        let mut mean = [0.0f64; crate::workload::Counter::COUNT];
        if !counts.is_empty() {
            for c in counts {
                for (m, v) in mean.iter_mut().zip(c.0) {
                    *m += v as f64;
                }
            }
            for m in &mut mean {
                *m /= counts.len() as f64;
            }
        }
        let mut d = Demand::default();
        let mut mult = vec![1.0f64];
        let swap = cfg.ctx_swap_cycles as f64;
        // Critical-path walk: `t` the thread's clock, `pend` when its last asynchronous
        // reference completes.
        let (mut t, mut pend) = (0.0f64, 0.0f64);
        for instr in &program.instrs {
            let k = *mult.last().unwrap_or(&1.0);
            match *instr {
                Instr::Compute(n) => {
                    d.compute += k * n as f64;
                    t += k * n as f64;
                }
                Instr::Ref { unit, bytes, sync } => {
                    let u = cfg.unit(unit);
                    let i = unit.index();
                    let issue = cfg.issue_cycles as f64 + if sync { swap } else { 0.0 };
                    let lat = u.mean_latency(bytes);
                    d.compute += k * issue;
                    d.refs[i] += k;
                    d.occupancy[i] += k * u.occupancy(bytes);
                    d.latency[i] += k * lat;
                    t += k * issue;
                    if sync {
                        t += k * lat;
                    } else if k > 0.0 {
                        pend = pend.max(t + lat);
                    }
                }
                Instr::Wait => {
                    d.compute += k * swap;
                    t = (t + k * swap).max(pend);
                }
                Instr::CtxArb => {
                    d.compute += k * swap;
                    t += k * swap;
                }
                Instr::LoopStart { times, .. } => {
                    let n = match times {
                        Count::Fixed(n) => n as f64,
                        Count::Counter(c) => mean[c.index()],
                    };
                    mult.push(k * n);
                }
                Instr::LoopEnd { .. } => {
                    mult.pop();
                }
            }
        }
        d.serial = t.max(d.compute);
        d
    }
}

/// The bounds, in packets per core cycle.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Bounds {
    pub rx_compute: f64,
    pub rx_latency_hiding: f64,
    pub tx_compute: Option<f64>,
    pub tx_latency_hiding: Option<f64>,
    /// Bandwidth bound of each unit (infinite when unused).
    pub unit_bandwidth: [f64; Unit::COUNT],
    pub rx_demand: Demand,
    pub tx_demand: Option<Demand>,
}

impl Bounds {
    pub fn new(cfg: &MachineConfig, w: &Workload, counts: &[PacketCounts]) -> Bounds {
        let rx = Demand::of(&w.rx, cfg, counts);
        let tx = w.tx.as_ref().map(|p| Demand::of(p, cfg, counts));
        let k = cfg.threads_per_me as f64;
        let rx_n = cfg.rx_mes as f64;
        let tx_n = cfg.tx_mes() as f64;
        let mut unit_bandwidth = [f64::INFINITY; Unit::COUNT];
        for (i, b) in unit_bandwidth.iter_mut().enumerate() {
            let occ = rx.occupancy[i] + tx.map_or(0.0, |t| t.occupancy[i]);
            if occ > 0.0 {
                *b = 1.0 / occ;
            }
        }
        let div = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::INFINITY };
        Bounds {
            rx_compute: div(rx_n, rx.compute),
            rx_latency_hiding: div(rx_n * k, rx.serial),
            tx_compute: tx.map(|t| div(tx_n, t.compute)),
            tx_latency_hiding: tx.map(|t| div(tx_n * k, t.serial)),
            unit_bandwidth,
            rx_demand: rx,
            tx_demand: tx,
        }
    }

    /// Every bound with its name.
    pub fn named(&self) -> Vec<(String, f64)> {
        let mut v = vec![
            ("rx compute".to_string(), self.rx_compute),
            ("rx latency hiding".to_string(), self.rx_latency_hiding),
        ];
        if let (Some(c), Some(l)) = (self.tx_compute, self.tx_latency_hiding) {
            v.push(("tx compute".into(), c));
            v.push(("tx latency hiding".into(), l));
        }
        for u in Unit::ALL {
            let b = self.unit_bandwidth[u.index()];
            if b.is_finite() {
                v.push((format!("{} bandwidth", u.name()), b));
            }
        }
        v
    }

    /// The minimum bound and its name: the predicted bottleneck.
    pub fn limit(&self) -> (String, f64) {
        self.named()
            .into_iter()
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .unwrap_or(("none".into(), f64::INFINITY))
    }

    /// The ratio of the second-smallest bound to the smallest: near 1 means a knee, where the
    /// bounds model is known to overestimate (queueing at the crossover).
    pub fn knee_ratio(&self) -> f64 {
        let mut v: Vec<f64> = self.named().into_iter().map(|x| x.1).collect();
        v.sort_by(f64::total_cmp);
        if v.len() < 2 {
            f64::INFINITY
        } else {
            v[1] / v[0]
        }
    }
}
