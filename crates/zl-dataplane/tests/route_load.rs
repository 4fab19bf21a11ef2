//! A large static table loads in linear work (a loader that re-sorts the whole list after
//! every route takes 13 s for 120 k routes). The bound is on the table's own
//! count of entry stores, not on wall-clock time.

use std::net::{IpAddr, Ipv4Addr};

use zl_dataplane::config::Forwarding;
use zl_dataplane::RouterConfig;

const ROUTES: u32 = 200_000;

/// Two sink ports and `routes` routes: /24s from 1.0.0.0/24 on, every 16th a /28
/// (`zl_testkit::config::route_table_toml`).
fn config(routes: u32) -> String {
    zl_testkit::config::route_table_toml(routes)
}

#[test]
fn two_hundred_thousand_routes_load_in_linear_work() {
    let cfg = RouterConfig::from_toml(&config(ROUTES)).unwrap();
    cfg.validate().unwrap();
    let Forwarding::Router(table) = cfg.forwarding().unwrap() else {
        panic!("router mode");
    };
    assert_eq!(table.len(), ROUTES as usize);
    let (v4, _) = table.stats();
    // A /24 is one root entry; a /28 splits its /24 into a group (256 stores plus the
    // pointer) and sets 16 entries. Linear: about 17 stores a route on average here.
    let bound = u64::from(ROUTES) * 2 + u64::from(ROUTES / 16) * (256 + 1 + 16);
    assert!(
        v4.entry_writes <= bound,
        "{} entry stores for {ROUTES} routes (bound {bound})",
        v4.entry_writes
    );
    assert_eq!(v4.groups_in_use, (ROUTES / 16) as usize);
    let at = |s: &str| table.lookup(s.parse::<IpAddr>().unwrap()).map(|n| n.port);
    assert_eq!(at("1.0.1.9"), Some(1), "route 1: a /24 to port b");
    assert_eq!(
        at("1.0.0.17"),
        Some(0),
        "route 0: the /28 1.0.0.16/28 to port a"
    );
    assert_eq!(at("1.0.0.1"), None, "outside the /28, no /24 for route 0");
    let last = ROUTES - 1;
    let a = Ipv4Addr::new(1 + (last >> 16) as u8, (last >> 8) as u8, last as u8, 200);
    assert_eq!(
        table.lookup(a.into()).map(|n| n.port),
        Some((last % 2) as u16)
    );
}

#[test]
fn a_duplicate_prefix_is_refused_with_its_key() {
    let text = format!(
        "{}[[routes]]\nprefix = \"1.0.1.0/24\"\nport = \"a\"\nnext_hop_mac = \"02:00:00:00:00:01\"\n",
        config(3)
    );
    let err = RouterConfig::from_toml(&text)
        .unwrap()
        .validate()
        .unwrap_err();
    assert!(err.to_string().contains("routes[3].prefix"), "{err}");
}

/// The same prefix written with host bits set (`1.0.1.77/24` is `1.0.1.0/24`) is the same
/// route, refused by `validate`, which checks the routes without building the table; the
/// build itself names it the same way.
#[test]
fn a_duplicate_with_host_bits_is_refused_by_validate_and_build_alike() {
    let text = format!(
        "{}[[routes]]\nprefix = \"1.0.1.77/24\"\nport = \"a\"\nnext_hop_mac = \"02:00:00:00:00:01\"\n",
        config(3)
    );
    let cfg = RouterConfig::from_toml(&text).unwrap();
    let err = cfg.validate().unwrap_err();
    assert!(err.to_string().contains("routes[3].prefix"), "{err}");
    let err = cfg.forwarding().unwrap_err();
    assert!(err.to_string().contains("routes[3].prefix"), "{err}");
    // IPv6 likewise, and a different length is a different route.
    let v6 = |p: &str| {
        format!(
            "[[routes]]\nprefix = \"{p}\"\nport = \"b\"\nnext_hop_mac = \"02:00:00:00:00:02\"\n"
        )
    };
    let text = format!(
        "{}{}{}{}",
        config(1),
        v6("2001:db8::/32"),
        v6("2001:db8::/48"),
        v6("2001:db8:0:0:1::/32")
    );
    let err = RouterConfig::from_toml(&text)
        .unwrap()
        .validate()
        .unwrap_err();
    assert!(err.to_string().contains("routes[3].prefix"), "{err}");
}
