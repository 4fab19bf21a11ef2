//! The table's decisions from synthetic kernel events (no root needed).

use std::net::IpAddr;

use zl_core::Nanos;
use zl_fib::{Decision, FibState, Hold, NeighbourWait, StaticRoute};
use zl_netlink::{KernelEvent, KernelNeighbour, KernelRoute, NeighbourState, RouteKind};
use zl_wire::MacAddr;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn route(dst: &str, len: u8, gw: Option<&str>, oif: u32, metric: u32) -> KernelRoute {
    KernelRoute {
        dst: ip(dst),
        prefix_len: len,
        kind: RouteKind::Unicast,
        gateway: gw.map(ip),
        oif,
        priority: metric,
    }
}

fn neigh(ifindex: u32, addr: &str, mac: u8) -> KernelNeighbour {
    KernelNeighbour {
        ifindex,
        addr: ip(addr),
        mac: Some([2, 0, 0, 0, 0, mac]),
        state: NeighbourState::Usable,
    }
}

const MAC: fn(u8) -> MacAddr = |b| MacAddr([2, 0, 0, 0, 0, b]);

/// Ports: kernel interface 10 is port 0, 20 is port 1; interface 99 is not zlrouter's.
fn state() -> FibState {
    FibState::new([(10, 0), (20, 1)], vec![])
}

#[test]
fn connected_routes_resolve_the_destination_and_gateway_routes_the_gateway() {
    let mut s = state();
    s.load(
        vec![
            route("10.0.1.0", 24, None, 10, 0),
            route("10.0.2.0", 24, None, 20, 0),
            route("0.0.0.0", 0, Some("10.0.2.254"), 20, 0),
            route("2001:db8:1::", 64, None, 10, 256),
        ],
        vec![neigh(10, "10.0.1.5", 5), neigh(20, "10.0.2.254", 0xfe)],
    );
    let f = s.snapshot();
    assert_eq!(
        f.decide(ip("10.0.1.5")),
        Decision::Forward {
            port: 0,
            mac: MAC(5)
        }
    );
    assert_eq!(
        f.decide(ip("10.0.1.6")),
        Decision::Resolve {
            port: 0,
            next_hop: ip("10.0.1.6")
        }
    );
    assert_eq!(
        f.decide(ip("192.0.2.1")),
        Decision::Forward {
            port: 1,
            mac: MAC(0xfe)
        }
    );
    assert_eq!(
        f.decide(ip("2001:db8:1::7")),
        Decision::Resolve {
            port: 0,
            next_hop: ip("2001:db8:1::7")
        }
    );
    assert_eq!(
        f.decide(ip("2001:db8:2::7")),
        Decision::NoRoute,
        "no IPv6 default"
    );
}

#[test]
fn route_changes_take_effect_in_the_next_snapshot_and_the_lowest_metric_wins() {
    let mut s = state();
    s.load(
        vec![route("10.0.2.0", 24, None, 20, 0)],
        vec![neigh(20, "10.0.2.1", 1), neigh(10, "10.0.1.1", 2)],
    );
    let before = s.snapshot();
    assert!(s.apply(KernelEvent::RouteAdded(route(
        "10.0.2.128",
        25,
        Some("10.0.1.1"),
        10,
        0
    ))));
    let after = s.snapshot();
    assert_eq!(
        before.decide(ip("10.0.2.200")),
        Decision::Resolve {
            port: 1,
            next_hop: ip("10.0.2.200")
        },
        "a snapshot never changes"
    );
    assert_eq!(
        after.decide(ip("10.0.2.200")),
        Decision::Forward {
            port: 0,
            mac: MAC(2)
        }
    );
    assert_eq!(
        after.decide(ip("10.0.2.1")),
        Decision::Forward {
            port: 1,
            mac: MAC(1)
        },
        "outside the /25"
    );
    // A second route to the same prefix with a lower metric takes over; removing it restores.
    s.apply(KernelEvent::RouteAdded(route(
        "10.0.2.128",
        25,
        Some("10.0.2.1"),
        20,
        0,
    )));
    assert_eq!(
        s.snapshot().decide(ip("10.0.2.200")),
        Decision::Forward {
            port: 1,
            mac: MAC(1)
        },
        "same metric replaces"
    );
    s.apply(KernelEvent::RouteAdded(route(
        "10.0.2.128",
        25,
        Some("10.0.1.1"),
        10,
        100,
    )));
    assert_eq!(
        s.snapshot().decide(ip("10.0.2.200")),
        Decision::Forward {
            port: 1,
            mac: MAC(1)
        },
        "metric 0 beats 100"
    );
    s.apply(KernelEvent::RouteRemoved(route(
        "10.0.2.128",
        25,
        Some("10.0.2.1"),
        20,
        0,
    )));
    assert_eq!(
        s.snapshot().decide(ip("10.0.2.200")),
        Decision::Forward {
            port: 0,
            mac: MAC(2)
        },
        "metric 100 left"
    );
    s.apply(KernelEvent::RouteRemoved(route(
        "10.0.2.128",
        25,
        Some("10.0.1.1"),
        10,
        100,
    )));
    assert_eq!(
        s.snapshot().decide(ip("10.0.2.200")),
        Decision::Resolve {
            port: 1,
            next_hop: ip("10.0.2.200")
        }
    );
}

#[test]
fn other_interfaces_blackholes_and_neighbour_loss() {
    let mut s = state();
    let mut bh = route("10.66.0.0", 16, None, 0, 0);
    bh.kind = RouteKind::Blackhole;
    s.load(
        vec![
            route("0.0.0.0", 0, Some("10.0.1.1"), 10, 0),
            route("172.16.0.0", 12, None, 99, 0),
            bh,
        ],
        vec![neigh(10, "10.0.1.1", 1)],
    );
    let f = s.snapshot();
    assert_eq!(
        f.decide(ip("172.16.1.1")),
        Decision::NoRoute,
        "the best route is the management port's"
    );
    assert_eq!(f.decide(ip("10.66.1.1")), Decision::Blackhole);
    assert_eq!(
        f.decide(ip("8.8.8.8")),
        Decision::Forward {
            port: 0,
            mac: MAC(1)
        }
    );
    s.apply(KernelEvent::Neighbour(KernelNeighbour {
        mac: None,
        state: NeighbourState::Failed,
        ..neigh(10, "10.0.1.1", 1)
    }));
    assert_eq!(
        s.snapshot().decide(ip("8.8.8.8")),
        Decision::Resolve {
            port: 0,
            next_hop: ip("10.0.1.1")
        }
    );
    s.apply(KernelEvent::Neighbour(neigh(10, "10.0.1.1", 9)));
    s.apply(KernelEvent::NeighbourRemoved {
        ifindex: 10,
        addr: ip("10.0.1.1"),
    });
    assert_eq!(
        s.snapshot().decide(ip("8.8.8.8")),
        Decision::Resolve {
            port: 0,
            next_hop: ip("10.0.1.1")
        }
    );
}

#[test]
fn static_routes_mix_in_win_for_their_prefix_and_next_hop_mac_overrides() {
    let statics = vec![
        StaticRoute {
            dst: ip("10.0.2.0"),
            prefix_len: 24,
            port: 0,
            gateway: None,
            mac: Some(MAC(0x77)),
        },
        StaticRoute {
            dst: ip("198.51.100.0"),
            prefix_len: 24,
            port: 1,
            gateway: Some(ip("10.0.2.9")),
            mac: None,
        },
    ];
    let mut s = FibState::new([(10, 0), (20, 1)], statics);
    s.load(
        vec![route("10.0.2.0", 24, None, 20, 0)],
        vec![neigh(20, "10.0.2.9", 9)],
    );
    let f = s.snapshot();
    assert_eq!(
        f.decide(ip("10.0.2.5")),
        Decision::Forward {
            port: 0,
            mac: MAC(0x77)
        }
    );
    assert_eq!(
        f.decide(ip("198.51.100.1")),
        Decision::Forward {
            port: 1,
            mac: MAC(9)
        }
    );
}

#[test]
fn at_most_per_hop_packets_wait_and_are_released_in_order_or_expire() {
    let mut w: NeighbourWait<u32> = NeighbourWait::new(3, 3, Nanos::from_millis(3000));
    let (a, b, c) = (ip("10.0.1.1"), ip("10.0.1.2"), ip("10.0.1.3"));
    // Nothing is evicted here (the wait's own tests cover a full table).
    let mut ev = Vec::new();
    assert!(matches!(
        w.hold(Nanos(0), 0, a, 1, &mut ev),
        Hold::HeldFirst
    ));
    assert!(matches!(w.hold(Nanos(1), 0, a, 2, &mut ev), Hold::Held));
    assert!(matches!(w.hold(Nanos(2), 0, a, 3, &mut ev), Hold::Held));
    assert!(
        matches!(w.hold(Nanos(3), 0, a, 4, &mut ev), Hold::Full(4)),
        "per-hop bound"
    );
    assert!(
        matches!(w.hold(Nanos(4), 1, a, 5, &mut ev), Hold::HeldFirst),
        "same address, other port"
    );
    assert!(matches!(
        w.hold(Nanos(5), 0, b, 6, &mut ev),
        Hold::HeldFirst
    ));
    assert_eq!(w.len(), 5);

    let mut s = state();
    s.load(vec![], vec![neigh(10, "10.0.1.1", 1)]);
    let mut out = Vec::new();
    w.release(&s.snapshot(), &mut out);
    assert_eq!(out, vec![(0, MAC(1), 1), (0, MAC(1), 2), (0, MAC(1), 3)]);
    assert_eq!(w.len(), 2, "port 1's packet and b's still wait");
    assert!(matches!(
        w.hold(Nanos(10), 0, c, 7, &mut ev),
        Hold::HeldFirst
    ));
    assert!(ev.is_empty());
    let mut gone = Vec::new();
    w.expire(Nanos::from_millis(2999), &mut gone);
    assert!(gone.is_empty());
    w.expire(Nanos::from_millis(3000) + Nanos(4), &mut gone);
    assert_eq!(gone, vec![5], "port 1's hop waited 3 s");
    w.expire(Nanos::from_millis(3000) + Nanos(10), &mut gone);
    assert_eq!(gone, vec![5, 6, 7]);
    assert!(w.is_empty());
}

fn addr(ifindex: u32, a: &str, len: u8) -> zl_netlink::KernelAddr {
    zl_netlink::KernelAddr {
        ifindex,
        addr: ip(a),
        prefix_len: len,
        broadcast: None,
    }
}

/// The interfaces' addresses follow RTM_NEWADDR / RTM_DELADDR into the snapshot, by port; an
/// interface that is not zlrouter's is left out.
#[test]
fn interface_addresses_follow_the_kernel_by_port() {
    let mut s = state();
    s.load_addresses(vec![
        addr(10, "10.0.1.1", 24),
        addr(10, "fe80::1", 64),
        addr(99, "192.0.2.1", 24),
    ]);
    assert!(s.apply(KernelEvent::AddrAdded(addr(10, "2001:db8:1::1", 64))));
    assert!(s.apply(KernelEvent::AddrAdded(addr(20, "10.0.2.1", 24))));
    let f = s.snapshot();
    assert_eq!(
        f.addresses(0),
        [
            (ip("10.0.1.1"), 24),
            (ip("fe80::1"), 64),
            (ip("2001:db8:1::1"), 64)
        ]
    );
    assert_eq!(f.addresses(1), [(ip("10.0.2.1"), 24)]);
    assert!(s.apply(KernelEvent::AddrRemoved(addr(20, "10.0.2.1", 24))));
    assert!(s.snapshot().addresses(1).is_empty());
}

/// The source of an error towards a host: the address whose prefix holds it, else a global
/// one (never IPv6 link-local while a global one exists), else any of its version.
#[test]
fn the_source_address_is_on_the_hosts_subnet_else_global() {
    let a = [
        (ip("10.0.1.1"), 24),
        (ip("10.0.9.1"), 24),
        (ip("fe80::1"), 64),
        (ip("2001:db8:1::1"), 64),
    ];
    let pick = |t: &str| zl_fib::pick_source(&a, ip(t));
    assert_eq!(pick("10.0.9.7"), Some(ip("10.0.9.1")));
    assert_eq!(pick("10.0.1.7"), Some(ip("10.0.1.1")));
    assert_eq!(
        pick("192.0.2.9"),
        Some(ip("10.0.1.1")),
        "first of the version"
    );
    assert_eq!(
        pick("2001:db8:7::2"),
        Some(ip("2001:db8:1::1")),
        "global over link-local"
    );
    assert_eq!(pick("fe80::9"), Some(ip("fe80::1")), "on-link");
    let only_ll = [(ip("fe80::1"), 64)];
    assert_eq!(
        zl_fib::pick_source(&only_ll, ip("2001:db8::2")),
        Some(ip("fe80::1"))
    );
    assert_eq!(zl_fib::pick_source(&only_ll, ip("10.0.0.1")), None);
}
