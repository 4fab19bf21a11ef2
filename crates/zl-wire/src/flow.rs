//! Flow keys and their seeded 64-bit hash ([`FlowId`]).
//!
//! SRED and ZL-RED (docs/algorithms/zombie-list.md) key the Zombie List by flow; the ZL-RED paper
//! takes the pair of IPv4 addresses (64 bits). Three key kinds are offered: source address, source
//! and destination addresses (the default, as the ZL-RED paper), and the 5-tuple.
//!
//! decided: every key kind, IPv4 or IPv6, is hashed to 64 bits, so one `FlowId` type serves all.
//! The hash absorbs the key in 64-bit words with the folded multiply of foldhash / wyhash
//! (`fm(a, b) = lo64(a * b) ^ hi64(a * b)` on the 128-bit product): one multiply per word, one
//! to finish. The seed is passed in (config), so a run is reproducible and an outsider who does
//! not know it cannot aim flows at one bucket. The IP version and key kind enter the initial
//! state, so an IPv4 key and an IPv6 key of equal bits do not collide by construction.
//!
//! decided: the 5-tuple of a fragment (IPv4 or IPv6, first fragment included) has ports 0, so
//! that every fragment of a datagram lands on the same flow; protocols without ports (ICMP,
//! ESP, ...) also hash with ports 0.

use core::net::IpAddr;
use serde::{Deserialize, Serialize};
use zl_core::FlowId;

/// Which header fields identify a flow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum FlowKeyKind {
    /// The source address alone.
    #[serde(rename = "src")]
    Src,
    /// Source and destination addresses (the ZL-RED paper's key).
    #[default]
    #[serde(rename = "src-dst")]
    SrcDst,
    /// Addresses, protocol and ports.
    #[serde(rename = "5-tuple")]
    FiveTuple,
}

impl FlowKeyKind {
    /// The name used in config files.
    pub const fn name(self) -> &'static str {
        match self {
            FlowKeyKind::Src => "src",
            FlowKeyKind::SrcDst => "src-dst",
            FlowKeyKind::FiveTuple => "5-tuple",
        }
    }

    const fn tag(self) -> u64 {
        match self {
            FlowKeyKind::Src => 1,
            FlowKeyKind::SrcDst => 2,
            FlowKeyKind::FiveTuple => 3,
        }
    }
}

impl core::fmt::Display for FlowKeyKind {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

/// TCP / UDP ports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Ports {
    /// Source port.
    pub src: u16,
    /// Destination port.
    pub dst: u16,
}

/// The fields a flow key is drawn from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlowKey {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// The upper-layer protocol (after IPv6 extension headers).
    pub protocol: u8,
    /// `None` for fragments and protocols without ports.
    pub ports: Option<Ports>,
}

// Digits of pi (as in foldhash's and SipHash's constants): odd, dense in ones and zeros.
const K_ABSORB: u64 = 0x243f_6a88_85a3_08d3;
const K_FINISH: u64 = 0x1319_8a2e_0370_7345;
const K_INIT: u64 = 0xa409_3822_299f_31d0;

#[inline(always)]
const fn folded_multiply(a: u64, b: u64) -> u64 {
    let full = (a as u128) * (b as u128);
    (full as u64) ^ ((full >> 64) as u64)
}

#[inline(always)]
const fn absorb(state: u64, word: u64) -> u64 {
    folded_multiply(state ^ word, K_ABSORB)
}

/// Splits an address into 64-bit words (one for IPv4, two for IPv6: the 128 bits are hashed
/// down to the same 64-bit width as an IPv4 key).
#[inline(always)]
fn absorb_addr(state: u64, addr: IpAddr) -> u64 {
    match addr {
        IpAddr::V4(a) => absorb(state, u64::from(u32::from(a))),
        IpAddr::V6(a) => {
            let bits = u128::from(a);
            absorb(absorb(state, (bits >> 64) as u64), bits as u64)
        }
    }
}

impl FlowKey {
    /// Hashes the fields `kind` selects, with `seed`.
    ///
    /// One copy of [`FlowKey::hash_as`] per kind, chosen once: in each the kind is a constant,
    /// so its tag and its field choices cost nothing per packet.
    #[inline]
    pub fn hash(&self, kind: FlowKeyKind, seed: u64) -> FlowId {
        match kind {
            FlowKeyKind::Src => self.hash_as(FlowKeyKind::Src, seed),
            FlowKeyKind::SrcDst => self.hash_as(FlowKeyKind::SrcDst, seed),
            FlowKeyKind::FiveTuple => self.hash_as(FlowKeyKind::FiveTuple, seed),
        }
    }

    /// [`FlowKey::hash`], written once for every kind.
    #[inline(always)]
    fn hash_as(&self, kind: FlowKeyKind, seed: u64) -> FlowId {
        let version = if self.src.is_ipv4() { 4u64 } else { 6u64 };
        let mut h = folded_multiply(seed ^ K_INIT, K_FINISH ^ (kind.tag() << 8 | version));
        h = absorb_addr(h, self.src);
        if kind != FlowKeyKind::Src {
            h = absorb_addr(h, self.dst);
        }
        if kind == FlowKeyKind::FiveTuple {
            let ports = self.ports.unwrap_or_default();
            let word =
                u64::from(ports.src) << 32 | u64::from(ports.dst) << 16 | u64::from(self.protocol);
            h = absorb(h, word);
        }
        FlowId(folded_multiply(h, K_FINISH))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::{Ipv4Addr, Ipv6Addr};

    fn v4(src: u32, dst: u32) -> FlowKey {
        FlowKey {
            src: IpAddr::V4(Ipv4Addr::from(src)),
            dst: IpAddr::V4(Ipv4Addr::from(dst)),
            protocol: 6,
            ports: Some(Ports { src: 1, dst: 2 }),
        }
    }

    #[test]
    fn key_kinds_select_fields() {
        let a = v4(0x0a00_0001, 0x0a00_0002);
        let other_dst = v4(0x0a00_0001, 0x0a00_0003);
        assert_eq!(
            a.hash(FlowKeyKind::Src, 7),
            other_dst.hash(FlowKeyKind::Src, 7)
        );
        assert_ne!(
            a.hash(FlowKeyKind::SrcDst, 7),
            other_dst.hash(FlowKeyKind::SrcDst, 7)
        );
        let other_port = FlowKey {
            ports: Some(Ports { src: 1, dst: 3 }),
            ..a
        };
        assert_eq!(
            a.hash(FlowKeyKind::SrcDst, 7),
            other_port.hash(FlowKeyKind::SrcDst, 7)
        );
        assert_ne!(
            a.hash(FlowKeyKind::FiveTuple, 7),
            other_port.hash(FlowKeyKind::FiveTuple, 7)
        );
        assert_ne!(
            a.hash(FlowKeyKind::SrcDst, 7),
            a.hash(FlowKeyKind::SrcDst, 8)
        );
    }

    #[test]
    fn ipv4_and_ipv6_of_same_bits_differ() {
        let a = v4(1, 2);
        let b = FlowKey {
            src: IpAddr::V6(Ipv6Addr::from(1u128)),
            dst: IpAddr::V6(Ipv6Addr::from(2u128)),
            ..a
        };
        assert_ne!(
            a.hash(FlowKeyKind::SrcDst, 0),
            b.hash(FlowKeyKind::SrcDst, 0)
        );
    }

    /// Sequential addresses (the worst case for a weak hash) spread over 1024 buckets like a
    /// uniform draw: chi-square with 1023 degrees of freedom has mean 1023 and standard
    /// deviation sqrt(2 * 1023) = 45; we allow 5 standard deviations.
    #[test]
    fn sequential_keys_spread_uniformly() {
        const BUCKETS: usize = 1024;
        const N: u32 = 200_000;
        for kind in [
            FlowKeyKind::Src,
            FlowKeyKind::SrcDst,
            FlowKeyKind::FiveTuple,
        ] {
            let mut counts = [0u32; BUCKETS];
            for i in 0..N {
                let id = v4(0x0a00_0000 + i, 0xc0a8_0001).hash(kind, 0x5eed);
                counts[(id.0 >> 54) as usize] += 1;
            }
            let expected = f64::from(N) / BUCKETS as f64;
            let chi2: f64 = counts
                .iter()
                .map(|&c| (f64::from(c) - expected).powi(2) / expected)
                .sum();
            assert!(chi2 < 1023.0 + 5.0 * 45.2, "{kind}: chi2 = {chi2}");
        }
    }

    /// Flipping one input bit flips each output bit with probability 1/2: over 64 keys x 32
    /// address bits the mean number of flipped output bits is 32 (binomial sd 4 per sample,
    /// 0.09 for the mean of 2048); we allow 31..33.
    #[test]
    fn avalanche() {
        let mut flipped = 0u64;
        let mut samples = 0u64;
        for k in 0..64u32 {
            let base_key = v4(k.wrapping_mul(0x9e37_79b9), 0x0a0a_0a0a);
            let base = base_key.hash(FlowKeyKind::SrcDst, 1).0;
            for bit in 0..32 {
                let src = k.wrapping_mul(0x9e37_79b9) ^ (1 << bit);
                let h = v4(src, 0x0a0a_0a0a).hash(FlowKeyKind::SrcDst, 1).0;
                flipped += u64::from((h ^ base).count_ones());
                samples += 1;
            }
        }
        let mean = flipped as f64 / samples as f64;
        assert!((31.0..33.0).contains(&mean), "mean flipped bits {mean}");
    }

    #[test]
    fn serde_names_are_kebab_case() {
        use serde::de::value::{Error, StrDeserializer};
        use serde::de::IntoDeserializer;
        for kind in [
            FlowKeyKind::Src,
            FlowKeyKind::SrcDst,
            FlowKeyKind::FiveTuple,
        ] {
            let de: StrDeserializer<'_, Error> = kind.name().into_deserializer();
            assert_eq!(FlowKeyKind::deserialize(de).unwrap(), kind);
        }
        let de: StrDeserializer<'_, Error> = "five-tuple".into_deserializer();
        assert!(FlowKeyKind::deserialize(de).is_err());
    }
}

/// A 16-bit hash of a host's address, the `src_host` / `dst_host` of `zl_aqm::PacketMeta` that
/// per-host isolation keys on (CAKE's host modes, ZL-RED's isolation by host): Fibonacci
/// hashing (Knuth, TAOCP 6.4) of the IPv4 address, the top 16 bits of its product with
/// 2^32 / phi. Two instructions per address on the packet path; two hosts of 65 536 share a
/// hash by chance, as hosts share CAKE's host buckets.
#[inline(always)]
pub fn host_hash_v4(addr: std::net::Ipv4Addr) -> u16 {
    (u32::from(addr).wrapping_mul(0x9E37_79B1) >> 16) as u16
}

/// [`host_hash_v4`] for either family: an IPv6 address is folded to 32 bits (XOR of its
/// quarters) first.
#[inline]
pub fn host_hash(addr: std::net::IpAddr) -> u16 {
    match addr {
        std::net::IpAddr::V4(a) => host_hash_v4(a),
        std::net::IpAddr::V6(a) => {
            let x = u128::from(a);
            let half = x as u64 ^ (x >> 64) as u64;
            host_hash_v4(std::net::Ipv4Addr::from((half ^ (half >> 32)) as u32))
        }
    }
}

#[cfg(test)]
mod host_hash_tests {
    use super::*;
    use std::net::{IpAddr, Ipv4Addr};

    #[test]
    fn neighbouring_hosts_spread_over_the_hash() {
        let hashes: std::collections::HashSet<u16> = (0..=255u8)
            .map(|i| host_hash_v4(Ipv4Addr::new(10, 0, 1, i)))
            .collect();
        assert_eq!(hashes.len(), 256, "a /24 never collides");
        let v6: IpAddr = "2001:db8::1".parse().unwrap();
        assert_eq!(host_hash(v6), host_hash("2001:db8::1".parse().unwrap()));
        assert_ne!(host_hash(v6), host_hash("2001:db8::2".parse().unwrap()));
    }
}
