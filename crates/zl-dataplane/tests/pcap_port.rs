//! The pcap port: replay timing, and malformed files as typed errors (never a panic).

use std::path::Path;
use std::time::Duration;

use pcap_file::pcap::{PcapPacket, PcapWriter};
use zl_core::Nanos;
use zl_dataplane::port::{PcapParams, PcapPort};
use zl_port::{Batch, BufPool, Port, PortError, Readiness};
use zl_testkit::config::{ClassToml, PortToml, QosToml, RouterToml};
use zl_testkit::scratch;

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
    let d = scratch("pcap-replay");
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
    let d = scratch("pcap-garbage");
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
    let d = scratch("pcap-truncated");
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
    let d = scratch("pcap-truncated-run");
    let path = d.join("cut.pcap");
    write(&path, &[0, 10, 20, 30]);
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 30]).unwrap();
    let text = RouterToml::new()
        .bridge(&[("a", "b")])
        .port(PortToml::pcap_reader("a", "02:00:00:00:00:0a", "cut.pcap"))
        .port(PortToml::sink("b", "02:00:00:00:00:0b"))
        .qos(
            QosToml::new()
                .set("link_rate_bps", 1_000_000_000)
                .class(ClassToml::new("be").weight(1)),
        )
        .to_toml();
    let cfg = zl_dataplane::RouterConfig::from_toml(&text).unwrap();
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
    zl_testkit::conservation::assert_conserved(
        t.received,
        t.forwarded,
        t.dropped(),
        dp.queued(),
        format_args!("{t:?}"),
    );
    assert_eq!(dp.buffers_in_use(), 0);
}

/// A capture of `link_type` holding one 60-byte frame.
fn write_linktype(path: &Path, link_type: u32) {
    let header = pcap_file::pcap::PcapHeader {
        datalink: pcap_file::DataLink::from(link_type),
        ..Default::default()
    };
    let mut w = PcapWriter::with_header(std::fs::File::create(path).unwrap(), header).unwrap();
    w.write_packet(&PcapPacket::new(Duration::ZERO, 60, &[0x45; 60]))
        .unwrap();
}

/// Raw IP, Linux cooked and radiotap captures are refused, naming the link type: accepted,
/// every frame of them would be a `parse_error`.
#[test]
fn a_capture_that_is_not_ethernet_is_refused_naming_its_link_type() {
    let d = scratch("pcap-linktype");
    for (lt, name) in [
        (101, "raw IP"),
        (113, "Linux cooked"),
        (127, "radiotap"),
        (228, "raw IPv4"),
        (147, "link type 147"),
    ] {
        write_linktype(&d.join("in.pcap"), lt);
        match open(&d, "in.pcap") {
            Err(PortError::BadInput { detail, .. }) => {
                assert!(detail.contains(&format!("link type {lt}")), "{detail}");
                assert!(detail.contains(name), "{detail}");
                assert!(detail.contains("only Ethernet"), "{detail}");
            }
            other => panic!("link type {lt}: expected BadInput, got {other:?}"),
        }
    }
    write_linktype(&d.join("in.pcap"), 1);
    assert!(open(&d, "in.pcap").is_ok());
}

/// `zlrouter check` must not create (or truncate) any output capture. Opened with
/// `FileAccess::CheckOnly` the port leaves an existing capture's bytes alone and creates no new
/// file or directory, yet still refuses an output path it could not create.
#[test]
fn checking_a_port_writes_nothing() {
    use zl_dataplane::port::FileAccess;
    let d = scratch("pcap-check-only");
    let out = d.join("out.pcap");
    write(&out, &[0, 10, 20, 30]);
    let before = std::fs::read(&out).unwrap();
    let params = |w: &str| PcapParams {
        read: None,
        write: Some(w.into()),
    };
    let port = PcapPort::open_with("p", 0, &params("out.pcap"), &d, FileAccess::CheckOnly);
    assert!(port.is_ok(), "{port:?}");
    drop(port);
    assert_eq!(std::fs::read(&out).unwrap(), before, "the capture changed");
    let port = PcapPort::open_with("p", 0, &params("new/dir/x.pcap"), &d, FileAccess::CheckOnly);
    assert!(port.is_ok(), "{port:?}");
    drop(port);
    assert!(!d.join("new").exists(), "check created a directory");
    // A path under a regular file can never be created: refused at check.
    let r = PcapPort::open_with(
        "p",
        0,
        &params("out.pcap/x.pcap"),
        &d,
        FileAccess::CheckOnly,
    );
    assert!(r.is_err(), "{r:?}");
    let r = PcapPort::open_with("p", 0, &params("."), &d, FileAccess::CheckOnly);
    assert!(r.is_err(), "{r:?}");
}

/// Frames on the output capture: `n` frames of `len` bytes sent at `at`.
fn send_frames(port: &mut PcapPort, pool: &mut BufPool, at: Nanos, n: usize, len: usize) -> usize {
    let mut batch = Batch::new();
    for i in 0..n {
        let mut b = pool.alloc().unwrap();
        b.copy_from(&vec![i as u8; len]).unwrap();
        batch.push(b).unwrap();
    }
    port.send(at, &mut batch, pool).unwrap_or(0)
}

/// The output capture holds whole records at every moment: each write to the file ends on a
/// record boundary, so that a killed router leaves no capture "cut short in the middle of a
/// packet". Checked after every send of frames of an awkward size, while the
/// port is still open, by parsing the file as it is on disk.
#[test]
fn the_output_capture_on_disk_always_ends_at_a_whole_record() {
    let d = scratch("pcap-whole-records");
    let params = PcapParams {
        read: None,
        write: Some("out.pcap".into()),
    };
    let mut port = PcapPort::open("p", 0, &params, &d).unwrap();
    let mut pool = BufPool::new(64, 2048);
    let mut on_disk_max = 0;
    for round in 0..200u64 {
        let sent = send_frames(
            &mut port,
            &mut pool,
            Nanos::from_micros(round * 100),
            32,
            1001,
        );
        assert_eq!(sent, 32);
        let bytes = std::fs::read(d.join("out.pcap")).unwrap();
        let mut r = pcap_file::pcap::PcapReader::new(&bytes[..]).expect("the header is written");
        let mut n = 0;
        while let Some(p) = r.next_packet() {
            let p = p.unwrap_or_else(|e| panic!("round {round}: {e} after {n} records"));
            assert_eq!(p.data.len(), 1001);
            n += 1;
        }
        on_disk_max = on_disk_max.max(n);
    }
    assert!(on_disk_max > 0, "nothing reached the file before the flush");
    port.flush().unwrap();
    let bytes = std::fs::read(d.join("out.pcap")).unwrap();
    assert_eq!(bytes.len(), 24 + 200 * 32 * (16 + 1001));
    assert_eq!(port.counters().tx_packets, 200 * 32);
}

/// A write that fails (a full device) is reported once with the OS's reason and the file's
/// name, and the frames it held are `tx_errors`, not `tx_packets`. Before, the message was
/// pcap-file's "Error reading bytes".
#[test]
fn a_full_device_is_a_clear_error_and_counted() {
    if !Path::new("/dev/full").exists() {
        return;
    }
    let params = PcapParams {
        read: None,
        write: Some("/dev/full".into()),
    };
    // The 24-byte header is written at open: refused there.
    let e = PcapPort::open("p", 0, &params, Path::new("/")).unwrap_err();
    let text = e.to_string();
    assert!(text.contains("No space left on device"), "{text}");
    assert!(!text.contains("Error reading bytes"), "{text}");
}
