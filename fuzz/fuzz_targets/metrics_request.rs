//! Fuzzes the metrics endpoint's request parsing (`zl_dataplane::control::route`): whatever a
//! client sends as its request head (the endpoint reads at most 4 KiB).
//!
//! Checked: no panic; only a head whose first line starts `GET /metrics` is served, and the
//! decision depends on the first line alone.
#![no_main]

use libfuzzer_sys::fuzz_target;
use zl_dataplane::control::{route, Route};

fuzz_target!(|data: &[u8]| {
    let head = &data[..data.len().min(4096)];
    let r = route(head);
    let served = r == Route::Metrics;
    let first = std::str::from_utf8(head)
        .ok()
        .and_then(|s| s.lines().next())
        .unwrap_or("");
    assert_eq!(served, first.starts_with("GET /metrics"));
    if served {
        // Whatever follows the first line does not change the answer.
        let mut longer = head.to_vec();
        longer.extend_from_slice(b"\r\nX: y\r\n\r\n");
        assert_eq!(route(&longer), Route::Metrics);
    }
});
