//! CoDel, Controlled Delay (Nichols, Jacobson, McGregor, Iyengar, RFC 8289), written out in
//! docs/algorithms/codel.md.
//!
//! CoDel decides when a packet leaves, from its sojourn time (`now - enqueued_at`):
//! - `ok_to_drop` once the sojourn has stayed at or above `target` (5 ms) for an `interval`
//!   (100 ms) while more than one MTU is queued (RFC 8289 §5.3, `dodequeue`);
//! - entering the dropping state drops (or marks) that packet; while dropping, the next drop
//!   comes at `drop_next = t + interval / sqrt(count)` (the control law, §5.5), the drops
//!   spreading faster as `count` grows, until the sojourn falls below `target`;
//! - re-entering soon after leaving (within 16 intervals) resumes from the count it left with
//!   (`count = count - lastcount`, the Linux form the RFC's pseudo-code adopts).
//!
//! Units: times in nanoseconds, sizes in bytes. [`CodelState`] is the control law for one
//! queue (FQ-CoDel keeps one per flow queue); [`Codel`] is the single-FIFO discipline.
//!
//! Decided (docs/algorithms/codel.md): `1/sqrt(count)` in f64, not Linux's Newton-iterated
//! fixed point; the MTU of the "at most one MTU queued" test is the largest packet seen so far
//! (as Linux's `maxpacket`), so a queue of small packets is controlled too; with `ecn` an
//! ECN-capable packet that would be dropped is marked instead and sent (as Linux: the mark
//! counts as a drop for the control law); a packet that does not fit the buffer is dropped on
//! arrival (tail drop, as Linux `codel_qdisc_enqueue`).

use serde::{Deserialize, Serialize};
use zl_core::Nanos;
use zl_zombie::Observation;

use crate::check;
use crate::queues::{Departure, Discard, Discipline, Next, Queued, SubQueues};
use crate::{AqmConfigError, PacketMeta, Verdict};

/// CoDel parameters in config units.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CodelParams {
    /// Acceptable standing queue delay, ms, `> 0`. Default 5 (RFC 8289 §4.3).
    pub target_ms: f64,
    /// The window over which the delay must stay above `target` before dropping, ms,
    /// `target_ms < interval_ms`. Default 100 (RFC 8289 §4.4).
    pub interval_ms: f64,
    /// Mark ECN-capable packets instead of dropping them. Default off for `codel` (as Linux's
    /// `codel` qdisc), on for `fq-codel` (RFC 8290 §5.1).
    pub ecn: bool,
}

impl Default for CodelParams {
    fn default() -> Self {
        CodelParams {
            target_ms: 5.0,
            interval_ms: 100.0,
            ecn: false,
        }
    }
}

impl CodelParams {
    /// Checks the parameters.
    pub fn validate(&self) -> Result<CodelConfig, AqmConfigError> {
        let target = positive_ms("target_ms", self.target_ms)?;
        let interval = positive_ms("interval_ms", self.interval_ms)?;
        check::ordered("interval_ms", "target_ms", self.target_ms, self.interval_ms)?;
        Ok(CodelConfig {
            target,
            interval,
            ecn: self.ecn,
        })
    }
}

/// A positive, finite duration in milliseconds, as [`Nanos`].
pub(crate) fn positive_ms(param: &'static str, ms: f64) -> Result<Nanos, AqmConfigError> {
    if ms > 0.0 && ms.is_finite() && ms < 1e9 {
        Ok(Nanos::from_secs_f64(ms / 1e3))
    } else {
        Err(check::err(param, ms, &format!("0 < {param} < 1e9, finite")))
    }
}

/// Validated CoDel constants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CodelConfig {
    /// `TARGET`.
    pub target: Nanos,
    /// `INTERVAL`.
    pub interval: Nanos,
    /// Mark instead of drop where the packet is markable.
    pub ecn: bool,
}

/// The control law's state for one queue (RFC 8289 §5: `count_`, `lastcount_`, `dropping_`,
/// `first_above_time_`, `drop_next_`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CodelState {
    /// Drops (and marks) since entering the dropping state.
    pub count: u32,
    /// `count` when the dropping state was last entered.
    pub lastcount: u32,
    /// In the dropping state.
    pub dropping: bool,
    /// When the sojourn, above `target` since then, makes dropping acceptable (`None`: it was
    /// below at the latest dequeue).
    pub first_above_time: Option<Nanos>,
    /// When the next drop is due while dropping.
    pub drop_next: Nanos,
}

/// Counters of one CoDel (or FQ-CoDel) discipline, as `tc -s qdisc` shows them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CodelStats {
    /// Packets dropped by the control law as they left.
    pub dropped: u64,
    /// Packets marked instead of dropped.
    pub ecn_marks: u64,
    /// The largest packet seen, bytes (the `MAXPACKET` of the one-MTU test).
    pub maxpacket: u32,
}

/// One packet taken off a queue for the control law, with the bytes left behind it.
pub(crate) struct Taken<T> {
    pub(crate) queued: Queued<T>,
    pub(crate) bytes_left: u64,
}

/// `t + interval / sqrt(count)` (RFC 8289 §5.5).
#[inline]
pub fn control_law(t: Nanos, interval: Nanos, count: u32) -> Nanos {
    let count = f64::from(count.max(1));
    t + Nanos((interval.0 as f64 / count.sqrt()) as u64)
}

impl CodelState {
    /// `dodequeue`: whether the sojourn of the packet just taken has been above target for an
    /// interval (`ok_to_drop`); updates `first_above_time`.
    fn ok_to_drop<T>(&mut self, cfg: &CodelConfig, now: Nanos, t: &Taken<T>, mtu: u32) -> bool {
        let sojourn = now - t.queued.enqueued_at;
        if sojourn < cfg.target || t.bytes_left <= u64::from(mtu) {
            self.first_above_time = None;
            return false;
        }
        match self.first_above_time {
            None => {
                self.first_above_time = Some(now + cfg.interval);
                false
            }
            Some(at) => now >= at,
        }
    }

    /// RFC 8289's `dequeue`: takes packets with `take` (the queue's head, and the bytes left
    /// behind it) until one is to be sent, handing the dropped ones to `discard`; `None` when
    /// the queue emptied first. The `bool` is true when the packet sent is to be marked (with
    /// `ecn`, a markable packet the law would have dropped).
    pub(crate) fn dequeue<T>(
        &mut self,
        cfg: &CodelConfig,
        now: Nanos,
        mtu: u32,
        stats: &mut CodelStats,
        mut take: impl FnMut() -> Option<Taken<T>>,
        discard: &mut impl FnMut(Queued<T>, Discard),
    ) -> Option<(Queued<T>, bool)> {
        let Some(mut r) = take() else {
            self.first_above_time = None;
            return None;
        };
        let mut ok = self.ok_to_drop(cfg, now, &r, mtu);
        if self.dropping {
            if !ok {
                self.dropping = false;
            }
            while self.dropping && now >= self.drop_next {
                self.count += 1;
                if cfg.ecn && r.queued.meta.is_markable() {
                    stats.ecn_marks += 1;
                    self.drop_next = control_law(self.drop_next, cfg.interval, self.count);
                    return Some((r.queued, true));
                }
                stats.dropped += 1;
                discard(r.queued, Discard::Dequeue);
                match take() {
                    None => {
                        self.dropping = false;
                        self.first_above_time = None;
                        return None;
                    }
                    Some(next) => r = next,
                }
                ok = self.ok_to_drop(cfg, now, &r, mtu);
                if ok {
                    self.drop_next = control_law(self.drop_next, cfg.interval, self.count);
                } else {
                    self.dropping = false;
                }
            }
            Some((r.queued, false))
        } else if ok {
            let mut mark = false;
            if cfg.ecn && r.queued.meta.is_markable() {
                stats.ecn_marks += 1;
                mark = true;
            } else {
                stats.dropped += 1;
                discard(r.queued, Discard::Dequeue);
                match take() {
                    Some(next) => {
                        // The next packet's own `dodequeue` (RFC 8289: `r = dodequeue(now)`):
                        // it updates `first_above_time`; its verdict is not acted on until the
                        // next dequeue.
                        self.ok_to_drop(cfg, now, &next, mtu);
                        r = next;
                    }
                    None => {
                        self.first_above_time = None;
                        self.enter_dropping(cfg, now);
                        return None;
                    }
                }
            }
            self.enter_dropping(cfg, now);
            Some((r.queued, mark))
        } else {
            Some((r.queued, false))
        }
    }

    /// Enters the dropping state at `now` after its first drop (or mark).
    fn enter_dropping(&mut self, cfg: &CodelConfig, now: Nanos) {
        self.dropping = true;
        let delta = self.count.wrapping_sub(self.lastcount);
        self.count = 1;
        if delta > 1 && now - self.drop_next < Nanos(16 * cfg.interval.0) {
            self.count = delta;
        }
        self.drop_next = control_law(now, cfg.interval, self.count);
        self.lastcount = self.count;
    }
}

/// CoDel on one FIFO: the discipline of `kind = "codel"`.
#[derive(Debug)]
pub struct Codel<T> {
    cfg: CodelConfig,
    state: CodelState,
    queue: SubQueues<T>,
    cap_packets: u32,
    cap_bytes: u64,
    stats: CodelStats,
}

impl<T> Codel<T> {
    /// A CoDel FIFO holding at most `slots` packets ever (its arena), with active limits
    /// `packets` and `bytes`.
    pub fn new(cfg: CodelConfig, slots: u32, packets: u32, bytes: u64) -> Self {
        Codel {
            cfg,
            state: CodelState::default(),
            queue: SubQueues::new(1, slots),
            cap_packets: packets.min(slots),
            cap_bytes: bytes,
            stats: CodelStats::default(),
        }
    }

    /// The validated constants.
    pub fn config(&self) -> &CodelConfig {
        &self.cfg
    }

    /// The control law's state.
    pub fn state(&self) -> &CodelState {
        &self.state
    }

    /// The counters.
    pub fn stats(&self) -> &CodelStats {
        &self.stats
    }

    /// Takes over `old`'s control-law state (a live reconfiguration between CoDel settings).
    pub fn inherit_state(&mut self, old: &Codel<T>) {
        self.state = old.state;
        self.stats = old.stats;
    }
}

impl<T> Discipline<T> for Codel<T> {
    fn enqueue<R: rand::RngCore + ?Sized>(
        &mut self,
        now: Nanos,
        pkt: &PacketMeta,
        _observed: Option<&Observation>,
        item: T,
        _rng: &mut R,
        _mark: impl FnOnce(&mut T),
        _discard: &mut impl FnMut(Queued<T>, Discard),
    ) -> Result<Verdict, (Verdict, T)> {
        if self.queue.len() >= self.cap_packets
            || self.queue.bytes() + u64::from(pkt.len) > self.cap_bytes
        {
            return Err((Verdict::TailDrop, item));
        }
        self.stats.maxpacket = self.stats.maxpacket.max(pkt.len);
        let q = Queued {
            item,
            meta: *pkt,
            enqueued_at: now,
        };
        match self.queue.push_back(0, q) {
            Ok(()) => Ok(Verdict::Enqueue),
            Err(q) => Err((Verdict::TailDrop, q.item)),
        }
    }

    fn dequeue<R: rand::RngCore + ?Sized>(
        &mut self,
        now: Nanos,
        _rng: &mut R,
        discard: &mut impl FnMut(Queued<T>, Discard),
    ) -> Next<T> {
        let queue = &mut self.queue;
        let taken = self.state.dequeue(
            &self.cfg,
            now,
            self.stats.maxpacket,
            &mut self.stats,
            || {
                let queued = queue.pop_front(0)?;
                Some(Taken {
                    queued,
                    bytes_left: queue.bytes(),
                })
            },
            discard,
        );
        match taken {
            Some((queued, mark)) => Next::Packet(Departure { queued, mark }),
            None => Next::Empty,
        }
    }

    fn len_packets(&self) -> u32 {
        self.queue.len()
    }

    fn len_bytes(&self) -> u64 {
        self.queue.bytes()
    }

    fn set_capacity(&mut self, packets: u32, bytes: u64) {
        self.cap_packets = packets.min(self.queue.capacity());
        self.cap_bytes = bytes;
    }

    fn adopt(&mut self, q: Queued<T>) -> Result<(), Queued<T>> {
        self.stats.maxpacket = self.stats.maxpacket.max(q.meta.len);
        self.queue.push_back(0, q)
    }

    fn drain(&mut self, mut f: impl FnMut(Queued<T>)) {
        while let Some(q) = self.queue.pop_front(0) {
            f(q);
        }
    }
}
