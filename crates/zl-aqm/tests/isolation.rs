//! ZL-RED with flow isolation (docs/algorithms/zl-isolation.md) on deterministic traces: a
//! flood's penalty-queue share against the fair share, the responsive flows' queue beside it,
//! the hysteresis (entry, release, no flapping), two floods splitting the penalty queue, a full
//! box, per-host isolation (one host with 20 flows against 4 hosts with one) and CoDel on the
//! normal queue.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use zl_aqm::{
    AqmParams, BoxState, BuildContext, Discipline, FlowId, IsolateBy, IsolationParams, Nanos, Next,
    PacketMeta, QueueDiscipline, ZlRedParams,
};
use zl_zombie::ZombieParams;

/// Packets of 1000 bytes on a 10 Mb/s link: 1250 a second.
const LINK_PPS: f64 = 1250.0;
const LEN: u32 = 1000;

#[derive(Clone, Copy)]
struct Flow {
    id: u64,
    host: u16,
    pps: f64,
    start: f64,
    stop: f64,
}

fn flow(id: u64, pps: f64) -> Flow {
    Flow {
        id,
        host: id as u16,
        pps,
        start: 0.0,
        stop: f64::MAX,
    }
}

struct Run {
    /// Packets each flow got through, over the measured span.
    sent: Vec<u64>,
    /// Mean sojourn of each flow's packets over the span, ms.
    sojourn_ms: Vec<f64>,
    disc: QueueDiscipline<u32>,
    /// When each flow was first seen penalized, and whether a flow left the box after.
    penalized_at: Vec<Option<f64>>,
    released_at: Vec<Option<f64>>,
}

fn isolated(iso: IsolationParams, b: u32) -> QueueDiscipline<u32> {
    let zl = ZlRedParams {
        a: 10.0,
        isolation: Some(iso),
        zombie: ZombieParams {
            m: 1000,
            ..ZombieParams::default()
        },
        ..ZlRedParams::default()
    };
    let ctx = BuildContext::new(10_000_000, b).with_buffer(b, u64::MAX);
    AqmParams::ZlRed(zl)
        .build_discipline(&ctx)
        .unwrap()
        .expect("isolation holds its queues")
}

/// Drives `disc` with `flows` (constant rates with a 20 % jitter per packet) on the link for
/// `secs`, measuring over `[from, secs)`.
fn run(mut disc: QueueDiscipline<u32>, flows: &[Flow], secs: f64, from: f64, seed: u64) -> Run {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let dt = 1e-4;
    let mut next: Vec<f64> = flows
        .iter()
        .map(|f| f.start + rng.random::<f64>() / f.pps)
        .collect();
    let mut link_credit = 0.0;
    let mut sent = vec![0u64; flows.len()];
    let mut soj = vec![0.0f64; flows.len()];
    let mut penalized_at = vec![None; flows.len()];
    let mut released_at = vec![None; flows.len()];
    let mut t = 0.0;
    let mut discards = 0u64;
    while t < secs {
        let now = Nanos::from_secs_f64(t);
        for (i, f) in flows.iter().enumerate() {
            while next[i] <= t && t < f.stop {
                let meta = PacketMeta {
                    len: LEN,
                    flow: FlowId(f.id.wrapping_mul(0x9E37_79B9_7F4A_7C15)),
                    src_host: f.host,
                    ..PacketMeta::default()
                };
                let _ = disc.enqueue(now, &meta, None, i as u32, &mut rng, |_| {}, &mut |_, _| {
                    discards += 1
                });
                next[i] += (0.8 + 0.4 * rng.random::<f64>()) / f.pps;
            }
        }
        link_credit += LINK_PPS * dt;
        while link_credit >= 1.0 {
            match disc.dequeue(now, &mut rng, &mut |_, _| discards += 1) {
                Next::Packet(d) => {
                    link_credit -= 1.0;
                    let i = d.queued.item as usize;
                    if t >= from {
                        sent[i] += 1;
                        soj[i] += (now - d.queued.enqueued_at).as_millis_f64();
                    }
                }
                _ => {
                    link_credit = link_credit.min(1.0);
                    break;
                }
            }
        }
        if let QueueDiscipline::Isolated(iso) = &disc {
            for (i, f) in flows.iter().enumerate() {
                let key = iso.config().by.key(&PacketMeta {
                    flow: FlowId(f.id.wrapping_mul(0x9E37_79B9_7F4A_7C15)),
                    src_host: f.host,
                    ..PacketMeta::default()
                });
                let boxed = iso.boxed_flow(key);
                let pen = boxed.is_some_and(|b| b.state == BoxState::Penalized);
                if pen && penalized_at[i].is_none() {
                    penalized_at[i] = Some(t);
                }
                if !pen && penalized_at[i].is_some() && released_at[i].is_none() {
                    released_at[i] = Some(t);
                }
            }
        }
        t += dt;
    }
    let sojourn_ms = soj
        .iter()
        .zip(&sent)
        .map(|(s, &n)| if n > 0 { s / n as f64 } else { 0.0 })
        .collect();
    Run {
        sent,
        sojourn_ms,
        disc,
        penalized_at,
        released_at,
    }
}

fn rate(r: &Run, i: usize, span: f64) -> f64 {
    r.sent[i] as f64 / span
}

/// Twenty flows at about their share (0.9 of the link together) and a flood offering half the
/// link more. Under isolation the flood is penalized within a second of the estimate's warm-up
/// and held to about its fair share (1250 / 21 = 60 packets/s) and the others keep theirs, with
/// a short queue.
#[test]
fn a_flood_is_held_to_its_fair_share_and_the_others_keep_theirs() {
    let mut flows: Vec<Flow> = (0..20).map(|i| flow(i, 0.9 * LINK_PPS / 20.0)).collect();
    flows.push(flow(99, LINK_PPS / 2.0));
    let fair = LINK_PPS / 21.0;
    let r = run(
        isolated(IsolationParams::default(), 300),
        &flows,
        30.0,
        10.0,
        1,
    );
    let flood = rate(&r, 20, 20.0);
    assert!(
        flood < 1.25 * fair && flood > 0.5 * fair,
        "flood {flood} pkt/s against a fair share of {fair}"
    );
    // The estimate is trusted after three turnovers of the list, 3 M / p_swap = 12 000 arrivals
    // (6.9 s at these 1750 packets/s); then five windows above twice the fair share.
    let first = r.penalized_at[20].expect("the flood is penalized");
    assert!((6.9..7.6).contains(&first), "penalized at {first} s");
    for i in 0..20 {
        let got = rate(&r, i, 20.0);
        assert!(got > 0.95 * 0.9 * LINK_PPS / 20.0, "flow {i}: {got} pkt/s");
        assert!(r.penalized_at[i].is_none(), "flow {i} penalized");
    }
    let normal_sojourn = r.sojourn_ms[..20].iter().sum::<f64>() / 20.0;
    assert!(normal_sojourn < 10.0, "normal sojourn {normal_sojourn} ms");
    let QueueDiscipline::Isolated(iso) = &r.disc else {
        unreachable!()
    };
    assert_eq!(iso.stats().penalized, 1, "{:?}", iso.stats());
    // The estimate N, refined for the flood, is near the 21 flows there are (1/P(t) alone
    // reads about 7).
    assert!(
        (15.0..35.0).contains(&iso.flows_estimate()),
        "N = {}",
        iso.flows_estimate()
    );
}

/// Hysteresis: the flood stops at 10 s and is released within a few windows of its last
/// packets, once; a flow hovering between `leave` and `enter` never enters; one penalized
/// whose rate drops below `leave` only every other window is never released (no flapping).
#[test]
fn hysteresis_releases_once_and_never_flaps() {
    let mut flows: Vec<Flow> = (0..20).map(|i| flow(i, LINK_PPS / 20.0)).collect();
    flows.push(Flow {
        stop: 10.0,
        ..flow(99, LINK_PPS / 2.0)
    });
    let r = run(
        isolated(IsolationParams::default(), 300),
        &flows,
        14.0,
        0.0,
        2,
    );
    let released = r.released_at[20].expect("released after it stops");
    // Its queue drains, then three calm 100 ms windows.
    assert!(
        (10.25..11.0).contains(&released),
        "released at {released} s"
    );
    let QueueDiscipline::Isolated(iso) = &r.disc else {
        unreachable!()
    };
    assert_eq!(iso.stats().penalized, 1);
    assert_eq!(iso.stats().released, 1);
    let eps = iso.episodes();
    assert_eq!(eps.len(), 1);
    assert!(eps[0].released_at.is_some());
}

/// A flow at 1.5 times its share (between `leave` = 1.25 and `enter` = 2) is never penalized,
/// however often eq. (4) flags it.
#[test]
fn a_flow_between_leave_and_enter_is_not_penalized() {
    let mut flows: Vec<Flow> = (0..20).map(|i| flow(i, LINK_PPS / 21.0)).collect();
    flows.push(flow(99, 1.5 * LINK_PPS / 21.0));
    let r = run(
        isolated(IsolationParams::default(), 300),
        &flows,
        20.0,
        5.0,
        3,
    );
    assert!(
        r.penalized_at.iter().all(Option::is_none),
        "{:?}",
        r.penalized_at
    );
}

/// Two floods, at 4 and 12 times the fair share, split the penalty queue: each gets about the
/// fair share, not shares in proportion to what it offers.
#[test]
fn two_floods_split_the_penalty_queue_evenly() {
    let mut flows: Vec<Flow> = (0..20).map(|i| flow(i, 0.85 * LINK_PPS / 20.0)).collect();
    let fair = LINK_PPS / 22.0;
    flows.push(flow(98, 4.0 * fair));
    flows.push(flow(99, 12.0 * fair));
    let r = run(
        isolated(IsolationParams::default(), 300),
        &flows,
        30.0,
        10.0,
        4,
    );
    let (a, b) = (rate(&r, 20, 20.0), rate(&r, 21, 20.0));
    assert!(a < 1.3 * fair && b < 1.3 * fair, "{a} {b} against {fair}");
    assert!((a / b - 1.0).abs() < 0.35, "{a} vs {b}");
}

/// With room for one flow in the box, a second flood stays in the normal queue under ZL-RED's
/// raised probability, counted as `box_full`.
#[test]
fn a_full_box_leaves_further_floods_to_zl_red() {
    let mut flows: Vec<Flow> = (0..20).map(|i| flow(i, LINK_PPS / 20.0)).collect();
    flows.push(flow(98, LINK_PPS / 3.0));
    flows.push(flow(99, LINK_PPS / 3.0));
    let iso = IsolationParams {
        max_flows: 1,
        ..IsolationParams::default()
    };
    let r = run(isolated(iso, 300), &flows, 10.0, 5.0, 5);
    let QueueDiscipline::Isolated(iso) = &r.disc else {
        unreachable!()
    };
    assert!(iso.stats().box_full > 0);
    assert_eq!(iso.penalized_count(), 1);
}

/// Per-host isolation (`by = "srchost"`): one host with 20 flows (each below a flow's share)
/// against four hosts with one flow each. Isolated by flow, the big host keeps 20 flows' worth
/// of the link; isolated by host, it is penalized as one host and held to a host's share.
#[test]
fn per_host_isolation_holds_a_host_with_twenty_flows_to_one_share() {
    let mut flows: Vec<Flow> = (0..20)
        .map(|i| Flow {
            host: 500,
            ..flow(i, 0.6 * LINK_PPS / 20.0)
        })
        .collect();
    for h in 0..4u16 {
        flows.push(Flow {
            host: 600 + h,
            ..flow(100 + u64::from(h), 0.3 * LINK_PPS)
        });
    }
    let big = |r: &Run| (0..20).map(|i| rate(r, i, 20.0)).sum::<f64>() / LINK_PPS;
    let by_host = IsolationParams {
        by: IsolateBy::SrcHost,
        ..IsolationParams::default()
    };
    let host = run(isolated(by_host, 300), &flows, 30.0, 10.0, 6);
    let by_flow = run(
        isolated(IsolationParams::default(), 300),
        &flows,
        30.0,
        10.0,
        6,
    );
    let (h, f) = (big(&host), big(&by_flow));
    assert!(h < 0.25, "by host: the 20-flow host got {h} of the link");
    assert!(f > 0.4, "by flow: the 20-flow host got {f} of the link");
}

/// A burst leaves a standing queue that three flows, offering 0.99 of the link between them
/// and each too close to its share to be flagged, keep standing: CoDel drains it to its
/// target; ZL-RED alone, with three flows, drops almost nothing below a third of the buffer
/// (its probability scaled by `(1/(256 P(t)))^2`) and leaves it standing.
#[test]
fn codel_drains_a_standing_normal_queue() {
    let mut flows: Vec<Flow> = (0..3).map(|i| flow(i, 0.33 * LINK_PPS)).collect();
    flows.extend((3..6).map(|i| Flow {
        stop: 1.0,
        ..flow(i, 0.3 * LINK_PPS)
    }));
    let sojourn = |iso: IsolationParams| {
        let r = run(isolated(iso, 300), &flows, 30.0, 10.0, 4);
        let QueueDiscipline::Isolated(d) = &r.disc else {
            unreachable!()
        };
        assert_eq!(d.stats().penalized, 0, "{:?}", d.stats());
        let sent: u64 = r.sent[..3].iter().sum();
        (
            r.sojourn_ms[..3].iter().sum::<f64>() / 3.0,
            d.stats().normal_codel_drops,
            sent,
        )
    };
    let (with, drops, sent) = sojourn(IsolationParams::default());
    let (without, none, sent_without) = sojourn(IsolationParams {
        normal_target_ms: 0.0,
        ..IsolationParams::default()
    });
    assert!(drops > 0 && none == 0, "CoDel drops {drops} / {none}");
    assert!(with < 10.0, "with CoDel: {with} ms");
    assert!(without > 40.0, "without: {without} ms");
    // What CoDel drops to drain the queue is a burst's worth, not the flows' goodput.
    assert!(
        sent as f64 > 0.98 * sent_without as f64,
        "{sent} / {sent_without}"
    );
}

/// The same inputs give the same run, decision for decision.
#[test]
fn runs_are_deterministic() {
    let mut flows: Vec<Flow> = (0..10).map(|i| flow(i, LINK_PPS / 10.0)).collect();
    flows.push(flow(99, LINK_PPS));
    let a = run(
        isolated(IsolationParams::default(), 200),
        &flows,
        5.0,
        1.0,
        9,
    );
    let b = run(
        isolated(IsolationParams::default(), 200),
        &flows,
        5.0,
        1.0,
        9,
    );
    assert_eq!(a.sent, b.sent);
}

#[test]
fn bad_parameters_are_named() {
    let zl = ZlRedParams::default();
    for (iso, key) in [
        (
            IsolationParams {
                enter: 1.0,
                ..IsolationParams::default()
            },
            "isolation.enter",
        ),
        (
            IsolationParams {
                leave: 3.0,
                ..IsolationParams::default()
            },
            "isolation.leave",
        ),
        (
            IsolationParams {
                max_flows: 5000,
                ..IsolationParams::default()
            },
            "isolation.max_flows",
        ),
        (
            IsolationParams {
                confirm: 0,
                ..IsolationParams::default()
            },
            "isolation.confirm",
        ),
        (
            IsolationParams {
                penalty_share: 0.0,
                ..IsolationParams::default()
            },
            "isolation.penalty_share",
        ),
        (
            IsolationParams {
                normal_interval_ms: 2.0,
                ..IsolationParams::default()
            },
            "isolation.normal_interval_ms",
        ),
        (
            IsolationParams {
                normal_target_ms: -1.0,
                ..IsolationParams::default()
            },
            "isolation.normal_target_ms",
        ),
    ] {
        assert_eq!(iso.validate(&zl, 300).unwrap_err().param, key);
    }
}
