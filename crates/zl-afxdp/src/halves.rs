//! The halves of an [`crate::AfXdpPort`]: one [`AfXdpRx`] per configured queue
//! (that queue's RX + fill rings) and one [`AfXdpTx`] (the first queue's TX + completion rings
//! and its wakeup), each owned by its own thread with no lock on the packet path. The port
//! itself is these halves driven from one thread.
//!
//! What the halves share ([`Shared`]): the XDP attachment, and the state of an interface that
//! went away (`on_gone = "wait"`, see [`crate::port`]). A half reads one atomic per burst (the
//! attachment's generation, written only when the interface goes or comes back); the lock
//! around the rest is taken only then, and by at most one look for the interface per
//! [`REATTACH_INTERVAL`].
//!
//! decided: whichever half first finds the interface gone (a receive health check, a transmit
//! wakeup answered ENXIO) marks the attachment gone for all: the XDP link is closed at once,
//! and every half retires its own part (counting what it leaves on its rings) the next time
//! it is polled. While gone, whichever half is polled after [`REATTACH_INTERVAL`] looks for
//! the interface and, when it is back, opens the new attachment for every half: the new
//! parts wait in [`State`]'s slots until their halves pick them up. So a port whose transmit
//! half is idle re-attaches all the same, and no half ever blocks on another.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};

use zl_core::Nanos;
use zl_port::{Batch, BufPool, PortCounters, PortError, Readiness, RxHalf, RxTally, TxHalf};

use crate::bpf::XdpAttachment;
use crate::netdev::{interface_index, interface_mac, interface_mtu};
use crate::socket::{XskRx, XskSocket, XskTx};
use crate::{AfXdpConfig, AfXdpError, OnGone, XskCounters, XskKernelStats};

/// Wakeups [`TxHalf::flush`] spends, at most, on frames the kernel will not take.
const FLUSH_MAX_IDLE_KICKS: u32 = 64;

/// `last_look` before the first look.
const NEVER: u64 = u64::MAX;

/// How often a port waiting for its interface (`on_gone = "wait"`) looks for it again.
pub const REATTACH_INTERVAL: Nanos = Nanos::from_millis(100);

/// Attaches to `cfg`'s interface: the program (unless `attach_program` is off) and one socket
/// per configured queue, registered in its XSKMAP; with the interface's index.
pub(crate) fn attach(
    cfg: &AfXdpConfig,
) -> Result<(Option<XdpAttachment>, Vec<XskSocket>, u32), AfXdpError> {
    let ifindex = interface_index(&cfg.ifname)?;
    let attachment = if cfg.attach_program {
        let max_queue = cfg.queues.iter().copied().max().unwrap_or(0);
        Some(XdpAttachment::attach(
            &cfg.ifname,
            ifindex,
            cfg.xdp_mode,
            cfg.redirect,
            max_queue + 1,
        )?)
    } else {
        None
    };
    let mut sockets = Vec::with_capacity(cfg.queues.len());
    for (i, &q) in cfg.queues.iter().enumerate() {
        // The port transmits on its first queue; the others are receive-only.
        let s = XskSocket::open(cfg, ifindex, q, i == 0)?;
        if let Some(a) = &attachment {
            a.register(q, s.fd())?;
        }
        sockets.push(s);
    }
    Ok((attachment, sockets, ifindex))
}

/// What a port's halves share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) cfg: AfXdpConfig,
    pub(crate) name: String,
    /// Bumped, under `state`'s lock, whenever the attachment goes or a new one is made: a half
    /// whose last seen generation differs takes the lock and picks up the change.
    generation: AtomicU64,
    /// Whether the port is attached (written under `state`'s lock).
    attached: AtomicBool,
    /// The interface's index at the last (re-)attach.
    ifindex: AtomicU32,
    /// Times the interface went away, and times the port attached to it again.
    gone_events: AtomicU64,
    reattached: AtomicU64,
    /// Port time (ns) of the last look for the interface while gone; [`NEVER`] before it.
    last_look: AtomicU64,
    state: Mutex<State>,
}

/// The part of [`Shared`] that changes only when the interface goes or comes back.
#[derive(Debug)]
pub(crate) struct State {
    /// The current attachment's number (1 for the one [`crate::AfXdpPort::open`] made).
    epoch: u64,
    /// The program and its XSKMAP; `None` while gone (and for a transmit-only port).
    attachment: Option<XdpAttachment>,
    /// A new attachment's parts, one per queue, until their halves pick them up.
    rx_slots: Vec<Slot<XskRx>>,
    tx_slot: Slot<XskTx>,
    /// The last reason a re-attach failed (logged once per distinct reason).
    last_reattach_error: Option<String>,
}

/// A part of a new attachment waiting for its half.
#[derive(Debug)]
pub(crate) struct Slot<P> {
    part: Option<(u64, P)>,
    /// What parts displaced from this slot, never picked up, left behind (a half not polled
    /// across a whole gone and back): added to the half's own when it next syncs.
    displaced: Retired,
}

impl<P> Default for Slot<P> {
    fn default() -> Self {
        Slot {
            part: None,
            displaced: Retired::default(),
        }
    }
}

/// The counters of a half's parts given up with their attachment.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Retired {
    pub(crate) socket: XskCounters,
    pub(crate) kernel: XskKernelStats,
}

impl Retired {
    fn add(&mut self, r: &Retired) {
        self.socket.add(&r.socket);
        self.kernel.add(&r.kernel);
    }
}

/// The socket part a half owns: [`XskRx`] or [`XskTx`].
pub(crate) trait Part: Sized + Send {
    /// This half's slot for parts of a new attachment.
    fn slot(state: &mut State, queue: usize) -> &mut Slot<Self>;
    /// Gives the part up with its attachment: counts what it leaves on its rings, adds its
    /// counters to `into`, and closes it.
    fn retire(self, into: &mut Retired);
    /// What the port does with the part before reporting the interface gone (`on_gone =
    /// "exit"`).
    fn on_exit(&mut self) {}
}

impl Part for XskRx {
    fn slot(state: &mut State, queue: usize) -> &mut Slot<Self> {
        &mut state.rx_slots[queue]
    }
    fn retire(mut self, into: &mut Retired) {
        self.abandon_rx();
        into.socket.add(&self.counters());
        if let Ok(k) = self.kernel_stats() {
            into.kernel.add(&k);
        }
    }
}

impl Part for XskTx {
    fn slot(state: &mut State, _queue: usize) -> &mut Slot<Self> {
        &mut state.tx_slot
    }
    fn retire(mut self, into: &mut Retired) {
        self.abandon_queued();
        into.socket.add(&self.counters());
    }
    fn on_exit(&mut self) {
        // What is still on the TX ring will never leave: counted, not lost.
        self.abandon_queued();
    }
}

impl Shared {
    /// The shared state of a port just attached with `attachment` on `ifindex`.
    pub(crate) fn new(
        cfg: &AfXdpConfig,
        name: &str,
        attachment: Option<XdpAttachment>,
        ifindex: u32,
    ) -> Arc<Shared> {
        Arc::new(Shared {
            cfg: cfg.clone(),
            name: name.to_owned(),
            generation: AtomicU64::new(0),
            attached: AtomicBool::new(true),
            ifindex: AtomicU32::new(ifindex),
            gone_events: AtomicU64::new(0),
            reattached: AtomicU64::new(0),
            last_look: AtomicU64::new(NEVER),
            state: Mutex::new(State {
                epoch: 1,
                attachment,
                rx_slots: (0..cfg.queues.len()).map(|_| Slot::default()).collect(),
                tx_slot: Slot::default(),
                last_reattach_error: None,
            }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A half that panicked while holding the lock leaves the state as consistent as any
        // other point between two of its steps: use it.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Relaxed loads below: each value is a report or a hint to take the lock, which orders
    /// everything the halves act on.
    pub(crate) fn is_attached(&self) -> bool {
        self.attached.load(Ordering::Relaxed)
    }

    pub(crate) fn ifindex(&self) -> u32 {
        self.ifindex.load(Ordering::Relaxed)
    }

    pub(crate) fn gone_and_reattached(&self) -> (u64, u64) {
        (
            self.gone_events.load(Ordering::Relaxed),
            self.reattached.load(Ordering::Relaxed),
        )
    }

    /// Marks attachment `epoch` gone, if it is still the current one: closes the XDP link,
    /// counts the event, logs once. The halves retire their parts when they next sync.
    #[cold]
    fn mark_gone(&self, epoch: u64, now: Nanos, detail: &str) {
        let mut st = self.lock();
        if !self.is_attached() || st.epoch != epoch {
            return;
        }
        st.attachment = None;
        st.last_reattach_error = None;
        self.attached.store(false, Ordering::Relaxed);
        self.gone_events.fetch_add(1, Ordering::Relaxed);
        self.last_look.store(now.as_nanos(), Ordering::Relaxed);
        self.generation.fetch_add(1, Ordering::Relaxed);
        tracing::warn!(
            port = %self.name,
            ifname = %self.cfg.ifname,
            "AF_XDP port `{}`: interface `{}` is gone ({detail}); waiting for it to come back \
             (on_gone = \"wait\"), transmitted frames are counted as tx_link_gone drops",
            self.name,
            self.cfg.ifname
        );
    }

    /// While gone: at most once per [`REATTACH_INTERVAL`] of `now` (and by one half at a
    /// time), attaches again if an interface of the configured name exists, leaving the new
    /// parts in the slots.
    #[cold]
    fn look_for_interface(&self, now: Nanos) {
        let due = |last: u64| last == NEVER || now.saturating_sub(Nanos(last)) >= REATTACH_INTERVAL;
        if !due(self.last_look.load(Ordering::Relaxed)) {
            return;
        }
        let mut st = match self.state.try_lock() {
            Ok(g) => g,
            Err(TryLockError::Poisoned(g)) => g.into_inner(),
            // Another half is looking (or syncing): it will do.
            Err(TryLockError::WouldBlock) => return,
        };
        if self.is_attached() || !due(self.last_look.load(Ordering::Relaxed)) {
            return;
        }
        self.last_look.store(now.as_nanos(), Ordering::Relaxed);
        if interface_index(&self.cfg.ifname).is_err() {
            return;
        }
        match attach(&self.cfg) {
            Ok((attachment, sockets, ifindex)) => {
                st.epoch += 1;
                let epoch = st.epoch;
                for (queue, socket) in sockets.into_iter().enumerate() {
                    let (rx, tx) = socket.split();
                    put(&mut st.rx_slots[queue], epoch, rx);
                    if let Some(tx) = tx {
                        put(&mut st.tx_slot, epoch, tx);
                    }
                }
                st.attachment = attachment;
                self.ifindex.store(ifindex, Ordering::Relaxed);
                self.attached.store(true, Ordering::Relaxed);
                self.reattached.fetch_add(1, Ordering::Relaxed);
                self.generation.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(
                    port = %self.name,
                    ifname = %self.cfg.ifname,
                    ifindex,
                    "AF_XDP port `{}`: interface `{}` is back (ifindex {ifindex}); re-attached",
                    self.name,
                    self.cfg.ifname,
                );
            }
            Err(e) => {
                let reason = e.to_string();
                if st.last_reattach_error.as_deref() != Some(reason.as_str()) {
                    tracing::warn!(
                        port = %self.name,
                        "AF_XDP port `{}`: interface `{}` exists again but cannot be attached \
                         yet ({reason}); retrying every {} ms",
                        self.name,
                        self.cfg.ifname,
                        REATTACH_INTERVAL.as_nanos() / 1_000_000
                    );
                    st.last_reattach_error = Some(reason);
                }
            }
        }
    }
}

/// Leaves `part` of attachment `epoch` in `slot`, retiring a part of an older attachment that
/// its half never picked up.
fn put<P: Part>(slot: &mut Slot<P>, epoch: u64, part: P) {
    if let Some((_, stale)) = slot.part.replace((epoch, part)) {
        stale.retire(&mut slot.displaced);
    }
}

/// What both halves do with their part of the attachment.
#[derive(Debug)]
pub(crate) struct Side<P> {
    pub(crate) shared: Arc<Shared>,
    /// The configured queue's position in `cfg.queues` (0 for the transmit half).
    queue: usize,
    /// The generation of the attachment state this half last synced with.
    seen: u64,
    /// The part of the current attachment, and that attachment's number.
    pub(crate) live: Option<P>,
    epoch: u64,
    pub(crate) retired: Retired,
}

impl<P: Part> Side<P> {
    pub(crate) fn new(shared: Arc<Shared>, queue: usize, part: P) -> Self {
        Side {
            shared,
            queue,
            seen: 0,
            live: Some(part),
            epoch: 1,
            retired: Retired::default(),
        }
    }

    /// Whether the half has a part to use; first picks up a change of the attachment, and
    /// while gone looks for the interface (see [`Shared::look_for_interface`]). The usual
    /// case is one relaxed load and two branches, inlined.
    #[inline]
    pub(crate) fn ready(&mut self, now: Nanos) -> bool {
        // Relaxed: a hint to take the lock, which orders the state `sync` reads.
        if self.shared.generation.load(Ordering::Relaxed) != self.seen {
            self.sync();
        }
        self.live.is_some() || self.look(now)
    }

    /// Whether the attachment changed since this half last synced.
    pub(crate) fn stale(&self) -> bool {
        self.shared.generation.load(Ordering::Relaxed) != self.seen
    }

    #[cold]
    fn look(&mut self, now: Nanos) -> bool {
        self.shared.look_for_interface(now);
        if self.stale() {
            self.sync();
        }
        self.live.is_some()
    }

    /// Catches up with the attachment: retires a part of an attachment that is gone, takes
    /// the current attachment's part from the slot.
    #[cold]
    pub(crate) fn sync(&mut self) {
        let shared = self.shared.clone();
        let mut st = shared.lock();
        let attached = shared.is_attached();
        if self.live.is_some() && (!attached || self.epoch != st.epoch) {
            if let Some(part) = self.live.take() {
                part.retire(&mut self.retired);
            }
        }
        let epoch = st.epoch;
        let slot = P::slot(&mut st, self.queue);
        self.retired.add(&std::mem::take(&mut slot.displaced));
        if let Some((e, part)) = slot.part.take() {
            if attached && e == epoch && self.live.is_none() {
                self.live = Some(part);
                self.epoch = e;
            } else {
                part.retire(&mut self.retired);
            }
        }
        self.seen = shared.generation.load(Ordering::Relaxed);
    }

    /// An error from the part: with `on_gone = "wait"` a gone interface marks the attachment
    /// gone and is not an error; anything else becomes a [`PortError`].
    #[cold]
    pub(crate) fn on_error(&mut self, now: Nanos, e: AfXdpError) -> Result<(), PortError> {
        let cfg = &self.shared.cfg;
        match e {
            AfXdpError::InterfaceGone { detail, .. } if cfg.on_gone == OnGone::Wait => {
                self.shared.mark_gone(self.epoch, now, &detail);
                self.sync();
                Ok(())
            }
            AfXdpError::InterfaceGone { detail, .. } => {
                if let Some(part) = self.live.as_mut() {
                    part.on_exit();
                }
                Err(PortError::InterfaceGone {
                    port: self.shared.name.clone(),
                    detail: format!(
                        "{detail}; to wait for `{}` to come back instead of stopping, set \
                         on_gone = \"wait\" in the port's [ports.af_xdp] table",
                        cfg.ifname
                    ),
                })
            }
            other => Err(PortError::Io {
                port: self.shared.name.clone(),
                context: "AF_XDP",
                source: std::io::Error::other(other.to_string()),
            }),
        }
    }
}

/// A receive half: one queue's socket part ([`XskRx`]), across re-attachments.
#[derive(Debug)]
pub struct AfXdpRx {
    pub(crate) side: Side<XskRx>,
    /// The port's index in the data plane's port table (stamped on received buffers).
    index: u16,
    rx_no_buffer: u64,
    rx_too_long: u64,
}

impl AfXdpRx {
    pub(crate) fn new(side: Side<XskRx>, index: u16) -> Self {
        AfXdpRx {
            side,
            index,
            rx_no_buffer: 0,
            rx_too_long: 0,
        }
    }

    /// The RX queue this half receives on.
    pub fn queue_id(&self) -> u32 {
        self.side.shared.cfg.queues[self.side.queue]
    }

    /// Whether this half has a socket of the current attachment (false while the interface
    /// is gone, and after a re-attach until the half is next polled).
    pub fn is_attached(&self) -> bool {
        self.side.live.is_some()
    }

    /// The current socket's fd (to poll(2) on), none while the interface is gone.
    pub fn fd(&self) -> Option<std::os::fd::RawFd> {
        self.side.live.as_ref().map(XskRx::fd)
    }

    /// The current socket's receive part, none while the interface is gone.
    pub fn socket(&mut self) -> Option<&mut XskRx> {
        self.side.live.as_mut()
    }

    /// This queue's socket counters, over the current and every retired attachment.
    pub fn socket_counters(&self) -> XskCounters {
        let mut t = self.side.retired.socket;
        if let Some(s) = &self.side.live {
            t.add(&s.counters());
        }
        t
    }

    /// The kernel's counters for this queue's sockets, current and retired.
    pub fn kernel_stats(&self) -> Result<XskKernelStats, AfXdpError> {
        let mut t = self.side.retired.kernel;
        if let Some(s) = &self.side.live {
            t.add(&s.kernel_stats()?);
        }
        Ok(t)
    }
}

impl RxHalf for AfXdpRx {
    fn name(&self) -> &str {
        &self.side.shared.name
    }

    fn recv(
        &mut self,
        now: Nanos,
        pool: &mut BufPool,
        batch: &mut Batch,
    ) -> Result<usize, PortError> {
        let room = batch.room();
        if room == 0 || !self.side.ready(now) {
            return Ok(0);
        }
        let Some(socket) = self.side.live.as_mut() else {
            return Ok(0);
        };
        let index = self.index;
        let mut tally = RxTally::default();
        let r = socket.recv_with(room, |frame| tally.copy_in(frame, pool, batch, now, index));
        self.rx_no_buffer += tally.no_buffer;
        self.rx_too_long += tally.too_long;
        if let Err(e) = r {
            self.side.on_error(now, e)?;
        }
        Ok(tally.added)
    }

    fn readiness(&self) -> Readiness {
        Readiness::Live
    }

    fn counters(&self) -> PortCounters {
        let x = self.socket_counters();
        // Frames the kernel could not put on a full RX ring or found no fill chunk for, and
        // frames left unread on the ring of a socket given up with its interface.
        let mut rx_ring_full = x.rx_abandoned;
        if let Ok(k) = self.kernel_stats() {
            rx_ring_full += k.rx_ring_full + k.rx_fill_ring_empty_descs;
        }
        PortCounters {
            rx_packets: x.rx_packets - self.rx_no_buffer - self.rx_too_long,
            rx_bytes: x.rx_bytes,
            rx_no_buffer: self.rx_no_buffer,
            rx_too_long: self.rx_too_long,
            rx_ring_full,
            ..PortCounters::default()
        }
    }
}

/// The transmit half: the first queue's socket part ([`XskTx`]), across re-attachments.
#[derive(Debug)]
pub struct AfXdpTx {
    pub(crate) side: Side<XskTx>,
    /// Frames handed over for transmit while the interface was gone.
    tx_link_gone: u64,
}

impl AfXdpTx {
    pub(crate) fn new(side: Side<XskTx>) -> Self {
        AfXdpTx {
            side,
            tx_link_gone: 0,
        }
    }

    /// The current socket's transmit part, none while the interface is gone.
    pub fn socket(&mut self) -> Option<&mut XskTx> {
        self.side.live.as_mut()
    }

    /// Frames handed over for transmit while the interface was gone (`on_gone = "wait"`).
    pub fn tx_link_gone(&self) -> u64 {
        self.tx_link_gone
    }

    /// The transmit socket's counters, over the current and every retired attachment.
    pub fn socket_counters(&self) -> XskCounters {
        let mut t = self.side.retired.socket;
        if let Some(s) = &self.side.live {
            t.add(&s.counters());
        }
        t
    }
}

impl TxHalf for AfXdpTx {
    fn name(&self) -> &str {
        &self.side.shared.name
    }

    fn send(
        &mut self,
        now: Nanos,
        batch: &mut Batch,
        pool: &mut BufPool,
    ) -> Result<usize, PortError> {
        let socket = match self.side.ready(now) {
            true => self.side.live.as_mut(),
            false => None,
        };
        let Some(socket) = socket else {
            for buf in batch.drain() {
                self.tx_link_gone += 1;
                pool.free(buf);
            }
            return Ok(0);
        };
        let mut sent = 0;
        for buf in batch.drain() {
            sent += usize::from(socket.stage_tx(buf.as_slice()));
            pool.free(buf);
        }
        if let Err(e) = socket.flush_tx() {
            self.side.on_error(now, e)?;
        }
        Ok(sent)
    }

    /// Also when nothing is sent (the threaded router's transmit worker calls it every
    /// round, `Joined` on every poll): wakes the kernel for what is still on the TX ring,
    /// reclaims completions, and picks up a re-attached socket. No system call unless frames
    /// wait and the kernel asks for a wakeup.
    fn tick(&mut self, now: Nanos) -> Result<(), PortError> {
        if !self.side.ready(now) {
            return Ok(());
        }
        let Some(socket) = self.side.live.as_mut() else {
            return Ok(());
        };
        if let Err(e) = socket.flush_tx() {
            self.side.on_error(now, e)?;
        }
        Ok(())
    }

    /// Hands the kernel what is still on the TX ring (bounded); what it will not take is
    /// counted as abandoned.
    fn flush(&mut self) -> Result<(), PortError> {
        let Some(socket) = self.side.live.as_mut() else {
            return Ok(());
        };
        match socket.drain_tx(FLUSH_MAX_IDLE_KICKS) {
            Ok(_) => Ok(()),
            Err(e) => self.side.on_error(Nanos::ZERO, e),
        }
    }

    fn counters(&self) -> PortCounters {
        let x = self.socket_counters();
        let (gone, reattached) = self.side.shared.gone_and_reattached();
        PortCounters {
            tx_packets: x.tx_packets,
            tx_bytes: x.tx_bytes,
            tx_ring_full: x.tx_ring_full,
            // The driver had no room for a frame it was given (veth: the peer's backlog).
            tx_no_buffer: x.tx_driver_dropped,
            // Too long for a chunk, or left on the ring (interface gone, end of the run).
            tx_errors: x.tx_too_long + x.tx_abandoned,
            tx_link_gone: self.tx_link_gone,
            link_gone_events: gone,
            link_reattached: reattached,
            ..PortCounters::default()
        }
    }

    /// The interface's MTU, read from the kernel when asked (at build time).
    fn mtu(&self) -> Option<u32> {
        interface_mtu(&self.side.shared.cfg.ifname).ok()
    }

    /// The interface's own MAC, read from the kernel when asked (at build time).
    fn mac(&self) -> Option<[u8; 6]> {
        interface_mac(&self.side.shared.cfg.ifname)
            .ok()
            .map(|m| m.0)
    }

    /// The interface's addresses, one RTM_GETADDR dump when asked (at build time); none
    /// when netlink cannot be read (the caller counts errors it then cannot source).
    fn addresses(&self) -> Vec<(std::net::IpAddr, u8)> {
        let ifname = &self.side.shared.cfg.ifname;
        let Ok(ifindex) = interface_index(ifname) else {
            return Vec::new();
        };
        match zl_netlink::Rtnl::open().and_then(|mut r| r.dump_addresses()) {
            Ok(all) => (all.into_iter())
                .filter(|a| a.ifindex == ifindex)
                .map(|a| (a.addr, a.prefix_len))
                .collect(),
            Err(e) => {
                tracing::warn!("reading {ifname}'s addresses: {e}");
                Vec::new()
            }
        }
    }
}
