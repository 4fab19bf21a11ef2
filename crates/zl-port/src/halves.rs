//! A port split into a receive half and a transmit half that different threads own (issue 14):
//! the threaded router's receive workers own the receive halves, its transmit workers the
//! transmit halves, so no lock is taken on the packet path.
//!
//! Contract: the halves of one port share nothing that either changes without
//! synchronisation of its own (an AF_XDP socket's RX + fill rings vs its TX + completion
//! rings; a DPDK port's RX queue vs its TX queue; the memory port's source vs its sink).
//! Each half counts its own side: [`RxHalf::counters`] the `rx_*` fields,
//! [`TxHalf::counters`] the `tx_*` fields and the link events; [`PortCounters::joined`] puts
//! them together. [`Joined`] makes a whole [`Port`] of two halves again (for a single-thread
//! loop, or between two threaded runs), and splits back into the same halves.

use crate::{Batch, BufPool, Port, PortCounters, PortError, Readiness};
use zl_core::Nanos;

/// The receive half of a port: [`Port::recv`] and [`Port::readiness`], owned by one thread.
pub trait RxHalf: Send {
    /// The port's name.
    fn name(&self) -> &str;
    /// As [`Port::recv`].
    fn recv(
        &mut self,
        now: Nanos,
        pool: &mut BufPool,
        batch: &mut Batch,
    ) -> Result<usize, PortError>;
    /// As [`Port::readiness`].
    fn readiness(&self) -> Readiness;
    /// The receive side's counters (`rx_*`; the rest 0).
    fn counters(&self) -> PortCounters;
}

/// The transmit half of a port: [`Port::send`] and [`Port::flush`], owned by one thread.
pub trait TxHalf: Send {
    /// The port's name.
    fn name(&self) -> &str;
    /// As [`Port::send`].
    fn send(
        &mut self,
        now: Nanos,
        batch: &mut Batch,
        pool: &mut BufPool,
    ) -> Result<usize, PortError>;
    /// As [`Port::flush`].
    fn flush(&mut self) -> Result<(), PortError> {
        Ok(())
    }
    /// The transmit side's counters (`tx_*` and the link events; the rest 0).
    fn counters(&self) -> PortCounters;
}

/// A port that splits into halves.
pub trait SplitPort: Port + Send {
    /// The two halves, each to be owned by its own thread.
    fn split(self: Box<Self>) -> (Box<dyn RxHalf>, Box<dyn TxHalf>);
}

impl PortCounters {
    /// One port's counters from its halves': `rx`'s receive fields, `tx`'s transmit fields and
    /// link events.
    pub fn joined(rx: &PortCounters, tx: &PortCounters) -> PortCounters {
        PortCounters {
            rx_packets: rx.rx_packets,
            rx_bytes: rx.rx_bytes,
            rx_no_buffer: rx.rx_no_buffer,
            rx_ring_full: rx.rx_ring_full,
            rx_too_long: rx.rx_too_long,
            ..*tx
        }
    }
}

/// Two halves as one [`Port`].
pub struct Joined {
    rx: Box<dyn RxHalf>,
    tx: Box<dyn TxHalf>,
}

impl Joined {
    /// The port made of `rx` and `tx` (the halves of one port).
    pub fn new(rx: Box<dyn RxHalf>, tx: Box<dyn TxHalf>) -> Joined {
        Joined { rx, tx }
    }
}

impl Port for Joined {
    fn name(&self) -> &str {
        self.rx.name()
    }
    fn recv(
        &mut self,
        now: Nanos,
        pool: &mut BufPool,
        batch: &mut Batch,
    ) -> Result<usize, PortError> {
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
        self.tx.flush()
    }
    fn counters(&self) -> PortCounters {
        PortCounters::joined(&self.rx.counters(), &self.tx.counters())
    }
}

impl SplitPort for Joined {
    fn split(self: Box<Self>) -> (Box<dyn RxHalf>, Box<dyn TxHalf>) {
        (self.rx, self.tx)
    }
}

/// The transmit half of a port whose sending is a sink (a generator, a replayed capture): it
/// counts what it is given and gives the buffers back.
#[derive(Debug)]
pub struct SinkTx {
    name: String,
    counters: PortCounters,
}

impl SinkTx {
    /// A sink named `name`, going on from `counters`' transmit fields.
    pub fn new(name: &str, counters: &PortCounters) -> SinkTx {
        SinkTx {
            name: name.to_owned(),
            counters: PortCounters::joined(&PortCounters::default(), counters),
        }
    }
}

impl TxHalf for SinkTx {
    fn name(&self) -> &str {
        &self.name
    }
    fn send(
        &mut self,
        _now: Nanos,
        batch: &mut Batch,
        pool: &mut BufPool,
    ) -> Result<usize, PortError> {
        Ok(self.counters.sink(batch, pool))
    }
    fn counters(&self) -> PortCounters {
        self.counters
    }
}

/// The receive half of a port whose own `send` is a plain sink (replaced by a [`SinkTx`] when
/// split): its `recv` and `readiness`, and its counters' receive fields.
#[derive(Debug)]
pub struct RecvOnly<P>(pub P);

impl<P: Port + Send> RxHalf for RecvOnly<P> {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn recv(
        &mut self,
        now: Nanos,
        pool: &mut BufPool,
        batch: &mut Batch,
    ) -> Result<usize, PortError> {
        self.0.recv(now, pool, batch)
    }
    fn readiness(&self) -> Readiness {
        self.0.readiness()
    }
    fn counters(&self) -> PortCounters {
        PortCounters::joined(&self.0.counters(), &PortCounters::default())
    }
}

/// Splits `port`, whose `send` is a plain sink, into [`RecvOnly`] and a [`SinkTx`] that goes on
/// from its transmit counters.
pub fn split_sink_port<P: Port + Send + 'static>(port: P) -> (Box<dyn RxHalf>, Box<dyn TxHalf>) {
    let tx = SinkTx::new(port.name(), &port.counters());
    (Box::new(RecvOnly(port)), Box::new(tx))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemoryPort;

    #[test]
    fn counters_join_each_side_from_its_half() {
        let rx = PortCounters {
            rx_packets: 3,
            rx_no_buffer: 1,
            tx_packets: 99,
            ..PortCounters::default()
        };
        let tx = PortCounters {
            rx_packets: 99,
            tx_packets: 5,
            tx_ring_full: 2,
            link_gone_events: 1,
            ..PortCounters::default()
        };
        let j = PortCounters::joined(&rx, &tx);
        assert_eq!((j.rx_packets, j.rx_no_buffer), (3, 1));
        assert_eq!(
            (j.tx_packets, j.tx_ring_full, j.link_gone_events),
            (5, 2, 1)
        );
    }

    /// The halves of a memory port on two threads: one receives, the other sends what the
    /// first received; every frame is counted once on each side and every buffer comes back.
    #[test]
    fn a_memory_port_split_across_two_threads_counts_every_frame() {
        let port = Box::new(MemoryPort::cycling("m", 0, vec![vec![7u8; 60]], 1000));
        let (mut rx, mut tx) = port.split();
        let (to_tx, from_rx) = std::sync::mpsc::sync_channel::<Batch>(4);
        let receiver = std::thread::spawn(move || {
            let mut pool = BufPool::new(1000, 2048);
            let mut got = 0;
            while rx.readiness() != Readiness::Exhausted {
                let mut batch = Batch::new();
                got += rx.recv(Nanos(1), &mut pool, &mut batch).unwrap();
                // The sender's pool takes the buffers: each side its own pool.
                to_tx.send(batch).unwrap();
            }
            (rx, got)
        });
        let mut pool = BufPool::empty(1000, 2048);
        let mut sent = 0;
        for mut batch in from_rx {
            sent += tx.send(Nanos(2), &mut batch, &mut pool).unwrap();
        }
        let (rx, got) = receiver.join().unwrap();
        assert_eq!((got, sent), (1000, 1000));
        let j = Joined::new(rx, tx);
        let c = j.counters();
        assert_eq!((c.rx_packets, c.tx_packets), (1000, 1000));
        assert_eq!(j.name(), "m");
    }

    #[test]
    fn a_sink_port_splits_into_its_receive_side_and_a_sink() {
        let mut port = MemoryPort::cycling("s", 2, vec![vec![1u8; 64]], 40);
        let mut pool = BufPool::new(64, 2048);
        let mut batch = Batch::new();
        // Counted before the split: 32 received, 32 sent.
        port.recv(Nanos(0), &mut pool, &mut batch).unwrap();
        port.send(Nanos(0), &mut batch, &mut pool).unwrap();
        let (mut rx, mut tx) = split_sink_port(port);
        assert_eq!(rx.recv(Nanos(1), &mut pool, &mut batch).unwrap(), 8);
        assert_eq!(rx.readiness(), Readiness::Exhausted);
        assert_eq!(tx.send(Nanos(1), &mut batch, &mut pool).unwrap(), 8);
        let (r, t) = (rx.counters(), tx.counters());
        assert_eq!((r.rx_packets, r.tx_packets), (40, 0));
        assert_eq!((t.rx_packets, t.tx_packets, t.tx_bytes), (0, 40, 40 * 64));
        assert_eq!(pool.available(), 64);
    }
}
