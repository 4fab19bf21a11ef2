//! Shipped workloads load and run; invalid workloads and parameters are rejected with an
//! error naming the field; the Zombie List counts behave as spec 01 predicts.

use ixp_sim::sweep::{shipped_workload, SHIPPED};
use ixp_sim::workload::Counter;
use ixp_sim::zombie_trace::{mean_counts, trace_counts};
use ixp_sim::{simulate, MachineParams, RunLength, Unit, WorkloadSpec};

const SHORT: RunLength = RunLength {
    warmup: 5_000,
    measure: 100_000,
};

#[test]
fn every_workload_file_is_shipped_and_runs() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/workloads");
    let mut files = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            files += 1;
            let name = path.file_stem().unwrap().to_str().unwrap().to_string();
            let text = std::fs::read_to_string(&path).unwrap();
            assert_eq!(shipped_workload(&name), Some(text.as_str()), "{name}");
        }
    }
    assert_eq!(files, SHIPPED.len());
    for (name, text) in SHIPPED {
        let mut spec = WorkloadSpec::from_toml(text).unwrap();
        if let Some(z) = spec.zombie.as_mut() {
            z.m = 100;
        }
        let w = spec.compile().unwrap();
        assert_eq!(w.name, name);
        let r = simulate(&MachineParams::default(), &w, SHORT).unwrap();
        assert!(r.packets > 0, "{name}");
        let ratio = r.packets_per_cycle / r.bound_limit;
        assert!(
            ratio > 0.5 && ratio < 1.02,
            "{name}: simulated / bound {ratio}"
        );
        assert_eq!(
            (r.rx_threads, r.tx_threads),
            (16, 8),
            "the paper's split by default"
        );
    }
}

fn err_of(toml: &str) -> String {
    match WorkloadSpec::from_toml(toml).and_then(|s| s.compile()) {
        Ok(_) => panic!("accepted: {toml}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn invalid_workloads_name_the_field() {
    let cases = [
        ("rx = [{ op = \"read\", unit = \"dram\", bytes = 4 }]", "rx[0].unit"),
        ("rx = [{ op = \"read\", unit = \"sram\", bytes = 0 }]", "rx[0].bytes"),
        ("rx = [{ op = \"read\", unit = \"sram\", bytes = \"huge\" }]", "rx[0].bytes"),
        ("rx = [{ op = \"hash\", bits = 32 }]", "rx[0].bits"),
        (
            "rx = [{ op = \"compute\", cycles = 1 }, { op = \"repeat\", times = \"bogus\", body = [{ op = \"compute\", cycles = 1 }] }]",
            "rx[1].times",
        ),
        (
            "rx = [{ op = \"repeat\", times = \"slot_reads\", body = [{ op = \"compute\", cycles = 1 }] }]",
            "zombie",
        ),
        ("rx = [{ op = \"repeat\", times = 2, body = [] }]", "rx[0].body"),
        (
            "rx = [{ op = \"compute\", cycles = 1 }, { op = \"repeat\", times = 2, body = [{ op = \"ctx_arb\" }] }]",
            "rx[1].body",
        ),
        (
            "rx = [{ op = \"repeat\", times = 2000000, body = [{ op = \"compute\", cycles = 1 }] }]",
            "rx[0].times",
        ),
        (
            "rx = [{ op = \"compute\", cycles = 1 }]\ntx = [{ op = \"wait\" }]",
            "tx",
        ),
        ("rx = []", "rx"),
        ("rx = [{ op = \"wait\" }]", "rx"),
        ("packet_bytes = 10\nrx = [{ op = \"compute\", cycles = 1 }]", "packet_bytes"),
        (
            "rx = [{ op = \"compute\", cycles = 1 }]\n[regions]\nzl = \"hash\"",
            "regions.zl",
        ),
        (
            "rx = [{ op = \"compute\", cycles = 1 }]\n[zombie]\nm = 0\noccurrence = \"table\"",
            "zombie.m",
        ),
        (
            "rx = [{ op = \"compute\", cycles = 1 }]\n[zombie]\nm = 10\noccurrence = \"list\"",
            "zombie.occurrence",
        ),
        (
            "rx = [{ op = \"compute\", cycles = 1 }]\n[zombie]\nm = 10\noccurrence = \"table\"\np_swap = 2.0",
            "zombie.p_swap",
        ),
        ("rx = [{ op = \"compute\", cycle = 1 }]", "line"),
    ];
    for (body, field) in cases {
        let e = err_of(&format!("name = \"bad\"\n{body}\n"));
        assert!(
            e.starts_with(field),
            "{body}: error {e:?} should name {field}"
        );
    }
}

#[test]
fn invalid_machines_name_the_field() {
    let d = MachineParams::default;
    let mut both = d();
    both.units.get_mut(Unit::Sram).replace(ixp_sim::UnitParams {
        bandwidth_mb_s: Some(400.0),
        bytes_per_cycle: Some(2.0),
        ..Default::default()
    });
    let mut inverted = d();
    inverted
        .units
        .get_mut(Unit::Sdram)
        .replace(ixp_sim::UnitParams {
            latency: Some([40, 33]),
            ..Default::default()
        });
    let cases = [
        (
            MachineParams {
                clock_mhz: 50.0,
                ..d()
            },
            "clock_mhz",
        ),
        (
            MachineParams {
                clock_mhz: 300.0,
                ..d()
            },
            "clock_mhz",
        ),
        (MachineParams { mes: 0, ..d() }, "mes"),
        (
            MachineParams {
                threads_per_me: 0,
                ..d()
            },
            "threads_per_me",
        ),
        (
            MachineParams {
                rx_threads: Some(10),
                ..d()
            },
            "rx_threads",
        ),
        (
            MachineParams {
                rx_threads: Some(24),
                ..d()
            },
            "rx_threads",
        ),
        (
            MachineParams {
                tx_ring_packets: 0,
                ..d()
            },
            "tx_ring_packets",
        ),
        (both, "units.sram.bandwidth_mb_s"),
        (inverted, "units.sdram.latency"),
    ];
    for (p, field) in cases {
        let e = p.validate(true).unwrap_err();
        assert_eq!(e.field, field, "{e}");
    }
    let toml_err = toml::from_str::<MachineParams>("mes = 6\nthreadz = 4\n").unwrap_err();
    assert!(toml_err.to_string().contains("threadz"));
}

#[test]
fn zombie_counts_follow_sred_theory() {
    let spec = |occ: &str, m: usize, flows: u32| ixp_sim::workload::ZombieSpec {
        m,
        occurrence: occ.into(),
        p_swap: 0.25,
        flows,
        trace_packets: 20_000,
        seed: 11,
    };
    // Table mode, steady state: one slot read per packet; P{Hit} = sum pi^2 = 1/N (SRED eq.
    // 3.4); an overwrite on a miss with probability p_swap.
    for flows in [10u32, 100] {
        let c = trace_counts(&spec("table", 1000, flows)).unwrap();
        let m = mean_counts(&c);
        assert_eq!(c.len(), 20_000);
        let reads = m[Counter::SlotReads.index()];
        assert!(
            (1.0..1.05).contains(&reads),
            "slot reads per packet {reads}"
        );
        let hit = m[Counter::Hit.index()];
        let expect = 1.0 / flows as f64;
        let sd = (expect * (1.0 - expect) / 20_000.0).sqrt();
        assert!((hit - expect).abs() < 5.0 * sd, "hit {hit} vs {expect}");
        let ow = m[Counter::Overwrites.index()];
        let ow_expect = 0.25 * (1.0 - expect);
        assert!(
            (ow - ow_expect).abs() < 0.015,
            "overwrite {ow} vs {ow_expect}"
        );
        // Seed §5.2.3: a hit rewrites one table entry, a miss with overwrite two, a miss
        // without overwrite none; checked packet by packet on the real list's counts.
        for p in &c {
            let tw = p.get(Counter::TableWrites);
            match (p.get(Counter::Hit), p.get(Counter::Overwrites)) {
                (1, _) => assert!(tw >= 1, "{p:?}"),
                (0, 1) => assert!(tw >= 2, "{p:?}"),
                _ => assert_eq!(tw, 0, "{p:?}"),
            }
        }
        // Closed hashing at load <= 1/2 keeps probes per packet small (seed fig. 10).
        assert!(m[Counter::TableProbes.index()] < 8.0, "{m:?}");
    }
    // Scan mode reads every slot: M slot words per packet, O(M).
    for m_size in [10usize, 100, 1000] {
        let m = mean_counts(&trace_counts(&spec("scan", m_size, 100)).unwrap());
        let reads = m[Counter::SlotReads.index()];
        assert!(
            reads >= m_size as f64 && reads <= m_size as f64 + 2.0,
            "M={m_size}: {reads}"
        );
    }
}

#[test]
fn placement_and_profile_move_the_prediction() {
    let load = |place: Unit, m: usize| {
        let mut s = WorkloadSpec::from_toml(shipped_workload("zlred-scan").unwrap()).unwrap();
        s.place("zombie_list", place).unwrap();
        s.place("occurrence_table", place).unwrap();
        s.zombie.as_mut().unwrap().m = m;
        s.compile().unwrap()
    };
    let p = MachineParams::default();
    let sram = simulate(&p, &load(Unit::Sram, 100), SHORT).unwrap();
    let sdram = simulate(&p, &load(Unit::Sdram, 100), SHORT).unwrap();
    // ~2M+ zombie references per packet move from one unit to the other.
    assert!(sram.unit(Unit::Sram).refs_per_packet > 200.0);
    assert!(sdram.unit(Unit::Sdram).refs_per_packet > 200.0);
    assert!(sdram.unit(Unit::Sram).refs_per_packet < 20.0);
    // The O(M) scan gets M times slower: 10x M, about 10x fewer packets.
    let big = simulate(
        &p,
        &load(Unit::Sram, 1000),
        RunLength {
            warmup: 50_000,
            measure: 2_000_000,
        },
    )
    .unwrap();
    let ratio = sram.mpps / big.mpps;
    assert!(
        ratio > 7.0 && ratio < 12.0,
        "M 100 -> 1000 slows by {ratio}"
    );
    // The seed's slower SRAM cannot make any workload faster.
    let w = WorkloadSpec::from_toml(shipped_workload("zlred-table").unwrap())
        .unwrap()
        .compile()
        .unwrap();
    let seed = MachineParams {
        profile: ixp_sim::LatencyProfile::Seed,
        ..MachineParams::default()
    };
    let a = simulate(&MachineParams::default(), &w, SHORT).unwrap();
    let b = simulate(&seed, &w, SHORT).unwrap();
    assert!(
        b.mpps <= a.mpps * 1.01,
        "seed {} vs datasheet {}",
        b.mpps,
        a.mpps
    );
    assert!(b.unit(Unit::Sram).mean_latency_cycles > a.unit(Unit::Sram).mean_latency_cycles);
}

#[test]
fn example_machine_configs_load_and_run() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/workloads/machines");
    let w = WorkloadSpec::from_toml(shipped_workload("ipv4").unwrap())
        .unwrap()
        .compile()
        .unwrap();
    let mut n = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let text = std::fs::read_to_string(&path).unwrap();
        let p: MachineParams = toml::from_str(&text).unwrap_or_else(|e| panic!("{path:?}: {e}"));
        let r = simulate(&p, &w, SHORT).unwrap();
        assert!(r.mpps > 1.0, "{path:?}");
        n += 1;
    }
    assert!(n >= 2);
    // The fully written-out datasheet machine is the default machine.
    let text = std::fs::read_to_string(format!("{dir}/ixp1200-datasheet.toml")).unwrap();
    let p: MachineParams = toml::from_str(&text).unwrap();
    assert_eq!(
        p.validate(true).unwrap(),
        MachineParams::default().validate(true).unwrap()
    );
}

/// Config-loader robustness: every numeric literal of every shipped workload replaced by
/// awkward values (0, 1, huge, negative) is either rejected with an error or simulated;
/// nothing panics.
#[test]
fn mutated_workloads_are_rejected_or_run() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(5);
    let awkward = [
        "0",
        "1",
        "3",
        "64",
        "4294967295",
        "99999999999",
        "-1",
        "1.5",
    ];
    let (mut rejected, mut ran) = (0, 0);
    for (_, text) in SHIPPED {
        let numbers: Vec<(usize, usize)> = text
            .char_indices()
            .filter(|&(i, c)| {
                c.is_ascii_digit()
                    && !text[..i].ends_with(|p: char| p.is_ascii_alphanumeric() || p == '.')
                    && !text[..i].rsplit('\n').next().unwrap_or("").contains('#')
            })
            .map(|(i, _)| {
                let len = text[i..]
                    .find(|c: char| !c.is_ascii_digit() && c != '.')
                    .unwrap_or(0);
                (i, len)
            })
            .collect();
        for _ in 0..40 {
            let (at, len) = numbers[rng.random_range(0..numbers.len())];
            let with = awkward[rng.random_range(0..awkward.len())];
            let mutated = format!("{}{}{}", &text[..at], with, &text[at + len..]);
            match WorkloadSpec::from_toml(&mutated).and_then(|s| s.compile()) {
                Err(e) => {
                    assert!(!e.field.is_empty());
                    rejected += 1;
                }
                Ok(mut w) => {
                    if let Some(z) = w.zombie.as_mut() {
                        z.m = z.m.min(200);
                        z.trace_packets = z.trace_packets.min(2000);
                    }
                    let len = RunLength {
                        warmup: 1_000,
                        measure: 20_000,
                    };
                    match simulate(&MachineParams::default(), &w, len) {
                        Ok(_) => ran += 1,
                        Err(e) => {
                            assert!(!e.field.is_empty());
                            rejected += 1;
                        }
                    }
                }
            }
        }
    }
    assert!(rejected > 10 && ran > 10, "rejected {rejected}, ran {ran}");
}

/// Large packets: the IX bus limits (each packet crosses it twice), and the automatic run
/// length lets the descriptor ring fill before measuring, so the rate meets the bound.
#[test]
fn large_packets_meet_the_ix_bus_bound() {
    let mut spec = WorkloadSpec::from_toml(shipped_workload("ipv4").unwrap()).unwrap();
    spec.packet_bytes = 1500;
    let w = spec.compile().unwrap();
    let r = ixp_sim::simulate_auto(&MachineParams::default(), &w, SHORT).unwrap();
    assert_eq!(r.bottleneck, "ix-bus bandwidth");
    let expect = 528e6 / (2.0 * 1500.0) / 1e6;
    assert!((r.bound_limit * r.clock_mhz - expect).abs() < 1e-3);
    let ratio = r.mpps / expect;
    assert!((ratio - 1.0).abs() < 0.03, "{} Mpps vs {expect}", r.mpps);
    assert!(r.packets >= 900);
}
