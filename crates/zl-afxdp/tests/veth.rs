//! The AF_XDP port on a real veth pair inside a throw-away namespace (needs root; each test
//! says so on stderr and passes trivially without it).
//!
//! Frames are injected on the peer with a raw AF_PACKET socket and read back from it, with
//! the local experimental EtherType 0x88B5 so nothing else on the link is counted.
//! Namespaces are named `zlxf-...`.

mod common;

use std::os::fd::AsRawFd;
use std::time::Instant;

use common::*;

use zl_afxdp::{AfXdpConfig, AfXdpError, AfXdpPort, BindMode, OnGone, XdpMode};
use zl_core::Nanos;
use zl_port::{Batch, BufPool, Port, PortError};
use zl_testkit::netns::{is_root, skip, Netns};

/// Injects `n` frames on zx1 and reads them from the port on zx0; returns the sequence
/// numbers received in order.
fn inject_and_receive(port: &mut AfXdpPort, n: u32, len: usize) -> Vec<u32> {
    let peer = RawSocket::open("zx1").expect("AF_PACKET on zx1");
    let mut got = Vec::new();
    let start = Instant::now();
    for seq in 0..n {
        peer.send(&frame(seq, len)).expect("inject");
        port.recv_with(64, |f| {
            if let Some(s) = seq_of(f) {
                assert_eq!(f, &frame(s, len)[..], "payload of frame {s}");
                got.push(s);
            }
        })
        .expect("recv");
    }
    while got.len() < n as usize && start.elapsed() < GIVE_UP_AFTER {
        port.recv_with(64, |f| got.extend(seq_of(f))).expect("recv");
    }
    got
}

fn receive_case(test: &str, tag: &str, mode: XdpMode) {
    let Some(ns) = veth_ns(test, tag) else {
        return;
    };
    let link_while_open = ns
        .run_in(move || {
            let mut cfg = raw_cfg();
            cfg.xdp_mode = mode;
            cfg.rx_ring_size = 256;
            cfg.tx_ring_size = 256;
            let mut port = AfXdpPort::open("p0", 0, &cfg).expect("open AF_XDP port");
            let got = inject_and_receive(&mut port, 1000, 128);
            assert_eq!(got, (0..1000).collect::<Vec<_>>(), "every frame, in order");
            let k = port.kernel_stats().unwrap();
            assert_eq!(k.rx_dropped + k.rx_ring_full, 0, "{k:?}");
            assert_eq!(port.rx_halves()[0].socket_counters().rx_packets, 1000);
            let out = std::process::Command::new("ip")
                .args(["link", "show", "zx0"])
                .output()
                .unwrap();
            String::from_utf8_lossy(&out.stdout).into_owned()
        })
        .unwrap();
    let expect = match mode {
        XdpMode::Generic => "xdpgeneric",
        XdpMode::Native => "xdp",
    };
    assert!(link_while_open.contains(expect), "{link_while_open}");
    // Dropping the port closed the BPF link: the program is gone from the interface. A child
    // process forked at that moment by a test running in parallel holds a copy of the link fd
    // until its exec closes it, so allow for that window (bounded; not a timing assertion).
    let start = Instant::now();
    let mut after = ns.ip(&["link", "show", "zx0"]).unwrap();
    while after.contains("prog/xdp") && start.elapsed() < GIVE_UP_AFTER {
        std::thread::yield_now();
        after = ns.ip(&["link", "show", "zx0"]).unwrap();
    }
    assert!(
        !after.contains("prog/xdp"),
        "program still attached: {after}"
    );
}

#[test]
fn receives_injected_frames_in_generic_mode() {
    receive_case(
        "receives_injected_frames_in_generic_mode",
        "xrxg",
        XdpMode::Generic,
    );
}

#[test]
fn receives_injected_frames_in_native_mode() {
    receive_case(
        "receives_injected_frames_in_native_mode",
        "xrxn",
        XdpMode::Native,
    );
}

#[test]
fn one_socket_per_queue_on_a_multi_queue_interface() {
    let test = "one_socket_per_queue_on_a_multi_queue_interface";
    if !is_root() {
        skip(test, "needs root");
        return;
    }
    zl_testkit::netns::set_prefix("zlxf");
    let ns = match Netns::create("xmq")
        .and_then(|ns| ns.add_veth_pair_with_queues("zx0", "zx1", 4).map(|()| ns))
    {
        Ok(ns) => ns,
        Err(e) => {
            skip(test, &format!("cannot create a 4-queue veth pair: {e}"));
            return;
        }
    };
    ns.run_in(|| {
        let cfg = AfXdpConfig {
            queues: vec![0, 1, 2, 3],
            rx_ring_size: 256,
            tx_ring_size: 64,
            ..raw_cfg()
        };
        let mut port = AfXdpPort::open("p0", 0, &cfg).expect("open 4 queues");
        assert_eq!(port.rx_halves().len(), 4);
        // IPv4/UDP frames with 400 different source ports: the peer's flow hash spreads
        // them over its 4 TX queues, which veth maps to zx0's 4 RX queues.
        let peer = RawSocket::open("zx1").unwrap();
        for seq in 0..400u32 {
            peer.send(&udp_frame(seq)).unwrap();
        }
        let mut got = Vec::new();
        let start = Instant::now();
        while got.len() < 400 && start.elapsed() < GIVE_UP_AFTER {
            port.recv_with(64, |f| got.extend(udp_seq(f))).unwrap();
        }
        got.sort_unstable();
        assert_eq!(
            got,
            (0..400).collect::<Vec<_>>(),
            "every frame, whatever its queue"
        );
        let per_queue: Vec<u64> = port
            .rx_halves()
            .iter()
            .map(|h| h.socket_counters().rx_packets)
            .collect();
        assert_eq!(per_queue.iter().sum::<u64>(), 400, "{per_queue:?}");
        // The peer's queue choice for these flows is the kernel's business (here it leaves
        // one queue unused); what matters is that more than one socket received.
        assert!(
            per_queue.iter().filter(|&&n| n > 0).count() >= 2,
            "{per_queue:?}"
        );
    })
    .unwrap();
}

#[test]
fn transmits_frames_the_peer_receives() {
    let Some(ns) = veth_ns("transmits_frames_the_peer_receives", "xtx") else {
        return;
    };
    ns.run_in(|| {
        let mut cfg = raw_cfg();
        cfg.attach_program = false;
        cfg.rx_ring_size = 64;
        cfg.tx_ring_size = 64;
        let mut port = AfXdpPort::open("p0", 0, &cfg).expect("open");
        let peer = RawSocket::open("zx1").unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 2048];
        // 500 frames through a 64-entry TX ring: completions must recycle chunks.
        for burst in 0..50u32 {
            let frames: Vec<Vec<u8>> = (0..10).map(|i| frame(burst * 10 + i, 200)).collect();
            let sent = port
                .send_burst(frames.iter().map(|f| f.as_slice()))
                .unwrap();
            assert_eq!(sent, 10);
            while let Some(n) = peer.try_recv(&mut buf) {
                let s = seq_of(&buf[..n]).unwrap();
                assert_eq!(&buf[..n], &frame(s, 200)[..]);
                got.push(s);
            }
        }
        let start = Instant::now();
        while got.len() < 500 && start.elapsed() < GIVE_UP_AFTER {
            port.send_burst(std::iter::empty()).unwrap();
            while let Some(n) = peer.try_recv(&mut buf) {
                got.extend(seq_of(&buf[..n]));
            }
        }
        assert_eq!(got, (0..500).collect::<Vec<_>>());
        let c = port.tx_half().socket_counters();
        assert_eq!((c.tx_packets, c.tx_ring_full), (500, 0), "{c:?}");
    })
    .unwrap();
}

#[test]
fn port_trait_round_trip_through_pool_buffers() {
    let Some(ns) = veth_ns("port_trait_round_trip_through_pool_buffers", "xport") else {
        return;
    };
    ns.run_in(|| {
        let cfg = AfXdpConfig {
            rx_ring_size: 128,
            tx_ring_size: 128,
            ..raw_cfg()
        };
        let mut port = AfXdpPort::open("p0", 3, &cfg).unwrap();
        let peer = RawSocket::open("zx1").unwrap();
        let mut pool = BufPool::new(64, 2048);
        let mut batch = Batch::new();
        for seq in 0..20 {
            peer.send(&frame(seq, 60 + seq as usize)).unwrap();
        }
        let start = Instant::now();
        let mut received = Vec::new();
        while received.len() < 20 && start.elapsed() < GIVE_UP_AFTER {
            port.recv(Nanos(77), &mut pool, &mut batch).unwrap();
            for b in batch.iter() {
                assert_eq!((b.in_port, b.rx_time), (3, Nanos(77)));
                received.extend(seq_of(b.as_slice()));
            }
            // Send everything straight back out of the same port.
            port.send(Nanos(78), &mut batch, &mut pool).unwrap();
        }
        assert_eq!(received, (0..20).collect::<Vec<_>>());
        assert!(batch.is_empty());
        assert_eq!(pool.available(), 64, "every buffer back in the pool");
        let mut buf = [0u8; 2048];
        let mut echoed = Vec::new();
        while echoed.len() < 20 && start.elapsed() < GIVE_UP_AFTER {
            port.send(Nanos(79), &mut batch, &mut pool).unwrap();
            if let Some(n) = peer.try_recv(&mut buf) {
                echoed.extend(seq_of(&buf[..n]));
            }
        }
        assert_eq!(echoed, (0..20).collect::<Vec<_>>());
        let c = port.counters();
        assert_eq!((c.rx_packets, c.tx_packets, c.rx_dropped()), (20, 20, 0));
    })
    .unwrap();
}

#[test]
fn zero_copy_on_veth_is_reported_as_unsupported_mode() {
    let Some(ns) = veth_ns("zero_copy_on_veth_is_reported_as_unsupported_mode", "xzc") else {
        return;
    };
    let err = ns
        .run_in(|| {
            let cfg = AfXdpConfig {
                bind_mode: BindMode::ZeroCopy,
                rx_ring_size: 64,
                tx_ring_size: 64,
                ..raw_cfg()
            };
            AfXdpPort::open("p0", 0, &cfg).unwrap_err()
        })
        .unwrap();
    assert!(matches!(err, AfXdpError::ModeUnsupported { .. }), "{err:?}");
    assert!(err.to_string().contains("bind_mode = \"copy\""), "{err}");
}

#[test]
fn missing_interface_is_named() {
    let err = AfXdpPort::open("p0", 0, &AfXdpConfig::new("zlr-nope0")).unwrap_err();
    assert!(
        matches!(err, AfXdpError::InterfaceNotFound { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("zlr-nope0"));
}

#[test]
fn without_capabilities_the_error_says_which_are_needed() {
    let Some(ns) = veth_ns(
        "without_capabilities_the_error_says_which_are_needed",
        "xcap",
    ) else {
        return;
    };
    let err = ns
        .run_in(|| {
            drop_effective_capabilities_of_this_thread();
            AfXdpPort::open("p0", 0, &raw_cfg()).unwrap_err()
        })
        .unwrap();
    assert!(
        matches!(err, AfXdpError::PermissionDenied { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("CAP_BPF"), "{err}");
}

/// capset(2) on the calling thread only: effective set emptied, permitted kept.
fn drop_effective_capabilities_of_this_thread() {
    #[repr(C)]
    struct Header {
        version: u32,
        pid: i32,
    }
    #[repr(C)]
    #[derive(Clone, Copy)]
    struct Data {
        effective: u32,
        permitted: u32,
        inheritable: u32,
    }
    let mut header = Header {
        version: 0x2008_0522,
        pid: 0,
    };
    let mut data = [Data {
        effective: 0,
        permitted: 0,
        inheritable: 0,
    }; 2];
    // SAFETY: header and a two-element data array, as capget(2) v3 expects.
    let r = unsafe { libc::syscall(libc::SYS_capget, &mut header, data.as_mut_ptr()) };
    assert_eq!(r, 0, "capget");
    for d in &mut data {
        d.effective = 0;
    }
    // SAFETY: as above; pid 0 names the calling thread.
    let r = unsafe { libc::syscall(libc::SYS_capset, &mut header, data.as_ptr()) };
    assert_eq!(r, 0, "capset");
}

#[test]
fn interface_that_disappears_is_reported_not_spun_on() {
    let Some(ns) = veth_ns("interface_that_disappears_is_reported_not_spun_on", "xgone") else {
        return;
    };
    let ns_name = ns.name().to_owned();
    let result = ns
        .run_in(move || {
            let cfg = AfXdpConfig {
                rx_ring_size: 64,
                tx_ring_size: 64,
                ..raw_cfg()
            };
            let mut port = AfXdpPort::open("p0", 0, &cfg).unwrap();
            let mut pool = BufPool::new(8, 2048);
            let mut batch = Batch::new();
            assert_eq!(port.recv(Nanos(0), &mut pool, &mut batch).unwrap(), 0);
            let status = std::process::Command::new("ip")
                .args(["-n", &ns_name, "link", "del", "zx0"])
                .status()
                .unwrap();
            assert!(status.success());
            // Bounded: the idle health check runs every 256 polls.
            for polls in 0..10_000u32 {
                match port.recv(Nanos(1), &mut pool, &mut batch) {
                    Ok(_) => continue,
                    Err(e) => return Ok((polls, e)),
                }
            }
            Err("still polling after 10,000 idle polls")
        })
        .unwrap();
    let (polls, err) = result.unwrap();
    assert!(polls <= 256, "reported after {polls} polls");
    assert!(matches!(err, PortError::InterfaceGone { .. }), "{err:?}");
}

/// Environment variable naming the namespace the crash child must attach in.
const CRASH_CHILD_NS: &str = "ZLR_AFXDP_CRASH_CHILD_NS";

/// Child half of `program_is_detached_when_the_process_crashes`: does nothing in a normal run;
/// when re-executed with the variable set, attaches a port and aborts with it open.
#[test]
fn crash_child() {
    let Ok(ns) = std::env::var(CRASH_CHILD_NS) else {
        return;
    };
    let file = std::fs::File::open(format!("/var/run/netns/{ns}")).unwrap();
    // SAFETY: an open netns file; only this thread changes namespace, and the process aborts.
    let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    assert_eq!(r, 0, "setns");
    let cfg = AfXdpConfig {
        rx_ring_size: 64,
        tx_ring_size: 64,
        ..raw_cfg()
    };
    let port = AfXdpPort::open("p0", 0, &cfg).unwrap();
    println!("ZLR-ATTACHED");
    use std::io::Write;
    std::io::stdout().flush().unwrap();
    std::mem::forget(port);
    // No core file in the working tree, whatever the machine's core limit.
    let no_core = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: a valid rlimit for the call.
    unsafe { libc::setrlimit(libc::RLIMIT_CORE, &no_core) };
    std::process::abort();
}

#[test]
fn program_is_detached_when_the_process_crashes() {
    let Some(ns) = veth_ns("program_is_detached_when_the_process_crashes", "xcrash") else {
        return;
    };
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "crash_child", "--nocapture", "--test-threads=1"])
        .env(CRASH_CHILD_NS, ns.name())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("ZLR-ATTACHED"),
        "child never attached: {stdout}"
    );
    assert!(!out.status.success(), "the child must have crashed");
    // The link fd died with the process, and with it the attachment.
    let start = Instant::now();
    let mut link = ns.ip(&["link", "show", "zx0"]).unwrap();
    while link.contains("prog/xdp") && start.elapsed() < GIVE_UP_AFTER {
        std::thread::yield_now();
        link = ns.ip(&["link", "show", "zx0"]).unwrap();
    }
    assert!(
        !link.contains("prog/xdp"),
        "stale program after a crash: {link}"
    );
}

#[test]
fn a_second_port_on_the_same_interface_is_busy() {
    let Some(ns) = veth_ns("a_second_port_on_the_same_interface_is_busy", "xbusy") else {
        return;
    };
    let err = ns
        .run_in(|| {
            let cfg = AfXdpConfig {
                rx_ring_size: 64,
                tx_ring_size: 64,
                ..raw_cfg()
            };
            let _first = AfXdpPort::open("p0", 0, &cfg).unwrap();
            AfXdpPort::open("p1", 1, &cfg).unwrap_err()
        })
        .unwrap();
    // Held by a live port, the interface stays busy through the retries at open; the error
    // says how long it waited and that only the link's owner (or bpftool) removes it.
    match &err {
        AfXdpError::Busy {
            op: zl_afxdp::Op::AttachProgram,
            waited: Some(w),
            ..
        } => assert!(*w >= zl_afxdp::BUSY_RETRY_FOR, "{err}"),
        other => panic!("not a busy attach after the retries: {other:?}"),
    }
    let text = err.to_string();
    assert!(text.contains("bpftool link"), "{text}");
    assert!(text.contains("does nothing to a link"), "{text}");
}

#[test]
fn a_full_tx_ring_is_a_counted_refusal() {
    let Some(ns) = veth_ns("a_full_tx_ring_is_a_counted_refusal", "xfull") else {
        return;
    };
    ns.run_in(|| {
        let cfg = AfXdpConfig {
            attach_program: false,
            rx_ring_size: 64,
            tx_ring_size: 64,
            ..raw_cfg()
        };
        let mut port = AfXdpPort::open("p0", 0, &cfg).unwrap();
        let s = port.tx_half().socket().unwrap();
        // 100 frames staged before any flush: the 64-entry ring takes 64.
        let accepted = (0..100).filter(|&i| s.stage_tx(&frame(i, 64))).count();
        assert_eq!(accepted, 64);
        let big = vec![0u8; 4000];
        assert!(!s.stage_tx(&big), "longer than a 2 KiB chunk");
        s.flush_tx().unwrap();
        let c = s.counters();
        assert_eq!((c.tx_packets, c.tx_ring_full, c.tx_too_long), (64, 36, 1));
        // After the flush the chunks come back and the ring takes frames again.
        let start = Instant::now();
        while s.tx_in_flight() > 0 && start.elapsed() < GIVE_UP_AFTER {
            s.flush_tx().unwrap();
        }
        assert_eq!(s.tx_in_flight(), 0);
        assert!(s.stage_tx(&frame(100, 64)));
    })
    .unwrap();
}

/// Transmit refusals, counted per cause and per frame:
/// - 100 frames staged on a 64-entry TX ring: 36 `tx_ring_full`;
/// - the 64 leave in copy mode at most 32 per wakeup, so the first wakeup is answered EAGAIN
///   (a counted retry, `tx_kick_eagain`) and the next sends the rest: the peer gets all 64;
/// - with the peer down the driver drops what it is given (NET_XMIT_DROP, EBUSY on the
///   wakeup): 10 frames sent through the `Port` trait end as `tx_no_buffer`, none uncounted.
#[test]
fn tx_ring_full_kick_retries_and_driver_drops_are_counted_per_frame() {
    let Some(ns) = veth_ns(
        "tx_ring_full_kick_retries_and_driver_drops_are_counted_per_frame",
        "xkick",
    ) else {
        return;
    };
    let ns_name = ns.name().to_owned();
    ns.run_in(move || {
        let cfg = AfXdpConfig {
            attach_program: false,
            rx_ring_size: 64,
            tx_ring_size: 64,
            ..raw_cfg()
        };
        let mut port = AfXdpPort::open("p0", 0, &cfg).unwrap();
        let peer = RawSocket::open("zx1").unwrap();
        let s = port.tx_half().socket().unwrap();
        let accepted = (0..100).filter(|&i| s.stage_tx(&frame(i, 64))).count();
        assert_eq!(accepted, 64);
        s.flush_tx().unwrap();
        let mut got = Vec::new();
        collect_at_peer(&peer, &mut got, 64, || {
            port.tx_half().socket().unwrap().flush_tx().unwrap()
        });
        assert_eq!(got, (0..64).collect::<Vec<_>>());
        let x = port.tx_half().socket_counters();
        assert_eq!((x.tx_packets, x.tx_ring_full), (64, 36), "{x:?}");
        assert!(x.tx_kick_eagain >= 1, "64 frames need two wakeups: {x:?}");

        let status = std::process::Command::new("ip")
            .args(["-n", &ns_name, "link", "set", "zx1", "down"])
            .status()
            .unwrap();
        assert!(status.success());
        let mut pool = BufPool::new(16, 2048);
        let mut batch = Batch::new();
        for i in 0..10 {
            let mut b = pool.alloc().unwrap();
            b.copy_from(&frame(1000 + i, 64)).unwrap();
            batch.push(b).unwrap();
        }
        port.send(Nanos(1), &mut batch, &mut pool).unwrap();
        port.flush().unwrap();
        assert_eq!(pool.available(), 16, "every buffer back in the pool");
        let c = port.counters();
        let x = port.socket_counters();
        assert_eq!(
            (
                c.tx_packets,
                c.tx_ring_full,
                c.tx_no_buffer,
                c.tx_errors,
                c.tx_link_gone
            ),
            (64, 36, 10, 0, 0),
            "{x:?}"
        );
        assert_eq!(x.tx_driver_dropped, 10, "{x:?}");
    })
    .unwrap();
}

/// `on_gone = "wait"` on the `Port` trait: the deleted interface is noticed (not an error),
/// frames handed over while it is gone are counted (`tx_link_gone`), nothing is looked for
/// again before 100 ms of port time, and once an interface of the name is back the port
/// attaches to it (new ifindex) and receives and transmits again.
#[test]
fn on_gone_wait_reattaches_when_the_interface_is_back() {
    let Some(ns) = veth_ns(
        "on_gone_wait_reattaches_when_the_interface_is_back",
        "xwait",
    ) else {
        return;
    };
    let ns_name = ns.name().to_owned();
    ns.run_in(move || {
        let ip = |args: &[&str]| {
            let status = std::process::Command::new("ip")
                .args(["-n", &ns_name])
                .args(args)
                .status()
                .unwrap();
            assert!(status.success(), "ip {args:?}");
        };
        let cfg = AfXdpConfig {
            rx_ring_size: 64,
            tx_ring_size: 64,
            on_gone: OnGone::Wait,
            ..raw_cfg()
        };
        let mut port = AfXdpPort::open("p0", 0, &cfg).unwrap();
        let first_ifindex = port.ifindex();
        let mut pool = BufPool::new(64, 2048);
        let mut batch = Batch::new();
        let ms = |m: u64| Nanos::from_millis(m);
        ip(&["link", "del", "zx0"]);
        let mut polls = 0;
        while port.is_attached() && polls < 10_000 {
            assert_eq!(port.recv(ms(0), &mut pool, &mut batch).unwrap(), 0);
            polls += 1;
        }
        assert!(polls <= 256, "noticed after {polls} polls");
        assert_eq!(port.gone_and_reattached(), (1, 0));
        // Handed over while gone: counted, buffers freed.
        for i in 0..5 {
            let mut b = pool.alloc().unwrap();
            b.copy_from(&frame(i, 64)).unwrap();
            batch.push(b).unwrap();
        }
        assert_eq!(port.send(ms(1), &mut batch, &mut pool).unwrap(), 0);
        assert_eq!(pool.available(), 64);
        assert_eq!(port.tx_link_gone(), 5);
        assert_eq!(
            (port.counters().tx_link_gone, port.counters().tx_errors),
            (5, 0)
        );

        ip(&["link", "add", "zx0", "type", "veth", "peer", "name", "zx1"]);
        for dev in ["zx0", "zx1"] {
            // No IPv6 router solicitations on the new link: only the test's frames count.
            let status = std::process::Command::new("ip")
                .args(["netns", "exec", &ns_name, "sysctl", "-qw"])
                .arg(format!("net.ipv6.conf.{dev}.disable_ipv6=1"))
                .status()
                .unwrap();
            assert!(status.success(), "disable IPv6 on {dev}");
            ip(&["link", "set", dev, "up"]);
        }
        // Within 100 ms of the last look nothing is looked for, however often it is polled.
        for _ in 0..1000 {
            port.recv(ms(50), &mut pool, &mut batch).unwrap();
        }
        assert!(!port.is_attached());
        port.recv(ms(101), &mut pool, &mut batch).unwrap();
        assert!(
            port.is_attached(),
            "not re-attached 100 ms after the last look"
        );
        assert_eq!(port.gone_and_reattached(), (1, 1));
        assert_ne!(
            port.ifindex(),
            first_ifindex,
            "a new interface, a new index"
        );

        let peer = RawSocket::open("zx1").unwrap();
        for seq in 0..10 {
            peer.send(&frame(seq, 80)).unwrap();
        }
        let mut received = Vec::new();
        let start = Instant::now();
        while received.len() < 10 && start.elapsed() < GIVE_UP_AFTER {
            port.recv(ms(200), &mut pool, &mut batch).unwrap();
            for b in batch.iter() {
                received.extend(seq_of(b.as_slice()));
            }
            port.send(ms(200), &mut batch, &mut pool).unwrap();
        }
        assert_eq!(received, (0..10).collect::<Vec<_>>());
        let mut echoed = Vec::new();
        collect_at_peer(&peer, &mut echoed, 10, || {
            port.send(ms(201), &mut batch, &mut pool).unwrap();
        });
        assert_eq!(echoed, (0..10).collect::<Vec<_>>());
        let c = port.counters();
        assert_eq!(
            (c.rx_packets, c.tx_packets, c.tx_errors, c.tx_link_gone),
            (10, 10, 0, 5)
        );
    })
    .unwrap();
}

/// `on_gone = "wait"`, the interface found gone by a transmit wakeup while frames wait on the
/// RX ring: the 3 unread frames are counted `rx_abandoned` (in `rx_ring_full`), the frame just
/// staged `tx_abandoned` (in `tx_errors`): nothing disappears uncounted.
#[test]
fn on_gone_wait_counts_what_was_left_on_the_rings() {
    let Some(ns) = veth_ns("on_gone_wait_counts_what_was_left_on_the_rings", "xleft") else {
        return;
    };
    let ns_name = ns.name().to_owned();
    ns.run_in(move || {
        let cfg = AfXdpConfig {
            rx_ring_size: 64,
            tx_ring_size: 64,
            on_gone: OnGone::Wait,
            ..raw_cfg()
        };
        let mut port = AfXdpPort::open("p0", 0, &cfg).unwrap();
        let peer = RawSocket::open("zx1").unwrap();
        for seq in 0..3 {
            peer.send(&frame(seq, 64)).unwrap();
        }
        let status = std::process::Command::new("ip")
            .args(["-n", &ns_name, "link", "del", "zx0"])
            .status()
            .unwrap();
        assert!(status.success());
        let mut pool = BufPool::new(8, 2048);
        let mut batch = Batch::new();
        let mut b = pool.alloc().unwrap();
        b.copy_from(&frame(9, 64)).unwrap();
        batch.push(b).unwrap();
        port.send(Nanos(1), &mut batch, &mut pool).unwrap();
        assert!(!port.is_attached(), "the transmit wakeup did not notice");
        let x = port.socket_counters();
        assert_eq!((x.rx_abandoned, x.tx_abandoned), (3, 1), "{x:?}");
        let c = port.counters();
        assert_eq!(
            (c.rx_packets, c.rx_ring_full, c.tx_packets, c.tx_errors),
            (0, 3, 0, 1),
            "{c:?}"
        );
        // The abandoned frame's bytes leave `tx_bytes` with it.
        assert_eq!(c.tx_bytes, 0, "{c:?}");
    })
    .unwrap();
}
