//! A log-linear histogram of delays, for percentiles (a sparse flow's queueing delay p50/p99)
//! without keeping every sample.
//!
//! Buckets, as HdrHistogram's: values below `2^SUB_BITS` ns each have a bucket of their own;
//! above, every power of two `[2^e, 2^(e+1))` is cut into `2^SUB_BITS` equal buckets. With
//! `SUB_BITS = 5` a bucket is at most 1/32 of its lower bound wide, so a percentile read at the
//! bucket's middle is within 1.6 % of the sample it stands for, at every scale from 1 ns to the
//! whole `u64` range, in a fixed 1920 counters (15 KiB), allocated at the first delay counted
//! (a report keeps one per group label, most of them unused).

/// Sub-buckets per power of two: `2^SUB_BITS`.
const SUB_BITS: u32 = 5;
const SUB: u64 = 1 << SUB_BITS;
/// Buckets for every `u64`: `SUB` exact ones, then `SUB` for each exponent `SUB_BITS..=63`.
const BUCKETS: usize = ((64 - SUB_BITS as usize) + 1) * SUB as usize;

/// Counts of delays (nanoseconds) in log-linear buckets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DelayHistogram {
    /// Empty until the first delay is counted, then `BUCKETS` long.
    counts: Vec<u64>,
    n: u64,
}

/// The bucket of `v`.
fn bucket(v: u64) -> usize {
    if v < SUB {
        return v as usize;
    }
    let e = 63 - v.leading_zeros();
    let sub = (v >> (e - SUB_BITS)) & (SUB - 1);
    ((e - SUB_BITS + 1) as u64 * SUB + sub) as usize
}

/// The lowest value of bucket `i` and its width.
fn bounds(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < SUB {
        return (i, 1);
    }
    let e = i / SUB + u64::from(SUB_BITS) - 1;
    let sub = i % SUB;
    let width = 1u64 << (e - u64::from(SUB_BITS));
    ((SUB + sub) * width, width)
}

impl DelayHistogram {
    /// Counts one delay of `ns` nanoseconds.
    pub fn record(&mut self, ns: u64) {
        if self.counts.is_empty() {
            self.counts = vec![0; BUCKETS];
        }
        self.counts[bucket(ns)] += 1;
        self.n += 1;
    }

    /// Delays counted.
    pub fn count(&self) -> u64 {
        self.n
    }

    /// The `q`-quantile (`0 <= q <= 1`) in nanoseconds, read at the middle of the bucket that
    /// holds the `ceil(q n)`-th smallest delay; NaN when nothing was counted.
    pub fn quantile_ns(&self, q: f64) -> f64 {
        if self.n == 0 {
            return f64::NAN;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.n as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (i, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                let (low, width) = bounds(i);
                return low as f64 + (width as f64 - 1.0) / 2.0;
            }
        }
        f64::NAN
    }

    /// Adds `other`'s counts (a group's flows into one).
    pub fn merge(&mut self, other: &DelayHistogram) {
        if other.n == 0 {
            return;
        }
        if self.counts.is_empty() {
            self.counts = vec![0; BUCKETS];
        }
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
        self.n += other.n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_tile_the_u64_range_in_order() {
        let mut next = 0u64;
        for i in 0..BUCKETS {
            let (low, width) = bounds(i);
            assert_eq!(low, next, "bucket {i}");
            assert_eq!(bucket(low), i);
            assert_eq!(bucket(low + (width - 1)), i);
            next = low.wrapping_add(width);
        }
        assert_eq!(next, 0, "the last bucket ends at u64::MAX");
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn quantiles_are_within_a_bucket_of_the_exact_ones() {
        // 1..=100_000 ns: the exact p50 is 50_000, p99 99_000.
        let mut h = DelayHistogram::default();
        for v in 1..=100_000u64 {
            h.record(v);
        }
        for (q, exact) in [(0.5, 50_000.0), (0.99, 99_000.0), (1.0, 100_000.0)] {
            let got = h.quantile_ns(q);
            assert!(
                (got - exact).abs() / exact < 1.0 / 32.0,
                "q {q}: {got} vs {exact}"
            );
        }
        assert_eq!(h.quantile_ns(0.0), 1.0, "the smallest value, 1, is exact");
        assert!(DelayHistogram::default().quantile_ns(0.5).is_nan());
        let mut m = DelayHistogram::default();
        m.merge(&h);
        m.merge(&h);
        assert_eq!(m.count(), 200_000);
        assert_eq!(m.quantile_ns(0.5), h.quantile_ns(0.5));
    }
}
