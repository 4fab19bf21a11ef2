//! The per-packet calls allocate nothing: a counting global allocator sees no allocation
//! across 100 000 `zl_aqm_arrive` calls and a burst, for ZL-RED on a shared list, SRED and
//! RED, in the regions where they draw, mark and drop (the constructors allocate, before).
//! Only the test's own thread is counted, while it makes those calls: the test harness's
//! other threads may allocate at any time (CI saw 4 allocations on a loaded machine).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use zl_aqm_capi::*;

struct Counting;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// Set on the test's thread for the calls under measurement (a `const` initialiser: the
    /// allocator reads it without allocating).
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}

fn count() {
    if COUNTING.with(Cell::get) {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: forwards every call to the system allocator unchanged; only counts.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded; `ptr` came from `alloc` above, i.e. from `System`.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: forwarded; `ptr` came from `System`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn arrivals_do_not_allocate() {
    let queue = ZlQueueParams {
        capacity_packets: 1000,
        capacity_bytes: ZL_UNBOUNDED_BYTES,
        link_rate_bps: 1_000_000_000,
    };
    let mut list = std::ptr::null_mut();
    let (mut zl, mut sred, mut red) = (
        std::ptr::null_mut(),
        std::ptr::null_mut(),
        std::ptr::null_mut(),
    );
    let mut arrivals = vec![zl_arrival_default(); 32];
    let mut verdicts = vec![ZlVerdict::ZL_VERDICT_ENQUEUE; 32];
    // SAFETY: every pointer is valid: locals, and handles the constructors just returned.
    unsafe {
        assert_eq!(
            zl_zombie_list_new(&zl_zombie_params_default(), &mut list),
            ZlStatus::ZL_OK
        );
        let mut p = zl_zlred_params_default();
        p.ecn = 1;
        assert_eq!(zl_aqm_new_zlred(&p, &queue, list, &mut zl), ZlStatus::ZL_OK);
        assert_eq!(
            zl_aqm_new_sred(&zl_sred_params_default(), &queue, list, &mut sred),
            ZlStatus::ZL_OK
        );
        assert_eq!(
            zl_aqm_new_red(&zl_red_params_default(), &queue, &mut red),
            ZlStatus::ZL_OK
        );
        // One warm-up call per policy (thread-local shard numbering of the list's P(t)).
        let mut rng = 9u64;
        let mut a = zl_arrival_default();
        for aqm in [zl, sred, red] {
            zl_aqm_arrive(aqm, &a, &mut rng);
        }

        let before = ALLOCATIONS.load(Ordering::Relaxed);
        COUNTING.with(|c| c.set(true));
        let mut seen = [0u64; 6];
        for i in 0..100_000u64 {
            a.flow_hash = zl_rng_next(&mut rng) % 200;
            a.now_ns = i * 100;
            a.queue_packets = (i % 1200) as u32;
            a.ecn = ((i / 3) % 3) as u8;
            let aqm = [zl, sred, red][(i % 3) as usize];
            seen[zl_aqm_arrive(aqm, &a, &mut rng) as usize] += 1;
        }
        for (k, x) in arrivals.iter_mut().enumerate() {
            *x = a;
            x.queue_packets = 300 + k as u32;
        }
        zl_aqm_arrive_burst(zl, arrivals.as_ptr(), 32, &mut rng, verdicts.as_mut_ptr());
        let mut stats = ZlAqmStats::default();
        zl_aqm_stats(zl, &mut stats);
        let mut flows = 0.0;
        zl_aqm_flow_estimate(zl, &mut flows);
        let after = ALLOCATIONS.load(Ordering::Relaxed);
        COUNTING.with(|c| c.set(false));
        assert_eq!(after - before, 0, "allocations during the per-packet calls");

        // The loop went through every kind of decision.
        let [enq, mark, early, forced, tail, invalid] = seen;
        assert!(
            enq > 0 && mark > 0 && early > 0 && forced > 0 && tail > 0,
            "{seen:?}"
        );
        assert_eq!(invalid, 0);
        assert!(
            flows > 100.0 && flows < 400.0,
            "1/P(t) = {flows} for 200 flows"
        );

        zl_aqm_free(zl);
        zl_aqm_free(sred);
        zl_aqm_free(red);
        zl_zombie_list_free(list);
    }
}
