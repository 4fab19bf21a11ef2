//! Scenario files: a base [`RunConfig`], sweeps over any of its keys, and the plots to draw.
//! [`Scenario::expand`] turns a file into concrete runs (checking each one, so an invalid value
//! is reported with its key and sweep point before anything runs); [`run_points`] runs them in
//! parallel on all cores; [`rows`] flattens the reports into one table row per flow group.

use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use zl_core::Nanos;

use crate::config::RunConfig;
use crate::sim::{jain_index, SimError, SimReport, Simulator};

/// One sweep axis: `key` takes each of `values` in turn, or the `keys` move together, taking
/// one tuple of `values` at a time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Axis {
    #[serde(default)]
    pub key: Option<String>,
    #[serde(default)]
    pub keys: Vec<String>,
    pub values: Vec<toml::Value>,
    /// Names for the values in tables and legends (default: the values themselves).
    #[serde(default)]
    pub labels: Vec<String>,
    /// Column name in tables (default: the key).
    #[serde(default)]
    pub name: Option<String>,
}

/// What a plot shows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum PlotKind {
    /// A metric against a sweep axis, one line per group and remaining sweep label.
    #[default]
    Lines,
    /// The probe (or queue) trace over time, one line per sweep point.
    Trace,
    /// The per-class queueing-delay histogram, one line per point and class.
    Sojourn,
    /// A metric per value of a sweep axis whose values are names (the AQM policies), one bar
    /// per group and remaining sweep label.
    Bars,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlotConfig {
    /// File stem under the output directory.
    pub file: String,
    #[serde(default)]
    pub kind: PlotKind,
    /// Axis name (`Lines`, `Bars`).
    #[serde(default)]
    pub x: Option<String>,
    /// Metric column (`Lines`, `Bars`), or `probe` / `queue` (`Trace`).
    pub y: String,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub log_x: bool,
    /// Only these groups (default: all).
    #[serde(default)]
    pub groups: Vec<String>,
}

/// A scenario file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    pub title: String,
    /// Which paper and figure/table this reproduces.
    #[serde(default)]
    pub reproduces: String,
    pub run: toml::Value,
    #[serde(default)]
    pub sweep: Vec<Axis>,
    #[serde(default)]
    pub plots: Vec<PlotConfig>,
    /// Metrics shown in the markdown table.
    #[serde(default = "default_table")]
    pub table: Vec<String>,
    /// Independent runs per sweep point (seeds `seed`, `seed + 1`, ...); tables then show the
    /// mean and the 95 % confidence half-width over them.
    #[serde(default = "one")]
    pub replications: u32,
    /// A lighter version for the quick runs: keys -> values applied on top of `run`.
    #[serde(default)]
    pub quick: Option<toml::Table>,
}

fn one() -> u32 {
    1
}

fn default_table() -> Vec<String> {
    [
        "goodput_mean_kbps",
        "jain_group",
        "loss_group",
        "utilisation",
        "queue_mean_pkts",
    ]
    .map(String::from)
    .to_vec()
}

/// One concrete run of a sweep.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    /// (axis name, value label) in axis order.
    pub labels: Vec<(String, String)>,
    pub run: RunConfig,
    /// Which replication of the point this is (0-based; the seed is offset by it).
    pub replica: u32,
}

/// A point's results.
#[derive(Clone, Debug)]
pub struct PointResult {
    pub point: Point,
    pub report: SimReport,
    pub capacity_packets: u32,
}

/// A scenario file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("cannot parse the scenario: {0}")]
    Parse(#[from] toml::de::Error),
    #[error("sweep point {point}: {source}")]
    Point { point: String, source: SimError },
    #[error("invalid `{key}`: {reason}")]
    Invalid { key: String, reason: String },
}

fn bad(key: impl Into<String>, reason: impl Into<String>) -> ScenarioError {
    ScenarioError::Invalid {
        key: key.into(),
        reason: reason.into(),
    }
}

/// Sets `path` (dot-separated; a number indexes an array, `*` means every element) in `v`.
pub fn set_path(v: &mut toml::Value, path: &str, new: &toml::Value) -> Result<(), ScenarioError> {
    fn go(
        v: &mut toml::Value,
        parts: &[&str],
        new: &toml::Value,
        full: &str,
    ) -> Result<(), ScenarioError> {
        let Some((head, rest)) = parts.split_first() else {
            *v = new.clone();
            return Ok(());
        };
        match v {
            toml::Value::Table(t) => {
                if rest.is_empty() {
                    t.insert((*head).to_string(), new.clone());
                    return Ok(());
                }
                let child = t
                    .entry((*head).to_string())
                    .or_insert_with(|| toml::Value::Table(toml::Table::new()));
                go(child, rest, new, full)
            }
            toml::Value::Array(a) => {
                if *head == "*" {
                    for e in a.iter_mut() {
                        go(e, rest, new, full)?;
                    }
                    return Ok(());
                }
                let i: usize = head
                    .parse()
                    .map_err(|_| bad(full, format!("`{head}` is not an array index")))?;
                let len = a.len();
                let e = a
                    .get_mut(i)
                    .ok_or_else(|| bad(full, format!("index {i} out of {len}")))?;
                go(e, rest, new, full)
            }
            _ => Err(bad(
                full,
                format!("`{head}` is not inside a table or array"),
            )),
        }
    }
    let parts: Vec<&str> = path.split('.').collect();
    go(v, &parts, new, path)
}

fn label_of(v: &toml::Value) -> String {
    match v {
        toml::Value::String(s) => s.clone(),
        toml::Value::Table(t) => t.get("kind").map(label_of).unwrap_or_else(|| v.to_string()),
        other => other.to_string(),
    }
}

impl Scenario {
    /// Parses a scenario file. The name becomes the output files' names (`<name>.csv`,
    /// `<name>.md`, plots), so it must be a plain file-name stem: ASCII letters, digits, `-`,
    /// `_` and `.`, not starting with `.`, at most 100 characters.
    pub fn parse(text: &str) -> Result<Self, ScenarioError> {
        let sc: Scenario = toml::from_str(text)?;
        let n = &sc.name;
        let plain = n
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if n.is_empty() || n.len() > 100 || n.starts_with('.') || !plain {
            return Err(bad(
                "name",
                format!(
                    "{n:?} is used as a file name: 1-100 of A-Z a-z 0-9 - _ . (not starting with .)"
                ),
            ));
        }
        Ok(sc)
    }

    /// All runs of the sweep (cartesian product of the axes), each checked. With `quick`, the
    /// scenario's `[quick]` overrides are applied first.
    pub fn expand(&self, quick: bool) -> Result<Vec<Point>, ScenarioError> {
        let mut base = self.run.clone();
        if quick {
            if let Some(q) = &self.quick {
                for (k, v) in q {
                    set_path(&mut base, k, v)?;
                }
            }
        }
        let mut points: Vec<(Vec<(String, String)>, toml::Value)> = vec![(Vec::new(), base)];
        if self.replications == 0 {
            return Err(bad("replications", "must be >= 1"));
        }
        for (ai, axis) in self.sweep.iter().enumerate() {
            let keys: Vec<String> = match (&axis.key, axis.keys.is_empty()) {
                (Some(k), true) => vec![k.clone()],
                (None, false) => axis.keys.clone(),
                _ => {
                    return Err(bad(
                        format!("sweep[{ai}]"),
                        "give exactly one of `key` or `keys`",
                    ))
                }
            };
            if axis.values.is_empty() {
                return Err(bad(format!("sweep[{ai}].values"), "must not be empty"));
            }
            if !axis.labels.is_empty() && axis.labels.len() != axis.values.len() {
                return Err(bad(
                    format!("sweep[{ai}].labels"),
                    "must have one label per value",
                ));
            }
            let name = axis.name.clone().unwrap_or_else(|| keys.join("+"));
            let mut next = Vec::with_capacity(points.len() * axis.values.len());
            for (labels, v) in &points {
                for (vi, value) in axis.values.iter().enumerate() {
                    let mut v = v.clone();
                    if keys.len() == 1 {
                        set_path(&mut v, &keys[0], value)?;
                    } else {
                        let tuple = value
                            .as_array()
                            .filter(|a| a.len() == keys.len())
                            .ok_or_else(|| {
                                bad(
                                    format!("sweep[{ai}].values[{vi}]"),
                                    format!("must be an array of {} values", keys.len()),
                                )
                            })?;
                        for (k, x) in keys.iter().zip(tuple) {
                            set_path(&mut v, k, x)?;
                        }
                    }
                    let label = axis
                        .labels
                        .get(vi)
                        .cloned()
                        .unwrap_or_else(|| label_of(value));
                    let mut l = labels.clone();
                    l.push((name.clone(), label));
                    next.push((l, v));
                }
            }
            points = next;
        }
        points
            .into_iter()
            .map(|(labels, v)| {
                let name = labels
                    .iter()
                    .map(|(k, l)| format!("{k}={l}"))
                    .collect::<Vec<_>>()
                    .join(", ");
                let run: RunConfig =
                    v.try_into()
                        .map_err(|e: toml::de::Error| ScenarioError::Point {
                            point: name.clone(),
                            source: SimError::Invalid {
                                key: "run".into(),
                                reason: e.message().to_string(),
                            },
                        })?;
                run.build().map_err(|source| ScenarioError::Point {
                    point: name.clone(),
                    source,
                })?;
                for m in &self.table {
                    if !METRICS.contains(&m.as_str()) {
                        return Err(bad("table", format!("unknown metric `{m}`")));
                    }
                }
                Ok((0..self.replications).map(move |k| {
                    let mut run = run.clone();
                    run.seed = run.seed.wrapping_add(k as u64);
                    Point {
                        labels: labels.clone(),
                        run,
                        replica: k,
                    }
                }))
            })
            .collect::<Result<Vec<_>, ScenarioError>>()
            .map(|v| v.into_iter().flatten().collect())
    }
}

/// Runs one point to the end; `progress` receives simulated nanoseconds as they pass.
pub fn run_point(point: &Point, progress: &(dyn Fn(u64) + Sync)) -> Result<PointResult, SimError> {
    let built = point.run.build()?;
    let duration = built.spec.duration;
    let mut sim = Simulator::new(&built.spec, built.bottleneck)?;
    if let Some(p) = built.probe {
        sim = sim.with_probe(p);
    }
    let step = Nanos((duration.as_nanos() / 100).max(1));
    let mut done = Nanos::ZERO;
    while done < duration {
        let next = (done + step).min(duration);
        sim.run_until(next);
        progress((next - done).as_nanos());
        done = next;
    }
    Ok(PointResult {
        point: point.clone(),
        report: sim.finish(),
        capacity_packets: built.capacity_packets,
    })
}

/// Runs all points in parallel (rayon, all cores), with a progress bar when `show_progress`.
pub fn run_points(points: &[Point], show_progress: bool) -> Result<Vec<PointResult>, SimError> {
    let total: u64 = points
        .iter()
        .map(|p| Nanos::from_secs_f64(p.run.duration_s).as_nanos())
        .sum();
    let bar = if show_progress {
        let b = indicatif::ProgressBar::new(total / 1_000_000);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {wide_bar} {percent}% simulated, eta {eta}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b
    } else {
        indicatif::ProgressBar::hidden()
    };
    let acc = AtomicU64::new(0);
    let tick = |ns: u64| {
        let before = acc.fetch_add(ns, Ordering::Relaxed);
        bar.set_position((before + ns) / 1_000_000);
    };
    let out = points.par_iter().map(|p| run_point(p, &tick)).collect();
    bar.finish_and_clear();
    out
}

/// One table row: a flow group of one sweep point.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub labels: Vec<(String, String)>,
    pub group: String,
    /// (metric name, value) in a fixed order; the mean over replications.
    pub metrics: Vec<(&'static str, f64)>,
    /// Runs averaged into this row.
    pub replications: u32,
    /// 95 % confidence half-width of each metric (Student's t over the replications), in
    /// `metrics` order; empty for a single run.
    pub ci95: Vec<f64>,
}

impl Row {
    pub fn metric(&self, name: &str) -> Option<f64> {
        self.metrics
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| *v)
    }
    pub fn ci95(&self, name: &str) -> Option<f64> {
        let i = self.metrics.iter().position(|(k, _)| *k == name)?;
        self.ci95.get(i).copied()
    }
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Metric names, in column order.
pub const METRICS: [&str; 27] = [
    "flows",
    "goodput_mean_kbps",
    "goodput_total_mbps",
    "jain_group",
    "loss_group",
    "qdelay_ms",
    "e2e_delay_ms",
    "transfer_s",
    "transfers",
    "timeouts",
    "marks",
    "class_sojourn_ms",
    "utilisation",
    "loss_all",
    "jain_all",
    "queue_mean_pkts",
    "capacity_pkts",
    "probe_mean",
    "probe_last",
    "probe_hmean",
    "model_q_star",
    "qdelay_p50_ms",
    "qdelay_p99_ms",
    "share_pct",
    "fair_ratio",
    "dequeue_drops",
    "overflow_drops",
];

/// Each group's max-min fair share of the bottleneck, bit/s per flow: the link's rate shared
/// by water-filling among every flow, a flow's demand being its offered rate where it has one
/// (a CBR's rate, a TFRC's `max_rate_bps`, an access link's rate) and unbounded otherwise
/// (decided: a TCP flow, on/off ones included, may take any share it is given).
pub fn fair_shares(run: &RunConfig) -> Vec<f64> {
    use crate::config::SourceKind;
    let demand = |g: &crate::config::GroupConfig| {
        let own = match g.kind {
            SourceKind::Tcp => f64::INFINITY,
            SourceKind::Cbr => g.cbr.map_or(f64::INFINITY, |c| c.rate_bps),
            SourceKind::Tfrc => g.tfrc.map_or(f64::INFINITY, |t| t.max_rate_bps),
        };
        if g.access_rate_mbps > 0.0 {
            own.min(g.access_rate_mbps * 1e6)
        } else {
            own
        }
    };
    let mut order: Vec<usize> = (0..run.groups.len()).collect();
    order.sort_by(|&a, &b| demand(&run.groups[a]).total_cmp(&demand(&run.groups[b])));
    let mut left = run.bottleneck.rate_mbps * 1e6;
    let mut flows_left: f64 = run.groups.iter().map(|g| f64::from(g.count)).sum();
    let mut share = vec![0.0; run.groups.len()];
    for gi in order {
        let g = &run.groups[gi];
        let level = if flows_left > 0.0 {
            left / flows_left
        } else {
            0.0
        };
        let d = demand(g).min(level);
        share[gi] = d;
        left = (left - d * f64::from(g.count)).max(0.0);
        flows_left -= f64::from(g.count);
    }
    share
}

/// The fixed point q* of the nonlinear-RED paper's 1-D model (docs/algorithms/nonlinear-red.md; in
/// zl-aqm) for a run whose bottleneck is nonlinear RED: N = the TCP flows, C and d = the
/// bottleneck's rate and round-trip propagation delay, M and rwnd from the first TCP group.
fn model_q_star(run: &RunConfig) -> f64 {
    let zl_aqm::AqmParams::NonlinearRed(p) = &run.bottleneck.aqm else {
        return f64::NAN;
    };
    let tcp: Vec<_> = run
        .groups
        .iter()
        .filter(|g| g.kind == crate::config::SourceKind::Tcp)
        .collect();
    let Some(first) = tcp.first() else {
        return f64::NAN;
    };
    let model = zl_aqm::nonlinear_model::NonlinearRedModel {
        w_q: p.w_q,
        p_max: p.p_max,
        q_min: p.q_min,
        q_max: p.q_max,
        gamma: p.gamma,
        n: tcp.iter().map(|g| g.count as f64).sum(),
        c_bps: run.bottleneck.rate_mbps * 1e6,
        d_secs: 2.0 * run.bottleneck.delay_ms * 1e-3,
        m_bits: first.tcp.packet_size as f64 * 8.0,
        rwnd: first.tcp.window_cap as f64,
    };
    model.fixed_point().unwrap_or(f64::NAN)
}

/// Student's t quantile 0.975 for `df` degrees of freedom.
fn t975(df: u32) -> f64 {
    const T: [f64; 10] = [
        12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    ];
    match df {
        0 => f64::NAN,
        1..=10 => T[df as usize - 1],
        11..=30 => 2.1,
        _ => 1.96,
    }
}

/// Flattens results into rows (one per point and group), averaging replications.
pub fn rows(results: &[PointResult]) -> Vec<Row> {
    let single = rows_per_run(results);
    let mut out: Vec<Row> = Vec::new();
    let mut samples: Vec<Vec<Vec<f64>>> = Vec::new();
    for r in single {
        match out
            .iter()
            .position(|o| o.labels == r.labels && o.group == r.group)
        {
            Some(i) => {
                out[i].replications += 1;
                for (k, (_, v)) in r.metrics.iter().enumerate() {
                    samples[i][k].push(*v);
                }
            }
            None => {
                samples.push(r.metrics.iter().map(|(_, v)| vec![*v]).collect());
                out.push(r);
            }
        }
    }
    for (row, s) in out.iter_mut().zip(samples) {
        if row.replications <= 1 {
            continue;
        }
        let n = row.replications as f64;
        row.ci95 = Vec::with_capacity(s.len());
        for ((_, m), xs) in row.metrics.iter_mut().zip(s) {
            let mean = xs.iter().sum::<f64>() / n;
            let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / (n - 1.0);
            *m = mean;
            row.ci95.push(t975(row.replications - 1) * (var / n).sqrt());
        }
    }
    out
}

fn rows_per_run(results: &[PointResult]) -> Vec<Row> {
    let mut out = Vec::new();
    for r in results {
        let rep = &r.report;
        let all: Vec<f64> = rep.flows.iter().map(|f| f.goodput_bps).collect();
        let jain_all = jain_index(&all);
        let warm = r.point.run.warmup_s;
        let trace: Vec<f64> = rep
            .samples
            .iter()
            .filter(|s| s.t >= warm && s.probe.is_finite())
            .map(|s| s.probe)
            .collect();
        let probe_mean = if trace.is_empty() {
            f64::NAN
        } else {
            trace.iter().sum::<f64>() / trace.len() as f64
        };
        let probe_last = trace.last().copied().unwrap_or(f64::NAN);
        // The harmonic mean: for the flow estimate 1/P(t) it is 1 / mean P(t), which a few
        // samples with P(t) near 0 cannot dominate the way they dominate the plain mean.
        let all: Vec<f64> = rep
            .samples
            .iter()
            .filter(|s| s.t >= warm && !s.probe.is_nan())
            .map(|s| s.probe)
            .collect();
        let probe_hmean = if all.is_empty() {
            f64::NAN
        } else {
            all.len() as f64 / all.iter().map(|x| 1.0 / x).sum::<f64>()
        };
        let q_star = model_q_star(&r.point.run);
        let fair = fair_shares(&r.point.run);
        let goodput_all: f64 = rep.flows.iter().map(|f| f.goodput_bps).sum();
        let caps: Vec<f64> = rep
            .samples
            .iter()
            .filter(|s| s.t >= warm)
            .map(|s| s.capacity_packets as f64)
            .collect();
        let capacity = if caps.is_empty() {
            r.capacity_packets as f64
        } else {
            caps.iter().sum::<f64>() / caps.len() as f64
        };
        for (gi, g) in r.point.run.groups.iter().enumerate() {
            let fl: Vec<_> = rep
                .flows
                .iter()
                .filter(|f| f.group as usize == gi)
                .collect();
            // A group may be empty (`count = 0`, e.g. one end of a sweep): nothing to report.
            let Some(first) = fl.first() else {
                continue;
            };
            let n = fl.len() as f64;
            let gp: Vec<f64> = fl.iter().map(|f| f.goodput_bps).collect();
            let sum = |f: &dyn Fn(&crate::FlowCounters) -> u64| {
                fl.iter().map(|x| f(&x.counters)).sum::<u64>() as f64
            };
            let sent = sum(&|c| c.sent);
            let drops = sum(&|c| c.drops());
            let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { 0.0 };
            let class = first.class as usize;
            let sojourn = rep.sojourn.get(class).map_or(0.0, |s| s.mean_s() * 1e3);
            let delay_ms = |q: f64| {
                rep.group_delay
                    .get(gi)
                    .map_or(f64::NAN, |h| h.quantile_ns(q) * 1e-6)
            };
            let goodput_mean = gp.iter().sum::<f64>() / n;
            out.push(Row {
                labels: r.point.labels.clone(),
                group: g.name.clone(),
                metrics: vec![
                    ("flows", n),
                    ("goodput_mean_kbps", goodput_mean / 1e3),
                    ("goodput_total_mbps", gp.iter().sum::<f64>() / 1e6),
                    ("jain_group", jain_index(&gp)),
                    ("loss_group", ratio(drops, sent)),
                    (
                        "qdelay_ms",
                        ratio(sum(&|c| c.queue_delay_sum), sum(&|c| c.queue_delay_n)) * 1e-6,
                    ),
                    (
                        "e2e_delay_ms",
                        ratio(sum(&|c| c.e2e_delay_sum), sum(&|c| c.e2e_delay_n)) * 1e-6,
                    ),
                    (
                        "transfer_s",
                        ratio(sum(&|c| c.transfer_time_sum), sum(&|c| c.transfers)) * 1e-9,
                    ),
                    ("transfers", sum(&|c| c.transfers)),
                    ("timeouts", sum(&|c| c.timeouts)),
                    ("marks", sum(&|c| c.marks)),
                    ("class_sojourn_ms", sojourn),
                    ("utilisation", rep.utilisation),
                    ("loss_all", rep.loss_rate()),
                    ("jain_all", jain_all),
                    ("queue_mean_pkts", rep.mean_queue_packets),
                    ("capacity_pkts", capacity),
                    ("probe_mean", probe_mean),
                    ("probe_last", probe_last),
                    ("probe_hmean", probe_hmean),
                    ("model_q_star", q_star),
                    ("qdelay_p50_ms", delay_ms(0.5)),
                    ("qdelay_p99_ms", delay_ms(0.99)),
                    ("share_pct", 100.0 * ratio(gp.iter().sum(), goodput_all)),
                    ("fair_ratio", ratio(goodput_mean, fair[gi])),
                    ("dequeue_drops", sum(&|c| c.dequeue_drops)),
                    ("overflow_drops", sum(&|c| c.overflow_drops)),
                ],
                replications: 1,
                ci95: Vec::new(),
            });
        }
    }
    out
}
