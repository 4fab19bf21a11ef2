//! Test and benchmark support for the zlrouter workspace: not part of the product, never
//! published (`publish = false`).
//!
//! - [`netns`]: throw-away network namespaces and veth pairs, the environment skip that
//!   `ZLR_REQUIRE_ENV` turns into a failure, thread pinning;
//! - [`lab`]: the namespace lab of the root package's tests: senders, the `zlrouter` binary
//!   on AF_XDP ports in a router namespace, a receiver, TCP / UDP endpoints and the router's
//!   statistics;
//! - [`topology`]: the line topology `gen -- rtr -- sink` of the forwarding benchmarks and the
//!   end-to-end tests, its UDP frame and its router config;
//! - [`frames`]: Ethernet + IPv4 / IPv6 + UDP frames with valid checksums;
//! - [`veth`]: the configs of two routers facing each other over a veth pair;
//! - [`pcap`]: classic pcap files written and read, as Wireshark and the router's pcap ports
//!   do;
//! - [`config`]: a builder for the router configs the tests write, so each test names only
//!   what it is about instead of repeating a TOML fixture;
//! - [`conservation`]: the identity received = forwarded + dropped + queued (+ in flight),
//!   asserted with the counts in the message;
//! - [`scratch()`]: a fresh directory for a test's files;
//! - [`source`]: function bodies out of Rust source, for the tests that check rules in the
//!   code (no lock on the packet path).
//!
//! The backends (`zl-afxdp`, `zl-dpdk`) and the data plane dev-depend on this crate; nothing
//! in the product depends on it.
//!
//! # Layers
//!
//! `config`, `conservation`, `frames`, `netns`, `pcap`, `scratch` and `source` use no other
//! module; `lab`, `topology` and `veth` build on `netns` or `config` (and `frames`);
//! `scripts/module-cycles` checks that no import goes the other way.

pub mod config;
pub mod conservation;
pub mod frames;
pub mod lab;
pub mod netns;
pub mod pcap;
mod scratch;
pub mod source;
pub mod topology;
pub mod veth;

pub use scratch::scratch;
