//! The ports built into the data plane: the traffic generator, pcap files and a sink. The
//! in-memory port lives in `zl_port`; AF_XDP and DPDK in their own crates.

mod generator;
mod pcap;

pub use generator::{
    Arrival, FlowGroupParams, GeneratorParams, GeneratorPort, GeneratorSetup, GroupInfo,
};
pub use pcap::{FileAccess, PcapParams, PcapPort, SinkPort};
