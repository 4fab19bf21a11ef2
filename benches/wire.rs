//! Per-packet cost of `zl-wire` as the data plane calls it: `parse` (which includes the flow hash)
//! of a 64-byte IPv4/TCP frame and of an IPv6/UDP frame carrying the congestion-control extension
//! header (docs/algorithms/wire.md); the flow hash alone for each key kind; and the rewrites
//! (`set_ce` with the RFC 1624 checksum update, `decrement_ttl`, the extension header's ECN bit).
//! The comparison with `etherparse::SlicedPacket::from_ethernet` lives in
//! `crates/zl-wire/benches/vs_etherparse.rs` (etherparse is not a dev-dependency of the root
//! package). The parse closures return the flow id, as a caller reads fields: returning the whole
//! `PacketInfo` through `black_box` adds a store-forwarding stall of the harness. Results:
//! docs/performance/zl-wire.md.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use zl_wire::vectors::{IPV4_TCP, IPV6_CC_EXT_UDP};
use zl_wire::{decrement_ttl, mark, parse, set_ce, FlowKeyKind, PacketInfo, ParseConfig};

/// The IPv4/TCP sample padded to a 64-octet frame (the minimum Ethernet frame with FCS).
fn ipv4_tcp_64() -> [u8; 64] {
    let mut frame = [0u8; 64];
    frame[..IPV4_TCP.len()].copy_from_slice(&IPV4_TCP);
    frame
}

fn cfg(flow_key: FlowKeyKind) -> ParseConfig {
    ParseConfig {
        flow_key,
        hash_seed: 0x5eed_f00d,
        ..ParseConfig::default()
    }
}

fn bench_parse(c: &mut Criterion) {
    let v4 = ipv4_tcp_64();
    let mut group = c.benchmark_group("parse");
    for kind in [FlowKeyKind::SrcDst, FlowKeyKind::FiveTuple] {
        let cfg = cfg(kind);
        group.bench_function(format!("ipv4_tcp_64B/{kind}"), |b| {
            b.iter(|| parse(black_box(&v4), black_box(&cfg)).map(|info| info.flow))
        });
        group.bench_function(format!("ipv6_cc_ext_udp/{kind}"), |b| {
            b.iter(|| parse(black_box(&IPV6_CC_EXT_UDP), black_box(&cfg)).map(|info| info.flow))
        });
    }
    let no_verify = ParseConfig {
        verify_ipv4_checksum: false,
        ..cfg(FlowKeyKind::SrcDst)
    };
    group.bench_function("ipv4_tcp_64B/src-dst/no-checksum-verify", |b| {
        b.iter(|| parse(black_box(&v4), black_box(&no_verify)).map(|info| info.flow))
    });
    group.finish();
}

fn bench_hash(c: &mut Criterion) {
    let v4 = parse(&ipv4_tcp_64(), &ParseConfig::default())
        .unwrap()
        .flow_key();
    let v6 = parse(&IPV6_CC_EXT_UDP, &ParseConfig::default())
        .unwrap()
        .flow_key();
    let mut group = c.benchmark_group("flow_hash");
    for kind in [
        FlowKeyKind::Src,
        FlowKeyKind::SrcDst,
        FlowKeyKind::FiveTuple,
    ] {
        group.bench_function(format!("ipv4/{kind}"), |b| {
            b.iter(|| black_box(&v4).hash(kind, black_box(7)))
        });
        group.bench_function(format!("ipv6/{kind}"), |b| {
            b.iter(|| black_box(&v6).hash(kind, black_box(7)))
        });
    }
    group.finish();
}

/// Each rewrite runs on a fresh copy of the frame and its info (criterion's setup, not timed),
/// so every iteration takes the full path rather than "already marked". `baseline` reads one
/// octet through the same harness: subtract it to get the rewrite's own cost.
fn bench_rewrite(c: &mut Criterion) {
    let v4 = ipv4_tcp_64();
    let v4_info = parse(&v4, &ParseConfig::default()).unwrap();
    let v6 = IPV6_CC_EXT_UDP;
    let v6_info = parse(&v6, &ParseConfig::default()).unwrap();
    let mut group = c.benchmark_group("rewrite");
    group.bench_function("baseline", |b| {
        b.iter_batched_ref(
            || (v4, v4_info),
            |(frame, info): &mut ([u8; 64], PacketInfo)| frame[info.l3_offset + 1],
            BatchSize::SmallInput,
        )
    });
    group.bench_function("set_ce/ipv4", |b| {
        b.iter_batched_ref(
            || (v4, v4_info),
            |(frame, info): &mut ([u8; 64], PacketInfo)| set_ce(frame, info),
            BatchSize::SmallInput,
        )
    });
    group.bench_function("decrement_ttl/ipv4", |b| {
        b.iter_batched_ref(
            || (v4, v4_info),
            |(frame, info): &mut ([u8; 64], PacketInfo)| decrement_ttl(frame, info),
            BatchSize::SmallInput,
        )
    });
    group.bench_function("mark_cc_ext/ipv6", |b| {
        b.iter_batched_ref(
            || (v6, v6_info),
            |(frame, info): &mut ([u8; 78], PacketInfo)| mark(frame, info),
            BatchSize::SmallInput,
        )
    });
    group.finish();
}

criterion_group!(benches, bench_parse, bench_hash, bench_rewrite);
criterion_main!(benches);
