//! `[routing] source = "kernel"` end to end (Linux, root): zlrouter forwards with the
//! kernel's routes and neighbours, and no route or neighbour in its config.
//!
//! The lab of `zl_testkit::lab`, with the end hosts configured only with `ip addr` and a default
//! route via the router's address (their static neighbour entries flushed), addresses on the
//! router's interfaces (so the kernel has the connected routes and answers ARP / NDP for the
//! router), kernel forwarding off in the router's namespace. The first packets to a next hop
//! nobody has resolved yet wait in zlrouter's bounded neighbour queue while the kernel
//! resolves it (`routing.unres_qlen`). Offloads stay off on the lab's veths as in every lab
//! test (generic XDP hands AF_XDP the frame as it is, so a TSO super-frame or a partial
//! checksum would be forwarded as such).

use std::process::Command;

use zl_testkit::lab::{
    all_back, kernel_router, ping_df, run_in, sender_ip, stat, tcp_flow, tcp_sink, tools, tshark,
    Capture, Lab, Netns, SenderSpec, RECEIVER_IP,
};

/// The binary the lab runs (only the root package's tests know where Cargo built it).
const ZLROUTER: &str = env!("CARGO_BIN_EXE_zlrouter");

/// `ping` in `ns` (one-second waits, quiet) with `args`: (all answered, what it said).
fn ping(ns: &Netns, args: &[&str]) -> (bool, String) {
    let mut cmd = vec!["ping", "-n", "-q", "-W", "1"];
    cmd.extend_from_slice(args);
    run_in(ns, 20, &cmd)
}

/// What the ICMP tests drive (`.ci/run` installs them).
const ICMP_TOOLS: &[(&str, &str, &str)] = &[
    ("tracepath", "-V", "iputils-tracepath"),
    ("tshark", "-v", "tshark"),
    ("timeout", "--version", "coreutils"),
];

/// The lab with addresses on the router (IPv4 and IPv6) and hosts that know it only by its
/// address.
fn lab(test: &str) -> Option<Lab> {
    if !tools(test, &[("ping", "-V", "iputils-ping")]) {
        return None;
    }
    let lab = Lab::or_skip(ZLROUTER, test, &[SenderSpec::PLAIN])?;
    let (snd, rtr, rcv) = (&lab.senders[0], &lab.rtr, &lab.rcv);
    // DAD off before IPv6 comes up on the (already up) links, so their link-local addresses
    // are usable at once: the router's kernel solicits the neighbours zlrouter asks it for
    // from its link-local address, and sends nothing while that is tentative.
    for (ns, dev) in [(rtr, "r0"), (rtr, "rx"), (snd, "g0"), (rcv, "s0")] {
        ns.exec(&[
            "sysctl",
            "-qw",
            &format!("net.ipv6.conf.{dev}.accept_dad=0"),
        ])
        .unwrap();
        ns.exec(&[
            "sysctl",
            "-qw",
            &format!("net.ipv6.conf.{dev}.disable_ipv6=0"),
        ])
        .unwrap();
    }
    for dev in ["r0", "rx"] {
        rtr.wait_link_local(dev, std::time::Duration::from_secs(5))
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
    lab.start(TEST, &kernel_router(true).to_toml());
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
    assert_eq!(stat(&out, "totals.drops.no_route"), Some(0), "{out}");
    assert_eq!(stat(&out, "totals.drops.no_neighbour"), Some(0), "{out}");
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
    lab.start(TEST, &kernel_router(true).to_toml());
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
    let no_route = stat(&out, "totals.drops.no_route").unwrap();
    assert!(
        (2..=3).contains(&no_route),
        "the echoes to the removed route and before it: {out}"
    );
}

/// The router's ICMP errors, seen by real tools on an end host: `tracepath` shows the
/// router's hop (10.9.1.1, 2001:db8:1::1: its Time Exceeded, sourced from the ingress
/// interface's kernel address) before the receiver, over IPv4 and IPv6; `ping` to an
/// unrouted destination shows Destination Unreachable from the router. tshark reads the
/// sender's capture of those errors and of the frames the router forwarded with every
/// checksum verified (IPv4 header, ICMP, ICMPv6, UDP, TCP) and finds none bad. The config
/// gives `r0` no `mac`: the router's MAC there is the interface's own (set to one no config
/// names), on its errors and on the frames it forwards to the sender.
#[test]
fn tracepath_shows_the_router_and_unrouted_destinations_are_unreachable() {
    const TEST: &str = "tracepath_shows_the_router_and_unrouted_destinations_are_unreachable";
    if !tools(TEST, ICMP_TOOLS) {
        return;
    }
    let Some(mut lab) = lab(TEST) else {
        return;
    };
    const R0_MAC: &str = "02:00:00:09:01:aa";
    lab.rtr
        .ip(&["link", "set", "r0", "address", R0_MAC])
        .unwrap();
    let config = kernel_router(false).to_toml();
    assert!(!config.contains("02:00:00:09:01:01"));
    lab.start(TEST, &config);
    let snd = &lab.senders[0];
    let mut cap = Capture::start(snd, "g0", lab.dir.join("sender.pcapng"));
    all_back(snd, RECEIVER_IP, 2, &[]).expect("warm-up: the receiver resolved");
    all_back(snd, "2001:db8:100::2", 2, &["-6"]).expect("warm-up over IPv6");

    let (ok, text) = run_in(snd, 20, &["tracepath", "-n", "-m", "5", RECEIVER_IP]);
    assert!(ok, "tracepath: {text}");
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with("1:") && l.contains("10.9.1.1")),
        "hop 1 is the router's ingress address: {text}"
    );
    assert!(text.contains("reached"), "{text}");
    let (ok, text) = run_in(
        snd,
        20,
        &["tracepath", "-6", "-n", "-m", "5", "2001:db8:100::2"],
    );
    assert!(ok, "tracepath -6: {text}");
    assert!(
        text.lines()
            .any(|l| l.trim_start().starts_with("1:") && l.contains("2001:db8:1::1")),
        "hop 1 is the router's ingress IPv6 address: {text}"
    );
    assert!(text.contains("reached"), "{text}");

    let (ok, text) = ping(snd, &["-c", "1", "10.200.0.1"]);
    assert!(!ok, "{text}");
    let (_, text) = run_in(snd, 10, &["ping", "-n", "-c", "1", "-W", "1", "10.200.0.1"]);
    assert!(
        text.contains("From 10.9.1.1") && text.contains("Destination Net Unreachable"),
        "{text}"
    );
    let (_, text) = run_in(
        snd,
        10,
        &["ping", "-6", "-n", "-c", "1", "-W", "1", "2001:db8:99::1"],
    );
    assert!(
        text.contains("From 2001:db8:1::1") && text.contains("Destination unreachable: No route"),
        "{text}"
    );
    let file = cap.stop();

    let (status, out) = lab.stop_router();
    assert!(status.success(), "{out}");
    let sent = |k: &str| stat(&out, &format!("icmp.sent.{k}")).unwrap_or(0);
    assert!(sent("time_exceeded") >= 2, "{out}");
    assert!(sent("unreachable") >= 3, "{out}");
    assert_eq!(stat(&out, "icmp.suppressed"), Some(0), "{out}");

    // Every checksum tshark knows, verified; no bad one and no expert warning on any frame.
    let bad = tshark(
        &file,
        "ip.checksum.status == \"Bad\" || icmp.checksum.status == \"Bad\" \
         || icmpv6.checksum.status == \"Bad\" || udp.checksum.status == \"Bad\" \
         || tcp.checksum.status == \"Bad\" || _ws.expert.severity >= error",
        &[],
    );
    assert!(bad.is_empty(), "tshark found bad frames: {bad:#?}");
    // The router's errors, checked good: Time Exceeded and Unreachable, both versions.
    let errors = tshark(
        &file,
        &format!(
            "(icmp.type == 11 || icmp.type == 3) && ip.src == 10.9.1.1 && eth.src == {R0_MAC} \
             && icmp.checksum.status == \"Good\" && ip.checksum.status == \"Good\""
        ),
        &["icmp.type"],
    );
    // The outer type first (an error quoting an echo lists the quoted type after it).
    let outer = |t: &String| t.split(',').next().unwrap_or_default().to_owned();
    assert!(errors.iter().map(outer).any(|t| t == "11"), "{errors:?}");
    assert!(errors.iter().map(outer).any(|t| t == "3"), "{errors:?}");
    let errors6 = tshark(
        &file,
        &format!(
            "(icmpv6.type == 3 || icmpv6.type == 1) && ipv6.src == 2001:db8:1::1 \
             && eth.src == {R0_MAC} && icmpv6.checksum.status == \"Good\""
        ),
        &["icmpv6.type"],
    );
    assert!(errors6.iter().map(outer).any(|t| t == "3"), "{errors6:?}");
    assert!(errors6.iter().map(outer).any(|t| t == "1"), "{errors6:?}");
    // Frames the router forwarded (the receiver's echo replies and its Port Unreachable to
    // tracepath), checked good.
    let forwarded = tshark(
        &file,
        &format!(
            "eth.src == {R0_MAC} && ((ip.src == 10.9.100.2 && ip.checksum.status == \"Good\" \
              && icmp.checksum.status == \"Good\") \
             || (ipv6.src == 2001:db8:100::2 && icmpv6.checksum.status == \"Good\"))"
        ),
        &["ip.src", "ipv6.src"],
    );
    assert!(forwarded.len() >= 4, "{forwarded:?}");
    assert!(
        forwarded.iter().any(|l| l.starts_with("10.9.100.2")),
        "{forwarded:?}"
    );
    assert!(
        forwarded.iter().any(|l| l.contains("2001:db8:100::2")),
        "{forwarded:?}"
    );
}

/// Path MTU discovery through the router: with the egress (and the receiver's link) at MTU
/// 1400, read from the interface at start, a 1500-octet DF echo gets Fragmentation Needed
/// (mtu 1400) from the router and an IPv6 one Packet Too Big; tracepath reports pmtu 1400;
/// a TCP transfer across the hop completes.
#[test]
fn a_smaller_egress_mtu_gets_frag_needed_and_packet_too_big() {
    const TEST: &str = "a_smaller_egress_mtu_gets_frag_needed_and_packet_too_big";
    if !tools(TEST, ICMP_TOOLS) {
        return;
    }
    let Some(mut lab) = lab(TEST) else {
        return;
    };
    lab.rtr.ip(&["link", "set", "rx", "mtu", "1400"]).unwrap();
    lab.rcv.ip(&["link", "set", "s0", "mtu", "1400"]).unwrap();
    lab.start(TEST, &kernel_router(true).to_toml());
    let snd = &lab.senders[0];
    all_back(snd, RECEIVER_IP, 2, &[]).expect("warm-up: the receiver resolved");
    all_back(snd, "2001:db8:100::2", 2, &["-6"]).expect("warm-up over IPv6");
    all_back(snd, RECEIVER_IP, 2, &["-M", "do", "-s", "1372"]).expect("1400 octets pass");

    let (ok, text) = ping_df(snd, RECEIVER_IP, 1472);
    assert!(!ok, "{text}");
    assert!(
        text.contains("From 10.9.1.1") && text.contains("Frag needed and DF set (mtu = 1400)"),
        "{text}"
    );
    let (ok, text) = ping_df(snd, "2001:db8:100::2", 1452);
    assert!(!ok, "{text}");
    assert!(
        text.contains("From 2001:db8:1::1") && text.contains("Packet too big: mtu=1400"),
        "{text}"
    );
    // The sender's kernel learnt the path MTU; tracepath finds it along the path.
    let (ok, text) = run_in(snd, 20, &["tracepath", "-n", "-m", "5", RECEIVER_IP]);
    assert!(ok && text.contains("pmtu 1400"), "tracepath: {text}");

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
    assert!(stat(&out, "totals.drops.too_big").unwrap() >= 2, "{out}");
    assert!(stat(&out, "icmp.sent.too_big").unwrap() >= 2, "{out}");
}

/// A next hop that never resolves: its packets wait in zlrouter's queue while the kernel
/// tries ARP / NDP, then (after 3 s, as the kernel gives up) are dropped as `no_neighbour`
/// with Destination Host Unreachable (ICMPv6 Address Unreachable) to their sender, as a
/// Linux router sends when neighbour resolution fails. A blackhole route drops silently
/// (`no_route`, no error), as the kernel's does.
#[test]
fn a_next_hop_that_never_resolves_gets_host_unreachable() {
    const TEST: &str = "a_next_hop_that_never_resolves_gets_host_unreachable";
    let Some(mut lab) = lab(TEST) else {
        return;
    };
    lab.rtr
        .ip(&["route", "add", "10.77.0.0/16", "via", "10.9.100.99"])
        .unwrap();
    lab.rtr
        .ip(&[
            "-6",
            "route",
            "add",
            "2001:db8:77::/48",
            "via",
            "2001:db8:100::99",
        ])
        .unwrap();
    lab.rtr
        .ip(&["route", "add", "blackhole", "10.88.0.0/16"])
        .unwrap();
    lab.start(TEST, &kernel_router(true).to_toml());
    let snd = &lab.senders[0];
    let (ok, text) = run_in(snd, 10, &["ping", "-n", "-c", "1", "-W", "1", "10.88.0.1"]);
    assert!(
        !ok && !text.contains("From "),
        "blackholed silently: {text}"
    );
    let (ok, text) = run_in(snd, 15, &["ping", "-n", "-c", "1", "-W", "6", "10.77.0.2"]);
    assert!(!ok, "{text}");
    assert!(
        text.contains("From 10.9.1.1") && text.contains("Destination Host Unreachable"),
        "{text}"
    );
    let (ok, text) = run_in(
        snd,
        15,
        &["ping", "-6", "-n", "-c", "1", "-W", "6", "2001:db8:77::2"],
    );
    assert!(!ok, "{text}");
    assert!(
        text.contains("From 2001:db8:1::1") && text.contains("Address unreachable"),
        "{text}"
    );
    let (status, out) = lab.stop_router();
    assert!(status.success(), "{out}");
    assert_eq!(stat(&out, "totals.drops.no_neighbour"), Some(2), "{out}");
    assert_eq!(stat(&out, "totals.drops.no_route"), Some(1), "{out}");
    assert_eq!(stat(&out, "icmp.sent.unreachable"), Some(2), "{out}");
}

/// What one engine did in [`same_behaviour_on_one_loop_and_two_receive_workers`]: its final
/// JSON and standard error.
fn run_engine(test: &str, rx_workers: u32) -> Option<String> {
    let mut lab = lab(test)?;
    if !tools(test, ICMP_TOOLS) {
        return None;
    }
    lab.rcv
        .ip(&["addr", "add", "10.77.0.2/16", "dev", "lo"])
        .unwrap();
    let config = kernel_router(true)
        .set("run", "rx_workers", rx_workers)
        .to_toml();
    lab.start(test, &config);
    let (snd, rcv) = (&lab.senders[0], &lab.rcv);
    let engine = format!("rx_workers = {rx_workers}");
    // The first echoes wait for their next hop's MAC in the receiving thread's wait.
    all_back(snd, RECEIVER_IP, 5, &[]).expect(&engine);
    all_back(rcv, &sender_ip(0), 5, &[]).expect(&engine);
    all_back(snd, "2001:db8:100::2", 5, &["-6"]).expect(&engine);
    let (ok, text) = run_in(snd, 20, &["tracepath", "-n", "-m", "5", RECEIVER_IP]);
    assert!(
        ok && text.contains("10.9.1.1") && text.contains("reached"),
        "{engine}: tracepath through the router: {text}"
    );
    lab.rtr
        .ip(&["route", "add", "10.77.0.0/16", "via", RECEIVER_IP])
        .unwrap();
    let (ok, text) = ping(snd, &["-c", "1", "10.77.0.2"]);
    assert!(ok, "{engine}: after ip route add: {text}");
    lab.rtr.ip(&["route", "del", "10.77.0.0/16"]).unwrap();
    let (ok, text) = ping(snd, &["-c", "1", "10.77.0.2"]);
    assert!(!ok, "{engine}: after ip route del: {text}");
    let (status, out) = lab.stop_router();
    assert!(status.success(), "{engine}: {out}");
    Some(out)
}

/// The same kernel-routing config on the single-thread loop and on two receive workers: both
/// hold the first packets of a next hop while the kernel resolves it, answer tracepath's
/// probes with Time Exceeded, follow `ip route add` / `del`, and end with the same fates.
#[test]
fn same_behaviour_on_one_loop_and_two_receive_workers() {
    const TEST: &str = "same_behaviour_on_one_loop_and_two_receive_workers";
    let Some(single) = run_engine(TEST, 0) else {
        return;
    };
    let Some(threaded) = run_engine(TEST, 2) else {
        return;
    };
    for path in [
        "totals.drops.no_route",
        "totals.drops.no_neighbour",
        "totals.drops.parse_error",
        "icmp.sent.unreachable",
    ] {
        assert_eq!(
            stat(&single, path),
            stat(&threaded, path),
            "{path}\n--- rx_workers = 0:\n{single}\n--- rx_workers = 2:\n{threaded}"
        );
    }
    assert_eq!(
        stat(&threaded, "totals.drops.no_neighbour"),
        Some(0),
        "{threaded}"
    );
    for out in [&single, &threaded] {
        assert!(
            stat(out, "icmp.sent.time_exceeded").unwrap_or(0) >= 1,
            "{out}"
        );
        assert!(stat(out, "fib.routes").is_some(), "{out}");
    }
}
