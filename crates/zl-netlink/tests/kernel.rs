//! Dumps and events against a real kernel: throw-away namespaces changed with `ip`
//! (needs root; skips otherwise, fails with ZLR_REQUIRE_ENV set). Namespaces are named
//! `zlnl-...`.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use zl_netlink::{Follower, Groups, KernelEvent, NeighbourState, RouteKind, Rtnl};
use zl_testkit::netns::{is_root, skip, Netns};

/// A guard against waiting forever for an event; never a pass criterion.
const GIVE_UP_AFTER: Duration = Duration::from_secs(5);

fn ns(test: &str, tag: &str) -> Option<Netns> {
    if !is_root() {
        skip(test, "needs root (network namespaces)");
        return None;
    }
    zl_testkit::netns::set_prefix("zlnl");
    match Netns::create(tag) {
        Ok(n) => Some(n),
        Err(e) => {
            skip(test, &format!("cannot create a namespace: {e}"));
            None
        }
    }
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// Waits for the first event `pick` accepts; a failure lists the events that came instead.
fn wait_for<T>(f: &mut Follower, mut pick: impl FnMut(&KernelEvent) -> Option<T>) -> T {
    let deadline = Instant::now() + GIVE_UP_AFTER;
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        for e in f.next(Duration::from_millis(100)).unwrap() {
            if let Some(t) = pick(&e) {
                return t;
            }
            seen.push(e);
        }
    }
    panic!("no matching event within {GIVE_UP_AFTER:?}; the events seen: {seen:#?}");
}

#[test]
fn addresses_and_routes_are_dumped_and_followed() {
    let Some(n) = ns("addresses_and_routes_are_dumped_and_followed", "ar") else {
        return;
    };
    // (No dummy module on every kernel: a veth pair with both ends up has a carrier too.)
    n.ip(&["link", "add", "d0", "type", "veth", "peer", "name", "d1"])
        .unwrap();
    n.ip(&["link", "set", "d1", "up"]).unwrap();
    n.ip(&["link", "set", "d0", "up"]).unwrap();
    n.ip(&["addr", "add", "10.9.1.1/24", "dev", "d0"]).unwrap();
    n.ip(&[
        "-6",
        "addr",
        "add",
        "2001:db8:9::1/64",
        "dev",
        "d0",
        "nodad",
    ])
    .unwrap();
    n.ip(&["route", "add", "10.9.0.0/16", "via", "10.9.1.2"])
        .unwrap();
    n.ip(&["route", "add", "blackhole", "10.66.0.0/16"])
        .unwrap();
    let ifindex: u32 = n
        .exec(&["cat", "/sys/class/net/d0/ifindex"])
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    n.run_in(move || {
        let mut follow = Follower::subscribe(Groups::ALL).unwrap();
        let mut rtnl = Rtnl::open().unwrap();
        let addrs = rtnl.dump_addresses().unwrap();
        let a4 = addrs
            .iter()
            .find(|a| a.addr == ip("10.9.1.1"))
            .expect("v4 address");
        assert_eq!((a4.ifindex, a4.prefix_len), (ifindex, 24));
        assert_eq!(a4.broadcast, None, "`ip addr add` without `brd` sets none");
        assert!(addrs
            .iter()
            .any(|a| a.addr == ip("2001:db8:9::1") && a.prefix_len == 64));
        assert!(addrs.iter().any(|a| a.addr == ip("127.0.0.1")));

        let routes = rtnl.dump_routes().unwrap();
        let connected = routes
            .iter()
            .find(|r| r.dst == ip("10.9.1.0") && r.prefix_len == 24)
            .expect("the connected route of 10.9.1.1/24");
        assert_eq!((connected.gateway, connected.oif), (None, ifindex));
        let via = routes.iter().find(|r| r.dst == ip("10.9.0.0")).unwrap();
        assert_eq!(via.gateway, Some(ip("10.9.1.2")));
        assert_eq!(
            (via.kind, via.prefix_len, via.oif),
            (RouteKind::Unicast, 16, ifindex)
        );
        let bh = routes.iter().find(|r| r.dst == ip("10.66.0.0")).unwrap();
        assert_eq!(bh.kind, RouteKind::Blackhole);
        assert!(
            routes.iter().all(|r| r.dst != ip("10.9.1.1")),
            "local-table routes are not in the main table"
        );
        assert!(routes
            .iter()
            .any(|r| r.dst == ip("2001:db8:9::") && r.prefix_len == 64));

        // Changes made after the subscription arrive as events, in order.
        let ns_ip = |args: &[&str]| {
            let st = std::process::Command::new("ip")
                .args(args)
                .status()
                .unwrap();
            assert!(st.success(), "ip {args:?}");
        };
        ns_ip(&["route", "add", "default", "via", "10.9.1.3"]);
        let r = wait_for(&mut follow, |e| match e {
            KernelEvent::RouteAdded(r) if r.prefix_len == 0 && r.dst.is_ipv4() => Some(r.clone()),
            _ => None,
        });
        assert_eq!(
            (r.dst, r.gateway, r.oif),
            (ip("0.0.0.0"), Some(ip("10.9.1.3")), ifindex)
        );
        ns_ip(&["route", "del", "10.9.0.0/16"]);
        wait_for(&mut follow, |e| match e {
            KernelEvent::RouteRemoved(r) if r.dst == ip("10.9.0.0") => Some(()),
            _ => None,
        });
        ns_ip(&[
            "-6",
            "route",
            "add",
            "2001:db8:77::/48",
            "via",
            "2001:db8:9::5",
        ]);
        let r6 = wait_for(&mut follow, |e| match e {
            KernelEvent::RouteAdded(r) if r.dst == ip("2001:db8:77::") => Some(r.clone()),
            _ => None,
        });
        assert_eq!((r6.prefix_len, r6.gateway), (48, Some(ip("2001:db8:9::5"))));
        ns_ip(&["addr", "add", "10.9.2.1/24", "brd", "+", "dev", "d0"]);
        let a = wait_for(&mut follow, |e| match e {
            KernelEvent::AddrAdded(a) if a.addr == ip("10.9.2.1") => Some(a.clone()),
            _ => None,
        });
        assert_eq!(a.broadcast, Some("10.9.2.255".parse().unwrap()));
        ns_ip(&["addr", "del", "10.9.2.1/24", "dev", "d0"]);
        wait_for(&mut follow, |e| match e {
            KernelEvent::AddrRemoved(a) if a.addr == ip("10.9.2.1") => Some(()),
            _ => None,
        });
    })
    .unwrap();
}

#[test]
fn a_neighbour_the_kernel_is_asked_to_resolve_arrives_with_its_mac() {
    let Some(r) = ns(
        "a_neighbour_the_kernel_is_asked_to_resolve_arrives_with_its_mac",
        "r",
    ) else {
        return;
    };
    let h = Netns::create("h").unwrap();
    r.ip(&[
        "link",
        "add",
        "r0",
        "type",
        "veth",
        "peer",
        "name",
        "h0",
        "netns",
        h.name(),
    ])
    .unwrap();
    r.ip(&["addr", "add", "10.8.0.1/24", "dev", "r0"]).unwrap();
    r.ip(&[
        "-6",
        "addr",
        "add",
        "2001:db8:8::1/64",
        "dev",
        "r0",
        "nodad",
    ])
    .unwrap();
    // The kernel solicits a neighbour it is asked for from r0's link-local address only once
    // that has passed DAD (1-2 s, against the three probes a second apart it gives the entry):
    // r0's link-local is made without DAD.
    r.exec(&["sysctl", "-qw", "net.ipv6.conf.r0.accept_dad=0"])
        .unwrap();
    r.ip(&["link", "set", "r0", "up"]).unwrap();
    h.ip(&["addr", "add", "10.8.0.2/24", "dev", "h0"]).unwrap();
    h.ip(&[
        "-6",
        "addr",
        "add",
        "2001:db8:8::2/64",
        "dev",
        "h0",
        "nodad",
    ])
    .unwrap();
    h.ip(&["link", "set", "h0", "up"]).unwrap();
    // A probe sent before the link watcher has given r0 its carrier is dropped, and the
    // kernel gives up on the entry after three: ask only once both ends are up.
    r.wait_oper_up("r0", GIVE_UP_AFTER).unwrap();
    h.wait_oper_up("h0", GIVE_UP_AFTER).unwrap();
    r.wait_link_local("r0", GIVE_UP_AFTER).unwrap();
    let h_mac = h.mac("h0").unwrap();
    let ifindex: u32 = r
        .exec(&["cat", "/sys/class/net/r0/ifindex"])
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    r.run_in(move || {
        let mut follow = Follower::subscribe(Groups {
            neighbours: true,
            ..Groups::default()
        })
        .unwrap();
        let mut rtnl = Rtnl::open().unwrap();
        for target in [ip("10.8.0.2"), ip("2001:db8:8::2")] {
            assert!(
                rtnl.dump_neighbours()
                    .unwrap()
                    .iter()
                    .all(|n| n.addr != target),
                "no entry before the request"
            );
            rtnl.resolve_neighbour(ifindex, target).unwrap();
            let n = wait_for(&mut follow, |e| match e {
                KernelEvent::Neighbour(n) if n.addr == target && n.state.is_usable() => {
                    Some(n.clone())
                }
                _ => None,
            });
            assert_eq!((n.ifindex, n.mac), (ifindex, Some(h_mac)), "{target}");
            assert_eq!(n.state, NeighbourState::Usable);
            let dumped = rtnl.dump_neighbours().unwrap();
            assert!(dumped
                .iter()
                .any(|d| d.addr == target && d.mac == Some(h_mac)));
        }
        // Nobody answers for .99: the entry goes INCOMPLETE, then FAILED, never with a MAC.
        rtnl.resolve_neighbour(ifindex, ip("10.8.0.99")).unwrap();
        let n = wait_for(&mut follow, |e| match e {
            KernelEvent::Neighbour(n) if n.addr == ip("10.8.0.99") => Some(n.clone()),
            _ => None,
        });
        assert_eq!(n.mac, None);
        assert!(matches!(
            n.state,
            NeighbourState::Incomplete | NeighbourState::Failed
        ));
    })
    .unwrap();
}
