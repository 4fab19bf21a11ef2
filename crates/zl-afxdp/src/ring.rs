//! The four single-producer / single-consumer rings an XSK socket shares with the kernel.
//!
//! Each ring is an mmap'ed area holding a producer index, a consumer index, a flags word and
//! a power-of-two array of entries. Indices are free-running `u32`s; an entry's slot is
//! `index & mask`. Orderings, as in the kernel's `xsk_queue.h` and libxdp:
//! - the producer writes entries, then publishes them with a *release* store of `producer`;
//!   the consumer reads `producer` with an *acquire* load before reading those entries;
//! - the consumer finishes reading entries, then frees them with a *release* store of
//!   `consumer`; the producer reads `consumer` with an *acquire* load before overwriting them.
//!
//! We are the producer of the fill and TX rings and the consumer of the RX and completion
//! rings; the kernel is the other side. Each side caches the other's index and reloads it
//! only when the cached value shows too little room, so the shared cache line is touched once
//! per burst, not once per packet.

use std::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU32, Ordering};

/// An mmap'ed region, unmapped on drop.
#[derive(Debug)]
pub(crate) struct Mapping {
    base: NonNull<u8>,
    len: usize,
    /// False only for the test-only aliases, which must not unmap.
    owned: bool,
}

impl Mapping {
    /// Maps `len` bytes of `fd` at page offset `pgoff` (shared), or anonymous memory when
    /// `fd` is -1.
    pub(crate) fn new(fd: libc::c_int, len: usize, pgoff: libc::off_t) -> std::io::Result<Self> {
        let (flags, populate) = if fd < 0 {
            // Miri (scripts/miri-ci.sh) emulates anonymous mappings with no other flag;
            // pre-faulting changes nothing it checks.
            let populate = if cfg!(miri) { 0 } else { libc::MAP_POPULATE };
            (libc::MAP_PRIVATE | libc::MAP_ANONYMOUS, populate)
        } else {
            (libc::MAP_SHARED, libc::MAP_POPULATE)
        };
        // SAFETY: a fresh mapping at an address the kernel picks; no existing memory is
        // affected. The result is checked against MAP_FAILED before use.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                flags | populate,
                fd,
                pgoff,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        let base = NonNull::new(ptr.cast::<u8>()).ok_or_else(std::io::Error::last_os_error)?;
        Ok(Mapping {
            base,
            len,
            owned: true,
        })
    }

    /// A second, non-owning view of the same memory (for the ring stress test, which plays
    /// the kernel's side of a ring itself).
    #[cfg(test)]
    fn alias(&self) -> Mapping {
        Mapping {
            base: self.base,
            len: self.len,
            owned: false,
        }
    }

    pub(crate) fn as_ptr(&self) -> *mut u8 {
        self.base.as_ptr()
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if !self.owned {
            return;
        }
        // SAFETY: `base..base+len` is exactly the region returned by mmap in `new`, and no
        // reference into it outlives `self` (rings and UMEM views borrow from their owner).
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}

/// Where the kernel put the fields of one ring inside its mapping
/// (`struct xdp_ring_offset`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct RingLayout {
    pub producer: u64,
    pub consumer: u64,
    pub desc: u64,
    pub flags: u64,
}

/// The shared part of a ring, common to both directions.
#[derive(Debug)]
struct RawRing<T> {
    producer: NonNull<AtomicU32>,
    consumer: NonNull<AtomicU32>,
    flags: NonNull<AtomicU32>,
    entries: NonNull<T>,
    mask: u32,
    size: u32,
    _map: Mapping,
}

impl<T: Copy> RawRing<T> {
    /// # Safety
    /// `map` must be the kernel's mapping of a ring of `size` entries of type `T` laid out as
    /// `layout` says (from `XDP_MMAP_OFFSETS`), and `size` a power of two.
    unsafe fn new(map: Mapping, layout: RingLayout, size: u32) -> Self {
        let base = map.as_ptr();
        let at = |off: u64| {
            // SAFETY: the kernel's offsets lie inside the mapping (checked by the caller
            // sizing the mapping as `desc + size * size_of::<T>()`), so the pointer is in
            // bounds and non-null.
            unsafe { NonNull::new_unchecked(base.add(off as usize)) }
        };
        RawRing {
            producer: at(layout.producer).cast(),
            consumer: at(layout.consumer).cast(),
            flags: at(layout.flags).cast(),
            entries: at(layout.desc).cast(),
            mask: size - 1,
            size,
            _map: map,
        }
    }

    fn producer(&self) -> &AtomicU32 {
        // SAFETY: points into the live mapping owned by `self`, 4-byte aligned by the kernel,
        // and only ever accessed atomically by both sides.
        unsafe { self.producer.as_ref() }
    }

    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: as for `producer`.
        unsafe { self.consumer.as_ref() }
    }

    fn flags(&self) -> &AtomicU32 {
        // SAFETY: as for `producer`.
        unsafe { self.flags.as_ref() }
    }

    fn read(&self, index: u32) -> T {
        // SAFETY: `index & mask < size`, so the slot lies in the mapped entry array; the
        // caller owns this slot (it is between the consumer and the acquired producer index),
        // so the kernel is not writing it. Read volatile: the memory is shared with the kernel.
        unsafe {
            self.entries
                .as_ptr()
                .add((index & self.mask) as usize)
                .read_volatile()
        }
    }

    fn write(&self, index: u32, value: T) {
        // SAFETY: `index & mask < size`; the caller owns this slot (between the producer and
        // the acquired consumer index + size), so the kernel is not reading it.
        unsafe {
            self.entries
                .as_ptr()
                .add((index & self.mask) as usize)
                .write_volatile(value)
        }
    }

    fn needs_wakeup(&self) -> bool {
        // The flag is read after publishing the producer index; a full fence orders that
        // store before this load (a store-load pair the acquire/release pairs do not cover),
        // so a flag the kernel sets just after it last looked at the ring is not missed.
        fence(Ordering::SeqCst);
        self.flags().load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }
}

/// A ring we produce into (fill, TX).
#[derive(Debug)]
pub(crate) struct ProducerRing<T> {
    raw: RawRing<T>,
    cached_prod: u32,
    cached_cons: u32,
}

impl<T: Copy> ProducerRing<T> {
    /// # Safety
    /// As for `RawRing::new`.
    pub(crate) unsafe fn new(map: Mapping, layout: RingLayout, size: u32) -> Self {
        // SAFETY: forwarded from the caller.
        let raw = unsafe { RawRing::new(map, layout, size) };
        let cached_prod = raw.producer().load(Ordering::Relaxed);
        let cached_cons = raw.consumer().load(Ordering::Acquire);
        ProducerRing {
            raw,
            cached_prod,
            cached_cons,
        }
    }

    /// Free slots, reloading the kernel's consumer index only if fewer than `want` are known.
    pub(crate) fn free(&mut self, want: u32) -> u32 {
        let free = self
            .cached_cons
            .wrapping_add(self.raw.size)
            .wrapping_sub(self.cached_prod);
        if free >= want {
            return free;
        }
        // Acquire: the kernel is done with every slot below this index.
        self.cached_cons = self.raw.consumer().load(Ordering::Acquire);
        self.cached_cons
            .wrapping_add(self.raw.size)
            .wrapping_sub(self.cached_prod)
    }

    /// Writes the `i`-th entry past the published producer index; the caller has checked
    /// `i < free(..)`.
    pub(crate) fn stage(&mut self, i: u32, value: T) {
        self.raw.write(self.cached_prod.wrapping_add(i), value);
    }

    /// Publishes `n` staged entries.
    pub(crate) fn submit(&mut self, n: u32) {
        if n == 0 {
            return;
        }
        self.cached_prod = self.cached_prod.wrapping_add(n);
        // Release: the entries written by `stage` are visible before the index that hands
        // them to the kernel.
        self.raw
            .producer()
            .store(self.cached_prod, Ordering::Release);
    }

    pub(crate) fn needs_wakeup(&self) -> bool {
        self.raw.needs_wakeup()
    }

    /// Entries the kernel has not consumed yet.
    pub(crate) fn outstanding(&mut self) -> u32 {
        self.raw.size - self.free(self.raw.size)
    }

    /// Calls `f` on every published entry the kernel has not consumed yet (for counting what
    /// is abandoned when the socket is given up).
    pub(crate) fn for_each_outstanding(&mut self, mut f: impl FnMut(T)) {
        let n = self.outstanding();
        let first = self.cached_prod.wrapping_sub(n);
        for i in 0..n {
            // The slots between the kernel's consumer index and ours are entries we wrote and
            // published; the kernel only reads them, and we do not rewrite them here.
            f(self.raw.read(first.wrapping_add(i)));
        }
    }
}

/// A ring we consume from (RX, completion).
#[derive(Debug)]
pub(crate) struct ConsumerRing<T> {
    raw: RawRing<T>,
    cached_prod: u32,
    cached_cons: u32,
}

impl<T: Copy> ConsumerRing<T> {
    /// # Safety
    /// As for `RawRing::new`.
    pub(crate) unsafe fn new(map: Mapping, layout: RingLayout, size: u32) -> Self {
        // SAFETY: forwarded from the caller.
        let raw = unsafe { RawRing::new(map, layout, size) };
        let cached_cons = raw.consumer().load(Ordering::Relaxed);
        let cached_prod = raw.producer().load(Ordering::Acquire);
        ConsumerRing {
            raw,
            cached_prod,
            cached_cons,
        }
    }

    /// Entries ready to read, at most `max`; reloads the kernel's producer index only when
    /// the cached one shows nothing.
    pub(crate) fn peek(&mut self, max: u32) -> u32 {
        let mut ready = self.cached_prod.wrapping_sub(self.cached_cons);
        if ready == 0 {
            // Acquire: the entries below this index are fully written by the kernel.
            self.cached_prod = self.raw.producer().load(Ordering::Acquire);
            ready = self.cached_prod.wrapping_sub(self.cached_cons);
        }
        ready.min(max)
    }

    /// The `i`-th ready entry; the caller has checked `i < peek(..)`.
    pub(crate) fn get(&self, i: u32) -> T {
        self.raw.read(self.cached_cons.wrapping_add(i))
    }

    /// Gives `n` read entries back to the kernel.
    pub(crate) fn release(&mut self, n: u32) {
        if n == 0 {
            return;
        }
        self.cached_cons = self.cached_cons.wrapping_add(n);
        // Release: our reads of those entries complete before the kernel may reuse them.
        self.raw
            .consumer()
            .store(self.cached_cons, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SIZE: u32 = 64;
    const LAYOUT: RingLayout = RingLayout {
        producer: 0,
        consumer: 64,
        flags: 128,
        desc: 192,
    };

    /// Moves exclusive ownership of a ring end into a thread.
    struct SendBox<T>(T);
    // SAFETY: each end is used by exactly one thread; the shared memory is accessed through
    // atomics (indices) and through slots the index protocol hands to one side at a time.
    unsafe impl<T> Send for SendBox<T> {}

    /// One thread produces 0..N through a `ProducerRing`, another consumes through a
    /// `ConsumerRing` on the same memory (standing in for the kernel), with free-running
    /// indices starting just below `u32::MAX` so they wrap. Every value must arrive once, in
    /// order: this checks the index arithmetic, the cached-index refresh and the wraparound.
    #[test]
    fn producer_consumer_stress_across_index_wraparound() {
        // Under miri (`scripts/miri-ci.sh`) enough to wrap the indices and fill the ring
        // many times over, in seconds of interpretation.
        const N: u64 = if cfg!(miri) { 3_000 } else { 2_000_000 };
        let map = Mapping::new(-1, 192 + SIZE as usize * 8, 0).unwrap();
        let start = u32::MAX - 1000;
        // SAFETY: offsets 0 and 64 are inside the fresh mapping and 4-byte aligned; no ring
        // exists yet.
        unsafe {
            (*map.as_ptr().cast::<AtomicU32>()).store(start, Ordering::Relaxed);
            (*map.as_ptr().add(64).cast::<AtomicU32>()).store(start, Ordering::Relaxed);
        }
        // SAFETY: the mapping holds a ring of SIZE u64 entries at LAYOUT.
        let prod = unsafe { ProducerRing::<u64>::new(map.alias(), LAYOUT, SIZE) };
        // SAFETY: as above; the consumer end owns the mapping.
        let cons = unsafe { ConsumerRing::<u64>::new(map, LAYOUT, SIZE) };
        let (prod, cons) = (SendBox(prod), SendBox(cons));
        let producer = std::thread::spawn(move || {
            let mut prod = prod;
            let mut next = 0u64;
            let mut burst = 1u32;
            while next < N {
                let free = prod.0.free(burst);
                let n = free.min(burst).min((N - next) as u32);
                for i in 0..n {
                    prod.0.stage(i, next + u64::from(i));
                }
                prod.0.submit(n);
                next += u64::from(n);
                burst = burst % 37 + 1;
            }
            prod
        });
        let mut cons = cons;
        let mut expect = 0u64;
        let mut burst = 1u32;
        while expect < N {
            let n = cons.0.peek(burst);
            for i in 0..n {
                assert_eq!(cons.0.get(i), expect);
                expect += 1;
            }
            cons.0.release(n);
            burst = burst % 29 + 1;
        }
        // The producer's view must end empty: everything consumed.
        let mut prod = producer.join().unwrap();
        assert_eq!(prod.0.outstanding(), 0);
        assert_eq!(cons.0.peek(SIZE), 0);
    }
}
