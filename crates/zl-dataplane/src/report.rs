//! The final statistics, printed like `tc -s qdisc`: per port, per class and color with each
//! drop cause, per generator flow group, and the conservation line.

use std::fmt::Write;

use zl_core::Color;

use crate::stats::DropCause;
use crate::view::RouterView;

fn rate(bytes: u64, secs: f64) -> String {
    if secs <= 0.0 {
        return "-".into();
    }
    let bps = bytes as f64 * 8.0 / secs;
    if bps >= 1e9 {
        format!("{:.2}Gbit", bps / 1e9)
    } else if bps >= 1e6 {
        format!("{:.2}Mbit", bps / 1e6)
    } else {
        format!("{:.1}Kbit", bps / 1e3)
    }
}

/// Renders the final table. `secs` is the run's length (for rates).
pub fn render(dp: &dyn RouterView, secs: f64) -> String {
    let mut out = String::new();
    let t = dp.totals();
    let _ = writeln!(out, "== ports (over {secs:.3} s)");
    for p in 0..dp.port_count() {
        let c = dp.port_counters(p);
        let _ = writeln!(
            out,
            "port {:<10} rx {} pkt {} B ({})  tx {} pkt {} B ({})  rx_drop nobuf {} ring {} long {}  tx_drop ring {} nobuf {} err {} gone {}",
            dp.port_name(p),
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
    }
    let _ = writeln!(
        out,
        "\n== egress classes (per color: sent / marks / drops early forced tail; sojourn mean max)"
    );
    for p in 0..dp.port_count() {
        let qos = dp.qos(p);
        let mut any = false;
        for (ci, name) in qos.class_names().iter().enumerate() {
            let Some(cs) = qos.class_stats(ci) else {
                continue;
            };
            let tot = cs.total();
            if tot.arrivals() == 0 && tot.dequeued == 0 {
                continue;
            }
            if !any {
                match dp.estimated_flows(p) {
                    Some(n) => {
                        let _ = writeln!(
                            out,
                            "port {}: active flows (Zombie List, 1/P(t)) {n:.1}",
                            dp.port_name(p)
                        );
                    }
                    None => {
                        let _ = writeln!(out, "port {}:", dp.port_name(p));
                    }
                }
                any = true;
            }
            let _ = writeln!(
                out,
                "  class {:<6} sent {} pkt {} B ({})  backlog {}p {}B",
                name,
                tot.dequeued,
                tot.dequeued_bytes,
                rate(tot.dequeued_bytes, secs),
                cs.len_packets,
                cs.len_bytes
            );
            for color in Color::ALL {
                let k = cs.color(color);
                if k.arrivals() == 0 && k.dequeued == 0 {
                    continue;
                }
                let _ = writeln!(
                    out,
                    "    {:<6} arrived {:>8} sent {:>8} marked {:>6} dropped early {:>6} forced {:>6} tail {:>6}  sojourn mean {:.3} ms max {:.3} ms",
                    color.name(),
                    k.arrivals(),
                    k.dequeued,
                    k.marks,
                    k.early_drops,
                    k.forced_drops,
                    k.tail_drops,
                    k.sojourn.mean().as_millis_f64(),
                    k.sojourn.max_ns as f64 * 1e-6
                );
            }
        }
    }
    if !dp.groups().is_empty() {
        let _ = writeln!(out, "\n== generator flow groups");
        let _ = writeln!(
            out,
            "  {:<14} {:>5} {:>10} {:>10} {:>10} {:>8} {:>8}  label",
            "group", "flows", "offered", "forwarded", "dropped", "drop%", "marked"
        );
        for g in dp.groups() {
            let _ = writeln!(
                out,
                "  {:<14} {:>5} {:>10} {:>10} {:>10} {:>7.2}% {:>8}  {}",
                g.name,
                g.flows,
                g.fate.received,
                g.fate.forwarded,
                g.fate.dropped(),
                100.0 * g.fate.drop_ratio(),
                g.fate.marked,
                if g.misbehaving { "misbehaving" } else { "" }
            );
        }
    }
    let _ = writeln!(out, "\n== fate of every received packet");
    let mut causes = String::new();
    for c in DropCause::ALL {
        let _ = write!(causes, " {} {}", c.name(), t.drops_of(c));
    }
    let _ = writeln!(
        out,
        "received {} = forwarded {} + dropped {} ({}) + queued {}   marked {}",
        t.received,
        t.forwarded,
        t.dropped(),
        causes.trim_start(),
        dp.queued(),
        t.marked
    );
    out
}
