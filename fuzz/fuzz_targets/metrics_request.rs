//! Fuzzes the control endpoint's request parsing and authorization
//! (`zl_control::control::{parse_request, authorize}`): whatever a client sends as its
//! request head (the endpoint reads at most 4 KiB).
//!
//! Checked: no panic; `GET /metrics` is served only for a first line naming exactly that
//! path (a query string aside) as HTTP/1.x; `POST /reload` is authorized only with the token
//! in an `Authorization: Bearer` header and no `Origin` header; headers after the head's end
//! change nothing.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::path::Path;
use zl_control::control::{authorize, parse_request, route, ControlToken, Route, Verdict};

const TOKEN: &str = "0123456789abcdef0123456789abcdef";

fuzz_target!(|data: &[u8]| {
    let head = &data[..data.len().min(4096)];
    let req = parse_request(head);
    assert_eq!(route(head), req.route);
    let first = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let first = first.strip_suffix(b"\r").unwrap_or(first);
    if req.route == Route::Metrics {
        let path = first
            .strip_prefix(b"GET ")
            .and_then(|r| {
                r.strip_suffix(b" HTTP/1.0")
                    .or_else(|| r.strip_suffix(b" HTTP/1.1"))
            })
            .expect("a GET HTTP/1.x line");
        assert!(path == b"/metrics" || path.starts_with(b"/metrics?"));
    }
    let token = ControlToken::from_secret(TOKEN, Path::new("fuzz")).unwrap();
    for reads_open in [false, true] {
        let v = authorize(&req, Some(&token), reads_open);
        if req.route == Route::Reload && v == Verdict::Serve {
            assert!(first == b"POST /reload HTTP/1.0" || first == b"POST /reload HTTP/1.1");
            assert_eq!(req.bearer, Some(TOKEN.as_bytes()));
            assert!(!req.origin);
        }
        if req.route == Route::Reload {
            assert_ne!(authorize(&req, None, reads_open), Verdict::Serve);
        }
    }
    // What follows the head's blank line is a body, never a header.
    if let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
        let mut longer = head[..end + 4].to_vec();
        longer.extend_from_slice(b"Origin: x\r\nAuthorization: Bearer y\r\n\r\n");
        let again = parse_request(&longer);
        assert_eq!(
            (again.route, again.bearer, again.origin),
            (req.route, req.bearer, req.origin)
        );
    }
});
