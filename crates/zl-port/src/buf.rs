//! Pool-allocated packet buffers, and frames lent to them by a port (zero-copy receive).

#[cfg(feature = "lend")]
use std::num::NonZeroUsize;
#[cfg(feature = "lend")]
use std::sync::OnceLock;

use zl_core::Nanos;

/// Data room of a pool buffer: a full 1518-byte Ethernet frame plus 802.1Q / QinQ tags, rounded
/// up to 2 KiB like DPDK's default mbuf data room.
pub const DEFAULT_BUF_SIZE: usize = 2048;

/// Packets per batch: one rx or tx burst (DPDK's and BESS's customary 32). Defined with the
/// pool, whose top of stack is one batch's storage and trades places with a batch's
/// (`BufPool::alloc_batch`, `BufPool::free_batch` in `batch.rs`).
pub const BATCH_CAPACITY: usize = 32;

/// One packet: a fixed-size byte buffer owned by a [`BufPool`] and the frame's length in it.
///
/// Moving a `PacketBuf` moves a pointer and a few integers, never the bytes. Buffers are only
/// created by [`BufPool::new`]; a buffer that is dropped instead of being given back shrinks
/// the pool (memory is freed, never leaked, but the pool's count goes down).
///
/// With the feature `lend` (turned on by `zl-dpdk`'s `dpdk`), a buffer may instead carry a
/// frame lent by a port ([`FrameLender`], [`PacketBuf::lend`]):
/// its bytes are then the lender's (a DPDK mbuf), no copy is made, and the buffer's own data
/// room waits unused until the frame goes back to its lender, when the buffer is freed to a
/// pool, dropped, or its frame replaced ([`PacketBuf::copy_from`]) or taken back
/// ([`PacketBuf::take_lent`], a transmitting port sending the lender's frame as it is). The
/// pool's accounting is the same either way: a lent frame still holds one pool buffer.
#[derive(Debug)]
pub struct PacketBuf {
    pub(crate) data: Box<[u8]>,
    pub(crate) len: u32,
    /// The handle of the lent frame this buffer carries instead of its own bytes, if any.
    #[cfg(feature = "lend")]
    lent: Option<NonZeroUsize>,
    /// Its lender's slot (with `lent`; apart from it so the buffer stays 48 bytes).
    #[cfg(feature = "lend")]
    lender: u8,
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

/// Copies `src` into `dst` (of the same length). A frame of 32 to 64 octets (the minimum
/// frame, ACKs, most control traffic) as two fixed 32-octet copies that overlap in the middle,
/// which compile to a few vector moves in line; any other length through `copy_from_slice`
/// (a `memcpy` call, which cost a 64-octet frame about 15 instructions with the call).
#[inline(always)]
fn copy_frame(dst: &mut [u8], src: &[u8]) {
    let n = src.len();
    match (
        dst.split_first_chunk_mut::<32>(),
        src.split_first_chunk::<32>(),
    ) {
        (Some((d_head, _)), Some((s_head, _))) if n <= 64 => {
            *d_head = *s_head;
            if let (Some((_, d_tail)), Some((_, s_tail))) = (
                dst.split_last_chunk_mut::<32>(),
                src.split_last_chunk::<32>(),
            ) {
                *d_tail = *s_tail;
            }
        }
        _ => dst.copy_from_slice(src),
    }
}

/// A frame longer than a buffer's data room.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("frame of {len} bytes does not fit a {capacity}-byte buffer")]
pub struct FrameTooLong {
    pub len: usize,
    pub capacity: usize,
}

#[cfg(feature = "lend")]
/// Where a port lends frames from (DPDK's receive mbufs): registered once
/// ([`register_lender`]), then named by the [`LenderKey`] its registration returned.
///
/// Contract for implementors: zl-port calls these only with a handle given to
/// [`PacketBuf::lend`] with this lender's key and not yet released or taken back, and the
/// `len` lent with it (never more); `bytes_mut` only while it holds the buffer exclusively
/// (`&mut PacketBuf`), so the slices it returns never overlap a live mutable one. An
/// implementation may rely on this only if no other code can name its handles: keep the
/// key private (it is the only way to lend).
pub trait FrameLender: Sync {
    /// The `len` bytes of frame `handle`.
    fn bytes(&self, handle: NonZeroUsize, len: usize) -> &[u8];
    /// The `len` bytes of frame `handle`, writable.
    #[allow(clippy::mut_from_ref)]
    fn bytes_mut(&self, handle: NonZeroUsize, len: usize) -> &mut [u8];
    /// Frame `handle` goes back to the lender; its bytes are not read again.
    fn release(&self, handle: NonZeroUsize);
}

/// The registered lenders; a lent buffer names one by its index.
#[cfg(feature = "lend")]
const MAX_LENDERS: usize = 4;
#[cfg(feature = "lend")]
static LENDERS: [OnceLock<&'static dyn FrameLender>; MAX_LENDERS] =
    [const { OnceLock::new() }; MAX_LENDERS];

#[cfg(feature = "lend")]
/// The proof of a registration: lends frames ([`PacketBuf::lend`]) and takes them back
/// ([`PacketBuf::take_lent`]). Only [`register_lender`] makes one.
#[derive(Debug)]
pub struct LenderKey {
    index: u8,
}

#[cfg(feature = "lend")]
/// Every lender slot is taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("all {MAX_LENDERS} frame-lender slots are registered")]
pub struct LendersFull;

#[cfg(feature = "lend")]
/// Registers `lender` (once per lender and process; the slots are never freed).
pub fn register_lender(lender: &'static dyn FrameLender) -> Result<LenderKey, LendersFull> {
    for (i, slot) in LENDERS.iter().enumerate() {
        let mut won = false;
        slot.get_or_init(|| {
            won = true;
            lender
        });
        if won {
            return Ok(LenderKey { index: i as u8 });
        }
    }
    Err(LendersFull)
}

#[cfg(feature = "lend")]
/// The lender in `slot`.
#[inline]
fn lender(slot: u8) -> &'static dyn FrameLender {
    // Only `lend` sets a slot, with a key whose registration filled it.
    *LENDERS[usize::from(slot)]
        .get()
        .expect("a lent frame's lender is registered")
}

#[cfg(feature = "lend")]
impl Drop for PacketBuf {
    fn drop(&mut self) {
        self.release_lent();
    }
}

impl PacketBuf {
    /// A buffer of no room and no frame (no allocation), every other field zero: a new pool
    /// buffer's every field but its room. ([`PacketBuf::take`] leaves a buffer as hollow, but
    /// writes only its room and length over.)
    #[inline]
    fn hollow() -> Self {
        PacketBuf {
            data: Box::default(),
            len: 0,
            #[cfg(feature = "lend")]
            lent: None,
            #[cfg(feature = "lend")]
            lender: 0,
            rx_time: Nanos::ZERO,
            in_port: 0,
            out_port: 0,
            tag: 0,
        }
    }
    /// Moves the packet out, leaving a hollow buffer (no room, no frame, nothing allocated;
    /// its stamps and ports as they were) in its place: for a caller that works on a packet
    /// where it lies in a batch and moves it out only where it goes (a queue), [`Batch::clear`]
    /// dropping the hollow ones. Only the room and the length are written over (a whole hollow
    /// buffer written in costs about 10 instructions per packet more in the pipeline bench).
    ///
    /// [`Batch::clear`]: crate::Batch::clear
    #[inline]
    pub fn take(&mut self) -> PacketBuf {
        let taken = PacketBuf {
            data: std::mem::take(&mut self.data),
            ..*self
        };
        self.len = 0;
        #[cfg(feature = "lend")]
        {
            self.lent = None;
        }
        taken
    }
    /// Whether the buffer is hollow (what [`PacketBuf::take`] leaves): no room and no lent
    /// frame, so dropping it loses nothing.
    #[inline]
    pub fn is_hollow(&self) -> bool {
        self.data.is_empty() && !self.carries_lent()
    }
    /// The frame's bytes.
    #[inline]
    pub fn as_slice(&self) -> &[u8] {
        #[cfg(feature = "lend")]
        if let Some(h) = self.lent {
            return self.lent_bytes(h);
        }
        &self.data[..self.len as usize]
    }
    // The lent paths out of line and cold, so the buffer's own bytes stay the inlined,
    // straight path (callgrind, benches/pipeline, which lends nothing: +115 instructions per
    // packet over the build without `lend` with them inlined, +92 out of line).
    #[cfg(feature = "lend")]
    #[cold]
    #[inline(never)]
    fn lent_bytes(&self, h: NonZeroUsize) -> &[u8] {
        lender(self.lender).bytes(h, self.len as usize)
    }
    #[cfg(feature = "lend")]
    #[cold]
    #[inline(never)]
    fn lent_bytes_mut(&mut self, h: NonZeroUsize) -> &mut [u8] {
        lender(self.lender).bytes_mut(h, self.len as usize)
    }
    /// The frame's bytes, writable (for in-place header rewrites).
    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        #[cfg(feature = "lend")]
        if let Some(h) = self.lent {
            return self.lent_bytes_mut(h);
        }
        &mut self.data[..self.len as usize]
    }
    #[cfg(feature = "lend")]
    /// Carries the lender's frame `handle` of `len` bytes instead of a copy (what this buffer
    /// held before is gone; a frame lent before goes back to its lender).
    #[inline]
    pub fn lend(&mut self, key: &LenderKey, handle: NonZeroUsize, len: u32) {
        self.release_lent();
        self.lent = Some(handle);
        self.lender = key.index;
        self.len = len;
    }
    #[cfg(feature = "lend")]
    /// Whether the buffer carries a lent frame.
    #[inline]
    pub fn is_lent(&self) -> bool {
        self.lent.is_some()
    }
    #[cfg(feature = "lend")]
    /// Takes back the frame lent by `key`'s lender, if this buffer carries one: its handle and
    /// length, the lender's to send as it is. The buffer is then empty.
    #[inline]
    pub fn take_lent(&mut self, key: &LenderKey) -> Option<(NonZeroUsize, u32)> {
        match self.lent {
            Some(h) if self.lender == key.index => {
                self.lent = None;
                let len = self.len;
                self.len = 0;
                Some((h, len))
            }
            _ => None,
        }
    }
    /// Whether the buffer carries a lent frame (never without the feature `lend`).
    #[inline(always)]
    pub(crate) fn carries_lent(&self) -> bool {
        #[cfg(feature = "lend")]
        {
            self.lent.is_some()
        }
        #[cfg(not(feature = "lend"))]
        {
            false
        }
    }
    /// Gives a lent frame back to its lender, without its bytes.
    #[inline(always)]
    fn release_lent(&mut self) {
        #[cfg(feature = "lend")]
        if self.lent.is_some() {
            self.release_lent_now();
        }
    }
    #[cfg(feature = "lend")]
    #[cold]
    #[inline(never)]
    fn release_lent_now(&mut self) {
        if let Some(h) = self.lent.take() {
            lender(self.lender).release(h);
        }
    }
    /// Copies a lent frame into the buffer's own data room (up to its capacity) and gives the
    /// frame back, for the calls that write past the frame.
    #[inline(always)]
    fn own(&mut self) {
        #[cfg(feature = "lend")]
        if self.lent.is_some() {
            self.own_now();
        }
    }
    #[cfg(feature = "lend")]
    #[cold]
    #[inline(never)]
    fn own_now(&mut self) {
        if let Some(h) = self.lent {
            let n = (self.len as usize).min(self.data.len());
            self.data[..n].copy_from_slice(&lender(self.lender).bytes(h, n)[..n]);
            self.release_lent();
            self.len = n as u32;
        }
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
        self.release_lent();
        if frame.len() > self.data.len() {
            return Err(FrameTooLong {
                len: frame.len(),
                capacity: self.data.len(),
            });
        }
        copy_frame(&mut self.data[..frame.len()], frame);
        self.len = frame.len() as u32;
        Ok(())
    }
    /// Replaces the frame with the first `len` octets of `bytes` (at most `N`), copying all
    /// `N`: a fixed-size copy with no test of the length (the octets past the frame are the
    /// buffer's room, never part of the frame). A data room shorter than `N` takes nothing.
    #[inline(always)]
    pub(crate) fn copy_from_padded<const N: usize>(
        &mut self,
        bytes: &[u8; N],
        len: u32,
    ) -> Result<(), FrameTooLong> {
        debug_assert!(len as usize <= N, "the frame is within the padded bytes");
        self.release_lent();
        let capacity = self.data.len();
        let Some(room) = self.data.first_chunk_mut::<N>() else {
            return Err(FrameTooLong { len: N, capacity });
        };
        *room = *bytes;
        self.len = len;
        Ok(())
    }
    /// The whole data room, for ports that write a frame in place before [`Self::set_len`]
    /// (a lent frame is copied into it first).
    #[inline]
    pub fn data_room_mut(&mut self) -> &mut [u8] {
        self.own();
        &mut self.data
    }
    /// Sets the frame length after writing into [`Self::data_room_mut`] (a lent frame is copied
    /// into the data room first).
    #[inline]
    pub fn set_len(&mut self, len: usize) -> Result<(), FrameTooLong> {
        self.own();
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
///
/// The free buffers are one stack, last freed first out, kept in two parts: `free` below and
/// `recent` on top. `recent` is a batch's storage (room for [`BATCH_CAPACITY`] buffers): a
/// whole burst given back ([`BufPool::free_batch`]) or taken ([`BufPool::alloc_batch`]) trades
/// storage with the batch instead of moving its buffers one by one (the moves would cost
/// about 25 instructions a buffer in the pipeline benchmark).
#[derive(Debug)]
pub struct BufPool {
    /// The bottom of the free stack (room for every buffer: it never grows).
    pub(crate) free: Vec<PacketBuf>,
    /// The top of the free stack: a batch's storage, at most its room.
    pub(crate) recent: Vec<PacketBuf>,
    pub(crate) total: usize,
    pub(crate) buf_size: usize,
    alloc_failures: u64,
}

impl BufPool {
    /// Allocates `count` buffers of `buf_size` bytes each.
    pub fn new(count: usize, buf_size: usize) -> Self {
        let mut free = Vec::with_capacity(count);
        for _ in 0..count {
            free.push(PacketBuf {
                data: vec![0u8; buf_size].into_boxed_slice(),
                ..PacketBuf::hollow()
            });
        }
        BufPool {
            free,
            recent: Vec::with_capacity(BATCH_CAPACITY),
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
            recent: Vec::with_capacity(BATCH_CAPACITY),
            total: count,
            buf_size,
            alloc_failures: 0,
        }
    }

    /// A free buffer (length 0), or `None` when all are in use; failures are counted.
    #[inline]
    pub fn alloc(&mut self) -> Option<PacketBuf> {
        match self.recent.pop().or_else(|| self.free.pop()) {
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

    /// Gives a buffer back (a lent frame in it goes back to its lender). A buffer of another
    /// size, or one beyond the pool's count, is dropped (freed) rather than pooled, so the
    /// pool never grows past what it allocated.
    #[inline(always)]
    pub fn free(&mut self, mut buf: PacketBuf) {
        buf.release_lent();
        if buf.data.len() == self.buf_size && self.available() < self.total {
            if self.recent.len() == self.recent.capacity() {
                // The top is full: it goes below (`free` has room for every buffer).
                self.free.append(&mut self.recent);
            }
            self.recent.push(buf);
        }
    }

    /// Buffers currently free.
    pub fn available(&self) -> usize {
        self.free.len() + self.recent.len()
    }
    /// Buffers the pool was created with.
    pub fn total(&self) -> usize {
        self.total
    }
    /// Buffers currently handed out.
    pub fn in_use(&self) -> usize {
        self.total - self.available()
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
    use crate::Batch;

    /// `copy_from` copies every length exactly, around the in-line case's bounds (32..=64).
    #[test]
    fn copy_from_copies_every_length() {
        let src: Vec<u8> = (0..200u32).map(|i| (i * 37 + 11) as u8).collect();
        let mut pool = BufPool::new(1, 128);
        for n in 0..=128 {
            let mut b = pool.alloc().unwrap();
            b.data_room_mut().fill(0xee);
            b.copy_from(&src[..n]).unwrap();
            assert_eq!(b.as_slice(), &src[..n], "len {n}");
            assert!(
                b.data[n..].iter().all(|&x| x == 0xee),
                "len {n}: nothing past it"
            );
            pool.free(b);
        }
    }

    /// `alloc_batch` hands out `n` buffers as `alloc` does (length 0, no tag), or none when
    /// the pool or the batch is short, counting no failure either way.
    #[test]
    fn alloc_batch_takes_n_or_none() {
        let mut pool = BufPool::new(6, 64);
        let mut b = pool.alloc().unwrap();
        b.copy_from(&[7; 30]).unwrap();
        b.tag = 9;
        pool.free(b);
        let mut batch = Batch::new();
        assert!(pool.alloc_batch(4, &mut batch));
        assert_eq!((batch.len(), pool.available()), (4, 2));
        assert!(batch.iter().all(|b| b.is_empty() && b.tag == 0));
        assert!(!pool.alloc_batch(3, &mut batch), "two free");
        assert_eq!((batch.len(), pool.available()), (4, 2));
        let mut full = Batch::new();
        let mut big = BufPool::new(40, 64);
        assert!(big.alloc_batch(30, &mut full));
        assert!(!big.alloc_batch(3, &mut full), "room for two");
        assert_eq!((full.len(), big.available()), (30, 10));
        assert_eq!(pool.alloc_failures() + big.alloc_failures(), 0);
    }

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

    /// `free_batch` leaves the pool as `free` one by one does (the same buffers, in the same
    /// order for the next allocations), both when every buffer is moved at once and when one
    /// of another size or one past the pool's count is dropped.
    #[test]
    fn free_batch_is_free_one_by_one() {
        for (extra, foreign) in [(0, false), (0, true), (1, false)] {
            let (mut one, mut all) = (BufPool::new(6, 64), BufPool::new(6, 64));
            let mut other = BufPool::new(2, if foreign { 32 } else { 64 });
            let (mut a, mut b) = (Batch::new(), Batch::new());
            for i in 0..4u8 {
                for (pool, batch) in [(&mut one, &mut a), (&mut all, &mut b)] {
                    let mut buf = pool.alloc().unwrap();
                    buf.copy_from(&vec![i; usize::from(i) + 1]).unwrap();
                    batch.push(buf).unwrap();
                }
            }
            if foreign || extra > 0 {
                a.push(other.alloc().unwrap()).unwrap();
                b.push(other.alloc().unwrap()).unwrap();
            }
            if extra > 0 {
                // Give back two of 6 first, so the extra buffer is one past the count.
                for pool in [&mut one, &mut all] {
                    let x = pool.alloc().unwrap();
                    let y = pool.alloc().unwrap();
                    pool.free(x);
                    pool.free(y);
                }
            }
            for buf in a.drain() {
                one.free(buf);
            }
            let bytes: u64 = b.iter().map(|x| x.len() as u64).sum();
            assert_eq!(all.free_batch_bytes(&mut b), bytes, "{extra} {foreign}");
            assert!(b.is_empty());
            assert_eq!(one.available(), all.available());
            let order = |p: &mut BufPool| -> Vec<u8> {
                std::iter::from_fn(|| p.alloc())
                    .map(|mut x| {
                        x.set_len(1).unwrap();
                        x.as_slice()[0]
                    })
                    .collect()
            };
            assert_eq!(order(&mut one), order(&mut all), "{extra} {foreign}");
        }
    }

    /// The pool against a plain stack of its buffers (last freed first out) over a long mix of
    /// single and burst allocations and frees: `alloc` hands out exactly the stack's top,
    /// `alloc_batch` the stack's top `n` (as a set), the counts agree, and every batch keeps
    /// storage for a full burst whatever storage it traded with the pool.
    #[test]
    fn the_pool_is_one_stack_whatever_its_storage() {
        let mut pool = BufPool::new(100, 64);
        let mut stack: Vec<*const u8> = Vec::new();
        // The pool's initial order: what `alloc` hands out, given back in reverse.
        let all: Vec<PacketBuf> = std::iter::from_fn(|| pool.alloc()).collect();
        for b in all.into_iter().rev() {
            stack.push(b.data.as_ptr());
            pool.free(b);
        }
        let mut held: Vec<Batch> = Vec::new();
        let mut singles: Vec<PacketBuf> = Vec::new();
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        // 20 000 steps took miri 135 s; 400 still mix every kind of operation many times.
        let steps = if cfg!(miri) { 400 } else { 20_000 };
        for step in 0..steps {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let n = (x >> 8) as usize % (BATCH_CAPACITY + 1);
            match x % 5 {
                0 => match pool.alloc() {
                    Some(b) => {
                        assert_eq!(Some(b.data.as_ptr()), stack.pop(), "step {step}");
                        singles.push(b);
                    }
                    None => assert!(stack.is_empty(), "step {step}"),
                },
                1 => {
                    if let Some(b) = singles.pop() {
                        stack.push(b.data.as_ptr());
                        pool.free(b);
                    }
                }
                2 => {
                    let mut batch = held.pop().unwrap_or_default();
                    let before = batch.len();
                    if pool.alloc_batch(n, &mut batch) {
                        let mut want = stack.split_off(stack.len() - n);
                        let mut got: Vec<_> =
                            batch.iter().skip(before).map(|b| b.data.as_ptr()).collect();
                        want.sort();
                        got.sort();
                        assert_eq!(got, want, "step {step}");
                    } else {
                        assert!(
                            n > stack.len() || n > BATCH_CAPACITY - before,
                            "step {step}"
                        );
                    }
                    held.push(batch);
                }
                _ => {
                    if let Some(mut batch) = held.pop() {
                        stack.extend(batch.iter().map(|b| b.data.as_ptr()));
                        pool.free_batch(&mut batch);
                        assert!(batch.is_empty());
                        held.insert(0, batch);
                    }
                }
            }
            assert_eq!(pool.available(), stack.len(), "step {step}");
            assert!(held.iter().all(|b| b.storage_capacity() >= BATCH_CAPACITY));
        }
    }

    #[cfg(feature = "lend")]
    /// Frames of leaked memory, counting what comes back: what a port's lender does, in safe
    /// code (it cannot lend writable bytes).
    struct TestLender {
        frames: Vec<&'static [u8]>,
        released: std::sync::atomic::AtomicUsize,
    }

    #[cfg(feature = "lend")]
    impl FrameLender for TestLender {
        fn bytes(&self, handle: NonZeroUsize, len: usize) -> &[u8] {
            &self.frames[handle.get() - 1][..len]
        }
        fn bytes_mut(&self, _: NonZeroUsize, _: usize) -> &mut [u8] {
            unimplemented!("the test lender lends read-only frames")
        }
        fn release(&self, _: NonZeroUsize) {
            self.released
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    #[test]
    fn a_buffer_is_40_bytes_or_48_with_lending() {
        // What a batch or a queue moves per packet; the lent handle fits in 8 more.
        let want = if cfg!(feature = "lend") { 48 } else { 40 };
        assert_eq!(std::mem::size_of::<PacketBuf>(), want);
    }

    #[cfg(feature = "lend")]
    #[test]
    fn a_lent_frame_is_read_in_place_and_goes_back_once() {
        use std::sync::atomic::Ordering::Relaxed;
        let lender: &'static TestLender = Box::leak(Box::new(TestLender {
            frames: vec![Box::leak(vec![1u8; 100].into_boxed_slice()), &[2u8; 60]],
            released: Default::default(),
        }));
        let key = register_lender(lender).unwrap();
        let h = |i| NonZeroUsize::new(i).unwrap();
        let mut pool = BufPool::new(4, 64);
        let mut b = pool.alloc().unwrap();
        b.lend(&key, h(1), 100);
        assert!(b.is_lent());
        assert_eq!(
            (b.len(), b.as_slice()),
            (100, &[1u8; 100][..]),
            "longer than the room"
        );
        assert_eq!(pool.in_use(), 1, "a lent frame holds a pool buffer");
        pool.free(b);
        assert_eq!((lender.released.load(Relaxed), pool.available()), (1, 4));
        // Replaced by a copy: back to the lender, the copy in the buffer's own room.
        let mut b = pool.alloc().unwrap();
        b.lend(&key, h(2), 60);
        b.copy_from(&[9u8; 10]).unwrap();
        assert_eq!(
            (lender.released.load(Relaxed), b.as_slice()),
            (2, &[9u8; 10][..])
        );
        assert!(!b.is_lent());
        // Written past its end: copied into the buffer first, then back to the lender.
        b.lend(&key, h(2), 60);
        b.set_len(62).unwrap();
        assert_eq!(lender.released.load(Relaxed), 3);
        assert_eq!(&b.as_slice()[..60], &[2u8; 60][..]);
        // Taken back by the lender's port: not released, the buffer empty.
        b.lend(&key, h(1), 30);
        let other = register_lender(lender).unwrap();
        assert_eq!(b.take_lent(&other), None, "another lender's key");
        assert_eq!(b.take_lent(&key), Some((h(1), 30)));
        assert!(b.is_empty() && !b.is_lent());
        pool.free(b);
        assert_eq!(lender.released.load(Relaxed), 3);
        // Dropped instead of freed: still back to the lender.
        let mut b = pool.alloc().unwrap();
        b.lend(&key, h(2), 60);
        drop(b);
        assert_eq!(lender.released.load(Relaxed), 4);
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
