//! Rate-based senders over UDP: constant bit rate, and a TCP-friendly rate controller.
//!
//! TFRC-like (after RFC 5348, simplified): the receiver reports every packet it gets (its
//! sequence number and echoed send time); the sender detects losses as sequence gaps (the
//! simulated path never reorders), groups losses less than one RTT apart into one loss event,
//! averages the last 8 loss intervals with RFC 5348 §5.4's weights (1,1,1,1,0.8,0.6,0.4,0.2),
//! and once per RTT sets its rate to the TCP throughput equation (RFC 5348 §3.1, `b = 1`,
//! `t_RTO = 4 R`), capped at twice the rate received over the last RTT; before the first loss
//! it doubles per RTT (slow start). Decided: per-packet feedback instead of one report per
//! RTT, because the sim's reverse path is free and this removes one source of noise.

use serde::{Deserialize, Serialize};
use zl_core::{Ecn, Nanos};

use crate::event::TimerKind;
use crate::flow::FlowIo;

/// Constant bit rate source.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CbrParams {
    /// Offered rate, bits per second.
    pub rate_bps: f64,
    /// Bytes per packet on the wire.
    pub packet_size: u32,
    /// The ECN field the packets carry (`not-ect`, `ect0`, `ect1`, `ce`). The source never
    /// reacts to a mark: `ect1` is an unresponsive flow in DualPI2's L4S queue (RFC 9331's
    /// identifier). Default `not-ect`.
    #[serde(default)]
    pub ecn: Ecn,
}

/// TCP-friendly rate control settings.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TfrcParams {
    /// Bytes per packet on the wire.
    pub packet_size: u32,
    /// Highest rate the application can use, bits per second.
    pub max_rate_bps: f64,
}

#[derive(Clone, Debug)]
pub(crate) struct CbrSender {
    p: CbrParams,
    seq: u32,
    interval: Nanos,
    next_at: Nanos,
}

impl CbrSender {
    pub(crate) fn new(p: CbrParams) -> Self {
        let interval = Nanos::from_secs_f64(p.packet_size as f64 * 8.0 / p.rate_bps);
        CbrSender {
            p,
            seq: 0,
            interval: Nanos(interval.as_nanos().max(1)),
            next_at: Nanos::ZERO,
        }
    }

    pub(crate) fn start(&mut self, io: &mut FlowIo<'_>) {
        self.next_at = io.now();
        self.tick(io);
    }

    pub(crate) fn tick(&mut self, io: &mut FlowIo<'_>) {
        io.send(self.seq, self.p.packet_size, false);
        self.seq += 1;
        self.next_at += self.interval;
        let at = self.next_at;
        io.timer(at, TimerKind::Send);
    }
}

/// RFC 5348 §5.4 weights for the last 8 loss intervals, newest first.
const WEIGHTS: [f64; 8] = [1.0, 1.0, 1.0, 1.0, 0.8, 0.6, 0.4, 0.2];

#[derive(Clone, Debug)]
pub(crate) struct TfrcSender {
    p: TfrcParams,
    seq: u32,
    /// Packets per second.
    rate: f64,
    srtt: Option<f64>,
    expected: u32,
    intervals: [u32; 8],
    n_intervals: usize,
    current_interval: u32,
    last_loss_event: Option<Nanos>,
    received_in_round: u32,
    round_start: Nanos,
    next_send: Nanos,
    send_event_at: Option<Nanos>,
}

impl TfrcSender {
    pub(crate) fn new(p: TfrcParams) -> Self {
        TfrcSender {
            p,
            seq: 0,
            rate: 1.0,
            srtt: None,
            expected: 0,
            intervals: [0; 8],
            n_intervals: 0,
            current_interval: 0,
            last_loss_event: None,
            received_in_round: 0,
            round_start: Nanos::ZERO,
            next_send: Nanos::ZERO,
            send_event_at: None,
        }
    }

    fn max_rate(&self) -> f64 {
        self.p.max_rate_bps / (8.0 * self.p.packet_size as f64)
    }

    pub(crate) fn start(&mut self, io: &mut FlowIo<'_>) {
        self.round_start = io.now();
        self.next_send = io.now();
        self.send(io);
    }

    fn send(&mut self, io: &mut FlowIo<'_>) {
        io.send(self.seq, self.p.packet_size, false);
        self.seq += 1;
        self.next_send = io.now() + Nanos::from_secs_f64(1.0 / self.rate.max(1e-3));
        let at = self.next_send;
        self.send_event_at = Some(at);
        io.timer(at, TimerKind::Send);
    }

    pub(crate) fn on_timer(&mut self, io: &mut FlowIo<'_>) {
        if self.send_event_at == Some(io.now()) {
            self.send(io);
        }
    }

    /// Loss event rate p from the weighted average loss interval (RFC 5348 §5.4), `None`
    /// before the first loss.
    pub(crate) fn loss_event_rate(&self) -> Option<f64> {
        if self.n_intervals == 0 {
            return None;
        }
        let avg = |first: u32, hist: &[u32]| {
            let mut num = 0.0;
            let mut den = 0.0;
            for (i, &v) in std::iter::once(&first)
                .chain(hist.iter())
                .enumerate()
                .take(8)
            {
                num += WEIGHTS[i] * v as f64;
                den += WEIGHTS[i];
            }
            num / den
        };
        let hist = &self.intervals[..self.n_intervals];
        let without = avg(hist[0], &hist[1..]);
        let with = avg(self.current_interval, hist);
        Some(1.0 / without.max(with).max(1.0))
    }

    /// Feedback for packet `seq` sent at `ts`.
    pub(crate) fn on_feedback(&mut self, io: &mut FlowIo<'_>, seq: u32, ts: Nanos) {
        let now = io.now();
        let r = (now - ts).as_secs_f64();
        let srtt = match self.srtt {
            None => r,
            Some(s) => 0.9 * s + 0.1 * r,
        };
        if self.srtt.is_none() {
            self.rate = (4.0 / srtt).min(self.max_rate());
        }
        self.srtt = Some(srtt);
        if seq > self.expected {
            let new_event = self
                .last_loss_event
                .is_none_or(|t| (now - t).as_secs_f64() > srtt);
            if new_event {
                self.intervals.copy_within(0..7, 1);
                self.intervals[0] = self.current_interval.max(1);
                self.n_intervals = (self.n_intervals + 1).min(8);
                self.current_interval = 0;
                self.last_loss_event = Some(now);
            }
        }
        if seq >= self.expected {
            self.expected = seq + 1;
        }
        self.current_interval += 1;
        self.received_in_round += 1;
        let round = (now - self.round_start).as_secs_f64();
        if round >= srtt {
            let x_recv = self.received_in_round as f64 / round;
            let x = match self.loss_event_rate() {
                None => 2.0 * self.rate,
                Some(p) => tcp_rate(p, srtt),
            };
            self.rate = x.min(2.0 * x_recv).min(self.max_rate()).max(1.0 / 64.0);
            self.received_in_round = 0;
            self.round_start = now;
        }
    }
}

/// The TCP throughput equation of RFC 5348 §3.1 in packets per second, with `b = 1` and
/// `t_RTO = 4 R`.
pub fn tcp_rate(p: f64, rtt: f64) -> f64 {
    let t_rto = 4.0 * rtt;
    let denom = rtt * (2.0 * p / 3.0).sqrt()
        + t_rto * (3.0 * (3.0 * p / 8.0).sqrt()) * p * (1.0 + 32.0 * p * p);
    1.0 / denom
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tcp_equation_matches_mathis_at_small_p() {
        // For small p the timeout term vanishes: X ~= 1 / (R sqrt(2p/3)).
        let (p, r) = (1e-4, 0.1);
        let mathis = 1.0 / (r * (2.0 * p / 3.0_f64).sqrt());
        let x = tcp_rate(p, r);
        assert!((x / mathis - 1.0).abs() < 0.02, "x={x} mathis={mathis}");
        assert!(tcp_rate(0.1, r) < tcp_rate(0.01, r));
    }
}
