//! Classic pcap files (Ethernet, microsecond timestamps) for the tests' inputs and the frames
//! the router's pcap ports and DPDK's `net_pcap` write: through `pcap-file`, so a file a test
//! writes is one Wireshark, tshark and the router read.

use std::path::Path;
use std::time::Duration;

use pcap_file::pcap::{PcapPacket, PcapReader, PcapWriter};

/// Writes `frames` with their timestamps (since the capture's start).
pub fn write(path: &Path, frames: &[(Duration, Vec<u8>)]) {
    let file = std::fs::File::create(path)
        .unwrap_or_else(|e| panic!("create pcap {}: {e}", path.display()));
    let mut w = PcapWriter::new(file).expect("write a pcap header");
    for (t, f) in frames {
        w.write_packet(&PcapPacket::new(*t, f.len() as u32, f))
            .expect("write a pcap record");
    }
}

/// Writes `frames` `gap` apart, the first at 0.
pub fn write_spaced(path: &Path, frames: &[Vec<u8>], gap: Duration) {
    let mut w = PcapWriter::new(
        std::fs::File::create(path)
            .unwrap_or_else(|e| panic!("create pcap {}: {e}", path.display())),
    )
    .expect("write a pcap header");
    for (i, f) in frames.iter().enumerate() {
        w.write_packet(&PcapPacket::new(gap * i as u32, f.len() as u32, f))
            .expect("write a pcap record");
    }
}

/// Every record of the file: its timestamp and its frame.
pub fn read(path: &Path) -> Vec<(Duration, Vec<u8>)> {
    let file =
        std::fs::File::open(path).unwrap_or_else(|e| panic!("open pcap {}: {e}", path.display()));
    let mut r = PcapReader::new(file).expect("read a pcap header");
    let mut out = Vec::new();
    while let Some(p) = r.next_packet() {
        let p = p.expect("read a pcap record");
        out.push((p.timestamp, p.data.into_owned()));
    }
    out
}

/// Every frame of the file, in order, timestamps left out.
pub fn read_frames(path: &Path) -> Vec<Vec<u8>> {
    read(path).into_iter().map(|(_, f)| f).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_written_reads_back() {
        let dir = crate::scratch("testkit-pcap");
        let path = dir.join("t.pcap");
        let frames = vec![vec![1u8; 60], vec![2u8; 1514]];
        write_spaced(&path, &frames, Duration::from_micros(100));
        assert_eq!(read_frames(&path), frames);
        let timed = read(&path);
        assert_eq!(timed[1].0, Duration::from_micros(100));
        write(&path, &[(Duration::from_secs(3), vec![3u8; 64])]);
        assert_eq!(read(&path), vec![(Duration::from_secs(3), vec![3u8; 64])]);
    }
}
