//! The memory-operation counts `observe_counted` reports for each kind of update
//! (the ixp-sim model charges them as SRAM references).

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use zl_zombie::{FlowId, Nanos, OccurrenceMode, OpCounts, Zombie, ZombieList, ZombieParams};

fn one_zombie_list(p_swap: f64, occurrence: OccurrenceMode) -> ZombieList {
    let cfg = ZombieParams {
        m: 1,
        p_swap,
        alpha: None,
        occurrence,
    }
    .validate()
    .unwrap();
    let z = Zombie {
        flow: FlowId(1),
        count: 4,
        stamp: Nanos::ZERO,
    };
    ZombieList::from_zombies(cfg, &[z]).unwrap()
}

#[test]
fn hit_changes_one_entry() {
    let list = one_zombie_list(0.25, OccurrenceMode::Table);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let (obs, ops) = list.observe_counted(FlowId(1), Nanos(1), &mut rng);
    assert!(obs.hit);
    assert_eq!((obs.occurrence, obs.total), (6, 6));
    assert_eq!(ops.slot_reads, 1);
    assert_eq!(ops.slot_writes, 2, "slot CAS + timestamp: {ops:?}");
    assert_eq!(
        ops.table_writes, 1,
        "one reservation on the hit entry: {ops:?}"
    );
    assert_eq!(ops.total_writes, 2, "T and P(t): {ops:?}");
}

#[test]
fn miss_without_overwrite_writes_only_p() {
    let list = one_zombie_list(0.0, OccurrenceMode::Table);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    // A thread's first arrival writes its P(t) shard once (it is in use from then on).
    let (_, first) = list.observe_counted(FlowId(2), Nanos(0), &mut rng);
    assert_eq!(first.total_writes, 1, "{first:?}");
    // P(t) = 0 and a miss leave P at 0, stored again (the shard's own line; skipping the
    // unchanged store cost more than the store): P's write alone.
    let (obs, ops) = list.observe_counted(FlowId(2), Nanos(1), &mut rng);
    assert!(!obs.hit);
    assert_eq!((obs.occurrence, obs.total), (0, 5));
    assert_eq!(
        (ops.slot_writes, ops.table_writes, ops.total_writes),
        (0, 0, 1),
        "{ops:?}"
    );
}

#[test]
fn overwrite_changes_two_entries() {
    let list = one_zombie_list(1.0, OccurrenceMode::Table);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    let (obs, ops) = list.observe_counted(FlowId(2), Nanos(1), &mut rng);
    assert!(!obs.hit);
    assert_eq!((obs.occurrence, obs.total), (1, 1));
    assert_eq!(list.occurrence(FlowId(1)), 0);
    // New entry: freeze CAS, key store, live store; old entry: one release.
    assert!(ops.table_writes >= 4, "{ops:?}");
    assert_eq!(ops.slot_writes, 2, "{ops:?}");
    list.check_invariants().unwrap();
}

#[test]
fn scan_reads_every_zombie() {
    let cfg = ZombieParams {
        m: 50,
        occurrence: OccurrenceMode::Scan,
        ..ZombieParams::default()
    }
    .validate()
    .unwrap();
    let list = ZombieList::new(cfg);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    for f in 0..50 {
        list.observe(FlowId(f), Nanos(0), &mut rng);
    }
    let (_, ops): (_, OpCounts) = list.observe_counted(FlowId(3), Nanos(1), &mut rng);
    assert!(ops.slot_reads >= 50, "{ops:?}");
    assert!(ops.total() > ops.slot_reads);
}
