//! Fixed-capacity packet batches.

use crate::PacketBuf;

/// Packets per batch: one rx or tx burst (DPDK's and BESS's customary 32).
pub const BATCH_CAPACITY: usize = 32;

/// Up to [`BATCH_CAPACITY`] packets. The storage is reserved at creation and never grows, so
/// pushing and draining never allocate.
#[derive(Debug)]
pub struct Batch {
    pkts: Vec<PacketBuf>,
}

impl Default for Batch {
    fn default() -> Self {
        Self::new()
    }
}

impl Batch {
    pub fn new() -> Self {
        Batch {
            pkts: Vec::with_capacity(BATCH_CAPACITY),
        }
    }
    /// Adds a packet, or hands it back when the batch is full.
    #[inline]
    pub fn push(&mut self, pkt: PacketBuf) -> Result<(), PacketBuf> {
        if self.pkts.len() >= BATCH_CAPACITY {
            return Err(pkt);
        }
        self.pkts.push(pkt);
        Ok(())
    }
    #[inline]
    pub fn len(&self) -> usize {
        self.pkts.len()
    }
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.pkts.is_empty()
    }
    #[inline]
    pub fn is_full(&self) -> bool {
        self.pkts.len() >= BATCH_CAPACITY
    }
    /// Free room left.
    #[inline]
    pub fn room(&self) -> usize {
        BATCH_CAPACITY - self.pkts.len()
    }
    /// The packets, in arrival order.
    #[inline]
    pub fn iter(&self) -> core::slice::Iter<'_, PacketBuf> {
        self.pkts.iter()
    }
    #[inline]
    pub fn iter_mut(&mut self) -> core::slice::IterMut<'_, PacketBuf> {
        self.pkts.iter_mut()
    }
    /// Takes every packet out, in arrival order; the batch is empty afterwards.
    #[inline]
    pub fn drain(&mut self) -> std::vec::Drain<'_, PacketBuf> {
        self.pkts.drain(..)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BufPool;

    #[test]
    fn batch_holds_exactly_its_capacity_in_order() {
        let mut pool = BufPool::new(BATCH_CAPACITY + 1, 64);
        let mut batch = Batch::new();
        for i in 0..BATCH_CAPACITY {
            let mut b = pool.alloc().unwrap();
            b.copy_from(&[i as u8]).unwrap();
            batch.push(b).unwrap();
        }
        assert!(batch.is_full());
        let extra = pool.alloc().unwrap();
        let back = batch.push(extra).unwrap_err();
        pool.free(back);
        for (i, b) in batch.drain().enumerate() {
            assert_eq!(b.as_slice(), &[i as u8]);
            pool.free(b);
        }
        assert!(batch.is_empty());
        assert_eq!(pool.available(), BATCH_CAPACITY + 1);
    }
}
