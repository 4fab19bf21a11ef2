//! The pcap port: replay timing, and malformed files as typed errors (never a panic).

use std::path::{Path, PathBuf};
use std::time::Duration;

use pcap_file::pcap::{PcapPacket, PcapWriter};
use zl_core::Nanos;
use zl_dataplane::port::{PcapParams, PcapPort};
use zl_port::{Batch, BufPool, Port, PortError, Readiness};

fn dir(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write(path: &Path, times_us: &[u64]) {
    let mut w = PcapWriter::new(std::fs::File::create(path).unwrap()).unwrap();
    for (i, &t) in times_us.iter().enumerate() {
        let frame = vec![i as u8; 60];
        w.write_packet(&PcapPacket::new(Duration::from_micros(t), 60, &frame))
            .unwrap();
    }
}

fn open(d: &Path, read: &str) -> Result<PcapPort, PortError> {
    let params = PcapParams {
        read: Some(read.into()),
        write: None,
    };
    PcapPort::open("p", 1, &params, d)
}

#[test]
fn replay_starts_at_zero_and_keeps_the_capture_spacing() {
    let d = dir("pcap-replay");
    write(&d.join("in.pcap"), &[1_000_000, 1_000_250, 1_003_000]);
    let mut port = open(&d, "in.pcap").unwrap();
    let mut pool = BufPool::new(8, 2048);
    let mut batch = Batch::new();
    assert_eq!(port.readiness(), Readiness::NextPacketAt(Nanos::ZERO));
    assert_eq!(port.recv(Nanos(249_999), &mut pool, &mut batch).unwrap(), 1);
    assert_eq!(port.readiness(), Readiness::NextPacketAt(Nanos(250_000)));
    assert_eq!(
        port.recv(Nanos(3_000_000), &mut pool, &mut batch).unwrap(),
        2
    );
    let times: Vec<Nanos> = batch.iter().map(|b| b.rx_time).collect();
    assert_eq!(times, vec![Nanos(0), Nanos(250_000), Nanos(3_000_000)]);
    assert!(batch.iter().all(|b| b.in_port == 1 && b.len() == 60));
    assert_eq!(port.readiness(), Readiness::Exhausted);
}

#[test]
fn a_file_that_is_not_a_pcap_is_a_bad_input_error() {
    let d = dir("pcap-garbage");
    std::fs::write(d.join("junk.pcap"), b"this is not a capture file at all").unwrap();
    match open(&d, "junk.pcap") {
        Err(PortError::BadInput { port, detail }) => {
            assert_eq!(port, "p");
            assert!(detail.contains("not a pcap file"), "{detail}");
        }
        other => panic!("expected BadInput, got {other:?}"),
    }
}

#[test]
fn a_capture_cut_mid_packet_is_an_error_not_a_panic() {
    let d = dir("pcap-truncated");
    let path = d.join("cut.pcap");
    write(&path, &[0, 10, 20]);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 30]).unwrap();
    let mut port = open(&d, "cut.pcap").unwrap();
    let mut pool = BufPool::new(8, 2048);
    let mut batch = Batch::new();
    let r = port.recv(Nanos::from_secs(1), &mut pool, &mut batch);
    assert!(matches!(r, Err(PortError::BadInput { .. })), "{r:?}");
    // The two whole packets before the cut were delivered.
    assert_eq!(batch.len(), 2);
}

#[test]
fn a_truncated_capture_stops_the_run_with_balanced_counters() {
    let d = dir("pcap-truncated-run");
    let path = d.join("cut.pcap");
    write(&path, &[0, 10, 20, 30]);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 30]).unwrap();
    let cfg = zl_dataplane::RouterConfig::from_toml(
        r#"
[forwarding]
mode = "bridge"
bridge = [["a", "b"]]
[[ports]]
name = "a"
kind = "pcap"
mac = "02:00:00:00:00:0a"
pcap = { read = "cut.pcap" }
[[ports]]
name = "b"
kind = "sink"
mac = "02:00:00:00:00:0b"
[qos]
link_rate_bps = 1_000_000_000
[[qos.classes]]
name = "be"
weight = 1
"#,
    )
    .unwrap();
    let mut dp = zl_dataplane::build(&cfg, &d).unwrap();
    let err = dp
        .run_virtual(
            Nanos::from_secs(1),
            Nanos::from_secs(1),
            &std::sync::atomic::AtomicBool::new(false),
            Nanos::from_secs(1),
            &mut zl_dataplane::NoObserver,
        )
        .unwrap_err();
    assert!(matches!(err, PortError::BadInput { .. }), "{err}");
    let t = dp.totals();
    let rx: u64 = dp.port_counters().iter().map(|(_, c)| c.rx_packets).sum();
    assert_eq!(rx, 3, "three whole packets before the cut");
    assert_eq!(t.received, rx);
    assert_eq!(t.received, t.forwarded + t.dropped() + dp.queued());
    assert_eq!(dp.buffers_in_use(), 0);
}
