//! DualPI2, the DualQ Coupled AQM (De Schepper, Briscoe, White, RFC 9332) with a PI2 base AQM
//! (De Schepper et al., "PI2: A Linearized AQM for both Classic and Scalable TCP", CoNEXT
//! 2016), written out in docs/algorithms/dualpi2.md.
//!
//! Two queues: **L** for L4S packets (ECN field ECT(1) or CE, RFC 9331's identifier) and **C**
//! for the rest. A PI controller, every `t_update` (16 ms), moves the base probability `p'`
//! from the queueing delay (the larger head sojourn of the two queues):
//!
//! ```text
//! p' += alpha (qdelay - target) + beta (qdelay - qdelay_old)    (RFC 9332 A.1, s and Hz)
//! p_C = p'^2          classic packets: dropped (marked if ECN-capable) with p_C
//! p_CL = k p'         L4S packets: marked with max(p_CL, step)
//! step: an L4S packet whose sojourn exceeds `step_thresh` (1 ms) is marked
//! ```
//!
//! with `target` 15 ms, `alpha` 0.16 Hz, `beta` 3.2 Hz, coupling `k` = 2. The squared classic
//! probability and the linear L4S one give Reno/Cubic and scalable (DCTCP, Prague) flows about
//! the same rate (RFC 9332 §2.1). The scheduler is the reference implementation's weighted
//! round robin with classic protection: L goes first, but the C queue is guaranteed
//! `c_protection` (10 %) of the bytes while both are backlogged. **Overload** (`k p' > 1`):
//! every packet may be dropped (L4S ones too), so an unresponsive L4S flood cannot take the
//! link (RFC 9332 §4.1.3).
//!
//! Decided (docs/algorithms/dualpi2.md): the defaults and the scheduler are Linux's
//! `sch_dualpi2` (the reference implementation RFC 9332 points to; the RFC's own time-shifted
//! FIFO is one of the schedulers it allows); the delay is the larger of the two queues' head
//! sojourns (Linux), not the C queue's alone (RFC pseudo-code), so an L4S flood raises `p'`
//! too; decisions are made at dequeue (Linux's default `drop_dequeue`); no drop or mark while
//! less than two MTUs are queued; the controller runs lazily as PIE's does (`crate::pie`);
//! the step marker is `step_thresh` on the L packet's own sojourn, the step of RFC 9332 A.1 with
//! a zero-width ramp.

use serde::{Deserialize, Serialize};
use zl_core::{Ecn, Nanos};
use zl_zombie::Observation;

use crate::codel::positive_ms;
use crate::queues::{Departure, Discard, Discipline, Next, Queued, SubQueues};
use crate::{check, uniform, AqmConfigError, PacketMeta, Verdict};

/// DualPI2 parameters in config units.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct DualPi2Params {
    /// Target queueing delay of the classic queue, ms, `> 0`. Default 15.
    pub target_ms: f64,
    /// PI update interval, ms, `> 0`. Default 16.
    pub t_update_ms: f64,
    /// Integral gain, Hz, `>= 0`. Default 0.16.
    pub alpha: f64,
    /// Proportional gain, Hz, `>= 0`. Default 3.2.
    pub beta: f64,
    /// Coupling factor `k`, `>= 1`. Default 2.
    pub coupling: f64,
    /// The L queue's step marking threshold on a packet's sojourn, ms, `> 0`. Default 1.
    pub step_thresh_ms: f64,
    /// The C queue's guaranteed share of the bytes while both queues are backlogged, percent,
    /// `0 ..= 100`. Default 10.
    pub c_protection: u32,
    /// Drop L4S packets too under overload (`k p' > 1`); off keeps marking them with
    /// probability 1 and caps `p'` at `1/k`. Default on.
    pub drop_on_overload: bool,
}

impl Default for DualPi2Params {
    fn default() -> Self {
        DualPi2Params {
            target_ms: 15.0,
            t_update_ms: 16.0,
            alpha: 0.16,
            beta: 3.2,
            coupling: 2.0,
            step_thresh_ms: 1.0,
            c_protection: 10,
            drop_on_overload: true,
        }
    }
}

impl DualPi2Params {
    /// Checks the parameters.
    pub fn validate(&self) -> Result<DualPi2Config, AqmConfigError> {
        let target = positive_ms("target_ms", self.target_ms)?;
        let t_update = positive_ms("t_update_ms", self.t_update_ms)?;
        let step = positive_ms("step_thresh_ms", self.step_thresh_ms)?;
        let alpha = check::non_negative("alpha", self.alpha)?;
        let beta = check::non_negative("beta", self.beta)?;
        if !(self.coupling >= 1.0 && self.coupling <= 100.0) {
            return Err(check::err(
                "coupling",
                self.coupling,
                "1 <= coupling <= 100",
            ));
        }
        if self.c_protection > 100 {
            return Err(check::err(
                "c_protection",
                self.c_protection,
                "0 <= c_protection <= 100",
            ));
        }
        Ok(DualPi2Config {
            target,
            t_update,
            alpha,
            beta,
            coupling: self.coupling,
            step_thresh: step,
            c_protection: self.c_protection,
            drop_on_overload: self.drop_on_overload,
        })
    }
}

/// Validated DualPI2 constants.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DualPi2Config {
    /// PI target delay.
    pub target: Nanos,
    /// PI update interval.
    pub t_update: Nanos,
    /// Integral gain, Hz.
    pub alpha: f64,
    /// Proportional gain, Hz.
    pub beta: f64,
    /// `k`.
    pub coupling: f64,
    /// The step threshold.
    pub step_thresh: Nanos,
    /// The C queue's weight, percent.
    pub c_protection: u32,
    /// Drop L4S packets under overload.
    pub drop_on_overload: bool,
}

/// Counters of a DualPI2 discipline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DualPi2Stats {
    /// Packets classified into the L queue.
    pub l_packets: u64,
    /// Packets classified into the C queue.
    pub c_packets: u64,
    /// L packets marked by the step (sojourn above `step_thresh`).
    pub step_marks: u64,
    /// L packets marked by the coupled probability `k p'`.
    pub coupled_marks: u64,
    /// C packets marked with `p'^2`.
    pub classic_marks: u64,
    /// C packets dropped with `p'^2`.
    pub classic_drops: u64,
    /// L packets dropped (overload, or not ECN-capable over the step).
    pub l4s_drops: u64,
}

/// The two queues.
const L: usize = 0;
const C: usize = 1;
const MAX_REPLAYED_UPDATES: u64 = 1024;

/// True when a packet belongs in the L queue: ECT(1) or CE (RFC 9331 §3).
#[inline]
pub fn is_l4s(pkt: &PacketMeta) -> bool {
    matches!(pkt.ecn, Ecn::Ect1 | Ecn::Ce)
}

/// DualPI2: the discipline of `kind = "dualpi2"`.
#[derive(Debug)]
pub struct DualPi2<T> {
    cfg: DualPi2Config,
    queues: SubQueues<T>,
    /// The base probability `p'`.
    p: f64,
    qdelay_old: Nanos,
    next_update: Option<Nanos>,
    /// The WRR credit: L may go first while it is <= 0 (Linux `c_protection_credit`).
    credit: i64,
    maxpacket: u32,
    cap_packets: u32,
    cap_bytes: u64,
    stats: DualPi2Stats,
}

impl<T> DualPi2<T> {
    /// A DualPI2 whose two queues hold at most `slots` packets together ever, with active
    /// limits `packets` and `bytes`.
    pub fn new(cfg: DualPi2Config, slots: u32, packets: u32, bytes: u64) -> Self {
        let mut d = DualPi2 {
            cfg,
            queues: SubQueues::new(2, slots),
            p: 0.0,
            qdelay_old: Nanos::ZERO,
            next_update: None,
            credit: 0,
            maxpacket: 1514,
            cap_packets: packets.min(slots),
            cap_bytes: bytes,
            stats: DualPi2Stats::default(),
        };
        d.reset_credit();
        d
    }

    /// The validated constants.
    pub fn config(&self) -> &DualPi2Config {
        &self.cfg
    }

    /// The counters.
    pub fn stats(&self) -> &DualPi2Stats {
        &self.stats
    }

    /// The base probability `p'`; `p_C = p'^2`, `p_CL = k p'`.
    pub fn base_probability(&self) -> f64 {
        self.p
    }

    /// Packets in the L and the C queue.
    pub fn queue_lens(&self) -> (u32, u32) {
        (self.queues.queue(L).len(), self.queues.queue(C).len())
    }

    /// Takes over `old`'s controller and counters.
    pub fn inherit_state(&mut self, old: &DualPi2<T>) {
        self.p = old.p;
        self.qdelay_old = old.qdelay_old;
        self.next_update = old.next_update;
        self.stats = old.stats;
    }

    fn weights(&self) -> (i64, i64) {
        let wc = i64::from(self.cfg.c_protection);
        (wc, 100 - wc)
    }

    /// Linux `dualpi2_reset_c_protection`: the credit starts at `(wc - wl) * MTU`.
    fn reset_credit(&mut self) {
        let (wc, wl) = self.weights();
        self.credit = i64::from(self.maxpacket) * (wc - wl);
    }

    /// The larger head sojourn of the two queues at `now`.
    fn qdelay(&self, now: Nanos) -> Nanos {
        let head = |q| {
            self.queues
                .front(q)
                .map_or(Nanos::ZERO, |e| now - e.enqueued_at)
        };
        head(L).max(head(C))
    }

    /// Runs every PI update due by `now`.
    fn catch_up(&mut self, now: Nanos) {
        let next = match self.next_update {
            None => {
                self.next_update = Some(now + self.cfg.t_update);
                return;
            }
            Some(t) if now < t => return,
            Some(t) => t,
        };
        let step = self.cfg.t_update.0.max(1);
        let periods = (now.0 - next.0) / step + 1;
        let qdelay = self.qdelay(now);
        for _ in 0..periods.min(MAX_REPLAYED_UPDATES) {
            self.update(qdelay);
        }
        self.next_update = Some(Nanos(next.0 + periods * step));
    }

    /// One PI update with the measured `qdelay` (RFC 9332 A.1 `dualpi2_update`).
    pub fn update(&mut self, qdelay: Nanos) {
        let secs = |t: Nanos| t.as_secs_f64();
        let delta = self.cfg.alpha * (secs(qdelay) - secs(self.cfg.target))
            + self.cfg.beta * (secs(qdelay) - secs(self.qdelay_old));
        self.qdelay_old = qdelay;
        let max = if self.cfg.drop_on_overload {
            1.0
        } else {
            // Without drops on overload, `k p'` is held at 1 (Linux).
            1.0 / self.cfg.coupling
        };
        self.p = (self.p + delta).clamp(0.0, max);
    }

    /// The dequeue-time decision on one packet: `Ok(mark)` to send it (marked or not), `Err`
    /// to drop it.
    fn decide<R: rand::RngCore + ?Sized>(
        &mut self,
        now: Nanos,
        from: usize,
        q: &Queued<T>,
        rng: &mut R,
    ) -> Result<bool, ()> {
        // Too little queued to drop or mark anything by probability (Linux `must_drop`).
        let small = self.queues.bytes() + u64::from(q.meta.len) < 2 * u64::from(self.maxpacket);
        let p_cl = self.cfg.coupling * self.p;
        let overload = p_cl > 1.0;
        let ecn_capable = q.meta.ecn.is_ecn_capable();
        if from == C {
            if !small && uniform(rng) < self.p && uniform(rng) < self.p {
                if overload || !ecn_capable {
                    self.stats.classic_drops += 1;
                    return Err(());
                }
                self.stats.classic_marks += 1;
                return Ok(true);
            }
            return Ok(false);
        }
        let mut mark = false;
        if !small {
            if overload && self.cfg.drop_on_overload {
                self.stats.l4s_drops += 1;
                return Err(());
            }
            if uniform(rng) < p_cl.min(1.0) {
                self.stats.coupled_marks += 1;
                mark = true;
            }
        }
        if !mark && now - q.enqueued_at > self.cfg.step_thresh {
            if !ecn_capable {
                self.stats.l4s_drops += 1;
                return Err(());
            }
            self.stats.step_marks += 1;
            mark = true;
        }
        Ok(mark)
    }
}

impl<T> Discipline<T> for DualPi2<T> {
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
        self.catch_up(now);
        if self.queues.len() >= self.cap_packets
            || self.queues.bytes() + u64::from(pkt.len) > self.cap_bytes
        {
            return Err((Verdict::TailDrop, item));
        }
        self.maxpacket = self.maxpacket.max(pkt.len);
        let q = if is_l4s(pkt) {
            self.stats.l_packets += 1;
            L
        } else {
            self.stats.c_packets += 1;
            C
        };
        let entry = Queued {
            item,
            meta: *pkt,
            enqueued_at: now,
        };
        match self.queues.push_back(q, entry) {
            Ok(()) => Ok(Verdict::Enqueue),
            Err(e) => Err((Verdict::TailDrop, e.item)),
        }
    }

    fn dequeue<R: rand::RngCore + ?Sized>(
        &mut self,
        now: Nanos,
        rng: &mut R,
        discard: &mut impl FnMut(Queued<T>, Discard),
    ) -> Next<T> {
        self.catch_up(now);
        loop {
            let l_len = self.queues.queue(L).len();
            let c_len = self.queues.queue(C).len();
            let (from, credit_change) = if l_len > 0 && (c_len == 0 || self.credit <= 0) {
                (L, if c_len > 0 { self.weights().0 } else { 0 })
            } else if c_len > 0 {
                (C, if l_len > 0 { -self.weights().1 } else { 0 })
            } else {
                self.reset_credit();
                return Next::Empty;
            };
            let Some(q) = self.queues.pop_front(from) else {
                return Next::Empty;
            };
            match self.decide(now, from, &q, rng) {
                Err(()) => discard(q, Discard::Dequeue),
                Ok(mark) => {
                    self.credit += credit_change * i64::from(q.meta.len);
                    let mark = mark && q.meta.is_markable();
                    return Next::Packet(Departure { queued: q, mark });
                }
            }
        }
    }

    fn len_packets(&self) -> u32 {
        self.queues.len()
    }

    fn len_bytes(&self) -> u64 {
        self.queues.bytes()
    }

    fn set_capacity(&mut self, packets: u32, bytes: u64) {
        self.cap_packets = packets.min(self.queues.capacity());
        self.cap_bytes = bytes;
    }

    fn adopt(&mut self, q: Queued<T>) -> Result<(), Queued<T>> {
        let which = if is_l4s(&q.meta) { L } else { C };
        self.queues.push_back(which, q)
    }

    fn drain(&mut self, mut f: impl FnMut(Queued<T>)) {
        for q in [L, C] {
            while let Some(e) = self.queues.pop_front(q) {
                f(e);
            }
        }
    }
}
