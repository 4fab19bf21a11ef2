//! The Zombie List of SRED / ZL-RED (docs/algorithms/zombie-list.md), shared lock-free by all
//! forwarding threads.
//!
//! Papers: Ott, Lakshman, Wong, "SRED: Stabilized RED", INFOCOM 1999 (the Zombie List,
//! the hit frequency P(t) and its eq. 3.4, `P{Hit} = sum pi_i^2`); Kurata, Hasegawa, Murata,
//! "A Study on the implementation of ZL-RED mechanism on the Network Processor", IEICE
//! Technical Report, c. 2001 (the occurrences T and F of §3b and the occurrence lookup table of
//! §5.2.3). Units: counts are packets (dimensionless), P(t) is a probability per arrival,
//! timestamps are [`Nanos`].
//!
//! Contract: [`ZombieList::observe`] runs SRED steps 1-3 for one arrival and returns
//! [`Observation`] `{ hit, p, occurrence: F, total: T }`, all read after this arrival's
//! update (decided, docs/algorithms/zombie-list.md). Time and randomness are passed in.
//! [`NaiveZombieList`] is the sequential oracle with O(M) scans; fed the same random stream, a
//! single-threaded [`ZombieList`] makes exactly the same decisions and returns exactly the same
//! values. Also: [`ZombieList::observe_batch`] (a burst, one P(t) store),
//! [`ZombieList::observe_counted`] (with the [`OpCounts`] of shared-memory references, for
//! ixp-sim), and [`ZombieList::check_invariants`] (docs/algorithms/zombie-list.md, at quiescence).
//! The full write-up, with the tests and the estimate measurements:
//! `docs/algorithms/zombie-list.md`.
//!
//! # Structure
//! - M zombie slots. A slot is one `AtomicU64`: `(entry index + 1) << 40 | tag << 24 | count`,
//!   where the entry is the flow's entry in the occurrence table (which holds the full 64-bit
//!   flow id) and the tag is 16 bits of the flow's hash (a different tag is a miss without
//!   reading the entry). So a zombie's flow and count change together in one CAS. Its
//!   timestamp sits beside it in a second word, written after the CAS; decided: the
//!   timestamp is advisory (no equation reads it) and may lag under concurrency.
//! - The occurrence table (`table.rs`, whose module doc details it): at least 2M entries, closed
//!   hashing with rehash, F per entry; O(1) per packet: a hit changes one entry, an overwrite
//!   two, an append one.
//! - T: one `AtomicU64`. P(t): f64 bits in one `AtomicU64` per shard of threads, each on
//!   its own cache line, updated by a relaxed load and store; decided: P(t) is kept per
//!   thread, exactly SRED's with one thread (`ZombieList::update_p` says why and what it
//!   means with several).
//!
//! # Why the invariants hold at quiescence
//! Write `refs(e)` for the sum over zombie slots referring to entry e of `(count + 1)`.
//! Every observe changes at most one slot, always by a single CAS on its word, and moves the
//! counters with this discipline:
//! 1. before the CAS, take what the new slot value adds: `+1` on the entry it will refer to
//!    (a hit: the same entry; an overwrite or append: the new flow's entry) and, where T
//!    grows (hit, append), `+1` on T;
//! 2. CAS the slot; if it fails, give those back and retry (someone else's CAS succeeded, so
//!    the list as a whole made progress: lock-free);
//! 3. after a successful overwrite, drop what the old value held: `-(count_old + 1)` on the
//!    old entry, and T's net change `-count_old` (nothing when the old zombie never hit,
//!    the common case: an overwrite then costs T no write at all).
//!
//! So at every instant `count(e) >= refs(e)` and `T >= sum refs` (the excess is exactly the
//! reservations of operations in flight), and the deltas are additions, which commute: once
//! no observe is in flight, `count(e) == refs(e)` for every entry and
//! `T == sum over zombies (count + 1) == sum over entries F`. An entry changes its key only by
//! a CAS from count 0, i.e. `refs(e) == 0`, so no zombie's flow changes under it; a zombie's
//! flow is by definition its entry's key, hence `F(f) == sum over zombies of f (count + 1)`.
//! None of this depends on ABA freedom: even if a slot or entry word returned to an old value
//! between a thread's load and its CAS, the deltas go to the entry the word names, so the
//! accounting stays exact (only the attribution of that one packet's hit could be off).
//!
//! # Memory orderings
//! Slot CAS: AcqRel, so the entry's key (published with release when the entry was claimed)
//! is visible to whoever acquires the slot word. Entry state word: acquire loads, AcqRel
//! RMWs, release store when a claimed entry goes live. T: AcqRel RMWs (its value orders
//! nothing else; AcqRel keeps `total_occurrence` after one's own update). P(t): relaxed,
//! it carries no other data. Every ordering is chosen next to its atomic in the code.
//!
//! # Example
//!
//! ```
//! use rand::SeedableRng;
//! use zl_zombie::{FlowId, Nanos, ZombieList, ZombieParams};
//!
//! let list = ZombieList::new(ZombieParams::default().validate()?);
//! let mut rng = rand::rngs::StdRng::seed_from_u64(1);
//! for i in 0..100_000u64 {
//!     // Time and randomness are the caller's.
//!     let obs = list.observe(FlowId(i % 50), Nanos(i), &mut rng);
//!     assert!(obs.occurrence <= obs.total);
//! }
//! // 1/P(t) estimates the number of active flows: 50 here.
//! assert!((35.0..75.0).contains(&list.estimated_flows()));
//! # Ok::<(), zl_zombie::ZombieConfigError>(())
//! ```
//!
//! # Layers
//!
//! Each module uses only those on the lines above it (`scripts/module-cycles` checks it):
//! `draw` (SRED step 2's draws), `ops` (operation counts), `params` and `primitive` (the
//! atomics, loom's under `--cfg loom`); `table` (the occurrence table); `list` (the
//! lock-free Zombie List); `naive` (the sequential oracle it is tested against).

// decided: `unsafe` only where a bounds check on the per-packet path is proven redundant,
// each block with its `// SAFETY:` reason.
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod draw;
mod list;
mod naive;
mod ops;
mod params;
mod primitive;
mod table;

pub use list::{InvariantError, Observation, Zombie, ZombieList, ZombieStateError};
pub use naive::NaiveZombieList;
pub use ops::OpCounts;
pub use params::{OccurrenceMode, ZombieConfig, ZombieConfigError, ZombieParams, MAX_M};
pub use zl_core::{FlowId, Nanos};

/// Where the occurrence table places `flow`: the hash whose low half picks its first bucket
/// and whose high half its probe step and its tag in a zombie slot (the table's own function,
/// for tests and tools that need flows sharing a bucket).
pub fn flow_hash(flow: FlowId) -> u64 {
    table::mix(flow.0)
}
