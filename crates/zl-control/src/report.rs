//! The final statistics, printed like `tc -s qdisc`: per port, per class and color with each
//! drop cause, per generator flow group, and the conservation line; read from a
//! [`Snapshot`], as the JSON output and the metrics endpoint are.

use std::fmt::Write;

use crate::snapshot::{DisciplineSnapshot, FlowSnapshot, Snapshot};
use zl_dataplane::DropCause;

fn rate(bytes: u64, secs: f64) -> String {
    if secs <= 0.0 {
        return "-".into();
    }
    bps(bytes as f64 * 8.0 / secs)
}

/// Renders the final table from `snap` (rates over its `time_s`, the run's length).
pub fn render(snap: &Snapshot) -> String {
    let mut out = String::new();
    let secs = snap.time_s;
    let t = &snap.totals;
    let _ = writeln!(out, "== ports (over {secs:.3} s)");
    for c in &snap.ports {
        let _ = writeln!(
            out,
            "port {:<10} rx {} pkt {} B ({})  tx {} pkt {} B ({})  rx_drop nobuf {} ring {} long {}  tx_drop ring {} nobuf {} err {} gone {}",
            c.name,
            c.rx_packets,
            c.rx_bytes,
            rate(c.rx_bytes, secs),
            c.tx_packets,
            c.tx_bytes,
            rate(c.tx_bytes, secs),
            c.rx_no_buffer,
            c.rx_ring_full,
            c.rx_too_long,
            c.tx_ring_full,
            c.tx_no_buffer,
            c.tx_errors,
            c.tx_link_gone
        );
        if c.link_gone_events + c.link_reattached > 0 {
            let _ = writeln!(
                out,
                "  link {}: interface gone {} re-attached {}",
                c.name, c.link_gone_events, c.link_reattached
            );
        }
    }
    let _ = writeln!(
        out,
        "\n== egress classes (per color: sent / marks / drops early forced tail; sojourn mean max)"
    );
    for p in &snap.ports {
        let mut any = false;
        for cs in &p.classes {
            let arrived: u64 = cs.colors.iter().map(|k| k.arrived).sum();
            let sent: u64 = cs.colors.iter().map(|k| k.sent).sum();
            let sent_bytes: u64 = cs.colors.iter().map(|k| k.sent_bytes).sum();
            if arrived == 0 && sent == 0 {
                continue;
            }
            if !any {
                match &p.zombie {
                    Some(z) => {
                        let _ = writeln!(
                            out,
                            "port {}: active flows (Zombie List, 1/P(t)) {:.1}",
                            p.name, z.estimated_flows
                        );
                    }
                    None => {
                        let _ = writeln!(out, "port {}:", p.name);
                    }
                }
                any = true;
            }
            let _ = writeln!(
                out,
                "  class {:<6} sent {} pkt {} B ({})  backlog {}p {}B  aqm {}",
                cs.name,
                sent,
                sent_bytes,
                rate(sent_bytes, secs),
                cs.backlog_packets,
                cs.backlog_bytes,
                cs.aqm
            );
            for k in &cs.colors {
                if k.arrived == 0 && k.sent == 0 {
                    continue;
                }
                // Drops of packets already queued (a discipline's), only where there are any.
                let queued_drops = if k.dequeue_drops + k.overflow_drops > 0 {
                    format!(
                        " dequeue {:>6} overflow {:>6}",
                        k.dequeue_drops, k.overflow_drops
                    )
                } else {
                    String::new()
                };
                let _ = writeln!(
                    out,
                    "    {:<6} arrived {:>8} sent {:>8} marked {:>6} dropped early {:>6} forced {:>6} tail {:>6}{queued_drops} shutdown {:>6}  sojourn mean {:.3} ms max {:.3} ms",
                    k.color,
                    k.arrived,
                    k.sent,
                    k.marked,
                    k.early_drops,
                    k.forced_drops,
                    k.tail_drops,
                    k.shutdown_drops,
                    k.sojourn.mean_s * 1e3,
                    k.sojourn.max_s * 1e3
                );
            }
            if let Some(d) = &cs.discipline {
                render_discipline(&mut out, d);
            }
        }
        if let Some(z) = p.zombie.filter(|z| z.table_full_events > 0) {
            let _ = writeln!(
                out,
                "  zombie list: occurrence table full {} times",
                z.table_full_events
            );
        }
        let c = &p.classifier;
        if c.unmapped + c.unparsed + c.invalid_class > 0 && any {
            let _ = writeln!(
                out,
                "  classifier: unmapped {} unparsed {} invalid_class {}",
                c.unmapped, c.unparsed, c.invalid_class
            );
        }
    }
    if !snap.groups.is_empty() {
        let _ = writeln!(out, "\n== generator flow groups");
        let _ = writeln!(
            out,
            "  {:<14} {:>5} {:>10} {:>10} {:>10} {:>8} {:>8}  label",
            "group", "flows", "offered", "forwarded", "dropped", "drop%", "marked"
        );
        for g in &snap.groups {
            let ratio = if g.offered == 0 {
                0.0
            } else {
                g.dropped as f64 / g.offered as f64
            };
            let _ = writeln!(
                out,
                "  {:<14} {:>5} {:>10} {:>10} {:>10} {:>7.2}% {:>8}  {}",
                g.name,
                g.flows,
                g.offered,
                g.forwarded,
                g.dropped,
                100.0 * ratio,
                g.marked,
                if g.misbehaving { "misbehaving" } else { "" }
            );
        }
    }
    let flows: Vec<(&str, &[FlowSnapshot])> = snap
        .ports
        .iter()
        .filter(|p| !p.top_flows.is_empty())
        .map(|p| (p.name.as_str(), p.top_flows.as_slice()))
        .collect();
    if !flows.is_empty() {
        let _ = writeln!(out);
        out.push_str(&render_flows(&flows, usize::MAX));
    }
    if let Some(c) = &snap.capture {
        let _ = writeln!(
            out,
            "\n== drop capture: written {} in {} file(s); not captured: capture_overflow {} rate_limited {} write_errors {}",
            c.written, c.files, c.overflow, c.rate_limited, c.write_errors
        );
    }
    let _ = writeln!(out, "\n== fate of every received packet");
    let mut causes = String::new();
    for c in DropCause::ALL {
        let _ = write!(causes, " {} {}", c.name(), snap.drops_of(c));
    }
    let in_flight = if t.in_flight != 0 {
        format!(" + in flight {}", t.in_flight)
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "received {} = forwarded {} + dropped {} ({}) + queued {}{in_flight}   marked {}",
        t.received,
        t.forwarded,
        t.dropped,
        causes.trim_start(),
        t.queued,
        t.marked
    );
    let icmp = &snap.icmp;
    let mut sent = String::new();
    for (k, n) in &icmp.sent {
        let _ = write!(sent, " {k} {n}");
    }
    let _ = writeln!(
        out,
        "icmp errors sent {}: {} (extra frames, in the ports' tx)   not sent: rate_limited {} \
         suppressed {} no_source_address {} no_room {}",
        icmp.sent.values().sum::<u64>(),
        sent.trim_start(),
        icmp.rate_limited,
        icmp.suppressed,
        icmp.no_source_address,
        icmp.no_room
    );
    out
}

/// The top flows of each port (at most `top` rows each), as `zlrouter flows` and the final
/// table show them.
/// The state a class's policy keeps, under its class in the table.
fn render_discipline(out: &mut String, d: &DisciplineSnapshot) {
    match d {
        DisciplineSnapshot::Pie {
            drop_prob,
            qdelay_s,
            dequeue_rate_bps,
            burst_allowance_s,
        } => {
            let _ = writeln!(
                out,
                "    pie: drop_prob {:.4} qdelay {:.3} ms dequeue rate {} burst allowance {:.0} ms",
                drop_prob,
                qdelay_s * 1e3,
                bps(*dequeue_rate_bps),
                burst_allowance_s * 1e3
            );
        }
        DisciplineSnapshot::Codel {
            dropping,
            count,
            drops,
            ecn_marks,
        } => {
            let _ = writeln!(
                out,
                "    codel: drops {drops} ecn_marks {ecn_marks} count {count}{}",
                if *dropping { " dropping" } else { "" }
            );
        }
        DisciplineSnapshot::FqCodel {
            isolate,
            new_flow_count,
            drop_overlimit,
            codel_drops,
            ecn_marks,
            new_flows_len,
            old_flows_len,
        } => {
            let _ = writeln!(
                out,
                "    fq-codel ({isolate}): new_flow_count {new_flow_count} drop_overlimit {drop_overlimit} codel drops {codel_drops} ecn_marks {ecn_marks}  new_flows_len {new_flows_len} old_flows_len {old_flows_len}"
            );
        }
        DisciplineSnapshot::DualPi2 {
            base_prob,
            l_queue,
            c_queue,
            l_packets,
            c_packets,
            step_marks,
            coupled_marks,
            classic_marks,
            classic_drops,
            l4s_drops,
        } => {
            let _ = writeln!(
                out,
                "    dualpi2: p' {base_prob:.4} (classic {:.4})  L4S {l_packets} pkt (queued {l_queue}) step marks {step_marks} coupled marks {coupled_marks} drops {l4s_drops}  classic {c_packets} pkt (queued {c_queue}) marks {classic_marks} drops {classic_drops}",
                base_prob * base_prob
            );
        }
        DisciplineSnapshot::Isolation(i) => {
            let _ = writeln!(
                out,
                "    isolation by {}: penalized {} (each held to a fair share of {}: class rate {} / {:.1} flows)  queued normal {} penalty {}  normal queue sojourn mean {:.3} ms max {:.3} ms",
                i.by,
                i.penalized,
                bps(i.fair_share_bps),
                bps(i.class_rate_bps),
                i.flows_estimate,
                i.normal_queue,
                i.penalty_queue,
                i.normal_sojourn_mean_s * 1e3,
                i.normal_sojourn_max_s * 1e3
            );
            let _ = writeln!(
                out,
                "      flagged {} confirmed {} cleared {} released {} box_full {} over_share_drops {} penalty_sent {}  normal queue CoDel drops {} marks {}",
                i.flagged,
                i.confirmed,
                i.cleared,
                i.released,
                i.box_full,
                i.over_share_drops,
                i.penalty_sent,
                i.normal_codel_drops,
                i.normal_codel_marks
            );
            for b in i.boxed.iter().filter(|b| b.state == "penalized") {
                let _ = writeln!(
                    out,
                    "      penalized {:<30} since {:.3} s (flagged {:.3} s)  arriving at {}, sent at {}  queued {}  packets {} dropped {}",
                    b.key.clone().unwrap_or_else(|| format!("id {}", b.id)),
                    b.penalized_s.unwrap_or(0.0),
                    b.flagged_s,
                    bps(b.rate_bps),
                    bps(b.penalized_sent_bps),
                    b.queued,
                    b.penalized_packets,
                    b.penalized_drops
                );
            }
        }
    }
}

/// A rate in bit/s as the table writes rates.
fn bps(v: f64) -> String {
    if v >= 1e9 {
        format!("{:.2}Gbit", v / 1e9)
    } else if v >= 1e6 {
        format!("{:.2}Mbit", v / 1e6)
    } else {
        format!("{:.1}Kbit", v / 1e3)
    }
}

pub fn render_flows(ports: &[(&str, &[FlowSnapshot])], top: usize) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "== top flows by occurrence F in the Zombie List (share F/T; F/(T P(t)) > 1: misbehaving, eq. 4; packets and drops at the egress since first seen)"
    );
    for (name, flows) in ports {
        let _ = writeln!(out, "port {name}:");
        let _ = writeln!(
            out,
            "  {:>2} {:<36} {:>6} {:>7} {:>8} {:<11} {:>9} {:>8} {:>8}  drops by cause",
            "#", "flow", "F", "F/T", "F/(TP)", "", "packets", "dropped", "marked"
        );
        for (i, f) in flows.iter().take(top).enumerate() {
            let name = match (&f.key, &f.group) {
                (Some(k), Some(g)) => format!("{k} [{g}]"),
                (Some(k), None) => k.clone(),
                (None, _) => format!("id {} (not tracked)", f.id),
            };
            let dropped: u64 = f.drops.values().sum();
            let causes: Vec<String> = f
                .drops
                .iter()
                .filter(|(_, &n)| n > 0)
                .map(|(c, n)| format!("{c} {n}"))
                .collect();
            let _ = writeln!(
                out,
                "  {:>2} {:<36} {:>6} {:>7.4} {:>8.2} {:<11} {:>9} {:>8} {:>8}  {}",
                i + 1,
                name,
                f.occurrence,
                f.share,
                f.relative_occurrence,
                match f.penalty.as_deref() {
                    Some("penalized") => "penalized",
                    Some(_) if f.misbehaving => "watched",
                    _ if f.misbehaving => "misbehaving",
                    _ => "",
                },
                f.packets,
                dropped,
                f.marked,
                causes.join(" ")
            );
        }
    }
    out
}
