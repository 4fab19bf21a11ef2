//! Zero-copy receive: received mbufs lent to [`zl_port::PacketBuf`]s ([`zl_port::FrameLender`]),
//! so a frame goes from an RX queue to a TX queue without a copy (`zero_copy = true`).
//!
//! A lent frame's handle is its mbuf's address. Only this module makes handles (the
//! [`LenderKey`] is private), and only of single-segment mbufs received on a port's RX queue,
//! whose `data_len` is the length lent; the mbuf is the buffer's alone until it is released
//! (`rte_pktmbuf_free`) or taken back by a DPDK TX queue, which sends it as it is. The pool the
//! mbuf came from outlives it: a device whose RX pools still have mbufs out when it is closed
//! leaves those pools allocated (`Device`'s `Drop`).

use std::num::NonZeroUsize;
use std::sync::OnceLock;

use zl_dpdk_sys as sys;
use zl_port::{register_lender, FrameLender, LenderKey};

/// Reads a lent mbuf's data address from the mbuf itself (`buf_addr + data_off`, two loads),
/// at the offsets the C compiler gave these fields.
pub(crate) struct MbufLender {
    buf_addr_offset: usize,
    data_off_offset: usize,
}

struct Registered {
    key: Option<LenderKey>,
}

static REGISTERED: OnceLock<Registered> = OnceLock::new();

impl MbufLender {
    fn registered() -> &'static Registered {
        REGISTERED.get_or_init(|| {
            let lender: &'static MbufLender = Box::leak(Box::new(MbufLender {
                // SAFETY: no precondition; plain values.
                buf_addr_offset: unsafe { sys::zl_mbuf_buf_addr_offset() },
                // SAFETY: as above.
                data_off_offset: unsafe { sys::zl_mbuf_data_off_offset() },
            }));
            Registered {
                key: register_lender(lender).ok(),
            }
        })
    }

    /// The key to lend mbufs with; `None` when every lender slot was taken before (then
    /// zero-copy ports copy instead).
    pub(crate) fn key() -> Option<&'static LenderKey> {
        Self::registered().key.as_ref()
    }

    /// The key, if mbufs were ever lent in this process (a TX queue looks for lent frames only
    /// then).
    pub(crate) fn key_if_lending() -> Option<&'static LenderKey> {
        REGISTERED.get().and_then(|r| r.key.as_ref())
    }

    /// The data address of lent mbuf `handle`.
    #[inline]
    fn data(&self, handle: NonZeroUsize) -> *mut u8 {
        let m = handle.get() as *const u8;
        // SAFETY: `handle` is the address of a live mbuf lent by this module (see the module
        // doc and `FrameLender`'s contract); the offsets are those of its `buf_addr` (a
        // pointer) and `data_off` (a u16) fields, aligned for their types in the C layout.
        unsafe {
            let buf_addr = m.add(self.buf_addr_offset).cast::<*mut u8>().read();
            let data_off = m.add(self.data_off_offset).cast::<u16>().read();
            buf_addr.add(usize::from(data_off))
        }
    }
}

impl FrameLender for MbufLender {
    #[inline]
    fn bytes(&self, handle: NonZeroUsize, len: usize) -> &[u8] {
        // SAFETY: a lent single-segment mbuf holds at least `len` bytes (its `data_len`) at its
        // data address, and nothing writes them while a shared borrow of the buffer lives (the
        // buffer holds the mbuf alone; `bytes_mut` needs `&mut PacketBuf`). The memory stays
        // allocated until the mbuf is released (its pool outlives it, module doc).
        unsafe { std::slice::from_raw_parts(self.data(handle), len) }
    }

    #[inline]
    fn bytes_mut(&self, handle: NonZeroUsize, len: usize) -> &mut [u8] {
        // SAFETY: as `bytes`; zl-port calls this only while it holds the buffer exclusively,
        // so no other slice of this mbuf's bytes is alive.
        unsafe { std::slice::from_raw_parts_mut(self.data(handle), len) }
    }

    fn release(&self, handle: NonZeroUsize) {
        // SAFETY: the mbuf was lent by this module and comes back once (the contract); it is
        // not read again.
        unsafe { sys::zl_rte_pktmbuf_free(handle.get() as *mut sys::rte_mbuf) };
    }
}
