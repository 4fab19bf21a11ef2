//! Our fixed-offset `parse` against `etherparse::SlicedPacket::from_ethernet` on the same
//! frames: a 64-octet IPv4/TCP frame and the IPv6/UDP frame with the docs/algorithms/wire.md
//! extension header.
//!
//! The two do different work: `parse` also verifies the IPv4 header checksum and computes the
//! flow hash; etherparse slices every layer (and, not knowing Next Header 253, stops at the
//! extension header). `parse` without checksum verification is listed as well. Each closure
//! returns one small value (the flow id; whether a transport header was found) rather than the
//! whole result, as a caller reads fields: returning the 150-octet `PacketInfo` through
//! `black_box` measured a store-forwarding stall of the harness, not the parser. Results:
//! docs/performance/zl-wire.md.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use etherparse::SlicedPacket;
use zl_wire::vectors::{IPV4_TCP, IPV6_CC_EXT_UDP};
use zl_wire::{parse, ParseConfig};

fn compare(c: &mut Criterion) {
    let mut v4 = [0u8; 64];
    v4[..IPV4_TCP.len()].copy_from_slice(&IPV4_TCP);
    let frames: [(&str, &[u8]); 2] = [("ipv4_tcp_64B", &v4), ("ipv6_cc_ext_udp", &IPV6_CC_EXT_UDP)];
    let cfg = ParseConfig::default();
    let no_verify = ParseConfig {
        verify_ipv4_checksum: false,
        ..cfg
    };
    let mut group = c.benchmark_group("vs_etherparse");
    for (name, frame) in frames {
        group.bench_function(format!("{name}/zl_wire::parse"), |b| {
            b.iter(|| parse(black_box(frame), black_box(&cfg)).map(|info| info.flow))
        });
        group.bench_function(format!("{name}/zl_wire::parse_no_checksum_verify"), |b| {
            b.iter(|| parse(black_box(frame), black_box(&no_verify)).map(|info| info.flow))
        });
        group.bench_function(
            format!("{name}/etherparse::SlicedPacket::from_ethernet"),
            |b| {
                b.iter(|| {
                    SlicedPacket::from_ethernet(black_box(frame)).map(|p| p.transport.is_some())
                })
            },
        );
    }
    group.finish();
}

criterion_group!(benches, compare);
criterion_main!(benches);
