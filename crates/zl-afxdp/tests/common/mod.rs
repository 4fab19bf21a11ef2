//! What the veth tests share: a namespace with a veth pair, frames of a local EtherType or of
//! many UDP flows, and a raw AF_PACKET socket on the peer end. Each test binary uses a part.
#![allow(dead_code)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::{Duration, Instant};

use zl_afxdp::{AfXdpConfig, Redirect};
use zl_testkit::netns::{is_root, skip, Netns};

pub const ETHERTYPE: u16 = 0x88b5;
/// A guard against hanging forever if frames never arrive; never a pass criterion.
pub const GIVE_UP_AFTER: Duration = Duration::from_secs(5);

/// A namespace with the veth pair zx0 <-> zx1, or `None` (with a SKIPPED line on stderr) when
/// this machine cannot make one: not root, or no `ip` / netns support.
pub fn veth_ns(test: &str, tag: &str) -> Option<Netns> {
    if !is_root() {
        skip(test, "needs root (network namespaces, veth, XDP)");
        return None;
    }
    zl_testkit::netns::set_prefix("zlxf");
    match Netns::create(tag).and_then(|ns| ns.add_veth_pair("zx0", "zx1").map(|()| ns)) {
        Ok(ns) => Some(ns),
        Err(e) => {
            skip(
                test,
                &format!("cannot create a namespace with a veth pair: {e}"),
            );
            None
        }
    }
}

/// A port on zx0 whose program redirects every frame: these tests inject raw frames of a
/// local EtherType, which the default program (`redirect = "transit"`) leaves to the kernel.
pub fn raw_cfg() -> AfXdpConfig {
    AfXdpConfig {
        redirect: Redirect::All,
        ..AfXdpConfig::new("zx0")
    }
}

pub fn frame(seq: u32, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    f[12..14].copy_from_slice(&ETHERTYPE.to_be_bytes());
    f[14..18].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in f[18..].iter_mut().enumerate() {
        *b = (i as u8) ^ (seq as u8);
    }
    f
}

/// A 64-byte IPv4/UDP frame from source port 1000 + seq carrying `seq` after a marker.
pub fn udp_frame(seq: u32) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    f[14] = 0x45;
    f[16..18].copy_from_slice(&50u16.to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    f[26..30].copy_from_slice(&[10, 9, 0, 1]);
    f[30..34].copy_from_slice(&[10, 9, 0, 2]);
    f[34..36].copy_from_slice(&(1000 + seq as u16).to_be_bytes());
    f[36..38].copy_from_slice(&9u16.to_be_bytes());
    f[38..40].copy_from_slice(&30u16.to_be_bytes());
    f[42..46].copy_from_slice(b"ZLRQ");
    f[46..50].copy_from_slice(&seq.to_be_bytes());
    f
}

pub fn udp_seq(f: &[u8]) -> Option<u32> {
    (f.len() >= 50 && &f[42..46] == b"ZLRQ")
        .then(|| u32::from_be_bytes([f[46], f[47], f[48], f[49]]))
}

pub fn seq_of(f: &[u8]) -> Option<u32> {
    (f.len() >= 18 && f[12..14] == ETHERTYPE.to_be_bytes())
        .then(|| u32::from_be_bytes([f[14], f[15], f[16], f[17]]))
}

/// A raw AF_PACKET socket on `ifname` for EtherType 0x88B5.
pub struct RawSocket {
    fd: OwnedFd,
    ifindex: i32,
}

impl RawSocket {
    pub fn open(ifname: &str) -> io::Result<Self> {
        let ifindex = zl_afxdp_ifindex(ifname)? as i32;
        let proto = ETHERTYPE.to_be() as i32;
        // SAFETY: plain socket(2); checked below.
        let raw = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW, proto) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fresh fd owned by nobody else.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        let addr = sockaddr_ll(ifindex, ETHERTYPE);
        // SAFETY: `addr` is a valid sockaddr_ll of the size passed.
        let r = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                &addr as *const libc::sockaddr_ll as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(RawSocket { fd, ifindex })
    }

    /// Sends `frame` with the EtherType it carries as the skb protocol, so the stack's flow
    /// hash (and with it the TX queue) sees what is inside.
    pub fn send(&self, frame: &[u8]) -> io::Result<()> {
        let addr = sockaddr_ll(self.ifindex, u16::from_be_bytes([frame[12], frame[13]]));
        // SAFETY: `frame` and `addr` are valid for the sizes passed.
        let r = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                frame.as_ptr().cast(),
                frame.len(),
                0,
                &addr as *const libc::sockaddr_ll as *const libc::sockaddr,
                std::mem::size_of::<libc::sockaddr_ll>() as u32,
            )
        };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    pub fn try_recv(&self, buf: &mut [u8]) -> Option<usize> {
        // SAFETY: `buf` is writable for its length.
        let r = unsafe {
            libc::recv(
                self.fd.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
            )
        };
        (r > 0).then_some(r as usize)
    }
}

pub fn sockaddr_ll(ifindex: i32, ethertype: u16) -> libc::sockaddr_ll {
    libc::sockaddr_ll {
        sll_family: libc::AF_PACKET as u16,
        sll_protocol: ethertype.to_be(),
        sll_ifindex: ifindex,
        sll_hatype: 0,
        sll_pkttype: 0,
        sll_halen: 6,
        sll_addr: [0x02, 0, 0, 0, 0, 0x01, 0, 0],
    }
}

pub fn zl_afxdp_ifindex(ifname: &str) -> io::Result<u32> {
    let c = std::ffi::CString::new(ifname).map_err(io::Error::other)?;
    // SAFETY: valid C string.
    let i = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if i == 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(i)
    }
}

/// Drains the peer's raw socket into `got` until `want` frames are there (bounded).
pub fn collect_at_peer(peer: &RawSocket, got: &mut Vec<u32>, want: usize, mut kick: impl FnMut()) {
    let mut buf = [0u8; 2048];
    let start = Instant::now();
    while got.len() < want && start.elapsed() < GIVE_UP_AFTER {
        kick();
        while let Some(n) = peer.try_recv(&mut buf) {
            got.extend(seq_of(&buf[..n]));
        }
    }
}
