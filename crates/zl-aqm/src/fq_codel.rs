//! FQ-CoDel, Flow Queue CoDel (Hoeiland-Joergensen, McKenney, Taht, Gettys, Dumazet,
//! RFC 8290), written out in docs/algorithms/fq-codel.md, with CAKE's per-host fairness.
//!
//! - **Flow queues** (RFC 8290 §4.1.1): each arrival is hashed by its flow (or host, see
//!   [`HostIsolation`]) into one of `flows` queues (1024), timestamped and appended.
//! - **Two lists** (§4.2): a queue that becomes active joins the tail of `new_flows` with a
//!   deficit of one `quantum` (1514 bytes); dequeue serves `new_flows` first, so a sparse flow
//!   (a ping, a DNS query, a game) goes ahead of the bulk ones; a queue that spends its deficit
//!   earns a quantum and moves to the tail of `old_flows` (deficit round robin, §4.2).
//! - **CoDel per queue** (§4.3): each queue runs its own [`CodelState`] (target 5 ms, interval
//!   100 ms); a queue found empty leaves its list (a new one first passes through `old_flows`,
//!   so new flows cannot starve old ones, §4.2).
//! - **Overflow** (§4.1): when the buffer limit is passed, packets are dropped from the head of
//!   the queue with the most bytes queued, half of its backlog at most 64 packets at a time
//!   (decided: Linux's batch, which amortises the scan of every queue over the drops).
//!
//! Per-host fairness (CAKE, Hoeiland-Joergensen, Taht, Morton, "Piece of CAKE", 2018): in the
//! `dual-*` and `triple-isolate` modes a queue earns `quantum / n` per round, `n` the number of
//! active queues of its host (the larger of its source's and destination's in
//! `triple-isolate`), so a host with 50 connections gets one host's share, not 50 flows'.
//!
//! Decided (docs/algorithms/fq-codel.md): the buffer limit is the class's (packets and bytes;
//! Linux's 10240 packets is a config away); the one-MTU test of each queue's CoDel uses the
//! whole discipline's backlog (as Linux, which passes its qdisc's backlog); a host is its
//! 16-bit hash in [`PacketMeta`], counted in [`HOST_BUCKETS`] buckets (two hosts in one bucket
//! share its count, as CAKE's set-associative table without its tags); the host-scaled quantum
//! is rounded up, never below one byte.

use serde::{Deserialize, Serialize};
use zl_core::Nanos;
use zl_zombie::Observation;

use crate::codel::{CodelConfig, CodelParams, CodelState, CodelStats, Taken};
use crate::queues::{Departure, Discard, Discipline, Next, Queued, SubQueues};
use crate::{check, AqmConfigError, PacketMeta, Verdict};

/// Buckets the hosts of the per-host modes are counted in.
pub const HOST_BUCKETS: usize = 1024;

/// What a flow queue stands for and how hosts share the link (CAKE's isolation modes).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HostIsolation {
    /// One queue per flow (the packet's flow id), every queue one share (RFC 8290).
    #[default]
    Flows,
    /// One queue per source host.
    Srchost,
    /// One queue per destination host.
    Dsthost,
    /// One queue per source and destination host pair.
    Hosts,
    /// One queue per flow; the source hosts share equally, then each host's flows.
    DualSrchost,
    /// One queue per flow; the destination hosts share equally, then each host's flows.
    DualDsthost,
    /// One queue per flow; a flow's share is divided by the larger of its source's and its
    /// destination's active flows.
    TripleIsolate,
}

impl HostIsolation {
    /// The name used in config files.
    pub fn name(self) -> &'static str {
        match self {
            HostIsolation::Flows => "flows",
            HostIsolation::Srchost => "srchost",
            HostIsolation::Dsthost => "dsthost",
            HostIsolation::Hosts => "hosts",
            HostIsolation::DualSrchost => "dual-srchost",
            HostIsolation::DualDsthost => "dual-dsthost",
            HostIsolation::TripleIsolate => "triple-isolate",
        }
    }

    /// The 64-bit key a packet's queue is hashed from.
    fn queue_key(self, pkt: &PacketMeta) -> u64 {
        let (s, d) = (u64::from(pkt.src_host), u64::from(pkt.dst_host));
        match self {
            HostIsolation::Srchost => s,
            HostIsolation::Dsthost => d | 1 << 16,
            HostIsolation::Hosts => s << 16 | d | 1 << 32,
            _ => pkt.flow.0,
        }
    }

    fn by_src(self) -> bool {
        matches!(
            self,
            HostIsolation::DualSrchost | HostIsolation::TripleIsolate
        )
    }

    fn by_dst(self) -> bool {
        matches!(
            self,
            HostIsolation::DualDsthost | HostIsolation::TripleIsolate
        )
    }
}

/// FQ-CoDel parameters in config units.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct FqCodelParams {
    /// Flow queues, `1 ..= 65536`. Default 1024 (RFC 8290 §5.1).
    pub flows: u32,
    /// Bytes a queue may send per round, `>= 64`. Default 1514 (an Ethernet MTU with its
    /// header, RFC 8290 §5.1).
    pub quantum: u32,
    /// CoDel's target, ms. Default 5.
    pub target_ms: f64,
    /// CoDel's interval, ms. Default 100.
    pub interval_ms: f64,
    /// Mark ECN-capable packets instead of dropping them. Default on (RFC 8290 §5.1).
    pub ecn: bool,
    /// Most packets one overflow drops from the fattest queue, `>= 1`. Default 64 (Linux).
    pub drop_batch: u32,
    /// What a queue stands for and how hosts share (`flows`, `srchost`, `dsthost`, `hosts`,
    /// `dual-srchost`, `dual-dsthost`, `triple-isolate`). Default `flows`.
    pub isolate: HostIsolation,
}

impl Default for FqCodelParams {
    fn default() -> Self {
        FqCodelParams {
            flows: 1024,
            quantum: 1514,
            target_ms: 5.0,
            interval_ms: 100.0,
            ecn: true,
            drop_batch: 64,
            isolate: HostIsolation::Flows,
        }
    }
}

impl FqCodelParams {
    /// Checks the parameters.
    pub fn validate(&self) -> Result<FqCodelConfig, AqmConfigError> {
        if !(1..=65536).contains(&self.flows) {
            return Err(check::err("flows", self.flows, "1 <= flows <= 65536"));
        }
        if self.quantum < 64 {
            return Err(check::err("quantum", self.quantum, "quantum >= 64 bytes"));
        }
        if self.drop_batch == 0 {
            return Err(check::err("drop_batch", self.drop_batch, "drop_batch >= 1"));
        }
        let codel = CodelParams {
            target_ms: self.target_ms,
            interval_ms: self.interval_ms,
            ecn: self.ecn,
        }
        .validate()?;
        Ok(FqCodelConfig {
            flows: self.flows,
            quantum: self.quantum,
            codel,
            drop_batch: self.drop_batch,
            isolate: self.isolate,
        })
    }
}

/// Validated FQ-CoDel constants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FqCodelConfig {
    /// Flow queues.
    pub flows: u32,
    /// DRR quantum, bytes.
    pub quantum: u32,
    /// Each queue's CoDel.
    pub codel: CodelConfig,
    /// Most packets one overflow drops.
    pub drop_batch: u32,
    /// Host isolation mode.
    pub isolate: HostIsolation,
}

/// Counters of an FQ-CoDel discipline, as `tc -s qdisc show` prints them for `fq_codel`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FqCodelStats {
    /// CoDel's drops and marks over every queue, and the largest packet.
    pub codel: CodelStats,
    /// Queues that became active (joined `new_flows`).
    pub new_flow_count: u64,
    /// Packets dropped from the fattest queue because the buffer was full.
    pub drop_overlimit: u64,
}

/// Which list a queue is on.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum List {
    #[default]
    None,
    New,
    Old,
}

const NIL: u32 = u32::MAX;

#[derive(Clone, Copy, Debug)]
struct Flow {
    deficit: i64,
    codel: CodelState,
    list: List,
    /// The next queue on the same list.
    next: u32,
    /// Host buckets counted while the queue is active (`u16::MAX`: none).
    src_bucket: u16,
    dst_bucket: u16,
}

impl Default for Flow {
    fn default() -> Self {
        Flow {
            deficit: 0,
            codel: CodelState::default(),
            list: List::None,
            next: NIL,
            src_bucket: u16::MAX,
            dst_bucket: u16::MAX,
        }
    }
}

/// A singly linked list of queues (head and tail indices).
#[derive(Clone, Copy, Debug)]
struct Chain {
    head: u32,
    tail: u32,
    len: u32,
}

impl Default for Chain {
    fn default() -> Self {
        Chain {
            head: NIL,
            tail: NIL,
            len: 0,
        }
    }
}

/// FQ-CoDel: the discipline of `kind = "fq-codel"`.
#[derive(Debug)]
pub struct FqCodel<T> {
    cfg: FqCodelConfig,
    queues: SubQueues<T>,
    flows: Box<[Flow]>,
    new_flows: Chain,
    old_flows: Chain,
    /// Active queues per source / destination host bucket (host modes only).
    src_hosts: Box<[u32]>,
    dst_hosts: Box<[u32]>,
    cap_packets: u32,
    cap_bytes: u64,
    stats: FqCodelStats,
}

impl<T> FqCodel<T> {
    /// An FQ-CoDel whose queues hold at most `slots` packets together ever (its arena), with
    /// active limits `packets` and `bytes`.
    pub fn new(cfg: FqCodelConfig, slots: u32, packets: u32, bytes: u64) -> Self {
        let hosts = if cfg.isolate.by_src() || cfg.isolate.by_dst() {
            HOST_BUCKETS
        } else {
            0
        };
        FqCodel {
            cfg,
            // One slot beyond the limit: an arrival is queued before an overflow is resolved.
            queues: SubQueues::new(cfg.flows as usize, slots.saturating_add(1)),
            flows: vec![Flow::default(); cfg.flows as usize].into_boxed_slice(),
            new_flows: Chain::default(),
            old_flows: Chain::default(),
            src_hosts: vec![0; hosts].into_boxed_slice(),
            dst_hosts: vec![0; hosts].into_boxed_slice(),
            cap_packets: packets.min(slots),
            cap_bytes: bytes,
            stats: FqCodelStats::default(),
        }
    }

    /// The validated constants.
    pub fn config(&self) -> &FqCodelConfig {
        &self.cfg
    }

    /// The counters.
    pub fn stats(&self) -> &FqCodelStats {
        &self.stats
    }

    /// Queues on `new_flows` and on `old_flows` now (`tc -s`'s `new_flows_len` and
    /// `old_flows_len`).
    pub fn list_lens(&self) -> (u32, u32) {
        (self.new_flows.len, self.old_flows.len)
    }

    /// The queue a packet goes to.
    pub fn queue_of(&self, pkt: &PacketMeta) -> usize {
        // The multiplicative hash's high half, reduced to `flows` by a multiply (Lemire's
        // reduction: no division, uniform for a uniform 32-bit input).
        let h = zl_core::splitmix64(self.cfg.isolate.queue_key(pkt), 1) >> 32;
        ((h * u64::from(self.cfg.flows)) >> 32) as usize
    }

    /// Takes over `old`'s counters (a reconfiguration between FQ-CoDel settings; the queues
    /// are re-placed by [`Discipline::adopt`]).
    pub fn inherit_state(&mut self, old: &FqCodel<T>) {
        self.stats = old.stats;
    }

    fn push_chain(&mut self, which: List, q: u32) {
        let flow = &mut self.flows[q as usize];
        flow.list = which;
        flow.next = NIL;
        let chain = match which {
            List::New => &mut self.new_flows,
            List::Old => &mut self.old_flows,
            List::None => return,
        };
        if chain.tail == NIL {
            chain.head = q;
        } else {
            self.flows[chain.tail as usize].next = q;
        }
        chain.tail = q;
        chain.len += 1;
    }

    /// Removes the head of `which` (the caller knows it is `q`).
    fn pop_chain(&mut self, which: List) -> Option<u32> {
        let chain = match which {
            List::New => &mut self.new_flows,
            List::Old => &mut self.old_flows,
            List::None => return None,
        };
        let q = chain.head;
        if q == NIL {
            return None;
        }
        chain.head = self.flows[q as usize].next;
        if chain.head == NIL {
            chain.tail = NIL;
        }
        chain.len -= 1;
        let flow = &mut self.flows[q as usize];
        flow.next = NIL;
        flow.list = List::None;
        Some(q)
    }

    /// A queue becomes active: counted on its hosts (host modes).
    fn activate_hosts(&mut self, q: usize, pkt: &PacketMeta) {
        let flow = &mut self.flows[q];
        if self.cfg.isolate.by_src() {
            let b = usize::from(pkt.src_host) % HOST_BUCKETS;
            flow.src_bucket = b as u16;
            self.src_hosts[b] += 1;
        }
        if self.cfg.isolate.by_dst() {
            let b = usize::from(pkt.dst_host) % HOST_BUCKETS;
            flow.dst_bucket = b as u16;
            self.dst_hosts[b] += 1;
        }
    }

    fn deactivate_hosts(&mut self, q: usize) {
        let flow = &mut self.flows[q];
        if flow.src_bucket != u16::MAX {
            let b = usize::from(flow.src_bucket);
            self.src_hosts[b] = self.src_hosts[b].saturating_sub(1);
            flow.src_bucket = u16::MAX;
        }
        if flow.dst_bucket != u16::MAX {
            let b = usize::from(flow.dst_bucket);
            self.dst_hosts[b] = self.dst_hosts[b].saturating_sub(1);
            flow.dst_bucket = u16::MAX;
        }
    }

    /// The bytes queue `q` earns per round: the quantum, divided by its host's active queues
    /// in the host-fair modes (rounded up).
    fn quantum_of(&self, q: usize) -> i64 {
        let flow = &self.flows[q];
        let mut load = 1;
        if flow.src_bucket != u16::MAX {
            load = load.max(self.src_hosts[usize::from(flow.src_bucket)]);
        }
        if flow.dst_bucket != u16::MAX {
            load = load.max(self.dst_hosts[usize::from(flow.dst_bucket)]);
        }
        i64::from(self.cfg.quantum.div_ceil(load.max(1)))
    }

    /// Places a packet in its queue and makes the queue active (no decision).
    fn place(&mut self, q: usize, entry: Queued<T>) -> Result<(), Queued<T>> {
        let meta = entry.meta;
        self.queues.push_back(q, entry)?;
        self.stats.codel.maxpacket = self.stats.codel.maxpacket.max(meta.len);
        if self.flows[q].list == List::None {
            self.activate_hosts(q, &meta);
            self.push_chain(List::New, q as u32);
            self.stats.new_flow_count += 1;
            self.flows[q].deficit = self.quantum_of(q);
        }
        Ok(())
    }

    /// The buffer is past its limits: drops from the head of the fattest queue, half its
    /// bytes at most `drop_batch` packets (Linux `fq_codel_drop`).
    fn drop_from_fattest(&mut self, discard: &mut impl FnMut(Queued<T>, Discard)) {
        let mut fattest = 0;
        let mut most = 0;
        for q in 0..self.queues.queues() {
            let b = self.queues.queue(q).bytes();
            if b > most {
                most = b;
                fattest = q;
            }
        }
        let threshold = most / 2;
        let mut dropped_bytes = 0;
        let mut n = 0;
        while n < self.cfg.drop_batch && dropped_bytes < threshold.max(1) {
            let Some(entry) = self.queues.pop_front(fattest) else {
                break;
            };
            dropped_bytes += u64::from(entry.meta.len);
            n += 1;
            self.stats.drop_overlimit += 1;
            discard(entry, Discard::Overflow);
        }
    }

    fn over_limit(&self) -> bool {
        self.queues.len() > self.cap_packets || self.queues.bytes() > self.cap_bytes
    }
}

impl<T> Discipline<T> for FqCodel<T> {
    fn enqueue<R: rand::RngCore + ?Sized>(
        &mut self,
        now: Nanos,
        pkt: &PacketMeta,
        _observed: Option<&Observation>,
        item: T,
        _rng: &mut R,
        _mark: impl FnOnce(&mut T),
        discard: &mut impl FnMut(Queued<T>, Discard),
    ) -> Result<Verdict, (Verdict, T)> {
        let q = self.queue_of(pkt);
        let entry = Queued {
            item,
            meta: *pkt,
            enqueued_at: now,
        };
        if let Err(e) = self.place(q, entry) {
            // The arena is full only when the limits were raised past it: a tail drop.
            return Err((Verdict::TailDrop, e.item));
        }
        if self.over_limit() {
            self.drop_from_fattest(discard);
        }
        Ok(Verdict::Enqueue)
    }

    fn dequeue<R: rand::RngCore + ?Sized>(
        &mut self,
        now: Nanos,
        _rng: &mut R,
        discard: &mut impl FnMut(Queued<T>, Discard),
    ) -> Next<T> {
        loop {
            let (which, q) = if self.new_flows.head != NIL {
                (List::New, self.new_flows.head)
            } else if self.old_flows.head != NIL {
                (List::Old, self.old_flows.head)
            } else {
                return Next::Empty;
            };
            let qi = q as usize;
            if self.flows[qi].deficit <= 0 {
                let earned = self.quantum_of(qi);
                self.flows[qi].deficit += earned;
                self.pop_chain(which);
                self.push_chain(List::Old, q);
                continue;
            }
            let cfg = self.cfg.codel;
            let mtu = self.stats.codel.maxpacket;
            let queues = &mut self.queues;
            let mut codel = self.flows[qi].codel;
            let taken = codel.dequeue(
                &cfg,
                now,
                mtu,
                &mut self.stats.codel,
                || {
                    let queued = queues.pop_front(qi)?;
                    Some(Taken {
                        queued,
                        bytes_left: queues.bytes(),
                    })
                },
                discard,
            );
            self.flows[qi].codel = codel;
            match taken {
                None => {
                    self.pop_chain(which);
                    if which == List::New && self.old_flows.head != NIL {
                        self.push_chain(List::Old, q);
                    } else {
                        self.deactivate_hosts(qi);
                    }
                }
                Some((queued, mark)) => {
                    self.flows[qi].deficit -= i64::from(queued.meta.len);
                    return Next::Packet(Departure { queued, mark });
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
        self.cap_packets = packets.min(self.queues.capacity().saturating_sub(1));
        self.cap_bytes = bytes;
    }

    fn adopt(&mut self, q: Queued<T>) -> Result<(), Queued<T>> {
        let idx = self.queue_of(&q.meta);
        self.place(idx, q)
    }

    fn drain(&mut self, mut f: impl FnMut(Queued<T>)) {
        for q in 0..self.queues.queues() {
            while let Some(e) = self.queues.pop_front(q) {
                f(e);
            }
        }
        while self.pop_chain(List::New).is_some() {}
        while self.pop_chain(List::Old).is_some() {}
        for q in 0..self.flows.len() {
            self.deactivate_hosts(q);
        }
    }
}
