//! TCP senders in the ns-2 one-way style: sequence numbers count packets, every packet has the
//! same size, and the receiver acknowledges cumulatively (the crate-private `receiver` module).
//!
//! - Reno (RFC 5681 / 4.3BSD Reno as in ns-2 `Agent/TCP/Reno`): slow start, congestion
//!   avoidance (+1/cwnd per ACK), fast retransmit on the third duplicate ACK, fast recovery
//!   with window inflation, left on the first new ACK.
//! - NewReno (RFC 6582): as Reno, but a partial ACK retransmits the next hole and recovery
//!   lasts until everything outstanding at its start is acknowledged.
//! - Vegas (Brakmo & Peterson 1995; ns-2 `Agent/TCP/Vegas`): once per RTT,
//!   `diff = cwnd * (1 - baseRTT / RTT)` estimates the packets this flow keeps queued; congestion
//!   avoidance adds one packet when `diff < alpha`, removes one when `diff > beta`; slow start
//!   grows every other RTT and ends when `diff > gamma`. ns-2's defaults alpha/beta/gamma =
//!   1/3/1. Decided: RTT per round is the minimum sample of the round (as Linux
//!   `tcp_vegas.c`, which is robust to delayed ACKs), and losses are handled as Reno's.
//! - Paced (docs/algorithms/buffer-sizing.md): any variant may pace, sending one packet every
//!   `srtt / cwnd` instead of a burst per ACK; retransmissions are not delayed.
//! - ECN (RFC 3168): on an echoed mark the window halves at most once per window of data; the
//!   priority extension header of docs/algorithms/wire.md is the same reaction to its CI echo.
//!
//! Retransmission timer: RFC 6298 (`srtt + 4 rttvar`, floor `min_rto`, doubling back-off),
//! go-back-N after a timeout, and ns-2's `bugfix_` (no fast retransmit for duplicate ACKs of
//! data sent before the timeout). As in ns-2 (and RFC 6298 §3 without timestamps), the
//! estimator takes one sample per RTT: one new segment is timed at a time, and a timing is
//! abandoned when anything is retransmitted (Karn). Decided: Vegas's own RTT (baseRTT and the
//! per-round minimum) still uses every ACK's echoed send time, as ns-2's fine-grained Vegas
//! clock does. Sampling every ACK into the RFC 6298 estimator would collapse `rttvar` when a
//! window's ACKs return back to back with equal RTTs, and then every slow rise of the queue
//! fires a spurious timeout.

use serde::{Deserialize, Serialize};
use zl_core::Nanos;

use crate::event::TimerKind;
use crate::flow::{FlowIo, RtoTimer};

/// Congestion-control algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TcpVariant {
    Reno,
    NewReno,
    Vegas,
    /// ns-2's plain `Agent/TCP` (only with `model = "ns2"`).
    Tahoe,
}

/// Which implementation runs the sender.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TcpModel {
    /// This crate's RFC-based senders ([`TcpSender`]).
    #[default]
    Netsim,
    /// ns-2.35's `Agent/TCP`, `/Reno` and `/Newreno` with their quirks
    /// ([`crate::tcp_ns2`]), and the sink's ECN echo held until CWR.
    Ns2,
}

/// How the sender takes part in explicit congestion notification.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EcnMode {
    /// Not ECN-capable: congestion is signalled by loss only.
    #[default]
    Off,
    /// RFC 3168: packets carry ECT(0), the receiver echoes CE as ECE.
    Rfc3168,
    /// The congestion-control extension header of docs/algorithms/wire.md (ECN bit, CI echo,
    /// weight).
    PriorityExt,
}

/// Vegas thresholds in packets (ns-2 defaults 1 / 3 / 1).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VegasParams {
    pub alpha: f64,
    pub beta: f64,
    pub gamma: f64,
}

impl Default for VegasParams {
    fn default() -> Self {
        VegasParams {
            alpha: 1.0,
            beta: 3.0,
            gamma: 1.0,
        }
    }
}

/// A TCP sender's settings. Every ns-2 default that changes results is a field.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TcpParams {
    pub variant: TcpVariant,
    /// Which sender implementation runs (default `netsim`).
    pub model: TcpModel,
    /// Timer granularity of the `ns2` model, ms (ns-2 `tcpTick_`, ns-default.tcl
    /// `Agent/TCP set tcpTick_ 0.01`; 0.1 before 2002).
    pub tcp_tick_ms: f64,
    /// `ns2` model: send one new packet on each of the first two duplicate ACKs (ns-2
    /// `singledup_`, ns-default.tcl `Agent/TCP set singledup_ 1`, since 2001/11/28).
    pub limited_transmit: bool,
    /// `ns2` model: most packets sent per ACK, 0 = unlimited (ns-2 `maxburst_ 0`).
    pub max_burst: u32,
    /// `ns2` model: halve to `win / 2` exactly, not `int(win / 2)` (ns-2 `precisionReduce_`,
    /// ns-default.tcl `true` since 2006/1/24, `false` before).
    pub precision_reduce: bool,
    /// `ns2` model: open with a one-packet SYN exchange, then `windowInit_` (ns-2 `syn_` and
    /// `delay_growth_`, both `true` since 2001/5/17, `false` before).
    pub syn: bool,
    /// `ns2` model: the sink repeats the echo on every ACK until a CWR packet arrives (ns-2
    /// `tcp-sink.cc` `ecn_unacked_`); `false`: only the next ACK carries it.
    pub echo_until_cwr: bool,
    /// Bytes per data packet on the wire (ns-2 `packetSize_`, 1000).
    pub packet_size: u32,
    /// Largest window in packets, the receiver's advertised window (ns-2 `window_`, 20).
    pub window_cap: u32,
    /// Initial congestion window in packets (ns-2 `windowInit_`, 1).
    pub initial_window: u32,
    /// Initial slow-start threshold in packets (ns-2: effectively unbounded).
    pub initial_ssthresh: u32,
    /// Lower bound of the retransmission timeout in ms (ns-2 `minrto_`, 200).
    pub min_rto_ms: f64,
    /// Timeout before the first RTT sample, in ms (ns-2 `rtxcur_init_`, 3000).
    pub initial_rto_ms: f64,
    /// Upper bound of the backed-off timeout, ms.
    pub max_rto_ms: f64,
    /// Space packets one `srtt / cwnd` apart.
    pub paced: bool,
    pub ecn: EcnMode,
    /// Priority 8..=15 carried in each packet (docs/algorithms/priority-ecn-red.md), 11 = the
    /// reference priority.
    pub priority: u8,
    /// Priority weight `w` carried in the extension header (docs/algorithms/wire.md).
    pub weight: u8,
    pub vegas: VegasParams,
    /// The receiver acknowledges every second packet, or after `delack_ms`.
    pub delayed_ack: bool,
    /// Delayed-ACK timeout in ms (ns-2 `interval_`, 100).
    pub delack_ms: f64,
}

impl Default for TcpParams {
    fn default() -> Self {
        TcpParams {
            variant: TcpVariant::Reno,
            model: TcpModel::Netsim,
            tcp_tick_ms: 10.0,
            limited_transmit: true,
            max_burst: 0,
            precision_reduce: true,
            syn: true,
            echo_until_cwr: true,
            packet_size: 1000,
            window_cap: 20,
            initial_window: 1,
            initial_ssthresh: u32::MAX / 2,
            min_rto_ms: 200.0,
            initial_rto_ms: 3000.0,
            max_rto_ms: 64_000.0,
            paced: false,
            ecn: EcnMode::Off,
            priority: 11,
            weight: 0,
            vegas: VegasParams::default(),
            delayed_ack: false,
            delack_ms: 100.0,
        }
    }
}

/// What the sender's application offers: one endless transfer (FTP / P2P), or transfers of
/// Pareto-distributed size separated by exponential idle times (web-like on/off).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebParams {
    /// Mean transfer size in packets.
    pub mean_size_packets: f64,
    /// Pareto shape (> 1; 1.2 is the classic heavy tail of web objects).
    pub shape: f64,
    /// Mean idle time between transfers, ms.
    pub mean_off_ms: f64,
}

impl WebParams {
    /// One Pareto draw with the configured mean: `x_m / U^(1/shape)`, `x_m = mean (k-1)/k`.
    pub(crate) fn draw_size<R: rand::Rng + ?Sized>(&self, rng: &mut R) -> u32 {
        let k = self.shape;
        let xm = self.mean_size_packets * (k - 1.0) / k;
        let u: f64 = 1.0 - rng.random::<f64>();
        let x = xm / u.powf(1.0 / k);
        x.round().clamp(1.0, 1e7) as u32
    }

    pub(crate) fn draw_off<R: rand::Rng + ?Sized>(&self, rng: &mut R) -> Nanos {
        let u: f64 = 1.0 - rng.random::<f64>();
        Nanos::from_secs_f64(-u.ln() * self.mean_off_ms * 1e-3)
    }
}

const NEVER: u32 = u32::MAX;

/// One TCP sender's state.
#[derive(Clone, Debug)]
pub(crate) struct TcpSender {
    p: TcpParams,
    web: Option<WebParams>,
    snd_una: u32,
    snd_nxt: u32,
    /// One past the highest sequence ever sent.
    high_tx: u32,
    /// End of the current transfer (exclusive); `NEVER` for an endless one.
    transfer_end: u32,
    transfer_start: Nanos,
    cwnd: f64,
    ssthresh: f64,
    dupacks: u32,
    in_recovery: bool,
    /// Highest sequence outstanding when recovery (or a timeout) began.
    recover: u32,
    /// No new ECN reaction until `snd_una` passes this.
    ecn_recover: u32,
    srtt: Option<f64>,
    rttvar: f64,
    /// The segment being timed for the RTO estimator and when it was sent.
    timed: Option<(u32, Nanos)>,
    rto: f64,
    backoff: u32,
    rto_timer: RtoTimer,
    next_send_at: Nanos,
    send_event_at: Option<Nanos>,
    base_rtt: f64,
    round_min_rtt: f64,
    round_end: u32,
    ss_grow_round: bool,
    /// Sampled congestion window (packets), for traces.
    pub(crate) last_cwnd: f64,
}

impl TcpSender {
    pub(crate) fn new(p: TcpParams, web: Option<WebParams>) -> Self {
        TcpSender {
            p,
            web,
            snd_una: 0,
            snd_nxt: 0,
            high_tx: 0,
            transfer_end: 0,
            transfer_start: Nanos::ZERO,
            cwnd: p.initial_window.max(1) as f64,
            ssthresh: p.initial_ssthresh.max(2) as f64,
            dupacks: 0,
            in_recovery: false,
            recover: 0,
            ecn_recover: 0,
            srtt: None,
            rttvar: 0.0,
            timed: None,
            rto: p.initial_rto_ms * 1e-3,
            backoff: 1,
            rto_timer: RtoTimer::default(),
            next_send_at: Nanos::ZERO,
            send_event_at: None,
            base_rtt: f64::INFINITY,
            round_min_rtt: f64::INFINITY,
            round_end: 0,
            ss_grow_round: true,
            last_cwnd: p.initial_window.max(1) as f64,
        }
    }

    /// Starts the flow, or its next on/off transfer.
    pub(crate) fn start(&mut self, io: &mut FlowIo<'_>) {
        self.transfer_start = io.now();
        self.transfer_end = match self.web {
            None => NEVER,
            Some(w) => {
                let n = w.draw_size(io.rng());
                self.high_tx.saturating_add(n)
            }
        };
        if self.web.is_some() {
            // Each transfer starts afresh (a new connection), keeping only the RTT estimate.
            self.cwnd = self.p.initial_window.max(1) as f64;
            self.ssthresh = self.p.initial_ssthresh.max(2) as f64;
            self.round_end = self.high_tx;
            self.ss_grow_round = true;
        }
        self.pump(io);
    }

    fn window(&self) -> u32 {
        (self.cwnd.floor() as u32).clamp(1, self.p.window_cap.max(1))
    }

    fn arm_rto(&mut self, io: &mut FlowIo<'_>) {
        let d = io.now() + Nanos::from_secs_f64(self.rto * self.backoff as f64);
        self.rto_timer.arm(io, d);
    }

    fn transmit(&mut self, io: &mut FlowIo<'_>, seq: u32) {
        let retransmit = seq < self.high_tx;
        if retransmit {
            self.timed = None;
        } else if self.timed.is_none() {
            self.timed = Some((seq, io.now()));
        }
        io.send(seq, self.p.packet_size, retransmit);
        if seq >= self.high_tx {
            self.high_tx = seq + 1;
        }
        if !self.rto_timer.is_armed() {
            self.arm_rto(io);
        }
    }

    /// Sends what the window allows, paced when configured.
    fn pump(&mut self, io: &mut FlowIo<'_>) {
        loop {
            if self.snd_nxt >= self.transfer_end {
                return;
            }
            if self.snd_nxt >= self.snd_una.saturating_add(self.window()) {
                return;
            }
            if self.p.paced {
                if let Some(srtt) = self.srtt {
                    let now = io.now();
                    if now < self.next_send_at {
                        if self.send_event_at.is_none_or(|e| e > self.next_send_at) {
                            self.send_event_at = Some(self.next_send_at);
                            io.timer(self.next_send_at, TimerKind::Send);
                        }
                        return;
                    }
                    self.next_send_at = now + Nanos::from_secs_f64(srtt / self.cwnd.max(1.0));
                }
            }
            let seq = self.snd_nxt;
            self.snd_nxt += 1;
            self.transmit(io, seq);
        }
    }

    /// Vegas's fine-grained clock: every ACK's echoed send time.
    fn vegas_sample(&mut self, r: f64) {
        self.base_rtt = self.base_rtt.min(r);
        self.round_min_rtt = self.round_min_rtt.min(r);
    }

    /// One RFC 6298 sample (at most one per RTT).
    fn rtt_sample(&mut self, r: f64) {
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2.0;
            }
            Some(s) => {
                self.rttvar = 0.75 * self.rttvar + 0.25 * (s - r).abs();
                self.srtt = Some(0.875 * s + 0.125 * r);
            }
        }
        let s = self.srtt.unwrap_or(r);
        self.rto = (s + 4.0 * self.rttvar)
            .max(self.p.min_rto_ms * 1e-3)
            .min(self.p.max_rto_ms * 1e-3);
    }

    fn enter_loss_recovery_thresh(&mut self) {
        let flight = self.cwnd.min(self.p.window_cap as f64);
        self.ssthresh = (flight / 2.0).max(2.0);
    }

    /// Handles a cumulative ACK (`ack` = next sequence the receiver expects).
    pub(crate) fn on_ack(&mut self, io: &mut FlowIo<'_>, ack: u32, ece: bool, ts: Nanos) {
        let now = io.now();
        self.vegas_sample((now - ts).as_secs_f64());
        if let Some((seq, sent)) = self.timed {
            if ack > seq {
                self.timed = None;
                self.rtt_sample((now - sent).as_secs_f64());
            }
        }
        if ack > self.snd_una {
            let newly = ack - self.snd_una;
            self.snd_una = ack;
            if self.snd_nxt < self.snd_una {
                self.snd_nxt = self.snd_una;
            }
            self.backoff = 1;
            if self.in_recovery {
                if self.p.variant == TcpVariant::NewReno && ack <= self.recover {
                    let hole = self.snd_una;
                    self.transmit(io, hole);
                    self.cwnd = (self.cwnd - newly as f64 + 1.0).max(1.0);
                } else {
                    self.in_recovery = false;
                    self.cwnd = self.ssthresh;
                }
            } else {
                self.dupacks = 0;
                self.grow(newly);
            }
            if ece && self.p.ecn != EcnMode::Off && !self.in_recovery && ack > self.ecn_recover {
                self.enter_loss_recovery_thresh();
                self.cwnd = self.ssthresh;
                self.ecn_recover = self.high_tx;
            }
            self.dupacks = if self.in_recovery { self.dupacks } else { 0 };
            if self.snd_una >= self.high_tx {
                self.rto_timer.cancel();
            } else {
                self.arm_rto(io);
            }
            self.vegas_round(ack);
            if self.snd_una >= self.transfer_end {
                self.finish_transfer(io);
                self.last_cwnd = self.cwnd;
                return;
            }
        } else if ack == self.snd_una && self.snd_una < self.high_tx {
            self.dupacks += 1;
            if self.dupacks == 3 && !self.in_recovery && ack > self.recover {
                self.enter_loss_recovery_thresh();
                self.cwnd = self.ssthresh + 3.0;
                self.in_recovery = true;
                self.recover = self.high_tx - 1;
                self.ecn_recover = self.high_tx;
                let hole = self.snd_una;
                self.transmit(io, hole);
                self.arm_rto(io);
            } else if self.in_recovery && self.dupacks > 3 {
                self.cwnd += 1.0;
            }
        }
        self.last_cwnd = self.cwnd;
        self.pump(io);
    }

    fn grow(&mut self, _newly: u32) {
        let cap = self.p.window_cap as f64;
        match self.p.variant {
            TcpVariant::Vegas => {
                if self.cwnd < self.ssthresh && self.ss_grow_round {
                    self.cwnd += 1.0;
                }
            }
            TcpVariant::Reno | TcpVariant::NewReno | TcpVariant::Tahoe => {
                if self.cwnd < self.ssthresh {
                    self.cwnd += 1.0;
                } else {
                    self.cwnd += 1.0 / self.cwnd;
                }
            }
        }
        self.cwnd = self.cwnd.min(cap);
    }

    /// Vegas's once-per-RTT window decision.
    fn vegas_round(&mut self, ack: u32) {
        if self.p.variant != TcpVariant::Vegas || ack < self.round_end {
            return;
        }
        let rtt = self.round_min_rtt;
        if rtt.is_finite() && self.base_rtt.is_finite() && rtt > 0.0 && !self.in_recovery {
            let v = self.p.vegas;
            let diff = self.cwnd * (1.0 - self.base_rtt / rtt);
            if self.cwnd < self.ssthresh {
                if diff > v.gamma {
                    let target = self.cwnd * self.base_rtt / rtt;
                    self.cwnd = self.cwnd.min(target.floor() + 1.0).max(2.0);
                    self.ssthresh = 2.0_f64.min(self.cwnd - 1.0).max(1.0);
                }
                self.ss_grow_round = !self.ss_grow_round;
            } else if diff < v.alpha {
                self.cwnd = (self.cwnd + 1.0).min(self.p.window_cap as f64);
            } else if diff > v.beta {
                self.cwnd = (self.cwnd - 1.0).max(2.0);
            }
        }
        self.round_min_rtt = f64::INFINITY;
        self.round_end = self.high_tx.max(ack + 1);
    }

    fn finish_transfer(&mut self, io: &mut FlowIo<'_>) {
        io.counters.transfers += 1;
        io.counters.transfer_time_sum += (io.now() - self.transfer_start).as_nanos();
        self.rto_timer.cancel();
        if let Some(w) = self.web {
            let off = w.draw_off(io.rng());
            let at = io.now() + off;
            io.timer(at, TimerKind::Start);
        }
    }

    pub(crate) fn on_timer(&mut self, io: &mut FlowIo<'_>, kind: TimerKind) {
        let now = io.now();
        match kind {
            TimerKind::Rto => {
                if self.rto_timer.fired(io, now) {
                    self.timeout(io);
                }
            }
            TimerKind::Send => {
                if self.send_event_at != Some(now) {
                    return;
                }
                self.send_event_at = None;
                self.pump(io);
            }
            TimerKind::Start => self.start(io),
            TimerKind::DelAck => {}
        }
    }

    fn timeout(&mut self, io: &mut FlowIo<'_>) {
        io.counters.timeouts += 1;
        self.timed = None;
        self.enter_loss_recovery_thresh();
        self.cwnd = 1.0;
        self.last_cwnd = 1.0;
        self.in_recovery = false;
        self.dupacks = 0;
        self.recover = self.high_tx.saturating_sub(1);
        self.snd_nxt = self.snd_una;
        self.backoff = (self.backoff * 2).min(64);
        self.round_end = self.high_tx;
        self.next_send_at = Nanos::ZERO;
        self.arm_rto(io);
        self.pump(io);
    }
}
