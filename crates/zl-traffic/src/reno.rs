//! The responsive flows of the traffic generator: a TCP Reno sender and a cumulative-ACK
//! receiver, counted in packets (ns-2's one-way TCP: sequence numbers count segments, every
//! segment has the group's frame size), driven in virtual time by the generator
//! (`super::generator`), which hands each ACK in when it reaches the sender.
//!
//! - Reno (RFC 5681): slow start (+1 per new ACK below `ssthresh`), congestion avoidance
//!   (+1/cwnd per new ACK), fast retransmit on the third duplicate ACK with
//!   `ssthresh = max(FlightSize / 2, 2)` (eq. 4) and fast recovery with window inflation (+1 per
//!   further duplicate), left on the first new ACK (`cwnd = ssthresh`).
//! - ECN (RFC 3168 §6.1.2): an ACK echoing CE halves the window once per window of data.
//! - Retransmission timer (RFC 6298): `srtt + 4 rttvar`, floor `min_rto`, doubled per
//!   back-off up to 64 times; one segment timed at a time and no sample from a retransmitted
//!   one (Karn); after a timeout `cwnd = 1` and the sender goes back to the first unacked
//!   segment (go-back-N), and duplicate ACKs of data sent before it start no fast retransmit
//!   (RFC 6582 §3.2's `recover`, ns-2's `bugfix_`).
//!
//! decided: a compact Reno here rather than netsim's sender (`crates/netsim/src/tcp.rs`) moved
//! into a crate both use. netsim's sender is written against netsim's own event queue,
//! packet arena and access-link model (`FlowIo`), and carries NewReno, Vegas, pacing, web
//! transfers and the ns-2 quirks its paper reproductions pin down with snapshot tests; the
//! generator needs none of that, and sharing it would put an I/O trait between netsim and its
//! tested code for the sake of the ~150 lines below. The two follow the same RFCs with the
//! same simplifications (packet-counted windows, one RTT sample per window, `bugfix_`), so
//! a result here can be held against netsim's Reno.
//!
//! Time is passed in; nothing here reads a clock or draws a random number.

use zl_core::Nanos;

/// Congestion window a connection opens with, segments. decided: 2, RFC 5681 §3.1's floor
/// for any segment size (it allows up to 4 for segments of at most 1095 bytes).
pub(crate) const INITIAL_WINDOW: f64 = 2.0;
/// The timeout before the first RTT sample (RFC 6298 §2.1: 1 s).
const INITIAL_RTO: Nanos = Nanos(1_000_000_000);
/// Upper bound of the backed-off timeout (RFC 6298 §2.5 allows a maximum of at least 60 s).
const MAX_RTO: Nanos = Nanos(60_000_000_000);

/// One Reno sender's state, in segments.
#[derive(Clone, Debug)]
pub(crate) struct RenoSender {
    /// The receiver's advertised window: the most segments in flight.
    window_cap: u32,
    min_rto: Nanos,
    snd_una: u32,
    snd_nxt: u32,
    /// One past the highest segment ever sent.
    high_tx: u32,
    cwnd: f64,
    ssthresh: f64,
    dupacks: u32,
    in_recovery: bool,
    /// Highest segment outstanding when the last recovery or timeout began; duplicate ACKs
    /// at or below it start no fast retransmit.
    recover: Option<u32>,
    /// No new ECN reaction until an ACK passes this.
    ecn_recover: u32,
    /// A segment to retransmit before anything new (the fast retransmit).
    retransmit: Option<u32>,
    srtt: Option<Nanos>,
    rttvar: Nanos,
    rto: Nanos,
    backoff: u32,
    /// The segment being timed and when it was sent.
    timed: Option<(u32, Nanos)>,
    rto_deadline: Option<Nanos>,
    /// Retransmission timeouts so far.
    pub(crate) timeouts: u64,
}

impl RenoSender {
    pub(crate) fn new(window_cap: u32, min_rto: Nanos) -> Self {
        RenoSender {
            window_cap: window_cap.max(1),
            min_rto,
            snd_una: 0,
            snd_nxt: 0,
            high_tx: 0,
            cwnd: INITIAL_WINDOW,
            ssthresh: f64::from(u32::MAX),
            dupacks: 0,
            in_recovery: false,
            recover: None,
            ecn_recover: 0,
            retransmit: None,
            srtt: None,
            rttvar: Nanos::ZERO,
            rto: INITIAL_RTO.max(min_rto),
            backoff: 1,
            timed: None,
            rto_deadline: None,
            timeouts: 0,
        }
    }

    /// The congestion window, segments.
    pub(crate) fn cwnd(&self) -> f64 {
        self.cwnd
    }

    /// The slow-start threshold, segments.
    pub(crate) fn ssthresh(&self) -> f64 {
        self.ssthresh
    }

    /// When the retransmission timer expires, if it runs.
    pub(crate) fn rto_deadline(&self) -> Option<Nanos> {
        self.rto_deadline
    }

    fn window(&self) -> u32 {
        (self.cwnd.floor() as u32).clamp(1, self.window_cap)
    }

    /// Whether the window lets a segment go now.
    pub(crate) fn can_send(&self) -> bool {
        self.retransmit.is_some() || self.snd_nxt < self.snd_una.saturating_add(self.window())
    }

    /// Takes the next segment to send at `now` (a pending retransmission first), or `None`
    /// when the window is full. Returns `(sequence, is_retransmission)`.
    pub(crate) fn next_segment(&mut self, now: Nanos) -> Option<(u32, bool)> {
        let seq = match self.retransmit.take() {
            Some(s) => s,
            None if self.can_send() => {
                self.snd_nxt += 1;
                self.snd_nxt - 1
            }
            None => return None,
        };
        let again = seq < self.high_tx;
        if again {
            // Karn: a retransmission's ACK cannot be matched to one sending.
            self.timed = None;
        } else {
            self.high_tx = seq + 1;
            if self.timed.is_none() {
                self.timed = Some((seq, now));
            }
        }
        if self.rto_deadline.is_none() {
            self.arm(now);
        }
        Some((seq, again))
    }

    fn arm(&mut self, now: Nanos) {
        let rto = Nanos(self.rto.as_nanos().saturating_mul(self.backoff as u64)).min(MAX_RTO);
        self.rto_deadline = Some(now + rto);
    }

    /// One RFC 6298 §2 sample.
    fn rtt_sample(&mut self, r: Nanos) {
        let r = r.as_nanos() as i64;
        let (srtt, rttvar) = match self.srtt {
            None => (r, r / 2),
            Some(s) => {
                let s = s.as_nanos() as i64;
                let var = (3 * self.rttvar.as_nanos() as i64 + (s - r).abs()) / 4;
                ((7 * s + r) / 8, var)
            }
        };
        self.srtt = Some(Nanos(srtt as u64));
        self.rttvar = Nanos(rttvar as u64);
        self.rto = Nanos((srtt + 4 * rttvar) as u64).clamp(self.min_rto, MAX_RTO);
    }

    /// `ssthresh = max(FlightSize / 2, 2)` (RFC 5681 eq. 4, in segments).
    fn halve_flight(&mut self) {
        let flight = self.high_tx.saturating_sub(self.snd_una) as f64;
        self.ssthresh = (flight / 2.0).max(2.0);
    }

    /// An ACK reaching the sender at `now`: `ack` is the next segment the receiver expects,
    /// `ece` whether it echoes a CE mark.
    pub(crate) fn on_ack(&mut self, now: Nanos, ack: u32, ece: bool) {
        if let Some((seq, sent)) = self.timed {
            if ack > seq {
                self.timed = None;
                self.rtt_sample(now - sent);
            }
        }
        if ack > self.snd_una {
            self.snd_una = ack;
            self.snd_nxt = self.snd_nxt.max(ack);
            self.backoff = 1;
            self.dupacks = 0;
            if self.in_recovery {
                self.in_recovery = false;
                self.cwnd = self.ssthresh;
            } else if ece && ack > self.ecn_recover {
                // RFC 3168 §6.1.2: halve cwnd and ssthresh, once per window of data.
                self.ssthresh = (self.cwnd / 2.0).max(2.0);
                self.cwnd = self.ssthresh;
                self.ecn_recover = self.high_tx;
            } else if self.cwnd < self.ssthresh {
                self.cwnd += 1.0;
            } else {
                self.cwnd += 1.0 / self.cwnd;
            }
            self.cwnd = self.cwnd.min(self.window_cap as f64);
            if self.snd_una >= self.high_tx {
                self.rto_deadline = None;
            } else {
                self.arm(now);
            }
        } else if ack == self.snd_una && self.snd_una < self.high_tx {
            self.dupacks += 1;
            let fresh = self.recover.is_none_or(|r| ack > r);
            if self.dupacks == 3 && !self.in_recovery && fresh {
                self.halve_flight();
                self.cwnd = self.ssthresh + 3.0;
                self.in_recovery = true;
                self.recover = Some(self.high_tx - 1);
                self.ecn_recover = self.high_tx;
                self.retransmit = Some(self.snd_una);
                self.arm(now);
            } else if self.in_recovery && self.dupacks > 3 {
                self.cwnd += 1.0;
            }
        }
    }

    /// The timer's check at `now`: true when it expired (the sender has then backed off and
    /// will resend from the first unacknowledged segment).
    pub(crate) fn on_timer(&mut self, now: Nanos) -> bool {
        match self.rto_deadline {
            Some(d) if d <= now => {}
            _ => return false,
        }
        self.timeouts += 1;
        self.timed = None;
        self.halve_flight();
        self.cwnd = 1.0;
        self.in_recovery = false;
        self.dupacks = 0;
        self.retransmit = None;
        self.recover = Some(self.high_tx.saturating_sub(1));
        self.snd_nxt = self.snd_una;
        self.backoff = (self.backoff * 2).min(64);
        self.arm(now);
        true
    }
}

/// The receiving end of a responsive flow: the next segment it expects and which later ones
/// it holds, as a ring of bits over the advertised window (allocated once).
#[derive(Clone, Debug)]
pub(crate) struct SegmentReceiver {
    rcv_nxt: u32,
    /// Bit `s % (64 * held.len())`: segment `s` (`rcv_nxt < s < rcv_nxt + window`) arrived.
    held: Vec<u64>,
}

impl SegmentReceiver {
    pub(crate) fn new(window_cap: u32) -> Self {
        SegmentReceiver {
            rcv_nxt: 0,
            held: vec![0; (window_cap.max(1) as usize).div_ceil(64)],
        }
    }

    fn bit(&self, s: u32) -> (usize, u64) {
        let i = s as usize % (64 * self.held.len());
        (i / 64, 1 << (i % 64))
    }

    /// Segment `seq` arrived: returns the cumulative ACK (the next segment expected).
    /// decided: a segment beyond the ring (which a sender within the advertised window never
    /// sends) is discarded, as a receiver drops what falls outside its window.
    pub(crate) fn deliver(&mut self, seq: u32) -> u32 {
        let ahead = seq.wrapping_sub(self.rcv_nxt);
        if seq < self.rcv_nxt || ahead as usize >= 64 * self.held.len() {
            return self.rcv_nxt;
        }
        let (w, b) = self.bit(seq);
        self.held[w] |= b;
        loop {
            let (w, b) = self.bit(self.rcv_nxt);
            if self.held[w] & b == 0 {
                break;
            }
            self.held[w] &= !b;
            self.rcv_nxt += 1;
        }
        self.rcv_nxt
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn t(ms: u64) -> Nanos {
        Nanos(ms * MS)
    }

    /// Sends every segment the window allows at `now`.
    fn fill(s: &mut RenoSender, now: Nanos) -> Vec<u32> {
        std::iter::from_fn(|| s.next_segment(now).map(|(q, _)| q)).collect()
    }

    #[test]
    fn slow_start_doubles_the_window_each_round_trip() {
        let mut s = RenoSender::new(64, t(200));
        let mut now = t(0);
        let mut sent = fill(&mut s, now);
        assert_eq!(sent, [0, 1]);
        for round in 1..=4 {
            now += t(10);
            for q in &sent {
                s.on_ack(now, q + 1, false);
            }
            assert_eq!(s.cwnd(), 2.0 * 2f64.powi(round));
            sent = fill(&mut s, now);
            assert_eq!(sent.len() as f64, s.cwnd());
        }
    }

    /// A sender with `w` segments in flight, past slow start (ssthresh 2, cwnd w).
    fn in_avoidance(w: u32) -> RenoSender {
        let mut s = RenoSender::new(64, t(200));
        s.ssthresh = 2.0;
        s.cwnd = w as f64;
        assert_eq!(fill(&mut s, t(0)).len() as u32, w);
        s
    }

    #[test]
    fn three_duplicate_acks_halve_the_window_and_retransmit_the_hole() {
        let mut s = in_avoidance(16);
        // Segment 0 is lost: 1, 2, 3 arrive and each acknowledges 0 again.
        s.on_ack(t(10), 0, false);
        s.on_ack(t(10), 0, false);
        assert_eq!(s.cwnd(), 16.0);
        s.on_ack(t(10), 0, false);
        assert_eq!(s.ssthresh(), 8.0);
        assert_eq!(s.cwnd(), 11.0, "ssthresh + 3 during fast recovery");
        assert_eq!(s.next_segment(t(10)), Some((0, true)));
        // Each further duplicate inflates the window by one.
        s.on_ack(t(11), 0, false);
        assert_eq!(s.cwnd(), 12.0);
        // The retransmission's ACK ends recovery at half the old window.
        s.on_ack(t(20), 16, false);
        assert_eq!(s.cwnd(), 8.0);
        assert_eq!(s.timeouts, 0);
    }

    #[test]
    fn a_timeout_collapses_the_window_and_goes_back_to_the_first_unacked_segment() {
        let mut s = in_avoidance(10);
        s.on_ack(t(10), 4, false);
        let d = s.rto_deadline().unwrap();
        assert!(!s.on_timer(d - Nanos(1)), "not before the deadline");
        assert!(s.on_timer(d));
        // Six segments were in flight (4..=9): ssthresh 3.
        assert_eq!((s.cwnd(), s.ssthresh(), s.timeouts), (1.0, 3.0, 1));
        assert_eq!(s.next_segment(d), Some((4, true)));
        assert_eq!(
            s.next_segment(d),
            None,
            "one segment in flight after a timeout"
        );
        // The next timeout waits twice as long (back-off).
        let d2 = s.rto_deadline().unwrap();
        assert_eq!((d2 - d).as_nanos(), 2 * (d - t(10)).as_nanos());
    }

    #[test]
    fn an_ecn_echo_halves_once_per_window() {
        let mut s = in_avoidance(20);
        s.on_ack(t(10), 1, true);
        assert_eq!(s.cwnd(), 10.0);
        // More echoes for the same window of data change nothing.
        s.on_ack(t(10), 2, true);
        s.on_ack(t(10), 3, true);
        assert!(s.cwnd() > 10.0 && s.cwnd() < 10.3, "{}", s.cwnd());
    }

    #[test]
    fn the_rto_follows_rfc_6298_with_its_floor() {
        let mut s = RenoSender::new(8, t(200));
        fill(&mut s, t(0));
        s.on_ack(t(100), 1, false);
        // First sample 100 ms: srtt 100, rttvar 50, rto = 300 ms.
        assert_eq!(s.rto, t(300));
        let mut s = RenoSender::new(8, t(200));
        fill(&mut s, t(0));
        s.on_ack(t(10), 1, false);
        assert_eq!(s.rto, t(200), "floored at min_rto");
    }

    #[test]
    fn the_receiver_acknowledges_cumulatively_across_holes() {
        let mut r = SegmentReceiver::new(100);
        assert_eq!(r.deliver(0), 1);
        assert_eq!(r.deliver(2), 1, "1 is missing");
        assert_eq!(r.deliver(3), 1);
        assert_eq!(r.deliver(0), 1, "an old duplicate");
        assert_eq!(
            r.deliver(1),
            4,
            "the hole filled: everything held is delivered"
        );
        // Beyond the window (ring of 128 bits): discarded.
        assert_eq!(r.deliver(4 + 128), 4);
        assert_eq!(r.deliver(4), 5);
        // The ring wraps cleanly.
        for s in 5..1000 {
            assert_eq!(r.deliver(s), s + 1);
        }
    }
}
