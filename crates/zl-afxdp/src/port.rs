//! [`AfXdpPort`]: the sockets of one interface and the program that feeds them, as a
//! [`zl_port::Port`].

use std::ffi::CString;

use zl_core::Nanos;
use zl_port::{Batch, BufPool, Port, PortCounters, PortError, Readiness};

use crate::bpf::XdpAttachment;
use crate::socket::XskSocket;
use crate::{AfXdpConfig, AfXdpError, XskKernelStats};

/// An AF_XDP port: one socket per configured RX queue, transmit on the first.
///
/// Field order is drop order: the program is detached before the sockets close.
#[derive(Debug)]
pub struct AfXdpPort {
    attachment: Option<XdpAttachment>,
    sockets: Vec<XskSocket>,
    name: String,
    index: u16,
    ifname: String,
    ifindex: u32,
    next_rx: usize,
    rx_no_buffer: u64,
    rx_too_long: u64,
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

impl AfXdpPort {
    /// Opens the port `name` (index `index` in the data plane's port table).
    pub fn open(name: &str, index: u16, cfg: &AfXdpConfig) -> Result<Self, AfXdpError> {
        cfg.validate()?;
        let ifindex = interface_index(&cfg.ifname)?;
        let attachment = if cfg.attach_program {
            let max_queue = cfg.queues.iter().copied().max().unwrap_or(0);
            Some(XdpAttachment::attach(
                &cfg.ifname,
                ifindex,
                cfg.xdp_mode,
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
        Ok(AfXdpPort {
            attachment,
            sockets,
            name: name.to_owned(),
            index,
            ifname: cfg.ifname.clone(),
            ifindex,
            next_rx: 0,
            rx_no_buffer: 0,
            rx_too_long: 0,
        })
    }

    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// The XDP attachment, when the port loaded one.
    pub fn attachment(&self) -> Option<&XdpAttachment> {
        self.attachment.as_ref()
    }

    pub fn sockets(&self) -> &[XskSocket] {
        &self.sockets
    }

    pub fn sockets_mut(&mut self) -> &mut [XskSocket] {
        &mut self.sockets
    }

    /// Calls `on_frame` with up to `max` received frames, taking queues round-robin.
    pub fn recv_with(
        &mut self,
        max: usize,
        mut on_frame: impl FnMut(&[u8]),
    ) -> Result<usize, AfXdpError> {
        let mut got = 0;
        let n = self.sockets.len();
        for k in 0..n {
            if got >= max {
                break;
            }
            let i = (self.next_rx + k) % n;
            got += self.sockets[i].recv_with(max - got, &mut on_frame)?;
        }
        self.next_rx = (self.next_rx + 1) % n;
        Ok(got)
    }

    /// Transmits a burst on the first queue's socket; returns how many were accepted.
    pub fn send_burst<'a>(
        &mut self,
        frames: impl IntoIterator<Item = &'a [u8]>,
    ) -> Result<usize, AfXdpError> {
        self.sockets[0].send_burst(frames)
    }

    /// The kernel's counters summed over the port's sockets.
    pub fn kernel_stats(&self) -> Result<XskKernelStats, AfXdpError> {
        let mut t = XskKernelStats::default();
        for s in &self.sockets {
            let k = s.kernel_stats()?;
            t.rx_dropped += k.rx_dropped;
            t.rx_invalid_descs += k.rx_invalid_descs;
            t.tx_invalid_descs += k.tx_invalid_descs;
            t.rx_ring_full += k.rx_ring_full;
            t.rx_fill_ring_empty_descs += k.rx_fill_ring_empty_descs;
            t.tx_ring_empty_descs += k.tx_ring_empty_descs;
        }
        Ok(t)
    }

    fn port_error(&self, e: AfXdpError) -> PortError {
        match e {
            AfXdpError::InterfaceGone { detail, .. } => PortError::InterfaceGone {
                port: self.name.clone(),
                detail,
            },
            other => PortError::Io {
                port: self.name.clone(),
                context: "AF_XDP",
                source: std::io::Error::other(other.to_string()),
            },
        }
    }
}

impl Port for AfXdpPort {
    fn name(&self) -> &str {
        &self.name
    }

    fn recv(
        &mut self,
        now: Nanos,
        pool: &mut BufPool,
        batch: &mut Batch,
    ) -> Result<usize, PortError> {
        let index = self.index;
        let (mut no_buffer, mut too_long, mut added) = (0, 0, 0);
        let res = {
            let sockets = &mut self.sockets;
            let n = sockets.len();
            let mut result = Ok(());
            for k in 0..n {
                let room = batch.room();
                if room == 0 {
                    break;
                }
                let s = &mut sockets[(self.next_rx + k) % n];
                let r = s.recv_with(room, |frame| {
                    let Some(mut buf) = pool.alloc() else {
                        no_buffer += 1;
                        return;
                    };
                    if buf.copy_from(frame).is_err() {
                        too_long += 1;
                        pool.free(buf);
                        return;
                    }
                    buf.rx_time = now;
                    buf.in_port = index;
                    match batch.push(buf) {
                        Ok(()) => added += 1,
                        Err(buf) => pool.free(buf),
                    }
                });
                if let Err(e) = r {
                    result = Err(e);
                    break;
                }
            }
            result
        };
        self.next_rx = (self.next_rx + 1) % self.sockets.len();
        self.rx_no_buffer += no_buffer;
        self.rx_too_long += too_long;
        res.map_err(|e| self.port_error(e))?;
        Ok(added)
    }

    fn send(
        &mut self,
        _now: Nanos,
        batch: &mut Batch,
        pool: &mut BufPool,
    ) -> Result<usize, PortError> {
        let socket = &mut self.sockets[0];
        let mut sent = 0;
        for buf in batch.drain() {
            sent += usize::from(socket.stage_tx(buf.as_slice()));
            pool.free(buf);
        }
        socket.flush_tx().map_err(|e| self.port_error(e))?;
        Ok(sent)
    }

    fn readiness(&self) -> Readiness {
        Readiness::Live
    }

    fn counters(&self) -> PortCounters {
        let mut c = PortCounters {
            rx_no_buffer: self.rx_no_buffer,
            rx_too_long: self.rx_too_long,
            ..PortCounters::default()
        };
        for s in &self.sockets {
            let x = s.counters();
            c.rx_packets += x.rx_packets;
            c.rx_bytes += x.rx_bytes;
            c.tx_packets += x.tx_packets;
            c.tx_bytes += x.tx_bytes;
            c.tx_ring_full += x.tx_ring_full;
            c.tx_no_buffer += x.tx_kick_enobufs;
            c.tx_errors += x.tx_too_long;
        }
        // Frames the kernel could not put on a full RX ring or found no fill chunk for.
        if let Ok(k) = self.kernel_stats() {
            c.rx_ring_full += k.rx_ring_full + k.rx_fill_ring_empty_descs;
        }
        c.rx_packets -= self.rx_no_buffer + self.rx_too_long;
        c
    }
}
