//! Fuzzes the drop capture's pcapng writer (`zl_dataplane::capture`) by round trip: port and
//! class names (the comments' words), a snap length and up to 64 records (cause or mark,
//! ports, class, color, time, frame) decoded from the input go through a `CaptureTap` and its
//! `CaptureWriter` thread into a file, which is read back with `pcap-file`'s pcapng reader.
//!
//! Checked: no panic; the file is one interface (Ethernet, the snap length) and one packet
//! block per record, in order, each with the record's time (decoded at the interface's
//! `if_tsresol`, as Wireshark and tshark read it), its original length, its first `snap_len`
//! bytes and the comment `cause=.. in=.. [out=.. [class=..]] [color=..]`.
#![no_main]

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketOption;
use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption;
use pcap_file::pcapng::{Block, PcapNgReader};
use pcap_file::DataLink;
use zl_core::{Color, Nanos};
use zl_dataplane::capture::{CaptureParams, CaptureWriter};
use zl_dataplane::DropCause;
use zl_port::BufPool;

fn dir() -> &'static PathBuf {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let base = if std::path::Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        let d = base.join(format!("zl-fuzz-capture-{}", std::process::id()));
        std::fs::create_dir_all(&d).expect("the scratch directory can be created");
        d
    })
}

/// Reads the input front to back; zeros once it is used up.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn u8(&mut self) -> u8 {
        let (&b, rest) = self.0.split_first().unwrap_or((&0, &[]));
        self.0 = rest;
        b
    }
    fn bytes(&mut self, n: usize) -> &[u8] {
        let (a, b) = self.0.split_at(n.min(self.0.len()));
        self.0 = b;
        a
    }
    fn name(&mut self) -> String {
        let n = usize::from(self.u8() % 24);
        String::from_utf8_lossy(self.bytes(n)).into_owned()
    }
}

struct Record {
    cause: Option<DropCause>,
    in_port: u16,
    out_port: u16,
    at: Option<(usize, Color)>,
    time: Nanos,
    frame: Vec<u8>,
}

/// The comment the writer gives `r` (the format `capture.rs` and docs/operations.md state).
fn comment(r: &Record, ports: &[String], classes: &[Vec<String>]) -> String {
    let port = |p: u16| {
        ports
            .get(usize::from(p))
            .cloned()
            .unwrap_or_else(|| p.to_string())
    };
    let name = r.cause.map_or("marked", DropCause::name);
    let mut c = format!("cause={name} in={}", port(r.in_port));
    let routed = !matches!(
        r.cause,
        Some(DropCause::ParseError | DropCause::NoRoute | DropCause::TtlExpired)
    );
    if routed {
        c.push_str(&format!(" out={}", port(r.out_port)));
        if let Some((k, _)) = r.at {
            let k = k.min(255);
            let class = classes
                .get(usize::from(r.out_port))
                .and_then(|cs| cs.get(k))
                .cloned()
                .unwrap_or_else(|| k.to_string());
            c.push_str(&format!(" class={class}"));
        }
    }
    if let Some((_, color)) = r.at {
        c.push_str(&format!(" color={}", color.name()));
    }
    c
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data);
    let snap_len = 64 + u32::from(input.u8()) * 8;
    let ports: Vec<String> = (0..1 + input.u8() % 4).map(|_| input.name()).collect();
    let classes: Vec<Vec<String>> = (0..ports.len())
        .map(|_| (0..input.u8() % 4).map(|_| input.name()).collect())
        .collect();
    let mut records = Vec::new();
    while !input.0.is_empty() && records.len() < 64 {
        let c = input.u8();
        let cause = DropCause::ALL.get(usize::from(c % 11)).copied();
        let (in_port, out_port) = (u16::from(input.u8() % 6), u16::from(input.u8() % 6));
        let (k, color) = (input.u8(), input.u8());
        let color = [Color::Green, Color::Yellow, Color::Red][usize::from(color % 3)];
        // A mark always has its class; a drop has one when the egress decided it.
        let at = (cause.is_none() || k & 0x80 != 0).then_some((usize::from(k & 0x7f) * 3, color));
        let mut t = [0u8; 8];
        t.copy_from_slice(&{
            let b = input.bytes(8);
            let mut a = [0u8; 8];
            a[..b.len()].copy_from_slice(b);
            a
        });
        let len = usize::from(u16::from_le_bytes([input.u8(), input.u8()])) % 2049;
        let mut frame = input.bytes(len).to_vec();
        frame.resize(len, 0xa5);
        records.push(Record {
            cause,
            in_port,
            out_port,
            at,
            time: Nanos(u64::from_le_bytes(t)),
            frame,
        });
    }

    let params = CaptureParams {
        file: "drops.pcapng".into(),
        causes: None,
        marked: true,
        snap_len,
        rate_pps: None,
        rotate_bytes: None,
        // As many slots as records at most: the tap never finds the ring full.
        ring: 64,
    };
    let (mut tap, mut writer) =
        CaptureWriter::start(&params, dir(), ports.clone(), classes.clone())
            .expect("the capture starts");
    let mut pool = BufPool::new(1, 2048);
    for r in &records {
        let mut buf = pool.alloc().expect("one buffer, given back each time");
        buf.copy_from(&r.frame).expect("frames fit 2048 bytes");
        buf.in_port = r.in_port;
        buf.out_port = r.out_port;
        tap.set_clock(r.time);
        match r.cause {
            Some(cause) => tap.dropped(&buf, cause, r.at),
            None => {
                let (k, color) = r.at.expect("a mark has its class");
                tap.marked(&buf, k, color)
            }
        }
        pool.free(buf);
    }
    writer.close();
    let stats = writer.stats();
    assert_eq!(stats.written, records.len() as u64, "{stats:?}");
    assert_eq!(stats.overflow + stats.write_errors, 0, "{stats:?}");

    let file = std::fs::File::open(dir().join("drops.pcapng")).expect("the capture exists");
    let mut reader = PcapNgReader::new(file).expect("a pcapng section header");
    let mut tsresol = None;
    let mut n = 0;
    while let Some(block) = reader.next_block() {
        match block.expect("every block reads back") {
            Block::InterfaceDescription(idb) => {
                assert!(tsresol.is_none(), "one interface");
                assert_eq!(idb.linktype, DataLink::ETHERNET);
                assert_eq!(idb.snaplen, snap_len);
                // pcapng §4.2: without if_tsresol, timestamps are in microseconds.
                let mut r = 6u8;
                for o in &idb.options {
                    if let InterfaceDescriptionOption::IfTsResol(v) = o {
                        r = *v;
                    }
                }
                tsresol = Some(r);
            }
            Block::EnhancedPacket(epb) => {
                let r = tsresol.expect("the interface before its packets");
                assert!(r <= 9, "if_tsresol {r}: coarser than 10^-9 s expected");
                let rec = records.get(n).expect("no more packets than records");
                // pcap-file hands the 64-bit timestamp over as nanoseconds, unscaled.
                let units = epb.timestamp.as_nanos();
                let ns = units * 10u128.pow(9 - u32::from(r));
                assert_eq!(ns, u128::from(rec.time.0), "record {n}'s time");
                assert_eq!(epb.interface_id, 0);
                assert_eq!(epb.original_len as usize, rec.frame.len());
                let kept = rec.frame.len().min(snap_len as usize);
                assert_eq!(&epb.data[..], &rec.frame[..kept], "record {n}'s bytes");
                let comments: Vec<&Cow<str>> = epb
                    .options
                    .iter()
                    .filter_map(|o| match o {
                        EnhancedPacketOption::Comment(c) => Some(c),
                        _ => None,
                    })
                    .collect();
                assert_eq!(comments.len(), 1, "record {n}: one comment");
                assert_eq!(comments[0].as_ref(), comment(rec, &ports, &classes));
                n += 1;
            }
            // Padding that keeps page boundaries between blocks (`capture::padding`).
            Block::Unknown(u) if u.type_ == zl_dataplane::capture::PAD_BLOCK_TYPE => {}
            other => panic!("an unexpected block {other:?}"),
        }
    }
    assert_eq!(n, records.len(), "every record is in the file");
});
