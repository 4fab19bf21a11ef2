//! Writing results: CSV (every metric), a markdown table (chosen metrics), and plots (PNG and
//! SVG, plotters).

use std::fmt::Write as _;
use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::scenario::{PlotConfig, PlotKind, PointResult, Row, METRICS};
use crate::sim::SojournStats;

/// Result rows as CSV: sweep labels, group, then every metric.
pub fn csv(rows: &[Row]) -> String {
    let mut s = String::new();
    if let Some(r) = rows.first() {
        for (k, _) in &r.labels {
            let _ = write!(s, "{},", csv_field(k));
        }
        s.push_str("group,replications");
        for m in METRICS {
            let _ = write!(s, ",{m}");
        }
        if !r.ci95.is_empty() {
            for m in METRICS {
                let _ = write!(s, ",{m}_ci95");
            }
        }
        s.push('\n');
    }
    for r in rows {
        for (_, v) in &r.labels {
            let _ = write!(s, "{},", csv_field(v));
        }
        s.push_str(&csv_field(&r.group));
        let _ = write!(s, ",{}", r.replications);
        for (_, v) in &r.metrics {
            let _ = write!(s, ",{}", fmt_num(*v));
        }
        for v in &r.ci95 {
            let _ = write!(s, ",{}", fmt_num(*v));
        }
        s.push('\n');
    }
    s
}

/// The probe/queue traces as CSV: point label, t, queue, probe, cwnd of flow 0.
pub fn trace_csv(results: &[PointResult]) -> String {
    let mut s = String::from("point,t_s,queue_pkts,capacity_pkts,probe,cwnd0\n");
    for r in results {
        let name = point_name(r);
        for x in &r.report.samples {
            let _ = writeln!(
                s,
                "{},{},{},{},{},{}",
                csv_field(&name),
                x.t,
                x.queue_packets,
                x.capacity_packets,
                fmt_num(x.probe),
                x.cwnd0
            );
        }
    }
    s
}

fn csv_field(v: &str) -> String {
    if v.contains([',', '"', '\n']) {
        format!("\"{}\"", v.replace('"', "\"\""))
    } else {
        v.to_string()
    }
}

fn fmt_num(v: f64) -> String {
    if v.is_nan() {
        String::new()
    } else if v == v.trunc() && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v:.6}")
    }
}

fn point_name(r: &PointResult) -> String {
    r.point
        .labels
        .iter()
        .map(|(k, v)| format!("{}={v}", short(k)))
        .collect::<Vec<_>>()
        .join(" ")
}

fn short(k: &str) -> &str {
    k.rsplit('.').next().unwrap_or(k)
}

/// A markdown table of `metrics` (names from [`METRICS`]), 4 significant digits.
pub fn markdown(rows: &[Row], metrics: &[String]) -> String {
    let mut s = String::new();
    let Some(first) = rows.first() else { return s };
    s.push('|');
    for (k, _) in &first.labels {
        let _ = write!(s, " {} |", short(k));
    }
    s.push_str(" group |");
    for m in metrics {
        let _ = write!(s, " {m} |");
    }
    s.push_str("\n|");
    for _ in 0..first.labels.len() + 1 + metrics.len() {
        s.push_str("---|");
    }
    s.push('\n');
    for r in rows {
        s.push('|');
        for (_, v) in &r.labels {
            let _ = write!(s, " {v} |");
        }
        let _ = write!(s, " {} |", r.group);
        for m in metrics {
            let v = r.metric(m).unwrap_or(f64::NAN);
            match r.ci95(m) {
                Some(ci) => {
                    let _ = write!(s, " {} ± {} |", sig4(v), sig4(ci));
                }
                None => {
                    let _ = write!(s, " {} |", sig4(v));
                }
            }
        }
        s.push('\n');
    }
    s
}

fn sig4(v: f64) -> String {
    if v.is_nan() {
        "-".into()
    } else if v == v.trunc() || v.abs() >= 1000.0 {
        format!("{v:.0}")
    } else {
        let digits = (3 - v.abs().log10().floor() as i32).clamp(0, 6) as usize;
        format!("{v:.digits$}")
    }
}

type Series = Vec<(String, Vec<(f64, f64)>)>;

/// The values of a `Bars` plot's axis, in the order the sweep gives them: bar group `i` of
/// [`plot_series`] stands for `categories(..)[i]`.
pub fn categories(cfg: &PlotConfig, rows: &[Row]) -> Vec<String> {
    let x = cfg.x.clone().unwrap_or_default();
    let mut out: Vec<String> = Vec::new();
    for r in rows {
        if let Some(v) = r.label(&x) {
            if !out.iter().any(|c| c == v) {
                out.push(v.to_string());
            }
        }
    }
    out
}

/// The lines (or bars) a plot shows.
pub fn plot_series(cfg: &PlotConfig, rows: &[Row], results: &[PointResult]) -> Series {
    match cfg.kind {
        PlotKind::Bars => {
            // A bar group's x is its category's index; a bar without a finite value is left out.
            let cats = categories(cfg, rows);
            series_by_label(
                cfg,
                rows,
                |v| cats.iter().position(|c| c == v).map(|i| i as f64),
                |y: &f64| y.is_finite(),
            )
        }
        PlotKind::Lines => series_by_label(cfg, rows, |v| v.parse::<f64>().ok(), |_| true),
        PlotKind::Trace => results
            .iter()
            .map(|r| {
                let pts = r
                    .report
                    .samples
                    .iter()
                    .map(|s| {
                        (
                            s.t,
                            if cfg.y == "queue" {
                                s.queue_packets as f64
                            } else {
                                s.probe
                            },
                        )
                    })
                    .filter(|(_, y)| y.is_finite())
                    .collect();
                (point_name(r), pts)
            })
            .collect(),
        PlotKind::Sojourn => {
            let mut out = Vec::new();
            for r in results {
                for (ci, s) in r.report.sojourn.iter().enumerate() {
                    if s.n == 0 {
                        continue;
                    }
                    let pts = (0..SojournStats::BINS)
                        .map(|b| (b as f64 + 0.5, s.hist_ms[b] as f64 / s.n as f64))
                        .filter(|(x, _)| *x < 400.0)
                        .collect();
                    out.push((format!("{} class {ci}", point_name(r)), pts));
                }
            }
            out
        }
    }
}

/// The rows of `cfg`'s groups as series, one per combination of the labels other than the x
/// axis (and the group): a point's x from its x label by `x_of`, its y the plot's metric where
/// `keep` takes it.
fn series_by_label(
    cfg: &PlotConfig,
    rows: &[Row],
    x_of: impl Fn(&str) -> Option<f64>,
    keep: impl Fn(&f64) -> bool,
) -> Series {
    let x = cfg.x.clone().unwrap_or_default();
    let mut series: Series = Vec::new();
    for r in rows {
        if !cfg.groups.is_empty() && !cfg.groups.contains(&r.group) {
            continue;
        }
        let Some(xv) = r.label(&x).and_then(&x_of) else {
            continue;
        };
        let Some(yv) = r.metric(&cfg.y).filter(&keep) else {
            continue;
        };
        let mut name: Vec<String> = r
            .labels
            .iter()
            .filter(|(k, _)| *k != x)
            .map(|(k, v)| format!("{}={v}", short(k)))
            .collect();
        name.push(r.group.clone());
        let name = name.join(" ");
        match series.iter_mut().find(|(n, _)| *n == name) {
            Some((_, pts)) => pts.push((xv, yv)),
            None => series.push((name, vec![(xv, yv)])),
        }
    }
    series
}

/// Draws `series` to `<dir>/<file>.png` and `.svg`; a `Bars` plot names its bar groups by
/// `categories`.
pub fn plot(
    dir: &Path,
    cfg: &PlotConfig,
    title: &str,
    series: &Series,
    categories: &[String],
) -> Result<(), String> {
    let png = dir.join(format!("{}.png", cfg.file));
    let svg = dir.join(format!("{}.svg", cfg.file));
    {
        let root = BitMapBackend::new(&png, (1000, 640)).into_drawing_area();
        match cfg.kind {
            PlotKind::Bars => draw_bars(root, cfg, title, series, categories)?,
            _ => draw(root, cfg, title, series)?,
        }
    }
    let root = SVGBackend::new(&svg, (1000, 640)).into_drawing_area();
    match cfg.kind {
        PlotKind::Bars => draw_bars(root, cfg, title, series, categories),
        _ => draw(root, cfg, title, series),
    }
}

/// Grouped bars: one group per category, one bar per series in it.
fn draw_bars<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    cfg: &PlotConfig,
    title: &str,
    series: &Series,
    categories: &[String],
) -> Result<(), String> {
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
    root.fill(&WHITE).map_err(e)?;
    let (mut y0, mut y1) = (0.0f64, f64::NEG_INFINITY);
    for &(_, y) in series.iter().flat_map(|(_, p)| p.iter()) {
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if categories.is_empty() || !y1.is_finite() {
        return Err("nothing to plot".into());
    }
    if y1 <= y0 {
        y1 = y0 + 1.0;
    }
    y1 += (y1 - y0) * 0.05;
    let n = categories.len() as f64;
    let label = |x: &f64| {
        let i = x.round();
        if (x - i).abs() < 1e-6 && i >= 0.0 {
            categories.get(i as usize).cloned().unwrap_or_default()
        } else {
            String::new()
        }
    };
    let mut c = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.5..n - 0.5, y0..y1)
        .map_err(e)?;
    c.configure_mesh()
        .disable_x_mesh()
        .x_labels(categories.len() + 1)
        .x_label_formatter(&label)
        .x_desc(cfg.x.clone().unwrap_or_default())
        .y_desc(cfg.y.as_str())
        .draw()
        .map_err(e)?;
    let width = 0.8 / series.len().max(1) as f64;
    for (j, (name, pts)) in series.iter().enumerate() {
        let color = Palette99::pick(j).to_rgba();
        let left = |x: f64| x - 0.4 + j as f64 * width;
        c.draw_series(
            pts.iter().map(|&(x, y)| {
                Rectangle::new([(left(x), 0.0), (left(x) + width, y)], color.filled())
            }),
        )
        .map_err(e)?
        .label(name.as_str())
        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
    }
    c.configure_series_labels()
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperRight)
        .draw()
        .map_err(e)?;
    root.present().map_err(e)
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    cfg: &PlotConfig,
    title: &str,
    series: &Series,
) -> Result<(), String> {
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
    root.fill(&WHITE).map_err(e)?;
    let pts = series.iter().flat_map(|(_, p)| p.iter());
    let (mut x0, mut x1, mut y0, mut y1) =
        (f64::INFINITY, f64::NEG_INFINITY, 0.0f64, f64::NEG_INFINITY);
    for &(x, y) in pts {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    if !x0.is_finite() || !y1.is_finite() {
        return Err("nothing to plot".into());
    }
    if x1 <= x0 {
        x1 = x0 + 1.0;
    }
    if y1 <= y0 {
        y1 = y0 + 1.0;
    }
    y1 += (y1 - y0) * 0.05;
    let xlabel = match cfg.kind {
        PlotKind::Lines => cfg.x.clone().unwrap_or_default(),
        PlotKind::Trace => "time (s)".into(),
        PlotKind::Sojourn => "queueing delay (ms)".into(),
        PlotKind::Bars => cfg.x.clone().unwrap_or_default(),
    };
    let ylabel = match cfg.kind {
        PlotKind::Sojourn => "fraction of packets".to_string(),
        _ => cfg.y.clone(),
    };
    let mut chart = ChartBuilder::on(&root);
    chart
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70);
    macro_rules! body {
        ($c:expr) => {{
            let mut c = $c;
            c.configure_mesh()
                .x_desc(xlabel.as_str())
                .y_desc(ylabel.as_str())
                .draw()
                .map_err(e)?;
            for (i, (name, p)) in series.iter().enumerate() {
                let color = Palette99::pick(i).to_rgba();
                let mut p = p.clone();
                if cfg.kind == PlotKind::Lines {
                    p.sort_by(|a, b| a.0.total_cmp(&b.0));
                }
                c.draw_series(LineSeries::new(p.iter().copied(), color.stroke_width(2)))
                    .map_err(e)?
                    .label(name.as_str())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
                    });
                if cfg.kind == PlotKind::Lines {
                    c.draw_series(
                        p.iter()
                            .map(|&(x, y)| Circle::new((x, y), 3, color.filled())),
                    )
                    .map_err(e)?;
                }
            }
            c.configure_series_labels()
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .position(SeriesLabelPosition::UpperRight)
                .draw()
                .map_err(e)?;
        }};
    }
    if cfg.log_x && x0 > 0.0 {
        body!(chart
            .build_cartesian_2d((x0..x1).log_scale(), y0..y1)
            .map_err(e)?);
    } else {
        body!(chart.build_cartesian_2d(x0..x1, y0..y1).map_err(e)?);
    }
    root.present().map_err(e)
}
