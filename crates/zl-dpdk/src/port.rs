//! [`DpdkPort`]: one started ethdev behind [`zl_port::Port`], over `zl-dpdk-sys`.

use std::ffi::CString;
use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering};

use zl_core::Nanos;
use zl_dpdk_sys as sys;
use zl_port::{Batch, BufPool, Port, PortCounters, PortError, Readiness, RxTally, BATCH_CAPACITY};

use crate::eal::{last_rte_error, rte_error_text, Eal};
use crate::{DpdkError, DpdkPortConfig};

/// Frames per `rte_eth_rx_burst` / `rte_eth_tx_burst` call (DPDK's customary 32, the same
/// as a [`Batch`]).
pub(crate) const BURST: usize = BATCH_CAPACITY;

/// The ethdev's own counters (`struct rte_eth_stats`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EthStats {
    pub ipackets: u64,
    pub opackets: u64,
    pub ibytes: u64,
    pub obytes: u64,
    /// RX drops because the RX ring was full (the NIC's "missed").
    pub imissed: u64,
    pub ierrors: u64,
    pub oerrors: u64,
    /// RX mbuf allocation failures.
    pub rx_nombuf: u64,
}

static POOL_SEQ: AtomicU32 = AtomicU32::new(0);

/// A started DPDK ethdev with one RX and one TX queue.
#[derive(Debug)]
pub struct DpdkPort {
    pub(crate) port_id: u16,
    /// The bus device behind the ethdev, removed after close so the device can be opened
    /// (probed) again.
    device_handle: *mut sys::rte_device,
    /// The RX queue's pool: the driver fills these mbufs.
    pub(crate) pool: *mut sys::rte_mempool,
    /// Where transmitted copies come from: its own pool, so a backed-up TX ring cannot take
    /// the mbufs the RX queue needs (and receive buffers are never written by this port).
    pub(crate) tx_pool: *mut sys::rte_mempool,
    /// Bytes an mbuf of either pool holds (`RTE_MBUF_DEFAULT_BUF_SIZE` less the headroom).
    pub(crate) data_room: u16,
    name: String,
    device: String,
    index: u16,
    pub(crate) counters: PortCounters,
    rx_multi_seg: u64,
}

// SAFETY: the port's queues and pool are used only through `&mut self`, i.e. by one thread at
// a time; DPDK allows a queue to move between threads as long as it is not used concurrently.
unsafe impl Send for DpdkPort {}

impl DpdkPort {
    /// Finds or hot-plugs the device, configures one RX and one TX queue and starts it.
    pub fn open(
        eal: &Eal,
        name: &str,
        index: u16,
        cfg: &DpdkPortConfig,
    ) -> Result<Self, DpdkError> {
        cfg.validate()?;
        let _guard = eal.setup.lock().unwrap_or_else(|p| p.into_inner());
        let device = cfg.device.clone();
        let fail = |op: &'static str, reason: String| DpdkError::Port {
            device: device.clone(),
            op,
            reason,
        };
        let port_id = match lookup(cfg.ethdev_name()) {
            Some(id) => id,
            None => {
                let devargs = CString::new(cfg.device.as_str()).map_err(|_| DpdkError::Config {
                    device: device.clone(),
                    reason: "NUL in device".into(),
                })?;
                // SAFETY: devargs is a valid C string for the call; the EAL is initialised.
                let r = unsafe { sys::rte_dev_probe(devargs.as_ptr()) };
                if r < 0 {
                    return Err(DpdkError::NoSuchDevice {
                        device,
                        reason: rte_error_text(-r),
                    });
                }
                lookup(cfg.ethdev_name()).ok_or_else(|| DpdkError::NoSuchDevice {
                    device: device.clone(),
                    reason: "probed, but no ethdev of that name appeared".into(),
                })?
            }
        };

        let mut info = sys::rte_eth_dev_info::default();
        // SAFETY: valid port id and a writable rte_eth_dev_info.
        let r = unsafe { sys::rte_eth_dev_info_get(port_id, &mut info) };
        if r < 0 {
            return Err(fail("rte_eth_dev_info_get", rte_error_text(-r)));
        }
        let pool_name = CString::new(format!(
            "zlr_mp{}_{}",
            port_id,
            POOL_SEQ.fetch_add(1, Ordering::Relaxed)
        ))
        .map_err(|e| fail("mempool name", e.to_string()))?;
        // SAFETY: valid name; sizes checked by `validate`; -1 is SOCKET_ID_ANY.
        let pool = unsafe {
            sys::rte_pktmbuf_pool_create(
                pool_name.as_ptr(),
                cfg.mbufs,
                cfg.mbuf_cache,
                0,
                sys::RTE_MBUF_DEFAULT_BUF_SIZE as u16,
                -1,
            )
        };
        if pool.is_null() {
            return Err(fail("rte_pktmbuf_pool_create", last_rte_error()));
        }
        // Enough for a full TX ring plus a few bursts in flight.
        let tx_mbufs = 2 * u32::from(cfg.tx_descriptors) + 4 * BURST as u32;
        let tx_pool_name = CString::new(format!(
            "zlr_tx{}_{}",
            port_id,
            POOL_SEQ.fetch_add(1, Ordering::Relaxed)
        ))
        .map_err(|e| fail("mempool name", e.to_string()))?;
        // SAFETY: as above; the cache is at most half the pool, as DPDK requires.
        let tx_pool = unsafe {
            sys::rte_pktmbuf_pool_create(
                tx_pool_name.as_ptr(),
                tx_mbufs,
                cfg.mbuf_cache.min(tx_mbufs / 2),
                0,
                sys::RTE_MBUF_DEFAULT_BUF_SIZE as u16,
                -1,
            )
        };
        if tx_pool.is_null() {
            let reason = last_rte_error();
            // SAFETY: the RX pool was created above and nothing uses it yet.
            unsafe { sys::rte_mempool_free(pool) };
            return Err(fail("rte_pktmbuf_pool_create (tx)", reason));
        }
        // From here the pools are owned by `port`, so every early return frees them (Drop).
        let mut port = DpdkPort {
            port_id,
            device_handle: info.device,
            pool,
            tx_pool,
            data_room: (sys::RTE_MBUF_DEFAULT_BUF_SIZE - sys::RTE_PKTMBUF_HEADROOM) as u16,
            name: name.to_owned(),
            device: device.clone(),
            index,
            counters: PortCounters::default(),
            rx_multi_seg: 0,
        };
        let conf = sys::rte_eth_conf::default();
        // SAFETY: `conf` is a zeroed (all-defaults) rte_eth_conf alive for the call.
        let r = unsafe { sys::rte_eth_dev_configure(port_id, 1, 1, &conf) };
        if r < 0 {
            return Err(fail("rte_eth_dev_configure", rte_error_text(-r)));
        }
        // SAFETY: port configured above; the socket id query has no other precondition.
        let socket = unsafe { sys::rte_eth_dev_socket_id(port_id) };
        let socket = if socket < 0 { 0 } else { socket as u32 };
        // SAFETY: queue 0 of a configured port; NULL selects the driver's default rxconf;
        // the pool outlives the queue (freed after stop and close in Drop).
        let r = unsafe {
            sys::rte_eth_rx_queue_setup(
                port_id,
                0,
                cfg.rx_descriptors,
                socket,
                ptr::null(),
                port.pool,
            )
        };
        if r < 0 {
            return Err(fail("rte_eth_rx_queue_setup", rte_error_text(-r)));
        }
        // SAFETY: as above, default txconf.
        let r = unsafe {
            sys::rte_eth_tx_queue_setup(port_id, 0, cfg.tx_descriptors, socket, ptr::null())
        };
        if r < 0 {
            return Err(fail("rte_eth_tx_queue_setup", rte_error_text(-r)));
        }
        // SAFETY: configured port with its queues set up.
        let r = unsafe { sys::rte_eth_dev_start(port_id) };
        if r < 0 {
            return Err(fail("rte_eth_dev_start", rte_error_text(-r)));
        }
        // Promiscuous mode is best effort: virtual devices may not implement it.
        // SAFETY: started port.
        let _ = unsafe { sys::rte_eth_promiscuous_enable(port_id) };
        port.device = device;
        Ok(port)
    }

    pub fn port_id(&self) -> u16 {
        self.port_id
    }

    /// Receives one burst (up to 32) and calls `on_frame` with each single-segment frame.
    /// One FFI call receives the burst and reports every frame; one more frees the mbufs.
    pub(crate) fn recv_frames(&mut self, max: usize, mut on_frame: impl FnMut(&[u8])) -> usize {
        let mut mbufs = [ptr::null_mut::<sys::rte_mbuf>(); BURST];
        let mut data = [ptr::null::<u8>(); BURST];
        let mut lens = [0u16; BURST];
        let want = max.min(BURST) as u16;
        // SAFETY: started port, queue 0; the three arrays have room for `want` entries.
        let n = unsafe {
            sys::zl_rx_burst_frames(
                self.port_id,
                0,
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
            if f.len() > usize::from(self.data_room) {
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
        // SAFETY: started port, queue 0, a valid pool; `data[..n]` point to `lens[..n]`
        // readable bytes each (borrowed from the caller's frames for this call), each length
        // at most the mbuf data room (checked by `send_copies`).
        let sent = usize::from(unsafe {
            sys::zl_tx_burst_copy(
                self.port_id,
                0,
                self.tx_pool,
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

    /// The ethdev's own counters.
    pub fn eth_stats(&self) -> Result<EthStats, DpdkError> {
        let mut s = sys::rte_eth_stats::default();
        // SAFETY: `s` is a writable rte_eth_stats; valid port id.
        let r = unsafe { sys::rte_eth_stats_get(self.port_id, &mut s) };
        if r < 0 {
            return Err(DpdkError::Port {
                device: self.device.clone(),
                op: "rte_eth_stats_get",
                reason: rte_error_text(-r),
            });
        }
        Ok(EthStats {
            ipackets: s.ipackets,
            opackets: s.opackets,
            ibytes: s.ibytes,
            obytes: s.obytes,
            imissed: s.imissed,
            ierrors: s.ierrors,
            oerrors: s.oerrors,
            rx_nombuf: s.rx_nombuf,
        })
    }
}

impl Drop for DpdkPort {
    fn drop(&mut self) {
        // SAFETY: stop and close release the queues (and with them every mbuf the driver
        // held) before the pools they draw from are freed; the port id is ours. Removing the
        // bus device afterwards is DPDK's hot-unplug sequence; the handle came from
        // rte_eth_dev_info_get on this port and nothing else uses it.
        unsafe {
            sys::rte_eth_dev_stop(self.port_id);
            sys::rte_eth_dev_close(self.port_id);
            if !self.device_handle.is_null() {
                sys::rte_dev_remove(self.device_handle);
            }
            sys::rte_mempool_free(self.pool);
            sys::rte_mempool_free(self.tx_pool);
        }
    }
}

fn lookup(ethdev: &str) -> Option<u16> {
    let c = CString::new(ethdev).ok()?;
    let mut id = 0u16;
    // SAFETY: valid C string and a writable u16.
    let r = unsafe { sys::rte_eth_dev_get_port_by_name(c.as_ptr(), &mut id) };
    (r == 0).then_some(id)
}

impl Port for DpdkPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn recv(
        &mut self,
        now: Nanos,
        pool: &mut BufPool,
        batch: &mut Batch,
    ) -> Result<usize, PortError> {
        let index = self.index;
        let mut tally = RxTally::default();
        self.recv_frames(batch.room(), |frame| {
            tally.copy_in(frame, pool, batch, now, index)
        });
        self.counters.rx_packets -= tally.no_buffer + tally.too_long;
        self.counters.rx_no_buffer += tally.no_buffer;
        self.counters.rx_too_long += tally.too_long;
        Ok(tally.added)
    }

    fn send(
        &mut self,
        _now: Nanos,
        batch: &mut Batch,
        pool: &mut BufPool,
    ) -> Result<usize, PortError> {
        let sent = self.send_copies(batch.iter().map(|b| b.as_slice()));
        for b in batch.drain() {
            pool.free(b);
        }
        Ok(sent)
    }

    fn readiness(&self) -> Readiness {
        Readiness::Live
    }

    fn counters(&self) -> PortCounters {
        let mut c = self.counters;
        c.rx_too_long += self.rx_multi_seg;
        if let Ok(s) = self.eth_stats() {
            c.rx_ring_full += s.imissed;
            c.rx_no_buffer += s.rx_nombuf;
        }
        c
    }
}

/// Interim (issue 14): the port's two queues shared behind one lock per burst
/// ([`zl_port::split_locked`]) until the DPDK halves (RX queues vs TX queue) land.
impl zl_port::SplitPort for DpdkPort {
    fn split(self: Box<Self>) -> zl_port::Halves {
        zl_port::split_locked(*self)
    }
}
