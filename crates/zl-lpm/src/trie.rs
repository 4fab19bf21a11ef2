//! The multibit trie behind both families: a root table indexed by the first `root_bits` of the
//! address, then 256-entry groups, one per further byte. IPv4 is DIR-24-8 (a 24-bit root and
//! one level of groups, as DPDK's `rte_lpm`); IPv6 has a 16-bit root and up to 14 levels.
//!
//! Keys are `u128` with the address left-aligned (an IPv4 address shifted up by 96), so one
//! writer serves both widths.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use crate::entry::{self, MAX_GROUPS, MAX_VALUE};
use crate::{LpmError, LpmStats};

pub(crate) const GROUP: usize = 256;

// `zeroed_atomics` reinterprets a zeroed `[u32]` allocation as `[AtomicU32]`.
const _: () = assert!(std::mem::align_of::<u32>() == std::mem::align_of::<AtomicU32>());
const _: () = assert!(std::mem::size_of::<u32>() == std::mem::size_of::<AtomicU32>());

/// `n` zeroed atomics, allocated zeroed so that the operating system maps the pages lazily: a
/// table reserves its whole group capacity up front (the storage never moves under readers)
/// and pays memory only for the groups it uses.
/// With `huge`, the pages are asked for as transparent huge pages ([`advise_huge_pages`]).
fn zeroed_atomics(n: usize, huge: bool) -> Box<[AtomicU32]> {
    let raw = Box::into_raw(vec![0u32; n].into_boxed_slice());
    if huge {
        advise_huge_pages(
            raw as *mut u32 as usize,
            n * std::mem::size_of::<u32>(),
            false,
        );
    }
    // SAFETY: `AtomicU32` has the size, alignment (asserted above) and bit validity of `u32`,
    // so the allocation is a valid `[AtomicU32]` of the same length and is freed with the same
    // layout; the box is uniquely owned, so no other reference to it exists.
    unsafe { Box::from_raw(raw as *mut [AtomicU32]) }
}

/// Asks Linux to back the table at `addr .. addr + len` with transparent huge pages where it
/// can (`madvise(MADV_HUGEPAGE)`, for a system whose THP mode is `madvise`, the common
/// default). Used for the groups: an IPv6 lookup walks up to 14 of them at random places in
/// a table of hundreds of MiB, so with 4 KiB pages nearly every step also misses the TLB (DPDK
/// puts its tables on huge pages for the same reason). Groups are handed out in order, so the
/// 2 MiB stretches backed whole are the ones in use. The IPv4 root too, once the table is
/// large: see [`HUGE_ROOT_RULES`]; with `collapse`, the pages already mapped are gathered into
/// huge pages at once (`MADV_COLLAPSE`, Linux 6.1; older kernels leave it to `khugepaged`).
/// Only tables of at least 2 MiB; a refusal (no THP, another kernel) is harmless: the table
/// works the same on small pages.
fn advise_huge_pages(addr: usize, len: usize, collapse: bool) {
    const HUGE: usize = 2 << 20;
    if len < HUGE || cfg!(miri) {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        const PAGE: usize = 4096;
        // madvise wants a page-aligned start; the range stays inside the allocation.
        let start = addr.next_multiple_of(PAGE);
        let end = (addr + len) / PAGE * PAGE;
        // SAFETY: the range lies within the live allocation just made (rounded inwards to
        // whole pages); MADV_HUGEPAGE only changes how the kernel backs those pages, never
        // their contents or the mapping's validity, so no Rust reference is affected.
        let _ =
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
        if collapse {
            // The kernel's value (include/uapi/asm-generic/mman-common.h); the libc crate has
            // it for glibc targets only.
            const MADV_COLLAPSE: libc::c_int = 25;
            // SAFETY: as above; MADV_COLLAPSE copies the mapped small pages of the range into
            // huge pages and remaps them, contents unchanged (readers racing it see the same
            // values), and leaves the range as it was where it cannot.
            let _ =
                unsafe { libc::madvise(start as *mut libc::c_void, end - start, MADV_COLLAPSE) };
        }
    }
}

/// The IPv4 root goes onto transparent huge pages when the table reaches this many rules.
/// decided, measured in docs/performance/lpm.md: in a table of 250 k routes a lookup is one
/// random load in the 64 MiB root, and on 4 KiB pages it also misses the TLB (16 384 pages):
/// 1.33-1.67x of `rte_lpm` on hugetlbfs, against 1.04-1.12x with the root on huge pages, same
/// minutes. But a small table on 4 KiB pages maps a page per written 4 KiB and every lookup
/// that misses its routes reads the one shared zero page (cached), which huge pages would
/// lose: 1 k routes took 3-6 ns per lookup on small pages, 12-18 on huge ones (and its build
/// zeroed 64 MiB). Between the two, the root's mapped pages outgrow the TLB; 16 k rules map
/// most of the root's 4 KiB pages.
pub(crate) const HUGE_ROOT_RULES: usize = 16 * 1024;

/// Where an entry lives: the root table or a group.
#[derive(Clone, Copy)]
enum Arr {
    Root,
    Group(u32),
}

/// The entries readers see.
pub(crate) struct Tables {
    pub(crate) root: Box<[AtomicU32]>,
    pub(crate) groups: Box<[AtomicU32]>,
    pub(crate) root_bits: u32,
    width: u32,
}

/// The writer's side: the rules (to find the covering rule when one is removed), the groups'
/// generations and the free list. Behind a mutex: writers take turns; readers never touch it.
struct Writer {
    rules: Vec<HashMap<u128, u32>>,
    gens: Vec<u8>,
    free: VecDeque<u32>,
    capacity: u32,
    in_use: u32,
    entry_writes: u64,
    len: usize,
    /// The IPv4 root has been put on huge pages ([`HUGE_ROOT_RULES`]).
    root_huge: bool,
}

pub(crate) struct Trie {
    pub(crate) t: Tables,
    w: Mutex<Writer>,
}

fn mask(key: u128, len: u32) -> u128 {
    if len == 0 {
        0
    } else {
        key & (u128::MAX << (128 - len))
    }
}

/// `n` bits of `key` from bit `start` (0 = most significant).
fn bits(key: u128, start: u32, n: u32) -> usize {
    ((key >> (128 - start - n)) & ((1u128 << n) - 1)) as usize
}

impl Tables {
    fn slot(&self, arr: Arr, i: usize) -> &AtomicU32 {
        match arr {
            Arr::Root => &self.root[i],
            Arr::Group(g) => &self.groups[g as usize * GROUP + i],
        }
    }
}

impl Trie {
    pub(crate) fn new(width: u32, root_bits: u32, groups: u32) -> Trie {
        let capacity = groups.min(MAX_GROUPS);
        Trie {
            t: Tables {
                // Small pages at first: see `HUGE_ROOT_RULES`.
                root: zeroed_atomics(1 << root_bits, false),
                groups: zeroed_atomics(capacity as usize * GROUP, true),
                root_bits,
                width,
            },
            w: Mutex::new(Writer {
                rules: vec![HashMap::new(); width as usize + 1],
                gens: Vec::new(),
                free: VecDeque::new(),
                capacity,
                in_use: 0,
                entry_writes: 0,
                len: 0,
                root_huge: false,
            }),
        }
    }

    fn writer(&self) -> std::sync::MutexGuard<'_, Writer> {
        // A writer that panicked left every entry a valid value (each store is whole), so the
        // table stays usable.
        self.w.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The lookup of any width: follow pointers one byte at a time; a generation mismatch
    /// means the group was recycled under us, so start again from the root.
    #[inline]
    pub(crate) fn lookup(&self, key: u128) -> Option<u32> {
        let t = &self.t;
        'again: loop {
            // Acquire pairs with the writer's Release store of a pointer: the group's entries,
            // written before the pointer, are visible once the pointer is.
            let mut e = t.root[bits(key, 0, t.root_bits)].load(Ordering::Acquire);
            let mut start = t.root_bits;
            while entry::is_ext(e) {
                let i = entry::child(e) * GROUP + bits(key, start, 8);
                let c = t.groups[i].load(Ordering::Acquire);
                if entry::own_gen(c) != entry::child_gen(e) {
                    continue 'again;
                }
                e = c;
                start += 8;
            }
            return entry::value(e);
        }
    }

    pub(crate) fn get(&self, key: u128, len: u32) -> Option<u32> {
        let w = self.writer();
        w.rules.get(len as usize)?.get(&mask(key, len)).copied()
    }

    pub(crate) fn insert(&self, key: u128, len: u32, value: u32) -> Result<Option<u32>, LpmError> {
        if len > self.t.width {
            return Err(LpmError::PrefixTooLong {
                len,
                max: self.t.width,
            });
        }
        if value > MAX_VALUE {
            return Err(LpmError::ValueTooLarge(value));
        }
        let key = mask(key, len);
        let mut w = self.writer();
        let leaf = entry::leaf(len, value);
        let apply = |e: u32| (!entry::is_valid(e) || entry::depth(e) <= len).then_some(leaf);
        let (arr, lo, span, _) = w.descend(&self.t, key, len, true)?;
        w.apply(&self.t, arr, lo, lo + span, &apply);
        let old = w.rules[len as usize].insert(key, value);
        if old.is_none() {
            w.len += 1;
        }
        if self.t.width == 32 && !w.root_huge && w.len >= HUGE_ROOT_RULES {
            w.root_huge = true;
            let root = &self.t.root;
            advise_huge_pages(root.as_ptr() as usize, std::mem::size_of_val(&**root), true);
        }
        Ok(old)
    }

    pub(crate) fn remove(&self, key: u128, len: u32) -> Option<u32> {
        let key = mask(key, len);
        let mut w = self.writer();
        let old = w.rules.get_mut(len as usize)?.remove(&key)?;
        w.len -= 1;
        let replacement = (0..len)
            .rev()
            .find_map(|l| {
                let v = w.rules[l as usize].get(&mask(key, l))?;
                Some(entry::leaf(l, *v))
            })
            .unwrap_or(0);
        let apply = |e: u32| (entry::is_valid(e) && entry::depth(e) == len).then_some(replacement);
        // Every group on the path exists: a group is only collapsed into a leaf no deeper than
        // its parent entry, and this rule is deeper.
        if let Ok((arr, lo, span, path)) = w.descend(&self.t, key, len, false) {
            w.apply(&self.t, arr, lo, lo + span, &apply);
            w.collapse(&self.t, &path);
        }
        Some(old)
    }

    pub(crate) fn len(&self) -> usize {
        self.writer().len
    }

    pub(crate) fn stats(&self) -> LpmStats {
        let w = self.writer();
        LpmStats {
            rules: w.len,
            groups_in_use: w.in_use as usize,
            group_capacity: w.capacity as usize,
            entry_writes: w.entry_writes,
            root_bytes: self.t.root.len() * 4,
            group_bytes_touched: w.gens.len() * GROUP * 4,
        }
    }
}

/// A step of a descent: the entry `idx` of `parent` points to `group`, which covers the bits
/// from `start`.
struct Step {
    parent: Arr,
    idx: usize,
    group: u32,
    start: u32,
}

impl Writer {
    fn own_gen(&self, arr: Arr) -> u32 {
        match arr {
            Arr::Root => 0,
            Arr::Group(g) => u32::from(self.gens[g as usize]),
        }
    }

    fn store(&mut self, t: &Tables, arr: Arr, i: usize, e: u32) {
        // Release: a pointer is stored after its group is filled (see `lookup`).
        t.slot(arr, i).store(e, Ordering::Release);
        self.entry_writes += 1;
    }

    /// Finds the entries a rule of `len` covers: the array, first index and count, and the
    /// path of groups to it. With `grow`, a leaf on the way is split into a group of 256
    /// copies of itself; without, the descent stops with `TableFull` at a leaf.
    fn descend(
        &mut self,
        t: &Tables,
        key: u128,
        len: u32,
        grow: bool,
    ) -> Result<(Arr, usize, usize, Vec<Step>), LpmError> {
        let r = t.root_bits;
        if len <= r {
            let span = 1usize << (r - len);
            return Ok((Arr::Root, bits(key, 0, r) & !(span - 1), span, Vec::new()));
        }
        let mut path = Vec::new();
        let (mut arr, mut idx, mut start) = (Arr::Root, bits(key, 0, r), r);
        loop {
            let e = t.slot(arr, idx).load(Ordering::Relaxed);
            let g = if entry::is_ext(e) {
                entry::child(e) as u32
            } else if grow {
                self.split(t, arr, idx, e)?
            } else {
                return Err(LpmError::TableFull);
            };
            path.push(Step {
                parent: arr,
                idx,
                group: g,
                start,
            });
            let byte = bits(key, start, 8);
            if len <= start + 8 {
                let span = 1usize << (start + 8 - len);
                return Ok((Arr::Group(g), byte & !(span - 1), span, path));
            }
            (arr, idx, start) = (Arr::Group(g), byte, start + 8);
        }
    }

    /// Replaces leaf `e` at `arr[idx]` with a pointer to a new group of 256 copies of it.
    fn split(&mut self, t: &Tables, arr: Arr, idx: usize, e: u32) -> Result<u32, LpmError> {
        // FIFO reuse: a recycled group goes to the back, so a group's generation (5 bits)
        // wraps only after 32 reuses of every free group, not of this one.
        let g = match self.free.pop_front() {
            Some(g) => g,
            None if (self.gens.len() as u32) < self.capacity => {
                self.gens.push(0);
                self.gens.len() as u32 - 1
            }
            None => return Err(LpmError::TableFull),
        };
        let gen = (u32::from(self.gens[g as usize]) + 1) & ((1 << entry::GEN_BITS) - 1);
        self.gens[g as usize] = gen as u8;
        self.in_use += 1;
        let fill = entry::with_gen(e, gen);
        for i in 0..GROUP {
            t.slot(Arr::Group(g), i).store(fill, Ordering::Relaxed);
        }
        self.entry_writes += GROUP as u64;
        let own = self.own_gen(arr);
        self.store(t, arr, idx, entry::pointer(own, g, gen));
        Ok(g)
    }

    /// Rewrites the leaves in `arr[lo..hi]` (and in every group below them) for which `f`
    /// gives a new leaf.
    fn apply(
        &mut self,
        t: &Tables,
        arr: Arr,
        lo: usize,
        hi: usize,
        f: &dyn Fn(u32) -> Option<u32>,
    ) {
        let own = self.own_gen(arr);
        for i in lo..hi {
            let e = t.slot(arr, i).load(Ordering::Relaxed);
            if entry::is_ext(e) {
                self.apply(t, Arr::Group(entry::child(e) as u32), 0, GROUP, f);
            } else if let Some(new) = f(e & !entry::GEN_MASK) {
                let new = entry::with_gen(new, own);
                if new != e {
                    self.store(t, arr, i, new);
                }
            }
        }
    }

    /// Folds the groups of `path`, deepest first, whose 256 entries are one leaf no deeper
    /// than the parent entry back into that entry, and frees them.
    fn collapse(&mut self, t: &Tables, path: &[Step]) {
        for s in path.iter().rev() {
            let first = t.slot(Arr::Group(s.group), 0).load(Ordering::Relaxed);
            let uniform = !entry::is_ext(first)
                && (!entry::is_valid(first) || entry::depth(first) <= s.start)
                && (1..GROUP)
                    .all(|i| t.slot(Arr::Group(s.group), i).load(Ordering::Relaxed) == first);
            if !uniform {
                return;
            }
            let own = self.own_gen(s.parent);
            self.store(t, s.parent, s.idx, entry::with_gen(first, own));
            // A reader still inside the group reads the same leaf (the group is left as it
            // is until reused) or, once reused, a new generation and starts again.
            self.free.push_back(s.group);
            self.in_use -= 1;
        }
    }
}
