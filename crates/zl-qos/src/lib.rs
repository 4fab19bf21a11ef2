//! Diffserv QoS for zlrouter: classify, meter, queue per class with AQM, schedule, shape.
//!
//! Flow of one packet (docs/algorithms/diffserv.md, figures 1-3):
//! DSCP -> class and incoming color ([`classify`]) -> three-color meter ([`meter`], RFC 2697 /
//! RFC 2698) -> re-mark to AFx1/AFx2/AFx3 -> the class's AQM policy (`zl_aqm`) on the class
//! queue ([`queue`], bounded in packets and bytes, sized by [`sizing`]) -> scheduler
//! ([`sched`]: strict priority for EF over WRR or DRR) -> egress shaper ([`shaper`]) -> link.
//!
//! Layers, bottom up (a module uses only those before it): `error` ([`QosConfigError`]),
//! `bucket` (token-bucket arithmetic), [`queue`] (the class ring), [`stats`] (the counters);
//! the stages, each with its own parameters: [`classify`], [`meter`], [`shaper`], [`sched`],
//! [`sizing`]; [`params`] (the config, made of the stages' parameters); `class` (one class as
//! the engine keeps it: ring, meter, admission, counters); `held` (the path of a class whose
//! discipline holds its own queues); `engine` ([`QosEngine`], which drives them all).
//!
//! Contract: time and randomness are passed in; no function reads a clock or allocates per
//! packet; bad input is a typed [`QosConfigError`] naming the config key, or a counted drop,
//! never a panic. The crate has no packet-bytes dependency: the data plane parses the DSCP and
//! applies the re-marking, the simulators use their own packet structs as queue items.
//!
//! # Example
//!
//! ```
//! use rand::SeedableRng;
//! use zl_aqm::PacketMeta;
//! use zl_core::Nanos;
//! use zl_qos::{Dequeue, QosEngine, QosParams};
//!
//! // One strict EF class above best effort, on a 10 Mbit/s link.
//! let params: QosParams = toml::from_str(
//!     r#"
//!     link_rate_bps = 10_000_000
//!     [[classes]]
//!     name = "ef"
//!     strict_rank = 0
//!     [[classes]]
//!     name = "be"
//!     weight = 1
//!     aqm = { kind = "zl-red" }
//!     "#,
//! )?;
//! let mut qos: QosEngine<&str> = QosEngine::new(&params)?;
//! let mut rng = rand::rngs::StdRng::seed_from_u64(1);
//! let pkt = PacketMeta { len: 1000, ..PacketMeta::default() };
//! // Unmarked traffic goes to BE, DSCP 46 to EF; the engine holds the caller's items.
//! let (_, verdict) = qos.enqueue(Nanos(0), &mut rng, None, pkt, "bulk", |_| {});
//! assert!(verdict.is_ok());
//! let (_, verdict) = qos.enqueue(Nanos(0), &mut rng, Some(46), pkt, "voice", |_| {});
//! assert!(verdict.is_ok());
//! // EF leaves first.
//! match qos.dequeue(Nanos(1)) {
//!     Dequeue::Packet(d) => assert_eq!(d.item, "voice"),
//!     other => panic!("{other:?}"),
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod bucket;
mod class;
pub mod classify;
mod engine;
mod error;
mod held;
pub mod meter;
pub mod params;
pub mod queue;
pub mod sched;
pub mod shaper;
pub mod sizing;
pub mod stats;

pub use bucket::{MAX_BURST_BYTES, MAX_RATE_BPS, UNITS_PER_BYTE};
pub use class::Dropped;
pub use classify::{DscpRule, DscpSpec, DscpTable, Lookup};
pub use engine::{Burst, Classified, Departed, Dequeue, QosEngine, QosUpdate, MAX_QUEUE_PACKETS};
pub use error::QosConfigError;
pub use held::Discarded;
pub use meter::{ColorMode, Meter, MeterParams, Srtcm, Trtcm};
pub use params::{ByColor, ClassParams, ClassifierParams, QosParams, SchedulerParams};
pub use queue::{Capacity, ClassQueue, Queued};
pub use sched::{SchedClass, SchedMode, Scheduler};
pub use shaper::{Shaper, ShaperParams, ETHERNET_OVERHEAD_BYTES};
pub use sizing::{bdp_bytes, sqrt_n_bytes, BufferRule, LiveSqrtN};
pub use stats::{ClassStats, ClassifierStats, ColorStats, SojournHistogram, SOJOURN_BUCKETS};
