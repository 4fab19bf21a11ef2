//! The parameters of ZL-RED's flow isolation in config units. ZL-RED's own parameters hold
//! them (`ZlRedParams::isolation`: a class isolates when they are set), and the isolation
//! discipline above ZL-RED (`crate::isolation`) checks them against the ZL-RED it runs and
//! builds from them.

use serde::{Deserialize, Serialize};

use crate::queues::IsolateBy;

/// Isolation parameters (`aqm = { kind = "zl-red", ..., isolation = { ... } }`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct IsolationParams {
    /// What is isolated: `flow` (the Zombie List's flow key), `srchost` or `dsthost` (the
    /// port's list then counts hosts). Default `flow`.
    pub by: IsolateBy,
    /// K, the most flows in the penalty box at once, `1 ..= 4096` and at most the list's M.
    /// Default 64.
    pub max_flows: u32,
    /// The measurement window, ms, `> 0`. Default 100.
    pub window_ms: f64,
    /// A watched flow is penalized when its arrival rate is at least `enter` fair shares,
    /// `> 1`. Default 2.
    pub enter: f64,
    /// A penalized flow counts a calm window below `leave` fair shares, `0 < leave < enter`.
    /// Default 1.25.
    pub leave: f64,
    /// Calm windows in a row before a penalized flow is released, `>= 1`. Default 3.
    pub hold: u32,
    /// The margin on eq. (4) for entering the box: `F > flag T P(t)`, `>= 1`. Default 1.25.
    pub flag: f64,
    /// Windows in a row at or above `enter` fair shares before a watched flow is penalized,
    /// `>= 1`. Default 5.
    pub confirm: u32,
    /// The penalty queue's buffer, as a fraction of the class's, `0 < penalty_share <= 1`.
    /// Default 0.25.
    pub penalty_share: f64,
    /// CoDel's target on the normal queue's sojourn, ms (RFC 8289's control law at its
    /// departures, marking instead of dropping where ZL-RED's `ecn` is on); 0 turns it off.
    /// Default 5.
    pub normal_target_ms: f64,
    /// CoDel's interval on the normal queue, ms, `> normal_target_ms`. Default 100.
    pub normal_interval_ms: f64,
}

impl Default for IsolationParams {
    fn default() -> Self {
        IsolationParams {
            by: IsolateBy::Flow,
            max_flows: 64,
            window_ms: 100.0,
            enter: 2.0,
            leave: 1.25,
            hold: 3,
            flag: 1.25,
            confirm: 5,
            penalty_share: 0.25,
            normal_target_ms: 5.0,
            normal_interval_ms: 100.0,
        }
    }
}
