//! The two rtnetlink sockets: [`Rtnl`] for requests (dumps, neighbour resolution), waiting
//! for each answer, and [`Follower`], bound to the multicast groups, for change events.

use std::io;
use std::net::IpAddr;
use std::time::Duration;

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_CREATE, NLM_F_DUMP,
    NLM_F_REQUEST,
};
use netlink_packet_route::address::AddressMessage;
use netlink_packet_route::link::LinkMessage;
use netlink_packet_route::neighbour::{
    NeighbourAddress, NeighbourAttribute, NeighbourFlags, NeighbourMessage,
};
use netlink_packet_route::route::RouteMessage;
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

use crate::parse;
use crate::{Groups, KernelAddr, KernelEvent, KernelLink, KernelNeighbour, KernelRoute};

/// `RTNLGRP_*` group numbers (linux/rtnetlink.h).
const RTNLGRP_LINK: u32 = 1;
const RTNLGRP_NEIGH: u32 = 3;
const RTNLGRP_IPV4_IFADDR: u32 = 5;
const RTNLGRP_IPV4_ROUTE: u32 = 7;
const RTNLGRP_IPV6_IFADDR: u32 = 9;
const RTNLGRP_IPV6_ROUTE: u32 = 11;

/// Receive buffer of the event socket: a routing daemon installing a full table sends
/// hundreds of thousands of events in a burst (`ip -batch` adds 100 k routes in about a
/// second, some 10 MB of messages); an overrun costs a re-dump of the whole table, not a
/// wrong table, but a re-dump of a million routes takes seconds, during which more events
/// overrun it. decided: 64 MiB, set with SO_RCVBUFFORCE (root or CAP_NET_ADMIN, as zlrouter
/// runs) because SO_RCVBUF is capped by `net.core.rmem_max` (208 KiB by default: an overrun
/// every few thousand routes). The kernel charges only what is queued.
const FOLLOWER_RCVBUF: usize = 64 << 20;

/// Sets the socket's receive buffer to `bytes`, past `rmem_max` when privileged.
fn set_rcvbuf(s: &Socket, bytes: usize) {
    let v = bytes.min(i32::MAX as usize) as libc::c_int;
    // SAFETY: setsockopt reads `size_of::<c_int>()` bytes from a live c_int on the stack; the
    // fd is the socket's own, open for the call.
    let forced = unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(s),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            &v as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if forced < 0 {
        // Unprivileged: as much as `rmem_max` allows.
        let _ = s.set_rx_buf_sz(bytes);
    }
}

fn open() -> io::Result<Socket> {
    let mut s = Socket::new(NETLINK_ROUTE)?;
    s.bind_auto()?;
    s.connect(&SocketAddr::new(0, 0))?;
    Ok(s)
}

fn set_timeout(s: &Socket, t: Duration) -> io::Result<()> {
    let tv = libc::timeval {
        tv_sec: t.as_secs() as libc::time_t,
        tv_usec: t.subsec_micros() as libc::suseconds_t,
    };
    // SAFETY: setsockopt reads `size_of::<timeval>()` bytes from a live timeval on the stack;
    // the fd is the socket's own, open for the call.
    let rc = unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(s),
            libc::SOL_SOCKET,
            libc::SO_RCVTIMEO,
            &tv as *const libc::timeval as *const libc::c_void,
            std::mem::size_of::<libc::timeval>() as libc::socklen_t,
        )
    };
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// Splits one datagram into its netlink messages.
fn messages(buf: &[u8]) -> io::Result<Vec<NetlinkMessage<RouteNetlinkMessage>>> {
    let mut out = Vec::new();
    let mut off = 0;
    while off < buf.len() {
        let msg = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&buf[off..])
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
        let len = msg.header.length as usize;
        if len == 0 {
            break;
        }
        out.push(msg);
        // Messages are 4-byte aligned (NLMSG_ALIGN).
        off += (len + 3) & !3;
    }
    Ok(out)
}

/// The request socket: dumps and neighbour resolution, one at a time.
#[derive(Debug)]
pub struct Rtnl {
    sock: Socket,
    seq: u32,
}

/// How long a request waits for the kernel's answer before giving up with `TimedOut`.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

impl Rtnl {
    /// Opens a socket in the calling thread's network namespace.
    pub fn open() -> io::Result<Self> {
        let sock = open()?;
        set_timeout(&sock, REQUEST_TIMEOUT)?;
        Ok(Rtnl { sock, seq: 0 })
    }

    /// Sends `msg` with `flags` and collects every inner message of the answer until
    /// NLMSG_DONE (a dump) or the ACK (a request with NLM_F_ACK).
    fn request(
        &mut self,
        msg: RouteNetlinkMessage,
        flags: u16,
    ) -> io::Result<Vec<RouteNetlinkMessage>> {
        self.seq = self.seq.wrapping_add(1);
        let mut header = NetlinkHeader::default();
        header.flags = flags;
        header.sequence_number = self.seq;
        let mut nl = NetlinkMessage::new(header, NetlinkPayload::InnerMessage(msg));
        nl.finalize();
        let mut buf = vec![0u8; nl.buffer_len()];
        nl.serialize(&mut buf);
        self.sock.send(&buf, 0)?;
        let mut out = Vec::new();
        let mut rx = vec![0u8; 64 * 1024];
        loop {
            let n = self.sock.recv(&mut &mut rx[..], 0)?;
            for m in messages(&rx[..n])? {
                if m.header.sequence_number != self.seq {
                    continue; // an answer to an earlier, abandoned request
                }
                match m.payload {
                    NetlinkPayload::InnerMessage(inner) => out.push(inner),
                    NetlinkPayload::Done(_) => return Ok(out),
                    NetlinkPayload::Error(e) => {
                        return match e.code {
                            None => Ok(out), // the ACK
                            Some(_) => Err(e.to_io()),
                        };
                    }
                    _ => {}
                }
            }
        }
    }

    fn dump(&mut self, msg: RouteNetlinkMessage) -> io::Result<Vec<RouteNetlinkMessage>> {
        self.request(msg, NLM_F_REQUEST | NLM_F_DUMP)
    }

    /// Every address of every interface, both families.
    pub fn dump_addresses(&mut self) -> io::Result<Vec<KernelAddr>> {
        let msgs = self.dump(RouteNetlinkMessage::GetAddress(AddressMessage::default()))?;
        Ok(msgs
            .into_iter()
            .filter_map(|m| match m {
                RouteNetlinkMessage::NewAddress(a) => parse::address(&a),
                _ => None,
            })
            .collect())
    }

    /// The main table's unicast, blackhole and unreachable routes, both families.
    pub fn dump_routes(&mut self) -> io::Result<Vec<KernelRoute>> {
        let mut out = Vec::new();
        for family in [AddressFamily::Inet, AddressFamily::Inet6] {
            let mut req = RouteMessage::default();
            req.header.address_family = family;
            for m in self.dump(RouteNetlinkMessage::GetRoute(req))? {
                if let RouteNetlinkMessage::NewRoute(r) = m {
                    out.extend(parse::route(&r));
                }
            }
        }
        Ok(out)
    }

    /// Every interface's index and MTU.
    pub fn dump_links(&mut self) -> io::Result<Vec<KernelLink>> {
        let msgs = self.dump(RouteNetlinkMessage::GetLink(LinkMessage::default()))?;
        Ok(msgs
            .into_iter()
            .filter_map(|m| match m {
                RouteNetlinkMessage::NewLink(l) => parse::link(&l),
                _ => None,
            })
            .collect())
    }

    /// The neighbour table, both families.
    pub fn dump_neighbours(&mut self) -> io::Result<Vec<KernelNeighbour>> {
        let msgs = self.dump(RouteNetlinkMessage::GetNeighbour(
            NeighbourMessage::default(),
        ))?;
        Ok(msgs
            .into_iter()
            .filter_map(|m| match m {
                RouteNetlinkMessage::NewNeighbour(n) => parse::neighbour(&n),
                _ => None,
            })
            .collect())
    }

    /// Asks the kernel to resolve `addr` on `ifindex`: RTM_NEWNEIGH with NTF_USE creates the
    /// entry if needed and kicks its state machine as an outgoing packet would (an ARP
    /// request / neighbour solicitation now, retries per the interface's `mcast_solicit`),
    /// without touching an entry that is already reachable. The result comes as a
    /// [`KernelEvent::Neighbour`] on a [`Follower`].
    pub fn resolve_neighbour(&mut self, ifindex: u32, addr: IpAddr) -> io::Result<()> {
        let mut m = NeighbourMessage::default();
        m.header.ifindex = ifindex;
        m.header.flags = NeighbourFlags::Use;
        m.header.family = match addr {
            IpAddr::V4(_) => AddressFamily::Inet,
            IpAddr::V6(_) => AddressFamily::Inet6,
        };
        m.attributes
            .push(NeighbourAttribute::Destination(match addr {
                IpAddr::V4(a) => NeighbourAddress::Inet(a),
                IpAddr::V6(a) => NeighbourAddress::Inet6(a),
            }));
        self.request(
            RouteNetlinkMessage::NewNeighbour(m),
            NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE,
        )
        .map(|_| ())
    }
}

/// The event socket, joined to the groups asked for.
#[derive(Debug)]
pub struct Follower {
    sock: Socket,
    rx: Vec<u8>,
}

impl Follower {
    /// Joins `groups` in the calling thread's network namespace. Join before dumping (see
    /// the crate doc).
    pub fn subscribe(groups: Groups) -> io::Result<Self> {
        let sock = open()?;
        set_rcvbuf(&sock, FOLLOWER_RCVBUF);
        let mut joined = Vec::new();
        if groups.links {
            joined.push(RTNLGRP_LINK);
        }
        if groups.addresses {
            joined.extend([RTNLGRP_IPV4_IFADDR, RTNLGRP_IPV6_IFADDR]);
        }
        if groups.routes {
            joined.extend([RTNLGRP_IPV4_ROUTE, RTNLGRP_IPV6_ROUTE]);
        }
        if groups.neighbours {
            joined.push(RTNLGRP_NEIGH);
        }
        for g in joined {
            sock.add_membership(g)?;
        }
        Ok(Follower {
            sock,
            rx: vec![0u8; 256 * 1024],
        })
    }

    /// The events of the next datagram, waiting at most `timeout` for one (an empty vector
    /// when none came; a zero timeout does not wait). Messages this crate does not model are
    /// left out.
    pub fn next(&mut self, timeout: Duration) -> io::Result<Vec<KernelEvent>> {
        // A datagram already queued is taken without setting the timeout: during a burst
        // (a daemon installing a table) that is one system call per datagram, not two.
        let n = match self.recv(libc::MSG_DONTWAIT) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock && timeout.is_zero() => {
                return Ok(Vec::new())
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                set_timeout(&self.sock, timeout.max(Duration::from_micros(1)))?;
                self.recv(0)
            }
            r => r,
        };
        let n = match n {
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                return Ok(Vec::new())
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                return Ok(vec![KernelEvent::Resync])
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        decode_events(&self.rx[..n])
    }

    fn recv(&mut self, flags: libc::c_int) -> io::Result<usize> {
        self.sock.recv(&mut &mut self.rx[..], flags)
    }
}

/// Decodes one datagram of kernel announcements into events, as [`Follower::next`] does with
/// each datagram it receives (public so that the decoding of what arrives from outside the
/// process can be tested and fuzzed without a socket: `fuzz/fuzz_targets/netlink_events.rs`).
///
/// Messages this crate does not model (link deletions, other tables, MPLS, unknown types, a prefix
/// longer than its address) are left out; bytes that are not netlink messages are an
/// `InvalidData` error, never a panic.
pub fn decode_events(datagram: &[u8]) -> io::Result<Vec<KernelEvent>> {
    Ok(messages(datagram)?
        .into_iter()
        .filter_map(|m| match m.payload {
            NetlinkPayload::InnerMessage(inner) => parse::event(inner),
            _ => None,
        })
        .collect())
}
