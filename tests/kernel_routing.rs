//! `[routing] source = "kernel"` end to end (Linux, root): zlrouter forwards with the
//! kernel's routes and neighbours, and no route or neighbour in its config.
//!
//! The lab of `tests/netns`, with the end hosts configured only with `ip addr` and a default
//! route via the router's address (their static neighbour entries flushed), addresses on the
//! router's interfaces (so the kernel has the connected routes and answers ARP / NDP for the
//! router), kernel forwarding off in the router's namespace. The first packets to a next hop
//! nobody has resolved yet wait in zlrouter's bounded neighbour queue while the kernel
//! resolves it (`routing.unres_qlen`). Offloads stay off on the lab's veths as in every lab
//! test (generic XDP hands AF_XDP the frame as it is, so a TSO super-frame or a partial
//! checksum would be forwarded as such).

mod netns;

use std::process::Command;

use netns::{sender_ip, table_value, tcp_flow, tcp_sink, Lab, SenderSpec, RECEIVER_IP};

fn ping(ns: &netns::Netns, args: &[&str]) -> (bool, String) {
    let out = Command::new("ip")
        .args(["netns", "exec", ns.name(), "ping", "-n", "-q", "-W", "1"])
        .args(args)
        .output()
        .expect("run ping");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

fn all_back(ns: &netns::Netns, to: &str, count: u32, extra: &[&str]) -> Result<(), String> {
    let c = count.to_string();
    let mut args = vec!["-i", "0.1", "-c", &c];
    args.extend_from_slice(extra);
    args.push(to);
    let (ok, text) = ping(ns, &args);
    if ok && text.contains(&format!("{count} received")) {
        Ok(())
    } else {
        Err(format!("ping {to}: {text}"))
    }
}

fn kernel_config() -> String {
    "[run]\npool_buffers = 65536\n\n\
     [routing]\nsource = \"kernel\"\nunres_qlen = 8\n\n\
     [[ports]]\nname = \"r0\"\nkind = \"af-xdp\"\nmac = \"02:00:00:09:01:01\"\naf_xdp = { ifname = \"r0\" }\n\n\
     [[ports]]\nname = \"rx\"\nkind = \"af-xdp\"\nmac = \"02:00:00:09:64:01\"\naf_xdp = { ifname = \"rx\" }\n\n\
     [qos]\nlink_rate_bps = 1_000_000_000\n\
     [[qos.classes]]\nname = \"be\"\nweight = 1\nmax_packets = 1000\n"
        .to_owned()
}

/// The lab with addresses on the router (IPv4 and IPv6) and hosts that know it only by its
/// address.
fn lab(test: &str) -> Option<Lab> {
    if !Command::new("ping")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        netns::skip(test, "needs ping (iputils-ping)");
        return None;
    }
    let lab = Lab::or_skip(test, &[SenderSpec::PLAIN])?;
    let (snd, rtr, rcv) = (&lab.senders[0], &lab.rtr, &lab.rcv);
    for (ns, dev) in [(rtr, "r0"), (rtr, "rx"), (snd, "g0"), (rcv, "s0")] {
        ns.exec(&[
            "sysctl",
            "-qw",
            &format!("net.ipv6.conf.{dev}.disable_ipv6=0"),
        ])
        .unwrap();
        ns.exec(&[
            "sysctl",
            "-qw",
            &format!("net.ipv6.conf.{dev}.accept_dad=0"),
        ])
        .unwrap();
    }
    rtr.ip(&["addr", "add", "10.9.1.1/24", "dev", "r0"])
        .unwrap();
    rtr.ip(&["addr", "add", "10.9.100.1/24", "dev", "rx"])
        .unwrap();
    rtr.ip(&[
        "-6",
        "addr",
        "add",
        "2001:db8:1::1/64",
        "dev",
        "r0",
        "nodad",
    ])
    .unwrap();
    rtr.ip(&[
        "-6",
        "addr",
        "add",
        "2001:db8:100::1/64",
        "dev",
        "rx",
        "nodad",
    ])
    .unwrap();
    rtr.exec(&["sysctl", "-qw", "net.ipv6.conf.all.forwarding=0"])
        .unwrap();
    snd.ip(&[
        "-6",
        "addr",
        "add",
        "2001:db8:1::2/64",
        "dev",
        "g0",
        "nodad",
    ])
    .unwrap();
    snd.ip(&["-6", "route", "add", "default", "via", "2001:db8:1::1"])
        .unwrap();
    rcv.ip(&[
        "-6",
        "addr",
        "add",
        "2001:db8:100::2/64",
        "dev",
        "s0",
        "nodad",
    ])
    .unwrap();
    rcv.ip(&["-6", "route", "add", "default", "via", "2001:db8:100::1"])
        .unwrap();
    snd.ip(&["neigh", "flush", "dev", "g0"]).unwrap();
    rcv.ip(&["neigh", "flush", "dev", "s0"]).unwrap();
    Some(lab)
}

#[test]
fn kernel_routes_and_neighbours_forward_both_ways_v4_v6_and_tcp() {
    const TEST: &str = "kernel_routes_and_neighbours_forward_both_ways_v4_v6_and_tcp";
    let Some(mut lab) = lab(TEST) else {
        return;
    };
    lab.start(TEST, &kernel_config());
    let (snd, rcv) = (&lab.senders[0], &lab.rcv);
    // The very first echo goes to a next hop (the receiver) nobody has resolved: it waits in
    // zlrouter's queue while the kernel resolves it, and is delivered (5 of 5).
    all_back(snd, RECEIVER_IP, 5, &[]).expect("sender -> receiver");
    all_back(rcv, &sender_ip(0), 5, &[]).expect("receiver -> sender");
    all_back(snd, "10.9.100.1", 2, &[]).expect("the router's own address (kernel)");
    all_back(snd, "2001:db8:100::2", 5, &["-6"]).expect("IPv6 sender -> receiver");
    all_back(rcv, "2001:db8:1::2", 5, &["-6"]).expect("IPv6 receiver -> sender");
    all_back(snd, "2001:db8:1::1", 2, &["-6"]).expect("the router's own IPv6 address");

    // A TCP transfer through the router.
    let sink = tcp_sink(&lab, 5201, 1);
    let flow = tcp_flow(&lab, 0, 5201, "cubic", 1.0)
        .join()
        .unwrap()
        .unwrap();
    let got = sink.join().unwrap().unwrap();
    assert!(
        got[0] > 100_000,
        "TCP delivered {} bytes ({flow:?})",
        got[0]
    );

    let (status, out) = lab.stop_router();
    assert!(status.success(), "{out}");
    assert_eq!(table_value(&out, "received", "no_route"), Some(0), "{out}");
    assert_eq!(
        table_value(&out, "received", "no_neighbour"),
        Some(0),
        "{out}"
    );
}

#[test]
fn ip_route_add_and_del_change_forwarding_at_once_without_loss_elsewhere() {
    const TEST: &str = "ip_route_add_and_del_change_forwarding_at_once_without_loss_elsewhere";
    let Some(mut lab) = lab(TEST) else {
        return;
    };
    // A network behind the receiver, reachable only through a route the test adds.
    lab.rcv
        .ip(&["addr", "add", "10.77.0.2/16", "dev", "lo"])
        .unwrap();
    lab.start(TEST, &kernel_config());
    let snd = &lab.senders[0];
    all_back(snd, RECEIVER_IP, 2, &[]).expect("warm-up: the receiver resolved");
    let (ok, _) = ping(snd, &["-c", "1", "10.77.0.2"]);
    assert!(!ok, "no route to 10.77.0.0/16 yet");

    // Pings to the receiver run all along: none may be lost while routes change.
    let steady = {
        let name = snd.name().to_owned();
        std::thread::spawn(move || {
            Command::new("ip")
                .args(["netns", "exec", &name, "ping", "-n", "-q", "-W", "1"])
                .args(["-i", "0.05", "-c", "40", RECEIVER_IP])
                .output()
        })
    };
    lab.rtr
        .ip(&["route", "add", "10.77.0.0/16", "via", RECEIVER_IP])
        .unwrap();
    // Sent right after the change, answered within its 1 s wait: the route took effect
    // within a second, with no restart.
    let (ok, text) = ping(snd, &["-c", "1", "10.77.0.2"]);
    assert!(ok, "after ip route add: {text}");
    lab.rtr.ip(&["route", "del", "10.77.0.0/16"]).unwrap();
    let (ok, text) = ping(snd, &["-c", "2", "-i", "0.2", "10.77.0.2"]);
    assert!(!ok, "after ip route del the prefix is unreachable: {text}");
    let steady = steady.join().unwrap().unwrap();
    let steady = String::from_utf8_lossy(&steady.stdout);
    assert!(
        steady.contains("40 received"),
        "pings to the receiver lost: {steady}"
    );

    let (status, out) = lab.stop_router();
    assert!(status.success(), "{out}");
    let no_route = table_value(&out, "received", "no_route").unwrap();
    assert!(
        (2..=3).contains(&no_route),
        "the echoes to the removed route and before it: {out}"
    );
}
