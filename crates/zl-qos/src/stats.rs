//! Counters per class and color, and a fixed log-spaced sojourn-time histogram.
//!
//! Nothing here allocates: the histogram is a fixed array and a bucket index is one
//! `leading_zeros`.

use zl_aqm::Verdict;
use zl_core::{Color, Nanos};

/// Number of histogram buckets.
pub const SOJOURN_BUCKETS: usize = 24;

/// Per count of leading zero bits `z` of a sojourn in ns (`0 ..= 64`; indexed by `z`, one
/// operation less per sample than by the bit length `l = 64 - z`): `(above, base)`, its
/// bucket being `base`, plus one when the sojourn exceeds `above`
/// ([`SojournHistogram::bucket_of`]). With `j = l - 10`: `base = j` and
/// `above = 1000 * 2^j - 1` while `0 <= j <= 22`; below that (under 1 µs) bucket 0, above it
/// (the last bucket's `2^22` µs passed) bucket 23, `above` then `u64::MAX` (never exceeded).
const BUCKET_BY_ZEROS: [(u64, u8); 65] = {
    let mut t = [(u64::MAX, 0u8); 65];
    let mut l = 10;
    while l <= 64 {
        let j = l - 10;
        t[64 - l] = if j < SOJOURN_BUCKETS - 1 {
            ((1000u64 << j) - 1, j as u8)
        } else {
            (u64::MAX, (SOJOURN_BUCKETS - 1) as u8)
        };
        l += 1;
    }
    t
};

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
    /// The bucket a sojourn of `ns` falls in: the bit length of `ns / 1000` µs, at most 23.
    ///
    /// Without the division (a multiply and shifts per departing packet): from the bit length
    /// `l` of `ns` itself, since `1000 * 2^j` lies in `[2^(j+9), 2^(j+10))`, `ns` is at least
    /// `1000 * 2^j` for every `j < l - 10` and below it for every `j > l - 10`, so one compare
    /// against `1000 * 2^(l-10)` decides ([`BUCKET_BY_ZEROS`]; `bucket_of_is_the_divided_form`
    /// holds it against `ns / 1000` at every boundary).
    #[inline]
    pub fn bucket_of(ns: u64) -> usize {
        let (above, base) = BUCKET_BY_ZEROS[ns.leading_zeros() as usize];
        base as usize + (ns > above) as usize
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
        // A store only for a new longest sample (rare), not a select and a store per sample.
        if ns > self.max_ns {
            self.max_ns = ns;
        }
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
    /// Packets that left the queue. Between the two counters every arrival adds to: side by
    /// side, LLVM pairs their adds into one vector add, six instructions where three do.
    pub dequeued: u64,
    /// Bytes admitted.
    pub enqueued_bytes: u64,
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
    /// counted in `enqueued`, never in `dequeued`, so `enqueued = dequeued + shutdown_drops +
    /// dequeue_drops + overflow_drops +` the backlog. Not an arrival's drop:
    /// [`ColorStats::drops`] leaves it out.
    pub shutdown_drops: u64,
    /// Admitted, then dropped by the class's discipline as it left (CoDel's control law,
    /// DualPI2's classic drop): an AQM drop of a queued packet ([`ColorStats::aqm_drops`]).
    pub dequeue_drops: u64,
    /// Admitted, then pushed out of the full buffer by a later arrival (FQ-CoDel's drop from
    /// the fattest queue).
    pub overflow_drops: u64,
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

    /// Drops of every cause decided on arrival.
    pub fn drops(&self) -> u64 {
        self.early_drops + self.forced_drops + self.tail_drops
    }

    /// Packets admitted and later discarded by the class's discipline (at dequeue or by an
    /// overflow), before the end of the run.
    pub fn discarded(&self) -> u64 {
        self.dequeue_drops + self.overflow_drops
    }

    /// The AQM's drops: early ones on arrival and the discipline's at dequeue.
    pub fn aqm_drops(&self) -> u64 {
        self.early_drops + self.dequeue_drops
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
        self.dequeue_drops += o.dequeue_drops;
        self.overflow_drops += o.overflow_drops;
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

    /// The form `bucket_of` replaced.
    fn bucket_of_divided(ns: u64) -> usize {
        let us = ns / 1000;
        if us == 0 {
            0
        } else {
            ((64 - us.leading_zeros()) as usize).min(SOJOURN_BUCKETS - 1)
        }
    }

    #[test]
    fn bucket_of_is_the_divided_form() {
        let check = |ns: u64| {
            assert_eq!(
                SojournHistogram::bucket_of(ns),
                bucket_of_divided(ns),
                "{ns}"
            )
        };
        for b in 0..64 {
            // Around every power of two and every bucket bound 1000 * 2^b.
            for base in [1u64 << b, 1000u64.saturating_mul(1 << b)] {
                for d in 0..=3 {
                    check(base.saturating_sub(d));
                    check(base.saturating_add(d));
                }
            }
        }
        for ns in 0..100_000 {
            check(ns);
        }
        // A spread over the whole range (xorshift, fixed seed).
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..1_000_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            check(x);
            check(x >> (x % 64));
        }
        check(u64::MAX);
    }

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
