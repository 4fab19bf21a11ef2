//! The exported functions. Each checks its pointers and ranges first and answers a misuse with
//! a status (and `zl_last_error`'s message) before touching any state.
//!
//! Handles: a `ZlZombieList` is a boxed `Arc<ZombieList>`, so every policy built on it holds
//! its own reference and the handles can be freed in any order. A `ZlAqm` is a boxed
//! [`Policy`]; the C side owns it and frees it once. The queue disciplines' handle, `ZlQdisc`,
//! is in `ffi_qdisc.rs`; the argument checks here serve both.

use std::ffi::{c_char, CStr};
use std::sync::Arc;

use zl_aqm::{AqmParams, PieParams, RedParams, SredParams};
use zl_zombie::{ZombieList, ZombieParams};

use crate::error;
use crate::params;
use crate::policy::Policy;
use crate::rng::SplitMix64;
use crate::types::*;

/// A Zombie List shared by any number of queues and threads (opaque to C).
#[derive(Debug)]
pub struct ZlZombieList {
    pub(crate) list: Arc<ZombieList>,
}

/// One egress queue's AQM policy (opaque to C).
#[derive(Debug)]
pub struct ZlAqm {
    policy: Policy,
}

/// Records the error and returns its status.
#[cold]
pub(crate) fn fail(status: ZlStatus, msg: impl Into<String>) -> ZlStatus {
    error::set(msg);
    status
}

/// `Some(&T)` for a non-null pointer, else records a null-pointer error naming `what`.
///
/// # Safety
/// `p` is null or points to a live, properly aligned `T`.
pub(crate) unsafe fn arg<'a, T>(p: *const T, what: &str) -> Result<&'a T, ZlStatus> {
    // SAFETY: forwarded from the caller: null or valid for reads for `'a`.
    match unsafe { p.as_ref() } {
        Some(r) => Ok(r),
        None => Err(fail(ZlStatus::ZL_ERR_NULL, format!("{what} is null"))),
    }
}

/// Stores `v` through an out-pointer checked non-null by the caller.
///
/// # Safety
/// `out` is non-null and points to writable memory for a `T`.
pub(crate) unsafe fn put<T>(out: *mut T, v: T) {
    // SAFETY: forwarded from the caller. `write` does not drop the old (possibly
    // uninitialised) value.
    unsafe { out.write(v) }
}

/// The fields of an arrival that C could set to a value no packet has, and a time so late
/// that a policy's `now + interval` could overflow.
#[inline(always)]
pub(crate) fn arrival_in_range(a: &ZlArrival) -> bool {
    a.ecn <= 3 && a.color <= 2 && a.priority <= 15 && a.has_cc_ext <= 1 && a.now_ns <= ZL_MAX_NOW_NS
}

#[cold]
#[inline(never)]
pub(crate) fn arrival_error(a: &ZlArrival) {
    let msg = if a.now_ns > ZL_MAX_NOW_NS {
        now_message("arrival.now_ns", a.now_ns)
    } else if a.ecn > 3 {
        format!("arrival.ecn = {}: expected 0..=3", a.ecn)
    } else if a.color > 2 {
        format!(
            "arrival.color = {}: expected 0 (green), 1 (yellow) or 2 (red)",
            a.color
        )
    } else if a.priority > 15 {
        format!("arrival.priority = {}: expected 0..=15", a.priority)
    } else {
        format!("arrival.has_cc_ext = {}: expected 0 or 1", a.has_cc_ext)
    };
    error::set(msg);
}

/// The message for a time past `ZL_MAX_NOW_NS`.
#[cold]
pub(crate) fn now_message(what: &str, ns: u64) -> String {
    format!("{what} = {ns}: expected <= ZL_MAX_NOW_NS (2^63 - 1 ns)")
}

pub(crate) fn check_queue(q: &ZlQueueParams) -> Result<(), ZlStatus> {
    if q.capacity_packets == 0 {
        return Err(fail(
            ZlStatus::ZL_ERR_PARAM,
            "queue.capacity_packets = 0: expected >= 1 (ZL_UNBOUNDED_PACKETS for no bound)",
        ));
    }
    if q.capacity_bytes == 0 {
        return Err(fail(
            ZlStatus::ZL_ERR_PARAM,
            "queue.capacity_bytes = 0: expected >= 1 (ZL_UNBOUNDED_BYTES for no bound)",
        ));
    }
    Ok(())
}

/// Builds the policy and hands it out through `out`.
///
/// # Safety
/// `out` is non-null and writable.
unsafe fn build(
    params: &AqmParams,
    queue: &ZlQueueParams,
    shared: Option<&ZlZombieList>,
    out: *mut *mut ZlAqm,
) -> ZlStatus {
    if let Err(s) = check_queue(queue) {
        return s;
    }
    match Policy::build(params, queue, shared.map(|s| Arc::clone(&s.list))) {
        Ok(policy) => {
            let handle = Box::into_raw(Box::new(ZlAqm { policy }));
            // SAFETY: `out` is non-null and writable (the caller's guarantee).
            unsafe { put(out, handle) };
            ZlStatus::ZL_OK
        }
        Err(e) => fail(ZlStatus::ZL_ERR_PARAM, e.to_string()),
    }
}

/// Checks `out`, clears it to null, and runs `f` with it (every constructor's prologue: on
/// failure `*out` is null).
///
/// # Safety
/// `out` is null or writable.
pub(crate) unsafe fn with_out<H>(
    out: *mut *mut H,
    f: impl FnOnce() -> Result<ZlStatus, ZlStatus>,
) -> ZlStatus {
    if out.is_null() {
        return fail(ZlStatus::ZL_ERR_NULL, "out is null");
    }
    // SAFETY: `out` is non-null and writable (the caller's guarantee).
    unsafe { put(out, std::ptr::null_mut()) };
    f().unwrap_or_else(|s| s)
}

/// The default Zombie List parameters (M = 1000, `p_swap` = 0.25, `alpha` = 1/M, table).
///
/// Thread safety: pure; any thread.
#[no_mangle]
pub extern "C" fn zl_zombie_params_default() -> ZlZombieParams {
    (&ZombieParams::default()).into()
}

/// The default RED parameters (`min_th` 5, `max_th` 15 packets, `max_p` 1/50, `w_q` 0.002,
/// ECN on).
///
/// Thread safety: pure; any thread.
#[no_mangle]
pub extern "C" fn zl_red_params_default() -> ZlRedParams {
    (&RedParams::default()).into()
}

/// The default SRED parameters (the paper's: `p_max` 0.15, drop rather than mark).
///
/// Thread safety: pure; any thread.
#[no_mangle]
pub extern "C" fn zl_sred_params_default() -> ZlSredParams {
    (&SredParams::default()).into()
}

/// The default ZL-RED parameters (the paper's: `p_max` 0.15, `th_min` 5, `a` 1, drop rather
/// than mark).
///
/// Thread safety: pure; any thread.
#[no_mangle]
pub extern "C" fn zl_zlred_params_default() -> ZlZlredParams {
    (&zl_aqm::ZlRedParams::default()).into()
}

/// The default PIE parameters (RFC 8033's: target 15 ms, update every 15 ms, burst allowance
/// 150 ms, `alpha` 0.125, `beta` 1.25, drop rather than mark, the dequeue-rate estimator).
///
/// Thread safety: pure; any thread.
#[no_mangle]
pub extern "C" fn zl_pie_params_default() -> ZlPieParams {
    (&PieParams::default()).into()
}

/// An arrival with every field zero except `head_enqueued_ns` and `idle_since_ns`, which are
/// `ZL_NO_TIME`: a not-ECT green packet of length 0 from and to host 0, on an empty, not idle
/// queue.
///
/// Thread safety: pure; any thread.
#[no_mangle]
pub extern "C" fn zl_arrival_default() -> ZlArrival {
    ZlArrival {
        flow_hash: 0,
        now_ns: 0,
        queue_bytes: 0,
        head_enqueued_ns: ZL_NO_TIME,
        idle_since_ns: ZL_NO_TIME,
        queue_packets: 0,
        packet_len: 0,
        src_host: 0,
        dst_host: 0,
        ecn: 0,
        color: 0,
        priority: 0,
        weight: 0,
        has_cc_ext: 0,
    }
}

/// Creates an empty Zombie List (`P(0) = 0`, T = 0) and stores its handle in `*out`.
///
/// Errors: `ZL_ERR_NULL` (a null argument), `ZL_ERR_PARAM` (a parameter out of range); `*out`
/// is then null.
///
/// Thread safety: any thread. The list it returns is shared: any number of threads may call
/// any `zl_zombie_list_*` function and run policies built on it at the same time (it is
/// lock-free).
///
/// # Safety
/// `params` is null or points to a `ZlZombieParams`; `out` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn zl_zombie_list_new(
    params: *const ZlZombieParams,
    out: *mut *mut ZlZombieList,
) -> ZlStatus {
    if out.is_null() {
        return fail(ZlStatus::ZL_ERR_NULL, "out is null");
    }
    // SAFETY: `out` is non-null and writable (the caller's guarantee).
    unsafe { put(out, std::ptr::null_mut()) };
    // SAFETY: null or a valid `ZlZombieParams` (the caller's guarantee).
    let p = match unsafe { arg(params, "params") } {
        Ok(p) => p,
        Err(s) => return s,
    };
    let cfg = match params::zombie(p).map(|z| z.validate()) {
        Ok(Ok(cfg)) => cfg,
        Ok(Err(e)) => return fail(ZlStatus::ZL_ERR_PARAM, e.to_string()),
        Err(msg) => return fail(ZlStatus::ZL_ERR_PARAM, msg),
    };
    let handle = Box::into_raw(Box::new(ZlZombieList {
        list: Arc::new(ZombieList::new(cfg)),
    }));
    // SAFETY: as above.
    unsafe { put(out, handle) };
    ZlStatus::ZL_OK
}

/// Releases the caller's handle on a Zombie List. Policies built on it keep the list alive
/// until they are freed too, so the handles may be freed in any order. Null is ignored.
///
/// Thread safety: any thread, once per handle, after the last call that uses this handle
/// (policies built on the list may go on running).
///
/// # Safety
/// `list` is null or a handle from `zl_zombie_list_new` not yet freed.
#[no_mangle]
pub unsafe extern "C" fn zl_zombie_list_free(list: *mut ZlZombieList) {
    if !list.is_null() {
        // SAFETY: a handle from `zl_zombie_list_new` (a `Box::into_raw`), freed once.
        drop(unsafe { Box::from_raw(list) });
    }
}

/// Reads the list's `P(t)`, its flow estimate `1/P(t)`, T and the table-full counter.
///
/// Thread safety: any thread, at any time, also while other threads observe the list (the
/// values are then a recent picture, each read atomically).
///
/// # Safety
/// `list` is null or a live handle; `out` is null or writable.
#[no_mangle]
pub unsafe extern "C" fn zl_zombie_list_stats(
    list: *const ZlZombieList,
    out: *mut ZlZombieStats,
) -> ZlStatus {
    // SAFETY: null or a live handle (the caller's guarantee).
    let list = match unsafe { arg(list, "list") } {
        Ok(l) => &l.list,
        Err(s) => return s,
    };
    if out.is_null() {
        return fail(ZlStatus::ZL_ERR_NULL, "out is null");
    }
    let stats = ZlZombieStats {
        hit_frequency: list.hit_frequency(),
        estimated_flows: list.estimated_flows(),
        total_occurrence: list.total_occurrence(),
        table_full_events: list.table_full_events(),
    };
    // SAFETY: non-null and writable (the caller's guarantee).
    unsafe { put(out, stats) };
    ZlStatus::ZL_OK
}

/// Creates a RED policy for a queue and stores its handle in `*out`.
///
/// Errors: `ZL_ERR_NULL`, `ZL_ERR_PARAM` (the message names the parameter and its range);
/// `*out` is then null.
///
/// Thread safety: any thread; the new policy belongs to one thread at a time.
///
/// # Safety
/// Each pointer is null or valid: `params` and `queue` readable, `out` writable.
#[no_mangle]
pub unsafe extern "C" fn zl_aqm_new_red(
    params: *const ZlRedParams,
    queue: *const ZlQueueParams,
    out: *mut *mut ZlAqm,
) -> ZlStatus {
    // SAFETY: each pointer null or valid (the caller's guarantee); `out` checked by `with_out`.
    unsafe {
        with_out(out, || {
            let p = arg(params, "params")?;
            let q = arg(queue, "queue")?;
            let red = params::red(p).map_err(|m| fail(ZlStatus::ZL_ERR_PARAM, m))?;
            Ok(build(&AqmParams::Red(red), q, None, out))
        })
    }
}

/// Creates an SRED policy for a queue, on the shared Zombie List `shared` or, when it is null,
/// on a list of its own built from `params->zombie`, and stores its handle in `*out`.
///
/// Errors: `ZL_ERR_NULL`, `ZL_ERR_PARAM`; `*out` is then null.
///
/// Thread safety: any thread; the new policy belongs to one thread at a time (its list may be
/// shared).
///
/// # Safety
/// Each pointer is null or valid: `params` and `queue` readable, `shared` a live list handle,
/// `out` writable.
#[no_mangle]
pub unsafe extern "C" fn zl_aqm_new_sred(
    params: *const ZlSredParams,
    queue: *const ZlQueueParams,
    shared: *const ZlZombieList,
    out: *mut *mut ZlAqm,
) -> ZlStatus {
    // SAFETY: each pointer null or valid (the caller's guarantee); `out` checked by `with_out`.
    unsafe {
        with_out(out, || {
            let p = arg(params, "params")?;
            let q = arg(queue, "queue")?;
            let sred = params::sred(p).map_err(|m| fail(ZlStatus::ZL_ERR_PARAM, m))?;
            Ok(build(&AqmParams::Sred(sred), q, shared.as_ref(), out))
        })
    }
}

/// Creates a ZL-RED policy for a queue, on the shared Zombie List `shared` or, when it is
/// null, on a list of its own built from `params->zombie`, and stores its handle in `*out`.
///
/// Errors: `ZL_ERR_NULL`, `ZL_ERR_PARAM`; `*out` is then null.
///
/// Thread safety: any thread; the new policy belongs to one thread at a time (its list may be
/// shared).
///
/// # Safety
/// Each pointer is null or valid: `params` and `queue` readable, `shared` a live list handle,
/// `out` writable.
#[no_mangle]
pub unsafe extern "C" fn zl_aqm_new_zlred(
    params: *const ZlZlredParams,
    queue: *const ZlQueueParams,
    shared: *const ZlZombieList,
    out: *mut *mut ZlAqm,
) -> ZlStatus {
    // SAFETY: each pointer null or valid (the caller's guarantee); `out` checked by `with_out`.
    unsafe {
        with_out(out, || {
            let p = arg(params, "params")?;
            let q = arg(queue, "queue")?;
            let zl = params::zlred(p).map_err(|m| fail(ZlStatus::ZL_ERR_PARAM, m))?;
            Ok(build(&AqmParams::ZlRed(zl), q, shared.as_ref(), out))
        })
    }
}

/// Creates a PIE policy (RFC 8033) for a queue and stores its handle in `*out`. With the
/// default estimator, the dequeue rate, call `zl_aqm_depart` for every packet that leaves the
/// queue: PIE measures the queueing delay from the departures.
///
/// Errors: `ZL_ERR_NULL`, `ZL_ERR_PARAM` (the message names the parameter and its range);
/// `*out` is then null.
///
/// Thread safety: any thread; the new policy belongs to one thread at a time.
///
/// # Safety
/// Each pointer is null or valid: `params` and `queue` readable, `out` writable.
#[no_mangle]
pub unsafe extern "C" fn zl_aqm_new_pie(
    params: *const ZlPieParams,
    queue: *const ZlQueueParams,
    out: *mut *mut ZlAqm,
) -> ZlStatus {
    // SAFETY: each pointer null or valid (the caller's guarantee); `out` checked by `with_out`.
    unsafe {
        with_out(out, || {
            let p = arg(params, "params")?;
            let q = arg(queue, "queue")?;
            let pie = params::pie(p).map_err(|m| fail(ZlStatus::ZL_ERR_PARAM, m))?;
            Ok(build(&AqmParams::Pie(pie), q, None, out))
        })
    }
}

/// Reads a NUL-terminated TOML table into the router's AQM parameters.
///
/// # Safety
/// `toml` is null or a NUL-terminated string.
pub(crate) unsafe fn toml_params(toml: *const c_char) -> Result<AqmParams, ZlStatus> {
    if toml.is_null() {
        return Err(fail(ZlStatus::ZL_ERR_NULL, "toml is null"));
    }
    // SAFETY: non-null and NUL-terminated (the caller's guarantee).
    let text = unsafe { CStr::from_ptr(toml) }
        .to_str()
        .map_err(|e| fail(ZlStatus::ZL_ERR_CONFIG, format!("toml: {e}")))?;
    toml::from_str(text).map_err(|e| fail(ZlStatus::ZL_ERR_CONFIG, format!("toml: {e}")))
}

/// Creates any policy that decides on the caller's FIFO from a TOML table in the router's
/// config syntax (`kind = "red"`, `"sred"`, `"zl-red"`, `"tail-drop"`, `"priority-ecn-red"`,
/// `"nonlinear-red"`, `"sojourn"`, `"pie"`, and that kind's keys; docs/configs.md), on `shared`
/// when it is an SRED or ZL-RED policy and `shared` is not null. Stores its handle in `*out`.
/// The kinds that hold their own queues (`"codel"`, `"fq-codel"`, `"dualpi2"`, `"zl-red"` with
/// an `isolation` table) are `ZlQdisc`s: `zl_qdisc_new_from_toml`.
///
/// Errors: `ZL_ERR_NULL`, `ZL_ERR_CONFIG` (not UTF-8, not TOML, unknown kind or key, a kind
/// that holds its own queues), `ZL_ERR_PARAM`; `*out` is then null.
///
/// Thread safety: any thread; the new policy belongs to one thread at a time.
///
/// # Safety
/// `toml` is null or a NUL-terminated string; the other pointers null or valid as in
/// `zl_aqm_new_zlred`.
#[no_mangle]
pub unsafe extern "C" fn zl_aqm_new_from_toml(
    toml: *const c_char,
    queue: *const ZlQueueParams,
    shared: *const ZlZombieList,
    out: *mut *mut ZlAqm,
) -> ZlStatus {
    // SAFETY: each pointer null or valid (the caller's guarantee); `out` checked by `with_out`.
    unsafe {
        with_out(out, || {
            let params = toml_params(toml)?;
            let q = arg(queue, "queue")?;
            if params.holds_queues() {
                return Err(fail(
                    ZlStatus::ZL_ERR_CONFIG,
                    format!(
                        "kind = \"{}\"{} holds its own queues: create it with \
                         zl_qdisc_new_from_toml",
                        params.kind(),
                        if params.kind() == "zl-red" {
                            " with an isolation table"
                        } else {
                            ""
                        }
                    ),
                ));
            }
            Ok(build(&params, q, shared.as_ref(), out))
        })
    }
}

/// Frees a policy (its counters go with it; its Zombie List lives on while other policies or
/// a list handle refer to it). Null is ignored.
///
/// Thread safety: the thread that owns the policy, once, after its last call.
///
/// # Safety
/// `aqm` is null or a handle from a `zl_aqm_new_*` function not yet freed.
#[no_mangle]
pub unsafe extern "C" fn zl_aqm_free(aqm: *mut ZlAqm) {
    if !aqm.is_null() {
        // SAFETY: a handle from a constructor (a `Box::into_raw`), freed once.
        drop(unsafe { Box::from_raw(aqm) });
    }
}

/// Decides one arriving packet: call it once per packet, before queueing it, with the queue
/// as it is without the packet. Advances `*rng_state` (a SplitMix64 state, see
/// `zl_rng_next`) by the draws it makes, updates the policy's counters and, for
/// SRED / ZL-RED, shows the packet to the Zombie List.
///
/// Returns the verdict; `ZL_VERDICT_INVALID_ARGUMENT` for a null pointer or an out-of-range
/// field (`ecn > 3`, `color > 2`, `priority > 15`, `has_cc_ext > 1`,
/// `now_ns > ZL_MAX_NOW_NS`), counting nothing and changing no state. Allocates nothing.
///
/// Thread safety: not for two threads on one policy at once; the policy may move between
/// threads. Policies on a shared Zombie List may run on different threads at the same time.
///
/// # Safety
/// `aqm` is null or a live handle; `arrival` is null or readable; `rng_state` is null or a
/// writable `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn zl_aqm_arrive(
    aqm: *mut ZlAqm,
    arrival: *const ZlArrival,
    rng_state: *mut u64,
) -> ZlVerdict {
    // SAFETY: each pointer null or valid (the caller's guarantee); `as_*` turns null into None.
    let (aqm, a, rng) = match unsafe { (aqm.as_mut(), arrival.as_ref(), rng_state.as_mut()) } {
        (Some(aqm), Some(a), Some(rng)) => (aqm, a, rng),
        _ => {
            error::set("zl_aqm_arrive: aqm, arrival or rng_state is null");
            return ZlVerdict::ZL_VERDICT_INVALID_ARGUMENT;
        }
    };
    if !arrival_in_range(a) {
        arrival_error(a);
        return ZlVerdict::ZL_VERDICT_INVALID_ARGUMENT;
    }
    aqm.policy.arrive(a, &mut SplitMix64(rng))
}

/// Tells the policy that a packet left its queue, for policies that act on departures: call
/// it once per packet dequeued, with `departure` describing that packet (`flow_hash`,
/// `packet_len`, `ecn`, `color`, ...), the time, and the queue as it is after the departure
/// (`queue_packets`, `queue_bytes`, `head_enqueued_ns`). PIE needs it: its default delay
/// estimator measures the dequeue rate from these calls (without them it sees no delay and
/// never drops). The other policies decide on the queue at arrival and ignore it; calling it
/// for every policy keeps an embedding right whatever the configured kind.
///
/// Errors: `ZL_ERR_NULL`, `ZL_ERR_PARAM` (an out-of-range field; nothing changed).
///
/// Thread safety: as `zl_aqm_arrive`.
///
/// # Safety
/// `aqm` is null or a live handle; `departure` null or readable.
#[no_mangle]
pub unsafe extern "C" fn zl_aqm_depart(aqm: *mut ZlAqm, departure: *const ZlArrival) -> ZlStatus {
    // SAFETY: null or valid (the caller's guarantee).
    let (aqm, d) = match unsafe { (aqm.as_mut(), departure.as_ref()) } {
        (Some(aqm), Some(d)) => (aqm, d),
        _ => return fail(ZlStatus::ZL_ERR_NULL, "aqm or departure is null"),
    };
    if !arrival_in_range(d) {
        arrival_error(d);
        return ZlStatus::ZL_ERR_PARAM;
    }
    aqm.policy.depart(d);
    ZlStatus::ZL_OK
}

/// Decides `n` arrivals in order, as `n` calls of `zl_aqm_arrive` would (same verdicts,
/// same draws), writing `verdicts[i]` for `arrivals[i]`. Each arrival is taken as given: the
/// caller sets each one's queue length (for a receive burst going to one queue, the length
/// before the burst plus the packets of the burst admitted so far; see
/// `examples/c/bench_arrive.c`). An out-of-range arrival gets `ZL_VERDICT_INVALID_ARGUMENT` and
/// the others are still decided; the call then returns `ZL_ERR_PARAM`.
///
/// Errors: `ZL_ERR_NULL` (nothing decided), `ZL_ERR_PARAM`.
///
/// Thread safety: as `zl_aqm_arrive`.
///
/// # Safety
/// `aqm` is null or a live handle; `arrivals` null or `n` readable arrivals; `verdicts` null or
/// `n` writable verdicts; `rng_state` null or a writable `uint64_t`. With `n = 0` the arrays
/// are not read.
#[no_mangle]
pub unsafe extern "C" fn zl_aqm_arrive_burst(
    aqm: *mut ZlAqm,
    arrivals: *const ZlArrival,
    n: usize,
    rng_state: *mut u64,
    verdicts: *mut ZlVerdict,
) -> ZlStatus {
    // SAFETY: null or valid (the caller's guarantee).
    let (aqm, rng) = match unsafe { (aqm.as_mut(), rng_state.as_mut()) } {
        (Some(aqm), Some(rng)) => (aqm, rng),
        _ => return fail(ZlStatus::ZL_ERR_NULL, "aqm or rng_state is null"),
    };
    if n == 0 {
        return ZlStatus::ZL_OK;
    }
    if arrivals.is_null() || verdicts.is_null() {
        return fail(ZlStatus::ZL_ERR_NULL, "arrivals or verdicts is null");
    }
    // SAFETY: `arrivals` points to `n` readable arrivals and `verdicts` to `n` writable
    // verdicts (the caller's guarantee); both non-null and distinct types, so not aliased.
    let (arrivals, verdicts) = unsafe {
        (
            std::slice::from_raw_parts(arrivals, n),
            std::slice::from_raw_parts_mut(verdicts, n),
        )
    };
    let mut rng = SplitMix64(rng);
    let mut status = ZlStatus::ZL_OK;
    for (a, v) in arrivals.iter().zip(verdicts.iter_mut()) {
        *v = if arrival_in_range(a) {
            aqm.policy.arrive(a, &mut rng)
        } else {
            arrival_error(a);
            status = ZlStatus::ZL_ERR_PARAM;
            ZlVerdict::ZL_VERDICT_INVALID_ARGUMENT
        };
    }
    status
}

/// Copies the policy's counters into `*out`.
///
/// Thread safety: the thread that owns the policy (not during a `zl_aqm_arrive` on it).
///
/// # Safety
/// `aqm` is null or a live handle; `out` null or writable.
#[no_mangle]
pub unsafe extern "C" fn zl_aqm_stats(aqm: *const ZlAqm, out: *mut ZlAqmStats) -> ZlStatus {
    // SAFETY: null or a live handle (the caller's guarantee).
    let aqm = match unsafe { arg(aqm, "aqm") } {
        Ok(a) => a,
        Err(s) => return s,
    };
    if out.is_null() {
        return fail(ZlStatus::ZL_ERR_NULL, "out is null");
    }
    // SAFETY: non-null and writable (the caller's guarantee).
    unsafe { put(out, aqm.policy.stats()) };
    ZlStatus::ZL_OK
}

/// Stores the flow estimate `1/P(t)` of the policy's Zombie List in `*flows` (`+inf` while
/// `P(t) = 0`, before any hit).
///
/// Errors: `ZL_ERR_NULL`, `ZL_ERR_NO_ZOMBIE_LIST` (not SRED or ZL-RED; `*flows` untouched).
///
/// Thread safety: any thread, at any time: it reads only the (shared, atomic) Zombie List.
///
/// # Safety
/// `aqm` is null or a live handle; `flows` null or writable.
#[no_mangle]
pub unsafe extern "C" fn zl_aqm_flow_estimate(aqm: *const ZlAqm, flows: *mut f64) -> ZlStatus {
    // SAFETY: null or a live handle (the caller's guarantee).
    let aqm = match unsafe { arg(aqm, "aqm") } {
        Ok(a) => a,
        Err(s) => return s,
    };
    if flows.is_null() {
        return fail(ZlStatus::ZL_ERR_NULL, "flows is null");
    }
    match aqm.policy.zombie_list() {
        Some(list) => {
            // SAFETY: non-null and writable (the caller's guarantee).
            unsafe { put(flows, list.estimated_flows()) };
            ZlStatus::ZL_OK
        }
        None => fail(
            ZlStatus::ZL_ERR_NO_ZOMBIE_LIST,
            "this policy has no Zombie List (only SRED and ZL-RED do)",
        ),
    }
}

/// Stores which policy `aqm` runs in `*kind`.
///
/// Thread safety: any thread (the kind never changes).
///
/// # Safety
/// `aqm` is null or a live handle; `kind` null or writable.
#[no_mangle]
pub unsafe extern "C" fn zl_aqm_kind(aqm: *const ZlAqm, kind: *mut ZlAqmKind) -> ZlStatus {
    // SAFETY: null or a live handle (the caller's guarantee).
    let aqm = match unsafe { arg(aqm, "aqm") } {
        Ok(a) => a,
        Err(s) => return s,
    };
    if kind.is_null() {
        return fail(ZlStatus::ZL_ERR_NULL, "kind is null");
    }
    // SAFETY: non-null and writable (the caller's guarantee).
    unsafe { put(kind, aqm.policy.kind()) };
    ZlStatus::ZL_OK
}

/// A static, NUL-terminated name for a status code (`"ZL_OK"`, ...; `"unknown status"` for a
/// value that is none). Takes an `int` so that any value a C program holds is safe to pass.
///
/// Thread safety: pure; any thread.
#[no_mangle]
pub extern "C" fn zl_status_name(status: i32) -> *const c_char {
    let name: &'static CStr = match status {
        0 => c"ZL_OK",
        1 => c"ZL_ERR_NULL",
        2 => c"ZL_ERR_PARAM",
        3 => c"ZL_ERR_CONFIG",
        4 => c"ZL_ERR_NO_ZOMBIE_LIST",
        5 => c"ZL_ERR_REENTRANT",
        _ => c"unknown status",
    };
    name.as_ptr()
}

/// The crate's version, a static NUL-terminated string (`"0.2.0"`). The ABI of a 0.x version
/// may change with its minor number: a program linked at run time (`libzl_aqm_capi.so`)
/// checks that the version starts with the header's `ZL_AQM_CAPI_VERSION_MAJOR` and
/// `ZL_AQM_CAPI_VERSION_MINOR`.
///
/// Thread safety: pure; any thread.
#[no_mangle]
pub extern "C" fn zl_aqm_capi_version() -> *const c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}
