//! Single-threaded behaviour: the paper's worked example, agreement with the naive oracle,
//! configuration errors.

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use zl_zombie::{
    FlowId, NaiveZombieList, Nanos, Observation, OccurrenceMode, Zombie, ZombieConfigError,
    ZombieList, ZombieParams,
};

fn params(m: usize) -> ZombieParams {
    ZombieParams {
        m,
        ..ZombieParams::default()
    }
}

/// ZL-RED figure 3: counts 21, 26, 6, 3, 20, 10, 3, 2; flow 1 owns 26, 20, 2:
/// F = 27 + 21 + 3 = 51, T = 99.
#[test]
fn paper_worked_example_f51_t99() {
    let counts = [21, 26, 6, 3, 20, 10, 3, 2];
    let owners = [2, 1, 3, 4, 1, 5, 6, 1];
    let zombies: Vec<Zombie> = counts
        .iter()
        .zip(owners)
        .map(|(&count, owner)| Zombie {
            flow: FlowId(owner),
            count,
            stamp: Nanos::ZERO,
        })
        .collect();
    for mode in [OccurrenceMode::Table, OccurrenceMode::Scan] {
        let cfg = ZombieParams {
            occurrence: mode,
            ..params(8)
        }
        .validate()
        .unwrap();
        let list = ZombieList::from_zombies(cfg, &zombies).unwrap();
        assert_eq!(list.occurrence(FlowId(1)), 51, "{mode:?}");
        assert_eq!(list.total_occurrence(), 99, "{mode:?}");
        assert_eq!(list.occurrence(FlowId(2)), 22);
        assert_eq!(list.occurrence(FlowId(7)), 0);
        list.check_invariants().unwrap();
    }
}

#[test]
fn matches_naive_oracle_with_same_seed() {
    for (m, flows) in [(1, 3), (2, 5), (10, 30), (100, 50), (1000, 3000)] {
        for mode in [OccurrenceMode::Table, OccurrenceMode::Scan] {
            let cfg = ZombieParams {
                occurrence: mode,
                ..params(m)
            }
            .validate()
            .unwrap();
            let list = ZombieList::new(cfg);
            let mut naive = NaiveZombieList::new(cfg);
            let mut rng_a = Xoshiro256PlusPlus::seed_from_u64(7);
            let mut rng_b = Xoshiro256PlusPlus::seed_from_u64(7);
            let mut traffic = Xoshiro256PlusPlus::seed_from_u64(99);
            for t in 0..20_000u64 {
                // Skewed traffic so that hits, misses and overwrites all happen.
                let r: u64 = rand::Rng::random_range(&mut traffic, 0..flows * flows);
                let flow = FlowId(r.isqrt());
                let a = list.observe(flow, Nanos(t), &mut rng_a);
                let b = naive.observe(flow, Nanos(t), &mut rng_b);
                assert_eq!(a, b, "m={m} mode={mode:?} step {t}");
            }
            assert_eq!(list.zombies(), naive.zombies());
            list.check_invariants().unwrap();
        }
    }
}

#[test]
fn config_errors_name_the_parameter() {
    let bad_m = params(0).validate().unwrap_err();
    assert_eq!(bad_m, ZombieConfigError::M(0));
    assert!(bad_m.to_string().contains("zombie.m"));
    let bad_swap = ZombieParams {
        p_swap: 1.5,
        ..params(10)
    }
    .validate()
    .unwrap_err();
    assert!(bad_swap.to_string().contains("p_swap") && bad_swap.to_string().contains("[0, 1]"));
    let nan_alpha = ZombieParams {
        alpha: Some(f64::NAN),
        ..params(10)
    }
    .validate();
    assert!(matches!(nan_alpha, Err(ZombieConfigError::Alpha(_))));
    let cfg = params(1000).validate().unwrap();
    assert_eq!(cfg.alpha(), 1.0 / 1000.0);
}

/// The flow-id hash of `table.rs` (first bucket = low bits).
fn mix(x: u64) -> u64 {
    zl_zombie::flow_hash(zl_zombie::FlowId(x))
}

/// M = 3: the table has 2 buckets of 3 entries. Three zombies of flows whose first bucket is
/// 0 fill it, so a fourth such flow, reserved before the evicted zombie's entry is released,
/// spills into bucket 1; lookups must follow the spill, and reuse must undo it.
#[test]
fn full_first_bucket_spills_and_lookups_follow() {
    let flows: Vec<u64> = (1u64..).filter(|&f| mix(f) & 1 == 0).take(6).collect();
    let cfg = ZombieParams {
        m: 3,
        p_swap: 1.0,
        ..ZombieParams::default()
    }
    .validate()
    .unwrap();
    let zombies: Vec<Zombie> = flows[..3]
        .iter()
        .map(|&f| Zombie {
            flow: FlowId(f),
            count: 0,
            stamp: Nanos::ZERO,
        })
        .collect();
    let list = ZombieList::from_zombies(cfg, &zombies).unwrap();
    assert_eq!(list.table_capacity(), 6);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
    for (t, &f) in flows[3..].iter().enumerate() {
        let obs = list.observe(FlowId(f), Nanos(t as u64 + 1), &mut rng);
        assert!(!obs.hit);
        assert_eq!((obs.occurrence, obs.total), (1, 3), "flow {f}");
        assert_eq!(list.occurrence(FlowId(f)), 1);
        list.check_invariants().unwrap();
    }
}

/// `observe_batch` over bursts of varied sizes equals one `observe` per packet (and so the
/// naive oracle) with the same random stream.
#[test]
fn batch_equals_sequential_observes() {
    let cfg = params(100).validate().unwrap();
    let list = ZombieList::new(cfg);
    let mut naive = NaiveZombieList::new(cfg);
    let mut rng_a = Xoshiro256PlusPlus::seed_from_u64(11);
    let mut rng_b = Xoshiro256PlusPlus::seed_from_u64(11);
    let mut traffic = Xoshiro256PlusPlus::seed_from_u64(12);
    let blank = Observation {
        hit: false,
        p: 0.0,
        occurrence: 0,
        total: 0,
    };
    let mut out = [blank; 32];
    for burst in 0..2000u64 {
        let len = rand::Rng::random_range(&mut traffic, 0..=32usize);
        let flows: Vec<FlowId> = (0..len)
            .map(|_| FlowId(rand::Rng::random_range(&mut traffic, 0..900u64).isqrt()))
            .collect();
        let n = list.observe_batch(&flows, Nanos(burst), &mut rng_a, &mut out);
        assert_eq!(n, len);
        for (i, &flow) in flows.iter().enumerate() {
            assert_eq!(
                out[i],
                naive.observe(flow, Nanos(burst), &mut rng_b),
                "burst {burst}"
            );
        }
    }
    list.check_invariants().unwrap();
    // A short output slice bounds the burst.
    let n = list.observe_batch(&[FlowId(1); 8], Nanos(0), &mut rng_a, &mut out[..3]);
    assert_eq!(n, 3);
}
