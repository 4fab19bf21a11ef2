//! [`Device`]: an opened ethdev with its mbuf pools, the one thing a port's queues share,
//! torn down when the last of them is dropped; and the burst size every queue uses. Below both
//! the port (which opens the device) and its queues (which receive and send on it).

use std::ffi::CString;
use std::sync::atomic::{AtomicU32, Ordering};

use zl_dpdk_sys as sys;
use zl_port::BATCH_CAPACITY;

use crate::eal::{last_rte_error, rte_error_text};
use crate::DpdkError;

/// Frames per `rte_eth_rx_burst` / `rte_eth_tx_burst` call (DPDK's customary 32, the same
/// as a [`zl_port::Batch`]).
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
    pub(crate) device_handle: *mut sys::rte_device,
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
    pub(crate) fn add_pool(
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
