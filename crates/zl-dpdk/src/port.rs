//! [`DpdkPort`]: one started ethdev behind [`zl_port::Port`] and [`zl_port::SplitPort`], over
//! `zl-dpdk-sys`: how the device is opened (queues, RSS, mbuf pools) and the [`Device`] its
//! queues share.

use std::ffi::CString;
use std::ptr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use zl_core::Nanos;
use zl_dpdk_sys as sys;
use zl_port::{
    Batch, BufPool, Halves, Port, PortCounters, PortError, Readiness, RxHalf, SplitPort, TxHalf,
    BATCH_CAPACITY,
};

use crate::eal::{last_rte_error, rte_error_text, Eal};
use crate::queue::{DpdkRxQueue, DpdkTxQueue};
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

/// The opened ethdev and its mbuf pools, shared (`Arc`) by the port's queues: stopped, closed
/// and removed, and its pools freed, when the last queue is dropped, whichever thread owns it.
#[derive(Debug)]
pub(crate) struct Device {
    pub(crate) port_id: u16,
    /// The bus device behind the ethdev, removed after close so the device can be opened
    /// (probed) again.
    device_handle: *mut sys::rte_device,
    /// One pool per receive queue: the driver fills these mbufs.
    pub(crate) rx_pools: Vec<*mut sys::rte_mempool>,
    /// Where transmitted copies come from: its own pool, so a backed-up TX ring cannot take
    /// the mbufs the RX queues need (and receive buffers are never written by this port).
    pub(crate) tx_pool: *mut sys::rte_mempool,
    /// Bytes an mbuf of any of the pools holds (`RTE_MBUF_DEFAULT_BUF_SIZE` less the headroom).
    pub(crate) data_room: u16,
    pub(crate) name: String,
    pub(crate) device: String,
    pub(crate) index: u16,
    /// RX mbufs are lent to the data plane (`zero_copy`).
    pub(crate) zero_copy: bool,
}

// SAFETY: nothing in a `Device` is written after `DpdkPort::open` returns. Its queues use the
// port id only for their own queue (DPDK allows different threads on different queues of one
// port without locks), the pools only through DPDK's mempool operations, which are safe from
// several threads (the default multi-producer / multi-consumer ring; threads that are not EAL
// lcores use no per-lcore cache), and `rte_eth_stats_get`, which reads the counters. The
// teardown in `Drop` runs once, when the last queue holding the `Arc` is gone.
unsafe impl Send for Device {}
// SAFETY: as for `Send`: shared references only read the fields and call the thread-safe
// functions named there.
unsafe impl Sync for Device {}

impl Device {
    /// The ethdev's own counters.
    pub(crate) fn eth_stats(&self) -> Result<EthStats, DpdkError> {
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

    /// Creates a packet mbuf pool of `n` mbufs on `socket`, freed with the device.
    fn add_pool(
        &mut self,
        n: u32,
        cache: u32,
        socket: i32,
    ) -> Result<*mut sys::rte_mempool, String> {
        let name = CString::new(format!(
            "zlr_mp{}",
            POOL_SEQ.fetch_add(1, Ordering::Relaxed)
        ))
        .map_err(|e| e.to_string())?;
        // SAFETY: a valid, unique name; the cache is at most half the pool and 512 (checked
        // by `DpdkPortConfig::validate` and by the caller for the TX pool), as DPDK requires.
        let pool = unsafe {
            sys::rte_pktmbuf_pool_create(
                name.as_ptr(),
                n,
                cache,
                0,
                sys::RTE_MBUF_DEFAULT_BUF_SIZE as u16,
                socket,
            )
        };
        if pool.is_null() {
            return Err(last_rte_error());
        }
        Ok(pool)
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        // SAFETY: stop and close release the queues (and with them every mbuf the driver
        // held) before the pools they draw from are freed; the port id is ours and no queue
        // is left to use it (the last `Arc` is going). Removing the bus device afterwards is
        // DPDK's hot-unplug sequence; the handle came from rte_eth_dev_info_get on this port
        // and nothing else uses it. rte_mempool_free of NULL (a TX pool not yet created) does
        // nothing. With zero-copy, mbufs of the RX pools may still be lent to buffers (or sit
        // in another port's TX ring): a pool with mbufs out is left allocated, so they stay
        // valid (decided: a leak at close, not a use after free; mbufs in the main lcore's
        // mempool cache count as out too).
        unsafe {
            sys::rte_eth_dev_stop(self.port_id);
            sys::rte_eth_dev_close(self.port_id);
            if !self.device_handle.is_null() {
                sys::rte_dev_remove(self.device_handle);
            }
            for &pool in &self.rx_pools {
                if !self.zero_copy || sys::rte_mempool_in_use_count(pool) == 0 {
                    sys::rte_mempool_free(pool);
                }
            }
            if !self.zero_copy || sys::rte_mempool_in_use_count(self.tx_pool) == 0 {
                sys::rte_mempool_free(self.tx_pool);
            }
        }
    }
}

/// The RSS hash functions for `queues` receive queues on a device that can hash `offered`
/// (its `flow_type_rss_offloads`) when `wanted` are asked for: those the device does, or
/// `None` (no RSS; every queue is still set up) for one queue or a device that does none of
/// them (`net_null`, `net_ring`).
pub(crate) fn rss_hash_functions(queues: u16, wanted: u64, offered: u64) -> Option<u64> {
    let hf = wanted & offered;
    (queues > 1 && hf != 0).then_some(hf)
}

/// The NUMA socket for the port's queues and pools: the device's, or where the device does not
/// say (virtual devices), the calling thread's (`SOCKET_ID_ANY`, -1, when that is unknown too).
fn queue_socket(port_id: u16) -> i32 {
    // SAFETY: valid port id; no other precondition.
    let socket = unsafe { sys::rte_eth_dev_socket_id(port_id) };
    if socket >= 0 {
        return socket;
    }
    // SAFETY: no precondition; a thread that is not an EAL lcore gets SOCKET_ID_ANY.
    let own = unsafe { sys::rte_socket_id() };
    // SOCKET_ID_ANY is (unsigned)-1: the cast gives back -1.
    own as i32
}

/// A started DPDK ethdev with `queues` RX queues (each with its own mbuf pool) and as many
/// TX queues. As a [`Port`] its receive queues take turns; [`SplitPort::split`] gives each
/// receive queue ([`DpdkRxQueue`]) and the transmit side ([`DpdkTxQueue`]) to its own thread.
#[derive(Debug)]
pub struct DpdkPort {
    pub(crate) rx: Vec<DpdkRxQueue>,
    pub(crate) tx: DpdkTxQueue,
    /// The receive queue the next `recv` starts at.
    next: usize,
}

impl DpdkPort {
    /// Finds or hot-plugs the device, configures `cfg.queues` RX and TX queues (RSS over the
    /// RX queues where the device does it) and starts it.
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
        // From here the device is owned by `dev`, so every early return closes it and frees
        // the pools made so far (Drop).
        let mut dev = Device {
            port_id,
            device_handle: info.device,
            rx_pools: Vec::with_capacity(usize::from(cfg.queues)),
            tx_pool: ptr::null_mut(),
            data_room: (sys::RTE_MBUF_DEFAULT_BUF_SIZE - sys::RTE_PKTMBUF_HEADROOM) as u16,
            name: name.to_owned(),
            device: device.clone(),
            index,
            zero_copy: cfg.zero_copy,
        };
        if cfg.queues > info.max_rx_queues || cfg.queues > info.max_tx_queues {
            return Err(DpdkError::Config {
                device,
                reason: format!(
                    "queues {}: the device has at most {} receive and {} transmit queues",
                    cfg.queues, info.max_rx_queues, info.max_tx_queues
                ),
            });
        }
        let socket = queue_socket(port_id);
        for _ in 0..cfg.queues {
            let pool = dev
                .add_pool(cfg.mbufs, cfg.mbuf_cache, socket)
                .map_err(|e| fail("rte_pktmbuf_pool_create", e))?;
            dev.rx_pools.push(pool);
        }
        // Enough for full TX rings plus a few bursts in flight.
        let tx_mbufs = u32::from(cfg.queues) * 2 * u32::from(cfg.tx_descriptors) + 4 * BURST as u32;
        dev.tx_pool = dev
            .add_pool(tx_mbufs, cfg.mbuf_cache.min(tx_mbufs / 2), socket)
            .map_err(|e| fail("rte_pktmbuf_pool_create (tx)", e))?;

        let mut conf = sys::rte_eth_conf::default();
        // SAFETY: a plain value from the shim.
        let wanted = unsafe { sys::zl_rss_hf_ip_tcp_udp() };
        if let Some(hf) = rss_hash_functions(cfg.queues, wanted, info.flow_type_rss_offloads) {
            conf.rxmode.mq_mode = sys::rte_eth_rx_mq_mode_RTE_ETH_MQ_RX_RSS;
            // A null key: the driver's default.
            conf.rx_adv_conf.rss_conf.rss_hf = hf;
        }
        // SAFETY: `conf` is an rte_eth_conf (defaults plus RSS) alive for the call.
        let r = unsafe { sys::rte_eth_dev_configure(port_id, cfg.queues, cfg.queues, &conf) };
        if r < 0 {
            return Err(fail("rte_eth_dev_configure", rte_error_text(-r)));
        }
        for (q, &pool) in (0..cfg.queues).zip(&dev.rx_pools) {
            // SAFETY: queue q of a configured port; NULL selects the driver's default rxconf;
            // the pool outlives the queue (freed after stop and close in Drop). The socket is
            // (unsigned) SOCKET_ID_ANY or a real socket.
            let r = unsafe {
                sys::rte_eth_rx_queue_setup(
                    port_id,
                    q,
                    cfg.rx_descriptors,
                    socket as u32,
                    ptr::null(),
                    pool,
                )
            };
            if r < 0 {
                return Err(fail("rte_eth_rx_queue_setup", rte_error_text(-r)));
            }
            // SAFETY: as above, default txconf.
            let r = unsafe {
                sys::rte_eth_tx_queue_setup(
                    port_id,
                    q,
                    cfg.tx_descriptors,
                    socket as u32,
                    ptr::null(),
                )
            };
            if r < 0 {
                return Err(fail("rte_eth_tx_queue_setup", rte_error_text(-r)));
            }
        }
        // SAFETY: configured port with its queues set up.
        let r = unsafe { sys::rte_eth_dev_start(port_id) };
        if r < 0 {
            return Err(fail("rte_eth_dev_start", rte_error_text(-r)));
        }
        // Promiscuous mode is best effort: virtual devices may not implement it.
        // SAFETY: started port.
        let _ = unsafe { sys::rte_eth_promiscuous_enable(port_id) };
        let dev = Arc::new(dev);
        let rx = (0..cfg.queues)
            .map(|q| DpdkRxQueue::new(dev.clone(), q, cfg.zero_copy))
            .collect();
        Ok(DpdkPort {
            rx,
            tx: DpdkTxQueue::new(dev, 0),
            next: 0,
        })
    }

    pub fn port_id(&self) -> u16 {
        self.tx.dev.port_id
    }

    /// The receive queues (`queues` in the config).
    pub fn queues(&self) -> usize {
        self.rx.len()
    }

    /// The ethdev's own counters.
    pub fn eth_stats(&self) -> Result<EthStats, DpdkError> {
        self.tx.dev.eth_stats()
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
        &self.tx.dev.name
    }

    /// Every receive queue in turn, from the one after last call's first, while the batch
    /// has room (as [`zl_port::Joined`] over the halves).
    fn recv(
        &mut self,
        now: Nanos,
        pool: &mut BufPool,
        batch: &mut Batch,
    ) -> Result<usize, PortError> {
        let n = self.rx.len();
        let first = self.next;
        self.next = if first + 1 >= n { 0 } else { first + 1 };
        let mut got = 0;
        for i in 0..n {
            if batch.is_full() {
                break;
            }
            got += self.rx[(first + i) % n].recv_into(now, pool, batch);
        }
        Ok(got)
    }

    fn send(
        &mut self,
        _now: Nanos,
        batch: &mut Batch,
        pool: &mut BufPool,
    ) -> Result<usize, PortError> {
        Ok(self.tx.send_batch(batch, pool))
    }

    fn readiness(&self) -> Readiness {
        Readiness::Live
    }

    fn counters(&self) -> PortCounters {
        let mut rx = PortCounters::default();
        for q in &self.rx {
            rx.add_rx(&RxHalf::counters(q));
        }
        PortCounters::joined(&rx, &TxHalf::counters(&self.tx))
    }
}

/// Each receive queue its own receive half, the transmit queue the transmit half: no lock
/// between them (DPDK allows different threads on different queues of one port). The device
/// stays open until the last half is dropped.
impl SplitPort for DpdkPort {
    fn split(self: Box<Self>) -> Halves {
        let DpdkPort { rx, tx, .. } = *self;
        Halves {
            rx: rx
                .into_iter()
                .map(|q| Box::new(q) as Box<dyn RxHalf>)
                .collect(),
            tx: Box::new(tx),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rss_asks_for_what_the_device_hashes_and_only_over_several_queues() {
        let (ip, tcp, udp) = (1 << 2, 1 << 4, 1 << 3);
        let wanted = ip | tcp | udp;
        assert_eq!(
            rss_hash_functions(4, wanted, ip | udp | 1 << 40),
            Some(ip | udp)
        );
        assert_eq!(
            rss_hash_functions(4, wanted, 1 << 40),
            None,
            "no common hash"
        );
        assert_eq!(rss_hash_functions(4, wanted, 0), None, "net_null, net_ring");
        assert_eq!(rss_hash_functions(1, wanted, wanted), None, "one queue");
    }
}
