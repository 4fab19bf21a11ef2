//! Behaviour of the delay line against its contract: exact release times at tick granularity,
//! FIFO order, wraparound of the wheel and of the slot array, overflow counting.

use proptest::prelude::*;
use zl_core::Nanos;
use zl_delay::{DelayConfigError, DelayLine, DelayLineConfig};

fn line(delay_us: u64, tick_us: u64, capacity: usize) -> DelayLine<u32> {
    DelayLine::new(DelayLineConfig {
        delay: Nanos::from_micros(delay_us),
        tick: Nanos::from_micros(tick_us),
        capacity,
    })
    .unwrap()
}

fn drain(l: &mut DelayLine<u32>, now: Nanos) -> Vec<u32> {
    std::iter::from_fn(|| l.pop_due(now)).collect()
}

#[test]
fn release_is_exact_at_tick_boundaries() {
    // 1 ms delay, 100 us tick; pushed on a tick boundary -> released exactly 1 ms later.
    let mut l = line(1_000, 100, 8);
    l.push(Nanos::from_micros(500), 7).unwrap();
    assert_eq!(
        l.release_time(Nanos::from_micros(500)),
        Nanos::from_micros(1_500)
    );
    assert_eq!(l.pop_due(Nanos(1_499_999)), None);
    assert_eq!(l.pop_due(Nanos::from_micros(1_500)), Some(7));
    assert!(l.is_empty());
}

#[test]
fn release_rounds_up_to_the_next_tick_never_early() {
    // Pushed at 501 us: 1501 us rounds up to 1600 us, never to 1500 us.
    let mut l = line(1_000, 100, 8);
    l.push(Nanos::from_micros(501), 1).unwrap();
    assert_eq!(l.pop_due(Nanos::from_micros(1_501)), None);
    assert_eq!(l.pop_due(Nanos(1_599_999)), None);
    assert_eq!(l.pop_due(Nanos::from_micros(1_600)), Some(1));
}

#[test]
fn zero_delay_releases_at_the_current_tick() {
    let mut l = line(0, 10, 4);
    l.push(Nanos::from_micros(20), 3).unwrap();
    assert_eq!(l.pop_due(Nanos::from_micros(20)), Some(3));
}

#[test]
fn same_tick_items_keep_push_order() {
    let mut l = line(200, 100, 16);
    for i in 0..10 {
        l.push(Nanos::from_micros(1_000) + Nanos(i), i as u32)
            .unwrap();
    }
    assert_eq!(
        drain(&mut l, Nanos::from_micros(1_300)),
        (0..10).collect::<Vec<_>>()
    );
}

#[test]
fn only_due_items_come_out() {
    let mut l = line(1_000, 100, 16);
    for i in 0..10u64 {
        l.push(Nanos::from_micros(100 * i), i as u32).unwrap();
    }
    // Item i releases at 100*i + 1000 us.
    assert_eq!(drain(&mut l, Nanos::from_micros(1_350)), vec![0, 1, 2, 3]);
    assert_eq!(l.len(), 6);
    assert_eq!(
        drain(&mut l, Nanos::from_micros(1_900)),
        vec![4, 5, 6, 7, 8, 9]
    );
}

#[test]
fn wheel_wraps_many_times_in_a_long_run() {
    // 300 us delay at 100 us tick -> a 8-bucket wheel; run 10,000 ticks with steady traffic.
    let mut l = line(300, 100, 64);
    assert_eq!(l.wheel_buckets(), 8);
    let mut next_out = 0u32;
    for step in 0..10_000u32 {
        let now = Nanos::from_micros(50 * u64::from(step));
        l.push(now, step).unwrap();
        while let Some(x) = l.pop_due(now) {
            assert_eq!(x, next_out, "FIFO order");
            next_out += 1;
        }
    }
    // Items pushed at 50 us steps are held 300-350 us: at most 7 in flight.
    assert!(l.len() <= 7, "len {}", l.len());
    assert_eq!(l.stats().overflow_drops, 0);
    assert_eq!(l.stats().pushed - l.stats().released, l.len() as u64);
}

#[test]
fn caller_that_skips_several_wheel_turns_still_gets_everything_in_order() {
    // 8-bucket wheel; push over 40 ticks without popping, so turns share buckets.
    let mut l = line(300, 100, 64);
    for i in 0..40u64 {
        l.push(Nanos::from_micros(100 * i), i as u32).unwrap();
    }
    // At 3900 us, items with release 100*i + 300 <= 3900 are due: i <= 36.
    assert_eq!(
        drain(&mut l, Nanos::from_micros(3_900)),
        (0..37).collect::<Vec<_>>()
    );
    assert_eq!(
        drain(&mut l, Nanos::from_secs(1)),
        (37..40).collect::<Vec<_>>()
    );
}

#[test]
fn overflow_is_a_counted_drop_that_returns_the_item() {
    let mut l = line(1_000, 100, 3);
    for i in 0..3 {
        l.push(Nanos::ZERO, i).unwrap();
    }
    assert_eq!(l.push(Nanos::ZERO, 99), Err(99));
    assert_eq!(l.push(Nanos::ZERO, 98), Err(98));
    assert_eq!(l.stats().overflow_drops, 2);
    assert_eq!(l.stats().pushed, 3);
    // Freed slots are reused.
    assert_eq!(drain(&mut l, Nanos::from_millis(1)), vec![0, 1, 2]);
    l.push(Nanos::from_millis(1), 4).unwrap();
    assert_eq!(l.pop_due(Nanos::from_millis(2)), Some(4));
}

#[test]
fn clock_stepping_backwards_never_reorders() {
    let mut l = line(1_000, 100, 8);
    l.push(Nanos::from_micros(5_000), 1).unwrap();
    l.push(Nanos::from_micros(100), 2).unwrap(); // treated as 5000 us
    assert_eq!(drain(&mut l, Nanos::from_micros(5_999)), Vec::<u32>::new());
    assert_eq!(drain(&mut l, Nanos::from_micros(6_000)), vec![1, 2]);
}

#[test]
fn bad_configs_are_typed_errors() {
    let cfg = |delay, tick, capacity| DelayLineConfig {
        delay: Nanos(delay),
        tick: Nanos(tick),
        capacity,
    };
    assert_eq!(
        DelayLine::<u8>::new(cfg(1, 0, 1)).unwrap_err(),
        DelayConfigError::ZeroTick
    );
    assert!(matches!(
        DelayLine::<u8>::new(cfg(1, 1, 0)).unwrap_err(),
        DelayConfigError::Capacity { got: 0, .. }
    ));
    assert!(matches!(
        DelayLine::<u8>::new(cfg(u64::MAX / 2, 1, 1)).unwrap_err(),
        DelayConfigError::WheelTooLarge { .. }
    ));
    let ok = DelayLine::<u8>::new(DelayLineConfig::from_millis(100, 1024)).unwrap();
    assert_eq!(ok.delay_ticks(), 10_000);
    assert_eq!(ok.wheel_buckets(), 16_384);
}

proptest! {
    /// Against a reference model: every item comes out exactly once, in push order, not before
    /// `push_time + delay` and no later than the first pop at or after its rounded-up release.
    #[test]
    fn matches_reference_model(
        delay_us in 0u64..2_000,
        tick_us in 1u64..300,
        ops in prop::collection::vec((0u64..400, any::<bool>()), 1..400),
    ) {
        let mut l = line(delay_us, tick_us, 32);
        let tick = tick_us * 1_000;
        let delay = delay_us * 1_000;
        let mut now = 0u64;
        let mut model: std::collections::VecDeque<(u32, u64)> = Default::default();
        let mut id = 0u32;
        for (dt_us, is_push) in ops {
            now += dt_us * 1_000;
            if is_push {
                let release = (now + delay).div_ceil(tick) * tick;
                match l.push(Nanos(now), id) {
                    Ok(()) => model.push_back((id, release)),
                    Err(back) => {
                        prop_assert_eq!(back, id);
                        prop_assert_eq!(model.len(), 32);
                    }
                }
                id += 1;
            } else {
                while let Some(x) = l.pop_due(Nanos(now)) {
                    let (want, release) = model.pop_front().unwrap();
                    prop_assert_eq!(x, want);
                    prop_assert!(release <= now);
                }
                prop_assert!(model.front().is_none_or(|&(_, r)| r > now));
            }
            prop_assert_eq!(l.len(), model.len());
        }
    }
}

#[test]
fn next_release_names_the_earliest_pending_item() {
    let mut l = line(300, 100, 64);
    assert_eq!(l.next_release(), None);
    l.push(Nanos::from_micros(50), 1).unwrap(); // due at 400 us
    l.push(Nanos::from_micros(250), 2).unwrap(); // due at 600 us
    assert_eq!(l.next_release(), Some(Nanos::from_micros(400)));
    assert_eq!(l.pop_due(Nanos::from_micros(400)), Some(1));
    assert_eq!(l.next_release(), Some(Nanos::from_micros(600)));
    // Lagging caller: pushes across several wheel turns (8 buckets) without popping; item
    // 10 + i is due at 700 + 100 i us.
    for i in 0..30u64 {
        l.push(Nanos::from_micros(400 + 100 * i), 10 + i as u32)
            .unwrap();
    }
    assert_eq!(l.next_release(), Some(Nanos::from_micros(600)));
    assert_eq!(l.pop_due(Nanos::from_micros(600)), Some(2));
    assert_eq!(l.next_release(), Some(Nanos::from_micros(700)));
    assert_eq!(l.pop_due(Nanos::from_micros(700)), Some(10));
    assert_eq!(l.next_release(), Some(Nanos::from_micros(800)));
}

#[test]
fn params_from_toml() {
    let p: zl_delay::DelayParams = toml::from_str("delay_ms = 20\ncapacity = 4096").unwrap();
    let c = p.to_config().unwrap();
    assert_eq!(c.delay, Nanos::from_millis(20));
    assert_eq!(c.tick, Nanos::from_micros(10));
    assert_eq!(c.capacity, 4096);
    let p: zl_delay::DelayParams =
        toml::from_str("delay_ms = 0.25\ncapacity = 8\ntick_us = 50").unwrap();
    assert_eq!(p.to_config().unwrap().delay, Nanos::from_micros(250));
    let p: zl_delay::DelayParams = toml::from_str("delay_ms = -1\ncapacity = 8").unwrap();
    assert!(p.to_config().unwrap_err().to_string().contains("delay_ms"));
    assert!(toml::from_str::<zl_delay::DelayParams>("delay = 1\ncapacity = 8").is_err());
}
