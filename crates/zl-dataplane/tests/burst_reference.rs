//! The receive stages taken a whole burst at a time decide as the same packets taken one at a
//! time through every stage (`Dataplane::set_stage_width(1)`, the reference path), on a seeded
//! trace that makes every stage decide: bursts of 40 frames at once into a shaped link, so
//! ZL-RED drops early and marks from a full Zombie List, two egress ports whose packets
//! alternate in runs, a class under the isolation, and frames forwarding discards (TTL 1, no
//! route, runts) with their ICMP errors. The fate counters, every class's statistics, each
//! port's frames in their order and each list's zombies and P(t) must be the same; so they
//! are for every stage width between (8, 16).

use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use zl_core::Nanos;
use zl_dataplane::{build, NoObserver, RouterConfig, RouterView};
use zl_qos::ClassStats;
use zl_testkit::config::{ClassToml, PortToml, QosToml, RouterToml};
use zl_testkit::frames::Udp;
use zl_testkit::{pcap, scratch};

const ROUTER_IN: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
const HOST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x10];
/// Frames that arrive at one instant: a burst of 32 and a part of 8.
const GROUP: usize = 40;
const GROUPS: usize = 400;

/// Two routed egress ports behind a 50 Mbit/s shaper each: `be` under ZL-RED with ECN, `af1`
/// (AF11, by the standard classifier) under ZL-RED with its isolation, both on the port's
/// Zombie List.
fn config() -> String {
    let qos = QosToml::shaped(50_000_000)
        .set("classifier", r#"{ default_class = "be" }"#)
        .class(
            ClassToml::new("af1")
                .weight(1)
                .max_packets(300)
                .aqm("{ kind = \"zl-red\", th_min = 5, p_max = 0.15, a = 10, isolation = {} }"),
        )
        .class(
            ClassToml::new("be")
                .weight(2)
                .max_packets(300)
                .aqm("{ kind = \"zl-red\", th_min = 5, p_max = 0.15, a = 10, ecn = true }"),
        );
    RouterToml::new()
        .set("run", "seed", 11)
        .set("metrics", "top_flows", 0)
        .port(
            PortToml::pcap("in", "02:00:00:00:00:01", "in.pcap", "in-out.pcap")
                .set("address", "\"10.0.1.1/24\""),
        )
        .port(PortToml::pcap_writer("a", "02:00:00:00:00:02", "a.pcap"))
        .port(PortToml::pcap_writer("b", "02:00:00:00:00:03", "b.pcap"))
        .route("192.0.2.0/24", "a", Some("02:00:00:00:00:fa"))
        .route("198.51.100.0/24", "b", Some("02:00:00:00:00:fb"))
        .qos(qos)
        .to_toml()
}

/// `GROUPS` groups of `GROUP` frames, a group every 2.5 ms (about 130 Mbit/s offered to two
/// 50 Mbit/s links): 40 flows, 4 of them sending a third of the frames, half of the flows
/// ECN-capable, a fifth of the flows AF11, the flows' ports in runs of one to six frames;
/// now and then a frame forwarding discards.
fn trace() -> Vec<(Duration, Vec<u8>)> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
    let mut out = Vec::with_capacity(GROUP * GROUPS);
    let mut dst_b = false;
    for g in 0..GROUPS {
        let at = Duration::from_micros(2500 * g as u64);
        for _ in 0..GROUP {
            if rng.random_ratio(1, 4) {
                dst_b = !dst_b;
            }
            let flow: u8 = if rng.random_ratio(1, 3) {
                rng.random_range(0..4)
            } else {
                rng.random_range(4..40)
            };
            let dst = if dst_b {
                [198, 51, 100, 1 + flow % 8]
            } else {
                [192, 0, 2, 1 + flow % 8]
            };
            let tos = match flow % 5 {
                0 => 10 << 2,
                _ => u8::from(flow % 2 == 0) * 2,
            };
            let udp = Udp::v4([10, 0, 1, 2 + flow], dst)
                .macs(ROUTER_IN, HOST_MAC)
                .ports(5000 + u16::from(flow), 9)
                .tos(tos);
            let frame = match rng.random_range(0..200) {
                0 => udp.ttl(1).len(100).build(),
                1 => Udp::v4([10, 0, 1, 2 + flow], [203, 0, 113, 1])
                    .macs(ROUTER_IN, HOST_MAC)
                    .len(100)
                    .build(),
                2 => vec![0xee; 20],
                _ => udp.len(1000).build(),
            };
            out.push((at, frame));
        }
    }
    out
}

/// Everything a run decided.
#[derive(Debug, PartialEq)]
struct Outcome {
    received: u64,
    forwarded: u64,
    drops: Vec<(&'static str, u64)>,
    marked: u64,
    icmp_sent: u64,
    classes: Vec<Option<ClassStats>>,
    /// Each egress port's list: its zombies (flow, count) and P(t), as bits.
    lists: Vec<(Vec<(u64, u64)>, u64)>,
    /// Each port's frames in the order they left.
    frames: Vec<Vec<Vec<u8>>>,
}

fn run(width: usize, dir: &Path) -> Outcome {
    let cfg = RouterConfig::from_toml(&config()).unwrap();
    pcap::write(&dir.join("in.pcap"), &trace());
    let mut dp = build(&cfg, dir).unwrap();
    dp.set_stage_width(width);
    let stop = AtomicBool::new(false);
    dp.run_virtual(
        Nanos::from_secs(1),
        Nanos::from_secs(2),
        &stop,
        Nanos::from_millis(50),
        &mut NoObserver,
    )
    .unwrap();
    let t = dp.totals();
    let mut outcome = Outcome {
        received: t.received,
        forwarded: t.forwarded,
        drops: t.drops_by_name().collect(),
        marked: t.marked,
        icmp_sent: dp.icmp().sent.iter().sum(),
        classes: (0..3)
            .flat_map(|p| {
                let q = RouterView::qos(&dp, p);
                (0..q.class_names().len()).map(|c| q.class_stats(c))
            })
            .collect(),
        lists: (1..3)
            .map(|p| {
                let list = RouterView::zombie_list(&dp, p).expect("a ZL-RED port has a list");
                let zombies = list.zombies().iter().map(|z| (z.flow.0, z.count)).collect();
                (zombies, list.estimated_flows().to_bits())
            })
            .collect(),
        frames: Vec::new(),
    };
    // The pcap writers flush when the ports are dropped.
    drop(dp);
    outcome.frames = ["in-out.pcap", "a.pcap", "b.pcap"]
        .iter()
        .map(|f| pcap::read_frames(&dir.join(f)))
        .collect();
    outcome
}

#[test]
fn bursts_decide_as_one_packet_at_a_time() {
    let burst = run(32, &scratch("burst-reference-32"));
    // What the trace makes every stage do, so the comparison cannot pass on idle stages.
    let drop = |name: &str| burst.drops.iter().find(|d| d.0 == name).unwrap().1;
    assert_eq!(burst.received, (GROUP * GROUPS) as u64);
    assert!(drop("early") > 500, "ZL-RED drops early: {burst:?}");
    assert!(burst.marked > 100, "ZL-RED marks ECN-capable packets");
    assert!(drop("ttl_expired") > 0 && drop("no_route") > 0 && drop("parse_error") > 0);
    assert!(burst.icmp_sent > 0, "the discarded packets' ICMP errors");
    assert!(burst.frames[1].len() > 1000 && burst.frames[2].len() > 1000);
    assert!(burst.lists.iter().all(|(z, _)| !z.is_empty()));
    let reference = run(1, &scratch("burst-reference-1"));
    assert!(
        burst == reference,
        "burst {burst:?}\nreference {reference:?}"
    );
    for width in [8, 16] {
        let part = run(width, &scratch(&format!("burst-reference-{width}")));
        assert!(part == reference, "width {width}: {part:?}");
    }
}
