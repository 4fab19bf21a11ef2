//! The 1-D discrete model of TCP/nonlinear-RED (Kousaka), eq. (3)-(5):
//! docs/algorithms/nonlinear-red.md.
//!
//! ```text
//! q(k+1) = (1 - w_q) q(k) + w_q * max(R N / sqrt(p(k)) - C d / M, 0)   if p(k) != 0
//! q(k+1) = (1 - w_q) q(k) + w_q * (rwnd - C d / M)                      if p(k) == 0   (3)
//! p(k)   = eq. (2) at avg = q(k)                                                      (4)
//! ```
//!
//! `R = sqrt(3/2)` (Mathis), `N` TCP connections, `C` bottleneck rate (bit/s), `d` its
//! round-trip propagation delay (s), `M` packet size (bits), `rwnd` receiver window (packets);
//! `q` in packets.
//!
//! The fixed point `q*` solves `q = g(q)` with `g` the target of (3); between `q_min` and
//! `q_max`, `q - g(q)` rises from `-inf` and the root is bracketed and bisected. Eq. (5)
//! gives `dq*/dgamma` in closed form (implicit differentiation of `q + C d/M = R N p(q)^-1/2`):
//!
//! ```text
//! dq*/dgamma = -(q* - q_max) / ( gamma + (q_max - q_min)/(q* - q_min)
//!     + (2/(N R)) sqrt(p_max (q* - q_min)(q_max - q_min) exp(gamma (q* - q_max)/(q_max - q_min))) )
//! ```

use crate::nonlinear_red::exponential_probability;

/// The Mathis constant `R = sqrt(3/2)`.
pub const MATHIS_R: f64 = 1.224_744_871_391_589;

/// Model parameters (the paper's tables 1-2, docs/algorithms/nonlinear-red.md).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NonlinearRedModel {
    /// EWMA weight of the average queue.
    pub w_q: f64,
    /// `p` at `x = 1`.
    pub p_max: f64,
    /// Lower threshold, packets.
    pub q_min: f64,
    /// Upper threshold, packets.
    pub q_max: f64,
    /// Nonlinearity of eq. (2).
    pub gamma: f64,
    /// Number of TCP connections.
    pub n: f64,
    /// Bottleneck rate, bit/s.
    pub c_bps: f64,
    /// Bottleneck round-trip propagation delay, s.
    pub d_secs: f64,
    /// Packet size, bits.
    pub m_bits: f64,
    /// Receiver window, packets.
    pub rwnd: f64,
}

impl NonlinearRedModel {
    /// The paper's setting: `w_q = 8.31e-5`, `p_max = 0.02`, `q_min/q_max = 30/90`,
    /// `C = 100 Mb/s`, `d = 2 ms`, `M = 8320` bits, `rwnd = 10 000`.
    pub fn paper(n: f64, gamma: f64) -> Self {
        NonlinearRedModel {
            w_q: 8.31e-5,
            p_max: 0.02,
            q_min: 30.0,
            q_max: 90.0,
            gamma,
            n,
            c_bps: 100e6,
            d_secs: 0.002,
            m_bits: 8320.0,
            rwnd: 10_000.0,
        }
    }

    /// Eq. (4): `p(k)` at `q(k)`.
    pub fn probability(&self, q: f64) -> f64 {
        exponential_probability(q, self.q_min, self.q_max, self.p_max, self.gamma)
    }

    /// Packets in flight on the bottleneck pipe, `C d / M`.
    pub fn pipe(&self) -> f64 {
        self.c_bps * self.d_secs / self.m_bits
    }

    /// The target `g(q)` that (3) averages toward.
    pub fn target(&self, q: f64) -> f64 {
        let p = self.probability(q);
        if p == 0.0 {
            self.rwnd - self.pipe()
        } else {
            (MATHIS_R * self.n / p.sqrt() - self.pipe()).max(0.0)
        }
    }

    /// One step of map (3).
    pub fn step(&self, q: f64) -> f64 {
        (1.0 - self.w_q) * q + self.w_q * self.target(q)
    }

    /// `q(k)` after `k` steps from `q0`.
    pub fn iterate(&self, q0: f64, k: usize) -> f64 {
        (0..k).fold(q0, |q, _| self.step(q))
    }

    /// The fixed point `q*` in `(q_min, q_max)`, by bisection of `q - g(q)` to `1e-12`
    /// relative; `None` when no root lies in that interval (the pipe alone exceeds the window,
    /// or `g(q_max) >= q_max`, where the model keeps dropping at `p = 1`).
    pub fn fixed_point(&self) -> Option<f64> {
        let h = |q: f64| q - self.target(q);
        let mut lo = self.q_min;
        let mut hi = self.q_max;
        // At q_min, p = 0 and g is rwnd - pipe; just above it p is tiny and g is huge.
        let lo_probe = lo + (hi - lo) * 1e-12;
        if h(lo_probe) >= 0.0 || h(hi - (hi - lo) * 1e-12) <= 0.0 {
            return None;
        }
        lo = lo_probe;
        for _ in 0..200 {
            let mid = 0.5 * (lo + hi);
            if h(mid) < 0.0 {
                lo = mid;
            } else {
                hi = mid;
            }
            if hi - lo <= 1e-12 * hi {
                break;
            }
        }
        Some(0.5 * (lo + hi))
    }

    /// Eq. (5): `dq*/dgamma` at the fixed point `q_star`.
    pub fn dq_dgamma(&self, q_star: f64) -> f64 {
        let range = self.q_max - self.q_min;
        let u = q_star - self.q_min;
        let root =
            (self.p_max * u * range * (self.gamma * (q_star - self.q_max) / range).exp()).sqrt();
        -(q_star - self.q_max) / (self.gamma + range / u + 2.0 / (self.n * MATHIS_R) * root)
    }
}
