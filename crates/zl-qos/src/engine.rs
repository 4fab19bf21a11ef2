//! [`QosEngine`]: classify + meter + AQM + enqueue on arrival, schedule + shape on departure.
//!
//! The data plane and netsim drive the same engine. Per packet it does not
//! allocate: queues are rings reserved at build time, statistics are fixed arrays.
//!
//! Arrival, in two steps so the caller can rewrite the DSCP of the packet it holds before
//! handing it over:
//! 1. [`QosEngine::classify`]: DSCP -> class and incoming color, meter, re-mark; returns a
//!    [`Classified`] with the code point to write (if it changes);
//! 2. [`QosEngine::enqueue_classified`]: the queue bounds apply, the class's AQM decides; a
//!    discarded item is handed back in [`Dropped`] (the data plane recycles its buffer).
//!
//! [`QosEngine::enqueue`] does both. Departure: [`QosEngine::dequeue`] asks the scheduler for
//! a class, the shaper for permission, and returns the packet, or the time the shaper will
//! allow it ([`Dequeue::Hold`]), or [`Dequeue::Empty`].

use std::sync::Arc;

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use zl_aqm::{
    Admission, AqmPolicy, AqmStats, Arrival, BuildContext, Discipline, PacketMeta, QueueDiscipline,
    Verdict,
};
use zl_core::{Color, Nanos};
use zl_zombie::{Observation, ZombieList};

use crate::class::{Class, ClassAqm, Dropped, Held, HostReader};
use crate::classify::{standard_remark, DscpTable, Lookup};
use crate::error::QosConfigError;
use crate::held::{self, Discarded};
use crate::meter::Meter;
use crate::params::{ClassParams, QosParams};
use crate::queue::{Capacity, ClassQueue};
use crate::sched::{SchedClass, Scheduler};
use crate::shaper::Shaper;
use crate::sizing::{BufferRule, LiveSqrtN};
use crate::stats::{ClassStats, ClassifierStats};

/// The largest ring a class may have (`max_packets`): 4 Mi packets, a few hundred MB of slots.
pub const MAX_QUEUE_PACKETS: u32 = 1 << 22;

/// The outcome of classification and metering for one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Classified {
    /// Index of the class (see [`QosEngine::class_names`]).
    pub class: usize,
    /// Color after metering (the incoming color when the class has no meter).
    pub color: Color,
    /// The DSCP to write into the packet, when re-marking changes it.
    pub remark: Option<u8>,
}

/// A packet leaving the engine.
#[derive(Debug, PartialEq, Eq)]
pub struct Departed<T> {
    /// The caller's item.
    pub item: T,
    /// The class it left.
    pub class: usize,
    /// What the AQM saw of it.
    pub meta: PacketMeta,
    /// Time spent in the class queue.
    pub sojourn: Nanos,
}

/// What [`QosEngine::dequeue_burst`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Burst {
    /// Packets handed out.
    pub sent: usize,
    /// The shaper holds the next packet until then (`None`: the burst filled `max`, or every
    /// queue is empty).
    pub held_until: Option<Nanos>,
}

/// What [`QosEngine::dequeue`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Dequeue<T> {
    /// The next packet.
    Packet(Departed<T>),
    /// A packet is waiting but the shaper holds it until `until`.
    Hold {
        /// When the shaper lets it go.
        until: Nanos,
    },
    /// Every queue is empty.
    Empty,
}

/// The Diffserv pipeline of one egress port, generic over the queued item type.
pub struct QosEngine<T> {
    classes: Vec<Class<T>>,
    names: Vec<String>,
    table: DscpTable,
    sched: Scheduler,
    shaper: Option<Shaper>,
    classifier_stats: ClassifierStats,
    /// Some class is sized by the `sqrt-n-live` rule (takes the flow estimate).
    live_sized: bool,
    /// Some class holds its packets in a discipline of its own (`crate::held`).
    held_classes: bool,
    /// Packets a discipline discarded after admitting them, until the caller takes them
    /// ([`QosEngine::take_discarded`]).
    discards: Vec<Discarded<T>>,
    /// Sets the congestion mark on an item a discipline marks as it leaves
    /// ([`QosEngine::set_marker`]).
    marker: Option<fn(&mut T) -> bool>,
    /// Reads an item's hosts for a discipline that isolates hosts
    /// ([`QosEngine::set_host_reader`]).
    host_reader: Option<HostReader<T>>,
    /// The random source of the disciplines' dequeue-time decisions (DualPI2's), its own
    /// stream so that the arrivals' draws do not depend on when the link takes packets
    /// ([`QosEngine::seed_dequeue`]).
    dequeue_rng: Xoshiro256PlusPlus,
}

/// A class as configured, everything but its queue's contents and its counters: what a live
/// reconfiguration ([`QosUpdate`]) replaces.
struct ClassSetup<T> {
    max_packets: u32,
    cap: Capacity,
    meter: Option<Meter>,
    drop_red: bool,
    remark: Option<[u8; 3]>,
    aqm: ClassAqm<T>,
    live: Option<LiveSqrtN>,
}

fn build_class<T>(
    i: usize,
    p: &ClassParams,
    link_rate_bps: u64,
    zombies: Option<&Arc<ZombieList>>,
) -> Result<(ClassSetup<T>, SchedClass), QosConfigError> {
    let key = |k: &str| format!("classes[{i}].{k}");
    let sched = match (p.weight, p.strict_rank) {
        (Some(0), None) => return Err(QosConfigError::new(key("weight"), "must be > 0")),
        (Some(q), None) => SchedClass::Weighted { quantum: q },
        (None, Some(rank)) => SchedClass::Strict { rank },
        _ => {
            return Err(QosConfigError::new(
                key("weight"),
                "set exactly one of `weight` and `strict_rank`",
            ))
        }
    };
    if p.max_packets == 0 || p.max_packets > MAX_QUEUE_PACKETS {
        return Err(QosConfigError::new(
            key("max_packets"),
            format!(
                "{} is outside 1 ..= {MAX_QUEUE_PACKETS} (the ring is allocated up front)",
                p.max_packets
            ),
        ));
    }
    let rule = p.buffer.clone().unwrap_or(BufferRule::Fixed {
        packets: p.max_packets,
        bytes: None,
    });
    let (cap, live) = rule
        .build(p.max_packets)
        .map_err(|e| e.within(&key("buffer")))?;
    let meter = match &p.meter {
        Some(m) => Some(m.build().map_err(|e| e.within(&key("meter")))?),
        None => None,
    };
    let remark = match &p.remark {
        Some(specs) => {
            let mut out = [0u8; 3];
            for (j, s) in specs.iter().enumerate() {
                out[j] = s.value().ok_or_else(|| {
                    QosConfigError::new(
                        format!("classes[{i}].remark[{j}]"),
                        format!("{s:?} is not a code point 0..=63 or a known name"),
                    )
                })?;
            }
            Some(out)
        }
        None if meter.is_some() => standard_remark(&p.name),
        None => None,
    };
    let mut ctx =
        BuildContext::new(link_rate_bps, cap.packets).with_buffer(p.max_packets, cap.bytes);
    if let Some(list) = zombies {
        ctx = ctx.with_zombie_list(Arc::clone(list));
    }
    let aqm_err = |k: String| {
        move |e: zl_aqm::AqmConfigError| {
            QosConfigError::new(
                format!("{k}.{}", e.param),
                format!("{} is invalid: expected {}", e.value, e.expected),
            )
        }
    };
    let aqm = match (&p.aqm, &p.aqm_by_color) {
        (Some(_), Some(_)) => {
            return Err(QosConfigError::new(
                key("aqm_by_color"),
                "set at most one of `aqm` and `aqm_by_color`",
            ))
        }
        (Some(a), None) if a.holds_queues() => {
            let disc = a
                .build_discipline(&ctx)
                .map_err(aqm_err(key("aqm")))?
                .expect("holds_queues: a discipline");
            ClassAqm::Queues(Box::new(Held::new(disc)))
        }
        (Some(a), None) => {
            ClassAqm::Shared(Admission::new(a.build(&ctx).map_err(aqm_err(key("aqm")))?))
        }
        (None, Some(b)) => {
            for (color, a) in [("green", &b.green), ("yellow", &b.yellow), ("red", &b.red)] {
                if a.holds_queues() {
                    return Err(QosConfigError::new(
                        key(&format!("aqm_by_color.{color}.kind")),
                        format!(
                            "`{}` holds the class's packets in queues of its own, so it cannot \
                             be one color's policy: set it as the class's `aqm`",
                            a.kind()
                        ),
                    ));
                }
            }
            ClassAqm::ByColor(Box::new([
                Admission::new(
                    b.green
                        .build(&ctx)
                        .map_err(aqm_err(key("aqm_by_color.green")))?,
                ),
                Admission::new(
                    b.yellow
                        .build(&ctx)
                        .map_err(aqm_err(key("aqm_by_color.yellow")))?,
                ),
                Admission::new(
                    b.red
                        .build(&ctx)
                        .map_err(aqm_err(key("aqm_by_color.red")))?,
                ),
            ]))
        }
        (None, None) => ClassAqm::Shared(Admission::new(
            zl_aqm::AqmParams::default()
                .build(&ctx)
                .map_err(aqm_err(key("aqm")))?,
        )),
    };
    let class = ClassSetup {
        max_packets: p.max_packets,
        cap,
        meter,
        drop_red: p.drop_red,
        remark,
        aqm,
        live,
    };
    Ok((class, sched))
}

/// A new configuration for a running [`QosEngine`]: validated and built (meters, policies,
/// shaper, scheduler, classifier table) where it is made, off the packet path, then applied
/// by [`QosEngine::apply`] between two packets. The queues keep what they hold and every
/// counter goes on; what is configured is replaced: meters and shaper start full at their
/// new rates, the scheduler starts a new round with the new quanta, each AQM policy takes
/// over its predecessor's state when it is the same policy ([`AqmPolicy::inherit_state`]).
/// The classes themselves (their number, names and ring sizes `max_packets`) cannot change:
/// the rings hold the queued packets.
pub struct QosUpdate<T> {
    classes: Vec<ClassSetup<T>>,
    names: Vec<String>,
    table: DscpTable,
    sched: Scheduler,
    shaper: Option<Shaper>,
}

impl<T> QosUpdate<T> {
    /// Validates `p` and builds what [`QosEngine::apply`] installs; SRED and ZL-RED policies
    /// decide on `list` when given (as [`QosEngine::with_zombie_list`]), on their own lists
    /// otherwise.
    pub fn new(p: &QosParams, list: Option<&Arc<ZombieList>>) -> Result<Self, QosConfigError> {
        if p.classes.is_empty() {
            return Err(QosConfigError::new(
                "classes",
                "at least one class is required",
            ));
        }
        if p.classes.len() > u8::MAX as usize {
            return Err(QosConfigError::new("classes", "at most 255 classes"));
        }
        let shaper = match &p.shaper {
            Some(s) => Some(s.build().map_err(|e| e.within("shaper"))?),
            None => None,
        };
        let link_rate_bps = match (p.link_rate_bps, &shaper) {
            (Some(0), _) => return Err(QosConfigError::new("link_rate_bps", "must be > 0")),
            (Some(r), _) => r,
            (None, Some(s)) => s.rate_bps(),
            (None, None) => {
                return Err(QosConfigError::new(
                    "link_rate_bps",
                    "required when no shaper is configured",
                ))
            }
        };
        let names: Vec<String> = p.classes.iter().map(|c| c.name.clone()).collect();
        for (i, n) in names.iter().enumerate() {
            if names[..i].iter().any(|m| m.eq_ignore_ascii_case(n)) {
                return Err(QosConfigError::new(
                    format!("classes[{i}].name"),
                    format!("duplicate class name `{n}`"),
                ));
            }
        }
        let mut classes = Vec::with_capacity(p.classes.len());
        let mut places = Vec::with_capacity(p.classes.len());
        for (i, c) in p.classes.iter().enumerate() {
            let (class, place) = build_class(i, c, link_rate_bps, list)?;
            classes.push(class);
            places.push(place);
        }
        let cp = &p.classifier;
        let table = DscpTable::build(&names, &cp.default_class, cp.standard, &cp.dscp)
            .map_err(|e| e.within("classifier"))?;
        Ok(QosUpdate {
            classes,
            names,
            table,
            sched: Scheduler::new(p.scheduler.mode, &places),
            shaper,
        })
    }
}

impl<T> QosEngine<T> {
    /// Validates `p` and builds the engine (allocates every queue ring now). Each SRED or
    /// ZL-RED policy gets a Zombie List of its own, built from its parameters.
    pub fn new(p: &QosParams) -> Result<Self, QosConfigError> {
        Self::build(p, None)
    }

    /// As [`QosEngine::new`], but every SRED and ZL-RED policy of every class and color uses
    /// `list` (its configuration replaces theirs): the one lock-free list that receive workers
    /// observe, for [`QosEngine::enqueue_classified_observed`].
    pub fn with_zombie_list(p: &QosParams, list: &Arc<ZombieList>) -> Result<Self, QosConfigError> {
        Self::build(p, Some(list))
    }

    fn build(p: &QosParams, zombies: Option<&Arc<ZombieList>>) -> Result<Self, QosConfigError> {
        let u = QosUpdate::new(p, zombies)?;
        let classes: Vec<Class<T>> = (u.classes.into_iter())
            .map(|c| Class {
                // A held class's packets live in its discipline, its ring holds only the head
                // slot; the ring is reserved at full size all the same, so that a
                // reconfiguration to a FIFO policy queues without growing it.
                queue: ClassQueue::new(c.max_packets, c.cap),
                meter: c.meter,
                drop_red: c.drop_red,
                remark: c.remark,
                needs: c.aqm.needs(),
                aqm: c.aqm,
                live: c.live,
                stats: ClassStats::default(),
            })
            .collect();
        Ok(QosEngine {
            live_sized: classes.iter().any(|c| c.live.is_some()),
            held_classes: classes.iter().any(|c| c.aqm.is_held()),
            classes,
            names: u.names,
            table: u.table,
            sched: u.sched,
            shaper: u.shaper,
            classifier_stats: ClassifierStats::default(),
            discards: Vec::with_capacity(64),
            marker: None,
            host_reader: None,
            dequeue_rng: Xoshiro256PlusPlus::seed_from_u64(0),
        })
    }

    /// Sets how a discipline's dequeue-time congestion mark (CoDel's, FQ-CoDel's and DualPI2's
    /// ECN marks) is applied to an item: `mark` sets CE (or the extension header's ECN bit) and
    /// returns true when the item leaves marked. Without one, such a mark is not applied (a
    /// simulator's items need none: the discipline's counters say what it marked).
    pub fn set_marker(&mut self, mark: fn(&mut T) -> bool) {
        self.marker = Some(mark);
    }

    /// Sets how the hosts of an arrival are read (its source and destination address hashes,
    /// `PacketMeta::src_host` and `dst_host`) for a discipline that isolates hosts (FQ-CoDel's
    /// host modes, isolation by host): a data plane leaves them 0 in the metadata of every
    /// packet and reads them from the frame only for such a class. Without one, the metadata's
    /// own hosts are used (a simulator fills them).
    pub fn set_host_reader(&mut self, read: fn(&T) -> (u16, u16)) {
        self.host_reader = Some(read);
    }

    /// Seeds the random stream of the disciplines' dequeue-time decisions (a data plane
    /// derives it from its run's seed; default 0).
    pub fn seed_dequeue(&mut self, seed: u64) {
        self.dequeue_rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    }

    /// True when a discipline has discarded packets the caller has not taken yet.
    #[inline]
    pub fn has_discarded(&self) -> bool {
        !self.discards.is_empty()
    }

    /// Hands every packet a discipline discarded after admitting it (counted in its class's
    /// `dequeue_drops` or `overflow_drops`) to `f`, oldest first. A caller that admits or
    /// sends through a class holding its own queues takes them after each call, to count and
    /// free them.
    pub fn take_discarded(&mut self, f: impl FnMut(Discarded<T>)) {
        self.discards.drain(..).for_each(f);
    }

    /// The discipline of class `class`, when its policy holds its own queues (for reports:
    /// FQ-CoDel's lists, DualPI2's probability, the isolation's penalty box).
    pub fn discipline(&self, class: usize) -> Option<&QueueDiscipline<T>> {
        match &self.classes.get(class)?.aqm {
            ClassAqm::Queues(h) => Some(&h.disc),
            _ => None,
        }
    }

    /// The policy deciding on class `class`'s FIFO, when it has one policy for every color
    /// (for reports: PIE's probability).
    pub fn fifo_policy(&self, class: usize) -> Option<&AqmPolicy> {
        match &self.classes.get(class)?.aqm {
            ClassAqm::Shared(a) => Some(a.policy()),
            _ => None,
        }
    }

    /// The `kind` of class `class`'s AQM as configured (`by-color` for one policy per color).
    pub fn aqm_kind(&self, class: usize) -> Option<&'static str> {
        Some(match &self.classes.get(class)?.aqm {
            ClassAqm::Shared(a) => a.policy().kind(),
            ClassAqm::ByColor(_) => "by-color",
            ClassAqm::Queues(h) => h.disc.kind(),
        })
    }

    /// The context a held class's operations take: the discards, the marker, the dequeue
    /// stream.
    fn held_ctx(&mut self) -> (&mut Vec<Class<T>>, held::Ctx<'_, T>) {
        (
            &mut self.classes,
            held::Ctx {
                discards: &mut self.discards,
                marker: self.marker,
                hosts: self.host_reader,
                rng: &mut self.dequeue_rng,
            },
        )
    }

    /// Fills the empty head slot of every held class whose discipline has a packet it may send
    /// at `now`, and returns the earliest time one that holds packets may send (a rate-limited
    /// sub-queue's).
    #[cold]
    #[inline(never)]
    fn refill_held(&mut self, now: Nanos) -> Option<Nanos> {
        let mut earliest: Option<Nanos> = None;
        let (classes, ctx) = self.held_ctx();
        let held::Ctx {
            discards,
            marker,
            hosts,
            rng,
        } = ctx;
        for (ci, class) in classes.iter_mut().enumerate() {
            let ClassAqm::Queues(h) = &class.aqm else {
                continue;
            };
            if !class.queue.is_empty() || h.disc.len_packets() == 0 {
                continue;
            }
            if h.hold.is_some_and(|t| t > now) {
                earliest =
                    Some(earliest.map_or(h.hold.unwrap_or(now), |e| e.min(h.hold.unwrap_or(now))));
                continue;
            }
            held::refill(
                class,
                ci,
                now,
                held::Ctx {
                    discards,
                    marker,
                    hosts,
                    rng,
                },
            );
            if let ClassAqm::Queues(h) = &class.aqm {
                if let (true, Some(t)) = (class.queue.is_empty(), h.hold) {
                    earliest = Some(earliest.map_or(t, |e| e.min(t)));
                }
            }
        }
        earliest
    }

    /// After a held class's head slot was taken at `now`: the discipline's next packet.
    #[cold]
    #[inline(never)]
    fn after_held_departure(&mut self, ci: usize, now: Nanos) {
        let (classes, ctx) = self.held_ctx();
        held::refill(&mut classes[ci], ci, now, ctx);
    }

    /// Installs a new configuration (built off the packet path: [`QosUpdate`]) while packets
    /// are queued: each class keeps its queue and its counters, its meter, re-mark, AQM,
    /// buffer rule and limits are replaced (a limit below what is queued refuses arrivals
    /// until the queue drains below it: nothing queued is dropped), as are the classifier's
    /// table, the scheduler and the shaper. An update whose classes differ (number, names,
    /// ring sizes, or one policy for every color against one per color) is refused naming
    /// the key, and nothing changes.
    pub fn apply(&mut self, u: QosUpdate<T>) -> Result<(), QosConfigError> {
        self.check(&u)?;
        let reader = self.host_reader;
        for (c, mut n) in self.classes.iter_mut().zip(u.classes) {
            match (&mut n.aqm, &mut c.aqm) {
                (ClassAqm::Shared(new), ClassAqm::Shared(old)) => new.take_over(old),
                (ClassAqm::ByColor(new), ClassAqm::ByColor(old)) => {
                    for (new, old) in new.iter_mut().zip(old.iter()) {
                        new.take_over(old);
                    }
                }
                // A FIFO class becomes a held one: its packets move into the discipline in
                // their order, with no decision (nothing queued is dropped); the head slot is
                // filled at the next dequeue.
                (ClassAqm::Queues(new), ClassAqm::Shared(old)) => {
                    new.stats = *old.stats();
                    new.disc.set_capacity(n.cap.packets, n.cap.bytes);
                    while let Some(q) = c.queue.pop(Nanos::ZERO) {
                        if let Err(q) = new.adopt(q, reader) {
                            c.queue.push_held(q);
                            break;
                        }
                    }
                }
                // A held class becomes a FIFO: its head slot stays first, then the discipline's
                // packets in the order it can tell.
                (ClassAqm::Shared(new), ClassAqm::Queues(old)) => {
                    new.inherit_stats(old.stats);
                    let queue = &mut c.queue;
                    old.disc.drain(|q| queue.push_held(q));
                }
                (ClassAqm::Queues(new), ClassAqm::Queues(old)) => {
                    new.stats = old.stats;
                    new.disc.inherit_state(&old.disc);
                    new.disc.set_capacity(n.cap.packets, n.cap.bytes);
                    let mut leftover = Vec::new();
                    old.disc.drain(|q| {
                        if let Err(q) = new.adopt(q, reader) {
                            leftover.push(q);
                        }
                    });
                    for q in leftover {
                        c.queue.push_held(q);
                    }
                }
                _ => unreachable!("checked above"),
            }
            c.queue.set_capacity(n.cap);
            c.meter = n.meter;
            c.drop_red = n.drop_red;
            c.remark = n.remark;
            c.aqm = n.aqm;
            c.live = n.live;
            c.needs = c.aqm.needs();
        }
        self.live_sized = self.classes.iter().any(|c| c.live.is_some());
        self.held_classes = self.classes.iter().any(|c| c.aqm.is_held());
        self.table = u.table;
        self.sched = u.sched;
        self.shaper = u.shaper;
        Ok(())
    }

    /// Whether [`QosEngine::apply`] would install `u`: the same classes (number, names, ring
    /// sizes, and for each one policy for every color or one per color, as now).
    pub fn check(&self, u: &QosUpdate<T>) -> Result<(), QosConfigError> {
        if u.names.len() != self.names.len() {
            return Err(QosConfigError::new(
                "classes",
                format!(
                    "{} classes -> {}: a running engine keeps its classes (their rings hold the \
                     queued packets)",
                    self.names.len(),
                    u.names.len()
                ),
            ));
        }
        for (i, (c, n)) in self.classes.iter().zip(&u.classes).enumerate() {
            if self.names[i] != u.names[i] {
                return Err(QosConfigError::new(
                    format!("classes[{i}].name"),
                    format!(
                        "`{}` -> `{}`: a running engine keeps its classes",
                        self.names[i], u.names[i]
                    ),
                ));
            }
            if c.queue.max_packets() != n.max_packets {
                return Err(QosConfigError::new(
                    format!("classes[{i}].max_packets"),
                    format!(
                        "{} -> {}: the ring is allocated at start",
                        c.queue.max_packets(),
                        n.max_packets
                    ),
                ));
            }
            if matches!(c.aqm, ClassAqm::ByColor(_)) != matches!(n.aqm, ClassAqm::ByColor(_)) {
                return Err(QosConfigError::new(
                    format!("classes[{i}].aqm_by_color"),
                    "one policy for every color <-> one per color: the per-color counters would \
                     restart",
                ));
            }
        }
        Ok(())
    }

    /// Class names, in index order.
    pub fn class_names(&self) -> &[String] {
        &self.names
    }

    /// The index of the class named `name`.
    pub fn class_index(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n.eq_ignore_ascii_case(name))
    }

    /// Step 1 of an arrival: DSCP lookup, metering of `len` bytes at `now`, re-marking.
    // Always in line: with the packet taken by reference in the data plane's admission, LLVM
    // calls it out of line, about 24 instructions per packet dearer in the pipeline bench.
    #[inline(always)]
    pub fn classify(&mut self, now: Nanos, dscp: Option<u8>, len: u32) -> Classified {
        let lookup = self.table.lookup(dscp);
        match lookup {
            Lookup::Mapped { .. } => {}
            Lookup::Unmapped { .. } => self.classifier_stats.unmapped += 1,
            Lookup::Unparsed { .. } => self.classifier_stats.unparsed += 1,
        }
        let class = lookup.class();
        let c = &mut self.classes[class];
        let color = match &mut c.meter {
            Some(m) => m.color(now, len, lookup.color()),
            None => lookup.color(),
        };
        let remark = c
            .remark
            .map(|r| r[color.index()])
            .filter(|&d| Some(d) != dscp);
        Classified {
            class,
            color,
            remark,
        }
    }

    /// Step 2 of an arrival: the class's AQM decides behind the queue's bounds
    /// ([`Admission`]), then the shaper's (a packet longer than its bucket never leaves, so
    /// is tail-dropped even when the policy admits it); `meta.color` is set to
    /// the metered color. On `MarkCe`, `mark` is applied to the item as it is queued (the
    /// data plane sets CE in the header, a simulator a flag); in a class whose policy holds
    /// its own queues the engine's marker ([`QosEngine::set_marker`]) sets it instead, as it
    /// does the discipline's marks at departure, and `mark` is not called. `Ok` carries `Enqueue` or
    /// `MarkCe`; `Err` hands the item back with the drop cause. A `c.class` this engine does
    /// not have is a tail drop counted in [`ClassifierStats::invalid_class`].
    #[inline]
    pub fn enqueue_classified<R: rand::RngCore + ?Sized>(
        &mut self,
        now: Nanos,
        rng: &mut R,
        c: &Classified,
        meta: PacketMeta,
        item: T,
        mark: impl FnOnce(&mut T),
    ) -> Result<Verdict, Dropped<T>> {
        self.enqueue_classified_observed(now, rng, c, meta, item, mark, None)
    }

    /// [`QosEngine::enqueue_classified`] for a packet whose observation of the shared Zombie
    /// List was made upstream (`obs`, by a receive worker on the list given to
    /// [`QosEngine::with_zombie_list`]): SRED and ZL-RED decide on it instead of observing
    /// again (the [`Arrival`] carries it). `None` is `enqueue_classified`.
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn enqueue_classified_observed<R: rand::RngCore + ?Sized>(
        &mut self,
        now: Nanos,
        rng: &mut R,
        c: &Classified,
        meta: PacketMeta,
        item: T,
        mark: impl FnOnce(&mut T),
        obs: Option<&Observation>,
    ) -> Result<Verdict, Dropped<T>> {
        self.enqueue_classified_taken(now, rng, c, meta, move || item, mark, obs)
    }

    /// [`QosEngine::enqueue_classified_observed`] with the item moved out of where the caller
    /// holds it (`take`) only once the verdict is known, straight into the queue (or into
    /// [`Dropped`]): a data plane works on a packet in its receive batch and moves it once
    /// (moved in by value, the 40-byte buffer would go through the stack three times, about 34
    /// instructions per packet in the pipeline bench).
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn enqueue_classified_taken<R: rand::RngCore + ?Sized>(
        &mut self,
        now: Nanos,
        rng: &mut R,
        c: &Classified,
        mut meta: PacketMeta,
        take: impl FnOnce() -> T,
        mark: impl FnOnce(&mut T),
        obs: Option<&Observation>,
    ) -> Result<Verdict, Dropped<T>> {
        meta.color = c.color;
        let shaper_fits = self.shaper.as_ref().is_none_or(|s| s.fits(meta.len));
        let Some(class) = self.classes.get_mut(c.class) else {
            // A `Classified` not made by this engine's `classify`.
            self.classifier_stats.invalid_class += 1;
            return Err(Dropped {
                verdict: Verdict::TailDrop,
                item: take(),
            });
        };
        if class.aqm.is_held() {
            let ctx = held::Ctx {
                discards: &mut self.discards,
                marker: self.marker,
                hosts: self.host_reader,
                rng: &mut self.dequeue_rng,
            };
            return held::enqueue(
                class,
                ctx,
                now,
                rng,
                c.class,
                c.color,
                meta,
                take,
                obs.copied(),
                shaper_fits,
            );
        }
        let mut verdict = if class.drop_red && c.color == Color::Red {
            Verdict::ForcedDrop
        } else {
            let aqm = class.aqm.for_color(c.color);
            // The head's enqueue time only for the policy that reads it; any other borrows
            // the view the queue keeps (no copy per arrival).
            let with_head;
            let view = if class.needs.head_time {
                with_head = class.queue.view();
                &with_head
            } else {
                class.queue.view_without_head()
            };
            let arrival = Arrival {
                now,
                queue: view,
                pkt: &meta,
                zombie: obs,
            };
            aqm.admit(&arrival, rng)
        };
        if verdict.admits() && !shaper_fits {
            verdict = Verdict::TailDrop;
        }
        class.stats.per_color[c.color.index()].record_verdict(verdict, meta.len);
        if !verdict.admits() {
            return Err(Dropped {
                verdict,
                item: take(),
            });
        }
        class.queue.push_fitting(now, meta, take);
        if verdict == Verdict::MarkCe {
            // Marked where it is queued: the item is not held apart for a packet the AQM
            // rarely marks (nothing reads it between the two).
            if let Some(item) = class.queue.back_item_mut() {
                mark(item);
            }
        }
        Ok(verdict)
    }

    /// Classify and enqueue in one call (for callers that do not rewrite the DSCP, such as
    /// simulators; `Classified::remark` is still reported). `mark` as in
    /// [`QosEngine::enqueue_classified`].
    #[inline]
    pub fn enqueue<R: rand::RngCore + ?Sized>(
        &mut self,
        now: Nanos,
        rng: &mut R,
        dscp: Option<u8>,
        meta: PacketMeta,
        item: T,
        mark: impl FnOnce(&mut T),
    ) -> (Classified, Result<Verdict, Dropped<T>>) {
        let c = self.classify(now, dscp, meta.len);
        let r = self.enqueue_classified(now, rng, &c, meta, item, mark);
        (c, r)
    }

    /// The next packet to send at `now`, by strict priority then WRR/DRR, if the shaper
    /// allows it.
    #[inline]
    pub fn dequeue(&mut self, now: Nanos) -> Dequeue<T> {
        self.dequeue_one(now)
    }

    /// Up to `max` packets at `now`, in the order [`QosEngine::dequeue`] returns them, each
    /// handed to `send`; stops early when every queue is empty or the shaper holds the next
    /// packet. For a transmit burst: one call per burst instead of one per packet, and no
    /// [`Departed`] built for a caller that wants the item only.
    ///
    /// The scheduler chooses once per run rather than once per packet: nothing arrives during
    /// the burst, so once [`Scheduler::peek`] has chosen a class, it would choose it again
    /// for the next [`Scheduler::run_quota`] packets the class holds (a WRR class's credit,
    /// or all of them when it is the only weighted class with packets), and is asked again
    /// only after them ([`Scheduler::next_run`]: the class and that count in one call). The
    /// shaper then goes over the run's lengths in the ring
    /// ([`Shaper::send_run`]: the `try_send`s `dequeue` would make, up to the first it
    /// refuses), the packets it lets go are popped and counted one by one, as
    /// [`QosEngine::dequeue`] does, and the run is charged at its end as those `peek`s and
    /// commits would have ([`Scheduler::commit_run`]); `dequeue_burst_matches_repeated_dequeue`
    /// and `tests/engine_props.rs` hold the two against each other.
    #[inline]
    pub fn dequeue_burst(&mut self, now: Nanos, max: usize, mut send: impl FnMut(T)) -> Burst {
        let mut sent = 0;
        // A held class whose head slot is empty (its discipline held its packets back, or a
        // reconfiguration just filled it) is given its turn to fill it first.
        let held_hold = if self.held_classes {
            self.refill_held(now)
        } else {
            None
        };
        while sent < max {
            let classes = &self.classes;
            let Some((ci, quota)) = self.sched.next_run(|i| classes[i].queue.head_len()) else {
                break;
            };
            let run = quota.min((max - sent) as u64);
            let class = &mut self.classes[ci];
            let run = run.min(class.queue.len() as u64);
            // The shaper first, over the run's lengths as they lie in the ring (one pass, no
            // pop): how many of them it lets go, and when it lets the one it holds go. Then
            // those leave one by one.
            let (go, held_until) = match &mut self.shaper {
                Some(s) => s.send_run(now, class.queue.lens(run as usize)),
                None => (run, None),
            };
            if class.needs.departures {
                class.departures(now, go);
            }
            let (mut n, mut last_len) = (0u64, 0);
            while n < go {
                let Some(q) = class.queue.pop(now) else {
                    break;
                };
                let s = &mut class.stats.per_color[q.meta.color.index()];
                s.dequeued += 1;
                s.sojourn.record(now - q.enqueued_at);
                s.dequeued_bytes += q.meta.len as u64;
                last_len = q.meta.len;
                send(q.item);
                n += 1;
            }
            // A held class's head slot left: its discipline chooses the next packet now, when
            // the link is free for it (once per run; a held class's run is its one head).
            if self.held_classes && n > 0 && class.aqm.is_held() {
                self.after_held_departure(ci, now);
            }
            let class = &self.classes[ci];
            if n > 0 {
                self.sched
                    .commit_run(ci, n, last_len, class.queue.is_empty());
                if held_until.is_some() {
                    // `dequeue` asked the scheduler for the held packet too: a WRR credit
                    // spent by the run is renewed there (`peek` is idempotent otherwise).
                    let classes = &self.classes;
                    self.sched.peek(|i| classes[i].queue.head_len());
                }
            }
            sent += n as usize;
            if held_until.is_some() || n == 0 {
                return Burst { sent, held_until };
            }
        }
        Burst {
            sent,
            held_until: if sent < max { held_hold } else { None },
        }
    }

    /// [`QosEngine::dequeue_burst`] for an engine with nothing queued, without its burst loop:
    /// when every queue is empty (and no discipline's discards wait for
    /// [`QosEngine::take_discarded`]) it does what `dequeue_burst` would (nothing leaves; the
    /// scheduler's round moves on as [`Scheduler::peek`] finding nothing moves it) and
    /// returns true; otherwise it does nothing and returns false. For a transmit poll of an
    /// idle port, the common case on a router with many ports.
    #[inline]
    pub fn dequeue_idle(&mut self) -> bool {
        if !self.classes.iter().all(|c| c.queue.is_empty())
            || self.held_classes && !self.held_idle()
        {
            return false;
        }
        // Every head is empty: `dequeue_burst`'s first `peek`, which finds nothing.
        let found = self.sched.peek(|_| None);
        debug_assert!(found.is_none());
        true
    }

    /// The cut-through of a data plane that admits a whole receive burst before it transmits:
    /// when the packet just admitted to `class` is the only one in the engine, it is handed to
    /// `send` at once if the shaper lets it go (as [`QosEngine::dequeue_burst`] with room for
    /// one); with anything else queued, or a `class` this engine does not have, nothing
    /// leaves. Without it a queue whose link keeps up would hold the burst, which an AQM reads
    /// as congestion; with a backlog the packet waits its turn as before, so the scheduler's
    /// order is kept.
    #[inline]
    pub fn release_if_alone(&mut self, now: Nanos, class: usize, send: impl FnMut(T)) -> Burst {
        let alone = self.classes.get(class).is_some_and(|c| c.queue.len() == 1) && self.len() == 1;
        if !alone {
            return Burst {
                sent: 0,
                held_until: None,
            };
        }
        self.dequeue_burst(now, 1, send)
    }

    /// Ends the engine's run: takes every packet still queued, in the scheduler's order and
    /// without asking the shaper, counts each in its class's `shutdown_drops` (not `dequeued`:
    /// it never left on the link, so a class's sent count and rate stay what the link carried)
    /// and hands it to `discard`. Returns how many there were.
    pub fn discard_all(&mut self, now: Nanos, mut discard: impl FnMut(T)) -> usize {
        let mut n = 0;
        loop {
            let classes = &self.classes;
            let Some(ci) = self.sched.peek(|i| classes[i].queue.head_len()) else {
                break;
            };
            let class = &mut self.classes[ci];
            let (Some(len), Some(q)) = (class.queue.head_len(), class.queue.pop(now)) else {
                break;
            };
            self.sched.commit(ci, len, class.queue.is_empty());
            class.stats.per_color[q.meta.color.index()].shutdown_drops += 1;
            discard(q.item);
            n += 1;
        }
        // What the disciplines still hold, without their decisions.
        for class in &mut self.classes {
            if let ClassAqm::Queues(h) = &mut class.aqm {
                let stats = &mut class.stats;
                h.disc.drain(|q| {
                    stats.per_color[q.meta.color.index()].shutdown_drops += 1;
                    discard(q.item);
                    n += 1;
                });
                h.hold = None;
            }
        }
        n
    }

    #[inline(always)]
    fn dequeue_one(&mut self, now: Nanos) -> Dequeue<T> {
        let held_hold = if self.held_classes {
            self.refill_held(now)
        } else {
            None
        };
        let classes = &self.classes;
        let Some(ci) = self.sched.peek(|i| classes[i].queue.head_len()) else {
            return match held_hold {
                Some(until) => Dequeue::Hold { until },
                None => Dequeue::Empty,
            };
        };
        let class = &mut self.classes[ci];
        let Some(len) = class.queue.head_len() else {
            return Dequeue::Empty;
        };
        if let Some(s) = &mut self.shaper {
            if !s.try_send(now, len) {
                return Dequeue::Hold {
                    until: s.next_send_time(now, len),
                };
            }
        }
        if class.needs.departures {
            class.departures(now, 1);
        }
        let Some(q) = class.queue.pop(now) else {
            return Dequeue::Empty;
        };
        if class.aqm.is_held() {
            self.after_held_departure(ci, now);
        }
        let class = &mut self.classes[ci];
        self.sched.commit(ci, len, class.queue.is_empty());
        let sojourn = now - q.enqueued_at;
        let s = &mut class.stats.per_color[q.meta.color.index()];
        s.dequeued += 1;
        s.dequeued_bytes += len as u64;
        s.sojourn.record(sojourn);
        Dequeue::Packet(Departed {
            item: q.item,
            class: ci,
            meta: q.meta,
            sojourn,
        })
    }

    /// Offers the Zombie List's flow estimate `1/P(t)` to every class sized by the
    /// `sqrt-n-live` rule (each re-evaluates at most once per its period).
    #[inline]
    pub fn offer_flow_estimate(&mut self, now: Nanos, estimated_flows: f64) {
        for c in &mut self.classes {
            if let Some(live) = &mut c.live {
                if let Some(bytes) = live.offer(now, estimated_flows) {
                    let cap = c.queue.capacity();
                    c.queue.set_capacity(Capacity {
                        packets: cap.packets,
                        bytes,
                    });
                    if let ClassAqm::Queues(h) = &mut c.aqm {
                        h.disc.set_capacity(cap.packets, bytes);
                    }
                }
            }
        }
    }

    /// [`QosEngine::offer_flow_estimate`] with the estimate read from `zombies`, which is not
    /// read at all when no class is sized by the estimate (the data plane offers it every
    /// poll; reading P(t) reads every thread's shard of it).
    #[inline]
    pub fn offer_zombie_estimate(&mut self, now: Nanos, zombies: &zl_zombie::ZombieList) {
        if self.live_sized {
            self.offer_flow_estimate(now, zombies.estimated_flows());
        }
    }

    /// The active limits of class `class`.
    pub fn capacity(&self, class: usize) -> Option<Capacity> {
        self.classes.get(class).map(|c| c.queue.capacity())
    }

    /// Current length of class `class` in packets and bytes (cheap: no counters copied).
    #[inline]
    pub fn queue_len(&self, class: usize) -> Option<(u32, u64)> {
        self.classes.get(class).map(|c| {
            let (p, b) = held::held_len(c);
            (c.queue.len() + p, c.queue.bytes() + b)
        })
    }

    /// Counters of class `class`, with its current length (a copy of about 1 KB: for
    /// reporting, not per packet; see [`QosEngine::queue_len`]).
    pub fn class_stats(&self, class: usize) -> Option<ClassStats> {
        self.classes.get(class).map(|c| {
            let (p, b) = held::held_len(c);
            ClassStats {
                len_packets: c.queue.len() + p,
                len_bytes: c.queue.bytes() + b,
                ..c.stats
            }
        })
    }

    /// The AQM policy's own counters for class `class` and color `color` (the shared policy's
    /// when the class has one policy for all colors).
    pub fn aqm_stats(&self, class: usize, color: Color) -> Option<AqmStats> {
        self.classes.get(class).map(|c| c.aqm.stats_for(color))
    }

    /// The classifier's counters (unmapped, unparsable, invalid class).
    pub fn classifier_stats(&self) -> ClassifierStats {
        self.classifier_stats
    }

    /// Packets queued in all classes.
    pub fn len(&self) -> usize {
        let queued: usize = self.classes.iter().map(|c| c.queue.len() as usize).sum();
        if self.held_classes {
            queued + self.held_len()
        } else {
            queued
        }
    }

    /// True when the disciplines hold nothing and have discarded nothing the caller has yet
    /// to take (an idle port then has nothing to do at all).
    #[cold]
    fn held_idle(&self) -> bool {
        self.held_len() == 0 && self.discards.is_empty()
    }

    /// Packets held by the disciplines beyond their head slots.
    #[cold]
    fn held_len(&self) -> usize {
        (self.classes.iter())
            .map(|c| held::held_len(c).0 as usize)
            .sum()
    }

    /// True when every class queue is empty.
    pub fn is_empty(&self) -> bool {
        self.classes.iter().all(|c| c.queue.is_empty())
            && (!self.held_classes || self.held_len() == 0)
    }
}
