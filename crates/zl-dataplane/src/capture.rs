//! Drop capture (issue 12, `[capture]`): dropped packets, and optionally marked ones, written
//! to a pcapng file with their cause, ports, class and color as each packet's comment
//! (`cause=early in=lan out=wan class=be color=green`), so that
//! `tshark -r drops.pcapng -Y 'frame.comment contains "cause=early"'` selects them.
//!
//! Where it sits: the loops count every fate through [`crate::stats::Fates`]; its
//! `dropped` (and the egress stage's mark) hands the packet to this module's [`CaptureTap`]
//! at the one place each fate is decided, for the single-thread loop and the threaded
//! workers alike. The tap copies at most `snap_len` bytes into a buffer taken from a
//! preallocated free list and pushes it onto a bounded ring; a separate thread
//! ([`CaptureWriter`]) writes the ring to the file and hands the buffers back. The poll loop
//! never blocks, locks or allocates for it: a full ring (no free buffer) is counted
//! `capture_overflow` and the packet is not captured; over the rate cap, `capture_rate_limited`.
//!
//! decided: the rate cap is a token bucket per loop thread (the single-thread loop, or each
//! receive worker and the transmit worker), on the loop's clock, with a burst of one second's
//! worth; the writer rotates to `<stem>-1.<ext>`, `<stem>-2.<ext>`, ... once a file reaches
//! `rotate_bytes` (each file a complete pcapng with its own header), keeping every file.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_queue::ArrayQueue;
use pcap_file::pcapng::blocks::enhanced_packet::{EnhancedPacketBlock, EnhancedPacketOption};
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};
use pcap_file::pcapng::PcapNgWriter;
use pcap_file::DataLink;
use serde::{Deserialize, Serialize};
use zl_core::{Color, Nanos};
use zl_port::PacketBuf;

use crate::config::{invalid, ConfigError};
use crate::stats::DropCause;

/// `[capture]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaptureParams {
    /// The pcapng file (relative to the config file's directory).
    pub file: String,
    /// Causes to capture, by name (`early`, `forced`, `tail`, `no_route`, ...); all when
    /// absent.
    #[serde(default)]
    pub causes: Option<Vec<String>>,
    /// Also capture packets admitted with a congestion mark (`cause=marked`).
    #[serde(default)]
    pub marked: bool,
    /// Bytes kept of each packet (64..=65535; 65535 by default).
    #[serde(default = "default_snap_len")]
    pub snap_len: u32,
    /// At most this many packets per second per loop thread; no cap when absent.
    #[serde(default)]
    pub rate_pps: Option<u64>,
    /// Start a new file once one reaches this many bytes (at least 65536); one file when
    /// absent.
    #[serde(default)]
    pub rotate_bytes: Option<u64>,
    /// Packets the ring between the loop and the writer holds (16..=1048576; 4096 by
    /// default).
    #[serde(default = "default_ring")]
    pub ring: usize,
}

fn default_snap_len() -> u32 {
    65535
}
fn default_ring() -> usize {
    4096
}

/// What a captured packet met: a drop cause, or a mark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaptureCause {
    Dropped(DropCause),
    Marked,
}

impl CaptureCause {
    pub fn name(self) -> &'static str {
        match self {
            CaptureCause::Dropped(c) => c.name(),
            CaptureCause::Marked => "marked",
        }
    }
}

impl CaptureParams {
    /// Checks every option, naming the key.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.file.is_empty() {
            return Err(invalid("capture.file", "\"\"", "a file name"));
        }
        if let Some(causes) = &self.causes {
            for (i, c) in causes.iter().enumerate() {
                if !DropCause::ALL.iter().any(|d| d.name() == c) {
                    let names: Vec<&str> = DropCause::ALL.iter().map(|d| d.name()).collect();
                    return Err(invalid(
                        format!("capture.causes[{i}]"),
                        format!("\"{c}\""),
                        format!("one of {}", names.join(", ")),
                    ));
                }
            }
        }
        if !(64..=65535).contains(&self.snap_len) {
            return Err(invalid(
                "capture.snap_len",
                self.snap_len,
                "64..=65535 bytes",
            ));
        }
        if self.rate_pps == Some(0) {
            return Err(invalid(
                "capture.rate_pps",
                0,
                "at least 1 packet per second (leave it out for no cap)",
            ));
        }
        if let Some(b) = self.rotate_bytes.filter(|&b| b < 65536) {
            return Err(invalid("capture.rotate_bytes", b, "at least 65536 bytes"));
        }
        if !(16..=1 << 20).contains(&self.ring) {
            return Err(invalid("capture.ring", self.ring, "16..=1048576 packets"));
        }
        Ok(())
    }

    fn cause_mask(&self) -> u32 {
        match &self.causes {
            None => (1 << DropCause::ALL.len()) - 1,
            Some(names) => DropCause::ALL
                .iter()
                .filter(|d| names.iter().any(|n| n == d.name()))
                .fold(0, |m, d| m | 1 << d.index()),
        }
    }
}

/// The capture's counters (the loop's side and the writer's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct CaptureStats {
    /// Packets written to the file(s).
    pub written: u64,
    /// Packets not captured because the ring was full (the writer behind).
    pub overflow: u64,
    /// Packets not captured because of `rate_pps`.
    pub rate_limited: u64,
    /// Packets lost to a failed write (the error is logged once per file).
    pub write_errors: u64,
    /// Files started (1 + rotations).
    pub files: u64,
}

/// One captured packet on its way to the writer.
struct Record {
    time: Nanos,
    cause: CaptureCause,
    in_port: u16,
    out_port: Option<u16>,
    class: Option<u8>,
    color: Option<Color>,
    orig_len: u32,
    data: Vec<u8>,
}

struct Shared {
    full: ArrayQueue<Record>,
    free: ArrayQueue<Vec<u8>>,
    done: AtomicBool,
    written: AtomicU64,
    overflow: AtomicU64,
    rate_limited: AtomicU64,
    write_errors: AtomicU64,
    files: AtomicU64,
}

impl Shared {
    fn stats(&self) -> CaptureStats {
        // Relaxed: independent counters, read for display.
        CaptureStats {
            written: self.written.load(Ordering::Relaxed),
            overflow: self.overflow.load(Ordering::Relaxed),
            rate_limited: self.rate_limited.load(Ordering::Relaxed),
            write_errors: self.write_errors.load(Ordering::Relaxed),
            files: self.files.load(Ordering::Relaxed),
        }
    }
}

/// The loop's end of the capture: cloned into every loop thread's `Fates`.
#[derive(Clone)]
pub struct CaptureTap {
    shared: Arc<Shared>,
    causes: u32,
    marked: bool,
    snap_len: usize,
    rate_pps: Option<u64>,
    /// The loop's clock, set once per poll.
    now: Nanos,
    /// Token bucket of the rate cap: tokens in millionths of a packet, and when last filled.
    tokens: u64,
    filled: Nanos,
}

impl std::fmt::Debug for CaptureTap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaptureTap")
            .field("causes", &self.causes)
            .field("marked", &self.marked)
            .finish_non_exhaustive()
    }
}

const MICRO: u64 = 1_000_000;

impl CaptureTap {
    #[inline]
    pub fn set_clock(&mut self, now: Nanos) {
        self.now = now;
    }

    pub fn stats(&self) -> CaptureStats {
        self.shared.stats()
    }

    /// A dropped packet, at the place its drop is counted.
    #[inline]
    pub fn dropped(&mut self, buf: &PacketBuf, cause: DropCause, at: Option<(usize, Color)>) {
        if self.causes & 1 << cause.index() != 0 {
            self.take(buf, CaptureCause::Dropped(cause), at);
        }
    }

    /// A packet admitted with a congestion mark.
    #[inline]
    pub fn marked(&mut self, buf: &PacketBuf, class: usize, color: Color) {
        if self.marked {
            self.take(buf, CaptureCause::Marked, Some((class, color)));
        }
    }

    #[cold]
    fn take(&mut self, buf: &PacketBuf, cause: CaptureCause, at: Option<(usize, Color)>) {
        if let Some(rate) = self.rate_pps {
            let elapsed = self.now.0.saturating_sub(self.filled.0);
            self.filled = self.now;
            let add = (elapsed as u128 * rate as u128 / 1000).min(u64::MAX as u128) as u64;
            self.tokens = self.tokens.saturating_add(add).min(rate * MICRO);
            if self.tokens < MICRO {
                // Relaxed: a counter.
                self.shared.rate_limited.fetch_add(1, Ordering::Relaxed);
                return;
            }
            self.tokens -= MICRO;
        }
        let Some(mut data) = self.shared.free.pop() else {
            self.shared.overflow.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let frame = buf.as_slice();
        data.clear();
        data.extend_from_slice(&frame[..frame.len().min(self.snap_len)]);
        let routed = !matches!(
            cause,
            CaptureCause::Dropped(
                DropCause::ParseError | DropCause::NoRoute | DropCause::TtlExpired
            )
        );
        let record = Record {
            time: self.now,
            cause,
            in_port: buf.in_port,
            out_port: routed.then_some(buf.out_port),
            class: at.map(|(c, _)| c.min(u8::MAX as usize) as u8),
            color: at.map(|(_, k)| k),
            orig_len: frame.len() as u32,
            data,
        };
        // Cannot fail: as many buffers as ring slots exist, and this one came off the free
        // list; counted as an overflow if it ever did.
        if self.shared.full.push(record).is_err() {
            self.shared.overflow.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The writer thread and its files.
pub struct CaptureWriter {
    shared: Arc<Shared>,
    handle: Option<JoinHandle<()>>,
}

impl CaptureWriter {
    /// Opens the first file (`params.file` under `base`) and starts the writer thread;
    /// `ports` are the port names and `classes` each port's class names, for the comments.
    pub fn start(
        params: &CaptureParams,
        base: &Path,
        ports: Vec<String>,
        classes: Vec<Vec<String>>,
    ) -> Result<(CaptureTap, CaptureWriter), ConfigError> {
        params.validate()?;
        let path = base.join(&params.file);
        let shared = Arc::new(Shared {
            full: ArrayQueue::new(params.ring),
            free: ArrayQueue::new(params.ring),
            done: AtomicBool::new(false),
            written: AtomicU64::new(0),
            overflow: AtomicU64::new(0),
            rate_limited: AtomicU64::new(0),
            write_errors: AtomicU64::new(0),
            files: AtomicU64::new(0),
        });
        let reserve = (params.snap_len as usize).min(2048);
        for _ in 0..params.ring {
            let _ = shared.free.push(Vec::with_capacity(reserve));
        }
        let mut out = Output {
            base: path,
            snap_len: params.snap_len,
            rotate_bytes: params.rotate_bytes,
            ports,
            classes,
            writer: None,
            bytes: 0,
            index: 0,
        };
        out.open(&shared).map_err(|e| {
            invalid(
                "capture.file",
                format!("\"{}\"", params.file),
                format!("a pcapng file that can be created ({e})"),
            )
        })?;
        let s = shared.clone();
        let handle = std::thread::Builder::new()
            .name("zlrouter-capture".into())
            .spawn(move || out.run(&s))
            .map_err(|e| invalid("capture", "(thread)", format!("a writer thread ({e})")))?;
        let tap = CaptureTap {
            shared: shared.clone(),
            causes: params.cause_mask(),
            marked: params.marked,
            snap_len: params.snap_len as usize,
            rate_pps: params.rate_pps,
            now: Nanos::ZERO,
            tokens: params.rate_pps.map_or(0, |r| r * MICRO),
            filled: Nanos::ZERO,
        };
        Ok((
            tap,
            CaptureWriter {
                shared,
                handle: Some(handle),
            },
        ))
    }

    pub fn stats(&self) -> CaptureStats {
        self.shared.stats()
    }

    /// Writes what is still in the ring, closes the file and stops the thread (at the end of
    /// a run; dropping the writer does the same).
    pub fn close(&mut self) {
        // Release: the records pushed before are seen by the writer once it sees `done`.
        self.shared.done.store(true, Ordering::Release);
        if let Some(h) = self.handle.take() {
            h.thread().unpark();
            let _ = h.join();
        }
    }
}

impl Drop for CaptureWriter {
    fn drop(&mut self) {
        self.close();
    }
}

/// The writer thread's state.
struct Output {
    base: PathBuf,
    snap_len: u32,
    rotate_bytes: Option<u64>,
    ports: Vec<String>,
    classes: Vec<Vec<String>>,
    writer: Option<PcapNgWriter<BufWriter<File>>>,
    bytes: u64,
    index: u64,
}

impl Output {
    fn path(&self) -> PathBuf {
        if self.index == 0 {
            return self.base.clone();
        }
        let stem = self
            .base
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let name = match self.base.extension() {
            Some(ext) => format!("{stem}-{}.{}", self.index, ext.to_string_lossy()),
            None => format!("{stem}-{}", self.index),
        };
        self.base.with_file_name(name)
    }

    fn open(&mut self, shared: &Shared) -> Result<(), String> {
        if let Some(mut w) = self.writer.take() {
            let _ = w.get_mut().flush();
        }
        let path = self.path();
        let file = File::create(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut w = PcapNgWriter::new(BufWriter::new(file))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        // if_tsresol = 9: pcap-file writes each packet's time in nanoseconds, and without this
        // option pcapng readers take it as microseconds (pcapng §4.2), 1000 times late
        // (issue 13, found writing the `capture_roundtrip` fuzz target, which checks it;
        // tests/capture_time.rs).
        let idb = InterfaceDescriptionBlock {
            linktype: DataLink::ETHERNET,
            snaplen: self.snap_len,
            options: vec![InterfaceDescriptionOption::IfTsResol(9)],
        };
        self.bytes = w
            .write_pcapng_block(idb)
            .map_err(|e| format!("{}: {e}", path.display()))? as u64;
        self.writer = Some(w);
        shared.files.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn comment(&self, r: &Record) -> String {
        let port = |p: u16| {
            self.ports
                .get(p as usize)
                .cloned()
                .unwrap_or_else(|| p.to_string())
        };
        let mut c = format!("cause={} in={}", r.cause.name(), port(r.in_port));
        if let Some(o) = r.out_port {
            c.push_str(&format!(" out={}", port(o)));
            if let Some(k) = r.class {
                let name = self
                    .classes
                    .get(o as usize)
                    .and_then(|cs| cs.get(k as usize))
                    .cloned()
                    .unwrap_or_else(|| k.to_string());
                c.push_str(&format!(" class={name}"));
            }
        }
        if let Some(k) = r.color {
            c.push_str(&format!(" color={}", k.name()));
        }
        c
    }

    fn write(&mut self, shared: &Shared, r: &Record) {
        if let Some(limit) = self.rotate_bytes {
            if self.bytes >= limit {
                self.index += 1;
                if let Err(e) = self.open(shared) {
                    tracing::error!("zlrouter: drop capture: {e}");
                    self.writer = None;
                }
            }
        }
        let comment = self.comment(r);
        let Some(w) = &mut self.writer else {
            shared.write_errors.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let block = EnhancedPacketBlock {
            interface_id: 0,
            timestamp: Duration::from_nanos(r.time.0),
            original_len: r.orig_len,
            data: std::borrow::Cow::Borrowed(&r.data),
            options: vec![EnhancedPacketOption::Comment(comment.into())],
        };
        match w.write_pcapng_block(block) {
            Ok(n) => {
                self.bytes += n as u64;
                shared.written.fetch_add(1, Ordering::Relaxed);
            }
            Err(e) => {
                if shared.write_errors.fetch_add(1, Ordering::Relaxed) == 0 {
                    tracing::error!(
                        "zlrouter: drop capture: writing {}: {e}",
                        self.path().display()
                    );
                }
            }
        }
    }

    fn run(mut self, shared: &Shared) {
        loop {
            // Acquire: pairs with `close`'s release, so the last records are in the ring.
            let done = shared.done.load(Ordering::Acquire);
            let mut any = false;
            while let Some(r) = shared.full.pop() {
                any = true;
                self.write(shared, &r);
                let _ = shared.free.push(r.data);
            }
            if done {
                break;
            }
            if !any {
                std::thread::park_timeout(Duration::from_millis(2));
            }
        }
        if let Some(mut w) = self.writer.take() {
            if let Err(e) = w.get_mut().flush() {
                tracing::error!("zlrouter: drop capture: {}: {e}", self.path().display());
            }
        }
    }
}
