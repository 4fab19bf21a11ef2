//! Arbitrary and corrupted frames: `parse` never panics, a successful parse satisfies the
//! offset contract, and every rewrite then succeeds on that frame and keeps it parseable with
//! a valid IPv4 header checksum.

use proptest::prelude::*;
use zl_wire::vectors::*;
use zl_wire::*;

const SAMPLES: [&[u8]; 6] = [
    &IPV4_TCP,
    &VLAN_IPV4_OPTIONS_UDP,
    &QINQ_IPV4_LATER_FRAGMENT,
    &IPV6_CC_EXT_UDP,
    &IPV6_EXT_CHAIN_TCP,
    &IPV6_LATER_FRAGMENT,
];

/// The contract of `PacketInfo`, checked on every successful parse.
fn check_contract(frame: &[u8], info: &PacketInfo) {
    assert!(info.l3_offset + info.ip_header_len <= info.ip_end());
    assert!(info.ip_end() <= frame.len());
    assert!(info.l3_offset + info.ip_header_len <= info.l4_offset);
    assert!(info.l4_offset <= info.ip_end());
    if let Some(ext) = info.cc_ext {
        assert!(ext.offset + cc_ext::HEADER_LEN <= info.l4_offset);
    }
    if info.ports.is_some() {
        assert!(info.l4_offset + 8 <= info.ip_end());
    }
    if info.ip_version == IpVersion::V4 {
        assert!(checksum::verifies(
            &frame[info.l3_offset..info.l3_offset + info.ip_header_len]
        ));
    }
}

/// Applies every rewrite; each must succeed, and the result must parse to the kept info.
fn check_rewrites(frame: &[u8], info: &PacketInfo, dscp: u8) {
    let cfg = ParseConfig::default();
    let mut frame = frame.to_vec();
    let mut info = *info;
    mark(&mut frame, &mut info).unwrap();
    set_ce(&mut frame, &mut info).unwrap();
    set_dscp(&mut frame, &mut info, dscp).unwrap();
    decrement_ttl(&mut frame, &mut info).unwrap();
    set_macs(&mut frame, MacAddr([1; 6]), MacAddr([2; 6])).unwrap();
    let reparsed = parse(&frame, &cfg).unwrap();
    assert_eq!(reparsed, info);
    check_contract(&frame, &reparsed);
}

fn corrupted() -> impl Strategy<Value = Vec<u8>> {
    (
        0..SAMPLES.len(),
        prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4),
        any::<prop::sample::Index>(),
        prop::collection::vec(any::<u8>(), 0..16),
    )
        .prop_map(|(which, writes, cut, tail)| {
            let mut frame = SAMPLES[which].to_vec();
            for (at, byte) in writes {
                let i = at.index(frame.len());
                frame[i] = byte;
            }
            frame.truncate(cut.index(frame.len() + 1));
            frame.extend_from_slice(&tail);
            frame
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn random_bytes_never_panic(frame in prop::collection::vec(any::<u8>(), 0..256),
                                vlan in any::<bool>(), max_ext in 0u8..10, cc_nh in any::<u8>()) {
        // Any cc_ext_next_header, even one `validate` rejects (6 makes TCP look like the
        // extension header): wrong results are allowed then, panics are not.
        let cfg = ParseConfig {
            vlan,
            max_ext_headers: max_ext,
            cc_ext_next_header: cc_nh,
            ..ParseConfig::default()
        };
        if let Ok(info) = parse(&frame, &cfg) {
            check_contract(&frame, &info);
        }
    }

    #[test]
    fn corrupted_samples_never_panic(frame in corrupted(), dscp in 0u8..64) {
        if let Ok(info) = parse(&frame, &ParseConfig::default()) {
            check_contract(&frame, &info);
            check_rewrites(&frame, &info, dscp);
        }
    }

    #[test]
    fn rewrites_on_a_foreign_buffer_never_panic(which in 0..SAMPLES.len(),
                                                other in prop::collection::vec(any::<u8>(), 0..128),
                                                dscp in any::<u8>()) {
        let mut info = parse(SAMPLES[which], &ParseConfig::default()).unwrap();
        let mut other = other;
        let _ = mark(&mut other, &mut info);
        let _ = set_dscp(&mut other, &mut info, dscp);
        let _ = decrement_ttl(&mut other, &mut info);
        let _ = set_macs(&mut other, MacAddr::default(), MacAddr::default());
    }
}

#[test]
fn samples_satisfy_the_contract() {
    for (i, frame) in SAMPLES.iter().enumerate() {
        let info = parse(frame, &ParseConfig::default()).unwrap();
        check_contract(frame, &info);
        for dscp in [0, 46, 63] {
            check_rewrites(frame, &info, dscp);
        }
        assert!(info.ip_end() <= frame.len(), "sample {i}");
    }
}

/// `decrement_ttl_plain_ipv4` on a frame `parse_into_common` took, and `decrement_ttl_plain`
/// on its `PlainIpv4`, leave the same frame, headers and outcome as `decrement_ttl`.
fn check_plain_decrement(frame: &[u8]) {
    let mut taken = None;
    if !parse_into_common(frame, &ParseConfig::default(), &mut taken) {
        return;
    }
    let mut info = taken.unwrap();
    let (mut f1, mut f2) = (frame.to_vec(), frame.to_vec());
    let mut i2 = info;
    let mut plain = PlainIpv4::parse(frame, &ParseConfig::default()).expect("taken");
    assert_eq!(plain.info(), info, "the plain form is the same parse");
    let mut f3 = frame.to_vec();
    let r1 = decrement_ttl(&mut f1, &mut info);
    let r2 = decrement_ttl_plain_ipv4(&mut f2, &mut i2);
    let r3 = decrement_ttl_plain(&mut f3, &mut plain);
    assert_eq!(r1, r2);
    assert_eq!(f1, f2);
    assert_eq!(info, i2);
    assert_eq!(r1, r3);
    assert_eq!(f1, f3);
    assert_eq!(info, plain.info());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn plain_ttl_decrement_is_the_general_one(frame in corrupted()) {
        check_plain_decrement(&frame);
    }
}

#[test]
fn plain_ttl_decrement_is_the_general_one_for_every_ttl() {
    let mut taken = 0;
    for ttl in 0..=255u8 {
        for checksum in [0x0000u16, 0x0001, 0x00ff, 0xfeff, 0xff00, 0xfffe, 0xffff] {
            // First with an arbitrary checksum field (mostly one the plain path refuses),
            // then with the header checksum fixed (taken).
            let mut f = IPV4_TCP.to_vec();
            f[22] = ttl;
            f[24..26].copy_from_slice(&checksum.to_be_bytes());
            check_plain_decrement(&f);
            f[24..26].fill(0);
            let c = checksum::checksum(&f[14..34]);
            f[24..26].copy_from_slice(&c.to_be_bytes());
            check_plain_decrement(&f);
            taken += usize::from(parse_into_common(&f, &ParseConfig::default(), &mut None));
        }
    }
    assert_eq!(
        taken,
        256 * 7,
        "every frame with its checksum fixed is a plain one"
    );
}
