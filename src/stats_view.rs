//! `zlrouter stats`: reads a running router's Prometheus text and prints a compact summary
//! in the shape of the final table (or the raw text with `--raw`).

use std::collections::BTreeMap;
use std::fmt::Write;

/// One sample: metric name, labels in order, value.
struct Sample<'a> {
    name: &'a str,
    labels: Vec<(&'a str, &'a str)>,
    value: f64,
}

/// Parses the text exposition's sample lines (comments and malformed lines are skipped).
fn samples(text: &str) -> Vec<Sample<'_>> {
    let mut out = Vec::new();
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let Some((head, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(value) = value.parse::<f64>() else {
            continue;
        };
        let (name, labels) = match head.split_once('{') {
            Some((n, rest)) => {
                let body = rest.strip_suffix('}').unwrap_or(rest);
                let labels = body
                    .split("\",")
                    .filter_map(|kv| {
                        let (k, v) = kv.split_once("=\"")?;
                        Some((k, v.trim_end_matches('"')))
                    })
                    .collect();
                (n, labels)
            }
            None => (head, Vec::new()),
        };
        out.push(Sample {
            name,
            labels,
            value,
        });
    }
    out
}

fn label<'a>(s: &Sample<'a>, key: &str) -> &'a str {
    s.labels
        .iter()
        .find(|(k, _)| *k == key)
        .map_or("", |(_, v)| v)
}

/// The summary of a scrape.
pub fn summarize(text: &str) -> String {
    let all = samples(text);
    let scalar = |name: &str| all.iter().find(|s| s.name == name).map_or(0.0, |s| s.value);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "router clock {:.3} s",
        scalar("zlrouter_virtual_time_seconds")
    );
    let mut drops = String::new();
    for s in all
        .iter()
        .filter(|s| s.name == "zlrouter_dropped_packets_total")
    {
        let _ = write!(drops, " {} {}", label(s, "cause"), s.value);
    }
    let _ = writeln!(
        out,
        "received {} forwarded {} marked {} queued {}; dropped:{}",
        scalar("zlrouter_received_packets_total"),
        scalar("zlrouter_forwarded_packets_total"),
        scalar("zlrouter_marked_packets_total"),
        scalar("zlrouter_queued_packets"),
        drops
    );
    let mut ports: BTreeMap<&str, [f64; 4]> = BTreeMap::new();
    for s in &all {
        let slot = match s.name {
            "zlrouter_port_rx_packets_total" => 0,
            "zlrouter_port_tx_packets_total" => 1,
            "zlrouter_port_rx_no_buffer_total"
            | "zlrouter_port_rx_ring_full_total"
            | "zlrouter_port_rx_too_long_total" => 2,
            "zlrouter_port_tx_ring_full_total"
            | "zlrouter_port_tx_no_buffer_total"
            | "zlrouter_port_tx_errors_total"
            | "zlrouter_port_tx_link_gone_total" => 3,
            _ => continue,
        };
        ports.entry(label(s, "port")).or_default()[slot] += s.value;
    }
    for (port, [rx, tx, rxd, txd]) in &ports {
        let _ = writeln!(
            out,
            "port {port:<10} rx {rx} tx {tx} rx_drop {rxd} tx_drop {txd}"
        );
    }
    for s in all
        .iter()
        .filter(|s| s.name == "zlrouter_zombie_estimated_flows")
    {
        let _ = writeln!(
            out,
            "port {:<10} active flows (1/P(t)) {:.1}",
            label(s, "port"),
            s.value
        );
    }
    // The top flows of each port, by rank (`zlrouter flows` shows them in full).
    let mut top: BTreeMap<(&str, u32), (&str, [f64; 3])> = BTreeMap::new();
    for s in &all {
        let slot = match s.name {
            "zlrouter_top_flow_occurrence" => 0,
            "zlrouter_top_flow_relative_occurrence" => 1,
            "zlrouter_top_flow_misbehaving" => 2,
            _ => continue,
        };
        let rank = label(s, "rank").parse().unwrap_or(0);
        top.entry((label(s, "port"), rank))
            .or_insert((label(s, "flow"), [0.0; 3]))
            .1[slot] = s.value;
    }
    for ((port, rank), (flow, [f, rel, bad])) in &top {
        let _ = writeln!(
            out,
            "port {port:<10} top flow {rank:>2} {flow:<36} F {f} F/(TP) {rel:.2}{}",
            if *bad > 0.0 { " misbehaving" } else { "" }
        );
    }
    type Key<'a> = (&'a str, &'a str, &'a str);
    let mut classes: BTreeMap<Key<'_>, [f64; 6]> = BTreeMap::new();
    for s in &all {
        let slot = match s.name {
            "zlrouter_class_enqueued_packets_total" => 0,
            "zlrouter_class_dequeued_packets_total" => 1,
            "zlrouter_class_marked_packets_total" => 2,
            "zlrouter_class_early_drops_total" => 3,
            "zlrouter_class_forced_drops_total" => 4,
            "zlrouter_class_tail_drops_total" => 5,
            _ => continue,
        };
        classes
            .entry((label(s, "port"), label(s, "class"), label(s, "color")))
            .or_default()[slot] += s.value;
    }
    for ((port, class, color), v) in &classes {
        if v.iter().all(|&x| x == 0.0) {
            continue;
        }
        let _ = writeln!(
            out,
            "  {port}/{class}/{color:<6} enqueued {} sent {} marked {} dropped early {} forced {} tail {}",
            v[0], v[1], v[2], v[3], v[4], v[5]
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scrape_is_summarized() {
        let text =
            "# HELP x\nzlrouter_received_packets_total 10\nzlrouter_forwarded_packets_total 7\n\
            zlrouter_dropped_packets_total{cause=\"tail\"} 3\nzlrouter_queued_packets 0\n\
            zlrouter_port_rx_packets_total{port=\"lan\"} 10\n\
            zlrouter_top_flow_occurrence{port=\"wan\",rank=\"1\",flow=\"10.0.9.1 > 192.0.2.10\"} 93\n\
            zlrouter_top_flow_relative_occurrence{port=\"wan\",rank=\"1\",flow=\"10.0.9.1 > 192.0.2.10\"} 4.081\n\
            zlrouter_top_flow_misbehaving{port=\"wan\",rank=\"1\",flow=\"10.0.9.1 > 192.0.2.10\"} 1\n\
            zlrouter_class_tail_drops_total{port=\"wan\",class=\"be\",color=\"green\"} 3\n";
        let s = summarize(text);
        assert!(s.contains("received 10 forwarded 7"), "{s}");
        assert!(s.contains("dropped: tail 3"), "{s}");
        assert!(s.contains("port lan        rx 10"), "{s}");
        assert!(
            s.contains(
                "port wan        top flow  1 10.0.9.1 > 192.0.2.10                F 93 F/(TP) 4.08 misbehaving"
            ),
            "{s}"
        );
        assert!(
            s.contains("wan/be/green  enqueued 0 sent 0 marked 0 dropped early 0 forced 0 tail 3"),
            "{s}"
        );
    }
}
