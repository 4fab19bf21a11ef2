//! ZL-RED (Kurata, Hasegawa, Murata, "A Study on the implementation of ZL-RED mechanism on
//! the Network Processor", IEICE Technical Report, c. 2001), docs/algorithms/zl-red.md: SRED's
//! Zombie List and eq. (2)-(3), with the drop start moved to a fixed threshold and the probability
//! scaled per flow by its occurrence.
//!
//! With `q` the instantaneous queue and `B` the capacity (packets), `F` the occurrence of the
//! arriving packet's flow and `T` the total occurrence in the Zombie List:
//!
//! ```text
//! p1' = 0 if q < th_min;  p_max/4 if th_min <= q < B/3;  p_max if q >= B/3   (7)
//! p2, p3 as SRED's (2), (3)
//! misbehaving  <=>  F > T * P(t)                                             (4)
//! p4 = p3 * F / (T * P(t))            (times a >= 1 when misbehaving)         (5)
//! p5 = p4 * p3 / P_avg(t)                                                    (6)
//! ```
//!
//! and the packet is dropped with probability `min(1, p5)`.
//!
//! Decided (docs/algorithms/zl-red.md): `T` and `F` are read after this arrival has updated the
//! Zombie List; a flow with no zombie (`F = 0`) gets `p4 = 0`; `P_avg` is an EWMA of `p4` over
//! arrivals with the weight `alpha` of `P(t)`; while `P_avg = 0`, `p5 = p4`.
//! Decided here: `P_avg(t)` in (6) is the average "so far", i.e. before this arrival's `p4`
//! enters it, and it averages `min(1, p4)`: it is an average drop *probability*, and on a hit
//! `p3 = p2 (1 + 1/P)` is routinely far above 1. Averaging the raw `p4` lets those hits
//! inflate `P_avg` about twofold when `P << p2`, and ZL-RED then drops half as much as SRED at
//! the same queue (measured: 0.059 vs 0.123 at q = 400, B = 1000, 300 flows + one at 10x);
//! with the clamp the totals agree within 10 % (`tests/zlred.rs`). When `P` is comparable to
//! `p2` (few flows: ~100) the total still runs ~25 % above SRED's.
//! Decided here: while `P(t) = 0` or `T = 0` the ratio `F/(T P)` is taken as 1 (no flow
//! information yet) and no flow is misbehaving; drop-only by default (`ecn` option).
//! A consequence of (6) as written: after a long spell below `th_min` (where `p4 = 0` pulls
//! `P_avg` down) the first drops above it are amplified until `P_avg` catches up, over about
//! `1/alpha` arrivals.
//!
//! Paper settings (defaults): `p_max = 0.15`, `th_min = 5` packets, `a = 1`, `M = 1000`,
//! `p_swap = 0.25`, `alpha = 1/M`.

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use zl_zombie::{Observation, ZombieConfig, ZombieList, ZombieParams};

use crate::check;
use crate::sred::{check_capacity, sred_terms, staged_p1, zombie_config};
use crate::{
    early_verdict, happens, uniform, Aqm, AqmConfigError, Arrival, Nanos, PacketMeta, QueueView,
    Verdict,
};

/// Everything one ZL-RED decision depends on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ZlRedInputs {
    /// Instantaneous queue, packets.
    pub q: f64,
    /// `th_min`, packets.
    pub th_min: f64,
    /// `B/3`, packets.
    pub b_third: f64,
    /// The drop probability scale `p_max`.
    pub p_max: f64,
    /// The misbehaving multiplier `a >= 1`.
    pub a: f64,
    /// `Hit(t)`.
    pub hit: bool,
    /// `P(t)`, after this arrival's update.
    pub p_hit: f64,
    /// `F`, the arriving flow's occurrence.
    pub occurrence: u64,
    /// `T`, the total occurrence.
    pub total: u64,
    /// `P_avg(t)` before this arrival.
    pub p_avg: f64,
}

/// The intermediate values of one ZL-RED decision (all unclamped; the drop probability is
/// `min(1, p5)`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ZlRedTerms {
    /// Eq. (7).
    pub p1: f64,
    /// Eq. (2).
    pub p2: f64,
    /// Eq. (3).
    pub p3: f64,
    /// Eq. (5).
    pub p4: f64,
    /// Eq. (6).
    pub p5: f64,
    /// Eq. (4): `F > T * P(t)`.
    pub misbehaving: bool,
}

/// Eq. (7), (2)-(6) for one arrival.
pub fn zlred_probability(i: &ZlRedInputs) -> ZlRedTerms {
    let p1 = staged_p1(i.q, i.th_min, i.b_third, i.p_max);
    let s = sred_terms(p1, i.hit, i.p_hit);
    let (p4, misbehaving) = eq_4_5(i, p1);
    let p5 = if i.p_avg > 0.0 && p4 > 0.0 {
        p4 * s.p3 / i.p_avg
    } else {
        p4
    };
    ZlRedTerms {
        p1,
        p2: s.p2,
        p3: s.p3,
        p4,
        p5,
        misbehaving,
    }
}

/// The factors shared by eq. (2)-(3) and (5): with `c = max(1, (256 P)^2)`, `p3 = p1 h / d`
/// where `(h, d) = (P + 1, c P)` on a hit and `(1, c)` on a miss. Only for `P > 0`.
#[inline]
fn p3_fraction(hit: bool, p_hit: f64) -> (f64, f64) {
    let s = 256.0 * p_hit;
    let c = (s * s).max(1.0);
    if hit {
        (1.0 + p_hit, c * p_hit)
    } else {
        (1.0, c)
    }
}

/// Eq. (4) and (5) from `p1` (eq. 7): `(p4, misbehaving)`.
///
/// With `T P > 0`, `p4 = p3 F a' / (T P)` is computed as the single quotient
/// `p1 h F a' / (d T P)` (see [`p3_fraction`]; `a' = a` when misbehaving, else 1): equal to
/// the equation up to rounding, and one division instead of the three that the chain
/// `p2 -> p3 -> p4` takes (`p4` feeds `P_avg` on every arrival). A vanishing `d T P` gives
/// `p4 = inf`, a certain drop, as the chain does; the numerator is never 0 here, so no NaN.
#[inline]
fn eq_4_5(i: &ZlRedInputs, p1: f64) -> (f64, bool) {
    // p1 = 0 makes p3 = 0 (p2 > 0 whenever p1 > 0, since (256 P)^2 <= 65536), F = 0 makes p4 = 0.
    if i.occurrence == 0 || p1 == 0.0 {
        return (0.0, false);
    }
    let mean_occurrence = i.total as f64 * i.p_hit;
    if mean_occurrence > 0.0 {
        let f = i.occurrence as f64;
        let misbehaving = f > mean_occurrence;
        let weight = if misbehaving { f * i.a } else { f };
        let (h, d) = p3_fraction(i.hit, i.p_hit);
        (p1 * h * weight / (d * mean_occurrence), misbehaving)
    } else {
        // No flow information yet (decided): p4 = p3.
        (sred_terms(p1, i.hit, i.p_hit).p3, false)
    }
}

/// `P_avg` after an arrival whose (unclamped) `p4` is given: an EWMA with weight `alpha` of
/// `min(1, p4)`.
pub fn next_p_avg(p_avg: f64, alpha: f64, p4: f64) -> f64 {
    p_avg + alpha * (p4.min(1.0) - p_avg)
}

/// `x as f64`, bit for bit, for every `x`; in one signed conversion when `x < 2^63`, which
/// every count of a Zombie List is (T is at most M (cap + 1) < 2^56). The unsigned conversion
/// is a sequence of about six instructions on x86-64 without AVX-512, and the decision
/// converts F and T on every arrival.
///
/// For `x >= 2^63` it halves `x` keeping its lowest bit as a sticky bit (round to odd),
/// converts that signed and doubles it: the same correctly rounded value, since the 63-bit
/// half loses no bit that decides the rounding to 53 bits. (Written as `x as f64` there, the
/// compiler saw both arms equal `x as f64` and emitted the unsigned sequence alone.)
#[inline(always)]
fn count_to_f64(x: u64) -> f64 {
    match i64::try_from(x) {
        Ok(signed) => signed as f64,
        Err(_) => (((x >> 1) | (x & 1)) as i64) as f64 * 2.0,
    }
}

/// `(a as f64, b as f64)`, bit for bit, for every pair: [`count_to_f64`] of each, with the one
/// test for `2^63` the two share (F and T of one decision; the wide case, which no Zombie
/// List's count reaches, out of the way as a cold path).
#[inline(always)]
fn counts_to_f64(a: u64, b: u64) -> (f64, f64) {
    match i64::try_from(a | b) {
        // Both below 2^63: each converts exactly as signed.
        Ok(_) => (a as i64 as f64, b as i64 as f64),
        Err(_) => {
            cold_path();
            (count_to_f64(a), count_to_f64(b))
        }
    }
}

/// The Bernoulli trial of one decision: true with probability `min(1, p5)`, drawing from `rng`
/// only when `0 < p5 < 1`, as `happens(rng, zlred_probability(i).p5)` does.
///
/// In the common case (`P(t) > 0`, `T P(t) > 0`, `P_avg > 0`) it compares without dividing.
/// Writing `c = max(1, (256 P)^2)` and, on a hit, `p3 = p1 (P + 1) / (c P)` (else `p1 / c`),
/// eq. (5)-(6) give `p5 = num / den` with `num = (p1 h)^2 F a'` and
/// `den = (c h')^2 T P P_avg` (`h = P + 1`, `h' = P` on a hit, else both 1; `a' = a` when
/// misbehaving, else 1), so `u < p5` is decided as `u den < num` (`den = 0`, an underflow
/// when `P` is tiny, is a certain drop, as `p5 = inf` is). `zlred_probability` divides four
/// times to get there; this path does not divide, and `P_avg`'s one division runs off the
/// verdict's path (see [`ZlRed`]; measured per step in docs/performance/zl-aqm.md). The
/// verdict can differ from `u < p5` only for a draw within a few ULPs of `p5`. `num = 0` (an
/// underflow, only with `p_max` below about 1e-160) is no drop and no draw, as `p5 = 0` is.
/// The other cases (the first arrivals, before `P(t)`, `T` and `P_avg` are all positive) go
/// through `zlred_probability`.
///
/// It also returns, from the same terms, the arrival's `p4` (eq. 5, as `eq_4_5` computes it,
/// bit for bit: `p4 = (p1 h) F a' / (d T P)`), for `P_avg`'s update.
///
/// The decision itself (`ZlRed::decide_on`) makes the first two tests in integers
/// ([`P1Stages`]) and goes on in [`fires_positive`]; this form, from the inputs alone,
/// is the one the tests check against `happens(rng, p5)`.
#[cfg(test)]
fn fires_and_p4<R: rand::RngCore + ?Sized>(rng: &mut R, i: &ZlRedInputs) -> (bool, f64) {
    // F = 0 makes p4 = 0, p1 = 0 makes p3 = 0: either way p5 = 0, and no draw.
    if i.occurrence == 0 {
        return (false, 0.0);
    }
    let p1 = staged_p1(i.q, i.th_min, i.b_third, i.p_max);
    if p1 == 0.0 {
        return (false, 0.0);
    }
    let obs = Observation {
        hit: i.hit,
        p: i.p_hit,
        occurrence: i.occurrence,
        total: i.total,
    };
    let mut p4 = 0.0;
    let fire = fires_positive(rng, &obs, i.p_avg, p1, || *i, |x| p4 = x);
    (fire, p4)
}

/// Marks the branch that calls it unlikely, for the compiler's block frequencies (what
/// `std::hint::cold_path` does from Rust 1.95, above this crate's MSRV; hashbrown's stable
/// form): a call to a cold function, inlined away.
#[cold]
#[inline(always)]
fn cold_path() {}

/// [`fires_and_p4`] once `F > 0` and `p1 != 0` (eq. 7's `p1` given): whether the decision
/// fires, with the arrival's `p4` handed to `settle` (which stores the decision's state) on
/// every path, before the draw where there is one, so that nothing but the two bounds lives
/// across the generator's call. The exits without a draw are cold; each path calls `settle`
/// once, so the hot path branches on the compares themselves, with no "known or draw" value
/// carried past the state's store (the first arrivals' path draws at once, as before).
///
/// The common case reads the observation `obs` and `p_avg` alone; the whole inputs (with the
/// configuration's constants) are built by `inputs` only on the paths that need them, so that
/// their loads stay off the common path (built before the call, the four constants were
/// loaded on every decision, in two 16-byte loads).
#[inline(always)]
fn fires_positive<R: rand::RngCore + ?Sized>(
    rng: &mut R,
    obs: &Observation,
    p_avg: f64,
    p1: f64,
    inputs: impl Fn() -> ZlRedInputs,
    settle: impl FnOnce(f64),
) -> bool {
    let (total, f) = counts_to_f64(obs.total, obs.occurrence);
    let mean_occurrence = total * obs.p;
    // `T P > 0` implies `P > 0` (T >= 0), so `P > 0` needs no test of its own.
    if !(mean_occurrence > 0.0 && p_avg > 0.0) {
        // By value: the hot path then never stores the inputs to memory for this call.
        let (fire, p4) = fires_and_p4_early(rng, inputs(), p1);
        settle(p4);
        return fire;
    }
    // A branch, not the select LLVM made of it (a compare, three masks and a multiply on
    // every decision), for the rarer misbehaving flow.
    let weight = if f > mean_occurrence {
        cold_path();
        f * inputs().a
    } else {
        f
    };
    // `(p1 h, d)` of `p3_fraction`. A miss (almost every arrival) has `h = 1` and `d = c`, and
    // `x * 1.0` is `x` bit for bit, so it skips both multiplies; the rare hit goes on in a copy
    // of the rest of its own, off the hot path (a shared form would multiply by a selected
    // 1.0 twice and select the two factors on every decision).
    if obs.hit {
        cold_path();
        let (h, d) = p3_fraction(true, obs.p);
        return fires_on(rng, p1 * h, d, weight, mean_occurrence, p_avg, settle);
    }
    let (_, c) = p3_fraction(false, obs.p);
    fires_on(rng, p1, c, weight, mean_occurrence, p_avg, settle)
}

/// [`fires_positive`]'s common case from `top = p1 h` and `d` (see [`p3_fraction`]), the
/// weight `F a'`, `T P` and `P_avg`, all positive but `top`.
#[inline(always)]
fn fires_on<R: rand::RngCore + ?Sized>(
    rng: &mut R,
    top: f64,
    d: f64,
    weight: f64,
    mean_occurrence: f64,
    p_avg: f64,
    settle: impl FnOnce(f64),
) -> bool {
    let p4 = top * weight / (d * mean_occurrence);
    let num = top * top * weight;
    let den = d * d * (mean_occurrence * p_avg);
    settle(p4);
    // A NaN `num` (a hand-built config's NaN `p_max`) is no drop, as before.
    if num > 0.0 {
        if num >= den {
            cold_path();
            true
        } else {
            // The draw after the state's store (no other draw comes between them).
            uniform(rng) * den < num
        }
    } else {
        cold_path();
        false
    }
}

/// [`fires_and_p4`] before `P(t)`, `T P(t)` and `P_avg` are all positive (the first arrivals):
/// through the equations, out of line.
#[cold]
#[inline(never)]
fn fires_and_p4_early<R: rand::RngCore + ?Sized>(
    rng: &mut R,
    i: ZlRedInputs,
    p1: f64,
) -> (bool, f64) {
    (happens(rng, zlred_probability(&i).p5), eq_4_5(&i, p1).0)
}

/// Eq. (7) for a queue length in packets, its thresholds and `p_max/4` computed once:
/// `staged_p1(q as f64, th_min, b_third, p_max)` bit for bit for every `q: u32` (test
/// `p1_stages_are_staged_p1`), with `p1 = 0` decided by one integer compare instead of
/// converting `q` and comparing it twice in f64 on every arrival.
#[derive(Clone, Copy, Debug, PartialEq)]
struct P1Stages {
    /// `p1 = 0` exactly for `q` below this (`ceil(th_min)`, higher where a stage's value is 0).
    zero_below: u64,
    /// `p1 = p_max/4` for `zero_below <= q` below this (`ceil(B/3)`), `p_max` from it on.
    low_below: u64,
    /// `[p_max/4, p_max]`.
    p1: [f64; 2],
}

/// The least `n` with `(q as f64) < t` iff `q < n` for every `q: u32` (`q as f64` is exact):
/// for an integer `q`, `q < t` iff `q < ceil(t)`; above 2^33 every `q` is below; NaN and
/// `t <= 0` have none below.
fn u32_bound(t: f64) -> u64 {
    if t > 0.0 {
        t.min(8_589_934_592.0).ceil() as u64
    } else {
        0
    }
}

impl P1Stages {
    fn new(cfg: &ZlRedConfig) -> Self {
        let start = u32_bound(cfg.th_min);
        let low_below = u32_bound(cfg.b_third);
        let p1 = [0.25 * cfg.p_max, cfg.p_max];
        // The stages `[start, low_below)` (value p1[0]) and `[max(start, low_below), inf)`
        // (value p1[1]); a stage whose value is 0 (p_max = 0, or p_max/4 rounding to 0) joins
        // the zero one below it.
        let zero_below = if p1[1] == 0.0 {
            u64::MAX
        } else if p1[0] == 0.0 {
            start.max(low_below)
        } else {
            start
        };
        P1Stages {
            zero_below,
            low_below,
            p1,
        }
    }

    /// `p1` for `q >= zero_below` (never 0 there).
    #[inline(always)]
    fn above_zero(&self, q: u32) -> f64 {
        self.p1[usize::from(u64::from(q) >= self.low_below)]
    }
}

/// ZL-RED parameters in config units.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ZlRedParams {
    /// `0 < p_max <= 1`. Default 0.15.
    pub p_max: f64,
    /// Start of probabilistic drop, packets, `0 <= th_min < B/3`. Default 5.
    pub th_min: f64,
    /// Misbehaving multiplier, `1 <= a <= 1000`. Default 1.
    pub a: f64,
    /// Mark markable packets instead of dropping them. Default off.
    pub ecn: bool,
    /// The Zombie List (M = 1000, p_swap = 0.25, alpha = 1/M, occurrence table). Used when
    /// the build context supplies no shared list; validated either way.
    pub zombie: ZombieParams,
    /// Flow isolation: the flows eq. (4) flags go to a penalty sub-queue served at their fair
    /// share (`crate::isolation`). Default none: ZL-RED as in its paper.
    pub isolation: Option<crate::isolation_params::IsolationParams>,
}

impl Default for ZlRedParams {
    fn default() -> Self {
        ZlRedParams {
            p_max: 0.15,
            th_min: 5.0,
            a: 1.0,
            ecn: false,
            zombie: ZombieParams::default(),
            isolation: None,
        }
    }
}

impl ZlRedParams {
    /// Checks every parameter; `capacity_packets` is the queue's `B`.
    pub fn validate(&self, capacity_packets: u32) -> Result<ZlRedConfig, AqmConfigError> {
        let p_max = check::unit_open_closed("p_max", self.p_max)?;
        let b = check_capacity(capacity_packets)?;
        let th_min = check::non_negative("th_min", self.th_min)?;
        if th_min >= b / 3.0 {
            return Err(check::err(
                "th_min",
                th_min,
                &format!("0 <= th_min < B/3 = {}", b / 3.0),
            ));
        }
        if !(1.0..=1000.0).contains(&self.a) {
            return Err(check::err("a", self.a, "1 <= a <= 1000"));
        }
        let zombie = zombie_config(&self.zombie)?;
        Ok(ZlRedConfig {
            p_max,
            th_min,
            a: self.a,
            ecn: self.ecn,
            b_third: b / 3.0,
            alpha: zombie.alpha(),
            zombie,
        })
    }
}

/// Validated ZL-RED constants.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ZlRedConfig {
    /// `0 < p_max <= 1`.
    pub p_max: f64,
    /// Start of probabilistic drop, packets.
    pub th_min: f64,
    /// Misbehaving multiplier `a >= 1`.
    pub a: f64,
    /// Mark markable packets instead of dropping them.
    pub ecn: bool,
    /// `B/3`, packets.
    pub b_third: f64,
    /// EWMA weight of `P_avg` (the Zombie List's `alpha`).
    pub alpha: f64,
    /// The Zombie List's configuration (the shared list's, when there is one).
    pub zombie: ZombieConfig,
}

impl ZlRedConfig {
    /// The inputs of one decision from the queue length, the list's observation and `P_avg`.
    pub fn inputs(&self, q: u32, obs: &Observation, p_avg: f64) -> ZlRedInputs {
        ZlRedInputs {
            q: q as f64,
            th_min: self.th_min,
            b_third: self.b_third,
            p_max: self.p_max,
            a: self.a,
            hit: obs.hit,
            p_hit: obs.p,
            occurrence: obs.occurrence,
            total: obs.total,
            p_avg,
        }
    }
}

/// What the latest decision saw: enough to recompute its [`ZlRedTerms`]. In this order
/// (`repr(C)`): with the observation first, a decision stores it straight from the caller's;
/// in the order Rust chose (`P_avg` first) it went through the stack, four instructions more.
#[derive(Clone, Copy, Debug, PartialEq)]
#[repr(C)]
struct LastArrival {
    obs: Observation,
    /// `P_avg` before this arrival.
    p_avg: f64,
    q: u32,
}

/// ZL-RED runtime state.
///
/// The verdict needs only `u < p5` (see `fires_and_p4`), not the terms themselves. A decision
/// updates `P_avg` from the same terms (one division, which the verdict does not wait for) and
/// stores its inputs, from which [`ZlRed::last_decision`] recomputes the terms. (Computing the
/// update at once from the verdict's terms measured faster on both paths than leaving it to
/// the start of the next decision, to overlap its division with that arrival's observation:
/// docs/performance/dataplane.md.)
pub struct ZlRed {
    cfg: ZlRedConfig,
    list: Arc<ZombieList>,
    last: Option<LastArrival>,
    /// `P_avg` after the latest decision (0 before the first): a field of its own, so that
    /// each decision reads it without testing `last`.
    p_avg: f64,
    /// Eq. (7) from `cfg`, in integers.
    p1: P1Stages,
}

impl ZlRed {
    /// Takes over `old`'s running state, keeping this policy's parameters (a live
    /// reconfiguration: `AqmPolicy::inherit_state`).
    /// The Zombie List is this policy's own (the same list where the port keeps it).
    pub fn inherit_state(&mut self, old: &ZlRed) {
        self.last = old.last;
        self.p_avg = old.p_avg;
    }

    /// With its own Zombie List built from the config.
    pub fn new(cfg: ZlRedConfig) -> Self {
        let list = Arc::new(ZombieList::new(cfg.zombie));
        ZlRed::with_list(cfg, list)
    }

    /// On a Zombie List shared with other queues or threads; the list's own configuration
    /// (and its `alpha`, which `P_avg` uses) replaces the one in `cfg`.
    pub fn with_list(mut cfg: ZlRedConfig, list: Arc<ZombieList>) -> Self {
        cfg.zombie = *list.config();
        cfg.alpha = cfg.zombie.alpha();
        ZlRed {
            cfg,
            list,
            last: None,
            p_avg: 0.0,
            p1: P1Stages::new(&cfg),
        }
    }

    /// The validated constants.
    pub fn config(&self) -> &ZlRedConfig {
        &self.cfg
    }

    /// The Zombie List this policy observes (shared or its own).
    pub fn zombie_list(&self) -> &Arc<ZombieList> {
        &self.list
    }

    /// `P_avg(t)`, after the latest decision.
    #[inline]
    pub fn p_avg(&self) -> f64 {
        self.p_avg
    }

    /// The terms of the latest decision (tail drops leave it unchanged; all zero before the
    /// first decision).
    pub fn last_decision(&self) -> ZlRedTerms {
        self.last.map_or_else(ZlRedTerms::default, |last| {
            zlred_probability(&self.cfg.inputs(last.q, &last.obs, last.p_avg))
        })
    }
}

impl std::fmt::Debug for ZlRed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZlRed")
            .field("cfg", &self.cfg)
            .field("p_avg", &self.p_avg())
            .field("last", &self.last_decision())
            .finish_non_exhaustive()
    }
}

impl ZlRed {
    /// Eq. (7), (2)-(6) from the arrival's observation of the list, and `P_avg`'s update.
    #[inline(always)]
    fn decide_on<R: rand::RngCore + ?Sized>(
        &mut self,
        rng: &mut R,
        queue: &QueueView,
        pkt: &PacketMeta,
        obs: &Observation,
    ) -> Verdict {
        let p_avg = self.p_avg();
        let q = queue.len_packets;
        // `fires_and_p4`'s first two tests, `p1 = 0` in integers.
        // The exits without a draw are marked cold (here and in `fires_positive`): the
        // draw's block is then no cold call site to LLVM's inliner, which inlines the
        // generator's `next_u64` there (it stayed a call, spills around it included, however it
        // was wrapped). The exits run the same instructions either way.
        let fire = if obs.occurrence == 0 || u64::from(q) < self.p1.zero_below {
            cold_path();
            self.settle(q, obs, p_avg, 0.0);
            false
        } else {
            let p1 = self.p1.above_zero(q);
            // The state's fields borrowed apart, so that `inputs` can read the configuration.
            let (cfg, last, p_avg_now) = (&self.cfg, &mut self.last, &mut self.p_avg);
            fires_positive(
                rng,
                obs,
                p_avg,
                p1,
                || cfg.inputs(q, obs, p_avg),
                |p4| settle_fields(last, p_avg_now, cfg.alpha, (q, obs, p_avg, p4)),
            )
        };
        if fire {
            early_verdict(self.cfg.ecn, pkt)
        } else {
            Verdict::Enqueue
        }
    }

    /// Stores a decision's state: its inputs (for [`ZlRed::last_decision`]) and `P_avg` after
    /// its `p4`. Before the decision's draw, if it makes one.
    #[inline(always)]
    fn settle(&mut self, q: u32, obs: &Observation, p_avg: f64, p4: f64) {
        settle_fields(
            &mut self.last,
            &mut self.p_avg,
            self.cfg.alpha,
            (q, obs, p_avg, p4),
        );
    }
}

/// [`ZlRed::settle`] on the state's two fields (`last`, `P_avg`) and `alpha`.
#[inline(always)]
fn settle_fields(
    last: &mut Option<LastArrival>,
    p_avg_now: &mut f64,
    alpha: f64,
    (q, obs, p_avg, p4): (u32, &Observation, f64, f64),
) {
    *last = Some(LastArrival {
        q,
        obs: *obs,
        p_avg,
    });
    *p_avg_now = next_p_avg(p_avg, alpha, p4);
}

impl ZlRed {
    /// Observes the list, then decides: the path of an arrival observed by no one upstream.
    /// Out of line, so that a caller which inlines [`ZlRed::decide`] (the QoS engine, on the
    /// data plane's per-packet path, where the receive side observes) does not also inline a
    /// second copy of the observation, which made the compiler split the receive side's own
    /// observation into calls (measured: docs/performance/zl-aqm.md).
    #[inline(never)]
    fn observe_and_decide<R: rand::RngCore + ?Sized>(
        &mut self,
        now: Nanos,
        rng: &mut R,
        queue: &QueueView,
        pkt: &PacketMeta,
    ) -> Verdict {
        let obs = self.list.observe(pkt.flow, now, rng);
        self.decide_on(rng, queue, pkt, &obs)
    }
}

impl Aqm for ZlRed {
    /// Decides on the arrival's upstream observation of the shared list when it carries one
    /// (a receive worker's; the list is not observed again), else observes the list first. A
    /// tail-dropped packet never reaches the list here. The first case is inlined into the
    /// QoS engine's enqueue (the data plane's per-packet path).
    #[inline]
    fn decide<R: rand::RngCore + ?Sized>(&mut self, a: &Arrival<'_>, rng: &mut R) -> Verdict {
        match a.zombie {
            Some(obs) => self.decide_on(rng, a.queue, a.pkt, obs),
            None => {
                // On a copy of the packet (`Arrival::detached`): the call borrows it, not the
                // caller's.
                let (pkt, _) = a.detached();
                self.observe_and_decide(a.now, rng, a.queue, &pkt)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use rand::{Rng, RngCore, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;

    use super::*;

    /// `fires_and_p4` decides as `happens(rng, p5)` and consumes the same draws, and its `p4`
    /// is `zlred_probability`'s bit for bit, over inputs spread
    /// across every branch: queue below and above `th_min` and `B/3`, hits and misses, `P`
    /// from 0 to 1 (1/(256 P) above and below 1), F = 0 and F above and below `T P`, `P_avg`
    /// zero and positive, `a` from 1 to 1000.
    #[test]
    fn fires_decides_as_the_drop_probability() {
        let mut gen = Xoshiro256PlusPlus::seed_from_u64(31);
        let (mut drops, mut draws) = (0, 0);
        for n in 0..200_000u64 {
            let p_hit = match n % 4 {
                0 => 0.0,
                1 => gen.random::<f64>() * 0.01,
                _ => gen.random::<f64>(),
            };
            let i = ZlRedInputs {
                q: gen.random_range(0..1000) as f64,
                th_min: 5.0,
                b_third: 1000.0 / 3.0,
                p_max: [0.15, 1.0][(n % 7 == 0) as usize],
                a: [1.0, 3.0, 1000.0][(n % 3) as usize],
                hit: gen.random_bool(0.3),
                p_hit,
                occurrence: gen.random_range(0..50),
                total: gen.random_range(0..2000),
                p_avg: [0.0, gen.random::<f64>() * 0.2][(n % 5 != 0) as usize],
            };
            let seed = gen.next_u64();
            let (mut a, mut b) = (
                Xoshiro256PlusPlus::seed_from_u64(seed),
                Xoshiro256PlusPlus::seed_from_u64(seed),
            );
            let want = happens(&mut a, zlred_probability(&i).p5);
            let (fired, p4) = fires_and_p4(&mut b, &i);
            assert_eq!(fired, want, "{i:?}");
            assert_eq!(p4.to_bits(), zlred_probability(&i).p4.to_bits(), "{i:?}");
            assert_eq!(a.next_u64(), b.next_u64(), "same draws: {i:?}");
            let p5 = zlred_probability(&i).p5;
            drops += u32::from(want);
            draws += u32::from(p5 > 0.0 && p5 < 1.0);
        }
        // Every kind of outcome occurred: drops, draws, and certain drops.
        assert!(
            drops > 10_000 && draws > 10_000,
            "{drops} drops, {draws} draws"
        );
    }

    /// `P1Stages` gives `staged_p1` bit for bit (and `p1 = 0` exactly below `zero_below`) for
    /// every queue length around each threshold and across the range, over integer and
    /// fractional thresholds, `p_max` down to a subnormal whose quarter rounds to 0, and
    /// hand-built configs (th_min above B/3, p_max = 0, NaN, negative, huge thresholds).
    #[test]
    fn p1_stages_are_staged_p1() {
        let mut gen = Xoshiro256PlusPlus::seed_from_u64(34);
        let base = ZlRedParams::default().validate(1000).unwrap();
        let mut cfgs = Vec::new();
        for b in [1u32, 2, 3, 4, 7, 16, 100, 1000, 1001, 65_537, u32::MAX - 1] {
            let b_third = b as f64 / 3.0;
            for th_min in [0.0, 0.5, 1.0, 5.0, 5.25, b_third / 2.0, b_third - 0.5] {
                for p_max in [0.15, 1.0, 5e-324, 2e-323, f64::MIN_POSITIVE] {
                    cfgs.push(ZlRedConfig {
                        th_min: th_min.max(0.0),
                        b_third,
                        p_max,
                        ..base
                    });
                }
            }
        }
        for (th_min, b_third, p_max) in [
            (400.0, 333.3, 0.15),
            (5.0, 333.3, 0.0),
            (5.0, 333.3, -0.0),
            (f64::NAN, 333.3, 0.15),
            (5.0, f64::NAN, 0.15),
            (-3.0, 333.3, 0.15),
            (5.0, 1e300, 0.15),
            (f64::INFINITY, f64::INFINITY, 0.15),
            (5.0, 333.3, f64::NAN),
        ] {
            cfgs.push(ZlRedConfig {
                th_min,
                b_third,
                p_max,
                ..base
            });
        }
        for cfg in &cfgs {
            let stages = P1Stages::new(cfg);
            let mut qs: Vec<u32> = (0..2000).collect();
            for t in [cfg.th_min, cfg.b_third] {
                if (0.0..4e9).contains(&t) {
                    let t = t as u32;
                    qs.extend(t.saturating_sub(3)..=t.saturating_add(3));
                }
            }
            qs.extend([u32::MAX, u32::MAX - 1, 1 << 31]);
            qs.extend((0..2000).map(|_| gen.next_u32()));
            for q in qs {
                let want = staged_p1(q as f64, cfg.th_min, cfg.b_third, cfg.p_max);
                if u64::from(q) < stages.zero_below {
                    assert_eq!(want, 0.0, "q = {q}, {cfg:?}");
                } else {
                    let got = stages.above_zero(q);
                    assert!(want != 0.0, "q = {q}, {cfg:?}");
                    assert_eq!(got.to_bits(), want.to_bits(), "q = {q}, {cfg:?}");
                }
            }
        }
    }

    /// `ZlRed::decide` on an upstream observation gives `happens(rng, p5)`'s verdict with the
    /// equations' `p5` (from its config, the observation and `P_avg` before the arrival), with
    /// the same draws, arrival by arrival, for configs with fractional thresholds, a
    /// misbehaving multiplier and a `p_max` whose quarter rounds to 0.
    #[test]
    fn decide_is_the_equations_verdict() {
        let mut gen = Xoshiro256PlusPlus::seed_from_u64(35);
        for (b, th_min, p_max, a) in [
            (1000, 5.0, 0.15, 1.0),
            (1000, 5.5, 0.15, 3.0),
            (301, 0.0, 1.0, 1000.0),
            (100, 20.25, 5e-324, 1.0),
        ] {
            let cfg = ZlRedParams {
                th_min,
                p_max,
                a,
                ..ZlRedParams::default()
            }
            .validate(b)
            .unwrap();
            let mut zl = ZlRed::new(cfg);
            let (mut drops, mut draws) = (0, 0);
            for n in 0..40_000u64 {
                let q = QueueView {
                    len_packets: gen.random_range(0..b),
                    capacity_packets: b,
                    capacity_bytes: u64::MAX,
                    ..QueueView::default()
                };
                let obs = Observation {
                    hit: gen.random_bool(0.3),
                    p: [0.0, gen.random::<f64>() * 0.05][(n % 9 != 0) as usize],
                    occurrence: gen.random_range(0..20),
                    total: gen.random_range(0..1500),
                };
                let pkt = PacketMeta::default();
                let p5 = zlred_probability(&cfg.inputs(q.len_packets, &obs, zl.p_avg())).p5;
                let seed = gen.next_u64();
                let (mut r1, mut r2) = (
                    Xoshiro256PlusPlus::seed_from_u64(seed),
                    Xoshiro256PlusPlus::seed_from_u64(seed),
                );
                let want = happens(&mut r1, p5);
                let arrival = Arrival::new(Nanos(n), &q, &pkt);
                let got = zl.decide(&arrival.observed(&obs), &mut r2);
                assert_eq!(
                    got == Verdict::EarlyDrop,
                    want,
                    "arrival {n}: {obs:?} {q:?}"
                );
                assert_eq!(r1.next_u64(), r2.next_u64(), "same draws, arrival {n}");
                drops += u32::from(want);
                draws += u32::from(p5 > 0.0 && p5 < 1.0);
            }
            if p_max > 1e-300 {
                assert!(drops > 500 && draws > 5_000, "{drops} drops, {draws} draws");
            }
        }
    }

    /// `count_to_f64` is `as f64` bit for bit: small counts, every power of two and its
    /// neighbours (the rounding boundaries above 2^53 included), both sides of 2^63, and
    /// random values of every magnitude.
    #[test]
    fn count_to_f64_is_the_unsigned_conversion() {
        let mut gen = Xoshiro256PlusPlus::seed_from_u64(33);
        let powers = (0..64).flat_map(|k| {
            let p = 1u64 << k;
            [p - 1, p, p + 1, p.wrapping_neg()]
        });
        let random = (0..1_000_000).map(|_| gen.next_u64() >> gen.random_range(0..64));
        for x in (0..100_000)
            .chain(powers)
            .chain(random)
            .chain([u64::MAX, i64::MAX as u64])
        {
            assert_eq!(count_to_f64(x).to_bits(), (x as f64).to_bits(), "{x}");
        }
    }

    /// `counts_to_f64` is `as f64` of each, bit for bit, for pairs where neither, one or both
    /// are at least 2^63 (each side of it, the powers of two and their neighbours, random
    /// values of every magnitude).
    #[test]
    fn counts_to_f64_is_the_unsigned_conversion_of_each() {
        let mut gen = Xoshiro256PlusPlus::seed_from_u64(34);
        let mut values: Vec<u64> = (0..64)
            .flat_map(|k| {
                let p = 1u64 << k;
                [p - 1, p, p + 1, p.wrapping_neg()]
            })
            .chain([0, u64::MAX, i64::MAX as u64, 1 << 63])
            .collect();
        values.extend((0..300).map(|_| gen.next_u64() >> gen.random_range(0..64)));
        for &a in &values {
            for &b in &values {
                let (x, y) = counts_to_f64(a, b);
                assert_eq!(x.to_bits(), (a as f64).to_bits(), "{a} {b}");
                assert_eq!(y.to_bits(), (b as f64).to_bits(), "{a} {b}");
            }
        }
    }

    /// `p_avg()` equals the EWMA stepped with each `last_decision()`'s `p4` (recomputed from
    /// the stored inputs by the equations), bit for bit, through both kinds of decision (they
    /// alternate in runs of 3 and 4, so each follows the other).
    #[test]
    fn p_avg_equals_the_step_by_step_update() {
        let cfg = ZlRedParams::default().validate(1000).unwrap();
        let mut zl = ZlRed::new(cfg);
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(32);
        let (mut eager, mut observed) = (0.0, 0);
        for n in 0..50_000u64 {
            let q = QueueView {
                len_packets: (n % 500) as u32,
                len_bytes: 0,
                capacity_packets: 1000,
                capacity_bytes: u64::MAX,
                head_enqueued_at: None,
                idle_since: None,
            };
            let pkt = PacketMeta {
                flow: zl_zombie::FlowId(rng.random_range(0..40)),
                ..PacketMeta::default()
            };
            let arrival = Arrival::new(Nanos(n), &q, &pkt);
            if n % 7 < 3 {
                zl.decide(&arrival, &mut rng);
            } else {
                let obs = Arc::clone(zl.zombie_list()).observe(pkt.flow, Nanos(n), &mut rng);
                zl.decide(&arrival.observed(&obs), &mut rng);
                observed += 1;
            }
            let t = zl.last_decision();
            eager = next_p_avg(eager, cfg.alpha, t.p4);
            assert_eq!(zl.p_avg().to_bits(), eager.to_bits(), "arrival {n}");
        }
        assert!(eager > 0.0);
        assert!(observed > 20_000, "{observed}");
    }
}
