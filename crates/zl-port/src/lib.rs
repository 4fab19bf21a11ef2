//! Packet buffers, fixed-capacity batches and the [`Port`] trait every zlrouter I/O backend
//! implements (pcap, the traffic generator, the in-memory port, AF_XDP, DPDK).
//!
//! Contract:
//! - Packets live in [`PacketBuf`]s taken from a [`BufPool`] that is allocated once, up front.
//!   Nothing on the per-packet path allocates: a port copies a received frame into a pool
//!   buffer (or lends one of its own), the data plane moves the buffer through its queues, and
//!   the transmitting port copies it out and gives it back to the pool. The pool's size is the
//!   hard bound on the memory the data plane holds in packets.
//! - Ports move packets in [`Batch`]es of at most [`BATCH_CAPACITY`] packets (as BESS's
//!   `PacketBatch` and DPDK's bursts of 32).
//! - [`Port::recv`] fills a batch with what has arrived by `now`; [`Port::send`] takes every
//!   packet out of a batch: it transmits it or counts it as a transmit drop (ring full,
//!   ENOBUFS), and in both cases the buffer goes back to the pool. Nothing is silently lost:
//!   [`PortCounters`] names each cause.
//! - A port whose interface disappears reports [`PortError::InterfaceGone`] from `recv` or
//!   `send` instead of spinning.
//! - [`Port::readiness`] tells the poll loop how to drive the port: a live port is polled
//!   continuously on the monotonic clock; a virtual-time port (pcap replay, generator) names
//!   the timestamp of its next packet so the loop can advance virtual time to it.
//!
//! This crate sits just above `zl-core` and below every backend and the data plane.
//!
//! # Example
//!
//! A port's contract from the caller's side (the poll loop): receive into a batch from the
//! pool, transmit the batch, and every buffer comes back to the pool.
//!
//! ```
//! use zl_port::{Batch, BufPool, MemoryPort, Nanos, Port};
//!
//! let frame = vec![0u8; 64];
//! let mut rx = MemoryPort::cycling("rx", 0, vec![frame], 3);
//! let mut tx = MemoryPort::cycling("tx", 1, Vec::new(), 0).with_capture();
//! let mut pool = BufPool::new(8, 2048);
//! let mut batch = Batch::new();
//!
//! let now = Nanos::from_micros(1);
//! let got = rx.recv(now, &mut pool, &mut batch).unwrap();
//! assert_eq!(got, 3);
//! assert_eq!(tx.send(now, &mut batch, &mut pool).unwrap(), 3);
//! assert_eq!(batch.len(), 0);
//! assert_eq!(tx.captured().len(), 3);
//! // Every buffer is back: the pool can lend all 8 again.
//! let again: Vec<_> = (0..8).map_while(|_| pool.alloc()).collect();
//! assert_eq!(again.len(), 8);
//! ```
//!
//! # Layers
//!
//! Each module uses only those on the lines above it (`scripts/module-cycles` checks it):
//! `buf` (packet buffers, the pool, lent frames); `batch` (a burst of buffers, and the
//! pool's whole-burst exchanges with it); `halves` (a port split into receive and transmit
//! halves); `memory` (the in-memory port).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod batch;
mod buf;
mod halves;
mod memory;

pub use batch::{Batch, RxTally};
#[cfg(feature = "lend")]
pub use buf::{register_lender, FrameLender, LenderKey, LendersFull};
pub use buf::{BufPool, PacketBuf, BATCH_CAPACITY, DEFAULT_BUF_SIZE};
pub use halves::{
    split_locked, split_sink_port, Halves, Joined, NoRx, RecvOnly, RxHalf, SinkTx, SplitPort,
    TxHalf,
};
pub use memory::{MemoryPort, MemoryRx, MemoryTx};
pub use zl_core::Nanos;

/// Per-port counters, one field per cause (never one "drops").
///
/// Ports keep these as plain integers on the forwarding thread; the data plane copies a
/// snapshot to its metrics at a low rate.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PortCounters {
    /// Frames handed to the data plane.
    pub rx_packets: u64,
    /// Bytes of those frames (frame length without FCS).
    pub rx_bytes: u64,
    /// Frames the port saw but could not hand over because the pool had no free buffer.
    pub rx_no_buffer: u64,
    /// Frames lost because a receive ring overflowed (reported by the NIC or kernel).
    pub rx_ring_full: u64,
    /// Frames longer than a pool buffer, dropped at receive.
    pub rx_too_long: u64,
    /// Frames transmitted.
    pub tx_packets: u64,
    /// Bytes transmitted.
    pub tx_bytes: u64,
    /// Frames dropped at transmit because the transmit ring was full.
    pub tx_ring_full: u64,
    /// Frames dropped at transmit because the kernel answered ENOBUFS / EAGAIN on the wakeup.
    pub tx_no_buffer: u64,
    /// Frames dropped at transmit for any other I/O error.
    pub tx_errors: u64,
    /// Frames handed to the port for transmit while its interface was gone (a port that waits
    /// for its interface to come back drops them).
    pub tx_link_gone: u64,
    /// Times the port's interface went away while the port ran (events, not drops).
    pub link_gone_events: u64,
    /// Times the port attached again to an interface that had gone and came back.
    pub link_reattached: u64,
}

impl PortCounters {
    /// All frames dropped at receive, whatever the cause.
    pub fn rx_dropped(&self) -> u64 {
        self.rx_no_buffer + self.rx_ring_full + self.rx_too_long
    }
    /// All frames dropped at transmit, whatever the cause.
    pub fn tx_dropped(&self) -> u64 {
        self.tx_ring_full + self.tx_no_buffer + self.tx_errors + self.tx_link_gone
    }
    /// Empties `batch` the way a port without a wire does: every packet is counted as
    /// transmitted and its buffer goes back to `pool`. Returns the number counted.
    pub fn sink(&mut self, batch: &mut Batch, pool: &mut BufPool) -> usize {
        let n = batch.len();
        // The counters once per batch (a register sum, not a read-modify-write per packet),
        // the buffers back in one go, their bytes summed in the pass that tests them.
        let bytes = pool.free_batch_bytes(batch);
        self.tx_packets += n as u64;
        self.tx_bytes += bytes;
        n
    }
}

/// How the poll loop should drive a port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Readiness {
    /// A live port: poll it continuously; timestamps come from the monotonic clock.
    Live,
    /// A virtual-time port whose next packet arrives at this time.
    NextPacketAt(Nanos),
    /// A virtual-time port with nothing more to receive, ever (end of file or of the run).
    Exhausted,
}

/// A port failed; the data plane stops cleanly on any of these.
#[derive(Debug, thiserror::Error)]
pub enum PortError {
    /// The interface went away (unplugged, deleted namespace, driver unbound).
    #[error("port `{port}`: interface is gone ({detail})")]
    InterfaceGone {
        /// The port's name.
        port: String,
        /// What the system said.
        detail: String,
    },
    /// Any other I/O failure.
    #[error("port `{port}`: {context}: {source}")]
    Io {
        /// The port's name.
        port: String,
        /// What the port was doing.
        context: &'static str,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// The port's input is malformed (e.g. a pcap file that is not one).
    #[error("port `{port}`: {detail}")]
    BadInput {
        /// The port's name.
        port: String,
        /// What is wrong with it.
        detail: String,
    },
}

/// A packet I/O endpoint driven by the poll loop on one thread.
pub trait Port {
    /// The port's name as configured (used in counters and errors).
    fn name(&self) -> &str;

    /// Receives into `batch` (up to its free room) what has arrived by `now`, taking buffers
    /// from `pool`. Each received buffer carries its receive time and this port's index.
    /// Returns the number of packets added. A virtual-time port adds only packets whose
    /// timestamp is `<= now`.
    fn recv(
        &mut self,
        now: Nanos,
        pool: &mut BufPool,
        batch: &mut Batch,
    ) -> Result<usize, PortError>;

    /// Empties `batch`: transmits each packet or counts it as a transmit drop, and gives every
    /// buffer back to `pool`. Returns the number transmitted.
    fn send(
        &mut self,
        now: Nanos,
        batch: &mut Batch,
        pool: &mut BufPool,
    ) -> Result<usize, PortError>;

    /// How the poll loop should drive this port.
    fn readiness(&self) -> Readiness;

    /// Finishes pending output (e.g. flushes a file). Called once when the loop stops.
    fn flush(&mut self) -> Result<(), PortError> {
        Ok(())
    }

    /// A snapshot of the port's counters.
    fn counters(&self) -> PortCounters;

    /// The largest IP packet the port's interface sends (its MTU, octets), where the port has
    /// an interface that says (AF_XDP: the kernel's MTU of the interface); `None` otherwise.
    fn mtu(&self) -> Option<u32> {
        None
    }

    /// The MAC of the port's interface, where it has one (AF_XDP: the kernel interface's
    /// own address): the router's MAC on the port when the config gives none.
    fn mac(&self) -> Option<[u8; 6]> {
        None
    }

    /// The addresses (address, prefix length) of the port's interface, where it has one
    /// (AF_XDP: the kernel interface's): the source of the router's ICMP errors on the port
    /// when the config gives none.
    fn addresses(&self) -> Vec<(std::net::IpAddr, u8)> {
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dropped_sums_every_cause_once() {
        let c = PortCounters {
            rx_no_buffer: 1,
            rx_ring_full: 2,
            rx_too_long: 4,
            tx_ring_full: 8,
            tx_no_buffer: 16,
            tx_errors: 32,
            tx_link_gone: 64,
            ..PortCounters::default()
        };
        assert_eq!(c.rx_dropped(), 7);
        assert_eq!(c.tx_dropped(), 120);
    }
}
