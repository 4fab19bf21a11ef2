//! The model against theory: unloaded latencies, latency hiding, bandwidth saturation.

use ixp_sim::{simulate, MachineParams, RunLength, Unit, UnitParams, WorkloadSpec};

fn workload(rx: &str) -> ixp_sim::Workload {
    WorkloadSpec::from_toml(&format!("name = \"t\"\n{rx}"))
        .expect("parse")
        .compile()
        .expect("compile")
}

fn one_me(threads: u32) -> MachineParams {
    MachineParams {
        mes: 1,
        threads_per_me: threads,
        ..MachineParams::default()
    }
}

fn fixed_latency(p: &mut MachineParams, unit: Unit, lat: u32) {
    *p.units.get_mut(unit) = Some(UnitParams {
        latency: Some([lat, lat]),
        ..UnitParams::default()
    });
}

const LEN: RunLength = RunLength {
    warmup: 5_000,
    measure: 200_000,
};

#[test]
fn unloaded_latency_equals_configured_value() {
    for (unit, op) in [
        (
            Unit::Scratch,
            "op = \"read\"\nunit = \"scratch\"\nbytes = 4",
        ),
        (Unit::Sram, "op = \"read\"\nunit = \"sram\"\nbytes = 4"),
        (Unit::Sdram, "op = \"read\"\nunit = \"sdram\"\nbytes = 8"),
        (Unit::Hash, "op = \"hash\"\nbits = 64"),
        (Unit::IxBus, "op = \"ix_rx\"\nbytes = 8"),
    ] {
        for lat in [7u32, 23, 45] {
            let mut p = one_me(1);
            fixed_latency(&mut p, unit, lat);
            let w = workload(&format!("[[rx]]\n{op}\n"));
            let r = simulate(&p, &w, LEN).unwrap();
            let u = r.unit(unit);
            assert_eq!(u.mean_latency_cycles, lat as f64, "{unit:?}");
            assert_eq!(u.mean_queue_delay_cycles, 0.0, "{unit:?}");
            // One thread: issue cycle + latency per packet.
            let expect = 1.0 / (1.0 + lat as f64);
            assert!(
                (r.packets_per_cycle - expect).abs() / expect < 1e-3,
                "{unit:?} {lat}: {} vs {expect}",
                r.packets_per_cycle
            );
        }
    }
}

#[test]
fn profile_latencies_fall_in_their_ranges() {
    for (profile, unit, lo, hi) in [
        (ixp_sim::LatencyProfile::Datasheet, Unit::Scratch, 12, 14),
        (ixp_sim::LatencyProfile::Datasheet, Unit::Sram, 16, 20),
        (ixp_sim::LatencyProfile::Datasheet, Unit::Sdram, 33, 40),
        (ixp_sim::LatencyProfile::Seed, Unit::Sram, 30, 30),
        (ixp_sim::LatencyProfile::Seed, Unit::Sdram, 40, 50),
    ] {
        let p = MachineParams {
            profile,
            ..one_me(1)
        };
        let w = workload(&format!(
            "[[rx]]\nop = \"read\"\nunit = \"{}\"\nbytes = 4\n",
            unit.name()
        ));
        let r = simulate(&p, &w, LEN).unwrap();
        let mean = r.unit(unit).mean_latency_cycles;
        let mid = (lo + hi) as f64 / 2.0;
        assert!(
            (mean - mid).abs() < 0.05 * (hi - lo) as f64 + 1e-9,
            "{profile:?} {unit:?}: mean {mean}, expected {mid}"
        );
    }
}

/// Spec 06's example: one ME, 10 ALU cycles (9 + the issue cycle) and one SRAM read of
/// latency 20: k/30 iterations per cycle for k <= 3 threads, then 1/10.
#[test]
fn latency_hiding_matches_spec_example() {
    let w = workload(
        "[[rx]]\nop = \"compute\"\ncycles = 9\n[[rx]]\nop = \"read\"\nunit = \"sram\"\nbytes = 4\n",
    );
    for k in 1..=8u32 {
        let mut p = one_me(k);
        fixed_latency(&mut p, Unit::Sram, 20);
        let r = simulate(&p, &w, LEN).unwrap();
        let expect = if k <= 3 { k as f64 / 30.0 } else { 0.1 };
        let err = (r.packets_per_cycle - expect).abs() / expect;
        assert!(err < 0.03, "k={k}: {} vs {expect}", r.packets_per_cycle);
        if k >= 4 {
            assert!(r.rx_me.busy > 0.97, "k={k}: busy {}", r.rx_me.busy);
        } else {
            let idle = 1.0 - k as f64 * 10.0 / 30.0;
            assert!(
                (r.rx_me.idle - idle).abs() < 0.03,
                "k={k}: idle {}",
                r.rx_me.idle
            );
        }
    }
}

/// 24 threads issuing back-to-back reads saturate each unit's bus: the reference rate
/// plateaus at 1 / occupancy, utilisation near 1, and the command queues fill.
#[test]
fn back_to_back_reads_plateau_at_bandwidth() {
    let read = |unit: &str, bytes: u32| {
        format!("[[rx]]\nop = \"read\"\nunit = \"{unit}\"\nbytes = {bytes}\n")
    };
    for (unit, bytes, program) in [
        (Unit::Sram, 4, read("sram", 4)),
        (Unit::Sram, 16, read("sram", 16)),
        (Unit::Sdram, 32, read("sdram", 32)),
        (Unit::Scratch, 4, read("scratch", 4)),
        (
            Unit::Hash,
            8,
            "[[rx]]\nop = \"hash\"\nbits = 64\n".to_string(),
        ),
        (
            Unit::IxBus,
            64,
            "[[rx]]\nop = \"ix_rx\"\nbytes = 64\n".to_string(),
        ),
    ] {
        let p = MachineParams::default();
        let cfg = p.validate(false).unwrap();
        let occ = cfg.unit(unit).occupancy(bytes);
        let w = workload(&program);
        let r = simulate(&p, &w, LEN).unwrap();
        let expect = 1.0 / occ;
        let err = (r.packets_per_cycle - expect).abs() / expect;
        assert!(
            err < 0.03,
            "{unit:?}/{bytes}: {} vs {expect}",
            r.packets_per_cycle
        );
        assert!(r.unit(unit).utilisation > 0.97);
        assert!(r.unit(unit).mean_queue_delay_cycles > 5.0);
        // One thread: one reference per issue cycle plus mean latency, far below the bus.
        let few = MachineParams {
            mes: 1,
            threads_per_me: 1,
            ..p.clone()
        };
        let r1 = simulate(&few, &w, LEN).unwrap();
        let alone = 1.0 / (1.0 + cfg.unit(unit).mean_latency(bytes));
        assert!(
            (r1.packets_per_cycle - alone).abs() / alone < 0.03,
            "{unit:?}/{bytes} alone: {} vs {alone}",
            r1.packets_per_cycle
        );
        assert_eq!(r1.unit(unit).mean_queue_delay_cycles, 0.0);
    }
}

#[test]
fn full_command_queue_stalls_the_me() {
    let mut p = MachineParams::default();
    *p.units.get_mut(Unit::Sram) = Some(UnitParams {
        queue_depth: Some(2),
        ..UnitParams::default()
    });
    let w = workload(
        "[[rx]]\nop = \"read\"\nunit = \"sram\"\nbytes = 4\nsync = false\n[[rx]]\nop = \"read\"\nunit = \"sram\"\nbytes = 4\nsync = false\n[[rx]]\nop = \"wait\"\n",
    );
    let r = simulate(&p, &w, LEN).unwrap();
    assert!(r.rx_me.stalled > 0.3, "stalled {}", r.rx_me.stalled);
    let sum = r.rx_me.busy + r.rx_me.stalled + r.rx_me.idle;
    assert!((sum - 1.0).abs() < 0.01, "fractions sum {sum}");
}

/// A seed reproduces a run exactly; another seed changes the latency draws, not the result
/// beyond noise.
#[test]
fn runs_are_deterministic_per_seed() {
    let w =
        ixp_sim::WorkloadSpec::from_toml(ixp_sim::sweep::shipped_workload("zlred-table").unwrap())
            .unwrap()
            .compile()
            .unwrap();
    let p = MachineParams::default();
    let a = simulate(&p, &w, LEN).unwrap();
    let b = simulate(&p, &w, LEN).unwrap();
    assert_eq!(a, b);
    let c = simulate(&MachineParams { seed: 99, ..p }, &w, LEN).unwrap();
    assert_ne!(
        a.unit(Unit::Sram).mean_latency_cycles,
        c.unit(Unit::Sram).mean_latency_cycles
    );
    assert!(
        (a.mpps - c.mpps).abs() / a.mpps < 0.02,
        "{} vs {}",
        a.mpps,
        c.mpps
    );
}

/// Like `ctx_swap`, a synchronous command waits for its own signal only; `wait` waits for
/// every outstanding one.
#[test]
fn sync_waits_for_its_own_signal_and_wait_for_all() {
    let mut p = one_me(1);
    fixed_latency(&mut p, Unit::Sram, 100);
    fixed_latency(&mut p, Unit::Scratch, 10);
    let body = "[[rx]]\nop = \"read\"\nunit = \"sram\"\nbytes = 4\nsync = false\n\
                [[rx]]\nop = \"read\"\nunit = \"scratch\"\nbytes = 4\n\
                [[rx]]\nop = \"compute\"\ncycles = 5\n";
    // Per packet: two issue cycles, the scratch latency, 5 cycles; the SRAM read overlaps.
    let r = simulate(&p, &workload(body), LEN).unwrap();
    let expect = 1.0 / (2.0 + 10.0 + 5.0);
    assert!(
        (r.packets_per_cycle - expect).abs() / expect < 0.01,
        "{}",
        r.packets_per_cycle
    );
    // With `wait` the packet ends when the SRAM read is back: 1 + 100 cycles after it began.
    let r = simulate(
        &p,
        &workload(&format!("{body}[[rx]]\nop = \"wait\"\n")),
        LEN,
    )
    .unwrap();
    let expect = 1.0 / (1.0 + 100.0);
    assert!(
        (r.packets_per_cycle - expect).abs() / expect < 0.01,
        "{}",
        r.packets_per_cycle
    );
}
