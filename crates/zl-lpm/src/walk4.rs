//! The IPv4 walks (DIR-24-8: one root load, at most one group load): one address at a time
//! ([`Tables::lookup4`]) and a batch ([`Tables::lookup4_bulk`]). Both return what the plain
//! walk of any width (`Trie::lookup`, the reference they are tested against in
//! `tests/walks.rs`) returns.
//!
//! Where the time goes (docs/performance/lpm.md has the measurements): in a table of
//! hundreds of thousands of routes the root entry of a random address is a cache miss (and,
//! on 4 KiB pages, a TLB miss) in a 64 MiB table; the instructions around it are a dozen.
//! What a loop of lookups gains comes from several misses in flight at once. The batch loads
//! the root entries of all its addresses before it looks at any of them, so no branch on a
//! loaded entry (leaf or pointer?) stands between two misses; then it follows the few pointers.
//! The root is indexed through a fixed-size array reference (`root4`, one length check per
//! call), so the top 24 bits of a `u32` index it with no bounds check.

use std::sync::atomic::{AtomicU32, Ordering};

use crate::entry::{self, same_gen};
use crate::trie::{Tables, GROUP};

/// The most addresses [`Tables::lookup4_bulk`] walks together: a poll loop's burst.
pub const BULK: usize = 32;

const ROOT4: usize = 1 << 24;

impl Tables {
    /// The IPv4 root as an array of its exact size.
    #[inline(always)]
    fn root4(&self) -> &[AtomicU32; ROOT4] {
        (&*self.root)
            .try_into()
            .expect("an IPv4 table's root has 2^24 entries")
    }

    /// The group entry for the last byte of `addr` under pointer `e`, or `None` when it is not
    /// an entry of the group `e` was linked to (recycled, or not yet filled as far as this
    /// reader sees): the caller reads the root again.
    #[inline(always)]
    fn group4(&self, e: u32, addr: u32) -> Option<u32> {
        // Relaxed: see `lookup4`.
        let c =
            self.groups[(entry::child(e) * GROUP) | (addr & 0xff) as usize].load(Ordering::Relaxed);
        same_gen(c, e).then_some(c)
    }

    /// The longest match for the host-order `addr` in a table with a 24-bit root (IPv4): the
    /// walk of `Trie::lookup`, a generation mismatch restarting from the root, but with
    /// Relaxed loads. Why that is enough: a root leaf is its own answer (nothing read after it
    /// depends on it); and a group entry is accepted only if it carries the generation the
    /// pointer was linked with, which only the writes made since the group was (re)allocated
    /// carry: the fill before the pointer was published and later changes, both a value
    /// before or after a change. What a reader could see without the Acquire that pairs with
    /// the pointer's Release store is the group's content from before it was filled, of an
    /// older generation (zero, generation 0, for a group never used; a group's first
    /// generation is 1), so it reads the root again, as for a recycled group. Why it matters:
    /// an Acquire load in a loop keeps the compiler from hoisting the root's address and
    /// length out of a caller's loop of lookups; they were reloaded and compared at every
    /// lookup, 20-22 instructions and 4-5 loads per lookup against 15 and 2 now
    /// (docs/performance/lpm.md).
    #[inline]
    pub(crate) fn lookup4(&self, addr: u32) -> Option<u32> {
        let root = self.root4();
        let mut e = root[(addr >> 8) as usize].load(Ordering::Relaxed);
        // The loop only behind a pointer: with the first root load inside it, the compiler
        // loads the groups' address and length ahead of it, for every lookup, even one that
        // ends at a root leaf (the common case).
        while entry::is_ext(e) {
            if let Some(c) = self.group4(e, addr) {
                return entry::value(c);
            }
            e = root[(addr >> 8) as usize].load(Ordering::Relaxed);
        }
        entry::value(e)
    }

    /// [`Tables::lookup4`] of every address of `addrs` (at most [`BULK`]) into `out`: first
    /// the root entries of all of them, then the groups of those that point to one.
    #[inline]
    pub(crate) fn lookup4_bulk(&self, addrs: &[u32], out: &mut [Option<u32>]) {
        let n = addrs.len();
        assert!(
            n <= BULK && out.len() >= n,
            "at most {BULK} addresses, room for each"
        );
        let root = self.root4();
        let mut e = [0u32; BULK];
        for (e, &a) in e.iter_mut().zip(addrs) {
            // Relaxed: see `lookup4`.
            *e = root[(a >> 8) as usize].load(Ordering::Relaxed);
        }
        for ((o, &e), &a) in out.iter_mut().zip(&e[..n]).zip(addrs) {
            *o = if !entry::is_ext(e) {
                entry::value(e)
            } else {
                match self.group4(e, a) {
                    Some(c) => entry::value(c),
                    // The group was recycled under us (rare): this address alone again.
                    None => self.lookup4(a),
                }
            };
        }
    }
}
