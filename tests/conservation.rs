//! The conservation identity at 1x and 10x overload, checked exactly at every progress point
//! of the run and at its end, with memory bounded by the configured buffers.

mod common;

use std::sync::atomic::AtomicBool;

use zl_core::Nanos;
use zl_dataplane::{build, Dataplane, DropCause, Observer, RouterConfig};
use zl_testkit::config::{quoted, ClassToml, FlowToml, PortToml, QosToml, RouterToml};

/// `load` times the 10 Mbit/s egress, split over a well-behaved and a misbehaving group, with
/// ZL-RED on best effort and a tail-drop EF class.
fn config(load: f64) -> RouterConfig {
    let per_flow = (10_000_000.0 * load / 25.0) as u64;
    let text = RouterToml::new()
        .set("run", "duration_s", "2.0")
        .set("run", "drain_s", 0.05)
        .set("run", "seed", 11)
        .port(
            PortToml::generator("in", "02:00:00:00:00:01")
                .flow(
                    FlowToml::udp("many", "10.0.0.1", "10.9.0.1")
                        .count(20)
                        .rate_bps(per_flow)
                        .size(64)
                        .set("size_max", 1514)
                        .set("arrival", quoted("poisson")),
                )
                .flow(
                    FlowToml::udp("hogs", "10.1.0.1", "10.9.0.1")
                        .count(1)
                        .rate_bps(per_flow * 3)
                        .size(1000)
                        .misbehaving(),
                )
                .flow(
                    FlowToml::udp("voice", "10.2.0.1", "10.9.0.1")
                        .count(2)
                        .rate_bps(per_flow)
                        .size(200)
                        .dscp("ef"),
                )
                // Only 10.9/16 is routed: this group is unroutable.
                .flow(
                    FlowToml::udp("stray", "10.3.0.1", "172.16.0.1")
                        .count(1)
                        .rate_bps(100_000)
                        .size(100),
                ),
        )
        .port(PortToml::sink("out", "02:00:00:00:00:02"))
        .route("10.9.0.0/16", "out", Some("02:00:00:00:00:03"))
        .qos(
            QosToml::new()
                .set("shaper", "{ rate_bps = 10_000_000 }")
                .class(ClassToml::new("ef").strict_rank(0).max_packets(20))
                .class(
                    ClassToml::new("be")
                        .weight(1)
                        .max_packets(200)
                        .set(
                            "buffer",
                            r#"{ rule = "fixed", packets = 200, bytes = 150_000 }"#,
                        )
                        .aqm(r#"{ kind = "zl-red", a = 10 }"#),
                ),
        )
        .to_toml();
    RouterConfig::from_toml(&text).expect("test config parses")
}

/// Checks the identity and the memory bound at every progress call.
struct Checker {
    calls: u32,
    max_in_use: usize,
}

impl Observer<Dataplane> for Checker {
    fn progress(&mut self, _now: Nanos, dp: &Dataplane) {
        self.calls += 1;
        common::assert_conserved(dp);
        self.max_in_use = self.max_in_use.max(dp.buffers_in_use());
    }
}

fn run_at(load: f64) -> (Dataplane, Checker) {
    let cfg = config(load);
    let mut dp = build(&cfg, &common::root()).unwrap();
    let mut checker = Checker {
        calls: 0,
        max_in_use: 0,
    };
    let stop = AtomicBool::new(false);
    dp.run_virtual(
        Nanos::from_secs(2),
        Nanos::from_millis(50),
        &stop,
        Nanos::from_millis(20),
        &mut checker,
    )
    .unwrap();
    (dp, checker)
}

#[test]
fn conservation_holds_exactly_at_1x_load() {
    let (dp, checker) = run_at(1.0);
    assert!(
        checker.calls >= 50,
        "progress was checked {} times",
        checker.calls
    );
    common::assert_conserved(&dp);
    let t = dp.totals();
    assert!(t.received > 2_000);
    // Unroutable packets are counted as such, never forwarded.
    let stray = dp.groups().iter().find(|g| g.name == "stray").unwrap();
    assert_eq!(stray.fate.drops_of(DropCause::NoRoute), stray.fate.received);
    assert_eq!(t.drops_of(DropCause::NoRoute), stray.fate.received);
}

#[test]
fn conservation_holds_exactly_at_10x_load_with_bounded_memory() {
    let (dp, checker) = run_at(10.0);
    common::assert_conserved(&dp);
    let t = dp.totals();
    assert!(t.received > 20_000, "received {}", t.received);
    // At 10x the egress carries at most its rate: ~2 s x 10 Mbit/s (+ drain), and most of
    // the offered load is dropped by a named cause.
    assert!(t.forwarded_bytes * 8 <= 10_000_000 * 21 / 10 + 2 * 1514 * 8);
    assert!(t.dropped() > t.received / 2, "{t:?}");
    let aqm =
        t.drops_of(DropCause::Early) + t.drops_of(DropCause::Forced) + t.drops_of(DropCause::Tail);
    assert!(aqm > 0);
    // Memory: never more buffers than the queues can hold (20 + 200 packets) plus the
    // pool's burst headroom, whatever the overload.
    assert!(
        checker.max_in_use <= 220,
        "max buffers in use {}",
        checker.max_in_use
    );
    // The pool itself is sized from the egress port's configured rings plus four bursts per
    // port, and allocated once.
    assert_eq!(dp.pool_total(), 220 + 4 * 32 * 2);
}

/// Stops the run (as SIGINT does, through the same flag) once the queues hold packets.
struct Interrupter<'a> {
    stop: &'a AtomicBool,
}

impl Observer<Dataplane> for Interrupter<'_> {
    fn progress(&mut self, _now: Nanos, dp: &Dataplane) {
        if dp.queued() > 50 {
            self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

#[test]
fn an_interrupted_run_counts_what_was_queued_as_shutdown_drops() {
    let cfg = config(10.0);
    let mut dp = build(&cfg, &common::root()).unwrap();
    let stop = AtomicBool::new(false);
    let reason = dp
        .run_virtual(
            Nanos::from_secs(2),
            Nanos::from_millis(50),
            &stop,
            Nanos::from_millis(20),
            &mut Interrupter { stop: &stop },
        )
        .unwrap();
    assert_eq!(reason, zl_dataplane::StopReason::Interrupted);
    assert_eq!(dp.queued(), 0);
    let shutdown = dp.totals().drops_of(DropCause::Shutdown);
    assert!(shutdown > 50);
    // The classes count what they held at the end as shutdown drops, not
    // as sent, so their `dequeued` is what the link carried: the forwarded packets, all of
    // which went through a class queue of the one egress port.
    let (mut dequeued, mut discarded) = (0, 0);
    for slot in dp.slots() {
        for c in 0..slot.egress.qos.class_names().len() {
            let s = slot.egress.qos.class_stats(c).unwrap().total();
            assert_eq!(
                s.enqueued,
                s.dequeued + s.shutdown_drops,
                "class {c}, now empty"
            );
            dequeued += s.dequeued;
            discarded += s.shutdown_drops;
        }
    }
    assert_eq!(discarded, shutdown);
    assert_eq!(dequeued, dp.totals().forwarded);
    assert!(
        dp.now() < Nanos::from_secs(1),
        "stopped early, at {}",
        dp.now()
    );
    common::assert_conserved(&dp);
}
