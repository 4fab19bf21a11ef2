//! The XDP side of the port: the maps (an XSKMAP per attachment, the router's own addresses
//! shared by all: [`LocalAddrs`]), the program ([`crate::program`]) loaded with them, and its
//! attachment through a BPF link.
//!
//! Map fds are patched into the program's 64-bit immediate loads with `src_reg =
//! BPF_PSEUDO_MAP_FD`, which the verifier replaces by the maps' addresses.
//!
//! The program is attached with `BPF_LINK_CREATE` (not the older netlink attach), so the
//! attachment belongs to the link fd: it goes away when the fd is closed, including when the
//! process dies, and a crashed router never leaves a stale program on the interface.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

pub use crate::insn::BpfInsn;
pub use crate::local_addrs::{LocalAddrs, LOCAL_ADDRS_MAX};

use crate::bpf_sys::{
    name16, sys_bpf, sys_bpf_fd, LinkCreateAttr, MapCreateAttr, MapElemAttr, ProgLoadAttr,
    TestRunAttr, BPF_LINK_CREATE, BPF_MAP_CREATE, BPF_MAP_UPDATE_ELEM, BPF_PROG_LOAD,
    BPF_PROG_TEST_RUN,
};
use crate::error::{classify, AfXdpError, ModeContext, Op};
use crate::program::{self, ProgramMaps};
use crate::XdpMode;

const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
/// `enum bpf_attach_type` value of `BPF_XDP`.
const BPF_XDP: u32 = 37;
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

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
