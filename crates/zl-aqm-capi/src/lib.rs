//! A C ABI for zlrouter's AQM policies and the shared lock-free Zombie List, so that a data
//! plane written in C (a DPDK application, a VPP plugin, a kernel-bypass appliance) can put
//! ZL-RED, SRED, RED or any other `zl_aqm` policy in front of its own egress queues.
//!
//! Contract, per egress queue: create a policy ([`zl_aqm_new_red`], [`zl_aqm_new_sred`],
//! [`zl_aqm_new_zlred`], or any kind from a TOML table with [`zl_aqm_new_from_toml`]), optionally
//! on a Zombie List shared by several queues and threads ([`zl_zombie_list_new`]); for each
//! arriving packet call [`zl_aqm_arrive`] with a [`ZlArrival`] (flow hash, queue length, packet
//! length, time) and the caller's random state, and act on the returned [`ZlVerdict`]; read
//! [`zl_aqm_stats`] and the flow estimate `1/P(t)` ([`zl_aqm_flow_estimate`]) whenever; free
//! with [`zl_aqm_free`] / [`zl_zombie_list_free`]. The header is `include/zl_aqm.h`, generated
//! by cbindgen from this crate (`cbindgen.toml`) and checked in; CI regenerates and compares it.
//!
//! - Time and randomness are the caller's: `now_ns` is any monotonic nanosecond clock, and the
//!   random source is a `uint64_t` SplitMix64 state that the call advances ([`zl_rng_next`]
//!   is the same generator, for the caller's own draws). Same inputs and seed, same verdicts:
//!   the C example (`examples/c/zlred_trace.c`) prints exactly what the Rust example
//!   (`cargo run -p zl-aqm --example foreign_loop`) prints.
//! - No allocation per call: only the constructors allocate (checked by `tests/no_alloc.rs`).
//! - Misuse is an error code, never undefined behaviour: a null pointer or an out-of-range
//!   field or parameter returns [`ZlStatus`] (or [`ZlVerdict::ZL_VERDICT_INVALID_ARGUMENT`]
//!   from the per-packet call), and [`zl_last_error`] says which parameter and why (tested from
//!   C by `tests/c/misuse.c`). What cannot be checked stays the caller's: a pointer that is
//!   not null must point to a live object of the named type (not freed, not another type).
//! - Thread safety is stated on every function. In short: a `zl_zombie_list` is shared by any
//!   number of threads; a `zl_aqm` belongs to one thread at a time (it may move between
//!   threads, it may not be used by two at once).
//!
//! The calls into `zl_aqm` live in one module (`policy.rs`); the rest is the C surface.
//!
//! # Example
//!
//! The calls a C program makes (`examples/c/zlred_trace.c` is a complete one), here from Rust:
//!
//! ```
//! use zl_aqm_capi::*;
//!
//! let queue = ZlQueueParams {
//!     capacity_packets: 1000,
//!     capacity_bytes: ZL_UNBOUNDED_BYTES,
//!     link_rate_bps: 10_000_000_000,
//! };
//! let mut aqm = std::ptr::null_mut();
//! let mut rng = 1u64; // SplitMix64 state
//! // SAFETY: every pointer is a live local or the handle just created.
//! unsafe {
//!     let params = zl_zlred_params_default();
//!     assert_eq!(zl_aqm_new_zlred(&params, &queue, std::ptr::null(), &mut aqm), ZlStatus::ZL_OK);
//!     let mut a = zl_arrival_default();
//!     a.flow_hash = 0xfeed;
//!     a.packet_len = 1500;
//!     a.queue_packets = 3; // below th_min = 5: admitted
//!     assert_eq!(zl_aqm_arrive(aqm, &a, &mut rng), ZlVerdict::ZL_VERDICT_ENQUEUE);
//!     a.ecn = 7; // not an ECN codepoint: an error, not undefined behaviour
//!     assert_eq!(zl_aqm_arrive(aqm, &a, &mut rng), ZlVerdict::ZL_VERDICT_INVALID_ARGUMENT);
//!     let mut stats = ZlAqmStats::default();
//!     assert_eq!(zl_aqm_stats(aqm, &mut stats), ZlStatus::ZL_OK);
//!     assert_eq!(stats.enqueued, 1);
//!     zl_aqm_free(aqm);
//! }
//! ```

#![warn(missing_docs)]

mod error;
mod ffi;
mod params;
mod policy;
mod rng;
mod types;

pub use error::zl_last_error;
pub use ffi::*;
pub use rng::{zl_rng_next, SplitMix64};
pub use types::*;
