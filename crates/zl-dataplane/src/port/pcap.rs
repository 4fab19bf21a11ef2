//! pcap file ports: replay a capture as a virtual-time receive port, write what is sent to a
//! capture (nanosecond timestamps, Ethernet link type, readable by Wireshark and tshark).
//!
//! The replay's virtual time starts at 0 at the first packet of the file: a packet captured
//! `d` after the first is received at `Nanos(d)`. Written timestamps are the virtual send times.

use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::{Path, PathBuf};
use std::time::Duration;

use pcap_file::pcap::{PcapHeader, PcapPacket, PcapReader, PcapWriter};
use pcap_file::{DataLink, TsResolution};
use serde::{Deserialize, Serialize};
use zl_core::Nanos;
use zl_port::{Batch, BufPool, Port, PortCounters, PortError, Readiness};

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

/// A port reading and/or writing pcap files.
pub struct PcapPort {
    name: String,
    index: u16,
    reader: Option<PcapReader<BufReader<File>>>,
    /// The next packet to deliver, read ahead so its timestamp is known: (time, frame).
    pending: Option<Nanos>,
    pending_frame: Vec<u8>,
    first_ts: Option<Duration>,
    writer: Option<PcapWriter<BufWriter<File>>>,
    counters: PortCounters,
}

impl std::fmt::Debug for PcapPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PcapPort")
            .field("name", &self.name)
            .field("pending", &self.pending)
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

impl PcapPort {
    /// Opens the files named in `params`; paths are taken relative to `base` (the config
    /// file's directory) unless absolute.
    pub fn open(
        name: &str,
        index: u16,
        params: &PcapParams,
        base: &Path,
    ) -> Result<Self, PortError> {
        let resolve = |p: &Path| {
            if p.is_absolute() {
                p.to_owned()
            } else {
                base.join(p)
            }
        };
        let reader = match &params.read {
            Some(p) => {
                let path = resolve(p);
                let f =
                    File::open(&path).map_err(|e| io_err(name, "opening the pcap to read", e))?;
                let r = PcapReader::new(BufReader::new(f))
                    .map_err(|e| bad(name, &format!("{} is not a pcap file", path.display()), e))?;
                Some(r)
            }
            None => None,
        };
        let writer = match &params.write {
            Some(p) => {
                let path = resolve(p);
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir)
                        .map_err(|e| io_err(name, "creating the output directory", e))?;
                }
                let f = File::create(&path)
                    .map_err(|e| io_err(name, "creating the pcap to write", e))?;
                let header = PcapHeader {
                    datalink: DataLink::ETHERNET,
                    ts_resolution: TsResolution::NanoSecond,
                    ..PcapHeader::default()
                };
                Some(
                    PcapWriter::with_header(BufWriter::new(f), header)
                        .map_err(|e| bad(name, "writing the pcap header", e))?,
                )
            }
            None => None,
        };
        let mut port = PcapPort {
            name: name.to_owned(),
            index,
            reader,
            pending: None,
            pending_frame: Vec::with_capacity(2048),
            first_ts: None,
            writer,
            counters: PortCounters::default(),
        };
        port.read_ahead()?;
        Ok(port)
    }

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
}

impl Port for PcapPort {
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

    fn send(
        &mut self,
        now: Nanos,
        batch: &mut Batch,
        pool: &mut BufPool,
    ) -> Result<usize, PortError> {
        let mut sent = 0;
        let mut failure = None;
        for buf in batch.drain() {
            let ok = match &mut self.writer {
                Some(w) => {
                    let pkt = PcapPacket::new(
                        Duration::from_nanos(now.as_nanos()),
                        buf.len() as u32,
                        buf.as_slice(),
                    );
                    match w.write_packet(&pkt) {
                        Ok(_) => true,
                        Err(e) => {
                            failure.get_or_insert_with(|| bad(&self.name, "writing the pcap", e));
                            false
                        }
                    }
                }
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
        match failure {
            Some(e) => Err(e),
            None => Ok(sent),
        }
    }

    fn readiness(&self) -> Readiness {
        match self.pending {
            Some(t) => Readiness::NextPacketAt(t),
            None => Readiness::Exhausted,
        }
    }

    fn flush(&mut self) -> Result<(), PortError> {
        if let Some(w) = self.writer.take() {
            use std::io::Write;
            let mut inner = w.into_writer();
            inner
                .flush()
                .map_err(|e| io_err(&self.name, "flushing the pcap", e))?;
        }
        Ok(())
    }

    fn counters(&self) -> PortCounters {
        self.counters
    }
}

/// A port that counts and discards what is sent to it and never receives.
#[derive(Debug)]
pub struct SinkPort {
    name: String,
    counters: PortCounters,
}

impl SinkPort {
    pub fn new(name: &str) -> Self {
        SinkPort {
            name: name.to_owned(),
            counters: PortCounters::default(),
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
        _: Nanos,
        batch: &mut Batch,
        pool: &mut BufPool,
    ) -> Result<usize, PortError> {
        Ok(self.counters.sink(batch, pool))
    }
    fn readiness(&self) -> Readiness {
        Readiness::Exhausted
    }
    fn counters(&self) -> PortCounters {
        self.counters
    }
}
