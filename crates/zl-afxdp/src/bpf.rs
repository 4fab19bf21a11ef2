//! The XDP side of the port: the maps (an XSKMAP per attachment, the router's own addresses
//! shared by all), the program ([`crate::program`]) and its attachment through a BPF link.
//!
//! Map fds are patched into the program's 64-bit immediate loads with `src_reg =
//! BPF_PSEUDO_MAP_FD`, which the verifier replaces by the maps' addresses.
//!
//! The program is attached with `BPF_LINK_CREATE` (not the older netlink attach), so the
//! attachment belongs to the link fd: it goes away when the fd is closed, including when the
//! process dies, and a crashed router never leaves a stale program on the interface.

use std::ffi::c_void;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use std::net::IpAddr;

use crate::error::{classify, AfXdpError, ModeContext, Op};
use crate::program::{self, ProgramMaps};
use crate::XdpMode;

const BPF_MAP_CREATE: u32 = 0;
const BPF_MAP_UPDATE_ELEM: u32 = 2;
const BPF_MAP_DELETE_ELEM: u32 = 3;
const BPF_PROG_TEST_RUN: u32 = 10;
const BPF_MAP_TYPE_HASH: u32 = 1;
const BPF_PROG_LOAD: u32 = 5;
const BPF_LINK_CREATE: u32 = 28;

const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
/// `enum bpf_attach_type` value of `BPF_XDP`.
const BPF_XDP: u32 = 37;
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// One eBPF instruction (`struct bpf_insn`): opcode, dst/src registers in one byte (dst in
/// the low nibble on little-endian hosts), signed offset, signed immediate.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BpfInsn {
    pub code: u8,
    pub regs: u8,
    pub off: i16,
    pub imm: i32,
}

impl BpfInsn {
    pub(crate) const fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Self {
        BpfInsn {
            code,
            regs: (src << 4) | (dst & 0x0f),
            off,
            imm,
        }
    }
}

#[repr(C)]
#[derive(Default)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}

#[repr(C)]
#[derive(Default)]
struct MapElemAttr {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Default)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

#[repr(C)]
#[derive(Default)]
struct LinkCreateAttr {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
}

/// Calls `bpf(cmd, attr, sizeof attr)` and returns the new fd.
fn sys_bpf_fd<A>(cmd: u32, attr: &mut A) -> io::Result<OwnedFd> {
    let ret = sys_bpf(cmd, attr)?;
    // SAFETY: on success these bpf commands return a fresh fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(ret as RawFd) })
}

fn sys_bpf<A>(cmd: u32, attr: &mut A) -> io::Result<i64> {
    // SAFETY: `attr` is a live, initialised `repr(C)` prefix of `union bpf_attr` of exactly
    // `size_of::<A>()` bytes; the kernel zero-extends it and reads nothing beyond. Pointers
    // stored inside it (instructions, license, log buffer) are kept alive by the caller for
    // the duration of the call.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd as libc::c_long,
            attr as *mut A as *mut c_void,
            std::mem::size_of::<A>() as libc::c_long,
        )
    };
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

fn name16(name: &str) -> [u8; 16] {
    let mut out = [0u8; 16];
    let n = name.len().min(15);
    out[..n].copy_from_slice(&name.as_bytes()[..n]);
    out
}

/// The router's own addresses as the XDP program sees them: two hash maps (IPv4, IPv6) shared
/// by every port's program in the process, so an address on any interface is local on all
/// of them, as in the kernel's `local` table.
///
/// The control plane keeps them in sync with the kernel (netlink RTM_NEWADDR / RTM_DELADDR;
/// `zl-netlink` follows them): [`LocalAddrs::insert`] / [`LocalAddrs::remove`] are single
/// `bpf()` map updates, atomic per element for the program, and need no lock here.
#[derive(Debug)]
pub struct LocalAddrs {
    v4: OwnedFd,
    v6: OwnedFd,
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

/// Which frames the program hands to the AF_XDP sockets (`redirect = "transit" | "all"` in
/// an AF_XDP port's config).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Redirect {
    /// Transit unicast IPv4 / IPv6 only; the kernel keeps ARP, NDP, its own addresses,
    /// link-local, multicast and non-IP ([`crate::program`] says why for each).
    #[default]
    Transit,
    /// Every frame, the kernel sees none (a lab port with no kernel control plane behind
    /// it, and raw-frame tests).
    All,
}

/// The program attached to one interface, and the map its sockets register in.
///
/// Dropping it closes the link (detaching the program), then the program and the map.
#[derive(Debug)]
pub struct XdpAttachment {
    link: OwnedFd,
    prog: OwnedFd,
    map: OwnedFd,
    /// Keeps the shared address maps alive as long as a program refers to them.
    _local: Option<std::sync::Arc<LocalAddrs>>,
    ifname: String,
    max_queues: u32,
}

/// Creates an XSKMAP of `max_queues` entries keyed by RX queue index.
fn create_xskmap(ifname: &str, max_queues: u32) -> Result<OwnedFd, AfXdpError> {
    let mut map_attr = MapCreateAttr {
        map_type: BPF_MAP_TYPE_XSKMAP,
        key_size: 4,
        value_size: 4,
        max_entries: max_queues,
        map_name: name16("zlr_xsks"),
        ..Default::default()
    };
    sys_bpf_fd(BPF_MAP_CREATE, &mut map_attr)
        .map_err(|e| classify(Op::CreateXskMap, ifname, ModeContext::None, e))
}

impl XdpAttachment {
    /// Creates the XSKMAP (`max_queues` entries, keyed by RX queue index), loads the program
    /// for `redirect` (with the process's shared [`LocalAddrs`] for `Transit`) and attaches it
    /// to `ifindex` in `mode`.
    pub fn attach(
        ifname: &str,
        ifindex: u32,
        mode: XdpMode,
        redirect: Redirect,
        max_queues: u32,
    ) -> Result<Self, AfXdpError> {
        let map = create_xskmap(ifname, max_queues)?;
        let (insns, local) = match redirect {
            Redirect::All => (program::redirect_all_program(map.as_raw_fd()), None),
            Redirect::Transit => {
                crate::local_sync::ensure_started()?;
                let local = LocalAddrs::shared()?;
                let maps = ProgramMaps {
                    xsks: map.as_raw_fd(),
                    local4: local.v4.as_raw_fd(),
                    local6: local.v6.as_raw_fd(),
                };
                (
                    program::classify_program(maps, program::XDP_PASS),
                    Some(local),
                )
            }
        };
        let prog = load_program(ifname, &insns)?;
        let (flags, ctx) = match mode {
            XdpMode::Generic => (XDP_FLAGS_SKB_MODE, ModeContext::GenericXdp),
            XdpMode::Native => (XDP_FLAGS_DRV_MODE, ModeContext::NativeXdp),
        };
        let mut link_attr = LinkCreateAttr {
            prog_fd: prog.as_raw_fd() as u32,
            target_ifindex: ifindex,
            attach_type: BPF_XDP,
            flags,
        };
        let link = sys_bpf_fd(BPF_LINK_CREATE, &mut link_attr)
            .map_err(|e| classify(Op::AttachProgram, ifname, ctx, e))?;
        Ok(XdpAttachment {
            link,
            prog,
            map,
            _local: local,
            ifname: ifname.to_owned(),
            max_queues,
        })
    }

    /// Points RX queue `queue_id` at the XSK socket `xsk_fd`.
    pub fn register(&self, queue_id: u32, xsk_fd: RawFd) -> Result<(), AfXdpError> {
        if queue_id >= self.max_queues {
            return Err(AfXdpError::Config {
                ifname: self.ifname.clone(),
                reason: format!(
                    "queue {queue_id} is beyond the XSKMAP's {} entries",
                    self.max_queues
                ),
            });
        }
        let key: u32 = queue_id;
        let value: u32 = xsk_fd as u32;
        let mut attr = MapElemAttr {
            map_fd: self.map.as_raw_fd() as u32,
            key: &key as *const u32 as u64,
            value: &value as *const u32 as u64,
            ..Default::default()
        };
        sys_bpf(BPF_MAP_UPDATE_ELEM, &mut attr)
            .map(|_| ())
            .map_err(|e| classify(Op::RegisterSocket, &self.ifname, ModeContext::None, e))
    }

    /// The link's fd (closing it detaches the program).
    pub fn link_fd(&self) -> RawFd {
        self.link.as_raw_fd()
    }

    /// The loaded program's fd.
    pub fn prog_fd(&self) -> RawFd {
        self.prog.as_raw_fd()
    }
}

fn load_program(ifname: &str, insns: &[BpfInsn]) -> Result<OwnedFd, AfXdpError> {
    let license = c"Dual MIT/GPL";
    let mut attr = ProgLoadAttr {
        prog_type: BPF_PROG_TYPE_XDP,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        prog_name: name16("zlr_xdp"),
        expected_attach_type: BPF_XDP,
        ..Default::default()
    };
    match sys_bpf_fd(BPF_PROG_LOAD, &mut attr) {
        Ok(fd) => Ok(fd),
        Err(first) if first.raw_os_error() == Some(libc::EPERM) => {
            Err(classify(Op::LoadProgram, ifname, ModeContext::None, first))
        }
        Err(first) => {
            // Load again with the verifier log on, only to explain the failure.
            let mut log = vec![0u8; 64 * 1024];
            attr.log_level = 1;
            attr.log_size = log.len() as u32;
            attr.log_buf = log.as_mut_ptr() as u64;
            let _ = sys_bpf(BPF_PROG_LOAD, &mut attr);
            let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
            Err(AfXdpError::ProgramRejected {
                log: String::from_utf8_lossy(&log[..end]).trim().to_owned(),
                source: first,
            })
        }
    }
}

#[repr(C)]
#[derive(Default)]
struct TestRunAttr {
    prog_fd: u32,
    retval: u32,
    data_size_in: u32,
    data_size_out: u32,
    data_in: u64,
    data_out: u64,
    repeat: u32,
    duration: u32,
}

/// The classifying program loaded (not attached) with its own maps, to ask the kernel's
/// `BPF_PROG_TEST_RUN` what it does with a frame: the program's tests, run as root.
#[derive(Debug)]
pub struct ProgramProbe {
    prog: OwnedFd,
    _xsks: OwnedFd,
    /// The probe's own address maps (not the shared ones).
    pub local: LocalAddrs,
}

impl ProgramProbe {
    /// Loads [`program::classify_program`] with `XDP_DROP` as its no-socket action, so a
    /// transit frame reads `XDP_DROP` and a frame for the kernel `XDP_PASS`.
    pub fn load() -> Result<Self, AfXdpError> {
        let xsks = create_xskmap("(probe)", 1)?;
        let local = LocalAddrs::create()?;
        let maps = ProgramMaps {
            xsks: xsks.as_raw_fd(),
            local4: local.v4.as_raw_fd(),
            local6: local.v6.as_raw_fd(),
        };
        let prog = load_program(
            "(probe)",
            &program::classify_program(maps, program::XDP_DROP),
        )?;
        Ok(ProgramProbe {
            prog,
            _xsks: xsks,
            local,
        })
    }

    /// The program's action for `frame`.
    pub fn run(&self, frame: &[u8]) -> io::Result<i32> {
        let mut out = vec![0u8; frame.len() + 256];
        let mut attr = TestRunAttr {
            prog_fd: self.prog.as_raw_fd() as u32,
            data_size_in: frame.len() as u32,
            data_size_out: out.len() as u32,
            data_in: frame.as_ptr() as u64,
            data_out: out.as_mut_ptr() as u64,
            repeat: 1,
            ..Default::default()
        };
        sys_bpf(BPF_PROG_TEST_RUN, &mut attr)?;
        Ok(attr.retval as i32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attr_layouts_match_union_bpf_attr() {
        assert_eq!(std::mem::size_of::<LinkCreateAttr>(), 16);
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, log_buf), 32);
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, prog_name), 48);
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, expected_attach_type), 68);
        assert_eq!(std::mem::offset_of!(MapElemAttr, key), 8);
    }
}
