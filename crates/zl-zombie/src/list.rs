//! The lock-free Zombie List: M zombie slots, P(t), T, and the occurrence table.

use rand::RngCore;
use zl_core::{FlowId, Nanos};

use crate::draw;
use crate::ops::{NoOps, OpCounts, OpSink};
use crate::params::{OccurrenceMode, ZombieConfig, ZOMBIE_COUNT_BITS};
use crate::primitive::{AtomicU64, AtomicUsize, Ordering, Padded};
use crate::table::{mix, OccurrenceTable};

/// One zombie: `(flow_id, count, timestamp)` (docs/algorithms/zombie-list.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Zombie {
    /// The flow this zombie remembers.
    pub flow: FlowId,
    /// Hits since the zombie was written (saturates at [`ZombieConfig::count_cap`]).
    pub count: u64,
    /// Arrival time of the packet that wrote or last hit it.
    pub stamp: Nanos,
}

/// What one arrival learned from the Zombie List (docs/algorithms/zombie-list.md).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Observation {
    /// Hit(t): the drawn zombie belonged to this packet's flow.
    pub hit: bool,
    /// P(t) after this arrival's update (decided: updated before equations (2)-(3) use it).
    pub p: f64,
    /// F of this packet's flow after this arrival's update.
    pub occurrence: u64,
    /// T after this arrival's update.
    pub total: u64,
}

/// A zombie slot: `word` packs `(entry index + 1) << 40 | tag << 24 | count` (0 = empty,
/// before the list has filled); `stamp` is the zombie's timestamp. decided (beyond the paper,
/// whose zombie is `(flow id, count, timestamp)`): the slot refers to the flow's table entry
/// instead of holding its id, and carries a tag, 16 bits of the flow's hash, so that most
/// misses are settled without reading the entry's key.
#[derive(Debug)]
struct Slot {
    word: AtomicU64,
    stamp: AtomicU64,
}

const COUNT_MASK: u64 = (1 << ZOMBIE_COUNT_BITS) - 1;

/// Shards of P(t) (a power of two): threads are numbered in the order they first observe any
/// list, and thread k updates shard `k mod P_SHARDS`. One under loom, whose model threads
/// share one OS thread (and P(t) is in none of the invariants it checks).
const P_SHARDS: usize = if cfg!(loom) { 1 } else { 16 };
/// A P(t) shard no thread has written: a NaN's bits, which no EWMA step of values in [0, 1]
/// produces.
const UNUSED: u64 = u64::MAX;

/// Numbers threads for the P(t) shards.
mod shard {
    use std::cell::Cell;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// The next thread number: a std atomic even under loom (it numbers threads, it is not
    /// part of the list's protocol).
    static NEXT: AtomicUsize = AtomicUsize::new(0);

    std::thread_local! {
        static INDEX: Cell<usize> = const { Cell::new(usize::MAX) };
    }

    /// This thread's number, taken on its first call.
    #[inline]
    pub(super) fn index() -> usize {
        INDEX.with(|i| {
            let v = i.get();
            if v != usize::MAX {
                return v;
            }
            // Relaxed: only uniqueness matters, which the RMW gives.
            let v = NEXT.fetch_add(1, Ordering::Relaxed) % super::P_SHARDS;
            i.set(v);
            v
        })
    }
}
/// Arrivals of a [`ZombieList::observe_batch`] burst whose hashes are kept between their
/// first-bucket loads and their updates (a poll loop's burst; a longer one goes in runs of
/// this many).
const HASHED: usize = 32;
const TAG_BITS: u32 = 16;
const ENTRY_SHIFT: u32 = ZOMBIE_COUNT_BITS + TAG_BITS;

/// The slot tag of a flow whose hash is `h`.
#[inline]
fn tag(h: u64) -> u64 {
    h >> (64 - TAG_BITS)
}

#[inline]
fn encode(entry: usize, tag: u64, count: u64) -> u64 {
    ((entry as u64 + 1) << ENTRY_SHIFT) | (tag << ZOMBIE_COUNT_BITS) | count
}

/// `(entry index, tag, count)` of a slot word, `None` for an empty slot.
#[inline]
fn decode(word: u64) -> Option<(usize, u64, u64)> {
    let entry = (word >> ENTRY_SHIFT).checked_sub(1)?;
    Some((
        entry as usize,
        (word >> ZOMBIE_COUNT_BITS) & ((1 << TAG_BITS) - 1),
        word & COUNT_MASK,
    ))
}

/// A quiescent state that breaks one of the invariants of docs/algorithms/zombie-list.md.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InvariantError {
    #[error("T counter {counter} != sum over zombies of (count + 1) = {zombies}")]
    /// T differs from what the zombies hold.
    TotalVsZombies {
        /// The T counter.
        counter: u64,
        /// The sum over zombies of `count + 1`.
        zombies: u64,
    },
    #[error("sum over table entries of F = {table} != T = {zombies}")]
    /// The occurrence table's F values do not sum to T.
    TableVsZombies {
        /// The sum over table entries of F.
        table: u64,
        /// T, as the zombies hold it.
        zombies: u64,
    },
    #[error("F({flow:#x}) = {table} in the table but {zombies} by scanning the zombies")]
    /// One flow's F differs between the table and a scan of the zombies.
    Occurrence {
        /// The flow id.
        flow: u64,
        /// F in the occurrence table.
        table: u64,
        /// F by scanning the zombies.
        zombies: u64,
    },
    #[error("{0} table entries are still frozen")]
    /// Table entries left frozen (claimed but never published) at quiescence: how many.
    Frozen(usize),
    #[error("a bucket's spill counter disagrees with the entries' probe positions")]
    /// A bucket's spill counter disagrees with where its entries were placed.
    Spill,
}

/// A Zombie List state that cannot be built (see [`ZombieList::from_zombies`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ZombieStateError {
    #[error("{given} zombies given, the list holds M = {m}")]
    /// More zombies than slots.
    TooMany {
        /// Zombies given.
        given: usize,
        /// M, the slots.
        m: usize,
    },
    #[error("zombie {index}: count {count} exceeds the cap {cap}")]
    /// A zombie's count above the cap a slot word can hold.
    Count {
        /// The zombie's position in the slice given.
        index: usize,
        /// Its count.
        count: u64,
        /// [`ZombieConfig::count_cap`].
        cap: u64,
    },
}

/// The SRED / ZL-RED Zombie List, shared by every forwarding thread (`Send + Sync`, use it
/// through an `Arc`). Every method takes `&self` and uses atomics only; see the crate doc for
/// why the invariants hold at quiescence.
#[derive(Debug)]
pub struct ZombieList {
    cfg: ZombieConfig,
    slots: Box<[Slot]>,
    table: OccurrenceTable,
    /// Zombies appended so far (claimed slots while filling); equals M once full.
    len: Padded<AtomicUsize>,
    /// T plus the increments of updates in flight.
    total: Padded<AtomicU64>,
    /// P(t), one EWMA per shard of threads, as f64 bits ([`UNUSED`] until a thread of the
    /// shard first observes); see [`ZombieList::update_p`].
    p_shards: [Padded<AtomicU64>; P_SHARDS],
    /// Updates skipped because the occurrence table had no free entry.
    table_full: AtomicU64,
}

impl ZombieList {
    /// An empty list (`P(0) = 0`, T = 0).
    pub fn new(cfg: ZombieConfig) -> Self {
        ZombieList {
            cfg,
            slots: (0..cfg.m())
                .map(|_| Slot {
                    word: AtomicU64::new(0),
                    stamp: AtomicU64::new(0),
                })
                .collect(),
            table: OccurrenceTable::new(cfg.m()),
            len: Padded(AtomicUsize::new(0)),
            total: Padded(AtomicU64::new(0)),
            p_shards: std::array::from_fn(|_| Padded(AtomicU64::new(UNUSED))),
            table_full: AtomicU64::new(0),
        }
    }

    /// A list holding `zombies` in slots `0..zombies.len()` (still filling if fewer than M),
    /// with `P = 0`: for restoring a state or building the paper's examples.
    pub fn from_zombies(cfg: ZombieConfig, zombies: &[Zombie]) -> Result<Self, ZombieStateError> {
        if zombies.len() > cfg.m() {
            return Err(ZombieStateError::TooMany {
                given: zombies.len(),
                m: cfg.m(),
            });
        }
        if let Some((index, z)) = zombies
            .iter()
            .enumerate()
            .find(|(_, z)| z.count > cfg.count_cap())
        {
            return Err(ZombieStateError::Count {
                index,
                count: z.count,
                cap: cfg.count_cap(),
            });
        }
        let list = ZombieList::new(cfg);
        for (slot, z) in list.slots.iter().zip(zombies) {
            let h = mix(z.flow.0);
            let e = list
                .table
                .reserve(z.flow, h, &mut NoOps)
                .expect("a fresh table of 2M entries holds M flows");
            list.table.add(e, z.count);
            list.total.0.fetch_add(z.count + 1, Ordering::Relaxed);
            slot.word
                .store(encode(e, tag(h), z.count), Ordering::Release);
            slot.stamp.store(z.stamp.0, Ordering::Relaxed);
        }
        list.len.0.store(zombies.len(), Ordering::Release);
        Ok(list)
    }

    /// SRED steps 1-3 for one arrival of `flow`: append, or compare with a random zombie and
    /// maybe overwrite it; update P(t); return Hit, P(t), F(flow) and T after the update.
    #[inline]
    pub fn observe<R: RngCore + ?Sized>(
        &self,
        flow: FlowId,
        now: Nanos,
        rng: &mut R,
    ) -> Observation {
        self.observe_with(flow, now, rng, &mut NoOps)
    }

    /// [`ZombieList::observe`], also counting its shared-memory operations.
    pub fn observe_counted<R: RngCore + ?Sized>(
        &self,
        flow: FlowId,
        now: Nanos,
        rng: &mut R,
    ) -> (Observation, OpCounts) {
        let mut ops = OpCounts::default();
        let obs = self.observe_with(flow, now, rng, &mut ops);
        (obs, ops)
    }

    /// [`ZombieList::observe`] for a burst of arrivals at `now` (as a poll loop receives
    /// them), in order, writing one [`Observation`] per flow into `out`; returns how many
    /// were observed (`min(flows.len(), out.len())`).
    ///
    /// Each arrival updates the list and reads F and T as `observe` does; this thread's P(t)
    /// shard takes the burst as one contiguous run of EWMA steps, read by one relaxed load
    /// before the burst and published by a single relaxed store after it, every flow's first
    /// table bucket is loaded up front (32 at a time, their hashes kept for the updates), and
    /// a burst that finds the list full tests that once.
    /// Sequentially, the result equals that many `observe` calls with the same random stream.
    pub fn observe_batch<R: RngCore + ?Sized>(
        &self,
        flows: &[FlowId],
        now: Nanos,
        rng: &mut R,
        out: &mut [Observation],
    ) -> usize {
        let n = flows.len().min(out.len());
        // One relaxed load and one relaxed store of this thread's P(t) shard for the whole
        // burst (decided, see `update_p`: a concurrent burst's steps may be overwritten, never
        // T or F). Loaded before the list's updates, so that each arrival's EWMA step is taken
        // in the same pass as its update.
        let shard = self.p_shard();
        let bits = shard.load(Ordering::Relaxed);
        let start = self.shard_start(bits);
        // Step 1's test once per burst when the list is full: `len` never decreases, so once
        // this thread has read M every later load of it would read M too, and this load's
        // acquire already orders the burst's slot reads after the claims, as each arrival's
        // did. While the list fills, every arrival tests it, as in `observe`. Acquire: as in
        // `claim_append_slot`.
        let full = self.len.0.load(Ordering::Acquire) >= self.cfg.m();
        let mut p = start;
        // F and T after an arrival's update, in each occurrence mode.
        let table = |flow, h| {
            (
                self.table.occurrence(flow, h, &mut NoOps),
                // Acquire: see our own and others' completed deltas (exact when sequential).
                self.total.0.load(Ordering::Acquire),
            )
        };
        let scan = |flow, _| self.scan(flow, &mut NoOps);
        // The flows' hashes, computed once for the first-bucket loads and the updates.
        let mut hashes = [0u64; HASHED];
        for (flows, out) in flows[..n].chunks(HASHED).zip(out.chunks_mut(HASHED)) {
            // Start every flow's first-bucket load up front, so the F lookups overlap.
            for (&flow, h) in flows.iter().zip(hashes.iter_mut()) {
                *h = mix(flow.0);
                self.table.prefetch(*h);
            }
            let arrivals = (flows, &hashes[..flows.len()]);
            // The occurrence mode and `full` matched once per run, not per arrival: a loop
            // each (one testing `full` kept it on the stack and compared it on every arrival).
            p = match (self.cfg.occurrence(), full) {
                (OccurrenceMode::Table, true) => {
                    self.update_run::<true, _>(arrivals, now, rng, out, p, table)
                }
                (OccurrenceMode::Table, false) => {
                    self.update_run::<false, _>(arrivals, now, rng, out, p, table)
                }
                (OccurrenceMode::Scan, true) => {
                    self.update_run::<true, _>(arrivals, now, rng, out, p, scan)
                }
                (OccurrenceMode::Scan, false) => {
                    self.update_run::<false, _>(arrivals, now, rng, out, p, scan)
                }
            };
        }
        if p.to_bits() != bits {
            shard.store(p.to_bits(), Ordering::Relaxed);
        }
        n
    }

    /// [`ZombieList::observe_batch`]'s pass over a run of the burst (its flows and their
    /// hashes): each arrival's steps 1-2 (step 2 alone when the caller saw the list full),
    /// its F and T by `occurrence` (the list's occurrence mode, matched once by the caller) and
    /// its step of P(t) from `p`; returns P(t) after the last.
    #[inline(always)]
    fn update_run<const FULL: bool, R: RngCore + ?Sized>(
        &self,
        (flows, hashes): (&[FlowId], &[u64]),
        now: Nanos,
        rng: &mut R,
        out: &mut [Observation],
        mut p: f64,
        occurrence: impl Fn(FlowId, u64) -> (u64, u64),
    ) -> f64 {
        let (keep, alpha) = (self.cfg.keep(), self.cfg.alpha());
        for ((&flow, &h), obs) in flows.iter().zip(hashes).zip(out.iter_mut()) {
            let hit = if FULL {
                self.compare(self.drawn_slot(rng), flow, h, now, rng, &mut NoOps)
            } else {
                self.update_list(flow, h, now, rng, &mut NoOps)
            };
            let (occurrence, total) = occurrence(flow, h);
            p = draw::ewma_step(p, keep, alpha, hit);
            *obs = Observation {
                hit,
                p,
                occurrence,
                total,
            };
        }
        p
    }

    // Always inlined, so that the caller gets the Observation in registers rather than
    // through a returned struct in memory (the zombie_observe bench measures the difference).
    #[inline(always)]
    fn observe_with<R: RngCore + ?Sized, S: OpSink>(
        &self,
        flow: FlowId,
        now: Nanos,
        rng: &mut R,
        ops: &mut S,
    ) -> Observation {
        let h = mix(flow.0);
        // The first bucket found once, for the prefetch and the F lookup.
        let home = self.table.home(h);
        home.prefetch();
        let hit = self.update_list(flow, h, now, rng, ops);
        let p = self.update_p(hit, ops);
        // F and T read on the found bucket, written out here: a helper taking the bucket costs
        // about 8 instructions per packet more in the pipeline bench (LLVM's register
        // allocation around the call).
        let (occurrence, total) = match self.cfg.occurrence() {
            OccurrenceMode::Table => (
                self.table.occurrence_from(home, flow, h, ops),
                // Acquire: as in `observe_batch`.
                self.total.0.load(Ordering::Acquire),
            ),
            OccurrenceMode::Scan => self.scan(flow, ops),
        };
        Observation {
            hit,
            p,
            occurrence,
            total,
        }
    }

    /// SRED steps 1-2 for one arrival; returns Hit. `h` is `mix(flow)`. Always inlined: with
    /// step 2's rare cases out of line it is short, and its call, prologue and spills cost the
    /// pipeline's observation more than its code.
    #[inline(always)]
    fn update_list<R: RngCore + ?Sized, S: OpSink>(
        &self,
        flow: FlowId,
        h: u64,
        now: Nanos,
        rng: &mut R,
        ops: &mut S,
    ) -> bool {
        match self.claim_append_slot() {
            Some(i) => {
                self.append(i, flow, h, now, ops);
                false
            }
            None => self.compare(self.drawn_slot(rng), flow, h, now, rng, ops),
        }
    }

    /// Step 1: while the list is not full, the next slot index, claimed by CAS on `len`.
    #[inline]
    fn claim_append_slot(&self) -> Option<usize> {
        // Acquire pairs with the AcqRel of the claims; once `len == M` the word never changes
        // again and stays shared in every core's cache.
        let mut len = self.len.0.load(Ordering::Acquire);
        while len < self.cfg.m() {
            match self
                .len
                .0
                .compare_exchange(len, len + 1, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => return Some(len),
                Err(now) => len = now,
            }
        }
        None
    }

    /// Step 2's draw: the zombie to compare against, uniform over the M slots. Without a
    /// bounds check, which every arrival on a full list paid (a load of the slice's length, a
    /// compare and a branch).
    #[inline(always)]
    #[allow(unsafe_code)]
    fn drawn_slot<R: RngCore + ?Sized>(&self, rng: &mut R) -> &Slot {
        let i = draw::zombie_index(rng, self.cfg.m());
        debug_assert!(i < self.slots.len());
        // SAFETY: `zombie_index(rng, m)` is below `m`: with `x m = hi 2^32 + lo` for the first
        // 32-bit draw `x` and `c = floor(y m / 2^32) < m` for the second `y` (taken or not), it
        // returns `floor((x m + c) / 2^32)`, and `x m + c < (x + 1) m <= 2^32 m`. And
        // `self.slots.len() == self.cfg.m()`: `new` (which every constructor goes through)
        // builds one slot per `0..cfg.m()`, and neither field is assigned again.
        unsafe { self.slots.get_unchecked(i) }
    }

    /// Appends `(flow, 0, now)` in the claimed empty slot `i`.
    fn append<S: OpSink>(&self, i: usize, flow: FlowId, h: u64, now: Nanos, ops: &mut S) {
        let slot = &self.slots[i];
        let Some(e) = self.table.reserve(flow, h, ops) else {
            self.table_full.fetch_add(1, Ordering::Relaxed);
            return;
        };
        ops.total_write();
        self.total.0.fetch_add(1, Ordering::AcqRel);
        ops.slot_write();
        // The slot can only have been taken meanwhile by a concurrent overwrite that drew it
        // while empty (possible once other threads see the list full).
        if slot
            .word
            .compare_exchange(0, encode(e, tag(h), 0), Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            ops.slot_write();
            slot.stamp.store(now.0, Ordering::Relaxed);
        } else {
            self.table.release(e, 1, ops);
            ops.total_write();
            self.total.0.fetch_sub(1, Ordering::AcqRel);
        }
    }

    /// Step 2 against the drawn zombie's `slot`: the common case, a miss that keeps the
    /// zombie, in line; a swap over another flow's zombie goes on in [`ZombieList::swap_in`],
    /// every other case (a possible hit, an empty slot) in [`ZombieList::compare_from`], with
    /// the word read here and the swap already drawn, so the draws and the result are those
    /// of the one loop (in one function the compiler hoists the loop's set-up ahead of the
    /// common case, about 20 instructions per packet on the pipeline's observation).
    #[inline]
    fn compare<R: RngCore + ?Sized, S: OpSink>(
        &self,
        slot: &Slot,
        flow: FlowId,
        h: u64,
        now: Nanos,
        rng: &mut R,
        ops: &mut S,
    ) -> bool {
        ops.slot_read();
        // Acquire pairs with the AcqRel CAS that wrote the word, so the referenced entry's key
        // is visible.
        let w = slot.word.load(Ordering::Acquire);
        match decode(w) {
            // A different tag is a miss for sure.
            Some((_, t, _)) if t != tag(h) => {
                if !draw::swap(rng, self.cfg.swap_below()) {
                    return false;
                }
                self.swap_in(slot, w, flow, h, now, rng, ops)
            }
            _ => self.compare_from(slot, w, None, flow, h, now, rng, ops),
        }
    }

    /// Step 2's swap of the zombie in `slot` (the drawn one), whose word `w` (as just read)
    /// holds another flow's tag, the swap drawn: the overwrite of [`ZombieList::compare_from`]
    /// without its loop's set-up (most calls out of `compare` are this case). When the slot
    /// changed meanwhile, the loop goes on from the word read again, with the swap already
    /// drawn, as it would have.
    ///
    /// The common case (the flow's live entry taken at once, the slot's CAS done) calls
    /// nothing; every other case goes on in a cold function, called last, so that their
    /// set-up stays off the common path (`overwrite`'s `reserve_any` called in the middle of
    /// this one brings it back). The same atomic operations in the same order as
    /// [`ZombieList::overwrite`] and the loop.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn swap_in<R: RngCore + ?Sized, S: OpSink>(
        &self,
        slot: &Slot,
        w: u64,
        flow: FlowId,
        h: u64,
        now: Nanos,
        rng: &mut R,
        ops: &mut S,
    ) -> bool {
        match self.table.reserve_live(flow, h, ops) {
            Some(e_new) => self.swap_reserved(slot, w, e_new, (flow, h, now), rng, ops),
            None => self.swap_in_any(slot, w, (flow, h, now), rng, ops),
        }
    }

    /// [`ZombieList::swap_in`] when the flow has no live entry to take at once: the
    /// overwrite through [`OccurrenceTable::reserve_any`] (what `reserve` does after
    /// `reserve_live` found nothing, which changed nothing).
    #[cold]
    #[inline(never)]
    fn swap_in_any<R: RngCore + ?Sized, S: OpSink>(
        &self,
        slot: &Slot,
        w: u64,
        (flow, h, now): (FlowId, u64, Nanos),
        rng: &mut R,
        ops: &mut S,
    ) -> bool {
        match self.table.reserve_any(flow, h, ops) {
            Some(e_new) => self.swap_reserved(slot, w, e_new, (flow, h, now), rng, ops),
            None => {
                self.table_full.fetch_add(1, Ordering::Relaxed);
                false
            }
        }
    }

    /// The rest of a swap once the new entry `e_new` is reserved: the overwrite, and after a
    /// failed CAS the loop.
    #[inline(always)]
    fn swap_reserved<R: RngCore + ?Sized, S: OpSink>(
        &self,
        slot: &Slot,
        w: u64,
        e_new: usize,
        (flow, h, now): (FlowId, u64, Nanos),
        rng: &mut R,
        ops: &mut S,
    ) -> bool {
        if !self.overwrite_reserved(slot, w, e_new, h, now, ops) {
            return false;
        }
        self.swap_again(slot, rng, ops, flow, h, now)
    }

    /// [`ZombieList::swap_in`] after its CAS failed (the slot changed meanwhile): the loop
    /// from the word read again, the swap drawn.
    #[cold]
    #[inline(never)]
    fn swap_again<R: RngCore + ?Sized, S: OpSink>(
        &self,
        slot: &Slot,
        rng: &mut R,
        ops: &mut S,
        flow: FlowId,
        h: u64,
        now: Nanos,
    ) -> bool {
        ops.slot_read();
        let w = slot.word.load(Ordering::Acquire);
        self.compare_from(slot, w, Some(true), flow, h, now, rng, ops)
    }

    /// Overwrites the zombie in `slot`, whose word was `w`, with `(flow, 0, now)`: one CAS, the
    /// new entry's reference (and T's `+1` into an empty slot) taken before it, the old
    /// zombie's released after it. Returns true when the CAS failed (every reference taken is
    /// given back; the caller reads the slot again), false when done: replaced, or left as it
    /// was because the table had no free entry (counted).
    #[inline(always)]
    fn overwrite<S: OpSink>(
        &self,
        slot: &Slot,
        w: u64,
        flow: FlowId,
        h: u64,
        now: Nanos,
        ops: &mut S,
    ) -> bool {
        let Some(e_new) = self.table.reserve(flow, h, ops) else {
            self.table_full.fetch_add(1, Ordering::Relaxed);
            return false;
        };
        self.overwrite_reserved(slot, w, e_new, h, now, ops)
    }

    /// [`ZombieList::overwrite`] once the new entry `e_new` (of the flow whose hash is `h`) is
    /// reserved.
    #[inline(always)]
    fn overwrite_reserved<S: OpSink>(
        &self,
        slot: &Slot,
        w: u64,
        e_new: usize,
        h: u64,
        now: Nanos,
        ops: &mut S,
    ) -> bool {
        // T changes by `1 - (c_old + 1) = -c_old`, applied after the CAS: a decrease can
        // wait (T only overstates meanwhile). Into an empty slot it is `+1`, taken first.
        if w == 0 {
            ops.total_write();
            self.total.0.fetch_add(1, Ordering::AcqRel);
        }
        ops.slot_write();
        if slot
            .word
            .compare_exchange(
                w,
                encode(e_new, tag(h), 0),
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .is_ok()
        {
            if let Some((e_old, _, c_old)) = decode(w) {
                self.table.release(e_old, c_old + 1, ops);
                if c_old > 0 {
                    ops.total_write();
                    self.total.0.fetch_sub(c_old, Ordering::AcqRel);
                }
            }
            ops.slot_write();
            slot.stamp.store(now.0, Ordering::Relaxed);
            return false;
        }
        self.table.release(e_new, 1, ops);
        if w == 0 {
            ops.total_write();
            self.total.0.fetch_sub(1, Ordering::AcqRel);
        }
        true
    }

    /// Step 2 against the zombie in `slot` from its word `w` as just read and the swap draw if
    /// already made (`swap`). Every change to the slot is one CAS; the references it adds
    /// (table entry, T) are taken before the CAS and given back if it fails, the ones it drops
    /// are released after it succeeds; after a failed CAS the word is read again.
    #[inline(never)]
    #[allow(clippy::too_many_arguments)]
    fn compare_from<R: RngCore + ?Sized, S: OpSink>(
        &self,
        slot: &Slot,
        w: u64,
        mut swap: Option<bool>,
        flow: FlowId,
        h: u64,
        now: Nanos,
        rng: &mut R,
        ops: &mut S,
    ) -> bool {
        let mut first = Some(w);
        loop {
            let w = match first.take() {
                Some(w) => w,
                None => {
                    ops.slot_read();
                    slot.word.load(Ordering::Acquire)
                }
            };
            if let Some((e, t, c)) = decode(w) {
                // An equal tag needs the key to confirm; a different one is a miss for sure.
                if t == tag(h) && {
                    ops.table_probe();
                    self.table.key(e) == flow
                } {
                    if c >= self.cfg.count_cap() {
                        ops.slot_write();
                        slot.stamp.store(now.0, Ordering::Relaxed);
                        return true;
                    }
                    if !self.table.reserve_referenced(e, ops) {
                        continue;
                    }
                    ops.total_write();
                    self.total.0.fetch_add(1, Ordering::AcqRel);
                    ops.slot_write();
                    if slot
                        .word
                        .compare_exchange(
                            w,
                            encode(e, t, c + 1),
                            Ordering::AcqRel,
                            Ordering::Relaxed,
                        )
                        .is_ok()
                    {
                        ops.slot_write();
                        slot.stamp.store(now.0, Ordering::Relaxed);
                        return true;
                    }
                    self.table.release(e, 1, ops);
                    ops.total_write();
                    self.total.0.fetch_sub(1, Ordering::AcqRel);
                    continue;
                }
            }
            if !*swap.get_or_insert_with(|| draw::swap(rng, self.cfg.swap_below())) {
                return false;
            }
            if !self.overwrite(slot, w, flow, h, now, ops) {
                return false;
            }
        }
    }

    /// Step 3 on this thread's shard of P(t): one relaxed load and, when P(t) changes, one
    /// relaxed store (no locked read-modify-write); returns P(t) after this arrival.
    ///
    /// decided: P(t) is kept per thread. Each thread (up to [`P_SHARDS`] of them; more share
    /// shards) runs SRED's EWMA `P = (1 - alpha) P + alpha Hit` over the arrivals *it*
    /// observes, and an observation reports its own thread's P(t). With one thread this is
    /// exactly SRED's P(t), arrival by arrival. With several, each shard estimates the same
    /// quantity, `P{Hit} = sum pi_i^2` (eq. 3.4), from its share of the arrivals (with flows
    /// spread over threads by hashing, as RSS does, each thread's arrivals hit with that same
    /// probability), with the same weight `alpha` per arrival it sees, so its window spans
    /// `1/alpha` of its own arrivals. [`ZombieList::hit_frequency`] reads P(t) as the mean of
    /// the shards in use. Why: a single P(t) word is written by every arrival on every core,
    /// and that cache line moving between cores capped two threads at 1.3x one thread's rate
    /// (1.7x with shards; docs/performance/zl-zombie.md). A shard starts from the list's P(t)
    /// (the mean of the shards in use) when its first thread arrives, so a thread joining a
    /// running list does not start from 0.
    ///
    /// decided: P(t) is updated by load + store, not by CAS. Two threads of one shard may read
    /// the same P(t-1), and the later store overwrites the earlier step: that arrival's step is
    /// lost, which for the EWMA amounts to a slightly smaller effective gain. P(t) stays a
    /// convex combination of values in [0, 1], so it stays in [0, 1]; T and F are never lost
    /// (they keep their read-modify-writes). Relaxed: P(t) carries no other data.
    #[inline]
    fn update_p<S: OpSink>(&self, hit: bool, ops: &mut S) -> f64 {
        let shard = self.p_shard();
        let bits = shard.load(Ordering::Relaxed);
        let next = draw::ewma_step(
            self.shard_start(bits),
            self.cfg.keep(),
            self.cfg.alpha(),
            hit,
        );
        // Stored even when unchanged: a test skipping the store costs a compare, a branch and
        // a jump on every arrival, and only this shard's threads write its line.
        ops.total_write();
        shard.store(next.to_bits(), Ordering::Relaxed);
        next
    }

    /// This thread's P(t) shard.
    #[inline]
    fn p_shard(&self) -> &AtomicU64 {
        &self.p_shards[shard::index() & (P_SHARDS - 1)].0
    }

    /// The P(t) a shard continues from: its own value, or for a shard not used yet, the list's
    /// P(t) (the mean of the shards in use; 0 before any arrival).
    #[inline]
    fn shard_start(&self, bits: u64) -> f64 {
        if bits == UNUSED {
            self.hit_frequency()
        } else {
            f64::from_bits(bits)
        }
    }

    /// Scan mode: F(flow) and T by reading all M zombies.
    fn scan<S: OpSink>(&self, flow: FlowId, ops: &mut S) -> (u64, u64) {
        let (mut f, mut t) = (0, 0);
        for slot in self.slots.iter() {
            ops.slot_read();
            if let Some((e, _, c)) = decode(slot.word.load(Ordering::Acquire)) {
                ops.table_probe();
                if self.table.key(e) == flow {
                    f += c + 1;
                }
                t += c + 1;
            }
        }
        (f, t)
    }

    /// P(t): the mean of the per-thread shards in use (see `update_p`; with one thread, its
    /// P(t) exactly); 0 before any arrival. A shard whose threads stopped observing keeps its
    /// last value in the mean.
    pub fn hit_frequency(&self) -> f64 {
        let (mut sum, mut used) = (0.0, 0u32);
        for shard in &self.p_shards {
            let bits = shard.0.load(Ordering::Relaxed);
            if bits != UNUSED {
                sum += f64::from_bits(bits);
                used += 1;
            }
        }
        if used == 0 {
            0.0
        } else {
            sum / f64::from(used)
        }
    }

    /// 1/P(t), the SRED estimate of the number of active flows; infinite while P = 0.
    pub fn estimated_flows(&self) -> f64 {
        let p = self.hit_frequency();
        if p > 0.0 {
            1.0 / p
        } else {
            f64::INFINITY
        }
    }

    /// T, the total occurrence (by scanning in Scan mode).
    pub fn total_occurrence(&self) -> u64 {
        match self.cfg.occurrence() {
            OccurrenceMode::Table => self.total.0.load(Ordering::Acquire),
            OccurrenceMode::Scan => self.scan(FlowId(0), &mut NoOps).1,
        }
    }

    /// F(flow), the occurrence of `flow` (by scanning in Scan mode).
    pub fn occurrence(&self, flow: FlowId) -> u64 {
        match self.cfg.occurrence() {
            OccurrenceMode::Table => self.table.occurrence(flow, mix(flow.0), &mut NoOps),
            OccurrenceMode::Scan => self.scan(flow, &mut NoOps).0,
        }
    }

    /// The validated configuration the list was built with.
    pub fn config(&self) -> &ZombieConfig {
        &self.cfg
    }

    /// Updates that left the list unchanged because the occurrence table had no reusable
    /// entry (only possible with more references in flight than M; counted, never silent).
    pub fn table_full_events(&self) -> u64 {
        self.table_full.load(Ordering::Relaxed)
    }

    /// The zombies in slot order, skipping slots still empty. A consistent picture only at
    /// quiescence.
    pub fn zombies(&self) -> Vec<Zombie> {
        self.slots
            .iter()
            .filter_map(|slot| {
                let (e, _, count) = decode(slot.word.load(Ordering::Acquire))?;
                Some(Zombie {
                    flow: self.table.key(e),
                    count,
                    stamp: Nanos(slot.stamp.load(Ordering::Relaxed)),
                })
            })
            .collect()
    }

    /// Checks the invariants of docs/algorithms/zombie-list.md; call it only when no `observe` is
    /// in flight: T == sum over zombies (count + 1) == sum over table entries F, and for every
    /// flow, F(f) from the table == sum over its zombies (count + 1). Also checks the table's own
    /// bookkeeping (no frozen entry, spill counters exact).
    pub fn check_invariants(&self) -> Result<(), InvariantError> {
        let zombies = self.zombies();
        let by_scan: u64 = zombies.iter().map(|z| z.count + 1).sum();
        let counter = self.total.0.load(Ordering::Acquire);
        if counter != by_scan {
            return Err(InvariantError::TotalVsZombies {
                counter,
                zombies: by_scan,
            });
        }
        let entries = self.table.entries_snapshot();
        let frozen = entries.iter().filter(|v| v.frozen).count();
        if frozen > 0 {
            return Err(InvariantError::Frozen(frozen));
        }
        let table: u64 = entries.iter().map(|v| v.count).sum();
        if table != by_scan {
            return Err(InvariantError::TableVsZombies {
                table,
                zombies: by_scan,
            });
        }
        let mut flows: Vec<FlowId> = entries
            .iter()
            .filter(|v| v.count > 0)
            .map(|v| v.flow)
            .chain(zombies.iter().map(|z| z.flow))
            .collect();
        flows.sort_unstable();
        flows.dedup();
        for flow in flows {
            let table = self.table.occurrence(flow, mix(flow.0), &mut NoOps);
            let by_zombies = zombies
                .iter()
                .filter(|z| z.flow == flow)
                .map(|z| z.count + 1)
                .sum();
            if table != by_zombies {
                return Err(InvariantError::Occurrence {
                    flow: flow.0,
                    table,
                    zombies: by_zombies,
                });
            }
        }
        if !self.table.spill_consistent() {
            return Err(InvariantError::Spill);
        }
        Ok(())
    }

    /// Entries in the occurrence table (at least 2 M).
    pub fn table_capacity(&self) -> usize {
        self.table.capacity()
    }
}
