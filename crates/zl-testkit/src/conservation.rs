//! The conservation identity every run must keep, asserted one way by every test: each packet
//! received was forwarded, dropped by a named cause, is still queued, or (in the threaded
//! router, between a receive worker and a transmit worker) is in flight on a ring.
//!
//! ```
//! use zl_testkit::conservation::{assert_conserved, assert_conserved_in_flight};
//!
//! assert_conserved(10, 6, 3, 1, "totals");
//! assert_conserved_in_flight(10, 5, 3, 1, 1, "a scrape while running");
//! ```

use std::fmt::Display;

/// `received = forwarded + dropped + queued`, else a panic naming the four counts and
/// `context` (what was counted: the totals, the statistics text).
#[track_caller]
pub fn assert_conserved(
    received: u64,
    forwarded: u64,
    dropped: u64,
    queued: u64,
    context: impl Display,
) {
    assert_conserved_in_flight(received, forwarded, dropped, queued, 0, context);
}

/// `received = forwarded + dropped + queued + in_flight` (a threaded router's counts taken
/// while its workers run), else a panic naming the counts and `context`.
#[track_caller]
pub fn assert_conserved_in_flight(
    received: u64,
    forwarded: u64,
    dropped: u64,
    queued: u64,
    in_flight: u64,
    context: impl Display,
) {
    // In u128: counts near u64::MAX (a corrupted counter) fail the assertion, not overflow.
    let accounted = forwarded as u128 + dropped as u128 + queued as u128 + in_flight as u128;
    assert!(
        received as u128 == accounted,
        "received {received} != forwarded {forwarded} + dropped {dropped} + queued {queued} \
         + in flight {in_flight} (= {accounted}; {}): {context}",
        if (received as u128) > accounted {
            format!("{} packets unaccounted for", received as u128 - accounted)
        } else {
            format!("{} packets counted twice", accounted - received as u128)
        }
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[should_panic(expected = "1 packets unaccounted for")]
    fn a_lost_packet_fails() {
        assert_conserved(10, 6, 3, 0, "totals");
    }

    #[test]
    #[should_panic(expected = "1 packets counted twice")]
    fn a_packet_counted_twice_fails() {
        assert_conserved_in_flight(10, 6, 3, 1, 1, "totals");
    }

    #[test]
    fn huge_counts_do_not_overflow() {
        assert_conserved(u64::MAX, u64::MAX - 2, 1, 1, "");
    }
}
