//! The atomics this crate is built from, switched to loom's model-checked types under
//! `cfg(loom)` (as crossbeam does through its own `primitive` module), so that
//! `tests/loom.rs` explores the interleavings of the very code the data plane runs.

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Keeps a hot shared word on its own cache line pair, so that the global counters (T, P(t),
/// the list length) do not false-share with each other or with the arrays next to them.
/// 128 bytes because x86 prefetches cache lines in adjacent pairs.
#[repr(align(128))]
#[derive(Debug)]
pub(crate) struct Padded<T>(pub(crate) T);
