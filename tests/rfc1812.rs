//! RFC 1812 forwarding edge cases with `[routing] source = "kernel"` (Linux, root), on the
//! lab of `zl_testkit::lab` set up as `tests/kernel_routing.rs` does: addresses on the router's
//! interfaces added without `brd` (as the README's quick start does), hosts that know the
//! router only by its address, kernel forwarding off in the router's namespace.
//!
//! Each case is read off the wire: tshark captures the sender's link (`g0`), and the router's
//! final counters say where each packet went. Crafted frames (spoofed sources, fragments,
//! broadcast destinations, a scan) leave the sender through an `AF_PACKET` socket of a
//! thread in its namespace, addressed to the router's MAC. The checks:
//! - no ICMP error to a source that names no single host (the ingress subnet's network and
//!   broadcast addresses, another port's broadcast, the router's own addresses, 0.0.0.0/8),
//!   nor about a non-initial fragment or a link-layer broadcast, while a host's own TTL-1
//!   packet gets Time Exceeded (IPv4 and IPv6);
//! - a packet to a connected subnet's broadcast or network address, or to
//!   255.255.255.255, is dropped at once (`no_route`): no Host Unreachable, not held for a
//!   neighbour;
//! - a TTL-1 packet towards a next hop nobody resolved gets Time Exceeded at once, not Host
//!   Unreachable after the 3 s wait;
//! - an MTU lowered on the router's egress while it runs is announced in Fragmentation
//!   Needed / Packet Too Big;
//! - a scan of new on-link destinations does not cost pings to a neighbour whose entry is
//!   flushed again and again.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use zl_testkit::lab::{
    all_back, kernel_router, ping_df, run_in, sender_ip, stat, tools, tshark, Capture, Lab, Netns,
    SenderSpec, RECEIVER_IP,
};

/// The binary the lab runs (only the root package's tests know where Cargo built it).
const ZLROUTER: &str = env!("CARGO_BIN_EXE_zlrouter");

/// The router's MAC on `r0` and the sender's on `g0` (the lab's).
const R0_MAC: [u8; 6] = [2, 0, 0, 9, 1, 1];
const SND_MAC: [u8; 6] = [2, 0, 0, 9, 1, 2];
const R0_MAC_TEXT: &str = "02:00:00:09:01:01";

/// What the tests drive (`.ci/run` installs them).
const TOOLS: &[(&str, &str, &str)] = &[
    ("ping", "-V", "iputils-ping"),
    ("tshark", "-v", "tshark"),
    ("timeout", "--version", "coreutils"),
];

/// The lab with IPv4 and IPv6 addresses on the router (no `brd`), an on-link route
/// 10.66.0.0/16 on `rx` where no host answers, and hosts that know the router only by its
/// address.
fn lab(test: &str) -> Option<Lab> {
    if !tools(test, TOOLS) {
        return None;
    }
    zl_testkit::netns::set_prefix("zlrfc");
    let lab = Lab::or_skip(ZLROUTER, test, &[SenderSpec::PLAIN])?;
    let (snd, rtr, rcv) = (&lab.senders[0], &lab.rtr, &lab.rcv);
    // DAD off before IPv6 comes up, so the link-local addresses the router's kernel solicits
    // from are usable at once.
    for (ns, dev) in [(rtr, "r0"), (rtr, "rx"), (snd, "g0"), (rcv, "s0")] {
        for key in ["accept_dad=0", "disable_ipv6=0"] {
            ns.exec(&["sysctl", "-qw", &format!("net.ipv6.conf.{dev}.{key}")])
                .unwrap();
        }
    }
    for dev in ["r0", "rx"] {
        rtr.wait_link_local(dev, Duration::from_secs(5)).unwrap();
    }
    for (ns, args) in [
        (rtr, &["addr", "add", "10.9.1.1/24", "dev", "r0"][..]),
        (rtr, &["addr", "add", "10.9.100.1/24", "dev", "rx"]),
        (rtr, &["route", "add", "10.66.0.0/16", "dev", "rx"]),
        (
            rtr,
            &[
                "-6",
                "addr",
                "add",
                "2001:db8:1::1/64",
                "dev",
                "r0",
                "nodad",
            ],
        ),
        (
            rtr,
            &[
                "-6",
                "addr",
                "add",
                "2001:db8:100::1/64",
                "dev",
                "rx",
                "nodad",
            ],
        ),
        (
            snd,
            &[
                "-6",
                "addr",
                "add",
                "2001:db8:1::2/64",
                "dev",
                "g0",
                "nodad",
            ],
        ),
        (
            snd,
            &["-6", "route", "add", "default", "via", "2001:db8:1::1"],
        ),
        (
            rcv,
            &[
                "-6",
                "addr",
                "add",
                "2001:db8:100::2/64",
                "dev",
                "s0",
                "nodad",
            ],
        ),
        (
            rcv,
            &["-6", "route", "add", "default", "via", "2001:db8:100::1"],
        ),
        (snd, &["neigh", "flush", "dev", "g0"]),
        (rcv, &["neigh", "flush", "dev", "s0"]),
    ] {
        ns.ip(args).unwrap();
    }
    rtr.exec(&["sysctl", "-qw", "net.ipv6.conf.all.forwarding=0"])
        .unwrap();
    Some(lab)
}

/// One ICMP / ICMPv6 error the router sent, as tshark reads it.
#[derive(Debug)]
struct RouterError {
    /// The outer type (11: Time Exceeded, 3: Destination Unreachable; ICMPv6 3 and 1).
    ty: u8,
    /// ICMPv6.
    v6: bool,
    /// The quoted UDP packet's destination port, if quoted.
    port: Option<u16>,
    /// The IP identifications in the frame (the error's own and the quoted packet's).
    ids: Vec<u16>,
    /// Seconds since the capture began.
    at: f64,
}

impl RouterError {
    fn time_exceeded(&self) -> bool {
        self.ty == if self.v6 { 3 } else { 11 }
    }
}

/// Every ICMP / ICMPv6 error from the router's MAC in `file` (one tshark pass: each takes
/// a good part of a second to start).
fn router_errors(file: &Path) -> Vec<RouterError> {
    let fields = [
        "icmp.type",
        "icmpv6.type",
        "udp.dstport",
        "ip.id",
        "frame.time_relative",
    ];
    let filter = format!(
        "eth.src == {R0_MAC_TEXT} && ((icmp && icmp.type != 0 && icmp.type != 8) \
         || (icmpv6 && icmpv6.type < 128))"
    );
    tshark(file, &filter, &fields)
        .iter()
        .map(|l| {
            let cols: Vec<&str> = l.split('\t').collect();
            let col = |i: usize| cols.get(i).copied().unwrap_or_default();
            let first = |c: &str| c.split(',').next().unwrap_or_default().to_owned();
            let (v4, v6) = (first(col(0)).parse().ok(), first(col(1)).parse().ok());
            let ids = (col(3).split(','))
                .filter_map(|c| u16::from_str_radix(c.trim_start_matches("0x"), 16).ok())
                .collect();
            RouterError {
                ty: v4.or(v6).unwrap_or(0),
                v6: v4.is_none(),
                port: col(2).split(',').next().and_then(|c| c.parse().ok()),
                ids,
                at: col(4).parse().unwrap_or(f64::NAN),
            }
        })
        .collect()
}

/// When the sender's frame with a UDP packet to `port` left (seconds since the capture
/// began).
fn sent_at(file: &Path, port: u16) -> Option<f64> {
    tshark(
        file,
        &format!("eth.src == 02:00:00:09:01:02 && !icmp && !icmpv6 && udp.dstport == {port}"),
        &["frame.time_relative"],
    )
    .first()?
    .parse()
    .ok()
}

/// The Internet checksum of `data`.
fn checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = data
        .chunks(2)
        .map(|c| u32::from(u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)])))
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// An Ethernet frame to `dst_mac` from the sender carrying an IPv4 UDP packet `src` ->
/// `dst` to `port`, `ttl`, DF set; `later_fragment`: a non-initial fragment (offset 1480)
/// of such a packet instead, which carries no UDP header (the port is then only in the IP
/// identification).
fn udp4(dst_mac: [u8; 6], src: &str, dst: &str, ttl: u8, port: u16, later: bool) -> Vec<u8> {
    let (s, d): (std::net::Ipv4Addr, std::net::Ipv4Addr) =
        (src.parse().unwrap(), dst.parse().unwrap());
    let mut l4 = Vec::new();
    if !later {
        l4.extend_from_slice(&40000u16.to_be_bytes());
        l4.extend_from_slice(&port.to_be_bytes());
        l4.extend_from_slice(&(8u16 + 32).to_be_bytes());
        l4.extend_from_slice(&[0, 0]);
    }
    l4.extend_from_slice(&[0x5a; 32]);
    let flags_frag: u16 = if later { 185 } else { 0x4000 };
    let mut ip = vec![0x45, 0];
    ip.extend_from_slice(&(20 + l4.len() as u16).to_be_bytes());
    ip.extend_from_slice(&port.to_be_bytes());
    ip.extend_from_slice(&flags_frag.to_be_bytes());
    ip.extend_from_slice(&[ttl, 17, 0, 0]);
    ip.extend_from_slice(&s.octets());
    ip.extend_from_slice(&d.octets());
    let c = checksum(&ip);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    let mut f = dst_mac.to_vec();
    f.extend_from_slice(&SND_MAC);
    f.extend_from_slice(&[0x08, 0x00]);
    f.extend_from_slice(&ip);
    f.extend_from_slice(&l4);
    f
}

/// As [`udp4`] for IPv6 (the UDP checksum left 0: the packets go no further than the
/// router).
fn udp6(src: &str, dst: &str, hop: u8, port: u16) -> Vec<u8> {
    let (s, d): (std::net::Ipv6Addr, std::net::Ipv6Addr) =
        (src.parse().unwrap(), dst.parse().unwrap());
    let mut f = R0_MAC.to_vec();
    f.extend_from_slice(&SND_MAC);
    f.extend_from_slice(&[0x86, 0xdd, 0x60, 0, 0, 0]);
    f.extend_from_slice(&40u16.to_be_bytes());
    f.extend_from_slice(&[17, hop]);
    f.extend_from_slice(&s.octets());
    f.extend_from_slice(&d.octets());
    f.extend_from_slice(&40000u16.to_be_bytes());
    f.extend_from_slice(&port.to_be_bytes());
    f.extend_from_slice(&40u16.to_be_bytes());
    f.extend_from_slice(&[0, 0]);
    f.extend_from_slice(&[0x5a; 32]);
    f
}

/// Sends `frames` out of `dev` from a thread in `ns` through an `AF_PACKET` socket, each
/// after its delay; the thread's handle yields the error of the first send that failed.
fn send_frames(
    ns: &Netns,
    dev: &str,
    frames: Vec<(Duration, Vec<u8>)>,
) -> std::thread::JoinHandle<io::Result<io::Result<()>>> {
    let dev = std::ffi::CString::new(dev).expect("an interface name");
    ns.spawn_in(move || -> io::Result<()> {
        // SAFETY: `dev` is a NUL-terminated string that outlives the call.
        let ifindex = unsafe { libc::if_nametoindex(dev.as_ptr()) };
        if ifindex == 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: socket(2) has no memory preconditions; protocol 0: it receives nothing.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` is a socket just opened and owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: an all-zero sockaddr_ll is a valid value of the plain C struct.
        let mut to: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        to.sll_family = libc::AF_PACKET as u16;
        to.sll_ifindex = ifindex as i32;
        for (delay, frame) in frames {
            std::thread::sleep(delay);
            // SAFETY: `frame` is valid for its length, `to` is a sockaddr_ll of the size
            // passed; the kernel copies both.
            let n = unsafe {
                libc::sendto(
                    fd.as_raw_fd(),
                    frame.as_ptr().cast(),
                    frame.len(),
                    0,
                    (&to as *const libc::sockaddr_ll).cast(),
                    std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
                )
            };
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    })
}

/// Sources that name no single host get no ICMP error (a host's own TTL-1 packet does,
/// over IPv4 and IPv6), nor does a non-initial fragment or a frame to the broadcast MAC.
/// Packets to a connected subnet's broadcast or network address, or to 255.255.255.255,
/// are dropped at once as `no_route`: no Host Unreachable, none held for a neighbour. A
/// TTL-1 packet towards a next hop nobody resolved (10.66.0.0/16 on-link, no host there)
/// gets Time Exceeded within 100 ms, not Host Unreachable after the 3 s wait.
#[test]
fn no_error_to_non_hosts_broadcasts_not_held_and_ttl_before_the_neighbour() {
    const TEST: &str = "no_error_to_non_hosts_broadcasts_not_held_and_ttl_before_the_neighbour";
    let Some(mut lab) = lab(TEST) else {
        return;
    };
    lab.start(TEST, &kernel_router(true).to_toml());
    let snd = &lab.senders[0];
    // tshark says it captures a moment before it does: the warm-up's echoes cover that.
    let mut cap = Capture::start(snd, "g0", lab.dir.join("sender.pcapng"));
    all_back(snd, RECEIVER_IP, 2, &[]).expect("warm-up: the receiver resolved");
    all_back(snd, "2001:db8:100::2", 2, &["-6"]).expect("warm-up over IPv6");

    let host = sender_ip(0);
    // (port, frame, a Time Exceeded is due).
    let ttl1 = |src: &str, port| (port, udp4(R0_MAC, src, RECEIVER_IP, 1, port, false));
    let probes: Vec<(u16, Vec<u8>, bool)> = [
        (ttl1(&host, 40001), true),
        (ttl1("10.9.1.255", 40002), false),
        (ttl1("10.9.1.0", 40003), false),
        (ttl1("10.9.1.1", 40004), false),
        (ttl1("10.9.100.1", 40005), false),
        (ttl1("0.1.2.3", 40006), false),
        (ttl1("10.9.100.255", 40007), false),
        (
            (40009, udp4([0xff; 6], &host, RECEIVER_IP, 1, 40009, false)),
            false,
        ),
        (
            (40010, udp6("2001:db8:1::2", "2001:db8:100::2", 1, 40010)),
            true,
        ),
        (
            (40011, udp6("2001:db8:1::1", "2001:db8:100::2", 1, 40011)),
            false,
        ),
        (
            (40012, udp6("2001:db8:100::1", "2001:db8:100::2", 1, 40012)),
            false,
        ),
        // Towards an unresolved next hop: Time Exceeded at once.
        (
            (40030, udp4(R0_MAC, &host, "10.66.0.7", 1, 40030, false)),
            true,
        ),
    ]
    .into_iter()
    .map(|((port, f), due)| (port, f, due))
    .collect();
    let broadcasts: Vec<(u16, Vec<u8>)> = [
        ("10.9.100.255", 40020),
        ("10.9.100.0", 40021),
        ("255.255.255.255", 40022),
        ("10.9.1.255", 40023),
    ]
    .into_iter()
    .map(|(dst, port)| (port, udp4(R0_MAC, &host, dst, 64, port, false)))
    .collect();
    let mut frames: Vec<(Duration, Vec<u8>)> = probes
        .iter()
        .map(|(_, f, _)| (Duration::from_millis(20), f.clone()))
        .collect();
    // A non-initial fragment of a TTL-1 packet (its IP identification 40008).
    frames.push((
        Duration::from_millis(20),
        udp4(R0_MAC, &host, RECEIVER_IP, 1, 40008, true),
    ));
    frames.extend(
        broadcasts
            .iter()
            .map(|(_, f)| (Duration::from_millis(20), f.clone())),
    );
    send_frames(snd, "g0", frames)
        .join()
        .unwrap()
        .unwrap()
        .expect("send the probes");
    // An echo to the receiver's subnet broadcast through the router: no answer, and no Host
    // Unreachable.
    let (_, text) = run_in(
        snd,
        10,
        &["ping", "-n", "-c", "1", "-W", "1", "10.9.100.255"],
    );
    assert!(!text.contains("From "), "{text}");
    let file = cap.stop();
    let (status, out) = lab.stop_router();
    assert!(status.success(), "{out}");

    let errors = router_errors(&file);
    let about = |port: u16| -> Vec<&RouterError> {
        errors.iter().filter(|e| e.port == Some(port)).collect()
    };
    for (port, _, due) in &probes {
        let got = about(*port);
        if *due {
            assert!(
                got.len() == 1 && got[0].time_exceeded(),
                "port {port}: one Time Exceeded expected: {errors:#?}"
            );
        } else {
            assert!(got.is_empty(), "port {port}: no error due: {errors:#?}");
        }
    }
    // Besides the three due, none: not about the fragment (IP identification 40008), the
    // broadcasts or the echo to the subnet broadcast (no Destination Unreachable at all).
    assert_eq!(errors.len(), 3, "{errors:#?}");
    assert!(errors.iter().all(|e| !e.ids.contains(&40008)));
    assert!(errors.iter().all(RouterError::time_exceeded), "{errors:#?}");
    assert!(broadcasts.iter().all(|(port, _)| about(*port).is_empty()));
    // Time Exceeded at once towards the unresolved next hop, not after a wait.
    let sent = sent_at(&file, 40030).expect("the probe to 10.66.0.7 was captured");
    let te = about(40030);
    assert!(te.len() == 1 && !te[0].v6 && te[0].ty == 11, "{te:?}");
    let delay = te[0].at - sent;
    assert!(delay < 0.1, "Time Exceeded {delay:.3} s after the packet");

    // Counted: the broadcasts reaching the router as no_route, none held for a neighbour
    // (held ones would be no_neighbour after 3 s, or shutdown at the stop).
    assert!(stat(&out, "totals.drops.no_route").unwrap() >= 2, "{out}");
    assert_eq!(stat(&out, "totals.drops.no_neighbour"), Some(0), "{out}");
    assert_eq!(stat(&out, "totals.drops.shutdown"), Some(0), "{out}");
    assert!(stat(&out, "icmp.suppressed").unwrap() >= 9, "{out}");
    assert_eq!(stat(&out, "icmp.sent.unreachable"), Some(0), "{out}");
    assert_eq!(stat(&out, "icmp.sent.time_exceeded"), Some(3), "{out}");
}

/// Path MTU discovery follows an MTU lowered while the router runs: 1500-octet DF echoes
/// pass at MTU 1500; after `ip link set rx mtu 1400` on the router's egress the next one
/// gets Fragmentation Needed (mtu 1400), an IPv6 one Packet Too Big, and nothing leaves
/// the router too big to be sent (`tx_no_buffer` 0).
#[test]
fn an_mtu_lowered_while_running_is_announced_in_frag_needed_and_packet_too_big() {
    const TEST: &str =
        "an_mtu_lowered_while_running_is_announced_in_frag_needed_and_packet_too_big";
    let Some(mut lab) = lab(TEST) else {
        return;
    };
    lab.start(TEST, &kernel_router(true).to_toml());
    let (snd, rtr, rcv) = (&lab.senders[0], &lab.rtr, &lab.rcv);
    all_back(snd, RECEIVER_IP, 2, &["-M", "do", "-s", "1472"]).expect("1500 octets pass");
    all_back(snd, "2001:db8:100::2", 2, &["-6", "-M", "do", "-s", "1452"])
        .expect("1500 octets pass over IPv6");

    rtr.ip(&["link", "set", "rx", "mtu", "1400"]).unwrap();
    rcv.ip(&["link", "set", "s0", "mtu", "1400"]).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    // The change reaches the router through netlink within milliseconds; a DF echo sent
    // before it would be lost, so the first answer is waited for (bounded).
    let deadline = Instant::now() + Duration::from_secs(5);
    let text = loop {
        let (_, text) = ping_df(snd, RECEIVER_IP, 1472);
        if text.contains("Frag needed") || Instant::now() > deadline {
            break text;
        }
    };
    assert!(
        text.contains("From 10.9.1.1") && text.contains("Frag needed and DF set (mtu = 1400)"),
        "{text}"
    );
    let (_, text) = ping_df(snd, "2001:db8:100::2", 1452);
    assert!(
        text.contains("From 2001:db8:1::1") && text.contains("Packet too big: mtu=1400"),
        "{text}"
    );
    all_back(snd, RECEIVER_IP, 2, &["-M", "do", "-s", "1372"]).expect("1400 octets pass");

    let (status, out) = lab.stop_router();
    assert!(status.success(), "{out}");
    assert!(stat(&out, "totals.drops.too_big").unwrap() >= 2, "{out}");
    assert!(stat(&out, "icmp.sent.too_big").unwrap() >= 2, "{out}");
    assert_eq!(stat(&out, "ports[rx].tx_no_buffer"), Some(0), "{out}");
}

/// A scan of new on-link destinations (10.66.0.0/16, 200 a second, none answering) keeps
/// the neighbour wait full, while the receiver's neighbour entry on the router is deleted
/// five times in two seconds: each time the next echo waits for it to be resolved again,
/// and none of 20 is lost (a Linux router forwarding the same traffic loses none).
#[test]
fn a_scan_of_new_on_link_destinations_costs_no_pings_to_a_known_neighbour() {
    const TEST: &str = "a_scan_of_new_on_link_destinations_costs_no_pings_to_a_known_neighbour";
    let Some(mut lab) = lab(TEST) else {
        return;
    };
    lab.start(TEST, &kernel_router(true).to_toml());
    let (snd, rtr) = (&lab.senders[0], &lab.rtr);
    all_back(snd, RECEIVER_IP, 2, &[]).expect("warm-up: the receiver resolved");

    let host = sender_ip(0);
    const SCAN: u32 = 700;
    let scan: Vec<(Duration, Vec<u8>)> = (0..SCAN)
        .map(|i| {
            let dst = format!("10.66.{}.{}", 1 + i / 250, 1 + i % 250);
            let frame = udp4(R0_MAC, &host, &dst, 64, 50000, false);
            (Duration::from_millis(5), frame)
        })
        .collect();
    let scanner = send_frames(snd, "g0", scan);
    // The wait's 256 places are taken after ~1.3 s of the scan.
    std::thread::sleep(Duration::from_millis(1500));
    let pinger = {
        let name = snd.name().to_owned();
        std::thread::spawn(move || {
            Command::new("ip")
                .args(["netns", "exec", &name, "ping", "-n", "-q", "-W", "1"])
                .args(["-i", "0.1", "-c", "20", RECEIVER_IP])
                .output()
        })
    };
    for _ in 0..5 {
        // Gone from the kernel's table (an error: already gone, resolving again).
        let _ = rtr.ip(&["neigh", "del", RECEIVER_IP, "dev", "rx"]);
        std::thread::sleep(Duration::from_millis(400));
    }
    let pings = pinger.join().unwrap().expect("run ping");
    let pings = String::from_utf8_lossy(&pings.stdout).into_owned();
    scanner.join().unwrap().unwrap().expect("send the scan");

    let (status, out) = lab.stop_router();
    assert!(status.success(), "{out}");
    assert!(pings.contains("20 received"), "pings lost: {pings}\n{out}");
    // The scan filled the wait: its packets gave their places up or expired.
    assert!(
        stat(&out, "totals.drops.no_neighbour").unwrap() >= u64::from(SCAN) / 2,
        "{out}"
    );
}
