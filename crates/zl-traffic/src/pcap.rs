//! pcap file ports: replay a capture as a virtual-time receive port, write what is sent to a
//! capture (nanosecond timestamps, Ethernet link type, readable by Wireshark and tshark).
//!
//! The replay's virtual time starts at 0 at the first packet of the file: a packet captured
//! `d` after the first is received at `Nanos(d)`. Written timestamps are the virtual send times.
//! Only Ethernet captures (link type 1) are replayed: the data plane parses Ethernet frames, so
//! another link type (raw IP, Linux cooked, radiotap) is refused when the port opens, naming
//! the link type, instead of making every frame a parse error.
//!
//! The output capture holds whole records only, whatever stops the process: records are
//! serialised into a buffer and written to the file one whole buffer at a time (when it holds
//! [`FLUSH_BYTES`], when [`FLUSH_PERIOD`] of wall time has passed since the last write, and at
//! the end of the run or when the port is dropped), so a process killed between two writes
//! leaves a capture that ends at a record boundary. Only a SIGKILL that lands inside the
//! write system call itself can still cut the last record (the kernel stops copying at a page
//! boundary when a fatal signal is pending): a window of microseconds per write-out, where a
//! byte stream buffer (the writer before) cut a record at nearly every kill. A failed write
//! cuts the file back to its last whole record and moves the records it held from
//! `tx_packets` to `tx_errors`.
//!
//! Frames of the input capture that are never replayed (timestamped after the run's end) are
//! counted when the port is flushed and reported as a warning with their number.

use std::fs::File;
use std::io::{BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pcap_file::pcap::{PcapHeader, PcapReader};
use pcap_file::{DataLink, TsResolution};
use serde::{Deserialize, Serialize};
use zl_core::Nanos;
use zl_port::{
    Batch, BufPool, Halves, NoRx, Port, PortCounters, PortError, Readiness, RxHalf, SplitPort,
    TxHalf,
};

use super::acks::AckChannel;

/// Buffered output above which the records are written to the file.
pub const FLUSH_BYTES: usize = 64 * 1024;
/// Longest wall time buffered records wait before they are written to the file.
pub const FLUSH_PERIOD: Duration = Duration::from_millis(200);

/// What opening a pcap port does with its files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FileAccess {
    /// Open the capture to read, create (truncate) the capture to write.
    Open,
    /// Write nothing (`zlrouter check`): the capture to read is opened and its header checked;
    /// the capture to write must be a writable file or have a directory to be created in, and
    /// is neither created nor truncated.
    CheckOnly,
}

/// The pcap section of a port (`[ports.pcap]`): a file to replay, a file to write, or both.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PcapParams {
    /// Capture replayed as this port's received traffic.
    #[serde(default)]
    pub read: Option<PathBuf>,
    /// Capture this port's transmitted traffic is written to.
    #[serde(default)]
    pub write: Option<PathBuf>,
}

/// A port reading and/or writing pcap files: its receive half replays, its transmit half
/// writes ([`SplitPort`]).
pub struct PcapPort {
    rx: PcapRx,
    tx: PcapTx,
}

/// A pcap port's receive half: the capture it replays.
pub struct PcapRx {
    name: String,
    index: u16,
    reader: Option<PcapReader<BufReader<File>>>,
    /// The capture being read, for messages.
    read_path: PathBuf,
    /// The next packet to deliver, read ahead so its timestamp is known: (time, frame).
    pending: Option<Nanos>,
    pending_frame: Vec<u8>,
    first_ts: Option<Duration>,
    counters: PortCounters,
}

/// A pcap port's transmit half: the capture it writes (or a count, without one).
pub struct PcapTx {
    name: String,
    writer: Option<PcapOutput>,
    counters: PortCounters,
}

impl std::fmt::Debug for PcapPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PcapPort")
            .field("name", &self.rx.name)
            .field("pending", &self.rx.pending)
            .finish_non_exhaustive()
    }
}

fn io_err(port: &str, context: &'static str, e: std::io::Error) -> PortError {
    PortError::Io {
        port: port.to_owned(),
        context,
        source: e,
    }
}

fn bad(port: &str, what: &str, e: impl std::fmt::Display) -> PortError {
    PortError::BadInput {
        port: port.to_owned(),
        detail: format!("{what}: {e}"),
    }
}

/// The common name of a pcap link type (tcpdump.org/linktypes.html), for messages.
fn link_type_name(dl: DataLink) -> String {
    let n = u32::from(dl);
    let name = match n {
        0 => "BSD loopback",
        1 => "Ethernet",
        101 => "raw IP",
        105 => "IEEE 802.11",
        113 => "Linux cooked (SLL)",
        127 => "802.11 radiotap",
        228 => "raw IPv4",
        229 => "raw IPv6",
        276 => "Linux cooked v2 (SLL2)",
        _ => return format!("link type {n}"),
    };
    format!("link type {n} ({name})")
}

impl PcapPort {
    /// Opens the files named in `params`; paths are taken relative to `base` (the config
    /// file's directory) unless absolute.
    pub fn open(
        name: &str,
        index: u16,
        params: &PcapParams,
        base: &Path,
    ) -> Result<Self, PortError> {
        Self::open_with(name, index, params, base, FileAccess::Open)
    }

    /// [`PcapPort::open`], or with [`FileAccess::CheckOnly`] a port that has checked its files
    /// and writes nothing (its sends are counted and discarded).
    pub fn open_with(
        name: &str,
        index: u16,
        params: &PcapParams,
        base: &Path,
        access: FileAccess,
    ) -> Result<Self, PortError> {
        let resolve = |p: &Path| {
            if p.is_absolute() {
                p.to_owned()
            } else {
                base.join(p)
            }
        };
        let read_path = params.read.as_deref().map(resolve).unwrap_or_default();
        let reader = match &params.read {
            Some(_) => {
                let f = File::open(&read_path)
                    .map_err(|e| io_err(name, "opening the pcap to read", e))?;
                let r = PcapReader::new(BufReader::new(f)).map_err(|e| {
                    bad(
                        name,
                        &format!("{} is not a pcap file", read_path.display()),
                        e,
                    )
                })?;
                let dl = r.header().datalink;
                if dl != DataLink::ETHERNET {
                    return Err(PortError::BadInput {
                        port: name.to_owned(),
                        detail: format!(
                            "{} has {}; only Ethernet captures (link type 1) can be replayed",
                            read_path.display(),
                            link_type_name(dl)
                        ),
                    });
                }
                Some(r)
            }
            None => None,
        };
        let writer = match (&params.write, access) {
            (Some(p), FileAccess::Open) => Some(
                PcapOutput::create(&resolve(p)).map_err(|(context, e)| io_err(name, context, e))?,
            ),
            (Some(p), FileAccess::CheckOnly) => {
                PcapOutput::check(&resolve(p)).map_err(|(context, e)| io_err(name, context, e))?;
                None
            }
            (None, _) => None,
        };
        let mut rx = PcapRx {
            name: name.to_owned(),
            index,
            reader,
            read_path,
            pending: None,
            pending_frame: Vec::with_capacity(2048),
            first_ts: None,
            counters: PortCounters::default(),
        };
        rx.read_ahead()?;
        let tx = PcapTx {
            name: name.to_owned(),
            writer,
            counters: PortCounters::default(),
        };
        Ok(PcapPort { rx, tx })
    }
}

impl PcapRx {
    fn read_ahead(&mut self) -> Result<(), PortError> {
        self.pending = None;
        let Some(reader) = &mut self.reader else {
            return Ok(());
        };
        match reader.next_packet() {
            None => {
                self.reader = None;
                Ok(())
            }
            Some(Err(e)) => Err(bad(&self.name, "reading the pcap", e)),
            Some(Ok(pkt)) => {
                let first = *self.first_ts.get_or_insert(pkt.timestamp);
                let t = pkt.timestamp.saturating_sub(first);
                self.pending = Some(Nanos(t.as_nanos().min(u64::MAX as u128) as u64));
                self.pending_frame.clear();
                self.pending_frame.extend_from_slice(&pkt.data);
                Ok(())
            }
        }
    }

    /// Frames of the input capture not replayed: the one read ahead and every one after it
    /// (a record that does not parse ends the count). Consumes the reader.
    fn count_unread(&mut self) -> u64 {
        let mut n = u64::from(self.pending.take().is_some());
        if let Some(mut r) = self.reader.take() {
            while let Some(Ok(_)) = r.next_packet() {
                n += 1;
            }
        }
        n
    }
}

impl PcapTx {
    /// Writes the buffered records to the file; on failure moves them to `tx_errors`.
    fn write_out(&mut self) -> Result<(), PortError> {
        let Some(w) = &mut self.writer else {
            return Ok(());
        };
        let (records, bytes) = (w.records, w.frame_bytes);
        if let Err(e) = w.write_out() {
            self.counters.tx_packets -= records;
            self.counters.tx_bytes -= bytes;
            self.counters.tx_errors += records;
            // Whatever was written stays readable; nothing more is written.
            let path = w.path.display().to_string();
            self.writer = None;
            return Err(io_err(
                &self.name,
                "writing the output capture",
                std::io::Error::new(e.kind(), format!("{path}: {e}")),
            ));
        }
        Ok(())
    }
}

/// The output capture: whole records, written a whole buffer at a time (see the module doc).
struct PcapOutput {
    file: File,
    path: PathBuf,
    /// Serialised records not yet in the file.
    buf: Vec<u8>,
    /// Records and frame bytes in `buf` (counted as sent already).
    records: u64,
    frame_bytes: u64,
    /// File length up to the last whole record written.
    committed: u64,
    last_write: Instant,
}

/// The output header: nanosecond timestamps, Ethernet, snap length 65535, big-endian (the
/// byte order pcap-file's writer used, so captures are the same bytes as before).
fn output_header() -> PcapHeader {
    PcapHeader {
        datalink: DataLink::ETHERNET,
        ts_resolution: TsResolution::NanoSecond,
        ..PcapHeader::default()
    }
}

impl PcapOutput {
    fn create(path: &Path) -> Result<Self, (&'static str, std::io::Error)> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| ("creating the output directory", e))?;
        }
        let file = File::create(path).map_err(|e| ("creating the pcap to write", e))?;
        let mut w = PcapOutput {
            file,
            path: path.to_owned(),
            buf: Vec::with_capacity(FLUSH_BYTES + 2048),
            records: 0,
            frame_bytes: 0,
            committed: 0,
            last_write: Instant::now(),
        };
        output_header().write_to(&mut w.buf).map_err(|e| {
            (
                "writing the pcap header",
                std::io::Error::other(e.to_string()),
            )
        })?;
        w.write_out().map_err(|e| ("writing the pcap header", e))?;
        Ok(w)
    }

    /// What [`PcapOutput::create`] needs, checked without writing: an existing file must
    /// open for writing (without truncation); a new one needs its nearest existing ancestor to
    /// be a directory.
    fn check(path: &Path) -> Result<(), (&'static str, std::io::Error)> {
        if path.exists() {
            if path.is_dir() {
                return Err((
                    "the pcap to write",
                    std::io::Error::other(format!("{} is a directory", path.display())),
                ));
            }
            std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .map(drop)
                .map_err(|e| ("opening the pcap to write", e))
        } else {
            let mut dir = path.parent();
            while let Some(d) = dir.filter(|d| !d.as_os_str().is_empty()) {
                if d.exists() {
                    if d.is_dir() {
                        return Ok(());
                    }
                    return Err((
                        "creating the output directory",
                        std::io::Error::other(format!("{} is not a directory", d.display())),
                    ));
                }
                dir = d.parent();
            }
            Ok(())
        }
    }

    /// Appends one record (big-endian, as the header says).
    fn push(&mut self, ts: Nanos, frame: &[u8]) -> bool {
        let Ok(sec) = u32::try_from(ts.as_nanos() / 1_000_000_000) else {
            return false;
        };
        let frac = (ts.as_nanos() % 1_000_000_000) as u32;
        let len = frame.len() as u32;
        if len > output_header().snaplen {
            return false;
        }
        for v in [sec, frac, len, len] {
            self.buf.extend_from_slice(&v.to_be_bytes());
        }
        self.buf.extend_from_slice(frame);
        self.records += 1;
        self.frame_bytes += u64::from(len);
        true
    }

    fn due(&self) -> bool {
        self.buf.len() >= FLUSH_BYTES
            || (!self.buf.is_empty() && self.last_write.elapsed() >= FLUSH_PERIOD)
    }

    /// Writes the buffer; on failure cuts the file back to its last whole record.
    fn write_out(&mut self) -> std::io::Result<()> {
        self.last_write = Instant::now();
        if self.buf.is_empty() {
            return Ok(());
        }
        let result = self.file.write_all(&self.buf);
        match result {
            Ok(()) => {
                self.committed += self.buf.len() as u64;
                self.buf.clear();
                self.records = 0;
                self.frame_bytes = 0;
                Ok(())
            }
            Err(e) => {
                // Best effort: a device that refuses writes may refuse this too.
                let _ = self.file.set_len(self.committed);
                self.buf.clear();
                Err(e)
            }
        }
    }
}

impl Drop for PcapOutput {
    /// A port dropped without a flush (a panic unwinding, an error path) still writes what it
    /// counted as sent.
    fn drop(&mut self) {
        let _ = self.write_out();
    }
}

impl RxHalf for PcapRx {
    fn name(&self) -> &str {
        &self.name
    }

    fn recv(
        &mut self,
        now: Nanos,
        pool: &mut BufPool,
        batch: &mut Batch,
    ) -> Result<usize, PortError> {
        let mut added = 0;
        while !batch.is_full() {
            let Some(t) = self.pending.filter(|t| *t <= now) else {
                break;
            };
            match pool.alloc() {
                None => self.counters.rx_no_buffer += 1,
                Some(mut buf) => {
                    if buf.copy_from(&self.pending_frame).is_err() {
                        pool.free(buf);
                        self.counters.rx_too_long += 1;
                    } else {
                        buf.rx_time = t;
                        buf.in_port = self.index;
                        self.counters.rx_packets += 1;
                        self.counters.rx_bytes += buf.len() as u64;
                        if let Err(b) = batch.push(buf) {
                            pool.free(b);
                        }
                        added += 1;
                    }
                }
            }
            self.read_ahead()?;
        }
        Ok(added)
    }

    fn readiness(&self) -> Readiness {
        match self.pending {
            Some(t) => Readiness::NextPacketAt(t),
            None => Readiness::Exhausted,
        }
    }

    /// Warns about the frames never replayed.
    fn flush(&mut self) -> Result<(), PortError> {
        let unread = self.count_unread();
        if unread > 0 {
            tracing::warn!(
                port = %self.name,
                "{unread} frame(s) of {} were not replayed: timestamped after the run's end \
                 (run.duration_s + run.drain_s after the first frame), or the run stopped \
                 early",
                self.read_path.display()
            );
        }
        Ok(())
    }

    fn counters(&self) -> PortCounters {
        self.counters
    }
}

impl TxHalf for PcapTx {
    fn name(&self) -> &str {
        &self.name
    }

    fn send(
        &mut self,
        now: Nanos,
        batch: &mut Batch,
        pool: &mut BufPool,
    ) -> Result<usize, PortError> {
        let mut sent = 0;
        for buf in batch.drain() {
            let ok = match &mut self.writer {
                Some(w) => w.push(now, buf.as_slice()),
                None => true,
            };
            if ok {
                self.counters.tx_packets += 1;
                self.counters.tx_bytes += buf.len() as u64;
                sent += 1;
            } else {
                self.counters.tx_errors += 1;
            }
            pool.free(buf);
        }
        self.tick(now)?;
        Ok(sent)
    }

    /// The write-out timer: records wait at most [`FLUSH_PERIOD`] in the buffer.
    fn tick(&mut self, _now: Nanos) -> Result<(), PortError> {
        if self.writer.as_ref().is_some_and(PcapOutput::due) {
            self.write_out()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), PortError> {
        self.write_out()?;
        self.writer = None;
        Ok(())
    }

    fn counters(&self) -> PortCounters {
        self.counters
    }
}

/// The receive half replays, the transmit half writes; as one port, the write-out timer runs
/// on every `recv` (called on every poll, also when nothing is sent).
impl Port for PcapPort {
    fn name(&self) -> &str {
        &self.rx.name
    }

    fn recv(
        &mut self,
        now: Nanos,
        pool: &mut BufPool,
        batch: &mut Batch,
    ) -> Result<usize, PortError> {
        self.tx.tick(now)?;
        self.rx.recv(now, pool, batch)
    }

    fn send(
        &mut self,
        now: Nanos,
        batch: &mut Batch,
        pool: &mut BufPool,
    ) -> Result<usize, PortError> {
        self.tx.send(now, batch, pool)
    }

    fn readiness(&self) -> Readiness {
        self.rx.readiness()
    }

    fn flush(&mut self) -> Result<(), PortError> {
        self.rx.flush()?;
        self.tx.flush()
    }

    fn counters(&self) -> PortCounters {
        PortCounters::joined(&self.rx.counters, &self.tx.counters)
    }
}

impl SplitPort for PcapPort {
    fn split(self: Box<Self>) -> Halves {
        Halves::one(Box::new(self.rx), Box::new(self.tx))
    }
}

/// A port that counts and discards what is sent to it and never receives. Built with the
/// generators' acknowledgement channels ([`SinkPort::with_acks`]), it is also the receiving end
/// of their responsive flows: each frame a generator sent is recorded in that generator's
/// channel at the time it is sent here (`super::acks`).
#[derive(Debug)]
pub struct SinkPort {
    name: String,
    counters: PortCounters,
    acks: Vec<Arc<AckChannel>>,
}

impl SinkPort {
    pub fn new(name: &str) -> Self {
        Self::with_acks(name, Vec::new())
    }

    /// A sink that records the deliveries of the generators owning `acks`.
    pub fn with_acks(name: &str, acks: Vec<Arc<AckChannel>>) -> Self {
        SinkPort {
            name: name.to_owned(),
            counters: PortCounters::default(),
            acks,
        }
    }
}

impl Port for SinkPort {
    fn name(&self) -> &str {
        &self.name
    }
    fn recv(&mut self, _: Nanos, _: &mut BufPool, _: &mut Batch) -> Result<usize, PortError> {
        Ok(0)
    }
    fn send(
        &mut self,
        now: Nanos,
        batch: &mut Batch,
        pool: &mut BufPool,
    ) -> Result<usize, PortError> {
        if !self.acks.is_empty() {
            for buf in batch.iter() {
                if let Some(a) = self.acks.iter().find(|a| a.generator() == buf.in_port) {
                    a.delivered(now, buf.in_port, buf.as_slice());
                }
            }
        }
        Ok(self.counters.sink(batch, pool))
    }
    fn readiness(&self) -> Readiness {
        Readiness::Exhausted
    }
    fn counters(&self) -> PortCounters {
        self.counters
    }
}

/// A sink splits into an empty receive side and itself.
impl SplitPort for SinkPort {
    fn split(self: Box<Self>) -> Halves {
        Halves::one(Box::new(NoRx::new(&self.name)), self)
    }
}

impl TxHalf for SinkPort {
    fn name(&self) -> &str {
        &self.name
    }
    fn send(
        &mut self,
        now: Nanos,
        batch: &mut Batch,
        pool: &mut BufPool,
    ) -> Result<usize, PortError> {
        Port::send(self, now, batch, pool)
    }
    fn counters(&self) -> PortCounters {
        self.counters
    }
}
