//! Fuzzes `zl_wire::parse` and the rewrites that follow it.
//!
//! The first input octet picks the configuration (VLAN walking, the extension-header limit,
//! IPv4 checksum verification), the rest is the frame. Checked: no panic anywhere; a successful
//! parse keeps every offset inside the frame; every rewrite then succeeds and the rewritten
//! frame parses back to the info the rewrites kept; the ICMP error about the frame
//! (`zl_wire::icmp`), when it builds, parses as ICMP from the router to the frame's source.
#![no_main]

use libfuzzer_sys::fuzz_target;
use zl_wire::{
    decrement_ttl, mark, parse, set_dscp, set_macs, IcmpError, MacAddr, PacketInfo, ParseConfig,
};

fn config(selector: u8) -> ParseConfig {
    ParseConfig {
        vlan: selector & 1 != 0,
        verify_ipv4_checksum: selector & 2 != 0,
        max_ext_headers: selector >> 4,
        ..ParseConfig::default()
    }
}

fn check_offsets(frame: &[u8], info: &PacketInfo) {
    assert!(info.ip_end() <= frame.len());
    assert!(info.l3_offset + info.ip_header_len <= info.l4_offset);
    assert!(info.l4_offset <= info.ip_end());
    if let Some(ext) = info.cc_ext {
        assert!(ext.offset + 8 <= info.l4_offset);
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, frame)) = data.split_first() else {
        return;
    };
    let cfg = config(selector);
    let Ok(info) = parse(frame, &cfg) else {
        return;
    };
    check_offsets(frame, &info);

    let mut copy = frame.to_vec();
    let mut kept = info;
    mark(&mut copy, &mut kept).expect("mark on the parsed frame");
    set_dscp(&mut copy, &mut kept, selector & 0x3f).expect("set_dscp on the parsed frame");
    decrement_ttl(&mut copy, &mut kept).expect("decrement_ttl on the parsed frame");
    set_macs(&mut copy, MacAddr([0xff; 6]), MacAddr([0x02; 6])).expect("set_macs");
    let reparsed = parse(&copy, &cfg).expect("a rewritten frame still parses");
    assert_eq!(reparsed, kept);

    let (error, src) = match info.src {
        std::net::IpAddr::V4(_) => (IcmpError::TimeExceeded, "10.0.0.1".parse().unwrap()),
        std::net::IpAddr::V6(_) => (IcmpError::TooBig { mtu: 1280 }, "2001:db8::1".parse().unwrap()),
    };
    let mut out = vec![0u8; 2048];
    if let Ok(n) = zl_wire::write_error(frame, &info, error, src, MacAddr([0x02; 6]), 1, &mut out) {
        let plain = ParseConfig {
            verify_ipv4_checksum: true,
            ..cfg
        };
        let e = parse(&out[..n], &plain).expect("the ICMP error parses");
        assert_eq!((e.src, e.dst), (src, info.src));
    }
});
