//! ICMP errors from the router: Time Exceeded (`ttl_expired`), Destination Unreachable
//! (`no_route`) and Fragmentation Needed / Packet Too Big (`too_big`), rate-limited as Linux
//! limits its own and counted per type.
//!
//! # Where it sits
//!
//! After forwarding, on the receive side of both loops: [`crate::forward::Forwarder::forward_in_place`]
//! drops a packet with one of those causes, leaving the frame as it arrived (for `too_big`
//! with its egress port in `out_port`), and the loop that received it (after the forward stage
//! of its burst: `Dataplane`'s `not_forwarded`, or `crate::mt`'s receive worker) hands it to
//! [`crate::forward::Forwarder::icmp_error`], the one function both call. When an error is
//! due it rewrites the dropped packet's own buffer into it (`zl_wire::icmp`: no allocation,
//! no second buffer), addressed to the previous hop (the frame's source MAC) from the
//! ingress port's MAC and address, and sets `out_port` to the ingress port. The loop then
//! hands it to that port's egress stage, [`crate::egress::Egress::originate`] (the threaded
//! router through the port's ring), which puts it in the batch the port sends next, ahead of
//! its class queues (decided: an error is a control message of at most 576 / 1280 octets,
//! already rate-limited here; it does not pass the egress AQM or shaper, as the kernel's own
//! errors do not pass a forwarding qdisc on another port).
//!
//! # Source address
//!
//! The ingress port's address of the packet's IP version: with `routing.source = "kernel"`
//! the interface's own addresses as netlink reports them (followed live, `zl_fib`), else the
//! port's configured `address` (`ports[i].address`); among several, the one whose prefix
//! holds the packet's source, else a global one, else any ([`zl_fib::pick_source`]).
//!
//! # Which packets get none (RFC 1812 §4.3.2.7)
//!
//! No error about an ICMP error, a non-initial fragment, a frame sent to a link-layer group
//! (broadcast or multicast) address, or a packet to an IP multicast group or the limited
//! broadcast ([`error_allowed`]); nor about a packet whose source names no single host
//! (0.0.0.0/8, 127/8, 224/4, 240/4 including 255.255.255.255; IPv6 unspecified, loopback,
//! multicast), whose source is one of the router's own addresses or the network or
//! broadcast address of one of its ports' IPv4 subnets shorter than /31, or whose
//! destination is such a network or broadcast address ([`names_no_host`]). The ports'
//! addresses are the kernel's with `routing.source = "kernel"`, else the configured ones
//! (or the interface's at start). Each is counted in [`IcmpCounters::suppressed`].
//!
//! # Counting
//!
//! The offending packet stays counted by its drop cause, so the conservation identity
//! (`received = forwarded + Σ drops + queued`) is unchanged. An error sent is an extra frame
//! the router originates: it appears in [`IcmpCounters::sent`] and in the ingress port's own
//! transmit counters (`PortCounters::tx_packets`), never in `received` or `forwarded`. So per
//! port, `tx_packets + tx drops = forwarded to it + ICMP errors sent from it`.
//!
//! # Rate limit (Linux `net/ipv4/icmp.c`, `net/ipv6/icmp.c`)
//!
//! Two token buckets, as the kernel's, with its sysctl defaults:
//! - a global one, `icmp_global_allow`: `icmp_msgs_per_sec` = 1000 credits a second, at most
//!   `icmp_msgs_burst` = 50, refilled only after 20 ms (`HZ / 50`) have passed, refill time
//!   capped at one second;
//! - one per destination host, `inet_peer_xrlim_allow`: a message costs `icmp_ratelimit` =
//!   1000 ms of tokens, tokens accrue with time up to `XRLIM_BURST_FACTOR` = 6 messages; a
//!   host not seen before starts full.
//!
//! Fragmentation Needed and Packet Too Big pass both (the kernel's `icmpv4_mask_allow` /
//! `icmpv6_mask_allow`: "Don't limit PMTU discovery"). decided: the kernel takes one global
//! credit plus a random 0..=2 per message (against a side channel on the global count,
//! CVE-2020-25705); here each message takes exactly one, as time and randomness are passed
//! into algorithms and the side channel concerns a host's own sockets, which this router has
//! none of. decided: the per-host buckets live in a fixed direct-mapped table of
//! [`PEER_SLOTS`] entries (no allocation per packet); a host whose slot another took starts
//! full again, as a kernel `inet_peer` evicted under memory pressure does. Each receive
//! worker of a threaded run has its own limiter with 1/N of the global rate and burst (no
//! lock or shared atomic on the packet path).

use std::net::IpAddr;

use serde::{Deserialize, Serialize};
use zl_core::Nanos;
use zl_port::PacketBuf;
use zl_wire::icmp::{error_allowed, write_error_in_place, IcmpError};
use zl_wire::{MacAddr, PacketInfo};

use crate::stats::DropCause;

/// `[icmp]`: whether and how fast the router sends ICMP errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IcmpParams {
    /// Send ICMP errors at all.
    pub enabled: bool,
    /// Linux `net.ipv4.icmp_ratelimit`: per destination host, one error per this many
    /// milliseconds (with a burst of 6); 0 turns the per-host limit off.
    pub ratelimit_ms: u32,
    /// Linux `net.ipv4.icmp_msgs_per_sec`: the global rate; 0 turns the global limit off.
    pub msgs_per_sec: u32,
    /// Linux `net.ipv4.icmp_msgs_burst`: the global burst.
    pub msgs_burst: u32,
}

impl Default for IcmpParams {
    fn default() -> Self {
        IcmpParams {
            enabled: true,
            ratelimit_ms: 1000,
            msgs_per_sec: 1000,
            msgs_burst: 50,
        }
    }
}

/// The kernel's `XRLIM_BURST_FACTOR`: a host's bucket holds this many messages.
pub const XRLIM_BURST_FACTOR: u64 = 6;
/// Slots of the per-host table.
pub const PEER_SLOTS: usize = 1024;
/// The global bucket refills only after this long (the kernel's `HZ / 50`).
const GLOBAL_MIN_REFILL: Nanos = Nanos(20_000_000);
const SECOND: u64 = 1_000_000_000;

#[derive(Clone, Copy, Debug, Default)]
struct PeerBucket {
    host: u128,
    /// Tokens in nanoseconds of `ratelimit`.
    tokens: u64,
    last: Nanos,
    used: bool,
}

/// The two token buckets of the module doc. Time is passed in.
#[derive(Clone, Debug)]
pub struct RateLimiter {
    params: IcmpParams,
    credit: u32,
    stamp: Nanos,
    peers: Box<[PeerBucket]>,
}

impl RateLimiter {
    /// A limiter with full buckets. `share` divides the global rate and burst (one of `share`
    /// receive workers; at least one message of burst each).
    pub fn new(params: IcmpParams, share: u32) -> Self {
        let share = share.max(1);
        let params = IcmpParams {
            msgs_per_sec: params.msgs_per_sec.div_ceil(share),
            msgs_burst: (params.msgs_burst / share).max(1),
            ..params
        };
        RateLimiter {
            params,
            credit: params.msgs_burst,
            stamp: Nanos::ZERO,
            peers: vec![PeerBucket::default(); PEER_SLOTS].into_boxed_slice(),
        }
    }

    /// Whether an error of `kind` to `host` may go at `now`; takes its tokens when it may.
    pub fn allow(&mut self, now: Nanos, host: IpAddr, kind: IcmpError) -> bool {
        if matches!(kind, IcmpError::TooBig { .. }) {
            return true;
        }
        self.global_allow(now) && self.peer_allow(now, host)
    }

    /// `icmp_global_allow`.
    fn global_allow(&mut self, now: Nanos) -> bool {
        if self.params.msgs_per_sec == 0 {
            return true;
        }
        let delta = now.saturating_sub(self.stamp).0.min(SECOND);
        if delta >= GLOBAL_MIN_REFILL.0 {
            let incr = (self.params.msgs_per_sec as u64 * delta / SECOND) as u32;
            if incr > 0 {
                self.stamp = now;
                self.credit = (self.credit + incr).min(self.params.msgs_burst);
            }
        }
        if self.credit == 0 {
            return false;
        }
        self.credit -= 1;
        true
    }

    /// `inet_peer_xrlim_allow` with `timeout` = `icmp_ratelimit`.
    fn peer_allow(&mut self, now: Nanos, host: IpAddr) -> bool {
        let timeout = self.params.ratelimit_ms as u64 * 1_000_000;
        if timeout == 0 {
            return true;
        }
        let key = match host {
            IpAddr::V4(a) => u128::from(a.to_ipv6_mapped()),
            IpAddr::V6(a) => u128::from(a),
        };
        let cap = XRLIM_BURST_FACTOR * timeout;
        let slot = &mut self.peers[peer_slot(key)];
        if !slot.used || slot.host != key {
            *slot = PeerBucket {
                host: key,
                tokens: cap,
                last: now,
                used: true,
            };
        }
        let tokens = (slot.tokens + now.saturating_sub(slot.last).0).min(cap);
        slot.last = now;
        let allowed = tokens >= timeout;
        slot.tokens = if allowed { tokens - timeout } else { tokens };
        allowed
    }
}

/// The table slot of a host: a multiplicative hash of its address folded to 64 bits.
fn peer_slot(key: u128) -> usize {
    let folded = (key as u64) ^ ((key >> 64) as u64);
    (folded.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) as usize % PEER_SLOTS
}

/// The layer-3 side of a port as configured: its addresses (the source of the errors it
/// sends, `ports[i].address`) and its egress MTU.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortL3 {
    /// (address, prefix length), IPv4 and IPv6.
    pub addresses: Vec<(IpAddr, u8)>,
    /// The largest IP packet (octets, IP header included, as Linux's interface MTU) the port
    /// sends; `None`: no check.
    pub mtu: Option<u32>,
    /// `mtu` is the config's `ports[i].mtu`, not the interface's as read at start: with
    /// kernel routing it still bounds the kernel's MTU followed at run time
    /// (`Forwarder::follow_mtus`), which otherwise replaces it.
    pub mtu_configured: bool,
}

/// What happened to the ICMP errors the router could have sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IcmpCounters {
    /// Sent, by [`IcmpKind`] index.
    pub sent: [u64; IcmpKind::ALL.len()],
    /// Held back by the rate limit.
    pub rate_limited: u64,
    /// Not sent by RFC 1812 §4.3.2.7 (about an ICMP error, a later fragment, a multicast or
    /// broadcast packet, a source that names no single host).
    pub suppressed: u64,
    /// Not sent: the ingress port has no address of the packet's IP version.
    pub no_source_address: u64,
    /// Not sent: the buffer could not hold it, or the send batch was full.
    pub no_room: u64,
}

impl IcmpCounters {
    pub fn add(&mut self, o: &IcmpCounters) {
        for (a, b) in self.sent.iter_mut().zip(o.sent) {
            *a += b;
        }
        self.rate_limited += o.rate_limited;
        self.suppressed += o.suppressed;
        self.no_source_address += o.no_source_address;
        self.no_room += o.no_room;
    }
    pub fn sent_of(&self, kind: IcmpKind) -> u64 {
        self.sent[kind as usize]
    }
    pub fn sent_total(&self) -> u64 {
        self.sent.iter().sum()
    }
}

/// The errors the router sends, for counting (both IP versions together).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IcmpKind {
    TimeExceeded,
    Unreachable,
    TooBig,
}

impl IcmpKind {
    pub const ALL: [IcmpKind; 3] = [
        IcmpKind::TimeExceeded,
        IcmpKind::Unreachable,
        IcmpKind::TooBig,
    ];
    pub const fn name(self) -> &'static str {
        match self {
            IcmpKind::TimeExceeded => "time_exceeded",
            IcmpKind::Unreachable => "unreachable",
            IcmpKind::TooBig => "too_big",
        }
    }
}

/// One loop's ICMP error stage: its rate limiter and its IPv4 identification counter (the
/// counts live in the loop's `Fates::icmp`).
#[derive(Clone, Debug)]
pub struct IcmpSender {
    enabled: bool,
    limiter: RateLimiter,
    ident: u16,
}

/// What [`IcmpSender::reply`] needs to know of the ports.
pub trait IcmpPorts {
    /// The address port `port` sends errors from, of `toward`'s IP version.
    fn source(&self, port: u16, toward: IpAddr) -> Option<IpAddr>;
    /// The port's own MAC.
    fn mac(&self, port: u16) -> Option<MacAddr>;
    /// The port's egress MTU.
    fn mtu(&self, port: u16) -> Option<u32>;
    /// The port's addresses (address, prefix length), which decide what names no single
    /// host ([`names_no_host`]); `None` past the last port.
    fn addresses(&self, port: u16) -> Option<&[(IpAddr, u8)]>;
}

/// Whether `a` is the network or the broadcast address of one of the IPv4 subnets of
/// `addrs` shorter than /31 (a /31 or /32 has neither, RFC 3021), as Linux's local table has
/// them as broadcast routes for every address, whether or not it was added with `brd`.
pub fn subnet_edge(addrs: &[(IpAddr, u8)], a: IpAddr) -> bool {
    let IpAddr::V4(a) = a else {
        return false;
    };
    let a = u32::from(a);
    addrs.iter().any(|&(addr, len)| match addr {
        IpAddr::V4(addr) if len < 31 => {
            let host = u32::MAX.checked_shr(u32::from(len)).unwrap_or(0);
            let net = u32::from(addr) & !host;
            a == net || a == net | host
        }
        _ => false,
    })
}

/// RFC 1812 §4.3.2.7 on what [`error_allowed`] cannot tell from the packet alone (and the
/// one source range it leaves out), none of which Linux answers (its `icmp_send` and its
/// martian-source check, `fib_validate_source`): the source is in 0.0.0.0/8 ("this
/// network", naming no host), is the network or broadcast address of a subnet on one of the
/// ports (the ingress port's above all), or is one of the router's own addresses (IPv4 or
/// IPv6: a spoofed or looped packet); or the destination is the network or broadcast address
/// of one of those subnets (a directed broadcast: not forwarded, and an error about it would
/// answer a packet meant for a whole subnet). Cold: asked only about a packet an error is due
/// for.
pub fn names_no_host(ports: &impl IcmpPorts, info: &PacketInfo) -> bool {
    if let IpAddr::V4(s) = info.src {
        if s.octets()[0] == 0 {
            return true;
        }
    }
    (0..=u16::MAX).map_while(|p| ports.addresses(p)).any(|a| {
        a.iter().any(|&(own, _)| own == info.src)
            || subnet_edge(a, info.src)
            || subnet_edge(a, info.dst)
    })
}

impl IcmpSender {
    /// A sender for one of `share` loops (see [`RateLimiter::new`]).
    pub fn new(params: IcmpParams, share: u32) -> Self {
        IcmpSender {
            enabled: params.enabled,
            limiter: RateLimiter::new(params, share),
            ident: 0,
        }
    }

    /// The error about a packet forwarding dropped for `cause`, when one is due: rewrites
    /// `buf` (as it arrived, parsed as `info`) into it, from the ingress port's address and
    /// MAC, sets `buf.out_port = buf.in_port`, and returns its kind; the caller hands `buf`
    /// to that port's egress (`Egress::originate`, which counts it sent). `None`: nothing is
    /// due (the cause has no error, ICMP is off, RFC 1812 forbids it, the limit holds it, the
    /// port has no address; counted in `counters` by reason), `buf` is unchanged and the
    /// caller frees it. For `too_big`, `buf.out_port` names the egress port whose MTU the
    /// packet exceeded.
    #[allow(clippy::too_many_arguments)]
    pub fn reply(
        &mut self,
        now: Nanos,
        buf: &mut PacketBuf,
        info: Option<&PacketInfo>,
        cause: DropCause,
        ports: &impl IcmpPorts,
        counters: &mut IcmpCounters,
    ) -> Option<IcmpKind> {
        let (Some(info), true) = (info, self.enabled) else {
            return None;
        };
        let (error, kind) = match cause {
            DropCause::TtlExpired => (IcmpError::TimeExceeded, IcmpKind::TimeExceeded),
            DropCause::NoRoute => (IcmpError::NoRoute, IcmpKind::Unreachable),
            // Only for a packet whose next hop did not resolve in time (the caller passes
            // this cause from the neighbour wait's expiry; a full wait queue drops silently,
            // as the kernel's `unres_qlen` does).
            DropCause::NoNeighbour => (IcmpError::HostUnreachable, IcmpKind::Unreachable),
            DropCause::TooBig => {
                let mtu = ports.mtu(buf.out_port)?;
                (IcmpError::TooBig { mtu }, IcmpKind::TooBig)
            }
            _ => return None,
        };
        let mac = ports.mac(buf.in_port)?;
        if !error_allowed(buf.as_slice(), info) || names_no_host(ports, info) {
            counters.suppressed += 1;
            return None;
        }
        let Some(src) = ports.source(buf.in_port, info.src) else {
            counters.no_source_address += 1;
            return None;
        };
        if !self.limiter.allow(now, info.src, error) {
            counters.rate_limited += 1;
            return None;
        }
        let len = buf.len();
        self.ident = self.ident.wrapping_add(1);
        match write_error_in_place(buf.data_room_mut(), len, info, error, src, mac, self.ident) {
            // `set_len` cannot fail: the length is within the data room.
            Ok(n) if buf.set_len(n).is_ok() => {
                buf.out_port = buf.in_port;
                Some(kind)
            }
            _ => {
                counters.no_room += 1;
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    /// Two ports: 10.0.1.1/24 and 2001:db8:1::1/64 on port 0, 10.0.2.1/24 and the
    /// point-to-point 10.0.3.0/31 on port 1.
    struct TwoPorts(Vec<Vec<(IpAddr, u8)>>);
    impl TwoPorts {
        fn new() -> Self {
            let a = |s: &str, l| (s.parse().unwrap(), l);
            TwoPorts(vec![
                vec![a("10.0.1.1", 24), a("2001:db8:1::1", 64)],
                vec![a("10.0.2.1", 24), a("10.0.3.0", 31)],
            ])
        }
    }
    impl IcmpPorts for TwoPorts {
        fn source(&self, port: u16, toward: IpAddr) -> Option<IpAddr> {
            zl_fib::pick_source(self.0.get(usize::from(port))?, toward)
        }
        fn mac(&self, _: u16) -> Option<MacAddr> {
            Some(MacAddr([2, 0, 0, 0, 0, 1]))
        }
        fn mtu(&self, _: u16) -> Option<u32> {
            Some(1500)
        }
        fn addresses(&self, port: u16) -> Option<&[(IpAddr, u8)]> {
            self.0.get(usize::from(port)).map(Vec::as_slice)
        }
    }

    /// What the sender says about a TTL-1 UDP packet from `src` to `dst` arriving on port 0
    /// to the router's unicast MAC.
    fn time_exceeded(src: &str, dst: &str) -> (Option<IcmpKind>, IcmpCounters) {
        let (src, dst): (IpAddr, IpAddr) = (src.parse().unwrap(), dst.parse().unwrap());
        let eth = etherparse::PacketBuilder::ethernet2([2, 0, 0, 0, 0, 9], [2, 0, 0, 0, 0, 1]);
        let b = match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => eth.ipv4(s.octets(), d.octets(), 1),
            (IpAddr::V6(s), IpAddr::V6(d)) => eth.ipv6(s.octets(), d.octets(), 1),
            _ => unreachable!(),
        };
        let mut frame = Vec::new();
        b.udp(4000, 33434).write(&mut frame, &[0; 20]).unwrap();
        let info = zl_wire::parse(&frame, &zl_wire::ParseConfig::default()).unwrap();
        let mut pool = zl_port::BufPool::new(1, 2048);
        let mut buf = pool.alloc().unwrap();
        buf.copy_from(&frame).unwrap();
        let mut counters = IcmpCounters::default();
        let mut sender = IcmpSender::new(IcmpParams::default(), 1);
        let kind = sender.reply(
            Nanos(1),
            &mut buf,
            Some(&info),
            DropCause::TtlExpired,
            &TwoPorts::new(),
            &mut counters,
        );
        (kind, counters)
    }

    #[test]
    fn no_error_to_a_source_or_about_a_destination_that_names_no_single_host() {
        for (src, dst) in [
            ("10.0.1.255", "192.168.0.1"),
            ("10.0.1.0", "192.168.0.1"),
            ("10.0.2.255", "192.168.0.1"),
            ("10.0.1.1", "192.168.0.1"),
            ("10.0.2.1", "192.168.0.1"),
            ("0.1.2.3", "192.168.0.1"),
            ("0.0.0.0", "192.168.0.1"),
            ("127.0.0.1", "192.168.0.1"),
            ("224.0.0.5", "192.168.0.1"),
            ("240.0.0.1", "192.168.0.1"),
            ("255.255.255.255", "192.168.0.1"),
            ("10.0.1.2", "10.0.2.255"),
            ("10.0.1.2", "10.0.2.0"),
            ("10.0.1.2", "255.255.255.255"),
            ("10.0.1.2", "239.1.1.1"),
            ("2001:db8:1::1", "2001:db8:9::1"),
            ("::", "2001:db8:9::1"),
            ("::1", "2001:db8:9::1"),
            ("ff02::1", "2001:db8:9::1"),
            ("2001:db8:1::2", "ff0e::1"),
        ] {
            let (kind, c) = time_exceeded(src, dst);
            assert_eq!(kind, None, "{src} -> {dst}");
            assert_eq!(c.suppressed, 1, "{src} -> {dst}: {c:?}");
        }
    }

    #[test]
    fn a_host_on_a_subnet_or_a_point_to_point_link_gets_its_error() {
        for (src, dst) in [
            ("10.0.1.2", "192.168.0.1"),
            ("10.0.1.254", "192.168.0.1"),
            ("192.0.2.7", "192.168.0.255"),
            // Both ends of a /31 are hosts (RFC 3021).
            ("10.0.3.1", "192.168.0.1"),
            ("10.0.1.2", "10.0.3.1"),
            ("2001:db8:1::2", "2001:db8:9::1"),
            ("2001:db8:1::", "2001:db8:9::1"),
        ] {
            let (kind, c) = time_exceeded(src, dst);
            assert_eq!(kind, Some(IcmpKind::TimeExceeded), "{src} -> {dst}: {c:?}");
        }
    }

    #[test]
    fn subnet_edges_are_the_network_and_broadcast_addresses_below_slash_31() {
        let v4 = |s: &str| -> IpAddr { s.parse().unwrap() };
        let addrs = [
            (v4("172.16.5.9"), 20),
            (v4("10.1.1.1"), 32),
            (v4("0.0.0.0"), 0),
        ];
        assert!(subnet_edge(&addrs, v4("172.16.0.0")));
        assert!(subnet_edge(&addrs, v4("172.16.15.255")));
        assert!(!subnet_edge(&addrs, v4("172.16.16.0")));
        assert!(!subnet_edge(&addrs, v4("10.1.1.1")));
        // A /0 address's edges are 0.0.0.0 and 255.255.255.255.
        assert!(subnet_edge(&addrs, v4("255.255.255.255")));
        assert!(!subnet_edge(&addrs, "2001:db8::".parse().unwrap()));
    }

    const MS: u64 = 1_000_000;
    fn at(ms: u64) -> Nanos {
        Nanos(ms * MS)
    }
    fn host(i: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, i))
    }

    #[test]
    fn a_host_gets_a_burst_of_six_then_one_a_second() {
        let mut l = RateLimiter::new(IcmpParams::default(), 1);
        let t0 = 10_000;
        let sent = (0..10)
            .filter(|_| l.allow(at(t0), host(1), IcmpError::TimeExceeded))
            .count();
        assert_eq!(sent, 6);
        // Another host is not held by the first one's bucket.
        assert!(l.allow(at(t0), host(2), IcmpError::NoRoute));
        // 999 ms later: not yet a whole token; at 1000 ms one.
        assert!(!l.allow(at(t0 + 999), host(1), IcmpError::TimeExceeded));
        assert!(l.allow(at(t0 + 1000), host(1), IcmpError::TimeExceeded));
        assert!(!l.allow(at(t0 + 1000), host(1), IcmpError::TimeExceeded));
    }

    #[test]
    fn the_global_bucket_holds_fifty_and_refills_a_thousand_a_second() {
        let params = IcmpParams {
            ratelimit_ms: 0,
            ..IcmpParams::default()
        };
        let mut l = RateLimiter::new(params, 1);
        let burst = (0..100u32)
            .filter(|i| l.allow(at(5_000), host(*i as u8), IcmpError::NoRoute))
            .count();
        assert_eq!(burst, 50);
        // 10 ms later: below the 20 ms refill step, nothing.
        assert!(!l.allow(at(5_010), host(1), IcmpError::NoRoute));
        // 20 ms: 20 credits.
        let refill = (0..100)
            .filter(|_| l.allow(at(5_020), host(1), IcmpError::NoRoute))
            .count();
        assert_eq!(refill, 20);
        // Over a simulated second at 1 ms steps: 1000 credits a second, not more.
        let mut sent = 0;
        for ms in 1..=1000 {
            sent += (0..30)
                .filter(|_| l.allow(at(5_020 + ms), host(1), IcmpError::NoRoute))
                .count();
        }
        assert_eq!(sent, 1000);
    }

    #[test]
    fn path_mtu_errors_are_not_limited() {
        let mut l = RateLimiter::new(IcmpParams::default(), 1);
        for _ in 0..500 {
            assert!(l.allow(at(1), host(1), IcmpError::TooBig { mtu: 1400 }));
        }
        assert!(l.allow(at(1), host(1), IcmpError::TimeExceeded));
    }

    #[test]
    fn workers_share_the_global_rate() {
        let params = IcmpParams {
            ratelimit_ms: 0,
            ..IcmpParams::default()
        };
        let mut l = RateLimiter::new(params, 2);
        let burst = (0..100)
            .filter(|_| l.allow(at(5_000), host(1), IcmpError::NoRoute))
            .count();
        assert_eq!(burst, 25);
    }

    #[test]
    fn ipv6_hosts_have_their_own_buckets() {
        let mut l = RateLimiter::new(IcmpParams::default(), 1);
        let a: IpAddr = "2001:db8::1".parse().unwrap();
        let b: IpAddr = "2001:db8::2".parse().unwrap();
        assert_eq!(
            (0..8)
                .filter(|_| l.allow(at(1), a, IcmpError::TimeExceeded))
                .count(),
            6
        );
        assert_eq!(
            (0..8)
                .filter(|_| l.allow(at(1), b, IcmpError::TimeExceeded))
                .count(),
            6
        );
    }
}
