//! The tuned walks (`Lpm6::lookup`, `Lpm6::lookup_bulk`, `Lpm4::lookup`, `Lpm4::lookup_bulk`)
//! against the plain walk of any width (`lookup_plain`), on random tables and addresses, after
//! every batch of route changes. (The plain walk itself is checked against a naive scan in `tests/oracle.rs`.)

use std::net::{Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use zl_lpm::synth::{self, Rng};
use zl_lpm::{Lpm4, Lpm6};

/// Every walk agrees on every address of `addrs`; bulk over the whole slice (so chunks of
/// `Lpm6::BULK` and a shorter tail) and over short slices.
fn assert_walks_agree(t: &Lpm6, addrs: &[Ipv6Addr]) {
    let plain: Vec<Option<u32>> = addrs.iter().map(|&a| t.lookup_plain(a)).collect();
    for (&a, &p) in addrs.iter().zip(&plain) {
        assert_eq!(t.lookup(a), p, "lookup of {a}");
    }
    let mut bulk = vec![Some(u32::MAX); addrs.len()];
    t.lookup_bulk(addrs, &mut bulk);
    for ((a, b), p) in addrs.iter().zip(&bulk).zip(&plain) {
        assert_eq!(b, p, "lookup_bulk of {a}");
    }
    for n in [1, 3, Lpm6::BULK - 1] {
        let n = n.min(addrs.len());
        let mut out = vec![Some(u32::MAX); n];
        t.lookup_bulk(&addrs[..n], &mut out);
        assert_eq!(out, plain[..n], "lookup_bulk of the first {n}");
    }
}

#[derive(Clone, Debug)]
enum Op {
    Insert(u128, u8, u32),
    Remove(u128, u8),
}

/// Prefixes under a few /16s so that they nest and share groups at every depth; lengths over
/// the whole range, the stride boundaries (16 + 8k) and one either side of them favoured.
fn ops() -> impl Strategy<Value = Vec<Op>> {
    let addr = (0u128..3, any::<u128>()).prop_map(|(top, rest)| (top << 112) | (rest >> 16));
    let len = prop_oneof![
        0u8..=128,
        (0u8..14).prop_map(|k| 16 + 8 * k),
        (0u8..14).prop_map(|k| 17 + 8 * k),
        (1u8..15).prop_map(|k| 15 + 8 * k),
    ];
    let op = prop_oneof![
        3 => (addr.clone(), len.clone(), 0u32..1000).prop_map(|(a, l, v)| Op::Insert(a, l, v)),
        1 => (addr, len).prop_map(|(a, l)| Op::Remove(a, l)),
    ];
    proptest::collection::vec(op, 1..150)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn tuned_walks_match_the_plain_walk_through_route_changes(
        ops in ops(),
        seed in any::<u64>(),
    ) {
        let t = Lpm6::with_groups(8192);
        let mut rules: Vec<(u128, u8)> = Vec::new();
        let mut rng = Rng::new(seed);
        // After every 25 changes: addresses inside each rule, at its ends, and random ones.
        for chunk in ops.chunks(25) {
            for op in chunk {
                match *op {
                    Op::Insert(a, l, v) => {
                        t.insert(Ipv6Addr::from(a), l, v).unwrap();
                        rules.push((a, l));
                    }
                    Op::Remove(a, l) => {
                        t.remove(Ipv6Addr::from(a), l);
                    }
                }
            }
            let mut addrs = Vec::new();
            for &(a, l) in &rules {
                let span = u128::MAX.checked_shr(u32::from(l)).unwrap_or(0);
                let first = a & !span;
                addrs.extend([first, first | span, synth::v6_inside((a, l), &mut rng)]);
            }
            addrs.extend((0..40).map(|_| {
                (u128::from(rng.next_u64()) << 64 | u128::from(rng.next_u64())) >> (rng.next_u64() % 3)
            }));
            let addrs: Vec<Ipv6Addr> = addrs.into_iter().map(Ipv6Addr::from).collect();
            assert_walks_agree(&t, &addrs);
        }
    }
}

#[test]
fn tuned_walks_match_the_plain_walk_on_a_bgp_shaped_table() {
    let table = synth::v6_table(20_000, 11);
    let t = Lpm6::default();
    for (i, &(a, l)) in table.iter().enumerate() {
        t.insert(Ipv6Addr::from(a), l, i as u32 % 1000 + 1).unwrap();
    }
    let mut rng = Rng::new(12);
    let addrs = |rng: &mut Rng| -> Vec<Ipv6Addr> {
        (0..20_000)
            .map(|i| {
                let a = if i % 8 == 7 {
                    u128::from(rng.next_u64()) << 64 | u128::from(rng.next_u64())
                } else {
                    synth::v6_inside(table[(rng.next_u64() % table.len() as u64) as usize], rng)
                };
                Ipv6Addr::from(a)
            })
            .collect()
    };
    let before = addrs(&mut rng);
    assert_walks_agree(&t, &before);
    // Route changes: every third prefix withdrawn, longer ones announced under others.
    for &(a, l) in table.iter().step_by(3) {
        t.remove(Ipv6Addr::from(a), l);
    }
    for (i, &(a, l)) in table.iter().skip(1).step_by(5).enumerate() {
        let longer = (l + 16).min(128);
        t.insert(
            Ipv6Addr::from(synth::v6_inside((a, l), &mut rng)),
            longer,
            i as u32 % 7 + 2000,
        )
        .unwrap();
    }
    assert_walks_agree(&t, &before);
    assert_walks_agree(&t, &addrs(&mut rng));
}

#[test]
fn bulk_answers_no_route_and_empty_batches() {
    let t = Lpm6::with_groups(0);
    let a: Vec<Ipv6Addr> = (0..70u128).map(|i| Ipv6Addr::from(i << 100)).collect();
    let mut out = vec![Some(1); a.len()];
    t.lookup_bulk(&a, &mut out);
    assert!(out.iter().all(Option::is_none));
    t.lookup_bulk(&[], &mut []);
    // A /16 is a root entry: no group needed.
    t.insert("2001::".parse().unwrap(), 16, 5).unwrap();
    let mut one = [None];
    t.lookup_bulk(&["2001:db8::1".parse().unwrap()], &mut one);
    assert_eq!(one, [Some(5)]);
}

/// The IPv4 walks agree on every address of `addrs`, as [`assert_walks_agree`].
fn assert_walks4_agree(t: &Lpm4, addrs: &[u32]) {
    let ips: Vec<Ipv4Addr> = addrs.iter().map(|&a| Ipv4Addr::from(a)).collect();
    let plain: Vec<Option<u32>> = ips.iter().map(|&a| t.lookup_plain(a)).collect();
    for (&a, &p) in ips.iter().zip(&plain) {
        assert_eq!(t.lookup(a), p, "lookup of {a}");
    }
    let mut bulk = vec![Some(u32::MAX); addrs.len()];
    t.lookup_bulk(&ips, &mut bulk);
    assert_eq!(bulk, plain, "lookup_bulk");
    let mut bulk = vec![Some(u32::MAX); addrs.len()];
    t.lookup_bulk_u32(addrs, &mut bulk);
    assert_eq!(bulk, plain, "lookup_bulk_u32");
    for n in [1, 3, Lpm4::BULK - 1, Lpm4::BULK + 1] {
        let n = n.min(addrs.len());
        let mut out = vec![Some(u32::MAX); n];
        t.lookup_bulk(&ips[..n], &mut out);
        assert_eq!(out, plain[..n], "lookup_bulk of the first {n}");
    }
}

/// IPv4 changes: prefixes under a few /16s so that they nest and share groups; lengths over
/// the whole range, the root's boundary (/24) and one either side of it favoured.
fn ops4() -> impl Strategy<Value = Vec<(bool, u32, u8, u32)>> {
    let addr = (0u32..3, any::<u32>()).prop_map(|(top, rest)| (0x0a00 + top) << 16 | rest >> 16);
    let len = prop_oneof![0u8..=32, Just(24u8), Just(25u8), Just(23u8), 26u8..=32];
    let op = prop_oneof![
        3 => (addr.clone(), len.clone(), 0u32..1000).prop_map(|(a, l, v)| (true, a, l, v)),
        1 => (addr, len).prop_map(|(a, l)| (false, a, l, 0)),
    ];
    proptest::collection::vec(op, 1..150)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn ipv4_walks_match_the_plain_walk_through_route_changes(
        ops in ops4(),
        seed in any::<u64>(),
    ) {
        // Few groups, so that freed ones are reused under other /24s.
        let t = Lpm4::with_groups(16);
        let mut rules: Vec<(u32, u8)> = Vec::new();
        let mut rng = Rng::new(seed);
        for chunk in ops.chunks(25) {
            for &(insert, a, l, v) in chunk {
                if insert {
                    // A full table refuses the insert and stays as it was.
                    if t.insert(Ipv4Addr::from(a), l, v).is_ok() {
                        rules.push((a, l));
                    }
                } else {
                    t.remove(Ipv4Addr::from(a), l);
                }
            }
            let mut addrs = Vec::new();
            for &(a, l) in &rules {
                let span = u32::MAX.checked_shr(u32::from(l)).unwrap_or(0);
                let first = a & !span;
                addrs.extend([first, first | span, synth::v4_inside((a, l), &mut rng)]);
            }
            addrs.extend((0..40).map(|_| (rng.next_u64() as u32) >> (rng.next_u64() % 3)));
            assert_walks4_agree(&t, &addrs);
        }
    }
}

#[test]
fn ipv4_walks_match_the_plain_walk_on_a_bgp_shaped_table() {
    let table = synth::v4_table(20_000, 13);
    let t = Lpm4::default();
    for (i, &(a, l)) in table.iter().enumerate() {
        t.insert(Ipv4Addr::from(a), l, i as u32 % 1000 + 1).unwrap();
    }
    let mut rng = Rng::new(14);
    let addrs = |rng: &mut Rng| -> Vec<u32> {
        (0..20_000)
            .map(|i| {
                if i % 8 == 7 {
                    rng.next_u64() as u32
                } else {
                    synth::v4_inside(table[(rng.next_u64() % table.len() as u64) as usize], rng)
                }
            })
            .collect()
    };
    let before = addrs(&mut rng);
    assert_walks4_agree(&t, &before);
    // Route changes: every third prefix withdrawn, longer ones (many past /24, in groups)
    // announced under others.
    for &(a, l) in table.iter().step_by(3) {
        t.remove(Ipv4Addr::from(a), l);
    }
    for (i, &(a, l)) in table.iter().skip(1).step_by(5).enumerate() {
        let longer = (l + 8).min(32);
        t.insert(
            Ipv4Addr::from(synth::v4_inside((a, l), &mut rng)),
            longer,
            i as u32 % 7 + 2000,
        )
        .unwrap();
    }
    assert!(t.stats().groups_in_use > 0, "the changes made groups");
    assert_walks4_agree(&t, &before);
    assert_walks4_agree(&t, &addrs(&mut rng));
}
