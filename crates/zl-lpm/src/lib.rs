//! Longest-prefix match for a full Internet table, read by many forwarding threads while one
//! control thread at a time changes it.
//!
//! [`Lpm4`] is DIR-24-8 as DPDK's `rte_lpm`: a 2^24-entry table indexed by the top 24 bits of
//! the address, and 256-entry groups for the last byte of the prefixes longer than /24. A
//! lookup is one load, or two for an address under a prefix longer than /24. [`Lpm6`] is the
//! same multibit trie with a 2^16-entry root and one 256-entry group per further byte (up to 14
//! levels; a /48 takes 5 loads). Each entry is 32 bits: the value (a next-hop id up to
//! [`MAX_VALUE`]) and depth of the longest rule covering it, or a pointer to a group.
//! [`Lpm6::lookup`] walks the address octet by octet and [`Lpm6::lookup_bulk`] walks a burst
//! of addresses level by level so that their cache misses overlap (`walk6.rs`); the plain walk
//! they are tested against stays as [`Lpm6::lookup_plain`]. [`Lpm4::lookup_bulk`] loads the
//! root entries of a burst before it follows any pointer (`walk4.rs`); [`Lpm4::lookup_plain`]
//! is its reference.
//!
//! # Contract
//! - `lookup(addr)` returns the value of the longest rule (prefix) containing `addr`, or `None`.
//!   It never blocks, never allocates, never takes a lock, and may run on any number of threads
//!   while `insert` / `remove` run.
//! - `insert` / `remove` take `&self` and serialise on an internal mutex (the writer's side,
//!   which readers never touch). A change is applied entry by entry with atomic stores: a lookup
//!   that runs during a change returns, for its address, either the value before or the value
//!   after the change, never a value of an unrelated rule and never `None` where both had a
//!   route. So routes change while the poll loops forward, with no pause and no loss.
//! - Host bits of a prefix are ignored (`10.1.2.3/8` is `10.0.0.0/8`), as `ip route` does not.
//! - Memory: the root table (64 MiB for IPv4, 256 KiB for IPv6) and the group capacity are
//!   reserved up front, zeroed, so the operating system maps pages only as groups are used
//!   (DPDK sizes its tables the same way, by `number_tbl8s`). On Linux the group array is
//!   asked for as transparent huge pages (`madvise`), so a walk through groups does not miss the
//!   TLB at every step; groups are handed out in order, so the 2 MiB stretches backed whole are
//!   the ones in use. The IPv4 root follows once the table holds 16 k rules (a lookup in a large
//!   table is a random load in its 64 MiB; a small table keeps 4 KiB pages and the shared zero
//!   page under its unused entries: `trie::HUGE_ROOT_RULES`). A table out of groups refuses the insert with [`LpmError::TableFull`] and
//!   is left unchanged for lookups.
//!
//! # Concurrency: decided
//! Lock-free readers and one writer updating atomic entries in place, as `rte_lpm` does, rather
//! than an immutable table swapped whole (arc-swap): a swapped DIR-24-8 copies 64 MiB per
//! change, and a BGP feed changes thousands of routes a second; in place, adding a /24 is one
//! store. Entries are whole 32-bit atomics (Release stores, Acquire loads: a group is filled
//! before the pointer to it is published). The IPv4 walks load Relaxed and let the generation
//! check below stand for the Acquire: a group's content from before its fill carries an older
//! generation (`walk4.rs` says why that is enough, and why it matters).
//!
//! The hard part is freeing a group (after the last longer prefix under it goes): a reader may
//! have read the pointer to it just before. `rte_lpm` waits for an RCU grace period, which needs
//! every reader to report quiescent states. Here readers need not cooperate: each group has a
//! 5-bit generation, bumped when it is reused; the pointer carries the generation it was linked
//! with and every entry of a group carries the group's own. A reader that finds a different
//! generation than its pointer promised starts the lookup again. A freed group keeps its
//! entries until reused, and a group is only freed when all its entries equal the leaf that
//! replaces the pointer, so a reader still inside it reads the right answer. Freed groups are
//! reused first in, first out, so a generation repeats (the one case the check misses) only if
//! a single lookup is overtaken by 32 rounds through the whole free list. No `unsafe` beyond
//! allocating the zeroed table and asking Linux for huge pages under it (see `trie.rs`).
//!
//! `tests/concurrent.rs` checks the contract with readers racing a writer that splits, fills
//! and frees groups; `tests/oracle.rs` checks lookups against a naive longest-match scan;
//! `tests/walks.rs` checks the tuned IPv4 and IPv6 walks against the plain one through route
//! changes.
//!
//! # Example
//!
//! ```
//! use std::net::Ipv4Addr;
//! use zl_lpm::Lpm4;
//!
//! let table = Lpm4::with_groups(1024);
//! table.insert(Ipv4Addr::new(10, 0, 0, 0), 8, 1)?;
//! table.insert(Ipv4Addr::new(10, 1, 2, 0), 24, 2)?;
//! assert_eq!(table.lookup(Ipv4Addr::new(10, 1, 2, 3)), Some(2)); // the longer prefix
//! assert_eq!(table.lookup(Ipv4Addr::new(10, 9, 9, 9)), Some(1));
//! assert_eq!(table.lookup(Ipv4Addr::new(192, 0, 2, 1)), None);
//! # Ok::<(), zl_lpm::LpmError>(())
//! ```
//!
//! # Layers
//!
//! Each module uses only those on the lines above it (`scripts/module-cycles` checks it):
//! `entry` (the 32-bit table entry) and `synth` (synthetic BGP-shaped tables); `trie` (the
//! multibit trie of both families); `walk4` and `walk6` (the lookups, one address and a
//! batch).

#![warn(missing_docs)]

mod entry;
pub mod synth;
mod trie;
mod walk4;
mod walk6;

use std::net::{Ipv4Addr, Ipv6Addr};

pub use entry::{MAX_GROUPS, MAX_VALUE};

/// Why a rule was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LpmError {
    /// The prefix length exceeds the address width.
    PrefixTooLong {
        /// The length asked for.
        len: u32,
        /// The address width: 32 for IPv4, 128 for IPv6.
        max: u32,
    },
    /// The value does not fit an entry (more than [`MAX_VALUE`]).
    ValueTooLarge(u32),
    /// Every 256-entry group is in use; the table is unchanged.
    TableFull,
}

impl std::fmt::Display for LpmError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LpmError::PrefixTooLong { len, max } => {
                write!(f, "prefix length {len} exceeds {max}")
            }
            LpmError::ValueTooLarge(v) => write!(f, "value {v} exceeds {MAX_VALUE}"),
            LpmError::TableFull => write!(f, "the table's groups are all in use"),
        }
    }
}

impl std::error::Error for LpmError {}

/// A table's size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LpmStats {
    /// Rules (prefixes) in the table.
    pub rules: usize,
    /// 256-entry groups linked into the table.
    pub groups_in_use: usize,
    /// Groups the table can hold.
    pub group_capacity: usize,
    /// Entries stored since the table was made (the work of every change, for tests that
    /// bound it).
    pub entry_writes: u64,
    /// The root table's size.
    pub root_bytes: usize,
    /// Group memory ever used (the high-water mark of groups, 1 KiB each).
    pub group_bytes_touched: usize,
}

macro_rules! family {
    ($name:ident, $addr:ty, $int:ty, $width:expr, $root:expr, $groups:expr, $doc:expr) => {
        #[doc = $doc]
        pub struct $name {
            trie: trie::Trie,
        }

        impl Default for $name {
            fn default() -> Self {
                Self::with_groups($groups)
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($name))
                    .field("stats", &self.stats())
                    .finish()
            }
        }

        impl $name {
            /// The default group capacity.
            pub const DEFAULT_GROUPS: u32 = $groups;

            /// An empty table with room for `groups` 256-entry groups (at most
            /// [`MAX_GROUPS`]).
            pub fn with_groups(groups: u32) -> Self {
                $name {
                    trie: trie::Trie::new($width, $root, groups),
                }
            }

            fn key(addr: $addr) -> u128 {
                u128::from(<$int>::from(addr)) << (128 - $width)
            }

            /// Adds the rule `addr/len -> value`, or changes its value; returns the value it
            /// replaced.
            pub fn insert(
                &self,
                addr: $addr,
                len: u8,
                value: u32,
            ) -> Result<Option<u32>, LpmError> {
                self.trie.insert(Self::key(addr), u32::from(len), value)
            }

            /// Removes the rule `addr/len`; returns its value. Addresses under it fall back to
            /// the next shorter rule.
            pub fn remove(&self, addr: $addr, len: u8) -> Option<u32> {
                self.trie.remove(Self::key(addr), u32::from(len))
            }

            /// The value of the rule `addr/len` exactly (not a longest match).
            pub fn get(&self, addr: $addr, len: u8) -> Option<u32> {
                self.trie.get(Self::key(addr), u32::from(len))
            }

            /// The number of rules.
            pub fn len(&self) -> usize {
                self.trie.len()
            }

            /// True when the table holds no rule.
            pub fn is_empty(&self) -> bool {
                self.len() == 0
            }

            /// The table's size: rules, groups in use and their capacity.
            pub fn stats(&self) -> LpmStats {
                self.trie.stats()
            }
        }
    };
}

family!(
    Lpm4,
    Ipv4Addr,
    u32,
    32,
    24,
    1 << 16,
    "IPv4 longest-prefix match, DIR-24-8 (see the crate doc). The default capacity of 65 536 \
     groups holds a /25../32 under that many distinct /24s (a public BGP table has a few \
     thousand at most)."
);
family!(
    Lpm6,
    Ipv6Addr,
    u128,
    128,
    16,
    1 << 19,
    "IPv6 longest-prefix match: a 16-bit root and 8-bit strides (see the crate doc). The default \
     capacity of 524 288 groups (512 MiB reserved, mapped as used) holds a public IPv6 table \
     several times over."
);

impl Lpm4 {
    /// The most addresses [`Lpm4::lookup_bulk`] walks together.
    pub const BULK: usize = walk4::BULK;

    /// The value of the longest rule containing `addr`.
    #[inline]
    pub fn lookup(&self, addr: Ipv4Addr) -> Option<u32> {
        self.lookup_u32(u32::from(addr))
    }

    /// [`Lpm4::lookup`] of a host-order address: the DIR-24-8 walk, unrolled (one root load,
    /// at most one group load).
    #[inline]
    pub fn lookup_u32(&self, addr: u32) -> Option<u32> {
        self.trie.t.lookup4(addr)
    }

    /// [`Lpm4::lookup`] of each of `addrs` into the same place of `out`, [`Lpm4::BULK`] at a
    /// time: the root entries of a whole batch are loaded before any of them is looked at, so
    /// that their cache misses overlap (as `rte_lpm_lookup_bulk`, for a poll loop's burst).
    /// Panics if `out` is shorter than `addrs`.
    pub fn lookup_bulk(&self, addrs: &[Ipv4Addr], out: &mut [Option<u32>]) {
        assert!(out.len() >= addrs.len(), "room for every answer");
        let mut host = [0u32; walk4::BULK];
        for (addrs, out) in addrs.chunks(walk4::BULK).zip(out.chunks_mut(walk4::BULK)) {
            for (h, &a) in host.iter_mut().zip(addrs) {
                *h = u32::from(a);
            }
            self.trie.t.lookup4_bulk(&host[..addrs.len()], out);
        }
    }

    /// [`Lpm4::lookup_bulk`] of host-order addresses.
    pub fn lookup_bulk_u32(&self, addrs: &[u32], out: &mut [Option<u32>]) {
        assert!(out.len() >= addrs.len(), "room for every answer");
        for (addrs, out) in addrs.chunks(walk4::BULK).zip(out.chunks_mut(walk4::BULK)) {
            self.trie.t.lookup4_bulk(addrs, out);
        }
    }

    /// The plain walk of any width (`u128` key, one shift per stride): the reference that
    /// [`Lpm4::lookup`] and [`Lpm4::lookup_bulk`] are tested against.
    pub fn lookup_plain(&self, addr: Ipv4Addr) -> Option<u32> {
        self.trie.lookup(u128::from(u32::from(addr)) << 96)
    }
}

impl Lpm6 {
    /// The most addresses [`Lpm6::lookup_bulk`] walks together.
    pub const BULK: usize = walk6::BULK;

    /// The value of the longest rule containing `addr`.
    #[inline]
    pub fn lookup(&self, addr: Ipv6Addr) -> Option<u32> {
        self.trie.t.lookup6(&addr.octets())
    }

    /// [`Lpm6::lookup`] of each of `addrs` into the same place of `out`, walking
    /// [`Lpm6::BULK`] addresses at a time level by level, so that their cache misses overlap:
    /// for a poll loop's burst. Panics if `out` is shorter than `addrs`.
    pub fn lookup_bulk(&self, addrs: &[Ipv6Addr], out: &mut [Option<u32>]) {
        assert!(out.len() >= addrs.len(), "room for every answer");
        let mut octets = [[0u8; 16]; walk6::BULK];
        for (addrs, out) in addrs.chunks(walk6::BULK).zip(out.chunks_mut(walk6::BULK)) {
            for (o, a) in octets.iter_mut().zip(addrs) {
                *o = a.octets();
            }
            self.trie.t.lookup6_bulk(&octets[..addrs.len()], out);
        }
    }

    /// The plain walk of any width (`u128` key, one shift per stride): the reference that
    /// [`Lpm6::lookup`] and [`Lpm6::lookup_bulk`] are tested against, as DPDK keeps its
    /// scalar lookups beside the vector ones.
    pub fn lookup_plain(&self, addr: Ipv6Addr) -> Option<u32> {
        self.trie.lookup(u128::from(addr))
    }
}
