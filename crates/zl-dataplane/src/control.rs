//! The control thread: a current-thread tokio runtime that serves the control endpoint
//! (`GET /metrics`, Prometheus text, and `GET /stats.json`, both from a [`MetricsHub`]'s last
//! snapshot; `POST /reload`), turns SIGINT / SIGTERM into the forwarding loop's stop flag, and
//! reloads the config on SIGHUP or `POST /reload` (`zlrouter reload`) through its
//! [`Reloader`]. It never touches the forwarding thread beyond the hub's atomics, that flag
//! and the reload slot (`crate::reload`).
//!
//! A reload runs on tokio's blocking pool (it reads the file, builds the update and waits for
//! the loop's answer), one at a time; its outcome is logged on stderr, counted
//! (`zlrouter_config_reloads_total{result}`) and, for `POST /reload`, answered: `200` with
//! what changed, `409` with why it was refused (the old config keeps running), `503` when
//! the router was started without a reloader.
//!
//! A failed `accept()` (out of file descriptors, out of memory) is logged, counted
//! (`zlrouter_metrics_accept_errors_total`) and retried after a back-off that doubles from
//! [`ACCEPT_BACKOFF_MIN`] to [`ACCEPT_BACKOFF_MAX`]: the endpoint comes back once the cause
//! goes away, and signals are still handled meanwhile.

use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::metrics::MetricsHub;
use crate::reload::Reloader;

/// The reloader, shared by the signal handler and the endpoint (a reload at a time).
type SharedReloader = Arc<std::sync::Mutex<Reloader>>;

/// The control thread: metrics endpoint and signal handling.
pub struct ControlThread {
    addr: Option<SocketAddr>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// The control thread could not start.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("metrics address `{addr}`: {source}")]
    Bind {
        addr: String,
        #[source]
        source: std::io::Error,
    },
    #[error("control thread: {0}")]
    Runtime(#[source] std::io::Error),
}

/// The address to bind for a metrics `listen` value: `host:port` as given, or a bare port on
/// loopback (`"9464"` is `127.0.0.1:9464`: counters are not exposed to the network unless an
/// address says so). Errors say what was expected; nothing is bound.
pub fn listen_address(listen: &str) -> Result<String, String> {
    if let Ok(port) = listen.parse::<u16>() {
        return Ok(format!("127.0.0.1:{port}"));
    }
    match listen.to_socket_addrs().map(|mut a| a.next()) {
        Ok(Some(_)) => Ok(listen.to_owned()),
        Ok(None) => Err("a host:port whose host resolves to an address".to_owned()),
        Err(e) => Err(format!(
            "host:port (e.g. 127.0.0.1:9464) or a port number: {e}"
        )),
    }
}

impl ControlThread {
    /// Starts the thread: serves `hub` on `listen` when given (`host:port`, or a bare port on
    /// loopback: [`listen_address`]), sets `stop` on SIGINT or SIGTERM (a second signal exits
    /// the process at once), and reloads through `reloader` on SIGHUP and `POST /reload`
    /// (without one, SIGHUP stops the run like SIGTERM).
    pub fn start(
        listen: Option<&str>,
        hub: Arc<MetricsHub>,
        stop: Arc<AtomicBool>,
        reloader: Option<Reloader>,
    ) -> Result<Self, ControlError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(ControlError::Runtime)?;
        let listener = match listen {
            Some(given) => {
                let a = listen_address(given).map_err(|e| ControlError::Bind {
                    addr: given.to_owned(),
                    source: std::io::Error::new(std::io::ErrorKind::InvalidInput, e),
                })?;
                let a = a.as_str();
                let std_listener =
                    std::net::TcpListener::bind(a).map_err(|e| ControlError::Bind {
                        addr: a.to_owned(),
                        source: e,
                    })?;
                std_listener
                    .set_nonblocking(true)
                    .map_err(|e| ControlError::Bind {
                        addr: a.to_owned(),
                        source: e,
                    })?;
                Some(std_listener)
            }
            None => None,
        };
        let addr = listener.as_ref().and_then(|l| l.local_addr().ok());
        // Register the signal handlers and the listener before returning, so a signal that
        // arrives right after `start` is already caught (not the default: kill the process).
        let (signals, listener) = {
            let _rt = rt.enter();
            use tokio::signal::unix::{signal, SignalKind};
            let int = signal(SignalKind::interrupt()).map_err(ControlError::Runtime)?;
            let term = signal(SignalKind::terminate()).map_err(ControlError::Runtime)?;
            let hup = signal(SignalKind::hangup()).map_err(ControlError::Runtime)?;
            let listener = match listener {
                Some(l) => {
                    Some(tokio::net::TcpListener::from_std(l).map_err(ControlError::Runtime)?)
                }
                None => None,
            };
            ((int, term, hup), listener)
        };
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("zlrouter-control".into())
            .spawn(move || {
                let reloader = reloader.map(|r| Arc::new(std::sync::Mutex::new(r)));
                rt.block_on(control(listener, signals, hub, stop, reloader, rx))
            })
            .map_err(ControlError::Runtime)?;
        Ok(ControlThread {
            addr,
            shutdown: Some(tx),
            thread: Some(thread),
        })
    }

    /// The bound metrics address, when serving.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.addr
    }

    /// Stops the thread and waits for it.
    pub fn stop(mut self) {
        self.shutdown_now();
    }

    fn shutdown_now(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for ControlThread {
    fn drop(&mut self) {
        self.shutdown_now();
    }
}

/// How long the metrics endpoint waits for a client's request and its own answer.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// First pause after a failed `accept()`.
pub const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(10);
/// Longest pause between retries of a failing `accept()`.
pub const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

type Signals = (
    tokio::signal::unix::Signal,
    tokio::signal::unix::Signal,
    tokio::signal::unix::Signal,
);

async fn control(
    listener: Option<tokio::net::TcpListener>,
    (mut int, mut term, mut hup): Signals,
    hub: Arc<MetricsHub>,
    stop: Arc<AtomicBool>,
    reloader: Option<SharedReloader>,
    mut shutdown: tokio::sync::oneshot::Receiver<()>,
) {
    // After a failed accept: when to try again, and the pause after the next failure.
    let mut resume: Option<tokio::time::Instant> = None;
    let mut backoff = ACCEPT_BACKOFF_MIN;
    loop {
        let accept = async {
            let Some(l) = &listener else {
                return std::future::pending().await;
            };
            if let Some(t) = resume {
                tokio::time::sleep_until(t).await;
            }
            l.accept().await
        };
        tokio::select! {
            _ = &mut shutdown => return,
            Some(_) = int.recv() => on_signal(&stop, "SIGINT"),
            Some(_) = term.recv() => on_signal(&stop, "SIGTERM"),
            Some(_) = hup.recv() => match &reloader {
                Some(r) => {
                    tokio::spawn(reload(r.clone(), hub.clone(), "SIGHUP"));
                }
                None => on_signal(&stop, "SIGHUP"),
            },
            accepted = accept => match accepted {
                Ok((sock, _)) => {
                    resume = None;
                    backoff = ACCEPT_BACKOFF_MIN;
                    let served = serve(sock, hub.clone(), reloader.clone());
                    tokio::spawn(tokio::time::timeout(REQUEST_TIMEOUT, served));
                }
                Err(e) => {
                    hub.count_accept_error();
                    // Logged at the first failure of a run of them, not at every retry.
                    if resume.is_none() {
                        tracing::warn!(
                            "metrics endpoint: accept failed ({e}); retrying with a back-off \
                             up to {} ms ({} failure(s) so far)",
                            ACCEPT_BACKOFF_MAX.as_millis(),
                            hub.accept_errors()
                        );
                    }
                    resume = Some(tokio::time::Instant::now() + backoff);
                    backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                }
            },
        }
    }
}

/// Answers one connection: reads the request head, writes the metrics or a 404. A client that
/// sends nothing is cut off by the caller's REQUEST_TIMEOUT, so idle connections cannot pile
/// up tasks.
async fn serve(
    mut sock: tokio::net::TcpStream,
    hub: Arc<MetricsHub>,
    reloader: Option<SharedReloader>,
) {
    // Read the whole request head (up to 4 KiB) before answering: closing a socket with
    // unread input makes the kernel reset the connection.
    let mut req = [0u8; 4096];
    let mut n = 0;
    while n < req.len() && !req[..n].windows(4).any(|w| w == b"\r\n\r\n") {
        match sock.read(&mut req[n..]).await {
            Ok(0) | Err(_) => break,
            Ok(k) => n += k,
        }
    }
    let resp = match route(&req[..n]) {
        Route::Metrics => {
            let body = hub.encode();
            format!(
                "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
        }
        Route::StatsJson => {
            let body = hub.snapshot().to_json();
            format!(
                "HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
        }
        Route::Reload => {
            let (status, body) = match reloader {
                Some(r) => match reload(r, hub, "POST /reload").await {
                    Ok(done) => ("200 OK", done),
                    Err(refused) => ("409 Conflict", refused),
                },
                None => (
                    "503 Service Unavailable",
                    "this router was started without a config reloader".to_owned(),
                ),
            };
            let body = format!("{body}\n");
            format!(
                "HTTP/1.0 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
        }
        Route::NotFound => "HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_owned(),
    };
    let _ = sock.write_all(resp.as_bytes()).await;
}

/// What a request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// `GET /metrics`.
    Metrics,
    /// `GET /stats.json`: the last snapshot as JSON.
    StatsJson,
    /// `POST /reload`: re-read the config file and apply it live.
    Reload,
    /// Anything else, malformed requests included.
    NotFound,
}

/// Routes a request head (the bytes read so far, at most 4 KiB, any content): only a first
/// line starting `GET /metrics`, `GET /stats.json` or `POST /reload` is served. Never panics (fuzzed: `fuzz/fuzz_targets/
/// metrics_request.rs`).
pub fn route(head: &[u8]) -> Route {
    let line = std::str::from_utf8(head)
        .unwrap_or("")
        .lines()
        .next()
        .unwrap_or("");
    if line.starts_with("GET /metrics") {
        Route::Metrics
    } else if line.starts_with("GET /stats.json") {
        Route::StatsJson
    } else if line.starts_with("POST /reload") {
        Route::Reload
    } else {
        Route::NotFound
    }
}

/// Time a reload may take: reading and building, plus the loop's answer
/// (`crate::reload::APPLY_TIMEOUT`); the endpoint's own request timeout is longer.
const RELOAD_TIMEOUT: Duration = Duration::from_secs(10);

/// One reload asked by `by`, off the runtime's thread: its outcome logged on stderr and
/// counted, and returned as text (`Err`: refused, the old config still running).
async fn reload(
    r: SharedReloader,
    hub: Arc<MetricsHub>,
    by: &'static str,
) -> Result<String, String> {
    let run = tokio::task::spawn_blocking(move || {
        let mut r = r.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        r.reload()
    });
    let outcome = match tokio::time::timeout(RELOAD_TIMEOUT, run).await {
        Ok(Ok(Ok(done))) => Ok(done.to_string()),
        Ok(Ok(Err(e))) => Err(format!("reload refused: {e}; the old config keeps running")),
        Ok(Err(e)) => Err(format!("reload failed: {e}; the old config keeps running")),
        Err(_) => Err(format!(
            "reload did not finish within {} s",
            RELOAD_TIMEOUT.as_secs()
        )),
    };
    hub.count_reload(outcome.is_ok());
    use std::io::Write;
    let line = match &outcome {
        Ok(done) => format!("zlrouter: {by}: {done}"),
        Err(why) => format!("zlrouter: {by}: {why}"),
    };
    // A closed stderr must not stop the control thread.
    let _ = writeln!(std::io::stderr(), "\n{line}");
    outcome
}

fn on_signal(stop: &AtomicBool, name: &str) {
    // Relaxed: the flag carries no data; the loop only needs to see it eventually.
    if stop.swap(true, Ordering::Relaxed) {
        std::process::exit(130);
    }
    // A closed stderr must not stop the control thread.
    use std::io::Write;
    let _ = writeln!(
        std::io::stderr(),
        "\nzlrouter: stopping (signal {name}); a second signal exits at once"
    );
}
