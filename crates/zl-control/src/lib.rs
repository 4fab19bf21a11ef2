//! zlrouter's control plane: what an operator reads and does while the data plane forwards,
//! off the packet path.
//!
//! Where it sits: above `zl-dataplane`, whose engines it only reads through
//! [`zl_dataplane::RouterView`] (at a low rate, from the driver's progress observer) and whose
//! reload it only posts to ([`zl_dataplane::reload::Reloader`]); below the `zlrouter` binary.
//! The tokio runtime and the Prometheus encoder live here, so the packet path's crate links
//! neither.
//!
//! Decided: reload planning (`zl_dataplane::reload`) and the drop capture's writer thread
//! (`zl_dataplane::capture`) stay in the data plane's crate. Both build or drain state private
//! to the stages (a port's new egress, the capture's ring), and neither needs an async
//! runtime or a metrics library; this crate only asks for a reload and reports its outcome.
//!
//! # Layers
//!
//! Each module uses only those above it in this list (`scripts/module-cycles` checks it):
//!
//! 1. [`snapshot`]: one typed snapshot of a router's counters, taken at one instant, which
//!    everything below reads, so the table, the JSON and the metrics cannot disagree;
//! 2. [`report`]: the final table, printed like `tc -s qdisc`; [`metrics`]: the hub the loop
//!    publishes its snapshot into, and its Prometheus text;
//! 3. [`control`]: the control thread (HTTP endpoint with its token, SIGINT / SIGTERM,
//!    SIGHUP and `POST /reload`).
//!
//! # Example
//!
//! The built-in default run for one second of virtual time, then its JSON and its table:
//!
//! ```
//! use std::sync::atomic::AtomicBool;
//! use zl_core::Nanos;
//! use zl_control::Snapshot;
//! use zl_dataplane::{build, NoObserver, RouterConfig, DEFAULT_CONFIG};
//!
//! let cfg = RouterConfig::from_toml(DEFAULT_CONFIG).expect("the default validates");
//! let mut dp = build(&cfg, &std::env::temp_dir()).expect("generator ports need nothing");
//! let stop = AtomicBool::new(false);
//! let second = Nanos::from_secs(1);
//! dp.run_virtual(second, Nanos::ZERO, &stop, second, &mut NoObserver).unwrap();
//! let snap = Snapshot::take(&dp, dp.now());
//! // What `zlrouter run --json` prints, and the table `zlrouter run` ends with.
//! assert!(snap.to_json().contains("\"forwarded\""));
//! assert!(zl_control::report::render(&snap).contains("forwarded"));
//! ```

#![forbid(unsafe_code)]

pub mod control;
pub mod metrics;
pub mod report;
pub mod snapshot;

pub use control::{ControlError, ControlEvent, ControlThread};
pub use metrics::MetricsHub;
pub use snapshot::Snapshot;
