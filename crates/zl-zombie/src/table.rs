//! The occurrence lookup table of ZL-RED §5.2.3 (docs/algorithms/zombie-list.md), lock-free.
//!
//! Each entry maps a flow id to F, the summed `(count + 1)` of the zombies that refer to it.
//! Size: at least 2 x M entries (the paper's figure; at most M flows are ever in the list),
//! grouped three to a bucket. decided (beyond the paper, which gives the size and closed hashing
//! only): a bucket is split into two half cache lines in two arrays: its three keys and its
//! spill counter (what every lookup reads; written only when an entry is claimed for another
//! flow), and its three state words (written whenever a zombie takes or drops a reference). So
//! a lookup for a flow with no entry (about half of all lookups) reads only the key half, which
//! another core rarely writes; with keys and state words in one line, the F lookup was where two
//! threads sharing the list lost their time (measured: docs/performance/zl-zombie.md).
//! Closed hashing with rehash: a flow probes buckets `b_j = h1 + j * h2 (mod buckets)`, two
//! hash functions of its id (the low and high halves of one 64-bit mix; `h2` odd, the bucket
//! count a power of two, so the sequence visits every bucket once). No chaining, no pointers.
//!
//! # Entry word
//! `key: AtomicU64` holds the flow id; `meta: AtomicU64` packs
//! `state (2 bits) | generation (14 bits) | count (48 bits)`:
//! - `EMPTY`: never used since the table was built.
//! - `LIVE`: `key` is valid for this generation; `count` is F plus reservations in flight.
//!   A live entry whose count is 0 is *dead*: its flow has no zombie, and the entry may be
//!   revived by its own flow (count 0 -> 1 by CAS) or reused for another flow.
//! - `FROZEN`: being claimed by one thread, which owns `key` until it publishes
//!   `LIVE | generation + 1 | 1` with a release store. Nobody waits on a frozen entry: every
//!   other thread skips it, so a stalled claimer blocks one entry, never the table.
//!
//! The `count` only ever moves by CAS or by a fetch-add/sub of a reference its caller holds, and
//! an entry is claimed (frozen) only by a CAS from count 0, so "count 0" and "key changes"
//! are decided by one compare-and-swap on one word: the key cannot change under a reference.
//!
//! # Spill counters (keeping lookups O(1) with reuse)
//! decided (beyond the paper, whose table never reuses an entry): reusing dead entries means slots
//! never return to `EMPTY`, so "stop at the first empty slot" would make lookups scan the whole
//! table after a long run. Instead each bucket counts, in `spill`, the entries (live or dead) whose
//! flow's probe sequence passed through it before reaching the entry's own bucket. A lookup for f
//! scans `b_0`, and goes on to `b_1` only if `spill(b_0) > 0`, and so on. A claimer raises the
//! spill counters on its path before it publishes the entry; whoever reuses the entry for another
//! flow lowers the old flow's path after freezing it. So an entry is always visible to a lookup for
//! its key.
//!
//! # Duplicates
//! Two threads inserting the same absent flow at once may each claim an entry (the second
//! skips the first one's frozen entry). Nothing breaks: zombies refer to entries by index,
//! every count delta goes to the referenced entry, and F(f) is the sum over the entries keyed
//! f on f's lookup path. Sequential runs never create duplicates.

use zl_core::FlowId;

use crate::ops::OpSink;
use crate::primitive::{AtomicU64, Ordering};

const ENTRIES_PER_BUCKET: usize = 3;

const STATE_SHIFT: u32 = 62;
const EMPTY: u64 = 0;
const LIVE: u64 = 1;
const FROZEN: u64 = 2;
const GEN_SHIFT: u32 = 48;
const GEN_MASK: u64 = (1 << 14) - 1;
const COUNT_MASK: u64 = (1 << GEN_SHIFT) - 1;

#[inline]
fn pack(state: u64, generation: u64, count: u64) -> u64 {
    (state << STATE_SHIFT) | ((generation & GEN_MASK) << GEN_SHIFT) | count
}

#[inline]
fn state(meta: u64) -> u64 {
    meta >> STATE_SHIFT
}

/// `state(meta) == LIVE`, by its one bit: the states are `EMPTY`, `LIVE` and `FROZEN` only
/// (`pack` is given no other, and a count never carries into the generation), so `LIVE` is the
/// one with bit 62 set. One bit test where the two-bit compare takes five instructions on the
/// F lookup's path.
#[inline]
fn is_live(meta: u64) -> bool {
    debug_assert!(matches!(state(meta), EMPTY | LIVE | FROZEN));
    meta & (LIVE << STATE_SHIFT) != 0
}

#[inline]
fn generation(meta: u64) -> u64 {
    (meta >> GEN_SHIFT) & GEN_MASK
}

#[inline]
fn count(meta: u64) -> u64 {
    meta & COUNT_MASK
}

/// A flow id's hash, whose halves serve as the two hash functions (and whose top 16 bits tag
/// the flow in a zombie slot word): one multiply by the odd golden-ratio constant, the
/// product's high half folded into its low. Each step is a bijection, so distinct ids keep
/// distinct hashes; every bit of the id reaches the product's high half, so both the low half
/// (the first bucket) and the high half (the step and the tag). Where it places a flow never
/// changes F, T or Hit (the lookup is exact), only how far a lookup probes. decided: one
/// multiply, not SplitMix64's finalizer (two multiplies, and about 8 instructions more on
/// every observation); the ids are themselves hashes of the flow keys in the data plane. The
/// id's high half is not folded in before the multiply (the product's high half already
/// depends on every bit of the id): 3 instructions less on every observation, and
/// the same hash as with that fold for every id below 2^32 (the loom models' flows).
#[inline]
pub(crate) fn mix(x: u64) -> u64 {
    let z = x.wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z ^ (z >> 32)
}

/// F(flow) over one bucket's entries (keys `bucket`, state words `metas`): the counts of the
/// live entries keyed `flow`, each key confirmed by reloading its state word (see
/// [`OccurrenceTable::occurrence`]).
#[inline(always)]
fn bucket_occurrence<S: OpSink>(bucket: &Bucket, metas: &Metas, flow: FlowId, ops: &mut S) -> u64 {
    let mut f = 0;
    for (key, meta) in bucket.keys.iter().zip(&metas.0) {
        loop {
            ops.table_probe();
            // Most entries belong to other flows: the key alone rules them out.
            // Relaxed: a stale key only means reading before a claim, as a stale state
            // word would; this thread's own claims and reservations are always seen.
            if key.load(Ordering::Relaxed) != flow.0 {
                break;
            }
            // The state word's half line is read only for the flow's own entries.
            let m = meta.load(Ordering::Acquire);
            // Acquire: pairs with the claimer's release store of the key, and keeps
            // the reload below after this load.
            if !is_live(m) || key.load(Ordering::Acquire) != flow.0 {
                break;
            }
            // Relaxed: ordered after the acquire load of the key. Same state and
            // generation (the bits above the count) as `m`, which is live.
            let again = meta.load(Ordering::Relaxed);
            if (again ^ m) >> GEN_SHIFT == 0 {
                f += count(m);
                break;
            }
        }
    }
    f
}

/// What [`reserve_in_bucket`] found.
enum InBucket {
    /// The flow's live entry in this slot of the bucket, its count raised.
    Taken(usize),
    /// No entry keyed the flow here: the walk goes on if the bucket spilled.
    Absent,
    /// An entry keyed the flow in the way (not live, its key changed, the CAS failed).
    Stop,
}

/// [`OccurrenceTable::reserve_live`]'s step over one bucket (keys `bucket`, state words
/// `metas`): the first entry keyed `flow`, taken by one CAS if it is live. On success it
/// counts `probes` (the entries and spill counters read before this bucket) and this
/// bucket's entries up to the match as probes, and one write for the CAS.
#[inline(always)]
fn reserve_in_bucket<S: OpSink>(
    bucket: &Bucket,
    metas: &Metas,
    flow: FlowId,
    probes: usize,
    ops: &mut S,
) -> InBucket {
    for (s, (key, meta)) in bucket.keys.iter().zip(&metas.0).enumerate() {
        // Relaxed: only a filter; the checks below decide.
        if key.load(Ordering::Relaxed) != flow.0 {
            continue;
        }
        let m = meta.load(Ordering::Acquire);
        if !is_live(m) || key.load(Ordering::Relaxed) != flow.0 {
            return InBucket::Stop;
        }
        if meta
            .compare_exchange(m, m + 1, Ordering::AcqRel, Ordering::Relaxed)
            .is_err()
        {
            return InBucket::Stop;
        }
        for _ in 0..probes + s + 1 {
            ops.table_probe();
        }
        ops.table_write();
        return InBucket::Taken(s);
    }
    InBucket::Absent
}

/// One entry: its key and its state word, which live in the two arrays.
#[derive(Debug)]
struct Entry<'a> {
    key: &'a AtomicU64,
    meta: &'a AtomicU64,
}

/// A bucket's keys and spill counter: what every lookup reads, written only when an entry is
/// claimed for another flow (half a cache line).
#[repr(align(32))]
#[derive(Debug)]
struct Bucket {
    keys: [AtomicU64; ENTRIES_PER_BUCKET],
    spill: AtomicU64,
}

/// A bucket's state words, written on every reference taken or dropped (half a cache line).
#[repr(align(32))]
#[derive(Debug)]
struct Metas([AtomicU64; ENTRIES_PER_BUCKET]);

/// A flow's first bucket: its keys and its state words.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Home<'a> {
    bucket: &'a Bucket,
    metas: &'a Metas,
}

impl Home<'_> {
    /// [`OccurrenceTable::prefetch`] of this bucket.
    #[inline]
    pub(crate) fn prefetch(self) {
        self.bucket.spill.load(Ordering::Relaxed);
    }
}

/// A flow's probe sequence over the buckets.
#[derive(Clone, Copy)]
struct Probe {
    first: usize,
    step: usize,
}

/// The lock-free occurrence table; entry indices are stable for the table's lifetime.
#[derive(Debug)]
pub(crate) struct OccurrenceTable {
    buckets: Box<[Bucket]>,
    metas: Box<[Metas]>,
    mask: usize,
}

/// One entry as seen by [`OccurrenceTable::entries_snapshot`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct EntryView {
    pub(crate) flow: FlowId,
    pub(crate) count: u64,
    pub(crate) frozen: bool,
}

impl OccurrenceTable {
    /// A table of at least `2 m` entries.
    pub(crate) fn new(m: usize) -> Self {
        let buckets = (2 * m).div_ceil(ENTRIES_PER_BUCKET).next_power_of_two();
        let buckets: Box<[Bucket]> = (0..buckets)
            .map(|_| Bucket {
                keys: std::array::from_fn(|_| AtomicU64::new(0)),
                spill: AtomicU64::new(0),
            })
            .collect();
        let metas: Box<[Metas]> = (0..buckets.len())
            .map(|_| Metas(std::array::from_fn(|_| AtomicU64::new(pack(EMPTY, 0, 0)))))
            .collect();
        let mask = buckets.len() - 1;
        OccurrenceTable {
            buckets,
            metas,
            mask,
        }
    }

    /// Number of entries (indices are `0..capacity()`).
    pub(crate) fn capacity(&self) -> usize {
        self.buckets.len() * ENTRIES_PER_BUCKET
    }

    #[inline]
    fn probe(&self, flow: FlowId) -> Probe {
        self.probe_hashed(mix(flow.0))
    }

    #[inline]
    fn probe_hashed(&self, h: u64) -> Probe {
        Probe {
            first: h as usize & self.mask,
            step: ((h >> 32) as usize | 1) & self.mask,
        }
    }

    #[inline]
    fn bucket_at(&self, p: Probe, j: usize) -> usize {
        p.first.wrapping_add(j.wrapping_mul(p.step)) & self.mask
    }

    #[inline]
    fn entry(&self, e: usize) -> Entry<'_> {
        let (b, s) = (e / ENTRIES_PER_BUCKET, e % ENTRIES_PER_BUCKET);
        Entry {
            key: &self.buckets[b].keys[s],
            meta: &self.metas[b].0[s],
        }
    }

    /// Entry `e`'s state word alone (one bounds check, not `entry`'s two).
    #[inline]
    fn meta(&self, e: usize) -> &AtomicU64 {
        &self.metas[e / ENTRIES_PER_BUCKET].0[e % ENTRIES_PER_BUCKET]
    }

    /// Entry `e`'s key alone.
    #[inline]
    fn key_word(&self, e: usize) -> &AtomicU64 {
        &self.buckets[e / ENTRIES_PER_BUCKET].keys[e % ENTRIES_PER_BUCKET]
    }

    /// The entries of bucket `b`, in order.
    #[inline]
    fn bucket_entries(&self, b: usize) -> impl Iterator<Item = Entry<'_>> {
        self.buckets[b]
            .keys
            .iter()
            .zip(self.metas[b].0.iter())
            .map(|(key, meta)| Entry { key, meta })
    }

    /// The flow entry `e` belongs to. Meaningful while the caller knows `e` is referenced:
    /// a referenced entry is live and its key cannot change (module doc).
    #[inline]
    pub(crate) fn key(&self, e: usize) -> FlowId {
        // Relaxed: the key is visible through the caller's acquire load of the zombie slot
        // that refers to `e`: that slot was written (AcqRel CAS) after its writer's reservation
        // acquired the entry's meta word, which `reserve` released after storing the key. (The
        // key's own release store serves `occurrence`'s recheck, not this load.)
        FlowId(self.key_word(e).load(Ordering::Relaxed))
    }

    /// Adds one reference to `e`, which a zombie slot referred to when the caller read it.
    /// Fails (returns false) when the entry no longer has any reference, i.e. that zombie
    /// has changed since; the caller then rereads the slot.
    #[inline]
    pub(crate) fn reserve_referenced<S: OpSink>(&self, e: usize, ops: &mut S) -> bool {
        let meta = self.meta(e);
        ops.table_probe();
        let mut m = meta.load(Ordering::Acquire);
        loop {
            if state(m) != LIVE || count(m) == 0 {
                return false;
            }
            ops.table_write();
            match meta.compare_exchange_weak(m, m + 1, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return true,
                Err(now) => m = now,
            }
        }
    }

    /// Adds one reference to `flow`'s entry, reviving its dead entry or claiming a new one
    /// when it has none. Returns the entry's index, or `None` when every entry is live or
    /// frozen (impossible while fewer than `2 M` references are in flight at once).
    /// `h` is `mix(flow)`.
    ///
    /// Most calls (a swap in of a flow that has zombies or had them lately) find the flow's
    /// live entry: [`OccurrenceTable::reserve_live`] takes that case in line, walking the
    /// lookup path by keys as the F lookup does; every other case goes through
    /// [`OccurrenceTable::reserve_any`], out of line.
    #[inline]
    pub(crate) fn reserve<S: OpSink>(&self, flow: FlowId, h: u64, ops: &mut S) -> Option<usize> {
        match self.reserve_live(flow, h, ops) {
            Some(e) => Some(e),
            None => self.reserve_any(flow, h, ops),
        }
    }

    /// [`OccurrenceTable::reserve`] when the first live entry keyed `flow` on its lookup path
    /// takes the reference at once: that entry, with its count raised by one CAS, the entry
    /// and the result `reserve_any` would give (it reaches the same entry first, since every
    /// bucket before it has spilled; module doc). `None`, with nothing changed and nothing
    /// counted, when there is no such entry or anything in the way (an entry keyed `flow`
    /// not live, its key changed, the CAS failed): the caller then goes through
    /// `reserve_any`. The checks before the CAS are `reserve_any`'s: the state word loaded
    /// (acquire), live, then the key compared (ordered after that load); a newer key than
    /// the state word's generation makes the CAS fail. On success it counts the operations
    /// `reserve_any` would have counted for the same walk: one probe per entry examined
    /// before the match and per spill counter read, one write for the CAS.
    ///
    /// The flow's first bucket is read in line; a walk on past it (its spill counter not 0,
    /// rare in a table at most half full) goes on in [`OccurrenceTable::reserve_live_spilled`],
    /// out of line, with the same loads in the same order (in line, the walk's set-up holds
    /// registers that a swap then saves and restores on every call).
    #[inline(always)]
    pub(crate) fn reserve_live<S: OpSink>(
        &self,
        flow: FlowId,
        h: u64,
        ops: &mut S,
    ) -> Option<usize> {
        let b = self.probe_hashed(h).first;
        // Unchecked: `b` is masked like every caller's index (see `bucket_masked`).
        let (bucket, metas) = self.bucket_masked(b);
        match reserve_in_bucket(bucket, metas, flow, 0, ops) {
            InBucket::Taken(s) => return Some(b * ENTRIES_PER_BUCKET + s),
            InBucket::Stop => return None,
            InBucket::Absent => {}
        }
        if bucket.spill.load(Ordering::Acquire) == 0 || self.buckets.len() == 1 {
            return None;
        }
        self.reserve_live_spilled(flow, h, ops)
    }

    /// The rest of [`OccurrenceTable::reserve_live`]'s walk, after a first bucket that held no
    /// entry keyed `flow` and spilled: `b_1, b_2, ...` until a bucket nothing spilled past, or
    /// every bucket visited.
    #[cold]
    #[inline(never)]
    fn reserve_live_spilled<S: OpSink>(&self, flow: FlowId, h: u64, ops: &mut S) -> Option<usize> {
        let p = self.probe_hashed(h);
        let mut b = p.first;
        // The first bucket's entries and spill counter, for the op counts.
        let mut probes = ENTRIES_PER_BUCKET + 1;
        for _ in 1..self.buckets.len() {
            b = b.wrapping_add(p.step) & self.mask;
            let (bucket, metas) = self.bucket_masked(b);
            match reserve_in_bucket(bucket, metas, flow, probes, ops) {
                InBucket::Taken(s) => return Some(b * ENTRIES_PER_BUCKET + s),
                InBucket::Stop => return None,
                InBucket::Absent => {}
            }
            probes += ENTRIES_PER_BUCKET + 1;
            if bucket.spill.load(Ordering::Acquire) == 0 {
                return None;
            }
        }
        None
    }

    /// [`OccurrenceTable::reserve`], every case: the flow's live entry, or its dead one
    /// revived, or a new one claimed.
    #[inline(never)]
    pub(crate) fn reserve_any<S: OpSink>(
        &self,
        flow: FlowId,
        h: u64,
        ops: &mut S,
    ) -> Option<usize> {
        let p = self.probe_hashed(h);
        let buckets = self.buckets.len();
        'retry: loop {
            // First reusable entry seen: (index, its meta word, its bucket's position j).
            let mut candidate: Option<(usize, u64, usize)> = None;
            for j in 0..buckets {
                let b = self.bucket_at(p, j);
                let bucket = &self.buckets[b];
                for (s, entry) in self.bucket_entries(b).enumerate() {
                    let e = b * ENTRIES_PER_BUCKET + s;
                    ops.table_probe();
                    let m = entry.meta.load(Ordering::Acquire);
                    match state(m) {
                        LIVE => {
                            // Relaxed: ordered after the acquire load of `m`; a newer key than
                            // `m`'s generation makes the CAS below fail.
                            if entry.key.load(Ordering::Relaxed) == flow.0 {
                                ops.table_write();
                                if entry
                                    .meta
                                    .compare_exchange(m, m + 1, Ordering::AcqRel, Ordering::Relaxed)
                                    .is_ok()
                                {
                                    return Some(e);
                                }
                                continue 'retry;
                            }
                            if count(m) == 0 && candidate.is_none() {
                                candidate = Some((e, m, j));
                            }
                        }
                        EMPTY if candidate.is_none() => candidate = Some((e, m, j)),
                        _ => {}
                    }
                }
                ops.table_probe();
                if bucket.spill.load(Ordering::Acquire) == 0 && candidate.is_some() {
                    break;
                }
            }
            let (e, m, j) = candidate?;
            let entry = self.entry(e);
            ops.table_write();
            // Acquire: the old key below was written before the release that made `m` live.
            if entry
                .meta
                .compare_exchange(
                    m,
                    pack(FROZEN, generation(m), 0),
                    Ordering::Acquire,
                    Ordering::Relaxed,
                )
                .is_err()
            {
                continue 'retry;
            }
            // The entry is ours until the release store below.
            if state(m) == LIVE {
                let old = FlowId(entry.key.load(Ordering::Relaxed));
                self.adjust_spill(old, e / ENTRIES_PER_BUCKET, false, ops);
            }
            self.adjust_spill(flow, self.bucket_at(p, j), true, ops);
            ops.table_write();
            // Release: a reader that loads this key also sees the entry frozen (or later), so
            // it cannot pair the key with the previous generation's count (`occurrence`).
            entry.key.store(flow.0, Ordering::Release);
            ops.table_write();
            // Release: publishes the key and the spill increments with the live state.
            entry
                .meta
                .store(pack(LIVE, generation(m) + 1, 1), Ordering::Release);
            return Some(e);
        }
    }

    /// Raises (or lowers) the spill counter of every bucket `flow` probes before `target`.
    fn adjust_spill<S: OpSink>(&self, flow: FlowId, target: usize, raise: bool, ops: &mut S) {
        let p = self.probe(flow);
        for j in 0..self.buckets.len() {
            let b = self.bucket_at(p, j);
            if b == target {
                return;
            }
            ops.table_write();
            if raise {
                self.buckets[b].spill.fetch_add(1, Ordering::AcqRel);
            } else {
                self.buckets[b].spill.fetch_sub(1, Ordering::AcqRel);
            }
        }
    }

    /// Starts loading the key half of `h`'s first bucket, so that its cache miss overlaps the
    /// zombie slot's instead of following it (the F lookup that ends every observation reads
    /// it). A plain load whose value is discarded: a prefetch without `unsafe`. Also loading
    /// the state-word half here was measured slower (docs/performance/zl-zombie.md). An
    /// atomic load is never removed as dead (the compiler counts it as a memory effect), so it
    /// needs no `black_box`, which stored the value to the stack.
    #[inline]
    pub(crate) fn prefetch(&self, h: u64) {
        self.home(h).prefetch();
    }

    /// Adds `n` references to `e`, on which the caller already holds one.
    pub(crate) fn add(&self, e: usize, n: u64) {
        self.meta(e).fetch_add(n, Ordering::AcqRel);
    }

    /// Drops `n` references the caller holds on `e`. At zero the entry is dead and reusable.
    #[inline]
    pub(crate) fn release<S: OpSink>(&self, e: usize, n: u64, ops: &mut S) {
        ops.table_write();
        // Release: the zombie slot change that dropped these references happens before any
        // claimer that acquires the zero count and reuses the entry.
        self.meta(e).fetch_sub(n, Ordering::AcqRel);
    }

    /// F(flow): the counts of the live entries keyed `flow` on its lookup path; `h` is
    /// `mix(flow)`.
    ///
    /// The state word and the key are two loads, so an entry can be recycled between them: its
    /// old flow's last references released, then claimed for another flow (frozen, new key,
    /// live again under the next generation). A reader that paired the old count with the new
    /// key would add the old flow's F to the new flow's. So, as a seqlock reader does, a key
    /// that matches is confirmed by reloading the state word: the same generation, still live,
    /// means the key was that generation's (the claimer stores the key with release after
    /// freezing the entry, so a reader that acquired the new key sees at least the frozen
    /// state); otherwise the entry is read again (someone else's claim completed or is under
    /// way: lock-free). A count that moved between the two loads is still this flow's: either
    /// value is F at some instant. `tests/loom.rs` (`occurrence_never_counts_a_recycled_entry`)
    /// finds the mixed read without the reload. Each entry's key is compared first, so the
    /// entries of other flows cost one load each (reading every entry's state word first
    /// makes `observe` and ZL-RED about 10% slower at M = 1000).
    ///
    /// The flow's first bucket is read in line (the F lookup that ends every observation,
    /// where a call's prologue and spills were a fifth of its cost); a lookup that must go on
    /// past it (its spill counter is not 0, rare in a table at most half full) walks the rest
    /// of the path in [`OccurrenceTable::occurrence_spilled`], out of line, so that the
    /// common case carries none of the walk's set-up (the step, the bucket count).
    #[inline(always)]
    pub(crate) fn occurrence<S: OpSink>(&self, flow: FlowId, h: u64, ops: &mut S) -> u64 {
        self.occurrence_from(self.home(h), flow, h, ops)
    }

    /// `h`'s first bucket (its keys and state words), found once for an observation's
    /// prefetch and its F lookup: the lookup after the list's atomics then does not load the
    /// table's fields and bounds-check the index again. Without bounds checks (the index is
    /// masked; see `bucket_masked`).
    #[inline(always)]
    pub(crate) fn home(&self, h: u64) -> Home<'_> {
        let (bucket, metas) = self.bucket_masked(self.probe_hashed(h).first);
        Home { bucket, metas }
    }

    /// Bucket `b & mask`'s keys and state words, without a bounds check. Every
    /// caller's index is masked already, so the mask here folds into theirs.
    #[inline(always)]
    #[allow(unsafe_code)]
    fn bucket_masked(&self, b: usize) -> (&Bucket, &Metas) {
        let b = b & self.mask;
        debug_assert!(b < self.buckets.len() && b < self.metas.len());
        // SAFETY: `new` sets `mask = buckets.len() - 1` with `buckets.len()` a power of two
        // and `metas.len() == buckets.len()`, and none of the three changes after `new` (the
        // fields are private and never assigned again). So `b & mask < buckets.len() ==
        // metas.len()`.
        unsafe { (self.buckets.get_unchecked(b), self.metas.get_unchecked(b)) }
    }

    /// [`OccurrenceTable::occurrence`] from `h`'s [`OccurrenceTable::home`].
    #[inline(always)]
    pub(crate) fn occurrence_from<S: OpSink>(
        &self,
        home: Home<'_>,
        flow: FlowId,
        h: u64,
        ops: &mut S,
    ) -> u64 {
        let bucket = home.bucket;
        let f = bucket_occurrence(bucket, home.metas, flow, ops);
        ops.table_probe();
        if bucket.spill.load(Ordering::Acquire) == 0 {
            return f;
        }
        f + self.occurrence_spilled(flow, h, ops)
    }

    /// The rest of [`OccurrenceTable::occurrence`]'s walk, after a first bucket that spilled:
    /// F over `b_1, b_2, ...` until a bucket nothing spilled past, or every bucket visited.
    /// The probe walks `b_j` by adding `step` (`b_{j+1} = b_j + step mod buckets`, the same
    /// sequence as [`OccurrenceTable::bucket_at`]).
    #[cold]
    #[inline(never)]
    fn occurrence_spilled<S: OpSink>(&self, flow: FlowId, h: u64, ops: &mut S) -> u64 {
        let p = self.probe_hashed(h);
        let mut f = 0;
        let mut b = p.first;
        // Buckets left to visit after the first.
        for _ in 1..self.buckets.len() {
            b = b.wrapping_add(p.step) & self.mask;
            let bucket = &self.buckets[b];
            f += bucket_occurrence(bucket, &self.metas[b], flow, ops);
            ops.table_probe();
            if bucket.spill.load(Ordering::Acquire) == 0 {
                break;
            }
        }
        f
    }

    /// Every non-empty entry, for invariant checks at quiescence.
    pub(crate) fn entries_snapshot(&self) -> Vec<EntryView> {
        let mut out = Vec::new();
        for b in 0..self.buckets.len() {
            for entry in self.bucket_entries(b) {
                let m = entry.meta.load(Ordering::Acquire);
                if state(m) != EMPTY {
                    out.push(EntryView {
                        flow: FlowId(entry.key.load(Ordering::Relaxed)),
                        count: count(m),
                        frozen: state(m) == FROZEN,
                    });
                }
            }
        }
        out
    }

    /// Whether every spill counter equals what the live entries' positions imply
    /// (at quiescence).
    pub(crate) fn spill_consistent(&self) -> bool {
        let mut expected = vec![0u64; self.buckets.len()];
        for b in 0..self.buckets.len() {
            for entry in self.bucket_entries(b) {
                let m = entry.meta.load(Ordering::Acquire);
                if state(m) == LIVE {
                    let p = self.probe(FlowId(entry.key.load(Ordering::Relaxed)));
                    for j in 0..self.buckets.len() {
                        let pb = self.bucket_at(p, j);
                        if pb == b {
                            break;
                        }
                        expected[pb] += 1;
                    }
                }
            }
        }
        self.buckets
            .iter()
            .zip(&expected)
            .all(|(bucket, &want)| bucket.spill.load(Ordering::Acquire) == want)
    }
}
