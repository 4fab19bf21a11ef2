//! The zlrouter data plane: ports, the poll-mode loop, forwarding, the TOML config and the
//! metrics endpoint.
//!
//! Where it sits: above the algorithm crates (`zl-wire` parses and rewrites, `zl-qos` with
//! `zl-aqm` and `zl-zombie` classifies, meters, admits, queues, schedules and shapes) and
//! `zl-port` (buffers, batches, the `Port` trait); below the `zlrouter` binary.
//!
//! Flow of one packet (see [`dataplane`]): rx burst -> parse -> route (LPM, TTL, MACs) or
//! bridge -> classify -> meter -> AQM admission -> per-class queue -> schedule -> shape ->
//! tx burst. Every received packet ends forwarded, dropped by a named [`DropCause`], or still
//! queued; [`FateCounters`] keep the identity exact.

#![forbid(unsafe_code)]

pub mod build;
pub mod capture;
pub mod config;
pub mod control;
pub mod dataplane;
pub mod egress;
pub mod flows;
pub mod forward;
pub mod icmp;
pub mod metrics;
pub mod mt;
pub mod port;
pub mod priority;
pub mod reload;
pub mod report;
pub mod route;
pub mod snapshot;
pub mod stats;
pub mod view;

pub use build::{
    build, build_threaded, build_with_ports, check_with_ports, BoxedPort, BuildError, PortSupplier,
};
pub use config::{ConfigError, RouterConfig, DEFAULT_CONFIG};
pub use dataplane::{Dataplane, StopReason};
pub use snapshot::Snapshot;
pub use stats::{DropCause, FateCounters, Fates, GroupStats};
pub use view::{NoObserver, Observer, RouterView};
