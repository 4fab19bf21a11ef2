//! A per-port propagation delay line: what `tc qdisc ... netem delay` would do, for a kernel
//! that has no netem.
//!
//! Contract: an item pushed at `now` with delay `d` is returned by [`DelayLine::pop_due`] at the
//! first call whose `now'` satisfies `now' >= release`, where `release` is `now + d` rounded
//! *up* to the next multiple of the tick (so an item is never released early, and at most one
//! tick late). Items released at the same tick come out in push order; with one delay for the
//! whole port (the usual case) the line is FIFO.
//!
//! Time is passed in (`push(now, item)`, `pop_due(now)`), never read from a clock, so the same
//! line runs on a live port and in a simulation and is tested without sleeps. Time passed in
//! is clamped to the largest value seen so far: a caller whose clock steps backwards never
//! reorders the line.
//!
//! Memory: every slot is allocated in [`DelayLine::new`]; `push` and `pop_due` never allocate.
//! A push into a full line is a counted drop ([`DelayStats::overflow_drops`]) that hands the
//! item back, so a caller holding pool buffers can recycle them.
//!
//! [`DelayedPort`] puts a line in front of any [`zl_port::Port`]'s receive side.
//!
//! Structure: a hashed timer wheel of `W` buckets (`W` a power of two larger than the longest
//! delay in ticks, so one turn of the wheel covers every pending release), each bucket a FIFO
//! list threaded through the preallocated slot array; free slots form a free list. `pop_due`
//! walks the wheel's cursor forward one tick at a time up to `now`, so its cost is the number
//! of ticks since the previous call plus the items it returns; an empty line jumps the cursor
//! straight to `now`.
//!
//! # Example
//!
//! ```
//! use zl_core::Nanos;
//! use zl_delay::{DelayLine, DelayLineConfig};
//!
//! // 5 ms of propagation delay for up to 1024 items in flight.
//! let mut line = DelayLine::new(DelayLineConfig::from_millis(5, 1024)).unwrap();
//! line.push(Nanos::from_millis(1), "first").unwrap();
//! line.push(Nanos::from_millis(2), "second").unwrap();
//! assert_eq!(line.pop_due(Nanos::from_millis(5)), None); // not before 1 ms + 5 ms
//! assert_eq!(line.pop_due(Nanos::from_millis(6)), Some("first"));
//! assert_eq!(line.pop_due(Nanos::from_millis(7)), Some("second"));
//! assert_eq!(line.len(), 0);
//! ```
//!
//! Layers: one module, `port` (the delay line around a port), below this root.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod port;

pub use port::DelayedPort;
use zl_core::Nanos;

/// Sentinel index for "no slot" in the intrusive lists.
const NIL: u32 = u32::MAX;

/// The largest wheel accepted: 2^22 buckets (32 MiB of bucket heads), e.g. a 41 s delay at the
/// default 10 µs tick. Longer delays need a coarser tick.
pub const MAX_WHEEL_BUCKETS: usize = 1 << 22;

/// The default tick: 10 µs, well under one packet time at 1 Gbit/s for a full-size frame
/// (12 µs) and a 100 ms delay then needs a 16 Ki-bucket wheel (128 KiB).
pub const DEFAULT_TICK: Nanos = Nanos(10_000);

/// Parameters of a delay line, in human units.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DelayLineConfig {
    /// The one-way propagation delay added to every packet.
    pub delay: Nanos,
    /// Release granularity; release times are rounded up to a multiple of it.
    pub tick: Nanos,
    /// How many items may be in flight at once; one more is an overflow drop. Size it as at
    /// least `line rate x delay` in packets (the bandwidth-delay product of the emulated link).
    pub capacity: usize,
}

impl DelayLineConfig {
    /// A line of `delay_ms` milliseconds with the [`DEFAULT_TICK`].
    pub fn from_millis(delay_ms: u64, capacity: usize) -> Self {
        DelayLineConfig {
            delay: Nanos::from_millis(delay_ms),
            tick: DEFAULT_TICK,
            capacity,
        }
    }
}

/// A delay line in config units: `{ delay_ms = 20, capacity = 4096 }`, optionally `tick_us`
/// (default 10). Fractional milliseconds are allowed (`delay_ms = 0.5`).
#[derive(Clone, Copy, Debug, PartialEq, serde::Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields)]
pub struct DelayParams {
    /// The one-way delay, ms (fractions allowed).
    pub delay_ms: f64,
    /// The most items in flight at once.
    pub capacity: usize,
    /// The wheel's tick, µs (default 10): items are released at most one tick late.
    #[serde(default = "default_tick_us")]
    pub tick_us: u64,
}

fn default_tick_us() -> u64 {
    DEFAULT_TICK.as_nanos() / 1_000
}

impl DelayParams {
    /// The line these parameters describe; a negative or non-finite delay is an error.
    pub fn to_config(&self) -> Result<DelayLineConfig, DelayConfigError> {
        if !self.delay_ms.is_finite() || self.delay_ms < 0.0 {
            return Err(DelayConfigError::Delay {
                delay_ms: self.delay_ms,
            });
        }
        Ok(DelayLineConfig {
            delay: Nanos::from_secs_f64(self.delay_ms * 1e-3),
            tick: Nanos::from_micros(self.tick_us),
            capacity: self.capacity,
        })
    }
}

/// Why a [`DelayLineConfig`] was rejected.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum DelayConfigError {
    /// The tick is zero.
    #[error("delay line tick must be > 0 ns")]
    ZeroTick,
    /// The delay is negative or not a number.
    #[error("delay_ms must be a finite number >= 0, got {delay_ms}")]
    Delay {
        /// The value given.
        delay_ms: f64,
    },
    /// The capacity is zero or too large.
    #[error("delay line capacity must be between 1 and {max}, got {got}")]
    Capacity {
        /// The capacity given.
        got: usize,
        /// The largest allowed.
        max: usize,
    },
    #[error(
        "delay of {delay} with a tick of {tick} needs more than {max} wheel buckets; use a coarser tick"
    )]
    /// The delay needs more wheel buckets than the line allows at this tick.
    WheelTooLarge {
        /// The delay.
        delay: Nanos,
        /// The tick.
        tick: Nanos,
        /// The most buckets allowed.
        max: usize,
    },
}

/// Counters of a delay line, by cause.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DelayStats {
    /// Items accepted by `push`.
    pub pushed: u64,
    /// Items handed back by `pop_due`.
    pub released: u64,
    /// Items refused by `push` because every slot was in use.
    pub overflow_drops: u64,
}

struct Slot<T> {
    item: Option<T>,
    /// Release time in ticks.
    release_tick: u64,
    /// Next slot in this bucket's list, or in the free list.
    next: u32,
}

#[derive(Clone, Copy)]
struct Bucket {
    head: u32,
    tail: u32,
}

const EMPTY_BUCKET: Bucket = Bucket {
    head: NIL,
    tail: NIL,
};

/// A fixed-delay line generic over the item it holds (a packet buffer, an index, ...).
pub struct DelayLine<T> {
    delay: Nanos,
    tick_ns: u64,
    delay_ticks: u64,
    slots: Vec<Slot<T>>,
    free_head: u32,
    buckets: Vec<Bucket>,
    bucket_mask: u64,
    /// Every pending item has `release_tick >= cursor`; buckets before it are drained.
    cursor: u64,
    /// The largest `now` seen, in nanoseconds.
    latest_now: u64,
    len: usize,
    stats: DelayStats,
}

impl<T> DelayLine<T> {
    /// Builds a line, allocating every slot and bucket up front.
    pub fn new(config: DelayLineConfig) -> Result<Self, DelayConfigError> {
        let tick_ns = config.tick.as_nanos();
        if tick_ns == 0 {
            return Err(DelayConfigError::ZeroTick);
        }
        let max_capacity = (NIL - 1) as usize;
        if config.capacity == 0 || config.capacity > max_capacity {
            return Err(DelayConfigError::Capacity {
                got: config.capacity,
                max: max_capacity,
            });
        }
        let delay_ticks = config.delay.as_nanos().div_ceil(tick_ns);
        // One more bucket than the delay spans: a push at a tick boundary releases exactly
        // `delay_ticks` later, a push just after one releases `delay_ticks + 1` later.
        let needed = delay_ticks.saturating_add(2);
        if needed > MAX_WHEEL_BUCKETS as u64 {
            return Err(DelayConfigError::WheelTooLarge {
                delay: config.delay,
                tick: config.tick,
                max: MAX_WHEEL_BUCKETS,
            });
        }
        let wheel = (needed as usize).next_power_of_two();
        let slots = (0..config.capacity)
            .map(|i| Slot {
                item: None,
                release_tick: 0,
                next: if i + 1 < config.capacity {
                    (i + 1) as u32
                } else {
                    NIL
                },
            })
            .collect();
        Ok(DelayLine {
            delay: config.delay,
            tick_ns,
            delay_ticks,
            slots,
            free_head: 0,
            buckets: vec![EMPTY_BUCKET; wheel],
            bucket_mask: (wheel - 1) as u64,
            cursor: 0,
            latest_now: 0,
            len: 0,
            stats: DelayStats::default(),
        })
    }

    /// The delay this line adds.
    pub fn delay(&self) -> Nanos {
        self.delay
    }

    /// The release granularity.
    pub fn tick(&self) -> Nanos {
        Nanos(self.tick_ns)
    }

    /// Items in flight.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when nothing is in flight.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The most items that can be in flight.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Buckets in the wheel (a power of two).
    pub fn wheel_buckets(&self) -> usize {
        self.buckets.len()
    }

    /// The line's counters.
    pub fn stats(&self) -> DelayStats {
        self.stats
    }

    /// The time at which an item pushed at `now` will be released.
    pub fn release_time(&self, now: Nanos) -> Nanos {
        let now = now.as_nanos().max(self.latest_now);
        Nanos(self.release_tick_for(now).saturating_mul(self.tick_ns))
    }

    fn release_tick_for(&self, now_ns: u64) -> u64 {
        now_ns
            .saturating_add(self.delay.as_nanos())
            .div_ceil(self.tick_ns)
            .max(self.cursor)
    }

    fn observe(&mut self, now: Nanos) -> u64 {
        self.latest_now = self.latest_now.max(now.as_nanos());
        self.latest_now
    }

    /// Puts `item` on the line at `now`. A full line refuses it, counts an overflow drop and
    /// hands it back as `Err(item)`.
    pub fn push(&mut self, now: Nanos, item: T) -> Result<(), T> {
        let now_ns = self.observe(now);
        if self.free_head == NIL {
            self.stats.overflow_drops += 1;
            return Err(item);
        }
        let release = self.release_tick_for(now_ns);
        let idx = self.free_head;
        let slot = &mut self.slots[idx as usize];
        self.free_head = slot.next;
        slot.item = Some(item);
        slot.release_tick = release;
        slot.next = NIL;
        // Release ticks never decrease from push to push (time is clamped monotone and the
        // delay is fixed), so appending keeps each bucket sorted by release tick: the head is
        // always the earliest item of that bucket, even when the caller has not popped for
        // more than one turn of the wheel and two turns share a bucket.
        let bucket = &mut self.buckets[(release & self.bucket_mask) as usize];
        if bucket.tail == NIL {
            bucket.head = idx;
        } else {
            self.slots[bucket.tail as usize].next = idx;
        }
        bucket.tail = idx;
        self.len += 1;
        self.stats.pushed += 1;
        Ok(())
    }

    /// Returns the next item whose release time is `<= now`, or `None` when nothing is due.
    /// Call it in a loop until `None` to drain everything due.
    pub fn pop_due(&mut self, now: Nanos) -> Option<T> {
        let now_tick = self.observe(now) / self.tick_ns;
        loop {
            if self.len == 0 {
                self.cursor = self.cursor.max(now_tick);
                return None;
            }
            if self.cursor > now_tick {
                return None;
            }
            let b = (self.cursor & self.bucket_mask) as usize;
            let head = self.buckets[b].head;
            if head != NIL && self.slots[head as usize].release_tick == self.cursor {
                return Some(self.unlink_head(b, head));
            }
            if self.cursor == now_tick {
                return None;
            }
            self.cursor += 1;
        }
    }

    fn unlink_head(&mut self, bucket: usize, head: u32) -> T {
        let slot = &mut self.slots[head as usize];
        let next = slot.next;
        let item = slot
            .item
            .take()
            .expect("a slot linked into a bucket always holds an item");
        slot.next = self.free_head;
        self.free_head = head;
        let b = &mut self.buckets[bucket];
        b.head = next;
        if next == NIL {
            b.tail = NIL;
        }
        self.len -= 1;
        self.stats.released += 1;
        item
    }

    /// When the next item will be due, or `None` when the line is empty. Cost: a scan from the
    /// cursor to that item's bucket (at most one turn of the wheel), so call it when idle
    /// (e.g. to tell a virtual-time loop how far to advance), not per packet.
    pub fn next_release(&self) -> Option<Nanos> {
        if self.len == 0 {
            return None;
        }
        let buckets = self.buckets.len() as u64;
        for k in 0..buckets {
            let tick = self.cursor + k;
            let head = self.buckets[(tick & self.bucket_mask) as usize].head;
            if head != NIL && self.slots[head as usize].release_tick == tick {
                return Some(Nanos(tick.saturating_mul(self.tick_ns)));
            }
        }
        // Only reachable when the caller skipped more than a turn of the wheel: every head
        // then belongs to a later turn; the earliest of them is next.
        self.buckets
            .iter()
            .filter(|b| b.head != NIL)
            .map(|b| self.slots[b.head as usize].release_tick)
            .min()
            .map(|t| Nanos(t.saturating_mul(self.tick_ns)))
    }

    /// The delay in whole ticks (rounded up).
    pub fn delay_ticks(&self) -> u64 {
        self.delay_ticks
    }
}

impl<T> core::fmt::Debug for DelayLine<T> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("DelayLine")
            .field("delay", &self.delay)
            .field("tick_ns", &self.tick_ns)
            .field("len", &self.len)
            .field("capacity", &self.slots.len())
            .field("wheel_buckets", &self.buckets.len())
            .field("stats", &self.stats)
            .finish()
    }
}
