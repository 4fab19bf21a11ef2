//! Configuration of the Zombie List: `ZombieParams` (serde, from config) ->
//! `ZombieConfig` (validated, constants derived).

use serde::{Deserialize, Serialize};

/// The largest Zombie List this crate builds: the occurrence table then has at most
/// 3 x 2^22 entries, whose index (plus one) fits the 24-bit field of a zombie slot word.
pub const MAX_M: usize = 1 << 22;

/// How [`crate::ZombieList`] computes F (occurrence of a flow) and T (total occurrence).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OccurrenceMode {
    /// The occurrence lookup table of the ZL-RED paper §5.2.3: O(1) per packet.
    #[default]
    Table,
    /// Scan all M zombies for every packet: O(M), kept for comparison (the paper's rejected
    /// baseline) and for benchmarks.
    Scan,
}

/// Zombie List parameters in the paper's terms (docs/algorithms/zombie-list.md).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ZombieParams {
    /// M, the number of zombies (paper: 1000; §4 uses 10, 100, 1000, 10000).
    pub m: usize,
    /// Probability that a miss overwrites the drawn zombie (paper: 0.25).
    pub p_swap: f64,
    /// Weight of the hit-frequency EWMA. decided: `None` means `1/M` (the SRED paper's own
    /// simulations; its eq. 3.3 offers `p_swap/M`).
    pub alpha: Option<f64>,
    /// Table (O(1)) or Scan (O(M)) computation of F and T.
    pub occurrence: OccurrenceMode,
}

impl Default for ZombieParams {
    fn default() -> Self {
        ZombieParams {
            m: 1000,
            p_swap: 0.25,
            alpha: None,
            occurrence: OccurrenceMode::Table,
        }
    }
}

/// A parameter outside its allowed range; the message names the key and the range.
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
pub enum ZombieConfigError {
    #[error("zombie.m = {0}: must be in 1..={max}", max = MAX_M)]
    /// M outside `1..=MAX_M`.
    M(usize),
    #[error("zombie.p_swap = {0}: must be a number in [0, 1]")]
    /// `p_swap` outside `[0, 1]` (or NaN).
    PSwap(f64),
    #[error("zombie.alpha = {0}: must be a number in (0, 1]")]
    /// `alpha` outside `(0, 1]` (or NaN).
    Alpha(f64),
}

impl ZombieConfigError {
    /// The parameter's key within the list's table: `"m"`, `"p_swap"` or `"alpha"`.
    pub fn param(&self) -> &'static str {
        match self {
            ZombieConfigError::M(_) => "m",
            ZombieConfigError::PSwap(_) => "p_swap",
            ZombieConfigError::Alpha(_) => "alpha",
        }
    }

    /// The offending value, formatted.
    pub fn value(&self) -> String {
        match self {
            ZombieConfigError::M(m) => m.to_string(),
            ZombieConfigError::PSwap(v) | ZombieConfigError::Alpha(v) => v.to_string(),
        }
    }

    /// The allowed range, in words (`"1 <= m <= 1048576"`).
    pub fn expected(&self) -> String {
        match self {
            ZombieConfigError::M(_) => format!("1 <= m <= {MAX_M}"),
            ZombieConfigError::PSwap(_) => "0 <= p_swap <= 1".into(),
            ZombieConfigError::Alpha(_) => "0 < alpha <= 1".into(),
        }
    }
}

/// Validated Zombie List configuration.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ZombieConfig {
    m: usize,
    p_swap: f64,
    alpha: f64,
    /// `1 - alpha`, the EWMA's weight of P(t-1) (`crate::draw::ewma_step`).
    keep: f64,
    occurrence: OccurrenceMode,
    count_cap: u64,
    /// `ceil(p_swap 2^53)`: the swap draw in integers (`crate::draw::swap`).
    swap_below: u64,
}

/// Bits of a zombie's hit count in a slot word (see `list.rs`).
pub(crate) const ZOMBIE_COUNT_BITS: u32 = 24;

impl ZombieParams {
    /// Checks every parameter and derives the constants the list needs.
    pub fn validate(&self) -> Result<ZombieConfig, ZombieConfigError> {
        if self.m == 0 || self.m > MAX_M {
            return Err(ZombieConfigError::M(self.m));
        }
        if !(0.0..=1.0).contains(&self.p_swap) {
            return Err(ZombieConfigError::PSwap(self.p_swap));
        }
        let alpha = match self.alpha {
            None => 1.0 / self.m as f64,
            Some(a) if a > 0.0 && a <= 1.0 => a,
            Some(a) => return Err(ZombieConfigError::Alpha(a)),
        };
        // decided: a zombie's count saturates at 2^24 - 1 (its field in the slot word; also
        // keeps F <= M * 2^24 far below the table's 48-bit counts). Reaching it takes one flow
        // hitting one zombie 16.7 M times, i.e. about M * 16.7 M packets of that flow
        // (28 minutes of a single 10 Mpps flow at M = 1000); the zombie then stays a hit.
        let count_cap = ((1u64 << 47) / self.m as u64 - 1).min((1 << ZOMBIE_COUNT_BITS) - 1);
        Ok(ZombieConfig {
            m: self.m,
            p_swap: self.p_swap,
            alpha,
            keep: 1.0 - alpha,
            occurrence: self.occurrence,
            count_cap,
            // Exact: scaling by a power of two, and p_swap <= 1 keeps it at most 2^53.
            swap_below: (self.p_swap * (1u64 << 53) as f64).ceil() as u64,
        })
    }
}

impl ZombieConfig {
    /// M, the number of zombies.
    pub fn m(&self) -> usize {
        self.m
    }
    /// The overwrite probability on a miss.
    pub fn p_swap(&self) -> f64 {
        self.p_swap
    }
    /// The EWMA weight of P(t), resolved (`1/M` unless configured).
    pub fn alpha(&self) -> f64 {
        self.alpha
    }
    /// How F and T are computed.
    pub fn occurrence(&self) -> OccurrenceMode {
        self.occurrence
    }
    /// The largest count a zombie reaches; further hits leave it there (decided, see
    /// [`ZombieParams::validate`]).
    pub fn count_cap(&self) -> u64 {
        self.count_cap
    }
    /// `ceil(p_swap 2^53)`, for the swap draw in integers.
    pub(crate) fn swap_below(&self) -> u64 {
        self.swap_below
    }
    /// `1 - alpha`, for the EWMA step of P(t).
    pub(crate) fn keep(&self) -> f64 {
        self.keep
    }
}
