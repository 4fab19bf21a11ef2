//! Counters per class and color, and a fixed log-spaced sojourn-time histogram.
//!
//! Nothing here allocates: the histogram is a fixed array and a bucket index is one
//! `leading_zeros`.

use zl_aqm::Verdict;
use zl_core::{Color, Nanos};

/// Number of histogram buckets.
pub const SOJOURN_BUCKETS: usize = 24;

/// Sojourn times (enqueue to dequeue), log2-spaced in microseconds: bucket 0 holds
/// `< 1 µs`, bucket `k` (1..=22) holds `[2^(k-1), 2^k) µs`, and bucket 23 everything from
/// `2^22 µs` (about 4.2 s) up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SojournHistogram {
    /// Samples per bucket (see the type's doc for the bounds).
    pub buckets: [u64; SOJOURN_BUCKETS],
    /// Sum of all samples in ns (for an exact mean).
    pub sum_ns: u128,
    /// Samples recorded.
    pub count: u64,
    /// The longest sample, ns.
    pub max_ns: u64,
}

impl Default for SojournHistogram {
    fn default() -> Self {
        SojournHistogram {
            buckets: [0; SOJOURN_BUCKETS],
            sum_ns: 0,
            count: 0,
            max_ns: 0,
        }
    }
}

impl SojournHistogram {
    /// The bucket a sojourn of `ns` falls in.
    #[inline]
    pub fn bucket_of(ns: u64) -> usize {
        let us = ns / 1000;
        if us == 0 {
            0
        } else {
            ((64 - us.leading_zeros()) as usize).min(SOJOURN_BUCKETS - 1)
        }
    }

    /// Lower bound of bucket `k` in µs.
    pub fn bucket_floor_us(k: usize) -> u64 {
        if k == 0 {
            0
        } else {
            1 << (k - 1)
        }
    }

    /// Adds one sample.
    #[inline]
    pub fn record(&mut self, sojourn: Nanos) {
        let ns = sojourn.0;
        self.buckets[Self::bucket_of(ns)] += 1;
        self.sum_ns += ns as u128;
        self.count += 1;
        self.max_ns = self.max_ns.max(ns);
    }

    /// Mean sojourn, zero when empty.
    pub fn mean(&self) -> Nanos {
        if self.count == 0 {
            Nanos::ZERO
        } else {
            Nanos((self.sum_ns / self.count as u128) as u64)
        }
    }

    /// Adds every sample of `other`.
    pub fn merge(&mut self, other: &SojournHistogram) {
        for (a, b) in self.buckets.iter_mut().zip(other.buckets.iter()) {
            *a += b;
        }
        self.sum_ns += other.sum_ns;
        self.count += other.count;
        self.max_ns = self.max_ns.max(other.max_ns);
    }
}

/// Counters for one color of one class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ColorStats {
    /// Packets admitted (including marked ones).
    pub enqueued: u64,
    /// Bytes admitted.
    pub enqueued_bytes: u64,
    /// Packets that left the queue.
    pub dequeued: u64,
    /// Bytes that left the queue.
    pub dequeued_bytes: u64,
    /// Admitted with CE set.
    pub marks: u64,
    /// Probabilistic drops by the AQM.
    pub early_drops: u64,
    /// Deterministic drops by the AQM, and red packets policed away (`drop_red`).
    pub forced_drops: u64,
    /// Dropped because the queue was full (or the packet exceeds what the shaper can send).
    pub tail_drops: u64,
    /// Admitted, then discarded still queued when the run ended ([`crate::QosEngine::discard_all`]):
    /// counted in `enqueued`, never in `dequeued`, so `enqueued = dequeued + shutdown_drops +`
    /// the backlog. Not an arrival's drop: [`ColorStats::drops`] leaves it out.
    pub shutdown_drops: u64,
    /// Sojourn times of the packets that left.
    pub sojourn: SojournHistogram,
}

impl ColorStats {
    /// Counts one arrival's verdict (`len` bytes).
    #[inline]
    pub fn record_verdict(&mut self, v: Verdict, len: u32) {
        match v {
            Verdict::Enqueue => {}
            Verdict::MarkCe => self.marks += 1,
            Verdict::EarlyDrop => {
                self.early_drops += 1;
                return;
            }
            Verdict::ForcedDrop => {
                self.forced_drops += 1;
                return;
            }
            Verdict::TailDrop => {
                self.tail_drops += 1;
                return;
            }
        }
        self.enqueued += 1;
        self.enqueued_bytes += len as u64;
    }

    /// Drops of every cause.
    pub fn drops(&self) -> u64 {
        self.early_drops + self.forced_drops + self.tail_drops
    }

    /// Arrivals: admitted plus dropped.
    pub fn arrivals(&self) -> u64 {
        self.enqueued + self.drops()
    }

    /// Adds `o`'s counters to these.
    pub fn merge(&mut self, o: &ColorStats) {
        self.enqueued += o.enqueued;
        self.enqueued_bytes += o.enqueued_bytes;
        self.dequeued += o.dequeued;
        self.dequeued_bytes += o.dequeued_bytes;
        self.marks += o.marks;
        self.early_drops += o.early_drops;
        self.forced_drops += o.forced_drops;
        self.tail_drops += o.tail_drops;
        self.shutdown_drops += o.shutdown_drops;
        self.sojourn.merge(&o.sojourn);
    }
}

/// Counters for one class.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassStats {
    /// Counters per color, indexed by `Color::index`.
    pub per_color: [ColorStats; 3],
    /// Current queue length.
    pub len_packets: u32,
    /// Current queue length, bytes.
    pub len_bytes: u64,
}

impl ClassStats {
    /// The counters of color `c`.
    pub fn color(&self, c: Color) -> &ColorStats {
        &self.per_color[c.index()]
    }

    /// All colors summed.
    pub fn total(&self) -> ColorStats {
        let mut t = ColorStats::default();
        for c in &self.per_color {
            t.merge(c);
        }
        t
    }
}

/// Classifier counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassifierStats {
    /// Packets whose code point had no table entry (sent to the default class).
    pub unmapped: u64,
    /// Packets without a parsable code point (sent to the default class).
    pub unparsed: u64,
    /// Packets handed to `enqueue_classified` with a class index the engine does not have
    /// (dropped).
    pub invalid_class: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_log2_us() {
        assert_eq!(SojournHistogram::bucket_of(999), 0);
        assert_eq!(SojournHistogram::bucket_of(1_000), 1);
        assert_eq!(SojournHistogram::bucket_of(1_999), 1);
        assert_eq!(SojournHistogram::bucket_of(2_000), 2);
        // 16 ms = 16 000 µs lies in [2^13, 2^14) µs.
        assert_eq!(SojournHistogram::bucket_of(16_000_000), 14);
        assert_eq!(SojournHistogram::bucket_floor_us(14), 8_192);
        assert_eq!(SojournHistogram::bucket_of(u64::MAX), SOJOURN_BUCKETS - 1);
        let mut h = SojournHistogram::default();
        h.record(Nanos(10));
        h.record(Nanos(30));
        assert_eq!(h.mean(), Nanos(20));
    }
}
