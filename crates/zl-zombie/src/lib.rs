//! The Zombie List of SRED / ZL-RED (spec/01 §2 and §4).
//!
//! API contract (implementation in progress; see the zombie helper's work):
//!
//! ```ignore
//! pub struct ZombieParams { pub m: usize, pub p_swap: f64, pub alpha: Option<f64>, pub occurrence: OccurrenceMode }
//! pub enum OccurrenceMode { Table, Scan }
//! impl ZombieParams { pub fn validate(&self) -> Result<ZombieConfig, ZombieConfigError>; }
//! pub struct Observation { pub hit: bool, pub p: f64, pub occurrence: u64, pub total: u64 }
//! pub struct ZombieList;   // Sync + Send, lock-free
//! impl ZombieList {
//!     pub fn new(cfg: ZombieConfig) -> Self;
//!     pub fn observe<R: rand::RngCore + ?Sized>(&self, flow: FlowId, now: Nanos, rng: &mut R) -> Observation;
//!     pub fn hit_frequency(&self) -> f64;      // P(t)
//!     pub fn estimated_flows(&self) -> f64;    // 1/P(t), +inf while P = 0
//!     pub fn total_occurrence(&self) -> u64;   // T
//!     pub fn occurrence(&self, flow: FlowId) -> u64; // F(flow)
//! }
//! ```
