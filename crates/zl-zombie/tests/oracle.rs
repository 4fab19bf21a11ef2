//! Property tests: after any single-threaded sequence, the table agrees with a scan of the
//! list and the lock-free list agrees with `NaiveZombieList` fed the same random stream.

use proptest::prelude::*;
use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use zl_zombie::{FlowId, NaiveZombieList, Nanos, ZombieList, ZombieParams};

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn table_equals_scan_and_naive(
        m in 1usize..24,
        p_swap in 0.0f64..=1.0,
        seed in any::<u64>(),
        flows in prop::collection::vec(0u64..40, 1..400),
    ) {
        let cfg = ZombieParams { m, p_swap, ..ZombieParams::default() }.validate().unwrap();
        let list = ZombieList::new(cfg);
        let mut naive = NaiveZombieList::new(cfg);
        let mut rng_a = Xoshiro256PlusPlus::seed_from_u64(seed);
        let mut rng_b = Xoshiro256PlusPlus::seed_from_u64(seed);
        for (t, &f) in flows.iter().enumerate() {
            // Spread the small ids over the 64-bit space so that hashes collide variously.
            let flow = FlowId(f.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (f << 7));
            let a = list.observe(flow, Nanos(t as u64), &mut rng_a);
            let b = naive.observe(flow, Nanos(t as u64), &mut rng_b);
            prop_assert_eq!(a, b);
        }
        prop_assert_eq!(list.zombies(), naive.zombies().to_vec());
        prop_assert_eq!(list.total_occurrence(), naive.total_occurrence());
        for &f in &flows {
            let flow = FlowId(f.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (f << 7));
            prop_assert_eq!(list.occurrence(flow), naive.occurrence(flow));
        }
        prop_assert_eq!(list.check_invariants(), Ok(()));
    }
}
