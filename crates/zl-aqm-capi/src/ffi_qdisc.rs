//! The exported functions of the queue disciplines, the policies that hold their packets
//! (CoDel, FQ-CoDel, DualPI2, ZL-RED with flow isolation). The C caller's packets are opaque
//! `uint64_t` handles: `zl_qdisc_enqueue` takes one, `zl_qdisc_dequeue` hands one out, and
//! every handle taken comes back exactly once, by `zl_qdisc_dequeue` or by the discard
//! callback given at creation (a packet the discipline drops after taking it, or one still
//! queued at `zl_qdisc_free`).
//!
//! Decided: a callback, not an array the call fills. One dequeue may discard any number of
//! packets (CoDel's control law drops until a packet may go; FQ-CoDel's overflow drops up to
//! `drop_batch` at once), so an array would need a bound the call cannot keep or a second
//! call to fetch the rest; a callback with the caller's context pointer reports each one as
//! it happens and costs nothing when nothing is discarded.
//!
//! Reentrancy: the callback runs while the qdisc is in the middle of a call. Each call sets
//! the handle's `busy` flag for its length and refuses to start while it is set, so a
//! callback that calls back into its own qdisc gets an error instead of aliasing the state
//! being changed. The flag and the discipline are separate fields reached through the raw
//! handle pointer, never through a reference to the whole handle, so the flag can be read
//! while the discipline is borrowed.

use std::ffi::{c_char, c_void};
use std::ptr::{addr_of, addr_of_mut};
use std::sync::Arc;

use crate::error;
use crate::ffi::{
    arg, arrival_error, arrival_in_range, check_queue, fail, now_message, put, toml_params,
    with_out, ZlZombieList,
};
use crate::qdisc::Qdisc;
use crate::rng::SplitMix64;
use crate::types::*;

/// A queue discipline holding the caller's packet handles (opaque to C).
#[derive(Debug)]
pub struct ZlQdisc {
    /// True while a call on this qdisc runs (see the module doc).
    busy: bool,
    on_discard: unsafe extern "C" fn(*mut c_void, u64, ZlDiscardCause),
    ctx: *mut c_void,
    qdisc: Qdisc,
}

/// The caller's discard callback and its context.
#[derive(Clone, Copy)]
struct Sink {
    f: unsafe extern "C" fn(*mut c_void, u64, ZlDiscardCause),
    ctx: *mut c_void,
}

impl Sink {
    fn give(self, handle: u64, cause: ZlDiscardCause) {
        // SAFETY: `f` is the function pointer given at creation, which the caller guarantees
        // callable with this signature for the qdisc's life, and `ctx` is passed as given.
        unsafe { (self.f)(self.ctx, handle, cause) }
    }
}

/// One call's hold on a qdisc: its discipline, its sink, and the `busy` flag it clears when
/// dropped.
struct Call<'a> {
    qdisc: &'a mut Qdisc,
    sink: Sink,
    busy: *mut bool,
}

impl Drop for Call<'_> {
    fn drop(&mut self) {
        // SAFETY: `busy` points into the live handle this call entered (see `enter`).
        unsafe { self.busy.write(false) }
    }
}

/// The message of a call made from the qdisc's own discard callback.
const REENTRANT: &str = "called from inside its own discard callback (nothing was done)";

/// Enters `q` for one call that may run the discard callback: `Err` with a message when `q`
/// is null or already in a call.
///
/// # Safety
/// `q` is null or a live handle from `zl_qdisc_new_from_toml`; the `Call` does not outlive it.
unsafe fn enter<'a>(q: *mut ZlQdisc, func: &str) -> Result<Call<'a>, ZlStatus> {
    if q.is_null() {
        return Err(fail(
            ZlStatus::ZL_ERR_NULL,
            format!("{func}: qdisc is null"),
        ));
    }
    // SAFETY: `q` is a live handle (the caller's guarantee); each field is reached through
    // the raw pointer, never through a reference to the whole handle (see the module doc).
    unsafe {
        if (*q).busy {
            return Err(fail(
                ZlStatus::ZL_ERR_REENTRANT,
                format!("{func}: {REENTRANT}"),
            ));
        }
        (*q).busy = true;
        Ok(Call {
            sink: Sink {
                f: (*q).on_discard,
                ctx: (*q).ctx,
            },
            busy: addr_of_mut!((*q).busy),
            qdisc: &mut *addr_of_mut!((*q).qdisc),
        })
    }
}

/// The discipline of `q` for a call that only reads it.
///
/// # Safety
/// `q` is null or a live handle.
unsafe fn look<'a>(q: *const ZlQdisc, func: &str) -> Result<&'a Qdisc, ZlStatus> {
    if q.is_null() {
        return Err(fail(
            ZlStatus::ZL_ERR_NULL,
            format!("{func}: qdisc is null"),
        ));
    }
    // SAFETY: a live handle (the caller's guarantee), its fields reached through the raw
    // pointer; while `busy` is clear no call holds the discipline mutably.
    unsafe {
        if (*q).busy {
            return Err(fail(
                ZlStatus::ZL_ERR_REENTRANT,
                format!("{func}: {REENTRANT}"),
            ));
        }
        Ok(&*addr_of!((*q).qdisc))
    }
}

/// Creates a queue discipline from a TOML table in the router's config syntax: `kind =
/// "codel"`, `"fq-codel"`, `"dualpi2"`, or `"zl-red"` with an `isolation` table, and that
/// kind's keys (docs/configs.md), for a queue of `queue->capacity_packets` packets (finite, at
/// most `ZL_QDISC_MAX_PACKETS`: the packet slots are reserved now) and
/// `queue->capacity_bytes`; `queue->link_rate_bps` is the isolation's service rate until it
/// measures one. The isolation observes `shared` when it is not null, else a Zombie List of
/// its own. Stores the handle in `*out`.
///
/// `on_discard(ctx, handle, cause)` is called for every packet the qdisc hands back unsent
/// (see `ZlDiscardFn`); it is required, since each such handle is the caller's to free.
///
/// Errors: `ZL_ERR_NULL` (also a null `on_discard`), `ZL_ERR_CONFIG` (not UTF-8, not TOML,
/// unknown kind or key, a kind that decides on the caller's FIFO: `zl_aqm_new_from_toml`),
/// `ZL_ERR_PARAM` (a parameter or the queue out of range); `*out` is then null.
///
/// Thread safety: any thread; the new qdisc belongs to one thread at a time (its Zombie List
/// may be shared).
///
/// # Safety
/// `toml` is null or a NUL-terminated string; `queue` null or readable; `shared` null or a
/// live list handle; `out` null or writable; `on_discard` null or a function of this
/// signature that stays callable, with `ctx`, until the qdisc is freed.
#[no_mangle]
pub unsafe extern "C" fn zl_qdisc_new_from_toml(
    toml: *const c_char,
    queue: *const ZlQueueParams,
    shared: *const ZlZombieList,
    on_discard: ZlDiscardFn,
    ctx: *mut c_void,
    out: *mut *mut ZlQdisc,
) -> ZlStatus {
    // SAFETY: each pointer null or valid (the caller's guarantee); `out` checked by `with_out`.
    unsafe {
        with_out(out, || {
            let params = toml_params(toml)?;
            let q = arg(queue, "queue")?;
            let Some(on_discard) = on_discard else {
                return Err(fail(ZlStatus::ZL_ERR_NULL, "on_discard is null"));
            };
            check_queue(q)?;
            if q.capacity_packets > ZL_QDISC_MAX_PACKETS {
                return Err(fail(
                    ZlStatus::ZL_ERR_PARAM,
                    format!(
                        "queue.capacity_packets = {}: expected 1..={ZL_QDISC_MAX_PACKETS} \
                         (a discipline reserves a slot per packet)",
                        q.capacity_packets
                    ),
                ));
            }
            let shared = shared.as_ref().map(|s| Arc::clone(&s.list));
            let qdisc = match Qdisc::build(&params, q, shared) {
                Ok(Some(qdisc)) => qdisc,
                Ok(None) => {
                    return Err(fail(
                        ZlStatus::ZL_ERR_CONFIG,
                        format!(
                            "kind = \"{}\" decides on the caller's FIFO: create it with \
                             zl_aqm_new_from_toml{}",
                            params.kind(),
                            if params.kind() == "zl-red" {
                                " (or add an isolation table)"
                            } else {
                                ""
                            }
                        ),
                    ))
                }
                Err(e) => return Err(fail(ZlStatus::ZL_ERR_PARAM, e.to_string())),
            };
            let handle = Box::into_raw(Box::new(ZlQdisc {
                busy: false,
                on_discard,
                ctx,
                qdisc,
            }));
            put(out, handle);
            Ok(ZlStatus::ZL_OK)
        })
    }
}

/// Offers one arriving packet, `handle`, to the qdisc at `arrival->now_ns`. The qdisc reads
/// `flow_hash`, `packet_len`, `ecn`, `has_cc_ext`, `src_host` / `dst_host`, and ignores the
/// arrival's queue fields (it knows its own queue). Advances `*rng_state` by the draws it
/// makes.
///
/// Returns the verdict:
/// - `ZL_VERDICT_ENQUEUE`: the qdisc holds `handle` now;
/// - `ZL_VERDICT_MARK`: it holds `handle`, and the packet is to carry a congestion mark: set
///   CE on it (the isolation's ZL-RED decides on arrival; CoDel on its normal queue and the
///   other disciplines mark at dequeue, through `ZlDeparture::mark`);
/// - a drop (`>= ZL_VERDICT_EARLY_DROP`): the qdisc did not take `handle`; it is the
///   caller's, to drop and free;
/// - `ZL_VERDICT_INVALID_ARGUMENT`: a null pointer, an out-of-range field, or a call from the
///   discard callback; nothing changed, `handle` was not taken (see `zl_last_error`).
///
/// Packets the qdisc pushes out to make room go to the discard callback during the call
/// (`ZL_DISCARD_OVERFLOW`), `handle` itself among them when its own queue is the fattest:
/// the verdict said it was taken, the callback then hands it back. Allocates nothing.
///
/// Thread safety: not for two threads on one qdisc at once; it may move between threads.
///
/// # Safety
/// `qdisc` is null or a live handle; `arrival` null or readable; `rng_state` null or a
/// writable `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn zl_qdisc_enqueue(
    qdisc: *mut ZlQdisc,
    arrival: *const ZlArrival,
    handle: u64,
    rng_state: *mut u64,
) -> ZlVerdict {
    // The qdisc first: a call from the discard callback is refused before it makes a
    // reference to `*rng_state`, which the interrupted call may hold.
    // SAFETY: null or a live handle (the caller's guarantee).
    let call = match unsafe { enter(qdisc, "zl_qdisc_enqueue") } {
        Ok(c) => c,
        Err(_) => return ZlVerdict::ZL_VERDICT_INVALID_ARGUMENT,
    };
    // SAFETY: each pointer null or valid (the caller's guarantee); `as_*` turns null into None.
    let (a, rng) = match unsafe { (arrival.as_ref(), rng_state.as_mut()) } {
        (Some(a), Some(rng)) => (a, rng),
        _ => {
            error::set("zl_qdisc_enqueue: arrival or rng_state is null");
            return ZlVerdict::ZL_VERDICT_INVALID_ARGUMENT;
        }
    };
    if !arrival_in_range(a) {
        arrival_error(a);
        return ZlVerdict::ZL_VERDICT_INVALID_ARGUMENT;
    }
    let sink = call.sink;
    call.qdisc
        .enqueue(a, handle, &mut SplitMix64(rng), &mut |h, c| sink.give(h, c))
}

/// Asks for the packet to send at `now_ns` (`<= ZL_MAX_NOW_NS`), when the link can take one.
/// Advances `*rng_state` by the draws it makes. Writes `*out` in full and returns:
/// - `ZL_DEQUEUE_PACKET`: send `out->handle` now (set CE on it first when `out->mark` is 1);
///   it is the caller's again;
/// - `ZL_DEQUEUE_HOLD`: packets are queued but none may leave before `out->hold_until_ns`;
/// - `ZL_DEQUEUE_EMPTY`: nothing is queued;
/// - `ZL_DEQUEUE_INVALID_ARGUMENT`: a null pointer, `now_ns` out of range, or a call from the
///   discard callback; nothing changed and `*out` is untouched (see `zl_last_error`).
///
/// The decision is made now, when the caller asks for the packet: a caller that cannot send
/// it at once keeps it and sends it later without asking again. Packets the AQM drops on the
/// way go to the discard callback during the call (`ZL_DISCARD_DEQUEUE`). Allocates nothing.
///
/// Thread safety: as `zl_qdisc_enqueue`.
///
/// # Safety
/// `qdisc` is null or a live handle; `rng_state` null or a writable `uint64_t`; `out` null or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn zl_qdisc_dequeue(
    qdisc: *mut ZlQdisc,
    now_ns: u64,
    rng_state: *mut u64,
    out: *mut ZlDeparture,
) -> ZlDequeueStatus {
    // The qdisc first, as in `zl_qdisc_enqueue`.
    // SAFETY: null or a live handle (the caller's guarantee).
    let call = match unsafe { enter(qdisc, "zl_qdisc_dequeue") } {
        Ok(c) => c,
        Err(_) => return ZlDequeueStatus::ZL_DEQUEUE_INVALID_ARGUMENT,
    };
    // SAFETY: null or a writable `uint64_t` (the caller's guarantee).
    let Some(rng) = (unsafe { rng_state.as_mut() }) else {
        error::set("zl_qdisc_dequeue: rng_state is null");
        return ZlDequeueStatus::ZL_DEQUEUE_INVALID_ARGUMENT;
    };
    if out.is_null() {
        error::set("zl_qdisc_dequeue: out is null");
        return ZlDequeueStatus::ZL_DEQUEUE_INVALID_ARGUMENT;
    }
    if now_ns > ZL_MAX_NOW_NS {
        error::set(now_message("zl_qdisc_dequeue: now_ns", now_ns));
        return ZlDequeueStatus::ZL_DEQUEUE_INVALID_ARGUMENT;
    }
    let sink = call.sink;
    let (status, departure) = call
        .qdisc
        .dequeue(now_ns, &mut SplitMix64(rng), &mut |h, c| sink.give(h, c));
    // SAFETY: non-null and writable (the caller's guarantee).
    unsafe { put(out, departure) };
    status
}

/// Stores the packets and bytes the qdisc holds in `*packets` and `*bytes`.
///
/// Errors: `ZL_ERR_NULL`, `ZL_ERR_REENTRANT` (called from the discard callback).
///
/// Thread safety: the thread that owns the qdisc.
///
/// # Safety
/// `qdisc` is null or a live handle; `packets` and `bytes` null or writable.
#[no_mangle]
pub unsafe extern "C" fn zl_qdisc_len(
    qdisc: *const ZlQdisc,
    packets: *mut u32,
    bytes: *mut u64,
) -> ZlStatus {
    if packets.is_null() || bytes.is_null() {
        return fail(
            ZlStatus::ZL_ERR_NULL,
            "zl_qdisc_len: packets or bytes is null",
        );
    }
    // SAFETY: null or a live handle (the caller's guarantee).
    let q = match unsafe { look(qdisc, "zl_qdisc_len") } {
        Ok(q) => q,
        Err(s) => return s,
    };
    let (p, b) = q.len();
    // SAFETY: both non-null and writable (the caller's guarantee).
    unsafe {
        put(packets, p);
        put(bytes, b);
    }
    ZlStatus::ZL_OK
}

/// Copies the qdisc's counters into `*out`: the common ones, and its kind's own member.
///
/// Errors: `ZL_ERR_NULL`, `ZL_ERR_REENTRANT` (called from the discard callback).
///
/// Thread safety: the thread that owns the qdisc.
///
/// # Safety
/// `qdisc` is null or a live handle; `out` null or writable.
#[no_mangle]
pub unsafe extern "C" fn zl_qdisc_stats(qdisc: *const ZlQdisc, out: *mut ZlQdiscStats) -> ZlStatus {
    if out.is_null() {
        return fail(ZlStatus::ZL_ERR_NULL, "zl_qdisc_stats: out is null");
    }
    // SAFETY: null or a live handle (the caller's guarantee).
    let q = match unsafe { look(qdisc, "zl_qdisc_stats") } {
        Ok(q) => q,
        Err(s) => return s,
    };
    // SAFETY: non-null and writable (the caller's guarantee).
    unsafe { put(out, q.stats()) };
    ZlStatus::ZL_OK
}

/// Stores which discipline `qdisc` runs in `*kind`.
///
/// Errors: `ZL_ERR_NULL`, `ZL_ERR_REENTRANT`.
///
/// Thread safety: the thread that owns the qdisc.
///
/// # Safety
/// `qdisc` is null or a live handle; `kind` null or writable.
#[no_mangle]
pub unsafe extern "C" fn zl_qdisc_kind(qdisc: *const ZlQdisc, kind: *mut ZlQdiscKind) -> ZlStatus {
    if kind.is_null() {
        return fail(ZlStatus::ZL_ERR_NULL, "zl_qdisc_kind: kind is null");
    }
    // SAFETY: null or a live handle (the caller's guarantee).
    let q = match unsafe { look(qdisc, "zl_qdisc_kind") } {
        Ok(q) => q,
        Err(s) => return s,
    };
    // SAFETY: non-null and writable (the caller's guarantee).
    unsafe { put(kind, q.kind()) };
    ZlStatus::ZL_OK
}

/// Frees a qdisc: first hands every packet it still holds back through the discard callback
/// (`ZL_DISCARD_FREE`, in the order it would have sent them as far as it can say), then
/// releases it (its Zombie List lives on while a list handle or a policy refers to it). Null
/// is ignored (`ZL_OK`).
///
/// Errors: `ZL_ERR_REENTRANT` when called from its own discard callback (nothing freed).
///
/// Thread safety: the thread that owns the qdisc, once, after its last call.
///
/// # Safety
/// `qdisc` is null or a handle from `zl_qdisc_new_from_toml` not yet freed.
#[no_mangle]
pub unsafe extern "C" fn zl_qdisc_free(qdisc: *mut ZlQdisc) -> ZlStatus {
    if qdisc.is_null() {
        return ZlStatus::ZL_OK;
    }
    {
        // SAFETY: a live handle (the caller's guarantee).
        let call = match unsafe { enter(qdisc, "zl_qdisc_free") } {
            Ok(c) => c,
            Err(s) => return s,
        };
        let sink = call.sink;
        call.qdisc
            .drain(|h| sink.give(h, ZlDiscardCause::ZL_DISCARD_FREE));
    }
    // SAFETY: a handle from `zl_qdisc_new_from_toml` (a `Box::into_raw`), freed once; the
    // call above has ended, so nothing refers into it.
    drop(unsafe { Box::from_raw(qdisc) });
    ZlStatus::ZL_OK
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ffi::zl_arrival_default;

    /// What the reentrant callback below sees: the qdisc, the caller's random state (the same
    /// one the interrupted call was given), and the results of its calls back.
    struct Reenter {
        q: *mut ZlQdisc,
        rng: *mut u64,
        handles: Vec<u64>,
        refused: u32,
    }

    unsafe extern "C" fn reenter(ctx: *mut c_void, handle: u64, _cause: ZlDiscardCause) {
        // SAFETY: `ctx` is the test's `Reenter`, alive while the qdisc is; nothing else
        // refers to it during a call.
        let r = unsafe { &mut *ctx.cast::<Reenter>() };
        r.handles.push(handle);
        let a = zl_arrival_default();
        let mut d = std::mem::MaybeUninit::uninit();
        let (mut p, mut b) = (0, 0);
        let mut s = std::mem::MaybeUninit::uninit();
        // SAFETY: the pointers are the live qdisc, the caller's state, and locals; every call
        // is refused before it makes a reference to any of them but the locals.
        let refused = unsafe {
            zl_qdisc_enqueue(r.q, &a, 99, r.rng) == ZlVerdict::ZL_VERDICT_INVALID_ARGUMENT
                && zl_qdisc_dequeue(r.q, 0, r.rng, d.as_mut_ptr())
                    == ZlDequeueStatus::ZL_DEQUEUE_INVALID_ARGUMENT
                && zl_qdisc_len(r.q, &mut p, &mut b) == ZlStatus::ZL_ERR_REENTRANT
                && zl_qdisc_stats(r.q, s.as_mut_ptr()) == ZlStatus::ZL_ERR_REENTRANT
                && zl_qdisc_free(r.q) == ZlStatus::ZL_ERR_REENTRANT
        };
        r.refused += u32::from(refused);
    }

    /// A callback calling back into its own qdisc, with the interrupted call's own random
    /// state, is refused every time and leaves the qdisc working (also run under miri: no
    /// reference is made to what the interrupted call holds).
    #[test]
    fn calls_from_the_discard_callback_are_refused() {
        let queue = ZlQueueParams {
            capacity_packets: 2,
            capacity_bytes: ZL_UNBOUNDED_BYTES,
            link_rate_bps: 1_000_000,
        };
        let mut rng = 1u64;
        let mut r = Reenter {
            q: std::ptr::null_mut(),
            rng: &mut rng,
            handles: Vec::new(),
            refused: 0,
        };
        let ctx: *mut Reenter = &mut r;
        let mut q = std::ptr::null_mut();
        // SAFETY: live locals and the handle just created; `r` and `rng` are reached only
        // through `ctx` and `r.rng` while the qdisc lives.
        unsafe {
            let toml = c"kind = \"fq-codel\"\nflows = 4";
            let status = zl_qdisc_new_from_toml(
                toml.as_ptr(),
                &queue,
                std::ptr::null(),
                Some(reenter),
                ctx.cast(),
                &mut q,
            );
            assert_eq!(status, ZlStatus::ZL_OK);
            (*ctx).q = q;
            let mut a = zl_arrival_default();
            a.packet_len = 100;
            for h in 1..=3 {
                let v = zl_qdisc_enqueue(q, &a, h, (*ctx).rng);
                assert_eq!(v, ZlVerdict::ZL_VERDICT_ENQUEUE);
            }
            // The third arrival overflowed the two-packet queue: FQ-CoDel dropped from the
            // head until half the bytes were gone, two of the three.
            assert_eq!(
                ((*ctx).handles.as_slice(), (*ctx).refused),
                (&[1, 2][..], 2)
            );
            let mut d = std::mem::MaybeUninit::uninit();
            let st = zl_qdisc_dequeue(q, 10, (*ctx).rng, d.as_mut_ptr());
            assert_eq!(st, ZlDequeueStatus::ZL_DEQUEUE_PACKET);
            assert_eq!(d.assume_init().handle, 3);
            for h in 4..=5 {
                let v = zl_qdisc_enqueue(q, &a, h, (*ctx).rng);
                assert_eq!(v, ZlVerdict::ZL_VERDICT_ENQUEUE);
            }
            assert_eq!(zl_qdisc_free(q), ZlStatus::ZL_OK);
            assert_eq!(
                ((*ctx).handles.as_slice(), (*ctx).refused),
                (&[1, 2, 4, 5][..], 4)
            );
        }
    }
}
