//! zl-lpm against DPDK's `rte_lpm` / `rte_lpm6` on the same prefixes and addresses, in the
//! same process: lookup cost (the minimum over rounds of ns per lookup, the two alternating
//! so that both see the same machine load), table build time and memory. The next-hop sums
//! of the two must be equal: a cross-check of every lookup against DPDK.
//!
//! Tables: `zl_lpm::synth` (the prefix-length distribution of the public BGP tables; its doc
//! says which). Addresses: 2^20, each inside a random table prefix, one in 8 random (mostly
//! misses for IPv6, and any route for IPv4). IPv4 is timed one address at a time
//! (`Lpm4::lookup_u32` against `rte_lpm_lookup`) and in bulks of `Lpm4::BULK`
//! (`Lpm4::lookup_bulk_u32` against `rte_lpm_lookup_bulk`, and `rte_lpm_lookupx4`), all in the
//! same rounds. IPv6 is timed both one address at a time
//! (`Lpm6::lookup` against `rte_lpm6_lookup`, and zl-lpm's plain reference walk) and in bulks
//! of `Lpm6::BULK` (`Lpm6::lookup_bulk` against `rte_lpm6_lookup_bulk_func`), all in the same
//! rounds.
//!
//! Run: `cargo run --release -p zl-dpdk --features dpdk --example lpm_compare`. Results:
//! docs/performance/lpm.md.

use std::error::Error;
use std::ffi::CString;
use std::hint::black_box;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::time::Instant;

use zl_dpdk::{Eal, EalConfig};
use zl_dpdk_sys as sys;
use zl_lpm::synth::{self, Rng};
use zl_lpm::{Lpm4, Lpm6};

const ADDRS: usize = 1 << 20;
const ROUNDS: usize = 7;

fn ns_per(n: usize, f: impl FnOnce() -> u64) -> (f64, u64) {
    let t = Instant::now();
    let sum = black_box(f());
    (t.elapsed().as_nanos() as f64 / n as f64, sum)
}

fn value(i: usize) -> u32 {
    (i % 1000) as u32 + 1
}

fn v4(n: usize, seed: u64) -> Result<(), Box<dyn Error>> {
    let table = synth::v4_table(n, seed);
    let t = Instant::now();
    let zl = Lpm4::default();
    for (i, &(a, len)) in table.iter().enumerate() {
        zl.insert(Ipv4Addr::from(a), len, value(i))?;
    }
    let zl_build = t.elapsed();

    let name = CString::new(format!("bench4_{n}"))?;
    let cfg = sys::rte_lpm_config {
        max_rules: n as u32 + 16,
        number_tbl8s: 1 << 16,
        flags: 0,
    };
    let t = Instant::now();
    // SAFETY: EAL is initialised; `name` and `cfg` outlive the call.
    let rte = unsafe { sys::rte_lpm_create(name.as_ptr(), -1, &cfg) };
    if rte.is_null() {
        return Err("rte_lpm_create failed".into());
    }
    for (i, &(a, len)) in table.iter().enumerate() {
        // SAFETY: `rte` is a live table from rte_lpm_create.
        let rc = unsafe { sys::rte_lpm_add(rte, a, len, value(i)) };
        if rc != 0 {
            return Err(format!("rte_lpm_add {a:#x}/{len}: {rc}").into());
        }
    }
    let rte_build = t.elapsed();

    let mut rng = Rng::new(seed ^ 0xabc);
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
    // Scalar: one address at a time, both sides; bulk: `Lpm4::BULK` addresses per call,
    // zl-lpm's `lookup_bulk_u32` against `rte_lpm_lookup_bulk`, and DPDK's `rte_lpm_lookupx4`
    // (four at a time, SSE), all in the same rounds.
    let mut found = vec![None; Lpm4::BULK];
    let mut best = [f64::MAX; 5];
    for _ in 0..ROUNDS {
        let (z, zsum) = ns_per(ADDRS, || {
            (addrs.iter())
                .map(|&a| u64::from(zl.lookup_u32(a).unwrap_or(0)))
                .sum()
        });
        // SAFETY: `rte` is live; `addrs` holds ADDRS addresses.
        let (r, rsum) = ns_per(ADDRS, || unsafe {
            sys::zl_lpm_lookup_sum(rte, addrs.as_ptr(), ADDRS as u32)
        });
        let (zb, zbsum) = ns_per(ADDRS, || {
            let mut sum = 0;
            for chunk in addrs.chunks(Lpm4::BULK) {
                zl.lookup_bulk_u32(chunk, &mut found);
                sum += found[..chunk.len()]
                    .iter()
                    .map(|v| u64::from(v.unwrap_or(0)))
                    .sum::<u64>();
            }
            sum
        });
        // SAFETY: as above.
        let (rb, rbsum) = ns_per(ADDRS, || unsafe {
            sys::zl_lpm_lookup_bulk_sum(rte, addrs.as_ptr(), ADDRS as u32, Lpm4::BULK as u32)
        });
        // SAFETY: as above.
        let (rx, rxsum) = ns_per(ADDRS, || unsafe {
            sys::zl_lpm_lookupx4_sum(rte, addrs.as_ptr(), ADDRS as u32)
        });
        assert_eq!(zsum, rsum, "zl-lpm and rte_lpm disagree");
        assert_eq!(
            (zbsum, rbsum, rxsum),
            (zsum, zsum, zsum),
            "the walks disagree"
        );
        for (b, t) in best.iter_mut().zip([z, r, zb, rb, rx]) {
            *b = b.min(t);
        }
    }
    let [best_zl, best_rte, best_zl_bulk, best_rte_bulk, best_rte_x4] = best;
    println!(
        "IPv4 {n:>9} routes | bulk of {} ns: zl-lpm {best_zl_bulk:6.2}  rte_lpm {best_rte_bulk:6.2}  ratio {:.2} | rte_lpm_lookupx4 {best_rte_x4:6.2} ns, zl-lpm bulk / x4 {:.2}",
        Lpm4::BULK,
        best_zl_bulk / best_rte_bulk,
        best_zl_bulk / best_rte_x4
    );
    let s = zl.stats();
    println!(
        "IPv4 {n:>9} routes | scalar ns: zl-lpm {best_zl:6.2}  rte_lpm {best_rte:6.2}  ratio {:.2} | build ms: zl-lpm {:7.1}  rte_lpm {:7.1} | zl-lpm memory {} MiB root + {} MiB groups ({} in use); rte_lpm as configured {} MiB",
        best_zl / best_rte,
        zl_build.as_secs_f64() * 1e3,
        rte_build.as_secs_f64() * 1e3,
        s.root_bytes >> 20,
        s.group_bytes_touched as f64 / (1 << 20) as f64,
        s.groups_in_use,
        ((4usize << 24) + (cfg.number_tbl8s as usize * 1024)) >> 20
    );
    // SAFETY: `rte` is live and not used after.
    unsafe { sys::rte_lpm_free(rte) };
    Ok(())
}

fn v6(n: usize, seed: u64) -> Result<(), Box<dyn Error>> {
    let table = synth::v6_table(n, seed);
    let t = Instant::now();
    let zl = Lpm6::default();
    for (i, &(a, len)) in table.iter().enumerate() {
        zl.insert(Ipv6Addr::from(a), len, value(i))?;
    }
    let zl_build = t.elapsed();

    let name = CString::new(format!("bench6_{n}"))?;
    let cfg = sys::rte_lpm6_config {
        max_rules: n as u32 + 16,
        number_tbl8s: 1 << 19,
        flags: 0,
    };
    let t = Instant::now();
    // SAFETY: EAL is initialised; `name` and `cfg` outlive the call.
    let rte = unsafe { sys::rte_lpm6_create(name.as_ptr(), -1, &cfg) };
    if rte.is_null() {
        return Err("rte_lpm6_create failed".into());
    }
    for (i, &(a, len)) in table.iter().enumerate() {
        let bytes = a.to_be_bytes();
        // SAFETY: `rte` is live; `bytes` is 16 bytes.
        let rc = unsafe { sys::rte_lpm6_add(rte, bytes.as_ptr(), len, value(i)) };
        if rc != 0 {
            return Err(format!("rte_lpm6_add {}/{len}: {rc}", Ipv6Addr::from(a)).into());
        }
    }
    let rte_build = t.elapsed();

    let mut rng = Rng::new(seed ^ 0xdef);
    let addrs: Vec<u128> = (0..ADDRS)
        .map(|i| {
            if i % 8 == 7 {
                (u128::from(rng.next_u64()) << 64) | u128::from(rng.next_u64())
            } else {
                let p = table[(rng.next_u64() % table.len() as u64) as usize];
                synth::v6_inside(p, &mut rng)
            }
        })
        .collect();
    let bytes: Vec<u8> = addrs.iter().flat_map(|a| a.to_be_bytes()).collect();
    let ips: Vec<Ipv6Addr> = addrs.iter().map(|&a| Ipv6Addr::from(a)).collect();
    let mut found = vec![None; Lpm6::BULK];
    // Scalar: one address at a time, both sides (zl-lpm's tuned walk, and its plain reference
    // walk); bulk: `Lpm6::BULK` addresses per call, zl-lpm's `lookup_bulk` against
    // `rte_lpm6_lookup_bulk_func`.
    let mut best = [f64::MAX; 5];
    for _ in 0..ROUNDS {
        let (plain, psum) = ns_per(ADDRS, || {
            (ips.iter())
                .map(|&a| u64::from(zl.lookup_plain(a).unwrap_or(0)))
                .sum()
        });
        let (z, zsum) = ns_per(ADDRS, || {
            (ips.iter())
                .map(|&a| u64::from(zl.lookup(a).unwrap_or(0)))
                .sum()
        });
        // SAFETY: `rte` is live; `bytes` holds ADDRS 16-byte addresses.
        let (r, rsum) = ns_per(ADDRS, || unsafe {
            sys::zl_lpm6_lookup_sum(rte, bytes.as_ptr(), ADDRS as u32)
        });
        let (zb, zbsum) = ns_per(ADDRS, || {
            let mut sum = 0;
            for chunk in ips.chunks(Lpm6::BULK) {
                zl.lookup_bulk(chunk, &mut found);
                sum += found[..chunk.len()]
                    .iter()
                    .map(|v| u64::from(v.unwrap_or(0)))
                    .sum::<u64>();
            }
            sum
        });
        // SAFETY: as above.
        let (rb, rbsum) = ns_per(ADDRS, || unsafe {
            sys::zl_lpm6_lookup_bulk_sum(rte, bytes.as_ptr(), ADDRS as u32, Lpm6::BULK as u32)
        });
        assert_eq!(zsum, rsum, "zl-lpm and rte_lpm6 disagree");
        assert_eq!(
            (psum, zbsum, rbsum),
            (zsum, zsum, zsum),
            "the walks disagree"
        );
        for (b, t) in best.iter_mut().zip([plain, z, r, zb, rb]) {
            *b = b.min(t);
        }
    }
    let [best_plain, best_zl, best_rte, best_zl_bulk, best_rte_bulk] = best;
    println!(
        "IPv6 {n:>9} routes | bulk of {} ns: zl-lpm {best_zl_bulk:6.2}  rte_lpm6 {best_rte_bulk:6.2}  ratio {:.2} | zl-lpm plain walk {best_plain:6.2} ns",
        Lpm6::BULK,
        best_zl_bulk / best_rte_bulk
    );
    let s = zl.stats();
    println!(
        "IPv6 {n:>9} routes | scalar ns: zl-lpm {best_zl:6.2}  rte_lpm6 {best_rte:6.2}  ratio {:.2} | build ms: zl-lpm {:7.1}  rte_lpm6 {:7.1} | zl-lpm memory {:.1} MiB root + {:.1} MiB groups ({} in use); rte_lpm6 as configured {} MiB",
        best_zl / best_rte,
        zl_build.as_secs_f64() * 1e3,
        rte_build.as_secs_f64() * 1e3,
        s.root_bytes as f64 / (1 << 20) as f64,
        s.group_bytes_touched as f64 / (1 << 20) as f64,
        s.groups_in_use,
        ((4usize << 24) + (cfg.number_tbl8s as usize * 1024)) >> 20
    );
    // SAFETY: `rte` is live and not used after.
    unsafe { sys::rte_lpm6_free(rte) };
    Ok(())
}

/// `lpm_compare [--huge] [--without-1m]`. `--huge`: DPDK's tables on hugetlbfs pages (2 MiB;
/// needs `vm.nr_hugepages` >= 1024 and a hugetlbfs mount), as DPDK runs in production, where
/// zl-lpm's tables get transparent huge pages (`madvise`); without it DPDK runs `--no-huge`
/// (4 KiB pages). `--without-1m`: leave out the 1 M IPv4 table, whose DPDK build is quadratic.
fn main() -> Result<(), Box<dyn Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let huge = args.iter().any(|a| a == "--huge");
    let mut cfg = EalConfig::no_huge(&format!("zl-lpm-{}", std::process::id()));
    if let Some(i) = cfg.args.iter().position(|a| a == "-m") {
        cfg.args[i + 1] = if huge { "1536" } else { "4096" }.into();
    }
    if huge {
        cfg.args.retain(|a| a != "--no-huge");
    }
    println!(
        "DPDK memory: {}",
        if huge {
            "hugetlbfs (2 MiB pages)"
        } else {
            "--no-huge (4 KiB pages)"
        }
    );
    let _eal = Eal::init(&cfg)?;
    // The 1 M IPv4 table last: `rte_lpm_add` searches the rules of the new rule's length
    // linearly, so DPDK's build of it is quadratic (tens of minutes on a loaded machine); the
    // 250 k table gives the comparison at a size DPDK builds in reasonable time.
    v4(1_000, 1)?;
    v6(200_000, 3)?;
    v4(250_000, 4)?;
    if !args.iter().any(|a| a == "--without-1m") {
        v4(1_000_000, 2)?;
    }
    Ok(())
}
