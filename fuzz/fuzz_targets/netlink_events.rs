//! Fuzzes the decoding of the kernel's rtnetlink announcements (`zl_netlink::decode_events`,
//! what `Follower::next` runs on every datagram it receives): the bytes come from outside the
//! process, so a malformed or hostile datagram must be an error, never a panic or a hang.
//!
//! Checked: no panic; at most one event per 16-byte netlink header; every event's prefix fits
//! its address (the forwarding tables shift masks by it); decoding is deterministic.
#![no_main]

use std::net::IpAddr;

use libfuzzer_sys::fuzz_target;
use zl_netlink::{decode_events, KernelEvent};

fn width(a: IpAddr) -> u8 {
    if a.is_ipv4() {
        32
    } else {
        128
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(events) = decode_events(data) else {
        return;
    };
    assert!(events.len() <= data.len() / 16, "{} events", events.len());
    for e in &events {
        match e {
            KernelEvent::RouteAdded(r) | KernelEvent::RouteRemoved(r) => {
                assert!(r.prefix_len <= width(r.dst), "{r:?}")
            }
            KernelEvent::AddrAdded(a) | KernelEvent::AddrRemoved(a) => {
                assert!(a.prefix_len <= width(a.addr), "{a:?}")
            }
            _ => {}
        }
    }
    assert_eq!(decode_events(data).ok(), Some(events));
});
