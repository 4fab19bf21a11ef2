//! Drop capture (`[capture]`): dropped packets, and optionally marked ones, written
//! to a pcapng file with their cause, ports, class and color as each packet's comment
//! (`cause=early in=lan out=wan class=be color=green`), so that
//! `tshark -r drops.pcapng -Y 'frame.comment contains "cause=early"'` selects them.
//!
//! Where it sits: the loops count every fate through [`crate::fates::Fates`]; its
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
//!
//! decided: each block reaches the file in one `pwrite(2)` of the whole block at the end of
//! the last whole one (encoded into a reused buffer, no byte-stream buffer in between), as
//! soon as the writer takes its record off the ring (it looks at least every 2 ms), and no
//! page boundary of the file falls inside a block ([`padding`]: a block that would straddle
//! one goes to the next page behind a padding block of a type readers skip). A process killed
//! between two writes (`kill -9`, a panic, an abort) leaves whole blocks, and so does one
//! killed inside a write: Linux cuts a write short on a fatal signal only at a page boundary,
//! which is then a block boundary (before the padding, `tests/capture_crash.rs` found about 1
//! kill in 25 of an overloaded writer cutting a block there). Only a block longer than a page
//! (a frame of more than about 4000 bytes kept whole) can still be cut. A kill loses the
//! records still in the ring: at most `ring` packets (a full ring of 4096 blocks of 1000-1500
//! bytes took the writer 17-28 ms on a loaded 2-core VM, 150-240 thousand blocks a second;
//! past a full ring drops are counted `capture_overflow`, never captured), so with the
//! default ring a kill loses well under the last 100 ms of drops. One write per block rather
//! than batches: a system call each (raw `pwrite`s of 1100 bytes on that VM: 160 thousand a
//! second, against 780 thousand blocks a second in 64 KiB batches) is the writer's ceiling,
//! but what a crash loses is only what the ring holds; the poll loop never waits either way.
//!
//! A failed write (a full disk, an I/O error) is logged at once with the OS's reason, once
//! until writes succeed again; a short write's partial block is cut off (`File::set_len`) so
//! the file stays readable; `written` counts only packets whose block is wholly in the file,
//! and the others are `write_errors`. decided: the writer keeps trying, once per second
//! (the packets in between are counted without a system call each), since space can come
//! back (an operator deleting old captures) and the capture should then resume by itself;
//! it logs when it does, with the number of packets lost meanwhile.
//!
//! decided: a start keeps the previous run's capture instead of truncating it. Before it
//! creates its file, [`CaptureWriter::start`] (called by `zlrouter run`; `zlrouter check`
//! builds no capture) moves the previous set, the file and its rotations `<stem>-N.<ext>`,
//! to `<stem>.prev.<ext>` and `<stem>.prev-N.<ext>`, replacing the set there (files of the
//! older set that the newer one does not replace are removed), and logs one line naming where
//! it went. One previous set rather than a file name per start: the unit restarts a crashed
//! router 2 s later (`Restart=on-failure`), and a crash loop must not fill the disk, while
//! rotation has no file-count limit to honour; with one `.prev` set the disk holds at most two
//! runs' files, and the crash's capture is always at the same name. A set that holds no packet
//! (a run that died before its first drop, a start that failed after creating its file) is
//! not moved and replaces nothing, so a crash loop that captures nothing between crashes
//! keeps the capture of the last run that did. If the move fails (a read-only file system, a
//! directory the router's user cannot write), the previous capture stays as it is (never
//! truncated), an error names the file and the OS's reason, and the router starts anyway with
//! the capture off for the run, every packet it would have captured counted as
//! `write_errors`: an operator would rather have the router forwarding (a refused start under
//! `Restart=on-failure` is a restart loop without forwarding), and the loss shows in the
//! metrics. The move is tried at start only, not again while running, so that a `.prev` set
//! is always one run's files.

use std::fs::File;
use std::io::BufReader;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_queue::ArrayQueue;
use pcap_file::pcapng::blocks::enhanced_packet::{EnhancedPacketBlock, EnhancedPacketOption};
use pcap_file::pcapng::blocks::interface_description::{
    InterfaceDescriptionBlock, InterfaceDescriptionOption,
};
use pcap_file::pcapng::{Block, PcapNgReader, PcapNgWriter};
use pcap_file::DataLink;
use serde::{Deserialize, Serialize};
use zl_core::{Color, Nanos};
use zl_port::PacketBuf;

use crate::error::{invalid, ConfigError};
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
    /// Packets whose block is wholly in the file(s).
    pub written: u64,
    /// Packets not captured because the ring was full (the writer behind).
    pub overflow: u64,
    /// Packets not captured because of `rate_pps`.
    pub rate_limited: u64,
    /// Packets lost to a failed write or a file that could not be created (logged when the
    /// failure starts, with the OS's reason, and when writes succeed again); for a whole run,
    /// every packet captured when the previous run's capture could not be moved aside.
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
        let fail = |e: String| {
            invalid(
                "capture.file",
                format!("\"{}\"", params.file),
                format!("a pcapng file that can be created ({e})"),
            )
        };
        let kept = keep_previous(&path);
        let mut out = Output::new(path, params.snap_len, params.rotate_bytes, ports, classes)
            .map_err(fail)?;
        match kept {
            Ok(None) => {}
            Ok(Some(kept)) => tracing::warn!("zlrouter: drop capture: {kept}"),
            Err(e) => {
                tracing::error!(
                    "zlrouter: drop capture: the previous capture could not be moved aside \
                     ({e}); it is left as it is, and this run captures nothing (every packet \
                     it would capture is counted as capture.write_errors) until the router \
                     is started again with that directory writable"
                );
                out.blocked = true;
            }
        }
        if !out.blocked {
            out.open(&shared, 0).map_err(fail)?;
        }
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
    rotate_bytes: Option<u64>,
    ports: Vec<String>,
    classes: Vec<Vec<String>>,
    /// The file being written; `None` after a rotation that could not create its file.
    file: Option<File>,
    /// Its length up to the end of the last whole block: where the next block goes.
    committed: u64,
    /// A failed write whose partial block could not be cut off: cut before the next write.
    dirty: bool,
    index: u64,
    /// The block encoder: its buffer holds one block at a time (the section header and the
    /// interface description are in it already, so it checks each packet's interface id).
    enc: PcapNgWriter<Vec<u8>>,
    /// Each file's first bytes: the section header and the interface description.
    header: Vec<u8>,
    /// The comment of the packet being written (its buffer reused).
    comment: String,
    /// Since when writing fails, and the packets lost since (`None` while writes succeed).
    failing: Option<Failing>,
    /// The previous run's capture could not be moved aside: nothing is created or written
    /// this run (creating the file would truncate it), each packet counted as lost.
    blocked: bool,
}

struct Failing {
    /// When a write was last tried.
    tried: Instant,
    lost: u64,
}

/// After a failed write, the writer tries again once this much time has passed, counting the
/// packets in between as `write_errors` without a system call each.
const RETRY_AFTER: Duration = Duration::from_secs(1);

/// The granularity at which Linux can cut a write short on a fatal signal: it checks for one
/// before copying each page (or larger folio, whose boundaries are page boundaries too) of
/// the file (`generic_perform_write`).
const PAGE: u64 = 4096;

/// The block type of the padding blocks: the local-use range of pcapng block types (most
/// significant bit set), which readers skip (tshark, capinfos and pcap-file, as an unknown
/// block, were checked).
pub const PAD_BLOCK_TYPE: u32 = 0x807A_0000;

/// The smallest block: type, total length, total length.
const MIN_BLOCK: u64 = 12;

/// A padding block of `len` bytes (a multiple of 4, at least [`MIN_BLOCK`]), in the native
/// byte order of the section header pcap-file writes.
fn pad_block(len: u32) -> Vec<u8> {
    let mut b = vec![0u8; len as usize];
    b[..4].copy_from_slice(&PAD_BLOCK_TYPE.to_ne_bytes());
    b[4..8].copy_from_slice(&len.to_ne_bytes());
    b[len as usize - 4..].copy_from_slice(&len.to_ne_bytes());
    b
}

/// Bytes of padding to write before a block of `len` bytes that goes at file offset `at`.
///
/// decided: a SIGKILL can cut a write short only at a page boundary of the file (the kernel
/// checks for a fatal signal before copying each page), so a write is safe from the cut if
/// every page boundary inside it is a block boundary. A block that would straddle one is
/// moved to the next page behind a padding block that fills the rest of this one; and no
/// write leaves 4 or 8 bytes before a boundary, where a padding block (12 bytes at least)
/// would not fit. A block longer than a page less 12 bytes (a frame of more than about 4000
/// bytes kept whole: jumbo frames with a large `snap_len`) straddles a boundary wherever it
/// goes, and only it can still be cut by a SIGKILL inside its write. The cost: the rest of a
/// page whenever the next block does not fit in it (a stream of 1100-byte blocks: 796 bytes
/// a page, 19 %; of 300-byte blocks, 5 %).
fn padding(at: u64, len: u64) -> u64 {
    let room = PAGE - at % PAGE;
    let leaves_a_gap = |pad: u64| matches!((PAGE - (at + pad + len) % PAGE) % PAGE, 4 | 8);
    if room < MIN_BLOCK {
        // Never left by this writer (the header is longer than 8 bytes and every write
        // avoids it); nothing fits in front, so the block goes as it is.
        return 0;
    }
    if len <= PAGE - MIN_BLOCK {
        if len <= room && !leaves_a_gap(0) {
            0
        } else {
            // On the next page it fits and leaves at least 12 bytes.
            room
        }
    } else if leaves_a_gap(0) {
        MIN_BLOCK
    } else {
        0
    }
}

/// The tag of the previous run's set: `drops.pcapng` goes to `drops.prev.pcapng`.
pub const PREV: &str = ".prev";

/// File `index` of a capture set: `base` itself (index 0), then `<stem><tag>-<index>.<ext>`;
/// `tag` is `""` for the capture being written and [`PREV`] for the previous run's.
pub fn member(base: &Path, tag: &str, index: u64) -> PathBuf {
    if tag.is_empty() && index == 0 {
        return base.to_path_buf();
    }
    let mut name = base
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    name.push_str(tag);
    if index > 0 {
        name.push_str(&format!("-{index}"));
    }
    if let Some(ext) = base.extension() {
        name.push('.');
        name.push_str(&ext.to_string_lossy());
    }
    base.with_file_name(name)
}

/// The regular files of the set `tag` of `base`, with their indexes: index 0 if there, then 1,
/// 2, ... up to the first one missing.
///
/// decided: found by probing rather than by listing the directory: the writer creates the
/// rotations in order without gaps (a rotation that fails is retried at the same index), and
/// probing needs no permission to read the directory. Only regular files (a symbolic link to
/// one is moved as the link): a capture pointed at a device or a pipe is opened as before,
/// never moved.
fn members(base: &Path, tag: &str) -> Vec<(u64, PathBuf)> {
    let regular = |p: &Path| std::fs::metadata(p).is_ok_and(|m| m.file_type().is_file());
    let mut found = Vec::new();
    let first = member(base, tag, 0);
    if regular(&first) {
        found.push((0, first));
    }
    for index in 1.. {
        let p = member(base, tag, index);
        if !regular(&p) {
            break;
        }
        found.push((index, p));
    }
    found
}

/// Whether the file at `path` holds anything worth keeping: a packet, or anything that does
/// not read as a pcapng of headers and padding only (a block cut short, another program's
/// file, a file this process may not read: not this code's to throw away).
fn holds_packets(path: &Path) -> bool {
    let Ok(file) = File::open(path) else {
        return true;
    };
    if file.metadata().is_ok_and(|m| m.len() == 0) {
        return false;
    }
    let Ok(mut reader) = PcapNgReader::new(BufReader::new(file)) else {
        return true;
    };
    while let Some(block) = reader.next_block() {
        match block {
            Ok(Block::EnhancedPacket(_) | Block::SimplePacket(_) | Block::Packet(_)) | Err(_) => {
                return true
            }
            Ok(_) => {}
        }
    }
    false
}

/// Where [`keep_previous`] put the previous run's capture: what its one log line says.
#[derive(Debug, PartialEq, Eq)]
pub struct Kept {
    /// The files of the moved set, in order, at their new names.
    pub files: Vec<PathBuf>,
    /// Their size in all.
    pub bytes: u64,
    /// Whether an older previous set was there and was replaced.
    pub replaced: bool,
    /// Files of the older set that could not be removed, with the OS's reason.
    pub left: Vec<String>,
    /// The file this run writes.
    pub base: PathBuf,
}

impl std::fmt::Display for Kept {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = |p: &Path| {
            p.file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        };
        write!(f, "the previous run's capture is now ")?;
        match self.files.as_slice() {
            [one] => write!(f, "{} ({} bytes)", one.display(), self.bytes)?,
            [first, .., last] => write!(
                f,
                "{} .. {} ({} files, {} bytes)",
                first.display(),
                name(last),
                self.files.len(),
                self.bytes
            )?,
            [] => write!(f, "nowhere")?,
        }
        if self.replaced {
            write!(f, ", replacing the one before it")?;
        }
        for l in &self.left {
            write!(f, " (could not remove {l})")?;
        }
        write!(f, "; this run writes {}", self.base.display())
    }
}

/// Moves the capture set at `base` (the file and its rotations) to the `.prev` set, replacing
/// the one there, if any of its files holds a packet; a set without one is left to be
/// overwritten (its rotations removed, so that none of them later joins a newer set). `None`
/// when there was nothing to keep; an error, naming the file and the OS's reason, when a file
/// could not be moved (the set's files from that one on are where they were).
pub fn keep_previous(base: &Path) -> Result<Option<Kept>, String> {
    let current = members(base, "");
    if current.is_empty() {
        return Ok(None);
    }
    if !current.iter().any(|(_, p)| holds_packets(p)) {
        for (_, p) in current.iter().filter(|(i, _)| *i > 0) {
            let _ = std::fs::remove_file(p);
        }
        return Ok(None);
    }
    let older = members(base, PREV);
    let mut files = Vec::with_capacity(current.len());
    let mut bytes = 0;
    for (moved, (index, from)) in current.iter().enumerate() {
        let to = member(base, PREV, *index);
        let size = std::fs::metadata(from).map_or(0, |m| m.len());
        // rename(2) replaces the older set's file of the same index in one step.
        if let Err(e) = std::fs::rename(from, &to) {
            let part = if moved > 0 {
                format!("; {moved} of its {} files were moved", current.len())
            } else {
                String::new()
            };
            return Err(format!(
                "moving {} to {}: {e}{part}",
                from.display(),
                to.display()
            ));
        }
        files.push(to);
        bytes += size;
    }
    let mut left = Vec::new();
    for (index, p) in &older {
        if !current.iter().any(|(i, _)| i == index) {
            if let Err(e) = std::fs::remove_file(p) {
                left.push(format!("{}: {e}", p.display()));
            }
        }
    }
    Ok(Some(Kept {
        files,
        bytes,
        replaced: !older.is_empty(),
        left,
        base: base.to_path_buf(),
    }))
}

/// Writes all of `buf` at `offset`; on an error, also how many of its bytes reached the file.
fn write_whole(file: &File, buf: &[u8], offset: u64) -> Result<(), (std::io::Error, usize)> {
    let mut done = 0;
    while done < buf.len() {
        match file.write_at(&buf[done..], offset + done as u64) {
            Ok(0) => return Err((std::io::ErrorKind::WriteZero.into(), done)),
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err((e, done)),
        }
    }
    Ok(())
}

impl Output {
    fn new(
        base: PathBuf,
        snap_len: u32,
        rotate_bytes: Option<u64>,
        ports: Vec<String>,
        classes: Vec<Vec<String>>,
    ) -> Result<Output, String> {
        let mut enc = PcapNgWriter::new(Vec::new()).map_err(|e| e.to_string())?;
        // if_tsresol = 9: pcap-file writes each packet's time in nanoseconds, and without this
        // option pcapng readers take it as microseconds (pcapng §4.2), 1000 times late (found
        // writing the `capture_roundtrip` fuzz target, which checks it; tests/capture_time.rs).
        let idb = InterfaceDescriptionBlock {
            linktype: DataLink::ETHERNET,
            snaplen: snap_len,
            options: vec![InterfaceDescriptionOption::IfTsResol(9)],
        };
        enc.write_pcapng_block(idb).map_err(|e| e.to_string())?;
        let header = std::mem::take(enc.get_mut());
        Ok(Output {
            base,
            rotate_bytes,
            ports,
            classes,
            file: None,
            committed: 0,
            dirty: false,
            index: 0,
            enc,
            header,
            comment: String::with_capacity(128),
            failing: None,
            blocked: false,
        })
    }

    fn path_of(&self, index: u64) -> PathBuf {
        member(&self.base, "", index)
    }

    /// Creates file `index` with its header (one write) and makes it the current file. A file
    /// whose header could not be written is removed, so every file left is readable.
    fn open(&mut self, shared: &Shared, index: u64) -> Result<(), String> {
        let path = self.path_of(index);
        let file = File::create(&path).map_err(|e| format!("creating {}: {e}", path.display()))?;
        if let Err((e, _)) = write_whole(&file, &self.header, 0) {
            drop(file);
            let _ = std::fs::remove_file(&path);
            return Err(format!("writing {}: {e}", path.display()));
        }
        self.file = Some(file);
        self.committed = self.header.len() as u64;
        self.dirty = false;
        self.index = index;
        shared.files.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// The packet's comment (`cause=early in=lan out=wan class=be color=green`), written into
    /// `out` (cleared first; reused from packet to packet).
    fn comment(&self, r: &Record, out: &mut String) {
        use std::fmt::Write as _;
        let port = |out: &mut String, p: u16| match self.ports.get(p as usize) {
            Some(name) => out.push_str(name),
            None => {
                let _ = write!(out, "{p}");
            }
        };
        out.clear();
        out.push_str("cause=");
        out.push_str(r.cause.name());
        out.push_str(" in=");
        port(out, r.in_port);
        if let Some(o) = r.out_port {
            out.push_str(" out=");
            port(out, o);
            if let Some(k) = r.class {
                out.push_str(" class=");
                match self
                    .classes
                    .get(o as usize)
                    .and_then(|cs| cs.get(k as usize))
                {
                    Some(name) => out.push_str(name),
                    None => {
                        let _ = write!(out, "{k}");
                    }
                }
            }
        }
        if let Some(k) = r.color {
            out.push_str(" color=");
            out.push_str(k.name());
        }
    }

    /// A record that is not in any file: counted, and the failure logged when it starts.
    fn lost(&mut self, shared: &Shared, error: Option<String>) {
        shared.write_errors.fetch_add(1, Ordering::Relaxed);
        match &mut self.failing {
            Some(f) => {
                f.lost += 1;
                if error.is_some() {
                    f.tried = Instant::now();
                }
            }
            None => {
                tracing::error!(
                    "zlrouter: drop capture: {}; captured packets are counted as \
                     capture.write_errors and not written, trying again every {} s",
                    error.as_deref().unwrap_or("write failed"),
                    RETRY_AFTER.as_secs()
                );
                self.failing = Some(Failing {
                    tried: Instant::now(),
                    lost: 1,
                });
            }
        }
    }

    fn write(&mut self, shared: &Shared, r: &Record) {
        if self.blocked {
            // Logged once at start.
            shared.write_errors.fetch_add(1, Ordering::Relaxed);
            return;
        }
        if self
            .failing
            .as_ref()
            .is_some_and(|f| f.tried.elapsed() < RETRY_AFTER)
        {
            self.lost(shared, None);
            return;
        }
        let rotate = self
            .rotate_bytes
            .is_some_and(|limit| self.committed >= limit);
        if self.file.is_none() || rotate {
            let next = if self.file.is_some() {
                self.index + 1
            } else {
                self.index
            };
            if let Err(e) = self.open(shared, next) {
                // The old file stays as it is (whole blocks); the next try creates `next` again.
                self.file = None;
                self.index = next;
                self.lost(shared, Some(e));
                return;
            }
        }
        let mut comment = std::mem::take(&mut self.comment);
        self.comment(r, &mut comment);
        let block = EnhancedPacketBlock {
            interface_id: 0,
            timestamp: Duration::from_nanos(r.time.0),
            original_len: r.orig_len,
            data: std::borrow::Cow::Borrowed(&r.data),
            options: vec![EnhancedPacketOption::Comment(comment.as_str().into())],
        };
        self.enc.get_mut().clear();
        let encoded = self.enc.write_pcapng_block(block);
        self.comment = comment;
        if let Err(e) = encoded {
            // Cannot happen (interface 0 is described, the sizes fit); counted if it did.
            self.lost(shared, Some(format!("encoding a packet block: {e}")));
            return;
        }
        // Padding in front, so that no page boundary of the file falls inside the block
        // (see [`padding`]); in the same write, whose only possible cut is then between them.
        let pad = padding(self.committed, self.enc.get_ref().len() as u64);
        if pad > 0 {
            let block = pad_block(pad as u32);
            self.enc.get_mut().splice(0..0, block);
        }
        let Some(file) = &self.file else { return };
        // An earlier partial block not cut off yet: cut it first (a block written after it
        // would be unreadable).
        let cut = if self.dirty {
            file.set_len(self.committed)
        } else {
            Ok(())
        };
        let result = match cut {
            Err(e) => Err((e, 0)),
            Ok(()) => {
                self.dirty = false;
                write_whole(file, self.enc.get_ref(), self.committed)
            }
        };
        match result {
            Ok(()) => {
                self.committed += self.enc.get_ref().len() as u64;
                shared.written.fetch_add(1, Ordering::Relaxed);
                if let Some(f) = self.failing.take() {
                    tracing::warn!(
                        "zlrouter: drop capture: writing {} again; {} captured packets were \
                         lost while writes failed",
                        self.path_of(self.index).display(),
                        f.lost
                    );
                }
            }
            Err((e, partial)) => {
                // A short write left part of the block: cut the file back to its last whole
                // block, so it stays readable to its end.
                if partial > 0 && file.set_len(self.committed).is_err() {
                    self.dirty = true;
                }
                let msg = format!("writing {}: {e}", self.path_of(self.index).display());
                self.lost(shared, Some(msg));
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every position the writer can be at (any multiple of 4 but 4 or 8 bytes before a page
    /// boundary) and every block length up to two pages: the padding fits in the page, no
    /// boundary falls inside a block that fits in a page, and no write leaves a gap too small
    /// for a padding block.
    #[test]
    fn padding_keeps_page_boundaries_between_blocks() {
        for at in (0..PAGE).step_by(4).filter(|a| !matches!(PAGE - a, 4 | 8)) {
            let at = at + 3 * PAGE;
            let room = PAGE - at % PAGE;
            for len in (MIN_BLOCK..=2 * PAGE).step_by(4) {
                let pad = padding(at, len);
                assert!(pad == 0 || (MIN_BLOCK..=room).contains(&pad), "{at} {len}");
                let start = at + pad;
                if len <= PAGE - MIN_BLOCK {
                    assert_eq!(
                        start / PAGE,
                        (start + len - 1) / PAGE,
                        "{at} {len}: straddles"
                    );
                }
                let after = (PAGE - (start + len) % PAGE) % PAGE;
                assert!(!matches!(after, 4 | 8), "{at} {len}: leaves {after}");
            }
        }
    }

    #[test]
    fn a_pad_block_is_a_block_readers_skip() {
        let mut w = PcapNgWriter::new(Vec::new()).unwrap();
        w.write_pcapng_block(InterfaceDescriptionBlock {
            linktype: DataLink::ETHERNET,
            snaplen: 100,
            options: vec![],
        })
        .unwrap();
        let mut bytes = std::mem::take(w.get_mut());
        bytes.extend(pad_block(12));
        bytes.extend(pad_block(40));
        let mut r = pcap_file::pcapng::PcapNgReader::new(&bytes[..]).unwrap();
        let mut kinds = Vec::new();
        while let Some(b) = r.next_block() {
            kinds.push(match b.unwrap() {
                pcap_file::pcapng::Block::Unknown(u) => {
                    assert_eq!(u.type_, PAD_BLOCK_TYPE);
                    "pad"
                }
                pcap_file::pcapng::Block::InterfaceDescription(_) => "idb",
                other => panic!("{other:?}"),
            });
        }
        assert_eq!(kinds, ["idb", "pad", "pad"]);
    }
}
