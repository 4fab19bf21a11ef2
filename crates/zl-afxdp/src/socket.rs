//! One AF_XDP socket bound to one RX/TX queue, with its own UMEM, in two parts that different
//! threads own: [`XskRx`] (RX + fill rings) and [`XskTx`] (TX + completion rings, the
//! wakeup). Each of the four rings has one producer and one consumer, as the kernel requires;
//! the parts share only the descriptor and the UMEM, whose chunks are partitioned between them.
//!
//! UMEM layout: `frame_count` chunks of `frame_size` bytes (aligned mode). The first
//! `rx_ring_size` chunks belong to receive: they circulate fill ring -> kernel -> RX ring ->
//! (frame copied out) -> fill ring, so the fill ring, sized to hold all of them, can always
//! take a chunk back. The remaining chunks belong to transmit: free list -> TX ring -> kernel
//! -> completion ring -> free list. Each part checks that an address the kernel hands it lies
//! in its own chunks before touching it.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;

use crate::error::{classify, AfXdpError, ModeContext, Op};
use crate::ring::{ConsumerRing, Mapping, ProducerRing, RingLayout};
use crate::{AfXdpConfig, BindMode};

/// Counters of one socket, by cause. Kernel-side counters come from [`XskRx::kernel_stats`].
///
/// Every frame offered to [`XskTx::stage_tx`] ends in exactly one of `tx_packets`,
/// `tx_ring_full`, `tx_too_long`, `tx_driver_dropped` or `tx_abandoned` (frames still on the
/// TX ring count in `tx_packets` until the kernel drops or abandons them). The `tx_kick_*`
/// counters count wakeups, not frames: a refused wakeup leaves its frames on the TX ring for
/// the next one (a counted retry, never a loss).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XskCounters {
    pub rx_packets: u64,
    pub rx_bytes: u64,
    /// RX descriptors pointing outside the UMEM (never seen from a correct kernel; dropped).
    pub rx_invalid_desc: u64,
    /// Received chunks that could not go back to the fill ring at once (fill-ring starvation
    /// on our side; the kernel's side is `rx_fill_ring_empty_descs`).
    pub fill_starved: u64,
    /// Frames the kernel had put on the RX ring but the port never read, because the socket
    /// was given up (interface gone, `on_gone = "wait"`).
    pub rx_abandoned: u64,
    /// Frames handed to the kernel, less those it reported dropped (`tx_driver_dropped`).
    pub tx_packets: u64,
    /// Bytes of the frames handed to the kernel (dropped ones included: the kernel does not
    /// say which frame it dropped).
    pub tx_bytes: u64,
    /// Frames refused because the TX ring had no free descriptor (or the TX chunk pool was
    /// empty: the kernel had not completed enough earlier frames).
    pub tx_ring_full: u64,
    /// Frames refused because they do not fit a UMEM chunk.
    pub tx_too_long: u64,
    /// Frames the kernel took from the TX ring and then dropped: in copy mode a wakeup
    /// answered EBUSY means the driver returned NET_XMIT_DROP for the last frame it built
    /// (veth: the peer's backlog was full); that frame is completed but never sent.
    pub tx_driver_dropped: u64,
    /// Frames still on the TX ring when the socket was given up (interface gone, or the
    /// kernel would not take them when the port was flushed at the end of the run).
    pub tx_abandoned: u64,
    /// Wakeups (sendto) answered ENOBUFS: retried on the next wakeup.
    pub tx_kick_enobufs: u64,
    /// Wakeups answered EAGAIN (the kernel sends at most 32 frames per wakeup in copy mode,
    /// or found no completion slot), or EBUSY in zero-copy mode: retried.
    pub tx_kick_eagain: u64,
    /// Wakeups or health checks answered ENETDOWN (link administratively down).
    pub link_down: u64,
    /// Completions naming an address outside the TX chunks (never seen from a correct
    /// kernel; the address is not reused).
    pub tx_invalid_completion: u64,
}

impl XskCounters {
    /// Adds `x` to these (the two parts of a socket, or the sockets of a port).
    pub fn add(&mut self, x: &XskCounters) {
        self.rx_packets += x.rx_packets;
        self.rx_bytes += x.rx_bytes;
        self.rx_invalid_desc += x.rx_invalid_desc;
        self.fill_starved += x.fill_starved;
        self.rx_abandoned += x.rx_abandoned;
        self.tx_packets += x.tx_packets;
        self.tx_bytes += x.tx_bytes;
        self.tx_ring_full += x.tx_ring_full;
        self.tx_too_long += x.tx_too_long;
        self.tx_driver_dropped += x.tx_driver_dropped;
        self.tx_abandoned += x.tx_abandoned;
        self.tx_kick_enobufs += x.tx_kick_enobufs;
        self.tx_kick_eagain += x.tx_kick_eagain;
        self.link_down += x.link_down;
        self.tx_invalid_completion += x.tx_invalid_completion;
    }
}

/// The kernel's counters for the socket (`struct xdp_statistics`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XskKernelStats {
    pub rx_dropped: u64,
    pub rx_invalid_descs: u64,
    pub tx_invalid_descs: u64,
    pub rx_ring_full: u64,
    pub rx_fill_ring_empty_descs: u64,
    pub tx_ring_empty_descs: u64,
}

impl XskKernelStats {
    /// Adds `k` to these (the sockets of a port).
    pub fn add(&mut self, k: &XskKernelStats) {
        self.rx_dropped += k.rx_dropped;
        self.rx_invalid_descs += k.rx_invalid_descs;
        self.tx_invalid_descs += k.tx_invalid_descs;
        self.rx_ring_full += k.rx_ring_full;
        self.rx_fill_ring_empty_descs += k.rx_fill_ring_empty_descs;
        self.tx_ring_empty_descs += k.tx_ring_empty_descs;
    }
}

/// How many empty receive polls pass between two liveness checks of the binding.
const HEALTH_CHECK_EVERY: u32 = 256;

/// What the two parts of a socket share: its descriptor and its UMEM.
///
/// Neither part changes either: the descriptor is only passed to syscalls, and each part
/// reads and writes only its own chunks of the UMEM (the receive part the first
/// `rx_ring_size`, the transmit part the rest), through raw pointers to one chunk at a time,
/// never through a reference that spans the region.
///
/// Field order is drop order: the socket is closed, then the UMEM unmapped (the kernel keeps
/// its own pin on the UMEM pages until the socket is released).
#[derive(Debug)]
struct XskCore {
    fd: OwnedFd,
    umem: Mapping,
    ifname: String,
    queue_id: u32,
}

// SAFETY: `fd` is used only as a syscall argument (the kernel serialises what it does per
// socket), and `umem` only through raw pointers to chunks that one part owns at a time (see
// the type's doc), so sharing the core between the two parts' threads shares no unsynchronised
// mutable state.
unsafe impl Sync for XskCore {}
// SAFETY: the mapping and the descriptor are owned by the core; moving it moves sole
// ownership.
unsafe impl Send for XskCore {}

impl XskCore {
    fn kernel_stats(&self) -> Result<XskKernelStats, AfXdpError> {
        let mut s = libc::xdp_statistics {
            rx_dropped: 0,
            rx_invalid_descs: 0,
            tx_invalid_descs: 0,
            rx_ring_full: 0,
            rx_fill_ring_empty_descs: 0,
            tx_ring_empty_descs: 0,
        };
        getsockopt(self.fd.as_raw_fd(), libc::XDP_STATISTICS, &mut s)
            .map_err(|e| classify(Op::ReadStatistics, &self.ifname, ModeContext::None, e))?;
        Ok(XskKernelStats {
            rx_dropped: s.rx_dropped,
            rx_invalid_descs: s.rx_invalid_descs,
            tx_invalid_descs: s.tx_invalid_descs,
            rx_ring_full: s.rx_ring_full,
            rx_fill_ring_empty_descs: s.rx_fill_ring_empty_descs,
            tx_ring_empty_descs: s.tx_ring_empty_descs,
        })
    }
}

/// An AF_XDP socket on one queue, as opened: its receive part and its transmit part, which
/// [`XskSocket::split`] hands to different threads.
#[derive(Debug)]
pub struct XskSocket {
    rx: XskRx,
    tx: Option<XskTx>,
}

/// The receive part of a socket: its RX and fill rings and the RX chunks of its UMEM, for the
/// one thread that receives on the queue (the kernel allows one producer and one consumer per
/// ring; the transmit part's rings are others).
///
/// Field order is drop order: the rings are unmapped before the core (socket, UMEM) goes.
#[derive(Debug)]
pub struct XskRx {
    fill: ProducerRing<u64>,
    rx: ConsumerRing<libc::xdp_desc>,
    core: Arc<XskCore>,
    frame_size: u32,
    /// End of the RX chunks, in bytes from the UMEM's start: a descriptor past it is not ours.
    rx_end: usize,
    idle_polls: u32,
    counters: XskCounters,
}

/// The transmit part of a socket: its TX and completion rings, the TX chunks of its UMEM and
/// the wakeup (`sendto`), for the one thread that transmits on the queue.
///
/// Field order is drop order, as for [`XskRx`].
#[derive(Debug)]
pub struct XskTx {
    completion: ConsumerRing<u64>,
    tx: ProducerRing<libc::xdp_desc>,
    core: Arc<XskCore>,
    frame_size: u32,
    /// The TX chunks: bytes `tx_start..tx_end` of the UMEM.
    tx_start: u64,
    tx_end: u64,
    /// Free TX chunk addresses (preallocated to the TX chunk count).
    tx_free: Vec<u64>,
    tx_chunks: usize,
    /// TX descriptors staged but not yet published.
    tx_staged: u32,
    /// Bound with XDP_COPY (EBUSY on a wakeup then means a dropped frame).
    copy_mode: bool,
    counters: XskCounters,
}

// SAFETY: the raw pointers inside the rings point into mappings owned by this value, and the
// UMEM chunks it touches (the RX chunks) are touched by no other part (`XskCore`'s doc);
// moving it to another thread moves sole ownership.
unsafe impl Send for XskRx {}
// SAFETY: as for `XskRx`, with the TX chunks.
unsafe impl Send for XskTx {}

fn setsockopt<T>(fd: RawFd, name: libc::c_int, value: &T) -> io::Result<()> {
    // SAFETY: `value` is a live `T` of the size passed; the kernel copies it in.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_XDP,
            name,
            value as *const T as *const libc::c_void,
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn getsockopt<T>(fd: RawFd, name: libc::c_int, value: &mut T) -> io::Result<()> {
    let mut len = std::mem::size_of::<T>() as libc::socklen_t;
    // SAFETY: `value` is a writable `T` and `len` its size; the kernel writes at most `len`.
    let r = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_XDP,
            name,
            value as *mut T as *mut libc::c_void,
            &mut len,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn layout(o: &libc::xdp_ring_offset) -> RingLayout {
    RingLayout {
        producer: o.producer,
        consumer: o.consumer,
        desc: o.desc,
        flags: o.flags,
    }
}

impl XskSocket {
    /// Creates the socket, its UMEM and rings, and binds it to `queue_id` of `ifindex`.
    /// The caller registers [`XskSocket::fd`] in the XSKMAP for packets to arrive.
    ///
    /// Without `transmit` the socket is receive-only: no TX ring, no TX chunks in its UMEM (a
    /// completion ring all the same, which the kernel requires of a UMEM's first socket), and
    /// [`XskSocket::split`] gives no transmit part. The port transmits on its first queue only,
    /// so its other queues' sockets are opened so.
    pub fn open(
        cfg: &AfXdpConfig,
        ifindex: u32,
        queue_id: u32,
        transmit: bool,
    ) -> Result<Self, AfXdpError> {
        let ifname = cfg.ifname.as_str();
        let sys = |op: Op| move |e: io::Error| classify(op, ifname, ModeContext::None, e);
        // SAFETY: plain socket(2) call; the result is checked before use.
        let raw = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
        if raw < 0 {
            return Err(sys(Op::CreateSocket)(io::Error::last_os_error()));
        }
        // SAFETY: `raw` is a fresh fd that nothing else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };

        let tx_chunks = if transmit { cfg.tx_ring_size } else { 0 };
        let frame_count = cfg.rx_ring_size + tx_chunks;
        let umem_len = frame_count as usize * cfg.frame_size as usize;
        let umem = Mapping::new(-1, umem_len, 0).map_err(sys(Op::MapUmem))?;
        let reg = libc::xdp_umem_reg {
            addr: umem.as_ptr() as u64,
            len: umem_len as u64,
            chunk_size: cfg.frame_size,
            headroom: 0,
            flags: 0,
            tx_metadata_len: 0,
        };
        setsockopt(fd.as_raw_fd(), libc::XDP_UMEM_REG, &reg).map_err(sys(Op::RegisterUmem))?;
        let mut rings = vec![
            (libc::XDP_UMEM_FILL_RING, cfg.rx_ring_size),
            (libc::XDP_UMEM_COMPLETION_RING, cfg.tx_ring_size),
            (libc::XDP_RX_RING, cfg.rx_ring_size),
        ];
        if transmit {
            rings.push((libc::XDP_TX_RING, cfg.tx_ring_size));
        }
        for (opt, size) in rings {
            setsockopt(fd.as_raw_fd(), opt, &size).map_err(sys(Op::SetupRings))?;
        }
        let zero = libc::xdp_ring_offset {
            producer: 0,
            consumer: 0,
            desc: 0,
            flags: 0,
        };
        let mut off = libc::xdp_mmap_offsets {
            rx: zero,
            tx: zero,
            fr: zero,
            cr: zero,
        };
        getsockopt(fd.as_raw_fd(), libc::XDP_MMAP_OFFSETS, &mut off)
            .map_err(sys(Op::SetupRings))?;

        let map = |o: &libc::xdp_ring_offset, entries: u32, entry_size: usize, pgoff: u64| {
            Mapping::new(
                fd.as_raw_fd(),
                o.desc as usize + entries as usize * entry_size,
                pgoff as libc::off_t,
            )
            .map_err(sys(Op::MapRings))
        };
        let u64_size = std::mem::size_of::<u64>();
        let desc_size = std::mem::size_of::<libc::xdp_desc>();
        let fill_map = map(
            &off.fr,
            cfg.rx_ring_size,
            u64_size,
            libc::XDP_UMEM_PGOFF_FILL_RING,
        )?;
        let rx_map = map(
            &off.rx,
            cfg.rx_ring_size,
            desc_size,
            libc::XDP_PGOFF_RX_RING as u64,
        )?;
        // SAFETY: each mapping is the kernel's ring of the size set above with the entry type
        // the kernel uses for it (u64 addresses for fill/completion, xdp_desc for RX/TX),
        // sized `desc + entries * entry_size`, at the offsets XDP_MMAP_OFFSETS gave.
        let mut fill = unsafe { ProducerRing::new(fill_map, layout(&off.fr), cfg.rx_ring_size) };
        // SAFETY: as above.
        let rx = unsafe { ConsumerRing::new(rx_map, layout(&off.rx), cfg.rx_ring_size) };
        // The completion ring of a receive-only socket is never read: not mapped.
        let tx_rings = if transmit {
            let comp_map = map(
                &off.cr,
                cfg.tx_ring_size,
                u64_size,
                libc::XDP_UMEM_PGOFF_COMPLETION_RING,
            )?;
            let tx_map = map(
                &off.tx,
                cfg.tx_ring_size,
                desc_size,
                libc::XDP_PGOFF_TX_RING as u64,
            )?;
            // SAFETY: as above.
            let completion =
                unsafe { ConsumerRing::new(comp_map, layout(&off.cr), cfg.tx_ring_size) };
            // SAFETY: as above.
            let tx = unsafe { ProducerRing::new(tx_map, layout(&off.tx), cfg.tx_ring_size) };
            Some((completion, tx))
        } else {
            None
        };

        // Hand every RX chunk to the kernel before binding, so the first packet finds room.
        let fs = u64::from(cfg.frame_size);
        let n = fill.free(cfg.rx_ring_size);
        for i in 0..n {
            fill.stage(i, u64::from(i) * fs);
        }
        fill.submit(n);

        let (bind_flags, mode) = match cfg.bind_mode {
            BindMode::Copy => (libc::XDP_COPY, ModeContext::CopyBind),
            BindMode::ZeroCopy => (libc::XDP_ZEROCOPY, ModeContext::ZeroCopyBind),
        };
        let addr = libc::sockaddr_xdp {
            sxdp_family: libc::AF_XDP as u16,
            sxdp_flags: bind_flags | libc::XDP_USE_NEED_WAKEUP,
            sxdp_ifindex: ifindex,
            sxdp_queue_id: queue_id,
            sxdp_shared_umem_fd: 0,
        };
        // SAFETY: `addr` is a valid sockaddr_xdp of the size passed.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &addr as *const libc::sockaddr_xdp as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
            )
        };
        if r < 0 {
            return Err(
                match classify(Op::Bind, ifname, mode, io::Error::last_os_error()) {
                    AfXdpError::Busy {
                        op,
                        ifname,
                        waited,
                        source,
                        ..
                    } => AfXdpError::Busy {
                        op,
                        ifname,
                        queue: Some(queue_id),
                        waited,
                        source,
                    },
                    other => other,
                },
            );
        }

        let rx_end = cfg.rx_ring_size as usize * cfg.frame_size as usize;
        let core = Arc::new(XskCore {
            fd,
            umem,
            ifname: cfg.ifname.clone(),
            queue_id,
        });
        Ok(XskSocket {
            rx: XskRx {
                fill,
                rx,
                core: core.clone(),
                frame_size: cfg.frame_size,
                rx_end,
                idle_polls: 0,
                counters: XskCounters::default(),
            },
            tx: tx_rings.map(|(completion, tx)| XskTx {
                completion,
                tx,
                core,
                frame_size: cfg.frame_size,
                tx_start: rx_end as u64,
                tx_end: u64::from(frame_count) * fs,
                tx_free: (cfg.rx_ring_size..frame_count)
                    .map(|i| u64::from(i) * fs)
                    .collect(),
                tx_chunks: tx_chunks as usize,
                tx_staged: 0,
                copy_mode: cfg.bind_mode == BindMode::Copy,
                counters: XskCounters::default(),
            }),
        })
    }

    /// The socket's fd (to register in the XSKMAP, or to poll(2) on).
    pub fn fd(&self) -> RawFd {
        self.rx.fd()
    }

    pub fn queue_id(&self) -> u32 {
        self.rx.queue_id()
    }

    /// The receive part and the transmit part (none for a receive-only socket), each to be
    /// owned by one thread.
    pub fn split(self) -> (XskRx, Option<XskTx>) {
        (self.rx, self.tx)
    }
}

impl XskRx {
    /// The socket's fd (to poll(2) on).
    pub fn fd(&self) -> RawFd {
        self.core.fd.as_raw_fd()
    }

    pub fn queue_id(&self) -> u32 {
        self.core.queue_id
    }

    /// The receive counters (`rx_*`, `fill_starved`, and `link_down` seen by receive
    /// wakeups; the transmit fields 0).
    pub fn counters(&self) -> XskCounters {
        self.counters
    }

    /// The kernel's counters for the whole socket.
    pub fn kernel_stats(&self) -> Result<XskKernelStats, AfXdpError> {
        self.core.kernel_stats()
    }

    /// Calls `on_frame` with each received frame (at most `max`), then gives the chunks back
    /// to the fill ring. Returns the number of frames.
    ///
    /// An idle socket checks every 256 polls that it is still bound, so an
    /// interface that disappears is reported as [`AfXdpError::InterfaceGone`], not spun on.
    pub fn recv_with(
        &mut self,
        max: usize,
        mut on_frame: impl FnMut(&[u8]),
    ) -> Result<usize, AfXdpError> {
        let n = self.rx.peek(max.min(u32::MAX as usize) as u32);
        if n == 0 {
            self.idle_polls = self.idle_polls.wrapping_add(1);
            if self.fill.needs_wakeup() || self.idle_polls % HEALTH_CHECK_EVERY == 0 {
                self.wakeup_rx()?;
            }
            return Ok(0);
        }
        self.idle_polls = 0;
        let room = self.fill.free(n);
        let mask = !u64::from(self.frame_size - 1);
        let mut refilled = 0;
        let mut delivered = 0;
        for i in 0..n {
            let desc = self.rx.get(i);
            let start = desc.addr as usize;
            let end = start.saturating_add(desc.len as usize);
            if end > self.rx_end {
                // Not an RX chunk of ours: never hand it back to the kernel.
                self.counters.rx_invalid_desc += 1;
                continue;
            }
            // SAFETY: `start..end` lies inside the RX chunks (checked just above), which the
            // transmit part never touches; the kernel wrote this chunk before publishing the
            // RX descriptor (acquire in `peek`) and will not touch it until we put it back on
            // the fill ring below.
            let frame = unsafe {
                std::slice::from_raw_parts(self.core.umem.as_ptr().add(start), end - start)
            };
            self.counters.rx_packets += 1;
            self.counters.rx_bytes += u64::from(desc.len);
            on_frame(frame);
            delivered += 1;
            if refilled < room {
                self.fill.stage(refilled, desc.addr & mask);
                refilled += 1;
            } else {
                // Cannot happen while the fill ring holds every RX chunk (it is sized so);
                // counted rather than assumed, and the chunk is then out of circulation.
                self.counters.fill_starved += 1;
            }
        }
        self.fill.submit(refilled);
        self.rx.release(n);
        Ok(delivered)
    }

    /// A zero-length non-blocking recvfrom: wakes the driver to refill (zero-copy mode) and
    /// reports whether the socket is still bound.
    fn wakeup_rx(&mut self) -> Result<(), AfXdpError> {
        // SAFETY: a zero-length recvfrom with null buffers is the documented AF_XDP wakeup.
        let r = unsafe {
            libc::recvfrom(
                self.core.fd.as_raw_fd(),
                std::ptr::null_mut(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        if r >= 0 {
            return Ok(());
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::ENETDOWN) => {
                self.counters.link_down += 1;
                Ok(())
            }
            Some(libc::EAGAIN | libc::EINTR | libc::EBUSY) => Ok(()),
            _ => Err(classify(
                Op::Receive,
                &self.core.ifname,
                ModeContext::None,
                err,
            )),
        }
    }

    /// Counts every frame still on the RX ring as `rx_abandoned` and releases them (the
    /// socket is being given up).
    pub(crate) fn abandon_rx(&mut self) {
        let n = self.rx.peek(u32::MAX);
        self.rx.release(n);
        self.counters.rx_abandoned += u64::from(n);
    }
}

impl XskTx {
    pub fn queue_id(&self) -> u32 {
        self.core.queue_id
    }

    /// The transmit counters (`tx_*`, and `link_down` seen by transmit wakeups; the receive
    /// fields 0).
    pub fn counters(&self) -> XskCounters {
        self.counters
    }

    /// Takes completed TX chunks back into the free list.
    fn reclaim(&mut self) {
        let n = self.completion.peek(u32::MAX);
        let mask = !u64::from(self.frame_size - 1);
        for i in 0..n {
            let addr = self.completion.get(i);
            if (self.tx_start..self.tx_end).contains(&addr) && addr & mask == addr {
                self.tx_free.push(addr);
            } else {
                // Not a TX chunk of ours (never from a correct kernel): reusing it could
                // write into a chunk the receive part reads, so it leaves circulation.
                self.counters.tx_invalid_completion += 1;
            }
        }
        self.completion.release(n);
    }

    /// Copies `frame` into a TX chunk and stages it; returns false (and counts why) when it
    /// cannot. Staged frames leave on the next [`XskTx::flush_tx`].
    pub fn stage_tx(&mut self, frame: &[u8]) -> bool {
        if frame.len() > self.frame_size as usize {
            self.counters.tx_too_long += 1;
            return false;
        }
        if self.tx_free.is_empty() {
            self.reclaim();
        }
        if self.tx.free(self.tx_staged + 1) <= self.tx_staged {
            self.counters.tx_ring_full += 1;
            return false;
        }
        let Some(addr) = self.tx_free.pop() else {
            self.counters.tx_ring_full += 1;
            return false;
        };
        // SAFETY: `addr` is a TX chunk from our free list (the kernel completed it or never
        // had it; `reclaim` admits only chunks in `tx_start..tx_end`), so neither the kernel
        // nor the receive part reads or writes it; `addr + len <= tx_end <= umem.len()` since
        // chunks are `frame_size` bytes and `len <= frame_size`.
        unsafe {
            std::ptr::copy_nonoverlapping(
                frame.as_ptr(),
                self.core.umem.as_ptr().add(addr as usize),
                frame.len(),
            );
        }
        self.tx.stage(
            self.tx_staged,
            libc::xdp_desc {
                addr,
                len: frame.len() as u32,
                options: 0,
            },
        );
        self.tx_staged += 1;
        self.counters.tx_packets += 1;
        self.counters.tx_bytes += frame.len() as u64;
        true
    }

    /// Publishes the staged TX descriptors and wakes the kernel to send them.
    pub fn flush_tx(&mut self) -> Result<(), AfXdpError> {
        self.tx.submit(self.tx_staged);
        self.tx_staged = 0;
        // In copy mode the kernel sends only on a wakeup, at most 32 frames per call (it
        // answers EAGAIN when more remain), so a full burst may need a few.
        for _ in 0..8 {
            if self.tx.outstanding() == 0 || !self.tx.needs_wakeup() {
                break;
            }
            if !self.kick_tx()? {
                break;
            }
        }
        self.reclaim();
        Ok(())
    }

    /// One sendto wakeup. Returns whether another one may make progress.
    fn kick_tx(&mut self) -> Result<bool, AfXdpError> {
        // SAFETY: a zero-length sendto with null buffers is the documented AF_XDP TX wakeup.
        let r = unsafe {
            libc::sendto(
                self.core.fd.as_raw_fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        if r >= 0 {
            return Ok(false);
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EBUSY) if self.copy_mode => {
                // __xsk_generic_xmit: the driver answered NET_XMIT_DROP for the frame it was
                // given ("completed but not sent"); the frames behind it are still queued.
                self.counters.tx_driver_dropped += 1;
                self.counters.tx_packets = self.counters.tx_packets.saturating_sub(1);
                Ok(true)
            }
            Some(libc::EAGAIN | libc::EBUSY) => {
                self.counters.tx_kick_eagain += 1;
                Ok(true)
            }
            Some(libc::ENOBUFS) => {
                self.counters.tx_kick_enobufs += 1;
                Ok(false)
            }
            Some(libc::ENETDOWN) => {
                self.counters.link_down += 1;
                Ok(false)
            }
            Some(libc::EINTR) => Ok(true),
            _ => Err(classify(
                Op::Transmit,
                &self.core.ifname,
                ModeContext::None,
                err,
            )),
        }
    }

    /// Frames published on the TX ring that the kernel has not taken yet.
    pub fn tx_queued(&mut self) -> u32 {
        self.tx.outstanding()
    }

    /// Wakes the kernel until the TX ring is empty or `max_kicks` wakeups made no headway;
    /// counts what is left as `tx_abandoned` (also when a wakeup fails). Returns the frames
    /// left. For the end of a run.
    pub fn drain_tx(&mut self, max_kicks: u32) -> Result<u32, AfXdpError> {
        self.tx.submit(self.tx_staged);
        self.tx_staged = 0;
        let mut idle = 0;
        while self.tx.outstanding() > 0 && idle < max_kicks {
            let before = self.tx.outstanding();
            if let Err(e) = self.kick_tx() {
                self.abandon_queued();
                return Err(e);
            }
            self.reclaim();
            if self.tx.outstanding() >= before {
                idle += 1;
            } else {
                idle = 0;
            }
        }
        Ok(self.abandon_queued())
    }

    /// Moves every frame still on the TX ring from `tx_packets` and `tx_bytes` to
    /// `tx_abandoned`, the bytes too (they were never sent). Returns how many.
    pub(crate) fn abandon_queued(&mut self) -> u32 {
        let (mut n, mut bytes) = (0u64, 0u64);
        self.tx.for_each_outstanding(|d| {
            n += 1;
            bytes += u64::from(d.len);
        });
        let n = n.min(self.counters.tx_packets);
        self.counters.tx_packets -= n;
        self.counters.tx_bytes -= bytes.min(self.counters.tx_bytes);
        self.counters.tx_abandoned += n;
        n as u32
    }

    /// Stages and flushes a burst; returns how many frames were accepted.
    pub fn send_burst<'a>(
        &mut self,
        frames: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<usize, AfXdpError> {
        let mut sent = 0;
        for f in frames {
            sent += usize::from(self.stage_tx(f));
        }
        self.flush_tx()?;
        Ok(sent)
    }

    /// TX frames handed to the kernel and not yet completed.
    pub fn tx_in_flight(&mut self) -> usize {
        self.reclaim();
        self.tx_chunks - self.tx_free.len() - self.tx_staged as usize
    }

    /// The kernel's counters for the whole socket.
    pub fn kernel_stats(&self) -> Result<XskKernelStats, AfXdpError> {
        self.core.kernel_stats()
    }
}
