//! The load time of a config with a million static routes (a measurement, printed, never
//! asserted; figures in docs/performance/lpm.md): TOML parsing, then building the routing
//! table from the parsed routes.
//!
//! ```text
//! cargo run --release -p zl-dataplane --example route_load [ROUTES]
//! ```
//!
//! The routes are `zl_testkit::config::route_table_toml`'s (/24s from 1.0.0.0/24 on, every
//! 16th a /28); `ROUTES` defaults to 1 000 000.

use std::time::Instant;

use zl_dataplane::config::Forwarding;
use zl_dataplane::RouterConfig;

fn main() {
    let routes: u32 = match std::env::args().nth(1) {
        None => 1_000_000,
        Some(a) => a.parse().unwrap_or_else(|e| {
            eprintln!("route_load: ROUTES must be a number of routes ({a:?}: {e})");
            std::process::exit(2);
        }),
    };
    let text = zl_testkit::config::route_table_toml(routes);
    let t = Instant::now();
    let cfg = RouterConfig::from_toml(&text).expect("the generated config parses");
    let parsed = t.elapsed();
    let Forwarding::Router(table) = cfg.forwarding().expect("the generated routes build") else {
        panic!("router mode");
    };
    let built = t.elapsed() - parsed;
    assert_eq!(table.len(), routes as usize, "every route is in the table");
    println!(
        "{routes} routes ({} MiB of TOML): parsed in {:.2} s, table built in {:.2} s",
        text.len() >> 20,
        parsed.as_secs_f64(),
        built.as_secs_f64()
    );
}
