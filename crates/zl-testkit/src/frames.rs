//! Ethernet + IPv4 / IPv6 + UDP frames for the tests' pcap inputs and injected traffic, with
//! valid header checksums, built one way instead of a byte-poking function per test file.
//!
//! ```
//! use zl_testkit::frames::Udp;
//!
//! let f = Udp::v4([10, 0, 0, 1], [192, 0, 2, 1]).tos(2).ttl(1).len(100).build();
//! assert_eq!(f.len(), 100);
//! assert_eq!(&f[12..14], &[0x08, 0x00]);
//! assert_eq!(f[15], 2); // the TOS byte
//! assert_eq!(f[22], 1); // the TTL
//! // The IPv4 header sums to 0xffff with its checksum in place.
//! assert_eq!(zl_wire::checksum::checksum(&f[14..34]), 0);
//! ```

use zl_wire::checksum::{checksum, ones_complement_sum, pseudo_header_sum, udp_checksum};

/// The destination MAC the tests' frames carry unless set: the router's input port
/// `02:00:00:00:00:01` in the tests' configs.
pub const ROUTER_MAC_IN: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
/// The source MAC unless set: a host `02:00:00:00:00:10`.
pub const HOST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x10];

#[derive(Clone, Copy, Debug)]
enum Addrs {
    V4 { src: [u8; 4], dst: [u8; 4] },
    V6 { src: [u8; 16], dst: [u8; 16] },
}

/// A UDP datagram in an untagged Ethernet frame. Defaults: [`ROUTER_MAC_IN`] from
/// [`HOST_MAC`], TOS / traffic class 0, TTL / hop limit 64, ports 4000 -> 9 (discard), 60
/// bytes (the minimum frame without FCS) for IPv4 and 62 for IPv6, no UDP checksum for IPv4
/// (RFC 768 allows it) and the mandatory one for IPv6 (RFC 8200 §8.1).
#[derive(Clone, Copy, Debug)]
pub struct Udp {
    dst_mac: [u8; 6],
    src_mac: [u8; 6],
    addrs: Addrs,
    tos: u8,
    ttl: u8,
    sport: u16,
    dport: u16,
    len: usize,
    udp_checksum: bool,
}

impl Udp {
    /// IPv4 from `src` to `dst`.
    pub fn v4(src: [u8; 4], dst: [u8; 4]) -> Self {
        Udp {
            dst_mac: ROUTER_MAC_IN,
            src_mac: HOST_MAC,
            addrs: Addrs::V4 { src, dst },
            tos: 0,
            ttl: 64,
            sport: 4000,
            dport: 9,
            len: 60,
            udp_checksum: false,
        }
    }

    /// IPv6 from `src` to `dst` (with its UDP checksum).
    pub fn v6(src: [u8; 16], dst: [u8; 16]) -> Self {
        Udp {
            addrs: Addrs::V6 { src, dst },
            len: 62,
            udp_checksum: true,
            ..Self::v4([0; 4], [0; 4])
        }
    }

    /// The Ethernet destination and source.
    pub fn macs(mut self, dst: [u8; 6], src: [u8; 6]) -> Self {
        self.dst_mac = dst;
        self.src_mac = src;
        self
    }

    /// The IPv4 TOS byte or the IPv6 traffic class (DSCP << 2 | ECN).
    pub fn tos(mut self, tos: u8) -> Self {
        self.tos = tos;
        self
    }

    /// The IPv4 TTL or the IPv6 hop limit.
    pub fn ttl(mut self, ttl: u8) -> Self {
        self.ttl = ttl;
        self
    }

    /// The UDP source and destination ports.
    pub fn ports(mut self, sport: u16, dport: u16) -> Self {
        self.sport = sport;
        self.dport = dport;
        self
    }

    /// The frame's length without FCS, bytes (at least the headers).
    pub fn len(mut self, len: usize) -> Self {
        self.len = len;
        self
    }

    /// Fills the UDP checksum (always filled for IPv6).
    pub fn with_udp_checksum(mut self) -> Self {
        self.udp_checksum = true;
        self
    }

    /// The frame's bytes; the payload is zeros.
    ///
    /// # Panics
    /// If the length set is shorter than the headers.
    pub fn build(&self) -> Vec<u8> {
        let (ethertype, ip_len) = match self.addrs {
            Addrs::V4 { .. } => (0x0800u16, 20),
            Addrs::V6 { .. } => (0x86dd, 40),
        };
        let l4 = 14 + ip_len;
        assert!(
            self.len >= l4 + 8,
            "a {}-byte frame cannot hold its headers",
            self.len
        );
        let mut f = vec![0u8; self.len];
        f[0..6].copy_from_slice(&self.dst_mac);
        f[6..12].copy_from_slice(&self.src_mac);
        f[12..14].copy_from_slice(&ethertype.to_be_bytes());
        let udp_len = (self.len - l4) as u16;
        let (src, dst): (&[u8], &[u8]) = match &self.addrs {
            Addrs::V4 { src, dst } => {
                let ip = &mut f[14..34];
                ip[0] = 0x45;
                ip[1] = self.tos;
                ip[2..4].copy_from_slice(&((self.len - 14) as u16).to_be_bytes());
                ip[8] = self.ttl;
                ip[9] = 17;
                ip[12..16].copy_from_slice(src);
                ip[16..20].copy_from_slice(dst);
                let c = checksum(ip);
                ip[10..12].copy_from_slice(&c.to_be_bytes());
                (src, dst)
            }
            Addrs::V6 { src, dst } => {
                let ip = &mut f[14..54];
                ip[0] = 0x60 | (self.tos >> 4);
                ip[1] = self.tos << 4;
                ip[4..6].copy_from_slice(&udp_len.to_be_bytes());
                ip[6] = 17;
                ip[7] = self.ttl;
                ip[8..24].copy_from_slice(src);
                ip[24..40].copy_from_slice(dst);
                (src, dst)
            }
        };
        f[l4..l4 + 2].copy_from_slice(&self.sport.to_be_bytes());
        f[l4 + 2..l4 + 4].copy_from_slice(&self.dport.to_be_bytes());
        f[l4 + 4..l4 + 6].copy_from_slice(&udp_len.to_be_bytes());
        if self.udp_checksum {
            let pseudo = pseudo_header_sum(src, dst, 17, u32::from(udp_len));
            let c = udp_checksum(pseudo, ones_complement_sum(&f[l4..]));
            f[l4 + 6..l4 + 8].copy_from_slice(&c.to_be_bytes());
        }
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn udp_checksums_verify() {
        for f in [
            Udp::v4([10, 0, 0, 1], [192, 0, 2, 1])
                .len(200)
                .with_udp_checksum()
                .build(),
            Udp::v6([0x20; 16], [0x30; 16]).tos(0xb9).ttl(1).build(),
        ] {
            let l4 = if f[12] == 0x08 { 34 } else { 54 };
            let (src, dst) = if l4 == 34 {
                (&f[26..30], &f[30..34])
            } else {
                (&f[22..38], &f[38..54])
            };
            let pseudo = pseudo_header_sum(src, dst, 17, (f.len() - l4) as u32);
            // With the checksum in place, the segment and pseudo-header sum to all ones.
            let mut copy = f.clone();
            let stored = u16::from_be_bytes([copy[l4 + 6], copy[l4 + 7]]);
            copy[l4 + 6..l4 + 8].fill(0);
            assert_eq!(
                stored,
                udp_checksum(pseudo, ones_complement_sum(&copy[l4..]))
            );
            assert_ne!(stored, 0);
        }
    }

    #[test]
    fn ipv6_traffic_class_and_hop_limit_land_in_place() {
        let f = Udp::v6([1; 16], [2; 16]).tos(0xb9).ttl(7).len(100).build();
        assert_eq!(f[14], 0x6b);
        assert_eq!(f[15] & 0xf0, 0x90);
        assert_eq!(f[21], 7);
        assert_eq!(u16::from_be_bytes([f[18], f[19]]), 100 - 54);
    }
}
