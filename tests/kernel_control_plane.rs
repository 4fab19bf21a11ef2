//! The kernel stays the router's control plane while zlrouter forwards (Linux, root): the XDP
//! program passes ARP and the router's own addresses to the kernel stack (`redirect =
//! "transit"`, the default), and everything else transit goes through zlrouter.
//!
//! The lab of `zl_testkit::lab` with addresses on the router's interfaces (10.9.1.1 on `r0`,
//! 10.9.100.1 on `rx`; kernel forwarding off) and the end hosts' static neighbour entries for
//! the router removed, so they resolve it with ARP, answered by the router's kernel. Offloads
//! stay off on the lab's veths as in every lab test (generic XDP hands AF_XDP the frame as it
//! is: a TSO super-frame or a frame with a partial checksum would be forwarded as such).

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::time::Duration;

use zl_testkit::lab::{sender_ip, skip, stat, Lab, Netns, SenderSpec, RECEIVER_IP};

/// The binary the lab runs (only the root package's tests know where Cargo built it).
const ZLROUTER: &str = env!("CARGO_BIN_EXE_zlrouter");

const ROUTER_R0: &str = "10.9.1.1";
const ROUTER_RX: &str = "10.9.100.1";

/// `ping` from `from`: `count` echoes, each waited for at most 1 s; whether all came back.
fn ping(from: &Netns, to: &str, count: u32) -> Result<(), String> {
    let out = Command::new("ip")
        .args([
            "netns",
            "exec",
            from.name(),
            "ping",
            "-n",
            "-q",
            "-i",
            "0.2",
            "-W",
            "1",
        ])
        .args(["-c", &count.to_string(), to])
        .output()
        .map_err(|e| format!("ping: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() && text.contains(&format!("{count} received")) {
        Ok(())
    } else {
        Err(format!(
            "ping {to}: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn ping_available() -> bool {
    Command::new("ping")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn arp_pings_to_the_router_and_a_tcp_listener_on_it_reach_the_kernel_while_it_forwards() {
    const TEST: &str =
        "arp_pings_to_the_router_and_a_tcp_listener_on_it_reach_the_kernel_while_it_forwards";
    if !ping_available() {
        skip(TEST, "needs ping (iputils-ping)");
        return;
    }
    let Some(mut lab) = Lab::or_skip(ZLROUTER, TEST, &[SenderSpec::PLAIN]) else {
        return;
    };
    lab.rtr
        .ip(&["addr", "add", &format!("{ROUTER_R0}/24"), "dev", "r0"])
        .unwrap();
    lab.rtr
        .ip(&["addr", "add", &format!("{ROUTER_RX}/24"), "dev", "rx"])
        .unwrap();
    // The end hosts now know the router only by its address: ARP finds its MAC.
    lab.senders[0].ip(&["neigh", "flush", "dev", "g0"]).unwrap();
    lab.rcv.ip(&["neigh", "flush", "dev", "s0"]).unwrap();
    let config = lab.router_config(
        "[qos]\nlink_rate_bps = 1_000_000_000\n\
         [[qos.classes]]\nname = \"be\"\nweight = 1\nmax_packets = 1000\n",
        "",
    );
    lab.start(TEST, &config);
    let snd = &lab.senders[0];

    // Across the router both ways (the receiver pings back), the gateway resolved with ARP.
    ping(snd, RECEIVER_IP, 5).expect("sender -> receiver through zlrouter");
    ping(&lab.rcv, &sender_ip(0), 5).expect("receiver -> sender through zlrouter");
    let gw = snd.ip(&["neigh", "show", ROUTER_R0, "dev", "g0"]).unwrap();
    assert!(
        gw.contains("02:00:00:09:01:01"),
        "the sender learnt the router's MAC through ARP: {gw}"
    );

    // The router's own addresses, on the near and the far interface: the kernel answers.
    ping(snd, ROUTER_R0, 3).expect("ping the router's address on r0");
    ping(snd, ROUTER_RX, 3).expect("ping the router's address on rx");

    // A TCP listener in the router's own namespace, reached from the sender while zlrouter
    // forwards (the receiver pings the sender at the same time).
    let listener = lab.rtr.spawn_in(|| {
        let l = TcpListener::bind((ROUTER_RX, 7707)).unwrap();
        l.set_nonblocking(false).unwrap();
        let (mut s, _) = l.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut got = vec![0u8; 100_000];
        s.read_exact(&mut got).unwrap();
        s.write_all(b"ok").unwrap();
        got.iter().map(|&b| b as u64).sum::<u64>()
    });
    std::thread::sleep(Duration::from_millis(200)); // the listener binds (bounded by the connect retry below)
    let background = {
        let rcv = lab.rcv.name().to_owned();
        std::thread::spawn(move || {
            Command::new("ip")
                .args([
                    "netns", "exec", &rcv, "ping", "-n", "-q", "-i", "0.05", "-W", "1",
                ])
                .args(["-c", "20", &sender_ip(0)])
                .output()
        })
    };
    let sent: u64 = snd
        .run_in(|| {
            let mut s = None;
            for _ in 0..20 {
                match TcpStream::connect_timeout(
                    &format!("{ROUTER_RX}:7707").parse().unwrap(),
                    Duration::from_secs(1),
                ) {
                    Ok(c) => {
                        s = Some(c);
                        break;
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(100)),
                }
            }
            let mut s = s.expect("connect to the router's own TCP listener");
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
            s.write_all(&data).unwrap();
            let mut ok = [0u8; 2];
            s.read_exact(&mut ok).unwrap();
            assert_eq!(&ok, b"ok");
            data.iter().map(|&b| b as u64).sum()
        })
        .unwrap();
    let received = listener.join().unwrap().unwrap();
    assert_eq!(sent, received, "the bytes the router's listener read");
    let bg = background.join().unwrap().unwrap();
    assert!(
        String::from_utf8_lossy(&bg.stdout).contains("20 received"),
        "forwarding went on meanwhile: {}",
        String::from_utf8_lossy(&bg.stdout)
    );

    // Static routing, no `address` in the config: the router's Time Exceeded comes from
    // r0's own address, read from the interface when the port opened.
    let ttl1 = Command::new("ip")
        .args([
            "netns",
            "exec",
            snd.name(),
            "ping",
            "-n",
            "-c",
            "1",
            "-W",
            "1",
        ])
        .args(["-t", "1", RECEIVER_IP])
        .output()
        .unwrap();
    let ttl1 = String::from_utf8_lossy(&ttl1.stdout);
    assert!(
        ttl1.contains(&format!("From {ROUTER_R0}")) && ttl1.contains("Time to live exceeded"),
        "{ttl1}"
    );

    let (status, out) = lab.stop_router();
    assert!(status.success(), "{out}");
    assert_eq!(stat(&out, "icmp.sent.time_exceeded"), Some(1), "{out}");
    // zlrouter forwarded the transit echoes (5 + 5 + 20 each way, 60 in all) and saw none of
    // the ARP, the pings to its own addresses or the TCP connection to it.
    let forwarded = stat(&out, "totals.forwarded").expect("forwarded in the table");
    assert!(forwarded >= 60, "forwarded {forwarded}: {out}");
    assert!(
        forwarded < 80,
        "frames for the kernel reached zlrouter: {out}"
    );
    assert_eq!(stat(&out, "totals.drops.no_route"), Some(0), "{out}");
    assert_eq!(stat(&out, "totals.drops.parse_error"), Some(0), "{out}");
}
