//! zlrouter's traffic sources: ports (`zl_port::Port`) that make or replay traffic rather
//! than drive a NIC. The traffic generator (flow groups of constant-rate, Poisson, on-off and
//! TCP Reno flows, the Reno senders fed back through an ACK channel from the sink side), pcap
//! replay and capture ports, and a sink. The data plane builds them from its config
//! (`zl_dataplane::build`) and sees only the `Port` trait; the in-memory port lives in
//! `zl_port`, AF_XDP and DPDK in their own crates.
//!
//! Layering: below the data plane, above `zl-port`, `zl-wire` and `zl-qos` (DSCP names);
//! nothing here reads the clock or a random source of its own: time is passed to each
//! `recv` / `send`, and the generator's streams are seeded from its setup. Inside, `acks`
//! (the ACK channel) and `reno` (the TCP Reno sender) are below `generator` and `pcap` (the
//! ports); `scripts/module-cycles` checks that no import goes the other way.

mod acks;
mod generator;
mod pcap;
mod reno;

pub use acks::{AckChannel, Delivery};
pub use generator::{
    Arrival, FlowGroupParams, GeneratorParams, GeneratorPort, GeneratorSetup, GroupInfo,
    ResponsiveState, TcpFlowParams,
};
pub use pcap::{FileAccess, PcapParams, PcapPort, SinkPort};

/// A source's parameter it cannot run with: the config key, the value and what was
/// expected (the data plane reports it as its own config error).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid `{key}` = {value}: expected {expected}")]
pub struct ParamError {
    pub key: String,
    pub value: String,
    pub expected: String,
}

pub(crate) fn invalid(
    key: impl Into<String>,
    value: impl ToString,
    expected: impl Into<String>,
) -> ParamError {
    ParamError {
        key: key.into(),
        value: value.to_string(),
        expected: expected.into(),
    }
}
