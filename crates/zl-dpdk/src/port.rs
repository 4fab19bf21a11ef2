//! [`DpdkPort`]: one started ethdev behind [`zl_port::Port`] and [`zl_port::SplitPort`], over
//! `zl-dpdk-sys`: how the [`Device`] its queues share is opened (queues, RSS, mbuf pools).

use std::ffi::CString;
use std::ptr;
use std::sync::Arc;

use zl_core::Nanos;
use zl_dpdk_sys as sys;
use zl_port::{
    Batch, BufPool, Halves, Port, PortCounters, PortError, Readiness, RxHalf, SplitPort, TxHalf,
};

use crate::device::{Device, EthStats, BURST};
use crate::eal::{rte_error_text, Eal};
use crate::queue::{DpdkRxQueue, DpdkTxQueue};
use crate::{DpdkError, DpdkPortConfig};

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
