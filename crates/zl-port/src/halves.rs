//! A port split into receive halves and a transmit half that different threads own:
//! the threaded router's receive workers own the receive halves, its transmit workers the
//! transmit halves, so no lock is taken on the packet path.
//!
//! Contract: the halves of one port share nothing that either changes without
//! synchronisation of its own (an AF_XDP socket's RX + fill rings vs its TX + completion
//! rings; a DPDK port's RX queues vs its TX queue; the memory port's source vs its sink). A
//! port with several receive queues (RSS) splits into one receive half per queue, each to be
//! owned by its own receive worker. Each half counts its own side: [`RxHalf::counters`] the
//! `rx_*` fields, [`TxHalf::counters`] the `tx_*` fields and the link events;
//! [`PortCounters::joined`] puts them together. [`Joined`] makes a whole [`Port`] of the
//! halves again (for a single-thread loop, or between two threaded runs), and splits back
//! into the same halves.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, TryLockError};

use crate::{Batch, BufPool, Port, PortCounters, PortError, Readiness};
use zl_core::Nanos;

/// A receive half of a port (the whole receive side, or one of its queues): [`Port::recv`]
/// and [`Port::readiness`], owned by one thread.
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
    /// Called once at the end of a run (as [`Port::flush`], for the receive side).
    fn flush(&mut self) -> Result<(), PortError> {
        Ok(())
    }
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
    /// Called by the half's owner once per round, also when nothing is sent: the half's
    /// timers (a capture's write-out, a ring's completions). [`Joined`] calls it on every
    /// `recv`, as the single-thread loop calls `recv` on every poll.
    fn tick(&mut self, _now: Nanos) -> Result<(), PortError> {
        Ok(())
    }
    /// The transmit side's counters (`tx_*` and the link events; the rest 0).
    fn counters(&self) -> PortCounters;
    /// As [`Port::mtu`].
    fn mtu(&self) -> Option<u32> {
        None
    }
    /// As [`Port::mac`].
    fn mac(&self) -> Option<[u8; 6]> {
        None
    }
    /// As [`Port::addresses`].
    fn addresses(&self) -> Vec<(std::net::IpAddr, u8)> {
        Vec::new()
    }
}

/// A port's halves: one receive half per receive queue (at least one), one transmit half.
pub struct Halves {
    /// The receive halves.
    pub rx: Vec<Box<dyn RxHalf>>,
    /// The transmit half.
    pub tx: Box<dyn TxHalf>,
}

impl Halves {
    /// A port with one receive half.
    pub fn one(rx: Box<dyn RxHalf>, tx: Box<dyn TxHalf>) -> Halves {
        Halves { rx: vec![rx], tx }
    }
}

/// A port that splits into halves.
pub trait SplitPort: Port + Send {
    /// The halves, each to be owned by its own thread.
    fn split(self: Box<Self>) -> Halves;
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

    /// Adds `other`'s receive fields to these (the receive queues of one port, summed).
    pub fn add_rx(&mut self, other: &PortCounters) {
        self.rx_packets += other.rx_packets;
        self.rx_bytes += other.rx_bytes;
        self.rx_no_buffer += other.rx_no_buffer;
        self.rx_ring_full += other.rx_ring_full;
        self.rx_too_long += other.rx_too_long;
    }
}

/// A port's halves as one [`Port`].
pub struct Joined {
    rx: Vec<Box<dyn RxHalf>>,
    tx: Box<dyn TxHalf>,
    /// The receive half the next `recv` starts at (the queues take turns).
    next: usize,
}

impl Joined {
    /// The port made of `halves` (the halves of one port).
    pub fn new(halves: Halves) -> Joined {
        Joined {
            rx: halves.rx,
            tx: halves.tx,
            next: 0,
        }
    }
}

impl Port for Joined {
    fn name(&self) -> &str {
        self.tx.name()
    }
    /// The transmit half's tick, then every receive half in turn, from the one after last
    /// call's first, while the batch has room.
    fn recv(
        &mut self,
        now: Nanos,
        pool: &mut BufPool,
        batch: &mut Batch,
    ) -> Result<usize, PortError> {
        self.tx.tick(now)?;
        let n = self.rx.len();
        let first = self.next;
        self.next = if first + 1 >= n { 0 } else { first + 1 };
        let mut got = 0;
        for i in 0..n {
            if batch.is_full() {
                break;
            }
            got += self.rx[(first + i) % n].recv(now, pool, batch)?;
        }
        Ok(got)
    }
    fn send(
        &mut self,
        now: Nanos,
        batch: &mut Batch,
        pool: &mut BufPool,
    ) -> Result<usize, PortError> {
        self.tx.send(now, batch, pool)
    }
    /// Live when any half is; else the earliest next packet; exhausted when every half is.
    fn readiness(&self) -> Readiness {
        let mut ready = Readiness::Exhausted;
        for r in self.rx.iter().map(|h| h.readiness()) {
            ready = match (ready, r) {
                (Readiness::Live, _) | (_, Readiness::Live) => Readiness::Live,
                (Readiness::NextPacketAt(a), Readiness::NextPacketAt(b)) => {
                    Readiness::NextPacketAt(a.min(b))
                }
                (Readiness::Exhausted, other) | (other, Readiness::Exhausted) => other,
            };
        }
        ready
    }
    fn flush(&mut self) -> Result<(), PortError> {
        let mut first_error = None;
        for rx in &mut self.rx {
            if let Err(e) = rx.flush() {
                first_error.get_or_insert(e);
            }
        }
        let tx = self.tx.flush();
        match first_error {
            Some(e) => Err(e),
            None => tx,
        }
    }
    fn counters(&self) -> PortCounters {
        let mut rx = PortCounters::default();
        for h in &self.rx {
            rx.add_rx(&h.counters());
        }
        PortCounters::joined(&rx, &self.tx.counters())
    }
    fn mtu(&self) -> Option<u32> {
        self.tx.mtu()
    }
    fn mac(&self) -> Option<[u8; 6]> {
        self.tx.mac()
    }
    fn addresses(&self) -> Vec<(std::net::IpAddr, u8)> {
        self.tx.addresses()
    }
}

impl SplitPort for Joined {
    fn split(self: Box<Self>) -> Halves {
        Halves {
            rx: self.rx,
            tx: self.tx,
        }
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
    fn flush(&mut self) -> Result<(), PortError> {
        self.0.flush()
    }
}

/// Splits `port`, whose `send` is a plain sink, into [`RecvOnly`] and a [`SinkTx`] that goes on
/// from its transmit counters.
pub fn split_sink_port<P: Port + Send + 'static>(port: P) -> Halves {
    let tx = SinkTx::new(port.name(), &port.counters());
    Halves::one(Box::new(RecvOnly(port)), Box::new(tx))
}

/// The receive half of a port that never receives (a sink): always exhausted.
#[derive(Debug)]
pub struct NoRx {
    name: String,
}

impl NoRx {
    /// The empty receive side of port `name`.
    pub fn new(name: &str) -> NoRx {
        NoRx {
            name: name.to_owned(),
        }
    }
}

impl RxHalf for NoRx {
    fn name(&self) -> &str {
        &self.name
    }
    fn recv(&mut self, _: Nanos, _: &mut BufPool, _: &mut Batch) -> Result<usize, PortError> {
        Ok(0)
    }
    fn readiness(&self) -> Readiness {
        Readiness::Exhausted
    }
    fn counters(&self) -> PortCounters {
        PortCounters::default()
    }
}

/// A port whose rings cannot be owned apart, shared by its two halves behind a lock taken for
/// one burst: the receive half tries it (and leaves the port for this round when the transmit
/// half holds it or waits for it, so a port polled without pause cannot starve the sends),
/// the transmit half waits for it.
///
/// decided: kept for a port type that has no halves of its own (an embedder's, a test's): it
/// puts a lock on the threaded packet path, so every port type of this workspace that the
/// threaded router runs has its own halves instead (the router's tests check it).
struct Locked<P> {
    port: Mutex<P>,
    /// Set while the transmit half waits for (or holds) the lock.
    tx_waiting: AtomicBool,
}

impl<P> Locked<P> {
    fn lock(&self) -> std::sync::MutexGuard<'_, P> {
        // A thread that panicked while holding the port leaves it usable: its state is the
        // port's.
        self.port.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

struct LockedRx<P>(Arc<Locked<P>>, String);
struct LockedTx<P>(Arc<Locked<P>>, String);

/// Splits `port`, whose receive and transmit sides are one object, into halves that share it
/// behind a lock (see [`Locked`]'s decision).
pub fn split_locked<P: Port + Send + 'static>(port: P) -> Halves {
    let name = port.name().to_owned();
    let shared = Arc::new(Locked {
        port: Mutex::new(port),
        tx_waiting: AtomicBool::new(false),
    });
    Halves::one(
        Box::new(LockedRx(shared.clone(), name.clone())),
        Box::new(LockedTx(shared, name)),
    )
}

impl<P: Port + Send> RxHalf for LockedRx<P> {
    fn name(&self) -> &str {
        &self.1
    }
    fn recv(
        &mut self,
        now: Nanos,
        pool: &mut BufPool,
        batch: &mut Batch,
    ) -> Result<usize, PortError> {
        // Relaxed: a hint only; the lock orders the port's state.
        if self.0.tx_waiting.load(Ordering::Relaxed) {
            return Ok(0);
        }
        let mut port = match self.0.port.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(g)) => g.into_inner(),
            // The transmit half is sending on it: next round.
            Err(TryLockError::WouldBlock) => return Ok(0),
        };
        port.recv(now, pool, batch)
    }
    fn readiness(&self) -> Readiness {
        self.0.lock().readiness()
    }
    fn counters(&self) -> PortCounters {
        PortCounters::joined(&self.0.lock().counters(), &PortCounters::default())
    }
}

impl<P: Port + Send> TxHalf for LockedTx<P> {
    fn name(&self) -> &str {
        &self.1
    }
    fn send(
        &mut self,
        now: Nanos,
        batch: &mut Batch,
        pool: &mut BufPool,
    ) -> Result<usize, PortError> {
        // Relaxed: a hint only; the lock orders the port's state.
        self.0.tx_waiting.store(true, Ordering::Relaxed);
        let mut port = self.0.lock();
        self.0.tx_waiting.store(false, Ordering::Relaxed);
        port.send(now, batch, pool)
    }
    fn flush(&mut self) -> Result<(), PortError> {
        self.0.lock().flush()
    }
    fn counters(&self) -> PortCounters {
        PortCounters::joined(&PortCounters::default(), &self.0.lock().counters())
    }
    fn mtu(&self) -> Option<u32> {
        self.0.lock().mtu()
    }
    fn mac(&self) -> Option<[u8; 6]> {
        self.0.lock().mac()
    }
    fn addresses(&self) -> Vec<(std::net::IpAddr, u8)> {
        self.0.lock().addresses()
    }
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
        let Halves { rx, tx } = port.split();
        let (mut rx, mut tx) = (rx.into_iter().next().unwrap(), tx);
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
        let j = Joined::new(Halves::one(rx, tx));
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
        let Halves { rx, mut tx } = split_sink_port(port);
        let mut rx = rx.into_iter().next().unwrap();
        assert_eq!(rx.recv(Nanos(1), &mut pool, &mut batch).unwrap(), 8);
        assert_eq!(rx.readiness(), Readiness::Exhausted);
        assert_eq!(tx.send(Nanos(1), &mut batch, &mut pool).unwrap(), 8);
        let (r, t) = (rx.counters(), tx.counters());
        assert_eq!((r.rx_packets, r.tx_packets), (40, 0));
        assert_eq!((t.rx_packets, t.tx_packets, t.tx_bytes), (0, 40, 40 * 64));
        assert_eq!(pool.available(), 64);
    }

    /// A port shared by its locked halves on two threads: every frame counted once on each
    /// side, the counters joined as the port's own.
    #[test]
    fn a_locked_split_shares_one_port_between_two_threads() {
        let port = MemoryPort::cycling("l", 0, vec![vec![3u8; 60]], 500);
        let Halves { rx, mut tx } = split_locked(port);
        let mut rx = rx.into_iter().next().unwrap();
        let (to_tx, from_rx) = std::sync::mpsc::sync_channel::<Batch>(4);
        let receiver = std::thread::spawn(move || {
            let mut pool = BufPool::new(500, 2048);
            while rx.readiness() != Readiness::Exhausted {
                let mut batch = Batch::new();
                rx.recv(Nanos(1), &mut pool, &mut batch).unwrap();
                to_tx.send(batch).unwrap();
            }
            rx
        });
        let mut pool = BufPool::empty(500, 2048);
        let mut sent = 0;
        for mut batch in from_rx {
            sent += tx.send(Nanos(2), &mut batch, &mut pool).unwrap();
        }
        let rx = receiver.join().unwrap();
        assert_eq!(sent, 500);
        let j = Joined::new(Halves::one(rx, tx));
        let c = j.counters();
        assert_eq!((c.rx_packets, c.tx_packets), (500, 500));
        assert_eq!(j.name(), "l");
    }

    /// Two receive queues joined: `recv` takes from both, readiness is the earliest.
    #[test]
    fn joined_receive_queues_take_turns_and_sum_their_counters() {
        let a = Box::new(MemoryPort::cycling("q", 0, vec![vec![1u8; 60]], 20)).split();
        let b = Box::new(MemoryPort::cycling("q", 0, vec![vec![2u8; 60]], 30)).split();
        let rx = a.rx.into_iter().chain(b.rx).collect();
        let mut j = Joined::new(Halves { rx, tx: a.tx });
        let mut pool = BufPool::new(64, 2048);
        let mut batch = Batch::new();
        assert_eq!(j.recv(Nanos(0), &mut pool, &mut batch).unwrap(), 32);
        let c = j.counters();
        assert_eq!(c.rx_packets, 32);
        assert_eq!(j.readiness(), Readiness::Live);
        j.send(Nanos(0), &mut batch, &mut pool).unwrap();
        assert_eq!(j.recv(Nanos(0), &mut pool, &mut batch).unwrap(), 18);
        assert_eq!(j.readiness(), Readiness::Exhausted);
        assert_eq!(j.counters().rx_packets, 50);
    }
}
