//! `ixp-sim`: run one workload on a modelled IXP1200, or sweep a grid and write CSV and plots.

use clap::{Args, Parser, Subcommand};
use ixp_sim::sweep::{self, SweepSpec};
use ixp_sim::{
    simulate_auto, LatencyProfile, MachineParams, ParamError, RunLength, Unit, WorkloadSpec,
};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "ixp-sim",
    version,
    about = "Cycle-level IXP1200 model: predicts packet rates of IPv4 forwarding, RED, SRED and ZL-RED"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Simulate one workload and print Mpps, latency, ME and memory-unit figures.
    Run {
        /// A workload TOML file, or the name of a shipped one (ipv4, red, sred, zlred-table,
        /// zlred-scan).
        workload: String,
        #[command(flatten)]
        machine: MachineArgs,
        /// Print the whole report as JSON instead of the summary (unused units' bounds are null).
        #[arg(long)]
        json: bool,
    },
    /// Sweep threads, Zombie List size and placement; write CSV, markdown tables and PNG/SVG
    /// plots.
    Sweep {
        /// Output directory.
        #[arg(long, default_value = "ixp-sim-out")]
        out: PathBuf,
        #[command(flatten)]
        machine: MachineArgs,
        /// Zombie List sizes M to sweep.
        #[arg(long, value_delimiter = ',', default_value = "10,100,1000,10000")]
        m: Vec<usize>,
        /// Threads per ME to sweep.
        #[arg(long, value_delimiter = ',', default_value = "1,2,3,4")]
        thread_counts: Vec<u32>,
        /// Skip the plots (CSV only).
        #[arg(long)]
        no_plots: bool,
    },
}

#[derive(Args, Clone)]
struct MachineArgs {
    /// A machine TOML file (MachineParams); flags below override it.
    #[arg(long)]
    machine: Option<PathBuf>,
    /// Microengines.
    #[arg(long)]
    mes: Option<u32>,
    /// Threads per microengine.
    #[arg(long)]
    threads: Option<u32>,
    /// Receive:transmit threads, e.g. 16:8.
    #[arg(long)]
    rx_tx: Option<String>,
    /// Core clock in MHz (162, 166, 200, 232).
    #[arg(long)]
    clock: Option<f64>,
    /// Latency profile: seed or datasheet.
    #[arg(long)]
    profile: Option<String>,
    /// Override one unit's latency: UNIT=MIN[-MAX] (e.g. sram=25 or sdram=40-50).
    #[arg(long = "latency", value_name = "UNIT=CYCLES")]
    latency: Vec<String>,
    /// Place a workload region on a unit: REGION=UNIT (e.g. zombie_list=sdram).
    #[arg(long = "place", value_name = "REGION=UNIT")]
    place: Vec<String>,
    /// Zombie List size M (workloads with a [zombie] section).
    #[arg(long)]
    zombie_m: Option<usize>,
    /// Packet size in bytes.
    #[arg(long)]
    packet_bytes: Option<u32>,
    /// Measured cycles, at least (longer when ~1000 packets need more).
    #[arg(long, default_value_t = 1_000_000)]
    cycles: u64,
    /// Seed for latency draws.
    #[arg(long)]
    seed: Option<u64>,
}

impl MachineArgs {
    fn params(&self) -> Result<MachineParams, ParamError> {
        let mut p = match &self.machine {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    ParamError::new("--machine", format!("{}: {e}", path.display()))
                })?;
                toml::from_str(&text).map_err(|e| ParamError::new("--machine", e.to_string()))?
            }
            None => MachineParams::default(),
        };
        if let Some(v) = self.mes {
            p.mes = v;
        }
        if let Some(v) = self.threads {
            p.threads_per_me = v;
        }
        if let Some(v) = self.clock {
            p.clock_mhz = v;
        }
        if let Some(v) = self.seed {
            p.seed = v;
        }
        if let Some(name) = &self.profile {
            p.profile = LatencyProfile::from_name(name).ok_or_else(|| {
                ParamError::new("--profile", format!("{name:?}: seed or datasheet"))
            })?;
        }
        if let Some(s) = &self.rx_tx {
            let (rx, tx) = s
                .split_once(':')
                .and_then(|(a, b)| Some((a.parse::<u32>().ok()?, b.parse::<u32>().ok()?)))
                .ok_or_else(|| ParamError::new("--rx-tx", format!("{s:?}: give RX:TX threads")))?;
            if rx + tx != p.mes * p.threads_per_me {
                return Err(ParamError::new(
                    "--rx-tx",
                    format!("{rx}+{tx} != {} MEs x {} threads", p.mes, p.threads_per_me),
                ));
            }
            p.rx_threads = Some(rx);
        }
        for l in &self.latency {
            let (unit, cyc) = l
                .split_once('=')
                .ok_or_else(|| ParamError::new("--latency", format!("{l:?}: give UNIT=CYCLES")))?;
            let u = Unit::from_name(unit)
                .ok_or_else(|| ParamError::new("--latency", format!("unknown unit {unit:?}")))?;
            let parse = |x: &str| {
                x.parse::<u32>().map_err(|_| {
                    ParamError::new("--latency", format!("{x:?} is not a cycle count"))
                })
            };
            let (lo, hi) = match cyc.split_once('-') {
                Some((a, b)) => (parse(a)?, parse(b)?),
                None => (parse(cyc)?, parse(cyc)?),
            };
            let slot = p.units.get_mut(u);
            let mut up = slot.unwrap_or_default();
            up.latency = Some([lo, hi]);
            *slot = Some(up);
        }
        Ok(p)
    }

    fn workload(&self, name: &str) -> Result<WorkloadSpec, ParamError> {
        let mut spec = load_workload(name)?;
        for pl in &self.place {
            let (region, unit) = pl
                .split_once('=')
                .ok_or_else(|| ParamError::new("--place", format!("{pl:?}: give REGION=UNIT")))?;
            let u = Unit::from_name(unit)
                .ok_or_else(|| ParamError::new("--place", format!("unknown unit {unit:?}")))?;
            spec.place(region, u)?;
        }
        if let Some(m) = self.zombie_m {
            match &mut spec.zombie {
                Some(z) => z.m = m,
                None => {
                    return Err(ParamError::new(
                        "--zombie-m",
                        "this workload has no [zombie] section",
                    ))
                }
            }
        }
        if let Some(b) = self.packet_bytes {
            spec.packet_bytes = b;
        }
        Ok(spec)
    }

    fn len(&self) -> RunLength {
        RunLength {
            warmup: 20_000,
            measure: self.cycles.max(1000),
        }
    }
}

fn load_workload(name: &str) -> Result<WorkloadSpec, ParamError> {
    if let Some(text) = sweep::shipped_workload(name) {
        return WorkloadSpec::from_toml(text);
    }
    let text = std::fs::read_to_string(Path::new(name)).map_err(|e| {
        ParamError::new(
            "WORKLOAD",
            format!(
                "{name}: {e} (shipped: {})",
                sweep::SHIPPED.map(|s| s.0).join(", ")
            ),
        )
    })?;
    WorkloadSpec::from_toml(&text)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result: Result<(), ParamError> = match cli.cmd {
        Cmd::Run {
            workload,
            machine,
            json,
        } => (|| {
            let params = machine.params()?;
            let w = machine.workload(&workload)?.compile()?;
            let r = simulate_auto(&params, &w, machine.len())?;
            // A closed stdout (`| head`) is not an error worth a panic.
            let mut stdout = std::io::stdout().lock();
            let _ = if json {
                let text = serde_json::to_string_pretty(&r)
                    .map_err(|e| ParamError::new("--json", e.to_string()))?;
                writeln!(stdout, "{text}")
            } else {
                write!(stdout, "{r}")
            };
            Ok(())
        })(),
        Cmd::Sweep {
            out,
            machine,
            m,
            thread_counts,
            no_plots,
        } => (|| {
            let spec = SweepSpec {
                base: machine.params()?,
                zombie_m: m,
                threads: thread_counts,
                len: machine.len(),
            };
            let rows = sweep::run(&spec)?;
            std::fs::create_dir_all(&out)
                .map_err(|e| ParamError::new("--out", format!("{}: {e}", out.display())))?;
            let csv = out.join("sweep.csv");
            std::fs::write(&csv, sweep::to_csv(&rows))
                .map_err(|e| ParamError::new("--out", format!("{}: {e}", csv.display())))?;
            println!("wrote {}", csv.display());
            let md = out.join("summary.md");
            std::fs::write(&md, sweep::to_markdown(&rows))
                .map_err(|e| ParamError::new("--out", format!("{}: {e}", md.display())))?;
            println!("wrote {}", md.display());
            if !no_plots {
                for f in ixp_sim::plot::plot_all(&rows, &out)
                    .map_err(|e| ParamError::new("plot", e.to_string()))?
                {
                    println!("wrote {}", f.display());
                }
            }
            Ok(())
        })(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ixp-sim: invalid input: {e}");
            ExitCode::from(2)
        }
    }
}
