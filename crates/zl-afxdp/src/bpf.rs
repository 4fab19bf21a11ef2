//! The XDP side of the port: an XSKMAP, the redirect program assembled here from raw eBPF
//! instructions, and its attachment through a BPF link.
//!
//! The program is the C function
//! ```c
//! int xdp_sock_prog(struct xdp_md *ctx) {
//!     return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);
//! }
//! ```
//! written as five instructions (`Linux Documentation/bpf/standardization/instruction-set.rst`
//! for the encoding). The XSKMAP's fd is patched into the 64-bit immediate load with
//! `src_reg = BPF_PSEUDO_MAP_FD`, which the verifier replaces by the map's address. A packet on
//! a queue without a socket in the map takes the flags' low bits as the action (XDP_PASS), so
//! the kernel stack still sees it.
//!
//! The program is attached with `BPF_LINK_CREATE` (not the older netlink attach), so the
//! attachment belongs to the link fd: it goes away when the fd is closed, including when the
//! process dies, and a crashed router never leaves a stale program on the interface.

use std::ffi::c_void;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::error::{classify, AfXdpError, ModeContext, Op};
use crate::XdpMode;

const BPF_MAP_CREATE: u32 = 0;
const BPF_MAP_UPDATE_ELEM: u32 = 2;
const BPF_PROG_LOAD: u32 = 5;
const BPF_LINK_CREATE: u32 = 28;

const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
/// `enum bpf_attach_type` value of `BPF_XDP`.
const BPF_XDP: u32 = 37;
const BPF_PSEUDO_MAP_FD: u8 = 1;
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
const XDP_PASS: i32 = 2;
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
/// `offsetof(struct xdp_md, rx_queue_index)`.
const XDP_MD_RX_QUEUE_INDEX: i16 = 16;

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
    const fn new(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Self {
        BpfInsn {
            code,
            regs: (src << 4) | (dst & 0x0f),
            off,
            imm,
        }
    }
}

// Opcodes, built as class | size-or-op | mode-or-source.
const BPF_LD: u8 = 0x00;
const BPF_LDX: u8 = 0x01;
const BPF_ALU64: u8 = 0x07;
const BPF_JMP: u8 = 0x05;
const BPF_W: u8 = 0x00;
const BPF_DW: u8 = 0x18;
const BPF_IMM: u8 = 0x00;
const BPF_MEM: u8 = 0x60;
const BPF_MOV: u8 = 0xb0;
const BPF_K: u8 = 0x00;
const BPF_CALL: u8 = 0x80;
const BPF_EXIT: u8 = 0x90;
const BPF_LDX_MEM_W: u8 = BPF_LDX | BPF_MEM | BPF_W;
const BPF_LD_IMM_DW: u8 = BPF_LD | BPF_DW | BPF_IMM;
const BPF_ALU64_MOV_K: u8 = BPF_ALU64 | BPF_MOV | BPF_K;
const BPF_JMP_CALL: u8 = BPF_JMP | BPF_CALL;
const BPF_JMP_EXIT: u8 = BPF_JMP | BPF_EXIT;

/// The redirect program with `map_fd` patched into its map load.
pub fn redirect_program(map_fd: RawFd) -> [BpfInsn; 6] {
    [
        // r2 = ctx->rx_queue_index (u32 load from r1 = ctx)
        BpfInsn::new(BPF_LDX_MEM_W, 2, 1, XDP_MD_RX_QUEUE_INDEX, 0),
        // r1 = &xsks (ld_imm64 spans two slots; the verifier resolves the fd)
        BpfInsn::new(BPF_LD_IMM_DW, 1, BPF_PSEUDO_MAP_FD, 0, map_fd),
        BpfInsn::new(0, 0, 0, 0, 0),
        // r3 = XDP_PASS: the action when the queue has no socket
        BpfInsn::new(BPF_ALU64_MOV_K, 3, 0, 0, XDP_PASS),
        // r0 = bpf_redirect_map(r1, r2, r3)
        BpfInsn::new(BPF_JMP_CALL, 0, 0, 0, BPF_FUNC_REDIRECT_MAP),
        BpfInsn::new(BPF_JMP_EXIT, 0, 0, 0, 0),
    ]
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

/// The redirect program attached to one interface, and the map its sockets register in.
///
/// Dropping it closes the link (detaching the program), then the program and the map.
#[derive(Debug)]
pub struct XdpAttachment {
    link: OwnedFd,
    prog: OwnedFd,
    map: OwnedFd,
    ifname: String,
    max_queues: u32,
}

impl XdpAttachment {
    /// Creates the XSKMAP (`max_queues` entries, keyed by RX queue index), loads the program
    /// and attaches it to `ifindex` in `mode`.
    pub fn attach(
        ifname: &str,
        ifindex: u32,
        mode: XdpMode,
        max_queues: u32,
    ) -> Result<Self, AfXdpError> {
        let mut map_attr = MapCreateAttr {
            map_type: BPF_MAP_TYPE_XSKMAP,
            key_size: 4,
            value_size: 4,
            max_entries: max_queues,
            map_name: name16("zlr_xsks"),
            ..Default::default()
        };
        let map = sys_bpf_fd(BPF_MAP_CREATE, &mut map_attr)
            .map_err(|e| classify(Op::CreateXskMap, ifname, ModeContext::None, e))?;
        let prog = load_program(ifname, map.as_raw_fd())?;
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

fn load_program(ifname: &str, map_fd: RawFd) -> Result<OwnedFd, AfXdpError> {
    let insns = redirect_program(map_fd);
    let license = c"Dual MIT/GPL";
    let mut attr = ProgLoadAttr {
        prog_type: BPF_PROG_TYPE_XDP,
        insn_cnt: insns.len() as u32,
        insns: insns.as_ptr() as u64,
        license: license.as_ptr() as u64,
        prog_name: name16("zlr_xsk_redir"),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn program_encoding_matches_the_reference_bytes() {
        // The C program of the module doc compiled by clang 14 (-O2 -target bpf, shown by
        // llvm-objdump -d), with its ld_imm64 relocated as libbpf would: src_reg 1
        // (BPF_PSEUDO_MAP_FD) and the map fd, here 7, in the immediate.
        let expected: [[u8; 8]; 6] = [
            [0x61, 0x12, 0x10, 0x00, 0x00, 0x00, 0x00, 0x00],
            [0x18, 0x11, 0x00, 0x00, 0x07, 0x00, 0x00, 0x00],
            [0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00],
            [0xb7, 0x03, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00],
            [0x85, 0x00, 0x00, 0x00, 0x33, 0x00, 0x00, 0x00],
            [0x95, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00],
        ];
        for (insn, want) in redirect_program(7).iter().zip(expected) {
            let mut got = [0u8; 8];
            got[0] = insn.code;
            got[1] = insn.regs;
            got[2..4].copy_from_slice(&insn.off.to_le_bytes());
            got[4..8].copy_from_slice(&insn.imm.to_le_bytes());
            assert_eq!(got, want);
        }
    }

    #[test]
    fn attr_layouts_match_union_bpf_attr() {
        assert_eq!(std::mem::size_of::<LinkCreateAttr>(), 16);
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, log_buf), 32);
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, prog_name), 48);
        assert_eq!(std::mem::offset_of!(ProgLoadAttr, expected_attach_type), 68);
        assert_eq!(std::mem::offset_of!(MapElemAttr, key), 8);
    }
}
