//! The live driver: a port that reports `Live` is polled on the clock it is given until it is
//! exhausted or the loop is stopped; the identity holds either way.

use std::sync::atomic::{AtomicBool, Ordering};

use zl_core::Nanos;
use zl_dataplane::{
    build_with_ports, BoxedPort, Dataplane, NoObserver, Observer, RouterConfig, StopReason,
};
use zl_port::MemoryPort;
use zl_testkit::config::{ClassToml, PortToml, QosToml, RouterToml};

/// An external port `nic0` (the test supplies it) routed to a sink behind a 100 Mbit/s shaper.
fn config() -> RouterConfig {
    let text = RouterToml::new()
        .port(PortToml::new("nic0", "external", "02:00:00:00:00:01"))
        .port(PortToml::sink("nic1", "02:00:00:00:00:02"))
        .route("0.0.0.0/0", "nic1", Some("02:00:00:00:00:fe"))
        .qos(
            QosToml::new()
                .set("shaper", "{ rate_bps = 100_000_000 }")
                .class(ClassToml::new("be").weight(1).max_packets(100)),
        )
        .to_toml();
    RouterConfig::from_toml(&text).unwrap()
}

/// A 100-byte IPv4/UDP frame from 10.0.0.`i` to 192.0.2.1, zero MACs.
fn frame(i: u8) -> Vec<u8> {
    zl_testkit::frames::Udp::v4([10, 0, 0, i], [192, 0, 2, 1])
        .macs([0; 6], [0; 6])
        .len(100)
        .build()
}

fn dataplane(count: u64) -> Dataplane {
    let cfg = config();
    let templates: Vec<Vec<u8>> = (1..=8).map(frame).collect();
    let mut supply = |i: usize,
                      _: &zl_dataplane::config::PortParams|
     -> Result<Option<BoxedPort>, zl_dataplane::BuildError> {
        Ok((i == 0).then(|| {
            Box::new(MemoryPort::cycling("nic0", 0, templates.clone(), count)) as BoxedPort
        }))
    };
    build_with_ports(&cfg, std::path::Path::new("."), &mut supply).unwrap()
}

fn balanced(dp: &Dataplane) -> bool {
    let t = dp.totals();
    t.received == t.forwarded + t.dropped() + dp.queued()
}

#[test]
fn a_live_port_runs_to_exhaustion_on_the_given_clock() {
    let mut dp = dataplane(10_000);
    assert!(dp.has_live_ports());
    // A fake monotonic clock: 1 µs per reading.
    let mut t = 0u64;
    let mut clock = || {
        t += 1_000;
        Nanos(t)
    };
    let reason = dp
        .run_live(
            &AtomicBool::new(false),
            &mut clock,
            Nanos::from_millis(1),
            &mut NoObserver,
        )
        .unwrap();
    assert_eq!(reason, StopReason::Finished);
    let tot = dp.totals();
    assert_eq!(tot.received, 10_000);
    assert!(balanced(&dp));
    // 32 frames per microsecond poll offered to a 100 Mbit/s shaper: the ring overflows and
    // the excess is tail-dropped, counted.
    assert!(tot.drops_of(zl_dataplane::DropCause::Tail) > 0);
    assert_eq!(dp.queued(), 0);
}

struct StopAfter<'a>(&'a AtomicBool, u32);
impl Observer<Dataplane> for StopAfter<'_> {
    fn progress(&mut self, _: Nanos, dp: &Dataplane) {
        assert!(balanced(dp));
        self.1 += 1;
        if self.1 == 5 {
            self.0.store(true, Ordering::Relaxed);
        }
    }
}

#[test]
fn an_endless_live_port_stops_on_the_flag() {
    let mut dp = dataplane(u64::MAX);
    let stop = AtomicBool::new(false);
    let mut t = 0u64;
    let mut clock = || {
        t += 10_000;
        Nanos(t)
    };
    let reason = dp
        .run_live(
            &stop,
            &mut clock,
            Nanos::from_millis(1),
            &mut StopAfter(&stop, 0),
        )
        .unwrap();
    assert_eq!(reason, StopReason::Interrupted);
    assert!(balanced(&dp));
    assert_eq!(dp.queued(), 0);
    assert!(dp.totals().received > 1000);
}

/// A live port whose interface disappears after `left` polls.
struct Vanishing {
    inner: MemoryPort,
    left: u32,
}

impl zl_port::Port for Vanishing {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn recv(
        &mut self,
        now: Nanos,
        pool: &mut zl_port::BufPool,
        batch: &mut zl_port::Batch,
    ) -> Result<usize, zl_port::PortError> {
        if self.left == 0 {
            return Err(zl_port::PortError::InterfaceGone {
                port: "nic0".into(),
                detail: "link deleted".into(),
            });
        }
        self.left -= 1;
        self.inner.recv(now, pool, batch)
    }
    fn send(
        &mut self,
        now: Nanos,
        batch: &mut zl_port::Batch,
        pool: &mut zl_port::BufPool,
    ) -> Result<usize, zl_port::PortError> {
        self.inner.send(now, batch, pool)
    }
    fn readiness(&self) -> zl_port::Readiness {
        zl_port::Readiness::Live
    }
    fn counters(&self) -> zl_port::PortCounters {
        self.inner.counters()
    }
}

/// Run by the single-thread loop only: its halves may share it.
impl zl_port::SplitPort for Vanishing {
    fn split(self: Box<Self>) -> zl_port::Halves {
        zl_port::split_locked(*self)
    }
}

#[test]
fn an_interface_that_goes_away_ends_the_run_with_an_error_and_balanced_counters() {
    let cfg = config();
    let templates: Vec<Vec<u8>> = (1..=8).map(frame).collect();
    let mut supply = |i: usize,
                      _: &zl_dataplane::config::PortParams|
     -> Result<Option<BoxedPort>, zl_dataplane::BuildError> {
        Ok((i == 0).then(|| {
            Box::new(Vanishing {
                inner: MemoryPort::cycling("nic0", 0, templates.clone(), u64::MAX),
                left: 50,
            }) as BoxedPort
        }))
    };
    let mut dp = build_with_ports(&cfg, std::path::Path::new("."), &mut supply).unwrap();
    let mut t = 0u64;
    let mut clock = || {
        t += 1_000;
        Nanos(t)
    };
    let err = dp
        .run_live(
            &AtomicBool::new(false),
            &mut clock,
            Nanos::from_millis(1),
            &mut NoObserver,
        )
        .unwrap_err();
    assert!(
        matches!(err, zl_port::PortError::InterfaceGone { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("interface is gone"), "{err}");
    // No spin, no loss: the loop stopped at the error, and the queued packets were counted.
    assert_eq!(dp.totals().received, 50 * 32);
    assert!(balanced(&dp));
    assert_eq!(dp.queued(), 0);
}

#[test]
fn a_live_port_is_refused_in_virtual_time() {
    let mut dp = dataplane(10);
    let err = dp
        .run_virtual(
            Nanos::from_secs(1),
            Nanos::ZERO,
            &AtomicBool::new(false),
            Nanos::from_secs(1),
            &mut NoObserver,
        )
        .unwrap_err();
    assert!(err.to_string().contains("use run_live"), "{err}");
}
