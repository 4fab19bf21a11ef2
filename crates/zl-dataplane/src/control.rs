//! The control thread: a current-thread tokio runtime that serves the metrics endpoint
//! (`GET /metrics`, Prometheus text, and `GET /stats.json`, from a [`MetricsHub`]) and turns SIGINT / SIGTERM into
//! the forwarding loop's stop flag. It never touches the forwarding thread beyond the hub's
//! atomics and that flag.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::metrics::MetricsHub;

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

impl ControlThread {
    /// Starts the thread: serves `hub` on `listen` when given (`host:port`), and sets `stop`
    /// on SIGINT or SIGTERM (a second signal exits the process at once).
    pub fn start(
        listen: Option<&str>,
        hub: Arc<MetricsHub>,
        stop: Arc<AtomicBool>,
    ) -> Result<Self, ControlError> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(ControlError::Runtime)?;
        let listener = match listen {
            Some(a) => {
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
            let listener = match listener {
                Some(l) => {
                    Some(tokio::net::TcpListener::from_std(l).map_err(ControlError::Runtime)?)
                }
                None => None,
            };
            ((int, term), listener)
        };
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("zlrouter-control".into())
            .spawn(move || rt.block_on(control(listener, signals, hub, stop, rx)))
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
const REQUEST_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

async fn control(
    listener: Option<tokio::net::TcpListener>,
    (mut int, mut term): (tokio::signal::unix::Signal, tokio::signal::unix::Signal),
    hub: Arc<MetricsHub>,
    stop: Arc<AtomicBool>,
    mut shutdown: tokio::sync::oneshot::Receiver<()>,
) {
    loop {
        tokio::select! {
            _ = &mut shutdown => return,
            Some(_) = int.recv() => on_signal(&stop),
            Some(_) = term.recv() => on_signal(&stop),
            Ok((mut sock, _)) = async { match &listener { Some(l) => l.accept().await, None => std::future::pending().await } } => {
                let hub = hub.clone();
                // A client that sends nothing is cut off after REQUEST_TIMEOUT, so idle
                // connections cannot pile up tasks.
                tokio::spawn(tokio::time::timeout(REQUEST_TIMEOUT, async move {
                    // Read the whole request head (up to 4 KiB) before answering: closing a
                    // socket with unread input makes the kernel reset the connection.
                    let mut req = [0u8; 4096];
                    let mut n = 0;
                    while n < req.len() && !req[..n].windows(4).any(|w| w == b"\r\n\r\n") {
                        match sock.read(&mut req[n..]).await {
                            Ok(0) | Err(_) => break,
                            Ok(k) => n += k,
                        }
                    }
                    let line = std::str::from_utf8(&req[..n]).unwrap_or("").lines().next().unwrap_or("");
                    let resp = if line.starts_with("GET /metrics") {
                        let body = hub.encode();
                        format!("HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n\r\n{body}", body.len())
                    } else if line.starts_with("GET /stats.json") {
                        let body = hub.snapshot().to_json();
                        format!("HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}", body.len())
                    } else {
                        "HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_owned()
                    };
                    let _ = sock.write_all(resp.as_bytes()).await;
                }));
            }
        }
    }
}

fn on_signal(stop: &AtomicBool) {
    // Relaxed: the flag carries no data; the loop only needs to see it eventually.
    if stop.swap(true, Ordering::Relaxed) {
        std::process::exit(130);
    }
    eprintln!("\nzlrouter: stopping (signal); a second signal exits at once");
}
