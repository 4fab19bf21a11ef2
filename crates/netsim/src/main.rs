//! `netsim`: runs the scenario files of `configs/netsim/`.
//!
//! ```text
//! netsim list                         # the scenarios and what they reproduce
//! netsim <scenario> [--quick]         # e.g. `netsim priority-ecn-weight`
//! netsim run <file.toml> [--quick]    # any scenario file
//! ```
//!
//! Each run writes `<out>/<name>.csv` (every metric), `<name>_trace.csv` when the scenario traces
//! over time, `<name>.md` (the markdown table) and the plots as PNG and SVG.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use netsim::report;
use netsim::scenario::{rows, run_points, Scenario};

#[derive(Parser)]
#[command(
    name = "netsim",
    about = "Reproduce the papers' experiments with zlrouter's own AQM and QoS code"
)]
struct Cli {
    /// Directory holding the scenario files.
    #[arg(long, global = true, default_value = "configs/netsim")]
    configs: PathBuf,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// List the scenarios.
    List,
    /// Run a scenario file.
    Run {
        file: PathBuf,
        #[command(flatten)]
        opts: RunOpts,
    },
    /// Run the scenario `configs/netsim/<name>.toml`.
    #[command(external_subcommand)]
    Named(Vec<String>),
}

#[derive(Args, Clone)]
struct RunOpts {
    /// Apply the scenario's `[quick]` overrides (shorter runs, fewer flows).
    #[arg(long)]
    quick: bool,
    /// Output directory for CSV, markdown and plots.
    #[arg(long, default_value = "docs/img/netsim")]
    out: PathBuf,
    /// No progress bar.
    #[arg(long)]
    no_progress: bool,
}

#[derive(Parser)]
#[command(name = "netsim <scenario>")]
struct NamedOpts {
    #[command(flatten)]
    opts: RunOpts,
}

fn run_file(path: &Path, opts: &RunOpts) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let sc = Scenario::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let points = sc
        .expand(opts.quick)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    eprintln!(
        "{}: {} run(s){}",
        sc.name,
        points.len(),
        if opts.quick { " (quick)" } else { "" }
    );
    let t0 = std::time::Instant::now();
    let results = run_points(&points, !opts.no_progress).map_err(|e| e.to_string())?;
    let events: u64 = results.iter().map(|r| r.report.events).sum();
    let wall = t0.elapsed().as_secs_f64();
    eprintln!(
        "{events} events in {wall:.1} s wall ({:.2} M events/s over all cores)",
        events as f64 / wall / 1e6
    );
    let rows = rows(&results);
    std::fs::create_dir_all(&opts.out).map_err(|e| format!("{}: {e}", opts.out.display()))?;
    let write = |name: String, body: String| {
        let p = opts.out.join(name);
        std::fs::write(&p, body).map_err(|e| format!("{}: {e}", p.display()))
    };
    write(format!("{}.csv", sc.name), report::csv(&rows))?;
    if results.iter().any(|r| !r.report.samples.is_empty()) {
        write(
            format!("{}_trace.csv", sc.name),
            report::trace_csv(&results),
        )?;
    }
    let md = report::markdown(&rows, &sc.table);
    write(format!("{}.md", sc.name), md.clone())?;
    println!("## {}\n\n{}\n", sc.title, md);
    for p in &sc.plots {
        let series = report::plot_series(p, &rows, &results);
        let title = p.title.clone().unwrap_or_else(|| sc.title.clone());
        let cats = report::categories(p, &rows);
        report::plot(&opts.out, p, &title, &series, &cats)
            .map_err(|e| format!("plot {}: {e}", p.file))?;
    }
    Ok(())
}

fn list(dir: &Path) -> Result<(), String> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    for f in files {
        let text = std::fs::read_to_string(&f).map_err(|e| e.to_string())?;
        match Scenario::parse(&text) {
            Ok(s) => println!("{:<28} {} [{}]", s.name, s.title, s.reproduces),
            Err(e) => println!("{:<28} INVALID: {e}", f.display()),
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match &cli.cmd {
        Cmd::List => list(&cli.configs),
        Cmd::Run { file, opts } => run_file(file, opts),
        Cmd::Named(args) => {
            let name = args.first().cloned().unwrap_or_default();
            let rest =
                std::iter::once(format!("netsim {name}")).chain(args.iter().skip(1).cloned());
            match NamedOpts::try_parse_from(rest) {
                Ok(o) => run_file(&cli.configs.join(format!("{name}.toml")), &o.opts),
                Err(e) => e.exit(),
            }
        }
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
