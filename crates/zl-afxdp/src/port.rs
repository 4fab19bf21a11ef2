//! [`AfXdpPort`]: the sockets of one interface and the program that feeds them, as a
//! [`zl_port::Port`] that splits ([`zl_port::SplitPort`]) into one receive half per
//! configured queue ([`AfXdpRx`]: that queue's RX + fill rings) and one transmit half
//! ([`AfXdpTx`]: the first queue's TX + completion rings), for threads that own them with no
//! lock on the packet path ([`crate::halves`]). The port itself is the same halves polled in
//! turn from one thread.
//!
//! An interface that disappears while the port runs is handled per `on_gone`
//! ([`crate::OnGone`]): `exit` reports [`PortError::InterfaceGone`] (the data plane stops);
//! `wait` retires the sockets and the XDP link (their counters are kept), logs once, counts
//! every frame handed over for transmit as a `tx_link_gone` drop, and looks for an interface of
//! the same name at most once per [`REATTACH_INTERVAL`](crate::REATTACH_INTERVAL) of the port's clock (the `now` the poll
//! loop passes, monotonic time for a live port): when one is back, the port attaches a new
//! program and opens new sockets and UMEMs on it, and forwarding resumes. Split or not, the
//! halves share that state ([`crate::halves`]'s decision).

use std::time::{Duration, Instant};

use zl_core::Nanos;
use zl_port::{
    Batch, BufPool, Halves, Port, PortCounters, PortError, Readiness, RxHalf, SplitPort, TxHalf,
};

use crate::bpf::XdpAttachment;
use crate::halves::{attach, AfXdpRx, AfXdpTx, Shared, Side};
use crate::socket::XskSocket;
use crate::{AfXdpConfig, AfXdpError, XskCounters, XskKernelStats};

/// How long [`AfXdpPort::open`] keeps trying an interface or queue the kernel calls busy
/// (EBUSY / EEXIST at attach or bind) before it reports [`AfXdpError::Busy`].
///
/// decided: 2 s, trying again after 10, 20, 40, ... ms (at most 200 ms apart). The kernel
/// releases a killed process's AF_XDP socket asynchronously (its buffer pool is freed from a
/// work queue after the process is gone), so a router restarted right after `kill -9` can find
/// its queue still taken for a moment; it is free again within milliseconds, far under 2 s,
/// while a queue or interface another live process holds stays busy and is reported after the
/// wait. Only at open: a port re-attaching while the router runs (`on_gone = "wait"`) tries
/// again at its own interval and must not stall the poll loop.
pub const BUSY_RETRY_FOR: Duration = Duration::from_secs(2);

/// [`attach`], again while the kernel answers busy, for up to [`BUSY_RETRY_FOR`]; the wait is
/// logged once and named in the error if it runs out.
fn attach_at_start(
    cfg: &AfXdpConfig,
) -> Result<(Option<XdpAttachment>, Vec<XskSocket>, u32), AfXdpError> {
    let start = Instant::now();
    let mut pause = Duration::from_millis(10);
    let mut logged = false;
    loop {
        match attach(cfg) {
            Err(AfXdpError::Busy {
                op,
                ifname,
                queue,
                source,
                ..
            }) => {
                let waited = start.elapsed();
                if waited >= BUSY_RETRY_FOR {
                    return Err(AfXdpError::Busy {
                        op,
                        ifname,
                        queue,
                        waited: Some(waited),
                        source,
                    });
                }
                if !logged {
                    tracing::info!(
                        ifname = %ifname,
                        "AF_XDP: {op} on `{ifname}` found it busy ({source}); trying again for \
                         up to {} s (the kernel releases what a process killed a moment ago \
                         held shortly after)",
                        BUSY_RETRY_FOR.as_secs()
                    );
                    logged = true;
                }
                std::thread::sleep(pause.min(BUSY_RETRY_FOR - waited));
                pause = (pause * 2).min(Duration::from_millis(200));
            }
            Ok(attached) => {
                if logged {
                    tracing::info!(
                        "AF_XDP: `{}` attached after {} ms",
                        cfg.ifname,
                        start.elapsed().as_millis()
                    );
                }
                return Ok(attached);
            }
            Err(e) => return Err(e),
        }
    }
}

/// An AF_XDP port: one socket per configured RX queue, transmit on the first; its receive
/// halves (one per queue) and its transmit half, polled from one thread.
#[derive(Debug)]
pub struct AfXdpPort {
    rx: Vec<AfXdpRx>,
    tx: AfXdpTx,
    /// The receive half the next `recv` starts at (the queues take turns).
    next_rx: usize,
}

#[cfg(feature = "bench")]
fn gone_error(ifname: &str) -> AfXdpError {
    AfXdpError::InterfaceGone {
        ifname: ifname.to_owned(),
        detail: "the port is waiting for the interface to come back".into(),
    }
}

impl AfXdpPort {
    /// Opens the port `name` (index `index` in the data plane's port table).
    pub fn open(name: &str, index: u16, cfg: &AfXdpConfig) -> Result<Self, AfXdpError> {
        cfg.validate()?;
        let (attachment, sockets, ifindex) = attach_at_start(cfg)?;
        let shared = Shared::new(cfg, name, attachment, ifindex);
        let mut rx = Vec::with_capacity(sockets.len());
        let mut tx = None;
        for (queue, socket) in sockets.into_iter().enumerate() {
            let (r, t) = socket.split();
            rx.push(AfXdpRx::new(Side::new(shared.clone(), queue, r), index));
            // Only the first queue's socket has a transmit part.
            if let Some(t) = t {
                tx = Some(AfXdpTx::new(Side::new(shared.clone(), 0, t)));
            }
        }
        let tx = tx.ok_or_else(|| AfXdpError::Config {
            ifname: cfg.ifname.clone(),
            reason: "queues must name at least one RX queue".into(),
        })?;
        Ok(AfXdpPort { rx, tx, next_rx: 0 })
    }

    fn shared(&self) -> &Shared {
        &self.tx.side.shared
    }

    pub fn ifname(&self) -> &str {
        &self.shared().cfg.ifname
    }

    /// The interface's index at the last (re-)attach.
    pub fn ifindex(&self) -> u32 {
        self.shared().ifindex()
    }

    /// Whether the port is attached to its interface (false while waiting for it).
    pub fn is_attached(&self) -> bool {
        self.shared().is_attached()
    }

    /// Frames handed over for transmit while the interface was gone (`on_gone = "wait"`).
    pub fn tx_link_gone(&self) -> u64 {
        self.tx.tx_link_gone()
    }

    /// How many times the interface went away, and how many times the port re-attached.
    pub fn gone_and_reattached(&self) -> (u64, u64) {
        self.shared().gone_and_reattached()
    }

    /// The receive halves, one per configured queue, in the order of `queues`.
    pub fn rx_halves(&self) -> &[AfXdpRx] {
        &self.rx
    }

    pub fn rx_halves_mut(&mut self) -> &mut [AfXdpRx] {
        &mut self.rx
    }

    /// The transmit half.
    pub fn tx_half(&mut self) -> &mut AfXdpTx {
        &mut self.tx
    }

    /// The halves by their own types ([`SplitPort::split`] boxes them): one receive half per
    /// configured queue, in the order of `queues`, and the transmit half.
    pub fn into_halves(self) -> (Vec<AfXdpRx>, AfXdpTx) {
        (self.rx, self.tx)
    }

    /// The socket counters summed over the queues, current and every retired attachment.
    pub fn socket_counters(&self) -> XskCounters {
        let mut t = self.tx.socket_counters();
        for r in &self.rx {
            t.add(&r.socket_counters());
        }
        t
    }

    /// The kernel's counters summed over the port's sockets, current and retired.
    pub fn kernel_stats(&self) -> Result<XskKernelStats, AfXdpError> {
        let mut t = XskKernelStats::default();
        for r in &self.rx {
            t.add(&r.kernel_stats()?);
        }
        Ok(t)
    }

    /// Lets every half catch up with a change of the attachment one of them made, so the
    /// port as a whole is either attached or gone between two calls.
    fn sync_halves(&mut self) {
        for r in &mut self.rx {
            if r.side.stale() {
                r.side.sync();
            }
        }
        if self.tx.side.stale() {
            self.tx.side.sync();
        }
    }

    /// Calls `on_frame` with up to `max` received frames, taking queues round-robin, without
    /// the data plane's buffers (feature `bench`: the tests and the forwarding example).
    /// While the interface is gone: [`AfXdpError::InterfaceGone`].
    #[cfg(feature = "bench")]
    pub fn recv_with(
        &mut self,
        max: usize,
        mut on_frame: impl FnMut(&[u8]),
    ) -> Result<usize, AfXdpError> {
        let n = self.rx.len();
        let mut got = 0;
        for k in 0..n {
            if got >= max {
                break;
            }
            let i = (self.next_rx + k) % n;
            let Some(socket) = self.rx[i].socket() else {
                return Err(gone_error(self.ifname()));
            };
            got += socket.recv_with(max - got, &mut on_frame)?;
        }
        self.next_rx = (self.next_rx + 1) % n;
        Ok(got)
    }

    /// Transmits a burst of frames on the first queue's socket, without the data plane's
    /// buffers (feature `bench`); returns how many were accepted.
    /// While the interface is gone: [`AfXdpError::InterfaceGone`].
    #[cfg(feature = "bench")]
    pub fn send_burst<'a>(
        &mut self,
        frames: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<usize, AfXdpError> {
        match self.tx.socket() {
            Some(socket) => socket.send_burst(frames),
            None => Err(gone_error(self.ifname())),
        }
    }
}

impl Port for AfXdpPort {
    fn name(&self) -> &str {
        self.tx.name()
    }

    fn mtu(&self) -> Option<u32> {
        self.tx.mtu()
    }

    fn mac(&self) -> Option<[u8; 6]> {
        self.tx.mac()
    }

    fn addresses(&self) -> Vec<(std::net::IpAddr, u8)> {
        self.tx.addresses()
    }

    /// Every queue in turn, from the one after last call's first, while the batch has room.
    fn recv(
        &mut self,
        now: Nanos,
        pool: &mut BufPool,
        batch: &mut Batch,
    ) -> Result<usize, PortError> {
        let n = self.rx.len();
        let first = self.next_rx;
        self.next_rx = (first + 1) % n;
        let mut got = 0;
        let mut result = Ok(());
        for k in 0..n {
            if batch.is_full() {
                break;
            }
            match self.rx[(first + k) % n].recv(now, pool, batch) {
                Ok(g) => got += g,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        self.sync_halves();
        result.map(|()| got)
    }

    fn send(
        &mut self,
        now: Nanos,
        batch: &mut Batch,
        pool: &mut BufPool,
    ) -> Result<usize, PortError> {
        let r = self.tx.send(now, batch, pool);
        self.sync_halves();
        r
    }

    /// Hands the kernel what is still on the TX ring (bounded); what it will not take is
    /// counted as abandoned.
    fn flush(&mut self) -> Result<(), PortError> {
        let r = self.tx.flush();
        self.sync_halves();
        r
    }

    fn readiness(&self) -> Readiness {
        Readiness::Live
    }

    fn counters(&self) -> PortCounters {
        let mut rx = PortCounters::default();
        for r in &self.rx {
            rx.add_rx(&r.counters());
        }
        PortCounters::joined(&rx, &self.tx.counters())
    }
}

/// The port's halves: one [`AfXdpRx`] per configured queue, and the [`AfXdpTx`]. They share
/// no ring, no UMEM chunk and no lock on the packet path ([`crate::halves`]).
impl SplitPort for AfXdpPort {
    fn split(self: Box<Self>) -> Halves {
        let (rx, tx) = self.into_halves();
        Halves {
            rx: rx
                .into_iter()
                .map(|r| Box::new(r) as Box<dyn RxHalf>)
                .collect(),
            tx: Box::new(tx),
        }
    }
}
