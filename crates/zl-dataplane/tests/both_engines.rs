//! The same config on both engines: the single loop (`rx_workers = 0`) and the threaded router
//! with one receive worker decide alike.
//!
//! The built-in default and `configs/zlred.toml` keep their `[parse]` and `[qos]` (classes,
//! meters, ZL-RED with its isolation, the sojourn manager, WRR, the shaper); their generator
//! ports give way to a pcap trace, so that both engines see the same packets. The trace mixes
//! what forwarding decides alone (parse errors, no route, TTL expiry, a DF packet over the egress
//! MTU, each answered by an ICMP error where due) with Diffserv traffic well below every
//! meter's and the link's rate, so no AQM or meter decision depends on when a packet arrives:
//! the fate counters, the ICMP counts and the frames that leave each port must then be the
//! same, byte for byte (the threaded router may interleave ports differently, so each port's
//! frames are compared as a multiset). The kernel-routing case on veths is
//! `tests/kernel_routing.rs`'s `same_behaviour_on_one_loop_and_two_receive_workers`.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use zl_core::Nanos;
use zl_dataplane::{build, build_threaded, NoObserver, RouterConfig, RouterView};
use zl_testkit::frames::Udp;
use zl_testkit::{pcap, scratch};

const HOST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x10];
const ROUTER_IN: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];

/// `file`'s `[parse]` and `[qos]`, with a pcap port `in` (the trace, errors written back to
/// `in-out.pcap`) routed to a pcap port `out` (MTU 1000) instead of its own ports.
fn on_pcap_ports(file: &str) -> String {
    let cfg: toml::Table = toml::from_str(file).expect("the config is TOML");
    let mut out: toml::Table = toml::from_str(
        r#"
[run]
duration_s = 2.0
drain_s = 1.0
seed = 1

[[ports]]
name = "in"
kind = "pcap"
mac = "02:00:00:00:00:01"
address = "10.0.1.1/24"
pcap = { read = "in.pcap", write = "in-out.pcap" }

[[ports]]
name = "out"
kind = "pcap"
mac = "02:00:00:00:00:02"
address = "10.0.2.1/24"
mtu = 1000
pcap = { write = "out-out.pcap" }

[[routes]]
prefix = "192.0.2.0/24"
port = "out"
next_hop_mac = "02:00:00:00:00:fe"
"#,
    )
    .unwrap();
    for key in ["parse", "qos"] {
        if let Some(v) = cfg.get(key) {
            out.insert(key.into(), v.clone());
        }
    }
    toml::to_string(&out).unwrap()
}

/// 300 frames 5 ms apart (about 0.3 Mbit/s): Diffserv UDP flows to the routed prefix, and now
/// and then a frame forwarding discards.
fn trace() -> Vec<Vec<u8>> {
    // DSCP best effort, AF11, AF21, EF (the default's classes), as the TOS byte.
    const TOS: [u8; 4] = [0, 10 << 2, 18 << 2, 46 << 2];
    (0..300u16)
        .map(|i| {
            // Hosts 10.0.1.2-201, each sending at most two frames: an ICMP error's rate
            // limit (six per host, then one a second) never decides.
            let host = [10, 0, 1, 2 + (i % 200) as u8];
            let udp = |dst: [u8; 4]| {
                Udp::v4(host, dst)
                    .macs(ROUTER_IN, HOST_MAC)
                    .ports(40_000 + i % 7, 9)
                    .tos(TOS[usize::from(i % 4)])
            };
            match i % 50 {
                7 => udp([192, 0, 2, 9]).ttl(1).len(100).build(),
                19 => udp([198, 51, 100, 1]).len(100).build(),
                31 => vec![0xee; 20],
                43 => {
                    // 1200 bytes with DF, over `out`'s MTU of 1000.
                    let mut f = udp([192, 0, 2, 9]).len(1200).build();
                    f[20] |= 0x40;
                    let c = {
                        f[24..26].fill(0);
                        zl_wire::checksum::checksum(&f[14..34])
                    };
                    f[24..26].copy_from_slice(&c.to_be_bytes());
                    f
                }
                _ => udp([192, 0, 2, (i % 5) as u8 + 10]).len(200).build(),
            }
        })
        .collect()
}

/// A port's output frames, sorted (a multiset: the order across ports is the engine's).
fn frames_out(path: &Path) -> Vec<Vec<u8>> {
    let mut out = pcap::read_frames(path);
    out.sort();
    out
}

/// What a run decided: the totals by fate, the ICMP errors by type, each port's frames.
#[derive(Debug, PartialEq)]
struct Outcome {
    received: u64,
    forwarded: u64,
    drops: Vec<(&'static str, u64)>,
    marked: u64,
    icmp_sent: u64,
    in_frames: Vec<Vec<u8>>,
    out_frames: Vec<Vec<u8>>,
}

fn single_loop(cfg: &RouterConfig, dir: &Path) -> Outcome {
    let mut dp = build(cfg, dir).unwrap();
    let stop = AtomicBool::new(false);
    dp.run_virtual(
        Nanos::from_secs(2),
        Nanos::from_secs(1),
        &stop,
        Nanos::from_millis(100),
        &mut NoObserver,
    )
    .unwrap();
    // The pcap writers flush when the ports are dropped.
    let view = outcome_counts(&dp);
    drop(dp);
    view.with_frames(dir)
}

fn threaded(cfg: &RouterConfig, dir: &Path) -> Outcome {
    let mut r = build_threaded(cfg, dir, &mut |_, _| Ok(None), 1).unwrap();
    // A clock that moves 1 µs per reading: the run goes as fast as the machine, and the
    // trace's 5 ms gaps keep every queue as empty as in virtual time.
    let t = AtomicU64::new(0);
    let clock = move || Nanos(t.fetch_add(1_000, Ordering::Relaxed));
    let stop = AtomicBool::new(false);
    r.run(
        &clock,
        &stop,
        Nanos::from_secs(1),
        Nanos::from_millis(100),
        &mut NoObserver,
    )
    .unwrap();
    let view = outcome_counts(&r);
    drop(r);
    view.with_frames(dir)
}

/// The counts of [`Outcome`], read before the ports (and their files) are closed.
struct Counts(Outcome);

fn outcome_counts(r: &dyn RouterView) -> Counts {
    let t = r.totals();
    Counts(Outcome {
        received: t.received,
        forwarded: t.forwarded,
        drops: t.drops_by_name().collect(),
        marked: t.marked,
        icmp_sent: r.icmp().sent.iter().sum(),
        in_frames: Vec::new(),
        out_frames: Vec::new(),
    })
}

impl Counts {
    fn with_frames(self, dir: &Path) -> Outcome {
        Outcome {
            in_frames: frames_out(&dir.join("in-out.pcap")),
            out_frames: frames_out(&dir.join("out-out.pcap")),
            ..self.0
        }
    }
}

fn same_on_both_engines(name: &str, file: &str) {
    let cfg = RouterConfig::from_toml(&on_pcap_ports(file)).unwrap();
    let frames = trace();
    let (d0, d1) = (scratch(&format!("{name}-0")), scratch(&format!("{name}-1")));
    for d in [&d0, &d1] {
        pcap::write_spaced(&d.join("in.pcap"), &frames, Duration::from_millis(5));
    }
    let one = single_loop(&cfg, &d0);
    let two = threaded(&cfg, &d1);
    // What the trace holds, so that the comparison cannot pass on two empty runs.
    assert_eq!(one.received, 300, "{one:?}");
    let drop = |o: &Outcome, name: &str| o.drops.iter().find(|d| d.0 == name).unwrap().1;
    for (cause, n) in [
        ("parse_error", 6),
        ("no_route", 6),
        ("ttl_expired", 6),
        ("too_big", 6),
    ] {
        assert_eq!(drop(&one, cause), n, "{cause}: {one:?}");
    }
    assert_eq!(one.forwarded, 276, "{:?}", one.drops);
    assert_eq!(one.out_frames.len(), 276);
    // Time Exceeded, Net Unreachable, Fragmentation Needed: 18 errors back to the host.
    assert_eq!((one.icmp_sent, one.in_frames.len()), (18, 18));
    // And the threaded router decided the same, frame for frame.
    assert_eq!(one.drops, two.drops);
    assert_eq!(
        (one.received, one.forwarded, one.marked, one.icmp_sent),
        (two.received, two.forwarded, two.marked, two.icmp_sent)
    );
    assert!(one.out_frames == two.out_frames, "the routed frames differ");
    assert!(one.in_frames == two.in_frames, "the ICMP errors differ");
}

#[test]
fn the_default_config_decides_alike_on_both_engines() {
    same_on_both_engines("both-default", zl_dataplane::DEFAULT_CONFIG);
}

#[test]
fn the_zlred_config_decides_alike_on_both_engines() {
    same_on_both_engines("both-zlred", include_str!("../../../configs/zlred.toml"));
}
