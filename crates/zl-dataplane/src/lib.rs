//! The zlrouter data plane: ports, the poll-mode loops, forwarding, the TOML config, reload
//! planning and the drop capture. The control plane that reads it (the HTTP endpoint,
//! Prometheus, the JSON snapshot, the final table) is the `zl-control` crate.
//!
//! Where it sits: above the algorithm crates (`zl-wire` parses and rewrites, `zl-qos` with
//! `zl-aqm` and `zl-zombie` classifies, meters, admits, queues, schedules and shapes),
//! `zl-port` (buffers, batches, the `Port` trait) and `zl-traffic` (the generator, pcap and
//! sink ports); below the `zlrouter` binary.
//!
//! Flow of one packet (see [`dataplane`]): rx burst -> parse -> route (LPM, TTL, MACs) or
//! bridge -> classify -> meter -> AQM admission -> per-class queue -> schedule -> shape ->
//! tx burst. Every received packet ends forwarded, dropped by a named [`DropCause`], or still
//! queued; [`FateCounters`] keep the identity exact.
//!
//! # Layers
//!
//! Each module uses only modules on its own line's left or on the lines above it
//! (`scripts/module-cycles` checks that no two modules import each other, in CI):
//!
//! 1. `error` (the config error every stage reports through), `stats` (the drop causes and
//!    fate counters), `route` (the static route table);
//! 2. the stages' own parameters and state: `priority`, `icmp`, `flows`, `capture` (the tap
//!    and the writer), `cpus`;
//! 3. `fates` (the counters with the capture tap and the ICMP counts), `forward` (parse,
//!    route or bridge, TTL, MACs: the receive stage);
//! 4. `neighbour` (the kernel-routing wait), `reject` (count, then maybe an ICMP error),
//!    `egress` (classify, meter, AQM, queue, schedule, shape: the transmit stage), `config`
//!    (the TOML file, aggregating the stages' parameter types);
//! 5. `reload` (what a new config changes, and the mailbox the loops read it from), `view`
//!    (what the control plane reads from an engine);
//! 6. `engine` (what both engines share: a port with its egress, how a run ends, the reload
//!    step);
//! 7. the engines `dataplane` (one thread) and `mt` (receive and transmit workers);
//! 8. `build` (config -> engine).
//!
//! # Example
//!
//! The built-in default (generator ports offering responsive and misbehaving flows to a
//! ZL-RED / Diffserv egress) for one second of virtual time: every packet received is
//! forwarded, dropped with a cause, or still queued.
//!
//! ```
//! use std::sync::atomic::AtomicBool;
//! use zl_core::Nanos;
//! use zl_dataplane::{build, NoObserver, RouterConfig, StopReason, DEFAULT_CONFIG};
//!
//! let cfg = RouterConfig::from_toml(DEFAULT_CONFIG).expect("the default validates");
//! let mut dp = build(&cfg, &std::env::temp_dir()).expect("generator ports need nothing");
//! let stop = AtomicBool::new(false);
//! let second = Nanos::from_secs(1);
//! let why = dp.run_virtual(second, Nanos::ZERO, &stop, second, &mut NoObserver).unwrap();
//! assert!(matches!(why, StopReason::Finished | StopReason::DrainTimeout), "{why:?}");
//! let t = *dp.totals();
//! assert!(t.received > 0 && t.forwarded > 0);
//! assert_eq!(t.received, t.forwarded + t.dropped() + dp.queued());
//! ```

#![forbid(unsafe_code)]

pub mod build;
pub mod capture;
pub mod config;
pub mod cpus;
pub mod dataplane;
mod egress;
mod engine;
mod error;
mod fates;
mod flows;
pub mod forward;
pub mod icmp;
pub mod mt;
mod neighbour;
/// The traffic sources (generator, pcap, sink), from their own crate (`zl-traffic`).
pub mod port {
    pub use zl_traffic::*;
}
pub mod priority;
mod reject;
pub mod reload;
pub mod route;
mod stages;
mod stats;
pub mod view;

pub use build::{
    build, build_threaded, build_with_ports, check_with_ports, BuildError, PortSupplier,
};
pub use config::{RouterConfig, DEFAULT_CONFIG};
pub use dataplane::Dataplane;
pub use egress::{Egress, QueueLengthHistogram};
pub use engine::{BoxedPort, PortSlot, StopReason, UnknownPort};
pub use error::ConfigError;
pub use fates::Fates;
pub use flows::{key_text, FlowTable};
pub use stats::{DropCause, FateCounters, GroupStats};
pub use view::{NoObserver, Observer, RouterView};
