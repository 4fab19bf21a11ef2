//! [`AfXdpPort`]: the sockets of one interface and the program that feeds them, as a
//! [`zl_port::Port`].
//!
//! An interface that disappears while the port runs is handled per `on_gone`
//! ([`crate::OnGone`]): `exit` reports [`PortError::InterfaceGone`] (the data plane stops);
//! `wait` retires the sockets and the XDP link (their counters are kept), logs once, counts
//! every frame handed over for transmit as a `tx_link_gone` drop, and looks for an interface of
//! the same name at most once per [`REATTACH_INTERVAL`] of the port's clock (the `now` the poll
//! loop passes, monotonic time for a live port): when one is back, the port attaches a new
//! program and opens new sockets and UMEMs on it, and forwarding resumes.

use std::ffi::CString;

use zl_core::Nanos;
use zl_port::{Batch, BufPool, Port, PortCounters, PortError, Readiness, RxTally};

use crate::bpf::XdpAttachment;
use crate::socket::XskSocket;
use crate::{AfXdpConfig, AfXdpError, OnGone, XskCounters, XskKernelStats};

/// How often a port waiting for its interface (`on_gone = "wait"`) looks for it again.
pub const REATTACH_INTERVAL: Nanos = Nanos::from_millis(100);

/// Wakeups [`Port::flush`] spends, at most, on frames the kernel will not take.
const FLUSH_MAX_IDLE_KICKS: u32 = 64;

/// The program and the sockets of one attachment to the interface.
///
/// Field order is drop order: the program is detached before the sockets close.
#[derive(Debug)]
struct Attached {
    attachment: Option<XdpAttachment>,
    sockets: Vec<XskSocket>,
    ifindex: u32,
}

impl Attached {
    fn open(cfg: &AfXdpConfig) -> Result<Self, AfXdpError> {
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
        for &q in &cfg.queues {
            let s = XskSocket::open(cfg, ifindex, q)?;
            if let Some(a) = &attachment {
                a.register(q, s.fd())?;
            }
            sockets.push(s);
        }
        Ok(Attached {
            attachment,
            sockets,
            ifindex,
        })
    }
}

/// An AF_XDP port: one socket per configured RX queue, transmit on the first.
#[derive(Debug)]
pub struct AfXdpPort {
    /// `None` while the interface is gone (`on_gone = "wait"`).
    live: Option<Attached>,
    cfg: AfXdpConfig,
    name: String,
    index: u16,
    ifindex: u32,
    next_rx: usize,
    rx_no_buffer: u64,
    rx_too_long: u64,
    /// Socket and kernel counters of attachments given up when the interface went away.
    retired: XskCounters,
    retired_kernel: XskKernelStats,
    /// Frames handed over for transmit while the interface was gone.
    tx_link_gone: u64,
    /// Times the interface went away, and times the port attached to it again.
    gone_events: u64,
    reattached: u64,
    /// Port time of the last look for the interface while gone.
    last_look: Option<Nanos>,
    /// The last reason a re-attach failed (logged once per distinct reason).
    last_reattach_error: Option<String>,
}

/// `if_nametoindex`, as an error that says what to check.
pub fn interface_index(ifname: &str) -> Result<u32, AfXdpError> {
    let c = CString::new(ifname).map_err(|_| AfXdpError::Config {
        ifname: ifname.to_owned(),
        reason: "interface name contains a NUL byte".into(),
    })?;
    // SAFETY: `c` is a valid NUL-terminated string for the duration of the call.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        Err(AfXdpError::InterfaceNotFound {
            ifname: ifname.to_owned(),
        })
    } else {
        Ok(idx)
    }
}

/// One `SIOCGIF*` ioctl about `ifname` on a datagram socket (so about the interface of this
/// thread's network namespace, where the port opened it); the filled `ifreq`.
fn ifreq_ioctl(ifname: &str, request: libc::c_ulong) -> std::io::Result<libc::ifreq> {
    let name = ifname.as_bytes();
    // SAFETY: an all-zero `ifreq` is valid (a C struct of arrays and a union of integers).
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    if name.len() >= ifr.ifr_name.len() || name.contains(&0) {
        return Err(std::io::Error::from(std::io::ErrorKind::InvalidInput));
    }
    for (d, &b) in ifr.ifr_name.iter_mut().zip(name) {
        *d = b as libc::c_char;
    }
    // SAFETY: plain socket(2); the descriptor is owned (and closed) by `OwnedFd` below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor this function owns.
    let fd = unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    // SAFETY: the SIOCGIF* requests read the NUL-terminated name in `ifr` and write one
    // member of its union; `ifr` lives for the call.
    let rc = unsafe { libc::ioctl(std::os::fd::AsRawFd::as_raw_fd(&fd), request as _, &mut ifr) };
    if rc < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(ifr)
}

/// The interface's MTU (`SIOCGIFMTU`): the largest IP packet it sends.
pub fn interface_mtu(ifname: &str) -> std::io::Result<u32> {
    let ifr = ifreq_ioctl(ifname, libc::SIOCGIFMTU)?;
    // SAFETY: SIOCGIFMTU filled the `ifru_mtu` member of the union.
    let mtu = unsafe { ifr.ifr_ifru.ifru_mtu };
    u32::try_from(mtu).map_err(|_| std::io::Error::from(std::io::ErrorKind::InvalidData))
}

/// The interface's own MAC (`SIOCGIFHWADDR`); an error for an interface that is not
/// Ethernet.
pub fn interface_mac(ifname: &str) -> std::io::Result<zl_wire::MacAddr> {
    let ifr = ifreq_ioctl(ifname, libc::SIOCGIFHWADDR)?;
    // SAFETY: SIOCGIFHWADDR filled the `ifru_hwaddr` member of the union.
    let hw = unsafe { ifr.ifr_ifru.ifru_hwaddr };
    if hw.sa_family != libc::ARPHRD_ETHER {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("hardware type {} is not Ethernet", hw.sa_family),
        ));
    }
    let mut mac = [0u8; 6];
    for (m, &b) in mac.iter_mut().zip(&hw.sa_data) {
        *m = b as u8;
    }
    Ok(zl_wire::MacAddr(mac))
}

fn add_counters(t: &mut XskCounters, x: &XskCounters) {
    t.rx_packets += x.rx_packets;
    t.rx_bytes += x.rx_bytes;
    t.rx_invalid_desc += x.rx_invalid_desc;
    t.fill_starved += x.fill_starved;
    t.rx_abandoned += x.rx_abandoned;
    t.tx_packets += x.tx_packets;
    t.tx_bytes += x.tx_bytes;
    t.tx_ring_full += x.tx_ring_full;
    t.tx_too_long += x.tx_too_long;
    t.tx_driver_dropped += x.tx_driver_dropped;
    t.tx_abandoned += x.tx_abandoned;
    t.tx_kick_enobufs += x.tx_kick_enobufs;
    t.tx_kick_eagain += x.tx_kick_eagain;
    t.link_down += x.link_down;
}

fn add_kernel(t: &mut XskKernelStats, k: &XskKernelStats) {
    t.rx_dropped += k.rx_dropped;
    t.rx_invalid_descs += k.rx_invalid_descs;
    t.tx_invalid_descs += k.tx_invalid_descs;
    t.rx_ring_full += k.rx_ring_full;
    t.rx_fill_ring_empty_descs += k.rx_fill_ring_empty_descs;
    t.tx_ring_empty_descs += k.tx_ring_empty_descs;
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
        let live = Attached::open(cfg)?;
        Ok(AfXdpPort {
            ifindex: live.ifindex,
            live: Some(live),
            cfg: cfg.clone(),
            name: name.to_owned(),
            index,
            next_rx: 0,
            rx_no_buffer: 0,
            rx_too_long: 0,
            retired: XskCounters::default(),
            retired_kernel: XskKernelStats::default(),
            tx_link_gone: 0,
            gone_events: 0,
            reattached: 0,
            last_look: None,
            last_reattach_error: None,
        })
    }

    pub fn ifname(&self) -> &str {
        &self.cfg.ifname
    }

    /// The interface's index at the last (re-)attach.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// Whether the port is attached to its interface (false while waiting for it).
    pub fn is_attached(&self) -> bool {
        self.live.is_some()
    }

    /// Frames handed over for transmit while the interface was gone (`on_gone = "wait"`).
    pub fn tx_link_gone(&self) -> u64 {
        self.tx_link_gone
    }

    /// How many times the interface went away, and how many times the port re-attached.
    pub fn gone_and_reattached(&self) -> (u64, u64) {
        (self.gone_events, self.reattached)
    }

    /// The XDP attachment, when the port loaded one and is attached.
    pub fn attachment(&self) -> Option<&XdpAttachment> {
        self.live.as_ref().and_then(|l| l.attachment.as_ref())
    }

    /// The sockets of the current attachment (none while the interface is gone).
    pub fn sockets(&self) -> &[XskSocket] {
        self.live.as_ref().map_or(&[], |l| &l.sockets)
    }

    pub fn sockets_mut(&mut self) -> &mut [XskSocket] {
        self.live.as_mut().map_or(&mut [], |l| &mut l.sockets)
    }

    /// The socket counters summed over the current and every retired attachment.
    pub fn socket_counters(&self) -> XskCounters {
        let mut t = self.retired;
        for s in self.sockets() {
            add_counters(&mut t, &s.counters());
        }
        t
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
        let Some(live) = self.live.as_mut() else {
            return Err(gone_error(&self.cfg.ifname));
        };
        let mut got = 0;
        let n = live.sockets.len();
        for k in 0..n {
            if got >= max {
                break;
            }
            let i = (self.next_rx + k) % n;
            got += live.sockets[i].recv_with(max - got, &mut on_frame)?;
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
        match self.live.as_mut() {
            Some(live) => live.sockets[0].send_burst(frames),
            None => Err(gone_error(&self.cfg.ifname)),
        }
    }

    /// The kernel's counters summed over the port's sockets, current and retired.
    pub fn kernel_stats(&self) -> Result<XskKernelStats, AfXdpError> {
        let mut t = self.retired_kernel;
        for s in self.sockets() {
            add_kernel(&mut t, &s.kernel_stats()?);
        }
        Ok(t)
    }

    /// Gives up the current attachment after its interface went away: keeps its counters
    /// (frames still on its TX ring become `tx_abandoned`, unread ones on its RX rings
    /// `rx_abandoned`), closes link and sockets, logs.
    fn retire(&mut self, now: Nanos, detail: &str) {
        let Some(mut live) = self.live.take() else {
            return;
        };
        for s in &mut live.sockets {
            s.abandon_queued();
            s.abandon_rx();
            add_counters(&mut self.retired, &s.counters());
            if let Ok(k) = s.kernel_stats() {
                add_kernel(&mut self.retired_kernel, &k);
            }
        }
        drop(live);
        self.gone_events += 1;
        self.last_look = Some(now);
        self.last_reattach_error = None;
        tracing::warn!(
            port = %self.name,
            ifname = %self.cfg.ifname,
            "AF_XDP port `{}`: interface `{}` is gone ({detail}); waiting for it to come back \
             (on_gone = \"wait\"), transmitted frames are counted as tx_link_gone drops",
            self.name,
            self.cfg.ifname
        );
    }

    /// Whether the port is attached; while gone, first looks for the interface (at most once
    /// per [`REATTACH_INTERVAL`] of `now`). The attached case is one branch, inlined.
    #[inline]
    fn attached_or_look(&mut self, now: Nanos) -> bool {
        self.live.is_some() || self.look_for_interface(now)
    }

    /// While gone: at most once per [`REATTACH_INTERVAL`] of `now`, attaches again if an
    /// interface of the configured name exists. Returns whether the port is attached.
    #[cold]
    fn look_for_interface(&mut self, now: Nanos) -> bool {
        if self
            .last_look
            .is_some_and(|t| now.saturating_sub(t) < REATTACH_INTERVAL)
        {
            return false;
        }
        self.last_look = Some(now);
        if interface_index(&self.cfg.ifname).is_err() {
            return false;
        }
        match Attached::open(&self.cfg) {
            Ok(live) => {
                self.ifindex = live.ifindex;
                self.live = Some(live);
                self.reattached += 1;
                self.next_rx = 0;
                tracing::warn!(
                    port = %self.name,
                    ifname = %self.cfg.ifname,
                    ifindex = self.ifindex,
                    "AF_XDP port `{}`: interface `{}` is back (ifindex {}); re-attached",
                    self.name,
                    self.cfg.ifname,
                    self.ifindex
                );
                true
            }
            Err(e) => {
                let reason = e.to_string();
                if self.last_reattach_error.as_deref() != Some(reason.as_str()) {
                    tracing::warn!(
                        port = %self.name,
                        "AF_XDP port `{}`: interface `{}` exists again but cannot be attached \
                         yet ({reason}); retrying every {} ms",
                        self.name,
                        self.cfg.ifname,
                        REATTACH_INTERVAL.as_nanos() / 1_000_000
                    );
                    self.last_reattach_error = Some(reason);
                }
                false
            }
        }
    }

    /// An error from the sockets: with `on_gone = "wait"` a gone interface retires the
    /// attachment and is not an error; anything else becomes a [`PortError`].
    fn on_error(&mut self, now: Nanos, e: AfXdpError) -> Result<(), PortError> {
        match e {
            AfXdpError::InterfaceGone { detail, .. } if self.cfg.on_gone == OnGone::Wait => {
                self.retire(now, &detail);
                Ok(())
            }
            AfXdpError::InterfaceGone { detail, .. } => {
                // What is still on the TX rings will never leave: counted, not lost.
                for sock in self.sockets_mut() {
                    sock.abandon_queued();
                }
                Err(PortError::InterfaceGone {
                    port: self.name.clone(),
                    detail: format!(
                        "{detail}; to wait for `{}` to come back instead of stopping, set \
                         on_gone = \"wait\" in the port's [ports.af_xdp] table",
                        self.cfg.ifname
                    ),
                })
            }
            other => Err(PortError::Io {
                port: self.name.clone(),
                context: "AF_XDP",
                source: std::io::Error::other(other.to_string()),
            }),
        }
    }
}

impl Port for AfXdpPort {
    fn name(&self) -> &str {
        &self.name
    }

    /// The interface's MTU, read from the kernel when asked (at build time).
    fn mtu(&self) -> Option<u32> {
        interface_mtu(&self.cfg.ifname).ok()
    }

    /// The interface's own MAC, read from the kernel when asked (at build time).
    fn mac(&self) -> Option<[u8; 6]> {
        interface_mac(&self.cfg.ifname).ok().map(|m| m.0)
    }

    /// The interface's addresses, one RTM_GETADDR dump when asked (at build time); none
    /// when netlink cannot be read (the caller counts errors it then cannot source).
    fn addresses(&self) -> Vec<(std::net::IpAddr, u8)> {
        let Ok(ifindex) = interface_index(&self.cfg.ifname) else {
            return Vec::new();
        };
        match zl_netlink::Rtnl::open().and_then(|mut r| r.dump_addresses()) {
            Ok(all) => (all.into_iter())
                .filter(|a| a.ifindex == ifindex)
                .map(|a| (a.addr, a.prefix_len))
                .collect(),
            Err(e) => {
                tracing::warn!("reading {}'s addresses: {e}", self.cfg.ifname);
                Vec::new()
            }
        }
    }

    fn recv(
        &mut self,
        now: Nanos,
        pool: &mut BufPool,
        batch: &mut Batch,
    ) -> Result<usize, PortError> {
        if !self.attached_or_look(now) {
            return Ok(0);
        }
        let Some(live) = self.live.as_mut() else {
            return Ok(0);
        };
        let index = self.index;
        let mut tally = RxTally::default();
        let n = live.sockets.len();
        let mut result = Ok(());
        for k in 0..n {
            let room = batch.room();
            if room == 0 {
                break;
            }
            let s = &mut live.sockets[(self.next_rx + k) % n];
            let r = s.recv_with(room, |frame| tally.copy_in(frame, pool, batch, now, index));
            if let Err(e) = r {
                result = Err(e);
                break;
            }
        }
        self.next_rx = (self.next_rx + 1) % n;
        self.rx_no_buffer += tally.no_buffer;
        self.rx_too_long += tally.too_long;
        if let Err(e) = result {
            self.on_error(now, e)?;
        }
        Ok(tally.added)
    }

    fn send(
        &mut self,
        now: Nanos,
        batch: &mut Batch,
        pool: &mut BufPool,
    ) -> Result<usize, PortError> {
        if !self.attached_or_look(now) {
            for buf in batch.drain() {
                self.tx_link_gone += 1;
                pool.free(buf);
            }
            return Ok(0);
        }
        let Some(live) = self.live.as_mut() else {
            return Ok(0);
        };
        let socket = &mut live.sockets[0];
        let mut sent = 0;
        for buf in batch.drain() {
            sent += usize::from(socket.stage_tx(buf.as_slice()));
            pool.free(buf);
        }
        if let Err(e) = socket.flush_tx() {
            self.on_error(now, e)?;
        }
        Ok(sent)
    }

    /// Hands the kernel what is still on the TX ring (bounded); what it will not take is
    /// counted as abandoned.
    fn flush(&mut self) -> Result<(), PortError> {
        let Some(live) = self.live.as_mut() else {
            return Ok(());
        };
        let r = live.sockets[0].drain_tx(FLUSH_MAX_IDLE_KICKS);
        match r {
            Ok(_) => Ok(()),
            Err(e) => self.on_error(Nanos::ZERO, e),
        }
    }

    fn readiness(&self) -> Readiness {
        Readiness::Live
    }

    fn counters(&self) -> PortCounters {
        let x = self.socket_counters();
        let mut c = PortCounters {
            rx_packets: x.rx_packets,
            rx_bytes: x.rx_bytes,
            rx_no_buffer: self.rx_no_buffer,
            rx_too_long: self.rx_too_long,
            tx_packets: x.tx_packets,
            tx_bytes: x.tx_bytes,
            tx_ring_full: x.tx_ring_full,
            // The driver had no room for a frame it was given (veth: the peer's backlog).
            tx_no_buffer: x.tx_driver_dropped,
            // Too long for a chunk, or left on the ring (interface gone, end of the run).
            tx_errors: x.tx_too_long + x.tx_abandoned,
            tx_link_gone: self.tx_link_gone,
            link_gone_events: self.gone_events,
            link_reattached: self.reattached,
            ..PortCounters::default()
        };
        // Frames the kernel could not put on a full RX ring or found no fill chunk for, and
        // frames left unread on the ring of a socket given up with its interface.
        c.rx_ring_full += x.rx_abandoned;
        if let Ok(k) = self.kernel_stats() {
            c.rx_ring_full += k.rx_ring_full + k.rx_fill_ring_empty_descs;
        }
        c.rx_packets -= self.rx_no_buffer + self.rx_too_long;
        c
    }
}

/// Interim (issue 14): the port's two sides shared behind one lock per burst
/// ([`zl_port::split_locked`]) until the AF_XDP halves (RX + fill rings vs TX + completion
/// rings) land.
impl zl_port::SplitPort for AfXdpPort {
    fn split(self: Box<Self>) -> zl_port::Halves {
        zl_port::split_locked(*self)
    }
}
