//! Lookups against a naive oracle: a scan of every rule for the longest one containing the
//! address, after random sequences of inserts and removes.

use std::net::{Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use zl_lpm::{Lpm4, Lpm6, LpmError};

/// The rules as a list, the oracle's longest match by scanning them all.
#[derive(Default)]
struct Naive {
    rules: Vec<(u128, u32, u32)>,
}

fn mask(k: u128, len: u32, width: u32) -> u128 {
    let k = k << (128 - width);
    if len == 0 {
        0
    } else {
        k & (u128::MAX << (128 - len))
    }
}

impl Naive {
    fn insert(&mut self, k: u128, len: u32, v: u32) {
        self.rules.retain(|r| (r.0, r.1) != (k, len));
        self.rules.push((k, len, v));
    }
    fn remove(&mut self, k: u128, len: u32) {
        self.rules.retain(|r| (r.0, r.1) != (k, len));
    }
    fn lookup(&self, a: u128) -> Option<u32> {
        self.rules
            .iter()
            .filter(|r| {
                let m = if r.1 == 0 {
                    0
                } else {
                    u128::MAX << (128 - r.1)
                };
                a & m == r.0
            })
            .max_by_key(|r| r.1)
            .map(|r| r.2)
    }
}

#[derive(Clone, Debug)]
enum Op {
    Insert(u128, u32, u32),
    Remove(u128, u32),
}

/// Prefixes drawn from a small space (two top bytes out of four values each) so that rules
/// nest, collide and share groups; lengths cluster around the root/stride boundaries.
fn ops(width: u32) -> impl Strategy<Value = Vec<Op>> {
    let addr = (0u8..4, 0u8..4, any::<u128>()).prop_map(move |(a, b, rest)| {
        let top = (u128::from(a) << 120) | (u128::from(b) << 112);
        (top | (rest >> 16 & ((1u128 << 112) - 1))) >> (128 - width)
    });
    let len = prop_oneof![
        0..=width,
        Just(width),
        Just(width.min(24)),
        Just(width.min(25)),
        (16..=width.min(40)),
    ];
    let op = prop_oneof![
        3 => (addr.clone(), len.clone(), 0u32..8).prop_map(|(a, l, v)| Op::Insert(a, l, v)),
        2 => (addr, len).prop_map(|(a, l)| Op::Remove(a, l)),
    ];
    proptest::collection::vec(op, 1..120)
}

fn probes(width: u32, rules: &Naive, extra: &[u128]) -> Vec<u128> {
    // Each rule's first and last address and its neighbours, plus random addresses.
    let mut p = extra.to_vec();
    for &(k, len, _) in &rules.rules {
        let span = u128::MAX.checked_shr(len).unwrap_or(0);
        let last = k | span;
        let step = 1u128 << (128 - width);
        p.extend([k, last, k.wrapping_sub(step), last.wrapping_add(step)]);
    }
    p
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn v4_matches_the_oracle(ops in ops(32), extra in proptest::collection::vec(any::<u32>(), 16)) {
        let t = Lpm4::with_groups(64);
        let mut n = Naive::default();
        for op in &ops {
            match *op {
                Op::Insert(a, l, v) => {
                    let k = mask(a, l, 32);
                    t.insert(Ipv4Addr::from(a as u32), l as u8, v).unwrap();
                    n.insert(k, l, v);
                }
                Op::Remove(a, l) => {
                    let k = mask(a, l, 32);
                    let had = n.rules.iter().find(|r| (r.0, r.1) == (k, l)).map(|r| r.2);
                    prop_assert_eq!(t.remove(Ipv4Addr::from(a as u32), l as u8), had);
                    n.remove(k, l);
                }
            }
        }
        let extra: Vec<u128> = extra.iter().map(|&a| u128::from(a) << 96).collect();
        for a in probes(32, &n, &extra) {
            let v4 = Ipv4Addr::from((a >> 96) as u32);
            prop_assert_eq!(t.lookup(v4), n.lookup(a & (u128::MAX << 96)), "at {}", v4);
        }
        prop_assert_eq!(t.len(), n.rules.len());
        // Removing everything frees every group.
        for &(k, l, _) in &n.rules {
            t.remove(Ipv4Addr::from((k >> 96) as u32), l as u8);
        }
        prop_assert_eq!(t.stats().groups_in_use, 0);
    }

    #[test]
    fn v6_matches_the_oracle(ops in ops(128), extra in proptest::collection::vec(any::<u128>(), 16)) {
        let t = Lpm6::with_groups(4096);
        let mut n = Naive::default();
        for op in &ops {
            match *op {
                Op::Insert(a, l, v) => {
                    t.insert(Ipv6Addr::from(a), l as u8, v).unwrap();
                    n.insert(mask(a, l, 128), l, v);
                }
                Op::Remove(a, l) => {
                    let k = mask(a, l, 128);
                    let had = n.rules.iter().find(|r| (r.0, r.1) == (k, l)).map(|r| r.2);
                    prop_assert_eq!(t.remove(Ipv6Addr::from(a), l as u8), had);
                    n.remove(k, l);
                }
            }
        }
        for a in probes(128, &n, &extra) {
            prop_assert_eq!(t.lookup(Ipv6Addr::from(a)), n.lookup(a), "at {}", Ipv6Addr::from(a));
        }
        for &(k, l, _) in &n.rules {
            t.remove(Ipv6Addr::from(k), l as u8);
        }
        prop_assert_eq!(t.stats().groups_in_use, 0);
    }
}

#[test]
fn longest_prefix_wins_and_falls_back_on_remove() {
    let t = Lpm4::default();
    let a = |s: &str| s.parse::<Ipv4Addr>().unwrap();
    t.insert(a("0.0.0.0"), 0, 1).unwrap();
    t.insert(a("10.0.0.0"), 8, 2).unwrap();
    t.insert(a("10.1.2.0"), 24, 3).unwrap();
    t.insert(a("10.1.2.128"), 25, 4).unwrap();
    t.insert(a("10.1.2.200"), 32, 5).unwrap();
    assert_eq!(t.lookup(a("192.0.2.1")), Some(1));
    assert_eq!(t.lookup(a("10.9.9.9")), Some(2));
    assert_eq!(t.lookup(a("10.1.2.1")), Some(3));
    assert_eq!(t.lookup(a("10.1.2.129")), Some(4));
    assert_eq!(t.lookup(a("10.1.2.200")), Some(5));
    assert_eq!(t.stats().groups_in_use, 1);
    assert_eq!(t.remove(a("10.1.2.128"), 25), Some(4));
    assert_eq!(t.lookup(a("10.1.2.129")), Some(3));
    assert_eq!(t.remove(a("10.1.2.200"), 32), Some(5));
    assert_eq!(t.lookup(a("10.1.2.200")), Some(3));
    assert_eq!(
        t.stats().groups_in_use,
        0,
        "the group folds back into the /24"
    );
    assert_eq!(t.remove(a("10.1.2.0"), 24), Some(3));
    assert_eq!(t.lookup(a("10.1.2.1")), Some(2));
    // A shorter rule added later does not override the longer ones.
    t.insert(a("10.1.0.0"), 16, 6).unwrap();
    assert_eq!(t.lookup(a("10.1.2.1")), Some(6));
    assert_eq!(t.remove(a("10.1.0.0"), 16), Some(6));
    assert_eq!(t.remove(a("10.1.0.0"), 16), None);
    assert_eq!(t.lookup(a("10.1.2.1")), Some(2));
    assert_eq!(t.get(a("10.200.0.0"), 8), Some(2), "host bits are ignored");
}

#[test]
fn bad_rules_are_refused_and_a_full_table_is_left_unchanged() {
    let t = Lpm4::with_groups(1);
    let a = |s: &str| s.parse::<Ipv4Addr>().unwrap();
    assert_eq!(
        t.insert(a("10.0.0.0"), 33, 1),
        Err(LpmError::PrefixTooLong { len: 33, max: 32 })
    );
    assert_eq!(
        t.insert(a("10.0.0.0"), 8, zl_lpm::MAX_VALUE + 1),
        Err(LpmError::ValueTooLarge(zl_lpm::MAX_VALUE + 1))
    );
    t.insert(a("10.0.0.1"), 32, 1).unwrap();
    assert_eq!(t.insert(a("10.0.1.1"), 32, 2), Err(LpmError::TableFull));
    assert_eq!(t.lookup(a("10.0.1.1")), None);
    assert_eq!(t.len(), 1);
    let t6 = Lpm6::with_groups(16);
    let b = |s: &str| s.parse::<Ipv6Addr>().unwrap();
    t6.insert(b("2001:db8::"), 32, 1).unwrap();
    t6.insert(b("2001:db8:1::"), 48, 2).unwrap();
    t6.insert(b("2001:db8:1::1"), 128, 3).unwrap();
    assert_eq!(t6.lookup(b("2001:db8:1::1")), Some(3));
    assert_eq!(t6.lookup(b("2001:db8:1::2")), Some(2));
    assert_eq!(t6.lookup(b("2001:db8:2::2")), Some(1));
    assert_eq!(t6.lookup(b("2001:db9::")), None);
}
