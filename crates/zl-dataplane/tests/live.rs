//! The live driver: a port that reports `Live` is polled on the clock it is given until it is
//! exhausted or the loop is stopped; the identity holds either way.

use std::sync::atomic::{AtomicBool, Ordering};

use zl_core::Nanos;
use zl_dataplane::{
    build_with_ports, BoxedPort, Dataplane, NoObserver, Observer, RouterConfig, StopReason,
};
use zl_port::MemoryPort;

const CONFIG: &str = r#"
[[ports]]
name = "nic0"
kind = "external"
mac = "02:00:00:00:00:01"

[[ports]]
name = "nic1"
kind = "sink"
mac = "02:00:00:00:00:02"

[[routes]]
prefix = "0.0.0.0/0"
port = "nic1"
next_hop_mac = "02:00:00:00:00:fe"

[qos]
shaper = { rate_bps = 100_000_000 }
[[qos.classes]]
name = "be"
weight = 1
max_packets = 100
"#;

fn frame(i: u8) -> Vec<u8> {
    let mut f = vec![0u8; 100];
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&86u16.to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[10, 0, 0, i]);
    ip[16..20].copy_from_slice(&[192, 0, 2, 1]);
    let mut sum: u32 = ip
        .chunks(2)
        .map(|w| u16::from_be_bytes([w[0], w[1]]) as u32)
        .sum();
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    f
}

fn dataplane(count: u64) -> Dataplane {
    let cfg = RouterConfig::from_toml(CONFIG).unwrap();
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
impl Observer for StopAfter<'_> {
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
