//! Fuzzes the pcap port's reader: any bytes as a capture file to replay.
//!
//! Checked: no panic, no hang. Opening either fails with a typed `PortError` or gives a port
//! whose replay delivers frames until it reports `Exhausted` or an error; every delivered
//! frame fits a pool buffer, time never goes backwards, and the pool gets every buffer back.
#![no_main]

use std::path::PathBuf;
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use zl_core::Nanos;
use zl_dataplane::port::{PcapParams, PcapPort};
use zl_port::{Batch, BufPool, Port, Readiness};

fn path() -> &'static PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let dir = if std::path::Path::new("/dev/shm").is_dir() {
            PathBuf::from("/dev/shm")
        } else {
            std::env::temp_dir()
        };
        dir.join(format!("zl-fuzz-pcap-{}.pcap", std::process::id()))
    })
}

fuzz_target!(|data: &[u8]| {
    let file = path();
    std::fs::write(file, data).expect("the scratch capture is writable");
    let params = PcapParams {
        read: Some(file.clone()),
        write: None,
    };
    let Ok(mut port) = PcapPort::open("fuzz", 0, &params, std::path::Path::new("/")) else {
        return;
    };
    let mut pool = BufPool::new(64, 2048);
    let mut batch = Batch::new();
    let mut last = Nanos::ZERO;
    // Each round delivers at least one record or ends, and the file is finite.
    loop {
        let now = match port.readiness() {
            Readiness::NextPacketAt(t) => t,
            Readiness::Exhausted | Readiness::Live => break,
        };
        assert!(now >= last || now == Nanos::ZERO, "replay time went backwards");
        last = last.max(now);
        let r = port.recv(now, &mut pool, &mut batch);
        for b in batch.drain() {
            assert!(b.len() <= 2048);
            assert!(b.rx_time <= now);
            pool.free(b);
        }
        if r.is_err() {
            break;
        }
    }
    assert_eq!(pool.in_use(), 0, "a buffer was not given back");
});
