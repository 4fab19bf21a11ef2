//! The drop capture's timestamps as a pcapng reader reads them (found by the fuzz target
//! `capture_roundtrip`): pcap-file writes a packet block's 64-bit time in nanoseconds, and
//! without an `if_tsresol` option on the interface, pcapng (§4.2) and every reader (Wireshark,
//! tshark) take it as microseconds, so each drop appeared 1000 times later than it happened.

use std::path::PathBuf;

use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption;
use pcap_file::pcapng::{Block, PcapNgReader};
use zl_core::{Color, Nanos};
use zl_dataplane::capture::{CaptureParams, CaptureWriter};
use zl_dataplane::DropCause;
use zl_port::BufPool;
use zl_testkit::scratch;

const TIMES: [u64; 3] = [1_500_000_123, 7, 86_400_000_000_001];

fn write_drops(dir: &std::path::Path) -> PathBuf {
    let params = CaptureParams {
        file: "drops.pcapng".into(),
        causes: None,
        marked: false,
        snap_len: 65535,
        rate_pps: None,
        rotate_bytes: None,
        ring: 16,
    };
    let (mut tap, mut writer) = CaptureWriter::start(
        &params,
        dir,
        vec!["lan".into(), "wan".into()],
        vec![vec![], vec!["be".into()]],
    )
    .unwrap();
    let mut pool = BufPool::new(1, 2048);
    for t in TIMES {
        let mut buf = pool.alloc().unwrap();
        buf.copy_from(&[0u8; 60]).unwrap();
        buf.out_port = 1;
        tap.set_clock(Nanos(t));
        tap.dropped(&buf, DropCause::Early, Some((0, Color::Green)));
        pool.free(buf);
    }
    writer.close();
    assert_eq!(writer.stats().written, TIMES.len() as u64);
    dir.join("drops.pcapng")
}

#[test]
fn packet_times_read_back_in_nanoseconds_at_the_interfaces_resolution() {
    let path = write_drops(&scratch("reader"));
    let mut reader = PcapNgReader::new(std::fs::File::open(&path).unwrap()).unwrap();
    let mut resolution = None;
    let mut times = Vec::new();
    while let Some(block) = reader.next_block() {
        match block.unwrap() {
            Block::InterfaceDescription(idb) => {
                // pcapng §4.2: no if_tsresol means 10^-6 s.
                let mut r = 6u32;
                for o in &idb.options {
                    if let InterfaceDescriptionOption::IfTsResol(v) = o {
                        r = u32::from(*v);
                    }
                }
                resolution = Some(r);
            }
            Block::EnhancedPacket(epb) => {
                let r = resolution.expect("the interface comes first");
                // pcap-file returns the raw 64-bit count as if it were nanoseconds.
                times.push(epb.timestamp.as_nanos() * 10u128.pow(9 - r));
            }
            _ => {}
        }
    }
    let expected: Vec<u128> = TIMES.iter().map(|&t| u128::from(t)).collect();
    assert_eq!(times, expected, "resolution 10^-{resolution:?} s");
}

/// The same through tshark, when it is installed (CI installs it).
#[test]
fn tshark_reads_the_drop_times() {
    let Ok(out) = std::process::Command::new("tshark")
        .args(["-r"])
        .arg(write_drops(&scratch("tshark")))
        .args(["-T", "fields", "-e", "frame.time_epoch"])
        .output()
    else {
        assert_ne!(
            std::env::var("ZLR_REQUIRE_ENV").as_deref(),
            Ok("1"),
            "tshark is required (ZLR_REQUIRE_ENV=1)"
        );
        eprintln!("SKIPPED: tshark not installed");
        return;
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    let got: Vec<&str> = text.lines().collect();
    assert_eq!(
        got,
        ["1.500000123", "0.000000007", "86400.000000001"],
        "tshark's frame times"
    );
}
