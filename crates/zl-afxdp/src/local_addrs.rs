//! [`LocalAddrs`]: the router's own addresses in the two hash maps the XDP program looks
//! frames up in. Kept equal to the kernel's by [`crate::local_sync`], read by the program that
//! [`crate::bpf`] loads.

use std::io;
use std::net::IpAddr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::bpf_sys::{
    name16, sys_bpf, sys_bpf_fd, MapCreateAttr, MapElemAttr, BPF_MAP_CREATE, BPF_MAP_DELETE_ELEM,
    BPF_MAP_UPDATE_ELEM,
};
use crate::error::{classify, AfXdpError, ModeContext, Op};

const BPF_MAP_TYPE_HASH: u32 = 1;

/// The router's own addresses as the XDP program sees them: two hash maps (IPv4, IPv6) shared
/// by every port's program in the process, so an address on any interface is local on all
/// of them, as in the kernel's `local` table.
///
/// The control plane keeps them in sync with the kernel (netlink RTM_NEWADDR / RTM_DELADDR;
/// `zl-netlink` follows them): [`LocalAddrs::insert`] / [`LocalAddrs::remove`] are single
/// `bpf()` map updates, atomic per element for the program, and need no lock here.
#[derive(Debug)]
pub struct LocalAddrs {
    pub(crate) v4: OwnedFd,
    pub(crate) v6: OwnedFd,
}

/// Capacity of each address map: more than any router's own addresses.
pub const LOCAL_ADDRS_MAX: u32 = 4096;

static SHARED_LOCAL_ADDRS: std::sync::OnceLock<std::sync::Arc<LocalAddrs>> =
    std::sync::OnceLock::new();

impl LocalAddrs {
    /// Creates two empty maps (not the process-wide ones; see [`LocalAddrs::shared`]).
    pub fn create() -> Result<Self, AfXdpError> {
        let make = |name: &str, key_size: u32| {
            let mut attr = MapCreateAttr {
                map_type: BPF_MAP_TYPE_HASH,
                key_size,
                value_size: 1,
                max_entries: LOCAL_ADDRS_MAX,
                map_name: name16(name),
                ..Default::default()
            };
            sys_bpf_fd(BPF_MAP_CREATE, &mut attr)
                .map_err(|e| classify(Op::CreateXskMap, "(local addresses)", ModeContext::None, e))
        };
        Ok(LocalAddrs {
            v4: make("zlr_local4", 4)?,
            v6: make("zlr_local6", 16)?,
        })
    }

    /// The maps every port of this process uses, created on first use.
    pub fn shared() -> Result<std::sync::Arc<LocalAddrs>, AfXdpError> {
        if let Some(l) = SHARED_LOCAL_ADDRS.get() {
            return Ok(l.clone());
        }
        let made = std::sync::Arc::new(LocalAddrs::create()?);
        // A racing creator may have won; either set of maps is empty and equivalent.
        Ok(SHARED_LOCAL_ADDRS.get_or_init(|| made).clone())
    }

    /// Marks `addr` as one of the router's own: frames to it pass to the kernel.
    pub fn insert(&self, addr: IpAddr) -> io::Result<()> {
        let one: u8 = 1;
        self.update(addr, |fd, key| {
            let mut attr = MapElemAttr {
                map_fd: fd as u32,
                key,
                value: &one as *const u8 as u64,
                ..Default::default()
            };
            sys_bpf(BPF_MAP_UPDATE_ELEM, &mut attr).map(|_| ())
        })
    }

    /// Forgets `addr` (no error when it was not there).
    pub fn remove(&self, addr: IpAddr) -> io::Result<()> {
        self.update(addr, |fd, key| {
            let mut attr = MapElemAttr {
                map_fd: fd as u32,
                key,
                ..Default::default()
            };
            match sys_bpf(BPF_MAP_DELETE_ELEM, &mut attr) {
                Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(()),
                r => r.map(|_| ()),
            }
        })
    }

    fn update(&self, addr: IpAddr, f: impl FnOnce(RawFd, u64) -> io::Result<()>) -> io::Result<()> {
        match addr {
            IpAddr::V4(a) => {
                let key = a.octets();
                f(self.v4.as_raw_fd(), key.as_ptr() as u64)
            }
            IpAddr::V6(a) => {
                let key = a.octets();
                f(self.v6.as_raw_fd(), key.as_ptr() as u64)
            }
        }
    }
}
