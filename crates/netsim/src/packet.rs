//! Packets in flight, held by index in one preallocated arena so the event loop never
//! allocates per packet: a freed slot is reused by the next packet sent.

use zl_core::{Color, Ecn, Nanos};

/// One data packet (TCP segment, UDP datagram or TFRC packet).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Packet {
    /// Index of the sending flow.
    pub flow: u32,
    /// Sequence number in packets (TCP one-way model, as ns-2's `Agent/TCP`).
    pub seq: u32,
    /// Bytes on the wire, headers included.
    pub len: u32,
    /// When the sender emitted it (echoed back for RTT samples).
    pub sent_at: Nanos,
    /// RFC 3168 field as sent.
    pub ecn: Ecn,
    /// Carries the congestion-control extension header of docs/algorithms/wire.md.
    pub cc_ext: bool,
    /// A router set CE (or the extension header's ECN bit).
    pub marked: bool,
    /// The sender reduced its window since the last one (TCP CWR, ns-2 `cong_action`).
    pub cwr: bool,
    /// Priority 8..=15 (docs/algorithms/priority-ecn-red.md).
    pub priority: u8,
    /// Priority weight `w` (docs/algorithms/priority-ecn-red.md).
    pub weight: u8,
    /// Diffserv code point the sender set (`None`: not an IP packet the classifier can read).
    pub dscp: Option<u8>,
    /// Class the bottleneck put it in (0 when there is one FIFO).
    pub class: u8,
    /// Drop precedence as sent (a bottleneck meter may recolour it; that colour is not kept).
    pub color: Color,
}

/// Slots for packets, reused through a free list.
#[derive(Debug, Default)]
pub(crate) struct PacketArena {
    slots: Vec<Packet>,
    free: Vec<u32>,
}

impl PacketArena {
    pub(crate) fn with_capacity(n: usize) -> Self {
        PacketArena {
            slots: Vec::with_capacity(n),
            free: Vec::with_capacity(n),
        }
    }

    pub(crate) fn alloc(&mut self, p: Packet) -> u32 {
        if let Some(i) = self.free.pop() {
            self.slots[i as usize] = p;
            i
        } else {
            self.slots.push(p);
            (self.slots.len() - 1) as u32
        }
    }

    pub(crate) fn get(&self, i: u32) -> &Packet {
        &self.slots[i as usize]
    }

    pub(crate) fn get_mut(&mut self, i: u32) -> &mut Packet {
        &mut self.slots[i as usize]
    }

    pub(crate) fn free(&mut self, i: u32) {
        self.free.push(i);
    }

    /// Packets currently allocated.
    #[cfg(test)]
    pub(crate) fn live(&self) -> usize {
        self.slots.len() - self.free.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_reused() {
        let mut a = PacketArena::with_capacity(2);
        let x = a.alloc(Packet {
            seq: 1,
            ..Packet::default()
        });
        let y = a.alloc(Packet {
            seq: 2,
            ..Packet::default()
        });
        a.free(x);
        let z = a.alloc(Packet {
            seq: 3,
            ..Packet::default()
        });
        assert_eq!(z, x);
        assert_eq!(a.get(z).seq, 3);
        assert_eq!(a.get(y).seq, 2);
        assert_eq!(a.live(), 2);
    }
}
