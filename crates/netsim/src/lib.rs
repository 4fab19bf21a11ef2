//! netsim: a deterministic discrete-event simulator of TCP and UDP flows crossing one
//! bottleneck, whose queue runs the project's own AQM and QoS code (`zl-aqm`, `zl-zombie`,
//! `zl-qos`) in simulated time, to reproduce the five papers' experiments.
//!
//! Layers, bottom up: `event` (binary-heap event queue of `Copy` events), packets in an
//! arena, traffic sources ([`tcp`], [`udp`]) and the TCP receiver, the [`bottleneck`] trait
//! with its FIFO + `zl_aqm` implementation, [`discipline`]'s queue disciplines (CoDel, FQ-CoDel,
//! DualPI2, ZL-RED with isolation) and [`diffserv`]'s `zl_qos::QosEngine`, passive
//! [`probe`]s (the Zombie List's 1/P(t), RED's average), the [`sim`] loop; above it, [`config`]
//! (one run, every value checked and named on error), [`scenario`] (sweeps, replications,
//! parallel runs, result rows) and [`report`] (CSV, markdown, PNG/SVG plots), which the
//! `netsim` binary drives from the TOML files in `configs/netsim/`.
//!
//! Contract: a run is a pure function of its [`SimSpec`] (seed included) and bottleneck: the
//! same inputs give the same [`SimReport`] bit for bit. Nothing reads a clock or allocates per
//! event once the queues and the packet arena have grown to the working set.
//!
//! # Example
//!
//! Two NewReno flows through a 10 Mb/s drop-tail bottleneck with a one-BDP buffer, 20
//! simulated seconds; the same spec gives the same report bit for bit.
//!
//! ```
//! use netsim::{DropTail, FifoQueue, FlowSpec, SimSpec, Simulator, SourceSpec, TcpParams, TcpVariant};
//! use zl_core::Nanos;
//!
//! let reno = FlowSpec {
//!     source: SourceSpec::Tcp {
//!         params: TcpParams {
//!             variant: TcpVariant::NewReno,
//!             window_cap: 10_000,
//!             packet_size: 1000,
//!             ..TcpParams::default()
//!         },
//!         web: None,
//!     },
//!     access_delay: Nanos::from_millis(10),
//!     access_rate_bps: 0.0,
//!     egress_delay: Nanos::ZERO,
//!     start: Nanos::ZERO,
//!     dscp: None,
//!     group: 0,
//!     src_host: None,
//!     dst_host: 0,
//! };
//! let spec = SimSpec {
//!     seed: 1,
//!     duration: Nanos::from_secs(20),
//!     warmup: Nanos::from_secs(5),
//!     bottleneck_rate_bps: 10e6,
//!     bottleneck_delay: Nanos::from_millis(10),
//!     sample_interval: None,
//!     flows: vec![reno, FlowSpec { start: Nanos::from_millis(100), ..reno }],
//! };
//! let run = || {
//!     let queue = FifoQueue::new(DropTail, 50, u64::MAX);
//!     Simulator::new(&spec, Box::new(queue)).expect("a valid spec").run()
//! };
//! let report = run();
//! assert!(report.utilisation > 0.9, "{}", report.utilisation);
//! assert_eq!(report.flows.len(), 2);
//! assert_eq!(report, run());
//! ```

#![forbid(unsafe_code)]

pub mod bottleneck;
pub mod config;
pub mod delay;
pub mod diffserv;
pub mod discipline;
pub(crate) mod event;
pub mod flow;
pub(crate) mod packet;
pub mod probe;
pub(crate) mod receiver;
pub mod report;
pub mod scenario;
pub mod sim;
pub mod tcp;
pub(crate) mod tcp_ns2;
pub mod udp;

pub use bottleneck::{Bottleneck, Dequeue, Dequeued, DropTail, FifoQueue, RandomLoss, SimRng};
pub use delay::DelayHistogram;
pub use discipline::DisciplineQueue;
pub use flow::FlowCounters;
pub use sim::{
    jain_index, FlowReport, FlowSpec, Probe, SimError, SimReport, SimSpec, Simulator, SourceSpec,
};
pub use tcp::{EcnMode, TcpModel, TcpParams, TcpVariant, VegasParams, WebParams};
pub use udp::{CbrParams, TfrcParams};
