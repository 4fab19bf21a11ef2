//! The per-packet calls allocate nothing: a counting global allocator sees no allocation
//! across 100 000 `zl_aqm_arrive` calls and a burst, for ZL-RED on a shared list, SRED, RED
//! and PIE, in the regions where they draw, mark and drop, nor across 200 000
//! `zl_qdisc_enqueue` / `zl_qdisc_dequeue` calls of each discipline over an overloaded queue
//! (the constructors allocate, before). Only each test's own thread is counted, while it
//! makes those calls: the test harness's other threads may allocate at any time (CI saw 4
//! allocations on a loaded machine).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::ffi::{c_void, CString};

use zl_aqm_capi::*;

struct Counting;

thread_local! {
    /// Set on a test's thread for the calls under measurement, and the allocations counted
    /// meanwhile (`const` initialisers: the allocator reads them without allocating).
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count() {
    if COUNTING.with(Cell::get) {
        ALLOCATIONS.with(|n| n.set(n.get() + 1));
    }
}

/// Runs `f` with this thread's allocations counted; returns how many there were.
fn allocations_in(f: impl FnOnce()) -> u64 {
    let before = ALLOCATIONS.with(Cell::get);
    COUNTING.with(|c| c.set(true));
    f();
    COUNTING.with(|c| c.set(false));
    ALLOCATIONS.with(Cell::get) - before
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
    let (mut zl, mut sred, mut red, mut pie) = (
        std::ptr::null_mut(),
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
        let mut pp = zl_pie_params_default();
        pp.ecn = 1;
        pp.t_update_ms = 1.0;
        pp.max_burst_ms = 0.0;
        assert_eq!(zl_aqm_new_pie(&pp, &queue, &mut pie), ZlStatus::ZL_OK);
        // One warm-up call per policy (thread-local shard numbering of the list's P(t)).
        let mut rng = 9u64;
        let mut a = zl_arrival_default();
        for aqm in [zl, sred, red, pie] {
            zl_aqm_arrive(aqm, &a, &mut rng);
        }

        let mut seen = [0u64; 6];
        let mut flows = 0.0;
        let n = allocations_in(|| {
            for i in 0..100_000u64 {
                a.flow_hash = zl_rng_next(&mut rng) % 200;
                a.now_ns = i * 100;
                a.queue_packets = (i % 1200) as u32;
                a.queue_bytes = u64::from(a.queue_packets) * 1000;
                a.packet_len = 1000;
                a.ecn = ((i / 3) % 3) as u8;
                let aqm = [zl, sred, red, pie][(i % 4) as usize];
                seen[zl_aqm_arrive(aqm, &a, &mut rng) as usize] += 1;
                if i % 4 == 3 {
                    zl_aqm_depart(pie, &a);
                }
            }
            for (k, x) in arrivals.iter_mut().enumerate() {
                *x = a;
                x.queue_packets = 300 + k as u32;
            }
            zl_aqm_arrive_burst(zl, arrivals.as_ptr(), 32, &mut rng, verdicts.as_mut_ptr());
            let mut stats = ZlAqmStats::default();
            zl_aqm_stats(zl, &mut stats);
            zl_aqm_flow_estimate(zl, &mut flows);
        });
        assert_eq!(n, 0, "allocations during the per-packet calls");

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
        zl_aqm_free(pie);
        zl_zombie_list_free(list);
    }
}

/// The discard callback: counts into the `u64` that `ctx` points to.
unsafe extern "C" fn count_discard(ctx: *mut c_void, _handle: u64, _cause: ZlDiscardCause) {
    // SAFETY: `ctx` is the test's local counter, alive while the qdisc is.
    unsafe { *ctx.cast::<u64>() += 1 };
}

#[test]
fn qdisc_calls_do_not_allocate() {
    let queue = ZlQueueParams {
        capacity_packets: 1000,
        capacity_bytes: ZL_UNBOUNDED_BYTES,
        link_rate_bps: 1_000_000_000,
    };
    let kinds = [
        "kind = \"codel\"\ntarget_ms = 0.5\ninterval_ms = 5\necn = true",
        "kind = \"fq-codel\"\nisolate = \"triple-isolate\"",
        "kind = \"dualpi2\"\nt_update_ms = 1",
        "kind = \"zl-red\"\n[zombie]\nm = 100\n[isolation]\nwindow_ms = 5\nconfirm = 2",
    ];
    for kind in kinds {
        let text = CString::new(kind).unwrap();
        let mut discarded = 0u64;
        let mut q = std::ptr::null_mut();
        let ctx: *mut u64 = &mut discarded;
        // SAFETY: valid pointers to locals; `discarded` outlives the qdisc.
        unsafe {
            assert_eq!(
                zl_qdisc_new_from_toml(
                    text.as_ptr(),
                    &queue,
                    std::ptr::null(),
                    Some(count_discard),
                    ctx.cast(),
                    &mut q,
                ),
                ZlStatus::ZL_OK,
                "{kind}"
            );
        }
        let mut rng = 9u64;
        let mut a = zl_arrival_default();
        a.packet_len = 1000;
        let mut d = ZlDeparture {
            handle: 0,
            enqueued_ns: 0,
            hold_until_ns: 0,
            packet_len: 0,
            mark: 0,
        };
        let mut verdicts = [0u64; 6];
        let mut statuses = [0u64; 4];
        // SAFETY: `q` is live; locals.
        unsafe {
            // Warm-up (thread-local shard numbering of the list's P(t)).
            zl_qdisc_enqueue(q, &a, 0, &mut rng);
            let n = allocations_in(|| {
                for i in 1..200_000u64 {
                    let r = zl_rng_next(&mut rng);
                    a.now_ns = i * 1_000;
                    a.flow_hash = if r % 4 == 0 { 1 } else { r % 300 };
                    a.src_host = (a.flow_hash % 20) as u16;
                    a.ecn = (r >> 10) as u8 % 4;
                    verdicts[zl_qdisc_enqueue(q, &a, i, &mut rng) as usize] += 1;
                    // Two dequeues every three arrivals: an overloaded queue.
                    if i % 3 != 0 {
                        statuses[zl_qdisc_dequeue(q, a.now_ns, &mut rng, &mut d) as usize] += 1;
                    }
                }
            });
            assert_eq!(n, 0, "{kind}: allocations during the per-packet calls");
            assert_eq!(zl_qdisc_free(q), ZlStatus::ZL_OK);
        }
        // The loop went through drops or discards, not only admissions.
        let refused: u64 = verdicts[2..5].iter().sum();
        assert!(
            refused + discarded > 1000,
            "{kind}: {verdicts:?} {discarded}"
        );
        assert_eq!(verdicts[5] + statuses[3], 0, "{kind}: invalid arguments");
        assert!(statuses[0] > 100_000, "{kind}: {statuses:?}");
    }
}
