//! The ingress half of the pipeline: parse -> route (LPM, TTL / hop-limit decrement, next-hop
//! and own MACs) or bridge -> the packet's AQM metadata. Everything a packet goes through
//! before its egress port's QoS (classify, meter, admission, queue).
//!
//! [`Forwarder::forward_in_place`] is the forward stage of both engines (`crate::stages`, run
//! over each burst by the single-thread loop and by the threaded router's receive workers in
//! `crate::mt`), so both forward with the same semantics and the same drop causes:
//! `parse_error` (router mode: the frame is not Ethernet + IPv4/IPv6), `no_route` (no route
//! matched, or a bridge port without a peer), `ttl_expired`, `too_big` (larger than the egress
//! port's MTU: IPv4 with DF, or IPv6), `no_neighbour` (kernel routing: the next hop has no MAC
//! yet). A packet dropped as `no_route`, `ttl_expired` or `too_big` is left as it arrived, for
//! the ICMP error about it ([`Forwarder::icmp_error`], `crate::icmp`), which both loops then ask
//! for.

use std::net::IpAddr;
use zl_aqm::PacketMeta;

use zl_core::{Color, Nanos};
use zl_port::PacketBuf;
use zl_wire::{IpVersion, MacAddr, PacketInfo, ParseConfig, PlainIpv4, QosHeaders, TtlOutcome};

use crate::icmp::{subnet_edge, IcmpCounters, IcmpKind, IcmpParams, IcmpPorts, IcmpSender, PortL3};
use crate::priority::PriorityMap;
use crate::route::RouteTable;
use crate::stats::DropCause;

/// Forwarding, resolved to port indices.
#[derive(Clone, Debug)]
pub enum Forwarding {
    Router(RouteTable),
    /// Kernel routing (`[routing] source = "kernel"`): the config's static routes, mixed into
    /// the kernel's table once the data plane follows it (`Dataplane::follow_kernel`).
    Kernel(Vec<zl_fib::StaticRoute>),
    /// `peer[i]`: where frames received on port i go (`None`: dropped as no route).
    Bridge(Vec<Option<u16>>),
}

impl Forwarding {
    /// True when some packet can be sent out of port `port`.
    pub fn is_egress(&self, port: u16) -> bool {
        match self {
            Forwarding::Router(table) => table.egress_ports().contains(&port),
            // Any port the kernel routes through.
            Forwarding::Kernel(_) => true,
            Forwarding::Bridge(peer) => peer.contains(&Some(port)),
        }
    }
}

/// Kernel routing's table as the poll loop sees it: the snapshot reader and the queue of
/// resolve requests to the control thread (`zl_fib`).
#[derive(Clone, Debug)]
pub struct KernelFib {
    pub reader: zl_fib::FibReader,
    pub resolve: std::sync::Arc<zl_fib::ResolveQueue>,
    /// The control thread following the kernel, stopped when the last holder goes.
    pub follower: Option<std::sync::Arc<zl_fib::FibFollower>>,
}

impl KernelFib {
    /// The config's static routes alone, followed by nothing (until
    /// `Dataplane::follow_kernel`).
    fn statics_only(statics: &[zl_fib::StaticRoute]) -> Self {
        let state = zl_fib::FibState::new([], statics.to_vec());
        KernelFib {
            reader: zl_fib::FibHandle::new(state.snapshot()).reader(),
            resolve: zl_fib::ResolveQueue::new(1),
            follower: None,
        }
    }
}

/// What forwarding keeps of a packet for its egress ([`Forwarder::forward_in_place`]): its AQM
/// metadata and the headers its egress may rewrite.
pub type Kept = (PacketMeta, Option<QosHeaders>);

/// Forwarding state shared by every receive path; read-only while forwarding (kernel
/// routing's snapshot is swapped between polls, [`Forwarder::refresh`]).
#[derive(Clone, Debug)]
pub struct Forwarder {
    forwarding: Forwarding,
    kernel: Option<KernelFib>,
    parse: ParseConfig,
    priority: PriorityMap,
    /// Each port's own MAC (the source MAC of routed frames leaving it) and egress MTU, by
    /// port index.
    egress: Vec<EgressL2>,
    /// Each port's configured addresses and egress MTU, by port index (none: no MTU check,
    /// no configured ICMP source address).
    l3: Vec<PortL3>,
    /// Whether and how fast ICMP errors are sent (each loop builds its `IcmpSender` from it).
    icmp: IcmpParams,
}

impl Forwarder {
    pub fn new(
        forwarding: Forwarding,
        parse: ParseConfig,
        priority: PriorityMap,
        macs: Vec<MacAddr>,
    ) -> Self {
        let kernel = match &forwarding {
            Forwarding::Kernel(statics) => Some(KernelFib::statics_only(statics)),
            _ => None,
        };
        Forwarder {
            forwarding,
            kernel,
            parse,
            priority,
            egress: macs.into_iter().map(EgressL2::new).collect(),
            l3: Vec::new(),
            icmp: IcmpParams::default(),
        }
    }

    /// Sets the ports' configured addresses and egress MTUs (by port index) and the ICMP
    /// settings (`crate::icmp`).
    pub fn set_l3(&mut self, l3: Vec<PortL3>, icmp: IcmpParams) {
        self.l3 = l3;
        self.icmp = icmp;
        self.follow_mtus();
    }

    /// Sets each port's egress MTU (the `too_big` check's and the one Fragmentation Needed /
    /// Packet Too Big announce): with kernel routing, the kernel's MTU of the interface now
    /// (`ip link set X mtu N` takes effect at the next snapshot, as on a Linux router), or
    /// the config's `ports[i].mtu` where that is smaller (decided: the config can lower the
    /// MTU, e.g. for a tunnel behind the port, but not raise it: a frame longer than the
    /// interface's MTU cannot leave it, AF_XDP refuses it as `tx_no_buffer`); else the port's
    /// MTU as set at start (configured, or read from the interface). Called when the table
    /// changes, never per packet: the forwarding path reads the MTU from `EgressL2` as in
    /// static routing, at the same cost.
    #[cold]
    #[inline(never)]
    fn follow_mtus(&mut self) {
        let fib = self.kernel.as_ref().map(|k| k.reader.fib());
        for (p, e) in self.egress.iter_mut().enumerate() {
            let l3 = self.l3.get(p);
            let at_start = l3.and_then(|l| l.mtu);
            let configured = l3.filter(|l| l.mtu_configured).and_then(|l| l.mtu);
            let kernel = fib.and_then(|f| f.mtu(p as u16));
            let mtu = match (kernel, configured) {
                (Some(k), Some(c)) => Some(k.min(c)),
                (Some(k), None) => Some(k),
                (None, _) => at_start,
            };
            e.mtu = mtu.unwrap_or(u32::MAX);
        }
    }
    /// Replaces the priority map (a live reload, between polls).
    pub fn set_priority(&mut self, priority: PriorityMap) {
        self.priority = priority;
    }
    /// The ICMP settings, for each loop's [`IcmpSender`].
    pub fn icmp_params(&self) -> IcmpParams {
        self.icmp
    }
    /// The ports' configured addresses and MTUs, by port index.
    pub fn l3(&self) -> &[PortL3] {
        &self.l3
    }

    /// The ICMP error about a packet [`Forwarder::forward_in_place`] dropped for `cause`,
    /// written over `buf` by `sender` when one is due (see [`IcmpSender::reply`]): then
    /// `buf.out_port` is the ingress port and the caller hands `buf` to that port's egress
    /// (`Egress::originate`). The one ICMP step of both loops.
    #[inline]
    pub fn icmp_error(
        &self,
        sender: &mut IcmpSender,
        counters: &mut IcmpCounters,
        now: Nanos,
        buf: &mut PacketBuf,
        info: Option<&PacketInfo>,
        cause: DropCause,
    ) -> Option<IcmpKind> {
        // A kernel blackhole route drops silently (`ip route add blackhole`, RTBH); looked up
        // again here, off the forwarding path, rather than given a drop cause of its own.
        if let (DropCause::NoRoute, Some(fib), Some(i)) = (cause, self.kernel_fib(), info) {
            if fib.decide(i.dst) == zl_fib::Decision::Blackhole {
                return None;
            }
        }
        sender.reply(now, buf, info, cause, self, counters)
    }

    /// Kernel routing (`[routing] source = "kernel"`): dumps the kernel's main table,
    /// neighbour table, addresses and links in the calling thread's namespace and follows
    /// them on a control thread from now on (`zl_fib::FibFollower`); `ports` maps each
    /// kernel interface index to its port index. Every copy of this forwarder made after
    /// (the threaded router's receive workers) reads the same table.
    pub fn follow_kernel(&mut self, ports: Vec<(u32, u16)>) -> std::io::Result<()> {
        let Forwarding::Kernel(statics) = &self.forwarding else {
            return Err(std::io::Error::other(
                "the config's routing.source is not \"kernel\"",
            ));
        };
        let state = zl_fib::FibState::new(ports, statics.clone());
        let resolve = zl_fib::ResolveQueue::new(1024);
        let (handle, follower) = zl_fib::FibFollower::start(state, resolve.clone())?;
        self.set_kernel_fib(KernelFib {
            reader: handle.reader(),
            resolve,
            follower: Some(std::sync::Arc::new(follower)),
        });
        Ok(())
    }

    /// Kernel routing: routes by `fib` from now on.
    pub fn set_kernel_fib(&mut self, fib: KernelFib) {
        self.kernel = Some(fib);
        self.follow_mtus();
    }

    /// Kernel routing: picks up the newest table (the poll loop calls this once per poll,
    /// the one place it sees route, neighbour, address and MTU changes); true when it
    /// changed.
    #[inline]
    pub fn refresh(&mut self) -> bool {
        let changed = self.kernel.as_mut().is_some_and(|k| k.reader.refresh());
        if changed {
            self.follow_mtus();
        }
        changed
    }

    /// Kernel routing: the table held now.
    pub fn kernel_fib(&self) -> Option<&zl_fib::Fib> {
        self.kernel.as_ref().map(|k| k.reader.fib())
    }

    /// Kernel routing: the follower's counters and lag (`None` without one).
    pub fn fib_follow(&self) -> Option<&zl_fib::FollowStats> {
        Some(self.kernel.as_ref()?.follower.as_ref()?.stats())
    }

    /// Kernel routing: the port and next hop whose MAC `dst` waits for, if it does.
    pub fn unresolved(&self, dst: std::net::IpAddr) -> Option<(u16, std::net::IpAddr)> {
        match self.kernel_fib()?.decide(dst) {
            zl_fib::Decision::Resolve { port, next_hop } => Some((port, next_hop)),
            _ => None,
        }
    }

    /// Kernel routing: asks the control thread to have `next_hop` resolved (wait-free).
    pub fn request_resolve(&self, port: u16, next_hop: std::net::IpAddr) {
        if let Some(k) = &self.kernel {
            k.resolve.request(port, next_hop);
        }
    }

    pub fn forwarding(&self) -> &Forwarding {
        &self.forwarding
    }
    /// The routing table (router mode): a handle a control thread may keep to add and remove
    /// routes while the receive paths forward.
    pub fn routes(&self) -> Option<&RouteTable> {
        match &self.forwarding {
            Forwarding::Router(table) => Some(table),
            Forwarding::Kernel(_) | Forwarding::Bridge(_) => None,
        }
    }
    pub fn parse_config(&self) -> &ParseConfig {
        &self.parse
    }

    /// Parses `buf` and routes it (longest-prefix match, TTL / hop-limit decrement, next-hop
    /// MAC as destination and the egress port's MAC as source) or bridges it (to the peer of
    /// `buf.in_port`, unchanged), setting `buf.out_port`: the forward stage of both engines
    /// (`crate::stages`). For a packet it keeps it writes the AQM metadata and the headers its
    /// egress may rewrite (`None` for a bridged frame that did not parse) into `kept`, the
    /// packet's lane: written there in place, not returned, they are not copied through the
    /// stack on their way. One it discards comes back as its cause; the caller counts it and
    /// frees the buffer, after [`Forwarder::parse_again`] when it needs the headers (the ICMP
    /// error, the neighbour wait's next hop).
    ///
    /// The common frame (untagged IPv4 without options) is forwarded on the [`PlainIpv4`]
    /// parse read it as, kept in registers, with its rewritable headers a [`QosHeaders`] of
    /// constants and its TOS; any other frame takes the general parse, out of line. Decided: no
    /// whole `PacketInfo` (about 140 bytes) lives through this function, not even for the
    /// packets it discards: holding one, or the common frame's fields that forwarding does not
    /// read, to the end of it costs their spills on every packet, and a discarded packet is
    /// parsed again off the common path instead. The two kinds of frame meet before the one
    /// egress admission of each caller (a second copy of the admission made LLVM call the QoS
    /// engine's steps out of line).
    #[inline(always)]
    pub fn forward_in_place(&self, buf: &mut PacketBuf, kept: &mut Kept) -> Result<(), DropCause> {
        match PlainIpv4::parse(buf.as_slice(), &self.parse) {
            Some(mut plain) => {
                kept.0 = self.forward_plain(buf, &mut plain)?;
                kept.1 = Some(QosHeaders {
                    l3_offset: PlainIpv4::L3_OFFSET,
                    ip_version: IpVersion::V4,
                    tos: plain.tos,
                    cc_ext: None,
                });
            }
            None => {
                let (meta, headers) = self.forward_other(buf)?;
                // The metadata rebuilt from its fields, not moved whole out of the call's
                // result: moved whole, its 7 bytes of padding would go along to the queue
                // entry of every packet, the common frame's too. Forwarding leaves every
                // packet green (metering comes in admission), and a field set anew keeps the
                // compiler from folding the rebuild back into a move.
                debug_assert_eq!(meta.color, Color::Green);
                kept.0 = PacketMeta {
                    color: Color::Green,
                    ..meta
                };
                kept.1 = headers;
            }
        }
        Ok(())
    }

    /// The headers of a packet [`Forwarder::forward_in_place`] discarded, parsed again: as
    /// forwarding left it (unchanged, or with only its TTL and checksum rewritten, as its
    /// parsed headers were), so the same; `None` when it does not parse.
    #[cold]
    #[inline(never)]
    pub fn parse_again(&self, buf: &PacketBuf) -> Option<PacketInfo> {
        zl_wire::parse(buf.as_slice(), &self.parse).ok()
    }

    /// The forwarding of a frame other than the common one ([`Forwarder::forward_general`]),
    /// out of line: the packet's AQM metadata and rewritable headers.
    #[cold]
    #[inline(never)]
    fn forward_other(&self, buf: &mut PacketBuf) -> Result<Kept, DropCause> {
        let mut parsed = None;
        let meta = self.forward_general(buf, &mut parsed)?;
        Ok((meta, parsed.as_ref().map(QosHeaders::of)))
    }

    /// [`Forwarder::forward_in_place`] of the common frame (untagged IPv4 without options),
    /// its headers as [`PlainIpv4::parse`] read them from `buf` (`plain`, its TTL rewritten
    /// as a `PacketInfo`'s would be).
    #[inline]
    fn forward_plain(
        &self,
        buf: &mut PacketBuf,
        plain: &mut PlainIpv4,
    ) -> Result<PacketMeta, DropCause> {
        self.forward_parsed(buf, Ok(()), Some(plain))
    }

    /// [`Forwarder::forward_in_place`] of a frame [`PlainIpv4::parse`] declined: the general
    /// parse (`zl_wire::parse_into_general`), then the same steps.
    #[inline]
    fn forward_general(
        &self,
        buf: &mut PacketBuf,
        info: &mut Option<PacketInfo>,
    ) -> Result<PacketMeta, DropCause> {
        let parsed = zl_wire::parse_into_general(buf.as_slice(), &self.parse, info);
        self.forward_parsed(buf, parsed, info.as_mut())
    }

    /// The forwarding steps after the parse (`parsed`, with `info` `Some` exactly when it is
    /// `Ok`), on either form of the parsed headers ([`Parsed`]): the common frame's
    /// [`PlainIpv4`], whose offsets and version are constants, or a whole [`PacketInfo`].
    #[inline(always)]
    fn forward_parsed<H: Parsed>(
        &self,
        buf: &mut PacketBuf,
        parsed: Result<(), zl_wire::ParseError>,
        info: Option<&mut H>,
    ) -> Result<PacketMeta, DropCause> {
        let len = buf.len() as u32;
        // Each way below reads the headers through the one reference it takes here.
        // The next hop's MAC by reference, where the table or the decision keeps it: as a
        // value from either way it would be built in a register and split again to be
        // written.
        let decision;
        let ((port, mac), info) = match (&self.forwarding, parsed, info) {
            // The next hop's port and MAC only (not its gateway address): all that is read.
            (Forwarding::Router(table), Ok(()), Some(info)) => match table.lookup_ref(info.dst()) {
                Some(nh) => ((nh.port, &nh.mac), info),
                None => return Err(DropCause::NoRoute),
            },
            // The kernel path's lookup out of line and given the destination by value: with
            // `info` passed by reference to a call (or its checks inlined here) the static
            // path's headers no longer stayed in registers, 827 -> 849 instructions per
            // packet in the pipeline bench (callgrind), though it never runs them.
            (Forwarding::Kernel(_), Ok(()), Some(info)) => match self.kernel_next_hop(info.dst()) {
                Ok(hop) => {
                    decision = hop;
                    ((decision.0, &decision.1), info)
                }
                // To a next hop whose MAC is not known: as Linux's `ip_forward` checks the
                // TTL and then the MTU before the neighbour output, an expiring packet is
                // `ttl_expired` (Time Exceeded at once, not Host Unreachable after the
                // wait) and one too big for the port `too_big`; the rest are
                // `no_neighbour`, which the caller holds while the next hop resolves
                // (`Forwarder::unresolved`).
                Err(Some(port)) => {
                    if info.ttl() <= 1 {
                        return Err(DropCause::TtlExpired);
                    }
                    let mtu = self.egress.get(port as usize).map_or(u32::MAX, |e| e.mtu);
                    if info.too_big(mtu as usize, buf.as_slice()) {
                        buf.out_port = port;
                        return Err(DropCause::TooBig);
                    }
                    return Err(DropCause::NoNeighbour);
                }
                Err(None) => return Err(DropCause::NoRoute),
            },
            (Forwarding::Router(_) | Forwarding::Kernel(_), _, _) => {
                return Err(DropCause::ParseError)
            }
            (Forwarding::Bridge(peer), _, info) => {
                return match peer.get(buf.in_port as usize).copied().flatten() {
                    Some(p) => {
                        buf.out_port = p;
                        Ok(match info {
                            Some(i) => i.meta(len, &self.priority),
                            None => PacketMeta {
                                len,
                                ..PacketMeta::default()
                            },
                        })
                    }
                    None => Err(DropCause::NoRoute),
                };
            }
        };
        // A route to a port that does not exist (only through `Dataplane::new` with
        // hand-built parts; the config checks its routes) goes nowhere.
        let Some(EgressL2 { mac: src, mtu }) = self.egress.get(port as usize) else {
            return Err(DropCause::NoRoute);
        };
        // After the TTL check (an expiring packet gets Time Exceeded, as in Linux's
        // `ip_forward`), before the decrement (the error quotes the packet as it came).
        if info.ttl() > 1 && info.too_big(*mtu as usize, buf.as_slice()) {
            buf.out_port = port;
            return Err(DropCause::TooBig);
        }
        match info.decrement_ttl(buf.as_mut_slice()) {
            Ok(TtlOutcome::Forwarded { .. }) => {}
            Ok(TtlOutcome::Expired) | Err(_) => return Err(DropCause::TtlExpired),
        }
        if zl_wire::set_macs(buf.as_mut_slice(), *mac, *src).is_err() {
            return Err(DropCause::ParseError);
        }
        buf.out_port = port;
        Ok(info.meta(len, &self.priority))
    }

    /// Kernel routing: the egress port and next-hop MAC for a packet to `dst`; else
    /// `Err(Some(port))` when the next hop's MAC is not known yet, `Err(None)` when the
    /// packet is not forwarded (`no_route`). Not forwarded, not resolved and without an
    /// ICMP error (`crate::icmp`): a multicast group or the limited broadcast (no multicast
    /// routing; RFC 1812 §5.3.5.1, Linux delivers 255.255.255.255 locally), and a directed
    /// broadcast, the network or broadcast address of a subnet on one of the ports, which a
    /// Linux router delivers locally with `bc_forwarding` 0 (looked for only when the next
    /// hop has no MAC or a group MAC, the kernel's NOARP entry for a broadcast address).
    #[inline(never)]
    fn kernel_next_hop(&self, dst: IpAddr) -> Result<(u16, MacAddr), Option<u16>> {
        if is_group(dst) {
            return Err(None);
        }
        let fib = self.kernel_fib().ok_or(None)?;
        match fib.decide(dst) {
            zl_fib::Decision::Forward { port, mac }
                if mac.0[0] & 1 == 0 || !self.directed_broadcast(fib, dst) =>
            {
                Ok((port, mac))
            }
            zl_fib::Decision::Resolve { port, .. } if !self.directed_broadcast(fib, dst) => {
                Err(Some(port))
            }
            _ => Err(None),
        }
    }

    /// Kernel routing: whether `dst` is the network or broadcast address of a subnet (shorter
    /// than /31) of one of the ports' interfaces, as the kernel has them: Linux's local
    /// broadcast routes, made whether or not the address was added with `brd`.
    #[cold]
    fn directed_broadcast(&self, fib: &zl_fib::Fib, dst: IpAddr) -> bool {
        (0..self.egress.len()).any(|p| subnet_edge(fib.addresses(p as u16), dst))
    }
}

/// A multicast group or the limited broadcast (255.255.255.255).
#[inline(always)]
fn is_group(dst: IpAddr) -> bool {
    match dst {
        IpAddr::V4(a) => a.is_multicast() || a.is_broadcast(),
        IpAddr::V6(a) => a.is_multicast(),
    }
}

/// A port's own MAC and egress MTU, looked up together for each routed packet (the MTU on its
/// own, in the port's `PortL3`, would take a second bounds check and an `Option` test on every
/// packet).
#[derive(Clone, Copy, Debug)]
struct EgressL2 {
    mac: MacAddr,
    /// The port's MTU; `u32::MAX` when it has none (no IP packet is longer).
    mtu: u32,
}

impl EgressL2 {
    fn new(mac: MacAddr) -> Self {
        EgressL2 { mac, mtu: u32::MAX }
    }
}

/// What forwarding reads from and rewrites in a packet's parsed headers, in either form: the
/// common frame's [`PlainIpv4`] (offsets, version and the absence of a congestion-control
/// header known as constants) or a whole [`PacketInfo`].
trait Parsed {
    /// The destination address.
    fn dst(&self) -> IpAddr;
    /// The TTL or hop limit.
    fn ttl(&self) -> u8;
    /// Whether the packet is longer than `mtu` and may not be fragmented (IPv4 with DF, or
    /// IPv6).
    fn too_big(&self, mtu: usize, frame: &[u8]) -> bool;
    /// `zl_wire::decrement_ttl` of `frame`, these headers updated.
    fn decrement_ttl(&mut self, frame: &mut [u8]) -> Result<TtlOutcome, zl_wire::MutateError>;
    /// The AQM's view of a packet of `len` bytes with these headers (color green until
    /// metered). Its hosts are left 0: they are hashed from the frame where something reads
    /// them (`crate::egress::frame_hosts`), off the common path.
    fn meta(&self, len: u32, priority: &PriorityMap) -> PacketMeta;
}

impl Parsed for PlainIpv4 {
    #[inline(always)]
    fn dst(&self) -> IpAddr {
        IpAddr::V4(self.dst)
    }
    #[inline(always)]
    fn ttl(&self) -> u8 {
        self.ttl
    }
    #[inline(always)]
    fn too_big(&self, mtu: usize, frame: &[u8]) -> bool {
        usize::from(self.ip_len) > mtu
            && frame
                .get(PlainIpv4::L3_OFFSET + 6)
                .is_some_and(|flags| flags & 0x40 != 0)
    }
    #[inline(always)]
    fn decrement_ttl(&mut self, frame: &mut [u8]) -> Result<TtlOutcome, zl_wire::MutateError> {
        zl_wire::decrement_ttl_plain(frame, self)
    }
    #[inline(always)]
    fn meta(&self, len: u32, priority: &PriorityMap) -> PacketMeta {
        PacketMeta {
            len,
            flow: self.flow,
            ecn: self.ecn(),
            has_cc_ext: false,
            priority: priority.of_tos(self.tos),
            weight: priority.default_weight(),
            color: Color::Green,
            ..PacketMeta::default()
        }
    }
}

impl Parsed for PacketInfo {
    #[inline(always)]
    fn dst(&self) -> IpAddr {
        self.dst
    }
    #[inline(always)]
    fn ttl(&self) -> u8 {
        self.ttl
    }
    #[inline(always)]
    fn too_big(&self, mtu: usize, frame: &[u8]) -> bool {
        self.ip_len > mtu
            && (self.ip_version == IpVersion::V6 || zl_wire::icmp::ipv4_dont_fragment(frame, self))
    }
    #[inline(always)]
    fn decrement_ttl(&mut self, frame: &mut [u8]) -> Result<TtlOutcome, zl_wire::MutateError> {
        zl_wire::decrement_ttl(frame, self)
    }
    #[inline(always)]
    fn meta(&self, len: u32, priority: &PriorityMap) -> PacketMeta {
        PacketMeta {
            len,
            flow: self.flow,
            ecn: self.ecn(),
            has_cc_ext: self.cc_ext.is_some(),
            priority: priority.priority(self),
            weight: priority.weight(self),
            color: Color::Green,
            ..PacketMeta::default()
        }
    }
}

impl IcmpPorts for Forwarder {
    /// Kernel routing: the interface's own addresses (followed from netlink), else the
    /// configured ones; static routing: the configured ones.
    fn source(&self, port: u16, toward: IpAddr) -> Option<IpAddr> {
        let kernel = self
            .kernel_fib()
            .and_then(|f| zl_fib::pick_source(f.addresses(port), toward));
        kernel.or_else(|| {
            let l3 = self.l3.get(port as usize)?;
            zl_fib::pick_source(&l3.addresses, toward)
        })
    }
    fn mac(&self, port: u16) -> Option<MacAddr> {
        self.egress.get(port as usize).map(|e| e.mac)
    }
    /// The MTU the `too_big` check uses (see `Forwarder::follow_mtus`).
    fn mtu(&self, port: u16) -> Option<u32> {
        let mtu = self.egress.get(port as usize)?.mtu;
        (mtu != u32::MAX).then_some(mtu)
    }
    /// Kernel routing: the interface's own addresses (followed from netlink), else the
    /// configured ones; static routing: the configured ones (or the interface's at start).
    fn addresses(&self, port: u16) -> Option<&[(IpAddr, u8)]> {
        if usize::from(port) >= self.egress.len() {
            return None;
        }
        let configured = self
            .l3
            .get(usize::from(port))
            .map_or(&[][..], |l| &l.addresses);
        Some(match self.kernel_fib().map(|f| f.addresses(port)) {
            Some(kernel) if !kernel.is_empty() => kernel,
            _ => configured,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zl_netlink::{KernelAddr, KernelLink, KernelNeighbour, KernelRoute, NeighbourState};

    const RX_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0x64];
    const HOST_MAC: [u8; 6] = [2, 0, 0, 0, 0, 0x99];

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    /// Kernel routing over two ports: port 0 (interface 10) 10.9.1.1/24, port 1 (interface
    /// 20) 10.9.100.1/24 with the receiver 10.9.100.2 resolved, 10.66.0.0/16 on-link on port
    /// 1 (nothing resolved), and a NOARP entry for port 1's broadcast, as the kernel makes
    /// one when something on the router sends to it. `mtu_rx` is port 1's kernel MTU.
    fn state(mtu_rx: u32) -> zl_fib::FibState {
        let mut s = zl_fib::FibState::new([(10, 0), (20, 1)], vec![]);
        let route = |dst: &str, len, oif| KernelRoute {
            dst: ip(dst),
            prefix_len: len,
            kind: zl_netlink::RouteKind::Unicast,
            gateway: None,
            oif,
            priority: 0,
        };
        let neigh = |ifindex, addr: &str, mac| KernelNeighbour {
            ifindex,
            addr: ip(addr),
            mac: Some(mac),
            state: NeighbourState::Usable,
        };
        s.load(
            vec![
                route("10.9.1.0", 24, 10),
                route("10.9.100.0", 24, 20),
                route("10.66.0.0", 16, 20),
            ],
            vec![
                neigh(20, "10.9.100.2", [2, 0, 0, 0, 0, 2]),
                neigh(20, "10.9.100.255", [0xff; 6]),
            ],
        );
        let addr = |ifindex, a: &str| KernelAddr {
            ifindex,
            addr: ip(a),
            prefix_len: 24,
            broadcast: None,
        };
        s.load_addresses(vec![addr(10, "10.9.1.1"), addr(20, "10.9.100.1")]);
        s.load_links(vec![
            KernelLink {
                ifindex: 10,
                mtu: 1500,
            },
            KernelLink {
                ifindex: 20,
                mtu: mtu_rx,
            },
        ]);
        s
    }

    /// A forwarder on `fib` (kernel routing), both ports with MTU 1500 as read at start (or
    /// `configured` on port 1 from the config), and the handle that publishes new tables.
    fn forwarder(fib: zl_fib::Fib, configured: Option<u32>) -> (Forwarder, zl_fib::FibHandle) {
        let mut f = Forwarder::new(
            Forwarding::Kernel(vec![]),
            ParseConfig::default(),
            PriorityMap::default(),
            vec![MacAddr([2, 0, 0, 0, 0, 1]), MacAddr(RX_MAC)],
        );
        let handle = zl_fib::FibHandle::new(fib);
        f.set_kernel_fib(KernelFib {
            reader: handle.reader(),
            resolve: zl_fib::ResolveQueue::new(1),
            follower: None,
        });
        let l3 = |mtu: Option<u32>, configured| PortL3 {
            addresses: vec![],
            mtu: mtu.or(Some(1500)),
            mtu_configured: configured,
        };
        f.set_l3(
            vec![l3(None, false), l3(configured, configured.is_some())],
            IcmpParams::default(),
        );
        (f, handle)
    }

    /// An IPv4 UDP frame into port 0 from 10.9.1.2, DF set, `payload` octets.
    fn packet(dst: &str, ttl: u8, payload: usize) -> PacketBuf {
        let IpAddr::V4(d) = ip(dst) else { panic!() };
        let mut frame = Vec::new();
        etherparse::PacketBuilder::ethernet2(HOST_MAC, [2, 0, 0, 0, 0, 1])
            .ipv4([10, 9, 1, 2], d.octets(), ttl)
            .udp(4000, 5000)
            .write(&mut frame, &vec![0; payload])
            .unwrap();
        let mut pool = zl_port::BufPool::new(1, 2048);
        let mut buf = pool.alloc().unwrap();
        buf.copy_from(&frame).unwrap();
        buf.in_port = 0;
        buf
    }

    fn forward(f: &Forwarder, dst: &str, ttl: u8, payload: usize) -> Result<u16, DropCause> {
        let mut buf = packet(dst, ttl, payload);
        let mut kept = Default::default();
        f.forward_in_place(&mut buf, &mut kept)
            .map(|_| buf.out_port)
    }

    #[test]
    fn broadcasts_and_groups_are_not_forwarded_nor_resolved() {
        let (f, _h) = forwarder(state(1500).snapshot(), None);
        assert_eq!(forward(&f, "10.9.100.2", 64, 10), Ok(1));
        for dst in [
            "10.9.100.255",
            "10.9.100.0",
            "10.9.1.255",
            "255.255.255.255",
            "224.0.0.1",
            "239.1.2.3",
        ] {
            assert_eq!(
                forward(&f, dst, 64, 10),
                Err(DropCause::NoRoute),
                "{dst} is dropped at once, not held for a neighbour"
            );
        }
        // An on-link destination that is no subnet's edge still waits for its MAC.
        assert_eq!(
            forward(&f, "10.66.255.255", 64, 10),
            Err(DropCause::NoNeighbour)
        );
    }

    #[test]
    fn an_expiring_packet_to_an_unresolved_next_hop_is_time_exceeded_at_once() {
        let (f, _h) = forwarder(state(1500).snapshot(), None);
        assert_eq!(forward(&f, "10.66.1.1", 1, 10), Err(DropCause::TtlExpired));
        assert_eq!(forward(&f, "10.66.1.1", 0, 10), Err(DropCause::TtlExpired));
        assert_eq!(forward(&f, "10.66.1.1", 2, 10), Err(DropCause::NoNeighbour));
        let mut buf = packet("10.66.1.1", 64, 1500);
        let mut kept = Default::default();
        let forwarded = f.forward_in_place(&mut buf, &mut kept);
        assert_eq!(forwarded.err(), Some(DropCause::TooBig));
        assert_eq!(buf.out_port, 1, "the port whose MTU it exceeds");
    }

    #[test]
    fn the_kernels_mtu_is_followed_and_a_configured_one_only_lowers_it() {
        let (mut f, handle) = forwarder(state(1500).snapshot(), None);
        // 1472 octets of UDP payload: a 1500-octet IP packet.
        assert_eq!(forward(&f, "10.9.100.2", 64, 1472), Ok(1));
        handle.publish(state(1400).snapshot());
        assert!(f.refresh());
        assert_eq!(forward(&f, "10.9.100.2", 64, 1472), Err(DropCause::TooBig));
        assert_eq!(forward(&f, "10.9.100.2", 64, 1372), Ok(1));
        assert_eq!(f.mtu(1), Some(1400), "what Fragmentation Needed announces");
        handle.publish(state(9000).snapshot());
        assert!(f.refresh());
        assert_eq!(f.mtu(1), Some(9000));

        let (mut f, handle) = forwarder(state(1500).snapshot(), Some(1300));
        assert_eq!(f.mtu(1), Some(1300), "the config's is smaller");
        handle.publish(state(1200).snapshot());
        f.refresh();
        assert_eq!(f.mtu(1), Some(1200), "the kernel's is smaller");
    }
}
