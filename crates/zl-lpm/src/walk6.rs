//! The IPv6 walks, tuned: one address at a time ([`Tables::lookup6`]) and a batch with the
//! levels interleaved ([`Tables::lookup6_bulk`]). Both return what the plain walk of any width
//! (`Trie::lookup`, the reference they are tested against in `tests/walks.rs`) returns.
//!
//! Why they are faster (docs/performance/lpm.md has the measurements): the plain walk takes
//! each stride's byte out of a `u128` key with a variable shift, which costs more instructions
//! than the load it feeds; here the address is its 16 octets and a stride is one byte load.
//! A lookup is a chain of dependent cache misses (a /48 is the root, then groups for bytes 2,
//! 3, 4 and 5, the last two rarely cached in a 200 k table), so what a loop of lookups gains
//! comes from the processor running several chains at once: fewer instructions per lookup
//! keep more of them inside the reorder window. The batch goes further and issues one level
//! of every address of the batch before the next level of any (as the packet batches of a
//! poll loop arrive), so the misses of different addresses overlap by construction instead of
//! by the processor's speculation past the unpredictable "is there a deeper level" branch.

use std::sync::atomic::Ordering;

use crate::entry::{self, same_gen};
use crate::trie::{Tables, GROUP};

/// The most addresses [`Tables::lookup6_bulk`] walks together: a poll loop's burst.
pub const BULK: usize = 32;

/// A lookup's answer as a leaf entry, for a batch slot finished out of band.
fn as_leaf(v: Option<u32>) -> u32 {
    v.map_or(0, |v| entry::leaf(0, v))
}

impl Tables {
    /// The longest match for `a` in a table with a 16-bit root (IPv6). The same walk as
    /// `Trie::lookup`: Acquire loads, and a generation mismatch restarts from the root.
    #[inline]
    pub(crate) fn lookup6(&self, a: &[u8; 16]) -> Option<u32> {
        debug_assert_eq!(self.root_bits, 16);
        'again: loop {
            // Acquire: see `Trie::lookup`.
            let mut e =
                self.root[usize::from(a[0]) << 8 | usize::from(a[1])].load(Ordering::Acquire);
            // The byte the next group is indexed by. A /128 ends in the last level's group, so
            // the walk stops by `a[15]`; the mask only spares a bounds check.
            let mut k = 2;
            while entry::is_ext(e) {
                let c = self.groups[entry::child(e) * GROUP + usize::from(a[k & 15])]
                    .load(Ordering::Acquire);
                if !same_gen(c, e) {
                    continue 'again;
                }
                e = c;
                k += 1;
            }
            return entry::value(e);
        }
    }

    /// [`Tables::lookup6`] of every address of `addrs` (at most [`BULK`]) into `out`, one
    /// level of all of them at a time.
    pub(crate) fn lookup6_bulk(&self, addrs: &[[u8; 16]], out: &mut [Option<u32>]) {
        debug_assert_eq!(self.root_bits, 16);
        let n = addrs.len();
        assert!(
            n <= BULK && out.len() >= n,
            "at most {BULK} addresses, room for each"
        );
        let mut e = [0u32; BULK];
        let mut deeper = false;
        for (e, a) in e.iter_mut().zip(addrs) {
            *e = self.root[usize::from(a[0]) << 8 | usize::from(a[1])].load(Ordering::Acquire);
            deeper |= entry::is_ext(*e);
        }
        for byte in 2..16 {
            if !deeper {
                break;
            }
            deeper = false;
            for (i, a) in addrs.iter().enumerate() {
                let ext = entry::is_ext(e[i]);
                // No branch on `ext`, which the processor cannot predict: an address already at
                // its leaf reads entry 0 (a group exists, since some address is in one; the
                // line stays cached) and keeps its leaf.
                let at = if ext {
                    entry::child(e[i]) * GROUP + usize::from(a[byte])
                } else {
                    0
                };
                let c = self.groups[at].load(Ordering::Acquire);
                if ext && !same_gen(c, e[i]) {
                    // The group was recycled under us (rare): this address alone again.
                    e[i] = as_leaf(self.lookup6(a));
                    continue;
                }
                e[i] = if ext { c } else { e[i] };
                deeper |= entry::is_ext(e[i]);
            }
        }
        for (o, e) in out.iter_mut().zip(&e[..n]) {
            *o = entry::value(*e);
        }
    }
}
