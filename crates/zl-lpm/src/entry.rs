//! The 32-bit table entry shared by the root table and the 256-entry groups.
//!
//! ```text
//!  31   30..26     25       24..17     16..0
//! [EXT=0][own gen][VALID ][depth   ][value      ]   leaf: the longest matching rule here
//! [EXT=1][own gen][child gen 25..21][child 20..0]   pointer to a group one stride deeper
//! ```
//!
//! `own gen` is the generation of the group holding the entry (0 in the root table); a pointer
//! carries the generation its child had when it was linked. A reader that followed a pointer
//! and finds an entry whose own generation differs knows the group was freed and reused under
//! it, and starts the lookup again (see the crate doc). An all-zero entry is "no route".

pub(crate) const EXT: u32 = 1 << 31;
pub(crate) const GEN_SHIFT: u32 = 26;
pub(crate) const GEN_BITS: u32 = 5;
pub(crate) const GEN_MASK: u32 = ((1 << GEN_BITS) - 1) << GEN_SHIFT;
const CHILD_GEN_SHIFT: u32 = 21;
const CHILD_BITS: u32 = 21;
const CHILD_MASK: u32 = (1 << CHILD_BITS) - 1;
pub(crate) const VALID: u32 = 1 << 25;
const DEPTH_SHIFT: u32 = 17;
const VALUE_BITS: u32 = 17;
const VALUE_MASK: u32 = (1 << VALUE_BITS) - 1;

/// The largest value (next-hop id) a rule can carry.
pub const MAX_VALUE: u32 = VALUE_MASK;
/// The most 256-entry groups a table can address.
pub const MAX_GROUPS: u32 = 1 << CHILD_BITS;

#[inline(always)]
pub(crate) fn is_ext(e: u32) -> bool {
    e & EXT != 0
}
#[inline(always)]
pub(crate) fn own_gen(e: u32) -> u32 {
    (e & GEN_MASK) >> GEN_SHIFT
}
#[inline(always)]
pub(crate) fn child(e: u32) -> usize {
    (e & CHILD_MASK) as usize
}
#[inline(always)]
pub(crate) fn child_gen(e: u32) -> u32 {
    (e >> CHILD_GEN_SHIFT) & ((1 << GEN_BITS) - 1)
}
/// True when `c`, read from the group that pointer `e` leads to, carries the generation the
/// pointer promised: `e`'s child generation (bits 21..26) moved up to `c`'s own (26..31).
#[inline(always)]
pub(crate) fn same_gen(c: u32, e: u32) -> bool {
    (c ^ (e << 5)) & GEN_MASK == 0
}
/// A leaf's value, `None` for "no route".
#[inline(always)]
pub(crate) fn value(e: u32) -> Option<u32> {
    (e & VALID != 0).then_some(e & VALUE_MASK)
}
pub(crate) fn depth(e: u32) -> u32 {
    (e >> DEPTH_SHIFT) & 0xff
}
pub(crate) fn is_valid(e: u32) -> bool {
    e & VALID != 0
}
pub(crate) fn leaf(depth: u32, value: u32) -> u32 {
    VALID | depth << DEPTH_SHIFT | value
}
/// A pointer to group `g` (generation `gen`), stored in an array of generation `own`.
pub(crate) fn pointer(own: u32, g: u32, gen: u32) -> u32 {
    EXT | own << GEN_SHIFT | gen << CHILD_GEN_SHIFT | g
}
pub(crate) fn with_gen(payload: u32, own: u32) -> u32 {
    (payload & !GEN_MASK) | own << GEN_SHIFT
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip() {
        let l = with_gen(leaf(128, MAX_VALUE), 31);
        assert!(!is_ext(l));
        assert_eq!((own_gen(l), depth(l), value(l)), (31, 128, Some(MAX_VALUE)));
        let p = pointer(7, MAX_GROUPS - 1, 30);
        assert!(is_ext(p));
        assert_eq!(
            (own_gen(p), child(p), child_gen(p)),
            (7, MAX_GROUPS as usize - 1, 30)
        );
        assert_eq!(value(with_gen(0, 3)), None);
    }
}
