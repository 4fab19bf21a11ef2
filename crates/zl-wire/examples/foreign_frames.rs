//! A foreign data plane using zl-wire on frames it owns: parse each frame in place, take the
//! flow hash for its AQM, then apply what the AQM decided (mark CE, decrement TTL) to the same
//! bytes. No allocation, no copy, no clock; malformed frames come back as errors to count.
//!
//! The frames are the crate's test vectors (IPv4/TCP, 802.1Q IPv4 with options, QinQ, IPv6
//! with the congestion-control extension header, IPv6 with an extension chain) plus a
//! truncated one; every second packet is "marked" as if the AQM had said so.
//!
//! Run: `cargo run -p zl-wire --example foreign_frames`

use zl_wire::vectors::{
    IPV4_TCP, IPV6_CC_EXT_UDP, IPV6_EXT_CHAIN_TCP, QINQ_IPV4_LATER_FRAGMENT, VLAN_IPV4_OPTIONS_UDP,
};
use zl_wire::{decrement_ttl, mark, parse, FlowKeyKind, ParseConfig};

fn main() {
    // The embedder's own buffers (a DPDK mbuf's data, an AF_XDP UMEM frame, ...).
    let mut frames: Vec<Vec<u8>> = vec![
        IPV4_TCP.to_vec(),
        VLAN_IPV4_OPTIONS_UDP.to_vec(),
        QINQ_IPV4_LATER_FRAGMENT.to_vec(),
        IPV6_CC_EXT_UDP.to_vec(),
        IPV6_EXT_CHAIN_TCP.to_vec(),
        IPV4_TCP[..30].to_vec(), // truncated inside the IPv4 header
    ];
    let cfg = ParseConfig {
        flow_key: FlowKeyKind::FiveTuple,
        hash_seed: 0x5eed,
        ..ParseConfig::default()
    };
    let mut malformed = 0;
    for (i, frame) in frames.iter_mut().enumerate() {
        let mut info = match parse(frame, &cfg) {
            Ok(info) => info,
            Err(e) => {
                malformed += 1;
                println!("frame {i}: dropped, counted as malformed: {e}");
                continue;
            }
        };
        // What an AQM embedding needs from the packet: its flow hash, ECN and length.
        print!(
            "frame {i}: {} -> {} proto {} flow {:016x} ecn {:?} dscp {} ttl {}",
            info.src,
            info.dst,
            info.protocol,
            info.flow.0,
            info.ecn(),
            info.dscp(),
            info.ttl
        );
        let ttl = decrement_ttl(frame, &mut info).expect("offsets from this frame's parse");
        if i % 2 == 0 {
            let outcome = mark(frame, &mut info).expect("offsets from this frame's parse");
            print!("; mark: {outcome:?}");
        }
        println!("; ttl: {ttl:?}");
        // The rewritten frame still parses, checksum included.
        let again = parse(frame, &cfg).expect("a rewritten frame parses");
        assert_eq!(again.flow, info.flow);
    }
    println!("{malformed} malformed frame(s) counted");
}
