//! The control thread: a current-thread tokio runtime that serves the control endpoint
//! (`GET /metrics`, Prometheus text, and `GET /stats.json`, both from a [`MetricsHub`]'s last
//! snapshot; `POST /reload`), turns SIGINT / SIGTERM into the forwarding loop's stop flag, and
//! reloads the config on SIGHUP or `POST /reload` (`zlrouter reload`) through its
//! [`Reloader`]. It never touches the forwarding thread beyond the hub's atomics, that flag
//! and the reload slot (`zl_dataplane::reload`).
//!
//! A reload runs on tokio's blocking pool (it reads the file, builds the update and waits for
//! the loop's answer), one at a time; its outcome is logged on stderr, counted
//! (`zlrouter_config_reloads_total{result}`) and, for `POST /reload`, answered: `200` with
//! what changed, `409` with why it was refused (the old config keeps running), `503` when
//! the router was started without a reloader.
//!
//! **Who may do what.** Paths match exactly (`GET /metrics` and `GET /stats.json` may carry a
//! query string, which is ignored; anything else is `404`, a known path with another method
//! `405`). `GET /metrics` is open to whoever reaches the endpoint. `POST /reload` needs the
//! control token ([`token`]) as `Authorization: Bearer <token>` (`401` without it) and is
//! refused with `403` when it carries an `Origin` header: only a browser sends one, and a
//! web page's request must never change the router (a cross-site form POST cannot carry the
//! header anyway; refusing `Origin` also covers a page that learned the token). `GET
//! /stats.json` is open on a loopback address; bound beyond loopback (logged as a warning at
//! start) it needs the token too: only the Prometheus text, meant for a remote scraper, stays
//! open there. SIGHUP needs no token: only the router's user and root can signal it.
//!
//! **Bounded.** At most `metrics.max_connections` connections are open at once
//! ([`DEFAULT_MAX_CONNECTIONS`]); a new one beyond that closes the oldest connection still
//! waiting for its request, so a flood of idle connections cannot lock the operator out (a
//! new connection with a request is answered; refusing new ones instead would let the
//! flood win). Only when every open connection is being answered is a new one refused. A
//! client has `metrics.request_timeout_s` ([`DEFAULT_REQUEST_TIMEOUT`]) from connecting to
//! send its whole request head (at most [`MAX_HEAD`] bytes), and as long again to take the
//! answer; an idle or drip-feeding client is cut then. Each is counted
//! (`zlrouter_metrics_connections_cut_total{reason}`, [`ControlEvent`]), as are refused
//! requests (`zlrouter_metrics_requests_refused_total{reason}`).
//!
//! A failed `accept()` (out of file descriptors, out of memory) is logged, counted
//! (`zlrouter_metrics_accept_errors_total`) and retried after a back-off that doubles from
//! [`ACCEPT_BACKOFF_MIN`] to [`ACCEPT_BACKOFF_MAX`]: the endpoint comes back once the cause
//! goes away, and signals are still handled meanwhile.

pub mod token;

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::oneshot;

pub use crate::metrics::ControlEvent;
use crate::metrics::MetricsHub;
pub use token::ControlToken;
pub use zl_dataplane::config::listen_address;
use zl_dataplane::config::MetricsParams;
use zl_dataplane::reload::Reloader;

/// The reloader, shared by the signal handler and the endpoint (a reload at a time).
type SharedReloader = Arc<Mutex<Reloader>>;

/// Connections the endpoint holds open at once unless `metrics.max_connections` says.
pub const DEFAULT_MAX_CONNECTIONS: usize = 256;

/// Time a client has from connecting to send its request head, and again to take the
/// answer, unless `metrics.request_timeout_s` says.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// The longest request head read (`431` beyond it).
pub const MAX_HEAD: usize = 4096;

/// How the control endpoint is bounded and guarded.
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// The most connections open at once (lowered at start to half the process's file
    /// descriptor limit if above it).
    pub max_connections: usize,
    /// Time from connecting to the end of the request head, and to write the answer.
    pub request_timeout: Duration,
    /// The credential of `POST /reload` (and of everything but `/metrics` beyond
    /// loopback); without one those requests are refused (`403`).
    pub token: Option<Arc<ControlToken>>,
}

impl Default for Endpoint {
    fn default() -> Self {
        Endpoint {
            max_connections: DEFAULT_MAX_CONNECTIONS,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            token: None,
        }
    }
}

impl Endpoint {
    /// The `[metrics]` section's limits (validated by the config), guarded by `token`.
    pub fn from_config(m: &MetricsParams, token: Option<ControlToken>) -> Self {
        Endpoint {
            max_connections: m.max_connections.unwrap_or(DEFAULT_MAX_CONNECTIONS),
            request_timeout: m
                .request_timeout_s
                .map_or(DEFAULT_REQUEST_TIMEOUT, Duration::from_secs_f64),
            token: token.map(Arc::new),
        }
    }
}

/// The control thread: metrics endpoint and signal handling.
pub struct ControlThread {
    addr: Option<SocketAddr>,
    shutdown: Option<oneshot::Sender<()>>,
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

impl ControlThread {
    /// [`ControlThread::start_endpoint`] with the default limits and no control token (so
    /// `POST /reload` is refused: a caller that passes a reloader wants `start_endpoint`).
    pub fn start(
        listen: Option<&str>,
        hub: Arc<MetricsHub>,
        stop: Arc<AtomicBool>,
        reloader: Option<Reloader>,
    ) -> Result<Self, ControlError> {
        Self::start_endpoint(listen, Endpoint::default(), hub, stop, reloader)
    }

    /// Starts the thread: serves `hub` on `listen` when given (`host:port`, or a bare port on
    /// loopback: [`listen_address`]) within `endpoint`'s limits, sets `stop` on SIGINT or
    /// SIGTERM (a second signal exits the process at once), and reloads through `reloader` on
    /// SIGHUP and an authorized `POST /reload` (without one, SIGHUP stops the run like
    /// SIGTERM). Serving raises the process's soft file-descriptor limit to its hard limit
    /// ([`connection_cap`]); an address beyond loopback is logged as a warning.
    pub fn start_endpoint(
        listen: Option<&str>,
        endpoint: Endpoint,
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
                    .and_then(|()| {
                        // decided: a backlog of LISTEN_BACKLOG, not std's 128: under a flood
                        // of connections a full accept queue drops the operator's SYN, and
                        // its retry comes a second later. Listening again on a listening
                        // socket only changes the backlog (Linux; capped by somaxconn).
                        rustix::net::listen(&std_listener, LISTEN_BACKLOG).map_err(Into::into)
                    })
                    .map_err(|e| ControlError::Bind {
                        addr: a.to_owned(),
                        source: e,
                    })?;
                Some(std_listener)
            }
            None => None,
        };
        let addr = listener.as_ref().and_then(|l| l.local_addr().ok());
        let reads_open = addr.is_none_or(|a| a.ip().is_loopback());
        if let Some(a) = addr.filter(|_| !reads_open) {
            tracing::warn!(
                "the control endpoint listens on {a}, beyond loopback: other hosts can reach \
                 it; /metrics is open to them, /stats.json and POST /reload need the control \
                 token. Bind 127.0.0.1 unless a remote scraper needs it"
            );
        }
        let cap = if listener.is_some() {
            connection_cap(endpoint.max_connections)
        } else {
            endpoint.max_connections
        };
        let ctx = Arc::new(Ctx {
            hub: hub.clone(),
            reloader: reloader.map(|r| Arc::new(Mutex::new(r))),
            token: endpoint.token,
            reads_open,
            request_timeout: endpoint.request_timeout,
            conns: Mutex::new(Conns::new(cap)),
        });
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
        let (tx, rx) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("zlrouter-control".into())
            .spawn(move || rt.block_on(control(listener, signals, ctx, stop, rx)))
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

/// Connections the kernel completes and queues for `accept()`.
const LISTEN_BACKLOG: i32 = 1024;

/// Soft file-descriptor limit tried when the hard limit is unlimited (the kernel refuses
/// more than `fs.nr_open`, 1 048 576 by default).
const NOFILE_WHEN_UNLIMITED: u64 = 1 << 20;

/// The connection limit to enforce for `wanted`: raises the process's soft `RLIMIT_NOFILE`
/// to its hard limit, then keeps the connections to at most half of it (warning when that
/// lowers `wanted`).
///
/// decided: the soft limit (1 024 on most systems) exists for programs that use `select()`,
/// which cannot see descriptors above 1 023; this process never calls it (tokio uses epoll,
/// the ports their own rings), so it raises the soft limit to the hard one, as systemd
/// recommends for such services and Go's runtime does at start. The reserve is the half of
/// the limit the endpoint never takes: a reload's file and its build, the ports, the
/// capture writer and SIGHUP always find a descriptor, however many clients connect. A
/// spare descriptor closed to accept-and-drop (the nginx trick) is not needed with the
/// connections bounded; a failed `accept()` still backs off and retries.
pub fn connection_cap(wanted: usize) -> usize {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let lim = getrlimit(Resource::Nofile);
    // `None` is unlimited.
    let below_hard = match (lim.current, lim.maximum) {
        (Some(soft), Some(hard)) => soft < hard,
        (Some(soft), None) => soft < NOFILE_WHEN_UNLIMITED,
        (None, _) => false,
    };
    let mut soft = lim.current;
    if below_hard {
        let target = lim.maximum.unwrap_or(NOFILE_WHEN_UNLIMITED);
        let raised = Rlimit {
            current: Some(target),
            maximum: lim.maximum,
        };
        match setrlimit(Resource::Nofile, raised) {
            Ok(()) => soft = Some(target),
            Err(e) => tracing::debug!("cannot raise the file-descriptor limit to {target}: {e}"),
        }
    }
    let budget = soft.map_or(usize::MAX, |s| usize::try_from(s / 2).unwrap_or(usize::MAX));
    if wanted > budget {
        let cap = budget.max(1);
        tracing::warn!(
            "metrics.max_connections = {wanted} lowered to {cap}: half the process's \
             file-descriptor limit ({}) stays free for reloads, ports and files",
            soft.unwrap_or(0)
        );
        cap
    } else {
        wanted
    }
}

/// First pause after a failed `accept()`.
pub const ACCEPT_BACKOFF_MIN: Duration = Duration::from_millis(10);
/// Longest pause between retries of a failing `accept()`.
pub const ACCEPT_BACKOFF_MAX: Duration = Duration::from_secs(1);

type Signals = (
    tokio::signal::unix::Signal,
    tokio::signal::unix::Signal,
    tokio::signal::unix::Signal,
);

/// What every connection's task shares.
struct Ctx {
    hub: Arc<MetricsHub>,
    reloader: Option<SharedReloader>,
    token: Option<Arc<ControlToken>>,
    /// Whether `/stats.json` is served without the token (a loopback endpoint).
    reads_open: bool,
    request_timeout: Duration,
    conns: Mutex<Conns<oneshot::Sender<()>>>,
}

/// Locks `m`, whatever a panicking holder left: every user keeps the table consistent
/// between statements.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The endpoint's open connections: those still reading their request (oldest first, each
/// with the handle that evicts it) and those being answered.
#[derive(Debug)]
struct Conns<T> {
    cap: usize,
    next: u64,
    reading: BTreeMap<u64, T>,
    answering: BTreeSet<u64>,
}

impl<T> Conns<T> {
    fn new(cap: usize) -> Self {
        Conns {
            cap: cap.max(1),
            next: 0,
            reading: BTreeMap::new(),
            answering: BTreeSet::new(),
        }
    }

    fn open(&self) -> usize {
        self.reading.len() + self.answering.len()
    }

    /// Admits a new connection (`evict`: its handle while it reads its request): its id and,
    /// at the limit, the handle of the oldest connection still reading, now no longer
    /// counted (the caller closes it). `Err` gives `evict` back when it is refused: at the
    /// limit with every connection being answered.
    fn admit(&mut self, evict: T) -> Result<(u64, Option<T>), T> {
        let evicted = if self.open() >= self.cap {
            match self.reading.pop_first() {
                Some((_, old)) => Some(old),
                None => return Err(evict),
            }
        } else {
            None
        };
        let id = self.next;
        self.next += 1;
        self.reading.insert(id, evict);
        Ok((id, evicted))
    }

    /// Connection `id` has its request: no longer evictable. False when it was evicted.
    fn answering(&mut self, id: u64) -> bool {
        let was_reading = self.reading.remove(&id).is_some();
        if was_reading {
            self.answering.insert(id);
        }
        was_reading
    }

    /// Connection `id` is closed (a no-op for one evicted, already uncounted).
    fn closed(&mut self, id: u64) {
        self.reading.remove(&id);
        self.answering.remove(&id);
    }
}

async fn control(
    listener: Option<tokio::net::TcpListener>,
    (mut int, mut term, mut hup): Signals,
    ctx: Arc<Ctx>,
    stop: Arc<AtomicBool>,
    mut shutdown: oneshot::Receiver<()>,
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
            Some(_) = hup.recv() => match &ctx.reloader {
                Some(r) => {
                    tokio::spawn(reload(r.clone(), ctx.hub.clone(), "SIGHUP"));
                }
                None => on_signal(&stop, "SIGHUP"),
            },
            accepted = accept => match accepted {
                Ok((sock, _)) => {
                    resume = None;
                    backoff = ACCEPT_BACKOFF_MIN;
                    if admit(sock, &ctx) {
                        // Let the evicted connection's task run and close its socket before
                        // the next accept takes another descriptor.
                        tokio::task::yield_now().await;
                    }
                }
                Err(e) => {
                    ctx.hub.count_accept_error();
                    // Logged at the first failure of a run of them, not at every retry.
                    if resume.is_none() {
                        tracing::warn!(
                            "metrics endpoint: accept failed ({e}); retrying with a back-off \
                             up to {} ms ({} failure(s) so far)",
                            ACCEPT_BACKOFF_MAX.as_millis(),
                            ctx.hub.accept_errors()
                        );
                    }
                    resume = Some(tokio::time::Instant::now() + backoff);
                    backoff = (backoff * 2).min(ACCEPT_BACKOFF_MAX);
                }
            },
        }
    }
}

/// Takes a new connection into the table and starts its task, evicting or refusing as the
/// limit says. True when it evicted one.
fn admit(sock: tokio::net::TcpStream, ctx: &Arc<Ctx>) -> bool {
    let (evict, evicted) = oneshot::channel();
    let mut conns = lock(&ctx.conns);
    match conns.admit(evict) {
        Ok((id, old)) => {
            ctx.hub.set_open_connections(conns.open());
            drop(conns);
            let evicting = old.is_some();
            if let Some(old) = old {
                // The task may have ended meanwhile: nothing to close then.
                let _ = old.send(());
                ctx.hub.count_control(ControlEvent::Evicted);
            }
            tokio::spawn(connection(sock, id, evicted, ctx.clone()));
            evicting
        }
        Err(_) => {
            drop(conns);
            ctx.hub.count_control(ControlEvent::Refused);
            // Best effort, never waiting: the socket is closed right after.
            let _ = sock.try_write(
                b"HTTP/1.0 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: 0\r\n\r\n",
            );
            false
        }
    }
}

/// A connection's place in the table, given up when its task ends (however it ends).
struct Open {
    id: u64,
    ctx: Arc<Ctx>,
}

impl Drop for Open {
    fn drop(&mut self) {
        let mut conns = lock(&self.ctx.conns);
        conns.closed(self.id);
        self.ctx.hub.set_open_connections(conns.open());
    }
}

/// How reading a request head ended.
enum Head {
    /// The blank line that ends it came, within the first this many bytes.
    Complete(usize),
    /// The client closed (or the read failed) after this many bytes, without a blank line.
    Ended(usize),
    /// [`MAX_HEAD`] bytes and no end.
    TooLarge,
}

/// Reads until the blank line that ends a request head.
async fn read_head(sock: &mut tokio::net::TcpStream, buf: &mut [u8]) -> Head {
    let mut n = 0;
    loop {
        match sock.read(&mut buf[n..]).await {
            Ok(0) | Err(_) => return Head::Ended(n),
            Ok(k) => {
                // Only the new bytes and the three before them can complete the end: a
                // client that sends a byte at a time costs a constant per byte.
                let from = n.saturating_sub(3);
                n += k;
                let window = &buf[from..n];
                if window.windows(4).any(|w| w == b"\r\n\r\n")
                    || window.windows(2).any(|w| w == b"\n\n")
                {
                    return Head::Complete(n);
                }
                if n == buf.len() {
                    return Head::TooLarge;
                }
            }
        }
    }
}

/// One connection: reads its request head within the deadline (or is evicted meanwhile),
/// answers it, and closes.
async fn connection(
    mut sock: tokio::net::TcpStream,
    id: u64,
    evicted: oneshot::Receiver<()>,
    ctx: Arc<Ctx>,
) {
    let _open = Open {
        id,
        ctx: ctx.clone(),
    };
    let mut buf = vec![0u8; MAX_HEAD];
    let read = tokio::time::timeout(ctx.request_timeout, read_head(&mut sock, &mut buf));
    let head = tokio::select! {
        // Eviction first: an evicted connection is no longer counted, so it must not go on.
        biased;
        // Evicted (counted by the accept loop), or the endpoint is shutting down.
        _ = evicted => return,
        read = read => match read {
            Ok(head) => head,
            Err(_) => {
                ctx.hub.count_control(ControlEvent::Deadline);
                return;
            }
        },
    };
    if !lock(&ctx.conns).answering(id) {
        return;
    }
    let answer = match head {
        Head::Complete(n) => respond(&parse_request(&buf[..n]), &ctx).await,
        Head::Ended(n) if n > 0 => respond(&parse_request(&buf[..n]), &ctx).await,
        Head::Ended(_) => return,
        Head::TooLarge => answer("431 Request Header Fields Too Large", "", ""),
    };
    // A client that does not take its answer is cut as one that does not send its request.
    let _ = tokio::time::timeout(ctx.request_timeout, sock.write_all(answer.as_bytes())).await;
}

/// An HTTP/1.0 answer: status, extra header lines (each ending `\r\n`), a text body.
fn answer(status: &str, headers: &str, body: &str) -> String {
    let body = if body.is_empty() {
        String::new()
    } else {
        format!("{body}\n")
    };
    format!(
        "HTTP/1.0 {status}\r\n{headers}Content-Type: text/plain\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// The answer to a parsed request, once authorized.
async fn respond(req: &Request<'_>, ctx: &Ctx) -> String {
    match req.route {
        Route::NotFound => return answer("404 Not Found", "", ""),
        Route::BadRequest => return answer("400 Bad Request", "", "not an HTTP/1.x request"),
        Route::WrongMethod { allow } => {
            return answer("405 Method Not Allowed", &format!("Allow: {allow}\r\n"), "")
        }
        Route::Metrics | Route::StatsJson | Route::Reload => {}
    }
    match authorize(req, ctx.token.as_deref(), ctx.reads_open) {
        Verdict::Serve => {}
        Verdict::CrossOrigin => {
            ctx.hub.count_control(ControlEvent::CrossOrigin);
            return answer(
                "403 Forbidden",
                "",
                "refused: a request with an Origin header (from a web page) cannot change the \
                 router",
            );
        }
        Verdict::Unauthorized => {
            ctx.hub.count_control(ControlEvent::Unauthorized);
            return answer(
                "401 Unauthorized",
                "WWW-Authenticate: Bearer realm=\"zlrouter\"\r\n",
                "refused: this needs the router's control token (`Authorization: Bearer \
                 <token>`, from its token file; `zlrouter reload` sends it when it can read \
                 the file)",
            );
        }
        Verdict::NoToken => {
            ctx.hub.count_control(ControlEvent::Unauthorized);
            return answer(
                "403 Forbidden",
                "",
                "refused: this router has no control token (its start-up log says why; \
                 `metrics.token_file`); SIGHUP still reloads it",
            );
        }
    }
    match req.route {
        Route::Metrics => {
            let body = ctx.hub.encode();
            format!(
                "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
        }
        Route::StatsJson => {
            let body = ctx.hub.snapshot().to_json();
            format!(
                "HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            )
        }
        _ => match &ctx.reloader {
            Some(r) => match reload(r.clone(), ctx.hub.clone(), "POST /reload").await {
                Ok(done) => answer("200 OK", "", &done),
                Err(refused) => answer("409 Conflict", "", &refused),
            },
            None => answer(
                "503 Service Unavailable",
                "",
                "this router was started without a config reloader",
            ),
        },
    }
}

/// What a request asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// `GET /metrics` (a query string is ignored).
    Metrics,
    /// `GET /stats.json` (a query string is ignored): the last snapshot as JSON.
    StatsJson,
    /// `POST /reload`: re-read the config file and apply it live.
    Reload,
    /// One of the paths above with another method; `allow` is its method.
    WrongMethod { allow: &'static str },
    /// A request line that is not `METHOD TARGET HTTP/1.x`.
    BadRequest,
    /// Any other path.
    NotFound,
}

/// A request head, as far as the endpoint reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Request<'a> {
    pub route: Route,
    /// The credential of the first `Authorization: Bearer <token>` header.
    pub bearer: Option<&'a [u8]>,
    /// Whether an `Origin` header came (only browsers send one).
    pub origin: bool,
}

/// Parses a request head (the bytes read, at most [`MAX_HEAD`], any content): the route of
/// its first line, matched exactly, and the headers that decide who may do what. Never
/// panics (fuzzed: `fuzz/fuzz_targets/metrics_request.rs`).
pub fn parse_request(head: &[u8]) -> Request<'_> {
    let mut lines = head
        .split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l));
    let route = route_line(lines.next().unwrap_or_default());
    let mut bearer = None;
    let mut origin = false;
    for line in lines {
        if line.is_empty() {
            break;
        }
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
        if name.eq_ignore_ascii_case(b"authorization") {
            if bearer.is_none() && value.len() > 7 && value[..7].eq_ignore_ascii_case(b"bearer ") {
                bearer = Some(value[7..].trim_ascii());
            }
        } else if name.eq_ignore_ascii_case(b"origin") {
            origin = true;
        }
    }
    Request {
        route,
        bearer,
        origin,
    }
}

/// The route of a request line: `GET /metrics`, `GET /stats.json` (each with or without a
/// query string) and `POST /reload`, exactly, as HTTP/1.0 or 1.1.
fn route_line(line: &[u8]) -> Route {
    let mut parts = line.split(|&b| b == b' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Route::BadRequest;
    };
    if method.is_empty() || target.is_empty() || !matches!(version, b"HTTP/1.0" | b"HTTP/1.1") {
        return Route::BadRequest;
    }
    // decided: a query string is ignored on the read-only GETs (Prometheus's `params` adds
    // one) and not accepted on POST /reload, which takes none.
    let path = if method == b"GET" {
        target.split(|&b| b == b'?').next().unwrap_or(target)
    } else {
        target
    };
    match (method, path) {
        (b"GET", b"/metrics") => Route::Metrics,
        (b"GET", b"/stats.json") => Route::StatsJson,
        (b"POST", b"/reload") => Route::Reload,
        (_, b"/metrics" | b"/stats.json") => Route::WrongMethod { allow: "GET" },
        (_, b"/reload") => Route::WrongMethod { allow: "POST" },
        _ => Route::NotFound,
    }
}

/// The route of a request head ([`parse_request`]'s).
pub fn route(head: &[u8]) -> Route {
    parse_request(head).route
}

/// Whether a request may be served.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Serve,
    /// It needs the control token and brought none or a wrong one (`401`).
    Unauthorized,
    /// A state-changing request with an `Origin` header (`403`).
    CrossOrigin,
    /// It needs the control token and the router has none (`403`).
    NoToken,
}

/// Who may do what: `POST /reload` needs `token` and no `Origin` header; `GET /stats.json`
/// needs `token` unless `reads_open` (a loopback endpoint); `GET /metrics`, and answers that
/// serve nothing (`404`, `405`, `400`), need nothing.
pub fn authorize(req: &Request<'_>, token: Option<&ControlToken>, reads_open: bool) -> Verdict {
    let needs_token = match req.route {
        Route::Reload if req.origin => return Verdict::CrossOrigin,
        Route::Reload => true,
        Route::StatsJson => !reads_open,
        Route::Metrics | Route::WrongMethod { .. } | Route::BadRequest | Route::NotFound => false,
    };
    if !needs_token {
        return Verdict::Serve;
    }
    match (token, req.bearer) {
        (None, _) => Verdict::NoToken,
        (Some(t), Some(b)) if t.matches(b) => Verdict::Serve,
        _ => Verdict::Unauthorized,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_match_exactly() {
        let r = |line: &str| route(format!("{line}\r\nHost: x\r\n\r\n").as_bytes());
        assert_eq!(r("GET /metrics HTTP/1.1"), Route::Metrics);
        assert_eq!(r("GET /metrics?x=1 HTTP/1.0"), Route::Metrics);
        assert_eq!(r("GET /stats.json HTTP/1.0"), Route::StatsJson);
        assert_eq!(r("POST /reload HTTP/1.0"), Route::Reload);
        assert_eq!(r("POST /reloadZZZ HTTP/1.0"), Route::NotFound);
        assert_eq!(r("POST /reload?now HTTP/1.0"), Route::NotFound);
        assert_eq!(r("GET /metricsXYZ HTTP/1.0"), Route::NotFound);
        assert_eq!(r("GET /metrics/ HTTP/1.0"), Route::NotFound);
        assert_eq!(
            r("GET /reload HTTP/1.0"),
            Route::WrongMethod { allow: "POST" }
        );
        assert_eq!(
            r("POST /metrics HTTP/1.0"),
            Route::WrongMethod { allow: "GET" }
        );
        assert_eq!(
            r("get /metrics HTTP/1.0"),
            Route::WrongMethod { allow: "GET" }
        );
        assert_eq!(r("GET /metrics"), Route::BadRequest);
        assert_eq!(r("GET /metrics HTTP/2"), Route::BadRequest);
        assert_eq!(r("GET  /metrics HTTP/1.0"), Route::BadRequest);
        assert_eq!(r("GET /metrics HTTP/1.0 x"), Route::BadRequest);
        assert_eq!(route(b""), Route::BadRequest);
        assert_eq!(route(b"\xff\xfe"), Route::BadRequest);
    }

    #[test]
    fn headers_carry_the_token_and_the_origin() {
        let req = parse_request(
            b"POST /reload HTTP/1.0\r\nauthorization:   bearer  abc \r\nAuthorization: Bearer x\r\n\r\nOrigin: y",
        );
        assert_eq!(req.bearer, Some(&b"abc"[..]));
        // After the blank line: the body, not a header.
        assert!(!req.origin);
        let req =
            parse_request(b"POST /reload HTTP/1.0\nORIGIN: null\nAuthorization: Basic abc\n\n");
        assert!(req.origin);
        assert_eq!(req.bearer, None);
    }

    #[test]
    fn who_may_do_what() {
        let secret = "0123456789abcdef0123456789abcdef";
        let token = ControlToken::from_secret(secret, std::path::Path::new("t")).unwrap();
        let req = |head: String| {
            let head: &'static [u8] = head.into_bytes().leak();
            parse_request(head)
        };
        let with = |line: &str, extra: &str| {
            req(format!(
                "{line} HTTP/1.0\r\nAuthorization: Bearer {secret}\r\n{extra}\r\n"
            ))
        };
        let without = |line: &str| req(format!("{line} HTTP/1.0\r\n\r\n"));
        let wrong = req(format!(
            "POST /reload HTTP/1.0\r\nAuthorization: Bearer {}\r\n\r\n",
            secret.replace('0', "1")
        ));
        let t = Some(&token);
        for reads_open in [true, false] {
            assert_eq!(
                authorize(&without("GET /metrics"), t, reads_open),
                Verdict::Serve
            );
            assert_eq!(
                authorize(&without("GET /metrics"), None, reads_open),
                Verdict::Serve
            );
            assert_eq!(
                authorize(&without("POST /reload"), t, reads_open),
                Verdict::Unauthorized
            );
            assert_eq!(authorize(&wrong, t, reads_open), Verdict::Unauthorized);
            assert_eq!(
                authorize(&with("POST /reload", ""), t, reads_open),
                Verdict::Serve
            );
            assert_eq!(
                authorize(&with("POST /reload", "Origin: http://a\r\n"), t, reads_open),
                Verdict::CrossOrigin
            );
            assert_eq!(
                authorize(&with("POST /reload", ""), None, reads_open),
                Verdict::NoToken
            );
            assert_eq!(
                authorize(&with("GET /stats.json", ""), t, reads_open),
                Verdict::Serve
            );
        }
        assert_eq!(
            authorize(&without("GET /stats.json"), t, true),
            Verdict::Serve
        );
        assert_eq!(
            authorize(&without("GET /stats.json"), t, false),
            Verdict::Unauthorized
        );
        assert_eq!(
            authorize(&without("GET /stats.json"), None, false),
            Verdict::NoToken
        );
    }

    #[test]
    fn the_limit_evicts_the_oldest_reader_and_refuses_only_when_all_are_answered() {
        let mut c = Conns::new(3);
        let a = c.admit('a').unwrap();
        let b = c.admit('b').unwrap();
        let d = c.admit('d').unwrap();
        assert_eq!((a.1, b.1, d.1), (None, None, None));
        assert_eq!(c.open(), 3);
        // `a` has its request: `b` is now the oldest still reading.
        assert!(c.answering(a.0));
        let (e, evicted) = c.admit('e').unwrap();
        assert_eq!(evicted, Some('b'));
        assert_eq!(c.open(), 3);
        // The evicted task ends later: nothing is counted twice, it cannot be answered.
        assert!(!c.answering(b.0));
        c.closed(b.0);
        assert_eq!(c.open(), 3);
        assert!(c.answering(d.0) && c.answering(e));
        assert_eq!(c.admit('f'), Err('f'));
        c.closed(a.0);
        assert_eq!(c.open(), 2);
        assert_eq!(c.admit('g').map(|(_, ev)| ev), Ok(None));
        assert_eq!(c.open(), 3);
    }
}
