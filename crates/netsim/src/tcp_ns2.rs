//! ns-2's one-way TCP senders, transcribed from ns-2.35 (`tcp/tcp.cc`, `tcp/tcp-reno.cc`,
//! `tcp/tcp-newreno.cc`) for runs that must behave as the papers' ns-2 runs did
//! (`model = "ns2"` in a group's `tcp` table). The default model ([`crate::tcp`]) stays the
//! RFC-based one; this one keeps ns-2's own choices, quirks included:
//!
//! - `Agent/TCP` (Tahoe: a third duplicate ACK halves `ssthresh_`, sets `cwnd_ = 1` and goes
//!   back to the first unacknowledged packet), `Agent/TCP/Reno` (fast recovery by `dupwnd_`
//!   inflation; a partial ACK ends it, and with `bugFix_` a further loss in the same window
//!   waits for the timeout), `Agent/TCP/Newreno` (partial ACKs retransmit the next hole and
//!   deflate the window, `partial_window_deflation_ 1`; recovery ends when `recover_` is
//!   acknowledged).
//! - `slowdown()` with `precisionReduce_ true`: `ssthresh_ = int(win / 2)` (at least 2),
//!   `cwnd_ = win / 2` (not an integer), `win = min(cwnd_ (+ dupwnd_), window_)`. `cwnd_` itself
//!   is never capped by `window_` (`maxcwnd_ 0`); only the usable window is.
//! - The retransmission timer in `tcpTick_` units with 3 and 2 fractional bits for `t_srtt_` and
//!   `t_rttvar_` (`rtt_update`), one timed segment at a time (`rtt_active_`), RFC 2988 clamping
//!   to `minrto_` before the back-off (`rtt_timeout`, `rfc2988_ true`), at least two ticks,
//!   back-off doubling to 64 and clearing `t_srtt_` past 8 (`rtt_backoff`).
//! - `syn_ true` with `delay_growth_ true`: the first packet goes alone (a 40-byte SYN), and its
//!   ACK sets `cwnd_ = windowInit_`; `ssthresh_` starts at `window_`. `syn = false` starts
//!   with `windowInit_` (ns-2 before 2001). `precision_reduce = false` halves to `int(win/2)`.
//! - Limited transmit (`singledup_ 1`): the first and second duplicate ACK each send one new
//!   packet if `t_seqno_ <= highest_ack_ + cwnd_ + dupacks_`.
//! - ECN (`ecn_ 1`): `ecn()` halves once per window (`seqno > recover_`), an ACK carrying
//!   ECN-Echo never opens the window, and the next new packet carries CWR (`cong_action_`),
//!   which stops the sink's echo. With `cwnd_ <= 1` the timer backs off instead (`ecn_backoff_`).
//! - `maxburst_` (0 = no limit; NewReno sends at most 2 per ACK while in fast recovery).
//!
//! Sequence numbers: ns-2 acknowledges the highest in-order packet (`highest_ack_`, -1 before
//! any); the simulator's receiver returns the next expected one, so `seqno = ack - 1` here.
//! Decided: no `overhead_`, no timestamps option, `boot_time_ = 0` (the `tickoff` of
//! `rtt_update` is `fmod(send time, tcpTick_)`).

use zl_core::Nanos;

use crate::event::TimerKind;
use crate::flow::{FlowIo, RtoTimer};
use crate::tcp::{EcnMode, TcpParams, TcpVariant};

/// ns-2 `T_SRTT_BITS` and `T_RTTVAR_BITS` (ns-default.tcl `Agent/TCP set T_SRTT_BITS 3`, `2`).
const T_SRTT_BITS: u32 = 3;
const T_RTTVAR_BITS: u32 = 2;
/// ns-2 `rttvar_exp_` (ns-default.tcl `Agent/TCP set rttvar_exp_ 2`): RTO = srtt + 4 rttvar.
const RTTVAR_EXP: u32 = 2;
/// ns-2 `rttvar_init_` (ns-default.tcl `Agent/TCP set rttvar_init_ 12`), seconds.
const RTTVAR_INIT_S: f64 = 12.0;
/// ns-2 `numdupacks_` (ns-default.tcl `Agent/TCP set numdupacks_ 3`).
const NUMDUPACKS: u32 = 3;
/// ns-2 `tcpip_base_hdr_size_` (ns-default.tcl, 40): the size of the SYN.
const SYN_BYTES: u32 = 40;

/// `last_cwnd_action_` of tcp.h.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CwndAction {
    None,
    Dupack,
    Exited,
    Timeout,
    Ecn,
}

/// One ns-2 sender. Field names follow tcp.h.
#[derive(Clone, Debug)]
pub(crate) struct Ns2Sender {
    p: TcpParams,
    tick: f64,
    t_seqno: i64,
    highest_ack: i64,
    last_ack: i64,
    maxseq: i64,
    recover: i64,
    cwnd: f64,
    ssthresh: f64,
    dupacks: u32,
    dupwnd: u32,
    last_cwnd_action: CwndAction,
    cong_action: bool,
    ecn_backoff: bool,
    rtt_active: bool,
    rtt_seq: i64,
    rtt_ts: Nanos,
    t_srtt: i32,
    t_rttvar: i32,
    t_rtxcur: f64,
    t_backoff: u32,
    rto: RtoTimer,
    /// NewReno `firstpartial_`: only the first partial ACK restarts the timer.
    first_partial: bool,
    pub(crate) last_cwnd: f64,
}

impl Ns2Sender {
    pub(crate) fn new(p: TcpParams) -> Self {
        let tick = p.tcp_tick_ms * 1e-3;
        Ns2Sender {
            p,
            tick,
            t_seqno: 0,
            highest_ack: -1,
            last_ack: -1,
            maxseq: -1,
            recover: 0,
            cwnd: if p.syn {
                1.0
            } else {
                p.initial_window.max(1) as f64
            },
            ssthresh: p.window_cap as f64,
            dupacks: 0,
            dupwnd: 0,
            last_cwnd_action: CwndAction::None,
            cong_action: false,
            ecn_backoff: false,
            rtt_active: false,
            rtt_seq: -1,
            rtt_ts: Nanos::ZERO,
            t_srtt: 0,
            t_rttvar: ((RTTVAR_INIT_S / tick) as i32) << T_RTTVAR_BITS,
            t_rtxcur: p.initial_rto_ms * 1e-3,
            t_backoff: 1,
            rto: RtoTimer::default(),
            first_partial: false,
            last_cwnd: 1.0,
        }
    }

    fn ecn(&self) -> bool {
        self.p.ecn != EcnMode::Off
    }

    fn reno_like(&self) -> bool {
        matches!(self.p.variant, TcpVariant::Reno | TcpVariant::NewReno)
    }

    /// `window()`: the usable window in packets (Reno adds `dupwnd_`).
    fn window(&self) -> i64 {
        let wnd = self.p.window_cap as i64;
        let w = self.cwnd as i64
            + if self.reno_like() {
                self.dupwnd as i64
            } else {
                0
            };
        w.min(wnd)
    }

    /// `windowd()`.
    fn windowd(&self) -> f64 {
        let d = if self.reno_like() {
            self.dupwnd as f64
        } else {
            0.0
        };
        (self.cwnd + d).min(self.p.window_cap as f64)
    }

    /// `slowdown(how)` with `decrease_num_ 0.5`.
    fn slowdown(&mut self, ssthresh_half: bool, cwnd: Cut) {
        let halfwin = if self.p.precision_reduce {
            self.windowd() / 2.0
        } else {
            (self.window() / 2) as f64
        };
        if ssthresh_half {
            self.ssthresh = halfwin.floor();
        }
        match cwnd {
            Cut::Half => self.cwnd = halfwin,
            Cut::One => self.cwnd = 1.0,
        }
        if self.ssthresh < 2.0 {
            self.ssthresh = 2.0;
        }
        self.cong_action = true;
    }

    /// `rtt_timeout()` with `rfc2988_ true`.
    fn rtt_timeout(&self) -> f64 {
        let minrto = self.p.min_rto_ms * 1e-3;
        let mut t = if self.t_rtxcur < minrto {
            minrto * self.t_backoff as f64
        } else {
            self.t_rtxcur * self.t_backoff as f64
        };
        t = t.min(self.p.max_rto_ms * 1e-3);
        t.max(2.0 * self.tick)
    }

    /// `rtt_update(tao)` without the timestamp option.
    fn rtt_update(&mut self, now: Nanos, tao: f64) {
        let send = now.as_secs_f64() - tao;
        let tickoff = send % self.tick;
        let t_rtt = (((tao + tickoff) / self.tick) as i32).max(1);
        if self.t_srtt != 0 {
            let mut delta = t_rtt - (self.t_srtt >> T_SRTT_BITS);
            self.t_srtt += delta;
            if self.t_srtt <= 0 {
                self.t_srtt = 1;
            }
            delta = delta.abs() - (self.t_rttvar >> T_RTTVAR_BITS);
            self.t_rttvar += delta;
            if self.t_rttvar <= 0 {
                self.t_rttvar = 1;
            }
        } else {
            self.t_srtt = t_rtt << T_SRTT_BITS;
            self.t_rttvar = t_rtt << (T_RTTVAR_BITS - 1);
        }
        let shifted = (self.t_rttvar << (RTTVAR_EXP + T_SRTT_BITS - T_RTTVAR_BITS)) + self.t_srtt;
        self.t_rtxcur = (shifted >> T_SRTT_BITS) as f64 * self.tick;
    }

    /// `rtt_backoff()`.
    fn rtt_backoff(&mut self) {
        if self.t_backoff < 64 || self.rtt_timeout() < self.p.max_rto_ms * 1e-3 {
            self.t_backoff = (self.t_backoff << 1).min(1 << 20);
        }
        if self.t_backoff > 8 {
            self.t_rttvar += self.t_srtt >> T_SRTT_BITS;
            self.t_srtt = 0;
        }
    }

    fn set_rtx_timer(&mut self, io: &mut FlowIo<'_>) {
        let d = io.now() + Nanos::from_secs_f64(self.rtt_timeout());
        self.rto.arm(io, d);
    }

    /// `reset_rtx_timer(mild, backoff)`.
    fn reset_rtx_timer(&mut self, io: &mut FlowIo<'_>, mild: bool, backoff: bool) {
        if backoff {
            self.rtt_backoff();
        }
        self.set_rtx_timer(io);
        if !mild {
            self.t_seqno = self.highest_ack + 1;
        }
        self.rtt_active = false;
    }

    /// `output(seqno)`.
    fn output(&mut self, io: &mut FlowIo<'_>, seqno: i64) {
        let is_retransmit = seqno < self.maxseq;
        let cwr = self.cong_action;
        self.cong_action = false;
        let len = if seqno == 0 && self.p.syn {
            SYN_BYTES
        } else {
            self.p.packet_size
        };
        let force_timer = self.highest_ack == self.maxseq;
        io.send_flagged(seqno as u32, len, is_retransmit, cwr);
        if seqno > self.maxseq {
            self.maxseq = seqno;
            if !self.rtt_active {
                self.rtt_active = true;
                if seqno > self.rtt_seq {
                    self.rtt_seq = seqno;
                    self.rtt_ts = io.now();
                }
            }
        }
        if !self.rto.is_armed() || force_timer {
            self.set_rtx_timer(io);
        }
    }

    /// `send_much(0, reason, maxburst)`.
    fn send_much(&mut self, io: &mut FlowIo<'_>, maxburst: u32) {
        let mut win = self.window();
        let mut n = 0;
        while self.t_seqno <= self.highest_ack + win {
            let s = self.t_seqno;
            self.output(io, s);
            self.t_seqno += 1;
            n += 1;
            win = self.window();
            if maxburst != 0 && n == maxburst {
                break;
            }
        }
    }

    /// `send_one()`: limited transmit on the first and second duplicate ACK.
    fn send_one(&mut self, io: &mut FlowIo<'_>) {
        let wnd = self.p.window_cap as i64;
        if self.t_seqno <= self.highest_ack + wnd
            && (self.t_seqno as f64) <= self.highest_ack as f64 + self.cwnd + self.dupacks as f64
        {
            let s = self.t_seqno;
            self.output(io, s);
            self.t_seqno += 1;
        }
    }

    /// Starts the flow (ns-2 `send_much` at the FTP start).
    pub(crate) fn start(&mut self, io: &mut FlowIo<'_>) {
        self.send_much(io, self.p.max_burst);
        self.last_cwnd = self.cwnd;
    }

    /// `ecn(seqno)`.
    fn on_ecn(&mut self, seqno: i64) {
        if seqno > self.recover || self.last_cwnd_action == CwndAction::Timeout {
            self.recover = self.maxseq;
            self.last_cwnd_action = CwndAction::Ecn;
            if self.cwnd <= 1.0 {
                if self.ecn_backoff {
                    self.rtt_backoff();
                } else {
                    self.ecn_backoff = true;
                }
            } else {
                self.ecn_backoff = false;
            }
            self.slowdown(true, Cut::Half);
        }
    }

    /// `newack()` and `recv_newack_helper()`'s window opening.
    fn newack(&mut self, io: &mut FlowIo<'_>, seqno: i64, ece: bool) {
        let now = io.now();
        self.dupacks = 0;
        self.last_ack = seqno;
        self.highest_ack = seqno;
        if self.t_seqno < seqno + 1 {
            self.t_seqno = seqno + 1;
        }
        if self.rtt_active && seqno >= self.rtt_seq {
            if !self.ecn() || !self.ecn_backoff || !ece {
                self.t_backoff = 1;
                self.ecn_backoff = false;
            }
            self.rtt_active = false;
            let tao = (now - self.rtt_ts).as_secs_f64();
            self.rtt_update(now, tao);
        }
        self.newtimer(io, seqno);
        if !self.ecn() || !ece {
            self.opencwnd();
        }
        if self.ecn() && !ece {
            self.ecn_backoff = false;
        }
    }

    /// `newtimer()` (with `timerfix_`): keep the timer while anything is outstanding.
    fn newtimer(&mut self, io: &mut FlowIo<'_>, seqno: i64) {
        if self.t_seqno > seqno || seqno < self.maxseq || self.cwnd < 1.0 {
            self.set_rtx_timer(io);
        } else {
            self.rto.cancel();
        }
    }

    /// `opencwnd()` with `wnd_option_ 1`, `increase_num_ 1`.
    fn opencwnd(&mut self) {
        if self.cwnd < self.ssthresh {
            self.cwnd += 1.0;
        } else {
            self.cwnd += 1.0 / self.cwnd;
        }
    }

    /// Handles an ACK; `ack` is the next sequence the receiver expects.
    pub(crate) fn on_ack(&mut self, io: &mut FlowIo<'_>, ack: u32, ece: bool) {
        let seqno = ack as i64 - 1;
        if ece && self.ecn() {
            self.on_ecn(seqno);
        }
        match self.p.variant {
            TcpVariant::NewReno => self.recv_newreno(io, seqno, ece),
            TcpVariant::Reno => self.recv_reno(io, seqno, ece),
            _ => self.recv_tahoe(io, seqno, ece),
        }
        self.last_cwnd = self.cwnd;
    }

    fn first_ack_growth(&mut self) {
        if self.p.syn && self.last_ack == 0 {
            self.cwnd = self.p.initial_window.max(1) as f64;
        }
    }

    /// `TcpAgent::recv` (Tahoe).
    fn recv_tahoe(&mut self, io: &mut FlowIo<'_>, seqno: i64, ece: bool) {
        if seqno > self.last_ack {
            self.newack(io, seqno, ece);
            self.first_ack_growth();
        } else if seqno == self.last_ack {
            self.dupacks += 1;
            if self.dupacks == NUMDUPACKS {
                self.tahoe_dupack_action(io);
            } else if self.dupacks < NUMDUPACKS && self.p.limited_transmit {
                self.send_one(io);
            }
        }
        if seqno >= self.last_ack {
            self.send_much(io, self.p.max_burst);
        }
    }

    /// `TcpAgent::dupack_action()`.
    fn tahoe_dupack_action(&mut self, io: &mut FlowIo<'_>) {
        let recovered = self.highest_ack > self.recover;
        if !(recovered || self.highest_ack == 0) {
            if self.ecn() && self.last_cwnd_action == CwndAction::Ecn {
                self.last_cwnd_action = CwndAction::Dupack;
                self.slowdown(false, Cut::One);
                self.reset_rtx_timer(io, false, false);
            }
            return;
        }
        self.recover = self.maxseq;
        self.last_cwnd_action = CwndAction::Dupack;
        self.slowdown(true, Cut::One);
        self.reset_rtx_timer(io, false, false);
    }

    /// `RenoTcpAgent::recv`.
    fn recv_reno(&mut self, io: &mut FlowIo<'_>, seqno: i64, ece: bool) {
        if seqno > self.last_ack {
            if self.last_cwnd_action == CwndAction::Dupack {
                self.last_cwnd_action = CwndAction::Exited;
            }
            self.dupwnd = 0;
            self.newack(io, seqno, ece);
            self.first_ack_growth();
        } else if seqno == self.last_ack {
            self.dupacks += 1;
            if self.dupacks == NUMDUPACKS {
                self.reno_dupack_action(io);
            } else if self.dupacks > NUMDUPACKS && self.last_cwnd_action == CwndAction::Dupack {
                self.dupwnd += 1;
            } else if self.dupacks < NUMDUPACKS && self.p.limited_transmit {
                self.send_one(io);
            }
        }
        if seqno >= self.last_ack && (self.dupacks == 0 || self.dupacks > NUMDUPACKS - 1) {
            self.send_much(io, self.p.max_burst);
        }
    }

    /// `RenoTcpAgent::dupack_action()` and NewReno's (identical with `bugFix_` true and
    /// `allow_fast_retransmit` false once recovery was exited).
    fn reno_dupack_action(&mut self, io: &mut FlowIo<'_>) {
        let recovered = self.highest_ack > self.recover;
        let allow =
            self.p.variant == TcpVariant::Reno && self.last_cwnd_action == CwndAction::Dupack;
        if !(recovered || allow || self.highest_ack == 0) {
            if self.ecn() && self.last_cwnd_action == CwndAction::Ecn {
                self.last_cwnd_action = CwndAction::Dupack;
                self.reset_rtx_timer(io, true, false);
                let s = self.last_ack + 1;
                self.output(io, s);
                self.dupwnd = NUMDUPACKS;
            }
            return;
        }
        self.recover = self.maxseq;
        self.last_cwnd_action = CwndAction::Dupack;
        if self.p.variant == TcpVariant::NewReno {
            self.reset_rtx_timer(io, true, false);
            self.slowdown(true, Cut::Half);
        } else {
            self.slowdown(true, Cut::Half);
            self.reset_rtx_timer(io, true, false);
        }
        let s = self.last_ack + 1;
        self.output(io, s);
        self.dupwnd = NUMDUPACKS;
    }

    /// `NewRenoTcpAgent::recv` (`newreno_changes_ 0`, `newreno_changes1_ 1`,
    /// `partial_window_deflation_ 1`, `exit_recovery_fix_ 0`).
    fn recv_newreno(&mut self, io: &mut FlowIo<'_>, seqno: i64, ece: bool) {
        if seqno > self.last_ack {
            if seqno >= self.recover || self.last_cwnd_action != CwndAction::Dupack {
                if self.dupwnd > 0 {
                    self.dupwnd = 0;
                    if self.last_cwnd_action == CwndAction::Dupack {
                        self.last_cwnd_action = CwndAction::Exited;
                    }
                }
                self.first_partial = false;
                self.newack(io, seqno, ece);
                self.first_ack_growth();
            } else {
                self.partial_ack(io, seqno);
            }
        } else if seqno == self.last_ack {
            self.dupacks += 1;
            if self.dupacks == NUMDUPACKS {
                self.reno_dupack_action(io);
            } else if self.dupacks > NUMDUPACKS && self.last_cwnd_action == CwndAction::Dupack {
                self.dupwnd += 1;
            } else if self.dupacks < NUMDUPACKS && self.p.limited_transmit {
                self.send_one(io);
            }
        }
        if seqno >= self.last_ack {
            if self.dupacks == 0 {
                self.send_much(io, self.p.max_burst);
            } else if self.dupacks > NUMDUPACKS - 1 {
                self.send_much(io, 2);
            }
        }
    }

    /// `partialnewack_helper()`: deflate, move `highest_ack_`, retransmit the next hole.
    fn partial_ack(&mut self, io: &mut FlowIo<'_>, seqno: i64) {
        if !self.first_partial {
            self.first_partial = true;
            self.newtimer(io, seqno);
        }
        let deflate = (seqno - self.last_ack) as u32;
        if self.dupwnd > deflate {
            self.dupwnd -= deflate - 1;
        } else {
            self.cwnd -= (deflate - self.dupwnd) as f64;
            self.dupwnd = 1;
        }
        if self.cwnd < 1.0 {
            self.cwnd = 1.0;
        }
        self.last_ack = seqno;
        self.highest_ack = seqno;
        if self.t_seqno < seqno + 1 {
            self.t_seqno = seqno + 1;
        }
        if self.rtt_active && seqno >= self.rtt_seq {
            self.rtt_active = false;
            self.t_backoff = 1;
        }
        let s = self.last_ack + 1;
        self.output(io, s);
    }

    pub(crate) fn on_timer(&mut self, io: &mut FlowIo<'_>, kind: TimerKind) {
        let now = io.now();
        match kind {
            TimerKind::Rto => {
                if self.rto.fired(io, now) {
                    self.timeout(io);
                }
            }
            TimerKind::Start => self.start(io),
            TimerKind::Send | TimerKind::DelAck => {}
        }
    }

    /// `RenoTcpAgent::timeout` / `TcpAgent::timeout` for the retransmission timer.
    fn timeout(&mut self, io: &mut FlowIo<'_>) {
        if self.reno_like() {
            self.dupwnd = 0;
            self.dupacks = 0;
        }
        self.recover = self.maxseq;
        if self.cwnd < 1.0 {
            self.cwnd = 1.0;
        }
        let nothing_outstanding = self.highest_ack == self.maxseq;
        // Nothing outstanding (`restart_bugfix_`), or still recovering from an ECN cut: the
        // window restarts at one packet without a second ssthresh cut.
        let ecn_recovery =
            self.highest_ack < self.recover && self.last_cwnd_action == CwndAction::Ecn;
        if nothing_outstanding || ecn_recovery {
            self.slowdown(false, Cut::One);
        } else {
            io.counters.timeouts += 1;
            self.last_cwnd_action = CwndAction::Timeout;
            self.slowdown(true, Cut::One);
        }
        self.reset_rtx_timer(io, false, !nothing_outstanding);
        self.last_cwnd_action = CwndAction::Timeout;
        self.send_much(io, self.p.max_burst);
        self.last_cwnd = self.cwnd;
    }
}

/// How `slowdown` sets `cwnd_`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cut {
    /// `CLOSE_CWND_HALF`.
    Half,
    /// `CLOSE_CWND_ONE` / `CLOSE_CWND_RESTART` (`wnd_restart_ 1`).
    One,
}
