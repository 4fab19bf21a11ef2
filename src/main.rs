//! `zlrouter`: run the router on a config (or the built-in default), check a config, or read
//! a running router's statistics.

use std::io::{IsTerminal, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod dpdk_ports;
mod stats_view;

use anyhow::{anyhow, bail, Context, Result};
use clap::{Parser, Subcommand};
use zl_control::control::ControlThread;
use zl_control::control::{self, token, Endpoint};
use zl_control::metrics::MetricsHub;
use zl_control::snapshot::FlowSnapshot;
use zl_control::{report, Snapshot};
use zl_core::Nanos;
use zl_dataplane::config::{PortKind, PortParams, RouteSource};
use zl_dataplane::cpus::WorkerCpus;
use zl_dataplane::mt::MtRouter;
use zl_dataplane::port::FileAccess;
use zl_dataplane::reload::Reloader;
use zl_dataplane::{
    build_threaded, build_with_ports, check_with_ports, BoxedPort, BuildError, Dataplane, Observer,
    PortSupplier, RouterConfig, RouterView, StopReason, DEFAULT_CONFIG,
};

#[derive(Parser)]
#[command(
    name = "zlrouter",
    version,
    about = "A userspace router with ZL-RED / SRED / RED and Diffserv AQM"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the router. Without CONFIG: the built-in default (generator traffic through ZL-RED
    /// and the Diffserv classes for 10 s of virtual time; no root needed).
    Run {
        /// The TOML config file.
        config: Option<PathBuf>,
        /// Override `run.duration_s`.
        #[arg(long)]
        duration: Option<f64>,
        /// Override `run.seed`.
        #[arg(long)]
        seed: Option<u64>,
        /// Serve Prometheus metrics at http://ADDR/metrics, e.g. 127.0.0.1:9464 (overrides
        /// `metrics.listen`); a bare port number binds 127.0.0.1.
        #[arg(long, value_name = "ADDR")]
        metrics: Option<String>,
        /// No progress line.
        #[arg(long, short)]
        quiet: bool,
        /// Print the final statistics as JSON (the schema of docs/operations.md) instead of
        /// the table; the line saying why the run stopped goes to stderr.
        #[arg(long)]
        json: bool,
    },
    /// Load and validate a config (and build it, opening its files), then exit.
    Check { config: PathBuf },
    /// Print a running router's metrics (from its metrics endpoint).
    Stats {
        /// The router's metrics address.
        #[arg(long, default_value = "127.0.0.1:9464")]
        addr: String,
        /// Print the Prometheus text as served instead of the summary.
        #[arg(long)]
        raw: bool,
        /// Print the live statistics as JSON (`GET /stats.json`, the schema of `run --json`).
        #[arg(long, conflicts_with = "raw")]
        json: bool,
    },
    /// List a running router's flows with the largest occurrence F in each egress port's
    /// Zombie List: key, F, F/T, F/(T P(t)), the misbehaving flag of eq. (4), packets and
    /// drops by cause since first seen.
    Flows {
        /// The router's metrics address.
        #[arg(long, default_value = "127.0.0.1:9464")]
        addr: String,
        /// Only this egress port.
        #[arg(long)]
        port: Option<String>,
        /// At most this many flows per port (the router keeps `metrics.top_flows`, 10 by
        /// default).
        #[arg(long, default_value_t = 10)]
        top: usize,
        /// Print the list as JSON: `{port: [flow, ...]}` (the `top_flows` of `/stats.json`).
        #[arg(long)]
        json: bool,
    },
    /// Make a running router re-read its config file and apply what changed while it
    /// forwards (as SIGHUP does): prints what changed, or why the reload was refused (the old
    /// config keeps running; exit status 1). Sends the router's control token, which only
    /// its user and root can read (docs/operations.md).
    Reload {
        /// The router's control (metrics) address [default: `metrics.listen` of --config,
        /// else 127.0.0.1:9464].
        #[arg(long)]
        addr: Option<String>,
        /// The router's config file: its `metrics.listen` and `metrics.token_file` say where
        /// to connect and which token to send.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// The control token's file [default: the config's `metrics.token_file`, else the
        /// first readable of /run/zlrouter/control.token,
        /// $XDG_RUNTIME_DIR/zlrouter/control.token, $TMPDIR/zlrouter-<uid>/control.token].
        #[arg(long, value_name = "FILE")]
        token_file: Option<PathBuf>,
    },
}

/// Writes to standard output without panicking: a closed pipe (`zlrouter run | head -1`)
/// ends the process quietly with status 141, as a process killed by SIGPIPE; any other write
/// error (a full disk) is returned, to be reported once.
fn out(args: std::fmt::Arguments<'_>) -> Result<()> {
    let mut o = std::io::stdout().lock();
    match o.write_fmt(args).and_then(|()| o.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => std::process::exit(141),
        Err(e) => Err(anyhow!("writing to standard output: {e}")),
    }
}

/// `println!` through [`out`].
macro_rules! outln {
    ($($arg:tt)*) => {
        out(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// Set while the progress line (written without a newline) is the last thing on stderr.
static PROGRESS_LINE_OPEN: AtomicBool = AtomicBool::new(false);

/// Ends the progress line, if one is open, so the next message starts on a line of its own.
fn end_progress_line() {
    // Relaxed: the flag carries no data; a rare extra or missing newline is harmless.
    if PROGRESS_LINE_OPEN.swap(false, Ordering::Relaxed) {
        let _ = writeln!(std::io::stderr());
    }
}

/// `eprintln!` that starts on a fresh line and ignores a closed or full stderr (a message
/// that cannot be shown must not stop the router).
macro_rules! note {
    ($($arg:tt)*) => {{
        end_progress_line();
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

/// Opens the ports the data plane leaves to the binary: AF_XDP sockets.
///
/// The `[ports.af_xdp]` table may carry `delay = { delay_ms = 10, capacity = 4096 }`
/// (`zl_delay::DelayParams`): the port is then wrapped in a `zl_delay::DelayedPort`, so every
/// frame it receives reaches the data plane that much later (a longer link in front of the
/// port). decided: the key lives in the backend table, taken out before the backend reads it.
/// The line holds pool buffers: size `run.pool_buffers` for its capacity.
fn open_port(i: usize, p: &PortParams) -> Result<Option<BoxedPort>, BuildError> {
    match p.kind {
        PortKind::AfXdp => {
            let mut table = p.af_xdp.clone().unwrap_or_default();
            let delay = match table.remove("delay") {
                None => None,
                Some(v) => {
                    let params: zl_delay::DelayParams =
                        v.try_into().map_err(|e| BuildError::External {
                            port: p.name.clone(),
                            detail: format!("`ports[{i}].af_xdp.delay`: {e}"),
                        })?;
                    let line = params.to_config().map_err(|e| BuildError::External {
                        port: p.name.clone(),
                        detail: format!("`ports[{i}].af_xdp.delay`: {e}"),
                    })?;
                    Some(line)
                }
            };
            let cfg: zl_afxdp::AfXdpConfig =
                toml::Value::Table(table)
                    .try_into()
                    .map_err(|e| BuildError::External {
                        port: p.name.clone(),
                        detail: format!("`ports[{i}].af_xdp`: {e}"),
                    })?;
            let port = zl_afxdp::AfXdpPort::open(&p.name, i as u16, &cfg).map_err(|e| {
                BuildError::External {
                    port: p.name.clone(),
                    detail: e.to_string(),
                }
            })?;
            match delay {
                None => Ok(Some(Box::new(port))),
                Some(line) => {
                    let delayed = zl_delay::DelayedPort::new(port, line).map_err(|e| {
                        BuildError::External {
                            port: p.name.clone(),
                            detail: format!("`ports[{i}].af_xdp.delay`: {e}"),
                        }
                    })?;
                    Ok(Some(Box::new(delayed)))
                }
            }
        }
        _ => Ok(None),
    }
}

/// `[routing] source = "kernel"`: each AF_XDP port's kernel interface index, by port index,
/// for `follow_kernel` (either engine). Ports of other kinds have no kernel interface (a DPDK
/// port's NIC is the PMD's, not the kernel's): routes never lead to them, and the start-up
/// says so.
fn kernel_ports(cfg: &RouterConfig) -> Result<Vec<(u32, u16)>> {
    let mut ports = Vec::new();
    for (i, p) in cfg.ports.iter().enumerate() {
        if p.kind != PortKind::AfXdp {
            note!(
                "zlrouter: warning: port `{}` is not an AF_XDP port: with routing.source = \"kernel\" \
                 only AF_XDP ports have a kernel interface (ARP, NDP, the kernel's routes); \
                 only static [[routes]] lead to `{}`",
                p.name,
                p.name
            );
            continue;
        }
        let ifname = p
            .af_xdp
            .as_ref()
            .and_then(|t| t.get("ifname"))
            .and_then(|v| v.as_str())
            .unwrap_or(&p.name);
        let ifindex = zl_afxdp::interface_index(ifname)
            .with_context(|| format!("port `{}` (routing.source = \"kernel\")", p.name))?;
        ports.push((ifindex, i as u16));
    }
    Ok(ports)
}

/// What a failed start of the kernel follower says.
const FOLLOW_KERNEL: &str =
    "reading the kernel's routes and neighbours through netlink (routing.source = \"kernel\")";

/// The port supplier of both routers: AF_XDP and DPDK ports are opened here.
fn ports<'a>(
    cfg: &'a RouterConfig,
    dpdk: &'a mut dpdk_ports::DpdkOpener,
) -> impl FnMut(usize, &PortParams) -> Result<Option<BoxedPort>, BuildError> + 'a {
    move |i, p| match p.kind {
        PortKind::Dpdk => dpdk.open(cfg, i, p).map(Some),
        _ => open_port(i, p),
    }
}

/// Builds the single-thread data plane, opening AF_XDP and DPDK ports here. With
/// [`FileAccess::CheckOnly`] (`zlrouter check`) no file is written.
fn build(
    cfg: &RouterConfig,
    base: &Path,
    dpdk: &mut dpdk_ports::DpdkOpener,
    access: FileAccess,
) -> Result<Dataplane, BuildError> {
    let supply: &mut PortSupplier<'_> = &mut ports(cfg, dpdk);
    match access {
        FileAccess::Open => build_with_ports(cfg, base, supply),
        FileAccess::CheckOnly => check_with_ports(cfg, base, supply),
    }
}

fn load(config: Option<&Path>) -> Result<(RouterConfig, PathBuf)> {
    match config {
        Some(p) => {
            let cfg = RouterConfig::load(p).with_context(|| format!("config {}", p.display()))?;
            let base = p.parent().map(Path::to_path_buf).unwrap_or_default();
            Ok((cfg, base))
        }
        None => {
            let cfg =
                RouterConfig::from_toml(DEFAULT_CONFIG).context("the built-in default config")?;
            Ok((cfg, PathBuf::from(".")))
        }
    }
}

/// The control endpoint's token (`zl_control::control::token`): the file the config names
/// (an error stops the start: the operator asked for it), else the first default place that
/// works; without one, `POST /reload` is refused and the start says so.
fn control_token(cfg: &RouterConfig, base: &Path) -> Result<Option<control::ControlToken>> {
    let configured = cfg.metrics.token_file.as_deref().map(|f| base.join(f));
    match token::provision(configured.as_deref()) {
        Ok(t) => Ok(Some(t)),
        Err(e) if configured.is_some() => Err(e).context("metrics.token_file"),
        Err(e) => {
            note!(
                "zlrouter: warning: {e}; POST /reload (`zlrouter reload`) is refused, SIGHUP \
                 still reloads; set metrics.token_file to a file this user can create"
            );
            Ok(None)
        }
    }
}

/// How often a loop shows its progress and publishes the metrics, in the loop's clock.
const PROGRESS_PERIOD: Nanos = Nanos::from_millis(100);

/// The progress line on stderr, at most twice a second of wall time.
struct Progress {
    quiet: bool,
    last: Option<Instant>,
    hub: Arc<MetricsHub>,
}

impl<R: RouterView> Observer<R> for Progress {
    fn progress(&mut self, now: Nanos, router: &R) {
        self.show(now, router);
    }
}

impl Progress {
    fn show(&mut self, now: Nanos, dp: &dyn RouterView) {
        self.hub.publish(now, dp);
        if self.quiet
            || self
                .last
                .is_some_and(|t| t.elapsed() < Duration::from_millis(500))
        {
            return;
        }
        self.last = Some(Instant::now());
        let t = dp.totals();
        let mut err = std::io::stderr().lock();
        let _ = write!(
            err,
            "\r[{:>8.3} s] rx {} fwd {} drop {} mark {} queued {}   ",
            now.as_secs_f64(),
            t.received,
            t.forwarded,
            t.dropped(),
            t.marked,
            dp.queued()
        );
        let _ = err.flush();
        PROGRESS_LINE_OPEN.store(true, Ordering::Relaxed);
    }
}

/// The monotonic clock from now, for a live loop.
fn monotonic() -> impl Fn() -> Nanos + Sync {
    let start = Instant::now();
    move || Nanos(start.elapsed().as_nanos().min(u64::MAX as u128) as u64)
}

/// What runs beside either loop: the stop flag (raised by SIGINT / SIGTERM through the control
/// thread), the control thread with the metrics endpoint, and the progress observer.
struct Session {
    stop: Arc<AtomicBool>,
    server: ControlThread,
    progress: Progress,
}

impl Session {
    /// `base`: the config's directory (a relative `metrics.token_file` is in it).
    fn start(
        router: &dyn RouterView,
        cfg: &RouterConfig,
        base: &Path,
        reloader: Reloader,
        quiet: bool,
    ) -> Result<Self> {
        let stop = Arc::new(AtomicBool::new(false));
        let hub = Arc::new(MetricsHub::new(router));
        let endpoint = match cfg.metrics.listen {
            None => Endpoint::default(),
            Some(_) => Endpoint::from_config(&cfg.metrics, control_token(cfg, base)?),
        };
        let token_path = endpoint.token.as_ref().map(|t| t.path().to_owned());
        let server = ControlThread::start_endpoint(
            cfg.metrics.listen.as_deref(),
            endpoint,
            hub.clone(),
            stop.clone(),
            Some(reloader),
        )
        .context("starting the control thread")?;
        if let Some(addr) = server.local_addr() {
            match token_path {
                Some(p) => note!(
                    "zlrouter: metrics on http://{addr}/metrics (control token in {})",
                    p.display()
                ),
                None => note!("zlrouter: metrics on http://{addr}/metrics"),
            }
        }
        Ok(Session {
            stop,
            server,
            progress: Progress {
                quiet,
                last: None,
                hub,
            },
        })
    }

    /// Ends the progress line, prints the final counters at `now` (the run's length as the
    /// loop's clock saw it, drain included: whatever stopped the run, a failed port included),
    /// the `extra` line (on stderr with `--json`) and why the run stopped.
    fn end(
        self,
        router: &dyn RouterView,
        now: Nanos,
        result: Result<StopReason, zl_port::PortError>,
        extra: Option<String>,
        json: bool,
    ) -> Result<()> {
        end_progress_line();
        print_final(&Snapshot::take(router, now), json)?;
        match extra {
            // With --json, stdout is the one JSON document: the line goes to stderr, as the
            // reason the run stopped does.
            Some(line) if json => eprintln!("{line}"),
            Some(line) => outln!("{line}")?,
            None => {}
        }
        finish(result, self.server, json)
    }
}

fn run(
    config: Option<PathBuf>,
    duration: Option<f64>,
    seed: Option<u64>,
    metrics: Option<String>,
    quiet: bool,
    json: bool,
) -> Result<()> {
    // Before a DPDK EAL pins this thread (its main lcore) to one core: the threaded router's
    // workers get these CPUs back (`run.cpus` absent) or are checked against them.
    let process_cpus = zl_dataplane::cpus::allowed_cpus();
    let (mut cfg, base) = load(config.as_deref())?;
    // The command line's overrides, applied again to every config a reload reads.
    let overrides = move |cfg: &mut RouterConfig| {
        if let Some(d) = duration {
            cfg.run.duration_s = d;
        }
        if let Some(s) = seed {
            cfg.run.seed = s;
        }
        if let Some(m) = &metrics {
            // A bare port stays on loopback (`ControlThread::start`), as in the config.
            cfg.metrics.listen = Some(m.clone());
        }
    };
    overrides(&mut cfg);
    let reloader = |lists, routes, slot| {
        Reloader::new(
            config.clone(),
            Box::new(overrides.clone()),
            cfg.clone(),
            lists,
            routes,
            slot,
        )
    };
    let mut dpdk = dpdk_ports::DpdkOpener::open_all();
    if cfg.run.rx_workers > 0 {
        let supply: &mut PortSupplier<'_> = &mut ports(&cfg, &mut dpdk);
        let mut mt = build_threaded(&cfg, &base, supply, cfg.run.rx_workers as usize)?;
        if cfg.routing.source == RouteSource::Kernel {
            mt.follow_kernel(kernel_ports(&cfg)?, cfg.routing.unres_qlen as usize)
                .context(FOLLOW_KERNEL)?;
        }
        match &process_cpus {
            Ok(cpus) => mt.place_workers(WorkerCpus::from_config(cfg.run.cpus.as_deref(), cpus)?),
            Err(e) => {
                note!("zlrouter: the workers stay on this thread's CPUs: cannot read them: {e}")
            }
        }
        let r = reloader(mt.zombie_lists(), mt.routes(), mt.reload_slot());
        return run_threaded(mt, &cfg, &base, r, quiet, json);
    }
    let mut dp = build(&cfg, &base, &mut dpdk, FileAccess::Open)?;
    if cfg.routing.source == RouteSource::Kernel {
        dp.follow_kernel(kernel_ports(&cfg)?, cfg.routing.unres_qlen as usize)
            .context(FOLLOW_KERNEL)?;
    }
    let r = reloader(dp.zombie_lists(), dp.routes(), dp.reload_slot());
    let mut session = Session::start(&dp, &cfg, &base, r, quiet)?;
    let end = Nanos::from_secs_f64(cfg.run.duration_s);
    let drain = Nanos::from_secs_f64(cfg.run.drain_s);
    let (stop, progress) = (&session.stop, &mut session.progress);
    let result = if dp.has_live_ports() {
        dp.run_live(stop, &mut monotonic(), PROGRESS_PERIOD, progress)
    } else {
        dp.run_virtual(end, drain, stop, PROGRESS_PERIOD, progress)
    };
    session.end(&dp, dp.now(), result, None, json)
}

/// Runs the threaded router (`run.rx_workers` receive and `run.tx_workers` transmit workers) on the
/// monotonic clock, whatever the ports (generator and pcap ports then offer in real time).
fn run_threaded(
    mut mt: MtRouter,
    cfg: &RouterConfig,
    base: &Path,
    reloader: Reloader,
    quiet: bool,
    json: bool,
) -> Result<()> {
    let mut session = Session::start(&mt, cfg, base, reloader, quiet)?;
    if !quiet {
        note!(
            "zlrouter: {} receive worker(s) and {} transmit worker(s)",
            mt.params().rx_workers,
            mt.params().tx_workers
        );
        if !mt.has_live_ports() {
            note!(
                "zlrouter: the generator and pcap ports offer on the wall clock with rx_workers > 0: \
                 this run is not reproducible from its seed (rx_workers = 0 runs them in virtual time)"
            );
        }
    }
    let drain = Nanos::from_secs_f64(cfg.run.drain_s);
    let clock = monotonic();
    let result = mt.run(
        &clock,
        &session.stop,
        drain,
        PROGRESS_PERIOD,
        &mut session.progress,
    );
    let per_worker: Vec<String> = mt
        .worker_totals()
        .iter()
        .map(|w| w.received.to_string())
        .collect();
    let threads = format!(
        "threads: {} receive workers (received {}) and {} transmit worker(s)",
        per_worker.len(),
        per_worker.join(" / "),
        mt.params().tx_workers
    );
    session.end(&mt, mt.now(), result, Some(threads), json)
}

/// Prints why the run stopped and stops the control thread.
fn finish(
    result: Result<StopReason, zl_port::PortError>,
    server: ControlThread,
    json: bool,
) -> Result<()> {
    // With --json, stdout carries one JSON document and nothing else.
    let say = |line: &str| -> Result<()> {
        if json {
            note!("{line}");
            Ok(())
        } else {
            outln!("{line}")
        }
    };
    match result {
        Ok(StopReason::Finished) => say("stopped: every source finished and every queue drained")?,
        Ok(StopReason::DrainTimeout) => {
            say("stopped: drain time over; what was queued is counted as shutdown drops")?
        }
        Ok(StopReason::Interrupted) => {
            say("stopped: interrupted; what was queued is counted as shutdown drops")?
        }
        Err(e) => {
            say("stopped: a port failed; what was queued is counted as shutdown drops")?;
            server.stop();
            return Err(e.into());
        }
    }
    server.stop();
    Ok(())
}

/// Prints the final statistics: the table, or the snapshot as JSON.
fn print_final(snap: &Snapshot, json: bool) -> Result<()> {
    if json {
        outln!("{}", snap.to_json())
    } else {
        outln!("{}", report::render(snap))
    }
}

fn check(config: &Path) -> Result<()> {
    let (cfg, base) = load(Some(config))?;
    let mut dpdk = dpdk_ports::DpdkOpener::check();
    let dp = build(&cfg, &base, &mut dpdk, FileAccess::CheckOnly)?;
    if let Err(e) = dpdk.finish_check() {
        bail!("{}: {e}", config.display());
    }
    outln!(
        "{}: ok ({} ports, {} packet buffers)",
        config.display(),
        dp.slots().len(),
        dp.pool_total()
    )
}

/// How long `zlrouter stats` waits to connect, and then for the whole answer.
const STATS_TIMEOUT: Duration = Duration::from_secs(5);

fn stats(addr: &str, raw: bool, json: bool) -> Result<()> {
    let path = if json { "/stats.json" } else { "/metrics" };
    let text = fetch(addr, path)?;
    if raw || json {
        out(format_args!("{text}"))
    } else {
        out(format_args!("{}", stats_view::summarize(&text)))
    }
}

/// `zlrouter flows`: the top flows of each port (or of the port named `port`), from the
/// router's `/stats.json`.
fn flows(addr: &str, port: Option<&str>, top: usize, json: bool) -> Result<()> {
    #[derive(serde::Deserialize)]
    struct Port {
        name: String,
        #[serde(default)]
        top_flows: Vec<FlowSnapshot>,
    }
    #[derive(serde::Deserialize)]
    struct Stats {
        ports: Vec<Port>,
    }
    let text = fetch(addr, "/stats.json")?;
    let stats: Stats = serde_json::from_str(&text)
        .with_context(|| format!("{addr}/stats.json is not the router's statistics"))?;
    let mut ports: Vec<Port> = stats
        .ports
        .into_iter()
        .filter(|p| port.is_none_or(|n| n == p.name))
        .collect();
    if let Some(n) = port.filter(|_| ports.is_empty()) {
        bail!("the router at {addr} has no port named `{n}`");
    }
    for p in &mut ports {
        p.top_flows.truncate(top);
    }
    if json {
        let map: serde_json::Map<String, serde_json::Value> = ports
            .iter()
            .map(|p| {
                let v = serde_json::to_value(&p.top_flows).unwrap_or_default();
                (p.name.clone(), v)
            })
            .collect();
        return outln!("{}", serde_json::to_string_pretty(&map).unwrap_or_default());
    }
    let with_list: Vec<(&str, &[FlowSnapshot])> = ports
        .iter()
        .filter(|p| !p.top_flows.is_empty())
        .map(|p| (p.name.as_str(), p.top_flows.as_slice()))
        .collect();
    if with_list.is_empty() {
        bail!(
            "no port of the router at {addr} lists flows: a port has them when it has a Zombie \
             List (`metrics.flow_estimate = true`, or an SRED / ZL-RED class) and \
             `metrics.top_flows` is not 0"
        );
    }
    out(format_args!("{}", report::render_flows(&with_list, top)))
}

/// The body of `GET path` from the router's metrics endpoint at `addr`. On a loopback address
/// the control token is sent when this user can read it (a router bound beyond loopback
/// serves `/stats.json` only with it); never to another host, which is not the router whose
/// token this host keeps.
fn fetch(addr: &str, path: &str) -> Result<String> {
    let local = addr
        .to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .is_some_and(|a| a.ip().is_loopback());
    let token = local
        .then(|| token::read_for_client(None).ok())
        .flatten()
        .map(|(_, t)| t);
    let (status, text) = request(addr, "GET", path, token.as_deref())?;
    if !status.ends_with(" 200") {
        bail!("{addr} answered: {status}: {}", text.trim_end());
    }
    Ok(text)
}

/// The router's control address when neither `--addr` nor a config names one.
const DEFAULT_CONTROL_ADDR: &str = "127.0.0.1:9464";

/// From a config file, loosely (a file that does not validate is still read, so that the
/// router itself can say why it refuses it): the control address (`metrics.listen`) and the
/// token file (`metrics.token_file`, relative to the file's directory).
fn control_settings(config: &Path) -> Result<(Option<String>, Option<PathBuf>)> {
    let text =
        std::fs::read_to_string(config).with_context(|| format!("reading {}", config.display()))?;
    let table: toml::Table = match text.parse() {
        Ok(t) => t,
        Err(e) => {
            note!(
                "zlrouter: {} does not parse ({}); using the default address and token",
                config.display(),
                e.message()
            );
            return Ok((None, None));
        }
    };
    let metrics = table.get("metrics").and_then(|m| m.as_table());
    let key = |k: &str| metrics.and_then(|m| m.get(k)).and_then(|v| v.as_str());
    let addr = key("listen").and_then(|l| control::listen_address(l).ok());
    let base = config.parent().unwrap_or(Path::new(""));
    Ok((addr, key("token_file").map(|f| base.join(f))))
}

/// `zlrouter reload`: `POST /reload` with the control token to the running router; its
/// answer on stdout when the reload was applied, on stderr (exit status 1) when it was
/// refused, with why this user has no token when that is the reason.
fn reload(addr: Option<String>, config: Option<&Path>, token_file: Option<PathBuf>) -> Result<()> {
    let (config_addr, config_token) = match config {
        Some(c) => control_settings(c)?,
        None => (None, None),
    };
    let addr = addr
        .or(config_addr)
        .unwrap_or_else(|| DEFAULT_CONTROL_ADDR.to_owned());
    let token = token::read_for_client(token_file.or(config_token).as_deref());
    let bearer = token.as_ref().ok().map(|(_, t)| t.as_str());
    let (status, text) = request(&addr, "POST", "/reload", bearer)?;
    if status.ends_with(" 200") {
        return out(format_args!("{text}"));
    }
    note!("zlrouter: {}", text.trim_end());
    match (status.ends_with(" 401") || status.ends_with(" 403"), &token) {
        (true, Err(why)) => note!(
            "zlrouter: {why}: run this as the router's user or root, name the file with \
             --token-file or --config, or send the router SIGHUP"
        ),
        (true, Ok((path, _))) if status.ends_with(" 401") => note!(
            "zlrouter: the token sent, from `{}`, is not this router's: its start-up line \
             names its token file (give it with --token-file, or --config)",
            path.display()
        ),
        _ => {}
    }
    std::process::exit(1);
}

/// One request to the router's control endpoint at `addr`, with `bearer` as its
/// `Authorization` when given: the status line's code part (`HTTP/1.0 200`) and the body,
/// whatever the status.
fn request(addr: &str, method: &str, path: &str, bearer: Option<&str>) -> Result<(String, String)> {
    let endpoint = || format!("the router's metrics endpoint at {addr}");
    let target = addr
        .to_socket_addrs()
        .with_context(|| format!("{}: not an address", endpoint()))?
        .next()
        .ok_or_else(|| anyhow!("{}: the name resolves to no address", endpoint()))?;
    let mut s = TcpStream::connect_timeout(&target, STATS_TIMEOUT).map_err(|e| match e.kind() {
        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => anyhow!(
            "connecting to {}: no answer within {} s",
            endpoint(),
            STATS_TIMEOUT.as_secs()
        ),
        _ => anyhow!("connecting to {}: {e}", endpoint()),
    })?;
    s.set_read_timeout(Some(STATS_TIMEOUT))?;
    s.set_write_timeout(Some(STATS_TIMEOUT))?;
    // One write: a request split over several segments can meet a server that has already
    // answered and closed.
    let timed_out = |e: std::io::Error| match e.kind() {
        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => anyhow!(
            "{} did not answer within {} s",
            endpoint(),
            STATS_TIMEOUT.as_secs()
        ),
        _ => anyhow!("reading from {}: {e}", endpoint()),
    };
    let auth = bearer.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    s.write_all(format!("{method} {path} HTTP/1.0\r\nHost: {addr}\r\n{auth}\r\n").as_bytes())
        .map_err(timed_out)?;
    let mut body = String::new();
    s.read_to_string(&mut body).map_err(timed_out)?;
    let Some((head, text)) = body.split_once("\r\n\r\n") else {
        bail!("{addr} answered without an HTTP header");
    };
    let status_line = head.lines().next().unwrap_or("");
    // `HTTP/1.x NNN`: the version and the code.
    let status: String = status_line.split(' ').take(2).collect::<Vec<_>>().join(" ");
    if !status.starts_with("HTTP/1.") {
        bail!("{addr} answered: {status_line}");
    }
    Ok((status, text.to_owned()))
}

fn main() {
    // Ports report through `tracing` (e.g. an AF_XDP interface that went away and came back):
    // to stderr, `warn` and above unless RUST_LOG says otherwise.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    // Colour codes only on a terminal; each message on a line of its own, not appended to the
    // progress line.
    tracing_subscriber::fmt()
        .with_writer(|| {
            end_progress_line();
            std::io::stderr()
        })
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(filter)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run {
            config,
            duration,
            seed,
            metrics,
            quiet,
            json,
        } => run(config, duration, seed, metrics, quiet, json),
        Command::Check { config } => check(&config),
        Command::Stats { addr, raw, json } => stats(&addr, raw, json),
        Command::Flows {
            addr,
            port,
            top,
            json,
        } => flows(&addr, port.as_deref(), top, json),
        Command::Reload {
            addr,
            config,
            token_file,
        } => reload(addr, config.as_deref(), token_file),
    };
    if let Err(e) = result {
        note!("zlrouter: {}", error_text(&e));
        std::process::exit(2);
    }
}

/// The error and its causes, `: `-separated, leaving out a cause whose text is already shown
/// (an error that prints its source, as `PortError::Io` does, would otherwise show the OS
/// error twice: "Permission denied (os error 13): Permission denied (os error 13)").
fn error_text(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let s = cause.to_string();
        if text.contains(&s) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&s);
    }
    text
}
