//! The queues of a [`DpdkPort`](crate::DpdkPort): each receive queue is a
//! [`zl_port::RxHalf`], the transmit side a [`zl_port::TxHalf`]. Different threads may own
//! them at once: DPDK allows different threads on different queues of one port without locks,
//! and the queues share only the [`Device`] (read-only, closed when the last queue goes).
//!
//! Counters: each receive queue counts what it received (`rx_*`); the device's own receive
//! drops (`imissed` as `rx_ring_full`, `rx_nombuf` as `rx_no_buffer`), which DPDK keeps per
//! port, not per queue, are counted by queue 0 alone, so the halves' counters sum to the
//! port's. The transmit queue counts `tx_*`.

#[cfg(feature = "zero-copy")]
use std::num::NonZeroUsize;
use std::ptr;
use std::sync::Arc;

use zl_core::Nanos;
use zl_dpdk_sys as sys;
#[cfg(feature = "zero-copy")]
use zl_port::LenderKey;
use zl_port::{Batch, BufPool, PortCounters, PortError, Readiness, RxHalf, RxTally, TxHalf};

use crate::device::{Device, BURST};
#[cfg(feature = "zero-copy")]
use crate::lend::MbufLender;

/// One receive queue of a DPDK port, with its own mbuf pool.
#[derive(Debug)]
pub struct DpdkRxQueue {
    pub(crate) dev: Arc<Device>,
    pub(crate) queue: u16,
    /// The queue's pool (one of `dev.rx_pools`), for the benchmark helpers.
    #[cfg(feature = "bench")]
    pub(crate) pool: *mut sys::rte_mempool,
    pub(crate) counters: PortCounters,
    rx_multi_seg: u64,
    /// With zero-copy: the key frames are lent with.
    #[cfg(feature = "zero-copy")]
    lend: Option<&'static LenderKey>,
}

// SAFETY: the queue is used only through `&mut self`, i.e. by one thread at a time; DPDK allows
// a queue to move between threads as long as it is not used concurrently, and no other queue
// of the port touches this one or its pool's mbufs while they are lent out. The device is
// `Sync` (see `Device`).
unsafe impl Send for DpdkRxQueue {}

impl DpdkRxQueue {
    pub(crate) fn new(dev: Arc<Device>, queue: u16, zero_copy: bool) -> Self {
        // Refused by `DpdkPortConfig::validate` in a build without the feature.
        #[cfg(not(feature = "zero-copy"))]
        let _ = zero_copy;
        DpdkRxQueue {
            #[cfg(feature = "bench")]
            pool: dev.rx_pools[usize::from(queue)],
            dev,
            queue,
            counters: PortCounters::default(),
            rx_multi_seg: 0,
            #[cfg(feature = "zero-copy")]
            lend: if zero_copy { MbufLender::key() } else { None },
        }
    }

    /// Receives one burst (up to 32) and calls `on_frame` with each single-segment frame.
    /// One FFI call receives the burst and reports every frame; one more frees the mbufs.
    pub(crate) fn recv_frames(&mut self, max: usize, mut on_frame: impl FnMut(&[u8])) -> usize {
        let mut mbufs = [ptr::null_mut::<sys::rte_mbuf>(); BURST];
        let mut data = [ptr::null::<u8>(); BURST];
        let mut lens = [0u16; BURST];
        let want = max.min(BURST) as u16;
        // SAFETY: started port, this queue (owned by `self` alone); the three arrays have room
        // for `want` entries.
        let n = unsafe {
            sys::zl_rx_burst_frames(
                self.dev.port_id,
                self.queue,
                mbufs.as_mut_ptr(),
                data.as_mut_ptr(),
                lens.as_mut_ptr(),
                want,
            )
        };
        let n = usize::from(n);
        for (&d, &len) in data[..n].iter().zip(&lens[..n]) {
            if d.is_null() {
                self.rx_multi_seg += 1;
                continue;
            }
            // SAFETY: a single-segment mbuf holds `len` bytes at `d`; the slice lives until
            // the mbufs are freed below, after the callback returns.
            let frame = unsafe { std::slice::from_raw_parts(d, usize::from(len)) };
            self.counters.rx_packets += 1;
            self.counters.rx_bytes += u64::from(len);
            on_frame(frame);
        }
        if n > 0 {
            // SAFETY: the `n` mbufs are ours and no reference into them survives.
            unsafe { sys::zl_rte_pktmbuf_free_bulk(mbufs.as_mut_ptr(), n as u32) };
        }
        n
    }

    /// [`zl_port::Port::recv`] on this queue: each frame copied into a buffer of `pool`, or
    /// with zero-copy lent to it.
    pub(crate) fn recv_into(&mut self, now: Nanos, pool: &mut BufPool, batch: &mut Batch) -> usize {
        crate::lcore::ensure();
        #[cfg(feature = "zero-copy")]
        if let Some(key) = self.lend {
            return self.recv_lent(key, now, pool, batch);
        }
        let index = self.dev.index;
        let mut tally = RxTally::default();
        self.recv_frames(batch.room(), |frame| {
            tally.copy_in(frame, pool, batch, now, index)
        });
        self.counters.rx_packets -= tally.no_buffer + tally.too_long;
        self.counters.rx_no_buffer += tally.no_buffer;
        self.counters.rx_too_long += tally.too_long;
        tally.added
    }

    /// Zero-copy receive: each single-segment frame that fits a buffer of `pool` is lent to
    /// one (the pool's accounting as for a copy); the rest are freed and counted as
    /// `recv_into` counts them.
    #[cfg(feature = "zero-copy")]
    fn recv_lent(
        &mut self,
        key: &'static LenderKey,
        now: Nanos,
        pool: &mut BufPool,
        batch: &mut Batch,
    ) -> usize {
        let mut mbufs = [ptr::null_mut::<sys::rte_mbuf>(); BURST];
        let mut data = [ptr::null::<u8>(); BURST];
        let mut lens = [0u16; BURST];
        let mut unused = [ptr::null_mut::<sys::rte_mbuf>(); BURST];
        let mut n_unused = 0;
        let want = batch.room().min(BURST) as u16;
        // SAFETY: as in `recv_frames`.
        let n = unsafe {
            sys::zl_rx_burst_frames(
                self.dev.port_id,
                self.queue,
                mbufs.as_mut_ptr(),
                data.as_mut_ptr(),
                lens.as_mut_ptr(),
                want,
            )
        };
        let n = usize::from(n);
        let (mut added, mut bytes) = (0, 0u64);
        for i in 0..n {
            let (m, len) = (mbufs[i], lens[i]);
            // A received mbuf is never null; the check gives the handle its type.
            let handle = NonZeroUsize::new(m as usize);
            let lendable = match handle {
                _ if data[i].is_null() => {
                    self.rx_multi_seg += 1;
                    None
                }
                _ if usize::from(len) > pool.buf_size() => {
                    self.counters.rx_too_long += 1;
                    None
                }
                h => h,
            };
            let Some(handle) = lendable else {
                unused[n_unused] = m;
                n_unused += 1;
                continue;
            };
            // The buffer is filled where it is taken and moved once, into the batch.
            let Some(mut b) = pool.alloc() else {
                self.counters.rx_no_buffer += 1;
                unused[n_unused] = m;
                n_unused += 1;
                continue;
            };
            b.lend(key, handle, u32::from(len));
            b.rx_time = now;
            b.in_port = self.dev.index;
            // The burst asked for no more than the batch's room.
            if batch.push(b).is_ok() {
                added += 1;
                bytes += u64::from(len);
            }
        }
        if n_unused > 0 {
            // SAFETY: these mbufs are ours and were not lent.
            unsafe { sys::zl_rte_pktmbuf_free_bulk(unused.as_mut_ptr(), n_unused as u32) };
        }
        self.counters.rx_packets += added as u64;
        self.counters.rx_bytes += bytes;
        added
    }
}

impl RxHalf for DpdkRxQueue {
    fn name(&self) -> &str {
        &self.dev.name
    }

    fn recv(
        &mut self,
        now: Nanos,
        pool: &mut BufPool,
        batch: &mut Batch,
    ) -> Result<usize, PortError> {
        Ok(self.recv_into(now, pool, batch))
    }

    fn readiness(&self) -> Readiness {
        Readiness::Live
    }

    fn counters(&self) -> PortCounters {
        let mut c = PortCounters::joined(&self.counters, &PortCounters::default());
        c.rx_too_long += self.rx_multi_seg;
        if self.queue == 0 {
            if let Ok(s) = self.dev.eth_stats() {
                c.rx_ring_full += s.imissed;
                c.rx_no_buffer += s.rx_nombuf;
            }
        }
        c
    }
}

/// The transmit side of a DPDK port: copies into mbufs of the port's TX pool, sent on one TX
/// queue.
#[derive(Debug)]
pub struct DpdkTxQueue {
    pub(crate) dev: Arc<Device>,
    pub(crate) queue: u16,
    pub(crate) counters: PortCounters,
}

// SAFETY: as for `DpdkRxQueue`: one thread at a time through `&mut self`, on a queue no other
// half uses; the TX pool is shared with the receiving side only through DPDK's thread-safe
// mempool operations (a copy sent to a looping device comes back on a receive queue and is
// freed there).
unsafe impl Send for DpdkTxQueue {}

impl DpdkTxQueue {
    pub(crate) fn new(dev: Arc<Device>, queue: u16) -> Self {
        DpdkTxQueue {
            dev,
            queue,
            counters: PortCounters::default(),
        }
    }

    #[cfg(feature = "bench")]
    /// Copies frames into fresh mbufs of the TX pool and transmits them, one FFI call per
    /// burst of 32; returns how many the driver took. The rest are counted: `tx_ring_full`
    /// (refused by the driver), `tx_no_buffer` (the pool ran dry) or `tx_errors` (longer than
    /// an mbuf holds).
    pub(crate) fn send_copies<'a>(&mut self, frames: impl IntoIterator<Item = &'a [u8]>) -> usize {
        let mut data = [ptr::null::<u8>(); BURST];
        let mut lens = [0u16; BURST];
        let mut staged = 0usize;
        let mut sent = 0;
        for f in frames {
            if f.len() > usize::from(self.dev.data_room) {
                self.counters.tx_errors += 1;
                continue;
            }
            data[staged] = f.as_ptr();
            lens[staged] = f.len() as u16;
            staged += 1;
            if staged == BURST {
                sent += self.transmit_copies(&data, &lens, staged);
                staged = 0;
            }
        }
        sent + self.transmit_copies(&data, &lens, staged)
    }

    #[cfg(feature = "bench")]
    /// Transmits copies of the first `n` staged frames (each at most `data_room` bytes).
    fn transmit_copies(
        &mut self,
        data: &[*const u8; BURST],
        lens: &[u16; BURST],
        n: usize,
    ) -> usize {
        if n == 0 {
            return 0;
        }
        let (mut no_mbuf, mut ring_full) = (0u16, 0u16);
        // SAFETY: started port, this queue (owned by `self` alone), a valid pool; `data[..n]`
        // point to `lens[..n]` readable bytes each (borrowed from the caller's frames for this
        // call), each length at most the mbuf data room (checked by `send_copies`).
        let sent = usize::from(unsafe {
            sys::zl_tx_burst_copy(
                self.dev.port_id,
                self.queue,
                self.dev.tx_pool,
                data.as_ptr(),
                lens.as_ptr(),
                n as u16,
                &mut no_mbuf,
                &mut ring_full,
            )
        });
        self.counters.tx_packets += sent as u64;
        // The shim sends the mbufs it got in order, so the first `sent` frames went out.
        self.counters.tx_bytes += lens[..sent].iter().map(|&l| u64::from(l)).sum::<u64>();
        self.counters.tx_no_buffer += u64::from(no_mbuf);
        self.counters.tx_ring_full += u64::from(ring_full);
        sent
    }

    /// [`zl_port::Port::send`]: a frame lent by a DPDK RX queue (zero-copy) is sent as it
    /// is, every other one copied out (or counted as dropped); every buffer goes back to
    /// `pool`. One FFI call per burst of 32.
    pub(crate) fn send_batch(&mut self, batch: &mut Batch, pool: &mut BufPool) -> usize {
        crate::lcore::ensure();
        let key = lending();
        let mut lent = [ptr::null_mut::<sys::rte_mbuf>(); BURST];
        let mut data = [ptr::null::<u8>(); BURST];
        let mut lens = [0u16; BURST];
        let mut staged = 0usize;
        let mut sent = 0;
        for b in batch.iter_mut() {
            if let Some((handle, len)) = take_lent(key, b) {
                lent[staged] = handle as *mut sys::rte_mbuf;
                lens[staged] = len as u16;
            } else if b.len() > usize::from(self.dev.data_room) {
                self.counters.tx_errors += 1;
                continue;
            } else {
                lent[staged] = ptr::null_mut();
                data[staged] = b.as_slice().as_ptr();
                lens[staged] = b.len() as u16;
            }
            staged += 1;
            if staged == BURST {
                sent += self.transmit_mixed(&lent, &data, &lens, staged);
                staged = 0;
            }
        }
        sent += self.transmit_mixed(&lent, &data, &lens, staged);
        for b in batch.drain() {
            pool.free(b);
        }
        sent
    }

    /// Transmits the first `n` staged frames: `lent[i]` as it is where set, else a copy of
    /// `data[i]`.
    fn transmit_mixed(
        &mut self,
        lent: &[*mut sys::rte_mbuf; BURST],
        data: &[*const u8; BURST],
        lens: &[u16; BURST],
        n: usize,
    ) -> usize {
        if n == 0 {
            return 0;
        }
        let (mut bytes, mut no_mbuf, mut ring_full) = (0u64, 0u16, 0u16);
        // SAFETY: started port, this queue (owned by `self` alone), a valid pool. Each
        // non-null `lent[i]` is a single-segment received mbuf taken back from its buffer
        // (ours now; the driver or the shim frees it), of at least `lens[i]` bytes; each other
        // `data[i]` points to `lens[i]` readable bytes of a buffer still in the caller's batch,
        // at most the mbuf data room (checked by `send_batch`).
        let sent = usize::from(unsafe {
            sys::zl_tx_burst_mixed(
                self.dev.port_id,
                self.queue,
                self.dev.tx_pool,
                lent.as_ptr(),
                data.as_ptr(),
                lens.as_ptr(),
                n as u16,
                &mut bytes,
                &mut no_mbuf,
                &mut ring_full,
            )
        });
        self.counters.tx_packets += sent as u64;
        self.counters.tx_bytes += bytes;
        self.counters.tx_no_buffer += u64::from(no_mbuf);
        self.counters.tx_ring_full += u64::from(ring_full);
        sent
    }
}

impl TxHalf for DpdkTxQueue {
    fn name(&self) -> &str {
        &self.dev.name
    }

    fn send(
        &mut self,
        _now: Nanos,
        batch: &mut Batch,
        pool: &mut BufPool,
    ) -> Result<usize, PortError> {
        Ok(self.send_batch(batch, pool))
    }

    fn counters(&self) -> PortCounters {
        PortCounters::joined(&PortCounters::default(), &self.counters)
    }
}

/// The key to take lent frames back with, when this process lends (`zero_copy`).
#[cfg(feature = "zero-copy")]
#[inline]
fn lending() -> Option<&'static LenderKey> {
    MbufLender::key_if_lending()
}

/// The mbuf (as an address) and length of a frame lent to `b`, taken back from it.
#[cfg(feature = "zero-copy")]
#[inline]
fn take_lent(key: Option<&'static LenderKey>, b: &mut zl_port::PacketBuf) -> Option<(usize, u32)> {
    let (handle, len) = key.and_then(|k| b.take_lent(k))?;
    Some((handle.get(), len))
}

/// Without the feature `zero-copy` nothing is lent.
#[cfg(not(feature = "zero-copy"))]
#[inline]
fn lending() -> Option<()> {
    None
}

/// Without the feature `zero-copy` no frame is lent.
#[cfg(not(feature = "zero-copy"))]
#[inline]
fn take_lent(_: Option<()>, _: &mut zl_port::PacketBuf) -> Option<(usize, u32)> {
    None
}
