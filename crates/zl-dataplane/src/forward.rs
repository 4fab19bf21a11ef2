//! The ingress half of the pipeline: parse -> route (LPM, TTL / hop-limit decrement, next-hop
//! and own MACs) or bridge -> the packet's AQM metadata. Everything a packet goes through
//! before its egress port's QoS (classify, meter, admission, queue).
//!
//! [`Forwarder::forward_in_place`] is called by the single-thread loop (`Dataplane::process`)
//! and by the receive workers of the multi-threaded split (`crate::mt`), so both forward with the same
//! semantics and the same drop causes: `parse_error` (router mode: the frame is not Ethernet +
//! IPv4/IPv6), `no_route` (no route matched, or a bridge port without a peer), `ttl_expired`.

use zl_aqm::PacketMeta;
use zl_core::Color;
use zl_port::PacketBuf;
use zl_wire::{MacAddr, PacketInfo, ParseConfig, TtlOutcome};

use crate::config::Forwarding;
use crate::priority::PriorityMap;
use crate::route::RouteTable;
use crate::stats::DropCause;

/// Forwarding state shared by every receive path; read-only while forwarding.
#[derive(Clone, Debug)]
pub struct Forwarder {
    forwarding: Forwarding,
    parse: ParseConfig,
    priority: PriorityMap,
    /// Each port's own MAC, by port index: the source MAC of routed frames leaving it.
    macs: Vec<MacAddr>,
}

impl Forwarder {
    pub fn new(
        forwarding: Forwarding,
        parse: ParseConfig,
        priority: PriorityMap,
        macs: Vec<MacAddr>,
    ) -> Self {
        Forwarder {
            forwarding,
            parse,
            priority,
            macs,
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
            Forwarding::Bridge(_) => None,
        }
    }
    pub fn parse_config(&self) -> &ParseConfig {
        &self.parse
    }

    /// Parses `buf` into `info` and routes it (longest-prefix match, TTL / hop-limit
    /// decrement, next-hop MAC as destination and the egress port's MAC as source) or bridges
    /// it (to the peer of `buf.in_port`, unchanged), setting `buf.out_port`; returns the AQM's
    /// view of the packet (length, flow, ECN, priority, weight; color green until metered).
    /// A packet forwarding discards comes back as its cause; the caller counts it and frees
    /// the buffer. The parsed headers are written in place (`zl_wire::parse_into`), so that
    /// the ~140 bytes of a `PacketInfo` are not copied through return values per packet; they
    /// stay `None` for a bridged frame that did not parse (bridges forward any frame), and
    /// hold nothing of use after an `Err`.
    #[inline]
    pub fn forward_in_place(
        &self,
        buf: &mut PacketBuf,
        info: &mut Option<PacketInfo>,
    ) -> Result<PacketMeta, DropCause> {
        let len = buf.len() as u32;
        let parsed = zl_wire::parse_into(buf.as_slice(), &self.parse, info);
        let out = match (&self.forwarding, parsed, info.as_ref()) {
            (Forwarding::Router(table), Ok(()), Some(info)) => match table.lookup(info.dst) {
                Some(nh) => Some(nh),
                None => return Err(DropCause::NoRoute),
            },
            (Forwarding::Router(_), _, _) => return Err(DropCause::ParseError),
            (Forwarding::Bridge(peer), _, _) => {
                match peer.get(buf.in_port as usize).copied().flatten() {
                    Some(p) => {
                        buf.out_port = p;
                        None
                    }
                    None => return Err(DropCause::NoRoute),
                }
            }
        };
        if let (Some(nh), Some(info)) = (out, info.as_mut()) {
            // A route to a port that does not exist (only through `Dataplane::new` with
            // hand-built parts; the config checks its routes) goes nowhere.
            let Some(&src) = self.macs.get(nh.port as usize) else {
                return Err(DropCause::NoRoute);
            };
            match zl_wire::decrement_ttl(buf.as_mut_slice(), info) {
                Ok(TtlOutcome::Forwarded { .. }) => {}
                Ok(TtlOutcome::Expired) | Err(_) => return Err(DropCause::TtlExpired),
            }
            if zl_wire::set_macs(buf.as_mut_slice(), nh.mac, src).is_err() {
                return Err(DropCause::ParseError);
            }
            buf.out_port = nh.port;
        }
        Ok(match info.as_ref() {
            Some(i) => PacketMeta {
                len,
                flow: i.flow,
                ecn: i.ecn(),
                has_cc_ext: i.cc_ext.is_some(),
                priority: self.priority.priority(i),
                weight: self.priority.weight(i),
                color: Color::Green,
            },
            None => PacketMeta {
                len,
                ..PacketMeta::default()
            },
        })
    }
}
