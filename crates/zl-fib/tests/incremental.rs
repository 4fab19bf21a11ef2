//! The table kept up to date event by event agrees with one built from the same routes at
//! once, and the interface MTUs follow the kernel's links (no root needed).

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use zl_fib::{FibState, StaticRoute};
use zl_netlink::{
    KernelEvent, KernelLink, KernelNeighbour, KernelRoute, NeighbourState, RouteKind,
};
use zl_wire::MacAddr;

/// A small xorshift: the sequences are seeded, so a failure replays.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Prefixes crowded into 10.0.0.0/12 and 2001:db8::/40 so that lengths nest and overlap.
fn random_route(rng: &mut Rng) -> KernelRoute {
    let v6 = rng.below(4) == 0;
    let (dst, prefix_len) = if v6 {
        let len = 40 + rng.below(25) as u8;
        let a = 0x2001_0db8_u128 << 96 | u128::from(rng.next() as u32) << 64;
        (IpAddr::V6(Ipv6Addr::from(a)), len)
    } else {
        let len = 12 + rng.below(21) as u8;
        let a = 0x0a00_0000 | (rng.next() as u32 & 0x000f_ffff);
        (IpAddr::V4(Ipv4Addr::from(a)), len)
    };
    let kind = match rng.below(10) {
        0 => RouteKind::Blackhole,
        1 => RouteKind::Unreachable,
        _ => RouteKind::Unicast,
    };
    KernelRoute {
        dst,
        prefix_len,
        kind,
        gateway: None,
        // Interface 99 is not one of zlrouter's ports.
        oif: [10, 20, 99][rng.below(3) as usize],
        priority: rng.below(3) as u32,
    }
}

fn masked(r: &KernelRoute) -> (IpAddr, u8, u32) {
    let dst = match r.dst {
        IpAddr::V4(a) => {
            let m = u32::MAX
                .checked_shl(32 - u32::from(r.prefix_len))
                .unwrap_or(0);
            IpAddr::V4(Ipv4Addr::from(u32::from(a) & m))
        }
        IpAddr::V6(a) => {
            let m = u128::MAX
                .checked_shl(128 - u32::from(r.prefix_len))
                .unwrap_or(0);
            IpAddr::V6(Ipv6Addr::from(u128::from(a) & m))
        }
    };
    (dst, r.prefix_len, r.priority)
}

fn statics() -> Vec<StaticRoute> {
    vec![StaticRoute {
        dst: "10.1.0.0".parse().unwrap(),
        prefix_len: 16,
        port: 1,
        gateway: None,
        mac: Some(MacAddr([2, 0, 0, 0, 0, 0x51])),
    }]
}

#[test]
fn routes_changed_one_at_a_time_decide_as_the_same_routes_loaded_at_once() {
    let mut rng = Rng(0x5eed_f1b0);
    let mut inc = FibState::new([(10, 0), (20, 1)], statics());
    inc.load(vec![], vec![]);
    // The kernel's table as a map, to load the reference from.
    let mut kernel: HashMap<(IpAddr, u8, u32), KernelRoute> = HashMap::new();
    let mut added = Vec::new();
    for step in 0..6_000 {
        // Adds, replaces (same prefix and metric) and deletes, deletes of absent routes too.
        if rng.below(3) == 0 && !added.is_empty() {
            let r: KernelRoute = added.swap_remove(rng.below(added.len() as u64) as usize);
            kernel.remove(&masked(&r));
            inc.apply(KernelEvent::RouteRemoved(r));
        } else {
            let r = random_route(&mut rng);
            kernel.insert(masked(&r), r.clone());
            added.push(r.clone());
            inc.apply(KernelEvent::RouteAdded(r));
        }
        if step % 1_500 == 1_499 {
            let mut reference = FibState::new([(10, 0), (20, 1)], statics());
            reference.load(kernel.values().cloned().collect(), vec![]);
            assert_eq!(inc.route_count(), reference.route_count(), "step {step}");
            let (a, b) = (inc.snapshot(), reference.snapshot());
            for _ in 0..20_000 {
                let dst = if rng.below(4) == 0 {
                    IpAddr::V6(Ipv6Addr::from(
                        0x2001_0db8_u128 << 96 | u128::from(rng.next() as u32) << 64,
                    ))
                } else {
                    IpAddr::V4(Ipv4Addr::from(
                        0x0a00_0000 | (rng.next() as u32 & 0x000f_ffff),
                    ))
                };
                assert_eq!(a.decide(dst), b.decide(dst), "{dst} at step {step}");
            }
        }
    }
}

#[test]
fn a_static_route_keeps_its_prefix_while_kernel_routes_come_and_go() {
    let mut s = FibState::new([(10, 0), (20, 1)], statics());
    s.load(vec![], vec![]);
    let kernel = KernelRoute {
        dst: "10.1.0.0".parse().unwrap(),
        prefix_len: 16,
        kind: RouteKind::Blackhole,
        gateway: None,
        oif: 0,
        priority: 0,
    };
    let to = "10.1.2.3".parse().unwrap();
    let static_hop = zl_fib::Decision::Forward {
        port: 1,
        mac: MacAddr([2, 0, 0, 0, 0, 0x51]),
    };
    s.apply(KernelEvent::RouteAdded(kernel.clone()));
    assert_eq!(s.snapshot().decide(to), static_hop);
    s.apply(KernelEvent::RouteRemoved(kernel));
    assert_eq!(s.snapshot().decide(to), static_hop);
    assert_eq!(s.route_count(), 1);
}

#[test]
fn the_mtu_of_each_port_follows_its_link() {
    let mut s = FibState::new([(10, 0), (20, 1)], vec![]);
    s.load_links(vec![
        KernelLink {
            ifindex: 10,
            mtu: 1500,
        },
        KernelLink {
            ifindex: 99,
            mtu: 9000,
        },
    ]);
    assert_eq!(s.snapshot().mtu(0), Some(1500));
    assert_eq!(s.snapshot().mtu(1), None, "not announced yet");
    let link = |ifindex, mtu| KernelEvent::Link(KernelLink { ifindex, mtu });
    assert!(s.apply(link(10, 1400)), "a port's MTU changed");
    assert!(!s.apply(link(10, 1400)), "announced again unchanged");
    assert!(!s.apply(link(99, 1280)), "not one of zlrouter's interfaces");
    assert!(s.apply(link(20, 9000)));
    let f = s.snapshot();
    assert_eq!((f.mtu(0), f.mtu(1)), (Some(1400), Some(9000)));
    // Neighbours are untouched by link changes.
    s.apply(KernelEvent::Neighbour(KernelNeighbour {
        ifindex: 10,
        addr: "10.0.0.2".parse().unwrap(),
        mac: Some([2, 0, 0, 0, 0, 2]),
        state: NeighbourState::Usable,
    }));
    assert!(s
        .snapshot()
        .neighbour(0, "10.0.0.2".parse().unwrap())
        .is_some());
}
