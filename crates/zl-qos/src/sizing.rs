//! Buffer sizing rules (docs/algorithms/buffer-sizing.md): a class queue's capacity by rule.
//!
//! - `fixed`: a packet count and optionally a byte count, as written;
//! - `bdp`: `B = C * RTT` bytes (the "normal" rule; 10 Gbit/s × 250 ms = 2.5 Gbit);
//! - `sqrt-n`: `B = C * RTT / sqrt(N)` bytes (Appenzeller, Keslassy, McKeown 2004);
//! - `tiny`: a few tens of packets, for paced senders (Enachescu et al. 2005);
//! - `sqrt-n-live`: `sqrt-n` with N taken from the Zombie List's estimate of the number of
//!   active flows, `1/P(t)` (SRED's eq. 3.4, docs/algorithms/zombie-list.md), re-evaluated
//!   every `period_ms` and clamped to `[floor_bytes, ceiling_bytes]`.
//!
//! decided (docs/algorithms/buffer-sizing.md, going beyond the paper): the live rule takes N =
//! 1/P(t) from the Zombie List. Decided here: while P(t) = 0 (no hit yet, 1/P = +inf) or the
//! estimate is not a finite number, the last capacity is kept; an estimate below 1 counts as one
//! flow. 1/P(t) underestimates the flow count (the ZL-RED paper's figure 2,
//! docs/algorithms/zombie-list.md), so the rule errs towards larger buffers, which the buffer
//! sizing paper finds safer once paced senders spread.
//!
//! Units: `C` in bits/s, `RTT` in ms; byte rules bound bytes and leave the packet bound at the
//! queue's `max_packets`; packet rules bound packets and leave bytes unbounded.

use serde::{Deserialize, Serialize};
use zl_core::Nanos;

use crate::error::QosConfigError;
use crate::queue::Capacity;

/// How a queue's capacity is set.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "rule", rename_all = "kebab-case", deny_unknown_fields)]
pub enum BufferRule {
    /// As written.
    Fixed {
        /// Packets.
        packets: u32,
        /// Bytes; none: unbounded in bytes.
        #[serde(default)]
        bytes: Option<u64>,
    },
    /// `C * RTT` bytes.
    Bdp {
        /// `C`, bit/s.
        rate_bps: u64,
        /// `RTT`, ms.
        rtt_ms: f64,
    },
    /// `C * RTT / sqrt(N)` bytes.
    SqrtN {
        /// `C`, bit/s.
        rate_bps: u64,
        /// `RTT`, ms.
        rtt_ms: f64,
        /// `N`, the number of long-lived flows.
        n: u32,
    },
    /// A few tens of packets, for paced senders.
    Tiny {
        /// Packets.
        packets: u32,
    },
    /// `C * RTT / sqrt(N)` with `N = 1/P(t)` from the Zombie List, re-evaluated every
    /// `period_ms`.
    SqrtNLive {
        /// `C`, bit/s.
        rate_bps: u64,
        /// `RTT`, ms.
        rtt_ms: f64,
        /// The smallest capacity, bytes.
        floor_bytes: u64,
        /// The largest capacity, bytes.
        ceiling_bytes: u64,
        /// How often N is read again, ms.
        period_ms: f64,
    },
}

/// `C * RTT` in bytes.
pub fn bdp_bytes(rate_bps: u64, rtt_ms: f64) -> f64 {
    rate_bps as f64 * rtt_ms * 1e-3 / 8.0
}

/// `C * RTT / sqrt(N)` in bytes (N below 1 counts as 1).
pub fn sqrt_n_bytes(rate_bps: u64, rtt_ms: f64, n: f64) -> f64 {
    bdp_bytes(rate_bps, rtt_ms) / n.max(1.0).sqrt()
}

fn positive(key: &str, v: f64) -> Result<f64, QosConfigError> {
    if v.is_finite() && v > 0.0 {
        Ok(v)
    } else {
        Err(QosConfigError::new(
            key,
            format!("{v} must be a finite number > 0"),
        ))
    }
}

/// A packet limit of a `fixed` or `tiny` rule: at least one packet and at most the ring's
/// `max_packets` (a larger limit could never be reached; the AQM policies would also read it
/// as their `B`).
fn packet_limit(packets: u32, max_packets: u32) -> Result<u32, QosConfigError> {
    if packets == 0 || packets > max_packets {
        Err(QosConfigError::new(
            "packets",
            format!(
                "{packets} is outside 1 ..= {max_packets} (the class's `max_packets`, the most \
                 its ring holds: raise `max_packets` to allow more)"
            ),
        ))
    } else {
        Ok(packets)
    }
}

fn nonzero<T: PartialEq + Default + core::fmt::Display>(
    key: &str,
    v: T,
) -> Result<T, QosConfigError> {
    if v == T::default() {
        Err(QosConfigError::new(key, "must be > 0"))
    } else {
        Ok(v)
    }
}

impl BufferRule {
    /// The initial capacity for a queue whose ring holds `max_packets`, and the live sizer
    /// when the rule is `sqrt-n-live` (which starts at its ceiling until the first estimate).
    pub fn build(&self, max_packets: u32) -> Result<(Capacity, Option<LiveSqrtN>), QosConfigError> {
        let bytes = |b: f64| Capacity {
            packets: max_packets,
            bytes: b.round().max(1.0) as u64,
        };
        Ok(match *self {
            BufferRule::Fixed { packets, bytes } => {
                packet_limit(packets, max_packets)?;
                if let Some(b) = bytes {
                    nonzero("bytes", b)?;
                }
                let cap = Capacity {
                    packets,
                    bytes: bytes.unwrap_or(u64::MAX),
                };
                (cap, None)
            }
            BufferRule::Bdp { rate_bps, rtt_ms } => {
                nonzero("rate_bps", rate_bps)?;
                (
                    bytes(bdp_bytes(rate_bps, positive("rtt_ms", rtt_ms)?)),
                    None,
                )
            }
            BufferRule::SqrtN {
                rate_bps,
                rtt_ms,
                n,
            } => {
                nonzero("rate_bps", rate_bps)?;
                nonzero("n", n)?;
                let b = sqrt_n_bytes(rate_bps, positive("rtt_ms", rtt_ms)?, n as f64);
                (bytes(b), None)
            }
            BufferRule::Tiny { packets } => (
                Capacity {
                    packets: packet_limit(packets, max_packets)?,
                    bytes: u64::MAX,
                },
                None,
            ),
            BufferRule::SqrtNLive {
                rate_bps,
                rtt_ms,
                floor_bytes,
                ceiling_bytes,
                period_ms,
            } => {
                nonzero("rate_bps", rate_bps)?;
                nonzero("floor_bytes", floor_bytes)?;
                if ceiling_bytes < floor_bytes {
                    return Err(QosConfigError::new(
                        "ceiling_bytes",
                        format!(
                            "ceiling_bytes ({ceiling_bytes}) must be >= floor_bytes ({floor_bytes})"
                        ),
                    ));
                }
                let live = LiveSqrtN {
                    bdp_bytes: bdp_bytes(rate_bps, positive("rtt_ms", rtt_ms)?),
                    floor_bytes,
                    ceiling_bytes,
                    period: Nanos::from_secs_f64(positive("period_ms", period_ms)? * 1e-3),
                    next_eval: Nanos::ZERO,
                    capacity_bytes: ceiling_bytes,
                    p_sum: 0.0,
                    p_count: 0,
                };
                (bytes(ceiling_bytes as f64), Some(live))
            }
        })
    }
}

/// The live `sqrt-n` sizer.
#[derive(Clone, Debug, PartialEq)]
pub struct LiveSqrtN {
    bdp_bytes: f64,
    floor_bytes: u64,
    ceiling_bytes: u64,
    period: Nanos,
    next_eval: Nanos,
    capacity_bytes: u64,
    /// Sum and count of the P = 1/estimate values offered since the last evaluation.
    p_sum: f64,
    p_count: u64,
}

impl LiveSqrtN {
    /// The current byte capacity.
    pub fn capacity_bytes(&self) -> u64 {
        self.capacity_bytes
    }

    /// Offers the current flow estimate (1/P(t)); at most once per period it re-evaluates
    /// and returns the new byte capacity. Cheap to call per packet.
    ///
    /// decided: the evaluation uses `N = 1 / mean(P)` over every estimate offered since the
    /// previous one (this one included), not the last estimate alone: P(t) is an EWMA with
    /// weight 1/M and swings widely at large N, and averaging P (not 1/P, which a single
    /// small P would dominate) over the period makes `period_ms` a smoothing window.
    #[inline]
    pub fn offer(&mut self, now: Nanos, estimated_flows: f64) -> Option<u64> {
        if estimated_flows.is_finite() {
            self.p_sum += 1.0 / estimated_flows.max(1.0);
            self.p_count += 1;
        }
        if now < self.next_eval {
            return None;
        }
        self.next_eval = Nanos(now.0.saturating_add(self.period.0));
        if self.p_count == 0 || self.p_sum <= 0.0 {
            return None;
        }
        let n = self.p_count as f64 / self.p_sum;
        self.p_sum = 0.0;
        self.p_count = 0;
        let b = (self.bdp_bytes / n.sqrt()).round() as u64;
        self.capacity_bytes = b.clamp(self.floor_bytes, self.ceiling_bytes);
        Some(self.capacity_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paper_examples() {
        // docs/algorithms/buffer-sizing.md: 10 Gbit/s × 250 ms = 2.5 Gbit; with 10 000 flows, 1/100
        // of it.
        assert_eq!(bdp_bytes(10_000_000_000, 250.0), 2.5e9 / 8.0);
        assert_eq!(
            sqrt_n_bytes(10_000_000_000, 250.0, 10_000.0),
            2.5e9 / 8.0 / 100.0
        );
    }

    #[test]
    fn packet_limits_stay_within_the_ring() {
        // `packets = 4294967295` must not reach the AQM as `B` and be reported as
        // `aqm.capacity_packets`; it is the rule's own `packets` that is wrong.
        for rule in [
            BufferRule::Fixed {
                packets: u32::MAX,
                bytes: None,
            },
            BufferRule::Tiny { packets: 1001 },
            BufferRule::Tiny { packets: 0 },
        ] {
            let e = rule.build(1000).unwrap_err();
            assert_eq!(e.key, "packets", "{rule:?}");
            assert!(e.reason.contains("1 ..= 1000"), "{}", e.reason);
        }
        let fixed = BufferRule::Fixed {
            packets: 1000,
            bytes: None,
        };
        assert_eq!(fixed.build(1000).unwrap().0.packets, 1000);
    }

    #[test]
    fn live_keeps_last_value_without_an_estimate() {
        let rule = BufferRule::SqrtNLive {
            rate_bps: 8_000_000,
            rtt_ms: 100.0,
            floor_bytes: 10_000,
            ceiling_bytes: 100_000,
            period_ms: 10.0,
        };
        let (cap, live) = rule.build(1000).unwrap();
        let mut live = live.unwrap();
        assert_eq!(cap.bytes, 100_000);
        assert_eq!(live.offer(Nanos::ZERO, f64::INFINITY), None);
        assert_eq!(live.offer(Nanos::from_millis(10), 4.0), Some(50_000));
        assert_eq!(
            live.offer(Nanos::from_millis(15), 100.0),
            None,
            "within the period"
        );
        assert_eq!(
            live.offer(Nanos::from_millis(20), 1e6),
            Some(10_000),
            "floor"
        );
    }
}
