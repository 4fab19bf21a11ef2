//! [`DelayedPort`]: a [`Port`] whose received frames reach the data plane a fixed propagation
//! delay after they arrived, as if the link feeding the port were that much longer.
//!
//! decided: the delay sits on the receive side. A frame's buffer stays out of the pool while it
//! is on the line, so the pool must hold `line capacity + the data plane's own queues`; a full
//! line refuses the frame, gives the buffer back to the pool and counts it
//! ([`DelayStats::overflow_drops`], reported as `rx_ring_full` in [`PortCounters`]). Transmit
//! passes straight through.

use zl_core::Nanos;
use zl_port::{Batch, BufPool, PacketBuf, Port, PortCounters, PortError, Readiness};

use crate::{DelayConfigError, DelayLine, DelayLineConfig, DelayStats};

/// Inner-port batches taken onto the line per `recv` call at most.
const INNER_BATCHES_PER_RECV: usize = 8;

/// A port with a delay line on its receive side.
#[derive(Debug)]
pub struct DelayedPort<P> {
    inner: P,
    line: DelayLine<PacketBuf>,
    arrivals: Batch,
}

impl<P: Port> DelayedPort<P> {
    /// Wraps `inner`; packets it receives come out of `recv` after the configured delay.
    pub fn new(inner: P, config: DelayLineConfig) -> Result<Self, DelayConfigError> {
        Ok(DelayedPort {
            inner,
            line: DelayLine::new(config)?,
            arrivals: Batch::new(),
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
        // A few batches per call, so an inner port that always has a full batch (an endless
        // generator) cannot keep this call from returning.
        for _ in 0..INNER_BATCHES_PER_RECV {
            let got = self.inner.recv(now, pool, &mut self.arrivals)?;
            for mut buf in self.arrivals.drain() {
                let arrival = buf.rx_time;
                buf.rx_time = self.line.release_time(arrival);
                if let Err(buf) = self.line.push(arrival, buf) {
                    pool.free(buf);
                }
            }
            if got < zl_port::BATCH_CAPACITY {
                break;
            }
        }
        let mut added = 0;
        while !batch.is_full() {
            let Some(buf) = self.line.pop_due(now) else {
                break;
            };
            match batch.push(buf) {
                Ok(()) => added += 1,
                Err(buf) => pool.free(buf),
            }
        }
        Ok(added)
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
        let line_next = self.line.next_release();
        match (self.inner.readiness(), line_next) {
            (Readiness::Live, _) => Readiness::Live,
            (Readiness::NextPacketAt(t), Some(r)) => Readiness::NextPacketAt(t.min(r)),
            (Readiness::NextPacketAt(t), None) => Readiness::NextPacketAt(t),
            (Readiness::Exhausted, Some(r)) => Readiness::NextPacketAt(r),
            (Readiness::Exhausted, None) => Readiness::Exhausted,
        }
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
