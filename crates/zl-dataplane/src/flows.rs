//! Misbehaving flows, named: the flow keys and per-flow counters of the flows that
//! matter at one egress port, kept beside their 64-bit [`FlowId`]s so that the top of the
//! port's Zombie List can be listed as addresses and ports (`zlrouter flows`, the final table,
//! `/stats.json`, the `zlrouter_top_flow_*` series).
//!
//! The Zombie List itself holds only hashed ids; which flows matter is its business: a flow
//! whose occurrence F is large is one whose arrivals keep hitting (SRED's Hit(t)). So a flow
//! is *claimed* into this table on a hit, and only then is its frame parsed for its key (the
//! hash of that key is checked against the id, so a name is never wrong). Every other packet
//! pays one lookup in a small 2-way set-associative array of ids (4 KiB per port with the
//! default 256 sets), a compare, and for a tracked flow its counters: measured in
//! docs/performance/dataplane.md.
//!
//! decided: a set's victim on a claim is an empty way, else the way whose flow has the lower
//! F now (read from the list, on the claim only), and only if that F is below the claimer's:
//! so the flows with the largest F stay. The counters of a flow start when it is claimed
//! ("since first seen") and count what this port's egress decided for its packets: offered,
//! admitted with a mark, and the egress drop causes (early, forced, tail); drops decided
//! before the egress (no route, TTL) have no egress port and are not per flow.
//!
//! The top K ([`FlowTable::top`]) is read off the list's zombies (F of every flow in it, so
//! a flow that is in the list but not tracked here still shows, without a key), at the
//! snapshot's low rate, never per packet.

use std::collections::HashMap;
use std::net::IpAddr;

use zl_core::{FlowId, Nanos};
use zl_wire::{FlowKey, FlowKeyKind, ParseConfig};
use zl_zombie::ZombieList;

use crate::stats::DropCause;

/// Sets of the table (two ways each): 512 flows tracked per port.
pub const FLOW_SETS: usize = 256;

/// The default K of the top list (`metrics.top_flows`).
pub const DEFAULT_TOP_FLOWS: usize = 10;

/// What one tracked flow's packets met at this egress since it was claimed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowRecord {
    pub id: FlowId,
    /// Its key fields, as parsed from the packet that claimed it.
    pub key: FlowKey,
    /// The generator flow group of that packet (its buffer's tag, 0 = none).
    pub tag: u32,
    /// When it was claimed.
    pub first_seen: Nanos,
    /// Packets offered to this egress (admitted + dropped here).
    pub packets: u64,
    pub bytes: u64,
    /// Admitted with a congestion mark.
    pub marked: u64,
    /// Drops at this egress, by [`DropCause::index`].
    pub drops: [u64; DropCause::ALL.len()],
}

/// One row of the top list: a flow's F in the list now and what the table knows about it.
#[derive(Clone, Debug, PartialEq)]
pub struct TopFlow {
    pub id: FlowId,
    /// F: the flow's occurrence in the Zombie List.
    pub occurrence: u64,
    /// Its record, when the flow is tracked.
    pub record: Option<FlowRecord>,
}

/// What the packets of the flow in one way met since its claim: the half every packet of a
/// tracked flow writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Counters {
    packets: u64,
    // Between the two counters every packet adds to: side by side, LLVM pairs their adds
    // into one vector add, six instructions where three do.
    marked: u64,
    bytes: u64,
    drops: [u64; DropCause::ALL.len()],
}

/// The counters of a tracked flow whose packet [`FlowTable::arrives`] just counted.
#[derive(Debug)]
pub struct Tracked<'a>(&'a mut Counters);

impl Tracked<'_> {
    /// What the egress decided for the packet: `Ok(marked)` when admitted, `Err(cause)` when
    /// dropped.
    #[inline]
    pub fn decided(self, outcome: Result<bool, DropCause>) {
        match outcome {
            Ok(marked) => self.0.marked += u64::from(marked),
            Err(cause) => self.0.drops[cause.index()] += 1,
        }
    }
}

/// Who claimed a way: the half read only by the top list.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Claim {
    key: FlowKey,
    tag: u32,
    first_seen: Nanos,
}

/// Ways in the table (`2 * FLOW_SETS`, a power of two).
const WAYS: usize = 2 * FLOW_SETS;

/// The tracked flows of one egress port.
///
/// Laid out for the per-packet path: `ids` (8 bytes a way, a set in 16 bytes) is all a packet
/// of an untracked flow reads; `counters` is what a tracked flow's packet writes; `claims`
/// (the key) only the top list reads. An empty way holds an id that no flow of its set can
/// have (see [`FlowTable::vacant`]), so the lookup is two compares and no `Option`; fixed-size
/// arrays and a masked way index leave no bounds check on the path.
#[derive(Clone, Debug)]
pub struct FlowTable {
    /// `ids[2 * set + way]`.
    ids: Box<[FlowId; WAYS]>,
    counters: Box<[Counters; WAYS]>,
    /// `Some` exactly where the way tracks a flow (its id is then in `ids`).
    claims: Vec<Option<Claim>>,
    parse: ParseConfig,
    top_k: usize,
}

impl FlowTable {
    /// The table an egress with a Zombie List keeps under `cfg` (`metrics.top_flows` rows,
    /// [`DEFAULT_TOP_FLOWS`] when unset; none for 0).
    pub fn of_config(cfg: &crate::RouterConfig) -> Option<Self> {
        let top = cfg.metrics.top_flows.unwrap_or(DEFAULT_TOP_FLOWS);
        (top > 0).then(|| FlowTable::new(cfg.parse, top))
    }

    /// A table whose claims parse frames with `parse` (its flow key kind and seed are the
    /// ones the ids were made with) and whose top list has `top_k` rows.
    pub fn new(parse: ParseConfig, top_k: usize) -> Self {
        FlowTable {
            ids: Box::new(std::array::from_fn(Self::vacant)),
            counters: Box::new([Counters::default(); WAYS]),
            claims: vec![None; WAYS],
            parse: ParseConfig {
                verify_ipv4_checksum: false,
                ..parse
            },
            top_k,
        }
    }

    /// The id an empty `way` holds: one of the next set, which no flow looked up in this
    /// way's set can equal (a flow's set is its id modulo [`FLOW_SETS`]).
    fn vacant(way: usize) -> FlowId {
        FlowId(((way / 2 + 1) % FLOW_SETS) as u64)
    }

    /// The flow key kind the ids were hashed from.
    pub fn key_kind(&self) -> FlowKeyKind {
        self.parse.flow_key
    }

    pub fn top_k(&self) -> usize {
        self.top_k
    }

    #[inline]
    fn set_of(flow: FlowId) -> usize {
        2 * (flow.0 as usize % FLOW_SETS)
    }

    /// The way of `flow`, when it is tracked: one or two compares per packet.
    #[inline]
    fn find(&self, flow: FlowId) -> Option<usize> {
        let s = Self::set_of(flow);
        if self.ids[s] == flow {
            Some(s)
        } else if self.ids[s + 1] == flow {
            Some(s + 1)
        } else {
            None
        }
    }

    /// A packet of `flow` arriving at this egress, before its admission: claims the flow on
    /// a hit in the list (parsing `frame` for its key) and counts the packet when the flow is
    /// tracked. Returns the flow's counters, for [`Tracked::decided`] once the egress has
    /// decided (no second lookup).
    ///
    /// The packet as an [`Arriving`] (its buffer): its bytes are read only to claim a flow, so
    /// the buffer's `as_slice` length check is not on every packet's path.
    #[inline]
    pub fn arrives(
        &mut self,
        now: Nanos,
        flow: FlowId,
        hit_with: Option<u64>,
        packet: &impl Arriving,
        list: &ZombieList,
    ) -> Option<Tracked<'_>> {
        let way = match self.find(flow) {
            Some(w) => w,
            None => self.claim(now, flow, hit_with?, packet.bytes(), packet.tag(), list)?,
        };
        let c = &mut self.counters[way % WAYS];
        c.packets += 1;
        c.bytes += packet.frame_len() as u64;
        Some(Tracked(c))
    }

    #[cold]
    #[inline(never)]
    fn claim(
        &mut self,
        now: Nanos,
        flow: FlowId,
        occurrence: u64,
        frame: &[u8],
        tag: u32,
        list: &ZombieList,
    ) -> Option<usize> {
        let s = Self::set_of(flow);
        let victim = match (&self.claims[s], &self.claims[s + 1]) {
            (None, _) => s,
            (_, None) => s + 1,
            (Some(_), Some(_)) => {
                let (fa, fb) = (
                    list.occurrence(self.ids[s]),
                    list.occurrence(self.ids[s + 1]),
                );
                let (way, f) = if fa <= fb { (s, fa) } else { (s + 1, fb) };
                if f >= occurrence {
                    return None;
                }
                way
            }
        };
        let info = zl_wire::parse(frame, &self.parse).ok()?;
        let key = FlowKey {
            src: info.src,
            dst: info.dst,
            protocol: info.protocol,
            ports: info.ports,
        };
        // The id must name this key (a frame the forwarder parsed differently, e.g. a
        // rewritten one, is not claimed).
        if key.hash(self.parse.flow_key, self.parse.hash_seed) != flow {
            return None;
        }
        self.ids[victim] = flow;
        self.counters[victim] = Counters::default();
        self.claims[victim] = Some(Claim {
            key,
            tag,
            first_seen: now,
        });
        Some(victim)
    }

    /// The record of `flow`, when tracked.
    pub fn record(&self, flow: FlowId) -> Option<FlowRecord> {
        let way = self.find(flow)?;
        let claim = self.claims[way].as_ref()?;
        let c = &self.counters[way];
        Some(FlowRecord {
            id: flow,
            key: claim.key,
            tag: claim.tag,
            first_seen: claim.first_seen,
            packets: c.packets,
            bytes: c.bytes,
            marked: c.marked,
            drops: c.drops,
        })
    }

    /// The `top_k` flows of `list` by F (ties by id, so the order is deterministic), with
    /// their records. Reads every zombie: call it at a snapshot's rate, not per packet.
    pub fn top(&self, list: &ZombieList) -> Vec<TopFlow> {
        let mut f: HashMap<FlowId, u64> = HashMap::new();
        for z in list.zombies() {
            *f.entry(z.flow).or_default() += z.count + 1;
        }
        let mut all: Vec<(FlowId, u64)> = f.into_iter().collect();
        all.sort_unstable_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        all.truncate(self.top_k);
        all.into_iter()
            .map(|(id, occurrence)| TopFlow {
                id,
                occurrence,
                record: self.record(id),
            })
            .collect()
    }
}

/// The key as an operator reads it, with the fields the flow key kind hashes: `10.0.9.1`
/// (src), `10.0.9.1 > 192.0.2.10` (src-dst), `udp 10.0.9.1:4000 > 192.0.2.10:9` (5-tuple).
pub fn key_text(key: &FlowKey, kind: FlowKeyKind) -> String {
    let addr = |a: IpAddr, port: Option<u16>| match (a, port) {
        (IpAddr::V4(a), Some(p)) => format!("{a}:{p}"),
        (IpAddr::V6(a), Some(p)) => format!("[{a}]:{p}"),
        (a, None) => a.to_string(),
    };
    match kind {
        FlowKeyKind::Src => key.src.to_string(),
        FlowKeyKind::SrcDst => format!("{} > {}", key.src, key.dst),
        FlowKeyKind::FiveTuple => {
            let proto = match key.protocol {
                6 => "tcp".to_owned(),
                17 => "udp".to_owned(),
                1 => "icmp".to_owned(),
                58 => "icmpv6".to_owned(),
                p => format!("proto {p}"),
            };
            format!(
                "{proto} {} > {}",
                addr(key.src, key.ports.map(|p| p.src)),
                addr(key.dst, key.ports.map(|p| p.dst))
            )
        }
    }
}

/// A packet as [`FlowTable::arrives`] reads it: its length, its bytes (read only to claim
/// its flow) and its source's label.
pub trait Arriving {
    /// The frame's length in octets.
    fn frame_len(&self) -> usize;
    /// The frame's bytes.
    fn bytes(&self) -> &[u8];
    /// The source's label (`PacketBuf::tag`).
    fn tag(&self) -> u32;
}

impl Arriving for zl_port::PacketBuf {
    #[inline(always)]
    fn frame_len(&self) -> usize {
        zl_port::PacketBuf::len(self)
    }
    #[inline(always)]
    fn bytes(&self) -> &[u8] {
        self.as_slice()
    }
    #[inline(always)]
    fn tag(&self) -> u32 {
        self.tag
    }
}

/// A frame's bytes with its label.
impl Arriving for (&[u8], u32) {
    #[inline(always)]
    fn frame_len(&self) -> usize {
        self.0.len()
    }
    #[inline(always)]
    fn bytes(&self) -> &[u8] {
        self.0
    }
    #[inline(always)]
    fn tag(&self) -> u32 {
        self.1
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use zl_zombie::ZombieParams;

    fn frame(src: [u8; 4]) -> Vec<u8> {
        let mut f = vec![0u8; 64];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        let ip = &mut f[14..34];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&50u16.to_be_bytes());
        ip[8] = 64;
        ip[9] = 17;
        ip[12..16].copy_from_slice(&src);
        ip[16..20].copy_from_slice(&[192, 0, 2, 10]);
        f[34..36].copy_from_slice(&4000u16.to_be_bytes());
        f[36..38].copy_from_slice(&9u16.to_be_bytes());
        f[38..40].copy_from_slice(&30u16.to_be_bytes());
        f
    }

    /// Four heavy sources among 200 light ones: the top 4 by F are the heavy ones, named by
    /// their addresses, and their counters count every packet since they were claimed.
    #[test]
    fn heavy_flows_are_claimed_named_and_on_top() {
        let parse = ParseConfig {
            verify_ipv4_checksum: false,
            ..Default::default()
        };
        let list = ZombieList::new(ZombieParams::default().validate().unwrap());
        let mut table = FlowTable::new(parse, 4);
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let frames: Vec<Vec<u8>> = (0..204u32)
            .map(|i| frame([10, 0, (i / 250) as u8, (i % 250) as u8 + 1]))
            .collect();
        let ids: Vec<FlowId> = frames
            .iter()
            .map(|f| zl_wire::parse(f, &parse).unwrap().flow)
            .collect();
        let mut offered = [0u64; 4];
        for n in 0..200_000u64 {
            // Flows 200..204 send 20 times as often as each of the others.
            let i = if n % 3 == 0 {
                (n / 3 % 200) as usize
            } else {
                200 + (n % 4) as usize
            };
            let obs = list.observe(ids[i], Nanos(n), &mut rng);
            let way = table.arrives(
                Nanos(n),
                ids[i],
                obs.hit.then_some(obs.occurrence),
                &(&frames[i][..], 0),
                &list,
            );
            if let Some(t) = way {
                t.decided(Err(DropCause::Early));
                if i >= 200 {
                    offered[i - 200] += 1;
                }
            }
        }
        let top = table.top(&list);
        assert_eq!(top.len(), 4);
        let mut names: Vec<String> = top
            .iter()
            .map(|t| key_text(&t.record.as_ref().unwrap().key, FlowKeyKind::SrcDst))
            .collect();
        names.sort();
        assert_eq!(
            names,
            [
                "10.0.0.201 > 192.0.2.10",
                "10.0.0.202 > 192.0.2.10",
                "10.0.0.203 > 192.0.2.10",
                "10.0.0.204 > 192.0.2.10"
            ]
        );
        for t in &top {
            let r = t.record.as_ref().unwrap();
            let i = ids.iter().position(|&id| id == r.id).unwrap() - 200;
            assert_eq!(r.packets, offered[i]);
            assert_eq!(r.drops[DropCause::Early.index()], offered[i]);
            // Claimed early: each heavy flow sends 200 000 * 2/3 / 4 = 33 333 packets and hits
            // within its first few hundred.
            assert!(r.packets > 33_333 - 1_000, "{r:?}");
        }
    }

    /// An empty way matches no flow: ids equal to every empty way's marker (the small ids),
    /// and ids of every set, arrive untracked and without a hit stay untracked; a claimed
    /// flow is then found in its way, and its neighbour still is not.
    #[test]
    fn empty_ways_match_no_flow() {
        let parse = ParseConfig {
            verify_ipv4_checksum: false,
            ..Default::default()
        };
        let list = ZombieList::new(ZombieParams::default().validate().unwrap());
        let mut table = FlowTable::new(parse, 4);
        for id in (0..3 * FLOW_SETS as u64).chain([u64::MAX, u64::MAX - 1]) {
            assert!(
                table
                    .arrives(Nanos(1), FlowId(id), None, &(&[][..], 0), &list)
                    .is_none(),
                "{id}"
            );
            assert_eq!(table.record(FlowId(id)), None);
        }
        let f = frame([10, 0, 9, 1]);
        let id = zl_wire::parse(&f, &parse).unwrap().flow;
        assert!(table
            .arrives(Nanos(2), id, Some(3), &(&f[..], 7), &list)
            .is_some());
        assert_eq!(table.find(id), Some(FlowTable::set_of(id)));
        assert!(table
            .arrives(Nanos(3), id, None, &(&f[..], 7), &list)
            .is_some());
        let r = table.record(id).unwrap();
        assert_eq!(
            (r.packets, r.bytes, r.tag, r.first_seen),
            (2, 128, 7, Nanos(2))
        );
        let next = FlowId(id.0 ^ FLOW_SETS as u64);
        assert!(table
            .arrives(Nanos(4), next, None, &(&f[..], 0), &list)
            .is_none());
    }

    #[test]
    fn key_text_shows_the_hashed_fields() {
        let f = frame([10, 0, 9, 1]);
        let parse = ParseConfig {
            verify_ipv4_checksum: false,
            ..Default::default()
        };
        let info = zl_wire::parse(&f, &parse).unwrap();
        let key = FlowKey {
            src: info.src,
            dst: info.dst,
            protocol: info.protocol,
            ports: info.ports,
        };
        assert_eq!(key_text(&key, FlowKeyKind::Src), "10.0.9.1");
        assert_eq!(
            key_text(&key, FlowKeyKind::FiveTuple),
            "udp 10.0.9.1:4000 > 192.0.2.10:9"
        );
    }
}
