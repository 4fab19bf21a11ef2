//! The receive side's stages, each run over a whole burst before the next starts, as VPP's
//! graph nodes and DPDK's pipeline stages run over a vector of packets: forward the burst
//! ([`forward_stage`]: parse, route, rewrite), then observe it in its egress ports' Zombie
//! Lists ([`observe_stage`]: runs of one port through `ZombieList::observe_batch`), then the
//! engine's own last stage (the single-thread loop admits each packet to its egress port, a
//! threaded receive worker pushes it on its egress port's ring). Each stage is a plain loop
//! over the burst in its order; what one stage learns of a packet for the next lies in the
//! burst's [`Lanes`], side by side with the packet in the batch.
//!
//! decided: a stage's decisions do not depend on how packets are grouped. The lists'
//! observations draw from a random stream of their own and the admissions from another (the
//! threaded router's receive and transmit workers already did), every stage keeps the
//! packets' order, and nothing a stage reads is written by a later stage of the same burst
//! (forwarding reads no list or queue; an observation reads only its list; an admission reads
//! its packet's observation and its own queues). So a burst taken stage by stage decides as
//! the same packets taken one at a time through all the stages (`tests/burst_reference.rs`
//! holds the two against each other; [`Dataplane::set_stage_width`] runs the second). Two
//! things may move, neither a decision: an ICMP error the forward stage originates joins its
//! port's transmit batch ahead of the burst's cut-through packets rather than between them,
//! and the named-flows table (metrics only) compares F as the list stands after the burst's
//! observations when it claims a way.
//!
//! [`Dataplane::set_stage_width`]: crate::dataplane::Dataplane::set_stage_width

use zl_aqm::{IsolateBy, PacketMeta};
use zl_core::{FlowId, Nanos};
use zl_port::{Batch, PacketBuf, BATCH_CAPACITY};
use zl_zombie::{Observation, ZombieList};

use crate::egress::observe_key;
use crate::forward::{Forwarder, Kept};
use crate::stats::DropCause;

/// What the stages of one burst know of its packets, lane `i` for the batch's packet `i`.
/// Fixed arrays of a full burst, so a stage's loop zips them with the batch (no bounds
/// check, no growth test) and nothing is allocated per burst.
pub(crate) struct Lanes {
    /// Each kept packet's metadata and headers ([`forward_stage`]).
    pub kept: [Kept; BATCH_CAPACITY],
    /// Each packet's observation of its egress port's list ([`observe_stage`]); meaningful
    /// only where that port has a list.
    pub obs: [Observation; BATCH_CAPACITY],
    /// The keys a run of packets is observed by (their flows, or their hosts).
    keys: [FlowId; BATCH_CAPACITY],
    /// The packets the forward stage discarded, with why, for the engine's reject path.
    pub discarded: Vec<(PacketBuf, DropCause)>,
}

impl Default for Lanes {
    fn default() -> Self {
        let meta = PacketMeta::default();
        let obs = Observation {
            hit: false,
            p: 0.0,
            occurrence: 0,
            total: 0,
        };
        Lanes {
            kept: [(meta, None); BATCH_CAPACITY],
            obs: [obs; BATCH_CAPACITY],
            keys: [FlowId(0); BATCH_CAPACITY],
            discarded: Vec::with_capacity(BATCH_CAPACITY),
        }
    }
}

/// The forward stage: every packet of `burst` through [`Forwarder::forward_in_place`], in
/// order. A kept packet's metadata and headers go to its lane; a discarded one is taken out
/// of the burst into `lanes.discarded` (with its cause), and the burst and its lanes are
/// closed up behind it, so the next stages see only kept packets, in their order.
#[inline(never)]
pub(crate) fn forward_stage(forwarder: &Forwarder, burst: &mut Batch, lanes: &mut Lanes) {
    let mut discards = false;
    for (buf, lane) in burst.iter_mut().zip(lanes.kept.iter_mut()) {
        if let Err(cause) = forwarder.forward_in_place(buf, lane) {
            lanes.discarded.push((buf.take(), cause));
            discards = true;
        }
    }
    if discards {
        close_up(burst, lanes);
    }
}

/// Drops the hollow buffers the forward stage left in `burst` and moves the lanes of the
/// packets after them along with them.
#[cold]
#[inline(never)]
fn close_up(burst: &mut Batch, lanes: &mut Lanes) {
    let mut to = 0;
    for (from, buf) in burst.iter().enumerate() {
        if !buf.is_hollow() {
            lanes.kept[to] = lanes.kept[from];
            to += 1;
        }
    }
    burst.remove_hollow();
}

/// The observe stage: each run of consecutive packets of `burst` bound for one port whose
/// `list_of` is a list (with what it observes a packet by) is observed in it in one
/// `ZombieList::observe_batch` (the run's table buckets loaded up front, P(t) updated once
/// per run), in the burst's order, drawing from `rng`. Lane `i`'s observation is the
/// packet's where its port has a list.
#[inline(never)]
pub(crate) fn observe_stage<'a, R: rand::RngCore + ?Sized>(
    now: Nanos,
    rng: &mut R,
    burst: &Batch,
    lanes: &mut Lanes,
    list_of: impl Fn(usize) -> Option<(&'a ZombieList, IsolateBy)>,
) {
    let bufs = burst.as_slice();
    let n = bufs.len().min(BATCH_CAPACITY);
    let mut start = 0;
    while start < n {
        let port = bufs[start].out_port;
        let end = start
            + 1
            + (bufs[start + 1..n].iter())
                .take_while(|b| b.out_port == port)
                .count();
        if let Some((list, by)) = list_of(port as usize) {
            observe_run(now, rng, &bufs[start..end], lanes, start, list, by);
        }
        start = end;
    }
}

/// [`observe_stage`] of one run, `bufs` lying from lane `start` on.
#[inline(always)]
fn observe_run<R: rand::RngCore + ?Sized>(
    now: Nanos,
    rng: &mut R,
    bufs: &[PacketBuf],
    lanes: &mut Lanes,
    start: usize,
    list: &ZombieList,
    by: IsolateBy,
) {
    let end = start + bufs.len();
    let keys = &mut lanes.keys[start..end];
    let kept = &lanes.kept[start..end];
    match by {
        IsolateBy::Flow => {
            for (key, (meta, _)) in keys.iter_mut().zip(kept) {
                *key = meta.flow;
            }
        }
        by => {
            for ((key, (meta, _)), buf) in keys.iter_mut().zip(kept).zip(bufs) {
                *key = observe_key(by, meta.flow, buf);
            }
        }
    }
    list.observe_batch(keys, now, rng, &mut lanes.obs[start..end]);
}
