//! RFC 2697 srTCM and RFC 2698 trTCM: byte-exact boundaries (as DPDK's `test_meter.c`
//! checks at CBS/PBS ± 1), exact long-run rates, color-aware monotonicity, validation.

use proptest::prelude::*;
use zl_core::{Color, Nanos};
use zl_qos::{ColorMode, MeterParams, Srtcm, Trtcm, MAX_BURST_BYTES, MAX_RATE_BPS};

const CIR: u64 = 1_000_000; // 1 Mbit/s = 125 000 bytes/s
const PIR: u64 = 2_000_000;
const CBS: u64 = 4_000;
const EBS: u64 = 8_000;
const PBS: u64 = 8_000;

fn srtcm(mode: ColorMode) -> Srtcm {
    Srtcm::new(CIR, CBS, EBS, mode)
}

fn trtcm(mode: ColorMode) -> Trtcm {
    Trtcm::new(CIR, CBS, PIR, PBS, mode)
}

#[test]
fn srtcm_blind_boundaries_at_cbs_and_ebs() {
    let t = Nanos::ZERO;
    let g = Color::Green;
    assert_eq!(
        srtcm(ColorMode::ColorBlind).color(t, CBS as u32 - 1, g),
        Color::Green
    );
    assert_eq!(
        srtcm(ColorMode::ColorBlind).color(t, CBS as u32, g),
        Color::Green
    );
    assert_eq!(
        srtcm(ColorMode::ColorBlind).color(t, CBS as u32 + 1, g),
        Color::Yellow
    );
    assert_eq!(
        srtcm(ColorMode::ColorBlind).color(t, EBS as u32, g),
        Color::Yellow
    );
    assert_eq!(
        srtcm(ColorMode::ColorBlind).color(t, EBS as u32 + 1, g),
        Color::Red
    );
}

#[test]
fn trtcm_blind_boundaries_at_cbs_and_pbs() {
    let t = Nanos::ZERO;
    let g = Color::Green;
    assert_eq!(
        trtcm(ColorMode::ColorBlind).color(t, CBS as u32 - 1, g),
        Color::Green
    );
    assert_eq!(
        trtcm(ColorMode::ColorBlind).color(t, CBS as u32, g),
        Color::Green
    );
    assert_eq!(
        trtcm(ColorMode::ColorBlind).color(t, CBS as u32 + 1, g),
        Color::Yellow
    );
    assert_eq!(
        trtcm(ColorMode::ColorBlind).color(t, PBS as u32, g),
        Color::Yellow
    );
    assert_eq!(
        trtcm(ColorMode::ColorBlind).color(t, PBS as u32 + 1, g),
        Color::Red
    );
}

#[test]
fn refill_is_byte_exact() {
    // Empty C, then wait exactly the time to earn 1000 bytes at 1 Mbit/s = 8 ms.
    let mut m = trtcm(ColorMode::ColorBlind);
    assert_eq!(m.color(Nanos::ZERO, CBS as u32, Color::Green), Color::Green);
    assert_eq!(m.tokens_bytes().0, 0);
    let t = Nanos::from_millis(8);
    // 1001 bytes are one byte short in C: yellow (P holds 4000 + 2000 bytes).
    assert_eq!(m.clone().color(t, 1001, Color::Green), Color::Yellow);
    assert_eq!(m.clone().color(t, 1000, Color::Green), Color::Green);
    // One nanosecond earlier C holds 1000 bytes less 125 bytes/s × 1 ns: not enough.
    assert_eq!(
        m.color(Nanos(t.0 - 1), 1000, Color::Green),
        Color::Yellow,
        "a fraction of a byte short must not pass"
    );
}

/// Offers `rate` bit/s of `len`-byte packets for `secs` seconds; returns bytes per color.
fn offer(mut meter: impl FnMut(Nanos, u32) -> Color, rate: u64, len: u32, secs: u64) -> [u64; 3] {
    let gap = len as u64 * 8 * 1_000_000_000 / rate;
    let mut bytes = [0u64; 3];
    let mut t = 0;
    while t < secs * 1_000_000_000 {
        bytes[meter(Nanos(t), len).index()] += len as u64;
        t += gap;
    }
    bytes
}

#[test]
fn trtcm_long_run_rates_are_exact_within_two_packets() {
    // 3 Mbit/s of 1000-byte packets for 100 s: green gets CBS + CIR·T, green + yellow get
    // PBS + PIR·T, each to within two packets (one that did not fit, and the credit of the
    // last inter-arrival gap, which ends before T).
    let mut m = trtcm(ColorMode::ColorBlind);
    let secs = 100;
    let b = offer(|t, l| m.color(t, l, Color::Green), 3_000_000, 1000, secs);
    let green_max = CBS + CIR / 8 * secs;
    let gy_max = PBS + PIR / 8 * secs;
    assert!(b[0] <= green_max && green_max - b[0] < 2000, "green {b:?}");
    assert!(
        b[0] + b[1] <= gy_max && gy_max - b[0] - b[1] < 2000,
        "green+yellow {b:?}"
    );
    // The rest, about a third, is red.
    let red_share = b[2] as f64 / b.iter().sum::<u64>() as f64;
    assert!(
        (red_share - 1.0 / 3.0).abs() < 0.001,
        "red share {red_share}"
    );
}

#[test]
fn srtcm_long_run_rates_are_exact_within_two_packets() {
    // Saturated at 3× CIR, C never overflows into E, so yellow is E's initial fill only.
    let mut m = srtcm(ColorMode::ColorBlind);
    let secs = 100;
    let b = offer(|t, l| m.color(t, l, Color::Green), 3_000_000, 1000, secs);
    let green_max = CBS + CIR / 8 * secs;
    assert!(b[0] <= green_max && green_max - b[0] < 2000, "green {b:?}");
    assert_eq!(b[1], EBS, "yellow = E's initial content");
    // At half of CIR everything is green and E stays full.
    let mut m = srtcm(ColorMode::ColorBlind);
    let b = offer(|t, l| m.color(t, l, Color::Green), CIR / 2, 1000, 10);
    assert_eq!((b[1], b[2]), (0, 0));
    assert_eq!(m.tokens_bytes().1, EBS);
}

#[test]
fn color_aware_yellow_never_becomes_green() {
    let mut s = srtcm(ColorMode::ColorAware);
    let mut t = trtcm(ColorMode::ColorAware);
    for i in 0..1000u64 {
        let now = Nanos::from_millis(i * 100); // buckets always full
        assert_eq!(s.color(now, 100, Color::Yellow), Color::Yellow);
        assert_eq!(t.color(now, 100, Color::Yellow), Color::Yellow);
        assert_eq!(s.color(now, 100, Color::Red), Color::Red);
        assert_eq!(t.color(now, 100, Color::Red), Color::Red);
    }
    // Color-blind ignores the pre-color.
    assert_eq!(
        trtcm(ColorMode::ColorBlind).color(Nanos::ZERO, 100, Color::Red),
        Color::Green
    );
    // Color-aware yellow still spends P, so it can push later packets to red.
    let mut t = trtcm(ColorMode::ColorAware);
    assert_eq!(
        t.color(Nanos::ZERO, PBS as u32, Color::Yellow),
        Color::Yellow
    );
    assert_eq!(t.color(Nanos::ZERO, 1, Color::Green), Color::Red);
}

proptest! {
    #[test]
    fn color_aware_never_improves_a_color(
        pkts in proptest::collection::vec((0u64..5_000_000, 1u32..9_000, 0usize..3), 1..200)
    ) {
        let mut s = srtcm(ColorMode::ColorAware);
        let mut t = trtcm(ColorMode::ColorAware);
        let mut now = 0;
        for (gap, len, pre) in pkts {
            now += gap;
            let pre = Color::ALL[pre];
            prop_assert!(s.color(Nanos(now), len, pre) >= pre);
            prop_assert!(t.color(Nanos(now), len, pre) >= pre);
        }
    }
}

#[test]
fn absurd_lengths_are_red_not_a_panic() {
    let mut t = Trtcm::new(
        MAX_RATE_BPS,
        MAX_BURST_BYTES,
        MAX_RATE_BPS,
        MAX_BURST_BYTES,
        ColorMode::ColorBlind,
    );
    let mut s = Srtcm::new(
        MAX_RATE_BPS,
        MAX_BURST_BYTES,
        MAX_BURST_BYTES,
        ColorMode::ColorBlind,
    );
    assert_eq!(t.color(Nanos::MAX, u32::MAX, Color::Green), Color::Red);
    assert_eq!(s.color(Nanos::MAX, u32::MAX, Color::Green), Color::Red);
    // And a long idle period at the top rate refills without overflow.
    assert_eq!(t.color(Nanos::MAX, 1500, Color::Green), Color::Green);
}

#[test]
fn validation_names_the_keys() {
    let e = MeterParams::Trtcm {
        cir_bps: 2_000_000,
        cbs_bytes: 1500,
        pir_bps: 1_000_000,
        pbs_bytes: 1500,
        mode: ColorMode::ColorBlind,
    }
    .build()
    .unwrap_err();
    assert_eq!(e.key, "pir_bps");
    assert!(e.reason.contains("pir_bps (1000000)") && e.reason.contains("cir_bps (2000000)"));
    let e = MeterParams::Srtcm {
        cir_bps: 1,
        cbs_bytes: 1500,
        ebs_bytes: 0,
        mode: ColorMode::ColorBlind,
    }
    .build()
    .unwrap_err();
    assert_eq!(e.key, "ebs_bytes");
    let p: MeterParams = toml::from_str(
        "kind = 'trtcm'\ncir_bps = 500000\ncbs_bytes = 3000\npir_bps = 600000\npbs_bytes = 3000\n\
         mode = 'color-aware'",
    )
    .unwrap();
    assert!(p.build().is_ok());
}
