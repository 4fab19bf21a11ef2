//! Fixed-capacity packet batches.

use crate::buf::BATCH_CAPACITY;
use crate::{BufPool, Nanos, PacketBuf};

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
    /// An empty batch, its room allocated now (`BATCH_CAPACITY` packets).
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
    /// Adds a packet the caller has made room for ([`Batch::room`] before a burst of at most
    /// that many): no full check per packet. Past the capacity the storage grows (a caller's
    /// bug costs an allocation, not a lost packet); debug builds assert the room.
    #[inline]
    pub fn push_within_room(&mut self, pkt: PacketBuf) {
        debug_assert!(self.pkts.len() < BATCH_CAPACITY, "no room in the batch");
        self.pkts.push(pkt);
    }
    /// Packets in the batch.
    #[inline]
    pub fn len(&self) -> usize {
        self.pkts.len()
    }
    /// True when the batch holds no packet.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.pkts.is_empty()
    }
    /// True when no packet fits any more.
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
    /// The packets, in arrival order, mutably.
    #[inline]
    pub fn iter_mut(&mut self) -> core::slice::IterMut<'_, PacketBuf> {
        self.pkts.iter_mut()
    }
    /// Trades storage with `v`: the batch holds what `v` held, `v` what the batch held. The
    /// pool's top of stack and the batches are the only storage traded, and each has room
    /// for a full batch, so a batch still never grows.
    #[inline]
    pub(crate) fn swap_storage(&mut self, v: &mut Vec<PacketBuf>) {
        debug_assert!(v.capacity() >= BATCH_CAPACITY, "storage for a full batch");
        std::mem::swap(&mut self.pkts, v);
    }
    /// Moves the packets of `v` from index `from` on to the end of the batch, in order (the
    /// caller checks the room: [`BufPool::alloc_batch`]).
    #[inline]
    pub(crate) fn take_tail(&mut self, v: &mut Vec<PacketBuf>, from: usize) {
        self.pkts.extend(v.drain(from..));
    }
    /// The storage's room in packets (at least [`BATCH_CAPACITY`] whatever storage it traded).
    #[cfg(test)]
    pub(crate) fn storage_capacity(&self) -> usize {
        self.pkts.capacity()
    }
    /// Drops every packet left, which must all be hollow ([`PacketBuf::take`]n: a buffer
    /// dropped here would be lost to its pool); the batch is empty afterwards. Debug builds
    /// check it.
    #[inline]
    pub fn clear(&mut self) {
        debug_assert!(
            self.pkts.iter().all(PacketBuf::is_hollow),
            "Batch::clear drops only hollow buffers (a pool buffer would be lost)"
        );
        self.pkts.clear();
    }
    /// Drops the hollow buffers ([`PacketBuf::take`]n), keeping the others in their order: a
    /// stage that took some of a burst's packets elsewhere leaves the rest for the next.
    pub fn remove_hollow(&mut self) {
        self.pkts.retain(|p| !p.is_hollow());
    }
    /// The packets, in arrival order, as a slice.
    #[inline]
    pub fn as_slice(&self) -> &[PacketBuf] {
        &self.pkts
    }
    /// The packets, in arrival order, as a mutable slice.
    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [PacketBuf] {
        &mut self.pkts
    }
    /// Takes every packet out, in arrival order; the batch is empty afterwards.
    #[inline]
    pub fn drain(&mut self) -> std::vec::Drain<'_, PacketBuf> {
        self.pkts.drain(..)
    }
}

/// What a receive burst copied into pool buffers came to ([`RxTally::copy_in`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RxTally {
    /// Frames copied into a buffer and pushed on the batch.
    pub added: usize,
    /// Frames dropped because the pool had no free buffer.
    pub no_buffer: u64,
    /// Frames dropped because they do not fit a buffer.
    pub too_long: u64,
}

impl RxTally {
    /// The receive step of a backend whose frames arrive in its own memory (an AF_XDP UMEM, a
    /// DPDK mbuf): copies `frame` into a buffer from `pool`, stamps it with `now` and the
    /// receiving port's `index`, and pushes it on `batch` (whose room the caller keeps). A
    /// frame with no free buffer or too long for one is counted here, not taken.
    #[inline]
    pub fn copy_in(
        &mut self,
        frame: &[u8],
        pool: &mut BufPool,
        batch: &mut Batch,
        now: Nanos,
        index: u16,
    ) {
        let Some(mut buf) = pool.alloc() else {
            self.no_buffer += 1;
            return;
        };
        if buf.copy_from(frame).is_err() {
            self.too_long += 1;
            pool.free(buf);
            return;
        }
        buf.rx_time = now;
        buf.in_port = index;
        match batch.push(buf) {
            Ok(()) => self.added += 1,
            Err(buf) => pool.free(buf),
        }
    }
}

/// A pool's exchanges with a batch, whole bursts at a time: here, above both types, so that
/// the pool's module needs no batch.
impl BufPool {
    /// Hands out `n` buffers at once onto the end of `batch`, each as [`BufPool::alloc`]
    /// hands one out (length 0, no tag), taken from the top of the free stack in one go
    /// instead of `n` pops and pushes; true when it did. Takes none (false) when fewer than
    /// `n` are free or `batch` has room for fewer: the caller then allocates one at a time,
    /// where `alloc` counts each failure. The buffers are those `n` calls of `alloc` would hand out, in no
    /// set order (all free buffers are alike); into an empty batch, the last freed burst comes
    /// by a swap of storage, not by moves.
    #[inline]
    pub fn alloc_batch(&mut self, n: usize, batch: &mut Batch) -> bool {
        let start = batch.len();
        if !self.alloc_batch_to_fill(n, batch) {
            return false;
        }
        for b in batch.iter_mut().skip(start) {
            b.len = 0;
            b.tag = 0;
        }
        true
    }

    /// [`BufPool::alloc_batch`] without the pass that empties each buffer and clears its tag:
    /// for a port that writes the frame ([`PacketBuf::copy_from`] sets the length) and the tag
    /// of every buffer it takes, in its own pass over them (a second pass would cost about 4
    /// instructions per buffer).
    #[inline]
    pub(crate) fn alloc_batch_to_fill(&mut self, n: usize, batch: &mut Batch) -> bool {
        let top = self.recent.len();
        let Some(from) = (self.free.len() + top).checked_sub(n) else {
            return false;
        };
        if n > batch.room() {
            return false;
        }
        if n <= top {
            batch.take_tail(&mut self.recent, top - n);
        } else {
            if batch.is_empty() {
                // The top of the stack becomes the batch's, the batch's empty storage the
                // (empty) top; the rest comes from below.
                batch.swap_storage(&mut self.recent);
                batch.take_tail(&mut self.free, from);
            } else {
                batch.take_tail(&mut self.free, from);
                batch.take_tail(&mut self.recent, 0);
            }
        }
        true
    }

    /// Gives back every buffer of `batch` (empty afterwards), exactly as [`BufPool::free`] on
    /// each in order would. In the usual case (a transmit burst of this pool's own buffers,
    /// none carrying a lent frame, all fitting under the pool's count) they are taken in one
    /// go: the top of the free stack goes below, and the batch's storage becomes the top (the
    /// batch keeps the top's empty storage).
    #[inline]
    pub fn free_batch(&mut self, batch: &mut Batch) {
        self.free_batch_bytes(batch);
    }

    /// [`BufPool::free_batch`], returning the frame bytes the batch held: summed in the pass
    /// that tests the buffers, for a sink's counters (a pass of its own would cost about 3
    /// instructions a packet).
    #[inline]
    pub(crate) fn free_batch_bytes(&mut self, batch: &mut Batch) -> u64 {
        // Every buffer tested, no early exit: a loop without a branch per buffer.
        let room = self.available() + batch.len() <= self.total;
        let (fits, bytes) = batch.iter().fold((room, 0u64), |(fits, bytes), b| {
            (
                fits & (b.data.len() == self.buf_size) & !b.carries_lent(),
                bytes + u64::from(b.len),
            )
        });
        if fits {
            self.free.append(&mut self.recent);
            batch.swap_storage(&mut self.recent);
        } else {
            for b in batch.drain() {
                self.free(b);
            }
        }
        bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::BufPool;

    #[test]
    fn a_packet_taken_in_place_leaves_a_hollow_buffer_clear_drops() {
        let mut pool = BufPool::new(2, 64);
        let mut batch = Batch::new();
        for i in 0..2u8 {
            let mut b = pool.alloc().unwrap();
            b.copy_from(&[i, 7]).unwrap();
            b.tag = u32::from(i) + 1;
            batch.push(b).unwrap();
        }
        let taken: Vec<PacketBuf> = batch.iter_mut().map(PacketBuf::take).collect();
        assert_eq!(taken[1].as_slice(), &[1, 7]);
        assert_eq!(taken[1].tag, 2);
        assert!(batch
            .iter()
            .all(|b| b.is_hollow() && b.as_slice().is_empty()));
        batch.clear();
        assert!(batch.is_empty());
        for b in taken {
            pool.free(b);
        }
        assert_eq!(pool.available(), 2);
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "hollow")]
    fn clear_refuses_a_pool_buffer_in_debug_builds() {
        let mut pool = BufPool::new(1, 64);
        let mut batch = Batch::new();
        batch.push(pool.alloc().unwrap()).unwrap();
        batch.clear();
    }

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

    /// `push_within_room` fills the room `room` reported, in order, as `push` does.
    #[test]
    fn push_within_room_fills_the_room_in_order() {
        let mut pool = BufPool::new(BATCH_CAPACITY, 64);
        let mut batch = Batch::new();
        batch.push(pool.alloc().unwrap()).unwrap();
        let room = batch.room();
        assert_eq!(room, BATCH_CAPACITY - 1);
        for i in 0..room {
            let mut b = pool.alloc().unwrap();
            b.copy_from(&[i as u8]).unwrap();
            batch.push_within_room(b);
        }
        assert!(batch.is_full());
        let got: Vec<u8> = batch.iter().skip(1).map(|b| b.as_slice()[0]).collect();
        assert_eq!(got, (0..room as u8).collect::<Vec<_>>());
        pool.free_batch(&mut batch);
        assert_eq!(pool.available(), BATCH_CAPACITY);
    }

    /// A frame that fits is stamped and batched; one too long for a buffer, or arriving with
    /// the pool empty, is counted and leaves no buffer behind.
    #[test]
    fn rx_tally_copies_in_what_fits_and_counts_the_rest() {
        let mut pool = BufPool::new(2, 64);
        let mut batch = Batch::new();
        let mut t = RxTally::default();
        let now = Nanos(7);
        t.copy_in(&[1; 60], &mut pool, &mut batch, now, 3);
        t.copy_in(&[2; 65], &mut pool, &mut batch, now, 3);
        t.copy_in(&[3; 60], &mut pool, &mut batch, now, 3);
        t.copy_in(&[4; 60], &mut pool, &mut batch, now, 3);
        let want = RxTally {
            added: 2,
            no_buffer: 1,
            too_long: 1,
        };
        assert_eq!(t, want);
        let got: Vec<(u8, Nanos, u16)> = batch
            .iter()
            .map(|b| (b.as_slice()[0], b.rx_time, b.in_port))
            .collect();
        assert_eq!(got, [(1, now, 3), (3, now, 3)]);
        assert_eq!(pool.available(), 0);
    }
}
