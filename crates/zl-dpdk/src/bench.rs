//! Benchmark and test helpers on [`DpdkPort`] (feature `bench`): frame-level receive and
//! transmit without the data plane's buffers, testpmd-style forwarding with no copy, the
//! pools' fill levels, and prefilled `net_null` frames. The router does not use them; the
//! examples and the vdev tests do.

use std::ptr;

use zl_dpdk_sys as sys;

use crate::device::BURST;
use crate::port::DpdkPort;

impl DpdkPort {
    /// Receives one burst (up to `max`, at most 32) and calls `on_frame` with each
    /// single-segment frame, without the data plane's buffers (what [`zl_port::Port::recv`]
    /// does before it copies).
    /// Receive queue 0 only.
    pub fn recv_with(&mut self, max: usize, on_frame: impl FnMut(&[u8])) -> usize {
        self.rx[0].recv_frames(max, on_frame)
    }

    /// Copies frames into fresh mbufs of the TX pool and transmits them, one FFI call per
    /// burst of 32; returns how many the driver took. The rest are counted: `tx_ring_full`
    /// (refused by the driver), `tx_no_buffer` (the pool ran dry) or `tx_errors` (longer than
    /// an mbuf holds).
    pub fn send_frames<'a>(&mut self, frames: impl IntoIterator<Item = &'a [u8]>) -> usize {
        self.tx.send_copies(frames)
    }

    /// Transmits the first `n` mbufs; frees and counts what the driver does not take.
    fn flush(&mut self, mbufs: &mut [*mut sys::rte_mbuf; BURST], n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        // SAFETY: the first `n` entries are valid mbufs we own; the driver takes ownership of
        // the first `sent`.
        let sent = usize::from(unsafe {
            sys::zl_rte_eth_tx_burst(
                self.tx.dev.port_id,
                self.tx.queue,
                mbufs.as_mut_ptr(),
                n as u16,
            )
        });
        self.tx.counters.tx_packets += sent as u64;
        if sent < n {
            self.tx.counters.tx_ring_full += (n - sent) as u64;
            // SAFETY: the unsent mbufs are still ours.
            unsafe { sys::zl_rte_pktmbuf_free_bulk(mbufs[sent..].as_mut_ptr(), (n - sent) as u32) };
        }
        sent
    }

    /// Moves one burst from this port's RX queue 0 to `out`'s TX queue without copying (the
    /// same work as testpmd's io forwarding mode). Returns the frames transmitted.
    pub fn forward_to(&mut self, out: &mut DpdkPort) -> usize {
        let mut mbufs = [ptr::null_mut::<sys::rte_mbuf>(); BURST];
        let rx = &mut self.rx[0];
        // SAFETY: started port, a queue this port owns, room for BURST pointers.
        let n = unsafe {
            sys::zl_rte_eth_rx_burst(rx.dev.port_id, rx.queue, mbufs.as_mut_ptr(), BURST as u16)
        };
        if n == 0 {
            return 0;
        }
        rx.counters.rx_packets += u64::from(n);
        out.flush(&mut mbufs, usize::from(n))
    }

    /// Mbufs currently free in the pool of the port's RX queue 0.
    pub fn pool_available(&self) -> u32 {
        // SAFETY: the pool is valid for the port's lifetime.
        unsafe { sys::rte_mempool_avail_count(self.rx[0].pool) }
    }

    /// Mbufs currently free in the port's TX pool.
    pub fn tx_pool_available(&self) -> u32 {
        // SAFETY: the pool is valid for the port's lifetime.
        unsafe { sys::rte_mempool_avail_count(self.tx.dev.tx_pool) }
    }

    /// Writes `frames` (cycling through them) into every free mbuf of the RX pools, for
    /// benchmarks on `net_null`, whose receive hands out pool mbufs without writing them:
    /// its frames then carry this content instead of zeros. Frames longer than an mbuf are
    /// cut. Returns the mbufs written (of all the queues' pools).
    pub fn prefill_rx_pool(&mut self, frames: &[&[u8]]) -> usize {
        if frames.is_empty() {
            return 0;
        }
        let data_room = usize::from(self.tx.dev.data_room);
        let pools: Vec<_> = self.rx.iter().map(|q| q.pool).collect();
        pools
            .into_iter()
            .map(|pool| prefill(pool, data_room, frames))
            .sum()
    }
}

/// Writes `frames`, cycling, into every free mbuf of `pool`.
fn prefill(pool: *mut sys::rte_mempool, data_room: usize, frames: &[&[u8]]) -> usize {
    let mut taken = Vec::new();
    loop {
        // SAFETY: the pool is valid for the port's lifetime (the caller holds the port).
        let m = unsafe { sys::zl_rte_pktmbuf_alloc(pool) };
        if m.is_null() {
            break;
        }
        let f = frames[taken.len() % frames.len()];
        let len = f.len().min(data_room);
        // SAFETY: a fresh mbuf's data room starts at `mtod` and holds `data_room` bytes.
        unsafe {
            let dst = sys::zl_rte_pktmbuf_mtod(m).cast::<u8>();
            ptr::copy_nonoverlapping(f.as_ptr(), dst, len);
        }
        taken.push(m);
    }
    for chunk in taken.chunks_mut(BURST) {
        // SAFETY: every mbuf was allocated above and is ours.
        unsafe { sys::zl_rte_pktmbuf_free_bulk(chunk.as_mut_ptr(), chunk.len() as u32) };
    }
    taken.len()
}
