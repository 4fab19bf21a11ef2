//! Counts of shared-memory operations made by one `observe`, for deriving a hardware
//! workload (the ixp-sim model charges each one as an SRAM reference, docs/ixp-sim.md).
//!
//! The hot path is generic over [`OpSink`]: `observe` passes a zero-sized sink whose methods
//! are empty and inline away, `observe_counted` passes an [`OpCounts`].

/// Shared-memory operations of one observation, by kind.
///
/// A read-modify-write (CAS, fetch-add) counts as one write; a failed CAS counts too, since
/// the hardware made the reference.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct OpCounts {
    /// Loads of a zombie slot word (the drawn zombie, or every zombie in Scan mode).
    pub slot_reads: u32,
    /// Writes of a zombie slot: CAS on its word, store of its timestamp.
    pub slot_writes: u32,
    /// Occurrence-table entries examined (a state/count word and, when live, its key) plus
    /// reads of a bucket's spill counter.
    pub table_probes: u32,
    /// Occurrence-table writes: count reservations and releases, claims of an entry, spill
    /// counter updates.
    pub table_writes: u32,
    /// Writes of the global words: T (total occurrence) and P(t).
    pub total_writes: u32,
}

impl OpCounts {
    /// All references, reads and writes.
    pub fn total(&self) -> u32 {
        self.slot_reads
            + self.slot_writes
            + self.table_probes
            + self.table_writes
            + self.total_writes
    }
}

/// Where the hot path reports its memory operations.
pub(crate) trait OpSink {
    fn slot_read(&mut self);
    fn slot_write(&mut self);
    fn table_probe(&mut self);
    fn table_write(&mut self);
    fn total_write(&mut self);
}

/// The sink of uncounted runs: every call compiles to nothing.
pub(crate) struct NoOps;

impl OpSink for NoOps {
    #[inline(always)]
    fn slot_read(&mut self) {}
    #[inline(always)]
    fn slot_write(&mut self) {}
    #[inline(always)]
    fn table_probe(&mut self) {}
    #[inline(always)]
    fn table_write(&mut self) {}
    #[inline(always)]
    fn total_write(&mut self) {}
}

impl OpSink for OpCounts {
    #[inline]
    fn slot_read(&mut self) {
        self.slot_reads += 1;
    }
    #[inline]
    fn slot_write(&mut self) {
        self.slot_writes += 1;
    }
    #[inline]
    fn table_probe(&mut self) {
        self.table_probes += 1;
    }
    #[inline]
    fn table_write(&mut self) {
        self.table_writes += 1;
    }
    #[inline]
    fn total_write(&mut self) {
        self.total_writes += 1;
    }
}
