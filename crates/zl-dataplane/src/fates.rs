//! The fate counters of a loop with the hooks that see every counted fate: the totals and
//! the flow groups ([`crate::stats`]), the drop capture's tap ([`crate::capture`]) and the ICMP
//! errors sent ([`crate::icmp`]). Above those three, below every stage that counts a packet.

use zl_core::{Color, Nanos};
use zl_port::{Batch, PacketBuf};

use crate::capture::CaptureTap;
use crate::icmp::IcmpCounters;
use crate::stats::{DropCause, FateCounters, GroupStats};

/// The fate counters of a loop: the totals and one set per generator flow group, with the
/// steps that count. Every packet's fate is counted through these methods, so a hook that must
/// see each counted fate (a drop capture, a top-flows list) has one place to go:
/// [`Fates::dropped`] for every discarded packet, with its cause and its bytes.
#[derive(Clone, Debug, Default)]
pub struct Fates {
    pub totals: FateCounters,
    pub groups: Vec<GroupStats>,
    /// The drop capture's tap (`[capture]`), shared by every copy of these counters.
    pub capture: Option<CaptureTap>,
    /// The ICMP errors the loop sent or held back (`crate::icmp`): frames the router
    /// originates, outside the conservation identity of received packets.
    pub icmp: IcmpCounters,
}

impl Fates {
    /// Counters for `groups` (their labels kept, their counts as given).
    pub fn new(groups: Vec<GroupStats>) -> Self {
        Fates {
            totals: FateCounters::default(),
            groups,
            capture: None,
            icmp: IcmpCounters::default(),
        }
    }

    /// The loop's clock, once per poll (the capture's timestamps and rate cap).
    #[inline]
    pub fn set_clock(&mut self, now: Nanos) {
        if let Some(c) = &mut self.capture {
            c.set_clock(now);
        }
    }

    /// The same flow groups (and capture) with every count at 0.
    pub fn zeroed(&self) -> Fates {
        Fates {
            capture: self.capture.clone(),
            ..Fates::new(
                self.groups
                    .iter()
                    .map(|g| GroupStats {
                        fate: FateCounters::default(),
                        ..g.clone()
                    })
                    .collect(),
            )
        }
    }

    /// Adds `other`'s counts (the workers of a threaded run).
    pub fn add(&mut self, other: &Fates) {
        self.totals.add(&other.totals);
        self.icmp.add(&other.icmp);
        for (a, b) in self.groups.iter_mut().zip(&other.groups) {
            a.fate.add(&b.fate);
        }
    }

    /// Applies `count` to the totals and to the flow group a buffer's tag names (`tag` = group
    /// index + 1; 0 or an unknown tag: the totals only).
    #[inline]
    pub fn count(&mut self, tag: u32, count: impl Fn(&mut FateCounters)) {
        count(&mut self.totals);
        self.count_group(tag, count);
    }

    /// Applies `count` to the flow group a tag names only (the caller counts the totals, a
    /// burst at a time).
    #[inline]
    pub fn count_group(&mut self, tag: u32, count: impl Fn(&mut FateCounters)) {
        if let Some(g) = (tag as usize)
            .checked_sub(1)
            .and_then(|i| self.groups.get_mut(i))
        {
            count(&mut g.fate);
        }
    }

    /// A packet received, in its flow group (the totals count a burst at a time:
    /// [`Fates::received`]).
    #[inline]
    pub fn arrives(&mut self, b: &PacketBuf) {
        let len = b.len() as u64;
        self.count_group(b.tag, |c| {
            c.received += 1;
            c.received_bytes += len;
        });
    }

    /// A burst of `n` packets of `bytes` received, in the totals.
    #[inline]
    pub fn received(&mut self, n: usize, bytes: u64) {
        self.totals.received += n as u64;
        self.totals.received_bytes += bytes;
    }

    /// A received burst: in the totals at once, and each packet in its flow group, a pass made
    /// only when groups are configured (with none, a per-packet test of the tag would be half
    /// the cost of counting a burst).
    #[inline]
    pub fn received_burst(&mut self, burst: &Batch) {
        let bytes = burst.iter().map(|b| b.len() as u64).sum();
        self.received(burst.len(), bytes);
        if !self.groups.is_empty() {
            for b in burst.iter() {
                self.arrives(b);
            }
        }
    }

    /// A packet leaving its queue for the port, in its flow group; returns its length for the
    /// totals ([`Fates::departed`], a burst at a time).
    #[inline]
    pub fn departs(&mut self, b: &PacketBuf) -> u64 {
        let len = b.len() as u64;
        self.count_group(b.tag, |c| {
            c.forwarded += 1;
            c.forwarded_bytes += len;
        });
        len
    }

    /// The packets a transmit burst took from their queues (`departs` for each, the totals
    /// at once), the groups' pass made only when groups are configured: the burst's loop
    /// then keeps neither the byte count nor the tag test.
    #[inline]
    pub fn departed_burst<'a>(&mut self, burst: impl Iterator<Item = &'a PacketBuf> + Clone) {
        let (n, bytes) = burst
            .clone()
            .fold((0, 0), |(n, bytes), b| (n + 1, bytes + b.len() as u64));
        self.departed(n, bytes);
        if !self.groups.is_empty() {
            for b in burst {
                self.departs(b);
            }
        }
    }

    /// A burst of `n` packets of `bytes` left their queues, in the totals.
    #[inline]
    pub fn departed(&mut self, n: usize, bytes: u64) {
        self.totals.forwarded += n as u64;
        self.totals.forwarded_bytes += bytes;
    }

    /// The one place a discarded packet is counted, with its cause, whatever discarded it
    /// (forwarding, the AQM, a full ring, the shutdown); the caller recycles the buffer after.
    #[inline]
    pub fn dropped(&mut self, buf: &PacketBuf, cause: DropCause) {
        self.count(buf.tag, |c| c.drop(cause));
        if let Some(c) = &mut self.capture {
            c.dropped(buf, cause, None);
        }
    }

    /// [`Fates::dropped`] for a packet its egress classified: into `class` with `color`.
    #[inline]
    pub fn dropped_in(&mut self, buf: &PacketBuf, cause: DropCause, class: usize, color: Color) {
        self.count(buf.tag, |c| c.drop(cause));
        if let Some(c) = &mut self.capture {
            c.dropped(buf, cause, Some((class, color)));
        }
    }

    /// A packet admitted to `class` with a congestion mark (`buf` as queued).
    #[inline]
    pub fn marked(&mut self, buf: &PacketBuf, class: usize, color: Color) {
        self.count(buf.tag, |c| c.marked += 1);
        if let Some(c) = &mut self.capture {
            c.marked(buf, class, color);
        }
    }
}
