//! The experiment of Maeda et al. (docs/algorithms/diffserv.md) in deterministic simulated time.
//!
//! A 5 Mbit/s link (the shaper, no wire overhead), 1000-byte packets, WRR 1:4:5 over AF1,
//! AF2, AF3 (effective shares 0.5 / 2 / 2.5 Mbit/s). AF1 is a 0.6 Mbit/s CBR source (VoIP in
//! the paper) marked by a trTCM (CIR 0.5, PIR 0.6 Mbit/s); AF2 and AF3 are CBR sources above
//! their shares (2.4 and 3.0 Mbit/s), so they stay backlogged and AF1 never gets more than
//! its one packet per 16 ms round.
//!
//! Baseline: RED in every class, thresholds 10 / 20 packets (eq. 3.1 maps 16 ms on this link
//! to 10 packets). Proposal (setting 1, table 2): the sojourn manager on AF1 and AF2, RED on
//! AF3. Measured after 100 s of warm-up over 200 s (the EWMA weights 0.002 need a few
//! seconds at these packet rates).
//!
//! Expected (paper, figure 8 and §4): under RED, AF1's mean sojourn grows to hundreds of ms
//! (about 20 queued packets × 16 ms); under the proposal it stays at least 4× lower. AF1
//! loses at most its excess over its share, (0.6 - 0.5) / 0.6 = 1/6 of its packets
//! (+2 percentage points of tolerance), and keeps at least its 0.5 Mbit/s share (-2 %).
//! Under RED the loss is exactly that excess (±2 pp): the queue sits at RED's forced-drop
//! threshold and AF1 gets exactly one packet per round.
//!
//! Observed, and kept as a check: with CBR overload on AF2 the sojourn manager's slow average
//! (w = 0.002) lets AF2's short queue run empty between forced-drop phases, so AF2 loses more
//! than under RED and the work-conserving WRR hands those slots to AF1 and AF3: AF1 then loses
//! less than its excess. The paper's AF2 is TCP-friendly and backs off instead (its extra loss
//! stays under 1 point there); netsim reproduces that case with real senders.

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use zl_aqm::{AqmParams, PacketMeta, RedParams, SojournParams};
use zl_core::Nanos;
use zl_qos::{
    ClassParams, ClassifierParams, ColorMode, Dequeue, MeterParams, QosEngine, QosParams,
    SchedMode, SchedulerParams, ShaperParams,
};

const PKT: u32 = 1000;
const LINK: u64 = 5_000_000;

fn red() -> AqmParams {
    AqmParams::Red(RedParams {
        min_th: 10.0,
        max_th: 20.0,
        max_p: 0.1,
        w_q: 0.002,
        ecn: false,
        ..RedParams::default()
    })
}

fn sojourn() -> AqmParams {
    AqmParams::Sojourn(SojournParams::setting1())
}

fn class(name: &str, weight: u32, aqm: AqmParams) -> ClassParams {
    ClassParams {
        aqm: Some(aqm),
        ..ClassParams::weighted(name, weight, 100)
    }
}

#[derive(Debug)]
struct Report {
    af1_sojourn_ms: f64,
    af1_loss: f64,
    af1_goodput_bps: f64,
    af2_sojourn_ms: f64,
    af2_loss: f64,
}

fn run(af1: AqmParams, af2: AqmParams, af3: AqmParams) -> Report {
    let mut af1 = class("af1", 1, af1);
    af1.meter = Some(MeterParams::Trtcm {
        cir_bps: 500_000,
        cbs_bytes: 3000,
        pir_bps: 600_000,
        pbs_bytes: 3000,
        mode: ColorMode::ColorBlind,
    });
    let p = QosParams {
        link_rate_bps: None,
        classes: vec![af1, class("af2", 4, af2), class("af3", 5, af3)],
        classifier: ClassifierParams {
            default_class: "af3".into(),
            ..ClassifierParams::default()
        },
        scheduler: SchedulerParams {
            mode: SchedMode::Wrr,
        },
        shaper: Some(ShaperParams {
            rate_bps: LINK,
            burst_bytes: Some(PKT as u64),
            overhead_bytes: 0,
            max_packet_bytes: PKT,
        }),
    };
    let mut e: QosEngine<()> = QosEngine::new(&p).unwrap();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(2005);
    // Source gaps for 1000-byte packets: 0.6, 2.4, 3.0 Mbit/s.
    let gaps = [13_333_333u64, 3_333_333, 2_666_667];
    let dscp = [10u8, 18, 26]; // AF11, AF21, AF31
    let mut next_arrival = [0u64, 1_000_000, 2_000_000];
    let mut next_deq = u64::MAX;
    let warm = Nanos::from_secs(100);
    let end = Nanos::from_secs(300);
    let mut base = None;
    let mut now;
    loop {
        let (src, t_arr) = next_arrival
            .iter()
            .copied()
            .enumerate()
            .min_by_key(|&(_, t)| t)
            .unwrap();
        now = Nanos(t_arr.min(next_deq));
        if base.is_none() && now >= warm {
            base = Some([e.class_stats(0).unwrap(), e.class_stats(1).unwrap()]);
        }
        if now >= end {
            break;
        }
        if t_arr <= next_deq {
            let meta = PacketMeta {
                len: PKT,
                ..PacketMeta::default()
            };
            let _ = e.enqueue(now, &mut rng, Some(dscp[src]), meta, (), |_| {});
            next_arrival[src] += gaps[src];
            if next_deq == u64::MAX {
                next_deq = now.0;
            }
        } else {
            next_deq = match e.dequeue(now) {
                Dequeue::Packet(_) => now.0,
                Dequeue::Hold { until } => until.0,
                Dequeue::Empty => u64::MAX,
            };
        }
    }
    let base = base.unwrap();
    let secs = (end - warm).as_secs_f64();
    let delta = |c: usize| {
        let (a, b) = (base[c].total(), e.class_stats(c).unwrap().total());
        let sojourn_ms = (b.sojourn.sum_ns - a.sojourn.sum_ns) as f64
            / (b.sojourn.count - a.sojourn.count) as f64
            * 1e-6;
        let loss = (b.drops() - a.drops()) as f64 / (b.arrivals() - a.arrivals()) as f64;
        let goodput = (b.dequeued_bytes - a.dequeued_bytes) as f64 * 8.0 / secs;
        (sojourn_ms, loss, goodput)
    };
    let (af1_sojourn_ms, af1_loss, af1_goodput_bps) = delta(0);
    let (af2_sojourn_ms, af2_loss, _) = delta(1);
    Report {
        af1_sojourn_ms,
        af1_loss,
        af1_goodput_bps,
        af2_sojourn_ms,
        af2_loss,
    }
}

#[test]
fn sojourn_manager_keeps_af1_delay_low_behind_wrr() {
    let baseline = run(red(), red(), red());
    let proposal = run(sojourn(), sojourn(), red());
    eprintln!("RED everywhere: {baseline:?}");
    eprintln!("sojourn (setting 1) on AF1/AF2: {proposal:?}");

    assert!(
        baseline.af1_sojourn_ms > 200.0,
        "under RED AF1's sojourn grows to hundreds of ms: {baseline:?}"
    );
    assert!(
        proposal.af1_sojourn_ms * 4.0 < baseline.af1_sojourn_ms,
        "the sojourn manager keeps AF1 at least 4x lower: {proposal:?} vs {baseline:?}"
    );
    let excess = (0.6 - 0.5) / 0.6;
    assert!(
        (baseline.af1_loss - excess).abs() < 0.02,
        "under RED AF1 loses exactly its excess: {baseline:?}"
    );
    assert!(
        (baseline.af1_goodput_bps / 500_000.0 - 1.0).abs() < 0.02,
        "under RED AF1 gets exactly its share: {baseline:?}"
    );
    assert!(
        proposal.af1_loss < excess + 0.02,
        "AF1 loses at most its excess over the share: {proposal:?}"
    );
    assert!(
        proposal.af1_goodput_bps > 500_000.0 * 0.98,
        "AF1 still gets its share: {proposal:?}"
    );
    assert!(
        proposal.af2_sojourn_ms < baseline.af2_sojourn_ms,
        "{proposal:?}"
    );
    // The CBR-overload artefact described above: AF2 pays for its short queue.
    assert!(proposal.af2_loss > baseline.af2_loss, "{proposal:?}");
}

#[test]
fn setting2_lowers_af1_sojourn_further() {
    // Table 3: stricter yellow / red thresholds for AF1, AF2 all 16 / 32 ms.
    let s1 = run(sojourn(), sojourn(), red());
    let s2 = run(
        AqmParams::Sojourn(SojournParams::setting2_af1()),
        AqmParams::Sojourn(SojournParams::setting2_af2()),
        red(),
    );
    eprintln!("setting 1: {s1:?}");
    eprintln!("setting 2: {s2:?}");
    assert!(s2.af1_sojourn_ms < s1.af1_sojourn_ms, "{s2:?} vs {s1:?}");
    assert!(s2.af1_loss < (0.6 - 0.5) / 0.6 + 0.02, "{s2:?}");
}
