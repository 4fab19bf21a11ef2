//! A delay line in front of a virtual-time in-memory port: frames reach the data plane exactly
//! `delay` (rounded up to the tick) after their timestamps, in order; readiness drives a
//! virtual-time loop through the releases; overflow is counted and buffers are not lost.

use zl_core::Nanos;
use zl_delay::{DelayLineConfig, DelayedPort};
use zl_port::{Batch, BufPool, MemoryPort, Port, Readiness};

fn frames(times_us: &[u64]) -> Vec<(Nanos, Vec<u8>)> {
    times_us
        .iter()
        .enumerate()
        .map(|(i, &t)| (Nanos::from_micros(t), vec![i as u8; 60]))
        .collect()
}

fn config(delay_us: u64, capacity: usize) -> DelayLineConfig {
    DelayLineConfig {
        delay: Nanos::from_micros(delay_us),
        tick: Nanos::from_micros(10),
        capacity,
    }
}

/// Runs a virtual-time loop as the data plane would: advance to the port's next readiness,
/// receive, record (release time, first byte).
fn run(port: &mut DelayedPort<MemoryPort>, pool: &mut BufPool) -> Vec<(Nanos, u8)> {
    let mut out = Vec::new();
    let mut batch = Batch::new();
    for _ in 0..1000 {
        let now = match port.readiness() {
            Readiness::NextPacketAt(t) => t,
            Readiness::Exhausted => break,
            Readiness::Live => unreachable!("memory port in timed mode is virtual-time"),
        };
        port.recv(now, pool, &mut batch).unwrap();
        for b in batch.drain() {
            assert!(b.rx_time <= now);
            out.push((b.rx_time, b.as_slice()[0]));
            pool.free(b);
        }
    }
    out
}

#[test]
fn frames_arrive_one_delay_later_in_order() {
    let inner = MemoryPort::timed("in", 0, frames(&[0, 5, 100, 100, 2_000]));
    let mut port = DelayedPort::new(inner, config(1_000, 16)).unwrap();
    let mut pool = BufPool::new(16, 2048);
    let got = run(&mut port, &mut pool);
    let us = Nanos::from_micros;
    // 5 us + 1 ms rounds up to the next 10 us tick: 1010 us.
    assert_eq!(
        got,
        vec![
            (us(1_000), 0),
            (us(1_010), 1),
            (us(1_100), 2),
            (us(1_100), 3),
            (us(3_000), 4)
        ]
    );
    assert_eq!(pool.available(), 16, "every buffer back");
    assert_eq!(port.readiness(), Readiness::Exhausted);
}

#[test]
fn overflow_is_counted_and_buffers_return_to_the_pool() {
    let times: Vec<u64> = (0..10).collect();
    let inner = MemoryPort::timed("in", 0, frames(&times));
    let mut port = DelayedPort::new(inner, config(500, 4)).unwrap();
    let mut pool = BufPool::new(16, 2048);
    let got = run(&mut port, &mut pool);
    assert_eq!(got.len(), 4);
    assert_eq!(port.delay_stats().overflow_drops, 6);
    assert_eq!(port.counters().rx_ring_full, 6);
    assert_eq!(pool.available(), 16);
}

#[test]
fn drain_gives_buffers_back() {
    let inner = MemoryPort::timed("in", 0, frames(&[0, 1, 2]));
    let mut port = DelayedPort::new(inner, config(10_000, 8)).unwrap();
    let mut pool = BufPool::new(8, 2048);
    let mut batch = Batch::new();
    assert_eq!(
        port.recv(Nanos::from_micros(5), &mut pool, &mut batch)
            .unwrap(),
        0
    );
    assert_eq!(port.in_flight(), 3);
    assert_eq!(pool.available(), 5);
    port.drain_into(&mut pool);
    assert_eq!(pool.available(), 8);
}

#[test]
fn an_endless_inner_source_does_not_trap_recv() {
    let inner = MemoryPort::cycling("gen", 0, vec![vec![7u8; 60]], u64::MAX);
    let mut port = DelayedPort::new(inner, config(100, 1024)).unwrap();
    let mut pool = BufPool::new(2048, 2048);
    let mut batch = Batch::new();
    // Each call takes at most 8 batches of 32 onto the line.
    assert_eq!(port.recv(Nanos::ZERO, &mut pool, &mut batch).unwrap(), 0);
    assert_eq!(port.in_flight(), 256);
    // A delay later the first of them come out.
    let n = port
        .recv(Nanos::from_micros(100), &mut pool, &mut batch)
        .unwrap();
    assert_eq!(n, 32);
    assert!(batch.iter().all(|b| b.rx_time == Nanos::from_micros(100)));
}

/// Split into halves (and joined again, as the threaded router does between runs), the port
/// delays exactly as it does whole, keeps what was on its line, and counts its overflow.
#[test]
fn split_halves_delay_as_the_whole_port() {
    use zl_port::{Joined, SplitPort};
    let times = [0, 5, 100, 100, 2_000, 2_001, 2_002];
    let inner = MemoryPort::timed("in", 0, frames(&times));
    let mut whole = DelayedPort::new(inner, config(1_000, 16)).unwrap();
    let mut pool = BufPool::new(16, 2048);
    let expected = run(&mut whole, &mut pool);

    let inner = MemoryPort::timed("in", 0, frames(&times));
    let mut port = DelayedPort::new(inner, config(1_000, 16)).unwrap();
    // Two frames on the line before the split.
    let mut batch = Batch::new();
    assert_eq!(
        port.recv(Nanos::from_micros(5), &mut pool, &mut batch)
            .unwrap(),
        0
    );
    assert_eq!(port.in_flight(), 2);
    let mut joined = Joined::new(Box::new(port).split());
    let mut out = Vec::new();
    for _ in 0..1000 {
        let now = match joined.readiness() {
            Readiness::NextPacketAt(t) => t,
            Readiness::Exhausted => break,
            Readiness::Live => unreachable!("virtual time"),
        };
        joined.recv(now, &mut pool, &mut batch).unwrap();
        for b in batch.drain() {
            out.push((b.rx_time, b.as_slice()[0]));
            pool.free(b);
        }
    }
    assert_eq!(out, expected);
    assert_eq!(joined.counters().rx_packets, times.len() as u64);
    assert_eq!(pool.available(), 16);
}
