//! ZL-RED with flow isolation: the flows the Zombie List flags are moved to penalty
//! sub-queues served at their fair share, so that they cannot keep most of the link and the
//! others never wait behind them. Written out, with its comparison to SFB, HHF, AFD and RED-PD,
//! in docs/algorithms/zl-isolation.md.
//!
//! The class holds a **normal** FIFO and a **penalty box** of at most `max_flows` (K) flows,
//! each penalized flow with a sub-queue of its own; every queue has ZL-RED's admission (the
//! same Zombie List observation, on that queue's length: eq. (7), (2)-(6)). A flow goes
//! through four steps:
//!
//! 1. **Flagged** (eq. 4 with a margin): an arrival whose flow has `F > flag T P(t)` in the
//!    list (`flag` = 1.25), and that is not in the box, enters it *watched*: from then on every
//!    packet of it is counted exactly.
//! 2. **Confirmed**: a watched flow whose arrival rate stays at or above `enter` (2) fair
//!    shares over `confirm` (5) windows in a row (of `window` = 100 ms each, measured at the
//!    window ticks) is *penalized*; a window below clears it from the box. The Zombie List is a
//!    sample (F of a responsive flow may sit well above its share for a few hundred ms), and a
//!    responsive flow above its share for a moment meets ZL-RED's raised drop probability
//!    (eq. 5, `a` times) while watched and backs off within a round trip: what stays above
//!    for half a second does not respond.
//! 3. **Penalized**: its arrivals go to its penalty sub-queue, which holds at most
//!    `penalty_packets / n` of them (n penalized flows share the penalty buffer), behind
//!    ZL-RED's admission on that sub-queue with the penalty buffer's `B`.
//! 4. **Released** (hysteresis): after `hold` (3) consecutive windows below `leave` (1.25)
//!    fair shares it leaves the box.
//!
//! A flow's packets never overtake one another: when it is penalized, those it still has in the
//! normal queue move to its sub-queue first (in order, ahead of its next arrivals); when it is
//! released, what is left in its sub-queue moves to the normal queue's tail (an O(B) pass,
//! once per transition).
//!
//! **Service.** Each penalty sub-queue is served at most at one fair share, by a token bucket
//! of its own two MTUs deep, round robin among those whose bucket holds their head, and ahead
//! of the normal queue: a flood gets its share and no more whatever the others do, and an
//! arrival in the normal queue waits behind at most one penalty packet. The fair share is
//! `r / N`:
//!
//! - `r`, the class's service rate: the bytes sent over the time the normal queue stayed
//!   backlogged, in the last window (what the link and the scheduler give the class while it
//!   has packets);
//! - `N`, the list's estimate of the active flows (1/P(t), SRED's) refined: each boxed flow
//!   measured over a whole window counts one, and the others count, group by group, as their
//!   share of the arrivals over their mean share (their hit frequency in the list), `S / P'`;
//!   the groups are the flows flagged or boxed but not measured yet, and the rest.
//!
//! Decided (docs/algorithms/zl-isolation.md): `N` is refined because 1/P(t) = 1/sum pi_j^2
//! counts flows of unequal shares as fewer than there are (20 light flows and one at a third of
//! the arrivals read as about 8), and a flood being watched would raise the fair share it is
//! measured against until it no longer looked like a flood. An arrival of flow j hits with
//! probability pi_j (its share of the zombies), so a group's own hit frequency is its mean
//! share `sum pi_j^2 / S`, and `S / P'` its number of flows when they are near equal; the
//! heavy flows not yet measured are kept apart from the light ones (one mean over both would
//! count a flood in its first window as many light flows), and the measured ones are counted
//! exactly. P(t) minus the measured flows' terms would do the same for the rest, but as a
//! difference smaller than P(t)'s own noise when they make most of it (a few floods among few
//! flows).
//!
//! The penalty cap holds when the normal queue is idle too (not work-conserving: "at most its
//! fair share"; a link the responsive flows do not fill is theirs to grow into). No flow is
//! penalized before the class has observed `3 M / p_swap` arrivals, three turnovers of the
//! list's zombies (before that the list holds the first arrivals rather than the current mix,
//! and P(t), an EWMA of weight 1/M from 0, has not reached its value).
//!
//! The box is full at K: a flow flagged then stays in the normal queue under ZL-RED's raised
//! drop probability, as in the paper (counted: `box_full`), unless it can take the place of a
//! lighter one: a watched flow with a smaller occurrence share, else a penalized flow whose
//! measured rate is below the fair share (released early). A false positive (a responsive flow
//! at twice its share for `confirm` windows in a row) is held to about its fair share until it
//! has stayed under 1.25 times it for three windows, which costs a flow already near its share
//! little. Eq. (4) flags a flow whose occurrence is above the mean, so about half of a crowd of
//! equal flows at any time, hence the `flag` margin: most are cleared by their first window,
//! and a full box makes room for a flow with a larger share by letting its lightest watched
//! flow go. State is O(K) per class, K at most the list's M: nothing grows with the number of
//! flows.

use std::sync::Arc;

use zl_core::{FlowId, Nanos};
use zl_zombie::{Observation, ZombieList};

pub use crate::isolation_params::IsolationParams;

use crate::codel::{positive_ms, CodelConfig, CodelParams, CodelState, CodelStats, Taken};
use crate::queues::{Departure, Discard, Discipline, IsolateBy, Next, Queued, SubQueues};
use crate::zlred::{ZlRed, ZlRedConfig, ZlRedParams};
use crate::{check, Admission, AqmConfigError, AqmStats, Arrival, PacketMeta, QueueView, Verdict};

/// Validated isolation constants.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct IsolationConfig {
    /// The isolation key.
    pub by: IsolateBy,
    /// K.
    pub max_flows: u32,
    /// The window.
    pub window: Nanos,
    /// Entry ratio.
    pub enter: f64,
    /// Calm ratio.
    pub leave: f64,
    /// Calm windows to release.
    pub hold: u32,
    /// Eq. (4)'s margin for entering the box.
    pub flag: f64,
    /// Windows above `enter` to penalize.
    pub confirm: u32,
    /// The penalty queue's capacity, packets.
    pub penalty_packets: u32,
    /// The normal queue's ZL-RED.
    pub normal: ZlRedConfig,
    /// The penalty queue's ZL-RED (its `B` is the penalty queue's).
    pub penalty: ZlRedConfig,
    /// CoDel on the normal queue's departures (`None`: off).
    pub normal_codel: Option<CodelConfig>,
}

impl IsolationParams {
    /// Checks the parameters for a class of `capacity_packets` (B) whose ZL-RED is `zlred`.
    pub fn validate(
        &self,
        zlred: &ZlRedParams,
        capacity_packets: u32,
    ) -> Result<IsolationConfig, AqmConfigError> {
        let window = positive_ms("isolation.window_ms", self.window_ms)?;
        if !(1..=4096).contains(&self.max_flows) {
            return Err(check::err(
                "isolation.max_flows",
                self.max_flows,
                "1 <= max_flows <= 4096",
            ));
        }
        if self.max_flows as usize > zlred.zombie.m {
            return Err(check::err(
                "isolation.max_flows",
                self.max_flows,
                &format!("max_flows <= the Zombie List's M = {}", zlred.zombie.m),
            ));
        }
        if !(self.enter > 1.0 && self.enter.is_finite()) {
            return Err(check::err(
                "isolation.enter",
                self.enter,
                "1 < enter, finite",
            ));
        }
        if !(self.leave > 0.0 && self.leave < self.enter) {
            return Err(check::err(
                "isolation.leave",
                self.leave,
                &format!("0 < leave < enter = {}", self.enter),
            ));
        }
        if self.hold == 0 {
            return Err(check::err("isolation.hold", self.hold, "hold >= 1"));
        }
        if !(self.flag >= 1.0 && self.flag.is_finite()) {
            return Err(check::err("isolation.flag", self.flag, "1 <= flag, finite"));
        }
        if self.confirm == 0 {
            return Err(check::err(
                "isolation.confirm",
                self.confirm,
                "confirm >= 1",
            ));
        }
        let share = check::unit_open_closed("isolation.penalty_share", self.penalty_share)?;
        let normal_codel = if self.normal_target_ms == 0.0 {
            None
        } else {
            Some(
                CodelParams {
                    target_ms: self.normal_target_ms,
                    interval_ms: self.normal_interval_ms,
                    ecn: zlred.ecn,
                }
                .validate()
                .map_err(|e| AqmConfigError {
                    param: match e.param {
                        "target_ms" => "isolation.normal_target_ms",
                        "interval_ms" => "isolation.normal_interval_ms",
                        other => other,
                    },
                    ..e
                })?,
            )
        };
        let normal = zlred.validate(capacity_packets)?;
        let penalty_packets = ((f64::from(capacity_packets) * share).ceil() as u32).max(1);
        // The penalty queue's ZL-RED: its thresholds scale with its own B, th_min kept below a
        // third of it.
        let th_min = zlred
            .th_min
            .min((f64::from(penalty_packets) / 3.0 - 1.0).max(0.0));
        let penalty = ZlRedParams { th_min, ..*zlred }
            .validate(penalty_packets)
            .map_err(|e| AqmConfigError {
                expected: format!(
                    "{} (the penalty queue holds {penalty_packets} packets: raise \
                     isolation.penalty_share or the class's buffer)",
                    e.expected
                ),
                ..e
            })?;
        Ok(IsolationConfig {
            by: self.by,
            max_flows: self.max_flows,
            window,
            enter: self.enter,
            leave: self.leave,
            hold: self.hold,
            flag: self.flag,
            confirm: self.confirm,
            penalty_packets,
            normal,
            penalty,
            normal_codel,
        })
    }
}

/// Where a boxed flow stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BoxState {
    /// Flagged by eq. (4), its rate being measured.
    Watched,
    /// In the penalty queue.
    Penalized,
}

/// One flow in the penalty box, as reports show it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BoxedFlow {
    /// The isolation key (a flow id, or a host key: [`IsolateBy::key`]).
    pub key: FlowId,
    /// Watched or penalized.
    pub state: BoxState,
    /// When it entered the box (watched) and when it was penalized.
    pub flagged_at: Nanos,
    /// When it was penalized (`None` while watched).
    pub penalized_at: Option<Nanos>,
    /// Its arrival rate over its latest full window, bit/s.
    pub rate_bps: f64,
    /// Its occurrence share `F/T` at its latest arrival.
    pub share: f64,
    /// Its packets in its penalty sub-queue now.
    pub queued: u32,
    /// Packets of it that arrived while penalized, and how many of those were dropped.
    pub penalized_packets: u64,
    /// Drops among them.
    pub penalized_drops: u64,
    /// Bytes sent from its penalty sub-queue since it was penalized (its service rate is
    /// this over the time since `penalized_at`).
    pub penalized_sent_bytes: u64,
}

/// A flow's stay in the penalty queue, from its confirmation to its release.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PenaltyEpisode {
    /// The isolation key.
    pub key: FlowId,
    /// When it was flagged (entered the box).
    pub flagged_at: Nanos,
    /// When it was penalized.
    pub penalized_at: Nanos,
    /// When it was released (`None`: still penalized).
    pub released_at: Option<Nanos>,
}

/// Counters of the isolation.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IsolationStats {
    /// Flows flagged by eq. (4) into the box (watched).
    pub flagged: u64,
    /// Watched flows confirmed and penalized.
    pub penalized: u64,
    /// Watched flows let go without a penalty.
    pub cleared: u64,
    /// Penalized flows released.
    pub released: u64,
    /// Flags that found the box full.
    pub box_full: u64,
    /// Arrivals of penalized flows over their share of the penalty buffer (dropped).
    pub over_share_drops: u64,
    /// Packets sent from the penalty queue.
    pub penalty_sent: u64,
    /// Packets sent from the normal queue: the wait of the flows isolation protects (the
    /// class's sojourn counts the penalized flows' own waits too).
    pub normal_sent: u64,
    /// Their sojourns in the normal queue, summed (a released flow's packets count from their
    /// release, when they joined it).
    pub normal_sojourn_sum: Nanos,
    /// The longest of them.
    pub normal_sojourn_max: Nanos,
    /// Packets CoDel dropped as they left the normal queue.
    pub normal_codel_drops: u64,
    /// Packets CoDel marked CE instead of dropping them (ZL-RED's `ecn` on, ECT packets).
    pub normal_codel_marks: u64,
}

/// Episodes kept for reports (the latest; the older ones are only counted).
pub const EPISODES_KEPT: usize = 256;

#[derive(Clone, Copy, Debug)]
struct Entry {
    key: FlowId,
    state: BoxState,
    flagged_at: Nanos,
    penalized_at: Option<Nanos>,
    window_start: Nanos,
    window_bytes: u64,
    rate_bps: f64,
    calm: u32,
    share: f64,
    /// Its rate has been measured over a whole window: its share then refines N.
    measured: bool,
    /// Its arrival share over its latest whole window.
    arrival_share: f64,
    /// Its window completed at this tick: a verdict is due.
    due: bool,
    /// Its arrivals since it entered the box, and how many of them hit in the list (its own
    /// hit frequency, its term of P(t)).
    arrivals: u64,
    hits: u64,
    packets: u64,
    drops: u64,
    sent_bytes: u64,
    /// Index of its open episode in the ring (penalized only).
    episode: usize,
}

/// The penalty box: at most K entries, found by key through a small open-addressed table
/// (linear probing, backward-shift deletion), reserved at build.
#[derive(Debug)]
struct PenaltyBox {
    entries: Vec<Option<Entry>>,
    /// Table of entry indices + 1 (0 = empty), a power of two at least 2K.
    table: Box<[u16]>,
    len: usize,
    /// The free entry indices (a stack: O(1) insert).
    free: Vec<u16>,
    /// Entries measured over a whole window (`Entry::measured`).
    measured: u32,
}

impl PenaltyBox {
    fn new(k: u32) -> Self {
        let size = (2 * k as usize).next_power_of_two().max(4);
        PenaltyBox {
            entries: vec![None; k as usize],
            table: vec![0; size].into_boxed_slice(),
            len: 0,
            free: (0..k as u16).rev().collect(),
            measured: 0,
        }
    }

    fn mask(&self) -> usize {
        self.table.len() - 1
    }

    fn home(&self, key: FlowId) -> usize {
        (zl_core::splitmix64(key.0, 2) as usize) & self.mask()
    }

    fn find(&self, key: FlowId) -> Option<usize> {
        let mut i = self.home(key);
        loop {
            let e = self.table[i];
            if e == 0 {
                return None;
            }
            let idx = usize::from(e - 1);
            if self.entries[idx].as_ref().is_some_and(|x| x.key == key) {
                return Some(idx);
            }
            i = (i + 1) & self.mask();
        }
    }

    fn is_full(&self) -> bool {
        self.len == self.entries.len()
    }

    fn insert(&mut self, entry: Entry) -> Option<usize> {
        let idx = usize::from(self.free.pop()?);
        self.measured += u32::from(entry.measured);
        let mut i = self.home(entry.key);
        while self.table[i] != 0 {
            i = (i + 1) & self.mask();
        }
        self.table[i] = idx as u16 + 1;
        self.entries[idx] = Some(entry);
        self.len += 1;
        Some(idx)
    }

    fn remove(&mut self, idx: usize) {
        let Some(entry) = self.entries[idx].take() else {
            return;
        };
        self.len -= 1;
        self.free.push(idx as u16);
        self.measured -= u32::from(entry.measured);
        let mask = self.mask();
        let mut i = self.home(entry.key);
        while usize::from(self.table[i]) != idx + 1 {
            i = (i + 1) & mask;
        }
        // Backward-shift deletion: pull later members of the probe run into the hole.
        let mut hole = i;
        let mut j = (i + 1) & mask;
        while self.table[j] != 0 {
            let k = usize::from(self.table[j] - 1);
            let home = self.entries[k].as_ref().map_or(j, |e| self.home(e.key));
            // `j`'s entry may move to the hole when its home is not in (hole, j] cyclically.
            let in_between = if hole <= j {
                hole < home && home <= j
            } else {
                hole < home || home <= j
            };
            if !in_between {
                self.table[hole] = self.table[j];
                hole = j;
            }
            j = (j + 1) & mask;
        }
        self.table[hole] = 0;
    }
}

const NORMAL: usize = 0;
/// The groups of [`Isolated::groups`].
const FLAGGED: usize = 0;
const REST: usize = 1;

/// A group of the flows the box does not measure (see `Isolated::estimate_flows`).
#[derive(Clone, Copy, Debug, Default)]
struct RestGroup {
    /// Its hit frequency: its mean share.
    p: f64,
    arrivals: u64,
    window_bytes: u64,
    /// Its share of the arrivals over the last window.
    share: f64,
}

impl RestGroup {
    fn arrive(&mut self, len: u32, hit: f64, alpha: f64) {
        self.arrivals = self.arrivals.saturating_add(1);
        let weight = alpha.max(1.0 / self.arrivals as f64);
        self.p += weight * (hit - self.p);
        self.window_bytes += u64::from(len);
    }
}
/// A queued packet without the time it joined its sub-queue.
fn unjoined<T>(q: Queued<(T, Nanos)>) -> Queued<T> {
    Queued {
        item: q.item.0,
        meta: q.meta,
        enqueued_at: q.enqueued_at,
    }
}

/// An Ethernet MTU with its header, bytes: the penalty bucket's depth is two, the round robin's
/// quantum one.
const MTU: f64 = 1514.0;
/// A penalty bucket's depth, bytes.
const BUCKET: f64 = 2.0 * MTU;

/// ZL-RED with flow isolation: the discipline of a `zl-red` class with `isolation`.
pub struct Isolated<T> {
    cfg: IsolationConfig,
    list: Arc<ZombieList>,
    normal: Admission<ZlRed>,
    penalty: Admission<ZlRed>,
    /// Sub-queue 0 is the normal queue, `1 + i` the penalty sub-queue of box slot `i`; each
    /// item carries when it joined the sub-queue it is in (a released flow's packets join the
    /// normal queue at their release: their wait in the penalty queue is not the normal
    /// queue's).
    queues: SubQueues<(T, Nanos)>,
    cap_packets: u32,
    cap_bytes: u64,
    pbox: PenaltyBox,
    penalized: u32,
    /// The penalty round robin: the slot whose turn it is, each slot's deficit (bytes).
    cursor: usize,
    deficit: Vec<f64>,
    /// Packets in all penalty sub-queues.
    penalty_len: u32,
    /// No penalty sub-queue may send before this time (its bucket short of its head): the
    /// dequeue looks at none before then. Reset when the fair share moves and when a packet
    /// joins an empty penalty sub-queue.
    penalty_ready_at: Nanos,
    /// A full box looks for a lighter flow to let go at most this often after finding none
    /// (a tenth of the window): the look is O(K), an arrival flagged into a full box is not.
    next_eviction_look: Nanos,
    /// Each box slot's bucket: bytes its sub-queue may send now, and when it was filled.
    tokens: Vec<(f64, Nanos)>,
    /// The window being measured: its start, the bytes sent and the time spent with the normal
    /// queue backlogged in it, and the bytes that arrived.
    window_start: Option<Nanos>,
    busy_bytes: u64,
    busy_ns: u64,
    window_arrived: u64,
    /// The latest departure that left the normal queue backlogged: when, and its length (the
    /// next departure's time less this one's is its transmission).
    backlogged_departure: Option<(Nanos, u32)>,
    /// The class's service rate and arrival rate over the last window, bytes per second (the
    /// service rate is the link's until measured).
    class_rate: f64,
    arrival_rate: f64,
    /// The mean share of the flows the box does not measure (their hit frequency), for eq.
    /// (4) among them.
    p_rest: f64,
    /// The two groups of flows the box does not measure (see `estimate_flows`): their hit
    /// frequencies (EWMAs of weight alpha = 1/M over their own arrivals, running means over
    /// their first 1/alpha), their arrivals counted, and their bytes in the current window.
    groups: [RestGroup; 2],
    alpha: f64,
    flows_estimate: f64,
    episodes: Vec<PenaltyEpisode>,
    next_episode: usize,
    stats: IsolationStats,
    /// Arrivals observed so far; the flow estimate is trusted after `warm_after` (3 M).
    arrivals: u64,
    warm_after: u64,
    idle_since: Option<Nanos>,
    /// CoDel's state on the normal queue (`IsolationConfig::normal_codel`).
    codel: CodelState,
    codel_stats: CodelStats,
}

impl<T> std::fmt::Debug for Isolated<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Isolated")
            .field("cfg", &self.cfg)
            .field("penalized", &self.penalized)
            .field("stats", &self.stats)
            .finish_non_exhaustive()
    }
}

impl<T> Isolated<T> {
    /// The discipline on `list` (the port's shared list, or one of the class's own), with an
    /// arena of `slots` packets for the normal queue (the penalty buffer's are added), active
    /// limits `packets` and `bytes` for the normal queue, and `link_rate_bps` as the class's
    /// service rate until one is measured.
    pub fn new(
        cfg: IsolationConfig,
        list: Arc<ZombieList>,
        slots: u32,
        packets: u32,
        bytes: u64,
        link_rate_bps: u64,
    ) -> Self {
        let k = cfg.max_flows as usize;
        let zombies = list.config();
        Isolated {
            // Three turnovers of the list's zombies (a slot is replaced every M / p_swap
            // arrivals): its hits then reflect the flows that are here, 95 % of the way.
            warm_after: (3.0 * zombies.m() as f64 / zombies.p_swap()).ceil() as u64,
            alpha: zombies.alpha(),
            normal: Admission::new(ZlRed::with_list(cfg.normal, Arc::clone(&list))),
            penalty: Admission::new(ZlRed::with_list(cfg.penalty, Arc::clone(&list))),
            list,
            queues: SubQueues::new(1 + k, slots.saturating_add(cfg.penalty_packets)),
            cap_packets: packets.min(slots),
            cap_bytes: bytes,
            pbox: PenaltyBox::new(cfg.max_flows),
            penalized: 0,
            cursor: 0,
            deficit: vec![0.0; k],
            penalty_len: 0,
            penalty_ready_at: Nanos::ZERO,
            next_eviction_look: Nanos::ZERO,
            tokens: vec![(BUCKET, Nanos::ZERO); k],
            window_start: None,
            busy_bytes: 0,
            busy_ns: 0,
            window_arrived: 0,
            backlogged_departure: None,
            class_rate: link_rate_bps as f64 / 8.0,
            arrival_rate: 0.0,
            p_rest: 0.0,
            groups: [RestGroup::default(); 2],
            flows_estimate: 0.0,
            episodes: Vec::with_capacity(EPISODES_KEPT),
            next_episode: 0,
            stats: IsolationStats::default(),
            arrivals: 0,
            idle_since: Some(Nanos::ZERO),
            codel: CodelState::default(),
            codel_stats: CodelStats::default(),
            cfg,
        }
    }

    /// The validated constants.
    pub fn config(&self) -> &IsolationConfig {
        &self.cfg
    }

    /// The counters.
    pub fn stats(&self) -> &IsolationStats {
        &self.stats
    }

    /// The normal and the penalty queues' ZL-RED verdict counters.
    pub fn aqm_stats(&self) -> (AqmStats, AqmStats) {
        (*self.normal.stats(), *self.penalty.stats())
    }

    /// The Zombie List the flags come from.
    pub fn zombie_list(&self) -> &Arc<ZombieList> {
        &self.list
    }

    /// Packets in the normal queue and in the penalty sub-queues.
    pub fn queue_lens(&self) -> (u32, u32) {
        (self.queues.queue(NORMAL).len(), self.penalty_len)
    }

    /// The estimate N of the active flows (see the module doc; 0 before a window).
    pub fn flows_estimate(&self) -> f64 {
        self.flows_estimate
    }

    /// P', the hit frequency of the arrivals of flows not penalized, and the class's arrival
    /// rate over the last window, bit/s.
    pub fn rest_hit_frequency(&self) -> (f64, f64) {
        (self.p_rest, self.arrival_rate * 8.0)
    }

    /// The class's measured service rate, bit/s.
    pub fn class_rate_bps(&self) -> f64 {
        self.class_rate * 8.0
    }

    /// The fair share `r / N` now, bit/s (0 before a window).
    pub fn fair_share_bps(&self) -> f64 {
        self.fair_rate() * 8.0
    }

    /// Flows penalized now.
    pub fn penalized_count(&self) -> u32 {
        self.penalized
    }

    fn boxed_of(&self, idx: usize, e: &Entry) -> BoxedFlow {
        BoxedFlow {
            key: e.key,
            state: e.state,
            flagged_at: e.flagged_at,
            penalized_at: e.penalized_at,
            rate_bps: e.rate_bps,
            share: e.share,
            queued: self.queues.queue(1 + idx).len(),
            penalized_packets: e.packets,
            penalized_drops: e.drops,
            penalized_sent_bytes: e.sent_bytes,
        }
    }

    /// Every flow in the box now.
    pub fn boxed(&self) -> Vec<BoxedFlow> {
        (self.pbox.entries.iter().enumerate())
            .filter_map(|(i, e)| e.as_ref().map(|e| self.boxed_of(i, e)))
            .collect()
    }

    /// The box's entry for `key`, if any.
    pub fn boxed_flow(&self, key: FlowId) -> Option<BoxedFlow> {
        let idx = self.pbox.find(key)?;
        let e = self.pbox.entries[idx].as_ref()?;
        Some(self.boxed_of(idx, e))
    }

    /// The latest penalty episodes (at most [`EPISODES_KEPT`]), oldest first.
    pub fn episodes(&self) -> Vec<PenaltyEpisode> {
        let n = self.episodes.len();
        if n < EPISODES_KEPT {
            return self.episodes.clone();
        }
        let start = self.next_episode % EPISODES_KEPT;
        self.episodes[start..]
            .iter()
            .chain(&self.episodes[..start])
            .copied()
            .collect()
    }

    /// Takes over `old`'s box, estimates and counters (a reconfiguration between isolation
    /// settings); queued packets are re-placed by [`Discipline::adopt`], which puts a penalized
    /// flow's back in its sub-queue.
    pub fn inherit_state(&mut self, old: &Isolated<T>) {
        self.normal.take_over_zlred(&old.normal);
        self.penalty.take_over_zlred(&old.penalty);
        for e in old.pbox.entries.iter().flatten().copied() {
            if self.pbox.insert(e).is_some() && e.state == BoxState::Penalized {
                self.penalized += 1;
            }
        }
        self.window_start = old.window_start;
        self.class_rate = old.class_rate;
        self.arrival_rate = old.arrival_rate;
        self.p_rest = old.p_rest;
        self.groups = old.groups;
        self.flows_estimate = old.flows_estimate;
        self.episodes = old.episodes.clone();
        self.next_episode = old.next_episode;
        self.stats = old.stats;
        self.arrivals = old.arrivals;
    }

    fn fair_rate(&self) -> f64 {
        if self.flows_estimate > 0.0 {
            self.class_rate / self.flows_estimate
        } else {
            0.0
        }
    }

    /// The per-flow share of the penalty buffer.
    fn per_flow_cap(&self) -> u32 {
        (self.cfg.penalty_packets / self.penalized.max(1)).max(2)
    }

    /// Box slot `i`'s bucket filled up to `now` at the fair share: the bytes it holds.
    fn tokens_at(&mut self, i: usize, now: Nanos) -> f64 {
        let rate = self.fair_rate();
        let (tokens, at) = &mut self.tokens[i];
        *tokens = (*tokens + (now - *at).as_secs_f64() * rate).min(BUCKET);
        *at = now;
        *tokens
    }

    /// The window ticks due by `now`: the class's rates, the flow estimate and every boxed
    /// flow's verdict.
    fn tick(&mut self, now: Nanos) {
        let start = match self.window_start {
            None => {
                self.window_start = Some(now);
                return;
            }
            Some(s) => s,
        };
        if now < start + self.cfg.window {
            return;
        }
        let elapsed = now - start;
        // The service rate over the window's backlogged time, when there was enough of it to
        // measure (a tenth of the window); otherwise the previous rate stands.
        if self.busy_ns > 0 && self.busy_ns * 10 >= elapsed.0 {
            self.class_rate = self.busy_bytes as f64 / (self.busy_ns as f64 * 1e-9);
        }
        // A window with no arrival says nothing of the flows: the estimate stands (the end of a
        // run, an idle class).
        if self.window_arrived == 0 {
            self.window_start = Some(now);
            self.busy_bytes = 0;
            self.busy_ns = 0;
            return;
        }
        self.arrival_rate = self.window_arrived as f64 / elapsed.as_secs_f64();
        let window_arrived = self.window_arrived;
        for g in &mut self.groups {
            g.share = g.window_bytes as f64 / window_arrived as f64;
            g.window_bytes = 0;
        }
        self.busy_bytes = 0;
        self.busy_ns = 0;
        self.window_arrived = 0;
        self.window_start = Some(now);
        // First every flow whose window is complete is measured, so that a flood measured
        // now counts in the estimate it is judged against; then the estimate; then the
        // verdicts.
        let mut newly_measured = 0;
        for e in self.pbox.entries.iter_mut().flatten() {
            let watched_for = now - e.window_start;
            if watched_for < self.cfg.window {
                continue;
            }
            let rate = e.window_bytes as f64 / watched_for.as_secs_f64();
            e.rate_bps = rate * 8.0;
            // Its share of the arrivals: of the window's bytes when its window is the class's
            // (every window after its first), else of the class's rate (a bursty flow's rate
            // over a window that is not the class's can exceed the class's average).
            e.arrival_share = if watched_for == elapsed && window_arrived > 0 {
                e.window_bytes as f64 / window_arrived as f64
            } else if self.arrival_rate > 0.0 {
                (rate / self.arrival_rate).min(1.0)
            } else {
                0.0
            };
            if !e.measured {
                // Counted in the flagged group over this window: it leaves it now.
                self.groups[FLAGGED].share =
                    (self.groups[FLAGGED].share - e.arrival_share).max(0.0);
                newly_measured += 1;
            }
            e.measured = true;
            e.window_bytes = 0;
            e.window_start = now;
            e.due = true;
        }
        self.pbox.measured += newly_measured;
        self.estimate_flows();
        // The fair share moved: every penalty bucket is looked at again.
        self.penalty_ready_at = Nanos::ZERO;
        let fair = self.fair_rate();
        let warm = self.arrivals >= self.warm_after;
        for idx in 0..self.pbox.entries.len() {
            let Some(mut e) = self.pbox.entries[idx] else {
                continue;
            };
            if !e.due {
                continue;
            }
            e.due = false;
            let rate = e.rate_bps / 8.0;
            match e.state {
                BoxState::Watched if warm && fair > 0.0 && rate >= self.cfg.enter * fair => {
                    // `calm` counts the windows above `enter` while watched.
                    e.calm += 1;
                    if e.calm >= self.cfg.confirm {
                        e.calm = 0;
                        e.state = BoxState::Penalized;
                        e.penalized_at = Some(now);
                        e.episode = self.open_episode(e.key, e.flagged_at, now);
                        self.tokens[idx] = (BUCKET, now);
                        self.pbox.entries[idx] = Some(e);
                        self.penalized += 1;
                        self.stats.penalized += 1;
                        // Its packets still in the normal queue go first, then its next ones.
                        self.penalize_queued(e.key, idx, now);
                    } else {
                        self.pbox.entries[idx] = Some(e);
                    }
                }
                BoxState::Watched => {
                    self.stats.cleared += 1;
                    self.pbox.entries[idx] = Some(e);
                    self.unbox(idx);
                }
                BoxState::Penalized => {
                    if rate < self.cfg.leave * fair {
                        e.calm += 1;
                    } else {
                        e.calm = 0;
                    }
                    if e.calm >= self.cfg.hold {
                        self.release(idx, e, now);
                    } else {
                        self.pbox.entries[idx] = Some(e);
                    }
                }
            }
        }
    }

    /// N (see the module doc): the boxed flows measured over a whole window one each, and each
    /// group of the others its share over its mean share, `S_g / P'_g` (`sum pi_j^2 / S_g`
    /// being the inverse of the number of its flows when they are near equal).
    ///
    /// decided: the others in two groups, with their own hit frequencies: the flows flagged by
    /// eq. (4) or in the box but not yet measured, and the rest. One mean over all of them
    /// would count a heavy flow not yet measured (a flood in its first window, a host with
    /// many connections cleared and flagged again) as many light ones; P(t) minus the measured
    /// flows' terms would leave a difference smaller than P(t)'s own noise when they make most
    /// of it. A boxed flow's share is exact (its bytes over the class's, each window).
    fn estimate_flows(&mut self) {
        // The boxed flows measured over a whole window (a TCP flow sends its window in bursts
        // within a round trip: a part of a window is no measure of its rate).
        let n = (self.pbox.entries.iter().flatten())
            .filter(|e| e.measured)
            .count() as f64;
        let [flagged, rest] = self.groups;
        if rest.p <= 0.0 {
            self.flows_estimate = 0.0;
            return;
        }
        let flagged_flows = if flagged.p > 0.0 && flagged.share > 0.0 {
            flagged.share / flagged.p
        } else {
            0.0
        };
        self.flows_estimate = n + flagged_flows + (rest.share / rest.p).max(1.0);
        let others = flagged.share + rest.share;
        self.p_rest = if others > 0.0 {
            (flagged.share * flagged.p + rest.share * rest.p) / others
        } else {
            rest.p
        };
    }

    /// A packet joined penalty sub-queue `q`: counted, and a sub-queue that was empty has a
    /// new head for the dequeue to look at.
    fn penalty_joined(&mut self, q: usize) {
        self.penalty_len += 1;
        if self.queues.queue(q).len() == 1 {
            self.penalty_ready_at = Nanos::ZERO;
        }
    }

    /// Moves the packets of `key` in the normal queue to the tail of box slot `idx`'s
    /// sub-queue, in their order; the others keep theirs.
    fn penalize_queued(&mut self, key: FlowId, idx: usize, now: Nanos) {
        let by = self.cfg.by;
        for _ in 0..self.queues.queue(NORMAL).len() {
            let Some(q) = self.queues.pop_front(NORMAL) else {
                break;
            };
            let dest = if by.key(&q.meta) == key {
                self.penalty_len += 1;
                1 + idx
            } else {
                NORMAL
            };
            // Cannot fail: the packet's own slot was just freed.
            let _ = self.queues.push_back(dest, q);
        }
        if self.queues.queue(NORMAL).is_empty() {
            self.idle_since = Some(now);
        }
    }

    /// The normal queue's next packet under CoDel (RFC 8289), on the sojourn since it joined
    /// the queue: what CoDel drops goes to `discard`; `None` when it dropped all there was.
    /// The bool is CoDel's mark.
    ///
    /// decided: the normal queue's standing delay is CoDel's to hold. ZL-RED's drop
    /// probability is SRED's, scaled by `min(1, 1/(256 P(t))^2)` (eq. 2): with few flows
    /// (P(t) = 0.2 for five) it drops almost nothing below the buffer's third, so the flows the
    /// isolation protects would otherwise queue as under tail drop behind each other; with
    /// many flows the queue stays short and CoDel has nothing to do (the built-in default's
    /// normal queue: 1.1 ms on average).
    fn codel_dequeue(
        &mut self,
        now: Nanos,
        discard: &mut impl FnMut(Queued<T>, Discard),
    ) -> Option<(Queued<(T, Nanos)>, bool)> {
        let cfg = self.cfg.normal_codel?;
        let queues = &mut self.queues;
        // CoDel reads `enqueued_at`: the time the packet joined the normal queue is put there
        // for it, and the arrival time back after.
        let take = || {
            let q = queues.pop_front(NORMAL)?;
            let bytes_left = queues.queue(NORMAL).bytes();
            Some(Taken {
                queued: Queued {
                    item: (q.item.0, q.enqueued_at),
                    enqueued_at: q.item.1,
                    meta: q.meta,
                },
                bytes_left,
            })
        };
        let back = |q: Queued<(T, Nanos)>| Queued {
            item: (q.item.0, q.enqueued_at),
            enqueued_at: q.item.1,
            meta: q.meta,
        };
        let out = self.codel.dequeue(
            &cfg,
            now,
            MTU as u32,
            &mut self.codel_stats,
            take,
            &mut |q, cause| discard(unjoined(back(q)), cause),
        );
        self.stats.normal_codel_drops = self.codel_stats.dropped;
        self.stats.normal_codel_marks = self.codel_stats.ecn_marks;
        if self.queues.queue(NORMAL).is_empty() {
            self.idle_since = Some(now);
        }
        out.map(|(q, mark)| (back(q), mark))
    }

    /// Moves what is left in box slot `idx`'s sub-queue to the normal queue's tail.
    fn release_queued(&mut self, idx: usize, now: Nanos) {
        while let Some(q) = self.queues.pop_front(1 + idx) {
            self.penalty_len -= 1;
            self.idle_since = None;
            let q = Queued {
                item: (q.item.0, now),
                ..q
            };
            let _ = self.queues.push_back(NORMAL, q);
        }
        self.deficit[idx] = 0.0;
    }

    fn open_episode(&mut self, key: FlowId, flagged_at: Nanos, now: Nanos) -> usize {
        let ep = PenaltyEpisode {
            key,
            flagged_at,
            penalized_at: now,
            released_at: None,
        };
        let slot = self.next_episode % EPISODES_KEPT;
        if self.episodes.len() < EPISODES_KEPT {
            self.episodes.push(ep);
        } else {
            self.episodes[slot] = ep;
        }
        self.next_episode += 1;
        slot
    }

    fn close_episode(&mut self, slot: usize, key: FlowId, now: Nanos) {
        if let Some(ep) = self.episodes.get_mut(slot) {
            if ep.key == key && ep.released_at.is_none() {
                ep.released_at = Some(now);
            }
        }
    }

    /// The box slot whose penalty sub-queue sends next at `now`: round robin (deficit round
    /// robin, a quantum of one MTU) among those whose bucket holds their head. `Err` with the
    /// earliest time one will when none does now (`Err(None)`: none holds a packet).
    fn next_penalty_slot(&mut self, now: Nanos) -> Result<usize, Option<Nanos>> {
        if self.penalty_len == 0 {
            return Err(None);
        }
        if now < self.penalty_ready_at {
            return Err(Some(self.penalty_ready_at));
        }
        let k = self.deficit.len();
        let fair = self.fair_rate();
        let mut earliest: Option<Nanos> = None;
        // Two passes at most: one to give each backlogged slot its quantum, one to use it.
        for _ in 0..2 * k {
            let slot = self.cursor;
            let Some(head) = self.queues.front(1 + slot).map(|h| f64::from(h.meta.len)) else {
                self.deficit[slot] = 0.0;
                self.cursor = (slot + 1) % k;
                continue;
            };
            let tokens = self.tokens_at(slot, now);
            if tokens < head {
                // Asked again within a window at the latest: the fair share moves at each tick.
                let wait = if fair > 0.0 {
                    Nanos::from_secs_f64((head - tokens) / fair).clamp(Nanos(1), self.cfg.window)
                } else {
                    self.cfg.window
                };
                earliest = Some(earliest.map_or(now + wait, |e| e.min(now + wait)));
                self.cursor = (slot + 1) % k;
                continue;
            }
            if self.deficit[slot] <= 0.0 {
                self.deficit[slot] += MTU;
                self.cursor = (slot + 1) % k;
                continue;
            }
            return Ok(slot);
        }
        if let Some(at) = earliest {
            self.penalty_ready_at = at;
        }
        Err(earliest)
    }

    /// Makes room in a full box for a flow flagged with occurrence share `share`: the watched
    /// flow with the smallest share goes, when it is smaller (so responsive flows flagged by
    /// the list's noise, which a window's count clears anyway, cannot keep a flood out).
    fn evict_lighter(&mut self, share: f64, now: Nanos) -> bool {
        if now < self.next_eviction_look {
            return false;
        }
        if self.evict_lighter_now(share, now) {
            return true;
        }
        self.next_eviction_look = now + Nanos(self.cfg.window.0 / 10);
        false
    }

    fn evict_lighter_now(&mut self, share: f64, now: Nanos) -> bool {
        let lightest = (self.pbox.entries.iter().enumerate())
            .filter_map(|(i, e)| e.as_ref().map(|e| (i, e)))
            .filter(|(_, e)| e.state == BoxState::Watched)
            .min_by(|a, b| a.1.share.total_cmp(&b.1.share))
            .map(|(i, e)| (i, e.share));
        if let Some((i, lighter)) = lightest {
            if lighter < share {
                self.unbox(i);
                self.stats.cleared += 1;
                return true;
            }
        }
        // A penalized flow that has come down below the fair share is released early.
        let fair_bps = self.fair_rate() * 8.0;
        let calmest = (self.pbox.entries.iter().enumerate())
            .filter_map(|(i, e)| e.as_ref().map(|e| (i, e)))
            .filter(|(_, e)| e.state == BoxState::Penalized && e.rate_bps < fair_bps)
            .min_by(|a, b| a.1.rate_bps.total_cmp(&b.1.rate_bps))
            .map(|(i, _)| i);
        match calmest.and_then(|i| self.pbox.entries[i].map(|e| (i, e))) {
            Some((i, e)) => {
                self.release(i, e, now);
                true
            }
            None => false,
        }
    }

    /// Releases penalized box slot `i` (entry `e`) at `now`.
    fn release(&mut self, i: usize, e: Entry, now: Nanos) {
        self.release_queued(i, now);
        self.close_episode(e.episode, e.key, now);
        self.penalized -= 1;
        self.stats.released += 1;
        self.unbox(i);
    }

    /// Removes box slot `i`.
    fn unbox(&mut self, i: usize) {
        self.pbox.remove(i);
    }

    /// Eq. (4) with its margin, `F > flag T P(t)`, among the flows outside the box: in shares
    /// of the others' arrivals, a flow's `F / (T - T_box)` against their mean share
    /// `sum pi_j^2 / S^2 = P' / S` (S their arrival share, `(T - T_box) / T` in occurrences),
    /// which is `F > flag T P'`, P' the others' hit frequency. With the box empty it is eq. (4)
    /// itself (P' = P(t)); with a flood in the box, a second one that the first's weight in
    /// P(t) hid stands out, and the flows the box holds do not lower the bar for the rest.
    fn flags(&self, obs: &Observation) -> bool {
        let p = if self.pbox.measured > 0 && self.p_rest > 0.0 {
            self.p_rest
        } else {
            obs.p
        };
        p > 0.0 && obs.occurrence as f64 > self.cfg.flag * obs.total as f64 * p
    }

    fn view(&self, q: usize, capacity_packets: u32, capacity_bytes: u64) -> QueueView {
        let sq = self.queues.queue(q);
        QueueView {
            len_packets: sq.len(),
            len_bytes: sq.bytes(),
            capacity_packets,
            capacity_bytes,
            head_enqueued_at: None,
            idle_since: if q == NORMAL { self.idle_since } else { None },
        }
    }
}

impl Admission<ZlRed> {
    /// Takes over `old`'s counters and ZL-RED state.
    fn take_over_zlred(&mut self, old: &Admission<ZlRed>) {
        self.inherit_stats(*old.stats());
        self.policy_mut().inherit_state(old.policy());
    }
}

impl<T> Discipline<T> for Isolated<T> {
    fn enqueue<R: rand::RngCore + ?Sized>(
        &mut self,
        now: Nanos,
        pkt: &PacketMeta,
        observed: Option<&Observation>,
        item: T,
        rng: &mut R,
        mark: impl FnOnce(&mut T),
        _discard: &mut impl FnMut(Queued<T>, Discard),
    ) -> Result<Verdict, (Verdict, T)> {
        self.tick(now);
        self.arrivals = self.arrivals.saturating_add(1);
        self.window_arrived += u64::from(pkt.len);
        let key = self.cfg.by.key(pkt);
        let obs = match observed {
            Some(o) => *o,
            None => self.list.observe(key, now, rng),
        };
        let share = if obs.total > 0 {
            obs.occurrence as f64 / obs.total as f64
        } else {
            0.0
        };
        let boxed = self.pbox.find(key);
        let flagged = boxed.is_none() && self.flags(&obs);
        let mut penalized = None;
        if let Some(idx) = boxed {
            if let Some(e) = self.pbox.entries[idx].as_mut() {
                e.window_bytes += u64::from(pkt.len);
                e.share = share;
                if e.state == BoxState::Penalized {
                    penalized = Some(idx);
                    e.packets += 1;
                }
            }
        } else if flagged {
            if self.pbox.is_full() && !self.evict_lighter(share, now) {
                self.stats.box_full += 1;
            } else {
                let entry = Entry {
                    key,
                    state: BoxState::Watched,
                    flagged_at: now,
                    penalized_at: None,
                    window_start: now,
                    window_bytes: u64::from(pkt.len),
                    rate_bps: 0.0,
                    calm: 0,
                    share,
                    measured: false,
                    arrival_share: 0.0,
                    due: false,
                    arrivals: 0,
                    hits: 0,
                    packets: 0,
                    drops: 0,
                    sent_bytes: 0,
                    episode: 0,
                };
                if self.pbox.insert(entry).is_some() {
                    self.stats.flagged += 1;
                }
            }
        }
        // The class's hit frequency: a running mean over its first 1/alpha arrivals, an EWMA
        // of weight alpha after (no bias towards 0 while it starts), and a boxed flow's own.
        let hit = if obs.hit { 1.0 } else { 0.0 };
        let group = match boxed.and_then(|i| self.pbox.entries[i].as_mut()) {
            Some(e) => {
                e.arrivals += 1;
                e.hits += u64::from(obs.hit);
                (!e.measured).then_some(FLAGGED)
            }
            None if flagged => Some(FLAGGED),
            None => Some(REST),
        };
        if let Some(g) = group {
            self.groups[g].arrive(pkt.len, hit, self.alpha);
        }
        let (q, verdict) = match penalized {
            Some(idx) => {
                let cap = self.per_flow_cap();
                let verdict = if self.queues.queue(1 + idx).len() >= cap {
                    self.stats.over_share_drops += 1;
                    Verdict::ForcedDrop
                } else {
                    let view = self.view(1 + idx, cap, u64::MAX);
                    let arrival = Arrival::new(now, &view, pkt).observed(&obs);
                    self.penalty.admit(&arrival, rng)
                };
                if !verdict.admits() {
                    if let Some(e) = self.pbox.entries[idx].as_mut() {
                        e.drops += 1;
                    }
                }
                (1 + idx, verdict)
            }
            None => {
                let view = self.view(NORMAL, self.cap_packets, self.cap_bytes);
                let arrival = Arrival::new(now, &view, pkt).observed(&obs);
                (NORMAL, self.normal.admit(&arrival, rng))
            }
        };
        if !verdict.admits() {
            return Err((verdict, item));
        }
        let mut item = item;
        if verdict == Verdict::MarkCe {
            mark(&mut item);
        }
        let entry = Queued {
            item: (item, now),
            meta: *pkt,
            enqueued_at: now,
        };
        match self.queues.push_back(q, entry) {
            Ok(()) => {
                if q == NORMAL {
                    self.idle_since = None;
                } else {
                    self.penalty_joined(q);
                }
                Ok(verdict)
            }
            Err(e) => Err((Verdict::TailDrop, e.item.0)),
        }
    }

    fn dequeue<R: rand::RngCore + ?Sized>(
        &mut self,
        now: Nanos,
        rng: &mut R,
        discard: &mut impl FnMut(Queued<T>, Discard),
    ) -> Next<T> {
        self.tick(now);
        let from = match self.next_penalty_slot(now) {
            Ok(i) => 1 + i,
            Err(_) if !self.queues.queue(NORMAL).is_empty() => NORMAL,
            Err(Some(until)) => {
                // Only penalty sub-queues hold packets, and no bucket holds its head yet.
                self.backlogged_departure = None;
                return Next::Hold(until);
            }
            Err(None) => {
                self.backlogged_departure = None;
                return Next::Empty;
            }
        };
        let (q, mark) = if from == NORMAL && self.cfg.normal_codel.is_some() {
            match self.codel_dequeue(now, discard) {
                Some(taken) => taken,
                // CoDel dropped what the normal queue held: the penalty sub-queues' turn.
                None => return self.dequeue(now, rng, discard),
            }
        } else {
            match self.queues.pop_front(from) {
                Some(q) => (q, false),
                None => return Next::Empty,
            }
        };
        // The time since the previous departure, when the normal queue stayed backlogged
        // behind it, is what the link and the scheduler gave the class for that packet.
        if let Some((at, len)) = self.backlogged_departure {
            self.busy_ns += (now - at).0;
            self.busy_bytes += u64::from(len);
        }
        self.backlogged_departure = if self.queues.queue(NORMAL).is_empty() {
            None
        } else {
            Some((now, q.meta.len))
        };
        if from == NORMAL {
            if self.queues.queue(NORMAL).is_empty() {
                self.idle_since = Some(now);
            }
            let sojourn = now - q.item.1;
            self.stats.normal_sent += 1;
            self.stats.normal_sojourn_sum += sojourn;
            self.stats.normal_sojourn_max = self.stats.normal_sojourn_max.max(sojourn);
        } else {
            let len = f64::from(q.meta.len);
            self.tokens[from - 1].0 -= len;
            self.deficit[from - 1] -= len;
            if let Some(e) = self.pbox.entries[from - 1].as_mut() {
                e.sent_bytes += u64::from(q.meta.len);
            }
            self.penalty_len -= 1;
            self.stats.penalty_sent += 1;
        }
        Next::Packet(Departure {
            queued: unjoined(q),
            mark,
        })
    }

    fn len_packets(&self) -> u32 {
        self.queues.len()
    }

    fn len_bytes(&self) -> u64 {
        self.queues.bytes()
    }

    fn set_capacity(&mut self, packets: u32, bytes: u64) {
        let slots = self
            .queues
            .capacity()
            .saturating_sub(self.cfg.penalty_packets);
        self.cap_packets = packets.min(slots);
        self.cap_bytes = bytes;
    }

    fn adopt(&mut self, q: Queued<T>) -> Result<(), Queued<T>> {
        let key = self.cfg.by.key(&q.meta);
        let mut which = NORMAL;
        if let Some(idx) = self.pbox.find(key) {
            if self.pbox.entries[idx].is_some_and(|e| e.state == BoxState::Penalized) {
                which = 1 + idx;
            }
        }
        let joined = Queued {
            item: (q.item, q.enqueued_at),
            meta: q.meta,
            enqueued_at: q.enqueued_at,
        };
        self.queues.push_back(which, joined).map_err(unjoined)?;
        if which == NORMAL {
            self.idle_since = None;
        } else {
            self.penalty_joined(which);
        }
        Ok(())
    }

    fn drain(&mut self, mut f: impl FnMut(Queued<T>)) {
        for q in 0..self.queues.queues() {
            while let Some(e) = self.queues.pop_front(q) {
                f(unjoined(e));
            }
        }
        self.penalty_len = 0;
    }
}
