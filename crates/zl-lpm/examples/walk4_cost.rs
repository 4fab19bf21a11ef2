//! The IPv4 walks one after the other on the 250 k synthetic table, each in its own function so
//! that callgrind can count each one's instructions and cache misses alone:
//!
//! ```text
//! cargo build --release -p zl-lpm --example walk4_cost
//! valgrind --tool=callgrind --cache-sim=yes --collect-atstart=no \
//!     --toggle-collect='walk4_cost::walk_*' \
//!     --LL=33554432,16,64 ./target/release/examples/walk4_cost
//! callgrind_annotate callgrind.out.<pid> | grep walk_
//! ```
//!
//! Instructions divided by the lookups the run prints are the instructions per lookup; the
//! figures are in docs/performance/lpm.md. With `--time` it times the walks instead (the
//! fastest of 9 alternating rounds, ns per lookup), with no DPDK needed. The addresses are
//! drawn as `lpm_compare` draws them.

use std::hint::black_box;
use std::net::Ipv4Addr;

use zl_lpm::synth::{self, Rng};
use zl_lpm::Lpm4;

const ADDRS: usize = 1 << 20;

/// One of the walks over every address, returning the sum of the next hops found.
type Walk = fn(&Lpm4, &[u32]) -> u64;

#[inline(never)]
fn walk_plain(t: &Lpm4, addrs: &[u32]) -> u64 {
    addrs
        .iter()
        .map(|&a| u64::from(t.lookup_plain(Ipv4Addr::from(a)).unwrap_or(0)))
        .sum()
}

#[inline(never)]
fn walk_scalar(t: &Lpm4, addrs: &[u32]) -> u64 {
    addrs
        .iter()
        .map(|&a| u64::from(t.lookup_u32(a).unwrap_or(0)))
        .sum()
}

#[inline(never)]
fn walk_bulk(t: &Lpm4, addrs: &[u32]) -> u64 {
    let mut out = [None; Lpm4::BULK];
    let mut sum = 0;
    for chunk in addrs.chunks(Lpm4::BULK) {
        t.lookup_bulk_u32(chunk, &mut out);
        sum += out[..chunk.len()]
            .iter()
            .map(|v| u64::from(v.unwrap_or(0)))
            .sum::<u64>();
    }
    sum
}

fn main() {
    let table = synth::v4_table(250_000, 4);
    let t = Lpm4::default();
    for (i, &(a, len)) in table.iter().enumerate() {
        t.insert(Ipv4Addr::from(a), len, (i % 1000) as u32 + 1)
            .expect("the synthetic table fits the default capacity");
    }
    let mut rng = Rng::new(4 ^ 0xabc);
    let addrs: Vec<u32> = (0..ADDRS)
        .map(|i| {
            if i % 8 == 7 {
                rng.next_u64() as u32
            } else {
                let p = table[(rng.next_u64() % table.len() as u64) as usize];
                synth::v4_inside(p, &mut rng)
            }
        })
        .collect();
    if std::env::args().any(|a| a == "--time") {
        let walks: [(&str, Walk); 3] = [
            ("plain", walk_plain),
            ("lookup", walk_scalar),
            ("lookup_bulk", walk_bulk),
        ];
        let mut best = [f64::MAX; 3];
        for _ in 0..9 {
            for (b, (_, w)) in best.iter_mut().zip(&walks) {
                let t0 = std::time::Instant::now();
                black_box(w(&t, black_box(&addrs)));
                *b = b.min(t0.elapsed().as_nanos() as f64 / ADDRS as f64);
            }
        }
        for (b, (name, _)) in best.iter().zip(&walks) {
            print!("{name} {b:.1} ns  ");
        }
        println!();
        return;
    }
    let sums = [
        walk_plain(&t, black_box(&addrs)),
        walk_scalar(&t, black_box(&addrs)),
        walk_bulk(&t, black_box(&addrs)),
    ];
    assert!(
        sums.iter().all(|&s| s == sums[0]),
        "the walks disagree: {sums:?}"
    );
    println!("{ADDRS} lookups per walk; next-hop sum {}", sums[0]);
}
