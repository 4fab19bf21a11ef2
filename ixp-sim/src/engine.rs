//! The discrete-event engine.
//!
//! Time is in core cycles. The event queue holds two kinds of event: a completion signal for a
//! thread (a memory, hash or FIFO command finished) and "run this ME now". Idle cycles are
//! skipped: an ME that computes for `n` cycles advances its local clock by `n` and only comes
//! back to the queue when it next touches shared state (issues a command, hands a packet on),
//! so shared units see commands in global time order.
//!
//! Microengine model (spec 06): each ME runs one thread at a time, non-preemptively; a thread
//! gives the ME up when it waits for a command's completion (a synchronous command waits for
//! its own signal, `wait` for all the thread's outstanding ones) or executes `ctx_arb`; the ME
//! then picks the next ready thread round-robin, after `ctx_swap_cycles` (0 on the IXP1200). A
//! thread that issues to a unit whose command queue is full stalls the whole ME until a slot
//! frees (counted as "stalled"). Cycles with no ready thread are "idle".
//!
//! Unit model: commands are served first-come first-served by one bus. A reference of `w`
//! words holds the bus `command_cycles + w * cycles_per_word` cycles from
//! `start = max(arrival, bus_free)`; its result arrives `latency + (w - 1) * cycles_per_word`
//! cycles after `start`, the latency drawn uniformly from the unit's `[min, max]`. So an
//! unloaded one-word reference takes exactly the configured latency, and a loaded unit queues
//! commands (`start - arrival` is the queueing delay reported).

use crate::params::{MachineConfig, Unit, UnitConfig};
use crate::workload::{Count, Instr, PacketCounts, Program, Workload, MAX_LOOP_DEPTH};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    Rx,
    Tx,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ThreadWait {
    /// Ready to run (or running).
    None,
    /// Waiting for a completion signal due at `Thread::wake_at`: its synchronous command's
    /// (like `ctx_swap` naming that command's signal), or after `wait` the last of its
    /// asynchronous ones.
    Signal,
    /// A transmit thread waiting for a packet.
    Packet,
    /// A receive thread holding a processed packet until the descriptor ring has room
    /// (back-pressure: the MACs then hold further packets, without using the IX bus).
    Ring,
}

#[derive(Clone, Copy, Debug)]
struct Thread {
    me: u32,
    role: Role,
    pc: u32,
    loops: [(u32, u32); MAX_LOOP_DEPTH],
    depth: u8,
    /// Completion cycle of the latest asynchronous command (what `wait` waits for). Their
    /// completions need no event: only a thread that waits gets one, at `wake_at`.
    async_done: u64,
    /// Completion cycle the thread is waiting for.
    wake_at: u64,
    wait: ThreadWait,
    counts: PacketCounts,
    /// Cycle at which this thread started working on its packet.
    pkt_start: u64,
    /// Processing cycles the packet spent in earlier stages.
    prior: u64,
    /// Cycle at which the packet's receive began (decides whether it is measured).
    recv_start: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MeState {
    /// Running `current` or scheduled to run.
    Active,
    Idle,
}

#[derive(Clone, Debug)]
struct Me {
    first_thread: u32,
    threads: u32,
    current: Option<u32>,
    /// Thread that last ran, for the round-robin pick.
    last: u32,
    state: MeState,
    idle_since: u64,
    busy: u64,
    stalled: u64,
    idle: u64,
}

#[derive(Clone, Debug)]
struct UnitState {
    cfg: UnitConfig,
    bus_free: f64,
    /// Start times of queued commands that have not reached the bus yet, oldest first.
    waiting: VecDeque<f64>,
    refs: u64,
    words: u64,
    busy: f64,
    queue_delay: f64,
    latency: f64,
}

impl UnitState {
    /// Drops commands that have reached the bus by `now`; true when the queue is full.
    fn full_at(&mut self, now: u64) -> bool {
        let t = now as f64;
        while self.waiting.front().is_some_and(|&s| s <= t) {
            self.waiting.pop_front();
        }
        self.waiting.len() >= self.cfg.queue_depth as usize
    }

    /// The first cycle at which a queue slot frees (only meaningful when full).
    fn slot_free_at(&self) -> u64 {
        self.waiting.front().map_or(0, |s| s.ceil() as u64)
    }

    /// Issues a command arriving at `now`; returns its completion cycle.
    fn issue(&mut self, now: u64, bytes: u32, rng: &mut Xoshiro256PlusPlus) -> u64 {
        let words = self.cfg.words(bytes);
        let occ = self.cfg.occupancy(bytes);
        let arrival = now as f64;
        let start = self.bus_free.max(arrival);
        self.bus_free = start + occ;
        if start > arrival {
            self.waiting.push_back(start);
        }
        let lat = if self.cfg.latency_min == self.cfg.latency_max {
            self.cfg.latency_min
        } else {
            rng.random_range(self.cfg.latency_min..=self.cfg.latency_max)
        };
        // Sub-cycle float noise must not push an integral completion into the next cycle.
        let extra = (words - 1) as f64 * self.cfg.cycles_per_word;
        let done = (start + (lat as f64 + extra) - 1e-9).ceil() as u64;
        self.refs += 1;
        self.words += words as u64;
        self.busy += occ;
        self.queue_delay += start - arrival;
        self.latency += (done - now) as f64;
        done.max(now + 1)
    }
}

/// Counters of one unit over the measured window.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct UnitCounters {
    pub refs: u64,
    pub words: u64,
    /// Bus-busy cycles.
    pub busy: f64,
    /// Sum over commands of cycles spent waiting for the bus.
    pub queue_delay: f64,
    /// Sum over commands of issue-to-completion cycles.
    pub latency: f64,
}

/// Counters of one ME over the measured window.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct MeCounters {
    pub rx: bool,
    pub busy: u64,
    pub stalled: u64,
    pub idle: u64,
}

/// Raw results of a run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RawResult {
    /// Measured cycles (after warm-up).
    pub cycles: u64,
    pub packets: u64,
    /// Times a receive thread found the descriptor ring full and waited.
    pub ring_full_waits: u64,
    /// Packets whose latency was measured (those received after warm-up).
    pub latency_count: u64,
    pub latency_sum: f64,
    pub latency_max: u64,
    /// Packet latencies in cycles (a sample of the first ones measured, for percentiles).
    pub latency_samples: Vec<u32>,
    pub units: [UnitCounters; Unit::COUNT],
    pub mes: Vec<MeCounters>,
    /// Events processed (speed accounting).
    pub events: u64,
}

const SIGNAL: u64 = 0;
const RUN_ME: u64 = 1;
const ID_BITS: u32 = 24;
const SEQ_SHIFT: u32 = ID_BITS;
const CLASS_SHIFT: u32 = 62;
const MAX_SAMPLES: usize = 200_000;

/// A simulator for one machine and one workload.
pub struct Engine<'a> {
    cfg: &'a MachineConfig,
    rx: &'a Program,
    tx: Option<&'a Program>,
    counts: &'a [PacketCounts],
    next_count: usize,
    threads: Vec<Thread>,
    mes: Vec<Me>,
    units: Vec<UnitState>,
    events: BinaryHeap<Reverse<(u64, u64)>>,
    seq: u64,
    /// Descriptors handed from receive to transmit: (receive start, receive cycles).
    ring: VecDeque<(u64, u64)>,
    idle_tx: VecDeque<u32>,
    blocked_rx: VecDeque<u32>,
    rng: Xoshiro256PlusPlus,
    /// End of the current `run_until` window.
    horizon: u64,
    packets: u64,
    ring_full_waits: u64,
    latency_count: u64,
    latency_sum: f64,
    latency_max: u64,
    latency_samples: Vec<u32>,
    measuring_from: u64,
    n_events: u64,
}

impl<'a> Engine<'a> {
    /// `counts` supplies the per-packet counters, cycled; it must not be empty when the
    /// workload repeats by a counter (an empty slice reads as all zeros).
    pub fn new(cfg: &'a MachineConfig, workload: &'a Workload, counts: &'a [PacketCounts]) -> Self {
        let mut threads = Vec::new();
        let mut mes = Vec::new();
        for me in 0..cfg.mes {
            let role = if me < cfg.rx_mes || workload.tx.is_none() {
                Role::Rx
            } else {
                Role::Tx
            };
            mes.push(Me {
                first_thread: threads.len() as u32,
                threads: cfg.threads_per_me,
                current: None,
                last: cfg.threads_per_me - 1,
                state: MeState::Active,
                idle_since: 0,
                busy: 0,
                stalled: 0,
                idle: 0,
            });
            for _ in 0..cfg.threads_per_me {
                threads.push(Thread {
                    me,
                    role,
                    pc: 0,
                    loops: [(0, 0); MAX_LOOP_DEPTH],
                    depth: 0,
                    async_done: 0,
                    wake_at: 0,
                    wait: ThreadWait::None,
                    counts: PacketCounts::default(),
                    pkt_start: 0,
                    prior: 0,
                    recv_start: 0,
                });
            }
        }
        let mut e = Engine {
            cfg,
            rx: &workload.rx,
            tx: workload.tx.as_ref(),
            counts,
            next_count: 0,
            threads,
            mes,
            units: cfg
                .units
                .iter()
                .map(|&c| UnitState {
                    cfg: c,
                    bus_free: 0.0,
                    waiting: VecDeque::new(),
                    refs: 0,
                    words: 0,
                    busy: 0.0,
                    queue_delay: 0.0,
                    latency: 0.0,
                })
                .collect(),
            events: BinaryHeap::new(),
            seq: 0,
            ring: VecDeque::new(),
            idle_tx: VecDeque::new(),
            blocked_rx: VecDeque::new(),
            rng: Xoshiro256PlusPlus::seed_from_u64(cfg.seed),
            horizon: 0,
            packets: 0,
            ring_full_waits: 0,
            latency_count: 0,
            latency_sum: 0.0,
            latency_max: 0,
            latency_samples: Vec::new(),
            measuring_from: 0,
            n_events: 0,
        };
        for t in 0..e.threads.len() as u32 {
            if e.threads[t as usize].role == Role::Rx {
                e.start_rx_packet(t, 0);
            } else {
                e.threads[t as usize].wait = ThreadWait::Packet;
                e.idle_tx.push_back(t);
            }
        }
        for me in 0..cfg.mes {
            e.push(0, RUN_ME, me);
        }
        e
    }

    fn push(&mut self, time: u64, class: u64, id: u32) {
        self.seq += 1;
        self.events.push(Reverse((
            time,
            (class << CLASS_SHIFT) | (self.seq << SEQ_SHIFT) | id as u64,
        )));
    }

    fn start_rx_packet(&mut self, t: u32, now: u64) {
        let counts = if self.counts.is_empty() {
            PacketCounts::default()
        } else {
            let c = self.counts[self.next_count];
            self.next_count = (self.next_count + 1) % self.counts.len();
            c
        };
        let th = &mut self.threads[t as usize];
        th.counts = counts;
        th.pkt_start = now;
        th.recv_start = now;
        th.prior = 0;
        th.pc = 0;
        th.depth = 0;
    }

    /// Runs `warmup` cycles, clears the counters, then runs `measure` cycles.
    pub fn run(mut self, warmup: u64, measure: u64) -> RawResult {
        self.run_until(warmup);
        let base = self.snapshot(warmup);
        self.measuring_from = warmup;
        self.packets = 0;
        self.ring_full_waits = 0;
        self.latency_count = 0;
        self.latency_sum = 0.0;
        self.latency_max = 0;
        self.latency_samples.clear();
        let end = warmup + measure;
        self.run_until(end);
        let fin = self.snapshot(end);
        let mut units = [UnitCounters::default(); Unit::COUNT];
        for (i, u) in units.iter_mut().enumerate() {
            let (a, b) = (&fin.0[i], &base.0[i]);
            *u = UnitCounters {
                refs: a.refs - b.refs,
                words: a.words - b.words,
                busy: a.busy - b.busy,
                queue_delay: a.queue_delay - b.queue_delay,
                latency: a.latency - b.latency,
            };
        }
        let mes = fin
            .1
            .iter()
            .zip(&base.1)
            .map(|(a, b)| MeCounters {
                rx: a.rx,
                busy: a.busy - b.busy,
                stalled: a.stalled - b.stalled,
                idle: a.idle - b.idle,
            })
            .collect();
        RawResult {
            cycles: measure,
            packets: self.packets,
            ring_full_waits: self.ring_full_waits,
            latency_count: self.latency_count,
            latency_sum: self.latency_sum,
            latency_max: self.latency_max,
            latency_samples: self.latency_samples,
            units,
            mes,
            events: self.n_events,
        }
    }

    fn snapshot(&self, at: u64) -> ([UnitCounters; Unit::COUNT], Vec<MeCounters>) {
        let mut units = [UnitCounters::default(); Unit::COUNT];
        for (u, s) in units.iter_mut().zip(&self.units) {
            *u = UnitCounters {
                refs: s.refs,
                words: s.words,
                busy: s.busy,
                queue_delay: s.queue_delay,
                latency: s.latency,
            };
        }
        let mes = self
            .mes
            .iter()
            .map(|m| MeCounters {
                rx: self.threads[m.first_thread as usize].role == Role::Rx,
                busy: m.busy,
                stalled: m.stalled,
                idle: m.idle
                    + if m.state == MeState::Idle {
                        at.saturating_sub(m.idle_since)
                    } else {
                        0
                    },
            })
            .collect();
        (units, mes)
    }

    fn run_until(&mut self, end: u64) {
        self.horizon = end;
        while let Some(&Reverse((time, key))) = self.events.peek() {
            if time >= end {
                break;
            }
            self.events.pop();
            self.n_events += 1;
            let id = (key & ((1 << ID_BITS) - 1)) as u32;
            if key >> CLASS_SHIFT == SIGNAL {
                self.signal(id, time);
            } else {
                self.run_me(id, time);
            }
        }
    }

    fn signal(&mut self, t: u32, now: u64) {
        let th = &mut self.threads[t as usize];
        if th.wait == ThreadWait::Signal && now >= th.wake_at {
            th.wait = ThreadWait::None;
            let me = th.me;
            self.wake(me, now);
        }
    }

    fn wake(&mut self, me: u32, now: u64) {
        let m = &mut self.mes[me as usize];
        if m.state == MeState::Idle {
            m.idle += now - m.idle_since;
            m.state = MeState::Active;
            self.push(now, RUN_ME, me);
        }
    }

    /// Picks the next ready thread after `last`, round-robin.
    fn pick(&mut self, me: u32) -> Option<u32> {
        let m = &self.mes[me as usize];
        for i in 1..=m.threads {
            let local = (m.last + i) % m.threads;
            let t = m.first_thread + local;
            if self.threads[t as usize].wait == ThreadWait::None {
                return Some(t);
            }
        }
        None
    }

    /// True when the ME may go on to cycle `at` without going through the event queue: no
    /// pending event is due at or before `at` (so nothing it could observe changes meanwhile)
    /// and `at` is inside the current run window. This keeps the common "issue, swap, run the
    /// next ready thread" path off the heap.
    fn inline_ok(&self, at: u64) -> bool {
        at < self.horizon
            && self
                .events
                .peek()
                .is_none_or(|Reverse((time, _))| *time > at)
    }

    /// Continues ME `me` at cycle `at`: inline when safe, else through the event queue.
    /// Returns the new current time when the caller should go on inline.
    fn resume_at(&mut self, me: u32, at: u64) -> Option<u64> {
        if self.inline_ok(at) {
            Some(at)
        } else {
            self.push(at, RUN_ME, me);
            None
        }
    }

    fn run_me(&mut self, me: u32, mut now: u64) {
        'pick: loop {
            let t = match self.mes[me as usize].current {
                Some(t) => t,
                None => match self.pick(me) {
                    Some(t) => {
                        let m = &mut self.mes[me as usize];
                        m.current = Some(t);
                        m.last = t - m.first_thread;
                        t
                    }
                    None => {
                        let m = &mut self.mes[me as usize];
                        m.state = MeState::Idle;
                        m.idle_since = now;
                        return;
                    }
                },
            };
            let mut local = now;
            loop {
                let th = &self.threads[t as usize];
                let program = match th.role {
                    Role::Rx => self.rx,
                    Role::Tx => self.tx.unwrap_or(self.rx),
                };
                let pc = th.pc as usize;
                if pc >= program.instrs.len() {
                    if local > now {
                        match self.resume_at(me, local) {
                            Some(n) => {
                                now = n;
                                continue;
                            }
                            None => return,
                        }
                    }
                    if !self.finish_packet(t, now) {
                        self.mes[me as usize].current = None;
                        match self.resume_at(me, now) {
                            Some(_) => continue 'pick,
                            None => return,
                        }
                    }
                    continue;
                }
                match program.instrs[pc] {
                    Instr::Compute(n) => {
                        local += n as u64;
                        self.mes[me as usize].busy += n as u64;
                        self.threads[t as usize].pc += 1;
                    }
                    Instr::Ref { unit, bytes, sync } => {
                        if local > now {
                            match self.resume_at(me, local) {
                                Some(n) => {
                                    now = n;
                                    continue;
                                }
                                None => return,
                            }
                        }
                        let issue = self.cfg.issue_cycles as u64;
                        let u = &mut self.units[unit.index()];
                        if u.full_at(now + issue) {
                            let retry = u.slot_free_at().max(now + 1);
                            self.mes[me as usize].stalled += retry - now;
                            match self.resume_at(me, retry) {
                                Some(n) => {
                                    now = n;
                                    local = n;
                                    continue;
                                }
                                None => return,
                            }
                        }
                        local += issue;
                        self.mes[me as usize].busy += issue;
                        let done = u.issue(local, bytes, &mut self.rng);
                        let th = &mut self.threads[t as usize];
                        th.pc += 1;
                        if !sync {
                            th.async_done = th.async_done.max(done);
                        } else {
                            th.wait = ThreadWait::Signal;
                            th.wake_at = done;
                            self.push(done, SIGNAL, t);
                            match self.swap_out(me, local) {
                                Some(n) => {
                                    now = n;
                                    continue 'pick;
                                }
                                None => return,
                            }
                        }
                    }
                    Instr::Wait => {
                        let th = &mut self.threads[t as usize];
                        th.pc += 1;
                        if th.async_done > local {
                            th.wait = ThreadWait::Signal;
                            th.wake_at = th.async_done;
                            let at = th.async_done;
                            self.push(at, SIGNAL, t);
                            match self.swap_out(me, local) {
                                Some(n) => {
                                    now = n;
                                    continue 'pick;
                                }
                                None => return,
                            }
                        }
                    }
                    Instr::CtxArb => {
                        self.threads[t as usize].pc += 1;
                        match self.swap_out(me, local) {
                            Some(n) => {
                                now = n;
                                continue 'pick;
                            }
                            None => return,
                        }
                    }
                    Instr::LoopStart { times, end } => {
                        let th = &mut self.threads[t as usize];
                        let n = match times {
                            Count::Fixed(n) => n,
                            Count::Counter(c) => th.counts.get(c),
                        };
                        if n == 0 {
                            th.pc = end + 1;
                        } else {
                            th.loops[th.depth as usize] = (pc as u32, n);
                            th.depth += 1;
                            th.pc += 1;
                        }
                    }
                    Instr::LoopEnd { start } => {
                        let th = &mut self.threads[t as usize];
                        let top = &mut th.loops[th.depth as usize - 1];
                        top.1 -= 1;
                        if top.1 > 0 {
                            th.pc = start + 1;
                        } else {
                            th.depth -= 1;
                            th.pc += 1;
                        }
                    }
                }
            }
        }
    }

    /// Gives the ME up: the next thread runs after the context-swap cost.
    fn swap_out(&mut self, me: u32, local: u64) -> Option<u64> {
        self.mes[me as usize].current = None;
        let at = local + self.cfg.ctx_swap_cycles as u64;
        self.resume_at(me, at)
    }

    /// Ends thread `t`'s packet at `now`; true when the thread keeps the ME and goes on, false
    /// when it now waits (the caller gives the ME up).
    fn finish_packet(&mut self, t: u32, now: u64) -> bool {
        let th = self.threads[t as usize];
        let spent = th.prior + (now - th.pkt_start);
        if th.role == Role::Rx && self.tx.is_some() {
            if let Some(tx) = self.idle_tx.pop_front() {
                self.begin_tx(tx, th.recv_start, spent, now);
                let other_me = self.threads[tx as usize].me;
                self.wake(other_me, now);
            } else if self.ring.len() < self.cfg.tx_ring_packets as usize {
                self.ring.push_back((th.recv_start, spent));
            } else {
                self.ring_full_waits += 1;
                let th = &mut self.threads[t as usize];
                th.prior = spent;
                th.wait = ThreadWait::Ring;
                self.blocked_rx.push_back(t);
                return false;
            }
            self.start_rx_packet(t, now);
            return true;
        }
        self.complete(th.recv_start, spent);
        if th.role == Role::Rx {
            self.start_rx_packet(t, now);
            return true;
        }
        match self.ring.pop_front() {
            Some((recv, prior)) => {
                self.begin_tx(t, recv, prior, now);
                if let Some(r) = self.blocked_rx.pop_front() {
                    let rth = self.threads[r as usize];
                    self.ring.push_back((rth.recv_start, rth.prior));
                    self.start_rx_packet(r, now);
                    self.threads[r as usize].wait = ThreadWait::None;
                    self.wake(rth.me, now);
                }
                true
            }
            None => {
                self.threads[t as usize].wait = ThreadWait::Packet;
                self.idle_tx.push_back(t);
                false
            }
        }
    }

    /// Gives transmit thread `t` a packet received at `recv` that spent `prior` cycles in
    /// receive processing; the time its descriptor waited in the ring is not counted.
    fn begin_tx(&mut self, t: u32, recv: u64, prior: u64, now: u64) {
        let th = &mut self.threads[t as usize];
        th.wait = ThreadWait::None;
        th.pkt_start = now;
        th.prior = prior;
        th.recv_start = recv;
        th.pc = 0;
        th.depth = 0;
    }

    fn complete(&mut self, recv_start: u64, lat: u64) {
        self.packets += 1;
        if recv_start < self.measuring_from {
            // Received during warm-up: counts for throughput, not for latency.
            return;
        }
        self.latency_count += 1;
        self.latency_sum += lat as f64;
        self.latency_max = self.latency_max.max(lat);
        if self.latency_samples.len() < MAX_SAMPLES {
            self.latency_samples.push(lat.min(u32::MAX as u64) as u32);
        }
    }
}
