//! The per-color sojourn-time manager (docs/algorithms/sojourn.md): thresholds and probabilities of
//! settings 1 and 2, the head-of-line sojourn EWMA, eq. (3.1).

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use zl_aqm::sojourn::threshold_time_from_packets;
use zl_aqm::{
    Admission, Arrival, Color, Nanos, PacketMeta, QueueView, Sojourn, SojournParams, Verdict,
};

/// A queue whose head packet has waited `wait_ms` at `now`.
fn queue_at(now: Nanos, wait_ms: f64) -> QueueView {
    QueueView {
        len_packets: 3,
        len_bytes: 3000,
        capacity_packets: 100,
        capacity_bytes: u64::MAX,
        head_enqueued_at: Some(now - Nanos((wait_ms * 1e6) as u64)),
        idle_since: None,
    }
}

fn pkt(color: Color) -> PacketMeta {
    PacketMeta {
        len: 1000,
        color,
        ..PacketMeta::default()
    }
}

/// Holds `avg_time` at `avg_ms` (head sojourn equal to it) and measures each color's early
/// and forced drop fractions over `n` arrivals.
fn rates(params: SojournParams, avg_ms: f64, color: Color, n: u32) -> (f64, f64) {
    let mut s = Admission::new(Sojourn::new(params.validate().unwrap()));
    s.policy_mut().set_avg_time_ms(avg_ms);
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(13 + color.index() as u64);
    let now = Nanos::from_secs(10);
    for _ in 0..n {
        s.admit(
            &Arrival::new(now, &queue_at(now, avg_ms), &pkt(color)),
            &mut rng,
        );
        assert!((s.policy().avg_time_ms() - avg_ms).abs() < 1e-6 * avg_ms);
    }
    let st = s.stats();
    (
        st.early_drops as f64 / n as f64,
        st.forced_drops as f64 / n as f64,
    )
}

fn check_color(params: SojournParams, color: Color, min_ms: f64, max_ms: f64, p: f64) {
    let cfg = params.validate().unwrap();
    let th = cfg.thresholds(color);
    assert_eq!(th.min_th_ns, min_ms * 1e6, "{color} min_th");
    assert_eq!(th.max_th_ns, max_ms * 1e6, "{color} max_th");
    assert_eq!(th.p, p, "{color} p");
    let n = 100_000;
    assert_eq!(
        rates(params, 0.9 * min_ms, color, n),
        (0.0, 0.0),
        "{color} below min_th"
    );
    let (early, forced) = rates(params, 0.5 * (min_ms + max_ms), color, n);
    assert_eq!(forced, 0.0);
    let sd = (p * (1.0 - p) / n as f64).sqrt();
    assert!(
        (early - p).abs() < 5.0 * sd + 1e-12,
        "{color}: early {early} vs p {p}"
    );
    assert_eq!(
        rates(params, max_ms, color, 1000),
        (0.0, 1.0),
        "{color} at max_th"
    );
}

#[test]
fn setting_1_table_2() {
    let s1 = SojournParams::setting1();
    assert_eq!(SojournParams::default(), s1);
    check_color(s1, Color::Green, 16.0, 32.0, 0.01);
    check_color(s1, Color::Yellow, 8.0, 16.0, 0.10);
    check_color(s1, Color::Red, 4.0, 8.0, 0.20);
}

#[test]
fn setting_2_table_3() {
    let af1 = SojournParams::setting2_af1();
    check_color(af1, Color::Green, 16.0, 32.0, 0.01);
    check_color(af1, Color::Yellow, 4.0, 8.0, 0.20);
    check_color(af1, Color::Red, 2.0, 4.0, 0.20);
    let af2 = SojournParams::setting2_af2();
    for c in Color::ALL {
        check_color(af2, c, 16.0, 32.0, 0.01);
    }
}

#[test]
fn same_average_different_colors_different_verdicts() {
    // Setting 1 at 10 ms: green below its min, yellow probabilistic, red forced.
    let s1 = SojournParams::setting1();
    assert_eq!(rates(s1, 10.0, Color::Green, 10_000), (0.0, 0.0));
    assert_eq!(rates(s1, 10.0, Color::Red, 10_000), (0.0, 1.0));
    let (early, forced) = rates(s1, 10.0, Color::Yellow, 100_000);
    assert_eq!(forced, 0.0);
    assert!((early - 0.1).abs() < 0.005);
}

#[test]
fn avg_time_is_an_ewma_of_the_head_of_line_sojourn() {
    let w: f64 = 0.002;
    let mut s = Admission::new(Sojourn::new(SojournParams::setting1().validate().unwrap()));
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(14);
    let mut now = Nanos::from_secs(1);
    // The head has waited 5 ms at every arrival.
    for _ in 0..500 {
        now += Nanos::from_millis(1);
        s.admit(
            &Arrival::new(now, &queue_at(now, 5.0), &pkt(Color::Green)),
            &mut rng,
        );
    }
    let want = 5.0 * (1.0 - (1.0 - w).powi(500));
    assert!(
        (s.policy().avg_time_ms() - want).abs() < 1e-9,
        "{} vs {want}",
        s.policy().avg_time_ms()
    );
    // An empty queue measures 0: the average decays by (1 - w) per arrival.
    let before = s.policy().avg_time_ms();
    let empty = QueueView {
        head_enqueued_at: None,
        ..queue_at(now, 0.0)
    };
    for _ in 0..100 {
        s.admit(&Arrival::new(now, &empty, &pkt(Color::Green)), &mut rng);
    }
    let want = before * (1.0 - w).powi(100);
    assert!((s.policy().avg_time_ms() - want).abs() < 1e-9);
}

#[test]
fn tail_drop_wins_over_a_low_average() {
    let mut s = Admission::new(Sojourn::new(SojournParams::setting1().validate().unwrap()));
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(15);
    let now = Nanos::from_secs(1);
    let mut full = queue_at(now, 0.0);
    full.capacity_packets = 3;
    assert_eq!(
        s.admit(&Arrival::new(now, &full, &pkt(Color::Green)), &mut rng),
        Verdict::TailDrop
    );
}

#[test]
fn eq_3_1_threshold_from_red_packets() {
    // docs/algorithms/sojourn.md: at 5 Mb/s a 1000-byte packet takes 1.6 ms, so 10 RED packets are
    // 16 ms.
    assert!((threshold_time_from_packets(1000, 5_000_000, 1.0) - 1.6).abs() < 1e-12);
    assert!((threshold_time_from_packets(1000, 5_000_000, 10.0) - 16.0).abs() < 1e-12);
    assert!((threshold_time_from_packets(1000, 5_000_000, 20.0) - 32.0).abs() < 1e-12);
}
