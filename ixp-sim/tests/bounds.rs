//! Agreement with the closed-form bounds (spec 06) over a grid of synthetic workloads:
//! simulated throughput within 10 % of min(compute, latency hiding, unit bandwidth, IX bus)
//! wherever the two smallest bounds are at least 40 % apart (away from the knees). Near a knee
//! the model queues (threads wait for the ME, commands wait for a bus) and falls below the
//! bounds, as a closed queueing network does; the grid checks it never exceeds them.

use ixp_sim::{simulate, MachineParams, RunLength, WorkloadSpec};

const LEN: RunLength = RunLength {
    warmup: 10_000,
    measure: 150_000,
};

/// `compute` ALU cycles spread evenly between the references, so no two commands are issued
/// back to back (back-to-back commands from every thread convoy on one unit, a queueing effect
/// the bounds do not model).
fn program(compute: u32, sram: u32, sram_bytes: u32, sdram: u32, ix: u32) -> String {
    let mut refs = Vec::new();
    for _ in 0..sram {
        refs.push(format!(
            "{{ op = \"read\", unit = \"sram\", bytes = {sram_bytes} }}"
        ));
    }
    for _ in 0..sdram {
        refs.push("{ op = \"write\", unit = \"sdram\", bytes = 64 }".to_string());
    }
    if ix > 0 {
        refs.push(format!("{{ op = \"ix_rx\", bytes = {ix} }}"));
    }
    let chunk = compute / (refs.len() as u32 + 1);
    let mut ops = Vec::new();
    for r in refs.iter() {
        ops.push(format!("{{ op = \"compute\", cycles = {chunk} }}"));
        ops.push(r.clone());
    }
    ops.push(format!(
        "{{ op = \"compute\", cycles = {} }}",
        compute - chunk * refs.len() as u32
    ));
    format!("[{}]", ops.join(", "))
}

#[test]
fn simulation_agrees_with_bounds_away_from_knees() {
    let mut checked = 0;
    let mut worst: f64 = 0.0;
    for &(mes, threads) in &[(1u32, 1u32), (1, 4), (2, 2), (6, 4)] {
        for &compute in &[8u32, 40, 200] {
            for &(sram, bytes) in &[(0u32, 4u32), (1, 4), (3, 16), (6, 32)] {
                for &sdram in &[0u32, 2] {
                    for &ix in &[0u32, 128] {
                        let toml = format!(
                            "name = \"grid\"\nrx = {}\n",
                            program(compute, sram, bytes, sdram, ix)
                        );
                        let w = WorkloadSpec::from_toml(&toml).unwrap().compile().unwrap();
                        let p = MachineParams {
                            mes,
                            threads_per_me: threads,
                            ..MachineParams::default()
                        };
                        let r = simulate(&p, &w, LEN).unwrap();
                        if std::env::var("GRID_DEBUG").is_ok() {
                            eprintln!("{mes}x{threads} I={compute} sram={sram}x{bytes} sdram={sdram} ix={ix}: knee {:.2} ratio {:.3} {} util {:.2}",
                                r.bounds.knee_ratio(), r.packets_per_cycle / r.bound_limit, r.bottleneck, r.units.iter().map(|u| u.utilisation).fold(0.0, f64::max));
                            continue;
                        }
                        let ratio = r.packets_per_cycle / r.bound_limit;
                        assert!(
                            ratio < 1.02,
                            "{mes}x{threads} I={compute}: simulated above the bound ({ratio})"
                        );
                        if r.bounds.knee_ratio() < 1.4 {
                            continue;
                        }
                        worst = worst.max((ratio - 1.0).abs());
                        assert!(
                            (ratio - 1.0).abs() < 0.10,
                            "{mes}x{threads} I={compute} sram={sram}x{bytes} sdram={sdram} ix={ix}: \
                             simulated {:.5} vs bound {:.5} ({})",
                            r.packets_per_cycle,
                            r.bound_limit,
                            r.bottleneck
                        );
                        checked += 1;
                    }
                }
            }
        }
    }
    assert!(checked >= 100, "only {checked} grid points away from knees");
    eprintln!("checked {checked} points, worst deviation {worst:.4}");
}

/// Two stages: receive and transmit each bound their own rate, and the slower one limits.
#[test]
fn two_stage_pipeline_follows_the_slower_stage() {
    for &(rx_c, tx_c) in &[(200u32, 20u32), (30, 150)] {
        let toml = format!(
            "name = \"pipe\"\nrx = [{{ op = \"compute\", cycles = {rx_c} }}, {{ op = \"read\", unit = \"sram\", bytes = 4 }}]\n\
             tx = [{{ op = \"compute\", cycles = {tx_c} }}, {{ op = \"write\", unit = \"scratch\", bytes = 4 }}]\n"
        );
        let w = WorkloadSpec::from_toml(&toml).unwrap().compile().unwrap();
        let p = MachineParams {
            rx_threads: Some(16),
            ..MachineParams::default()
        };
        let r = simulate(&p, &w, LEN).unwrap();
        let ratio = r.packets_per_cycle / r.bound_limit;
        assert!(
            (ratio - 1.0).abs() < 0.05,
            "{rx_c}/{tx_c}: ratio {ratio} ({})",
            r.bottleneck
        );
        let slow = if rx_c > tx_c { "rx" } else { "tx" };
        assert!(r.bottleneck.starts_with(slow), "{}", r.bottleneck);
    }
}

/// decided (bounds.rs): an asynchronous reference counts in the latency sum only for what it
/// sticks out beyond the work before the next `wait`.
#[test]
fn async_latency_counts_only_past_the_overlapping_work() {
    let w = WorkloadSpec::from_toml(
        "name = \"async\"\nrx = [{ op = \"compute\", cycles = 10 }, \
         { op = \"write\", unit = \"sram\", bytes = 4, sync = false }, \
         { op = \"compute\", cycles = 5 }, { op = \"wait\" }]\n",
    )
    .unwrap()
    .compile()
    .unwrap();
    let mut p = MachineParams {
        mes: 1,
        threads_per_me: 1,
        ..MachineParams::default()
    };
    *p.units.get_mut(ixp_sim::Unit::Sram) = Some(ixp_sim::UnitParams {
        latency: Some([20, 20]),
        ..Default::default()
    });
    let r = simulate(&p, &w, LEN).unwrap();
    // 10 + 1 (issue) + 5 = 16 cycles of work; the write is back 11 + 20 = 31 cycles in.
    assert_eq!(r.bounds.rx_demand.compute, 16.0);
    assert_eq!(r.bounds.rx_demand.serial, 31.0);
    let expect = 1.0 / 31.0;
    assert!(
        (r.packets_per_cycle - expect).abs() / expect < 0.01,
        "{}",
        r.packets_per_cycle
    );
    assert_eq!(r.bottleneck, "rx latency hiding");
}
