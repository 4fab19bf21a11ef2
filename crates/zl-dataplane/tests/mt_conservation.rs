//! The multi-threaded router (`zl_dataplane::mt`) with 1 and 2 receive workers on in-memory
//! and generator ports: routing with the single-thread loop's drop causes, two egress ports,
//! the shared Zombie List observed exactly once per forwarded packet (the transmit side never
//! observes), and the conservation identity exact, a stop mid-run included; with 2 transmit
//! workers too, under tenfold overload on a clock that moves with the offered load.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use zl_control::Snapshot;
use zl_core::Nanos;
use zl_dataplane::config::Forwarding;
use zl_dataplane::dataplane::PortSlot;
use zl_dataplane::forward::Forwarder;
use zl_dataplane::mt::{MtParams, MtRouter};
use zl_dataplane::priority::PriorityMap;
use zl_dataplane::route::{NextHop, RouteTable};
use zl_dataplane::view::{NoObserver, Observer, RouterView};
use zl_dataplane::{DropCause, RouterConfig, StopReason};
use zl_port::{
    Batch, BufPool, Halves, Joined, MemoryPort, Port, PortCounters, PortError, Readiness, RxHalf,
    SplitPort,
};
use zl_qos::{QosEngine, QosParams};
use zl_testkit::config::{ClassToml, FlowToml, PortToml, QosToml, RouterToml};
use zl_wire::{MacAddr, ParseConfig};
use zl_zombie::{ZombieConfig, ZombieParams};

const NEXT_HOP_1: MacAddr = MacAddr([2, 0, 0, 0, 1, 1]);
const NEXT_HOP_2: MacAddr = MacAddr([2, 0, 0, 0, 2, 1]);

/// A 100-byte IPv4/UDP frame from 10.0.`net`.`host` to `dst` with `ttl`, valid header
/// checksum, zero MACs (the router takes frames whatever their destination MAC).
fn frame(net: u8, host: u8, dst: [u8; 4], ttl: u8) -> Vec<u8> {
    zl_testkit::frames::Udp::v4([10, 0, net, host], dst)
        .macs([0; 6], [0; 6])
        .ttl(ttl)
        .len(100)
        .build()
}

/// One class of `max_packets` behind a shaper; `aqm` empty: tail drop.
fn qos(aqm: &str, max_packets: u32, rate_bps: u64) -> QosParams {
    let mut be = ClassToml::new("be").weight(1).max_packets(max_packets);
    if !aqm.is_empty() {
        be = be.aqm(aqm);
    }
    toml::from_str(&QosToml::shaped(rate_bps).class(be).to_toml()).unwrap()
}

const RED: &str = "{ kind = \"red\", min_th = 5.0, max_th = 20.0, max_p = 0.1, w_q = 0.02 }";
const ZL_RED: &str = "{ kind = \"zl-red\", th_min = 5, p_max = 0.15, a = 10 }";

fn zombie_config(m: usize) -> ZombieConfig {
    let p = ZombieParams {
        m,
        p_swap: 0.25,
        ..ZombieParams::default()
    };
    p.validate().unwrap()
}

/// Ports 0 and 1 receive; routes send 192.0.2.0/24 out of port 2 and 198.51.100.0/24 out of
/// port 3, each egress port with its own Zombie List and an engine on it; one transmit worker.
fn router(
    rx: Vec<Box<dyn SplitPort>>,
    qos_params: &QosParams,
    m: usize,
    workers: usize,
    ring_capacity: usize,
) -> MtRouter {
    router_nm(rx, qos_params, m, (workers, 1), ring_capacity)
}

/// The receive ports `rx` (indices 0..k); routes send 192.0.2.0/24 out of port k and
/// 198.51.100.0/24 out of port k + 1, each egress port with its own Zombie List and an engine
/// on it; `(rx_workers, tx_workers)` workers.
fn router_nm(
    rx: Vec<Box<dyn SplitPort>>,
    qos_params: &QosParams,
    m: usize,
    (workers, tx_workers): (usize, usize),
    ring_capacity: usize,
) -> MtRouter {
    let k = rx.len() as u16;
    let mut table = RouteTable::default();
    table
        .add("192.0.2.0/24".parse().unwrap(), NextHop::new(k, NEXT_HOP_1))
        .unwrap();
    table
        .add(
            "198.51.100.0/24".parse().unwrap(),
            NextHop::new(k + 1, NEXT_HOP_2),
        )
        .unwrap();
    let mut ports: Vec<Box<dyn SplitPort>> = rx;
    ports.push(Box::new(
        MemoryPort::cycling("out1", k, Vec::new(), 0).with_capture(),
    ));
    ports.push(Box::new(
        MemoryPort::cycling("out2", k + 1, Vec::new(), 0).with_capture(),
    ));
    let macs = (0..ports.len())
        .map(|i| MacAddr([2, 0, 0, 0, 0, i as u8]))
        .collect();
    let forwarder = Forwarder::new(
        Forwarding::Router(table),
        ParseConfig::default(),
        PriorityMap::default(),
        macs,
    );
    let ports = ports
        .into_iter()
        .map(|port| PortSlot::on_own_list(port, qos_params, zombie_config(m)).unwrap())
        .collect();
    MtRouter::new(
        ports,
        forwarder,
        Vec::new(),
        MtParams {
            rx_workers: workers,
            tx_workers,
            ring_capacity,
            // More buffers per worker than the rings and queues hold together, so a pool never
            // runs dry: overload shows as ring-full and AQM drops.
            pool_per_worker: 4096,
            work_budget: 256,
            seed: 7,
            cpus: Default::default(),
        },
    )
    .expect("every route leads to a port given")
}

/// Every clock read advances 1 µs (all threads together): virtual time.
fn ticking() -> impl Fn() -> Nanos + Sync {
    let t = AtomicU64::new(0);
    move || Nanos(t.fetch_add(1_000, Ordering::Relaxed))
}

/// Runs `r` on the ticking clock until its sources end (draining up to `drain_s` seconds of
/// virtual time) or `stop` is raised.
fn run_virtual(r: &mut MtRouter, stop: &AtomicBool, drain_s: u64) -> StopReason {
    r.run(
        &ticking(),
        stop,
        Nanos::from_secs(drain_s),
        Nanos::from_millis(1),
        &mut NoObserver,
    )
    .unwrap()
}

fn assert_balanced(r: &dyn RouterView) {
    let t = r.totals();
    zl_testkit::conservation::assert_conserved(
        t.received,
        t.forwarded,
        t.dropped(),
        r.queued(),
        format_args!("{t:?}"),
    );
}

/// Per port: 9 frames per cycle = 4 to each egress network, 1 malformed; port 0 also sends
/// one frame with TTL 1 and one to an unrouted address per cycle.
fn sources(cycles: u64) -> Vec<Box<dyn SplitPort>> {
    let mut t0: Vec<Vec<u8>> = (1..=4)
        .flat_map(|h| {
            [
                frame(0, h, [192, 0, 2, 1], 64),
                frame(0, h, [198, 51, 100, 1], 64),
            ]
        })
        .collect();
    t0.push(vec![0u8; 10]);
    t0.push(frame(0, 9, [192, 0, 2, 1], 1));
    t0.push(frame(0, 9, [203, 0, 113, 1], 64));
    let mut t1: Vec<Vec<u8>> = (1..=4)
        .flat_map(|h| {
            [
                frame(1, h, [192, 0, 2, 1], 64),
                frame(1, h, [198, 51, 100, 1], 64),
            ]
        })
        .collect();
    t1.push(vec![0u8; 10]);
    vec![
        Box::new(MemoryPort::cycling("a", 0, t0, 11 * cycles)),
        Box::new(MemoryPort::cycling("b", 1, t1, 9 * cycles)),
    ]
}

fn conserve_with(workers: usize) {
    const CYCLES: u64 = 10_000;
    let mut r = router(
        sources(CYCLES),
        &qos(RED, 64, 200_000_000),
        1000,
        workers,
        256,
    );
    let stop = AtomicBool::new(false);
    let reason = run_virtual(&mut r, &stop, 1000);
    assert_eq!(reason, StopReason::Finished);
    let t = r.totals();
    for p in 0..2 {
        assert_eq!(
            r.port_counters(p).rx_no_buffer,
            0,
            "a worker's pool ran dry"
        );
    }
    assert_eq!(t.received, 20 * CYCLES, "{t:?}");
    assert_eq!(t.drops_of(DropCause::ParseError), 2 * CYCLES, "{t:?}");
    assert_eq!(t.drops_of(DropCause::TtlExpired), CYCLES, "{t:?}");
    assert_eq!(t.drops_of(DropCause::NoRoute), CYCLES, "{t:?}");
    assert_eq!(t.drops_of(DropCause::Shutdown), 0, "{t:?}");
    assert_eq!(r.queued(), 0);
    assert_balanced(&r);
    // Both egress ports sent, each what its port counted; all routed frames rewritten.
    let sent: u64 = (2..4).map(|p| r.port_counters(p).tx_packets).sum();
    assert_eq!(sent, t.forwarded, "{t:?}");
    assert!(r.port_counters(2).tx_packets > 0 && r.port_counters(3).tx_packets > 0);
    assert_eq!(r.worker_totals().len(), workers);
    assert_eq!(
        r.worker_totals().iter().map(|w| w.received).sum::<u64>(),
        t.received
    );
}

#[test]
fn one_rx_worker_conserves_every_packet() {
    conserve_with(1);
}

#[test]
fn two_rx_workers_conserve_every_packet() {
    conserve_with(2);
}

/// Each receive port with two receive queues (two halves), so four receive workers serve two
/// ports: every worker receives, the identity is exact, and a port's counters sum its queues.
#[test]
fn more_receive_workers_than_ports_serve_every_queue() {
    const CYCLES: u64 = 5_000;
    let two_queue_ports: Vec<Box<dyn SplitPort>> = (sources(CYCLES).into_iter())
        .zip(sources(CYCLES))
        .map(|(q0, q1)| {
            let (q0, q1) = (q0.split(), q1.split());
            let rx = q0.rx.into_iter().chain(q1.rx).collect();
            Box::new(Joined::new(Halves { rx, tx: q0.tx })) as Box<dyn SplitPort>
        })
        .collect();
    let mut r = router_nm(
        two_queue_ports,
        &qos(RED, 64, 200_000_000),
        1000,
        (4, 2),
        256,
    );
    let stop = AtomicBool::new(false);
    assert_eq!(run_virtual(&mut r, &stop, 1000), StopReason::Finished);
    let t = r.totals();
    assert_eq!(t.received, 2 * 20 * CYCLES, "{t:?}");
    assert_eq!(t.drops_of(DropCause::ParseError), 2 * 2 * CYCLES, "{t:?}");
    assert_eq!(r.queued(), 0);
    assert_balanced(&r);
    let workers = r.worker_totals();
    assert_eq!(workers.len(), 4);
    // Halves 0 and 1 are port a's queues, 2 and 3 port b's: one each per worker.
    let per_worker: Vec<u64> = workers.iter().map(|w| w.received).collect();
    assert_eq!(
        per_worker,
        [11 * CYCLES, 11 * CYCLES, 9 * CYCLES, 9 * CYCLES]
    );
    assert_eq!(r.port_counters(0).rx_packets, 2 * 11 * CYCLES);
    assert_eq!(r.port_counters(1).rx_packets, 2 * 9 * CYCLES);
    let sent: u64 = (2..4).map(|p| r.port_counters(p).tx_packets).sum();
    assert_eq!(sent, t.forwarded, "{t:?}");
}

#[test]
fn routed_frames_leave_by_their_egress_port() {
    // Rings and queues larger than everything offered: nothing can be dropped but by forwarding.
    let mut r = router(sources(50), &qos("", 2000, 10_000_000_000), 1000, 2, 2000);
    let stop = AtomicBool::new(false);
    run_virtual(&mut r, &stop, 1000);
    let t = r.totals();
    // No congestion: every routable frame with TTL > 1 is forwarded.
    assert_eq!(t.forwarded, 16 * 50, "{t:?}");
    assert_balanced(&r);
    assert_eq!(r.port_counters(2).tx_packets, 8 * 50);
    assert_eq!(r.port_counters(3).tx_packets, 8 * 50);
}

#[test]
fn the_shared_list_is_observed_once_per_forwarded_packet() {
    // M larger than the packets observed: the list only appends, so T counts observations.
    const CYCLES: u64 = 2_000;
    let mut r = router(
        sources(CYCLES),
        &qos(ZL_RED, 64, 100_000_000),
        100_000,
        2,
        256,
    );
    let stop = AtomicBool::new(false);
    run_virtual(&mut r, &stop, 1000);
    let t = r.totals();
    let routed = t.received
        - t.drops_of(DropCause::ParseError)
        - t.drops_of(DropCause::TtlExpired)
        - t.drops_of(DropCause::NoRoute);
    assert_eq!(routed, 16 * CYCLES);
    let observed: u64 = (2..4)
        .map(|p| r.zombie(p).unwrap().total_occurrence())
        .sum();
    // The receive workers observed each routed packet once (ring-full ones included); had
    // the transmit side observed again, T would count admitted packets twice.
    assert_eq!(observed, routed, "{t:?}");
    assert!(
        t.drops_of(DropCause::Early) + t.drops_of(DropCause::Forced) > 0,
        "ZL-RED decided nothing: {t:?}"
    );
    assert_balanced(&r);
}

/// A source that reports each burst it hands over to `on_recv` (its frame count): the hook
/// the tests use to raise a stop after so many frames, or to count the offered load for a
/// clock.
struct Tapped {
    inner: MemoryPort,
    on_recv: Box<dyn FnMut(u64) + Send>,
}

impl Port for Tapped {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn recv(
        &mut self,
        now: Nanos,
        pool: &mut BufPool,
        batch: &mut Batch,
    ) -> Result<usize, PortError> {
        let n = self.inner.recv(now, pool, batch)?;
        (self.on_recv)(n as u64);
        Ok(n)
    }
    fn send(
        &mut self,
        now: Nanos,
        batch: &mut Batch,
        pool: &mut BufPool,
    ) -> Result<usize, PortError> {
        self.inner.send(now, batch, pool)
    }
    fn readiness(&self) -> Readiness {
        self.inner.readiness()
    }
    fn counters(&self) -> PortCounters {
        self.inner.counters()
    }
}

/// The tapped source's halves: its receive half reports each burst, its transmit half is the
/// memory port's.
impl SplitPort for Tapped {
    fn split(self: Box<Self>) -> Halves {
        let Tapped { inner, on_recv } = *self;
        let Halves { rx, tx } = Box::new(inner).split();
        let mut on_recv = Some(on_recv);
        let rx = (rx.into_iter())
            .map(|inner| {
                Box::new(TappedRx {
                    inner,
                    // A memory port has one receive half.
                    on_recv: on_recv.take().unwrap_or_else(|| Box::new(|_| {})),
                }) as Box<dyn RxHalf>
            })
            .collect();
        Halves { rx, tx }
    }
}

struct TappedRx {
    inner: Box<dyn RxHalf>,
    on_recv: Box<dyn FnMut(u64) + Send>,
}

impl RxHalf for TappedRx {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn recv(
        &mut self,
        now: Nanos,
        pool: &mut BufPool,
        batch: &mut Batch,
    ) -> Result<usize, PortError> {
        let n = self.inner.recv(now, pool, batch)?;
        (self.on_recv)(n as u64);
        Ok(n)
    }
    fn readiness(&self) -> Readiness {
        self.inner.readiness()
    }
    fn counters(&self) -> PortCounters {
        self.inner.counters()
    }
}

/// Source `src`'s frames: 4 flows to 192.0.2.1 and 4 to 198.51.100.1, so both egress ports
/// are loaded.
fn two_destination_frames(src: u8) -> Vec<Vec<u8>> {
    (1..=4)
        .flat_map(|h| {
            [
                frame(src, h, [192, 0, 2, 1], 64),
                frame(src, h, [198, 51, 100, 1], 64),
            ]
        })
        .collect()
}

/// Source `w` (its port index too) of `frames` frames of [`two_destination_frames`].
fn two_destination_source(w: u8, frames: u64) -> MemoryPort {
    MemoryPort::cycling("src", w as u16, two_destination_frames(w), frames)
}

/// Two sources of `frames` frames each (4 flows to 192.0.2.1 and 4 to 198.51.100.1, so both
/// egress ports are loaded); the first raises `stop` after `stop_after` of its frames.
fn stopping_sources(
    stop: &Arc<AtomicBool>,
    frames: u64,
    stop_after: u64,
) -> Vec<Box<dyn SplitPort>> {
    (0..2u8)
        .map(|w| {
            // The first source raises `stop` once, when it has handed over `stop_after`
            // frames (then keeps sending); the second never does.
            let mut left = if w == 0 { stop_after } else { u64::MAX };
            let stop = stop.clone();
            Box::new(Tapped {
                inner: two_destination_source(w, frames),
                on_recv: Box::new(move |n| {
                    if left > 0 {
                        left = left.saturating_sub(n);
                        if left == 0 {
                            stop.store(true, Ordering::Relaxed);
                        }
                    }
                }),
            }) as Box<dyn SplitPort>
        })
        .collect()
}

#[test]
fn a_stop_mid_run_counts_what_was_queued() {
    a_stop_mid_run_counts_what_was_queued_with(1);
}

#[test]
fn a_stop_mid_run_with_two_tx_workers_counts_what_was_queued() {
    a_stop_mid_run_counts_what_was_queued_with(2);
}

fn a_stop_mid_run_counts_what_was_queued_with(tx_workers: usize) {
    let stop = Arc::new(AtomicBool::new(false));
    // Endless sources; port 0 raises the stop after 50 000 frames.
    let rx = stopping_sources(&stop, u64::MAX, 50_000);
    // A slow shaper (10 Mbit/s): the queue and the ring are full when the stop comes.
    let mut r = router_nm(rx, &qos(RED, 64, 10_000_000), 1000, (2, tx_workers), 256);
    let reason = run_virtual(&mut r, &stop, 1000);
    assert_eq!(reason, StopReason::Interrupted);
    let t = r.totals();
    assert!(t.received >= 50_000, "{t:?}");
    assert_eq!(r.queued(), 0);
    assert!(t.drops_of(DropCause::Shutdown) > 0, "{t:?}");
    assert!(
        t.drops_of(DropCause::RingFull)
            + t.drops_of(DropCause::Early)
            + t.drops_of(DropCause::Forced)
            + t.drops_of(DropCause::Tail)
            > 0,
        "an overloaded link dropped nothing: {t:?}"
    );
    assert_balanced(&r);
}

/// A config of generator traffic through ZL-RED, built as for the single-thread loop and
/// taken apart into 1 or 2 receive workers: same identity, flow groups included.
fn generator_run(workers: usize) {
    // Each generator's 16 flows of 5 Mbit/s leave by the other port, shaped to 50 Mbit/s.
    let generator = |name: &str, mac: &str, flow: FlowToml| {
        PortToml::generator(name, mac).flow(flow.count(16).rate_bps(5_000_000).size(500))
    };
    let text = RouterToml::new()
        .set("run", "duration_s", 0.2)
        .set("run", "drain_s", "1.0")
        .set("run", "seed", 3)
        .port(generator(
            "gen0",
            "02:00:00:00:00:01",
            FlowToml::udp("udp0", "10.0.0.1", "192.0.2.1"),
        ))
        .port(generator(
            "gen1",
            "02:00:00:00:00:02",
            FlowToml::udp("udp1", "10.0.1.1", "198.51.100.1"),
        ))
        .route("192.0.2.0/24", "gen1", Some("02:00:00:00:01:01"))
        .route("198.51.100.0/24", "gen0", Some("02:00:00:00:02:01"))
        .qos(
            QosToml::shaped(50_000_000)
                .class(ClassToml::new("be").weight(1).max_packets(200).aqm(ZL_RED)),
        )
        .set("metrics", "flow_estimate", true)
        .to_toml();
    let cfg = RouterConfig::from_toml(&text).unwrap();
    let mut r =
        zl_dataplane::build_threaded(&cfg, Path::new("."), &mut |_, _| Ok(None), workers).unwrap();
    let stop = AtomicBool::new(false);
    let reason = run_virtual(&mut r, &stop, 1);
    assert_ne!(reason, StopReason::Interrupted);
    let t = r.totals();
    assert!(t.received > 5_000, "{t:?}");
    assert!(
        t.drops_of(DropCause::Early) + t.drops_of(DropCause::Forced) > 0,
        "{t:?}"
    );
    assert_balanced(&r);
    let groups = r.groups();
    assert_eq!(groups.len(), 2);
    assert_eq!(
        groups.iter().map(|g| g.fate.received).sum::<u64>(),
        t.received
    );
    assert_eq!(
        groups.iter().map(|g| g.fate.forwarded).sum::<u64>(),
        t.forwarded
    );
    for g in groups {
        zl_testkit::conservation::assert_conserved(
            g.fate.received,
            g.fate.forwarded,
            g.fate.dropped(),
            0,
            format_args!("{g:?}"),
        );
    }
    assert!(r.estimated_flows(0).is_some());
}

#[test]
fn generator_traffic_with_one_rx_worker_balances() {
    generator_run(1);
}

#[test]
fn generator_traffic_with_two_rx_workers_balances() {
    generator_run(2);
}

#[test]
fn bridged_ports_forward_unchanged_with_two_rx_workers() {
    // Ports 0 and 1 bridged, port 2 in no pair: its frames are `no_route`. A bridge forwards
    // any frame, so the malformed one goes through too.
    let templates = |net: u8| -> Vec<Vec<u8>> {
        let mut t: Vec<Vec<u8>> = (1..=4).map(|h| frame(net, h, [192, 0, 2, 1], 1)).collect();
        t.push(vec![0u8; 60]);
        t
    };
    let ports: Vec<PortSlot> = (0..3u8)
        .map(|i| {
            let port = MemoryPort::cycling("p", i as u16, templates(i), 5 * 1000);
            PortSlot::new(
                Box::new(port),
                QosEngine::new(&qos("", 10_000, 10_000_000_000)).unwrap(),
            )
        })
        .collect();
    let forwarder = Forwarder::new(
        Forwarding::Bridge(vec![Some(1), Some(0), None]),
        ParseConfig::default(),
        PriorityMap::default(),
        (0..3).map(|i| MacAddr([2, 0, 0, 0, 0, i])).collect(),
    );
    let mut r = MtRouter::new(
        ports,
        forwarder,
        Vec::new(),
        MtParams {
            rx_workers: 2,
            tx_workers: 1,
            ring_capacity: 20_000,
            pool_per_worker: 40_000,
            work_budget: 256,
            seed: 1,
            cpus: Default::default(),
        },
    )
    .expect("every route leads to a port given");
    let stop = AtomicBool::new(false);
    run_virtual(&mut r, &stop, 1000);
    let t = r.totals();
    assert_eq!(t.received, 15_000, "{t:?}");
    // TTL 1 and a malformed frame are no concern of a bridge.
    assert_eq!(t.drops_of(DropCause::TtlExpired), 0, "{t:?}");
    assert_eq!(t.drops_of(DropCause::ParseError), 0, "{t:?}");
    assert_eq!(t.drops_of(DropCause::NoRoute), 5_000, "{t:?}");
    assert_eq!(t.forwarded, 10_000, "{t:?}");
    assert_eq!(r.port_counters(0).tx_packets, 5_000);
    assert_eq!(r.port_counters(1).tx_packets, 5_000);
    assert_eq!(r.port_counters(2).tx_packets, 0);
    assert_balanced(&r);
}

#[test]
fn a_run_after_a_stop_goes_on_counting() {
    a_run_after_a_stop_goes_on_counting_with(1);
}

/// The transmit workers' counters of the first run are carried into the second.
#[test]
fn a_run_after_a_stop_with_two_tx_workers_goes_on_counting() {
    a_run_after_a_stop_goes_on_counting_with(2);
}

fn a_run_after_a_stop_goes_on_counting_with(tx_workers: usize) {
    const PER_PORT: u64 = 60_000;
    let stop = Arc::new(AtomicBool::new(false));
    let rx = stopping_sources(&stop, PER_PORT, 20_000);
    let mut r = router_nm(rx, &qos(RED, 64, 10_000_000), 1000, (2, tx_workers), 256);
    let first = run_virtual(&mut r, &stop, 1000);
    assert_eq!(first, StopReason::Interrupted);
    assert_balanced(&r);
    let after_first = r.totals().received;
    assert!(after_first < 2 * PER_PORT, "the stop came too late");
    // The second run takes the sources to their end; every count goes on from the first.
    stop.store(false, Ordering::Relaxed);
    let t0 = AtomicU64::new(10_000_000_000);
    let clock = || Nanos(t0.fetch_add(1_000, Ordering::Relaxed));
    let second = r
        .run(
            &clock,
            &stop,
            Nanos::from_secs(1000),
            Nanos::from_millis(1),
            &mut NoObserver,
        )
        .unwrap();
    assert_eq!(second, StopReason::Finished);
    assert_balanced(&r);
    let t = r.totals();
    assert_eq!(t.received, 2 * PER_PORT, "{t:?}");
    assert_eq!(
        r.worker_totals().iter().map(|w| w.received).sum::<u64>(),
        t.received
    );
}

/// On links that keep up (no shaper) the transmit worker's queues stay empty: each packet
/// admitted to an empty port leaves at once into the transmit batch, and admission goes in
/// bursts of 32, each followed by its transmit. So ZL-RED (`th_min` 5) sees no queue and
/// drops nothing, although a round admits up to 256 packets per port (without the
/// cut-through: 443 early drops in one run, from the round's own backlog).
#[test]
fn links_that_keep_up_queue_and_drop_nothing() {
    const CYCLES: u64 = 5_000;
    let params: QosParams = toml::from_str(
        &QosToml::new()
            .set("link_rate_bps", 1_000_000_000)
            .class(ClassToml::new("be").weight(1).max_packets(1000).aqm(ZL_RED))
            .to_toml(),
    )
    .unwrap();
    let mut r = router(sources(CYCLES), &params, 1000, 1, 1024);
    let stop = AtomicBool::new(false);
    assert_eq!(run_virtual(&mut r, &stop, 1000), StopReason::Finished);
    let t = r.totals();
    assert_eq!(t.received, 20 * CYCLES, "{t:?}");
    for p in 0..2 {
        assert_eq!(
            r.port_counters(p).rx_no_buffer,
            0,
            "a worker's pool ran dry"
        );
    }
    // 16 of each cycle's 20 frames are routable; the ring to the transmit worker may fill
    // (a counted drop of its own), the queues never.
    let routable = 16 * CYCLES - t.drops_of(DropCause::RingFull);
    assert_eq!(t.forwarded, routable, "{t:?}");
    for cause in [DropCause::Early, DropCause::Forced, DropCause::Tail] {
        assert_eq!(t.drops_of(cause), 0, "{cause:?}: {t:?}");
    }
    assert_balanced(&r);
}

/// Records the conservation terms of every live snapshot of a threaded run.
#[derive(Default)]
struct LiveTotals {
    snapshots: u64,
    min_in_flight: i64,
    balanced: bool,
}

impl Observer<MtRouter> for LiveTotals {
    fn progress(&mut self, now: Nanos, r: &MtRouter) {
        let t = Snapshot::take(r, now).totals;
        self.min_in_flight = self.min_in_flight.min(t.in_flight);
        self.balanced &= t.received as i128
            == (t.forwarded + t.dropped + t.queued) as i128 + t.in_flight as i128;
        self.snapshots += 1;
    }
}

/// A live scrape of a threaded run that reads the receive workers' counts as they were at
/// their last publish (up to half a period old) against the transmit worker's current ones
/// finds the transmit side ahead, having counted packets the receive side has not: received
/// minus (forwarded + dropped + queued) comes out negative (-58 .. -27 in six scrapes of a
/// real run). The receive side must lead: `in_flight`, the packets received whose fate is not
/// counted yet, is never negative in any snapshot.
fn live_snapshots_lead_with_the_receive_side(workers: (usize, usize)) {
    const CYCLES: u64 = 20_000;
    let mut r = router_nm(
        sources(CYCLES),
        &qos(RED, 64, 200_000_000),
        1000,
        workers,
        256,
    );
    let stop = AtomicBool::new(false);
    let mut live = LiveTotals {
        balanced: true,
        ..LiveTotals::default()
    };
    let reason = r
        .run(
            &ticking(),
            &stop,
            Nanos::from_secs(1000),
            Nanos::from_micros(200),
            &mut live,
        )
        .unwrap();
    assert_eq!(reason, StopReason::Finished);
    assert!(live.snapshots > 20, "{} snapshots", live.snapshots);
    assert!(live.balanced);
    assert!(
        live.min_in_flight >= 0,
        "a live snapshot counted more fates than received packets: in_flight {} \
         (in {} snapshots)",
        live.min_in_flight,
        live.snapshots
    );
    assert_balanced(&r);
    assert_eq!(Snapshot::take(&r, Nanos::ZERO).totals.in_flight, 0);
}

#[test]
fn live_snapshots_of_one_rx_worker_never_count_more_fates_than_packets() {
    live_snapshots_lead_with_the_receive_side((1, 1));
}

#[test]
fn live_snapshots_of_two_rx_workers_never_count_more_fates_than_packets() {
    live_snapshots_lead_with_the_receive_side((2, 1));
}

/// With two transmit workers a snapshot takes both workers' egress stages and counters at one
/// handover (`MtRouter::take_shards`): the receive side still leads.
#[test]
fn live_snapshots_of_two_rx_and_two_tx_workers_never_count_more_fates_than_packets() {
    live_snapshots_lead_with_the_receive_side((2, 2));
}

/// Virtual time that moves with the offered load: `gap` per frame the sources have handed
/// over, then (once all `total` are out) 1 µs per read, so the queues drain. However the
/// threads are scheduled, the sources offer exactly one frame per `gap` of this clock.
fn load_clock(emitted: Arc<AtomicU64>, total: u64, gap: Nanos) -> impl Fn() -> Nanos + Sync {
    let after = AtomicU64::new(0);
    move || {
        // Relaxed: a count; each thread's reads of it never go backwards.
        let e = emitted.load(Ordering::Relaxed);
        let extra = if e >= total {
            after.fetch_add(1_000, Ordering::Relaxed) + 1_000
        } else {
            0
        };
        Nanos(e * gap.0 + extra)
    }
}

/// `rx_workers` receive and `tx_workers` transmit workers under 10x overload: three sources
/// of `PER_SOURCE` 100-byte frames, half to each egress port, offered at 10 times each egress
/// port's shaped rate (80 Mb/s: 10 µs a frame) on the load clock. Everything is counted
/// exactly (received = forwarded + drops, nothing queued, nothing lost on the way back to the
/// pools), each egress port (one per transmit worker) sends what its port counts, and no more
/// than its rate allows: at most a tenth of the load plus what the ring, the queue and the
/// shaper's burst hold.
fn conserve_under_overload(rx_workers: usize, tx_workers: usize) {
    const PER_SOURCE: u64 = 20_000;
    const SOURCES: u64 = 3;
    const TOTAL: u64 = PER_SOURCE * SOURCES;
    const RING: usize = 256;
    const QUEUE: u32 = 64;
    let emitted = Arc::new(AtomicU64::new(0));
    let sources: Vec<Box<dyn SplitPort>> = (0..SOURCES as u8)
        .map(|s| {
            // Counts what every source hands over, for the load-driven clock.
            let emitted = emitted.clone();
            Box::new(Tapped {
                inner: two_destination_source(s, PER_SOURCE),
                // Relaxed: the count alone is read (by the clock).
                on_recv: Box::new(move |n| {
                    emitted.fetch_add(n, Ordering::Relaxed);
                }),
            }) as Box<dyn SplitPort>
        })
        .collect();
    let mut r = router_nm(
        sources,
        &qos(RED, QUEUE, 80_000_000),
        1000,
        (rx_workers, tx_workers),
        RING,
    );
    // Each egress port gets half the frames: one per 2 gaps, 10 times its 10 µs a frame.
    let clock = load_clock(emitted, TOTAL, Nanos(500));
    let stop = AtomicBool::new(false);
    let reason = r
        .run(
            &clock,
            &stop,
            Nanos::from_secs(1000),
            Nanos::from_millis(1),
            &mut NoObserver,
        )
        .unwrap();
    assert_eq!(reason, StopReason::Finished);
    let t = r.totals();
    assert_eq!(t.received, TOTAL, "{t:?}");
    assert_eq!(r.queued(), 0);
    assert_eq!(t.drops_of(DropCause::Shutdown), 0, "{t:?}");
    assert_balanced(&r);
    assert_eq!(r.returns_lost(), 0);
    for p in 0..SOURCES as usize {
        assert_eq!(
            r.port_counters(p).rx_no_buffer,
            0,
            "a worker's pool ran dry"
        );
    }
    assert_eq!(r.worker_totals().len(), rx_workers);
    assert_eq!(
        r.worker_totals().iter().map(|w| w.received).sum::<u64>(),
        t.received
    );
    let egress = [SOURCES as usize, SOURCES as usize + 1];
    let sent: Vec<u64> = egress
        .iter()
        .map(|&p| r.port_counters(p).tx_packets)
        .collect();
    assert_eq!(sent.iter().sum::<u64>(), t.forwarded, "{t:?}");
    // Each egress port (served by its own transmit worker when tx_workers = 2) sent, within
    // its rate: the burst (the shaper's default is one frame's worth; 32 allowed here, a
    // transmit batch), the class queue and the ring may leave on top of a tenth.
    for (&p, &n) in egress.iter().zip(&sent) {
        let bound = TOTAL / 2 / 10 + RING as u64 + QUEUE as u64 + 32;
        assert!(
            n > 0 && n <= bound,
            "port {p} sent {n} (bound {bound}): {t:?}"
        );
    }
    // The overload showed as counted drops: AQM and ring-full.
    let aqm = t.drops_of(DropCause::Early) + t.drops_of(DropCause::Forced);
    assert!(aqm > 0, "{t:?}");
    assert!(t.dropped() >= TOTAL * 8 / 10, "{t:?}");
}

#[test]
fn two_rx_and_two_tx_workers_conserve_under_tenfold_overload() {
    conserve_under_overload(2, 2);
}

#[test]
fn three_rx_and_two_tx_workers_conserve_under_tenfold_overload() {
    conserve_under_overload(3, 2);
}

#[test]
fn one_rx_and_one_tx_worker_conserve_under_tenfold_overload() {
    conserve_under_overload(1, 1);
}

/// Records, at every progress call during a run, the CPUs each worker thread of this process
/// may run on (`/proc/self/task/*/status`), by thread name, and the observing (calling)
/// thread's own. It raises `stop` once it has seen `expect` workers at one call three times
/// (or after 100 000 calls, so a missing worker fails the test instead of hanging it): the
/// sources are endless, so no worker ends before it has been seen.
struct CpuWatch {
    workers: std::collections::BTreeMap<String, String>,
    caller: Option<Vec<usize>>,
    expect: usize,
    full_views: u32,
    calls: u32,
    stop: Arc<AtomicBool>,
}

impl Observer<MtRouter> for CpuWatch {
    fn progress(&mut self, _: Nanos, _: &MtRouter) {
        self.calls += 1;
        let mut running = false;
        let mut seen = 0;
        for task in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
            let name = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
            let name = name.trim();
            if !name.starts_with("zlrouter-") {
                continue;
            }
            let status = std::fs::read_to_string(task.path().join("status")).unwrap_or_default();
            if let Some(l) = status.lines().find(|l| l.starts_with("Cpus_allowed_list:")) {
                let list = l.trim_start_matches("Cpus_allowed_list:").trim().to_owned();
                self.workers.insert(name.to_owned(), list);
                running = true;
                seen += 1;
            }
        }
        // The last call comes after the run, its workers gone.
        if running {
            self.caller = Some(zl_dataplane::cpus::allowed_cpus().unwrap());
        }
        if seen == self.expect {
            self.full_views += 1;
        }
        if self.full_views >= 3 || self.calls >= 100_000 {
            self.stop.store(true, Ordering::Relaxed);
        }
    }
}

/// A DPDK EAL pins the thread that initialises it to one core, and threads inherit their
/// creator's CPUs: `WorkerCpus::Any` gives every worker back all the process's CPUs,
/// `Pinned` puts each on its own, and the calling thread returns to its CPUs after the run.
#[test]
fn workers_run_on_the_cpus_they_are_given_not_the_callers_pin() {
    use zl_dataplane::cpus::{allowed_cpus, set_allowed_cpus, WorkerCpus};
    let all = allowed_cpus().unwrap();
    if all.len() < 2 {
        eprintln!("SKIPPED workers_run_on_the_cpus_they_are_given: one CPU ({all:?})");
        return;
    }
    let (first, last) = (all[0], *all.last().unwrap());
    let list = |cpus: &[usize]| {
        if cpus.len() == 1 {
            cpus[0].to_string()
        } else {
            format!("{}-{}", cpus[0], cpus[cpus.len() - 1])
        }
    };
    let contiguous = all.windows(2).all(|w| w[1] == w[0] + 1);
    let qos = qos(ZL_RED, 1000, 1_000_000_000);
    let cases = [
        (WorkerCpus::Inherit, list(&[first]), vec![first]),
        (WorkerCpus::Any(all.clone()), list(&all), all.clone()),
        (WorkerCpus::Pinned(vec![last]), list(&[last]), vec![last]),
    ];
    for (placement, want, caller_during) in cases {
        if matches!(placement, WorkerCpus::Any(_)) && !contiguous {
            continue; // the `a-b` form below names contiguous sets only
        }
        let (placed, qos) = (placement.clone(), qos.clone());
        let watch = std::thread::spawn(move || {
            // As `rte_eal_init` does to its main lcore.
            set_allowed_cpus(&[first]).unwrap();
            // Endless sources: the watch stops the run once it has seen every worker.
            let endless = (0..2u8)
                .map(|w| Box::new(two_destination_source(w, u64::MAX)) as Box<dyn SplitPort>)
                .collect();
            let mut r = router_nm(endless, &qos, 1000, (2, 2), 4096);
            r.place_workers(placed);
            let stop = Arc::new(AtomicBool::new(false));
            let mut watch = CpuWatch {
                workers: Default::default(),
                caller: None,
                expect: 3,
                full_views: 0,
                calls: 0,
                stop: stop.clone(),
            };
            let reason = r
                .run(
                    &ticking(),
                    &stop,
                    Nanos::from_secs(1),
                    Nanos::from_millis(1),
                    &mut watch,
                )
                .unwrap();
            assert_eq!(reason, StopReason::Interrupted);
            assert_balanced(&r);
            (watch, allowed_cpus().unwrap())
        });
        let (watch, caller_after) = watch.join().unwrap();
        let names: Vec<&str> = watch.workers.keys().map(String::as_str).collect();
        assert_eq!(
            names,
            ["zlrouter-rx0", "zlrouter-rx1", "zlrouter-tx1"],
            "{placement:?}"
        );
        for (name, cpus) in &watch.workers {
            assert_eq!(cpus, &want, "{name} with {placement:?}");
        }
        assert_eq!(watch.caller, Some(caller_during), "{placement:?}");
        assert_eq!(
            caller_after,
            [first],
            "{placement:?}: the caller's CPUs after the run"
        );
    }
}

#[test]
fn both_engines_refuse_forwarding_to_a_port_they_do_not_have() {
    let slots = || -> Vec<PortSlot> {
        (0..2u16)
            .map(|i| {
                let port = MemoryPort::cycling("p", i, vec![frame(1, 1, [192, 0, 2, 1], 1)], 10);
                PortSlot::new(
                    Box::new(port),
                    QosEngine::new(&qos("", 100, 10_000_000_000)).unwrap(),
                )
            })
            .collect()
    };
    let forwarder = || {
        Forwarder::new(
            Forwarding::Bridge(vec![Some(1), Some(5)]),
            ParseConfig::default(),
            PriorityMap::default(),
            (0..2).map(|i| MacAddr([2, 0, 0, 0, 0, i])).collect(),
        )
    };
    let params = MtParams {
        rx_workers: 1,
        tx_workers: 1,
        ring_capacity: 64,
        pool_per_worker: 256,
        work_budget: 32,
        seed: 1,
        cpus: Default::default(),
    };
    let threaded = MtRouter::new(slots(), forwarder(), Vec::new(), params)
        .err()
        .expect("a bridge peer beyond the ports is refused");
    let single = zl_dataplane::Dataplane::new(
        slots(),
        zl_port::BufPool::new(256, zl_port::DEFAULT_BUF_SIZE),
        forwarder(),
        1,
        32,
        Vec::new(),
    )
    .err()
    .expect("refused by the single-thread loop too");
    assert_eq!(threaded, single);
    assert_eq!(
        threaded.to_string(),
        "a bridge peer leads to port index 5, but the data plane has 2 ports"
    );
}
