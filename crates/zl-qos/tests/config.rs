//! Config loading (every example in `crates/zl-qos/configs/` is loaded and run), rejections
//! that name the key, and the classifier / re-marker end to end.

use rand::SeedableRng;
use rand_xoshiro::Xoshiro256PlusPlus;
use zl_aqm::{PacketMeta, Verdict};
use zl_core::{Color, Ecn, Nanos};
use zl_qos::{Dequeue, QosEngine, QosParams};

fn load(text: &str) -> QosParams {
    toml::from_str(text).unwrap_or_else(|e| panic!("parse: {e}"))
}

fn example(name: &str) -> QosParams {
    let path = format!("{}/configs/{name}", env!("CARGO_MANIFEST_DIR"));
    load(&std::fs::read_to_string(&path).unwrap())
}

fn meta(len: u32) -> PacketMeta {
    PacketMeta {
        len,
        ..PacketMeta::default()
    }
}

fn rng() -> Xoshiro256PlusPlus {
    Xoshiro256PlusPlus::seed_from_u64(5)
}

#[test]
fn every_example_config_loads_and_runs() {
    let dir = format!("{}/configs", env!("CARGO_MANIFEST_DIR"));
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let p = load(&std::fs::read_to_string(&path).unwrap());
        let mut e: QosEngine<u32> =
            QosEngine::new(&p).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
        let mut r = rng();
        // One second of mixed traffic at 1 packet/ms on every code point, drained as allowed.
        let mut now = Nanos::ZERO;
        let (mut sent, mut offered) = (0u64, 0u64);
        for i in 0..1000u64 {
            now = Nanos::from_millis(i);
            let dscp = Some((i % 64) as u8);
            offered += 1;
            let _ = e.enqueue(
                now,
                &mut r,
                dscp,
                meta(500 + (i % 3) as u32 * 500),
                0,
                |_| {},
            );
            while let Dequeue::Packet(_) = e.dequeue(now) {
                sent += 1;
            }
        }
        assert!(
            sent > 0 && sent <= offered,
            "{}: sent {sent}",
            path.display()
        );
        assert!(e.dequeue(now) != Dequeue::Empty || e.is_empty());
        n += 1;
    }
    assert!(n >= 2);
}

#[test]
fn standard_table_classifies_and_remarks() {
    let mut e: QosEngine<()> = QosEngine::new(&example("paper-setting1.toml")).unwrap();
    let [ef, af1, af2, af3] = ["ef", "af1", "af2", "af3"].map(|n| e.class_index(n).unwrap());
    let t = Nanos::ZERO;
    let c = e.classify(t, Some(46), 100);
    assert_eq!((c.class, c.color, c.remark), (ef, Color::Green, None));
    // AF11 within the committed burst: green, code point unchanged.
    let c = e.classify(t, Some(10), 1000);
    assert_eq!((c.class, c.color, c.remark), (af1, Color::Green, None));
    // af1 is color-aware: AF12 stays yellow, AF13 stays red, and they keep their code points.
    assert_eq!(e.classify(t, Some(12), 100).color, Color::Yellow);
    assert_eq!(e.classify(t, Some(14), 100).color, Color::Red);
    // AF21 beyond the committed burst (6000 bytes) is re-marked AF22 (20), beyond the peak
    // burst (9000 bytes) AF23 (22). After 5000 bytes C holds 1000, P 4000.
    let c = e.classify(t, Some(18), 5000);
    assert_eq!((c.class, c.color, c.remark), (af2, Color::Green, None));
    let c = e.classify(t, Some(18), 1001);
    assert_eq!((c.color, c.remark), (Color::Yellow, Some(20)));
    let c = e.classify(t, Some(18), 3000); // P holds 2999
    assert_eq!((c.color, c.remark), (Color::Red, Some(22)));
    // Unmapped and unparsable packets go to the default class (af3), counted apart.
    assert_eq!(e.classify(t, Some(1), 100).class, af3);
    assert_eq!(e.classify(t, None, 100).class, af3);
    assert_eq!(e.classify(t, Some(200), 100).class, af3);
    let s = e.classifier_stats();
    assert_eq!((s.unmapped, s.unparsed), (1, 2));
    // A forged class index is a counted drop, not a panic.
    let forged = zl_qos::Classified {
        class: 99,
        color: Color::Green,
        remark: None,
    };
    let mut r = rng();
    let res = e.enqueue_classified(t, &mut r, &forged, meta(100), (), |_| {});
    assert_eq!(res.unwrap_err().verdict, Verdict::TailDrop);
    assert_eq!(e.classifier_stats().invalid_class, 1);
}

#[test]
fn explicit_rules_override_the_standard_table() {
    let mut e: QosEngine<()> = QosEngine::new(&example("drr-live-buffer.toml")).unwrap();
    let be = e.class_index("be").unwrap();
    let ef = e.class_index("ef").unwrap();
    let c = e.classify(Nanos::ZERO, Some(8), 100); // CS1 -> be, red
    assert_eq!((c.class, c.color), (be, Color::Red));
    assert_eq!(e.classify(Nanos::ZERO, Some(40), 100).class, ef); // CS5 -> ef
}

#[test]
fn policed_class_drops_red_and_mark_hook_runs() {
    let mut e: QosEngine<bool> = QosEngine::new(&example("paper-setting1.toml")).unwrap();
    let mut r = rng();
    // EF's srTCM holds 3000 + 3000 bytes: at t = 0 two 1500-byte packets are green, two
    // yellow, and the fifth is red and dropped.
    let verdicts: Vec<_> = (0..5)
        .map(|_| {
            let (c, res) = e.enqueue(Nanos::ZERO, &mut r, Some(46), meta(1500), false, |_| {});
            (c.color, res.map_err(|d| d.verdict))
        })
        .collect();
    let ok = Ok(Verdict::Enqueue);
    assert_eq!(
        verdicts,
        [
            (Color::Green, ok),
            (Color::Green, ok),
            (Color::Yellow, ok),
            (Color::Yellow, ok),
            (Color::Red, Err(Verdict::ForcedDrop))
        ]
    );
    let ef = e.class_index("ef").unwrap();
    assert_eq!(e.class_stats(ef).unwrap().color(Color::Red).forced_drops, 1);

    // A sojourn manager with p = 1 and ECN on marks every ECN-capable arrival: the hook
    // rewrites the item it queues (the one just offered, not one queued before it).
    let p = load(
        "link_rate_bps = 1_000_000\n[[classes]]\nname = 'be'\nweight = 1\n\
         aqm = { kind = 'sojourn', ecn = true, green = { min_th_ms = 0.0, max_th_ms = 1000.0, p = 1.0 } }\n",
    );
    let mut e: QosEngine<u32> = QosEngine::new(&p).unwrap();
    let m = PacketMeta {
        ecn: Ecn::Ect0,
        ..meta(100)
    };
    for item in [1, 2] {
        let (_, res) = e.enqueue(Nanos::ZERO, &mut r, Some(0), m, item, |x| *x += 10);
        assert_eq!(res.unwrap(), Verdict::MarkCe);
    }
    for want in [11, 12] {
        match e.dequeue(Nanos::ZERO) {
            Dequeue::Packet(d) => assert_eq!(d.item, want, "the mark hook ran on it once"),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(e.class_stats(0).unwrap().color(Color::Green).marks, 2);
    assert_eq!(e.aqm_stats(0, Color::Green).unwrap().marked, 2);
    assert!(e.aqm_stats(1, Color::Green).is_none());
}

/// Builds `text` and returns the rejected key.
fn rejected_key(text: &str) -> String {
    match QosEngine::<()>::new(&load(text)) {
        Ok(_) => panic!("accepted: {text}"),
        Err(e) => {
            assert!(!e.reason.is_empty());
            assert!(e.to_string().contains(&e.key));
            e.key
        }
    }
}

#[test]
fn invalid_configs_name_the_key() {
    let base = "link_rate_bps = 1_000_000\n";
    let cases = [
        (
            "[[classes]]\nname = 'be'\nweight = 1\nmeter = { kind = 'trtcm', cir_bps = 2, cbs_bytes = 1, pir_bps = 1, pbs_bytes = 1 }\n",
            "classes[0].meter.pir_bps",
        ),
        (
            "[[classes]]\nname = 'be'\nweight = 1\nmeter = { kind = 'srtcm', cir_bps = 2, cbs_bytes = 0, ebs_bytes = 1 }\n",
            "classes[0].meter.cbs_bytes",
        ),
        (
            "[[classes]]\nname = 'be'\nweight = 1\n[[classes]]\nname = 'ef'\nweight = 1\nstrict_rank = 0\n",
            "classes[1].weight",
        ),
        ("[[classes]]\nname = 'be'\nweight = 0\n", "classes[0].weight"),
        (
            "[[classes]]\nname = 'be'\nweight = 1\n[[classes]]\nname = 'BE'\nweight = 1\n",
            "classes[1].name",
        ),
        (
            "[[classes]]\nname = 'be'\nweight = 1\naqm = { kind = 'red', min_th = 10.0, max_th = 5.0 }\n",
            "classes[0].aqm.max_th",
        ),
        (
            "[[classes]]\nname = 'be'\nweight = 1\nbuffer = { rule = 'sqrt-n-live', rate_bps = 1, rtt_ms = 1.0, floor_bytes = 10, ceiling_bytes = 5, period_ms = 1.0 }\n",
            "classes[0].buffer.ceiling_bytes",
        ),
        (
            "[[classes]]\nname = 'be'\nweight = 1\nremark = [10, 12, 99]\n",
            "classes[0].remark[2]",
        ),
        (
            "[classifier]\ndscp = [{ dscp = 'af11', class = 'af1' }]\n[[classes]]\nname = 'be'\nweight = 1\n",
            "classifier.dscp[0].class",
        ),
        (
            "[classifier]\ndefault_class = 'x'\n[[classes]]\nname = 'be'\nweight = 1\n",
            "classifier.default_class",
        ),
        (
            "[shaper]\nrate_bps = 1000\nburst_bytes = 100\n[[classes]]\nname = 'be'\nweight = 1\n",
            "shaper.burst_bytes",
        ),
        ("classes = []\n", "classes"),
    ];
    for (text, key) in cases {
        assert_eq!(rejected_key(&format!("{base}{text}")), key, "{text}");
    }
    // Without a shaper the link rate is required.
    assert_eq!(
        rejected_key("[[classes]]\nname = 'be'\nweight = 1\n"),
        "link_rate_bps"
    );
    // Unknown keys are a parse error that names them.
    let err = toml::from_str::<QosParams>("link_rate_bps = 1\nclasses = []\nshapr = {}\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("shapr"), "{err}");
}

/// `with_zombie_list`: the ZL-RED policies of every class observe the one list given; on the
/// observed path (a receive worker already observed it) the engine does not observe again.
#[test]
fn zombie_list_is_shared_by_every_class_and_observed_once() {
    use std::sync::Arc;
    use zl_zombie::{ZombieList, ZombieParams};
    let p = load(
        r#"
        link_rate_bps = 10_000_000
        [[classes]]
        name = "ef"
        strict_rank = 0
        max_packets = 100
        aqm = { kind = "zl-red" }
        [[classes]]
        name = "be"
        weight = 1
        max_packets = 100
        aqm = { kind = "zl-red" }
        [classifier]
        default_class = "be"
        dscp = [{ dscp = 46, class = "ef" }]
        "#,
    );
    let list = Arc::new(ZombieList::new(ZombieParams::default().validate().unwrap()));
    let mut e: QosEngine<u32> = QosEngine::with_zombie_list(&p, &list).unwrap();
    let mut r = rng();
    for i in 0..10u64 {
        let dscp = Some(if i % 2 == 0 { 46 } else { 0 });
        let (c, v) = e.enqueue(Nanos(i), &mut r, dscp, meta(100), 0, |_| {});
        assert_eq!(c.class, (i % 2) as usize);
        assert_eq!(v.unwrap(), Verdict::Enqueue);
    }
    assert_eq!(
        list.total_occurrence(),
        10,
        "both classes observed the shared list"
    );
    for i in 10..20u64 {
        let obs = list.observe(zl_core::FlowId(i), Nanos(i), &mut r);
        let c = e.classify(Nanos(i), Some(0), 100);
        // The queue is past th_min: the verdict may be an early drop; only the count matters.
        let _ =
            e.enqueue_classified_observed(Nanos(i), &mut r, &c, meta(100), 0, |_| {}, Some(&obs));
    }
    assert_eq!(list.total_occurrence(), 20, "observed upstream, not again");
    // `new` keeps a list per policy: the shared one sees nothing of it.
    let mut own: QosEngine<u32> = QosEngine::new(&p).unwrap();
    let _ = own.enqueue(Nanos(30), &mut r, Some(0), meta(100), 0, |_| {});
    assert_eq!(list.total_occurrence(), 20);
}

/// `QosParams::zombie_params`: the one Zombie List configuration of a port's SRED / ZL-RED
/// policies, or an error naming both keys when two differ.
#[test]
fn zombie_params_agree_or_name_both_keys() {
    use zl_zombie::ZombieParams;
    let classes = |be: &str, af: &str| {
        load(&format!(
            "link_rate_bps = 1_000_000\n\
             [[classes]]\nname = 'ef'\nstrict_rank = 0\n\
             [[classes]]\nname = 'af1'\nweight = 1\n{af}\n\
             [[classes]]\nname = 'be'\nweight = 1\n{be}\n"
        ))
    };
    assert_eq!(
        classes("", "").zombie_params(),
        Ok(None),
        "no SRED / ZL-RED"
    );
    let zl = "aqm = { kind = 'zl-red', a = 10 }";
    assert_eq!(
        classes(zl, "aqm = { kind = 'red' }").zombie_params(),
        Ok(Some((
            "classes[2].aqm.zombie".into(),
            ZombieParams::default()
        )))
    );
    let small = "aqm = { kind = 'sred', zombie = { m = 100, p_swap = 0.25 } }";
    let (first, p) = classes("", small).zombie_params().unwrap().unwrap();
    assert_eq!((first.as_str(), p.m), ("classes[1].aqm.zombie", 100));
    // Equal settings, written differently (the default spelled out), agree.
    let spelled = "aqm = { kind = 'sred', zombie = { m = 1000, p_swap = 0.25 } }";
    assert!(classes(zl, spelled).zombie_params().unwrap().is_some());
    let err = classes(zl, small).zombie_params().unwrap_err();
    assert_eq!(err.key, "classes[2].aqm.zombie");
    assert!(err.reason.contains("classes[1].aqm.zombie"), "{err}");
    let by_color =
        "aqm_by_color = { green = { kind = 'zl-red' }, yellow = { kind = 'tail-drop' }, \
                    red = { kind = 'zl-red', zombie = { m = 10, p_swap = 0.25 } } }";
    let err = classes(by_color, "").zombie_params().unwrap_err();
    assert_eq!(err.key, "classes[2].aqm_by_color.red.zombie");
    assert!(
        err.reason.contains("classes[2].aqm_by_color.green.zombie"),
        "{err}"
    );
}

/// `dequeue_burst` hands out exactly what repeated `dequeue` calls would, in the same order,
/// and stops where they would: at the shaper's hold (with its time) or an empty engine.
#[test]
fn dequeue_burst_matches_repeated_dequeue() {
    let p = load(
        r#"
        shaper = { rate_bps = 20_000_000, overhead_bytes = 20, burst_bytes = 3000 }
        [[classes]]
        name = "ef"
        strict_rank = 0
        max_packets = 50
        [[classes]]
        name = "af1"
        weight = 2
        max_packets = 50
        [[classes]]
        name = "be"
        weight = 3
        max_packets = 50
        aqm = { kind = "zl-red", a = 10 }
        "#,
    );
    let mut one: QosEngine<u32> = QosEngine::new(&p).unwrap();
    let mut burst: QosEngine<u32> = QosEngine::new(&p).unwrap();
    let (mut r1, mut r2) = (rng(), rng());
    let dscps = [Some(46), Some(10), Some(0), None, Some(0), Some(12)];
    let (mut by_one, mut by_burst) = (Vec::new(), Vec::new());
    let mut now = Nanos::ZERO;
    for step in 0..400u32 {
        now += Nanos::from_micros(300);
        for k in 0..3u32 {
            let id = step * 3 + k;
            let dscp = dscps[(id % 6) as usize];
            let len = 64 + (id * 37) % 1400;
            let (c1, v1) = one.enqueue(now, &mut r1, dscp, meta(len), id, |_| {});
            let (c2, v2) = burst.enqueue(now, &mut r2, dscp, meta(len), id, |_| {});
            assert_eq!((c1, v1.is_ok()), (c2, v2.is_ok()));
        }
        let max = 1 + (step as usize % 4);
        let mut held = None;
        for _ in 0..max {
            match one.dequeue(now) {
                Dequeue::Packet(d) => by_one.push(d.item),
                Dequeue::Hold { until } => {
                    held = Some(until);
                    break;
                }
                Dequeue::Empty => break,
            }
        }
        let before = by_burst.len();
        let b = burst.dequeue_burst(now, max, |item| by_burst.push(item));
        assert_eq!(b.sent, by_burst.len() - before);
        assert_eq!(b.held_until, held, "step {step}");
        assert_eq!(by_one, by_burst, "step {step}");
    }
    assert!(
        by_one.len() > 300,
        "the shaper let {} through",
        by_one.len()
    );
    assert!(
        !one.is_empty(),
        "the run must end with the shaper holding packets back"
    );
    assert_eq!(one.len(), burst.len());
}

/// `release_if_alone` hands out the packet just admitted only when it is the engine's only
/// one and the shaper lets it go; with anything else queued, or the shaper holding, it waits.
#[test]
fn release_if_alone_only_releases_a_lone_packet_the_shaper_lets_go() {
    let p = load(
        r#"
        shaper = { rate_bps = 8_000_000, overhead_bytes = 0, burst_bytes = 1514 }
        [[classes]]
        name = "ef"
        strict_rank = 0
        max_packets = 10
        [[classes]]
        name = "be"
        weight = 1
        max_packets = 10
        "#,
    );
    let mut e: QosEngine<u32> = QosEngine::new(&p).unwrap();
    let mut r = rng();
    let now = Nanos::from_millis(1);
    let mut out = Vec::new();
    // Alone, and the bucket holds 1514 bytes: it leaves at once.
    let (c, v) = e.enqueue(now, &mut r, Some(0), meta(1000), 1, |_| {});
    assert!(v.is_ok());
    let b = e.release_if_alone(now, c.class, |x| out.push(x));
    assert_eq!((b.sent, b.held_until, out.as_slice()), (1, None, &[1][..]));
    assert!(e.is_empty());
    // Alone again, but 514 bytes of tokens are left: the shaper holds it.
    let (c, _) = e.enqueue(now, &mut r, Some(0), meta(1000), 2, |_| {});
    let b = e.release_if_alone(now, c.class, |x| out.push(x));
    assert_eq!(b.sent, 0);
    assert!(b.held_until.is_some_and(|t| t > now), "{b:?}");
    // Not alone: packet 3 joins packet 2 (another class) and waits, even with tokens back.
    let later = now + Nanos::from_millis(10);
    let (c, _) = e.enqueue(later, &mut r, Some(46), meta(100), 3, |_| {});
    let b = e.release_if_alone(later, c.class, |x| out.push(x));
    assert_eq!((b.sent, out.len(), e.len()), (0, 1, 2));
    // A class the engine does not have releases nothing.
    assert_eq!(e.release_if_alone(later, 9, |x| out.push(x)).sent, 0);
}
