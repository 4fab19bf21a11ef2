//! The Internet checksum (RFC 1071) and its incremental update (RFC 1624).
//!
//! Units: 16-bit words in network byte order, one's complement arithmetic. Only the IPv4 header
//! carries a checksum over the fields this crate rewrites (TOS, TTL); TCP and UDP checksums
//! cover the addresses and ports through the pseudo-header but not TOS, TTL or the MACs, so no
//! rewrite here touches them. [`pseudo_header_sum`] and [`udp_checksum`] compute the UDP
//! checksum for frames built from scratch (the traffic generator).

/// Folds the carries of a 32-bit one's complement accumulator into 16 bits.
#[inline]
const fn fold(sum: u32) -> u16 {
    let sum = (sum & 0xffff) + (sum >> 16);
    let sum = (sum & 0xffff) + (sum >> 16);
    sum as u16
}

/// The one's complement sum (not yet complemented) of `bytes` read as big-endian 16-bit words;
/// an odd trailing byte is padded with zero (RFC 1071 §4.1).
///
/// Adds 32-bit big-endian words into a 64-bit accumulator (RFC 1071 §2(B): the sum is
/// independent of the word size as long as the carries are folded back in at the end); the
/// accumulator cannot overflow below 2^32 words.
#[inline]
pub fn ones_complement_sum(bytes: &[u8]) -> u16 {
    sum_words(bytes, u32::from_be_bytes)
}

/// [`ones_complement_sum`] with the 4-octet words read by `word`: big-endian for the sum
/// itself; in the machine's byte order, the same sum with its two octets swapped on a
/// little-endian machine (RFC 1071 §2(B), byte order independence).
#[inline(always)]
fn sum_words(bytes: &[u8], word: impl Fn([u8; 4]) -> u32) -> u16 {
    let sum = wide_sum(bytes, word);
    // 64 -> 32 bits, then the 16-bit fold.
    let sum = (sum & 0xffff_ffff) + (sum >> 32);
    let sum = (sum & 0xffff_ffff) + (sum >> 32);
    fold(sum as u32)
}

/// The plain integer sum of `bytes` as 4-octet words read by `word` (trailing octets
/// zero-padded), before any fold: congruent modulo `0xffff` to the one's complement sum, and
/// 0 only when every octet is.
#[inline(always)]
fn wide_sum(bytes: &[u8], word: impl Fn([u8; 4]) -> u32) -> u64 {
    let mut sum: u64 = 0;
    let mut words = bytes.chunks_exact(4);
    for w in &mut words {
        sum += u64::from(word([w[0], w[1], w[2], w[3]]));
    }
    // Up to 3 trailing octets, zero-padded (written out: a variable-length copy into a
    // buffer compiled to a `memmove` call, which dominated the cost on a 20-octet header).
    sum += u64::from(match *words.remainder() {
        [a] => word([a, 0, 0, 0]),
        [a, b] => word([a, b, 0, 0]),
        [a, b, c] => word([a, b, c, 0]),
        _ => 0,
    });
    sum
}

/// The checksum to store in a header whose checksum field is zero: `!sum`.
pub fn checksum(bytes: &[u8]) -> u16 {
    !ones_complement_sum(bytes)
}

/// True when `header` (checksum field included) sums to `0xffff`, i.e. the stored checksum
/// verifies. Accepts both one's complement zeros (`0x0000` and `0xffff`) in the field.
///
/// Summed in the machine's byte order (no byte swaps, on every received IPv4 header): the
/// result is the network-order sum with its octets swapped or not, and `0xffff` reads the same
/// either way.
///
/// Without the folds: the words' plain sum `s` folds to `0xffff` exactly when `s` is a
/// nonzero multiple of `0xffff` (each fold keeps the value modulo `0xffff`, as `2^16` is 1
/// modulo `0xffff`, and keeps it nonzero), and the compiler tests the multiple with one
/// multiplication, where the folds take a dozen instructions on every received header.
/// Equal to the folded sum compared with `0xffff` (tested on every length and on
/// random words).
///
/// The multiple is tested as `sum * 0xffff^-1 mod 2^64 <= (2^64 - 1) / 0xffff` (Granlund and
/// Montgomery's divisibility test for an odd divisor: multiplying by the inverse maps the
/// multiples `k * 0xffff` to exactly the `k` up to that bound), a multiply and a compare where
/// the remainder takes a wide multiply, a shift and two subtractions.
#[inline]
pub fn verifies(header: &[u8]) -> bool {
    let sum = wide_sum(header, u32::from_ne_bytes);
    sum != 0 && is_multiple_of_ffff(sum)
}

/// `0xffff^-1` modulo `2^64`.
const INV_FFFF: u64 = 0xfffe_fffe_fffe_ffff;

/// `x % 0xffff == 0`, by the inverse (see [`verifies`]).
#[inline(always)]
const fn is_multiple_of_ffff(x: u64) -> bool {
    x.wrapping_mul(INV_FFFF) <= u64::MAX / 0xffff
}

/// RFC 1624 eqn. 3: the new checksum after one 16-bit word of the covered data changes from
/// `old` to `new`:
///
/// ```text
/// HC' = ~(~HC + ~m + m')
/// ```
///
/// Eqn. 3 rather than eqn. 2 (`HC - ~m - m'`) because eqn. 2 can yield `0xffff` where a full
/// recomputation gives `0x0000` (RFC 1624 §4, the worked example in the tests below).
#[inline]
pub const fn update_word(hc: u16, old: u16, new: u16) -> u16 {
    let sum = (!hc) as u32 + (!old) as u32 + new as u32;
    !fold(sum)
}

/// [`update_word`] for a word whose high octet drops by one and whose low octet stays (an IPv4
/// TTL decrement; the protocol shares its word): with `m' = m - 0x0100` and `~m = 0xffff - m`,
/// `~m + m'` is `0xfeff` whatever `m` is (for `m >= 0x0100`, a TTL of at least 1), so neither
/// word need be read. Equal to `update_word(hc, m, m - 0x0100)` for every `hc` and such `m`
/// (tested against it).
#[inline]
pub const fn update_high_octet_decrement(hc: u16) -> u16 {
    !fold((!hc) as u32 + 0xfeff)
}

/// [`update_high_octet_decrement`] on the checksum field as the machine reads it
/// (`u16::from_ne_bytes` of its two octets; the result is stored back the same way): Linux's
/// `ip_decrease_ttl`, the field plus `0x0100` in network order with the end-around carry, in
/// a compare and two adds, with no byte swap and no fold. Equal to
/// [`update_high_octet_decrement`] for every field value (tested exhaustively).
#[inline]
pub const fn update_high_octet_decrement_ne(field: u16) -> u16 {
    let sum = field as u32 + u16::from_ne_bytes([1, 0]) as u32;
    (sum + (sum >= 0xffff) as u32) as u16
}

/// The one's complement sum of the TCP/UDP pseudo-header: source and destination address
/// (4 octets each for IPv4, RFC 768 / RFC 793 §3.1; 16 for IPv6, RFC 8200 §8.1), the protocol
/// number and the upper-layer length. Add the segment's own sum with [`add_sums`] and
/// complement for the checksum (see [`udp_checksum`]).
pub fn pseudo_header_sum(src: &[u8], dst: &[u8], protocol: u8, l4_len: u32) -> u16 {
    let len = [
        (l4_len >> 24) as u8,
        (l4_len >> 16) as u8,
        (l4_len >> 8) as u8,
        l4_len as u8,
    ];
    add_sums(&[
        ones_complement_sum(src),
        ones_complement_sum(dst),
        ones_complement_sum(&[0, protocol]),
        ones_complement_sum(&len),
    ])
}

/// One's complement addition of partial sums (each of an even number of octets, except the
/// last piece of the data: RFC 1071 §2(A), the sum is associative and commutative).
pub fn add_sums(sums: &[u16]) -> u16 {
    fold(sums.iter().map(|&s| u32::from(s)).sum())
}

/// The UDP checksum to store, from the pseudo-header sum and the sum of the UDP header (its
/// checksum field zero) and payload. A computed `0x0000` is sent as `0xffff`: zero in the
/// field means "no checksum" (RFC 768), which IPv6 forbids (RFC 8200 §8.1).
pub fn udp_checksum(pseudo: u16, segment: u16) -> u16 {
    match !add_sums(&[pseudo, segment]) {
        0 => 0xffff,
        c => c,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The TTL decrement's shortcut equals RFC 1624 eqn. 3 for every checksum and every TTL /
    /// protocol word it can meet (TTL 1..=255, every protocol octet).
    #[test]
    fn high_octet_decrement_is_eqn_3() {
        for m in 0x0100..=0xffffu16 {
            // Every checksum for a spread of words, every word for a few checksums.
            let hcs: &[u16] = if m % 251 == 0 {
                &[]
            } else {
                &[0, 1, 0x7fff, 0xfeff, 0xffff]
            };
            for hc in hcs.iter().copied() {
                assert_eq!(
                    update_high_octet_decrement(hc),
                    update_word(hc, m, m - 0x0100)
                );
            }
            if m % 251 == 0 {
                for hc in 0..=0xffffu16 {
                    let want = update_word(hc, m, m - 0x0100);
                    assert_eq!(update_high_octet_decrement(hc), want, "hc {hc:#x} m {m:#x}");
                }
            }
        }
    }

    /// The machine-order TTL update equals the network-order one for every checksum.
    #[test]
    fn high_octet_decrement_ne_is_the_network_order_one() {
        for hc in 0..=0xffffu16 {
            let field = u16::from_ne_bytes(hc.to_be_bytes());
            let got = u16::from_be_bytes(update_high_octet_decrement_ne(field).to_ne_bytes());
            assert_eq!(got, update_high_octet_decrement(hc), "hc {hc:#x}");
        }
    }

    /// The pseudo-header checksum equals the plain checksum over the pseudo-header written out
    /// in front of the segment (RFC 768's definition), for IPv4 and IPv6, odd lengths too.
    #[test]
    fn udp_checksum_matches_the_pseudo_header_written_out() {
        for (src, dst) in [
            (vec![10, 0, 0, 1], vec![192, 0, 2, 7]),
            (
                vec![0x20, 1, 0xd, 0xb8, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
                vec![0x20, 1, 0xd, 0xb8, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x42],
            ),
        ] {
            for len in [8usize, 9, 30, 101, 1000] {
                let mut seg: Vec<u8> = (0..len).map(|i| (i * 31 + 5) as u8).collect();
                seg[4..6].copy_from_slice(&(len as u16).to_be_bytes());
                seg[6..8].fill(0);
                let mut written = Vec::new();
                written.extend_from_slice(&src);
                written.extend_from_slice(&dst);
                if src.len() == 4 {
                    written.extend_from_slice(&[0, 17]);
                    written.extend_from_slice(&(len as u16).to_be_bytes());
                } else {
                    written.extend_from_slice(&(len as u32).to_be_bytes());
                    written.extend_from_slice(&[0, 0, 0, 17]);
                }
                written.extend_from_slice(&seg);
                let reference = match checksum(&written) {
                    0 => 0xffff,
                    c => c,
                };
                let pseudo = pseudo_header_sum(&src, &dst, 17, len as u32);
                let c = udp_checksum(pseudo, ones_complement_sum(&seg));
                assert_eq!(c, reference, "len {len}");
                // Stored, the whole verifies.
                let at = written.len() - len + 6;
                written[at..at + 2].copy_from_slice(&c.to_be_bytes());
                assert_eq!(ones_complement_sum(&written), 0xffff);
            }
        }
    }

    #[test]
    fn rfc1624_section4_worked_example() {
        // The one's complement sum of the other header words is 0xCD7A; m = 0x5555 -> 0x3285.
        let hc = !fold(0xCD7A + 0x5555);
        assert_eq!(hc, 0xDD2F);
        assert_eq!(update_word(hc, 0x5555, 0x3285), 0x0000);
        // Full recomputation agrees.
        assert_eq!(!fold(0xCD7A + 0x3285), 0x0000);
    }

    #[test]
    fn rfc1071_example_sum() {
        // RFC 1071 §3 numerical example: bytes 00 01 f2 03 f4 f5 f6 f7 sum to 0xddf2.
        assert_eq!(
            ones_complement_sum(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]),
            0xddf2
        );
    }

    /// The inverse is one, and the divisibility test is `% 0xffff == 0`: on every multiple a
    /// 20-octet header can sum to and its neighbours, around the top of the range, and on
    /// random values.
    #[test]
    fn multiple_of_ffff_is_the_remainder() {
        use proptest::prelude::*;
        assert_eq!(0xffffu64.wrapping_mul(INV_FFFF), 1);
        for k in 0..=5 * 0x1_0001u64 + 2 {
            for x in [(k * 0xffff).saturating_sub(1), k * 0xffff, k * 0xffff + 1] {
                assert_eq!(is_multiple_of_ffff(x), x % 0xffff == 0, "{x:#x}");
            }
        }
        for x in (u64::MAX - 0x3_0000)..=u64::MAX {
            assert_eq!(is_multiple_of_ffff(x), x % 0xffff == 0, "{x:#x}");
        }
        proptest!(ProptestConfig::with_cases(100_000), |(x in any::<u64>())| {
            prop_assert_eq!(is_multiple_of_ffff(x), x % 0xffff == 0);
            let m = (x / 0xffff) * 0xffff;
            prop_assert!(is_multiple_of_ffff(m));
            prop_assert_eq!(is_multiple_of_ffff(m.wrapping_add(1)), m.wrapping_add(1) % 0xffff == 0);
        });
    }

    #[test]
    fn odd_length_is_zero_padded() {
        assert_eq!(ones_complement_sum(&[0x12, 0x34, 0x56]), 0x1234 + 0x5600);
    }

    /// `verifies` (machine byte order) agrees with the network-order sum on every length, on
    /// arbitrary bytes and on bytes whose checksum is filled in (so the sum is `0xffff`).
    #[test]
    fn verifies_agrees_with_the_network_order_sum() {
        let bytes: Vec<u8> = (0..200u32).map(|i| (i * 97 + 31) as u8).collect();
        let mut valid = 0;
        for len in 0..bytes.len() {
            let b = &bytes[..len];
            assert_eq!(verifies(b), ones_complement_sum(b) == 0xffff, "len {len}");
            if len >= 2 {
                // A checksum field at an even offset, as in a header.
                let at = (len / 2 - 1) & !1;
                let mut h = b.to_vec();
                h[at..at + 2].fill(0);
                let c = checksum(&h);
                h[at..at + 2].copy_from_slice(&c.to_be_bytes());
                assert_eq!(ones_complement_sum(&h), 0xffff, "len {len}");
                assert!(verifies(&h), "len {len}");
                h[len - 1] ^= 0x40;
                assert!(!verifies(&h), "len {len}, one bit changed");
                valid += 1;
            }
        }
        assert!(valid > 190);
    }

    /// `verifies` (a nonzero multiple of `0xffff`) equals the folded machine-order sum
    /// compared with `0xffff`, its plain definition, on random and on valid headers, and on the
    /// sums at and around each multiple the fold meets.
    #[test]
    fn verifies_equals_the_folded_sum() {
        use proptest::prelude::*;
        let folded = |b: &[u8]| sum_words(b, u32::from_ne_bytes) == 0xffff;
        proptest!(|(mut b in proptest::collection::vec(any::<u8>(), 0..80), at in 0usize..40)| {
            prop_assert_eq!(verifies(&b), folded(&b));
            if b.len() >= 2 {
                let at = (at % (b.len() / 2)) * 2;
                b[at..at + 2].fill(0);
                let c = checksum(&b);
                b[at..at + 2].copy_from_slice(&c.to_be_bytes());
                prop_assert!(verifies(&b));
                prop_assert_eq!(verifies(&b), folded(&b));
            }
        });
        // Five words (an IPv4 header) reaching every multiple of 0xffff a 20-octet header
        // can sum to, and their neighbours; all-zero and all-ones words.
        for k in 0..=5 * 0x1_0001u64 {
            for s in [(k * 0xffff).saturating_sub(1), k * 0xffff, k * 0xffff + 1] {
                let mut words = [0u32; 5];
                let mut left = s;
                for w in &mut words {
                    *w = left.min(u64::from(u32::MAX)) as u32;
                    left -= u64::from(*w);
                }
                if left != 0 {
                    continue;
                }
                let b: Vec<u8> = words.iter().flat_map(|w| w.to_ne_bytes()).collect();
                assert_eq!(verifies(&b), folded(&b), "sum {s:#x}");
            }
        }
        assert!(!verifies(&[0; 20]));
        assert!(verifies(&[0xff; 20]));
    }

    #[test]
    fn matches_a_16_bit_reference_on_every_length() {
        let bytes: Vec<u8> = (0..200u32).map(|i| (i * 151 + 7) as u8).collect();
        for len in 0..bytes.len() {
            let mut reference: u32 = 0;
            for pair in bytes[..len].chunks(2) {
                let word = u16::from_be_bytes([pair[0], *pair.get(1).unwrap_or(&0)]);
                reference = u32::from(fold(reference + u32::from(word)));
            }
            assert_eq!(
                ones_complement_sum(&bytes[..len]),
                reference as u16,
                "len {len}"
            );
        }
    }

    #[test]
    fn long_input_does_not_overflow() {
        let bytes = vec![0xffu8; 1 << 20];
        assert_eq!(ones_complement_sum(&bytes), 0xffff);
    }
}
