//! Bridge mode: frames cross between the ports of a pair unchanged (non-IP frames included),
//! in both directions; only AQM marks would change them.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use pcap_file::pcap::{PcapPacket, PcapReader, PcapWriter};
use zl_core::Nanos;
use zl_dataplane::{build, NoObserver, RouterConfig};
use zl_testkit::config::{ClassToml, PortToml, QosToml, RouterToml};

fn frames(tag: u8) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for i in 0..20u8 {
        let mut f = vec![0u8; 60];
        f[0..6].copy_from_slice(&[0xff; 6]);
        f[6..12].copy_from_slice(&[2, 0, 0, 0, tag, i]);
        if i % 2 == 0 {
            // ARP: not IP, still bridged.
            f[12..14].copy_from_slice(&[0x08, 0x06]);
        } else {
            f[12..14].copy_from_slice(&[0x08, 0x00]);
            let ip = &mut f[14..34];
            ip[0] = 0x45;
            ip[1] = 0x02;
            ip[2..4].copy_from_slice(&46u16.to_be_bytes());
            ip[8] = 1; // TTL 1: a router would drop it, a bridge does not look.
            ip[9] = 17;
            ip[12..16].copy_from_slice(&[10, 0, tag, i]);
            ip[16..20].copy_from_slice(&[10, 1, 0, 1]);
            let sum = zl_wire::checksum::checksum(ip);
            ip[10..12].copy_from_slice(&sum.to_be_bytes());
        }
        out.push(f);
    }
    out
}

fn write(path: &PathBuf, frames: &[Vec<u8>]) {
    let mut w = PcapWriter::new(std::fs::File::create(path).unwrap()).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.write_packet(&PcapPacket::new(
            Duration::from_millis(i as u64),
            f.len() as u32,
            f,
        ))
        .unwrap();
    }
}

fn read(path: &PathBuf) -> Vec<Vec<u8>> {
    let mut r = PcapReader::new(std::fs::File::open(path).unwrap()).unwrap();
    let mut out = Vec::new();
    while let Some(p) = r.next_packet() {
        out.push(p.unwrap().data.into_owned());
    }
    out
}

#[test]
fn bridged_frames_cross_unchanged_both_ways() {
    let dir = zl_testkit::scratch("bridge-test");
    write(&dir.join("a-in.pcap"), &frames(1));
    write(&dir.join("b-in.pcap"), &frames(2));
    let text = RouterToml::new()
        .bridge(&[("a", "b")])
        .port(PortToml::pcap(
            "a",
            "02:00:00:00:00:0a",
            "a-in.pcap",
            "a-out.pcap",
        ))
        .port(PortToml::pcap(
            "b",
            "02:00:00:00:00:0b",
            "b-in.pcap",
            "b-out.pcap",
        ))
        .qos(
            QosToml::new()
                .set("link_rate_bps", 1_000_000_000)
                .class(ClassToml::new("be").weight(1)),
        )
        .to_toml();
    let cfg = RouterConfig::from_toml(&text).unwrap();
    let mut dp = build(&cfg, &dir).unwrap();
    dp.run_virtual(
        Nanos::from_secs(1),
        Nanos::from_secs(1),
        &AtomicBool::new(false),
        Nanos::from_secs(1),
        &mut NoObserver,
    )
    .unwrap();
    let t = dp.totals();
    assert_eq!((t.received, t.forwarded, t.dropped()), (40, 40, 0));
    assert_eq!(read(&dir.join("b-out.pcap")), frames(1), "a -> b unchanged");
    assert_eq!(read(&dir.join("a-out.pcap")), frames(2), "b -> a unchanged");
}
