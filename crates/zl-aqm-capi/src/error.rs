//! The last error of each thread, as a message naming the argument or parameter and the rule
//! it broke (libgit2's `git_error_last` style): the status code says what kind of failure,
//! the message says where. Set only on failure, so the success path never allocates.

use std::cell::RefCell;
use std::ffi::c_char;

thread_local! {
    static LAST: RefCell<String> = const { RefCell::new(String::new()) };
}

/// Records `msg` as this thread's last error.
#[cold]
pub(crate) fn set(msg: impl Into<String>) {
    let msg = msg.into();
    LAST.with(|last| *last.borrow_mut() = msg);
}

/// Copies this thread's last error message into `buf` (at most `len` bytes, always
/// NUL-terminated when `len > 0`) and returns the message's full length in bytes, without the
/// NUL, as `snprintf` does: call with `len = 0` to size the buffer. The message is empty
/// before any failure. A call that succeeds leaves the message of the last failure.
///
/// Thread safety: per thread; each thread reads its own last error.
///
/// # Safety
/// `buf` is null (then nothing is written) or points to `len` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn zl_last_error(buf: *mut c_char, len: usize) -> usize {
    LAST.with(|last| {
        let msg = last.borrow();
        if !buf.is_null() && len > 0 {
            let n = msg.len().min(len - 1);
            // SAFETY: `buf` points to `len > n` writable bytes (the caller's guarantee), and
            // `msg` is our own string, so the regions do not overlap.
            unsafe {
                std::ptr::copy_nonoverlapping(msg.as_ptr().cast::<c_char>(), buf, n);
                *buf.add(n) = 0;
            }
        }
        msg.len()
    })
}
