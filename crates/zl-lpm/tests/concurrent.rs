//! Readers racing a writer: lookups while groups are split, filled, folded back and reused
//! under other prefixes. Every answer must be a value the address had before or after the
//! change in flight: never `None`, never the value of another prefix (which a reader that
//! followed a pointer into a group recycled under it would read without the generation check).

use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;

use zl_lpm::{Lpm4, Lpm6};

const PREFIXES: u32 = 16;
const CHANGES: u32 = 4_000;
const READERS: usize = 3;

/// A small xorshift: readers need addresses, not statistics.
fn next(s: &mut u64) -> u64 {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    *s
}

#[test]
fn v4_readers_see_only_before_or_after_values_while_groups_recycle() {
    // Few groups, so the ones freed are reused at once under another /24.
    let t = Arc::new(Lpm4::with_groups(64));
    for i in 0..PREFIXES {
        t.insert(Ipv4Addr::new(10, 0, i as u8, 0), 24, i).unwrap();
    }
    let done = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    let readers: Vec<_> = (0..READERS)
        .map(|r| {
            let (t, done, reads) = (t.clone(), done.clone(), reads.clone());
            thread::spawn(move || {
                let mut s = 0x9e37_79b9_7f4a_7c15 ^ r as u64;
                let mut n = 0u64;
                let mut addrs = [Ipv4Addr::UNSPECIFIED; 5];
                let mut found = [None; 5];
                let mut bulk = false;
                while !done.load(Ordering::Relaxed) {
                    // One address through `lookup`, then five through `lookup_bulk`.
                    let k = if bulk { addrs.len() } else { 1 };
                    for a in &mut addrs[..k] {
                        let x = next(&mut s);
                        let i = (x % u64::from(PREFIXES)) as u8;
                        // Host 7 (under the /32) often, the others spread over both halves.
                        let host = if x >> 16 & 3 == 0 { 7 } else { (x >> 8) as u8 };
                        *a = Ipv4Addr::new(10, 0, i, host);
                    }
                    if bulk {
                        t.lookup_bulk(&addrs, &mut found);
                    } else {
                        found[0] = t.lookup(addrs[0]);
                    }
                    for (a, &v) in addrs[..k].iter().zip(&found) {
                        let [_, _, i, host] = a.octets();
                        let i = u32::from(i);
                        let ok = v == Some(i)
                            || (host >= 128 && v == Some(100 + i))
                            || (host == 7 && v == Some(200 + i));
                        assert!(ok, "{a} -> {v:?} (bulk: {bulk})");
                    }
                    n += k as u64;
                    bulk = !bulk;
                }
                reads.fetch_add(n, Ordering::Relaxed);
            })
        })
        .collect();
    let mut s = 1u64;
    for c in 0..CHANGES {
        let i = (next(&mut s) % u64::from(PREFIXES)) as u8;
        if c % 3 == 0 {
            // A /32 under the /24: a group split off and folded back.
            let a = Ipv4Addr::new(10, 0, i, 7);
            if t.insert(a, 32, 200 + u32::from(i)).is_ok() {
                t.remove(a, 32);
            }
        } else {
            let a = Ipv4Addr::new(10, 0, i, 128);
            if t.insert(a, 25, 100 + u32::from(i)).is_ok() {
                thread::yield_now();
                t.remove(a, 25);
            }
        }
    }
    done.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    assert_eq!(t.stats().groups_in_use, 0);
    assert!(t.stats().entry_writes > u64::from(CHANGES) * 256);
    assert!(reads.load(Ordering::Relaxed) > 0);
}

#[test]
fn v6_readers_see_only_before_or_after_values_while_groups_recycle() {
    let t = Arc::new(Lpm6::with_groups(64));
    let base = |i: u32| Ipv6Addr::new(0x2001, 0x0db8, i as u16, 0, 0, 0, 0, 0);
    for i in 0..PREFIXES {
        t.insert(base(i), 48, i).unwrap();
    }
    let done = Arc::new(AtomicBool::new(false));
    let readers: Vec<_> = (0..READERS)
        .map(|r| {
            let (t, done) = (t.clone(), done.clone());
            thread::spawn(move || {
                let mut s = 0x2545_f491_4f6c_dd1d ^ r as u64;
                let mut addrs = [Ipv6Addr::UNSPECIFIED; 5];
                let mut found = [None; 5];
                let mut bulk = false;
                while !done.load(Ordering::Relaxed) {
                    // One address through `lookup`, then five through `lookup_bulk`.
                    let n = if bulk { addrs.len() } else { 1 };
                    for a in &mut addrs[..n] {
                        let x = next(&mut s);
                        let (i, sub) = ((x % u64::from(PREFIXES)) as u16, (x >> 8) as u16 & 1);
                        *a = Ipv6Addr::new(0x2001, 0x0db8, i, sub, 0, 0, 0, 9);
                    }
                    if bulk {
                        t.lookup_bulk(&addrs, &mut found);
                    } else {
                        found[0] = t.lookup(addrs[0]);
                    }
                    for (a, &v) in addrs[..n].iter().zip(&found) {
                        let (i, sub) = (u32::from(a.segments()[2]), a.segments()[3]);
                        assert!(
                            v == Some(i) || (sub == 1 && v == Some(100 + i)),
                            "{a} -> {v:?} (bulk: {bulk})"
                        );
                    }
                    bulk = !bulk;
                }
            })
        })
        .collect();
    let mut s = 3u64;
    for _ in 0..CHANGES / 4 {
        let i = (next(&mut s) % u64::from(PREFIXES)) as u32;
        // A /64 under the /48: two groups deep (bits 49..64), split and folded.
        let a = Ipv6Addr::new(0x2001, 0x0db8, i as u16, 1, 0, 0, 0, 0);
        if t.insert(a, 64, 100 + i).is_ok() {
            thread::yield_now();
            t.remove(a, 64);
        }
    }
    done.store(true, Ordering::Relaxed);
    for r in readers {
        r.join().unwrap();
    }
    // The four groups of the /48s' path (bits 16..48) remain; the /64s' two are folded back.
    assert_eq!(t.stats().groups_in_use, 4);
}
