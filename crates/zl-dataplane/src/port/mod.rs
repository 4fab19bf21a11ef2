//! The ports built into the data plane: the traffic generator, pcap files and a sink. The
//! in-memory port lives in `zl_port`; AF_XDP and DPDK in their own crates.

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
