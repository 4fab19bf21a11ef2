//! The Internet checksum (RFC 1071) and its incremental update (RFC 1624).
//!
//! Units: 16-bit words in network byte order, one's complement arithmetic. Only the IPv4 header
//! carries a checksum over the fields this crate rewrites (TOS, TTL); TCP and UDP checksums
//! cover the addresses and ports through the pseudo-header but not TOS, TTL or the MACs, so no
//! rewrite here touches them.

/// Folds the carries of a 32-bit one's complement accumulator into 16 bits.
#[inline]
const fn fold(mut sum: u32) -> u16 {
    sum = (sum & 0xffff) + (sum >> 16);
    sum = (sum & 0xffff) + (sum >> 16);
    sum as u16
}

/// The one's complement sum (not yet complemented) of `bytes` read as big-endian 16-bit words;
/// an odd trailing byte is padded with zero (RFC 1071 §4.1).
pub fn ones_complement_sum(bytes: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    let mut words = bytes.chunks_exact(2);
    for w in &mut words {
        sum += u32::from(u16::from_be_bytes([w[0], w[1]]));
        // Fold early so that the accumulator cannot overflow on any slice length.
        if sum > 0xffff_0000 {
            sum = u32::from(fold(sum));
        }
    }
    if let [last] = words.remainder() {
        sum += u32::from(*last) << 8;
    }
    fold(sum)
}

/// The checksum to store in a header whose checksum field is zero: `!sum`.
pub fn checksum(bytes: &[u8]) -> u16 {
    !ones_complement_sum(bytes)
}

/// True when `header` (checksum field included) sums to `0xffff`, i.e. the stored checksum
/// verifies. Accepts both one's complement zeros (`0x0000` and `0xffff`) in the field.
pub fn verifies(header: &[u8]) -> bool {
    ones_complement_sum(header) == 0xffff
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

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn odd_length_is_zero_padded() {
        assert_eq!(ones_complement_sum(&[0x12, 0x34, 0x56]), 0x1234 + 0x5600);
    }

    #[test]
    fn long_input_does_not_overflow() {
        let bytes = vec![0xffu8; 1 << 20];
        assert_eq!(ones_complement_sum(&bytes), 0xffff);
    }
}
