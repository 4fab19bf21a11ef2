//! The follower thread against a real kernel (root; skips otherwise, fails with
//! ZLR_REQUIRE_ENV set): `ip route` changes reach a reader within a second, and a next hop
//! the data plane asks for is resolved by the kernel. Namespaces are named `zlfb-...`.

use std::net::IpAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use zl_fib::{Decision, FibFollower, FibReader, FibState, ResolveQueue};
use zl_testkit::netns::{is_root, skip, Netns};

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// Refreshes `r` until `dst`'s decision is `want`, for at most `within`; the time it took.
fn until(r: &mut FibReader, dst: &str, want: Decision, within: Duration) -> Duration {
    let start = Instant::now();
    loop {
        r.refresh();
        if r.fib().decide(ip(dst)) == want {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < within,
            "{dst}: {:?}, not {want:?}, after {within:?}",
            r.fib().decide(ip(dst))
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn ip_route_changes_and_resolved_neighbours_reach_the_reader_within_a_second() {
    const TEST: &str = "ip_route_changes_and_resolved_neighbours_reach_the_reader_within_a_second";
    if !is_root() {
        skip(TEST, "needs root (network namespaces)");
        return;
    }
    zl_testkit::netns::set_prefix("zlfb");
    let (r, h) = match Netns::create("r").and_then(|r| Ok((r, Netns::create("h")?))) {
        Ok(x) => x,
        Err(e) => return skip(TEST, &format!("cannot create namespaces: {e}")),
    };
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
    r.ip(&["link", "set", "r0", "up"]).unwrap();
    h.ip(&["addr", "add", "10.8.0.2/24", "dev", "h0"]).unwrap();
    h.ip(&["link", "set", "h0", "up"]).unwrap();
    // The kernel drops a probe sent before r0 has its carrier and gives up after three.
    r.wait_oper_up("r0", Duration::from_secs(5)).unwrap();
    h.wait_oper_up("h0", Duration::from_secs(5)).unwrap();
    let h_mac = zl_wire::MacAddr(h.mac("h0").unwrap());
    let ifindex: u32 = r
        .exec(&["cat", "/sys/class/net/r0/ifindex"])
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let rname = r.name().to_owned();
    r.run_in(move || {
        let resolve = ResolveQueue::new(64);
        let (handle, follower) =
            FibFollower::start(FibState::new([(ifindex, 0)], vec![]), resolve.clone()).unwrap();
        let mut reader = handle.reader();
        // The connected route, from the start-up dump, with no route configured.
        assert_eq!(
            reader.fib().decide(ip("10.8.0.2")),
            Decision::Resolve {
                port: 0,
                next_hop: ip("10.8.0.2")
            }
        );
        assert_eq!(reader.fib().decide(ip("10.50.1.1")), Decision::NoRoute);
        // The data plane asks; the kernel resolves; the MAC arrives in a snapshot.
        resolve.request(0, ip("10.8.0.2"));
        let fwd = Decision::Forward {
            port: 0,
            mac: h_mac,
        };
        until(&mut reader, "10.8.0.2", fwd, Duration::from_secs(3));

        let ip_in = |args: &[&str]| {
            let st = Command::new("ip")
                .args(["-n", &rname])
                .args(args)
                .status()
                .unwrap();
            assert!(st.success(), "ip {args:?}");
        };
        ip_in(&["route", "add", "10.50.0.0/16", "via", "10.8.0.2"]);
        let took = until(&mut reader, "10.50.1.1", fwd, Duration::from_secs(1));
        eprintln!("route add seen after {took:?}");
        ip_in(&["route", "del", "10.50.0.0/16"]);
        let took = until(
            &mut reader,
            "10.50.1.1",
            Decision::NoRoute,
            Duration::from_secs(1),
        );
        eprintln!("route del seen after {took:?}");
        ip_in(&["route", "add", "blackhole", "10.50.0.0/16"]);
        until(
            &mut reader,
            "10.50.1.1",
            Decision::Blackhole,
            Duration::from_secs(1),
        );
        drop(follower);
    })
    .unwrap();
}
