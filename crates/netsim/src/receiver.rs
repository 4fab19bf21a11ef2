//! The TCP receiver: cumulative ACKs, an out-of-order buffer, optional delayed ACKs
//! (RFC 1122 / RFC 5681 §4.2: every second in-order packet or after a timeout; an out-of-order
//! or gap-filling packet is acknowledged at once), and the echo of congestion marks.
//!
//! Decided: a mark is echoed on the next ACK sent (ECE, or CI of the docs/algorithms/wire.md
//! extension header) rather than repeated until the sender's CWR; the sender reacts at most once
//! per window either way, so the two give the same window behaviour in a loss-free reverse path.

use zl_core::Nanos;

/// An acknowledgement to send back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AckOut {
    pub ack: u32,
    pub ece: bool,
    pub ts: Nanos,
}

/// What arrived at the receiver and what it does about it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Receipt {
    /// Packets newly delivered in order to the application.
    pub delivered: u32,
    /// An ACK to send now, if any.
    pub ack: Option<AckOut>,
    /// Arm the delayed-ACK timer.
    pub arm_delack: bool,
}

#[derive(Clone, Debug)]
pub(crate) struct TcpReceiver {
    next: u32,
    /// `ooo[seq & mask]` is true when `seq > next` has arrived.
    ooo: Vec<bool>,
    mask: u32,
    delayed: bool,
    pending: u32,
    pending_ts: Nanos,
    ece_pending: bool,
    /// ns-2 TCPSink: echo ECN-Echo on every ACK from a mark until a CWR packet arrives, and
    /// never send a delayed ACK early because of a mark.
    ns2_echo: bool,
    /// A delayed-ACK timer event is in the heap.
    pub(crate) delack_armed: bool,
}

impl TcpReceiver {
    /// `window` bounds how far ahead of the cumulative point a packet can be.
    pub(crate) fn new(window: u32, delayed: bool) -> Self {
        Self::with_echo(window, delayed, false)
    }

    /// As [`TcpReceiver::new`]; `ns2_echo` holds the echo until CWR (ns-2 `tcp-sink.cc`
    /// `ecn_unacked_`).
    pub(crate) fn with_echo(window: u32, delayed: bool, ns2_echo: bool) -> Self {
        let cap = (window as usize + 1).next_power_of_two().max(2);
        TcpReceiver {
            next: 0,
            ooo: vec![false; cap],
            mask: (cap - 1) as u32,
            delayed,
            pending: 0,
            pending_ts: Nanos::ZERO,
            ece_pending: false,
            ns2_echo,
            delack_armed: false,
        }
    }

    fn ack_now(&mut self, ts: Nanos) -> AckOut {
        self.pending = 0;
        let ece = self.ece_pending;
        if !self.ns2_echo {
            self.ece_pending = false;
        }
        AckOut {
            ack: self.next,
            ece,
            ts,
        }
    }

    #[cfg(test)]
    pub(crate) fn on_packet(&mut self, seq: u32, sent_at: Nanos, marked: bool) -> Receipt {
        self.on_packet_cwr(seq, sent_at, marked, false)
    }

    /// As [`TcpReceiver::on_packet`] for a packet that may carry CWR.
    pub(crate) fn on_packet_cwr(
        &mut self,
        seq: u32,
        sent_at: Nanos,
        marked: bool,
        cwr: bool,
    ) -> Receipt {
        if self.ns2_echo && cwr {
            self.ece_pending = false;
        }
        self.ece_pending |= marked;
        let marked = marked && !self.ns2_echo;
        if seq == self.next {
            self.next += 1;
            let mut delivered = 1;
            while self.ooo[(self.next & self.mask) as usize] {
                self.ooo[(self.next & self.mask) as usize] = false;
                self.next += 1;
                delivered += 1;
            }
            if !self.delayed || delivered > 1 || marked {
                return Receipt {
                    delivered,
                    ack: Some(self.ack_now(sent_at)),
                    arm_delack: false,
                };
            }
            if self.pending == 0 {
                self.pending = 1;
                self.pending_ts = sent_at;
                return Receipt {
                    delivered,
                    ack: None,
                    arm_delack: !self.delack_armed,
                };
            }
            let ts = self.pending_ts;
            Receipt {
                delivered,
                ack: Some(self.ack_now(ts)),
                arm_delack: false,
            }
        } else {
            if seq > self.next && seq - self.next <= self.mask {
                self.ooo[(seq & self.mask) as usize] = true;
            }
            Receipt {
                delivered: 0,
                ack: Some(self.ack_now(sent_at)),
                arm_delack: false,
            }
        }
    }

    /// The delayed-ACK timer fired: acknowledge what is pending.
    pub(crate) fn on_delack(&mut self) -> Option<AckOut> {
        self.delack_armed = false;
        if self.pending == 0 {
            return None;
        }
        let ts = self.pending_ts;
        Some(self.ack_now(ts))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cumulative_ack_with_hole_and_refill() {
        let mut r = TcpReceiver::new(8, false);
        assert_eq!(r.on_packet(0, Nanos(1), false).ack.map(|a| a.ack), Some(1));
        let dup = r.on_packet(2, Nanos(3), false);
        assert_eq!((dup.delivered, dup.ack.map(|a| a.ack)), (0, Some(1)));
        let fill = r.on_packet(1, Nanos(2), true);
        assert_eq!(fill.delivered, 2);
        assert_eq!(
            fill.ack,
            Some(AckOut {
                ack: 3,
                ece: true,
                ts: Nanos(2)
            })
        );
    }

    #[test]
    fn delayed_ack_every_second_packet_or_timer() {
        let mut r = TcpReceiver::new(8, true);
        let a = r.on_packet(0, Nanos(1), false);
        assert!(a.ack.is_none() && a.arm_delack);
        r.delack_armed = true;
        assert_eq!(
            r.on_packet(1, Nanos(2), false).ack.map(|a| (a.ack, a.ts)),
            Some((2, Nanos(1)))
        );
        assert!(r.on_packet(2, Nanos(3), false).ack.is_none());
        assert_eq!(r.on_delack().map(|a| a.ack), Some(3));
        assert_eq!(r.on_delack(), None);
    }
}
