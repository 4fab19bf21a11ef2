//! Config: every invalid parameter is rejected with its name; TOML round trips; unknown keys
//! and kinds are refused.

use serde::{Deserialize, Serialize};
use zl_aqm::{
    AqmParams, BuildContext, NonlinearRedParams, PriorityEcnRedParams, RedParams,
    SojournColorParams, SojournParams, SredParams, TailDropParams, ZlRedParams,
};
use zl_zombie::{OccurrenceMode, ZombieParams};

fn ctx() -> BuildContext {
    BuildContext::new(1_000_000_000, 1000)
}

fn rejected(params: AqmParams, ctx: &BuildContext) -> &'static str {
    match params.build(ctx) {
        Ok(_) => panic!("{params:?} was accepted"),
        Err(e) => {
            let msg = e.to_string();
            assert!(msg.contains(e.param), "message names the parameter: {msg}");
            e.param
        }
    }
}

#[test]
fn every_invalid_parameter_is_named() {
    let red = RedParams::default();
    let zombie = ZombieParams::default();
    let sred = SredParams::default();
    let zl = ZlRedParams::default();
    let pri = PriorityEcnRedParams::default();
    let nl = NonlinearRedParams::default();
    let so = SojournParams::default();
    let bad_color = SojournColorParams::new(5.0, 4.0, 0.1);
    let cases: Vec<(AqmParams, &str)> = vec![
        (
            AqmParams::Red(RedParams {
                min_th: -1.0,
                ..red
            }),
            "min_th",
        ),
        (
            AqmParams::Red(RedParams {
                min_th: f64::NAN,
                ..red
            }),
            "min_th",
        ),
        (AqmParams::Red(RedParams { max_th: 5.0, ..red }), "max_th"),
        (
            AqmParams::Red(RedParams {
                max_th: f64::INFINITY,
                ..red
            }),
            "max_th",
        ),
        (AqmParams::Red(RedParams { max_p: 0.0, ..red }), "max_p"),
        (AqmParams::Red(RedParams { max_p: 1.5, ..red }), "max_p"),
        (AqmParams::Red(RedParams { w_q: 0.0, ..red }), "w_q"),
        (AqmParams::Red(RedParams { w_q: 2.0, ..red }), "w_q"),
        (
            AqmParams::Red(RedParams {
                idle_packet_bytes: 0,
                ..red
            }),
            "idle_packet_bytes",
        ),
        (
            AqmParams::Sred(SredParams {
                p_max: -0.1,
                ..sred
            }),
            "p_max",
        ),
        (
            AqmParams::Sred(SredParams {
                zombie: ZombieParams { m: 0, ..zombie },
                ..sred
            }),
            "zombie.m",
        ),
        (
            AqmParams::Sred(SredParams {
                zombie: ZombieParams {
                    p_swap: 1.5,
                    ..zombie
                },
                ..sred
            }),
            "zombie.p_swap",
        ),
        (
            AqmParams::Sred(SredParams {
                zombie: ZombieParams {
                    alpha: Some(0.0),
                    ..zombie
                },
                ..sred
            }),
            "zombie.alpha",
        ),
        (AqmParams::ZlRed(ZlRedParams { p_max: 2.0, ..zl }), "p_max"),
        (
            AqmParams::ZlRed(ZlRedParams { th_min: -1.0, ..zl }),
            "th_min",
        ),
        (
            AqmParams::ZlRed(ZlRedParams {
                th_min: 334.0,
                ..zl
            }),
            "th_min",
        ),
        (AqmParams::ZlRed(ZlRedParams { a: 0.5, ..zl }), "a"),
        (
            AqmParams::ZlRed(ZlRedParams {
                zombie: ZombieParams {
                    m: usize::MAX,
                    ..zombie
                },
                ..zl
            }),
            "zombie.m",
        ),
        (
            AqmParams::PriorityEcnRed(PriorityEcnRedParams { b: 15, ..pri }),
            "b",
        ),
        (
            AqmParams::PriorityEcnRed(PriorityEcnRedParams {
                max_th: 100.0,
                ..pri
            }),
            "max_th",
        ),
        (
            AqmParams::PriorityEcnRed(PriorityEcnRedParams { max_p: 0.0, ..pri }),
            "max_p",
        ),
        (
            AqmParams::NonlinearRed(NonlinearRedParams { w_q: 0.0, ..nl }),
            "w_q",
        ),
        (
            AqmParams::NonlinearRed(NonlinearRedParams { p_max: 1.1, ..nl }),
            "p_max",
        ),
        (
            AqmParams::NonlinearRed(NonlinearRedParams { q_min: -3.0, ..nl }),
            "q_min",
        ),
        (
            AqmParams::NonlinearRed(NonlinearRedParams { q_max: 30.0, ..nl }),
            "q_max",
        ),
        (
            AqmParams::NonlinearRed(NonlinearRedParams { gamma: -1.0, ..nl }),
            "gamma",
        ),
        (
            AqmParams::NonlinearRed(NonlinearRedParams {
                gamma: f64::NAN,
                ..nl
            }),
            "gamma",
        ),
        (AqmParams::Sojourn(SojournParams { w: 0.0, ..so }), "w"),
        (
            AqmParams::Sojourn(SojournParams {
                green: bad_color,
                ..so
            }),
            "green.max_th_ms",
        ),
        (
            AqmParams::Sojourn(SojournParams {
                yellow: SojournColorParams::new(-1.0, 4.0, 0.1),
                ..so
            }),
            "yellow.min_th_ms",
        ),
        (
            AqmParams::Sojourn(SojournParams {
                red: SojournColorParams::new(1.0, 4.0, 1.5),
                ..so
            }),
            "red.p",
        ),
    ];
    for (params, name) in cases {
        assert_eq!(rejected(params, &ctx()), name);
    }
    // What only the context knows.
    let no_rate = BuildContext::new(0, 1000);
    assert_eq!(rejected(AqmParams::Red(red), &no_rate), "link_rate_bps");
    assert_eq!(
        rejected(AqmParams::PriorityEcnRed(pri), &no_rate),
        "link_rate_bps"
    );
    for b in [0, u32::MAX] {
        let no_b = BuildContext::new(1_000_000, b);
        assert_eq!(rejected(AqmParams::Sred(sred), &no_b), "capacity_packets");
        assert_eq!(rejected(AqmParams::ZlRed(zl), &no_b), "capacity_packets");
    }
    // Every default builds.
    for p in all_defaults() {
        p.build(&ctx()).unwrap();
    }
}

fn all_defaults() -> Vec<AqmParams> {
    vec![
        AqmParams::TailDrop(TailDropParams::default()),
        AqmParams::Red(RedParams::default()),
        AqmParams::Sred(SredParams::default()),
        AqmParams::ZlRed(ZlRedParams::default()),
        AqmParams::PriorityEcnRed(PriorityEcnRedParams::default()),
        AqmParams::NonlinearRed(NonlinearRedParams::default()),
        AqmParams::Sojourn(SojournParams::default()),
    ]
}

#[derive(Debug, PartialEq, Serialize, Deserialize)]
struct Queue {
    name: String,
    aqm: AqmParams,
}

#[test]
fn toml_round_trip_of_every_kind() {
    for params in all_defaults() {
        let q = Queue {
            name: params.kind().to_string(),
            aqm: params,
        };
        let text = toml::to_string(&q).unwrap();
        assert!(
            text.contains(&format!("kind = \"{}\"", q.aqm.kind())),
            "{text}"
        );
        let back: Queue = toml::from_str(&text).unwrap();
        assert_eq!(back, q, "{text}");
    }
}

#[test]
fn toml_as_written_by_hand() {
    let text = r#"
        name = "af3"
        [aqm]
        kind = "red"
        min_th = 5
        max_th = 15
        max_p = 0.1
        gentle = true
        unit = "bytes"
    "#;
    let q: Queue = toml::from_str(text).unwrap();
    assert_eq!(
        q.aqm,
        AqmParams::Red(RedParams {
            min_th: 5.0,
            max_th: 15.0,
            max_p: 0.1,
            gentle: true,
            unit: zl_aqm::QueueUnit::Bytes,
            ..RedParams::default()
        })
    );

    let text = r#"
        name = "core"
        [aqm]
        kind = "zl-red"
        th_min = 10
        a = 2.0
        [aqm.zombie]
        m = 100
        occurrence = "scan"
    "#;
    let q: Queue = toml::from_str(text).unwrap();
    let AqmParams::ZlRed(p) = q.aqm else {
        panic!("{:?}", q.aqm)
    };
    assert_eq!((p.th_min, p.a, p.p_max), (10.0, 2.0, 0.15));
    assert_eq!(p.zombie.m, 100);
    assert_eq!(p.zombie.occurrence, OccurrenceMode::Scan);

    let text = r#"
        name = "af1"
        [aqm]
        kind = "sojourn"
        yellow = { min_th_ms = 4, max_th_ms = 8, p = 0.2 }
        red = { min_th_ms = 2, max_th_ms = 4, p = 0.2 }
    "#;
    let q: Queue = toml::from_str(text).unwrap();
    assert_eq!(q.aqm, AqmParams::Sojourn(SojournParams::setting2_af1()));
}

#[test]
fn unknown_keys_and_kinds_are_refused() {
    for (text, needle) in [
        (
            "name = \"x\"\n[aqm]\nkind = \"red\"\nmax_pp = 0.1\n",
            "max_pp",
        ),
        ("name = \"x\"\n[aqm]\nkind = \"cake\"\n", "cake"),
        (
            "name = \"x\"\n[aqm]\nkind = \"tail-drop\"\nlimit = 3\n",
            "limit",
        ),
        (
            "name = \"x\"\n[aqm]\nkind = \"sred\"\n[aqm.zombie]\nsize = 3\n",
            "size",
        ),
        ("name = \"x\"\n[aqm]\nmin_th = 3\n", "kind"),
    ] {
        let err = toml::from_str::<Queue>(text).unwrap_err().to_string();
        assert!(err.contains(needle), "{needle}: {err}");
    }
}

/// Forwarding threads own their policies and share Zombie Lists: policies must move between
/// threads.
#[test]
fn policies_are_send() {
    fn send<T: Send>() {}
    send::<zl_aqm::AqmPolicy>();
    send::<BuildContext>();
    send::<AqmParams>();
}
