//! The AF_XDP port split into halves that threads own, on real veths inside
//! throw-away namespaces `zlxh-...` (needs root; each test says so on stderr and passes
//! trivially without it, unless ZLR_REQUIRE_ENV=1 as in CI, where it fails).
//!
//! - The receive half on one thread and the transmit half on another echo every frame the peer
//!   sends, in order, with each half counting its own side and the joined counters exact;
//!   joined again, the halves are a working port.
//! - The interface deleted and recreated under halves on two threads (`on_gone = "wait"`):
//!   both re-attach, and frames go through again.
//! - A 4-queue veth with native XDP: one receive half per queue, each on its own thread, and
//!   many UDP flows from the peer reach every queue.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::*;
use zl_afxdp::{AfXdpConfig, AfXdpPort, AfXdpRx, AfXdpTx, OnGone, XdpMode};
use zl_core::Nanos;
use zl_port::{Batch, BufPool, Halves, Joined, Port, RxHalf, SplitPort, TxHalf};
use zl_testkit::netns::{is_root, skip, Netns};

/// Frames per lockstep burst: the peer sends a burst and waits for its echo before the next,
/// so no ring, backlog or socket buffer on the way can overflow.
const BURST: u32 = 32;

/// A namespace `zlxh-<tag>-...` with the veth pair zx0 <-> zx1 of `queues` queues each.
fn ns_with_veth(test: &str, tag: &str, queues: u32) -> Option<Netns> {
    if !is_root() {
        skip(test, "needs root (network namespaces, veth, XDP)");
        return None;
    }
    zl_testkit::netns::set_prefix("zlxh");
    match Netns::create(tag).and_then(|ns| {
        ns.add_veth_pair_with_queues("zx0", "zx1", queues)
            .map(|()| ns)
    }) {
        Ok(ns) => Some(ns),
        Err(e) => {
            skip(
                test,
                &format!("cannot create a namespace with a veth pair: {e}"),
            );
            None
        }
    }
}

/// Port time for the halves: monotonic, from the test's start.
fn now(start: Instant) -> Nanos {
    Nanos(start.elapsed().as_nanos() as u64)
}

/// A receive half on its own thread: everything it receives goes to `to_tx`; `attached`
/// mirrors whether it has a socket. Returns the half and its pool when `stop` is set.
fn spawn_receiver(
    mut rx: AfXdpRx,
    pool_size: usize,
    to_tx: mpsc::SyncSender<Batch>,
    stop: Arc<AtomicBool>,
    attached: Arc<AtomicBool>,
    start: Instant,
) -> JoinHandle<(AfXdpRx, BufPool)> {
    std::thread::spawn(move || {
        let mut pool = BufPool::new(pool_size, 2048);
        while !stop.load(Ordering::Relaxed) {
            let mut batch = Batch::new();
            rx.recv(now(start), &mut pool, &mut batch).unwrap();
            attached.store(rx.is_attached(), Ordering::Relaxed);
            if !batch.is_empty() {
                to_tx.send(batch).unwrap();
            }
        }
        (rx, pool)
    })
}

/// The transmit half on its own thread: sends what arrives from `from_rx`, and an empty burst
/// when nothing came for a millisecond (a wakeup for frames left on the TX ring, and the poll
/// that lets an idle half catch up with a re-attach). Returns the half, its pool (the freed
/// buffers) and the frames it sent, when the receiver hangs up.
fn spawn_transmitter(
    mut tx: AfXdpTx,
    pool_size: usize,
    from_rx: mpsc::Receiver<Batch>,
    start: Instant,
) -> JoinHandle<(AfXdpTx, BufPool, usize)> {
    std::thread::spawn(move || {
        let mut pool = BufPool::empty(pool_size, 2048);
        let mut sent = 0;
        loop {
            let mut batch = match from_rx.recv_timeout(Duration::from_millis(1)) {
                Ok(b) => b,
                Err(mpsc::RecvTimeoutError::Timeout) => Batch::new(),
                Err(mpsc::RecvTimeoutError::Disconnected) => break,
            };
            sent += tx.send(now(start), &mut batch, &mut pool).unwrap();
        }
        tx.flush().unwrap();
        (tx, pool, sent)
    })
}

/// Sends frames `first..first + n` from the peer in lockstep bursts, each burst's echo
/// collected into `echoed` before the next is sent.
fn echo_bursts(peer: &RawSocket, first: u32, n: u32, echoed: &mut Vec<u32>) {
    for b in (first..first + n).step_by(BURST as usize) {
        for seq in b..(b + BURST).min(first + n) {
            peer.send(&frame(seq, 100)).expect("inject");
        }
        let want = echoed.len() + (b + BURST).min(first + n) as usize - b as usize;
        collect_at_peer(peer, echoed, want, || {});
    }
}

/// The receive half on one thread, the transmit half on another: 1024 frames from the peer
/// come back in order; each half counts only its own side, and joined they count every frame
/// once; every buffer ends in one of the two pools. Then the joined halves work as the port.
#[test]
fn halves_on_two_threads_echo_every_frame() {
    let test = "halves_on_two_threads_echo_every_frame";
    let Some(ns) = ns_with_veth(test, "xhalf", 1) else {
        return;
    };
    ns.run_in(|| {
        const FRAMES: u32 = 1024;
        let cfg = AfXdpConfig {
            rx_ring_size: 256,
            tx_ring_size: 256,
            ..raw_cfg()
        };
        let port = AfXdpPort::open("p0", 5, &cfg).expect("open");
        let (rx, tx) = port.into_halves();
        assert_eq!(rx.len(), 1);
        let rx = rx.into_iter().next().unwrap();
        let start = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let attached = Arc::new(AtomicBool::new(true));
        let (to_tx, from_rx) = mpsc::sync_channel(64);
        let receiver = spawn_receiver(rx, FRAMES as usize, to_tx, stop.clone(), attached, start);
        let transmitter = spawn_transmitter(tx, FRAMES as usize, from_rx, start);

        let peer = RawSocket::open("zx1").unwrap();
        let mut echoed = Vec::new();
        echo_bursts(&peer, 0, FRAMES, &mut echoed);
        stop.store(true, Ordering::Relaxed);
        let (rx, rx_pool) = receiver.join().unwrap();
        let (tx, tx_pool, sent) = transmitter.join().unwrap();
        assert_eq!(
            echoed,
            (0..FRAMES).collect::<Vec<_>>(),
            "every frame, in order"
        );
        assert_eq!(sent, FRAMES as usize);
        assert_eq!(
            rx_pool.available() + tx_pool.available(),
            FRAMES as usize,
            "every buffer back in a pool"
        );
        let (r, t) = (rx.counters(), tx.counters());
        assert_eq!(
            (r.rx_packets, r.rx_bytes, r.tx_packets),
            (u64::from(FRAMES), u64::from(FRAMES) * 100, 0),
            "{r:?}"
        );
        assert_eq!(
            (t.rx_packets, t.tx_packets, t.tx_bytes),
            (0, u64::from(FRAMES), u64::from(FRAMES) * 100),
            "{t:?}"
        );
        assert_eq!(r.rx_dropped(), 0, "{r:?}");
        assert_eq!(
            (t.tx_ring_full, t.tx_no_buffer, t.tx_errors),
            (0, 0, 0),
            "{t:?}"
        );

        // Joined again: a port, counting on from the halves.
        let mut port = Joined::new(Halves::one(Box::new(rx), Box::new(tx)));
        assert_eq!(port.name(), "p0");
        let mut pool = BufPool::new(64, 2048);
        let mut batch = Batch::new();
        let mut echoed = Vec::new();
        for seq in FRAMES..FRAMES + 20 {
            peer.send(&frame(seq, 100)).unwrap();
        }
        let mut received = Vec::new();
        let t0 = Instant::now();
        while echoed.len() < 20 && t0.elapsed() < GIVE_UP_AFTER {
            port.recv(now(start), &mut pool, &mut batch).unwrap();
            for b in batch.iter() {
                assert_eq!(b.in_port, 5);
                received.extend(seq_of(b.as_slice()));
            }
            port.send(now(start), &mut batch, &mut pool).unwrap();
            let mut buf = [0u8; 2048];
            while let Some(n) = peer.try_recv(&mut buf) {
                echoed.extend(seq_of(&buf[..n]));
            }
        }
        assert_eq!(received, (FRAMES..FRAMES + 20).collect::<Vec<_>>());
        assert_eq!(echoed, received);
        assert_eq!(pool.available(), 64);
        let c = port.counters();
        let n = u64::from(FRAMES) + 20;
        assert_eq!((c.rx_packets, c.tx_packets, c.rx_dropped()), (n, n, 0));
    })
    .unwrap();
}

/// `on_gone = "wait"` with the halves on two threads: the receive half finds the deleted
/// interface gone, the transmit half follows; once the veth is back the halves re-attach
/// (one look opens the sockets for both, each picks its part up) and frames go through again.
#[test]
fn split_halves_wait_for_the_interface_and_reattach() {
    let test = "split_halves_wait_for_the_interface_and_reattach";
    let Some(ns) = ns_with_veth(test, "xhwait", 1) else {
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
        let port = AfXdpPort::open("p0", 0, &cfg).expect("open");
        let (rx, tx) = port.into_halves();
        let rx = rx.into_iter().next().unwrap();
        let start = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let attached = Arc::new(AtomicBool::new(true));
        let (to_tx, from_rx) = mpsc::sync_channel(64);
        let receiver = spawn_receiver(rx, 256, to_tx, stop.clone(), attached.clone(), start);
        let transmitter = spawn_transmitter(tx, 256, from_rx, start);

        let mut echoed = Vec::new();
        echo_bursts(&RawSocket::open("zx1").unwrap(), 0, 64, &mut echoed);
        ip(&["link", "del", "zx0"]);
        let wait_for = |want: bool| {
            let t0 = Instant::now();
            while attached.load(Ordering::Relaxed) != want && t0.elapsed() < GIVE_UP_AFTER {
                std::thread::yield_now();
            }
            assert_eq!(attached.load(Ordering::Relaxed), want);
        };
        wait_for(false);
        ip(&["link", "add", "zx0", "type", "veth", "peer", "name", "zx1"]);
        for dev in ["zx0", "zx1"] {
            let status = std::process::Command::new("ip")
                .args(["netns", "exec", &ns_name, "sysctl", "-qw"])
                .arg(format!("net.ipv6.conf.{dev}.disable_ipv6=1"))
                .status()
                .unwrap();
            assert!(status.success(), "disable IPv6 on {dev}");
            ip(&["link", "set", dev, "up"]);
        }
        // The receive half holds a socket again only after the look that attached the
        // program and registered every new socket.
        wait_for(true);
        echo_bursts(&RawSocket::open("zx1").unwrap(), 64, 64, &mut echoed);
        stop.store(true, Ordering::Relaxed);
        let (rx, rx_pool) = receiver.join().unwrap();
        let (tx, tx_pool, sent) = transmitter.join().unwrap();
        assert_eq!(echoed, (0..128).collect::<Vec<_>>());
        assert_eq!(sent, 128);
        assert_eq!(rx_pool.available() + tx_pool.available(), 256);
        let c = Joined::new(Halves::one(Box::new(rx), Box::new(tx))).counters();
        assert_eq!(
            (c.rx_packets, c.tx_packets, c.tx_link_gone, c.tx_errors),
            (128, 128, 0, 0),
            "{c:?}"
        );
        assert_eq!((c.link_gone_events, c.link_reattached), (1, 1), "{c:?}");
    })
    .unwrap();
}

/// A veth with 4 queues (set with `ethtool -L` on both ends), native XDP (veth then runs the
/// program in the NAPI context of the queue a frame arrives on), one receive half per queue on
/// its own thread: 1000 UDP flows from the peer (one frame each, source ports 1000..2000) are
/// spread by the peer's flow hash over its 4 TX queues, which veth maps one to one onto zx0's
/// RX queues. Every queue receives, each half counts exactly what it received, and nothing is
/// lost.
#[test]
fn every_queue_of_a_multi_queue_veth_receives() {
    let test = "every_queue_of_a_multi_queue_veth_receives";
    let Some(ns) = ns_with_veth(test, "xhmq", 4) else {
        return;
    };
    for dev in ["zx0", "zx1"] {
        ns.exec(&["ethtool", "-L", dev, "rx", "4", "tx", "4"])
            .expect("ethtool -L on veth");
    }
    ns.run_in(|| {
        const FLOWS: u32 = 1000;
        let cfg = AfXdpConfig {
            queues: vec![0, 1, 2, 3],
            xdp_mode: XdpMode::Native,
            rx_ring_size: 2048,
            tx_ring_size: 64,
            ..raw_cfg()
        };
        let port = Box::new(AfXdpPort::open("p0", 0, &cfg).expect("open 4 queues"));
        let Halves { rx, tx: _tx } = port.split();
        assert_eq!(rx.len(), 4);
        let start = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let total = Arc::new(AtomicUsize::new(0));
        let workers: Vec<_> = rx
            .into_iter()
            .map(|mut rx| {
                let (stop, total) = (stop.clone(), total.clone());
                std::thread::spawn(move || {
                    let mut pool = BufPool::new(64, 2048);
                    let mut seqs = Vec::new();
                    while !stop.load(Ordering::Relaxed) {
                        let mut batch = Batch::new();
                        rx.recv(now(start), &mut pool, &mut batch).unwrap();
                        seqs.extend(batch.iter().filter_map(|b| udp_seq(b.as_slice())));
                        total.fetch_add(batch.len(), Ordering::Relaxed);
                        for b in batch.drain() {
                            pool.free(b);
                        }
                    }
                    (rx, seqs)
                })
            })
            .collect();
        let peer = RawSocket::open("zx1").unwrap();
        // In bursts of 100, each received before the next is sent, so that no queue's
        // 256-entry veth ring can overflow whatever the scheduling.
        for first in (0..FLOWS).step_by(100) {
            for seq in first..first + 100 {
                peer.send(&udp_frame(seq)).unwrap();
            }
            let t0 = Instant::now();
            while total.load(Ordering::Relaxed) < (first + 100) as usize
                && t0.elapsed() < GIVE_UP_AFTER
            {
                std::thread::yield_now();
            }
        }
        stop.store(true, Ordering::Relaxed);
        let mut all = Vec::new();
        let mut per_queue = Vec::new();
        for w in workers {
            let (rx, seqs) = w.join().unwrap();
            let c = rx.counters();
            assert_eq!(c.rx_packets, seqs.len() as u64, "{c:?}");
            assert_eq!(c.rx_dropped(), 0, "{c:?}");
            per_queue.push(seqs.len());
            all.extend(seqs);
        }
        all.sort_unstable();
        assert_eq!(all, (0..FLOWS).collect::<Vec<_>>(), "every flow, once");
        assert!(
            per_queue.iter().all(|&n| n > 0),
            "every queue receives: {per_queue:?}"
        );
        eprintln!("frames per queue: {per_queue:?}");
    })
    .unwrap();
}
