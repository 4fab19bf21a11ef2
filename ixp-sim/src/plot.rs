//! PNG and SVG figures of a sweep (plotters): packet rate vs Zombie List size, vs threads per
//! ME, and vs the receive/transmit split, one panel per latency profile.

use crate::params::LatencyProfile;
use crate::sweep::{profile_name, SweepRow, SHIPPED};
use plotters::prelude::*;
use std::path::{Path, PathBuf};

type Series = (String, Vec<(f64, f64)>);

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// Draws one panel of line series; `log_x`/`log_y` plot log10 of the values.
fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    x_desc: &str,
    series: &[Series],
    log_x: bool,
    log_y: bool,
    legend: SeriesLabelPosition,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    let tx = |v: f64| if log_x { v.max(1e-9).log10() } else { v };
    let ty = |v: f64| if log_y { v.max(1e-9).log10() } else { v };
    let pts = series.iter().flat_map(|s| s.1.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in pts {
        x0 = x0.min(tx(x));
        x1 = x1.max(tx(x));
        y0 = y0.min(ty(y));
        y1 = y1.max(ty(y));
    }
    if x0 > x1 {
        return Ok(());
    }
    let pad_x = ((x1 - x0) * 0.05).max(0.1);
    let pad_y = ((y1 - y0) * 0.1).max(0.1);
    let y_lo = if log_y { y0 - pad_y } else { 0.0 };
    let mut chart = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((x0 - pad_x)..(x1 + pad_x), y_lo..(y1 + pad_y))?;
    let fx = move |v: &f64| {
        let r = if log_x { 10f64.powf(*v) } else { *v };
        format!("{}", (r * 100.0).round() / 100.0)
    };
    let fy = move |v: &f64| {
        let r = if log_y { 10f64.powf(*v) } else { *v };
        format!("{}", (r * 1000.0).round() / 1000.0)
    };
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc("Mpps")
        .x_label_formatter(&fx)
        .y_label_formatter(&fy)
        .draw()?;
    for (i, (name, points)) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let data: Vec<(f64, f64)> = points.iter().map(|&(x, y)| (tx(x), ty(y))).collect();
        chart
            .draw_series(LineSeries::new(data.clone(), color.stroke_width(2)))?
            .label(name.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        chart.draw_series(data.into_iter().map(|p| Circle::new(p, 3, color.filled())))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(legend)
        .draw()?;
    Ok(())
}

struct Figure {
    file: &'static str,
    x_desc: &'static str,
    log_x: bool,
    log_y: bool,
    /// Where the legend sits (away from the lines).
    legend: fn() -> SeriesLabelPosition,
    /// Title and series of each panel (one per profile).
    panels: Vec<(String, Vec<Series>)>,
}

fn figures(rows: &[SweepRow]) -> Vec<Figure> {
    let paper = |r: &SweepRow| r.threads_per_me == 4 && r.rx_threads == 16 && r.tx_threads == 8;
    let mut by_m = Vec::new();
    let mut by_threads = Vec::new();
    let mut by_split = Vec::new();
    for profile in [LatencyProfile::Seed, LatencyProfile::Datasheet] {
        let pr: Vec<&SweepRow> = rows.iter().filter(|r| r.profile == profile).collect();
        let title = |what: &str| format!("{what}, {} latencies", profile_name(profile));
        let mut m_series = Vec::new();
        for w in ["zlred-table", "zlred-scan"] {
            for pl in ["sram", "sdram"] {
                let mut pts: Vec<(f64, f64)> = pr
                    .iter()
                    .filter(|r| r.workload == w && r.placement == pl && paper(r))
                    .map(|r| (r.m as f64, r.mpps))
                    .collect();
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                if !pts.is_empty() {
                    m_series.push((format!("{w} ({pl})"), pts));
                }
            }
        }
        by_m.push((title("ZL-RED vs Zombie List size, 16 rx / 8 tx"), m_series));
        let mut t_series = Vec::new();
        let mut s_series = Vec::new();
        for (w, _) in SHIPPED {
            let base: Vec<&&SweepRow> = pr
                .iter()
                .filter(|r| r.workload == w && r.placement == "-")
                .collect();
            let mut t: Vec<(f64, f64)> = base
                .iter()
                .filter(|r| r.rx_threads * 3 == (r.rx_threads + r.tx_threads) * 2)
                .map(|r| (r.threads_per_me as f64, r.mpps))
                .collect();
            t.sort_by(|a, b| a.0.total_cmp(&b.0));
            t.dedup_by(|a, b| a.0 == b.0);
            t_series.push((w.to_string(), t));
            let mut s: Vec<(f64, f64)> = base
                .iter()
                .filter(|r| r.threads_per_me == 4)
                .map(|r| (r.rx_threads as f64, r.mpps))
                .collect();
            s.sort_by(|a, b| a.0.total_cmp(&b.0));
            s.dedup_by(|a, b| a.0 == b.0);
            s_series.push((w.to_string(), s));
        }
        by_threads.push((
            title("Packet rate vs threads per ME (2/3 receive)"),
            t_series,
        ));
        by_split.push((title("Packet rate vs receive threads (of 24)"), s_series));
    }
    vec![
        Figure {
            file: "mpps_vs_m",
            x_desc: "Zombie List size M",
            log_x: true,
            log_y: true,
            legend: || SeriesLabelPosition::LowerLeft,
            panels: by_m,
        },
        Figure {
            file: "mpps_vs_threads",
            x_desc: "threads per ME",
            log_x: false,
            log_y: true,
            legend: || SeriesLabelPosition::LowerRight,
            panels: by_threads,
        },
        Figure {
            file: "mpps_vs_split",
            x_desc: "receive threads (the rest transmit)",
            log_x: false,
            log_y: true,
            legend: || SeriesLabelPosition::LowerRight,
            panels: by_split,
        },
    ]
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, plotters::coord::Shift>,
    fig: &Figure,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let areas = root.split_evenly((1, fig.panels.len().max(1)));
    for (area, (title, series)) in areas.iter().zip(&fig.panels) {
        panel(
            area,
            title,
            fig.x_desc,
            series,
            fig.log_x,
            fig.log_y,
            (fig.legend)(),
        )?;
    }
    root.present()?;
    Ok(())
}

/// Writes every figure as PNG and SVG under `dir`; returns the files written.
pub fn plot_all(rows: &[SweepRow], dir: &Path) -> Result<Vec<PathBuf>, Box<dyn std::error::Error>> {
    let mut out = Vec::new();
    for fig in figures(rows) {
        let png = dir.join(format!("{}.png", fig.file));
        draw(
            BitMapBackend::new(&png, (1400, 520)).into_drawing_area(),
            &fig,
        )?;
        out.push(png);
        let svg = dir.join(format!("{}.svg", fig.file));
        draw(SVGBackend::new(&svg, (1400, 520)).into_drawing_area(), &fig)?;
        out.push(svg);
    }
    Ok(out)
}
