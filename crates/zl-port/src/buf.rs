//! Pool-allocated packet buffers.

use zl_core::Nanos;

/// Data room of a pool buffer: a full 1518-byte Ethernet frame plus 802.1Q / QinQ tags, rounded
/// up to 2 KiB like DPDK's default mbuf data room.
pub const DEFAULT_BUF_SIZE: usize = 2048;

/// One packet: a fixed-size byte buffer owned by a [`BufPool`] and the frame's length in it.
///
/// Moving a `PacketBuf` moves a pointer and a few integers, never the bytes. Buffers are only
/// created by [`BufPool::new`]; a buffer that is dropped instead of being given back shrinks
/// the pool (memory is freed, never leaked, but the pool's count goes down).
#[derive(Debug)]
pub struct PacketBuf {
    data: Box<[u8]>,
    len: u32,
    /// When the packet was received (virtual or monotonic time, as the port's clock).
    pub rx_time: Nanos,
    /// Index of the receiving port in the data plane's port table.
    pub in_port: u16,
    /// Index of the transmitting port, set by forwarding.
    pub out_port: u16,
    /// An opaque label a source may attach for accounting (the traffic generator writes its
    /// flow group's index + 1); 0 when unlabelled. Ports other than sources leave it alone.
    pub tag: u32,
}

/// A frame longer than a buffer's data room.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("frame of {len} bytes does not fit a {capacity}-byte buffer")]
pub struct FrameTooLong {
    pub len: usize,
    pub capacity: usize,
}

impl PacketBuf {
    /// The frame's bytes.
    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        &self.data[..self.len as usize]
    }
    /// The frame's bytes, writable (for in-place header rewrites).
    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.data[..self.len as usize]
    }
    /// The frame length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len as usize
    }
    /// True when the buffer holds no bytes.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The buffer's data room.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.data.len()
    }
    /// Replaces the frame with a copy of `frame`.
    #[inline]
    pub fn copy_from(&mut self, frame: &[u8]) -> Result<(), FrameTooLong> {
        if frame.len() > self.data.len() {
            return Err(FrameTooLong {
                len: frame.len(),
                capacity: self.data.len(),
            });
        }
        self.data[..frame.len()].copy_from_slice(frame);
        self.len = frame.len() as u32;
        Ok(())
    }
    /// The whole data room, for ports that write a frame in place before [`Self::set_len`].
    #[inline]
    pub fn data_room_mut(&mut self) -> &mut [u8] {
        &mut self.data
    }
    /// Sets the frame length after writing into [`Self::data_room_mut`].
    #[inline]
    pub fn set_len(&mut self, len: usize) -> Result<(), FrameTooLong> {
        if len > self.data.len() {
            return Err(FrameTooLong {
                len,
                capacity: self.data.len(),
            });
        }
        self.len = len as u32;
        Ok(())
    }
}

/// A fixed set of packet buffers allocated once; `alloc` and `free` are O(1) and never
/// allocate.
#[derive(Debug)]
pub struct BufPool {
    free: Vec<PacketBuf>,
    total: usize,
    buf_size: usize,
    alloc_failures: u64,
}

impl BufPool {
    /// Allocates `count` buffers of `buf_size` bytes each.
    pub fn new(count: usize, buf_size: usize) -> Self {
        let mut free = Vec::with_capacity(count);
        for _ in 0..count {
            free.push(PacketBuf {
                data: vec![0u8; buf_size].into_boxed_slice(),
                len: 0,
                rx_time: Nanos::ZERO,
                in_port: 0,
                out_port: 0,
                tag: 0,
            });
        }
        BufPool {
            free,
            total: count,
            buf_size,
            alloc_failures: 0,
        }
    }

    /// A pool that holds no buffers yet but takes back up to `count` buffers of `buf_size`
    /// bytes (buffers allocated by other pools, e.g. a transmit side that collects sent
    /// buffers for their owners). Allocates no packet memory.
    pub fn empty(count: usize, buf_size: usize) -> Self {
        BufPool {
            free: Vec::with_capacity(count),
            total: count,
            buf_size,
            alloc_failures: 0,
        }
    }

    /// A free buffer (length 0), or `None` when all are in use; failures are counted.
    #[inline]
    pub fn alloc(&mut self) -> Option<PacketBuf> {
        match self.free.pop() {
            Some(mut b) => {
                b.len = 0;
                b.tag = 0;
                Some(b)
            }
            None => {
                self.alloc_failures += 1;
                None
            }
        }
    }

    /// Gives a buffer back. A buffer of another size, or one beyond the pool's count, is
    /// dropped (freed) rather than pooled, so the pool never grows past what it allocated.
    #[inline]
    pub fn free(&mut self, buf: PacketBuf) {
        if buf.data.len() == self.buf_size && self.free.len() < self.total {
            self.free.push(buf);
        }
    }

    /// Buffers currently free.
    pub fn available(&self) -> usize {
        self.free.len()
    }
    /// Buffers the pool was created with.
    pub fn total(&self) -> usize {
        self.total
    }
    /// Buffers currently handed out.
    pub fn in_use(&self) -> usize {
        self.total - self.free.len()
    }
    /// Data room of each buffer.
    pub fn buf_size(&self) -> usize {
        self.buf_size
    }
    /// Number of `alloc` calls that found the pool empty.
    pub fn alloc_failures(&self) -> u64 {
        self.alloc_failures
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_hands_out_exactly_its_buffers() {
        let mut pool = BufPool::new(3, 64);
        let a = pool.alloc().unwrap();
        let b = pool.alloc().unwrap();
        let c = pool.alloc().unwrap();
        assert!(pool.alloc().is_none());
        assert_eq!(pool.alloc_failures(), 1);
        assert_eq!(pool.in_use(), 3);
        pool.free(a);
        pool.free(b);
        pool.free(c);
        assert_eq!(pool.available(), 3);
        // A foreign buffer does not grow the pool.
        let mut other = BufPool::new(1, 64);
        pool.free(other.alloc().unwrap());
        assert_eq!(pool.available(), 3);
    }

    #[test]
    fn an_empty_pool_takes_back_up_to_its_count() {
        let mut owner = BufPool::new(3, 64);
        let mut collector = BufPool::empty(2, 64);
        assert_eq!((collector.available(), collector.in_use()), (0, 2));
        assert!(collector.alloc().is_none());
        for _ in 0..3 {
            collector.free(owner.alloc().unwrap());
        }
        assert_eq!(collector.available(), 2);
        while let Some(b) = collector.alloc() {
            owner.free(b);
        }
        assert_eq!(owner.available(), 2);
    }

    #[test]
    fn copy_rejects_frames_longer_than_the_data_room() {
        let mut pool = BufPool::new(1, 64);
        let mut b = pool.alloc().unwrap();
        assert_eq!(
            b.copy_from(&[0u8; 65]),
            Err(FrameTooLong {
                len: 65,
                capacity: 64
            })
        );
        b.copy_from(&[7u8; 60]).unwrap();
        assert_eq!(b.len(), 60);
        assert_eq!(b.as_slice()[59], 7);
        assert!(b.set_len(65).is_err());
    }
}
