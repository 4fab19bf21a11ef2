//! A DPDK port's queues as halves on their own threads: the receive and transmit
//! halves of one port at once, a forward between two ports' halves, `queues = N` receive
//! queues each receiving, and `Joined` of the halves behaving as the port. One test, because
//! the EAL can be initialised only once per process; skips with a message without DPDK.

#![cfg_attr(not(dpdk_available), allow(dead_code))]

/// A frame of `len` bytes numbered `seq` (EtherType 0x88B5, the number at bytes 14..18).
fn frame(seq: u32, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    f[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
    f[14..18].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in f[18..].iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(13) ^ (seq as u8);
    }
    f
}

fn seq_of(f: &[u8]) -> u32 {
    u32::from_be_bytes(f[14..18].try_into().unwrap())
}

#[test]
fn dpdk_queues_as_halves_on_threads() {
    if !zl_dpdk::AVAILABLE {
        eprintln!(
            "SKIPPED dpdk_queues_as_halves_on_threads: built without DPDK \
             (run `cargo test -p zl-dpdk --features dpdk` with libdpdk-dev installed)"
        );
    } else {
        #[cfg(dpdk_available)]
        with_dpdk::run_all();
    }
}

#[cfg(dpdk_available)]
mod with_dpdk {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    use zl_core::Nanos;
    use zl_dpdk::{DpdkError, DpdkPort, DpdkPortConfig, Eal, EalConfig};
    use zl_port::{Batch, BufPool, Halves, Joined, Port, PortCounters, SplitPort};

    pub fn run_all() {
        let prefix = format!("zlr-test-q-{}", std::process::id());
        let eal = Eal::init(&EalConfig::no_huge(&prefix)).expect("EAL init without hugepages");
        let _runtime_dir = RemoveOnDrop(std::path::PathBuf::from("/var/run/dpdk").join(&prefix));
        halves_of_one_port_send_and_receive_at_once(eal);
        halves_of_two_ports_forward_every_frame(eal);
        every_receive_queue_receives_on_its_own_thread(eal);
        joined_halves_behave_as_the_port(eal);
        queues_beyond_the_device_are_refused(eal);
        worker_threads_become_lcores_and_give_them_back(eal);
        #[cfg(feature = "zero-copy")]
        zero_copy_forwarding_writes_what_copying_writes(eal);
    }

    /// A thread the EAL did not start is no lcore (no mempool cache) until its first burst
    /// makes it one, and its end releases the lcore: 300 threads in turn (more than DPDK's
    /// `RTE_MAX_LCORE`, 128) each become an lcore, on both halves.
    fn worker_threads_become_lcores_and_give_them_back(eal: &'static Eal) {
        assert_eq!(zl_dpdk::lcore_id(), Some(0), "the EAL's main lcore");
        let port = DpdkPort::open(eal, "lc", 7, &DpdkPortConfig::new("net_null7")).unwrap();
        let Halves { rx, tx } = Box::new(port).split();
        let mut halves = (rx.into_iter().next().unwrap(), tx);
        let mut ids = std::collections::BTreeSet::new();
        for k in 0..300u32 {
            let receive = k % 2 == 0;
            let (back, id) = std::thread::spawn(move || {
                let (mut rx, mut tx) = halves;
                assert_eq!(
                    zl_dpdk::lcore_id(),
                    None,
                    "thread {k} before its first burst"
                );
                let mut pool = BufPool::new(64, 2048);
                if receive {
                    let mut batch = Batch::new();
                    assert!(rx.recv(Nanos(1), &mut pool, &mut batch).unwrap() > 0);
                    for b in batch.drain() {
                        pool.free(b);
                    }
                } else {
                    let mut batch = batch_of(&mut pool, 0..4);
                    assert_eq!(tx.send(Nanos(1), &mut batch, &mut pool).unwrap(), 4);
                }
                ((rx, tx), zl_dpdk::lcore_id())
            })
            .join()
            .unwrap();
            halves = back;
            ids.insert(id.unwrap_or_else(|| panic!("thread {k} is no lcore after a burst")));
        }
        assert!(!ids.contains(&0), "{ids:?}");
    }

    /// The EAL's runtime directory, removed when the test ends (also on failure).
    struct RemoveOnDrop(std::path::PathBuf);

    impl Drop for RemoveOnDrop {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn batch_of(pool: &mut BufPool, seqs: std::ops::Range<u32>) -> Batch {
        let mut batch = Batch::new();
        for s in seqs {
            let mut b = pool.alloc().expect("the sender's pool holds a batch");
            b.copy_from(&frame(s, 60 + (s as usize % 200))).unwrap();
            batch.push(b).unwrap();
        }
        batch
    }

    /// net_ring loops a port's transmit queue back to its receive queue: one thread sends
    /// through the transmit half while another receives through the receive half, the sender
    /// keeping at most 16 batches ahead of the receiver (the ring holds 1023 frames), so both
    /// run at once and every frame arrives once, in order, byte for byte; the device stays open
    /// for the half still held after the other is dropped.
    fn halves_of_one_port_send_and_receive_at_once(eal: &'static Eal) {
        const BATCHES: u32 = 400;
        let port = DpdkPort::open(eal, "loop", 3, &DpdkPortConfig::new("net_ring20")).unwrap();
        let Halves { rx, mut tx } = Box::new(port).split();
        assert_eq!(rx.len(), 1);
        let mut rx = rx.into_iter().next().unwrap();
        let done = Arc::new(AtomicBool::new(false));
        let received = Arc::new(AtomicU64::new(0));
        let (sender_done, receiver_progress) = (done.clone(), received.clone());
        let sender = std::thread::spawn(move || {
            let mut pool = BufPool::new(32, 2048);
            for k in 0..BATCHES {
                // Relaxed: a count only; the ring orders the frames themselves.
                while u64::from(k) * 32 > receiver_progress.load(Ordering::Relaxed) + 16 * 32 {
                    std::thread::yield_now();
                }
                let mut batch = batch_of(&mut pool, k * 32..(k + 1) * 32);
                tx.send(Nanos(1), &mut batch, &mut pool).unwrap();
                assert_eq!(pool.available(), 32, "every buffer back after a send");
            }
            // Release: every frame the ring took is in it before the receiver sees `done`.
            sender_done.store(true, Ordering::Release);
            tx
        });
        let mut pool = BufPool::new(64, 2048);
        let mut got = Vec::new();
        let mut batch = Batch::new();
        loop {
            // Acquire before the receive, so an empty receive after it means the ring is empty.
            let finished = done.load(Ordering::Acquire);
            let n = rx.recv(Nanos(2), &mut pool, &mut batch).unwrap();
            for b in batch.drain() {
                got.push(b.as_slice().to_vec());
                pool.free(b);
            }
            received.fetch_add(n as u64, Ordering::Relaxed);
            if n == 0 && finished {
                break;
            }
        }
        let mut tx = sender.join().unwrap();
        let (r, t) = (rx.counters(), tx.counters());
        let offered = u64::from(BATCHES) * 32;
        assert_eq!(
            t.tx_packets + t.tx_ring_full + t.tx_no_buffer,
            offered,
            "{t:?}"
        );
        assert_eq!(t.tx_errors, 0);
        assert_eq!(r.rx_packets, t.tx_packets, "every frame sent arrives once");
        assert_eq!(r.rx_packets, got.len() as u64);
        assert_eq!(r.rx_bytes, t.tx_bytes);
        assert_eq!(
            (r.tx_packets, t.rx_packets),
            (0, 0),
            "each half counts its side"
        );
        let seqs: Vec<u32> = got.iter().map(|f| seq_of(f)).collect();
        assert_eq!(
            seqs,
            (0..BATCHES * 32).collect::<Vec<_>>(),
            "in order, once each"
        );
        for f in &got {
            let s = seq_of(f);
            assert_eq!(f, &frame(s, 60 + (s as usize % 200)), "frame {s} unchanged");
        }
        // The transmit half alone keeps the device open.
        drop(rx);
        let mut pool = BufPool::new(32, 2048);
        let mut batch = batch_of(&mut pool, 0..5);
        assert_eq!(tx.send(Nanos(3), &mut batch, &mut pool).unwrap(), 5);
    }

    /// A receive half of one port and the transmit half of another on two threads, batches
    /// handed over a channel (as the threaded router's workers do): every frame forwarded.
    fn halves_of_two_ports_forward_every_frame(eal: &'static Eal) {
        let mut src = DpdkPort::open(eal, "src", 0, &DpdkPortConfig::new("net_ring21")).unwrap();
        let dst = DpdkPort::open(eal, "dst", 1, &DpdkPortConfig::new("net_ring22")).unwrap();
        let frames: Vec<Vec<u8>> = (0..1000).map(|s| frame(s, 64 + s as usize % 900)).collect();
        // net_ring holds what it was sent until it is received: the source's input.
        assert_eq!(src.send_frames(frames.iter().map(|f| f.as_slice())), 1000);
        let src = Box::new(src).split();
        let Halves {
            rx: dst_rx,
            tx: mut dst_tx,
        } = Box::new(dst).split();
        let mut src_rx = src.rx.into_iter().next().unwrap();
        let (to_tx, from_rx) = std::sync::mpsc::sync_channel::<Batch>(4);
        let receiver = std::thread::spawn(move || {
            let mut pool = BufPool::new(1100, 2048);
            loop {
                let mut batch = Batch::new();
                if src_rx.recv(Nanos(1), &mut pool, &mut batch).unwrap() == 0 {
                    break;
                }
                to_tx.send(batch).unwrap();
            }
            src_rx
        });
        let transmitter = std::thread::spawn(move || {
            let mut pool = BufPool::empty(1100, 2048);
            let mut sent = 0;
            for mut batch in from_rx {
                sent += dst_tx.send(Nanos(2), &mut batch, &mut pool).unwrap();
            }
            (dst_tx, sent)
        });
        let src_rx = receiver.join().unwrap();
        let (dst_tx, sent) = transmitter.join().unwrap();
        assert_eq!(sent, 1000);
        assert_eq!(src_rx.counters().rx_packets, 1000);
        assert_eq!(dst_tx.counters().tx_packets, 1000);
        // The destination ring gives back what was forwarded, in order, byte for byte.
        let mut dst = Joined::new(Halves {
            rx: dst_rx,
            tx: dst_tx,
        });
        let mut pool = BufPool::new(64, 2048);
        let mut batch = Batch::new();
        let mut out = Vec::new();
        while dst.recv(Nanos(3), &mut pool, &mut batch).unwrap() > 0 {
            for b in batch.drain() {
                out.push(b.as_slice().to_vec());
                pool.free(b);
            }
        }
        assert_eq!(out, frames);
        let c = dst.counters();
        assert_eq!((c.rx_packets, c.tx_packets), (1000, 1000));
    }

    /// `queues = 4` on net_null, whose every receive queue always has a full burst: four
    /// receive halves, each on its own thread, each receiving exactly what it asked for, and
    /// the joined counters their sum.
    fn every_receive_queue_receives_on_its_own_thread(eal: &'static Eal) {
        let mut cfg = DpdkPortConfig::new("net_null20");
        cfg.queues = 4;
        cfg.mbufs = 2047;
        let port = DpdkPort::open(eal, "rss", 2, &cfg).unwrap();
        assert_eq!(port.queues(), 4);
        let Halves { rx, tx } = Box::new(port).split();
        assert_eq!(rx.len(), 4);
        let workers: Vec<_> = rx
            .into_iter()
            .map(|mut q| {
                std::thread::spawn(move || {
                    let mut pool = BufPool::new(32, 2048);
                    let mut batch = Batch::new();
                    let mut got = 0;
                    for _ in 0..100 {
                        got += q.recv(Nanos(1), &mut pool, &mut batch).unwrap();
                        assert!(batch.iter().all(|b| b.in_port == 2 && b.len() == 64));
                        for b in batch.drain() {
                            pool.free(b);
                        }
                    }
                    (q, got)
                })
            })
            .collect();
        let mut rx = Vec::new();
        for w in workers {
            let (q, got) = w.join().unwrap();
            assert_eq!(got, 3200, "each queue a full burst per call");
            let c = q.counters();
            assert_eq!((c.rx_packets, c.rx_bytes), (3200, 3200 * 64), "{c:?}");
            rx.push(q);
        }
        let joined = Joined::new(Halves { rx, tx });
        let c = joined.counters();
        assert_eq!(
            (c.rx_packets, c.rx_no_buffer, c.rx_ring_full),
            (12800, 0, 0)
        );
        assert_eq!(joined.name(), "rss");
    }

    /// The same sends and receives on a port and on `Joined` of its halves: the same frames,
    /// counters and buffers back.
    fn joined_halves_behave_as_the_port(eal: &'static Eal) {
        fn exercise(port: &mut dyn Port) -> (Vec<Vec<u8>>, PortCounters, usize) {
            let mut pool = BufPool::new(64, 2048);
            let mut out = Vec::new();
            for round in 0..3u32 {
                let mut batch = batch_of(&mut pool, round * 20..round * 20 + 20 + round);
                assert_eq!(
                    port.send(Nanos(1), &mut batch, &mut pool).unwrap(),
                    20 + round as usize
                );
                while port.recv(Nanos(2), &mut pool, &mut batch).unwrap() > 0 {
                    for b in batch.drain() {
                        assert_eq!((b.in_port, b.rx_time), (5, Nanos(2)));
                        out.push(b.as_slice().to_vec());
                        pool.free(b);
                    }
                }
            }
            (out, port.counters(), pool.available())
        }
        let mut plain = DpdkPort::open(eal, "p", 5, &DpdkPortConfig::new("net_ring23")).unwrap();
        let split = DpdkPort::open(eal, "p", 5, &DpdkPortConfig::new("net_ring24")).unwrap();
        let mut joined = Joined::new(Box::new(split).split());
        let a = exercise(&mut plain);
        let b = exercise(&mut joined);
        assert_eq!(a.0.len(), 63);
        assert_eq!(a.1.rx_packets, 63);
        assert_eq!(a.2, 64);
        assert_eq!(a, b);
    }

    /// More queues than the device has: refused, naming `queues`; the device can then be
    /// opened with as many as it has.
    fn queues_beyond_the_device_are_refused(eal: &'static Eal) {
        let mut cfg = DpdkPortConfig::new("net_ring25");
        cfg.queues = 1024;
        let err = DpdkPort::open(eal, "big", 6, &cfg).unwrap_err();
        assert!(matches!(err, DpdkError::Config { .. }), "{err:?}");
        assert!(err.to_string().contains("queues 1024"), "{err}");
        cfg.queues = 2;
        let port = DpdkPort::open(eal, "big", 6, &cfg).unwrap();
        assert_eq!(port.queues(), 2);
    }

    /// The same pcap through a forwarding loop twice, net_pcap to net_pcap: copying, then with
    /// `zero_copy` on the receiving port. The loop rewrites a byte of every frame in place (as
    /// the router rewrites headers) and lengthens every seventh frame by a byte (which moves a
    /// lent frame into the buffer's own room, so bursts mix lent and copied frames). Both
    /// output files hold the same bytes; with zero-copy every other frame was lent, and every
    /// mbuf and buffer is back at the end.
    #[cfg(feature = "zero-copy")]
    fn zero_copy_forwarding_writes_what_copying_writes(eal: &'static Eal) {
        let dir = std::env::temp_dir().join(format!("zlr-dpdk-zc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let input = dir.join("in.pcap");
        let empty = dir.join("empty.pcap");
        let frames: Vec<Vec<u8>> = (0..300)
            .map(|s| frame(s, 60 + (s as usize * 37) % 1400))
            .collect();
        zl_testkit::pcap::write_spaced(&input, &frames, std::time::Duration::from_micros(1));
        zl_testkit::pcap::write_spaced(&empty, &[], std::time::Duration::from_micros(1));
        let mut outputs = Vec::new();
        for (run, zero_copy) in [false, true].into_iter().enumerate() {
            let out = dir.join(format!("out{run}.pcap"));
            let mut src_cfg = DpdkPortConfig::new(&format!(
                "net_pcap{},rx_pcap={},tx_pcap={}",
                30 + 2 * run,
                input.display(),
                dir.join(format!("unused{run}.pcap")).display()
            ));
            src_cfg.zero_copy = zero_copy;
            let dst_cfg = DpdkPortConfig::new(&format!(
                "net_pcap{},rx_pcap={},tx_pcap={}",
                31 + 2 * run,
                empty.display(),
                out.display()
            ));
            let mut src = DpdkPort::open(eal, "src", 0, &src_cfg).unwrap();
            let mut dst = DpdkPort::open(eal, "dst", 1, &dst_cfg).unwrap();
            let rx_pool = src.pool_available();
            let mut pool = BufPool::new(64, 2048);
            let mut batch = Batch::new();
            let (mut forwarded, mut lent, mut seen) = (0, 0, 0);
            while seen < frames.len() {
                let first = seen;
                seen += src.recv(Nanos(1), &mut pool, &mut batch).unwrap();
                for (i, b) in batch.iter_mut().enumerate() {
                    lent += usize::from(b.is_lent());
                    b.as_mut_slice()[18] ^= 0xff;
                    if (first + i) % 7 == 0 {
                        let n = b.len();
                        b.set_len(n + 1).unwrap();
                        b.as_mut_slice()[n] = 0xee;
                    }
                }
                forwarded += dst.send(Nanos(2), &mut batch, &mut pool).unwrap();
            }
            assert_eq!(forwarded, frames.len());
            assert_eq!(lent, if zero_copy { frames.len() } else { 0 });
            assert_eq!(pool.available(), 64, "every buffer back");
            assert_eq!(src.pool_available(), rx_pool, "every mbuf back");
            let (s, d) = (src.counters(), dst.counters());
            assert_eq!((s.rx_packets, d.tx_packets, d.tx_dropped()), (300, 300, 0));
            assert_eq!(
                s.rx_bytes + 300 / 7 + 1,
                d.tx_bytes,
                "one byte more every seventh"
            );
            drop((src, dst)); // closing the device writes the file
            outputs.push(zl_testkit::pcap::read_frames(&out));
        }
        let want: Vec<Vec<u8>> = frames
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let mut f = f.clone();
                f[18] ^= 0xff;
                if i % 7 == 0 {
                    f.push(0xee);
                }
                f
            })
            .collect();
        assert_eq!(outputs[0], want, "the copying run");
        assert_eq!(
            outputs[0], outputs[1],
            "zero-copy writes what copying writes"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
