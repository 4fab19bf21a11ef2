//! Threads that DPDK did not start, made lcores for as long as they run.
//!
//! A thread the EAL did not create (the threaded router's workers) has no lcore id, so every
//! mempool get and put it makes (an RX queue refilling its ring, a TX copy's mbuf, a freed
//! mbuf) bypasses the pool's per-lcore cache and goes to the pool's shared ring. The first
//! burst a port half receives or sends on such a thread registers it as a non-EAL lcore
//! (`rte_thread_register`), which gives it a cache of its own; the thread's exit releases the
//! lcore (`rte_thread_unregister`), so threads that come and go (one set per run) do not use
//! up `RTE_MAX_LCORE`. A thread that cannot be registered (all lcores taken) goes on without a
//! cache, as before.

use std::cell::Cell;

use zl_dpdk_sys as sys;

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    /// Not looked at yet.
    Unknown,
    /// Registered here: released when the thread ends.
    Registered,
    /// An EAL lcore already, or registration failed: nothing to release.
    Left,
}

struct Registration(Cell<State>);

impl Drop for Registration {
    fn drop(&mut self) {
        if self.0.get() == State::Registered {
            // SAFETY: this thread registered itself (`register`); releasing its lcore at the
            // thread's end is what `rte_thread_unregister` is for.
            unsafe { sys::rte_thread_unregister() };
        }
    }
}

thread_local! {
    static THREAD: Registration = const { Registration(Cell::new(State::Unknown)) };
}

/// Makes the calling thread an lcore if it is none yet (once per thread; afterwards one
/// thread-local read per call).
#[inline]
pub(crate) fn ensure() {
    // `try_with`: nothing to do while the thread's locals are being torn down.
    let _ = THREAD.try_with(|r| {
        if r.0.get() == State::Unknown {
            register(r);
        }
    });
}

#[cold]
fn register(r: &Registration) {
    if lcore_id().is_some() {
        r.0.set(State::Left);
        return;
    }
    // SAFETY: the EAL is initialised (a port half exists only after `Eal::init`), and this
    // registers the calling thread only. It returns 0 or -1 (all lcores taken: the thread
    // keeps LCORE_ID_ANY).
    let rc = unsafe { sys::rte_thread_register() };
    r.0.set(if rc == 0 {
        State::Registered
    } else {
        State::Left
    });
}

/// The calling thread's DPDK lcore id, `None` for a thread that is no lcore (`LCORE_ID_ANY`).
pub fn lcore_id() -> Option<u32> {
    // SAFETY: reads of the calling thread's per-lcore variable and of a constant.
    let (id, any) = unsafe { (sys::zl_rte_lcore_id(), sys::zl_lcore_id_any()) };
    (id != any).then_some(id)
}
