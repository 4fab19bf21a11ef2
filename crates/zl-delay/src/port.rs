//! [`DelayedPort`]: a [`Port`] whose received frames reach the data plane a fixed propagation
//! delay after they arrived, as if the link feeding the port were that much longer.
//!
//! decided: the delay sits on the receive side. A frame's buffer stays out of the pool while it
//! is on the line, so the pool must hold `line capacity + the data plane's own queues`; a full
//! line refuses the frame, gives the buffer back to the pool and counts it
//! ([`DelayStats::overflow_drops`], reported as `rx_ring_full` in [`PortCounters`]). Transmit
//! passes straight through.

use zl_core::Nanos;
use zl_port::{
    Batch, BufPool, Halves, PacketBuf, Port, PortCounters, PortError, Readiness, RxHalf, SplitPort,
};

use crate::{DelayConfigError, DelayLine, DelayLineConfig, DelayStats};

/// Inner-port batches taken onto the line per `recv` call at most.
const INNER_BATCHES_PER_RECV: usize = 8;

/// A port with a delay line on its receive side.
#[derive(Debug)]
pub struct DelayedPort<P> {
    inner: P,
    line: DelayLine<PacketBuf>,
    arrivals: Batch,
    /// The line's parameters, for the lines of further receive queues when the port splits.
    config: DelayLineConfig,
}

impl<P: Port> DelayedPort<P> {
    /// Wraps `inner`; packets it receives come out of `recv` after the configured delay.
    pub fn new(inner: P, config: DelayLineConfig) -> Result<Self, DelayConfigError> {
        Ok(DelayedPort {
            inner,
            line: DelayLine::new(config)?,
            arrivals: Batch::new(),
            config,
        })
    }

    /// The wrapped port.
    pub fn inner(&self) -> &P {
        &self.inner
    }

    /// The wrapped port, mutably.
    pub fn inner_mut(&mut self) -> &mut P {
        &mut self.inner
    }

    /// The delay line's counters.
    pub fn delay_stats(&self) -> DelayStats {
        self.line.stats()
    }

    /// Frames on the line now.
    pub fn in_flight(&self) -> usize {
        self.line.len()
    }

    /// Gives every buffer still on the line back to `pool` (at shutdown).
    pub fn drain_into(&mut self, pool: &mut BufPool) {
        while let Some(buf) = self.line.pop_due(Nanos::MAX) {
            pool.free(buf);
        }
    }
}

impl<P: Port> Port for DelayedPort<P> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn mtu(&self) -> Option<u32> {
        self.inner.mtu()
    }

    fn mac(&self) -> Option<[u8; 6]> {
        self.inner.mac()
    }

    fn addresses(&self) -> Vec<(std::net::IpAddr, u8)> {
        self.inner.addresses()
    }

    /// Takes what the inner port has received into the line (each frame stamped with its
    /// release time), then hands over what is due by `now`.
    fn recv(
        &mut self,
        now: Nanos,
        pool: &mut BufPool,
        batch: &mut Batch,
    ) -> Result<usize, PortError> {
        let (line, arrivals) = (&mut self.line, &mut self.arrivals);
        let inner = &mut self.inner;
        through_line(line, arrivals, now, pool, batch, |p, b| {
            inner.recv(now, p, b)
        })
    }

    fn send(
        &mut self,
        now: Nanos,
        batch: &mut Batch,
        pool: &mut BufPool,
    ) -> Result<usize, PortError> {
        self.inner.send(now, batch, pool)
    }

    /// A live inner port stays live; a virtual-time one is next ready at the earlier of its
    /// own next arrival and the line's next release.
    fn readiness(&self) -> Readiness {
        readiness_through(&self.line, self.inner.readiness())
    }

    fn flush(&mut self) -> Result<(), PortError> {
        self.inner.flush()
    }

    fn counters(&self) -> PortCounters {
        let mut c = self.inner.counters();
        c.rx_ring_full += self.line.stats().overflow_drops;
        c
    }
}

/// Takes what `inner_recv` has received into `line` (each frame stamped with its release
/// time), then hands over what is due by `now`: the receive side of [`DelayedPort`] and
/// [`DelayedRx`].
fn through_line(
    line: &mut DelayLine<PacketBuf>,
    arrivals: &mut Batch,
    now: Nanos,
    pool: &mut BufPool,
    batch: &mut Batch,
    mut inner_recv: impl FnMut(&mut BufPool, &mut Batch) -> Result<usize, PortError>,
) -> Result<usize, PortError> {
    // A few batches per call, so an inner port that always has a full batch (an endless
    // generator) cannot keep this call from returning.
    for _ in 0..INNER_BATCHES_PER_RECV {
        let got = inner_recv(pool, arrivals)?;
        for mut buf in arrivals.drain() {
            let arrival = buf.rx_time;
            buf.rx_time = line.release_time(arrival);
            if let Err(buf) = line.push(arrival, buf) {
                pool.free(buf);
            }
        }
        if got < zl_port::BATCH_CAPACITY {
            break;
        }
    }
    let mut added = 0;
    while !batch.is_full() {
        let Some(buf) = line.pop_due(now) else {
            break;
        };
        match batch.push(buf) {
            Ok(()) => added += 1,
            Err(buf) => pool.free(buf),
        }
    }
    Ok(added)
}

/// A live inner side stays live; a virtual-time one is next ready at the earlier of its own
/// next arrival and the line's next release.
fn readiness_through(line: &DelayLine<PacketBuf>, inner: Readiness) -> Readiness {
    match (inner, line.next_release()) {
        (Readiness::Live, _) => Readiness::Live,
        (Readiness::NextPacketAt(t), Some(r)) => Readiness::NextPacketAt(t.min(r)),
        (Readiness::NextPacketAt(t), None) => Readiness::NextPacketAt(t),
        (Readiness::Exhausted, Some(r)) => Readiness::NextPacketAt(r),
        (Readiness::Exhausted, None) => Readiness::Exhausted,
    }
}

/// A receive half of a [`DelayedPort`]: an inner receive half (a receive queue) with a delay
/// line of its own.
pub struct DelayedRx {
    inner: Box<dyn RxHalf>,
    line: DelayLine<PacketBuf>,
    arrivals: Batch,
}

impl RxHalf for DelayedRx {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn recv(
        &mut self,
        now: Nanos,
        pool: &mut BufPool,
        batch: &mut Batch,
    ) -> Result<usize, PortError> {
        let (line, arrivals, inner) = (&mut self.line, &mut self.arrivals, &mut self.inner);
        through_line(line, arrivals, now, pool, batch, |p, b| {
            inner.recv(now, p, b)
        })
    }
    fn readiness(&self) -> Readiness {
        readiness_through(&self.line, self.inner.readiness())
    }
    fn counters(&self) -> PortCounters {
        let mut c = self.inner.counters();
        c.rx_ring_full += self.line.stats().overflow_drops;
        c
    }
    fn flush(&mut self) -> Result<(), PortError> {
        self.inner.flush()
    }
}

/// The inner port's halves, each receive half behind a delay line: the first takes this
/// port's line (with what is on it and its counters), each further receive queue a new line
/// of the same parameters (so its frames are delayed alike, and the pool must hold a line's
/// capacity per queue).
impl<P: SplitPort + 'static> SplitPort for DelayedPort<P> {
    fn split(self: Box<Self>) -> Halves {
        let DelayedPort {
            inner,
            line,
            arrivals,
            config,
        } = *self;
        let Halves { rx, tx } = Box::new(inner).split();
        let mut first = Some((line, arrivals));
        let rx = rx
            .into_iter()
            .map(|inner| {
                let (line, arrivals) = first.take().unwrap_or_else(|| {
                    // Cannot fail: the same config built this port's line.
                    let line = DelayLine::new(config).expect("the port's own line config");
                    (line, Batch::new())
                });
                Box::new(DelayedRx {
                    inner,
                    line,
                    arrivals,
                }) as Box<dyn RxHalf>
            })
            .collect();
        Halves { rx, tx }
    }
}
